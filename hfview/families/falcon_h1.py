"""Falcon-H1 (FalconH1ForCausalLM: Falcon-H1-0.5B .. 34B) -> llama.cpp `falcon-h1` (the converter's FalconH1Model,
a Mamba2Model).

Every layer runs grouped-query attention (rope, nothing permuted) and a Mamba-2 mixer side by side on the same
normed input, then a SwiGLU. Falcon-H1's muP multipliers are folded into the weights as the converter folds
them, each a value step computed on read in the converter's working dtype (float32 for bfloat16 weights): the
embedding and lm_head by theirs, q / v by attention_in_multiplier, k by key_multiplier then that, o_proj by
attention_out_multiplier, the gate and down projections by mlp_multipliers, out_proj by ssm_out_multiplier, and
in_proj by ssm_in_multiplier then each of its z, x, B, C and dt row segments by one of ssm_multipliers. A and D
as mamba2 presents them ([heads, 1], A = -exp(A_log)), the optional gated norm as [groups, d_ssm / groups].

The converter reads config.json as written (Mamba2Model avoids AutoConfig), so nothing is defaulted: the keys on
which it and transformers would disagree when absent must be stated.
"""
from __future__ import annotations

from pathlib import Path

from ..config import ANY, Harmless
from ..errors import ConfigError
from ..family import Family, Refuse, Tensor, unset
from ..names import GGUF, Keys
from ..params import f32, u32
from ..views import NEG_EXP, RowSegmentsScaled, ValueStep, scaled
from ._parts.state_space import by_mamba_n_groups, clamps_nothing, per_head, squeezed

ARCH = "falcon-h1"

# None: config.json is read as written, as the converter reads it (see the module's docstring)
DEFAULTS = {"falcon_h1": {}}

MULTIPLIERS = ("embedding_multiplier", "lm_head_multiplier", "key_multiplier", "attention_in_multiplier",
               "attention_out_multiplier", "ssm_in_multiplier", "ssm_out_multiplier", "mlp_multipliers",
               "ssm_multipliers")
# the keys both the converter and transformers need, which the converter does not default as the config class
STATED = ("vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads",
          "num_key_value_heads", "head_dim", "max_position_embeddings", "rms_norm_eps", "mamba_d_ssm",
          "mamba_n_heads", "mamba_d_head", "mamba_d_state", "mamba_n_groups", "mamba_d_conv", "mamba_rms_norm",
          *MULTIPLIERS)

READS = frozenset({
    *STATED, "hidden_act", "tie_word_embeddings", "rope_parameters", "rope_scaling", "rope_theta", "mamba_expand",
    "mamba_conv_bias", "mamba_proj_bias", "mamba_norm_before_gate", "projectors_bias", "attention_bias", "mlp_bias",
    "time_step_limit",
})
# the scan's chunk length (the same result in chunks), how many logits a generation step keeps
HARMLESS: Harmless = {"mamba_chunk_size": ANY, "num_logits_to_keep": ANY}


def times(*keys: str):
    """The value steps of a tensor the converter multiplies by these config multipliers, in this order (a key
    "name[i]" names one element of a list)."""
    def steps(h: dict) -> tuple[ValueStep, ...]:
        out = []
        for key in keys:
            name, _, index = key.partition("[")
            out.append(scaled(h[name][int(index[:-1])] if index else h[name], key))
        return tuple(out)
    return steps


def _in_proj_segments(h: dict) -> ValueStep:
    d, gs = h["mamba_d_ssm"], h["mamba_n_groups"] * h["mamba_d_state"]
    bounds = (0, d, 2 * d, 2 * d + gs, 2 * d + 2 * gs, 2 * d + 2 * gs + h["mamba_n_heads"])
    return RowSegmentsScaled("z, x, B, C, dt rows x ssm_multipliers", lambda x: x, bounds=bounds,  # (at() only)
                             factors=tuple(h["ssm_multipliers"]))


_L = "model.layers.{bid}."
TENSORS = (
    Tensor("model.embed_tokens.weight", GGUF.TOKEN_EMBD.weight, steps=times("embedding_multiplier")),
    Tensor("lm_head.weight", GGUF.OUTPUT.weight, steps=times("lm_head_multiplier")),
    Tensor("model.final_layernorm.weight", GGUF.OUTPUT_NORM.weight),
    Tensor(_L + "input_layernorm.weight", GGUF.ATTN_NORM.weight),
    Tensor(_L + "pre_ff_layernorm.weight", GGUF.FFN_NORM),
    Tensor(_L + "self_attn.q_proj.weight", GGUF.ATTN_Q.weight, steps=times("attention_in_multiplier")),
    Tensor(_L + "self_attn.k_proj.weight", GGUF.ATTN_K.weight,
           steps=times("key_multiplier", "attention_in_multiplier")),
    Tensor(_L + "self_attn.v_proj.weight", GGUF.ATTN_V.weight, steps=times("attention_in_multiplier")),
    Tensor(_L + "self_attn.o_proj.weight", GGUF.ATTN_OUT.weight, steps=times("attention_out_multiplier")),
    Tensor(_L + "mamba.in_proj.weight", GGUF.SSM_IN.weight,
           steps=lambda h: (*times("ssm_in_multiplier")(h), _in_proj_segments(h))),
    Tensor(_L + "mamba.conv1d.weight", GGUF.SSM_CONV1D.weight, squeezed),
    Tensor(_L + "mamba.conv1d.bias", GGUF.SSM_CONV1D.bias),
    Tensor(_L + "mamba.dt_bias", GGUF.SSM_DT.bias),
    Tensor(_L + "mamba.A_log", GGUF.SSM_A, per_head, steps=(NEG_EXP,)),
    Tensor(_L + "mamba.D", GGUF.SSM_D, per_head),
    Tensor(_L + "mamba.norm.weight", GGUF.SSM_NORM.weight, by_mamba_n_groups, required=lambda h: h["mamba_rms_norm"]),
    Tensor(_L + "mamba.out_proj.weight", GGUF.SSM_OUT.weight, steps=times("ssm_out_multiplier")),
    Tensor(_L + "feed_forward.gate_proj.weight", GGUF.FFN_GATE.weight, steps=times("mlp_multipliers[0]")),
    Tensor(_L + "feed_forward.up_proj.weight", GGUF.FFN_UP.weight),
    Tensor(_L + "feed_forward.down_proj.weight", GGUF.FFN_DOWN.weight, steps=times("mlp_multipliers[1]")),
)


REFUSE = (
    Refuse("tie_word_embeddings", unset, "llama.cpp would compute the logits from the embedding as scaled by "
           "embedding_multiplier, not lm_head_multiplier"),
    Refuse("time_step_limit", clamps_nothing, "llama.cpp's falcon-h1 does "
           "not clamp the step"),
    Refuse("rope_parameters.rope_type", ("default",), "the converter writes Falcon-H1's rope base only",
           default="default"),
)


def check(h: dict, path: Path) -> None:
    missing = [k for k in STATED if h.get(k) is None]
    if h["rope_parameters"].get("rope_theta") is None:
        missing.append("rope_theta")
    if missing:
        raise ConfigError(f"{path}: {', '.join(missing)} not stated: the converter reads config.json as written and "
                          f"transformers' FalconH1Config defaults them (or the converter fails without them); state them")
    if len(h["mlp_multipliers"]) != 2 or len(h["ssm_multipliers"]) != 5:
        raise ConfigError(f"{path}: mlp_multipliers {h['mlp_multipliers']}, ssm_multipliers {h['ssm_multipliers']}: "
                          f"Falcon-H1 has 2 (gate, down) and 5 (z, x, B, C, dt)")
    if not isinstance(h["mamba_d_head"], int) or h["mamba_n_heads"] * h["mamba_d_head"] != h["mamba_d_ssm"]:
        raise ConfigError(f"{path}: mamba_n_heads {h['mamba_n_heads']} x mamba_d_head {h['mamba_d_head']!r}: the Mamba "
                          f"heads must fill mamba_d_ssm = {h['mamba_d_ssm']} (the converter needs the number)")
    if h["mamba_d_ssm"] % h["mamba_n_groups"]:
        raise ConfigError(f"{path}: mamba_n_groups {h['mamba_n_groups']} does not divide mamba_d_ssm {h['mamba_d_ssm']}")
    wrong = [f"{k} {h[k]!r}" for k, ok in (("hidden_act", "silu"), ("mamba_conv_bias", True), ("mamba_proj_bias", False),
                                            ("projectors_bias", False), ("attention_bias", False), ("mlp_bias", False))
             if k in h and h[k] != ok]
    if h["mamba_rms_norm"] and h.get("mamba_norm_before_gate", True):
        wrong.append(f"mamba_norm_before_gate {h.get('mamba_norm_before_gate', True)!r} with mamba_rms_norm")
    if wrong:
        raise ConfigError(f"{path}: {', '.join(wrong)}: llama.cpp's falcon-h1 computes SiLU, needs the conv1d bias, "
                          f"has no projection biases the converter could scale as transformers does, and gates before "
                          f"the mixer's norm; this checkpoint would run wrong")


def parameters(h: dict, block_count: int, file_type: int) -> list:
    """Mamba2Model's list (its context length, FFN width and head count then set again, keeping their places), then
    FalconH1Model's vocabulary size, KV heads, head widths and rope base."""
    return [u32(Keys.LLM.CONTEXT_LENGTH.format(arch=ARCH), h["max_position_embeddings"]),
            u32(Keys.LLM.EMBEDDING_LENGTH.format(arch=ARCH), h["hidden_size"]),
            u32(Keys.LLM.FEED_FORWARD_LENGTH.format(arch=ARCH), h["intermediate_size"]),
            u32(Keys.Attention.HEAD_COUNT.format(arch=ARCH), h["num_attention_heads"]),
            u32(Keys.LLM.BLOCK_COUNT.format(arch=ARCH), block_count),
            u32(Keys.SSM.CONV_KERNEL.format(arch=ARCH), h["mamba_d_conv"]),
            u32(Keys.SSM.INNER_SIZE.format(arch=ARCH), h["mamba_d_ssm"]),
            u32(Keys.SSM.STATE_SIZE.format(arch=ARCH), h["mamba_d_state"]),
            u32(Keys.SSM.TIME_STEP_RANK.format(arch=ARCH), h["mamba_d_ssm"] // h["mamba_d_head"]),
            u32(Keys.SSM.GROUP_COUNT.format(arch=ARCH), h["mamba_n_groups"]),
            f32(Keys.Attention.LAYERNORM_RMS_EPS.format(arch=ARCH), h["rms_norm_eps"]),
            u32(Keys.General.FILE_TYPE, file_type),
            u32(Keys.LLM.VOCAB_SIZE.format(arch=ARCH), h["vocab_size"]),
            u32(Keys.Attention.HEAD_COUNT_KV.format(arch=ARCH), h["num_key_value_heads"]),
            u32(Keys.Attention.KEY_LENGTH.format(arch=ARCH), h["head_dim"]),
            u32(Keys.Attention.VALUE_LENGTH.format(arch=ARCH), h["head_dim"]),
            f32(Keys.Rope.FREQ_BASE.format(arch=ARCH), h["rope_parameters"]["rope_theta"])]


def vocab(model_dir: Path, h: dict) -> list:
    from hfview.tokenizer.vocab import gpt2_vocab
    return gpt2_vocab(model_dir, h)


FAMILY = Family(
    name="falcon_h1",
    gguf_arch=ARCH,
    architectures=("FalconH1ForCausalLM",),
    defaults=DEFAULTS,
    reads=READS,
    harmless=HARMLESS,
    tensors=TENSORS,
    parameters=parameters,
    vocab=vocab,
    refuse=REFUSE,
    check=check,
)

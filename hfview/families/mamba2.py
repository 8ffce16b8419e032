"""Mamba-2 (Mamba2ForCausalLM: Mamba-Codestral) -> llama.cpp `mamba2` (the converter's Mamba2Model).

The structured multi-head state-space mixer: in_proj yields gate, stream, B, C (n_groups pairs) and a step per
head; a causal depthwise conv1d; one scalar decay per head (A = -exp(A_log), presented [heads, 1], as D);
dt_bias as the dt "projection"'s bias; a gated RMSNorm over each group (presented [groups, d_inner / groups]).
The converter reads config.json as written (not through Mamba2Config) and pads the vocabulary to a multiple of
pad_vocab_size_multiple (16).
"""
from __future__ import annotations

from pathlib import Path

from ..config import ANY, Harmless
from ..errors import ConfigError
from ..family import Family, Refuse, Tensor
from ..names import GGUF, Keys
from ..params import f32, u32
from ..views import NEG_EXP
from ._parts.state_space import by_group, clamps_nothing, mamba2_dims, padded_vocab, per_head, squeezed

# None: config.json is read as written (Mamba2Model avoids AutoConfig); absent keys take the converter's fallbacks.
DEFAULTS = {"mamba2": {}}

READS = frozenset({
    "vocab_size", "pad_vocab_size_multiple", "hidden_size", "d_model", "num_hidden_layers", "n_layer", "expand",
    "intermediate_size", "d_inner", "n_groups", "conv_kernel", "d_conv", "state_size", "d_state", "head_dim",
    "num_heads", "layer_norm_epsilon", "rms_norm_eps", "use_bias", "use_conv_bias", "hidden_act",
    "tie_word_embeddings", "time_step_limit", "time_step_rank", "norm_before_gate",
})
# dt initialisation, residual rescaling at init, the scan's chunk length (the same result in chunks), and
# residual_in_fp32 (half precision only).
HARMLESS: Harmless = {"time_step_min": ANY, "time_step_max": ANY, "time_step_floor": ANY,
    "rescale_prenorm_residual": ANY, "chunk_size": ANY, "residual_in_fp32": ANY}

TENSORS = (
    Tensor("backbone.embeddings.weight", GGUF.TOKEN_EMBD.weight),
    Tensor("backbone.norm_f.weight", GGUF.OUTPUT_NORM.weight),
    Tensor("lm_head.weight", GGUF.OUTPUT.weight, required=False),
    Tensor("backbone.layers.{bid}.norm.weight", GGUF.ATTN_NORM.weight),
    Tensor("backbone.layers.{bid}.mixer.in_proj.weight", GGUF.SSM_IN.weight),
    Tensor("backbone.layers.{bid}.mixer.conv1d.weight", GGUF.SSM_CONV1D.weight, squeezed),
    Tensor("backbone.layers.{bid}.mixer.conv1d.bias", GGUF.SSM_CONV1D.bias),
    Tensor("backbone.layers.{bid}.mixer.dt_bias", GGUF.SSM_DT.bias),
    Tensor("backbone.layers.{bid}.mixer.A_log", GGUF.SSM_A, per_head, steps=(NEG_EXP,)),
    Tensor("backbone.layers.{bid}.mixer.D", GGUF.SSM_D, per_head),
    Tensor("backbone.layers.{bid}.mixer.norm.weight", GGUF.SSM_NORM.weight, by_group),
    Tensor("backbone.layers.{bid}.mixer.out_proj.weight", GGUF.SSM_OUT.weight),
)


REFUSE = (
    Refuse("time_step_limit", clamps_nothing, "llama.cpp's mamba2 does not "
           "clamp the step"),
)


def check(h: dict, path: Path) -> None:
    d = mamba2_dims(h)
    if d["d_inner"] != d["expand"] * d["d_model"] or d["d_inner"] % d["head_dim"]:
        raise ConfigError(f"{path}: inner size {d['d_inner']}: the converter needs expand x hidden "
                          f"({d['expand']} x {d['d_model']}) in whole heads of head_dim {d['head_dim']}")
    if h.get("num_heads", d["d_inner"] // d["head_dim"]) != d["d_inner"] // d["head_dim"]:
        raise ConfigError(f"{path}: num_heads {h['num_heads']}: the converter counts d_inner / head_dim = "
                          f"{d['d_inner'] // d['head_dim']} heads")
    # keys whose absence the converter and Mamba2Config read differently (its default n_groups is 8, the converter's 1)
    missing = [k for k in ("n_groups", "state_size", "head_dim") if k not in h]
    if missing:
        raise ConfigError(f"{path}: {', '.join(missing)} not stated: the converter and transformers default them "
                          f"differently; state them in config.json")
    if padded_vocab({"pad_vocab_size_multiple": 16, **h}) != h["vocab_size"]:
        raise ConfigError(f"{path}: vocab_size {h['vocab_size']}: the converter pads the vocabulary to a multiple of "
                          f"{h.get('pad_vocab_size_multiple', 16)} but not the embedding, and llama.cpp refuses such a file")
    wrong = [f"{k} {h[k]!r}" for k, ok in (("use_bias", False), ("use_conv_bias", True), ("hidden_act", "silu"),
                                            ("norm_before_gate", False)) if k in h and h[k] != ok]
    if wrong:
        raise ConfigError(f"{path}: {', '.join(wrong)}: llama.cpp's mamba2 has no projection biases, needs the "
                          f"conv1d bias, computes SiLU and gates before the norm; this checkpoint would run wrong")


def parameters(h: dict, block_count: int, file_type: int) -> list:
    d = mamba2_dims(h)
    return [u32(Keys.LLM.CONTEXT_LENGTH.format(arch="mamba2"), 2 ** 20),
            u32(Keys.LLM.EMBEDDING_LENGTH.format(arch="mamba2"), d["d_model"]),
            u32(Keys.LLM.FEED_FORWARD_LENGTH.format(arch="mamba2"), 0),
            u32(Keys.Attention.HEAD_COUNT.format(arch="mamba2"), 0),
            u32(Keys.LLM.BLOCK_COUNT.format(arch="mamba2"), block_count),
            u32(Keys.SSM.CONV_KERNEL.format(arch="mamba2"), d["d_conv"]),
            u32(Keys.SSM.INNER_SIZE.format(arch="mamba2"), d["d_inner"]),
            u32(Keys.SSM.STATE_SIZE.format(arch="mamba2"), d["d_state"]),
            u32(Keys.SSM.TIME_STEP_RANK.format(arch="mamba2"), d["d_inner"] // d["head_dim"]),
            u32(Keys.SSM.GROUP_COUNT.format(arch="mamba2"), d["n_group"]),
            f32(Keys.Attention.LAYERNORM_RMS_EPS.format(arch="mamba2"), d["eps"]),
            u32(Keys.General.FILE_TYPE, file_type)]


def vocab(model_dir: Path, h: dict) -> list:
    """tokenizer.model's SentencePiece (Mamba-Codestral), else tokenizer.json's byte-level BPE, as
    Mamba2Model.set_vocab picks."""
    from hfview.tokenizer.vocab import gpt2_vocab, sentencepiece_vocab
    if (model_dir / "tokenizer.model").is_file():
        return sentencepiece_vocab(model_dir, h)
    return gpt2_vocab(model_dir, h)


FAMILY = Family(
    name="mamba2",
    gguf_arch="mamba2",
    architectures=("Mamba2ForCausalLM",),
    defaults=DEFAULTS,
    reads=READS,
    harmless=HARMLESS,
    tensors=TENSORS,
    parameters=parameters,
    vocab=vocab,
    refuse=REFUSE,
    check=check,
)

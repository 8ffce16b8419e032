"""Granite 4.0 hybrids (GraniteMoeHybridForCausalLM: granite-4.0-h-tiny / small / micro / 1b / 350m) and Bamba
(BambaForCausalLM: Bamba-9B) -> llama.cpp `granitehybrid` (the converter's GraniteHybridModel, a Mamba2Model and a
GraniteMoeModel, which serves both).

Layers layer_types calls "mamba" run Mamba-2's mixer (as mamba2: A = -exp(A_log) and D as [heads, 1], dt_bias as
ssm_dt.bias, the gated norm as [groups, d_inner / groups]), the "attention" ones Granite's attention (Q/K in
rotation pairs, no positions: the converter writes rope.scaling.finetuned false, and llama.cpp then applies no
rope); every layer ends in Granite MoE's mixture (fused input_linear split into gate and up stacks) beside a
shared SwiGLU, or in the shared SwiGLU alone when num_local_experts is 0 (written as the layer's ffn_*). KV heads
are written per layer (0 on Mamba layers), and Granite's multipliers as llama.cpp's scales.

The converter reads config.json as written (Mamba2Model avoids AutoConfig), so nothing is defaulted: the keys on
which it and transformers would disagree when absent must be stated. layer_types is read in both spellings:
releases write "mamba" / "attention", transformers 5 saves "linear_attention" / "full_attention" (which the
pinned converter does not recognise: it then finds no attention layer, and its file cannot run).

Bamba places its attention layers by attn_layer_indices, has one SwiGLU per layer (feed_forward, after
pre_ff_layernorm), no multipliers, and rope on part of each head: transformers rotates the first half of the
head (rotate-half over those dims, partial_rotary_factor hardcoded 0.5), which the converter writes as
rope.dimension_count = attn_rotary_emb and rope.scaling.finetuned true.
"""
from __future__ import annotations

from pathlib import Path

from ..config import ANY, Harmless
from ..errors import ConfigError
from ..family import Family, Refuse, Split, Tensor, rope_pairs
from ..gguf_layout import KV, ValueType
from ..names import GGUF, Keys
from ..params import boolean, u32
from ..views import NEG_EXP
from ._parts.mixture import half_of_each
from ._parts.state_space import by_mamba_n_groups, clamps_nothing, padded_vocab, per_head, squeezed
from .granite import granite_parameters
from .granite import normalise as _granite_normalise

ARCH = "granitehybrid"

# None: config.json is read as written, as the converter reads it (see the module's docstring)
DEFAULTS = {"granitemoehybrid": {}, "bamba": {}}

# the keys both the converter and transformers need, which the converter does not default as the config class
_BOTH = ("vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads",
         "num_key_value_heads", "max_position_embeddings", "rms_norm_eps", "mamba_n_heads", "mamba_d_head",
         "mamba_d_state", "mamba_n_groups", "mamba_d_conv", "mamba_expand")
_GRANITE_ONLY = ("layer_types", "num_local_experts", "num_experts_per_tok", "shared_intermediate_size",
                 "embedding_multiplier", "attention_multiplier", "residual_multiplier", "logits_scaling")
STATED = {"granitemoehybrid": (*_BOTH, *_GRANITE_ONLY), "bamba": (*_BOTH, "attn_layer_indices", "attn_rotary_emb")}

READS = frozenset({
    *STATED["granitemoehybrid"], *STATED["bamba"], "mlp_bias", "tie_word_embeddings", "hidden_act", "attention_bias", "rope_parameters", "rope_scaling", "rope_theta",
    "position_embedding_type", "mamba_conv_bias", "mamba_proj_bias", "time_step_limit", "normalization_function",
})
# the scan's chunk length (the same result in chunks) and how the weights were initialised
# how many logits a generation step keeps, a training loss term, which kernel computes the scan (Bamba)
HARMLESS: Harmless = {"mamba_chunk_size": ANY, "init_method": ANY, "num_logits_to_keep": ANY,
                      "z_loss_coefficient": ANY, "use_mamba_kernels": ANY}

# layer_types as releases and as transformers 5 spell them
MAMBA, ATTENTION = ("mamba", "linear_attention"), ("attention", "full_attention")


def has_experts(h: dict) -> bool:
    return bool(h.get("num_local_experts"))


def is_bamba(h: dict) -> bool:
    return h.get("model_type") == "bamba"


_L = "model.layers.{bid}."
_OPT = dict(required=False)  # on the layers of one kind only (check() places the kinds)
_SHARED = lambda h: not has_experts(h) and not is_bamba(h)  # noqa: E731  (the shared MLP as the only FFN)
TENSORS = (
    Tensor("model.embed_tokens.weight", GGUF.TOKEN_EMBD.weight),
    Tensor("model.norm.weight", GGUF.OUTPUT_NORM.weight, required=lambda h: not is_bamba(h)),
    Tensor("model.final_layernorm.weight", GGUF.OUTPUT_NORM.weight, required=is_bamba),
    Tensor("lm_head.weight", GGUF.OUTPUT.weight, required=False),  # absent when tied (as released)
    Tensor(_L + "input_layernorm.weight", GGUF.ATTN_NORM.weight),
    Tensor(_L + "post_attention_layernorm.weight", GGUF.FFN_NORM.weight, required=lambda h: not is_bamba(h)),
    Tensor(_L + "pre_ff_layernorm.weight", GGUF.FFN_NORM.weight, required=is_bamba),
    # attention layers: Q/K in rotation pairs, as LlamaModel presents them
    Tensor(_L + "self_attn.q_proj.weight", GGUF.ATTN_Q.weight, rope_pairs("num_attention_heads"), **_OPT),
    Tensor(_L + "self_attn.k_proj.weight", GGUF.ATTN_K.weight, rope_pairs("num_key_value_heads"), **_OPT),
    Tensor(_L + "self_attn.v_proj.weight", GGUF.ATTN_V.weight, **_OPT),
    Tensor(_L + "self_attn.o_proj.weight", GGUF.ATTN_OUT.weight, **_OPT),
    # Mamba-2 layers
    Tensor(_L + "mamba.in_proj.weight", GGUF.SSM_IN.weight, **_OPT),
    Tensor(_L + "mamba.conv1d.weight", GGUF.SSM_CONV1D.weight, squeezed, **_OPT),
    Tensor(_L + "mamba.conv1d.bias", GGUF.SSM_CONV1D.bias, **_OPT),
    Tensor(_L + "mamba.dt_bias", GGUF.SSM_DT.bias, **_OPT),
    Tensor(_L + "mamba.A_log", GGUF.SSM_A, per_head, steps=(NEG_EXP,), **_OPT),
    Tensor(_L + "mamba.D", GGUF.SSM_D, per_head, **_OPT),
    Tensor(_L + "mamba.norm.weight", GGUF.SSM_NORM.weight, by_mamba_n_groups, **_OPT),
    Tensor(_L + "mamba.out_proj.weight", GGUF.SSM_OUT.weight, **_OPT),
    # the mixture (every layer, where there are experts)
    Tensor(_L + "block_sparse_moe.router.layer.weight", GGUF.FFN_GATE_INP.weight, required=has_experts),
    Split(_L + "block_sparse_moe.input_linear.weight",
          ((GGUF.FFN_GATE_EXP.weight, half_of_each(0)), (GGUF.FFN_UP_EXP.weight, half_of_each(1))),
          required=has_experts),
    Tensor(_L + "block_sparse_moe.output_linear.weight", GGUF.FFN_DOWN_EXP.weight, required=has_experts),
    # the shared MLP: a shared expert beside experts, else the layer's FFN
    Split(_L + "shared_mlp.input_linear.weight",
          ((GGUF.FFN_GATE_SHEXP.weight, half_of_each(0)), (GGUF.FFN_UP_SHEXP.weight, half_of_each(1))),
          required=has_experts, when=has_experts),
    Tensor(_L + "shared_mlp.output_linear.weight", GGUF.FFN_DOWN_SHEXP.weight, required=has_experts,
           when=has_experts),
    Split(_L + "shared_mlp.input_linear.weight",
          ((GGUF.FFN_GATE.weight, half_of_each(0)), (GGUF.FFN_UP.weight, half_of_each(1))),
          required=_SHARED),
    Tensor(_L + "shared_mlp.output_linear.weight", GGUF.FFN_DOWN.weight, required=_SHARED),
    # Bamba's one SwiGLU
    *(Tensor(_L + f"feed_forward.{p}_proj.weight", f"blk.{{bid}}.ffn_{p}.weight", required=is_bamba)
      for p in ("gate", "up", "down")),
)


def attention_layers(h: dict) -> list[bool]:
    if is_bamba(h):
        return [i in h["attn_layer_indices"] for i in range(h["num_hidden_layers"])]
    return [t in ATTENTION for t in h["layer_types"]]


def normalise(h: dict) -> dict:
    return _granite_normalise(h)


REFUSE = (
    Refuse("position_embedding_type", lambda v: v != "rope", "the converter writes a Granite 4.0 hybrid without rope "
           "(rope.scaling.finetuned false), so llama.cpp would run it without positions"),
    # absent: refused by check as not stated
    Refuse("vocab_size", lambda v: v is None or padded_vocab({"vocab_size": v, "pad_vocab_size_multiple": 8}) == v,
           "the converter pads a Granite 4.0 hybrid's vocabulary to a multiple of 8 but not the embedding, and "
           "llama.cpp refuses such a file"),
    Refuse("time_step_limit", clamps_nothing, "llama.cpp's granitehybrid "
           "does not clamp the step"),
)


def check(h: dict, path: Path) -> None:
    missing = [k for k in STATED[h["model_type"]] if h.get(k) is None]
    if missing:
        raise ConfigError(f"{path}: {', '.join(missing)} not stated: the converter reads config.json as written and "
                          f"transformers' config class defaults them (or fails without them); state them")
    if is_bamba(h):
        _check_bamba(h, path)
    else:
        types = list(h["layer_types"])
        unknown = sorted({t for t in types} - {*MAMBA, *ATTENTION})
        if unknown:
            raise ConfigError(f"{path}: layer_types {unknown[0]!r}: a Granite 4.0 layer is 'mamba' or 'attention' (as "
                              f"transformers 5 writes them, 'linear_attention' or 'full_attention')")
        if h.get("attn_layer_indices") is not None:
            raise ConfigError(f"{path}: attn_layer_indices beside layer_types: the converter places the layers by "
                              f"layer_types, transformers' GraniteMoeHybridConfig does not read attn_layer_indices")
    attn = attention_layers(h)
    if all(attn):
        raise ConfigError(f"{path}: layer_types has no Mamba layer: the converter writes such a Granite 4.0 as "
                          f"llama.cpp's granite / granitemoe, which this family does not present")
    if not any(attn):
        raise ConfigError(f"{path}: layer_types has no attention layer: llama.cpp's granitehybrid keeps a hybrid "
                          f"cache, which no released Granite 4.0 leaves without attention")
    d_inner = h["mamba_expand"] * h["hidden_size"]
    if not isinstance(h["mamba_d_head"], int) or h["mamba_n_heads"] * h["mamba_d_head"] != d_inner:
        raise ConfigError(f"{path}: mamba_n_heads {h['mamba_n_heads']} x mamba_d_head {h['mamba_d_head']!r}: the Mamba "
                          f"heads must fill mamba_expand x hidden_size = {d_inner} (the converter needs the number)")
    if d_inner % h["mamba_n_groups"]:
        raise ConfigError(f"{path}: mamba_n_groups {h['mamba_n_groups']} does not divide the inner size {d_inner}")
    wrong = [f"{k} {h[k]!r}" for k, ok in (("mamba_proj_bias", False), ("mamba_conv_bias", True), ("hidden_act", "silu"),
                                            ("attention_bias", False), ("normalization_function", "rmsnorm"))
             if k in h and h[k] != ok]
    if wrong:
        raise ConfigError(f"{path}: {', '.join(wrong)}: llama.cpp's granitehybrid has no projection or attention "
                          f"biases, needs the conv1d bias, computes SiLU and RMSNorm; this checkpoint would run wrong")
    if is_bamba(h):
        return
    if has_experts(h) and not 0 < h["num_experts_per_tok"] <= h["num_local_experts"]:
        raise ConfigError(f"{path}: num_experts_per_tok {h['num_experts_per_tok']} of {h['num_local_experts']} experts")
    if not has_experts(h) and h["intermediate_size"] != h["shared_intermediate_size"]:
        raise ConfigError(f"{path}: intermediate_size {h['intermediate_size']} with shared_intermediate_size "
                          f"{h['shared_intermediate_size']} and no experts: the converter writes the former as the FFN "
                          f"width, and llama.cpp cannot load the shared MLP (the layer's FFN) under it")
    if not h["shared_intermediate_size"]:
        raise ConfigError(f"{path}: shared_intermediate_size 0: every Granite 4.0 layer has its shared MLP")


_GRANITE_KEYS = ("layer_types", "num_local_experts", "num_experts_per_tok", "shared_intermediate_size",
                 "embedding_multiplier", "attention_multiplier", "residual_multiplier", "logits_scaling",
                 "position_embedding_type", "normalization_function")


def _check_bamba(h: dict, path: Path) -> None:
    stated = [k for k in _GRANITE_KEYS if k in h]
    if stated:
        raise ConfigError(f"{path}: {stated[0]} in a Bamba config: transformers' BambaConfig does not read it, the "
                          f"converter would (Bamba places its attention layers by attn_layer_indices)")
    bad = [i for i in h["attn_layer_indices"] if not 0 <= i < h["num_hidden_layers"]]
    if bad or len(set(h["attn_layer_indices"])) != len(h["attn_layer_indices"]):
        raise ConfigError(f"{path}: attn_layer_indices {h['attn_layer_indices']}: each a layer of the "
                          f"{h['num_hidden_layers']}, once")
    head_dim = h["hidden_size"] // h["num_attention_heads"]
    if h["attn_rotary_emb"] != head_dim // 2:
        raise ConfigError(f"{path}: attn_rotary_emb {h['attn_rotary_emb']}: transformers' Bamba rotates half of each "
                          f"head ({head_dim // 2} of {head_dim} dims: partial_rotary_factor 0.5, hardcoded), the "
                          f"converter writes attn_rotary_emb as llama.cpp's rope dimensions")
    rope_type = h["rope_parameters"].get("rope_type", "default")
    if rope_type != "default":
        raise ConfigError(f"{path}: rope_parameters.rope_type {rope_type!r}: llama.cpp's granitehybrid is given the "
                          f"rope base only")
    if h.get("mlp_bias"):
        raise ConfigError(f"{path}: mlp_bias true: llama.cpp's granitehybrid has no FFN biases")


def parameters(h: dict, block_count: int, file_type: int) -> list:
    """GraniteMoeModel's list under granitehybrid, then the Mamba-2 sizes, the KV heads per layer (in the place
    head_count_kv already has) and no rope; the context length, set again to 2^20, also keeps its place."""
    kv = granite_parameters(ARCH)(h, block_count, file_type)
    if h.get("shared_intermediate_size"):
        kv.append(u32(Keys.LLM.EXPERT_SHARED_FEED_FORWARD_LENGTH.format(arch=ARCH), h["shared_intermediate_size"]))
    kv += [u32(Keys.SSM.CONV_KERNEL.format(arch=ARCH), h["mamba_d_conv"]),
           u32(Keys.SSM.STATE_SIZE.format(arch=ARCH), h["mamba_d_state"]),
           u32(Keys.SSM.GROUP_COUNT.format(arch=ARCH), h["mamba_n_groups"]),
           u32(Keys.SSM.INNER_SIZE.format(arch=ARCH), h["mamba_expand"] * h["hidden_size"]),
           u32(Keys.SSM.TIME_STEP_RANK.format(arch=ARCH), h["mamba_n_heads"])]
    if h.get("attn_rotary_emb"):
        kv.append(u32(Keys.Rope.DIMENSION_COUNT.format(arch=ARCH), h["attn_rotary_emb"]))
    kv += [KV(Keys.Attention.HEAD_COUNT_KV.format(arch=ARCH), ValueType.ARRAY,
              [h["num_key_value_heads"] if a else 0 for a in attention_layers(h)], ValueType.INT32),
           boolean(Keys.Rope.SCALING_FINETUNED.format(arch=ARCH), is_bamba(h))]
    if not is_bamba(h):
        kv.append(u32(Keys.LLM.CONTEXT_LENGTH.format(arch=ARCH), 2 ** 20))
    return kv


def vocab(model_dir: Path, h: dict) -> list:
    """Mamba2Model.set_vocab: tokenizer.model's SentencePiece, else tokenizer.json's byte-level BPE."""
    from hfview.tokenizer.vocab import gpt2_vocab, sentencepiece_vocab
    if (model_dir / "tokenizer.model").is_file():
        return sentencepiece_vocab(model_dir, h)
    return gpt2_vocab(model_dir, h)


FAMILY = Family(
    name="granitemoehybrid",
    gguf_arch=ARCH,
    architectures=("GraniteMoeHybridForCausalLM", "BambaForCausalLM"),
    defaults=DEFAULTS,
    reads=READS,
    harmless=HARMLESS,
    tensors=TENSORS,
    parameters=parameters,
    vocab=vocab,
    refuse=REFUSE,
    check=check,
    normalise=normalise,
    nvfp4_qk_pairs=lambda h: True,  # its converter class is a LlamaModel with undo_permute
    nvfp4_unmapped=("shared_mlp.input_linear.weight",),  # measured: "Can not map tensor" (test_nvfp4_more)
)

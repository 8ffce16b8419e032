"""Cohere 2 MoE (Cohere's North Mini Code: Cohere2MoeForCausalLM) -> llama.cpp `cohere2moe` (the converter's
Cohere2MoeModel).

Cohere 2's block (attention and FFN in parallel on one normed input, interleaved rope pairs as stored, rope on
the sliding layers only, logit_scale, output through the embeddings unless stored) with RMS norms where
rms_norm_eps is stated (Cohere's weight-only LayerNorm otherwise), and a mixture: leading dense layers
(mlp_layer_types, or first_k_dense_replace, which the config class turns into that list) of width
prefix_dense_intermediate_size, then routed experts of width intermediate_size (softmax or sigmoid scores of the
top-k router logits) and optional shared experts averaged with the routed output. llama.cpp reads the layer
kinds as the array the converter writes, and ropes every leading dense layer (transformers does where
prefix_dense_sliding_window_pattern is 1).

The multi-token-prediction (MTP) layers a release stores after the trunk (model.layers.{num_hidden_layers + i}.*:
a mixture decoder block plus eh_proj, enorm, hnorm and optionally embed_tokens, shared_head.head / .norm; transformers
ignores them) are written as the converter writes them without --no-mtp: block_count counts
num_nextn_predict_layers, the block's tensors under blk.{n}.*, its own under blk.{n}.nextn.*, and
nextn_predict_layers in the KV. llama.cpp loads them for its MTP graph and runs the trunk, as transformers does.
"""
from __future__ import annotations

from pathlib import Path

from ..config import Harmless
from ..errors import ConfigError
from ..family import Experts, Family, Refuse, RunnerFacts, Tensor, stated, unset
from ..gguf_layout import KV, ValueType
from ..names import GGUF, Keys
from ..params import boolean, f32, string, text_model_parameters, u32
from ._parts.checks import check_no_pooling
from .cohere2 import HARMLESS as COHERE2_HARMLESS
from .cohere2 import vocab

# transformers 5.24's Cohere2MoeConfig defaults (layer_types, mlp_layer_types and num_key_value_heads are
# derived: normalise)
DEFAULTS = {
    "cohere2_moe": dict(vocab_size=256000, hidden_size=8192, intermediate_size=22528, logit_scale=0.0625,
                        num_hidden_layers=40, num_attention_heads=64, num_key_value_heads=None, head_dim=128,
                        hidden_act="silu", max_position_embeddings=8192, initializer_range=0.02,
                        layer_norm_eps=1e-05, use_cache=True, pad_token_id=0, bos_token_id=5, eos_token_id=255001,
                        tie_word_embeddings=True, rope_parameters={"rope_theta": 10000.0, "rope_type": "default"},
                        attention_bias=False, attention_dropout=0.0, sliding_window=4096, num_experts_per_tok=2,
                        num_experts=8, output_router_logits=False, num_shared_experts=0,
                        shared_expert_combination_strategy="average", expert_selection_fn="softmax",
                        layer_types=None, mlp_layer_types=None, prefix_dense_sliding_window_pattern=1,
                        norm_topk_prob=True, prefix_dense_intermediate_size=None, rms_norm_eps=None,
                        sliding_window_pattern=4,
                        # Cohere2MoeConfig still has the legacy fields (folded into rope_parameters on reading)
                        rope_theta=10000.0, rope_scaling=None),
}

READS = frozenset({
    "vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads",
    "num_key_value_heads", "head_dim", "max_position_embeddings", "layer_norm_eps", "rms_norm_eps", "logit_scale",
    "hidden_act", "tie_word_embeddings", "attention_bias", "rope_parameters", "rope_scaling", "rope_theta",
    "sliding_window", "layer_types", "sliding_window_pattern", "mlp_layer_types", "first_k_dense_replace",
    "prefix_dense_sliding_window_pattern", "prefix_dense_intermediate_size", "num_experts", "num_experts_per_tok",
    "num_shared_experts", "shared_expert_combination_strategy", "expert_selection_fn", "norm_topk_prob",
    "num_nextn_predict_layers",  # the MTP blocks the converter writes past num_hidden_layers
})
# Cohere 2's released keys transformers does not use, and North's use_parallel_block (always parallel) and
# use_qk_norm false (Cohere2Moe has no q/k norms)
HARMLESS: Harmless = {**COHERE2_HARMLESS, "use_qk_norm": (False,)}

_LAYER = "model.layers.{bid}."
TENSORS = (
    Tensor("model.embed_tokens.weight", GGUF.TOKEN_EMBD.weight),
    Tensor("model.norm.weight", GGUF.OUTPUT_NORM.weight),
    Tensor("lm_head.weight", GGUF.OUTPUT.weight, required=lambda h: not h.get("tie_word_embeddings")),
    Tensor(f"{_LAYER}input_layernorm.weight", GGUF.ATTN_NORM.weight),
    *(Tensor(f"{_LAYER}self_attn.{p}_proj.weight", f"blk.{{bid}}.attn_{p}.weight") for p in ("q", "k", "v")),
    Tensor(f"{_LAYER}self_attn.o_proj.weight", GGUF.ATTN_OUT.weight),
    # each of these exists in some layers only: dense FFNs first, then the mixtures
    *(Tensor(f"{_LAYER}mlp.{p}_proj.weight", f"blk.{{bid}}.ffn_{p}.weight", required=False)
      for p in ("gate", "up", "down")),
    Tensor(f"{_LAYER}mlp.gate.weight", GGUF.FFN_GATE_INP.weight, required=False),
    *(Experts(f"{_LAYER}mlp.experts.{{x}}.{p}_proj.weight", f"blk.{{bid}}.ffn_{p}_exps.weight", "num_experts",
              required=False) for p in ("down", "gate", "up")),
    *(Tensor(f"{_LAYER}mlp.shared_experts.{p}_proj.weight", f"blk.{{bid}}.ffn_{p}_shexp.weight", required=False)
      for p in ("gate", "up", "down")),
    # the MTP blocks' own tensors (GGUF's NEXTN_* names), in the blocks past num_hidden_layers only
    *(Tensor(f"{_LAYER}{hf}.weight", f"blk.{{bid}}.nextn.{gguf}.weight", required=False)
      for hf, gguf in (("eh_proj", "eh_proj"), ("embed_tokens", "embed_tokens"), ("enorm", "enorm"),
                       ("hnorm", "hnorm"), ("shared_head.head", "shared_head_head"),
                       ("shared_head.norm", "shared_head_norm"))),
)


def normalise(h: dict) -> dict:
    """What Cohere2MoeConfig's __post_init__ computes: KV heads, and from first_k_dense_replace (which it consumes)
    the attention kinds (the dense prefix by prefix_dense_sliding_window_pattern, the rest by
    sliding_window_pattern: every pattern-th layer global) and the MLP kinds."""
    if h.get("num_key_value_heads") is None:
        h["num_key_value_heads"] = h["num_attention_heads"]
    dense = h.pop("first_k_dense_replace", 0)
    n = h["num_hidden_layers"]
    if h.get("layer_types") is None:
        prefix, rest = h["prefix_dense_sliding_window_pattern"], h["sliding_window_pattern"]
        h["layer_types"] = [*("sliding_attention" if (i + 1) % prefix else "full_attention" for i in range(dense)),
                            *("sliding_attention" if (i + 1) % rest else "full_attention" for i in range(n - dense))]
    if h.get("mlp_layer_types") is None:
        h["mlp_layer_types"] = ["dense" if i < dense else "sparse" for i in range(n)]
    return h


def _leading_dense(kinds: list) -> int:
    return next((i for i, t in enumerate(kinds) if t != "dense"), len(kinds))


def _dense_lead(h: dict) -> int:
    """Cohere2MoeModel.set_gguf_parameters: the leading dense layers, up to the first that is not dense."""
    return _leading_dense(h["mlp_layer_types"])


REFUSE = (
    Refuse("hidden_act", ("silu",), "llama.cpp's cohere2moe computes SiLU only"),
    Refuse("attention_bias", unset, "llama.cpp's cohere2moe has no attention biases"),
    Refuse("rope_parameters.rope_type", ("default",), "the converter writes rope scaling 'none' for cohere2moe; this "
           "checkpoint would run wrong", default="default"),
    Refuse("sliding_window", stated, "the converter needs the window size"),
    Refuse("num_experts", bool, "llama.cpp's cohere2moe needs experts"),
    Refuse("expert_selection_fn", ("softmax", "sigmoid"), "transformers knows softmax and sigmoid only"),
    Refuse("mlp_layer_types", lambda v: not set(v) - {"dense", "sparse"}, "transformers' Cohere 2 MoE knows 'dense' "
           "and 'sparse'"),
    Refuse("mlp_layer_types", lambda v: "dense" not in list(v)[_leading_dense(v):], "a dense layer after a mixture; "
           "llama.cpp's cohere2moe has dense layers only before the first mixture (leading_dense_block_count)"),
)


def check(h: dict, path: Path) -> None:
    check_no_pooling(path)
    n = h["num_hidden_layers"]
    for key in ("layer_types", "mlp_layer_types"):
        if len(h[key]) != n:
            raise ConfigError(f"{path}: {key} lists {len(h[key])} layers, num_hidden_layers is {n}")
    lead = _dense_lead(h)
    if lead == n:
        raise ConfigError(f"{path}: mlp_layer_types: every layer dense; llama.cpp's cohere2moe needs mixtures")
    if lead and h.get("prefix_dense_intermediate_size") is None:
        raise ConfigError(f"{path}: prefix_dense_intermediate_size is null with {lead} dense layer(s): the converter "
                          f"then writes no feed_forward_length, which llama.cpp's dense layers need")
    if lead and h["prefix_dense_sliding_window_pattern"] != 1 and "full_attention" in h["layer_types"][:lead]:
        raise ConfigError(f"{path}: prefix_dense_sliding_window_pattern {h['prefix_dense_sliding_window_pattern']} "
                          f"with a global dense layer: transformers leaves rope out of it, llama.cpp's cohere2moe "
                          f"ropes every leading dense layer")
    if h.get("expert_selection_fn") == "softmax" and not h.get("norm_topk_prob"):
        raise ConfigError(f"{path}: expert_selection_fn softmax with norm_topk_prob false: transformers takes the "
                          f"softmax over the chosen experts only, llama.cpp's cohere2moe over all of them, which "
                          f"agree only when the converter writes the renormalisation (norm_topk_prob true)")
    if h.get("num_shared_experts", 0) > 0 and h.get("shared_expert_combination_strategy") != "average":
        raise ConfigError(f"{path}: shared_expert_combination_strategy "
                          f"{h.get('shared_expert_combination_strategy')!r}: llama.cpp's cohere2moe averages the "
                          f"shared and routed outputs, and the converter refuses any other strategy")


def _mtp_blocks(h: dict) -> int:
    """Cohere2MoeModel's extra blocks: the next-token-prediction layers (written unless --no-mtp)."""
    return int(h.get("num_nextn_predict_layers") or 0)


def parameters(h: dict, block_count: int, file_type: int) -> list:
    """Cohere2MoeModel.set_gguf_parameters."""
    kv = [*text_model_parameters(h, "cohere2moe", block_count, file_type),
          f32(Keys.LLM.LOGIT_SCALE.format(arch="cohere2moe"), h["logit_scale"]),
          u32(Keys.Attention.SLIDING_WINDOW.format(arch="cohere2moe"), h["sliding_window"]),
          KV(Keys.Attention.SLIDING_WINDOW_PATTERN.format(arch="cohere2moe"), ValueType.ARRAY,
             [t == "sliding_attention" for t in h["layer_types"]], ValueType.BOOL),
          u32(Keys.LLM.VOCAB_SIZE.format(arch="cohere2moe"), h["vocab_size"]),
          u32(Keys.LLM.EXPERT_FEED_FORWARD_LENGTH.format(arch="cohere2moe"), h["intermediate_size"]),
          u32(Keys.LLM.LEADING_DENSE_BLOCK_COUNT.format(arch="cohere2moe"), _dense_lead(h)),
          boolean(Keys.LLM.EXPERT_WEIGHTS_NORM.format(arch="cohere2moe"), h.get("norm_topk_prob", False))]
    if (shared := h.get("num_shared_experts", 0)) > 0:
        kv += [u32(Keys.LLM.EXPERT_SHARED_COUNT.format(arch="cohere2moe"), shared),
               u32(Keys.LLM.EXPERT_SHARED_FEED_FORWARD_LENGTH.format(arch="cohere2moe"),
                   h["intermediate_size"] * shared)]
    if (mtp := _mtp_blocks(h)) > 0:
        kv.append(u32(Keys.LLM.NEXTN_PREDICT_LAYERS.format(arch="cohere2moe"), mtp))
    return [*kv, u32(Keys.Rope.DIMENSION_COUNT.format(arch="cohere2moe"), h["head_dim"]),
            string(Keys.Rope.SCALING_TYPE.format(arch="cohere2moe"), "none")]


FAMILY = Family(
    name="cohere2_moe",
    gguf_arch="cohere2moe",
    architectures=("Cohere2MoeForCausalLM",),
    defaults=DEFAULTS,
    reads=READS,
    harmless=HARMLESS,
    tensors=TENSORS,
    parameters=parameters,
    vocab=vocab,
    refuse=REFUSE,
    check=check,
    normalise=normalise,
    runner=RunnerFacts(llama_cpp_applies_window=True),  # llama.cpp's cohere2moe slides on the layers layer_types names
    extra_blocks=_mtp_blocks,
)

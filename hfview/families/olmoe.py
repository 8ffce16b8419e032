"""OLMoE (OLMoE-1B-7B: OlmoeForCausalLM) -> llama.cpp `olmoe` (the converter's OlmoeModel).

A Llama-layout decoder (rotate-half rope: Q/K as stored) with RMS norms over the whole q and k projections
and Qwen2-MoE's mixture without a shared expert (the converter's OlmoeModel copies Qwen2MoeModel's expert
merge). llama.cpp's olmoe sizes the k norm n_embd, so K must be as wide as Q (no grouped KV heads, as
released); the converter writes the RMS epsilon as a fixed 1e-5.
"""
from __future__ import annotations

from pathlib import Path

from ..config import Harmless
from ..errors import ConfigError
from ..family import Family, Refuse, Tensor, unset
from ..names import GGUF, Keys
from ..params import f32, text_model_parameters
from ._parts.checks import rope_types, silu_only
from ._parts.mixture import attention_tensors, check_topk_norm, mixture_tensors
from ._parts.vocab import gpt2_vocab

# transformers 5.24's OlmoeConfig defaults
DEFAULTS = {
    "olmoe": dict(vocab_size=50304, hidden_size=2048, intermediate_size=2048, num_hidden_layers=16,
                  num_attention_heads=16, num_key_value_heads=None, hidden_act="silu", max_position_embeddings=4096,
                  initializer_range=0.02, rms_norm_eps=1e-05, use_cache=True, pad_token_id=1, bos_token_id=None,
                  eos_token_id=50279, tie_word_embeddings=False,
                  rope_parameters={"rope_theta": 10000.0, "rope_type": "default"}, attention_bias=False,
                  attention_dropout=0.0, clip_qkv=None, num_experts_per_tok=8, num_experts=64,
                  norm_topk_prob=False),
}

READS = frozenset({
    "vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads",
    "num_key_value_heads", "max_position_embeddings", "rms_norm_eps", "rope_parameters", "rope_scaling",
    "rope_theta", "hidden_act", "tie_word_embeddings", "attention_bias", "clip_qkv",
    "num_experts", "num_local_experts", "num_experts_per_tok", "norm_topk_prob",
})
HARMLESS: Harmless = {}

_QK_NORMS = (Tensor("model.layers.{bid}.self_attn.q_norm.weight", GGUF.ATTN_Q_NORM.weight),
             Tensor("model.layers.{bid}.self_attn.k_norm.weight", GGUF.ATTN_K_NORM.weight))
TENSORS = (*attention_tensors(extra=_QK_NORMS), Tensor("lm_head.weight", GGUF.OUTPUT.weight),
           *mixture_tensors("num_experts"))

_EPS = 1e-5  # OlmoeModel.set_gguf_parameters writes this whatever the config says


REFUSE = (
    silu_only("olmoe"),
    rope_types("olmoe"),
    Refuse("clip_qkv", lambda v: v is None, "the converter writes no clamp for olmoe and llama.cpp's olmoe applies "
           "none, so this checkpoint would run wrong"),
    Refuse("rms_norm_eps", (_EPS,), f"the converter writes olmoe's RMS epsilon as {_EPS} whatever the config says, so "
           f"this checkpoint would run wrong"),
    Refuse("attention_bias", unset, "llama.cpp's olmoe has no attention output bias; no released OLMoE has biases"),
    Refuse("tie_word_embeddings", unset, "llama.cpp's olmoe needs an output matrix of its own, which a tied checkpoint "
           "does not store"),
    Refuse("num_experts", bool, "llama.cpp's olmoe needs experts"),
)


def check(h: dict, path: Path) -> None:
    check_topk_norm(h, path, "olmoe", False)
    if h["num_key_value_heads"] != h["num_attention_heads"]:
        raise ConfigError(f"{path}: {h['num_key_value_heads']} KV heads for {h['num_attention_heads']} query heads: "
                          f"llama.cpp's olmoe normalises K over n_embd (no grouped KV heads, as OLMoE is released), "
                          f"so a narrower k_norm cannot load there")


def normalise(h: dict) -> dict:
    """OlmoeConfig's attribute map: a stated num_local_experts is its num_experts."""
    if "num_local_experts" in h:
        h["num_experts"] = h.pop("num_local_experts")
    if h.get("num_key_value_heads") is None:
        h["num_key_value_heads"] = h["num_attention_heads"]
    return h


def parameters(h: dict, block_count: int, file_type: int) -> list:
    return [*text_model_parameters(h, "olmoe", block_count, file_type),
            f32(Keys.Attention.LAYERNORM_RMS_EPS.format(arch="olmoe"), _EPS)]  # set again: first place, this value


FAMILY = Family(
    name="olmoe",
    gguf_arch="olmoe",
    architectures=("OlmoeForCausalLM",),
    defaults=DEFAULTS,
    reads=READS,
    harmless=HARMLESS,
    tensors=TENSORS,
    parameters=parameters,
    vocab=gpt2_vocab,
    refuse=REFUSE,
    check=check,
    normalise=normalise,
)

"""Qwen3-MoE (Qwen3-30B-A3B, Qwen3-235B-A22B, Qwen3-Coder: Qwen3MoeForCausalLM) -> llama.cpp `qwen3moe` (the
converter's Qwen3MoeModel, derived from its Qwen2MoeModel).

Qwen3's attention (per-head q/k RMS norms of width head_dim, no biases) over Qwen2-MoE's mixture without a
shared expert: a router and stacked experts in every layer, the chosen experts' weights renormalised
(llama.cpp's qwen3moe always does: norm_topk_prob must be true, as every release has it).
"""
from __future__ import annotations

from pathlib import Path

from ..config import ANY, Harmless
from ..family import Family, Tensor
from ..names import GGUF
from ._parts.checks import check_no_pooling, check_no_sliding, rope_types, silu_only
from ._parts.decoder import LM_HEAD
from ._parts.mixture import (attention_tensors, check_every_layer_a_mixture, check_topk_norm, mixture_parameters,
                             mixture_tensors)
from ._parts.vocab import gpt2_vocab

# transformers 5.24's Qwen3MoeConfig defaults (it names num_experts num_local_experts)
DEFAULTS = {
    "qwen3_moe": dict(vocab_size=151936, hidden_size=2048, intermediate_size=6144, num_hidden_layers=24,
                      num_attention_heads=32, num_key_value_heads=4, hidden_act="silu",
                      max_position_embeddings=32768, initializer_range=0.02, rms_norm_eps=1e-06, use_cache=True,
                      tie_word_embeddings=False, rope_parameters={"rope_theta": 10000.0, "rope_type": "default"},
                      attention_bias=False, use_sliding_window=False, sliding_window=None, attention_dropout=0.0,
                      decoder_sparse_step=1, moe_intermediate_size=768, num_experts_per_tok=8,
                      num_local_experts=128, norm_topk_prob=False, mlp_only_layers=[], pad_token_id=None,
                      bos_token_id=None, eos_token_id=None),
}

READS = frozenset({
    "vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads",
    "num_key_value_heads", "head_dim", "max_position_embeddings", "rms_norm_eps", "rope_parameters",
    "rope_scaling", "rope_theta", "hidden_act", "tie_word_embeddings", "attention_bias",
    "use_sliding_window", "sliding_window", "max_window_layers", "layer_types",  # checked: no sliding layer
    "num_experts", "num_local_experts", "num_experts_per_tok", "moe_intermediate_size", "norm_topk_prob",
    "decoder_sparse_step", "mlp_only_layers",  # checked: every layer a mixture
    "shared_expert_intermediate_size",  # Qwen3-Coder states 0; the converter writes it, nothing computes with it
})
# Qwen3-Coder's config also states qkv_bias false and use_qk_norm true, which Qwen3MoeConfig does not define
# and its model never reads: the biases follow attention_bias, the q/k norms are always applied.
HARMLESS: Harmless = {"qkv_bias": ANY, "use_qk_norm": ANY}


def _qk_norms() -> tuple[Tensor, ...]:
    return (Tensor("model.layers.{bid}.self_attn.q_norm.weight", GGUF.ATTN_Q_NORM.weight),
            Tensor("model.layers.{bid}.self_attn.k_norm.weight", GGUF.ATTN_K_NORM.weight))


TENSORS = (*attention_tensors(extra=_qk_norms()), LM_HEAD, *mixture_tensors("num_local_experts"))


REFUSE = (silu_only("qwen3moe"), rope_types("qwen3moe"))


def check(h: dict, path: Path) -> None:
    check_no_sliding(h, path, "qwen3moe")
    check_no_pooling(path)
    check_every_layer_a_mixture(h, path, "qwen3moe", "num_local_experts")
    check_topk_norm(h, path, "qwen3moe", True)


def normalise(h: dict) -> dict:
    """Qwen3MoeConfig's attribute map: a stated num_experts is its num_local_experts."""
    if "num_experts" in h:
        h["num_local_experts"] = h.pop("num_experts")
    if h.get("num_key_value_heads") is None:
        h["num_key_value_heads"] = h["num_attention_heads"]
    return h


FAMILY = Family(
    name="qwen3_moe",
    gguf_arch="qwen3moe",
    architectures=("Qwen3MoeForCausalLM",),
    defaults=DEFAULTS,
    reads=READS,
    harmless=HARMLESS,
    tensors=TENSORS,
    parameters=mixture_parameters("qwen3moe"),
    vocab=gpt2_vocab,
    refuse=REFUSE,
    check=check,
    normalise=normalise,
)

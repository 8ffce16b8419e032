"""Qwen2-MoE (Qwen1.5-MoE, Qwen2-57B-A14B: Qwen2MoeForCausalLM) -> llama.cpp `qwen2moe` (the converter's
Qwen2MoeModel).

Qwen2's attention (q/k/v biases, rotate-half rope as stored) over a mixture in every layer: a router
(`mlp.gate`), per-expert SwiGLU FFNs stacked into `*_exps` (down, gate, up: the converter's merge order),
and one shared expert whose output a sigmoid gate (`mlp.shared_expert_gate`, one row) scales. Also the
building blocks of the converter's classes derived from Qwen2MoeModel (qwen3_moe) and of OLMoE's copy of it.
"""
from __future__ import annotations

from pathlib import Path

from ..config import Harmless
from ..errors import ConfigError
from ..family import Family, Refuse, Tensor, unset
from ..names import GGUF
from ._parts.checks import check_no_pooling, check_no_sliding, rope_types, silu_only
from ._parts.mixture import (SHARED_EXPERT, attention_tensors, check_every_layer_a_mixture, check_topk_norm,
                             mixture_parameters, mixture_tensors)
from ._parts.vocab import gpt2_vocab

# transformers 5.24's Qwen2MoeConfig defaults
DEFAULTS = {
    "qwen2_moe": dict(vocab_size=151936, hidden_size=2048, intermediate_size=5632, num_hidden_layers=24,
                      num_attention_heads=16, num_key_value_heads=16, hidden_act="silu",
                      max_position_embeddings=32768, initializer_range=0.02, rms_norm_eps=1e-06, use_cache=True,
                      tie_word_embeddings=False, rope_parameters={"rope_theta": 10000.0, "rope_type": "default"},
                      use_sliding_window=False, sliding_window=0, max_window_layers=28, attention_dropout=0.0,
                      decoder_sparse_step=1, moe_intermediate_size=1408, shared_expert_intermediate_size=5632,
                      num_experts_per_tok=4, num_experts=60, norm_topk_prob=False, mlp_only_layers=[],
                      qkv_bias=True, pad_token_id=None, bos_token_id=None, eos_token_id=None),
}

READS = frozenset({
    "vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads",
    "num_key_value_heads", "head_dim", "max_position_embeddings", "rms_norm_eps", "rope_parameters",
    "rope_scaling", "rope_theta", "hidden_act", "tie_word_embeddings",
    "use_sliding_window", "sliding_window", "max_window_layers", "layer_types",  # checked: no sliding layer
    "qkv_bias",  # the q/k/v biases are there or not: the tensors say
    "num_experts", "num_experts_per_tok", "moe_intermediate_size", "shared_expert_intermediate_size",
    "norm_topk_prob", "decoder_sparse_step", "mlp_only_layers",  # checked: every layer a mixture
})
HARMLESS: Harmless = {}


LM_HEAD = Tensor("lm_head.weight", GGUF.OUTPUT.weight)
TENSORS = (*attention_tensors(), LM_HEAD, *mixture_tensors("num_experts"), *SHARED_EXPERT)


REFUSE = (
    silu_only("qwen2moe"),
    rope_types("qwen2moe"),
    Refuse("tie_word_embeddings", unset, "llama.cpp's qwen2moe architecture needs an output matrix of its own, which a "
           "tied checkpoint does not store"),
)


def check(h: dict, path: Path) -> None:
    check_no_sliding(h, path, "qwen2moe")
    check_no_pooling(path)
    check_every_layer_a_mixture(h, path, "qwen2moe", "num_experts")
    check_topk_norm(h, path, "qwen2moe", False)
    if h.get("head_dim") is not None and h["head_dim"] * h["num_attention_heads"] != h["hidden_size"]:
        raise ConfigError(f"{path}: head_dim {h['head_dim']} x {h['num_attention_heads']} heads is not "
                          f"hidden_size {h['hidden_size']}; llama.cpp's qwen2moe architecture assumes it is")


def normalise(h: dict) -> dict:
    if h.get("num_key_value_heads") is None:
        h["num_key_value_heads"] = h["num_attention_heads"]
    return h


FAMILY = Family(
    name="qwen2_moe",
    gguf_arch="qwen2moe",
    architectures=("Qwen2MoeForCausalLM",),
    defaults=DEFAULTS,
    reads=READS,
    harmless=HARMLESS,
    tensors=TENSORS,
    parameters=mixture_parameters("qwen2moe"),
    vocab=gpt2_vocab,
    refuse=REFUSE,
    check=check,
    normalise=normalise,
)

"""MiniMax-M2 (MiniMax-M2, M2.1, M2.5: MiniMaxM2ForCausalLM) -> llama.cpp `minimax-m2` (the converter's
MiniMaxM2Model).

Grouped-query attention with q/k RMS norms over the whole projection (one weight per element of all heads,
before the split into heads), partial rotary (the first rotary_dim of each head, rotate-half: Q/K as stored),
and a mixture in every layer: a sigmoid router whose choice is biased by `e_score_correction_bias` (the
weights are the unbiased sigmoids, renormalised), experts w1/w2/w3 (gate, down, up) stacked in that order.
No shared expert, no dense layer, untied head.
"""
from __future__ import annotations

from pathlib import Path

from ..config import ANY, Harmless
from ..errors import ConfigError
from ..family import Experts, Family, Refuse, Tensor, stated, unset
from ..names import GGUF, Keys
from ..params import text_model_parameters, u32
from ._parts.checks import check_no_pooling, rope_types, silu_only
from ._parts.decoder import decoder_tensors
from ._parts.vocab import gpt2_vocab

# transformers 5.24's MiniMaxM2Config defaults, as data
DEFAULTS = {
    "minimax_m2": dict(vocab_size=200064, hidden_size=3072, intermediate_size=1536, num_hidden_layers=62,
                       num_attention_heads=48, num_key_value_heads=8, head_dim=128, hidden_act="silu",
                       max_position_embeddings=196608, initializer_range=0.02, rms_norm_eps=1e-06, use_cache=True,
                       pad_token_id=None, bos_token_id=200034, eos_token_id=200020, tie_word_embeddings=False,
                       attention_dropout=0.0, num_experts_per_tok=8, num_local_experts=256,
                       output_router_logits=False, router_aux_loss_coef=0.001, router_jitter_noise=0.0,
                       rope_parameters={"rope_theta": 5000000.0, "rope_type": "default"}),
}

READS = frozenset({
    "vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads",
    "num_key_value_heads", "head_dim", "max_position_embeddings", "rms_norm_eps", "rope_parameters",
    "rope_scaling", "rope_theta", "hidden_act", "tie_word_embeddings", "num_local_experts", "num_experts",
    "num_experts_per_tok",
    "rotary_dim",      # the converter writes it as rope.dimension_count; transformers derives the rotary fraction
    # transformers' fraction where a config states it (transformers 4.57's saves: nvidia's MiniMax-M2.5-NVFP4),
    # before the one rotary_dim gives: checked to be rotary_dim / head_dim
    "partial_rotary_factor",
    "scoring_func",    # the converter writes the router's gating function from it: sigmoid is MiniMax-M2's
    "qk_norm_type",    # checked: "per_layer" (one norm over all heads), the only kind transformers computes
    "attn_type_list",  # checked: 1 (full attention) in every layer, the only kind transformers computes
})
# Released configs state what the model always does (use_qk_norm, use_routing_bias true), no shared expert
# (shared_intermediate_size 0), and the multi-token-prediction modules the release does not store and
# transformers does not build (a checkpoint that stores them is refused by tensor name).
HARMLESS: Harmless = {"use_qk_norm": (True,), "use_routing_bias": (True,), "shared_intermediate_size": (0,),
                      "use_mtp": ANY, "num_mtp_modules": ANY, "mtp_transformer_layers": ANY}

_LAYER = "model.layers.{bid}."
TENSORS = (
    *decoder_tensors(extra=(Tensor(f"{_LAYER}self_attn.q_norm.weight", GGUF.ATTN_Q_NORM.weight),
                            Tensor(f"{_LAYER}self_attn.k_norm.weight", GGUF.ATTN_K_NORM.weight))),
    Tensor("lm_head.weight", GGUF.OUTPUT.weight),
    Tensor(f"{_LAYER}block_sparse_moe.gate.weight", GGUF.FFN_GATE_INP.weight),
    Tensor(f"{_LAYER}block_sparse_moe.e_score_correction_bias", GGUF.FFN_EXP_PROBS_B.bias),
    # stacked in the converter's order: w1 (gate), w2 (down), w3 (up)
    *(Experts(f"{_LAYER}block_sparse_moe.experts.{{x}}.{w}.weight", f"blk.{{bid}}.ffn_{part}_exps.weight",
              "num_local_experts") for w, part in (("w1", "gate"), ("w2", "down"), ("w3", "up"))),
)
TENSORS = tuple(r for r in TENSORS if ".mlp." not in r.hf)  # the dense FFN of decoder_tensors: none here

_ARCH = "minimax-m2"


def normalise(h: dict) -> dict:
    """MiniMaxM2Config's attribute map: a stated num_experts is its num_local_experts."""
    if "num_experts" in h:
        h["num_local_experts"] = h.pop("num_experts")
    if h.get("num_key_value_heads") is None:
        h["num_key_value_heads"] = h["num_attention_heads"]
    return h


REFUSE = (
    silu_only(_ARCH),
    rope_types(_ARCH),
    Refuse("tie_word_embeddings", unset, f"llama.cpp's {_ARCH} architecture needs an output matrix of its own, which "
           f"a tied checkpoint does not store"),
    Refuse("num_local_experts", bool, "MiniMax-M2 has a mixture of experts in every layer"),
    Refuse("scoring_func", ("sigmoid",), "transformers' MiniMax-M2 routes by sigmoid, and the converter tells "
           "llama.cpp so only from scoring_func \"sigmoid\"; otherwise llama.cpp would route differently"),
    Refuse("rotary_dim", stated, "the converter writes MiniMax-M2's rotary width from it (and fails "
           "without it)"),
    Refuse("qk_norm_type", ("per_layer",), f"transformers' MiniMax-M2 and llama.cpp's {_ARCH} normalise q and k "
           f"over the whole projection (\"per_layer\") only", default="per_layer"),
    Refuse("attn_type_list", lambda v: v is None or all(k == 1 for k in v), f"entries other than 1 mark "
           f"linear-attention layers, which neither transformers' MiniMax-M2 nor llama.cpp's {_ARCH} computes"),
)


def check(h: dict, path: Path) -> None:
    check_no_pooling(path)
    head_dim = h["head_dim"]
    if not 0 < h["rotary_dim"] <= head_dim or h["rotary_dim"] % 2:
        raise ConfigError(f"{path}: rotary_dim {h['rotary_dim']} is not an even width within head_dim {head_dim}")
    for where, stated in (("rope_parameters.partial_rotary_factor", h["rope_parameters"].get("partial_rotary_factor")),
                          ("partial_rotary_factor", h.get("partial_rotary_factor"))):
        if stated is not None and stated * head_dim != h["rotary_dim"]:
            raise ConfigError(f"{path}: {where} {stated} x head_dim {head_dim} is not rotary_dim {h['rotary_dim']}: "
                              f"transformers rotates one width, the converter writes the other")
    kinds = h.get("attn_type_list")
    if kinds is not None and len(kinds) != h["num_hidden_layers"]:
        raise ConfigError(f"{path}: attn_type_list lists {len(kinds)} layers, num_hidden_layers is "
                          f"{h['num_hidden_layers']}")


def parameters(h: dict, block_count: int, file_type: int) -> list:
    """TextModel's entries (the gating function from scoring_func among them), then the expert width (the
    config's intermediate_size) and the rotary width."""
    return [*text_model_parameters(h, _ARCH, block_count, file_type),
            u32(Keys.LLM.EXPERT_FEED_FORWARD_LENGTH.format(arch=_ARCH), h["intermediate_size"]),
            u32(Keys.Rope.DIMENSION_COUNT.format(arch=_ARCH), h["rotary_dim"])]


FAMILY = Family(
    name="minimax_m2",
    gguf_arch=_ARCH,
    architectures=("MiniMaxM2ForCausalLM",),
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

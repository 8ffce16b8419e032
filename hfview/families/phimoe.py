"""Phi-3.5-MoE (PhiMoEForCausalLM) -> llama.cpp `phimoe` (the converter's PhiMoeModel, derived from its
Phi3MiniModel).

Phi-3's vocabulary, hyperparameter list and longrope factors (hfview.families.phi3), with separate q/k/v
projections (biases), LayerNorms with biases, an output bias, and a mixture in every layer: a router
(`block_sparse_moe.gate`) and per-expert SwiGLU FFNs (w1 gate, w2 down, w3 up) stacked in that order.

llama.cpp's phimoe runs Phi-3's graph: its norms are RMS norms plus the stored bias (transformers' PhiMoE
subtracts the mean: nn.LayerNorm), and it routes by a softmax over the top-k router logits, renormalised
(transformers' PhiMoE routes by sparsemixer: each chosen expert weighted by a softmax over the logits within
router_jitter_noise of it). The converter's own file therefore misses transformers' logits by far more than
1e-4; tests/test_family_phimoe.py measures that ceiling and shows the view matches transformers once those
two computations are swapped for llama.cpp's.
"""
from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from ..config import ANY, Harmless
from ..errors import ConfigError
from ..family import Experts, Family, Refuse, Tensor, stated, unset
from ..names import GGUF, Keys
from ..params import u32
from . import phi3

# transformers 5.24's PhimoeConfig defaults
DEFAULTS = {
    "phimoe": dict(vocab_size=32064, hidden_size=4096, intermediate_size=6400, num_hidden_layers=32,
                   num_attention_heads=32, num_key_value_heads=8, hidden_act="silu", max_position_embeddings=131072,
                   initializer_range=0.02, rms_norm_eps=1e-05, use_cache=True, pad_token_id=None, bos_token_id=1,
                   eos_token_id=2, tie_word_embeddings=False,
                   rope_parameters={"rope_theta": 1000000.0, "rope_type": "default"}, sliding_window=None,
                   attention_dropout=0.0, num_experts_per_tok=2, num_local_experts=16, output_router_logits=False,
                   router_aux_loss_coef=0.001, router_jitter_noise=0.01, input_jitter_noise=0.0,
                   attention_bias=False, lm_head_bias=False),
}

READS = frozenset({
    "vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads",
    "num_key_value_heads", "head_dim", "max_position_embeddings", "original_max_position_embeddings",
    "rms_norm_eps", "rope_parameters", "rope_scaling", "rope_theta", "sliding_window", "tie_word_embeddings",
    "hidden_act", "num_local_experts", "num_experts_per_tok",
    "attention_bias", "lm_head_bias",  # checked: llama.cpp's phimoe needs the output biases
    # sparsemixer's threshold: llama.cpp's softmax routing has none (part of the measured ceiling)
    "router_jitter_noise",
})
# a training-time multiplicative noise on the router's input: off in eval
HARMLESS: Harmless = {"input_jitter_noise": ANY}

_LAYER = "model.layers.{bid}."
_MOE = _LAYER + "block_sparse_moe."
TENSORS = (
    Tensor("model.embed_tokens.weight", GGUF.TOKEN_EMBD.weight),
    Tensor("model.norm.weight", GGUF.OUTPUT_NORM.weight),
    Tensor("model.norm.bias", GGUF.OUTPUT_NORM.bias),
    Tensor("lm_head.weight", GGUF.OUTPUT.weight),
    Tensor("lm_head.bias", GGUF.OUTPUT.bias),
    Tensor(_LAYER + "input_layernorm.weight", GGUF.ATTN_NORM.weight),
    Tensor(_LAYER + "input_layernorm.bias", GGUF.ATTN_NORM.bias),
    *(Tensor(f"{_LAYER}self_attn.{p}_proj.{wb}", f"blk.{{bid}}.attn_{g}.{wb}")
      for p, g in (("q", "q"), ("k", "k"), ("v", "v"), ("o", "output")) for wb in ("weight", "bias")),
    Tensor(_LAYER + "post_attention_layernorm.weight", GGUF.FFN_NORM.weight),
    Tensor(_LAYER + "post_attention_layernorm.bias", GGUF.FFN_NORM.bias),
    Tensor(_MOE + "gate.weight", GGUF.FFN_GATE_INP.weight),
    # the converter merges w1, w2, w3 in that order
    Experts(_MOE + "experts.{x}.w1.weight", GGUF.FFN_GATE_EXP.weight, "num_local_experts"),
    Experts(_MOE + "experts.{x}.w2.weight", GGUF.FFN_DOWN_EXP.weight, "num_local_experts"),
    Experts(_MOE + "experts.{x}.w3.weight", GGUF.FFN_UP_EXP.weight, "num_local_experts"),
)


def normalise(h: dict) -> dict:
    """PhimoeConfig's constructor: KV heads default to the heads; a scaled rope's original_max_position_embeddings
    is also the top-level one (the converter reads the rope's first). It folds no partial rotary factor."""
    if h.get("num_key_value_heads") is None:
        h["num_key_value_heads"] = h["num_attention_heads"]
    rope = h["rope_parameters"]
    if rope.get("rope_type") != "default" and "original_max_position_embeddings" in rope:
        h["original_max_position_embeddings"] = rope["original_max_position_embeddings"]
    return h


REFUSE = (
    *phi3.REFUSE,
    Refuse("original_max_position_embeddings", stated, "not stated (top level or in the rope "
           "parameters): the converter's Phi-3 list writes it and fails without it (KeyError)"),
    *(Refuse(key, bool, f"llama.cpp's phimoe architecture requires an {what}, which this checkpoint does not store "
             f"(every released Phi-3.5-MoE has it)")
      for key, what in (("attention_bias", "attention output bias (attn_output.bias)"),
                        ("lm_head_bias", "output bias (output.bias)"))),
    Refuse("tie_word_embeddings", unset, "llama.cpp's phimoe needs an output matrix of its own, which a tied "
           "checkpoint does not store"),
    Refuse("num_local_experts", bool, "llama.cpp's phimoe needs experts"),
)


def check(h: dict, path: Path) -> None:
    phi3.check(h, path)
    if h.get("head_dim") is not None and h["head_dim"] * h["num_attention_heads"] != h["hidden_size"]:
        raise ConfigError(f"{path}: head_dim {h['head_dim']} x {h['num_attention_heads']} heads is not hidden_size "
                          f"{h['hidden_size']}; llama.cpp's phimoe sizes its heads hidden_size / heads")


def _as_phimoe(kv: list) -> list:
    return [replace(e, key="phimoe." + e.key.removeprefix("phi3.")) if e.key.startswith("phi3.") else e for e in kv]


def parameters(h: dict, block_count: int, file_type: int) -> list:
    """Phi3MiniModel's list under the phimoe prefix, then the expert counts (PhiMoeModel.set_gguf_parameters)."""
    return [*_as_phimoe(phi3.parameters(h, block_count, file_type)),
            u32(Keys.LLM.EXPERT_USED_COUNT.format(arch="phimoe"), h["num_experts_per_tok"]),
            u32(Keys.LLM.EXPERT_COUNT.format(arch="phimoe"), h["num_local_experts"])]


FAMILY = Family(
    name="phimoe",
    gguf_arch="phimoe",
    # the released (remote-code) name only: the pinned converter does not register transformers' PhimoeForCausalLM
    architectures=("PhiMoEForCausalLM",),
    defaults=DEFAULTS,
    reads=READS,
    harmless=HARMLESS,
    tensors=TENSORS,
    parameters=parameters,
    vocab=phi3.vocab,
    generated=phi3.generated,
    refuse=REFUSE,
    check=check,
    normalise=normalise,
    tensor_time_kv=lambda h: _as_phimoe(phi3.tensor_time_kv(h)),
    notes={"ceiling": "llama.cpp's phimoe computes RMS norms and softmax top-k routing where PhiMoE computes "
                      "LayerNorms and sparsemixer routing: logits tested against the converter's own file's miss"},
)

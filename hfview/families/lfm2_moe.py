"""LFM2-MoE (LFM2-8B-A1B, LFM2.5-8B-A1B: Lfm2MoeForCausalLM) -> llama.cpp `lfm2moe` (the converter's LFM2MoeModel).

LFM2's hybrid of gated short convolutions and attention (hfview.families.lfm2: the same tensors up to the
feed-forward) over a mixture: the first num_dense_layers layers end in LFM2's SwiGLU at intermediate_size (no
width adjustment here), the rest in a sigmoid router whose per-expert bias (expert_bias, llama.cpp's exp_probs_b)
only chooses the experts, stacked experts (w1 gate, w2 down, w3 up, merged in that order), the chosen weights
renormalised. KV heads are written per layer (0 on conv layers).
"""
from __future__ import annotations

from pathlib import Path

from ..config import Harmless
from ..errors import ConfigError
from ..family import Experts, Family, Refuse, Tensor, stated, unset
from ..gguf_layout import KV, ValueType
from ..names import GGUF, Keys
from ..params import text_model_parameters, u32
from .lfm2 import TENSORS as LFM2_TENSORS
from .lfm2 import vocab

# transformers 5.24's Lfm2MoeConfig defaults (it computes no layer_types: a config must state them)
DEFAULTS = {
    "lfm2_moe": dict(vocab_size=65536, hidden_size=2048, intermediate_size=7168, moe_intermediate_size=1792,
                     num_hidden_layers=32, pad_token_id=0, bos_token_id=1, eos_token_id=2, tie_word_embeddings=True,
                     rope_parameters={"rope_theta": 1000000.0, "rope_type": "default"},
                     max_position_embeddings=128000, initializer_range=0.02, use_cache=True, norm_eps=1e-05,
                     num_attention_heads=32, num_key_value_heads=8, conv_bias=False, conv_L_cache=3,
                     num_dense_layers=2, num_experts_per_tok=4, output_router_logits=False, num_experts=32,
                     use_expert_bias=True, routed_scaling_factor=1.0, norm_topk_prob=True, layer_types=None),
}

READS = frozenset({
    "vocab_size", "hidden_size", "intermediate_size", "moe_intermediate_size", "num_hidden_layers",
    "num_attention_heads", "num_key_value_heads", "head_dim", "max_position_embeddings", "norm_eps",
    "tie_word_embeddings", "rope_parameters", "rope_scaling", "rope_theta", "conv_bias", "conv_L_cache",
    "num_dense_layers", "num_experts", "num_experts_per_tok", "use_expert_bias", "routed_scaling_factor",
    "norm_topk_prob", "layer_types",
})
HARMLESS: Harmless = {}

_FFN = "model.layers.{bid}.feed_forward."
_dense = {"ffn_gate", "ffn_up", "ffn_down"}
TENSORS = (
    *(t if not isinstance(t, Tensor) or t.gguf.split(".")[-2] not in _dense else Tensor(t.hf, t.gguf, required=False)
      for t in LFM2_TENSORS),
    Tensor(_FFN + "gate.weight", GGUF.FFN_GATE_INP.weight, required=False),
    Tensor(_FFN + "expert_bias", GGUF.FFN_EXP_PROBS_B.bias, required=False),
    Experts(_FFN + "experts.{x}.w1.weight", GGUF.FFN_GATE_EXP.weight, "num_experts", required=False),
    Experts(_FFN + "experts.{x}.w2.weight", GGUF.FFN_DOWN_EXP.weight, "num_experts", required=False),
    Experts(_FFN + "experts.{x}.w3.weight", GGUF.FFN_UP_EXP.weight, "num_experts", required=False),
)


REFUSE = (
    Refuse("layer_types", stated, "Lfm2MoeConfig computes no layer_types, and which layers are conv "
           "and which attention cannot be known (every released LFM2-MoE states them)"),
    Refuse("layer_types", lambda v: "conv" in v, "no conv layer: llama.cpp's lfm2moe aborts on a model without one "
           "(its recurrent cache); no released LFM2-MoE is all attention"),
    Refuse("conv_bias", unset, "llama.cpp's lfm2moe has no short-convolution biases"),
    Refuse("use_expert_bias", bool, "llama.cpp's lfm2moe needs the routing bias (exp_probs_b) in every mixture layer, "
           "which such a checkpoint does not store"),
    Refuse("norm_topk_prob", bool, "llama.cpp's lfm2moe always renormalises the chosen experts' weights, so this "
           "checkpoint would run wrong"),
    Refuse("routed_scaling_factor", (1.0,), "the converter writes no expert weight scale for lfm2moe, so llama.cpp "
           "would not apply it"),
    Refuse("rope_parameters.rope_type", ("default",), "no released LFM2-MoE scales its rope, and the converter writes "
           "no scaling for lfm2moe", default="default"),
)


def check(h: dict, path: Path) -> None:
    n = h["num_hidden_layers"]
    types = h["layer_types"]
    if len(types) != n or set(types) - {"conv", "full_attention"}:
        raise ConfigError(f"{path}: layer_types {list(types)}: LFM2-MoE needs one of 'conv' / 'full_attention' per "
                          f"layer ({n} layers)")
    if not 0 <= h["num_dense_layers"] <= n:
        raise ConfigError(f"{path}: num_dense_layers {h['num_dense_layers']}: must lie between 0 and the "
                          f"{n} layers")
    if not h["num_experts"] or not h["num_experts_per_tok"]:
        raise ConfigError(f"{path}: num_experts {h['num_experts']} / num_experts_per_tok "
                          f"{h['num_experts_per_tok']}: llama.cpp's lfm2moe needs experts in its mixture layers")
    head_dim = h.get("head_dim") or h["hidden_size"] // h["num_attention_heads"]
    if head_dim * h["num_attention_heads"] != h["hidden_size"]:
        raise ConfigError(f"{path}: head_dim {head_dim} x {h['num_attention_heads']} heads is not hidden_size "
                          f"{h['hidden_size']}; llama.cpp's lfm2moe assumes it is")


def parameters(h: dict, block_count: int, file_type: int) -> list:
    """LFM2MoeModel.set_gguf_parameters: TextModel's entries with a per-layer KV head list, then the expert
    width, the leading dense layers, the sigmoid gating function, the vocabulary size and the conv cache."""
    kv_heads = [h["num_key_value_heads"] if t == "full_attention" else 0 for t in h["layer_types"]]
    kv = text_model_parameters({k: v for k, v in h.items() if k != "num_key_value_heads"}, "lfm2moe",
                               block_count, file_type)
    at = next(i for i, e in enumerate(kv) if e.key == "lfm2moe.attention.head_count") + 1
    kv.insert(at, KV(Keys.Attention.HEAD_COUNT_KV.format(arch="lfm2moe"), ValueType.ARRAY, kv_heads, ValueType.INT32))
    return kv + [u32(Keys.LLM.EXPERT_FEED_FORWARD_LENGTH.format(arch="lfm2moe"), h["moe_intermediate_size"]),
                 u32(Keys.LLM.LEADING_DENSE_BLOCK_COUNT.format(arch="lfm2moe"), h["num_dense_layers"]),
                 u32(Keys.LLM.EXPERT_GATING_FUNC.format(arch="lfm2moe"), 2),  # sigmoid
                 u32(Keys.LLM.VOCAB_SIZE.format(arch="lfm2moe"), h["vocab_size"]),
                 u32(Keys.ShortConv.L_CACHE.format(arch="lfm2moe"), h["conv_L_cache"])]


FAMILY = Family(
    name="lfm2_moe",
    gguf_arch="lfm2moe",
    architectures=("Lfm2MoeForCausalLM",),
    defaults=DEFAULTS,
    reads=READS,
    harmless=HARMLESS,
    tensors=TENSORS,
    parameters=parameters,
    vocab=vocab,
    refuse=REFUSE,
    check=check,
)

"""Ling 1.x (Ling-lite, Ling-lite-1.5, Ling-plus, Ling-Coder-lite: BailingMoeForCausalLM, model_type
"bailing_moe" as released) -> llama.cpp `bailingmoe` (the converter's BailingMoeModel).

Remote code only: transformers 5.24 has no class, so the converter reads config.json as it is (nothing is filled
in). Ling 2.0 (BailingMoeV2ForCausalLM) shares the model_type and is read by hfview.families.bailing_moe_v2: the
registry tells the two apart by `architectures`.

The block: one fused query_key_value (q rows, then k, then v), which the converter splits into attn_q, attn_k
and attn_v, q and k each regrouped from rotate-half halves into rotation pairs (llama.cpp's bailingmoe ropes the
whole head in normal order); no q/k norms, no biases; every layer a mixture: a softmax router (`mlp.gate`),
top-k, the chosen weights renormalised where norm_topk_prob says (scale 1.0 written), per-expert SwiGLUs stacked
down, gate, up, and num_shared_experts shared experts fused into one SwiGLU of moe_intermediate_size x
num_shared_experts. norm_head: the output matrix's columns divided by their L2 norm (+ 1e-7) in float32, as the
converter does and as Ling's code normalises lm_head before the logits (views.ColumnsNormalised).
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

from ..config import ANY, Harmless
from ..errors import CheckpointError, ConfigError
from ..family import Experts, Family, Split, Tensor, stored
from ..names import GGUF, Keys
from ..params import boolean, f32, text_model_parameters, u32
from ..views import ColumnsNormalised, RowSelection, rotation_pairs
from . import sarvam_moe
from ._parts.checks import architecture, check_no_pooling, check_rope, check_silu
from ._parts.vocab import gpt2_vocab

ARCH = "bailingmoe"

DEFAULTS = {"bailing_moe": {}}  # no transformers class: nothing is filled in

READS = frozenset(sarvam_moe.READS | {"use_bias", "norm_head", "norm_softmax", "use_rmsnorm", "partial_rotary_factor",
                                      "rotary_dim", "using_split_qkv_in_self_attention"})
HARMLESS: Harmless = {
    # dropout rates and training-only settings: no forward pass reads them
    "embedding_dropout": ANY, "output_dropout": ANY, "pretraining_tp": ANY,
    # Qwen-style window bookkeeping Ling's code never applies; use_sliding_window only false (no window runs)
    "max_window_layers": ANY, "sliding_window": ANY, "use_sliding_window": (False,),
    "router_dtype": ANY,  # llama.cpp scores experts in f32
}
ALIASES = dict(sarvam_moe.ALIASES)

_NEEDED = ("vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads", "rms_norm_eps",
           "max_position_embeddings", "n_routed_experts", "num_experts_per_tok", "moe_intermediate_size",
           "n_shared_experts", "first_k_dense_replace", "norm_topk_prob")


def head_dim(h: dict) -> int:
    return h.get("head_dim") or h["hidden_size"] // h["num_attention_heads"]


def _qkv_part(part: int):
    """Part `part` (q, k, v) of the fused query_key_value; q and k regrouped into rotation pairs (the converter's
    permute: k by num_key_value_heads)."""
    def make(sources, h):
        src = sources[0]
        d, n_head, n_kv = head_dim(h), h["num_attention_heads"], h["num_key_value_heads"]
        widths = (n_head * d, n_kv * d, n_kv * d)
        if src.shape[0] != sum(widths):
            raise CheckpointError(f"tensor {src.name!r} has {src.shape[0]} rows; q, k and v of {n_head} and 2 x "
                                  f"{n_kv} heads of {d} need {sum(widths)}")
        start = sum(widths[:part])
        if part == 2:
            return RowSelection(src, start + np.arange(widths[2]), "value rows")
        heads = (n_head, n_kv)[part]
        return RowSelection(src, start + rotation_pairs(widths[part], heads),
                            f"{'query' if part == 0 else 'key'} rows, rotation pairs over {heads} heads")
    return make


def _output(sources, h):
    """lm_head as the converter writes it: columns normalised where norm_head says, else as stored."""
    return ColumnsNormalised(sources[0]) if h.get("norm_head") else stored(sources, h)


_L = "model.layers.{bid}."
_MLP = _L + "mlp."
TENSORS = (
    Tensor("model.word_embeddings.weight", GGUF.TOKEN_EMBD.weight),
    Tensor("model.norm.weight", GGUF.OUTPUT_NORM.weight),
    Tensor("lm_head.weight", GGUF.OUTPUT.weight, _output),
    Tensor(_L + "input_layernorm.weight", GGUF.ATTN_NORM.weight),
    Split(_L + "attention.query_key_value.weight", ((GGUF.ATTN_Q.weight, _qkv_part(0)),
                                                    (GGUF.ATTN_K.weight, _qkv_part(1)),
                                                    (GGUF.ATTN_V.weight, _qkv_part(2)))),
    Tensor(_L + "attention.dense.weight", GGUF.ATTN_OUT.weight),
    Tensor(_L + "post_attention_layernorm.weight", GGUF.FFN_NORM.weight),
    Tensor(_MLP + "gate.weight", GGUF.FFN_GATE_INP.weight),
    *(Experts(f"{_MLP}experts.{{x}}.{proj}_proj.weight", f"blk.{{bid}}.ffn_{proj}_exps.weight", "n_routed_experts")
      for proj in ("down", "gate", "up")),
    *(Tensor(f"{_MLP}shared_experts.{proj}_proj.weight", f"blk.{{bid}}.ffn_{proj}_shexp.weight")
      for proj in ("gate", "up", "down")),
)


def normalise(h: dict) -> dict:
    if h.get("num_key_value_heads") is None and h.get("num_attention_heads") is not None:
        h["num_key_value_heads"] = h["num_attention_heads"]  # Ling's config: 0 or absent means one per head
    elif h.get("num_key_value_heads") == 0:
        h["num_key_value_heads"] = h["num_attention_heads"]
    return h


def check(h: dict, path: Path) -> None:
    if architecture(h) != "BailingMoeForCausalLM":
        raise ConfigError(f"{path}: architectures {h.get('architectures')!r}: the bailing_moe family reads "
                          f"BailingMoeForCausalLM (Ling 1.x)")
    missing = [k for k in _NEEDED if h.get(k) is None]
    if missing:
        raise ConfigError(f"{path}: Ling 1.x needs {missing[0]!r} (read as stated: transformers has no class to fill "
                          f"it in); add it as the released config.json has it")
    check_silu(h, path, ARCH)
    check_rope(h, path, ARCH, allowed=("default", "linear", "yarn"))
    check_no_pooling(path)
    for key, off in (("attention_bias", False), ("use_bias", False), ("use_qk_norm", False),
                     ("norm_softmax", False), ("use_rmsnorm", True), ("using_split_qkv_in_self_attention", False)):
        if key in h and h[key] is not None and bool(h[key]) is not off:
            raise ConfigError(f"{path}: {key} {h[key]!r}: llama.cpp's {ARCH} computes Ling 1.x with it "
                              f"{str(off).lower()} (no biases, no q/k norms, RMSNorm, one fused qkv)")
    if h.get("tie_word_embeddings"):
        raise ConfigError(f"{path}: tie_word_embeddings true: llama.cpp's {ARCH} needs an output matrix of its own, "
                          f"which a tied checkpoint does not store")
    if h["num_attention_heads"] % h["num_key_value_heads"]:
        raise ConfigError(f"{path}: {h['num_attention_heads']} attention heads do not group over "
                          f"{h['num_key_value_heads']} KV heads")
    if head_dim(h) % 2:
        raise ConfigError(f"{path}: head_dim {head_dim(h)} is odd: rope rotates pairs")
    factor = (h.get("rope_parameters") or {}).get("partial_rotary_factor", h.get("partial_rotary_factor", 1.0))
    if factor != 1.0 or h.get("rotary_dim") not in (None, head_dim(h)):
        raise ConfigError(f"{path}: partial_rotary_factor {factor!r} / rotary_dim {h.get('rotary_dim')!r}: the "
                          f"converter writes Ling 1.x's rope over the whole head")
    if h["first_k_dense_replace"]:
        raise ConfigError(f"{path}: first_k_dense_replace {h['first_k_dense_replace']}: llama.cpp's {ARCH} loads "
                          f"every layer as a mixture (router, experts, shared experts), so leading dense layers "
                          f"cannot be presented")
    if not h["n_shared_experts"]:
        raise ConfigError(f"{path}: n_shared_experts {h['n_shared_experts']!r}: llama.cpp's {ARCH} always loads "
                          f"the shared experts")
    if (h.get("n_group") or 1) > 1:
        raise ConfigError(f"{path}: n_group {h['n_group']}: llama.cpp's {ARCH} routes without expert groups")
    if h.get("routed_scaling_factor") not in (None, 1.0):
        raise ConfigError(f"{path}: routed_scaling_factor {h['routed_scaling_factor']!r}: the converter writes "
                          f"Ling 1.x's expert weights scale as 1.0")
    func = h.get("score_function")
    if func not in (None, "softmax"):
        raise ConfigError(f"{path}: score_function {func!r}: llama.cpp's {ARCH} scores experts by softmax only")
    if h.get("num_nextn_predict_layers"):
        raise ConfigError(f"{path}: num_nextn_predict_layers {h['num_nextn_predict_layers']}: Ling 1.x's "
                          f"architecture has no next-token-prediction layers")
    if h["num_experts_per_tok"] > h["n_routed_experts"]:
        raise ConfigError(f"{path}: num_experts_per_tok {h['num_experts_per_tok']} is more than the "
                          f"{h['n_routed_experts']} experts")


def parameters(h: dict, block_count: int, file_type: int) -> list:
    """BailingMoeModel.set_gguf_parameters after TextModel's."""
    return [*text_model_parameters(h, ARCH, block_count, file_type),
            u32(Keys.Rope.DIMENSION_COUNT.format(arch=ARCH), head_dim(h)),
            u32(Keys.LLM.LEADING_DENSE_BLOCK_COUNT.format(arch=ARCH), h["first_k_dense_replace"]),
            u32(Keys.LLM.VOCAB_SIZE.format(arch=ARCH), h["vocab_size"]),
            u32(Keys.LLM.EXPERT_FEED_FORWARD_LENGTH.format(arch=ARCH), h["moe_intermediate_size"]),
            f32(Keys.LLM.EXPERT_WEIGHTS_SCALE.format(arch=ARCH), 1.0),
            u32(Keys.LLM.EXPERT_SHARED_COUNT.format(arch=ARCH), h["n_shared_experts"]),
            boolean(Keys.LLM.EXPERT_WEIGHTS_NORM.format(arch=ARCH), h["norm_topk_prob"])]


FAMILY = Family(
    name="bailing_moe",
    gguf_arch=ARCH,
    architectures=("BailingMoeForCausalLM",),
    defaults=DEFAULTS,
    reads=READS,
    harmless=HARMLESS,
    tensors=TENSORS,
    parameters=parameters,
    vocab=gpt2_vocab,
    check=check,
    normalise=normalise,
    aliases=ALIASES,
)

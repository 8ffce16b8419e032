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
from ..family import Experts, Family, Refuse, Split, Tensor, stored, unset
from ..names import GGUF, Keys
from ..params import boolean, f32, text_model_parameters, u32
from ..views import ColumnsNormalised, RowSelection, rotation_pairs
from . import sarvam_moe
from ._parts.checks import check_no_pooling, rope_types, silu_only
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


_AS_LING1 = "(no biases, no q/k norms, RMSNorm, one fused qkv)"
REFUSE = (
    # absent architectures: the engine lets model_type decide, which Ling 2.0 shares
    Refuse("architectures", lambda v: bool(v) and v[0] == "BailingMoeForCausalLM",
           "the bailing_moe family reads BailingMoeForCausalLM (Ling 1.x)"),
    silu_only(ARCH),
    rope_types(ARCH),
    *(Refuse(key, unset, f"llama.cpp's {ARCH} computes Ling 1.x with it false {_AS_LING1}")
      for key in ("attention_bias", "use_bias", "use_qk_norm", "norm_softmax")),
    Refuse("use_rmsnorm", lambda v: v is None or bool(v), f"llama.cpp's {ARCH} computes Ling 1.x with it true "
           f"{_AS_LING1}"),
    Refuse("using_split_qkv_in_self_attention", unset, f"llama.cpp's {ARCH} computes Ling 1.x with it false "
           f"{_AS_LING1}"),
    Refuse("tie_word_embeddings", unset, f"llama.cpp's {ARCH} needs an output matrix of its own, which a tied "
           f"checkpoint does not store"),
    Refuse("first_k_dense_replace", unset, f"llama.cpp's {ARCH} loads every layer as a mixture (router, experts, "
           f"shared experts), so leading dense layers cannot be presented"),
    Refuse("n_shared_experts", bool, f"llama.cpp's {ARCH} always loads the shared experts"),
    Refuse("n_group", lambda v: (v or 1) <= 1, f"llama.cpp's {ARCH} routes without expert groups"),
    Refuse("routed_scaling_factor", (None, 1.0), "the converter writes Ling 1.x's expert weights scale as 1.0"),
    Refuse("score_function", (None, "softmax"), f"llama.cpp's {ARCH} scores experts by softmax only"),
    Refuse("num_nextn_predict_layers", unset, "Ling 1.x's architecture has no next-token-prediction layers"),
)


def check(h: dict, path: Path) -> None:
    missing = [k for k in _NEEDED if h.get(k) is None]
    if missing:
        raise ConfigError(f"{path}: Ling 1.x needs {missing[0]!r} (read as stated: transformers has no class to fill "
                          f"it in); add it as the released config.json has it")
    check_no_pooling(path)
    if h["num_attention_heads"] % h["num_key_value_heads"]:
        raise ConfigError(f"{path}: {h['num_attention_heads']} attention heads do not group over "
                          f"{h['num_key_value_heads']} KV heads")
    if head_dim(h) % 2:
        raise ConfigError(f"{path}: head_dim {head_dim(h)} is odd: rope rotates pairs")
    factor = (h.get("rope_parameters") or {}).get("partial_rotary_factor", h.get("partial_rotary_factor", 1.0))
    if factor != 1.0 or h.get("rotary_dim") not in (None, head_dim(h)):
        raise ConfigError(f"{path}: partial_rotary_factor {factor!r} / rotary_dim {h.get('rotary_dim')!r}: the "
                          f"converter writes Ling 1.x's rope over the whole head")
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
    refuse=REFUSE,
    check=check,
    normalise=normalise,
    aliases=ALIASES,
)

"""MiniMax-M3 text decoder (MiniMaxM3SparseForConditionalGeneration, the image-text wrapper MiniMax-M3 is released
as, and the text-only MiniMaxM3SparseForCausalLM) -> llama.cpp `minimax-m3` (the converter's MiniMaxM3Model).

The wrapper's text_config is merged over its top level (config.py) and its text weights' `language_model.` prefix
goes (the converter's rename); the vision tower and the projectors are left out, as the converter's text
conversion leaves them. Grouped-query attention with per-head q/k RMS norms, partial rotary (the first rotary_dim
of each head, rotate-half: Q/K as stored); leading dense layers (moe_layer_freq 0), then layers with a sigmoid
router biased by e_score_correction_bias (renormalised, times routed_scaling_factor), w1/w2/w3 experts, shared
experts, and MiniMax sparse attention: a lightning indexer (index q/k projections and norms) picks key blocks.
Every RMSNorm is Gemma-style (1 + w): the converter bakes the 1 in. The activation is swigluoai with alpha 1.702
and limit 7.0, which llama.cpp has fixed.

transformers 5.24's MiniMaxM3VLTextConfig consumes sparse_attention_config and moe_layer_freq (into layer_types,
mlp_layer_types, index_*), so its to_dict, which the pinned converter reads, lacks them, and the converter stops
(KeyError 'sparse_attention_config') on a config that states them only in text_config, as releases do. The view
reads config.json itself and presents what the converter writes where it can read them (stated at the top level
as well, which MiniMaxM3VLConfig keeps): the fixture does so, and its bytes are tested against that file.
"""
from __future__ import annotations

from pathlib import Path

from ..config import ANY, Harmless
from ..errors import CheckpointError, ConfigError
from ..family import Experts, Family, Refuse, Skip, Tensor, stated, unset
from ..names import GGUF, Keys
from ..params import boolean, f32, text_model_parameters, u32
from ..views import OFFSET_ONE
from ._parts.checks import check_no_pooling, rope_types
from ._parts.vocab import gpt2_vocab

# transformers 5.24's MiniMaxM3VLTextConfig defaults, as data (layer_types and mlp_layer_types are computed from
# sparse_attention_config and moe_layer_freq, which normalise() does as its __post_init__)
DEFAULTS = {
    "minimax_m3_vl_text": dict(
        vocab_size=200064, hidden_size=6144, intermediate_size=3072, num_hidden_layers=60, num_attention_heads=64,
        num_key_value_heads=4, head_dim=128, hidden_act="silu", max_position_embeddings=524288,
        initializer_range=0.02, rms_norm_eps=1e-06, use_cache=True, pad_token_id=None, bos_token_id=200034,
        eos_token_id=200020, tie_word_embeddings=False, attention_dropout=0.0, num_experts_per_tok=4,
        num_local_experts=128, output_router_logits=False, router_aux_loss_coef=0.001, router_jitter_noise=0.0,
        rope_parameters={"rope_theta": 5000000.0, "rope_type": "default"}, dense_intermediate_size=12288,
        shared_intermediate_size=3072, routed_scaling_factor=2.0, rotary_dim=64, swiglu_alpha=1.702,
        swiglu_limit=7.0, index_n_heads=4, index_head_dim=128, index_block_size=128, index_topk_blocks=16,
        index_local_blocks=1),
}

READS = frozenset({
    "vocab_size", "hidden_size", "intermediate_size", "dense_intermediate_size", "shared_intermediate_size",
    "num_hidden_layers", "num_attention_heads", "num_key_value_heads", "head_dim", "max_position_embeddings",
    "rms_norm_eps", "rope_parameters", "rope_scaling", "rope_theta", "partial_rotary_factor", "tie_word_embeddings",
    "num_local_experts",
    "num_experts", "num_experts_per_tok", "routed_scaling_factor",
    "rotary_dim",               # the converter writes it as rope.dimension_count; checked against the rotary fraction
    "scoring_func",             # the converter writes the gating function from it: sigmoid is MiniMax-M3's
    "n_shared_experts",         # the converter writes it (expert_shared_count); checked against the shared width
    "moe_layer_freq",           # transformers' mlp_layer_types; the converter counts its leading zeros
    "sparse_attention_config",  # transformers' layer_types and index_*; the converter writes the indexer's sizes
})
# hidden_act: transformers' MiniMax-M3 computes swigluoai inline whatever it says (releases say "swigluoai") and
# llama.cpp's minimax-m3 does the same; alpha and limit are the constants llama.cpp's swigluoai has. The wrapper's
# vision side and image/video tokens are never touched by a text forward.
# use_qk_norm, qk_norm_type and use_routing_bias: releases state what the model always does (per-head q/k norms,
# a selection bias), the only way transformers' MiniMax-M3 and llama.cpp's minimax-m3 compute.
HARMLESS: Harmless = {"hidden_act": ANY, "swiglu_alpha": (1.702,), "swiglu_limit": (7.0,),
                      "use_qk_norm": (True,), "qk_norm_type": ("per_head",), "use_routing_bias": (True,),
                      **dict.fromkeys(("vision_config", "image_token_index", "video_token_index",
                                       "projector_hidden_size", "merged_hidden_size"), ANY)}

ARCHITECTURES = ("MiniMaxM3SparseForConditionalGeneration", "MiniMaxM3SparseForCausalLM")
_ARCH = "minimax-m3"
_L = "model.layers.{bid}."
_MOE = f"{_L}block_sparse_moe."
_NORM = (OFFSET_ONE,)

TENSORS = (
    Skip("vision_tower.{rest}"), Skip("multi_modal_projector.{rest}"), Skip("patch_merge_mlp.{rest}"),
    Tensor("model.embed_tokens.weight", GGUF.TOKEN_EMBD.weight),
    Tensor("model.norm.weight", GGUF.OUTPUT_NORM.weight, steps=_NORM),
    Tensor("lm_head.weight", GGUF.OUTPUT.weight),
    Tensor(f"{_L}input_layernorm.weight", GGUF.ATTN_NORM.weight, steps=_NORM),
    Tensor(f"{_L}post_attention_layernorm.weight", GGUF.FFN_NORM.weight, steps=_NORM),
    *(Tensor(f"{_L}self_attn.{p}_proj.weight", f"blk.{{bid}}.attn_{g}.weight")
      for p, g in (("q", "q"), ("k", "k"), ("v", "v"), ("o", "output"))),
    Tensor(f"{_L}self_attn.q_norm.weight", GGUF.ATTN_Q_NORM.weight, steps=_NORM),
    Tensor(f"{_L}self_attn.k_norm.weight", GGUF.ATTN_K_NORM.weight, steps=_NORM),
    # per layer kind: checked block by block in stored_blocks()
    *(Tensor(f"{_L}mlp.{p}_proj.weight", f"blk.{{bid}}.ffn_{p}.weight", required=False)
      for p in ("gate", "up", "down")),
    *(Tensor(f"{_L}self_attn.index_{p}.weight", f"blk.{{bid}}.indexer.{p}.weight", required=False,
             steps=_NORM if p.endswith("norm") else ())
      for p in ("q_proj", "k_proj", "q_norm", "k_norm")),
    Tensor(f"{_MOE}gate.weight", GGUF.FFN_GATE_INP.weight, required=False),
    Tensor(f"{_MOE}e_score_correction_bias", GGUF.FFN_EXP_PROBS_B.bias, required=False),
    # stacked in the converter's order: w1 (gate), w2 (down), w3 (up)
    *(Experts(f"{_MOE}experts.{{x}}.{w}.weight", f"blk.{{bid}}.ffn_{part}_exps.weight", "num_local_experts",
              required=False)
      for w, part in (("w1", "gate"), ("w2", "down"), ("w3", "up"))),
    *(Tensor(f"{_MOE}shared_experts.{p}_proj.weight", f"blk.{{bid}}.ffn_{p}_shexp.weight", required=False)
      for p in ("gate", "up", "down")),
)

_DENSE_PARTS = tuple(f"mlp.{p}_proj.weight" for p in ("gate", "up", "down"))
_SPARSE_PARTS = (*(f"self_attn.index_{p}.weight" for p in ("q_proj", "k_proj", "q_norm", "k_norm")),
                 "block_sparse_moe.gate.weight", "block_sparse_moe.e_score_correction_bias",
                 *(f"block_sparse_moe.shared_experts.{p}_proj.weight" for p in ("gate", "up", "down")))
# what sparse_attention_config may say: the five sizes, and what transformers and llama.cpp both compute one way
_SPARSE_SIZES = {"sparse_num_index_heads": "index_n_heads", "sparse_index_dim": "index_head_dim",
                 "sparse_block_size": "index_block_size", "sparse_topk_blocks": "index_topk_blocks",
                 "sparse_local_block": "index_local_blocks"}
_SPARSE_KNOWN = {*_SPARSE_SIZES, "sparse_attention_freq", "use_sparse_attention", "sparse_score_type",
                 "sparse_init_block", "sparse_disable_index_value", "sparse_topk"}


def normalise(h: dict) -> dict:
    """MiniMaxM3VLTextConfig's attribute map and __post_init__: num_experts is num_local_experts; the indexer's
    sizes come from sparse_attention_config; layer_types (sparse attention or not) from its sparse_attention_freq,
    mlp_layer_types from moe_layer_freq."""
    if "num_experts" in h:
        h["num_local_experts"] = h.pop("num_experts")
    sac = h.get("sparse_attention_config") or {}
    for legacy, flat in _SPARSE_SIZES.items():
        if legacy in sac:
            h[flat] = sac[legacy]
    return h


def _flags(h: dict, path: Path, key: str, values, n: int) -> list[bool]:
    if not isinstance(values, list) or len(values) != n or any(v not in (0, 1) for v in values):
        raise ConfigError(f"{path}: {key} {values!r}: one 0 or 1 per layer ({n} layers, num_hidden_layers) expected")
    return [bool(v) for v in values]


REFUSE = (
    rope_types(_ARCH, ("default",)),
    Refuse("tie_word_embeddings", unset, f"llama.cpp's {_ARCH} needs an output matrix of its own"),
    Refuse("scoring_func", ("sigmoid",), "transformers' MiniMax-M3 routes by sigmoid, and the converter tells "
           "llama.cpp so only from scoring_func \"sigmoid\" (otherwise llama.cpp would fall back to softmax)"),
    Refuse("sparse_attention_config", lambda v: isinstance(v, dict), "must be a JSON object, stated (in text_config, "
           "as released): the converter writes the indexer from it"),
    # absent, or null (no count either)
    *(Refuse(f"sparse_attention_config.{key}", stated, "missing: the converter writes it")
      for key in _SPARSE_SIZES),
    *(Refuse(f"sparse_attention_config.{key}", lambda v, least=(0 if key == "sparse_local_block" else 1):
             isinstance(v, int) and not isinstance(v, bool) and v >= least, "not a count")
      for key in _SPARSE_SIZES),
    *(Refuse(f"sparse_attention_config.{key}", (off,), f"transformers' MiniMax-M3 and llama.cpp's {_ARCH} compute "
             f"as if it were {off!r} only", default=off)
      for key, off in (("sparse_score_type", "max"), ("sparse_init_block", 0))),
    # `is True`, not (True,): 1 == True would pass a tuple
    Refuse("sparse_attention_config.use_sparse_attention", lambda v: v is True, f"transformers' MiniMax-M3 and "
           f"llama.cpp's {_ARCH} run sparse attention regardless", default=True),
)


def check(h: dict, path: Path) -> None:
    check_no_pooling(path)
    n = h["num_hidden_layers"]
    if "moe_layer_freq" not in h or "sparse_attention_config" not in h:
        raise ConfigError(f"{path}: moe_layer_freq and sparse_attention_config must both be stated (in text_config, as "
                          f"released): the converter writes the dense-layer count and the indexer from them and fails "
                          f"without them")
    moe = _flags(h, path, "moe_layer_freq", h["moe_layer_freq"], n)
    dense = moe.index(True) if True in moe else n
    if not any(moe) or not all(moe[dense:]):
        raise ConfigError(f"{path}: moe_layer_freq {h['moe_layer_freq']}: llama.cpp's {_ARCH} runs leading dense "
                          f"layers, then mixture layers only")
    sac = h["sparse_attention_config"]
    if unknown := sorted(set(sac) - _SPARSE_KNOWN):
        raise ConfigError(f"{path}: sparse_attention_config.{unknown[0]} is not a key the minimax_m3_vl_text family "
                          f"knows; hfview will not guess whether it changes the model")
    sparse = _flags(h, path, "sparse_attention_config.sparse_attention_freq", sac.get("sparse_attention_freq"), n)
    if sparse != moe:
        raise ConfigError(f"{path}: sparse_attention_config.sparse_attention_freq {sac.get('sparse_attention_freq')} "
                          f"is not moe_layer_freq {h['moe_layer_freq']}: llama.cpp's {_ARCH} runs sparse attention "
                          f"exactly on the mixture layers, transformers where sparse_attention_freq says")
    if "sparse_disable_index_value" in sac:
        off = _flags(h, path, "sparse_attention_config.sparse_disable_index_value", sac["sparse_disable_index_value"], n)
        if any(s and not o for s, o in zip(sparse, off)):
            raise ConfigError(f"{path}: sparse_attention_config.sparse_disable_index_value "
                              f"{sac['sparse_disable_index_value']}: an index-value path on a sparse layer, which "
                              f"neither transformers nor llama.cpp computes")
    if sac.get("sparse_topk", sac["sparse_topk_blocks"]) != sac["sparse_topk_blocks"]:
        raise ConfigError(f"{path}: sparse_attention_config.sparse_topk {sac['sparse_topk']} differs from "
                          f"sparse_topk_blocks {sac['sparse_topk_blocks']}, the count both compute with")
    if h["index_n_heads"] != h["num_key_value_heads"]:
        raise ConfigError(f"{path}: sparse_attention_config.sparse_num_index_heads {h['index_n_heads']} is not "
                          f"num_key_value_heads {h['num_key_value_heads']}: llama.cpp's {_ARCH} keeps one indexer head "
                          f"per KV group (it aborts otherwise)")
    head_dim, rot = h["head_dim"], h["rotary_dim"]
    # transformers folds a flat partial_rotary_factor (as releases state it) into rope_parameters
    factor = h["rope_parameters"].get("partial_rotary_factor", h.get("partial_rotary_factor", 1.0))
    if not 0 < rot <= head_dim or rot % 2 or factor * head_dim != rot:
        raise ConfigError(f"{path}: rotary_dim {rot} with rope_parameters.partial_rotary_factor {factor} over head_dim "
                          f"{head_dim}: transformers rotates head_dim x partial_rotary_factor, the converter writes "
                          f"rotary_dim; they must agree, an even width within the head")
    if rot > h["index_head_dim"]:
        raise ConfigError(f"{path}: rotary_dim {rot} is more than the indexer's head width {h['index_head_dim']}")
    shared = h.get("n_shared_experts")
    if not isinstance(shared, int) or shared < 1 or shared * h["intermediate_size"] != h["shared_intermediate_size"]:
        raise ConfigError(f"{path}: n_shared_experts {shared!r} with shared_intermediate_size "
                          f"{h['shared_intermediate_size']}: llama.cpp's {_ARCH} sizes the shared expert as "
                          f"n_shared_experts x intermediate_size ({h['intermediate_size']})")
    if not 1 <= h["num_experts_per_tok"] <= h["num_local_experts"]:
        raise ConfigError(f"{path}: num_experts_per_tok {h['num_experts_per_tok']} with num_local_experts "
                          f"{h['num_local_experts']}")


def stored_blocks(h: dict, stored: dict) -> dict:
    """Each block has the tensors of its kind (dense FFN, or mixture with shared experts and indexer) and none of
    the other's: llama.cpp's minimax-m3 loads a block by its kind."""
    names = {name.replace("language_model.", "") for name in stored}
    for bid, moe in enumerate(h["moe_layer_freq"]):
        want, other = (_SPARSE_PARTS, _DENSE_PARTS) if moe else (_DENSE_PARTS, _SPARSE_PARTS)
        for part in want:
            if f"model.layers.{bid}.{part}" not in names:
                raise CheckpointError(f"tensor 'model.layers.{bid}.{part}' is missing: block {bid} is a "
                                      f"{'mixture' if moe else 'dense'} layer (moe_layer_freq)")
        for part in other:
            if f"model.layers.{bid}.{part}" in names:
                raise CheckpointError(f"tensor 'model.layers.{bid}.{part}' is stored, but block {bid} is a "
                                      f"{'mixture' if moe else 'dense'} layer (moe_layer_freq)")
    return h


def parameters(h: dict, block_count: int, file_type: int) -> list:
    """TextModel's entries (dense_intermediate_size as the FFN width, the gating function), MiniMaxM2Model's expert
    width and rotary width, then MiniMaxM3Model's: shared experts, routed scale, renormalised weights, the
    indexer's sizes, the leading dense count."""
    a = _ARCH
    return [*text_model_parameters(h, a, block_count, file_type),
            u32(Keys.LLM.EXPERT_FEED_FORWARD_LENGTH.format(arch=a), h["intermediate_size"]),
            u32(Keys.Rope.DIMENSION_COUNT.format(arch=a), h["rotary_dim"]),
            u32(Keys.LLM.EXPERT_SHARED_COUNT.format(arch=a), h["n_shared_experts"]),
            f32(Keys.LLM.EXPERT_WEIGHTS_SCALE.format(arch=a), h["routed_scaling_factor"]),
            boolean(Keys.LLM.EXPERT_WEIGHTS_NORM.format(arch=a), True),
            u32(Keys.Attention.Indexer.HEAD_COUNT.format(arch=a), h["index_n_heads"]),
            u32(Keys.Attention.Indexer.KEY_LENGTH.format(arch=a), h["index_head_dim"]),
            u32(Keys.Attention.Indexer.TOP_K.format(arch=a), h["index_topk_blocks"]),
            u32(Keys.Attention.Indexer.BLOCK_SIZE.format(arch=a), h["index_block_size"]),
            u32(Keys.Attention.Indexer.LOCAL_BLOCKS.format(arch=a), h["index_local_blocks"]),
            u32(Keys.LLM.LEADING_DENSE_BLOCK_COUNT.format(arch=a), h["moe_layer_freq"].index(1))]


FAMILY = Family(
    name="minimax_m3_vl_text",
    gguf_arch=_ARCH,
    architectures=ARCHITECTURES,
    defaults=DEFAULTS,
    reads=READS,
    harmless=HARMLESS,
    tensors=TENSORS,
    parameters=parameters,
    vocab=gpt2_vocab,
    refuse=REFUSE,
    check=check,
    normalise=normalise,
    stored_hparams=stored_blocks,
    kept_f32=lambda name, h: ".indexer." in name,  # the converter's tensor_force_quant
)

"""LFM2 / LFM2.5 (Lfm2ForCausalLM) -> llama.cpp `lfm2` (the converter's LFM2Model).

A hybrid: the layers layer_types calls "conv" run a gated short convolution (in_proj into three streams, a
causal depthwise conv1d over conv_L_cache positions, out_proj), the others grouped-query attention with
per-head Q/K RMSNorms (NeoX rope, nothing permuted); every layer ends in a SwiGLU. KV heads are written per layer
(0 on conv layers), the feed-forward width as LFM2's own adjustment computes it, and the model's last norm is
stored as embedding_norm (llama.cpp's token_embd_norm).

LFM2-VL (Lfm2VlForConditionalGeneration, the image-text releases LFM2-VL-450M / 1.6B / 3B) is read as its text model,
as the converter's text conversion reads it: text_config over the top level, the text weights' `language_model.`
prefix dropped, the SigLIP2 vision tower (model.vision_tower.) and the projector (model.multi_modal_projector.)
left out. The releases state text_config.architectures ["Lfm2ForCausalLM"], which the converter's
get_model_architecture routes to its LFM2Model; where text_config states none (transformers 5's save_pretrained
writes none) the converter takes the top level's Lfm2VlForConditionalGeneration, which it has as an mmproj class
only, and fails ("Model Lfm2VlForConditionalGeneration is not supported"); the view presents such a checkpoint as
the converter writes it once text_config states its architecture.
"""
from __future__ import annotations

from pathlib import Path

from ..config import ANY, Harmless
from ..errors import ConfigError
from ..family import Family, Refuse, Skip, Tensor, unset
from ..gguf_layout import KV, ValueType
from ..names import GGUF, Keys
from ..params import f32, text_model_parameters, u32
from ._parts.state_space import squeezed  # the same conv1d squeeze as Mamba's

# transformers 5.24's Lfm2Config defaults (layer_types / full_attn_idxs are computed: see normalise)
DEFAULTS = {
    "lfm2": dict(vocab_size=65536, hidden_size=2560, intermediate_size=12288, num_hidden_layers=32,
                 num_attention_heads=32, num_key_value_heads=8, max_position_embeddings=128000, initializer_range=0.02,
                 norm_eps=1e-05, use_cache=True, pad_token_id=0, bos_token_id=1, eos_token_id=2,
                 tie_word_embeddings=True, rope_parameters={"rope_theta": 1000000.0, "rope_type": "default"},
                 conv_bias=False, conv_L_cache=3, block_multiple_of=256, block_ffn_dim_multiplier=1.0,
                 block_auto_adjust_ff_dim=True, full_attn_idxs=None, layer_types=None),
}

READS = frozenset({
    "vocab_size", "hidden_size", "intermediate_size", "block_ff_dim", "num_hidden_layers", "num_attention_heads",
    "num_key_value_heads", "max_position_embeddings", "norm_eps", "tie_word_embeddings", "rope_parameters",
    "rope_scaling", "rope_theta", "conv_bias", "conv_L_cache", "block_multiple_of", "block_ffn_dim_multiplier",
    "block_auto_adjust_ff_dim", "full_attn_idxs", "layer_types",
})
# The first LFM2 / LFM2-VL releases' text configs also carry keys of Liquid's training code that neither
# transformers' Lfm2Config nor the converter reads: weight-initialisation settings, and flags in the one position
# transformers' model implements (SwiGLU feed-forward, rope applied). Their widths and eps are READS, held equal to
# the keys transformers reads (check).
_TRAINING_ONLY: Harmless = {"block_mlp_init_scale": ANY, "block_out_init_scale": ANY, "block_use_xavier_init": ANY,
                            "conv_use_xavier_init": ANY, "block_use_swiglu": (True,), "use_pos_enc": (True,)}
# stated twice under Liquid's own names: (its key, the key transformers reads)
_SAME_AS = (("block_dim", "hidden_size"), ("conv_dim", "hidden_size"), ("conv_dim_out", "hidden_size"),
            ("num_heads", "num_attention_heads"), ("block_norm_eps", "norm_eps"))
READS = READS | {k for k, _ in _SAME_AS}

# LFM2-VL's top level: its vision tower, projector, image token and image-processing settings, which a text-only
# forward never touches (image_token_index: the first releases' name of image_token_id)
HARMLESS: Harmless = dict.fromkeys((
    "vision_config", "image_token_id", "image_token_index", "downsample_factor", "projector_hidden_act",
    "projector_hidden_size", "projector_bias", "projector_use_layernorm", "vision_feature_layer",
    "do_image_splitting", "encoder_patch_size", "max_image_tokens", "min_image_tokens", "max_num_patches",
    "max_pixels_tolerance", "max_tiles", "min_tiles", "tile_size", "use_image_special_tokens", "use_thumbnail"), ANY)
HARMLESS.update(_TRAINING_ONLY)

TENSORS = (
    # LFM2-VL (text weights under model.language_model., renamed as the converter does): the vision tower and the
    # projector, which the converter's text conversion leaves out
    Skip("model.vision_tower.{rest}"),
    Skip("model.multi_modal_projector.{rest}"),
    Tensor("model.embed_tokens.weight", GGUF.TOKEN_EMBD.weight),
    Tensor("model.embedding_norm.weight", GGUF.TOKEN_EMBD_NORM.weight),
    Tensor("lm_head.weight", GGUF.OUTPUT.weight, required=False),  # absent when tied (as released)
    Tensor("model.layers.{bid}.operator_norm.weight", GGUF.ATTN_NORM.weight),
    Tensor("model.layers.{bid}.ffn_norm.weight", GGUF.FFN_NORM.weight),
    Tensor("model.layers.{bid}.self_attn.q_proj.weight", GGUF.ATTN_Q.weight, required=False),
    Tensor("model.layers.{bid}.self_attn.k_proj.weight", GGUF.ATTN_K.weight, required=False),
    Tensor("model.layers.{bid}.self_attn.v_proj.weight", GGUF.ATTN_V.weight, required=False),
    Tensor("model.layers.{bid}.self_attn.out_proj.weight", GGUF.ATTN_OUT.weight, required=False),
    Tensor("model.layers.{bid}.self_attn.q_layernorm.weight", GGUF.ATTN_Q_NORM.weight, required=False),
    Tensor("model.layers.{bid}.self_attn.k_layernorm.weight", GGUF.ATTN_K_NORM.weight, required=False),
    Tensor("model.layers.{bid}.conv.in_proj.weight", GGUF.SHORTCONV_INPROJ.weight, required=False),
    Tensor("model.layers.{bid}.conv.conv.weight", GGUF.SHORTCONV_CONV.weight, squeezed, required=False),
    Tensor("model.layers.{bid}.conv.out_proj.weight", GGUF.SHORTCONV_OUTPROJ.weight, required=False),
    Tensor("model.layers.{bid}.feed_forward.w1.weight", GGUF.FFN_GATE.weight),
    Tensor("model.layers.{bid}.feed_forward.w3.weight", GGUF.FFN_UP.weight),
    Tensor("model.layers.{bid}.feed_forward.w2.weight", GGUF.FFN_DOWN.weight),
)


def normalise(h: dict) -> dict:
    """Lfm2Config's constructor: layer_types from full_attn_idxs (every layer attention when neither is stated)."""
    if h.get("layer_types") is None:
        if h.get("full_attn_idxs") is None:
            h["full_attn_idxs"] = list(range(h["num_hidden_layers"]))
        h["layer_types"] = ["full_attention" if i in h["full_attn_idxs"] else "conv"
                            for i in range(h["num_hidden_layers"])]
    return h


def ff_dim(h: dict) -> int:
    """LFM2's feed-forward width, as the converter computes it (_add_feed_forward_length)."""
    dim = h.get("block_ff_dim", h["intermediate_size"])
    if h["block_auto_adjust_ff_dim"]:
        dim = int(2 * dim / 3)
        if h["block_ffn_dim_multiplier"] is not None:
            dim = int(h["block_ffn_dim_multiplier"] * dim)
        dim = h["block_multiple_of"] * ((dim + h["block_multiple_of"] - 1) // h["block_multiple_of"])
    return dim


REFUSE = (
    Refuse("layer_types", lambda v: "conv" in v, "no conv layer: llama.cpp's lfm2 aborts on a model without one "
           "(GGML_ASSERT in its recurrent cache); no released LFM2 is all attention"),
    Refuse("conv_bias", unset, "llama.cpp's lfm2 has no short-convolution biases"),
)


def check(h: dict, path: Path) -> None:
    for theirs, ours in _SAME_AS:
        if h.get(theirs) is not None and h[theirs] != h[ours]:
            raise ConfigError(f"{path}: {theirs} {h[theirs]} differs from {ours} {h[ours]}: transformers' Lfm2 and the "
                              f"converter read {ours} only; fix the config so that they agree")
    types = list(h["layer_types"])
    if len(types) != h["num_hidden_layers"] or set(types) - {"conv", "full_attention"}:
        raise ConfigError(f"{path}: layer_types {types}: LFM2 needs one of 'conv' / 'full_attention' per layer "
                          f"({h['num_hidden_layers']} layers)")
    if h["block_auto_adjust_ff_dim"] and h["block_ffn_dim_multiplier"] is None:
        raise ConfigError(f"{path}: block_ffn_dim_multiplier null with block_auto_adjust_ff_dim: transformers then "
                          f"skips the rounding to block_multiple_of that the converter applies, so the width it writes "
                          f"({ff_dim(h)}) may not be the weights'")


def parameters(h: dict, block_count: int, file_type: int) -> list:
    kv_heads = [h["num_key_value_heads"] if t != "conv" else 0 for t in h["layer_types"]]
    kv = text_model_parameters({k: v for k, v in h.items() if k != "num_key_value_heads"}, "lfm2", block_count,
                               file_type)
    at = next(i for i, e in enumerate(kv) if e.key == "lfm2.attention.head_count") + 1
    kv.insert(at, KV(Keys.Attention.HEAD_COUNT_KV.format(arch="lfm2"), ValueType.ARRAY, kv_heads, ValueType.INT32))
    # the converter then sets these; the two already written keep their place and take the new value
    return kv + [u32(Keys.LLM.VOCAB_SIZE.format(arch="lfm2"), h["vocab_size"]),
                 u32(Keys.ShortConv.L_CACHE.format(arch="lfm2"), h["conv_L_cache"]),
                 f32(Keys.Attention.LAYERNORM_RMS_EPS.format(arch="lfm2"), h["norm_eps"]),
                 u32(Keys.LLM.FEED_FORWARD_LENGTH.format(arch="lfm2"), ff_dim(h))]


def vocab(model_dir: Path, h: dict) -> list:
    from hfview.tokenizer.vocab import gpt2_vocab
    return gpt2_vocab(model_dir, h)


FAMILY = Family(
    name="lfm2",
    gguf_arch="lfm2",
    architectures=("Lfm2ForCausalLM", "LFM2ForCausalLM", "Lfm2VlForConditionalGeneration"),
    defaults=DEFAULTS,
    reads=READS,
    harmless=HARMLESS,
    tensors=TENSORS,
    parameters=parameters,
    vocab=vocab,
    refuse=REFUSE,
    check=check,
    normalise=normalise,
)

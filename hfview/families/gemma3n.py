"""Gemma 3n text, and the Gemma 3n image-text-audio model read as its text model -> llama.cpp `gemma3n` (the
converter's Gemma3NModel, a Gemma3Model).

- Gemma3nForConditionalGeneration: text_config is merged over the top level (config.py), the text weights'
  `language_model.` prefix goes (the converter's rename), the vision and audio towers and their embedders are
  left out as the converter's text conversion leaves them out.
- norms are stored as they scale (no 1 + w, unlike Gemma 3); the embedding scale sqrt(hidden_size) is not
  written: llama.cpp's graph applies it.
- AltUp: the three input and the three output projections are stacked each into one tensor (altup_proj,
  altup_unembd_proj); `*_scale` tensors get a `.weight` name (altup_correct_scale); per-layer inputs (a second
  embedding, a projection of the first), Laurel, activation sparsity (written as the normal quantile of each
  layer's target sparsity) and the sliding pattern as a bool array.
- llama.cpp's gemma3n fixes what the config states: 4 AltUp inputs (active 0), Laurel rank 64, per-layer inputs
  256 wide, the first 20 layers holding the keys and values the later ones reuse (the last sliding and full one
  before them), sparsity 0.95 on the first 10 layers and none after, final soft-capping, AltUp's corrected
  output scale: configs stating otherwise are refused by name.
"""
from __future__ import annotations

from pathlib import Path
from statistics import NormalDist

import numpy as np

from ..config import ANY, Harmless
from ..errors import ConfigError
from ..family import Family, Refuse, RunnerFacts, Skip, Stacked, Tensor, stated
from ..gguf_layout import KV, ValueType
from ..names import GGUF, Keys
from ..params import u32
from ..views import RowsPadded, Stored, View
from .gemma3 import parameters as gemma3_parameters
from .gemma3 import vocab as gemma3_vocab

_TEXT_DEFAULTS = dict(
    vocab_size=262400, hidden_size=2048, intermediate_size=16384, num_hidden_layers=35, num_attention_heads=8,
    num_key_value_heads=2, head_dim=256, hidden_activation="gelu_pytorch_tanh", max_position_embeddings=32768,
    rms_norm_eps=1e-06, pad_token_id=0, eos_token_id=1, bos_token_id=2, tie_word_embeddings=True,
    attention_bias=False, sliding_window=512, final_logit_softcapping=30.0, vocab_size_per_layer_input=262144,
    hidden_size_per_layer_input=256, altup_active_idx=0, altup_correct_scale=True, altup_num_inputs=4,
    num_kv_shared_layers=15, laurel_rank=64, activation_sparsity_pattern=None,
    rope_parameters={"sliding_attention": {"rope_type": "default", "rope_theta": 10000.0},
                     "full_attention": {"rope_type": "default", "rope_theta": 1000000.0}},
)
# transformers 5.24's Gemma3nTextConfig defaults, as data (tests/test_family_gemma3n.py compares them); a
# Gemma3nConfig (image-text-audio) is read through its text_config, whose class is the same.
DEFAULTS = {"gemma3n_text": _TEXT_DEFAULTS, "gemma3n": _TEXT_DEFAULTS}

READS = frozenset({
    "vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads",
    "num_key_value_heads", "head_dim", "max_position_embeddings", "rms_norm_eps", "hidden_activation",
    "tie_word_embeddings", "attention_bias", "rope_parameters", "rope_scaling", "rope_theta", "rope_local_base_freq",
    "sliding_window", "layer_types", "final_logit_softcapping", "vocab_size_per_layer_input",
    "hidden_size_per_layer_input", "altup_active_idx", "altup_correct_scale", "altup_num_inputs",
    "num_kv_shared_layers", "laurel_rank", "activation_sparsity_pattern",
})
# altup_coef_clip, altup_lr_multiplier (released): training only (transformers clamps the AltUp coefficients in
# training); query_pre_attn_scalar (released, 256): neither transformers 5.24 nor llama.cpp reads it, both scale
# attention by 1. The rest are the wrapper's: the
# vision and audio towers and their tokens, which a text-only forward never touches.
HARMLESS: Harmless = {"altup_coef_clip": ANY, "altup_lr_multiplier": ANY, "query_pre_attn_scalar": ANY, "hidden_act": ANY, "vision_config": ANY, "audio_config": ANY,
    "audio_soft_tokens_per_image": ANY, "vision_soft_tokens_per_image": ANY, "boi_token_id": ANY,
    "eoi_token_id": ANY, "image_token_id": ANY, "boa_token_id": ANY, "eoa_token_id": ANY, "audio_token_id": ANY}

_N_KV_LAYERS = 20      # llama.cpp: n_layer_kv_from_start
_N_SPARSE_LAYERS = 10  # llama.cpp: n_layer_sparsity, each at the 0.95 quantile

_L = "model.layers.{bid}."


def _padded_to_vocab(sources: list, h: dict) -> View:
    """The converter pads both embeddings with zero rows up to vocab_size (the image and audio tokens' slots)."""
    (src,) = sources
    return Stored(src) if src.shape[0] >= h["vocab_size"] else RowsPadded(src, h["vocab_size"])

TENSORS = (
    Stacked("model.altup_projections.{x}.weight", GGUF.ALTUP_PROJ.weight, "_altup_parts"),
    Stacked("model.altup_unembed_projections.{x}.weight", GGUF.ALTUP_UNEMBD_PROJ.weight, "_altup_parts"),
    Tensor("model.embed_tokens.weight", GGUF.TOKEN_EMBD.weight, view=_padded_to_vocab),
    Tensor("model.embed_tokens_per_layer.weight", GGUF.PER_LAYER_TOKEN_EMBD.weight, view=_padded_to_vocab),
    Tensor("model.per_layer_model_projection.weight", GGUF.PER_LAYER_MODEL_PROJ.weight),
    Tensor("model.per_layer_projection_norm.weight", GGUF.PER_LAYER_PROJ_NORM.weight),
    Tensor("model.norm.weight", GGUF.OUTPUT_NORM.weight),
    Tensor("lm_head.weight", GGUF.OUTPUT.weight, required=False),  # absent when tied (as released)
    Tensor(_L + "altup.correct_output_scale", GGUF.ALTUP_CORRECT_SCALE.weight),
    Tensor(_L + "altup.correction_coefs.weight", GGUF.ALTUP_CORRECT_COEF.weight),
    Tensor(_L + "altup.modality_router.weight", GGUF.ALTUP_ROUTER.weight),
    Tensor(_L + "altup.prediction_coefs.weight", GGUF.ALTUP_PREDICT_COEF.weight),
    Tensor(_L + "altup.router_norm.weight", GGUF.ALTUP_ROUTER_NORM.weight),
    Tensor(_L + "input_layernorm.weight", GGUF.ATTN_NORM.weight),
    Tensor(_L + "laurel.linear_left.weight", GGUF.LAUREL_L.weight),
    Tensor(_L + "laurel.linear_right.weight", GGUF.LAUREL_R.weight),
    Tensor(_L + "laurel.post_laurel_norm.weight", GGUF.LAUREL_POST_NORM.weight),
    Tensor(_L + "mlp.gate_proj.weight", GGUF.FFN_GATE.weight),
    Tensor(_L + "mlp.up_proj.weight", GGUF.FFN_UP.weight),
    Tensor(_L + "mlp.down_proj.weight", GGUF.FFN_DOWN.weight),
    Tensor(_L + "per_layer_input_gate.weight", GGUF.PER_LAYER_INP_GATE.weight),
    Tensor(_L + "per_layer_projection.weight", GGUF.PER_LAYER_PROJ.weight),
    Tensor(_L + "post_attention_layernorm.weight", GGUF.ATTN_POST_NORM.weight),
    Tensor(_L + "post_feedforward_layernorm.weight", GGUF.FFN_POST_NORM.weight),
    Tensor(_L + "post_per_layer_input_norm.weight", GGUF.PER_LAYER_POST_NORM.weight),
    Tensor(_L + "pre_feedforward_layernorm.weight", GGUF.FFN_NORM.weight),
    Tensor(_L + "self_attn.q_proj.weight", GGUF.ATTN_Q.weight),
    Tensor(_L + "self_attn.k_proj.weight", GGUF.ATTN_K.weight),
    Tensor(_L + "self_attn.v_proj.weight", GGUF.ATTN_V.weight),
    Tensor(_L + "self_attn.o_proj.weight", GGUF.ATTN_OUT.weight),
    Tensor(_L + "self_attn.q_norm.weight", GGUF.ATTN_Q_NORM.weight),
    Tensor(_L + "self_attn.k_norm.weight", GGUF.ATTN_K_NORM.weight),
    # the image-text-audio model's other towers, which the converter's --mmproj file holds
    Skip("model.vision_tower.{rest}"), Skip("model.audio_tower.{rest}"), Skip("model.embed_vision.{rest}"),
    Skip("model.embed_audio.{rest}"),
)


def normalise(h: dict) -> dict:
    """What Gemma3nTextConfig's constructor computes: one MLP width per layer, layer kinds (every 5th full),
    the sparsity pattern (0.95 on the first 10 layers where there are more than 10), the two ropes."""
    n = h["num_hidden_layers"]
    if not isinstance(h["intermediate_size"], list):
        h["intermediate_size"] = [h["intermediate_size"]] * n
    if h.get("layer_types") is None:
        h["layer_types"] = ["full_attention" if (i + 1) % 5 == 0 else "sliding_attention" for i in range(n)]
    if h.get("activation_sparsity_pattern") is None:
        sparse = _N_SPARSE_LAYERS if n > _N_SPARSE_LAYERS else 0
        h["activation_sparsity_pattern"] = [0.95] * sparse + [0.0] * (n - sparse)
    rope = h.get("rope_parameters") or {}
    if "full_attention" in rope or "sliding_attention" in rope:
        full = dict(rope.get("full_attention") or {"rope_type": "default"})
        sliding = dict(rope.get("sliding_attention") or {"rope_type": "default"})
    else:  # released layout: rope_theta (and rope_scaling) are the full layers'
        full, sliding = {"rope_type": "default", **rope}, {"rope_type": "default"}
    full.setdefault("rope_theta", 1000000.0)
    sliding.setdefault("rope_theta", h.pop("rope_local_base_freq", 10000.0))
    h["rope_parameters"] = {"sliding_attention": sliding, "full_attention": full}
    h["_altup_parts"] = h["altup_num_inputs"] - 1  # the stacked AltUp projections (all inputs but the active)
    return h


def _sparsity(n: int) -> list[float]:
    return [0.95 if il < _N_SPARSE_LAYERS else 0.0 for il in range(n)]


REFUSE = (
    Refuse("altup_num_inputs", (4,), "the converter and llama.cpp's gemma3n take 4 AltUp inputs only"),
    Refuse("altup_active_idx", (0,), "llama.cpp's gemma3n makes AltUp input 0 the active one"),
    Refuse("laurel_rank", (64,), "llama.cpp's gemma3n fixes the Laurel rank at 64"),
    Refuse("hidden_size_per_layer_input", (256,), "llama.cpp's gemma3n fixes the per-layer inputs at 256 wide"),
    Refuse("altup_correct_scale", (True,), "llama.cpp's gemma3n always scales AltUp's corrected output"),
    Refuse("hidden_activation", ("gelu_pytorch_tanh",), "llama.cpp's gemma3n computes the tanh GELU only"),
    Refuse("attention_bias", (False,), "llama.cpp's gemma3n has no attention biases"),
    Refuse("final_logit_softcapping", bool, "llama.cpp's gemma3n soft-caps the logits always (at 30 where none is "
           "written)"),
    Refuse("layer_types", lambda v: set(v) <= {"sliding_attention", "full_attention"}, "Gemma 3n layers slide or "
           "attend fully"),
    # normalise states both ropes
    *(Refuse(f"rope_parameters.{kind}.rope_type", ("default",), "Gemma 3n's ropes are unscaled, and hfview presents "
             "them so only", default="default") for kind in ("sliding_attention", "full_attention")),
    Refuse("sliding_window", stated, "the converter writes the window of the sliding layers"),
)


def check(h: dict, path: Path) -> None:
    n = h["num_hidden_layers"]
    if h["vocab_size_per_layer_input"] > h["vocab_size"]:
        raise ConfigError(f"{path}: vocab_size_per_layer_input {h['vocab_size_per_layer_input']} is more than "
                          f"vocab_size {h['vocab_size']}: llama.cpp's gemma3n reads one per-layer row per token")
    for key in ("layer_types", "activation_sparsity_pattern", "intermediate_size"):
        if len(h[key]) != n:
            raise ConfigError(f"{path}: {key} has {len(h[key])} entries for {n} layers (num_hidden_layers)")
    if [float(s) for s in h["activation_sparsity_pattern"]] != _sparsity(n):
        raise ConfigError(f"{path}: activation_sparsity_pattern {h['activation_sparsity_pattern']}: llama.cpp's "
                          f"gemma3n keeps the top 5% (0.95) of the gate on the first {_N_SPARSE_LAYERS} layers and "
                          f"nothing is cut after, whatever is written ({_sparsity(n)} here)")
    shared = h["num_kv_shared_layers"]
    want = max(n - _N_KV_LAYERS, 0)
    if shared != want or (shared and h["layer_types"][_N_KV_LAYERS - 2:_N_KV_LAYERS]
                          != ["sliding_attention", "full_attention"]):
        raise ConfigError(f"{path}: num_kv_shared_layers {shared} of {n} layers (layer_types {h['layer_types']}): "
                          f"llama.cpp's gemma3n computes keys and values in the first {_N_KV_LAYERS} layers and "
                          f"nowhere after (num_kv_shared_layers {want} here), the later ones reading layers 18 "
                          f"(sliding) and 19 (full)")


def _quantile(p: float) -> float:
    """torch's Normal(0, 1).icdf(p) in float32, which the converter writes: -inf at 0."""
    return float("-inf") if p == 0.0 else float(np.float32(NormalDist().inv_cdf(p)))


def parameters(h: dict, block_count: int, file_type: int) -> list:
    """Gemma3Model's list (the per-layer MLP widths as an array), then Gemma3NModel's additions."""
    hg = dict(h, intermediate_size=0)
    kv = [KV(Keys.LLM.FEED_FORWARD_LENGTH.format(arch="gemma3n"), ValueType.ARRAY, list(h["intermediate_size"]),
             ValueType.INT32)
          if k.key == "gemma3n.feed_forward_length" else k for k in gemma3_parameters_for(hg, block_count, file_type)]
    return [*kv,
            u32(Keys.LLM.ALTUP_ACTIVE_IDX.format(arch="gemma3n"), h["altup_active_idx"]),
            u32(Keys.LLM.ALTUP_NUM_INPUTS.format(arch="gemma3n"), h["altup_num_inputs"]),
            u32(Keys.LLM.EMBD_LENGTH_PER_LAYER_INP.format(arch="gemma3n"), h["hidden_size_per_layer_input"]),
            u32(Keys.Attention.SHARED_KV_LAYERS.format(arch="gemma3n"), h["num_kv_shared_layers"]),
            KV(Keys.LLM.ACTIVATION_SPARSITY_SCALE.format(arch="gemma3n"), ValueType.ARRAY,
               [_quantile(float(s)) for s in h["activation_sparsity_pattern"]], ValueType.FLOAT32),
            KV(Keys.Attention.SLIDING_WINDOW_PATTERN.format(arch="gemma3n"), ValueType.ARRAY,
               [kind == "sliding_attention" for kind in h["layer_types"]], ValueType.BOOL)]


def gemma3_parameters_for(h: dict, block_count: int, file_type: int) -> list:
    """Gemma3Model's list under the gemma3n architecture name."""
    return [KV(k.key.replace("gemma3.", "gemma3n.", 1), k.type, k.value, k.item_type)
            for k in gemma3_parameters(dict(h, sliding_window_pattern=None), block_count, file_type)]


def vocab(model_dir: Path, h: dict) -> list:
    """Gemma3Model.set_vocab with vocab_size (not vocab_size_per_layer_input) counting the tokens."""
    return gemma3_vocab(model_dir, {k: v for k, v in h.items() if k != "vocab_size_per_layer_input"})


FAMILY = Family(
    name="gemma3n",
    gguf_arch="gemma3n",
    architectures=("Gemma3nForCausalLM", "Gemma3nForConditionalGeneration"),
    defaults=DEFAULTS,
    reads=READS,
    harmless=HARMLESS,
    tensors=TENSORS,
    parameters=parameters,
    vocab=vocab,
    refuse=REFUSE,
    check=check,
    normalise=normalise,
    notes={"embedding scale": "sqrt(hidden_size) is applied by llama.cpp's gemma3n graph; nothing is written",
           "image-text": "Gemma3nForConditionalGeneration is presented as its text model; the vision and audio "
                         "towers and their embedders (the converter's --mmproj file) are not presented"},
    # llama.cpp's gemma3n slides on the layers sliding_window_pattern names
    runner=RunnerFacts(llama_cpp_applies_window=True),
)

"""Muse Glimmer's text decoder (MuseGlimmerForConditionalGeneration read as its text model; model_type
muse_glimmer_text in text_config) -> llama.cpp `muse-glimmer` (the converter's MuseGlimmerModel).

- the image-text wrapper: text_config is merged over the top level (config.py), the text weights' `language_model.`
  prefix goes (the converter's rename), the vision tower, its adapter and projection are left out as the
  converter's text conversion leaves them out ("vision_" in their names).
- layers: sliding-window layers with rope, full-attention layers without (NoPE); llama.cpp's muse-glimmer rotates
  exactly the layers sliding_window_pattern marks sliding, so layer_rope_theta must be 0 exactly on the full
  layers (transformers rotates where it is nonzero, always at rope_parameters' theta).
- q_proj / k_proj are stored in transformers' rotate-half layout: presented as interleaved rotation pairs per head
  (llama.cpp's normal rope), as the converter un-permutes them.
- q/k norms: transformers normalises queries and keys by a scaleless RMS norm and multiplies the queries by
  qk_scale_factor; the converter writes that as attn_q_norm (qk_scale_factor everywhere) and attn_k_norm (ones),
  emitted where q_proj is read, before attn_q.
- the four layer norms are stored centred (the norm scales by 1 + w): written as 1 + w; the final norm as stored.
- the embedding's own scaleless RMS norm and the post-norm epsilon 1e-8 are llama.cpp's graph (the latter
  hard-coded, so post_norm_eps must be 1e-8); the logits are scaled by output_multiplier (logit_scale), then
  tanh-capped at final_logit_softcapping.
- the end of turn: the converter looks up <|eot|> through transformers' tokenizer and writes its id
  (tokenizer.ggml.eot_token_id) after the special vocabulary.

MuseGlimmerAssistantModel (model_type muse_glimmer_assistant, the converter's MuseGlimmerAssistantModel -> llama.cpp
`dflash`) is refused by name: see NOT_COMPUTABLE in hfview/families/__init__.py.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

from ..config import ANY, Harmless
from ..errors import ConfigError
from ..family import Family, Refuse, RunnerFacts, Skip, Split, Tensor, rope_pairs, stated, unset
from ..gguf_layout import KV, ValueType
from ..names import GGUF, Keys
from ..params import f32, text_model_parameters, u32
from ..views import OFFSET_ONE, Generated

ARCH = "muse-glimmer"
SLIDING, FULL = "sliding_attention", "full_attention"

# transformers 5.24's MuseGlimmerTextConfig defaults, as data (tests/test_family_muse_glimmer_text.py compares
# them); layer_types and layer_rope_theta are computed by the class (normalise)
DEFAULTS = {
    "muse_glimmer_text": dict(
        vocab_size=202048, hidden_size=6656, intermediate_size=19968, num_hidden_layers=52, num_attention_heads=32,
        num_key_value_heads=2, head_dim=128, hidden_activation="silu", max_position_embeddings=131072,
        initializer_range=0.02, rms_norm_eps=1e-5, use_cache=True, pad_token_id=None, eos_token_id=200001,
        bos_token_id=200000, tie_word_embeddings=False, rope_parameters={"rope_theta": 10000.0, "rope_type": "default"},
        attention_bias=False, attention_dropout=0.0, sliding_window=2048, final_logit_softcapping=20.0,
        qk_scale_factor=3.87, output_multiplier=0.19611613513818404, post_norm_eps=1e-8),
}

READS = frozenset({*DEFAULTS["muse_glimmer_text"], "layer_types", "layer_rope_theta"})
# The image-text wrapper's: the vision tower's config and width, the projector's sizes and activation, and the
# media placeholder ids (transformers embeds token 0 in their place; a text prompt does not contain them)
HARMLESS: Harmless = dict.fromkeys(("vision_config", "out_hidden_size", "projector_hidden_size", "projector_hidden_act",
                                    "image_token_id", "video_token_id"), ANY)

_L = "model.layers.{bid}."


def _q_norm(sources, h):
    return Generated(np.full((h["head_dim"],), h["qk_scale_factor"], dtype=np.float32), "qk_scale_factor per head width")


def _k_norm(sources, h):
    return Generated(np.ones((h["head_dim"],), dtype=np.float32), "ones (the keys' norm has no scale)")


TENSORS = (
    # the image-text model's vision side, which the converter's --mmproj file holds
    Skip("model.vision_tower.{rest}"), Skip("model.vision_adapter.{rest}"), Skip("model.vision_projection.{rest}"),
    Tensor("lm_head.weight", GGUF.OUTPUT.weight),
    Tensor("model.embed_tokens.weight", GGUF.TOKEN_EMBD.weight),
    Tensor("model.norm.weight", GGUF.OUTPUT_NORM.weight),
    Tensor(f"{_L}input_layernorm.weight", GGUF.ATTN_NORM.weight, steps=(OFFSET_ONE,)),
    Tensor(f"{_L}post_attention_layernorm.weight", GGUF.ATTN_POST_NORM.weight, steps=(OFFSET_ONE,)),
    Tensor(f"{_L}pre_feedforward_layernorm.weight", GGUF.FFN_NORM.weight, steps=(OFFSET_ONE,)),
    Tensor(f"{_L}post_feedforward_layernorm.weight", GGUF.FFN_POST_NORM.weight, steps=(OFFSET_ONE,)),
    Tensor(f"{_L}mlp.gate_proj.weight", GGUF.FFN_GATE.weight),
    Tensor(f"{_L}mlp.up_proj.weight", GGUF.FFN_UP.weight),
    Tensor(f"{_L}mlp.down_proj.weight", GGUF.FFN_DOWN.weight),
    Tensor(f"{_L}self_attn.gate_proj.weight", GGUF.ATTN_GATE.weight),
    # the q/k norms are written where q_proj is read, before it
    Split(f"{_L}self_attn.q_proj.weight", ((GGUF.ATTN_Q_NORM.weight, _q_norm),
                                           (GGUF.ATTN_K_NORM.weight, _k_norm),
                                           (GGUF.ATTN_Q.weight, rope_pairs("num_attention_heads")))),
    Tensor(f"{_L}self_attn.k_proj.weight", GGUF.ATTN_K.weight, view=rope_pairs("num_key_value_heads")),
    Tensor(f"{_L}self_attn.v_proj.weight", GGUF.ATTN_V.weight),
    Tensor(f"{_L}self_attn.o_proj.weight", GGUF.ATTN_OUT.weight),
)


def normalise(h: dict) -> dict:
    """MuseGlimmerTextConfig.__post_init__: every 4th layer counted back from the last a full-attention layer, the
    rest sliding; layer_rope_theta 0 (NoPE) on those same positions, rope_theta elsewhere."""
    n = h["num_hidden_layers"]
    full = [(n - 1 - i) % 4 == 0 for i in range(n)]
    if h.get("layer_types") is None:
        h["layer_types"] = [FULL if f else SLIDING for f in full]
    if h.get("layer_rope_theta") is None:
        h["layer_rope_theta"] = [0 if f else h["rope_parameters"]["rope_theta"] for f in full]
    return h


def _number(value: object) -> bool:
    """A number, not a bool (which isinstance counts as an int)."""
    return isinstance(value, (int, float)) and not isinstance(value, bool)


REFUSE = (
    Refuse("hidden_activation", ("silu",), f"llama.cpp's {ARCH} computes a SiLU-gated MLP only"),
    Refuse("attention_bias", unset, f"llama.cpp's {ARCH} has no attention biases"),
    Refuse("tie_word_embeddings", unset, f"llama.cpp's {ARCH} needs output.weight, which the converter writes from "
           f"lm_head.weight, and a tied checkpoint stores none"),
    Refuse("head_dim", stated, "the converter writes the q/k norms head_dim wide"),
    Refuse("post_norm_eps", (1e-8,), f"llama.cpp's {ARCH} normalises the attention and MLP outputs with a fixed "
           f"epsilon of 1e-8 (it reads no post-norm epsilon)"),
    *(Refuse(key, stated, "the converter writes it as a number (and transformers' Muse Glimmer "
             "computes with it)") for key in ("final_logit_softcapping", "sliding_window")),
    *(Refuse(key, _number, "a number is needed (the converter writes it)")
      for key in ("qk_scale_factor", "output_multiplier")),
    Refuse("layer_types", lambda v: set(v) <= {SLIDING, FULL}, "Muse Glimmer's layers slide or attend fully"),
)


def check(h: dict, path: Path) -> None:
    rope = h["rope_parameters"]
    if set(rope) - {"rope_type", "rope_theta"} or rope.get("rope_type", "default") != "default":
        raise ConfigError(f"{path}: rope_parameters {rope!r}: the view presents Muse Glimmer's plain rope only "
                          f"(rope_theta, as released)")
    thetas = h["layer_rope_theta"]
    nope = [i for i, t in enumerate(thetas) if t == 0]
    full = [i for i, kind in enumerate(h["layer_types"]) if kind == FULL]
    if nope != full:
        raise ConfigError(f"{path}: layer_rope_theta is 0 (no rope) on layers {nope}, layer_types has full "
                          f"attention on layers {full}: llama.cpp's {ARCH} rotates exactly the sliding layers")


def parameters(h: dict, block_count: int, file_type: int) -> list:
    """TextModel's list, then MuseGlimmerModel's: the soft cap, the logit scale, the window and its pattern."""
    return [*text_model_parameters(h, ARCH, block_count, file_type),
            f32(Keys.LLM.FINAL_LOGIT_SOFTCAPPING.format(arch=ARCH), h["final_logit_softcapping"]),
            f32(Keys.LLM.LOGIT_SCALE.format(arch=ARCH), h["output_multiplier"]),
            u32(Keys.Attention.SLIDING_WINDOW.format(arch=ARCH), h["sliding_window"]),
            KV(Keys.Attention.SLIDING_WINDOW_PATTERN.format(arch=ARCH), ValueType.ARRAY,
               [kind == SLIDING for kind in h["layer_types"]], ValueType.BOOL)]


def _eot_id(model_dir: Path) -> int:
    """The id of <|eot|> in tokenizer.json (its vocabulary or added tokens)."""
    from hfview.tokenizer.special import read_tokenizer_json

    path = Path(model_dir) / "tokenizer.json"
    tok = read_tokenizer_json(path) if path.is_file() else {}
    ids = {t.get("content"): t.get("id") for t in tok.get("added_tokens", []) if isinstance(t, dict)}
    vocab = (tok.get("model") or {}).get("vocab")
    if isinstance(vocab, dict):
        ids = {**vocab, **ids}
    if not isinstance(ids.get("<|eot|>"), int):
        raise ConfigError(f"{path}: no token <|eot|>: the converter asks transformers' tokenizer for it as Muse "
                          f"Glimmer's end of turn, and without it writes the unknown token's id (or none) instead; "
                          f"hfview does not present that")
    return ids["<|eot|>"]


def vocab(model_dir: Path, h: dict) -> list:
    """MuseGlimmerModel.set_vocab: byte-level BPE (_set_vocab_gpt2), then <|eot|>'s id as the end of turn."""
    from hfview.tokenizer.vocab import gpt2_vocab

    eot = _eot_id(model_dir)
    return [*gpt2_vocab(model_dir, h), u32(Keys.Tokenizer.EOT_ID, eot)]


FAMILY = Family(
    name="muse_glimmer_text",
    gguf_arch=ARCH,
    architectures=("MuseGlimmerForConditionalGeneration",),
    defaults=DEFAULTS,
    reads=READS,
    harmless=HARMLESS,
    tensors=TENSORS,
    parameters=parameters,
    vocab=vocab,
    refuse=REFUSE,
    check=check,
    normalise=normalise,
    notes={"image-text": "MuseGlimmerForConditionalGeneration is presented as its text model; the vision tower, "
                         "adapter and projection (the converter's --mmproj file) are not presented",
           "embedding norm": "the scaleless RMS norm over the embeddings and the post-norm epsilon 1e-8 are applied "
                             "by llama.cpp's muse-glimmer graph; nothing is written"},
    # llama.cpp's muse-glimmer slides on the layers sliding_window_pattern names
    runner=RunnerFacts(llama_cpp_applies_window=True),
)

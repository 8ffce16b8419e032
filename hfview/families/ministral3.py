"""Ministral 3 (Ministral3ForCausalLM), and the Mistral 3 image-text model whose text model is Ministral 3
(Mistral3ForConditionalGeneration read as its text model) -> llama.cpp `mistral3` (the converter's
Mistral3Model, whose Ministral3Model is LlamaModel under the mistral3 architecture).

- The decoder is Llama's (Q/K rows regrouped into rotation pairs) with yarn rope and Llama 4's query
  temperature: transformers scales q by 1 + beta * log(1 + floor(pos / original_max_position_embeddings));
  the converter writes beta as attention.temperature_scale and llama.cpp's mistral3 graph takes the floor
  step from rope.scaling.original_context_length, the same function.
- yarn: the converter writes mscale_all_dim as rope.scaling.yarn_log_multiplier; llama.cpp then computes the
  attention factor as get_mscale(factor, 1) / get_mscale(factor, mscale_all_dim), assuming mscale is 1 (as
  every release states). Another mscale, or an attention_factor stated outright, would run wrong: refused.
- The image-text wrapper: text_config is merged over the top level (config.py), the text weights'
  `language_model.` prefix goes (the converter's rename), the Pixtral tower and the projector are left out
  as the converter's text conversion leaves them out (its --mmproj file).
- A sliding window (Devstral Small 2 states sliding_window 4096): transformers' Ministral 3 attends within it, the
  converter does not write it and llama.cpp's mistral3 attends to the whole context, so the two compute the same
  function only while the context stays within the window. That is a runner fact (RunnerFacts: the window is not
  llama.cpp's), and the runner caps the context at the window, saying so (tests/test_family_ministral3.py).
- FP8 checkpoints (Ministral 3's Instruct uploads, Devstral's per-tensor FP8) are read dequantized as the converter
  reads them.
"""
from __future__ import annotations

from pathlib import Path

from ..config import ANY, Harmless
from ..errors import ConfigError
from ..family import Family, Refuse, RunnerFacts, Skip, stated
from ..names import Keys
from ..params import f32
from ._parts.decoder import LLAMA_TENSORS, llama_parameters
from ._parts.rope import llama3_rope_freqs
from ._parts.vocab import llama_vocab
from .llama import REFUSE as LLAMA_REFUSE

ARCH = "mistral3"

# transformers 5.24's Ministral3Config defaults, as data (tests/family_defaults.py compares them). The
# image-text Mistral3Config is read through its text_config, a Ministral3Config.
_TEXT_DEFAULTS = dict(
    vocab_size=131072, hidden_size=4096, intermediate_size=14336, num_hidden_layers=34, num_attention_heads=32,
    num_key_value_heads=8, head_dim=128, hidden_act="silu", max_position_embeddings=262144,
    initializer_range=0.02, rms_norm_eps=1e-5, use_cache=True, pad_token_id=11, bos_token_id=1, eos_token_id=2,
    tie_word_embeddings=False, sliding_window=None, attention_dropout=0.0,
    rope_parameters={"type": "yarn", "rope_type": "yarn", "rope_theta": 1000000.0, "factor": 16.0,
                     "original_max_position_embeddings": 16384, "max_position_embeddings": 262144,
                     "beta_fast": 32.0, "beta_slow": 1.0, "mscale_all_dim": 1.0, "mscale": 1.0,
                     "llama_4_scaling_beta": 0.1},
)
DEFAULTS = {"ministral3": _TEXT_DEFAULTS}

READS = frozenset({
    "vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads",
    "num_key_value_heads", "head_dim", "max_position_embeddings", "rms_norm_eps", "rope_parameters",
    "rope_scaling", "rope_theta", "hidden_act", "tie_word_embeddings", "sliding_window",
})
# The image-text wrapper's own keys: the vision tower, its projector and the image token, which a text-only
# forward never touches.
HARMLESS: Harmless = {"vision_config": ANY, "image_token_index": ANY, "image_token_id": ANY,
                      "projector_hidden_act": ANY, "vision_feature_layer": ANY, "multimodal_projector_bias": ANY,
                      "spatial_merge_size": ANY}

TENSORS = (
    *(rule for rule in LLAMA_TENSORS if "block_sparse_moe" not in rule.hf),
    # the image-text model's vision side, as transformers 4 saved it (Mistral Small 3.1) and as 5 does
    Skip("vision_tower.{rest}"), Skip("model.vision_tower.{rest}"),
    Skip("multi_modal_projector.{rest}"), Skip("model.multi_modal_projector.{rest}"),
)


def _rope(h: dict) -> dict:
    return h["rope_parameters"]


def normalise(h: dict) -> dict:
    """What Ministral3Config's __post_init__ computes: head width and KV head count where unstated."""
    if h.get("head_dim") is None:
        h["head_dim"] = h["hidden_size"] // h["num_attention_heads"]
    if h.get("num_key_value_heads") is None:
        h["num_key_value_heads"] = h["num_attention_heads"]
    return h


REFUSE = (
    *LLAMA_REFUSE,
    Refuse("rope_parameters", lambda v: v.get("rope_type", v.get("type")) == "yarn", "the converter writes "
           "Ministral 3 with yarn rope only (it asserts rope_type 'yarn'); state rope_parameters as released configs "
           "do (an absent one is not read as the class's yarn default)"),
    *(Refuse(f"rope_parameters.{key}", stated, "missing; the converter reads it for Ministral 3 "
             "(released configs state it)")
      for key in ("factor", "original_max_position_embeddings", "mscale_all_dim", "llama_4_scaling_beta")),
    Refuse("rope_parameters.mscale", (1.0,), "llama.cpp's yarn assumes mscale 1 (it reads only mscale_all_dim, as "
           "the log multiplier); this model would run wrong", default=1.0),
    Refuse("rope_parameters.attention_factor", (None,), "llama.cpp's yarn recomputes the attention factor from "
           "mscale_all_dim and ignores a stated one"),
)


def check(h: dict, path: Path) -> None:
    rope = _rope(h)
    if rope.get("mscale") is None and rope["mscale_all_dim"] not in (0, 0.0):
        raise ConfigError(f"{path}: rope_parameters.mscale is missing beside mscale_all_dim: transformers then "
                          f"ignores mscale_all_dim while llama.cpp's yarn applies it; state mscale 1.0 as "
                          f"released configs do")


_llama = llama_parameters(ARCH)


def parameters(h: dict, block_count: int, file_type: int) -> list:
    """LlamaModel's list under mistral3, then Ministral3Model's: yarn's log multiplier and Llama 4's beta."""
    rope = _rope(h)
    return [*_llama(h, block_count, file_type),
            f32(Keys.Rope.SCALING_YARN_LOG_MUL.format(arch=ARCH), rope["mscale_all_dim"]),
            f32(Keys.Attention.TEMPERATURE_SCALE.format(arch=ARCH), rope["llama_4_scaling_beta"])]


FAMILY = Family(
    name="ministral3",
    gguf_arch=ARCH,
    architectures=("Ministral3ForCausalLM", "Mistral3ForConditionalGeneration"),
    defaults=DEFAULTS,
    reads=READS,
    harmless=HARMLESS,
    tensors=TENSORS,
    parameters=parameters,
    vocab=llama_vocab,
    generated=llama3_rope_freqs,
    refuse=REFUSE,
    check=check,
    normalise=normalise,
    nvfp4_qk_pairs=lambda h: True,  # its converter class delegates to a LlamaModel with undo_permute
    notes={"query temperature": "Llama 4's: written as attention.temperature_scale, floored by the yarn "
                                "original context, computed by llama.cpp's mistral3 graph",
           "image-text": "Mistral3ForConditionalGeneration is presented as its text model; the Pixtral tower "
                         "and projector (the converter's --mmproj file) are not presented",
           "sliding_window": "llama.cpp's mistral3 attends to the whole context: the runner caps the context at "
                             "sliding_window so the computation stays the same"},
    # the window is transformers' and not llama.cpp's mistral3: the runner stops the context at it
    runner=RunnerFacts(llama_cpp_applies_window=False),
)

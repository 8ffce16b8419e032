"""Gemma 3 text, and the Gemma 3 image-text model read as its text model -> llama.cpp `gemma3`
(the converter's Gemma3Model).

- Gemma3ForConditionalGeneration: text_config is merged over the top level (config.py), the text weights'
  `language_model.` prefix goes (the converter's rename), the SigLIP tower and the projector are left out
  as the converter's text conversion leaves them out.
- norms (the q/k norms included) are stored as 1 + w; the embedding scale sqrt(hidden_size) is not
  written: llama.cpp's gemma3 graph applies it.
- rope: two sets, the global layers' (rope_theta, maybe linear scaling) and the sliding layers'
  (rope_local_base_freq in released configs, rope.freq_base_swa in the GGUF); transformers 5 keeps them
  as rope_parameters.full_attention / .sliding_attention, and so does the view.
- llama.cpp makes every 6th layer global and scales attention by 1/sqrt(head_dim) (1/sqrt(hidden/heads) at
  62 layers, the 27B): configs stating otherwise are refused.
"""
from __future__ import annotations

from pathlib import Path

from ..config import ANY, Harmless
from ..errors import ConfigError
from ..family import Family, Refuse, RunnerFacts, Skip, Tensor, unset
from ..names import GGUF, Keys
from ..params import boolean, f32, text_model_parameters, u32
from ._parts.gemma_common import NORM, TANH_GELU, alternating_layers, check_swa_and_scale, check_vocab_rows

_TEXT_DEFAULTS = dict(
    vocab_size=262208, hidden_size=2304, intermediate_size=9216, num_hidden_layers=26, num_attention_heads=8,
    num_key_value_heads=4, head_dim=256, hidden_activation="gelu_pytorch_tanh", max_position_embeddings=131072,
    initializer_range=0.02, rms_norm_eps=1e-06, use_cache=True, pad_token_id=0, eos_token_id=1, bos_token_id=2,
    tie_word_embeddings=True, attention_bias=False, attention_dropout=0.0, query_pre_attn_scalar=256,
    sliding_window=4096, final_logit_softcapping=None, attn_logit_softcapping=None,
    use_bidirectional_attention=False,
    rope_parameters={"full_attention": {"rope_theta": 1000000.0, "rope_type": "default"},
                     "sliding_attention": {"rope_theta": 10000.0, "rope_type": "default"}},
)
# transformers 5.24's Gemma3TextConfig defaults, as data (tests/test_family_gemma3.py compares them); a
# Gemma3Config (image-text) is read through its text_config, whose class is the same.
DEFAULTS = {"gemma3_text": _TEXT_DEFAULTS, "gemma3": _TEXT_DEFAULTS}

READS = frozenset({
    "vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads",
    "num_key_value_heads", "head_dim", "max_position_embeddings", "rms_norm_eps", "hidden_activation",
    "tie_word_embeddings", "attention_bias", "rope_parameters", "rope_scaling", "rope_theta",
    "rope_local_base_freq", "use_bidirectional_attention", "query_pre_attn_scalar", "sliding_window",
    "sliding_window_pattern", "_sliding_window_pattern", "layer_types", "attn_logit_softcapping",
    "final_logit_softcapping",
    "attention_chunk_size",  # read only to refuse chunked attention by name (check)
})
# hidden_act: a leftover beside hidden_activation; cache_implementation: generate()'s cache. The rest are
# the image-text wrapper's: the vision tower and image tokens, which a text-only forward never touches.
HARMLESS: Harmless = {"hidden_act": ANY, "cache_implementation": ANY, "vision_config": ANY,
    "mm_tokens_per_image": ANY, "boi_token_index": ANY, "eoi_token_index": ANY, "image_token_index": ANY}

TENSORS = (
    Tensor("model.embed_tokens.weight", GGUF.TOKEN_EMBD.weight),
    Tensor("model.norm.weight", GGUF.OUTPUT_NORM.weight, steps=NORM),
    Tensor("lm_head.weight", GGUF.OUTPUT.weight, required=False),  # absent when tied (as released)
    Tensor("model.layers.{bid}.input_layernorm.weight", GGUF.ATTN_NORM.weight, steps=NORM),
    Tensor("model.layers.{bid}.self_attn.q_proj.weight", GGUF.ATTN_Q.weight),
    Tensor("model.layers.{bid}.self_attn.k_proj.weight", GGUF.ATTN_K.weight),
    Tensor("model.layers.{bid}.self_attn.v_proj.weight", GGUF.ATTN_V.weight),
    Tensor("model.layers.{bid}.self_attn.o_proj.weight", GGUF.ATTN_OUT.weight),
    Tensor("model.layers.{bid}.self_attn.q_norm.weight", GGUF.ATTN_Q_NORM.weight, steps=NORM),
    Tensor("model.layers.{bid}.self_attn.k_norm.weight", GGUF.ATTN_K_NORM.weight, steps=NORM),
    Tensor("model.layers.{bid}.post_attention_layernorm.weight", GGUF.ATTN_POST_NORM.weight, steps=NORM),
    Tensor("model.layers.{bid}.pre_feedforward_layernorm.weight", GGUF.FFN_NORM.weight, steps=NORM),
    Tensor("model.layers.{bid}.post_feedforward_layernorm.weight", GGUF.FFN_POST_NORM.weight, steps=NORM),
    Tensor("model.layers.{bid}.mlp.gate_proj.weight", GGUF.FFN_GATE.weight),
    Tensor("model.layers.{bid}.mlp.up_proj.weight", GGUF.FFN_UP.weight),
    Tensor("model.layers.{bid}.mlp.down_proj.weight", GGUF.FFN_DOWN.weight),
    # the image-text model's vision side, saved as released (4.50) or as transformers 5 names it
    Skip("vision_tower.{rest}"), Skip("model.vision_tower.{rest}"),
    Skip("multi_modal_projector.{rest}"), Skip("model.multi_modal_projector.{rest}"),
)


def _pattern(h: dict) -> int:
    return h.get("sliding_window_pattern", h.get("_sliding_window_pattern", 6))


def normalise(h: dict) -> dict:
    """rope_parameters as Gemma3TextConfig builds them: one set for the global layers, one for the sliding."""
    rope = h["rope_parameters"]
    if "full_attention" in rope or "sliding_attention" in rope:  # transformers 5 layout
        full = dict(rope.get("full_attention") or {"rope_type": "default"})
        sliding = dict(rope.get("sliding_attention") or {"rope_type": "default"})
    else:  # released layout: rope_theta and rope_scaling are the global layers'
        full, sliding = dict(rope), {"rope_type": "default"}
    local_theta = h.pop("rope_local_base_freq", 10000.0)  # transformers consumes the key
    full.setdefault("rope_theta", 1000000.0)
    sliding.setdefault("rope_theta", local_theta)
    h["rope_parameters"] = {"sliding_attention": sliding, "full_attention": full}
    if h.get("layer_types") is None:  # every sliding_window_pattern-th layer global
        h["layer_types"] = alternating_layers(h["num_hidden_layers"], _pattern(h))
    return h


_ROPE_SCALING = "llama.cpp's gemma3 scales the global layers' rope linearly at most and the sliding layers' not at all"
REFUSE = (
    Refuse("hidden_activation", TANH_GELU, "llama.cpp's gemma3 computes the tanh GELU only"),
    Refuse("attn_logit_softcapping", (None,), "Gemma 3 has none, and the converter refuses one"),
    Refuse("attention_bias", unset, "llama.cpp's gemma3 has no attention biases"),
    Refuse("use_bidirectional_attention", unset, "an embedding model; llama.cpp's gemma3 attends causally"),
    # normalise states both kinds' rope, in this order
    Refuse("rope_parameters.sliding_attention.rope_type", ("default",), _ROPE_SCALING, default="default"),
    Refuse("rope_parameters.full_attention.rope_type", ("default", "linear"), _ROPE_SCALING, default="default"),
)


def check(h: dict, path: Path) -> None:
    if "chunked_attention" in (h.get("layer_types") or ()) or h.get("attention_chunk_size") is not None:
        # Rnj-1.5's block-local layers: a token attends only within its own attention_chunk_size block
        raise ConfigError(f"{path}: chunked_attention layers (attention_chunk_size "
                          f"{h.get('attention_chunk_size')}): a token attends only to earlier tokens of its own "
                          f"block, which neither llama.cpp's gemma3 (a sliding window over the last tokens) nor "
                          f"transformers' Gemma 3 computes; the view does not present a different attention")
    if _pattern(h) != 1:
        check_swa_and_scale(h, path, "gemma3", 6, 62)
    check_vocab_rows(h, path.parent)


def parameters(h: dict, block_count: int, file_type: int) -> list:
    """TextModel's list, then Gemma3Model's own additions and restatements (a restated key keeps its place)."""
    kv = [*text_model_parameters(h, "gemma3", block_count, file_type),
          u32(Keys.LLM.CONTEXT_LENGTH.format(arch="gemma3"), h["max_position_embeddings"]),
          u32(Keys.Attention.HEAD_COUNT.format(arch="gemma3"), h["num_attention_heads"]),
          f32(Keys.Attention.LAYERNORM_RMS_EPS.format(arch="gemma3"), h["rms_norm_eps"]),
          u32(Keys.Attention.KEY_LENGTH.format(arch="gemma3"), h["head_dim"]),
          u32(Keys.Attention.VALUE_LENGTH.format(arch="gemma3"), h["head_dim"]),
          f32(Keys.Rope.FREQ_BASE.format(arch="gemma3"), h["rope_parameters"]["full_attention"]["rope_theta"])]
    if h.get("final_logit_softcapping"):
        kv.append(f32(Keys.LLM.FINAL_LOGIT_SOFTCAPPING.format(arch="gemma3"), h["final_logit_softcapping"]))
    if _pattern(h) != 1:  # a pattern of 1 makes every layer global: no window is written
        kv.append(u32(Keys.Attention.SLIDING_WINDOW.format(arch="gemma3"), h["sliding_window"]))
    kv.append(u32(Keys.Attention.HEAD_COUNT_KV.format(arch="gemma3"), h["num_key_value_heads"]))
    return kv


def vocab(model_dir: Path, h: dict) -> list:
    if (model_dir / "tokenizer.model").is_file():
        from hfview.tokenizer.vocab import ADD_SPACE_PREFIX, sentencepiece_vocab
        return [*sentencepiece_vocab(model_dir, h), boolean(ADD_SPACE_PREFIX, False)]
    from hfview.tokenizer.vocab import gpt2_vocab
    return gpt2_vocab(model_dir, h)


FAMILY = Family(
    name="gemma3",
    gguf_arch="gemma3",
    architectures=("Gemma3ForCausalLM", "Gemma3ForConditionalGeneration"),
    defaults=DEFAULTS,
    reads=READS,
    harmless=HARMLESS,
    tensors=TENSORS,
    parameters=parameters,
    vocab=vocab,
    refuse=REFUSE,
    check=check,
    normalise=normalise,
    notes={"embedding scale": "sqrt(hidden_size) is applied by llama.cpp's gemma3 graph; nothing is written",
           "image-text": "Gemma3ForConditionalGeneration is presented as its text model; the vision tower "
                         "and projector (the converter's --mmproj file) are not presented"},
    runner=RunnerFacts(llama_cpp_applies_window=True),  # llama.cpp's gemma3 slides on the layers layer_types names
)

"""Gemma 4 text, and the Gemma 4 image-text model read as its text model -> llama.cpp `gemma4` (the converter's
Gemma4Model, a Gemma3Model).

- Gemma4UnifiedForConditionalGeneration (gemma4_unified): the same decoder (its config class has no per-layer
  inputs or mixtures), read as its text model as below; the converter's Gemma4UnifiedModel adds only
  generation_config.json's suppress_tokens, refused where stated (not presented yet).
- Gemma4ForConditionalGeneration: text_config is merged over the top level (config.py), the text weights'
  `language_model.` prefix goes (the converter's rename), the vision tower and its embedder are left out as the
  converter's text conversion leaves them out.
- norms are stored as they scale (no 1 + w, unlike Gemma 3); each layer's `layer_scalar` becomes
  blk.N.layer_output_scale; the embedding scale sqrt(hidden_size) is not written: llama.cpp's graph applies it.
- two layer kinds: sliding layers with head_dim and num_key_value_heads, full-attention layers with their own
  head width (global_head_dim; transformers 5.24 folds it into per_layer_config) and KV head count
  (num_global_key_value_heads, only where attention_k_eq_v); written as key_length / key_length_swa and a
  head_count_kv array. Where attention_k_eq_v the full layers have no v_proj and use the keys as values, as
  llama.cpp does when attn_v is absent.
- rope: the sliding layers' (rope.freq_base_swa, whole head), the full layers' "proportional" rope, rotating
  partial_rotary_factor of the head as its first frequencies: a rope_freqs tensor of ones there and 1e30 over
  the unrotated rest, the converter's way of writing it for llama.cpp's neox rope.
- mixture layers (enable_moe_block, the 26B-A4B): the dense MLP runs beside the experts as a shared expert, each
  with its own norms; the stacked experts and the router's scales are presented as stored.
- the E models (E2B, E4B): per-layer inputs (a second embedding, a projection of the first, per-layer gates and
  projections), the last num_kv_shared_layers layers reading the keys and values of earlier ones (llama.cpp: always
  the last sliding and full layer before them, refused otherwise), double-wide MLPs on those layers (a
  feed_forward_length array).
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

from ..config import ANY, Harmless
from ..errors import ConfigError
from ..family import Experts, Family, Refuse, RunnerFacts, Skip, Tensor, stated, unset
from ..gguf_layout import KV, ValueType
from ..names import GGUF, Keys
from ..params import boolean, f32, text_model_parameters, u32
from ..views import NVFP4Pair
from ._parts.gemma_common import check_vocab_rows

_DEFAULT_ROPE = {"sliding_attention": {"rope_type": "default", "rope_theta": 10000.0},
                 "full_attention": {"rope_type": "proportional", "partial_rotary_factor": 0.25,
                                    "rope_theta": 1000000.0}}
_TEXT_DEFAULTS = dict(
    vocab_size=262144, hidden_size=2304, intermediate_size=9216, num_hidden_layers=30, num_attention_heads=8,
    num_key_value_heads=4, head_dim=256, hidden_activation="gelu_pytorch_tanh", max_position_embeddings=131072,
    rms_norm_eps=1e-06, tie_word_embeddings=True, attention_bias=False, sliding_window=512,
    final_logit_softcapping=None, use_bidirectional_attention=None, vocab_size_per_layer_input=262144,
    hidden_size_per_layer_input=256, attention_k_eq_v=False, num_kv_shared_layers=0, enable_moe_block=False,
    use_double_wide_mlp=False, num_experts=None, top_k_experts=None, moe_intermediate_size=None,
)
# transformers 5.24's Gemma4TextConfig defaults, as data (tests/test_family_gemma4.py compares them); a Gemma4Config
# (image-text) is read through its text_config, whose class is the same. rope_parameters, layer_types and
# per_layer_config are computed by the class (normalise), global_head_dim (512) and num_global_key_value_heads are
# constructor arguments it consumes.
# Gemma 4 Unified (Gemma4UnifiedForConditionalGeneration): the same decoder; its text config class knows no per-layer
# inputs or mixtures and defaults otherwise (transformers 5.24's Gemma4UnifiedTextConfig, as data)
_UNIFIED_DEFAULTS = dict(
    vocab_size=262144, hidden_size=2304, intermediate_size=9216, num_hidden_layers=30, num_attention_heads=8,
    num_key_value_heads=4, head_dim=256, hidden_activation="gelu_pytorch_tanh", max_position_embeddings=262144,
    rms_norm_eps=1e-06, tie_word_embeddings=True, attention_bias=False, sliding_window=1024,
    final_logit_softcapping=None, use_bidirectional_attention="vision", attention_k_eq_v=False,
    num_kv_shared_layers=0, use_double_wide_mlp=False,
)
DEFAULTS = {"gemma4_text": _TEXT_DEFAULTS, "gemma4": _TEXT_DEFAULTS,
            "gemma4_unified_text": _UNIFIED_DEFAULTS, "gemma4_unified": _UNIFIED_DEFAULTS}

READS = frozenset({
    *_TEXT_DEFAULTS, "rope_parameters", "layer_types", "per_layer_config", "global_head_dim",
    "num_global_key_value_heads", "expert_intermediate_size",
})
# The rest are the image-text wrapper's: the vision (and audio) towers and their tokens, which a text-only forward
# never touches.
HARMLESS: Harmless = {
    **dict.fromkeys(("vision_config", "audio_config", "audio_token_id", "boa_token_id", "boi_token_id",
                     "eoa_token_id", "eoa_token_index", "eoi_token_id", "image_token_id", "video_token_id",
                     "vision_soft_tokens_per_image"), ANY),
}

def _moe(h: dict) -> bool:
    return bool(h["enable_moe_block"])


def _moe_stacked(h: dict) -> bool:
    """A mixture whose experts are stored stacked, the router's per-expert scale beside them (not ModelOpt's NVFP4
    export: each expert its own linears, that scale folded into theirs by the converter)."""
    return _moe(h) and not h["_experts_split"]


def _per_layer_inputs(h: dict) -> bool:
    return bool(h.get("hidden_size_per_layer_input"))


def _own_kv(h: dict) -> bool:
    """Whether every layer stores its keys and values (no shared KV layers, which store none)."""
    return not h["num_kv_shared_layers"]


TENSORS = (
    Tensor("model.embed_tokens.weight", GGUF.TOKEN_EMBD.weight),
    Tensor("model.norm.weight", GGUF.OUTPUT_NORM.weight),
    Tensor("lm_head.weight", GGUF.OUTPUT.weight, required=False),  # absent when tied (as released)
    Tensor("model.layers.{bid}.input_layernorm.weight", GGUF.ATTN_NORM.weight),
    Tensor("model.layers.{bid}.layer_scalar", GGUF.LAYER_OUT_SCALE.weight),
    Tensor("model.layers.{bid}.self_attn.q_proj.weight", GGUF.ATTN_Q.weight),
    # the shared KV layers (num_kv_shared_layers, the last ones) store no keys, values or key norm
    Tensor("model.layers.{bid}.self_attn.k_proj.weight", GGUF.ATTN_K.weight, required=_own_kv),
    # absent on the full-attention layers where attention_k_eq_v (the keys are the values)
    Tensor("model.layers.{bid}.self_attn.v_proj.weight", GGUF.ATTN_V.weight,
           required=lambda h: not h["attention_k_eq_v"] and _own_kv(h)),
    Tensor("model.layers.{bid}.self_attn.o_proj.weight", GGUF.ATTN_OUT.weight),
    Tensor("model.layers.{bid}.self_attn.q_norm.weight", GGUF.ATTN_Q_NORM.weight),
    Tensor("model.layers.{bid}.self_attn.k_norm.weight", GGUF.ATTN_K_NORM.weight, required=_own_kv),
    Tensor("model.layers.{bid}.post_attention_layernorm.weight", GGUF.ATTN_POST_NORM.weight),
    Tensor("model.layers.{bid}.pre_feedforward_layernorm.weight", GGUF.FFN_NORM.weight),
    Tensor("model.layers.{bid}.post_feedforward_layernorm.weight", GGUF.FFN_POST_NORM.weight),
    Tensor("model.layers.{bid}.mlp.gate_proj.weight", GGUF.FFN_GATE.weight),
    Tensor("model.layers.{bid}.mlp.up_proj.weight", GGUF.FFN_UP.weight),
    Tensor("model.layers.{bid}.mlp.down_proj.weight", GGUF.FFN_DOWN.weight),
    # the mixture layers (enable_moe_block, the 26B-A4B): the MLP above is their shared expert; the experts are
    # stored stacked (gate and up fused, as llama.cpp's ffn_gate_up_exps takes them), the router with its own scale
    # and a per-expert scale of the experts' outputs (ffn_down_exps.scale)
    Tensor("model.layers.{bid}.experts.gate_up_proj", GGUF.FFN_GATE_UP_EXP.weight, required=_moe_stacked),
    Tensor("model.layers.{bid}.experts.down_proj", GGUF.FFN_DOWN_EXP.weight, required=_moe_stacked),
    # ModelOpt's NVFP4 exports: one linear per expert and projection, stacked by the converter's NVFP4 path
    *(Experts(f"model.layers.{{bid}}.experts.{{x}}.{p}_proj.weight", g, "num_experts", required=False)
      for p, g in (("gate", GGUF.FFN_GATE_EXP.weight), ("up", GGUF.FFN_UP_EXP.weight),
                   ("down", GGUF.FFN_DOWN_EXP.weight))),
    Tensor("model.layers.{bid}.router.proj.weight", GGUF.FFN_GATE_INP.weight, required=_moe),
    Tensor("model.layers.{bid}.router.scale", "blk.{bid}.ffn_gate_inp.scale", required=_moe),
    Tensor("model.layers.{bid}.router.per_expert_scale", "blk.{bid}.ffn_down_exps.scale", required=_moe_stacked),
    Tensor("model.layers.{bid}.pre_feedforward_layernorm_2.weight", GGUF.FFN_PRE_NORM_2.weight, required=_moe),
    Tensor("model.layers.{bid}.post_feedforward_layernorm_1.weight", GGUF.FFN_POST_NORM_1.weight,
           required=_moe),
    Tensor("model.layers.{bid}.post_feedforward_layernorm_2.weight", GGUF.FFN_POST_NORM_2.weight,
           required=_moe),
    # the E models' per-layer inputs: a second embedding of hidden_size_per_layer_input per layer, a projection of
    # the first embedding to the same, its norm; in each layer a gate, a projection back and a norm
    Tensor("model.embed_tokens_per_layer.weight", GGUF.PER_LAYER_TOKEN_EMBD.weight, required=_per_layer_inputs),
    Tensor("model.per_layer_model_projection.weight", GGUF.PER_LAYER_MODEL_PROJ.weight, required=_per_layer_inputs),
    Tensor("model.per_layer_projection_norm.weight", GGUF.PER_LAYER_PROJ_NORM.weight, required=_per_layer_inputs),
    Tensor("model.layers.{bid}.per_layer_input_gate.weight", GGUF.PER_LAYER_INP_GATE.weight,
           required=_per_layer_inputs),
    Tensor("model.layers.{bid}.per_layer_projection.weight", GGUF.PER_LAYER_PROJ.weight, required=_per_layer_inputs),
    Tensor("model.layers.{bid}.post_per_layer_input_norm.weight", GGUF.PER_LAYER_POST_NORM.weight,
           required=_per_layer_inputs),
    # the image-text model's vision (and audio) side, which the converter's --mmproj file holds
    Skip("model.vision_tower.{rest}"), Skip("model.embed_vision.{rest}"), Skip("model.vision_embedder.{rest}"),
    Skip("model.audio_tower.{rest}"), Skip("model.embed_audio.{rest}"),
)


def normalise(h: dict) -> dict:
    """What Gemma4TextConfig's __post_init__ computes: layer kinds (every 6th full, the last always full), the
    default rope, and per_layer_config (each full layer's head width and, where attention_k_eq_v, KV heads)."""
    n = h["num_hidden_layers"]
    h.setdefault("enable_moe_block", False)  # keys Gemma 4 Unified's config class does not have
    h.setdefault("hidden_size_per_layer_input", 0)
    if h.get("layer_types") is None:
        h["layer_types"] = ["sliding_attention" if (i + 1) % 6 else "full_attention" for i in range(n)]
    h["layer_types"] = list(h["layer_types"])
    if h["layer_types"]:
        h["layer_types"][-1] = "full_attention"  # transformers forces it (with a warning)
    rope = h.get("rope_parameters") or {}
    if not {"full_attention", "sliding_attention"} & set(rope):  # none stated (config.py folds it flat): the class's
        h["rope_parameters"] = {k: dict(v) for k, v in _DEFAULT_ROPE.items()}
    global_head_dim = h.pop("global_head_dim", 512)
    global_kv = h.pop("num_global_key_value_heads", None)
    if h.get("per_layer_config") is None:
        override = {"head_dim": global_head_dim}
        if h["attention_k_eq_v"] and global_kv is not None:
            override["num_key_value_heads"] = global_kv
        h["per_layer_config"] = {str(i): dict(override) for i, kind in enumerate(h["layer_types"])
                                 if kind == "full_attention"}
    return h


def _full_layer(h: dict, key: str):
    """The converter's reading: the first full-attention layer's per_layer_config entry for `key` (or None)."""
    for idx, cfg in h["per_layer_config"].items():
        if str(idx).isdigit() and int(idx) < len(h["layer_types"]) and h["layer_types"][int(idx)] == "full_attention" \
                and isinstance(cfg, dict) and key in cfg:
            return cfg[key]
    return None


REFUSE = (
    Refuse("attention_bias", unset, "llama.cpp's gemma4 has no attention biases"),
    Refuse("hidden_activation", ("gelu_pytorch_tanh",), "llama.cpp's gemma4 computes the tanh GELU only"),
    Refuse("use_bidirectional_attention", (None, "vision"), "text attends both ways there, llama.cpp's gemma4 "
           "causally"),
    Refuse("layer_types", lambda v: set(v) <= {"sliding_attention", "full_attention"},
           "Gemma 4 layers slide or attend fully"),
    Refuse("rope_parameters",
           lambda v: all(isinstance(v.get(k), dict) for k in ("sliding_attention", "full_attention")),
           "Gemma 4 states one rope per layer kind (sliding_attention, full_attention)"),
    Refuse("rope_parameters.sliding_attention",
           lambda v: (v.get("rope_type", "default"), v.get("partial_rotary_factor", 1.0)) == ("default", 1.0),
           "llama.cpp's gemma4 rotates the sliding layers' whole head, unscaled"),
    Refuse("rope_parameters.full_attention.rope_type", ("proportional",), "the converter writes the full layers' "
           "rope as proportional only (it asserts rope_type proportional)"),
    Refuse("sliding_window", stated, "the converter writes the window of the sliding layers"),
)


def check(h: dict, path: Path) -> None:
    if _per_layer_inputs(h) and h["vocab_size_per_layer_input"] != h["vocab_size"]:
        raise ConfigError(f"{path}: vocab_size_per_layer_input {h['vocab_size_per_layer_input']} differs from "
                          f"vocab_size {h['vocab_size']}: llama.cpp's gemma4 reads one row of the per-layer "
                          f"embedding per token of the vocabulary")
    if h["enable_moe_block"]:
        for key in ("num_experts", "top_k_experts", "moe_intermediate_size"):
            if not h.get(key):
                raise ConfigError(f"{path}: enable_moe_block with {key} {h.get(key)!r}: a mixture layer needs it")
        if h["top_k_experts"] > h["num_experts"]:
            raise ConfigError(f"{path}: top_k_experts {h['top_k_experts']} of num_experts {h['num_experts']}")
    if len(h["layer_types"]) != h["num_hidden_layers"]:
        raise ConfigError(f"{path}: layer_types has {len(h['layer_types'])} entries for {h['num_hidden_layers']} "
                          f"layers (num_hidden_layers)")
    n, shared = h["num_hidden_layers"], h["num_kv_shared_layers"]
    if shared:
        first = n - shared
        if first < 2 or h["layer_types"][first - 2:first] != ["sliding_attention", "full_attention"]:
            raise ConfigError(f"{path}: num_kv_shared_layers {shared} of {n} layers (layer_types {h['layer_types']}): "
                              f"llama.cpp's gemma4 reads the shared layers' keys and values from the last two "
                              f"layers before them, a sliding layer and then a full one; here they are "
                              f"{h['layer_types'][max(first - 2, 0):max(first, 0)]}")
    for idx, cfg in h["per_layer_config"].items():
        if not str(idx).isdigit() or int(idx) >= len(h["layer_types"]) or not isinstance(cfg, dict) \
                or h["layer_types"][int(idx)] != "full_attention" or set(cfg) - {"head_dim", "num_key_value_heads"} \
                or any(cfg.get(k) != _full_layer(h, k) for k in ("head_dim", "num_key_value_heads")):
            raise ConfigError(f"{path}: per_layer_config {h['per_layer_config']}: llama.cpp's gemma4 gives every "
                              f"full-attention layer one head width and KV head count, and the sliding layers theirs")
    full_layers = {i for i, kind in enumerate(h["layer_types"]) if kind == "full_attention"}
    if {int(idx) for idx in h["per_layer_config"]} != full_layers:
        raise ConfigError(f"{path}: per_layer_config names layers {sorted(int(i) for i in h['per_layer_config'])}, "
                          f"the full-attention layers are {sorted(full_layers)}: llama.cpp's gemma4 gives them all "
                          f"one head width")
    head_full = _full_layer(h, "head_dim")
    if head_full is None:
        raise ConfigError(f"{path}: no full-attention layer states its head width (per_layer_config); the converter "
                          f"needs one")
    factor = h["rope_parameters"]["full_attention"].get("partial_rotary_factor", 1.0)
    if (head_full * factor) % 2:
        raise ConfigError(f"{path}: rope_parameters.full_attention.partial_rotary_factor {factor}: {head_full} x "
                          f"{factor} is not an even number of rotated dimensions")
    check_vocab_rows(h, path.parent)
    if h.get("model_type", "").startswith("gemma4_unified"):
        from hfview.tokenizer.special import read_json
        gen = path.parent / "generation_config.json"
        if gen.is_file() and (read_json(gen) or {}).get("suppress_tokens") is not None:
            raise ConfigError(f"{gen}: suppress_tokens: the converter writes them for Gemma 4 Unified "
                              f"(tokenizer.ggml.suppress_tokens), which hfview does not present yet")


def parameters(h: dict, block_count: int, file_type: int) -> list:
    """TextModel's list, Gemma3Model's additions and restatements, then Gemma4Model's (a restated key keeps its
    place)."""
    head_full = _full_layer(h, "head_dim")
    head_swa = h["head_dim"]
    swa = [kind == "sliding_attention" for kind in h["layer_types"]]
    kv = [*text_model_parameters(h, "gemma4", block_count, file_type),
          u32(Keys.LLM.CONTEXT_LENGTH.format(arch="gemma4"), h["max_position_embeddings"]),
          u32(Keys.Attention.HEAD_COUNT.format(arch="gemma4"), h["num_attention_heads"]),
          f32(Keys.Attention.LAYERNORM_RMS_EPS.format(arch="gemma4"), h["rms_norm_eps"]),
          u32(Keys.Attention.KEY_LENGTH.format(arch="gemma4"), head_swa),
          u32(Keys.Attention.VALUE_LENGTH.format(arch="gemma4"), head_swa),
          f32(Keys.Rope.FREQ_BASE.format(arch="gemma4"),
              h["rope_parameters"]["full_attention"].get("rope_theta", 1000000.0))]
    if h.get("final_logit_softcapping"):
        kv.append(f32(Keys.LLM.FINAL_LOGIT_SOFTCAPPING.format(arch="gemma4"), h["final_logit_softcapping"]))
    kv += [u32(Keys.Attention.SLIDING_WINDOW.format(arch="gemma4"), h["sliding_window"]),
           u32(Keys.Attention.HEAD_COUNT_KV.format(arch="gemma4"), h["num_key_value_heads"]),
           u32(Keys.Attention.SHARED_KV_LAYERS.format(arch="gemma4"), h["num_kv_shared_layers"]),
           u32(Keys.LLM.EMBD_LENGTH_PER_LAYER_INP.format(arch="gemma4"), h.get("hidden_size_per_layer_input") or 0),
           KV(Keys.Attention.SLIDING_WINDOW_PATTERN.format(arch="gemma4"), ValueType.ARRAY, swa, ValueType.BOOL),
           u32(Keys.Attention.KEY_LENGTH.format(arch="gemma4"), head_full),
           u32(Keys.Attention.VALUE_LENGTH.format(arch="gemma4"), head_full),
           u32(Keys.Attention.KEY_LENGTH_SWA.format(arch="gemma4"), head_swa),
           u32(Keys.Attention.VALUE_LENGTH_SWA.format(arch="gemma4"), head_swa)]
    if (n_ff_exp := h.get("expert_intermediate_size", h.get("moe_intermediate_size"))) is not None:
        kv.append(u32(Keys.LLM.EXPERT_FEED_FORWARD_LENGTH.format(arch="gemma4"), n_ff_exp))
    if h["use_double_wide_mlp"]:  # the shared KV layers' MLPs are twice as wide
        first_shared = block_count - h["num_kv_shared_layers"]
        n_ff = h["intermediate_size"]
        kv.append(KV(Keys.LLM.FEED_FORWARD_LENGTH.format(arch="gemma4"), ValueType.ARRAY,
                     [n_ff if il < first_shared else 2 * n_ff for il in range(block_count)], ValueType.INT32))
    kv_full = _full_layer(h, "num_key_value_heads")
    if kv_full is not None:
        kv.append(KV(Keys.Attention.HEAD_COUNT_KV.format(arch="gemma4"), ValueType.ARRAY,
                     [h["num_key_value_heads"] if s else kv_full for s in swa], ValueType.INT32))
    kv += [u32(Keys.Rope.DIMENSION_COUNT.format(arch="gemma4"), head_full),
           u32(Keys.Rope.DIMENSION_COUNT_SWA.format(arch="gemma4"), head_swa)]
    return kv


def generated(h: dict) -> list:
    """rope_freqs for the full layers' proportional rope: 1 over the rotated frequencies, 1e30 (no rotation)
    over the rest of the head's half."""
    head_full = _full_layer(h, "head_dim")
    n_rot = int(head_full * h["rope_parameters"]["full_attention"].get("partial_rotary_factor", 1.0) / 2)
    return [(GGUF.ROPE_FREQS.weight, np.array([1.0] * n_rot + [1e30] * (head_full // 2 - n_rot), dtype=np.float32))]


_VISIBLE = {"<|channel>", "<channel|>", "<|tool_call>", "<tool_call|>", "<|tool_response>", "<tool_response|>",
            '<|"|>'}


def vocab(model_dir: Path, h: dict) -> list:
    """Gemma4Model.set_vocab: tokenizer.json read as LlamaHfVocab reads it (model 'gemma4', no pre-tokenizer), the
    chat markup tokens typed USER_DEFINED, then the special vocabulary with merges, no space prefix, BOS added."""
    from hfview.tokenizer.special import SpecialVocab
    from hfview.tokenizer.vocab import (ADD_BOS, ADD_SPACE_PREFIX, MODEL, SCORES, TOKEN_TYPE, TOKENS, USER_DEFINED,
                                        llama_hf_tokens)
    from hfview.tokenizer.writer import KVWriter
    tokens, scores, types = llama_hf_tokens(Path(model_dir))
    types = [USER_DEFINED if text in _VISIBLE else t for text, t in zip(tokens, types)]
    w = KVWriter()
    w.add_string(MODEL, "gemma4")
    w.add_array(TOKENS, tokens)
    w.add_array(SCORES, [float(s) for s in scores])
    w.add_array(TOKEN_TYPE, types)
    SpecialVocab(Path(model_dir), load_merges=True).write(w)
    return [*w.kvs(), boolean(ADD_SPACE_PREFIX, False), boolean(ADD_BOS, True)]


FAMILY = Family(
    name="gemma4",
    gguf_arch="gemma4",
    architectures=("Gemma4ForCausalLM", "Gemma4ForConditionalGeneration", "Gemma4UnifiedForConditionalGeneration"),
    defaults=DEFAULTS,
    reads=READS,
    harmless=HARMLESS,
    tensors=TENSORS,
    parameters=parameters,
    vocab=vocab,
    generated=generated,
    refuse=REFUSE,
    check=check,
    normalise=normalise,
    # (read only as NVFP4: the converter stacks per-expert linears on its NVFP4 path alone)
    stored_hparams=lambda h, stored: {**h, "_experts_split": any(
        n.endswith(".experts.0.down_proj.weight") and isinstance(t, NVFP4Pair) for n, t in stored.items())},
    notes={"embedding scale": "sqrt(hidden_size) is applied by llama.cpp's gemma4 graph; nothing is written",
           "image-text": "Gemma4ForConditionalGeneration is presented as its text model; the vision tower and "
                         "its embedder (the converter's --mmproj file) are not presented"},
    # llama.cpp's gemma4 slides on the layers sliding_window_pattern names
    runner=RunnerFacts(llama_cpp_applies_window=True),
)

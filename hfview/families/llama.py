"""Llama, Mistral, Mixtral -> llama.cpp `llama` (the converter's LlamaModel).

The Mistral 3 image-text model whose text model is a Mistral (Mistral Small 3.1 / 3.2, Devstral Small, Magistral
Small: Mistral3ForConditionalGeneration, text_config model_type mistral) is read as that text model under
llama.cpp's `mistral3` architecture, as the converter's Mistral3Model writes it (LlamaModel's keys, nothing else);
its Pixtral tower and projector are left out. With a Ministral 3 text model it is the ministral3 family's.
LLaVA-1.5 (LlavaForConditionalGeneration over a Llama) is read as its text model under `llama`, as the converter's
LlamaModel writes it; its CLIP tower and projector are left out, and their configuration is ignored. Voxtral
(VoxtralForConditionalGeneration) likewise, its audio tower left out and its tekken.json read as the converter reads
it through mistral_common."""
from __future__ import annotations

from ..config import ANY, Harmless
from ..family import Family, Refuse
from ._parts.checks import silu_only
from ._parts.decoder import LLAMA_TENSORS, is_mistral3_wrapper, llama_parameters
from ._parts.rope import llama3_rope_freqs
from ._parts.vocab import llama_vocab

# transformers 5.24's config classes, as data: what the converter sees where config.json is silent.
_COMMON = dict(vocab_size=32000, hidden_size=4096, num_hidden_layers=32, num_attention_heads=32,
               hidden_act="silu", initializer_range=0.02, rms_norm_eps=1e-06, use_cache=True, bos_token_id=1,
               eos_token_id=2, tie_word_embeddings=False, attention_dropout=0.0)
DEFAULTS = {
    "llama": dict(_COMMON, intermediate_size=11008, num_key_value_heads=None, max_position_embeddings=2048,
                  pretraining_tp=1, attention_bias=False, mlp_bias=False, head_dim=None,
                  rope_parameters={"rope_theta": 10000.0, "rope_type": "default"}),
    "mistral": dict(_COMMON, intermediate_size=14336, num_key_value_heads=8, head_dim=None,
                    max_position_embeddings=131072, sliding_window=4096,
                    rope_parameters={"rope_theta": 10000.0, "rope_type": "default"}),
    "mixtral": dict(_COMMON, intermediate_size=14336, num_key_value_heads=8, head_dim=None, rms_norm_eps=1e-05,
                    max_position_embeddings=131072, sliding_window=None, num_experts_per_tok=2,
                    num_local_experts=8, rope_parameters={"rope_theta": 1000000.0, "rope_type": "default"}),
}

READS = frozenset({
    "vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads",
    "num_key_value_heads", "head_dim", "max_position_embeddings", "rms_norm_eps", "rope_parameters",
    "rope_scaling", "rope_theta", "hidden_act", "num_local_experts", "num_experts_per_tok",
    "tie_word_embeddings", "sliding_window", "attention_bias", "mlp_bias",
})
# Qwen-derived keys on llama-type configs: transformers' Llama and Mistral never read them.
HARMLESS: Harmless = {"max_window_layers": ANY, "use_sliding_window": ANY,
                      # the Mistral 3 image-text wrapper's: its vision tower, projector and image token, which a
                      # text-only forward never touches
                      "vision_config": ANY, "image_token_index": ANY, "image_token_id": ANY,
                      "projector_hidden_act": ANY, "vision_feature_layer": ANY, "multimodal_projector_bias": ANY,
                      "spatial_merge_size": ANY}



_ROPE_TYPES = ("default", "linear", "llama3", "yarn")


def normalise(h: dict) -> dict:
    """What the config classes compute in their constructors."""
    if h.get("num_key_value_heads") is None:
        h["num_key_value_heads"] = h["num_attention_heads"]
    if h.get("head_dim") is None and h["model_type"] in ("llama", "mistral"):
        h["head_dim"] = h["hidden_size"] // h["num_attention_heads"]
    return h


REFUSE = (
    silu_only("llama"),
    Refuse("rope_parameters.rope_type", _ROPE_TYPES, f"not one llama.cpp's llama architecture computes "
           f"({', '.join(_ROPE_TYPES)})", default="default"),
)


def arch_for(h: dict) -> str:
    return "mistral3" if is_mistral3_wrapper(h) else "llama"


def parameters(h: dict, block_count: int, file_type: int) -> list:
    return llama_parameters(arch_for(h))(h, block_count, file_type)


FAMILY = Family(
    name="llama",
    gguf_arch="llama",
    architectures=("LlamaForCausalLM", "MistralForCausalLM", "MixtralForCausalLM",
                   "Mistral3ForConditionalGeneration",  # its Mistral text model (mistral3)
                   "LlavaForConditionalGeneration",  # LLaVA-1.5's Llama text model, as the converter's LlamaModel
                   "VoxtralForConditionalGeneration"),  # Voxtral's, likewise
    defaults=DEFAULTS,
    reads=READS,
    harmless=HARMLESS,
    tensors=LLAMA_TENSORS,
    parameters=parameters,
    vocab=llama_vocab,
    generated=llama3_rope_freqs,
    refuse=REFUSE,
    normalise=normalise,
    gguf_arch_for=arch_for,
    # its converter classes are LlamaModels with undo_permute (Mistral 3's wrapper delegates to one)
    nvfp4_qk_pairs=lambda h: True,
    notes={"sliding_window": "llama.cpp's llama architecture attends to the whole context: the runner "
                             "caps the context at sliding_window so the computation stays the same"},
)

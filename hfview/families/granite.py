"""Granite (GraniteForCausalLM) -> llama.cpp `granite` (the converter's GraniteModel, a LlamaModel).

Llama's tensors (Q/K regrouped into rotation pairs) and vocabulary; Llama's hyperparameters without
head_dim (the converter drops it: rope dimensions are hidden_size / heads) plus Granite's four
multipliers, written as llama.cpp's scales.
"""
from __future__ import annotations

from pathlib import Path

from ..config import ANY, Harmless
from ..family import Family, RunnerFacts, Skip
from ..names import Keys
from ..params import f32, text_model_parameters, u32
from ._parts.checks import rope_types, silu_only
from ._parts.decoder import LLAMA_TENSORS

# transformers 5.24's GraniteConfig defaults
DEFAULTS = {
    "granite": dict(vocab_size=32000, hidden_size=4096, intermediate_size=11008, num_hidden_layers=32,
                    num_attention_heads=32, num_key_value_heads=None, hidden_act="silu",
                    max_position_embeddings=2048, initializer_range=0.02, rms_norm_eps=1e-06, use_cache=True,
                    pad_token_id=None, bos_token_id=1, eos_token_id=2, tie_word_embeddings=False,
                    rope_parameters={"rope_theta": 10000.0, "rope_type": "default"}, attention_bias=False,
                    attention_dropout=0.0, mlp_bias=False, embedding_multiplier=1.0, logits_scaling=1.0,
                    residual_multiplier=1.0, attention_multiplier=1.0),
}

READS = frozenset({
    "vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads",
    "num_key_value_heads", "max_position_embeddings", "rms_norm_eps", "rope_parameters", "rope_scaling",
    "rope_theta", "hidden_act", "tie_word_embeddings", "attention_bias", "mlp_bias", "embedding_multiplier",
    "logits_scaling", "residual_multiplier", "attention_multiplier",
})
# GraniteConfig has no head_dim: transformers derives it from hidden_size, and so does the converter
HARMLESS: Harmless = {"head_dim": ANY}

# Llama's dense rules (the mixture rules belong to GraniteMoe, another converter class)
TENSORS = tuple(r for r in LLAMA_TENSORS if isinstance(r, Skip) or "block_sparse_moe" not in r.hf)

_MULTIPLIERS = (("attention_multiplier", "attention.scale"), ("embedding_multiplier", "embedding_scale"),
                ("residual_multiplier", "residual_scale"), ("logits_scaling", "logit_scale"))


def normalise(h: dict) -> dict:
    if h.get("num_key_value_heads") is None:
        h["num_key_value_heads"] = h["num_attention_heads"]
    h.pop("head_dim", None)  # ignored by transformers' Granite and dropped by the converter
    return h


REFUSE = (silu_only("granite"), rope_types("granite"))


def granite_parameters(arch: str):
    """The converter's GraniteModel list under llama.cpp architecture `arch` (granite, granitemoe)."""
    def parameters(h: dict, block_count: int, file_type: int) -> list:
        kv = [*text_model_parameters(h, arch, block_count, file_type),
              u32(Keys.LLM.VOCAB_SIZE.format(arch=arch), h["vocab_size"]),
              u32(Keys.Rope.DIMENSION_COUNT.format(arch=arch), h["hidden_size"] // h["num_attention_heads"])]
        # a multiplier of 0 (or absent) is not written, as the converter tests them for truth
        kv += [f32(f"{arch}.{key}", h[name]) for name, key in _MULTIPLIERS if h.get(name)]
        return kv
    return parameters


parameters = granite_parameters("granite")


def vocab(model_dir: Path, h: dict) -> list:
    from hfview.tokenizer.vocab import llama_vocab
    return llama_vocab(model_dir, h)


FAMILY = Family(
    name="granite",
    gguf_arch="granite",
    architectures=("GraniteForCausalLM",),
    defaults=DEFAULTS,
    reads=READS,
    harmless=HARMLESS,
    tensors=TENSORS,
    parameters=parameters,
    vocab=vocab,
    refuse=REFUSE,
    normalise=normalise,
    nvfp4_qk_pairs=lambda h: True,  # its converter class is a LlamaModel with undo_permute
    runner=RunnerFacts(applies_ffn_scales=False),  # llama.cpp's granite graph passes its FFNs no scale
)

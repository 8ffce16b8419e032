"""Orion (OrionForCausalLM, remote code) -> llama.cpp `orion` (the converter's OrionModel).

transformers has no Orion config class, so the converter reads config.json as it is. Tensors as stored
(no Q/K regrouping), LayerNorm weights and biases (Orion's config calls its epsilon rms_norm_eps, but the
norm is a LayerNorm). Orion's own short hyperparameter list: file type first, a tensor data layout tag,
and no rope entries (llama.cpp's default theta, 10000, is Orion's).
"""
from __future__ import annotations

from pathlib import Path

from ..config import Harmless
from ..errors import ConfigError
from ..family import Family, Refuse, Skip, Tensor, stated
from ..names import GGUF, Keys
from ..params import f32, string, u32
from ._parts.checks import silu_only

DEFAULTS = {"orion": {}}  # no transformers class: nothing is filled in

READS = frozenset({
    "vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads",
    "num_key_value_heads", "max_sequence_length", "max_position_embeddings", "model_max_length", "rms_norm_eps",
    "rope_scaling", "rope_theta", "hidden_act", "tie_word_embeddings",
})
HARMLESS: Harmless = {}

TENSORS = (
    Tensor("model.embed_tokens.weight", GGUF.TOKEN_EMBD.weight),
    Tensor("model.norm.{wb}", GGUF.OUTPUT_NORM.wb),
    Tensor("lm_head.weight", GGUF.OUTPUT.weight),
    Tensor("model.layers.{bid}.input_layernorm.{wb}", GGUF.ATTN_NORM.wb),
    Tensor("model.layers.{bid}.self_attn.q_proj.weight", GGUF.ATTN_Q.weight),
    Tensor("model.layers.{bid}.self_attn.k_proj.weight", GGUF.ATTN_K.weight),
    Tensor("model.layers.{bid}.self_attn.v_proj.weight", GGUF.ATTN_V.weight),
    Tensor("model.layers.{bid}.self_attn.o_proj.weight", GGUF.ATTN_OUT.weight),
    Tensor("model.layers.{bid}.post_attention_layernorm.{wb}", GGUF.FFN_NORM.wb),
    Tensor("model.layers.{bid}.mlp.gate_proj.weight", GGUF.FFN_GATE.weight),
    Tensor("model.layers.{bid}.mlp.up_proj.weight", GGUF.FFN_UP.weight),
    Tensor("model.layers.{bid}.mlp.down_proj.weight", GGUF.FFN_DOWN.weight),
    Skip("model.layers.{bid}.self_attn.rotary_emb.inv_freq"),
)


def _context_length(h: dict) -> int | None:
    for key in ("max_sequence_length", "max_position_embeddings", "model_max_length"):
        if key in h:
            return h[key]
    return None


REFUSE = (
    *(Refuse(key, stated, f"Orion needs {key!r} (read as stated: transformers has no Orion class "
             f"to fill it in); add it as the released config.json has it")
      for key in ("hidden_size", "intermediate_size", "num_attention_heads", "num_hidden_layers", "rms_norm_eps")),
    silu_only("orion"),
)


def check(h: dict, path: Path) -> None:
    if _context_length(h) is None:
        raise ConfigError(f"{path}: no context length (max_sequence_length, max_position_embeddings or "
                          f"model_max_length); the converter refuses this too")
    rope = h["rope_parameters"]
    if rope.get("rope_type", "default") != "default" or rope.get("rope_theta", 10000.0) != 10000.0:
        raise ConfigError(f"{path}: rope {rope!r}: the converter writes no rope parameters for Orion, so llama.cpp "
                          f"computes unscaled rope with theta 10000; this checkpoint would run wrong")


def parameters(h: dict, block_count: int, file_type: int) -> list:
    return [
        u32(Keys.General.FILE_TYPE, file_type),
        string(Keys.LLM.TENSOR_DATA_LAYOUT.format(arch="orion"), "Meta AI original pth"),
        u32(Keys.LLM.CONTEXT_LENGTH.format(arch="orion"), _context_length(h)),
        u32(Keys.LLM.EMBEDDING_LENGTH.format(arch="orion"), h["hidden_size"]),
        u32(Keys.LLM.BLOCK_COUNT.format(arch="orion"), block_count),
        u32(Keys.LLM.FEED_FORWARD_LENGTH.format(arch="orion"), h["intermediate_size"]),
        u32(Keys.Attention.HEAD_COUNT.format(arch="orion"), h["num_attention_heads"]),
        u32(Keys.Attention.HEAD_COUNT_KV.format(arch="orion"), h.get("num_key_value_heads", h["num_attention_heads"])),
        f32(Keys.Attention.LAYERNORM_EPS.format(arch="orion"), h["rms_norm_eps"]),
    ]


def vocab(model_dir: Path, h: dict) -> list:
    from hfview.tokenizer.errors import TokenizerError
    from hfview.tokenizer.vocab import sentencepiece_vocab
    if not (model_dir / "tokenizer.model").is_file():
        raise TokenizerError(f"{model_dir / 'tokenizer.model'} is missing: the converter reads Orion's vocabulary "
                             f"from the SentencePiece model only; copy it from the released checkpoint")
    return sentencepiece_vocab(model_dir, h)


FAMILY = Family(
    name="orion",
    gguf_arch="orion",
    architectures=("OrionForCausalLM",),
    defaults=DEFAULTS,
    reads=READS,
    harmless=HARMLESS,
    tensors=TENSORS,
    parameters=parameters,
    vocab=vocab,
    refuse=REFUSE,
    check=check,
)

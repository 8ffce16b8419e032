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
from ..family import Family, Skip, Tensor
from ..params import f32, string, u32

DEFAULTS = {"orion": {}}  # no transformers class: nothing is filled in

READS = frozenset({
    "vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads",
    "num_key_value_heads", "max_sequence_length", "max_position_embeddings", "model_max_length", "rms_norm_eps",
    "rope_scaling", "rope_theta", "hidden_act", "tie_word_embeddings",
})
HARMLESS: Harmless = {}

TENSORS = (
    Tensor("model.embed_tokens.weight", "token_embd.weight"),
    Tensor("model.norm.{wb}", "output_norm.{wb}"),
    Tensor("lm_head.weight", "output.weight"),
    Tensor("model.layers.{bid}.input_layernorm.{wb}", "blk.{bid}.attn_norm.{wb}"),
    Tensor("model.layers.{bid}.self_attn.q_proj.weight", "blk.{bid}.attn_q.weight"),
    Tensor("model.layers.{bid}.self_attn.k_proj.weight", "blk.{bid}.attn_k.weight"),
    Tensor("model.layers.{bid}.self_attn.v_proj.weight", "blk.{bid}.attn_v.weight"),
    Tensor("model.layers.{bid}.self_attn.o_proj.weight", "blk.{bid}.attn_output.weight"),
    Tensor("model.layers.{bid}.post_attention_layernorm.{wb}", "blk.{bid}.ffn_norm.{wb}"),
    Tensor("model.layers.{bid}.mlp.gate_proj.weight", "blk.{bid}.ffn_gate.weight"),
    Tensor("model.layers.{bid}.mlp.up_proj.weight", "blk.{bid}.ffn_up.weight"),
    Tensor("model.layers.{bid}.mlp.down_proj.weight", "blk.{bid}.ffn_down.weight"),
    Skip("model.layers.{bid}.self_attn.rotary_emb.inv_freq"),
)


def _context_length(h: dict) -> int | None:
    for key in ("max_sequence_length", "max_position_embeddings", "model_max_length"):
        if key in h:
            return h[key]
    return None


def check(h: dict, path: Path) -> None:
    for key in ("hidden_size", "intermediate_size", "num_attention_heads", "num_hidden_layers", "rms_norm_eps"):
        if h.get(key) is None:
            raise ConfigError(f"{path}: Orion needs {key!r} (read as stated: transformers has no Orion class to "
                              f"fill it in); add it as the released config.json has it")
    if _context_length(h) is None:
        raise ConfigError(f"{path}: no context length (max_sequence_length, max_position_embeddings or "
                          f"model_max_length); the converter refuses this too")
    if h.get("hidden_act", "silu") != "silu":
        raise ConfigError(f"{path}: hidden_act {h['hidden_act']!r}: llama.cpp's orion architecture computes SiLU "
                          f"only; this checkpoint would run wrong")
    rope = h["rope_parameters"]
    if rope.get("rope_type", "default") != "default" or rope.get("rope_theta", 10000.0) != 10000.0:
        raise ConfigError(f"{path}: rope {rope!r}: the converter writes no rope parameters for Orion, so llama.cpp "
                          f"computes unscaled rope with theta 10000; this checkpoint would run wrong")


def parameters(h: dict, block_count: int, file_type: int) -> list:
    return [
        u32("general.file_type", file_type),
        string("orion.tensor_data_layout", "Meta AI original pth"),
        u32("orion.context_length", _context_length(h)),
        u32("orion.embedding_length", h["hidden_size"]),
        u32("orion.block_count", block_count),
        u32("orion.feed_forward_length", h["intermediate_size"]),
        u32("orion.attention.head_count", h["num_attention_heads"]),
        u32("orion.attention.head_count_kv", h.get("num_key_value_heads", h["num_attention_heads"])),
        f32("orion.attention.layer_norm_epsilon", h["rms_norm_eps"]),
    ]


def vocab(model_dir: Path, h: dict) -> list:
    from tokenizer.errors import TokenizerError
    from tokenizer.vocab import sentencepiece_vocab
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
    check=check,
)

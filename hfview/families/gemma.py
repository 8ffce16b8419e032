"""Gemma (1) -> llama.cpp `gemma` (the converter's GemmaModel).

What the converter does beyond the plain tensor map:
- every `*norm.weight` is stored as 1 + w (Gemma's RMSNorm multiplies by 1 + w; llama.cpp's by w);
- `lm_head.weight` is dropped: llama.cpp's gemma always reads the output through the embeddings;
- the embedding scale sqrt(hidden_size) is not written anywhere: llama.cpp's gemma graph applies it itself,
  so nothing about it is presented;
- its own short hyperparameter list (no rope keys: llama.cpp's default base 10000 is Gemma's);
- the SentencePiece vocabulary plus CodeGemma's fixed special ids, without a space prefix.
"""
from __future__ import annotations

from pathlib import Path

from ..config import ANY, Harmless
from ..errors import ConfigError
from ..family import Family, Skip, Tensor
from ..params import f32, u32
from ..views import OFFSET_ONE

# transformers 5.24's GemmaConfig defaults, as data (tests/test_family_gemma.py compares them).
DEFAULTS = {
    "gemma": dict(vocab_size=256000, hidden_size=3072, intermediate_size=24576, num_hidden_layers=28,
                  num_attention_heads=16, num_key_value_heads=16, head_dim=256, hidden_act="gelu_pytorch_tanh",
                  max_position_embeddings=8192, initializer_range=0.02, rms_norm_eps=1e-06, use_cache=True,
                  pad_token_id=0, eos_token_id=1, bos_token_id=2, tie_word_embeddings=True,
                  rope_parameters={"rope_theta": 10000.0, "rope_type": "default"}, attention_bias=False,
                  attention_dropout=0.0, use_bidirectional_attention=None),
}

READS = frozenset({
    "vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads",
    "num_key_value_heads", "head_dim", "max_position_embeddings", "rms_norm_eps", "hidden_act",
    "tie_word_embeddings", "attention_bias", "rope_parameters", "rope_scaling", "rope_theta",
    "use_bidirectional_attention",
})
# transformers 5's Gemma computes with hidden_act only; hidden_activation is a leftover of 4.x configs.
HARMLESS: Harmless = {"hidden_activation": ANY}

# The norms the converter shifts: every HF name ending in "norm.weight".
NORM = (OFFSET_ONE,)

TENSORS = (
    Tensor("model.embed_tokens.weight", "token_embd.weight"),
    Tensor("model.norm.weight", "output_norm.weight", steps=NORM),
    Skip("lm_head.weight"),  # the converter drops it: the output is the (tied) embedding matrix
    Tensor("model.layers.{bid}.input_layernorm.weight", "blk.{bid}.attn_norm.weight", steps=NORM),
    Tensor("model.layers.{bid}.self_attn.q_proj.weight", "blk.{bid}.attn_q.weight"),
    Tensor("model.layers.{bid}.self_attn.k_proj.weight", "blk.{bid}.attn_k.weight"),
    Tensor("model.layers.{bid}.self_attn.v_proj.weight", "blk.{bid}.attn_v.weight"),
    Tensor("model.layers.{bid}.self_attn.o_proj.weight", "blk.{bid}.attn_output.weight"),
    Tensor("model.layers.{bid}.post_attention_layernorm.weight", "blk.{bid}.ffn_norm.weight", steps=NORM),
    Tensor("model.layers.{bid}.mlp.gate_proj.weight", "blk.{bid}.ffn_gate.weight"),
    Tensor("model.layers.{bid}.mlp.up_proj.weight", "blk.{bid}.ffn_up.weight"),
    Tensor("model.layers.{bid}.mlp.down_proj.weight", "blk.{bid}.ffn_down.weight"),
)

TANH_GELU = ("gelu", "gelu_pytorch_tanh")  # transformers reads Gemma's legacy "gelu" as the tanh form


def check_gemma_common(h: dict, path: Path, arch: str, act_key: str) -> None:
    """What Gemma 1 and 2 configs can state that llama.cpp's graphs (and the converter's keys) cannot carry."""
    if h.get(act_key) not in TANH_GELU:
        raise ConfigError(f"{path}: {act_key} {h.get(act_key)!r}: llama.cpp's {arch} computes the tanh GELU only")
    rope = h["rope_parameters"]
    if rope.get("rope_type", "default") != "default" or rope.get("rope_theta", 10000.0) != 10000.0:
        raise ConfigError(f"{path}: rope {rope}: the converter writes no rope keys for {arch}, so llama.cpp would "
                          f"use base 10000 without scaling; this checkpoint would run wrong")
    if h.get("attention_bias"):
        raise ConfigError(f"{path}: attention_bias true: llama.cpp's {arch} has no attention output bias")
    if h.get("use_bidirectional_attention"):
        raise ConfigError(f"{path}: use_bidirectional_attention: llama.cpp's {arch} attends causally only")
    if not h.get("tie_word_embeddings", True):
        raise ConfigError(f"{path}: tie_word_embeddings false: the converter drops lm_head.weight and llama.cpp's "
                          f"{arch} reads the output through the embeddings; an untied head would be lost")


def check(h: dict, path: Path) -> None:
    check_gemma_common(h, path, "gemma", "hidden_act")


def gemma_parameters(arch: str, h: dict, block_count: int, file_type: int) -> list:
    """GemmaModel/Gemma2Model.set_gguf_parameters' own list (in its order), not TextModel's."""
    return [u32(f"{arch}.context_length", h["max_position_embeddings"]),
            u32(f"{arch}.embedding_length", h["hidden_size"]),
            u32(f"{arch}.block_count", block_count),
            u32(f"{arch}.feed_forward_length", h["intermediate_size"]),
            u32(f"{arch}.attention.head_count", h["num_attention_heads"]),
            u32(f"{arch}.attention.head_count_kv", h.get("num_key_value_heads", h["num_attention_heads"])),
            f32(f"{arch}.attention.layer_norm_rms_epsilon", h["rms_norm_eps"]),
            u32(f"{arch}.attention.key_length", h["head_dim"]),
            u32(f"{arch}.attention.value_length", h["head_dim"]),
            u32("general.file_type", file_type)]


def parameters(h: dict, block_count: int, file_type: int) -> list:
    return gemma_parameters("gemma", h, block_count, file_type)


def sentencepiece_without_space_prefix(model_dir: Path, h: dict):
    """_set_vocab_sentencepiece, as a KVWriter, with add_space_prefix false appended by the caller."""
    from tokenizer.vocab import sentencepiece_vocab
    from tokenizer.writer import KVWriter
    w = KVWriter()
    w.extend(sentencepiece_vocab(model_dir, h))
    return w


# CodeGemma's fill-in-the-middle and end-of-turn ids, which the converter sets on every Gemma; the FIM
# types have no GGUF key under these names, so only eot reaches the file (as in the converter's output).
_CODEGEMMA_IDS = {"prefix": 67, "suffix": 69, "middle": 68, "fsep": 70, "eot": 107}


def vocab(model_dir: Path, h: dict) -> list:
    from tokenizer.special import SpecialVocab
    from tokenizer.vocab import ADD_SPACE_PREFIX
    w = sentencepiece_without_space_prefix(model_dir, h)
    special = SpecialVocab(model_dir, load_merges=False, special_token_types=list(_CODEGEMMA_IDS))
    for typ, tid in _CODEGEMMA_IDS.items():
        special.set_special_token(typ, tid)
    special.chat_template = None  # the first SpecialVocab already wrote it
    special.write(w)
    w.add_bool(ADD_SPACE_PREFIX, False)
    return w.kvs()


FAMILY = Family(
    name="gemma",
    gguf_arch="gemma",
    architectures=("GemmaForCausalLM",),
    defaults=DEFAULTS,
    reads=READS,
    harmless=HARMLESS,
    tensors=TENSORS,
    parameters=parameters,
    vocab=vocab,
    check=check,
    notes={"embedding scale": "sqrt(hidden_size) is applied by llama.cpp's gemma graph; nothing is written"},
)

"""What the Gemma families share: (1 + w) norms, the tanh GELU, Gemma's scaled embeddings and query scale, alternating
sliding layers, and the SentencePiece vocab without a space prefix."""
from __future__ import annotations

from pathlib import Path

from ...errors import ConfigError
from ...names import Keys
from ...params import f32, u32
from ...views import OFFSET_ONE

# The norms the converter shifts: every HF name ending in "norm.weight".
NORM = (OFFSET_ONE,)


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


def gemma_parameters(arch: str, h: dict, block_count: int, file_type: int) -> list:
    """GemmaModel/Gemma2Model.set_gguf_parameters' own list (in its order), not TextModel's."""
    return [u32(Keys.LLM.CONTEXT_LENGTH.format(arch=arch), h["max_position_embeddings"]),
            u32(Keys.LLM.EMBEDDING_LENGTH.format(arch=arch), h["hidden_size"]),
            u32(Keys.LLM.BLOCK_COUNT.format(arch=arch), block_count),
            u32(Keys.LLM.FEED_FORWARD_LENGTH.format(arch=arch), h["intermediate_size"]),
            u32(Keys.Attention.HEAD_COUNT.format(arch=arch), h["num_attention_heads"]),
            u32(Keys.Attention.HEAD_COUNT_KV.format(arch=arch), h.get("num_key_value_heads", h["num_attention_heads"])),
            f32(Keys.Attention.LAYERNORM_RMS_EPS.format(arch=arch), h["rms_norm_eps"]),
            u32(Keys.Attention.KEY_LENGTH.format(arch=arch), h["head_dim"]),
            u32(Keys.Attention.VALUE_LENGTH.format(arch=arch), h["head_dim"]),
            u32(Keys.General.FILE_TYPE, file_type)]


def sentencepiece_without_space_prefix(model_dir: Path, h: dict):
    """_set_vocab_sentencepiece, as a KVWriter, with add_space_prefix false appended by the caller."""
    from hfview.tokenizer.vocab import sentencepiece_vocab
    from hfview.tokenizer.writer import KVWriter
    w = KVWriter()
    w.extend(sentencepiece_vocab(model_dir, h))
    return w


def alternating_layers(n: int, period: int) -> list[str]:
    """The layer kinds llama.cpp assumes when no pattern is written: every `period`-th layer is global."""
    return ["full_attention" if (i + 1) % period == 0 else "sliding_attention" for i in range(n)]


def check_swa_and_scale(h: dict, path: Path, arch: str, period: int, layers_27b: int) -> None:
    layer_types = h.get("layer_types") or alternating_layers(h["num_hidden_layers"], period)
    if list(layer_types) != alternating_layers(h["num_hidden_layers"], period):
        raise ConfigError(f"{path}: layer_types {layer_types}: llama.cpp's {arch} makes every {period}th layer "
                          f"global and the others sliding, and the converter writes no pattern")
    want = attention_scale_width(h, layers_27b)
    if h["query_pre_attn_scalar"] != want:
        raise ConfigError(f"{path}: query_pre_attn_scalar {h['query_pre_attn_scalar']}: llama.cpp's {arch} scales "
                          f"attention by 1/sqrt({want}) for this shape; this checkpoint would run wrong")


def check_vocab_rows(h: dict, model_dir: Path) -> None:
    """Without tokenizer.model the converter cuts token_embd to tokenizer.json's token count; the view does
    not present a cut matrix, so it refuses where the cut would remove rows."""
    tok = model_dir / "tokenizer.json"
    if (model_dir / "tokenizer.model").is_file() or not tok.is_file():
        return
    from hfview.tokenizer.special import read_tokenizer_json
    data = read_tokenizer_json(tok)
    n_real = len((data.get("model") or {}).get("vocab", {})) + len(data.get("added_tokens", []))
    if n_real < h["vocab_size"]:
        raise ConfigError(f"{tok}: {n_real} tokens for vocab_size {h['vocab_size']}: the converter keeps only the "
                          f"first {n_real} embedding rows, which hfview does not present yet")


def attention_scale_width(h: dict, layers_27b: int) -> int:
    """The query_pre_attn_scalar llama.cpp's graph implies: hidden/heads for the 27B, else head_dim."""
    if h["num_hidden_layers"] == layers_27b:
        return h["hidden_size"] // h["num_attention_heads"]
    return h["head_dim"]

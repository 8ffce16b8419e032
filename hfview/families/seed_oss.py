"""Seed-OSS (SeedOssForCausalLM) -> llama.cpp `seed_oss` (the converter's SeedOssModel, a plain TextModel).

Qwen2-like: rotate-half rope (Q/K as stored), q/k/v biases, head_dim stated apart from hidden / heads;
llama.cpp names the norm after attention `post_attention_norm`.
"""
from __future__ import annotations

from pathlib import Path

from ..config import ANY, Harmless
from ..errors import ConfigError
from ..family import Family
from ..params import text_model_parameters
from ._parts.checks import check_no_pooling, rope_types, silu_only
from ._parts.decoder import LM_HEAD, decoder_tensors

DEFAULTS = {
    "seed_oss": dict(vocab_size=155136, hidden_size=4096, intermediate_size=27648, num_hidden_layers=64,
                     num_attention_heads=80, num_key_value_heads=8, hidden_act="silu", max_position_embeddings=524288,
                     initializer_range=0.02, rms_norm_eps=1e-06, use_cache=True, pad_token_id=1, bos_token_id=0,
                     eos_token_id=2, pretraining_tp=1, tie_word_embeddings=False,
                     rope_parameters={"rope_theta": 10000.0, "rope_type": "default"}, attention_bias=True,
                     attention_out_bias=False, attention_dropout=0.1, residual_dropout=0.1, mlp_bias=False,
                     head_dim=128),
}

READS = frozenset({
    "vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads",
    "num_key_value_heads", "head_dim", "max_position_embeddings", "rms_norm_eps", "rope_parameters",
    "rope_scaling", "rope_theta", "hidden_act", "tie_word_embeddings", "attention_bias", "attention_out_bias",
    "mlp_bias",
})
# dropout between residual branches: training only
HARMLESS: Harmless = {"residual_dropout": ANY}

ARCHITECTURES = ("SeedOssForCausalLM",)
TENSORS = (*decoder_tensors("model.", ffn_norm="post_attention_norm"), LM_HEAD)


def normalise(h: dict) -> dict:
    if h.get("num_key_value_heads") is None:
        h["num_key_value_heads"] = h["num_attention_heads"]
    return h


REFUSE = (silu_only("seed_oss"), rope_types("seed_oss"))


def check(h: dict, path: Path) -> None:
    check_no_pooling(path)
    if h.get("attention_out_bias") or h.get("mlp_bias"):
        raise ConfigError(f"{path}: attention_out_bias / mlp_bias: llama.cpp's seed_oss has biases on q, k, v only")


def parameters(h: dict, block_count: int, file_type: int) -> list:
    return text_model_parameters(h, "seed_oss", block_count, file_type)


def vocab(model_dir: Path, h: dict) -> list:
    from hfview.tokenizer.vocab import gpt2_vocab
    return gpt2_vocab(model_dir, h)


FAMILY = Family(
    name="seed_oss",
    gguf_arch="seed_oss",
    architectures=ARCHITECTURES,
    defaults=DEFAULTS,
    reads=READS,
    harmless=HARMLESS,
    tensors=TENSORS,
    parameters=parameters,
    vocab=vocab,
    refuse=REFUSE,
    check=check,
    normalise=normalise,
)

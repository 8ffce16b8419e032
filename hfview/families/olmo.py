"""OLMo 1 (OlmoForCausalLM) -> llama.cpp `olmo` (the converter's OlmoModel).

OLMo's LayerNorm has no weights, so the checkpoint holds no norm tensors at all; Q/K rows are regrouped
into rotation pairs as Llama's; TextModel's hyperparameters plus a fixed LayerNorm epsilon of 1e-5 and
clip_qkv as llama.cpp's clamp_kqv.
"""
from __future__ import annotations

from pathlib import Path

from ..config import Harmless
from ..family import Family, Refuse, Skip, Tensor, rope_pairs, unset
from ..names import GGUF, Keys
from ..params import f32, text_model_parameters
from ._parts.checks import silu_only

# transformers 5.24's OlmoConfig defaults
DEFAULTS = {
    "olmo": dict(vocab_size=50304, hidden_size=4096, intermediate_size=11008, num_hidden_layers=32,
                 num_attention_heads=32, num_key_value_heads=None, hidden_act="silu", max_position_embeddings=2048,
                 initializer_range=0.02, use_cache=True, pad_token_id=1, bos_token_id=None, eos_token_id=50279,
                 tie_word_embeddings=False, rope_parameters={"rope_theta": 10000.0, "rope_type": "default"},
                 attention_bias=False, attention_dropout=0.0, clip_qkv=None),
}

READS = frozenset({
    "vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads",
    "num_key_value_heads", "max_position_embeddings", "rope_parameters", "rope_scaling", "rope_theta",
    "hidden_act", "tie_word_embeddings", "attention_bias", "clip_qkv",
})
HARMLESS: Harmless = {}

TENSORS = (
    Tensor("model.embed_tokens.weight", GGUF.TOKEN_EMBD.weight),
    Tensor("lm_head.weight", GGUF.OUTPUT.weight, required=False),  # absent when tied to the embeddings
    Tensor("model.layers.{bid}.self_attn.q_proj.weight", GGUF.ATTN_Q.weight, rope_pairs("num_attention_heads")),
    Tensor("model.layers.{bid}.self_attn.k_proj.weight", GGUF.ATTN_K.weight, rope_pairs("num_key_value_heads")),
    Tensor("model.layers.{bid}.self_attn.v_proj.weight", GGUF.ATTN_V.weight),
    Tensor("model.layers.{bid}.self_attn.o_proj.weight", GGUF.ATTN_OUT.weight),
    Tensor("model.layers.{bid}.mlp.gate_proj.weight", GGUF.FFN_GATE.weight),
    Tensor("model.layers.{bid}.mlp.up_proj.weight", GGUF.FFN_UP.weight),
    Tensor("model.layers.{bid}.mlp.down_proj.weight", GGUF.FFN_DOWN.weight),
    Skip("model.layers.{bid}.self_attn.rotary_emb.inv_freq"),
)


def normalise(h: dict) -> dict:
    if h.get("num_key_value_heads") is None:
        h["num_key_value_heads"] = h["num_attention_heads"]
    return h


REFUSE = (
    silu_only("olmo"),
    Refuse("attention_bias", unset, "the converter regroups OLMo's q/k weights into rotation pairs but not their "
           "biases, so its output would be wrong; no released OLMo has biases"),
    Refuse("rope_parameters.rope_type", ("default", "linear", "yarn"), "not one llama.cpp computes here (default, "
           "linear, yarn)", default="default"),
)


def parameters(h: dict, block_count: int, file_type: int) -> list:
    kv = [*text_model_parameters(h, "olmo", block_count, file_type),
          f32(Keys.Attention.LAYERNORM_EPS.format(arch="olmo"),
              1e-5)]  # OLMo's LayerNorm epsilon is fixed, not configured
    if h.get("clip_qkv") is not None:
        kv.append(f32(Keys.Attention.CLAMP_KQV.format(arch="olmo"), h["clip_qkv"]))
    return kv


def vocab(model_dir: Path, h: dict) -> list:
    from hfview.tokenizer.vocab import gpt2_vocab
    return gpt2_vocab(model_dir, h)


FAMILY = Family(
    name="olmo",
    gguf_arch="olmo",
    architectures=("OlmoForCausalLM",),
    defaults=DEFAULTS,
    reads=READS,
    harmless=HARMLESS,
    tensors=TENSORS,
    parameters=parameters,
    vocab=vocab,
    refuse=REFUSE,
    normalise=normalise,
)

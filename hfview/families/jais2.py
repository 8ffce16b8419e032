"""Jais 2 (Jais2ForCausalLM) -> llama.cpp `jais2` (the converter's Jais2Model).

LayerNorm with bias, biases on q/k/v/o and on the MLP, a squared-ReLU up/down MLP without gate; the rope spans
the whole head (rope.dimension_count = head_dim). Q/K as stored (llama.cpp's jais2 rotates halves).
"""
from __future__ import annotations

from pathlib import Path

from ..config import Harmless
from ..family import Family, Refuse, Skip, Tensor
from ..names import GGUF, Keys
from ..params import text_model_parameters, u32

# transformers 5.24's Jais2Config defaults, as data.
DEFAULTS = {
    "jais2": dict(vocab_size=150272, hidden_size=3328, intermediate_size=26624, num_hidden_layers=32,
                  num_attention_heads=26, num_key_value_heads=26, hidden_act="relu2", max_position_embeddings=8192,
                  initializer_range=0.02, use_cache=True, pad_token_id=None, bos_token_id=0, eos_token_id=150024,
                  tie_word_embeddings=False, rope_parameters={"rope_theta": 10000.0, "rope_type": "default"},
                  attention_bias=True, attention_dropout=0.0, mlp_bias=True, head_dim=128, layer_norm_eps=1e-05),
}

READS = frozenset({
    "vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads",
    "num_key_value_heads", "head_dim", "max_position_embeddings", "layer_norm_eps", "rope_parameters",
    "rope_scaling", "rope_theta", "hidden_act", "tie_word_embeddings", "attention_bias", "mlp_bias",
})
HARMLESS: Harmless = {}

TENSORS = (
    Tensor("model.embed_tokens.weight", GGUF.TOKEN_EMBD.weight),
    Tensor("model.norm.{wb}", GGUF.OUTPUT_NORM.wb),
    Tensor("lm_head.weight", GGUF.OUTPUT.weight, required=False),  # absent when tied to the embeddings
    Tensor("model.layers.{bid}.input_layernorm.{wb}", GGUF.ATTN_NORM.wb),
    Tensor("model.layers.{bid}.self_attn.q_proj.{wb}", GGUF.ATTN_Q.wb),
    Tensor("model.layers.{bid}.self_attn.k_proj.{wb}", GGUF.ATTN_K.wb),
    Tensor("model.layers.{bid}.self_attn.v_proj.{wb}", GGUF.ATTN_V.wb),
    Tensor("model.layers.{bid}.self_attn.o_proj.{wb}", GGUF.ATTN_OUT.wb),
    Tensor("model.layers.{bid}.post_attention_layernorm.{wb}", GGUF.FFN_NORM.wb),
    Tensor("model.layers.{bid}.mlp.up_proj.{wb}", GGUF.FFN_UP.wb),
    Tensor("model.layers.{bid}.mlp.down_proj.{wb}", GGUF.FFN_DOWN.wb),
    Skip("model.layers.{bid}.self_attn.rotary_emb.inv_freq"),
)


REFUSE = (
    Refuse("hidden_act", ("relu2",), "llama.cpp's jais2 computes squared ReLU (relu2) only; this checkpoint would "
           "run wrong"),
    Refuse("rope_parameters.rope_type", ("default", "linear", "yarn"), "not one llama.cpp's jais2 architecture "
           "computes", default="default"),
)


def parameters(h: dict, block_count: int, file_type: int) -> list:
    head_dim = h.get("head_dim") or h["hidden_size"] // h["num_attention_heads"]
    return [*text_model_parameters(h, "jais2", block_count, file_type),
            u32(Keys.Rope.DIMENSION_COUNT.format(arch="jais2"), head_dim)]


def vocab(model_dir: Path, h: dict) -> list:
    from hfview.tokenizer.vocab import gpt2_vocab
    return gpt2_vocab(model_dir, h)


FAMILY = Family(
    name="jais2",
    gguf_arch="jais2",
    architectures=("Jais2ForCausalLM",),
    defaults=DEFAULTS,
    reads=READS,
    harmless=HARMLESS,
    tensors=TENSORS,
    parameters=parameters,
    vocab=vocab,
    refuse=REFUSE,
)

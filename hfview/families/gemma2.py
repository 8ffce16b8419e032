"""Gemma 2 -> llama.cpp `gemma2` (the converter's Gemma2Model).

As Gemma (norms stored as 1 + w, lm_head dropped, embedding scale left to llama.cpp, Gemma's own
hyperparameter list), plus pre/post norms around attention and feed-forward, the two logit soft-caps and
the sliding window. llama.cpp fixes what the converter does not write: sliding layers alternate
(even layers slide) and the attention scale is 1/sqrt(head_dim) (1/sqrt(hidden/heads) at 46 layers, the
27B); configs that state otherwise are refused rather than run wrong.
"""
from __future__ import annotations

from pathlib import Path

from ..config import ANY, Harmless
from ..family import Family, Refuse, RunnerFacts, Skip, Tensor, stated
from ..names import GGUF, Keys
from ..params import f32, u32
from ._parts.gemma_common import (NORM, check_gemma_common, check_swa_and_scale, gemma_parameters,
                                  sentencepiece_without_space_prefix)

# transformers 5.24's Gemma2Config defaults, as data (tests/test_family_gemma2.py compares them).
DEFAULTS = {
    "gemma2": dict(vocab_size=256000, hidden_size=2304, intermediate_size=9216, num_hidden_layers=26,
                   num_attention_heads=8, num_key_value_heads=4, head_dim=256, hidden_activation="gelu_pytorch_tanh",
                   max_position_embeddings=8192, initializer_range=0.02, rms_norm_eps=1e-06, use_cache=True,
                   pad_token_id=0, eos_token_id=1, bos_token_id=2, tie_word_embeddings=True,
                   rope_parameters={"rope_theta": 10000.0, "rope_type": "default"}, attention_bias=False,
                   attention_dropout=0.0, query_pre_attn_scalar=256, sliding_window=4096,
                   final_logit_softcapping=30.0, attn_logit_softcapping=50.0, use_bidirectional_attention=None),
}

READS = frozenset({
    "vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads",
    "num_key_value_heads", "head_dim", "max_position_embeddings", "rms_norm_eps", "hidden_activation",
    "tie_word_embeddings", "attention_bias", "rope_parameters", "rope_scaling", "rope_theta",
    "use_bidirectional_attention", "query_pre_attn_scalar", "sliding_window", "layer_types",
    "attn_logit_softcapping", "final_logit_softcapping",
})
# hidden_act: released configs carry it beside hidden_activation, which is the one transformers 5 uses.
# cache_implementation: how generate() allocates its cache.
HARMLESS: Harmless = {"hidden_act": ANY, "cache_implementation": ANY}

TENSORS = (
    Tensor("model.embed_tokens.weight", GGUF.TOKEN_EMBD.weight),
    Tensor("model.norm.weight", GGUF.OUTPUT_NORM.weight, steps=NORM),
    Skip("lm_head.weight"),  # the converter drops it: the output is the (tied) embedding matrix
    Tensor("model.layers.{bid}.input_layernorm.weight", GGUF.ATTN_NORM.weight, steps=NORM),
    Tensor("model.layers.{bid}.self_attn.q_proj.weight", GGUF.ATTN_Q.weight),
    Tensor("model.layers.{bid}.self_attn.k_proj.weight", GGUF.ATTN_K.weight),
    Tensor("model.layers.{bid}.self_attn.v_proj.weight", GGUF.ATTN_V.weight),
    Tensor("model.layers.{bid}.self_attn.o_proj.weight", GGUF.ATTN_OUT.weight),
    Tensor("model.layers.{bid}.post_attention_layernorm.weight", GGUF.ATTN_POST_NORM.weight, steps=NORM),
    Tensor("model.layers.{bid}.pre_feedforward_layernorm.weight", GGUF.FFN_NORM.weight, steps=NORM),
    Tensor("model.layers.{bid}.post_feedforward_layernorm.weight", GGUF.FFN_POST_NORM.weight, steps=NORM),
    Tensor("model.layers.{bid}.mlp.gate_proj.weight", GGUF.FFN_GATE.weight),
    Tensor("model.layers.{bid}.mlp.up_proj.weight", GGUF.FFN_UP.weight),
    Tensor("model.layers.{bid}.mlp.down_proj.weight", GGUF.FFN_DOWN.weight),
)


REFUSE = (
    *(Refuse(key, bool, "the converter needs a number here (llama.cpp's gemma2 always soft-caps)")
      for key in ("attn_logit_softcapping", "final_logit_softcapping")),
    Refuse("sliding_window", stated, "the converter needs the window size"),
)


def check(h: dict, path: Path) -> None:
    check_gemma_common(h, path, "gemma2", "hidden_activation")
    check_swa_and_scale(h, path, "gemma2", 2, 46)


def parameters(h: dict, block_count: int, file_type: int) -> list:
    return [*gemma_parameters("gemma2", h, block_count, file_type),
            f32(Keys.LLM.ATTN_LOGIT_SOFTCAPPING.format(arch="gemma2"), h["attn_logit_softcapping"]),
            f32(Keys.LLM.FINAL_LOGIT_SOFTCAPPING.format(arch="gemma2"), h["final_logit_softcapping"]),
            u32(Keys.Attention.SLIDING_WINDOW.format(arch="gemma2"), h["sliding_window"])]


def vocab(model_dir: Path, h: dict) -> list:
    from hfview.tokenizer.vocab import ADD_SPACE_PREFIX
    w = sentencepiece_without_space_prefix(model_dir, h)
    w.add_bool(ADD_SPACE_PREFIX, False)
    return w.kvs()


FAMILY = Family(
    name="gemma2",
    gguf_arch="gemma2",
    architectures=("Gemma2ForCausalLM",),
    defaults=DEFAULTS,
    reads=READS,
    harmless=HARMLESS,
    tensors=TENSORS,
    parameters=parameters,
    vocab=vocab,
    refuse=REFUSE,
    check=check,
    notes={"embedding scale": "sqrt(hidden_size) is applied by llama.cpp's gemma2 graph; nothing is written"},
    runner=RunnerFacts(llama_cpp_applies_window=True),  # llama.cpp's gemma2 slides on even layers, as the model does
)

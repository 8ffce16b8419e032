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
from ..family import Family, Skip, Tensor
from ..names import GGUF
from ._parts.gemma_common import NORM, check_gemma_common, gemma_parameters, sentencepiece_without_space_prefix

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


TENSORS = (
    Tensor("model.embed_tokens.weight", GGUF.TOKEN_EMBD.weight),
    Tensor("model.norm.weight", GGUF.OUTPUT_NORM.weight, steps=NORM),
    Skip("lm_head.weight"),  # the converter drops it: the output is the (tied) embedding matrix
    Tensor("model.layers.{bid}.input_layernorm.weight", GGUF.ATTN_NORM.weight, steps=NORM),
    Tensor("model.layers.{bid}.self_attn.q_proj.weight", GGUF.ATTN_Q.weight),
    Tensor("model.layers.{bid}.self_attn.k_proj.weight", GGUF.ATTN_K.weight),
    Tensor("model.layers.{bid}.self_attn.v_proj.weight", GGUF.ATTN_V.weight),
    Tensor("model.layers.{bid}.self_attn.o_proj.weight", GGUF.ATTN_OUT.weight),
    Tensor("model.layers.{bid}.post_attention_layernorm.weight", GGUF.FFN_NORM.weight, steps=NORM),
    Tensor("model.layers.{bid}.mlp.gate_proj.weight", GGUF.FFN_GATE.weight),
    Tensor("model.layers.{bid}.mlp.up_proj.weight", GGUF.FFN_UP.weight),
    Tensor("model.layers.{bid}.mlp.down_proj.weight", GGUF.FFN_DOWN.weight),
)



def check(h: dict, path: Path) -> None:
    check_gemma_common(h, path, "gemma", "hidden_act")


def parameters(h: dict, block_count: int, file_type: int) -> list:
    return gemma_parameters("gemma", h, block_count, file_type)


# CodeGemma's fill-in-the-middle and end-of-turn ids, which the converter sets on every Gemma; the FIM
# types have no GGUF key under these names, so only eot reaches the file (as in the converter's output).
_CODEGEMMA_IDS = {"prefix": 67, "suffix": 69, "middle": 68, "fsep": 70, "eot": 107}


def vocab(model_dir: Path, h: dict) -> list:
    from hfview.tokenizer.special import SpecialVocab
    from hfview.tokenizer.vocab import ADD_SPACE_PREFIX
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

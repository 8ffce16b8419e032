"""TeleChat2 / TeleChat2.5 (TelechatForCausalLM, TeleChat2ForCausalLM; model_type telechat; remote code) ->
llama.cpp `llama`, under hfview's own mapping: the pinned converter has no class for it, so there is no
converter file to be byte-identical to.

The release's modeling code (Tele-AI/TeleChat2, model/115B/modeling_telechat.py and
llama_factory_training/modeling_telechat2.py) computes Llama's block under its own names: RMSNorm before attention
and MLP and at the end (layer_norm_epsilon), a query projection and a fused `key_value` projection without biases,
rotate-half rotary over the whole head, grouped KV heads shared by consecutive query heads, scores scaled by
1/sqrt(head width), an output projection `dense` WITH a bias, a SiLU-gated MLP whose down_proj has a bias (gate
and up none), an untied lm_head. llama.cpp's llama graph takes exactly that, the two biases as its optional
attn_output.bias and ffn_down.bias.

key_value is stored per KV head: each head's k rows, then its v rows (the code views its output as
[n_kv, 2 * head width] and splits the last axis): attn_k and attn_v are row selections of it, k (like q) regrouped
into rotation pairs. Rotary: base 10000 in the code, raised by its NTK factor alpha = 2^ceil(log2(L / base_seqlen)
+ 1) - 1 (at least 1) at L = max(length, training_seqlen), base * alpha^(d / (d - 2)); up to training_seqlen that
is one constant base (and mscale 1), which is what the view writes, with training_seqlen as the context length
(past it the code's base and cos/sin scale change with the length, which llama.cpp cannot follow).

Config: read as written, under the release's own names (n_layer, n_head, ffn_hidden_size, layer_norm_epsilon), the
release's Telechat2Config defaults filling the rest. Vocabulary: the SentencePiece tokenizer.model the release ships.
"""
from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from ..config import ANY, Harmless
from ..errors import ConfigError
from ..family import Family, Refuse, Skip, Split, Tensor, rope_pairs, stated, unset
from ..names import GGUF, Keys
from ..params import f32, u32
from ..shards import StoredTensor
from ..views import RowSelection, rotation_pairs

# The release's Telechat2Config (configuration_telechat.py) defaults, as data; tie_word_embeddings is
# PretrainedConfig's. base_seqlen has none: the code reads it from config.json (TeleChat 1 fixed it in its code).
DEFAULTS = {"telechat": dict(
    vocab_size=160256, hidden_size=4096, n_layer=30, n_head=32, layer_norm_epsilon=1e-5, ffn_hidden_size=12288,
    training_seqlen=8192, num_key_value_heads=None, apply_residual_connection_post_layernorm=False,
    embed_layernorm=False, logn=True, tie_word_embeddings=True, bos_token_id=1, eos_token_id=2,
    initializer_range=0.02, use_cache=True, hidden_dropout=0.0, attention_dropout=0.0,
)}

READS = frozenset({
    "vocab_size", "hidden_size", "n_layer", "n_head", "num_key_value_heads", "ffn_hidden_size",
    "layer_norm_epsilon", "training_seqlen", "base_seqlen", "tie_word_embeddings", "embed_layernorm",
})
HARMLESS: Harmless = {
    # the computation llama.cpp's llama graph is: the residual taken before each norm
    "apply_residual_connection_post_layernorm": (False,),
    # no TeleChat2 modeling code reads these: logN scaling is commented out; the rest are Megatron / BLOOM
    # training switches and fusions (bias-add placement, fused softmax, fp32 softmax), BLOOM's unused n_inner and
    # alibi offset, and the stated sequence length (the code reads training_seqlen)
    "logn": ANY, "bias_dropout_fusion": ANY, "masked_softmax_fusion": ANY, "attention_softmax_in_fp32": ANY,
    "skip_bias_add": ANY, "skip_bias_add_qkv": ANY, "slow_but_exact": ANY, "n_inner": ANY, "offset_alibi": ANY,
    "seq_length": ANY, "unk_token_id": ANY,
    "flash_attn": ANY,  # which attention kernel the code uses (flash-attn or its own matmul-softmax)
    "semi_causal": (False,),  # TeleChat 1's switch, read by none of its modeling code; only off is known harmless
}


def head_dim(h: dict) -> int:
    return h["hidden_size"] // h["n_head"]


def rope_base(h: dict) -> float:
    """The code's rotary base at any length up to training_seqlen: 10000 * alpha^(d / (d - 2))."""
    d = head_dim(h)
    alpha = max(2 ** math.ceil(math.log(h["training_seqlen"] / h["base_seqlen"], 2) + 1) - 1, 1)
    return 10000 * alpha ** (d / (d - 2))


def key_value_rows(h: dict, part: str) -> np.ndarray:
    """Rows of key_value making attn_k (in rotation pairs) or attn_v: each KV head's k rows, then its v rows."""
    n_kv, d = h["num_key_value_heads"], head_dim(h)
    slots = np.arange(n_kv * 2 * d).reshape(n_kv, 2, d)
    if part == "k":
        rows = slots[:, 0].reshape(-1)
        return rows[rotation_pairs(len(rows), n_kv)]
    return slots[:, 1].reshape(-1)


def _key_value_part(part: str):
    def make(sources: list[StoredTensor], h: dict) -> RowSelection:
        src = sources[0]
        expected = 2 * h["num_key_value_heads"] * head_dim(h)
        if src.shape[0] != expected:
            raise ConfigError(f"tensor {src.name!r} has {src.shape[0]} rows; {h['num_key_value_heads']} KV heads "
                              f"of width hidden_size/n_head = {head_dim(h)}, each a k and a v, make {expected}")
        label = f"key_value {part} rows of {h['num_key_value_heads']} KV heads" + (", rotation pairs" if part == "k" else "")
        return RowSelection(src, key_value_rows(h, part), label)
    return make


_tied = lambda h: h["tie_word_embeddings"]  # noqa: E731

TENSORS = (
    Tensor("transformer.word_embeddings.weight", GGUF.TOKEN_EMBD.weight),
    Tensor("transformer.ln_f.weight", GGUF.OUTPUT_NORM.weight),
    Skip("lm_head.weight", when=_tied),  # tied: the code's lm_head is the embedding
    Tensor("lm_head.weight", GGUF.OUTPUT.weight, required=lambda h: not h["tie_word_embeddings"]),
    Tensor("transformer.h.{bid}.input_layernorm.weight", GGUF.ATTN_NORM.weight),
    Tensor("transformer.h.{bid}.self_attention.query.weight", GGUF.ATTN_Q.weight, rope_pairs("n_head")),
    Split("transformer.h.{bid}.self_attention.key_value.weight",
          ((GGUF.ATTN_K.weight, _key_value_part("k")), (GGUF.ATTN_V.weight, _key_value_part("v")))),
    Tensor("transformer.h.{bid}.self_attention.dense.weight", GGUF.ATTN_OUT.weight),
    Tensor("transformer.h.{bid}.self_attention.dense.bias", GGUF.ATTN_OUT.bias),
    Tensor("transformer.h.{bid}.post_attention_layernorm.weight", GGUF.FFN_NORM.weight),
    Tensor("transformer.h.{bid}.mlp.gate_proj.weight", GGUF.FFN_GATE.weight),
    Tensor("transformer.h.{bid}.mlp.up_proj.weight", GGUF.FFN_UP.weight),
    Tensor("transformer.h.{bid}.mlp.down_proj.weight", GGUF.FFN_DOWN.weight),
    Tensor("transformer.h.{bid}.mlp.down_proj.bias", GGUF.FFN_DOWN.bias),
)


def normalise(h: dict) -> dict:
    """What the code computes from the config: no num_key_value_heads means one KV head per query head."""
    if h.get("num_key_value_heads") is None:
        h["num_key_value_heads"] = h["n_head"]
    return h


REFUSE = (
    # Measured (tests/test_family_telechat.py): the pinned converter has no class for it ("Model
    # TelechatForCausalLM is not supported"), so there is no reading of its to share; no context cap helps, since the
    # code's NTK length is never below training_seqlen; and a guessed value runs another function (8192 in place of
    # TeleChat-7B's 4096: NMSE 5.9e-4 against the release's function on a tiny fixture, 128 tokens)
    Refuse("base_seqlen", stated, "TeleChat's rotary base depends on it at every length (the NTK factor from "
           "training_seqlen / base_seqlen), and TeleChat 1's modeling code fixes it in the code (4096 for 7B, 8192 for "
           "12B) rather than in config.json, where base_seqlen is missing; no context length avoids it, and a guessed "
           "value runs another model; add base_seqlen as the release's modeling code states it"),
    Refuse("embed_layernorm", unset, "the code normalises the embeddings before the first block "
           "(word_embeddings_layernorm), which llama.cpp's llama architecture does not compute"),
)


def check(h: dict, path: Path) -> None:
    n_head, n_kv = h["n_head"], h["num_key_value_heads"]
    if h["hidden_size"] % n_head or n_head % n_kv:
        raise ConfigError(f"{path}: hidden_size {h['hidden_size']}, n_head {n_head} and num_key_value_heads {n_kv} "
                          f"do not split into whole heads and KV groups")
    if head_dim(h) % 2 or head_dim(h) <= 2:
        raise ConfigError(f"{path}: head width {head_dim(h)}: rotation pairs and the code's NTK exponent "
                          f"d / (d - 2) need an even width above 2")


def parameters(h: dict, block_count: int, file_type: int) -> list:
    return [
        u32(Keys.LLM.BLOCK_COUNT.format(arch="llama"), block_count),
        u32(Keys.LLM.CONTEXT_LENGTH.format(arch="llama"), h["training_seqlen"]),
        u32(Keys.LLM.EMBEDDING_LENGTH.format(arch="llama"), h["hidden_size"]),
        u32(Keys.LLM.FEED_FORWARD_LENGTH.format(arch="llama"), h["ffn_hidden_size"]),
        u32(Keys.Attention.HEAD_COUNT.format(arch="llama"), h["n_head"]),
        u32(Keys.Attention.HEAD_COUNT_KV.format(arch="llama"), h["num_key_value_heads"]),
        f32(Keys.Rope.FREQ_BASE.format(arch="llama"), rope_base(h)),
        f32(Keys.Attention.LAYERNORM_RMS_EPS.format(arch="llama"), h["layer_norm_epsilon"]),
        u32(Keys.General.FILE_TYPE, file_type),
        u32(Keys.LLM.VOCAB_SIZE.format(arch="llama"), h["vocab_size"]),
        u32(Keys.Rope.DIMENSION_COUNT.format(arch="llama"), head_dim(h)),
    ]


def vocab(model_dir: Path, h: dict) -> list:
    from hfview.tokenizer.errors import TokenizerError
    from hfview.tokenizer.vocab import sentencepiece_vocab
    if not (model_dir / "tokenizer.model").is_file():
        raise TokenizerError(f"{model_dir / 'tokenizer.model'} is missing: TeleChat's vocabulary is its SentencePiece "
                             f"model; copy it from the released checkpoint")
    return sentencepiece_vocab(model_dir, h)


FAMILY = Family(
    name="telechat",
    gguf_arch="llama",
    architectures=("TelechatForCausalLM", "TeleChat2ForCausalLM", "Telechat2ForCausalLM"),
    defaults=DEFAULTS,
    reads=READS,
    harmless=HARMLESS,
    tensors=TENSORS,
    parameters=parameters,
    vocab=vocab,
    refuse=REFUSE,
    check=check,
    normalise=normalise,
    no_converter="the pinned converter has no class for TeleChat2ForCausalLM / TelechatForCausalLM; hfview's own "
                 "mapping presents it as llama.cpp's llama (Llama's block under TeleChat's names, two biases)",
    notes={"training_seqlen": "the context length: up to it the code's NTK-scaled rotary base is one constant"},
)

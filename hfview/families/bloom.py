"""BLOOM (BloomForCausalLM) -> llama.cpp `bloom` (the converter's BloomModel).

ALiBi positions (llama.cpp computes the slopes; nothing is written), a LayerNorm over the embeddings, the
fused query_key_value stored head by head and regrouped as q, k, v, biases everywhere, GELU, tied output.
The converter writes its own short list, with a context length of seq_length or, failing that, the hidden
width (BLOOM's configs state none).
"""
from __future__ import annotations

from pathlib import Path

from ..config import ANY, Harmless
from ..family import Family, Refuse, Tensor, qkv_by_part, unset
from ..names import GGUF, Keys
from ..params import f32, u32

# transformers 5.24's BloomConfig defaults
DEFAULTS = {
    "bloom": dict(vocab_size=250880, hidden_size=64, n_layer=2, n_head=8, layer_norm_epsilon=1e-05,
                  initializer_range=0.02, use_cache=True, bos_token_id=1, eos_token_id=2, pad_token_id=None,
                  apply_residual_connection_post_layernorm=False, hidden_dropout=0.0, attention_dropout=0.0,
                  pretraining_tp=1, slow_but_exact=False, tie_word_embeddings=True),
}

READS = frozenset({
    "vocab_size", "hidden_size", "n_embed", "n_layer", "n_head", "layer_norm_epsilon", "seq_length",
    "num_attention_heads", "num_hidden_layers",
    "apply_residual_connection_post_layernorm", "tie_word_embeddings",
})
# Keys released BLOOM configs carry that transformers' BloomModel never reads (Megatron-DeepSpeed training
# switches: fusions, bias-add placement, offset_alibi, the unused n_inner, unk_token_id), and one it reads
# that leaves the function unchanged: slow_but_exact only splits the same products differently (as
# pretraining_tp does, harmless for every family: hfview.config).
HARMLESS: Harmless = {"slow_but_exact": ANY, "masked_softmax_fusion": ANY, "bias_dropout_fusion": ANY,
    "attention_softmax_in_fp32": ANY, "offset_alibi": ANY, "skip_bias_add": ANY, "skip_bias_add_qkv": ANY,
    "n_inner": ANY, "unk_token_id": ANY, "hidden_dropout": ANY, "attention_dropout": ANY}

TENSORS = (
    Tensor("word_embeddings.weight", GGUF.TOKEN_EMBD.weight),
    Tensor("word_embeddings_layernorm.{wb}", GGUF.TOKEN_EMBD_NORM.wb),
    Tensor("ln_f.{wb}", GGUF.OUTPUT_NORM.wb),
    Tensor("lm_head.weight", GGUF.OUTPUT.weight, required=False),  # absent when tied (as released)
    Tensor("h.{bid}.input_layernorm.{wb}", GGUF.ATTN_NORM.wb),
    Tensor("h.{bid}.self_attention.query_key_value.{wb}", GGUF.ATTN_QKV.wb, qkv_by_part("n_head")),
    Tensor("h.{bid}.self_attention.dense.{wb}", GGUF.ATTN_OUT.wb),
    Tensor("h.{bid}.post_attention_layernorm.{wb}", GGUF.FFN_NORM.wb),
    Tensor("h.{bid}.mlp.dense_h_to_4h.{wb}", GGUF.FFN_UP.wb),
    Tensor("h.{bid}.mlp.dense_4h_to_h.{wb}", GGUF.FFN_DOWN.wb),
)


REFUSE = (
    Refuse("apply_residual_connection_post_layernorm", unset,
           "llama.cpp's bloom adds the residual before the norm only; this checkpoint would run wrong"),
)


def parameters(h: dict, block_count: int, file_type: int) -> list:
    n_embd, n_head = h["hidden_size"], h["n_head"]
    return [u32(Keys.LLM.CONTEXT_LENGTH.format(arch="bloom"), h.get("seq_length", n_embd)),
            u32(Keys.LLM.EMBEDDING_LENGTH.format(arch="bloom"), n_embd),
            u32(Keys.LLM.FEED_FORWARD_LENGTH.format(arch="bloom"), 4 * n_embd),
            u32(Keys.LLM.BLOCK_COUNT.format(arch="bloom"), block_count),
            u32(Keys.Attention.HEAD_COUNT.format(arch="bloom"), n_head),
            u32(Keys.Attention.HEAD_COUNT_KV.format(arch="bloom"), n_head),
            f32(Keys.Attention.LAYERNORM_EPS.format(arch="bloom"), h["layer_norm_epsilon"]),
            u32(Keys.General.FILE_TYPE, file_type)]


def vocab(model_dir: Path, h: dict) -> list:
    from hfview.tokenizer.vocab import gpt2_vocab
    return gpt2_vocab(model_dir, h)


FAMILY = Family(
    name="bloom",
    gguf_arch="bloom",
    architectures=("BloomForCausalLM",),
    defaults=DEFAULTS,
    reads=READS,
    harmless=HARMLESS,
    tensors=TENSORS,
    parameters=parameters,
    vocab=vocab,
    refuse=REFUSE,
    optional_prefix="transformer.",
    # BloomConfig's constructor alias and attribute map (bloom-560m's release states n_head and
    # num_attention_heads both; bloom's, n_embed for hidden_size)
    aliases={"n_embed": "hidden_size", "num_attention_heads": "n_head", "num_hidden_layers": "n_layer"},
)

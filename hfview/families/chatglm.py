"""ChatGLM2/3 and GLM-4-9B in their own layout (ChatGLMModel / ChatGLMForConditionalGeneration, model_type chatglm,
remote code) -> llama.cpp `chatglm` (the converter's ChatGLMModel, the class that also reads GlmForCausalLM).

The block is GLM's (hfview/families/glm.py) under ChatGLM's own names: one fused `query_key_value` (all q rows,
then k, then v, with biases), kept fused as the converter keeps it (llama.cpp's attn_qkv); `dense_h_to_4h` holds
gate then up, kept fused; rotary on the first half of each head in interleaved pairs (ggml's own layout), base
10000 x `rope_ratio`. transformers has no ChatGLM config class, so the converter reads config.json as written
(no defaults). The switches ChatGLM's modeling code reads are harmless only in the position every release has
them in (RMSNorm, a final norm, no biases beside q/k/v, grouped KV heads); otherwise refused by name.

Vocabulary, as the converter chooses it by `_name_or_path`: where it names THUDM/chatglm3-6b (and its -base, -32k,
-128k siblings), ChatGLM3's SentencePiece tokenizer.model as the release's tokenizer code numbers it
(set_vocab_chatglm3, padded_vocab_size ids); otherwise GLM-4's BPE from tokenizer.json (a directory with only a
tiktoken `tokenizer.model` and remote tokenizer code is refused by name). On that second path released configs
state padded_vocab_size and no vocab_size, on which the converter fails (KeyError: 'vocab_size', measured in
tests/test_converter_refusals.py): refused with its words here, unless vocab_size is stated.
"""
from __future__ import annotations

from pathlib import Path

from ..config import ANY, Harmless
from ..errors import ConfigError
from ..family import Family, Refuse, Skip, Tensor, stated, unset
from ..names import GGUF, Keys
from ..params import boolean, f32, u32
from ._parts.glm_common import glm_special_vocab

DEFAULTS = {"chatglm": {}}  # no transformers config class: config.json is read as written

READS = frozenset({
    "padded_vocab_size", "vocab_size", "hidden_size", "ffn_hidden_size", "num_layers", "num_hidden_layers",
    "num_attention_heads", "multi_query_group_num", "kv_channels", "seq_length", "layernorm_epsilon", "rope_ratio",
    "tie_word_embeddings",
})
HARMLESS: Harmless = {
    # the modeling code's numerics switches: query-key layer scaling divides q by the layer number and the fp32
    # softmax multiplies it back (a no-op in exact arithmetic, as llama.cpp computes); fusion is a kernel choice
    "apply_query_key_layer_scaling": ANY, "attention_softmax_in_fp32": ANY, "bias_dropout_fusion": ANY,
    "attn_implementation": ANY, "classifier_dropout": ANY,
    # the layout every ChatGLM2/3 and GLM-4-9B release has; any other is a computation llama.cpp's chatglm lacks
    "rmsnorm": (True,), "post_layer_norm": (True,), "add_bias_linear": (False,), "add_qkv_bias": (True,),
    "apply_residual_connection_post_layernorm": (False,), "fp32_residual_connection": (False,),
    "multi_query_attention": (True,), "original_rope": (True,),
    # P-tuning prefixes and the remote code's own int4/int8 quantization, both off
    "pre_seq_len": (None,), "prefix_projection": (False,), "quantization_bit": (0,),
}

_QKV = "encoder.layers.{bid}.self_attention.query_key_value.{wb}"
TENSORS = (
    Tensor("embedding.word_embeddings.weight", GGUF.TOKEN_EMBD.weight),
    Tensor("encoder.final_layernorm.weight", GGUF.OUTPUT_NORM.weight),
    Tensor("output_layer.weight", GGUF.OUTPUT.weight, required=False),
    Tensor("encoder.layers.{bid}.input_layernorm.weight", GGUF.ATTN_NORM.weight),
    Tensor(_QKV, GGUF.ATTN_QKV.wb),
    Tensor("encoder.layers.{bid}.self_attention.dense.weight", GGUF.ATTN_OUT.weight),
    Tensor("encoder.layers.{bid}.post_attention_layernorm.weight", GGUF.FFN_NORM.weight),
    Tensor("encoder.layers.{bid}.mlp.dense_h_to_4h.weight", GGUF.FFN_UP.weight),
    Tensor("encoder.layers.{bid}.mlp.dense_4h_to_h.weight", GGUF.FFN_DOWN.weight),
    Skip("rotary_pos_emb.inv_freq"),
)

_ROPE_BASE = 10000.0
_CHATGLM3 = "THUDM/chatglm3-6b"


def _is_chatglm3(h: dict) -> bool:
    """The converter's test for ChatGLM3's SentencePiece vocabulary: a substring of _name_or_path."""
    return _CHATGLM3 in str(h.get("_name_or_path", ""))


def _kv_heads(h: dict) -> int:
    return h.get("multi_query_group_num", h.get("num_key_value_heads", h["num_attention_heads"]))


# a stated null refused too: the checks and KV below compute with these values
REFUSE = (
    *(Refuse(key, stated, "missing; ChatGLM's config.json states it (no defaults apply)")
      for key in ("hidden_size", "num_attention_heads", "multi_query_group_num")),
    Refuse("tie_word_embeddings", unset, "every ChatGLM release stores its own output_layer"),
)


def check(h: dict, path: Path) -> None:
    if "vocab_size" not in h and not _is_chatglm3(h):
        # measured in tests/test_converter_refusals.py: the converter looks vocab_size up as the default of its
        # padded_vocab_size lookup, so it stops before writing anything
        raise ConfigError(f"{path}: vocab_size is missing (ChatGLM releases state only padded_vocab_size): the "
                          f"converter fails on it with KeyError: 'vocab_size' (it writes GLM-4's vocabulary from "
                          f"hparams.get(\"padded_vocab_size\", hparams[\"vocab_size\"])). State vocab_size = "
                          f"padded_vocab_size")
    n_embd, n_head = h["hidden_size"], h["num_attention_heads"]
    if n_embd % n_head:
        raise ConfigError(f"{path}: hidden_size {n_embd} does not split into {n_head} heads")
    head = n_embd // n_head
    if h.get("kv_channels", head) != head:
        raise ConfigError(f"{path}: kv_channels {h['kv_channels']} != hidden_size / num_attention_heads = {head}: "
                          f"llama.cpp's chatglm sizes heads from the latter, so this checkpoint would run wrong")
    if n_head % _kv_heads(h):
        raise ConfigError(f"{path}: {n_head} heads do not split into multi_query_group_num = {_kv_heads(h)} groups")
    if head % 4:
        raise ConfigError(f"{path}: head width {head}: ChatGLM rotates half of each head in pairs, which needs a "
                          f"multiple of 4")
    layers = [h[k] for k in ("num_hidden_layers", "num_layers") if k in h]
    if len(set(layers)) > 1:
        raise ConfigError(f"{path}: num_hidden_layers {h['num_hidden_layers']} != num_layers {h['num_layers']}: "
                          f"the converter counts the first, ChatGLM's modeling code the second")


def parameters(h: dict, block_count: int, file_type: int) -> list:
    n_embd = h["hidden_size"]
    n_head = h["num_attention_heads"]
    return [
        u32(Keys.LLM.CONTEXT_LENGTH.format(arch="chatglm"), h.get("seq_length", n_embd)),
        u32(Keys.LLM.EMBEDDING_LENGTH.format(arch="chatglm"), n_embd),
        u32(Keys.LLM.FEED_FORWARD_LENGTH.format(arch="chatglm"),
            h.get("ffn_hidden_size", h.get("intermediate_size", 4 * n_embd))),
        u32(Keys.LLM.BLOCK_COUNT.format(arch="chatglm"), block_count),
        u32(Keys.Attention.HEAD_COUNT.format(arch="chatglm"), n_head),
        u32(Keys.Attention.HEAD_COUNT_KV.format(arch="chatglm"), _kv_heads(h)),
        f32(Keys.Attention.LAYERNORM_RMS_EPS.format(arch="chatglm"), h.get("layernorm_epsilon", 1e-5)),
        u32(Keys.General.FILE_TYPE, file_type),
        # ChatGLM rotates half of each head: the converter's default partial_rotary_factor, 0.5
        u32(Keys.Rope.DIMENSION_COUNT.format(arch="chatglm"), int((h.get("attention_dim") or n_embd // n_head) * 0.5)),
        boolean(Keys.Tokenizer.ADD_BOS, False),
        f32(Keys.Rope.FREQ_BASE.format(arch="chatglm"), _ROPE_BASE * h.get("rope_ratio", 1)),
    ]


def vocab(model_dir: Path, h: dict) -> list:
    from hfview.tokenizer.errors import TokenizerError
    from hfview.tokenizer.vocab import chatglm3_vocab
    if _is_chatglm3(h):
        return chatglm3_vocab(model_dir, h)
    if not (Path(model_dir) / "tokenizer.json").is_file():
        raise TokenizerError(f"{Path(model_dir) / 'tokenizer.json'} is missing: hfview reads ChatGLM's GLM-4 BPE "
                             f"vocabulary from it (a tokenizer.model with remote tokenizer code is not read)")
    return glm_special_vocab(model_dir, h, (("eos", "<|endoftext|>"), ("eot", "<|user|>"),
                                            ("unk", "<|endoftext|>")))


FAMILY = Family(
    name="chatglm",
    gguf_arch="chatglm",
    architectures=("ChatGLMModel", "ChatGLMForConditionalGeneration"),
    defaults=DEFAULTS,
    reads=READS,
    harmless=HARMLESS,
    tensors=TENSORS,
    parameters=parameters,
    vocab=vocab,
    refuse=REFUSE,
    check=check,
    optional_prefix="transformer.",
)

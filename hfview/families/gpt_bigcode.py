"""StarCoder, SantaCoder, WizardCoder (GPTBigCodeForCausalLM) -> llama.cpp `starcoder` (the converter's
StarCoderModel).

GPT-2's block with Linear (not Conv1D) projections, so its tensor table with the weights as stored; multi-query
attention (one KV head: c_attn is n_embd + 2 x head width rows). The converter writes its own short list: the
context from n_positions, a feed-forward width of 4 x n_embd and one KV head whatever the config says.
"""
from __future__ import annotations

from pathlib import Path

from ..config import ANY, Harmless
from ..errors import ConfigError
from ..family import Family, Refuse, stored
from ..names import Keys
from ..params import GELU, f32, u32
from .gpt2 import tensors

# transformers 5.24's GPTBigCodeConfig defaults
DEFAULTS = {
    "gpt_bigcode": dict(vocab_size=50257, n_positions=1024, n_embd=768, n_layer=12, n_head=12, n_inner=None,
                        activation_function="gelu_pytorch_tanh", resid_pdrop=0.1, embd_pdrop=0.1, attn_pdrop=0.1,
                        layer_norm_epsilon=1e-05, initializer_range=0.02, scale_attn_weights=True, use_cache=True,
                        bos_token_id=50256, eos_token_id=50256, pad_token_id=None, attention_softmax_in_fp32=True,
                        scale_attention_softmax_in_fp32=True, multi_query=True, tie_word_embeddings=True,
                        num_key_value_heads=1),
}

READS = frozenset({
    "vocab_size", "n_positions", "n_embd", "n_layer", "n_head", "n_inner", "activation_function",
    "layer_norm_epsilon", "scale_attn_weights", "multi_query", "num_key_value_heads", "tie_word_embeddings",
})
# Dropouts; the two softmax-in-float32 switches only change the precision transformers computes in under
# half-precision weights (llama.cpp's softmax is float32 anyway).
# The first releases (StarCoder, WizardCoder) also carry GPT-2's sequence-summary head keys and the switches of
# BigCode's inference-runner fork (inference_runner, pre-allocated caches, key padding): transformers' GPTBigCode
# reads none of them.
HARMLESS: Harmless = {"resid_pdrop": ANY, "embd_pdrop": ANY, "attn_pdrop": ANY,
    "attention_softmax_in_fp32": ANY, "scale_attention_softmax_in_fp32": ANY,
    **dict.fromkeys(("summary_type", "summary_use_proj", "summary_activation", "summary_proj_to_labels",
                     "summary_first_dropout", "inference_runner", "max_batch_size", "pad_key_length",
                     "pre_allocate_kv_cache", "validate_runner_input"), ANY)}

TENSORS = tensors(stored)


REFUSE = (
    Refuse("activation_function", GELU, "llama.cpp's starcoder computes GELU only; this checkpoint would run wrong"),
    Refuse("scale_attn_weights", bool, "llama.cpp's starcoder scales attention by 1/sqrt(head width)"),
)


def check(h: dict, path: Path) -> None:
    if not h["multi_query"] or h["num_key_value_heads"] != 1:
        raise ConfigError(f"{path}: multi_query {h['multi_query']} / num_key_value_heads {h['num_key_value_heads']}: "
                          f"the converter writes one KV head for GPT-BigCode, so llama.cpp's starcoder could not load "
                          f"this checkpoint's attention weights")
    if h["n_inner"] is not None and h["n_inner"] != 4 * h["n_embd"]:
        raise ConfigError(f"{path}: n_inner {h['n_inner']}: the converter writes a feed-forward width of 4 x n_embd "
                          f"= {4 * h['n_embd']}, so llama.cpp could not load these MLP weights")


def parameters(h: dict, block_count: int, file_type: int) -> list:
    return [u32(Keys.LLM.CONTEXT_LENGTH.format(arch="starcoder"), h["n_positions"]),
            u32(Keys.LLM.EMBEDDING_LENGTH.format(arch="starcoder"), h["n_embd"]),
            u32(Keys.LLM.FEED_FORWARD_LENGTH.format(arch="starcoder"), 4 * h["n_embd"]),
            u32(Keys.LLM.BLOCK_COUNT.format(arch="starcoder"), block_count),
            u32(Keys.Attention.HEAD_COUNT.format(arch="starcoder"), h["n_head"]),
            u32(Keys.Attention.HEAD_COUNT_KV.format(arch="starcoder"), 1),
            f32(Keys.Attention.LAYERNORM_EPS.format(arch="starcoder"), h["layer_norm_epsilon"]),
            u32(Keys.General.FILE_TYPE, file_type)]


def vocab(model_dir: Path, h: dict) -> list:
    from hfview.tokenizer.vocab import gpt2_vocab
    return gpt2_vocab(model_dir, h)


FAMILY = Family(
    name="gpt_bigcode",
    gguf_arch="starcoder",
    architectures=("GPTBigCodeForCausalLM",),
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

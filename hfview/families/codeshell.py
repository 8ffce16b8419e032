"""CodeShell (CodeShellForCausalLM, model_type codeshell, remote code) -> llama.cpp `codeshell` (the converter's
CodeShellModel).

GPT-BigCode's names and LayerNorms (weight and bias) with rotary positions and grouped KV heads: `c_attn` holds
all q rows, then the k rows of `num_query_groups` heads, then their v rows (the group_query_attention layout),
kept fused as llama.cpp's attn_qkv; a GELU MLP (c_fc, c_proj) with biases. The converter writes fixed values
where the modeling code has settings: feed-forward 4 x n_embd, rope base 10000, linear rope scaling of factor
1; so every setting the modeling code reads is harmless only at the value that matches them, and refused by
name otherwise. transformers has no CodeShell config class: config.json is read as written (no defaults).
"""
from __future__ import annotations

from pathlib import Path

from ..config import ANY, Harmless
from ..errors import ConfigError
from ..family import Family, Refuse, Tensor, stated
from ..names import GGUF, Keys
from ..params import f32, string, u32

# no transformers config class: config.json is read as written. The release's own config.json (WisdomShell's
# repository) names its model_type kclgpt; the converter picks its class by the architecture either way
DEFAULTS = {"codeshell": {}, "kclgpt": {}}

READS = frozenset({"vocab_size", "n_embd", "n_layer", "n_head", "n_positions", "num_query_groups",
                   "layer_norm_epsilon", "n_inner"})
HARMLESS: Harmless = {
    # dropout and the fp32 softmax's scale-and-unscale (a no-op in exact arithmetic)
    "embd_pdrop": ANY, "resid_pdrop": ANY, "attn_pdrop": ANY,
    "attention_softmax_in_fp32": ANY, "scale_attention_softmax_in_fp32": ANY,
    # the release's inference-runner switches (GPT-BigCode's fork: cache pre-allocation, key padding, input
    # checks) and sequence-summary head settings (no causal-LM forward reads them)
    "inference_runner": ANY, "max_batch_size": ANY, "pad_key_length": ANY, "pre_allocate_kv_cache": ANY,
    "validate_runner_input": ANY, "summary_activation": ANY, "summary_first_dropout": ANY,
    "summary_proj_to_labels": ANY, "summary_type": ANY, "summary_use_proj": ANY,
    # the computation llama.cpp's codeshell and the converter's fixed KV describe; any other is refused
    "group_query_attention": (True,), "position_embedding_type": ("rope",), "rope_scaling": (None,),
    "activation_function": ("gelu_pytorch_tanh",), "scale_attn_weights": (True,), "tie_word_embeddings": (False,),
}

TENSORS = (
    Tensor("transformer.wte.weight", GGUF.TOKEN_EMBD.weight),
    Tensor("transformer.ln_f.{wb}", GGUF.OUTPUT_NORM.wb),
    Tensor("lm_head.weight", GGUF.OUTPUT.weight),
    Tensor("transformer.h.{bid}.ln_1.{wb}", GGUF.ATTN_NORM.wb),
    Tensor("transformer.h.{bid}.attn.c_attn.{wb}", GGUF.ATTN_QKV.wb),
    Tensor("transformer.h.{bid}.attn.c_proj.{wb}", GGUF.ATTN_OUT.wb),
    Tensor("transformer.h.{bid}.ln_2.{wb}", GGUF.FFN_NORM.wb),
    Tensor("transformer.h.{bid}.mlp.c_fc.{wb}", GGUF.FFN_UP.wb),
    Tensor("transformer.h.{bid}.mlp.c_proj.{wb}", GGUF.FFN_DOWN.wb),
)


# a stated null refused too: every check and KV below computes with these values
REFUSE = tuple(Refuse(key, stated, f"{key} is missing; CodeShell's config.json states it (the "
                      f"converter reads it, no defaults apply)")
               for key in ("n_embd", "n_layer", "n_head", "n_positions", "num_query_groups", "layer_norm_epsilon",
                           "vocab_size"))


def check(h: dict, path: Path) -> None:
    n_embd, n_head, groups = h["n_embd"], h["n_head"], h["num_query_groups"]
    if n_embd % n_head or n_head % groups:
        raise ConfigError(f"{path}: n_embd {n_embd}, n_head {n_head} and num_query_groups {groups} do not split "
                          f"into whole heads and groups")
    if (n_embd // n_head) % 2:
        raise ConfigError(f"{path}: head width {n_embd // n_head} is odd: rotation pairs need an even count")
    if h.get("n_inner") not in (None, 4 * n_embd):
        raise ConfigError(f"{path}: n_inner {h['n_inner']}: the converter writes CodeShell's feed-forward length "
                          f"as 4 x n_embd = {4 * n_embd}, so this checkpoint would not load")


def parameters(h: dict, block_count: int, file_type: int) -> list:
    return [
        u32(Keys.LLM.CONTEXT_LENGTH.format(arch="codeshell"), h["n_positions"]),
        u32(Keys.LLM.EMBEDDING_LENGTH.format(arch="codeshell"), h["n_embd"]),
        u32(Keys.LLM.FEED_FORWARD_LENGTH.format(arch="codeshell"), 4 * h["n_embd"]),
        u32(Keys.LLM.BLOCK_COUNT.format(arch="codeshell"), block_count),
        u32(Keys.Attention.HEAD_COUNT.format(arch="codeshell"), h["n_head"]),
        u32(Keys.Attention.HEAD_COUNT_KV.format(arch="codeshell"), h["num_query_groups"]),
        f32(Keys.Attention.LAYERNORM_EPS.format(arch="codeshell"), h["layer_norm_epsilon"]),
        u32(Keys.General.FILE_TYPE, file_type),
        f32(Keys.Rope.FREQ_BASE.format(arch="codeshell"), 10000.0),
        string(Keys.Rope.SCALING_TYPE.format(arch="codeshell"), "linear"),
        f32(Keys.Rope.SCALING_FACTOR.format(arch="codeshell"), 1.0),
    ]


def vocab(model_dir: Path, h: dict) -> list:
    from hfview.tokenizer.vocab import gpt2_vocab
    return gpt2_vocab(model_dir, h)


FAMILY = Family(
    name="codeshell",
    gguf_arch="codeshell",
    architectures=("CodeShellForCausalLM",),
    defaults=DEFAULTS,
    reads=READS,
    harmless=HARMLESS,
    tensors=TENSORS,
    parameters=parameters,
    vocab=vocab,
    refuse=REFUSE,
    check=check,
)

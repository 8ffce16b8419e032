"""GPT-2 (GPT2LMHeadModel) -> llama.cpp `gpt2` (the converter's GPT2Model).

Learned absolute positions (position_embd), LayerNorm with bias, one fused c_attn projection, a GELU MLP,
biases everywhere, tied output. GPT-2's Conv1D layers store their weights inputs-first, so every
projection is presented transposed. The converter writes its own short hyperparameter list: the context
from `n_ctx` (which released configs carry and transformers 5 no longer writes) and a feed-forward width
of 4 x n_embd whatever `n_inner` says.
"""
from __future__ import annotations

from pathlib import Path

from ..config import ANY, Harmless
from ..errors import ConfigError
from ..family import Family, Refuse, Skip, Tensor
from ..names import GGUF, Keys
from ..params import GELU, f32, u32
from ..views import Transposed


def transposed(sources, h):
    return Transposed(sources[0])


# transformers 5.24's GPT2Config defaults
DEFAULTS = {
    "gpt2": dict(vocab_size=50257, n_positions=1024, n_embd=768, n_layer=12, n_head=12, n_inner=None,
                 activation_function="gelu_new", resid_pdrop=0.1, embd_pdrop=0.1, attn_pdrop=0.1,
                 layer_norm_epsilon=1e-05, initializer_range=0.02, summary_type="cls_index", summary_use_proj=True,
                 summary_activation=None, summary_proj_to_labels=True, summary_first_dropout=0.1,
                 scale_attn_weights=True, use_cache=True, bos_token_id=50256, eos_token_id=50256,
                 pad_token_id=None, scale_attn_by_inverse_layer_idx=False, reorder_and_upcast_attn=False,
                 tie_word_embeddings=True),
}

READS = frozenset({
    "vocab_size", "n_positions", "n_ctx", "n_embd", "n_layer", "n_head", "n_inner", "activation_function",
    "layer_norm_epsilon", "scale_attn_weights", "scale_attn_by_inverse_layer_idx", "tie_word_embeddings",
})
# Dropouts and the sequence-summary head (GPT2DoubleHeadsModel's) do not touch the causal LM's forward pass;
# reorder_and_upcast_attn only upcasts attention to float32, which llama.cpp computes in anyway.
HARMLESS: Harmless = {"resid_pdrop": ANY, "embd_pdrop": ANY, "attn_pdrop": ANY, "summary_type": ANY,
    "summary_use_proj": ANY, "summary_activation": ANY, "summary_proj_to_labels": ANY,
    "summary_first_dropout": ANY, "reorder_and_upcast_attn": ANY}

def tensors(weight) -> tuple:
    """GPT-2's tensor table, names as OpenAI released them (transformers' "transformer." prefix is the
    family's optional_prefix); `weight` is the view of the projection weights (GPT-2's Conv1D: transposed;
    GPT-BigCode's Linear: stored)."""
    return (
        Tensor("wte.weight", GGUF.TOKEN_EMBD.weight),
        Tensor("wpe.weight", GGUF.POS_EMBD.weight),
        Tensor("ln_f.{wb}", GGUF.OUTPUT_NORM.wb),
        Tensor("lm_head.weight", GGUF.OUTPUT.weight, required=False),  # absent when tied (every released GPT-2)
        Tensor("h.{bid}.ln_1.{wb}", GGUF.ATTN_NORM.wb),
        Tensor("h.{bid}.attn.c_attn.weight", GGUF.ATTN_QKV.weight, weight),
        Tensor("h.{bid}.attn.c_attn.bias", GGUF.ATTN_QKV.bias),
        Tensor("h.{bid}.attn.c_proj.weight", GGUF.ATTN_OUT.weight, weight),
        Tensor("h.{bid}.attn.c_proj.bias", GGUF.ATTN_OUT.bias),
        Tensor("h.{bid}.ln_2.{wb}", GGUF.FFN_NORM.wb),
        Tensor("h.{bid}.mlp.c_fc.weight", GGUF.FFN_UP.weight, weight),
        Tensor("h.{bid}.mlp.c_fc.bias", GGUF.FFN_UP.bias),
        Tensor("h.{bid}.mlp.c_proj.weight", GGUF.FFN_DOWN.weight, weight),
        Tensor("h.{bid}.mlp.c_proj.bias", GGUF.FFN_DOWN.bias),
    )


TENSORS = (
    *tensors(transposed),
    # the causal mask, saved as buffers by transformers 4 before 4.3x: nothing llama.cpp reads. The pinned
    # converter means to drop them too, but maps them instead and fails ("Can not map tensor 'h.0.attn.bias'")
    Skip("h.{bid}.attn.bias"),
    Skip("h.{bid}.attn.masked_bias"),
)


REFUSE = (
    Refuse("activation_function", GELU, "llama.cpp's gpt2 computes GELU only; this checkpoint would run wrong"),
)


def check(h: dict, path: Path) -> None:
    if "n_ctx" not in h:
        raise ConfigError(f"{path}: no n_ctx: the converter reads GPT-2's context length from n_ctx, which released "
                          f"GPT-2 configs carry and transformers 5 no longer writes; add \"n_ctx\": "
                          f"{h['n_positions']} (n_positions) to config.json")
    if h["n_inner"] is not None and h["n_inner"] != 4 * h["n_embd"]:
        raise ConfigError(f"{path}: n_inner {h['n_inner']}: the converter writes a feed-forward width of 4 x n_embd "
                          f"= {4 * h['n_embd']} for GPT-2, so llama.cpp could not load these MLP weights")
    if not h["scale_attn_weights"] or h["scale_attn_by_inverse_layer_idx"]:
        raise ConfigError(f"{path}: scale_attn_weights {h['scale_attn_weights']} / scale_attn_by_inverse_layer_idx "
                          f"{h['scale_attn_by_inverse_layer_idx']}: llama.cpp's gpt2 scales attention by "
                          f"1/sqrt(head width) only; this checkpoint would run wrong")


def parameters(h: dict, block_count: int, file_type: int) -> list:
    return [u32(Keys.LLM.BLOCK_COUNT.format(arch="gpt2"), block_count),
            u32(Keys.LLM.CONTEXT_LENGTH.format(arch="gpt2"), h["n_ctx"]),
            u32(Keys.LLM.EMBEDDING_LENGTH.format(arch="gpt2"), h["n_embd"]),
            u32(Keys.LLM.FEED_FORWARD_LENGTH.format(arch="gpt2"), 4 * h["n_embd"]),
            u32(Keys.Attention.HEAD_COUNT.format(arch="gpt2"), h["n_head"]),
            f32(Keys.Attention.LAYERNORM_EPS.format(arch="gpt2"), h["layer_norm_epsilon"]),
            u32(Keys.General.FILE_TYPE, file_type)]


def vocab(model_dir: Path, h: dict) -> list:
    from hfview.tokenizer.vocab import gpt2_vocab
    return gpt2_vocab(model_dir, h)


FAMILY = Family(
    name="gpt2",
    gguf_arch="gpt2",
    architectures=("GPT2LMHeadModel",),
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

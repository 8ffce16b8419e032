"""Qwen3.5 text (Qwen3_5ForCausalLM: the text decoders of Qwen3.5 0.8B-27B) -> llama.cpp `qwen35` (the converter's
Qwen3_5TextModel, derived from its Qwen3NextModel through the value-head regrouping base).

Qwen3-Next's hybrid (qwen3_next.py: Gated DeltaNet layers, gated full attention every full_attention_interval-th,
(1 + w) RMSNorms stored as the offset, A = -exp(A_log), dt_bias as the ssm_dt bias, conv1d squeezed) with a dense
SwiGLU in every layer and the DeltaNet projections stored apart: in_proj_qkv (q, k, v rows), in_proj_z, in_proj_a,
in_proj_b. Where there are more value heads than key heads the converter regroups the value heads from grouped by
key head ([K0: v0 .. v(r-1)], [K1: ...]) to tiled order (v0 of every key head, then v1, ...), for ggml's broadcast:
one row permutation (value_heads_tiled), applied to the v rows of in_proj_qkv and conv1d, to in_proj_z, in_proj_a,
in_proj_b, A_log and dt_bias, and to out_proj's columns. Rope is interleaved M-RoPE: its sections are written as
rope_parameters states them (the converter's [11, 11, 10, 0] where it states none); text positions are one stream.

Qwen3_5ForConditionalGeneration (the image-text checkpoints Qwen3.5 is released as) is read as its text model:
text_config over the top level, the text weights' `language_model.` prefix dropped, the vision tower (model.visual.)
left out, as the converter's text conversion does.

The multi-token-prediction layer every release stores (mtp.*, beside model.language_model.) is presented as the
converter writes it without --no-mtp, as Qwen3-Next's (qwen3_next.py): block num_hidden_layers, a full-attention layer
with its dense SwiGLU, and its nextn tensors; mtp_num_hidden_layers (which the releases state) is the block count. A
checkpoint without mtp.* tensors is presented as --no-mtp converts it.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

from ..config import ANY, Harmless
from ..errors import ConfigError
from ..family import Family, Refuse, Skip, Tensor
from ..gguf_layout import KV, ValueType
from ..names import GGUF, Keys
from ..views import NEG_EXP, OFFSET_ONE, ColumnSelection, RowPermutation, RowSelection
from ._parts.checks import check_no_pooling, rope_types, silu_only
from ._parts.gated_delta import check_hybrid, hybrid_normalise, hybrid_parameters, on
from ._parts.nextn import MTP_TENSORS, extra_mtp_blocks, mtp_rename, stored_mtp_layers
from ._parts.vocab import gpt2_vocab

# transformers 5.24's Qwen3_5TextConfig defaults (layer_types is computed from full_attention_interval)
DEFAULTS = {
    "qwen3_5_text": dict(vocab_size=248320, hidden_size=4096, intermediate_size=12288, num_hidden_layers=32,
                         num_attention_heads=16, num_key_value_heads=4, hidden_act="silu",
                         max_position_embeddings=32768, initializer_range=0.02, rms_norm_eps=1e-06, use_cache=True,
                         tie_word_embeddings=False,
                         rope_parameters={"rope_theta": 10000.0, "partial_rotary_factor": 0.25, "rope_type": "default"},
                         attention_bias=False, attention_dropout=0.0, head_dim=256, linear_conv_kernel_dim=4,
                         linear_key_head_dim=128, linear_value_head_dim=128, linear_num_key_heads=16,
                         linear_num_value_heads=32, layer_types=None, pad_token_id=None, bos_token_id=None,
                         eos_token_id=None),
}

READS = frozenset({
    "vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads",
    "num_key_value_heads", "head_dim", "max_position_embeddings", "rms_norm_eps", "rope_parameters", "rope_scaling",
    "rope_theta", "partial_rotary_factor", "hidden_act", "tie_word_embeddings", "attention_bias",
    "linear_conv_kernel_dim", "linear_key_head_dim", "linear_value_head_dim", "linear_num_key_heads",
    "linear_num_value_heads", "layer_types", "full_attention_interval",
    "mtp_num_hidden_layers",  # the MTP block count where the checkpoint stores mtp.* tensors (_parts.nextn.stored_mtp_layers)
})
# Released Qwen3.5 configs carry these; Qwen3_5TextConfig does not define them and its model never reads them:
# the output gate is always applied (q_proj's doubled rows), the DeltaNet state dtype is a kernel choice, and
# the MTP layer uses the trunk's embeddings (no mtp.embed_tokens, which the converter could not map)
HARMLESS: Harmless = {"attn_output_gate": (True,), "mamba_ssm_dtype": ANY,
                      "mtp_use_dedicated_embeddings": (False,),
                      # the image-text wrapper's vision tower and image/video tokens, which a text forward never touches
                      **dict.fromkeys(("vision_config", "image_token_id", "video_token_id", "vision_start_token_id",
                                       "vision_end_token_id"), ANY)}
ARCHITECTURES = ("Qwen3_5ForCausalLM", "Qwen3_5ForConditionalGeneration")

_L = "model.layers.{bid}."
_OPTIONAL = dict(required=False)


def value_heads_tiled(h: dict, head_dim: int) -> np.ndarray:
    """The converter's value-head regrouping over value_heads x head_dim entries: grouped by key head
    ([key head][its value heads][head_dim]) to tiled ([value head within its group][key head][head_dim])."""
    nk, nv = h["linear_num_key_heads"], h["linear_num_value_heads"]
    return np.arange(nv * head_dim).reshape(nk, nv // nk, head_dim).swapaxes(0, 1).reshape(-1)


def _rows(offset_of, head_dim_of, label: str, squeeze: bool = False):
    """Rows (or a 1-D tensor's elements) with the value-head block from offset_of(h) regrouped (value_heads_tiled);
    `squeeze`: conv1d's [channels, 1, kernel] presented [channels, kernel]."""
    def make(sources, h):
        src = sources[0]
        start = offset_of(h)
        order = np.concatenate([np.arange(start), start + value_heads_tiled(h, head_dim_of(h))])
        if len(order) != src.shape[0]:
            raise ConfigError(f"tensor {src.name!r} has {src.shape[0]} rows; the config's linear-attention heads "
                              f"need {len(order)}")
        if squeeze:
            return RowSelection(src, order, f"squeezed, {label}", presented=(src.shape[0], src.shape[-1]))
        return RowPermutation(src, order, label)
    return on("linear_attention", make)


def _qk_width(h: dict) -> int:
    return 2 * h["linear_num_key_heads"] * h["linear_key_head_dim"]


def _v_dim(h: dict) -> int:
    return h["linear_value_head_dim"]


def _out_columns(sources, h):
    return ColumnSelection(sources[0], value_heads_tiled(h, h["linear_value_head_dim"]),
                           "columns: value heads tiled")


_TILED = "value heads tiled"
TENSORS = (
    *MTP_TENSORS,
    # the image-text wrapper (text weights under model.language_model., renamed as the converter does): its vision
    # tower, which the converter's text conversion leaves out
    Skip("model.visual.{rest}"),
    Tensor("model.embed_tokens.weight", GGUF.TOKEN_EMBD.weight),
    Tensor("model.norm.weight", GGUF.OUTPUT_NORM.weight, steps=(OFFSET_ONE,)),
    Tensor("lm_head.weight", GGUF.OUTPUT.weight, required=False),  # absent when tied
    Tensor(_L + "input_layernorm.weight", GGUF.ATTN_NORM.weight, steps=(OFFSET_ONE,)),
    Tensor(_L + "post_attention_layernorm.weight", GGUF.ATTN_POST_NORM.weight, steps=(OFFSET_ONE,)),
    # full-attention layers (q_proj: the query and its output gate, per head)
    *(Tensor(_L + f"self_attn.{p}_proj.weight", f"blk.{{bid}}.attn_{g}.weight", on("full_attention"), **_OPTIONAL)
      for p, g in (("q", "q"), ("k", "k"), ("v", "v"), ("o", "output"))),
    *(Tensor(_L + f"self_attn.{p}_norm.weight", f"blk.{{bid}}.attn_{p}_norm.weight", on("full_attention"),
             steps=(OFFSET_ONE,), **_OPTIONAL) for p in ("q", "k")),
    # Gated DeltaNet layers
    Tensor(_L + "linear_attn.A_log", GGUF.SSM_A, _rows(lambda h: 0, lambda h: 1, _TILED), steps=(NEG_EXP,),
           **_OPTIONAL),
    Tensor(_L + "linear_attn.conv1d.weight", GGUF.SSM_CONV1D.weight,
           _rows(_qk_width, _v_dim, "v channels " + _TILED, squeeze=True), **_OPTIONAL),
    Tensor(_L + "linear_attn.dt_bias", GGUF.SSM_DT.bias, _rows(lambda h: 0, lambda h: 1, _TILED), **_OPTIONAL),
    Tensor(_L + "linear_attn.in_proj_a.weight", GGUF.SSM_ALPHA.weight,
           _rows(lambda h: 0, lambda h: 1, _TILED), **_OPTIONAL),
    Tensor(_L + "linear_attn.in_proj_b.weight", GGUF.SSM_BETA.weight,
           _rows(lambda h: 0, lambda h: 1, _TILED), **_OPTIONAL),
    Tensor(_L + "linear_attn.in_proj_qkv.weight", GGUF.ATTN_QKV.weight,
           _rows(_qk_width, _v_dim, "v rows " + _TILED), **_OPTIONAL),
    Tensor(_L + "linear_attn.in_proj_z.weight", GGUF.ATTN_GATE.weight, _rows(lambda h: 0, _v_dim, _TILED),
           **_OPTIONAL),
    Tensor(_L + "linear_attn.norm.weight", GGUF.SSM_NORM.weight, on("linear_attention"), **_OPTIONAL),
    Tensor(_L + "linear_attn.out_proj.weight", GGUF.SSM_OUT.weight, on("linear_attention", _out_columns),
           **_OPTIONAL),
    # every layer's SwiGLU
    *(Tensor(_L + f"mlp.{p}_proj.weight", f"blk.{{bid}}.ffn_{p}.weight") for p in ("gate", "up", "down")),
)

# the converter's sections where rope_parameters states none (llama.cpp's qwen35 requires the key)
DEFAULT_MROPE_SECTION = [11, 11, 10, 0]


REFUSE = (
    silu_only("qwen35"),
    rope_types("qwen35", ("default",)),
    # `is not`: false itself only, not 0
    Refuse("rope_parameters.mrope_interleaved", lambda v: v is not False, "llama.cpp's qwen35 rotates interleaved "
           "M-RoPE sections only"),
)


def check(h: dict, path: Path) -> None:
    check_no_pooling(path)
    check_hybrid(h, path, "qwen35")


def mrope_parameters(arch: str):
    """Qwen3-Next's hybrid KV, with the M-RoPE sections: as rope_parameters states them, before the rope base (where
    TextModel writes them), else the converter's default, last (where its mixin adds it)."""
    def parameters(h: dict, block_count: int, file_type: int) -> list:
        kv = hybrid_parameters(h, arch, block_count, file_type)
        sections = h["rope_parameters"].get("mrope_section")
        if sections is not None:
            at = next(i for i, e in enumerate(kv) if e.key == f"{arch}.rope.freq_base")
            kv.insert(at,
                      KV(Keys.Rope.DIMENSION_SECTIONS.format(arch=arch), ValueType.ARRAY,
                         (list(sections) + [0] * 4)[:4],
                             ValueType.INT32))
        else:
            kv.append(KV(Keys.Rope.DIMENSION_SECTIONS.format(arch=arch), ValueType.ARRAY, DEFAULT_MROPE_SECTION,
                         ValueType.INT32))
        return kv
    return parameters


parameters = mrope_parameters("qwen35")


FAMILY = Family(
    name="qwen3_5_text",
    gguf_arch="qwen35",
    architectures=ARCHITECTURES,
    defaults=DEFAULTS,
    reads=READS,
    harmless=HARMLESS,
    tensors=TENSORS,
    parameters=parameters,
    vocab=gpt2_vocab,
    refuse=REFUSE,
    check=check,
    normalise=hybrid_normalise,
    extra_blocks=extra_mtp_blocks,
    stored_hparams=stored_mtp_layers,
    rename=mtp_rename,
)

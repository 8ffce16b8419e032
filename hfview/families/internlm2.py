"""InternLM2 (InternLM2ForCausalLM, remote code) -> llama.cpp `internlm2` (the converter's InternLM2Model).

InternLM2 fuses q, k and v into one `wqkv` per layer, grouped by KV head: each group holds its q heads, then
its k head, then its v head (head width hidden/heads). The converter splits it into attn_q / attn_k / attn_v
and regroups q and k into rotation pairs as for Llama; here each is a row selection of the stored wqkv.
transformers has no InternLM2 config class, so the converter reads config.json as it is (no defaults).
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

from ..config import ANY, Harmless
from ..errors import ConfigError
from ..family import Family, Refuse, Skip, Split, Tensor, stated, unset
from ..names import GGUF
from ..params import text_model_parameters
from ..shards import StoredTensor
from ..views import RowSelection, rotation_pairs

DEFAULTS = {"internlm2": {}}  # no transformers config class: config.json is read as written

READS = frozenset({
    "vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads",
    "num_key_value_heads", "max_position_embeddings", "rms_norm_eps", "rope_theta", "rope_scaling",
    "hidden_act", "bias", "tie_word_embeddings",
})
HARMLESS: Harmless = {"attn_implementation": ANY}  # which attention kernel the remote code uses


def wqkv_rows(h: dict, part: str) -> np.ndarray:
    """Rows of wqkv that make attn_q, attn_k or attn_v, in the converter's order (q and k in rotation pairs)."""
    n_head, n_kv = h["num_attention_heads"], h["num_key_value_heads"]
    head_dim = h["hidden_size"] // n_head
    per_group = n_head // n_kv + 2  # a group's q heads, its k head, its v head
    slots = np.arange(n_kv * per_group * head_dim).reshape(n_kv, per_group, head_dim)
    if part == "q":
        rows = slots[:, :-2].reshape(-1)
        return rows[rotation_pairs(len(rows), n_head)]
    if part == "k":
        rows = slots[:, -2].reshape(-1)
        return rows[rotation_pairs(len(rows), n_kv)]
    return slots[:, -1].reshape(-1)


def _wqkv_part(part: str):
    def make(sources: list[StoredTensor], h: dict) -> RowSelection:
        src = sources[0]
        n_head, n_kv = h["num_attention_heads"], h["num_key_value_heads"]
        expected = (n_head + 2 * n_kv) * (h["hidden_size"] // n_head)
        if src.shape[0] != expected:
            raise ConfigError(f"tensor {src.name!r} has {src.shape[0]} rows; {n_head} q heads and {n_kv} k and v "
                              f"heads of width hidden_size/num_attention_heads make {expected}")
        return RowSelection(src, wqkv_rows(h, part), f"wqkv {part} rows" + (", rotation pairs" if part != "v" else ""))
    return make


TENSORS = (
    Tensor("model.tok_embeddings.weight", GGUF.TOKEN_EMBD.weight),
    Tensor("model.norm.weight", GGUF.OUTPUT_NORM.weight),
    Tensor(GGUF.OUTPUT.weight, GGUF.OUTPUT.weight, required=False),  # absent when tied to the embeddings
    Tensor("model.layers.{bid}.attention_norm.weight", GGUF.ATTN_NORM.weight),
    Split("model.layers.{bid}.attention.wqkv.weight", ((GGUF.ATTN_Q.weight, _wqkv_part("q")),
                                                        (GGUF.ATTN_K.weight, _wqkv_part("k")),
                                                        (GGUF.ATTN_V.weight, _wqkv_part("v")))),
    Tensor("model.layers.{bid}.attention.wo.weight", GGUF.ATTN_OUT.weight),
    Tensor("model.layers.{bid}.ffn_norm.weight", GGUF.FFN_NORM.weight),
    Tensor("model.layers.{bid}.feed_forward.w1.weight", GGUF.FFN_GATE.weight),
    Tensor("model.layers.{bid}.feed_forward.w3.weight", GGUF.FFN_UP.weight),
    Tensor("model.layers.{bid}.feed_forward.w2.weight", GGUF.FFN_DOWN.weight),
    Skip("model.layers.{bid}.attention.rotary_emb.inv_freq"),
)


# a stated null refused too: the checks and KV compute with these values
REFUSE = (
    *(Refuse(key, stated, f"{key} is missing; InternLM2's config.json states it (no defaults apply)")
      for key in ("hidden_size", "num_attention_heads", "num_key_value_heads", "num_hidden_layers", "vocab_size")),
    Refuse("hidden_act", ("silu",), "llama.cpp's internlm2 computes SiLU only", default="silu"),
    Refuse("bias", unset, "the converter maps no InternLM2 bias tensors (bias true asks for them)"),
    Refuse("rope_parameters.rope_type", ("default", "dynamic", "linear"), "not one hfview reads for InternLM2",
           default="default"),
)


def check(h: dict, path: Path) -> None:
    if h["num_attention_heads"] % h["num_key_value_heads"]:
        raise ConfigError(f"{path}: {h['num_attention_heads']} heads do not split into "
                          f"{h['num_key_value_heads']} KV groups")


def parameters(h: dict, block_count: int, file_type: int) -> list:
    return text_model_parameters(h, "internlm2", block_count, file_type)


def vocab(model_dir: Path, h: dict) -> list:
    from hfview.tokenizer.internlm2 import internlm2_vocab
    return internlm2_vocab(model_dir, h)


FAMILY = Family(
    name="internlm2",
    gguf_arch="internlm2",
    architectures=("InternLM2ForCausalLM",),
    defaults=DEFAULTS,
    reads=READS,
    harmless=HARMLESS,
    tensors=TENSORS,
    parameters=parameters,
    vocab=vocab,
    refuse=REFUSE,
    check=check,
    notes={"rope_scaling": "InternLM2's dynamic NTK scaling: the converter writes none, llama.cpp runs the "
                           "unscaled rope, which is what dynamic scaling computes within max_position_embeddings"},
)

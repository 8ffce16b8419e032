"""PLaMo 1 (PlamoForCausalLM, model_type plamo, remote code: pfnet/plamo-13b and its instruct models) -> llama.cpp
`plamo` (the converter's PlamoModel, a TextModel with its own short hyperparameter list).

Each layer is parallel: one RMSNorm feeds both the attention and the SwiGLU MLP, and x + attn(n) + mlp(n) goes on.
Attention has num_attention_heads query heads of hidden_size / num_attention_heads and num_attention_heads /
n_shared_head key/value heads, which the release shares by tiling (query head h reads KV head h % n_kv), where
ggml's broadcast groups (query head j reads KV head j // n_shared_head). So the converter reorders q_proj's rows and
o_proj's columns head by head (views.tiled_kv_grouped); K and V stay as stored, and so do the rotary rows: PLaMo
rotates halves (NeoX), as llama.cpp's plamo does. The rotary base is 10000 in the release's modeling code, which
reads no rope key, and llama.cpp's default when the converter writes none.

The pinned converter hard-codes PLaMo-13B's shapes: it writes context_length 4096 ("not in config.json") and
head_count_kv 5 ("num_key_value_heads is wrong": PlamoConfig saves num_attention_heads there by default, 40 in
the copy of plamo-13b's config a Swift port quotes, and its modeling code never reads it), and its reshapes assert 5120 x 5120 (40 heads of 128, n_shared_head 8). The view writes
the same 4096, and for the KV heads the count those reshapes assume, num_attention_heads / n_shared_head: 5 for every
released model, where the converter's bytes are the oracle. For other shapes (where the converter stops at its
assertion) the view applies the same reordering at their sizes, and only llama.cpp's logits vouch for it.

transformers 5.24 has no PLaMo class, so the converter reads config.json as written (no PlamoConfig defaults apply)
and so does the view: a key the converter needs is required; n_shared_head, which it never reads, defaults to
PlamoConfig's 8 (the value its reshape hard-codes). llama.cpp's plamo loads output.weight unconditionally and the
converter writes only what is stored, so a tied head (tie_word_embeddings true) is refused.
"""
from __future__ import annotations

from pathlib import Path

from ..config import ANY, Harmless
from ..errors import CheckpointError, ConfigError
from ..family import Family, Refuse, Skip, Tensor, stated, unset
from ..names import GGUF, Keys
from ..params import f32, u32
from ..views import ColumnSelection, RowPermutation, Stored, tiled_kv_grouped
from ._parts.sentencepiece_only import sentencepiece_only

ARCH = "plamo"
ARCHITECTURES = ("PlamoForCausalLM",)
READS = frozenset({
    "vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads", "n_shared_head",
    "rms_norm_eps", "tie_word_embeddings",
})
HARMLESS: Harmless = {
    # PlamoConfig stores it (default num_attention_heads, 40 as released); the modeling code shares KV heads by
    # n_shared_head and never reads it, nor does the converter (it writes 5)
    "num_key_value_heads": ANY,
    # sizes the remote code's rotary cache only (it grows past it); the converter writes 4096 whatever it says
    "max_position_embeddings": ANY,
}
# PlamoConfig's default (configuration in the release's modeling_plamo.py), the group its converter reshape assumes
N_SHARED_HEAD = 8
CONTEXT_LENGTH = 4096  # PlamoModel.set_gguf_parameters: "not in config.json"
# read as stated by the converter (hparams[...]: absent, it fails)
_REQUIRED = ("hidden_size", "intermediate_size", "num_attention_heads", "num_hidden_layers", "rms_norm_eps")


def n_shared_head(h: dict) -> int:
    return h.get("n_shared_head", N_SHARED_HEAD)


def n_head_kv(h: dict) -> int:
    """The KV heads the release computes (ceil(num_attention_heads / n_shared_head); check requires it exact)."""
    return h["num_attention_heads"] // n_shared_head(h)


def _query_order(h: dict, src, what: str):
    n_head = h["num_attention_heads"]
    width = n_head * (h["hidden_size"] // n_head)
    if (src.shape[0] if what == "rows" else src.shape[-1]) != width:
        raise CheckpointError(f"tensor {src.name!r} {list(src.shape)}: its {what} should be the {n_head} query heads "
                              f"of {h['hidden_size'] // n_head} (hidden_size {h['hidden_size']})")
    return tiled_kv_grouped(n_head, n_head_kv(h), h["hidden_size"] // n_head)


def _q_grouped(sources: list, h: dict):
    src = sources[0]
    return RowPermutation(src, _query_order(h, src, "rows"),
                          f"query heads regrouped by KV head (tiled over {n_head_kv(h)} KV heads)")


def _o_grouped(sources: list, h: dict):
    src = sources[0]
    return ColumnSelection(src, _query_order(h, src, "columns"),
                           f"columns regrouped by KV head (tiled over {n_head_kv(h)} KV heads)")


def _kv_heads(sources: list, h: dict):
    """k_proj / v_proj as stored, once their rows are the KV heads the config's n_shared_head gives."""
    src = sources[0]
    d = h["hidden_size"] // h["num_attention_heads"]
    if src.shape[0] != n_head_kv(h) * d:
        raise CheckpointError(f"tensor {src.name!r} has {src.shape[0]} rows, not the {n_head_kv(h)} KV heads of {d} "
                              f"that num_attention_heads {h['num_attention_heads']} and n_shared_head "
                              f"{n_shared_head(h)} give: the config does not describe these weights")
    return Stored(src)


_L = "model.layers.layers.{bid}."
TENSORS = (
    Tensor("model.embed_tokens.weight", GGUF.TOKEN_EMBD.weight),
    Tensor("model.norm.weight", GGUF.OUTPUT_NORM.weight),
    Tensor("lm_head.weight", GGUF.OUTPUT.weight),
    Tensor(_L + "norm.weight", GGUF.ATTN_NORM.weight),
    Tensor(_L + "self_attn.q_proj.weight", GGUF.ATTN_Q.weight, view=_q_grouped),
    Tensor(_L + "self_attn.k_proj.weight", GGUF.ATTN_K.weight, view=_kv_heads),
    Tensor(_L + "self_attn.v_proj.weight", GGUF.ATTN_V.weight, view=_kv_heads),
    Tensor(_L + "self_attn.o_proj.weight", GGUF.ATTN_OUT.weight, view=_o_grouped),
    Tensor(_L + "mlp.gate_proj.weight", GGUF.FFN_GATE.weight),
    Tensor(_L + "mlp.up_proj.weight", GGUF.FFN_UP.weight),
    Tensor(_L + "mlp.down_proj.weight", GGUF.FFN_DOWN.weight),
    Skip(_L + "self_attn.rotary_emb.inv_freq"),
)


REFUSE = (
    *(Refuse(key, stated, "missing; the converter reads PLaMo's config.json as written (no "
             "PlamoConfig defaults apply) and fails without it: add it as the release states it") for key in _REQUIRED),
    Refuse("tie_word_embeddings", unset, f"llama.cpp's {ARCH} loads output.weight, which the converter writes only "
           f"from a stored lm_head.weight; use a checkpoint with its own head"),
)


def check(h: dict, path: Path) -> None:
    n_head, shared = h["num_attention_heads"], n_shared_head(h)
    if n_head % shared:
        raise ConfigError(f"{path}: n_shared_head {shared} does not divide num_attention_heads {n_head}: PLaMo "
                          f"tiles ceil({n_head} / {shared}) KV heads over its query heads and cuts the last tile "
                          f"short, which llama.cpp's grouped heads cannot express")
    if h["hidden_size"] % n_head:
        raise ConfigError(f"{path}: num_attention_heads {n_head} does not divide hidden_size {h['hidden_size']} "
                          f"(PLaMo's head width is hidden_size / num_attention_heads)")


def parameters(h: dict, block_count: int, file_type: int) -> list:
    """PlamoModel.set_gguf_parameters' list, in its order (it does not call TextModel's)."""
    return [
        u32(Keys.LLM.CONTEXT_LENGTH.format(arch=ARCH), CONTEXT_LENGTH),
        u32(Keys.LLM.EMBEDDING_LENGTH.format(arch=ARCH), h["hidden_size"]),
        u32(Keys.LLM.FEED_FORWARD_LENGTH.format(arch=ARCH), h["intermediate_size"]),
        u32(Keys.LLM.BLOCK_COUNT.format(arch=ARCH), block_count),
        u32(Keys.Attention.HEAD_COUNT.format(arch=ARCH), h["num_attention_heads"]),
        u32(Keys.Attention.HEAD_COUNT_KV.format(arch=ARCH), n_head_kv(h)),
        f32(Keys.Attention.LAYERNORM_RMS_EPS.format(arch=ARCH), h["rms_norm_eps"]),
        u32(Keys.General.FILE_TYPE, file_type),
    ]


vocab = sentencepiece_only("PLaMo")


FAMILY = Family(
    name="plamo",
    gguf_arch=ARCH,
    architectures=ARCHITECTURES,
    defaults={"plamo": {}},  # no transformers class: nothing is filled in
    reads=READS,
    harmless=HARMLESS,
    tensors=TENSORS,
    parameters=parameters,
    vocab=vocab,
    refuse=REFUSE,
    check=check,
    notes={"shared KV heads": "attn_q rows and attn_output columns regrouped from tiled to grouped KV sharing",
           "hard-coded": "context_length 4096 and head_count_kv num_attention_heads / n_shared_head (5), as the "
                         "converter writes for PLaMo-13B"},
)

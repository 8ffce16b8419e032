"""Nemotron-NAS (DeciLMForCausalLM, model_type nemotron-nas, remote code: Llama-3.1-Nemotron-51B-Instruct,
Llama-3.3-Nemotron-Super-49B-v1 / v1.5, Llama-3.1-Nemotron-Ultra-253B-v1) -> llama.cpp `deci` (the converter's
DeciModel, its block_configs path).

Llama's decoder with a block config per layer: attention with its own KV-head count (num_attention_heads //
n_heads_in_group) or none (no_op: no input_layernorm, no self_attn), and a SwiGLU FFN of its own width
(ffn_mult -> round_up(int(2 * ffn_mult * hidden / 3), 256)) or none (no_op). The per-layer head counts, KV-head
counts and FFN widths are written as arrays; Q/K regrouped into rotation pairs over that layer's heads; Llama 3
rope scaling as the rope_freqs tensor. transformers 5.24 has no class for it, so the converter reads config.json
as written and so does the view.

Attention replaced with a linear layer (replace_with_linear, as Nemotron-51B's: `self_attn.linear_attn`, a
hidden x hidden matrix after input_layernorm) is written as that layer's attn_output with all heads and no KV heads,
which llama.cpp's deci computes as that matrix.

Refused by name: an attention-free layer 0 (llama.cpp reads the head width only where layer 0 has heads), a
layer with attention but no FFN (llama.cpp's deci graph `continue`s past an FFN-free layer
before taking its output, so that layer's attention would be dropped), an FFN replaced with a
linear layer (the converter writes it as an FFN of width 0, which llama.cpp skips), the releases' sparsity and sink/window attention options set, biases, a head
width other than hidden / heads, and a vocabulary other than Llama 3's 128256 (the converter then reads a
SentencePiece-style tokenizer.json, DeciLM-7B's path).
"""
from __future__ import annotations

import re
from pathlib import Path

from ..config import Harmless
from ..errors import CheckpointError, ConfigError
from ..family import Family, Refuse, Tensor, stated, unset
from ..gguf_layout import KV, ValueType
from ..names import GGUF, Keys
from ..params import f32, u32
from ..views import RowPermutation, rotation_pairs
from ._parts.checks import silu_only
from ._parts.rope import llama3_rope_freqs

ARCH = "deci"
ARCHITECTURES = ("DeciLMForCausalLM",)
READS = frozenset({
    "vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads", "head_dim",
    "max_position_embeddings", "rms_norm_eps", "rope_parameters", "rope_scaling", "rope_theta", "hidden_act",
    "tie_word_embeddings", "attention_bias", "mlp_bias", "block_configs",
})
# null in every release: the per-layer block configs state them; the converter's block_configs path reads neither
HARMLESS: Harmless = {"intermediate_size": (None,), "num_key_value_heads": (None,)}

# a block config's keys: those the view reads, and the release's options at the value that changes nothing
_ATTENTION_READ = ("n_heads_in_group", "no_op", "replace_with_linear")
_ATTENTION_OFF = {"sparsify": None, "window_length": None, "num_sink_tokens": None, "unshifted_sink": False,
                  "use_prefill_window_in_sink_attention": False}
_FFN_READ = ("ffn_mult", "no_op", "replace_with_linear")
_FFN_OFF = {"sparsify": None}


def _find_multiple(n: int, k: int) -> int:
    return n if n % k == 0 else n + k - n % k


def ffn_width(ffn_mult: float | None, hidden: int) -> int:
    """The release's _ffn_mult_to_intermediate_size (0 where the layer has no FFN)."""
    return _find_multiple(int(2 * (ffn_mult or 0.0) * hidden / 3), 256)


def kv_heads(h: dict) -> list[int]:
    return [0 if b["attention"].get("n_heads_in_group") is None
            else h["num_attention_heads"] // b["attention"]["n_heads_in_group"] for b in h["block_configs"]]


def linear(block: dict) -> bool:
    """Attention replaced with one hidden x hidden matrix (Nemotron-51B's `self_attn.linear_attn`)."""
    return bool(block["attention"].get("replace_with_linear")) and block["attention"].get("n_heads_in_group") is None


def heads(h: dict) -> list[int]:
    """The converter's: all heads where attention is grouped or linear, none where it is absent."""
    return [0 if b["attention"].get("n_heads_in_group") is None and not linear(b) else h["num_attention_heads"]
            for b in h["block_configs"]]


def ffn_widths(h: dict) -> list[int]:
    return [ffn_width(b["ffn"].get("ffn_mult"), h["hidden_size"]) for b in h["block_configs"]]


def _check_block(i: int, block, path: Path) -> None:
    where = f"{path}: block_configs[{i}]"
    if not isinstance(block, dict) or set(block) - {"attention", "ffn"} or \
            not all(isinstance(block.get(k), dict) for k in ("attention", "ffn")):
        raise ConfigError(f"{where} must be an object with an attention and an ffn object, as the releases write")
    for part, read, off in (("attention", _ATTENTION_READ, _ATTENTION_OFF), ("ffn", _FFN_READ, _FFN_OFF)):
        conf = block[part]
        for key, value in conf.items():
            if key in read:
                continue
            if key not in off:
                raise ConfigError(f"{where}.{part}.{key} (= {value!r}) is not a block-config key hfview knows; it "
                                  f"will not guess whether it changes the model")
            if value != off[key]:
                raise ConfigError(f"{where}.{part}.{key} is {value!r}: the converter writes nothing for it and "
                                  f"llama.cpp's deci computes full causal attention and dense layers only; this "
                                  f"checkpoint would run wrong")
        if part == "ffn" and conf.get("replace_with_linear"):
            raise ConfigError(f"{where}.ffn.replace_with_linear is true: the converter writes a linear FFN as an FFN "
                              f"of width 0, which llama.cpp's deci skips together with the rest of the layer")
        for key in ("no_op", "replace_with_linear"):
            if not isinstance(conf.get(key, False), bool):
                raise ConfigError(f"{where}.{part}.{key} must be true or false, not {conf[key]!r}")
    attention, ffn = block["attention"], block["ffn"]
    group = attention.get("n_heads_in_group")
    if attention.get("no_op", False) and attention.get("replace_with_linear", False):
        raise ConfigError(f"{where}.attention: no_op and replace_with_linear both true: the release builds no "
                          f"attention, the converter writes a linear one")
    if (attention.get("no_op", False) or attention.get("replace_with_linear", False)) != (group is None):
        raise ConfigError(f"{where}.attention: no_op {attention.get('no_op', False)} / replace_with_linear "
                          f"{attention.get('replace_with_linear', False)} with n_heads_in_group {group!r}: the "
                          f"release's attention is grouped exactly when neither is set, and the converter decides by "
                          f"n_heads_in_group alone")
    if group is not None and (not isinstance(group, int) or isinstance(group, bool) or group <= 0):
        raise ConfigError(f"{where}.attention.n_heads_in_group must be a positive integer, not {group!r}")
    mult = ffn.get("ffn_mult")
    if ffn.get("no_op", False) != (mult is None):
        raise ConfigError(f"{where}.ffn: no_op {ffn.get('no_op', False)} with ffn_mult {mult!r}: the release's FFN "
                          f"is absent exactly when no_op, and the converter decides by ffn_mult alone")
    if mult is not None and (not isinstance(mult, (int, float)) or isinstance(mult, bool) or mult <= 0):
        raise ConfigError(f"{where}.ffn.ffn_mult must be a positive number, not {mult!r}")
    if (group is not None or attention.get("replace_with_linear")) and mult is None:
        raise ConfigError(f"{where}: attention without an FFN (ffn no_op): llama.cpp's deci graph skips the rest of "
                          f"an FFN-free layer before taking its output, so this layer's attention would be dropped")


REFUSE = (
    silu_only(ARCH),
    *(Refuse(key, stated, f"missing; the converter reads Nemotron-NAS's config.json as written (no "
             f"config class defaults apply) and llama.cpp's {ARCH} needs it")
      for key in ("vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads", "max_position_embeddings",
                  "rms_norm_eps", "block_configs")),
    Refuse("vocab_size", (128256,), "the converter reads Llama 3's byte-level BPE only at 128256 (every "
           "Nemotron-NAS release), and DeciLM-7B's SentencePiece path otherwise, which the view does not present "
           "for nemotron-nas"),
    *(Refuse(key, unset, f"the view presents Nemotron-NAS without {part} biases (no release has them)")
      for key, part in (("attention_bias", "attention"), ("mlp_bias", "feed-forward"))),
    Refuse("rope_parameters.rope_type", ("default", "llama3"), f"the converter's {ARCH} writes Llama 3's rope factors "
           f"only (no scaling keys), so llama.cpp would compute another rope", default="default"),
)


def check(h: dict, path: Path) -> None:
    blocks = h["block_configs"]
    if not isinstance(blocks, list) or len(blocks) != h["num_hidden_layers"]:
        n = len(blocks) if isinstance(blocks, list) else blocks
        raise ConfigError(f"{path}: block_configs lists {n} layers, num_hidden_layers is {h['num_hidden_layers']}")
    for i, block in enumerate(blocks):
        _check_block(i, block, path)
        group = block["attention"].get("n_heads_in_group")
        if group is not None and h["num_attention_heads"] % group:
            raise ConfigError(f"{path}: block_configs[{i}].attention.n_heads_in_group {group} does not divide "
                              f"num_attention_heads {h['num_attention_heads']}")
    if heads(h)[0] == 0:
        raise ConfigError(f"{path}: block_configs[0] has no attention: llama.cpp takes the head width (key_length) "
                          f"only where layer 0 has heads, and loads no attention tensors otherwise (every release's "
                          f"layer 0 has attention)")
    if h["hidden_size"] % h["num_attention_heads"] or h.get("head_dim") not in (
            None, h["hidden_size"] // h["num_attention_heads"]):
        raise ConfigError(f"{path}: head_dim {h.get('head_dim')!r} with hidden_size {h['hidden_size']} over "
                          f"{h['num_attention_heads']} heads: the converter writes the head width as hidden / heads")


def _layer(name: str) -> int:
    return int(re.search(r"layers\.(\d+)\.", name).group(1))


def _pairs(per_layer):
    """Q/K rows regrouped into rotation pairs over this layer's head count (the converter's DeciModel.permute)."""
    def make(sources, h):
        src = sources[0]
        n = per_layer(h)[_layer(src.name)]
        if n == 0 or src.shape[0] % (2 * n):
            raise CheckpointError(f"tensor {src.name!r} has {src.shape[0]} rows, which do not split into {n} heads "
                                  f"of rotation pairs (block_configs says {n} for this layer)")
        return RowPermutation(src, rotation_pairs(src.shape[0], n), f"rotation pairs over {n} heads")
    return make


_L = "model.layers.{bid}."
TENSORS = (
    Tensor("model.embed_tokens.weight", GGUF.TOKEN_EMBD.weight),
    Tensor("model.norm.weight", GGUF.OUTPUT_NORM.weight),
    Tensor("lm_head.weight", GGUF.OUTPUT.weight, required=False),
    # each present only in the layers whose block config has that half (stored_hparams checks which)
    Tensor(_L + "input_layernorm.weight", GGUF.ATTN_NORM.weight, required=False),
    Tensor(_L + "self_attn.q_proj.weight", GGUF.ATTN_Q.weight, _pairs(heads), required=False),
    Tensor(_L + "self_attn.k_proj.weight", GGUF.ATTN_K.weight, _pairs(kv_heads), required=False),
    Tensor(_L + "self_attn.v_proj.weight", GGUF.ATTN_V.weight, required=False),
    Tensor(_L + "self_attn.o_proj.weight", GGUF.ATTN_OUT.weight, required=False),
    Tensor(_L + "self_attn.linear_attn.weight", GGUF.ATTN_OUT.weight, required=False),
    Tensor(_L + "post_attention_layernorm.weight", GGUF.FFN_NORM.weight, required=False),
    *(Tensor(_L + f"mlp.{p}_proj.weight", f"blk.{{bid}}.ffn_{p}.weight", required=False)
      for p in ("gate", "up", "down")),
)
_ATTENTION = ("input_layernorm", "self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn.o_proj")
_LINEAR = ("input_layernorm", "self_attn.linear_attn")
_FFN = ("post_attention_layernorm", "mlp.gate_proj", "mlp.up_proj", "mlp.down_proj")


def _layer_tensors(n_kv: int, n_head: int, n_ff: int) -> set[str]:
    attention = _ATTENTION if n_kv else _LINEAR if n_head else ()
    return {*attention, *(_FFN if n_ff else ())}


def stored_hparams(h: dict, stored: dict) -> dict:
    """Each layer stores exactly the halves its block config has: the release builds no module for a no_op half."""
    every = {*_ATTENTION, *_LINEAR, *_FFN}
    for i, counts in enumerate(zip(kv_heads(h), heads(h), ffn_widths(h))):
        wanted = _layer_tensors(*counts)
        for part in sorted(every):
            name = f"model.layers.{i}.{part}.weight"
            if (name in stored) != (part in wanted):
                state = "stores" if name in stored else "lacks"
                kind = "grouped attention" if counts[0] else "linear attention" if counts[1] else "no attention"
                raise CheckpointError(f"tensor {name!r}: layer {i} {state} it, but block_configs[{i}] gives the "
                                      f"layer {kind} and {'an FFN' if counts[2] else 'no FFN'}")
    return h


def parameters(h: dict, block_count: int, file_type: int) -> list:
    """DeciModel.set_gguf_parameters (block_configs): per-layer KV heads, heads and FFN widths as arrays."""
    a = ARCH
    rope = h.get("rope_parameters") or {}
    head_width = h["hidden_size"] // h["num_attention_heads"]
    kv = [f32(Keys.Rope.FREQ_BASE.format(arch=a), rope["rope_theta"])] if rope.get("rope_theta") is not None else []
    return [*kv,
            KV(Keys.Attention.HEAD_COUNT_KV.format(arch=a), ValueType.ARRAY, kv_heads(h), ValueType.INT32),
            KV(Keys.Attention.HEAD_COUNT.format(arch=a), ValueType.ARRAY, heads(h), ValueType.INT32),
            KV(Keys.LLM.FEED_FORWARD_LENGTH.format(arch=a), ValueType.ARRAY, ffn_widths(h), ValueType.INT32),
            u32(Keys.LLM.BLOCK_COUNT.format(arch=a), block_count),
            u32(Keys.LLM.CONTEXT_LENGTH.format(arch=a), h["max_position_embeddings"]),
            u32(Keys.LLM.EMBEDDING_LENGTH.format(arch=a), h["hidden_size"]),
            f32(Keys.Attention.LAYERNORM_RMS_EPS.format(arch=a), h["rms_norm_eps"]),
            u32(Keys.Attention.KEY_LENGTH.format(arch=a), head_width),
            u32(Keys.Attention.VALUE_LENGTH.format(arch=a), head_width),
            u32(Keys.General.FILE_TYPE, file_type),
            u32(Keys.LLM.VOCAB_SIZE.format(arch=a), h["vocab_size"]),
            u32(Keys.Rope.DIMENSION_COUNT.format(arch=a), h.get("head_dim") or head_width)]


def vocab(model_dir: Path, h: dict) -> list:
    from hfview.tokenizer.vocab import gpt2_vocab
    return gpt2_vocab(model_dir, h)


FAMILY = Family(
    name="deci",
    gguf_arch=ARCH,
    architectures=ARCHITECTURES,
    defaults={"nemotron-nas": {}},
    reads=READS,
    harmless=HARMLESS,
    tensors=TENSORS,
    parameters=parameters,
    vocab=vocab,
    generated=llama3_rope_freqs,
    refuse=REFUSE,
    check=check,
    stored_hparams=stored_hparams,
    notes={"block_configs": "per layer: attention with num_attention_heads // n_heads_in_group KV heads or none, "
                            "an FFN of width round_up(2 * ffn_mult * hidden / 3, 256) or none"},
)

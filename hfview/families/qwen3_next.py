"""Qwen3-Next (Qwen3NextForCausalLM: Qwen3-Next-80B-A3B Instruct / Thinking) -> llama.cpp `qwen3next` (the
converter's Qwen3NextModel, derived from its Qwen2MoeModel).

A hybrid: the layers layer_types calls "linear_attention" run Gated DeltaNet (one fused in_proj_qkvz stored key head
by key head, [q, k, v, z] each, which the converter splits into attn_qkv, all q then all k then all v, and
attn_gate, the z rows; in_proj_ba as stored; a causal depthwise conv1d, squeezed; A = -exp(A_log); dt_bias as the
ssm_dt bias; a gated RMSNorm over each value head; out_proj), the others gated full attention (q_proj carries the
query and its output gate, per-head Q/K RMSNorms, rope over partial_rotary_factor of each head, NeoX order: nothing
permuted). Every layer ends in Qwen2-MoE's mixture with a sigmoid-gated shared expert. Qwen3-Next's RMSNorms scale
by (1 + w): each is stored as the offset, and the converter writes 1 + w (all but the gated DeltaNet norm).

The released checkpoints carry a multi-token-prediction layer (mtp.*), which transformers ignores; the converter
writes it unless --no-mtp (and without --no-mtp stops on a checkpoint that has none). The view presents it as the
converter writes it: mtp.layers.{i}.* as block num_hidden_layers + i (a full-attention layer with its mixture, under
the trunk's rules: blk.{n}.*), mtp.fc / pre_fc_norm_embedding / pre_fc_norm_hidden / norm as that block's
nextn.eh_proj / enorm / hnorm / shared_head_norm ((1 + w) norms, as the trunk's), block_count counting the MTP
blocks, nextn_predict_layers, and recurrent_layers false for them; llama.cpp runs the trunk alone, as transformers
does. A checkpoint without mtp.* tensors (as transformers saves one) is presented as --no-mtp converts it.
"""
from __future__ import annotations

import re
from pathlib import Path

import numpy as np

from ..config import Harmless
from ..errors import CheckpointError, ConfigError
from ..family import Family, Split, Tensor, converter_name, stored
from ..gguf_layout import KV, ValueType
from ..params import u32
from ..views import NEG_EXP, OFFSET_ONE, RowSelection
from .mamba import squeezed
from .qwen2 import check_architecture, check_no_pooling, check_rope, check_silu
from .qwen2_moe import (LM_HEAD, SHARED_EXPERT, check_every_layer_a_mixture, check_topk_norm, gpt2_vocab,
                        mixture_parameters, mixture_tensors)

# transformers 5.24's Qwen3NextConfig defaults (layer_types is computed from full_attention_interval: see normalise)
DEFAULTS = {
    "qwen3_next": dict(vocab_size=151936, hidden_size=2048, intermediate_size=5632, num_hidden_layers=48,
                       num_attention_heads=16, num_key_value_heads=2, hidden_act="silu", max_position_embeddings=32768,
                       initializer_range=0.02, rms_norm_eps=1e-06, use_cache=True, tie_word_embeddings=False,
                       rope_parameters={"rope_theta": 10000.0, "partial_rotary_factor": 0.25, "rope_type": "default"},
                       attention_bias=False, attention_dropout=0.0, head_dim=256, linear_conv_kernel_dim=4,
                       linear_key_head_dim=128, linear_value_head_dim=128, linear_num_key_heads=16,
                       linear_num_value_heads=32, decoder_sparse_step=1, moe_intermediate_size=512,
                       shared_expert_intermediate_size=512, num_experts_per_tok=10, num_experts=512,
                       norm_topk_prob=True, output_router_logits=False, router_aux_loss_coef=0.001,
                       mlp_only_layers=[], layer_types=None, pad_token_id=None, bos_token_id=None, eos_token_id=None),
}

READS = frozenset({
    "vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads",
    "num_key_value_heads", "head_dim", "max_position_embeddings", "rms_norm_eps", "rope_parameters", "rope_scaling",
    "rope_theta", "partial_rotary_factor", "hidden_act", "tie_word_embeddings", "attention_bias",
    "linear_conv_kernel_dim", "linear_key_head_dim", "linear_value_head_dim", "linear_num_key_heads",
    "linear_num_value_heads", "layer_types", "full_attention_interval",
    "num_experts", "num_experts_per_tok", "moe_intermediate_size", "shared_expert_intermediate_size",
    "norm_topk_prob", "decoder_sparse_step", "mlp_only_layers",  # checked: every layer a mixture
    "mtp_num_hidden_layers",  # the MTP block count where stated (Qwen3-Next's releases state none: the tensors say)
})
# Qwen3-Next-80B-A3B's config states it false; Qwen3NextConfig does not define it and no layer slides
HARMLESS: Harmless = {"use_sliding_window": (False,)}

_L = "model.layers.{bid}."
_OPTIONAL = dict(required=False)  # on the layers of one kind only (check() places the kinds)


def qkvz_rows(h: dict, part: str) -> np.ndarray:
    """Rows of in_proj_qkvz ([key head][q, k, v, z] stored) as the converter splits them: for "qkv" every key head's
    q rows, then every head's k rows, then v rows; for "z" every head's z rows."""
    hk, nk = h["linear_key_head_dim"], h["linear_num_key_heads"]
    hv = h["linear_num_value_heads"] // nk * h["linear_value_head_dim"]
    heads = np.arange(nk * (2 * hk + 2 * hv)).reshape(nk, 2 * hk + 2 * hv)
    q, k, v, z = heads[:, :hk], heads[:, hk:2 * hk], heads[:, 2 * hk:2 * hk + hv], heads[:, 2 * hk + hv:]
    return np.concatenate([q.reshape(-1), k.reshape(-1), v.reshape(-1)]) if part == "qkv" else z.reshape(-1)


def _qkvz_part(part: str):
    def make(sources, h):
        src = sources[0]
        rows = qkvz_rows(h, part)
        total = h["linear_num_key_heads"] * (2 * h["linear_key_head_dim"]) + 2 * h["linear_num_value_heads"] * \
            h["linear_value_head_dim"]
        if src.shape[0] != total:
            raise ConfigError(f"tensor {src.name!r} has {src.shape[0]} rows; the config's linear-attention heads "
                              f"need {total}")
        return RowSelection(src, rows, f"the {part} rows of each key head's [q, k, v, z]")
    return make


def on(kind: str, make=stored):
    """The view of a tensor that belongs to a layer of one kind ("linear_attention" / "full_attention"): refused
    where layer_types gives its layer the other kind (the config does not describe these weights)."""
    def check_kind(sources, h):
        src = sources[0]
        bid = int(re.search(r"layers\.(\d+)\.", mtp_rename(converter_name(src.name), h)).group(1))  # MTP: past n
        if bid < len(h["layer_types"]) and h["layer_types"][bid] != kind:
            raise CheckpointError(f"{src.path.name}: tensor {src.name!r} belongs to a {kind} layer, but layer_types "
                                  f"makes layer {bid} {h['layer_types'][bid]}: the config does not describe these "
                                  f"weights")
        return make(sources, h)
    return check_kind


_LIN = on("linear_attention")


# ---------------------------------------------------------------- the multi-token-prediction layers
# (shared with Qwen3.5). The converter takes them under mtp. or model.mtp.; it reads mtp.layers.{i}.* (a full-attention
# decoder layer of the family's own kind) as model.layers.{num_hidden_layers + i}.*, and the layer's own tensors
# as that first MTP block's nextn tensors; then its tensor rules apply to them as to the trunk's.
MTP_LAYERS = "mtp layers (stored)"  # the hparams entry mtp_layers adds: how many MTP blocks the converter writes
_MTP_OWN = {"fc": "eh_proj", "pre_fc_norm_embedding": "enorm", "pre_fc_norm_hidden": "hnorm",
            "norm": "shared_head.norm"}


def _mtp_parts(name: str) -> list[str] | None:
    """A stored name under mtp. or model.mtp. split as the converter splits it (None: not an MTP tensor)."""
    name = name.removeprefix("model.") if name.startswith("model.mtp.") else name
    return name.split(".", 3) if name.startswith("mtp.") else None


def _mtp_layer(parts: list[str]) -> int | None:
    return int(parts[2]) if len(parts) == 4 and parts[1] == "layers" and parts[2].isdecimal() else None


def mtp_rename(name: str, h: dict) -> str:
    """The converter's MTP renames: mtp.layers.{i}.X -> model.layers.{n + i}.X, mtp.fc / pre_fc_norm_embedding /
    pre_fc_norm_hidden / norm -> model.layers.{n}.eh_proj / enorm / hnorm / shared_head.norm (n: num_hidden_layers);
    model.mtp.* read as mtp.*; any other mtp.* name is kept (refused by name below: the converter cannot map it)."""
    parts = _mtp_parts(name)
    if parts is None:
        return name
    n = h["num_hidden_layers"]
    if (i := _mtp_layer(parts)) is not None:
        return f"model.layers.{n + i}.{parts[3]}"
    if len(parts) == 3 and parts[1] in _MTP_OWN:
        return f"model.layers.{n}.{_MTP_OWN[parts[1]]}.{parts[2]}"
    return ".".join(parts)


def mtp_layers(h: dict, stored: dict) -> dict:
    """The MTP block count the converter writes without --no-mtp: mtp_num_hidden_layers where the config states one,
    else one more than the highest stored mtp.layers.{i}. A checkpoint with no mtp.* tensor (as transformers saves
    one) is presented as --no-mtp converts it: 0 (the converter without --no-mtp stops on it)."""
    names = [n for n in stored if _mtp_parts(converter_name(n)) is not None]
    if not names:
        return {**h, MTP_LAYERS: 0}
    found = [i for n in names if (i := _mtp_layer(_mtp_parts(converter_name(n)))) is not None]
    count = h.get("mtp_num_hidden_layers") or (max(found) + 1 if found else 0)
    if not count:
        raise CheckpointError(f"{stored[names[0]].path.name}: tensor {names[0]!r} is part of a multi-token-prediction "
                              f"layer, but the checkpoint stores no mtp.layers.{{i}}.* decoder tensors and the config "
                              f"states no mtp_num_hidden_layers: the converter finds no MTP layer to write and stops; "
                              f"remove the mtp.* tensors to run the trunk as --no-mtp converts it")
    if found and max(found) >= count:
        raise ConfigError(f"mtp_num_hidden_layers {count}, but the checkpoint stores MTP layer {max(found)} "
                          f"(mtp.layers.{max(found)}.*): the converter would place it past its {count} MTP blocks")
    return {**h, MTP_LAYERS: count}


def extra_mtp_blocks(h: dict) -> int:
    return h.get(MTP_LAYERS, 0)


def _mtp_unknown(sources, h):
    raise CheckpointError(f"{sources[0].path.name}: tensor {sources[0].name!r} is a multi-token-prediction tensor "
                          f"the converter does not map (it maps mtp.layers.{{i}}.*, mtp.fc, mtp.pre_fc_norm_embedding, "
                          f"mtp.pre_fc_norm_hidden and mtp.norm) and would stop on")


# the MTP layer's own tensors, as the converter names them after its renames (its (1 + w) norms as the trunk's)
NEXTN_TENSORS = (
    Tensor("mtp.{rest}", "mtp", _mtp_unknown, required=False),
    Tensor(_L + "eh_proj.weight", "blk.{bid}.nextn.eh_proj.weight", required=False),
    Tensor(_L + "enorm.weight", "blk.{bid}.nextn.enorm.weight", steps=(OFFSET_ONE,), required=False),
    Tensor(_L + "hnorm.weight", "blk.{bid}.nextn.hnorm.weight", steps=(OFFSET_ONE,), required=False),
    Tensor(_L + "shared_head.norm.weight", "blk.{bid}.nextn.shared_head_norm.weight", steps=(OFFSET_ONE,),
           required=False),
)

TENSORS = (
    *NEXTN_TENSORS,
    Tensor("model.embed_tokens.weight", "token_embd.weight"),
    Tensor("model.norm.weight", "output_norm.weight", steps=(OFFSET_ONE,)),
    LM_HEAD,
    Tensor(_L + "input_layernorm.weight", "blk.{bid}.attn_norm.weight", steps=(OFFSET_ONE,)),
    Tensor(_L + "post_attention_layernorm.weight", "blk.{bid}.post_attention_norm.weight", steps=(OFFSET_ONE,)),
    # full-attention layers (q_proj: the query and its output gate, per head)
    *(Tensor(_L + f"self_attn.{p}_proj.weight", f"blk.{{bid}}.attn_{g}.weight", on("full_attention"), **_OPTIONAL)
      for p, g in (("q", "q"), ("k", "k"), ("v", "v"), ("o", "output"))),
    *(Tensor(_L + f"self_attn.{p}_norm.weight", f"blk.{{bid}}.attn_{p}_norm.weight", on("full_attention"),
             steps=(OFFSET_ONE,), **_OPTIONAL) for p in ("q", "k")),
    # Gated DeltaNet layers
    Tensor(_L + "linear_attn.A_log", "blk.{bid}.ssm_a", _LIN, steps=(NEG_EXP,), **_OPTIONAL),
    Tensor(_L + "linear_attn.conv1d.weight", "blk.{bid}.ssm_conv1d.weight", on("linear_attention", squeezed),
           **_OPTIONAL),
    Tensor(_L + "linear_attn.dt_bias", "blk.{bid}.ssm_dt.bias", _LIN, **_OPTIONAL),
    Tensor(_L + "linear_attn.in_proj_ba.weight", "blk.{bid}.ssm_ba.weight", _LIN, **_OPTIONAL),
    Split(_L + "linear_attn.in_proj_qkvz.weight",
          (("blk.{bid}.attn_qkv.weight", on("linear_attention", _qkvz_part("qkv"))),
           ("blk.{bid}.attn_gate.weight", on("linear_attention", _qkvz_part("z")))), **_OPTIONAL),
    Tensor(_L + "linear_attn.norm.weight", "blk.{bid}.ssm_norm.weight", _LIN, **_OPTIONAL),  # gated: no offset
    Tensor(_L + "linear_attn.out_proj.weight", "blk.{bid}.ssm_out.weight", _LIN, **_OPTIONAL),
    *mixture_tensors("num_experts"),
    *SHARED_EXPERT,
)


def normalise(h: dict) -> dict:
    """Qwen3NextConfig's constructor: layer_types from full_attention_interval (default 4) where none is stated,
    partial_rotary_factor (default 0.25) read into rope_parameters."""
    if h.get("num_key_value_heads") is None:
        h["num_key_value_heads"] = h["num_attention_heads"]
    if h.get("layer_types") is None:
        interval = h.get("full_attention_interval", 4)
        h["layer_types"] = ["linear_attention" if (i + 1) % interval else "full_attention"
                            for i in range(h["num_hidden_layers"])]
    rope = h["rope_parameters"]
    rope.setdefault("partial_rotary_factor", h.get("partial_rotary_factor", 0.25))
    return h


def check(h: dict, path: Path) -> None:
    check_architecture(h, path, "qwen3_next", ("Qwen3NextForCausalLM",))
    check_silu(h, path, "qwen3next")
    check_rope(h, path, "qwen3next")
    check_no_pooling(path)
    check_every_layer_a_mixture(h, path, "qwen3next", "num_experts")
    check_topk_norm(h, path, "qwen3next", True)
    check_hybrid(h, path, "qwen3next")


def check_hybrid(h: dict, path: Path, arch: str) -> None:
    """What the Gated DeltaNet hybrids (qwen3next, qwen35, qwen35moe) share: one known kind per layer, value heads
    as wide as key heads and a whole number per key head, no attention biases, an even rope width."""
    types = list(h["layer_types"])
    if len(types) != h["num_hidden_layers"] or set(types) - {"linear_attention", "full_attention"}:
        raise ConfigError(f"{path}: layer_types {types}: {arch} needs one of 'linear_attention' / "
                          f"'full_attention' per layer ({h['num_hidden_layers']} layers)")
    if h["linear_value_head_dim"] != h["linear_key_head_dim"]:
        raise ConfigError(f"{path}: linear_value_head_dim {h['linear_value_head_dim']} != linear_key_head_dim "
                          f"{h['linear_key_head_dim']}: llama.cpp's {arch} takes both widths from ssm.state_size, "
                          f"so this checkpoint would run wrong")
    if h["linear_num_value_heads"] % h["linear_num_key_heads"]:
        raise ConfigError(f"{path}: linear_num_value_heads {h['linear_num_value_heads']} is not a multiple of "
                          f"linear_num_key_heads {h['linear_num_key_heads']}: each key head needs a whole number "
                          f"of value heads")
    if h.get("attention_bias"):
        raise ConfigError(f"{path}: attention_bias true: llama.cpp's {arch} has no attention biases")
    if int(h["head_dim"] * h["rope_parameters"]["partial_rotary_factor"]) % 2:
        raise ConfigError(f"{path}: head_dim x partial_rotary_factor is odd: rotation pairs need an even count")


def hybrid_parameters(h: dict, arch: str, block_count: int, file_type: int) -> list:
    """Qwen2MoeModel's entries (expert widths where stated), then the Gated DeltaNet widths, which layers are
    recurrent, the attention interval (the converter's 4 whatever the config says: transformers does not keep the
    key, and llama.cpp reads the recurrent layers instead) and the rope width."""
    kv = mixture_parameters(arch)(h, block_count, file_type)
    mtp = block_count - h["num_hidden_layers"]  # the MTP blocks: counted after the mixture's entries, not recurrent
    if mtp > 0:
        kv.append(u32(f"{arch}.nextn_predict_layers", mtp))
    rope_dim = h.get("head_dim") or h["hidden_size"] // h["num_attention_heads"]
    return kv + [
        u32(f"{arch}.ssm.conv_kernel", h["linear_conv_kernel_dim"]),
        u32(f"{arch}.ssm.state_size", h["linear_key_head_dim"]),
        u32(f"{arch}.ssm.group_count", h["linear_num_key_heads"]),
        u32(f"{arch}.ssm.time_step_rank", h["linear_num_value_heads"]),
        u32(f"{arch}.ssm.inner_size", h["linear_value_head_dim"] * h["linear_num_value_heads"]),
        KV(f"{arch}.attention.recurrent_layers", ValueType.ARRAY,
           [t == "linear_attention" for t in h["layer_types"]] + [False] * mtp, ValueType.BOOL),
        u32(f"{arch}.full_attention_interval", 4),
        u32(f"{arch}.rope.dimension_count", int(rope_dim * h["rope_parameters"]["partial_rotary_factor"])),
    ]


def parameters(h: dict, block_count: int, file_type: int) -> list:
    return hybrid_parameters(h, "qwen3next", block_count, file_type)


FAMILY = Family(
    name="qwen3_next",
    gguf_arch="qwen3next",
    architectures=("Qwen3NextForCausalLM",),
    defaults=DEFAULTS,
    reads=READS,
    harmless=HARMLESS,
    tensors=TENSORS,
    parameters=parameters,
    vocab=gpt2_vocab,
    check=check,
    normalise=normalise,
    extra_blocks=extra_mtp_blocks,
    stored_hparams=mtp_layers,
    rename=mtp_rename,
)

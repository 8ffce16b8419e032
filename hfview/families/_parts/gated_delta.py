"""Qwen3-Next's hybrid of Gated DeltaNet and full-attention layers: which layer is which (layer_types), the
tensors of one kind of layer, the checks and the ssm KV llama.cpp's qwen3next-style graphs read."""
from __future__ import annotations

import re
from pathlib import Path

from ...errors import CheckpointError, ConfigError
from ...family import converter_name, stored
from ...gguf_layout import KV, ValueType
from ...names import Keys
from ...params import u32
from .mixture import mixture_parameters
from .nextn import mtp_rename


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


def hybrid_normalise(h: dict) -> dict:
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
        kv.append(u32(Keys.LLM.NEXTN_PREDICT_LAYERS.format(arch=arch), mtp))
    rope_dim = h.get("head_dim") or h["hidden_size"] // h["num_attention_heads"]
    return kv + [
        u32(Keys.SSM.CONV_KERNEL.format(arch=arch), h["linear_conv_kernel_dim"]),
        u32(Keys.SSM.STATE_SIZE.format(arch=arch), h["linear_key_head_dim"]),
        u32(Keys.SSM.GROUP_COUNT.format(arch=arch), h["linear_num_key_heads"]),
        u32(Keys.SSM.TIME_STEP_RANK.format(arch=arch), h["linear_num_value_heads"]),
        u32(Keys.SSM.INNER_SIZE.format(arch=arch), h["linear_value_head_dim"] * h["linear_num_value_heads"]),
        KV(Keys.Attention.RECURRENT_LAYERS.format(arch=arch), ValueType.ARRAY,
           [t == "linear_attention" for t in h["layer_types"]] + [False] * mtp, ValueType.BOOL),
        u32(Keys.LLM.FULL_ATTENTION_INTERVAL.format(arch=arch), 4),
        u32(Keys.Rope.DIMENSION_COUNT.format(arch=arch), int(rope_dim * h["rope_parameters"]["partial_rotary_factor"])),
    ]

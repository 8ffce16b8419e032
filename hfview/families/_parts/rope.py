"""Rotary-embedding tensors the converter computes from the config."""
from __future__ import annotations

import math

import numpy as np

from ...names import GGUF
from .decoder import head_dim

f32 = np.float32


def llama3_rope_factors(rope: dict, head_dim: int) -> np.ndarray:
    """Llama 3's per-frequency rope scaling factors (GGUF `rope_freqs.weight`).

    Computed in float32 step by step as the converter computes them with torch, so the bytes agree.
    One exception: base**(2i/d) is correctly rounded here, while torch's vectorised float32 pow is
    sometimes one unit in the last place off it (it depends on the CPU's vector unit), which moves that
    factor by an ulp too; the difference is far below the rope's own float32 error.
    """
    base = rope.get("rope_theta", 10000.0)
    factor = rope.get("factor", 8.0)
    low = rope.get("low_freq_factor", 1.0)
    high = rope.get("high_freq_factor", 4.0)
    old_ctx = rope.get("original_max_position_embeddings", 8192)
    exponents = np.arange(0, head_dim, 2, dtype=f32) / f32(head_dim)
    freqs = f32(1.0) / np.power(np.float64(base), exponents.astype(np.float64)).astype(f32)
    low_wavelen, high_wavelen = old_ctx / low, old_ctx / high
    factors = []
    for freq in freqs:
        wavelen = (f32(1) / freq) * f32(2 * math.pi)  # torch evaluates c / t as (1 / t) * c
        if wavelen < f32(high_wavelen):
            factors.append(f32(1))
        elif wavelen > f32(low_wavelen):
            factors.append(f32(factor))
        else:
            smooth = ((f32(1) / wavelen) * f32(old_ctx) - f32(low)) / f32(high - low)
            factors.append(f32(1) / ((f32(1) - smooth) / f32(factor) + smooth))
    return np.array(factors, dtype=f32)


def llama3_rope_freqs(h: dict) -> list:
    """LlamaModel.generate_extra_tensors: rope_freqs.weight where the rope is Llama 3's, else nothing."""
    rope = h["rope_parameters"].get("full_attention", h["rope_parameters"])
    if rope.get("rope_type", "").lower() == "llama3":
        return [(GGUF.ROPE_FREQS.weight, llama3_rope_factors(rope, head_dim(h)))]
    return []

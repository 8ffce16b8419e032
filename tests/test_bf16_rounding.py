"""f32 -> bf16 as ggml rounds it (gguf-py's BF16.quantize_blocks, written after ggml_compute_fp32_to_bf16), over
every kind of float32 bit pattern: halfway cases both ways, the largest finite values, infinities, quiet and
signalling NaNs of both signs."""
from __future__ import annotations

import numpy as np
from gguf.quants import BF16
from hypothesis import given, settings, strategies as st

from hfview.views import bf16_bits

_EDGES = [0x00000000, 0x80000000, 0x00008000, 0x00018000, 0x3F808000, 0x3F818000, 0x7F7FFFFF, 0xFF7FFFFF,
          0x7F800000, 0xFF800000, 0x7F800001, 0xFF800001, 0x7FC00000, 0xFFFFFFFF, 0x7FFF8000, 0xFFFF8001]


def _ggml(bits: np.ndarray) -> np.ndarray:
    return BF16.quantize_blocks(bits.view(np.float32).reshape(-1, 1)).view(np.uint16).reshape(-1)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.one_of(st.integers(0, 0xFFFFFFFF), st.sampled_from(_EDGES)), min_size=1, max_size=64))
def test_bf16_bits_round_as_ggml(words):
    bits = np.array(words, np.uint32)
    assert np.array_equal(bf16_bits(bits.view(np.float32)), _ggml(bits))


def test_bf16_bits_keep_the_shape():
    values = np.arange(12, dtype=np.float32).reshape(3, 4) / 7
    assert bf16_bits(values).shape == (3, 4)

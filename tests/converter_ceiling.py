"""Logits held to a measured ceiling: llama.cpp running the pinned converter's own file of a fixture, against
the reference, where that file misses the ordinary bar (its 16-bit activations over many layers, a router
choice flipped by rounding). The view's bytes equal the file's (the export oracle), so its logits must miss by
no more; the ceiling is measured on every run and must itself miss the bar, else the test says to drop it."""
from __future__ import annotations

from pathlib import Path

import numpy as np


class GGUFFile:
    """A GGUF file as a byte source: llama.cpp reads the converter's own file as it reads the view."""

    def __init__(self, path: Path):
        self.path, self.size = path, path.stat().st_size

    def read(self, offset: int, n: int) -> bytes:
        with open(self.path, "rb") as f:
            f.seek(offset)
            return f.read(n)


def llama_cpp_logits(source, ids=None) -> tuple[list[int], np.ndarray]:
    from family_oracle import PROMPT
    from hfview.runner.stream import StreamModel

    with StreamModel(source, n_ctx=64) as m:
        ids = ids or m.tokenize(PROMPT)[:16]
        assert len(ids) == 16
        return ids, m.logits(ids)


def check_within_ceiling(name: str, outtype: str, checkpoint, converted, reference) -> tuple[float, float]:
    """`reference(path, ids)` -> the reference logits. Returns (view NMSE, measured ceiling)."""
    from family_oracle import NMSE_BAR, nmse
    from hfview import HfCheckpoint

    path = checkpoint(name)
    ids, ours = llama_cpp_logits(HfCheckpoint(path, outtype))
    _, theirs = llama_cpp_logits(GGUFFile(converted(name, outtype)), ids)
    ref = reference(path, ids)
    ceiling, value = nmse(theirs, ref), nmse(ours, ref)
    print(f"{name} {outtype}: NMSE {value:.3e}, measured ceiling (converter's file) {ceiling:.3e}")
    assert ceiling > NMSE_BAR, f"the converter's file now meets the ordinary bar ({ceiling:.3e}): drop this ceiling"
    assert value <= ceiling * (1 + 1e-6), f"view {value:.3e} > the converter's file {ceiling:.3e}"
    return value, ceiling

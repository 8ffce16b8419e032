"""torch's exponential, as the converter computes A = -exp(A_log), without importing torch on every load.

torch's vectorised exp is not correctly rounded (45 of the 65,536 bf16 inputs come out one unit in the last place
off on an AVX2 CPU here), so the converter's bits are torch's, and which bits depends on the kernel torch picks for
the CPU. Importing torch to compute a few hundred values cost 4 s of a 12 s first-logits run of a 1 GB hybrid
(bench/load.py --family granitemoehybrid) and 200 MB of RSS. For 16-bit inputs (bf16 values, which the converter
widens to f32, and f16) there are only 65,536 of them: this machine's torch computes exp for all of them once, and
the table is kept in hfview's cache (HFVIEW_CACHE, default ~/.cache/hfview), keyed by torch's version and what
selects its kernel (ATEN_CPU_CAPABILITY and the CPU's flags). Other inputs (f32 checkpoints) ask torch itself.
"""
from __future__ import annotations

import functools
import hashlib
import os
import platform

import numpy as np

from .cache import cache_dir, write_whole


def torch_exp(x: np.ndarray) -> np.ndarray | None:
    """exp(x) as this machine's torch computes it (x: f32 or f16 working values); None where torch is not
    installed (or cannot be imported: a None in sys.modules, as a test or an embedding application may set)."""
    import importlib.util

    try:
        if importlib.util.find_spec("torch") is None:  # finds it without importing it
            return None
    except ValueError:  # a torch in sys.modules without a spec: ask it
        return _torch(x)
    if x.dtype == np.float16:
        table, index = _table("f16"), np.ascontiguousarray(x).view(np.uint16)
    elif x.dtype == np.float32 and not (np.ascontiguousarray(x).view(np.uint32) & 0xFFFF).any():
        table, index = _table("bf16"), np.ascontiguousarray(x).view(np.uint32) >> 16
    else:
        return _torch(x)
    return _torch(x) if table is None else table[index]


def _torch(x: np.ndarray) -> np.ndarray | None:
    try:
        import torch
    except ImportError:
        return None
    return torch.exp(torch.from_numpy(np.array(x))).numpy()  # a copy: stored bytes are read-only


def _all_inputs(kind: str) -> np.ndarray:
    """Every 16-bit input, in the order of its bits: bf16 values as the f32 the converter widens them to, or f16."""
    if kind == "f16":
        return np.arange(1 << 16, dtype=np.uint32).astype(np.uint16).view(np.float16)
    return (np.arange(1 << 16, dtype=np.uint32) << 16).view(np.float32)


@functools.lru_cache(maxsize=None)
def _table(kind: str) -> np.ndarray | None:
    """exp of every 16-bit input as this machine's torch computes it, from the cache or computed (and cached) now;
    None where torch is not installed."""
    from importlib import metadata

    try:
        version = metadata.version("torch")
    except metadata.PackageNotFoundError:
        return None
    path = cache_dir() / "exp-tables" / f"torch-{version}-{_kernel_key()}-{kind}.npy"
    dtype = np.float16 if kind == "f16" else np.float32
    try:
        table = np.load(path, allow_pickle=False)
        if table.dtype == dtype and table.shape == (1 << 16,):
            return table
    except (OSError, ValueError):
        pass
    table = _torch(_all_inputs(kind))
    if table is None:  # the package's metadata without an importable torch
        return None
    write_whole(path, lambda f: np.save(f, table, allow_pickle=False))  # unwritable: it still serves this process
    return table


def _kernel_key() -> str:
    """What picks torch's CPU kernel: ATEN_CPU_CAPABILITY where set, else the CPU's feature flags."""
    flags = ""
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as info:
            flags = next((line for line in info if line.startswith(("flags", "Features"))), "")
    except OSError:
        flags = platform.processor()
    seed = "\n".join((platform.machine(), os.environ.get("ATEN_CPU_CAPABILITY", ""), flags))
    return hashlib.sha256(seed.encode()).hexdigest()[:16]

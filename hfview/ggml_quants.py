"""ggml's own quantization kernels, called from the libggml-base that llama-cpp-python installs.

Every quantized byte hfview writes comes from `ggml_quantize_chunk`, the function llama-quantize calls, so a
quantized view is the file llama.cpp itself would write; hfview has no quantization code of its own.
"""
from __future__ import annotations

import ctypes
import functools
import os
from concurrent.futures import ThreadPoolExecutor
from typing import Callable

import numpy as np

from .gguf_layout import GGMLType


@functools.lru_cache(maxsize=1)
def _lib() -> ctypes.CDLL:
    from .runner.devices import ggml_library

    lib = ggml_library("ggml-base")
    sigs = {
        "ggml_blck_size": ([ctypes.c_int], ctypes.c_int64),
        "ggml_type_size": ([ctypes.c_int], ctypes.c_size_t),
        "ggml_type_name": ([ctypes.c_int], ctypes.c_char_p),
        "ggml_quantize_requires_imatrix": ([ctypes.c_int], ctypes.c_bool),
        "ggml_quantize_chunk": ([ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64,
                                 ctypes.c_int64, ctypes.c_void_p], ctypes.c_size_t),
    }
    for name, (args, res) in sigs.items():
        fn = getattr(lib, name)
        fn.argtypes, fn.restype = args, res
    return lib


def block(ggml_type: int) -> tuple[int, int]:
    """(elements per block, bytes per block) of a ggml type, as ggml states them."""
    lib = _lib()
    return int(lib.ggml_blck_size(ggml_type)), int(lib.ggml_type_size(ggml_type))


def type_name(ggml_type: int) -> str:
    return _lib().ggml_type_name(ggml_type).decode()


def requires_imatrix(ggml_type: int) -> bool:
    return bool(_lib().ggml_quantize_requires_imatrix(ggml_type))


def quantize(values: np.ndarray, ggml_type: GGMLType, imatrix: np.ndarray | None = None, *,
             widen: Callable[[np.ndarray], np.ndarray] | None = None) -> np.ndarray:
    """Rows of f32 values (n_rows, n_per_row) quantized by ggml: uint8 (n_rows, row bytes). `imatrix`: one
    importance weight per column, as llama-quantize passes it. `widen`: what makes f32 rows of `values` (e.g. of
    bf16 bits); each thread widens its own rows, so that step runs in parallel with the others too."""
    src = values.reshape(-1, values.shape[-1] if values.ndim else 1)
    if widen is None:
        src = np.ascontiguousarray(src, dtype=np.float32)
    n_rows, n_per_row = src.shape
    per_block, block_bytes = block(ggml_type)
    if n_per_row % per_block:
        raise ValueError(f"a row of {n_per_row} values is not a whole number of {type_name(ggml_type)} blocks "
                         f"of {per_block}")
    out = np.empty((n_rows, n_per_row // per_block * block_bytes), dtype=np.uint8)
    weights = None
    if imatrix is not None:
        imatrix = np.ascontiguousarray(imatrix, dtype=np.float32)
        if imatrix.shape != (n_per_row,):
            raise ValueError(f"importance matrix of {imatrix.shape} for rows of {n_per_row}")
        weights = imatrix.ctypes.data
    lib, row_out = _lib(), out.shape[1]

    def rows(start: int, stop: int) -> int:
        # rows are quantized independently: any split gives the same bytes; ctypes (and numpy's loops, widening)
        # release the GIL meanwhile
        part = src[start:stop] if widen is None else np.ascontiguousarray(widen(src[start:stop]), dtype=np.float32)
        return lib.ggml_quantize_chunk(int(ggml_type), part.ctypes.data, out.ctypes.data + start * row_out, 0,
                                       stop - start, n_per_row, weights)

    n_threads = min(threads(), max(1, n_rows * n_per_row // _MIN_VALUES_PER_THREAD))
    if n_threads == 1:
        written = rows(0, n_rows)
    else:
        bounds = [n_rows * i // n_threads for i in range(n_threads + 1)]
        written = sum(_pool().map(lambda i: rows(bounds[i], bounds[i + 1]), range(n_threads)))
    if written != out.nbytes:  # ggml's own size disagreeing with its type table would be a broken libggml
        raise RuntimeError(f"ggml_quantize_chunk wrote {written} bytes, expected {out.nbytes}")
    return out


_MIN_VALUES_PER_THREAD = 1 << 16  # below this a thread costs more than it saves


def threads() -> int:
    """Threads quantizing one chunk: HFVIEW_QUANT_THREADS, else every CPU this process may use."""
    if (n := os.environ.get("HFVIEW_QUANT_THREADS")):
        return max(1, int(n))
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # macOS
        return os.cpu_count() or 1


@functools.lru_cache(maxsize=1)
def _pool() -> ThreadPoolExecutor:
    return ThreadPoolExecutor(max_workers=threads(), thread_name_prefix="hfview-quant")

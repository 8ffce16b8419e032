"""Safetensors shards, read by header only.

Opening a checkpoint reads each shard's 8-byte length and JSON header and checks them; tensor bytes
are read later, a row range at a time, with positioned reads (no mmap, no whole-file reads).
"""
from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .errors import CheckpointError, shown

MAX_HEADER = 100_000_000  # safetensors' own limit

# safetensors dtype -> numpy dtype as stored (bf16 and the 8-bit floats are read as raw integers)
DTYPES: dict[str, np.dtype] = {
    "F64": np.dtype("<f8"), "F32": np.dtype("<f4"), "F16": np.dtype("<f2"), "BF16": np.dtype("<u2"),
    "I64": np.dtype("<i8"), "I32": np.dtype("<i4"), "I16": np.dtype("<i2"), "I8": np.dtype("i1"),
    "U64": np.dtype("<u8"), "U32": np.dtype("<u4"), "U16": np.dtype("<u2"), "U8": np.dtype("u1"),
    "BOOL": np.dtype("?"), "F8_E4M3": np.dtype("u1"), "F8_E5M2": np.dtype("u1"), "F8_E8M0": np.dtype("u1"),
}


@dataclass(frozen=True)
class StoredTensor:
    """One tensor as a shard stores it: where its bytes are, and how to read them."""
    name: str
    path: Path
    dtype: str          # safetensors dtype name, e.g. "BF16"
    shape: tuple[int, ...]
    offset: int         # absolute byte offset of the first element in `path`
    nbytes: int
    stamp: tuple[int, ...] = ()  # the shard's identity when its header was read (see _identity)

    @property
    def numpy_dtype(self) -> np.dtype:
        return DTYPES[self.dtype]

    @property
    def row_bytes(self) -> int:
        """Bytes of one slice along the first axis."""
        return self.nbytes // self.shape[0] if self.shape and self.shape[0] else self.nbytes

    def read_rows(self, start: int, stop: int) -> np.ndarray:
        """Rows [start, stop) along the first axis, in the stored dtype (bf16 as uint16 bits)."""
        if not self.shape:
            raw = _pread(self, self.offset, self.nbytes)
            return np.frombuffer(raw, self.numpy_dtype).reshape(())
        n = stop - start
        raw = _pread(self, self.offset + start * self.row_bytes, n * self.row_bytes)
        return np.frombuffer(raw, self.numpy_dtype).reshape((n, *self.shape[1:]))

    def read_rows_into(self, start: int, stop: int, out: np.ndarray) -> None:
        """Rows [start, stop) read straight into `out` (C-contiguous, the stored dtype): no copy in between."""
        n = (stop - start) * self.row_bytes
        if out.nbytes != n or not out.flags.c_contiguous:
            raise ValueError(f"{self.name}: {out.nbytes} bytes of destination for {n}")
        _pread(self, self.offset + start * self.row_bytes, n, into=memoryview(out.reshape(-1)).cast("B"))

    def read(self) -> np.ndarray:
        return self.read_rows(0, self.shape[0] if self.shape else 0)


def _identity(st: os.stat_result) -> tuple[int, ...]:
    """What tells a shard from the same path rewritten, truncated or replaced since its header was read."""
    return st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns


def pread_into(fd: int, out: memoryview, offset: int) -> int:
    """Fill `out` from `offset` of `fd`; how many bytes it got (fewer only where the file ends first)."""
    got = 0
    while got < len(out) and (step := os.preadv(fd, [out[got:]], offset + got)) > 0:
        got += step
    return got


def _open_shard(t: StoredTensor, offset: int) -> int:
    """`t`'s shard opened for reading, refused if it is not the file whose header was read."""
    try:
        fd = os.open(t.path, os.O_RDONLY)
    except OSError as e:
        raise CheckpointError(f"{t.path}: cannot open shard to read tensor {t.name!r}: {e.strerror}") from e
    try:
        # offsets were checked against the header as it was: a changed file may hold anything there
        if t.stamp and _identity(os.fstat(fd)) != t.stamp:
            raise CheckpointError(f"{t.path}: the shard changed after hfview opened it (reading tensor {t.name!r} "
                                  f"at byte {offset}); open the checkpoint again once nothing writes to it")
    except BaseException:
        os.close(fd)
        raise
    return fd


def read_bytes_into(t: StoredTensor, start: int, out: memoryview) -> None:
    """len(out) bytes of `t` from byte `start` of its data, read into `out`."""
    _pread(t, t.offset + start, len(out), into=out)


def _pread(t: StoredTensor, offset: int, n: int, into: memoryview | None = None) -> bytes | None:
    """n bytes of `t`'s shard from `offset`, returned, or read into `into` (then None)."""
    fd = _open_shard(t, offset)
    try:
        if into is None:
            data = os.pread(fd, n, offset)
            got = len(data)
        else:
            data, got = None, pread_into(fd, into[:n], offset)
    except OSError as e:
        raise CheckpointError(f"{t.path}: cannot read tensor {t.name!r} at byte {offset}: {e.strerror}") from e
    finally:
        os.close(fd)
    if got != n:
        raise CheckpointError(f"{t.path}: shard is truncated: tensor {t.name!r} needs bytes "
                              f"{offset}..{offset + n}, the file ends first; re-download it")
    return data


def _is_int(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _entry(path: Path, name: str, meta, data_start: int, st: os.stat_result) -> StoredTensor:
    """One header entry, checked as safetensors' own loader checks it: a known dtype, a shape of
    non-negative ints, [begin, end] offsets that hold exactly the shape's bytes and lie in the file."""
    def corrupt(what: str) -> CheckpointError:
        return CheckpointError(f"{path}: tensor {name!r}: {what}; the shard is corrupt, re-download it")

    if not isinstance(meta, dict):
        raise corrupt(f"header entry {shown(meta)} is not an object with dtype, shape and data_offsets")
    dtype, shape, offsets = meta.get("dtype"), meta.get("shape"), meta.get("data_offsets")
    if not isinstance(dtype, str) or dtype not in DTYPES:
        raise CheckpointError(f"{path}: tensor {name!r} has dtype {shown(dtype)}, which hfview does not read "
                              f"(safetensors dtypes: {', '.join(DTYPES)})")
    if not isinstance(shape, list) or not all(_is_int(d) and d >= 0 for d in shape):
        raise corrupt(f"shape {shown(shape)} is not a list of non-negative integers")
    if not (isinstance(offsets, list) and len(offsets) == 2 and all(map(_is_int, offsets))
            and 0 <= offsets[0] <= offsets[1]):
        raise corrupt(f"data_offsets {shown(offsets)} is not [begin, end] with 0 <= begin <= end")
    begin, end = offsets
    need = math.prod(shape) * DTYPES[dtype].itemsize  # exact: no int64 wrap-around on a hostile shape
    if end - begin != need:
        raise corrupt(f"shape {shown(shape)} of {dtype} needs {need} bytes, the header gives {end - begin}")
    if data_start + end > st.st_size:
        raise CheckpointError(f"{path}: tensor {name!r} lies past the end of the file (needs {data_start + end} "
                              f"bytes, has {st.st_size}); the shard is truncated, re-download it")
    return StoredTensor(name, path, dtype, tuple(shape), data_start + begin, end - begin, _identity(st))


def read_header(path: Path) -> list[StoredTensor]:
    """The tensors a shard holds, in header order, after checking the header against the file."""
    try:
        with open(path, "rb") as f:
            st = os.fstat(f.fileno())
            size = st.st_size
            head = f.read(8)
            if len(head) < 8:
                raise CheckpointError(f"{path}: not a safetensors file (shorter than its 8-byte header length)")
            n = int.from_bytes(head, "little")
            if n > MAX_HEADER or 8 + n > size:
                raise CheckpointError(f"{path}: corrupt safetensors header: it claims {n} bytes, "
                                      f"the file has {size}; re-download the shard")
            text = f.read(n)
    except OSError as e:
        raise CheckpointError(f"{path}: cannot read shard: {e.strerror}") from e
    try:
        header = json.loads(text)
    except (UnicodeDecodeError, ValueError, RecursionError) as e:  # ValueError: also a 5000-digit number
        raise CheckpointError(f"{path}: corrupt safetensors header: not JSON ({str(e)[:120]})") from e
    if not isinstance(header, dict):
        raise CheckpointError(f"{path}: corrupt safetensors header: not a JSON object")
    metadata = header.pop("__metadata__", {})
    if not (isinstance(metadata, dict) and all(isinstance(v, str) for v in metadata.values())):
        raise CheckpointError(f"{path}: corrupt safetensors header: __metadata__ {shown(metadata)} is not an "
                              f"object of strings; re-download the shard")
    tensors = [_entry(path, name, meta, 8 + n, st) for name, meta in header.items()]
    spans = sorted((t.offset, t.offset + t.nbytes, t.name) for t in tensors if t.nbytes)
    for (_, end_a, a), (begin_b, _, b) in zip(spans, spans[1:]):
        if begin_b < end_a:
            raise CheckpointError(f"{path}: tensors {a!r} and {b!r} overlap in the file; the shard is corrupt")
    return tensors


def is_candidate_weight(name: str) -> bool:
    return (name.endswith(".safetensors") and not name.startswith(".")
            and "optimizer" not in name and "training_args" not in name)


def select_weights(names: list[str] | set[str], fmt: str) -> list[str]:
    """The weight files of a format among top-level file names: consolidated* for Mistral's own
    format, every other .safetensors for Transformers'; sorted by name."""
    chosen = [n for n in names if is_candidate_weight(n) and (n.startswith("consolidated") == (fmt == "mistral"))]
    return sorted(chosen)


def weight_files(model_dir: Path) -> list[Path]:
    """The Transformers-format shards of a checkpoint directory, sorted by name."""
    names = [p.name for p in model_dir.iterdir() if p.is_file()]
    return [model_dir / n for n in select_weights(names, "transformers")]


def index_shards(model_dir: Path) -> dict[str, StoredTensor]:
    """Every tensor of the checkpoint by name, in the converter's order: shards sorted by file name,
    names sorted within a shard. A name stored twice is an error."""
    files = weight_files(model_dir)
    if not files:
        raise CheckpointError(f"{model_dir}: model directory contains no safetensors weights")
    tensors: dict[str, StoredTensor] = {}
    for path in files:
        for t in sorted(read_header(path), key=lambda t: t.name):
            if t.name in tensors:
                raise CheckpointError(f"tensor {t.name!r} is stored twice: in {tensors[t.name].path.name} "
                                      f"and {path.name}; remove the stale shard")
            tensors[t.name] = t
    return tensors

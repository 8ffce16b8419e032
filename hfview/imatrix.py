"""Importance matrices as llama-quantize reads them: llama-imatrix's GGUF (`<tensor>.in_sum2` and `.counts`) or
its legacy .dat, normalised as tools/quantize/quantize.cpp does (sums over counts per expert; a count of zero
gives weights of one)."""
from __future__ import annotations

import struct
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from .errors import CheckpointError


@dataclass
class Imatrix:
    path: str                               # as given: llama-quantize writes it into the file's KV
    entries: dict[str, np.ndarray]          # tensor name -> f32 weights (n_per_row x experts)
    datasets: list[str] = field(default_factory=list)
    chunk_count: int = 0


def load(path: str | Path) -> Imatrix:
    p = Path(path)
    try:
        with open(p, "rb") as f:
            magic = f.read(4)
    except OSError as e:
        raise CheckpointError(f"{p}: cannot read the importance matrix ({e.strerror})") from None
    return _load_gguf(p, str(path)) if magic == b"GGUF" else _load_legacy(p, str(path))


def _load_gguf(p: Path, given: str) -> Imatrix:
    from ._gguf import package
    GGUFReader = package().GGUFReader  # gguf-py's reader (its import without mistral-common)

    try:
        r = GGUFReader(p)
    except Exception as e:  # noqa: BLE001 - any parse failure of a hostile file is its fault
        raise CheckpointError(f"{p}: not a readable imatrix GGUF ({e})") from None
    fields = r.fields
    if not all(k in fields for k in ("imatrix.datasets", "imatrix.chunk_count", "imatrix.chunk_size")):
        raise CheckpointError(f"{p}: missing imatrix metadata (imatrix.datasets, imatrix.chunk_count, "
                              f"imatrix.chunk_size), as llama-quantize requires")
    datasets = list(fields["imatrix.datasets"].contents())
    chunk_count = int(fields["imatrix.chunk_count"].contents())
    sums, counts = {}, {}
    for t in r.tensors:
        for suffix, into in ((".in_sum2", sums), (".counts", counts)):
            if t.name.endswith(suffix):
                if t.tensor_type.name != "F32":
                    raise CheckpointError(f"{p}: {t.name} is {t.tensor_type.name}; sums and counts must be F32")
                into[t.name[:-len(suffix)]] = np.asarray(t.data, dtype=np.float32).reshape(-1)
    if not sums and not counts:
        raise CheckpointError(f"{p}: no importance data (no .in_sum2 / .counts tensors)")
    entries = {}
    for name in sorted(set(sums) | set(counts)):
        if name not in sums or name not in counts:
            raise CheckpointError(f"{p}: mismatched sums and counts for {name}")
        s, n = sums[name], np.rint(counts[name]).astype(np.int64)  # lround: counts are whole
        if not n.size or s.size % n.size:
            raise CheckpointError(f"{p}: {name}: {s.size} sums do not split over {n.size} counts")
        s = s.reshape(n.size, -1)
        per = np.where(n[:, None] > 0, s / np.maximum(n, 1).astype(np.float32)[:, None], np.float32(1))
        entries[name] = per.astype(np.float32).reshape(-1)
    return Imatrix(given, entries, datasets, chunk_count)


def _load_legacy(p: Path, given: str) -> Imatrix:
    data = p.read_bytes()
    pos = 0

    def take(fmt: str):
        nonlocal pos
        size = struct.calcsize(fmt)
        if pos + size > len(data):
            raise CheckpointError(f"{p}: legacy imatrix cut short at byte {pos}")
        out = struct.unpack_from(fmt, data, pos)
        pos += size
        return out

    (n_entries,) = take("<i")
    if n_entries < 1:
        raise CheckpointError(f"{p}: neither an imatrix GGUF nor a legacy imatrix with entries")
    entries = {}
    for _ in range(n_entries):
        (length,) = take("<i")
        if not 0 < length <= len(data) - pos:
            raise CheckpointError(f"{p}: legacy imatrix entry name of {length} bytes at byte {pos}")
        name = data[pos:pos + length].split(b"\0")[0].decode("utf-8", "replace")
        pos += length
        ncall, nval = take("<ii")
        if not 0 < nval <= (len(data) - pos) // 4:
            raise CheckpointError(f"{p}: {name}: {nval} values, more than the file holds")
        sums = np.frombuffer(data, dtype="<f4", count=nval, offset=pos).astype(np.float32)
        pos += 4 * nval
        entries[name] = sums / np.float32(ncall) if ncall > 0 else sums.copy()
    chunk_count, datasets = 0, []
    if pos + 4 <= len(data):
        (chunk_count,) = take("<i")
        if pos + 4 <= len(data):
            (length,) = take("<i")
            if 0 < length <= len(data) - pos:
                datasets.append(data[pos:pos + length].split(b"\0")[0].decode("utf-8", "replace"))
    return Imatrix(given, entries, datasets, chunk_count)

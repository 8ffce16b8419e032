"""How a presented tensor's elements are found in the stored ones, and how its values are written.

Each rearrangement the converter applies is written here once, as a view over stored rows:
`Stored` (as stored), `RowPermutation` (e.g. Llama's rotation pairs), `Stack` (a mixture's experts).
Reads are by "rows": the tensor flattened to (-1, last_dim) in the converter's (numpy) dim order, so a
byte range of the presented tensor maps to a row range of its sources.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Sequence

import numpy as np

from .errors import CheckpointError
from .gguf_layout import GGML_ITEM_SIZE, GGMLType
from .shards import StoredTensor


# ---------------------------------------------------------------- element conversion
def to_working(stored: np.ndarray, dtype: str) -> np.ndarray:
    """Values in the dtype the converter computes in: f16 and f32 as stored, everything else widened to f32."""
    if dtype == "BF16":
        return (stored.astype(np.uint32) << 16).view(np.float32)
    if dtype in ("F16", "F32"):
        return stored
    if dtype.startswith("F8_"):
        raise NotImplementedError(f"8-bit float tensors ({dtype}) are not read yet")
    return stored.astype(np.float32)


def bf16_bits(values: np.ndarray) -> np.ndarray:
    """f32 -> bf16 as ggml rounds (nearest even, NaN made quiet), as uint16 bits."""
    n = values.astype(np.float32, copy=False).view(np.uint32)
    n = np.where((n & 0x7FFFFFFF) > 0x7F800000, (n & np.uint32(0xFFFF0000)) | np.uint32(64 << 16), n)
    return ((n.astype(np.uint64) + (0x7FFF + ((n >> 16) & 1))) >> 16).astype(np.uint16)


_PASSTHROUGH = {"F32": GGMLType.F32, "F16": GGMLType.F16, "BF16": GGMLType.BF16}


def quiet_bf16_nans(bits: np.ndarray) -> np.ndarray:
    """bf16 bits as ggml's f32 -> bf16 rounding returns them: identical, except a NaN gets its quiet bit."""
    # two reductions without temporaries find any NaN: negative ones are the only bits above 0xFF80,
    # positive ones the only int16 values above 0x7F80
    if bits.size and (bits.max() > 0xFF80 or bits.view(np.int16).max() > 0x7F80):
        nan = (bits & 0x7FFF) > 0x7F80
        bits = np.where(nan, bits | np.uint16(0x40), bits)
    return bits


def to_output(values: np.ndarray, ggml_type: GGMLType) -> np.ndarray:
    if ggml_type == GGMLType.F32:
        return values.astype(np.float32, copy=False)
    if ggml_type == GGMLType.F16:
        return values.astype(np.float16, copy=False)
    if ggml_type == GGMLType.BF16:
        return bf16_bits(values)
    raise ValueError(f"cannot write {ggml_type.name}")


# ---------------------------------------------------------------- value steps
@dataclass(frozen=True)
class ValueStep:
    """An elementwise step the converter computes on a tensor's values (in its working dtype)."""
    name: str
    fn: Callable[[np.ndarray], np.ndarray]

    def __call__(self, x: np.ndarray) -> np.ndarray:
        return self.fn(x)


OFFSET_ONE = ValueStep("1 + w", lambda x: x + x.dtype.type(1))
# Correctly rounded (through float64) in the converter's working dtype. The converter's own exponential is
# torch's, which lands one unit in the last place off now and then (about 1% of float32 values on x86).
NEG_EXP = ValueStep("-exp(w)", lambda x: (-np.exp(x.astype(np.float64))).astype(x.dtype))


# ---------------------------------------------------------------- views
def _rows(shape: Sequence[int]) -> int:
    return int(np.prod(shape[:-1], dtype=np.int64)) if len(shape) > 1 else 1


def _flat_rows(t: StoredTensor, start: int, stop: int) -> np.ndarray:
    """Rows of a stored tensor flattened to (-1, last_dim)."""
    last = t.shape[-1] if t.shape else 1
    if len(t.shape) <= 1:
        return t.read().reshape(1, last)[start:stop]
    per_first = _rows(t.shape) // t.shape[0] if t.shape[0] else 1
    if per_first == 1:
        return t.read_rows(start, stop).reshape(-1, last)
    first, last_first = start // per_first, -(-stop // per_first)
    block = t.read_rows(first, last_first).reshape(-1, last)
    return block[start - first * per_first: stop - first * per_first]


class View:
    """Base: a presented tensor (numpy-order `shape`) made from `sources`."""
    name = "stored"
    sources: tuple[StoredTensor, ...]
    shape: tuple[int, ...]

    @property
    def n_rows(self) -> int:
        return _rows(self.shape)

    def rows(self, start: int, stop: int) -> np.ndarray:
        """Flattened rows [start, stop) in the stored dtype."""
        raise NotImplementedError

    def describe(self) -> str:
        return self.name


@dataclass
class Stored(View):
    source: StoredTensor

    def __post_init__(self):
        self.sources = (self.source,)
        self.shape = self.source.shape

    def rows(self, start, stop):
        return _flat_rows(self.source, start, stop)


@dataclass
class RowPermutation(View):
    """Rows of a 2-D weight (or elements of a 1-D bias) taken in another order: out[i] = in[order[i]]."""
    source: StoredTensor
    order: np.ndarray
    label: str

    def __post_init__(self):
        self.sources = (self.source,)
        self.shape = self.source.shape
        self.name = self.label

    def rows(self, start, stop):
        if len(self.shape) == 1:
            return self.source.read()[self.order].reshape(1, -1)
        picked = self.order[start:stop]
        lo, hi = int(picked.min()), int(picked.max()) + 1
        return self.source.read_rows(lo, hi)[picked - lo]


@dataclass
class RowSelection(View):
    """Some rows of a weight (or elements of a 1-D bias), in a given order: out[i] = in[rows[i]], rows counted
    over all but the last axis — one part of a fused tensor, e.g. InternLM2's q, k or v out of its grouped
    wqkv, or GraniteMoE's gate half of every expert ([experts, 2 x ff, hidden] presented [experts, ff, hidden]
    through `shape`)."""
    source: StoredTensor
    order: np.ndarray
    label: str
    presented: tuple[int, ...] | None = None  # the shape, where it has more than two axes

    def __post_init__(self):
        self.sources = (self.source,)
        if len(self.source.shape) == 1:
            self.shape = (len(self.order),)
        else:
            self.shape = self.presented or (len(self.order), self.source.shape[-1])
            if _rows(self.shape) != len(self.order) or self.shape[-1] != self.source.shape[-1]:
                raise CheckpointError(f"cannot present {len(self.order)} rows of {self.source.name!r} as "
                                      f"{list(self.shape)}")
        self.name = self.label

    def rows(self, start, stop):
        if len(self.shape) == 1:
            return self.source.read()[self.order].reshape(1, -1)
        picked = self.order[start:stop]
        lo, hi = int(picked.min()), int(picked.max()) + 1
        return _flat_rows(self.source, lo, hi)[picked - lo]


def expert_part(n_experts: int, rows_per_expert: int, part: int, parts: int) -> np.ndarray:
    """The rows of part `part` of `parts` equal parts of each expert's fused rows (GraniteMoE's input_linear:
    gate then up in each expert's 2 x ff rows), expert by expert."""
    per_part = rows_per_expert // parts
    return (np.arange(n_experts)[:, None] * rows_per_expert + part * per_part + np.arange(per_part)).reshape(-1)


@dataclass
class Reshaped(View):
    """A stored tensor presented under another shape, its elements in the same order (Mamba's conv1d weight
    [d_inner, 1, d_conv] squeezed; Mamba-2's A [heads] as [heads, 1], its norm [d_inner] as [groups, d_inner /
    groups]). Rows are read as stored where the last dimension is kept; otherwise the (small) tensor whole."""
    source: StoredTensor
    shape: tuple[int, ...]
    label: str

    def __post_init__(self):
        src = self.source.shape
        if int(np.prod(self.shape, dtype=np.int64)) != int(np.prod(src, dtype=np.int64)):
            raise CheckpointError(f"cannot present {self.source.name!r} {list(src)} as {list(self.shape)}")
        self.sources = (self.source,)
        self.name = self.label

    def rows(self, start, stop):
        if self.shape[-1:] == tuple(self.source.shape[-1:]):
            return _flat_rows(self.source, start, stop)
        return self.source.read().reshape(-1, self.shape[-1])[start:stop]


@dataclass
class Transposed(View):
    """A 2-D weight stored inputs-first ([in, out]: GPT-2's Conv1D) presented outputs-first ([out, in]).
    A presented row is a stored column, which no positioned read returns on its own: the tensor is read
    once and its transpose kept until its last rows are asked for (reads come in order), so memory is
    one tensor's worth at most per view being read."""
    source: StoredTensor
    _whole: np.ndarray | None = field(default=None, init=False, repr=False, compare=False)

    def __post_init__(self):
        if len(self.source.shape) != 2:
            raise CheckpointError(f"cannot transpose {self.source.name!r}: {len(self.source.shape)}-D")
        self.sources = (self.source,)
        self.shape = (self.source.shape[1], self.source.shape[0])
        self.name = "transposed (stored inputs-first)"

    def rows(self, start, stop):
        if self._whole is None:
            self._whole = np.ascontiguousarray(self.source.read().T)
        out = self._whole[start:stop]
        if stop >= self.shape[0]:
            self._whole = None
        return out


def rotation_pairs(n_rows: int, n_head: int) -> np.ndarray:
    """The converter's Q/K permutation (HF's rotate-half halves -> ggml's interleaved pairs):
    within each head, row 2*i + p comes from row p*half + i."""
    half = n_rows // n_head // 2
    return np.arange(n_rows).reshape(n_head, 2, half).swapaxes(1, 2).reshape(-1)


def grouped_qkv(n_rows: int, n_head: int, n_head_kv: int) -> np.ndarray:
    """A fused QKV stored by KV group ([group][its n_head/n_head_kv q heads, k, v][dim]) regrouped as ggml's
    [all q heads][all k heads][all v heads]. One group per head is GPT-NeoX's and BLOOM's head-by-head
    [q, k, v] layout; one group for all heads is Falcon-7B's multi-query [q..., k, v], left as it is."""
    per_group = n_head // n_head_kv + 2
    head_dim = n_rows // (n_head_kv * per_group)
    heads = np.arange(n_rows).reshape(n_head_kv, per_group, head_dim)
    return np.concatenate([heads[:, :-2].reshape(-1), heads[:, -2].reshape(-1), heads[:, -1].reshape(-1)])


@dataclass
class Stack(View):
    """Several same-shaped tensors stacked along a new first axis (a mixture's experts)."""
    parts: tuple[StoredTensor, ...]

    def __post_init__(self):
        self.sources = self.parts
        first = self.parts[0]
        for p in self.parts[1:]:
            if p.shape != first.shape or p.dtype != first.dtype:
                raise CheckpointError(f"cannot stack {p.name!r} ({p.dtype} {list(p.shape)}) with "
                                 f"{first.name!r} ({first.dtype} {list(first.shape)})")
        self.shape = (len(self.parts), *first.shape)
        self.name = f"stack of {len(self.parts)}"

    def rows(self, start, stop):
        """Streamed part by part into one destination array: besides the result, at most one part's
        rows are held at a time (never the whole stack twice)."""
        per = _rows(self.parts[0].shape) if len(self.parts[0].shape) > 1 else 1
        total, out, done = stop - start, None, 0
        if total <= 0:
            return _flat_rows(self.parts[0], 0, 0)
        while done < total:
            i, r = divmod(start + done, per)
            take = min(total - done, per - r)
            piece = _flat_rows(self.parts[i], r, r + take)
            if take == total:
                return piece  # the whole range lies in one part
            if out is None:
                out = np.empty((total, piece.shape[1]), dtype=piece.dtype)
            out[done:done + take] = piece
            del piece
            done += take
        return out


@dataclass
class Generated(View):
    """A tensor the converter computes from the config (e.g. Llama 3's rope_freqs)."""
    values: np.ndarray
    label: str

    def __post_init__(self):
        self.sources = ()
        self.shape = self.values.shape
        self.name = self.label

    def rows(self, start, stop):
        return self.values.reshape(-1, self.shape[-1])[start:stop]


# ---------------------------------------------------------------- a presented tensor
@dataclass
class Presented:
    """One tensor of the virtual GGUF: its name, type, and the recipe for its bytes."""
    name: str
    view: View
    ggml_type: GGMLType
    steps: tuple[ValueStep, ...] = ()

    @property
    def shape(self) -> tuple[int, ...]:
        return self.view.shape

    @property
    def ggml_dims(self) -> tuple[int, ...]:
        return tuple(reversed(self.shape))

    @property
    def row_bytes(self) -> int:
        return (self.shape[-1] if self.shape else 1) * GGML_ITEM_SIZE[self.ggml_type]

    @property
    def nbytes(self) -> int:
        return self.view.n_rows * self.row_bytes

    @property
    def stored_dtype(self) -> str:
        return self.view.sources[0].dtype if self.view.sources else "F32"

    def rows(self, start: int, stop: int) -> np.ndarray:
        """Rows [start, stop) as written to the file."""
        raw = self.view.rows(start, stop)
        if not self.steps and _PASSTHROUGH.get(self.stored_dtype) == self.ggml_type and self.view.sources:
            # the converter's round trip through f32 leaves these bits unchanged (bf16: but NaNs made quiet)
            return quiet_bf16_nans(raw) if self.ggml_type == GGMLType.BF16 else raw
        values = to_working(raw, self.stored_dtype) if self.view.sources else raw
        for step in self.steps:
            values = step(values)
        return to_output(values, self.ggml_type)

    def read(self) -> np.ndarray:
        out = self.rows(0, self.view.n_rows)
        if self.ggml_type == GGMLType.BF16:
            return out.reshape(self.shape)  # uint16 bits
        return out.reshape(self.shape)

    def describe(self) -> str:
        parts = [self.view.describe()] + [s.name for s in self.steps]
        return ", ".join(parts)


@dataclass
class ExpertColumns(View):
    """Each expert's matrix stored inputs-first ([experts, in, out]: Llama 4's fused gate_up_proj and its
    down_proj) presented outputs-first ([experts, out, in]), only the columns [start, stop) of each (the gate or
    the up half of a fused one; all of them for down_proj). A presented row is a stored column, which no
    positioned read returns on its own: each expert is read once, when its first row is asked for, and its
    transposed columns are kept until the next expert's (reads come in order), so memory is one expert's worth."""
    source: StoredTensor
    start: int
    stop: int
    label: str
    _cached: tuple[int, np.ndarray] | None = field(default=None, init=False, repr=False, compare=False)

    def __post_init__(self):
        src = self.source.shape
        if len(src) != 3 or not 0 <= self.start < self.stop <= src[2]:
            raise CheckpointError(f"cannot present columns [{self.start}, {self.stop}) of each expert of "
                                  f"{self.source.name!r} {list(src)}: expected [experts, in, out]")
        self.sources = (self.source,)
        self.shape = (src[0], self.stop - self.start, src[1])
        self.name = self.label

    def _expert(self, e: int) -> np.ndarray:
        if self._cached is None or self._cached[0] != e:
            self._cached = None  # the previous expert's columns go before the next are read
            block = self.source.read_rows(e, e + 1)[0]
            self._cached = (e, np.ascontiguousarray(block[:, self.start:self.stop].T))
        return self._cached[1]

    def rows(self, start, stop):
        per = self.shape[1]
        total, out, done = stop - start, None, 0
        while done < total:
            e, r = divmod(start + done, per)
            take = min(total - done, per - r)
            piece = self._expert(e)[r:r + take]
            if take == total:
                out = piece
            else:
                if out is None:
                    out = np.empty((total, piece.shape[1]), dtype=piece.dtype)
                out[done:done + take] = piece
                del piece  # not to keep the previous expert's columns alive past the next read
            done += take
        if stop >= self.n_rows:
            self._cached = None
        return out if out is not None else np.empty((0, self.shape[-1]), dtype=self.source.numpy_dtype)

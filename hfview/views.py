"""How a presented tensor's elements are found in the stored ones, and how its values are written.

Each rearrangement the converter applies is written here once, as a view over stored rows:
`Stored` (as stored), `RowPermutation` (e.g. Llama's rotation pairs), `Stack` (a mixture's experts).
Reads are by "rows": the tensor flattened to (-1, last_dim) in the converter's (numpy) dim order, so a
byte range of the presented tensor maps to a row range of its sources.
"""
from __future__ import annotations

import functools
import math
import os
import dataclasses
from dataclasses import dataclass, field
from typing import Callable, Sequence

import numpy as np

from .errors import CheckpointError
from .gguf_layout import GGML_ITEM_SIZE, GGMLType, row_bytes
from .shards import StoredTensor


# ---------------------------------------------------------------- element conversion
def to_working(stored: np.ndarray, dtype: str) -> np.ndarray:
    """Values in the dtype the converter computes in: f16 and f32 as stored, everything else widened to f32."""
    if dtype == "BF16":
        return np.left_shift(stored, 16, dtype=np.uint32).view(np.float32)  # one pass: no uint32 copy between
    if dtype in ("F16", "F32"):
        return stored
    if dtype.startswith("F8_"):
        raise NotImplementedError(f"8-bit float tensors ({dtype}) are not read yet")
    return stored.astype(np.float32)


def bf16_bits(values: np.ndarray) -> np.ndarray:
    """f32 -> bf16 as ggml rounds (nearest even, NaN made quiet), as uint16 bits."""
    f = values.astype(np.float32, copy=False)
    n = f.view(np.uint32)
    # in place on one uint32 array (a sum past 32 bits needs n >= 0xFFFF8001, a NaN, set apart below)
    out = n >> 16
    out &= 1
    out += 0x7FFF
    out += n
    out >>= 16
    nan = np.isnan(f)
    if nan.any():
        out[nan] = (n[nan] >> 16) | 0x40
    return out.astype(np.uint16)


_PASSTHROUGH = {"F32": GGMLType.F32, "F16": GGMLType.F16, "BF16": GGMLType.BF16}
_BITS_DTYPE = {"F32": np.float32, "F16": np.float16, "BF16": np.uint16}  # (a view that computes its values,
# ColumnsNormalised, gives them in its values_dtype, not its source's)


def quiet_bf16_nans(bits: np.ndarray, *, in_place: bool = False) -> np.ndarray:
    """bf16 bits as ggml's f32 -> bf16 rounding returns them: identical, except a NaN gets its quiet bit."""
    # two reductions without temporaries find any NaN: negative ones are the only bits above 0xFF80,
    # positive ones the only int16 values above 0x7F80
    if bits.size and (bits.max() > 0xFF80 or bits.view(np.int16).max() > 0x7F80):
        if not in_place:
            bits = bits.copy()
        np.bitwise_or(bits, np.uint16(0x40), out=bits, where=(bits & 0x7FFF) > 0x7F80)
    return bits


def to_output(values: np.ndarray, ggml_type: GGMLType) -> np.ndarray:
    if ggml_type == GGMLType.F32:
        return values.astype(np.float32, copy=False)
    if ggml_type == GGMLType.F16:
        return values.astype(np.float16, copy=False)
    if ggml_type == GGMLType.BF16:
        return bf16_bits(values)
    if ggml_type in GGML_ITEM_SIZE:
        raise ValueError(f"cannot write {ggml_type.name}")
    from .ggml_quants import quantize  # quantized types: ggml's own kernels, from f32 as the converter passes them
    return quantize(values, ggml_type)


# ---------------------------------------------------------------- value steps
@dataclass(frozen=True)
class ValueStep:
    """An elementwise step the converter computes on a tensor's values (in its working dtype)."""
    name: str
    fn: Callable[[np.ndarray], np.ndarray]

    def __call__(self, x: np.ndarray) -> np.ndarray:
        return self.fn(x)

    def at(self, x: np.ndarray, start: int, stop: int) -> np.ndarray:
        """The step on rows [start, stop) of the tensor (the same for every row here; see RowSegmentsScaled)."""
        return self.fn(x)

    def in_dtype(self, stored_dtype: str) -> "ValueStep":
        """The step for a tensor stored in `stored_dtype` (the same for every dtype here; see DtypeStep)."""
        return self


def _times(x: np.ndarray, factor: float) -> np.ndarray:
    """x * factor as torch computes a tensor times a Python number: in float32 (the number rounded to it), the
    product rounded to x's dtype."""
    return (x.astype(np.float32, copy=False) * np.float32(factor)).astype(x.dtype, copy=False)


def scaled(factor: float, label: str) -> ValueStep:
    """Every value times a config multiplier (Falcon-H1's muP multipliers, which the converter folds into the
    weights), in the converter's working dtype."""
    return ValueStep(f"x {label} ({factor!r})", lambda x: _times(x, factor))


@dataclass(frozen=True)
class RowSegmentsScaled(ValueStep):
    """Rows in consecutive segments, each segment times its own factor (Falcon-H1's in_proj: z, x, B, C and dt rows
    each by one of ssm_multipliers). `bounds`: each segment's first row, then the row count."""
    bounds: tuple[int, ...] = ()
    factors: tuple[float, ...] = ()

    def at(self, x: np.ndarray, start: int, stop: int) -> np.ndarray:
        out = np.empty_like(x)
        for lo, hi, factor in zip(self.bounds, self.bounds[1:], self.factors):
            a, b = max(lo, start), min(hi, stop)
            if a < b:
                out[a - start:b - start] = _times(x[a - start:b - start], factor)
        return out


def offset(c: float, label: str) -> ValueStep:
    """c + w: a norm scale stored as its offset from a constant (Gemma's 1, PLaMo 3's 1/5 and 5^-1.5), as torch adds
    a Python number to a tensor: in float32 (the number rounded to it), the sum rounded to the tensor's dtype."""
    return ValueStep(f"{label} + w", lambda x: (x.astype(np.float32, copy=False) + np.float32(c)).astype(x.dtype,
                                                                                                     copy=False))


OFFSET_ONE = offset(1.0, "1")


def _neg_exp(x: np.ndarray) -> np.ndarray:
    """-exp(w) as the converter computes it: torch's exponential in the working dtype (f16 as stored, the rest
    widened to f32). Torch's vectorised exp is not correctly rounded and its bits depend on the CPU's vector unit, so
    where torch is installed the view takes this machine's torch's values (hfview.torch_exp: a cached table for 16-bit
    inputs) and gets the converter's bits; without torch, the correctly rounded value (through float64)."""
    from .torch_exp import torch_exp

    e = torch_exp(x)
    return (-np.exp(x.astype(np.float64))).astype(x.dtype) if e is None else -e


NEG_EXP = ValueStep("-exp(w)", _neg_exp)


# ---------------------------------------------------------------- views
def _rows(shape: Sequence[int]) -> int:
    return math.prod(shape[:-1]) if len(shape) > 1 else 1


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

    def rows_into(self, start: int, stop: int, out: np.ndarray) -> None:
        """rows(start, stop) written into `out` ([stop - start, last dim], the stored dtype); a view whose rows are
        stored bytes reads them straight in."""
        out[...] = self.rows(start, stop)

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

    def rows_into(self, start, stop, out):
        if len(self.shape) == 2:
            self.source.read_rows_into(start, stop, out)
        else:
            super().rows_into(start, stop, out)


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
        runs = self.runs(start, stop)
        if runs is None:  # short runs (rotation pairs, single rows): one read, a gather
            picked = self.order[start:stop]
            lo, hi = int(picked.min()), int(picked.max()) + 1
            return _flat_rows(self.source, lo, hi)[picked - lo]
        # long runs of consecutive rows (one part of each expert's fused rows): each run read on its own, so
        # memory holds the result and one run's read, not every stored row between the first and the last
        out = np.empty((stop - start, self.shape[-1]), self.source.numpy_dtype)
        at = 0
        for row, n in runs:
            out[at:at + n] = _flat_rows(self.source, row, row + n)
            at += n
        return out

    def runs(self, start: int, stop: int) -> list[tuple[int, int]] | None:
        """Presented rows [start, stop) as runs of consecutive stored rows, (first stored row, count) each; None
        where the runs are short (under _LONG_RUN rows on average), which one read and a gather serve better."""
        picked = self.order[start:stop]
        cuts = np.flatnonzero(np.diff(picked) != 1) + 1
        if len(cuts) >= len(picked) // _LONG_RUN:
            return None
        return [(int(picked[a]), b - a) for a, b in zip((0, *cuts), (*cuts, len(picked)))]


_LONG_RUN = 64  # RowSelection reads run by run where its runs of consecutive rows average at least this many


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
    """A weight stored inputs-first presented outputs-first: a 2-D [in, out] (GPT-2's Conv1D) as [out, in]. With
    `blocks` (or a 3-D source: one block per first index), the stored rows are that many equal blocks, each
    transposed on its own — a mixture's experts stored inputs-first, in one [experts x in, out] tensor (DBRX's
    w2) or one [experts, in, out] (gpt-oss), presented [experts, out, in].
    A presented row is a stored column, which no positioned read returns on its own: a block is read whole and
    its transpose kept until its last rows are asked for (reads come in order), so besides the result memory
    holds one block's worth at most per view being read (one expert's: never the stack twice)."""
    source: StoredTensor
    blocks: int | None = None
    # only these stored columns, in this order, become each block's presented rows (gpt-oss's gate: the even
    # columns of each expert's [hidden, 2 x ffn] gate_up_proj, see interleaved); `label` names the pick
    columns: np.ndarray | None = None
    label: str = ""
    _block: tuple[int, np.ndarray] | None = field(default=None, init=False, repr=False, compare=False)

    def __post_init__(self):
        src = self.source.shape
        if len(src) not in (2, 3):
            raise CheckpointError(f"cannot transpose {self.source.name!r}: {len(src)}-D")
        blocks = self.blocks or (src[0] if len(src) == 3 else 1)
        if _rows(src) % blocks:
            raise CheckpointError(f"cannot split the {_rows(src)} rows of {self.source.name!r} into {blocks} "
                                  f"equal blocks to transpose")
        per = _rows(src) // blocks
        width = src[-1] if self.columns is None else len(self.columns)
        if self.columns is not None and len(self.columns) and not 0 <= int(np.min(self.columns)) <= int(
                np.max(self.columns)) < src[-1]:
            raise CheckpointError(f"cannot pick columns of {self.source.name!r}: it has {src[-1]}")
        self.sources = (self.source,)
        self.shape = (width, per) if len(src) == 2 and blocks == 1 else (blocks, width, per)
        self.name = ("transposed (stored inputs-first)" if len(self.shape) == 2 else
                     f"each of {blocks} experts transposed (stored inputs-first)")
        if self.label:
            self.name = f"{self.label}, {self.name}"

    def rows(self, start, stop):
        width, per = self.shape[-2], self.shape[-1]  # presented rows per block, stored rows per block
        total, out, done = stop - start, None, 0
        while done < total:
            b, r = divmod(start + done, width)
            take = min(total - done, width - r)
            if self._block is None or self._block[0] != b:
                self._block = None  # the previous block's transpose goes before the next is made
                block = _flat_rows(self.source, b * per, (b + 1) * per).T
                self._block = (b, np.ascontiguousarray(block if self.columns is None else block[self.columns]))
                del block
            piece = self._block[1][r:r + take]
            if r + take >= width:
                self._block = None
            if take == total:
                return piece
            if out is None:
                out = np.empty((total, per), dtype=piece.dtype)
            out[done:done + take] = piece
            del piece  # a finished block's transpose goes before the next block is read
            done += take
        return out if out is not None else np.empty((0, per), dtype=_flat_rows(self.source, 0, 0).dtype)


@dataclass
class ColumnSelection(View):
    """Some columns of a tensor (its last axis), in a given order: out[..., j] = in[..., columns[j]], rows read as
    stored — gpt-oss's gate or up biases, the even or odd columns of each expert's interleaved gate_up bias."""
    source: StoredTensor
    columns: np.ndarray
    label: str

    def __post_init__(self):
        src = self.source.shape
        if not len(self.columns) or not 0 <= int(np.min(self.columns)) <= int(np.max(self.columns)) < src[-1]:
            raise CheckpointError(f"cannot pick columns of {self.source.name!r}: it has {src[-1]}")
        self.sources = (self.source,)
        self.shape = (*src[:-1], len(self.columns))
        self.name = self.label

    def rows(self, start, stop):
        return np.ascontiguousarray(_flat_rows(self.source, start, stop)[:, self.columns])


def interleaved(width: int, part: int, parts: int = 2) -> np.ndarray:
    """Part `part` of `parts` interleaved along a width: indices part, part + parts, ... (gpt-oss's gate_up
    columns: gate at the even ones, up at the odd)."""
    if width % parts:
        raise CheckpointError(f"{width} interleaved columns do not split into {parts} parts")
    return np.arange(part, width, parts)


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
        first = self.parts[0]
        if len(first.shape) == 2:  # matrices (experts): each part's rows read straight into the destination
            out = np.empty((total, first.shape[1]), dtype=first.numpy_dtype)
            self.rows_into(start, stop, out)
            return out
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

    def rows_into(self, start, stop, out):
        if len(self.parts[0].shape) != 2:
            return super().rows_into(start, stop, out)
        per, done = self.parts[0].shape[0], 0
        while done < stop - start:
            i, r = divmod(start + done, per)
            take = min(stop - start - done, per - r)
            self.parts[i].read_rows_into(r, r + take, out[done:done + take])
            done += take


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
    # requantized (llama-quantize over the converter's file): the type the converter wrote, whose values ggml
    # quantizes into ggml_type
    via: GGMLType | None = None
    # llama-quantize's importance weights for it: n_per_row per expert (field: not compared, an array)
    imatrix: np.ndarray | None = field(default=None, compare=False, repr=False)

    @property
    def shape(self) -> tuple[int, ...]:
        return self.view.shape

    @property
    def ggml_dims(self) -> tuple[int, ...]:
        return tuple(reversed(self.shape))

    @property
    def row_bytes(self) -> int:
        return row_bytes(self.ggml_type, self.shape[-1] if self.shape else 1)

    @property
    def nbytes(self) -> int:
        return self.view.n_rows * self.row_bytes

    @property
    def stored_dtype(self) -> str:
        # a view that computes its values (ColumnsNormalised) gives them in its own dtype
        if getattr(self.view, "values_dtype", None):
            return self.view.values_dtype
        return self.view.sources[0].dtype if self.view.sources else "F32"

    def rows(self, start: int, stop: int) -> np.ndarray:
        """Rows [start, stop) as written to the file."""
        if self.via is None:
            return self._converted(start, stop, self.ggml_type)
        from .ggml_quants import quantize
        # the rows as the converter's file holds them, widened to f32 by each quantizing thread for its own rows
        values = self._converted(start, stop, self.via)
        widen = functools.partial(to_working, dtype=self.via.name)
        if self.imatrix is None:
            return quantize(values, self.ggml_type, widen=widen)
        # each expert's rows take that expert's weights, as llama-quantize splits them
        n_per_row = self.shape[-1]
        per_expert = self.shape[-2] if len(self.shape) > 2 else self.view.n_rows
        parts, row = [], start
        while row < stop:
            expert, end = row // per_expert, min(stop, (row // per_expert + 1) * per_expert)
            weights = self.imatrix[expert * n_per_row:(expert + 1) * n_per_row]
            parts.append(quantize(values[row - start:end - start], self.ggml_type, weights, widen=widen))
            row = end
        return np.concatenate(parts) if len(parts) > 1 else parts[0]

    def _passes_through(self, ggml_type: GGMLType) -> bool:
        """Whether rows in `ggml_type` are the stored bits: the converter's round trip through f32 leaves them
        unchanged (bf16: but NaNs made quiet)."""
        return not self.steps and bool(self.view.sources) and _PASSTHROUGH.get(self.stored_dtype) == ggml_type

    @property
    def stored_bits(self) -> bool:
        """Whether the file's bytes are the stored bits (so rows_into can read them straight in)."""
        return self.via is None and self._passes_through(self.ggml_type)

    def rows_into(self, start: int, stop: int, out: np.ndarray) -> None:
        """rows(start, stop) of a stored_bits tensor into `out` (uint8, exactly their bytes): read straight from
        the shards where the view can, with no array in between."""
        bits = out.view(_BITS_DTYPE[self.stored_dtype]).reshape(stop - start, self.shape[-1] if self.shape else 1)
        self.view.rows_into(start, stop, bits)
        if self.ggml_type == GGMLType.BF16:
            quiet_bf16_nans(bits, in_place=True)

    def _converted(self, start: int, stop: int, ggml_type: GGMLType) -> np.ndarray:
        """Rows [start, stop) as the converter writes them in `ggml_type`."""
        raw = self.view.rows(start, stop)
        packed = getattr(self.view, "packed_type", None)
        if packed is not None:  # already ggml's blocks (MXFP4Rows): written as they are, never requantized
            if packed != ggml_type:
                raise ValueError(f"{self.name}: {packed.name} blocks cannot be written as {ggml_type.name}")
            return raw
        if self._passes_through(ggml_type):
            return quiet_bf16_nans(raw) if ggml_type == GGMLType.BF16 else raw
        values = to_working(raw, self.stored_dtype) if self.view.sources else raw
        for step in self.steps:
            values = step.in_dtype(self.stored_dtype).at(values, start, stop)
        return to_output(values, ggml_type)

    def read(self) -> np.ndarray:
        out = self.rows(0, self.view.n_rows)
        if self.ggml_type not in GGML_ITEM_SIZE:  # quantized: each row's blocks as bytes
            return out.reshape(*self.shape[:-1], self.row_bytes)
        return out.reshape(self.shape)  # BF16 as its uint16 bits

    def describe(self) -> str:
        parts = [self.view.describe()] + [s.name for s in self.steps]
        scaled = [src for src in self.view.sources if isinstance(src, FP8Dequantized)]
        if scaled:  # (inspect's account of where the values come from)
            block, stored = scaled[0].block, scaled[0].weight.dtype
            parts.insert(0, f"{'FP8' if stored.startswith('F8_') else stored} x {scaled[0].scale_label}"
                            f"{' per ' + 'x'.join(map(str, block)) + ' block' if block else ''}")
        return ", ".join(parts)


@dataclass
class BlocksTransposed(View):
    """Blocks of a 2-D weight's rows, each presented transposed: out[b] = in[rows[b]].T, so `rows`
    ([blocks, rows per block]) gives the presented shape [blocks, columns, rows per block]. DeepSeek's latent
    attention: the key half of each head's kv_b_proj rows, presented [heads, kv_lora_rank, qk_nope_head_dim]
    for llama.cpp's absorbed attention. A presented row lies in one block, whose few rows are read and
    transposed on their own (reads come in order: the block in hand is kept until its last row is asked for)."""
    source: StoredTensor
    blocks: np.ndarray
    label: str
    _held: tuple[int, np.ndarray] | None = field(default=None, init=False, repr=False, compare=False)

    def __post_init__(self):
        if len(self.source.shape) != 2 or self.blocks.ndim != 2:
            raise CheckpointError(f"cannot present blocks of {self.source.name!r} {list(self.source.shape)} "
                                  f"transposed")
        self.sources = (self.source,)
        self.shape = (self.blocks.shape[0], self.source.shape[1], self.blocks.shape[1])
        self.name = self.label

    def _block(self, b: int) -> np.ndarray:
        if self._held is None or self._held[0] != b:
            picked = self.blocks[b]
            lo, hi = int(picked.min()), int(picked.max()) + 1
            self._held = (b, np.ascontiguousarray(self.source.read_rows(lo, hi)[picked - lo].T))
        return self._held[1]

    def rows(self, start, stop):
        per = self.shape[1]
        parts = []
        for b in range(start // per, -(-stop // per)):
            lo, hi = max(start - b * per, 0), min(stop - b * per, per)
            parts.append(self._block(b)[lo:hi])
        if stop >= self.n_rows:
            self._held = None
        return parts[0] if len(parts) == 1 else np.concatenate(parts)


def latent_kv_halves(n_head: int, k_width: int, v_width: int) -> tuple[np.ndarray, np.ndarray]:
    """The rows of DeepSeek's kv_b_proj ([heads][k_width key rows, v_width value rows][kv_lora_rank]) split into
    the key rows per head ([heads, k_width]) and the value rows, head by head ([heads * v_width])."""
    heads = np.arange(n_head * (k_width + v_width)).reshape(n_head, k_width + v_width)
    return heads[:, :k_width], heads[:, k_width:].reshape(-1)


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


# ---------------------------------------------------------------- steps that depend on the stored dtype
@dataclass(frozen=True)
class DtypeStep(ValueStep):
    """A step the converter computes in the tensor's stored dtype (torch arithmetic on the tensor as loaded, before
    its widening to f32): `by_dtype` gives the step's function for a stored dtype ("BF16", "F16"), `fn` the rest.
    The function gets the working values (BF16 widened to f32, hfview.views.to_working)."""
    by_dtype: tuple[tuple[str, Callable[[np.ndarray], np.ndarray]], ...] = ()

    def in_dtype(self, stored_dtype: str) -> ValueStep:
        fn = dict(self.by_dtype).get(stored_dtype)
        return ValueStep(self.name, fn) if fn is not None else self


def _bf16_rounded(x: np.ndarray) -> np.ndarray:
    """f32 values rounded to bf16 (nearest even), kept as f32."""
    return (bf16_bits(x).astype(np.uint32) << 16).view(np.float32)


def _minus_mean_f32(x: np.ndarray) -> np.ndarray:
    total = np.float32(0)
    for v in x.reshape(-1).astype(np.float32):  # torch's order over a short vector: one element after another
        total = np.float32(total + v)
    return (x - total / np.float32(x.size)).astype(x.dtype)


def _minus_mean_f16(x: np.ndarray) -> np.ndarray:
    # torch: the sum accumulated in f32 (exact over f16 values) rounded to f16, divided in f16, subtracted in f16
    mean = np.float16(np.float32(np.float16(np.float32(x.astype(np.float64).sum()))) / np.float32(x.size))
    return (x.astype(np.float32) - np.float32(mean)).astype(np.float16)


def _minus_mean_bf16(x: np.ndarray) -> np.ndarray:
    # torch: the sum accumulated in f32 (exact over bf16 values) rounded to bf16, divided and subtracted in bf16
    total = _bf16_rounded(np.array([x.astype(np.float64).sum()], dtype=np.float32))
    mean = _bf16_rounded(total / np.float32(x.size))
    return _bf16_rounded(x.astype(np.float32) - mean)


# x - x.mean() over a whole (1-D) tensor, as torch computes it on the tensor as stored (Sarvam-MoE's expert
# selection bias, which the converter centres). BF16 and F16 values sum exactly in f32, so their mean is torch's
# wherever the count is a power of two (every release: 128 experts); an F32 tensor's mean follows torch's
# one-by-one order, which torch's vectorised sum of a long vector (its order set by the CPU) may differ from by
# one unit in the last place.
MINUS_MEAN = DtypeStep("x - mean(x)", _minus_mean_f32, by_dtype=(("BF16", _minus_mean_bf16),
                                                                   ("F16", _minus_mean_f16)))



@dataclass
class ColumnsNormalised(View):
    """A 2-D weight with each column divided by its L2 norm over the rows, plus `eps`, in float32 (Ling 1.x's
    norm_head: the converter widens lm_head to f32 and divides it by torch.norm(w, p=2, dim=0) + 1e-7). A whole-
    tensor step: the column norms are made once, streaming the rows in blocks, each column's squares summed row
    after row in float32 as torch's CPU reduction over the first axis does; then each asked row is divided. Rows
    come back as float32 values (`values_dtype`), whatever the stored dtype."""
    source: StoredTensor
    eps: float = 1e-7
    block_rows: int = 4096
    values_dtype = "F32"
    _norms: np.ndarray | None = field(default=None, init=False, repr=False, compare=False)

    def __post_init__(self):
        if len(self.source.shape) != 2:
            raise CheckpointError(f"cannot normalise the columns of {self.source.name!r}: {len(self.source.shape)}-D")
        self.sources = (self.source,)
        self.shape = self.source.shape
        self.name = f"columns divided by their L2 norm + {self.eps!r} (f32)"

    def _working(self, start: int, stop: int) -> np.ndarray:
        return to_working(_flat_rows(self.source, start, stop), self.source.dtype).astype(np.float32, copy=False)

    def norms(self) -> np.ndarray:
        if self._norms is None:
            acc = np.zeros((1, self.shape[1]), dtype=np.float32)
            for lo in range(0, self.shape[0], self.block_rows):
                x = self._working(lo, min(lo + self.block_rows, self.shape[0]))
                # numpy's sum over axis 0 of a C-ordered block adds row after row: torch's order, acc first
                acc = np.concatenate([acc, x * x]).sum(axis=0, keepdims=True, dtype=np.float32)
            self._norms = np.sqrt(acc) + np.float32(self.eps)
        return self._norms

    def rows(self, start, stop):
        return self._working(start, stop) / self.norms()


@dataclass
class RowsPadded(View):
    """A 2-D weight with zero rows after its stored ones, up to `n_rows_out` (Gemma 3n's embeddings padded to
    vocab_size for the image and audio tokens past the text vocabulary, as the converter pads them)."""
    source: StoredTensor
    n_rows_out: int
    label: str = "padded with zero rows"

    def __post_init__(self):
        self.sources = (self.source,)
        if len(self.source.shape) != 2 or self.n_rows_out < self.source.shape[0]:
            raise CheckpointError(f"cannot pad {self.source.name!r} {list(self.source.shape)} to {self.n_rows_out} "
                                  f"rows")
        self.shape = (self.n_rows_out, self.source.shape[1])
        self.name = self.label

    def rows(self, start, stop):
        stored = self.source.shape[0]
        out = np.zeros((stop - start, self.shape[1]), self.source.numpy_dtype)
        if start < stored:
            out[:min(stop, stored) - start] = _flat_rows(self.source, start, min(stop, stored))
        return out


@dataclass
class RowsJoined(Stack):
    """Same-shaped matrices one after another along their rows, as one matrix (HyperCLOVA X's gate_proj and
    up_proj as llama.cpp glm4's fused ffn_up, [gate; up]). Read part by part as Stack reads its parts."""

    def __post_init__(self):
        super().__post_init__()
        first = self.parts[0]
        if len(first.shape) != 2:
            raise CheckpointError(f"cannot join the rows of {first.name!r} {list(first.shape)}: not a matrix")
        self.shape = (len(self.parts) * first.shape[0], first.shape[1])
        self.name = " then ".join(p.name for p in self.parts) + ", rows joined"


def tiled_kv_grouped(n_head: int, n_head_kv: int, head_dim: int) -> np.ndarray:
    """Query heads of a model whose KV heads are tiled over the query heads (query head h reads KV head
    h % n_head_kv: PLaMo's repeat of its shared KV heads) put in ggml's grouped order (query head j reads KV head
    j // (n_head / n_head_kv)), as indices over n_head x head_dim rows (q_proj) or columns (o_proj): presented head
    b * group + a is stored head a * n_head_kv + b. The converter's PlamoModel reshape to [group, n_head_kv,
    head_dim] and swap of the first two axes."""
    if n_head_kv < 1 or n_head % n_head_kv:
        raise CheckpointError(f"{n_head} query heads do not share {n_head_kv} KV heads evenly")
    return np.arange(n_head * head_dim).reshape(n_head // n_head_kv, n_head_kv, head_dim).swapaxes(0, 1).reshape(-1)


def fused_part(n_rows: int, part: int, parts: int, n_head: int | None = None) -> np.ndarray:
    """The rows of part `part` of `parts` equal consecutive parts of a fused weight (Baichuan's W_pack: all q rows,
    then all k rows, then all v rows), regrouped into rotation pairs over `n_head` heads where given (the llama
    permutation, rotation_pairs, applied within the part): indices for a RowSelection of the fused weight."""
    if n_rows % parts:
        raise CheckpointError(f"{n_rows} fused rows do not split into {parts} equal parts")
    size = n_rows // parts
    rows = part * size + np.arange(size)
    if n_head is None:
        return rows
    if size % (2 * n_head):
        raise CheckpointError(f"a part of {size} rows does not split into {n_head} heads of rotation pairs")
    return rows[rotation_pairs(size, n_head)]
# ---------------------------------------------------------------- exp (Ling 3.0's KDA decay rate)
def _exp(x: np.ndarray) -> np.ndarray:
    """exp(w) as the converter computes it (Ling 3.0's A_log, written as the decay rate itself): torch's
    exponential in the working dtype, for the reason _neg_exp gives; without torch, the correctly rounded value."""
    from .torch_exp import torch_exp

    e = torch_exp(x)
    return np.exp(x.astype(np.float64)).astype(x.dtype) if e is None else e


EXP = ValueStep("exp(w)", _exp)


# ---------------------------------------------------------------- block-scaled FP8 (quant_method "fp8")
def _e4m3_table() -> np.ndarray:
    """The 256 float8_e4m3fn values as float32, bit for bit as torch's CPU `.float()` gives them (c10's
    fp8e4m3fn_to_fp32_value, whose NaN is 0x7FF00000 with the sign): exact, since each is a float32."""
    w = np.arange(256, dtype=np.uint32) << 24
    sign, nonsign = w & np.uint32(0x80000000), (w & 0x7FFFFFFF).astype(np.int64)
    leading_zeros = np.where(nonsign > 0, 31 - np.floor(np.log2(np.maximum(nonsign, 1))).astype(np.int64), 32)
    renorm = np.where(leading_zeros > 4, leading_zeros - 4, 0)  # subnormals shifted to normal form
    inf_nan = np.where(nonsign + 0x01000000 >= 2 ** 31, 0x7F800000, 0)
    value = (((nonsign << renorm) >> 4) + ((0x78 - renorm) << 23)) | inf_nan
    return (sign | np.where(nonsign == 0, 0, value & 0xFFFFFFFF).astype(np.uint32)).view(np.float32)


E4M3 = _e4m3_table()


def _e5m2_table() -> np.ndarray:
    """The 256 float8_e5m2 values as float32, as torch's CPU `.float()` gives them: the upper byte of an IEEE half
    (c10's fp8e5m2_to_fp32_value), widened exactly, every NaN quiet."""
    bits = (np.arange(256, dtype=np.uint16) << 8).view(np.float16).astype(np.float32).view(np.uint32)
    nan = (bits & 0x7F800000) == 0x7F800000
    nan &= (bits & 0x007FFFFF) != 0
    return np.where(nan, bits | np.uint32(0x00400000), bits).astype(np.uint32).view(np.float32)


E5M2 = _e5m2_table()


def _as_f32(raw: np.ndarray, dtype: str) -> np.ndarray:
    """A stored tensor's values as torch's `.float()` gives them."""
    if dtype == "F8_E4M3":
        return E4M3[raw]
    if dtype == "F8_E5M2":
        return E5M2[raw]
    if dtype.startswith("F8_"):
        raise CheckpointError(f"{dtype} weights are not read (the FP8 forms read are e4m3 and e5m2)")
    return to_working(raw, dtype).astype(np.float32, copy=False)


def _times_blocks_of_last_axis(values: np.ndarray, scale: np.ndarray, block: int) -> None:
    """values *= scale, each scale along the last axis standing for `block` values (the last block may be cut
    short), without widening the scale to the values' size."""
    width = values.shape[-1]
    whole = width // block
    if block == 1:
        values *= scale
        return
    if whole:
        body = np.lib.stride_tricks.as_strided(
            values, (*values.shape[:-1], whole, block), (*values.strides[:-1], block * values.strides[-1],
                                                           values.strides[-1]), writeable=True)
        body *= scale[..., :whole, None]
    if width > whole * block:
        values[..., whole * block:] *= scale[..., whole:whole + 1]


@dataclass(frozen=True)
class FP8Dequantized(StoredTensor):
    """A weight stored as FP8 with its float32 scale (`weight_scale_inv`), read as the converter's dequant_model
    computes it: weight.float() * scale, the scale repeated over its `block` (each of the weight's last
    len(block) axes, trimmed where a width is not whole blocks) or, with no block, broadcast from its leading
    axes (a per-tensor or per-row scale). Computed on read, a row range at a time; it stands in for the stored
    weight (dtype F32, as the converter sees it), so every view over it works unchanged."""
    weight: StoredTensor | None = None
    scale: StoredTensor | None = None
    block: tuple[int, ...] | None = None
    scale_label: str = "weight_scale_inv"  # how the checkpoint names its scale (inspect's account)

    @classmethod
    def of(cls, weight: StoredTensor, scale: StoredTensor, block: tuple[int, ...] | None,
           scale_label: str = "weight_scale_inv") -> "FP8Dequantized":
        w, s = weight.shape, scale.shape
        if block is not None:
            lead = len(w) - len(block)
            want = (*w[:lead], *(-(-n // b) for n, b in zip(w[lead:], block)))
            if lead < 0 or s != want:
                raise CheckpointError(
                    f"{scale.path.name}: scale {scale.name!r} has shape {list(s)}; weight {weight.name!r} "
                    f"{list(w)} in blocks of {list(block)} (weight_block_size) needs {list(want)}")
        elif len(s) > len(w) or any(a not in (1, b) for a, b in zip(s, w)):
            raise CheckpointError(f"{scale.path.name}: scale {scale.name!r} has shape {list(s)}, which does not "
                                  f"broadcast over weight {weight.name!r} {list(w)} from its leading axes")
        if weight.dtype.startswith("F8_") and weight.dtype not in ("F8_E4M3", "F8_E5M2"):
            raise CheckpointError(f"{weight.path.name}: weight {weight.name!r} is stored as {weight.dtype}; of the "
                                  f"FP8 formats hfview reads e4m3 (F8_E4M3) and e5m2 (F8_E5M2)")
        if scale.dtype not in ("F32", "BF16", "F16"):
            raise CheckpointError(f"{scale.path.name}: scale {scale.name!r} is stored as {scale.dtype}; "
                                  f"hfview reads float scales")
        return cls(weight.name, weight.path, "F32", w, weight.offset, math.prod(w) * 4, weight.stamp,
                   weight=weight, scale=scale, block=block, scale_label=scale_label)

    def read_rows(self, start: int, stop: int) -> np.ndarray:
        w, s = self.weight, self.scale
        if not self.shape:
            return _as_f32(w.read_rows(0, 0), w.dtype) * _as_f32(s.read_rows(0, 0), s.dtype)
        values = _as_f32(w.read_rows(start, stop), w.dtype)
        if not values.flags.writeable:
            values = values.copy()
        # float32 times float32, rounded once, as torch multiplies them; in place, the scale never widened to the
        # weight's size (it would double a read's memory)
        if self.block is None:
            scale = _as_f32(s.read_rows(0, s.shape[0]) if s.shape else s.read_rows(0, 0), s.dtype)
            scale = scale.reshape(*scale.shape, *(1,) * (len(self.shape) - scale.ndim))
            if scale.ndim and scale.shape[0] > 1:
                scale = scale[start:stop]
            values *= scale
        elif stop > start:
            lead = len(self.shape) - len(self.block)
            # each axis' scale index: the element's block (a blocked axis) or the element itself
            steps = [(1 if i < lead else self.block[i - lead]) for i in range(len(self.shape))]
            first = start // steps[0]
            scale = _as_f32(s.read_rows(first, (stop - 1) // steps[0] + 1), s.dtype)
            # widened along every axis but the last, whose blocks are broadcast over
            index = [np.arange(start, stop) // steps[0] - first,
                     *(np.arange(n) // b for n, b in zip(self.shape[1:-1], steps[1:-1])), slice(None)]
            scale = scale[np.ix_(*index[:-1])] if len(index) > 1 else scale
            _times_blocks_of_last_axis(values, scale, steps[-1] if len(steps) > 1 else 1)
        return values

    def read_rows_into(self, start: int, stop: int, out: np.ndarray) -> None:
        out[...] = self.read_rows(start, stop).reshape(out.shape)


def scale_dequantized(stored: dict[str, StoredTensor], scales: Sequence[tuple[str, str]],
                      block: tuple[int, ...] | None, dropped: Sequence[str] = (),
                      orphan_scales_dropped: bool = False, unread: Sequence[str] = ()) -> dict[str, StoredTensor]:
    """The tensors the converter's dequant_model leaves, in its order: each weight with a scale beside it (a name
    ending in one of `scales`' suffixes, the weight named by replacing it with its pair) read dequantized where it
    stands (FP8Dequantized), the scales consumed, the unused ones (`dropped` suffixes) removed. A scale with no
    weight is a missing shard, or (`orphan_scales_dropped`, ModelOpt) removed as the converter removes it. A tensor
    ending in one of `unread` is one the converter leaves as it is and then fails to map: refused as it fails."""
    out = dict(stored)
    for name, scale in stored.items():
        suffix = next(((s, w) for s, w in scales if name.endswith(s)), None)
        if suffix is None and unread and name.endswith(tuple(unread)):
            raise CheckpointError(f"{scale.path.name}: tensor {name!r} (shape {list(scale.shape)}) is a quantization "
                                  f"parameter the pinned converter does not read for this form: it fails on it (\"Can "
                                  f"not map tensor {name!r}\"), and hfview refuses the checkpoint as it does")
        if suffix is None:
            if dropped and name.endswith(tuple(dropped)):
                del out[name]
            continue
        weight = name.removesuffix(suffix[0]) + suffix[1]
        del out[name]
        if weight not in stored:
            if orphan_scales_dropped:
                continue
            raise CheckpointError(f"{scale.path.name}: scale {name!r} has no weight {weight!r} beside it; "
                                  f"a shard may be missing")
        out[weight] = FP8Dequantized.of(stored[weight], scale, block, suffix[0].lstrip("."))
    return out


def fp8_dequantized(stored: dict[str, StoredTensor], block: tuple[int, ...] | None) -> dict[str, StoredTensor]:
    """quant_method "fp8" (scale_dequantized): `<weight>_scale_inv` (Mistral's own format: `qscale_weight`), the
    unused activation scales (`.activation_scale`, `_activation_scale`, `.qscale_act`) dropped."""
    return scale_dequantized(stored, (("_scale_inv", ""), (".qscale_weight", ".weight")), block,
                             (".activation_scale", "_activation_scale", ".qscale_act"))


# ---------------------------------------------------------------- GPTQ (quant_method "gptq")
def _stored_columns(t: StoredTensor, start: int, stop: int) -> np.ndarray:
    """Columns [start, stop) of a stored 2-D tensor, every row: where they are a small part of each row, only they
    are read (one positioned read a row), not the whole tensor."""
    from .shards import _open_shard, pread_into

    rows, cols = t.shape
    if (stop - start) * 4 >= cols or rows <= 1:
        return t.read()[:, start:stop]
    item = t.numpy_dtype.itemsize
    out = np.empty((rows, stop - start), t.numpy_dtype)
    fd = _open_shard(t, t.offset)
    try:
        for r in range(rows):
            at = t.offset + (r * cols + start) * item
            if pread_into(fd, memoryview(out[r]).cast("B"), at) != (stop - start) * item:
                raise CheckpointError(f"{t.path}: shard is truncated: tensor {t.name!r} needs bytes from {at}, the "
                                      f"file ends first; re-download it")
    finally:
        os.close(fd)
    return out


@dataclass(frozen=True)
class GPTQDequantized(StoredTensor):
    """A linear weight stored as GPTQ packs it, read as the converter's dequant_gptq computes it: `qweight` int32
    [in x bits / 32, out] (the codes of 32 / bits inputs a word, the lowest bits first), `qzeros` int32 [groups,
    out x bits / 32] packed alike along the outputs, `scales` [groups, out], `g_idx` int32 [in] (each input's group);
    weight[o, i] = scales[g_idx[i], o] x (code[i, o] - (zero[g_idx[i], o] + zero_offset)) in float32 (exact: a 16-bit
    scale times a small integer), presented outputs-first [out, in] as F32. Computed on read, a row range at a time;
    each read unpacks only its rows' columns."""
    qweight: StoredTensor | None = None
    qzeros: StoredTensor | None = None
    scales: StoredTensor | None = None
    g_idx: StoredTensor | None = None
    bits: int = 4
    zero_offset: int = 1

    @classmethod
    def of(cls, name: str, qweight: StoredTensor, qzeros: StoredTensor, scales: StoredTensor, g_idx: StoredTensor,
           bits: int, zero_offset: int) -> "GPTQDequantized":
        pack = 32 // bits
        where = qweight.path.name
        if qweight.dtype != "I32" or qzeros.dtype != "I32" or g_idx.dtype not in ("I32", "I64"):
            raise CheckpointError(f"{where}: GPTQ {name!r}: qweight {qweight.dtype}, qzeros {qzeros.dtype}, g_idx "
                                  f"{g_idx.dtype}; GPTQ packs its codes and zeros in I32 words")
        if scales.dtype not in ("F16", "BF16", "F32"):
            raise CheckpointError(f"{where}: GPTQ scales {scales.name!r} are stored as {scales.dtype}; hfview "
                                  f"reads float scales")
        if len(qweight.shape) != 2 or len(scales.shape) != 2 or len(qzeros.shape) != 2 or len(g_idx.shape) != 1:
            raise CheckpointError(f"{where}: GPTQ {name!r}: qweight {list(qweight.shape)}, qzeros "
                                  f"{list(qzeros.shape)}, scales {list(scales.shape)}, g_idx {list(g_idx.shape)} "
                                  f"are not the 2-D, 2-D, 2-D and 1-D tensors GPTQ writes")
        n_in, n_out = qweight.shape[0] * pack, qweight.shape[1]
        groups = scales.shape[0]
        if (scales.shape[1] != n_out or tuple(qzeros.shape) != (groups, n_out // pack) or n_out % pack
                or g_idx.shape[0] != n_in):
            raise CheckpointError(f"{where}: GPTQ {name!r} at {bits} bits: qweight {list(qweight.shape)} holds "
                                  f"[{n_in}, {n_out}], which needs qzeros [{groups}, {n_out // pack}], scales "
                                  f"[{groups}, {n_out}] and g_idx [{n_in}]; found {list(qzeros.shape)}, "
                                  f"{list(scales.shape)}, {list(g_idx.shape)}")
        return cls(name, qweight.path, "F32", (n_out, n_in), qweight.offset, n_out * n_in * 4, qweight.stamp,
                   qweight=qweight, qzeros=qzeros, scales=scales, g_idx=g_idx, bits=bits, zero_offset=zero_offset)

    def _unpacked(self, words: np.ndarray) -> np.ndarray:
        """Packed int32 words [..., n] -> their codes [..., n, 32 / bits], the lowest bits first."""
        shifts = np.arange(0, 32, self.bits, dtype=np.uint32)
        return (words.view(np.uint32)[..., None] >> shifts) & np.uint32((1 << self.bits) - 1)

    def read_rows(self, start: int, stop: int) -> np.ndarray:
        g_idx = self.g_idx.read().astype(np.int64)
        if g_idx.size and not 0 <= int(g_idx.min()) <= int(g_idx.max()) < self.scales.shape[0]:
            raise CheckpointError(f"{self.g_idx.path.name}: GPTQ g_idx {self.g_idx.name!r} names groups up to "
                                  f"{int(g_idx.max())}, but its scales hold {self.scales.shape[0]}")
        pack = 32 // self.bits
        words = _stored_columns(self.qweight, start, stop)                     # [in / pack, rows]
        codes = self._unpacked(words.T).reshape(stop - start, -1)              # [rows, in]
        z_lo, z_hi = start // pack, -(-stop // pack)
        zeros = self._unpacked(_stored_columns(self.qzeros, z_lo, z_hi)).reshape(self.scales.shape[0], -1)
        zeros = zeros[:, start - z_lo * pack:stop - z_lo * pack].T.astype(np.int32) + self.zero_offset  # [rows, g]
        scales = _as_f32(_stored_columns(self.scales, start, stop), self.scales.dtype).T               # [rows, g]
        return scales[:, g_idx] * (codes.astype(np.int32) - zeros[:, g_idx]).astype(np.float32)

    def read_rows_into(self, start: int, stop: int, out: np.ndarray) -> None:
        out[...] = self.read_rows(start, stop).reshape(out.shape)


def gptq_dequantized(stored: dict[str, StoredTensor], bits: int, zero_offset: int) -> dict[str, StoredTensor]:
    """The tensors the converter's dequant_model leaves for quant_method "gptq": each `<module>.qweight` with its
    qzeros, scales and g_idx consumed, and `<module>.weight` (GPTQDequantized) added after every other tensor, in
    the order of the qweights (as it adds the new tensors to the end of its list)."""
    added: dict[str, StoredTensor] = {}
    parts = (".qweight", ".qzeros", ".scales", ".g_idx")
    for name, t in stored.items():
        if name.endswith(".qweight"):
            base = name.removesuffix(".qweight")
            missing = [base + p for p in parts[1:] if base + p not in stored]
            if missing:
                raise CheckpointError(f"{t.path.name}: GPTQ {name!r} has no {missing[0]!r} beside it; a shard may "
                                      f"be missing")
            added[base + ".weight"] = GPTQDequantized.of(base + ".weight", t, *(stored[base + p] for p in parts[1:]),
                                                         bits, zero_offset)
    consumed = {base.removesuffix(".weight") + p for base in added for p in parts}
    out = {n: t for n, t in stored.items() if n not in consumed}
    for name, t in added.items():
        out[name] = t  # at the end, or (a stored tensor of that name) in its place, as a dict assignment puts it
    return out


# ---------------------------------------------------------------- compressed-tensors pack-quantized
@dataclass(frozen=True)
class PackedIntDequantized(StoredTensor):
    """A linear weight as compressed-tensors' pack-quantized stores it, read as the converter's dequant_packed
    computes it: `packed` int32 [out, ceil(in x bits / 32)] (32 / bits codes a word along the inputs, the lowest
    bits first), `scale` [out, in / group_size], `zero_point` int32 [ceil(out x bits / 32), groups] packed along the
    outputs (or, with none, the codes offset by 2^(bits - 1)), `weight_shape` [out, in]; weight = (code - zero) x
    scale in float32 (exact), as F32 [out, in]. Computed on read, a row range at a time."""
    packed: StoredTensor | None = None
    scale: StoredTensor | None = None
    zero_point: StoredTensor | None = None
    weight_shape: StoredTensor | None = None
    bits: int = 4
    group_size: int = 128

    @classmethod
    def of(cls, name: str, packed: StoredTensor, scale: StoredTensor, zero_point: StoredTensor | None,
           weight_shape: StoredTensor, bits: int, group_size: int) -> "PackedIntDequantized":
        pack, where = 32 // bits, packed.path.name
        if packed.dtype != "I32" or (zero_point is not None and zero_point.dtype != "I32"):
            raise CheckpointError(f"{where}: pack-quantized {name!r}: weight_packed {packed.dtype}"
                                  + (f", weight_zero_point {zero_point.dtype}" if zero_point is not None else "")
                                  + "; compressed-tensors packs its codes in I32 words")
        if scale.dtype not in ("F16", "BF16", "F32"):
            raise CheckpointError(f"{where}: scale {scale.name!r} is stored as {scale.dtype}; hfview reads float "
                                  f"scales")
        if len(packed.shape) != 2 or len(scale.shape) != 2 or scale.shape[0] != packed.shape[0]:
            raise CheckpointError(f"{where}: pack-quantized {name!r}: weight_packed {list(packed.shape)} and "
                                  f"weight_scale {list(scale.shape)} are not [out, words] and [out, groups]")
        n_out, n_in = packed.shape[0], scale.shape[1] * group_size
        if -(-n_in // pack) != packed.shape[1] or (zero_point is not None and tuple(zero_point.shape) != (
                -(-n_out // pack), scale.shape[1])):
            raise CheckpointError(f"{where}: pack-quantized {name!r}: weight_scale {list(scale.shape)} in groups of "
                                  f"{group_size} makes [{n_out}, {n_in}], which weight_packed {list(packed.shape)}"
                                  + (f" and weight_zero_point {list(zero_point.shape)}" if zero_point is not None
                                     else "") + f" at {bits} bits do not hold")
        return cls(name, packed.path, "F32", (n_out, n_in), packed.offset, n_out * n_in * 4, packed.stamp,
                   packed=packed, scale=scale, zero_point=zero_point, weight_shape=weight_shape, bits=bits,
                   group_size=group_size)

    def _codes(self, words: np.ndarray) -> np.ndarray:
        shifts = np.arange(0, 32 - (self.bits - 1), self.bits, dtype=np.uint32)
        return ((words.view(np.uint32)[..., None] >> shifts) & np.uint32((1 << self.bits) - 1)).astype(np.int32)

    def read_rows(self, start: int, stop: int) -> np.ndarray:
        stated = tuple(int(v) for v in self.weight_shape.read().reshape(-1))
        if stated != tuple(self.shape):
            raise CheckpointError(f"{self.weight_shape.path.name}: {self.weight_shape.name!r} states {list(stated)}, "
                                  f"but its weight_packed and weight_scale hold {list(self.shape)}")
        n, groups = stop - start, self.scale.shape[1]
        codes = self._codes(self.packed.read_rows(start, stop)).reshape(n, -1)[:, :self.shape[1]]
        codes = codes.reshape(n, groups, self.group_size)
        if self.zero_point is None:
            offset = np.int32(1 << (self.bits - 1))
        else:
            pack = 32 // self.bits
            lo, hi = start // pack, -(-stop // pack)
            zeros = self._codes(self.zero_point.read_rows(lo, hi).T)  # [groups, words, pack]
            offset = zeros.reshape(groups, -1).T[start - lo * pack:stop - lo * pack, :, None]
        scale = _as_f32(self.scale.read_rows(start, stop), self.scale.dtype)[:, :, None]
        return ((codes - offset).astype(np.float32) * scale).reshape(n, self.shape[1])

    def read_rows_into(self, start: int, stop: int, out: np.ndarray) -> None:
        out[...] = self.read_rows(start, stop).reshape(out.shape)


def pack_dequantized(stored: dict[str, StoredTensor], bits: int, group_size: int) -> dict[str, StoredTensor]:
    """The tensors the converter's dequant_model leaves for compressed-tensors pack-quantized: each
    `<module>.weight_packed` with its weight_scale, weight_shape and weight_zero_point consumed, and
    `<module>.weight` (PackedIntDequantized) added after every other tensor, as it adds the new tensors."""
    added: dict[str, StoredTensor] = {}
    for name, t in stored.items():
        if name.endswith(".weight_packed"):
            base = name.removesuffix("_packed")
            missing = [base + p for p in ("_scale", "_shape") if base + p not in stored]
            if missing:
                raise CheckpointError(f"{t.path.name}: {name!r} has no {missing[0]!r} beside it; a shard may be "
                                      f"missing")
            added[base] = PackedIntDequantized.of(base, t, stored[base + "_scale"], stored.get(base + "_zero_point"),
                                                  stored[base + "_shape"], bits, group_size)
    consumed = {base + p for base in added for p in ("_packed", "_scale", "_shape", "_zero_point")}
    out = {n: t for n, t in stored.items() if n not in consumed}
    for name, t in out.items():
        if name.endswith(("_g_idx", ".input_scale", "_zero_point")):  # (activation order, static inputs)
            raise CheckpointError(f"{t.path.name}: tensor {name!r} (shape {list(t.shape)}) is a quantization "
                                  f"parameter the pinned converter does not read for pack-quantized weights: it "
                                  f"fails on it (\"Can not map tensor {name!r}\"), and hfview refuses the checkpoint "
                                  f"as it does")
    for name, t in added.items():
        out[name] = t
    return out


# ---------------------------------------------------------------- BitNet b1.58 (quant_method "bitnet", weight_quant)
def _torch_mean_abs(values: np.ndarray) -> np.float32:
    """mean(|w|) over a whole float32 tensor, as the converter's weight_quant computes it with torch: torch's own
    reduction where torch is installed (its summation order is not numpy's, and the sum's last bit reaches every
    value of the tensor), else the correctly rounded mean (which differs from torch's in that bit for 18 of the 42
    projections of tests/test_family_bitnet.py's fixtures: without torch those bytes are not the converter's)."""
    try:
        import torch
    except ImportError:
        return np.float32(np.abs(values.astype(np.float64)).mean())
    return np.float32(torch.from_numpy(np.ascontiguousarray(values, np.float32)).abs().mean().item())


@dataclass
class Ternarized(View):
    """A BitNet b1.58 projection as the converter's BitnetModel.weight_quant writes it: with s = mean(|w|) over the
    whole tensor (at least 1e-5) and i = 1 / s in float32, each value becomes clamp(round(w x i), -1, 1) / i, computed
    in float32 and given in `values_dtype`. Note: on weights that are already ternary
    (q / scale, a packed release dequantized) it is not the identity: it gives q x mean(|q / scale|), the ternary
    values times the fraction of them that are nonzero. A whole-tensor step: s is made once, from every row."""
    source: StoredTensor
    _inverse: np.float32 | None = field(default=None, init=False, repr=False, compare=False)

    def __post_init__(self):
        self.sources = (self.source,)
        self.shape = self.source.shape
        self.name = "ternary: clamp(round(w / mean|w|), -1, 1) x mean|w| (weight_quant)"

    def _working(self, start: int, stop: int) -> np.ndarray:
        return to_working(_flat_rows(self.source, start, stop), self.source.dtype).astype(np.float32, copy=False)

    def inverse_scale(self) -> np.float32:
        if self._inverse is None:
            scale = max(_torch_mean_abs(self._working(0, self.n_rows)), np.float32(1e-5))
            self._inverse = np.float32(1) / scale
        return self._inverse

    @property
    def values_dtype(self) -> str:
        """The dtype the converter hands weight_quant, which it casts back to: float16 as stored, the rest (bfloat16
        included) widened to float32 first (prepare_tensors)."""
        return "F16" if self.source.dtype == "F16" else "F32"

    def rows(self, start, stop):
        i = self.inverse_scale()
        values = np.clip(np.round(self._working(start, stop) * i), -1, 1) / i
        return values.astype(np.float16 if self.values_dtype == "F16" else np.float32, copy=False)


# ---------------------------------------------------------------- MXFP4 (quant_method "mxfp4": gpt-oss's experts)
@dataclass(frozen=True)
class MXFP4Pair(StoredTensor):
    """A weight stored as OpenAI's MXFP4 pair, standing in under the name of the unquantized weight (`<name>` for
    `<name>_blocks` and `<name>_scales`) with its shape in elements, [experts, rows, cols]: `blocks` uint8
    [experts, rows, cols / 32, 16] holds two e2m1 codes a byte (element 2i in the low nibble, 2i + 1 in the high),
    `scales` uint8 [experts, rows, cols / 32] one e8m0 exponent per 32 elements. Its rows are never widened:
    MXFP4Rows moves their bits into ggml's blocks."""
    blocks: StoredTensor | None = None
    scales: StoredTensor | None = None

    @classmethod
    def of(cls, name: str, blocks: StoredTensor, scales: StoredTensor) -> "MXFP4Pair":
        b, s = blocks.shape, scales.shape
        if blocks.dtype != "U8" or scales.dtype != "U8":
            raise CheckpointError(f"{blocks.path.name}: MXFP4 pair {blocks.name!r} ({blocks.dtype}) and "
                                  f"{scales.name!r} ({scales.dtype}): both are stored as U8 in the MXFP4 form")
        if len(b) < 2 or b[-1] != 16 or tuple(s) != tuple(b[:-1]):
            raise CheckpointError(f"{blocks.path.name}: MXFP4 blocks {blocks.name!r} {list(b)} and scales "
                                  f"{scales.name!r} {list(s)}: blocks are [..., groups, 16] and scales [..., groups]")
        shape = (*b[:-2], b[-2] * 32)
        return cls(name, blocks.path, "MXFP4", shape, blocks.offset, blocks.nbytes + scales.nbytes, blocks.stamp,
                   blocks=blocks, scales=scales)

    def _flat(self, t: StoredTensor, width: int) -> StoredTensor:
        """`t` as [rows, width]: row r of the weight (counted over its leading axes) is its row r."""
        return StoredTensor(t.name, t.path, t.dtype, (math.prod(self.shape[:-1]), width), t.offset, t.nbytes,
                            t.stamp)

    def packed_rows(self, start: int, stop: int) -> tuple[np.ndarray, np.ndarray]:
        """Rows [start, stop) (over all but the last axis): their blocks [n, groups, 16] and scales [n, groups]."""
        groups = self.shape[-1] // 32
        blocks = self._flat(self.blocks, groups * 16).read_rows(start, stop).reshape(-1, groups, 16)
        return blocks, self._flat(self.scales, groups).read_rows(start, stop)


def mxfp4_blocks(blocks: np.ndarray, scales: np.ndarray) -> np.ndarray:
    """OpenAI's MXFP4 rows ([n, groups, 16] codes, [n, groups] exponents) as ggml's block_mxfp4 rows, [n, groups x
    17]: per 32 elements the exponent byte, then 16 bytes whose byte j holds element j in the low nibble and
    element j + 16 in the high one. Only bits move (both index e2m1 the same way): lossless."""
    n, groups = scales.shape
    codes = np.empty((n, groups, 32), np.uint8)
    codes[..., 0::2] = blocks & 0x0F
    codes[..., 1::2] = blocks >> 4
    out = np.empty((n, groups, 17), np.uint8)
    out[..., 0] = scales
    np.bitwise_or(codes[..., :16], codes[..., 16:] << 4, out=out[..., 1:])
    return out.reshape(n, groups * 17)


@dataclass
class MXFP4Rows(View):
    """An MXFP4 weight presented as ggml's MXFP4 (`packed_type`), its bits moved into ggml's blocks on read
    (mxfp4_blocks): every row, or with `order` only those rows of each expert, in that order (gpt-oss's gate or up:
    the even or odd rows of each expert's interleaved gate_up)."""
    source: MXFP4Pair
    order: np.ndarray | None = None
    label: str = ""
    packed_type = GGMLType.MXFP4

    def __post_init__(self):
        src = self.source.shape
        self.sources = (self.source,)
        per = src[-2] if len(src) > 1 else 1
        if self.order is not None and len(self.order) and not 0 <= int(self.order.min()) <= int(self.order.max()) < per:
            raise CheckpointError(f"cannot pick rows of {self.source.name!r}: each expert has {per}")
        self.shape = src if self.order is None else (*src[:-2], len(self.order), src[-1])
        self.name = "MXFP4 blocks repacked as ggml's (lossless)" + (f", {self.label}" if self.label else "")

    def rows(self, start, stop):
        if self.order is None:
            return mxfp4_blocks(*self.source.packed_rows(start, stop))
        width, per = self.shape[-2], self.source.shape[-2]
        picked = np.arange(start, stop)
        stored = picked // width * per + self.order[picked % width]
        lo, hi = int(stored.min()), int(stored.max()) + 1
        blocks, scales = self.source.packed_rows(lo, hi)
        return mxfp4_blocks(blocks[stored - lo], scales[stored - lo])


def mxfp4_paired(stored: dict[str, StoredTensor]) -> dict[str, StoredTensor]:
    """gpt-oss's MXFP4 experts as the converter takes them (GptOssModel.generate_extra_tensors): each
    `<name>_blocks` / `<name>_scales` pair one MXFP4Pair named `<name>`, the pairs first, in the order of their
    scales (where the converter writes each), then every other tensor in its order."""
    pairs: dict[str, StoredTensor] = {}
    position = {name: i for i, name in enumerate(stored)}
    for name, t in stored.items():
        if not name.endswith("_scales"):
            continue
        base = name.removesuffix("_scales")
        blocks = stored.get(base + "_blocks")
        if blocks is None:
            raise CheckpointError(f"{t.path.name}: MXFP4 scales {name!r} have no blocks {base + '_blocks'!r} beside "
                                  f"them; a shard may be missing")
        if position[base + "_blocks"] > position[name]:
            raise CheckpointError(f"{t.path.name}: MXFP4 scales {name!r} come before their blocks in the "
                                  f"checkpoint's tensor order; the converter pairs each with the blocks before it")
        pairs[base] = MXFP4Pair.of(base, blocks, t)
    orphans = [n for n in stored if n.endswith("_blocks") and n.removesuffix("_blocks") not in pairs]
    if orphans:
        raise CheckpointError(f"MXFP4 blocks {orphans[0]!r} have no scales {orphans[0].removesuffix('_blocks') + '_scales'!r} "
                              f"beside them; a shard may be missing")
    paired = {p + s for p in pairs for s in ("_blocks", "_scales")}
    return {**pairs, **{n: t for n, t in stored.items() if n not in paired}}


# ---------------------------------------------------------------- NVFP4 (ModelOpt, compressed-tensors nvfp4-pack-quantized)
@dataclass(frozen=True)
class NVFP4Pair(StoredTensor):
    """A linear weight stored as NVFP4, standing in under its weight's name with its shape in elements [out, in]:
    `weight` uint8 [out, in / 2] (two e2m1 codes a byte, element 2i in the low nibble), `scale` e4m3 [out, in / 16]
    (one per 16 elements); beside them the per-tensor `scale_2` (ModelOpt's weight_scale_2, or compressed-tensors'
    weight_global_scale, its reciprocal) and `input_scale` (input_global_scale), which the converter writes as
    tensors of their own. `position`: the weight's place in the checkpoint's tensor order (the converter repacks in
    that order). Its rows are never widened: NVFP4Rows moves their bits into ggml's blocks."""
    weight: StoredTensor | None = None
    scale: StoredTensor | None = None
    scale_2: StoredTensor | None = None
    input_scale: StoredTensor | None = None
    inverted: bool = False  # compressed-tensors' global scales: the converter writes 1 / x
    position: int = 0
    # Gemma 4's router.per_expert_scale and this expert's index in it, folded into scale_2 (nvfp4_router_folded)
    fold: StoredTensor | None = None
    fold_index: int = 0

    @classmethod
    def of(cls, name: str, weight: StoredTensor, scale: StoredTensor, scale_2: StoredTensor | None,
           input_scale: StoredTensor | None, inverted: bool, position: int) -> "NVFP4Pair":
        w, s, where = weight.shape, scale.shape, weight.path.name
        if weight.dtype != "U8" or scale.dtype not in ("F8_E4M3", "U8"):
            raise CheckpointError(f"{where}: NVFP4 weight {weight.name!r} ({weight.dtype}) and scale {scale.name!r} "
                                  f"({scale.dtype}): NVFP4 stores U8 codes and F8_E4M3 block scales")
        if len(w) != 2 or len(s) != 2 or s[0] != w[0] or w[1] != s[1] * 8:
            raise CheckpointError(f"{where}: NVFP4 weight {weight.name!r} {list(w)} and scale {scale.name!r} "
                                  f"{list(s)}: an NVFP4 weight is [out, in / 2] with a scale [out, in / 16]")
        if s[1] % 4:
            # _nvfp4_pack groups 4 blocks into each 64-element super-block and reshapes without a remainder
            raise CheckpointError(f"{where}: NVFP4 weight {weight.name!r} is {s[1] * 16} wide, not whole 64-element "
                                  f"blocks: the pinned converter's _nvfp4_pack fails on it (\"cannot reshape array\"), "
                                  f"and ggml's NVFP4 holds 64 elements a block")
        for t in (scale_2, input_scale):
            if t is not None and (t.dtype not in ("F32", "BF16", "F16") or math.prod(t.shape) < 1):
                raise CheckpointError(f"{t.path.name}: NVFP4 per-tensor scale {t.name!r} ({t.dtype} {list(t.shape)}) "
                                      f"is not a float tensor")
        return cls(name, weight.path, "NVFP4", (w[0], w[1] * 2), weight.offset, weight.nbytes + scale.nbytes,
                   weight.stamp, weight=weight, scale=scale, scale_2=scale_2, input_scale=input_scale,
                   inverted=inverted, position=position)

    def per_tensor(self, which: str) -> np.ndarray | None:
        """scale_2 or input_scale, flattened, as float32 the way the converter writes it (1 / x where inverted);
        None where the checkpoint has none (the converter takes 1)."""
        t = getattr(self, which)
        if t is None:
            return None
        values = _as_f32(t.read_rows(0, t.shape[0]) if t.shape else t.read_rows(0, 0), t.dtype).reshape(-1)
        values = (np.float32(1) / values).astype(np.float32) if self.inverted else values.astype(np.float32)
        if which == "scale_2" and self.fold is not None:
            # the converter's `s() * r()[i]`: torch's product of two 0-dim tensors, float32 unless both are one
            # 16-bit type (an inverted scale is float32 already)
            r = self.fold
            factor = _as_f32(r.read_rows(0, r.shape[0]), r.dtype).reshape(-1)[self.fold_index]
            values = (values * factor).astype(np.float32)
            kept = "F32" if self.inverted else t.dtype
            if kept == r.dtype == "BF16":
                values = _bf16_rounded(values)
            elif kept == r.dtype == "F16":
                values = values.astype(np.float16).astype(np.float32)
        return values

    def per_tensor_label(self, which: str) -> str:
        """Where a per-tensor scale's values come from (inspect's account)."""
        t = getattr(self, which)
        label = f"{'1 / ' if self.inverted else ''}{t.name}" if t is not None else "1"
        return f"{label} x {self.fold.name}[{self.fold_index}]" if which == "scale_2" and self.fold is not None \
            else label

    def packed_rows(self, start: int, stop: int) -> np.ndarray:
        """Rows [start, stop) as ggml's NVFP4 blocks (nvfp4_blocks)."""
        return nvfp4_blocks(self.weight.read_rows(start, stop), self.scale.read_rows(start, stop))


def nvfp4_blocks(codes: np.ndarray, scales: np.ndarray) -> np.ndarray:
    """NVFP4 rows ([n, in / 2] codes, [n, in / 16] e4m3 scales) as ggml's block_nvfp4 rows, [n, in / 64 x 36]: per
    64 elements the four 16-block scales' bits (sign dropped: ggml's unsigned e4m3), then 32 bytes, 8 per 16-block,
    byte j of a 16-block holding element j in the low nibble and element j + 8 in the high one. Only bits move
    (both index e2m1 the same way): lossless."""
    n, blocks = scales.shape
    packed = codes.reshape(n, blocks, 8)
    values = np.empty((n, blocks, 16), np.uint8)
    values[..., 0::2] = packed & 0x0F
    values[..., 1::2] = packed >> 4
    out = np.empty((n, blocks // 4, 36), np.uint8)
    out[..., :4] = scales.view(np.uint8).reshape(n, blocks // 4, 4) & 0x7F
    qs = out[..., 4:].reshape(n, blocks // 4, 4, 8)
    np.bitwise_or(values[..., :8].reshape(n, blocks // 4, 4, 8), values[..., 8:].reshape(n, blocks // 4, 4, 8) << 4,
                  out=qs)
    return out.reshape(n, blocks // 4 * 36)


def _whole_rows(view: View) -> Callable[[int, int], list[tuple[NVFP4Pair, np.ndarray]]] | None:
    """For a view that only moves whole rows of NVFP4Pairs (as stored, a row permutation, an expert stack): a
    function giving, for presented rows [start, stop), the (pair, stored rows) they come from, in order; else None."""
    if isinstance(view, Stored) and isinstance(view.source, NVFP4Pair):
        return lambda a, b: [(view.source, np.arange(a, b))]
    if isinstance(view, RowPermutation) and isinstance(view.source, NVFP4Pair) and len(view.shape) == 2:
        return lambda a, b: [(view.source, view.order[a:b])]
    if isinstance(view, Stack) and type(view) is Stack and all(isinstance(p, NVFP4Pair) for p in view.parts):
        per = view.parts[0].shape[0]

        def rows(a, b):
            out = []
            while a < b:
                i, r = divmod(a, per)
                take = min(b - a, per - r)
                out.append((view.parts[i], np.arange(r, r + take)))
                a += take
            return out
        return rows
    return None


@dataclass
class NVFP4Rows(View):
    """A weight presented as ggml's NVFP4 (`packed_type`) through a view that moves whole rows of NVFP4 weights (as
    stored, Llama's rotation pairs, a mixture's stacked experts): each row's bits moved into ggml's blocks on read
    (nvfp4_blocks), the block scales moving with their rows."""
    inner: View
    packed_type = GGMLType.NVFP4

    def __post_init__(self):
        self._rows = _whole_rows(self.inner)
        if self._rows is None:
            raise CheckpointError(f"NVFP4 weights {[s.name for s in self.inner.sources]} are presented through "
                                  f"'{self.inner.describe()}', which does not move whole rows")
        self.sources = self.inner.sources
        self.shape = self.inner.shape
        self.name = f"NVFP4 repacked as ggml's (lossless), {self.inner.describe()}"

    def rows(self, start, stop):
        pieces = []
        for pair, stored in self._rows(start, stop):
            if not len(stored):
                continue
            lo, hi = int(stored.min()), int(stored.max()) + 1
            block = pair.packed_rows(lo, hi)
            pieces.append(block if hi - lo == len(stored) and stored[0] == lo and np.all(np.diff(stored) == 1)
                          else block[stored - lo])
        return pieces[0] if len(pieces) == 1 else np.concatenate(pieces)


# the converter's test for a stacked expert weight (_generate_nvfp4_tensors)
NVFP4_EXPERT = r"\.experts\.(\d+)\.(gate_proj|up_proj|down_proj)\.weight$"


def nvfp4_paired(stored: dict[str, StoredTensor], inverted: bool) -> dict[str, StoredTensor]:
    """The tensors the converter's _generate_nvfp4_tensors leaves, with each NVFP4 weight (a `.weight` beside a 2-D
    `.weight_scale`) one NVFP4Pair in its place, its weight_scale, weight_scale_2 and input_scale consumed, and the
    KV-cache scales (`.k_scale`, `.v_scale`) removed. `inverted`: compressed-tensors' names (`.weight_packed`,
    `.weight_global_scale`, `.input_global_scale`), which it renames to ModelOpt's, its global scales read as their
    reciprocals."""
    if inverted:  # renamed first, in place, as prepare_tensors renames them (a name already taken is left)
        renamed = {}
        for name, t in stored.items():
            for old, new in ((".weight_packed", ".weight"), (".weight_global_scale", ".weight_scale_2"),
                             (".input_global_scale", ".input_scale")):
                if name.endswith(old) and name.removesuffix(old) + new not in stored:
                    name = name.removesuffix(old) + new
                    break
            renamed[name] = t
        stored = renamed
    position = {name: i for i, name in enumerate(stored)}
    out = dict(stored)
    for name, t in stored.items():
        scale = stored.get(name.removesuffix(".weight") + ".weight_scale") if name.endswith(".weight") else None
        if scale is None or len(scale.shape) < 2:  # not NVFP4 (an FP8 weight's scale is a scalar or a row)
            continue
        base = name.removesuffix(".weight")
        pair = NVFP4Pair.of(name, t, scale, stored.get(base + ".weight_scale_2"), stored.get(base + ".input_scale"),
                            inverted, position[name])
        for consumed in (".weight_scale", ".weight_scale_2", ".input_scale"):
            out.pop(base + consumed, None)
        out[name] = pair
    return {n: t for n, t in out.items() if not n.endswith((".k_scale", ".v_scale"))}


def nvfp4_router_folded(stored: dict[str, StoredTensor], n_experts: int) -> dict[str, StoredTensor]:
    """Gemma 4's converter class (Gemma4Model._generate_nvfp4_tensors): a layer's `router.per_expert_scale`
    [n_experts] scales each expert's output, as a per-expert scale of its down_proj does, so where that layer's
    experts 0..n_experts-1 are NVFP4 with a weight_scale_2 each it is folded into them (expert e's times element e),
    and its own tensor dropped; a layer with none of them keeps it. Values are computed on read (per_tensor)."""
    import re

    out = dict(stored)
    for name in [n for n in stored if n.endswith(".router.per_expert_scale")]:
        m = re.search(r"\.layers\.(\d+)\.", name)
        if m is None:
            continue
        targets = [f"{name[:m.end()]}experts.{e}.down_proj.weight" for e in range(n_experts)]
        present = [isinstance(out.get(t), NVFP4Pair) and out[t].scale_2 is not None for t in targets]
        if not any(present):
            continue
        if not all(present):
            missing = targets[present.index(False)]
            raise CheckpointError(f"{stored[name].path.name}: {name!r} beside NVFP4 experts, but {missing!r} is not "
                                  f"NVFP4 with a weight_scale_2; the pinned converter fails on it (\"layer "
                                  f"{m.group(1)}: partial NVFP4 quantization across experts\")")
        router = out.pop(name)
        if len(router.shape) != 1 or router.shape[0] != n_experts:
            raise CheckpointError(f"{router.path.name}: {name!r} is {list(router.shape)}, not one scale per expert "
                                  f"({n_experts})")
        for e, t in enumerate(targets):
            out[t] = dataclasses.replace(out[t], fold=router, fold_index=e)
    return out


def _per_tensor_written(values: np.ndarray | None) -> bool:
    """_write_scale_tensor's test: a per-tensor scale is written unless it is one value within 1e-6 of 1."""
    return values is not None and not (values.size <= 1 and abs(float(values.sum(dtype=np.float64)) - 1.0) < 1e-6)


def nvfp4_first(tensors: list[Presented], stored: dict[str, StoredTensor], n_experts: int,
                permuting: bool, algo_of: Callable[[str], str | None],
                unmapped: tuple[str, ...] = ()) -> tuple[list[Presented], list[str]]:
    """The converter's tensor list over NVFP4 weights (_generate_nvfp4_tensors, before its main loop): each tensor
    made of NVFP4Pairs presented as ggml's NVFP4 (NVFP4Rows) and moved to the front in the order the converter adds
    them (a weight where it comes in the checkpoint; an expert stack when its `n_experts`-th expert comes, or after
    every other where that never happens), each followed by its `.scale` and `.input_scale` F32 tensors where they
    are not 1; then the rest in their order. Also the names the `prec_a4` KV marks (their algorithm W4A16_NVFP4).
    `permuting`: the family's converter class regroups NVFP4 q_proj / k_proj rows into rotation pairs (LlamaModel's
    _repack_nvfp4, Family.nvfp4_qk_pairs), so those come through the family's rotation-pair view; every other
    NVFP4 weight, and every one elsewhere, its NVFP4 path writes as stored, mapped by name only; it fails on a stored
    name its tensor map does not know (`unmapped`, Family.nvfp4_unmapped)."""
    import re

    pairs = {t.name: t for t in stored.values() if isinstance(t, NVFP4Pair)}
    used: set[str] = set()
    placed: list[tuple[tuple[int, int], list[Presented]]] = []
    rest: list[Presented] = []
    marked: list[str] = []
    for t in tensors:
        srcs = [s for s in t.view.sources if isinstance(s, NVFP4Pair)]
        if not srcs:
            rest.append(t)
            continue
        what = f"{t.name} (from {srcs[0].name!r})"
        if srcs[0].name.endswith(unmapped):
            raise CheckpointError(
                f"{what}: the pinned converter's NVFP4 path maps each NVFP4 weight by its stored name, which its tensor "
                f"map does not know (this family's own path renames it first), and fails on it (\"Can not map tensor "
                f"{srcs[0].name!r}\"); use the release's BF16 checkpoint")
        # (the converter's test: the HF name's ending, whatever GGUF name it maps to)
        paired = permuting and srcs[0].name.endswith(("q_proj.weight", "k_proj.weight"))
        if paired and not isinstance(t.view, RowPermutation):
            raise CheckpointError(
                f"{what}: the pinned converter's NVFP4 path regroups it into rotation pairs (LlamaModel's "
                f"_repack_nvfp4 under undo_permute), which its own unquantized path and llama.cpp's graph for this "
                f"family do not ('{t.describe()}'), so its NVFP4 file computes another attention (measured on an "
                f"AFMoE fixture: llama.cpp on that file misses transformers by NMSE 0.058, top-1 agreement 0.63); "
                f"use the release's BF16 checkpoint")
        if (len(srcs) != len(t.view.sources) or _whole_rows(t.view) is None or t.steps
                or isinstance(t.view, RowPermutation) and not paired):
            raise CheckpointError(
                f"{what} is made by '{t.describe()}' from NVFP4 weights; the pinned converter's NVFP4 path writes "
                f"each NVFP4 weight as stored, mapped by its name alone (or its experts stacked), so hfview cannot "
                f"give its bytes")
        used.update(s.name for s in srcs)
        if isinstance(t.view, Stack):
            found = [re.search(NVFP4_EXPERT, s.name) for s in srcs]
            layer = {m.group(1) if (m := re.search(r"\.layers\.(\d+)\.", s.name)) else "0" for s in srcs}
            if not all(found) or [int(m.group(1)) for m in found] != list(range(len(srcs))) or len(
                    {m.group(2) for m in found}) != 1 or len(layer) != 1 or (n_experts and len(srcs) != n_experts):
                raise CheckpointError(
                    f"{what}: its NVFP4 experts {srcs[0].name!r}... are not the converter's `experts.<i>.(gate|up|"
                    f"down)_proj.weight` 0..{max(n_experts, 1) - 1} of one layer, which its NVFP4 path stacks; it maps "
                    f"each other NVFP4 weight by name and fails on such an expert (\"Can not map tensor "
                    f"{srcs[0].name!r}\"); use the release's BF16 checkpoint")
            # flushed when its n_experts-th expert comes; with no expert count, after the loop in first-come order
            positions = sorted(s.position for s in srcs)
            key = (0, positions[n_experts - 1]) if n_experts else (1, positions[0])
            hf_name = f"model.layers.{layer.pop()}.mlp.experts.{found[0].group(2)}.weight"
            extra = []
            for suffix, which in ((".scale", "scale_2"), (".input_scale", "input_scale")):
                per = [s.per_tensor(which) for s in srcs]
                values = np.array([1.0 if v is None else float(v.sum(dtype=np.float32)) for v in per], np.float32)
                if not np.allclose(values, 1.0, atol=1e-6):  # _write_scales_tensor's test
                    extra.append(Presented(t.name.replace(".weight", suffix),
                                           Generated(values, f"each expert's {srcs[0].per_tensor_label(which)}, "
                                                             f"..."), GGMLType.F32))
        else:
            (src,) = srcs
            # (the name as its filter_tensors leaves it)
            key, hf_name, extra = (0, src.position), src.name.replace("language_model.", ""), []
            for suffix, which in ((".scale", "scale_2"), (".input_scale", "input_scale")):
                values = src.per_tensor(which)
                if _per_tensor_written(values):
                    extra.append(Presented(t.name.replace(".weight", suffix),
                                           Generated(values, src.per_tensor_label(which)), GGMLType.F32))
        if algo_of(hf_name) == "W4A16_NVFP4":
            marked.append(t.name)
        placed.append((key, [Presented(t.name, NVFP4Rows(t.view), GGMLType.NVFP4), *extra]))
    left = sorted(set(pairs) - used)
    if left:
        raise CheckpointError(f"NVFP4 weight {left[0]!r} is one the family leaves out of the GGUF; the pinned "
                              f"converter's NVFP4 path writes every NVFP4 weight (mapped by name), so hfview cannot "
                              f"give its file")
    placed.sort(key=lambda p: p[0])
    return [t for _, group in placed for t in group] + rest, sorted(marked)


# ---------------------------------------------------------------- DeepSeek-V4 (its release's own FP8 and MXFP4 forms)
@dataclass(frozen=True)
class E8M0Scale(StoredTensor):
    """A scale stored as E8M0 exponents (float8_e8m0fnu, one byte each), read as the float32 powers of two they
    stand for (2^(byte - 127)), as the converter's DeepseekV4Model._e8m0_to_float computes them."""
    stored: StoredTensor | None = None

    @classmethod
    def of(cls, t: StoredTensor) -> "E8M0Scale":
        return cls(t.name, t.path, "F32", t.shape, t.offset, math.prod(t.shape) * 4, t.stamp, stored=t)

    def read_rows(self, start: int, stop: int) -> np.ndarray:
        bits = self.stored.read_rows(start, stop).view(np.uint8)
        return np.ldexp(np.float32(1), bits.astype(np.int32) - 127).astype(np.float32)


def _bytes_as(t: StoredTensor, shape: tuple[int, ...]) -> StoredTensor:
    """`t`'s bytes read as uint8 of `shape` (an int8 or E8M0 tensor holding packed codes or exponents)."""
    return StoredTensor(t.name, t.path, "U8", shape, t.offset, t.nbytes, t.stamp)


def deepseek_v4_expert(weight: StoredTensor, scale: StoredTensor) -> MXFP4Pair:
    """One routed expert's DeepSeek-V4 MXFP4 pair, `.weight` [rows, cols / 2] (element 2i in the low nibble) with
    `.scale` [rows, cols / 32], as an MXFP4Pair [rows, cols] (the same bits as OpenAI's blocks, 16 bytes a group)."""
    rows, half = weight.shape if len(weight.shape) == 2 else (0, 0)
    if weight.dtype not in ("I8", "U8") or half % 16 or tuple(scale.shape) != (rows, half // 16):
        raise CheckpointError(f"{weight.path.name}: routed expert {weight.name!r} ({weight.dtype} "
                              f"{list(weight.shape)}) with {scale.name!r} {list(scale.shape)}: an MXFP4 pair is int8 "
                              f"[rows, cols / 2] codes beside [rows, cols / 32] E8M0 exponents")
    return MXFP4Pair.of(weight.name, _bytes_as(weight, (rows, half // 16, 16)), _bytes_as(scale, (rows, half // 16)))


@dataclass
class MXFP4ExpertStack(View):
    """Each expert's MXFP4 pair stacked [experts, rows, cols] as ggml's MXFP4 (`packed_type`), each row's bits moved
    into ggml's blocks on read (mxfp4_blocks): lossless, as the converter's repack_mxfp4_blocks."""
    parts: tuple[MXFP4Pair, ...]
    packed_type = GGMLType.MXFP4

    def __post_init__(self):
        self.sources = self.parts
        first = self.parts[0].shape
        for p in self.parts[1:]:
            if p.shape != first:
                raise CheckpointError(f"cannot stack expert {p.name!r} {list(p.shape)} with "
                                      f"{self.parts[0].name!r} {list(first)}")
        self.shape = (len(self.parts), *first)
        self.name = f"{len(self.parts)} experts' MXFP4 pairs repacked as ggml's blocks (lossless)"

    def rows(self, start, stop):
        per, out, row = self.shape[1], [], start
        while row < stop:
            expert, r = divmod(row, per)
            take = min(stop - row, per - r)
            out.append(mxfp4_blocks(*self.parts[expert].packed_rows(r, r + take)))
            row += take
        return np.concatenate(out) if len(out) > 1 else out[0]


@dataclass
class KeptType(View):
    """A matrix written in the type its stored dtype decides, whatever the outtype (DeepseekV4Model.tensor_force_quant):
    bf16 as BF16, f32 as F32, one dequantized from FP8 as Q8_0 (F16 where a row is not whole blocks of 32, the
    converter's QuantError fallback), a hash table (integers) as I32; `packed_type` None leaves it to the outtype."""
    inner: View

    def __post_init__(self):
        self.sources, self.shape = self.inner.sources, self.inner.shape
        src = self.sources[0]
        if isinstance(src, FP8Dequantized):
            kept = GGMLType.F16 if self.shape[-1] % 32 else GGMLType.Q8_0
        elif src.dtype.startswith(("I", "U")):
            kept = GGMLType.I32
        else:
            kept = {"BF16": GGMLType.BF16, "F32": GGMLType.F32}.get(src.dtype)
        self.packed_type = kept if len(self.shape) >= 2 or src.dtype == "F32" or kept == GGMLType.I32 else None
        self.name = self.inner.name + (f", kept {self.packed_type.name}" if self.packed_type else "")

    def rows(self, start, stop):
        values = self.inner.rows(start, stop)
        if self.packed_type is None:
            return values
        if self.packed_type == GGMLType.I32:
            return values.astype(np.int32)
        return to_output(to_working(values, self.sources[0].dtype), self.packed_type)


def deepseek_v4_stored(stored: dict[str, StoredTensor]) -> dict[str, StoredTensor]:
    """The tensors as DeepseekV4Model takes them: a weight stored FP8 beside an E8M0 `.scale` dequantized over
    [128, 128] blocks where it stands (its dequant_model), each routed expert's `.weight` / `.scale` one MXFP4Pair;
    the hash tables first, then the experts block by block (its generate_extra_tensors), then the rest in order."""
    import re

    expert = re.compile(r"layers\.(\d+)\.ffn\.experts\.\d+\.w[123]\.weight$")
    out, experts, tables = {}, [], []
    for name, t in stored.items():
        if name.endswith(".scale") and name.removesuffix(".scale") + ".weight" in stored:
            continue  # read with its weight
        scale = stored.get(name.removesuffix(".weight") + ".scale") if name.endswith(".weight") else None
        if m := expert.search(name):
            if scale is None:
                raise CheckpointError(f"{t.path.name}: routed expert {name!r} has no .scale beside it: the converter's "
                                      f"DeepseekV4Model reads routed experts only as MXFP4 pairs and fails otherwise "
                                      f"(KeyError: Missing routed expert tensors)")
            experts.append((int(m.group(1)), name, deepseek_v4_expert(t, scale)))
            continue
        if scale is not None and t.dtype in ("F8_E4M3", "F8_E5M2"):
            t = FP8Dequantized.of(t, E8M0Scale.of(scale) if scale.dtype in ("F8_E8M0", "U8") else scale, (128, 128),
                                  "scale")
        elif scale is not None:  # a .scale the converter leaves beside a weight it does not dequantize: unmapped
            out[name.removesuffix(".weight") + ".scale"] = scale
        if name.endswith(".ffn.gate.tid2eid"):
            tables.append((name, t))
        else:
            out[name] = t
    ordered = dict(tables)
    ordered.update((name, pair) for _, name, pair in sorted(experts, key=lambda e: e[0]))
    ordered.update(out)
    return ordered


# ---------------------------------------------------------------- Kimi-K3 (its attention residuals' fused scores)
@dataclass(frozen=True)
class VectorProduct(StoredTensor):
    """Two stored vectors of one width (a [width] norm weight and a [1, width] projection) read as one F32 [width]
    vector, their elementwise product in float32: what the converter writes for a pair used only as that product
    (KimiK3Model._try_fuse_res: norm.float().flatten() * proj.float().flatten())."""
    factors: tuple[StoredTensor, ...] = ()

    @classmethod
    def of(cls, name: str | None, a: StoredTensor, b: StoredTensor) -> "VectorProduct":
        """`name` None: named for what it is, the two stored names joined by " * " (what inspect shows)."""
        width = math.prod(a.shape)
        for t in (a, b):
            if math.prod(t.shape) != width or max(t.shape, default=0) != width:
                raise CheckpointError(f"{t.path.name}: {t.name!r} {list(t.shape)} is paired with {a.name!r} "
                                      f"{list(a.shape)}: both must hold one vector of the same width")
        return cls(name or f"{a.name} * {b.name}", b.path, "F32", (width,), b.offset, width * 4, b.stamp,
                   factors=(a, b))

    def read_rows(self, start: int, stop: int) -> np.ndarray:
        a, b = (to_working(t.read(), t.dtype).astype(np.float32).reshape(-1) for t in self.factors)
        return (a * b)[start:stop]


def vector_products(stored: dict[str, StoredTensor],
                    pairs: Sequence[tuple[str, str, str]]) -> dict[str, StoredTensor]:
    """Each pair of stored vectors (names ending in `first` and `second` of one prefix, either order) one
    VectorProduct named prefix + `fused`, in the place of the second of the pair (where the converter, which holds
    the first until its partner arrives, writes it); every other tensor in its order. A half without its partner is
    refused, as the converter refuses it."""
    out: dict[str, StoredTensor] = {}
    held: dict[str, StoredTensor] = {}  # fused name -> the half read first
    for name, t in stored.items():
        pair = next(((name.removesuffix(end), p) for p in pairs for end in p[:2] if name.endswith(end)), None)
        if pair is None:
            out[name] = t
            continue
        prefix, (first, second, fused) = pair
        if prefix + fused not in held:
            held[prefix + fused] = t
            continue
        other = held.pop(prefix + fused)
        a, b = (other, t) if other.name.endswith(first) else (t, other)
        if not (a.name.endswith(first) and b.name.endswith(second)):
            raise CheckpointError(f"{t.path.name}: {t.name!r} and {other.name!r} are stored twice over: a pair is "
                                  f"one {first!r} and one {second!r}")
        out[prefix + fused] = VectorProduct.of(None, a, b)
    if held:
        t = next(iter(held.values()))
        raise CheckpointError(f"{t.path.name}: {t.name!r} has no partner: the converter fuses each such vector with "
                              f"its pair into one ({', '.join(' * '.join(p[:2]) for p in pairs)}) and fails on a half "
                              f"(\"Unpaired attention-residual tensors\")")
    return out

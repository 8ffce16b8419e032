"""The GGUF byte layout: value types, KV encoding, tensor-info records, alignment.

This module knows nothing of model families. It encodes exactly what gguf-py's GGUFWriter writes
(little-endian, version 3, 32-byte alignment), so a virtual file built here is byte-identical to one
the converter writes.
"""
from __future__ import annotations

import bisect
import itertools
import os
import struct
import weakref
from dataclasses import dataclass
from collections.abc import Callable, Iterator, Sequence
from typing import Any

# gguf-py's own constants (the converter writes with them); only gguf.constants is imported (hfview._gguf)
from gguf.constants import GGML_QUANT_SIZES, GGUF_DEFAULT_ALIGNMENT, GGUF_VERSION, GGMLQuantizationType, GGUFValueType
from gguf.constants import GGUF_MAGIC as _MAGIC_NUMBER

from .errors import CheckpointError
from .shards import pread_into

# under the names hfview's modules import
ValueType = GGUFValueType
GGMLType = GGMLQuantizationType
GGUF_MAGIC = struct.pack("<I", _MAGIC_NUMBER)  # b"GGUF"
ALIGNMENT = GGUF_DEFAULT_ALIGNMENT

# bytes per element of the unquantized ggml types (those of one element per block)
GGML_ITEM_SIZE = {t: size for t, (per_block, size) in GGML_QUANT_SIZES.items() if per_block == 1}


def row_bytes(ggml_type: GGMLType, n_per_row: int) -> int:
    """Bytes of one row of `n_per_row` values, by gguf-py's block sizes (ggml's own for every type hfview writes:
    tests/test_structure.py checks them against libggml)."""
    per_block, block_bytes = GGML_QUANT_SIZES[ggml_type]
    return n_per_row // per_block * block_bytes


@dataclass(frozen=True)
class KV:
    """One metadata entry. For arrays, `value` is a list and `item_type` names its element type."""
    key: str
    type: ValueType
    value: Any
    item_type: ValueType | None = None


_U64 = struct.Struct("<Q")
_SIMPLE = {
    ValueType.UINT8: "<B", ValueType.INT8: "<b", ValueType.UINT16: "<H", ValueType.INT16: "<h",
    ValueType.UINT32: "<I", ValueType.INT32: "<i", ValueType.FLOAT32: "<f", ValueType.UINT64: "<Q",
    ValueType.INT64: "<q", ValueType.FLOAT64: "<d", ValueType.BOOL: "?",
}


def inferred_type(value: Any) -> ValueType:
    """The type gguf-py's GGUFValueType.get_type gives a Python value (bool before int, int -> INT32)."""
    found = _class_type(type(value))
    if found is None:
        raise TypeError(f"no GGUF type for {type(value).__name__} value {value!r}")
    return found


def _class_type(cls: type) -> ValueType | None:
    if issubclass(cls, (str, bytes, bytearray)):
        return ValueType.STRING
    if issubclass(cls, list):
        return ValueType.ARRAY
    if issubclass(cls, float):
        return ValueType.FLOAT32
    if issubclass(cls, bool):
        return ValueType.BOOL
    if issubclass(cls, int):
        return ValueType.INT32
    return None


def array_item_type(values: Sequence[Any]) -> ValueType:
    """The one inferred_type every item of an array has (ValueError if they differ), checked once per Python
    class present rather than per item: a vocabulary's arrays have 100k+ items."""
    item_type = inferred_type(values[0])
    for cls in dict.fromkeys(map(type, values)):
        if _class_type(cls) is not item_type:
            raise ValueError(f"all items of a GGUF array must share one type ({item_type.name}, "
                             f"and {cls.__name__})")
    return item_type


def _encode_value(value: Any, vtype: ValueType, item_type: ValueType | None) -> bytes:
    fmt = _SIMPLE.get(vtype)
    if fmt is not None:
        return struct.pack(fmt, value)
    if vtype == ValueType.STRING:
        raw = value.encode("utf-8") if isinstance(value, str) else bytes(value)
        return struct.pack("<Q", len(raw)) + raw
    if vtype == ValueType.ARRAY:
        if isinstance(value, EncodedArray):
            return bytes(value.encoded)  # (a header is made from encoded_kv_pieces, without this copy)
        if not value:
            raise ValueError("a GGUF array cannot be empty")
        if item_type is None:
            item_type = inferred_type(value[0])
        if item_type in _SIMPLE and item_type != ValueType.BOOL:
            body = struct.pack(f"<{len(value)}{_SIMPLE[item_type][1]}", *value)
        elif item_type == ValueType.STRING:  # a vocabulary: 100k+ strings, each its length then its bytes
            raw = [v.encode("utf-8") if isinstance(v, str) else bytes(v) for v in value]
            body = b"".join(itertools.chain.from_iterable(zip(map(_U64.pack, map(len, raw)), raw)))
        else:
            body = b"".join(_encode_value(v, item_type, None) for v in value)
        return struct.pack("<IQ", item_type, len(value)) + body
    raise ValueError(f"unknown GGUF value type {vtype!r}")


def decode_array(data: bytes | memoryview) -> list:
    """The items of an array value as _encode_value wrote it (item type, count, items): numbers, bools or strings."""
    item_type, n = struct.unpack_from("<IQ", data, 0)
    if item_type in _SIMPLE:
        return list(struct.unpack_from(f"<{n}{_SIMPLE[ValueType(item_type)][-1]}", data, 12))
    if item_type != ValueType.STRING:
        raise ValueError(f"cannot decode an array of {ValueType(item_type).name}")
    items, pos, raw = [], 12, bytes(data)
    for _ in range(n):
        (length,) = _U64.unpack_from(raw, pos)
        items.append(raw[pos + 8:pos + 8 + length].decode("utf-8"))
        pos += 8 + length
    return items


KEPT_ENCODED = 4096  # array values longer than this are held as their header bytes (EncodedArray)


class OpenFile:
    """A file held open for the FileSpans over it, and closed with the last of them (or by close())."""

    def __init__(self, path: os.PathLike | str):
        self.name = str(path)
        self.fd = os.open(path, os.O_RDONLY)
        self.close = weakref.finalize(self, os.close, self.fd)


class FileSpan:
    """Bytes that stay in a file, read when asked and never held: a kept vocabulary's arrays (hfview.vocab_cache),
    which a header serves from there. The span holds the file open, so an entry replaced or removed meanwhile (the
    cache writes a new file and renames it; it trims by unlinking) still reads as it was."""

    __slots__ = ("file", "offset", "length")

    def __init__(self, file: OpenFile, offset: int, length: int):
        self.file, self.offset, self.length = file, offset, length

    def __len__(self) -> int:
        return self.length

    def readinto(self, start: int, out: memoryview) -> None:
        """out[:] = the span's bytes from `start`."""
        try:
            got = pread_into(self.file.fd, out, self.offset + start)
        except OSError as e:
            raise CheckpointError(f"{self.file.name}: cannot read a kept vocabulary at byte {self.offset + start}: "
                                  f"{e.strerror}") from e
        if got != len(out):
            raise CheckpointError(f"{self.file.name}: a kept vocabulary was cut short while a view read it; open the "
                                  f"checkpoint again")

    def __bytes__(self) -> bytes:
        data = bytearray(self.length)
        self.readinto(0, memoryview(data))
        return bytes(data)


class EncodedArray(Sequence):
    """A long array value (a vocabulary's tokens, scores, types) kept as the bytes the header holds it in, in memory
    or left in a file (FileSpan), decoded when first read. As Python objects, a 128k vocabulary's arrays are ~45 MB
    that would otherwise stay alive while llama.cpp fills the model's buffers; only inspect and tests read them."""

    def __init__(self, encoded: memoryview | FileSpan, count: int):
        self._encoded, self._count, self._items = encoded, count, None

    @property
    def piece(self) -> memoryview | FileSpan:
        """Where the value's bytes (item type, count, items) are: a header's piece of them."""
        return self._encoded

    @property
    def encoded(self) -> memoryview:
        """The value's bytes as the header holds them: item type, count, items."""
        if isinstance(self._encoded, FileSpan):
            return memoryview(bytes(self._encoded))
        return self._encoded

    def _decoded(self) -> list:
        if self._items is None:
            self._items = decode_array(self.encoded)
        return self._items

    def __len__(self) -> int:
        return self._count

    def __getitem__(self, i):
        return self._decoded()[i]

    def __iter__(self):
        return iter(self._decoded())

    def __eq__(self, other) -> bool:
        return self._decoded() == (list(other) if isinstance(other, (tuple, EncodedArray)) else other)

    def __add__(self, other) -> list:  # as a list concatenates
        return self._decoded() + list(other)

    def __radd__(self, other) -> list:
        return list(other) + self._decoded()

    __hash__ = None

    def __repr__(self) -> str:
        return f"EncodedArray({self._count} items)"


def encode_kv(kv: KV) -> bytes:
    return b"".join(map(bytes, encoded_kv_pieces(kv)))


def encoded_kv_pieces(kv: KV) -> tuple[bytes | memoryview | FileSpan, ...]:
    """encode_kv's bytes in pieces: an EncodedArray value is its own bytes, or its span of a file, not a copy of
    them (a 128k vocabulary's are MBs, and each MB-sized block freed makes glibc serve later ones from its heap,
    where they stay resident)."""
    head = _encode_value(kv.key, ValueType.STRING, None) + struct.pack("<I", kv.type)
    if isinstance(kv.value, EncodedArray):
        return head, kv.value.piece
    return (head + _encode_value(kv.value, kv.type, kv.item_type),)


class Pieces:
    """Byte pieces read as one run (a header): bytes joined into blocks, each built once, and FileSpans left in
    their files."""

    def __init__(self, parts: Sequence[bytes | memoryview | FileSpan]):
        self.blocks: list[bytes | FileSpan] = []
        for in_file, run in itertools.groupby(parts, key=lambda p: isinstance(p, FileSpan)):
            if in_file:
                self.blocks.extend(run)
            else:
                self.blocks.append(b"".join(run))
        self._starts = list(itertools.accumulate(map(len, self.blocks), initial=0))

    def __len__(self) -> int:
        return self._starts[-1]

    def readinto(self, offset: int, out: memoryview) -> int:
        """Fill `out` from `offset`; how many bytes (short only at the end)."""
        n, done = max(0, min(len(out), len(self) - offset)), 0
        i = bisect.bisect_right(self._starts, offset) - 1
        while done < n:
            block, within = self.blocks[i], offset + done - self._starts[i]
            take = min(n - done, len(block) - within)
            if isinstance(block, FileSpan):
                block.readinto(within, out[done:done + take])
            else:
                out[done:done + take] = block[within:within + take]
            done, i = done + take, i + 1
        return n

    def view(self, start: int, end: int) -> memoryview:
        """Bytes [start, end), which lie in one joined block, without a copy."""
        i = bisect.bisect_right(self._starts, start) - 1
        block, base = self.blocks[i], self._starts[i]
        if isinstance(block, FileSpan) or end > base + len(block):
            raise ValueError(f"bytes {start}..{end} are not in one block held in memory")
        return memoryview(block)[start - base:end - base]

    def chunks(self, size: int = 8 << 20) -> Iterator[bytes | memoryview]:
        """The whole run in pieces of at most `size` where read from a file."""
        for block in self.blocks:
            if not isinstance(block, FileSpan):
                yield block
                continue
            buf = bytearray(min(size, len(block)))
            for start in range(0, len(block), size):
                piece = memoryview(buf)[:min(size, len(block) - start)]
                block.readinto(start, piece)
                yield piece

    def __bytes__(self) -> bytes:
        return b"".join(map(bytes, self.blocks))


def decode_kvs(data: bytes, count: int, keep: Callable[[int, int], memoryview | FileSpan] | None = None,
               ends: Sequence[int] | None = None) -> list[KV]:
    """`count` entries as encode_kv wrote them one after another; arrays of more than KEPT_ENCODED items are kept
    as their bytes: EncodedArray over keep(start, end) of `data`, by default its memoryview there. `ends`: where
    each entry ends, if known (a string array's end is then not found by walking its strings: 40 ms for a 128k
    vocabulary's tokens and merges); each is checked where the entry is read. ValueError where the bytes are not
    such entries."""
    view, pos, entries = memoryview(data), 0, []
    if keep is None:
        keep = lambda start, end: view[start:end]  # noqa: E731
    if ends is not None and len(ends) != count:
        raise ValueError(f"{len(ends)} entry ends for {count} KV entries")
    try:
        for i in range(count):
            key, pos = _decode_string(view, pos)
            vtype = ValueType(struct.unpack_from("<I", view, pos)[0])
            pos += 4
            if vtype == ValueType.STRING:
                value, pos = _decode_string(view, pos)
                entries.append(KV(key, vtype, value))
            elif vtype == ValueType.ARRAY:
                item_type, n = struct.unpack_from("<IQ", view, pos)
                end = pos + 12
                if item_type == ValueType.STRING and ends is not None:
                    end = ends[i]
                    if end < pos + 12 + 8 * n:
                        raise ValueError("a string array ends before its strings' lengths")
                elif item_type == ValueType.STRING:
                    for _ in range(n):
                        end += 8 + _U64.unpack_from(view, end)[0]
                else:
                    end += n * struct.calcsize(_SIMPLE[ValueType(item_type)])
                if end > len(view):
                    raise ValueError("an array runs past the end")
                value = EncodedArray(keep(pos, end), n) if n > KEPT_ENCODED else decode_array(view[pos:end])
                entries.append(KV(key, vtype, value, ValueType(item_type)))
                pos = end
            else:
                fmt = _SIMPLE[vtype]
                entries.append(KV(key, vtype, struct.unpack_from(fmt, view, pos)[0]))
                pos += struct.calcsize(fmt)
            if ends is not None and pos != ends[i]:
                raise ValueError(f"KV entry {i} ends at byte {pos}, not at {ends[i]}")
    except (struct.error, KeyError, UnicodeDecodeError) as e:
        raise ValueError(f"not GGUF KV entries: {e}") from e
    if pos != len(view):
        raise ValueError(f"{len(view) - pos} bytes after the last of {count} KV entries")
    return entries


def _decode_string(view: memoryview, pos: int) -> tuple[str, int]:
    (n,) = _U64.unpack_from(view, pos)
    end = pos + 8 + n
    if end > len(view):
        raise ValueError("a string runs past the end")
    return str(view[pos + 8:end], "utf-8"), end


def encode_tensor_info(name: str, ggml_dims: Sequence[int], ggml_type: int, offset: int) -> bytes:
    """`ggml_dims` are already in ggml order (innermost first)."""
    return (_encode_value(name, ValueType.STRING, None) + struct.pack("<I", len(ggml_dims))
            + struct.pack(f"<{len(ggml_dims)}Q", *ggml_dims) + struct.pack("<IQ", ggml_type, offset))


def encode_header(n_tensors: int, n_kv: int) -> bytes:
    return GGUF_MAGIC + struct.pack("<IQQ", GGUF_VERSION, n_tensors, n_kv)


def pad_to(n: int, align: int = ALIGNMENT) -> int:
    return (n + align - 1) // align * align

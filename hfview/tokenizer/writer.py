"""A key/value collector with the converter's GGUFWriter semantics, restricted to what tokenizers write.

GGUFWriter keeps keys in first-insertion order (a re-added key keeps its place and takes the new value),
skips empty strings and empty arrays, and infers an array's element type from its first element.
"""
from __future__ import annotations

from typing import Any, Sequence

from hfview.gguf_layout import KV, ValueType, array_item_type


class KVWriter:
    def __init__(self) -> None:
        self._kv: dict[str, KV] = {}

    def _put(self, kv: KV) -> None:
        self._kv[kv.key] = kv  # dict assignment keeps an existing key's position, as GGUFWriter does

    def add_string(self, key: str, value: str) -> None:
        if not value:
            return
        self._put(KV(key, ValueType.STRING, value))

    def add_bool(self, key: str, value: bool) -> None:
        self._put(KV(key, ValueType.BOOL, bool(value)))

    def add_uint32(self, key: str, value: int) -> None:
        if not 0 <= value < 2**32:
            raise ValueError(f"{key}: {value} does not fit a GGUF uint32")
        self._put(KV(key, ValueType.UINT32, int(value)))

    def add_array(self, key: str, values: Sequence[Any]) -> None:
        if len(values) == 0:
            return
        values = list(values)
        try:
            item_type = array_item_type(values)
        except ValueError as exc:
            raise ValueError(f"{key}: {exc}") from None
        self._put(KV(key, ValueType.ARRAY, values, item_type))

    def remove(self, key: str) -> None:
        self._kv.pop(key, None)

    def extend(self, kvs: Sequence[KV]) -> None:
        for kv in kvs:
            self._put(kv)

    def kvs(self) -> list[KV]:
        return list(self._kv.values())

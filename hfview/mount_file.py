"""One view (HfCheckpoint) as a file that many threads read at once: what `hfview mount` serves.

HfCheckpoint.readinto keeps one chunk buffer for a reader going front to back; a FUSE mount gets reads from many
kernel threads at once, anywhere in the file. Here a read is answered tensor by tensor: stored bits straight from
the shards into the reader's buffer (no state, so any number of threads at once), every other tensor (rearranged,
converted or quantized) made a chunk of rows at a time, once, into a cache bounded in bytes that concurrent readers
of the same chunk share. Before bytes are served, the files they come from are checked against what was opened
(size, mtime, inode): a checkpoint changed under the mount answers ChangedUnderMount, never stale bytes.
"""
from __future__ import annotations

import bisect
import contextlib
import os
import threading
from collections import OrderedDict
from concurrent.futures import Future
from pathlib import Path

import numpy as np

from .checkpoint import HfCheckpoint
from .errors import HfviewError
from .gguf_layout import pad_to
from .views import Generated, Presented, Stack, Stored

# a chunk of a made tensor holds rows whose f32 working values come to about this much: small enough that a first
# read waits little and the kernel's parallel reads spread over several chunks, large enough that numpy and ggml
# work on long runs
_CHUNK_WORK_BYTES = 8 << 20

# views that keep nothing between calls: any number of threads may read them at once (the others keep a block or
# their norms, so one thread at a time makes rows of such a view)
_STATELESS = (Stored, Stack, Generated)
_NO_LOCK = contextlib.nullcontext()  # what such a view is read under


class ChangedUnderMount(HfviewError):
    """A file of the checkpoint is not the one that was opened: its bytes may be anything now."""


def stamp(path: Path) -> tuple[int, int, int, int]:
    """What tells a file from the same path rewritten, truncated or replaced."""
    st = os.stat(path)
    return st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns


def checkpoint_files(path: Path) -> dict[Path, tuple[int, int, int, int]]:
    """Every regular file of a checkpoint directory (config, tokenizer, README, shards: what a view's bytes may come
    from), stamped."""
    return {p: stamp(p) for p in sorted(path.iterdir()) if p.is_file()}


class ChunkCache:
    """Made chunks, least recently used dropped past `budget` bytes; a chunk being made by one thread is waited for
    by the others that want it, never made twice at once."""

    def __init__(self, budget: int):
        self.budget = budget
        self.held = 0
        self._lock = threading.Lock()
        self._done: OrderedDict[object, memoryview] = OrderedDict()
        self._making: dict[object, Future] = {}

    def get(self, key, make) -> memoryview:
        with self._lock:
            if key in self._done:
                self._done.move_to_end(key)
                return self._done[key]
            pending = self._making.get(key)
            if pending is None:
                pending = self._making[key] = Future()
                mine = True
            else:
                mine = False
        if not mine:
            return pending.result()
        try:
            data = make()
        except BaseException as e:
            with self._lock:
                del self._making[key]
            pending.set_exception(e)
            raise
        with self._lock:
            del self._making[key]
            self._done[key] = data
            self.held += len(data)
            while self.held > self.budget and len(self._done) > 1:
                _, old = self._done.popitem(last=False)
                self.held -= len(old)
        pending.set_result(data)
        return data


class MountedFile:
    """`ckpt`'s file, read by many threads at once (readinto); `files` are the checkpoint's files as opened."""

    def __init__(self, ckpt: HfCheckpoint, files: dict[Path, tuple], cache: ChunkCache):
        self.ckpt, self.files, self.cache = ckpt, files, cache
        self.size = ckpt.size
        self.data_start = ckpt.data_start
        self.header = memoryview(ckpt.read(0, ckpt.data_start))  # small (the vocabulary at most): kept
        self.tensors: list[Presented] = list(ckpt.tensors)
        self.starts, at = [], ckpt.data_start
        for t in self.tensors:
            self.starts.append(at)
            at += pad_to(t.nbytes)
        if at != ckpt.size:
            raise HfviewError(f"{ckpt!r}: its tensors end at byte {at}, its file at {ckpt.size}: hfview's layout and "
                              f"the mount's disagree (a bug: please report it)")
        self._sources = [self._source_files(t) for t in self.tensors]
        self._locks = {id(t.view): threading.Lock() for t in self.tensors if not isinstance(t.view, _STATELESS)}
        self.changed: str | None = None  # why this file answers no more bytes, once a file was found changed

    def _source_files(self, t: Presented) -> tuple[Path, ...]:
        paths = set()
        for source in t.view.sources:
            for stored in (getattr(source, "weight", None), getattr(source, "scale", None), source):
                if stored is not None and getattr(stored, "path", None) is not None:
                    paths.add(Path(stored.path))
        missing = paths - set(self.files)
        for p in missing:  # a shard outside the directory's top level: stamped as it is now, with the rest
            self.files[p] = stamp(p)
        return tuple(sorted(paths))

    # ---------------------------------------------------------------- the change check
    def check(self, paths=None) -> None:
        """Raise ChangedUnderMount where any of `paths` (default: every file) is not the file that was opened."""
        if self.changed:
            raise ChangedUnderMount(self.changed)
        for p in self.files if paths is None else paths:
            try:
                now = stamp(p)
            except OSError as e:
                now = e.strerror
            if now != self.files[p]:
                self.changed = (f"{p} changed after it was opened for {self.ckpt.path.name} ("
                                f"{_difference(self.files[p], now)}): its file answers EIO until mounted again")
                raise ChangedUnderMount(self.changed)

    # ---------------------------------------------------------------- reads
    def readinto(self, offset: int, out: memoryview) -> int:
        """Fill `out` with the file's bytes from `offset`; how many (short only at the end)."""
        n = min(len(out), max(0, self.size - offset))
        done = 0
        if offset < self.data_start:  # the header is made from every file: all are checked
            self.check()
            take = min(n, self.data_start - offset)
            out[:take] = self.header[offset:offset + take]
            done = take
        while done < n:
            pos = offset + done
            i = bisect.bisect_right(self.starts, pos) - 1
            t, within = self.tensors[i], pos - self.starts[i]
            take = min(n - done, pad_to(t.nbytes) - within)
            piece = out[done:done + take]
            if within >= t.nbytes:
                piece[:] = bytes(take)  # alignment padding
            else:
                self.check(self._sources[i])
                real = min(take, t.nbytes - within)
                self._tensor_into(i, within, piece[:real])
                piece[real:] = bytes(take - real)
            done += take
        return n

    def _tensor_into(self, i: int, within: int, out: memoryview) -> None:
        t = self.tensors[i]
        rb = t.row_bytes
        first, end = within // rb, within + len(out)
        if t.stored_bits:
            lock = self._locks.get(id(t.view))
            # whole rows straight into the reader's buffer; a row the range cuts, through a row-sized buffer
            inner_first, inner_stop = -(-within // rb), end // rb
            done = 0
            if within % rb:
                done = self._stored_edge(t, first, within % rb, out[:min(len(out), rb - within % rb)], lock)
            if inner_stop > inner_first:
                n = (inner_stop - inner_first) * rb
                with lock or _NO_LOCK:
                    t.rows_into(inner_first, inner_stop, np.frombuffer(out[done:done + n], np.uint8))
                done += n
            if done < len(out):
                self._stored_edge(t, end // rb, 0, out[done:], lock)
            return
        per = max(1, _CHUNK_WORK_BYTES // max(rb, (t.shape[-1] if t.shape else 1) * 4))
        done = 0
        while done < len(out):
            pos = within + done
            c = pos // rb // per
            chunk = self.cache.get((id(self), i, c), lambda: self._make(t, c * per, min(t.view.n_rows, (c + 1) * per)))
            at = pos - c * per * rb
            take = min(len(out) - done, len(chunk) - at)
            out[done:done + take] = chunk[at:at + take]
            done += take

    def _stored_edge(self, t: Presented, row: int, at: int, out: memoryview, lock) -> int:
        buffer = np.empty(t.row_bytes, np.uint8)
        with lock or _NO_LOCK:
            t.rows_into(row, row + 1, buffer)
        out[:] = memoryview(buffer)[at:at + len(out)]
        return len(out)

    def _make(self, t: Presented, first: int, stop: int) -> memoryview:
        with self._locks.get(id(t.view)) or _NO_LOCK:
            rows = t.rows(first, stop)
        return memoryview(np.ascontiguousarray(rows)).cast("B").toreadonly()


def _difference(then: tuple, now) -> str:
    if isinstance(now, str):
        return now.lower()
    names = ("device", "inode", "size", "mtime")
    return ", ".join(f"{name} {a} -> {b}" for name, a, b in zip(names, then, now) if a != b)

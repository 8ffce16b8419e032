"""A view's bytes in an anonymous memory file (Linux ``memfd_create``), which llama.cpp then opens by path
(``/proc/self/fd/N``) with its own loader and maps: no file is written to disk, no byte passes through a C stream.

The file is sized, mapped, filled (``HfCheckpoint.fill_into``, on several threads: stored bytes read from the shards
into a buffer the CPU's cache holds and put in the file by ``PieceWriter``, or read straight into the mapping where a
view rearranges them, computed tensors made into their place) and unmapped again; what holds its pages from
then on is llama.cpp's own mapping. Its pages are memory, not page cache: they cannot be dropped while the model
lives, so ``fill`` refuses before filling when the system does not have them free (``memory_available``).
"""
from __future__ import annotations

import ctypes
import errno
import mmap
import os
import threading
from pathlib import Path
from typing import Any, Callable

import numpy as np

from .errors import HfviewError

__all__ = ["MemoryFile", "MemoryFileError", "NoMemoryFiles", "PieceWriter", "supported", "memory_available", "fill"]

_PROC_FD = Path("/proc/self/fd")


class MemoryFileError(HfviewError):
    """A memory file cannot hold the view here: too little memory free, or no memfd on this system."""


class NoMemoryFiles(MemoryFileError):
    """This system has no memory files, or refused one (a sandbox's EPERM): a loader goes another way."""


def supported() -> bool:
    """Whether this system has memory files that a loader can open by path (Linux: memfd and /proc)."""
    return hasattr(os, "memfd_create") and _PROC_FD.is_dir()


def _meminfo_available() -> int | None:
    try:
        with open("/proc/meminfo", encoding="ascii") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


def _cgroup_headroom() -> int | None:
    """What the process's cgroup (v2) still lets it charge: memory.max - memory.current; None where unlimited or
    unreadable. A memory file's pages are charged to it like any other memory."""
    try:
        with open("/proc/self/cgroup", encoding="ascii") as f:
            entry = next((line.strip()[3:] for line in f if line.startswith("0::")), None)
        if entry is None:
            return None
        group = Path("/sys/fs/cgroup") / entry.lstrip("/")
        limit = (group / "memory.max").read_text().strip()
        if limit == "max":
            return None
        return max(0, int(limit) - int((group / "memory.current").read_text().strip()))
    except (OSError, ValueError):
        return None


def memory_available() -> tuple[int, str] | None:
    """(bytes, where that figure comes from) that a memory file may take now, or None where this system does not
    say: MemAvailable of /proc/meminfo, less where the process's cgroup allows less."""
    meminfo, cgroup = _meminfo_available(), _cgroup_headroom()
    if meminfo is None:
        return None
    if cgroup is not None and cgroup < meminfo:
        return cgroup, "the memory this process's cgroup still allows (memory.max - memory.current)"
    return meminfo, "MemAvailable in /proc/meminfo"


def _gb(n: int) -> str:
    return f"{n / 1e9:.2f} GB"


class MemoryFile:
    """An open memory file holding a whole GGUF. ``path`` opens it in this process; close it once the loader has
    opened (and mapped) it: the loader's own mapping keeps the pages."""

    def __init__(self, fd: int, size: int, description: str):
        self.fd: int | None = fd
        self.size = size
        self.description = description

    @property
    def path(self) -> str:
        if self.fd is None:
            raise ValueError(f"the memory file of {self.description} is closed")
        return str(_PROC_FD / str(self.fd))

    def close(self) -> None:
        if self.fd is not None:
            fd, self.fd = self.fd, None
            os.close(fd)

    def __enter__(self) -> "MemoryFile":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __del__(self):
        try:
            self.close()
        except Exception:  # noqa: BLE001 - interpreter teardown
            pass

    def __repr__(self) -> str:
        return f"MemoryFile({self.description}, {self.size} bytes, fd={self.fd})"


def check_memory(size: int, description: str) -> None:
    """Refuse (MemoryFileError) when `size` bytes of memory are not free now."""
    available = memory_available()
    if available is not None and size > available[0]:
        free, where = available
        raise MemoryFileError(
            f"{description} needs {_gb(size)} of memory to load as a memory file, and {_gb(free)} is free ({where}): "
            f"free some memory, or choose a smaller --precision or --quant (HFVIEW_DATA_PATH=stream loads it "
            f"through a FILE* instead, into llama.cpp's own buffers of the same size)")


_MADV_POPULATE_WRITE = 23  # Linux 5.14: fault a range's pages in, writable, in one call (not in Python's mmap module)
_MADV_DONTNEED = 4  # a shared file mapping's pages dropped from this mapping; the file keeps them
_PAGE = mmap.PAGESIZE


def _madvise() -> Callable[[int, int, int], int]:
    """libc's madvise through ctypes, which lets go of the GIL while the kernel works (mmap.madvise holds it)."""
    madvise = ctypes.CDLL(None, use_errno=True).madvise
    madvise.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int)
    return madvise


class PieceWriter:
    """Puts pieces of a memory file's bytes in place, from several threads at once without their waiting on one
    another. The kernel takes one write to a memory file at a time (shmem holds the file's lock through a whole
    write(2)), so a piece is written with pwrite where no other thread is writing; otherwise its thread makes the
    piece's pages in the file's mapping itself (MADV_POPULATE_WRITE: allocated in one call rather than a fault per
    page) and copies the piece in. (1.05 GB Granite hybrid view, 2 cores: 0.48 s; by pwrite alone 0.51 s on 2
    threads, the second mostly waiting for the lock, 0.55 s on one.)"""

    def __init__(self, fd: int, out: memoryview):
        self.fd = fd
        self._out = np.frombuffer(out, np.uint8)  # the mapping of `fd`, the whole file
        self._base = self._out.ctypes.data
        self._writing = threading.Lock()
        self._madvise = _madvise()
        self._populate = True  # until the kernel says it has no MADV_POPULATE_WRITE (before 5.14): then faults

    def put(self, at: int, piece: np.ndarray) -> None:
        """The bytes of `piece` (contiguous) at byte `at` of the file."""
        piece = piece.reshape(-1).view(np.uint8)
        if self._writing.acquire(blocking=False):
            try:
                if os.pwrite(self.fd, memoryview(piece), at) != piece.nbytes:  # a memory file of the full size
                    raise OSError(f"short write to the memory file at byte {at}")  # takes every byte
            finally:
                self._writing.release()
            return
        if self._populate:
            begin, end = self._pages(at, piece.nbytes)
            err = 0 if self._madvise(begin, end - begin, _MADV_POPULATE_WRITE) == 0 else ctypes.get_errno()
            if err == errno.EINVAL:
                self._populate = False
            elif err:  # ENOMEM, EFAULT: where a plain copy would die of SIGBUS
                raise MemoryFileError(f"the memory file could not take bytes {at}..{at + piece.nbytes}: "
                                      f"{os.strerror(err)}")
        self._out[at:at + piece.nbytes] = piece
        self.let_go(at, piece.nbytes)

    def let_go(self, at: int, n: int) -> None:
        """Drop bytes [at, at + n), written through the mapping, from this mapping (the file keeps them): the loader
        maps the file while it is filled, and a page in both mappings would count twice in the process's RSS."""
        begin, end = self._pages(at, n)
        self._madvise(begin, end - begin, _MADV_DONTNEED)  # advice: a refusal leaves the pages mapped, no worse

    def _pages(self, at: int, n: int) -> tuple[int, int]:
        return (self._base + int(at)) // _PAGE * _PAGE, -(-(self._base + int(at) + n) // _PAGE) * _PAGE


def fill(source: Any, *, description: str | None = None, threads: int | None = None,
         on_bytes: Callable[[int], None] | None = None,
         on_header: Callable[[MemoryFile], None] | None = None) -> MemoryFile:
    """A memory file holding `source`'s bytes: a view (anything with ``fill_into``: HfCheckpoint, LoadTimeView)
    fills it in parallel, any other byte source (``size``, ``readinto`` or ``read``) is copied in. Refuses before
    filling when the memory is not free (MemoryFileError), as where this system has no memory files.
    `on_header(memory_file)`: called once the file's header is in place (a view's, before its tensors are filled;
    any other source's, once all of it is), so that a loader can open the file and read it meanwhile."""
    description = description or repr(source)
    if not supported():
        raise NoMemoryFiles(f"no memory files (memfd_create and /proc/self/fd) on this system to load "
                              f"{description} from")
    size = int(source.size)
    check_memory(size, description)
    try:
        fd = os.memfd_create(f"hfview:{Path(str(getattr(source, 'path', 'gguf'))).name}"[:249], os.MFD_CLOEXEC)
    except OSError as e:  # ENOSYS, or a sandbox's EPERM
        raise NoMemoryFiles(f"this system refused a memory file for {description}: {e.strerror}") from e
    memory_file = MemoryFile(fd, size, description)
    try:
        os.ftruncate(fd, size)
        if size == 0:
            return memory_file
        # no MAP_POPULATE: its one thread zeroing every page up front cost more (1.07 GB: 0.48 s + 0.52 s fill) than
        # the fill's threads faulting the pages in as they write them (0.81 s), 2 cores
        mapping = mmap.mmap(fd, size, flags=mmap.MAP_SHARED, prot=mmap.PROT_READ | mmap.PROT_WRITE)
        try:
            view = memoryview(mapping)
            try:
                if hasattr(source, "fill_into"):
                    source.fill_into(view, threads=threads, on_bytes=on_bytes, fd=fd,
                                     on_header=None if on_header is None else lambda: on_header(memory_file))
                else:
                    _copy(source, view, on_bytes)
                    if on_header is not None:
                        on_header(memory_file)
            finally:
                view.release()
        finally:
            try:
                mapping.close()
            except BufferError:  # a failed fill's traceback still holds a view of it: it goes with the traceback
                pass
    except BaseException:
        memory_file.close()
        raise
    return memory_file


def _copy(source: Any, out: memoryview, on_bytes: Callable[[int], None] | None, step: int = 16 << 20) -> None:
    readinto = getattr(source, "readinto", None)
    for start in range(0, len(out), step):
        piece = out[start:start + step]
        if readinto is not None:
            got = readinto(start, piece)
            got = len(piece) if got is None else int(got)
        else:
            data = source.read(start, len(piece))
            got = len(data)
            piece[:got] = data
        if got != len(piece):
            raise HfviewError(f"{source!r} gave {got} bytes at offset {start}, {len(piece)} asked: it ends before "
                              f"its declared size {len(out)}")
        if on_bytes is not None:
            on_bytes(got)

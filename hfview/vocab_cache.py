"""The tokenizer part of a view's header, kept between opens.

Building tokenizer.* for a 128k vocabulary costs ~1.5 s: `tokenizers` parses tokenizer.json and encodes the
probe text, Python parses it again for the special tokens, and 128k tokens and merges are encoded. The build
peaks at ~250 MB, and of that the allocator keeps ~7 MB scattered after it, with `tokenizers`' 6 MB library
mapped, while llama.cpp fills the model's buffers. So where it can, a view builds it in a child process, which
writes the entry, and reads it back as a later open does: the process that holds the model never parses the
tokenizer files.

What it writes depends only on the checkpoint directory's path and non-weight files, the config as the family
reads it, and the code that builds it (hfview's and the tokenizer package's sources, the installed `tokenizers`
and `sentencepiece`). A digest of all of them names an entry under hfview's cache (hfview.cache): the entries'
bytes, as the header holds them. An entry whose own digest does not match its bytes is built again; a failed
build is never kept. HFVIEW_VOCAB_CACHE=0 builds every time, in this process.
"""
from __future__ import annotations

import functools
import hashlib
import importlib.util
import itertools
import json
import logging
import mmap
import os
import pickle
import struct
import sys
from pathlib import Path
from typing import Callable

from .cache import cache_dir, write_whole
from .errors import HfviewError
from .gguf_layout import KV, FileSpan, OpenFile, decode_kvs, encode_kv

# an entry: _MAGIC, the count of entries (u64), the sha256 of what follows, where each entry ends in the payload
# (u64 each: a string array's end is then not found by walking its strings), the entries as the header holds them
_MAGIC = b"hfview vocab 2\n"
_WEIGHTS = (".safetensors", ".bin", ".pt", ".pth", ".ckpt", ".gguf", ".h5", ".msgpack", ".npz", ".onnx")
_MAX_HASHED = 256 << 20  # non-weight files beyond this are not read to make a key: such a directory is not cached
_MAX_ENTRIES_BYTES = 512 << 20  # the cache's vocab entries, least recently used removed first
# a child costs ~0.1-0.2 s (an interpreter, hfview's imports); a vocabulary whose files are smaller than this (a 32k
# tokenizer.json is ~2 MB) leaves too little behind its parse to be worth it, and is built here
_APART_FROM = 1 << 20


def vocab_kv(build: Callable[[Path, dict], list[KV]], model_dir: Path, hparams: dict, *,
             apart: bool = True) -> list[KV]:
    """build(model_dir, hparams), or the entries it gave the last time for the same inputs; built in a child
    process where `apart` and its files are large enough to be worth one."""
    found = _key(build, model_dir, hparams) if os.environ.get("HFVIEW_VOCAB_CACHE", "1") != "0" else None
    if found is None:
        return build(model_dir, hparams)
    key, input_bytes = found
    path = cache_dir() / "vocab" / f"{key}.kv"
    if (kept := _read(path)) is not None:
        return kept
    if apart and input_bytes >= _APART_FROM and (built := _build_apart(build, model_dir, hparams, path)) is not None:
        return built
    kept, same = _build_and_keep(build, model_dir, hparams, path)
    return (_read(path) if same else None) or kept  # as a later open reads it, where it was kept


def _build_and_keep(build: Callable, model_dir: Path, hparams: dict, path: Path) -> tuple[list[KV], bool]:
    """build(model_dir, hparams) as a later open reads it back, kept at `path` (the long arrays as their bytes: the
    ~45 MB of Python lists a 128k vocabulary is built as are freed now, not encoded a second time for the header),
    and True; or where that does not read back as the same bytes, what build gave, not kept, and False."""
    entries = build(model_dir, hparams)
    encoded = list(map(encode_kv, entries))
    payload = b"".join(encoded)
    try:
        kept = decode_kvs(payload, len(entries))
        same = b"".join(map(encode_kv, kept)) == payload
    except (ValueError, TypeError):
        same = False
    if not same:
        return entries, False
    ends = struct.pack(f"<{len(encoded)}Q", *itertools.accumulate(map(len, encoded)))
    digest = hashlib.sha256(ends)
    digest.update(payload)
    if write_whole(path, lambda f: f.writelines((_MAGIC, struct.pack("<Q", len(kept)), digest.digest(), ends,
                                                 payload))):
        _trim(path.parent)
    return kept, True


# The child: sys.path first (the build's module may live anywhere the parent imports from), then the request.
_CHILD = "import pickle, sys; sys.path[:] = pickle.load(sys.stdin.buffer); import hfview.vocab_cache as v; v._child()"


def _build_apart(build: Callable, model_dir: Path, hparams: dict, path: Path) -> list[KV] | None:
    """_build_and_keep in a child process, and what it kept read back here; None where the child could not build
    it (a build that cannot be sent by reference, no interpreter to run, a child that failed): the caller then
    builds here, where a genuine error shows its own traceback. A refusal the build raised (an HfviewError) is
    raised here, and what it logged is logged here."""
    try:
        request = pickle.dumps((build, Path(model_dir), hparams, path))
    except Exception:  # noqa: BLE001 - a closure, a lambda, a value that refuses to be sent
        return None
    import subprocess  # here: only a cache miss starts a child, and the import is 2.6 ms of every launch

    try:
        done = subprocess.run([sys.executable, "-c", _CHILD], input=pickle.dumps(sys.path) + request,
                              stdout=subprocess.PIPE, check=False)
        records, outcome = pickle.loads(done.stdout) if done.returncode == 0 else ((), None)
    except Exception:  # noqa: BLE001 - no usable interpreter (embedded), or its answer did not arrive whole
        return None
    for record in records:
        logger = logging.getLogger(record.name)
        if logger.isEnabledFor(record.levelno):
            logger.handle(record)
    if isinstance(outcome, HfviewError):
        raise outcome
    if outcome is True:  # kept
        return _read(path)
    if isinstance(outcome, tuple):  # built, not kept (an unwritable cache): its bytes
        payload, count = outcome
        return decode_kvs(payload, count)
    return None


def _child() -> None:
    """In the child: build, keep, and answer (log records, outcome) on stdout, the outcome True (kept at the path),
    the entries' bytes and count (built, not kept: an unwritable cache), an HfviewError (refused), or None
    (anything else: the parent builds it again, and shows what went wrong)."""
    answer, sys.stdout = sys.stdout.buffer, sys.stderr  # nothing the build prints can garble the answer
    records: list[logging.LogRecord] = []

    class Keep(logging.Handler):
        def emit(self, record):
            record.msg, record.args, record.exc_info, record.exc_text = record.getMessage(), None, None, None
            records.append(record)

    logging.root.addHandler(Keep())
    logging.root.setLevel(logging.DEBUG)  # the parent's loggers decide what is shown
    outcome: object = None
    try:
        build, model_dir, hparams, path = pickle.load(sys.stdin.buffer)
        kept, same = _build_and_keep(build, model_dir, hparams, path)
        if same:
            outcome = True if _read(path) is not None else (b"".join(map(encode_kv, kept)), len(kept))
    except HfviewError as exc:
        outcome = exc
    except Exception:  # noqa: BLE001 - the parent builds it again, and shows it
        pass
    try:
        data = pickle.dumps((records, outcome))
    except Exception:  # noqa: BLE001 - an error that cannot be sent: the parent builds again, and raises it
        data = pickle.dumps((records, None))
    answer.write(data)
    answer.flush()


def _read(path: Path) -> list[KV] | None:
    """The entries kept at `path`, or None where there is no such entry or it is damaged. Their long arrays stay in
    the file (FileSpan): a header serves them from there, and this process holds none of their bytes."""
    try:
        f = OpenFile(path)
    except OSError:
        return None
    try:
        os.utime(path)  # last used: what _trim keeps
    except OSError:
        pass  # a read-only cache still serves
    head = len(_MAGIC) + 8 + 32
    # mapped while it is checked and walked, then unmapped: none of its pages stay in this process
    try:
        data = mmap.mmap(f.fd, 0, access=mmap.ACCESS_READ)
    except (OSError, ValueError):  # ValueError: an empty file
        f.close()
        return None
    spans: list[FileSpan] = []
    entries, start = None, 0

    def keep(begin: int, end: int) -> FileSpan:
        spans.append(FileSpan(f, start + begin, end - begin))
        return spans[-1]

    with data, memoryview(data) as view:
        if len(view) >= head and view[:len(_MAGIC)] == _MAGIC:
            (count,) = struct.unpack_from("<Q", view, len(_MAGIC))
            start = head + 8 * count
            if start <= len(view) and hashlib.sha256(view[head:]).digest() == view[head - 32:head]:
                ends = struct.unpack_from(f"<{count}Q", view, head)
                with view[start:] as payload:
                    try:
                        entries = decode_kvs(payload, count, keep=keep, ends=ends)
                    except ValueError:
                        pass
    if entries is None or not spans:
        f.close()
    return entries


def _key(build: Callable, model_dir: Path, hparams: dict) -> tuple[str, int] | None:
    """The entry's name, and how many bytes of files it was made from; None where they are too many to read."""
    h = hashlib.sha256()
    h.update(_code_digest())
    name = getattr(build, "__qualname__", None) or repr(build)  # a function, or a value such as sentencepiece_only
    h.update(f"{build.__module__}.{name}\0{model_dir}\0".encode())
    h.update(json.dumps(hparams, sort_keys=True, default=repr).encode())
    files, total = [], 0
    for p in sorted(Path(model_dir).rglob("*")):
        rel = p.relative_to(model_dir)
        if any(part.startswith(".") for part in rel.parts) or p.name.endswith(_WEIGHTS) or not p.is_file():
            continue
        total += p.stat().st_size
        if total > _MAX_HASHED:
            return None
        files.append((rel, p))
    # read in pieces below glibc's mmap threshold: freeing one MB-sized block raises the threshold, after which
    # llama.cpp's MB-sized temporaries come from the heap and leave resident holes there (~5 MiB more at the peak)
    piece = bytearray(64 << 10)
    for rel, p in files:
        h.update(f"\0{rel.as_posix()}\0".encode())
        with open(p, "rb", buffering=0) as f:
            while n := f.readinto(piece):
                h.update(memoryview(piece)[:n])
    return h.hexdigest(), total


@functools.lru_cache(maxsize=1)
def _code_digest() -> bytes:
    """What the build's code is: hfview's sources (its tokenizer package among them), the tokenizer libraries' files,
    each named by its size and modification time, as Python's own bytecode cache knows a source (reading hfview's
    sources whole took 0.02 s of every open)."""
    h = hashlib.sha256()
    for root in (Path(__file__).parent,):
        for p in sorted(root.rglob("*.py")):
            st = p.stat()
            h.update(f"\0{p.relative_to(root.parent).as_posix()} {st.st_size} {st.st_mtime_ns}".encode())
    for lib in ("tokenizers", "sentencepiece"):
        spec = importlib.util.find_spec(lib)  # without importing it
        if spec is None or not spec.origin:
            h.update(f"\0{lib} absent".encode())
            continue
        for p in sorted(Path(spec.origin).parent.iterdir()):
            if p.is_file():
                st = p.stat()
                h.update(f"\0{lib}/{p.name} {st.st_size} {st.st_mtime_ns}".encode())
    return h.digest()


def _trim(directory: Path) -> None:
    """Remove the least recently used entries while all of them together exceed _MAX_ENTRIES_BYTES."""
    try:
        with os.scandir(directory) as listing:
            entries = [(e.stat().st_mtime_ns, e.stat().st_size, e.path) for e in listing if e.name.endswith(".kv")]
        if sum(size for _, size, _ in entries) <= _MAX_ENTRIES_BYTES:
            return
        total = 0
        for _, size, path in sorted(entries, reverse=True):
            total += size
            if total > _MAX_ENTRIES_BYTES:
                os.unlink(path)
    except OSError:
        pass  # another process trimming at the same time

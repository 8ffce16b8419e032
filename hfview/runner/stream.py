"""Feed llama.cpp a GGUF that exists only as a byte source: no file is written to disk.

A *byte source* is any object with ``size: int`` and ``read(offset, n) -> bytes``; when it also has
``readinto(offset, memoryview) -> int | None`` that is used instead, so bytes land straight in
llama.cpp's buffer. ``load_model`` takes one of two data paths (``choose_data_path``): a view (HfCheckpoint)
whose weights stay on the CPU is filled into a memory file (hfview.memfile) that llama.cpp loads by path with its
ordinary loader and mmap; anything else goes through ``open_stream``, a C ``FILE*`` whose read/seek/close are
Python functions (glibc ``fopencookie``, macOS ``funopen``), handed to ``llama_model_load_from_file_ptr``.
``StreamModel`` owns model + context and computes logits.

ctypes rules that matter here (see NOTES.md): every callback object and every array llama.cpp may
touch must stay referenced from Python for as long as C can use it, and an exception must never
escape a callback into C. A failing callback records its exception, returns an error to C, and the
exception is re-raised once llama.cpp has returned.
"""
from __future__ import annotations

import ctypes
import os
import sys
import threading
from collections import deque
from typing import Any, Callable, Protocol

import numpy as np

from hfview import memfile
from hfview.errors import HfviewError

from .devices import backend_init, check_device, llama_bindings, n_gpu_layers as layers_for

__all__ = [
    "ByteSource", "StreamFile", "open_stream", "load_model", "Model", "StreamModel",
    "StreamError", "ModelLoadError",
]


class ByteSource(Protocol):
    size: int

    def read(self, offset: int, n: int) -> bytes: ...


class StreamError(HfviewError, RuntimeError):
    """The byte source misbehaved (e.g. returned nothing before its declared end)."""


class ModelLoadError(HfviewError, RuntimeError):
    """llama.cpp refused the GGUF; the message carries llama.cpp's own error lines."""


def _describe(source: Any) -> str:
    name = getattr(source, "name", None) or getattr(source, "path", None)
    return f"{type(source).__name__}({name})" if name else repr(source)


def _check_source(source: Any) -> int:
    size = getattr(source, "size", None)
    if not isinstance(size, int) or isinstance(size, bool) or size < 0:
        raise TypeError(f"byte source {_describe(source)} needs an int attribute 'size' >= 0, got {size!r}")
    if not callable(getattr(source, "read", None)):
        raise TypeError(f"byte source {_describe(source)} needs a method read(offset, n) -> bytes")
    return size


# --------------------------------------------------------------------------------------------------
# FILE* over a byte source
# --------------------------------------------------------------------------------------------------

_libc = ctypes.CDLL(None, use_errno=True)
_libc.fclose.argtypes = [ctypes.c_void_p]
_libc.fclose.restype = ctypes.c_int
_libc.setvbuf.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int, ctypes.c_size_t]
_libc.setvbuf.restype = ctypes.c_int
_IOFBF = 0  # glibc and macOS agree

if sys.platform == "darwin":
    # int (*readfn)(void *, char *, int); fpos_t (*seekfn)(void *, fpos_t, int); int (*closefn)(void *)
    _READ = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int)
    _WRITE = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int)
    _SEEK = ctypes.CFUNCTYPE(ctypes.c_int64, ctypes.c_void_p, ctypes.c_int64, ctypes.c_int)
    _CLOSE = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p)
    _libc.funopen.argtypes = [ctypes.c_void_p, _READ, _WRITE, _SEEK, _CLOSE]
    _libc.funopen.restype = ctypes.c_void_p
elif hasattr(_libc, "fopencookie"):
    # glibc: ssize_t read(void *, char *, size_t); int seek(void *, off64_t *, int); int close(void *)
    _READ = ctypes.CFUNCTYPE(ctypes.c_ssize_t, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t)
    _WRITE = ctypes.CFUNCTYPE(ctypes.c_ssize_t, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t)
    _SEEK = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.POINTER(ctypes.c_int64), ctypes.c_int)
    _CLOSE = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p)

    class _CookieIO(ctypes.Structure):
        _fields_ = [("read", _READ), ("write", _WRITE), ("seek", _SEEK), ("close", _CLOSE)]

    _libc.fopencookie.argtypes = [ctypes.c_void_p, ctypes.c_char_p, _CookieIO]
    _libc.fopencookie.restype = ctypes.c_void_p
else:  # pragma: no cover - e.g. musl or Windows
    _READ = None

_SEEK_SET, _SEEK_CUR, _SEEK_END = 0, 1, 2
_EINVAL = 22


class StreamFile:
    """A read-only C ``FILE*`` over a byte source. Owns the callbacks; pass it where C wants ``FILE*``.

    ``fp`` is the raw pointer (an int); the object itself also converts to ``c_void_p`` in ctypes
    calls. After C has used it, call ``raise_if_failed()``: an exception raised by the source inside
    a callback is re-raised there, with a note saying which read failed.
    """

    def __init__(self, source: Any, buffer_size: int = 1 << 18):
        if _READ is None:
            raise OSError(f"no fopencookie/funopen in this C library ({sys.platform}): cannot stream a GGUF")
        self.source = source
        self.size = _check_source(source)
        self.pos = 0
        self.error: BaseException | None = None
        self.bytes_read = 0
        self._readinto = getattr(source, "readinto", None)
        # The callbacks must outlive the FILE*: they are attributes of self, and self.close() is
        # the only place the FILE* is released.
        self._cb_read = _READ(self._on_read)
        self._cb_write = _WRITE()  # NULL: the stream is read-only
        self._cb_seek = _SEEK(self._on_seek_darwin if sys.platform == "darwin" else self._on_seek)
        self._cb_close = _CLOSE(self._on_close)
        if sys.platform == "darwin":
            fp = _libc.funopen(None, self._cb_read, self._cb_write, self._cb_seek, self._cb_close)
        else:
            self._io = _CookieIO(self._cb_read, self._cb_write, self._cb_seek, self._cb_close)
            fp = _libc.fopencookie(None, b"rb", self._io)
        if not fp:
            err = ctypes.get_errno()
            raise OSError(err, f"could not open a C stream over {_describe(source)}: {os.strerror(err)}")
        self.fp: int | None = fp
        # stdio moves cookie-stream data through its own buffer (glibc never hands a large fread's
        # destination to the read callback), so the buffer size sets how many Python calls a load
        # costs: libc's 8 KiB means ~130k calls per GiB. Bigger is not free: a seek outside the
        # buffer refills it from a buffer-aligned offset, so each tensor may pull up to one buffer
        # of bytes it does not need (measured on a 332 MiB GGUF: 256 KiB reads 1.04x the file in
        # 1386 calls; 1 MiB 1.17x; 4 MiB 1.67x). Ours is owned by self, like the callbacks.
        if buffer_size:
            self._buf = ctypes.create_string_buffer(buffer_size)
            if _libc.setvbuf(fp, self._buf, _IOFBF, buffer_size) != 0:
                self.close()
                raise OSError(f"setvbuf({buffer_size}) failed on the stream over {_describe(source)}")

    @property
    def _as_parameter_(self) -> ctypes.c_void_p:
        if self.fp is None:
            raise ValueError("the stream is closed")
        return ctypes.c_void_p(self.fp)

    # -- callbacks: never let an exception reach C ------------------------------------------------

    def _fail(self, exc: BaseException, what: str) -> None:
        if self.error is None:  # keep the first failure: later ones are consequences
            if isinstance(exc, HfviewError) and not isinstance(exc, StreamError):
                # the source refused its own bytes (e.g. a shard cut or replaced under it): a StreamError that
                # says where in the stream, carrying the source's words (which name the shard and its offset)
                wrapped = StreamError(f"{what} of the GGUF stream over {_describe(self.source)} failed: {exc}")
                wrapped.__cause__ = exc
                exc = wrapped
            elif hasattr(exc, "add_note"):
                exc.add_note(f"while llama.cpp read the GGUF stream over {_describe(self.source)}: {what}")
            self.error = exc

    def _on_read(self, _cookie, buf, n):
        offset = self.pos
        try:
            want = max(0, min(int(n), self.size - offset))
            if want == 0:
                return 0  # at or past the end: EOF
            if self._readinto is not None:
                view = memoryview((ctypes.c_ubyte * want).from_address(buf)).cast("B")
                try:
                    got = self._readinto(offset, view)
                finally:
                    view.release()
                got = want if got is None else int(got)
                if not 0 <= got <= want:
                    raise StreamError(f"readinto({offset}, <{want} bytes>) returned {got}")
            else:
                data = self.source.read(offset, want)
                got = len(data)
                if got > want:
                    raise StreamError(f"read({offset}, {want}) returned {got} bytes, more than asked")
                ctypes.memmove(buf, data, got)
            if got == 0:
                raise StreamError(f"byte source returned no data at offset {offset}, "
                                  f"before its declared size {self.size}: the source is truncated")
            self.pos = offset + got
            self.bytes_read += got
            return got
        except BaseException as exc:  # noqa: BLE001 - must not unwind into C
            self._fail(exc, f"read of {n} bytes at offset {offset}")
            return -1

    def _seek_to(self, offset: int, whence: int) -> int:
        base = {_SEEK_SET: 0, _SEEK_CUR: self.pos, _SEEK_END: self.size}.get(whence)
        if base is None or base + offset < 0:
            ctypes.set_errno(_EINVAL)
            return -1
        self.pos = base + offset
        return self.pos

    def _on_seek(self, _cookie, offset_p, whence):
        try:
            new = self._seek_to(offset_p[0], whence)
            if new < 0:
                return -1
            offset_p[0] = new
            return 0
        except BaseException as exc:  # noqa: BLE001
            self._fail(exc, f"seek (whence {whence})")
            return -1

    def _on_seek_darwin(self, _cookie, offset, whence):
        try:
            return self._seek_to(offset, whence)
        except BaseException as exc:  # noqa: BLE001
            self._fail(exc, f"seek (whence {whence})")
            return -1

    def _on_close(self, _cookie):
        return 0

    # -- Python side -------------------------------------------------------------------------------

    def raise_if_failed(self) -> None:
        if self.error is not None:
            exc, self.error = self.error, None
            raise exc

    def close(self) -> None:
        if self.fp is not None:
            fp, self.fp = self.fp, None
            _libc.fclose(fp)

    def __enter__(self) -> "StreamFile":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __del__(self):
        try:
            self.close()
        except Exception:  # noqa: BLE001 - interpreter teardown
            pass


def open_stream(source: Any, buffer_size: int = 1 << 18) -> StreamFile:
    """A C ``FILE*`` (as a ``StreamFile`` that owns its callbacks) reading ``source`` from offset 0.

    buffer_size: the stdio buffer (0 keeps libc's default); reads reach the source in chunks of it.
    """
    return StreamFile(source, buffer_size)


# --------------------------------------------------------------------------------------------------
# llama.cpp
# --------------------------------------------------------------------------------------------------

def cpu_repack_is_safe() -> bool:
    """Whether llama.cpp may put weights in the CPU's extra buffer types (repacked layouts) on this machine.

    Not where ggml was built with AMX: its AMX matmul (``ggml_backend_amx_mul_mat``) segfaults on some weights
    (llama.cpp issue #20824, open; here the Q8_0 file of the qwen3_moe fixture, the converter's own as much as
    the view, crashes in ``llama_decode``). There the repack is off, as llama.cpp's ``--no-repack`` does:
    slower quantized matmuls instead of a crash; the numbers stay ggml's plain CPU kernels'."""
    backend_init()
    return b"AMX_INT8 = 1" not in llama_bindings().llama_print_system_info()


class _LlamaLog:
    """Route llama.cpp's log into Python while a call runs, so its error lines can name a failure.

    The log hook is global in llama.cpp; the previous hook is put back on exit.
    """
    _LEVEL_ERROR, _LEVEL_CONT = 4, 5  # enum ggml_log_level in ggml.h (NONE, DEBUG, INFO, WARN, ERROR, CONT)

    def __init__(self, verbose: bool = False):
        self.verbose = verbose
        self.lines: deque[tuple[int, str]] = deque(maxlen=400)

    def _on_log(self, level, text, _ud):
        try:
            s = (text or b"").decode("utf-8", "replace")
            if level == self._LEVEL_CONT and self.lines:
                lvl, prev = self.lines[-1]
                self.lines[-1] = (lvl, prev + s)
            else:
                self.lines.append((level, s))
            if self.verbose:
                sys.stderr.write(s)
        except BaseException:  # noqa: BLE001 - never unwind into C
            pass

    def errors(self, tail: int = 6) -> str:
        errs = [s.strip() for lvl, s in self.lines if lvl == self._LEVEL_ERROR and s.strip()]
        return "; ".join(errs[-tail:])

    def __enter__(self) -> "_LlamaLog":
        ll = llama_bindings()
        self._prev_cb, self._prev_ud = ll.llama_log_callback(), ctypes.c_void_p()
        ll.llama_log_get(ctypes.byref(self._prev_cb), ctypes.byref(self._prev_ud))
        self._cb = ll.llama_log_callback(self._on_log)
        ll.llama_log_set(self._cb, None)
        return self

    def __exit__(self, *exc) -> None:
        llama_bindings().llama_log_set(self._prev_cb, self._prev_ud)


class _Progress:
    """``params.progress_callback``: drives a tqdm bar (progress=True) or calls progress(fraction).

    A callable that returns exactly ``False`` cancels the load; an exception it raises cancels the
    load and is re-raised after llama.cpp returns.
    """

    def __init__(self, progress: bool | Callable[[float], Any], desc: str):
        self.error: BaseException | None = None
        self.cancelled = False
        self._bar = None
        if progress is True:
            from tqdm.auto import tqdm
            self._bar = tqdm(total=100, desc=desc, unit="%", leave=False,
                             bar_format="{l_bar}{bar}| {n:.0f}/{total:.0f}%")
            self._fn = None
        else:
            self._fn = progress
        self.c_callback = llama_bindings().llama_progress_callback(self._on_progress)

    def _on_progress(self, fraction, _ud):
        try:
            if self._bar is not None:
                self._bar.update(max(0.0, 100.0 * fraction - self._bar.n))
                return True
            if self._fn(float(fraction)) is False:
                self.cancelled = True
                return False
            return True
        except BaseException as exc:  # noqa: BLE001
            if self.error is None:
                self.error = exc
            return False

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()


def _no_offload_devices():
    # params.devices is a NULL-terminated list of devices to offload to; a list holding only the
    # terminator keeps everything on the CPU even when the build has GPU backends.
    return (ctypes.c_void_p * 1)(None)


class _Closing:
    """Context-manager and finaliser behaviour of objects that own llama.cpp handles: `close()` on exit,
    and on collection as a last resort."""

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __del__(self):
        try:
            self.close()
        except Exception:  # noqa: BLE001 - never raise from a finaliser
            pass


class Model(_Closing):
    """A loaded ``llama_model*`` with its vocabulary. Free it with ``close()`` (or ``with``)."""

    def __init__(self, ptr, description: str, vocab_only: bool, data_path: tuple[str, str] = ("file", "a path")):
        ll = llama_bindings()
        self.ptr = ptr
        self.description = description
        self.vocab_only = vocab_only
        # how llama.cpp got the bytes ("memfd", "stream" or "file") and why that way (load_model's choose_data_path)
        self.data_path, self.data_path_reason = data_path
        self.vocab = ll.llama_model_get_vocab(ptr)
        self.n_vocab: int = ll.llama_vocab_n_tokens(self.vocab)

    def tokenize(self, text: str | bytes, add_special: bool = True, parse_special: bool = False) -> list[int]:
        """Token ids from llama.cpp's tokenizer for this GGUF (``llama_tokenize``)."""
        ll = llama_bindings()
        self._check_open()
        data = text.encode("utf-8") if isinstance(text, str) else bytes(text)
        cap = len(data) + 8
        while True:
            buf = (ll.llama_token * cap)()  # a named local: stays alive through the call
            n = ll.llama_tokenize(self.vocab, data, len(data), buf, cap, add_special, parse_special)
            if n >= 0:
                return list(buf[:n])
            if -n <= cap:  # pragma: no cover - llama.cpp reports the size it needs
                raise RuntimeError(f"llama_tokenize failed ({n}) on {len(data)} bytes")
            cap = -n

    def token_to_piece(self, token: int, special: bool = True) -> bytes:
        ll = llama_bindings()
        self._check_open()
        buf = ctypes.create_string_buffer(64)
        n = ll.llama_token_to_piece(self.vocab, token, buf, len(buf), 0, special)
        if n < 0:
            buf = ctypes.create_string_buffer(-n)
            n = ll.llama_token_to_piece(self.vocab, token, buf, len(buf), 0, special)
        return buf.raw[:n]

    def _check_open(self) -> None:
        if self.ptr is None:
            raise ValueError(f"model {self.description} is closed")

    def close(self) -> None:
        if self.ptr is not None:
            ptr, self.ptr = self.ptr, None
            with _LlamaLog():
                llama_bindings().llama_model_free(ptr)



_OVERRIDE_TAGS = {bool: "BOOL", int: "INT", float: "FLOAT", str: "STR"}


def _with_kv_overrides(params, kv: dict) -> Any:
    """Point params.kv_overrides at the overrides already there (a caller's, e.g. llama_cpp.Llama's; they win:
    llama.cpp keeps the first of a key) followed by ``kv`` (HfCheckpoint.load_kv: the family's KV llama.cpp needs
    that the converter's file lacks). Returns the array, which must outlive the load."""
    ll = llama_bindings()
    given = []
    if params.kv_overrides:
        i = 0
        while params.kv_overrides[i].key:  # the array ends with an empty key (ctypes reads a char[] up to its NUL)
            given.append(params.kv_overrides[i])
            i += 1
    have = {o.key for o in given}
    ours = [(k.encode(), v) for k, v in kv.items() if k.encode() not in have]
    arr = (ll.llama_model_kv_override * (len(given) + len(ours) + 1))()
    for i, o in enumerate(given):
        arr[i] = o
    for i, (key, value) in enumerate(ours, len(given)):
        o = arr[i]
        o.key = key
        o.tag = getattr(ll, f"LLAMA_KV_OVERRIDE_TYPE_{_OVERRIDE_TAGS[type(value)]}")
        if isinstance(value, bool):
            o.value.val_bool = value
        elif isinstance(value, int):
            o.value.val_i64 = value
        elif isinstance(value, float):
            o.value.val_f64 = value
        else:
            o.value.val_str = value.encode()
    params.kv_overrides = ctypes.cast(arr, ctypes.POINTER(ll.llama_model_kv_override))
    return arr


DATA_PATHS = ("auto", "memfd", "stream")
DATA_PATH_ENV = "HFVIEW_DATA_PATH"


def choose_data_path(source: Any, data_path: str | None = None, *, vocab_only: bool = False,
                     offload: bool = False) -> tuple[str, str]:
    """("memfd" | "stream", why): how ``load_model`` hands ``source`` to llama.cpp. ``data_path`` (else the
    HFVIEW_DATA_PATH environment variable, else "auto"): "memfd" fills a memory file with the view and llama.cpp
    maps it (hfview.memfile, then llama.cpp's own loader); "stream" feeds it through a FILE*; "auto" takes the
    memory file for a view whose weights stay in this machine's memory, and the stream for anything else."""
    asked = data_path or os.environ.get(DATA_PATH_ENV) or "auto"
    if asked not in DATA_PATHS:
        raise HfviewError(f"data path {asked!r} ({'argument' if data_path else DATA_PATH_ENV}): choose one of "
                          f"{', '.join(DATA_PATHS)}")
    if asked != "auto":
        return asked, f"asked ({'argument' if data_path else DATA_PATH_ENV})"
    if not hasattr(source, "fill_into"):
        return "stream", "a byte source, not a view"
    if vocab_only:
        return "stream", "vocabulary only: llama.cpp reads the header alone"
    if offload:
        return "stream", ("weights offloaded to a device: a memory file would keep all of them in this machine's "
                          "memory as long as the model lives")
    if not memfile.supported():
        return "stream", "fallback: no memory files (memfd) on this system"
    return "memfd", "auto: a view whose weights stay in this machine's memory"


def load_model(source: Any, *, n_gpu_layers: int = 0, progress: bool | Callable[[float], Any] | None = None,
               vocab_only: bool = False, offload: bool | None = None, verbose: bool = False,
               buffer_size: int = 1 << 18, params=None, data_path: str | None = None) -> Model:
    """Load a GGUF served by ``source`` into llama.cpp: a view filled into a memory file that llama.cpp maps, or
    any byte source read through a ``FILE*`` (``choose_data_path``; ``data_path`` "auto", "memfd" or "stream",
    default HFVIEW_DATA_PATH or auto). The returned Model's ``data_path`` says which was used, and why.

    n_gpu_layers: layers to offload (-1: all). offload=False pins everything to the CPU even on a
    GPU build (default: offload only when n_gpu_layers != 0). progress: True for a tqdm bar, or a
    callable taking the loaded fraction. verbose: echo llama.cpp's log to stderr. buffer_size: the
    stdio buffer of the stream, i.e. the size of the reads the source sees (see StreamFile).
    params: ``llama_model_params`` to start from (a copy; e.g. llama_cpp.Llama's, with its kv_overrides
    and split); the arguments above and the data path's settings (mmap or not, no lazy reads) are laid over it.
    Raises the source's own exception if a read failed, ModelLoadError if llama.cpp refused the data,
    hfview.memfile.MemoryFileError where the memory file does not fit in the memory free.
    """
    ll = llama_bindings()
    desc = _describe(source)
    if hasattr(source, "for_llama_cpp"):  # a view (HfCheckpoint): its family may declare load-time array values
        source = source.for_llama_cpp()
    if offload is None:
        offload = n_gpu_layers != 0
    path, why = choose_data_path(source, data_path, vocab_only=vocab_only, offload=offload)
    backend_init()
    params = ll.llama_model_default_params() if params is None else type(params).from_buffer_copy(params)
    params.lazy_mode = ll.LLAMA_LAZY_MODE_OFF  # every tensor read at load, as the file loader compared against
    params.use_extra_bufts = params.use_extra_bufts and cpu_repack_is_safe()
    params.n_gpu_layers = n_gpu_layers
    params.vocab_only = vocab_only
    keep_alive = []
    if getattr(source, "load_kv", None):
        keep_alive.append(_with_kv_overrides(params, source.load_kv))
    if not offload:
        devs = _no_offload_devices()
        keep_alive.append(devs)
        params.devices = ctypes.cast(devs, ctypes.c_void_p)
    prog = _Progress(progress, f"loading {desc}") if progress else None

    def say_data_path() -> None:
        if verbose:
            sys.stderr.write(f"hfview: data path: {_DATA_PATH_WORDS[path]} ({why})\n")

    # params passed in may carry a progress callback of their own (NULL by default); a ctypes field read is a view of
    # the struct's memory, so it is kept from a copy
    given_callback = type(params).from_buffer_copy(params).progress_callback
    ptr = None
    memory_file = None
    try:
        say_data_path()
        if path == "memfd":
            # the memory file is a real file llama.cpp maps (its pages are already memory)
            params.load_mode = ll.LLAMA_LOAD_MODE_MMAP
            loader = _LoadWhileFilling(params, prog._on_progress if prog is not None else
                                       given_callback if given_callback else None)
            early = getattr(source, "data_start", 0) * _LOAD_AT_HEADER_FROM >= source.size
            with _LlamaLog(verbose) as log:
                try:
                    memory_file = _filled(source, desc, progress, on_header=loader.start if early else None)
                except memfile.NoMemoryFiles as exc:  # before any file was made: no load begun
                    if why.startswith("asked"):
                        raise
                    path, why = "stream", f"fallback: {exc}"
                    say_data_path()
                finally:
                    ptr = loader.finish(memory_file)
            size, how = source.size, "from a memory file"
        if path == "stream":
            params.load_mode = ll.LLAMA_LOAD_MODE_NONE  # a FILE* cannot be mapped
            params.progress_callback = prog.c_callback if prog is not None else given_callback
            with open_stream(source, buffer_size) as stream, _LlamaLog(verbose) as log:
                ptr = ll.llama_model_load_from_file_ptr(stream, params)
                stream.raise_if_failed()  # our exception first: it is the cause of anything llama.cpp says
            size, how = stream.size, "through a FILE*"
        if prog is not None and prog.error is not None:
            raise prog.error
        if not ptr:
            ptr = None
            if prog is not None and prog.cancelled:
                raise ModelLoadError(f"loading {desc} was cancelled by the progress callback")
            why_not = log.errors() or "no error message from llama.cpp"
            raise ModelLoadError(f"llama.cpp could not load the GGUF from {desc} ({size} bytes) {how}: {why_not}")
    except BaseException:
        if ptr:  # loaded, but a callback failed late: do not leak the model
            ll.llama_model_free(ptr)
        raise
    finally:
        if memory_file is not None:
            memory_file.close()  # llama.cpp's own mapping holds the pages from here on
        if prog is not None:
            prog.close()
        del keep_alive
    return Model(ptr, desc, vocab_only, data_path=(path, why))


# llama.cpp's load of a memory file begins at its header where the header is at least 1/1000 of the file. Its work
# before it maps the file (the vocabulary's tokens and merges) grows with the header, and overlaps the fill; what the
# overlap costs grows with the file: llama.cpp maps it with MAP_POPULATE, which runs ahead of the fill and makes
# (zeroes) the pages the fill's pwrite would have made without. bench/load.py, 2 cores, launch -> logits with the
# load begun at the header vs after the fill (9 alternating runs each): DeepSeek-V3 (header 1/169 of the file,
# 128k vocabulary) 0.90x, Granite hybrid (1/592) 0.89-0.95x; Llama (1/1474, 32k) 1.08x.
_LOAD_AT_HEADER_FROM = 1000


class _LoadWhileFilling:
    """llama.cpp's load of a memory file on a thread, begun as soon as the file's header is in place (where that pays:
    _LOAD_AT_HEADER_FROM) or once the file is filled: it reads the header and the vocabulary and maps the file
    (MAP_POPULATE: its page tables made) while the fill goes on, and waits at its first progress call, which
    llama_model_loader::load_all_data makes before it touches any tensor's bytes, until the fill has ended. A fill
    that failed cancels it there."""

    def __init__(self, params, then: Callable[[float, Any], bool] | None):
        """`then(fraction, user_data)`: the progress callback llama.cpp would otherwise call, once the fill has ended."""
        self._params, self._then = params, then
        self._filled = threading.Event()
        self._fill_ok = False
        self._thread: threading.Thread | None = None
        self._ptr = None
        self._error: BaseException | None = None
        self._c_callback = llama_bindings().llama_progress_callback(self._on_progress)
        params.progress_callback = self._c_callback

    def start(self, memory_file: memfile.MemoryFile) -> None:
        path = os.fsencode(memory_file.path)  # opened by llama.cpp itself before the fill's end: kept open till then
        self._thread = threading.Thread(target=self._load, args=(path,), name="hfview-load", daemon=True)
        self._thread.start()

    def _load(self, path: bytes) -> None:
        try:
            self._ptr = llama_bindings().llama_model_load_from_file(path, self._params) or None
        except BaseException as exc:  # noqa: BLE001 - raised by finish, in the caller's thread
            self._error = exc

    def _on_progress(self, fraction, user_data):
        try:
            self._filled.wait()
        except BaseException:  # noqa: BLE001 - never unwind into C
            return False
        if not self._fill_ok:
            return False  # the fill failed: llama.cpp frees what it made and returns no model
        return True if self._then is None else bool(self._then(fraction, user_data))

    def finish(self, memory_file: memfile.MemoryFile | None):
        """The model (a pointer, or None where llama.cpp refused or was cancelled), once the fill has ended: filled
        (`memory_file`), or failed (None: the load, if begun, is cancelled)."""
        if memory_file is not None and self._thread is None:  # a file whose header came only with its end
            self.start(memory_file)
        self._fill_ok = memory_file is not None
        self._filled.set()
        if self._thread is not None:
            self._thread.join()
        if self._error is not None:
            raise self._error
        return self._ptr


_DATA_PATH_WORDS = {"memfd": "memory file (memfd) mapped by llama.cpp's file loader",
                    "stream": "FILE* stream over the view", "file": "llama.cpp's file loader"}


def _filled(source: Any, desc: str, progress, on_header=None):
    """The memory file holding `source`, with a bar over its bytes when progress is True."""
    bar = None
    if progress is True:
        from tqdm.auto import tqdm
        bar = tqdm(total=source.size, desc=f"filling memory with {desc}", unit="B", unit_scale=True, leave=False)
    try:
        return memfile.fill(source, description=desc, on_bytes=bar.update if bar is not None else None,
                            on_header=on_header)
    finally:
        if bar is not None:
            bar.close()


def load_model_from_path(path: str | os.PathLike, *, n_gpu_layers: int = 0, use_mmap: bool = False,
                         verbose: bool = False) -> Model:
    """llama.cpp's own file loader (for comparisons and timing)."""
    ll = llama_bindings()
    backend_init()
    params = ll.llama_model_default_params()
    params.load_mode = ll.LLAMA_LOAD_MODE_MMAP if use_mmap else ll.LLAMA_LOAD_MODE_NONE
    params.lazy_mode = ll.LLAMA_LAZY_MODE_OFF
    params.use_extra_bufts = cpu_repack_is_safe()  # as load_model: both sides of a comparison load alike
    params.n_gpu_layers = n_gpu_layers
    with _LlamaLog(verbose) as log:
        ptr = ll.llama_model_load_from_file(os.fsencode(path), params)
    if not ptr:
        raise ModelLoadError(f"llama.cpp could not load {path}: {log.errors() or 'no error message'}")
    return Model(ptr, str(path), False, data_path=("file", "a GGUF file"))


KV_CACHE_TYPES = ("f16", "f32")


class StreamModel(_Closing):
    """Model + context over a byte source: ``logits(ids)`` for every position, ``tokenize(text)``.

    ``source`` is a byte source or an already loaded ``Model`` (then this object takes ownership).
    device: "cpu" | "cuda" | "metal" (checked against the build, see runner.devices).
    """

    def __init__(self, source: Any, *, device: str = "cpu", n_ctx: int = 512, n_batch: int | None = None,
                 n_threads: int | None = None, progress: bool | Callable[[float], Any] | None = None,
                 verbose: bool = False, eval_callback=None, owns_model: bool = True, kv_cache: str = "f16"):
        """eval_callback: a ``ggml_backend_sched_eval_callback`` set as the context's ``cb_eval`` (kept alive
        by this object; see runner.capture). owns_model=False: ``close()`` frees the context only, so a
        second context can share a ``Model`` that another StreamModel owns. kv_cache: "f16" (llama.cpp's
        default) or "f32": a float32 KV cache and no flash attention (whose CPU kernel rounds Q to f16), for
        comparisons finer than f16's rounding (measured on a tiny Llama: logits NMSE 3.7e-7 -> 2.6e-13)."""
        ll = llama_bindings()
        self.ctx = None
        self.model = None
        self.owns_model = owns_model
        self._eval_callback = eval_callback  # C holds a pointer to it as long as the context lives
        device = check_device(device)
        self.device = device
        self.verbose = verbose
        self.model = source if isinstance(source, Model) else load_model(
            source, n_gpu_layers=layers_for(device), progress=progress, verbose=verbose)
        if self.model.vocab_only:
            raise ValueError(f"{self.model.description} was loaded vocab_only: no weights to run")
        self.n_ctx = int(n_ctx)
        self.n_batch = int(n_batch or n_ctx)
        cp = ll.llama_context_default_params()
        cp.n_ctx = self.n_ctx
        cp.n_batch = cp.n_ubatch = self.n_batch
        cp.n_seq_max = 1
        cp.no_perf = True
        if n_threads:
            cp.n_threads = cp.n_threads_batch = int(n_threads)
        if device == "cpu":
            cp.offload_kqv = False
            cp.op_offload = False
        if kv_cache not in KV_CACHE_TYPES:
            raise ValueError(f"kv_cache {kv_cache!r}: choose one of {', '.join(KV_CACHE_TYPES)}")
        self.kv_cache = kv_cache
        if kv_cache == "f32":
            cp.type_k = cp.type_v = 0  # GGML_TYPE_F32
            cp.flash_attn_type = ll.LLAMA_FLASH_ATTN_TYPE_DISABLED
        if eval_callback is not None:
            cp.cb_eval = eval_callback
            cp.cb_eval_user_data = None
        try:
            with _LlamaLog(verbose) as log:
                self.ctx = ll.llama_init_from_model(self.model.ptr, cp)
            if not self.ctx:
                self.ctx = None
                raise ModelLoadError(f"llama.cpp could not create a context (n_ctx={self.n_ctx}) for "
                                     f"{self.model.description}: {log.errors() or 'no error message'}")
        except BaseException:
            if owns_model:
                self.model.close()
            raise

    @property
    def n_vocab(self) -> int:
        return self.model.n_vocab

    def tokenize(self, text: str | bytes, add_special: bool = True, parse_special: bool = False) -> list[int]:
        return self.model.tokenize(text, add_special=add_special, parse_special=parse_special)

    def logits(self, ids: list[int]) -> np.ndarray:
        """float32 [len(ids), n_vocab]: the logits at every position, from an empty KV cache."""
        ll = llama_bindings()
        if self.ctx is None:
            raise ValueError("StreamModel is closed")
        ids = [int(t) for t in ids]
        n, n_vocab = len(ids), self.n_vocab
        if n == 0:
            raise ValueError("logits() needs at least one token id")
        if n > self.n_ctx:
            raise ValueError(f"{n} tokens do not fit the context (n_ctx={self.n_ctx}); pass a larger n_ctx")
        bad = [t for t in ids if not 0 <= t < n_vocab]
        if bad:
            raise ValueError(f"token ids out of range [0, {n_vocab}): {bad[:8]}")
        ll.llama_memory_clear(ll.llama_get_memory(self.ctx), True)
        out = np.empty((n, n_vocab), dtype=np.float32)
        step = min(self.n_batch, n)
        # llama_batch_init allocates the arrays in C (freed below), so nothing can be collected
        # under llama.cpp's feet.
        batch = ll.llama_batch_init(step, 0, 1)
        try:
            for start in range(0, n, step):
                chunk = ids[start:start + step]
                for i, tok in enumerate(chunk):
                    batch.token[i] = tok
                    batch.pos[i] = start + i
                    batch.n_seq_id[i] = 1
                    batch.seq_id[i][0] = 0
                    batch.logits[i] = 1  # an output row for every position
                batch.n_tokens = len(chunk)
                with _LlamaLog(self.verbose) as log:
                    rc = ll.llama_decode(self.ctx, batch)
                if rc != 0:
                    raise RuntimeError(f"llama_decode returned {rc} at tokens {start}..{start + len(chunk)} "
                                       f"of {self.model.description}: {log.errors() or 'no error message'}")
                for i in range(len(chunk)):
                    row = ll.llama_get_logits_ith(self.ctx, i)
                    if not row:
                        raise RuntimeError(f"llama.cpp returned no logits for position {start + i}")
                    out[start + i] = np.ctypeslib.as_array(row, shape=(n_vocab,))
        finally:
            ll.llama_batch_free(batch)
        return out

    def set_lora(self, adapters: list, scales: list[float]) -> None:
        """``llama_set_adapters_lora``: LoRA adapters (handles from runner.lora.load_adapter, owned by the model)
        applied to this context, each times its scale (an empty list removes them)."""
        ll = llama_bindings()
        if self.ctx is None:
            raise ValueError("StreamModel is closed")
        n = len(adapters)
        arr = (ll.llama_adapter_lora_p_ctypes * max(n, 1))(*adapters)
        sc = (ctypes.c_float * max(n, 1))(*[float(s) for s in scales])
        with _LlamaLog(self.verbose) as log:
            rc = ll.llama_set_adapters_lora(self.ctx, arr if n else None, n, sc if n else None)
        if rc != 0:
            raise ModelLoadError(f"llama.cpp refused the LoRA adapters for {self.model.description}: "
                                 f"{log.errors() or 'no error message'}")
        self._lora = (list(adapters), [float(s) for s in scales])
        self._replan()

    def _replan(self) -> None:
        """llama.cpp re-plans its compute graph at the next decode after an adapter change (and logs it at INFO
        level): do that now, with its log routed here, by decoding one token and clearing the cache again."""
        ll = llama_bindings()
        batch = ll.llama_batch_init(1, 0, 1)
        try:
            batch.token[0], batch.pos[0], batch.n_seq_id[0], batch.logits[0] = 0, 0, 1, 0
            batch.seq_id[0][0] = 0
            batch.n_tokens = 1
            memory = ll.llama_get_memory(self.ctx)
            ll.llama_memory_clear(memory, True)  # a context that has decoded before holds positions past 0
            with _LlamaLog(self.verbose) as log:
                rc = ll.llama_decode(self.ctx, batch)
            ll.llama_memory_clear(memory, True)
            if rc != 0:
                raise ModelLoadError(f"llama.cpp could not run {self.model.description} with the adapter "
                                     f"(llama_decode returned {rc}): {log.errors() or 'no error message'}")
        finally:
            ll.llama_batch_free(batch)

    def set_control_vector(self, data: np.ndarray | None, il_start: int = -1, il_end: int = -1) -> None:
        """``llama_set_adapter_cvec``: ``data`` float32 [rows, n_embd], row i for llama.cpp layer i + 1 (llama.cpp
        never steers layer 0), added to the residual stream after each layer in il_start..il_end (inclusive);
        None clears it. llama.cpp copies the values, so ``data`` need not outlive the call."""
        ll = llama_bindings()
        if self.ctx is None:
            raise ValueError("StreamModel is closed")
        if data is None:
            rc = ll.llama_set_adapter_cvec(self.ctx, None, 0, 0, -1, -1)
        else:
            data = np.ascontiguousarray(data, dtype=np.float32)
            with _LlamaLog(self.verbose) as log:
                rc = ll.llama_set_adapter_cvec(self.ctx, data.ctypes.data_as(ctypes.POINTER(ctypes.c_float)),
                                               data.size, data.shape[1], int(il_start), int(il_end))
            if rc != 0:
                raise ModelLoadError(f"llama.cpp refused the control vector ({data.shape[1]} wide) for "
                                     f"{self.model.description}: {log.errors() or 'no error message'}")
        self._cvec = data
        self._cvec_range = (int(il_start), int(il_end))
        self._replan()

    def close(self) -> None:
        if self.ctx is not None:
            ctx, self.ctx = self.ctx, None
            with _LlamaLog(self.verbose):
                llama_bindings().llama_free(ctx)
        if getattr(self, "model", None) is not None and getattr(self, "owns_model", True):
            self.model.close()


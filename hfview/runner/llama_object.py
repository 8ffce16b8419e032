"""``runner.llama(MODEL, **kwargs)``: a real ``llama_cpp.Llama`` whose model is read from the view.

Where this system has memory files (Linux), the view is filled into one (hfview.memfile) and the Llama is a plain
``llama_cpp.Llama(model_path="/proc/self/fd/N", kv_overrides=...)``: llama.cpp's own loader maps it, and the
family's load-time KV (HfCheckpoint.load_kv) goes in as the Llama's kv_overrides, under the caller's own. The memory
file stays open as long as the Llama (``memory_file_llama``).

Elsewhere, or with HFVIEW_DATA_PATH=stream, the seam is the one place llama_cpp opens a model: ``Llama.__init__``
builds ``llama_cpp._internals.LlamaModel(path_model=..., params=..., verbose=...)``. While ``from_view(path, ckpt)``
is active that name builds a ``ViewModel`` for ``path``, which reads the model through the view's ``FILE*``
(runner.stream.load_model) with the params the Llama built, and loads any other path as llama_cpp always does.
Everything else (context, batch, sampler, tokenizer, completion, streaming, logprobs, the server) is
llama_cpp's own code, so any tool that builds a ``Llama`` from a path works inside ``from_view``.

Chat: ``chat_format="hfview"`` (the default here) renders the model's own ``tokenizer.chat_template``
exactly as ``hfview generate`` does (runner.chat.render, the same BOS rule); it is registered under that
name in llama_cpp's chat-handler registry, which is how the server's Llama finds it.
"""
from __future__ import annotations

import os
import threading
import weakref
from contextlib import ExitStack, contextmanager
from functools import lru_cache
from pathlib import Path
from typing import Any, Iterator

import llama_cpp
import llama_cpp._internals as internals
import llama_cpp.llama_chat_format as chat_format

from hfview.errors import HfviewError

from .api import PRECISIONS, _resolve
from .chat import ChatTemplateError, render

__all__ = ["llama", "open_view", "from_view", "memory_file_for", "ViewModel", "chat_prompt_ids", "add_rpc_servers",
           "NO_TEMPLATE"]

CHAT_FORMAT = "hfview"
NO_TEMPLATE = "this model has no chat template (tokenizer.chat_template)"


class ViewModel(internals.LlamaModel):
    """llama_cpp's LlamaModel with its llama_model* read from ``view`` through a FILE* instead of a file."""

    def __init__(self, *, path_model: str, params, verbose: bool = True, view):
        from .stream import load_model

        # The attributes LlamaModel.__init__ sets, with the model from the FILE* instead of the file.
        self.path_model, self.params, self.verbose = path_model, params, verbose
        self._exit_stack = ExitStack()
        self.sampler, self.custom_samplers = None, []
        self.view = view  # the HfCheckpoint lives as long as the model
        loaded = load_model(view, n_gpu_layers=params.n_gpu_layers, vocab_only=params.vocab_only,
                            params=params, verbose=verbose, data_path="stream")
        self.model, self.vocab = loaded.ptr, loaded.vocab

        def free_model():  # `loaded` owns the llama_model*: freed once, on the Llama's close()
            self.model = None
            loaded.close()

        self._exit_stack.callback(free_model)


_patch_lock = threading.RLock()  # re-entrant: runner.llama inside a from_view block nests


@contextmanager
def _llama_model_built_by(make) -> Iterator[None]:
    """Inside, llama_cpp builds its LlamaModel with ``make``; one swap at a time, so the original is always what
    gets put back."""
    with _patch_lock:
        original = internals.LlamaModel
        internals.LlamaModel = make
        try:
            yield
        finally:
            internals.LlamaModel = original


@contextmanager
def from_view(path: str | os.PathLike, view) -> Iterator[str]:
    """Inside, ``llama_cpp.Llama(path)`` (or anything that builds one from a path: llama-cpp-python's
    server, LangChain's LlamaCpp) loads the checkpoint directory ``path`` from ``view``. Yields ``path``
    as a string. Other paths load as usual, so a Llama built meanwhile in another thread is unaffected."""
    path = str(Path(path).absolute())
    view_path = os.path.realpath(path)
    original = internals.LlamaModel

    def make(*, path_model: str, **kwargs):
        if os.path.realpath(path_model) == view_path:
            return ViewModel(path_model=path_model, **kwargs, view=view)
        return original(path_model=path_model, **kwargs)

    with _llama_model_built_by(make):
        yield path


@contextmanager
def _cpu_repack_where_safe() -> Iterator[None]:
    """Inside, a ``llama_cpp.Llama`` built from a GGUF file loads it as runner.stream loads every model: without
    weight repacking where ggml's AMX kernels would take the weights (runner.stream.cpu_repack_is_safe). Llama has
    no setting for it: only there is llama_cpp's LlamaModel swapped for one that clears params.use_extra_bufts."""
    from .stream import cpu_repack_is_safe

    if cpu_repack_is_safe():
        yield
        return
    original = internals.LlamaModel

    def make(*, path_model: str, params, **kwargs):
        params.use_extra_bufts = params.use_extra_bufts and cpu_repack_is_safe()
        return original(path_model=path_model, params=params, **kwargs)

    with _llama_model_built_by(make):
        yield


def open_view(model: str | os.PathLike | None = None, *, precision: str = "auto", revision: str | None = None,
              progress: bool = False):
    """(path, view): MODEL resolved (directory, Hub id, or None: the embedded default) and its view
    (an HfCheckpoint), or view None where the directory holds a ready GGUF (path is then that file)."""
    from hfview import HfCheckpoint

    if precision not in PRECISIONS:
        raise HfviewError(f"precision {precision!r}: choose one of {', '.join(PRECISIONS)}")
    path, _revision, fmt, weight_files, _backend, _family = _resolve(model, revision, progress, require="view")
    if fmt == "gguf":  # llama.cpp reads a ready GGUF itself
        return Path(weight_files[0]), None
    return Path(path), HfCheckpoint(path, precision)


def memory_file_for(view, *, offload: bool = False, verbose: bool = False):
    """(memory file, why) where a Llama over ``view`` is to load from one (runner.stream.choose_data_path: not when
    HFVIEW_DATA_PATH=stream, the weights go to a device, or this system has no memory files; then (None, why)).
    Refuses (hfview.memfile.MemoryFileError) when the memory is not free."""
    import sys

    from hfview import memfile

    from .stream import _describe, choose_data_path

    source = view.for_llama_cpp()
    path, why = choose_data_path(source, offload=offload)
    memory_file = None
    if path == "memfd":
        try:
            memory_file = memfile.fill(source, description=_describe(view))
        except memfile.NoMemoryFiles as exc:
            if why.startswith("asked"):
                raise
            why = f"fallback: {exc}"
    if verbose:
        sys.stderr.write(f"hfview: data path: {'memory file (memfd)' if memory_file else 'FILE* stream'} ({why})\n")
    return memory_file, why


def _llama_over_memory_file(memory_file, view, kwargs: dict) -> llama_cpp.Llama:
    """A plain Llama over the memory file, with the family's load-time KV under the caller's kv_overrides; the file
    closes with the Llama (its mapping holds the pages; the fd keeps ``model_path`` naming this file)."""
    overrides = {**view.load_kv, **(kwargs.pop("kv_overrides", None) or {})}
    kwargs.pop("use_mmap", None)  # mapped: a copy besides the file's pages would hold the model twice
    with _cpu_repack_where_safe():
        llm = llama_cpp.Llama(memory_file.path, kv_overrides=overrides or None, use_mmap=True, **kwargs)
    llm.hfview_data_path = "memfd"
    weakref.finalize(llm, memory_file.close)
    return llm


def llama(model: str | os.PathLike | None = None, *, precision: str = "auto", revision: str | None = None,
          rpc: list[str] | None = None, lora: list | None = None, **kwargs: Any) -> llama_cpp.Llama:
    """A ``llama_cpp.Llama`` over MODEL's view (no converted file). ``kwargs`` are Llama's own (n_ctx,
    n_threads, logits_all, seed, chat_format, ...), with two defaults of hfview's: ``verbose=False`` and
    ``chat_format="hfview"`` (the model's chat template as ``hfview generate`` renders it). The model is
    read from a memory file llama.cpp maps, or through the FILE* once, so ``use_mmap`` has no effect.
    ``rpc``: ["HOST:PORT", ...], llama.cpp rpc-servers the layers are split over (n_gpu_layers then defaults to
    all). ``lora``: PEFT adapter directories ("DIR[:SCALE]", runner.lora) set on its context. Close it with ``close()``. Its
    ``hfview_data_path`` says how llama.cpp read the view: "memfd" (a memory file it mapped) or "stream" (a FILE*;
    see the module's docstring)."""
    if rpc:
        add_rpc_servers(rpc)
        kwargs.setdefault("n_gpu_layers", -1)
    kwargs.setdefault("verbose", False)
    if "chat_handler" not in kwargs:
        kwargs.setdefault("chat_format", CHAT_FORMAT)
    path, view = open_view(model, precision=precision, revision=revision)
    if view is None:
        if lora:
            raise HfviewError("--lora presents a PEFT adapter over a checkpoint directory's view; the model is a "
                              "GGUF file")
        with _cpu_repack_where_safe():
            return llama_cpp.Llama(str(path), **kwargs)
    files = None
    if lora:  # checked before llama.cpp loads anything
        from .lora import lora_files
        files = lora_files(lora, view)
    memory_file, _why = memory_file_for(view, offload=kwargs.get("n_gpu_layers", 0) != 0,
                                        verbose=kwargs.get("verbose", False))
    if memory_file is not None:
        try:
            llm = _llama_over_memory_file(memory_file, view, kwargs)
        except BaseException:
            memory_file.close()
            raise
    else:
        with from_view(path, view) as model_path:
            llm = llama_cpp.Llama(model_path, **kwargs)
        llm.hfview_data_path = "stream"
    if files:
        from .lora import apply_to_llama
        try:
            apply_to_llama(llm, [spec for spec, _ in files], view)
        except BaseException:
            llm.close()
            raise
    return llm


# --------------------------------------------------------------------------------------------------
# RPC: llama.cpp's rpc-servers as devices (what llama.cpp's own --rpc does, common/arg.cpp)
# --------------------------------------------------------------------------------------------------

_rpc_added: set[str] = set()


def add_rpc_servers(endpoints: list[str]) -> None:
    """Register each "HOST:PORT" rpc-server's devices with ggml, so a model loaded next offloads to them.
    llama-cpp-python's own ``rpc_servers`` setting is dropped by its Llama (an unused keyword) in 0.3.36."""
    import ctypes

    from llama_cpp._ctypes_extensions import load_shared_library
    from llama_cpp.llama_cpp import _base_path  # the folder llama_cpp loaded libllama from

    for ep in endpoints:
        host, _, port = ep.rpartition(":")
        if not host or not port.isdigit():
            raise HfviewError(f"--rpc {ep!r}: give HOST:PORT (e.g. 127.0.0.1:50052)")
    if not llama_cpp.llama_supports_rpc():
        raise HfviewError('--rpc: this llama-cpp-python was built without llama.cpp\'s RPC backend; rebuild it '
                          'with CMAKE_ARGS="-DGGML_RPC=ON" pip install --force-reinstall --no-binary '
                          'llama-cpp-python llama-cpp-python==0.3.36')
    ggml = load_shared_library("ggml", _base_path)
    ggml.ggml_backend_reg_by_name.argtypes, ggml.ggml_backend_reg_by_name.restype = [ctypes.c_char_p], ctypes.c_void_p
    ggml.ggml_backend_reg_get_proc_address.argtypes = [ctypes.c_void_p, ctypes.c_char_p]
    ggml.ggml_backend_reg_get_proc_address.restype = ctypes.c_void_p
    ggml.ggml_backend_register.argtypes, ggml.ggml_backend_register.restype = [ctypes.c_void_p], None
    reg = ggml.ggml_backend_reg_by_name(b"RPC")
    fn = ggml.ggml_backend_reg_get_proc_address(reg, b"ggml_backend_rpc_add_server") if reg else None
    if not fn:
        raise HfviewError("--rpc: ggml has no RPC backend registered in this build (llama_supports_rpc said yes)")
    add_server = ctypes.CFUNCTYPE(ctypes.c_void_p, ctypes.c_char_p)(fn)
    for ep in endpoints:
        if ep in _rpc_added:  # ggml hands back the same registry for an endpoint: register it once
            continue
        server = add_server(ep.encode())
        if not server:
            raise HfviewError(f"--rpc {ep}: no rpc-server answered there (start one there: ggml-rpc-server -H HOST -p PORT)")
        ggml.ggml_backend_register(server)
        _rpc_added.add(ep)


# --------------------------------------------------------------------------------------------------
# chat_format "hfview": the model's own template, as `hfview generate` applies it
# --------------------------------------------------------------------------------------------------

def _special_text(llm: llama_cpp.Llama, token: int) -> str | None:
    return llm.detokenize([token], special=True).decode("utf-8", "replace") if token >= 0 else None


class TemplateFormatter(chat_format.ChatFormatter):
    """runner.chat.render over the model's template; BOS added unless the rendered text starts with it."""

    def __init__(self, template: str, bos_token: str | None, eos_token: str | None, eos_id: int):
        self.template = template
        self.tokens = {k: v for k, v in (("bos_token", bos_token), ("eos_token", eos_token)) if v}
        self.eos_id = eos_id

    def __call__(self, *, messages, tools=None, **_ignored) -> chat_format.ChatFormatterResponse:
        extra = {"tools": tools} if tools else {}
        text = render(self.template, list(messages), add_generation_prompt=True, **self.tokens, **extra)
        bos = self.tokens.get("bos_token")
        eos_id = self.eos_id

        def at_eos(tokens, _logits) -> bool:
            return eos_id >= 0 and tokens[-1] == eos_id

        return chat_format.ChatFormatterResponse(
            prompt=text, stop=[self.tokens["eos_token"]] if "eos_token" in self.tokens else None,
            stopping_criteria=llama_cpp.StoppingCriteriaList([at_eos]),
            # llama_cpp adds the BOS when added_special is False: the template usually writes it itself
            added_special=bool(bos and text.startswith(bos)))


@lru_cache(maxsize=8)
def _formatter(template: str, bos: str | None, eos: str | None, eos_id: int) -> TemplateFormatter:
    return TemplateFormatter(template, bos, eos, eos_id)


def formatter(llama: llama_cpp.Llama) -> TemplateFormatter:
    """The "hfview" chat formatter of this Llama (its model's template); ChatTemplateError where it has none."""
    template = llama.metadata.get("tokenizer.chat_template")
    if not template:
        raise ChatTemplateError(f"{NO_TEMPLATE}: use a plain completion (create_completion, /v1/completions), "
                                f"or pass chat_format=NAME")
    eos_id = llama.token_eos()
    return _formatter(template, _special_text(llama, llama.token_bos()), _special_text(llama, eos_id), eos_id)


def chat_prompt_ids(llama: llama_cpp.Llama, messages, tools=None) -> list[int]:
    """The prompt ids create_chat_completion feeds for ``messages`` under chat_format "hfview"."""
    result = formatter(llama)(messages=messages, tools=tools)
    return llama.tokenize(result.prompt.encode("utf-8"), add_bos=not result.added_special, special=True)


@chat_format.register_chat_completion_handler(CHAT_FORMAT)
def hfview_chat_handler(*, llama: llama_cpp.Llama, **kwargs):
    return chat_format.chat_formatter_to_chat_completion_handler(formatter(llama))(llama=llama, **kwargs)

"""``hfview serve``: llama-cpp-python's own OpenAI-compatible server, fed the Llama over the view.

``create_app`` builds llama-cpp-python's FastAPI app (``llama_cpp.server.app.create_app``) inside
``runner.llama_object.from_view``, so the server's own LlamaProxy constructs its Llama from the view. On
top, without changing a route: ``/health``; a request check in front of the two generating routes (what
the library's request models let through or answer in FastAPI's shape rather than OpenAI's, and the
model's sampling defaults where a request leaves a value out); errors in OpenAI's shape.
Requests queue on the one context (the library's lock), each answered in full (interrupt_requests off).
"""
from __future__ import annotations

import json
import os
import re
from typing import Any

from hfview.errors import HfviewError

__all__ = ["create_app", "serve", "ROLES"]

ROLES = ("system", "user", "assistant", "tool", "function")  # llama_cpp.llama_types' request messages
SAMPLED = ("temperature", "top_k", "top_p", "min_p", "repeat_penalty")  # request fields the model states


def _import_server():
    try:
        import llama_cpp.server.app as server_app
        import uvicorn  # noqa: F401
    except ImportError as exc:
        raise HfviewError(f"hfview serve needs llama-cpp-python's server ({exc.name} is missing): "
                          f"pip install 'hfview[serve]'") from None
    return server_app


def _error(status: int, message: str, *, param: str | None = None, code: str | None = None,
           kind: str = "invalid_request_error"):
    from fastapi.responses import JSONResponse
    return JSONResponse({"error": {"message": message, "type": kind, "param": param, "code": code}},
                        status_code=status)


class RequestCheck:
    """ASGI middleware before the library's POST routes. Refuses with a 400 in OpenAI's shape what would
    otherwise run wrong or fail as a 500 (the library's route handler turns FastAPI's validation errors
    into 500s): a body that is not a JSON object, max_tokens < 1 (the chat route takes any integer, and
    <= 0 means "until the context is full"), an unknown role, anything the route's request model rejects.
    A streamed prompt longer than the context too: the library finds that only inside its generator,
    after the 200 header went out. On the generating routes it then lays the model's sampling defaults
    under the request's own values. A request without the right API key passes untouched, so the route
    answers it 401 first."""

    def __init__(self, app, *, defaults: dict[str, Any], api_key: str | None, llama):
        from llama_cpp.server import types

        self.app = app
        self.api_key = api_key
        self.llama = llama
        # path -> (the route's request model, the defaults to lay under the request)
        self.routes = {"/v1/completions": (types.CreateCompletionRequest, defaults),
                       "/v1/chat/completions": (types.CreateChatCompletionRequest, defaults),
                       "/extras/tokenize": (types.TokenizeInputRequest, {}),
                       "/extras/tokenize/count": (types.TokenizeInputRequest, {}),
                       "/extras/detokenize": (types.DetokenizeInputRequest, {})}

    def _authorized(self, scope) -> bool:
        if self.api_key is None:
            return True
        value = dict(scope["headers"]).get(b"authorization", b"").decode("latin-1")
        scheme, _, credentials = value.partition(" ")
        return scheme.lower() == "bearer" and credentials == self.api_key

    async def __call__(self, scope, receive, send):
        route = self.routes.get(scope.get("path")) if scope["type"] == "http" else None
        if route is None or scope["method"] != "POST" or not self._authorized(scope):
            return await self.app(scope, receive, send)
        chunks = []
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                return
            chunks.append(message.get("body", b""))
            if not message.get("more_body"):
                break
        try:
            data = json.loads(b"".join(chunks))
        except ValueError as exc:
            return await _error(400, f"the request body is not JSON: {exc}")(scope, receive, send)
        request_model, defaults = route
        refusal = self.check(request_model, data)
        if refusal is None and isinstance(data, dict) and data.get("stream") is True:
            refusal = self.check_length(request_model, data)
        if refusal is not None:
            return await refusal(scope, receive, send)
        body = json.dumps({**defaults, **data}).encode()
        # JSON now whatever the client's content-type said (curl -d sends a form's), so FastAPI parses it
        headers = [(k, v) for k, v in scope["headers"] if k not in (b"content-length", b"content-type")]
        scope = {**scope, "headers": [*headers, (b"content-length", str(len(body)).encode()),
                                      (b"content-type", b"application/json")]}
        replayed = False

        async def replay():
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()  # then the client's disconnect, which ends a stream early

        return await self.app(scope, replay, send)

    @staticmethod
    def check(request_model, data):
        """None, or the 400 response refusing ``data``."""
        from pydantic import ValidationError

        if not isinstance(data, dict):
            return _error(400, "the request body must be a JSON object")
        max_tokens = data.get("max_tokens")
        if isinstance(max_tokens, int) and not isinstance(max_tokens, bool) and max_tokens < 1:
            return _error(400, f"max_tokens must be at least 1, got {max_tokens} (leave it out for the "
                               f"route's default)", param="max_tokens")
        messages = data.get("messages")
        if isinstance(messages, list):
            for i, m in enumerate(messages):
                role = m.get("role") if isinstance(m, dict) else None
                if role not in ROLES:
                    return _error(400, f"messages[{i}].role is {role!r}: use one of {', '.join(ROLES)}",
                                  param=f"messages[{i}].role")
        try:
            request_model.model_validate(data)
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(p) for p in first["loc"])
            return _error(400, f"{where}: {first['msg']}", param=where or None)
        return None

    def check_length(self, request_model, data):
        """None, or the library's own 400 context_length_exceeded for a prompt that does not fit."""
        from llama_cpp.server.errors import ErrorResponseFormatters

        from .chat import ChatTemplateError
        from .llama_object import chat_prompt_ids

        llm = self.llama
        if "messages" in data:
            try:
                n = len(chat_prompt_ids(llm, data["messages"], data.get("tools")))
            except ChatTemplateError as exc:
                return _error(400, str(exc), param="messages")
        else:
            prompt = data.get("prompt", "")
            prompt = prompt[0] if isinstance(prompt, list) and prompt else prompt
            n = len(llm.tokenize(prompt.encode("utf-8"), add_bos=True, special=True)) if isinstance(prompt, str) else 0
        if n < llm.n_ctx():
            return None
        match = re.search(r"Requested tokens \((\d+)\) exceed context window of (\d+)",
                          f"Requested tokens ({n}) exceed context window of {llm.n_ctx()}")
        status, body = ErrorResponseFormatters.context_length_exceeded(request_model.model_validate(data), match)
        return _error(status, body["message"], param=body["param"], code=body["code"])


def _model_facts(path, view) -> tuple[dict[str, Any], int | None, int | None]:
    """(general.sampling.* by short key, training context, unapplied sliding window) from the view's KV
    or a ready GGUF's header, before anything is loaded."""
    if view is not None:
        from .api import unapplied_window
        meta = {kv.key: kv.value for kv in view.kv}
        window = unapplied_window(view.family, view.hparams)
    else:
        from .._gguf import package
        GGUFReader = package().GGUFReader
        meta = {name: field.contents() for name, field in GGUFReader(str(path)).fields.items()}
        window = None
    arch = meta.get("general.architecture")
    n_train = meta.get(f"{arch}.context_length")
    prefix = "general.sampling."
    sampling = {k[len(prefix):]: v for k, v in meta.items() if k.startswith(prefix)}
    return sampling, (int(n_train) if isinstance(n_train, int) else None), window


def _chat_template_refusal(request, match):
    from llama_cpp.server.errors import ErrorResponse
    return 400, ErrorResponse(message=match.string, type="invalid_request_error", param="messages", code=None)


def create_app(model: str | None = None, *, n_ctx: int | None = None, api_key: str | None = None,
               precision: str = "auto", revision: str | None = None, host: str = "127.0.0.1",
               port: int = 8080, n_threads: int | None = None, rpc: list[str] | None = None,
               notes: list[str] | None = None, lora: list | None = None):
    """(app, proxy): llama-cpp-python's server app over MODEL's view, and its LlamaProxy (``free()`` it).
    Sampling values a request leaves out are the model's (general.sampling.*) over llama.cpp's defaults;
    n_ctx defaults to min(4096, the training context), as ``hfview generate``. ``rpc``: rpc-servers
    ("HOST:PORT") the layers are split over. ``notes`` collects what the user should know."""
    server_app = _import_server()
    from llama_cpp.server.errors import RouteErrorHandler
    from llama_cpp.server.settings import ModelSettings, ServerSettings

    from .api import DEFAULT_N_CTX
    from hfview.checkpoint import override_kv_flags

    from .llama_object import (CHAT_FORMAT, NO_TEMPLATE, _cpu_repack_where_safe, add_rpc_servers, from_view,
                               memory_file_for, open_view)
    from .options import default_threads
    from .sampling import Sampling, from_metadata

    notes = notes if notes is not None else []
    if rpc:
        add_rpc_servers(rpc)  # before anything loads, so a bad endpoint is refused at once
    path, view = open_view(model, precision=precision, revision=revision)
    if lora:  # read and checked before the server loads the model
        from .lora import lora_files
        lora = [spec for spec, _ in lora_files(lora, view)]
    meta, n_train, window = _model_facts(path, view)
    values, not_applied = from_metadata(meta)
    sampling = Sampling().over(values, "model")
    if not_applied:
        notes.append(f"the model's sampling defaults also state {', '.join(not_applied)}; not applied")
    if n_ctx is None:
        n_ctx = min(DEFAULT_N_CTX, n_train) if n_train else DEFAULT_N_CTX
        if window is not None and window < n_ctx:
            notes.append(f"context limited to the sliding window, {window} tokens (llama.cpp runs this family "
                         f"with full attention; --n-ctx goes further)")
            n_ctx = window
    elif window is not None and window < n_ctx:
        notes.append(f"context {n_ctx} is past the sliding window: beyond {window} tokens llama.cpp attends to "
                     f"the whole context, unlike the model")
    threads = n_threads or default_threads()
    alias = str(model) if model is not None else "default"
    # the view in a memory file the server's Llama loads by path (llama_object.memory_file_for), the family's
    # load-time KV as its kv_overrides ("KEY=TYPE:VALUE", which the server's settings split at '=' and ':');
    # else through the FILE* seam (from_view)
    memory_file, data_path_reason = memory_file_for(view, offload=bool(rpc)) if view is not None else (None, "")
    if data_path_reason.startswith("fallback"):
        why = data_path_reason.removeprefix("fallback: ")
        notes.append(f"loading through a FILE* instead of a memory file: {why}")
    overrides = [flag.split(" ", 1)[1] for flag in override_kv_flags(view.load_kv)] if memory_file else []
    model_settings = ModelSettings(
        model=memory_file.path if memory_file else str(path), model_alias=alias, n_ctx=n_ctx,
        n_batch=min(n_ctx, 512), n_threads=threads, n_threads_batch=threads, chat_format=CHAT_FORMAT,
        logits_all=True,  # logits_all: for logprobs
        n_gpu_layers=-1 if rpc else 0,  # with --rpc: every layer, split over the servers
        last_n_tokens_size=max(sampling.repeat_last_n, 0), verbose=False, use_mmap=True,
        kv_overrides=overrides or None)
    server_settings = ServerSettings(host=host, port=port, api_key=api_key, interrupt_requests=False)
    try:
        with from_view(path, view) if view is not None and memory_file is None else _cpu_repack_where_safe():
            app = server_app.create_app(server_settings=server_settings, model_settings=[model_settings])
    except BaseException:
        if memory_file is not None:
            memory_file.close()
        raise
    app.state.memory_file = memory_file  # open as long as the app: the Llama's model_path names it
    app.state.data_path = "memfd" if memory_file else "stream" if view is not None else "file"
    proxy = server_app._llama_proxy  # create_app keeps its LlamaProxy in this module global (no accessor)
    if lora:
        from .lora import apply_to_llama
        try:
            apply_to_llama(proxy(), lora, view)
        except BaseException:
            proxy.free()
            raise
        notes.append(f"LoRA: {', '.join(map(str, lora))}")

    # The library's route handler answers unknown exceptions 500; a template's refusal is the request's fault.
    RouteErrorHandler.pattern_and_formatters[
        re.compile(rf"^({re.escape(NO_TEMPLATE)}|the model's chat template)")] = _chat_template_refusal

    from starlette.exceptions import HTTPException

    async def http_error(_request, exc: HTTPException):  # a wrong key's 401, an unknown path's 404: OpenAI's shape
        return _error(exc.status_code, str(exc.detail), code="invalid_api_key" if exc.status_code == 401 else None)

    app.add_exception_handler(HTTPException, http_error)

    @app.get("/health")
    async def health():
        return {"status": "ok"}

    defaults = {k: getattr(sampling, k) for k in SAMPLED}
    app.add_middleware(RequestCheck, defaults=defaults, api_key=api_key, llama=proxy())
    app.state.sampling, app.state.n_ctx = sampling, n_ctx
    return app, proxy


def serve(model: str | None = None, *, host: str = "127.0.0.1", port: int = 8080, n_ctx: int | None = None,
          api_key: str | None = None, precision: str = "auto", revision: str | None = None,
          rpc: list[str] | None = None, log=print, lora: list | None = None) -> None:
    """Run the server until Ctrl-C or SIGTERM (uvicorn's graceful shutdown), then free the model and return."""
    import uvicorn

    notes: list[str] = []
    app, proxy = create_app(model, n_ctx=n_ctx, api_key=api_key, precision=precision, revision=revision,
                            host=host, port=port, rpc=rpc, notes=notes, lora=lora)
    for note in notes:
        log(note)
    s = app.state.sampling
    log(f"serving {model or 'the default model'} (n_ctx {app.state.n_ctx}; sampling defaults: temperature "
        f"{s.temperature}, top_k {s.top_k}, top_p {s.top_p}, min_p {s.min_p}, repeat_penalty {s.repeat_penalty})"
        + ("" if api_key else "; no API key"))
    try:
        # timeout_graceful_shutdown: Ctrl-C ends a stream in progress after this long instead of waiting for
        # it. lifespan off: the app has no startup or shutdown hooks, and uvicorn's lifespan task would log
        # a CancelledError traceback when uvicorn re-raises the Ctrl-C after its shutdown.
        uvicorn.run(app, host=host, port=port, log_level="info", lifespan="off", timeout_graceful_shutdown=3)
    except KeyboardInterrupt:
        pass  # uvicorn re-raises the Ctrl-C it shut down on (or not, depending on timing): stopped as asked
    finally:
        proxy.free()
        if app.state.memory_file is not None:
            app.state.memory_file.close()


def runtime_command(runtime: str, model_path: str, *, host: str, port: int, n_ctx: int, load_kv: dict,
                    adapters: list[tuple[float, str]] = (), extra: tuple[str, ...] = ()) -> list[str]:
    """llama-server's arguments (llama.cpp's common/arg.cpp names) for the model at ``model_path``: the family's
    load-time KV as --override-kv, each adapter as --lora-scaled FILE SCALE, then the caller's own ``extra``."""
    from hfview.checkpoint import override_kv_flags

    cmd = [runtime, "--model", model_path, "--host", host, "--port", str(port), "--ctx-size", str(n_ctx)]
    for flag in override_kv_flags(load_kv):
        cmd += flag.split(" ", 1)
    for scale, path in adapters:
        cmd += ["--lora-scaled", path, repr(float(scale))]
    return cmd + list(extra)


def _executable(runtime: str) -> str:
    import shutil

    found = shutil.which(runtime) if os.sep not in runtime else (runtime if os.access(runtime, os.X_OK) and
                                                                 os.path.isfile(runtime) else None)
    if found is None:
        raise HfviewError(f"--runtime {runtime}: not an executable file (give the path of a llama-server binary, "
                          f"e.g. llama.cpp's build/bin/llama-server)")
    return os.path.abspath(found)


def serve_runtime(model: str | None, runtime: str, *, host: str = "127.0.0.1", port: int = 8080,
                  n_ctx: int | None = None, api_key: str | None = None, precision: str = "auto",
                  revision: str | None = None, lora: list | None = None, extra: tuple[str, ...] = (),
                  log=print) -> int:
    """Run the user's own llama-server (``runtime``: a llama.cpp build newer than the pinned bindings, say) on the
    view: the view is filled into a memory file the child inherits and opens as /proc/self/fd/N, as are LoRA
    adapters; no file is written. Its exit status is returned (Ctrl-C reaches it as it reaches this process)."""
    import signal
    import subprocess

    from hfview import memfile

    from .api import DEFAULT_N_CTX
    from .llama_object import open_view

    runtime = _executable(runtime)
    if not memfile.supported():
        raise HfviewError("--runtime hands llama-server the view as a memory file (/proc/self/fd/N): this system "
                          "has none (Linux's memfd); use hfview serve without --runtime")
    path, view = open_view(model, precision=precision, revision=revision)
    files = []
    if lora:  # read and checked before anything is filled
        from .lora import lora_files
        files = lora_files(lora, view)
    _sampling, n_train, window = _model_facts(path, view)
    if n_ctx is None:
        n_ctx = min(DEFAULT_N_CTX, n_train) if n_train else DEFAULT_N_CTX
        if window is not None and window < n_ctx:
            log(f"context limited to the sliding window, {window} tokens (--n-ctx goes further)")
            n_ctx = window
    opened: list[memfile.MemoryFile] = []
    try:
        if view is not None:
            opened.append(memfile.fill(view.for_llama_cpp(), description=f"the view of {path}"))
        adapters = []
        for spec, lora_file in files:
            opened.append(memfile.fill(lora_file, description=f"the LoRA adapter {spec.path}"))
            adapters.append((spec.scale, opened[-1].path))
        cmd = runtime_command(runtime, opened[0].path if view is not None else str(path), host=host, port=port,
                              n_ctx=n_ctx, load_kv=view.load_kv if view is not None else {}, adapters=adapters,
                              extra=extra)
        env = dict(os.environ, **({"LLAMA_API_KEY": api_key} if api_key else {}))  # not on the command line
        log(f"running {' '.join(cmd)}" + ("" if api_key else " (no API key)"))
        child = subprocess.Popen(cmd, pass_fds=[f.fd for f in opened], env=env)
        try:
            return child.wait()
        except KeyboardInterrupt:  # the terminal sent it to the child too: let it stop as it does
            try:
                return child.wait(timeout=10)
            except subprocess.TimeoutExpired:
                child.send_signal(signal.SIGKILL)
                return child.wait()
    finally:
        for f in opened:
            f.close()

"""Capture: the residual stream after chosen layers, for every token, read through llama.cpp's eval callback.

llama.cpp names the residual stream after layer N (0-based) ``l_out-N`` in every architecture's graph
(``cb(cur, "l_out", il)`` in src/models/*.cpp, after the layer's last residual add and after any control
vector). A context's ``cb_eval`` is asked about each node (``ask`` true) and, for the nodes it claims, called
again once the node is computed; we claim exactly ``l_out-N`` for the chosen N and copy it out with
``ggml_backend_tensor_get`` (so it works wherever the tensor lives). Every position is an output row, so even
the last layer's tensor keeps all tokens.

transformers' ``output_hidden_states`` index N + 1 is the same quantity (index 0: the embeddings) — except
for the last layer, where transformers hands back the final-normed state instead; ``capture`` reports the
un-normed stream for every layer, as llama.cpp computes it (tests/test_capture.py compares the last layer
with a forward hook on the decoder layer).

The capture runs in a second, short-lived context over the runner's model (the runner's own context, used
for generation, never carries a callback); the runner's control vector, if any, is applied to it too.
"""
from __future__ import annotations

import ctypes
import json
import os
from pathlib import Path
from typing import Any, Iterable

import numpy as np

from hfview.errors import HfviewError

from .devices import llama_bindings

__all__ = ["CaptureError", "LayerTap", "parse_layers", "check_layers", "capture", "write_safetensors"]


class CaptureError(HfviewError):
    """A capture was asked for something the model does not have (a layer out of range, no l_out tensor)."""


_GGML_TYPE_F32 = 0


class _TensorHead(ctypes.Structure):
    """The leading fields of ggml.h's ``struct ggml_tensor`` (type, buffer, ne[4], nb[4])."""
    _fields_ = [("type", ctypes.c_int), ("buffer", ctypes.c_void_p), ("ne", ctypes.c_int64 * 4),
                ("nb", ctypes.c_size_t * 4)]


_ggml_lib = None


def _ggml():
    global _ggml_lib
    if _ggml_lib is None:
        lib_dir = Path(llama_bindings().__file__).resolve().parent / "lib"
        names = [p for p in lib_dir.glob("libggml-base.*")] or [p for p in lib_dir.glob("ggml-base.*")]
        lib = ctypes.CDLL(str(names[0]) if names else "libggml-base.so")
        lib.ggml_get_name.argtypes = [ctypes.c_void_p]
        lib.ggml_get_name.restype = ctypes.c_char_p
        lib.ggml_is_contiguous.argtypes = [ctypes.c_void_p]
        lib.ggml_is_contiguous.restype = ctypes.c_bool
        lib.ggml_backend_tensor_get.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_size_t]
        lib.ggml_backend_tensor_get.restype = None
        _ggml_lib = lib
    return _ggml_lib


class LayerTap:
    """A ``cb_eval`` that copies ``l_out-N`` for each N in ``layers``: ``rows[N]`` is a list of float32
    [n_tokens_of_ubatch, n_embd] arrays in decode order. Exceptions never reach C: the first is kept in
    ``error`` and re-raised by ``raise_if_failed``."""

    def __init__(self, layers: Iterable[int], n_embd: int):
        ll = llama_bindings()

        self.names = {f"l_out-{int(n)}".encode(): int(n) for n in layers}
        self.n_embd = int(n_embd)
        self.rows: dict[int, list[np.ndarray]] = {n: [] for n in self.names.values()}
        self.error: BaseException | None = None
        self._lib = _ggml()
        self.c_callback = ll.ggml_backend_sched_eval_callback(self._on_eval)

    def _on_eval(self, t, ask, _ud):
        try:
            name = self._lib.ggml_get_name(t)
            layer = self.names.get(name)
            if ask:
                return layer is not None
            if layer is None:
                return True
            head = _TensorHead.from_address(t)
            if head.type != _GGML_TYPE_F32 or head.ne[0] != self.n_embd or head.ne[2] != 1 or head.ne[3] != 1 \
                    or not self._lib.ggml_is_contiguous(t):
                raise CaptureError(f"llama.cpp's {name.decode()} is type {head.type}, shape {list(head.ne)}: "
                                   f"expected a contiguous float32 [{self.n_embd}, n_tokens]")
            out = np.empty((int(head.ne[1]), self.n_embd), dtype=np.float32)
            self._lib.ggml_backend_tensor_get(t, out.ctypes.data, 0, out.nbytes)
            self.rows[layer].append(out)
            return True
        except BaseException as exc:  # noqa: BLE001 - must not unwind into C
            if self.error is None:
                self.error = exc
            return False  # stop the graph: the capture has failed

    def reset(self) -> None:
        for v in self.rows.values():
            v.clear()

    def raise_if_failed(self) -> None:
        if self.error is not None:
            exc, self.error = self.error, None
            raise exc


def parse_layers(spec: str | Iterable[int]) -> list[int]:
    """'0,2' or '0-3' or a mix ('0,2-3') -> sorted distinct ints; the text is named in the error."""
    if not isinstance(spec, str):
        return sorted({int(n) for n in spec})
    out: set[int] = set()
    for part in spec.split(","):
        part = part.strip()
        try:
            if "-" in part[1:]:
                a, b = part.split("-", 1) if not part.startswith("-") else (part, "")
                lo, hi = int(a), int(b)
                if hi < lo:
                    raise ValueError
                out.update(range(lo, hi + 1))
            else:
                out.add(int(part))
        except ValueError:
            raise CaptureError(f"--layer {spec!r}: {part!r} is not a layer number or a range A-B") from None
    return sorted(out)


def check_layers(layers: Iterable[int], n_layer: int, what: str = "layer") -> list[int]:
    layers = sorted(set(int(n) for n in layers))
    if not layers:
        raise CaptureError(f"no {what} chosen: pass --layer N[,N...]")
    bad = [n for n in layers if not 0 <= n < n_layer]
    if bad:
        raise CaptureError(f"{what} {', '.join(map(str, bad))} out of range: the model has {n_layer} layers "
                           f"(0..{n_layer - 1})")
    return layers


def capture(runner, ids: list[int], layers: Iterable[int]) -> dict[int, np.ndarray]:
    """{N: float32 [len(ids), n_embd]}: the residual stream after layer N at every position of ``ids``
    (from an empty cache), as llama.cpp computes it for ``runner`` (a runner.api.Runner), its control
    vector included."""
    ll = llama_bindings()

    from .options import default_threads
    from .stream import StreamModel

    if getattr(runner, "backend", None) != "llama.cpp":
        raise CaptureError("capture reads llama.cpp's graph: load the model with the llama.cpp backend")
    model = runner.sm.model
    n_layer = int(ll.llama_model_n_layer(model.ptr))
    n_embd = int(ll.llama_model_n_embd(model.ptr))
    layers = check_layers(layers, n_layer)
    ids = [int(t) for t in ids]
    if not ids:
        raise CaptureError("the prompt has no tokens")
    tap = LayerTap(layers, n_embd)
    n = len(ids)
    sm = StreamModel(model, device=runner.sm.device, n_ctx=max(n, 8), n_batch=min(max(n, 8), 512),
                     n_threads=default_threads(), verbose=runner.sm.verbose, eval_callback=tap.c_callback,
                     owns_model=False, kv_cache=getattr(runner.sm, "kv_cache", "f16"))
    try:
        lora = getattr(runner.sm, "_lora", None)
        if lora and lora[0]:
            sm.set_lora(*lora)
            tap.raise_if_failed()
            tap.reset()
        cvec = getattr(runner.sm, "_cvec", None)
        if cvec is not None:
            sm.set_control_vector(cvec, *runner.sm._cvec_range)
            tap.raise_if_failed()
            tap.reset()  # setting it decodes one token (see StreamModel.set_control_vector): not the prompt's
        try:
            sm.logits(ids)
        except RuntimeError:
            tap.raise_if_failed()  # the callback's own failure is the cause
            raise
        tap.raise_if_failed()
    finally:
        sm.close()
    out = {}
    arch = _arch(model)
    for layer in layers:
        parts = tap.rows[layer]
        if not parts:
            raise CaptureError(f"llama.cpp's graph for architecture {arch!r} has no tensor l_out-{layer}: "
                               f"this architecture does not name its residual stream, capture cannot read it")
        got = np.concatenate(parts, axis=0)
        if got.shape[0] != n:
            raise CaptureError(f"l_out-{layer} gave {got.shape[0]} rows for {n} tokens")
        out[layer] = got
    return out


def _arch(model) -> str:
    ll = llama_bindings()
    buf = ctypes.create_string_buffer(128)
    ll.llama_model_meta_val_str(model.ptr, b"general.architecture", buf, len(buf))
    return buf.value.decode("utf-8", "replace")


def write_safetensors(path: str | os.PathLike, tensors: dict[str, np.ndarray], metadata: dict[str, Any]) -> Path:
    """Write ``tensors`` to ``path`` atomically: into ``path.partial`` beside it, synced, then renamed, so a
    failure leaves either the old file or none. Metadata values that are not strings are stored as JSON."""
    from safetensors.numpy import save

    path = Path(path)
    meta = {k: v if isinstance(v, str) else json.dumps(v) for k, v in metadata.items()}
    data = save({k: np.ascontiguousarray(v) for k, v in tensors.items()}, metadata=meta)
    partial = path.with_name(path.name + ".partial")
    try:
        with open(partial, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(partial, path)
    except BaseException:
        partial.unlink(missing_ok=True)
        raise
    return path

"""Python API: ``runner.load(model, ...)`` -> ``Runner`` with ``generate``, ``logits``, ``tokenize``.

``load`` resolves the model (a checkpoint directory or a Hub id, through runner.resolve), builds the
view (``hfview.HfCheckpoint``), streams it into llama.cpp (runner.stream: no file is written) and
creates one context. Refusals are ``hfview.errors.HfviewError`` subclasses, so the CLI prints them
on one line.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Callable

import numpy as np

from hfview.errors import HfviewError

from .chat import messages_for, render
from .devices import llama_bindings
from .generate import Decoder, Generation, decode_loop
from .options import default_threads
from .sampling import Sampling

__all__ = ["load", "Runner", "DeviceError", "ModelNotFound", "default_model_path", "DEFAULT_N_CTX"]

DEFAULT_N_CTX = 4096
PRECISIONS = ("auto", "f32", "f16", "bf16", "q8_0")
BACKENDS = ("auto", "llama.cpp", "torch")


class DeviceError(HfviewError):
    """The requested device is not available in this build or on this machine."""


class ModelNotFound(HfviewError):
    """No --model was given and no default model is installed, or the model cannot be resolved."""


def default_model_path() -> Path:
    """The embedded default model, beside the installed package sources."""
    return Path(__file__).resolve().parents[2] / "fixtures" / "default"


def _check_device(device: str) -> str:
    from .devices import DeviceUnavailable, check_device
    try:
        return check_device(device)
    except DeviceUnavailable as exc:  # a RuntimeError in runner.devices: make it a one-line refusal
        raise DeviceError(str(exc)) from None


def _resolve(model: str | os.PathLike | None, revision: str | None, progress: bool, require: str | None = None):
    """(path, model_revision, format, weight_files, backend, family) for --model; the default model when None.

    backend is "view" (llama.cpp) or "torch" (a family only transformers runs), as runner.resolve's
    architecture gate decides."""
    if model is None:
        path = default_model_path()
        if not (path / "config.json").is_file():
            raise ModelNotFound(f"no default model at {path}: pass --model DIR (a checkpoint directory) "
                                f"or a Hugging Face repository id")
        model = path
    try:
        from hfview.runner import resolve as resolve_mod
        from hfview.runner.errors import HfviewError as ResolveRefusal
    except ImportError:  # model resolution not installed: accept a local directory only
        path = Path(model).expanduser()
        if not path.is_dir():
            raise ModelNotFound(f"{model}: not a checkpoint directory (Hub ids need runner.resolve)") from None
        return path, revision, "transformers", [], "view", None
    try:
        r = resolve_mod.resolve(str(model), revision=revision, progress=progress, require=require)
    except resolve_mod.NotInView:
        raise
    except ResolveRefusal as exc:
        raise ModelNotFound(str(exc)) from None
    return r.path, r.model_revision, r.format, list(r.weight_files), r.backend, r.family


class Runner:
    """One model in llama.cpp with one context. Use as a context manager or call ``close()``."""

    backend = "llama.cpp"

    def __init__(self, stream_model, *, checkpoint=None, model_path: Path | None = None,
                 model_revision: str | None = None, chat_template: str | None = None,
                 notes: list[str] | None = None, sampling: Sampling | None = None,
                 unapplied_window: int | None = None):
        self.sm = stream_model
        self.checkpoint = checkpoint
        self.model_path = model_path
        self.model_revision = model_revision
        self.chat_template = chat_template
        self.notes = notes or []  # things the user should know (printed on stderr by the CLI)
        self.sampling = sampling or Sampling()  # the model's defaults over llama.cpp's
        # The model's sliding window where llama.cpp attends to the whole context instead (see load)
        self.unapplied_window = unapplied_window
        self._decoder = Decoder(stream_model)

    # ----------------------------------------------------------------- basic access
    @property
    def n_ctx(self) -> int:
        return self.sm.n_ctx

    @property
    def data_path(self) -> str:
        """How llama.cpp got the model's bytes: "memfd" (a memory file it mapped), "stream" (a FILE*) or "file" (a
        GGUF file's path); ``data_path_reason`` says why (runner.stream.choose_data_path)."""
        return self.sm.model.data_path

    @property
    def data_path_reason(self) -> str:
        return self.sm.model.data_path_reason

    @property
    def n_vocab(self) -> int:
        return self.sm.n_vocab

    def tokenize(self, text: str, add_special: bool = True, parse_special: bool = False) -> list[int]:
        return self.sm.tokenize(text, add_special=add_special, parse_special=parse_special)

    def piece(self, token: int, special: bool = False) -> bytes:
        return self.sm.model.token_to_piece(int(token), special=special)

    def logits(self, ids: list[int]) -> np.ndarray:
        """float32 [len(ids), n_vocab]: logits at every position (a fresh cache)."""
        return self.sm.logits(ids)

    def special_tokens(self) -> dict[str, str]:
        """bos_token / eos_token as text, the variables a chat template expects."""
        ll = llama_bindings()
        vocab = self.sm.model.vocab
        out = {}
        for name, fn in (("bos_token", ll.llama_vocab_bos), ("eos_token", ll.llama_vocab_eos)):
            tok = fn(vocab)
            if tok >= 0:
                out[name] = self.piece(tok, special=True).decode("utf-8", "replace")
        return out

    # ----------------------------------------------------------------- prompts
    def render_chat(self, prompt: str, system: str | None = None) -> str:
        if not self.chat_template:
            raise HfviewError("this model has no chat template (tokenizer.chat_template): use --no-chat")
        return render(self.chat_template, messages_for(prompt, system), add_generation_prompt=True,
                      **self.special_tokens())

    def prompt_ids(self, prompt: str, *, system: str | None = None, chat: bool | None = None) -> list[int]:
        """Token ids for a prompt: through the chat template when ``chat`` (default: when the model has
        one), else the text as is. Special-token text is parsed, as llama.cpp's tools do."""
        if chat is None:
            chat = self.chat_template is not None
        if chat:
            text = self.render_chat(prompt, system)
            # The template usually writes the BOS itself; adding another would double it.
            bos = self.special_tokens().get("bos_token")
            add_special = not (bos and text.startswith(bos))
            return self.tokenize(text, add_special=add_special, parse_special=True)
        if system:
            raise HfviewError("--system needs the chat template (drop --no-chat), or put it in the prompt")
        return self.tokenize(prompt, add_special=True, parse_special=True)

    # ----------------------------------------------------------------- generation
    def run(self, prompt: str | None = None, *, ids: list[int] | None = None, system: str | None = None,
            chat: bool | None = None, max_tokens: int = 256, on_text: Callable[[str], None] | None = None,
            **sampling: Any) -> Generation:
        """Generate from ``prompt`` (or ready ``ids``); returns text, token ids, timing, stop reason and the
        sampling settings used. ``sampling``: temperature (0: greedy), top_k, top_p, min_p, repeat_penalty,
        repeat_last_n, seed; each one left out (or None) is the model's default (``self.sampling``)."""
        if ids is None:
            if prompt is None:
                raise ValueError("give a prompt or ids")
            ids = self.prompt_ids(prompt, system=system, chat=chat)
        return decode_loop(self._decoder, self.piece, ids, max_tokens=max_tokens,
                           sampling=self.sampling.over(sampling, "asked"), on_text=on_text)

    def generate(self, prompt: str, **kwargs: Any) -> str:
        """The generated text (see ``run`` for the keyword arguments)."""
        return self.run(prompt, **kwargs).text

    def close(self) -> None:
        self._decoder.close()
        self.sm.close()

    def __enter__(self) -> "Runner":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def load(model: str | os.PathLike | None = None, *, precision: str = "auto", device: str = "cpu",
         n_ctx: int | None = None, revision: str | None = None, progress: bool = False,
         n_threads: int | None = None, verbose: bool = False, backend: str = "auto",
         steer=None, steer_layers: tuple[int, int] | None = None, kv_cache: str = "f16", lora=None,
         quant: str | None = None, imatrix: str | None = None, data_path: str | None = None) -> Runner:
    """Load MODEL (a checkpoint directory, a Hub id, or None for the embedded default) into llama.cpp.

    precision: the view's outtype (auto | f32 | f16 | bf16 | q8_0). quant: a llama-quantize file type (Q4_K_M,
    ...) applied over it, as llama_model_quantize would from the converter's file; imatrix: its importance
    matrix file. device: cpu | cuda | metal (refused when this build lacks it). n_ctx: context length (default min(4096, the model's training context),
    capped to a sliding window, see ``Runner.notes``). backend: auto (llama.cpp when the view covers
    the family, else transformers), llama.cpp, or torch; a torch run returns a ``TorchRunner``.
    steer: control vectors, each ``"FILE[:STRENGTH]"`` or a runner.steer.SteerSpec, summed and added to the
    residual stream after layers steer_layers (inclusive; default all llama.cpp steers, 1..n_layer-1).
    kv_cache: "f16" (llama.cpp's default) or "f32" (with no flash attention: exact to float32, see StreamModel).
    lora: PEFT LoRA adapter directories, each ``"DIR[:SCALE]"`` or a runner.lora.LoraSpec, presented as the GGUF
    convert_lora_to_gguf.py writes (runner.lora) and loaded the same way as the model.
    data_path: how llama.cpp gets the view's bytes: "auto" (default, or HFVIEW_DATA_PATH): a memory file it maps
    where the weights stay in this machine's memory, else a FILE*; "memfd" or "stream" to choose
    (runner.stream.choose_data_path). ``Runner.data_path`` says which was used.
    """
    ll = llama_bindings()

    from hfview import HfCheckpoint

    from .stream import StreamModel, load_model, load_model_from_path

    from .stream import KV_CACHE_TYPES
    if kv_cache not in KV_CACHE_TYPES:
        raise HfviewError(f"kv_cache {kv_cache!r}: choose one of {', '.join(KV_CACHE_TYPES)}")
    if precision not in PRECISIONS:
        raise HfviewError(f"precision {precision!r}: choose one of {', '.join(PRECISIONS)}")
    if backend not in BACKENDS:
        raise HfviewError(f"backend {backend!r}: choose one of {', '.join(BACKENDS)}")
    if backend == "torch":
        from .torch_backend import import_torch
        import_torch()  # refuse before resolving anything
    elif backend == "llama.cpp":
        device = _check_device(device)
    path, model_revision, fmt, weight_files, gated, family = _resolve(
        model, revision, progress, require="view" if backend == "llama.cpp" else None)
    notes: list[str] = []
    if quant is not None and (gated == "torch" or backend == "torch" or fmt == "gguf"):
        raise HfviewError(f"--quant {quant}: quantizes the view for llama.cpp; "
                          + ("a GGUF file is read as it is" if fmt == "gguf" else "this run uses transformers"))
    if lora and (gated == "torch" or backend == "torch"):
        raise HfviewError("--lora is applied by llama.cpp: the transformers backend cannot take it"
                          + (f" (family {family!r} is not covered by the view)" if gated == "torch" else ""))
    if lora and fmt == "gguf":
        raise HfviewError("--lora presents a PEFT adapter over a checkpoint directory's view; the model is a GGUF "
                          "file (convert the adapter with convert_lora_to_gguf.py for it)")
    if steer and (gated == "torch" or backend == "torch"):
        raise HfviewError("--steer applies a llama.cpp control vector: the transformers backend cannot take one "
                          f"(family {family!r})" if gated == "torch" else "--steer needs the llama.cpp backend")
    if gated == "torch" or backend == "torch":
        from .torch_backend import TorchRunner
        if gated == "torch":
            notes.append(f"backend: transformers (torch), float32: family {family!r} is not covered by the view")
        else:
            notes.append("backend: transformers (torch), float32, as asked")
        return TorchRunner(path, model_revision=model_revision, device=device.lower(), n_ctx=n_ctx, notes=notes)
    device = _check_device(device)
    layers = 0 if device == "cpu" else -1
    ckpt = None
    adapters: list = []
    if fmt == "gguf":  # a ready GGUF: llama.cpp reads it itself
        lm = load_model_from_path(weight_files[0], n_gpu_layers=layers, verbose=verbose)
        template = _gguf_chat_template(lm)
        window = None
    else:
        ckpt = HfCheckpoint(path, precision, quant=quant, imatrix=imatrix)
        template = next((kv.value for kv in ckpt.kv if kv.key == "tokenizer.chat_template"), None) or None
        window = unapplied_window(ckpt.family, ckpt.hparams)
        if lora:  # read and checked before llama.cpp loads anything
            from .lora import lora_files
            adapters = lora_files([lora] if isinstance(lora, (str, os.PathLike)) else list(lora), ckpt)
        lm = load_model(ckpt, n_gpu_layers=layers, progress=progress, verbose=verbose, data_path=data_path)
        if lm.data_path_reason.startswith("fallback"):
            why = lm.data_path_reason.removeprefix("fallback: ")
            notes.append(f"loaded through a FILE* instead of a memory file: {why}")
    try:
        lora_ptrs = []
        if adapters:
            from .lora import load_adapter
            lora_ptrs = [load_adapter(lm, f, data_path=lm.data_path) for _, f in adapters]
        n_train = int(ll.llama_model_n_ctx_train(lm.ptr))
        asked = n_ctx
        if n_ctx is None:
            n_ctx = min(DEFAULT_N_CTX, n_train) if n_train > 0 else DEFAULT_N_CTX
        n_ctx = int(n_ctx)
        if n_ctx < 1:
            raise HfviewError(f"n_ctx must be >= 1, got {n_ctx}")
        if window is not None and window < n_ctx:
            if asked is None:  # within the window both computations are the same
                notes.append(f"context limited to the sliding window: {window} tokens (default {n_ctx}); llama.cpp "
                             f"runs this family with full attention, so past {window} tokens it would differ "
                             f"from the model (--n-ctx goes further)")
                n_ctx = window
            else:
                notes.append(f"context {n_ctx} is past the sliding window: beyond {window} tokens llama.cpp "
                             f"attends to the whole context, unlike the model")
        sampling, not_applied = _model_sampling(lm)
        if not_applied:
            notes.append(f"the model's sampling defaults also state {', '.join(not_applied)}; hfview's sampler "
                         f"does not apply them")
        rows = layer_range = None
        if steer:  # read and checked before the context exists: a bad file costs no allocation
            from .steer import check_layer_range, control_vector_rows, parse_steer
            steer = [parse_steer(s) for s in ([steer] if isinstance(steer, (str, os.PathLike)) else steer)]
            n_layer, n_embd = int(ll.llama_model_n_layer(lm.ptr)), int(ll.llama_model_n_embd(lm.ptr))
            rows = control_vector_rows(list(steer), n_layer, n_embd)
            layer_range = check_layer_range(steer_layers, n_layer)
        sm = StreamModel(lm, device=device, n_ctx=n_ctx, n_batch=min(n_ctx, 512),
                         n_threads=n_threads or default_threads(), verbose=verbose, kv_cache=kv_cache)
    except BaseException:
        lm.close()
        raise
    if lora_ptrs:
        try:
            sm.set_lora(lora_ptrs, [spec.scale for spec, _ in adapters])
        except BaseException:
            sm.close()
            raise
        notes.append(f"LoRA: {', '.join(str(spec) for spec, _ in adapters)}")
    if rows is not None:
        try:
            sm.set_control_vector(rows, *layer_range)
        except BaseException:
            sm.close()
            raise
        notes.append(f"steering: {', '.join(map(str, steer))} on layers {layer_range[0]}..{layer_range[1]}")
    return Runner(sm, checkpoint=ckpt, model_path=Path(path), model_revision=model_revision,
                  chat_template=template, notes=notes, sampling=sampling, unapplied_window=window)


def unapplied_window(family, h: dict) -> int | None:
    """The sliding window the model has and llama.cpp's architecture for it does not apply, or None.
    A window the config states but switches off (use_sliding_window false, as Qwen2 releases do) is none."""
    window = h.get(family.runner.window_key)
    if family.runner.llama_cpp_applies_window or h.get("use_sliding_window") is False:
        return None
    return window if isinstance(window, int) and not isinstance(window, bool) and window > 0 else None


def _model_sampling(lm) -> tuple[Sampling, list[str]]:
    from .sampling import model_sampling
    values, not_applied = model_sampling(lm.ptr)
    return Sampling().over(values, "model"), not_applied


def _gguf_chat_template(lm) -> str | None:
    ll = llama_bindings()
    t = ll.llama_model_chat_template(lm.ptr, None)
    return t.decode("utf-8") if t else None

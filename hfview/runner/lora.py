"""PEFT LoRA adapters presented as the GGUF the pinned sdist's convert_lora_to_gguf.py writes, loaded into
llama.cpp through ``llama_adapter_lora_init_from_file_ptr`` (a FILE* over our bytes: no file is written).

What the converter writes for a PEFT directory (adapter_config.json + adapter_model.safetensors) over a base
model, read from the script and checked byte for byte by tests/test_lora.py:
  * keys: general.architecture (the base family's), general.type = "adapter", adapter.type = "lora", the
    general.* identity entries gathered from the *adapter's* directory (its README front matter and name, as
    for a model; hfview.metadata.general_kv, with the converter's negated parameter count of an adapter),
    adapter.lora.alpha (float32), general.quantization_version = 2;
  * tensors, in the adapter file's order of first appearance: for each target ``W``, ``<gguf name of
    W>.lora_a`` (A, [r, in]) then ``.lora_b`` (B, [out, r]); where the base family rearranges W's rows (Llama's
    Q/K rotation pairs) the same rows of B are rearranged, A unchanged, as the converter's LoraTorchTensor does;
  * types: the base conversion's rule (hfview.checkpoint: 2-D lora tensors take the outtype); outtype f32 by
    default (the script's default), f16 or bf16; not auto, at which the pinned script itself fails.

llama.cpp scales each pair by scale x alpha / r (src/llama-graph.cpp build_lora_mm), which is PEFT's
``lora_alpha / r``. Refused by name, before anything is loaded: a target that is not a LoRA pair (full
weights from ``modules_to_save``, e.g. resized embeddings or lm_head, which the converter refuses too),
embedding LoRA (``lora_embedding_A/B``), a bias, DoRA, rsLoRA and per-module alpha (llama.cpp's scale is
alpha / r for every tensor), aLoRA, fan_in_fan_out, and any target whose base tensor the view rearranges
other than by rows.

The adapter is small next to its model, so its bytes are built in memory once.
"""
from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from hfview.errors import HfviewError

from .options import path_and_number
from .devices import llama_bindings

__all__ = ["LoraError", "LoraSpec", "parse_lora", "LoraFile", "export_lora", "load_adapter"]


class LoraError(HfviewError):
    """A LoRA adapter directory is malformed or asks for something llama.cpp cannot apply."""


@dataclass(frozen=True)
class LoraSpec:
    path: Path
    scale: float = 1.0

    def __str__(self) -> str:
        return f"{self.path}:{self.scale:g}"


def parse_lora(spec: "str | os.PathLike | LoraSpec") -> LoraSpec:
    """'DIR' or 'DIR:SCALE' (a trailing ':number' is the scale)."""
    if isinstance(spec, LoraSpec):
        return spec
    path, number = path_and_number(spec, "--lora", "scale", LoraError)
    return LoraSpec(path) if number is None else LoraSpec(path, number)


# refused adapter_config.json settings: key -> (the value at which it is harmless, why)
_REFUSED_CONFIG = {
    "use_dora": (False, "DoRA rescales the merged weight's columns; llama.cpp applies plain LoRA pairs"),
    "use_rslora": (False, "rsLoRA scales by alpha / sqrt(r); llama.cpp scales by alpha / r"),
    "alpha_pattern": ({}, "per-module alpha; the GGUF holds one alpha for every tensor"),
    "fan_in_fan_out": (False, "fan-in/fan-out (Conv1D) weights are stored transposed"),
    "lora_bias": (False, "a LoRA bias term has no place in llama.cpp's adapter"),
    "bias": ("none", "bias training writes bias tensors, which are not LoRA pairs"),
    "alora_invocation_tokens": (None, "activated LoRA (aLoRA) is not presented by hfview"),
    "invocation_string": (None, "activated LoRA (aLoRA) is not presented by hfview"),
    "use_qalora": (False, "QA-LoRA pools its input; llama.cpp applies plain LoRA pairs"),
}


def _base_name(name: str) -> str:
    """convert_lora_to_gguf.py's get_base_tensor_name."""
    for a, b in (("base_model.model.", ""), (".lora_A.weight", ".weight"), (".lora_B.weight", ".weight"),
                 (".lora_embedding_A", ".weight"), (".lora_embedding_B", ".weight")):
        name = name.replace(a, b)
    return name


def _lora_type(gguf_name: str, n_dims: int, out_type):
    """The converter's type rule (as hfview.checkpoint applies it to a model) at the adapter's outtype."""
    from hfview.checkpoint import _ALWAYS_F32
    from hfview.checkpoint import _base_name as gguf_base
    from hfview.gguf_layout import GGMLType

    if n_dims <= 1 or gguf_name.endswith("_norm.weight") or gguf_base(gguf_name) in _ALWAYS_F32:
        return GGMLType.F32
    return out_type


class LoraFile:
    """The converter's GGUF for adapter ``path`` over base checkpoint ``base`` (an hfview.HfCheckpoint): a byte
    source (``size``, ``read``) for llama.cpp's FILE* loader, and ``bytes`` for export."""

    def __init__(self, path: "str | os.PathLike", base, outtype: str = "f32"):
        from safetensors import safe_open

        from hfview.gguf_layout import (ALIGNMENT, KV, GGMLType, ValueType, encode_header, encode_kv,
                                        encode_tensor_info, pad_to)
        from hfview.metadata import general_kv
        from hfview.views import RowPermutation, Stored, to_output

        self.path = Path(path)
        self.name = str(self.path)
        config_path = self.path / "adapter_config.json"
        weights = self.path / "adapter_model.safetensors"
        if not config_path.is_file():
            raise LoraError(f"{self.path}: no adapter_config.json: not a PEFT adapter directory")
        if not weights.is_file():
            raise LoraError(f"{self.path}: no adapter_model.safetensors (hfview reads PEFT adapters in safetensors "
                            f"only)")
        try:
            config = json.loads(config_path.read_text(encoding="utf-8"))
        except (ValueError, UnicodeDecodeError) as exc:
            raise LoraError(f"{config_path}: not valid JSON ({exc})") from None
        if config.get("peft_type", "LORA") != "LORA":
            raise LoraError(f"{config_path}: peft_type {config.get('peft_type')!r}: only LoRA adapters are presented")
        for key, (fine, why) in _REFUSED_CONFIG.items():
            if key in config and config[key] not in (fine, None):
                raise LoraError(f"{config_path}: {key} = {json.dumps(config[key])}: {why}; llama.cpp cannot apply it")
        alpha = config.get("lora_alpha")
        if not isinstance(alpha, (int, float)) or isinstance(alpha, bool):
            raise LoraError(f"{config_path}: lora_alpha {alpha!r} is not a number")
        self.alpha = float(alpha)

        by_source = {}  # base HF tensor name -> the base view's tensor (its GGUF name and rearrangement)
        for t in base.tensors:
            if len(t.view.sources) == 1:
                by_source.setdefault(t.view.sources[0].name, t)

        with safe_open(str(weights), "np") as f:
            names = list(f.keys())
            for name in names:
                if ".lora_embedding_A" in name or ".lora_embedding_B" in name:
                    raise LoraError(f"{weights}: tensor {name!r}: LoRA on the token embeddings is not presented "
                                    f"(target_modules with embed_tokens)")
            pairs: dict[str, dict[str, np.ndarray]] = {}
            for name in names:
                if ".base_layer.weight" in name:
                    continue  # the base weight saved beside an embedding LoRA: the converter skips it too
                is_a, is_b = ".lora_A.weight" in name, ".lora_B.weight" in name
                if not (is_a or is_b):
                    what = (" (full embedding or output weights: a resized vocabulary or modules_to_save, which "
                            "llama.cpp's adapters cannot carry)"
                            if ".embed_tokens." in name or ".lm_head." in name else "")
                    raise LoraError(f"{weights}: tensor {name!r} is not a lora_A / lora_B weight{what}")
                pairs.setdefault(_base_name(name), {})["A" if is_a else "B"] = f.get_tensor(name)

        if outtype == "auto":
            raise LoraError("outtype auto: the pinned convert_lora_to_gguf.py fails at --outtype auto on an adapter "
                            "(AttributeError: 'LoraTorchTensor' object has no attribute 'dim'), so there is no file "
                            "to match; use f32 (its default), f16 or bf16")
        types = {"f32": GGMLType.F32, "f16": GGMLType.F16, "bf16": GGMLType.BF16}
        if outtype not in types:
            raise LoraError(f"outtype {outtype!r}: use one of f32, f16, bf16, auto")
        self.outtype = outtype
        out_type = types[outtype]

        tensors: list[tuple[str, np.ndarray, GGMLType]] = []
        for base_name, pair in pairs.items():
            missing = [k for k in ("A", "B") if k not in pair]
            if missing:
                raise LoraError(f"{weights}: {base_name!r} has lora_{'/'.join(missing)} missing: an incomplete pair")
            a, b = (np.asarray(pair[k], dtype=np.float32) for k in ("A", "B"))
            target = by_source.get(base_name)
            if target is None:
                if base_name == "lm_head.weight":
                    raise LoraError(f"{weights}: a LoRA on lm_head.weight, but the base model ties its output to "
                                    f"the embeddings (no lm_head in the GGUF); the converter refuses it too")
                raise LoraError(f"{weights}: LoRA target {base_name!r} is not a tensor of the base model "
                                f"{base.path} as the view presents it")
            if a.ndim != 2 or b.ndim != 2 or a.shape[0] != b.shape[1] or \
                    (b.shape[0], a.shape[1]) != tuple(target.shape):
                raise LoraError(f"{weights}: {base_name!r}: lora_A {list(a.shape)} x lora_B {list(b.shape)} does not "
                                f"make the base tensor's shape {list(target.shape)}")
            view = target.view
            if isinstance(view, RowPermutation):
                b = b[view.order]
            elif not isinstance(view, Stored) or target.steps:
                raise LoraError(f"{weights}: LoRA target {base_name!r}: the view presents its base tensor as "
                                f"'{view.describe()}', which a LoRA pair cannot follow in hfview")
            for suffix, values in ((".lora_a", a), (".lora_b", b)):
                gname = target.name + suffix
                tensors.append((gname, values, _lora_type(gname, values.ndim, out_type)))

        # GGUFWriter.get_total_parameter_count: a pair counts as the weight it makes (out x in), and the total
        # is negated to say "an adapter" (which drops a redundant "lora" from the name, keeps a size label
        # that is bigger than the adapter, and computes none)
        n_params = sum(int(np.prod(v.shape[:-1])) * a_cols for (g, v, _), a_cols in
                       zip(tensors[1::2], [t[1].shape[-1] for t in tensors[0::2]]))
        kvs = [KV("general.architecture", ValueType.STRING, base.arch),
               KV("general.type", ValueType.STRING, "adapter"),
               KV("adapter.type", ValueType.STRING, "lora"),
               *general_kv(self.path, total_params=-n_params, shared_params=n_params, expert_params=0,
                           expert_count=0),
               KV("adapter.lora.alpha", ValueType.FLOAT32, self.alpha),
               KV("general.quantization_version", ValueType.UINT32, 2)]
        head = bytearray(encode_header(len(tensors), len(kvs)))
        for kv in kvs:
            head += encode_kv(kv)
        blobs, offset = [], 0
        for gname, values, gtype in tensors:
            data = np.ascontiguousarray(to_output(values, gtype)).tobytes()
            head += encode_tensor_info(gname, list(reversed(values.shape)), int(gtype), offset)
            blobs.append(data + b"\0" * (pad_to(len(data), ALIGNMENT) - len(data)))
            offset += len(blobs[-1])
        head += b"\0" * (pad_to(len(head), ALIGNMENT) - len(head))
        self.tensor_names = [t[0] for t in tensors]
        self.bytes = bytes(head) + b"".join(blobs)
        self.size = len(self.bytes)

    def read(self, offset: int, n: int) -> bytes:
        return self.bytes[offset:offset + n]


def export_lora(path, base, out, outtype: str = "f32") -> Path:
    """Write the adapter's GGUF to ``out`` atomically (OUT.partial, synced, renamed)."""
    lf = LoraFile(path, base, outtype)
    out = Path(out)
    partial = out.with_name(out.name + ".partial")
    try:
        with open(partial, "wb") as f:
            f.write(lf.bytes)
            f.flush()
            os.fsync(f.fileno())
        os.replace(partial, out)
    except BaseException:
        partial.unlink(missing_ok=True)
        raise
    return out


def load_adapter(model, source: Any, data_path: str | None = None):
    """The adapter's GGUF (a LoraFile or any byte source) loaded into ``model``: the handle, owned by ``model``
    (llama.cpp frees it with the model). Read the way the model was (``data_path``, default: HFVIEW_DATA_PATH, else
    a memory file where this system has them): "memfd" fills a memory file that ``llama_adapter_lora_init`` opens
    by path, "stream" (or "file") feeds ``llama_adapter_lora_init_from_file_ptr`` through a FILE*."""
    ll = llama_bindings()

    from hfview import memfile

    from .stream import DATA_PATH_ENV, ModelLoadError, _describe, _LlamaLog, open_stream

    how = data_path or os.environ.get(DATA_PATH_ENV) or "auto"
    if how == "auto":
        how = "memfd" if memfile.supported() else "stream"
    if how == "memfd":
        with memfile.fill(source, description=_describe(source)) as memory_file, \
                _LlamaLog(getattr(model, "verbose", False)) as log:
            ptr = ll.llama_adapter_lora_init(model.ptr, os.fsencode(memory_file.path))
    else:
        with open_stream(source) as stream, _LlamaLog(getattr(model, "verbose", False)) as log:
            ptr = ll.llama_adapter_lora_init_from_file_ptr(model.ptr, stream)
            stream.raise_if_failed()
    if not ptr:
        raise ModelLoadError(f"llama.cpp could not load the LoRA adapter {_describe(source)}: "
                             f"{log.errors() or 'no error message'}")
    return ptr


def base_of(path: "str | os.PathLike") -> str | None:
    """adapter_config.json's base_model_name_or_path (a directory or a Hub id), or None."""
    config = Path(path) / "adapter_config.json"
    try:
        value = json.loads(config.read_text(encoding="utf-8")).get("base_model_name_or_path")
    except (OSError, ValueError):
        return None
    return value if isinstance(value, str) and value else None


def lora_files(specs: Sequence["str | LoraSpec"], base) -> list[tuple[LoraSpec, LoraFile]]:
    if base is None:
        raise LoraError("--lora needs a checkpoint directory as the model (the adapter is presented over its view)")
    out = []
    for spec in map(parse_lora, specs):
        out.append((spec, LoraFile(spec.path, base, "f32")))
    return out


class _ModelPtr:
    def __init__(self, ptr):
        self.ptr = ptr


def apply_to_llama(llm, specs: Sequence["str | LoraSpec"], view) -> None:
    """Load ``specs`` over ``view`` (the Llama's HfCheckpoint) into a ``llama_cpp.Llama``'s model and set them on
    its context (llama-cpp-python's own ``lora_path`` takes only a file). The handles stay referenced by ``llm``;
    llama.cpp frees them with the model."""
    import ctypes

    ll = llama_bindings()

    from .stream import ModelLoadError

    files = lora_files(specs, view)
    ptrs = [load_adapter(_ModelPtr(llm._model.model), f) for _, f in files]
    arr = (ll.llama_adapter_lora_p_ctypes * len(ptrs))(*ptrs)
    scales = (ctypes.c_float * len(ptrs))(*[spec.scale for spec, _ in files])
    if ll.llama_set_adapters_lora(llm._ctx.ctx, arr, len(ptrs), scales) != 0:
        raise ModelLoadError("llama.cpp refused the LoRA adapters for the Llama's context")
    llm._hfview_lora = (ptrs, [spec.scale for spec, _ in files])


"""`hfview inspect`: the view's architecture, KV and tensor table, from headers only."""
from __future__ import annotations

from typing import Any

from .checkpoint import HfCheckpoint
from .config import ignored_keys
from .gguf_layout import ValueType

_LONG = 8  # arrays longer than this are abbreviated


def _value(kv) -> Any:
    if kv.type == ValueType.ARRAY and len(kv.value) > _LONG:
        return {"array": (kv.item_type or "").name if kv.item_type else "inferred", "length": len(kv.value),
                "head": list(kv.value[:4])}
    return kv.value


def describe(ckpt: HfCheckpoint) -> dict:
    return {
        "path": str(ckpt.path),
        "architecture": ckpt.arch,
        "family": ckpt.family.name,
        "outtype": ckpt.outtype,
        "gguf_bytes": ckpt.size,
        # no converter class: hfview's own mapping, no converter file to match (Family.no_converter)
        **({"no_converter": ckpt.family.no_converter} if ckpt.family.no_converter else {}),
        # KV llama.cpp needs at load that the file (the converter's) does not carry (RunnerFacts.load_kv)
        **({"load_kv": ckpt.load_kv} if ckpt.load_kv else {}),
        # arrays llama.cpp must read with other values to run the file (RunnerFacts.load_arrays)
        **({"load_arrays": ckpt.load_arrays} if ckpt.load_arrays else {}),
        # a sliding window llama.cpp's architecture does not apply (RunnerFacts): the runner stops the context at it
        **({"unapplied_window": window} if (window := _unapplied_window(ckpt)) else {}),
        # config keys accepted without being read, each with why it changes nothing (hfview.config.check_keys)
        "ignored_keys": ignored_keys(ckpt.config, ckpt.family, ckpt.path),
        "kv": [{"key": kv.key, "type": kv.type.name, "value": _value(kv)} for kv in ckpt.kv],
        "tensors": [{
            "name": t.name, "shape": list(t.ggml_dims), "type": t.ggml_type.name,
            "sources": [s.name for s in t.view.sources] if len(t.view.sources) <= 2
            else [t.view.sources[0].name, "…", t.view.sources[-1].name],
            "source_dtype": t.stored_dtype if t.view.sources else None,
            "view": t.describe(),
        } for t in ckpt.tensors],
    }


def _unapplied_window(ckpt: HfCheckpoint) -> int | None:
    from .runner.api import unapplied_window
    return unapplied_window(ckpt.family, ckpt.hparams)


def render(info: dict) -> str:
    lines = [f"{info['path']}: {info['architecture']} (family {info['family']}), outtype {info['outtype']}, "
             f"{info['gguf_bytes']:,} bytes as GGUF"]
    if info.get("no_converter"):
        lines.append(f"no converter class: {info['no_converter']}")
    if info.get("load_kv"):
        from .checkpoint import override_kv_flags
        lines.append("llama.cpp loads this file only with " + " ".join(override_kv_flags(info["load_kv"]))
                     + " (as the converter's; hfview's runner supplies them)")
    for key, values in info.get("load_arrays", {}).items():
        lines.append(f"llama.cpp runs this file only with {key} read as {values} (an array, which llama-cli cannot "
                     f"override; hfview's runner presents it so)")
    if info.get("unapplied_window"):
        window = info["unapplied_window"]
        lines.append(f"sliding window {window}: llama.cpp's {info['architecture']} attends to the whole context, so "
                     f"hfview's runner stops the context at {window} tokens (a larger --n-ctx is run, with a note)")
    for key, why in info.get("ignored_keys", {}).items():
        lines.append(f"ignored config key {key}: {why}")
    lines += ["", "KV:"]
    for kv in info["kv"]:
        v = kv["value"]
        if isinstance(v, dict):
            v = f"[{v['length']} × {v['array']}: {', '.join(map(repr, v['head']))}, …]"
        elif isinstance(v, str) and len(v) > 80:
            v = repr(v[:77] + "…")
        lines.append(f"  {kv['key']:<44} {kv['type']:<8} {v}")
    lines += ["", f"Tensors ({len(info['tensors'])}):"]
    width = max((len(t["name"]) for t in info["tensors"]), default=10)
    for t in info["tensors"]:
        src = ", ".join(t["sources"]) or "-"
        lines.append(f"  {t['name']:<{width}} {str(t['shape']):<22} {t['type']:<5} "
                     f"<- {src} [{t['source_dtype'] or 'computed'}; {t['view']}]")
    return "\n".join(lines)

"""Refusals many families share: the one-key ones as Refuse factories for a family's table (the activation, the
rope type), and the checks that read more than one key or a file (sliding layers, a sentence-transformers
pooling head)."""
from __future__ import annotations

from pathlib import Path

from ...errors import ConfigError
from ...family import Refuse


def architecture(h: dict) -> str | None:
    archs = h.get("architectures") or [None]
    return archs[0]


def silu_only(arch: str) -> Refuse:
    """The activation of llama.cpp architectures that compute SiLU (transformers' default where unstated)."""
    return Refuse("hidden_act", ("silu",), f"llama.cpp's {arch} architecture computes SiLU only; this checkpoint "
                  f"would run wrong", default="silu")


def rope_types(arch: str, allowed: tuple[str, ...] = ("default", "linear", "yarn")) -> Refuse:
    """The rope types the view presents for an architecture (plain rope where unstated)."""
    return Refuse("rope_parameters.rope_type", allowed, f"not one the view presents for llama.cpp's {arch} "
                  f"architecture ({', '.join(allowed)})", default="default")


def check_no_sliding(h: dict, path: Path, arch: str) -> None:
    """Qwen2-style configs state a sliding window that transformers applies only with
    use_sliding_window; llama.cpp's architecture has none, so a sliding layer would run wrong."""
    types = h.get("layer_types") or []
    if h.get("use_sliding_window") or "sliding_attention" in types:
        raise ConfigError(f"{path}: sliding-window attention layers (use_sliding_window / layer_types); "
                          f"llama.cpp's {arch} architecture attends to the whole context, so they would run wrong")


def check_no_pooling(path: Path) -> None:
    """A sentence-transformers checkpoint (modules.json naming a Pooling module) makes the converter write
    a pooling type, which the view does not present."""
    modules = path.parent / "modules.json"
    if modules.is_file() and "Pooling" in modules.read_text(encoding="utf-8"):
        raise ConfigError(f"{modules}: a sentence-transformers pooling module; the view presents decoders for "
                          f"generation only and does not write the converter's pooling type")


def check_stated(h: dict, path: Path, keys: tuple[str, ...], why: str, *, null_is_missing: bool = True,
                 names: dict[str, str] | None = None) -> None:
    """A model type transformers has no config class for is read as it stands, by the converter and by the view:
    each of `keys` (looked up under the name `names` gives it, where the family reads it under another) must be
    stated, else the two references would read it differently; `why` says how. A key stated null counts as missing,
    unless null is a value the family reads (null_is_missing False)."""
    names = names or {}

    def missing(key: str) -> bool:
        key = names.get(key, key)
        return key not in h or (null_is_missing and h[key] is None)

    absent = [k for k in keys if missing(k)]
    if absent:
        raise ConfigError(f"{path}: model_type {h.get('model_type')} without {', '.join(absent)}: {why}")

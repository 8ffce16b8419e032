"""The family registry: the one place hfview enumerates the model families it reads.

Each family module declares a `FAMILY` (see hfview.family.Family). The architecture gate, the README
table and `hfview inspect` all read this registry.
"""
from __future__ import annotations

from ..family import Family
from . import llama

FAMILIES: tuple[Family, ...] = (llama.FAMILY,)

_BY_MODEL_TYPE: dict[str, Family] = {mt: f for f in FAMILIES for mt in f.model_types}


def supported_model_types() -> list[str]:
    """Every HF `model_type` the view reads, sorted."""
    return sorted(_BY_MODEL_TYPE)


def family_for(model_type: str | None) -> Family | None:
    return _BY_MODEL_TYPE.get(model_type or "")


def gguf_arch_for(model_type: str) -> str | None:
    """The llama.cpp architecture a model_type is presented as, or None when the view lacks it."""
    f = _BY_MODEL_TYPE.get(model_type)
    return f.gguf_arch if f else None

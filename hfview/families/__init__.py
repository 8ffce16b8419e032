"""The family registry: the one place hfview enumerates the model families it reads.

Each family module declares a `FAMILY` (see hfview.family.Family); `register` collects it here.
The architecture gate, the README table and `hfview inspect` all read this registry.
"""
from __future__ import annotations

# Filled in by the core (issue 2). Until then the gate knows the Llama family by name.
_MODEL_TYPES: dict[str, str] = {"llama": "llama", "mistral": "llama", "mixtral": "llama"}


def supported_model_types() -> list[str]:
    """Every HF `model_type` the view reads, sorted."""
    return sorted(_MODEL_TYPES)


def gguf_arch_for(model_type: str) -> str | None:
    """The llama.cpp architecture a model_type is presented as, or None when the view lacks it."""
    return _MODEL_TYPES.get(model_type)

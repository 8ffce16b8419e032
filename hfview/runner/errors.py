"""Refusals of model resolution, a user can act on.

They share hfview's base class (`hfview.errors.HfviewError`), so the CLI's one handler prints
`str(err)` on stderr and exits non-zero, without a traceback unless `--debug`. Each message starts
with a fixed phrase (tests and scripts may match on it) and ends by saying what to do.
"""
from __future__ import annotations

from hfview.errors import CheckpointError, ConfigError, HfviewError, QuantizedCheckpoint

__all__ = ["HfviewError", "ModelDirectoryError", "ConfigError", "TokenizerError", "WeightsError",
           "UnsupportedArchitecture", "NotInView", "QuantizedCheckpoint", "HubError"]


class ModelDirectoryError(CheckpointError):
    """A checkpoint lacks what it needs (`failed to list`, `model config is missing`, no weights)."""


class TokenizerError(CheckpointError):
    """The tokenizer files are absent or cannot be loaded."""


class WeightsError(CheckpointError):
    """Weight files exist but cannot be mapped (truncated, not safetensors/GGUF, unreadable)."""


class UnsupportedArchitecture(HfviewError):
    """The architecture gate: no backend of this build runs the config's family."""


class NotInView(UnsupportedArchitecture):
    """llama.cpp was asked for (parity, --backend llama.cpp), but only transformers runs the family."""

    def __init__(self, message: str, *, family: str | None, config_path):
        super().__init__(message)
        self.family, self.config_path = family, config_path


class HubError(HfviewError):
    """The Hugging Face Hub could not be set up, read, or downloaded from."""

"""Refusals a user can act on.

Every error here carries its whole user-facing message: the CLI prints `str(err)` on stderr and exits
with `err.exit_code`, without a traceback unless `--debug`. Each message starts with a fixed phrase
(tests and scripts may match on it) and ends by saying what to do.
"""
from __future__ import annotations


class HfviewError(Exception):
    """Base of every refusal: the message is complete, no traceback needed."""

    exit_code = 1


class ModelDirectoryError(HfviewError):
    """A local directory lacks what a checkpoint needs (`failed to list`, `... is missing`, no weights)."""


class ConfigError(HfviewError):
    """The model config cannot be read or is not a usable JSON object."""


class TokenizerError(HfviewError):
    """The tokenizer files are absent or cannot be loaded."""


class WeightsError(HfviewError):
    """Weight files exist but cannot be mapped (truncated, not safetensors/GGUF, unreadable)."""


class UnsupportedArchitecture(HfviewError):
    """The architecture gate: no backend of this build runs the config's family."""


class QuantizedCheckpoint(HfviewError):
    """The checkpoint declares a quantization_config; hfview reads unquantized weights only."""


class HubError(HfviewError):
    """The Hugging Face Hub could not be set up, read, or downloaded from."""

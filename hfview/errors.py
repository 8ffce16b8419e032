"""Errors a user can act on. Each message names the file, key or tensor at fault and what to do."""


class HfviewError(Exception):
    """Base of every error hfview raises on purpose."""


class CheckpointError(HfviewError):
    """The checkpoint directory cannot be read as its converted GGUF."""


class ConfigError(CheckpointError):
    """A config key this family cannot honour, or a malformed config."""


class QuantizedCheckpoint(ConfigError):
    """The checkpoint declares a quantization; hfview reads unquantized weights only."""

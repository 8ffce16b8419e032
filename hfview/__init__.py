"""hfview: a Hugging Face checkpoint directory read in place as the GGUF llama.cpp's converter writes."""
from . import _gguf  # noqa: F401  (first: gguf.constants without the rest of gguf)
from .checkpoint import HfCheckpoint
from .errors import CheckpointError, ConfigError, HfviewError

__all__ = ["HfCheckpoint", "HfviewError", "CheckpointError", "ConfigError"]
__version__ = "0.1.0"

"""hfview: a Hugging Face checkpoint directory read in place as the GGUF llama.cpp's converter writes."""
from . import _gguf_first  # noqa: F401  (first: gguf without mistral-common)
from .checkpoint import HfCheckpoint
from .errors import CheckpointError, ConfigError, HfviewError

__all__ = ["HfCheckpoint", "HfviewError", "CheckpointError", "ConfigError"]
__version__ = "0.1.0"

"""gguf-py's constants alone (hfview._submodules); the rest of gguf-py only where it is used.

A view needs only gguf.constants (value and quantization types, key and tensor names). gguf's package also imports
its reader, writer, metadata (yaml), lazy tensors and vocab, which imports mistral-common wherever it is installed:
45 ms of each start without mistral-common and 0.35 s with it (python -X importtime, bench machine)."""
from __future__ import annotations

import sys
from types import ModuleType

from ._submodules import load_alone


def package() -> ModuleType:
    """The whole gguf package (GGUFReader, ...), imported without mistral-common where it is not imported yet: gguf's
    vocab imports it only for gguf.MistralVocab, which hfview never uses (hfview.tokenizer.mistral reads Mistral's
    files itself), so the mark is lifted at once and `import mistral_common` works afterwards as ever."""
    if "gguf" in sys.modules or "mistral_common" in sys.modules:
        import gguf
        return gguf
    sys.modules["mistral_common"] = None  # type: ignore[assignment]  # its import raises ImportError, as if absent
    try:
        import gguf
    finally:
        del sys.modules["mistral_common"]
    return gguf


load_alone("gguf", "constants")

"""gguf-py, imported before the rest of hfview, without mistral-common.

gguf's vocab module imports mistral-common wherever it is installed (0.35 s and 32 MB of a view's start, measured
on the bench machine), only for gguf.MistralVocab, which hfview never uses: hfview.tokenizer.mistral reads Mistral's
files itself, and the converter runs in its own process. So while gguf is first imported, mistral_common is marked
absent, and the mark is lifted at once: `import mistral_common` works afterwards as ever. What stays is that
gguf.MistralVocab, in a process that imported hfview before gguf, says mistral-common is not installed. Where gguf
or mistral_common was imported already, nothing changes."""
import sys

if "gguf" not in sys.modules and "mistral_common" not in sys.modules:
    sys.modules["mistral_common"] = None  # type: ignore[assignment]  # its import raises ImportError, as if absent
    try:
        import gguf  # noqa: F401
    finally:
        del sys.modules["mistral_common"]

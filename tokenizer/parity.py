"""Our tokenization against llama.cpp's, over a GGUF's vocabulary (the converter's or the view's).

llama.cpp re-implements each pre-tokenizer named by tokenizer.ggml.pre; this tells whether, for given texts,
its ids equal the Hugging Face tokenizer's (HfTokenizer's). Texts are tokenized with special tokens parsed
and BOS/EOS added as the GGUF's add_bos/add_eos flags say (the Hugging Face side: its post-processor).
"""
from __future__ import annotations

import ctypes
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable

from .errors import TokenizerError


class LlamaCppVocab:
    """A GGUF loaded vocabulary-only by llama.cpp (no tensor is read)."""

    def __init__(self, gguf_path: Path | str):
        import llama_cpp.llama_cpp as ll

        self._ll = ll
        ll.llama_backend_init()
        params = ll.llama_model_default_params()
        params.vocab_only = True
        self._model = ll.llama_model_load_from_file(str(gguf_path).encode(), params)
        if not self._model:
            raise TokenizerError(f"llama.cpp could not load the vocabulary of {gguf_path}")
        self._vocab = ll.llama_model_get_vocab(self._model)

    def tokenize(self, text: str, add_special: bool = True, parse_special: bool = True) -> list[int]:
        raw = text.encode("utf-8")
        cap = len(raw) + 16
        while True:
            buf = (self._ll.llama_token * cap)()
            n = self._ll.llama_tokenize(self._vocab, raw, len(raw), buf, cap, add_special, parse_special)
            if n >= 0:
                return list(buf[:n])
            cap = -n  # llama.cpp answers minus the number of tokens it needs

    def close(self) -> None:
        if self._model:
            self._ll.llama_model_free(self._model)
            self._model = ctypes.c_void_p()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


@dataclass
class Mismatch:
    text: str
    ours: list[int]
    llama_cpp: list[int]


def compare_tokenization(hf, gguf_path: Path | str, texts: Iterable[str]) -> list[Mismatch]:
    """Texts on which HfTokenizer `hf` and llama.cpp (over `gguf_path`'s vocabulary) give different ids."""
    out = []
    with LlamaCppVocab(gguf_path) as lc:
        for text in texts:
            ours, theirs = hf.encode(text), lc.tokenize(text)
            if ours != theirs:
                out.append(Mismatch(text, ours, theirs))
    return out

"""Vocabulary routines several families share, each the converter's set_vocab of a parent class; the tokenizer
package is imported on first use, off the import path."""
from __future__ import annotations

from pathlib import Path


def gpt2_or_sentencepiece_vocab(model_dir: Path, h: dict) -> list:
    """Qwen2Model.set_vocab: tokenizer.model when there is one, else byte-level BPE."""
    from hfview.tokenizer.vocab import gpt2_vocab, sentencepiece_vocab
    try:
        return sentencepiece_vocab(model_dir, h)
    except FileNotFoundError:
        return gpt2_vocab(model_dir, h)


def gpt2_vocab(model_dir: Path, h: dict) -> list:
    """TextModel.set_vocab: byte-level BPE (Qwen2MoeModel does not take Qwen2Model's sentencepiece try)."""
    from hfview.tokenizer.vocab import gpt2_vocab as vocab
    return vocab(model_dir, h)


def llama_vocab(model_dir: Path, h: dict) -> list:
    """LlamaModel.set_vocab."""
    from hfview.tokenizer.vocab import llama_vocab as read
    return read(model_dir, h)

"""The vocab function of families whose releases ship only a SentencePiece tokenizer.model (Baichuan, PLaMo 1,
TeleChat3): the converter's _set_vocab_sentencepiece, with a missing file refused by name rather than the
converter's bare FileNotFoundError. The tokenizer package is imported on first use, off the import path."""
from __future__ import annotations

from pathlib import Path


def sentencepiece_only(model_name: str):
    def vocab(model_dir: Path, h: dict) -> list:
        from tokenizer.errors import TokenizerError
        from tokenizer.vocab import sentencepiece_vocab

        path = Path(model_dir) / "tokenizer.model"
        if not path.is_file():
            raise TokenizerError(f"{path} is missing: {model_name}'s vocabulary is its SentencePiece model only; "
                                 f"copy it from the released checkpoint")
        return sentencepiece_vocab(Path(model_dir), h)
    return vocab

"""The vocab function of families whose releases ship only a SentencePiece tokenizer.model (Baichuan, PLaMo 1,
TeleChat3): the converter's _set_vocab_sentencepiece, with a missing file refused by name rather than the
converter's bare FileNotFoundError. The tokenizer package is imported on first use, off the import path."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class sentencepiece_only:  # noqa: N801 - used as a function: vocab = sentencepiece_only("Baichuan")
    """A value rather than a closure, so that hfview.vocab_cache can hand it to the process that builds it."""
    model_name: str

    def __call__(self, model_dir: Path, h: dict) -> list:
        from hfview.tokenizer.errors import TokenizerError
        from hfview.tokenizer.vocab import sentencepiece_vocab

        path = Path(model_dir) / "tokenizer.model"
        if not path.is_file():
            raise TokenizerError(f"{path} is missing: {self.model_name}'s vocabulary is its SentencePiece model "
                                 f"only; copy it from the released checkpoint")
        return sentencepiece_vocab(Path(model_dir), h)

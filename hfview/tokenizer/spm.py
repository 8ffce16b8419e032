"""SentencePiece models, loaded so that a corrupt file is a TokenizerError naming it."""
from __future__ import annotations

from pathlib import Path

from .errors import TokenizerError


def load_sentencepiece(path: Path, refusal: str = "{path} is not a SentencePiece model ({error})"):
    """The SentencePieceProcessor of `path`, every piece readable. sentencepiece parses the protobuf on load
    but decodes a piece's UTF-8 only when asked for it: a corrupt piece would otherwise surface later as a
    UnicodeDecodeError. `refusal` is the message, with {path} and {error}."""
    from sentencepiece import SentencePieceProcessor

    sp = SentencePieceProcessor()
    try:
        sp.LoadFromFile(str(path))
        for i in range(sp.vocab_size()):
            sp.IdToPiece(i)
    except (OSError, RuntimeError, ValueError) as e:  # ValueError: UnicodeDecodeError
        raise TokenizerError(refusal.format(path=path, error=str(e)[:200])) from e
    return sp

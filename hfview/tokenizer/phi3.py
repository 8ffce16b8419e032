"""Phi3MiniModel.set_vocab (conversion/phi.py): Phi-3's own SentencePiece routine.

It differs from the shared `_create_vocab_sentencepiece` (tokenizer.vocab.sentencepiece_tokens): besides
added_tokens.json and tokenizer_config.json's added_tokens_decoder it also takes tokenizer.json's
added_tokens; an added token is USER_DEFINED unless marked special (then CONTROL), with no "looks special"
guess and no '▁' rewriting. A tokenizer_config.json naming GPT2Tokenizer (Phi-4) selects byte-level BPE.
"""
from __future__ import annotations

from pathlib import Path

from hfview.gguf_layout import KV

from .errors import TokenizerError
from .special import SpecialVocab, read_json
from .spm import load_sentencepiece
from .vocab import BYTE, CONTROL, NORMAL, UNKNOWN, UNUSED, USER_DEFINED, _write_scored_vocab, gpt2_vocab
from .writer import KVWriter


def phi3_vocab(model_dir: Path, hparams: dict) -> list[KV]:
    model_dir = Path(model_dir)
    cfg_path = model_dir / "tokenizer_config.json"
    cfg = read_json(cfg_path) if cfg_path.is_file() else None
    if cfg is not None:
        if "tokenizer_class" not in cfg:
            raise TokenizerError(f"{cfg_path} has no tokenizer_class; the converter's Phi-3 vocab reads it "
                                 "(GPT2Tokenizer or a SentencePiece class): add it")
        if cfg["tokenizer_class"] == "GPT2Tokenizer":
            return gpt2_vocab(model_dir, hparams)

    tokens, scores, types = _sentencepiece_base(model_dir, hparams)
    vocab_size = len(tokens)

    def put(tid: int, content: str, special: bool, where: Path) -> None:
        if not 0 <= tid < vocab_size:
            raise TokenizerError(f"{where}: added token {content!r} has id {tid}, outside the model's vocab_size "
                                 f"{vocab_size} (config.json); the converter fails on it too")
        tokens[tid], scores[tid] = content, -1000.0
        types[tid] = CONTROL if special else USER_DEFINED

    added_path = model_dir / "added_tokens.json"
    if added_path.is_file():
        for content, tid in read_json(added_path).items():
            if tid < vocab_size:  # the converter skips these (with a debug message)
                put(tid, content, False, added_path)
    if cfg is not None:
        for key, data in cfg.get("added_tokens_decoder", {}).items():
            put(int(key), data["content"], bool(data.get("special")), cfg_path)
    tok_path = model_dir / "tokenizer.json"
    if tok_path.is_file():
        for data in read_json(tok_path).get("added_tokens", []):
            put(int(data["id"]), data["content"], bool(data.get("special")), tok_path)

    w = KVWriter()
    _write_scored_vocab(w, tokens, scores, types)
    SpecialVocab(model_dir, n_vocab=vocab_size).write(w)
    return w.kvs()


def _sentencepiece_base(model_dir: Path, hparams: dict) -> tuple[list[str], list[float], list[int]]:
    """tokenizer.model's pieces in a list of vocab_size entries, the rest [PAD{i}] (score -10000, UNUSED)."""
    path = model_dir / "tokenizer.model"
    if not path.is_file():
        raise TokenizerError(f"{path} is missing: the converter's Phi-3 vocab needs the SentencePiece model "
                             "(tokenizer.json alone is not enough); copy it from the released checkpoint")
    sp = load_sentencepiece(path, "{path} is not a SentencePiece model ({error}); the converter fails on it too")
    vocab_size = hparams.get("vocab_size", sp.vocab_size())
    if sp.vocab_size() > vocab_size:
        raise TokenizerError(f"{path} has {sp.vocab_size()} pieces, more than the model's vocab_size {vocab_size} "
                             "(config.json); the converter fails on it too")
    tokens = [f"[PAD{i}]" for i in range(vocab_size)]
    scores = [-10000.0] * vocab_size
    types = [UNUSED] * vocab_size
    for tid in range(sp.vocab_size()):
        tokens[tid], scores[tid] = sp.IdToPiece(tid), sp.GetScore(tid)
        types[tid] = (UNKNOWN if sp.IsUnknown(tid) else CONTROL if sp.IsControl(tid) else
                      UNUSED if sp.IsUnused(tid) else BYTE if sp.IsByte(tid) else NORMAL)
    return tokens, scores, types

"""Incremental decoding over a llama.cpp context, sampling, UTF-8-safe streaming of pieces.

``Decoder`` wraps a ``runner.stream.StreamModel`` (its ``ctx`` and ``model``) and keeps the KV cache
between calls: the prompt is decoded once (``prefill``), then one token per ``step``. Each next id is
drawn by llama.cpp's sampler chain (runner.sampling), so one seed gives one output. ``decode_loop`` ties
them together and is what ``runner.api.Runner.generate`` and ``hfview generate`` use.
"""
from __future__ import annotations

import codecs
import time
from dataclasses import dataclass, field
from typing import Callable, Iterator

import numpy as np

from hfview.errors import HfviewError

from .devices import llama_bindings
from .sampling import Sampler, Sampling

__all__ = ["PromptTooLong", "Decoder", "Utf8Pieces", "Generation", "decode_loop"]


class PromptTooLong(HfviewError):
    """The prompt does not leave room for one generated token in the context."""


def _ll():
    ll = llama_bindings()
    return ll


class Decoder:
    """KV-cached decoding on a StreamModel's context: ``prefill(ids)`` then ``step(token)``.

    Each call returns the float32 logits row [n_vocab] of the last position it decoded.
    """

    def __init__(self, stream_model):
        self.sm = stream_model
        self.n_ctx: int = stream_model.n_ctx
        self.n_batch: int = stream_model.n_batch
        self.n_vocab: int = stream_model.n_vocab
        self.n_past = 0
        # Allocated by llama.cpp (freed in close): nothing here can be collected under its feet.
        self._batch = _ll().llama_batch_init(self.n_batch, 0, 1)

    def is_eog(self, token: int) -> bool:
        return bool(_ll().llama_vocab_is_eog(self.sm.model.vocab, int(token)))

    def _decode(self, tokens: list[int], want_logits: bool) -> None:
        ll, b = _ll(), self._batch
        for i, tok in enumerate(tokens):
            b.token[i] = tok
            b.pos[i] = self.n_past + i
            b.n_seq_id[i] = 1
            b.seq_id[i][0] = 0
            b.logits[i] = 0
        if want_logits:
            b.logits[len(tokens) - 1] = 1  # only the last row is needed for sampling
        b.n_tokens = len(tokens)
        rc = ll.llama_decode(self.sm.ctx, b)
        if rc != 0:
            raise RuntimeError(f"llama_decode returned {rc} at position {self.n_past} "
                               f"({len(tokens)} tokens) of {self.sm.model.description}")
        self.n_past += len(tokens)

    def _last_logits(self) -> np.ndarray:
        row = _ll().llama_get_logits_ith(self.sm.ctx, -1)
        if not row:
            raise RuntimeError("llama.cpp returned no logits for the last position")
        return np.ctypeslib.as_array(row, shape=(self.n_vocab,)).copy()

    def prefill(self, ids: list[int]) -> np.ndarray:
        """Clear the cache, decode the prompt in batches, return the last position's logits."""
        ids = [int(t) for t in ids]
        if not ids:
            raise ValueError("the prompt has no tokens")
        if len(ids) >= self.n_ctx:
            raise PromptTooLong(f"the prompt is {len(ids)} tokens; the context holds {self.n_ctx}, which leaves "
                                f"no room to generate: shorten the prompt or pass a larger context (n_ctx)")
        bad = [t for t in ids if not 0 <= t < self.n_vocab]
        if bad:
            raise ValueError(f"token ids out of range [0, {self.n_vocab}): {bad[:8]}")
        ll = _ll()
        ll.llama_memory_clear(ll.llama_get_memory(self.sm.ctx), True)
        self.n_past = 0
        for start in range(0, len(ids), self.n_batch):
            chunk = ids[start:start + self.n_batch]
            self._decode(chunk, want_logits=start + len(chunk) == len(ids))
        return self._last_logits()

    def step(self, token: int) -> np.ndarray:
        """Append one token to the cache and return the logits that follow it."""
        if self.n_past >= self.n_ctx:
            raise RuntimeError(f"the context is full ({self.n_ctx} tokens)")
        self._decode([int(token)], want_logits=True)
        return self._last_logits()

    def close(self) -> None:
        if self._batch is not None:
            _ll().llama_batch_free(self._batch)
            self._batch = None

    def __del__(self):
        try:
            self.close()
        except Exception:  # noqa: BLE001
            pass


class Utf8Pieces:
    """Turns token byte pieces into text, holding back a UTF-8 sequence split across tokens."""

    def __init__(self):
        self._dec = codecs.getincrementaldecoder("utf-8")(errors="replace")

    def push(self, piece: bytes) -> str:
        return self._dec.decode(piece)

    def flush(self) -> str:
        return self._dec.decode(b"", final=True)


@dataclass
class Generation:
    text: str
    tokens: list[int]
    prompt_tokens: int
    stop: str                    # "eos" | "max_tokens" | "context"
    seconds: float               # prefill + generation
    first_token_seconds: float   # prefill + first sample
    sampling: dict = field(default_factory=dict)   # the settings used (Sampling.used())
    extra: dict = field(default_factory=dict)

    @property
    def tokens_per_second(self) -> float:
        gen = self.seconds - self.first_token_seconds
        return (len(self.tokens) - 1) / gen if len(self.tokens) > 1 and gen > 0 else float("nan")


def _tokens(decoder: Decoder, ids: list[int], max_tokens: int, sampler: Sampler, stats: dict) -> Iterator[int]:
    logits = decoder.prefill(ids)
    for tok in ids:  # the repetition penalty looks back over the prompt too, as llama.cpp's tools do
        sampler.accept(tok)
    stats["stop"] = "max_tokens"
    for i in range(max_tokens):
        tok = sampler.sample(logits)
        if decoder.is_eog(tok):
            stats["stop"] = "eos"
            return
        yield tok
        if i + 1 == max_tokens:
            return
        if decoder.n_past >= decoder.n_ctx:
            stats["stop"] = "context"
            return
        logits = decoder.step(tok)


def decode_loop(decoder: Decoder, piece: Callable[[int], bytes], ids: list[int], *, max_tokens: int,
                sampling: Sampling, on_text: Callable[[str], None] | None = None) -> Generation:
    """Generate after ``ids`` until an end-of-generation token, ``max_tokens`` or a full context.

    ``piece(id)`` gives a token's bytes; ``on_text`` receives text as soon as it decodes as UTF-8.
    The EOG token itself is neither returned nor printed.
    """
    if max_tokens < 0:
        raise ValueError(f"max_tokens must be >= 0, got {max_tokens}")
    t0 = time.perf_counter()
    first = None
    out: list[int] = []
    text: list[str] = []
    utf8 = Utf8Pieces()
    stats: dict = {"stop": "max_tokens"}

    def emit(s: str) -> None:
        if s:
            text.append(s)
            if on_text is not None:
                on_text(s)

    sampling = sampling.seeded()
    if max_tokens == 0:
        decoder.prefill(ids)  # still checks the prompt fits
    else:
        sampler = Sampler(sampling, decoder.n_vocab)
        try:
            for tok in _tokens(decoder, ids, max_tokens, sampler, stats):
                if first is None:
                    first = time.perf_counter() - t0
                out.append(tok)
                emit(utf8.push(piece(tok)))
        finally:
            sampler.close()
    emit(utf8.flush())
    seconds = time.perf_counter() - t0
    return Generation(text="".join(text), tokens=out, prompt_tokens=len(ids), stop=stats["stop"],
                      seconds=seconds, first_token_seconds=first if first is not None else seconds,
                      sampling=sampling.used())

"""Decide: rank options by the log-probability llama.cpp gives their tokens after a prompt.

The boundary between prompt and option, deliberately: the option's tokens are those of the *joint* text
``prompt + option`` after the prompt's own tokens — the tokenization the model would see if the option had
been written after the prompt. So the option's text is taken exactly as given (a leading space is part of
it: ``--option " Paris"`` after ``--prompt "The capital of France is"``). When the joint text does not
start with the prompt's own tokens (a token straddles the boundary, e.g. a prompt ending in a space before
an option that starts a word), the option is refused by name with the straddling token, rather than
scoring a different split; the fix is to move the space from the prompt into the options.

Both backends get the same ids (llama.cpp's tokenizer over the view's vocabulary makes them; transformers
is fed them unchanged in tests/test_decide.py), so tokenization cannot differ between the two sides.

Each option costs one llama.cpp pass over prompt + option from an empty cache (the logits of every position
are read; the option's i-th token is scored by the row before it). Log-probabilities are log-softmax of the
float32 logits computed in float64. Ranking: by the summed log-probability (the probability of the whole
option), highest first; ``mean`` (per token) is reported beside it, and ``--by mean`` ranks by it instead.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Sequence

import numpy as np

from hfview.errors import HfviewError

__all__ = ["DecideError", "OptionScore", "option_ids", "score_logits", "decide", "RANK_BY"]

RANK_BY = ("sum", "mean")


class DecideError(HfviewError):
    """An option cannot be scored as asked (empty, or its text merges with the prompt's last token)."""


@dataclass
class OptionScore:
    option: str
    rank: int
    logprob: float           # summed over the option's tokens
    mean_logprob: float      # per token
    n_tokens: int
    tokens: list[int] = field(default_factory=list)
    token_logprobs: list[float] = field(default_factory=list)

    def as_dict(self) -> dict:
        return asdict(self)


def option_ids(tokenize, prompt_ids: list[int], prompt_text: str, option: str, *, add_special: bool
               ) -> list[int]:
    """The option's token ids after the prompt (see the module docstring); ``tokenize(text, add_special)``."""
    if option == "":
        raise DecideError("an option is empty: nothing to score")
    joint = tokenize(prompt_text + option, add_special)
    n = len(prompt_ids)
    if joint[:n] != prompt_ids:
        at = next((i for i, (a, b) in enumerate(zip(joint, prompt_ids)) if a != b), min(len(joint), n))
        raise DecideError(f"option {option!r}: tokenized after the prompt, it merges with the prompt's tokens from "
                          f"position {at} on (the prompt ends in token {prompt_ids[-1] if prompt_ids else None}, "
                          f"the joint text has {joint[at] if at < len(joint) else None} there): end the prompt "
                          f"before the boundary, e.g. move a trailing space into each option")
    if len(joint) == n:
        raise DecideError(f"option {option!r} adds no token after the prompt")
    return joint[n:]


def _log_softmax(rows: np.ndarray) -> np.ndarray:
    x = np.asarray(rows, dtype=np.float64)
    m = x.max(axis=-1, keepdims=True)
    return x - m - np.log(np.exp(x - m).sum(axis=-1, keepdims=True))


def score_logits(logits: np.ndarray, n_prompt: int, option_tokens: Sequence[int]) -> list[float]:
    """Per-token log-probabilities of ``option_tokens`` from logits [n_prompt + len(option), vocab] of
    prompt + option: token i is scored by row n_prompt - 1 + i."""
    rows = logits[n_prompt - 1:n_prompt - 1 + len(option_tokens)]
    lp = _log_softmax(rows)
    return [float(lp[i, t]) for i, t in enumerate(option_tokens)]


def rank(scores: list[OptionScore], by: str = "sum") -> list[OptionScore]:
    if by not in RANK_BY:
        raise DecideError(f"rank by {by!r}: choose one of {', '.join(RANK_BY)}")
    key = (lambda s: s.logprob) if by == "sum" else (lambda s: s.mean_logprob)
    # stable: equal scores keep the order they were given in
    ordered = sorted(scores, key=lambda s: -key(s))
    for i, s in enumerate(ordered, 1):
        s.rank = i
    return ordered


def decide(runner, prompt: str, options: Sequence[str], *, chat: bool = False, system: str | None = None,
           by: str = "sum") -> list[OptionScore]:
    """Score every option after ``prompt`` with ``runner`` (a runner.api.Runner); ranked, best first.

    chat: put the prompt through the model's chat template (the options are then the assistant's reply)."""
    if not options:
        raise DecideError("decide needs at least one option (--option TEXT, repeatable)")
    if len(set(options)) != len(options):
        dup = next(o for o in options if options.count(o) > 1)
        raise DecideError(f"option {dup!r} is given twice")
    if by not in RANK_BY:
        raise DecideError(f"rank by {by!r}: choose one of {', '.join(RANK_BY)}")
    if chat:
        text = runner.render_chat(prompt, system)
        bos = runner.special_tokens().get("bos_token")
        add_special = not (bos and text.startswith(bos))
    else:
        if system:
            raise DecideError("--system needs the chat template (--chat)")
        text, add_special = prompt, True

    def tokenize(t: str, special: bool) -> list[int]:
        return runner.tokenize(t, add_special=special, parse_special=True)

    prompt_ids = tokenize(text, add_special)
    if not prompt_ids:
        raise DecideError("the prompt has no tokens (and the model adds no BOS): there is nothing to condition on")
    scores = []
    for option in options:
        toks = option_ids(tokenize, prompt_ids, text, option, add_special=add_special)
        ids = prompt_ids + toks
        if len(ids) > runner.n_ctx:
            raise DecideError(f"option {option!r}: prompt + option are {len(ids)} tokens, more than the context "
                              f"({runner.n_ctx}); pass a larger --n-ctx")
        lps = score_logits(runner.logits(ids), len(prompt_ids), toks)
        scores.append(OptionScore(option=option, rank=0, logprob=float(sum(lps)),
                                  mean_logprob=float(sum(lps) / len(lps)), n_tokens=len(toks), tokens=toks,
                                  token_logprobs=lps))
    return rank(scores, by)

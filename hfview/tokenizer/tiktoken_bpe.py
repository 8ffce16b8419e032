"""tiktoken rank files as the byte-level BPE the converter writes for them (Qwen, Kimi, GLM-4 style).

A rank file lists `base64(token bytes) rank` per line. The converter turns it into a GPT-2 style vocabulary:
each token's bytes spelt with GPT-2's printable byte alphabet, and one merge per multi-byte token, found by
replaying BPE on its bytes with only lower-ranked merges allowed (QwenModel.bpe in the converter).
"""
from __future__ import annotations

import base64
import binascii
from functools import lru_cache
from pathlib import Path

from tokenizers import Regex, pre_tokenizers

from .errors import TokenizerError

NORMAL, CONTROL, UNUSED = 1, 3, 5


def load_ranks(path: Path) -> dict[bytes, int]:
    """The rank file as {token bytes: rank}; a malformed line is an error naming the file and line."""
    path = Path(path)
    if not path.is_file():
        raise TokenizerError(f"tiktoken rank file not found: {path}")
    ranks: dict[bytes, int] = {}
    with open(path, "rb") as f:
        for n, line in enumerate(f, 1):
            if not line.strip():
                continue
            parts = line.split()
            try:
                if len(parts) != 2:
                    raise ValueError("expected two fields")
                token, rank = base64.b64decode(parts[0], validate=True), int(parts[1])
            except (ValueError, binascii.Error) as e:
                raise TokenizerError(f"{path}:{n}: expected 'base64-token rank', got {line[:80]!r} ({e})") from e
            if token in ranks:
                raise TokenizerError(f"{path}:{n}: token {token!r} listed twice (ranks {ranks[token]} and {rank})")
            ranks[token] = rank
    return ranks


@lru_cache(maxsize=1)
def byte_alphabet() -> tuple[str, ...]:
    """GPT-2's printable stand-in for each byte value: printable Latin-1 bytes stand for themselves, the
    others take code points from 256 upward in byte order."""
    keep = set(range(ord("!"), ord("~") + 1)) | set(range(ord("¡"), ord("¬") + 1)) | set(range(ord("®"), ord("ÿ") + 1))
    out, extra = [], 0
    for b in range(256):
        if b in keep:
            out.append(chr(b))
        else:
            out.append(chr(256 + extra))
            extra += 1
    return tuple(out)


def token_bytes_to_string(token: bytes) -> str:
    alphabet = byte_alphabet()
    return "".join(alphabet[b] for b in token)


def bpe_parts(ranks: dict[bytes, int], token: bytes, max_rank: int | None = None) -> list[bytes]:
    """Replay BPE on `token`'s bytes, always merging the lowest-ranked adjacent pair, stopping before a
    merge ranked `max_rank` or higher. For a token's own rank this leaves the two parts it was made of."""
    parts = [bytes([b]) for b in token]
    while len(parts) > 1:
        best_rank, best_i = None, -1
        for i in range(len(parts) - 1):
            rank = ranks.get(parts[i] + parts[i + 1])
            if rank is not None and (best_rank is None or rank < best_rank):
                best_rank, best_i = rank, i
        if best_rank is None or (max_rank is not None and best_rank >= max_rank):
            break
        parts[best_i:best_i + 2] = [parts[best_i] + parts[best_i + 1]]
    return parts


def recover_merges(ranks: dict[bytes, int], *, require_pairs: bool = True, where: str = "") -> list[str]:
    """One "left right" merge per multi-byte token, in the rank file's order. With require_pairs (the Qwen
    path asserts it) a token that does not split into exactly two parts is an error; without, it is skipped
    (the Kimi path)."""
    merges = []
    for token, rank in ranks.items():
        if len(token) == 1:
            continue
        parts = bpe_parts(ranks, token, max_rank=rank)
        if len(parts) != 2:
            if require_pairs:
                raise TokenizerError(f"{where or 'tiktoken ranks'}: token {token!r} (rank {rank}) is not the merge "
                                     f"of two lower-ranked tokens; the converter fails on it")
            continue
        merges.append(f"{token_bytes_to_string(parts[0])} {token_bytes_to_string(parts[1])}")
    return merges


def tiktoken_tokens(ranks: dict[bytes, int], special_tokens: dict[str, int], vocab_size: int,
                    where: str = "", *, merge_by_name: bool = False) -> tuple[list[str], list[int]]:
    """Tokens and types over vocab_size ids: rank tokens NORMAL, special tokens CONTROL, holes [PAD{id}].

    `merge_by_name` is the converter's Kimi branch: the specials merged into the ranks' spellings by name
    ({**vocab, **specials}) and read back by id, so a special spelled as a rank token takes that token's place
    (its id becomes a hole), and ids at or past vocab_size are left out where the other branches refuse them."""
    if merge_by_name:
        by_name = {token_bytes_to_string(tok): rank for tok, rank in ranks.items()}
        by_name.update(special_tokens)
        reverse = {tid: name for name, tid in by_name.items() if tid < vocab_size}
    else:
        reverse = {rank: token_bytes_to_string(tok) for tok, rank in ranks.items()}
        reverse.update({tid: content for content, tid in special_tokens.items()})
        if reverse and max(reverse) >= vocab_size:
            raise TokenizerError(f"{where or 'tiktoken vocabulary'}: id {max(reverse)} does not fit vocab_size "
                                 f"{vocab_size}; the converter refuses this too")
    specials = set(special_tokens.values())
    tokens, types = [], []
    for tid in range(vocab_size):
        if tid not in reverse:
            tokens.append(f"[PAD{tid}]")
            types.append(UNUSED)
        else:
            tokens.append(reverse[tid])
            types.append(CONTROL if tid in specials else NORMAL)
    return tokens, types


def tiktoken_split(pattern: str, text: str) -> list[str]:
    """The pieces a tiktoken split pattern cuts `text` into (BPE then runs within each piece)."""
    splitter = pre_tokenizers.Split(Regex(pattern), behavior="isolated", invert=False)
    return [piece for piece, _ in splitter.pre_tokenize_str(text)]

"""Kimi's tiktoken vocabulary (Kimi-K2, Moonlight, Kimi-Linear releases: tiktoken.model + tokenization_kimi.py +
tokenizer_config.json, no tokenizer.json) as the converter writes it: the `tokpre == "kimi-k2"` branch of
DeepseekV2Model.set_vocab and KimiLinearModel.set_vocab, which load the release's TikTokenTokenizer through
trust_remote_code. hfview runs no checkpoint code: it reads the two data files as that code reads them.

What tokenization_kimi.py defines in code: its split pattern, and its special tokens: one per id from the number of
ranks on, named by tokenizer_config.json's added_tokens_decoder where it names the id and `<|reserved_token_{id}|>`
otherwise, over 256 ids (Kimi-K2's first copies) or 258 (Kimi-Linear's and later copies: two past vocab_size
163840). The converter writes ids below vocab_size only, so the two agree wherever vocab_size is at most the ranks
plus 256, and a config past that is refused (which count its code has is not in the data files).
"""
from __future__ import annotations

import json
from pathlib import Path

from ...errors import ConfigError
from ...names import Keys

RANKS_FILE = "tiktoken.model"
KIMI_SPECIALS = 256  # the fewest special ids a tokenization_kimi.py names (num_reserved_special_tokens)
KIMI_SPECIALS_MOST = KIMI_SPECIALS + 2  # the most (Kimi-Linear's copy adds two)

# tokenization_kimi.py's pat_str (tiktoken's regex; Oniguruma, which tokenizers' Regex runs, has the same class
# intersection `&&`)
KIMI_PATTERN = "|".join([
    r"""[\p{Han}]+""",
    r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]*[\p{Ll}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]+"""
    r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
    r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]+[\p{Ll}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]*"""
    r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
    r"""\p{N}{1,3}""",
    r""" ?[^\s\p{L}\p{N}]+[\r\n]*""",
    r"""\s*[\r\n]+""",
    r"""\s+(?!\S)""",
    r"""\s+""",
])


def is_kimi_tiktoken(model_dir: Path) -> bool:
    """A checkpoint whose tokenizer is Kimi's tiktoken.model alone (the converter's byte-level try fails there)."""
    return not (model_dir / "tokenizer.json").is_file() and (model_dir / RANKS_FILE).is_file()


def _tokenizer_config(model_dir: Path) -> dict:
    path = model_dir / "tokenizer_config.json"
    if not path.is_file():
        raise ConfigError(f"{path} is missing: Kimi's tokenizer names its special tokens there (added_tokens_decoder, "
                          f"bos_token, eos_token), and the converter reads them through it")
    try:
        cfg = json.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ConfigError(f"{path}: not valid JSON ({e})") from None
    if not isinstance(cfg, dict):
        raise ConfigError(f"{path}: expected a JSON object")
    return cfg


def _named_specials(cfg: dict, path: Path) -> dict[int, str]:
    decoder = cfg.get("added_tokens_decoder") or {}
    named: dict[int, str] = {}
    if not isinstance(decoder, dict):
        raise ConfigError(f"{path}: added_tokens_decoder is {type(decoder).__name__}; expected an object of id -> token")
    for key, token in decoder.items():
        content = token.get("content") if isinstance(token, dict) else None
        if not (isinstance(key, str) and key.isdigit()) or not isinstance(content, str):
            raise ConfigError(f"{path}: added_tokens_decoder entry {key!r}: expected a decimal id naming an object "
                              f"with a string content")
        named[int(key)] = content
    return named


def special_tokens(ranks: dict[bytes, int], cfg: dict, path: Path) -> dict[str, int]:
    """TikTokenTokenizer.special_tokens: {name: id} over the ids from len(ranks) on (a name given twice keeps its
    last id, as the release's dict comprehension does)."""
    named = _named_specials(cfg, path)
    first = len(ranks)
    return {named.get(i, f"<|reserved_token_{i}|>"): i for i in range(first, first + KIMI_SPECIALS_MOST)}


def probe_ids(ranks: dict[bytes, int]) -> list[int]:
    """The ids TikTokenTokenizer.encode gives the converter's probe text: the split, then BPE in each piece (no
    normalisation; the probe has no special token)."""
    from hfview.tokenizer.digests import PRE_TOKENIZER_PROBE
    from hfview.tokenizer.tiktoken_bpe import bpe_parts, tiktoken_split
    ids: list[int] = []
    for piece in tiktoken_split(KIMI_PATTERN, PRE_TOKENIZER_PROBE):
        data = piece.encode("utf-8")
        ids += [ranks[data]] if data in ranks else [ranks[p] for p in bpe_parts(ranks, data)]
    return ids


def _eos_id(cfg: dict, specials: dict[str, int], path: Path) -> int:
    """TikTokenTokenizer.eos_id: the special id of tokenizer_config's eos_token (default "[EOS]")."""
    eos = cfg.get("eos_token", "[EOS]")
    eos = eos.get("content") if isinstance(eos, dict) else eos
    if eos not in specials:
        raise ConfigError(f"{path}: eos_token {eos!r} is none of the tokenizer's special tokens; the release's "
                          f"tokenizer code fails to load on it")
    return specials[eos]


def kimi_vocab(model_dir: Path, h: dict, *, eos_from_tokenizer: bool = False) -> list:
    """The converter's kimi-k2 branch: model gpt2, pre-tokenizer named by the probe digest, tokens and types,
    one merge per two-part token (others skipped), SpecialVocab without merges; with `eos_from_tokenizer`
    (KimiLinearModel) the EOS id then overwritten with the tokenizer's own."""
    import hashlib

    from hfview.tokenizer.digests import pre_tokenizer_named
    from hfview.tokenizer.special import SpecialVocab
    from hfview.tokenizer.tiktoken_bpe import load_ranks, recover_merges, tiktoken_tokens
    from hfview.tokenizer.writer import KVWriter

    model_dir = Path(model_dir)
    ranks_file = model_dir / RANKS_FILE
    ranks = load_ranks(ranks_file)
    cfg_path = model_dir / "tokenizer_config.json"
    cfg = _tokenizer_config(model_dir)
    if sorted(ranks.values()) != list(range(len(ranks))):
        raise ConfigError(f"{ranks_file}: its ranks are not 0..{len(ranks) - 1} each once; Kimi's tokenizer numbers "
                          f"its special tokens from the count of ranks on, so they would collide")
    vocab_size = h["vocab_size"]
    if vocab_size > len(ranks) + KIMI_SPECIALS:
        raise ConfigError(f"{model_dir / 'config.json'}: vocab_size {vocab_size} is past {RANKS_FILE}'s {len(ranks)} "
                          f"ranks plus {KIMI_SPECIALS} special ids; how many special ids the release's "
                          f"tokenization_kimi.py names there (256 or 258) is in its code, which hfview does not run")
    specials = special_tokens(ranks, cfg, cfg_path)
    digest = hashlib.sha256(str(probe_ids(ranks)).encode()).hexdigest()
    pre = pre_tokenizer_named(digest, str(ranks_file))
    if pre != "kimi-k2":
        raise ConfigError(f"{ranks_file}: its probe digest names pre-tokenizer {pre!r}; the converter's Kimi path "
                          f"writes \"kimi-k2\" only and refuses any other")
    tokens, types = tiktoken_tokens(ranks, specials, vocab_size, merge_by_name=True)
    w = KVWriter()
    w.add_string(Keys.Tokenizer.MODEL, "gpt2")
    w.add_string(Keys.Tokenizer.PRE, pre)
    w.add_array(Keys.Tokenizer.LIST, tokens)
    w.add_array(Keys.Tokenizer.TOKEN_TYPE, types)
    w.add_array(Keys.Tokenizer.MERGES, recover_merges(ranks, require_pairs=False, where=str(ranks_file)))
    SpecialVocab(model_dir, load_merges=False).write(w)
    if eos_from_tokenizer:
        w.add_uint32(Keys.Tokenizer.EOS_ID, _eos_id(cfg, specials, cfg_path))
    return w.kvs()

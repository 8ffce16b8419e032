"""Mistral's own tokenizer files as the converter's `_set_vocab_mistral` writes them.

The converter reads them through gguf-py's MistralVocab over the `mistral-common` package; this module
reads the same files directly (mistral-common is a test-only dependency of hfview):

  tekken.json            Tekken: tiktoken-style byte-level BPE. Ids: the special tokens first (as many as
                         `default_num_special_tokens`, unnamed ones filled in as <SPECIAL_i>), then the first
                         `default_vocab_size - default_num_special_tokens` ranks. Written as a GPT-2 style
                         vocabulary (pre-tokenizer "tekken") with every merge that rebuilds a token.
  tokenizer.model[.vN]   SentencePiece; the suffix names mistral-common's tokenizer version (none: v1).

`mistral_vocab(model_dir, arch)` returns the tokenizer.* KVs (and `{arch}.vocab_size`) in the converter's
insertion order.
"""
from __future__ import annotations

import base64
import binascii
import json
from dataclasses import dataclass
from pathlib import Path

from hfview.errors import shown
from hfview.gguf_layout import KV
from hfview.shapes import COUNT, ID, LIST, STRING, check, list_of, object_of

from .errors import TokenizerError
from .special import write_chat_template
from .spm import load_sentencepiece
from .tiktoken_bpe import token_bytes_to_string
from .writer import KVWriter
from ..names import Keys

NORMAL, UNKNOWN, CONTROL, UNUSED, BYTE = 1, 2, 3, 5, 6

# mistral-common's TokenizerVersion and MultiModalVersion members (1.9): the versions a file may name.
VERSIONS = ("v1", "v2", "v3", "v7", "v11", "v13")
_MM_VERSIONS = ("m1",)
_SPM_SUFFIXES = frozenset([f".model.{v}{m}" for v in VERSIONS for m in (*_MM_VERSIONS, "")] + [".model"])

# The special tokens a tekken.json of version <= v7 without a "special_tokens" list has, in id order
# (mistral-common's Tekkenizer.DEPRECATED_SPECIAL_TOKENS; tests compare the two).
LEGACY_TEKKEN_SPECIALS = (
    "<unk>", "<s>", "</s>", "[INST]", "[/INST]", "[AVAILABLE_TOOLS]", "[/AVAILABLE_TOOLS]", "[TOOL_RESULTS]",
    "[/TOOL_RESULTS]", "[TOOL_CALLS]", "[IMG]", "<pad>", "[IMG_BREAK]", "[IMG_END]", "[PREFIX]", "[MIDDLE]",
    "[SUFFIX]", "[SYSTEM_PROMPT]", "[/SYSTEM_PROMPT]", "[TOOL_CONTENT]",
)

# The chat template the converter writes when the directory has no chat_template.jinja: llama.cpp's
# built-in template names for the older tokenizers; for v11 and v13 (either kind) a community template file
# from llama.cpp's sources (models/templates/), which hfview carries as data (mistral_templates.py).
_BUILTIN_TEMPLATES = {("v1", "spm"): "mistral-v1", ("v1", "tekken"): "mistral-v1",
                      ("v3", "spm"): "mistral-v3", ("v3", "tekken"): "mistral-v3-tekken",
                      ("v7", "spm"): "mistral-v7", ("v7", "tekken"): "mistral-v7-tekken"}
_TEMPLATE_FILES = {"v11": "Mistral-Small-3.2-24B-Instruct-2506.jinja",
                   "v13": "unsloth-mistral-Devstral-Small-2507.jinja"}


def tokenizer_file(model_dir: Path) -> Path:
    """The tokenizer file the converter picks: tekken.json if there is one, else the SentencePiece file
    whose name sorts last (tokenizer.model.v3 over tokenizer.model). Like the converter, files in
    subdirectories count too; a top-level file is preferred."""
    model_dir = Path(model_dir)
    files = sorted((p for p in model_dir.rglob("*") if p.is_file()),
                   key=lambda p: (len(p.relative_to(model_dir).parts), str(p)))
    valid = [p for p in files if p.name == "tekken.json" or "".join(p.suffixes) in _SPM_SUFFIXES]
    if not valid:
        raise TokenizerError(f"tokenizer is missing: {model_dir / 'tekken.json'}; Mistral's format needs tekken.json "
                             f"or a SentencePiece tokenizer.model.v3 (tokenizer.model.vN) beside params.json")
    for p in valid:
        if p.name == "tekken.json":
            return p
    return sorted(valid, key=lambda p: p.name)[-1]


@dataclass
class MistralTokens:
    kind: str                  # "tekken" or "spm"
    version: str               # "v3", "v7", ...
    tokens: list[str]
    scores: list               # floats for SentencePiece; the int 0 for Tekken, as the converter passes it
    types: list[int]
    bos: int
    eos: int
    unk: int
    pad: int                   # the converter writes eos when the tokenizer has no pad
    merges: list[str] | None = None


# -- Tekken --------------------------------------------------------------------------------------------------

# tekken.json where it is read (the vocab entries are checked one by one as they are decoded)
_TEKKEN = object_of({
    "config": object_of({"default_vocab_size": COUNT, "default_num_special_tokens": ID, "version": STRING.or_null()},
                        required=("default_vocab_size", "default_num_special_tokens")),
    "vocab": LIST,
    "special_tokens": list_of(object_of({"rank": ID, "token_str": STRING}, required=("rank", "token_str"))).or_null(),
}, required=("config", "vocab"))


def _tekken(path: Path, n_vocab: int | None = None) -> MistralTokens:
    """`n_vocab`: the rows of the model's token embedding; a tekken.json naming more tokens is refused before
    any list of them is made."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError) as e:  # ValueError: bad JSON or UTF-8, a 5000-digit number
        raise TokenizerError(f"failed to load tokenizer {path}: not JSON ({str(e)[:200]}); re-download it") from e
    check(data, _TEKKEN, "", lambda where, value, rule: TokenizerError(
        f"failed to load tokenizer {path}: {where or 'the file'} is {shown(value)}; expected {rule.expect} "
        f"(a tekken.json with config.default_vocab_size, config.default_num_special_tokens and vocab); re-download it"))
    config, entries = data["config"], data["vocab"]
    version, vocab_size, n_special = config.get("version"), config["default_vocab_size"], config["default_num_special_tokens"]
    if n_vocab is not None and vocab_size > n_vocab:
        raise TokenizerError(f"failed to load tokenizer {path}: config.default_vocab_size {vocab_size} is more than "
                             f"the {n_vocab} rows of the model's token embedding; re-download the tokenizer")
    if n_special > vocab_size:  # before the fillers <SPECIAL_i> are made
        raise TokenizerError(f"failed to load tokenizer {path}: config.default_num_special_tokens {n_special} is more "
                             f"than config.default_vocab_size {vocab_size}; re-download it")
    if version not in VERSIONS:
        raise TokenizerError(f"failed to load tokenizer {path}: config.version {version!r} is not one mistral-common "
                             f"knows ({', '.join(VERSIONS)})")
    specials = data.get("special_tokens")
    if specials is None:
        if VERSIONS.index(version) > VERSIONS.index("v7"):
            raise TokenizerError(f"failed to load tokenizer {path}: a {version} tekken.json must list its "
                                 f"special_tokens; re-download it")
        named = [(i, s) for i, s in enumerate(LEGACY_TEKKEN_SPECIALS)]
    else:
        named = [(s["rank"], s["token_str"]) for s in specials]
    if len({s for _, s in named}) != len(named) or len(named) > n_special:
        raise TokenizerError(f"failed to load tokenizer {path}: {len(named)} special tokens, which must be unique "
                             f"and at most default_num_special_tokens = {n_special}")
    pieces = [s for _, s in named] + [f"<SPECIAL_{i}>" for i in range(len(named), n_special)]
    ids = {s: rank for rank, s in named} | {f"<SPECIAL_{i}>": i for i in range(len(named), n_special)}
    if len(set(pieces)) != n_special:
        raise TokenizerError(f"failed to load tokenizer {path}: a special token is named like a filler <SPECIAL_i>")

    inner = vocab_size - n_special
    if inner < 0 or len(entries) < inner:
        raise TokenizerError(f"failed to load tokenizer {path}: default_vocab_size {vocab_size} needs {inner} "
                             f"vocabulary entries after {n_special} special tokens; the file has {len(entries)}")
    ranks: dict[bytes, int] = {}
    for i, entry in enumerate(entries[:inner]):
        try:
            token = base64.b64decode(entry["token_bytes"], validate=True)
            rank = entry["rank"]
        except (KeyError, TypeError, binascii.Error) as e:
            raise TokenizerError(f"failed to load tokenizer {path}: vocab entry {i} is malformed ({e})") from e
        if rank != i or (i < 256 and token != bytes([i])) or token in ranks:
            raise TokenizerError(f"failed to load tokenizer {path}: vocab entry {i} (rank {rank}, {token!r}) breaks "
                                 f"the rank order (ranks 0-255 are the single bytes, each token once)")
        ranks[token] = i

    def special(name: str) -> int:
        if name not in ids:
            raise TokenizerError(f"failed to load tokenizer {path}: no special token {name}")
        return ids[name]

    eos = special("</s>")
    pad = ids.get("<pad>", eos)
    tokens = pieces + [token_bytes_to_string(t) for t in ranks]
    return MistralTokens("tekken", version, tokens, [0] * vocab_size, [CONTROL] * n_special + [NORMAL] * inner,
                         bos=special("<s>"), eos=eos, unk=special("<unk>"), pad=pad,
                         merges=_tekken_merges(ranks, path))


def _tekken_merges(ranks: dict[bytes, int], path: Path) -> list[str]:
    """Every way each multi-byte token is the join of two vocabulary tokens, token by token in rank order,
    the splits of one token ordered by their parts' ranks."""
    merges = []
    for token, rank in ranks.items():
        if rank < 256:
            continue
        splits = sorted(((ranks[token[:j]], ranks[token[j:]], j) for j in range(1, len(token))
                         if token[:j] in ranks and token[j:] in ranks))
        if not splits:
            raise TokenizerError(f"{path}: token {token!r} (rank {rank}) is not the join of two vocabulary tokens; "
                                 f"the converter fails on it too")
        merges += [f"{token_bytes_to_string(token[:j])} {token_bytes_to_string(token[j:])}" for _, _, j in splits]
    return merges


# -- SentencePiece -------------------------------------------------------------------------------------------

def _spm_version(path: Path) -> str:
    last = path.name.split(".")[-1]
    if last == "model":
        return "v1"
    version = last.split("m")[0]
    if version not in VERSIONS:
        raise TokenizerError(f"failed to load tokenizer {path}: the suffix .{last} names no tokenizer version "
                             f"mistral-common knows ({', '.join(VERSIONS)})")
    return version


def _sentencepiece(path: Path) -> MistralTokens:
    version = _spm_version(path)
    sp = load_sentencepiece(path, "failed to load tokenizer {path}: not a SentencePiece model ({error})")
    tokens, scores, types = [], [], []
    for i in range(sp.vocab_size()):
        tokens.append(sp.IdToPiece(i))
        scores.append(sp.GetScore(i))
        kind = NORMAL  # the later checks win: a byte piece is BYTE whatever else it is
        for test, value in ((sp.IsUnknown, UNKNOWN), (sp.IsControl, CONTROL), (sp.IsUnused, UNUSED),
                            (sp.IsByte, BYTE)):
            if test(i):
                kind = value
        types.append(kind)
    eos = sp.eos_id()
    return MistralTokens("spm", version, tokens, scores, types, bos=sp.bos_id(), eos=eos, unk=sp.unk_id(),
                         pad=eos if sp.pad_id() == -1 else sp.pad_id())


# -- the KVs -------------------------------------------------------------------------------------------------

def read_mistral_tokenizer(model_dir: Path, n_vocab: int | None = None) -> MistralTokens:
    path = tokenizer_file(model_dir)
    return _tekken(path, n_vocab) if path.name == "tekken.json" else _sentencepiece(path)


def chat_template(model_dir: Path, tok: MistralTokens, mistral_format: bool = True) -> str:
    """chat_template.jinja beside the weights (read in Mistral's own format only, as the converter reads it), else
    the converter's choice by tokenizer version and kind."""
    local = Path(model_dir) / "chat_template.jinja"
    if mistral_format and local.is_file():
        return local.read_text(encoding="utf-8")
    if (tok.version, tok.kind) in _BUILTIN_TEMPLATES:
        return _BUILTIN_TEMPLATES[(tok.version, tok.kind)]
    if tok.version in _TEMPLATE_FILES:
        from .mistral_templates import TEMPLATES
        return TEMPLATES[_TEMPLATE_FILES[tok.version]]
    raise TokenizerError(f"{model_dir}: the converter knows no chat template for a {tok.version} {tok.kind} Mistral "
                         f"tokenizer (it refuses unless told to skip it); add chat_template.jinja beside the weights")


def mistral_vocab(model_dir: Path, arch: str, n_vocab: int | None = None, mistral_format: bool = True) -> list[KV]:
    """The converter's _set_vocab_mistral for a Mistral-format directory (`--mistral-format`), or for a Hugging Face
    one whose only tokenizer is tekken.json (`mistral_format` False: Voxtral); `n_vocab`: the rows of the token
    embedding, which bound the vocabulary."""
    tok = read_mistral_tokenizer(model_dir, n_vocab)
    w = KVWriter()
    w.add_string(Keys.Tokenizer.MODEL, "gpt2" if tok.kind == "tekken" else "llama")
    if tok.kind == "tekken":
        w.add_string(Keys.Tokenizer.PRE, "tekken")
        w.add_array(Keys.Tokenizer.MERGES, tok.merges)
    w.add_uint32(Keys.Tokenizer.BOS_ID, tok.bos)
    w.add_uint32(Keys.Tokenizer.EOS_ID, tok.eos)
    w.add_uint32(Keys.Tokenizer.UNK_ID, tok.unk)
    w.add_uint32(Keys.Tokenizer.PAD_ID, tok.pad)
    w.add_array(Keys.Tokenizer.LIST, tok.tokens)
    w.add_array(Keys.Tokenizer.SCORES, tok.scores)
    w.add_array(Keys.Tokenizer.TOKEN_TYPE, tok.types)
    w.add_uint32(Keys.LLM.VOCAB_SIZE.format(arch=arch), len(tok.tokens))
    w.add_bool(Keys.Tokenizer.ADD_BOS, True)
    w.add_bool(Keys.Tokenizer.ADD_EOS, False)
    write_chat_template(w, chat_template(model_dir, tok, mistral_format))
    return w.kvs()

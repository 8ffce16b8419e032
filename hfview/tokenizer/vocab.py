"""The converter's vocabulary routines (conversion/base.py, conversion/llama.py), as lists of GGUF KVs.

Each function takes the checkpoint directory and `hparams`, the config dict as the converter sees it
(AutoConfig defaults applied, text_config merged over the root), and returns the tokenizer.* KVs in the
order the converter's GGUFWriter inserts them.
"""
from __future__ import annotations

import hashlib
import logging
import re
from pathlib import Path

from hfview.errors import shown
from hfview.gguf_layout import KV
from hfview.shapes import NUMBER, STRING, Rule

from .digests import PRE_TOKENIZER_PROBE, pre_tokenizer_named
from .errors import TokenizerError
from .hf_auto import AutoTokenizerView
from .special import SpecialVocab, forget_parsed, read_json, read_tokenizer_json, release_freed_memory
from .spm import load_sentencepiece
from .writer import KVWriter
from ..names import Keys

log = logging.getLogger(__name__)

# gguf TokenType / the converter's SentencePieceTokenTypes (same numbers)
NORMAL, UNKNOWN, CONTROL, USER_DEFINED, UNUSED, BYTE = 1, 2, 3, 4, 5, 6

MODEL = "tokenizer.ggml.model"
PRE = "tokenizer.ggml.pre"
TOKENS = "tokenizer.ggml.tokens"
SCORES = "tokenizer.ggml.scores"
TOKEN_TYPE = "tokenizer.ggml.token_type"
ADD_SPACE_PREFIX = "tokenizer.ggml.add_space_prefix"
ADD_BOS = "tokenizer.ggml.add_bos_token"

_SPIECE_SPACE = "\u2581"  # '▁', SentencePiece's visible space


def looks_special(token: str) -> bool:
    """TextModel.does_token_look_special: added tokens some models forget to mark special."""
    return (token in ("<pad>", "<mask>", "<2mass>", "[@BOS@]")
            or (token.startswith("<|") and token.endswith("|>"))
            or (token.startswith("<｜") and token.endswith("｜>"))
            or (token.startswith("<unused") and token.endswith(">")))


# -- SentencePiece (tokenizer.model) ------------------------------------------------------------------------

def sentencepiece_tokens(model_dir: Path, hparams: dict) -> tuple[list[str], list[float], list[int]]:
    """_create_vocab_sentencepiece: pieces, scores and types from tokenizer.model, overridden by
    added_tokens.json and tokenizer_config.json's added_tokens_decoder, sized to the model's vocab."""
    path = model_dir / "tokenizer.model"
    if not path.is_file():
        raise FileNotFoundError(f"File not found: {path}")
    sp = load_sentencepiece(path, "{path} is not a SentencePiece model ({error}); the converter fails on it too")

    vocab_size = _first_hparam(hparams, ("vocab_size_per_layer_input", "vocab_size")) or sp.vocab_size()
    tokens = [f"[PAD{i}]" for i in range(vocab_size)]
    scores = [-10000.0] * vocab_size
    types = [UNUSED] * vocab_size
    if sp.vocab_size() > vocab_size:
        log.warning("%s: pieces from id %d on are past the model's vocab_size %d, ignored", path, vocab_size,
                    vocab_size)
    ids = list(range(min(sp.vocab_size(), vocab_size)))  # asked in one call each: a vocabulary is 100k+ pieces
    tokens[:len(ids)] = sp.IdToPiece(ids)
    scores[:len(ids)] = sp.GetScore(ids)
    types[:len(ids)] = [UNKNOWN if unknown else CONTROL if control else UNUSED if unused else BYTE if byte else NORMAL
                        for unknown, control, unused, byte in zip(sp.IsUnknown(ids), sp.IsControl(ids),
                                                                  sp.IsUnused(ids), sp.IsByte(ids))]

    added_path = model_dir / "added_tokens.json"
    if added_path.is_file():
        for content, tid in read_json(added_path).items():
            if tid >= vocab_size:
                log.warning("%s: token id %d is past vocab_size %d, ignored", added_path, tid, vocab_size)
                continue
            tokens[tid], scores[tid], types[tid] = content, -1000.0, USER_DEFINED

    cfg_path = model_dir / "tokenizer_config.json"
    if cfg_path.is_file():
        for key, data in read_json(cfg_path).get("added_tokens_decoder", {}).items():
            tid = int(key)
            content: str = data["content"]
            if tid >= vocab_size:
                log.warning("%s: token id %d is past vocab_size %d, ignored", cfg_path, tid, vocab_size)
                continue
            if data.get("special") or looks_special(content):
                types[tid] = CONTROL
            else:
                content = content.replace(_SPIECE_SPACE, " ")  # user-defined tokens are stored pre-normalized
                types[tid] = USER_DEFINED
            tokens[tid], scores[tid] = content, -1000.0
    # (the converter's padding past len(tokens) never triggers: the lists already have vocab_size entries)
    return tokens, scores, types


def sentencepiece_vocab(model_dir: Path, hparams: dict) -> list[KV]:
    """_set_vocab_sentencepiece. FileNotFoundError (as the converter) when there is no tokenizer.model."""
    model_dir = Path(model_dir)
    tokens, scores, types = sentencepiece_tokens(model_dir, hparams)
    w = KVWriter()
    _write_scored_vocab(w, tokens, scores, types)
    SpecialVocab(model_dir, n_vocab=len(tokens)).write(w)
    return w.kvs()


# -- SentencePiece-style BPE from tokenizer.json (gguf-py LlamaHfVocab) ----------------------------------------

class NotLlamaHfTokenizer(TokenizerError):
    """tokenizer.json is not a SentencePiece-style (byte-fallback) BPE; `is_llama3` tells which refusal."""

    def __init__(self, message: str, is_llama3: bool):
        super().__init__(message)
        self.is_llama3 = is_llama3


def llama_hf_tokens(model_dir: Path) -> tuple[list[str], list[float], list[int]]:
    """LlamaHfVocab.all_tokens: the base vocabulary in id order, then the added tokens past it."""
    path = model_dir / "tokenizer.json"
    if not path.is_file():
        raise FileNotFoundError(f"File not found: {path}")
    tj = read_tokenizer_json(path)
    model = tj.get("model")
    if not isinstance(model, dict) or "type" not in model:
        # gguf-py's LlamaHfVocab dies on this with a KeyError, and so does the converter
        raise TokenizerError(f"{path}: 'model' has no 'type' (an old tokenizer.json format); the converter fails "
                             "on it (KeyError in LlamaHfVocab): re-save the tokenizer with a recent `tokenizers`")
    if model["type"] == "BPE" and model.get("ignore_merges", False) and not model.get("byte_fallback", True):
        raise NotLlamaHfTokenizer(f"{path}: a Llama-3 style BPE (ignore_merges, no byte fallback)", True)
    if model["type"] != "BPE" or not model.get("byte_fallback", False):
        raise NotLlamaHfTokenizer(f"{path}: not a byte-fallback BPE", False)
    if "decoder" not in tj or (tj["decoder"] is not None and "type" not in tj["decoder"]):
        raise TokenizerError(f"{path}: no decoder type; the converter fails on it (KeyError in LlamaHfVocab)")
    if tj["decoder"] is None or tj["decoder"]["type"] != "Sequence":
        # (a null decoder makes the converter's check raise TypeError, which it also takes as "not Llama BPE")
        raise NotLlamaHfTokenizer(f"{path}: a byte-fallback BPE without a Sequence decoder", False)

    tok = AutoTokenizerView(model_dir)
    base = tok.vocab_size
    added = [(content, tid) for content, tid in sorted(tok.get_added_vocab().items(), key=lambda x: x[1])
             if tid >= base]
    vocab = tok.get_vocab()
    specials = {t: vocab[t] for t in tok.all_special_tokens}  # KeyError is impossible: specials are added
    special_ids = set(tok.all_special_ids)
    reverse = {tid: t for t, tid in vocab.items()}
    added_ids = {tid for _, tid in added}

    tokens: list[str] = []
    types: list[int] = []
    for tid in range(base):
        if tid in added_ids:
            continue
        if tid not in reverse:
            raise TokenizerError(f"{path}: the vocabulary has no token with id {tid}; the converter fails on it")
        text = reverse[tid]
        tokens.append(text)
        types.append(_llama_hf_type(tid, text, special_ids))
    for text, _ in added:
        tokens.append(text)
        types.append(_llama_hf_type(specials[text], "", special_ids) if text in specials else USER_DEFINED)
    return tokens, [-1000.0] * len(tokens), types


def _llama_hf_type(tid: int, text: str, special_ids: set[int]) -> int:
    if re.fullmatch(r"<0x[0-9A-Fa-f]{2}>", text):
        return BYTE
    return CONTROL if tid in special_ids else NORMAL


def llama_hf_vocab(model_dir: Path, hparams: dict) -> list[KV]:
    """_set_vocab_llama_hf. FileNotFoundError without tokenizer.json; NotLlamaHfTokenizer (the converter's
    TypeError / FileNotFoundError) when tokenizer.json is another kind of tokenizer."""
    model_dir = Path(model_dir)
    tokens, scores, types = llama_hf_tokens(model_dir)
    w = KVWriter()
    _write_scored_vocab(w, tokens, scores, types)
    SpecialVocab(model_dir, n_vocab=len(tokens)).write(w)
    return w.kvs()


def _write_scored_vocab(w: KVWriter, tokens, scores, types) -> None:
    w.add_string(MODEL, "llama")
    w.add_string(PRE, "default")
    w.add_array(TOKENS, tokens)
    w.add_array(SCORES, [float(s) for s in scores])
    w.add_array(TOKEN_TYPE, types)


# -- byte-level BPE (gpt2) -------------------------------------------------------------------------------------

def probe_digest(tok: AutoTokenizerView) -> str:
    """sha256 of str(ids) for the converter's probe text, special tokens added as the tokenizer adds them."""
    return hashlib.sha256(str(tok.encode(PRE_TOKENIZER_PROBE)).encode()).hexdigest()


def get_vocab_base_pre(model_dir: Path) -> str:
    """tokenizer.ggml.pre for a BPE tokenizer; UnknownPreTokenizer when the converter does not know it."""
    model_dir = Path(model_dir)
    return pre_tokenizer_named(probe_digest(AutoTokenizerView(model_dir)), str(model_dir / "tokenizer.json"))


def bpe_tokens(model_dir: Path, hparams: dict) -> tuple[list[str], list[int], str]:
    """get_vocab_base: (tokens, token types, pre-tokenizer name) for GPT-2 BPE and WordPiece vocabs."""
    tok = AutoTokenizerView(model_dir, hparams)
    vocab = tok.get_vocab()
    vocab_size = hparams.get("vocab_size", len(vocab))
    if vocab and max(vocab.values()) >= vocab_size:
        raise TokenizerError(f"{model_dir / 'tokenizer.json'}: token id {max(vocab.values())} does not fit the "
                             f"model's vocab_size {vocab_size} (config.json); the converter refuses this too")
    pre = pre_tokenizer_named(probe_digest(tok), str(model_dir / "tokenizer.json"))
    reverse = {tid: t for t, tid in vocab.items()}
    added = tok.get_added_vocab()
    decoder = tok.added_tokens_decoder
    tokens: list[str] = []
    types: list[int] = []
    for tid in range(vocab_size):
        if tid not in reverse:
            tokens.append(f"[PAD{tid}]")
            types.append(UNUSED)
            continue
        token = reverse[tid]
        if token in added:
            # llama.cpp takes CONTROL and USER_DEFINED tokens as already normalized: normalize them here
            if not decoder[tid].normalized:
                token = tok.decode(tok.encode(token, add_special_tokens=False))
            if decoder[tid].special or looks_special(token):
                types.append(CONTROL)
            else:
                token = token.replace(_SPIECE_SPACE, " ")
                types.append(USER_DEFINED)
        else:
            types.append(NORMAL)
        tokens.append(token)
    return tokens, types, pre


def gpt2_vocab(model_dir: Path, hparams: dict) -> list[KV]:
    """_set_vocab_gpt2: model gpt2, the pre-tokenizer name, tokens, types, then merges and special tokens."""
    model_dir = Path(model_dir)
    # SpecialVocab's parse of tokenizer.json first, dropped before `tokenizers` builds its own vocabulary from the
    # same file, and that freed before the header is encoded: the three are never held at once (a 128k
    # vocabulary's open peaks at 290 MB instead of 350)
    special = SpecialVocab(model_dir, load_merges=True)
    forget_parsed(collect=False)
    tokens, types, pre = bpe_tokens(model_dir, hparams)
    release_freed_memory()
    w = KVWriter()
    w.add_string(MODEL, "gpt2")
    w.add_string(PRE, pre)
    w.add_array(TOKENS, tokens)
    w.add_array(TOKEN_TYPE, types)
    special.write(w)
    return w.kvs()


def special_vocab(model_dir: Path, *, load_merges: bool = False, n_vocab: int | None = None,
                  special_token_types=None) -> list[KV]:
    """gguf.SpecialVocab(model_dir, ...).add_to_gguf alone (merges, special ids, add flags, chat template)."""
    return SpecialVocab(Path(model_dir), load_merges=load_merges, special_token_types=special_token_types,
                        n_vocab=n_vocab).kvs()


# -- PLaMo (tokenizer.jsonl) -------------------------------------------------------------------------------------

_PLAMO_TYPES = {"UNKNOWN": UNKNOWN, "CONTROL": CONTROL, "BYTE": BYTE}
_PLAMO_LINE = Rule("[token, score, type, ...] (a string, a number, a string)",
                   lambda v: isinstance(v, list) and len(v) >= 2 and STRING.ok(v[0]) and NUMBER.ok(v[1])
                   and (len(v) < 3 or STRING.ok(v[2])))
_PLAMO_IDS = (("bos_token", "tokenizer.ggml.bos_token_id"), ("eos_token", "tokenizer.ggml.eos_token_id"),
              ("pad_token", "tokenizer.ggml.padding_token_id"), ("sep_token", "tokenizer.ggml.seperator_token_id"),
              ("unk_token", "tokenizer.ggml.unknown_token_id"))


def plamo_vocab(model_dir: Path, hparams: dict) -> list[KV]:
    """_set_vocab_plamo (PLaMo 2): tokenizer.jsonl lines [token, score, type?, ...], padded to vocab_size;
    special ids found by content from tokenizer_config.json; EOT fixed at 4 (<|plamo:op|>); no space prefix."""
    import json

    model_dir = Path(model_dir)
    path = model_dir / "tokenizer.jsonl"
    cfg_path = model_dir / "tokenizer_config.json"
    if not path.is_file():
        raise FileNotFoundError(f"PLaMo tokenizer file not found: {path}")
    if not cfg_path.is_file():
        raise TokenizerError(f"{cfg_path} is missing; the converter needs it beside tokenizer.jsonl")
    cfg = read_json(cfg_path)
    tokens: list[str] = []
    scores: list[float] = []
    types: list[int] = []
    with open(path, "rb") as f:
        for n, raw in enumerate(f, 1):
            try:
                line = raw.decode("utf-8")
                entry = json.loads(line) if line.strip() else None
            except (ValueError, RecursionError) as e:  # ValueError: bad UTF-8 or JSON
                raise TokenizerError(f"{path}:{n}: not a line of JSON ({str(e)[:100]}); re-download the file") from e
            if entry is None:
                continue
            if not _PLAMO_LINE.ok(entry):
                raise TokenizerError(f"{path}:{n}: expected {_PLAMO_LINE.expect}, got {shown(entry)}")
            token, score, kind = entry[0], float(entry[1]), entry[2] if len(entry) > 2 else "NORMAL"
            tokens.append(token)
            scores.append(score)
            if kind in _PLAMO_TYPES:
                types.append(_PLAMO_TYPES[kind])
            else:
                types.append(CONTROL if token.startswith("<|plamo:") and token.endswith("|>") else NORMAL)
    vocab_size = hparams["vocab_size"]
    for i in range(1, vocab_size - len(tokens) + 1):
        tokens.append(f"[PAD{i}]")
        scores.append(-1000.0)
        types.append(UNUSED)

    w = KVWriter()
    w.add_string(MODEL, "plamo2")
    w.add_string(PRE, "default")
    w.add_array(TOKENS, tokens)
    w.add_array(SCORES, scores)
    w.add_array(TOKEN_TYPE, types)
    position = {}
    for i, t in enumerate(tokens):
        position.setdefault(t, i)  # the first occurrence, as list.index finds it
    for name, key in _PLAMO_IDS:
        if cfg.get(name) is not None:
            if not isinstance(cfg[name], str) or cfg[name] not in position:
                raise TokenizerError(f"{cfg_path}: {name} {cfg[name]!r} is not in {path}; the converter fails on it")
            w.add_uint32(key, position[cfg[name]])
    w.add_uint32(Keys.Tokenizer.EOT_ID, 4)
    w.add_bool(ADD_SPACE_PREFIX, False)
    return w.kvs()


def plamo3_vocab(model_dir: Path, hparams: dict) -> list[KV]:
    """Plamo3Model.set_vocab: plamo_vocab, then tokenizer_config's chat_template, overridden by
    chat_template.jinja when present."""
    from .special import write_chat_template

    model_dir = Path(model_dir)
    w = KVWriter()
    w.extend(plamo_vocab(model_dir, hparams))
    cfg = read_json(model_dir / "tokenizer_config.json")
    template = cfg.get("chat_template")
    jinja = model_dir / "chat_template.jinja"
    if jinja.is_file():
        template = jinja.read_text(encoding="utf-8")
    if template:
        write_chat_template(w, template)
    return w.kvs()


# -- ChatGLM3 (tokenizer.model through the release's tokenization_chatglm.py) -------------------------------------

# the special tokens ChatGLM3's tokenizer numbers after the SentencePiece pieces, in its order
CHATGLM3_SPECIALS = ("[MASK]", "[gMASK]", "[sMASK]", "sop", "eop", "<|system|>", "<|user|>", "<|assistant|>",
                     "<|observation|>")


def chatglm3_vocab(model_dir: Path, hparams: dict) -> list[KV]:
    """ChatGLMModel.set_vocab_chatglm3: every id below padded_vocab_size as the release's tokenizer names it (its
    SentencePiece piece; "" for the bos, eos and pad (= unk) ids, which ids 0, 1, 2 then overwrite as <unk>, <bos>,
    <eos>; the nine specials after the pieces; "" past them, written [PAD<id>]), with the piece's score and type."""
    model_dir = Path(model_dir)
    path = model_dir / "tokenizer.model"
    if not path.is_file():
        raise TokenizerError(f"{path} is missing: ChatGLM3's vocabulary is its SentencePiece tokenizer.model")
    sp = load_sentencepiece(path, "{path} is not a SentencePiece model ({error}); the converter fails on it too")
    n_pieces = sp.vocab_size()
    vocab_size = hparams.get("padded_vocab_size")
    if not isinstance(vocab_size, int) or vocab_size < n_pieces + len(CHATGLM3_SPECIALS):
        raise TokenizerError(f"{model_dir / 'config.json'}: padded_vocab_size {vocab_size!r} must be at least the "
                             f"{n_pieces} pieces of {path.name} plus ChatGLM3's {len(CHATGLM3_SPECIALS)} special "
                             f"tokens (the converter sizes the vocabulary by it)")
    blank = {sp.bos_id(), sp.eos_id(), sp.unk_id()}
    ids = list(range(n_pieces))
    pieces = ["" if i in blank else piece for i, piece in zip(ids, sp.IdToPiece(ids))]
    for i, piece in enumerate(("<unk>", "<bos>", "<eos>")[:n_pieces]):
        pieces[i] = piece
    scores = [score if piece else 0.0 for piece, score in zip(pieces, sp.GetScore(ids))]
    types = [UNKNOWN if unknown else CONTROL if control else UNUSED if unused else BYTE if byte else NORMAL
             for unknown, control, unused, byte in zip(sp.IsUnknown(ids), sp.IsControl(ids), sp.IsUnused(ids),
                                                       sp.IsByte(ids))]
    past = range(n_pieces + len(CHATGLM3_SPECIALS), vocab_size)
    pieces += list(CHATGLM3_SPECIALS) + [f"[PAD{i}]" for i in past]
    scores += [0.0] * (vocab_size - n_pieces)
    types += [CONTROL] * len(CHATGLM3_SPECIALS) + [UNUSED] * len(past)
    w = KVWriter()
    w.add_string(MODEL, "llama")
    w.add_string(PRE, "chatglm-spm")
    w.add_array(TOKENS, pieces)
    w.add_array(SCORES, [float(s) for s in scores])
    w.add_array(TOKEN_TYPE, types)
    SpecialVocab(model_dir, n_vocab=len(pieces)).write(w)
    return w.kvs()


# -- LlamaModel.set_vocab ----------------------------------------------------------------------------------------

def llama_vocab(model_dir: Path, hparams: dict) -> list[KV]:
    """LlamaModel.set_vocab (conversion/llama.py): tokenizer.model, else a SentencePiece-style
    tokenizer.json, else byte-level BPE; add_space_prefix from tokenizer_config.json first; CodeLlama's
    EOT (vocab 32016) and small Granite's add_bos = false (vocab 49152) after."""
    model_dir = Path(model_dir)
    if (model_dir / "tekken.json").is_file() and not (model_dir / "tokenizer.json").is_file():
        # Voxtral's release: the converter reads tekken.json through mistral_common, as for Mistral's own format
        from .mistral import mistral_vocab
        return mistral_vocab(model_dir, "llama", n_vocab=hparams.get("vocab_size"), mistral_format=False)
    w = KVWriter()
    cfg_path = model_dir / "tokenizer_config.json"
    if cfg_path.is_file():
        cfg = read_json(cfg_path)
        if (prefix := cfg.get("add_prefix_space")) is not None:
            if not isinstance(prefix, bool):
                raise TokenizerError(f"{cfg_path}: add_prefix_space must be true or false, not {prefix!r}")
            w.add_bool(ADD_SPACE_PREFIX, prefix)
        if cfg.get("tokenizer_class") == "HybridDNATokenizer":
            raise TokenizerError(f"{cfg_path}: HybridDNATokenizer needs remote code; hfview does not emulate it")
    try:
        w.extend(sentencepiece_vocab(model_dir, hparams))
    except FileNotFoundError:
        try:
            w.extend(llama_hf_vocab(model_dir, hparams))
        except (FileNotFoundError, NotLlamaHfTokenizer):
            w.extend(gpt2_vocab(model_dir, hparams))  # Llama 3

    vocab_size = hparams.get("vocab_size", 32000)
    if vocab_size == 32016:  # CodeLlama: infill tokens; only EOT has a GGUF key
        sv = SpecialVocab(model_dir, load_merges=False, special_token_types=("prefix", "suffix", "middle", "eot"))
        for typ, tid in (("prefix", 32007), ("suffix", 32008), ("middle", 32009), ("eot", 32010)):
            sv.set_special_token(typ, tid)
        sv.write(w)
    if vocab_size == 49152:  # small Granite models
        w.add_bool(ADD_BOS, False)
    return w.kvs()


def _first_hparam(hparams: dict, keys) -> object:
    return next((hparams[k] for k in keys if k in hparams), None)

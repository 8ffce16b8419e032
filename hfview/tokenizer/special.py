"""Special tokens, merges, chat template and normalizer flags, read as the converter's OWN gguf-py
`SpecialVocab` reads them (not PyPI gguf's, which differs).

Sources, in the order the converter consults them:
  1. tokenizer.json: BPE merges (when asked for), the normalizer (lowercase / strip-accents flags), and the
     post-processor, which decides add_bos/add_eos/add_sep and may name the BOS/EOS/CLS/SEP tokens;
  2. tokenizer_config.json: chat template (else chat_template.jinja / chat_template.json), add_<type>_token
     flags, and <type>_token contents, resolved to ids through tokenizer.json's `added_tokens` only;
  3. config.json (raw, not AutoConfig): <type>_token_id, at the root or in text_config;
  4. merges.txt, when merges were asked for and tokenizer.json had none.
For each token type the first id found wins.
"""
from __future__ import annotations

import functools
import gc
import json
import logging
from pathlib import Path
from string import ascii_letters, digits
from typing import Any

from hfview.errors import shown
from hfview.shapes import (BOOL, ID, LIST, OBJECT, STRING, U32_MAX, Rule, any_of, check, list_of, object_of)

from .errors import TokenizerError
from .writer import KVWriter
from ..names import Keys

log = logging.getLogger(__name__)

DEFAULT_TYPES = ("bos", "eos", "unk", "sep", "pad", "cls", "mask")

# GGUFWriter has an add_<type>_token_id method only for these; other types are skipped with a warning.
_ID_KEYS = {
    "bos": "tokenizer.ggml.bos_token_id", "eos": "tokenizer.ggml.eos_token_id",
    "unk": "tokenizer.ggml.unknown_token_id", "sep": "tokenizer.ggml.seperator_token_id",
    "pad": "tokenizer.ggml.padding_token_id", "mask": "tokenizer.ggml.mask_token_id",
    "eot": "tokenizer.ggml.eot_token_id", "eom": "tokenizer.ggml.eom_token_id",
}
# ... and add_add_<type>_token only for these.
_ADD_KEYS = {"bos": "tokenizer.ggml.add_bos_token", "eos": "tokenizer.ggml.add_eos_token",
             "sep": "tokenizer.ggml.add_sep_token"}

CHAT_TEMPLATE = "tokenizer.chat_template"


# -- what the tokenizer files must look like where hfview reads them (other fields are free) -------------------

_TOKEN_FLAGS = ("single_word", "lstrip", "rstrip", "normalized", "special")


def _added_token(extra: tuple[str, ...] = (), required: tuple[str, ...] = ()) -> Rule:
    """An added token as tokenizers' AddedToken takes it: content and flags, plus `extra` keys."""
    allowed, needed = {"content", *_TOKEN_FLAGS, *extra}, {"content", *required}
    return object_of({"content": STRING, **{k: BOOL for k in _TOKEN_FLAGS}, "id": ID}).replace_test(
        f"an added token: an object with {', '.join(sorted(needed))} and the flags {', '.join(_TOKEN_FLAGS)}",
        lambda v: isinstance(v, dict) and needed <= set(v) <= allowed)


ADDED_TOKEN = _added_token(("__type", "id"))  # any file's, as the AddedToken of hf_auto takes it
TOKEN = any_of(STRING, ADDED_TOKEN).or_null()
_PAIR = Rule("a [token, id] pair", lambda v: isinstance(v, list) and len(v) == 2 and STRING.ok(v[0]) and ID.ok(v[1]))
_PIECE = object_of({"SpecialToken": object_of({"id": STRING}), "Sequence": object_of({"id": STRING})})
_NORMALIZER = object_of({"type": STRING, "lowercase": BOOL, "strip_accents": BOOL.or_null()})
_NORMALIZER.within["normalizers"] = list_of(_NORMALIZER)
_POST = object_of({"type": STRING, "cls": _PAIR, "sep": _PAIR, "single": list_of(_PIECE), "pair": list_of(_PIECE)})
_POST.within["processors"] = list_of(_POST)
_TEMPLATES = any_of(STRING, list_of(object_of({"name": STRING, "template": STRING}))).or_null()

FILE_SHAPES: dict[str, Rule] = {
    "tokenizer.json": object_of({
        "model": object_of({"type": STRING, "vocab": any_of(OBJECT, LIST), "merges": LIST,
                            "byte_fallback": BOOL.or_null(), "ignore_merges": BOOL.or_null()}).or_null(),
        "added_tokens": list_of(_added_token(("id",), ("id",))),
        "normalizer": _NORMALIZER.or_null(), "post_processor": _POST.or_null(),
        "decoder": object_of({"type": STRING}).or_null()}),
    "tokenizer_config.json": object_of({
        "added_tokens_decoder": object_of(values=ADDED_TOKEN).replace_test(
            "an object from token ids to added tokens",
            lambda v: isinstance(v, dict) and all(k.isdecimal() and int(k) <= U32_MAX for k in v)),
        **{f"{t}_token": TOKEN for t in ("bos", "eos", "unk", "sep", "pad", "cls", "mask", "eot", "eom")},
        "additional_special_tokens": list_of(TOKEN).or_null(),
        "extra_special_tokens": any_of(list_of(TOKEN), object_of(values=TOKEN)).or_null(),
        **{k: BOOL.or_null() for k in ("add_bos_token", "add_eos_token", "add_prefix_space", "legacy",
                                       "clean_up_tokenization_spaces", "split_special_tokens", "trim_offsets")},
        "chat_template": _TEMPLATES, "tokenizer_class": STRING.or_null()}),
    "special_tokens_map.json": object_of(values=any_of(TOKEN, list_of(TOKEN))),
    "added_tokens.json": object_of(values=ID),
    "chat_template.json": object_of({"chat_template": _TEMPLATES}),
    "generation_config.json": object_of({"eos_token_id": any_of(ID, list_of(ID)).or_null()}),
    "config.json": object_of({"text_config": OBJECT, "model_type": STRING.or_null(), "tokenizer_class": STRING.or_null()}),
}


# whether a tokenizer-side file was parsed since the last collection: only then can what was built from it (the
# `tokenizers` objects, in reference cycles) be waiting for one (a vocabulary kept by hfview.vocab_cache parses none)
_parsed_since_collect = False


def read_json(path: Path) -> Any:
    """A tokenizer-side JSON file, parsed and checked against its FILE_SHAPES entry: a malformed one is a
    TokenizerError naming the file and the field, never an exception from deep inside a reader."""
    global _parsed_since_collect
    _parsed_since_collect = True
    path = Path(path)
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
    except OSError as e:
        raise TokenizerError(f"cannot read {path}: {e.strerror}") from e
    except (ValueError, RecursionError) as e:  # ValueError: bad JSON, bad UTF-8, a 5000-digit number
        raise TokenizerError(f"invalid JSON in {path}: {str(e)[:200]}; the converter cannot read it either") from e
    if (rule := FILE_SHAPES.get(path.name)) is not None:
        check(data, rule, "", lambda where, value, r: TokenizerError(
            f"{path}: {where or 'the file'} is {shown(value)}; expected {r.expect}. Re-download the file"))
    return data


def read_tokenizer_json(path: Path) -> dict:
    """tokenizer.json parsed once per file version (several routines read it; Llama-3's is 9 MB).
    The result is shared: treat it as read-only."""
    st = path.stat()
    return _parsed_json(str(path), st.st_mtime_ns, st.st_size)


@functools.lru_cache(maxsize=2)
def _parsed_json(path: str, _mtime_ns: int, _size: int) -> Any:
    return read_json(Path(path))


def forget_parsed(*, collect: bool = True) -> None:
    """Drop the parsed tokenizer.json files once a checkpoint's header is built, and hand the memory freed with
    them (and with the `tokenizers` objects built from them) back to the OS: glibc's allocator keeps it
    otherwise, ~200 MB of RSS for a 128k vocabulary held while llama.cpp fills the model's buffers."""
    _parsed_json.cache_clear()
    release_freed_memory(collect=collect)


def release_freed_memory(*, collect: bool = False) -> None:
    """Hand the memory glibc's allocator holds free back to the OS, so that the next large step does not start on
    top of it; with `collect`, first collect what is in reference cycles (the `tokenizers` objects). A collection
    costs a pass over every live object (a test process with torch loaded: ~0.3 s; hfview's imports alone: 0.04 s),
    so only once per open, and only where a tokenizer file was parsed since the last."""
    global _parsed_since_collect
    if collect and _parsed_since_collect:
        _parsed_since_collect = False
        gc.collect()
    try:
        import ctypes

        ctypes.CDLL(None).malloc_trim(0)
    except (OSError, AttributeError):  # not glibc: its allocator decides
        pass


class SpecialVocab:
    """What gguf-py's SpecialVocab collects from a model directory; `write` emits it as GGUF keys."""

    def __init__(self, model_dir: Path, load_merges: bool = False, special_token_types=None,
                 n_vocab: int | None = None):
        self.model_dir = Path(model_dir)
        self.load_merges = load_merges
        self.n_vocab = n_vocab
        self.types: tuple[str, ...] = tuple(special_token_types) if special_token_types is not None \
            else DEFAULT_TYPES
        self.merges: list[str] = []
        self.special_token_ids: dict[str, int] = {}
        self.add_special_token: dict[str, bool] = {}
        self.chat_template: str | list | None = None
        self.normalizer_lowercase: bool | None = None
        self.normalizer_strip_accents: bool | None = None
        self._from_tokenizer_files()
        self._from_config_json()
        if self.load_merges and not self.merges:
            self._merges_from_txt()

    # -- ids ---------------------------------------------------------------------------------------------

    def set_special_token(self, typ: str, tid: Any) -> None:
        """First id wins; non-integers are ignored; ids past n_vocab are skipped (as the converter does)."""
        if not isinstance(tid, int):  # bool passes too, as in the converter
            return
        if tid < 0:
            raise TokenizerError(f"invalid value for special token type {typ}: {tid} (in {self.model_dir})")
        if self.n_vocab is not None and tid >= self.n_vocab:
            log.warning("special token %s id %d is out of range (vocab %d), skipped", typ, tid, self.n_vocab)
            return
        self.special_token_ids.setdefault(typ, tid)

    # -- tokenizer.json + tokenizer_config.json ----------------------------------------------------------

    def _from_tokenizer_files(self) -> None:
        tok_path = self.model_dir / "tokenizer.json"
        tokenizer = read_tokenizer_json(tok_path) if tok_path.is_file() else None
        added_tokens: Any = {}
        if tok_path.is_file():
            if self.load_merges:
                self._merges_from_tokenizer_json(tokenizer, tok_path)
            if normalizer := tokenizer.get("normalizer"):
                self._read_normalizer(normalizer)
            added_tokens = tokenizer.get("added_tokens", {})
        cfg_path = self.model_dir / "tokenizer_config.json"
        config = read_json(cfg_path) if cfg_path.is_file() else None
        if tokenizer:
            self._read_post_processor(tokenizer, config)
        if not config:
            return
        self._read_chat_template(config, cfg_path)
        for typ in self.types:
            flag = config.get(f"add_{typ}_token")
            if isinstance(flag, bool):
                # the post-processor's verdict, when it gave one, wins over the config flag
                self.add_special_token.setdefault(typ, flag)
            entry = config.get(f"{typ}_token")
            content = entry.get("content") if isinstance(entry, dict) else entry
            if not isinstance(content, str):
                continue
            # only tokenizer.json's added_tokens are searched (the first with that content)
            tid = next((t.get("id") for t in added_tokens if t.get("content") == content), None)
            self.set_special_token(typ, tid)

    def _merges_from_tokenizer_json(self, tokenizer: dict, path: Path) -> None:
        merges = tokenizer.get("model", {}).get("merges")
        if not isinstance(merges, list) or not merges:
            return
        first = merges[0]
        if isinstance(first, str):
            self.merges = merges
        elif isinstance(first, list) and len(first) == 2 and isinstance(first[0], str):
            # pair format (transformers >= 4.45); a space inside a part is written as chr(ord(" ") + 256)
            shifted = chr(ord(" ") + 256)
            try:  # pairs, as every release writes them (twice as fast as the general join below)
                self.merges = [f"{a.replace(' ', shifted)} {b.replace(' ', shifted)}" for a, b in merges]
            except (ValueError, TypeError, AttributeError):  # an entry of another length: joined as gguf-py does
                self.merges = [" ".join(part.replace(" ", shifted) for part in pair) for pair in merges]
        else:
            raise TokenizerError(f"{path}: unknown format of model.merges (first entry {first!r})")

    def _read_normalizer(self, normalizer: dict) -> None:
        kind = normalizer.get("type")
        if kind == "Lowercase":
            self.normalizer_lowercase = True
        elif kind == "StripAccents":
            self.normalizer_strip_accents = True
        elif kind == "BertNormalizer":
            if "lowercase" in normalizer:
                self.normalizer_lowercase = normalizer["lowercase"]
            if "strip_accents" in normalizer:
                self.normalizer_strip_accents = normalizer["strip_accents"]
        elif kind == "Sequence":
            for inner in normalizer.get("normalizers", []):
                self._read_normalizer(inner)

    def _read_post_processor(self, tokenizer: dict, config: dict | None) -> None:
        """add_bos/add_eos/add_sep from tokenizer.json's post-processor. Like the converter, this fills in
        missing bos/eos/cls/sep/eot/eom token names in (our copy of) the tokenizer config as it goes."""
        cfg = config or {}
        bos, cls, eos, sep = (cfg.get(k) for k in ("bos_token", "cls_token", "eos_token", "sep_token"))
        if not bos and cls and config:
            config["bos_token"] = bos = cls
        if not eos and sep and config:
            config["eos_token"] = eos = sep
        post = tokenizer.get("post_processor")
        if not post:
            return
        for proc in post.get("processors", [post]):
            kind = proc.get("type")
            if kind == "ByteLevel":
                self.add_special_token.setdefault("bos", False)
                self.add_special_token.setdefault("eos", False)
            elif kind == "RobertaProcessing":
                self.add_special_token.update(bos=True, eos=True, sep=True)
                if not cls and config:
                    cls = proc.get("cls", [bos])[0]
                    config["cls_token"] = cls
                if not sep and config:
                    sep = proc.get("sep", [eos])[0]
                    config["sep_token"] = sep
            elif kind == "TemplateProcessing":
                bos, cls, eos, sep = self._read_template(proc, config, bos, cls, eos, sep)

    def _read_template(self, proc: dict, config: dict | None, bos, cls, eos, sep):
        """A crude reading of TemplateProcessing (single and pair), faithful to the converter's."""
        single = proc.get("single", [])
        pair = proc.get("pair", [])
        first = last = None
        if len(single) > 1:
            if first := single[0].get("SpecialToken", {}).get("id"):
                if not config:
                    bos = first
                elif first not in (bos, cls):
                    if not bos:
                        config["bos_token"] = bos = first
                    if not cls:
                        config["cls_token"] = cls = first
                self.add_special_token["bos"] = first in (bos, cls)
                if first not in (bos, cls):
                    log.warning("unknown leading special token %r in TemplateProcessing<single>", first)
            if last := single[-1].get("SpecialToken", {}).get("id"):
                if not config:
                    eos = last
                elif last != eos:
                    # the config's EOS is kept as EOT (else EOM) and the template's last token becomes EOS
                    if "eot" not in self.types:
                        self.types += ("eot",)
                        config["eot_token"] = eos
                    elif "eom" not in self.types:
                        self.types += ("eom",)
                        config["eom_token"] = eos
                    else:
                        log.warning("overriding EOS %r with %r without EOT/EOM fallback", eos, last)
                    config["eos_token"] = eos = last
                self.add_special_token["eos"] = last == eos
        if pair:
            start = 1 if first and pair[0].get("SpecialToken", {}).get("id") == first else 0
            stop = -1 if last and pair[-1].get("SpecialToken", {}).get("id") == last else None
            middle = pair[slice(start, stop)]
            if middle:
                seq_a = middle[0].get("Sequence", {}).get("id")
                seq_b = middle[-1].get("Sequence", {}).get("id")
                # "A [sep] [eos] B": separators between the two sequences
                if seq_a == "A" and seq_b == "B" and (between := middle[1:-1]):
                    add_sep = False
                    if entry := between[0].get("SpecialToken", {}).get("id"):
                        if entry in (sep, eos) and not last:
                            add_sep = True
                    if len(between) == 2:
                        if entry := between[1].get("SpecialToken", {}).get("id"):
                            if entry in (sep, eos):
                                add_sep = True
                    self.add_special_token["sep"] = add_sep
                    if add_sep and not sep and config:
                        config["sep_token"] = eos
        return bos, cls, eos, sep

    def _read_chat_template(self, config: dict, cfg_path: Path) -> None:
        fallback: str | list | None = None
        jinja = self.model_dir / "chat_template.jinja"
        as_json = self.model_dir / "chat_template.json"
        if jinja.is_file():
            fallback = jinja.read_text(encoding="utf-8")
            extra = list((self.model_dir / "additional_chat_templates").glob("*.jinja"))
            if extra:
                fallback = [{"name": "default", "template": fallback}] + [
                    {"name": p.stem, "template": p.read_text(encoding="utf-8")} for p in extra]
        elif as_json.is_file():
            fallback = read_json(as_json).get("chat_template")
        # tokenizer_config's own chat_template wins over the files
        template = config.get("chat_template", fallback)
        if template is None or isinstance(template, (str, list)):
            self.chat_template = template
        else:
            log.warning("%s: chat_template is neither a string nor a list; ignored", cfg_path)

    # -- config.json / merges.txt ------------------------------------------------------------------------

    def _from_config_json(self) -> None:
        path = self.model_dir / "config.json"
        if not path.is_file():
            return
        config = read_json(path)
        for typ in self.types:
            tid = config.get(f"{typ}_token_id")
            if tid is None and "text_config" in config:
                tid = config["text_config"].get(f"{typ}_token_id")
            self.set_special_token(typ, tid)

    def _merges_from_txt(self) -> None:
        path = self.model_dir / "merges.txt"
        if not path.is_file():
            return
        with open(path, encoding="utf-8") as f:  # universal newlines, split on "\n" only, like file iteration
            lines = f.read().split("\n")
        if lines and lines[0].strip().startswith("#"):
            lines = lines[1:]  # a "#version" header
        merges = []
        for line in lines:
            parts = line.strip().split(None, 3)
            if not parts:
                continue
            if len(parts) == 2:
                merges.append(f"{parts[0]} {parts[1]}")
            else:
                log.warning("%s: malformed merge line %r ignored", path, line)
        self.merges = merges

    # -- output ------------------------------------------------------------------------------------------

    def write(self, w: KVWriter) -> None:
        """SpecialVocab.add_to_gguf: merges, ids, add-flags, chat template, normalizer flags."""
        if self.merges:
            w.add_array(Keys.Tokenizer.MERGES, self.merges)
        elif self.load_merges:
            log.warning("merges were requested but none found; the vocab may not work")
        for typ, tid in self.special_token_ids.items():
            if typ in _ID_KEYS:
                w.add_uint32(_ID_KEYS[typ], tid)
        for typ, flag in self.add_special_token.items():
            if typ in _ADD_KEYS:
                w.add_bool(_ADD_KEYS[typ], flag)
        if self.chat_template is not None:
            write_chat_template(w, self.chat_template)
        if self.normalizer_lowercase is not None:
            w.add_bool(Keys.Tokenizer.NORMALIZER_LOWERCASE, self.normalizer_lowercase)
        if self.normalizer_strip_accents is not None:
            w.add_bool(Keys.Tokenizer.NORMALIZER_STRIP_ACCENTS, self.normalizer_strip_accents)

    def kvs(self) -> list:
        w = KVWriter()
        self.write(w)
        return w.kvs()


def write_chat_template(w: KVWriter, template: str | list | None) -> None:
    """GGUFWriter.add_chat_template: a string, or a list of {name, template} (named templates as
    tokenizer.chat_template.<name>, their names in tokenizer.chat_templates, 'default' as the template).

    The converter collects the names in a set, so its tokenizer.chat_templates order follows Python's
    string hashing (PYTHONHASHSEED) and can differ between two runs of the converter itself; we keep the
    first-seen order, which is one of the orders the converter can write."""
    if template is None:
        w.remove(CHAT_TEMPLATE)
        return
    if not isinstance(template, str):
        default = None
        names: list[str] = []
        for choice in template:
            name = "".join(c if c in ascii_letters + digits else "_" for c in choice.get("name", ""))
            body = choice.get("template")
            if name and body is not None:
                if name == "default":
                    default = body
                else:
                    if name not in names:
                        names.append(name)
                    w.add_string(f"{CHAT_TEMPLATE}.{name}", body)
        if names:
            w.add_array(Keys.Tokenizer.CHAT_TEMPLATES, names)
        if default is None:
            return
        template = default
    w.add_string(CHAT_TEMPLATE, template)

"""The tokenizer transformers' AutoTokenizer gives the converter, rebuilt over the `tokenizers` library.

The converter's BPE path (get_vocab_base, LlamaHfVocab) asks AutoTokenizer.from_pretrained(model_dir) for the
vocabulary, the added tokens with their flags, the special tokens, and the ids of a probe text. transformers
(5.24, pinned where the converter runs) builds that tokenizer in steps that change all of these:
  * the class: chosen from tokenizer_config.json's `tokenizer_class`, config.json's `model_type` and
    `tokenizer_class`, and tables in transformers (tokenizer/hf_classes.py, generated). The generic
    TokenizersBackend loads tokenizer.json as it is. A model-specific class rebuilds the pipeline around
    tokenizer.json's vocabulary and merges, which changes how text is split when tokenizer.json says
    otherwise: we rebuild as LlamaTokenizer, GPT2Tokenizer, Qwen2Tokenizer and GPTNeoXTokenizer do. Other
    model-specific classes get tokenizer.json as it is, which is right for released checkpoints (their
    tokenizer.json is what their class builds) but can differ for a hand-made or mismatched one.
  * add_bos_token/add_eos_token in tokenizer_config.json are ignored when tokenizer.json exists; the
    post-processor comes from tokenizer.json (a missing one becomes a template adding nothing).
  * added tokens: tokenizer_config.json's added_tokens_decoder when present (else the legacy
    special_tokens_map.json, added_tokens.json and tokenizer.json added_tokens) are re-added in id order,
    then every named special token (bos, eos, unk, sep, pad, cls, mask, model-specific *_token, extra
    special tokens) that is not an added token yet. Re-adding a token overwrites its flags.
We replay the same calls on a `tokenizers.Tokenizer`, so the library's own rules (ids of new tokens,
flag overwrites) apply unchanged.
"""
from __future__ import annotations

import fnmatch
from pathlib import Path
from typing import Any

from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, processors

from hfview.errors import shown

from . import hf_classes
from .errors import TokenizerError
from .special import ADDED_TOKEN, read_json, read_tokenizer_json

NAMED_SPECIAL = ("bos_token", "eos_token", "unk_token", "sep_token", "pad_token", "cls_token", "mask_token")
_GENERIC = ("TokenizersBackend", "PythonBackend", "PreTrainedTokenizerFast")


def _strip_fast(name: str | None) -> str | None:
    return name[:-4] if name and name.endswith("Fast") and name != "PreTrainedTokenizerFast" else name


def resolve_class(model_dir: Path, tokenizer_config: dict, config: dict) -> str:
    """The tokenizer class name AutoTokenizer.from_pretrained picks for a local checkpoint (generic ones
    reported as "TokenizersBackend"). `config` is config.json's top level (AutoTokenizer reads the model
    type of the outer config, not text_config's)."""
    model_type = config.get("model_type")
    declared = tokenizer_config.get("tokenizer_class") or config.get("tokenizer_class")
    registered = hf_classes.REGISTERED_CLASS.get(model_type) if model_type else None
    config_class = tokenizer_config.get("tokenizer_class")
    if tokenizer_config.get("auto_map") is not None:
        # A remote-code tokenizer. The converter does not pass trust_remote_code: transformers then uses a
        # local class when it has one (the declared class, else the model type's), and otherwise stops.
        if config_class and _known_class(config_class):
            chosen = _strip_fast(config_class)
            return "TokenizersBackend" if chosen in _GENERIC else chosen
        if registered is None:
            raise TokenizerError(
                f"{model_dir / 'tokenizer_config.json'}: auto_map names a remote-code tokenizer "
                f"({config_class or 'no local class'}); the converter cannot load it without trust_remote_code, "
                "and hfview does not run remote code")
        return _resolve_without_declared_class(config, registered)
    name_or_path = str(model_dir).lower()
    if any(fnmatch.fnmatch(name_or_path, p) for p in hf_classes.IDS_TO_TOKENIZERS_BACKEND):
        return "TokenizersBackend"
    if (declared is not None and declared.removesuffix("Fast") == "LlamaTokenizer"
            and (registered or "").removesuffix("Fast") != "MistralCommonBackend"
            and model_type not in hf_classes.INCORRECT_HUB_CLASS
            and _tokenizer_json_is_byte_level(model_dir)):
        return "TokenizersBackend"  # a Llama-3 style ByteLevel tokenizer.json declared as LlamaTokenizer
    if (declared is not None and registered is not None
            and registered.removesuffix("Fast") != declared.removesuffix("Fast")):
        registered = registered.removesuffix("Fast")
        if registered in _GENERIC + ("MistralCommonBackend",):
            return "TokenizersBackend"
        chosen = registered if model_type in hf_classes.INCORRECT_HUB_CLASS else declared
        chosen = _strip_fast(chosen)
        return "TokenizersBackend" if chosen in _GENERIC else chosen
    if config_class:
        chosen = _strip_fast(config_class)
        return "TokenizersBackend" if chosen in _GENERIC else chosen
    return _resolve_without_declared_class(config, registered)


def _resolve_without_declared_class(config: dict, registered: str | None) -> str:
    if config.get("tokenizer_class"):
        chosen = _strip_fast(config["tokenizer_class"])
        return "TokenizersBackend" if chosen in _GENERIC else chosen
    if registered and registered not in _GENERIC + ("MistralCommonBackend",):
        return registered.removesuffix("Fast")
    return "TokenizersBackend"


def _known_class(name: str) -> bool:
    """Whether transformers has a tokenizer class of this name (with or without "Fast")."""
    known = set(hf_classes.REGISTERED_CLASS.values()) | set(_GENERIC)
    return name in known or name.removesuffix("Fast") in known or f"{name}Fast" in known


def _tokenizer_json_is_byte_level(model_dir: Path) -> bool:
    path = model_dir / "tokenizer.json"
    # transformers looks for the quoted word anywhere in the file text
    return path.is_file() and '"ByteLevel"' in path.read_text(encoding="utf-8")


def _token(fields: dict, where: Path, **override) -> AddedToken:
    """An AddedToken from a file's object (special.ADDED_TOKEN describes what read_json lets through)."""
    if not ADDED_TOKEN.ok(fields):
        raise TokenizerError(f"{where}: {shown(fields)} is not {ADDED_TOKEN.expect}; re-download the file")
    return AddedToken(**{k: v for k, v in fields.items() if k not in ("__type", "id", *override)}, **override)


def _as_added_token(value: Any, where: Path) -> Any:
    """tokenizer_config values of the form {"__type": "AddedToken", ...} become AddedToken objects."""
    if isinstance(value, dict) and value.get("__type") == "AddedToken":
        return _token(value, where)
    if isinstance(value, list):
        return [_as_added_token(v, where) for v in value]
    if isinstance(value, dict):
        return {k: _as_added_token(v, where) for k, v in value.items()}
    return value


class AutoTokenizerView:
    """The parts of AutoTokenizer.from_pretrained(model_dir) the converter uses."""

    def __init__(self, model_dir: Path, hparams: dict | None = None):
        self.model_dir = Path(model_dir)
        tok_path = self.model_dir / "tokenizer.json"
        if not tok_path.is_file():
            raise TokenizerError(
                f"{tok_path} is missing: hfview reads BPE vocabularies from tokenizer.json only (the converter's "
                "AutoTokenizer could also convert a slow tokenizer's files, which hfview does not)")
        # first: a tokenizer.json the library cannot load is refused before any of its fields is read
        full = _load(tok_path)
        cfg_path = self.model_dir / "tokenizer_config.json"
        tokenizer_config = read_json(cfg_path) if cfg_path.is_file() else {}
        config_path = self.model_dir / "config.json"
        config = read_json(config_path) if config_path.is_file() else dict(hparams or {})
        self.class_name = resolve_class(self.model_dir, tokenizer_config, config)

        kwargs = self._init_kwargs(tokenizer_config, tok_path)
        self.backend = self._build_backend(tok_path, full, kwargs)
        self.clean_up_tokenization_spaces = bool(kwargs.get("clean_up_tokenization_spaces", False))
        self._set_special_tokens(kwargs)
        self.backend.encode_special_tokens = bool(kwargs.get("split_special_tokens", False))
        self._add_tokens(kwargs)
        if self.class_name == "Qwen2Tokenizer":
            # Qwen2Tokenizer re-adds its special tokens as special (normalized=False) after initialising
            self.backend.add_tokens([AddedToken(t, special=True) for t in self.all_special_tokens])
        if self.class_name == "GPTNeoXTokenizer":
            # GPTNeoXTokenizer replaces tokenizer.json's post-processor by its own (add_bos/add_eos off)
            self.backend.post_processor = None
        # transformers' encode() switches off truncation and padding baked into tokenizer.json
        self.backend.no_truncation()
        self.backend.no_padding()
        if self.backend.post_processor is None:
            # transformers' update_post_processor with add_bos_token = add_eos_token = False
            self.backend.post_processor = processors.TemplateProcessing(
                single="$A:0", pair="$A:0 $B:1", special_tokens=[])

    # -- from_pretrained's preparation of the init kwargs --------------------------------------------------

    def _init_kwargs(self, tokenizer_config: dict, tok_path: Path) -> dict:
        kw = {k: v for k, v in tokenizer_config.items() if k != "tokenizer_class"}
        # with a tokenizer.json, the post-processor in it decides; the config's flags are dropped
        kw.pop("add_bos_token", None)
        kw.pop("add_eos_token", None)
        if "additional_special_tokens" in kw and not kw.get("extra_special_tokens"):
            kw["extra_special_tokens"] = kw.pop("additional_special_tokens")
        model_specific = {k: kw.pop(k) for k in list(kw)
                          if k not in NAMED_SPECIAL and k.endswith("_token") and isinstance(kw[k], str)}
        if isinstance(kw.get("extra_special_tokens"), dict):
            model_specific.update(kw.pop("extra_special_tokens"))
        decoder: dict[int, AddedToken] = {}
        by_content: dict[str, AddedToken] = {}
        if "added_tokens_decoder" in kw:
            for idx, tok in kw["added_tokens_decoder"].items():
                tok = _token(tok, self.model_dir / "tokenizer_config.json")  # (read_json checked the shape)
                decoder[int(idx)] = tok
                by_content[str(tok)] = tok
        else:
            self._legacy_added_tokens(kw, decoder, by_content, tok_path)
        if "additional_special_tokens" in kw and "extra_special_tokens" not in kw:  # from special_tokens_map
            kw["extra_special_tokens"] = kw.pop("additional_special_tokens")
        kw["added_tokens_decoder"] = decoder
        if model_specific:
            kw["model_specific_special_tokens"] = model_specific
        kw = _as_added_token(kw, self.model_dir / "tokenizer_config.json")
        if by_content:
            for key in NAMED_SPECIAL:
                if kw.get(key) is not None:
                    kw[key] = by_content.get(str(kw[key]), kw[key])
        return kw

    def _legacy_added_tokens(self, kw: dict, decoder: dict, by_content: dict, tok_path: Path) -> None:
        """Without added_tokens_decoder in tokenizer_config: special_tokens_map.json, added_tokens.json and
        tokenizer.json's added_tokens, in that order."""
        stm_path = self.model_dir / "special_tokens_map.json"
        if stm_path.is_file():
            for key, value in read_json(stm_path).items():
                if isinstance(value, dict) and key != "extra_special_tokens":
                    value = _token(value, stm_path, special=True)
                elif key == "extra_special_tokens" and isinstance(value, list):
                    merged = list(kw.get("extra_special_tokens") or [])
                    for tok in value:
                        tok = _token(tok, stm_path, special=True) if isinstance(tok, dict) else tok
                        if tok not in merged:
                            merged.append(tok)
                    value = merged
                kw[key] = value
            if isinstance(kw.get("extra_special_tokens"), dict):
                kw.setdefault("model_specific_special_tokens", {}).update(kw.pop("extra_special_tokens"))
        at_path = self.model_dir / "added_tokens.json"
        if at_path.is_file():
            specials = {str(kw[k]) for k in NAMED_SPECIAL if kw.get(k)}
            specials.update(str(t) for t in (kw.get("extra_special_tokens") or []))
            for content, idx in read_json(at_path).items():
                special = content in specials
                decoder[idx] = AddedToken(content, rstrip=False, lstrip=False, normalized=not special,
                                          special=special)
                by_content[content] = decoder[idx]
        for entry in read_tokenizer_json(tok_path).get("added_tokens", []):
            decoder[entry["id"]] = _token(entry, tok_path)
            by_content[str(decoder[entry["id"]])] = decoder[entry["id"]]

    # -- the backend --------------------------------------------------------------------------------------

    def _build_backend(self, tok_path: Path, full: Tokenizer, kw: dict) -> Tokenizer:
        rebuild = _REBUILDERS.get(self.class_name)
        if rebuild is None:
            # TokenizersBackend, and model-specific classes we do not rebuild (see the module docstring)
            backend = full
        else:
            backend, defaults = rebuild(tok_path, full, kw)
            for key, value in defaults.items():  # the class's defaults for tokens the config does not name
                kw.setdefault(key, value)
        if backend.padding is not None:
            kw.setdefault("pad_token", backend.padding["pad_token"])
        return backend

    def _set_special_tokens(self, kw: dict) -> None:
        """PreTrainedTokenizerBase.__init__: named tokens, extra special tokens, model-specific tokens."""
        self.special_tokens_map: dict[str, Any] = dict.fromkeys(NAMED_SPECIAL)
        self.extra_special_tokens: list[Any] = []
        explicit = kw.get("model_specific_special_tokens") or {}
        auto: dict[str, Any] = {}
        for key, value in kw.items():
            if key in NAMED_SPECIAL:
                if value is None:
                    continue
                if not isinstance(value, (str, AddedToken)):
                    raise TokenizerError(f"{self.model_dir / 'tokenizer_config.json'}: {key} must be a string or "
                                         f"an AddedToken object, not {type(value).__name__}")
                self.special_tokens_map[key] = value
            elif key == "extra_special_tokens":
                if isinstance(value, dict):
                    self.special_tokens_map.update(value)
                elif isinstance(value, (list, tuple)):
                    self.extra_special_tokens = list(value)
            elif key.endswith("_token") and isinstance(value, (str, AddedToken)):
                auto[key] = value
        for key, value in {**auto, **explicit}.items():
            if isinstance(value, (str, AddedToken)):
                self.special_tokens_map[key] = value

    def _add_tokens(self, kw: dict) -> None:
        """TokenizersBackend.__init__: re-add every added_tokens_decoder entry (in id order), then the special
        tokens not yet among the added tokens."""
        to_add: list[Any] = [tok for _, tok in sorted(kw["added_tokens_decoder"].items(), key=lambda x: x[0])]
        encoder = _sorted_added_contents(self.backend) + [str(t) for t in to_add]
        for value in list(self.special_tokens_map.values()) + list(self.extra_special_tokens):
            if value is None:
                continue
            if str(value) not in encoder and value not in to_add:
                to_add.append(value)
        named = [str(v) for v in self.special_tokens_map.values() if v]
        tokens = []
        for tok in to_add:
            if isinstance(tok, str):
                tok = AddedToken(tok, special=True)
            elif not tok.special and str(tok) in named:
                tok.special = True
            tokens.append(tok)
        if tokens:
            self.backend.add_tokens(tokens)

    # -- what the converter reads --------------------------------------------------------------------------

    @property
    def vocab_size(self) -> int:
        """The base vocabulary, without added tokens."""
        return self.backend.get_vocab_size(with_added_tokens=False)

    def get_vocab(self) -> dict[str, int]:
        return self.backend.get_vocab(with_added_tokens=True)

    @property
    def added_tokens_decoder(self) -> dict[int, AddedToken]:
        return self.backend.get_added_tokens_decoder()

    def get_added_vocab(self) -> dict[str, int]:
        return {t.content: i for i, t in sorted(self.added_tokens_decoder.items(), key=lambda x: x[0])}

    @property
    def all_special_tokens(self) -> list[str]:
        seen: dict[str, None] = {}
        for value in list(self.special_tokens_map.values()) + list(self.extra_special_tokens):
            if value is not None:
                seen.setdefault(str(value), None)
        return list(seen)

    @property
    def all_special_ids(self) -> list[int]:
        unk = self.special_tokens_map.get("unk_token")
        unk_id = self.backend.token_to_id(str(unk)) if unk is not None else None
        ids = []
        for tok in self.all_special_tokens:
            tid = self.backend.token_to_id(tok)
            ids.append(unk_id if tid is None else tid)
        return ids

    def encode(self, text: str, add_special_tokens: bool = True) -> list[int]:
        return self.backend.encode(text, add_special_tokens=add_special_tokens).ids

    def decode(self, ids: list[int], skip_special_tokens: bool = False) -> str:
        text = self.backend.decode(ids, skip_special_tokens=skip_special_tokens)
        if self.clean_up_tokenization_spaces and type(self.backend.model).__name__ != "BPE":
            # transformers skips this clean-up for BPE models (it would corrupt them)
            for old, new in ((" .", "."), (" ?", "?"), (" !", "!"), (" ,", ","), (" ' ", "'"), (" n't", "n't"),
                             (" 'm", "'m"), (" 's", "'s"), (" 've", "'ve"), (" 're", "'re")):
                text = text.replace(old, new)
        return text


def _load(tok_path: Path) -> Tokenizer:
    try:
        return Tokenizer.from_file(str(tok_path))
    except Exception as e:  # noqa: BLE001 - `tokenizers` raises a bare Exception on a bad file
        raise TokenizerError(f"{tok_path} cannot be loaded by `tokenizers` ({str(e)[:200]}); the converter's "
                             "AutoTokenizer fails on it too") from e


def _sorted_added_contents(backend: Tokenizer) -> list[str]:
    return [t.content for _, t in sorted(backend.get_added_tokens_decoder().items(), key=lambda x: x[0])]


def _json_bpe(tok_path: Path, class_name: str) -> tuple[dict, list]:
    """vocab and merges of tokenizer.json's model, as transformers hands them to a class that rebuilds."""
    model = read_tokenizer_json(tok_path).get("model", {})
    if model.get("type") != "BPE":
        raise TokenizerError(f"{tok_path}: {class_name} expects a BPE model, found {model.get('type')!r}")
    vocab = model.get("vocab", {})
    if isinstance(vocab, list):
        vocab = {(t[0] if isinstance(t, list) else t): i for i, t in enumerate(vocab)}
    merges = [tuple(m.split(" ")) if isinstance(m, str) else tuple(m) for m in model.get("merges", [])]
    return vocab, merges


def _keep_json_settings(backend: Tokenizer, full: Tokenizer) -> Tokenizer:
    """A rebuilt backend keeps tokenizer.json's post-processor, truncation and padding."""
    backend.post_processor = full.post_processor
    if full.truncation is not None:
        backend.enable_truncation(**full.truncation)
    if full.padding is not None:
        backend.enable_padding(**full.padding)
    return backend


def _llama(tok_path: Path, full: Tokenizer, kw: dict):
    """LlamaTokenizer: byte-fallback BPE, no normalizer, a Metaspace pre-tokenizer."""
    vocab, merges = _json_bpe(tok_path, "LlamaTokenizer")
    add_prefix_space = kw.get("add_prefix_space")
    add_prefix_space = True if add_prefix_space is None else add_prefix_space
    scheme = ("always" if kw.get("legacy", False) else "first") if add_prefix_space else "never"
    backend = Tokenizer(models.BPE(vocab=vocab, merges=merges, fuse_unk=True, byte_fallback=True, dropout=None))
    backend.normalizer = None
    backend.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme=scheme, split=False)
    steps = [decoders.Replace("▁", " "), decoders.ByteFallback(), decoders.Fuse()]
    if add_prefix_space:
        steps.append(decoders.Strip(content=" ", left=1))
    backend.decoder = decoders.Sequence(steps)
    return _keep_json_settings(backend, full), {"unk_token": "<unk>", "bos_token": "<s>", "eos_token": "</s>"}


def _byte_level_bpe(vocab: dict, merges: list, **extra) -> Tokenizer:
    return Tokenizer(models.BPE(vocab=vocab, merges=merges, dropout=None, continuing_subword_prefix="",
                                end_of_word_suffix="", fuse_unk=False, **extra))


def _gpt2(tok_path: Path, full: Tokenizer, kw: dict):
    """GPT2Tokenizer: plain byte-level BPE, no normalizer, no regex of its own beyond ByteLevel's."""
    vocab, merges = _json_bpe(tok_path, "GPT2Tokenizer")
    backend = _byte_level_bpe(vocab, merges)
    backend.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=kw.get("add_prefix_space", False))
    backend.decoder = decoders.ByteLevel()
    eot = "<|endoftext|>"
    return _keep_json_settings(backend, full), {"unk_token": eot, "bos_token": eot, "eos_token": eot,
                                                "pad_token": None}


def _qwen2(tok_path: Path, full: Tokenizer, kw: dict):
    """Qwen2Tokenizer: NFC, Qwen's split pattern (single digits), then byte-level without a regex."""
    vocab, merges = _json_bpe(tok_path, "Qwen2Tokenizer")
    backend = _byte_level_bpe(vocab, merges, unk_token=None, byte_fallback=False)
    backend.decoder = decoders.ByteLevel()
    backend.normalizer = normalizers.NFC()
    add_prefix_space = kw.get("add_prefix_space")
    backend.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(hf_classes.QWEN2_PRETOKENIZE_REGEX), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=bool(add_prefix_space), use_regex=False),
    ])
    eot = "<|endoftext|>"
    return _keep_json_settings(backend, full), {"unk_token": eot, "bos_token": None, "eos_token": eot,
                                                "pad_token": eot}


def _gpt_neox(tok_path: Path, full: Tokenizer, kw: dict):
    """GPTNeoXTokenizer: NFC, then byte-level BPE."""
    vocab, merges = _json_bpe(tok_path, "GPTNeoXTokenizer")
    backend = _byte_level_bpe(vocab, merges)
    backend.normalizer = normalizers.NFC()
    backend.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=kw.get("add_prefix_space", False),
                                                     trim_offsets=kw.get("trim_offsets", True))
    backend.decoder = decoders.ByteLevel()
    eot = "<|endoftext|>"
    return _keep_json_settings(backend, full), {"unk_token": eot, "bos_token": eot, "eos_token": eot,
                                                "pad_token": "<|padding|>"}


# Model-specific classes whose own pipeline we rebuild. Other model-specific classes get tokenizer.json as
# it is (right for released checkpoints, whose tokenizer.json those classes reproduce).
_REBUILDERS = {"LlamaTokenizer": _llama, "GPT2Tokenizer": _gpt2, "Qwen2Tokenizer": _qwen2,
               "GPTNeoXTokenizer": _gpt_neox}
REBUILT_CLASSES = frozenset(_REBUILDERS)

"""Encoding and decoding as a checkpoint's Hugging Face tokenizer does, over the `tokenizers` library.

HfTokenizer gives the ids transformers' AutoTokenizer gives (same class choice, added tokens and
post-processor; see hf_auto.py). HfPreTokenizer runs only tokenizer.json's normalizer and pre-tokenizer,
which is what the converter's pre-tokenizer digest tells llama.cpp to imitate.
"""
from __future__ import annotations

from pathlib import Path

from tokenizers import Tokenizer

from .errors import TokenizerError
from .hf_auto import NAMED_SPECIAL, AutoTokenizerView


class HfTokenizer:
    def __init__(self, model_dir: Path | str):
        self._tok = AutoTokenizerView(Path(model_dir))

    def encode(self, text: str, add_special_tokens: bool = True) -> list[int]:
        """Token ids; with add_special_tokens, the BOS/EOS the tokenizer's post-processor adds."""
        return self._tok.encode(text, add_special_tokens=add_special_tokens)

    def decode(self, ids: list[int], skip_special_tokens: bool = False) -> str:
        return self._tok.decode(list(ids), skip_special_tokens=skip_special_tokens)

    def token_to_id(self, token: str) -> int | None:
        return self._tok.backend.token_to_id(token)

    def id_to_token(self, tid: int) -> str | None:
        return self._tok.backend.id_to_token(tid)

    @property
    def vocab_size(self) -> int:
        """Number of ids, added tokens included."""
        return self._tok.backend.get_vocab_size(with_added_tokens=True)

    @property
    def special_tokens(self) -> dict[str, str]:
        """Named special tokens that are set, e.g. {"bos_token": "<s>", "eos_token": "</s>"}."""
        return {k: str(v) for k, v in self._tok.special_tokens_map.items() if v is not None}

    def special_token_id(self, name: str) -> int | None:
        """The id of a named special token ("bos", "eos", "unk", "pad", ... or "bos_token"), or None."""
        key = name if name.endswith("_token") else f"{name}_token"
        value = self._tok.special_tokens_map.get(key)
        return None if value is None else self._tok.backend.token_to_id(str(value))

    @property
    def bos_token_id(self) -> int | None:
        return self.special_token_id("bos")

    @property
    def eos_token_id(self) -> int | None:
        return self.special_token_id("eos")

    @property
    def all_special_ids(self) -> list[int]:
        return self._tok.all_special_ids


class HfPreTokenizer:
    """tokenizer.json's normalizer then pre-tokenizer, as `pre_tokenize_str` runs them (no model, no
    added tokens): the pieces BPE merges are applied within."""

    def __init__(self, tokenizer_json: Path | str):
        path = Path(tokenizer_json)
        try:
            tok = Tokenizer.from_file(str(path))
        except Exception as e:  # noqa: BLE001 - the library raises a bare Exception on bad files
            raise TokenizerError(f"{path} cannot be loaded by `tokenizers`: {e}") from e
        self._normalizer = tok.normalizer
        self._pre = tok.pre_tokenizer

    def __call__(self, text: str) -> list[str]:
        if self._normalizer is not None:
            text = self._normalizer.normalize_str(text)
        if self._pre is None:
            return [text] if text else []
        return [piece for piece, _ in self._pre.pre_tokenize_str(text)]


__all__ = ["HfTokenizer", "HfPreTokenizer", "NAMED_SPECIAL"]

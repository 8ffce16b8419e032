"""Our tokenization against llama.cpp's, over a GGUF's vocabulary (the converter's or the view's).

llama.cpp re-implements each pre-tokenizer named by tokenizer.ggml.pre; this tells whether, for given texts,
its ids equal the Hugging Face tokenizer's (HfTokenizer's). Texts are tokenized with special tokens parsed
and BOS/EOS added as the GGUF's add_bos/add_eos flags say (the Hugging Face side: its post-processor).

Corpora: a text file holds one case per line, or, in llama.cpp's `models/ggml-vocab-*.gguf.inp` format,
cases each followed by VOCAB_TEST_SEPARATOR (which lets a case hold newlines). The matching `.out` file has
one line per case: the ids transformers gave without special tokens, space separated (read_vocab_cases).
"""
from __future__ import annotations

import ctypes
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable

from .errors import TokenizerError

VOCAB_TEST_SEPARATOR = "\n__ggml_vocab_test__\n"


class LlamaCppVocab:
    """A GGUF loaded vocabulary-only by llama.cpp (no tensor is read)."""

    def __init__(self, gguf_path: Path | str):
        from hfview.runner.devices import llama_bindings

        ll = llama_bindings()

        self._ll = ll
        ll.llama_backend_init()
        params = ll.llama_model_default_params()
        params.vocab_only = True
        self._model = ll.llama_model_load_from_file(str(gguf_path).encode(), params)
        if not self._model:
            raise TokenizerError(f"llama.cpp could not load the vocabulary of {gguf_path}")
        self._vocab = ll.llama_model_get_vocab(self._model)

    def tokenize(self, text: str, add_special: bool = True, parse_special: bool = True) -> list[int]:
        raw = text.encode("utf-8")
        cap = len(raw) + 16
        while True:
            buf = (self._ll.llama_token * cap)()
            n = self._ll.llama_tokenize(self._vocab, raw, len(raw), buf, cap, add_special, parse_special)
            if n >= 0:
                return list(buf[:n])
            cap = -n  # llama.cpp answers minus the number of tokens it needs

    def close(self) -> None:
        if self._model:
            self._ll.llama_model_free(self._model)
            self._model = ctypes.c_void_p()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


@dataclass
class Mismatch:
    text: str
    ours: list[int]
    llama_cpp: list[int]
    line: int | None = None  # 1-based case number in the corpus, when the texts came from one


def compare_tokenization(hf, gguf_path: Path | str, texts: Iterable[str]) -> list[Mismatch]:
    """Texts on which HfTokenizer `hf` and llama.cpp (over `gguf_path`'s vocabulary) give different ids."""
    out = []
    with LlamaCppVocab(gguf_path) as lc:
        for text in texts:
            ours, theirs = hf.encode(text), lc.tokenize(text)
            if ours != theirs:
                out.append(Mismatch(text, ours, theirs))
    return out


@dataclass
class CheckReport:
    """tokenizer-check's result: how many cases, which disagree."""
    model: str
    corpus: str
    cases: int
    add_special: bool
    mismatches: list[Mismatch]

    @property
    def passed(self) -> bool:
        return not self.mismatches

    def as_dict(self) -> dict:
        return {"model": self.model, "corpus": self.corpus, "cases": self.cases, "add_special": self.add_special,
                "agree": self.cases - len(self.mismatches), "passed": self.passed,
                "mismatches": [{"line": m.line, "text": m.text, "ours": m.ours, "llama_cpp": m.llama_cpp}
                               for m in self.mismatches]}

    def render(self) -> str:
        lines = []
        for m in self.mismatches:
            lines += [f"line {m.line}: {m.text!r}", f"  ours:      {m.ours}", f"  llama.cpp: {m.llama_cpp}"]
        verdict = "PASS" if self.passed else "FAIL"
        lines.append(f"{verdict}: {self.cases - len(self.mismatches)}/{self.cases} cases agree "
                     f"({self.model}, corpus {self.corpus})")
        return "\n".join(lines)


def check_checkpoint(model_dir: Path | str, texts: list[str], *, add_special: bool = True,
                     corpus_name: str = "") -> CheckReport:
    """Encode `texts` with HfTokenizer over `model_dir` and with llama.cpp over the vocabulary of hfview's
    view of the same directory (loaded vocab-only from the view's bytes: no file is written)."""
    from hfview import HfCheckpoint
    from hfview.runner.stream import load_model

    from .hf import HfTokenizer

    hf = HfTokenizer(model_dir)  # first: a checkpoint HfTokenizer cannot read is refused before llama.cpp loads
    mismatches = []
    with load_model(HfCheckpoint(model_dir), vocab_only=True) as model:
        for i, text in enumerate(texts, 1):
            ours = hf.encode(text, add_special_tokens=add_special)
            theirs = model.tokenize(text, add_special=add_special, parse_special=True)
            if ours != theirs:
                mismatches.append(Mismatch(text, ours, theirs, i))
    return CheckReport(str(model_dir), corpus_name, len(texts), add_special, mismatches)


def read_corpus(path: Path | str) -> list[str]:
    """The cases of a corpus file: llama.cpp's .inp format when the file holds its separator, else one case
    per line (the line end, `\\n`, is not part of the case)."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise TokenizerError(f"corpus {path} does not exist") from None
    except UnicodeDecodeError as e:
        raise TokenizerError(f"corpus {path} is not UTF-8 ({e.reason} at byte {e.start})") from None
    if VOCAB_TEST_SEPARATOR in text:
        cases = text.split(VOCAB_TEST_SEPARATOR)
        # every case is followed by the separator: what follows the last one must be empty
        if cases[-1] not in ("", "\n"):
            raise TokenizerError(f"corpus {path}: text after the last {VOCAB_TEST_SEPARATOR.strip()} line; "
                                 "in the .inp format every case ends with that separator line")
        return cases[:-1]
    if not text:
        return []
    return text[:-1].split("\n") if text.endswith("\n") else text.split("\n")


def read_vocab_cases(inp_path: Path | str) -> list[tuple[str, list[int]]]:
    """(text, ids) for each case of a llama.cpp `ggml-vocab-*.gguf.inp` and its `.out` beside it."""
    inp_path = Path(inp_path)
    out_path = inp_path.with_suffix(".out")
    texts = read_corpus(inp_path)
    try:
        rows = out_path.read_text(encoding="utf-8").split("\n")
    except FileNotFoundError:
        raise TokenizerError(f"{out_path} does not exist: the ids of {inp_path}'s cases are read from it") from None
    if rows and rows[-1] == "":
        rows.pop()
    if len(rows) != len(texts):
        raise TokenizerError(f"{inp_path} has {len(texts)} cases but {out_path} has {len(rows)} lines")
    try:
        ids = [[int(x) for x in row.split()] for row in rows]
    except ValueError as e:
        raise TokenizerError(f"{out_path}: a line that is not space-separated integers ({e})") from None
    return list(zip(texts, ids))

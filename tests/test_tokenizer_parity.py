"""Our tokenization against llama.cpp's over the converter's vocabulary (which our tokenizer.* KVs equal
byte for byte, see test_tokenizer_kv.py)."""
from __future__ import annotations

import pytest

from test_tokenizer_hf import CORPUS
from test_tokenizer_kv import TOK, case_dir, converted  # noqa: F401 - case_dir is a fixture

pytest.importorskip("llama_cpp")


def _texts():
    from hfview.tokenizer import PRE_TOKENIZER_PROBE
    return CORPUS + [PRE_TOKENIZER_PROBE, "multiple\n\n\nnewlines and\t\ttabs   spaces", "ÄÖÜ äöü ß €100"]


@pytest.mark.parametrize("name", ["llama3-bpe", "gpt-2"])
def test_byte_level_bpe_ids_equal_llama_cpp(name, case_dir):  # noqa: F811
    from hfview.tokenizer import HfTokenizer
    from hfview.tokenizer.parity import compare_tokenization

    d = case_dir(name)
    mismatches = compare_tokenization(HfTokenizer(d), converted(d), _texts())
    assert not mismatches, [(m.text, m.ours, m.llama_cpp) for m in mismatches[:3]]


def test_sentencepiece_ids_equal_llama_cpp(case_dir):  # noqa: F811
    """llama-spm: sentencepiece's own encoder (BOS added, as llama.cpp adds it for SPM vocabularies)."""
    from sentencepiece import SentencePieceProcessor

    from hfview.tokenizer.parity import LlamaCppVocab

    d = case_dir("llama-spm")
    sp = SentencePieceProcessor(model_file=str(TOK / "llama-spm" / "tokenizer.model"))
    with LlamaCppVocab(converted(d)) as lc:
        for text in _texts():
            if "<s>" in text:
                continue  # sentencepiece does not parse special tokens in text
            assert lc.tokenize(text) == [sp.bos_id()] + sp.encode(text), text

"""The generated tables (hfview/tokenizer/digests.py, hfview/tokenizer/hf_classes.py) against their sources."""
from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

import oracle

ROOT = Path(__file__).resolve().parent.parent


def test_generated_tables_are_current():
    """Regenerating from the pinned converter and the installed transformers changes nothing."""
    proc = subprocess.run([sys.executable, str(ROOT / "tools" / "gen_digests.py"), "--check"],
                          capture_output=True, text=True, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr


def _source_chain() -> list[tuple[str, str]]:
    """The digest chain read with a regex, independently of the generator's ast walk."""
    text = (oracle.converter_root() / "conversion" / "base.py").read_text(encoding="utf-8")
    return re.findall(r'if chkhsh == "([0-9a-f]{64})":\n(?:\s*#[^\n]*\n)*\s*res = "([^"]+)"', text)


def test_table_is_the_converters_chain_in_order():
    from hfview.tokenizer.digests import PRE_TOKENIZER_DIGESTS
    chain = _source_chain()
    assert len(chain) > 50
    assert list(PRE_TOKENIZER_DIGESTS) == chain


def test_probe_text_is_the_converters():
    from hfview.tokenizer.digests import PRE_TOKENIZER_PROBE
    text = (oracle.converter_root() / "conversion" / "base.py").read_text(encoding="utf-8")
    line = next(ln for ln in text.splitlines() if ln.strip().startswith("chktxt = "))
    assert eval(line.split("=", 1)[1]) == PRE_TOKENIZER_PROBE  # a string literal from the converter


def test_a_digest_listed_twice_takes_the_last_name():
    from hfview.tokenizer.digests import pre_tokenizer_named
    chain = _source_chain()
    repeated = {d for d, _ in chain if sum(1 for x, _ in chain if x == d) > 1}
    assert repeated, "the pinned converter lists some digests twice"
    for digest in repeated:
        last = [name for d, name in chain if d == digest][-1]
        assert pre_tokenizer_named(digest) == last


def test_unknown_digest_names_itself_and_the_converter():
    from hfview.tokenizer import UnknownPreTokenizer
    from hfview.tokenizer.digests import pre_tokenizer_named
    with pytest.raises(UnknownPreTokenizer) as e:
        pre_tokenizer_named("0" * 64, "x/tokenizer.json")
    assert "0" * 64 in str(e.value) and "converter does not know" in str(e.value)
    assert "x/tokenizer.json" in str(e.value)


def test_class_table_is_transformers():
    from transformers.models.auto import tokenization_auto as ta

    from hfview.tokenizer import hf_classes
    assert hf_classes.REGISTERED_CLASS == {k: v for k, v in ta.TOKENIZER_MAPPING_NAMES.items() if v is not None}
    assert hf_classes.INCORRECT_HUB_CLASS == frozenset(ta.MODELS_WITH_INCORRECT_HUB_TOKENIZER_CLASS)

"""Refusals that quote the pinned converter: each is measured here by running the converter on a fixture with the
refused config, and the view's refusal names what the converter itself says."""
from __future__ import annotations

import pytest

import oracle
from family_variants import DROP, assert_refused, variant


def _converter_says(src, tmp_path, **changes) -> str:
    model = variant(src, tmp_path / "converted" / src.name, **changes)
    with pytest.raises(oracle.ConverterFailed) as failed:
        oracle.convert(model, tmp_path / "out.gguf", "f32")
    return str(failed.value)


def test_glm4_without_vocab_size(checkpoint, tmp_path):
    """glm-4-9b's config.json (model_type chatglm, GLM-4's BPE tokenizer) states only padded_vocab_size. The converter
    reads the vocabulary size as hparams.get("padded_vocab_size", hparams["vocab_size"]), whose default is looked up
    first: it stops with KeyError: 'vocab_size'. The view refuses with the converter's words."""
    said = _converter_says(checkpoint("chatglm"), tmp_path, vocab_size=DROP)
    assert "KeyError: 'vocab_size'" in said
    assert_refused(checkpoint("chatglm"), tmp_path, r"KeyError: 'vocab_size'", vocab_size=None)

"""Gemma 2: both oracles (converter bytes at every outtype, llama.cpp-from-the-view logits against
transformers, with a sliding window shorter than the prompt), the config defaults, and the refusals of
configs llama.cpp's gemma2 would run differently from transformers."""
from __future__ import annotations

import pytest

from config_defaults import defaults_match_transformers, with_config
from family_oracle import oracle_tests
from hfview import HfCheckpoint
from hfview.errors import ConfigError

test_export, test_logits = oracle_tests("gemma2", ["gemma2"])


def test_defaults_are_transformers():
    from hfview.families.gemma2 import DEFAULTS
    defaults_match_transformers("gemma2", DEFAULTS["gemma2"])


@pytest.mark.parametrize("changes, words", [
    (dict(query_pre_attn_scalar=64), "query_pre_attn_scalar"),
    (dict(layer_types=["full_attention", "sliding_attention"]), "layer_types"),
    (dict(hidden_activation="gelu_new"), "hidden_activation"),
    (dict(tie_word_embeddings=False), "tie_word_embeddings"),
])
def test_refuses_what_llama_cpp_gemma2_runs_otherwise(changes, words, checkpoint, tmp_path):
    with pytest.raises(ConfigError, match=words):
        HfCheckpoint(with_config(checkpoint("gemma2"), tmp_path, **changes))

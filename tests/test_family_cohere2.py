"""Cohere 2 (Command R7B): both oracles on a 4-layer model (three sliding layers with rope, one global
without, a window shorter than the prompt), the converter's failure without rotary_pct (which the view
reads as transformers computes), the config defaults and refusals."""
from __future__ import annotations

import pytest

import oracle
from config_defaults import defaults_match_transformers, with_config
from family_oracle import oracle_tests
from hfview import HfCheckpoint
from hfview.errors import ConfigError

test_export, test_logits = oracle_tests("cohere2", ["cohere2"])


def test_defaults_are_transformers():
    """The defaults, once the config class's constructor has computed KV heads, head_dim and layer kinds."""
    from hfview.families.cohere2 import DEFAULTS, FAMILY
    defaults_match_transformers("cohere2", FAMILY.normalise(dict(DEFAULTS["cohere2"])))


def test_without_rotary_pct_converter_fails_view_presents_whole_head(checkpoint, tmp_path):
    """transformers 5's Cohere2Config has no rotary_pct: a config.json without it makes the pinned converter
    fail (KeyError), while the view writes the rope over the whole head, as transformers computes it."""
    path = with_config(checkpoint("cohere2"), tmp_path, rotary_pct=None)
    with pytest.raises(oracle.ConverterFailed, match="rotary_pct"):
        oracle.convert(path, tmp_path / "out.gguf", "f32")
    kv = {k.key: k.value for k in HfCheckpoint(path, "f32").kv}
    assert kv["cohere2.rope.dimension_count"] == 12 == kv["cohere2.attention.key_length"]


@pytest.mark.parametrize("changes, words", [
    (dict(layer_types=["sliding_attention", "full_attention"] * 2), "layer_types"),
    (dict(rotary_pct=0.5), "rotary_pct"),
    (dict(tie_word_embeddings=False), "tie_word_embeddings"),
    (dict(attention_bias=True), "attention_bias"),
])
def test_refuses_what_llama_cpp_cohere2_runs_otherwise(changes, words, checkpoint, tmp_path):
    with pytest.raises(ConfigError, match=words):
        HfCheckpoint(with_config(checkpoint("cohere2"), tmp_path, **changes))

"""Cohere (Command-R): both oracles on a Command-R v01-like model (model_max_length over
max_position_embeddings, float16) and a Command-R+-like one (64 layers with per-head q/k norms, grouped KV, bfloat16),
plus the config defaults and refusals."""
from __future__ import annotations

import pytest

from config_defaults import defaults_match_transformers, with_config
from family_oracle import oracle_tests
from hfview import HfCheckpoint
from hfview.errors import ConfigError

test_export, test_logits = oracle_tests("cohere", ["cohere", "cohere-plus"])


def test_defaults_are_transformers():
    from hfview.families.cohere import DEFAULTS
    defaults_match_transformers("cohere", DEFAULTS["cohere"])


def test_context_length_is_model_max_length(checkpoint, tmp_path):
    view = HfCheckpoint(checkpoint("cohere"), "f32")
    assert {kv.key: kv.value for kv in view.kv}["command-r.context_length"] == 131072
    plain = HfCheckpoint(with_config(checkpoint("cohere"), tmp_path, model_max_length=None), "f32")
    assert {kv.key: kv.value for kv in plain.kv}["command-r.context_length"] == 8192


@pytest.mark.parametrize("changes, words", [
    (dict(tie_word_embeddings=False), "tie_word_embeddings"),
    (dict(hidden_act="gelu"), "hidden_act"),
    (dict(rope_scaling={"rope_type": "linear", "factor": 2.0}), "rope"),
])
def test_refuses_what_llama_cpp_command_r_cannot_run(changes, words, checkpoint, tmp_path):
    with pytest.raises(ConfigError, match=words):
        HfCheckpoint(with_config(checkpoint("cohere"), tmp_path, **changes))


@pytest.mark.parametrize("name, changes", [("cohere", dict(use_qk_norm=True)),
                                           ("cohere-plus", dict(use_qk_norm=False))])
def test_refuses_qk_norm_llama_cpp_would_not_load(name, changes, checkpoint, tmp_path):
    """llama.cpp's command-r decides by depth (64 layers or more) whether a layer has q/k norms."""
    with pytest.raises(ConfigError, match="use_qk_norm"):
        HfCheckpoint(with_config(checkpoint(name), tmp_path, **changes))

"""Qwen2 (q/k/v biases; untied, tied, bare Qwen2Model): converter bytes at every outtype, llama.cpp logits."""
import pytest

from family_defaults import check_defaults
from family_oracle import oracle_tests
from family_variants import variant

test_export, test_logits = oracle_tests("qwen2", ["qwen2", "qwen2-tied", "qwen2-base"])


def test_defaults_match_transformers():
    check_defaults("qwen2")


@pytest.mark.parametrize("changes, needle", [
    (dict(use_sliding_window=True, max_window_layers=1), "sliding-window"),
    (dict(hidden_act="gelu"), "SiLU only"),
    (dict(architectures=["Qwen2ForSequenceClassification"]), "architectures[0]"),
    (dict(rope_scaling={"rope_type": "longrope", "factor": 2.0}), "rope_type 'longrope'"),
])
def test_qwen2_refusals(changes, needle, checkpoint, tmp_path):
    from hfview import HfCheckpoint
    from hfview.errors import ConfigError

    with pytest.raises(ConfigError, match="config.json") as err:
        HfCheckpoint(variant(checkpoint("qwen2"), tmp_path / "bad", **changes), "f32")
    assert needle in str(err.value)


def test_qwen2_refuses_sentence_transformers_pooling(checkpoint, tmp_path):
    from hfview import HfCheckpoint
    from hfview.errors import ConfigError

    bad = variant(checkpoint("qwen2"), tmp_path / "bad")
    (bad / "modules.json").write_text('[{"idx": 1, "name": "1", "path": "1_Pooling", '
                                      '"type": "sentence_transformers.models.Pooling"}]')
    with pytest.raises(ConfigError, match="modules.json.*pooling"):
        HfCheckpoint(bad, "f32")

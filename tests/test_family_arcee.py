"""Arcee (relu^2 ungated FFN, rotation-pair Q/K, yarn): converter bytes at every outtype, llama.cpp logits."""
from family_defaults import check_defaults
from family_oracle import oracle_tests

test_export, test_logits = oracle_tests("arcee", ["arcee"])


def test_defaults_match_transformers():
    check_defaults("arcee")


def test_arcee_refuses_another_activation(checkpoint, tmp_path):
    import pytest
    from family_variants import variant
    from hfview import HfCheckpoint
    from hfview.errors import ConfigError

    with pytest.raises(ConfigError, match="relu"):
        HfCheckpoint(variant(checkpoint("arcee"), tmp_path / "bad", hidden_act="silu"), "f32")

"""SmolLM3 (rotation-pair Q/K, a NoPE layer every 4th): converter bytes at every outtype, llama.cpp logits."""
from family_defaults import check_defaults
from family_oracle import oracle_tests

test_export, test_logits = oracle_tests("smollm3", ["smollm3"])


def test_defaults_match_transformers():
    check_defaults("smollm3")


def test_smollm3_refuses_a_nope_interval_llama_cpp_does_not_compute(checkpoint, tmp_path):
    import pytest
    from family_variants import variant
    from hfview import HfCheckpoint
    from hfview.errors import ConfigError

    with pytest.raises(ConfigError, match="no_rope_layers"):
        HfCheckpoint(variant(checkpoint("smollm3"), tmp_path / "bad", no_rope_layers=[1, 1, 0, 1]), "f32")

"""Mamba-2 (Mamba2ForCausalLM -> llama.cpp mamba2): both oracles on a Mamba-Codestral-style fixture (the A
tensor compared as in test_family_mamba: correctly rounded on our side, within one ulp on the converter's)."""
import pytest

from family_oracle import oracle_tests
from family_variants import assert_refused
from test_family_mamba import export_within_one_ulp_of_a

_, test_logits = oracle_tests("mamba2", ["mamba2"])


@pytest.mark.parametrize("outtype", ["f32", "f16", "bf16", "auto"])
def test_export(outtype, checkpoint, converted, tmp_path, record_property):
    record_property("family", "mamba2")
    record_property("oracle", "bytes")
    export_within_one_ulp_of_a("mamba2", outtype, checkpoint, converted, tmp_path,
                               a_source=lambda bid: f"backbone.layers.{bid}.mixer.A_log")


@pytest.mark.parametrize("change, message", [
    ({"time_step_limit": [0.0, 1.0]}, "time_step_limit"),
    ({"n_groups": None}, "n_groups"),
    ({"num_heads": 4}, "num_heads 4"),
])
def test_configs_that_would_run_wrong_are_refused(checkpoint, tmp_path, change, message):
    assert_refused(checkpoint("mamba2"), tmp_path, message, **change)

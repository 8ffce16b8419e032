"""Mamba-2 (Mamba2ForCausalLM -> llama.cpp mamba2): both oracles on a Mamba-Codestral-style fixture (A =
-exp(A_log) by the converter's torch exponential, byte for byte)."""
import pytest

from family_oracle import check_export, oracle_tests
from family_variants import assert_refused

_, test_logits = oracle_tests("mamba2", ["mamba2"])


@pytest.mark.parametrize("outtype", ["f32", "f16", "bf16", "auto"])
def test_export(outtype, checkpoint, converted, tmp_path, record_property):
    record_property("family", "mamba2")
    record_property("oracle", "bytes")
    check_export("mamba2", outtype, checkpoint, converted, tmp_path)


@pytest.mark.parametrize("change, message", [
    ({"time_step_limit": [0.0, 1.0]}, "time_step_limit"),
    ({"n_groups": None}, "n_groups"),
    ({"num_heads": 4}, "num_heads 4"),
])
def test_configs_that_would_run_wrong_are_refused(checkpoint, tmp_path, change, message):
    assert_refused(checkpoint("mamba2"), tmp_path, message, **change)

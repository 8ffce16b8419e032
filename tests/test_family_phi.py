"""Phi-1 / 1.5 / 2 (PhiForCausalLM -> llama.cpp phi2): both oracles over a Phi-2-style and a phi-1_5-style
fixture; configs llama.cpp's phi2 would run wrong are refused by name."""
import pytest

from family_defaults import check_defaults
from family_oracle import oracle_tests
from family_variants import assert_refused

test_export, test_logits = oracle_tests("phi", ["phi-2", "phi-1_5"])


@pytest.mark.parametrize("change, message", [
    ({"qk_layernorm": True}, "qk_layernorm True"),
    ({"rope_theta": 500000.0}, "rope"),
    ({"num_key_value_heads": 1}, "num_key_value_heads 1"),
    ({"hidden_act": "relu"}, "hidden_act 'relu'"),
])
def test_configs_that_would_run_wrong_are_refused(checkpoint, tmp_path, change, message):
    assert_refused(checkpoint("phi-2"), tmp_path, message, **change)


def test_defaults():
    check_defaults("phi")

"""GPT-BigCode (StarCoder, SantaCoder: GPTBigCodeForCausalLM -> llama.cpp starcoder): both oracles on a
StarCoder-style multi-query fixture; configs llama.cpp's starcoder cannot run are refused by name."""
import pytest

from family_defaults import check_defaults
from family_oracle import oracle_tests
from family_variants import assert_refused

test_export, test_logits = oracle_tests("gpt_bigcode", ["starcoder"])


@pytest.mark.parametrize("change, message", [
    ({"multi_query": False}, "multi_query False"),
    ({"n_inner": 100}, "n_inner 100"),
    ({"activation_function": "relu"}, "activation_function 'relu'"),
])
def test_configs_that_would_run_wrong_are_refused(checkpoint, tmp_path, change, message):
    assert_refused(checkpoint("starcoder"), tmp_path, message, **change)


def test_defaults():
    check_defaults("gpt_bigcode")

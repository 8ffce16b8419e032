"""LFM2 (Lfm2ForCausalLM -> llama.cpp lfm2): both oracles on an LFM2-350M-style hybrid fixture; a model without a
conv layer (on which llama.cpp aborts) and layer lists of the wrong length are refused by name."""
import pytest

from family_defaults import check_defaults
from family_oracle import oracle_tests
from family_variants import assert_refused

test_export, test_logits = oracle_tests("lfm2", ["lfm2"])


@pytest.mark.parametrize("change, message", [
    ({"layer_types": ["full_attention"] * 4, "full_attn_idxs": [0, 1, 2, 3]}, "no conv layer"),
    ({"layer_types": ["conv", "full_attention"]}, "layer_types lists 2 layers, the config has 4"),
    ({"conv_bias": True}, "conv_bias True"),
])
def test_configs_llama_cpp_cannot_run_are_refused(checkpoint, tmp_path, change, message):
    assert_refused(checkpoint("lfm2"), tmp_path, message, **change)


def test_defaults():
    check_defaults("lfm2")

"""LFM2-MoE (Lfm2MoeForCausalLM -> llama.cpp lfm2moe): both oracles on an LFM2-8B-A1B-style fixture; what
llama.cpp's lfm2moe cannot run is refused by name."""
import pytest

from family_defaults import check_defaults
from family_oracle import oracle_tests
from family_variants import DROP, assert_refused

test_export, test_logits = oracle_tests("lfm2_moe", ["lfm2_moe"])


@pytest.mark.parametrize("change, message", [
    ({"layer_types": ["full_attention"] * 3}, "no conv layer"),
    ({"layer_types": ["conv", "full_attention"]}, "layer_types lists 2 layers, the config has 3"),
    ({"layer_types": DROP}, "no layer_types"),
    ({"conv_bias": True}, "conv_bias True"),
    ({"use_expert_bias": False}, "use_expert_bias False"),
    ({"norm_topk_prob": False}, "norm_topk_prob False"),
    ({"routed_scaling_factor": 2.5}, "routed_scaling_factor 2.5"),
    ({"num_dense_layers": 4}, "num_dense_layers 4"),
])
def test_configs_llama_cpp_cannot_run_are_refused(checkpoint, tmp_path, change, message):
    assert_refused(checkpoint("lfm2_moe"), tmp_path, message, **change)


def test_defaults():
    check_defaults("lfm2_moe")

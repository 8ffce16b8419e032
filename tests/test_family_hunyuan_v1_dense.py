"""Hunyuan dense (HunYuanDenseV1ForCausalLM -> llama.cpp hunyuan-dense): both oracles; defaults vs transformers."""
from family_defaults import check_defaults
from family_oracle import oracle_tests

test_export, test_logits = oracle_tests("hunyuan_v1_dense", ["hunyuan_v1_dense", "hunyuan_v1_dense-lm-head"])


def test_defaults():
    check_defaults("hunyuan_v1_dense")

"""Qwen2 (q/k/v biases; untied, tied, bare Qwen2Model): converter bytes at every outtype, llama.cpp logits."""
from family_defaults import check_defaults
from family_oracle import oracle_tests

test_export, test_logits = oracle_tests("qwen2", ["qwen2", "qwen2-tied", "qwen2-base"])


def test_defaults_match_transformers():
    check_defaults("qwen2")

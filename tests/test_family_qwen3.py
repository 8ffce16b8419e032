"""Qwen3 (Q/K norms, head_dim != hidden/heads): converter bytes at every outtype, llama.cpp logits."""
from family_defaults import check_defaults
from family_oracle import oracle_tests

test_export, test_logits = oracle_tests("qwen3", ["qwen3"])


def test_defaults_match_transformers():
    check_defaults("qwen3")

"""Seed-OSS (q/k/v biases, post_attention_norm): converter bytes at every outtype, llama.cpp logits."""
from family_defaults import check_defaults
from family_oracle import oracle_tests

test_export, test_logits = oracle_tests("seed_oss", ["seed_oss"])


def test_defaults_match_transformers():
    check_defaults("seed_oss")

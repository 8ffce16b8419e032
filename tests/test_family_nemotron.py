"""Nemotron: both oracles over a Minitron-style fixture (bf16) and one with biases and linear rope (f32)."""
from family_defaults import check_defaults
from family_oracle import oracle_tests

test_export, test_logits = oracle_tests("nemotron", ["nemotron", "nemotron-bias-linear"])


def test_nemotron_defaults_are_transformers():
    check_defaults("nemotron")

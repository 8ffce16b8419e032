"""Granite: both oracles over a granite-3.0-style fixture (all four multipliers, tied, bf16) and one with
biases, a padded vocabulary and linear rope (f32)."""
from family_defaults import check_defaults
from family_oracle import oracle_tests

test_export, test_logits = oracle_tests("granite", ["granite", "granite-bias"])


def test_granite_defaults_are_transformers():
    check_defaults("granite")

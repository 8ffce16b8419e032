"""OLMo 1: both oracles over an OLMo-1.7-style fixture (no norm tensors, clip_qkv that bites, f32)."""
from family_defaults import check_defaults
from family_oracle import oracle_tests

test_export, test_logits = oracle_tests("olmo", ["olmo"])


def test_olmo_defaults_are_transformers():
    check_defaults("olmo")

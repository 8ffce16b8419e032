"""OLMo 1: both oracles over an OLMo-1.7-style fixture (no norm tensors, clip_qkv that bites, f32)."""
from family_oracle import oracle_tests

test_export, test_logits = oracle_tests("olmo", ["olmo"])

"""SmolLM3 (rotation-pair Q/K, a NoPE layer every 4th): converter bytes at every outtype, llama.cpp logits."""
from family_defaults import check_defaults
from family_oracle import oracle_tests

test_export, test_logits = oracle_tests("smollm3", ["smollm3"])


def test_defaults_match_transformers():
    check_defaults("smollm3")

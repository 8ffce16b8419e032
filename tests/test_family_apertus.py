"""Apertus (xIELU scalars as KV arrays, Q/K norms, llama3 rope): converter bytes at every outtype,
llama.cpp logits."""
from family_defaults import check_defaults
from family_oracle import oracle_tests

test_export, test_logits = oracle_tests("apertus", ["apertus"])


def test_defaults_match_transformers():
    check_defaults("apertus")

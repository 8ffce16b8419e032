"""ERNIE 4.5 dense (interleaved rope, SentencePiece): converter bytes at every outtype, llama.cpp logits."""
from family_defaults import check_defaults
from family_oracle import oracle_tests

test_export, test_logits = oracle_tests("ernie4_5", ["ernie4_5"])


def test_defaults_match_transformers():
    check_defaults("ernie4_5")

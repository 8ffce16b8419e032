"""EXAONE 4.0 (Exaone4ForCausalLM -> llama.cpp exaone4): both oracles; config defaults against transformers."""
from family_defaults import check_defaults
from family_oracle import oracle_tests

test_export, test_logits = oracle_tests("exaone4", ["exaone4", "exaone4-32b"])


def test_defaults():
    check_defaults("exaone4")

"""Jais 2 (Jais2ForCausalLM -> llama.cpp jais2): both oracles; config defaults against transformers."""
from family_defaults import check_defaults
from family_oracle import oracle_tests

test_export, test_logits = oracle_tests("jais2", ["jais2", "jais2-saved"])


def test_defaults():
    check_defaults("jais2")

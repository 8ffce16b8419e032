"""GLM-4-0414 (Glm4ForCausalLM -> llama.cpp glm4): both oracles over the released and the saved config layout."""
from family_defaults import check_defaults
from family_oracle import oracle_tests

test_export, test_logits = oracle_tests("glm4", ["glm4", "glm4-saved"])


def test_defaults():
    check_defaults("glm4")

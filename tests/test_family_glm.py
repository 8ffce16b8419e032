"""GLM-4 chat in transformers' layout (GlmForCausalLM -> llama.cpp chatglm): both oracles."""
from family_defaults import check_defaults
from family_oracle import oracle_tests

test_export, test_logits = oracle_tests("glm", ["glm"])


def test_defaults():
    check_defaults("glm")

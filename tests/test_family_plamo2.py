"""PLaMo 2 (Plamo2ForCausalLM, remote code -> llama.cpp plamo2 through the converter's Plamo2Model)."""
from family_oracle import oracle_tests

FIXTURES = ["plamo2", "plamo2-untied"]
test_export, _ = oracle_tests("plamo2", FIXTURES)

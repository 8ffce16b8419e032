"""OLMo 2 and OLMo 3 (one converter class): both oracles over an OLMo-2-style fixture (post-norms, q/k
norms, grouped KV, bf16) and an OLMo-3-style one whose 4-token sliding window is crossed by the prompt."""
from family_oracle import oracle_tests

test_export, test_logits = oracle_tests("olmo2", ["olmo2", "olmo3"])

"""Granite SWA (GraniteSWAForCausalLM -> llama.cpp granite_swa): both oracles; defaults against transformers."""
import family_defaults
from family_oracle import oracle_tests

test_export, test_logits = oracle_tests("granite_swa", ["granite_swa"])


def test_defaults(monkeypatch):
    # layer_rope_theta is computed by GraniteSWAConfig from rope_theta and the depth, like layer_types
    monkeypatch.setattr(family_defaults, "DERIVED", family_defaults.DERIVED | {"layer_rope_theta"})
    family_defaults.check_defaults("granite_swa")

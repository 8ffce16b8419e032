"""HRM-Text (HrmTextForCausalLM: an L and an H stack of weightless-norm, gate-attention layers run as a
recurrence): converter bytes at every outtype, llama.cpp logits against transformers 5.24's own class, released
configs through the view's config path, refusals of what llama.cpp's hrm_text cannot run."""
from __future__ import annotations

from pathlib import Path

import pytest

from family_defaults import check_defaults
from family_oracle import oracle_tests

FIXTURES = ["hrm_text", "hrm_text-saved"]
test_export, test_logits = oracle_tests("hrm_text", FIXTURES)


def test_defaults_match_transformers():
    check_defaults("hrm_text")

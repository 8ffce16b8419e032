"""Gemma 4 (dense layout of the 31B): both oracles on the text model (sliding and full-attention layers of their own
head widths and KV head counts, keys as values on the full layer, proportional rope, soft-capped logits, per-layer
output scalars, the released config layout) and on the image-text model read as its text model (vision tower left
out, config as transformers 5.24 saves it), plus the defaults and the refusals."""
from __future__ import annotations

import pytest

from config_defaults import defaults_match_transformers, with_config
from family_oracle import oracle_tests
from hfview import HfCheckpoint
from hfview.errors import ConfigError

test_export, test_logits = oracle_tests("gemma4", ["gemma4-text", "gemma4-mm", "gemma4-moe", "gemma4-e"])


def test_defaults_are_transformers():
    from hfview.families.gemma4 import DEFAULTS
    defaults_match_transformers("gemma4_text", DEFAULTS["gemma4_text"])


def test_image_text_model_presents_no_vision_tensor(checkpoint):
    view = HfCheckpoint(checkpoint("gemma4-mm"), "f32")
    assert not [t.name for t in view.tensors if "vision" in t.name or "mm_" in t.name]
    assert view.read_tensor("token_embd.weight").shape == (32768, 32)

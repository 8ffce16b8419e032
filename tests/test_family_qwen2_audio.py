"""Qwen2-Audio (Qwen2AudioForConditionalGeneration over a Qwen2 -> llama.cpp qwen2, the converter's Qwen2Model): read
as its text model, the audio tower and projector left out and their configuration ignored. Converter bytes at every
outtype, and llama.cpp's logits against Qwen2AudioForConditionalGeneration's forward over text alone."""
from __future__ import annotations

from family_oracle import oracle_tests, reference_logits_test, wrapper_logits

test_export, _ = oracle_tests("qwen2", ["qwen2-audio"])

test_logits = reference_logits_test("qwen2", ["qwen2-audio"], wrapper_logits("Qwen2AudioForConditionalGeneration"),
                                    "Qwen2AudioForConditionalGeneration over text")


def test_the_tower_is_left_out_and_its_config_ignored(checkpoint):
    from hfview import HfCheckpoint
    from hfview.config import ignored_keys
    view = HfCheckpoint(checkpoint("qwen2-audio"), "f32")
    assert view.family.name == "qwen2" and view.arch == "qwen2"
    assert not [t.name for t in view.tensors if "audio" in t.name or "projector" in t.name]
    assert "audio_config" in ignored_keys(view.config, view.family)

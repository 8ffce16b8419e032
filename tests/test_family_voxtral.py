"""Voxtral (VoxtralForConditionalGeneration over a Llama -> llama.cpp llama, the converter's LlamaModel, which reads
its tekken.json through mistral_common): read as its text model, the audio tower and projector left out and their
configuration ignored. Converter bytes at every outtype, and llama.cpp's logits against
VoxtralForConditionalGeneration's forward over text alone."""
from __future__ import annotations

from family_oracle import oracle_tests, reference_logits_test, wrapper_logits

test_export, _ = oracle_tests("llama", ["voxtral"])

test_logits = reference_logits_test("llama", ["voxtral"], wrapper_logits("VoxtralForConditionalGeneration"),
                                    "VoxtralForConditionalGeneration over text")


def test_the_tower_is_left_out_and_its_config_ignored(checkpoint):
    from hfview import HfCheckpoint
    from hfview.config import ignored_keys
    view = HfCheckpoint(checkpoint("voxtral"), "f32")
    assert view.family.name == "llama" and view.arch == "llama"
    assert not [t.name for t in view.tensors if "audio" in t.name or "projector" in t.name]
    assert {"audio_config", "audio_token_id"} <= set(ignored_keys(view.config, view.family))

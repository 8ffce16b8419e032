"""Voxtral (VoxtralForConditionalGeneration over a Llama -> llama.cpp llama, the converter's LlamaModel, which reads
its tekken.json through mistral_common): read as its text model, the audio tower and projector left out and their
configuration ignored. Converter bytes at every outtype, and llama.cpp's logits against
VoxtralForConditionalGeneration's forward over text alone."""
from __future__ import annotations

import pytest

from family_oracle import OUTTYPES, PROMPT, nmse, oracle_tests

test_export, _ = oracle_tests("llama", ["voxtral"])


@pytest.mark.parametrize("outtype", OUTTYPES)
def test_logits_image_text(outtype, checkpoint, record_property):
    """No AutoModelForCausalLM maps voxtral: the class is named, and it runs over the ids alone."""
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    from hfview import HfCheckpoint
    from hfview.runner.stream import StreamModel

    record_property("family", "llama")
    record_property("oracle", "logits")
    path = checkpoint("voxtral")
    with StreamModel(HfCheckpoint(path, outtype), n_ctx=64) as m:
        ids = m.tokenize(PROMPT)[:16]
        assert len(ids) == 16
        ours = m.logits(ids)
    model = transformers.VoxtralForConditionalGeneration.from_pretrained(path, dtype=torch.float32)
    with torch.no_grad():
        ref = model(input_ids=torch.tensor([ids])).logits[0].float().numpy()
    value = nmse(ours, ref)
    print(f"voxtral {outtype}: NMSE {value:.3e}")
    assert value < 1e-4, f"voxtral {outtype}: NMSE {value:.3e}"


def test_the_tower_is_left_out_and_its_config_ignored(checkpoint):
    from hfview import HfCheckpoint
    from hfview.config import ignored_keys
    view = HfCheckpoint(checkpoint("voxtral"), "f32")
    assert view.family.name == "llama" and view.arch == "llama"
    assert not [t.name for t in view.tensors if "audio" in t.name or "projector" in t.name]
    assert {"audio_config", "audio_token_id"} <= set(ignored_keys(view.config, view.family))

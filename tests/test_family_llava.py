"""LLaVA-1.5 (LlavaForConditionalGeneration over a Llama -> llama.cpp llama, the converter's LlamaModel): read as its
text model, the CLIP tower and projector left out and their configuration ignored. Converter bytes at every outtype,
and llama.cpp's logits against LlavaForConditionalGeneration's forward over text alone."""
from __future__ import annotations

import pytest

from family_oracle import OUTTYPES, PROMPT, nmse, oracle_tests

test_export, _ = oracle_tests("llama", ["llava-1.5"])


@pytest.mark.parametrize("outtype", OUTTYPES)
def test_logits_image_text(outtype, checkpoint, record_property):
    """No AutoModelForCausalLM maps llava: the class is named, and it runs over the ids alone."""
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    from hfview import HfCheckpoint
    from hfview.runner.stream import StreamModel

    record_property("family", "llama")
    record_property("oracle", "logits")
    path = checkpoint("llava-1.5")
    with StreamModel(HfCheckpoint(path, outtype), n_ctx=64) as m:
        ids = m.tokenize(PROMPT)[:16]
        assert len(ids) == 16
        ours = m.logits(ids)
    model = transformers.LlavaForConditionalGeneration.from_pretrained(path, dtype=torch.float32)
    with torch.no_grad():
        ref = model(input_ids=torch.tensor([ids])).logits[0].float().numpy()
    value = nmse(ours, ref)
    print(f"llava-1.5 {outtype}: NMSE {value:.3e}")
    assert value < 1e-4, f"llava-1.5 {outtype}: NMSE {value:.3e}"


def test_the_tower_is_left_out_and_its_config_ignored(checkpoint):
    from hfview import HfCheckpoint
    from hfview.config import ignored_keys
    view = HfCheckpoint(checkpoint("llava-1.5"), "f32")
    assert view.family.name == "llama" and view.arch == "llama"
    assert not [t.name for t in view.tensors if "vision" in t.name or "mm" in t.name or "projector" in t.name]
    assert "vision_feature_select_strategy" in ignored_keys(view.config, view.family)

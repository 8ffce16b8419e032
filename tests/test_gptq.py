"""quant_method "gptq" stated in config.json (2, 4 or 8 bits; g_idx, act-order; checkpoint_format gptq or v2): each
packed linear (qweight, qzeros, scales, g_idx) read dequantized on read as the converter's dequant_gptq computes it,
placed after every other tensor as the converter adds it; byte-identical to the pinned converter's file at every
outtype; llama.cpp's logits from the view against transformers over the dequantized float32 twin (transformers
loads GPTQ only through optimum and a GPTQ kernel package). 3 bits is refused as the converter refuses it; GPTQ
stated only in quantize_config.json is refused (tests/test_resolve.py)."""
import pytest

from family_oracle import oracle_tests, twin_logits_test
from family_variants import variant
from quantized_twin import dequantized_twin

FIXTURES = ["qwen3-gptq-4bit", "qwen3-gptq-8bit-act-order"]
test_export, _ = oracle_tests("qwen3", FIXTURES)


test_logits = twin_logits_test("qwen3", FIXTURES, dequantized_twin, "dequantized-F32")


def test_weights_equal_the_twins_and_come_last(checkpoint, tmp_path):
    """Each dequantized weight equals AutoGPTQ's own dequantization (the twin's), bit for bit; the converter's order:
    the GPTQ weights after every other tensor; auto's guess: f16 (the first 16-bit matrix: a scales tensor)."""
    import numpy as np
    from safetensors.numpy import load_file

    from hfview import HfCheckpoint
    from quantized_twin import dequantized_twin

    path = checkpoint("qwen3-gptq-8bit-act-order")
    twin = load_file(str(dequantized_twin(path, tmp_path / "twin") / "model.safetensors"))
    view = HfCheckpoint(path, "f32")
    assert HfCheckpoint(path, "auto").outtype == "f16"
    stored = view._stored
    names = list(stored)
    gptq = [n for n in names if type(stored[n]).__name__ == "GPTQDequantized"]
    assert gptq and names[-len(gptq):] == gptq
    for name in gptq:
        assert np.array_equal(stored[name].read_rows(0, stored[name].shape[0]), twin[name]), name
        rows = stored[name].read_rows(3, 11)
        assert np.array_equal(rows, twin[name][3:11]), name


def test_gptq_v2_zeros_are_read_as_stored(checkpoint, tmp_path):
    """checkpoint_format gptq_v2: no offset on the zeros, as the converter reads it (bytes equal)."""
    import json

    import oracle

    from hfview import HfCheckpoint
    from hfview.export import export

    src = checkpoint("qwen3-gptq-4bit")
    quant = json.loads((src / "config.json").read_text())["quantization_config"]
    path = variant(src, tmp_path / "v2", quantization_config={**quant, "checkpoint_format": "gptq_v2"})
    ours = export(HfCheckpoint(path, "f32"), tmp_path / "ours.gguf")
    theirs = oracle.convert(path, tmp_path / "theirs.gguf", "f32")
    assert oracle.sha256(ours) == oracle.sha256(theirs), oracle.first_difference(ours, theirs)


def test_three_bits_are_refused_as_the_converter_refuses_them(checkpoint, tmp_path):
    import json

    from hfview import HfCheckpoint
    from hfview.errors import QuantizedCheckpoint

    src = checkpoint("qwen3-gptq-4bit")
    quant = json.loads((src / "config.json").read_text())["quantization_config"]
    path = variant(src, tmp_path / "three", quantization_config={**quant, "bits": 3})
    with pytest.raises(QuantizedCheckpoint, match=r"GPTQ 3-bit.*3-bit gptq dequantization is not yet implemented"):
        HfCheckpoint(path, "f32")


def test_dequantization_is_lazy(checkpoint, monkeypatch):
    from hfview import HfCheckpoint, views

    calls = []
    original = views.GPTQDequantized.read_rows
    monkeypatch.setattr(views.GPTQDequantized, "read_rows", lambda self, *a: calls.append(self.name) or original(self, *a))
    view = HfCheckpoint(checkpoint("qwen3-gptq-4bit"), "f32")
    assert calls == []
    view.read_tensor("blk.1.ffn_down.weight")
    assert calls and set(calls) == {"model.layers.1.mlp.down_proj.weight"}

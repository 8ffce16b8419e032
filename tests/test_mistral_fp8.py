"""Mistral's own format in FP8 (params.json `quantization` qformat_weight fp8_e4m3, per-tensor `qscale_weight`,
unused `qscale_act`): read by the mistral_format family through the scaled form quant_method "fp8" uses, dequantized
on read; byte-identical to the pinned converter run with --mistral-format at every outtype; llama.cpp's logits from
the view against transformers over the same weights dequantized in Transformers' layout (the fixture's -hf twin:
transformers has no loader for Mistral's format). Another qformat_weight is refused, as the converter asserts."""
import json

import numpy as np
import pytest

from family_oracle import OUTTYPES, PROMPT, nmse, oracle_tests, transformers_logits
from family_variants import variant

test_export, _ = oracle_tests("mistral_format", ["mistral-consolidated-fp8"])


@pytest.mark.parametrize("outtype", OUTTYPES)
def test_logits_against_transformers_on_dequantized_hf_twin(outtype, checkpoint, record_property):
    from hfview import HfCheckpoint
    from hfview.runner.stream import StreamModel

    record_property("family", "mistral_format")
    record_property("oracle", "logits")
    with StreamModel(HfCheckpoint(checkpoint("mistral-consolidated-fp8"), outtype), n_ctx=64) as m:
        ids = m.tokenize(PROMPT)[:16]
        assert len(ids) == 16
        ours = m.logits(ids)
    ref = transformers_logits(checkpoint("mistral-consolidated-fp8-hf"), ids)
    value = nmse(ours, ref)
    print(f"mistral-consolidated-fp8 {outtype}: NMSE {value:.3e} vs transformers on the dequantized -hf twin, "
          f"top-1 agreement {np.mean(ours.argmax(-1) == ref.argmax(-1)):.3f}")
    assert value < 1e-4


def test_scales_consumed_and_the_view_names_them(checkpoint):
    from hfview import HfCheckpoint

    view = HfCheckpoint(checkpoint("mistral-consolidated-fp8"), "auto")
    assert view.outtype == "bf16" and view.family.name == "mistral_format"
    assert not [t.name for t in view.tensors if "scale" in t.name]
    assert view.tensor("blk.1.ffn_down.weight").describe().startswith("FP8 x qscale_weight")


def test_another_qformat_is_refused_as_the_converter_asserts(checkpoint, tmp_path):
    from hfview import HfCheckpoint
    from hfview.errors import QuantizedCheckpoint

    src = checkpoint("mistral-consolidated-fp8")
    params = json.loads((src / "params.json").read_text())
    path = variant(src, tmp_path / "m", "params.json", quantization={**params["quantization"], "qformat_weight": "int8"})
    with pytest.raises(QuantizedCheckpoint, match=r'params.json declares quantization.*qformat_weight == "fp8_e4m3"'):
        HfCheckpoint(path, "f32")

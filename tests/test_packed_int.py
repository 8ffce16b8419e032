"""compressed-tensors pack-quantized (W4A16: int4 codes packed in int32 words along the inputs, a scale per row and
group, symmetric or with a packed `weight_zero_point`), read dequantized on read as the converter's dequant_packed
computes it, each weight after every other tensor as the converter adds it: byte-identical to the pinned converter
at every outtype; llama.cpp's logits from the view against transformers over the dequantized float32 twin
(transformers reads compressed-tensors only with its package). What the converter cannot map beside the packed
weights (an activation-order g_idx) is refused as it fails."""
import json
import shutil

import pytest

from family_oracle import oracle_tests, twin_logits_test
from family_variants import variant
from quantized_twin import dequantized_twin

FIXTURES = ["qwen3-ct-w4a16", "qwen3-ct-w4a16-asym"]
test_export, _ = oracle_tests("qwen3", FIXTURES)


test_logits = twin_logits_test("qwen3", FIXTURES, dequantized_twin, "dequantized-F32")


def test_weights_equal_the_twins_row_ranges_included(checkpoint, tmp_path):
    import numpy as np
    from safetensors.numpy import load_file

    from hfview import HfCheckpoint
    from hfview.views import PackedIntDequantized
    from quantized_twin import dequantized_twin

    path = checkpoint("qwen3-ct-w4a16-asym")
    twin = load_file(str(dequantized_twin(path, tmp_path / "twin") / "model.safetensors"))
    stored = HfCheckpoint(path, "f32")._stored
    packed = [n for n, t in stored.items() if isinstance(t, PackedIntDequantized)]
    assert packed and list(stored)[-len(packed):] == packed
    for name in packed:
        t = stored[name]
        assert np.array_equal(t.read_rows(0, t.shape[0]), twin[name]), name
        assert np.array_equal(t.read_rows(5, 13), twin[name][5:13]), name  # zero-point words cut mid-way


def test_activation_order_g_idx_is_refused_as_the_converter_fails(checkpoint, tmp_path):
    import torch
    from safetensors.torch import load_file, save_file

    from hfview import HfCheckpoint
    from hfview.errors import CheckpointError

    src = checkpoint("qwen3-ct-w4a16")
    path = tmp_path / "g"
    shutil.copytree(src, path)
    tensors = load_file(str(src / "model.safetensors"))
    tensors["model.layers.0.mlp.up_proj.weight_g_idx"] = torch.arange(64, dtype=torch.int32) // 16
    save_file(tensors, str(path / "model.safetensors"), metadata={"format": "pt"})
    with pytest.raises(CheckpointError, match=r"up_proj.weight_g_idx.*Can not map tensor"):
        HfCheckpoint(path, "f32")


def test_channel_strategy_for_packed_weights_is_refused(checkpoint, tmp_path):
    from hfview import HfCheckpoint
    from hfview.errors import QuantizedCheckpoint

    src = checkpoint("qwen3-ct-w4a16")
    quant = json.loads((src / "config.json").read_text())["quantization_config"]
    quant["config_groups"]["group_0"]["weights"]["strategy"] = "channel"
    with pytest.raises(QuantizedCheckpoint, match=r"pack-quantized' with weight strategy 'channel'"):
        HfCheckpoint(variant(src, tmp_path / "c", quantization_config=quant), "f32")

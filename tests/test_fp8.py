"""quant_method "fp8" (conversion/base.py dequant_model): block-scaled and per-tensor / per-row FP8 read dequantized
on read, byte-identical to the pinned converter's file at every outtype (Qwen3 and DeepSeek-V3 fixtures, widths
that are not whole blocks among them); llama.cpp's logits from the view against transformers loading the same FP8
checkpoint where its loader can (whole blocks: on the CPU its finegrained-FP8 path dequantizes the weights), else
against transformers over a torch-dequantized float32 twin. Forms hfview does not read stay refused, naming them
(the other forms it reads: tests/test_mxfp4.py, test_scaled_fp8.py, test_mistral_fp8.py, test_gptq.py)."""
import json
import shutil

import numpy as np
import pytest

from family_oracle import OUTTYPES, check_logits, oracle_tests, twin_logits_test

# bytes: every FP8 fixture; logits: transformers loads the FP8 checkpoints whose widths are whole blocks itself
test_export, test_logits_fp8_loaded_by_transformers = oracle_tests(
    "qwen3", ["qwen3-fp8", "qwen3-fp8-whole", "qwen3-fp8-tensor"])
del test_logits_fp8_loaded_by_transformers
# a mixture with latent attention: the experts stacked, kv_b_proj split, over dequantized weights
test_export_deepseek_v3, _ = oracle_tests("deepseek_v3", ["deepseek_v3-fp8"])


@pytest.mark.parametrize("outtype", OUTTYPES)
@pytest.mark.parametrize("name", ["qwen3-fp8-whole", "qwen3-fp8-tensor"])
def test_logits_fp8_loaded_by_transformers(name, outtype, checkpoint, record_property):
    """transformers 5 loads the FP8 checkpoint itself: on the CPU its finegrained-FP8 loader dequantizes each
    weight (float32 product of the e4m3 value and its scale) into the float32 model."""
    record_property("family", "qwen3")
    record_property("oracle", "logits")
    check_logits(name, outtype, checkpoint)


def _dequantized_twin(src, dst):
    """The FP8 checkpoint dequantized by torch as its release's own recipe states it (scale repeated over its
    block, trimmed at the edge, times the e4m3 value in float32), saved in float32 without quantization_config:
    transformers' loader refuses widths that are not whole blocks, so it reads this twin instead."""
    from safetensors import safe_open
    from safetensors.torch import save_file

    shutil.copytree(src, dst)
    config = json.loads((dst / "config.json").read_text())
    block = config.pop("quantization_config")["weight_block_size"]
    with safe_open(str(src / "model.safetensors"), "pt") as f:
        tensors = {n: f.get_tensor(n) for n in f.keys()}
    out = {}
    for name, t in tensors.items():
        if name.endswith("_scale_inv"):
            continue
        if name + "_scale_inv" in tensors:
            scale = tensors[name + "_scale_inv"].float()
            scale = scale.repeat_interleave(block[0], 0).repeat_interleave(block[1], 1)[:t.shape[0], :t.shape[1]]
            t = t.float() * scale
        out[name] = t.float().contiguous()
    save_file(out, str(dst / "model.safetensors"), metadata={"format": "pt"})
    config["torch_dtype"] = "float32"
    (dst / "config.json").write_text(json.dumps(config))


# qwen3-fp8 (intermediate 80 over [32, 32] blocks): against transformers over its torch-dequantized float32 twin
test_logits_against_dequantized_f32_twin = twin_logits_test(
    "qwen3", ["qwen3-fp8"], _dequantized_twin, "dequantized-F32")


def test_e4m3_table_is_torchs():
    """Each of the 256 float8_e4m3fn codes decodes to the float32 bits torch's .float() gives (NaN included)."""
    torch = pytest.importorskip("torch")
    from hfview.views import E4M3

    theirs = torch.arange(256, dtype=torch.uint8).view(torch.float8_e4m3fn).float().numpy()
    assert np.array_equal(E4M3.view(np.uint32), theirs.view(np.uint32))


def test_e5m2_table_is_torchs():
    """Each of the 256 float8_e5m2 codes decodes to the float32 bits torch's .float() gives (NaNs included)."""
    torch = pytest.importorskip("torch")
    from hfview.views import E5M2

    theirs = torch.arange(256, dtype=torch.uint8).view(torch.float8_e5m2).float().numpy()
    assert np.array_equal(E5M2.view(np.uint32), theirs.view(np.uint32))


def test_e5m2_weights_read_as_the_converter(checkpoint, tmp_path):
    """FP8 weights stored as e5m2 (which the converter's weight.float() widens as well): byte-identical."""
    import oracle
    import torch
    from safetensors.torch import load_file, save_file

    from hfview import HfCheckpoint
    from hfview.export import export

    src = checkpoint("qwen3-fp8-tensor")
    path = tmp_path / "e5m2"
    shutil.copytree(src, path)
    tensors = load_file(str(src / "model.safetensors"))
    for name in list(tensors):
        if tensors[name].dtype == torch.float8_e4m3fn:
            tensors[name] = tensors[name].float().to(torch.float8_e5m2)
    save_file(tensors, str(path / "model.safetensors"), metadata={"format": "pt"})
    ours = export(HfCheckpoint(path, "f32"), tmp_path / "ours.gguf")
    theirs = oracle.convert(path, tmp_path / "theirs.gguf", "f32")
    assert oracle.sha256(ours) == oracle.sha256(theirs), oracle.first_difference(ours, theirs)


def test_scales_are_consumed(checkpoint):
    """The view presents no scale tensor, and the auto outtype passes over an FP8 first matrix (lm_head here)
    to the embeddings' bf16, as the converter's guess does."""
    from hfview import HfCheckpoint

    view = HfCheckpoint(checkpoint("qwen3-fp8-tensor"), "auto")
    assert view.outtype == "bf16"
    assert not [t.name for t in view.tensors if "scale" in t.name]


def _with_config(src, dst, edit):
    shutil.copytree(src, dst)
    config = json.loads((dst / "config.json").read_text())
    edit(config)
    (dst / "config.json").write_text(json.dumps(config))
    return dst


@pytest.mark.parametrize("quant, form", [
    ({"quant_method": "fbgemm_fp8"}, "FP8 \\(FBGEMM\\)"),
    ({"quant_method": "compressed-tensors", "format": "float-quantized"}, "compressed-tensors"),
    ({"quant_method": "gptq", "bits": 3}, "GPTQ 3-bit"),
    ({"quant_method": "mxfp4"}, "MXFP4"),
])
def test_other_quantized_forms_stay_refused(checkpoint, tmp_path, quant, form):
    from hfview import HfCheckpoint
    from hfview.errors import QuantizedCheckpoint

    path = _with_config(checkpoint("qwen3-fp8"), tmp_path / "q", lambda c: c.__setitem__("quantization_config", quant))
    with pytest.raises(QuantizedCheckpoint, match=form):
        HfCheckpoint(path, "f32")


def test_block_scale_of_the_wrong_shape_is_refused(checkpoint, tmp_path):
    """weight_block_size that the stored scales do not tile: refused naming the scale and the shape it needs."""
    from hfview import HfCheckpoint
    from hfview.errors import CheckpointError

    path = _with_config(checkpoint("qwen3-fp8"), tmp_path / "q",
                        lambda c: c["quantization_config"].__setitem__("weight_block_size", [16, 16]))
    with pytest.raises(CheckpointError, match="weight_scale_inv.*needs"):
        HfCheckpoint(path, "f32")


def test_bad_weight_block_size_is_refused(checkpoint, tmp_path):
    from hfview import HfCheckpoint
    from hfview.errors import QuantizedCheckpoint

    path = _with_config(checkpoint("qwen3-fp8"), tmp_path / "q",
                        lambda c: c["quantization_config"].__setitem__("weight_block_size", [0, "a"]))
    with pytest.raises(QuantizedCheckpoint, match="weight_block_size"):
        HfCheckpoint(path, "f32")


@pytest.mark.parametrize("outtype", ["f32", "f16"])
def test_logits_deepseek_v3_against_dequantized_f32_twin(outtype, checkpoint, tmp_path_factory, record_property):
    """deepseek_v3-fp8 (widths of 24 and 88 over [16, 16] blocks, which transformers' FP8 loader refuses) against
    transformers over its torch-dequantized float32 twin, at f32 and f16: at bf16 llama.cpp's bf16 activations flip
    this router's choices even over the converter's own file, as tests/test_family_deepseek_v3.py measures."""
    record_property("family", "deepseek_v3")
    record_property("oracle", "logits")
    path = checkpoint("deepseek_v3-fp8")
    twin = tmp_path_factory.getbasetemp() / f"{path.name}-dequantized-f32-twin"
    if not (twin / "model.safetensors").is_file():
        _dequantized_twin(path, twin)
    check_logits("deepseek_v3-fp8", outtype, checkpoint, reference=twin, against="its dequantized-F32 twin")


def test_activation_scales_dropped_and_a_1d_row_scale_as_the_converter(checkpoint, tmp_path):
    """Static FP8 as Ministral 3 / Mistral-Small-4 release it: `.activation_scale` and `_activation_scale` tensors
    beside the weights (the converter drops both, unused), and a per-row scale stored 1-D ([rows], which the
    converter broadcasts over the row): export byte-identical to the converter's file."""
    import oracle
    import torch
    from family_variants import variant
    from safetensors.torch import load_file, save_file

    from hfview import HfCheckpoint
    from hfview.export import export

    src = checkpoint("qwen3-fp8-tensor")
    path = variant(src, tmp_path / "static", quantization_config={
        "activation_scheme": "static", "fmt": "e4m3", "quant_method": "fp8"})
    tensors = load_file(str(src / "model.safetensors"))
    tensors["lm_head.weight_scale_inv"] = tensors["lm_head.weight_scale_inv"].reshape(-1).contiguous()
    tensors["model.layers.0.self_attn.q_proj.activation_scale"] = torch.tensor(0.02)
    tensors["model.layers.1.mlp.down_proj.input_activation_scale"] = torch.tensor([0.03])
    (path / "model.safetensors").unlink()
    save_file(tensors, str(path / "model.safetensors"), metadata={"format": "pt"})

    view = HfCheckpoint(path, "f32")
    assert not [t.name for t in view.tensors if "scale" in t.name]
    ours = export(view, tmp_path / "ours.gguf")
    theirs = oracle.convert(path, tmp_path / "theirs.gguf", "f32")
    assert oracle.sha256(ours) == oracle.sha256(theirs), oracle.first_difference(ours, theirs)

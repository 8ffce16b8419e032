"""ModelOpt FP8 (hf_quant_config.json or config.json quant_method modelopt, quant_algo FP8: a per-tensor
`weight_scale`, `input_scale` and KV scales dropped) and compressed-tensors float-quantized FP8 (channel or block
`weight_scale`; int-quantized int8 alike), read dequantized on read by the one scaled form the converter's fp8 uses (views.scale_dequantized):
byte-identical to the pinned converter's file at every outtype (a tied head, a width that is not whole blocks among
the fixtures); llama.cpp's logits from the view against transformers over each checkpoint's dequantized float32 twin
(tests/quantized_twin.py: transformers cannot load ModelOpt's FP8, nor compressed-tensors without its package).
Other ModelOpt algorithms (MIXED_PRECISION without NVFP4 layers, W4A8_AWQ; NVFP4 is tests/test_nvfp4.py's) and other compressed-tensors formats are refused by
name before any weight is read."""
import json
import shutil

import pytest

from family_oracle import oracle_tests, twin_logits_test
from family_variants import variant
from quantized_twin import dequantized_twin

MODELOPT = ["qwen3-modelopt-fp8", "qwen3-modelopt-fp8-config"]
COMPRESSED = ["qwen3-ct-fp8-channel", "qwen3-ct-fp8-block", "qwen3-ct-int8-channel", "qwen3-ct-fp8-naive"]

test_export, _ = oracle_tests("qwen3", MODELOPT + COMPRESSED)

test_logits = twin_logits_test("qwen3", MODELOPT + COMPRESSED, dequantized_twin, "dequantized-F32")


def test_scales_are_consumed_and_unused_ones_dropped(checkpoint):
    from hfview import HfCheckpoint

    for name in MODELOPT + COMPRESSED:
        view = HfCheckpoint(checkpoint(name), "auto")
        assert view.outtype == "bf16"
        assert not [t.name for t in view.tensors if "scale" in t.name], name
        q = view.tensor("blk.0.attn_q.weight").describe()
        assert q.startswith("I8 x weight_scale" if "int8" in name else "FP8 x weight_scale"), q
    assert "per 32x32 block" in HfCheckpoint(checkpoint("qwen3-ct-fp8-block"), "f32").tensor(
        "blk.1.ffn_down.weight").describe()


def test_dequantization_is_lazy(checkpoint, monkeypatch):
    """Opening the view reads no FP8 weight: each is dequantized when its rows are read."""
    from hfview import HfCheckpoint, views

    calls = []
    original = views.FP8Dequantized.read_rows
    monkeypatch.setattr(views.FP8Dequantized, "read_rows", lambda self, *a: calls.append(self.name) or original(self, *a))
    view = HfCheckpoint(checkpoint("qwen3-ct-fp8-channel"), "f32")
    assert calls == []
    view.read_tensor("blk.0.ffn_up.weight")
    assert calls == ["model.layers.0.mlp.up_proj.weight"]


def _record(path, **quantization):
    (path / "hf_quant_config.json").unlink()
    (path / "hf_quant_config.json").write_text(json.dumps(
        {"producer": {"name": "modelopt", "version": "0.29.0"}, "quantization": quantization}))
    return path


@pytest.mark.parametrize("quantization, named", [
    # (NVFP4, W4A16_NVFP4 and MIXED_PRECISION with NVFP4 layers are read: tests/test_nvfp4.py)
    ({"quant_algo": "MIXED_PRECISION", "quantized_layers": {"model.layers.0.mlp.up_proj": {"quant_algo": "W4A8_AWQ"}}},
     r"quant_algo 'MIXED_PRECISION' and per-layer quant_algo W4A8_AWQ"),
    ({"quant_algo": "W4A8_AWQ", "group_size": 128}, r"quant_algo 'W4A8_AWQ'"),
])
def test_other_modelopt_algorithms_are_refused_naming_quant_algo(quantization, named, checkpoint, tmp_path):
    from hfview import HfCheckpoint
    from hfview.errors import QuantizedCheckpoint

    path = _record(variant(checkpoint("qwen3-modelopt-fp8"), tmp_path / "m"), **quantization)
    with pytest.raises(QuantizedCheckpoint, match=named):
        HfCheckpoint(path, "f32")


def test_a_record_of_another_producer_is_refused(checkpoint, tmp_path):
    """The converter takes the record's producer as the quant method, and refuses any it does not know."""
    from hfview import HfCheckpoint
    from hfview.errors import QuantizedCheckpoint

    path = variant(checkpoint("qwen3-modelopt-fp8"), tmp_path / "m")
    (path / "hf_quant_config.json").unlink()
    (path / "hf_quant_config.json").write_text(json.dumps({"producer": {"name": "someone"},
                                                           "quantization": {"quant_algo": "FP8"}}))
    with pytest.raises(QuantizedCheckpoint, match="hf_quant_config.json declares quantization"):
        HfCheckpoint(path, "f32")


def _group(config, **weights):
    config["quantization_config"]["config_groups"]["group_0"]["weights"].update(weights)


@pytest.mark.parametrize("edit, named", [
    (lambda c: c["quantization_config"].__setitem__("format", "pack-quantized"), r"format 'pack-quantized'"),
    (lambda c: _group(c, type="int"), "weights other than 8-bit float"),
    (lambda c: _group(c, strategy="group", group_size=128), "weight strategy 'group'"),
    (lambda c: c["quantization_config"]["config_groups"].__setitem__("group_1", {}), "2 config groups"),
])
def test_other_compressed_tensors_forms_are_refused_naming_them(edit, named, checkpoint, tmp_path):
    from hfview import HfCheckpoint
    from hfview.errors import QuantizedCheckpoint

    src = checkpoint("qwen3-ct-fp8-channel")
    config = json.loads((src / "config.json").read_text())
    edit(config)
    path = variant(src, tmp_path / "c", quantization_config=config["quantization_config"])
    with pytest.raises(QuantizedCheckpoint, match=named):
        HfCheckpoint(path, "f32")


def test_modelopt_scale_without_weight_is_dropped_as_the_converter_drops_it(checkpoint, tmp_path):
    """A `weight_scale` whose weight is not in the checkpoint (a module ModelOpt exported otherwise): the converter
    removes it, and so does the view; the export stays byte-identical."""
    import oracle
    import torch
    from safetensors.torch import load_file, save_file

    from hfview import HfCheckpoint
    from hfview.export import export

    src = checkpoint("qwen3-modelopt-fp8")
    path = tmp_path / "orphan"
    shutil.copytree(src, path)
    tensors = load_file(str(src / "model.safetensors"))
    tensors["model.layers.1.mlp.extra.weight_scale"] = torch.tensor(0.5)
    save_file(tensors, str(path / "model.safetensors"), metadata={"format": "pt"})
    ours = export(HfCheckpoint(path, "f32"), tmp_path / "ours.gguf")
    theirs = oracle.convert(path, tmp_path / "theirs.gguf", "f32")
    assert oracle.sha256(ours) == oracle.sha256(theirs), oracle.first_difference(ours, theirs)


def test_compressed_tensors_static_input_scale_is_refused_as_the_converter_fails(checkpoint, tmp_path):
    """A static activation scale (`input_scale`) beside compressed-tensors FP8: the converter's dequant_model reads
    only weight_scale and then fails to map it; the view refuses it naming the tensor and the converter's error."""
    import torch
    from safetensors.torch import load_file, save_file

    from hfview import HfCheckpoint
    from hfview.errors import CheckpointError

    src = checkpoint("qwen3-ct-fp8-channel")
    path = tmp_path / "static"
    shutil.copytree(src, path)
    tensors = load_file(str(src / "model.safetensors"))
    tensors["model.layers.0.mlp.up_proj.input_scale"] = torch.tensor([0.02])
    save_file(tensors, str(path / "model.safetensors"), metadata={"format": "pt"})
    with pytest.raises(CheckpointError, match=r"up_proj.input_scale.*Can not map tensor"):
        HfCheckpoint(path, "f32")


def test_released_modelopt_fp8_config_is_accepted():
    """nvidia/Llama-3.1-70B-Instruct-FP8 as released (config.json stating no quantization, hf_quant_config.json
    quant_algo FP8 with an FP8 KV cache): accepted, its KV the released values."""
    from released_config import DATA, config_path_kv

    path = DATA / "llama" / "nvidia__Llama-3.1-70B-Instruct-FP8.json"
    released = json.loads(path.read_text())
    kv = config_path_kv(path)
    assert kv["llama.block_count"] == released["num_hidden_layers"]
    assert kv["llama.embedding_length"] == released["hidden_size"]


@pytest.mark.parametrize("name, quant", [("qwen3-modelopt-fp8", "Q8_0"), ("qwen3-ct-fp8-block", "Q4_K_M"),
                                         ("qwen3-gptq-4bit", "Q4_0"), ("qwen3-ct-w4a16-asym", "Q6_K")])
def test_quant_over_a_dequantized_view_is_llama_quantizes(name, quant, checkpoint, quantized, tmp_path):
    """--quant over a dequantized view works as over any view: llama_model_quantize's file over the converter's."""
    import oracle

    from hfview import HfCheckpoint
    from hfview.export import export
    from hfview.quant import FILE_TYPES

    theirs = quantized(name, "bf16", FILE_TYPES[quant][0])
    ours = export(HfCheckpoint(checkpoint(name), "bf16", quant=quant), tmp_path / "ours.gguf")
    assert oracle.sha256(ours) == oracle.sha256(theirs), oracle.first_difference(ours, theirs)


@pytest.mark.parametrize("name, outtype, args", [
    ("qwen3-fp8", "bf16", ()), ("qwen3-modelopt-fp8", "f32", ()), ("qwen3-ct-fp8-block", "f16", ()),
    ("deepseek_v3-fp8", "bf16", ()), ("mistral-consolidated-fp8", "auto", ("--mistral-format",)),
])
def test_fp8_as_q8_is_the_converters(name, outtype, args, checkpoint, tmp_path):
    """HfCheckpoint(fp8_as_q8=True) is the converter's --fp8-as-q8: each matrix dequantized from FP8 written as Q8_0
    (F16 where a row is not whole blocks of 32: the fixtures' 80- and 24-wide rows), the rest at the outtype."""
    import oracle

    from hfview import HfCheckpoint
    from hfview.export import export
    from hfview.gguf_layout import GGMLType

    view = HfCheckpoint(checkpoint(name), outtype, fp8_as_q8=True)
    assert GGMLType.Q8_0 in {t.ggml_type for t in view.tensors}
    ours = export(view, tmp_path / "ours.gguf")
    theirs = oracle.convert(checkpoint(name), tmp_path / "theirs.gguf", outtype, "--fp8-as-q8", *args)
    assert oracle.sha256(ours) == oracle.sha256(theirs), oracle.first_difference(ours, theirs)


def test_fp8_as_q8_on_a_checkpoint_without_fp8_is_refused(checkpoint):
    from hfview import HfCheckpoint
    from hfview.errors import ConfigError

    with pytest.raises(ConfigError, match="--fp8-as-q8 applies to FP8 checkpoints; this one is Gptq"):
        HfCheckpoint(checkpoint("qwen3-gptq-4bit"), "f32", fp8_as_q8=True)


def test_modelopt_fp8_per_channel_is_read_as_the_converter(checkpoint, tmp_path):
    """quant_algo FP8_PER_CHANNEL_PER_TOKEN: a 1-D weight_scale per output row, broadcast over the row as the
    converter's dequant_simple does (bytes equal); FP8_PB_WO (2-D block scales it cannot broadcast) refused."""
    import oracle
    import torch
    from safetensors.torch import load_file, save_file

    from hfview import HfCheckpoint
    from hfview.errors import QuantizedCheckpoint
    from hfview.export import export

    src = checkpoint("qwen3-modelopt-fp8")
    path = tmp_path / "channel"
    shutil.copytree(src, path)
    tensors = load_file(str(src / "model.safetensors"))
    for name in [n for n in tensors if n.endswith(".weight_scale")]:
        weight = name.removesuffix("_scale")
        w = tensors[weight].float() * tensors[name]
        scale = (w.abs().amax(1) / 448).clamp(min=1e-12)
        tensors[weight] = (w / scale[:, None]).clamp(-448, 448).to(torch.float8_e4m3fn)
        tensors[name] = scale.contiguous()
    save_file(tensors, str(path / "model.safetensors"), metadata={"format": "pt"})
    _record(path, quant_algo="FP8_PER_CHANNEL_PER_TOKEN", kv_cache_quant_algo=None, exclude_modules=["lm_head"])
    ours = export(HfCheckpoint(path, "bf16"), tmp_path / "ours.gguf")
    theirs = oracle.convert(path, tmp_path / "theirs.gguf", "bf16")
    assert oracle.sha256(ours) == oracle.sha256(theirs), oracle.first_difference(ours, theirs)
    _record(path, quant_algo="FP8_PB_WO")
    with pytest.raises(QuantizedCheckpoint, match="quant_algo 'FP8_PB_WO'"):
        HfCheckpoint(path, "bf16")


def test_fp8_as_q8_from_the_command_line_is_the_converters(checkpoint, tmp_path):
    """`hfview export --fp8-as-q8` writes the converter's --fp8-as-q8 file; `inspect --fp8-as-q8` shows its Q8_0."""
    import oracle
    from click.testing import CliRunner

    from hfview.cli import main

    ours = tmp_path / "ours.gguf"
    done = CliRunner().invoke(main, ["export", str(checkpoint("qwen3-fp8")), str(ours), "--outtype", "bf16",
                                     "--fp8-as-q8", "--no-progress"])
    assert done.exit_code == 0, done.output
    theirs = oracle.convert(checkpoint("qwen3-fp8"), tmp_path / "theirs.gguf", "bf16", "--fp8-as-q8")
    assert oracle.sha256(ours) == oracle.sha256(theirs), oracle.first_difference(ours, theirs)
    shown = CliRunner().invoke(main, ["inspect", str(checkpoint("qwen3-fp8")), "--fp8-as-q8", "--json"])
    assert shown.exit_code == 0 and "Q8_0" in shown.output, shown.output[-2000:]

"""Kimi-K2.5 (KimiK25ForConditionalGeneration around a Kimi-K2 text_config, int4 pack-quantized routed experts whose
quantization_config sits inside text_config) read as its text decoder on the deepseek_v3 family: converter bytes at
every outtype, llama.cpp logits against transformers' DeepseekV3ForCausalLM over the dequantized float32 twin.

Bytes. transformers 5.24 has a kimi_k25 config class (Kimi_K25Config), so the converter's AutoConfig reads the
wrapper natively and its text_config (model_type kimi_k2) as deepseek_v3, with DeepseekV3Config's defaults and its
computed head_dim (which the converter's TextModel writes early as key / value length); the view reads it so too
(hfview.config.TEXT_READ_AS). The converter merges text_config over the top level, so it finds the
quantization_config there and dequantizes the packed experts (dequant_packed); the view does the same
(hfview.quantized.quantized_form). The release's tokenization_kimi.py fails under transformers 5 as shipped
(tests/test_family_kimi_k2.py), so the converter runs on the restored copy, as for Kimi-K2.

Logits. transformers reads compressed-tensors only with its package, so the reference is the dequantized twin of the
text model (tests/quantized_twin.py's packed_dequantized, as its own decompressor states the unpacking): the
text_config alone as a deepseek_v3 config.json, the language_model. prefix dropped, the vision tensors left out, each
packed expert weight dequantized to float32; transformers' DeepseekV3ForCausalLM runs it.
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest

import oracle
from family_oracle import OUTTYPES, check_logits
from test_family_kimi_k2 import restored

FIXTURE = "kimi_k25"


@pytest.mark.parametrize("outtype", OUTTYPES)
def test_export(outtype, checkpoint, tmp_path_factory, tmp_path, record_property):
    """hfview export of the fixture as released == the converter's file for the restored copy (sha256)."""
    from hfview import HfCheckpoint
    from hfview.export import export

    record_property("family", "deepseek_v3")
    record_property("oracle", "bytes")
    src = checkpoint(FIXTURE)
    theirs = oracle.convert_cached(restored(src, tmp_path_factory.getbasetemp() / "kimi_k25-restored"), outtype)
    ours = export(HfCheckpoint(src, outtype), tmp_path / "ours.gguf")
    if oracle.sha256(ours) != oracle.sha256(theirs):
        pytest.fail(f"kimi_k25 --outtype {outtype}: {oracle.first_difference(ours, theirs)}")


def text_twin(src: Path, dst: Path) -> None:
    """The text model of the fixture in float32: text_config as a deepseek_v3 config.json (no auto_map, no
    quantization), the weights without language_model., the vision tower and projector left out, each packed expert
    weight dequantized."""
    from safetensors import safe_open
    from safetensors.torch import save_file

    from quantized_twin import packed_dequantized

    dst.mkdir(parents=True, exist_ok=True)
    text = json.loads((src / "config.json").read_text(encoding="utf-8"))["text_config"]
    weights = next(iter(text.pop("quantization_config")["config_groups"].values()))["weights"]
    text.pop("auto_map")
    text.update(model_type="deepseek_v3", torch_dtype="float32")
    (dst / "config.json").write_text(json.dumps(text, indent=2), encoding="utf-8")
    with safe_open(str(src / "model.safetensors"), "pt") as f:
        stored = {n: f.get_tensor(n) for n in f.keys()}
    out = {}
    for name, t in stored.items():
        if not name.startswith("language_model.") or name.endswith(("_scale", "_shape")):
            continue
        base = name.removeprefix("language_model.")
        if name.endswith(".weight_packed"):
            w = name.removesuffix("_packed")
            out[base.removesuffix("_packed")] = packed_dequantized(t, stored[w + "_scale"], None, stored[w + "_shape"],
                                                                   weights["num_bits"], weights["group_size"])
        else:
            out[base] = t.float().contiguous()
    save_file(out, str(dst / "model.safetensors"), metadata={"format": "pt"})


@pytest.fixture(scope="module")
def twin(checkpoint, tmp_path_factory) -> Path:
    path = tmp_path_factory.getbasetemp() / "kimi_k25-text-twin"
    if not (path / "model.safetensors").is_file():
        text_twin(checkpoint(FIXTURE), path)
    return path


@pytest.mark.parametrize("outtype", ["f32", "f16"])
def test_logits(outtype, checkpoint, twin, record_property):
    """llama.cpp fed from the view vs transformers' DeepseekV3ForCausalLM over the dequantized twin: NMSE < 1e-4
    (measured: f32 3.4e-5, f16 4.0e-5; the view's dequantized experts equal the twin's exactly, and the unquantized
    kimi_k2 fixture's f32 is 4.8e-5 too: llama.cpp's deepseek2 against transformers' forward, not the int4 read)."""
    record_property("family", "deepseek_v3")
    record_property("oracle", "logits")
    check_logits(FIXTURE, outtype, checkpoint, reference=twin, against="its dequantized-F32 DeepseekV3 twin")


@pytest.mark.parametrize("outtype", ["bf16", "auto"])
def test_logits_bf16_within_the_converter_files_measured_ceiling(outtype, checkpoint, twin, tmp_path_factory,
                                                                  record_property):
    """At bf16 (and auto, bf16 for these bf16 weights) llama.cpp rounds the activations to bf16 in every matmul: the
    view misses the twin by NMSE 1.87e-4 (top-1 1.000), and llama.cpp running the converter's own file (of the
    restored copy) misses it by as much, measured each run, as deepseek_v3's and kimi_k2's bf16 ceilings (~2e-4).
    The view's bytes are the file's, so its logits must miss by no more."""
    from converter_ceiling import check_within_ceiling
    from family_oracle import transformers_logits

    record_property("family", "deepseek_v3")
    record_property("oracle", "logits")
    restored_root = tmp_path_factory.getbasetemp() / "kimi_k25-restored"
    check_within_ceiling(FIXTURE, outtype, checkpoint,
                         lambda name, ot: oracle.convert_cached(restored(checkpoint(name), restored_root), ot),
                         lambda path, ids: transformers_logits(twin, ids))


def test_read_as_its_text_model_with_its_experts_dequantized(checkpoint):
    """The wrapper is read by deepseek_v3 (its text_config read as deepseek_v3, as transformers' Kimi_K25Config
    reads it); the packed experts are presented dequantized, the vision tensors not at all."""
    from hfview import HfCheckpoint
    from hfview.quantized import PackedForm, quantized_form
    from hfview.config import read_config

    path = checkpoint(FIXTURE)
    raw = read_config(path / "config.json")
    assert "quantization_config" not in raw and "quantization_config" in raw["text_config"]
    assert quantized_form(raw, path / "config.json") == PackedForm(4, 16)
    view = HfCheckpoint(path, "f32")
    assert view.family.name == "deepseek_v3" and view.hparams["model_type"] == "deepseek_v3"
    names = {t.name for t in view.tensors}
    assert "blk.1.ffn_gate_exps.weight" in names
    assert not [n for n in names if "vision" in n or "mm" in n or n.startswith("v.")]


def test_a_quantization_config_inside_text_config_is_refused_by_name_when_unread(checkpoint, tmp_path):
    """The text_config's quantization is the one checked: a form hfview does not read there is refused by name."""
    from family_variants import variant
    from hfview import HfCheckpoint
    from hfview.errors import QuantizedCheckpoint

    src = checkpoint(FIXTURE)
    text = json.loads((src / "config.json").read_text())["text_config"]
    quant = dict(text["quantization_config"], format="marlin-24")
    with pytest.raises(QuantizedCheckpoint, match="format 'marlin-24'"):
        HfCheckpoint(variant(src, tmp_path / "v", text_config={**text, "quantization_config": quant}), "f32")

"""DeepSeek-V4 (DeepseekV4ForCausalLM -> llama.cpp `deepseek4`, the converter's DeepseekV4Model), in the only form the
pinned converter converts: the release's own (DeepSeek's tensor names, MXFP4 routed experts, FP8 linears with E8M0
scales or unquantized ones). Fixtures: fixtures/families/deepseek_v4.py.

* bytes: `hfview export` == the pinned converter's file at every outtype, for bf16 linears (deepseek_v4), FP8 ones
  (deepseek_v4-fp8: dequantized and written Q8_0) and f32 ones (deepseek_v4-f32). DeepseekV4Model keeps every
  matrix in its stored type (or Q8_0 from FP8) and the experts MXFP4, so every outtype gives one file.
* logits: llama.cpp from the view vs transformers 5.24 loading the same quantized checkpoint (on the CPU it
  dequantizes the FP8 weights and the FP4 experts itself), within the measured ceiling of the converter's own file:
  measured NMSE 1.6e-4 (bf16 linears: llama.cpp's BF16 matmuls), 9.4e-4 (FP8 linears written Q8_0), 1.2e-4 (f32
  linears: the MXFP4 expert products, whose activations ggml quantizes to Q8_0); top-1 agreement 0.94, 0.88, 1.0.
  With the experts zeroed the rest meets the ordinary bar (3.9e-7; test_without_the_experts_...), and over 150
  tokens, where the 128:1 layer compresses and the compressed layers' yarn matters, 1.4e-7 (test_past_128_...).
* the release's mtp.* layer (a few of its tensors in each fixture) is skipped, as the converter skips it.
* `--quant MXFP4_MOE`: llama_model_quantize's file over the converter's, byte for byte, on all three fixtures;
  `--quant Q8_0` and `Q4_K_M` refused as llama_model_quantize refuses them on the converter's file ("requantizing
  from type mxfp4 is disabled", or "q8_0" for the FP8 linears' Q8_0), measured.
* refused, each as the converter fails (measured): routed experts stored unquantized ("Missing routed expert
  tensors") and NVIDIA's NVFP4 export, experts ModelOpt NVFP4 under DeepSeek's names (deepseek_v4-nvfp4: "Can not
  map tensor 'layers.0.ffn.experts.0.w1.weight'").
"""
from __future__ import annotations

import re

import pytest

from family_oracle import OUTTYPES, oracle_tests
from family_variants import DROP, variant

FIXTURES = ["deepseek_v4", "deepseek_v4-fp8", "deepseek_v4-f32"]
test_export, _ = oracle_tests("deepseek_v4", FIXTURES)


@pytest.mark.parametrize("name", FIXTURES)
def test_logits_within_the_converter_files_measured_ceiling(name, checkpoint, converted, record_property):
    """llama.cpp running the converter's own file misses transformers by NMSE 1.6e-4 (bf16 linears: BF16 matmuls),
    9.4e-4 (FP8 linears written Q8_0) and 1.2e-4 (f32 linears: the MXFP4 expert products), measured each run; the
    view's file is that file (test_export). Every outtype gives the one file, so f32 stands for all."""
    from converter_ceiling import check_within_ceiling
    from family_oracle import transformers_logits

    record_property("family", "deepseek_v4")
    record_property("oracle", "logits")
    check_within_ceiling(name, "f32", checkpoint, converted, transformers_logits)


def _without_experts(checkpoint, dst, change=None):
    """deepseek_v4-f32 with every routed expert's exponents set to 0 (2^-127, so the experts add nothing on either
    side), `change(tensors)` applied to the rest."""
    import shutil

    import torch
    from safetensors.torch import load_file, save_file

    src = checkpoint("deepseek_v4-f32")
    shutil.copytree(src, dst, ignore=shutil.ignore_patterns("model.safetensors"))
    tensors = load_file(str(src / "model.safetensors"))
    zeroed = [n for n in tensors if ".ffn.experts." in n and n.endswith(".scale")]
    assert zeroed
    for name in zeroed:
        tensors[name] = torch.zeros(tensors[name].shape, dtype=torch.uint8).view(torch.float8_e8m0fnu)
    if change:
        change(tensors)
    save_file(tensors, str(dst / "model.safetensors"), metadata={"format": "pt"})
    return dst


def test_without_the_experts_the_view_meets_the_ordinary_bar(checkpoint, tmp_path):
    """The ceiling's cause, measured: without the routed experts deepseek_v4-f32 meets NMSE < 1e-4 by far (measured
    3.9e-7): hyper-connections, sliding, compressed and indexed attention, hash and scored routing's shared experts
    all agree with transformers, and the 1.2e-4 of the whole model comes from the MXFP4 expert products (ggml
    quantizes their activations to Q8_0)."""
    from converter_ceiling import llama_cpp_logits
    from family_oracle import NMSE_BAR, nmse, transformers_logits
    from hfview import HfCheckpoint

    path = _without_experts(checkpoint, tmp_path / "DeepSeek-V4-no-experts")
    ids, ours = llama_cpp_logits(HfCheckpoint(path, "f32"))
    value = nmse(ours, transformers_logits(path, ids))
    print(f"deepseek_v4-f32 without experts: NMSE {value:.3e}")
    assert value < NMSE_BAR / 10


def test_past_128_tokens_the_heavily_compressed_layer_and_its_yarn_agree(checkpoint, tmp_path):
    """150 tokens, so that the 128:1 layer's compressor makes an entry and the compressed layers' yarn rope turns
    far enough to matter (the 16-token prompt reaches neither): without the routed experts the view matches
    transformers to NMSE ~1.4e-7 (measured), while zeroing that layer's compressor in the reference moves its logits
    by ~3e-3 and dropping the yarn by ~5e-4 (measured; asserted past the bar and 1000 x the view's miss). With the
    experts the whole model misses by ~1e-2 over these tokens, at a handful of positions where the indexer's or a
    router's top-2 is a near tie (margins 1e-4..6e-3 in transformers) that the experts' Q8_0 activations tip the other
    way; the median position misses by 1.6e-4."""
    import numpy as np

    from family_oracle import NMSE_BAR, nmse, transformers_logits
    from hfview import HfCheckpoint
    from hfview.runner.stream import StreamModel

    ids = [int(i) for i in np.random.default_rng(0).integers(256, 50000, 150)]
    path = _without_experts(checkpoint, tmp_path / "DeepSeek-V4-no-experts")
    with StreamModel(HfCheckpoint(path, "f32"), n_ctx=256) as m:
        ours = m.logits(ids)
    ref = transformers_logits(path, ids)
    value = nmse(ours, ref)

    def no_hca(tensors):
        tensors["layers.2.attn.compressor.wkv.weight"] *= 0

    hca = nmse(transformers_logits(_without_experts(checkpoint, tmp_path / "no-hca", no_hca), ids), ref)
    yarn = nmse(transformers_logits(variant(path, tmp_path / "no-yarn", rope_scaling=DROP), ids), ref)
    print(f"deepseek_v4-f32 without experts, 150 tokens: NMSE {value:.3e}; the 128:1 compressor moves transformers "
          f"by {hca:.3e}, the yarn by {yarn:.3e}")
    assert value < NMSE_BAR / 10
    assert min(hca, yarn) > max(NMSE_BAR, 1000 * value)  # each would show, were the view to miss it


def test_defaults_match_transformers():
    from family_defaults import check_defaults
    check_defaults("deepseek_v4")


@pytest.mark.parametrize("dropped", ["qk_rope_head_dim"])
def test_export_without_a_computed_key_equals_converter(dropped, checkpoint, tmp_path):
    """A key DeepseekV4Config computes where config.json leaves it out (qk_rope_head_dim: head_dim x 64 / 512): the
    converter reads the computed value, and so does the view."""
    import oracle
    from hfview import HfCheckpoint
    from hfview.export import export

    from family_variants import DROP
    path = variant(checkpoint("deepseek_v4"), tmp_path / f"DeepSeek-V4-no-{dropped}", **{dropped: DROP})
    theirs = oracle.convert_cached(path, "f32")
    ours = export(HfCheckpoint(path, "f32"), tmp_path / "ours.gguf")
    assert oracle.sha256(ours) == oracle.sha256(theirs), oracle.first_difference(ours, theirs)


@pytest.mark.parametrize("key", ["num_hash_layers", "compress_ratios"])
def test_a_release_key_left_out_is_refused_as_the_converter_fails(key, checkpoint, tmp_path):
    """DeepseekV4Config folds these into other fields, so the converter reads them from config.json as it stands and
    stops without them (KeyError, measured here); the view refuses them by name."""
    import oracle
    from hfview import HfCheckpoint
    from hfview.errors import ConfigError

    path = variant(checkpoint("deepseek_v4"), tmp_path / "v", **{key: DROP})
    with pytest.raises(oracle.ConverterFailed, match=f"KeyError: '{key}'"):
        oracle.convert(path, tmp_path / "theirs.gguf", "f32")
    with pytest.raises(ConfigError, match=f"no {key}"):
        HfCheckpoint(path, "f32")


def test_export_without_rope_scaling_equals_converter(checkpoint, tmp_path):
    """A config with no rope_scaling: the converter writes the base alone (no scaling KV), as transformers' compressed
    layers then rotate by plain rope; the view writes the same file. (Over the 16-token prompt the compressed layers'
    yarn moves transformers' logits by NMSE ~1e-7 only, so the logits oracle does not tell it apart: its KV is
    proven here and by test_export.)"""
    import oracle
    from hfview import HfCheckpoint
    from hfview.export import export

    from family_variants import DROP
    path = variant(checkpoint("deepseek_v4"), tmp_path / "DeepSeek-V4-no-rope-scaling", rope_scaling=DROP)
    theirs = oracle.convert_cached(path, "f32")
    ours = export(HfCheckpoint(path, "f32"), tmp_path / "ours.gguf")
    assert oracle.sha256(ours) == oracle.sha256(theirs), oracle.first_difference(ours, theirs)
    kv = {k.key: k.value for k in HfCheckpoint(path, "f32").kv}
    assert "deepseek4.rope.scaling.type" not in kv and kv["deepseek4.rope.freq_base"] == 10000.0


def test_unquantized_experts_are_refused_as_the_converter_fails_on_them(checkpoint, tmp_path):
    """Routed experts stored unquantized (bf16, no .scale): the converter's DeepseekV4Model repacks experts only from
    MXFP4 pairs and raises KeyError 'Missing routed expert tensors' (measured here); the view refuses them naming it."""
    import shutil

    import torch
    from safetensors.torch import load_file, save_file

    import oracle
    from hfview import HfCheckpoint
    from hfview.errors import CheckpointError

    src, dst = checkpoint("deepseek_v4"), tmp_path / "DeepSeek-V4-bf16-experts"
    shutil.copytree(src, dst, ignore=shutil.ignore_patterns("model.safetensors"))
    tensors = load_file(str(src / "model.safetensors"))
    for name in [n for n in tensors if ".ffn.experts." in n and n.endswith(".scale")]:
        del tensors[name]
        weight = name.removesuffix("scale") + "weight"
        rows, half = tensors[weight].shape
        tensors[weight] = torch.zeros(rows, 2 * half, dtype=torch.bfloat16)
    save_file(tensors, str(dst / "model.safetensors"), metadata={"format": "pt"})
    with pytest.raises(oracle.ConverterFailed, match="Missing routed expert tensors"):
        oracle.convert(dst, tmp_path / "theirs.gguf", "f32")
    with pytest.raises(CheckpointError, match="Missing routed expert tensors"):
        HfCheckpoint(dst, "f32")


def test_a_0731_checkpoint_gets_the_flash_0731_template(checkpoint, tmp_path):
    """DeepseekV4Model picks its chat template by the model id hint (the directory's name here): "0731" in it gives
    deepseek-ai-DeepSeek-V4-Flash-0731.jinja; the view writes the converter's file for it."""
    import oracle
    from hfview import HfCheckpoint
    from hfview.export import export
    from hfview.families._parts.deepseek_v4_templates import FLASH_0731, V4

    path = variant(checkpoint("deepseek_v4"), tmp_path / "DeepSeek-V4-Flash-0731")
    view = HfCheckpoint(path, "bf16")
    assert {k.key: k.value for k in view.kv}["tokenizer.chat_template"] == FLASH_0731 != V4
    theirs = oracle.convert_cached(path, "bf16")
    ours = export(view, tmp_path / "ours.gguf")
    assert oracle.sha256(ours) == oracle.sha256(theirs), oracle.first_difference(ours, theirs)


def test_experts_first_mxfp4_and_kept_types(checkpoint):
    from hfview import HfCheckpoint
    from hfview.gguf_layout import GGMLType

    for outtype in OUTTYPES:
        view = HfCheckpoint(checkpoint("deepseek_v4-fp8"), outtype)
        types = {t.name: t.ggml_type for t in view.tensors}
        names = [t.name for t in view.tensors]
        assert names[:2] == ["blk.0.ffn_gate_tid2eid.weight", "blk.0.ffn_gate_exps.weight"]
        assert types["blk.0.ffn_gate_tid2eid.weight"] == GGMLType.I32
        assert types["blk.2.ffn_up_exps.weight"] == GGMLType.MXFP4
        assert types["blk.1.attn_q_b.weight"] == GGMLType.Q8_0  # dequantized from FP8
        assert types["token_embd.weight"] == GGMLType.BF16 and types["blk.1.hc_attn_fn.weight"] == GGMLType.F32
        assert "blk.0.exp_probs_b.bias" not in types and "blk.1.exp_probs_b.bias" in types
        assert len(names) == 92 and "blk.3.attn_q_a.weight" not in types  # the mtp.0.* layer skipped
        assert {kv.key: kv.value for kv in view.kv}["general.file_type"] == 38


@pytest.mark.parametrize("changes, reason", [
    (dict(scoring_func="sigmoid"), "sqrtsoftplus"),
    (dict(hc_mult=2), "hc_mult 2"),
    (dict(compress_ratios=[0, 4, 8, 0]), "compress_ratios"),
    (dict(num_key_value_heads=2), "num_key_value_heads 2"),
    (dict(rope_scaling={"type": "linear", "factor": 2.0}), "rope_type 'linear'"),

])
def test_refuses_what_deepseek4_cannot_run(changes, reason, checkpoint, tmp_path):
    from hfview import HfCheckpoint
    from hfview.errors import ConfigError

    with pytest.raises(ConfigError, match=reason):
        HfCheckpoint(variant(checkpoint("deepseek_v4"), tmp_path / "v", **changes), "f32")


@pytest.mark.parametrize("path", __import__("released_config").released_configs("deepseek_v4"), ids=lambda p: p.stem)
def test_released_config(path):
    """Each release (FP8 linears, MXFP4 experts): accepted, its values in the KV."""
    import json

    from released_config import config_path_kv

    released = json.loads(path.read_text(encoding="utf-8"))
    kv = config_path_kv(path)
    assert kv["deepseek4.block_count"] == released["num_hidden_layers"]
    assert kv["deepseek4.attention.compress_ratios"] == released["compress_ratios"]
    assert kv["deepseek4.embedding_length_out"] == 4 * released["hidden_size"]
    assert kv["deepseek4.rope.scaling.type"] == "yarn" and kv["general.file_type"] == 38


@pytest.mark.parametrize("name", FIXTURES)
def test_quant_mxfp4_moe_is_llama_quantizes(name, checkpoint, quantized, tmp_path):
    """--quant MXFP4_MOE over the view: llama_model_quantize's file over the converter's, byte for byte (it keeps
    the MXFP4 experts and the Q8_0 of FP8 linears, and quantizes the bf16 / f32 matrices to Q8_0)."""
    import oracle
    from hfview import HfCheckpoint
    from hfview.export import export

    theirs = quantized(name, "bf16", 38)
    ours = export(HfCheckpoint(checkpoint(name), "bf16", quant="MXFP4_MOE"), tmp_path / "ours.gguf")
    assert oracle.sha256(ours) == oracle.sha256(theirs), oracle.first_difference(ours, theirs)


@pytest.mark.parametrize("quant", ["Q8_0", "Q4_K_M"])
@pytest.mark.parametrize("name", ["deepseek_v4", "deepseek_v4-fp8"])
def test_other_quant_types_are_refused_as_llama_quantize_refuses_them(name, quant, checkpoint, converted, tmp_path):
    """--quant Q8_0 / Q4_K_M would requantize the converter's MXFP4 experts (and, for Q4_K_M over FP8 linears, their
    Q8_0): llama_model_quantize refuses (measured here on the converter's file) and the view refuses first, quoting
    the reason llama.cpp gives."""
    import oracle
    from hfview import HfCheckpoint
    from hfview.errors import ConfigError
    from hfview.quant import FILE_TYPES

    with pytest.raises(ConfigError, match="requantizing from type") as refused:
        HfCheckpoint(checkpoint(name), "bf16", quant=quant)
    reason = re.search(r'"(requantizing from type \w+ is disabled)"', str(refused.value)).group(1)
    with pytest.raises(oracle.ConverterFailed, match=re.escape(reason)):
        oracle.quantize(converted(name, "bf16"), tmp_path / "theirs.gguf", FILE_TYPES[quant][0])


def test_nvfp4_experts_are_refused_as_the_converter_fails_on_them(checkpoint, tmp_path):
    """nvidia/DeepSeek-V4-Flash-NVFP4's form (deepseek_v4-nvfp4: DeepSeek's FP8 linears, each layer's routed experts
    ModelOpt NVFP4 under DeepSeek's names, quant_algo MIXED_PRECISION): the converter's NVFP4 path takes them, but
    names only experts called gate/up/down_proj, and stops on DeepSeek's (measured here); the view refuses the
    checkpoint before any weight is read, quoting that failure."""
    import oracle
    from hfview import HfCheckpoint
    from hfview.errors import QuantizedCheckpoint

    failure = "Can not map tensor 'layers.0.ffn.experts.0.w1.weight'"
    with pytest.raises(oracle.ConverterFailed, match=re.escape(failure)):
        oracle.convert(checkpoint("deepseek_v4-nvfp4"), tmp_path / "theirs.gguf", "bf16")
    with pytest.raises(QuantizedCheckpoint, match=f"NVFP4 routed experts.*{re.escape(failure)}"):
        HfCheckpoint(checkpoint("deepseek_v4-nvfp4"), "bf16")

"""LFM2-VL (Lfm2VlForConditionalGeneration's text decoder -> llama.cpp lfm2, the converter's LFM2Model): a tiny LFM2-VL
with a SigLIP2 tower and projector, its config as LiquidAI/LFM2-VL-450M's release states it (text_config.architectures
["Lfm2ForCausalLM"]): bytes == the converter's own text conversion at every outtype; logits vs transformers'
Lfm2VlForConditionalGeneration over input_ids alone (no pixel values), NMSE < 1e-4.

lfm2_vl-saved: the same model as transformers 5's save_pretrained writes it (text_config without architectures). The
converter then picks the top level's Lfm2VlForConditionalGeneration, which it registers as an mmproj class only, and
fails (strict xfail); the bytes are proven against the converter run on a copy whose text_config states
["Lfm2ForCausalLM"], the one key the releases carry and this save leaves out."""
import json
import shutil

import numpy as np
import pytest

import oracle
from family_oracle import OUTTYPES, oracle_tests, reference_logits_test

_models: dict = {}


def lfm2_vl_logits(path, ids) -> np.ndarray:
    """transformers 5.24's Lfm2VlForConditionalGeneration, float32, over input_ids only (its text path)."""
    import torch
    from transformers import Lfm2VlForConditionalGeneration

    key = str(path)
    if key not in _models:
        _models.clear()
        _models[key] = Lfm2VlForConditionalGeneration.from_pretrained(path, dtype=torch.float32).eval()
    with torch.no_grad():
        return _models[key](input_ids=torch.tensor([ids])).logits[0].float().numpy()


test_export, _ = oracle_tests("lfm2", ["lfm2_vl"])
test_export_converter_fails, _ = oracle_tests(
    "lfm2", ["lfm2_vl-saved"],
    export_xfail="text_config without architectures: the converter takes Lfm2VlForConditionalGeneration, "
                 "registered as mmproj only ('Model Lfm2VlForConditionalGeneration is not supported')")
test_logits = reference_logits_test("lfm2", ["lfm2_vl", "lfm2_vl-saved"], lfm2_vl_logits,
                                    "transformers' Lfm2VlForConditionalGeneration (input_ids only)")


@pytest.mark.parametrize("outtype", OUTTYPES)
def test_export_saved_equals_converter_on_restored_text_architectures(outtype, checkpoint, tmp_path, record_property):
    """lfm2_vl-saved's view == the converter's file for a copy (same directory name) whose text_config states
    architectures ["Lfm2ForCausalLM"] as the releases do; nothing else changed."""
    from hfview import HfCheckpoint
    from hfview.export import export

    record_property("family", "lfm2")
    record_property("oracle", "bytes")
    src = checkpoint("lfm2_vl-saved")
    copy = tmp_path / "restored" / src.name
    shutil.copytree(src, copy)
    config = json.loads((copy / "config.json").read_text(encoding="utf-8"))
    assert "architectures" not in config["text_config"]
    config["text_config"]["architectures"] = ["Lfm2ForCausalLM"]
    (copy / "config.json").write_text(json.dumps(config, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    theirs = oracle.convert_cached(copy, outtype)
    ours = export(HfCheckpoint(src, outtype), tmp_path / "ours.gguf")
    if oracle.sha256(ours) != oracle.sha256(theirs):
        pytest.fail(f"lfm2_vl-saved --outtype {outtype}: {oracle.first_difference(ours, theirs)}")


def test_vision_tower_and_projector_are_left_out(checkpoint):
    """The view holds the text decoder only: no tensor of the tower or projector, the lfm2 arch, LFM2's KV."""
    from hfview import HfCheckpoint

    view = HfCheckpoint(checkpoint("lfm2_vl"), "f32")
    names = {t.name for t in view.tensors}
    assert not any("vision" in n or "projector" in n or n.startswith("v.") or n.startswith("mm.") for n in names)
    kv = {k.key: k.value for k in view.kv}
    assert kv["general.architecture"] == "lfm2"
    assert kv["lfm2.block_count"] == 4 and kv["lfm2.attention.head_count_kv"] == [0, 0, 2, 0]
    assert kv["lfm2.feed_forward_length"] == 256


def test_converters_own_failure_is_the_mmproj_only_class(checkpoint, tmp_path):
    """What the strict xfail above stands for: the converter's own run on lfm2_vl-saved stops at the architecture
    (the top level's, as text_config states none), not later."""
    with pytest.raises(oracle.ConverterFailed, match="Model Lfm2VlForConditionalGeneration is not supported"):
        oracle.convert(checkpoint("lfm2_vl-saved"), tmp_path / "out.gguf", "f32")


def _with_text_config(src, dst, **changes):
    shutil.copytree(src, dst)
    config = json.loads((dst / "config.json").read_text(encoding="utf-8"))
    config["text_config"].update(changes)
    (dst / "config.json").write_text(json.dumps(config, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    return dst


@pytest.mark.parametrize("changes, message", [
    ({"layer_types": ["full_attention"] * 4}, "no conv layer"),
    ({"block_dim": 128}, "block_dim 128 differs from hidden_size 64"),
    ({"num_heads": 8}, "num_heads 8 differs from num_attention_heads 4"),
    ({"block_use_swiglu": False}, "block_use_swiglu"),
    ({"conv_bias": True}, "conv_bias True"),
], ids=["all_attention", "block_dim", "num_heads", "no_swiglu", "conv_bias"])
def test_text_config_values_llama_cpp_cannot_run_are_refused(changes, message, checkpoint, tmp_path):
    """The text decoder's checks apply through text_config; the first releases' duplicated widths (block_dim,
    num_heads, ...) must agree with the keys transformers reads, their training-only flags sit in the position
    transformers implements."""
    from hfview import HfCheckpoint
    from hfview.errors import ConfigError

    with pytest.raises(ConfigError, match=message):
        HfCheckpoint(_with_text_config(checkpoint("lfm2_vl"), tmp_path / "variant", **changes), "f32")


def test_first_releases_training_keys_are_read_where_they_agree(checkpoint, tmp_path):
    """LFM2-VL-450M's text_config keys of Liquid's training code, stated as released, change nothing in the view."""
    from hfview import HfCheckpoint

    base = HfCheckpoint(checkpoint("lfm2_vl"), "f32")
    view = HfCheckpoint(_with_text_config(
        checkpoint("lfm2_vl"), tmp_path / "variant", block_dim=64, conv_dim=64, conv_dim_out=64, num_heads=4,
        block_norm_eps=1e-5, block_mlp_init_scale=1.0, block_out_init_scale=1.0, block_use_swiglu=True,
        block_use_xavier_init=True, conv_use_xavier_init=True, use_pos_enc=True), "f32")
    assert oracle.kv_but_directory_named(view) == oracle.kv_but_directory_named(base)
    assert [t.name for t in view.tensors] == [t.name for t in base.tensors]

"""quant_method "mxfp4" (gpt-oss as released: each layer's experts as `<proj>_blocks` / `<proj>_scales`): the experts
presented as the converter writes them (GptOssModel.generate_extra_tensors), ggml MXFP4 whatever the outtype, their
bits moved into ggml's blocks on read, first in the file, the file type MOSTLY_MXFP4_MOE; byte-identical to the
pinned converter's file at every outtype, and `--quant MXFP4_MOE` to llama_model_quantize's file over it. llama.cpp's
logits from the view against transformers loading the same MXFP4 checkpoint (on the CPU it dequantizes the experts).
Other --quant types are refused as llama-quantize refuses them; MXFP4 on other architectures as the converter does."""
import json
import shutil

import numpy as np
import pytest

from family_oracle import check_export, oracle_tests

FIXTURES = ["gpt_oss-mxfp4", "gpt_oss-mxfp4-wide"]
test_export, test_logits_against_transformers_loading_mxfp4 = oracle_tests("gpt_oss", FIXTURES)


@pytest.mark.parametrize("name", FIXTURES)
def test_export_q8_0(name, checkpoint, converted, tmp_path, record_property):
    """At q8_0 the converter keeps the MXFP4 experts and the file type MOSTLY_Q8_0."""
    record_property("family", "gpt_oss")
    record_property("oracle", "bytes")
    check_export(name, "q8_0", checkpoint, converted, tmp_path)


@pytest.mark.parametrize("outtype", ["f32", "bf16"])
def test_quant_mxfp4_moe_is_llama_quantizes(outtype, checkpoint, quantized, tmp_path):
    """--quant MXFP4_MOE: llama_model_quantize copies the MXFP4 experts and quantizes the rest (Q8_0)."""
    import oracle

    from hfview import HfCheckpoint
    from hfview.export import export

    theirs = quantized("gpt_oss-mxfp4-wide", outtype, 38)
    ours = export(HfCheckpoint(checkpoint("gpt_oss-mxfp4-wide"), outtype, quant="MXFP4_MOE"), tmp_path / "o.gguf")
    assert oracle.sha256(ours) == oracle.sha256(theirs), oracle.first_difference(ours, theirs)


@pytest.mark.parametrize("quant", ["Q4_K_M", "Q8_0", "Q4_0"])
def test_other_quant_types_are_refused_as_llama_quantize_refuses_them(quant, checkpoint):
    from hfview import HfCheckpoint
    from hfview.errors import ConfigError

    with pytest.raises(ConfigError, match=r'ffn_.*_exps.*"requantizing from type mxfp4 is disabled".*MXFP4_MOE'):
        HfCheckpoint(checkpoint("gpt_oss-mxfp4"), "bf16", quant=quant)


def test_experts_are_mxfp4_first_and_the_file_type_is_mxfp4_moe(checkpoint):
    from hfview import HfCheckpoint
    from hfview.gguf_layout import GGMLType

    for outtype, file_type in (("f32", 38), ("f16", 38), ("bf16", 38), ("auto", 38), ("q8_0", 7)):
        view = HfCheckpoint(checkpoint("gpt_oss-mxfp4-wide"), outtype)
        assert view.file_type == file_type
        experts = [t for t in view.tensors if t.ggml_type == GGMLType.MXFP4]
        assert [t.name for t in view.tensors[:len(experts)]] == [
            f"blk.{b}.ffn_{p}_exps.weight" for b in range(4) for p in ("down", "gate", "up")]
        assert not [t.name for t in view.tensors if "scales" in t.name or "blocks" in t.name]


def _e2m1_dequantized(rows: np.ndarray, cols: int) -> np.ndarray:
    """ggml's block_mxfp4 rows ([n, groups x 17]) as values, as ggml reads them (kvalues_mxfp4 x 2^(e - 128))."""
    kvalues = np.array([0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12], np.float64)
    blocks = rows.reshape(len(rows), cols // 32, 17)
    scale = np.ldexp(1.0, blocks[..., 0].astype(np.int64) - 128)[..., None]
    qs = blocks[..., 1:]
    values = np.concatenate([kvalues[qs & 0x0F], kvalues[qs >> 4]], -1)
    return (values * scale).reshape(len(rows), cols)


def test_repack_is_lossless_against_transformers_dequantization(checkpoint):
    """Every expert's gate, up and down as ggml decodes the view's MXFP4 blocks equals transformers' own
    dequantization of the stored pair (convert_moe_packed_tensors), element for element."""
    import torch
    from safetensors.torch import load_file
    from transformers.integrations.mxfp4 import convert_moe_packed_tensors

    from hfview import HfCheckpoint

    path = checkpoint("gpt_oss-mxfp4-wide")
    stored = load_file(str(path / "model.safetensors"))
    view = HfCheckpoint(path, "bf16")
    layer = "model.layers.3.mlp.experts."
    gate_up = convert_moe_packed_tensors(stored[layer + "gate_up_proj_blocks"], stored[layer + "gate_up_proj_scales"],
                                         dtype=torch.float32).transpose(1, 2).numpy()  # [experts, 2 x ffn, hidden]
    down = convert_moe_packed_tensors(stored[layer + "down_proj_blocks"], stored[layer + "down_proj_scales"],
                                      dtype=torch.float32).transpose(1, 2).numpy()  # [experts, hidden, ffn]
    for name, want in (("gate", gate_up[:, 0::2]), ("up", gate_up[:, 1::2]), ("down", down)):
        t = view.tensor(f"blk.3.ffn_{name}_exps.weight")
        got = _e2m1_dequantized(t.read().reshape(-1, t.row_bytes), t.shape[-1]).reshape(t.shape)
        assert np.array_equal(got, want), name
    # rows read a range at a time (as the fill reads them) are the same bytes as the whole tensor
    t = view.tensor("blk.3.ffn_gate_exps.weight")
    whole = t.rows(0, t.view.n_rows)
    assert np.array_equal(np.concatenate([t.rows(a, min(a + 7, t.view.n_rows)) for a in range(0, t.view.n_rows, 7)]),
                          whole)


def _with_config(src, dst, edit):
    shutil.copytree(src, dst)
    config = json.loads((dst / "config.json").read_text())
    edit(config)
    (dst / "config.json").write_text(json.dumps(config))
    return dst


def test_mxfp4_on_another_architecture_is_refused_as_the_converter_refuses_it(checkpoint, tmp_path):
    from hfview import HfCheckpoint
    from hfview.errors import QuantizedCheckpoint

    path = _with_config(checkpoint("qwen3-fp8"), tmp_path / "q",
                        lambda c: c.__setitem__("quantization_config", {"quant_method": "mxfp4"}))
    with pytest.raises(QuantizedCheckpoint, match=r"MXFP4.*'Qwen3ForCausalLM'.*only for gpt-oss.*not yet supported"):
        HfCheckpoint(path, "f32")


def test_a_pair_missing_its_half_is_named(checkpoint, tmp_path):
    from safetensors.torch import load_file, save_file

    from hfview import HfCheckpoint
    from hfview.errors import CheckpointError

    src = checkpoint("gpt_oss-mxfp4")
    path = tmp_path / "m"
    shutil.copytree(src, path)
    tensors = load_file(str(src / "model.safetensors"))
    del tensors["model.layers.1.mlp.experts.down_proj_scales"]
    save_file(tensors, str(path / "model.safetensors"), metadata={"format": "pt"})
    with pytest.raises(CheckpointError, match=r"down_proj_blocks.*no scales.*down_proj_scales"):
        HfCheckpoint(path, "bf16")


def test_reads_nothing_of_the_experts_until_asked(checkpoint, monkeypatch):
    """Opening the view reads no expert byte: the repack runs on read."""
    from hfview import HfCheckpoint, views

    calls = []
    monkeypatch.setattr(views, "mxfp4_blocks", lambda *a: calls.append(1))
    HfCheckpoint(checkpoint("gpt_oss-mxfp4"), "bf16")
    assert calls == []


def test_resolution_admits_the_release_as_the_view(checkpoint):
    """The runner's resolution takes the MXFP4 release to the view (it was refused as quantized before)."""
    from hfview.runner.resolve import resolve

    resolved = resolve(str(checkpoint("gpt_oss-mxfp4")), progress=False)
    assert resolved.backend == "view" and resolved.family == "gpt_oss"

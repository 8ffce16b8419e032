"""GPT-2: both oracles over a released-layout fixture (bare names, causal-mask buffers, f32, tied) and a
transformers 5 one (prefixed names, f16, untied lm_head); configs llama.cpp's gpt2 would run wrong are
refused by name."""
import pytest

from family_defaults import check_defaults
from family_oracle import oracle_tests
from family_variants import assert_refused

test_export, test_logits = oracle_tests("gpt2", ["gpt2", "gpt2-saved"])


@pytest.mark.parametrize("change, message", [
    ({"activation_function": "relu"}, "activation_function 'relu'"),
    ({"n_inner": 100}, "n_inner 100"),
    ({"scale_attn_by_inverse_layer_idx": True}, "scale_attn_by_inverse_layer_idx True"),
    ({"n_ctx": None}, "no n_ctx"),
])
def test_gpt2_configs_that_would_run_wrong_are_refused(checkpoint, tmp_path, change, message):
    assert_refused(checkpoint("gpt2"), tmp_path, message, **change)


def test_gpt2_conv1d_weights_are_presented_transposed(checkpoint):
    from safetensors.numpy import load_file

    from hfview import HfCheckpoint

    path = checkpoint("gpt2")
    stored = load_file(str(path / "model.safetensors"))
    ckpt = HfCheckpoint(path, "f32")
    assert (ckpt.read_tensor("blk.1.attn_qkv.weight") == stored["h.1.attn.c_attn.weight"].T).all()
    assert ckpt.read_tensor("blk.0.ffn_down.weight").shape == (64, 256)


def test_gpt2_defaults_are_transformers():
    check_defaults("gpt2")


@pytest.mark.xfail(raises=__import__("oracle").ConverterFailed, strict=True,
                   reason="the pinned converter maps GPT-2's h.N.attn.bias buffer instead of dropping it")
def test_converter_fails_on_mask_buffers(converted, record_property):
    record_property("family", "gpt2")
    record_property("oracle", "bytes")
    converted("gpt2-buffers", "f32")


@pytest.mark.parametrize("outtype", ["f32", "f16"])
def test_mask_buffers_are_dropped_as_the_converter_means_to(checkpoint, tmp_path, outtype):
    """Our file from the checkpoint with buffers equals the converter's from the same directory without them."""
    import shutil

    from safetensors.numpy import load_file, save_file

    import oracle
    from hfview import HfCheckpoint
    from hfview.export import export

    src = checkpoint("gpt2-buffers")
    clean = tmp_path / src.name  # the same directory name: general.name comes from it
    shutil.copytree(src, clean)
    weights = load_file(str(src / "model.safetensors"))
    assert any(k.endswith(".attn.bias") for k in weights)
    save_file({k: v for k, v in weights.items() if not k.endswith((".attn.bias", ".attn.masked_bias"))},
              str(clean / "model.safetensors"), metadata={"format": "pt"})
    theirs = oracle.convert_cached(clean, outtype)
    ours = export(HfCheckpoint(src, outtype), tmp_path / "ours.gguf")
    assert oracle.sha256(ours) == oracle.sha256(theirs), oracle.first_difference(ours, theirs)

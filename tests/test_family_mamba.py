"""Mamba (MambaForCausalLM -> llama.cpp mamba): both oracles on a mamba-130m-hf-style fixture and an untied
bfloat16 one; A is presented as -exp(A_log), computed on read."""
import numpy as np
import pytest

from family_oracle import OUTTYPES, check_export, oracle_tests
from family_variants import assert_refused

FIXTURES = ["mamba", "mamba-untied", "falcon-mamba"]
_, test_logits = oracle_tests("mamba", FIXTURES, outtypes=["f32", "f16", "auto"])


@pytest.mark.parametrize("name", FIXTURES)
def test_logits_bf16_within_the_ceiling_of_the_converters_own_file(name, checkpoint, converted, record_property):
    """At bf16 the recurrence carries the weights' rounding further than attention does: llama.cpp running the
    converter's own bf16 file misses transformers (float32 weights) by NMSE ~3.8e-4 on these fixtures. That
    measured figure is the bar: the view must do no worse, and must equal that file's logits."""
    from family_oracle import PROMPT, nmse, transformers_logits

    from hfview import HfCheckpoint
    from hfview.runner.stream import StreamModel, load_model_from_path

    record_property("family", "mamba")
    record_property("oracle", "logits")
    path = checkpoint(name)
    with StreamModel(HfCheckpoint(path, "bf16"), n_ctx=64) as m:
        ids = m.tokenize(PROMPT)[:16]
        ours = m.logits(ids)
    with StreamModel(load_model_from_path(str(converted(name, "bf16")), n_gpu_layers=0), n_ctx=64) as m:
        theirs = m.logits(ids)
    ref = transformers_logits(path, ids)
    ceiling = nmse(theirs, ref)
    print(f"{name} bf16: view {nmse(ours, ref):.3e}, the converter's file {ceiling:.3e}")
    assert ceiling < 1e-3                     # the ceiling itself stays where it was measured
    assert nmse(ours, theirs) < 1e-9          # the same function as the converter's file
    assert nmse(ours, ref) <= ceiling * 1.001


@pytest.mark.parametrize("outtype", OUTTYPES)
@pytest.mark.parametrize("name", FIXTURES)
def test_export(name, outtype, checkpoint, converted, tmp_path, record_property):
    record_property("family", "mamba")
    record_property("oracle", "bytes")
    check_export(name, outtype, checkpoint, converted, tmp_path)


def load_stored(path):
    """Every stored tensor as float32 numpy (bfloat16 widened, as the converter widens it)."""
    from safetensors.torch import load_file

    out = {}
    for f in sorted(path.glob("*.safetensors")):
        out.update({k: v.float().numpy() for k, v in load_file(str(f)).items()})
    return out


def test_a_is_minus_exp_a_log(checkpoint):
    import torch

    from hfview import HfCheckpoint

    path = checkpoint("mamba")
    stored = load_stored(path)["backbone.layers.1.mixer.A_log"]
    ckpt = HfCheckpoint(path, "f32")
    a = ckpt.read_tensor("blk.1.ssm_a")
    assert np.array_equal(a, -torch.exp(torch.from_numpy(stored)).numpy())  # the converter's arithmetic
    assert np.abs(a.astype(np.float64) / -np.exp(stored.astype(np.float64)) - 1).max() < 2.4e-7  # about exp
    assert ckpt.read_tensor("blk.0.ssm_conv1d.weight").shape == (128, 4)


@pytest.mark.parametrize("change, message", [({"expand": 3}, "expand 3"), ({"use_bias": True}, "use_bias True"),
                                             ({"vocab_size": 50277}, "vocab_size 50277")])
def test_configs_the_converter_or_llama_cpp_cannot_run_are_refused(checkpoint, tmp_path, change, message):
    assert_refused(checkpoint("mamba"), tmp_path, message, **change)


def test_minus_exp_is_torchs_and_correctly_rounded_without_torch(monkeypatch):
    """Over every bf16-representable input (as f32) and every f16 one: the step's bits are torch's exponential,
    the converter's; with torch not importable they are the correctly rounded value instead."""
    import sys

    import torch

    from hfview.views import NEG_EXP

    bf16 = (np.arange(1 << 16, dtype=np.uint32) << 16).view(np.float32)
    f16 = np.arange(1 << 16, dtype=np.uint16).view(np.float16)
    for x in (bf16[np.isfinite(bf16) & (np.abs(bf16) < 80)], f16[np.isfinite(f16) & (np.abs(f16) < 10)]):
        theirs = -torch.exp(torch.from_numpy(x.copy())).numpy()
        exact = (-np.exp(x.astype(np.float64))).astype(x.dtype)
        assert np.array_equal(NEG_EXP(x).view(np.uint8), theirs.view(np.uint8))
        assert (theirs != exact).any()      # torch's exponential is not the correctly rounded one: this matters
        with monkeypatch.context() as m:
            m.setitem(sys.modules, "torch", None)
            assert np.array_equal(NEG_EXP(x), exact)

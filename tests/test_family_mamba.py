"""Mamba (MambaForCausalLM -> llama.cpp mamba): both oracles on a mamba-130m-hf-style fixture and an untied
bfloat16 one; A is presented as -exp(A_log), computed on read."""
import numpy as np
import pytest

from family_oracle import OUTTYPES, oracle_tests
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
    from runner.stream import StreamModel, load_model_from_path

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
    export_within_one_ulp_of_a(name, outtype, checkpoint, converted, tmp_path,
                               a_source=lambda bid: f"backbone.layers.{bid}.mixer.A_log")


def export_within_one_ulp_of_a(name, outtype, checkpoint, converted, tmp_path, a_source):
    """The converter's file, byte for byte, except A = -exp(A_log): there the view's value is the correctly
    rounded one and the converter's (torch's exponential) may be one unit in the last place off it. Every
    other byte — header, KV, tensor infos, every other tensor — is compared exactly."""
    from gguf import GGUFReader

    from hfview import HfCheckpoint
    from hfview.export import export

    ours_path = export(HfCheckpoint(checkpoint(name), outtype), tmp_path / "ours.gguf")
    theirs_path = converted(name, outtype)
    ours, theirs = GGUFReader(ours_path), GGUFReader(theirs_path)
    assert [t.name for t in ours.tensors] == [t.name for t in theirs.tensors]
    stored = load_stored(checkpoint(name))
    ulps = 0
    for a, b in zip(ours.tensors, theirs.tensors):
        assert (a.data_offset, a.tensor_type, list(a.shape)) == (b.data_offset, b.tensor_type, list(b.shape)), a.name
        if not a.name.endswith(".ssm_a"):
            assert a.data.tobytes() == b.data.tobytes(), a.name
            continue
        a_log = stored[a_source(a.name.split(".")[1])]
        exact = (-np.exp(a_log.astype(np.float64))).astype(np.float32).reshape(a.data.shape)
        assert np.array_equal(a.data, exact), a.name          # ours: correctly rounded
        steps = np.abs(a.data.view(np.int32).astype(np.int64) - b.data.view(np.int32).astype(np.int64))
        assert steps.max() <= 1, a.name                        # theirs: within one unit in the last place
        ulps += int((steps == 1).sum())
    with open(ours_path, "rb") as f, open(theirs_path, "rb") as g:  # everything before the data, exactly
        head = ours.tensors[0].data_offset
        assert f.read(head) == g.read(head)
    print(f"{name} {outtype}: {ulps} A elements one ulp apart from the converter's")


def load_stored(path):
    """Every stored tensor as float32 numpy (bfloat16 widened, as the converter widens it)."""
    from safetensors.torch import load_file

    out = {}
    for f in sorted(path.glob("*.safetensors")):
        out.update({k: v.float().numpy() for k, v in load_file(str(f)).items()})
    return out


def test_a_is_minus_exp_a_log(checkpoint):
    from hfview import HfCheckpoint

    path = checkpoint("mamba")
    stored = load_stored(path)["backbone.layers.1.mixer.A_log"]
    ckpt = HfCheckpoint(path, "f32")
    assert np.array_equal(ckpt.read_tensor("blk.1.ssm_a"), (-np.exp(stored.astype(np.float64))).astype(np.float32))
    assert ckpt.read_tensor("blk.0.ssm_conv1d.weight").shape == (128, 4)


@pytest.mark.parametrize("change, message", [({"expand": 3}, "expand 3"), ({"use_bias": True}, "use_bias True"),
                                             ({"vocab_size": 50277}, "vocab_size 50277")])
def test_configs_the_converter_or_llama_cpp_cannot_run_are_refused(checkpoint, tmp_path, change, message):
    assert_refused(checkpoint("mamba"), tmp_path, message, **change)

"""Apertus (xIELU scalars as KV arrays, Q/K norms, llama3 rope): converter bytes at every outtype,
llama.cpp logits."""
from family_defaults import check_defaults
from family_oracle import oracle_tests

test_export, test_logits = oracle_tests("apertus", ["apertus"])


def test_defaults_match_transformers():
    check_defaults("apertus")


def test_apertus_refuses_missing_xielu_scalars(checkpoint, tmp_path):
    """A checkpoint without a layer's xIELU scalars (e.g. a shard missing) is named, not written short."""
    import pytest
    pytest.importorskip("torch")  # bf16 weights: safetensors' torch API reads and writes them
    from safetensors.torch import load_file, save_file

    from family_variants import variant
    from hfview import HfCheckpoint
    from hfview.errors import CheckpointError

    bad = variant(checkpoint("apertus"), tmp_path / "bad")
    weights = bad / "model.safetensors"
    tensors = load_file(str(weights.resolve()))
    del tensors["model.layers.1.mlp.act_fn.beta"]
    weights.unlink()
    save_file(tensors, str(weights), metadata={"format": "pt"})
    with pytest.raises(CheckpointError, match="act_fn.beta"):
        HfCheckpoint(bad, "f32")

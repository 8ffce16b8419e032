"""Granite MoE and Granite MoE Shared (-> llama.cpp granitemoe): both oracles on a granite-3.1-3b-a800m-style
mixture and a shared-expert one; the fused gate/up experts come apart expert by expert."""
import numpy as np

from family_defaults import check_defaults
from family_oracle import oracle_tests

test_export, test_logits = oracle_tests("granitemoe", ["granitemoe", "granitemoeshared"])


def test_gate_and_up_halves_of_each_expert(checkpoint):
    from safetensors.torch import load_file

    from hfview import HfCheckpoint

    path = checkpoint("granitemoeshared")
    fused = load_file(str(path / "model.safetensors"))["model.layers.1.block_sparse_moe.input_linear.weight"].numpy()
    ckpt = HfCheckpoint(path, "f32")
    assert np.array_equal(ckpt.read_tensor("blk.1.ffn_gate_exps.weight"), fused[:, :16])
    assert np.array_equal(ckpt.read_tensor("blk.1.ffn_up_exps.weight"), fused[:, 16:])


def test_defaults():
    check_defaults("granitemoe")

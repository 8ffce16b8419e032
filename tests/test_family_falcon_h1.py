"""Falcon-H1 (FalconH1ForCausalLM -> llama.cpp falcon-h1): both oracles on a Falcon-H1-0.5B-style fixture (its
multipliers verbatim, no mixer norm, bfloat16) and a float32 one with the mixer's gated norm over two groups. The
muP multipliers are value steps computed on read in the converter's working dtype; A = -exp(A_log)
by the converter's torch exponential, byte for byte."""
import numpy as np
import pytest

from family_oracle import OUTTYPES, check_export, oracle_tests
from family_variants import assert_refused
from test_family_mamba import load_stored

FIXTURES = ["falcon-h1", "falcon-h1-norm"]
_, test_logits = oracle_tests("falcon_h1", FIXTURES)


@pytest.mark.parametrize("outtype", OUTTYPES)
@pytest.mark.parametrize("name", FIXTURES)
def test_export(name, outtype, checkpoint, converted, tmp_path, record_property):
    record_property("family", "falcon_h1")
    record_property("oracle", "bytes")
    check_export(name, outtype, checkpoint, converted, tmp_path)


def test_in_proj_takes_each_segments_multiplier(checkpoint):
    """ssm_in = in_proj x ssm_in_multiplier, then its z, x, B, C, dt rows each x one of ssm_multipliers (float32)."""
    import json

    from hfview import HfCheckpoint

    path = checkpoint("falcon-h1")
    h = json.loads((path / "config.json").read_text())
    stored = load_stored(path)["model.layers.0.mamba.in_proj.weight"]
    d, gs = h["mamba_d_ssm"], h["mamba_n_groups"] * h["mamba_d_state"]
    want = stored * np.float32(h["ssm_in_multiplier"])
    for (lo, hi), m in zip(((0, d), (d, 2 * d), (2 * d, 2 * d + gs), (2 * d + gs, 2 * d + 2 * gs), (2 * d + 2 * gs, None)),
                           h["ssm_multipliers"]):
        want[lo:hi] *= np.float32(m)
    assert np.array_equal(HfCheckpoint(path, "f32").read_tensor("blk.0.ssm_in.weight"), want)


@pytest.mark.parametrize("change, message", [
    ({"ssm_multipliers": None}, "ssm_multipliers not stated"),
    ({"mamba_d_ssm": None}, "mamba_d_ssm not stated"),
    ({"mamba_d_head": 8}, "mamba_d_head 8"),
    ({"mlp_multipliers": [1.0]}, "mlp_multipliers"),
    ({"tie_word_embeddings": True}, "tie_word_embeddings True"),
    ({"attention_bias": True}, "attention_bias True"),
    ({"mamba_rms_norm": True, "mamba_norm_before_gate": True}, "mamba_norm_before_gate True"),
    ({"time_step_limit": [0.0, 1.0]}, "time_step_limit"),
    ({"layers_block_type": ["hybrid", "hybrid"]}, "layers_block_type"),
])
def test_configs_llama_cpp_cannot_run_are_refused(checkpoint, tmp_path, change, message):
    assert_refused(checkpoint("falcon-h1"), tmp_path, message, **change)

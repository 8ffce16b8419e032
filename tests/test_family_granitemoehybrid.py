"""Granite 4.0 hybrids (GraniteMoeHybridForCausalLM -> llama.cpp granitehybrid): both oracles on a
granite-4.0-h-tiny-style fixture (Mamba-2 and attention layers, experts and a shared expert, tied) and a
granite-4.0-h-micro-style dense one (the shared MLP as each layer's FFN), with A compared as in
test_family_mamba (correctly rounded on our side, within one ulp of the converter's torch exponential).
layer_types in transformers 5's spelling is read as the same layers: its byte oracle is the converter on the
same checkpoint with the released spelling (the pinned converter finds no attention layer in the other)."""
import json
import shutil

import pytest

import oracle
from family_oracle import OUTTYPES, oracle_tests
from family_variants import assert_refused
from test_family_mamba import export_within_one_ulp_of_a

FIXTURES = ["granite-4.0-h", "granite-4.0-h-dense"]
_, test_logits = oracle_tests("granitemoehybrid", [*FIXTURES, "granite-4.0-h-saved"])

_RELEASED_SPELLING = {"linear_attention": "mamba", "full_attention": "attention"}


@pytest.mark.parametrize("outtype", OUTTYPES)
@pytest.mark.parametrize("name", FIXTURES)
def test_export(name, outtype, checkpoint, converted, tmp_path, record_property):
    record_property("family", "granitemoehybrid")
    record_property("oracle", "bytes")
    export_within_one_ulp_of_a(name, outtype, checkpoint, converted, tmp_path,
                               a_source=lambda bid: f"model.layers.{bid}.mamba.A_log")


@pytest.mark.parametrize("outtype", OUTTYPES)
def test_export_of_transformers_5_layer_names_is_the_converters_file_of_the_released_names(
        outtype, checkpoint, tmp_path, record_property):
    record_property("family", "granitemoehybrid")
    record_property("oracle", "bytes")
    path = checkpoint("granite-4.0-h-saved")
    config = json.loads((path / "config.json").read_text())
    assert config["layer_types"] == ["linear_attention", "linear_attention", "full_attention", "linear_attention"]
    copy = tmp_path / "released" / path.name  # the same directory name: general.name comes from it
    shutil.copytree(path, copy)
    config["layer_types"] = [_RELEASED_SPELLING[t] for t in config["layer_types"]]
    (copy / "config.json").write_text(json.dumps(config, indent=2), encoding="utf-8")
    theirs = {}

    def converted(name, outtype):
        if outtype not in theirs:
            theirs[outtype] = oracle.convert(copy, tmp_path / f"theirs-{outtype}.gguf", outtype)
        return theirs[outtype]

    export_within_one_ulp_of_a("granite-4.0-h-saved", outtype, checkpoint, converted, tmp_path,
                               a_source=lambda bid: f"model.layers.{bid}.mamba.A_log")


def test_layer_kinds_in_both_spellings(checkpoint):
    from hfview import HfCheckpoint

    for name, kv_heads in (("granite-4.0-h", [0, 2, 0, 0]), ("granite-4.0-h-saved", [0, 0, 2, 0])):
        ckpt = HfCheckpoint(checkpoint(name), "f32")
        kv = {k.key: k.value for k in ckpt.kv}
        assert list(kv["granitehybrid.attention.head_count_kv"]) == kv_heads
        attn = kv_heads.index(2)
        names = {t.name for t in ckpt.tensors}
        assert f"blk.{attn}.attn_q.weight" in names and f"blk.{attn}.ssm_in.weight" not in names


def test_dense_hybrid_presents_the_shared_mlp_as_the_ffn(checkpoint):
    from hfview import HfCheckpoint

    names = {t.name for t in HfCheckpoint(checkpoint("granite-4.0-h-dense"), "f32").tensors}
    assert "blk.0.ffn_gate.weight" in names and not any("shexp" in n or "exps" in n for n in names)


@pytest.mark.parametrize("change, message", [
    ({"layer_types": ["mamba", "attention"]}, "layer_types lists 2 layers, the config has 4"),
    ({"layer_types": ["attention"] * 4}, "no Mamba layer"),
    ({"layer_types": ["mamba"] * 4}, "no attention layer"),
    ({"layer_types": ["mamba", "sliding_attention", "mamba", "mamba"]}, "layer_types 'sliding_attention'"),
    ({"layer_types": None}, "layer_types not stated"),
    ({"mamba_d_state": None}, "mamba_d_state not stated"),
    ({"position_embedding_type": "rope"}, "position_embedding_type 'rope'"),
    ({"mamba_proj_bias": True}, "mamba_proj_bias True"),
    ({"time_step_limit": [0.0, 1.0]}, "time_step_limit"),
    ({"vocab_size": 50260}, "vocab_size 50260"),
    ({"mamba_d_head": 8}, "mamba_d_head 8"),
    ({"attn_layer_indices": [1]}, "attn_layer_indices"),
])
def test_configs_llama_cpp_cannot_run_are_refused(checkpoint, tmp_path, change, message):
    assert_refused(checkpoint("granite-4.0-h"), tmp_path, message, **change)

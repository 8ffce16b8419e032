"""Hy3 (HYV3ForCausalLM -> llama.cpp hy_v3): converter bytes at every outtype, with the next-token-prediction
layer written as the converter writes it (hy_v3-mtp), llama.cpp logits against transformers (both run the trunk
only), refusals of what hy_v3 cannot run. GPT-2's tokenizer stands in for Hy3's (the converter's gpt2 route), so
no tiktoken vocabulary slows the converter runs."""
import pytest

from family_defaults import check_defaults
from family_oracle import check_types_as_converter, oracle_tests
from family_variants import assert_refused, variant, weights_variant
from released_config import config_path_kv, released_configs

test_export, test_logits = oracle_tests("hy_v3", ["hy_v3", "hy_v3-mtp"])


def test_mtp_layer_is_written_as_an_extra_block(checkpoint):
    """The stored model.layers.3 (after num_hidden_layers 3) is block 3: its mixture decoder tensors, its nextn
    tensors (final_layernorm as shared_head_norm), block_count 4 and nextn_predict_layers 1."""
    from hfview import HfCheckpoint

    view = HfCheckpoint(checkpoint("hy_v3-mtp"), "f32")
    kv = {k.key: k.value for k in view.kv}
    assert kv["hy_v3.block_count"] == 4 and kv["hy_v3.nextn_predict_layers"] == 1
    names = {t.name for t in view.tensors}
    for leaf in ("eh_proj", "enorm", "hnorm", "shared_head_norm"):
        assert f"blk.3.nextn.{leaf}.weight" in names
    assert {"blk.3.attn_q.weight", "blk.3.ffn_gate_inp.weight", "blk.3.exp_probs_b", "blk.3.ffn_gate_exps.weight",
            "blk.3.ffn_down_shexp.weight"} <= names
    assert not any(".final_layernorm" in n for n in names)
    assert "hy_v3.nextn_predict_layers" not in {k.key for k in HfCheckpoint(checkpoint("hy_v3"), "f32").kv}


@pytest.mark.parametrize("outtype", ["f16", "bf16"])
def test_mtp_block_types_as_converter(outtype, checkpoint, converted):
    """The MTP block's router is stored and written under the same block number, so the converter's always-F32 list
    matches it (no f32_list_missed, unlike Nemotron-H's mtp.layers.1 router): F32 in both, as the trunk's; its
    eh_proj and experts at the outtype, its norms F32."""
    check_types_as_converter("hy_v3-mtp", outtype, checkpoint, converted, {
        "blk.3.ffn_gate_inp.weight": "F32", "blk.2.ffn_gate_inp.weight": "F32", "blk.3.nextn.eh_proj.weight": "OUT",
        "blk.3.ffn_gate_exps.weight": "OUT", "blk.3.nextn.enorm.weight": "F32",
        "blk.3.nextn.shared_head_norm.weight": "F32"})


def test_mtp_layer_leaves_the_trunk_as_it_was(checkpoint):
    """hy_v3-mtp is hy_v3 plus the MTP layer: the view presents the trunk's tensors with the same bytes, and
    llama.cpp over both views gives the same logits (the MTP block does not enter the main forward)."""
    import numpy as np

    from family_oracle import PROMPT
    from hfview import HfCheckpoint
    from hfview.runner.stream import StreamModel

    trunk, mtp = HfCheckpoint(checkpoint("hy_v3"), "bf16"), HfCheckpoint(checkpoint("hy_v3-mtp"), "bf16")
    mtp_names = [t.name for t in mtp.tensors]
    assert [n for n in mtp_names if not n.startswith("blk.3.")] == [t.name for t in trunk.tensors]
    assert len(mtp_names) > len(trunk.tensors)
    for t in trunk.tensors:
        assert np.array_equal(trunk.read_tensor(t.name), mtp.read_tensor(t.name)), t.name
    logits = []
    for view in (trunk, mtp):
        with StreamModel(view, n_ctx=64) as m:
            logits.append(m.logits(m.tokenize(PROMPT)[:16]))
    assert np.array_equal(logits[0], logits[1])


def test_a_checkpoint_saved_without_its_mtp_layer_still_presents(checkpoint, tmp_path):
    """transformers' HYV3 builds no MTP layer, so a fine-tune it saves may keep num_nextn_predict_layers 1 without
    model.layers.{n}: the converter still writes block_count n + 1 and nextn_predict_layers (llama.cpp's hy_v3 then
    loads the trunk only, its MTP tensors not required where blk.{n}.nextn.eh_proj is absent). The view does the
    same: byte-equal to the converter's file, and llama.cpp over it matches transformers."""
    import oracle
    from family_oracle import check_logits
    from hfview import HfCheckpoint
    from hfview.export import export

    src = variant(checkpoint("hy_v3"), tmp_path / "hy_v3-mtp-unstored", num_nextn_predict_layers=1)
    view = HfCheckpoint(src, "f32")
    kv = {k.key: k.value for k in view.kv}
    assert kv["hy_v3.block_count"] == 4 and kv["hy_v3.nextn_predict_layers"] == 1
    theirs = oracle.convert_cached(src, "f32")
    ours = export(view, tmp_path / "ours.gguf")
    assert oracle.sha256(ours) == oracle.sha256(theirs), oracle.first_difference(ours, theirs)
    check_logits("hy_v3-mtp-unstored", "f32", lambda name: src)


def test_refuses_final_layernorm_in_a_trunk_layer(checkpoint, tmp_path):
    """final_layernorm is the MTP block's own norm; in a trunk layer the converter renames nothing and cannot map it
    (it stops), and the view refuses it by name."""
    import oracle
    import torch
    from hfview import HfCheckpoint
    from hfview.errors import CheckpointError

    src = weights_variant(checkpoint("hy_v3"), tmp_path / "trunk_final_norm",
                          lambda t: {**t, "model.layers.1.final_layernorm.weight": torch.ones(32, dtype=torch.bfloat16)})
    with pytest.raises(CheckpointError, match="model.layers.1.final_layernorm.weight"):
        HfCheckpoint(src, "f32").tensors
    with pytest.raises(oracle.ConverterFailed, match="final_layernorm"):
        oracle.convert_cached(src, "f32")


def test_defaults_match_transformers():
    check_defaults("hy_v3")


@pytest.mark.parametrize("changes, reason", [
    (dict(attention_bias=True), "attention_bias"),
    (dict(mlp_bias=True), "mlp_bias"),
    (dict(mlp_layer_types=["dense", "sparse"]), "mlp_layer_types"),
    (dict(mlp_layer_types=["dense", "moe", "sparse"]), "mlp_layer_types"),
    (dict(num_shared_experts=0), "num_shared_experts"),
    (dict(rope_parameters={"rope_type": "default", "rope_theta": 11158840.0, "partial_rotary_factor": 0.5}),
     "partial_rotary_factor"),
    (dict(rope_parameters={"rope_type": "dynamic", "factor": 2.0, "rope_theta": 11158840.0}), "rope_type"),
    (dict(route_norm=False), "route_norm"),
], ids=["qkv_bias", "mlp_bias", "short_layer_list", "unknown_kind", "no_shared", "partial_rotary", "dynamic_rope",
        "route_norm"])
def test_refuses_what_hy_v3_cannot_run(changes, reason, checkpoint, tmp_path):
    assert_refused(checkpoint("hy_v3"), tmp_path, reason, **changes)


def test_refuses_layers_of_the_other_kind(checkpoint, tmp_path):
    """mlp_layer_types saying layer 1 is dense while the checkpoint stores a mixture there."""
    from hfview import HfCheckpoint
    from hfview.errors import CheckpointError
    from hfview.export import export
    from family_variants import variant

    path = variant(checkpoint("hy_v3"), tmp_path / "v", mlp_layer_types=["dense", "dense", "sparse"])
    with pytest.raises(CheckpointError, match="missing"):
        export(HfCheckpoint(path, "f32"), tmp_path / "out.gguf")


@pytest.mark.xfail(len(released_configs("hy_v3")) < 2, strict=True,
                   reason="published config.json files not reachable from this project's index: see "
                          "tests/data/released_configs/hy_v3/SOURCES.md")
def test_at_least_two_released_configs_collected():
    assert len(released_configs("hy_v3")) >= 2, released_configs("hy_v3")


@pytest.mark.parametrize("path", released_configs("hy_v3"), ids=lambda p: p.stem)
def test_released_config_is_accepted(path):
    """Each released config passes the key check and the family's checks; its KV carries the released counts."""
    import json
    released = json.loads(path.read_text(encoding="utf-8"))
    kv = config_path_kv(path)
    assert kv["hy_v3.block_count"] >= released["num_hidden_layers"]
    assert kv["hy_v3.expert_count"] == released.get("num_experts", released.get("n_routed_experts"))
    assert kv["hy_v3.expert_used_count"] == released["num_experts_per_tok"]

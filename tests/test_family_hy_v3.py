"""Hy3 (HYV3ForCausalLM -> llama.cpp hy_v3): converter bytes at every outtype, llama.cpp logits against
transformers, refusals of what hy_v3 cannot run. GPT-2's tokenizer stands in for Hy3's (the converter's gpt2
route), so no tiktoken vocabulary slows the converter runs."""
import pytest

from family_defaults import check_defaults
from family_oracle import oracle_tests
from family_variants import assert_refused
from released_config import config_path_kv, released_configs

test_export, test_logits = oracle_tests("hy_v3", ["hy_v3"])


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

"""GLM-4.5 / 4.6 / 4.5-Air (Glm4MoeForCausalLM -> llama.cpp glm4moe): converter bytes at every outtype with the
next-token-prediction layer written as the converter writes it, llama.cpp logits against transformers over the
same ids (both run the trunk only), released configs through the view's config path, refusals by name."""
import json
from pathlib import Path

import pytest

from family_defaults import check_defaults
from family_oracle import oracle_tests
from family_variants import variant
from released_config import config_path_kv, released_configs

test_export, test_logits = oracle_tests("glm4_moe", ["glm4_moe"])


def test_defaults_match_transformers():
    check_defaults("glm4_moe")


def test_mtp_layer_is_written_as_an_extra_block(checkpoint):
    """The stored model.layers.3 (after num_hidden_layers 3) is block 3: its decoder tensors and its nextn
    tensors, block_count 4 and nextn_predict_layers 1; the router's (nonzero) selection bias reaches the file."""
    import numpy as np

    from hfview import HfCheckpoint

    view = HfCheckpoint(checkpoint("glm4_moe"), "f32")
    kv = {k.key: k.value for k in view.kv}
    assert kv["glm4moe.block_count"] == 4 and kv["glm4moe.nextn_predict_layers"] == 1
    assert kv["glm4moe.expert_gating_func"] == 2 and kv["glm4moe.leading_dense_block_count"] == 1
    names = {t.name for t in view.tensors}
    for leaf in ("eh_proj", "enorm", "hnorm", "embed_tokens", "shared_head_head", "shared_head_norm"):
        assert f"blk.3.nextn.{leaf}.weight" in names
    assert "blk.3.ffn_gate_exps.weight" in names and "blk.3.attn_q.weight" in names
    assert not any(n.startswith("blk.0.") and "exp" in n for n in names)  # the dense layer has no router
    assert np.abs(view.read_tensor("blk.1.exp_probs_b.bias")).max() > 0.01


@pytest.mark.parametrize("changes, reason", [
    (dict(n_group=2, topk_group=1), "n_group 2"),
    (dict(hidden_act="gelu"), "hidden_act"),
    (dict(rope_scaling={"type": "linear", "factor": 2.0}), "rope_type 'linear'"),
    (dict(n_routed_experts=0), "n_routed_experts 0"),
    (dict(first_k_dense_replace=5), "first_k_dense_replace 5"),
], ids=["groups", "gelu", "linear_rope", "no_experts", "dense_past_layers"])
def test_refuses_what_glm4moe_cannot_run_as_transformers_does(changes, reason, checkpoint, tmp_path):
    from hfview import HfCheckpoint
    from hfview.errors import CheckpointError, ConfigError

    with pytest.raises((ConfigError, CheckpointError), match=reason):
        HfCheckpoint(variant(checkpoint("glm4_moe"), tmp_path / "v", **changes), "f32")


@pytest.mark.parametrize("path", released_configs("glm4_moe"), ids=lambda p: p.stem)
def test_released_config(path: Path):
    """Each released config accepted, its KV carrying the released counts, the MTP layers in block_count."""
    released = json.loads(path.read_text(encoding="utf-8"))
    kv = config_path_kv(path)
    assert kv["glm4moe.block_count"] == released["num_hidden_layers"] + released["num_nextn_predict_layers"]
    assert kv["glm4moe.nextn_predict_layers"] == released["num_nextn_predict_layers"]
    assert kv["glm4moe.expert_count"] == released["n_routed_experts"]
    assert kv["glm4moe.expert_used_count"] == released["num_experts_per_tok"]
    assert kv["glm4moe.expert_feed_forward_length"] == released["moe_intermediate_size"]
    assert kv["glm4moe.leading_dense_block_count"] == released["first_k_dense_replace"]
    assert kv["glm4moe.rope.dimension_count"] == int(released["head_dim"] * released["partial_rotary_factor"])
    assert abs(kv["glm4moe.expert_weights_scale"] - released["routed_scaling_factor"]) < 1e-6

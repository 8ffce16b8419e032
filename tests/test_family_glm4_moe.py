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


@pytest.mark.parametrize("stated", [
    # GLM-4.5-Air: no q/k norms, scale 1.0, 46 layers
    dict(hidden_size=4096, intermediate_size=10944, moe_intermediate_size=1408, num_attention_heads=96,
         num_key_value_heads=8, num_hidden_layers=46, n_routed_experts=128, routed_scaling_factor=1.0,
         first_k_dense_replace=1, use_qk_norm=False),
    # GLM-4.5 / 4.6: q/k norms, scale 2.5, 92 layers, 3 dense
    dict(hidden_size=5120, intermediate_size=12288, moe_intermediate_size=1536, num_attention_heads=96,
         num_key_value_heads=8, num_hidden_layers=92, n_routed_experts=160, routed_scaling_factor=2.5,
         first_k_dense_replace=3, use_qk_norm=True),
], ids=["GLM-4.5-Air-shape", "GLM-4.5-shape"])
def test_release_shaped_config_is_accepted(stated, tmp_path):
    """No released config.json file is collected (tests/test_released_configs.py FEWER); a config with every key
    GLM-4.5's releases state, at their published sizes, passes the key check and the family's checks and
    carries its values, the MTP layer in block_count."""
    config = {"architectures": ["Glm4MoeForCausalLM"], "model_type": "glm4_moe", "attention_bias": True,
              "attention_dropout": 0.0, "pad_token_id": 151329, "eos_token_id": [151329, 151336, 151338],
              "head_dim": 128, "hidden_act": "silu", "initializer_range": 0.02, "max_position_embeddings": 131072,
              "n_group": 1, "n_shared_experts": 1, "norm_topk_prob": True, "num_experts_per_tok": 8,
              "num_nextn_predict_layers": 1, "partial_rotary_factor": 0.5, "rms_norm_eps": 1e-05,
              "rope_scaling": None, "rope_theta": 1000000, "tie_word_embeddings": False, "topk_group": 1,
              "torch_dtype": "bfloat16", "transformers_version": "4.54.0", "use_cache": True, "vocab_size": 151552,
              **stated}
    path = tmp_path / "glm4_moe" / "config.json"
    path.parent.mkdir()
    path.write_text(json.dumps(config), encoding="utf-8")
    kv = config_path_kv(path)
    assert kv["glm4moe.block_count"] == stated["num_hidden_layers"] + 1
    assert kv["glm4moe.leading_dense_block_count"] == stated["first_k_dense_replace"]
    assert kv["glm4moe.rope.dimension_count"] == 64 and kv["glm4moe.attention.key_length"] == 128
    assert abs(kv["glm4moe.expert_weights_scale"] - stated["routed_scaling_factor"]) < 1e-6


def test_a_checkpoint_saved_without_its_mtp_layer_still_presents(checkpoint, tmp_path):
    """transformers' Glm4Moe builds no MTP layer, so a fine-tune it saves keeps num_nextn_predict_layers 1 but not
    model.layers.{n}; the converter still writes block_count n + 1 and nextn_predict_layers (llama.cpp then loads
    the trunk only). The view does the same: the extra block's tensors are written as stored, never required.
    Checked by hand once: export sha256 == the converter's at f32, llama.cpp vs transformers NMSE 3.1e-7."""
    from family_variants import weights_variant
    from hfview import HfCheckpoint

    src = checkpoint("glm4_moe")
    dst = weights_variant(src, tmp_path / "trunk_only",
                          lambda tensors: {k: v for k, v in tensors.items() if not k.startswith("model.layers.3.")})
    trunk, full = HfCheckpoint(dst, "f32"), HfCheckpoint(src, "f32")
    assert [t.name for t in trunk.tensors] == [t.name for t in full.tensors if not t.name.startswith("blk.3.")]
    kv = {k.key: k.value for k in trunk.kv}
    assert kv["glm4moe.block_count"] == 4 and kv["glm4moe.nextn_predict_layers"] == 1

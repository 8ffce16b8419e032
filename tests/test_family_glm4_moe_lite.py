"""GLM-4.7-Flash (Glm4MoeLiteForCausalLM -> llama.cpp deepseek2): converter bytes at every outtype with the
next-token-prediction layer kept as the converter keeps it, llama.cpp logits against transformers over the same
ids (both run the trunk only), released configs through the view's config path, refusals by name."""
import json
from pathlib import Path

import pytest

from family_defaults import check_defaults
from family_oracle import oracle_tests
from family_variants import DROP, variant
from released_config import config_path_kv, released_configs

test_export, test_logits = oracle_tests("glm4_moe_lite", ["glm4_moe_lite"])


def test_defaults_match_transformers():
    check_defaults("glm4_moe_lite")


def test_mtp_layer_is_kept_as_an_extra_block(checkpoint):
    """model.layers.3 (after num_hidden_layers 3) is block 3 with its latent attention split as the trunk's and its
    nextn tensors; block_count 4, nextn_predict_layers 1, sigmoid gating from the stated scoring_func."""
    import numpy as np

    from hfview import HfCheckpoint

    view = HfCheckpoint(checkpoint("glm4_moe_lite"), "f32")
    kv = {k.key: k.value for k in view.kv}
    assert kv["deepseek2.block_count"] == 4 and kv["deepseek2.nextn_predict_layers"] == 1
    assert kv["deepseek2.expert_gating_func"] == 2 and kv["deepseek2.leading_dense_block_count"] == 1
    names = {t.name for t in view.tensors}
    assert {"blk.3.attn_k_b.weight", "blk.3.attn_v_b.weight", "blk.3.nextn.eh_proj.weight",
            "blk.3.nextn.shared_head_norm.weight", "blk.3.ffn_up_exps.weight"} <= names
    assert np.abs(view.read_tensor("blk.2.exp_probs_b.bias")).max() > 0.01


@pytest.mark.parametrize("changes, reason", [
    (dict(scoring_func=DROP), "no scoring_func"),
    (dict(scoring_func="softmax"), "scoring_func 'softmax'"),
    (dict(topk_method="greedy"), "topk_method"),
    (dict(rope_interleave=False), "rope_interleave"),
    (dict(first_k_dense_replace=2), "mlp_layer_types"),
    (dict(mlp_layer_types=["dense", "dense", "sparse"]), "mlp_layer_types"),
    (dict(num_key_value_heads=2), "num_key_value_heads 2"),
], ids=["no_scoring_func", "softmax", "greedy", "rope_not_interleaved", "dense_count", "layer_types", "kv_heads"])
def test_refuses_what_deepseek2_cannot_run_as_transformers_does(changes, reason, checkpoint, tmp_path):
    from hfview import HfCheckpoint
    from hfview.errors import ConfigError

    with pytest.raises(ConfigError, match=reason):
        HfCheckpoint(variant(checkpoint("glm4_moe_lite"), tmp_path / "v", **changes), "f32")


@pytest.mark.parametrize("path", released_configs("glm4_moe_lite"), ids=lambda p: p.stem)
def test_released_config(path: Path):
    """Each released config accepted, its KV carrying the released counts, the MTP layers in block_count."""
    released = json.loads(path.read_text(encoding="utf-8"))
    kv = config_path_kv(path)
    assert kv["deepseek2.block_count"] == released["num_hidden_layers"] + released["num_nextn_predict_layers"]
    assert kv["deepseek2.nextn_predict_layers"] == released["num_nextn_predict_layers"]
    assert kv["deepseek2.expert_count"] == released["n_routed_experts"]
    assert kv["deepseek2.attention.q_lora_rank"] == released["q_lora_rank"]
    assert kv["deepseek2.leading_dense_block_count"] == released["first_k_dense_replace"]
    assert abs(kv["deepseek2.expert_weights_scale"] - released["routed_scaling_factor"]) < 1e-6


def test_flash_shape_without_scoring_func_is_accepted_and_left_to_llama_cpp(tmp_path):
    """GLM-4.7-Flash's own config states no scoring_func (its keys as transformers' Glm4MoeLiteConfig defaults
    describe the release: 47 layers over 154880 tokens, plus the keys the release adds). The converter then
    writes no gating function and llama.cpp's deepseek2 takes sigmoid at exactly that shape: accepted, no
    expert_gating_func in the KV, the MTP layer in block_count. The same config with 46 layers is refused."""
    from hfview.errors import ConfigError

    config = {"architectures": ["Glm4MoeLiteForCausalLM"], "model_type": "glm4_moe_lite", "num_hidden_layers": 47,
              "vocab_size": 154880, "first_k_dense_replace": 1, "topk_method": "noaux_tc",
              "num_nextn_predict_layers": 1, "partial_rotary_factor": 1.0, "rope_scaling": None,
              "rope_theta": 1000000, "dtype": "bfloat16"}
    path = tmp_path / "glm4_moe_lite" / "zai-org__GLM-4.7-Flash-shape.json"
    path.parent.mkdir()
    path.write_text(json.dumps(config), encoding="utf-8")
    kv = config_path_kv(path)
    assert "deepseek2.expert_gating_func" not in kv
    assert kv["deepseek2.block_count"] == 48 and kv["deepseek2.nextn_predict_layers"] == 1
    assert kv["deepseek2.leading_dense_block_count"] == 1 and kv["deepseek2.attention.q_lora_rank"] == 768
    path.write_text(json.dumps(dict(config, num_hidden_layers=46)), encoding="utf-8")
    with pytest.raises(ConfigError, match="no scoring_func"):
        config_path_kv(path)

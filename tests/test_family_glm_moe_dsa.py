"""GLM-5 (GlmMoeDsaForCausalLM -> llama.cpp glm-dsa): converter bytes at every outtype with the indexer tensors, the
indexer layer kinds and the next-token-prediction layer as the converter writes them, llama.cpp logits against
transformers with index_topk below the prompt length and a shared indexer layer, released configs through the
view's config path, refusals by name."""
import json
from pathlib import Path

import pytest

from family_defaults import check_defaults
from family_oracle import oracle_tests
from family_variants import variant
from released_config import config_path_kv, released_configs

test_export, test_logits = oracle_tests("glm_moe_dsa", ["glm_moe_dsa"])


def test_defaults_match_transformers():
    check_defaults("glm_moe_dsa")


def test_indexer_kinds_and_mtp_layer_reach_the_file(checkpoint):
    """The full layers' indexers (the shared layer stores none), indexer_types as a bool array, the rope width,
    the MTP layer kept as block 3."""
    from hfview import HfCheckpoint

    view = HfCheckpoint(checkpoint("glm_moe_dsa"), "f32")
    kv = {k.key: k.value for k in view.kv}
    assert kv["glm-dsa.attention.indexer.types"] == [True, False, True]
    assert kv["glm-dsa.block_count"] == 4 and kv["glm-dsa.nextn_predict_layers"] == 1
    assert kv["glm-dsa.rope.dimension_count"] == 8 and kv["glm-dsa.attention.indexer.top_k"] == 4
    names = {t.name for t in view.tensors}
    assert {"blk.0.indexer.attn_q_b.weight", "blk.2.indexer.proj.weight", "blk.3.indexer.attn_k.weight",
            "blk.3.nextn.eh_proj.weight"} <= names
    assert not any(n.startswith("blk.1.indexer.") for n in names)


@pytest.mark.parametrize("changes, reason", [
    (dict(scoring_func="softmax"), "scoring_func 'softmax'"),
    (dict(topk_method="greedy"), "topk_method"),
    (dict(rope_interleave=False), "rope_interleave"),
    (dict(indexer_rope_interleave=False), "indexer_rope_interleave"),
    (dict(indexer_types=["shared", "full", "full"]), r"indexer_types \['shared'.*the first must be full"),
    (dict(indexer_types=["full", "full"]), "indexer_types"),
    (dict(index_head_dim=32), "index_head_dim 32"),
    (dict(num_key_value_heads=2), "num_key_value_heads 2"),
    (dict(mlp_layer_types=["dense", "dense", "sparse"]), "mlp_layer_types"),
], ids=["softmax", "greedy", "rope_not_interleaved", "indexer_rope", "shared_first", "kinds_length",
        "indexer_width", "kv_heads", "layer_kinds"])
def test_refuses_what_glm_dsa_cannot_run_as_transformers_does(changes, reason, checkpoint, tmp_path):
    from hfview import HfCheckpoint
    from hfview.errors import ConfigError

    with pytest.raises(ConfigError, match=reason):
        HfCheckpoint(variant(checkpoint("glm_moe_dsa"), tmp_path / "v", **changes), "f32")


def test_a_full_layer_without_its_indexer_is_refused(checkpoint, tmp_path):
    """indexer_types makes layer 1 full, but the checkpoint stores no indexer there: refused naming the tensor."""
    from hfview import HfCheckpoint
    from hfview.errors import CheckpointError

    path = variant(checkpoint("glm_moe_dsa"), tmp_path / "v", indexer_types=["full", "full", "full"])
    with pytest.raises(CheckpointError, match=r"model.layers.1.self_attn.indexer.wq_b.weight"):
        HfCheckpoint(path, "f32")


def test_indexer_schedule_keys_give_the_config_class_kinds():
    """Without indexer_types, GlmMoeDsaConfig's schedule (index_topk_freq / index_skip_topk_offset, or
    index_topk_pattern) decides the kinds; the view computes the same."""
    from transformers import GlmMoeDsaConfig

    from hfview.families.glm_moe_dsa import normalise
    for stated in ({"index_topk_freq": 4, "index_skip_topk_offset": 3}, {"index_topk_pattern": "FFSFS"}, {}):
        theirs = GlmMoeDsaConfig(num_hidden_layers=5, **stated).indexer_types
        ours = normalise({"num_hidden_layers": 5, "first_k_dense_replace": 3, "qk_rope_head_dim": 64,
                          "qk_nope_head_dim": 192, "num_attention_heads": 64, **stated})["indexer_types"]
        assert ours == theirs, stated


@pytest.mark.parametrize("path", released_configs("glm_moe_dsa"), ids=lambda p: p.stem)
def test_released_config(path: Path):
    """Each released config, FP8 upload (read dequantized) or BF16: accepted with its values in the KV (GLM-5.2's
    indexer kinds as it lists them)."""
    released = json.loads(path.read_text(encoding="utf-8"))
    kv = config_path_kv(path)
    assert kv["glm-dsa.attention.indexer.top_k"] == released["index_topk"]
    assert kv["glm-dsa.block_count"] == released["num_hidden_layers"] + released.get("num_nextn_predict_layers", 0)
    assert kv["glm-dsa.expert_count"] == released["n_routed_experts"]
    if "indexer_types" in released:
        assert kv["glm-dsa.attention.indexer.types"] == [k == "full" for k in released["indexer_types"]]


def test_the_indexer_changes_the_logits_the_oracle_compares(checkpoint, tmp_path):
    """With index_topk 4 of 16 tokens the indexer's choice moves transformers' logits far past the oracle's bar
    (against the same weights keeping every key), so test_logits holds llama.cpp's indexer path to transformers'."""
    from converter_ceiling import llama_cpp_logits
    from family_oracle import NMSE_BAR, nmse, transformers_logits
    from hfview import HfCheckpoint

    path = checkpoint("glm_moe_dsa")
    ids, _ = llama_cpp_logits(HfCheckpoint(path, "f32"))
    dense = transformers_logits(variant(path, tmp_path / "all_keys", index_topk=16), ids)
    sparse = transformers_logits(path, ids)
    moved = nmse(sparse, dense)
    print(f"glm_moe_dsa: index_topk 4 vs 16 in transformers: NMSE {moved:.3e}")
    assert moved > 100 * NMSE_BAR


def test_glm5_shaped_config_with_every_released_key_is_accepted(tmp_path):
    """GLM-5.3's config.json (no copy reached; GLM-5 / 5.1 / 5.2's are in tests/data/released_configs/glm_moe_dsa/,
    5.2's with this same key set) as another project transcribes it (every key but its quantization block, the layer
    lists generated by the release's own schedule: index_topk_freq 4 from index_skip_topk_offset 3, three dense
    layers): each key read or harmless, the KV carrying the released values and the indexer kinds."""
    kinds = ["full" if max(i - 2, 0) % 4 == 0 else "shared" for i in range(78)]
    config = {
        "architectures": ["GlmMoeDsaForCausalLM"], "attention_bias": False, "attention_dropout": 0.0,
        "dtype": "bfloat16", "eos_token_id": [154820, 154827, 154829], "ep_size": 1, "first_k_dense_replace": 3,
        "head_dim": 192, "hidden_act": "silu", "hidden_size": 6144, "index_head_dim": 128, "index_n_heads": 32,
        "index_share_for_mtp_iteration": True, "index_skip_topk_offset": 3, "index_topk": 2048,
        "index_topk_freq": 4, "index_topk_pattern": None, "indexer_rope_interleave": True, "indexer_types": kinds,
        "initializer_range": 0.02, "intermediate_size": 12288, "kv_lora_rank": 512,
        "max_position_embeddings": 1048576, "mlp_layer_types": ["dense"] * 3 + ["sparse"] * 75,
        "model_type": "glm_moe_dsa", "moe_intermediate_size": 2048, "moe_layer_freq": 1,
        "moe_router_dtype": "float32", "n_group": 1, "n_routed_experts": 256, "n_shared_experts": 1,
        "norm_topk_prob": True, "num_attention_heads": 64, "num_experts_per_tok": 8, "num_hidden_layers": 78,
        "num_key_value_heads": 64, "num_nextn_predict_layers": 1, "pad_token_id": 154820, "pretraining_tp": 1,
        "q_lora_rank": 2048, "qk_head_dim": 256, "qk_nope_head_dim": 192, "qk_rope_head_dim": 64,
        "rms_norm_eps": 1e-05, "rope_interleave": True,
        "rope_parameters": {"rope_theta": 8000000, "rope_type": "default"}, "routed_scaling_factor": 2.5,
        "scoring_func": "sigmoid", "tie_word_embeddings": False, "topk_group": 1, "topk_method": "noaux_tc",
        "transformers_version": "5.15.0", "use_cache": True, "v_head_dim": 256, "vocab_size": 154880}
    path = tmp_path / "glm_moe_dsa" / "GLM-5.3-shape.json"
    path.parent.mkdir()
    path.write_text(json.dumps(config), encoding="utf-8")
    kv = config_path_kv(path)
    assert kv["glm-dsa.block_count"] == 79 and kv["glm-dsa.nextn_predict_layers"] == 1
    assert kv["glm-dsa.attention.indexer.types"] == [k == "full" for k in kinds]
    assert kv["glm-dsa.attention.indexer.top_k"] == 2048 and kv["glm-dsa.attention.indexer.head_count"] == 32
    assert kv["glm-dsa.attention.key_length"] == 576 and kv["glm-dsa.attention.key_length_mla"] == 256
    assert kv["glm-dsa.rope.dimension_count"] == 64 and kv["glm-dsa.expert_gating_func"] == 2
    assert kv["glm-dsa.leading_dense_block_count"] == 3

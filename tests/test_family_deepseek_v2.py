"""DeepSeek-V2 (latent attention, with and without a query bottleneck; DeepSeek's softmax mixture): converter
bytes at every outtype, llama.cpp logits against transformers, released configs through the view's config
path, refusals of what llama.cpp's deepseek2 cannot run as transformers does."""
import json
from pathlib import Path

import pytest

from family_defaults import check_defaults
from family_oracle import oracle_tests
from family_variants import assert_refused
from released_config import config_path_kv, released_configs

test_export, _ = oracle_tests("deepseek_v2", ["deepseek_v2", "deepseek_v2-lite"])
_, test_logits = oracle_tests("deepseek_v2", ["deepseek_v2"])
_, test_logits_lite_f32_f16 = oracle_tests("deepseek_v2", ["deepseek_v2-lite"], outtypes=["f32", "f16"])


@pytest.mark.parametrize("outtype", ["bf16", "auto"])
def test_logits_lite_bf16_within_the_converter_files_measured_ceiling(outtype, checkpoint, converted,
                                                                      record_property):
    """deepseek_v2-lite at bf16 (auto is bf16 here): llama.cpp rounds the activations to bf16 before each of 27
    layers' matmuls, and running the converter's own file it misses transformers' f32 pass by NMSE ~1.3e-3
    (measured each run; at f32 and f16 the view meets the ordinary bar, test_logits_lite_f32_f16)."""
    from converter_ceiling import check_within_ceiling
    from family_oracle import transformers_logits

    record_property("family", "deepseek_v2")
    record_property("oracle", "logits")
    check_within_ceiling("deepseek_v2-lite", outtype, checkpoint, converted, transformers_logits)


def test_defaults_match_transformers():
    check_defaults("deepseek_v2")


def test_key_and_value_halves_are_views_of_kv_b_proj(checkpoint):
    """attn_k_b is each head's key rows of kv_b_proj transposed, attn_v_b its value rows, read in any row range."""
    import numpy as np
    from safetensors.torch import load_file

    from hfview import HfCheckpoint

    path = checkpoint("deepseek_v2")
    view = HfCheckpoint(path, "f32")
    c = json.loads((path / "config.json").read_text())
    n, nope, v, rank = c["num_attention_heads"], c["qk_nope_head_dim"], c["v_head_dim"], c["kv_lora_rank"]
    kv_b = load_file(str(path / "model.safetensors"))["model.layers.1.self_attn.kv_b_proj.weight"].float().numpy()
    heads = kv_b.reshape(n, nope + v, rank)
    k_b, v_b = view.tensor("blk.1.attn_k_b.weight"), view.tensor("blk.1.attn_v_b.weight")
    assert k_b.shape == (n, rank, nope) and v_b.shape == (n, v, rank)
    assert np.array_equal(k_b.read(), heads[:, :nope].transpose(0, 2, 1))
    assert np.array_equal(v_b.read(), heads[:, nope:])
    whole = k_b.read().reshape(-1, nope)
    for start, stop in ((0, 1), (rank - 1, rank + 2), (5, 3 * rank - 1), (n * rank - 2, n * rank)):
        assert np.array_equal(k_b.rows(start, stop), whole[start:stop])


@pytest.mark.parametrize("path", released_configs("deepseek_v2"), ids=lambda p: p.stem)
def test_released_config(path: Path):
    """Each released config is accepted with its released values in the KV, or refused for its named reason."""
    from hfview.errors import ConfigError

    released = json.loads(path.read_text(encoding="utf-8"))
    if (released.get("n_group") or 1) > 1:  # DeepSeek-V2 / V2-Chat / V2.5: group-limited greedy over 8 groups
        with pytest.raises(ConfigError, match="n_group"):
            config_path_kv(path)
        return
    kv = config_path_kv(path)
    assert kv["deepseek2.expert_count"] == released["n_routed_experts"]
    assert kv["deepseek2.expert_used_count"] == released["num_experts_per_tok"]
    assert kv["deepseek2.expert_shared_count"] == released["n_shared_experts"]
    assert kv["deepseek2.leading_dense_block_count"] == released["first_k_dense_replace"]
    assert kv["deepseek2.attention.kv_lora_rank"] == released["kv_lora_rank"]
    assert kv["deepseek2.attention.key_length"] == released["kv_lora_rank"] + released["qk_rope_head_dim"]
    assert kv["deepseek2.attention.head_count_kv"] == 1
    assert kv["deepseek2.expert_gating_func"] == 1  # softmax, as released
    assert kv["deepseek2.rope.scaling.type"] == "yarn"
    assert abs(kv["deepseek2.rope.scaling.yarn_log_multiplier"] - 0.1 * released["rope_scaling"]["mscale_all_dim"]) < 1e-12
    assert ("deepseek2.attention.q_lora_rank" in kv) == (released["q_lora_rank"] is not None)


@pytest.mark.parametrize("fixture, changes, reason", [
    ("deepseek_v2", dict(n_group=8, topk_group=3, topk_method="group_limited_greedy"), "n_group 8"),
    ("deepseek_v2", dict(norm_topk_prob=True), "norm_topk_prob"),
    ("deepseek_v2", dict(scoring_func="sigmoid"), "scoring_func"),
    ("deepseek_v2", dict(num_key_value_heads=1), "num_key_value_heads 1"),
    ("deepseek_v2", dict(attention_bias=True), "attention_bias"),
    ("deepseek_v2", dict(moe_layer_freq=2), "moe_layer_freq"),
    ("deepseek_v2-lite", dict(q_lora_rank=8), "q_lora_rank 8"),
    ("deepseek_v2", dict(num_experts_per_tok=None), "num_experts_per_tok"),
    ("deepseek_v2", dict(n_shared_experts=0), "n_shared_experts"),
    ("deepseek_v2", dict(rope_scaling={"type": "linear", "factor": 2.0}), "rope_type 'linear'"),
], ids=["groups", "norm_topk_prob", "sigmoid", "kv_heads", "bias", "moe_layer_freq", "lite_q_rank",
        "no_top_k", "no_shared", "linear_rope"])
def test_refuses_what_deepseek2_cannot_run(fixture, changes, reason, checkpoint, tmp_path):
    assert_refused(checkpoint(fixture), tmp_path, reason, **changes)


def test_refuses_queries_without_a_bottleneck_outside_the_lite_layer_counts(checkpoint, tmp_path):
    """q_lora_rank null over 3 layers: llama.cpp's deepseek2 would look for q_lora_rank and fail to load."""
    from family_variants import variant
    from hfview import HfCheckpoint
    from hfview.errors import ConfigError

    with pytest.raises(ConfigError, match="q_lora_rank null"):
        HfCheckpoint(variant(checkpoint("deepseek_v2"), tmp_path / "v", q_lora_rank=None))

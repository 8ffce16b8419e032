"""Qwen2-MoE (stacked experts plus a sigmoid-gated shared expert): converter bytes at every outtype, llama.cpp
logits, released configs through the view's config path, refusals of what llama.cpp's qwen2moe cannot run."""
from pathlib import Path

import pytest

from family_defaults import check_defaults
from family_oracle import oracle_tests
from family_variants import variant
from released_config import config_path_kv, released_configs

test_export, test_logits = oracle_tests("qwen2_moe", ["qwen2_moe", "qwen2_moe-57b"])

# released configs the view refuses, and the reason it names
REFUSED: dict[str, str] = {}


def test_defaults_match_transformers():
    check_defaults("qwen2_moe")


@pytest.mark.xfail(len(released_configs("qwen2_moe")) < 3, strict=True,
                   reason="published config.json files not reachable from this project's index: see "
                          "tests/data/released_configs/qwen2_moe/SOURCES.md")
def test_at_least_three_released_configs_collected():
    assert len(released_configs("qwen2_moe")) >= 3, released_configs("qwen2_moe")


@pytest.mark.parametrize("path", released_configs("qwen2_moe"), ids=lambda p: p.stem)
def test_released_config_is_accepted_or_refused_by_name(path: Path):
    """Each released config passes the key check and the family's checks, and its hyperparameter KV carries
    the released expert counts and widths, or it is refused for the reason REFUSED names."""
    import json
    from hfview.errors import ConfigError, QuantizedCheckpoint

    if path.stem in REFUSED:
        with pytest.raises((ConfigError, QuantizedCheckpoint), match=REFUSED[path.stem]):
            config_path_kv(path)
        return
    released = json.loads(path.read_text(encoding="utf-8"))
    kv = config_path_kv(path)
    assert kv["qwen2moe.expert_count"] == released["num_experts"]
    assert kv["qwen2moe.expert_used_count"] == released["num_experts_per_tok"]
    assert kv["qwen2moe.expert_feed_forward_length"] == released["moe_intermediate_size"]
    assert kv["qwen2moe.expert_shared_feed_forward_length"] == released["shared_expert_intermediate_size"]
    assert kv["qwen2moe.feed_forward_length"] == released["intermediate_size"]
    assert kv["qwen2moe.attention.head_count_kv"] == released["num_key_value_heads"]
    assert kv["qwen2moe.block_count"] == released["num_hidden_layers"]


@pytest.mark.parametrize("changes, reason", [
    (dict(mlp_only_layers=[0]), "mlp_only_layers"),
    (dict(decoder_sparse_step=2), "decoder_sparse_step"),
    (dict(num_experts=0), "without experts"),
    (dict(norm_topk_prob=True), "norm_topk_prob"),
    (dict(tie_word_embeddings=True), "tie_word_embeddings"),
    (dict(use_sliding_window=True), "sliding-window"),
], ids=["mlp_only_layers", "decoder_sparse_step", "no_experts", "norm_topk_prob", "tied", "sliding_window"])
def test_refuses_what_qwen2moe_cannot_run(changes, reason, checkpoint, tmp_path):
    """Dense layers (llama.cpp's qwen2moe needs a router in every layer), renormalised expert weights (it
    never renormalises them), a tied output (it needs output.weight) and sliding windows are refused by
    name, before any weight is read."""
    from hfview import HfCheckpoint
    from hfview.errors import ConfigError

    with pytest.raises(ConfigError, match=reason):
        HfCheckpoint(variant(checkpoint("qwen2_moe"), tmp_path / "v", **changes), "f32")

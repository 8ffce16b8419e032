"""Qwen3-MoE (stacked experts, q/k norms): converter bytes at every outtype, llama.cpp logits, released
configs through the view's config path, refusals of what llama.cpp's qwen3moe cannot run."""
from pathlib import Path

import pytest

from family_defaults import check_defaults
from family_oracle import oracle_tests
from family_variants import variant
from released_config import config_path_kv, released_configs

test_export, test_logits = oracle_tests("qwen3_moe", ["qwen3_moe", "qwen3_moe-coder"])


def test_defaults_match_transformers():
    check_defaults("qwen3_moe")


def test_at_least_three_released_configs_collected():
    assert len(released_configs("qwen3_moe")) >= 3, released_configs("qwen3_moe")


@pytest.mark.parametrize("path", released_configs("qwen3_moe"), ids=lambda p: p.stem)
def test_released_config_is_accepted(path: Path):
    """Each released config passes the key check and the family's checks, and its hyperparameter KV carries
    the released expert counts and widths (num_experts, not Qwen3MoeConfig's default, read as expert_count)."""
    import json
    released = json.loads(path.read_text(encoding="utf-8"))
    kv = config_path_kv(path)
    assert kv["qwen3moe.expert_count"] == released["num_experts"]
    assert kv["qwen3moe.expert_used_count"] == released["num_experts_per_tok"]
    assert kv["qwen3moe.expert_feed_forward_length"] == released["moe_intermediate_size"]
    assert kv["qwen3moe.attention.key_length"] == released["head_dim"]
    assert kv["qwen3moe.block_count"] == released["num_hidden_layers"]
    assert kv["qwen3moe.rope.freq_base"] == released["rope_theta"]
    if "shared_expert_intermediate_size" in released:  # Qwen3-Coder: the converter writes it as stated
        assert kv["qwen3moe.expert_shared_feed_forward_length"] == released["shared_expert_intermediate_size"]
    else:
        assert "qwen3moe.expert_shared_feed_forward_length" not in kv


@pytest.mark.parametrize("changes, reason", [
    (dict(mlp_only_layers=[1]), "mlp_only_layers"),
    (dict(decoder_sparse_step=2), "decoder_sparse_step"),
    (dict(num_experts=0), "without experts"),
    (dict(norm_topk_prob=False), "norm_topk_prob"),
    (dict(use_sliding_window=True, sliding_window=4), "sliding-window"),
], ids=["mlp_only_layers", "decoder_sparse_step", "no_experts", "norm_topk_prob", "sliding_window"])
def test_refuses_what_qwen3moe_cannot_run(changes, reason, checkpoint, tmp_path):
    """Dense layers (llama.cpp's qwen3moe needs a router in every layer), unnormalised expert weights
    (it always renormalises them) and sliding windows are refused by name, before any weight is read."""
    from hfview import HfCheckpoint
    from hfview.errors import ConfigError

    with pytest.raises(ConfigError, match=reason):
        HfCheckpoint(variant(checkpoint("qwen3_moe"), tmp_path / "v", **changes), "f32")


def test_absent_norm_topk_prob_reads_as_the_class_default_and_is_refused(checkpoint, tmp_path):
    """Qwen3MoeConfig's default is false: a config without the key would run wrong in llama.cpp."""
    from family_variants import DROP
    from hfview import HfCheckpoint
    from hfview.errors import ConfigError

    with pytest.raises(ConfigError, match="norm_topk_prob False"):
        HfCheckpoint(variant(checkpoint("qwen3_moe"), tmp_path / "v", norm_topk_prob=DROP), "f32")


def test_a_stack_streams_expert_by_expert(tmp_path):
    """Reading a whole stacked tensor holds the destination and one expert's rows at a time, never the
    stack twice (8 experts of 512 KiB: the peak stays under the stack plus two experts)."""
    import tracemalloc

    import numpy as np
    from safetensors.numpy import save_file

    from hfview.shards import index_shards
    from hfview.views import Stack

    rng = np.random.default_rng(0)
    experts = {f"e.{i}": rng.standard_normal((256, 512), dtype=np.float32) for i in range(8)}
    save_file(experts, str(tmp_path / "model.safetensors"))
    stored = index_shards(tmp_path)
    view = Stack(tuple(stored[f"e.{i}"] for i in range(8)))
    one, whole = experts["e.0"].nbytes, sum(e.nbytes for e in experts.values())
    tracemalloc.start()
    try:
        got = view.rows(0, view.n_rows)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert np.array_equal(got.reshape(8, 256, 512), np.stack(list(experts.values())))
    assert peak < whole + 2 * one, f"peak {peak} bytes reading a {whole}-byte stack of {one}-byte experts"

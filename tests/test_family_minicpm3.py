"""MiniCPM3 (latent attention kept whole, MiniCPM's multipliers, longrope factors as tensors): converter bytes at
every outtype, llama.cpp logits against transformers, released configs through the view's config path,
refusals of what llama.cpp's minicpm3 fixes or cannot run."""
import json
from pathlib import Path

import pytest

from family_defaults import check_defaults
from family_oracle import oracle_tests
from family_variants import assert_refused
from released_config import config_path_kv, released_configs

test_export, test_logits = oracle_tests("minicpm3", ["minicpm3"])


def test_defaults_match_transformers():
    check_defaults("minicpm3")


def test_longrope_factors_are_generated_tensors(checkpoint):
    import numpy as np

    from hfview import HfCheckpoint

    path = checkpoint("minicpm3")
    rope = json.loads((path / "config.json").read_text())["rope_scaling"]
    view = HfCheckpoint(path, "f16")
    assert [t.name for t in view.tensors[:2]] == ["rope_factors_long.weight", "rope_factors_short.weight"]
    assert np.array_equal(view.read_tensor("rope_factors_short.weight"), np.float32(rope["short_factor"]))


@pytest.mark.parametrize("path", released_configs("minicpm3"), ids=lambda p: p.stem)
def test_released_config_is_accepted(path: Path):
    released = json.loads(path.read_text(encoding="utf-8"))
    kv = config_path_kv(path)
    assert kv["minicpm3.attention.q_lora_rank"] == released["q_lora_rank"]
    assert kv["minicpm3.attention.kv_lora_rank"] == released["kv_lora_rank"]
    assert kv["minicpm3.attention.key_length"] == released["qk_nope_head_dim"] + released["qk_rope_head_dim"]
    assert kv["minicpm3.rope.dimension_count"] == released["qk_rope_head_dim"]


@pytest.mark.parametrize("changes, reason", [
    (dict(scale_emb=10), "scale_emb 10"),
    (dict(dim_model_base=128), "dim_model_base 128"),
    (dict(scale_depth=1.0), "scale_depth 1.0"),
    (dict(v_head_dim=12), "v_head_dim 12"),
    (dict(rope_theta=50000.0), "rope_theta"),
    (dict(rope_scaling={"type": "linear", "factor": 2.0}), "rope_type 'linear'"),
    (dict(attention_bias=True), "bias"),
], ids=["scale_emb", "dim_model_base", "scale_depth", "v_head_dim", "rope_theta", "linear_rope", "bias"])
def test_refuses_what_minicpm3_cannot_run(changes, reason, checkpoint, tmp_path):
    assert_refused(checkpoint("minicpm3"), tmp_path, reason, **changes)


def test_refuses_queries_without_a_bottleneck(checkpoint, tmp_path):
    from family_variants import variant
    from hfview import HfCheckpoint
    from hfview.errors import ConfigError

    with pytest.raises(ConfigError, match="q_lora_rank None"):
        HfCheckpoint(variant(checkpoint("minicpm3"), tmp_path / "v", q_lora_rank=None))

"""Cohere 2 MoE (North Mini Code: a leading dense layer, then routed experts with an averaged shared expert, RMS
norms, parallel attention and FFN, layer kinds as an array): converter bytes at every outtype, llama.cpp
logits, refusals of what llama.cpp's cohere2moe cannot run."""
import pytest

from family_defaults import check_defaults
from family_oracle import oracle_tests
from family_variants import DROP, variant
from released_config import released_configs

test_export, test_logits = oracle_tests("cohere2_moe", ["cohere2_moe", "cohere2_moe-mtp"])


def test_defaults_match_transformers():
    check_defaults("cohere2_moe")


@pytest.mark.xfail(len(released_configs("cohere2_moe")) < 2, strict=True,
                   reason="published config.json files not reachable from this project's index: see "
                          "tests/data/released_configs/cohere2_moe/SOURCES.md")
def test_at_least_two_released_configs_collected():
    assert len(released_configs("cohere2_moe")) >= 2, released_configs("cohere2_moe")


def test_first_k_dense_replace_reads_as_the_config_class_derives_it(checkpoint, tmp_path):
    """A config stating first_k_dense_replace instead of the lists (as North's release does) gives the same
    layer kinds, hence the same KV, as the saved lists."""
    from hfview import HfCheckpoint

    plain = HfCheckpoint(checkpoint("cohere2_moe"), "f32")
    stated = HfCheckpoint(variant(checkpoint("cohere2_moe"), tmp_path / "v", first_k_dense_replace=1,
                                  layer_types=DROP, mlp_layer_types=DROP), "f32")
    def arch(c):
        return [(kv.key, kv.value) for kv in c.kv if kv.key.startswith("cohere2moe.")]
    assert arch(stated) == arch(plain)


@pytest.mark.parametrize("changes, reason", [
    (dict(mlp_layer_types=["sparse", "dense", "sparse", "sparse", "sparse"]), "dense layer after a mixture"),
    (dict(mlp_layer_types=["dense"] * 4), "mlp_layer_types lists 4"),
    (dict(layer_types=["full_attention"] * 6), "layer_types lists 6"),
    (dict(prefix_dense_intermediate_size=None), "prefix_dense_intermediate_size"),
    (dict(prefix_dense_sliding_window_pattern=2), "prefix_dense_sliding_window_pattern"),
    (dict(expert_selection_fn="softmax", norm_topk_prob=False), "norm_topk_prob false"),
    (dict(shared_expert_combination_strategy="sum"), "shared_expert_combination_strategy"),
    (dict(sliding_window=None), "sliding_window None"),
    (dict(use_qk_norm=True), "use_qk_norm"),
    (dict(rope_scaling={"rope_type": "linear", "factor": 2.0}), "rope scaling"),
], ids=["dense_after_mixture", "short_mlp_list", "long_layer_list", "no_dense_width", "prefix_pattern",
        "softmax_unnormalised", "sum_shared", "no_window", "qk_norm", "linear_rope"])
def test_refuses_what_cohere2moe_cannot_run(changes, reason, checkpoint, tmp_path):
    """What llama.cpp's cohere2moe would compute otherwise than transformers (or the converter refuses) is refused
    by name, before any weight is read."""
    from hfview import HfCheckpoint
    from hfview.errors import ConfigError

    with pytest.raises(ConfigError, match=reason):
        HfCheckpoint(variant(checkpoint("cohere2_moe"), tmp_path / "v", **changes), "f32")


def test_a_checkpoint_saved_without_its_mtp_layer_still_presents(checkpoint, tmp_path):
    """transformers' Cohere2Moe builds no MTP layer, so a fine-tune it saves keeps num_nextn_predict_layers 1 but not
    model.layers.5; the converter still writes block_count 6 and nextn_predict_layers 1, and llama.cpp's cohere2moe
    then loads the trunk only (it marks the MTP block's tensors not required when blk.5.nextn.eh_proj is absent).
    The view does the same: the extra block's tensors are written as stored, never required. Checked by hand once:
    export sha256 == the converter's at f32, llama.cpp vs transformers NMSE 3.4e-7."""
    from family_variants import weights_variant
    from hfview import HfCheckpoint

    src = checkpoint("cohere2_moe-mtp")
    dst = weights_variant(src, tmp_path / "trunk_only",
                          lambda tensors: {k: v for k, v in tensors.items() if not k.startswith("model.layers.5.")})
    trunk, full = HfCheckpoint(dst, "f32"), HfCheckpoint(src, "f32")
    assert [t.name for t in trunk.tensors] == [t.name for t in full.tensors if not t.name.startswith("blk.5.")]
    kv = {k.key: k.value for k in trunk.kv}
    assert kv["cohere2moe.block_count"] == 6 and kv["cohere2moe.nextn_predict_layers"] == 1

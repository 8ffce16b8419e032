"""EXAONE MoE (K-EXAONE: a leading dense layer, then sigmoid-routed experts with a selection bias and a shared
expert, EXAONE 4's attention with rope on the sliding layers only): converter bytes at every outtype, llama.cpp
logits, refusals of what llama.cpp's exaone-moe cannot run."""
import pytest

from family_defaults import check_defaults
from family_oracle import oracle_tests
from family_variants import DROP, variant
from released_config import released_configs

test_export, test_logits = oracle_tests("exaone_moe", ["exaone_moe", "exaone_moe-mtp"])


def test_defaults_match_transformers():
    check_defaults("exaone_moe")


@pytest.mark.xfail(len(released_configs("exaone_moe")) < 2, strict=True,
                   reason="published config.json files not reachable from this project's index: see "
                          "tests/data/released_configs/exaone_moe/SOURCES.md")
def test_at_least_two_released_configs_collected():
    assert len(released_configs("exaone_moe")) >= 2, released_configs("exaone_moe")


def test_the_first_release_spelling_of_the_class_reads_the_same(checkpoint, tmp_path):
    """ExaoneMoEForCausalLM (the name K-EXAONE was released under, before transformers 5.1) is registered by the
    converter beside ExaoneMoeForCausalLM and reads the same."""
    from hfview import HfCheckpoint

    plain = HfCheckpoint(checkpoint("exaone_moe"), "f32")
    first = HfCheckpoint(variant(checkpoint("exaone_moe"), tmp_path / "v", architectures=["ExaoneMoEForCausalLM"]),
                         "f32")

    def arch(c):
        return [(kv.key, kv.value) for kv in c.kv if kv.key.startswith("exaone-moe.")]
    assert arch(first) == arch(plain)


@pytest.mark.parametrize("changes, reason", [
    (dict(scoring_func=DROP), "no scoring_func"),
    (dict(scoring_func="softmax"), "scoring_func 'softmax'"),
    (dict(sliding_window=None), "sliding_window is null"),
    (dict(mlp_layer_types=["dense", "dense", "sparse", "sparse"]), "first_k_dense_replace"),
    (dict(mlp_layer_types=["dense", "sparse", "sparse"]), "mlp_layer_types lists 3"),
    (dict(layer_types=["full_attention"] * 3), "layer_types lists 3"),
    (dict(num_shared_experts=0), "num_shared_experts"),
    (dict(tie_word_embeddings=True), "tie_word_embeddings"),
    (dict(n_group=2), "n_group"),
    (dict(num_nextn_predict_layers=2), "num_nextn_predict_layers 2"),
    (dict(rope_scaling={"rope_type": "linear", "factor": 2.0}), "rope type"),
    (dict(hidden_act="gelu"), "hidden_act"),
], ids=["no_scoring_func", "softmax", "no_window", "mlp_list_vs_first_k", "short_mlp_list", "short_layer_list",
        "no_shared_expert", "tied", "groups", "mtp", "linear_rope", "gelu"])
def test_refuses_what_exaone_moe_cannot_run(changes, reason, checkpoint, tmp_path):
    """What llama.cpp's exaone-moe would compute otherwise than transformers, could not load, or the converter
    would write otherwise, is refused by name, before any weight is read."""
    from hfview import HfCheckpoint
    from hfview.errors import ConfigError

    with pytest.raises(ConfigError, match=reason):
        HfCheckpoint(variant(checkpoint("exaone_moe"), tmp_path / "v", **changes), "f32")

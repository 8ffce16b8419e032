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
    (dict(sliding_window=None), "sliding_window None"),
    (dict(mlp_layer_types=["dense", "dense", "sparse", "sparse"]), "first_k_dense_replace"),
    (dict(mlp_layer_types=["dense", "sparse", "sparse"]), "mlp_layer_types lists 3"),
    (dict(layer_types=["full_attention"] * 3), "layer_types lists 3"),
    (dict(num_shared_experts=0), "num_shared_experts"),
    (dict(tie_word_embeddings=True), "tie_word_embeddings"),
    (dict(n_group=2), "n_group"),
    (dict(num_nextn_predict_layers=2), "num_nextn_predict_layers 2"),
    (dict(rope_scaling={"rope_type": "linear", "factor": 2.0}), "rope type"),
    (dict(hidden_act="gelu"), "hidden_act"),
    (dict(first_last_k_dense_replace=2), "first_last_k_dense_replace 2"),
    (dict(is_moe_layer=[False, False, True, True]), "is_moe_layer"),
    (dict(topk_method="greedy"), "topk_method"),
], ids=["no_scoring_func", "softmax", "no_window", "mlp_list_vs_first_k", "short_mlp_list", "short_layer_list",
        "no_shared_expert", "tied", "groups", "mtp", "linear_rope", "gelu", "first_last_k", "is_moe_layer", "greedy"])
def test_refuses_what_exaone_moe_cannot_run(changes, reason, checkpoint, tmp_path):
    """What llama.cpp's exaone-moe would compute otherwise than transformers, could not load, or the converter
    would write otherwise, is refused by name, before any weight is read."""
    from hfview import HfCheckpoint
    from hfview.errors import ConfigError

    with pytest.raises(ConfigError, match=reason):
        HfCheckpoint(variant(checkpoint("exaone_moe"), tmp_path / "v", **changes), "f32")


def _without_mtp_tensors(src, dst):
    from family_variants import weights_variant

    return weights_variant(src, dst, lambda tensors: {k: v for k, v in tensors.items() if not k.startswith("mtp.")})


def test_mtp_layers_counted_but_not_stored_are_refused(checkpoint, tmp_path):
    """exaone_moe-mtp saved without its mtp.* tensors (as transformers saves a fine-tune: it builds no MTP layer):
    the converter still writes block_count 5 and nextn_predict_layers 1 (checked by hand: the view's export then
    has the converter's sha256 at f32), but llama.cpp's exaone-moe cannot load that file ("tensor
    'blk.4.attn_output.weight' not found"), so the view refuses it by name; with num_nextn_predict_layers 0 it runs
    the trunk."""
    from hfview import HfCheckpoint
    from hfview.errors import CheckpointError

    trunk = _without_mtp_tensors(checkpoint("exaone_moe-mtp"), tmp_path / "trunk")
    with pytest.raises(CheckpointError, match="stores no mtp"):
        HfCheckpoint(trunk, "f32")
    kv = {k.key: k.value for k in HfCheckpoint(variant(trunk, tmp_path / "v", num_nextn_predict_layers=0), "f32").kv}
    assert kv["exaone-moe.block_count"] == 4 and kv["exaone-moe.nextn_predict_layers"] == 0


@pytest.mark.parametrize("name", ["mtp.layers.0.mlp.experts.0.up_proj.weight", "mtp.embed_tokens.weight"])
def test_mtp_tensors_the_converter_stops_on_are_refused_by_name(name, checkpoint, tmp_path):
    """A mixture in the MTP layer (the converter stacks its experts under block 0's index and stops; llama.cpp's
    MTP blocks are dense) and an MTP tensor its remapper does not know are refused, naming the tensor."""
    import torch

    from family_variants import weights_variant
    from hfview import HfCheckpoint
    from hfview.errors import CheckpointError

    dst = weights_variant(checkpoint("exaone_moe-mtp"), tmp_path / "odd_mtp",
                          lambda tensors: {**tensors, name: torch.zeros(8, 32, dtype=torch.bfloat16)})
    with pytest.raises(CheckpointError, match=name.replace(".", r"\.")):
        HfCheckpoint(dst, "f32")


def test_k_exaone_first_config_keys_read_as_what_they_repeat(checkpoint, tmp_path):
    """K-EXAONE's first config.json (transformers 5.0.0.dev0; quoted in TensorRT-LLM's tests) also states
    first_last_k_dense_replace, is_moe_layer, topk_method "noaux_tc" and sliding_window_pattern "LLLG": what
    neither transformers 5.24 nor the converter reads, agreeing with what they do, gives the same KV (checked by
    hand once: the export of this variant has the converter's sha256 at f32)."""
    from hfview import HfCheckpoint

    plain = HfCheckpoint(checkpoint("exaone_moe"), "f32")
    first = HfCheckpoint(variant(checkpoint("exaone_moe"), tmp_path / "v", first_last_k_dense_replace=1,
                                 is_moe_layer=[False, True, True, True], topk_method="noaux_tc",
                                 sliding_window_pattern="LLLG"), "f32")

    def arch(c):
        return [(kv.key, kv.value) for kv in c.kv if kv.key.startswith("exaone-moe.")]
    assert arch(first) == arch(plain)

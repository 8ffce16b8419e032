"""Sarvam-MoE (Ling 2.0's block under Sarvam's name; llama.cpp bailingmoe2): converter bytes at every outtype
(past the converter's failure on the config names transformers 5.24 renames), llama.cpp logits against
transformers' own class (Glm4MoeForCausalLM over SarvamMoEConfig), refusals of what bailingmoe2 cannot run."""
import pytest

import oracle
from converter_variant import convert_as_read
from family_defaults import check_defaults
from family_oracle import OUTTYPES, oracle_tests
from family_variants import assert_refused
from released_config import config_path_kv, released_configs

FIXTURES = ["sarvam_moe", "sarvam_moe-f32"]
CONVERTER_FAILS = ("the pinned converter reads num_experts and num_shared_experts, which transformers 5.24's "
                   "SarvamMoEConfig reads into n_routed_experts and n_shared_experts: KeyError")

test_export, test_logits = oracle_tests("sarvam_moe", FIXTURES, export_xfail=CONVERTER_FAILS)


def restore_release_names(stated: dict, presented: dict) -> dict:
    """The release's names of the expert counts, as config.json states them."""
    return {k: stated[k] for k in ("num_experts", "num_shared_experts") if k in stated}


@pytest.mark.parametrize("outtype", OUTTYPES)
@pytest.mark.parametrize("name", FIXTURES)
def test_export_equals_converter_past_the_rename(name, outtype, checkpoint, tmp_path, record_property):
    from hfview import HfCheckpoint
    from hfview.export import export

    record_property("family", "sarvam_moe")
    record_property("oracle", "bytes")
    path = checkpoint(name)
    theirs = convert_as_read(path, outtype, tmp_path, restore_release_names)
    ours = export(HfCheckpoint(path, outtype), tmp_path / "ours.gguf")
    if oracle.sha256(ours) != oracle.sha256(theirs):
        pytest.fail(f"{name} --outtype {outtype}: {oracle.first_difference(ours, theirs)}")


def test_converter_fails_on_the_renamed_keys(checkpoint, tmp_path):
    with pytest.raises(oracle.ConverterFailed, match="num_experts"):
        oracle.convert(checkpoint("sarvam_moe"), tmp_path / "theirs.gguf", "f32")


def test_defaults_match_transformers():
    check_defaults("sarvam_moe")


@pytest.mark.parametrize("changes, reason", [
    (dict(attention_bias=True), "attention_bias"),
    (dict(use_qk_norm=False), "use_qk_norm"),
    (dict(tie_word_embeddings=True), "tie_word_embeddings"),
    (dict(num_shared_experts=2, n_shared_experts=2), "n_shared_experts"),
    (dict(score_function="softmax"), "score_function"),
    (dict(n_group=2, topk_group=2), "n_group"),
    (dict(num_nextn_predict_layers=1), "num_nextn_predict_layers"),
    (dict(rope_parameters={"rope_type": "default", "rope_theta": 8000000.0, "partial_rotary_factor": 0.5}),
     "partial_rotary_factor"),
    (dict(moe_shared_expert_intermediate_size=24), "moe_shared_expert_intermediate_size"),
    (dict(score_function=None), "no score_function"),
], ids=["qkv_bias", "no_qk_norm", "tied", "two_shared", "softmax", "groups_all_kept", "mtp", "partial_rotary",
        "shared_width", "no_score_function"])
def test_refuses_what_bailingmoe2_cannot_run(changes, reason, checkpoint, tmp_path):
    assert_refused(checkpoint("sarvam_moe"), tmp_path, reason, **changes)


def test_refuses_layers_of_the_other_kind(checkpoint, tmp_path):
    """first_k_dense_replace 2 makes layer 1 dense, but the checkpoint stores a mixture there."""
    from hfview import HfCheckpoint
    from hfview.errors import CheckpointError, ConfigError
    from hfview.export import export
    from family_variants import variant

    with pytest.raises((CheckpointError, ConfigError), match="missing"):
        export(HfCheckpoint(variant(checkpoint("sarvam_moe"), tmp_path / "v", first_k_dense_replace=2), "f32"),
               tmp_path / "out.gguf")


@pytest.mark.xfail(len(released_configs("sarvam_moe")) < 2, strict=True,
                   reason="published config.json files not reachable from this project's index: see "
                          "tests/data/released_configs/sarvam_moe/SOURCES.md")
def test_at_least_two_released_configs_collected():
    assert len(released_configs("sarvam_moe")) >= 2, released_configs("sarvam_moe")


@pytest.mark.parametrize("path", released_configs("sarvam_moe"), ids=lambda p: p.stem)
def test_released_config_is_accepted(path):
    """Each released config passes the key check and the family's checks; its KV carries the released counts."""
    import json
    released = json.loads(path.read_text(encoding="utf-8"))
    kv = config_path_kv(path)
    assert kv["bailingmoe2.block_count"] >= released["num_hidden_layers"]
    assert kv["bailingmoe2.expert_count"] == released.get("num_experts", released.get("n_routed_experts"))
    assert kv["bailingmoe2.expert_used_count"] == released["num_experts_per_tok"]

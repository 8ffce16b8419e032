"""Ling 2.0 (BailingMoeV2ForCausalLM, remote code; transformers has no class): converter bytes at every outtype,
and llama.cpp's logits from the view against transformers' SarvamMoE class (Glm4MoeForCausalLM over
SarvamMoEConfig) over the same weights. Equivalence, read from both sources: Ling 2.0's remote
modeling_bailing_moe_v2 and transformers' Glm4Moe share the fused query_key_value split q|k|v, per-head RMSNorms
on q and k before a rotate-half rope over the first head_dim x partial_rotary_factor dims, dense layers before
first_k_dense_replace, a sigmoid router whose choice adds the expert bias, group limits by each group's two best
biased scores, the unbiased chosen weights renormalised (Ling: whenever top_k > 1; Glm4Moe: by norm_topk_prob,
true here) times routed_scaling_factor, and one shared SwiGLU of moe_intermediate_size x num_shared_experts;
transformers' sarvam_moe weight mapping reads Ling's tensor names."""
import json

import pytest

from family_oracle import oracle_tests, reference_logits_test
from family_variants import assert_refused
from released_config import config_path_kv, released_configs

test_export, _ = oracle_tests("bailing_moe_v2", ["bailing_moe_v2"])


def sarvam_config(path):
    """SarvamMoEConfig stating Ling 2.0's config.json."""
    import transformers

    c = json.loads((path / "config.json").read_text())
    return transformers.SarvamMoEConfig(
        vocab_size=c["vocab_size"], hidden_size=c["hidden_size"], intermediate_size=c["intermediate_size"],
        num_hidden_layers=c["num_hidden_layers"], num_attention_heads=c["num_attention_heads"],
        num_key_value_heads=c["num_key_value_heads"], head_dim=c["head_dim"], rms_norm_eps=c["rms_norm_eps"],
        max_position_embeddings=c["max_position_embeddings"], tie_word_embeddings=c["tie_word_embeddings"],
        attention_bias=c["use_qkv_bias"], use_qk_norm=c["use_qk_norm"], moe_intermediate_size=c["moe_intermediate_size"],
        num_experts_per_tok=c["num_experts_per_tok"], n_shared_experts=c["num_shared_experts"],
        n_routed_experts=c["num_experts"], routed_scaling_factor=c["routed_scaling_factor"], n_group=c["n_group"],
        topk_group=c["topk_group"], first_k_dense_replace=c["first_k_dense_replace"],
        norm_topk_prob=c["norm_topk_prob"],
        rope_parameters={"rope_type": "default", "rope_theta": c["rope_theta"],
                         "partial_rotary_factor": c["partial_rotary_factor"]})


def sarvam_logits(path, ids):
    import torch
    import transformers

    model = transformers.AutoModelForCausalLM.from_pretrained(path, config=sarvam_config(path), dtype=torch.float32)
    with torch.no_grad():
        return model(torch.tensor([ids])).logits[0].numpy()


test_logits = reference_logits_test("bailing_moe_v2", ["bailing_moe_v2"], sarvam_logits,
                                    "transformers' SarvamMoE over the same weights")


def test_transformers_read_every_stored_weight(checkpoint):
    """The equivalent class loads Ling's tensor names with none left over or missing (no weight stays random)."""
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    path = checkpoint("bailing_moe_v2")
    _, info = transformers.AutoModelForCausalLM.from_pretrained(path, config=sarvam_config(path), dtype=torch.float32,
                                                                output_loading_info=True)
    assert not info["missing_keys"] and not info["unexpected_keys"], info


@pytest.mark.parametrize("changes, reason", [
    # now read by the Ling 1.x family (architectures picks it), which names the Ling 2.0 keys it does not know
    (dict(architectures=["BailingMoeForCausalLM"]), "not one the bailing_moe family knows"),
    (dict(norm_topk_prob=False), "norm_topk_prob"),
    (dict(use_qkv_bias=True), "attention_bias"),
    (dict(use_qk_norm=False), "use_qk_norm"),
    (dict(norm_head=True), "norm_head"),
    (dict(use_bias=True), "use_bias"),
    (dict(score_function=None), "no score_function"),
    (dict(num_nextn_predict_layers=1), "num_nextn_predict_layers"),
    (dict(rotary_dim=8), "rotary_dim"),
    (dict(num_shared_experts=2), "n_shared_experts"),
    (dict(n_group=4, topk_group=4), "n_group"),
    (dict(moe_intermediate_size=None), "moe_intermediate_size"),
    (dict(tie_word_embeddings=True), "tie_word_embeddings"),
], ids=["ling1", "no_renorm", "qkv_bias", "no_qk_norm", "norm_head", "bias", "no_score_function", "mtp",
        "rotary_dim", "two_shared", "groups_all_kept", "no_expert_width", "tied"])
def test_refuses_what_bailingmoe2_cannot_run(changes, reason, checkpoint, tmp_path):
    assert_refused(checkpoint("bailing_moe_v2"), tmp_path, reason, **changes)


@pytest.mark.xfail(len(released_configs("bailing_moe_v2")) < 2, strict=True,
                   reason="published config.json files not reachable from this project's index: see "
                          "tests/data/released_configs/bailing_moe_v2/SOURCES.md")
def test_at_least_two_released_configs_collected():
    assert len(released_configs("bailing_moe_v2")) >= 2, released_configs("bailing_moe_v2")


@pytest.mark.parametrize("path", released_configs("bailing_moe_v2"), ids=lambda p: p.stem)
def test_released_config_is_accepted(path):
    """Each released config passes the key check and the family's checks; its KV carries the released counts."""
    import json
    released = json.loads(path.read_text(encoding="utf-8"))
    kv = config_path_kv(path)
    assert kv["bailingmoe2.block_count"] >= released["num_hidden_layers"]
    assert kv["bailingmoe2.expert_count"] == released.get("num_experts", released.get("n_routed_experts"))
    assert kv["bailingmoe2.expert_used_count"] == released["num_experts_per_tok"]

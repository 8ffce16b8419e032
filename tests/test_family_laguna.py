"""Laguna (per-layer head counts, a per-head attention gate, per-layer-kind partial rope, a leading dense layer,
sigmoid-routed experts with a selection bias and a shared expert): converter bytes at every outtype, llama.cpp
logits, refusals of what llama.cpp's laguna cannot run or the view does not write."""
import pytest

from family_defaults import check_defaults
from family_oracle import oracle_tests
from family_variants import variant
from released_config import released_configs

test_export, test_logits = oracle_tests("laguna", ["laguna", "laguna-release", "laguna-per-element"])


def test_defaults_match_transformers():
    check_defaults("laguna")


@pytest.mark.xfail(len(released_configs("laguna")) < 2, strict=True,
                   reason="published config.json files not reachable from this project's index: see "
                          "tests/data/released_configs/laguna/SOURCES.md")
def test_at_least_two_released_configs_collected():
    assert len(released_configs("laguna")) >= 2, released_configs("laguna")


def test_per_layer_heads_replace_the_scalar_head_count_in_place(checkpoint):
    """The converter re-adds attention.head_count as the per-layer array; GGUFWriter keeps the key's first place."""
    from hfview import HfCheckpoint

    keys = [kv.key for kv in HfCheckpoint(checkpoint("laguna"), "f32").kv]
    kv = {k.key: k.value for k in HfCheckpoint(checkpoint("laguna"), "f32").kv}
    assert kv["laguna.attention.head_count"] == [4, 8, 4]
    assert keys.count("laguna.attention.head_count") == 1
    assert keys.index("laguna.attention.head_count") == keys.index("laguna.feed_forward_length") + 1


@pytest.mark.parametrize("changes, reason", [
    (dict(layer_types=["sliding_attention", "full_attention", "sliding_attention"]), "every 4th layer"),
    (dict(layer_types=["full_attention"] * 4), "layer_types lists 4"),
    (dict(num_attention_heads_per_layer=[4, 4]), "num_attention_heads_per_layer lists 2"),
    (dict(mlp_layer_types=["sparse", "dense", "sparse"]), "dense layers only before"),
    (dict(sliding_window=None), "without a sliding_window"),
    (dict(gating="per-element"), "needs 32"),
    (dict(gating="per_head"), "per-head"),
    (dict(moe_router_logit_softcapping=30.0), "softcap"),
    (dict(tie_word_embeddings=True), "tie_word_embeddings"),
    (dict(rope_parameters={"full_attention": {"rope_type": "default", "rope_theta": 500000.0},
                           "sliding_attention": {"rope_type": "yarn", "factor": 4.0, "rope_theta": 10000.0,
                                                 "original_max_position_embeddings": 32768}}), "plain rope"),
    (dict(rope_parameters={"full_attention": {"rope_type": "linear", "factor": 4.0, "rope_theta": 500000.0},
                           "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0}}), "plain rope or yarn"),
    (dict(rope_parameters={"full_attention": {"rope_type": "yarn", "factor": 32.0, "rope_theta": 500000.0,
                                              "original_max_position_embeddings": 4096, "truncate": False},
                           "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0}}), "truncate false"),
], ids=["pattern", "long_layer_list", "short_heads_list", "dense_after_mixture", "no_window", "per_element_gate", "per_head_underscored",
        "softcap", "tied", "sliding_yarn", "linear", "yarn_untruncated"])
def test_refuses_what_laguna_cannot_run(changes, reason, checkpoint, tmp_path):
    """Another layer pattern (llama.cpp's laguna fixes every 4th layer from 0 global), per-layer lists of the
    wrong length, a dense layer after a mixture, a router softcap the converter does not write, rope scaling
    llama.cpp's laguna does not run (on the sliding layers; other than yarn on the global ones), a gating spelling
    transformers and the converter read apart ("per_head": per element to transformers) and a gate whose width
    contradicts the gating are refused by name."""
    from hfview import HfCheckpoint
    from hfview.errors import CheckpointError

    with pytest.raises(CheckpointError, match=reason):
        HfCheckpoint(variant(checkpoint("laguna"), tmp_path / "v", **changes), "f32")


def test_release_vocab_embeds_the_template_file_and_registers_the_turn_end(checkpoint):
    """laguna-release: the template is chat_template.jinja's text (not tokenizer_config's include directive), in
    the place SpecialVocab's template takes; eos_token_id [50256, 13] gives eot 13 after it (bos 50256 skipped)."""
    from hfview import HfCheckpoint

    path = checkpoint("laguna-release")
    kv = HfCheckpoint(path, "f32").kv
    keys, values = [k.key for k in kv], {k.key: k.value for k in kv}
    assert values["tokenizer.chat_template"] == (path / "chat_template.jinja").read_text(encoding="utf-8")
    assert values["tokenizer.ggml.eot_token_id"] == 13
    assert keys.index("tokenizer.ggml.eot_token_id") > keys.index("tokenizer.chat_template")
    assert values["laguna.rope.scaling.type"] == "yarn" and values["laguna.rope.scaling.factor"] == 32.0


def test_the_per_head_gate_named_as_a_string_reads_as_true(checkpoint, tmp_path):
    """gating "per-head" (the string spelling LagunaConfig documents beside true): transformers and the converter
    both gate per head, and the converter writes nothing of it, so the view is the same as with gating true."""
    from hfview import HfCheckpoint

    plain = HfCheckpoint(checkpoint("laguna"), "f32")
    named = HfCheckpoint(variant(checkpoint("laguna"), tmp_path / "v", gating="per-head"), "f32")
    def arch(c):
        return [(kv.key, kv.value) for kv in c.kv if kv.key.startswith("laguna.")]
    assert arch(named) == arch(plain)
    assert [(t.name, t.shape) for t in named.tensors] == [(t.name, t.shape) for t in plain.tensors]

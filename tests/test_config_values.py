"""config.json values as the view reads them (hfview/config_values.py): every key a family reads has a rule,
and a value of the wrong type or range is a ConfigError naming the file, the key, the value and the rule."""
from __future__ import annotations

from pathlib import Path

import pytest

from hfview import ConfigError, families
from hfview.config_values import check_against_tensors, check_shapes, check_values, check_vocab, rule_for

PATH = Path("/m/config.json")


@pytest.mark.parametrize("family", families.FAMILIES, ids=lambda f: f.name)
def test_every_key_a_family_reads_or_defaults_has_a_rule(family):
    for model_type, defaults in family.defaults.items():
        unruled = sorted(k for k in set(family.reads) | set(defaults) if rule_for(family.name, defaults, k) is None)
        assert not unruled, f"{family.name}/{model_type}: no type or range for {unruled}: add them to RULES"


def test_every_family_default_passes_its_own_rules():
    for family in families.FAMILIES:
        for defaults in family.defaults.values():
            check_values(family.name, defaults, defaults, PATH)


@pytest.mark.parametrize("config, words", [
    ({"num_attention_heads": 0}, ["num_attention_heads is 0", "an integer from 1"]),
    ({"num_attention_heads": {"a": 1}}, ["num_attention_heads is {'a': 1}"]),
    ({"num_hidden_layers": True}, ["num_hidden_layers is True"]),
    ({"num_hidden_layers": None}, ["num_hidden_layers is None"]),
    ({"head_dim": 2.5}, ["head_dim is 2.5", "or null"]),
    ({"rms_norm_eps": "1e-5"}, ["rms_norm_eps is '1e-5'", "a number >= 0"]),
    ({"rope_theta": 1e39}, ["rope_theta"]),                       # past float32
    ({"rope_theta": float("inf")}, ["rope_theta is inf"]),
    ({"rope_scaling": [2.0]}, ["rope_scaling is [2.0]", "an object"]),
    ({"rope_scaling": {"rope_type": "linear", "factor": -2}}, ["rope_scaling.factor is -2", "a number > 0"]),
    ({"rope_scaling": {"rope_type": 3}}, ["rope_scaling.rope_type is 3", "a string"]),
    ({"rope_scaling": {"rope_type": "longrope", "long_factor": [1.0, "x"]}}, ["rope_scaling.long_factor[1] is 'x'"]),
    ({"layer_types": ["full_attention", 7]}, ["layer_types[1] is 7"]),
    ({"tie_word_embeddings": 1}, ["tie_word_embeddings is 1", "true or false"]),
    ({"hidden_act": ["silu"]}, ["hidden_act is ['silu']", "a string"]),
    ({"eos_token_id": [1, "2"]}, ["eos_token_id"]),
    ({"vocab_size": 10**12}, ["vocab_size is 1000000000000", "4294967295"]),
])
def test_wrong_values_are_named(config, words):
    with pytest.raises(ConfigError) as info:
        check_values("llama", families.family_for("llama").defaults["llama"], config, PATH)
    for word in (str(PATH), *words):
        assert word in str(info.value), f"{word!r} not in {info.value}"


def test_values_as_released_configs_state_them_pass():
    check_values("llama", families.family_for("llama").defaults["llama"], {
        "rope_scaling": None, "rope_theta": 500000, "head_dim": None, "num_key_value_heads": 8,
        "eos_token_id": [128001, 128008, 128009], "pad_token_id": None, "sliding_window": None,
        "rope_parameters": {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                            "original_max_position_embeddings": 8192, "rope_theta": 500000.0},
    }, PATH)
    for pattern in ("LLLG", 0):  # EXAONE 4.0 32B and 1.2B
        check_values("exaone4", families.family_for("exaone4").defaults["exaone4"], {"sliding_window_pattern": pattern},
                     PATH)


@pytest.mark.parametrize("h, words", [
    ({"num_attention_heads": 6, "num_key_value_heads": 4}, ["num_attention_heads = 6", "num_key_value_heads = 4"]),
    ({"hidden_size": 50, "num_attention_heads": 6}, ["hidden_size = 50", "6 heads"]),
    ({"num_hidden_layers": 3, "layer_types": ["full_attention"] * 2}, ["layer_types lists 2 layers", "has 3"]),
])
def test_counts_that_disagree_are_named(h, words):
    with pytest.raises(ConfigError) as info:
        check_shapes(h, PATH)
    for word in words:
        assert word in str(info.value)


def test_head_dim_may_differ_from_width_over_heads():
    check_shapes({"hidden_size": 5120, "num_attention_heads": 32, "head_dim": 128, "num_key_value_heads": 8}, PATH)


def test_counts_are_bounded_by_the_tensors_before_anything_is_sized_by_them():
    shapes = [(2000, 192), (192,), (192, 192)]
    check_against_tensors({"num_hidden_layers": 3, "head_dim": 32, "hidden_size": 192}, shapes, PATH)
    with pytest.raises(ConfigError, match=r"num_hidden_layers = 4, but the shards store only 3 tensors"):
        check_against_tensors({"num_hidden_layers": 4}, shapes, PATH)
    with pytest.raises(ConfigError, match=r"head_dim = 4096, but no stored tensor .*\(the largest is 2000\)"):
        check_against_tensors({"head_dim": 4096}, shapes, PATH)
    with pytest.raises(ConfigError, match=r"vocab_size = 2001 is more than the 2000 rows of the token embedding"):
        check_vocab({"vocab_size": 2001}, 2000, "model.embed_tokens.weight", PATH)
    check_vocab({"vocab_size": 1999}, 2000, "model.embed_tokens.weight", PATH)  # fewer tokens than rows: as stored
    # no readable shard: the config is still checked, its per-layer lists held to MAX_LAYERS
    check_against_tensors({"num_hidden_layers": 80}, None, PATH)
    with pytest.raises(ConfigError, match=r"num_hidden_layers = 1000000000 is past any model's"):
        check_against_tensors({"num_hidden_layers": 10**9}, None, PATH)

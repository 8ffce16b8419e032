"""The key check's value-awareness: a key is read, harmless whatever its value, harmless only at its off
value (a flag in its off position), or refused by name; the same flag on is refused by name with its value."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from hfview import families
from hfview.config import ANY, COMMON_HARMLESS, check_keys
from hfview.errors import ConfigError


# ---------------------------------------------------------------- the key check itself
def _qwen2(**extra) -> dict:
    return {"architectures": ["Qwen2ForCausalLM"], "model_type": "qwen2", "hidden_size": 64,
            "num_attention_heads": 4, "num_hidden_layers": 2, **extra}


def _check(config: dict) -> None:
    family = families.family_for(config["model_type"])
    check_keys(config, Path("config.json"), family.name, family.reads, family.harmless)


def test_flag_off_is_harmless_and_on_is_refused_by_name_with_its_value():
    _check(_qwen2(use_mrope=False))
    with pytest.raises(ConfigError, match=r"'use_mrope' is true.*qwen2.*as if it were false"):
        _check(_qwen2(use_mrope=True))


def test_off_value_is_compared_as_json():
    """0 is not false, and the string "false" is not either: both refused."""
    for value in (0, "false", None):
        with pytest.raises(ConfigError, match="'use_mrope'"):
            _check(_qwen2(use_mrope=value))


def test_unknown_key_is_refused_before_a_flag_on():
    with pytest.raises(ConfigError, match=r"'mystery_scale' \(= 2\.0\) is not one the qwen2 family knows"):
        _check(_qwen2(mystery_scale=2.0, use_mrope=True))


def test_a_family_entry_overrides_the_common_table():
    family = families.family_for("llama")
    assert family.harmless["use_sliding_window"] is ANY and "use_sliding_window" not in family.reads
    check_keys({"model_type": "llama", "use_sliding_window": True}, Path("config.json"), family.name,
               family.reads, family.harmless)


def test_every_off_value_table_is_a_tuple():
    """A value that is not ANY lists the off values as a tuple (a bare False would be iterated wrongly)."""
    for table in (COMMON_HARMLESS, *(f.harmless for f in families.FAMILIES)):
        for key, off in table.items():
            assert off is ANY or isinstance(off, tuple), f"{key}: {off!r}"


def test_hfcheckpoint_refuses_a_flag_on(tmp_path):
    """The same check guards HfCheckpoint, before any shard is read."""
    from hfview import HfCheckpoint
    (tmp_path / "config.json").write_text(json.dumps(_qwen2(use_mrope=True)))
    with pytest.raises(ConfigError, match="'use_mrope' is true"):
        HfCheckpoint(tmp_path)

"""A family's DEFAULTS must be what transformers 5.24's config class fills in: the converter reads the
config through AutoConfig, so an absent key reads as that default."""
from __future__ import annotations

import pytest


def defaults_match_transformers(model_type: str, defaults: dict) -> None:
    transformers = pytest.importorskip("transformers")
    reference = transformers.AutoConfig.for_model(model_type).to_dict()
    for key, value in defaults.items():
        assert key in reference, f"{model_type}: {key!r} is not a {model_type} config attribute"
        assert reference[key] == value, f"{model_type}: {key} is {reference[key]!r} in transformers, {value!r} here"


def with_config(src, tmp_path, **changes):
    """A copy of checkpoint directory `src` whose config.json has `changes` applied (None deletes a key)."""
    import json
    import shutil
    out = tmp_path / "model"
    shutil.copytree(src, out)
    cfg = json.loads((out / "config.json").read_text())
    for key, value in changes.items():
        if value is None:
            cfg.pop(key, None)
        else:
            cfg[key] = value
    (out / "config.json").write_text(json.dumps(cfg))
    return out

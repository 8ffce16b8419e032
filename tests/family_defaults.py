"""A family's DEFAULTS (its transformers config classes' defaults, written as data) checked against
transformers 5.24 itself: every listed default equals the class's, and every key the family reads that
the class defaults is listed (else an absent key would read differently in the view than in the
converter)."""
from __future__ import annotations

import importlib

import pytest

# Computed by the config classes' constructors from other keys (the families' normalise does the same).
DERIVED = {"layer_types", "no_rope_layers", "moe_layers", "layer_rope_theta", "mlp_layer_types"}  # moe_layers: Llama 4's, from interleave_moe_layer_step; layer_rope_theta: Granite SWA's, from rope_theta; mlp_layer_types: Hy3's, from num_hidden_layers


def check_defaults(family: str) -> None:
    transformers = pytest.importorskip("transformers")
    fam = importlib.import_module(f"hfview.families.{family}").FAMILY
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING

    for model_type, defaults in fam.defaults.items():
        if model_type not in CONFIG_MAPPING:  # no config class: the converter reads config.json as written
            assert defaults == {}, f"{model_type}: transformers has no config class for it, so no default applies"
            continue
        theirs = transformers.AutoConfig.for_model(model_type).to_dict()
        # an empty config.json as the family presents it: defaults, then what the constructor computes
        ours = fam.normalise({**defaults, "model_type": model_type})
        for key in defaults:
            assert key in theirs, f"{model_type}: {key} is not a {model_type} config default"
            assert theirs[key] == ours[key], f"{model_type}: default {key} is {theirs[key]!r}, the family says {ours[key]!r}"
        missing = sorted(k for k in fam.reads & set(theirs) - set(defaults) - DERIVED)
        assert not missing, f"{model_type}: read keys with a transformers default not listed: {missing}"

"""Gemma 3n (AltUp, Laurel, per-layer inputs, activation sparsity, soft-capped logits): both oracles on a tiny text
model in the layout llama.cpp's gemma3n fixes, the defaults, released configs through the view's config path, and
refusals of every value where llama.cpp's fixed choice differs from what transformers computes."""
from __future__ import annotations

from pathlib import Path

import pytest

import oracle
from config_defaults import with_config
from family_oracle import oracle_tests
from hfview import HfCheckpoint
from hfview.errors import ConfigError
from released_config import config_path_kv, released_configs

# gemma3n-padded: the per-layer embedding stored short of vocab_size (as released) and padded with zero rows
test_export, test_logits = oracle_tests("gemma3n", ["gemma3n-text", "gemma3n-padded"])
# gemma3n-mm: Gemma3nForConditionalGeneration's layout over gemma3n-text's weights; transformers cannot build the
# wrapper here (its vision tower needs timm), so its logits are gemma3n-text's: the test below checks that the view
# presents the very same tensors and hyperparameters
test_export_wrapper, _ = oracle_tests("gemma3n", ["gemma3n-mm"])


def test_image_text_model_presents_the_text_models_tensors(checkpoint):
    import numpy as np
    text, wrapped = HfCheckpoint(checkpoint("gemma3n-text"), "f32"), HfCheckpoint(checkpoint("gemma3n-mm"), "f32")
    assert [t.name for t in wrapped.tensors] == [t.name for t in text.tensors]
    for t in text.tensors:
        assert np.array_equal(wrapped.read_tensor(t.name), text.read_tensor(t.name)), t.name
    assert oracle.kv_but_directory_named(wrapped) == oracle.kv_but_directory_named(text)


def test_defaults_match_transformers():
    """Gemma3nTextConfig's defaults; the image-text-audio Gemma3nConfig is read through its text_config, whose class
    is the same."""
    transformers = pytest.importorskip("transformers")
    from hfview.families.gemma3n import FAMILY
    from family_defaults import DERIVED
    theirs = transformers.AutoConfig.for_model("gemma3n_text").to_dict()
    defaults = FAMILY.defaults["gemma3n_text"]
    ours = FAMILY.normalise({**defaults, "model_type": "gemma3n_text"})  # the per-layer lists the class computes
    for key in defaults:
        assert theirs[key] == ours[key], f"default {key} is {theirs[key]!r}, the family says {ours[key]!r}"
    assert not sorted(k for k in FAMILY.reads & set(theirs) - set(defaults) - DERIVED)


def test_presents_stacked_altup_projections_and_per_layer_inputs(checkpoint):
    view = HfCheckpoint(checkpoint("gemma3n-text"), "f32")
    shapes = {t.name: tuple(t.view.shape) for t in view.tensors}
    assert shapes["altup_proj.weight"] == shapes["altup_unembd_proj.weight"] == (3, 32, 32)
    assert shapes["per_layer_token_embd.weight"] == (32000, 3 * 256)
    assert "blk.2.altup_correct_scale.weight" in shapes
    kv = {k.key: k.value for k in view.kv}
    assert kv["gemma3n.feed_forward_length"] == [1024, 1024, 1024]
    assert kv["gemma3n.attention.sliding_window_pattern"] == [True, True, False]


@pytest.mark.parametrize("changes, words", [
    (dict(altup_num_inputs=2), "altup_num_inputs"),
    (dict(altup_active_idx=1), "altup_active_idx"),
    (dict(laurel_rank=32), "laurel_rank"),
    (dict(hidden_size_per_layer_input=128), "hidden_size_per_layer_input"),
    (dict(altup_correct_scale=False), "altup_correct_scale"),
    (dict(hidden_activation="gelu"), "hidden_activation"),
    (dict(final_logit_softcapping=0.0), "final_logit_softcapping"),
    (dict(activation_sparsity_pattern=[0.0, 0.0, 0.0]), "activation_sparsity_pattern"),
    (dict(activation_sparsity_pattern=[0.95, 0.9, 0.95]), "activation_sparsity_pattern"),
    (dict(num_kv_shared_layers=1), "num_kv_shared_layers"),
    (dict(vocab_size_per_layer_input=33000), "vocab_size_per_layer_input"),
    (dict(rope_parameters={"full_attention": {"rope_type": "linear", "factor": 2.0, "rope_theta": 1e6},
                           "sliding_attention": {"rope_type": "default", "rope_theta": 1e4}}), "rope_parameters"),
], ids=["altup_inputs", "altup_active", "laurel_rank", "per_layer_width", "no_correct_scale", "exact_gelu",
        "no_softcap", "no_sparsity_below_11_layers", "sparsity_other_than_0.95", "shared_kv_below_21_layers",
        "per_layer_vocab", "scaled_rope"])
def test_refuses_what_llama_cpp_gemma3n_runs_otherwise(changes, words, checkpoint, tmp_path):
    with pytest.raises(ConfigError, match=words):
        HfCheckpoint(with_config(checkpoint("gemma3n-text"), tmp_path, **changes))


# released configs the view refuses, and the reason it names
REFUSED: dict[str, str] = {}


@pytest.mark.parametrize("path", released_configs("gemma3n"), ids=lambda p: p.stem)
def test_released_config_is_accepted_or_refused_by_name(path: Path):
    import json

    if path.stem in REFUSED:
        with pytest.raises(ConfigError, match=REFUSED[path.stem]):
            config_path_kv(path)
        return
    released = json.loads(path.read_text(encoding="utf-8"))
    text = released.get("text_config", released)
    kv = config_path_kv(path)
    assert kv["gemma3n.block_count"] == text["num_hidden_layers"]
    assert kv["gemma3n.attention.shared_kv_layers"] == text["num_kv_shared_layers"]


@pytest.mark.parametrize("layers, shared", [(30, 10), (35, 15)], ids=["E2B", "E4B"])
def test_e2b_e4b_layouts_pass_the_checks(layers, shared, tmp_path):
    """The E2B / E4B layouts (transformers' defaults at their layer and shared-KV counts: every 5th layer full, 0.95
    sparsity on the first 10 layers, per-layer vocabulary 262144 of 262400) are what llama.cpp's fixed choices
    describe; no byte copy of their config.json is reachable from this project's index, so none is kept."""
    from hfview.families.gemma3n import FAMILY
    h = FAMILY.normalise({**FAMILY.defaults["gemma3n_text"], "num_hidden_layers": layers,
                          "num_kv_shared_layers": shared})
    FAMILY.check(h, tmp_path / "config.json")
    kv = {k.key: k.value for k in FAMILY.parameters(h, layers, 1)}
    assert kv["gemma3n.activation_sparsity_scale"][9] == pytest.approx(1.6448536) and \
        kv["gemma3n.activation_sparsity_scale"][10] == float("-inf")
    assert kv["gemma3n.attention.sliding_window_pattern"][18:20] == [True, False]

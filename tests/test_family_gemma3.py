"""Gemma 3: both oracles on the text model (6 layers: five sliding, one global; a window shorter than the
prompt; linear rope scaling on the global layers only; released config layout) and on the image-text model
read as its text model (vision tower and projector left out), plus the defaults and refusals."""
from __future__ import annotations

import pytest

from config_defaults import defaults_match_transformers, with_config
from family_oracle import oracle_tests
from hfview import HfCheckpoint
from hfview.errors import ConfigError

test_export, test_logits = oracle_tests("gemma3", ["gemma3-text", "gemma3-mm"])


def test_defaults_are_transformers():
    from hfview.families.gemma3 import DEFAULTS
    defaults_match_transformers("gemma3_text", DEFAULTS["gemma3_text"])


def test_image_text_model_presents_no_vision_tensor(checkpoint):
    view = HfCheckpoint(checkpoint("gemma3-mm"), "f32")
    assert not [t.name for t in view.tensors if "vision" in t.name or "mm_" in t.name]
    assert view.read_tensor("token_embd.weight").shape == (32000, 48)


@pytest.mark.parametrize("changes, words", [
    (dict(query_pre_attn_scalar=256), "query_pre_attn_scalar"),
    (dict(sliding_window_pattern=2), "layer_types"),
    (dict(attn_logit_softcapping=50.0), "attn_logit_softcapping"),
    (dict(use_bidirectional_attention=True), "use_bidirectional_attention"),
    (dict(rope_scaling={"rope_type": "yarn", "factor": 8.0, "original_max_position_embeddings": 8192}), "rope"),
    # Rnj-1.5's block-local layers, in either statement
    (dict(layer_types=["chunked_attention"] * 5 + ["full_attention"], attention_chunk_size=4096), "chunked_attention"),
    (dict(attention_chunk_size=4096), "chunked_attention layers"),
])
def test_refuses_what_llama_cpp_gemma3_runs_otherwise(changes, words, checkpoint, tmp_path):
    with pytest.raises(ConfigError, match=words):
        HfCheckpoint(with_config(checkpoint("gemma3-text"), tmp_path, **changes))


def test_image_text_model_with_released_config_layout(checkpoint, tmp_path):
    """The image-text config as Gemma 3 was released (transformers 4.50): text_config with rope_theta,
    rope_local_base_freq, rope_scaling and sliding_window_pattern instead of rope_parameters and layer_types.
    The view's file is still the converter's."""
    import json
    import shutil

    import oracle
    from hfview.export import export
    path = tmp_path / "model"
    shutil.copytree(checkpoint("gemma3-mm"), path)
    cfg = json.loads((path / "config.json").read_text())
    text = cfg["text_config"]
    rope = text.pop("rope_parameters")
    for key in ("layer_types", "_sliding_window_pattern"):
        text.pop(key)
    full = dict(rope["full_attention"])
    text.update(rope_theta=full.pop("rope_theta"), rope_local_base_freq=rope["sliding_attention"]["rope_theta"],
                rope_scaling=full, sliding_window_pattern=6)
    cfg["torch_dtype"] = cfg.pop("dtype")
    (path / "config.json").write_text(json.dumps(cfg))
    theirs = oracle.convert_cached(path, "f16")
    ours = export(HfCheckpoint(path, "f16"), tmp_path / "ours.gguf")
    assert oracle.sha256(ours) == oracle.sha256(theirs), oracle.first_difference(ours, theirs)

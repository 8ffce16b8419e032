"""HyperCLOVA X (HyperCLOVAXForCausalLM -> llama.cpp glm4 under hfview's own mapping).

No byte oracle: the pinned converter has no HyperCLOVAX class (checked below), and no converter class writes
glm4 from this block (its Glm4Model reads GLM-4's fused gate_up and partial interleaved rotary), so docs/families.md's
bytes column says n/a. Logits oracle: transformers 5.24's own HyperCLOVAXForCausalLM over the fixture, NMSE < 1e-4
at every outtype, on fixtures whose four muP multipliers all differ from 1 (tied and untied heads).
"""
from __future__ import annotations

import pytest

from family_defaults import check_defaults
from family_oracle import assert_converter_has_no_class, oracle_tests, reference_logits_test
from family_variants import assert_refused

FIXTURES = ["hyperclovax", "hyperclovax-tied-linear"]

_, test_logits = oracle_tests("hyperclovax", FIXTURES)


def test_defaults():
    check_defaults("hyperclovax")


def test_the_pinned_converter_has_no_class_for_hyperclovax():
    assert_converter_has_no_class("hyperclovax")


def test_route_is_the_view():
    from hfview.coverage import route_for
    route = route_for("hyperclovax")
    assert route.kind == "view" and "glm4" in route.detail


def test_folds_are_shown(checkpoint):
    from hfview import HfCheckpoint
    from hfview.inspect import describe

    info = describe(HfCheckpoint(checkpoint("hyperclovax"), "f32"))
    assert info["architecture"] == "glm4" and info["family"] == "hyperclovax"
    views = {t["name"]: t for t in info["tensors"]}
    shapes = {t.name: t.shape for t in HfCheckpoint(checkpoint("hyperclovax"), "f32").tensors}
    assert shapes["blk.0.ffn_up.weight"] == (160, 48)
    assert "rows joined" in str(views["blk.0.ffn_up.weight"])
    assert "residual_multiplier" in str(views["blk.1.post_ffw_norm.weight"])
    assert "attention_multiplier" in str(views["blk.0.attn_q.weight"])


@pytest.mark.parametrize("changes, message", [
    (dict(use_post_norm=False), "use_post_norm False"),
    (dict(hidden_act="gelu"), "hidden_act 'gelu'"),
    (dict(attention_bias=True), "attention_bias True"),
    (dict(mlp_bias=True), "mlp_bias True"),
    (dict(rope_theta=None, rope_scaling=None, rope_parameters={"rope_type": "llama3", "factor": 8.0,
                                                               "rope_theta": 10000.0, "low_freq_factor": 1.0,
                                                               "high_freq_factor": 4.0,
                                                               "original_max_position_embeddings": 2048}),
     "rope_type 'llama3'"),
    (dict(num_key_value_heads=3), "num_key_value_heads"),
])
def test_refused(changes, message, checkpoint, tmp_path):
    assert_refused(checkpoint("hyperclovax"), tmp_path, message, **changes)


def _wrapper_logits(path, ids):
    """transformers' HyperCLOVAXVisionV2ForConditionalGeneration over a text-only prompt (no image: the vision
    tower and projector are never run)."""
    import torch
    from transformers import HyperCLOVAXVisionV2ForConditionalGeneration

    model = HyperCLOVAXVisionV2ForConditionalGeneration.from_pretrained(path, dtype=torch.float32)
    with torch.no_grad():
        return model(input_ids=torch.tensor([ids])).logits[0].float().numpy()


test_logits_vision_v2_text_decoder = reference_logits_test(
    "hyperclovax", ["hyperclovax_vision_v2"], _wrapper_logits, "transformers' HyperCLOVAXVisionV2ForConditionalGeneration")


def test_vision_v2_presents_only_the_text_decoder(checkpoint):
    """The wrapper's own tie_word_embeddings (true; its text_config says false) ties the head, as transformers does:
    no output.weight; no vision or projector tensor."""
    from hfview import HfCheckpoint
    ckpt = HfCheckpoint(checkpoint("hyperclovax_vision_v2"), "f32")
    names = {t.name for t in ckpt.tensors}
    assert ckpt.hparams["tie_word_embeddings"] is True
    assert "output.weight" not in names and "blk.1.post_ffw_norm.weight" in names
    assert not any("vision" in n or "proj" in n for n in names)


def test_vision_v2_released_layout_is_the_same_view(checkpoint, tmp_path):
    """Released HyperCLOVAX Vision V2 names (model.language_model.model.*, transformers' conversion mapping reads
    them) present the same tensors, value for value, as the layout transformers 5 saves."""
    import numpy as np

    from family_variants import weights_variant
    from hfview import HfCheckpoint

    def released(tensors):
        return {k.replace("model.language_model.", "model.language_model.model.", 1): v for k, v in tensors.items()}

    src = checkpoint("hyperclovax_vision_v2")
    saved, rel = HfCheckpoint(src, "f32"), HfCheckpoint(weights_variant(src, tmp_path / "released", released), "f32")
    assert [t.name for t in saved.tensors] == [t.name for t in rel.tensors]
    for t in saved.tensors:
        assert np.array_equal(saved.read_tensor(t.name), rel.read_tensor(t.name)), t.name

"""Tele-FLM / FLM-2 (TeleFLMForCausalLM, remote code -> llama.cpp granite under hfview's own mapping).

No byte oracle: the pinned converter has no class for TeleFLM (checked below), so docs/families.md's bytes column says
n/a. Logits oracle: transformers has no TeleFLM class. The reading of its computation is vLLM's port
(vllm/model_executor/models/teleflm.py; the release's modeling_teleflm.py publishes on the Hub only and was not
reached; the lineage's 52B release under GPT-2's names, github.com/Tele-AI/TeleChat-52B models/modeling_telechat.py
at d3c85623, computes the same multipliers and the same 1/sqrt(head width) with use_mup): Llama's model and weights, the input embeddings times input_mult and the logits times output_mult /
mup_scale_factor when use_mup is set, attention at Llama's 1/sqrt(head width). That is transformers'
GraniteForCausalLM with embedding_multiplier = input_mult, logits_scaling = mup_scale_factor / output_mult (Granite
divides by it), attention_multiplier = 1/sqrt(head width) and residual_multiplier 1, over the same tensors under the
same names: that twin, run by transformers, is the reference for llama.cpp fed from the view.
"""
import json
import shutil
from pathlib import Path

import pytest

from family_oracle import assert_converter_has_no_class, twin_logits_test
from family_variants import assert_refused


def granite_twin(src: Path, out: Path) -> Path:
    from transformers import GraniteConfig

    c = json.loads((src / "config.json").read_text())
    head = c["hidden_size"] // c["num_attention_heads"]
    GraniteConfig(vocab_size=c["vocab_size"], hidden_size=c["hidden_size"], intermediate_size=c["intermediate_size"],
                  num_hidden_layers=c["num_hidden_layers"], num_attention_heads=c["num_attention_heads"],
                  num_key_value_heads=c["num_key_value_heads"], rms_norm_eps=c["rms_norm_eps"],
                  max_position_embeddings=c["max_position_embeddings"], tie_word_embeddings=c["tie_word_embeddings"],
                  embedding_multiplier=c["input_mult"], logits_scaling=c["mup_scale_factor"] / c["output_mult"],
                  attention_multiplier=head ** -0.5, residual_multiplier=1.0,
                  rope_parameters={"rope_type": "default", "rope_theta": c["rope_theta"]}).save_pretrained(out)
    shutil.copyfile(src / "model.safetensors", out / "model.safetensors")
    return out


test_logits = twin_logits_test("teleflm", ["teleflm"], granite_twin, "Granite")


def test_the_pinned_converter_has_no_class_for_teleflm():
    assert_converter_has_no_class("teleflm")


def test_kv_carries_the_multipliers(checkpoint):
    from hfview import HfCheckpoint

    kv = {k.key: k.value for k in HfCheckpoint(checkpoint("teleflm"), "f32").kv}
    assert kv["general.architecture"] == "granite"
    assert kv["granite.embedding_scale"] == 2.0 and kv["granite.logit_scale"] == pytest.approx(4.0 / 1.5)
    assert "granite.attention.scale" not in kv and "granite.residual_scale" not in kv  # Llama's defaults


def test_without_mup_the_scales_are_one(checkpoint, tmp_path):
    from hfview import HfCheckpoint
    from family_variants import variant

    kv = {k.key: k.value for k in HfCheckpoint(variant(checkpoint("teleflm"), tmp_path / "v", use_mup=False), "f32").kv}
    assert kv["granite.embedding_scale"] == 1.0 and kv["granite.logit_scale"] == 1.0


@pytest.mark.parametrize("changes, message", [
    (dict(use_mup=None), "needs 'use_mup'"),
    (dict(mup_scale_factor=None), "needs 'mup_scale_factor'"),
    (dict(output_mult=0.0), "needs both nonzero"),
    (dict(attention_bias=True), "attention_bias"),
    (dict(hidden_act="gelu"), "hidden_act"),
    (dict(rope_scaling={"type": "linear", "factor": 2.0}), "plain rope only"),
    (dict(mup_attn_multiplier=1.0), "mup_attn_multiplier"),  # outside vLLM's reading: refused, not guessed
])
def test_refused(changes, message, checkpoint, tmp_path):
    assert_refused(checkpoint("teleflm"), tmp_path, message, **changes)

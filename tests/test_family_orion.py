"""Orion (remote code; transformers has no class): converter bytes at every outtype; llama.cpp runs the
view with finite, repeatable logits; and, since Orion's decoder is StableLM's with full rotary and no
q/k/v biases, those logits match transformers' StableLM over the same weights."""
import json

import numpy as np
import pytest

from family_oracle import OUTTYPES, PROMPT, nmse, oracle_tests

test_export, _ = oracle_tests("orion", ["orion"])


def _view_logits(path, outtype):
    from hfview import HfCheckpoint
    from hfview.runner.stream import StreamModel

    with StreamModel(HfCheckpoint(path, outtype), n_ctx=64) as m:
        ids = m.tokenize(PROMPT)[:16]
        return ids, m.logits(ids), m.logits(ids)


@pytest.mark.parametrize("outtype", OUTTYPES)
def test_orion_llama_cpp_runs_finite_and_deterministic(outtype, checkpoint, record_property):
    record_property("family", "orion")
    record_property("oracle", "logits")
    ids, first, second = _view_logits(checkpoint("orion"), outtype)
    assert len(ids) == 16 and first.shape == (16, 32000)
    assert np.isfinite(first).all()
    assert np.array_equal(first, second)
    assert first.std() > 0.1  # not a constant: the weights reached the graph


@pytest.mark.parametrize("outtype", OUTTYPES)
def test_orion_logits_equal_transformers_stablelm(outtype, checkpoint, record_property):
    record_property("family", "orion")
    record_property("oracle", "logits")  # the equivalent class over the same weights
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    path = checkpoint("orion")
    ids, ours, _ = _view_logits(path, outtype)
    c = json.loads((path / "config.json").read_text())
    stablelm = transformers.StableLmConfig(
        vocab_size=c["vocab_size"], hidden_size=c["hidden_size"], intermediate_size=c["intermediate_size"],
        num_hidden_layers=c["num_hidden_layers"], num_attention_heads=c["num_attention_heads"],
        num_key_value_heads=c["num_key_value_heads"], layer_norm_eps=c["rms_norm_eps"],
        max_position_embeddings=c["max_position_embeddings"], tie_word_embeddings=False, use_qkv_bias=False,
        rope_parameters={"rope_type": "default", "rope_theta": c["rope_theta"], "partial_rotary_factor": 1.0})
    model = transformers.StableLmForCausalLM.from_pretrained(path, config=stablelm, dtype=torch.float32)
    with torch.no_grad():
        ref = model(torch.tensor([ids])).logits[0].numpy()
    value = nmse(ours, ref)
    print(f"orion {outtype} vs transformers StableLM: NMSE {value:.3e}")
    assert value < 1e-4

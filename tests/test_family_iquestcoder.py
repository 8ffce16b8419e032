"""IQuest-Coder (remote code; transformers has no class): converter bytes at every outtype; llama.cpp runs
the view with finite, repeatable logits; and, since its non-looping decoder is Llama's, those logits
match transformers' Llama over the same weights."""
import json

import numpy as np
import pytest

from family_oracle import OUTTYPES, PROMPT, nmse, oracle_tests

test_export, _ = oracle_tests("iquestcoder", ["iquestcoder"])


def _view_logits(path, outtype):
    from hfview import HfCheckpoint
    from hfview.runner.stream import StreamModel

    with StreamModel(HfCheckpoint(path, outtype), n_ctx=64) as m:
        ids = m.tokenize(PROMPT)[:16]
        return ids, m.logits(ids), m.logits(ids)


@pytest.mark.parametrize("outtype", OUTTYPES)
def test_iquestcoder_llama_cpp_runs_finite_and_deterministic(outtype, checkpoint, record_property):
    record_property("family", "iquestcoder")
    record_property("oracle", "logits")
    ids, first, second = _view_logits(checkpoint("iquestcoder"), outtype)
    assert len(ids) == 16 and first.shape == (16, 32000)
    assert np.isfinite(first).all()
    assert np.array_equal(first, second)
    assert first.std() > 0.1  # not a constant: the weights reached the graph


def test_iquestcoder_logits_equal_transformers_llama(checkpoint, record_property):
    record_property("family", "iquestcoder")
    record_property("oracle", "logits")  # the equivalent class over the same weights
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    path = checkpoint("iquestcoder")
    ids, ours, _ = _view_logits(path, "f32")
    cfg = json.loads((path / "config.json").read_text())
    llama_cfg = transformers.LlamaConfig(**{k: v for k, v in cfg.items()
                                            if k not in ("architectures", "auto_map", "model_type")})
    model = transformers.LlamaForCausalLM.from_pretrained(path, config=llama_cfg, dtype=torch.float32)
    with torch.no_grad():
        ref = model(torch.tensor([ids])).logits[0].numpy()
    value = nmse(ours, ref)
    print(f"iquestcoder f32 vs transformers Llama: NMSE {value:.3e}")
    assert value < 1e-4

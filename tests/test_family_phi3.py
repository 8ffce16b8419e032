"""Phi-3: both oracles over a longrope (released layout, bf16) and a grouped-KV, partial-rotary, tied
(transformers 5 layout, f32) fixture, and a Phi-4-mini-style one (byte-level BPE, longrope over partial rotary)."""
import json
from pathlib import Path

from family_defaults import check_defaults
from family_oracle import oracle_tests

test_export, test_logits = oracle_tests("phi3", ["phi3-longrope", "phi3-gqa", "phi4-mini"])

TOKENIZERS = Path(__file__).resolve().parent.parent / "fixtures" / "tokenizers"


def test_phi3_fixture_sentencepiece_model_is_the_base_of_its_tokenizer_json():
    """The fixture pairs Llama 2's tokenizer.model with Phi-3's tokenizer.json: every piece must sit at the
    same id in both, as in the released Phi-3 checkpoint."""
    import sentencepiece
    sp = sentencepiece.SentencePieceProcessor(model_file=str(TOKENIZERS / "llama-spm" / "tokenizer.model"))
    vocab = json.loads((TOKENIZERS / "phi-3-mini" / "tokenizer.json").read_text(encoding="utf-8"))["model"]["vocab"]
    assert len(vocab) == sp.vocab_size() == 32000
    assert all(vocab[sp.id_to_piece(i)] == i for i in range(sp.vocab_size()))


def test_phi3_defaults_are_transformers():
    check_defaults("phi3")


def test_phi3_su_rope_is_refused_as_transformers_cannot_load_it(checkpoint, tmp_path):
    """Early Phi-3-128k configs say rope_scaling type "su": transformers 5.24's Phi3Config rejects them (so the
    converter would fall back to the raw config.json, without defaults); the view refuses by name."""
    import pytest
    import transformers

    from hfview import HfCheckpoint
    from hfview.errors import ConfigError

    config = json.loads((checkpoint("phi3-longrope") / "config.json").read_text())
    config["rope_scaling"]["type"] = "su"
    (tmp_path / "config.json").write_text(json.dumps(config))
    with pytest.raises(KeyError, match="original_max_position_embeddings"):
        transformers.AutoConfig.from_pretrained(tmp_path)
    with pytest.raises(ConfigError, match="'su'"):
        HfCheckpoint(tmp_path)


def test_phi3_without_tokenizer_model_is_refused_by_name(checkpoint, tmp_path):
    import shutil

    import pytest

    from hfview import HfCheckpoint
    from hfview.tokenizer.errors import TokenizerError

    model = tmp_path / "phi3"
    shutil.copytree(checkpoint("phi3-gqa"), model)
    (model / "tokenizer.model").unlink()
    with pytest.raises(TokenizerError, match="tokenizer.model is missing"):
        HfCheckpoint(model)


def test_phi3_long_context_uses_the_long_factors(checkpoint):
    """With a context past original_max_position_embeddings llama.cpp rotates with rope_factors_long.
    transformers switches to the long factors only for sequences that long, so the reference is the same
    model with short_factor set to the long factors, over the same 16 tokens."""
    import numpy as np
    import torch
    import transformers

    from family_oracle import PROMPT, nmse
    from hfview import HfCheckpoint
    from hfview.runner.stream import StreamModel

    path = checkpoint("phi3-longrope")
    with StreamModel(HfCheckpoint(path, "f32"), n_ctx=8192) as m:
        ids = m.tokenize(PROMPT)[:16]
        ours = m.logits(ids)
    config = transformers.AutoConfig.from_pretrained(path)
    rope = config.rope_parameters
    assert rope["long_factor"] != rope["short_factor"]
    rope["short_factor"] = list(rope["long_factor"])
    model = transformers.AutoModelForCausalLM.from_pretrained(path, config=config, dtype=torch.float32)
    with torch.no_grad():
        ref = model(torch.tensor([ids])).logits[0].numpy()
    value = nmse(ours, ref)
    print(f"phi3-longrope n_ctx 8192 vs transformers with the long factors: NMSE {value:.3e}")
    assert value < 1e-4
    assert np.isfinite(ours).all()

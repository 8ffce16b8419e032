"""Phi-3: both oracles over a longrope (released layout, bf16) and a grouped-KV, partial-rotary, tied
(transformers 5 layout, f32) fixture."""
import json
from pathlib import Path

from family_defaults import check_defaults
from family_oracle import oracle_tests

test_export, test_logits = oracle_tests("phi3", ["phi3-longrope", "phi3-gqa"])

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

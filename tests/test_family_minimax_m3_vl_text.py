"""MiniMax-M3's text decoder (the image-text wrapper MiniMaxM3SparseForConditionalGeneration): converter bytes at
every outtype, llama.cpp logits against transformers' own class over the fixture, refusals of what llama.cpp's
minimax-m3 cannot run."""
import pytest

from family_oracle import oracle_tests, reference_logits_test
from family_variants import DROP, variant


def _wrapper_logits(path, ids):
    """transformers' own MiniMaxM3SparseForConditionalGeneration in float32 (AutoModelForCausalLM has no entry for
    the wrapper's config), text only."""
    import torch
    import transformers

    model = transformers.MiniMaxM3SparseForConditionalGeneration.from_pretrained(path, dtype=torch.float32)
    with torch.no_grad():
        return model(torch.tensor([ids])).logits[0].float().numpy()


test_export, _ = oracle_tests("minimax_m3_vl_text", ["minimax_m3_vl_text"])
test_logits = reference_logits_test("minimax_m3_vl_text", ["minimax_m3_vl_text"], _wrapper_logits,
                                    "transformers' MiniMaxM3SparseForConditionalGeneration")

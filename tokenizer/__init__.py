"""tokenizer.* GGUF metadata exactly as the pinned llama.cpp converter writes it.

Every vocab function takes (model_dir: Path, hparams: dict) — hparams being the config as the converter sees
it (AutoConfig defaults applied, text_config merged) — and returns list[hfview.gguf_layout.KV] in the
converter's insertion order.
"""
from .errors import TokenizerError, UnknownPreTokenizer
from .hf import HfPreTokenizer, HfTokenizer
from .vocab import (get_vocab_base_pre, gpt2_vocab, llama_hf_vocab, llama_vocab, plamo3_vocab, plamo_vocab,
                    sentencepiece_vocab, special_vocab)

__all__ = ["HfPreTokenizer", "HfTokenizer", "TokenizerError", "UnknownPreTokenizer", "get_vocab_base_pre", "gpt2_vocab", "llama_hf_vocab",
           "llama_vocab", "plamo_vocab", "plamo3_vocab", "sentencepiece_vocab", "special_vocab"]

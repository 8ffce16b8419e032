"""tokenizer.* GGUF metadata exactly as the pinned llama.cpp converter writes it.

Vocab functions take (model_dir: Path, hparams: dict) — hparams being the config as the converter sees it
(AutoConfig defaults applied, text_config merged) — and return list[hfview.gguf_layout.KV] in the
converter's insertion order (merge them with GGUFWriter's dict semantics: a re-added key keeps its place).

  llama_vocab          LlamaModel.set_vocab (SentencePiece -> llama-hf -> byte-level BPE, CodeLlama, Granite)
  sentencepiece_vocab  TextModel._set_vocab_sentencepiece   (FileNotFoundError without tokenizer.model)
  llama_hf_vocab       TextModel._set_vocab_llama_hf        (FileNotFoundError / NotLlamaHfTokenizer)
  gpt2_vocab           TextModel._set_vocab_gpt2            (the default TextModel.set_vocab)
  plamo_vocab          TextModel._set_vocab_plamo (PLaMo 2); plamo3_vocab adds Plamo3's chat template
  special_vocab        gguf.SpecialVocab(...).add_to_gguf alone
Building blocks for family-specific set_vocab: sentencepiece_tokens, llama_hf_tokens, bpe_tokens (lists of
tokens/scores/types), SpecialVocab (collect, adjust, .write(KVWriter)), KVWriter, get_vocab_base_pre,
probe_digest, AutoTokenizerView; for tiktoken rank files (tokenizer.tiktoken_bpe): load_ranks,
recover_merges, tiktoken_tokens, tiktoken_split, token_bytes_to_string.
HfTokenizer/HfPreTokenizer encode as the checkpoint's HF tokenizer does.
tokenizer.parity compares HfTokenizer with llama.cpp (check_checkpoint: over the view's vocabulary, loaded
vocab-only; read_corpus / read_vocab_cases: corpora and llama.cpp's ggml-vocab .inp/.out cases);
tokenizer.commands holds the CLI's `tokenize` and `tokenizer-check`.
"""
import importlib

# Each name from the module that defines it, imported when first asked for: a view whose tokenizer metadata
# comes from hfview's cache (hfview.vocab_cache) never loads `tokenizers` (a 6 MB library, RSS while llama.cpp
# fills the model's buffers).
_HOME = {
    "digests": ("PRE_TOKENIZER_DIGESTS", "PRE_TOKENIZER_PROBE", "pre_tokenizer_named"),
    "errors": ("TokenizerError", "UnknownPreTokenizer"),
    "hf": ("HfPreTokenizer", "HfTokenizer"),
    "hf_auto": ("AutoTokenizerView",),
    "special": ("SpecialVocab",),
    "vocab": ("NotLlamaHfTokenizer", "bpe_tokens", "get_vocab_base_pre", "gpt2_vocab", "llama_hf_tokens",
              "llama_hf_vocab", "llama_vocab", "looks_special", "plamo3_vocab", "plamo_vocab", "probe_digest",
              "sentencepiece_tokens", "sentencepiece_vocab", "special_vocab"),
    "tiktoken_bpe": ("load_ranks", "recover_merges", "tiktoken_split", "tiktoken_tokens", "token_bytes_to_string"),
    "writer": ("KVWriter",),
}
_MODULE_OF = {name: module for module, names in _HOME.items() for name in names}


def __getattr__(name: str):
    if name not in _MODULE_OF:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{_MODULE_OF[name]}", __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_MODULE_OF))


__all__ = [
    "AutoTokenizerView", "HfPreTokenizer", "HfTokenizer", "KVWriter", "NotLlamaHfTokenizer",
    "PRE_TOKENIZER_DIGESTS", "PRE_TOKENIZER_PROBE", "SpecialVocab", "TokenizerError", "UnknownPreTokenizer",
    "bpe_tokens", "get_vocab_base_pre", "gpt2_vocab", "llama_hf_tokens", "llama_hf_vocab", "llama_vocab",
    "looks_special", "plamo3_vocab", "plamo_vocab", "pre_tokenizer_named", "probe_digest",
    "sentencepiece_tokens", "sentencepiece_vocab", "special_vocab",
    "load_ranks", "recover_merges", "tiktoken_split", "tiktoken_tokens", "token_bytes_to_string",
]

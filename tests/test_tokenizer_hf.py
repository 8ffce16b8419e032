"""tokenizer.hf_auto.AutoTokenizerView against transformers' AutoTokenizer (the converter's source of
vocabulary, added-token flags, special tokens and probe ids), over real tokenizers and variations of
their configuration files."""
from __future__ import annotations

import json

import pytest

from test_tokenizer_kv import TOK, llama3_tokenizer_json, write_checkpoint


def _gpt2_json() -> dict:
    return json.loads((TOK / "gpt-2" / "tokenizer.json").read_text(encoding="utf-8"))


def _files(**kw):
    return kw


CASES = {
    "mistral-v3": (32768, _files(**{"tokenizer.json": TOK / "mistral-v3-spm" / "tokenizer.json"}), {}),
    "mixtral": (32000, _files(**{"tokenizer.json": TOK / "mixtral-spm" / "tokenizer.json"}), {}),
    "phi-3-mini": (32064, _files(**{"tokenizer.json": TOK / "phi-3-mini" / "tokenizer.json",
                                    "tokenizer_config.json": TOK / "phi-3-mini" / "tokenizer_config.json"}), {}),
    "gpt-2": (50257, _files(**{"tokenizer.json": TOK / "gpt-2" / "tokenizer.json",
                               "tokenizer_config.json": TOK / "gpt-2" / "tokenizer_config.json"}), {}),
    "gpt-2-bare": (50257, _files(**{"tokenizer.json": TOK / "gpt-2" / "tokenizer.json"}), {}),
    "roberta": (50265, _files(**{"tokenizer.json": TOK / "roberta-base" / "tokenizer.json",
                                 "tokenizer_config.json": TOK / "roberta-base" / "tokenizer_config.json"}), {}),
    "bert-uncased": (30522, _files(**{"tokenizer.json": TOK / "bert-base-uncased" / "tokenizer.json"}), {}),
    "llama3-bpe": (128256, "llama3", {}),
    # named special tokens missing from the vocabulary are appended; extra and model-specific tokens too
    "gpt-2-new-specials": (50262, _files(**{"tokenizer.json": TOK / "gpt-2" / "tokenizer.json",
                                            "tokenizer_config.json": {
                                                "tokenizer_class": "PreTrainedTokenizerFast",
                                                "bos_token": "<|endoftext|>", "pad_token": "<pad>",
                                                "image_token": "<image>",
                                                "additional_special_tokens": ["<|tool|>", "<|endoftext|>"]}}), {}),
    # no post-processor: add_bos_token in the config is ignored when tokenizer.json exists
    "gpt-2-no-post": (50257, _files(**{"tokenizer.json": {**_gpt2_json(), "post_processor": None},
                                       "tokenizer_config.json": {"add_bos_token": True, "bos_token": "<|endoftext|>"}}),
                      {}),
    # declared LlamaTokenizer over a ByteLevel tokenizer.json: the generic backend
    "gpt-2-declared-llama": (50257, _files(**{"tokenizer.json": TOK / "gpt-2" / "tokenizer.json",
                                              "tokenizer_config.json": {"tokenizer_class": "LlamaTokenizerFast"}}), {}),
    # LlamaTokenizer rebuilds the pipeline: legacy + no prefix space
    "mistral-declared-llama-legacy": (32768, _files(**{
        "tokenizer.json": TOK / "mistral-v3-spm" / "tokenizer.json",
        "tokenizer_config.json": {"tokenizer_class": "LlamaTokenizer", "legacy": True, "add_prefix_space": False,
                                  "bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>"}}), {}),
    "mistral-declared-llama": (32768, _files(**{
        "tokenizer.json": TOK / "mistral-v3-spm" / "tokenizer.json",
        "tokenizer_config.json": {"tokenizer_class": "LlamaTokenizer"}}), {}),
    # model_type mistral: its registered class (without mistral_common) is the generic backend
    "mistral-type-declared-llama": (32768, _files(**{
        "tokenizer.json": TOK / "mistral-v3-spm" / "tokenizer.json",
        "tokenizer_config.json": {"tokenizer_class": "LlamaTokenizer"}}), {"model_type": "mistral"}),
    # model-specific classes that rebuild the pipeline over tokenizer.json's vocabulary and merges
    "qwen2-type-gpt2-json": (50257, _files(**{"tokenizer.json": TOK / "gpt-2" / "tokenizer.json",
                                              "tokenizer_config.json": TOK / "gpt-2" / "tokenizer_config.json"}),
                             {"model_type": "qwen2"}),
    "qwen2-type-bare": (50257, _files(**{"tokenizer.json": TOK / "gpt-2" / "tokenizer.json"}),
                        {"model_type": "qwen2"}),
    "gpt-neox-type": (50257, _files(**{"tokenizer.json": TOK / "gpt-2" / "tokenizer.json",
                                       "tokenizer_config.json": {"tokenizer_class": "GPTNeoXTokenizer",
                                                                 "add_bos_token": True}}),
                      {"model_type": "gpt_neox"}),
    "llama3-declared-gpt2": (128256, "llama3-gpt2", {}),
    # auto_map beside a class transformers has: the local class is used (no remote code is run)
    "gpt-2-auto-map-local": (50257, _files(**{"tokenizer.json": TOK / "gpt-2" / "tokenizer.json",
                                              "tokenizer_config.json": {
                                                  "tokenizer_class": "GPT2Tokenizer",
                                                  "auto_map": {"AutoTokenizer": ["tokenization_x.X", None]}}}),
                             {"model_type": "qwen2"}),
    "gpt-2-auto-map-model-type": (50257, _files(**{"tokenizer.json": TOK / "gpt-2" / "tokenizer.json",
                                                   "tokenizer_config.json": {
                                                       "auto_map": {"AutoTokenizer": ["tokenization_x.X", None]}}}),
                                  {"model_type": "qwen2"}),
    # legacy files: special_tokens_map.json and added_tokens.json, no added_tokens_decoder
    "gpt-2-legacy-files": (50260, _files(**{
        "tokenizer.json": TOK / "gpt-2" / "tokenizer.json",
        "tokenizer_config.json": {"tokenizer_class": "GPT2Tokenizer"},
        "special_tokens_map.json": {"bos_token": "<|endoftext|>", "eos_token": {"content": "<|endoftext|>"},
                                    "pad_token": "<|pad|>"},
        "added_tokens.json": {"<|pad|>": 50257, "<|user|>": 50258}}), {}),
    # added_tokens_decoder flags overwrite tokenizer.json's
    "phi-3-flags": (32064, _files(**{
        "tokenizer.json": TOK / "phi-3-mini" / "tokenizer.json",
        "tokenizer_config.json": {
            "tokenizer_class": "PreTrainedTokenizerFast", "eos_token": "<|end|>",
            "added_tokens_decoder": {"32007": {"content": "<|end|>", "special": False, "normalized": True,
                                               "lstrip": True, "rstrip": False, "single_word": False},
                                     "32001": {"content": "<|assistant|>", "special": True, "normalized": False,
                                               "lstrip": False, "rstrip": True, "single_word": False}}}}), {}),
}


@pytest.fixture(scope="module")
def hf_dir(tmp_path_factory):
    made = {}

    def get(name):
        if name not in made:
            vocab_size, files, config = CASES[name]
            d = tmp_path_factory.mktemp(name)
            if files == "llama3":
                files = {"tokenizer.json": llama3_tokenizer_json(d / "tokenizer.json.src"),
                         "tokenizer_config.json": TOK / "llama3-tiktoken" / "tokenizer_config.json"}
            elif files == "llama3-gpt2":
                cfg = json.loads((TOK / "llama3-tiktoken" / "tokenizer_config.json").read_text(encoding="utf-8"))
                files = {"tokenizer.json": llama3_tokenizer_json(d / "tokenizer.json.src"),
                         "tokenizer_config.json": {**cfg, "tokenizer_class": "GPT2Tokenizer"}}
            write_checkpoint(d, vocab_size, files, config)
            for extra in d.glob("*.src"):
                extra.unlink()
            made[name] = d
        return made[name]
    return get


def _flags(decoder):
    return {i: (t.content, t.special, t.normalized, t.lstrip, t.rstrip, t.single_word) for i, t in decoder.items()}


@pytest.mark.parametrize("name", list(CASES))
def test_view_equals_autotokenizer(name, hf_dir):
    from transformers import AutoTokenizer

    from hfview.tokenizer.digests import PRE_TOKENIZER_PROBE as probe
    from hfview.tokenizer.hf_auto import AutoTokenizerView

    d = hf_dir(name)
    hf = AutoTokenizer.from_pretrained(d)
    ours = AutoTokenizerView(d)
    assert ours.class_name == type(hf).__name__
    assert ours.vocab_size == hf.vocab_size
    assert ours.get_vocab() == hf.get_vocab()
    assert _flags(ours.added_tokens_decoder) == _flags(hf.added_tokens_decoder)
    assert ours.get_added_vocab() == hf.get_added_vocab()
    assert ours.all_special_tokens == hf.all_special_tokens
    assert ours.all_special_ids == hf.all_special_ids
    assert ours.encode(probe) == hf.encode(probe)
    assert ours.encode(probe, add_special_tokens=False) == hf.encode(probe, add_special_tokens=False)
    for token in ours.get_added_vocab():
        ids = hf.encode(token, add_special_tokens=False)
        assert ours.encode(token, add_special_tokens=False) == ids
        assert ours.decode(ids) == hf.decode(ids)


def test_view_refuses_remote_code_like_transformers(tmp_path):
    """auto_map without a local class: transformers (no trust_remote_code, no terminal) refuses too."""
    from transformers import AutoTokenizer

    from hfview.tokenizer import TokenizerError
    from hfview.tokenizer.hf_auto import AutoTokenizerView

    d = write_checkpoint(tmp_path / "c", 50257, {
        "tokenizer.json": TOK / "gpt-2" / "tokenizer.json",
        "tokenizer_config.json": {"tokenizer_class": "XTokenizer",
                                  "auto_map": {"AutoTokenizer": ["tokenization_x.XTokenizer", None]}}})
    with pytest.raises(TokenizerError, match="auto_map"):
        AutoTokenizerView(d)
    with pytest.raises(Exception):
        AutoTokenizer.from_pretrained(d)


CORPUS = [
    "Hello world", " leading space", "trailing space ", "  two  spaces\t\ttabs\n\nnewlines\r\n",
    "def f(x):\n    return x ** 2  # comment\n", "if (a && b) { c->d[0] = 'e'; }",
    "我想在apple工作1314151天～", "日本語のテキストとカタカナ", "한국어 문장입니다.", "нещо на Български",
    "Ünïcödé àccents ﬁ ligature", "🚀 (normal) 😶\u200d🌫️ ✅ 🦙🦙", "3 33 333 3333 3.3 3..3", "",
    "I've been 'told he's there, 'RE you sure? We'Ve a'lL", "<s> literal specials </s> <|endoftext|>",
    "        \n         \n", "x" * 300,
]


@pytest.mark.parametrize("name", ["mistral-v3", "phi-3-mini", "gpt-2", "bert-uncased", "llama3-bpe",
                                  "mistral-declared-llama-legacy", "gpt-2-new-specials"])
def test_hf_tokenizer_encodes_and_decodes_like_transformers(name, hf_dir):
    from transformers import AutoTokenizer

    from hfview.tokenizer import HfTokenizer

    d = hf_dir(name)
    hf = AutoTokenizer.from_pretrained(d)
    ours = HfTokenizer(d)
    for text in CORPUS:
        ids = hf.encode(text)
        assert ours.encode(text) == ids, text
        assert ours.encode(text, add_special_tokens=False) == hf.encode(text, add_special_tokens=False), text
        assert ours.decode(ids) == hf.decode(ids), text
        assert ours.decode(ids, skip_special_tokens=True) == hf.decode(ids, skip_special_tokens=True), text
    assert ours.bos_token_id == hf.bos_token_id and ours.eos_token_id == hf.eos_token_id
    assert ours.vocab_size == len(hf)


def test_pre_tokenizer_splits_like_tokenizers():
    from tokenizers import Tokenizer

    from hfview.tokenizer import HfPreTokenizer

    path = TOK / "gpt-2" / "tokenizer.json"
    pre = HfPreTokenizer(path)
    ref = Tokenizer.from_file(str(path)).pre_tokenizer
    for text in CORPUS:
        assert pre(text) == [p for p, _ in ref.pre_tokenize_str(text)]
    assert pre("I've 33") == ["I", "'ve", "Ġ33"]


def test_unreadable_tokenizer_json_is_named(tmp_path):
    from hfview.tokenizer import HfPreTokenizer, HfTokenizer, TokenizerError

    d = write_checkpoint(tmp_path / "c", 100, {"tokenizer.json": "{not json"})
    with pytest.raises(TokenizerError, match="tokenizer.json"):
        HfTokenizer(d)
    with pytest.raises(TokenizerError, match="tokenizer.json"):
        HfPreTokenizer(d / "tokenizer.json")

"""tokenizer.* KVs against the pinned converter, byte for byte.

Each case is a tiny LlamaForCausalLM checkpoint (config + one small tensor) around a real tokenizer from
fixtures/tokenizers/. The converter runs on it with --vocab-only; its tokenizer.* fields must equal
tokenizer.llama_vocab's KVs: same keys in the same order, same types, same encoded bytes.
Converter outputs are cached on disk by the checkpoint's content and the pinned versions.
"""
from __future__ import annotations

import functools
import hashlib
import json
import os
import shutil
from pathlib import Path

import numpy as np
import pytest

import oracle
from hfview.gguf_layout import KV, ValueType, encode_kv

ROOT = Path(__file__).resolve().parent.parent
TOK = ROOT / "fixtures" / "tokenizers"
OUT_CACHE = oracle.CACHE / "tokenizer-oracle"


# -- building checkpoints ---------------------------------------------------------------------------------------

def write_checkpoint(d: Path, vocab_size: int, files: dict[str, Path | str | dict] | None = None,
                     config: dict | None = None) -> Path:
    """A LlamaForCausalLM directory the converter accepts: config.json, one F32 tensor, tokenizer files.
    `files` maps a relative name to a source path, a text, or a JSON object."""
    from safetensors.numpy import save_file

    d.mkdir(parents=True, exist_ok=True)
    cfg = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "vocab_size": vocab_size,
           "hidden_size": 8, "intermediate_size": 16, "num_hidden_layers": 1, "num_attention_heads": 2,
           "num_key_value_heads": 2, "max_position_embeddings": 64, "rms_norm_eps": 1e-5}
    cfg.update(config or {})
    (d / "config.json").write_text(json.dumps(cfg, indent=1))
    save_file({"model.norm.weight": np.ones(8, np.float32)}, str(d / "model.safetensors"))
    for name, src in (files or {}).items():
        dst = d / name
        dst.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(src, Path):
            shutil.copyfile(src, dst)
        elif isinstance(src, str):
            dst.write_text(src, encoding="utf-8")
        else:
            dst.write_text(json.dumps(src, ensure_ascii=False, indent=1), encoding="utf-8")
    return d


def llama3_tokenizer_json(dst: Path) -> Path:
    """Meta-Llama-3's tokenizer.json rebuilt from its tiktoken ranks with transformers' TikTokenConverter:
    the Llama-3 split pattern (the converter's default), the 256 special tokens named by the model's
    tokenizer_config, and Meta's post-processor (ByteLevel, then <|begin_of_text|> before each text)."""
    from tokenizers import processors
    from transformers import __version__ as tf_version
    from transformers.convert_slow_tokenizer import TikTokenConverter

    src = TOK / "llama3-tiktoken"
    key = hashlib.sha256((oracle.sha256(src / "tokenizer.model") + oracle.sha256(src / "tokenizer_config.json")
                          + tf_version).encode()).hexdigest()[:16]
    cached = OUT_CACHE / f"llama3-tokenizer-{key}.json"
    if not cached.is_file():
        cfg = json.loads((src / "tokenizer_config.json").read_text(encoding="utf-8"))
        specials = [t["content"] for _, t in sorted(cfg["added_tokens_decoder"].items(), key=lambda x: int(x[0]))]
        tok = TikTokenConverter(vocab_file=str(src / "tokenizer.model"), extra_special_tokens=specials).converted()
        bos = "<|begin_of_text|>"
        tok.post_processor = processors.Sequence([
            processors.ByteLevel(trim_offsets=False),
            processors.TemplateProcessing(single=f"{bos} $A", pair=f"{bos} $A {bos}:1 $B:1",
                                          special_tokens=[(bos, tok.token_to_id(bos))]),
        ])
        OUT_CACHE.mkdir(parents=True, exist_ok=True)
        tmp = cached.with_name(f"{cached.name}.{os.getpid()}.partial")
        tok.save(str(tmp))
        tmp.rename(cached)
    shutil.copyfile(cached, dst)
    return dst


def _gpt2_with_templates(d: Path) -> Path:
    write_checkpoint(d, 50257, {
        "tokenizer.json": TOK / "gpt-2" / "tokenizer.json",
        "tokenizer_config.json": TOK / "gpt-2" / "tokenizer_config.json",
        "chat_template.jinja": "{% for m in messages %}{{ m['content'] }}{% endfor %}",
        "additional_chat_templates/tool_use.jinja": "{{ tools }}",
        "additional_chat_templates/rag-v1.jinja": "{{ documents }}",
    })
    return d


def _llama_spm_configured(d: Path) -> Path:
    """SentencePiece with everything SpecialVocab and the sentencepiece path read around it."""
    return write_checkpoint(d, 32000, {
        "tokenizer.model": TOK / "llama-spm" / "tokenizer.model",
        "added_tokens.json": {"<extra_0>": 31990},
        "tokenizer_config.json": {
            "add_bos_token": True, "add_eos_token": False, "add_prefix_space": False,
            "bos_token": "<s>", "eos_token": {"__type": "AddedToken", "content": "</s>", "special": True},
            "unk_token": "<unk>", "chat_template": "{{ bos_token }}{% for m in messages %}{{ m.content }}{% endfor %}",
            "added_tokens_decoder": {
                "31991": {"content": "<|im_start|>", "special": False, "normalized": False},
                "31992": {"content": "\u2581hello\u2581world", "special": False, "normalized": False},
                "31993": {"content": "<tool>", "special": True, "normalized": False},
            },
        },
    }, config={"bos_token_id": 1, "eos_token_id": 2, "pad_token_id": 0})


MISTRAL_TC = {"tokenizer_class": "LlamaTokenizer", "add_bos_token": True, "add_eos_token": False, "legacy": False,
              "bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>", "pad_token": None,
              "chat_template": "{{ bos_token }}{% for m in messages %}[INST] {{ m['content'] }} [/INST]{% endfor %}"}

CASES = {
    # SentencePiece tokenizer.model
    "llama-spm": lambda d: write_checkpoint(d, 32000, {"tokenizer.model": TOK / "llama-spm" / "tokenizer.model"}),
    "llama-spm-configured": _llama_spm_configured,
    # CodeLlama's vocab size: padded past the model file, EOT 32010
    "codellama-32016": lambda d: write_checkpoint(d, 32016, {"tokenizer.model": TOK / "llama-spm" / "tokenizer.model"}),
    # small Granite's vocab size: add_bos forced false
    "granite-49152": lambda d: write_checkpoint(d, 49152, {"tokenizer.model": TOK / "llama-spm" / "tokenizer.model"}),
    # SentencePiece-style BPE tokenizer.json (gguf-py LlamaHfVocab)
    "mistral-v3": lambda d: write_checkpoint(d, 32768, {"tokenizer.json": TOK / "mistral-v3-spm" / "tokenizer.json"}),
    "mixtral": lambda d: write_checkpoint(d, 32000, {"tokenizer.json": TOK / "mixtral-spm" / "tokenizer.json"}),
    "phi-3-mini": lambda d: write_checkpoint(d, 32064, {
        "tokenizer.json": TOK / "phi-3-mini" / "tokenizer.json",
        "tokenizer_config.json": TOK / "phi-3-mini" / "tokenizer_config.json"}),
    # the same tokenizer.json as Mistral releases it (declared LlamaTokenizer): under model_type mistral
    # AutoTokenizer takes the generic backend, under llama it rebuilds LlamaTokenizer (default specials)
    "mistral-type-declared-llama": lambda d: write_checkpoint(d, 32768, {
        "tokenizer.json": TOK / "mistral-v3-spm" / "tokenizer.json", "tokenizer_config.json": MISTRAL_TC},
        {"architectures": ["MistralForCausalLM"], "model_type": "mistral"}),
    "llama-type-declared-llama": lambda d: write_checkpoint(d, 32768, {
        "tokenizer.json": TOK / "mistral-v3-spm" / "tokenizer.json",
        "tokenizer_config.json": {"tokenizer_class": "LlamaTokenizer", "legacy": False}}),
    # byte-level BPE
    "llama3-bpe": lambda d: write_checkpoint(d, 128256, {
        "tokenizer.json": llama3_tokenizer_json(d / "tokenizer.json.src"),
        "tokenizer_config.json": TOK / "llama3-tiktoken" / "tokenizer_config.json"}),
    "gpt-2": lambda d: write_checkpoint(d, 50257, {
        "tokenizer.json": TOK / "gpt-2" / "tokenizer.json",
        "tokenizer_config.json": TOK / "gpt-2" / "tokenizer_config.json"}),
    "gpt-2-chat-templates": _gpt2_with_templates,
}


def _dir_key(d: Path) -> str:
    from transformers import __version__ as tf_version
    h = hashlib.sha256(f"{oracle.LLAMA_CPP_PYTHON}|{tf_version}".encode())
    for f in sorted(p for p in d.rglob("*") if p.is_file()):
        h.update(str(f.relative_to(d)).encode())
        h.update(oracle.sha256(f).encode())
    return h.hexdigest()[:20]


def converted(d: Path) -> Path:
    """The converter's --vocab-only GGUF for checkpoint `d`, cached by content."""
    out = OUT_CACHE / f"{_dir_key(d)}.gguf"
    if not out.is_file():
        OUT_CACHE.mkdir(parents=True, exist_ok=True)
        tmp = out.with_name(out.stem + ".partial.gguf")
        oracle.convert(d, tmp, "f32", "--vocab-only")
        tmp.rename(out)
    return out


@pytest.fixture(scope="session")
def case_dir(tmp_path_factory):
    made: dict[str, Path] = {}

    def get(name: str) -> Path:
        if name not in made:
            d = tmp_path_factory.mktemp(name)
            CASES[name](d)
            for extra in d.glob("*.src"):
                extra.unlink()
            made[name] = d
        return made[name]
    return get


# -- comparing ---------------------------------------------------------------------------------------------------

# The converter collects named chat-template names in a set: their order follows string hashing.
UNORDERED = {"tokenizer.chat_templates"}


@functools.lru_cache(maxsize=4)
def converter_tokenizer_fields(gguf_path: Path):
    """(key, field) for the converter's tokenizer.* entries (GGUFReader is slow on 128k tokens: cached)."""
    from gguf import GGUFReader
    reader = GGUFReader(gguf_path)
    return [(k, f) for k, f in reader.fields.items() if k.startswith("tokenizer.")]


def assert_kvs_equal_converter(ours: list[KV], gguf_path: Path) -> None:
    theirs = converter_tokenizer_fields(gguf_path)
    assert [kv.key for kv in ours] == [k for k, _ in theirs], "tokenizer keys or their order differ"
    for kv, (key, field) in zip(ours, theirs):
        want_types = [kv.type] + ([kv.item_type] if kv.type == ValueType.ARRAY else [])
        assert [int(t) for t in field.types] == [int(t) for t in want_types], f"{key}: types differ"
        raw = b"".join(bytes(p) for p in field.parts)
        if key in UNORDERED:
            assert sorted(kv.value) == sorted(field.contents()), f"{key}: values differ"
            continue
        if encode_kv(kv) != raw:
            mine, conv = kv.value, field.contents()
            if isinstance(mine, list) and isinstance(conv, list):
                i = next((i for i, (a, b) in enumerate(zip(mine, conv)) if a != b), min(len(mine), len(conv)))
                pytest.fail(f"{key}: first difference at item {i}: ours {mine[i:i + 3]!r}, converter "
                            f"{conv[i:i + 3]!r} (lengths {len(mine)}, {len(conv)})")
            pytest.fail(f"{key}: ours {mine!r}, converter {conv!r}")


# -- tests -------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("name", list(CASES))
def test_llama_vocab_matches_converter(name, case_dir):
    from hfview.tokenizer import llama_vocab

    d = case_dir(name)
    hparams = json.loads((d / "config.json").read_text())
    ours = llama_vocab(d, hparams)
    assert_kvs_equal_converter(ours, converted(d))


def test_llama3_tokenizer_is_llama_bpe(case_dir):
    """The rebuilt Llama-3 tokenizer.json must be what the converter calls llama-bpe, or the case above
    would not cover the real Llama-3 path."""
    d = case_dir("llama3-bpe")
    fields = dict(converter_tokenizer_fields(converted(d)))
    assert fields["tokenizer.ggml.pre"].contents() == "llama-bpe"
    from hfview.tokenizer import get_vocab_base_pre
    assert get_vocab_base_pre(d) == "llama-bpe"


def test_unknown_pre_tokenizer_is_refused_like_the_converter(tmp_path):
    """GPT-2 with a BOS added to every text: a digest the converter's table lacks. The converter stops
    with the digest in its log; we raise UnknownPreTokenizer with the same digest."""
    from hfview.tokenizer import UnknownPreTokenizer, gpt2_vocab

    tj = json.loads((TOK / "gpt-2" / "tokenizer.json").read_text(encoding="utf-8"))
    eot = "<|endoftext|>"
    tj["post_processor"] = {"type": "TemplateProcessing",
                            "single": [{"SpecialToken": {"id": eot, "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}],
                            "pair": [{"Sequence": {"id": "A", "type_id": 0}}, {"Sequence": {"id": "B", "type_id": 1}}],
                            "special_tokens": {eot: {"id": eot, "ids": [50256], "tokens": [eot]}}}
    d = write_checkpoint(tmp_path / "ckpt", 50257, {"tokenizer.json": tj})
    with pytest.raises(UnknownPreTokenizer) as ours:
        gpt2_vocab(d, json.loads((d / "config.json").read_text()))
    with pytest.raises(oracle.ConverterFailed) as theirs:
        oracle.convert(d, tmp_path / "out.gguf", "f32", "--vocab-only")
    assert "BPE pre-tokenizer was not recognized" in str(theirs.value)
    assert f"chkhsh:  {ours.value.digest}" in str(theirs.value)
    assert ours.value.digest in str(ours.value) and "does not know" in str(ours.value)


def test_tokenizer_json_without_model_type_is_refused_like_the_converter(tmp_path):
    """roberta-base's tokenizer.json predates model.type: the converter's LlamaHfVocab dies on it."""
    from hfview.tokenizer import TokenizerError, llama_vocab

    d = write_checkpoint(tmp_path / "ckpt", 50265, {
        "tokenizer.json": TOK / "roberta-base" / "tokenizer.json",
        "tokenizer_config.json": TOK / "roberta-base" / "tokenizer_config.json"})
    with pytest.raises(TokenizerError, match="has no 'type'"):
        llama_vocab(d, json.loads((d / "config.json").read_text()))
    with pytest.raises(oracle.ConverterFailed, match="KeyError: 'type'"):
        oracle.convert(d, tmp_path / "out.gguf", "f32", "--vocab-only")


def test_encoded_kvs_equal_encoded_bytes_of_converter_fields(case_dir):
    """encode_kv over our list reproduces the converter's tokenizer.* region byte for byte (phi-3: scores,
    types, special ids, add flags and a chat template in one file)."""
    from hfview.tokenizer import llama_vocab

    d = case_dir("phi-3-mini")
    ours = b"".join(encode_kv(kv) for kv in llama_vocab(d, json.loads((d / "config.json").read_text())))
    theirs = b"".join(b"".join(bytes(p) for p in f.parts) for _, f in converter_tokenizer_fields(converted(d)))
    assert ours == theirs


def test_missing_tokenizer_files_say_what_is_missing(tmp_path):
    from hfview.tokenizer import TokenizerError, llama_vocab, sentencepiece_vocab

    d = write_checkpoint(tmp_path / "empty", 32000)
    with pytest.raises(FileNotFoundError, match="tokenizer.model"):
        sentencepiece_vocab(d, {"vocab_size": 32000})
    with pytest.raises(TokenizerError, match="tokenizer.json"):
        llama_vocab(d, {"vocab_size": 32000})


def test_vocab_larger_than_model_is_refused(tmp_path):
    from hfview.tokenizer import TokenizerError, gpt2_vocab

    d = write_checkpoint(tmp_path / "small", 1000, {"tokenizer.json": TOK / "gpt-2" / "tokenizer.json"})
    with pytest.raises(TokenizerError, match="vocab_size 1000"):
        gpt2_vocab(d, {"vocab_size": 1000})

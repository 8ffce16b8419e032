"""PLaMo's tokenizer.jsonl vocabulary against the converter (Plamo2Model / Plamo3Model.set_vocab).

No real PLaMo tokenizer is in our fixtures: the tokenizer.jsonl here is synthetic and exercises the format
(typed and untyped lines, <|plamo:...|> tokens, blank lines, padding to vocab_size)."""
from __future__ import annotations

import json

import pytest

import oracle
from test_tokenizer_kv import assert_kvs_equal_converter, converted, write_checkpoint

LINES = [
    ["<|plamo:unk|>", 0.0, "UNKNOWN", 0, 0, 0, 0],
    ["<|plamo:bos|>", 0.0, "CONTROL"],
    ["<|plamo:eos|>", 0.0, "CONTROL"],
    ["<|plamo:pad|>", 0.0, "CONTROL"],
    ["<|plamo:op|>", 0.0],
    ["<0x00>", 0.0, "BYTE"], ["<0x0A>", 0.0, "BYTE"],
    ["▁the", -1.5, "NORMAL"], ["こんにちは", -7.25], ["<|plamo:reserved_1|>", -3.0, "NORMAL"], ["a b", -2.0],
]


def _plamo_dir(d, arch, chat_template=None, jinja=None):
    jsonl = "\n".join(json.dumps(line, ensure_ascii=False) for line in LINES[:6]) + "\n\n" + \
        "\n".join(json.dumps(line, ensure_ascii=False) for line in LINES[6:]) + "\n"
    cfg = {"bos_token": "<|plamo:bos|>", "eos_token": "<|plamo:eos|>", "pad_token": "<|plamo:pad|>",
           "unk_token": "<|plamo:unk|>", "sep_token": None}
    if chat_template is not None:
        cfg["chat_template"] = chat_template
    files = {"tokenizer.jsonl": jsonl, "tokenizer_config.json": cfg}
    if jinja is not None:
        files["chat_template.jinja"] = jinja
    model_type = {"Plamo2ForCausalLM": "plamo2", "Plamo3ForCausalLM": "plamo3"}[arch]
    return write_checkpoint(d, 16, files, {"architectures": [arch], "model_type": model_type})


@pytest.mark.parametrize("arch", ["Plamo2ForCausalLM", "Plamo3ForCausalLM"])
def test_plamo_vocab_matches_converter(arch, tmp_path):
    from hfview.tokenizer import plamo3_vocab, plamo_vocab

    d = _plamo_dir(tmp_path / "c", arch, chat_template="{{ messages }}", jinja="{% for m in messages %}{% endfor %}")
    fn = plamo_vocab if arch == "Plamo2ForCausalLM" else plamo3_vocab
    assert_kvs_equal_converter(fn(d, json.loads((d / "config.json").read_text())), converted(d))


def test_plamo_bad_line_is_named(tmp_path):
    from hfview.tokenizer import TokenizerError, plamo_vocab

    d = _plamo_dir(tmp_path / "c", "Plamo2ForCausalLM")
    (d / "tokenizer.jsonl").write_text('["a", 0.0]\n["b"]\n', encoding="utf-8")
    with pytest.raises(TokenizerError, match=r"tokenizer.jsonl:2"):
        plamo_vocab(d, {"vocab_size": 16})


def test_plamo_special_token_missing_from_vocab_is_refused_like_the_converter(tmp_path):
    from hfview.tokenizer import TokenizerError, plamo_vocab

    d = _plamo_dir(tmp_path / "c", "Plamo2ForCausalLM")
    (d / "tokenizer_config.json").write_text(json.dumps({"bos_token": "<nope>"}), encoding="utf-8")
    with pytest.raises(TokenizerError, match="<nope>"):
        plamo_vocab(d, {"vocab_size": 16})
    with pytest.raises(oracle.ConverterFailed, match="not in list"):
        oracle.convert(d, tmp_path / "out.gguf", "f32", "--vocab-only")

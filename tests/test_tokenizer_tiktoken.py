"""tiktoken rank files as byte-level BPE: vocabulary strings and recovered merges.

Oracles: GPT-2's tokenizer.json (its vocabulary and merges are what r50k_base's ranks must turn into), the
converter's own QwenModel.bpe / token_bytes_to_string run on the Llama-3 ranks, and tiktoken's encoder."""
from __future__ import annotations

import json
import os
import random
import subprocess
import sys

import pytest

import oracle
from test_tokenizer_hf import CORPUS
from test_tokenizer_kv import TOK

R50K = TOK / "r50k-gpt2-tiktoken" / "r50k_base.tiktoken"
LLAMA3 = TOK / "llama3-tiktoken" / "tokenizer.model"
GPT2_PATTERN = r"""'(?:[sdmt]|ll|ve|re)| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""


@pytest.fixture(scope="module")
def r50k():
    from hfview.tokenizer.tiktoken_bpe import load_ranks
    return load_ranks(R50K)


def test_r50k_vocabulary_and_merges_are_gpt2s(r50k):
    from hfview.tokenizer.tiktoken_bpe import recover_merges, token_bytes_to_string

    gpt2 = json.loads((TOK / "gpt-2" / "tokenizer.json").read_text(encoding="utf-8"))["model"]
    vocab = {t: i for t, i in gpt2["vocab"].items() if t != "<|endoftext|>"}  # the one special token
    assert {token_bytes_to_string(t): r for t, r in r50k.items()} == vocab
    want = [m if isinstance(m, str) else " ".join(m) for m in gpt2["merges"]]
    assert recover_merges(r50k) == want


def test_merges_equal_the_converters_on_llama3_ranks():
    """A sample of Llama-3 tokens through our BPE replay and through the converter's QwenModel.bpe."""
    from hfview.tokenizer.tiktoken_bpe import bpe_parts, load_ranks, token_bytes_to_string

    ranks = load_ranks(LLAMA3)
    sample = random.Random(0).sample([t for t in ranks if len(t) > 1], 3000)
    ours = [[token_bytes_to_string(p) for p in bpe_parts(ranks, t, max_rank=ranks[t])] for t in sample]
    root = oracle.converter_root()
    script = (
        "import base64, json, sys\n"
        "from tiktoken.load import load_tiktoken_bpe\n"
        "from conversion.qwen import QwenModel\n"
        "ranks = load_tiktoken_bpe(sys.argv[1])\n"
        "sample = [base64.b64decode(s) for s in json.loads(sys.stdin.read())]\n"
        "print(json.dumps([[QwenModel.token_bytes_to_string(p) for p in QwenModel.bpe(ranks, t, max_rank=ranks[t])]"
        " for t in sample]))\n")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(root), str(root / "gguf-py")]))
    proc = subprocess.run([sys.executable, "-c", script, str(LLAMA3)], cwd=root, env=env, capture_output=True,
                          text=True, input=json.dumps([__import__("base64").b64encode(t).decode() for t in sample]))
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert ours == json.loads(proc.stdout)


def test_split_and_bpe_encode_like_tiktoken(r50k):
    import tiktoken

    from hfview.tokenizer.tiktoken_bpe import bpe_parts, tiktoken_split

    enc = tiktoken.Encoding("r50k", pat_str=GPT2_PATTERN, mergeable_ranks=r50k, special_tokens={})
    for text in CORPUS:
        ids = [r50k[p] for piece in tiktoken_split(GPT2_PATTERN, text) for p in bpe_parts(r50k, piece.encode())]
        assert ids == enc.encode_ordinary(text), text


def test_tokens_pad_and_mark_specials(r50k):
    from hfview.tokenizer.tiktoken_bpe import tiktoken_tokens

    tokens, types = tiktoken_tokens(r50k, {"<|endoftext|>": 50256, "<|extra|>": 50258}, 50260)
    assert tokens[50256:] == ["<|endoftext|>", "[PAD50257]", "<|extra|>", "[PAD50259]"]
    assert types[50255:] == [1, 3, 5, 3, 5]


@pytest.mark.parametrize("line, why", [(b"aGVsbG8= 1 2\n", "two fields"), (b"!!!! 3\n", "base64"),
                                       (b"aGVsbG8= x\n", "int")])
def test_malformed_rank_file_names_file_and_line(tmp_path, line, why):
    from hfview.tokenizer import TokenizerError
    from hfview.tokenizer.tiktoken_bpe import load_ranks

    path = tmp_path / "bad.tiktoken"
    path.write_bytes(b"IQ== 0\n" + line)
    with pytest.raises(TokenizerError, match=r"bad.tiktoken:2"):
        load_ranks(path)

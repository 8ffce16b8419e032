"""hfview decide: options ranked by llama.cpp's log-probabilities == transformers' (same ids, 1e-4)."""
from __future__ import annotations

import json

import numpy as np
import pytest
from click.testing import CliRunner

from hfview.cli import main

pytest.importorskip("torch")
pytest.importorskip("transformers")

PROMPT = "The capital of France is"
OPTIONS = [" Paris", " London", " a big city by the river", ".", " 東京"]


def _cli(*args):
    return CliRunner().invoke(main, list(args))


def _transformers_logprobs(path, ids: list[int], n_prompt: int) -> list[float]:
    from family_oracle import transformers_logits

    logits = transformers_logits(path, ids).astype(np.float64)
    rows = logits[n_prompt - 1:len(ids) - 1]
    m = rows.max(axis=1, keepdims=True)
    lp = rows - m - np.log(np.exp(rows - m).sum(axis=1, keepdims=True))
    return [float(lp[i, t]) for i, t in enumerate(ids[n_prompt:])]


@pytest.mark.parametrize("name", ["llama-spm", "qwen3", "llama3-bpe"])
def test_decide_matches_transformers(checkpoint, name):
    """Same ranking and the same summed, mean and per-token log-probabilities within 1e-4, the ids made once
    by llama.cpp's tokenizer (prompt with BOS as the vocabulary says, each option from the joint text) and fed
    unchanged to transformers."""
    from hfview.runner.api import load

    path = checkpoint(name)
    args = ["decide", "--model", str(path), "--prompt", PROMPT, "--precision", "f32", "--json"]
    for o in OPTIONS:
        args += ["--option", o]
    res = _cli(*args)
    assert res.exit_code == 0, res.output
    rep = json.loads(res.stdout)
    with load(path, precision="f32") as r:
        prompt_ids = r.tokenize(PROMPT, add_special=True, parse_special=True)
    ref = {}
    for s in rep["options"]:
        assert s["n_tokens"] == len(s["tokens"]) >= 1
        lps = _transformers_logprobs(path, prompt_ids + s["tokens"], len(prompt_ids))
        ref[s["option"]] = sum(lps)
        np.testing.assert_allclose(s["token_logprobs"], lps, atol=1e-4, rtol=0)
        assert abs(s["logprob"] - sum(lps)) < 1e-4
        assert abs(s["mean_logprob"] - sum(lps) / len(lps)) < 1e-4
    ours = [s["option"] for s in rep["options"]]
    assert ours == sorted(ref, key=lambda o: -ref[o]) and rep["choice"] == ours[0]
    assert [s["rank"] for s in rep["options"]] == [1, 2, 3, 4, 5]
    assert sorted(ours) == sorted(OPTIONS)
    # a multi-token option really is several tokens, so sum and mean rank differently somewhere
    assert max(s["n_tokens"] for s in rep["options"]) >= 3


def test_decide_by_mean_and_text_output(checkpoint):
    path = str(checkpoint("llama-spm"))
    res = _cli("decide", "--model", path, "--prompt", PROMPT, "--option", " Paris", "--option",
               " a big city by the river", "--by", "mean", "--json")
    assert res.exit_code == 0, res.output
    rep = json.loads(res.stdout)
    means = [s["mean_logprob"] for s in rep["options"]]
    assert means == sorted(means, reverse=True)
    text = _cli("decide", "--model", path, "--prompt", PROMPT, "--option", " Paris", "--option", " London")
    assert text.exit_code == 0 and text.stdout.splitlines()[0].split()[:3] == ["rank", "option", "logprob"]
    assert len(text.stdout.strip().splitlines()) == 3


def test_decide_refuses_a_token_across_the_boundary(checkpoint):
    """Byte-level BPE: 'is ' + 'Paris' tokenizes as 'is' + ' Paris', so the prompt's trailing-space token is not
    a prefix of the joint text: refused by option, with the fix, rather than scoring another split."""
    res = _cli("decide", "--model", str(checkpoint("qwen3")), "--prompt", PROMPT + " ", "--option", "Paris")
    assert res.exit_code == 1
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in res.output
    assert "option 'Paris'" in lines[0] and "merges with the prompt" in lines[0] and "trailing space" in lines[0]


@pytest.mark.parametrize("options, needle", [(["", " x"], "an option is empty"),
                                             ([" x", " x"], "option ' x' is given twice")])
def test_decide_bad_options(checkpoint, options, needle):
    args = ["decide", "--model", str(checkpoint("llama-spm")), "--prompt", PROMPT]
    for o in options:
        args += ["--option", o]
    res = _cli(*args)
    assert res.exit_code == 1 and needle in res.stderr and "Traceback" not in res.output


def test_option_ids_takes_the_joint_tokenization():
    from hfview.runner.decide import DecideError, option_ids

    vocab = {"ab": 1, "a": 2, "b": 3, "c": 4}

    def tok(text, special):  # greedy longest match, a BOS (0) when special
        out, i = ([0] if special else []), 0
        while i < len(text):
            for n in (2, 1):
                if text[i:i + n] in vocab:
                    out.append(vocab[text[i:i + n]])
                    i += n
                    break
        return out

    assert option_ids(tok, tok("c", True), "c", "ab", add_special=True) == [1]
    with pytest.raises(DecideError, match="merges with the prompt"):
        option_ids(tok, tok("a", True), "a", "b", add_special=True)  # 'a' + 'b' is the single token 'ab'

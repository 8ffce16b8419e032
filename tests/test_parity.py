"""hfview parity: llama.cpp from the view vs transformers, on the same ids."""
from __future__ import annotations

import json
import sys

import numpy as np
import pytest
from click.testing import CliRunner

from hfview.cli import main
from hfview.runner.parity import metrics

pytest.importorskip("torch")
pytest.importorskip("transformers")


def _parity(*args):
    return CliRunner().invoke(main, ["parity", *args])


@pytest.mark.parametrize("name", ["llama-spm", "mixtral"])
def test_parity_passes(checkpoint, name):
    res = _parity("--model", str(checkpoint(name)), "--json")
    assert res.exit_code == 0, res.output
    rep = json.loads(res.stdout)
    assert rep["passed"] and rep["nmse"] < 1e-4
    assert rep["top1_agreement"] == 1.0 and rep["mean_cosine"] > 0.9999
    assert rep["n_tokens"] > 10


def test_parity_fails_under_impossible_threshold(checkpoint):
    res = _parity("--model", str(checkpoint("llama-spm")), "--threshold", "0", "--prompt", "Hello world")
    assert res.exit_code == 1
    assert res.stdout.startswith("FAIL") and "nmse" in res.stdout


def test_metrics():
    rng = np.random.default_rng(0)
    b = rng.normal(size=(5, 50))
    same = metrics(b, b)
    assert same["nmse"] == 0 and same["max_abs_error"] == 0 and same["top1_agreement"] == 1
    assert abs(same["mean_cosine"] - 1) < 1e-12
    double = metrics(2 * b, b)  # error equals the signal: NMSE 1, direction unchanged
    assert abs(double["nmse"] - 1) < 1e-12 and abs(double["min_cosine"] - 1) < 1e-12
    flipped = metrics(-b, b)
    assert flipped["top1_agreement"] == 0 and abs(flipped["mean_cosine"] + 1) < 1e-12


def test_refusal_without_torch(checkpoint, monkeypatch):
    monkeypatch.setitem(sys.modules, "transformers", None)  # import transformers -> ImportError
    res = _parity("--model", str(checkpoint("llama-spm")))
    assert res.exit_code == 1
    assert "pip install 'hfview[torch]'" in res.stderr and "Traceback" not in res.output


# ---------------------------------------------------------------- two backends, always
def test_parity_refuses_a_family_the_view_lacks_before_loading(opt_dir, monkeypatch):
    """OPT runs only through transformers: parity would compare transformers with itself, so it refuses on
    the config alone — neither transformers' model nor the view is ever built."""
    import transformers

    import hfview.checkpoint

    def never(*a, **k):
        raise AssertionError("parity loaded a model for a family it must refuse")

    monkeypatch.setattr(transformers.AutoModelForCausalLM, "from_pretrained", never)
    monkeypatch.setattr(hfview.checkpoint.HfCheckpoint, "__init__", never)
    res = _parity("--model", str(opt_dir))
    assert res.exit_code == 1, res.output
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in res.output
    assert "family 'opt'" in lines[0] and "llama.cpp cannot run it through hfview" in lines[0]
    assert res.stdout == ""  # no report at all


def test_a_report_cannot_have_one_backend_on_both_sides():
    from hfview.runner.parity import ParityReport

    fields = dict(model="m", model_revision=None, precision="f32", n_tokens=1, n_vocab=2, nmse=0.0,
                  max_abs_error=0.0, mean_cosine=1.0, min_cosine=1.0, top1_agreement=1.0, threshold=1e-4,
                  passed=True, seconds_llama_cpp=0.0, seconds_transformers=0.0)
    assert ParityReport(**fields).candidate.startswith("llama.cpp")
    with pytest.raises(AssertionError, match="two backends"):
        ParityReport(**fields, candidate="transformers (torch fallback)")


def test_parity_never_reports_a_torch_runner(checkpoint, monkeypatch):
    """Whatever load returns, compare refuses to report unless its candidate side is llama.cpp."""
    from hfview.runner import api
    from hfview.runner.parity import compare

    class Torchish:
        backend = "torch"

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            pass

    monkeypatch.setattr(api, "load", lambda *a, **k: Torchish())
    with pytest.raises(AssertionError, match="not llama.cpp"):
        compare(str(checkpoint("llama-spm")))


# ---------------------------------------------------------------- sliding windows
def _variant(checkpoint, tmp_path, name, **changes):
    from family_variants import variant
    return variant(checkpoint(name), tmp_path / f"{name}-variant", **changes)


@pytest.mark.parametrize("name", ["gemma2", "gemma3-text"])
def test_window_llama_cpp_applies_is_not_capped(checkpoint, name):
    """Gemma 2 and 3 slide in llama.cpp: the context is not cut at the (6-token) window, and over a prompt
    many windows long llama.cpp from the view equals transformers."""
    from family_oracle import nmse, transformers_logits

    from hfview.runner.api import load

    path = checkpoint(name)
    with load(path, precision="f32") as r:
        window = r.checkpoint.hparams["sliding_window"]
        assert r.unapplied_window is None and r.n_ctx > 2 * window
        assert not any("sliding window" in n for n in r.notes)
        ids = r.tokenize(DEFAULT_PROMPT_TWICE)
        assert len(ids) >= 2 * window
        ours = r.logits(ids)
    assert nmse(ours, transformers_logits(path, ids)) < 1e-4


@pytest.mark.parametrize("name", ["gemma2", "gemma3-text"])
def test_parity_default_prompt_past_an_applied_window(checkpoint, name):
    res = _parity("--model", str(checkpoint(name)), "--json")
    assert res.exit_code == 0, res.output
    rep = json.loads(res.stdout)
    assert rep["passed"] and rep["note"] is None and rep["n_tokens"] > 2 * 6


def test_window_llama_cpp_lacks_caps_and_says_so(checkpoint, tmp_path):
    """Mistral (llama.cpp's llama architecture attends fully): the default context stops at the window; an
    explicit larger one is honoured with a note; and past the window the two computations really differ,
    which is why the cap exists."""
    from family_oracle import nmse, transformers_logits

    from hfview.runner.api import load

    path = _variant(checkpoint, tmp_path, "mistral", sliding_window=8)
    with load(path, precision="f32") as r:
        assert r.n_ctx == 8 and r.unapplied_window == 8
        assert any("context limited to the sliding window: 8 tokens" in n for n in r.notes)
    with load(path, precision="f32", n_ctx=64) as r:
        assert r.n_ctx == 64
        assert any("beyond 8 tokens llama.cpp attends to the whole context, unlike the model" in n for n in r.notes)
        ids = r.tokenize(DEFAULT_PROMPT_TWICE)[:24]
        ours = r.logits(ids)
    ref = transformers_logits(path, ids)
    assert nmse(ours[:8], ref[:8]) < 1e-4    # within the window: the same function
    assert nmse(ours[8:], ref[8:]) > 1e-3    # past it: llama.cpp attends fully, the model does not


def test_cli_honours_n_ctx_past_the_window_with_a_note(checkpoint, tmp_path):
    path = _variant(checkpoint, tmp_path, "mistral", sliding_window=8)
    res = CliRunner().invoke(main, ["generate", "--model", str(path), "--prompt", "Hello", "--n-ctx", "32",
                                    "--max-tokens", "2", "--temperature", "0", "--json", "--no-progress"])
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout)["n_ctx"] == 32
    assert "beyond 8 tokens llama.cpp attends to the whole context" in res.stderr


def test_parity_default_prompt_longer_than_an_unapplied_window(checkpoint, tmp_path):
    path = _variant(checkpoint, tmp_path, "mistral", sliding_window=8)
    res = _parity("--model", str(path), "--json")
    assert res.exit_code == 0, res.output
    rep = json.loads(res.stdout)
    assert rep["passed"] and rep["n_tokens"] == 8
    assert "compared the first 8 of" in rep["note"] and "sliding window" in rep["note"]


def test_a_window_switched_off_is_no_window(checkpoint, tmp_path):
    """Qwen2 releases state sliding_window with use_sliding_window false: nothing slides, nothing is capped."""
    from hfview.runner.api import load

    path = _variant(checkpoint, tmp_path, "qwen2", sliding_window=8, use_sliding_window=False)
    with load(path) as r:
        assert r.unapplied_window is None and r.n_ctx > 8


DEFAULT_PROMPT_TWICE = ("The quick brown fox jumps over the lazy dog. In 1969, 3 astronauts flew to the Moon; "
                        "today we ask: what comes next? ") * 2


@pytest.mark.parametrize("command", [["inspect"], ["export"]])
def test_inspect_and_export_refuse_opt_naming_why(opt_dir, tmp_path, command):
    args = [*command, str(opt_dir)] + ([str(tmp_path / "out.gguf")] if command == ["export"] else [])
    res = CliRunner().invoke(main, args)
    assert res.exit_code == 1 and "Traceback" not in res.output
    assert "cannot be presented as a GGUF: llama.cpp has no OPT architecture" in res.stderr
    assert "hfview generate` runs it with transformers" in res.stderr
    assert not (tmp_path / "out.gguf").exists() and not (tmp_path / "out.gguf.partial").exists()


def test_gptj_runs_through_transformers_and_is_refused_by_inspect_and_parity(gptj_dir, record_property):
    record_property("family", "gptj")  # the coverage table (docs/families.md) reads the outcome
    record_property("oracle", "torch")
    gen = CliRunner().invoke(main, ["generate", "--model", str(gptj_dir), "--prompt", "Hello", "--max-tokens", "3",
                                    "--temperature", "0", "--json", "--no-progress"])
    assert gen.exit_code == 0, gen.output
    assert json.loads(gen.stdout)["backend"] == "torch" and "'gptj'" in gen.stderr
    res = CliRunner().invoke(main, ["inspect", str(gptj_dir)])
    assert res.exit_code == 1 and "no class for GPTJForCausalLM" in res.stderr
    res = _parity("--model", str(gptj_dir))
    assert res.exit_code == 1 and "family 'gptj'" in res.stderr and "no class for GPTJForCausalLM" in res.stderr

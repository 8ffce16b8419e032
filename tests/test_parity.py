"""hfview parity: llama.cpp from the view vs transformers, on the same ids."""
from __future__ import annotations

import json
import sys

import numpy as np
import pytest
from click.testing import CliRunner

from hfview.cli import main
from runner.parity import metrics

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

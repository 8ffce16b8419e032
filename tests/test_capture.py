"""hfview capture: the residual stream after each chosen layer, read through llama.cpp's eval callback
(l_out-N), == transformers' output_hidden_states[N + 1], NMSE < 1e-4 per layer; written atomically."""
from __future__ import annotations

import json

import numpy as np
import pytest
from click.testing import CliRunner

from hfview.cli import main

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from runner_oracle import nmse, transformers_states  # noqa: E402

PROMPT = "The quick brown fox jumps over the lazy dog. In 1969, 3 astronauts flew to the Moon."


def _cli(*args):
    return CliRunner().invoke(main, list(args))


@pytest.mark.parametrize("name", ["llama-spm", "qwen3"])
def test_capture_matches_hidden_states(checkpoint, tmp_path, name):
    from safetensors import safe_open

    path = checkpoint(name)
    out = tmp_path / "states.safetensors"
    res = _cli("capture", "--model", str(path), "--prompt", PROMPT, "--layer", "0,1", "--out", str(out),
               "--precision", "f32", "--json")
    assert res.exit_code == 0, res.output
    info = json.loads(res.stdout)
    assert info["layers"] == [0, 1] and not (tmp_path / "states.safetensors.partial").exists()
    with safe_open(str(out), "np") as f:
        meta = f.metadata()
        ids = f.get_tensor("tokens").tolist()
        got = {n: f.get_tensor(f"l_out.{n}") for n in (0, 1)}
    assert json.loads(meta["layers"]) == [0, 1] and meta["prompt"] == PROMPT
    assert len(ids) == info["n_tokens"] > 10
    hidden, hooked, model, _ = transformers_states(path, ids)
    n_layer = len(hidden) - 1
    assert n_layer == 2
    for n in range(n_layer):
        assert got[n].shape == hidden[n + 1].shape == (len(ids), model.config.hidden_size)
        assert got[n].dtype == np.float32
        value = nmse(got[n], hooked[n])
        print(f"{name} layer {n}: NMSE {value:.3e} vs the decoder layer's output")
        assert value < 1e-4
    # below the last layer transformers' hidden_states[N + 1] is that same stream ...
    for n in range(n_layer - 1):
        assert nmse(got[n], hidden[n + 1]) < 1e-4
    # ... at the last it is the final-normed one: capture reports llama.cpp's l_out (before output_norm)
    with torch.no_grad():
        normed = model.model.norm(torch.from_numpy(got[n_layer - 1])).numpy()
    assert nmse(normed, hidden[n_layer]) < 1e-4


def test_capture_layer_ranges_and_api(checkpoint):
    from hfview.runner.api import load
    from hfview.runner.capture import capture, parse_layers

    assert parse_layers("0,2-4, 7") == [0, 2, 3, 4, 7]
    with load(checkpoint("llama-spm"), precision="f32", kv_cache="f32") as r:
        ids = r.tokenize("hello there")
        one = capture(r, ids, [1])
        both = capture(r, ids, [0, 1])
        assert set(one) == {1} and set(both) == {0, 1}
        np.testing.assert_array_equal(one[1], both[1])  # one capture does not disturb another
        before = r.logits(ids)
        capture(r, ids, [0])
        np.testing.assert_array_equal(before, r.logits(ids))  # the runner's own context is untouched


@pytest.mark.parametrize("layer, needle", [("2", "layer 2 out of range: the model has 2 layers (0..1)"),
                                           ("0,x", "'x' is not a layer number")])
def test_capture_refuses_a_bad_layer_and_writes_nothing(checkpoint, tmp_path, layer, needle):
    out = tmp_path / "s.safetensors"
    res = _cli("capture", "--model", str(checkpoint("llama-spm")), "--prompt", "hi", "--layer", layer,
               "--out", str(out))
    assert res.exit_code == 1, res.output
    assert needle in res.stderr and "Traceback" not in res.output
    assert list(tmp_path.iterdir()) == []


def test_write_is_atomic(tmp_path, monkeypatch):
    """A failure while writing leaves the previous file as it was and no partial file."""
    import os

    from hfview.runner.capture import write_safetensors

    out = tmp_path / "s.safetensors"
    write_safetensors(out, {"a": np.zeros(3, np.float32)}, {"n": 1})
    before = out.read_bytes()

    def boom(fd):
        raise OSError("disk full")

    monkeypatch.setattr(os, "fsync", boom)
    with pytest.raises(OSError, match="disk full"):
        write_safetensors(out, {"a": np.ones(1000, np.float32)}, {})
    assert out.read_bytes() == before and sorted(p.name for p in tmp_path.iterdir()) == ["s.safetensors"]

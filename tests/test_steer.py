"""Steering: a control vector applied by llama.cpp (llama_set_adapter_cvec) == transformers with the same
vector added to the residual stream by a forward hook, NMSE < 1e-4; hfview steer-vector == the
cvector-generator "mean" method over transformers' hidden states; bad files refused by name."""
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
PAIRS = [("I am very happy today, what a joy", "I am very sad today, what a grief"),
         ("Act like a cheerful person.", "Act like a gloomy person.")]


def _cli(*args):
    return CliRunner().invoke(main, list(args))


def _unit(n: int, seed: int) -> np.ndarray:
    v = np.random.default_rng(seed).normal(size=n).astype(np.float32)
    return v / np.linalg.norm(v)


def _hidden(path) -> int:
    return json.loads((path / "config.json").read_text())["hidden_size"]


@pytest.mark.parametrize("name", ["llama-spm", "qwen3"])
def test_steered_logits_match_a_transformers_hook(checkpoint, tmp_path, name):
    """direction.1 x 3 (two files, 2 + 1, summed as llama.cpp sums them) is added after layer 1 by llama.cpp
    and by a forward hook on transformers' decoder layer 1: the logits agree; unsteered they do not."""
    from hfview.runner.api import load
    from hfview.runner.steer import write_control_vector

    path = checkpoint(name)
    d = _unit(_hidden(path), 0)
    write_control_vector(tmp_path / "a.gguf", {1: d}, "llama")
    write_control_vector(tmp_path / "b.gguf", {1: d}, "llama")
    with load(path, precision="f32", kv_cache="f32", steer=[f"{tmp_path / 'a.gguf'}:2", str(tmp_path / "b.gguf")]) as r:
        assert any(n.startswith("steering:") and "layers 1..1" in n for n in r.notes)
        ids = r.tokenize(PROMPT)
        ours = r.logits(ids)
    with load(path, precision="f32", kv_cache="f32") as r:
        plain = r.logits(ids)
    _, _, _, ref = transformers_states(path, ids, steer={1: 3.0 * d})
    value = nmse(ours, ref)
    print(f"{name}: steered NMSE {value:.3e}; unsteered vs steered reference {nmse(plain, ref):.3e}")
    assert value < 1e-4
    assert nmse(plain, ref) > 1e-2  # the vector really moves the logits, so the comparison can fail


def test_steering_lands_after_the_named_layer(checkpoint, tmp_path):
    """Captured with and without the vector: l_out-1 moves by exactly strength x direction.1, l_out-0 not at all
    (llama.cpp's direction.N is added after layer N; layer 0 is never steered)."""
    from hfview.runner.api import load
    from hfview.runner.capture import capture
    from hfview.runner.steer import write_control_vector

    path = checkpoint("llama-spm")
    d = _unit(_hidden(path), 1)
    write_control_vector(tmp_path / "v.gguf", {1: d}, "llama")
    with load(path, precision="f32", kv_cache="f32") as r:
        ids = r.tokenize(PROMPT)
        plain = capture(r, ids, [0, 1])
    with load(path, precision="f32", kv_cache="f32", steer=[f"{tmp_path / 'v.gguf'}:-1.5"]) as r:
        steered = capture(r, ids, [0, 1])
    np.testing.assert_array_equal(steered[0], plain[0])
    np.testing.assert_allclose(steered[1] - plain[1], np.broadcast_to(-1.5 * d, plain[1].shape), atol=1e-5)


def test_generate_steer_greedy_follows_the_hooked_model(checkpoint, tmp_path):
    """hfview generate --steer, greedy: the tokens are transformers' greedy tokens under the same hook."""
    from hfview.runner.steer import write_control_vector

    path = checkpoint("qwen3")
    d = _unit(_hidden(path), 2)
    write_control_vector(tmp_path / "v.gguf", {1: d}, "qwen3")
    res = _cli("generate", "--model", str(path), "--prompt", PROMPT, "--no-chat", "--temperature", "0",
               "--max-tokens", "6", "--precision", "f32", "--kv-cache", "f32", "--steer", f"{tmp_path / 'v.gguf'}:4",
               "--json")
    assert res.exit_code == 0, res.output
    rep = json.loads(res.stdout)
    from hfview.runner.api import load
    with load(path, precision="f32") as r:
        ids = r.tokenize(PROMPT, add_special=True, parse_special=True)
    model = transformers.AutoModelForCausalLM.from_pretrained(str(path), dtype=torch.float32).eval()
    vec = torch.from_numpy(4 * d)
    model.model.layers[1].register_forward_hook(
        lambda _m, _a, out: (out[0] + vec,) + tuple(out[1:]) if isinstance(out, tuple) else out + vec)
    seq = list(ids)
    with torch.no_grad():
        for _ in range(len(rep["tokens"])):
            seq.append(int(model(torch.tensor([seq])).logits[0, -1].argmax()))
    assert rep["tokens"] == seq[len(ids):] and len(rep["tokens"]) >= 1


@pytest.mark.parametrize("name", ["llama-spm", "qwen3"])
def test_steer_vector_matches_transformers(checkpoint, tmp_path, name):
    """steer-vector's file: the generator's metadata, and direction.{L+1} == mean over the pooled nonzero rows
    of (positive - negative) transformers' hidden_states[L + 1], unit length, for L = 0 .. n_layer - 2."""
    from gguf import GGUFReader

    from hfview.runner.api import load
    from hfview.runner.steer import contrast_ids, mean_direction, read_control_vector

    path = checkpoint(name)
    out = tmp_path / "cv.gguf"
    args = ["steer-vector", "--model", str(path), "--out", str(out), "--precision", "f32", "--json"]
    for p, n in PAIRS:
        args += ["--positive", p, "--negative", n]
    res = _cli(*args)
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout)["directions"] == ["direction.1"]
    reader = GGUFReader(str(out))
    fields = {k: reader.get_field(k) for k in ("general.architecture", "controlvector.model_hint",
                                                "controlvector.layer_count")}
    assert bytes(fields["general.architecture"].parts[-1]).decode() == "controlvector"
    assert bytes(fields["controlvector.model_hint"].parts[-1]).decode() == ("llama" if name == "llama-spm" else "qwen3")
    assert int(fields["controlvector.layer_count"].parts[-1][0]) == 1
    ours = read_control_vector(out)
    with load(path, precision="f32") as r:
        pairs = [contrast_ids(r, p, n) for p, n in PAIRS]
    diffs = []
    for pos, neg in pairs:
        assert len(pos) == len(neg)
        hp, _, _, _ = transformers_states(path, pos)
        hn, _, _, _ = transformers_states(path, neg)
        diffs.append(hp[1] - hn[1])
    ref = mean_direction(diffs)
    assert set(ours) == {1} and abs(float(np.linalg.norm(ours[1])) - 1) < 1e-5
    value = nmse(ours[1], ref)
    print(f"{name}: steer-vector NMSE {value:.3e}")
    assert value < 1e-4


def test_steer_vector_file_applies(checkpoint, tmp_path):
    """The file steer-vector writes is what --steer reads (file prompts, escapes processed)."""
    pos, neg = tmp_path / "pos.txt", tmp_path / "neg.txt"
    pos.write_text("I love this\\n!\n\nGreat\n")
    neg.write_text("I hate this\\n!\n\nAwful\n")
    out = tmp_path / "cv.gguf"
    path = str(checkpoint("llama-spm"))
    res = _cli("steer-vector", "--model", path, "--positive-file", str(pos), "--negative-file", str(neg),
               "--out", str(out))
    assert res.exit_code == 0, res.output
    assert "from 2 pairs" in res.stdout and not (tmp_path / "cv.gguf.partial").exists()
    res = _cli("generate", "--model", path, "--prompt", "hi", "--max-tokens", "3", "--steer", f"{out}:2",
               "--seed", "1", "--json")
    assert res.exit_code == 0, res.output


# ---------------------------------------------------------------------------------------------- refusals
def _one_line_refusal(res, *needles):
    assert res.exit_code == 1, res.output
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in res.output, res.output
    for needle in needles:
        assert needle in lines[0], lines[0]


def test_refuses_a_vector_of_the_wrong_width(checkpoint, tmp_path):
    from hfview.runner.steer import write_control_vector

    write_control_vector(tmp_path / "v.gguf", {1: _unit(32, 0)}, "qwen3")  # qwen3's width; llama-spm is 48
    res = _cli("generate", "--model", str(checkpoint("llama-spm")), "--prompt", "hi", "--steer",
               str(tmp_path / "v.gguf"))
    _one_line_refusal(res, "v.gguf", "direction.1 is 32 wide", "48 wide")


@pytest.mark.parametrize("directions, needle", [
    ({5: 48}, "direction.5 is for layer 5; the model has 2 layers"),
    ({0: 48}, "llama.cpp never steers layer 0"),
    ({1: 48, 2: 40}, "is 40 wide, the file's others 48"),
])
def test_refuses_bad_directions(checkpoint, tmp_path, directions, needle):
    from hfview.runner.steer import write_control_vector

    write_control_vector(tmp_path / "v.gguf", {k: _unit(n, k) for k, n in directions.items()}, "llama")
    res = _cli("generate", "--model", str(checkpoint("llama-spm")), "--prompt", "hi", "--steer",
               f"{tmp_path / 'v.gguf'}:0.5")
    _one_line_refusal(res, needle)


def test_refuses_a_file_that_is_not_a_control_vector(checkpoint, tmp_path, converted):
    junk = tmp_path / "junk.gguf"
    junk.write_bytes(b"not a gguf at all")
    path = str(checkpoint("llama-spm"))
    _one_line_refusal(_cli("generate", "--model", path, "--prompt", "hi", "--steer", str(junk)),
                      "junk.gguf", "not a readable GGUF control vector")
    _one_line_refusal(_cli("generate", "--model", path, "--prompt", "hi", "--steer", str(tmp_path / "none.gguf")),
                      "no such control vector file")
    model_file = converted("llama-spm", "f32")
    _one_line_refusal(_cli("generate", "--model", path, "--prompt", "hi", "--steer", str(model_file)),
                      "general.architecture is 'llama', not 'controlvector'")


def test_refuses_layers_llama_cpp_cannot_steer(checkpoint, tmp_path):
    from hfview.runner.steer import write_control_vector

    write_control_vector(tmp_path / "v.gguf", {1: _unit(48, 0)}, "llama")
    res = _cli("generate", "--model", str(checkpoint("llama-spm")), "--prompt", "hi", "--steer",
               str(tmp_path / "v.gguf"), "--steer-layers", "0-1")
    _one_line_refusal(res, "steering layers 0..1", "layer 0 never")


def test_parse_steer():
    from pathlib import Path

    from hfview.runner.steer import SteerError, parse_steer

    assert parse_steer("a/b.gguf") == parse_steer("a/b.gguf:1")
    assert parse_steer("a/b.gguf:-0.5").strength == -0.5
    assert parse_steer("c:/x.gguf").path == Path("c:/x.gguf")  # a colon that is not a strength is the path's
    with pytest.raises(SteerError, match="not a finite number"):
        parse_steer("v.gguf:inf")


def test_steer_vector_needs_pairs(checkpoint):
    path = str(checkpoint("llama-spm"))
    _one_line_refusal(_cli("steer-vector", "--model", path, "--positive", "a", "--out", "x.gguf"),
                      "1 positive and 0 negative prompts")

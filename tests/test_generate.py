"""hfview generate / runner.load: incremental decoding, sampling, chat templates, refusals."""
from __future__ import annotations

import json

import numpy as np
import pytest
from click.testing import CliRunner

from hfview.cli import main
from hfview.runner.api import load
from hfview.runner.chat import ChatTemplateError, render
from hfview.runner.generate import PromptTooLong, Utf8Pieces
from hfview.runner.sampling import Sampler, Sampling, from_generation_config


def _cli(*args):
    return CliRunner().invoke(main, list(args))


@pytest.fixture(scope="module")
def spm(checkpoint):
    with load(checkpoint("llama-spm"), n_ctx=64) as r:
        yield r


def test_same_seed_same_text_cli(checkpoint):
    args = ["generate", "--model", str(checkpoint("llama-spm")), "--prompt", "Once upon a time",
            "--max-tokens", "8", "--temperature", "1", "--seed", "7", "--no-progress"]
    first, second = _cli(*args), _cli(*args)
    assert first.exit_code == 0, first.output
    assert first.stdout.strip() and first.stdout == second.stdout


def test_seeds_differ_at_temperature_1(spm):
    outs = {tuple(spm.run("Once upon a time", max_tokens=8, temperature=1.0, seed=s).tokens) for s in range(4)}
    assert len(outs) > 1, outs
    # and greedy ignores the seed
    greedy = {tuple(spm.run("Once upon a time", max_tokens=8, temperature=0, seed=s).tokens) for s in range(2)}
    assert len(greedy) == 1


def test_greedy_matches_transformers(checkpoint):
    """KV-cached decoding (prefill once, one token per step) gives transformers' greedy tokens."""
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    path = checkpoint("llama3-bpe")
    with load(path, precision="f32", n_ctx=64) as r:
        ids = r.tokenize("The capital of France is")
        ours = r.run(ids=ids, max_tokens=8, temperature=0).tokens
        eog = {t for t in range(r.n_vocab) if r._decoder.is_eog(t)}
    model = transformers.AutoModelForCausalLM.from_pretrained(str(path), dtype=torch.float32)
    seq = list(ids)
    theirs = []
    with torch.no_grad():
        for _ in range(8):
            nxt = int(model(torch.tensor([seq])).logits[0, -1].argmax())
            if nxt in eog:
                break
            theirs.append(nxt)
            seq.append(nxt)
    assert len(theirs) >= 4  # a run long enough to exercise several cached steps
    assert ours == theirs


def test_incremental_logits_equal_full_forward(spm):
    ids = spm.tokenize("Hello world, this is")
    dec = spm._decoder
    rows = [dec.prefill(ids)]
    extra = [100, 200, 300]
    for t in extra:
        rows.append(dec.step(t))
    full = spm.logits(ids + extra)[len(ids) - 1:]
    np.testing.assert_allclose(np.stack(rows), full, rtol=0, atol=1e-3)


def test_prompt_too_long(spm, checkpoint):
    long_prompt = "one two three four five six seven eight nine ten " * 10
    n = len(spm.prompt_ids(long_prompt))
    with pytest.raises(PromptTooLong, match=rf"{n} tokens.*holds 64"):
        spm.run(long_prompt, max_tokens=1)
    res = _cli("generate", "--model", str(checkpoint("llama-spm")), "--prompt", long_prompt, "--n-ctx", "16",
               "--no-progress")
    assert res.exit_code == 1
    assert f"the prompt is {n} tokens; the context holds 16" in res.stderr
    assert "Traceback" not in res.output


def test_context_full_stops(spm):
    ids = spm.tokenize("Hello")
    g = spm.run(ids=ids, max_tokens=1000, temperature=0)
    assert g.stop == "context", g.stop
    # every context position decoded; the last token is sampled from the last position's logits
    assert len(ids) + len(g.tokens) == spm.n_ctx + 1


@pytest.mark.parametrize("device,flag", [("cuda", "-DGGML_CUDA=on"), ("metal", "-DGGML_METAL=on")])
def test_device_refusal(checkpoint, device, flag):
    from hfview.runner.devices import DEVICES, backends
    if DEVICES[device] in backends():
        pytest.skip(f"this llama-cpp-python has the {device} backend: no refusal to test")
    res = _cli("generate", "--model", str(checkpoint("llama-spm")), "--prompt", "hi", "--device", device)
    assert res.exit_code != 0
    assert f'CMAKE_ARGS="{flag}" pip install --force-reinstall --no-binary llama-cpp-python' in res.stderr
    assert "Traceback" not in res.output


def test_bad_precision_is_usage_error(checkpoint):
    res = _cli("generate", "--model", str(checkpoint("llama-spm")), "--prompt", "hi", "--precision", "q4")
    assert res.exit_code == 2 and "--precision" in res.output


def test_json_output(checkpoint):
    res = _cli("generate", "--model", str(checkpoint("llama-spm")), "--prompt", "Hello", "--max-tokens", "5",
               "--json", "--no-progress")
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    assert {"model_revision", "text", "tokens", "seconds"} <= out.keys()
    assert 0 < len(out["tokens"]) <= 5 and out["stop"] in ("eos", "max_tokens")
    with load(checkpoint("llama-spm"), n_ctx=64) as r:
        assert out["text"] == b"".join(r.piece(t) for t in out["tokens"]).decode("utf-8", "replace")


def test_ctrl_c_exits_130(checkpoint, monkeypatch):
    from hfview.runner import api

    def interrupted(self, *a, **k):
        raise KeyboardInterrupt

    monkeypatch.setattr(api.Runner, "run", interrupted)
    res = _cli("generate", "--model", str(checkpoint("llama-spm")), "--prompt", "hi", "--no-progress")
    assert res.exit_code == 130
    assert "Traceback" not in res.output and res.stdout == "\n"


def test_utf8_split_across_tokens():
    u = Utf8Pieces()
    data = "é漢🙂".encode()
    pieces = [u.push(data[i:i + 1]) for i in range(len(data))]
    assert "".join(pieces) + u.flush() == "é漢🙂"
    assert pieces[0] == ""  # the first byte of é alone is held back


def _draws(settings: Sampling, logits, seeds=range(50), accepted=()):
    out = []
    for seed in seeds:
        s = Sampler(settings.over({"seed": seed}, "asked"), len(logits))
        for t in accepted:
            s.accept(t)
        out.append(s.sample(np.asarray(logits, dtype=np.float32)))
        s.close()
    return out


OFF = Sampling(temperature=1.0, top_k=0, top_p=1.0, min_p=0.0, repeat_penalty=1.0)


def test_sampler_is_llama_cpps_chain():
    logits = [5.0, 4.0, 0.0, -1.0]
    assert set(_draws(OFF, logits, range(200))) >= {0, 1, 2}
    assert _draws(OFF, logits) == _draws(OFF, logits)                       # a seed gives one draw
    assert set(_draws(OFF.over({"top_p": 0.1}, "asked"), logits)) == {0}    # the nucleus holds the best
    assert set(_draws(OFF.over({"top_k": 2}, "asked"), logits, range(200))) == {0, 1}
    # min-p 0.2: p(1)/p(0) = e^-1 stays, p(2)/p(0) = e^-5 goes
    assert set(_draws(OFF.over({"min_p": 0.2}, "asked"), logits, range(200))) == {0, 1}
    assert set(_draws(OFF.over({"temperature": 0.0}, "asked"), logits)) == {0}
    # the repetition penalty divides a seen token's positive logit: 5 / 3 < 4, so greedy turns to token 1
    greedy_penalised = OFF.over({"temperature": 0.0, "repeat_penalty": 3.0}, "asked")
    assert set(_draws(greedy_penalised, logits, accepted=[0])) == {1}


def test_sampling_settings_refuse_out_of_range():
    from hfview.errors import HfviewError
    for bad in ({"top_p": 0.0}, {"temperature": -1.0}, {"min_p": 2.0}, {"repeat_penalty": 0.0}):
        with pytest.raises(HfviewError, match="out of range"):
            Sampling().over(bad, "asked")


def test_model_sampling_defaults_on_both_backends(checkpoint):
    """The view's general.sampling.* (as the converter writes them) and generation_config.json read for the
    torch backend give the same settings; what the model leaves out is llama.cpp's default."""
    path = checkpoint("llama3-bpe")  # generation_config: do_sample, temperature 0.6, top_p 0.9
    values, _ = from_generation_config(path)
    assert values == {"temperature": 0.6, "top_p": 0.9}
    with load(path, n_ctx=64) as r:
        assert r.sampling == Sampling().over(values, "model")
        used = r.run(ids=r.tokenize("Hello"), max_tokens=2, seed=5).sampling
    assert used["temperature"] == pytest.approx(0.6) and used["from"]["temperature"] == "model"
    assert used["top_k"] == 40 and used["from"]["top_k"] == "llama.cpp default"
    assert used["seed"] == 5 and used["from"]["seed"] == "asked"


def test_cli_samples_with_the_models_settings(checkpoint):
    """The README's first command: the default model's generation_config (temperature 0.8, top-k 40, top-p
    0.95, repetition penalty 1.1) is used; each is overridable; --json lists what was used."""
    res = _cli("generate", "--prompt", "Once upon a time", "--max-tokens", "12", "--json", "--seed", "1",
               "--no-progress")
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    s = out["sampling"]
    assert (s["temperature"], s["top_k"], s["top_p"], s["repeat_penalty"]) == pytest.approx((0.8, 40, 0.95, 1.1))
    assert {s["from"][k] for k in ("temperature", "top_k", "top_p", "repeat_penalty")} == {"model"}
    assert out["seed"] == 1
    again = json.loads(_cli("generate", "--prompt", "Once upon a time", "--max-tokens", "12", "--json",
                            "--seed", "1", "--no-progress").stdout)
    assert again["tokens"] == out["tokens"]
    res = _cli("generate", "--prompt", "Once upon a time", "--max-tokens", "4", "--json", "--temperature", "0",
               "--top-k", "5", "--min-p", "0.1", "--repeat-penalty", "1.0", "--no-progress")
    s = json.loads(res.stdout)["sampling"]
    assert (s["temperature"], s["top_k"], s["min_p"], s["repeat_penalty"]) == pytest.approx((0, 5, 0.1, 1.0))
    assert s["from"]["temperature"] == "asked" and s["from"]["seed"] == "random"


def test_unseeded_runs_report_their_seed(spm):
    g = spm.run("Once upon a time", max_tokens=6, temperature=1.0)
    again = spm.run("Once upon a time", max_tokens=6, temperature=1.0, seed=g.sampling["seed"])
    assert g.tokens == again.tokens


def test_chat_template_matches_transformers(checkpoint):
    """llama3-bpe's tokenizer_config has Llama 3's template: our rendering and ids equal transformers'."""
    transformers = pytest.importorskip("transformers")
    path = checkpoint("llama3-bpe")
    msgs = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi there"}]
    tok = transformers.AutoTokenizer.from_pretrained(str(path))
    want_text = tok.apply_chat_template(msgs, tokenize=False, add_generation_prompt=True)
    want_ids = tok(want_text, add_special_tokens=False)["input_ids"]
    with load(path, n_ctx=64) as r:
        assert r.chat_template
        assert r.render_chat("Hi there", "Be brief.") == want_text
        ids = r.prompt_ids("Hi there", system="Be brief.")
    assert ids == want_ids
    assert ids.count(tok.bos_token_id) == 1  # the template's BOS, none added on top


def test_chat_default_off_without_template(spm):
    assert spm.chat_template is None
    assert spm.prompt_ids("Hello") == spm.tokenize("Hello", add_special=True, parse_special=True)


def test_system_from_file(tmp_path):
    from hfview.runner.chat import read_system
    f = tmp_path / "sys.txt"
    f.write_text("You are terse.", encoding="utf-8")
    assert read_system(str(f)) == "You are terse."
    assert read_system("Be nice") == "Be nice"


def test_chat_template_is_sandboxed():
    with pytest.raises(ChatTemplateError):
        render("{{ messages.append(1) }}", [{"role": "user", "content": "x"}])
    with pytest.raises(ChatTemplateError):
        render("{{ ''.__class__.__mro__[1].__subclasses__() }}", [])
    with pytest.raises(ChatTemplateError, match="only user"):
        render("{{ raise_exception('only user') }}", [])


# ---------------------------------------------------------------- torch fallback
def test_torch_fallback_runs_a_family_the_view_lacks(opt_dir, record_property):
    record_property("family", "opt")  # the coverage table (docs/families.md) reads the outcome
    record_property("oracle", "torch")
    res = _cli("generate", "--model", str(opt_dir), "--prompt", "Hello there", "--max-tokens", "6", "--json",
               "--temperature", "0")
    assert res.exit_code == 0, res.output
    assert "backend: transformers (torch)" in res.stderr and "'opt'" in res.stderr
    out = json.loads(res.stdout)
    assert out["backend"] == "torch" and len(out["tokens"]) > 0
    with load(opt_dir) as r:
        assert r.backend == "torch"
        ids = r.tokenize("Hello there")
        greedy = r.run(ids=ids, max_tokens=6, temperature=0).tokens
        assert greedy == out["tokens"]
        seq = list(ids)  # cached decoding equals recomputing the whole sequence each step
        for _ in range(len(greedy)):
            seq.append(int(r.logits(seq)[-1].argmax()))
        assert seq[len(ids):] == greedy
        a = r.run(ids=ids, max_tokens=6, temperature=1.0, seed=3).tokens
        assert a == r.run(ids=ids, max_tokens=6, temperature=1.0, seed=3).tokens


def test_backend_llama_cpp_refuses_uncovered_family(opt_dir):
    res = _cli("generate", "--model", str(opt_dir), "--prompt", "hi", "--backend", "llama.cpp")
    assert res.exit_code == 1
    assert "family 'opt' is not covered by hfview's view" in res.stderr

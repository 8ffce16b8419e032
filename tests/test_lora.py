"""PEFT LoRA adapters: the presented GGUF == the pinned convert_lora_to_gguf.py's file (sha256, f32/f16/bf16),
and llama.cpp with the adapter (loaded through a FILE*) == transformers + peft, NMSE < 1e-4."""
from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys

import numpy as np
import pytest
from click.testing import CliRunner

import oracle
from hfview.cli import main

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
peft = pytest.importorskip("peft")

from runner_oracle import nmse  # noqa: E402

PROMPT = "The quick brown fox jumps over the lazy dog. In 1969, 3 astronauts flew to the Moon."
TARGETS = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]
SEEDS = {"llama-spm": 1801, "qwen3": 1802}


def _cli(*args):
    return CliRunner().invoke(main, list(args))


def make_adapter(base, out, seed: int, **config) -> None:
    """A random rank-4 LoRA on every projection (init_lora_weights=False: B is not zero, so it matters)."""
    torch.manual_seed(seed)
    model = transformers.AutoModelForCausalLM.from_pretrained(str(base), dtype=torch.float32)
    cfg = peft.LoraConfig(**{"r": 4, "lora_alpha": 8, "target_modules": TARGETS, "init_lora_weights": False,
                             "task_type": "CAUSAL_LM", **config})
    peft.get_peft_model(model, cfg).save_pretrained(str(out))


@pytest.fixture(scope="session")
def adapter(checkpoint):
    """adapter(name) -> a PEFT adapter directory over fixture `name`, cached by base, seed and peft version."""
    made = {}

    def get(name):
        if name not in made:
            base = checkpoint(name)
            out = oracle.CACHE / "lora" / f"{name}-lora-{base.name.rsplit('-', 1)[-1]}-{SEEDS[name]}-peft{peft.__version__}"
            made[name] = oracle.made_once(out, lambda tmp: make_adapter(base, tmp, SEEDS[name]))
        return made[name]
    return get


def lora_converter():
    """convert_lora_to_gguf.py beside the converter oracle (tests/oracle.py unpacks only convert_hf_to_gguf.py's
    parts of the pinned sdist): taken from the same sdist on first use."""
    import tarfile

    root = oracle.converter_root()
    script = root / "convert_lora_to_gguf.py"
    if not script.is_file():
        sdist = sorted((oracle.CACHE / "sdist").glob(f"llama_cpp_python-{oracle.LLAMA_CPP_PYTHON}.tar.gz"))[0]
        member = f"llama_cpp_python-{oracle.LLAMA_CPP_PYTHON}/vendor/llama.cpp/convert_lora_to_gguf.py"
        with tarfile.open(sdist) as tar:
            data = tar.extractfile(member).read()
        tmp = script.with_name(script.name + f".{os.getpid()}.partial")
        tmp.write_bytes(data)
        tmp.rename(script)
    return root, script


def converted_lora(base, lora, outtype: str):
    """The pinned convert_lora_to_gguf.py's file for `lora` over `base`, cached by content."""
    h = hashlib.sha256()
    for d in (base, lora):
        for f in sorted(d.iterdir()):
            if f.is_file():
                h.update(f.name.encode() + oracle.sha256(f).encode())
    out = oracle.CACHE / "converted-lora" / f"{lora.name}-{h.hexdigest()[:16]}-{outtype}.gguf"

    def convert(tmp) -> None:
        root, script = lora_converter()
        proc = subprocess.run([sys.executable, str(script), "--base", str(base),
                               "--outtype", outtype, "--outfile", str(tmp), str(lora)], cwd=root,
                              env=oracle._converter_env(root), capture_output=True, text=True, stdin=subprocess.DEVNULL)
        if proc.returncode != 0:
            raise RuntimeError(f"convert_lora_to_gguf.py failed on {lora}:\n{proc.stderr[-3000:]}")

    return oracle.made_once(out, convert)


@pytest.mark.parametrize("outtype", ["f32", "f16", "bf16"])
@pytest.mark.parametrize("name", ["llama-spm", "qwen3"])
def test_export_lora_is_the_converters_file(checkpoint, adapter, tmp_path, name, outtype):
    base, lora = checkpoint(name), adapter(name)
    theirs = converted_lora(base, lora, outtype)
    out = tmp_path / "ours.gguf"
    res = _cli("export-lora", str(lora), str(out), "--base", str(base), "--outtype", outtype)
    assert res.exit_code == 0, res.output
    if oracle.sha256(out) != oracle.sha256(theirs):
        pytest.fail(f"{name} --outtype {outtype}: {oracle.first_difference(out, theirs)}")


def test_export_lora_finds_its_base_in_the_adapter_config(checkpoint, adapter, tmp_path):
    lora = adapter("llama-spm")
    assert json.loads((lora / "adapter_config.json").read_text())["base_model_name_or_path"] == \
        str(checkpoint("llama-spm"))
    res = _cli("export-lora", str(lora), str(tmp_path / "a.gguf"))
    assert res.exit_code == 0, res.output
    assert oracle.sha256(tmp_path / "a.gguf") == oracle.sha256(converted_lora(checkpoint("llama-spm"), lora, "f32"))


@pytest.mark.parametrize("name", ["llama-spm", "qwen3"])
def test_lora_logits_match_peft(checkpoint, adapter, name):
    """Scale 1 and 0.5 (PeftModel's scaling times 0.5 on every LoRA layer) against transformers + peft."""
    from hfview.runner.api import load

    base, lora = checkpoint(name), adapter(name)
    model = transformers.AutoModelForCausalLM.from_pretrained(str(base), dtype=torch.float32)
    pm = peft.PeftModel.from_pretrained(model, str(lora)).eval()
    with load(base, precision="f32", kv_cache="f32") as r:
        ids = r.tokenize(PROMPT)
        plain = r.logits(ids)
    for scale in (1.0, 0.5):
        for module in pm.modules():
            if isinstance(module, peft.tuners.lora.LoraLayer):
                module.scaling = {k: 8 / 4 * scale for k in module.scaling}
        with torch.no_grad():
            ref = pm(torch.tensor([ids])).logits[0].numpy()
        with load(base, precision="f32", kv_cache="f32", lora=[f"{lora}:{scale}"]) as r:
            assert any(n.startswith("LoRA:") for n in r.notes)
            ours = r.logits(ids)
        value = nmse(ours, ref)
        print(f"{name} scale {scale}: NMSE {value:.3e}; without the adapter {nmse(plain, ref):.3e}")
        assert value < 1e-4
        assert nmse(plain, ref) > 1e-2  # the adapter really changes the logits


def test_adapter_is_read_as_the_model_is_on_both_data_paths(checkpoint, adapter, monkeypatch):
    """With the model from a memory file, the adapter's GGUF goes through one too (llama_adapter_lora_init by path);
    through a FILE*, neither does: the same logits either way."""
    from hfview import memfile
    from hfview.runner.api import load

    if not memfile.supported():
        pytest.skip("no memfd on this system")
    fill, filled = memfile.fill, []

    def counted(source, **kwargs):
        filled.append(type(source).__name__)
        return fill(source, **kwargs)

    monkeypatch.setattr(memfile, "fill", counted)
    base, lora = checkpoint("llama-spm"), adapter("llama-spm")
    got = {}
    for path in ("memfd", "stream"):
        filled.clear()
        with load(base, precision="f32", kv_cache="f32", lora=[str(lora)], data_path=path) as r:
            assert r.data_path == path
            got[path] = r.logits(r.tokenize(PROMPT))
        assert filled == (["HfCheckpoint", "LoraFile"] if path == "memfd" else []), filled
    assert np.array_equal(got["memfd"], got["stream"])


def test_generate_lora_greedy_follows_peft(checkpoint, adapter):
    from hfview.runner.api import load

    base, lora = checkpoint("qwen3"), adapter("qwen3")
    res = _cli("generate", "--model", str(base), "--prompt", PROMPT, "--no-chat", "--temperature", "0",
               "--max-tokens", "5", "--precision", "f32", "--kv-cache", "f32", "--lora", str(lora), "--json")
    assert res.exit_code == 0, res.output
    tokens = json.loads(res.stdout)["tokens"]
    with load(base, precision="f32") as r:
        ids = r.tokenize(PROMPT, add_special=True, parse_special=True)
    model = transformers.AutoModelForCausalLM.from_pretrained(str(base), dtype=torch.float32)
    pm = peft.PeftModel.from_pretrained(model, str(lora)).eval()
    seq = list(ids)
    with torch.no_grad():
        for _ in range(len(tokens)):
            seq.append(int(pm(torch.tensor([seq])).logits[0, -1].argmax()))
    assert tokens == seq[len(ids):] and tokens


def test_capture_sees_the_adapter(checkpoint, adapter):
    """The capture context carries the runner's adapter: layer 0's stream differs from the base model's."""
    from hfview.runner.api import load
    from hfview.runner.capture import capture

    base, lora = checkpoint("llama-spm"), adapter("llama-spm")
    with load(base, precision="f32", kv_cache="f32") as r:
        ids = r.tokenize(PROMPT)
        plain = capture(r, ids, [0])[0]
    with load(base, precision="f32", kv_cache="f32", lora=[str(lora)]) as r:
        with_lora = capture(r, ids, [0])[0]
    model = transformers.AutoModelForCausalLM.from_pretrained(str(base), dtype=torch.float32)
    pm = peft.PeftModel.from_pretrained(model, str(lora)).eval()
    with torch.no_grad():
        ref = pm(torch.tensor([ids]), output_hidden_states=True).hidden_states[1][0].numpy()
    assert nmse(with_lora, ref) < 1e-4 and nmse(plain, ref) > 1e-3


# ---------------------------------------------------------------------------------------------- refusals
def _refused(res, *needles):
    assert res.exit_code == 1, res.output
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in res.output, res.output
    for needle in needles:
        assert needle in lines[0], lines[0]


def _edited(lora, tmp_path, **changes):
    import shutil
    out = tmp_path / "edited"
    shutil.copytree(lora, out)
    cfg = json.loads((out / "adapter_config.json").read_text())
    cfg.update(changes)
    (out / "adapter_config.json").write_text(json.dumps(cfg))
    return out


@pytest.mark.parametrize("change, needle", [
    (dict(use_dora=True), "use_dora = true: DoRA"),
    (dict(use_rslora=True), "use_rslora = true: rsLoRA scales by alpha / sqrt(r)"),
    (dict(alpha_pattern={"q_proj": 16}), "alpha_pattern"),
    (dict(peft_type="IA3"), "peft_type 'IA3'"),
])
def test_refuses_what_llama_cpp_cannot_apply(checkpoint, adapter, tmp_path, change, needle):
    lora = _edited(adapter("llama-spm"), tmp_path, **change)
    _refused(_cli("generate", "--model", str(checkpoint("llama-spm")), "--prompt", "hi", "--lora", str(lora)),
             needle, "adapter_config.json")


def test_refuses_full_embedding_weights_by_name(checkpoint, tmp_path):
    """modules_to_save=["embed_tokens"] (what a resized vocabulary brings) stores full weights, not a LoRA pair:
    refused naming the tensor, as the converter refuses it."""
    base = checkpoint("llama-spm")
    make_adapter(base, tmp_path / "emb", 7, modules_to_save=["embed_tokens"])
    _refused(_cli("export-lora", str(tmp_path / "emb"), str(tmp_path / "x.gguf"), "--base", str(base)),
             "embed_tokens", "not a lora_A / lora_B weight", "resized vocabulary")
    assert not (tmp_path / "x.gguf").exists()


def test_refuses_an_embedding_lora_by_name(checkpoint, tmp_path):
    base = checkpoint("llama-spm")
    make_adapter(base, tmp_path / "emb", 8, target_modules=["embed_tokens", "q_proj"])
    _refused(_cli("generate", "--model", str(base), "--prompt", "hi", "--lora", str(tmp_path / "emb")),
             "lora_embedding", "token embeddings")


def test_refuses_an_adapter_for_another_model(checkpoint, adapter):
    _refused(_cli("generate", "--model", str(checkpoint("llama-spm")), "--prompt", "hi", "--lora",
                  str(adapter("qwen3"))), "does not make the base tensor's shape")


def test_refuses_a_directory_without_an_adapter(checkpoint, tmp_path):
    _refused(_cli("generate", "--model", str(checkpoint("llama-spm")), "--prompt", "hi", "--lora", str(tmp_path)),
             "no adapter_config.json")


def test_lora_spec():
    from pathlib import Path

    from hfview.runner.lora import parse_lora

    assert parse_lora("a/b:0.25").scale == 0.25 and parse_lora("a/b").scale == 1.0
    assert parse_lora("c:/x").path == Path("c:/x")


@pytest.mark.parametrize("scales", [[0.7], [0.5, -0.25]])
def test_parity_with_adapters(checkpoint, adapter, scales):
    """hfview parity --lora (once, and twice: two adapters active at once, each scaled): llama.cpp with the
    adapters vs transformers + peft, through the parity command."""
    lora = adapter("qwen3")
    args = [a for s in scales for a in ("--lora", f"{lora}:{s}")]
    res = _cli("parity", "--model", str(checkpoint("qwen3")), *args, "--json")
    assert res.exit_code == 0, res.output
    rep = json.loads(res.stdout)
    assert rep["passed"] and rep["nmse"] < 1e-4 and rep["reference"].startswith("transformers + peft")


def _peft_logits(base, lora, ids):
    model = transformers.AutoModelForCausalLM.from_pretrained(str(base), dtype=torch.float32)
    pm = peft.PeftModel.from_pretrained(model, str(lora)).eval()
    with torch.no_grad():
        return pm(torch.tensor([ids])).logits[0].numpy()


def test_llama_object_and_server_take_an_adapter(checkpoint, adapter):
    """runner.llama(..., lora=[...]) and the server's Llama (create_app(lora=...)): logits == transformers + peft."""
    pytest.importorskip("fastapi")
    from hfview import runner
    from hfview.runner.serve import create_app

    base, lora = checkpoint("llama-spm"), adapter("llama-spm")
    llm = runner.llama(str(base), precision="f32", lora=[str(lora)], logits_all=True, n_ctx=128)
    try:
        ids = llm.tokenize(PROMPT.encode())
        llm.eval(ids)
        ours = np.array(llm.scores[:len(ids)], dtype=np.float32)
    finally:
        llm.close()
    ref = _peft_logits(base, lora, ids)
    assert nmse(ours, ref) < 1e-4
    notes = []
    app, proxy = create_app(str(base), precision="f32", n_ctx=128, lora=[f"{lora}:1"], notes=notes)
    try:
        served = proxy()
        served.reset()
        served.eval(ids)
        assert nmse(np.array(served.scores[:len(ids)], dtype=np.float32), ref) < 1e-4
        assert any(n.startswith("LoRA:") for n in notes)
    finally:
        proxy.free()


@pytest.mark.parametrize("quant", ["Q4_K_M", "Q8_0"])
def test_quantized_view_with_an_adapter_is_the_quantized_file_with_the_converted_adapter(
        checkpoint, adapter, quantized, quant):
    """--quant with --lora: llama.cpp over the quantized view and the presented adapter computes what it computes
    over llama_model_quantize's file of the converter's output and convert_lora_to_gguf.py's adapter file — the
    same logits, bit for bit, and not the logits without the adapter."""
    import llama_cpp.llama_cpp as ll

    from hfview.quant import FILE_TYPES
    from hfview.runner.api import load
    from hfview.runner.stream import StreamModel, load_model_from_path

    base, lora = checkpoint("llama-spm"), adapter("llama-spm")
    with load(base, precision="f32", quant=quant, kv_cache="f32", lora=[str(lora)], n_ctx=64) as r:
        ids = r.tokenize(PROMPT)
        ours = r.logits(ids)
    lm = load_model_from_path(quantized("llama-spm", "f32", FILE_TYPES[quant][0]))
    handle = ll.llama_adapter_lora_init(lm.ptr, str(converted_lora(base, lora, "f32")).encode())  # llama.cpp reads it
    assert handle
    with StreamModel(lm, n_ctx=64, kv_cache="f32") as m:
        plain = m.logits(ids)
        m.set_lora([handle], [1.0])
        theirs = m.logits(ids)
    assert np.array_equal(ours, theirs)
    assert nmse(plain, theirs) > 1e-2  # the adapter really changes the logits


def test_runtime_gets_each_adapter_as_a_memory_file(checkpoint, adapter, tmp_path):
    """hfview serve --runtime: a stand-in llama-server (tests/test_serve.py) gets the adapter's GGUF as an inherited
    memory file with its scale, byte for byte the file export-lora writes."""
    from hfview import HfCheckpoint, memfile
    from hfview.runner.lora import LoraFile
    from test_serve import run_runtime

    if not memfile.supported():
        pytest.skip("no memfd on this system")
    base, lora = checkpoint("llama-spm"), adapter("llama-spm")
    code, output, got = run_runtime(tmp_path, "--model", str(base), "--lora", f"{lora}:0.5")
    assert code == 0, output
    want = hashlib.sha256(LoraFile(lora, HfCheckpoint(base, "f32"), "f32").bytes).hexdigest()
    assert got["lora"] == [[want, "0.5"]]

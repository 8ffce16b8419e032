"""runner.llama: a real llama_cpp.Llama over the view, tested through llama_cpp's own API.

Not through LangChain or llama-index: langchain-community 0.4 needs langchain-core 1.8, which needs
certifi >= 2026.10.19 and orjson >= 3.9.14 where this environment pins older ones (pip's resolver finds
no older langchain that fits); llama-index's llama.cpp integration pulls llama-index-core likewise.
Both only build a Llama from a path, which ``from_view`` covers (test_a_tool_building_its_own_llama).
"""
from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
import time
from contextlib import closing, contextmanager
from pathlib import Path

import llama_cpp
import llama_cpp._internals as internals
import numpy as np
import pytest

from hfview import runner
from hfview import HfCheckpoint
from hfview.errors import HfviewError
from hfview.runner.api import load
from hfview.runner.chat import ChatTemplateError
from hfview.runner.llama_object import from_view

N_CTX = 256  # a multiple of 256: llama.cpp pads the context to one
MESSAGES = [{"role": "system", "content": "Answer briefly."}, {"role": "user", "content": "Name a colour."}]


@pytest.fixture(scope="module")
def llama3(checkpoint):
    return checkpoint("llama3-bpe")


@pytest.fixture(scope="module")
def llm(llama3):
    # flash_attn: llama_cpp.Llama turns it off by default; llama.cpp's own default (auto, hence
    # hfview generate's) turns it on for the CPU, and the logits then differ by ~1e-2 on this fixture.
    # the memory file, whatever HFVIEW_DATA_PATH a run forces (test_the_stream_seam_where_asked takes the other path)
    with pytest.MonkeyPatch.context() as mp:
        mp.delenv("HFVIEW_DATA_PATH", raising=False)
        llm = runner.llama(llama3, n_ctx=N_CTX, logits_all=True, seed=0, flash_attn=True)
    with closing(llm):
        yield llm


@pytest.fixture(scope="module")
def ref(llama3):
    """The same view run by runner.load (hfview generate's path): the reference for every comparison."""
    with load(llama3, n_ctx=N_CTX) as r:
        yield r


def test_is_a_llama_over_the_checkpoint_with_no_file_written(llama3, llm):
    from hfview import memfile

    assert type(llm) is llama_cpp.Llama
    if memfile.supported():  # a plain Llama over the memory file holding the view, with llama_cpp's own model
        assert llm.hfview_data_path == "memfd" and type(llm._model) is internals.LlamaModel
        assert os.readlink(llm.model_path).startswith(f"/memfd:hfview:{llama3.name}")
    else:
        assert llm.hfview_data_path == "stream" and llm.model_path == str(llama3)
    assert not [p for p in llama3.rglob("*") if p.suffix == ".gguf" or p.name.endswith(".partial")]
    assert llm.metadata["general.architecture"] == "llama"
    assert llm.n_ctx() == N_CTX


def test_the_stream_seam_where_asked(llama3, ref, monkeypatch):
    """HFVIEW_DATA_PATH=stream (as where there are no memory files): the Llama's model is read through the FILE*
    seam, from the checkpoint's path, with the same logits."""
    monkeypatch.setenv("HFVIEW_DATA_PATH", "stream")
    with closing(runner.llama(llama3, n_ctx=N_CTX, logits_all=True, flash_attn=True)) as llm:
        assert llm.hfview_data_path == "stream" and llm.model_path == str(llama3)
        assert type(llm._model) is not internals.LlamaModel
        ids = ref.tokenize("The capital of France is")
        llm.eval(ids)
        np.testing.assert_allclose(np.asarray(llm.eval_logits, dtype=np.float32), ref.logits(ids), rtol=0, atol=1e-4)


def test_the_familys_load_time_kv_reaches_the_llama(checkpoint, monkeypatch):
    """Qwen-1's view loads only with its RMS epsilon as a load-time override (HfCheckpoint.load_kv): a plain Llama
    over the memory file gets it as kv_overrides, and its logits are runner.load's."""
    monkeypatch.delenv("HFVIEW_DATA_PATH", raising=False)
    qwen = checkpoint("qwen")
    with load(qwen, precision="f32", n_ctx=64) as r, \
            closing(runner.llama(qwen, precision="f32", n_ctx=64, logits_all=True, flash_attn=True)) as llm:
        assert HfCheckpoint(qwen).load_kv and llm.kv_overrides == HfCheckpoint(qwen).load_kv
        ids = r.tokenize("The capital of France is")
        llm.eval(ids)
        np.testing.assert_allclose(np.asarray(llm.eval_logits, dtype=np.float32), r.logits(ids), rtol=0, atol=1e-4)


def test_memory_file_closes_with_the_llama(llama3, monkeypatch):
    from hfview import memfile

    monkeypatch.delenv("HFVIEW_DATA_PATH", raising=False)
    if not memfile.supported():
        pytest.skip("no memfd on this system")
    llm = runner.llama(llama3, n_ctx=32)
    fd = int(Path(llm.model_path).name)
    os.fstat(fd)
    llm.close()
    del llm
    import gc
    gc.collect()
    with pytest.raises(OSError):
        os.fstat(fd)


def test_logits_are_the_views(llm, ref):
    ids = ref.tokenize("The capital of France is")
    llm.reset()
    llm.eval(ids)
    ours = np.asarray(llm.eval_logits, dtype=np.float32)
    np.testing.assert_allclose(ours, ref.logits(ids), rtol=0, atol=1e-4)


def test_logits_equal_a_llama_over_the_converted_file(llama3, tmp_path):
    """With llama_cpp.Llama's own defaults, the view and the exported GGUF (byte-identical to the
    converter's, test_cli) give the same logits, to the bit."""
    from hfview.export import export

    gguf = export(HfCheckpoint(llama3, "auto"), tmp_path / "llama3.gguf")
    ids = [128000, 791, 6864, 315, 9822, 374]
    rows = []
    for make in (lambda: runner.llama(llama3, n_ctx=N_CTX, logits_all=True),
                 lambda: llama_cpp.Llama(str(gguf), n_ctx=N_CTX, logits_all=True, verbose=False)):
        with closing(make()) as llm:
            llm.eval(ids)
            rows.append(np.asarray(llm.eval_logits, dtype=np.float32))
    np.testing.assert_array_equal(rows[0], rows[1])


def test_tokenize_detokenize(llm, ref):
    text = "Hello world, ünïcödé and <|eot_id|> text"
    ids = llm.tokenize(text.encode(), add_bos=True, special=True)
    assert ids == ref.tokenize(text, add_special=True, parse_special=True)
    assert llm.detokenize(ids[1:], special=True).decode() == text  # without the BOS


def test_greedy_completion_equals_generate(llm, ref):
    gen = ref.run("Once upon a time", chat=False, max_tokens=12, temperature=0, repeat_penalty=1.0)
    ids = llm.tokenize(b"Once upon a time")
    tokens = []
    for token in llm.generate(ids, temp=0, repeat_penalty=1.0, reset=True):  # bounded: breaks at 12
        tokens.append(token)
        if len(tokens) == len(gen.tokens):
            break
    assert len(gen.tokens) == 12 and tokens == gen.tokens
    # The text of the first 8 (whole characters: at 12 the last token ends mid-character, where
    # create_completion's UTF-8 handling and generate's differ by design)
    out = llm.create_completion("Once upon a time", max_tokens=8, temperature=0, repeat_penalty=1.0)
    assert out["choices"][0]["text"] == ref.run(ids=ids, max_tokens=8, temperature=0, repeat_penalty=1.0).text
    assert out["usage"]["completion_tokens"] == 8


def test_chat_uses_the_models_template_as_generate_does(llm, ref):
    out = llm.create_chat_completion(MESSAGES, max_tokens=6, temperature=0, repeat_penalty=1.0)
    n_prompt = out["usage"]["prompt_tokens"]
    expected = ref.prompt_ids("Name a colour.", system="Answer briefly.", chat=True)
    assert list(llm.eval_tokens)[:n_prompt] == expected  # exactly the ids hfview generate feeds
    assert expected[0] == llm.token_bos() and expected[1] != llm.token_bos()  # the template's BOS, once
    gen = ref.run(ids=expected, max_tokens=6, temperature=0, repeat_penalty=1.0)
    assert out["choices"][0]["message"] == {"role": "assistant", "content": gen.text}


def test_streamed_chat_equals_unstreamed(llm):
    kw = dict(max_tokens=8, temperature=0, repeat_penalty=1.0)
    whole = llm.create_chat_completion(MESSAGES, **kw)["choices"][0]["message"]["content"]
    chunks = list(llm.create_chat_completion(MESSAGES, stream=True, **kw))
    assert len(chunks) >= 3
    streamed = "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks)
    assert streamed == whole
    assert chunks[-1]["choices"][0]["finish_reason"] in ("length", "stop")


def test_logprobs_are_the_views_log_softmax(llm, ref):
    prompt = "The capital of France is"
    out = llm.create_completion(prompt, max_tokens=1, temperature=0, logprobs=3)
    lp = out["choices"][0]["logprobs"]
    row = ref.logits(ref.tokenize(prompt))[-1].astype(np.float64)
    log_softmax = row - row.max() - np.log(np.exp(row - row.max()).sum())
    first = int(np.argmax(row))
    assert lp["tokens"][0] == ref.piece(first).decode()
    assert lp["token_logprobs"][0] == pytest.approx(log_softmax[first], abs=1e-3)
    assert len(lp["top_logprobs"][0]) >= 3


def test_seed_and_reset(llm):
    kw = dict(max_tokens=8, temperature=1.0, top_k=0, top_p=1.0, min_p=0.0)
    first = llm.create_completion("Once upon a time", seed=5, **kw)["choices"][0]["text"]
    llm.reset()
    assert llm.n_tokens == 0
    again = llm.create_completion("Once upon a time", seed=5, **kw)["choices"][0]["text"]
    other = {llm.create_completion("Once upon a time", seed=s, **kw)["choices"][0]["text"] for s in (6, 7, 8)}
    assert first == again
    assert other - {first}  # the seed matters at temperature 1


def test_no_template_refuses_chat_and_a_chat_format_can_be_named():
    path = runner.api.default_model_path()  # the embedded model has no chat template
    with closing(runner.llama(path, n_ctx=64)) as llm:
        with pytest.raises(ChatTemplateError, match="no chat template.*create_completion"):
            llm.create_chat_completion([{"role": "user", "content": "hi"}], max_tokens=2)
        assert llm.create_completion("Once upon a time", max_tokens=3)["usage"]["completion_tokens"] >= 1
    with closing(runner.llama(path, n_ctx=64, chat_format="chatml")) as llm:
        out = llm.create_chat_completion([{"role": "user", "content": "hi"}], max_tokens=2)
        assert out["usage"]["prompt_tokens"] > 3


def test_close_frees_the_model_once(llama3):
    llm = runner.llama(llama3, n_ctx=32)
    model = llm._model  # llama_cpp keeps no public handle on it; closing is observable only here
    assert model.model is not None
    llm.close()
    assert model.model is None
    llm.close()  # a second close is harmless


def test_a_tool_building_its_own_llama(llama3, ref, tmp_path):
    """Inside from_view, a Llama built from the checkpoint's path (as LangChain's LlamaCpp builds one) runs
    the view; a Llama from any other path (a GGUF file) loads as llama_cpp always does."""
    from hfview.export import export

    spm = HfCheckpoint(runner.api.default_model_path(), "f32")
    gguf = export(spm, tmp_path / "default.gguf")
    original = internals.LlamaModel
    with from_view(llama3, HfCheckpoint(llama3, "auto")) as path:
        with closing(llama_cpp.Llama(path, n_ctx=32, verbose=False)) as viewed, \
                closing(llama_cpp.Llama(str(gguf), n_ctx=32, verbose=False)) as from_file:
            assert viewed.n_vocab() == ref.n_vocab
            assert type(from_file._model) is original and type(viewed._model) is not original
            assert from_file.n_vocab() == 2000
    assert internals.LlamaModel is original


def test_a_ready_gguf_loads_with_the_views_repack_setting(tmp_path):
    """A directory holding a ready GGUF beside its config: llama.cpp loads the file itself, with weight repacking
    as runner.stream sets it for every model (off where ggml's AMX matmul would take the weights: it segfaults on
    some, llama.cpp #20824), and llama_cpp's loader is put back afterwards."""
    import shutil

    from hfview.export import export
    from hfview.runner.stream import cpu_repack_is_safe

    src = runner.api.default_model_path()
    d = tmp_path / "ready"
    d.mkdir()
    for f in src.iterdir():
        if f.is_file() and not f.name.endswith(".safetensors"):
            shutil.copyfile(f, d / f.name)
    export(HfCheckpoint(src, "f32"), d / "default.gguf")
    original = internals.LlamaModel
    with closing(runner.llama(d, n_ctx=32)) as llm:
        assert type(llm._model) is original
        assert llm.model_params.use_extra_bufts == cpu_repack_is_safe()
        assert llm.n_vocab() == 2000
    assert internals.LlamaModel is original


def test_from_view_nests(llama3):
    with from_view(llama3, HfCheckpoint(llama3, "auto")):
        with closing(runner.llama(llama3, n_ctx=32)) as llm:  # its own from_view inside: no deadlock
            assert llm.n_vocab() > 0


def test_a_failed_load_puts_llama_cpp_back(llama3):
    class Truncated:  # a byte source that ends before its declared size
        def __init__(self, view):
            self.size, self._view = view.size, view

        def read(self, offset, n):
            return self._view.read(offset, n) if offset < 4096 else b""

    original = internals.LlamaModel
    with pytest.raises(HfviewError, match="truncated"):
        with from_view(llama3, Truncated(HfCheckpoint(llama3, "auto"))) as path:
            llama_cpp.Llama(path, n_ctx=32, verbose=False)
    assert internals.LlamaModel is original


def test_bad_precision_is_refused_in_one_line(llama3):
    with pytest.raises(HfviewError, match="precision 'q3'"):
        runner.llama(llama3, precision="q3")


# ----------------------------------------------------------------------------------------------- RPC

def test_rpc_refusals_name_what_to_do():
    with pytest.raises(HfviewError, match="give HOST:PORT"):
        runner.llama(None, rpc=["no-port"])
    if not llama_cpp.llama_supports_rpc():
        with pytest.raises(HfviewError, match="built without llama.cpp's RPC backend.*-DGGML_RPC=ON"):
            runner.llama(None, rpc=["127.0.0.1:9"])
    else:
        with pytest.raises(HfviewError, match="no rpc-server answered"):
            runner.llama(None, rpc=["127.0.0.1:9"])  # the discard port: nobody serves RPC there


RPC_SCRIPT = r"""
import sys, numpy as np, llama_cpp, runner
import os
import re
import socket
import subprocess
import sys
import time
from contextlib import closing
from pathlib import Path
path, a, b = sys.argv[1:4]
assert llama_cpp.llama_supports_rpc()
ids = [128000, 791, 6864, 315, 9822, 374]
rows = []
for rpc in (None, [a, b]):  # the CPU alone, then every layer over the two rpc-servers
    with closing(runner.llama(path, n_ctx=256, logits_all=True, rpc=rpc, verbose=rpc is not None)) as llm:
        llm.eval(ids)
        rows.append(np.asarray(llm.eval_logits, dtype=np.float32))
print("MAXDIFF", float(np.abs(rows[0] - rows[1]).max()), flush=True)
"""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def rpc_build() -> Path:
    """HFVIEW_RPC_BUILD: a build folder of the pinned sdist made with -DGGML_RPC=ON (its libllama, libggml*
    and ggml-rpc-server; docs/serving.md); the test is skipped without one."""
    build = os.environ.get("HFVIEW_RPC_BUILD")
    if not build or not (Path(build) / "ggml-rpc-server").is_file():
        pytest.skip("no RPC build: set HFVIEW_RPC_BUILD to a -DGGML_RPC=ON build of the pinned sdist (docs/serving.md)")
    return Path(build)


@contextmanager
def rpc_servers(build: Path, log_dir: Path, n: int = 2):
    """n ggml-rpc-server processes on 127.0.0.1, each on a free port; yields [("HOST:PORT", its log file)].
    GGML_RPC_DEBUG: each logs the commands it serves ([set_tensor] for weights, [graph_compute])."""
    servers, endpoints = [], []
    try:
        for i in range(n):
            port = _free_port()
            log = log_dir / f"rpc-server-{i}.log"
            with open(log, "w") as f:
                servers.append(subprocess.Popen(
                    [str(build / "ggml-rpc-server"), "-H", "127.0.0.1", "-p", str(port)],
                    env={**os.environ, "LD_LIBRARY_PATH": str(build), "GGML_RPC_DEBUG": "1"},
                    stdout=f, stderr=subprocess.STDOUT))
            endpoints.append((f"127.0.0.1:{port}", log))
            deadline = time.monotonic() + 30
            while True:  # until it listens
                try:
                    socket.create_connection(("127.0.0.1", port), timeout=1).close()
                    break
                except OSError:
                    assert time.monotonic() < deadline, f"ggml-rpc-server on {port} did not start"
                    time.sleep(0.2)
        yield endpoints
    finally:
        for server in servers:
            server.terminate()
            server.wait(10)


def served_by_each(servers) -> bool:
    """Each rpc-server received weights and computed part of a graph."""
    logs = [log.read_text() for _ep, log in servers]
    return all("[set_tensor]" in text and "[graph_compute]" in text for text in logs)


def test_rpc_splits_the_layers_over_two_servers_on_localhost(llama3, tmp_path):
    """The model's weights split over two rpc-servers on 127.0.0.1 give the CPU's logits. llama_cpp loads
    the RPC build's libraries (LLAMA_CPP_LIB_PATH), in a subprocess."""
    build = rpc_build()
    with rpc_servers(build, tmp_path) as servers:
        endpoints = [ep for ep, _log in servers]
        run = subprocess.run([sys.executable, "-c", RPC_SCRIPT, str(llama3), *endpoints],
                             env={**os.environ, "LLAMA_CPP_LIB_PATH": str(build)},
                             capture_output=True, text=True, timeout=300)
        assert run.returncode == 0, run.stderr[-3000:]
        assert served_by_each(servers)
    log = run.stderr
    for ep in endpoints:  # each server holds part of the weights ("RPC0[127.0.0.1:PORT] model buffer size")
        assert re.search(rf"\[{re.escape(ep)}\] model buffer size", log), log[-3000:]
    print("\n".join(line for line in log.splitlines() if "model buffer size" in line or "offloaded" in line))
    maxdiff = float(run.stdout.split("MAXDIFF")[1])
    print(f"RPC over 2 servers vs the CPU alone: max |logit difference| {maxdiff:.2e}")
    assert maxdiff < 1e-3, maxdiff

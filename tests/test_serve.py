"""hfview serve: llama-cpp-python's server over the view, driven by the official openai client.

Every server is started here on 127.0.0.1 (port 0: the kernel picks a free one, the log line says which)
and every request goes there; each loop that waits has a deadline.
"""
from __future__ import annotations

import hashlib
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from contextlib import closing

import openai
import pytest
from click.testing import CliRunner

from hfview import runner
from hfview.cli import main

KEY = "test-key-7f3a"
N_CTX = 256
HELLO = [{"role": "user", "content": "Say hello."}]
STARTUP_S = 180  # loading the view and starting uvicorn, on a busy 2-core machine


class Server:
    """`hfview serve` in a subprocess; its stderr and stdout are collected by threads (so pipes never fill)."""

    def __init__(self, model, *args: str, env: dict | None = None):
        cmd = [sys.executable, "-m", "hfview.cli", "serve", "--model", str(model), "--port", "0",
               "--n-ctx", str(N_CTX), *args]
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                     env={**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})})
        self.err: list[str] = []
        self.out: list[str] = []
        self.ready = threading.Event()
        self.port = None
        threading.Thread(target=self._drain, args=(self.proc.stderr, self.err, True), daemon=True).start()
        threading.Thread(target=self._drain, args=(self.proc.stdout, self.out, False), daemon=True).start()
        if not self.ready.wait(STARTUP_S) or self.port is None:
            self.stop()
            raise AssertionError(f"the server did not start within {STARTUP_S} s:\n{self.log}")

    def _drain(self, stream, lines, watch):
        for line in stream:
            lines.append(line)
            m = re.search(r"Uvicorn running on http://(\S+):(\d+)", line) if watch else None
            if m:
                self.host, self.port = m.group(1), int(m.group(2))
                self.ready.set()
        if watch:
            self.ready.set()  # the process ended before it was ready

    @property
    def log(self) -> str:
        return "".join(self.err) + "".join(self.out)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def client(self, api_key: str = KEY) -> openai.OpenAI:
        # trust_env=False: straight to 127.0.0.1, whatever proxy the environment names
        return openai.OpenAI(base_url=f"{self.url}/v1", api_key=api_key, max_retries=0, timeout=120,
                             http_client=openai.DefaultHttpxClient(trust_env=False))

    def stop(self, timeout: float = 30) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        return self.proc.returncode


def _get(url: str, headers: dict | None = None) -> tuple[int, dict]:
    req = urllib.request.Request(url, headers=headers or {})
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # no proxy: 127.0.0.1 only
    try:
        with opener.open(req, timeout=30) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


@pytest.fixture(scope="module")
def llama3(checkpoint):
    return checkpoint("llama3-bpe")


@pytest.fixture(scope="module")
def server(llama3):
    s = Server(llama3, "--api-key", KEY)  # no --host: the default binding is under test too
    yield s
    s.stop()


@pytest.fixture(scope="module")
def client(server):
    return server.client()


@pytest.fixture(scope="module")
def reference(llama3):
    """The Llama the server runs, built in this process with the server's settings."""
    with closing(runner.llama(llama3, n_ctx=N_CTX, logits_all=True, n_batch=N_CTX)) as llm:
        yield llm


def _alive(client) -> None:
    out = client.completions.create(model="m", prompt="Once", max_tokens=2, temperature=0)
    assert out.usage.completion_tokens >= 1


# ----------------------------------------------------------------------------------------------- basics

def test_binds_localhost_by_default_and_health(server):
    assert server.host == "127.0.0.1"
    assert _get(f"{server.url}/health") == (200, {"status": "ok"})


def test_models(client, llama3):
    models = client.models.list().data
    assert [m.id for m in models] == [str(llama3)]


def test_chat_is_the_llamas_answer(client, reference):
    out = client.chat.completions.create(model="m", messages=HELLO, max_tokens=8, temperature=0)
    ref = reference.create_chat_completion(HELLO, max_tokens=8, temperature=0)
    assert out.choices[0].message.role == "assistant"
    assert out.choices[0].message.content == ref["choices"][0]["message"]["content"]
    assert out.usage.prompt_tokens == ref["usage"]["prompt_tokens"]
    assert out.usage.completion_tokens == 8 and out.choices[0].finish_reason == "length"


def test_streamed_chat_is_server_sent_events(client):
    whole = client.chat.completions.create(model="m", messages=HELLO, max_tokens=8, temperature=0)
    chunks = list(client.chat.completions.create(model="m", messages=HELLO, max_tokens=8, temperature=0,
                                                 stream=True))
    assert len(chunks) >= 8
    assert "".join(c.choices[0].delta.content or "" for c in chunks) == whole.choices[0].message.content
    assert chunks[-1].choices[0].finish_reason == "length"


def test_completion_stop_and_logprobs(client):
    # 8: llama-cpp-python runs past max_tokens while the text ends mid-character (here at 12, 14 came back)
    free = client.completions.create(model="m", prompt="Once upon a time", max_tokens=8, temperature=0,
                                     logprobs=2)
    text = free.choices[0].text
    assert len(free.choices[0].logprobs.tokens) == 8
    assert all(len(top) >= 2 for top in free.choices[0].logprobs.top_logprobs)
    stop = text[len(text) // 2:][:3]  # a string the unstopped text contains past its start
    assert stop.strip() and stop in text[1:]
    stopped = client.completions.create(model="m", prompt="Once upon a time", max_tokens=8, temperature=0,
                                        stop=[stop])
    assert stopped.choices[0].finish_reason == "stop"
    assert stopped.choices[0].text == text[:text.index(stop)]


def test_chat_logprobs(client):
    out = client.chat.completions.create(model="m", messages=HELLO, max_tokens=3, temperature=0, logprobs=True,
                                         top_logprobs=2)
    content = out.choices[0].logprobs.content
    assert len(content) == 3 and all(c.logprob <= 0 and len(c.top_logprobs) >= 2 for c in content)


def test_seed_temperature_top_p(client):
    def text(**kw):
        return client.completions.create(model="m", prompt="Once upon a time", max_tokens=10, **kw).choices[0].text

    kw = dict(temperature=1.0, top_p=1.0)
    assert text(seed=11, **kw) == text(seed=11, **kw)
    assert len({text(seed=s, **kw) for s in (11, 12, 13)}) > 1
    # top_p this small leaves only the most likely token: greedy whatever the seed
    assert text(seed=3, temperature=1.0, top_p=1e-6) == text(temperature=0) == text(seed=4, temperature=1.0,
                                                                                     top_p=1e-6)


def test_left_out_sampling_values_are_the_models(client, server):
    """llama3-bpe's generation_config.json says temperature 0.6, top_p 0.9: a request that leaves them out
    samples as one that states them (same seed), not with llama-cpp-python's request defaults (0.8, 0.95)."""
    assert "temperature 0.6, top_k 40, top_p 0.9" in server.log

    def texts(**kw):
        return [client.completions.create(model="m", prompt="Once upon a time", max_tokens=12, seed=s,
                                          **kw).choices[0].text for s in range(4)]

    left_out = texts()
    llama_only = dict(top_k=40, min_p=0.05)  # llama.cpp's fields, beyond OpenAI's: the client's extra_body
    assert left_out == texts(temperature=0.6, top_p=0.9, extra_body={**llama_only, "repeat_penalty": 1.0})
    assert left_out != texts(temperature=0.8, top_p=0.95, extra_body={**llama_only, "repeat_penalty": 1.1})


# ----------------------------------------------------------------------------------------------- load

def test_eight_concurrent_requests_are_all_answered(client):
    def one(i):
        t0 = time.monotonic()
        if i % 2:
            chunks = list(client.chat.completions.create(
                model="m", messages=[{"role": "user", "content": f"Request {i}"}], max_tokens=16, temperature=0,
                stream=True))
            text = "".join(c.choices[0].delta.content or "" for c in chunks)
            reason = chunks[-1].choices[0].finish_reason
        else:
            out = client.completions.create(model="m", prompt=f"Request {i}:", max_tokens=16, temperature=0)
            text, reason = out.choices[0].text, out.choices[0].finish_reason
        return i, text, reason, time.monotonic() - t0

    t0 = time.monotonic()
    with ThreadPoolExecutor(8) as pool:
        results = list(pool.map(one, range(8)))
    wall = time.monotonic() - t0
    assert sorted(r[0] for r in results) == list(range(8))
    assert all(r[1] and r[2] in ("length", "stop") for r in results), results
    # queued on one context, each answered in full (no request is interrupted by the next)
    assert all(r[2] == "length" for r in results), results
    print(f"8 concurrent requests: {wall:.2f} s wall, slowest {max(r[3] for r in results):.2f} s")


def test_client_that_disconnects_mid_stream_frees_the_slot(client, server):
    stream = client.chat.completions.create(model="m", messages=HELLO, max_tokens=N_CTX, temperature=0,
                                            stream=True)
    got = 0
    for _chunk in stream:
        got += 1
        if got == 3:
            break
    stream.close()
    t0 = time.monotonic()
    _alive(client)  # answered: the abandoned stream no longer holds the context
    deadline = time.monotonic() + 30
    while "Disconnected from client" not in server.log and time.monotonic() < deadline:
        time.sleep(0.1)
    assert "Disconnected from client" in server.log  # llama-cpp-python's note that it dropped the stream
    print(f"next request after a disconnect answered in {time.monotonic() - t0:.2f} s")


# ----------------------------------------------------------------------------------------------- bad input

def _refused(call, **kw) -> dict:
    with pytest.raises(openai.BadRequestError) as info:
        call(model="m", **kw)
    assert info.value.status_code == 400
    error = info.value.body
    assert set(error) >= {"message", "type", "param", "code"} and error["type"] == "invalid_request_error"
    return error


@pytest.mark.parametrize("route", ["chat", "completion"])
def test_negative_max_tokens(client, route):
    if route == "chat":
        error = _refused(client.chat.completions.create, messages=HELLO, max_tokens=-5)
    else:
        error = _refused(client.completions.create, prompt="Once", max_tokens=-5)
    assert error["param"] == "max_tokens" and "at least 1, got -5" in error["message"]
    _alive(client)


def test_unknown_role(client):
    error = _refused(client.chat.completions.create, messages=[{"role": "wizard", "content": "hi"}], max_tokens=2)
    assert error["param"] == "messages[0].role" and "'wizard'" in error["message"]
    _alive(client)


def test_prompt_longer_than_the_context(client):
    error = _refused(client.completions.create, prompt="one two three four " * 100, max_tokens=4)
    assert error["code"] == "context_length_exceeded" and f"maximum context length is {N_CTX}" in error["message"]
    error = _refused(client.chat.completions.create, messages=[{"role": "user", "content": "one two " * 200}],
                     max_tokens=4)
    assert error["code"] == "context_length_exceeded"
    _alive(client)


def test_streamed_prompt_longer_than_the_context(client, reference):
    """Refused 400 before the stream starts (the library would find it inside its generator, after the
    200 header); a prompt one token short of the context still streams."""
    def prompt(n_tokens):
        text = " one" * (n_tokens - 1)
        assert len(reference.tokenize(text.encode(), add_bos=True, special=True)) == n_tokens
        return text

    error = _refused(client.completions.create, prompt=prompt(N_CTX), max_tokens=4, stream=True)
    assert error["code"] == "context_length_exceeded"
    error = _refused(client.chat.completions.create, messages=[{"role": "user", "content": prompt(N_CTX)}],
                     max_tokens=4, stream=True)
    assert error["code"] == "context_length_exceeded"
    chunks = list(client.completions.create(model="m", prompt=prompt(N_CTX - 1), max_tokens=4, stream=True))
    assert chunks[-1].choices[0].finish_reason == "length"
    _alive(client)


def test_out_of_range_and_not_json(client, server):
    error = _refused(client.completions.create, prompt="Once", max_tokens=2, top_p=7)
    assert error["param"] == "top_p"
    req = urllib.request.Request(f"{server.url}/v1/completions", data=b"{not json", method="POST",
                                 headers={"Authorization": f"Bearer {KEY}", "Content-Type": "application/json"})
    with pytest.raises(urllib.error.HTTPError) as info:
        urllib.request.build_opener(urllib.request.ProxyHandler({})).open(req, timeout=30)
    assert info.value.code == 400 and "not JSON" in json.loads(info.value.read())["error"]["message"]
    _alive(client)


def test_other_routes_answer_in_openais_shape(server):
    auth = {"Authorization": f"Bearer {KEY}", "Content-Type": "application/json"}
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    req = urllib.request.Request(f"{server.url}/extras/tokenize", data=b'{"inputx": 1}', method="POST", headers=auth)
    with pytest.raises(urllib.error.HTTPError) as info:
        opener.open(req, timeout=30)
    assert info.value.code == 400 and json.loads(info.value.read())["error"]["param"] == "input"
    status, body = _get(f"{server.url}/v1/no-such-route", headers=auth)
    assert status == 404 and body["error"]["message"] == "Not Found"


def test_api_key(server):
    with pytest.raises(openai.AuthenticationError) as info:
        server.client(api_key="wrong").models.list()
    assert info.value.status_code == 401
    with pytest.raises(openai.AuthenticationError):
        server.client(api_key="wrong").chat.completions.create(model="m", messages=HELLO, max_tokens=-5)
    status, body = _get(f"{server.url}/v1/models")  # no Authorization header at all
    assert status == 401 and body["error"]["code"] == "invalid_api_key"
    assert _get(f"{server.url}/health")[0] == 200  # health needs no key


# ----------------------------------------------------------------------------------------------- lifecycle

def test_ctrl_c_stops_cleanly_with_a_client_connected():
    """The embedded model (no chat template): chat is refused 400, naming what to do. Ctrl-C with a
    streaming client connected (its tiny stream may be over by then) ends the server: exit 0, no traceback."""
    s = Server(runner.api.default_model_path())
    try:
        client = s.client(api_key="unused")
        error = _refused(client.chat.completions.create, messages=HELLO, max_tokens=2)
        assert "no chat template" in error["message"] and "/v1/completions" in error["message"]
        stream = client.completions.create(model="m", prompt="Once upon a time", max_tokens=N_CTX, stream=True)
        next(iter(stream))
        t0 = time.monotonic()
        code = s.stop(timeout=30)
        stream.close()
        assert code == 0, s.log
        assert time.monotonic() - t0 < 30
        assert "Traceback" not in s.log, s.log
        assert "Shutting down" in s.log
    finally:
        s.stop()


def test_rpc_serve_answers_as_the_cpu_does(llama3, server, tmp_path):
    """hfview serve --rpc over two rpc-servers on 127.0.0.1: both hold weights and compute, and a greedy
    request gets the CPU server's answer."""
    from test_llama_object import rpc_build, rpc_servers, served_by_each

    build = rpc_build()
    want = server.client().completions.create(model="m", prompt="Once upon a time", max_tokens=8, temperature=0)
    with rpc_servers(build, tmp_path) as servers:
        s = Server(llama3, "--rpc", ",".join(ep for ep, _log in servers), env={"LLAMA_CPP_LIB_PATH": str(build)})
        try:
            got = s.client(api_key="unused").completions.create(model="m", prompt="Once upon a time", max_tokens=8,
                                                                temperature=0)
        finally:
            s.stop()
        assert served_by_each(servers)
    assert got.choices[0].text == want.choices[0].text


def test_refusal_is_one_line(tmp_path):
    result = CliRunner().invoke(main, ["serve", "--model", str(tmp_path / "missing")])
    assert result.exit_code == 1
    assert result.output.startswith("hfview: ") and result.output.count("\n") == 1, result.output
    assert "Traceback" not in result.output


def test_the_server_loads_the_view_from_a_memory_file_with_the_familys_kv(checkpoint, monkeypatch):
    """In process: the server's Llama is a plain one over the view's memory file, Qwen-1's load-time RMS epsilon
    (which llama.cpp refuses the view without) passed as the server's kv_overrides."""
    monkeypatch.delenv("HFVIEW_DATA_PATH", raising=False)
    from hfview import HfCheckpoint, memfile
    from hfview.runner.serve import create_app

    if not memfile.supported():
        pytest.skip("no memfd on this system")
    qwen = checkpoint("qwen")
    app, proxy = create_app(str(qwen), n_ctx=64)
    try:
        llm = proxy()
        assert app.state.data_path == "memfd"
        assert os.readlink(llm.model_path).startswith("/memfd:hfview:")
        assert llm.kv_overrides == HfCheckpoint(qwen).load_kv
        assert llm.create_completion("Hello", max_tokens=2, temperature=0)["choices"][0]["text"] is not None
    finally:
        proxy.free()
        app.state.memory_file.close()


# ---------------------------------------------------------------- --runtime: the user's own llama-server on the view

# A stand-in for llama-server (none ships here): it reads the model file it is given, as llama-server would, and
# reports what it got.
STAND_IN = """#!{python}
import hashlib, json, os, sys
args = sys.argv[1:]
model = args[args.index("--model") + 1]
with open(model, "rb") as f:
    digest = hashlib.file_digest(f, "sha256").hexdigest()
loras = [(hashlib.sha256(open(args[i + 1], "rb").read()).hexdigest(), args[i + 2])
         for i, a in enumerate(args) if a == "--lora-scaled"]
with open(os.environ["STAND_IN_OUT"], "w") as out:
    json.dump({{"args": args, "sha256": digest, "link": os.readlink(model), "lora": loras,
               "key": os.environ.get("LLAMA_API_KEY")}}, out)
sys.exit(int(os.environ.get("STAND_IN_EXIT", "0")))
"""


def stand_in(tmp_path):
    exe = tmp_path / "llama-server"
    exe.write_text(STAND_IN.format(python=sys.executable))
    exe.chmod(0o755)
    return exe


def run_runtime(tmp_path, *args, env=None):
    """`hfview serve --runtime <stand-in> ARGS` in process; (exit code, output, what the stand-in reported)."""
    report = tmp_path / "report.json"
    result = CliRunner().invoke(main, ["serve", "--runtime", str(stand_in(tmp_path)), *args],
                                env={"STAND_IN_OUT": str(report), **(env or {})})
    return result.exit_code, result.output, (json.loads(report.read_text()) if report.is_file() else None)


def test_runtime_reads_the_view_from_the_inherited_memory_file(llama3, tmp_path):
    from hfview import HfCheckpoint, memfile
    from hfview.export import export

    if not memfile.supported():
        pytest.skip("no memfd on this system")
    code, output, got = run_runtime(tmp_path, "--model", str(llama3), "--n-ctx", "128", "--api-key", KEY,
                                    "--", "--jinja", "--threads", "2", env={"STAND_IN_EXIT": "3"})
    assert code == 3, output  # its exit status is the command's
    want = export(HfCheckpoint(llama3, "auto"), tmp_path / "view.gguf")
    with open(want, "rb") as f:
        assert got["sha256"] == hashlib.file_digest(f, "sha256").hexdigest()
    assert got["link"].startswith("/memfd:hfview:")  # the parent's memory file, no file on disk
    args = got["args"]
    assert args[args.index("--ctx-size") + 1] == "128" and args[args.index("--host") + 1] == "127.0.0.1"
    assert args[-3:] == ["--jinja", "--threads", "2"]
    assert got["key"] == KEY and KEY not in " ".join(args) and KEY not in output  # in its environment only
    assert not [p for p in llama3.rglob("*") if p.suffix == ".gguf"]


def test_runtime_gets_the_familys_load_time_kv(checkpoint, tmp_path):
    from hfview import HfCheckpoint, memfile

    if not memfile.supported():
        pytest.skip("no memfd on this system")
    qwen = checkpoint("qwen")
    code, output, got = run_runtime(tmp_path, "--model", str(qwen))
    assert code == 0, output
    (key, value), = HfCheckpoint(qwen).load_kv.items()
    args = got["args"]
    assert args[args.index("--override-kv") + 1] == f"{key}=float:{value!r}"


@pytest.mark.parametrize("args, needle", [
    (["--runtime", "/nonexistent/llama-server"], "not an executable file"),
    (["--runtime", "/bin/true", "--rpc", "127.0.0.1:5"], "pass llama-server's own --rpc after --"),
    (["--", "--jinja"], "only --runtime takes arguments after --"),
])
def test_runtime_refusals_are_one_line(args, needle):
    result = CliRunner().invoke(main, ["serve", *args])
    assert result.exit_code == 1, result.output
    assert result.output.startswith("hfview: ") and result.output.count("\n") == 1, result.output
    assert needle in result.output

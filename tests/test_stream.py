"""runner.stream / runner.devices: llama.cpp runs a GGUF served from a byte source, never from its path.

The GGUF under test is written by the pinned converter (the oracle) from a tiny random Llama; the
tests then serve its bytes through a pread-backed source object and compare llama.cpp's logits with
transformers'. Failure paths that could take the interpreter down run in a subprocess.
"""
from __future__ import annotations

import ctypes
import os
import re
import shutil
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from hfview.runner.stream import ModelLoadError, StreamModel, load_model, load_model_from_path, open_stream
from hfview.runner import devices

REPO = Path(__file__).resolve().parents[1]
SPM = REPO / "fixtures" / "tokenizers" / "llama-spm" / "tokenizer.model"
PROMPT = "The quick brown fox jumps over the lazy dog while the old cat sleeps in the warm sun"


class FileSource:
    """A byte source over an open file (pread), with or without the readinto fast path."""

    def __init__(self, path: Path, readinto: bool = True):
        self.name = str(path)
        self.fd = os.open(path, os.O_RDONLY)
        self.size = os.fstat(self.fd).st_size
        self.reads = 0
        if not readinto:
            self.readinto = None  # the stream then falls back to read()

    def read(self, offset: int, n: int) -> bytes:
        self.reads += 1
        return os.pread(self.fd, n, offset)

    def readinto(self, offset: int, view: memoryview) -> int:
        self.reads += 1
        return os.preadv(self.fd, [view], offset)

    def close(self) -> None:
        os.close(self.fd)


def nmse(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.mean((a.astype(np.float64) - b) ** 2) / np.mean(b.astype(np.float64) ** 2))


@pytest.fixture(scope="module")
def tiny_llama(tmp_path_factory):
    """(checkpoint dir, converter's f32 GGUF, 16 prompt ids, transformers' logits [16, vocab])."""
    torch = pytest.importorskip("torch")
    from transformers import LlamaConfig, LlamaForCausalLM

    import oracle

    root = tmp_path_factory.mktemp("stream")
    ckpt = root / "tiny-llama"
    torch.manual_seed(1234)
    cfg = LlamaConfig(vocab_size=32000, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=128,
                      rms_norm_eps=1e-5, rope_theta=10000.0, tie_word_embeddings=False,
                      bos_token_id=1, eos_token_id=2)
    model = LlamaForCausalLM(cfg).float().eval()
    with torch.no_grad():  # move every weight, norms included, off its initial value
        for name, p in model.named_parameters():
            if name.endswith("norm.weight"):
                p.copy_(1.0 + 0.2 * torch.randn_like(p))
            else:
                p.add_(0.05 * torch.randn_like(p))
    model.save_pretrained(ckpt)
    shutil.copy(SPM, ckpt / "tokenizer.model")
    gguf = oracle.convert(ckpt, root / "tiny-llama-f32.gguf", "f32")

    import sentencepiece as spm
    ids = [1] + spm.SentencePieceProcessor(model_file=str(SPM)).encode(PROMPT)
    assert len(ids) >= 16
    ids = ids[:16]
    with torch.no_grad():
        ref = model(torch.tensor([ids])).logits[0].float().numpy()
    return ckpt, gguf, ids, ref


# ---------------------------------------------------------------- the FILE* itself, no llama.cpp


class BytesSource:
    def __init__(self, data: bytes, readinto: bool):
        self.data, self.size, self.calls = data, len(data), []
        if not readinto:
            self.readinto = None

    def read(self, offset, n):
        self.calls.append(("read", offset, n))
        return self.data[offset:offset + n]

    def readinto(self, offset, view):
        self.calls.append(("readinto", offset, len(view)))
        chunk = self.data[offset:offset + len(view)]
        view[:len(chunk)] = chunk
        return len(chunk)


@pytest.mark.parametrize("readinto", [True, False])
@pytest.mark.parametrize("buffer_size", [0, 64])
def test_file_semantics(readinto, buffer_size):
    libc = ctypes.CDLL(None)
    libc.fread.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_size_t, ctypes.c_void_p]
    libc.fread.restype = ctypes.c_size_t
    libc.fseeko.argtypes = [ctypes.c_void_p, ctypes.c_int64, ctypes.c_int]
    libc.fseeko.restype = ctypes.c_int
    libc.ftello.argtypes = [ctypes.c_void_p]
    libc.ftello.restype = ctypes.c_int64
    data = bytes(range(256)) * 40 + b"tail"  # 10244 bytes: more than one stdio buffer
    src = BytesSource(data, readinto)

    def read(fp, n):
        buf = ctypes.create_string_buffer(n)
        got = libc.fread(buf, 1, n, fp)
        return buf.raw[:got]

    with open_stream(src, buffer_size=buffer_size) as f:
        assert read(f, 10) == data[:10]
        assert libc.ftello(f) == 10
        assert libc.fseeko(f, 1000, 0) == 0 and read(f, 5000) == data[1000:6000]  # SEEK_SET
        assert libc.fseeko(f, -100, 1) == 0 and libc.ftello(f) == 5900  # SEEK_CUR
        assert read(f, 3) == data[5900:5903]
        assert libc.fseeko(f, -4, 2) == 0 and read(f, 100) == b"tail"  # SEEK_END; short read at the end
        assert read(f, 10) == b""
        assert libc.fseeko(f, 5, 2) == 0 and read(f, 10) == b""  # past the end: nothing, no error
        assert libc.fseeko(f, -20000, 2) != 0  # before the start: refused
        assert libc.fseeko(f, 0, 0) == 0 and read(f, len(data) + 50) == data
        f.raise_if_failed()
    used = {kind for kind, *_ in src.calls}
    assert used == ({"readinto"} if readinto else {"read"})


def test_source_errors_are_recorded_not_thrown_into_c():
    class Broken(BytesSource):
        def read(self, offset, n):
            raise KeyError("shard-3.safetensors")

    libc = ctypes.CDLL(None)
    libc.fread.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_size_t, ctypes.c_void_p]
    libc.fread.restype = ctypes.c_size_t
    with open_stream(Broken(b"x" * 100, readinto=False)) as f:
        buf = ctypes.create_string_buffer(10)
        assert libc.fread(buf, 1, 10, f) == 0
        with pytest.raises(KeyError, match="shard-3") as info:
            f.raise_if_failed()
    assert any("read of" in note and "offset 0" in note for note in getattr(info.value, "__notes__", []))


def test_bad_source_objects():
    class NoSize:
        def read(self, offset, n):
            return b""

    with pytest.raises(TypeError, match="size"):
        open_stream(NoSize())
    with pytest.raises(TypeError, match="read"):
        open_stream(type("NoRead", (), {"size": 3})())


# ---------------------------------------------------------------- llama.cpp over the stream


def test_logits_match_transformers(tiny_llama):
    _, gguf, ids, ref = tiny_llama
    src = FileSource(gguf)
    try:
        with StreamModel(src, n_ctx=64) as m:
            assert m.n_vocab == ref.shape[1] == 32000
            assert m.tokenize(PROMPT)[:16] == ids  # llama.cpp's SPM tokenizer agrees with sentencepiece
            got = m.logits(ids)
    finally:
        src.close()
    assert got.shape == ref.shape == (16, 32000) and got.dtype == np.float32
    err = nmse(got, ref)
    per_pos = [nmse(got[i], ref[i]) for i in range(len(ids))]
    print(f"\nstream vs transformers: NMSE {err:.3e} over [16, 32000]; worst position {max(per_pos):.3e}")
    assert err < 1e-4
    assert max(per_pos) < 1e-3  # every position, not just an average carried by a few
    assert src.reads > 0


def test_same_bytes_twice_identical_and_both_read_paths(tiny_llama):
    _, gguf, ids, _ = tiny_llama
    runs = []
    for readinto in (True, True, False):
        src = FileSource(gguf, readinto=readinto)
        with StreamModel(src, n_ctx=64) as m:
            runs.append(m.logits(ids))
            runs.append(m.logits(ids))  # a second call starts from an empty cache again
        src.close()
    for other in runs[1:]:
        assert np.array_equal(runs[0], other)


def test_stream_matches_llama_cpp_file_loader_and_timing(tiny_llama):
    _, gguf, ids, _ = tiny_llama

    def timed(load):
        best = float("inf")
        for _ in range(3):
            t0 = time.perf_counter()
            model = load()
            best = min(best, time.perf_counter() - t0)
            model.close()
        return best

    def stream_load():
        src = FileSource(gguf)
        try:
            return load_model(src)
        finally:
            src.close()

    t_stream = timed(stream_load)
    t_disk = timed(lambda: load_model_from_path(gguf, use_mmap=False))
    print(f"\nload {gguf.stat().st_size / 2**20:.1f} MiB: stream {t_stream * 1e3:.1f} ms, "
          f"llama.cpp file loader (no mmap) {t_disk * 1e3:.1f} ms")
    src = FileSource(gguf)
    with StreamModel(src, n_ctx=64) as a, StreamModel(load_model_from_path(gguf), n_ctx=64) as b:
        assert np.array_equal(a.logits(ids), b.logits(ids))
    src.close()


def test_vocab_only_and_progress(tiny_llama):
    _, gguf, ids, _ = tiny_llama
    seen: list[float] = []
    src = FileSource(gguf)
    with load_model(src, vocab_only=True) as vocab:
        assert vocab.tokenize(PROMPT)[:16] == ids
        assert vocab.tokenize("hi", add_special=False)[0] != 1
        with pytest.raises(ValueError, match="vocab_only"):
            StreamModel(vocab)
    with load_model(src, progress=seen.append):
        pass
    assert seen and seen == sorted(seen) and seen[-1] == pytest.approx(1.0)
    with load_model(src, progress=True) as m:  # the tqdm bar
        assert m.n_vocab == 32000
    with pytest.raises(ModelLoadError, match="cancelled"):
        load_model(src, progress=lambda f: False)

    class Stop(Exception):
        pass

    def explode(fraction):
        raise Stop(f"progress at {fraction}")

    with pytest.raises(Stop):
        load_model(src, progress=explode)
    src.close()


def test_logits_input_checks(tiny_llama):
    _, gguf, ids, _ = tiny_llama
    src = FileSource(gguf)
    with StreamModel(src, n_ctx=32, n_batch=8) as m:
        with pytest.raises(ValueError, match="out of range"):
            m.logits([1, 32000])
        with pytest.raises(ValueError, match="n_ctx=32"):
            m.logits([1] * 33)
        with pytest.raises(ValueError, match="at least one"):
            m.logits([])
        chunked = m.logits(ids)  # 16 tokens in batches of 8
    with StreamModel(src, n_ctx=32) as whole:
        assert np.allclose(chunked, whole.logits(ids), atol=1e-4)
    src.close()


# ---------------------------------------------------------------- failures, each in its own process

_FAILING = textwrap.dedent("""
    import os, sys
    sys.path.insert(0, {repo!r})
    from hfview.runner.stream import StreamModel, load_model

    class Vanished(OSError):
        pass

    class Source:
        def __init__(self, path, size=None, fail_after=None, eof_after=None):
            self.fd = os.open(path, os.O_RDONLY)
            self.size = os.fstat(self.fd).st_size if size is None else size
            self.fail_after, self.eof_after, self.served = fail_after, eof_after, 0
        def read(self, offset, n):
            if self.fail_after is not None and self.served + n > self.fail_after:
                raise Vanished(f"shard vanished at offset {{offset}}")
            if self.eof_after is not None:
                n = max(0, min(n, self.eof_after - offset))
            self.served += n
            return os.pread(self.fd, n, offset)

    path = sys.argv[1]
    kind = sys.argv[2]
    full = os.path.getsize(path)
    src = {{"raise-header": lambda: Source(path, fail_after=100),
            "raise-mid": lambda: Source(path, fail_after=full // 2),
            "cut": lambda: Source(path, size=full // 2),
            "short": lambda: Source(path, eof_after=full // 2)}}[kind]()
    try:
        load_model(src)
    except BaseException as exc:
        print("RAISED", type(exc).__name__, "|", exc, "|", " ".join(getattr(exc, "__notes__", [])))
    else:
        print("LOADED")
    # the process is still sound: the intact bytes load and run afterwards
    with StreamModel(Source(path), n_ctx=16) as m:
        print("AFTER", m.logits([1, 2, 3]).shape)
""")


@pytest.mark.parametrize("kind, expect", [
    ("raise-header", ["RAISED Vanished", "shard vanished at offset 0", "read of"]),
    ("raise-mid", ["RAISED Vanished", "shard vanished at offset", "read of"]),
    ("cut", ["RAISED ModelLoadError", "could not load the GGUF", "not within the file bounds"]),
    ("short", ["RAISED StreamError", "truncated", "read of"]),
])
def test_failing_source_raises_python_error_without_crashing(tiny_llama, kind, expect):
    _, gguf, _, _ = tiny_llama
    proc = subprocess.run([sys.executable, "-c", _FAILING.format(repo=str(REPO)), str(gguf), kind],
                          capture_output=True, text=True, timeout=120)
    print(proc.stdout)
    assert proc.returncode == 0, f"process died ({proc.returncode}): {proc.stderr[-2000:]}"
    for text in expect:
        assert text in proc.stdout, f"{text!r} not in {proc.stdout!r}"
    assert "AFTER (3, 32000)" in proc.stdout


def test_cut_source_names_llama_cpp_reason(tiny_llama):
    # in-process too (the subprocess run proved it safe): the message carries llama.cpp's reason
    _, gguf, _, _ = tiny_llama
    src = FileSource(gguf)
    src.size //= 2
    with pytest.raises(ModelLoadError) as info:
        load_model(src)
    msg = str(info.value)
    assert src.name in msg and f"({src.size} bytes)" in msg
    assert "not within the file bounds" in msg  # llama.cpp's own error line, carried over
    src.close()


# ---------------------------------------------------------------- devices


def test_devices_from_the_ggml_registry():
    built = devices.backends()
    assert "CPU" in built
    assert any(d.type == "cpu" for d in devices.devices())
    assert devices.check_device("cpu") == "cpu" and devices.check_device(" CPU ") == "cpu"
    assert devices.n_gpu_layers("cpu") == 0
    with pytest.raises(devices.DeviceUnavailable, match="unknown device"):
        devices.check_device("tpu")
    for name, reg, flag in (("cuda", "CUDA", "-DGGML_CUDA=on"), ("metal", "MTL", "-DGGML_METAL=on")):
        if reg in built:  # a GPU build: it passes when a device is present, else says none was found
            if any(d.backend == reg for d in devices.devices()):
                assert devices.check_device(name) == name and devices.n_gpu_layers(name) == -1
            else:
                with pytest.raises(devices.DeviceUnavailable, match="found no"):
                    devices.check_device(name)
        else:
            with pytest.raises(devices.DeviceUnavailable) as info:
                devices.check_device(name)
            msg = str(info.value)
            assert f'CMAKE_ARGS="{flag}" pip install --force-reinstall --no-binary llama-cpp-python ' \
                   f"llama-cpp-python==0.3.36" in msg
            assert str(built) in msg


# ---------------------------------------------------------------- a shard changed under a load

_SHARD_CHANGED = textwrap.dedent("""
    import os, shutil, sys
    sys.path.insert(0, {repo!r})
    from pathlib import Path
    from hfview import HfCheckpoint
    from hfview.runner.stream import StreamModel, load_model

    ckpt_dir, how = Path(sys.argv[1]), sys.argv[2]
    shard = ckpt_dir / "model.safetensors"
    intact = shard.read_bytes()
    ckpt = HfCheckpoint(ckpt_dir)

    def change(fraction):  # llama.cpp reports progress before it reads the first tensor's bytes
        if shard.stat().st_size == len(intact) and shard.read_bytes() == intact:
            if how == "truncated":
                os.truncate(shard, len(intact) // 2)
            else:  # another file renamed over it, same size: only its identity tells
                (ckpt_dir / "new").write_bytes(intact[:-1] + bytes([intact[-1] ^ 1]))
                os.replace(ckpt_dir / "new", shard)

    try:
        load_model(ckpt, progress=change, data_path="stream")  # the stream reads the shards during the load
    except BaseException as exc:
        print("RAISED", type(exc).__name__, "|", exc)
    else:
        print("LOADED")
    shard.write_bytes(intact)  # the checkpoint made whole, opened again: the process still loads and runs
    with StreamModel(HfCheckpoint(ckpt_dir), n_ctx=16) as m:
        print("AFTER", m.logits([1, 2, 3]).shape)
""")


@pytest.mark.parametrize("how", ["truncated", "replaced"])
def test_shard_changed_during_load_is_a_stream_error_and_the_process_lives_on(how, tmp_path):
    ckpt = tmp_path / "default"
    shutil.copytree(REPO / "fixtures" / "default", ckpt)
    proc = subprocess.run([sys.executable, "-c", _SHARD_CHANGED.format(repo=str(REPO)), str(ckpt), how],
                          capture_output=True, text=True, timeout=300)
    print(proc.stdout)
    assert proc.returncode == 0, f"process died ({proc.returncode}): {proc.stderr[-2000:]}"
    raised = next(line for line in proc.stdout.splitlines() if line.startswith(("RAISED", "LOADED")))
    assert raised.startswith("RAISED StreamError"), raised
    assert str(ckpt / "model.safetensors") in raised and "changed after hfview opened it" in raised
    assert re.search(r"at offset \d+ of the GGUF stream", raised) and re.search(r"at byte \d+", raised)
    assert "AFTER (3, 2000)" in proc.stdout


# ---------------------------------------------------------------- the data path: memory file or FILE*


def test_a_view_loads_from_a_memory_file_with_the_streams_logits(monkeypatch):
    from hfview import HfCheckpoint, memfile

    if not memfile.supported():
        pytest.skip("no memfd on this system")
    monkeypatch.delenv("HFVIEW_DATA_PATH", raising=False)
    default = REPO / "fixtures" / "default"
    ids = [1, 450, 1996, 17, 1701]
    logits = {}
    for asked in (None, "memfd", "stream"):
        with load_model(HfCheckpoint(default), data_path=asked) as model:
            assert model.data_path == (asked or "memfd"), model.data_path_reason
            with StreamModel(model, n_ctx=16, owns_model=False) as m:
                logits[asked] = m.logits(ids)
    assert np.array_equal(logits[None], logits["stream"]) and np.array_equal(logits["memfd"], logits["stream"])
    monkeypatch.setenv("HFVIEW_DATA_PATH", "stream")
    with load_model(HfCheckpoint(default)) as model:
        assert model.data_path == "stream" and "HFVIEW_DATA_PATH" in model.data_path_reason
    monkeypatch.setenv("HFVIEW_DATA_PATH", "disk")
    with pytest.raises(Exception, match="data path 'disk' .HFVIEW_DATA_PATH.: choose one of auto, memfd, stream"):
        load_model(HfCheckpoint(default))


@pytest.mark.parametrize("quant", [None, "Q4_0"])
def test_llama_cpp_reads_the_header_while_the_tensors_are_filled_and_waits_for_them(quant, monkeypatch):
    """The memory file's load begins once its header is in place (llama.cpp reads the header and vocabulary and maps
    the file meanwhile) and reads no tensor before the fill has ended: with every tensor's bytes held back until
    llama.cpp has come to its first progress call, the logits are still the stream's. (Q4_0: llama.cpp repacks
    those weights for the CPU while it loads, reading their bytes then, not at the first decode.)"""
    import hfview.checkpoint as checkpoint_module
    from hfview import HfCheckpoint, memfile
    from hfview.runner import stream as stream_module

    if not memfile.supported():
        pytest.skip("no memfd on this system")
    default = REPO / "fixtures" / "default"
    ids = [1, 450, 1996, 17, 1701]
    with StreamModel(load_model(HfCheckpoint(default, quant=quant), data_path="stream"), n_ctx=16) as m:
        want = m.logits(ids)
    events, at_gate = [], threading.Event()
    real_start, real_progress = stream_module._LoadWhileFilling.start, stream_module._LoadWhileFilling._on_progress
    real_write, presented = checkpoint_module._write_stored, checkpoint_module.Presented
    real_rows_into, real_rows = presented.rows_into, presented.rows

    def start(self, memory_file):
        events.append("load begun")
        real_start(self, memory_file)

    def on_progress(self, fraction, user_data):
        if not at_gate.is_set():
            events.append("llama.cpp at its first progress call")
            at_gate.set()
        return real_progress(self, fraction, user_data)

    def held_back(real):
        def put(*args, **kwargs):
            assert at_gate.wait(60), "llama.cpp never came to its first progress call"
            if "tensor bytes" not in events:
                events.append("tensor bytes")
            return real(*args, **kwargs)
        return put

    monkeypatch.setattr(stream_module._LoadWhileFilling, "start", start)
    monkeypatch.setattr(stream_module._LoadWhileFilling, "_on_progress", on_progress)
    monkeypatch.setattr(checkpoint_module, "_write_stored", held_back(real_write))
    monkeypatch.setattr(presented, "rows_into", held_back(real_rows_into))
    monkeypatch.setattr(presented, "rows", held_back(real_rows))
    with StreamModel(load_model(HfCheckpoint(default, quant=quant), data_path="memfd"), n_ctx=16) as m:
        got = m.logits(ids)
    assert events[:3] == ["load begun", "llama.cpp at its first progress call", "tensor bytes"], events
    assert np.array_equal(got, want)


@pytest.mark.parametrize("header_share_from, begun", [(1000, "at the header"), (0, "after the fill")])
def test_the_load_begins_at_the_header_where_the_header_is_a_large_share_of_the_file(header_share_from, begun,
                                                                                      monkeypatch):
    """Where the header is at least 1/_LOAD_AT_HEADER_FROM of the file (the default fixture's is 1/73), llama.cpp's
    load begins at the header; elsewhere once the file is filled, as its MAP_POPULATE would run ahead of the fill."""
    import hfview.checkpoint as checkpoint_module
    from hfview import HfCheckpoint, memfile
    from hfview.runner import stream as stream_module

    if not memfile.supported():
        pytest.skip("no memfd on this system")
    events = []
    real_start, presented = stream_module._LoadWhileFilling.start, checkpoint_module.Presented

    def start(self, memory_file):
        events.append("load begun")
        real_start(self, memory_file)

    def noted(real):
        def put(*args, **kwargs):
            events.append("tensor bytes")
            return real(*args, **kwargs)
        return put

    monkeypatch.setattr(stream_module, "_LOAD_AT_HEADER_FROM", header_share_from)
    monkeypatch.setattr(stream_module._LoadWhileFilling, "start", start)
    monkeypatch.setattr(checkpoint_module, "_write_stored", noted(checkpoint_module._write_stored))
    monkeypatch.setattr(presented, "rows_into", noted(presented.rows_into))
    monkeypatch.setattr(presented, "rows", noted(presented.rows))
    with StreamModel(load_model(HfCheckpoint(REPO / "fixtures" / "default"), data_path="memfd"), n_ctx=16) as m:
        assert m.logits([1, 2]).shape == (2, 2000)
    assert events.count("load begun") == 1 and "tensor bytes" in events
    assert events.index("load begun") == (0 if begun == "at the header" else len(events) - 1), events


def test_a_fill_that_fails_cancels_the_load_begun_and_raises_its_own_error(monkeypatch):
    import hfview.checkpoint as checkpoint_module
    from hfview import HfCheckpoint, memfile

    if not memfile.supported():
        pytest.skip("no memfd on this system")

    def broken(*_args, **_kwargs):
        raise OSError(5, "Input/output error (a shard's disk)")

    monkeypatch.setattr(checkpoint_module, "_write_stored", broken)
    monkeypatch.setattr(checkpoint_module.Presented, "rows_into", broken)
    for _ in range(2):  # and the process loads again after it
        with pytest.raises(OSError, match="a shard's disk"):
            load_model(HfCheckpoint(REPO / "fixtures" / "default"), data_path="memfd")
        assert not [t for t in threading.enumerate() if t.name == "hfview-load"]
    monkeypatch.undo()
    with StreamModel(load_model(HfCheckpoint(REPO / "fixtures" / "default"), data_path="memfd"), n_ctx=16) as m:
        assert m.logits([1, 2]).shape == (2, 2000)


def test_what_auto_reads_through_the_stream(monkeypatch, tiny_llama):
    from hfview import HfCheckpoint

    monkeypatch.delenv("HFVIEW_DATA_PATH", raising=False)
    _, gguf, _, _ = tiny_llama
    src = FileSource(gguf)
    with load_model(src) as model:  # a byte source that is not a view
        assert model.data_path == "stream"
    src.close()
    with load_model(HfCheckpoint(REPO / "fixtures" / "default"), vocab_only=True) as model:
        assert model.data_path == "stream" and "vocabulary only" in model.data_path_reason


@pytest.mark.parametrize("how", ["no memfd", "memfd refused"])
def test_without_memory_files_the_stream_is_the_fallback(how, monkeypatch):
    """Where this system has no memory files (macOS) or refuses one (a sandbox), auto loads through the FILE*, and
    the runner says so; asking for the memory file there is a one-line refusal."""
    from hfview import HfCheckpoint, memfile
    from hfview.runner.api import load

    monkeypatch.delenv("HFVIEW_DATA_PATH", raising=False)
    if how == "no memfd":
        monkeypatch.setattr(memfile, "supported", lambda: False)
    else:
        if not memfile.supported():
            pytest.skip("no memfd on this system")

        def refused(*_args):
            raise PermissionError(1, "Operation not permitted")

        monkeypatch.setattr(os, "memfd_create", refused)
    with load(None, n_ctx=16) as r:
        assert r.data_path == "stream" and r.data_path_reason.startswith("fallback")
        assert any("FILE* instead of a memory file" in note for note in r.notes)
        assert r.logits([1, 450]).shape == (2, 2000)
    with pytest.raises(memfile.NoMemoryFiles):
        load_model(HfCheckpoint(REPO / "fixtures" / "default"), data_path="memfd")


def test_memory_short_is_a_one_line_refusal_before_filling(monkeypatch):
    from click.testing import CliRunner

    from hfview import HfCheckpoint, memfile
    from hfview.cli import main

    if not memfile.supported():
        pytest.skip("no memfd on this system")
    monkeypatch.delenv("HFVIEW_DATA_PATH", raising=False)
    monkeypatch.setattr(memfile, "memory_available", lambda: (1000, "MemAvailable in /proc/meminfo"))
    monkeypatch.setattr(HfCheckpoint, "fill_into", lambda *a, **k: pytest.fail("filled"))
    result = CliRunner().invoke(main, ["generate", "--prompt", "Once", "--max-tokens", "1", "--json"])
    assert result.exit_code != 0
    out = result.output.strip()
    assert "Traceback" not in out and len(out.splitlines()) == 1, out
    assert "needs" in out and "MemAvailable" in out and "HFVIEW_DATA_PATH=stream" in out


def test_generate_json_names_the_data_path(monkeypatch):
    import json

    from click.testing import CliRunner

    from hfview import memfile
    from hfview.cli import main

    monkeypatch.delenv("HFVIEW_DATA_PATH", raising=False)
    args = ["generate", "--prompt", "Once upon a time", "--max-tokens", "4", "--temperature", "0", "--json"]
    got = {}
    for env in ({}, {"HFVIEW_DATA_PATH": "stream"}):
        result = CliRunner().invoke(main, args, env=env)
        assert result.exit_code == 0, result.output
        info = json.loads(result.output.strip().splitlines()[-1])
        got[env.get("HFVIEW_DATA_PATH", "auto")] = info
    assert got["auto"]["data_path"] == ("memfd" if memfile.supported() else "stream")
    assert got["stream"]["data_path"] == "stream"
    assert got["auto"]["tokens"] == got["stream"]["tokens"]

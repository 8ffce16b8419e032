"""The tokenizer metadata kept between opens (hfview.vocab_cache): the same bytes, built again whenever an input
changes, never a wrong or half-written entry."""
from __future__ import annotations

import itertools
import json
import logging
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import hfview.vocab_cache as vocab_cache
from hfview import HfCheckpoint
from hfview.errors import CheckpointError
from hfview.gguf_layout import KV, EncodedArray, FileSpan, OpenFile, Pieces, ValueType, decode_kvs, encode_kv
from hfview.tokenizer.errors import TokenizerError

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
def cache(tmp_path, monkeypatch) -> Path:
    monkeypatch.setenv("HFVIEW_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv("HFVIEW_VOCAB_CACHE", raising=False)
    return tmp_path / "cache" / "vocab"


class Counting:
    """A vocab function that says how often it ran: in this process, so it refuses to be sent to a child."""

    def __init__(self, entries):
        self.entries, self.calls = entries, 0
        self.__module__, self.__qualname__ = __name__, "Counting"

    def __call__(self, model_dir, hparams):
        self.calls += 1
        return self.entries

    def __reduce__(self):
        raise TypeError("Counting counts the builds of this process")


def _entries() -> list[KV]:
    return [KV("tokenizer.ggml.model", ValueType.STRING, "gpt2"),
            KV("tokenizer.ggml.tokens", ValueType.ARRAY, [f"tok{i}" for i in range(5000)], ValueType.STRING),
            KV("tokenizer.ggml.token_type", ValueType.ARRAY, [1] * 5000, ValueType.INT32),
            KV("tokenizer.ggml.add_bos_token", ValueType.BOOL, True),
            KV("tokenizer.ggml.bos_token_id", ValueType.UINT32, 3)]


def _bytes(entries) -> bytes:
    return b"".join(map(encode_kv, entries))


def _model(tmp_path) -> Path:
    d = tmp_path / "model"
    d.mkdir()
    (d / "tokenizer.json").write_text('{"model": {"vocab": {}}}')
    (d / "config.json").write_text("{}")
    (d / "model.safetensors").write_bytes(b"weights are not part of the key")
    return d


def test_a_second_open_reads_the_entry_and_gives_the_same_bytes(cache, tmp_path):
    d, build = _model(tmp_path), Counting(_entries())
    first = vocab_kv_bytes(build, d)
    second = vocab_kv_bytes(build, d)
    assert build.calls == 1 and first == second == _bytes(_entries())
    assert len(list(cache.glob("*.kv"))) == 1
    long = vocab_cache.vocab_kv(build, d, {"vocab_size": 5000})[1].value
    assert isinstance(long, EncodedArray) and long[4999] == "tok4999"  # kept as its bytes, read when asked


def vocab_kv_bytes(build, d, hparams=None) -> bytes:
    return _bytes(vocab_cache.vocab_kv(build, d, {"vocab_size": 5000} if hparams is None else hparams))


@pytest.mark.parametrize("change", ["tokenizer file", "new file", "file in a folder", "config", "path"])
def test_any_changed_input_builds_again(cache, tmp_path, change):
    d, build = _model(tmp_path), Counting(_entries())
    vocab_kv_bytes(build, d)
    hparams = None
    if change == "tokenizer file":
        (d / "tokenizer.json").write_text('{"model": {"vocab": {"a": 0}}}')
    elif change == "new file":
        (d / "special_tokens_map.json").write_text("{}")
    elif change == "file in a folder":
        (d / "additional_chat_templates").mkdir()
        (d / "additional_chat_templates" / "tool.jinja").write_text("{{ x }}")
    elif change == "config":
        hparams = {"vocab_size": 5001}
    else:
        d = d.rename(tmp_path / "moved")
    vocab_kv_bytes(build, d, hparams)
    assert build.calls == 2


def test_weights_are_not_read_to_make_the_key(cache, tmp_path):
    d, build = _model(tmp_path), Counting(_entries())
    vocab_kv_bytes(build, d)
    (d / "model.safetensors").write_bytes(b"other weights")
    vocab_kv_bytes(build, d)
    assert build.calls == 1


def test_a_damaged_entry_is_built_again_and_replaced(cache, tmp_path):
    d, build = _model(tmp_path), Counting(_entries())
    vocab_kv_bytes(build, d)
    (entry,) = cache.glob("*.kv")
    data = bytearray(entry.read_bytes())
    data[-10] ^= 0xFF
    entry.write_bytes(bytes(data))
    assert vocab_kv_bytes(build, d) == _bytes(_entries()) and build.calls == 2
    entry.write_bytes(entry.read_bytes()[:100])  # cut short
    assert vocab_kv_bytes(build, d) == _bytes(_entries()) and build.calls == 3
    assert vocab_kv_bytes(build, d) == _bytes(_entries()) and build.calls == 3  # rewritten whole


def test_a_failed_build_keeps_nothing(cache, tmp_path):
    d = _model(tmp_path)

    def broken(model_dir, hparams):
        raise ValueError("tokenizer.json is broken")

    for _ in range(2):
        with pytest.raises(ValueError, match="broken"):
            vocab_cache.vocab_kv(broken, d, {})
    assert not cache.exists() or not list(cache.iterdir())


def test_an_unwritable_cache_still_opens(tmp_path, monkeypatch):
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("a file where the cache directory would be")
    monkeypatch.setenv("HFVIEW_CACHE", str(blocker))
    d, build = _model(tmp_path), Counting(_entries())
    assert vocab_kv_bytes(build, d) == vocab_kv_bytes(build, d) == _bytes(_entries())
    assert build.calls == 2


def test_switched_off(cache, tmp_path, monkeypatch):
    monkeypatch.setenv("HFVIEW_VOCAB_CACHE", "0")
    d, build = _model(tmp_path), Counting(_entries())
    vocab_kv_bytes(build, d)
    vocab_kv_bytes(build, d)
    assert build.calls == 2 and not cache.exists()


def test_least_recently_used_entries_go_first(cache, tmp_path, monkeypatch):
    monkeypatch.setattr(vocab_cache, "_MAX_ENTRIES_BYTES", 3 * (len(_bytes(_entries())) + 100))  # 3 entries
    models = []
    for i in range(4):
        d = tmp_path / f"m{i}"
        d.mkdir()
        (d / "tokenizer.json").write_text(str(i))
        models.append(d)
    build = Counting(_entries())
    for i, d in enumerate(models[:3]):
        vocab_kv_bytes(build, d)
        for p in cache.glob("*.kv"):  # distinct, ordered use times on any filesystem
            os.utime(p, ns=(p.stat().st_atime_ns, p.stat().st_mtime_ns - 10**9))
    vocab_kv_bytes(build, models[0])  # used again: now the newest
    vocab_kv_bytes(build, models[3])  # over the limit: the least recently used (m1) goes
    assert build.calls == 4 and len(list(cache.glob("*.kv"))) == 3
    vocab_kv_bytes(build, models[0])
    vocab_kv_bytes(build, models[2])
    assert build.calls == 4
    vocab_kv_bytes(build, models[1])
    assert build.calls == 5


def test_decode_kvs_reads_what_encode_kv_wrote_and_refuses_what_it_did_not():
    entries = _entries() + [KV("f", ValueType.ARRAY, [0.5, -2.0], ValueType.FLOAT32),
                            KV("b", ValueType.ARRAY, [True, False], ValueType.BOOL),
                            KV("s", ValueType.STRING, "héllo")]
    data = _bytes(entries)
    back = decode_kvs(data, len(entries))
    assert _bytes(back) == data
    assert [(k.key, list(k.value) if k.type == ValueType.ARRAY else k.value) for k in back] == \
        [(k.key, k.value) for k in entries]
    for bad in (data[:-1], data + b"\0", data[:40]):
        with pytest.raises(ValueError):
            decode_kvs(bad, len(entries))


def test_decode_kvs_with_the_entries_ends_reads_the_same_and_checks_each_end():
    """The ends a cache entry keeps spare the walk over a string array's strings; each one is still checked where
    its entry is read, so ends that do not match the bytes are refused, not served as a header."""
    entries = _entries()
    encoded = [encode_kv(e) for e in entries]
    data, ends = b"".join(encoded), list(itertools.accumulate(map(len, encoded)))
    assert _bytes(decode_kvs(data, len(entries), ends=ends)) == _bytes(decode_kvs(data, len(entries))) == data
    for i in range(len(ends)):
        for shift in (-1, 1):
            wrong = ends[:i] + [ends[i] + shift] + ends[i + 1:]
            with pytest.raises(ValueError):
                decode_kvs(data, len(entries), ends=wrong)
    with pytest.raises(ValueError):
        decode_kvs(data, len(entries), ends=ends[:-1])


def test_an_entry_with_damaged_ends_is_built_again(cache, tmp_path):
    d, build = _model(tmp_path), Counting(_entries())
    vocab_kv_bytes(build, d)
    (entry,) = cache.glob("*.kv")
    data = bytearray(entry.read_bytes())
    head = len(vocab_cache._MAGIC) + 8 + 32
    data[head + 8] ^= 0x01  # the second entry's end (the tokens array's)
    entry.write_bytes(bytes(data))
    assert vocab_kv_bytes(build, d) == _bytes(_entries()) and build.calls == 2


@pytest.mark.parametrize("fixture", ["llama3-bpe", "mixtral"])
def test_a_view_opened_from_the_cache_is_the_same_file(checkpoint, cache, fixture, monkeypatch):
    first = HfCheckpoint(checkpoint(fixture))
    second = HfCheckpoint(checkpoint(fixture))
    assert len(list(cache.glob("*.kv"))) == 1
    monkeypatch.setenv("HFVIEW_VOCAB_CACHE", "0")
    built_here = HfCheckpoint(checkpoint(fixture))  # every byte held in memory, as without a cache
    assert not any(isinstance(b, FileSpan) for b in built_here._header.blocks)
    assert second.read(0, second.size) == first.read(0, first.size) == built_here.read(0, built_here.size)
    assert b"".join(bytes(piece) for piece, _ in second.iter_file()) == built_here.read(0, built_here.size)


def test_a_view_holds_none_of_a_kept_vocabularys_bytes(checkpoint, cache):
    """The long arrays stay in the cache's file (FileSpan), served from there: of a 128k vocabulary's 7.6 MB
    header, what the view holds in memory is the rest."""
    view = HfCheckpoint(checkpoint("llama3-bpe"))
    in_file = {kv.key for kv in view.kv if isinstance(kv.value, EncodedArray) and isinstance(kv.value.piece, FileSpan)}
    assert in_file == {"tokenizer.ggml.tokens", "tokenizer.ggml.token_type", "tokenizer.ggml.merges"}
    held = sum(len(b) for b in view._header.blocks if not isinstance(b, FileSpan))
    assert view.data_start > 4_000_000 and held < 100_000, (view.data_start, held)
    tokens = next(kv.value for kv in view.kv if kv.key == "tokenizer.ggml.tokens")
    assert len(tokens) == 128256 and tokens[0] == "!"


def test_a_kept_entry_removed_or_replaced_under_a_view_still_serves_it(checkpoint, cache):
    view = HfCheckpoint(checkpoint("llama3-bpe"))
    header = view.read(0, view.data_start)
    (entry,) = cache.glob("*.kv")
    entry.unlink()  # another process's trim
    assert view.read(0, view.data_start) == header
    entry.write_bytes(b"another entry, written whole and renamed into place")
    assert view.read(0, view.data_start) == header


def test_a_kept_entry_cut_short_under_a_view_is_refused_by_name(checkpoint, cache):
    view = HfCheckpoint(checkpoint("llama3-bpe"))
    (entry,) = cache.glob("*.kv")
    os.truncate(entry, 1000)  # written in place, which hfview never does
    with pytest.raises(CheckpointError, match=re.escape(str(entry)) + ".*cut short"):
        view.read(0, view.data_start)


def test_pieces_read_as_one_run(tmp_path):
    data = bytes(range(256)) * 40
    path = tmp_path / "spans"
    path.write_bytes(data)
    f = OpenFile(path)
    parts = [b"head", memoryview(b"-view-"), FileSpan(f, 10, 3000), b"mid", FileSpan(f, 5000, 7), b"tail"]
    whole = b"head-view-" + data[10:3010] + b"mid" + data[5000:5007] + b"tail"
    pieces = Pieces(parts)
    assert len(pieces) == len(whole) and bytes(pieces) == whole
    assert len(pieces.blocks) == 5  # the in-memory runs joined, the spans left in the file
    for offset in (0, 3, 10, 11, 3009, 3010, 3013, 3019, len(whole) - 1, len(whole)):
        for n in (1, 7, 3000, 10_000):
            out = bytearray(n)
            got = pieces.readinto(offset, memoryview(out))
            assert got == min(n, len(whole) - offset) and bytes(out[:got]) == whole[offset:offset + got]
    assert b"".join(bytes(c) for c in pieces.chunks(size=1000)) == whole
    assert bytes(pieces.view(4, 10)) == b"-view-"
    with pytest.raises(ValueError):
        pieces.view(8, 20)  # runs into a span


def test_a_view_opened_from_the_cache_does_not_load_tokenizers(checkpoint, tmp_path):
    """What the cache is for: no `tokenizers` (its library's pages, the allocator's leftovers from its parse)."""
    probe = ("import sys, json; from hfview import HfCheckpoint; HfCheckpoint(sys.argv[1]); "
             "print(json.dumps('tokenizers' in sys.modules))")
    env = dict(os.environ, HFVIEW_CACHE=str(tmp_path / "cache"), PYTHONPATH=str(ROOT))
    env.pop("HFVIEW_VOCAB_CACHE", None)
    model = tmp_path / "model"
    shutil.copytree(checkpoint("llama3-bpe"), model)
    loaded = [json.loads(subprocess.run([sys.executable, "-c", probe, str(model)], env=env, check=True,
                                        capture_output=True, text=True).stdout) for _ in range(2)]
    assert loaded == [False, False]  # a first open builds it in a child process (vocab_cache._build_apart)
    # a caller that holds no model (export, inspect) builds it itself, with no second process
    env["HFVIEW_CACHE"] = str(tmp_path / "another cache")
    here = probe.replace("HfCheckpoint(sys.argv[1])", "HfCheckpoint(sys.argv[1], vocab_apart=False)")
    assert json.loads(subprocess.run([sys.executable, "-c", here, str(model)], env=env, check=True,
                                     capture_output=True, text=True).stdout) is True


# builds sent to the child by reference (module-level functions of this module, which the child imports)
def _entries_built(model_dir, hparams):
    log.warning("built in process %d", os.getpid())
    (Path(model_dir) / f"built-{os.getpid()}").write_text("")  # where it ran (not hashed: a new file is read after)
    return _entries()


def _refused(model_dir, hparams):
    raise TokenizerError(f"{model_dir}/tokenizer.json: no vocabulary")


def _broken(model_dir, hparams):
    raise ZeroDivisionError("a bug in the build")


log = logging.getLogger("hfview.test_vocab_cache")


def _where_built(d: Path) -> list[int]:
    return [int(p.name.split("-")[1]) for p in d.glob("built-*")]


@pytest.fixture
def apart(monkeypatch):
    """The tiny model directories here built in a child, as a real vocabulary's are."""
    monkeypatch.setattr(vocab_cache, "_APART_FROM", 0)


def test_a_small_vocabulary_is_built_here(cache, tmp_path):
    d = _model(tmp_path)
    vocab_cache.vocab_kv(_entries_built, d, {"vocab_size": 5000})
    assert _where_built(d) == [os.getpid()]


def test_a_first_open_builds_in_a_child_and_logs_here(cache, apart, tmp_path, monkeypatch):
    d = _model(tmp_path)
    seen = []
    monkeypatch.setattr(log, "handle", seen.append)
    entries = vocab_cache.vocab_kv(_entries_built, d, {"vocab_size": 5000})
    assert _bytes(entries) == _bytes(_entries())
    (pid,) = _where_built(d)
    assert pid != os.getpid()
    assert [r.getMessage() for r in seen] == [f"built in process {pid}"]  # the child's record, handled here
    assert isinstance(entries[1].value, EncodedArray)  # read back from the entry the child kept
    assert len(list(cache.glob("*.kv"))) == 1


def test_a_refusal_in_the_child_is_raised_here_and_keeps_nothing(cache, apart, tmp_path):
    d = _model(tmp_path)
    with pytest.raises(TokenizerError, match="no vocabulary"):
        vocab_cache.vocab_kv(_refused, d, {})
    assert not cache.exists() or not list(cache.iterdir())


def test_a_bug_in_the_child_is_raised_by_building_here(cache, apart, tmp_path):
    """Not an error meant for a user: built again here, where its own traceback shows."""
    with pytest.raises(ZeroDivisionError, match="a bug") as raised:
        vocab_cache.vocab_kv(_broken, _model(tmp_path), {})
    assert raised.traceback[-1].name == "_broken"


def test_an_unwritable_cache_builds_once_in_the_child(apart, tmp_path, monkeypatch):
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("a file where the cache directory would be")
    monkeypatch.setenv("HFVIEW_CACHE", str(blocker))
    d = _model(tmp_path)
    assert _bytes(vocab_cache.vocab_kv(_entries_built, d, {"vocab_size": 5000})) == _bytes(_entries())
    (pid,) = _where_built(d)
    assert pid != os.getpid()


def test_no_interpreter_to_run_builds_here(cache, apart, tmp_path, monkeypatch):
    monkeypatch.setattr(sys, "executable", str(tmp_path / "no-python"))
    d = _model(tmp_path)
    assert _bytes(vocab_cache.vocab_kv(_entries_built, d, {"vocab_size": 5000})) == _bytes(_entries())
    assert _where_built(d) == [os.getpid()]

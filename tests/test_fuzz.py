"""Hostile input: structured mutations of real fixtures, each ending in success or an HfviewError.

hypothesis draws the cases (config values, shard headers, truncations, tokenizer files); a worker process
under an address-space limit (RLIMIT_AS) runs them (tests/fuzz_cases.py), so a runaway allocation ends as a
MemoryError there instead of taking the machine down, and a crash in native code kills only the worker.
Every case that once failed is kept in tests/data/fuzz_regressions.json and replayed first.
"""
from __future__ import annotations

import json
import os
import select
import struct
import subprocess
import sys
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

import fuzz_cases

HERE = Path(__file__).resolve().parent
REGRESSIONS = HERE / "data" / "fuzz_regressions.json"
LIMIT = 1 << 30        # address space of the worker: it peaks under 200 MiB on these fixtures
CASE_TIMEOUT = 60.0    # seconds: a case slower than this is a hang


# ---------------------------------------------------------------- the worker
class Worker:
    """tests/fuzz_cases.py serving cases over pipes; restarted when a case kills it."""

    def __init__(self, fixtures: dict[str, Path], log: Path):
        self.fixtures, self.log, self.proc = {k: str(v) for k, v in fixtures.items()}, log, None

    def _start(self) -> None:
        env = {**os.environ, "MALLOC_ARENA_MAX": "2", "RAYON_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false",
               "OMP_NUM_THREADS": "1"}
        self.proc = subprocess.Popen(
            [sys.executable, str(HERE / "fuzz_cases.py"), json.dumps(self.fixtures), str(LIMIT)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=open(self.log, "ab"), text=True, env=env)
        if self._line(120) != "ready":
            raise RuntimeError(f"the fuzz worker did not start; see {self.log}")

    def _line(self, timeout: float) -> str | None:
        ready, _, _ = select.select([self.proc.stdout], [], [], timeout)
        return self.proc.stdout.readline().strip() if ready else None

    def run(self, case: dict) -> dict:
        if self.proc is None or self.proc.poll() is not None:
            self._start()
        start = time.perf_counter()
        self.proc.stdin.write(json.dumps(case) + "\n")
        self.proc.stdin.flush()
        line = self._line(CASE_TIMEOUT)
        if line:
            return json.loads(line)
        self.close()
        what = "ran past the time limit" if line is None else f"killed the worker (exit {self.proc.returncode})"
        return {"outcome": "crash", "seconds": time.perf_counter() - start, "detail": f"the case {what}"}

    def close(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


class Figures:
    """What the fuzz tests report: cases tried, outcomes, the slowest case."""

    def __init__(self):
        self.counts: dict[str, int] = {}
        self.slowest = (0.0, None)
        self.in_cases = 0.0
        self.started = time.perf_counter()

    def add(self, case: dict, result: dict) -> None:
        key = f"{case['fixture']}:{result['outcome']}"
        self.counts[key] = self.counts.get(key, 0) + 1
        self.in_cases += result["seconds"]
        if result["seconds"] > self.slowest[0]:
            self.slowest = (result["seconds"], case)

    def summary(self) -> str:
        total = sum(self.counts.values())
        crashes = sum(n for k, n in self.counts.items() if k.endswith(":crash"))
        return (f"fuzz: {total} inputs, {crashes} crashes, {time.perf_counter() - self.started:.1f} s "
                f"({self.in_cases:.1f} s of it in hfview); "
                f"slowest case {self.slowest[0]:.2f} s: {json.dumps(self.slowest[1])[:300]}; "
                f"outcomes {json.dumps(dict(sorted(self.counts.items())))}")


# ---------------------------------------------------------------- fixtures the cases start from
def _tiny_plamo(d: Path) -> Path:
    d.mkdir(parents=True, exist_ok=True)
    lines = [["<|plamo:unk|>", 0.0, "UNKNOWN"], ["<|plamo:bos|>", 0.0, "CONTROL"], ["<|plamo:eos|>", 0.0, "CONTROL"],
             ["<|plamo:pad|>", 0.0, "CONTROL"], ["<|plamo:op|>", 0.0], ["<0x00>", 0.0, "BYTE"], ["a", -1.5],
             ["b", -2.0, "NORMAL"]]
    (d / "tokenizer.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
    (d / "tokenizer_config.json").write_text(json.dumps({"bos_token": "<|plamo:bos|>", "eos_token": "<|plamo:eos|>",
                                                         "pad_token": "<|plamo:pad|>", "unk_token": "<|plamo:unk|>"}))
    return d


def _tiny_tiktoken(d: Path) -> Path:
    """The first 400 ranks of GPT-2's r50k file: single bytes and their first merges."""
    d.mkdir(parents=True, exist_ok=True)
    src = HERE.parent / "fixtures" / "tokenizers" / "r50k-gpt2-tiktoken" / "r50k_base.tiktoken"
    (d / "tokenizer.tiktoken").write_bytes(b"".join(src.read_bytes().splitlines(keepends=True)[:400]))
    return d


@pytest.fixture(scope="module")
def fixtures(checkpoint, tmp_path_factory):
    base = tmp_path_factory.mktemp("fuzz-fixtures")
    return {
        "default": HERE.parent / "fixtures" / "default",    # Llama, SentencePiece tokenizer.model (2000 pieces)
        "tekken": checkpoint("mistral-consolidated-tekken"),  # Mistral's format: params.json, tekken.json
        "bpe": checkpoint("granite"),                        # byte-level BPE tokenizer.json, another family
        "plamo": _tiny_plamo(base / "plamo"),
        "tiktoken": _tiny_tiktoken(base / "tiktoken"),
    }


@pytest.fixture(scope="module")
def worker(fixtures, tmp_path_factory, request):
    w = Worker(fixtures, tmp_path_factory.mktemp("fuzz-log") / "worker.log")
    figures = Figures()
    w.figures = figures
    yield w
    w.close()
    if figures.counts:  # the figures belong in the run's output, captured or not
        capture = request.config.pluginmanager.get_plugin("capturemanager")
        with capture.global_and_fixture_disabled():
            print("\n" + figures.summary())


def check(worker: Worker, case: dict) -> dict:
    result = worker.run(case)
    worker.figures.add(case, result)
    assert result["outcome"] != "crash", (
        f"a hostile input escaped as something other than an HfviewError; keep the case in "
        f"{REGRESSIONS.relative_to(HERE.parent)} once fixed.\ncase: {json.dumps(case)[:3000]}\n{result['detail']}")
    if result["outcome"] == "refused":
        assert len(result["detail"]) < 1500, f"an error message quotes too much of the input: {result['detail'][:300]}"
    return result


# ---------------------------------------------------------------- what a hostile value looks like
_INTS = [0, 1, 2, 3, -1, 7, 2**31 - 1, 2**31, 2**32, 2**32 + 1, 2**53 + 1, 2**63, 2**64, 10**12, 10**30, -2**63]
_FLOATS = [0.0, -0.0, 0.5, 1.5, -1.0, 1e-300, 1e300, float("nan"), float("inf"), -float("inf")]
_STRINGS = ["", "x", "silu", "gelu", "default", "linear", "yarn", "llama3", "dynamic", "longrope", "F32", "BF16",
            "llama", "mistral", "<s>", "\ud800", "é" * 3, "x" * 100_000]
_RAWS = ["1" * 5000, "1e400", "-1e400", "[" * 3000 + "]" * 3000, '{"a":' * 3000 + "1" + "}" * 3000]
_JSON = st.recursive(st.none() | st.booleans() | st.integers(-3, 300) | st.text(max_size=4),
                     lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=4), inner, max_size=3),
                     max_leaves=6)


def _near(value) -> list:
    """Values a plausible mistake makes of `value`."""
    if isinstance(value, bool):
        return [not value, int(value)]
    if isinstance(value, int):
        return [value + 1, value - 1, value * 2, value // 2, -value, value * 1000, float(value), str(value)]
    if isinstance(value, float):
        return [value * 2, -value, 0.0, int(value), str(value)]
    if isinstance(value, str):
        return [value.upper(), value + "x", value[:-1], [value], None]
    if isinstance(value, list):
        return [value[:-1], value + value[-1:], value[::-1], [value], {"0": value},
                [v + 1 if isinstance(v, int) and not isinstance(v, bool) else v for v in value]]
    if isinstance(value, dict):
        return [{}, list(value.values()), [value]]
    return []


_ANY_HOSTILE = st.one_of(
    st.sampled_from(_INTS), st.integers(-1000, 100_000), st.sampled_from(_FLOATS), st.booleans(), st.none(),
    st.sampled_from(_STRINGS), _JSON, st.sampled_from([[], {}, [1, 2], [[1]], {"a": 1}, [None], ["a"], [0] * 100_000]))
_MADE: dict[tuple, st.SearchStrategy] = {}  # strategies are costly to build: one per node of a fixture's files


def _once(key: tuple, make) -> st.SearchStrategy:
    if key not in _MADE:
        _MADE[key] = make()
    return _MADE[key]


def hostile(original=None) -> st.SearchStrategy:
    """Any hostile value, or (as likely) one a plausible mistake makes of `original`."""
    def make():
        near = _near(original)
        return st.one_of(_ANY_HOSTILE, st.sampled_from(near)) if near else _ANY_HOSTILE
    return _once(("hostile", id(original)), make)


_RAW_TEXT = st.sampled_from(_RAWS)


@st.composite
def set_value(draw, file: str, path: list, original) -> dict:
    """A json_set of `path` to a hostile value, or to raw JSON text Python's json cannot write."""
    if draw(st.integers(0, 9)) == 0:
        return {"file": file, "op": "json_set", "path": path, "raw": draw(_RAW_TEXT)}
    return {"file": file, "op": "json_set", "path": path, "value": draw(hostile(original))}


def _get(doc, path):
    node = fuzz_cases._walk(doc, path) if path else None
    key = path[-1] if path else None
    if isinstance(node, dict):
        return node.get(key)
    if isinstance(node, list) and isinstance(key, int) and -len(node) <= key < len(node):
        return node[key]
    return None


@st.composite
def json_edit(draw, file: str, doc, extra_paths=()) -> dict:
    """An edit somewhere in a JSON document: a walk from its root (or one of `extra_paths`, which may name
    keys the file lacks), then a new value or a deletion."""
    path = list(draw(_once(("paths", id(extra_paths)), lambda: st.sampled_from(extra_paths)))) \
        if extra_paths and draw(st.booleans()) else []
    node = _get(doc, path) if path else doc
    while isinstance(node, (dict, list)) and node and len(path) < 6 and (not path or draw(st.integers(0, 3))):
        key = draw(_once(("keys", id(node)), lambda: st.sampled_from(list(node)))) if isinstance(node, dict) \
            else draw(st.integers(0, len(node) - 1))
        path.append(key)
        node = node[key]
    if path and draw(st.integers(0, 6)) == 0:
        return {"file": file, "op": "json_delete", "path": path}
    return draw(set_value(file, path, node))


def byte_edit(file: str, size: int, hot: int | None = None, deletable: bool = True) -> st.SearchStrategy:
    """Truncation, a flipped byte (mostly in the first `hot` bytes: a header), or the file replaced."""
    hot = min(size, hot or size)
    return st.one_of(
        st.integers(0, max(0, size - 1)).map(lambda n: {"file": file, "op": "truncate", "size": n}),
        st.tuples(st.integers(0, max(0, hot - 1)), st.integers(1, 255)).map(
            lambda a: {"file": file, "op": "flip", "at": a[0], "xor": a[1]}),
        st.sampled_from(["", "{", "[]", "null", "\x00" * 16, "{}" * 3]).map(
            lambda t: {"file": file, "op": "text", "text": t}),
        *([st.just({"file": file, "op": "delete"})] if deletable else []))


# ---------------------------------------------------------------- shards
def _offsets_variants(b: int, e: int, other: list[int]) -> list:
    return [[b, e + 1], [b - 1, e], [e, b], [b + 1, e + 1], other, [b, e, e], [b], [float(b), e], [b, 2**64],
            [-e, -b], [str(b), e], None, {}]


def _shape_variants(shape: list[int]) -> list:
    out = [[], [0], shape[::-1], shape + [1], [1] + shape, shape[:-1], [-d for d in shape], [[d] for d in shape],
           [float(d) for d in shape], [2**40] + shape[1:], [2**63, 2**63], [True] * len(shape), [1] * 70]
    for i in range(len(shape)):
        out += [shape[:i] + [shape[i] + 1] + shape[i + 1:], shape[:i] + [0] + shape[i + 1:]]
    return out


def _renamed(name: str) -> list[str]:
    out = [name + "x", name.replace(".weight", ".bias"), "language_model." + name, name.upper(), "", "__metadata__x"]
    for src, dst in ((".0.", ".99."), (".0.", ".00."), (".0.", ".-1."), (".1.", ".4294967296."), (".0.", ".0.0.")):
        if src in name:
            out.append(name.replace(src, dst, 1))
    return out


@st.composite
def shard_edits(draw, file: str, raw_size: int, header: dict, header_bytes: int) -> list[dict]:
    names = sorted(k for k in header if k != "__metadata__")
    name = draw(st.sampled_from(names))
    meta = header[name]
    b, e = meta["data_offsets"]
    other = header[draw(st.sampled_from(names))]["data_offsets"]
    kind = draw(st.integers(0, 9))
    at = lambda *path: {"file": file, "op": "header_set", "path": list(path)}  # noqa: E731
    if kind == 0:
        return [{**at(name, "dtype"), "value": draw(st.sampled_from(
            ["F32", "F16", "BF16", "I64", "U8", "BOOL", "F8_E4M3", "F31", "", "f32", "Q4_K"]) | hostile())}]
    if kind in (1, 2):
        return [{**at(name, "shape"), "value": draw(st.sampled_from(_shape_variants(list(meta["shape"]))) | hostile())}]
    if kind == 3:
        return [{**at(name, "data_offsets"), "value": draw(st.sampled_from(_offsets_variants(b, e, other)) | hostile())}]
    if kind == 4:
        choice = draw(st.integers(0, 2))
        if choice == 0:
            return [{"file": file, "op": "header_delete", "path": [name]}]
        new = draw(st.sampled_from(_renamed(name)))
        return [{**at(new), "value": meta}] + ([{"file": file, "op": "header_delete", "path": [name]}] if choice == 1 else [])
    if kind == 5:
        return [draw(st.one_of(hostile().map(lambda v: {**at(name), "value": v}),
                               hostile().map(lambda v: {**at("__metadata__"), "value": v}),
                               hostile().map(lambda v: {**at("__metadata__", "format"), "value": v}),
                               st.sampled_from(_RAWS).map(lambda r: {**at(name, "shape"), "raw": r})))]
    if kind == 6:
        length = header_bytes
        return [{"file": file, "op": "header_length", "value": draw(st.sampled_from(
            [0, 1, 2, 7, length - 1, length + 1, raw_size, raw_size - 8, 10**8 + 1, 2**63, 2**64 - 1]))}]
    return [draw(byte_edit(file, raw_size, hot=8 + header_bytes))]


# ---------------------------------------------------------------- per fixture
_ROPE_KEYS = ["rope_type", "type", "factor", "rope_theta", "original_max_position_embeddings", "low_freq_factor",
              "high_freq_factor", "beta_fast", "beta_slow", "attention_factor", "short_factor", "long_factor",
              "partial_rotary_factor", "full_attention", "sliding_attention"]
_CONFIG_KEYS = ["text_config", "quantization_config", "rope_scaling", "rope_theta", "architectures", "model_type",
                "head_dim", "num_key_value_heads", "sliding_window", "layer_types", "num_local_experts",
                "num_experts_per_tok", "max_position_embeddings", "vocab_size", "tie_word_embeddings"]


class Source:
    """A fixture's files as the strategies see them (parsed once)."""

    def __init__(self, path: Path):
        from hfview import families

        self.path = path
        self.json: dict[str, object] = {}
        self.shards: dict[str, tuple[int, dict, int]] = {}
        self.sizes: dict[str, int] = {}
        for f in sorted(path.iterdir()):
            if not f.is_file() or f.suffix == ".md":
                continue
            self.sizes[f.name] = f.stat().st_size
            if f.suffix == ".json":
                self.json[f.name] = json.loads(f.read_bytes())
            elif f.suffix == ".safetensors":
                raw = f.read_bytes()
                n = struct.unpack("<Q", raw[:8])[0]
                self.shards[f.name] = (len(raw), json.loads(raw[8:8 + n]), n)
        self.config = "config.json" if "config.json" in self.json else "params.json"
        config = self.json.get(self.config, {})
        family = families.family_for(config.get("model_type")) or families.family_for("mistral-params")
        keys = sorted(set(family.reads) | set(_CONFIG_KEYS) | set(config))
        rope = [[k, r] for k in ("rope_scaling", "rope_parameters") for r in _ROPE_KEYS]
        self.config_paths = [[k] for k in keys] + rope + [["yarn", k] for k in ("factor", "beta", "alpha",
                                                                               "original_max_position_embeddings")]


def cases(fixture: str, src: Source) -> st.SearchStrategy:
    # (weight, strategy): config values most, as they reach deepest; a broken binary file ends a case early
    files = []
    if src.config in src.json:
        files.append((6, json_edit(src.config, src.json[src.config], src.config_paths).map(lambda e: [e])))
        files.append((1, byte_edit(src.config, src.sizes[src.config]).map(lambda e: [e])))
    for name, (size, header, n) in src.shards.items():
        files.append((4, shard_edits(name, size, header, n)))
    for name, doc in src.json.items():
        if name != src.config and not name.endswith(".index.json"):
            files.append((3, json_edit(name, doc).map(lambda e: [e])))
    for name in src.sizes:
        if not name.endswith((".json", ".safetensors")):  # tokenizer.model, tokenizer.jsonl, *.tiktoken
            # (a reader called on its own raises FileNotFoundError for its missing file, as the converter's)
            deletable = fixture not in ("plamo", "tiktoken")
            files.append((1 if src.config in src.json else 3,
                          byte_edit(name, src.sizes[name], deletable=deletable).map(lambda e: [e])))
    weighted = [s for w, s in files for _ in range(w)]
    edits = st.lists(st.one_of(weighted), min_size=1, max_size=3).map(lambda groups: [e for g in groups for e in g])
    target = {"plamo": "plamo", "tiktoken": "tiktoken"}.get(fixture, "checkpoint")
    return edits.map(lambda e: {"fixture": fixture, "target": target, "edits": e})


def _plamo_line_edits(src: Source) -> st.SearchStrategy:
    """tokenizer.jsonl lines replaced by hostile JSON lines."""
    text = (src.path / "tokenizer.jsonl").read_text()
    lines = text.splitlines()

    def replace(arg):
        i, value = arg
        new = list(lines)
        new[i % len(new)] = json.dumps(value)
        return [{"file": "tokenizer.jsonl", "op": "text", "text": "\n".join(new) + "\n"}]
    return st.tuples(st.integers(0, len(lines)), hostile(["a", -1.5, "NORMAL"])).map(replace)


# examples per fixture: about a minute in all on two cores (see the figures printed at the end);
# HFVIEW_FUZZ_SCALE=10 runs ten times as many, for a longer hunt by hand
_SCALE = float(os.environ.get("HFVIEW_FUZZ_SCALE", "1"))
BUDGET = {name: max(1, round(n * _SCALE)) for name, n in
          {"default": 1300, "tekken": 450, "bpe": 80, "plamo": 150, "tiktoken": 150}.items()}


_KEPT = json.loads(REGRESSIONS.read_text())


@pytest.mark.parametrize("entry", _KEPT, ids=[f"{i}-{e['why'][:40]}" for i, e in enumerate(_KEPT)])
def test_kept_case(entry, worker):
    """An input that once failed: now refused as its entry says, the message naming what it names."""
    result = check(worker, entry["case"])
    assert result["outcome"] == entry["expect"], f"{entry['why']}: {result}"
    for word in entry.get("names", []):
        assert word in result["detail"], f"{entry['why']}: {word!r} not in {result['detail']!r}"


@pytest.mark.parametrize("fixture", list(BUDGET))
def test_hostile_input_is_refused_or_read(fixture, worker, fixtures):
    src = Source(fixtures[fixture])
    strategy = cases(fixture, src)
    if fixture == "plamo":
        strategy = st.one_of(strategy, _plamo_line_edits(src).map(
            lambda e: {"fixture": "plamo", "target": "plamo", "edits": e}))

    @settings(max_examples=BUDGET[fixture], derandomize=True, deadline=None, database=None,
              suppress_health_check=list(HealthCheck), print_blob=False)
    @given(strategy)
    def run(case):
        check(worker, case)

    run()

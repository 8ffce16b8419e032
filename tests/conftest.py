"""Shared fixtures: tiny checkpoints built by fixtures/build.py and the converter's output for them,
both cached by content so reruns cost nothing."""
from __future__ import annotations

import hashlib
import importlib.util
import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(__file__).resolve().parent))

import oracle  # noqa: E402

CACHE = oracle.CACHE


def _load_builder():
    spec = importlib.util.spec_from_file_location("hfview_fixture_build", ROOT / "fixtures" / "build.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # dataclasses look their module up here
    spec.loader.exec_module(mod)
    return mod


def _digest_dir(path: Path) -> str:
    h = hashlib.sha256()
    for f in sorted(path.iterdir()):
        if f.is_file():
            h.update(f.name.encode())
            h.update(oracle.sha256(f).encode())
    return h.hexdigest()[:16]


@pytest.fixture(scope="session")
def builder():
    return _load_builder()


@pytest.fixture(scope="session")
def checkpoint(builder):
    """checkpoint(name) -> directory of the fixture `name`, built once per content of its spec files."""
    made: dict[str, Path] = {}

    def get(name: str) -> Path:
        if name not in made:
            h = hashlib.sha256()
            for f in builder.source_files(name):
                h.update(f.read_bytes())
            out = CACHE / "fixtures" / f"{name}-{h.hexdigest()[:12]}"
            if not out.is_dir():  # renamed into place only once complete
                tmp = out.with_name(out.name + f".{os.getpid()}.partial")
                if tmp.exists():
                    import shutil
                    shutil.rmtree(tmp)
                builder.build(name, tmp)
                tmp.rename(out)
            made[name] = out
        return made[name]
    return get


@pytest.fixture(scope="session")
def converted(checkpoint, builder):
    """converted(name, outtype) -> the pinned converter's GGUF for fixture `name`, cached by content."""
    def get(name: str, outtype: str) -> Path:
        ckpt = checkpoint(name)
        # the directory name is part of the output (general.name), so it is part of the key
        out = CACHE / "converted" / f"{ckpt.name}-{_digest_dir(ckpt)}-{outtype}.gguf"
        if not out.is_file():
            out.parent.mkdir(parents=True, exist_ok=True)
            tmp = out.with_name(out.name + f".{os.getpid()}.partial")
            oracle.convert(ckpt, tmp, outtype, *builder.CONVERTER_ARGS.get(name, ()))
            tmp.rename(out)
        return out
    return get


# ---------------------------------------------------------------- the family table's record
# Each oracle test records (family, oracle); the outcomes of a run are merged into family-status.json,
# from which tools/family_table.py writes the README's table.
_status: dict[str, dict[str, list[str]]] = {}


def pytest_runtest_logreport(report):
    props = dict(report.user_properties)
    if "family" not in props or report.when != "call" and not (report.when == "setup" and report.failed):
        return
    outcome = "xfail" if hasattr(report, "wasxfail") else ("pass" if report.passed else
                                                          "skip" if report.skipped else "fail")
    oracle_name = props["oracle"]
    if oracle_name == "logits" and "finite_and_deterministic" in report.nodeid:
        oracle_name = "runs"  # no transformers class: llama.cpp runs the view, finite and repeatable
    _status.setdefault(props["family"], {}).setdefault(oracle_name, []).append(outcome)


def pytest_sessionfinish(session):
    """Merge this run's outcomes into family-status.json: per family and oracle, the set of outcomes."""
    if not _status:
        return
    import json
    path = CACHE / "family-status.json"
    old = json.loads(path.read_text()) if path.is_file() else {}
    for family, oracles in _status.items():
        for name, outcomes in oracles.items():
            old.setdefault(family, {})[name] = sorted(set(outcomes))
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(old, indent=1, sort_keys=True))

"""Shared fixtures: tiny checkpoints built by fixtures/build.py and the converter's output for them,
both cached by content so reruns cost nothing."""
from __future__ import annotations

import hashlib
import importlib.util
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
            made[name] = oracle.made_once(out, lambda tmp: builder.build(name, tmp))
        return made[name]
    return get


@pytest.fixture(scope="session")
def converted(checkpoint, builder):
    """converted(name, outtype) -> the pinned converter's GGUF for fixture `name`, cached by content."""
    def get(name: str, outtype: str) -> Path:
        ckpt = checkpoint(name)
        # the directory name is part of the output (general.name), so it is part of the key
        out = CACHE / "converted" / f"{ckpt.name}-{_digest_dir(ckpt)}-{outtype}.gguf"
        return oracle.made_once(out, lambda tmp: oracle.convert(ckpt, tmp, outtype,
                                                                *builder.CONVERTER_ARGS.get(name, ())))
    return get


@pytest.fixture(scope="session")
def quantized(converted):
    """quantized(name, outtype, ftype_id) -> llama_model_quantize's file from the converter's, cached."""
    def get(name: str, outtype: str, ftype: int) -> Path:
        src = converted(name, outtype)
        out = CACHE / "quantized" / f"{src.stem}-q{ftype}-{oracle.sha256(src)[:12]}.gguf"
        return oracle.made_once(out, lambda tmp: oracle.quantize(src, tmp, ftype))
    return get


# ---------------------------------------------------------------- the family table's record
# Each oracle test records (family, oracle); the outcomes of a run are merged into family-status.json,
# from which tools/family_table.py writes the family table (docs/families.md).
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
    if not _status or hasattr(session.config, "workerinput"):  # under pytest -n the controller writes it
        return
    import json
    path = CACHE / "family-status.json"
    old = json.loads(path.read_text()) if path.is_file() else {}
    for family, oracles in _status.items():
        for name, outcomes in oracles.items():
            old.setdefault(family, {})[name] = sorted(set(outcomes))
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(old, indent=1, sort_keys=True))


def _torch_only_model(tmp_path_factory, name: str, make) -> Path:
    """A tiny random model of a family transformers runs and the view cannot present, with GPT-2's tokenizer
    files (which OPT's and GPT-J's releases use)."""
    import shutil

    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    out = tmp_path_factory.mktemp(name)
    torch.manual_seed(0)
    make(transformers).save_pretrained(out)
    src = Path(__file__).resolve().parent.parent / "fixtures" / "tokenizers" / "gpt-2"
    for file in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copyfile(src / file, out / file)
    return out


@pytest.fixture(scope="session")
def opt_dir(tmp_path_factory):
    """OPT: llama.cpp has no architecture for it, the converter no class."""
    return _torch_only_model(tmp_path_factory, "opt", lambda t: t.OPTForCausalLM(t.OPTConfig(
        hidden_size=32, num_hidden_layers=2, ffn_dim=64, num_attention_heads=2, word_embed_proj_dim=32,
        max_position_embeddings=128, vocab_size=50272)))


@pytest.fixture(scope="session")
def gptj_dir(tmp_path_factory):
    """GPT-J: the pinned converter has no class for it."""
    return _torch_only_model(tmp_path_factory, "gptj", lambda t: t.GPTJForCausalLM(t.GPTJConfig(
        n_embd=32, n_layer=2, n_head=2, rotary_dim=8, n_positions=128, vocab_size=50400)))

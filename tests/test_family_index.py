"""The lazy family registry: hfview/families/_index.py is what tools/family_index.py writes from every family module
(so a new family module cannot be left out of it), the lookups through it answer as the full registry does for every
model type and architecture, and opening a checkpoint imports its own family module only."""
from __future__ import annotations

import dataclasses
import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from hfview import families
from test_structure import import_graph

ROOT = Path(__file__).resolve().parent.parent


def _tool():
    spec = importlib.util.spec_from_file_location("family_index", ROOT / "tools" / "family_index.py")
    tool = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tool)
    return tool


def test_index_is_current():
    assert _tool().render(_tool().derive()) == (ROOT / "hfview" / "families" / "_index.py").read_text(), \
        "stale: run python tools/family_index.py"


def test_render_names_every_family_module():
    """derive() reads the package listing itself: a family module that exists on disk is in the data, whatever the
    stored index says (a module written but not indexed makes test_index_is_current fail)."""
    modules = sorted(p.stem for p in (ROOT / "hfview" / "families").glob("*.py") if not p.stem.startswith("_"))
    data = _tool().derive()
    indexed = set(data["by_model_type"].values()) | set(data["by_architecture"].values())
    assert indexed == set(modules)


def _reference(model_type, architectures) -> families.Family | None:
    """The registry's answer stated over all families at once, as its docstring says it: among the families reading
    `model_type`, the one whose `architectures` holds architectures[0]; else the one named after the model type; else
    the first by module name."""
    readers = [f for f in families.FAMILIES if model_type in f.model_types]
    if architectures and isinstance(architectures, list) and isinstance(architectures[0], str):
        picked = [f for f in readers if architectures[0] in f.architectures]
        if picked:
            (one,) = picked
            return one
    named = [f for f in readers if f.name == model_type]
    return (named or readers or [None])[0]


def test_lazy_lookups_equal_the_full_registry():
    model_types = sorted({t for f in families.FAMILIES for t in f.model_types})
    architectures = sorted({a for f in families.FAMILIES for a in f.architectures})
    for model_type in model_types + ["no_such_type", None]:
        for stated in [None, [], [None], ["NoSuchForCausalLM"], *([a] for a in architectures)]:
            assert families.family_for(model_type, stated) is _reference(model_type, stated), (model_type, stated)
        expected = _reference(model_type, None)
        assert families.gguf_arch_for(model_type) == (expected.gguf_arch if expected else None), model_type
    assert len(model_types) > 100 and len(architectures) > 150  # the whole registry was read
    assert families.supported_model_types() == sorted(
        {t for f in families.FAMILIES if f.config_file == "config.json" for t in f.model_types})
    assert families.own_format_families() == sorted(
        [f for f in families.FAMILIES if f.config_file != "config.json"], key=lambda f: f.claims is None)


def test_two_families_on_one_architecture_are_refused():
    """The index is derived through lookup_tables, which refuses a model type two families read by one architecture
    (or one that another reads with no architectures stated): the converter would pick one class, the index one
    module, and neither answer would be the other's."""
    llama = families.load("llama")
    twin = dataclasses.replace(llama, name="llama_twin")
    with pytest.raises(ImportError, match="claimed by families 'llama' and 'llama_twin', both reading"):
        families.lookup_tables({"llama": llama, "llama_twin": twin})


def test_opening_a_checkpoint_imports_its_family_only(checkpoint):
    """A process that opens a Llama checkpoint imports the llama family module and no other (nor the parts only other
    families use)."""
    ckpt = checkpoint("llama-spm")
    code = ("import json, sys\nfrom hfview import HfCheckpoint\nHfCheckpoint(sys.argv[1])\n"
            "print(json.dumps(sorted(m for m in sys.modules if m.startswith('hfview.families.'))))")
    out = subprocess.run([sys.executable, "-c", code, str(ckpt)], capture_output=True, text=True, check=True,
                         env=dict(os.environ, PYTHONPATH=str(ROOT)))
    loaded = json.loads(out.stdout)
    assert [m for m in loaded if not m.startswith("hfview.families._")] == ["hfview.families.llama"], loaded
    graph, reached, todo = import_graph(), set(), ["hfview.families.llama"]
    while todo:  # what the llama module imports, at any depth
        for m in graph[todo.pop()] - reached:
            reached.add(m)
            todo.append(m)
    parts = {m for m in loaded if m.startswith("hfview.families._parts.")}
    assert parts and parts <= reached, parts - reached

"""Write docs/families.md: the family table, the coverage table, and each family's notes and measured ceilings.

    python -m pytest -q && python tools/family_table.py   # regenerate after a test run
    python tools/family_table.py --check                  # exit 1 where docs/families.md is not what it would write

Each fact in that file is read from the one place it is stated, so a measured number lives once:

* the registry (hfview.families.FAMILIES): name, model types, llama.cpp architecture, `architectures`,
  `notes`, `no_converter`, `refuse`, the runner facts; hfview.coverage.route_for for every design model type (the
  torch route's and the refused types' reasons are hfview.families.NOT_PRESENTED and NOT_COMPUTABLE);
* each family module's docstring (its first paragraph: what it reads, as which llama.cpp architecture);
* the family tests, read with `ast` (nothing in tests/ is imported): the docstring of tests/test_family_<x>.py (how
  the family is proven) and the docstrings of its tests held to a measured ceiling (tests/converter_ceiling.py),
  where those ceilings' numbers are stated;
* the fixture specs' `why` entries that state a measured NMSE (fixtures/families/<x>.py);
* hfview/torch_exp.py's docstring (A = -exp(A_log), computed as the converter computes it).

The marks come from ~/.cache/hfview/family-status.json (HFVIEW_CACHE; written by tests/conftest.py at the end of a
test run): a family is ✓ for an oracle when every test of that oracle passed, ✗ when one failed, "converter fails"
when the pinned converter itself cannot convert it (an expected failure with its reason in the test), and "n/a (no
converter class)" in the bytes column where the converter has no class for the family (Family.no_converter:
hfview's own mapping, with no converter file to be byte-identical to). A family or model type with no recorded
outcome keeps the marks the previous docs/families.md shows for it, so regenerating on a machine that has not run
every test changes only what it ran, and running the tool twice writes the same file.
"""
from __future__ import annotations

import argparse
import ast
import json
import re
import sys
from dataclasses import fields
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
OUT = ROOT / "docs" / "families.md"
START, END = "<!-- families:start -->", "<!-- families:end -->"
COVERAGE_START, COVERAGE_END = "<!-- coverage:start -->", "<!-- coverage:end -->"
NO_CONVERTER = "n/a (no converter class)"


# ---------------------------------------------------------------- the marks
def _status_file() -> Path:
    from hfview.cache import cache_dir

    return cache_dir() / "family-status.json"


def recorded() -> dict:
    """The outcomes the last test runs recorded on this machine: {family or model type: {oracle: [outcomes]}}."""
    path = _status_file()
    return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}


def _rows(text: str, start: str, end: str) -> dict[str, list[str]]:
    """{first cell: cells} of the table between two markers of `text` ({} where the markers are absent)."""
    if start not in text or end not in text:
        return {}
    body = text[text.index(start) + len(start):text.index(end)]
    rows = {}
    for line in body.splitlines():
        if line.startswith("| ") and not line.startswith("|---"):
            cells = [c.strip() for c in line.strip().strip("|").split(" | ")]
            rows[cells[0]] = cells
    return rows


def previous() -> str:
    return OUT.read_text(encoding="utf-8") if OUT.is_file() else ""


def mark(outcomes) -> str:
    """One cell from the set of a family's outcomes for one oracle."""
    if isinstance(outcomes, str):  # older record: a single outcome
        outcomes = [outcomes]
    outcomes = set(outcomes or [])
    if not outcomes or outcomes == {"skip"}:
        return "not run"
    if "fail" in outcomes:
        return "✗"
    if "skip" in outcomes:
        return "partly run"
    if outcomes == {"xfail"}:
        return "converter fails (strict xfail in the test)"
    if "xfail" in outcomes:
        return "✓ (converter fails on some fixtures: strict xfail)"
    return "✓"


def bytes_cell(fam, s: dict) -> str:
    """The bytes column: the oracle's mark, or n/a where the pinned converter has no class (never a ✓ without
    a byte oracle)."""
    if fam.no_converter:
        # a family of our own mapping may still be proven against another converter class's file of the same
        # weights, renamed as that class reads them (vaultgemma: GemmaModel)
        return f"{mark(s['bytes'])} (no class of its own: vs another class's file of the renamed weights)" \
            if s.get("bytes") else NO_CONVERTER
    return mark(s.get("bytes"))


def parity_cell(s: dict) -> str:
    """The parity column: the logits oracle's mark."""
    if s.get("logits"):
        return mark(s["logits"])
    return ("no transformers class: llama.cpp runs it, finite and deterministic" if mark(s.get("runs")) == "✓"
            else mark(s.get("runs")))


# ---------------------------------------------------------------- the two tables
def _keeps(fam, old_bytes: str) -> bool:
    """Whether a bytes cell of the previous file still fits the family: a mark of the converter's own class only
    where the pinned converter has one, n/a or another class's file only where it has none."""
    of_own_mapping = old_bytes == NO_CONVERTER or "no class of its own" in old_bytes
    return of_own_mapping == bool(fam.no_converter)


def table(status: dict | None = None, before: str | None = None) -> str:
    """The family table: every family of the registry, its model types, llama.cpp architecture and marks."""
    from hfview.families import FAMILIES

    status = recorded() if status is None else status
    old = _rows(previous() if before is None else before, START, END)
    rows = ["| family | model_type | llama.cpp arch | byte-identical | parity (transformers) |",
            "|---|---|---|---|---|"]
    for fam in sorted(FAMILIES, key=lambda f: f.name):
        s = status.get(fam.name, {})
        model_types = ", ".join(fam.model_types) if fam.config_file == "config.json" else f"({fam.config_file})"
        cells = [bytes_cell(fam, s), parity_cell(s)]
        if not s and fam.name in old and len(old[fam.name]) == 5 and _keeps(fam, old[fam.name][3]):
            cells = old[fam.name][3:]
        rows.append(f"| {fam.name} | {model_types} | `{fam.gguf_arch}` | {cells[0]} | {cells[1]} |")
    return "\n".join(rows)


def coverage_table(status: dict | None = None, before: str | None = None) -> str:
    """Every model type of the design, the route this build takes for it, and that route's last outcome."""
    from hfview.coverage import DESIGN_MODEL_TYPES, route_for
    from hfview.families import family_for

    status = recorded() if status is None else status
    old = _rows(previous() if before is None else before, COVERAGE_START, COVERAGE_END)
    rows = ["| model_type | route | status |", "|---|---|---|"]
    for model_type in DESIGN_MODEL_TYPES:
        route = route_for(model_type)
        kept = old.get(model_type)
        kept = kept[2] if kept and len(kept) == 3 and kept[1].startswith(route.kind) else None
        if route.kind == "view":
            fam = family_for(model_type)
            s = status.get(fam.name, {})
            shown = f"view: `{fam.name}` as llama.cpp `{fam.gguf_arch}`" + \
                (" (hfview's own mapping: the pinned converter has no class)" if fam.no_converter else "")
            cell = f"bytes {bytes_cell(fam, s)}; logits {mark(s.get('logits') or s.get('runs'))}"
            if not s and kept and _keeps(fam, kept.split(";")[0].removeprefix("bytes ")):
                cell = kept
        elif route.kind == "torch":
            cls, why = route.detail.split("; ", 1)
            shown = f"torch: transformers `{cls}` ({why})"
            outcomes = status.get(model_type, {}).get("torch")
            outcome = mark(outcomes)
            cell = {"✓": "generate runs it (tests/test_coverage.py)", "not run": "not run"}.get(outcome, outcome)
            if not outcomes and kept:
                cell = kept
        else:
            shown, cell = f"none: {route.detail}", "refused by the architecture gate, naming the view's list"
        rows.append(f"| {model_type} | {shown} | {cell} |")
    return "\n".join(rows)


# ---------------------------------------------------------------- prose read from the sources
_CODE = re.compile(r"(`[^`]*`)")
_STARS = re.compile(r"\*+")


def _star(m: re.Match) -> str:
    """A run of `*` with a space (or the line's end) on both sides opens no emphasis: it stays as written."""
    text, a, b = m.string, m.start(), m.end()
    if (a == 0 or text[a - 1].isspace()) and (b == len(text) or text[b].isspace()):
        return m.group(0)
    return "\\*" * len(m.group(0))


_TAG = re.compile(r"<(?=[A-Za-z/!?])")  # what could open an HTML tag or comment
_PUNCT_AFTER_BACKSLASH = re.compile(r"\\(?=[!-/:-@\[-`{-~])")


def _escape(text: str) -> str:
    """Docstring prose as Markdown that shows it as written. Outside code spans, a `<` that could open a tag, a `*`
    that could open emphasis, `__` and a backslash before punctuation are escaped, and so is a line that would open
    a heading or a `+` list. A docstring's own `* ` and `- ` bullets stay bullets."""
    out = []
    for line in text.splitlines():
        stripped = line.lstrip()
        indent = line[:len(line) - len(stripped)]
        bullet = ""
        if stripped.startswith(("* ", "- ")):
            bullet, stripped = stripped[:2], stripped[2:]
        parts = _CODE.split(stripped)
        for i in range(0, len(parts), 2):
            parts[i] = _STARS.sub(_star, _TAG.sub(r"\\<", _PUNCT_AFTER_BACKSLASH.sub(r"\\\\", parts[i]))) \
                .replace("__", "\\_\\_")
        stripped = "".join(parts)
        if stripped.startswith(("#", "+ ", "=")):
            stripped = "\\" + stripped
        out.append(indent + bullet + stripped)
    return "\n".join(out)


def _module_doc(path: Path) -> str:
    if not path.is_file():
        return ""
    return ast.get_docstring(ast.parse(path.read_text(encoding="utf-8"))) or ""


def _first_paragraph(doc: str) -> str:
    return doc.strip().split("\n\n")[0].strip()


def _ceiling_tests(path: Path) -> list[tuple[str, str]]:
    """(name, docstring) of the tests in `path` held to a measured ceiling or explaining one, in file order."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef):
            doc = ast.get_docstring(node) or ""
            if doc and ("ceiling" in node.name or "ceiling" in doc.lower()):
                found.append((node.lineno, node.name, doc))
    return [(name, doc) for _, name, doc in sorted(found)]


def _measured_fixture_choices(name: str) -> list[tuple[str, str]]:
    """(fixture, why) for the fixture spec `why` entries of a family that state a measured NMSE."""
    path = ROOT / "fixtures" / "families" / f"{name}.py"
    if not path.is_file():
        return []
    out = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        # a `why` dict: Spec(why={...}), beside it (_WHY = {...}), or why=dict(_WHY, key="...")
        if isinstance(node, ast.Dict):
            pairs = [(k, v) for k, v in zip(node.keys, node.values) if k is not None]
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "dict":
            pairs = [(ast.Constant(kw.arg), kw.value) for kw in node.keywords if kw.arg is not None]
        else:
            continue
        for key, value in pairs:
            try:
                k, v = ast.literal_eval(key), ast.literal_eval(value)
            except ValueError:
                continue
            if isinstance(k, str) and isinstance(v, str) and "NMSE" in v:
                out.append((value.lineno, k, v))
    return [(k, v) for _, k, v in sorted(out)]


# where a test file names the family whose oracles it runs
_RECORDS = re.compile(r'(?:record_property\("family", |oracle_tests\(|_logits_test\()"([^"]+)"')


def _test_files() -> dict[str, list[Path]]:
    """Family name -> its tests/test_family_*.py files: the file named after it, and a file named after one of its
    model types (kimi_k2 -> deepseek_v3) or recording its outcomes (lfm2_vl -> lfm2). A file of a model type no
    family presents is listed under that model type."""
    from hfview.families import FAMILIES

    names = {f.name for f in FAMILIES}
    by_model_type = {t: f.name for f in FAMILIES for t in f.model_types}
    out: dict[str, list[Path]] = {}
    for path in sorted((ROOT / "tests").glob("test_family_*.py")):
        stem = path.stem.removeprefix("test_family_")
        if stem in names:
            owner = stem
        elif stem in by_model_type:
            owner = by_model_type[stem]
        else:
            told = sorted(set(_RECORDS.findall(path.read_text(encoding="utf-8")))
                          & names)
            owner = told[0] if len(told) == 1 else stem
        out.setdefault(owner, []).append(path)
    # other test files that run a family's oracles (tests/test_view_llama.py: the Llama family)
    for path in sorted((ROOT / "tests").glob("test_*.py")):
        if path.stem.startswith("test_family_"):
            continue
        for name in sorted(set(_RECORDS.findall(path.read_text(encoding="utf-8")))
                           & names):
            out.setdefault(name, []).append(path)
    return out


def _runner_facts(fam) -> list[str]:
    """What the runner does beside reading the file, where the family declares it."""
    facts = getattr(fam, "runner", None)
    if facts is None:
        return []
    defaults = {f.name: f.default for f in fields(facts)}
    out = []
    applies = getattr(facts, "llama_cpp_applies_window", False)
    if applies:
        out.append("llama.cpp applies the model's sliding window: the context is not cut to it.")
    window_key = getattr(facts, "window_key", None)
    if window_key and window_key != defaults.get("window_key") and not applies:
        out.append(f"The model's attention window (`{window_key}`) is not applied by llama.cpp: the runner's default "
                   f"context stops at it.")
    if getattr(facts, "load_kv", None) is not defaults.get("load_kv", None):
        out.append("hfview's runner supplies KV overrides at load (`Family.load_kv`); `inspect` and `export` print "
                   "the `--override-kv` llama-cli needs.")
    if getattr(facts, "load_arrays", None) is not defaults.get("load_arrays", None):
        out.append("hfview's runner hands llama.cpp arrays of the same length read differently at load "
                   "(`Family.load_arrays`: no offset moves); llama-cli cannot override an array.")
    return out


def _refusals(fam) -> list[str]:
    out = []
    for r in getattr(fam, "refuse", ()) or ():
        allowed = "" if callable(r.allowed) else f" (allowed: {', '.join(repr(a) for a in r.allowed)})"
        out.append(f"`{r.key}`{allowed}: {_escape(r.reason)}")
    return out


def _rel(path: Path) -> str:
    return "../" + path.relative_to(ROOT).as_posix()


def family_section(fam, tests: list[Path]) -> str:
    module = ROOT / "hfview" / "families" / f"{fam.name}.py"
    fixture = ROOT / "fixtures" / "families" / f"{fam.name}.py"
    links = [f"[family]({_rel(module)})"] + ([f"[fixtures]({_rel(fixture)})"] if fixture.is_file() else []) + \
        [f"[tests]({_rel(p)})" if p.stem == f"test_family_{fam.name}" else
         f"[{p.stem.removeprefix('test_family_')} tests]({_rel(p)})" if p.stem.startswith("test_family_") else
         f"[{p.name}]({_rel(p)})" for p in tests]
    model_types = ", ".join(f"`{t}`" for t in fam.model_types) if fam.config_file == "config.json" \
        else f"`{fam.config_file}`"
    lines = [f"### {fam.name}", "",
             f"{model_types} → llama.cpp `{fam.gguf_arch}`"
             + (f"; reads {', '.join(fam.architectures)}" if fam.architectures else "") + ". " + " · ".join(links),
             ""]
    summary = _first_paragraph(_module_doc(module))
    if summary:
        lines += [_escape(summary), ""]
    if fam.no_converter:
        lines += [f"No converter class: {_escape(fam.no_converter)}", ""]
    items = [f"`{key}`: {_escape(text)}" for key, text in sorted(fam.notes.items())]
    items += [f"Refused: {r}" for r in _refusals(fam)]
    items += _runner_facts(fam)
    if items:
        lines += [f"* {item}" for item in items] + [""]
    for path in tests:
        doc = _module_doc(path)
        if doc:
            lines += [f"How it is proven ({path.relative_to(ROOT).as_posix()}):", "", _escape(doc), ""]
        ceilings = _ceiling_tests(path)
        if ceilings:
            lines += ["Measured ceilings and their causes:", ""]
            lines += [f"* `{name}`: " + _escape(doc).replace("\n", "\n  ") for name, doc in ceilings] + [""]
    choices = _measured_fixture_choices(fam.name)
    if choices:
        lines += ["Fixture choices, measured:", ""]
        lines += [f"* `{key}`: {_escape(why)}" for key, why in choices] + [""]
    return "\n".join(lines)


def _unpresented_section(model_type: str, tests: list[Path]) -> str:
    from hfview.coverage import route_for

    route = route_for(model_type)
    lines = [f"### {model_type}", "", f"Route: {route.kind}. " + " · ".join(
        f"[tests]({_rel(p)})" for p in tests), ""]
    for path in tests:
        doc = _module_doc(path)
        if doc:
            lines += [_escape(doc), ""]
    return "\n".join(lines)


# ---------------------------------------------------------------- the file
INTRO = """\
<!-- Generated by tools/family_table.py from the family registry, the family modules and their tests: do not edit.
     Edit the source it names and run `python tools/family_table.py`. -->
# Families

Every family hfview presents to llama.cpp, every model type of the design and the route it takes, and each family's
notes: what it reads, how it is proven, and the ceilings measured where llama.cpp running the pinned converter's own
file misses transformers by more than the ordinary bar. A family is supported only when both oracles pass on it
(`tests/family_oracle.py`, each family's `tests/test_family_*.py`):

* **bytes**: `hfview export` equals the pinned converter's file (llama-cpp-python 0.3.36's vendored
  `convert_hf_to_gguf.py`), sha256, at every outtype (f32, f16, bf16, auto);
* **logits**: llama.cpp fed from the view (no file) against transformers' forward pass in float32, NMSE < 1e-4 at
  every position of a 16-token prompt; or, where llama.cpp running the converter's own file misses that bar, no
  worse than that file, measured on every run (`tests/converter_ceiling.py`; the ceiling must itself miss the bar,
  else the test says to drop it).

Where transformers has no class for a family, the reference is an equivalent transformers class over the same
weights (a twin), or the family's forward composed from transformers' modules; each test file says which and why.
Where the pinned converter itself fails, the export test expects that failure strictly, and the bytes are checked
against the converter run on the checkpoint with the one thing it chokes on put right; the test names it.

Marks are the last recorded test outcomes; regenerate after a test run: `python -m pytest -q && python
tools/family_table.py`."""

COVERAGE_INTRO = """\
The design's architecture gate names {n} model types (`hfview/coverage.py`). Each takes one route in this build:
**view** (llama.cpp fed from the view; both oracles in the family's tests), **torch** (transformers runs it through
`hfview generate`'s fallback; `inspect`, `export` and `parity` refuse it, since llama.cpp cannot run it through
hfview; the test is a smoke test on a tiny random model, not a parity claim), or **none** (refused by the
architecture gate, with the reason). `tests/test_coverage.py` fails when a route here is not what the build does."""


def render(status: dict | None = None, before: str | None = None) -> str:
    """docs/families.md: from the outcomes `status` (default: this machine's record), keeping the marks of `before`
    (default: the file as it is) for what the record does not hold."""
    from hfview.coverage import DESIGN_MODEL_TYPES, route_for
    from hfview.families import FAMILIES

    status = recorded() if status is None else status
    before = previous() if before is None else before
    tests = _test_files()
    names = {f.name for f in FAMILIES}
    exp_doc = _module_doc(ROOT / "hfview" / "torch_exp.py")
    parts = [INTRO, "", "## Family table", "", START, table(status, before), END, "",
             "## Every model type of the design", "", COVERAGE_INTRO.format(n=len(DESIGN_MODEL_TYPES)), "",
             COVERAGE_START, coverage_table(status, before), COVERAGE_END, "",
             "## Shared by several families", "",
             "`A = -exp(A_log)` (Mamba, Mamba-2, Jamba, Falcon-H1, Granite 4.0 H, Nemotron-H, the Gated DeltaNet "
             "families) is computed with torch's exponential where torch is installed, as the converter computes it "
             "([hfview/torch_exp.py](../hfview/torch_exp.py)); without torch the view's value is the correctly "
             "rounded one and may differ from the converter's file in those elements.", "",
             _escape(exp_doc.split("\n\n", 1)[-1].strip()), "",
             "## Per family", ""]
    for fam in sorted(FAMILIES, key=lambda f: f.name):
        parts += [family_section(fam, tests.get(fam.name, []))]
    others = sorted(k for k in tests if k not in names and route_for(k).kind != "view"
                    and k in DESIGN_MODEL_TYPES)
    if others:
        parts += ["## Model types no family presents, with tests of their own", ""]
        parts += [_unpresented_section(k, tests[k]) for k in others]
    return "\n".join(parts).rstrip("\n") + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="write nothing; exit 1 where docs/families.md differs")
    args = parser.parse_args(argv)
    from tools._generated import write_or_check

    return write_or_check({OUT: render()}, "family_table.py", args.check)


if __name__ == "__main__":
    sys.exit(main())

"""Write the README's family table from the registry and the last test outcomes.

    python -m pytest -q tests/ && python tools/family_table.py

Outcomes come from ~/.cache/hfview/family-status.json (written by tests/conftest.py): a family is ✓
for an oracle when every test of that oracle passed, ✗ when one failed, "converter fails" when the
pinned converter itself cannot convert it (an expected failure with its reason in the test), and "n/a (no converter
class)" in the bytes column where the converter has no class for the family (Family.no_converter: hfview's own
mapping, with no converter file to be byte-identical to).
"""
from __future__ import annotations

import json
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
CACHE = Path(os.environ.get("HFVIEW_CACHE", Path.home() / ".cache" / "hfview"))
START, END = "<!-- families:start -->", "<!-- families:end -->"


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


NO_CONVERTER = "n/a (no converter class)"


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


def table() -> str:
    from hfview.families import FAMILIES

    status = json.loads((CACHE / "family-status.json").read_text()) if (CACHE / "family-status.json").is_file() else {}
    rows = ["| family | model_type | llama.cpp arch | byte-identical | parity (transformers) |",
            "|---|---|---|---|---|"]
    status = {k: v for k, v in status.items()}
    for fam in sorted(FAMILIES, key=lambda f: f.name):
        s = status.get(fam.name, {})
        parity = parity_cell(s)
        model_types = ", ".join(fam.model_types) if fam.config_file == "config.json" else f"({fam.config_file})"
        rows.append(f"| {fam.name} | {model_types} | `{fam.gguf_arch}` | {bytes_cell(fam, s)} | {parity} |")
    return "\n".join(rows)


COVERAGE_START, COVERAGE_END = "<!-- coverage:start -->", "<!-- coverage:end -->"


def coverage_table() -> str:
    """Every model type of the design, the route this build takes for it, and that route's last outcome."""
    from hfview.coverage import DESIGN_MODEL_TYPES, route_for
    from hfview.families import family_for

    status = json.loads((CACHE / "family-status.json").read_text()) if (CACHE / "family-status.json").is_file() else {}
    rows = ["| model_type | route | status |", "|---|---|---|"]
    for model_type in DESIGN_MODEL_TYPES:
        route = route_for(model_type)
        if route.kind == "view":
            fam = family_for(model_type)
            s = status.get(fam.name, {})
            shown = f"view: `{fam.name}` as llama.cpp `{fam.gguf_arch}`" + \
                (" (hfview's own mapping: the pinned converter has no class)" if fam.no_converter else "")
            cell = f"bytes {bytes_cell(fam, s)}; logits {mark(s.get('logits') or s.get('runs'))}"
        elif route.kind == "torch":
            cls, why = route.detail.split("; ", 1)
            shown = f"torch: transformers `{cls}` ({why})"
            outcome = mark(status.get(model_type, {}).get("torch"))
            cell = {"✓": "generate runs it (tests/test_coverage.py)", "not run": "not run"}.get(outcome, outcome)
        else:
            shown, cell = f"none: {route.detail}", "refused by the architecture gate, naming the view's list"
        rows.append(f"| {model_type} | {shown} | {cell} |")
    return "\n".join(rows)


def _replace(text: str, start: str, end: str, body: str) -> str:
    a, b = text.index(start) + len(start), text.index(end)
    return text[:a] + "\n" + body + "\n" + text[b:]


def main() -> None:
    readme = ROOT / "README.md"
    text = readme.read_text()
    text = _replace(text, START, END, table())
    readme.write_text(_replace(text, COVERAGE_START, COVERAGE_END, coverage_table()))
    print(table())


if __name__ == "__main__":
    main()

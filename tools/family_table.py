"""Write the README's family table from the registry and the last test outcomes.

    python -m pytest -q tests/ && python tools/family_table.py

Outcomes come from ~/.cache/hfview/family-status.json (written by tests/conftest.py): a family is ✓
for an oracle when every test of that oracle passed, ✗ when one failed, "converter fails" when the
pinned converter itself cannot convert it (an expected failure with its reason in the test).
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


def table() -> str:
    from hfview.families import FAMILIES

    status = json.loads((CACHE / "family-status.json").read_text()) if (CACHE / "family-status.json").is_file() else {}
    rows = ["| family | model_type | llama.cpp arch | byte-identical | parity (transformers) |",
            "|---|---|---|---|---|"]
    status = {k: v for k, v in status.items()}
    for fam in sorted(FAMILIES, key=lambda f: f.name):
        s = status.get(fam.name, {})
        parity = mark(s.get("logits")) if s.get("logits") else \
            ("no transformers class: llama.cpp runs it, finite and deterministic" if mark(s.get("runs")) == "✓"
             else mark(s.get("runs")))
        model_types = ", ".join(fam.model_types) if fam.config_file == "config.json" else f"({fam.config_file})"
        rows.append(f"| {fam.name} | {model_types} | `{fam.gguf_arch}` | {mark(s.get('bytes'))} | {parity} |")
    return "\n".join(rows)


def main() -> None:
    readme = ROOT / "README.md"
    text = readme.read_text()
    a, b = text.index(START) + len(START), text.index(END)
    readme.write_text(text[:a] + "\n" + table() + "\n" + text[b:])
    print(table())


if __name__ == "__main__":
    main()

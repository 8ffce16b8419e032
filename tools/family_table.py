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
MARK = {"pass": "✓", "fail": "✗", "xfail": "converter fails (see test)", "skip": "not run", None: "not run"}


def table() -> str:
    from hfview.families import FAMILIES

    status = json.loads((CACHE / "family-status.json").read_text()) if (CACHE / "family-status.json").is_file() else {}
    rows = ["| family | model_type | llama.cpp arch | byte-identical | parity (transformers) |",
            "|---|---|---|---|---|"]
    for fam in sorted(FAMILIES, key=lambda f: f.name):
        s = status.get(fam.name, {})
        rows.append(f"| {fam.name} | {', '.join(fam.model_types)} | `{fam.gguf_arch}` | "
                    f"{MARK[s.get('bytes')]} | {MARK[s.get('logits')]} |")
    return "\n".join(rows)


def main() -> None:
    readme = ROOT / "README.md"
    text = readme.read_text()
    a, b = text.index(START) + len(START), text.index(END)
    readme.write_text(text[:a] + "\n" + table() + "\n" + text[b:])
    print(table())


if __name__ == "__main__":
    main()

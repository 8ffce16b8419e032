"""What every generator in tools/ shares: its outputs written where they differ from the files, or with --check
nothing written and each stale file named (exit 1), so a test and a person see one verdict."""
from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def write_or_check(outputs: dict[Path, str], tool: str, check: bool) -> int:
    """`outputs`: each generated file's path and the text `tool` (its name under tools/) derives for it."""
    stale = [p for p, text in outputs.items() if not p.is_file() or p.read_text(encoding="utf-8") != text]
    if check:
        for p in stale:
            print(f"{p.relative_to(ROOT)} is not what tools/{tool} writes: run python tools/{tool}", file=sys.stderr)
        return 1 if stale else 0
    for p in outputs.keys() - set(stale):
        print(f"{p.relative_to(ROOT)}: current")
    for p in stale:
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(outputs[p], encoding="utf-8")
        print(f"wrote {p.relative_to(ROOT)} ({outputs[p].count(chr(10))} lines)")
    return 0

"""A fixture checkpoint with its config.json changed: the other files linked, not copied (refusal tests)."""
from __future__ import annotations

import json
from pathlib import Path

_DROP = object()


def variant(src: Path, dst: Path, name: str = "config.json", **changes) -> Path:
    """`dst` holding `src`'s files, `name` (a JSON file) with `changes` applied (value DROP removes a key)."""
    dst.mkdir(parents=True, exist_ok=True)
    for f in src.iterdir():
        if f.name != name:
            (dst / f.name).symlink_to(f)
    data = json.loads((src / name).read_text(encoding="utf-8"))
    for key, value in changes.items():
        if value is _DROP:
            data.pop(key, None)
        else:
            data[key] = value
    (dst / name).write_text(json.dumps(data), encoding="utf-8")
    return dst


DROP = _DROP

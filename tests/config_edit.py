"""A fixture checkpoint with its config.json edited: the other files linked, not copied (they are only read)."""
from __future__ import annotations

import json
from pathlib import Path


def edited(model_dir: Path, out: Path, edit) -> Path:
    """`out` holds model_dir's files, config.json as edit(config) leaves it (edit changes the dict in place)."""
    out.mkdir(parents=True)
    for f in Path(model_dir).iterdir():
        if f.name != "config.json":
            (out / f.name).symlink_to(f)
    config = json.loads((Path(model_dir) / "config.json").read_text(encoding="utf-8"))
    edit(config)  # in place (its return value is ignored)
    (out / "config.json").write_text(json.dumps(config, indent=2), encoding="utf-8")
    return out

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


def assert_refused(src: Path, tmp_path: Path, message: str, **changes) -> None:
    """HfCheckpoint refuses `src` with `changes` made to its config.json (None drops a key) by a ConfigError
    whose text matches `message`."""
    import pytest

    from hfview import HfCheckpoint
    from hfview.errors import ConfigError

    changes = {k: (DROP if v is None else v) for k, v in changes.items()}
    with pytest.raises(ConfigError, match=message):
        HfCheckpoint(variant(src, tmp_path / "variant", **changes))


def weights_variant(src: Path, dst: Path, edit) -> Path:
    """`dst` holding `src`'s files linked, its model.safetensors rewritten as edit(tensors) (name -> torch tensor)."""
    from safetensors.torch import load_file, save_file

    dst.mkdir(parents=True, exist_ok=True)
    for f in src.iterdir():
        if f.name != "model.safetensors":
            (dst / f.name).symlink_to(f)
    save_file(edit(load_file(str(src / "model.safetensors"))), str(dst / "model.safetensors"),
              metadata={"format": "pt"})
    return dst

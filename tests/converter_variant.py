"""The converter's output for a family it fails on only because transformers 5 renames a config key away.

`convert_as_read(model_dir, outtype, tmp_path, restore)` runs the pinned converter on a copy of the
checkpoint whose config.json is replaced by what transformers' AutoConfig presents (`to_dict()`, the
converter's own reading) plus the keys `restore(config_json, presented)` returns, under a model_type
transformers does not know, so the converter takes that dict as it is (its plain-config.json fallback)
instead of re-reading it through the config class. The copy keeps the directory name (general.name comes
from it). The result is what the converter would write had the renamed key survived: the byte oracle for
the view of such a family.
"""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import oracle

UNKNOWN_MODEL_TYPE = "hfview-oracle-unregistered"


def convert_as_read(model_dir: Path, outtype: str, tmp_path: Path, restore) -> Path:
    from transformers import AutoConfig

    model_dir = Path(model_dir)
    stated = json.loads((model_dir / "config.json").read_text(encoding="utf-8"))
    presented = AutoConfig.from_pretrained(model_dir).to_dict()
    presented.pop("_name_or_path", None)
    presented.update(restore(stated, presented))
    presented["model_type"] = UNKNOWN_MODEL_TYPE
    copy = tmp_path / "variant" / model_dir.name
    shutil.copytree(model_dir, copy)
    (copy / "config.json").write_text(json.dumps(presented, indent=2, sort_keys=True), encoding="utf-8")
    return oracle.convert_cached(copy, outtype)

"""hfview's cache directory: what is costly to compute and depends only on what its key names.

HFVIEW_CACHE, default ~/.cache/hfview. Entries are written whole or not at all (a reader never sees half of one),
and an unwritable cache only costs the next process the computation again.
"""
from __future__ import annotations

import os
from pathlib import Path


def cache_dir() -> Path:
    return Path(os.environ.get("HFVIEW_CACHE") or Path.home() / ".cache" / "hfview")


def write_whole(path: Path, write) -> bool:
    """Create `path` through `write(file)` on a partial file renamed into place; False where the cache cannot be
    written (the caller goes on without it)."""
    partial = path.with_name(f"{path.name}.{os.getpid()}.partial")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(partial, "wb") as f:
            write(f)
        os.replace(partial, path)
        return True
    except OSError:
        try:
            partial.unlink(missing_ok=True)
        except OSError:
            pass
        return False

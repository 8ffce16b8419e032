"""Writing the view to a GGUF file: streamed one tensor chunk at a time, into `OUT.partial`, renamed at the
end, so a failure never leaves a half-written file under the real name."""
from __future__ import annotations

import os
from pathlib import Path

from .checkpoint import HfCheckpoint


def export(ckpt: HfCheckpoint, out: str | Path, *, progress: bool = False) -> Path:
    out = Path(out)
    partial = out.with_name(out.name + ".partial")
    bar = None
    if progress:
        from tqdm import tqdm
        bar = tqdm(total=ckpt.size, unit="B", unit_scale=True, desc=f"export {out.name}")
    try:
        with open(partial, "wb") as f:
            for piece, _name in ckpt.iter_file():
                f.write(piece)
                if bar:
                    bar.update(len(piece))
            f.flush()
            os.fsync(f.fileno())
        if partial.stat().st_size != ckpt.size:
            raise OSError(f"{partial}: wrote {partial.stat().st_size} bytes, the view has {ckpt.size}")
        os.replace(partial, out)
    except BaseException:
        partial.unlink(missing_ok=True)
        raise
    finally:
        if bar:
            bar.close()
    return out

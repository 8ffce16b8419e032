"""Writing the view to a GGUF file: streamed one tensor chunk at a time, into `OUT.partial`, renamed at the
end, so a failure never leaves a half-written file under the real name.

The file is written with O_DIRECT where the filesystem allows it: its bytes go from one aligned buffer to the
disk without passing through the page cache. Buffered writes of a multi-GB file are throttled by writeback (and
push the checkpoint's own pages out of the cache); direct writes are not.
"""
from __future__ import annotations

import errno
import fcntl
import mmap
import os
from pathlib import Path

from .checkpoint import HfCheckpoint

_BLOCK = 4096  # O_DIRECT's alignment of buffer, length and offset: a multiple of any disk's logical block
_STAGING_BYTES = 8 << 20


class _DirectWriter:
    """Whole aligned blocks written from a page-aligned buffer; the last block is padded, then the file cut to
    its size. Where O_DIRECT is refused (tmpfs, some network filesystems), the same writes go buffered."""

    def __init__(self, path: Path):
        direct = getattr(os, "O_DIRECT", 0)
        flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_CLOEXEC", 0)
        try:
            self.fd = os.open(path, flags | direct, 0o644)
        except OSError as e:
            if not direct or e.errno != errno.EINVAL:
                raise
            self.fd = os.open(path, flags, 0o644)
        self.staging = mmap.mmap(-1, _STAGING_BYTES)  # anonymous: page-aligned
        self.view = memoryview(self.staging)
        self.filled = 0
        self.size = 0

    def write(self, piece) -> None:
        piece = memoryview(piece).cast("B")
        while len(piece):
            take = min(len(piece), _STAGING_BYTES - self.filled)
            self.view[self.filled:self.filled + take] = piece[:take]
            self.filled += take
            self.size += take
            piece = piece[take:]
            if self.filled == _STAGING_BYTES:
                self._flush(_STAGING_BYTES)

    def _flush(self, n: int) -> None:
        done = 0
        while done < n:
            try:
                done += os.write(self.fd, self.view[done:n])
            except OSError as e:
                # opened direct, refused at the first write: clear O_DIRECT and write the same bytes buffered
                if e.errno != errno.EINVAL or not fcntl.fcntl(self.fd, fcntl.F_GETFL) & getattr(os, "O_DIRECT", 0):
                    raise
                fcntl.fcntl(self.fd, fcntl.F_SETFL, fcntl.fcntl(self.fd, fcntl.F_GETFL) & ~os.O_DIRECT)
        self.filled = 0

    def finish(self) -> None:
        """Write the tail, padded to a block, cut the file to the bytes given, and wait until it is on disk."""
        if self.filled:
            tail = -(-self.filled // _BLOCK) * _BLOCK
            self.view[self.filled:tail] = bytes(tail - self.filled)
            self._flush(tail)
        os.ftruncate(self.fd, self.size)
        os.fsync(self.fd)

    def close(self) -> None:
        self.view.release()
        self.staging.close()
        os.close(self.fd)


def export(ckpt: HfCheckpoint, out: str | Path, *, progress: bool = False) -> Path:
    out = Path(out)
    partial = out.with_name(out.name + ".partial")
    bar = None
    if progress:
        from tqdm import tqdm
        bar = tqdm(total=ckpt.size, unit="B", unit_scale=True, desc=f"export {out.name}")
    try:
        writer = _DirectWriter(partial)
        try:
            for piece, _name in ckpt.iter_file():
                writer.write(piece)
                if bar:
                    bar.update(len(piece))
            writer.finish()
        finally:
            writer.close()
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

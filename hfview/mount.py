"""`hfview mount`: checkpoints as GGUF files under a FUSE mount point, for any tool that takes a path (llama.cpp's
tools, ollama's FROM, gguf-py), with no file written.

One folder per checkpoint, named after it, holds `<name>.gguf` (the converter's file at --outtype) and
`<name>-<TYPE>.gguf` per --quant (llama-quantize's file): read-only, sizes known at mount, bytes made on read
(hfview.mount_file). libfuse 3 through mfusepy: libfuse's own multi-threaded loop, 1 MiB reads, and the kernel's page
cache kept between opens (keep_cache), dropped where a checkpoint file changed under the mount.
"""
from __future__ import annotations

import ctypes
import errno
import logging
import os
import shutil
import stat
import subprocess
import sys
import threading
import time
from pathlib import Path

import click

from .errors import HfviewError
from .mount_file import ChangedUnderMount, ChunkCache, MountedFile, checkpoint_files

log = logging.getLogger("hfview.mount")

INSTALL = "install Debian's fuse3 (apt-get install fuse3) and the binding (pip install 'hfview[mount]')"
CACHE_MB = 512  # made chunks (rearranged, converted, quantized tensors) kept, all files of a mount together
_WATCH_SECONDS = 1.0  # how often every checkpoint file is checked, to drop the kernel's cached pages of a changed one
_READ_BYTES = 1 << 20  # the largest read the kernel sends (libfuse's max_write default: 256 pages)


class MountError(HfviewError):
    """FUSE is not available here, or the mount point cannot be used."""


def fuse_missing() -> str | None:
    """Why this machine cannot mount (what to install), or None."""
    if not Path("/dev/fuse").exists():
        return "no /dev/fuse on this machine (the fuse kernel module is not loaded, or a container does not pass it)"
    try:
        mfusepy = _mfusepy()
    except ImportError:
        return f"the FUSE binding mfusepy is not installed: {INSTALL}"
    except OSError as e:  # mfusepy found no libfuse
        return f"libfuse is not installed ({e}): {INSTALL}"
    if mfusepy.fuse_version_major != 3:
        return f"mfusepy loaded libfuse {mfusepy.fuse_version_major}, not libfuse 3: {INSTALL}"
    if os.geteuid() != 0 and shutil.which("fusermount3") is None:
        return f"fusermount3 is not installed (a user's mount needs it): {INSTALL}"
    return None


def _mfusepy():
    # mfusepy takes libfuse 2 where both are installed unless told: this module speaks libfuse 3
    os.environ.setdefault("FUSE_LIBRARY_NAME", "fuse3")
    import mfusepy

    return mfusepy


# ---------------------------------------------------------------- what is mounted
def open_files(models: list[Path], outtype: str, quants: list[str], imatrix: str | None,
               cache: ChunkCache) -> dict[str, dict[str, MountedFile]]:
    """{folder: {file name: MountedFile}}: each checkpoint's view at `outtype` and one per quant type."""
    from .checkpoint import HfCheckpoint

    tree: dict[str, dict[str, MountedFile]] = {}
    for model in models:
        name = model.resolve().name
        if name in tree:
            raise MountError(f"two checkpoints are named {name!r} ({model}): a mount holds one folder per name")
        files = checkpoint_files(model)  # stamped before the views read them: a change while opening shows too
        views = {f"{name}.gguf": HfCheckpoint(model, outtype, vocab_apart=False)}
        for quant in quants:
            views[f"{name}-{quant.upper()}.gguf"] = HfCheckpoint(model, outtype, quant=quant, imatrix=imatrix,
                                                                 vocab_apart=False)
        tree[name] = {file: MountedFile(view, dict(files), cache) for file, view in views.items()}
        for mounted in tree[name].values():
            mounted.check()
    return tree


class GgufTree:
    """The FUSE operations (mfusepy calls them from libfuse's threads): a read-only tree of folders of files."""

    use_ns = True

    def __init__(self, tree: dict[str, dict[str, MountedFile]], mountpoint: Path):
        self.tree, self.mountpoint = tree, mountpoint
        self.files = {f"/{folder}/{name}": f for folder, files in tree.items() for name, f in files.items()}
        self.by_handle = list(self.files.values())  # an open file's fh: its index here
        self.handles = {path: i for i, path in enumerate(self.files)}
        self.mtime = {path: max(st[3] for st in f.files.values()) for path, f in self.files.items()}
        self.started = time.time_ns()
        self.fuse = None  # libfuse's struct fuse *, for invalidating a changed file's cached pages
        self.mounted = False
        self._stop = threading.Event()
        self._said: set[str] = set()  # files whose change is logged already (once each: readers may retry)

    # the mount's life
    def init_with_config(self, conn, config) -> None:
        self.fuse = ctypes.c_void_p(_mfusepy()._libfuse.fuse_get_context().contents.fuse)
        self.mounted = True
        conn.max_read = conn.max_readahead = _READ_BYTES  # (max_read: as the mount option says, or libfuse refuses)
        threading.Thread(target=self._watch, name="hfview-watch", daemon=True).start()

    def destroy(self, path) -> None:
        self._stop.set()

    def _watch(self) -> None:
        """Check every file of every checkpoint now and then: where one changed, its mounted files answer EIO and
        the kernel drops what it cached of them (a reader that mapped one then gets SIGBUS, not stale bytes)."""
        libfuse = _mfusepy()._libfuse
        self._readahead()
        log.info("mounted at %s", self.mountpoint)
        dropped = set()  # files whose cached pages are dropped already
        while not self._stop.wait(_WATCH_SECONDS):
            for path, f in self.files.items():
                if path in dropped:
                    continue
                try:
                    f.check()
                except ChangedUnderMount as e:
                    self._say(path, e)
                    # (here, not in the read or open that found it: the kernel drops the pages in the caller's
                    # thread, which may wait on reads of them that libfuse's threads are serving)
                    libfuse.fuse_invalidate_path(self.fuse, path.encode())
                    dropped.add(path)

    def _readahead(self) -> None:
        """The kernel reads ahead of a FUSE reader at most its device's read_ahead_kb (128 KiB by default, whatever
        max_readahead says): 1 MiB doubled a cold sequential read (1.07 GB bf16 view: 0.72 -> 1.4 GB/s). Root may
        set it; another user's mount keeps the default."""
        try:
            device = os.stat(self.mountpoint).st_dev  # (from this thread: it waits for the mount's init to finish)
            knob = Path(f"/sys/class/bdi/{os.major(device)}:{os.minor(device)}/read_ahead_kb")
            knob.write_text(str(_READ_BYTES >> 10))
        except OSError as e:
            log.info("readahead left at the kernel's default (%s)", e.strerror)

    # the tree
    def getattr(self, path: str, fh=None) -> dict:
        if path == "/" or path[1:] in self.tree:
            return {"st_mode": stat.S_IFDIR | 0o555, "st_nlink": 2, "st_mtime": self.started}
        f = self.files.get(path)
        if f is None:
            raise OSError(errno.ENOENT, path)
        return {"st_mode": stat.S_IFREG | 0o444, "st_nlink": 1, "st_size": f.size, "st_mtime": self.mtime[path],
                "st_blocks": -(-f.size // 512), "st_blksize": _READ_BYTES}

    def readdir(self, path: str, fh) -> list[str]:
        if path == "/":
            return [".", "..", *self.tree]
        if path[1:] in self.tree:
            return [".", "..", *self.tree[path[1:]]]
        raise OSError(errno.ENOENT, path)

    def statfs(self, path: str) -> dict:
        total = sum(f.size for f in self.files.values())
        return {"f_bsize": _READ_BYTES, "f_frsize": 4096, "f_blocks": -(-total // 4096), "f_bfree": 0,
                "f_bavail": 0, "f_files": len(self.files), "f_ffree": 0, "f_namemax": 255}

    # the files
    def open(self, path: str, fi) -> int:
        f = self.files.get(path)
        if f is None:
            raise OSError(errno.ENOENT, path)
        if fi.flags & os.O_ACCMODE != os.O_RDONLY:
            raise OSError(errno.EROFS, path)
        self._checked(path, f.check)
        fi.fh = self.handles[path]
        fi.keep_cache = 1  # unchanged since the last open (just checked): what the kernel holds of it is still true
        return 0

    def read(self, path: str, out: memoryview, offset: int, fh: int) -> int:
        """Fill `out` (libfuse's buffer: DirectReadFUSE) from `offset`."""
        return self._checked(path, self.by_handle[fh].readinto, offset, out)

    def _say(self, path: str, e: ChangedUnderMount) -> None:
        if path not in self._said:
            self._said.add(path)
            log.error("%s%s: %s", self.mountpoint, path, e)

    def _checked(self, path, call, *args):
        try:
            return call(*args)
        except ChangedUnderMount as e:
            self._say(path, e)
            raise OSError(errno.EIO, str(e)) from None
        except HfviewError as e:  # a shard unreadable or truncated: said, and EIO to the reader
            log.error("%s%s: %s", self.mountpoint, path, " ".join(str(e).split()))
            raise OSError(errno.EIO, str(e)) from None


def _fuse_class():
    mfusepy = _mfusepy()

    class DirectReadFUSE(mfusepy.FUSE):
        """mfusepy's FUSE, but a read fills libfuse's buffer in place (mfusepy's own read takes bytes back and
        copies them: one more copy of every byte served)."""

        def read(self, path, buf, size, offset, fip):
            out = memoryview((ctypes.c_char * size).from_address(ctypes.addressof(buf.contents))).cast("B")
            path = path.decode(self.encoding, self.errors) if path else None
            return self.operations.read(path, out, offset, fip.contents.fh)

    return DirectReadFUSE


def serve(tree: dict[str, dict[str, MountedFile]], mountpoint: Path) -> None:
    """Mount `tree` at `mountpoint` and serve it until unmounted (hfview umount) or interrupted (Ctrl-C, SIGTERM:
    libfuse unmounts)."""
    options = dict(foreground=True, ro=True, fsname="hfview", subtype="hfview", default_permissions=True,
                   allow_other=os.geteuid() == 0,  # root's mount is read by ollama's own user too
                   attr_timeout=86400, entry_timeout=86400, negative_timeout=1, max_read=_READ_BYTES)
    operations = GgufTree(tree, mountpoint)
    try:
        _fuse_class()(operations, str(mountpoint), raw_fi=True, **options)
    except RuntimeError as e:  # mfusepy: libfuse's fuse_main returned non-zero
        if not operations.mounted:
            raise MountError(f"libfuse could not mount {mountpoint} (fuse_main status {e}; libfuse's own message is "
                             f"above)") from None
        # a signal (Ctrl-C, SIGTERM) ends libfuse's loop with a non-zero status, once it has unmounted


# ---------------------------------------------------------------- the commands' work
def preflight(mountpoint: Path) -> None:
    """Refuse (MountError) where this machine cannot mount, or `mountpoint` cannot take a mount."""
    if (why := fuse_missing()) is not None:
        raise MountError(f"cannot mount: {why}")
    if not mountpoint.is_dir():
        raise MountError(f"{mountpoint}: not a directory (make it first: mkdir -p {mountpoint})")
    if os.path.ismount(mountpoint):
        raise MountError(f"{mountpoint} is already a mount point (hfview umount {mountpoint} first)")


def mount(models: list[Path], mountpoint: Path, *, outtype: str = "auto", quants: list[str] = (),
          imatrix: str | None = None, cache_mb: int = CACHE_MB) -> None:
    """Open every view (a refusal is raised here, before anything is mounted), then serve them in the foreground."""
    preflight(mountpoint)
    tree = open_files(models, outtype, list(quants), imatrix, ChunkCache(cache_mb << 20))
    for folder, files in tree.items():
        for name, f in files.items():
            log.info("%s/%s/%s: %s bytes%s", mountpoint, folder, name, f"{f.size:,}", _load_note(f))
    serve(tree, mountpoint)


def _load_note(f: MountedFile) -> str:
    from .checkpoint import override_kv_flags

    if f.ckpt.load_kv:
        return f"; llama.cpp loads it only with {' '.join(override_kv_flags(f.ckpt.load_kv))}"
    return ""


def wait_mounted(mountpoint: Path, child: subprocess.Popen, log_path: Path, timeout: float = 600) -> None:
    """Until `child` (a foreground mount) has mounted; its failure raised with the last line it logged."""
    deadline = time.monotonic() + timeout
    while not os.path.ismount(mountpoint):
        if child.poll() is not None:
            lines = [line for line in log_path.read_text(errors="replace").splitlines() if line.strip()]
            raise MountError(lines[-1].removeprefix("hfview: ") if lines else
                             f"the mount process exited with status {child.returncode} (its log: {log_path})")
        if time.monotonic() > deadline:
            child.terminate()
            raise MountError(f"{mountpoint} was not mounted within {timeout:.0f} s (the log: {log_path})")
        time.sleep(0.05)


def umount(mountpoint: Path, *, lazy: bool = False) -> None:
    """Unmount an hfview mount; busy (a reader has a file open) is refused unless `lazy` (detached now, its open
    files served until closed)."""
    if not os.path.ismount(mountpoint):
        raise MountError(f"{mountpoint} is not a mount point")
    tool = shutil.which("fusermount3")
    if tool is not None:
        command = [tool, "-u", *(["-z"] if lazy else []), str(mountpoint)]
    else:
        command = ["umount", *(["-l"] if lazy else []), str(mountpoint)]
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode:
        said = " ".join(done.stderr.split()) or f"{command[0]} exited with status {done.returncode}"
        if "busy" in said.lower():
            raise MountError(f"{mountpoint} is busy: a process has a file under it open (close it, or "
                             f"`hfview umount --lazy {mountpoint}` detaches it now and serves open files until closed)")
        raise MountError(f"cannot unmount {mountpoint}: {said}")


# ---------------------------------------------------------------- the commands
def _log_to(stream) -> None:
    handler = logging.StreamHandler(stream)
    handler.setFormatter(logging.Formatter("%(asctime)s hfview mount: %(message)s", "%H:%M:%S"))
    log.addHandler(handler)
    log.setLevel(logging.INFO)


@click.command("mount")
@click.argument("models", nargs=-1, required=True)
@click.argument("mountpoint", type=click.Path(file_okay=False, path_type=Path))
@click.option("--outtype", type=click.Choice(["auto", "f32", "f16", "bf16", "q8_0"]), default="auto",
              show_default=True, help="The converter's --outtype of <name>.gguf (and what --quant quantizes).")
@click.option("--quant", "quants", multiple=True, metavar="TYPE",
              help="Also <name>-<TYPE>.gguf: llama-quantize's file of this type (Q4_K_M, Q8_0, ...); repeatable.")
@click.option("--imatrix", default=None, metavar="FILE", help="llama-imatrix's importance matrix for --quant.")
@click.option("--cache-mb", default=CACHE_MB, show_default=True,
              help="Memory for made tensor chunks (rearranged, converted, quantized), all files together.")
@click.option("--daemon", is_flag=True, help="Mount in the background and return; `hfview umount` ends it.")
@click.option("--log", "log_path", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="With --daemon: where it logs (default: under hfview's cache directory).")
def mount_command(models: tuple[str, ...], mountpoint: Path, outtype: str, quants: tuple[str, ...],
                  imatrix: str | None, cache_mb: int, daemon: bool, log_path: Path | None) -> None:
    """Mount each MODEL (a checkpoint directory or Hub id) at MOUNTPOINT as GGUF files, made on read: MOUNTPOINT/<name>/
    <name>.gguf and <name>-<TYPE>.gguf per --quant, for llama.cpp's tools, ollama, gguf-py. Foreground until Ctrl-C
    (which unmounts), or --daemon."""
    from .runner.resolve import local_dir

    preflight(mountpoint)  # before a Hub model is downloaded
    paths = [Path(local_dir(model, None)[0]) for model in models]
    if not daemon:
        _log_to(sys.stderr)
        mount(paths, mountpoint, outtype=outtype, quants=quants, imatrix=imatrix, cache_mb=cache_mb)
        click.echo(f"unmounted {mountpoint}", err=True)
        return
    from .cache import cache_dir

    log_path = log_path or cache_dir() / "mounts" / f"{str(mountpoint.resolve()).strip('/').replace('/', '_')}.log"
    log_path.parent.mkdir(parents=True, exist_ok=True)
    command = [sys.executable, "-m", "hfview.cli", "mount", *map(str, paths), str(mountpoint), "--outtype", outtype,
               "--cache-mb", str(cache_mb), *[a for q in quants for a in ("--quant", q)],
               *(["--imatrix", imatrix] if imatrix else [])]
    with open(log_path, "ab") as out:  # the mount lives on in its own session, after this command returns
        child = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=out, stderr=out, start_new_session=True)
    wait_mounted(mountpoint, child, log_path)
    click.echo(f"mounted {mountpoint} (process {child.pid}, log {log_path}); `hfview umount {mountpoint}` unmounts",
               err=True)


@click.command("umount")
@click.argument("mountpoint", type=click.Path(file_okay=False, path_type=Path))
@click.option("--lazy", is_flag=True, help="Detach now even while a file is open; open files are served until closed.")
def umount_command(mountpoint: Path, lazy: bool) -> None:
    """Unmount an `hfview mount`."""
    umount(mountpoint, lazy=lazy)


COMMANDS = [mount_command, umount_command]

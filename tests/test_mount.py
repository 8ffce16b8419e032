"""`hfview mount`: a real FUSE mount (the CLI's --daemon, as a user runs it) serves each file with the bytes `hfview
export` writes (sha256: plain and two quant types, a dense family and a mixture), llama.cpp in another process maps
the mounted path and gives the exported file's logits, readers on many threads at once get the right bytes, unmount
waits for (or with --lazy, outlives) an open reader, and a checkpoint file changed under the mount answers EIO, said
in the log. hfview.mount_file's reads on many threads are checked without FUSE too."""
from __future__ import annotations

import errno
import hashlib
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from hfview import HfCheckpoint
from hfview.export import export
from hfview import mount_file
from hfview.mount_file import ChunkCache, MountedFile, checkpoint_files

REPO = Path(__file__).resolve().parents[1]
ENV = {**os.environ, "PYTHONPATH": str(REPO)}
QUANTS = ("Q4_K_M", "Q8_0")
FAMILIES = ("llama-spm", "mixtral")  # a dense Llama; a mixture, its expert stacks made on read

needs_fuse = pytest.mark.skipif(not Path("/dev/fuse").exists(),
                                reason="no /dev/fuse on this machine: a FUSE mount cannot be made here")


def hfview(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    done = subprocess.run([sys.executable, "-m", "hfview.cli", *args], capture_output=True, text=True, env=ENV,
                          timeout=300)
    if check and done.returncode:
        raise AssertionError(f"hfview {' '.join(args)} exited {done.returncode}: {done.stderr}")
    return done


def sha256(path: Path) -> str:
    with open(path, "rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()


class Mount:
    """A --daemon mount: its point, its process and its log."""

    def __init__(self, models: list[Path], point: Path, log: Path, *options: str):
        self.point, self.log = point, log
        point.mkdir(parents=True, exist_ok=True)
        said = hfview("mount", *map(str, models), str(point), "--daemon", "--log", str(log), *options).stderr
        self.pid = int(re.search(r"process (\d+)", said).group(1))

    def file(self, ckpt: Path, quant: str | None = None) -> Path:
        return self.point / ckpt.name / f"{ckpt.name}{'-' + quant if quant else ''}.gguf"

    def gone(self, timeout: float = 20) -> bool:
        """Whether the mount's process has ended (it ends once unmounted and its last file closed)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                os.kill(self.pid, 0)
            except ProcessLookupError:
                return True
            time.sleep(0.05)
        return False

    def close(self) -> None:
        if os.path.ismount(self.point):
            hfview("umount", "--lazy", str(self.point), check=False)
        self.gone()


@pytest.fixture(scope="module")
def exported(checkpoint, tmp_path_factory):
    """{(fixture, quant): the exported file} for every file the shared mount serves."""
    out = tmp_path_factory.mktemp("exported")
    files = {}
    for name in FAMILIES:
        for quant in (None, *QUANTS):
            ckpt = HfCheckpoint(checkpoint(name), "auto", quant=quant, vocab_apart=False)
            files[name, quant] = export(ckpt, out / f"{name}-{quant}.gguf")
    return files


@pytest.fixture(scope="module")
def mounted(checkpoint, tmp_path_factory):
    """Both fixtures mounted at once, each with both quant types, its made chunks held in 1 MiB (evicted often)."""
    where = tmp_path_factory.mktemp("mount")
    m = Mount([checkpoint(n) for n in FAMILIES], where / "point", where / "mount.log", "--cache-mb", "1",
              *[a for q in QUANTS for a in ("--quant", q)])
    yield m
    m.close()


@needs_fuse
def test_mounted_files_are_the_exports(mounted, exported, checkpoint):
    for name in FAMILIES:
        ckpt = checkpoint(name)
        assert sorted(p.name for p in (mounted.point / ckpt.name).iterdir()) == sorted(
            mounted.file(ckpt, q).name for q in (None, *QUANTS))
        for quant in (None, *QUANTS):
            path, want = mounted.file(ckpt, quant), exported[name, quant]
            assert path.stat().st_size == want.stat().st_size  # known up front
            assert sha256(path) == sha256(want), f"{path.name}"


LOGITS = textwrap.dedent("""
    import sys, numpy as np, llama_cpp
    tokens = [1, 450, 4996, 17354, 1701, 432, 17204, 975, 278, 17366, 11203]
    for path, out in zip(sys.argv[1::2], sys.argv[2::2]):
        model = llama_cpp.Llama(path, n_ctx=32, logits_all=True, use_mmap=True, n_threads=1, verbose=False)
        model.eval(tokens)
        np.save(out, np.array(model.scores[:len(tokens)]))
        model.close()
""")


@needs_fuse
def test_llama_cpp_maps_the_mounted_path_and_gives_the_exported_logits(mounted, exported, checkpoint, tmp_path):
    """Another process, llama.cpp's own loader with mmap, by plain path: the mounted file and the exported one."""
    args = []
    # (llama.cpp 0.3.36 itself crashes, SIGSEGV, evaluating the tiny mixture's exported Q4_K_M and Q8_0 files: its
    # converter's file stands for the mixture here, a quantized Llama for the quantized files)
    for name, quant in (("llama-spm", "Q4_K_M"), ("mixtral", None)):
        args += [str(mounted.file(checkpoint(name), quant)), str(tmp_path / f"{name}-mounted.npy"),
                 str(exported[name, quant]), str(tmp_path / f"{name}-exported.npy")]
    subprocess.run([sys.executable, "-c", LOGITS, *args], check=True, env=ENV, timeout=300)
    for name in ("llama-spm", "mixtral"):
        got, want = np.load(tmp_path / f"{name}-mounted.npy"), np.load(tmp_path / f"{name}-exported.npy")
        assert np.isfinite(want).all() and want.std() > 0
        np.testing.assert_array_equal(got, want, err_msg=name)


def _random_ranges(size: int, count: int, seed: int) -> list[tuple[int, int]]:
    rng = random.Random(seed)
    return [(rng.randrange(size), rng.choice([1, 7, 4096, 65536 + 3, 1 << 20, 3 << 20])) for _ in range(count)]


def _read_on_threads(read, want: bytes, threads: int = 8, count: int = 40) -> None:
    """`read(offset, n)` on `threads` threads at once, each at its own random ranges, against `want`."""
    failures = []

    def reader(seed):
        for offset, n in _random_ranges(len(want), count, seed):
            if read(offset, n) != want[offset:offset + n]:
                failures.append((offset, n))

    workers = [threading.Thread(target=reader, args=(seed,)) for seed in range(threads)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    assert not failures, f"wrong bytes at (offset, length) {failures[:5]}"


def _reader(f: MountedFile):
    def read(offset: int, n: int) -> bytes:
        buf = bytearray(n)
        return bytes(buf[:f.readinto(offset, memoryview(buf))])
    return read


@needs_fuse
def test_concurrent_readers_get_the_exported_bytes(mounted, exported, checkpoint):
    for name, quant in (("mixtral", "Q4_K_M"), ("llama-spm", None)):
        path, want = mounted.file(checkpoint(name), quant), exported[name, quant].read_bytes()
        fd = os.open(path, os.O_RDONLY)
        try:
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)  # the kernel's copy dropped: reads reach the mount
            _read_on_threads(lambda offset, n: os.pread(fd, n, offset), want)
        finally:
            os.close(fd)


@pytest.mark.parametrize("name, outtype, quant", [
    ("gpt_oss", "auto", None), ("mixtral", "auto", "Q4_K_M"), ("bailing_moe", "auto", None), ("qwen3-fp8", "f32", None)])
def test_mounted_file_reads_on_many_threads(name, outtype, quant, checkpoint, tmp_path, monkeypatch):
    """hfview.mount_file alone: views that keep a block between calls (gpt_oss' expert columns), a whole-tensor
    step (bailing_moe's normalised head), quantized chunks, FP8 weights dequantized on read, read at random ranges by
    8 threads through a cache too small to keep them, in chunks of a few rows (so that threads make rows of one
    tensor at once)."""
    monkeypatch.setattr(mount_file, "_CHUNK_WORK_BYTES", 4096)
    ckpt = HfCheckpoint(checkpoint(name), outtype, quant=quant, vocab_apart=False)
    want = export(ckpt, tmp_path / "export.gguf").read_bytes()
    _read_on_threads(_reader(MountedFile(ckpt, checkpoint_files(ckpt.path), ChunkCache(64 << 10))), want)


def test_chunk_cache_makes_a_chunk_once_and_keeps_its_budget():
    cache, made = ChunkCache(budget=3000), []

    def make(key):
        made.append(key)
        time.sleep(0.05)  # the other threads ask meanwhile
        return memoryview(bytes(1000))

    workers = [threading.Thread(target=cache.get, args=("a", lambda: make("a"))) for _ in range(8)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    assert made == ["a"]
    for key in "bcde":
        cache.get(key, lambda key=key: make(key))
    assert cache.held <= 3000
    cache.get("a", lambda: make("a"))  # the least recently used went first
    assert made == ["a", "b", "c", "d", "e", "a"]
    with pytest.raises(ZeroDivisionError):  # a failed make is raised, and not kept
        cache.get("f", lambda: 1 / 0)
    cache.get("f", lambda: make("f"))
    assert made[-1] == "f"


def test_a_view_that_keeps_state_is_made_by_one_thread_at_a_time(checkpoint, monkeypatch):
    """gpt_oss' expert columns and transposed blocks keep a block between calls: never two threads in one at once
    (every view's rows slowed down, so that threads would meet there)."""
    monkeypatch.setattr(mount_file, "_CHUNK_WORK_BYTES", 4096)
    ckpt = HfCheckpoint(checkpoint("gpt_oss"), "auto", vocab_apart=False)
    keeping = {id(t.view) for t in ckpt.tensors if not isinstance(t.view, mount_file._STATELESS)}
    assert keeping, "no view that keeps state in the fixture: nothing checked"
    inside, met, guard = {}, [], threading.Lock()

    def slowed(view):
        rows = view.rows

        def entered(start, stop):
            with guard:
                inside[id(view)] = inside.get(id(view), 0) + 1
                if inside[id(view)] > 1 and id(view) in keeping:
                    met.append(type(view).__name__)
            time.sleep(0.002)
            try:
                return rows(start, stop)
            finally:
                with guard:
                    inside[id(view)] -= 1
        return entered

    for t in ckpt.tensors:
        t.view.rows = slowed(t.view)
    want = HfCheckpoint(checkpoint("gpt_oss"), "auto", vocab_apart=False).read(0, ckpt.size)
    _read_on_threads(_reader(MountedFile(ckpt, checkpoint_files(ckpt.path), ChunkCache(64 << 10))), want)
    assert not met, f"two threads in one view at once: {sorted(set(met))}"


@needs_fuse
def test_unmount_waits_for_an_open_reader_or_detaches_with_lazy(checkpoint, exported, tmp_path):
    ckpt = checkpoint("llama-spm")
    m = Mount([ckpt], tmp_path / "point", tmp_path / "mount.log")
    try:
        want = exported["llama-spm", None].read_bytes()
        with open(m.file(ckpt), "rb") as reader:
            assert reader.read(1 << 16) == want[:1 << 16]
            busy = hfview("umount", str(m.point), check=False)
            assert busy.returncode == 1 and "busy" in busy.stderr and len(busy.stderr.strip().splitlines()) == 1
            assert os.path.ismount(m.point)
            hfview("umount", "--lazy", str(m.point))
            assert not os.path.ismount(m.point)
            assert reader.read() == want[1 << 16:]  # the open file is still served, to its end
            assert not m.gone(timeout=0.5)
        assert m.gone(), "the mount process did not end after its last reader closed"
    finally:
        m.close()


@needs_fuse
def test_foreground_mount_unmounts_on_ctrl_c(checkpoint, tmp_path):
    point = tmp_path / "point"
    point.mkdir()
    mount = subprocess.Popen([sys.executable, "-m", "hfview.cli", "mount", str(checkpoint("llama-spm")), str(point)],
                             stderr=subprocess.PIPE, text=True, env=ENV)
    try:
        deadline = time.monotonic() + 60
        while not os.path.ismount(point) and mount.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert os.path.ismount(point), mount.stderr.read() if mount.poll() is not None else "not mounted in 60 s"
        mount.send_signal(signal.SIGINT)
        said = mount.communicate(timeout=30)[1]
        assert mount.returncode == 0, said
        assert not os.path.ismount(point) and f"unmounted {point}" in said
    finally:
        if mount.poll() is None:
            mount.kill()
        if os.path.ismount(point):
            hfview("umount", "--lazy", str(point), check=False)


MAPPED = textwrap.dedent("""
    import mmap, sys
    with open(sys.argv[1], "rb") as f:
        mapping = mmap.mmap(f.fileno(), 0, prot=mmap.PROT_READ)
    print(mapping[-1], flush=True)  # a page of it mapped in
    sys.stdin.readline()  # (the checkpoint changes meanwhile)
    print(mapping[-1], flush=True)  # the same page again: gone from the kernel's cache, so asked of the mount
""")


@needs_fuse
def test_a_shard_changed_under_the_mount_answers_eio_and_is_logged(checkpoint, tmp_path):
    """The next open and any read answer EIO, the log says which file changed how; what the kernel had cached is
    dropped (the mount checks every file each second), so a reader open from before gets EIO and a mapping of the
    file a bus error, never the bytes of the checkpoint as it was."""
    ckpt = tmp_path / "llama-spm"
    shutil.copytree(checkpoint("llama-spm"), ckpt)
    head = HfCheckpoint(ckpt, vocab_apart=False).read(0, 1 << 20)
    m = Mount([ckpt], tmp_path / "point", tmp_path / "mount.log")
    mapped = subprocess.Popen([sys.executable, "-c", MAPPED, str(m.file(ckpt))], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)
    try:
        path = m.file(ckpt)
        reader = os.open(path, os.O_RDONLY)
        try:
            assert os.pread(reader, 1 << 20, 0) == head  # in the kernel's cache now
            assert mapped.stdout.readline().strip().isdigit()  # the mapping read
            shard = sorted(ckpt.glob("*.safetensors"))[0]
            with open(shard, "r+b") as f:  # the same size, a different byte: its mtime tells
                f.seek(-1, os.SEEK_END)
                last = f.read(1)
                f.seek(-1, os.SEEK_END)
                f.write(bytes([last[0] ^ 0xFF]))
            with pytest.raises(OSError) as opened:
                open(path, "rb").close()
            assert opened.value.errno == errno.EIO
            said = [line for line in m.log.read_text().splitlines() if "changed after it was opened" in line]
            assert len(said) == 1 and f"{shard} changed after it was opened" in said[0] and "mtime" in said[0]
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline:
                try:
                    os.pread(reader, 4096, 0)
                except OSError as e:
                    assert e.errno == errno.EIO
                    break
                time.sleep(0.1)
            else:
                pytest.fail("a reader open before the change still got bytes 10 s after it")
            mapped.communicate("\n", timeout=30)
            assert mapped.returncode == -signal.SIGBUS
        finally:
            os.close(reader)
    finally:
        if mapped.poll() is None:
            mapped.kill()
        m.close()


def test_refusals_are_one_line(checkpoint, tmp_path):
    """No libfuse (a library name that does not exist), no binding, a missing checkpoint, a mount point that is not
    a directory, two checkpoints of one name: one line each, naming what to do, exit 1."""
    point = tmp_path / "point"
    point.mkdir()
    model = str(checkpoint("llama-spm"))
    no_lib = subprocess.run([sys.executable, "-m", "hfview.cli", "mount", model, str(point)], capture_output=True,
                            text=True, env={**ENV, "FUSE_LIBRARY_NAME": "hfview-no-such-fuse"})
    no_binding = subprocess.run([sys.executable, "-c", "import sys; sys.modules['mfusepy'] = None; "
                                 "from hfview.cli import main; main()", "mount", model, str(point)],
                                capture_output=True, text=True, env=ENV)
    for refused, says in ((no_lib, "libfuse is not installed"), (no_binding, "mfusepy is not installed")):
        assert refused.returncode == 1 and len(refused.stderr.strip().splitlines()) == 1, refused.stderr
        if Path("/dev/fuse").exists():
            assert says in refused.stderr and "apt-get install fuse3" in refused.stderr
            assert "pip install 'hfview[mount]'" in refused.stderr
        else:
            assert "no /dev/fuse" in refused.stderr
    if Path("/dev/fuse").exists():  # (elsewhere every mount is refused for want of FUSE, checked above)
        missing = hfview("mount", str(tmp_path / "nowhere"), str(point), check=False)
        assert missing.returncode == 1 and len(missing.stderr.strip().splitlines()) == 1, missing.stderr
        not_dir = hfview("mount", model, str(tmp_path / "no-point"), check=False)
        assert not_dir.returncode == 1 and "not a directory" in not_dir.stderr
        unsupported = tmp_path / "unsupported"
        unsupported.mkdir()
        (unsupported / "config.json").write_text('{"model_type": "nope", "architectures": ["NopeForCausalLM"]}')
        daemon = hfview("mount", str(unsupported), str(point), "--daemon", "--log", str(tmp_path / "log"), check=False)
        # (--daemon: the refusal the mount process logged, said by the command that started it)
        assert daemon.returncode == 1 and len(daemon.stderr.strip().splitlines()) == 1, daemon.stderr
        assert daemon.stderr.startswith("hfview: model architecture 'nope'") and "unsupported" in daemon.stderr
        twice = hfview("mount", model, model, str(point), check=False)
        assert twice.returncode == 1 and "two checkpoints are named" in twice.stderr
        assert not os.path.ismount(point)
    not_mounted = hfview("umount", str(point), check=False)
    assert not_mounted.returncode == 1 and "not a mount point" in not_mounted.stderr

"""hfview.memfile / HfCheckpoint.fill_into: the view filled into a memory file holds exactly the bytes `hfview export`
writes (sha256), whatever the thread count; stored bits are read straight into their place on several threads; a
fill that cannot fit is refused before anything is filled."""
from __future__ import annotations

import hashlib
import os
import shutil
import threading
from pathlib import Path

import numpy as np
import pytest

from hfview import HfCheckpoint, memfile
from hfview.errors import CheckpointError
from hfview.export import export

pytestmark = pytest.mark.skipif(not memfile.supported(), reason="no memfd on this system")

REPO = Path(__file__).resolve().parents[1]


def sha256_of_memory_file(mf: memfile.MemoryFile) -> str:
    with open(mf.path, "rb") as f:  # by its path, as llama.cpp opens it
        return hashlib.file_digest(f, "sha256").hexdigest()


def sha256_of(path: Path) -> str:
    with open(path, "rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()


# what each fixture puts through the fill: plain stored matrices and converted norms (llama-spm), a mixture's
# expert stacks (mixtral), a computed tensor (llama3-bpe's rope_freqs), views that keep a block between calls
# (gpt_oss' expert columns, transposed), a whole-tensor step (bailing_moe's column-normalised head), value steps
# (gemma's 1 + w norms)
@pytest.mark.parametrize("name, outtype, quant", [
    ("llama-spm", "auto", None), ("llama-spm", "f32", None), ("mixtral", "auto", None), ("llama3-bpe", "auto", None),
    ("gpt_oss", "f32", None), ("bailing_moe", "auto", None), ("gemma", "auto", None),
    # each quantized form read (hfview.quantized): FP8 weights dequantized on read stand in for stored F32 ones (their
    # bytes are computed, not the shard's), GPTQ and packed ints likewise; MXFP4 and NVFP4 bits repacked on read
    ("qwen3-fp8", "f32", None), ("deepseek_v3-fp8", "f32", None), ("qwen3-modelopt-fp8", "bf16", None),
    ("qwen3-ct-fp8-block", "bf16", None), ("mistral-consolidated-fp8", "f16", None), ("qwen3-gptq-4bit", "bf16", None),
    ("qwen3-ct-w4a16-asym", "f16", None), ("gpt_oss-mxfp4-wide", "bf16", None),
    ("gpt_oss-mxfp4-wide", "f32", "MXFP4_MOE"), ("qwen3_moe-nvfp4", "bf16", None), ("llama-nvfp4", "bf16", None),
])
def test_memory_file_is_the_exported_file(name, outtype, quant, checkpoint, tmp_path):
    ckpt = HfCheckpoint(checkpoint(name), outtype, quant=quant)
    want = sha256_of(export(ckpt, tmp_path / "export.gguf"))
    for threads in (1, 4):
        with memfile.fill(ckpt, threads=threads) as mf:
            assert mf.size == ckpt.size
            assert sha256_of_memory_file(mf) == want, f"{threads} threads"


@pytest.mark.parametrize("name", ["granitemoe", "internlm2"])
def test_fused_parts_go_to_the_memory_file_run_by_run(name, checkpoint, tmp_path, monkeypatch):
    """One part of a fused tensor (GraniteMoE's gate half of each expert, InternLM2's q, k or v of its grouped
    wqkv) is written to the memory file run by run of consecutive stored rows, as the exported file has it. The
    fixtures' runs are shorter than the fill's threshold for this, so the threshold is lowered to one row."""
    from hfview import checkpoint as checkpoint_module
    from hfview import views
    monkeypatch.setattr(views, "_LONG_RUN", 1)
    ckpt = HfCheckpoint(checkpoint(name), "auto")
    fused = [t for t in ckpt.tensors if isinstance(t.view, views.RowSelection) and len(t.view.shape) > 1]
    assert fused and all(checkpoint_module._stored_spans(t, 0, t.view.n_rows) for t in fused)
    want = sha256_of(export(ckpt, tmp_path / "export.gguf"))
    with memfile.fill(ckpt, threads=3) as mf:
        assert sha256_of_memory_file(mf) == want


def test_quantized_view_fills_as_exported(checkpoint, tmp_path):
    ckpt = HfCheckpoint(checkpoint("llama-spm"), "f32", quant="Q4_K_M")
    want = sha256_of(export(ckpt, tmp_path / "export.gguf"))
    with memfile.fill(ckpt, threads=3) as mf:
        assert sha256_of_memory_file(mf) == want


def test_load_time_values_are_in_the_memory_file(checkpoint, tmp_path):
    """A family's load-time arrays (plamo2: RunnerFacts.load_arrays) reach the memory file llama.cpp loads: the
    exported bytes but for those arrays' values in the header."""
    ckpt = HfCheckpoint(checkpoint("plamo2"), "auto")
    assert ckpt.load_arrays
    loaded = ckpt.for_llama_cpp()
    exported = (export(ckpt, tmp_path / "export.gguf")).read_bytes()
    with memfile.fill(loaded, threads=2) as mf:
        with open(mf.path, "rb") as f:
            got = f.read()
    assert got == loaded.read(0, loaded.size)
    differ = [i for i in range(len(got)) if got[i] != exported[i]] if len(got) == len(exported) else None
    assert differ and max(differ) < ckpt.data_start  # only header bytes differ from the converter's file


def test_stored_bits_go_straight_into_place_on_several_threads(checkpoint, monkeypatch):
    """Every stored-bits tensor is read by preadv into the destination buffer itself (no buffer in between), and
    the reads run on more than one thread."""
    ckpt = HfCheckpoint(checkpoint("mixtral"), "auto")
    stored = sum(t.nbytes for t in ckpt.tensors if t.stored_bits)
    assert stored > ckpt.size // 2
    dest = np.zeros(ckpt.size, np.uint8)
    lo, hi = dest.ctypes.data, dest.ctypes.data + dest.nbytes
    into_place, threads, lock = [0], set(), threading.Lock()
    preadv = os.preadv

    def watched(fd, buffers, offset):
        n = preadv(fd, buffers, offset)
        address = np.frombuffer(buffers[0], np.uint8).ctypes.data
        with lock:
            threads.add(threading.get_ident())
            if lo <= address < hi:
                into_place[0] += n
        return n

    monkeypatch.setattr(os, "preadv", watched)
    ckpt.fill_into(memoryview(dest), threads=4)
    assert into_place[0] >= stored
    assert len(threads) > 1
    assert dest.tobytes() == ckpt.read(0, ckpt.size)


class _Busy:
    """A lock another thread always holds."""

    def acquire(self, blocking=True):
        return False


def test_pieces_are_put_whether_or_not_another_thread_is_writing(monkeypatch):
    """PieceWriter puts a piece with pwrite where no other thread is writing, else through the mapping (its pages
    made by MADV_POPULATE_WRITE, or by faults where the kernel lacks it): the file holds the same bytes each way,
    at offsets that are not page-aligned and given as numpy integers (as the fill's are)."""
    import mmap

    size = 5 * mmap.PAGESIZE + 123
    want = np.frombuffer(os.urandom(size), np.uint8)
    cuts = [0, 1000, mmap.PAGESIZE + 7, 3 * mmap.PAGESIZE, size]
    for how in ("pwrite", "populate", "fault"):
        fd = os.memfd_create("test", os.MFD_CLOEXEC)
        try:
            os.ftruncate(fd, size)
            mapping = mmap.mmap(fd, size, flags=mmap.MAP_SHARED, prot=mmap.PROT_READ | mmap.PROT_WRITE)
            view = memoryview(mapping)
            writer = memfile.PieceWriter(fd, view)
            pwrites = []
            monkeypatch.setattr(os, "pwrite", lambda *a, _w=os.pwrite: pwrites.append(a[2]) or _w(*a))
            if how != "pwrite":
                writer._writing = _Busy()
            if how == "fault":  # a kernel before 5.14: EINVAL, then plain writes to the mapping
                def no_populate(*_):
                    import ctypes
                    ctypes.set_errno(22)
                    return -1
                writer._madvise = no_populate
            for a, b in zip(cuts, cuts[1:]):
                writer.put(np.int64(a), want[a:b])
            monkeypatch.undo()
            assert bool(pwrites) == (how == "pwrite"), how
            assert writer._populate == (how != "fault"), how
            del writer
            view.release()
            mapping.close()
            assert os.pread(fd, size + 1, 0) == want.tobytes(), how
        finally:
            os.close(fd)


def test_memory_file_is_the_exported_file_when_no_piece_is_written_by_pwrite(checkpoint, tmp_path, monkeypatch):
    """The fill with every stored piece put through the mapping (as when other threads hold the file's write): the
    exported bytes, a bf16 mixture's and a converted one's."""
    init = memfile.PieceWriter.__init__

    def busy_init(self, *a):
        init(self, *a)
        self._writing = _Busy()

    monkeypatch.setattr(memfile.PieceWriter, "__init__", busy_init)
    monkeypatch.setattr(os, "pwrite", lambda *a: pytest.fail("pwrite"))
    for name, outtype in (("mixtral", "auto"), ("llama-spm", "f32")):
        ckpt = HfCheckpoint(checkpoint(name), outtype)
        want = sha256_of(export(ckpt, tmp_path / f"{name}.gguf"))
        with memfile.fill(ckpt, threads=2) as mf:
            assert sha256_of_memory_file(mf) == want, name


def test_generic_byte_source_is_copied():
    class Source:
        def __init__(self, data):
            self.data, self.size = data, len(data)

        def read(self, offset, n):
            return self.data[offset:offset + n]

    data = os.urandom(3 << 20) + b"end"
    with memfile.fill(Source(data), description="bytes") as mf:
        assert open(mf.path, "rb").read() == data


def test_refused_before_filling_when_memory_is_short(checkpoint, monkeypatch):
    ckpt = HfCheckpoint(checkpoint("llama-spm"), "auto")
    monkeypatch.setattr(memfile, "memory_available", lambda: (ckpt.size - 1, "MemAvailable in /proc/meminfo"))
    monkeypatch.setattr(HfCheckpoint, "fill_into", lambda *a, **k: pytest.fail("filled"))
    with pytest.raises(memfile.MemoryFileError) as info:
        memfile.fill(ckpt, description="the view of llama-spm")
    msg = str(info.value)
    assert "the view of llama-spm needs" in msg and "MemAvailable" in msg and "HFVIEW_DATA_PATH=stream" in msg
    assert "--quant" in msg


def test_memory_available_reads_meminfo():
    free, where = memfile.memory_available()
    assert free > 0 and where


def test_shard_changed_before_the_fill_is_named(checkpoint, tmp_path):
    ckpt_dir = tmp_path / "default"
    shutil.copytree(REPO / "fixtures" / "default", ckpt_dir)
    ckpt = HfCheckpoint(ckpt_dir)
    shard = ckpt_dir / "model.safetensors"
    os.truncate(shard, shard.stat().st_size // 2)
    with pytest.raises(CheckpointError, match="changed after hfview opened it") as info:
        memfile.fill(ckpt, threads=2)
    assert str(shard) in str(info.value)


def test_no_memfd_is_a_clear_refusal(monkeypatch):
    monkeypatch.setattr(memfile, "supported", lambda: False)
    with pytest.raises(memfile.MemoryFileError, match="no memory files"):
        memfile.fill(type("S", (), {"size": 1, "read": lambda self, o, n: b"x"})(), description="x")


def test_bf16_nans_are_made_quiet_in_the_memory_file_as_in_the_export(checkpoint, tmp_path):
    """Stored bf16 bits go from the shard to the memory file through a buffer (pwrite); where they hold a signalling
    NaN, the converter's f32 -> bf16 round trip makes it quiet, and so does the fill: a plain matrix and an expert
    of a stack, each with a NaN of either sign."""
    copy = tmp_path / "mixtral"
    shutil.copytree(checkpoint("mixtral"), copy)
    ckpt = HfCheckpoint(copy, "auto")
    stored = [t for t in ckpt.tensors if t.stored_bits and t.ggml_type.name == "BF16"]
    plain = next(t for t in stored if type(t.view).__name__ == "Stored")
    stack = next(t for t in stored if type(t.view).__name__ == "Stack")
    for source in (plain.view.source, stack.view.parts[1]):
        with open(source.path, "r+b") as f:  # a signalling NaN of each sign in its second row
            f.seek(source.offset + source.row_bytes)
            f.write(np.array([0x7F81, 0xFF81], np.uint16).tobytes())
    ckpt = HfCheckpoint(copy, "auto")
    exported = export(ckpt, tmp_path / "export.gguf")
    with memfile.fill(ckpt, threads=2) as mf:
        assert sha256_of_memory_file(mf) == sha256_of(exported)
    data = exported.read_bytes()
    at = ckpt.data_offset(plain.name) + plain.row_bytes
    assert np.frombuffer(data, np.uint16, 2, at).tolist() == [0x7FC1, 0xFFC1]


@pytest.mark.parametrize("name, outtype", [("mixtral", "auto"), ("gpt_oss-mxfp4-wide", "bf16"),
                                           ("qwen3_moe-nvfp4", "bf16")])
def test_stateless_views_split_across_threads_fill_as_exported(name, outtype, checkpoint, tmp_path, monkeypatch):
    """Views that keep nothing between calls (stored, stacked, generated, MXFP4's and NVFP4's repacked rows) are
    made by several threads a job of rows each; the fixtures' tensors are smaller than a job, so jobs are made a
    few rows long here, and the file still equals the export."""
    from hfview import checkpoint as checkpoint_module

    monkeypatch.setattr(checkpoint_module, "_FILL_JOB_BYTES", 256)
    ckpt = HfCheckpoint(checkpoint(name), outtype)
    want = sha256_of(export(ckpt, tmp_path / "export.gguf"))
    with memfile.fill(ckpt, threads=4) as mf:
        assert sha256_of_memory_file(mf) == want


def _rss_shmem() -> int:
    with open("/proc/self/status", encoding="ascii") as f:
        return next(int(line.split()[1]) * 1024 for line in f if line.startswith("RssShmem:"))


def test_a_loader_mapping_the_file_while_it_fills_sees_its_pages_counted_once():
    """The runner's loader maps the memory file (MAP_POPULATE, as llama.cpp does) while the tensors are filled: bytes
    the fill writes through its own mapping are let go of there, or each such page would count twice in the
    process's RSS (this fixture: 1.33x the file's bytes without, 1.05x with)."""
    import mmap

    ckpt = HfCheckpoint(REPO / "fixtures" / "default")
    held, peak = [], [0]

    def on_header(memory_file):
        fd = os.open(memory_file.path, os.O_RDONLY)
        try:
            held.append(mmap.mmap(fd, memory_file.size, flags=mmap.MAP_SHARED | mmap.MAP_POPULATE,
                                  prot=mmap.PROT_READ))
        finally:
            os.close(fd)

    def on_bytes(_n):
        peak[0] = max(peak[0], _rss_shmem())

    before = _rss_shmem()
    with memfile.fill(ckpt, threads=2, on_header=on_header, on_bytes=on_bytes) as mf:
        assert held and bytes(held[0][:mf.size]) == ckpt.read(0, ckpt.size)
    held[0].close()
    assert (peak[0] - before) / ckpt.size < 1.1

"""Quantized views: `--outtype q8_0` equals the pinned converter's q8_0 file, byte for byte, with every quantized
byte computed by ggml's own kernels (hfview.ggml_quants)."""
import numpy as np
import pytest

from family_oracle import check_export, check_logits

# a Llama, a tied embedding (Qwen2's), a mixture whose expert rows (12) are not whole Q8_0 blocks (the converter's
# F16 fallback), LFM2 (its short convolution stays F32), a bf16 checkpoint with value steps (Gemma's 1 + w),
# DBRX (every matrix at the outtype, its router too, yet the Q8_0 fallback still applies)
Q8_FIXTURES = ["llama3-bpe", "qwen2-tied", "qwen3_moe", "lfm2", "gemma", "dbrx"]


@pytest.mark.parametrize("name", Q8_FIXTURES)
def test_q8_0_export_is_the_converters_file(name, checkpoint, converted, tmp_path):
    check_export(name, "q8_0", checkpoint, converted, tmp_path)


def test_q8_0_fallback_types(checkpoint):
    """Which tensors stay F32, which fall back to F16 (rows not whole blocks of 32) and which are Q8_0."""
    from hfview import HfCheckpoint
    from hfview.gguf_layout import GGMLType

    view = HfCheckpoint(checkpoint("qwen3_moe"), "q8_0")
    types = {t.name: t.ggml_type for t in view.tensors}
    assert types["blk.0.ffn_down_exps.weight"] == GGMLType.F16  # rows of moe_intermediate_size 12
    assert types["blk.0.ffn_gate_exps.weight"] == GGMLType.Q8_0  # rows of hidden 32
    assert types["blk.0.ffn_gate_inp.weight"] == GGMLType.F32  # routers always F32
    assert types["blk.0.attn_norm.weight"] == GGMLType.F32
    assert types["token_embd.weight"] == GGMLType.Q8_0
    assert dict((kv.key, kv.value) for kv in view.kv)["general.file_type"] == 7


@pytest.mark.parametrize("name", ["llama3-bpe", "qwen3_moe"])
def test_q8_0_logits_close_to_transformers(name, checkpoint):
    """llama.cpp running the Q8_0 view against transformers in f32: Q8_0's own rounding, not a layout error, is
    what separates them (bar 1e-2; a misplaced block would be O(1))."""
    check_logits(name, "q8_0", checkpoint, bar=1e-2)


# ------------------------------------------------------------------ llama-quantize's files
# Every fixture's widths are small (32): rows are not whole 256-blocks, so every K-quant's fallback runs.
QUANT_TYPES = ["Q4_0", "Q8_0", "Q4_K_M", "Q5_K_S", "Q6_K", "IQ4_XS"]


def check_quantized(name, outtype, quant, checkpoint, quantized, tmp_path):
    import oracle
    from hfview import HfCheckpoint
    from hfview.export import export
    from hfview.quant import FILE_TYPES

    theirs = quantized(name, outtype, FILE_TYPES[quant][0])
    ours = export(HfCheckpoint(checkpoint(name), outtype, quant=quant), tmp_path / "ours.gguf")
    if oracle.sha256(ours) != oracle.sha256(theirs):
        pytest.fail(f"{name} {outtype} --quant {quant}: {oracle.first_difference(ours, theirs)}")


ALL_TYPES = ["Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q8_0", "Q2_K", "Q3_K_S", "Q3_K_M", "Q3_K_L", "Q4_K_S", "Q4_K_M",
             "Q5_K_S", "Q5_K_M", "Q6_K", "IQ4_NL", "IQ4_XS", "TQ1_0", "TQ2_0", "MXFP4_MOE"]


@pytest.mark.parametrize("quant", QUANT_TYPES)
@pytest.mark.parametrize("name", ["llama3-bpe", "qwen3_moe"])
def test_quant_fallbacks_are_llama_quantizes(name, quant, checkpoint, quantized, tmp_path):
    """Widths of 32-64: K-quant rows fall back (Q4_K -> Q5_0, Q6_K -> Q8_0, IQ4_XS -> IQ4_NL, rows of 12 -> F16)."""
    check_quantized(name, "auto", quant, checkpoint, quantized, tmp_path)


@pytest.mark.parametrize("quant", ALL_TYPES)
@pytest.mark.parametrize("name", ["llama-q256", "mixtral-q256"])
def test_quant_mixes_are_llama_quantizes(name, quant, checkpoint, quantized, tmp_path):
    """Widths of 256: every file type's mix of tensor types, on a tied dense model with 4 queries per KV head
    and on an 8-expert mixture."""
    check_quantized(name, "auto", quant, checkpoint, quantized, tmp_path)


@pytest.mark.parametrize("quant", ["Q4_K_M", "Q3_K_M", "Q3_K_S"])
def test_quant_70b_attn_v_rule(quant, checkpoint, quantized, tmp_path):
    """An 80-layer Llama with grouped KV heads is llama.cpp's 70B, whose attn_v llama-quantize gives more bits."""
    from hfview import HfCheckpoint
    from hfview.gguf_layout import GGMLType

    check_quantized("llama-80-layers", "auto", quant, checkpoint, quantized, tmp_path)
    view = HfCheckpoint(checkpoint("llama-80-layers"), quant=quant)
    # layer 11 gets no "more bits" (Q6_K) of its own: Q3_K or Q4_K, made Q5_K for a 70B, falls back to Q5_1
    assert view.tensor("blk.11.attn_v.weight").ggml_type == GGMLType.Q5_1


@pytest.mark.parametrize("quant, outtype, reason", [
    ("IQ2_XS", "auto", "needs an importance matrix"),
    ("Q2_K_S", "auto", "needs an importance matrix"),
    ("Q4_K_X", "auto", "choose one of"),
    ("Q4_K_M", "q8_0", "does not requantize"),
])
def test_quant_refusals(quant, outtype, reason, checkpoint):
    """On widths of 256 (at 32 the very low-bit types fall back to IQ4_NL / Q4_0, which need none, and
    llama-quantize accepts them too)."""
    from hfview import HfCheckpoint
    from hfview.errors import ConfigError

    with pytest.raises(ConfigError, match=reason):
        HfCheckpoint(checkpoint("llama-q256"), outtype, quant=quant)


def test_quant_reads_nothing_until_asked(checkpoint):
    """Opening a quantized view reads headers only: its size is known, no tensor quantized yet."""
    from unittest import mock

    from hfview import HfCheckpoint

    with mock.patch("hfview.ggml_quants.quantize", side_effect=AssertionError("quantized on open")):
        view = HfCheckpoint(checkpoint("mixtral-q256"), quant="Q4_K_M")
        assert view.size > view.data_start


# measured on llama-q256 (8 random layers, which compound the rounding; real models quantize better):
# Q8_0 1.3e-3, Q6_K 7.6e-3, Q4_K_M 7.1e-2. Bars at about 4x; a misplaced block or wrong type gives O(1).
@pytest.mark.parametrize("quant, bar", [("Q8_0", 5e-3), ("Q6_K", 3e-2), ("Q4_K_M", 0.3)])
def test_quantized_logits_within_measured_quantization_error(quant, bar, checkpoint):
    """llama.cpp running the quantized view against transformers in f32: what separates them is the quantization's
    own error, growing as the bits shrink."""
    from family_oracle import PROMPT, nmse, transformers_logits
    from hfview import HfCheckpoint
    from hfview.runner.stream import StreamModel

    path = checkpoint("llama-q256")
    with StreamModel(HfCheckpoint(path, quant=quant), n_ctx=64) as m:
        ids = m.tokenize(PROMPT)[:16]
        ours = m.logits(ids)
    value = nmse(ours, transformers_logits(path, ids))
    print(f"llama-q256 {quant}: NMSE {value:.3e}")
    assert value < bar


def test_generate_quant_json(checkpoint):
    """`hfview generate --quant Q4_K_M` runs the quantized view and says so."""
    import json

    from click.testing import CliRunner

    from hfview.cli import main

    result = CliRunner().invoke(main, ["generate", "--model", str(checkpoint("llama-q256")), "--prompt", "Hello",
                                       "--quant", "q4_k_m", "--max-tokens", "4", "--temperature", "0", "--json"])
    assert result.exit_code == 0, result.output
    out = json.loads(result.output)
    assert out["quant"] == "Q4_K_M" and out["precision"] == "f16"


def test_threads_give_the_same_bytes(monkeypatch):
    """Rows split over threads quantize to the bytes of one call (ggml quantizes each row on its own)."""
    import numpy as np

    from hfview import ggml_quants
    from hfview.gguf_layout import GGMLType

    values = np.random.default_rng(0).standard_normal((333, 512)).astype(np.float32)
    monkeypatch.setattr(ggml_quants, "threads", lambda: 1)
    one = ggml_quants.quantize(values, GGMLType.Q4_K)
    monkeypatch.setattr(ggml_quants, "threads", lambda: 3)
    ggml_quants._pool.cache_clear()
    assert np.array_equal(ggml_quants.quantize(values, GGMLType.Q4_K), one)
    ggml_quants._pool.cache_clear()


# ------------------------------------------------------------------ with an importance matrix
def write_imatrix(view, path, *, legacy=False, seed=0):
    """An importance matrix for every matrix llama-imatrix would see (not token_embd), with known sums and
    counts (one expert of each stack never chosen: its weights are ones), in llama-imatrix's GGUF or legacy
    .dat; returns the weights llama-quantize normalises them to (sums / count), written here independently."""
    import struct

    import numpy as np

    rng = np.random.default_rng(seed)
    weights, sums, counts = {}, {}, {}
    for t in view.tensors:
        dims = t.ggml_dims
        if len(dims) < 2 or t.name == "token_embd.weight" or not t.name.endswith(".weight") \
                or t.name.endswith("_norm.weight"):
            continue
        experts = dims[2] if len(dims) > 2 else 1
        s = (rng.random((experts, dims[0]), dtype=np.float32) * 50).astype(np.float32)
        n = rng.integers(1, 40, experts).astype(np.float32)
        if experts > 1:
            n[-1] = 0
        sums[t.name], counts[t.name] = s, n
        w = np.where(n[:, None] > 0, s / np.maximum(n, 1)[:, None], np.float32(1)).astype(np.float32)
        weights[t.name] = w.reshape(-1)
    if legacy:
        with open(path, "wb") as f:
            f.write(struct.pack("<i", len(sums)))
            for name, s in sums.items():
                ncall = int(counts[name][0])
                f.write(struct.pack("<i", len(name)) + name.encode() + struct.pack("<ii", ncall, s.size))
                f.write((s.reshape(-1) * ncall).astype("<f4").tobytes())  # legacy files hold sums x ncall
                weights[name] = ((s.reshape(-1) * ncall).astype(np.float32) / np.float32(ncall))
            f.write(struct.pack("<i", 17) + struct.pack("<i", 7) + b"wiki.tx")
        return weights, [("quantize.imatrix.file", str(path)), ("quantize.imatrix.dataset", "wiki.tx"),
                         ("quantize.imatrix.entries_count", len(sums)), ("quantize.imatrix.chunks_count", 17)]
    import gguf
    w = gguf.GGUFWriter(str(path), arch="imatrix")
    w.add_array("imatrix.datasets", ["calibration.txt"])
    w.add_uint32("imatrix.chunk_count", 23)
    w.add_uint32("imatrix.chunk_size", 512)
    for name in sums:
        w.add_tensor(name + ".in_sum2", sums[name])
        w.add_tensor(name + ".counts", counts[name].reshape(-1, 1))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return weights, [("quantize.imatrix.file", str(path)), ("quantize.imatrix.dataset", "calibration.txt"),
                     ("quantize.imatrix.entries_count", len(sums)), ("quantize.imatrix.chunks_count", 23)]


# one of each rule an importance matrix changes or unlocks: the IQ2 mixes (IQ2_XXS, IQ2_S), IQ3_XXS's attn_v, IQ1_S,
# Q2_K_S, ffn_down's Q4_0 -> Q4_1 and IQ4_XS's Q5_K (both only with / without an imatrix), Q4_K_M's plain mix
IMATRIX_TYPES = ["IQ2_XXS", "IQ2_S", "IQ3_XXS", "IQ1_S", "Q2_K_S", "Q4_0", "Q4_K_M", "IQ4_XS"]
IMATRIX_CASES = [("llama-q256", False, q) for q in IMATRIX_TYPES] + \
    [("mixtral-q256", False, q) for q in IMATRIX_TYPES] + [("llama-q256", True, q) for q in ("IQ2_XS", "Q4_0")]


@pytest.mark.parametrize("name, legacy, quant", IMATRIX_CASES,
                         ids=[f"{n}-{'dat' if legacy else 'gguf'}-{q}" for n, legacy, q in IMATRIX_CASES])
def test_imatrix_quant_is_llama_quantizes(name, legacy, quant, checkpoint, converted, tmp_path):
    """--imatrix: the file llama_model_quantize writes given the same importance weights and the KV that
    llama-quantize --imatrix adds (file, dataset, entries, chunks), byte for byte; per-expert weights on the
    mixture; the very low-bit types it unlocks."""
    import numpy as np

    import oracle
    from hfview import HfCheckpoint
    from hfview.export import export
    from hfview.quant import FILE_TYPES

    path = checkpoint(name)
    imatrix = tmp_path / ("imatrix.dat" if legacy else "imatrix.gguf")
    weights, overrides = write_imatrix(HfCheckpoint(path), imatrix, legacy=legacy)
    np.savez(tmp_path / "weights.npz", **weights)
    theirs = oracle.quantize(converted(name, "auto"), tmp_path / "theirs.gguf", FILE_TYPES[quant][0],
                             tmp_path / "weights.npz", overrides)
    ours = export(HfCheckpoint(path, quant=quant, imatrix=str(imatrix)), tmp_path / "ours.gguf")
    if oracle.sha256(ours) != oracle.sha256(theirs):
        pytest.fail(f"{name} --quant {quant} --imatrix: {oracle.first_difference(ours, theirs)}")


def test_imatrix_refusals(checkpoint, tmp_path):
    from hfview import HfCheckpoint
    from hfview.errors import CheckpointError, ConfigError

    path = checkpoint("llama-q256")
    imatrix = tmp_path / "imatrix.gguf"
    write_imatrix(HfCheckpoint(path), imatrix)
    with pytest.raises(ConfigError, match="only with --quant"):
        HfCheckpoint(path, imatrix=str(imatrix))
    other = tmp_path / "other.gguf"
    write_imatrix(HfCheckpoint(checkpoint("mixtral-q256")), other)
    with pytest.raises(ConfigError, match="computed for another model|no importance data"):
        HfCheckpoint(path, quant="IQ2_XS", imatrix=str(other))
    (tmp_path / "junk.dat").write_bytes(b"\x05\x00\x00\x00\xff\xff\xff\x7f")
    with pytest.raises(CheckpointError, match="junk.dat"):
        HfCheckpoint(path, quant="IQ2_XS", imatrix=str(tmp_path / "junk.dat"))


def test_lazy_load_quantizes_each_tensor_about_once(checkpoint, monkeypatch):
    """llama.cpp reads the view's tensors in its own order, and after each seek its stdio buffer reads across the
    neighbouring tensor's edge: that edge must not make the view quantize a whole chunk ahead there (it did, and a
    quantized load quantized everything ~3 times over on this fixture, twice on the 1 GB bench checkpoint)."""
    import math

    import hfview.ggml_quants as gq
    from hfview import HfCheckpoint
    from hfview.runner.stream import StreamModel

    done = [0]
    quantize = gq.quantize

    def counting(values, *args, **kwargs):
        done[0] += values.size
        return quantize(values, *args, **kwargs)

    monkeypatch.setattr(gq, "quantize", counting)
    view = HfCheckpoint(checkpoint("llama3-bpe"), quant="Q8_0")
    total = sum(math.prod(t.shape) for t in view.tensors if t.via is not None)
    with StreamModel(view, n_ctx=64) as m:
        assert np.isfinite(m.logits([1, 2, 3])).all()
    assert total <= done[0] <= 1.25 * total, (done[0], total)

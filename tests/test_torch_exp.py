"""hfview.torch_exp: torch's exponential for the converter's -exp(A_log) from a per-machine table, bit for bit what
torch computes on this machine, in any order and length; the table cached and reused; no torch, no table."""
from __future__ import annotations

import sys

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from hfview import torch_exp  # noqa: E402
from hfview.views import EXP, NEG_EXP  # noqa: E402


@pytest.fixture
def fresh_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("HFVIEW_CACHE", str(tmp_path))
    torch_exp._table.cache_clear()
    yield tmp_path
    torch_exp._table.cache_clear()


def _torch_bits(x: np.ndarray) -> np.ndarray:
    return torch.exp(torch.from_numpy(x.copy())).numpy()


@pytest.mark.parametrize("kind", ["bf16", "f16"])
def test_every_16_bit_input_in_any_order_is_torchs(kind, fresh_cache):
    """All 65,536 inputs, shuffled, and in short pieces (a tensor's length and an element's place in it do not
    change torch's result): the table's bits are torch's own, NaNs and infinities included."""
    x = torch_exp._all_inputs(kind)
    order = np.random.default_rng(0).permutation(x.size)
    shuffled = x[order]
    assert np.array_equal(torch_exp.torch_exp(shuffled).view(np.uint8), _torch_bits(shuffled).view(np.uint8))
    for piece in (shuffled[:1], shuffled[5:12], shuffled[100:163]):
        assert np.array_equal(torch_exp.torch_exp(piece).view(np.uint8), _torch_bits(piece).view(np.uint8))


def test_steps_use_it_and_keep_the_shape(fresh_cache):
    x = (np.random.default_rng(1).normal(size=(4, 6)).astype(np.float32).view(np.uint32) & 0xFFFF0000).view(np.float32)
    assert np.array_equal(NEG_EXP(x).view(np.uint32), (-_torch_bits(x)).view(np.uint32))
    assert np.array_equal(EXP(x).view(np.uint32), _torch_bits(x).view(np.uint32))
    assert NEG_EXP(x).shape == (4, 6)


def test_f32_inputs_that_are_not_bf16_ask_torch(fresh_cache, monkeypatch):
    x = np.random.default_rng(2).normal(size=50).astype(np.float32)
    asked = []
    real = torch_exp._torch
    monkeypatch.setattr(torch_exp, "_torch", lambda v: asked.append(v.size) or real(v))
    assert np.array_equal(torch_exp.torch_exp(x).view(np.uint32), _torch_bits(x).view(np.uint32))
    assert asked == [50]
    assert not (fresh_cache / "exp-tables").exists()


def test_the_table_is_cached_and_read_back(fresh_cache, monkeypatch):
    x = np.float32([0.5, -3.0, 7.25])
    first = torch_exp.torch_exp(x)
    files = sorted((fresh_cache / "exp-tables").glob("torch-*-bf16.npy"))
    assert len(files) == 1 and not list((fresh_cache / "exp-tables").glob("*.partial"))
    torch_exp._table.cache_clear()
    monkeypatch.setattr(torch_exp, "_torch", lambda v: pytest.fail("the cached table was not used"))
    assert np.array_equal(torch_exp.torch_exp(x), first)


def test_a_damaged_table_is_rebuilt(fresh_cache):
    torch_exp.torch_exp(np.float32([1.0]))
    (path,) = (fresh_cache / "exp-tables").glob("torch-*-bf16.npy")
    path.write_bytes(b"not a table")
    torch_exp._table.cache_clear()
    x = np.float32([1.0, 2.0])
    assert np.array_equal(torch_exp.torch_exp(x), _torch_bits(x))
    assert np.load(path).shape == (1 << 16,)


def test_the_key_follows_the_kernel_choice(monkeypatch):
    monkeypatch.delenv("ATEN_CPU_CAPABILITY", raising=False)
    plain = torch_exp._kernel_key()
    monkeypatch.setenv("ATEN_CPU_CAPABILITY", "default")
    assert torch_exp._kernel_key() != plain


def test_without_torch_the_step_is_correctly_rounded(fresh_cache, monkeypatch):
    from importlib import metadata

    def missing(name):
        raise metadata.PackageNotFoundError(name)
    monkeypatch.setattr(metadata, "version", missing)
    monkeypatch.setitem(sys.modules, "torch", None)  # `import torch` raises ImportError
    x = np.float32([0.5, -3.0, 7.25])
    assert torch_exp.torch_exp(x) is None
    assert np.array_equal(NEG_EXP(x), (-np.exp(x.astype(np.float64))).astype(np.float32))

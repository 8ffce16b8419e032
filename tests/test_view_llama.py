"""The two oracles on the Llama family (llama, mistral, mixtral fixtures).

1. Byte identity: `hfview export` == the pinned convert_hf_to_gguf.py, whole-file sha256, every outtype.
2. Logits: llama.cpp fed straight from the view (FILE* stream, no file) == transformers, NMSE < 1e-4 at
   every position of a 16-token prompt.
"""
from __future__ import annotations

import numpy as np
import pytest

import oracle
from hfview import HfCheckpoint
from hfview.export import export

FIXTURES = ["llama-spm", "llama-linear", "llama3-bpe", "mistral", "mistral-yarn", "mixtral"]
OUTTYPES = ["f32", "f16", "bf16", "auto"]
PROMPT = "The quick brown fox jumps over the lazy dog, and then 12 more words follow: naïve café 東京."


@pytest.mark.parametrize("outtype", OUTTYPES)
@pytest.mark.parametrize("name", FIXTURES)
def test_export_is_byte_identical_to_converter(name, outtype, checkpoint, converted, tmp_path):
    theirs = converted(name, outtype)
    ours = export(HfCheckpoint(checkpoint(name), outtype), tmp_path / "ours.gguf")
    if oracle.sha256(ours) != oracle.sha256(theirs):
        pytest.fail(f"{name} --outtype {outtype}: {oracle.first_difference(ours, theirs)}")


@pytest.mark.parametrize("name", ["llama3-bpe", "mixtral"])
def test_stream_reads_equal_the_file(name, checkpoint, converted, monkeypatch):
    """Arbitrary byte ranges of the virtual file, with tensors produced in small chunks, equal the file."""
    import hfview.checkpoint as ck
    monkeypatch.setattr(ck, "_CHUNK_BYTES", 4096)
    view = HfCheckpoint(checkpoint(name), "bf16")
    data = converted(name, "bf16").read_bytes()
    assert view.size == len(data)
    rng = np.random.default_rng(7)
    for _ in range(300):
        a = int(rng.integers(0, len(data)))
        n = int(rng.integers(1, 70000))
        assert view.read(a, n) == data[a:a + n], (a, n)
    assert view.read(len(data) - 5, 100) == data[-5:]


def _nmse(ours: np.ndarray, ref: np.ndarray) -> float:
    return float(np.mean((ours - ref) ** 2) / np.mean(ref ** 2))


@pytest.fixture(scope="module")
def reference_logits(checkpoint):
    """transformers' float32 logits for given ids, computed once per fixture and ids."""
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    models, cache = {}, {}

    def get(name, ids):
        key = (name, tuple(ids))
        if key not in cache:
            if name not in models:
                models[name] = transformers.AutoModelForCausalLM.from_pretrained(checkpoint(name),
                                                                                 dtype=torch.float32)
            with torch.no_grad():
                cache[key] = models[name](torch.tensor([ids])).logits[0].numpy()
        return cache[key]
    return get


@pytest.mark.parametrize("outtype", OUTTYPES)
@pytest.mark.parametrize("name", FIXTURES)
def test_llama_cpp_from_view_matches_transformers(name, outtype, checkpoint, reference_logits):
    from runner.stream import StreamModel

    with StreamModel(HfCheckpoint(checkpoint(name), outtype), n_ctx=64) as m:
        ids = m.tokenize(PROMPT)[:16]  # llama.cpp's tokenizer over the view's vocabulary; both get these ids
        assert len(ids) == 16
        ours = m.logits(ids)
    ref = reference_logits(name, ids)
    assert ours.shape == ref.shape
    nmse = _nmse(ours, ref)
    print(f"{name} {outtype}: NMSE {nmse:.3e}, top-1 agreement {np.mean(ours.argmax(-1) == ref.argmax(-1)):.3f}")
    assert nmse < 1e-4

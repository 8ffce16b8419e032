"""The two oracles on the Llama family (llama, mistral, mixtral fixtures).

1. Byte identity: `hfview export` == the pinned convert_hf_to_gguf.py, whole-file sha256, every outtype.
2. Logits: llama.cpp fed straight from the view (FILE* stream, no file) == transformers, NMSE < 1e-4 at
   every position of a 16-token prompt.
"""
from __future__ import annotations

import numpy as np
import pytest

from family_oracle import oracle_tests
from hfview import HfCheckpoint

FIXTURES = ["llama-spm", "llama-linear", "llama3-bpe", "mistral", "mistral-yarn", "mixtral"]

test_export_is_byte_identical_to_converter, test_llama_cpp_from_view_matches_transformers = \
    oracle_tests("llama", FIXTURES)


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

"""Opening a checkpoint and inspecting it read headers only: no tensor byte is read."""
from __future__ import annotations

import json

import numpy as np
import pytest

import hfview.shards as shards
from hfview import HfCheckpoint
from hfview.inspect import describe, render


def test_open_and_inspect_read_no_tensor_bytes(checkpoint, monkeypatch):
    def no_reads(*args, **kwargs):
        raise AssertionError("a tensor's bytes were read while opening or inspecting")
    monkeypatch.setattr(shards, "_pread", no_reads)
    ckpt = HfCheckpoint(checkpoint("mixtral"))
    info = describe(ckpt)
    text = render(info)
    assert "blk.0.ffn_gate_exps.weight" in text and "stack of 4" in text
    assert "rotation pairs" in text
    json.dumps(info, default=str)


def test_stored_bf16_nans_are_quieted_as_the_converter_does_on_every_read_path(checkpoint, tmp_path):
    """bf16 bits pass through unchanged, except that a signalling NaN comes out quiet (the converter's round trip
    through f32): the exported file, the stream llama.cpp reads (stored rows read straight into a reused buffer) and
    the converter's file are the same bytes."""
    import hashlib
    import shutil

    import torch
    from safetensors.torch import load_file, save_file

    import oracle
    from hfview.export import export

    src = tmp_path / "nans"
    shutil.copytree(checkpoint("llama3-bpe"), src)
    shard = sorted(src.glob("*.safetensors"))[0]
    tensors = load_file(shard)
    name = next(k for k, t in tensors.items() if t.dtype == torch.bfloat16 and t.dim() == 2)
    bits = tensors[name].view(torch.int16).clone()
    flat = bits.view(-1)
    flat[:4] = torch.tensor([0x7F81, 0xFF81 - 0x10000, 0x7FC1, 0x7F80], dtype=torch.int16)  # sNaN, -sNaN, qNaN, inf
    tensors[name] = bits.view(torch.bfloat16)
    save_file(tensors, shard, metadata={"format": "pt"})

    view = HfCheckpoint(src, "bf16")
    ours = export(view, tmp_path / "ours.gguf")
    theirs = oracle.convert_cached(src, "bf16")
    streamed, buf, offset = hashlib.sha256(), bytearray(1 << 18), 0
    while offset < view.size:
        n = view.readinto(offset, memoryview(buf)[:min(len(buf), view.size - offset)])
        streamed.update(memoryview(buf)[:n])
        offset += n
    assert oracle.sha256(ours) == oracle.sha256(theirs) == streamed.hexdigest()
    row = view.read_tensor(next(t.name for t in view.tensors if t.view.sources and t.view.sources[0].name == name))
    assert [int(b) for b in row.reshape(-1)[:4].view(np.uint16)] == [0x7FC1, 0xFFC1, 0x7FC1, 0x7F80]


def test_long_arrays_are_held_encoded_and_read_back_as_written(checkpoint):
    """A vocabulary's long arrays are kept as their header bytes after the header is built (EncodedArray), and
    decode to exactly the values that were encoded: every entry re-encodes to its own span of the header."""
    from hfview.gguf_layout import KV, EncodedArray, encode_kv

    view = HfCheckpoint(checkpoint("llama3-bpe"), "f32")
    encoded = [kv for kv in view.kv if isinstance(kv.value, EncodedArray)]
    assert {kv.key for kv in encoded} >= {"tokenizer.ggml.tokens", "tokenizer.ggml.token_type", "tokenizer.ggml.merges"}
    for kv, (start, end) in zip(view.kv, view._kv_spans):
        value = list(kv.value) if isinstance(kv.value, EncodedArray) else kv.value
        assert encode_kv(KV(kv.key, kv.type, value, kv.item_type)) == view.read(start, end - start), kv.key
    tokens = next(kv.value for kv in encoded if kv.key == "tokenizer.ggml.tokens")
    assert len(tokens) == len(list(tokens)) and tokens[:2] == list(tokens)[:2] and tokens == list(tokens)
    assert tokens + ["x"] == list(tokens) + ["x"] and ["x"] + tokens == ["x"] + list(tokens)  # as a list adds


@pytest.mark.parametrize("fixture, outtype", [("mixtral", "auto"), ("deepseek_v3", "bf16"), ("llama3-bpe", "f16")])
def test_reads_of_any_size_at_any_offset_give_the_files_bytes(checkpoint, fixture, outtype):
    """llama.cpp's stdio reads start wherever a seek left them: whole rows of stored bits go straight into the
    reader's buffer, a row cut by its edge through the chunk buffer (one row), converted rows a chunk ahead."""
    view = HfCheckpoint(checkpoint(fixture), outtype)
    whole = b"".join(bytes(piece) for piece, _ in HfCheckpoint(checkpoint(fixture), outtype).iter_file())
    assert len(whole) == view.size
    rng = np.random.default_rng(0)
    sizes = [1, 2, 7, 4095, 4097, 65_539, 1 << 18]
    offset, buf = 0, bytearray(1 << 18)
    while offset < view.size:  # front to back in uneven pieces
        n = view.readinto(offset, memoryview(buf)[:sizes[int(rng.integers(len(sizes)))]])
        assert bytes(buf[:n]) == whole[offset:offset + n], offset
        offset += n
    for start in rng.integers(0, view.size, 200):  # and from anywhere
        n = view.readinto(int(start), memoryview(buf)[:sizes[int(rng.integers(len(sizes)))]])
        assert bytes(buf[:n]) == whole[start:start + n], start
    rows = [t.row_bytes for t in view.tensors if t.stored_bits]
    assert not rows or len(view._chunk_buffer) <= max(rows)

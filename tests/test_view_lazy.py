"""Opening a checkpoint and inspecting it read headers only: no tensor byte is read."""
from __future__ import annotations

import json

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

"""The core's CLI: inspect and export, and refusals printed as one line without traceback."""
from __future__ import annotations

import json

from click.testing import CliRunner

import oracle
from hfview.cli import main


def test_inspect_json(checkpoint):
    result = CliRunner().invoke(main, ["inspect", str(checkpoint("llama3-bpe")), "--json"])
    assert result.exit_code == 0, result.output
    info = json.loads(result.output)
    assert info["architecture"] == "llama" and info["model_revision"] is None
    by_name = {t["name"]: t for t in info["tensors"]}
    assert by_name["rope_freqs.weight"]["view"] == "computed from config"
    assert by_name["blk.1.attn_k.weight"]["view"] == "rotation pairs over 3 heads"
    assert by_name["blk.1.attn_k.weight"]["sources"] == ["model.layers.1.self_attn.k_proj.weight"]


def test_export_cli_matches_converter(checkpoint, converted, tmp_path):
    out = tmp_path / "m.gguf"
    result = CliRunner().invoke(main, ["export", str(checkpoint("mistral")), str(out), "--outtype", "f16",
                                       "--no-progress"])
    assert result.exit_code == 0, result.output
    assert oracle.sha256(out) == oracle.sha256(converted("mistral", "f16"))
    assert not (tmp_path / "m.gguf.partial").exists()


def test_refusal_is_one_line_without_traceback(tmp_path):
    result = CliRunner().invoke(main, ["export", str(tmp_path), str(tmp_path / "x.gguf")])
    assert result.exit_code == 1
    assert result.output.startswith("hfview: model config is missing")
    assert "Traceback" not in result.output
    assert list(tmp_path.iterdir()) == []


def test_failure_mid_export_leaves_no_file(checkpoint, tmp_path, monkeypatch):
    import hfview.checkpoint
    calls = {"n": 0}
    real = hfview.checkpoint.HfCheckpoint._chunk

    def failing(self, t, start, stop):
        calls["n"] += 1
        if calls["n"] > 5:
            raise OSError("disk pulled out")
        return real(self, t, start, stop)
    monkeypatch.setattr(hfview.checkpoint.HfCheckpoint, "_chunk", failing)
    out = tmp_path / "m.gguf"
    result = CliRunner().invoke(main, ["export", str(checkpoint("llama-spm")), str(out), "--no-progress"])
    assert result.exit_code == 1 and result.output == "hfview: disk pulled out\n"  # a system error: one line
    assert list(tmp_path.iterdir()) == []


def test_unexpected_exception_is_one_line_naming_the_command(checkpoint, monkeypatch):
    """A bug is reported as an internal error in one line that asks for --debug output; --debug shows it."""
    import hfview.checkpoint

    def bug(self, *args, **kwargs):
        raise KeyError("no such thing")
    monkeypatch.setattr(hfview.checkpoint.HfCheckpoint, "__init__", bug)
    model = str(checkpoint("llama-spm"))
    result = CliRunner().invoke(main, ["inspect", model])
    assert result.exit_code == 70
    assert result.output.count("\n") == 1 and "Traceback" not in result.output
    assert result.output.startswith("hfview: internal error in `hfview inspect` (KeyError: 'no such thing')")
    assert "hfview --debug inspect" in result.output

    debug = CliRunner().invoke(main, ["--debug", "inspect", model])
    assert isinstance(debug.exception, KeyError) and debug.exc_info[2] is not None  # raised: Python prints it


def test_refusal_with_debug_raises(tmp_path):
    result = CliRunner().invoke(main, ["--debug", "export", str(tmp_path), str(tmp_path / "x.gguf")])
    assert type(result.exception).__name__ == "ConfigError"


def test_families_lists_what_the_view_reads_and_refuses():
    from hfview import families as registry

    result = CliRunner().invoke(main, ["families", "--json"])
    assert result.exit_code == 0, result.output
    listed = json.loads(result.output)
    assert sorted(r["model_type"] for r in listed["read"]) == sorted(registry.supported_model_types())
    llama = next(r for r in listed["read"] if r["model_type"] == "llama")
    # (1bitLLM's BitnetForCausalLM is llama-typed too: the row names both architectures)
    assert "llama" in llama["gguf_arch"].split("/") and "LlamaForCausalLM" in llama["architectures"]
    assert "opt" in listed["refused"] and "OPT" in listed["refused"]["opt"]


def _refusing_direct(monkeypatch, at: str) -> dict:
    """Make O_DIRECT refused as tmpfs refuses it (`at` "open") or as a filesystem that accepts the flag and refuses
    the first write does (`at` "write"); returns counts of the refusals."""
    import errno
    import fcntl
    import os
    refused = {"n": 0}
    real_open, real_write = os.open, os.write

    def open_(path, flags, *args, **kwargs):
        if at == "open" and flags & os.O_DIRECT:
            refused["n"] += 1
            raise OSError(errno.EINVAL, "Invalid argument")
        return real_open(path, flags, *args, **kwargs)

    def write(fd, data):
        if at == "write" and fcntl.fcntl(fd, fcntl.F_GETFL) & os.O_DIRECT:
            refused["n"] += 1
            raise OSError(errno.EINVAL, "Invalid argument")
        return real_write(fd, data)
    monkeypatch.setattr(os, "open", open_)
    monkeypatch.setattr(os, "write", write)
    return refused


def test_export_where_direct_writes_are_refused_writes_the_same_file_buffered(checkpoint, converted, tmp_path,
                                                                               monkeypatch):
    from hfview.checkpoint import HfCheckpoint
    from hfview.export import export
    want = oracle.sha256(converted("mistral", "f16"))
    for at in ("open", "write"):
        with monkeypatch.context() as m:
            refused = _refusing_direct(m, at)
            out = export(HfCheckpoint(checkpoint("mistral"), "f16"), tmp_path / f"{at}.gguf")
        assert refused["n"] == 1, at  # refused once, then written buffered
        assert oracle.sha256(out) == want, at

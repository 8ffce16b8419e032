"""Hostile checkpoints for the fuzz test: a case is a fixture plus a list of edits, as plain JSON, so a case
that once failed can be kept under tests/data/ and replayed.

    {"fixture": "default", "edits": [{"file": "config.json", "op": "json_set", "path": ["vocab_size"],
                                       "value": 1000000000000}]}

Edits (`file` is relative to the checkpoint directory):
    json_set / json_delete   path into the file's JSON (dict keys, list indices); json_set creates a missing
                             last key and appends past a list's end; `raw` instead of `value`: JSON text,
                             or [[piece, times], ...] spelling a long one
    header_set / header_delete   the same inside a safetensors shard's JSON header (data bytes kept)
    header_length            the shard's 8-byte header length field set to `value`
    truncate                 the file cut to `size` bytes
    flip                     byte `at` (modulo the file size) xor-ed with `xor`
    text                     the file replaced by `text` (UTF-8) or `hex` (raw bytes)
    delete                   the file removed

`serve()` is the worker: it runs cases read as JSON lines from stdin under an address-space limit
(RLIMIT_AS), one JSON line of outcome each on stdout. A case is built from hard links to the fixture's
files; an edited file is always written anew, so the fixture itself is never touched.
"""
from __future__ import annotations

import json
import os
import shutil
import struct
import sys
import time
import traceback
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


# ---------------------------------------------------------------- JSON paths
def _walk(doc, path: list):
    """The container holding path[-1], or None where the path leaves the document."""
    node = doc
    for key in path[:-1]:
        if isinstance(node, dict) and key in node:
            node = node[key]
        elif isinstance(node, list) and isinstance(key, int) and -len(node) <= key < len(node):
            node = node[key]
        else:
            return None
    return node


def json_set(doc, path: list, value):
    if not path:
        return value
    node, key = _walk(doc, path), path[-1]
    if isinstance(node, dict):
        node[key] = value
    elif isinstance(node, list) and isinstance(key, int):
        if -len(node) <= key < len(node):
            node[key] = value
        else:
            node.append(value)
    return doc


def json_delete(doc, path: list):
    node, key = _walk(doc, path), path[-1] if path else None
    if isinstance(node, dict):
        node.pop(key, None)
    elif isinstance(node, list) and isinstance(key, int) and -len(node) <= key < len(node):
        del node[key]
    return doc


def dumps(doc) -> bytes:
    # allow_nan: NaN / Infinity are what hostile (and some real) configs hold
    return json.dumps(doc, ensure_ascii=True).encode()


# ---------------------------------------------------------------- safetensors
def split_shard(raw: bytes) -> tuple[dict, bytes]:
    n = struct.unpack("<Q", raw[:8])[0]
    return json.loads(raw[8:8 + n]), raw[8 + n:]


# `raw`: JSON text put in place of the value as it stands, for what Python's json cannot write (a
# 5000-digit number, 1e400, nesting deeper than the recursion limit)
_RAW = "\u0000raw\u0000"


def _edited(doc, edit: dict):
    if edit["op"].endswith("_delete"):
        return json_delete(doc, edit["path"])
    return json_set(doc, edit["path"], _RAW if "raw" in edit else edit["value"])


def _with_raw(text: bytes, edit: dict) -> bytes:
    if "raw" not in edit:
        return text
    raw = edit["raw"]  # the text, or (kept cases) [[piece, times], ...] for a long one
    raw = raw if isinstance(raw, str) else "".join(piece * times for piece, times in raw)
    return text.replace(dumps(_RAW), raw.encode("utf-8", "surrogatepass"), 1)


# ---------------------------------------------------------------- applying a case
def apply_edit(raw: bytes | None, edit: dict) -> bytes | None:
    """A file's new bytes after one edit (None: the file is absent)."""
    op = edit["op"]
    if op == "delete":
        return None
    if op == "text":
        return bytes.fromhex(edit["hex"]) if "hex" in edit else edit["text"].encode("utf-8", "surrogatepass")
    if raw is None:
        return None  # editing a file the case has already removed
    if op in ("json_set", "json_delete"):
        try:
            doc = json.loads(raw)
        except (ValueError, RecursionError):
            return raw  # an earlier edit broke the JSON: nothing to walk
        return _with_raw(dumps(_edited(doc, edit)), edit)
    if op in ("header_set", "header_delete"):
        try:
            header, data = split_shard(raw)
        except (ValueError, RecursionError, struct.error):
            return raw
        text = _with_raw(dumps(_edited(header, edit)), edit)
        return struct.pack("<Q", len(text)) + text + data
    if op == "header_length":
        return struct.pack("<Q", edit["value"] % (1 << 64)) + raw[8:]
    if op == "truncate":
        return raw[:edit["size"]]
    if op == "flip":
        if not raw:
            return raw
        at = edit["at"] % len(raw)
        return raw[:at] + bytes([raw[at] ^ (edit["xor"] or 1)]) + raw[at + 1:]
    raise ValueError(f"unknown edit {op!r}")


def materialise(case: dict, fixtures: dict[str, Path], out: Path) -> Path:
    """The case's checkpoint directory under `out` (created): hard links to the fixture's untouched files."""
    src = fixtures[case["fixture"]]
    out.mkdir(parents=True)
    edited: dict[str, bytes | None] = {}
    for edit in case["edits"]:
        name = edit["file"]
        if name not in edited:
            edited[name] = (src / name).read_bytes() if (src / name).is_file() else None
        edited[name] = apply_edit(edited[name], edit)
    for f in src.iterdir():
        if f.is_file() and f.name not in edited:
            try:
                os.link(f, out / f.name)
            except OSError:
                shutil.copyfile(f, out / f.name)
    for name, raw in edited.items():
        if raw is not None:
            (out / name).write_bytes(raw)
    return out


# ---------------------------------------------------------------- what a case runs
def open_and_read(path: Path) -> str:
    """Everything hfview does with a checkpoint before llama.cpp sees it: open the view, read every tensor
    through the API and the whole virtual file through the stream's read path."""
    from hfview import HfCheckpoint

    ckpt = HfCheckpoint(path)
    for t in ckpt.tensors:
        ckpt.read_tensor(t.name)
    buf = memoryview(bytearray(1 << 20))
    for offset in range(0, ckpt.size, len(buf)):
        ckpt.readinto(offset, buf[:min(len(buf), ckpt.size - offset)])
    return f"{len(ckpt.tensors)} tensors, {ckpt.size} bytes"


def run_case(case: dict, fixtures: dict[str, Path], scratch: Path) -> dict:
    """{"outcome": "ok" | "refused" | "crash", "seconds", "detail"}: refused is an HfviewError, crash anything else."""
    from hfview.errors import HfviewError

    where = scratch / "case"
    shutil.rmtree(where, ignore_errors=True)
    start = time.perf_counter()
    try:
        materialise(case, fixtures, where)
        start = time.perf_counter()
        target = case.get("target", "checkpoint")
        detail = open_and_read(where) if target == "checkpoint" else TARGETS[target](where)
        outcome = "ok"
    except HfviewError as e:
        outcome, detail = "refused", f"{type(e).__name__}: {e}"
    except BaseException as e:  # noqa: BLE001 - the point is to see every escape, MemoryError included
        outcome, detail = "crash", "".join(traceback.format_exception(e))[-4000:]
    seconds = time.perf_counter() - start
    shutil.rmtree(where, ignore_errors=True)
    return {"outcome": outcome, "seconds": seconds, "detail": detail}


def _plamo(path: Path) -> str:
    from hfview.tokenizer.vocab import plamo_vocab

    return f"{len(plamo_vocab(path, {'vocab_size': 64}))} keys"


def _tiktoken(path: Path) -> str:
    from hfview.tokenizer.tiktoken_bpe import load_ranks

    return f"{len(load_ranks(path / 'tokenizer.tiktoken'))} ranks"


# tokenizer readers no fixture family reaches through HfCheckpoint, run on their own
TARGETS = {"plamo": _plamo, "tiktoken": _tiktoken}


def serve(fixtures_json: str, limit_bytes: int) -> None:
    """The worker loop: one case per stdin line, one outcome per stdout line, under RLIMIT_AS."""
    import resource
    import tempfile

    resource.setrlimit(resource.RLIMIT_AS, (limit_bytes, limit_bytes))
    fixtures = {k: Path(v) for k, v in json.loads(fixtures_json).items()}
    import hfview  # noqa: F401 - imported once, outside any case's time
    import hfview.tokenizer.vocab  # noqa: F401

    out = sys.stdout
    sys.stdout = sys.stderr  # anything a case prints must not corrupt the protocol
    with tempfile.TemporaryDirectory(prefix="hfview-fuzz-") as scratch:
        out.write("ready\n")
        out.flush()
        for line in sys.stdin:
            out.write(json.dumps(run_case(json.loads(line), fixtures, Path(scratch))) + "\n")
            out.flush()


if __name__ == "__main__":
    sys.path[:0] = [str(ROOT), str(Path(__file__).resolve().parent)]
    serve(sys.argv[1], int(sys.argv[2]))

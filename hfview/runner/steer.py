"""Steering: llama.cpp control vectors (``--steer FILE[:STRENGTH]``) and making one (``hfview steer-vector``).

The file is llama.cpp's control-vector GGUF, as its cvector-generator writes it and its common library
reads it (common/common.cpp ``common_control_vector_load``): ``general.architecture = "controlvector"``,
``controlvector.model_hint`` (the model's architecture), ``controlvector.layer_count``, and one float32
1-D tensor ``direction.N`` per layer. Several files (or one listed twice) add up, each times its strength.

Layer indexing, checked in src/llama-adapter.cpp: ``direction.N`` is added to the residual stream after
llama.cpp layer N (0-based; ``l_out-N``, transformers' ``hidden_states[N + 1]``); layer 0 is never steered
(``direction.0`` is refused, as llama.cpp refuses it), and ``llama_set_adapter_cvec`` takes the rows from
layer 1 on: row i of its buffer is layer i + 1. A direction for a layer the model does not have is refused
by name here (llama.cpp would ignore it silently).

``steer_vector`` follows cvector-generator's "mean" method exactly (tools/cvector-generator): each
positive/negative pair is tokenized with the vocabulary's BOS setting and special tokens parsed, the
shorter padded with the last token of " "; the residual streams of both are taken at every position after
layers 0 .. n_layer - 2 (the generator's callback sees only those: the last layer keeps one row there);
their difference, without the rows that have no element above 1e-6 (the generator's filter, kept as is),
is pooled over all pairs, averaged, and scaled to unit length. Like the generator it names the vector from
layer L's stream ``direction.{L + 1}``, so that vector is applied one layer after the one it was read from.
"""
from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Sequence

import numpy as np

from hfview.errors import HfviewError

from .options import path_and_number
from .devices import llama_bindings

__all__ = ["SteerError", "SteerSpec", "parse_steer", "read_control_vector", "control_vector_rows",
           "write_control_vector", "steer_vector", "mean_direction", "contrast_ids"]

_DIRECTION = re.compile(r"direction\.(\d+)")


class SteerError(HfviewError):
    """A control vector file or a steering request is malformed or does not fit the model."""


@dataclass(frozen=True)
class SteerSpec:
    path: Path
    strength: float = 1.0

    def __str__(self) -> str:
        return f"{self.path}:{self.strength:g}"


def parse_steer(spec: "str | os.PathLike | SteerSpec") -> SteerSpec:
    """'FILE' or 'FILE:STRENGTH' (a trailing ':number' is the strength; any other colon is the path's)."""
    if isinstance(spec, SteerSpec):
        return spec
    path, number = path_and_number(spec, "--steer", "strength", SteerError)
    return SteerSpec(path) if number is None else SteerSpec(path, number)


def read_control_vector(path: "str | os.PathLike") -> dict[int, np.ndarray]:
    """{N: float32 [n_embd]} from a control-vector GGUF; refuses what llama.cpp's loader refuses, by name."""
    from .._gguf import package
    GGUFReader = package().GGUFReader  # gguf-py's reader (its import without mistral-common)

    path = Path(path)
    if not path.is_file():
        raise SteerError(f"{path}: no such control vector file")
    try:
        reader = GGUFReader(str(path), "r")
    except Exception as exc:  # noqa: BLE001 - any parse failure of a foreign file is the file's fault
        raise SteerError(f"{path}: not a readable GGUF control vector ({type(exc).__name__}: {exc})") from None
    arch = reader.get_field("general.architecture")
    if arch is not None:
        name = bytes(arch.parts[arch.data[0]]).decode("utf-8", "replace")
        if name != "controlvector":
            raise SteerError(f"{path}: general.architecture is {name!r}, not 'controlvector': not a control vector")
    out: dict[int, np.ndarray] = {}
    width = None
    for t in reader.tensors:
        m = _DIRECTION.fullmatch(t.name)
        if m is None:
            raise SteerError(f"{path}: tensor {t.name!r} is not named direction.N (N a layer number)")
        layer = int(m.group(1))
        if layer == 0:
            raise SteerError(f"{path}: tensor {t.name!r}: llama.cpp never steers layer 0 (its vectors start at "
                             f"direction.1)")
        if int(t.tensor_type) != 0:
            raise SteerError(f"{path}: tensor {t.name!r} is {t.tensor_type.name}, not F32")
        if len(t.shape) != 1:
            raise SteerError(f"{path}: tensor {t.name!r} has shape {list(map(int, t.shape))}, not 1-D")
        vec = np.array(t.data, dtype=np.float32).reshape(-1)
        if width is None:
            width = vec.size
        elif vec.size != width:
            raise SteerError(f"{path}: tensor {t.name!r} is {vec.size} wide, the file's others {width}")
        out[layer] = out[layer] + vec if layer in out else vec  # as llama.cpp: same layer twice adds up
    if not out:
        raise SteerError(f"{path}: no direction.N tensors: an empty control vector")
    return out


def control_vector_rows(specs: Sequence["str | SteerSpec"], n_layer: int, n_embd: int) -> np.ndarray:
    """The buffer ``llama_set_adapter_cvec`` takes: float32 [n_layer - 1, n_embd], row i = layer i + 1, the
    sum over ``specs`` of strength x direction."""
    rows = np.zeros((max(n_layer - 1, 0), n_embd), dtype=np.float32)
    for spec in map(parse_steer, specs):
        for layer, vec in sorted(read_control_vector(spec.path).items()):
            if vec.size != n_embd:
                raise SteerError(f"{spec.path}: direction.{layer} is {vec.size} wide; the model's residual stream "
                                 f"is {n_embd} wide: a control vector made for another model")
            if layer >= n_layer:
                raise SteerError(f"{spec.path}: direction.{layer} is for layer {layer}; the model has {n_layer} "
                                 f"layers (0..{n_layer - 1}), and llama.cpp steers layers 1..{n_layer - 1}")
            rows[layer - 1] += np.float32(spec.strength) * vec
    return rows


def check_layer_range(layer_range: tuple[int, int] | None, n_layer: int) -> tuple[int, int]:
    """(il_start, il_end), both inclusive; default 1..n_layer - 1, the layers llama.cpp can steer."""
    if layer_range is None:
        return 1, n_layer - 1
    lo, hi = (int(v) for v in layer_range)
    if not 1 <= lo <= hi <= n_layer - 1:
        raise SteerError(f"steering layers {lo}..{hi}: llama.cpp steers layers 1..{n_layer - 1} of this "
                         f"{n_layer}-layer model (layer 0 never)")
    return lo, hi


def parse_layer_range(text: str | None) -> tuple[int, int] | None:
    if text is None:
        return None
    m = re.fullmatch(r"\s*(\d+)\s*(?:-\s*(\d+)\s*)?", text)
    if m is None:
        raise SteerError(f"--steer-layers {text!r}: expected N or A-B")
    lo = int(m.group(1))
    return lo, int(m.group(2)) if m.group(2) is not None else lo


_ESCAPES = {"n": "\n", "r": "\r", "t": "\t", "'": "'", '"': '"', "\\": "\\"}


def unescape(line: str) -> str:
    """common's string_process_escapes, which cvector-generator applies to each prompt line: \\n \\r \\t
    \\' \\" \\\\ and \\xNN; any other backslash stays as written."""
    out, i = [], 0
    while i < len(line):
        c = line[i]
        if c == "\\" and i + 1 < len(line):
            nxt = line[i + 1]
            if nxt in _ESCAPES:
                out.append(_ESCAPES[nxt])
                i += 2
                continue
            if nxt == "x" and re.fullmatch(r"[0-9a-fA-F]{2}", line[i + 2:i + 4]):
                out.append(chr(int(line[i + 2:i + 4], 16)))
                i += 4
                continue
        out.append(c)
        i += 1
    return "".join(out)


# ---------------------------------------------------------------------------------------------- writing
def write_control_vector(path: "str | os.PathLike", directions: dict[int, np.ndarray], model_hint: str) -> Path:
    """A control-vector GGUF as cvector-generator's export_gguf writes it (general.architecture,
    controlvector.model_hint, controlvector.layer_count = number of directions; direction.N float32), written
    atomically (PATH.partial, synced, renamed)."""
    from hfview.gguf_layout import (ALIGNMENT, KV, GGMLType, ValueType, encode_header, encode_kv,
                                    encode_tensor_info, pad_to)

    path = Path(path)
    layers = sorted(directions)
    kvs = [KV("general.architecture", ValueType.STRING, "controlvector"),
           KV("controlvector.model_hint", ValueType.STRING, model_hint),
           KV("controlvector.layer_count", ValueType.INT32, len(layers))]
    head = bytearray(encode_header(len(layers), len(kvs)))
    for kv in kvs:
        head += encode_kv(kv)
    blobs, offset = [], 0
    for layer in layers:
        vec = np.ascontiguousarray(directions[layer], dtype="<f4").reshape(-1)
        head += encode_tensor_info(f"direction.{layer}", [vec.size], int(GGMLType.F32), offset)
        blob = vec.tobytes()
        blobs.append(blob + b"\0" * (pad_to(len(blob), ALIGNMENT) - len(blob)))
        offset += len(blobs[-1])
    head += b"\0" * (pad_to(len(head), ALIGNMENT) - len(head))
    partial = path.with_name(path.name + ".partial")
    try:
        with open(partial, "wb") as f:
            f.write(head)
            for blob in blobs:
                f.write(blob)
            f.flush()
            os.fsync(f.fileno())
        os.replace(partial, path)
    except BaseException:
        partial.unlink(missing_ok=True)
        raise
    return path


# ---------------------------------------------------------------------------------------------- making
def contrast_ids(runner, positive: str, negative: str) -> tuple[list[int], list[int]]:
    """One pair's token ids as cvector-generator makes them: BOS as the vocabulary says, special tokens
    parsed, the shorter padded with the last token of " " (tokenized without specials)."""
    ll = llama_bindings()

    add_bos = bool(ll.llama_vocab_get_add_bos(runner.sm.model.vocab))
    pos = runner.tokenize(positive, add_special=add_bos, parse_special=True)
    neg = runner.tokenize(negative, add_special=add_bos, parse_special=True)
    pad = runner.tokenize(" ", add_special=False, parse_special=False)
    if not pad:
        raise SteerError("the vocabulary tokenizes ' ' to nothing: no padding token for contrast pairs")
    n = max(len(pos), len(neg))
    return pos + [pad[-1]] * (n - len(pos)), neg + [pad[-1]] * (n - len(neg))


def mean_direction(diffs: Iterable[np.ndarray]) -> np.ndarray:
    """cvector-generator's mean.hpp over the pooled difference rows, after its filter_nonzero_rows (a row
    stays when some element is > 1e-6): the mean row scaled to unit length (float32 sums, as there)."""
    rows = np.concatenate([d[(d > 1e-6).any(axis=1)] for d in diffs], axis=0)
    if rows.shape[0] == 0:
        raise SteerError("every positive/negative pair gives the same residual stream: no direction to take")
    mean = rows.astype(np.float64).mean(axis=0)
    return (mean / np.linalg.norm(mean)).astype(np.float32)


def steer_vector(runner, pairs: Sequence[tuple[str, str]]) -> dict[int, np.ndarray]:
    """{N: unit float32 [n_embd]} for N = 1 .. n_layer - 1, from the residual stream after layer N - 1 (see
    the module docstring), through llama.cpp's eval callback."""
    ll = llama_bindings()

    from .capture import capture

    if not pairs:
        raise SteerError("steer-vector needs at least one positive/negative prompt pair")
    n_layer = int(ll.llama_model_n_layer(runner.sm.model.ptr))
    if n_layer < 2:
        raise SteerError(f"the model has {n_layer} layer: llama.cpp steers only layers 1 and up")
    layers = list(range(n_layer - 1))
    diffs: dict[int, list[np.ndarray]] = {layer: [] for layer in layers}
    for positive, negative in pairs:
        pos_ids, neg_ids = contrast_ids(runner, positive, negative)
        pos, neg = capture(runner, pos_ids, layers), capture(runner, neg_ids, layers)
        for layer in layers:
            diffs[layer].append(pos[layer] - neg[layer])
    return {layer + 1: mean_direction(diffs[layer]) for layer in layers}

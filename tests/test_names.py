"""GGUF's names come from gguf-py: what hfview.names states beyond the gguf package is the pinned converter's own."""
from __future__ import annotations

import ast
import inspect

import gguf.constants

import oracle
from hfview.names import GGUF, Keys


def _pinned_keys() -> dict[str, str]:
    """Keys.<path> -> value in the pinned converter's gguf-py, read as text (importing it would shadow the gguf
    package)."""
    tree = ast.parse((oracle.converter_root() / "gguf-py" / "gguf" / "constants.py").read_text(encoding="utf-8"))
    found: dict[str, str] = {}

    def walk(cls: ast.ClassDef, path: str) -> None:
        for node in cls.body:
            if isinstance(node, ast.ClassDef):
                walk(node, f"{path}.{node.name}")
            elif isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant):
                found[f"{path}.{node.targets[0].id}"] = node.value.value

    walk(next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "Keys"), "Keys")
    return found


def _stated_here() -> dict[str, str]:
    """The keys hfview.names states itself (each section's own attributes, not gguf's inherited ones)."""
    stated: dict[str, str] = {}

    def walk(cls, path: str) -> None:
        for name, value in vars(cls).items():
            if name.startswith("_"):
                continue
            if isinstance(value, str):
                stated[f"{path}.{name}"] = value
            elif inspect.isclass(value) and value.__module__ == "hfview.names":
                walk(value, f"{path}.{name}")

    walk(Keys, "Keys")
    return stated


def test_keys_stated_here_are_the_pinned_converters():
    pinned = _pinned_keys()
    stated = _stated_here()
    assert stated, "hfview.names states no key of its own: then it needs no test"
    for path, value in stated.items():
        assert pinned.get(path) == value, f"{path} = {value!r}, the pinned gguf-py has {pinned.get(path)!r}"


def test_keys_stated_here_are_not_in_the_gguf_package():
    """Once the gguf package has a key, hfview.names takes it from there: its own line goes."""
    for path, value in _stated_here().items():
        section = gguf.constants
        for part in path.split("."):
            section = getattr(section, part, None)
        assert section is None, f"{path}: the gguf package has it now ({section!r}); remove it from hfview.names"


def test_tensor_names_are_gguf_pys():
    assert GGUF.ATTN_Q.wb == "blk.{bid}.attn_q.{wb}"
    assert GGUF.TOKEN_EMBD.weight == "token_embd.weight" and GGUF.OUTPUT_NORM.bias == "output_norm.bias"
    assert {str(v) for v in vars(GGUF).values()} <= set(gguf.constants.TENSOR_NAMES.values())

"""Write hfview/references_read.py: the config keys each family's references read.

    python tools/key_policy.py           # regenerate (after a change of pins or of a family's architectures)
    python tools/key_policy.py --check   # exit 1 where the file is not what it would write

A config key changes a model's computation only if something computing the model reads it. hfview's two references
are transformers (the pinned 5.24.0, installed) and llama.cpp's converter (the pinned llama-cpp-python sdist,
unpacked by tests/oracle.py). This tool reads their source with `ast` (nothing of either is imported or run) and
records, as data, which keys each reads:

* transformers: for each model type a family declares (its `defaults`), the configuration_*.py and modeling_*.py
  of the module transformers' auto mapping names for it, and the modules every model's forward shares (rope,
  masks, caches, attention back-ends, PreTrainedConfig, PreTrainedModel);
* the converter: for each architecture a family reads, the text class `ModelBase.register` names for it and that
  class's bases (up to ModelBase), with the module-level functions of each module that defines one.

What counts as a read is taken wide, so that a key is never thought unread when it is read: attribute reads on
anything named `*config` / `cfg` (and on `self` inside a configuration class), getattr / hasattr with a literal name,
string subscripts, `.get` / `.pop` / `.setdefault` with a literal key, `"key" in x`, the converter's `find_hparam`
lists, string literals of tuples and lists (keys tried in a loop), and both sides of a configuration class's
`attribute_map`. A key counted as read where it is not only costs a refusal (hfview.config.check_keys refuses a key
a reference reads and hfview does not); a key missed would be ignored, so the rules err towards reading.
"""
from __future__ import annotations

import argparse
import ast
import hashlib
import importlib.util
import json
import os
import re
import sys
from functools import lru_cache
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "hfview" / "references_read.py"
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

# Modules of transformers that any model's forward runs through, beside its own modeling file.
SHARED_TRANSFORMERS = ("configuration_utils.py", "modeling_utils.py", "modeling_rope_utils.py", "masking_utils.py",
                       "cache_utils.py", "modeling_layers.py", "modeling_flash_attention_utils.py",
                       "integrations/sdpa_attention.py", "integrations/flash_attention.py",
                       "integrations/flex_attention.py", "integrations/moe.py")
_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_.]*$")


def transformers_root() -> Path:
    spec = importlib.util.find_spec("transformers")  # located, not imported
    if spec is None or not spec.submodule_search_locations:
        raise SystemExit("transformers is not installed (pip install transformers==5.24.0)")
    return Path(spec.submodule_search_locations[0])


def converter_root() -> Path:
    import oracle  # tests/oracle.py: the pinned sdist's vendor/llama.cpp, unpacked on first use
    return oracle.converter_root()


def _dotted(node: ast.AST) -> str:
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
    elif isinstance(node, ast.Call):
        parts.append(_dotted(node.func) + "()")
    return ".".join(reversed(parts))


def _is_config(expr: ast.AST) -> bool:
    last = _dotted(expr).rsplit(".", 1)[-1].lower()
    return last.endswith("config") or last in ("cfg", "hparams", "hparams()", "get_text_config()")


def _literal_key(node: ast.AST) -> str | None:
    if isinstance(node, ast.Constant) and isinstance(node.value, str) and _KEY.match(node.value):
        return node.value
    return None


class _Reads(ast.NodeVisitor):
    """The keys a module's code reads (see the module docstring for what counts)."""

    def __init__(self, self_is_config: bool) -> None:
        self.keys: set[str] = set()
        self.self_is_config = self_is_config

    def visit_Attribute(self, node: ast.Attribute) -> None:
        if isinstance(node.ctx, ast.Load) and (_is_config(node.value) or self.self_is_config and
                                               isinstance(node.value, ast.Name) and node.value.id == "self"):
            self.keys.add(node.attr)
        self.generic_visit(node)

    def visit_Subscript(self, node: ast.Subscript) -> None:
        if (key := _literal_key(node.slice)) is not None:
            self.keys.add(key)
        self.generic_visit(node)

    def visit_Call(self, node: ast.Call) -> None:
        func = node.func
        name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
        args = node.args
        if name in ("get", "pop", "setdefault") and args and (key := _literal_key(args[0])) is not None:
            self.keys.add(key)
        elif name in ("getattr", "hasattr") and len(args) >= 2 and (key := _literal_key(args[1])) is not None:
            self.keys.add(key)
        elif name == "find_hparam" and args:
            self.keys.update(k for e in getattr(args[0], "elts", [args[0]]) if (k := _literal_key(e)) is not None)
        self.generic_visit(node)

    def visit_Compare(self, node: ast.Compare) -> None:
        if any(isinstance(op, (ast.In, ast.NotIn)) for op in node.ops) and (key := _literal_key(node.left)):
            self.keys.add(key)
        self.generic_visit(node)

    def _literals(self, node: ast.Tuple | ast.List | ast.Set) -> None:
        keys = [_literal_key(e) for e in node.elts]
        if keys and all(keys):
            self.keys.update(keys)
        self.generic_visit(node)

    visit_Tuple = visit_List = visit_Set = _literals

    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        for stmt in node.body:  # attribute_map = {"hidden_size": "n_embd", ...}: either name reads the stored key
            if (isinstance(stmt, ast.Assign) and any(getattr(t, "id", "") == "attribute_map" for t in stmt.targets)
                    and isinstance(stmt.value, ast.Dict)):
                for k, v in zip(stmt.value.keys, stmt.value.values):
                    self.keys.update(x for x in (_literal_key(k), _literal_key(v)) if x)
        self.generic_visit(node)


@lru_cache(maxsize=None)
def _parse(path: Path) -> ast.Module:
    return ast.parse(path.read_text(encoding="utf-8"), filename=str(path))


# What a source file's code reads, memoised outside the repository by the file's content and this tool's own source
# (so a changed rule reads everything again): parsing ~300 modules costs seconds, hashing them a fraction of that.
_MEMO: dict[str, list[str]] | None = None
_TOOL = hashlib.sha256(Path(__file__).read_bytes()).hexdigest()[:16]


def _memo_path() -> Path:
    import oracle
    return oracle.CACHE / "key_policy" / f"reads-{_TOOL}.json"


def _memoised(path: Path, part: str, compute):
    global _MEMO
    if _MEMO is None:
        memo = _memo_path()
        _MEMO = json.loads(memo.read_text()) if memo.is_file() else {}
    key = f"{hashlib.sha256(path.read_bytes()).hexdigest()}:{part}"
    if key not in _MEMO:
        value = compute()
        _MEMO[key] = sorted(value) if isinstance(value, (set, frozenset)) else value
        _MEMO["_dirty"] = []
    return _MEMO[key]


def _save_memo() -> None:
    if _MEMO is not None and _MEMO.pop("_dirty", None) is not None:
        memo = _memo_path()
        memo.parent.mkdir(parents=True, exist_ok=True)
        tmp = memo.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(json.dumps(_MEMO))
        os.replace(tmp, memo)  # whole or not at all: test workers may write it at once


def _keys_of(nodes, self_is_config: bool) -> frozenset[str]:
    reads = _Reads(self_is_config)
    for node in nodes:
        reads.visit(node)
    return frozenset(reads.keys)


# ---------------------------------------------------------------- transformers
def _assigned_literal(tree: ast.Module, name: str):
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", "") == name for t in node.targets):
            value = node.value
            if isinstance(value, ast.Call) and value.args:  # OrderedDict([...])
                value = value.args[0]
            return ast.literal_eval(value)
    raise LookupError(name)


def transformers_modules(root: Path) -> dict[str, str]:
    """model_type -> the models/ folder transformers keeps its code in (its auto mapping's)."""
    path = root / "models" / "auto" / "auto_mappings.py"

    def compute() -> dict[str, str]:
        names = dict(_assigned_literal(_parse(path), "CONFIG_MAPPING_NAMES"))
        special = dict(_assigned_literal(_parse(path), "SPECIAL_MODEL_TYPE_TO_MODULE_NAME"))
        return {mt: special.get(mt, mt.replace("-", "_")) for mt in names}
    return _memoised(path, "model types", compute)


def transformers_reads(root: Path, module: str) -> frozenset[str]:
    folder = root / "models" / module
    keys: set[str] = set()
    for path in sorted(folder.glob("configuration_*.py")):
        keys.update(_memoised(path, "config", lambda: _keys_of([_parse(path)], self_is_config=True)))
    for path in sorted(folder.glob("modeling_*.py")):
        keys.update(_memoised(path, "module", lambda: _keys_of([_parse(path)], self_is_config=False)))
    return frozenset(keys)


def transformers_shared_reads(root: Path) -> frozenset[str]:
    keys: set[str] = set()
    for rel in SHARED_TRANSFORMERS:
        if (root / rel).is_file():
            is_config = rel == "configuration_utils.py"
            keys.update(_memoised(root / rel, "config" if is_config else "module",
                                  lambda: _keys_of([_parse(root / rel)], self_is_config=is_config)))
    return frozenset(keys)


# ---------------------------------------------------------------- the converter
def _registered(decorators: list[ast.expr]) -> list[str]:
    names = []
    for d in decorators:
        if isinstance(d, ast.Call) and _dotted(d.func).endswith("ModelBase.register"):
            names += [a.value for a in d.args if isinstance(a, ast.Constant) and isinstance(a.value, str)]
    return names


def _classes_of(path: Path) -> list:
    """[[class name, [base names and the classes whose methods it runs on itself], [architectures it registers]]] of
    one converter module. A class may run another's methods on itself without inheriting from it (GraniteMoeModel.modify_tensors(
    self, ...)): the names its body uses are followed as its bases are (those that are converter classes)."""
    def used(node: ast.ClassDef) -> list[str]:  # X.method(self, ...)
        return sorted({n.func.value.id for n in ast.walk(node)
                       if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
                       and isinstance(n.func.value, ast.Name) and n.func.value.id != node.name
                       and n.args and isinstance(n.args[0], ast.Name) and n.args[0].id == "self"})
    return [[n.name, [_dotted(b).rsplit(".", 1)[-1] for b in n.bases] + used(n), _registered(n.decorator_list)]
            for n in _parse(path).body if isinstance(n, ast.ClassDef)]


@lru_cache(maxsize=None)
def converter_classes(root: Path) -> tuple[dict[str, tuple[Path, list[str]]], dict[str, list[str]]]:
    """({class name: (its module, its bases' and used names)}, {registered architecture: [class names]})."""
    classes: dict[str, tuple[Path, list[str]]] = {}
    registry: dict[str, list[str]] = {}
    for path in [root / "convert_hf_to_gguf.py", *sorted((root / "conversion").glob("*.py"))]:
        for name, bases, archs in _memoised(path, "classes", lambda: _classes_of(path)):
            classes.setdefault(name, (path, bases))
            for arch in archs:
                registry.setdefault(arch, []).append(name)
    return classes, registry


def class_chain(root: Path, name: str) -> list[str]:
    """The class, its bases and the classes its body names (depth first, each once) among the converter's classes."""
    classes, _ = converter_classes(root)
    chain: list[str] = []

    def walk(n: str) -> None:
        if n in classes and n not in chain:
            chain.append(n)
            for base in classes[n][1]:
                walk(base)
    walk(name)
    return chain


def text_classes(root: Path, architectures) -> list[str]:
    """The converter's text classes for these architectures (its mmproj classes, registered under the same names,
    read the other towers)."""
    _, registry = converter_classes(root)
    return [c for arch in architectures for c in registry.get(arch, []) if "TextModel" in class_chain(root, c)]


def converter_reads(root: Path, name: str) -> frozenset[str]:
    """What one class's own body reads, with its module's module-level functions (helpers its methods call)."""
    path = converter_classes(root)[0][name][0]

    def compute() -> frozenset[str]:
        body = _parse(path).body
        node = next(n for n in body if isinstance(n, ast.ClassDef) and n.name == name)
        helpers = [n for n in body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]
        return _keys_of([node, *helpers], self_is_config=False)
    return frozenset(_memoised(path, f"class {name}", compute))


# ---------------------------------------------------------------- the data file
def derive() -> dict:
    """{"families": {name: ({model type: transformers folder}, converter classes)}, "transformers": {module: keys},
    "converter": {class: keys}, "shared": keys}."""
    from hfview import families

    troot, croot = transformers_root(), converter_root()
    modules = transformers_modules(troot)
    fams, tkeys, ckeys = {}, {}, {}
    for family in sorted(families.FAMILIES, key=lambda f: f.name):
        types = {mt: modules[mt] for mt in sorted(family.model_types) if mt in modules}
        chain: list[str] = []
        for cls in text_classes(croot, family.architectures):
            chain += [c for c in class_chain(croot, cls) if c not in chain]
        fams[family.name] = (types, tuple(chain))
        for mod in types.values():
            tkeys.setdefault(mod, transformers_reads(troot, mod))
        for cls in chain:
            ckeys.setdefault(cls, converter_reads(croot, cls))
    shared = transformers_shared_reads(troot)
    _save_memo()
    return {"families": fams, "transformers": tkeys, "converter": ckeys, "shared": shared}


def _keys_block(keys, indent: str, width: int = 116) -> list[str]:
    lines, line = [], indent
    for key in sorted(keys):
        item = f'"{key}", '
        if len(line) + len(item) > width:
            lines.append(line.rstrip())
            line = indent
        line += item
    if line.strip():
        lines.append(line.rstrip())
    return lines


def render(data: dict) -> str:
    out = ['"""The config keys hfview\'s references read, per family. GENERATED by tools/key_policy.py from the pinned',
           "transformers' source and the pinned converter's (read with ast, never run); do not edit. Regenerate with",
           "`python tools/key_policy.py`; tests/test_key_policy.py checks this file is what the tool writes.",
           "",
           "FAMILIES: family -> ({its model types transformers has: their models/ folder}, the converter's text classes for",
           "its architectures with their bases). TRANSFORMERS / CONVERTER: folder / class -> the keys its code reads.",
           'SHARED: what transformers\' code common to every model reads (rope, masks, caches, attention, PreTrained*)."""',
           "", "FAMILIES: dict[str, tuple[dict[str, str], tuple[str, ...]]] = {"]
    for name, (types, chain) in data["families"].items():
        out.append(f"    {name!r}: ({types!r}, {tuple(chain)!r}),")
    out += ["}", "", "SHARED: frozenset[str] = frozenset({", *_keys_block(data["shared"], "    "), "})", ""]
    for title, table in (("TRANSFORMERS", data["transformers"]), ("CONVERTER", data["converter"])):
        out.append(f"{title}: dict[str, frozenset[str]] = {{")
        for name in sorted(table):
            out += [f"    {name!r}: frozenset({{", *_keys_block(table[name], "        "), "    }),"]
        out += ["}", ""]
    return "\n".join(out)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--check", action="store_true", help="exit 1 where the data file is not what this writes")
    args = ap.parse_args()
    from tools._generated import write_or_check

    return write_or_check({OUT: render(derive())}, "key_policy.py", args.check)


if __name__ == "__main__":
    raise SystemExit(main())

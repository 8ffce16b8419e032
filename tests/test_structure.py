"""The package's shape: imports go one way (families -> parts -> core; runner -> view/core; cli -> everything), with
no cycle between modules, function-local imports included; family modules lean on each other at most two deep;
only hfview* is installed."""
from __future__ import annotations

import ast
import functools
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "hfview"
FAMILIES = "hfview.families"
PARTS = "hfview.families._parts"
MAX_FAMILY_DEPTH = 2  # edges in the longest chain of family modules importing family modules


def _module_files() -> dict[str, Path]:
    """Every module under hfview/ by dotted name (a package by its own name, not its __init__)."""
    modules = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = list(path.relative_to(ROOT).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        modules[".".join(parts)] = path
    return modules


def _nearest_module(name: str, modules: dict[str, Path]) -> str | None:
    """`name` if it is a module of hfview, else the closest enclosing one (None outside hfview)."""
    while name and name not in modules:
        name = name.rpartition(".")[0]
    return name or None


def _imported(module: str, node: ast.Import | ast.ImportFrom, modules: dict[str, Path]) -> set[str]:
    """The hfview modules one import statement names: `from X import name` is X.name where that is a module,
    else X; relative imports resolved against `module`."""
    if isinstance(node, ast.Import):
        names = [alias.name for alias in node.names]
    else:
        if node.level:
            base = module.split(".")
            if modules[module].name != "__init__.py":  # a plain module's package is its parent
                base.pop()
            base = base[:len(base) - (node.level - 1)]
            source = ".".join(base + ([node.module] if node.module else []))
        else:
            source = node.module
        names = []
        for alias in node.names:
            names.append(f"{source}.{alias.name}" if f"{source}.{alias.name}" in modules else source)
    return {found for found in (_nearest_module(n, modules) for n in names) if found and found != module}


@functools.lru_cache(maxsize=1)
def import_graph() -> dict[str, frozenset[str]]:
    """module -> the hfview modules it imports anywhere in its source (module level or inside functions)."""
    modules = _module_files()
    graph = {}
    for module, path in modules.items():
        edges: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                edges |= _imported(module, node, modules)
        graph[module] = frozenset(edges)
    return graph


def strongly_connected(graph: dict[str, frozenset[str]]) -> list[list[str]]:
    """Tarjan's components of more than one module (iterative: the graph has hundreds of modules)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found = []
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, targets = work[-1]
            for target in targets:
                if target not in index:
                    index[target] = low[target] = len(index)
                    stack.append(target)
                    on_stack.add(target)
                    work.append((target, iter(sorted(graph[target]))))
                    break
                if target in on_stack:
                    low[node] = min(low[node], index[target])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        found.append(sorted(component))
    return found


def _cycle_in(component: list[str], graph: dict[str, frozenset[str]]) -> list[str]:
    """One closed path through a component, to name in a failure: a -> b -> ... -> a."""
    members = set(component)
    path, seen = [component[0]], {component[0]: 0}
    while True:
        step = sorted(graph[path[-1]] & members)[0]
        if step in seen:
            return path[seen[step]:] + [step]
        seen[step] = len(path)
        path.append(step)


def test_import_graph_sees_the_packages():
    graph = import_graph()
    assert {"hfview", "hfview.cli", "hfview.runner.commands", "hfview.tokenizer.commands"} <= set(graph)
    assert "hfview.runner.commands" in graph["hfview.cli"]  # function-local, resolved relative


def test_no_import_cycles():
    graph = import_graph()
    cycles = []
    for component in strongly_connected(graph):
        cycle = _cycle_in(component, graph)
        rest = sorted(set(component) - set(cycle))
        cycles.append(" -> ".join(cycle) + (f"   (with {', '.join(rest)} in the same cycle)" if rest else ""))
    assert not cycles, "modules importing each other (function-local imports count):\n" + "\n".join(cycles)


def _is_family(module: str) -> bool:
    head, _, name = module.rpartition(".")
    return head == FAMILIES and module != PARTS


def longest_family_chain(graph: dict[str, frozenset[str]]) -> list[str]:
    """The longest chain of family modules (hfview.families.<name>, not _parts nor the package) each importing the
    next."""
    families = {m for m in graph if _is_family(m)}
    longest: dict[str, list[str]] = {}

    def chain_from(module: str, visiting: tuple[str, ...]) -> list[str]:
        if module in visiting:  # a cycle: test_no_import_cycles names it
            return [module]
        if module not in longest:
            tails = [chain_from(m, visiting + (module,)) for m in sorted(graph[module] & families)]
            longest[module] = [module] + max(tails, key=len, default=[])
        return longest[module]

    return max((chain_from(m, ()) for m in sorted(families)), key=len, default=[])


def test_family_imports_at_most_two_deep():
    chain = longest_family_chain(import_graph())
    assert len(chain) - 1 <= MAX_FAMILY_DEPTH, (
        f"family modules import family modules {len(chain) - 1} deep (at most {MAX_FAMILY_DEPTH}): "
        f"{' -> '.join(chain)}; move the shared pieces into {PARTS}")


def test_parts_import_no_family():
    """A part is shared by families; a part that imported a family would hang every family that uses it on that one."""
    graph = import_graph()
    leaks = sorted((part, imported) for part, targets in graph.items() if part.startswith(PARTS)
                   for imported in targets if _is_family(imported))
    assert not leaks, f"parts import families: {leaks}"


def test_only_hfview_is_installed():
    """No top-level runner/ or tokenizer/ beside hfview: they are hfview.runner and hfview.tokenizer."""
    tomllib = pytest.importorskip("tomllib")
    from setuptools import find_packages

    include = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"]["find"]["include"]
    assert all(pattern in ("hfview", "hfview*", "hfview.*") for pattern in include), include
    packages = find_packages(where=str(ROOT), include=include)
    assert {"hfview", "hfview.runner", "hfview.tokenizer", "hfview.families"} <= set(packages)
    assert all(p == "hfview" or p.startswith("hfview.") for p in packages), packages
    assert not any((ROOT / name / "__init__.py").exists() for name in ("runner", "tokenizer"))


def test_gguf_block_sizes_are_ggmls():
    """gguf_layout sizes rows by gguf-py's GGML_QUANT_SIZES: for every type but Q8_1 (ggml's is 36 bytes, an
    intermediate it never stores; gguf-py states an older 40), ggml's own blocks."""
    import gguf

    from hfview import ggml_quants

    differ = {t.name: (gguf.GGML_QUANT_SIZES[t], ggml_quants.block(t)) for t in gguf.GGML_QUANT_SIZES
              if t != gguf.GGMLQuantizationType.Q8_1 and gguf.GGML_QUANT_SIZES[t] != ggml_quants.block(t)}
    assert not differ, f"(elements, bytes) per block, gguf-py's then ggml's: {differ}"

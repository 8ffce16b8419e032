"""Submodules of a package loaded without the package's __init__, where that __init__ imports much more than hfview
needs at the start of a run: gguf's (its reader, writer, yaml metadata, lazy tensors, vocab with mistral-common) for
gguf.constants, llama_cpp's (its high-level Llama, chat formats with jinja2, disk cache) for the ctypes bindings.

`load_alone(package, *names)` loads each package.name from the package's folder under its own name, as the import
system would, but for the package's __init__; an `import package` later (hfview's, where it needs more, or anyone's)
runs that __init__, which takes these same modules from sys.modules, and finds them set as its attributes: one copy
of each module in the process."""
from __future__ import annotations

import importlib.util
import os
import sys
import threading
from types import ModuleType


class _PackageTakesItsSubmodules:
    """A meta-path finder (sys.meta_path) until `package` is imported: it finds the package as the other finders do,
    and sets the submodules loaded alone on it before its __init__ runs (the import system, finding a submodule
    already in sys.modules, would not)."""

    def __init__(self, package: str):
        self.package = package
        self.submodules: dict[str, ModuleType] = {}

    def find_spec(self, name, path=None, target=None):
        if name != self.package:
            return None
        sys.meta_path.remove(self)
        spec = importlib.util.find_spec(name)
        if spec is not None and spec.loader is not None:
            exec_package, submodules = spec.loader.exec_module, self.submodules

            def exec_module(module: ModuleType) -> None:
                for attribute, submodule in submodules.items():
                    setattr(module, attribute, submodule)
                exec_package(module)

            spec.loader.exec_module = exec_module  # this spec's own loader instance
        return spec


_finders: dict[str, _PackageTakesItsSubmodules] = {}
_loading = threading.RLock()  # the import system locks each module it loads; this loads outside it, so one at a time


def load_alone(package: str, *names: str) -> None:
    """package.name for each name, in order, loaded where neither it nor the package is imported yet. Where the
    package is not installed nothing is done: the caller's import then raises the ordinary ImportError."""
    if package in sys.modules:
        return
    with _loading:  # a submodule is in sys.modules while it runs: another thread waits here till it has run
        _load_alone(package, names)


def _load_alone(package: str, names: tuple[str, ...]) -> None:
    if package in sys.modules:
        return
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        return
    finder = _finders.get(package)
    if finder is None:
        finder = _finders[package] = _PackageTakesItsSubmodules(package)
        sys.meta_path.insert(0, finder)
    for name in names:
        full = f"{package}.{name}"
        if full in sys.modules:
            continue
        path = os.path.join(spec.submodule_search_locations[0], f"{name}.py")
        sub_spec = importlib.util.spec_from_file_location(full, path)
        module = importlib.util.module_from_spec(sub_spec)
        sys.modules[full] = module
        try:
            sub_spec.loader.exec_module(module)
        except BaseException:
            del sys.modules[full]
            raise
        finder.submodules[name] = module

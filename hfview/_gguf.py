"""gguf-py's constants alone; the rest of gguf-py only where it is used.

A view needs only gguf.constants (value and quantization types, key and tensor names). gguf's package also imports
its reader, writer, metadata (yaml), lazy tensors and vocab, which imports mistral-common wherever it is installed:
45 ms of each start without mistral-common and 0.35 s with it (python -X importtime, bench machine). So where gguf is
not imported yet, gguf/constants.py is loaded on its own, under its own name, and when the package is imported later
(by `package()` here, or by anyone's `import gguf`) it takes that same module as its `constants`: one set of enums
in the process, and `gguf.constants` as ever."""
from __future__ import annotations

import importlib.abc
import importlib.util
import os
import sys
from types import ModuleType


class _PackageTakesConstants(importlib.abc.MetaPathFinder):
    """Finds gguf as the other finders do, and sets the loaded constants on the package before its __init__ runs
    (the import system, finding gguf.constants in sys.modules, would not set the attribute)."""

    def __init__(self, constants: ModuleType):
        self.constants = constants

    def find_spec(self, name, path=None, target=None):
        if name != "gguf":
            return None
        sys.meta_path.remove(self)
        spec = importlib.util.find_spec("gguf")
        if spec is not None and spec.loader is not None:
            exec_package, constants = spec.loader.exec_module, self.constants

            def exec_module(module: ModuleType) -> None:
                module.constants = constants
                exec_package(module)

            spec.loader.exec_module = exec_module  # this spec's own loader instance
        return spec


def _load_constants_alone() -> None:
    spec = importlib.util.find_spec("gguf")
    if spec is None or not spec.submodule_search_locations:
        return  # not installed: `from gguf.constants import ...` raises the ordinary ImportError
    path = os.path.join(spec.submodule_search_locations[0], "constants.py")
    constants_spec = importlib.util.spec_from_file_location("gguf.constants", path)
    module = importlib.util.module_from_spec(constants_spec)
    sys.modules["gguf.constants"] = module
    try:
        constants_spec.loader.exec_module(module)
    except BaseException:
        del sys.modules["gguf.constants"]
        raise
    sys.meta_path.insert(0, _PackageTakesConstants(module))


def package() -> ModuleType:
    """The whole gguf package (GGUFReader, ...), imported without mistral-common where it is not imported yet: gguf's
    vocab imports it only for gguf.MistralVocab, which hfview never uses (hfview.tokenizer.mistral reads Mistral's
    files itself), so the mark is lifted at once and `import mistral_common` works afterwards as ever."""
    if "gguf" in sys.modules or "mistral_common" in sys.modules:
        import gguf
        return gguf
    sys.modules["mistral_common"] = None  # type: ignore[assignment]  # its import raises ImportError, as if absent
    try:
        import gguf
    finally:
        del sys.modules["mistral_common"]
    return gguf


if "gguf" not in sys.modules and "gguf.constants" not in sys.modules:
    _load_constants_alone()

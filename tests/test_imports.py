"""Each package imports on its own, first, in a fresh interpreter (an import at module level in the wrong direction
fails only when the other module comes first)."""
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _runs_in_a_fresh_interpreter(code: str) -> None:
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]


@pytest.mark.parametrize("module", ["hfview.tokenizer", "hfview.tokenizer.special", "hfview.tokenizer.vocab", "hfview",
                                    "hfview.checkpoint", "hfview.runner", "hfview.runner.stream"])
def test_imports_first(module):
    _runs_in_a_fresh_interpreter(f"import {module}")


def test_llama_cpp_bindings_load_alone_and_the_package_takes_them_later():
    """A view's run needs llama_cpp's ctypes bindings alone (runner.devices.llama_bindings: the package's high-level
    modules are 33 ms of each start); the package, imported afterwards, takes those same modules."""
    code = ("import sys, hfview.runner.stream\n"
            "from hfview.runner.devices import llama_bindings, backends\n"
            "ll = llama_bindings()\n"
            "assert backends() and ll.llama_max_devices() >= 1\n"
            "assert 'llama_cpp' not in sys.modules, sorted(m for m in sys.modules if m.startswith('llama_cpp'))\n"
            "import llama_cpp\n"
            "from llama_cpp import Llama, llama_cpp as again\n"
            "import llama_cpp._ctypes_extensions as ext\n"
            "assert llama_cpp.llama_cpp is again is ll and ext is sys.modules['llama_cpp._ctypes_extensions']\n"
            "assert llama_cpp.llama_backend_init is ll.llama_backend_init\n")
    _runs_in_a_fresh_interpreter(code)


def test_view_imports_gguf_constants_alone():
    """A view needs gguf.constants alone (hfview._gguf: the rest of gguf-py is 45 ms of each start); gguf's package,
    imported afterwards, takes that same module as its constants: one set of enums in the process."""
    code = ("import sys, hfview.runner.stream, hfview.checkpoint\n"
            "assert 'gguf' not in sys.modules, sorted(m for m in sys.modules if m.startswith('gguf'))\n"
            "constants = sys.modules['gguf.constants']\n"
            "import gguf, gguf.constants\n"
            "assert gguf.constants is constants and gguf.GGUFValueType is constants.GGUFValueType\n"
            "from gguf import GGUFReader, GGUFWriter\n"
            "from hfview.gguf_layout import GGMLType\n"
            "assert GGMLType is gguf.GGMLQuantizationType\n")
    _runs_in_a_fresh_interpreter(code)

"""Each package imports on its own, first, in a fresh interpreter (an import at module level in the wrong direction
fails only when the other module comes first)."""
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.parametrize("module", ["hfview.tokenizer", "hfview.tokenizer.special", "hfview.tokenizer.vocab", "hfview",
                                    "hfview.checkpoint", "hfview.runner", "hfview.runner.stream"])
def test_imports_first(module):
    done = subprocess.run([sys.executable, "-c", f"import {module}"], cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]


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
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]

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

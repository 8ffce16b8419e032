"""Each package imports on its own, first, in a fresh interpreter (hfview and tokenizer import each other: an
import at module level in the wrong direction fails only when the other package comes first)."""
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.parametrize("module", ["tokenizer", "tokenizer.special", "tokenizer.vocab", "hfview", "hfview.checkpoint",
                                    "runner", "runner.stream"])
def test_imports_first(module):
    done = subprocess.run([sys.executable, "-c", f"import {module}"], cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]

"""Option values several commands share."""
from __future__ import annotations

import math
import os
from pathlib import Path

from hfview.errors import HfviewError


def path_and_number(spec: "str | os.PathLike", option: str, what: str,
                    error: type[HfviewError]) -> tuple[Path, float | None]:
    """'PATH' or 'PATH:NUMBER' (`--lora DIR:0.5`, `--steer FILE:0.8`): a trailing ':number' is the number, any other
    colon is the path's; a number that is not finite is refused by name."""
    text = os.fspath(spec)
    head, sep, tail = text.rpartition(":")
    if sep and head:
        try:
            number = float(tail)
        except ValueError:
            return Path(text), None
        if not math.isfinite(number):
            raise error(f"{option} {text!r}: the {what} {tail!r} is not a finite number")
        return Path(head), number
    return Path(text), None


def default_threads() -> int:
    """Half the usable CPUs (about the physical cores): ggml's threads spin while they wait, and one
    thread per hyper-thread, or on a busy machine, made decoding 6x slower in a measurement here."""
    try:
        cpus = len(os.sched_getaffinity(0))
    except AttributeError:  # macOS
        cpus = os.cpu_count() or 1
    return max(1, cpus // 2)

"""Benchmark: `hfview mount`'s file read cold, against `hfview export` of the same checkpoint, side by side in one run.

  export        `hfview export` writing the GGUF (a fresh process, timed until the file is on disk: export fsyncs)
  mount         `hfview mount --daemon` until the mount point answers (a fresh process opening the views)
  cold read     the mounted file read front to back in 1 MiB reads by another process, just after mounting (nothing
                of it in the kernel's cache)
  warm read     the same again: the kernel keeps the pages between opens

--runs times (default 3), alternating, each step in a fresh process; medians shown. The checkpoint's shards are in
the page cache for every step (read once before timing), as in bench/load.py. With --quant TYPE both sides make
llama-quantize's file of that type instead.
Target: the cold read at least half of export's throughput (bytes of the GGUF per second of wall time).
Usage: python bench/mount.py [--layers 9] [--hidden 2048] [--runs 3] [--quant Q4_K_M]
"""
from __future__ import annotations

import argparse
import hashlib
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import ROOT, WORK, checkpoint, run  # noqa: E402

READ = r"""
import sys, time
buf = bytearray(1 << 20)
view, n = memoryview(buf), 0
t0 = time.perf_counter()
with open(sys.argv[1], "rb", buffering=0) as f:
    while (got := f.readinto(view)):
        n += got
print(n, time.perf_counter() - t0)
"""


def hfview(*args: str, env: dict) -> float:
    wall, _rss, _out = run([sys.executable, "-m", "hfview.cli", *args], env)
    return wall


def read_file(path: Path, env: dict) -> tuple[int, float]:
    """(bytes, seconds) of a child process reading `path` front to back."""
    _wall, _rss, out = run([sys.executable, "-c", READ, str(path)], env)
    n, seconds = out.split()
    return int(n), float(seconds)


def sha256(path: Path) -> str:
    with open(path, "rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--layers", type=int, default=9)  # 1.07 GB of bf16 weights
    ap.add_argument("--hidden", type=int, default=2048)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--quant", default=None, metavar="TYPE", help="bench llama-quantize's file of this type")
    args = ap.parse_args()
    ckpt = checkpoint(args.layers, args.hidden)
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    quant = ["--quant", args.quant] if args.quant else []
    exported = WORK / f"{ckpt.name}-mount-bench.gguf"
    point = Path(tempfile.mkdtemp(prefix="hfview-bench-mount-"))
    mounted = point / ckpt.name / f"{ckpt.name}{'-' + args.quant.upper() if args.quant else ''}.gguf"
    times: dict[str, list[float]] = {"export": [], "mount": [], "cold read": [], "warm read": []}
    identical = None
    try:
        for run_index in range(args.runs):
            exported.unlink(missing_ok=True)
            times["export"].append(hfview("export", str(ckpt), str(exported), "--outtype", "bf16", *quant,
                                          "--no-progress", env=env))
            times["mount"].append(hfview("mount", str(ckpt), str(point), "--outtype", "bf16", *quant, "--daemon",
                                         "--log", str(point.with_suffix(".log")), env=env))
            try:
                size, cold = read_file(mounted, env)
                _, warm = read_file(mounted, env)
                times["cold read"].append(cold)
                times["warm read"].append(warm)
                if run_index == 0:
                    identical = sha256(mounted) == sha256(exported)
            finally:
                subprocess.run([sys.executable, "-m", "hfview.cli", "umount", str(point)], env=env, check=True)
    finally:
        exported.unlink(missing_ok=True)
        shutil.rmtree(point, ignore_errors=True)
        point.with_suffix(".log").unlink(missing_ok=True)
    median = {step: statistics.median(values) for step, values in times.items()}
    shards = sum(f.stat().st_size for f in ckpt.glob("*.safetensors"))
    print(f"\ncheckpoint: {ckpt} ({shards / 1e9:.2f} GB bf16 safetensors); the file: {size:,} bytes "
          f"({args.quant or 'bf16'}); median of {args.runs} runs, {os.cpu_count()} CPUs")
    print(f"{'step':<44} {'seconds':>8} {'MB/s of the GGUF':>17}")
    for step, label in (("export", "hfview export (write, fsync)"), ("mount", "hfview mount --daemon (until mounted)"),
                        ("cold read", "mounted file, cold sequential read"),
                        ("warm read", "mounted file, read again (kernel cache)")):
        rate = f"{size / median[step] / 1e6:>17.0f}" if step != "mount" else f"{'':>17}"
        print(f"{label:<44} {median[step]:>8.2f} {rate}")
    print(f"\ncold read / export throughput: {median['export'] / median['cold read']:.2f} (target >= 0.5); "
          f"mount + cold read / export: {median['export'] / (median['mount'] + median['cold read']):.2f}; "
          f"mounted file == exported file (sha256): {identical}")


if __name__ == "__main__":
    main()

"""Benchmark: a >= 1 GB checkpoint, side by side in one run.

  converter     convert_hf_to_gguf.py (pinned) writing the GGUF
  export        `hfview export` writing the same file
  view          llama.cpp's first logits fed straight from the view (no file): opened first, over an empty cache,
                then opened again (the tokenizer metadata read back from hfview's cache: hfview.vocab_cache)
  file+mmap     llama.cpp loading the converter's file with mmap, first logits
  file no-mmap  the same without mmap

Each step runs in its own process; wall time, peak RSS (wait4) and bytes written are measured.
Page cache is warm for every step (the checkpoint is read once before timing).
Targets: export >= 3x the converter (both timed until the file is on disk: export fsyncs before its rename, the
converter's file is fsynced after it exits) with peak RSS under 300 MB; the view's first logits at most 1.1x the
no-mmap load's, its peak RSS at most 1.1x the model's bytes.
Usage: python bench/load.py [--layers 9] [--hidden 2048] [--keep]
       python bench/load.py --experts 32 --layers 8 --hidden 1024   # a 0.98 GB Mixtral (--layers 9: 1.09 GB)
       python bench/load.py --family deepseek_v3 --experts 32 --layers 8 --hidden 1024
           # a 1.3 GB DeepSeek-V3: latent attention, 1 dense layer, 32 routed + 1 shared expert, sigmoid router
       python bench/load.py --family granitemoehybrid --experts 32 --layers 8 --hidden 1024
           # a 1.05 GB Granite 4.0 H hybrid: 6 Mamba-2 and 2 attention layers, 32 experts + a shared MLP each
"""
from __future__ import annotations

import argparse
import os
import shutil
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import FAMILIES, FIRST_LOGITS, ROOT, WORK, checkpoint, convert, run  # noqa: E402
import oracle  # noqa: E402

def synced(path: Path) -> float:
    """Seconds an fsync of `path` takes: what is left of writing it once the writer has exited."""
    t0 = time.perf_counter()
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
    return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--layers", type=int, default=9)  # 1.1 GB of bf16 weights
    ap.add_argument("--hidden", type=int, default=2048)
    ap.add_argument("--experts", type=int, default=0, help="experts per layer (llama: a Mixtral with this many)")
    ap.add_argument("--family", choices=sorted(FAMILIES), default="llama", help="what to generate (bench/common.py)")
    ap.add_argument("--keep", action="store_true", help="keep the converted files")
    args = ap.parse_args()
    ckpt = checkpoint(args.layers, args.hidden, args.experts, args.family)
    size = sum(f.stat().st_size for f in ckpt.glob("*.safetensors"))
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    conv_out, ours_out = WORK / f"{ckpt.name}-converter.gguf", WORK / f"{ckpt.name}-hfview.gguf"
    rows = []

    wall, rss = convert(ckpt, conv_out)
    # `hfview export` fsyncs its file before renaming it into place; the converter leaves its bytes in the page
    # cache. Both are timed to the same end, the file on disk: the converter's step includes that fsync.
    wall += synced(conv_out)
    rows.append(("converter (write GGUF, then fsync)", wall, rss, conv_out.stat().st_size))
    # export opens the checkpoint as a first open does: over an empty cache (the converter keeps nothing either)
    cached_env = dict(env, HFVIEW_CACHE=str(WORK / f"{ckpt.name}-bench-cache"))
    shutil.rmtree(cached_env["HFVIEW_CACHE"], ignore_errors=True)
    wall, rss, _ = run([sys.executable, "-m", "hfview.cli", "export", str(ckpt), str(ours_out), "--outtype", "bf16",
                        "--no-progress"], cached_env)
    rows.append(("hfview export (write GGUF)", wall, rss, ours_out.stat().st_size))
    identical = oracle.sha256(conv_out) == oracle.sha256(ours_out)
    ours_out.unlink()

    logits, rss_of = {}, {}
    # the view twice over one empty cache: opened first (the tokenizer metadata built, then kept: hfview.vocab_cache)
    # and opened again (read back)
    shutil.rmtree(cached_env["HFVIEW_CACHE"], ignore_errors=True)
    for mode, path in (("view", ckpt), ("view again", ckpt), ("mmap", conv_out), ("nommap", conv_out)):
        wall, rss, out = run([sys.executable, "-c", FIRST_LOGITS, mode.split()[0], str(path)],
                             cached_env if mode.startswith("view") else env)
        logits[mode], rss_of[mode] = wall, rss
        label = {"view": "view -> first logits (first open)", "view again": "view -> first logits (opened again)",
                 "mmap": "converted file, mmap -> first logits",
                 "nommap": "converted file, no mmap -> first logits"}[mode]
        rows.append((label, wall, rss, 0))
    shutil.rmtree(cached_env["HFVIEW_CACHE"], ignore_errors=True)
    if not args.keep:
        conv_out.unlink()

    print(f"\ncheckpoint: {ckpt} ({args.family}, {size / 1e9:.2f} GB bf16 safetensors, {args.layers} layers, "
          f"hidden {args.hidden}"
          f"{f', {args.experts} experts' if args.experts else ''})")
    print(f"{'step':<42} {'wall s':>8} {'peak RSS MB':>12} {'bytes written':>15}")
    for label, wall, rss, written in rows:
        print(f"{label:<42} {wall:>8.2f} {rss / 1e6:>12.0f} {written:>15,}")
    conv, exp = rows[0][1], rows[1][1]
    print(f"\nexport vs converter: {conv / exp:.2f}x faster (target >= 3x), export peak RSS "
          f"{rows[1][2] / 1e6:.0f} MB (target < 300); byte-identical: {identical}")
    for mode in ("view", "view again"):
        print(f"{mode}: peak RSS / model bytes {rss_of[mode] / size:.3f} (target <= 1.1); first logits / no-mmap load "
              f"of the converted file {logits[mode] / logits['nommap']:.2f} (target <= 1.1); convert + mmap load / "
              f"view {(conv + logits['mmap']) / logits[mode]:.2f}x")
    print("bytes written by the view run: 0")


if __name__ == "__main__":
    main()

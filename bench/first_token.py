"""Benchmark: first token on a >= 1 GB checkpoint, side by side in one run.

  view             `hfview generate --max-tokens 1` on the checkpoint directory (llama.cpp fed from the view)
  convert + mmap   convert_hf_to_gguf.py, then llama.cpp loading the file with mmap, first token
  no-mmap load     llama.cpp loading the converted file without mmap, first token (conversion not counted)

Wall time, peak RSS and bytes written per step (each its own process). Targets: view >= 4x faster than
convert + load, 0 bytes written, no slower than the no-mmap load.
Usage: python bench/first_token.py [--layers 9] [--hidden 2048]
"""
from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import FILE_FIRST_LOGITS, FIRST_LOGITS, ROOT, WORK, checkpoint, convert, run  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--layers", type=int, default=9)
    ap.add_argument("--hidden", type=int, default=2048)
    args = ap.parse_args()
    ckpt = checkpoint(args.layers, args.hidden)
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    view_wall, view_rss, _ = run([sys.executable, "-m", "hfview.cli", "generate", "--model", str(ckpt), "--prompt",
                                  "The capital of France is", "--max-tokens", "1", "--temperature", "0",
                                  "--no-chat"], env)
    out = WORK / "first-token.gguf"
    conv_wall, conv_rss = convert(ckpt, out)
    written = out.stat().st_size
    mmap_wall, mmap_rss, _ = run([sys.executable, "-c", FILE_FIRST_LOGITS, "mmap", str(out)], env)
    nommap_wall, nommap_rss, _ = run([sys.executable, "-c", FILE_FIRST_LOGITS, "nommap", str(out)], env)
    out.unlink()
    rows = [("view -> first token (hfview generate)", view_wall, view_rss, 0),
            ("convert + mmap load -> first token", conv_wall + mmap_wall, max(conv_rss, mmap_rss), written),
            ("no-mmap load of converted file -> first token", nommap_wall, nommap_rss, 0)]
    print(f"\ncheckpoint: {ckpt}")
    print(f"{'step':<48} {'wall s':>8} {'peak RSS MB':>12} {'bytes written':>15}")
    for label, wall, rss, w in rows:
        print(f"{label:<48} {wall:>8.2f} {rss / 1e6:>12.0f} {w:>15,}")
    print(f"\nview vs convert + load: {(conv_wall + mmap_wall) / view_wall:.2f}x faster (target >= 4x); "
          f"vs no-mmap load: {nommap_wall / view_wall:.2f}x (target >= 1x); view wrote 0 bytes")


if __name__ == "__main__":
    main()

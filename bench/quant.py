"""Benchmark: a checkpoint run as Q4_K_M, side by side in one run.

  view at Q4_K_M         HfCheckpoint(dir, quant=Q4_K_M) -> llama.cpp -> first logits, then tokens/s (0 bytes written)
  convert + quantize     convert_hf_to_gguf.py (bf16 file), llama_model_quantize Q4_K_M (second file), llama.cpp
                         loading it (mmap) -> first logits, then tokens/s

Wall time, peak RSS and bytes written per step (each its own process), and the time ggml's quantization kernels
take on their own (the least any way of producing these bytes spends on this machine's threads). The view opens over
an empty cache, as a first open does. Targets: the view's first logits in at most half the convert + quantize + load
time, and at most 1.15x the kernels' floor (their thread-seconds over the threads) plus the quantized file's own
load -> first logits; the same tokens/s (the tensors are the same bytes).
Usage: python bench/quant.py [--layers 9] [--hidden 2048] [--quant Q4_K_M]
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import ROOT, WORK, checkpoint, convert, run  # noqa: E402

# first logits, then 32 decoded tokens timed on their own (best of three rounds)
CHILD = r"""
import sys, time, json
t0 = time.perf_counter()
mode, path, quant = sys.argv[1], sys.argv[2], sys.argv[3]
from hfview.runner.stream import StreamModel, load_model_from_path
if mode == "view":
    from hfview import HfCheckpoint
    src = HfCheckpoint(path, quant=quant)
else:
    src = load_model_from_path(path, use_mmap=True)
with StreamModel(src, n_ctx=64) as m:
    logits = m.logits([1, 450, 4996])
    first = time.perf_counter() - t0
    rates = []
    for _ in range(3):  # the best of three rounds: one round of 32 tokens moved by 40% between runs
        t1 = time.perf_counter()
        ids = [1, 450, 4996]
        for _ in range(32):
            ids.append(int(m.logits(ids)[-1].argmax()))
        rates.append(32 / (time.perf_counter() - t1))
    rate = max(rates)
    data_path = m.model.data_path
print(json.dumps({"first": first, "tokens_per_s": rate, "ids": ids, "data_path": data_path}))
"""

QUANTIZE = r"""
import sys, llama_cpp.llama_cpp as L
from hfview.quant import FILE_TYPES
L.llama_backend_init()
p = L.llama_model_quantize_default_params()
p.ftype = FILE_TYPES[sys.argv[3]][0]
sys.exit(L.llama_model_quantize(sys.argv[1].encode(), sys.argv[2].encode(), p))
"""

# the view's quantized bytes with no llama.cpp, timing ggml's kernels (ggml_quantize_chunk) as they run: their
# thread-seconds over the threads are what any run on this machine spends at least, however it is fed
KERNELS = r"""
import sys, time, json, threading
from hfview import HfCheckpoint, ggml_quants
lib, spent, lock = ggml_quants._lib(), [], threading.Lock()
kernel = lib.ggml_quantize_chunk
def timed(*args):
    t = time.perf_counter()
    written = kernel(*args)
    with lock:
        spent.append(time.perf_counter() - t)
    return written
lib.ggml_quantize_chunk = timed
view = HfCheckpoint(sys.argv[1], quant=sys.argv[2])
t = time.perf_counter()
for _ in view.iter_file():
    pass
print(json.dumps({"seconds": time.perf_counter() - t, "kernel_s": sum(spent), "threads": ggml_quants.threads()}))
"""


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--layers", type=int, default=9)
    ap.add_argument("--hidden", type=int, default=2048)
    ap.add_argument("--quant", default="Q4_K_M")
    args = ap.parse_args()
    ckpt = checkpoint(args.layers, args.hidden)
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    first_open_env = dict(env, HFVIEW_CACHE=str(WORK / "quant-bench-cache"))
    shutil.rmtree(first_open_env["HFVIEW_CACHE"], ignore_errors=True)
    view_wall, view_rss, out = run([sys.executable, "-c", CHILD, "view", str(ckpt), args.quant], first_open_env)
    shutil.rmtree(first_open_env["HFVIEW_CACHE"], ignore_errors=True)
    view = json.loads(out)
    _, _, out = run([sys.executable, "-c", KERNELS, str(ckpt), args.quant], env)
    kernels = json.loads(out)
    converted, quantized = WORK / "quant-bench.gguf", WORK / f"quant-bench-{args.quant}.gguf"
    conv_wall, conv_rss = convert(ckpt, converted)
    q_wall, q_rss, _ = run([sys.executable, "-c", QUANTIZE, str(converted), str(quantized), args.quant], env)
    written = converted.stat().st_size + quantized.stat().st_size
    load_wall, load_rss, out = run([sys.executable, "-c", CHILD, "file", str(quantized), args.quant], env)
    file = json.loads(out)
    converted.unlink()
    quantized.unlink()
    files_first = conv_wall + q_wall + file["first"]
    print(f"\ncheckpoint: {ckpt}, {args.quant}; the view loaded through: {view['data_path']}")
    print(f"{'step':<46} {'wall s':>8} {'peak RSS MB':>12} {'bytes written':>15} {'tok/s':>7}")
    print(f"{'view -> first logits':<46} {view['first']:>8.2f} {view_rss / 1e6:>12.0f} {0:>15,} "
          f"{view['tokens_per_s']:>7.1f}")
    print(f"{'convert':<46} {conv_wall:>8.2f} {conv_rss / 1e6:>12.0f} {converted.name:>15}")
    print(f"{'llama_model_quantize':<46} {q_wall:>8.2f} {q_rss / 1e6:>12.0f}")
    print(f"{'load quantized file -> first logits':<46} {file['first']:>8.2f} {load_rss / 1e6:>12.0f} "
          f"{'':>15} {file['tokens_per_s']:>7.1f}")
    print(f"{'convert + quantize + load -> first logits':<46} {files_first:>8.2f} {'':>12} {written:>15,}")
    floor = kernels["kernel_s"] / kernels["threads"]
    print(f"{'view -> all quantized bytes, no llama.cpp':<46} {kernels['seconds']:>8.2f}")
    print(f"\nggml's kernels alone: {kernels['kernel_s']:.2f} thread-seconds on {kernels['threads']} threads, so at "
          f"least {floor:.2f} s of any run here; half of convert + quantize + load: {files_first / 2:.2f} s")
    print(f"view first logits / (kernels' floor + load of the quantized file -> first logits): "
          f"{view['first'] / (floor + file['first']):.2f} (target <= 1.15)")
    print(f"view vs convert + quantize + load: {files_first / view['first']:.2f}x faster (target >= 2x); "
          f"tokens/s view/file {view['tokens_per_s'] / file['tokens_per_s']:.2f} (target 1.00); "
          f"same greedy tokens: {view['ids'] == file['ids']}; view wrote 0 bytes")


if __name__ == "__main__":
    main()

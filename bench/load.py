"""Benchmark: a >= 1 GB checkpoint, side by side in one run.

  converter     convert_hf_to_gguf.py (pinned) writing the GGUF
  export        `hfview export` writing the same file
  view          llama.cpp's first logits fed straight from the view (no file) as the runner chooses (on Linux a
                memory file), opened first, over an empty cache (the tokenizer metadata built, then kept:
                hfview.vocab_cache); then, each read back from that cache:
  view memfd    the view filled into a memory file that llama.cpp maps (hfview.memfile), first logits
  view FILE*    the view read by llama.cpp through a FILE*, first logits
  file+mmap     llama.cpp loading the converter's file with mmap, first logits
  file no-mmap  the same without mmap

Each step runs in its own process; wall time to its exit, peak RSS (wait4) and bytes written are measured, and each
first-logits child reports launch -> logits in hand (its first logits: the latency a user waits for; the exit after
it frees the model). The last four run --runs times (default 5), alternating, each in a fresh process: their medians
(and the largest peak RSS) are shown.
Page cache is warm for every step (the checkpoint is read once before timing).
Targets: export >= 3x the converter (both timed until the file is on disk: export fsyncs before its rename, the
converter's file is fsynced after it exits) with peak RSS under 300 MB; the memory-file view's first logits at most
1.0x the no-mmap load's, its peak RSS at most 1.1x the model's bytes.
With --compare-with DIR (another checkout of hfview, e.g. `git archive main hfview | tar -x -C DIR`), the memory
file's first logits are also measured with DIR's hfview, in the same alternation: a change's before and after on the
same machine at the same time (each child imports the hfview of its own tree: PYTHONPATH and working directory).
Usage: python bench/load.py [--layers 9] [--hidden 2048] [--runs 5] [--keep] [--compare-with DIR]
       python bench/load.py --experts 32 --layers 8 --hidden 1024   # a 0.98 GB Mixtral (--layers 9: 1.09 GB)
       python bench/load.py --family deepseek_v3 --experts 32 --layers 8 --hidden 1024
           # a 1.3 GB DeepSeek-V3: latent attention, 1 dense layer, 32 routed + 1 shared expert, sigmoid router
       python bench/load.py --family granitemoehybrid --experts 32 --layers 8 --hidden 1024
           # a 1.05 GB Granite 4.0 H hybrid: 6 Mamba-2 and 2 attention layers, 32 experts + a shared MLP each
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import (FAMILIES, FILE_FIRST_LOGITS, FIRST_LOGITS, ROOT, WORK, checkpoint, convert, run,  # noqa: E402
                    warm_bytecode)
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


def _cpu_ticks() -> tuple[int, int] | None:
    """(all, idle) CPU time of the machine so far, in ticks (Linux: /proc/stat), or None."""
    try:
        with open("/proc/stat", encoding="ascii") as f:
            ticks = [int(x) for x in f.readline().split()[1:]]
        return sum(ticks), ticks[3] + ticks[4]  # idle + iowait
    except (OSError, ValueError, IndexError):
        return None


def _idle_since(before: tuple[int, int] | None) -> float | None:
    after = _cpu_ticks()
    if before is None or after is None or after[0] == before[0]:
        return None
    return (after[1] - before[1]) / (after[0] - before[0])


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--layers", type=int, default=9)  # 1.1 GB of bf16 weights
    ap.add_argument("--hidden", type=int, default=2048)
    ap.add_argument("--experts", type=int, default=0, help="experts per layer (llama: a Mixtral with this many)")
    ap.add_argument("--family", choices=sorted(FAMILIES), default="llama", help="what to generate (bench/common.py)")
    ap.add_argument("--keep", action="store_true", help="keep the converted files")
    ap.add_argument("--runs", type=int, default=5, help="alternating runs of each first-logits step (median shown)")
    ap.add_argument("--no-export", action="store_true", help="skip the converter-vs-export rows (a converted file "
                    "kept by --keep is reused)")
    ap.add_argument("--compare-with", type=Path, metavar="DIR", help="another checkout (holding hfview/): its view, "
                    "memory file, measured in the same alternation")
    args = ap.parse_args()
    other = args.compare_with.resolve() if args.compare_with else None
    if other is not None and not (other / "hfview" / "__init__.py").is_file():
        raise SystemExit(f"--compare-with {other}: no hfview/__init__.py there")
    ckpt = checkpoint(args.layers, args.hidden, args.experts, args.family)
    size = sum(f.stat().st_size for f in ckpt.glob("*.safetensors"))
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    conv_out, ours_out = WORK / f"{ckpt.name}-converter.gguf", WORK / f"{ckpt.name}-hfview.gguf"
    rows = []

    identical = None
    if not (args.no_export and conv_out.is_file()):
        wall, rss = convert(ckpt, conv_out)
        # `hfview export` fsyncs its file before renaming it into place; the converter leaves its bytes in the page
        # cache. Both are timed to the same end, the file on disk: the converter's step includes that fsync.
        wall += synced(conv_out)
        rows.append(("converter (write GGUF, then fsync)", wall, rss, conv_out.stat().st_size))
    cached_env = dict(env, HFVIEW_CACHE=str(WORK / f"{ckpt.name}-bench-cache"))
    if not args.no_export:
        # export opens the checkpoint as a first open does: over an empty cache (the converter keeps nothing either)
        shutil.rmtree(cached_env["HFVIEW_CACHE"], ignore_errors=True)
        wall, rss, _ = run([sys.executable, "-m", "hfview.cli", "export", str(ckpt), str(ours_out), "--outtype",
                            "bf16", "--no-progress"], cached_env)
        rows.append(("hfview export (write GGUF)", wall, rss, ours_out.stat().st_size))
        identical = oracle.sha256(conv_out) == oracle.sha256(ours_out)
        ours_out.unlink()

    # the view once over an empty cache (the tokenizer metadata built, then kept: hfview.vocab_cache), then every
    # contender --runs times, alternating, each run a fresh process
    shutil.rmtree(cached_env["HFVIEW_CACHE"], ignore_errors=True)
    wall, rss, out = run([sys.executable, "-c", FIRST_LOGITS, "view", str(ckpt)], cached_env)
    rows.append((f"view -> exit (first open, {json.loads(out)['data_path']})", wall, rss, 0))
    if other is not None:
        warm_bytecode(other)
        # its own first open (its vocabulary cache may be keyed apart from this tree's), untimed
        run([sys.executable, "-c", FIRST_LOGITS, "view-memfd", str(ckpt)], dict(cached_env, PYTHONPATH=str(other)),
            cwd=other)
    modes = {"view-memfd": (ckpt, "view, memory file -> exit"),
             "view-stream": (ckpt, "view, FILE* -> exit"),
             "mmap": (conv_out, "converted file, mmap -> exit"),
             "nommap": (conv_out, "converted file, no mmap -> exit")}
    if other is not None:
        modes["other-memfd"] = (ckpt, f"view, memory file, {other.name}'s hfview -> exit")
    walls: dict[str, list[float]] = {mode: [] for mode in modes}
    firsts: dict[str, list[float]] = {mode: [] for mode in modes}  # launch -> logits in hand (no teardown)
    loads: dict[str, list[float]] = {mode: [] for mode in modes}  # imports done -> logits in hand
    imports: dict[str, list[float]] = {mode: [] for mode in modes}  # launch -> imports done
    import_cpus: dict[str, list[float]] = {mode: [] for mode in modes}  # the child's CPU seconds by then
    peaks: dict[str, int] = {mode: 0 for mode in modes}
    busy_before = _cpu_ticks()
    for _ in range(args.runs):
        for mode, (path, _label) in modes.items():
            child = FILE_FIRST_LOGITS if mode in ("mmap", "nommap") else FIRST_LOGITS
            if mode == "other-memfd":
                wall, rss, out = run([sys.executable, "-c", child, "view-memfd", str(path)],
                                     dict(cached_env, PYTHONPATH=str(other)), cwd=other)
            else:
                wall, rss, out = run([sys.executable, "-c", child, mode, str(path)],
                                     cached_env if mode.startswith("view") else env)
            if mode.startswith("view"):
                assert json.loads(out)["data_path"] == mode.partition("-")[2], out
            walls[mode].append(wall)
            firsts[mode].append(json.loads(out)["first_logits"])
            loads[mode].append(json.loads(out)["first_logits"] - json.loads(out)["imported"])
            imports[mode].append(json.loads(out)["imported"])
            import_cpus[mode].append(json.loads(out)["imported_cpu"])
            peaks[mode] = max(peaks[mode], rss)
    idle = _idle_since(busy_before)
    median = {mode: statistics.median(w) for mode, w in walls.items()}
    first = {mode: statistics.median(f) for mode, f in firsts.items()}
    load = {mode: statistics.median(f) for mode, f in loads.items()}
    imported = {mode: statistics.median(f) for mode, f in imports.items()}
    import_cpu = {mode: statistics.median(f) for mode, f in import_cpus.items()}
    for mode, (_path, label) in modes.items():
        rows.append((f"{label} (median of {args.runs})", median[mode], peaks[mode], 0))
    shutil.rmtree(cached_env["HFVIEW_CACHE"], ignore_errors=True)
    if not args.keep:
        conv_out.unlink()

    print(f"\ncheckpoint: {ckpt} ({args.family}, {size / 1e9:.2f} GB bf16 safetensors, {args.layers} layers, "
          f"hidden {args.hidden}"
          f"{f', {args.experts} experts' if args.experts else ''})")
    print(f"{'step':<52} {'wall s':>8} {'peak RSS MB':>12} {'bytes written':>15}")
    for label, wall, rss, written in rows:
        print(f"{label:<52} {wall:>8.2f} {rss / 1e6:>12.0f} {written:>15,}")
    if identical is not None:
        conv, exp = rows[0][1], rows[1][1]
        print(f"\nexport vs converter: {conv / exp:.2f}x faster (target >= 3x), export peak RSS "
              f"{rows[1][2] / 1e6:.0f} MB (target < 300); byte-identical: {identical}")
    # first logits: from the child's launch to the logits in hand, the latency a user waits for. The table's wall
    # times run on to the child's exit, which frees the model: a memory file's pages are dearer to free than
    # llama.cpp's buffers (shown below as context, not a target)
    print("launch -> logits in hand (medians, s): " + ", ".join(f"{mode} {first[mode]:.2f}" for mode in modes))
    for mode, target in (("view-memfd", 1.0), ("view-stream", 1.1), *((("other-memfd", None),) if other else ())):
        aim = f" (target <= {target})" if target else ""
        print(f"{modes[mode][1].split(' ->')[0]}: first logits / the no-mmap load's {first[mode] / first['nommap']:.2f}"
              f"{aim}, / the mmap load's {first[mode] / first['mmap']:.2f}; peak RSS / model bytes "
              f"{peaks[mode] / size:.3f}{' (target <= 1.1)' if target else ''}")
    print("launch -> exit (the table's wall), / the no-mmap load's: " + ", ".join(
        f"{mode} {median[mode] / median['nommap']:.2f}" for mode in modes if mode.startswith(("view", "other"))))
    print("imports done -> logits in hand, the data path alone (medians, s): "
          + ", ".join(f"{mode} {load[mode]:.2f}" for mode in modes))
    print("launch -> imports done (medians, s): "
          + ", ".join(f"{mode} {imported[mode]:.3f}" for mode in modes))
    print("launch -> imports done, the child's CPU seconds (medians): "
          + ", ".join(f"{mode} {import_cpu[mode]:.3f}" for mode in modes))
    for mode in ("view-memfd", *(("other-memfd",) if other else ())):
        print(f"{modes[mode][1].split(' ->')[0]}: imports done -> logits / the no-mmap load's "
              f"{load[mode] / load['nommap']:.2f}")
    if other is not None:
        print(f"this tree's memory file vs {other.name}'s: launch -> logits {first['view-memfd'] / first['other-memfd']:.3f}x,"
              f" launch -> imports done {imported['view-memfd'] / imported['other-memfd']:.3f}x (CPU "
              f"{import_cpu['view-memfd'] / import_cpu['other-memfd']:.3f}x)")
    print(f"memory file vs FILE*: {first['view-stream'] / first['view-memfd']:.2f}x faster to first logits")
    if idle is not None:  # the contenders alternate, but a machine others use too spreads them: say how busy it was
        print(f"CPUs idle while the alternating runs ran: {idle:.0%} (each run uses up to every core); load average "
              f"{' '.join(f'{x:.2f}' for x in os.getloadavg())} after them")
    print("bytes written by the view run: 0")


if __name__ == "__main__":
    main()

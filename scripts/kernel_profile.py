#!/usr/bin/env python3
"""One training step's GPU kernels: how many, and what each costs (Nsight Compute).

Runs `trainer bench CONFIG` under `ncu` for a few steps, keeps only the kernels inside the
step's NVTX range ("train_step"), finds the step's period in the kernel sequence, and prints the
last step's kernels: count, sum of their durations, and the top N by time (name, count, us).

  python3 scripts/kernel_profile.py CONFIG [--trainer build/trainer] [--math fp32]
      [--batch-size N] [--top 5] [--ncu ncu] [--json] [--sequence] [-- extra trainer bench flags]

ncu runs kernels one at a time (at the GPU's own clocks, caches not flushed), so the sum of
durations is not the step's wall time: it is the time the GPU spends in kernels, without the gaps
between them. Exit 0 on success, 1 when ncu or trainer
failed or no step could be found.
"""
import argparse, csv, io, json, shlex, subprocess, sys
from collections import OrderedDict

UNIT_US = {"nsecond": 1e-3, "ns": 1e-3, "usecond": 1.0, "us": 1.0, "msecond": 1e3, "ms": 1e3,
           "second": 1e6, "s": 1e6}


def kernels(rows):
    """(name, us) of each profiled kernel in launch order."""
    out = []
    for r in rows:
        if r.get("Metric Name") != "gpu__time_duration.sum":
            continue
        v = float(r["Metric Value"].replace(",", ""))
        out.append((r["Kernel Name"], v * UNIT_US.get(r.get("Metric Unit", "nsecond"), 1e-3)))
    return out


def last_period(seq):
    """The last step: the shortest period p with which the last half of seq repeats (by names).

    Half the kernels of 5+ profiled steps hold two whole steps, and a step's kernels are not
    periodic themselves (forward differs from backward), so no shorter p fits the whole window;
    the first step, which may differ (algorithm search, graph capture), lies outside it."""
    names = [n for n, _ in seq]
    window = len(names) // 2
    tail = names[-window:]
    for p in range(1, window // 2 + 1):
        if all(tail[i] == tail[i + p] for i in range(window - p)):
            return seq[-p:]
    return None


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("config")
    ap.add_argument("--trainer", default="build/trainer")
    ap.add_argument("--ncu", default="ncu")
    ap.add_argument("--math", default="fp32")
    ap.add_argument("--batch-size", type=int)
    ap.add_argument("--device", default="gpu:0")
    ap.add_argument("--steps", type=int, default=4, help="timed steps to profile (>= 4)")
    ap.add_argument("--top", type=int, default=5)
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--sequence", action="store_true",
                    help="also print every kernel of the step in launch order (us, name)")
    ap.add_argument("extra", nargs="*", help="more trainer bench flags, after --")
    a = ap.parse_args()
    # Boost clocks and warm caches, as the step runs outside the profiler (ncu's defaults lock the
    # base clock and flush the caches before each kernel, which inflates small kernels' times).
    cmd = [a.ncu, "--nvtx", "--nvtx-include", "train_step/", "--graph-profiling", "node",
           "--clock-control", "none", "--cache-control", "none",
           "--metrics", "gpu__time_duration.sum", "--csv", "--print-units", "base",
           ] + shlex.split(a.trainer) + ["bench", a.config, "--device", a.device, "--math", a.math,
           "--steps", str(max(4, a.steps)), "--warmup", "0", "-q"] + a.extra
    if a.batch_size:
        cmd += ["--batch-size", str(a.batch_size)]
    p = subprocess.run(cmd, capture_output=True, text=True)
    text = p.stdout
    start = text.find('"ID"')
    if p.returncode != 0 or start < 0:
        sys.stderr.write("kernel_profile: %s failed (exit %d)\n%s\n" %
                         (" ".join(cmd), p.returncode, (p.stderr or text)[-2000:]))
        return 1
    seq = kernels(csv.DictReader(io.StringIO(text[start:])))
    step = last_period(seq)
    if not step:
        sys.stderr.write("kernel_profile: %d kernels, no repeating step found\n" % len(seq))
        return 1
    by = OrderedDict()
    for n, us in step:
        c, t = by.get(n, (0, 0.0))
        by[n] = (c + 1, t + us)
    top = sorted(by.items(), key=lambda kv: -kv[1][1])[:a.top]
    total = sum(us for _, us in step)
    res = dict(config=a.config, math=a.math, kernels_per_step=len(step), kernel_us=round(total, 1),
               top=[dict(kernel=n[:120], count=c, us=round(t, 1)) for n, (c, t) in top])
    if a.sequence:
        res["sequence"] = [dict(kernel=n[:120], us=round(us, 2)) for n, us in step]
    if a.json:
        print(json.dumps(res))
        return 0
    print("%s %s: %d kernels a step, %.1f us in kernels" % (a.config, a.math, len(step), total))
    for n, (c, t) in top:
        print("  %8.1f us  x%-2d %s" % (t, c, n[:110]))
    if not a.top or len(by) > a.top:
        rest = sorted(by.items(), key=lambda kv: -kv[1][1])[a.top:]
        print("  %8.1f us  in %d more kernels of %d kinds" %
              (sum(t for _, (c, t) in rest), sum(c for _, (c, t) in rest), len(rest)))
    if a.sequence:
        print("the step in launch order:")
        for i, (n, us) in enumerate(step):
            print("  %3d %8.1f us  %s" % (i, us, n[:110]))
    return 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""Steps of a kernel timeline (scripts/kernel_timeline.sh with TRACE_RAW=FILE): per device, the
last N steps cut at a marker kernel (default: the optimizer's), each with its time in compute
kernels, in NCCL kernels, the two overlapping, NCCL alone and nothing at all. With --against, a
second timeline (one GPU beside several, a build before) compared per kernel name: the mean time
of each and what the difference costs a step. Standard library only.

  timeline_steps.py RAW.csv [--against RAW1.csv] [--marker SUBSTRING] [--steps N] [--top N]

Exit 0; 2 for bad arguments or a file that is not a timeline; 1 when no device has two markers.
"""
import argparse
import collections
import csv
import sys

FIELDS = ("device", "stream", "start_ns", "end_ns", "name")


def die(message):
    sys.stderr.write("timeline_steps: %s\n" % message)
    sys.exit(2)


def load(path):
    """Kernels as (device, stream, start, end, name) tuples, by start."""
    try:
        with open(path, newline="") as f:
            r = csv.DictReader(f)
            if tuple(r.fieldnames or ()) != FIELDS:
                die("%s: not a TRACE_RAW timeline (columns %s)" % (path, r.fieldnames))
            rows = [(int(x["device"]), int(x["stream"]), int(x["start_ns"]), int(x["end_ns"]), x["name"]) for x in r]
    except (OSError, ValueError) as e:
        die("%s: %s" % (path, e))
    rows.sort(key=lambda k: k[2])
    return rows


def is_nccl(name):
    return "nccl" in name.lower()


def split(begin, end, step):
    """Microseconds: both running, NCCL alone, compute alone, neither, over [begin, end)."""
    events = [(end, 0, 0)]
    for k in step:
        nccl = is_nccl(k[4])
        events += [(k[2], 0 if nccl else 1, 1 if nccl else 0), (k[3], 0 if nccl else -1, -1 if nccl else 0)]
    events.sort()
    compute = nccl = 0
    last = begin
    both = nccl_alone = compute_alone = idle = 0
    for t, dc, dn in events:
        d = t - last
        if compute and nccl:
            both += d
        elif nccl:
            nccl_alone += d
        elif compute:
            compute_alone += d
        else:
            idle += d
        compute += dc
        nccl += dn
        last = t
    return both / 1e3, nccl_alone / 1e3, compute_alone / 1e3, idle / 1e3


def steps_of(rows, device, marker):
    ks = [k for k in rows if k[0] == device]
    # A run of marker kernels with nothing else between them (an optimizer in several launches)
    # marks one step boundary: its last kernel.
    marks = [k for i, k in enumerate(ks) if marker in k[4] and not (i + 1 < len(ks) and marker in ks[i + 1][4])]
    out = []
    for a, b in zip(marks, marks[1:]):
        out.append((a[3], b[3], [k for k in ks if k[2] >= a[3] and k[3] <= b[3]]))
    return out


def per_name(rows, marker):
    """Mean microseconds and count a step of each non-NCCL kernel name, over every device's steps."""
    times = collections.defaultdict(list)
    n_steps = 0
    for device in {k[0] for k in rows}:
        for _, _, step in steps_of(rows, device, marker):
            n_steps += 1
            for k in step:
                if not is_nccl(k[4]):
                    times[k[4]].append((k[3] - k[2]) / 1e3)
    return {n: (sum(v) / len(v), len(v) / max(1, n_steps)) for n, v in times.items()}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("raw")
    ap.add_argument("--against")
    ap.add_argument("--marker", default="optimizer_steps")
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--top", type=int, default=12)
    a = ap.parse_args()
    if a.steps < 1 or a.top < 1:
        ap.error("--steps and --top take a positive number")
    rows = load(a.raw)
    found = False
    for device in sorted({k[0] for k in rows}):
        steps = steps_of(rows, device, a.marker)
        streams = collections.Counter(k[1] for k in rows if k[0] == device)
        print("device %d: %d kernels on streams %s, %d steps between '%s' kernels" %
              (device, sum(streams.values()), dict(streams), len(steps), a.marker))
        for begin, end, step in steps[-a.steps:]:
            found = True
            compute = sum(k[3] - k[2] for k in step if not is_nccl(k[4])) / 1e3
            nccl = sum(k[3] - k[2] for k in step if is_nccl(k[4])) / 1e3
            both, nccl_alone, compute_alone, idle = split(begin, end, step)
            print("  step %.1f us: compute kernels %.1f us, NCCL kernels %.1f us; both running %.1f, NCCL alone %.1f, "
                  "compute alone %.1f, neither %.1f" % ((end - begin) / 1e3, compute, nccl, both, nccl_alone,
                                                        compute_alone, idle))
    if a.against:
        mine, theirs = per_name(rows, a.marker), per_name(load(a.against), a.marker)
        diffs = sorted(((mine[n][0] - theirs[n][0]) * mine[n][1], n) for n in mine if n in theirs)
        print("against %s, per kernel name (us a kernel there -> here, x a step here, us a step):" % a.against)
        print("  total %+.1f us a step over %d names in both" % (sum(d for d, _ in diffs), len(diffs)))
        for d, n in sorted(diffs, key=lambda x: -abs(x[0]))[:a.top]:
            print("  %+8.1f  %8.2f -> %8.2f  x%-5.1f %s" % (d, theirs[n][0], mine[n][0], mine[n][1], n[:100]))
        for n in sorted(set(mine) - set(theirs)):
            print("  only here: %8.2f us x%.1f %s" % (mine[n][0], mine[n][1], n[:100]))
    return 0 if found else 1


if __name__ == "__main__":
    sys.exit(main())

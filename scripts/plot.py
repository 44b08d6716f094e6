#!/usr/bin/env python3
"""Plots of trainer runs and benchmarks, one image (PNG or SVG, by --out's extension).

    scripts/plot.py RUN_DIR... [BENCH.csv|BENCH.json...] [--out plot.png] [--title TEXT]
    trainer plot ...                      (the same; trainer runs this script)

RUN_DIR: a run directory of `trainer fit` (its metrics.csv; summary.json names the device). Runs
are overlaid, one colour per run named by its directory (and device): training loss and each
metric per epoch as solid lines, validation as dashed, then seconds per epoch (so a CPU run and a
GPU run of one config give the CPU-vs-GPU epoch-time line) and a bar chart of the mean epoch time.

BENCH: what `trainer bench --out` wrote (CSV or JSON):
  --sweep mlp-depth   seconds per epoch against parameters, one line per device (log-log), and
                      grouped bars per depth;
  the matmul          bars of seconds per device, with the CPU/GPU ratio.

Needs matplotlib (Debian: python3-matplotlib). When the python3 on PATH lacks it and Debian's
/usr/bin/python3 has it, the script re-runs itself with that one. Exit codes as trainer's: 2 for
usage (an input that is neither a run directory nor a bench file), 4 for unreadable or empty data.
"""
import argparse
import csv
import json
import os
import sys

try:
    import matplotlib
except ImportError:
    system_python = "/usr/bin/python3"
    if os.path.realpath(sys.executable) != os.path.realpath(system_python) and os.path.exists(system_python):
        os.execv(system_python, [system_python, os.path.abspath(__file__)] + sys.argv[1:])
    sys.exit("error: plot needs matplotlib: apt-get install python3-matplotlib (Debian) or pip install matplotlib")

matplotlib.use("Agg")
matplotlib.rcParams["svg.fonttype"] = "none"  # SVG text stays text (searchable, selectable)
matplotlib.rcParams["svg.hashsalt"] = "trainer"  # stable ids: the same input gives the same SVG
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.ticker import MaxNLocator  # noqa: E402


class PlotError(Exception):
    def __init__(self, code, message):
        super().__init__(message)
        self.code = code


def read_csv(path):
    try:
        with open(path, newline="", encoding="utf-8") as f:
            reader = csv.DictReader(f)
            rows = list(reader)
            header = reader.fieldnames or []
    except (OSError, UnicodeDecodeError, csv.Error) as e:
        raise PlotError(4, f"{path}: cannot read: {e}")
    for i, r in enumerate(rows):
        # DictReader files extra fields under None and fills missing ones with None
        if None in r or any(v is None for v in r.values()):
            raise PlotError(4, f"{path}: line {i + 2} has another number of fields than the header's {len(header)}")
    return rows


def number(text):
    try:
        return float(text)
    except (TypeError, ValueError):
        return float("nan")


def read_run(path):
    metrics = os.path.join(path, "metrics.csv")
    if not os.path.isfile(metrics):
        raise PlotError(2, f"{path}: not a run directory (no metrics.csv) nor a bench .csv/.json file")
    rows = read_csv(metrics)
    if not rows:
        raise PlotError(4, f"{metrics}: no epochs recorded yet")
    if "epoch" not in rows[0] or len(rows[0]) < 2:
        raise PlotError(4, f"{metrics}: expected an 'epoch' column and at least one metric, found {list(rows[0])}")
    name = os.path.basename(os.path.normpath(path))
    try:
        with open(os.path.join(path, "summary.json"), encoding="utf-8") as f:
            summary = json.load(f)
        device = summary.get("device", "") if isinstance(summary, dict) else ""
        device = device if isinstance(device, str) else ""
        # "CPU (oneDNN ...)" -> CPU, "GPU 0: NVIDIA H100 ..." -> GPU 0
        name += " (" + device.split(" (")[0].split(":")[0] + ")" if device else ""
    except (OSError, ValueError):
        pass
    columns = {k: [number(r[k]) for r in rows] for k in rows[0]}
    return {"name": name, "columns": columns}


def read_bench(path):
    """Rows of a bench file as dicts with a 'bench' key: 'matmul' or 'mlp-depth'."""
    if path.endswith(".csv"):
        rows = read_csv(path)
    else:
        try:
            with open(path, encoding="utf-8") as f:
                j = json.load(f)
        except (OSError, ValueError) as e:
            raise PlotError(4, f"{path}: cannot read: {e}")
        if not isinstance(j, dict):
            raise PlotError(4, f"{path}: not the output of trainer bench --out (a JSON object is expected)")
        rows = []
        if j.get("bench") == "matmul":
            rows = [dict(bench="matmul", m=j["m"], k=j["k"], n=j["n"], **r) for r in j.get("results", [])]
        elif j.get("bench") == "mlp-depth":
            descriptions = {d["device"]: d["description"] for d in j.get("devices", [])}
            for r in j.get("rows", []):
                for device, cell in r["results"].items():
                    rows.append(dict(bench="mlp-depth", depth=r["depth"], params=r["params"], device=device,
                                     description=descriptions.get(device, ""), **cell))
    if not rows or rows[0].get("bench") not in ("matmul", "mlp-depth"):
        raise PlotError(4, f"{path}: not the output of trainer bench --out (no matmul or mlp-depth rows)")
    return {"name": os.path.basename(path), "kind": rows[0]["bench"], "rows": rows}


def short_count(n):
    """22, 2.98k, 703k, 11.2M: parameter counts that fit under a bar."""
    for div, unit in ((1e6, "M"), (1e3, "k")):
        if n >= div:
            return f"{n / div:.3g}{unit}"
    return str(n)


def device_label(device, description=""):
    """CPU (16 threads), GPU 0."""
    if device != "cpu":
        return "GPU " + device.split(":")[-1]
    threads = [part.strip() for part in description.rstrip(")").split(",") if part.strip().endswith("threads")]
    return f"CPU ({threads[0]})" if threads else "CPU"


def device_order(rows):
    devices = sorted({r["device"] for r in rows}, key=lambda d: (d != "cpu", d))
    return devices


# Each panel function draws on one Axes.

def run_panels(runs):
    panels = []
    first = runs[0]["columns"]
    bases = [k for k in first if k not in ("epoch", "lr", "seconds") and not k.startswith("val_")]
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]

    def metric_panel(base):
        def draw(ax):
            for i, run in enumerate(runs):
                c = run["columns"]
                if base not in c:
                    continue
                color = colors[i % len(colors)]
                ax.plot(c["epoch"], c[base], "-o", color=color, markersize=3, label=f"{run['name']} train")
                if "val_" + base in c:
                    ax.plot(c["epoch"], c["val_" + base], "--s", color=color, markersize=3,
                            label=f"{run['name']} validation")
            ax.set_title(base)
            ax.xaxis.set_major_locator(MaxNLocator(integer=True))
            ax.set_xlabel("epoch")
            ax.set_ylabel(base)
            ax.grid(alpha=0.3)
            ax.legend(fontsize=7)
        return draw

    for base in bases:
        panels.append(metric_panel(base))

    def epoch_time_line(ax):
        for i, run in enumerate(runs):
            c = run["columns"]
            if "seconds" in c:
                ax.plot(c["epoch"], c["seconds"], "-o", color=colors[i % len(colors)], markersize=3,
                        label=run["name"])
        ax.set_title("time per epoch")
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.set_xlabel("epoch")
        ax.set_ylabel("seconds")
        ax.set_ylim(bottom=0)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)

    def epoch_time_bars(ax):
        names = [r["name"] for r in runs if "seconds" in r["columns"]]
        means = [sum(r["columns"]["seconds"]) / len(r["columns"]["seconds"]) for r in runs
                 if "seconds" in r["columns"]]
        bars = ax.bar(range(len(names)), means, color=[colors[i % len(colors)] for i in range(len(names))])
        ax.bar_label(bars, fmt="%.3g s", fontsize=7)
        ax.set_xticks(range(len(names)), names, rotation=15, fontsize=7, ha="right")
        ax.set_title("mean time per epoch")
        ax.set_ylabel("seconds")

    if "seconds" in first:
        panels += [epoch_time_line, epoch_time_bars]
    return panels


def sweep_panels(bench):
    rows = bench["rows"]
    devices = device_order(rows)
    depths = sorted({int(number(r["depth"])) for r in rows})
    cell = {(int(number(r["depth"])), r["device"]): r for r in rows}
    params = {int(number(r["depth"])): int(number(r["params"])) for r in rows}

    labels = {d: device_label(d, next(r.get("description", "") for r in rows if r["device"] == d)) for d in devices}

    def gpu_wins_from(gpu):
        """The first depth from which `gpu` is faster than the CPU at every depth, or None."""
        first = None
        for k in reversed(depths):
            if (k, gpu) not in cell or (k, "cpu") not in cell:
                break
            if number(cell[(k, gpu)]["seconds"]) >= number(cell[(k, "cpu")]["seconds"]):
                break
            first = k
        return first

    def line(ax):
        for d in devices:
            xs = [params[k] for k in depths if (k, d) in cell]
            ys = [number(cell[(k, d)]["epoch_seconds"]) for k in depths if (k, d) in cell]
            drawn = ax.plot(xs, ys, "-o", markersize=4, label=labels[d])
            wins = gpu_wins_from(d) if d != "cpu" and "cpu" in devices else None
            if wins is not None:
                ax.axvline(params[wins], linestyle=":", color=drawn[0].get_color(),
                           label=f"{labels[d]} faster from depth {wins} ({short_count(params[wins])} parameters)")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_title(f"MLP depth sweep: time per epoch ({bench['name']})", fontsize=9)
        ax.set_xlabel("parameters")
        ax.set_ylabel("seconds per epoch")
        ax.grid(alpha=0.3, which="both")
        ax.legend(fontsize=7)

    def bars(ax):
        width = 0.8 / len(devices)
        for i, d in enumerate(devices):
            xs = [j + (i - (len(devices) - 1) / 2) * width for j, k in enumerate(depths) if (k, d) in cell]
            ys = [number(cell[(k, d)]["epoch_seconds"]) for k in depths if (k, d) in cell]
            ax.bar(xs, ys, width, label=labels[d])
        ax.set_xticks(range(len(depths)), [f"{k}\n{short_count(params[k])}" for k in depths], fontsize=7)
        ax.set_yscale("log")
        ax.set_title("time per epoch by depth (parameters)", fontsize=9)
        ax.set_xlabel("depth / parameters")
        ax.set_ylabel("seconds per epoch")
        ax.legend(fontsize=8)

    return [line, bars]


def matmul_panels(bench):
    rows = sorted(bench["rows"], key=lambda r: (r["device"] != "cpu", r["device"]))

    def bars(ax):
        seconds = [number(r["seconds"]) for r in rows]
        labels = [device_label(r["device"], r.get("description", "")) for r in rows]
        drawn = ax.bar(range(len(rows)), seconds, color=["tab:blue"] + ["tab:green"] * (len(rows) - 1))
        notes = [f"{s:.3g} s" + (f"\n{seconds[0] / s:.0f}x" if i else "") for i, s in enumerate(seconds)]
        ax.bar_label(drawn, labels=notes, fontsize=8)
        ax.set_xticks(range(len(rows)), labels)
        if len(rows) > 1:
            ax.set_yscale("log")
        r = rows[0]
        ax.set_title(f"matmul ({r['m']} x {r['k']}) x ({r['k']} x {r['n']}), fp32", fontsize=9)
        ax.set_ylabel("seconds")

    return [bars]


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("inputs", nargs="+", metavar="RUN_OR_BENCH", help="run directories and bench --out files")
    p.add_argument("--out", default="plot.png", help="the image: .png or .svg [default: plot.png]")
    p.add_argument("--title", default="", help="a title over the whole figure")
    a = p.parse_args()
    if not a.out.endswith((".png", ".svg")):
        raise PlotError(2, f"--out {a.out}: expected a .png or .svg file")
    runs, panels = [], []
    for path in a.inputs:
        if os.path.isdir(path):
            runs.append(read_run(path))
        elif os.path.isfile(path) and path.endswith((".csv", ".json")):
            bench = read_bench(path)
            panels += sweep_panels(bench) if bench["kind"] == "mlp-depth" else matmul_panels(bench)
        else:
            raise PlotError(2, f"{path}: not a run directory (no metrics.csv) nor a bench .csv/.json file")
    if runs:
        panels = run_panels(runs) + panels
    cols = min(3, len(panels))
    rows = (len(panels) + cols - 1) // cols
    fig, axes = plt.subplots(rows, cols, figsize=(5.2 * cols, 3.9 * rows), squeeze=False)
    for ax, draw in zip(axes.flat, panels):
        draw(ax)
    for ax in list(axes.flat)[len(panels):]:
        ax.axis("off")
    if a.title:
        fig.suptitle(a.title)
    fig.tight_layout()
    try:
        fig.savefig(a.out, dpi=110)
    except OSError as e:
        raise PlotError(4, f"--out {a.out}: cannot write: {e}")
    print(f"plot: wrote {a.out} ({len(panels)} panels: {len(runs)} runs, {len(a.inputs) - len(runs)} bench files)")


if __name__ == "__main__":
    try:
        try:
            main()
        except (PlotError, SystemExit, KeyboardInterrupt):
            raise
        except Exception as e:  # any other malformed input: a message and exit 4, never a traceback
            raise PlotError(4, f"cannot plot {' '.join(sys.argv[1:])}: the input is malformed "
                               f"({type(e).__name__}: {e})")
    except PlotError as e:
        print(f"error: {e}", file=sys.stderr)
        sys.exit(e.code)

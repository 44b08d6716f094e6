#!/usr/bin/env python3
"""Data-parallel scaling, side by side: trainer on 1 GPU and on N GPUs (`fit --device gpu:0,..`,
and optionally `mpirun -np N ... --device gpu`), against PyTorch DDP (torchrun + ddp_torch.py) on
1 and N GPUs, at the same global batch, in one run on one machine. Prints a Markdown table of
steps/s and the N-GPU / 1-GPU ratio of each.

  python3 scripts/dp_table.py --peer PATH/peer_torch.py [--trainer build/trainer] [--gpus 2]
      [--workloads cifar_cnn,vgg11_bn_cifar] [--maths fp32,bf16] [--batch 512[,1024...]] [--samples 51200]
      [--epochs 4] [--mpirun] [--torch-steps 200]

trainer trains its config's model on synthetic data (`data.train: {format: random}`, no
validation) for --epochs epochs of --samples rows; its steps/s is the rows / batch over the median
epoch time after the first (the data pipeline included). PyTorch's data is already on the GPU
(its best case). Math modes pair as fp32 <-> gpu-fp32, tf32 <-> gpu-tf32, bf16 <-> gpu-bf16
(autocast + channels_last). Exit 0 when every run gave a number, 1 otherwise.
"""
import argparse, json, os, statistics, subprocess, sys

CONFIGS = {
    "mnist_cnn": "configs/mnist_cnn.yaml",
    "cifar_cnn": "configs/cifar10_cnn.yaml",
    "vgg11_bn_cifar": "configs/vgg11_bn_cifar.yaml",
}
TORCH_MODE = {"fp32": "gpu-fp32", "tf32": "gpu-tf32", "bf16": "gpu-bf16"}


def trainer_fit(a, config, math, gpus, mpi, extra=()):
    sets = ["--set", "data.train={format: random, samples: %d, seed: 1}" % a.samples,
            "--set", "data.validation=null", "--set", "data.validation_split=0"] + list(extra)
    fit = [a.trainer, "fit", config, "--batch-size", str(a.batch), "--epochs", str(a.epochs), "--math", math,
           "--log-format", "json", "--no-out"] + sets
    if mpi:
        # --bind-to none: Open MPI binds each of 2 ranks to one core, which the loader shares.
        cmd = ["mpirun", "-np", str(gpus), "--bind-to", "none", "-x", "NCCL_NVLS_ENABLE"] + fit + ["--device", "gpu"]
    else:
        cmd = fit + ["--device", "gpu:" + ",".join(str(i) for i in range(gpus))]
    p = subprocess.run(cmd, capture_output=True, text=True)
    secs, losses = [], []
    for line in p.stdout.splitlines():
        try:
            j = json.loads(line)
        except ValueError:
            continue
        if j.get("event") == "epoch":
            secs.append(j["seconds"])
            losses.append(j["loss"])
    if p.returncode != 0 or len(secs) < 2:
        return None, (p.stderr.strip().splitlines() or ["exit %d" % p.returncode])[-1][:160]
    steps = a.samples // a.batch + (1 if a.samples % a.batch else 0)
    return dict(steps_per_s=steps / statistics.median(secs[1:]), losses=losses), None


def torch_ddp(a, work, math, gpus):
    cmd = ["torchrun", "--standalone", "--nproc_per_node", str(gpus), os.path.join(a.here, "ddp_torch.py"),
           "--peer", a.peer, "--workload", work, "--mode", TORCH_MODE[math], "--batch", str(a.batch),
           "--steps", str(a.torch_steps)]
    try:
        p = subprocess.run(cmd, capture_output=True, text=True)
    except FileNotFoundError:
        return None, "torchrun is not on PATH (PyTorch's launcher)"
    for line in p.stdout.splitlines():
        try:
            return json.loads(line), None
        except ValueError:
            continue
    return None, (p.stderr.strip().splitlines() or ["exit %d" % p.returncode])[-1][:160]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trainer", default="build/trainer")
    ap.add_argument("--peer", required=True, help="path of peer_torch.py")
    ap.add_argument("--gpus", type=int, default=2)
    ap.add_argument("--workloads", default="cifar_cnn,vgg11_bn_cifar")
    ap.add_argument("--maths", default="fp32,bf16")
    ap.add_argument("--batch", default="512", help="global batch sizes, comma-separated")
    ap.add_argument("--samples", type=int, default=51200)
    ap.add_argument("--epochs", type=int, default=4)
    ap.add_argument("--torch-steps", type=int, default=200)
    ap.add_argument("--mpirun", action="store_true", help="also trainer under mpirun -np N, a rank per GPU")
    a = ap.parse_args()
    a.here = os.path.dirname(os.path.abspath(__file__))
    os.environ.setdefault("NCCL_NVLS_ENABLE", "0")
    ok = True
    head = "| workload | math | trainer 1 GPU | trainer %d GPUs | scaling |" % a.gpus
    if a.mpirun:
        head += " mpirun -np %d | scaling |" % a.gpus
    head += " DDP 1 GPU | DDP %d GPUs | DDP scaling |" % a.gpus
    rows = [head, "|" + "---|" * (head.count("|") - 1)]

    def cell(r, err):
        nonlocal ok
        if r is None:
            ok = False
            print("  failed: " + err, file=sys.stderr)
            return "failed", None
        return "%.1f" % r["steps_per_s"], r["steps_per_s"]

    def ratio(x, y):
        return "%.2fx" % (y / x) if x and y else "-"

    batches = [int(b) for b in a.batch.split(",")]
    runs = [(w, m, b) for w in a.workloads.split(",") for m in a.maths.split(",") for b in batches]
    for w, m, a.batch in runs:  # a.batch: this run's global batch (trainer_fit and torch_ddp read it)
        cfg = os.path.join(a.here, "..", CONFIGS[w])
        t1, e1 = trainer_fit(a, cfg, m, 1, False)
        tn, en = trainer_fit(a, cfg, m, a.gpus, False)
        c1, v1 = cell(t1, e1)
        cn, vn = cell(tn, en)
        row = "| %s (b%d) | %s | %s | %s | %s |" % (w, a.batch, m, c1, cn, ratio(v1, vn))
        if a.mpirun:
            tm, em = trainer_fit(a, cfg, m, a.gpus, True)
            cm, vm = cell(tm, em)
            row += " %s | %s |" % (cm, ratio(v1, vm))
        if t1 and tn:
            print("%s %s loss by epoch, 1 GPU: %s; %d GPUs: %s" % (
                w, m, ["%.4f" % x for x in t1["losses"]], a.gpus, ["%.4f" % x for x in tn["losses"]]),
                file=sys.stderr)
        p1, f1 = torch_ddp(a, w, m, 1)
        pn, fn_ = torch_ddp(a, w, m, a.gpus)
        d1, u1 = cell(p1, f1)
        dn, un = cell(pn, fn_)
        row += " %s | %s | %s |" % (d1, dn, ratio(u1, un))
        rows.append(row)
        print(row, flush=True)
    print("\n".join(rows))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

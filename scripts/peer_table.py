#!/usr/bin/env python3
"""Side by side: `trainer bench` and PyTorch (peer_torch.py) on the same GPU, in one run.

For each workload, trainer's steps/s in each --math mode and PyTorch's in each of its modes
(gpu-eager: its defaults; gpu-fp32; gpu-tf32; gpu-bf16: autocast + channels_last; gpu-compile:
torch.compile with CUDA graphs), then a Markdown table with the ratio of trainer's best to
PyTorch's best, and trainer's MFU.

  python3 scripts/peer_table.py --peer PATH/peer_torch.py [--trainer build/trainer]
      [--workloads mnist_cnn,cifar_cnn,reuters_conv1d,vgg11_bn_cifar] [--maths fp32,tf32,bf16,fp16]
      [--modes gpu-eager,gpu-fp32,gpu-tf32,gpu-bf16] [--steps 300] [--device gpu:0]

Exit 0 when every run produced a number; 1 otherwise (the table shows which failed).
"""
import argparse, json, os, subprocess, sys

# peer_torch.py workload -> (config, batch size the peer uses)
WORKLOADS = {
    "mnist_cnn": ("configs/mnist_cnn.yaml", 200),
    "cifar_cnn": ("configs/cifar10_cnn.yaml", 32),
    "reuters_conv1d": ("configs/reuters_conv1d.yaml", 32),
    "vgg11_bn_cifar": ("configs/vgg11_bn_cifar.yaml", 256),
    "mlp8_disc": ("configs/mlp_disc.yaml", 100),
}


def trainer_run(trainer, config, batch, math, device, steps):
    cmd = [trainer, "bench", config, "--device", device, "--math", math, "--batch-size", str(batch),
           "--steps", str(steps), "--warmup", "30", "--json"]
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        return None, (p.stderr.strip().splitlines() or ["exit %d" % p.returncode])[-1]
    return json.loads(p.stdout.strip().splitlines()[-1]), None


def peer_runs(peer, workload, modes):
    p = subprocess.run([sys.executable, peer, workload, ",".join(modes)], capture_output=True, text=True)
    out = {}
    for line in p.stdout.splitlines():
        try:
            j = json.loads(line)
        except ValueError:
            continue
        out[j.get("mode")] = j
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trainer", default="build/trainer")
    ap.add_argument("--peer", required=True, help="path of peer_torch.py")
    ap.add_argument("--workloads", default="mnist_cnn,cifar_cnn,reuters_conv1d,vgg11_bn_cifar")
    ap.add_argument("--maths", default="fp32,tf32,bf16,fp16")
    ap.add_argument("--modes", default="gpu-eager,gpu-fp32,gpu-tf32,gpu-bf16")
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--device", default="gpu:0")
    a = ap.parse_args()
    maths, modes = a.maths.split(","), a.modes.split(",")
    ok = True
    rows = []
    device_name = ""
    for w in a.workloads.split(","):
        if w not in WORKLOADS:
            sys.exit("peer_table: unknown workload '%s'; known: %s" % (w, ", ".join(WORKLOADS)))
        config, batch = WORKLOADS[w]
        ours = {}
        for m in maths:
            j, err = trainer_run(a.trainer, config, batch, m, a.device, a.steps)
            if j is None:
                ok = False
                print("trainer %s %s: %s" % (w, m, err), file=sys.stderr)
            ours[m] = j
            if j:
                device_name = j["device"]
        theirs = peer_runs(a.peer, w, modes)
        rows.append((w, batch, ours, theirs))
        print(json.dumps({"workload": w, "trainer": {m: (j or {}).get("steps_per_s") for m, j in ours.items()},
                          "pytorch": {m: theirs.get(m, {}).get("steps_per_s") for m in modes}}), flush=True)
    print("\n%s\n" % device_name)
    head = ["workload (batch)"] + ["trainer %s" % m for m in maths] + ["PyTorch %s" % m for m in modes]
    head += ["trainer best / PyTorch best", "trainer MFU"]
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    for w, batch, ours, theirs in rows:
        t = [ours[m]["steps_per_s"] if ours[m] else None for m in maths]
        p = [theirs.get(m, {}).get("steps_per_s") for m in modes]
        ok = ok and all(v is not None for v in p)
        best_t = max([v for v in t if v] or [0])
        best_p = max([v for v in p if v] or [0])
        best_m = maths[t.index(best_t)] if best_t else None
        mfu = ours[best_m].get("mfu") if best_m else None
        cells = ["%s (%d)" % (w, batch)] + ["%.1f" % v if v else "failed" for v in t]
        cells += ["%.1f" % v if v else "failed" for v in p]
        cells += ["%.2fx" % (best_t / best_p) if best_t and best_p else "-"]
        cells += ["%.1f%% (%s)" % (100 * mfu, best_m) if mfu else "-"]
        print("| " + " | ".join(cells) + " |")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

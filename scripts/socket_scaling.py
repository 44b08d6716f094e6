#!/usr/bin/env python3
"""Several hosts, simulated on one: NCCL forced onto its socket transport over loopback
(NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1) stands in for two hosts joined by Ethernet. Measures, in
one run on one machine with 2 GPUs:
  1. NCCL all-reduce time by size over NVLink and over sockets (scripts/allreduce_bw.py under
     torchrun): the link's bandwidth B (busbw of the largest size) and a hop's latency a (half the
     time of a 4 KiB all-reduce between two ranks);
  2. trainer fit steps/s, weak scaling (the same rows a GPU): one GPU, two over NVLink, two over
     sockets, each without and with device.gradient_compression: bf16;
then fits the model of a step and predicts 8 and 64 GPUs:

  step(N) = T1 + max(0, C(N) + K),  C(N) = 2 (N - 1) / N * S / B + 2 (N - 1) * a

T1 the one-GPU step, S the gradient bytes a step (4 a parameter, 2 with bf16 compression), C the
ring all-reduce's time (nccl-tests' model: each rank sends and receives 2 (N - 1) / N of the data,
in 2 (N - 1) hops), K fitted from the two-GPU socket run: K = (T2 - T1) - C(2), negative where
the backward pass hides part of the ring, positive where the collectives cost more than the ring
model says. It predicts N over the measured link and over --links bandwidths (100 and 400 Gb/s
Ethernet by default), assuming one GPU a host (or each GPU its own share of its host's NIC) and a
flat ring: NCCL's trees and NVLink inside a host would do better at 64.

  python3 scripts/socket_scaling.py [--trainer build/trainer] [--workloads vgg11_bn_cifar,resnet18_cifar]
      [--math bf16] [--batch 256] [--samples 25600] [--epochs 3]
"""
import argparse, json, os, subprocess, sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import dp_table  # noqa: E402  (trainer_fit)

SOCKET = {"NCCL_P2P_DISABLE": "1", "NCCL_SHM_DISABLE": "1"}


def with_env(extra, fn, *args):
    saved = {k: os.environ.get(k) for k in extra}
    os.environ.update(extra)
    try:
        return fn(*args)
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def allreduce(extra):
    cmd = ["torchrun", "--standalone", "--nproc_per_node", "2", os.path.join(HERE, "allreduce_bw.py")]
    env = dict(os.environ, **extra)
    p = subprocess.run(cmd, capture_output=True, text=True, env=env)
    rows = []
    for line in p.stdout.splitlines():
        try:
            rows.append(json.loads(line))
        except ValueError:
            pass
    if not rows:
        print("allreduce_bw failed: " + (p.stderr.strip().splitlines() or ["?"])[-1][:200], file=sys.stderr)
    return rows


def param_bytes(trainer, config):
    p = subprocess.run([trainer, "summary", config], capture_output=True, text=True)
    for line in p.stdout.splitlines():  # "Trainable params: 9,231,114"
        if line.startswith("Trainable params:"):
            return int(line.split(":")[1].replace(",", "").strip()) * 4
    return None


def predict(workload, comp, S, T1, T2, link, others):
    """The model of the docstring, fitted to the two-GPU socket step: K = (T2 - T1) - C(2), the
    measured step's excess over the ring's time (negative: the part the backward hides; positive:
    per-step costs of the collectives the ring model leaves out). Predicts N GPUs over the measured
    link and over the `others` bandwidths (GB/s, e.g. 100 and 400 Gb/s Ethernet) with its latency."""
    def C(n, B):  # ms
        return 2 * (n - 1) / n * S / B * 1e3 + 2 * (n - 1) * link["a"] * 1e3
    K = (T2 - T1) - C(2, link["B"])
    out = {"workload": workload, "compression": comp, "grad_bytes": S, "T1_ms": round(T1, 3),
           "T2_socket_ms": round(T2, 3), "C2_ms": round(C(2, link["B"]), 3), "K_ms": round(K, 3)}
    for name, B in [("measured %.2f GB/s" % (link["B"] / 1e9), link["B"])] + [("%g GB/s" % g, g * 1e9) for g in others]:
        steps = {n: T1 + max(0.0, C(n, B) + K) for n in (2, 8, 64)}
        out[name] = {n: {"ms": round(t, 2), "efficiency": round(T1 / t, 3)} for n, t in steps.items()}
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trainer", default="build/trainer")
    ap.add_argument("--workloads", default="vgg11_bn_cifar,resnet18_cifar")
    ap.add_argument("--math", default="bf16")
    ap.add_argument("--batch", type=int, default=256, help="rows a GPU")
    ap.add_argument("--samples", type=int, default=25600, help="rows an epoch a GPU")
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--links", default="12.5,50", help="other link bandwidths to predict for, GB/s")
    a = ap.parse_args()
    a.links = [float(x) for x in a.links.split(",") if x]
    os.environ.setdefault("NCCL_NVLS_ENABLE", "0")
    links = {}
    for name, extra in (("nvlink", {}), ("socket", SOCKET)):
        rows = allreduce(extra)
        for r in rows:
            print("all-reduce %-6s %10d B %10.1f us  busbw %7.2f GB/s" % (name, r["bytes"], r["us"], r["busbw_GBs"]))
        if rows:
            links[name] = {"B": rows[-1]["busbw_GBs"] * 1e9, "a": rows[0]["us"] * 1e-6 / 2}
    print(json.dumps({"links": links}))
    for w in a.workloads.split(","):
        cfg = os.path.join(HERE, "..", dp_table.CONFIGS.get(w, "configs/%s.yaml" % w))
        S = param_bytes(a.trainer, cfg)
        res = {}
        for key, gpus, extra, comp in (("1 GPU", 1, {}, None), ("2 nvlink", 2, {}, None),
                                       ("2 nvlink bf16", 2, {}, "bf16"), ("2 socket", 2, SOCKET, None),
                                       ("2 socket bf16", 2, SOCKET, "bf16")):
            ns = argparse.Namespace(trainer=a.trainer, batch=a.batch * gpus, epochs=a.epochs,
                                    samples=a.samples * gpus)
            sets = ["--set", "device.gradient_compression=" + comp] if comp else []
            r, err = with_env(extra, dp_table.trainer_fit, ns, cfg, a.math, gpus, False, sets)
            res[key] = 1e3 / r["steps_per_s"] if r else None
            print("%s %s %-14s %s" % (w, a.math, key, "%.3f ms/step" % res[key] if r else "failed: " + err), flush=True)
        T1 = res["1 GPU"]
        if not (T1 and S and "socket" in links):
            continue
        for comp, div in (("none", 1), ("bf16", 2)):
            T2 = res["2 socket" + (" bf16" if comp == "bf16" else "")]
            if T2:
                print(json.dumps(predict(w, comp, S // div, T1, T2, links["socket"], a.links)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

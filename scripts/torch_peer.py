#!/usr/bin/env python3
"""The same network in PyTorch, built from `trainer summary CONFIG --json`.

  torch_peer.py train CONFIG [--device cuda|cpu] [--math fp32|tf32|bf16] [--epochs N] [--set k=v ...]
      Trains the config's network with the config's recipe (optimizer, schedule, loss and label
      smoothing, batch size, epochs, shuffling, normalization, data.augment) on the config's data
      (idx and cifar10 formats), and prints each epoch's loss and validation accuracy, then one JSON
      line with the final validation accuracy: the PyTorch side of an accuracy comparison. bf16:
      autocast + channels_last, as bench.
  torch_peer.py export RUN_DIR [--out state_dict.pt] [--samples N]
      Loads a trained run (RUN_DIR/model.safetensors) into the PyTorch network, saves its
      state_dict, and checks that PyTorch and `trainer predict` agree on the first N validation
      samples: prints the largest probability difference, the arg-max agreement and both
      accuracies. Exit 0 when the agreement is >= 99.9% and the difference below 1e-3.
  torch_peer.py bench CONFIG [--math fp32|tf32|bf16] [--steps N] [--warmup W]
      Steps/s of the network's training step on synthetic data already on the GPU (as
      ../shared/bench/peer_torch.py; bf16 = autocast + channels_last), cudnn.benchmark on.

--trainer PATH (default build/trainer) is the trainer binary (or a wrapper script). Needs numpy
and torch; the checkpoint (safetensors) is read with numpy alone.
"""
import argparse, gzip, json, math, os, struct, subprocess, sys, tempfile, time

try:
    import numpy as np
    import torch
    import torch.nn as nn
    import torch.nn.functional as F
except ModuleNotFoundError as missing:  # one clear line instead of a traceback
    if "-h" in sys.argv[1:] or "--help" in sys.argv[1:]:
        print(__doc__)
        sys.exit(0)
    sys.exit("torch_peer.py: needs numpy and PyTorch, and '%s' is not installed for this python (%s). Install "
             "them where it finds them (Debian: apt-get install python3-numpy; PyTorch: pip install torch, see "
             "pytorch.org), or run the script with a python that has them: /path/to/python3 %s ..."
             % (missing.name, sys.executable, sys.argv[0]))


# ---------------------------------------------------------------- the network, from summary --json

def same_pads(size, k, s):
    total = max((math.ceil(size / s) - 1) * s + k - size, 0)
    return total // 2, total - total // 2


class Layer(nn.Module):
    """One of our layers: `fn(inputs)` plus the parameters and buffers under its checkpoint names."""

    def __init__(self, spec, in_shapes):
        super().__init__()
        self.spec, t, h = spec, spec["type"], spec["hyper"]
        self.kind = t
        if t == "conv2d":
            c = in_shapes[0][0]
            kh, kw = h["kernel_size"]
            self.stride = tuple(h["strides"])
            pad = h["padding"]
            self.pad = (0, 0) if pad == "valid" else ((pad, pad) if isinstance(pad, int) else None)
            self.k = (kh, kw)
            self.weight = nn.Parameter(torch.empty(h["filters"], c // h.get("groups", 1), kh, kw))
            self.bias = nn.Parameter(torch.empty(h["filters"])) if h["use_bias"] else None
            self.groups = h.get("groups", 1)
            ref = nn.Conv2d(c, h["filters"], (kh, kw), groups=self.groups, bias=h["use_bias"])
            self.weight.data.copy_(ref.weight.data)
            if self.bias is not None:
                self.bias.data.copy_(ref.bias.data)
        elif t == "dense":
            ref = nn.Linear(in_shapes[0][0], h["units"], bias=h["use_bias"])
            self.weight = nn.Parameter(ref.weight.data.clone())
            self.bias = nn.Parameter(ref.bias.data.clone()) if h["use_bias"] else None
        elif t == "batchnorm":
            c = in_shapes[0][0]
            self.weight = nn.Parameter(torch.ones(c))
            self.bias = nn.Parameter(torch.zeros(c))
            self.register_buffer("running_mean", torch.zeros(c))
            self.register_buffer("running_var", torch.ones(c))
            self.eps, self.momentum = float(h["epsilon"]), float(h["momentum"])
        elif t in ("relu", "sigmoid", "tanh", "gelu", "leaky_relu", "softmax", "log_softmax", "flatten", "identity",
                   "add", "concat", "global_avg_pool", "global_max_pool", "maxpool2d", "avgpool2d", "dropout",
                   "dropout2d"):
            pass
        else:
            raise SystemExit("torch_peer: layer type '%s' (%s) has no PyTorch translation here" % (t, spec["name"]))

    def forward(self, xs):
        t, h, x = self.kind, self.spec["hyper"], xs[0]
        if t == "conv2d":
            if self.pad is None:  # "same", TensorFlow's: the extra pixel at the end
                pt, pb = same_pads(x.shape[2], self.k[0], self.stride[0])
                pl, pr = same_pads(x.shape[3], self.k[1], self.stride[1])
                return F.conv2d(F.pad(x, (pl, pr, pt, pb)), self.weight, self.bias, self.stride, 0, 1, self.groups)
            return F.conv2d(x, self.weight, self.bias, self.stride, self.pad, 1, self.groups)
        if t == "dense":
            return F.linear(x, self.weight, self.bias)
        if t == "batchnorm":
            return F.batch_norm(x, self.running_mean, self.running_var, self.weight, self.bias, self.training,
                                self.momentum, self.eps)
        if t == "relu": return F.relu(x)
        if t == "sigmoid": return torch.sigmoid(x)
        if t == "tanh": return torch.tanh(x)
        if t == "gelu": return F.gelu(x)
        if t == "leaky_relu": return F.leaky_relu(x, h.get("alpha", 0.01))
        if t == "softmax": return F.softmax(x, dim=1)
        if t == "log_softmax": return F.log_softmax(x, dim=1)
        if t == "flatten": return x.flatten(1)
        if t == "identity": return x
        if t == "add": return sum(xs[1:], xs[0])
        if t == "concat": return torch.cat(xs, dim=1)
        if t == "global_avg_pool": return x.mean(dim=tuple(range(2, x.dim())))
        if t == "global_max_pool": return x.amax(dim=tuple(range(2, x.dim())))
        if t in ("maxpool2d", "avgpool2d"):
            k, s = tuple(h["pool_size"]), tuple(h["strides"])
            if h.get("padding", "valid") != "valid":
                pt, pb = same_pads(x.shape[2], k[0], s[0])
                pl, pr = same_pads(x.shape[3], k[1], s[1])
                x = F.pad(x, (pl, pr, pt, pb), value=-math.inf if t == "maxpool2d" else 0.0)
            return F.max_pool2d(x, k, s) if t == "maxpool2d" else F.avg_pool2d(x, k, s)
        if t == "dropout": return F.dropout(x, h["rate"], self.training)
        if t == "dropout2d": return F.dropout2d(x, h["rate"], self.training)
        raise AssertionError(t)


class Net(nn.Module):
    """The graph: layers in run order, each reading the outputs it names. Modules sit at their
    dotted names (layer1.0.conv1), so state_dict keys are the checkpoint's tensor names."""

    def __init__(self, summary):
        super().__init__()
        self.order = []
        shapes = {"input": summary["input_shape"]}
        for spec in summary["layers"]:
            layer = Layer(spec, [shapes[i] for i in spec["inputs"]])
            parent, path = self, spec["name"].split(".")
            for part in path[:-1]:
                if part not in parent._modules:
                    parent.add_module(part, nn.Module())
                parent = parent._modules[part]
            parent.add_module(path[-1], layer)
            self.order.append((spec["name"], spec["inputs"], layer))
            shapes[spec["name"]] = spec["output_shape"]

    def forward(self, x):
        out = {"input": x}
        for name, inputs, layer in self.order:
            out[name] = layer([out[i] for i in inputs])
        return out[self.order[-1][0]]


def summary_of(trainer, config, sets=()):
    cmd = [trainer, "summary", config, "--json"] + [a for s in sets for a in ("--set", s)]
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        raise SystemExit("torch_peer: %s failed: %s" % (" ".join(cmd), p.stderr.strip()))
    return json.loads(p.stdout)


# ---------------------------------------------------------------- data, as the config reads it

def read_idx(path):
    raw = open(path, "rb").read()
    if path.endswith(".gz"):
        raw = gzip.decompress(raw)
    ndim = raw[3]
    dims = struct.unpack(">" + "I" * ndim, raw[4:4 + 4 * ndim])
    return np.frombuffer(raw, np.uint8, offset=4 + 4 * ndim).reshape(dims)


def read_source(src, base, input_shape):
    def path(p):
        return p if os.path.isabs(p) else os.path.join(base, p)
    if src["format"] == "idx":
        x = read_idx(path(src["images"])).reshape([-1] + input_shape)
        y = read_idx(path(src["labels"])).astype(np.int64)
    elif src["format"] == "cifar10":
        recs = np.concatenate([np.fromfile(path(f), np.uint8).reshape(-1, 3073) for f in src["files"]])
        x, y = recs[:, 1:].reshape([-1] + input_shape), recs[:, 0].astype(np.int64)
    else:
        raise SystemExit("torch_peer: data format '%s' is not read here (idx, cifar10)" % src["format"])
    limit = src.get("limit", 0)
    return (x[:limit], y[:limit]) if limit else (x, y)


def normalizer(cfg, channels, device):
    n = cfg["data"].get("normalize", {})
    scale = float(n.get("scale", 1.0 / 255))
    mean = torch.tensor(n.get("mean", [0.0]), dtype=torch.float32, device=device)
    std = torch.tensor(n.get("std", [1.0]), dtype=torch.float32, device=device)
    return lambda xb: (xb.float() * scale - mean.view(1, -1, 1, 1)) / std.view(1, -1, 1, 1)


def augment(xb, pad, flip, fill, gen):
    """torchvision's RandomCrop(padding=pad) + RandomHorizontalFlip on normalized images (pad with the
    normalized black)."""
    B, C, H, W = xb.shape
    if pad:
        padded = fill.view(1, C, 1, 1).expand(B, C, H + 2 * pad, W + 2 * pad).clone()
        padded[:, :, pad:pad + H, pad:pad + W] = xb
        dy = torch.randint(0, 2 * pad + 1, (B,), device=xb.device, generator=gen)
        dx = torch.randint(0, 2 * pad + 1, (B,), device=xb.device, generator=gen)
        rows = (dy.view(B, 1) + torch.arange(H, device=xb.device)).view(B, 1, H, 1).expand(B, C, H, W + 2 * pad)
        xb = torch.gather(padded, 2, rows)
        cols = (dx.view(B, 1) + torch.arange(W, device=xb.device)).view(B, 1, 1, W).expand(B, C, H, W)
        xb = torch.gather(xb, 3, cols)
    if flip:
        m = torch.rand(B, device=xb.device, generator=gen) < 0.5
        xb = torch.where(m.view(B, 1, 1, 1), xb.flip(3), xb)
    return xb


# ---------------------------------------------------------------- the recipe

def optimizer_of(cfg, params):
    o = cfg["optimizer"]
    t = o["type"]
    if t == "sgd":
        return torch.optim.SGD(params, lr=o["lr"], momentum=o.get("momentum", 0), nesterov=o.get("nesterov", False),
                               weight_decay=o.get("weight_decay", 0), dampening=o.get("dampening", 0))
    if t in ("adam", "adamw"):
        cls = torch.optim.Adam if t == "adam" else torch.optim.AdamW
        return cls(params, lr=o["lr"], betas=(o.get("beta1", 0.9), o.get("beta2", 0.999)), eps=o.get("epsilon", 1e-7),
                   weight_decay=o.get("weight_decay", 0))
    raise SystemExit("torch_peer: optimizer '%s' is not translated here (sgd, adam, adamw)" % t)


def lr_at(cfg, t, steps_per_epoch, epochs):
    """lib/train/schedules.cc, step t counted from 1."""
    s, base = cfg.get("schedule", {"type": "constant"}), cfg["optimizer"]["lr"]
    total = steps_per_epoch * epochs
    warm = s.get("warmup_steps", 0) or s.get("warmup_epochs", 0) * steps_per_epoch
    e = (t - 1) // steps_per_epoch
    if s["type"] == "constant":
        lr = base
    elif s["type"] == "cosine":
        p = min(max((t - warm) / max(total - warm, 1), 0.0), 1.0)
        lr = s.get("min_lr", 0) + (base - s.get("min_lr", 0)) * 0.5 * (1 + math.cos(math.pi * p))
    elif s["type"] == "step":
        lr = base * s["gamma"] ** (e // s["step_size"])
    elif s["type"] == "exponential":
        lr = base * s["gamma"] ** e
    else:
        raise SystemExit("torch_peer: schedule '%s' is not translated here" % s["type"])
    return lr * t / warm if warm and t <= warm else lr


def loss_of(cfg, out, y):
    loss = cfg["loss"]
    kind = loss["type"] if isinstance(loss, dict) else loss
    ls = float(loss.get("label_smoothing", 0)) if isinstance(loss, dict) else 0.0
    logits = kind == "cross_entropy" or (kind == "sparse_categorical_crossentropy" and loss.get("from_logits"))
    if logits:
        return F.cross_entropy(out.float(), y, label_smoothing=ls)
    logp = out.float() if kind == "nll" else torch.log(out.float().clamp(1e-7, 1 - 1e-7))
    return F.nll_loss(logp, y) if ls == 0 else (1 - ls) * F.nll_loss(logp, y) - ls * logp.mean(1).mean()


def train(a):
    summary = summary_of(a.trainer, a.config, a.set)
    cfg = summary["config"]
    dev = torch.device(a.device)
    tf32, bf16 = a.math != "fp32", a.math == "bf16"
    torch.backends.cuda.matmul.allow_tf32 = tf32
    torch.backends.cudnn.allow_tf32 = tf32
    torch.backends.cudnn.benchmark = True
    seed = cfg["train"].get("seed", 1)
    torch.manual_seed(seed)
    base = os.path.dirname(os.path.abspath(a.config))
    shape = summary["input_shape"]
    xtr, ytr = read_source(cfg["data"]["train"], base, shape)
    xva, yva = read_source(cfg["data"]["validation"], base, shape)
    norm = normalizer(cfg, shape[0], dev)
    xtr, ytr = torch.from_numpy(np.array(xtr)).to(dev), torch.from_numpy(np.array(ytr)).to(dev)
    xva, yva = torch.from_numpy(np.array(xva)).to(dev), torch.from_numpy(np.array(yva)).to(dev)
    net = Net(summary).to(dev)
    if bf16 and len(shape) == 3:
        net = net.to(memory_format=torch.channels_last)
    opt = optimizer_of(cfg, net.parameters())
    d = cfg["data"]
    bs, epochs = d["batch_size"], a.epochs or cfg["train"]["epochs"]
    aug = d.get("augment", {})
    pad, flip = int(aug.get("crop_padding", 0)), aug.get("flip", "none") == "horizontal"
    fill = norm(torch.zeros(1, shape[0], 1, 1, device=dev)).view(-1)
    n = len(xtr)
    steps = (n // bs) if d.get("drop_last") else math.ceil(n / bs)
    gen = torch.Generator(device=dev)
    gen.manual_seed(seed)
    t = 0
    for epoch in range(1, epochs + 1):
        net.train()
        t0 = time.time()
        perm = torch.randperm(n, device=dev, generator=gen) if d.get("shuffle", True) else torch.arange(n, device=dev)
        total = 0.0
        for s in range(steps):
            idx = perm[s * bs:(s + 1) * bs]
            xb = norm(xtr[idx])
            if pad or flip:
                xb = augment(xb, pad, flip, fill, gen)
            t += 1
            for g in opt.param_groups:
                g["lr"] = lr_at(cfg, t, steps, epochs)
            opt.zero_grad(set_to_none=True)
            with torch.autocast(dev.type, dtype=torch.bfloat16, enabled=bf16):
                loss = loss_of(cfg, net(xb), ytr[idx])
            loss.backward()
            opt.step()
            total += float(loss.detach()) * len(idx)
        with torch.autocast(dev.type, dtype=torch.bfloat16, enabled=bf16):
            acc = evaluate(net, xva, yva, norm, bs)
        print("epoch %d/%d loss=%.4f val_accuracy=%.4f time=%.1fs" % (epoch, epochs, total / n, acc, time.time() - t0),
              flush=True)
    print(json.dumps({"config": a.config, "framework": "pytorch " + torch.__version__, "epochs": epochs,
                      "val_accuracy": acc}))


@torch.no_grad()
def evaluate(net, x, y, norm, bs):
    net.eval()
    correct = 0
    for s in range(0, len(x), bs):
        correct += int((net(norm(x[s:s + bs])).argmax(1) == y[s:s + bs]).sum())
    return correct / len(x)


# ---------------------------------------------------------------- export and the agreement check

def read_safetensors(path):
    raw = open(path, "rb").read()
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8:8 + n])
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        if info["dtype"] != "F32":
            raise SystemExit("torch_peer: %s: tensor %s is %s, not F32" % (path, name, info["dtype"]))
        b, e = info["data_offsets"]
        out[name] = np.frombuffer(raw, np.float32, count=(e - b) // 4, offset=8 + n + b).reshape(info["shape"])
    return out


def export(a):
    config = os.path.join(a.run, "config.yaml")
    summary = summary_of(a.trainer, config)
    cfg = summary["config"]
    net = Net(summary)
    tensors = read_safetensors(os.path.join(a.run, "model.safetensors"))
    state = net.state_dict()
    missing = [k for k in state if k not in tensors]
    extra = [k for k in tensors if k not in state]
    if missing or extra:
        raise SystemExit("torch_peer: names differ: missing %s, extra %s" % (missing[:5], extra[:5]))
    net.load_state_dict({k: torch.from_numpy(np.array(v)) for k, v in tensors.items()})
    out = a.out or os.path.join(a.run, "state_dict.pt")
    torch.save(net.state_dict(), out)
    shape = summary["input_shape"]
    x, y = read_source(cfg["data"]["validation"], os.path.dirname(os.path.abspath(config)), shape)
    x, y = x[:a.samples], y[:a.samples]
    with tempfile.TemporaryDirectory() as tmp:
        np.save(os.path.join(tmp, "x.npy"), np.ascontiguousarray(x))
        cmd = [a.trainer, "predict", a.run, "--input", os.path.join(tmp, "x.npy"), "--output",
               os.path.join(tmp, "p.npy"), "--device", a.device]
        p = subprocess.run(cmd, capture_output=True, text=True)
        if p.returncode != 0:
            raise SystemExit("torch_peer: %s failed: %s" % (" ".join(cmd), p.stderr.strip()))
        ours = np.load(os.path.join(tmp, "p.npy"))
    net.eval()
    norm = normalizer(cfg, shape[0], "cpu")
    with torch.no_grad():
        out_t = net(norm(torch.from_numpy(np.array(x))))
    last = summary["layers"][-1]["type"]
    probs = out_t if last == "softmax" else (out_t.exp() if last == "log_softmax" else F.softmax(out_t, 1))
    theirs = probs.numpy()
    diff = float(np.abs(ours - theirs).max())
    agree = float((ours.argmax(1) == theirs.argmax(1)).mean())
    res = {"run": a.run, "state_dict": out, "samples": int(len(x)), "max_abs_prob_diff": diff, "argmax_agreement": agree,
           "trainer_accuracy": float((ours.argmax(1) == y).mean()), "pytorch_accuracy": float((theirs.argmax(1) == y).mean())}
    print(json.dumps(res))
    return 0 if agree >= 0.999 and diff < 1e-3 else 1


# ---------------------------------------------------------------- bench

def bench(a):
    summary = summary_of(a.trainer, a.config, a.set)
    cfg = summary["config"]
    tf32, bf16 = a.math != "fp32", a.math == "bf16"
    torch.backends.cuda.matmul.allow_tf32 = tf32
    torch.backends.cudnn.allow_tf32 = tf32
    torch.backends.cudnn.benchmark = True
    torch.manual_seed(1)
    bs = a.batch_size or cfg["data"]["batch_size"]
    net = Net(summary).cuda()
    x = torch.randn([bs] + summary["input_shape"], device="cuda")
    y = torch.randint(0, cfg["data"]["num_classes"], (bs,), device="cuda")
    if bf16:
        net = net.to(memory_format=torch.channels_last)
        x = x.contiguous(memory_format=torch.channels_last)
    opt = optimizer_of(cfg, net.parameters())

    def step():
        opt.zero_grad(set_to_none=True)
        with torch.autocast("cuda", dtype=torch.bfloat16, enabled=bf16):
            out = net(x)
        loss_of(cfg, out, y).backward()
        opt.step()
    for _ in range(a.warmup):
        step()
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(a.steps):
        step()
    torch.cuda.synchronize()
    dt = time.perf_counter() - t0
    if a.profile:  # the kernels of a.profile steps, summed by name, per step (torch.profiler)
        from torch.profiler import profile, ProfilerActivity
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            for _ in range(a.profile):
                step()
            torch.cuda.synchronize()
        rows = [(e.key, e.count / a.profile, e.device_time_total / a.profile) for e in prof.key_averages()
                if e.device_time_total > 0]
        rows.sort(key=lambda r: -r[2])
        print("torch %s %s: %.1f us in kernels a step" % (a.config, a.math, sum(r[2] for r in rows)))
        for name, n, us in rows[:a.top]:
            print("  %8.1f us  x%-3g %s" % (us, n, name[:110]))
    print(json.dumps({"config": a.config, "math": a.math, "batch": bs, "params": sum(p.numel() for p in net.parameters()),
                      "steps_per_s": round(a.steps / dt, 1), "gpu": torch.cuda.get_device_name(),
                      "peak_mem_mib": round(torch.cuda.max_memory_allocated() / 2**20, 1)}))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trainer", default="build/trainer")
    sub = ap.add_subparsers(dest="verb", required=True)
    t = sub.add_parser("train")
    t.add_argument("config")
    t.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    t.add_argument("--math", default="fp32", choices=["fp32", "tf32", "bf16"])
    t.add_argument("--epochs", type=int, default=0)
    t.add_argument("--set", action="append", default=[])
    e = sub.add_parser("export")
    e.add_argument("run")
    e.add_argument("--out", default="")
    e.add_argument("--samples", type=int, default=2000)
    e.add_argument("--device", default="cpu", help="device of `trainer predict`")
    b = sub.add_parser("bench")
    b.add_argument("config")
    b.add_argument("--math", default="fp32", choices=["fp32", "tf32", "bf16"])
    b.add_argument("--steps", type=int, default=200)
    b.add_argument("--warmup", type=int, default=30)
    b.add_argument("--batch-size", type=int, default=0)
    b.add_argument("--set", action="append", default=[])
    b.add_argument("--profile", type=int, default=0, help="also profile this many steps and print the top kernels")
    b.add_argument("--top", type=int, default=25, help="--profile: kernels to print")
    a = ap.parse_args()
    return {"train": train, "export": export, "bench": bench}[a.verb](a) or 0


if __name__ == "__main__":
    sys.exit(main())

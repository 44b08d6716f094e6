#!/usr/bin/env python3
"""The PyTorch twin of configs/char_lm.yaml, for parity and speed: the same GPT (pre-norm blocks,
GELU tanh, dropout 0.2, no weight tying, PyTorch's default initialization), the same windows of
the same text (context 256, stride 256, shuffled each epoch), batch 64, AdamW (0.9, 0.99, weight
decay 0.1 on every tensor, as trainer applies it), 100 warm-up steps then a cosine to 1e-4,
gradients clipped to norm 1, bf16 autocast. Attention is F.scaled_dot_product_attention (flash on
a GPU); --compile adds torch.compile, and the AdamW is fused on a GPU.

Prints one line per epoch: the mean training loss, the validation loss over every validation
window, and tokens/s, as `trainer fit` does.

  python3 scripts/char_lm_torch.py --train data/linux_doc/train.txt --val data/linux_doc/val.txt

The same network at GPT-2 small's size on random tokens, for configs/gpt2_small.yaml's speed
(nanoGPT's best: bf16, flash attention, fused AdamW, torch.compile):

  python3 scripts/char_lm_torch.py --gpt2-small --synthetic 2000000 --steps 60 --compile

--gpt2-small ties lm_head to wte, as GPT-2 (and configs/gpt2_small.yaml) does. Under torchrun it
runs DistributedDataParallel, --batch windows per GPU (weak scaling), and prints the global
tokens/s from rank 0:

  torchrun --nproc_per_node 4 scripts/char_lm_torch.py --gpt2-small --synthetic 4000000 --steps 60 --compile
"""
import argparse
import math
import os
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F


class Block(nn.Module):
    def __init__(self, d, heads, dropout):
        super().__init__()
        self.ln_1 = nn.LayerNorm(d)
        self.c_attn = nn.Linear(d, 3 * d)
        self.c_proj = nn.Linear(d, d)
        self.ln_2 = nn.LayerNorm(d)
        self.c_fc = nn.Linear(d, 4 * d)
        self.mlp_proj = nn.Linear(4 * d, d)
        self.heads, self.dropout = heads, dropout

    def forward(self, x):
        B, T, D = x.shape
        q, k, v = self.c_attn(self.ln_1(x)).split(D, dim=2)
        q, k, v = (t.view(B, T, self.heads, D // self.heads).transpose(1, 2) for t in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        y = y.transpose(1, 2).contiguous().view(B, T, D)
        x = x + F.dropout(self.c_proj(y), self.dropout, self.training)
        h = F.gelu(self.c_fc(self.ln_2(x)), approximate="tanh")
        return x + F.dropout(self.mlp_proj(h), self.dropout, self.training)


class GPT(nn.Module):
    def __init__(self, vocab, context, d, layers, heads, dropout, tie=False):
        super().__init__()
        self.wte = nn.Embedding(vocab, d)
        self.wpe = nn.Parameter(torch.zeros(context, d))  # trainer's position_embedding starts at 0
        self.h = nn.ModuleList(Block(d, heads, dropout) for _ in range(layers))
        self.ln_f = nn.LayerNorm(d)
        self.lm_head = nn.Linear(d, vocab, bias=False)
        if tie:
            self.lm_head.weight = self.wte.weight
        self.dropout = dropout

    def forward(self, idx):
        x = F.dropout(self.wte(idx) + self.wpe[: idx.shape[1]], self.dropout, self.training)
        for b in self.h:
            x = b(x)
        return self.lm_head(self.ln_f(x))


def windows(path, T, data=None):
    if data is None:
        data = np.frombuffer(open(path, "rb").read(), dtype=np.uint8)
    n = (len(data) - T - 1) // T + 1
    idx = np.arange(n)[:, None] * T + np.arange(T)[None, :]
    return torch.from_numpy(data[idx].astype(np.int64)), torch.from_numpy(data[idx + 1].astype(np.int64))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--train", default="data/linux_doc/train.txt")
    ap.add_argument("--val", default="data/linux_doc/val.txt")
    ap.add_argument("--epochs", type=int, default=4)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--context", type=int, default=256)
    ap.add_argument("--layers", type=int, default=6)
    ap.add_argument("--width", type=int, default=384)
    ap.add_argument("--heads", type=int, default=6)
    ap.add_argument("--dropout", type=float, default=0.2)
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--min-lr", type=float, default=1e-4)
    ap.add_argument("--warmup", type=int, default=100)
    ap.add_argument("--limit", type=int, default=0, help="training windows (0: all)")
    ap.add_argument("--steps", type=int, default=0, help="stop after this many steps (speed runs)")
    ap.add_argument("--compile", action="store_true")
    ap.add_argument("--vocab", type=int, default=256)
    ap.add_argument("--synthetic", type=int, default=0, help="train on this many random tokens instead of --train")
    ap.add_argument("--gpt2-small", action="store_true",
                    help="GPT-2 small: vocab 50257, context 1024, 12 x 768, 12 heads, batch 8, no dropout")
    ap.add_argument("--no-tie", action="store_true", help="--gpt2-small with an lm_head of its own")
    ap.add_argument("--seed", type=int, default=1337)
    ap.add_argument("--threads", type=int, default=0)
    ap.add_argument("--device", default="", help="cpu or cuda (default: cuda when there is one)")
    a = ap.parse_args()
    if a.gpt2_small:
        a.vocab, a.context, a.layers, a.width, a.heads, a.batch, a.dropout = 50257, 1024, 12, 768, 12, 8, 0.0
    torch.manual_seed(a.seed)
    if a.threads:
        torch.set_num_threads(a.threads)
    dev = a.device or ("cuda" if torch.cuda.is_available() else "cpu")
    world, rank = int(os.environ.get("WORLD_SIZE", "1")), int(os.environ.get("RANK", "0"))
    if world > 1:  # torchrun: one process a GPU
        torch.distributed.init_process_group("nccl")
        local = int(os.environ["LOCAL_RANK"])
        torch.cuda.set_device(local)
        dev = f"cuda:{local}"
    kind = "cuda" if dev.startswith("cuda") else "cpu"
    say = print if rank == 0 else (lambda *args, **kw: None)
    if a.synthetic:
        rng = np.random.default_rng(a.seed)
        xt, yt = windows(None, a.context, rng.integers(0, a.vocab, a.synthetic).astype(np.uint16))
        xv, yv = xt[: 4 * a.batch], yt[: 4 * a.batch]
    else:
        xt, yt = windows(a.train, a.context)
        xv, yv = windows(a.val, a.context)
    if a.limit:
        xt, yt = xt[: a.limit], yt[: a.limit]
    model = GPT(a.vocab, a.context, a.width, a.layers, a.heads, a.dropout, tie=a.gpt2_small and not a.no_tie).to(dev)
    say(f"char_lm_torch: {sum(p.numel() for p in model.parameters()):,} parameters, "
        f"{len(xt)} training windows, {len(xv)} validation windows, {dev} x {world}")
    opt = torch.optim.AdamW(model.parameters(), lr=a.lr, betas=(0.9, 0.99), weight_decay=0.1,
                            fused=kind == "cuda")
    wrapped = model
    if world > 1:
        wrapped = torch.nn.parallel.DistributedDataParallel(model, device_ids=[torch.cuda.current_device()])
    fwd = torch.compile(wrapped) if a.compile else wrapped
    steps_per_epoch = (len(xt) + a.batch * world - 1) // (a.batch * world)
    total = steps_per_epoch * a.epochs

    def lr_at(t):  # trainer's cosine (lib/train/schedules.cc), t from 1
        p = min(max((t - a.warmup) / max(total - a.warmup, 1), 0.0), 1.0)
        lr = a.min_lr + (a.lr - a.min_lr) * 0.5 * (1 + math.cos(math.pi * p))
        return lr * t / a.warmup if a.warmup and t <= a.warmup else lr

    amp = torch.autocast(kind, dtype=torch.bfloat16)
    t = 0
    for epoch in range(1, a.epochs + 1):
        model.train()
        perm = torch.randperm(len(xt))
        total_loss, n, t0 = 0.0, 0, time.time()
        losses = []
        warm = min(20, a.steps // 2) if a.steps else -1  # speed runs: time the steps after these
        t_warm, n_warm = None, 0
        for s in range(steps_per_epoch):
            if s == warm:
                if kind == "cuda":
                    torch.cuda.synchronize()
                t_warm, n_warm = time.time(), len(losses)
            first = (s * world + rank) * a.batch
            rows = perm[first:first + a.batch]
            x, y = xt[rows].to(dev, non_blocking=True), yt[rows].to(dev, non_blocking=True)
            t += 1
            for g in opt.param_groups:
                g["lr"] = lr_at(t)
            with amp:
                loss = F.cross_entropy(fwd(x).float().view(-1, a.vocab), y.view(-1))
            opt.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            losses.append(loss.detach() * len(rows))
            n += len(rows)
            if a.steps and t >= a.steps:
                break
        total_loss = float(torch.stack(losses).sum()) / n
        if kind == "cuda":
            torch.cuda.synchronize()
        secs = time.time() - t0
        if t_warm is not None:
            steady = (time.time() - t_warm) / max(len(losses) - n_warm, 1)
            say(f"steady: {steady * 1e3:.2f} ms/step, {a.batch * world * a.context / steady:,.0f} tokens/s "
                f"over the {len(losses) - n_warm} steps after the first {n_warm} ({world} x batch {a.batch})",
                flush=True)
        model.eval()
        vl, vn = 0.0, 0
        with torch.no_grad(), amp:
            for s in range(0, len(xv), a.batch):
                x, y = xv[s:s + a.batch].to(dev), yv[s:s + a.batch].to(dev)
                vl += float(F.cross_entropy(fwd(x).float().view(-1, a.vocab), y.view(-1))) * len(x)
                vn += len(x)
        say(f"epoch {epoch}/{a.epochs} loss={total_loss:.4f} val_loss={vl / vn:.4f} "
              f"val_perplexity={math.exp(vl / vn):.4f} time={secs:.2f}s "
            f"({secs / max(len(losses), 1) * 1e3:.2f} ms/step, {n * world * a.context / secs:,.0f} tokens/s)", flush=True)
        if a.steps and t >= a.steps:
            break
    if kind == "cuda":
        say(f"char_lm_torch: peak memory {torch.cuda.max_memory_allocated() / 2**20:.0f} MiB")
    if world > 1:
        torch.distributed.destroy_process_group()


if __name__ == "__main__":
    main()

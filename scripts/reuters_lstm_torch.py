#!/usr/bin/env python3
"""The PyTorch twin of configs/reuters_lstm.yaml, for speed (and parity where the data exists):
Embedding(30982, 128) -> nn.LSTM(128, 128, batch_first) -> the last h -> Dropout(0.2) ->
Linear(128, 46), Adam (lr 1e-3), gradients clipped to norm 1, batch 32 of 300 tokens. nn.LSTM runs
cuDNN's RNN on a GPU. --cell gru and --bidirectional change the recurrent layer as the config's
keys do (trainer: --set model.layers.1.type=gru, --set model.layers.1.bidirectional=true).

Speed, on random tokens on the device (ms/step after warm-up, peak memory):
  python3 scripts/reuters_lstm_torch.py --steps 200 [--amp bf16] [--compile]
  python3 scripts/reuters_lstm_torch.py --device cpu --threads 16 --steps 20
Parity, on the sequences files of scripts/reuters_to_files.py (label, then token ids per line;
padded and truncated at the front to --maxlen as the sequences reader does), one line per epoch:
  python3 scripts/reuters_lstm_torch.py --data data/reuters --epochs 10
and configs/doc_topics_lstm.yaml's twin (scripts/make_doc_topics.py's passages of linux-doc):
  python3 scripts/reuters_lstm_torch.py --data data/doc_topics --vocab 257 --width 64 --classes 8
"""
import argparse
import json
import time

import torch
import torch.nn as nn


class Net(nn.Module):
    def __init__(s, vocab, width, units, classes, cell, bidirectional):
        super().__init__()
        s.emb = nn.Embedding(vocab, width)
        rnn = nn.LSTM if cell == "lstm" else nn.GRU
        s.rnn = rnn(width, units, batch_first=True, bidirectional=bidirectional)
        s.drop = nn.Dropout(0.2)
        s.fc = nn.Linear(units * (2 if bidirectional else 1), classes)

    def forward(s, x):
        _, h = s.rnn(s.emb(x))
        h = h[0] if isinstance(h, tuple) else h  # (dirs, B, H): the last state of each direction
        return s.fc(s.drop(torch.cat(list(h), dim=1)))


def read_sequences(path, maxlen):
    xs, ys = [], []
    with open(path) as f:
        for line in f:
            v = [int(t) for t in line.split()]
            if not v:
                continue
            ids = v[1:][-maxlen:]
            xs.append([0] * (maxlen - len(ids)) + ids)
            ys.append(v[0])
    return torch.tensor(xs), torch.tensor(ys)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--maxlen", type=int, default=300)
    p.add_argument("--vocab", type=int, default=30982)
    p.add_argument("--units", type=int, default=128)
    p.add_argument("--width", type=int, default=128, help="the embedding's size")
    p.add_argument("--classes", type=int, default=46)
    p.add_argument("--cell", choices=["lstm", "gru"], default="lstm")
    p.add_argument("--bidirectional", action="store_true")
    p.add_argument("--steps", type=int, default=200)
    p.add_argument("--warmup", type=int, default=20)
    p.add_argument("--amp", choices=["none", "bf16"], default="none")
    p.add_argument("--compile", action="store_true")
    p.add_argument("--data", help="a folder with train.txt and test.txt (sequences format)")
    p.add_argument("--epochs", type=int, default=10)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--device", choices=["auto", "cpu", "cuda"], default="auto")
    p.add_argument("--threads", type=int, default=0, help="CPU threads (torch.set_num_threads); 0: PyTorch's default")
    a = p.parse_args()
    torch.manual_seed(a.seed)
    if a.threads:
        torch.set_num_threads(a.threads)
    dev = a.device if a.device != "auto" else "cuda" if torch.cuda.is_available() else "cpu"
    net = Net(a.vocab, a.width, a.units, a.classes, a.cell, a.bidirectional).to(dev)
    opt = torch.optim.Adam(net.parameters(), lr=1e-3)
    step_fn = net if not a.compile else torch.compile(net)
    loss_fn = nn.CrossEntropyLoss()

    def step(x, y):
        with torch.autocast(dev, dtype=torch.bfloat16, enabled=a.amp == "bf16"):
            loss = loss_fn(step_fn(x), y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(net.parameters(), 1.0)
        opt.step()
        return loss

    if not a.data:
        x = torch.randint(0, a.vocab, (a.batch, a.maxlen), device=dev)
        y = torch.randint(0, a.classes, (a.batch,), device=dev)
        for _ in range(a.warmup):
            step(x, y)
        if dev == "cuda":
            torch.cuda.synchronize()
            torch.cuda.reset_peak_memory_stats()
        t0 = time.perf_counter()
        for _ in range(a.steps):
            step(x, y)
        if dev == "cuda":
            torch.cuda.synchronize()
        ms = (time.perf_counter() - t0) / a.steps * 1e3
        peak = torch.cuda.max_memory_allocated() / 2**20 if dev == "cuda" else 0
        print(json.dumps({"workload": "reuters_%s%s" % (a.cell, "_bi" if a.bidirectional else ""),
                          "amp": a.amp, "compile": a.compile, "batch": a.batch, "ms_per_step": round(ms, 3),
                          "steps_per_s": round(1e3 / ms, 1), "peak_mib": round(peak, 1),
                          "torch": torch.__version__,
                          "device": torch.cuda.get_device_name() if dev == "cuda" else "cpu, %d threads" % torch.get_num_threads()}))
        return
    xt, yt = read_sequences(a.data + "/train.txt", a.maxlen)
    xv, yv = read_sequences(a.data + "/test.txt", a.maxlen)
    for epoch in range(1, a.epochs + 1):
        net.train()
        perm = torch.randperm(len(xt))
        total, n = 0.0, 0
        for i in range(0, len(xt), a.batch):
            idx = perm[i:i + a.batch]
            loss = step(xt[idx].to(dev), yt[idx].to(dev))
            total += loss.item() * len(idx)
            n += len(idx)
        net.eval()
        correct, vloss = 0, 0.0
        with torch.no_grad():
            for i in range(0, len(xv), 256):
                out = net(xv[i:i + 256].to(dev))
                vloss += loss_fn(out, yv[i:i + 256].to(dev)).item() * len(out)
                correct += (out.argmax(1).cpu() == yv[i:i + 256]).sum().item()
        print("epoch %d loss=%.4f val_loss=%.4f val_accuracy=%.4f" % (epoch, total / n, vloss / len(xv), correct / len(xv)))


if __name__ == "__main__":
    main()

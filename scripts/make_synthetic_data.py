#!/usr/bin/env python3
"""Writes synthetic data in the real on-disk formats, for timing and smoke tests where the real
datasets are not at hand (standard library only):

  data/synth/cifar-10-batches-bin/data_batch_1.bin, test_batch.bin   CIFAR-10 binary records
  data/synth/reuters/train.txt, test.txt                             label then token ids per line

  python3 scripts/make_synthetic_data.py [--cifar N] [--reuters N] [--out data/synth]
Sizes default to the real training sets (50,000 and 8,982); test sets get 10,000 and 2,246.
"""
import argparse, os, random

def cifar(path, n, rng):
    with open(path, "wb") as f:
        for _ in range(n):
            f.write(bytes([rng.randrange(10)]))
            f.write(os.urandom(3072))

def reuters(path, n, rng, vocab=30982, maxlen=300):
    with open(path, "w") as f:
        for _ in range(n):
            length = rng.randrange(20, maxlen + 50)
            f.write(" ".join([str(rng.randrange(46))] + [str(rng.randrange(1, vocab)) for _ in range(length)]) + "\n")

if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--cifar", type=int, default=50000)
    ap.add_argument("--reuters", type=int, default=8982)
    ap.add_argument("--out", default="data/synth")
    a = ap.parse_args()
    rng = random.Random(1)
    os.makedirs(f"{a.out}/cifar-10-batches-bin", exist_ok=True)
    os.makedirs(f"{a.out}/reuters", exist_ok=True)
    cifar(f"{a.out}/cifar-10-batches-bin/data_batch_1.bin", a.cifar, rng)
    cifar(f"{a.out}/cifar-10-batches-bin/test_batch.bin", max(a.cifar // 5, 1), rng)
    reuters(f"{a.out}/reuters/train.txt", a.reuters, rng)
    reuters(f"{a.out}/reuters/test.txt", max(a.reuters // 4, 1), rng)
    print(f"wrote {a.out}")

#!/usr/bin/env python3
"""Convert the Keras Reuters newswire arrays to trainer's `sequences` text format.

Output: one article per line, "label id id id ...", whitespace-separated non-negative integers
(datasets/sequence_reader.h); trainer pads/truncates to data.*.maxlen at load time, like Keras'
pad_sequences. Writes OUT/train.txt and OUT/test.txt (configs/reuters_conv1d.yaml reads them
from data/reuters/).

Needs only numpy (no TensorFlow/Keras). Two kinds of input, told apart by their keys:

  1. Keras' cached raw file (~/.keras/datasets/reuters.npz, keys x and y): the script repeats
     keras.datasets.reuters.load_data() with its defaults: shuffle with
     np.random.RandomState(113), prepend start_char 1, shift ids by index_from 3, map the
     largest id to oov_char 2 (num_words=None keeps ids < max id, a Keras quirk), then the
     first 80% are train and the rest test (8,982 / 2,246 articles, ids < 30982).
         python3 scripts/reuters_to_files.py ~/.keras/datasets/reuters.npz --out data/reuters
  2. Arrays already split by load_data and saved with
         np.savez("reuters_split.npz", x_train=x_train, y_train=y_train, x_test=x_test, y_test=y_test)
     (x_*: object arrays of int lists, y_*: int labels), written out unchanged:
         python3 scripts/reuters_to_files.py reuters_split.npz --out data/reuters

The ragged arrays are pickled inside the .npz, so loading uses allow_pickle=True: convert only
files you trust. From Python, write_sequences(path, xs, ys) writes any lists of lists.
"""
import argparse
import os
import sys


def write_sequences(path, xs, ys):
    """Writes one "label id id ..." line per sample; returns the largest id written (or -1)."""
    if len(xs) != len(ys):
        raise ValueError(f"{path}: {len(xs)} sequences but {len(ys)} labels")
    largest = -1
    with open(path, "w") as f:
        for i, (x, y) in enumerate(zip(xs, ys)):
            ids = [int(t) for t in x]
            if int(y) < 0 or any(t < 0 for t in ids):
                raise ValueError(f"{path}: sample {i} has a negative label or token id")
            if ids:
                largest = max(largest, max(ids))
            f.write(" ".join([str(int(y))] + [str(t) for t in ids]) + "\n")
    return largest


def keras_load_data(xs, labels, shuffled_indices, test_split=0.2, start_char=1, oov_char=2,
                    index_from=3):
    """keras.datasets.reuters.load_data's processing (num_words=None, skip_top=0, maxlen=None)
    on the raw sequences, given the permutation RandomState(113).shuffle produced."""
    xs = [xs[i] for i in shuffled_indices]
    labels = [int(labels[i]) for i in shuffled_indices]
    xs = [[start_char] + [int(w) + index_from for w in x] for x in xs]
    num_words = max(max(x) for x in xs)
    xs = [[w if 0 <= w < num_words else oov_char for w in x] for x in xs]
    idx = int(len(xs) * (1 - test_split))
    return (xs[:idx], labels[:idx]), (xs[idx:], labels[idx:])


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("npz", help="reuters.npz (keys x, y) or a split .npz (x_train, y_train, x_test, y_test)")
    p.add_argument("--out", default="data/reuters", help="output directory [data/reuters]")
    p.add_argument("--seed", type=int, default=113, help="load_data's shuffle seed for a raw file [113]")
    p.add_argument("--test-split", type=float, default=0.2, help="load_data's test fraction for a raw file [0.2]")
    a = p.parse_args(argv)
    try:
        import numpy as np
    except ImportError:
        sys.exit("reuters_to_files: numpy is required (apt-get install python3-numpy, or pip install numpy)")

    with np.load(a.npz, allow_pickle=True) as f:
        keys = set(f.files)
        if {"x_train", "y_train", "x_test", "y_test"} <= keys:
            train = (list(f["x_train"]), list(f["y_train"]))
            test = (list(f["x_test"]), list(f["y_test"]))
        elif {"x", "y"} <= keys:
            xs, labels = f["x"], f["y"]
            indices = np.arange(len(xs))
            np.random.RandomState(a.seed).shuffle(indices)
            train, test = keras_load_data(list(xs), list(labels), list(indices), a.test_split)
        else:
            sys.exit(f"reuters_to_files: {a.npz} has keys {sorted(keys)}; expected x, y or "
                     "x_train, y_train, x_test, y_test")

    os.makedirs(a.out, exist_ok=True)
    for name, (xs, ys) in (("train", train), ("test", test)):
        path = os.path.join(a.out, name + ".txt")
        largest = write_sequences(path, xs, ys)
        print(f"{path}: {len(xs)} sequences, largest token id {largest}, "
              f"{len(set(int(y) for y in ys))} classes")
    print("embedding input_dim must exceed the largest token id (configs/reuters_conv1d.yaml: 30982)")


if __name__ == "__main__":
    main()

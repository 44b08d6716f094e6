#!/usr/bin/env python3
"""A text-classification set from real prose Debian ships: passages of the Linux kernel's
Documentation tree (Debian's linux-doc package), labelled with the part of the tree they come
from, in the sequences format (one line a passage: the label, then its bytes as token ids 1..256;
0 stays the padding id). For configs/doc_topics_lstm.yaml and its PyTorch twin
(scripts/reuters_lstm_torch.py --data), where Reuters (reuters.npz) is not in Debian.

Classes, in this order: admin-guide, filesystems, networking, driver-api, userspace-api, trace,
virt, process. Each .rst file of a class is cut into passages of --length bytes (whitespace
collapsed); whole files go to the test set (every --test-every-th file of a class, in sorted
path order), so no test passage is a neighbour of a training one. At most --per-class training
passages a class, taken evenly over its files.

  python3 scripts/make_doc_topics.py --out data/doc_topics
  -> data/doc_topics/train.txt, data/doc_topics/test.txt, data/doc_topics/classes.txt
"""
import argparse
import os
import re

from make_text_corpus import read_text  # this folder's: a .rst or .rst.gz file as text

CLASSES = ["admin-guide", "filesystems", "networking", "driver-api", "userspace-api", "trace", "virt", "process"]


def passages(text, length):
    data = re.sub(r"\s+", " ", text).strip().encode("utf-8")
    return [data[i:i + length] for i in range(0, len(data) - length + 1, length)]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--src", default="/usr/share/doc/linux-doc/Documentation")
    ap.add_argument("--out", default="data/doc_topics")
    ap.add_argument("--length", type=int, default=300, help="bytes a passage")
    ap.add_argument("--test-every", type=int, default=5, help="every Nth file of a class goes to the test set")
    ap.add_argument("--per-class", type=int, default=1500, help="training passages a class, at most")
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    train, test = [], []
    for label, name in enumerate(CLASSES):
        files = []
        for root, _, names in os.walk(os.path.join(a.src, name), followlinks=True):
            files += [os.path.join(root, n) for n in names if n.endswith(".rst") or n.endswith(".rst.gz")]
        files.sort()
        tr, te = [], []
        for i, path in enumerate(files):
            (te if i % a.test_every == a.test_every - 1 else tr).extend(passages(read_text(path), a.length))
        step = max(1, len(tr) // a.per_class)
        tr = tr[::step][:a.per_class]
        te = te[::max(1, len(te) // (a.per_class // 4))][:a.per_class // 4]
        train += [(label, p) for p in tr]
        test += [(label, p) for p in te]
        print("%-14s %5d train, %4d test passages (%d files)" % (name, len(tr), len(te), len(files)))
    for path, rows in (("train.txt", train), ("test.txt", test)):
        with open(os.path.join(a.out, path), "w") as f:
            for label, p in rows:
                f.write(str(label) + " " + " ".join(str(b + 1) for b in p) + "\n")
    with open(os.path.join(a.out, "classes.txt"), "w") as f:
        f.write("\n".join(CLASSES) + "\n")
    print("%d training and %d test passages in %s" % (len(train), len(test), a.out))


if __name__ == "__main__":
    main()

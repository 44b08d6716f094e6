#!/usr/bin/env python3
"""English prose for the character-level language model (configs/char_lm.yaml): the Linux kernel's
Documentation tree that Debian's linux-doc package installs, as UTF-8 text.

Every .rst file (gzipped as Debian ships them) outside translations/, in sorted path order, each
followed by a blank line. Whole files go to validation (every --val-every-th file), so no
validation text is a neighbour of training text.

  python3 scripts/make_text_corpus.py --out data/linux_doc
  -> data/linux_doc/train.txt, data/linux_doc/val.txt
"""
import argparse
import gzip
import os
import sys


def read_text(path):
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rb") as f:
        return f.read().decode("utf-8", errors="replace").replace("\r\n", "\n")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--src", default="/usr/share/doc/linux-doc/Documentation")
    ap.add_argument("--out", default="data/linux_doc")
    ap.add_argument("--val-every", type=int, default=20, help="every Nth file goes to validation")
    ap.add_argument("--max-mb", type=float, default=0, help="stop after this many MB of training text (0: all)")
    a = ap.parse_args()
    if not os.path.isdir(a.src):
        sys.exit(f"make_text_corpus: {a.src} is missing: install Debian's linux-doc package "
                 "(sudo apt-get install linux-doc)")
    files = []
    for root, dirs, names in os.walk(a.src):
        dirs[:] = sorted(d for d in dirs if d != "translations")
        files += [os.path.join(root, n) for n in names if n.endswith(".rst") or n.endswith(".rst.gz")]
    files.sort()
    os.makedirs(a.out, exist_ok=True)
    sizes = {"train": 0, "val": 0}
    counts = {"train": 0, "val": 0}
    with open(os.path.join(a.out, "train.txt"), "w", encoding="utf-8") as train, \
            open(os.path.join(a.out, "val.txt"), "w", encoding="utf-8") as val:
        for i, path in enumerate(files):
            part = "val" if i % a.val_every == a.val_every - 1 else "train"
            if part == "train" and a.max_mb and sizes["train"] > a.max_mb * 1e6:
                continue
            text = read_text(path).strip("\n") + "\n\n"
            (val if part == "val" else train).write(text)
            sizes[part] += len(text.encode("utf-8"))
            counts[part] += 1
    for part in ("train", "val"):
        print(f"make_text_corpus: {part}: {counts[part]} files, {sizes[part] / 1e6:.1f} MB -> "
              f"{os.path.join(a.out, part + '.txt')}")


if __name__ == "__main__":
    main()

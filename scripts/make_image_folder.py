#!/usr/bin/env python3
"""Writes Fashion-MNIST (the IDX files) as folders of PNG images, one subfolder per class, as
format image_folder reads them (and torchvision's ImageFolder, Keras' image_dataset_from_directory):

  OUT/train/<class>/<index>.png    60,000 images (or --per-class of each class)
  OUT/test/<class>/<index>.png     10,000 images
  OUT/jpeg/{train,test}/...        with --jpeg: the same images as JPEG (quality 95), when
                                   python3-pil is installed; without it the script says so and
                                   writes only the PNGs

<index> is the image's position in the IDX file (zero-padded), so a file names its source row.
Class folders are named as configs/fashion_mnist_folder.yaml's data.class_names ("/" written as
"_": T-shirt_top). The PNGs are 8-bit gray, written with zlib (standard library only).

  python3 scripts/make_image_folder.py --out data/fashion_mnist_folder
  python3 scripts/make_image_folder.py --out /tmp/fm --per-class 50 --splits train
"""
import argparse, gzip, os, struct, sys, zlib

CLASSES = ["T-shirt_top", "Trouser", "Pullover", "Dress", "Coat", "Sandal", "Shirt", "Sneaker", "Bag",
           "Ankle boot"]
FILES = {"train": ("train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz"),
         "test": ("t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz")}


def read_idx(path, dims):
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rb") as f:
        data = f.read()
    magic = struct.unpack(">I", data[:4])[0]
    if magic != 0x800 + dims:
        sys.exit("%s: not an IDX file of %d dimensions (magic 0x%x)" % (path, dims, magic))
    shape = struct.unpack(">" + "I" * dims, data[4:4 + 4 * dims])
    return shape, data[4 + 4 * dims:]


def png_gray8(width, height, pixels):
    def chunk(kind, body):
        return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body) & 0xFFFFFFFF)
    raw = b"".join(b"\0" + pixels[y * width:(y + 1) * width] for y in range(height))
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0)) +
            chunk(b"IDAT", zlib.compress(raw, 6)) + chunk(b"IEND", b""))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--source", default="/usr/share/datasets/fashion-mnist",
                    help="folder of the IDX files (Debian: dataset-fashion-mnist)")
    ap.add_argument("--out", required=True, help="the folder to write (train/, test/, jpeg/ inside)")
    ap.add_argument("--per-class", type=int, default=0, help="the first N images of each class (0: all)")
    ap.add_argument("--splits", default="train,test", help="which of train,test to write")
    ap.add_argument("--jpeg", action="store_true", help="also write a JPEG copy under OUT/jpeg (needs python3-pil)")
    a = ap.parse_args()
    pil = None
    if a.jpeg:
        try:
            from PIL import Image as pil
        except ImportError:
            print("make_image_folder: python3-pil is not installed: no JPEG copy written (apt-get install "
                  "python3-pil)", file=sys.stderr)
    for split in [s for s in a.splits.split(",") if s]:
        if split not in FILES:
            sys.exit("--splits: %s is not one of train, test" % split)
        (n, rows, cols), pixels = read_idx(os.path.join(a.source, FILES[split][0]), 3)
        (n_labels,), labels = read_idx(os.path.join(a.source, FILES[split][1]), 1)
        if n != n_labels:
            sys.exit("%s: %d images but %d labels" % (split, n, n_labels))
        roots = [os.path.join(a.out, split)] + ([os.path.join(a.out, "jpeg", split)] if pil else [])
        for root in roots:
            for name in CLASSES:
                os.makedirs(os.path.join(root, name), exist_ok=True)
        counts = [0] * len(CLASSES)
        written = 0
        size = rows * cols
        for i in range(n):
            c = labels[i]
            if a.per_class and counts[c] >= a.per_class:
                continue
            counts[c] += 1
            img = pixels[i * size:(i + 1) * size]
            stem = "%05d" % i
            with open(os.path.join(roots[0], CLASSES[c], stem + ".png"), "wb") as f:
                f.write(png_gray8(cols, rows, img))
            if pil:
                pil.frombytes("L", (cols, rows), img).save(os.path.join(roots[1], CLASSES[c], stem + ".jpg"),
                                                          quality=95)
            written += 1
        print("make_image_folder: %s: %d images in %d classes -> %s%s" %
              (split, written, len(CLASSES), roots[0], " (and JPEG in %s)" % roots[1] if pil else ""))


if __name__ == "__main__":
    main()

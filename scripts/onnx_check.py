#!/usr/bin/env python3
"""The Python half of scripts/onnx_check.sh (Debian's python3-onnx and python3-numpy; run it with
/usr/bin/python3, whose packages those are).

  onnx_check.py check MODEL.onnx
      onnx.checker.check_model(full_check=True) and onnx.shape_inference.infer_shapes(strict_mode=True);
      prints the onnx version, the opset and the graph's inputs and outputs.
  onnx_check.py inputs RUN OUT.npy [--samples N] [--seed S]
      Test inputs for the run's model as the data stores them (what the exported graph takes):
      OUT.npy for ONNX Runtime, and on stdout the --input to give `trainer predict RUN` for the same
      samples (OUT.npy itself, the CSV file, or an image list OUT.list.csv), chosen by the run's
      data.train.format:
        idx           the first N images of data.validation's (else data.train's) IDX file, uint8
        image_folder  the first N PNGs of data.validation's folder (sorted), decoded here, uint8;
                      predict gets them as an image list in the same order
        csv           every row of data.train's file (its columns as the config reads them), float32;
                      predict gets the file itself
        random, disc, sequences (data Debian does not ship, replaced by generated data)
                      token ids for a model that starts with an embedding (integers in [0, input_dim)
                      and, in the first rows, ids outside it and fractions, which the graph must clamp
                      as the kernels do); pixel bytes 0..255 for images (C, H, W); else N(0, 1) floats
  onnx_check.py compare RUN PREDICTED ORT.npy
      PREDICTED: predict's --output (.npy, or .csv whose float columns follow an optional file
      column); prints one JSON line: samples, the largest absolute difference, the largest relative
      one (to each value, at least 1e-3) and the agreement of
      the decisions: the arg-max class (classification), every label's probability > 0.5 (the
      run's loss is binary_cross_entropy), or null (regression).
"""
import argparse, csv, gzip, json, os, struct, sys, zlib

try:
    import numpy as np
except ModuleNotFoundError:
    sys.exit("onnx_check.py: numpy is missing: apt-get install python3-numpy (and run /usr/bin/python3)")


def load_yaml(path):
    try:
        import yaml
    except ModuleNotFoundError:
        sys.exit("onnx_check.py: PyYAML is missing: apt-get install python3-yaml")
    with open(path) as f:
        return yaml.safe_load(f)


def read_idx_images(path, n):
    with (gzip.open if path.endswith(".gz") else open)(path, "rb") as f:
        data = f.read()
    count, rows, cols = struct.unpack(">III", data[4:16])
    n = min(n, count)
    return np.frombuffer(data, np.uint8, n * rows * cols, 16).reshape(n, 1, rows, cols)


def read_png(path):
    """8-bit gray or RGB PNGs whose scanlines use filter 0, as scripts/make_image_folder.py writes them."""
    with open(path, "rb") as f:
        data = f.read()
    pos, idat, header = 8, b"", None
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + length]
        if kind == b"IHDR":
            header = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            idat += body
        pos += 12 + length
    width, height, depth, color = header[:4]
    channels = {0: 1, 2: 3}.get(color)
    if depth != 8 or channels is None:
        sys.exit("onnx_check.py: %s: only 8-bit gray or RGB PNGs are read here" % path)
    raw = np.frombuffer(zlib.decompress(idat), np.uint8).reshape(height, 1 + width * channels)
    if raw[:, 0].any():
        sys.exit("onnx_check.py: %s: a scanline filter other than 0; only unfiltered PNGs are read here" % path)
    return raw[:, 1:].reshape(height, width, channels).transpose(2, 0, 1)


def as_list(v):
    return v if isinstance(v, list) else [v]


def csv_features(src):
    """The feature columns of a CSV source, as the config selects them (no categorical columns)."""
    path = src["path"]
    with (gzip.open(path, "rt") if path.endswith(".gz") else open(path, newline="")) as f:
        lines = [l for l in f.read().splitlines() if l.strip()]
    lines = lines[int(src.get("skip_rows", 0)):]
    if src.get("delimiter") == "whitespace":
        rows = [l.split() for l in lines]
    else:
        rows = list(csv.reader(lines, delimiter=src.get("delimiter", ",")))
    header = rows.pop(0) if src.get("header") else None
    ncol = len(rows[0])

    def index(c):
        if isinstance(c, str) and not c.lstrip("-").isdigit():
            return header.index(c)
        c = int(c)
        return c if c >= 0 else ncol + c

    labels = [] if src.get("targets") else [index(c) for c in as_list(src.get("label_column", -1))]
    ignore = [index(c) for c in as_list(src.get("ignore_columns") or [])]
    if src.get("feature_columns"):
        features = [index(c) for c in as_list(src["feature_columns"])]
    else:
        features = [i for i in range(ncol) if i not in labels and i not in ignore]
    return np.array([[float(r[i]) for i in features] for r in rows], dtype=np.float32), path


def make_inputs(args):
    cfg = load_yaml(os.path.join(args.run, "config.yaml"))
    data, model = cfg["data"], cfg["model"]
    shape = list(model["input_shape"])
    source = data.get("validation") or data["train"]
    fmt = data["train"]["format"]
    rng = np.random.default_rng(args.seed)
    n = args.samples
    if fmt == "idx":
        x = read_idx_images(source["images"], n)
        np.save(args.out, x)
        return args.out
    if fmt == "image_folder":
        root = source["path"]
        files = sorted(os.path.join(d, f) for d, _, fs in os.walk(root) for f in fs if f.endswith(".png"))[:n]
        x = np.stack([read_png(f) for f in files])
        np.save(args.out, x)
        listing = args.out + ".list.csv"
        with open(listing, "w", newline="") as f:
            w = csv.writer(f)
            w.writerow(["file"])
            for p in files:
                w.writerow([os.path.abspath(p)])
        return listing
    if fmt == "csv":
        x, path = csv_features(data["train"])
        np.save(args.out, x)
        return path
    first = model["layers"][0]
    if first.get("type") == "embedding":
        vocab = int(first["input_dim"])
        x = rng.integers(0, vocab, size=[n] + shape).astype(np.float32)
        x[0, :6] = [-3, -0.5, 0.7, vocab - 1, vocab - 0.5, vocab + 40]  # clamped as the kernels clamp
        x[1, :3] = [1.5, 2.999, vocab * 3]
        # A recurrent layer masked by the ids (inputs: [..., input]): padding (id 0) at the front,
        # at the back and scattered, a different count in each row, never a whole row.
        if any("input" in as_list(l.get("inputs", []))[1:] for l in model["layers"]):
            L = shape[0]
            for r in range(2, n):
                k = r % L
                if r % 3 == 0:
                    x[r, :k] = 0
                elif r % 3 == 1:
                    x[r, L - k:] = 0
                else:
                    x[r, ::3] = 0
                    x[r, 1] = 1 + r % (vocab - 1)
    elif len(shape) == 3:
        x = rng.integers(0, 256, size=[n] + shape, dtype=np.uint8)
    else:
        x = rng.standard_normal([n] + shape).astype(np.float32)
    np.save(args.out, x)
    return args.out


def load_predictions(path):
    if path.endswith(".npy"):
        return np.load(path).astype(np.float64), None
    with open(path, newline="") as f:
        rows = list(csv.reader(f))
    header, rows = rows[0], rows[1:]
    files = None
    if header[0] == "file":
        files = [r[0] for r in rows]
        rows = [r[1:] for r in rows]
    return np.array([[float(v) for v in r] for r in rows], dtype=np.float64), files


def compare(args):
    ref, _ = load_predictions(args.predicted)
    got = np.load(args.ort).astype(np.float64)
    if ref.ndim == 1:
        ref = ref[:, None]
    if ref.shape != got.shape:
        sys.exit("onnx_check.py: predict wrote %s, ONNX Runtime %s" % (ref.shape, got.shape))
    diff = float(np.abs(ref - got).max())
    # Relative to each value: near-uniform probabilities of an untrained network are small (1/1000
    # for resnet18_imagenet), so their absolute differences are too. Values under 1e-3 count as
    # 1e-3: ONNX Runtime's Sigmoid is a fast approximation whose error is absolute (~1e-7), which
    # makes p ~ 1e-6 differ by 10% relative while matching to 1e-7.
    relative = float((np.abs(ref - got) / np.maximum(np.abs(ref), 1e-3)).max())
    k = ref.shape[1]
    loss = load_yaml(os.path.join(args.run, "config.yaml"))["loss"]["type"]
    if loss == "binary_cross_entropy":
        agree = float(((ref > 0.5) == (got > 0.5)).all(1).mean())
    elif loss in ("mse", "mae", "l1", "huber", "smooth_l1"):
        agree = None
    else:
        agree = float((ref.argmax(1) == got.argmax(1)).mean())
    print(json.dumps({"samples": int(ref.shape[0]), "outputs": int(k), "max_abs_diff": diff,
                      "max_rel_diff": relative, "agreement": agree}))


def check(args):
    try:
        import onnx
    except ModuleNotFoundError:
        sys.exit("onnx_check.py: python3-onnx is missing: apt-get install python3-onnx (and run /usr/bin/python3)")
    model = onnx.load(args.model)
    onnx.checker.check_model(model, full_check=True)
    inferred = onnx.shape_inference.infer_shapes(model, strict_mode=True)
    onnx.checker.check_model(inferred)

    def shape(v):
        return [d.dim_param or d.dim_value for d in v.type.tensor_type.shape.dim]

    print(json.dumps({"onnx": onnx.__version__, "opset": [o.version for o in model.opset_import],
                      "inputs": {v.name: shape(v) for v in model.graph.input},
                      "outputs": {v.name: shape(v) for v in model.graph.output},
                      "nodes": len(model.graph.node), "value_info": len(inferred.graph.value_info)}))


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="verb", required=True)
    c = sub.add_parser("check")
    c.add_argument("model")
    c.set_defaults(fn=check)
    i = sub.add_parser("inputs")
    i.add_argument("run")
    i.add_argument("out")
    i.add_argument("--samples", type=int, default=1000)
    i.add_argument("--seed", type=int, default=1)
    i.set_defaults(fn=lambda a: print(make_inputs(a)))
    m = sub.add_parser("compare")
    m.add_argument("run")
    m.add_argument("predicted")
    m.add_argument("ort")
    m.set_defaults(fn=compare)
    args = p.parse_args()
    args.fn(args)


if __name__ == "__main__":
    main()

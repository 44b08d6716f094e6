#!/usr/bin/env python3
"""Writes the seed corpus of the libFuzzer targets (tests/fuzz/fuzz_*.cc) to tests/fuzz/corpus/<target>/:
small valid inputs of each format and slightly broken ones (truncated, trailing bytes, lying
headers, labels out of range, gzip variants). Standard library only; the output is deterministic
(gzip mtime 0), so re-running it changes nothing unless this script changed.

  python3 scripts/make_fuzz_corpus.py [--out tests/fuzz/corpus]

Each target's input starts with a few bytes of reader options (see the comment at the top of its
fuzz_*.cc): they are packed here by the helpers below.
"""
import argparse, gzip, io, json, os, shutil, struct, zlib

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def gz(b):
    return gzip.compress(b, mtime=0)


def be32(*v):
    return struct.pack(">" + "I" * len(v), *v)


def png_chunk(kind, data):
    return be32(len(data)) + kind + data + be32(zlib.crc32(kind + data) & 0xFFFFFFFF)


def png(width, height, color_type, depth, rows, palette=b"", trns=b""):
    """rows: the packed bytes of each row (filter type 0 is prepended here)."""
    ihdr = be32(width, height) + bytes([depth, color_type, 0, 0, 0])
    raw = b"".join(b"\0" + r for r in rows)
    out = b"\x89PNG\r\n\x1a\n" + png_chunk(b"IHDR", ihdr)
    if palette:
        out += png_chunk(b"PLTE", palette)
    if trns:
        out += png_chunk(b"tRNS", trns)
    return out + png_chunk(b"IDAT", zlib.compress(raw, 9)) + png_chunk(b"IEND", b"")


def image_input(image, options=0, a=6, b=5):
    """fuzz_png / fuzz_jpeg input: [options][a][b][image] (tests/fuzz/fuzz_image.h)."""
    return bytes([options, a, b]) + image


def idx_images(n, rows, cols, magic=0x803):
    return be32(magic, n, rows, cols) + bytes((i * 31 + r * 7 + c) % 256
                                              for i in range(n) for r in range(rows) for c in range(cols))


def idx_labels(labels, magic=0x801):
    return be32(magic, len(labels)) + bytes(labels)


def npy(descr, shape, data, version=1, fortran=False):
    dims = ", ".join(str(d) for d in shape) + ("," if len(shape) == 1 else "")
    header = "{'descr': '%s', 'fortran_order': %s, 'shape': (%s), }" % (descr, fortran, dims)
    prefix = 10 if version == 1 else 12
    header += " " * ((64 - (prefix + len(header) + 1) % 64) % 64) + "\n"
    length = struct.pack("<H", len(header)) if version == 1 else struct.pack("<I", len(header))
    return b"\x93NUMPY" + bytes([version, 0]) + length + header.encode() + data


def safetensors(tensors, metadata=None, header_override=None):
    header, data = {}, b""
    if metadata:
        header["__metadata__"] = metadata
    for name, shape, values in tensors:
        raw = struct.pack("<%df" % len(values), *values)
        header[name] = {"dtype": "F32", "shape": shape, "data_offsets": [len(data), len(data) + len(raw)]}
        data += raw
    text = (header_override or json.dumps(header, separators=(",", ":"))).encode()
    text += b" " * ((8 - len(text) % 8) % 8)
    return struct.pack("<Q", len(text)) + text + data


def corpus():
    c = {}
    img, lab = idx_images(3, 4, 4), idx_labels([0, 1, 2])

    def idx(labels, images, num_classes=10, limit=0):
        return bytes([num_classes - 1, limit]) + struct.pack("<H", len(labels)) + labels + images
    c["fuzz_idx"] = {
        "valid": idx(lab, img),
        "valid_gzip": idx(gz(lab), gz(img)),
        "limit": idx(lab, img, limit=2),
        "images_truncated": idx(lab, img[:-1]),
        "labels_trailing": idx(lab + b"\0", img),
        "swapped": idx(img, lab),
        "label_out_of_range": idx(lab, img, num_classes=2),
        "count_mismatch": idx(idx_labels([0, 1]), img),
        "lying_count_gzip": idx(gz(lab), gz(be32(0x803, 0xFFFFFF, 28, 28) + bytes(64))),
        "gzip_trailing_garbage": idx(lab, gz(img) + b"xy"),
        "float32_magic": idx(lab, be32(0x0D03, 1, 1, 1) + bytes(4)),
    }

    def idx_gz(labels, images, flags=0, num_classes=10, limit=0):
        return bytes([num_classes - 1, limit, flags]) + struct.pack("<H", len(labels)) + labels + images
    c["fuzz_idx_gzip"] = {
        "valid": idx_gz(lab, img),
        "labels_gzip_two_members": idx_gz(lab, img, flags=3),
        "limit": idx_gz(lab, img, limit=1),
        "payload_longer": idx_gz(lab, img + bytes(100)),
        "payload_shorter": idx_gz(lab, img[:20]),
        "lying_count": idx_gz(lab, be32(0x803, 3000000, 28, 28) + bytes(48)),
        "header_only": idx_gz(lab, img[:16]),
    }

    def npys(y, x, num_classes=3):
        return bytes([num_classes - 1]) + struct.pack("<H", len(y)) + y + x
    y64 = npy("<i8", [3], struct.pack("<3q", 0, 1, 2))
    c["fuzz_npy"] = {
        "u8_images": npys(y64, npy("|u1", [3, 2, 2], bytes(range(12)))),
        "f4_labels_u1": npys(npy("|u1", [3], bytes([2, 1, 0])), npy("<f4", [3, 2], struct.pack("<6f", *range(6)))),
        "f8_v2": npys(npy("<i4", [3, 1], struct.pack("<3i", 0, 0, 1)),
                      npy("<f8", [3], struct.pack("<3d", 0.5, 1.5, 2.5), version=2)),
        "i8_gzip": npys(gz(y64), gz(npy("<i8", [3, 2], struct.pack("<6q", *range(6))))),
        "fortran": npys(y64, npy("<f4", [3, 1], bytes(12), fortran=True)),
        "big_endian": npys(y64, npy(">f4", [3], bytes(12))),
        "truncated": npys(y64, npy("<f4", [3, 2], bytes(20))),
        "lying_shape": npys(y64, npy("<f4", [3, 1 << 40], bytes(12))),
        "label_out_of_range": npys(npy("<i8", [3], struct.pack("<3q", 0, 5, -1)), npy("|u1", [3], bytes(3))),
        "float_labels": npys(npy("<f4", [3], bytes(12)), npy("|u1", [3], bytes(3))),
    }

    def csv(text, header=False, delim=0, by_name=False, num_classes=3, column=-1):
        flags = int(header) | (delim << 1) | (int(by_name) << 3)
        return bytes([flags, num_classes - 1, column & 0xFF]) + text.encode()
    c["fuzz_csv"] = {
        "plain": csv("1.5,2,0\n3,4.25,1\n-1e3,0,2\n"),
        "header_by_name": csv("a,label,b\n1,0,2\n3,2,4\n", header=True, by_name=True),
        "semicolon_first_column": csv("2;1;1\r\n0;3;4\r\n", delim=1, column=0),
        "bom_quotes_blank_lines": csv("\ufeff\"x\",\"y\"\n\n\"1\",\"2\"\n", header=True),
        "ragged": csv("1,2,0\n3,1\n"),
        "bad_cell": csv("1,abc,0\n"),
        "label_out_of_range": csv("1,2,7\n"),
        "nan": csv("nan,2,0\n1e999,1,1\n"),
    }
    record = lambda label, seed: bytes([label]) + bytes((seed + i) % 256 for i in range(3072))
    c["fuzz_cifar10"] = {
        "one_record": record(3, 0),
        "two_records_gzip": gz(record(0, 1) + record(9, 2)),
        "label_10_gzip": gz(record(1, 0) + record(10, 0)),
        "short_record_gzip": gz(record(2, 0)[:3000]),
        "tiny": bytes([1, 2, 3]),
    }

    def seq(text, num_classes=4, maxlen=0, flags=1 | 2):
        return bytes([num_classes - 1, maxlen, flags]) + text.encode()
    c["fuzz_sequences"] = {
        "longest": seq("0 1 2 3\n1 4 5\n\n3 9 9 9 9 9\n"),
        "maxlen_post": seq("2 7 8 9 10 11\n0 1\n", maxlen=3, flags=0),
        "empty_sequences": seq("1\n2\n"),
        "bad_token": seq("1 2 x\n"),
        "huge_token": seq("1 16777217\n"),
        "label_out_of_range": seq("9 1 2\n"),
        "gzip": bytes([3, 0, 3]) + gz(b"1 5 6 7\n0 2\n"),
    }
    def tok(body, context=4, stride=0, num_classes=0, text=False):
        return bytes([context - 1, stride]) + struct.pack("<H", num_classes) + bytes([1 if text else 0]) + body
    def llmc(ids, count=None, version=1):
        head = struct.pack("<3i", 20240520, version, len(ids) if count is None else count) + bytes(1012)
        return head + struct.pack("<%dH" % len(ids), *ids)
    c["fuzz_tokens"] = {
        "text": tok(b"hello, world\n", text=True),
        "text_stride": tok(b"the quick brown fox", context=5, stride=2, text=True),
        "text_gzip": tok(gz(b"abcdefghijklmnop"), text=True),
        "raw": tok(struct.pack("<10H", *range(50000, 50010)), num_classes=50257),
        "raw_odd": tok(struct.pack("<5H", 1, 2, 3, 4, 5) + b"x"),
        "llmc": tok(llmc(list(range(12))), num_classes=100),
        "llmc_lying": tok(llmc(list(range(12)), count=13)),
        "llmc_v2": tok(llmc(list(range(12)), version=2)),
        "out_of_vocab": tok(struct.pack("<8H", 1, 2, 3, 900, 4, 5, 6, 7), num_classes=10),
        "short": tok(b"ab", context=8, text=True),
    }
    c["fuzz_safetensors"] = {
        "two_tensors": safetensors([("dense_1.weight", [2, 3], [0.5] * 6), ("dense_1.bias", [2], [1, -1])],
                                   {"epoch": "3"}),
        "scalar_and_empty": safetensors([("s", [], [2.0]), ("e", [0, 4], [])]),
        "f16": safetensors([], header_override='{"w":{"dtype":"F16","shape":[1],"data_offsets":[0,2]}}') + b"\0\0",
        "hole": safetensors([], header_override='{"w":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}}') + bytes(8),
        "huge_shape": safetensors([], header_override=
                                  '{"w":{"dtype":"F32","shape":[4611686018427387904,4],"data_offsets":[0,0]}}'),
        "header_too_long": struct.pack("<Q", 1 << 40) + b"{}",
        "short": b"\x10\0\0",
    }
    configs = {}
    for name in ("mlp_disc", "fashion_mnist_cnn", "reuters_conv1d"):
        with open(os.path.join(ROOT, "configs", name + ".yaml"), "rb") as f:
            text = b"\n".join(l for l in f.read().split(b"\n") if not l.lstrip().startswith(b"#"))
        configs[name] = text

    def cfg(yaml, override=b""):
        return bytes([len(override)]) + override + yaml
    c["fuzz_config"] = {
        "mlp_disc": cfg(configs["mlp_disc"]),
        "fashion_mnist_cnn_set_lr": cfg(configs["fashion_mnist_cnn"], b"optimizer.lr=0.1"),
        "reuters_set_layer": cfg(configs["reuters_conv1d"], b"model.layers.1.filters=8"),
        "set_list": cfg(configs["mlp_disc"], b"model.input_shape=[1,28,28]"),
        "set_index": cfg(configs["mlp_disc"], b"model.layers.0.depth=3"),
        "duplicate_key": cfg(b"optimizer: {type: sgd, lr: 0.1, lr: 5}\n" + configs["mlp_disc"]),
        "not_a_mapping": cfg(b"- 1\n- 2\n"),
        "bad_yaml": cfg(b"model: {layers: [\n"),
        "empty": cfg(b""),
    }
    # The training state of a checkpoint (lib/train/train_state.h), as save_checkpoint writes it,
    # and damaged ones: a negative count, a string for a number, a missing key.
    state = {"epochs_done": 2, "batches_done": 0, "step": 10,
             "scalars": {"lr": 0.01, "bias_correction1": 0.5, "bias_correction2": 0.3, "momentum_product": 1.0,
                         "mu_t": 0.0, "mu_next": 0.0, "step": 10, "seed": 7},
             "partial": {"loss_sum": 0.0, "samples": 0, "confusion": [], "topk": [],
                         "nonfinite": {"first_step": 0, "steps": 0, "samples": 0, "first_what": 0, "what": 0}},
             "skipped_batches": 0, "first_loss": 0.69, "first_loss_epoch": 1,
             "schedule": {"type": "constant", "current_lr": 0.01}, "early_stopping": None,
             "best": {"monitor": "loss", "best": 0.4, "best_epoch": 2, "wait": 0}, "seconds": 1.5,
             "optimizer": "adam", "seed": 7, "batch_size": 50, "train_samples": 240,
             "checkpoint_id": "0123456789abcdef",
             "summary": {"final_lr": 0.01, "best_val_accuracy": 0.9},
             "loss_scale": {"scale": 65536.0, "good_steps": 3, "overflow_steps": 0}}
    def js(d):
        return json.dumps(d, sort_keys=True).encode()
    c["fuzz_train_state"] = {
        "valid": js(state),
        "negative_epochs": js(dict(state, epochs_done=-5)),
        "string_step": js(dict(state, step="12")),
        "no_batch_size": js({k: v for k, v in state.items() if k != "batch_size"}),
        "not_an_object": b"[1, 2, 3]",
    }

    # --set keys (tests/fuzz/fuzz_set_keys.cc): [u16 count][segments: [n][n - 1 bytes]][value].
    def key(segments, value, repeat=0):
        body = b"".join(bytes([len(s) + 1]) + s for s in segments) + b"\x00" * repeat
        return struct.pack("<H", len(segments) + repeat) + body + value
    c["fuzz_set_keys"] = {
        "lr": key([b"optimizer", b"lr"], b"0.1"),
        "block_units": key([b"model", b"blocks", b"pair", b"params", b"units"], b"8"),
        "layer_index": key([b"model", b"layers", b"1", b"units"], b"3"),
        "deep_into_block": key([b"model", b"blocks", b"pair", b"x"], b"1", repeat=40000),
        "empty_segment": key([b"optimizer", b"", b"lr"], b"1"),
    }

    gray8 = png(6, 4, 0, 8, [bytes((x * 40 + y * 9) % 256 for x in range(6)) for y in range(4)])
    rgb8 = png(5, 3, 2, 8, [bytes((x * 50 + y * 30 + ch * 70) % 256 for x in range(5) for ch in range(3))
                            for y in range(3)])
    c["fuzz_png"] = {
        "gray8": image_input(gray8, 1),
        "gray8_resized": image_input(gray8, 1 | 2, 9, 3),
        "rgb8_shorter_crop": image_input(rgb8, 2 | 4, 2),
        "rgb8_as_gray": image_input(rgb8, 1),
        "rgba8": image_input(png(2, 2, 6, 8, [bytes(range(8)), bytes(range(8, 16))])),
        "gray_alpha16": image_input(png(2, 1, 4, 16, [bytes(range(8))])),
        "rgb16": image_input(png(2, 2, 2, 16, [bytes(range(12)), bytes(range(12, 24))]), 2, 4, 4),
        "gray1": image_input(png(9, 2, 0, 1, [b"\xa5\x80", b"\x5a\x00"])),
        "palette4_trns": image_input(png(3, 2, 3, 4, [b"\x01\x20", b"\x21\x00"], bytes(range(9)), b"\x00\x80")),
        "truncated": image_input(rgb8[: len(rgb8) // 2]),
        "lying_size": image_input(gray8[:16] + be32(100000, 100000) + gray8[24:]),
    }
    # JPEG seeds need an encoder: Pillow (python3-pil) when installed, else the committed files stay.
    try:
        from PIL import Image
    except ImportError:
        print("fuzz_jpeg: python3-pil is not installed; its seed corpus is left as it is")
        return c

    def jpeg(mode, size, **kw):
        im = Image.new(mode, size)
        im.putdata([tuple((x * 37 + y * 11 + k * 50) % 256 for k in range(len(mode))) if len(mode) > 1
                    else (x * 37 + y * 11) % 256 for y in range(size[1]) for x in range(size[0])])
        buf = io.BytesIO()
        im.save(buf, "JPEG", quality=kw.pop("quality", 90), **kw)
        return buf.getvalue()
    base = jpeg("RGB", (16, 8))
    c["fuzz_jpeg"] = {
        "baseline": image_input(base),
        "baseline_resized": image_input(base, 2, 7, 3),
        "progressive": image_input(jpeg("RGB", (16, 16), progressive=True), 2 | 4, 9),
        "gray": image_input(jpeg("L", (8, 8)), 1),
        "cmyk": image_input(jpeg("CMYK", (8, 8))),
        "subsampled_odd": image_input(jpeg("RGB", (13, 7), subsampling=2)),
        "truncated": image_input(base[: len(base) // 2]),
    }
    return c


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default=os.path.join(ROOT, "tests", "fuzz", "corpus"))
    out = ap.parse_args().out
    total = 0
    for target, files in corpus().items():
        d = os.path.join(out, target)
        shutil.rmtree(d, ignore_errors=True)
        os.makedirs(d)
        for name, data in files.items():
            with open(os.path.join(d, name), "wb") as f:
                f.write(data)
            total += len(data)
        print("%-18s %2d files %6d bytes" % (target, len(files), sum(len(v) for v in files.values())))
    print("total %d bytes in %s" % (total, out))


if __name__ == "__main__":
    main()

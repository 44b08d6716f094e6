#!/usr/bin/env bash
# ctest "plot_script": scripts/plot.py (and `trainer plot`) draw a valid PNG and a valid SVG from
# two run directories, a bench sweep (CSV and JSON) and a bench matmul, on a machine without a GPU
# too; and refuse what is neither a run nor a bench file with exit 2.
#   tests/scripts/plot_test.sh TRAINER_BINARY
set -euo pipefail
trainer=$(realpath "$1")
repo=$(cd "$(dirname "$0")/../.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"
cat >disc.yaml <<'YAML'
model: {input_shape: [2], layers: [{type: dense, units: 8}, {type: relu}, {type: dense, units: 2}]}
loss: {type: sparse_categorical_crossentropy, from_logits: true}
optimizer: {type: sgd, lr: 0.1}
metrics: [accuracy, f1]
data: {train: {format: disc, samples: 300, seed: 1}, num_classes: 2, batch_size: 50, validation_split: 0.2}
train: {epochs: 3, seed: 1}
YAML
"$trainer" fit disc.yaml --out run_a -q
"$trainer" fit disc.yaml --set optimizer.lr=0.5 --out run_b -q
"$trainer" bench --sweep mlp-depth "$repo/configs/mlp_disc.yaml" --to 4 --steps 10 --out sweep.csv >/dev/null
"$trainer" bench --sweep mlp-depth "$repo/configs/mlp_disc.yaml" --to 3 --steps 10 --out sweep.json >/dev/null
"$trainer" bench --size 200x20x300 --repeat 1 --out matmul.json >/dev/null

python3 "$repo/scripts/plot.py" run_a run_b sweep.csv matmul.json --out all.png --title "plot test"
"$trainer" plot run_a run_b sweep.json --out all.svg

# A PNG: the signature, then chunks whose CRCs match, IHDR first with a non-zero size, IEND last,
# and image data that inflates. An SVG: XML whose root is <svg> with a width and a height.
/usr/bin/env python3 - all.png all.svg <<'PY'
import struct, sys, zlib
import xml.etree.ElementTree as ET
data = open(sys.argv[1], "rb").read()
assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG signature"
pos, chunks, idat = 8, [], b""
while pos < len(data):
    n, kind = struct.unpack(">I4s", data[pos:pos + 8])
    body = data[pos + 8:pos + 8 + n]
    (crc,) = struct.unpack(">I", data[pos + 8 + n:pos + 12 + n])
    assert zlib.crc32(kind + body) == crc, f"bad CRC in {kind}"
    chunks.append(kind)
    if kind == b"IDAT":
        idat += body
    pos += 12 + n
assert chunks[0] == b"IHDR" and chunks[-1] == b"IEND", chunks
w, h = struct.unpack(">II", data[16:24])
assert w > 500 and h > 300, (w, h)
raw = zlib.decompress(idat)
assert len(raw) > w * h, "image data too short"
root = ET.parse(sys.argv[2]).getroot()
assert root.tag.endswith("svg") and root.get("width") and root.get("height"), root.tag
texts = "".join(root.itertext())
for word in ("loss", "accuracy", "time per epoch", "MLP depth sweep"):
    assert word in texts, f"SVG lacks {word!r}"
print(f"plot_test: PNG {w}x{h} with {len(chunks)} chunks, SVG {root.get('width')} x {root.get('height')}")
PY

set +e
python3 "$repo/scripts/plot.py" nothing_here --out x.png 2>err.txt
rc=$?
set -e
[ "$rc" -eq 2 ] || { echo "plot_test: expected exit 2 for a missing input, got $rc" >&2; exit 1; }
grep -q "^error: nothing_here: not a run directory" err.txt || { cat err.txt >&2; exit 1; }
# Malformed inputs: a message and exit 4, never a Python traceback (issue 30, item 18).
bad() {  # bad NAME: run_bad holds a malformed run directory
  local out rc=0
  out=$(python3 "$repo/scripts/plot.py" run_bad --out bad.png 2>&1) || rc=$?
  if [ "$rc" -ne 4 ] || echo "$out" | grep -q Traceback || ! echo "$out" | grep -q '^error: '; then
    echo "plot_test: $1: expected exit 4 with an error line, got $rc: $out" >&2
    exit 1
  fi
}
mkdir -p run_bad
printf 'epoch,loss\n1,0.5,7\n' > run_bad/metrics.csv; bad "a row longer than its header"
printf 'epoch,loss\n1\n' > run_bad/metrics.csv; bad "a row shorter than its header"
printf 'epoch\n1\n2\n' > run_bad/metrics.csv; bad "no metric column"
printf 'loss,seconds\n0.5,0\n' > run_bad/metrics.csv; bad "no epoch column, zero seconds"
printf 'epoch,loss\n1,0.5\n' > run_bad/metrics.csv; echo '[]' > run_bad/summary.json
rc=0; python3 "$repo/scripts/plot.py" run_bad --out ok.png >/dev/null 2>&1 || rc=$?
[ "$rc" -eq 0 ] || { echo "plot_test: summary.json = [] should be ignored, got exit $rc" >&2; exit 1; }
echo '[]' > bad.json
rc=0; out=$(python3 "$repo/scripts/plot.py" bad.json --out bad.png 2>&1) || rc=$?
[ "$rc" -eq 4 ] && ! echo "$out" | grep -q Traceback || { echo "plot_test: bench [] gave $rc: $out" >&2; exit 1; }
echo '{"bench": "matmul", "results": [{"device": 3}]}' > bad2.json
rc=0; out=$(python3 "$repo/scripts/plot.py" bad2.json --out bad.png 2>&1) || rc=$?
[ "$rc" -eq 4 ] && ! echo "$out" | grep -q Traceback || { echo "plot_test: malformed matmul gave $rc: $out" >&2; exit 1; }
echo "plot_test: OK"

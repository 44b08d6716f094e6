#!/usr/bin/env bash
# The "Bad input" table of docs/reliability.md (issues 10, 28, 30 and 32). Its rows are the file
# tests/bad_input_cases.md: each gives a command, the exit code it must give and a part of the
# message its stderr must hold. This script makes the hostile inputs in a scratch directory (the
# fixture_* functions below, named by each section's "fixtures:" line), runs every row against a
# trainer binary, checks it and prints the table on stdout, one Markdown row per case:
#   case | command | message | exit | expected | test
# "message" is the line of stderr that holds the expected part (timestamps dropped, the scratch
# directory shown as .), else the first error (or warning) line. It exits 1 when a row's exit code
# or message is not the expected one, or a refused input (exit 2, 3, 4) gets more on stderr than
# one "error: " line (of at most 2,000 bytes) after its info lines. ctest runs it (test
# bad_input_table, on the trainer it built); so does CI, in its test step.
#   scripts/bad_input_table.sh                    # build/trainer; about 1.5 minutes on 2 cores
#   scripts/bad_input_table.sh path/to/trainer    # or TRAINER=path/to/trainer
#   scripts/bad_input_table.sh --only 'NPY|CSV'   # only the rows whose case matches (grep -E)
#
# Unwritable outputs: the suite often runs as root, which ignores directory permissions, so an
# unwritable --out is a path below a regular file (afile/sub) or in /proc. The full disk is a 2 MiB
# tmpfs mounted in a private mount namespace (unshare); where that is not permitted the row says
# "skipped". Signals "during a checkpoint write" are sent as soon as a checkpoint's temporary file
# (*.tmp-PID) appears, while its 48 MB are being written.
set -uo pipefail
T="${TRAINER:-}"
only=""
while [ $# -gt 0 ]; do
  case "$1" in
    --only) only="${2:?--only needs a pattern}" && shift 2 ;;
    -h | --help) awk 'NR > 1 && !/^#/ { exit } NR > 1 { sub(/^# ?/, ""); print }' "$0" && exit 0 ;;
    -*) echo "bad_input_table: unknown option '$1' (see --help)" >&2 && exit 2 ;;
    *) T="$1" && shift ;;
  esac
done
[ -z "$T" ] || T="$(realpath "$T")"
cd "$(dirname "$0")/.." || exit 2
repo="$(pwd)"
T="${T:-$repo/build/trainer}"
[ -x "$T" ] || { echo "bad_input_table: no trainer at $T (build it first: scripts/setup.sh)" >&2; exit 2; }
CASES="$repo/tests/bad_input_cases.md"
W="$(mktemp -d /tmp/badinput.XXXXXX)"
cleanup() {
  jobs -p | xargs -r kill -9 2>/dev/null
  rm -rf "$W"
}
trap cleanup EXIT
cd "$W" || exit 2
t_start=$(date +%s%N)
LIMIT="${CASE_TIMEOUT:-60}" # seconds; a case that runs longer is a hang (exit 137)
# The rows' environment: `trainer` is the binary under test (scripts/sweep.sh finds it as
# $TRAINER), and scripts/ and configs/ are the repository's.
mkdir .bin && ln -s "$T" .bin/trainer && ln -s "$repo/scripts" scripts && ln -s "$repo/configs" configs
export PATH="$W/.bin:$PATH" TRAINER="$T" T W
export OMP_WAIT_POLICY=passive # two trainers at once on 2 cores must not spin against each other

die() {
  echo "bad_input_table: $*" >&2
  exit 2
}

# ---------------------------------------------------------------------------------------------
# Fixtures: fixture_NAME makes the inputs of the sections whose "fixtures:" line names NAME, in
# $W, once (need NAME).
# ---------------------------------------------------------------------------------------------

# A model of N nested blocks (b0 uses b1, ..., the last uses relu), and one whose concat joins N
# dense layers of the input (the limits are 16 and 64).
blocks_yaml() {
  local i
  sed -n '1,/^  layers:/p' tiny.yaml | sed '$d'
  echo '  blocks:'
  for i in $(seq 0 $(($1 - 1))); do echo "    b$i: {layers: [{type: $([ "$i" -lt $(($1 - 1)) ] && echo "b$((i + 1))" || echo relu)}]}"; done
  echo '  layers: [{type: b0}, {type: dense, units: 2}]'
  sed -n '/^loss:/,$p' tiny.yaml
}
concat_yaml() {
  local i
  sed -n '1,/^  layers:/p' tiny.yaml
  for i in $(seq 0 $(($1 - 1))); do echo "    - {type: dense, units: 2, name: d$i, inputs: [input]}"; done
  echo "    - {type: concat, inputs: [$(seq -s ', ' -f 'd%g' 0 $(($1 - 1)))]}"
  echo '    - {type: dense, units: 2}'
  sed -n '/^loss:/,$p' tiny.yaml
}

# The small classifier on generated points that most rows start from, its hostile variants,
# and a FIFO, a directory and a file where a config or an --out is expected.
fixture_configs() {
  local i p
  cat >tiny.yaml <<'EOF'
model:
  input_shape: [2]
  layers:
    - {type: dense, units: 8}
    - {type: relu}
    - {type: dense, units: 2}
loss: {type: sparse_categorical_crossentropy, from_logits: true}
optimizer:
  type: adam
  lr: 0.01
data:
  train: {format: disc, samples: 200, seed: 3}
  validation_split: 0.2
  num_classes: 2
  batch_size: 20
train:
  epochs: 2
  seed: 7
EOF
  sed 's/^  lr: 0.01/  lr: 0.001\n  lr: 5.0/' tiny.yaml >dup_lr.yaml
  { cat tiny.yaml; printf 'optimizer:\n  type: sgd\n  lr: 0.1\n'; } >dup_opt.yaml
  sed 's/^  layers:$/  layers: [/' tiny.yaml >malformed.yaml
  printf '# nothing but a comment\n' >empty.yaml
  head -c 3000 /dev/urandom | tr -d '\n' | { printf '\xff\xfe'; cat; } >binary.yaml
  printf 'model:\0\033[2J\n' >nul.yaml
  { printf 'model: '; head -c 10000 /dev/zero | tr '\0' '['; head -c 10000 /dev/zero | tr '\0' ']'; echo; } >deep.yaml
  { cat tiny.yaml; printf 'metrics: ['; for _ in $(seq 200000); do printf 'accuracy, '; done; echo 'f1]'; } >many.yaml
  cp tiny.yaml huge.yaml && truncate -s 40M huge.yaml  # sparse: 40 MB of NUL after the text
  {
    cat tiny.yaml
    echo 'a0: &a0 [x, x, x, x, x, x, x, x, x, x]'
    for i in 1 2 3 4 5 6; do
      p=$((i - 1))
      echo "a$i: &a$i [*a$p, *a$p, *a$p, *a$p, *a$p, *a$p, *a$p, *a$p, *a$p, *a$p]"
    done
  } >aliases.yaml
  sed 's/^train:$/trian:/' tiny.yaml >unknown_key.yaml
  sed 's/type: relu/type: rleu/' tiny.yaml >unknown_layer.yaml
  sed 's/^  type: adam$/  <<: 5/' tiny.yaml >merge_value.yaml
  { cat tiny.yaml; echo 'device: tpu'; } >device_tpu.yaml
  { cat tiny.yaml; echo 'device: {type: gpu, memroy_limit: 4096}'; } >device_key.yaml
  sed 's/batch_size: 20/batch_size: 0/' tiny.yaml >batch0.yaml
  sed 's/batch_size: 20/batch_size: -5/' tiny.yaml >batchneg.yaml
  sed 's/units: 8/units: -3/' tiny.yaml >units_neg.yaml
  sed 's/units: 8/units: 0/' tiny.yaml >units0.yaml
  sed 's/num_classes: 2/num_classes: 0/' tiny.yaml >classes0.yaml
  sed 's/^  batch_size: 20/  batch_size: 20\n  normalize: {scale: 0}/' tiny.yaml >scale0.yaml
  mkfifo fifo.yaml
  mkdir adir
  echo "not a run directory" >afile
}

# Data files in every format, good and hostile, and a config for each format.
fixture_data() {
  python3 - <<'EOF'
import gzip, os, struct
def be(*v): return b"".join(struct.pack(">I", x) for x in v)
n = 100
img = be(0x803, n, 4, 4) + bytes((i * 7) % 256 for i in range(n * 16))
lab = be(0x801, n) + bytes(i % 10 for i in range(n))
open("img.idx", "wb").write(img)
open("lab.idx", "wb").write(lab)
open("img-cut.idx", "wb").write(img[:-5])
open("img-magic.idx", "wb").write(b"GIF89a" + img[6:])
open("lab-range.idx", "wb").write(lab[:-1] + bytes([10]))
open("lab-short.idx", "wb").write(be(0x801, n - 1) + bytes(i % 10 for i in range(n - 1)))
gzip.open("img.idx.gz", "wb").write(img)
# A gzip bomb behind a small header: 64 MiB of zeros after the 100 images.
with gzip.open("bomb.idx.gz", "wb", compresslevel=9) as f:
    f.write(img)
    z = bytes(1 << 20)
    for _ in range(64): f.write(z)
# A header that claims 4294967295 images of 28x28 in a 40-byte gzip file.
gzip.open("lying.idx.gz", "wb").write(be(0x803, 0xFFFFFFFF, 28, 28) + bytes(16))
g = gzip.compress(img)
open("cut.idx.gz", "wb").write(g[:-20])
c = bytearray(g)
for i in range(len(g) // 2, len(g) // 2 + 8): c[i] ^= 0x5A
open("corrupt.idx.gz", "wb").write(bytes(c))
# CIFAR-10: 2 records; a cut record; a label 10.
rec = lambda label: bytes([label]) + bytes((i * 3) % 256 for i in range(3072))
open("cifar.bin", "wb").write(rec(1) + rec(2))
open("cifar-cut.bin", "wb").write(rec(1) + rec(2)[:101])
open("cifar-label.bin", "wb").write(rec(1) + rec(10))
# CSV: 2 features then the label.
rows = [f"{(i % 7) / 7:.3f},{(i % 5) / 5:.3f},{i % 2}" for i in range(40)]
open("good.csv", "w").write("\n".join(rows) + "\n")
open("ragged.csv", "w").write(rows[0] + "\n0.5,1\n" + "\n".join(rows[2:]) + "\n")
open("text.csv", "w").write(rows[0] + "\n0.5,abc,1\n")
open("label.csv", "w").write("\n".join(rows[:5]) + "\n0.5,0.5,7\n")
open("empty.csv", "w").write("")
open("label-string.csv", "w").write("\n".join(rows[:5]) + "\n0.5,0.5,setosa\n")
open("missing.csv", "w").write("\n".join(rows[:3]) + "\n0.5,,1\n")
# A string feature column (one-hot over red, blue, green); the validation file has a new color.
open("cat-train.csv", "w").write("size,color,y\n" + "".join(f"{i % 7},{('red', 'blue', 'green')[i % 3]},{i % 2}\n" for i in range(40)))
open("cat-val.csv", "w").write("size,color,y\n1,red,0\n2,purple,1\n")
# Multi-label lists over class_names [a, b]; a regression target that is a word.
open("multilabel.csv", "w").write("x1,x2,tags\n" + "".join(f"{(i % 7) / 7:.3f},{(i % 5) / 5:.3f},{('a', 'b', 'a|b')[i % 3]}\n" for i in range(5)) + "0.5,0.5,a|zebra\n")
open("regression.csv", "w").write("\n".join(rows[:3]) + "\n0.5,0.5,high\n")
open("fraction.csv", "w").write("\n".join(rows[:5]) + "\n0.5,0.5,2.75\n")
# NPY: x (40, 2) float32, y (40,) int64.
def npy(path, descr, shape, payload, fortran=False):
    h = "{'descr': '%s', 'fortran_order': %s, 'shape': (%s), }" % (descr, fortran, "".join(f"{s}," for s in shape))
    h = h.ljust(118) + "\n"
    open(path, "wb").write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(h)) + h.encode() + payload)
xs = struct.pack("<80f", *[(i % 9) / 9 for i in range(80)])
ys = struct.pack("<40q", *[i % 2 for i in range(40)])
npy("x.npy", "<f4", (40, 2), xs)
npy("y.npy", "<i8", (40,), ys)
npy("x-cut.npy", "<f4", (40, 2), xs[:100])
npy("x-fortran.npy", "<f4", (40, 2), xs, fortran=True)
npy("x-object.npy", "|O", (40, 2), xs)
npy("x-lying.npy", "<f4", (4000000000, 4000000000), xs)
npy("y-range.npy", "<i8", (40,), ys[:-8] + struct.pack("<q", 9))
open("x-garbage.npy", "wb").write(b"PK\x03\x04 this is a zip file\n" * 4)
# Sequences: label then token ids.
open("seq.txt", "w").write("".join(f"{i % 3} {' '.join(str(1 + (i * j) % 50) for j in range(1, 9))}\n" for i in range(30)))
open("seq-token.txt", "w").write("0 1 2 3\n1 4 x 5\n")
open("seq-label.txt", "w").write("0 1 2 3\n9 4 5\n")
open("seq-neg.txt", "w").write("0 1 2 3\n1 4 -7 5\n")
# Token streams: a text, and uint16 token files raw or with llm.c's header.
open("text.txt", "w").write("the quick brown fox jumps over the lazy dog. " * 20)
open("text-short.txt", "w").write("tiny")
open("text-cut.txt.gz", "wb").write(gzip.compress(bytes(range(256)) * 64)[:200])  # ends inside the stream
def ids(v): return struct.pack("<%dH" % len(v), *v)
def llmc(v, count): return struct.pack("<3i", 20240520, 1, count) + bytes(1012) + ids(v)
open("tok.bin", "wb").write(ids([i % 100 for i in range(400)]))
open("tok-odd.bin", "wb").write(ids(range(40)) + b"x")
open("tok-lying.bin", "wb").write(llmc(list(range(40)), 41))
open("tok-huge.bin", "wb").write(llmc([1, 2, 3, 4], 2**31 - 1))
open("tok-v2.bin", "wb").write(struct.pack("<3i", 20240520, 2, 4) + bytes(1012) + ids([1, 2, 3, 4]))
open("tok-vocab.bin", "wb").write(ids([1, 2, 3] * 10 + [700] + [4] * 10))
EOF
  mkfifo data.fifo
  mkdir data.dir
  ln -s missing.bin tok-dangling.bin

  cat >idx.yaml <<'EOF'
model:
  input_shape: [1, 4, 4]
  layers: [{type: flatten}, {type: dense, units: 10}]
loss: cross_entropy
optimizer: {type: sgd, lr: 0.1}
data:
  train: {format: idx, images: img.idx, labels: lab.idx}
  num_classes: 10
  batch_size: 20
train: {epochs: 1}
EOF
  cat >cifar.yaml <<'EOF'
model:
  input_shape: [3, 32, 32]
  layers: [{type: global_avg_pool}, {type: dense, units: 10}]
loss: cross_entropy
optimizer: {type: sgd, lr: 0.1}
data:
  train: {format: cifar10, files: [cifar.bin]}
  num_classes: 10
  batch_size: 2
train: {epochs: 1}
EOF
  cat >csv.yaml <<'EOF'
model:
  input_shape: [2]
  layers: [{type: dense, units: 2}]
loss: cross_entropy
optimizer: {type: sgd, lr: 0.1}
data:
  train: {format: csv, path: good.csv}
  num_classes: 2
  batch_size: 10
train: {epochs: 1}
EOF
  sed 's/{format: csv, path: good.csv}/{format: npy, x: x.npy, y: y.npy}/' csv.yaml >npy.yaml
  cat >category.yaml <<'EOF'
model:
  input_shape: [4]
  layers: [{type: dense, units: 2}]
loss: cross_entropy
optimizer: {type: sgd, lr: 0.1}
data:
  train: {format: csv, path: cat-train.csv, header: true, label_column: y}
  validation: {format: csv, path: cat-val.csv, header: true, label_column: y}
  num_classes: 2
  batch_size: 10
train: {epochs: 1}
EOF
  cat >multilabel.yaml <<'EOF'
model:
  input_shape: [2]
  layers: [{type: dense, units: 2}]
loss: {type: binary_cross_entropy}
optimizer: {type: sgd, lr: 0.1}
data:
  train: {format: csv, path: multilabel.csv, header: true, label_column: tags, label_delimiter: "|"}
  class_names: [a, b]
  batch_size: 10
train: {epochs: 1}
EOF
  sed -e 's/units: 2}]/units: 1}]/' -e 's/loss: cross_entropy/loss: {type: mse}/' -e '/num_classes/d' \
    -e 's/path: good.csv/path: regression.csv/' csv.yaml >regression.yaml
  cat >tokens.yaml <<'EOF'
model:
  input_shape: [8]
  layers:
    - {type: embedding, input_dim: 100, output_dim: 8, channels_first: false}
    - {type: dense, units: 100, per_position: true}
loss: cross_entropy
optimizer: {type: adam, lr: 0.01}
data:
  train: {format: tokens, path: tok.bin, context: 8}
  num_classes: 100
  batch_size: 8
  validation_split: 0.2
train: {epochs: 1}
EOF
  sed -e 's/format: tokens, path: tok.bin/format: text, path: text.txt/' -e 's/input_dim: 100/input_dim: 256/' \
    -e 's/units: 100/units: 256/' -e '/num_classes/d' tokens.yaml >text.yaml
  cat >seq.yaml <<'EOF'
model:
  input_shape: [8]
  layers: [{type: embedding, input_dim: 64, output_dim: 4}, {type: flatten}, {type: dense, units: 3}]
loss: cross_entropy
optimizer: {type: sgd, lr: 0.1}
data:
  train: {format: sequences, path: seq.txt, maxlen: 8}
  num_classes: 3
  batch_size: 10
train: {epochs: 1}
EOF
  # Three labels for a binary loss (Sizes).
  printf '1,2,0\n3,4,1\n5,6,2\n' >three_labels.csv
}

# A model that diverges: SGD at lr 1e6 overflows the weights within a few steps
# (tests/test_divergence.cc).
fixture_nan() {
  cat >sgd.yaml <<'EOF'
model:
  input_shape: [2]
  layers: [{type: dense, units: 16}, {type: relu}, {type: dense, units: 2}]
loss: {type: sparse_categorical_crossentropy, from_logits: true}
optimizer: {type: sgd, lr: 0.1}
data: {train: {format: disc, samples: 500, seed: 3}, num_classes: 2, batch_size: 10, validation_split: 0.2}
train: {epochs: 1, seed: 7}
EOF
}

# Long enough to be signalled: 4.2M parameters, so each checkpoint (weights + Adam state) is about
# 48 MB; 20 steps per epoch.
fixture_slow() {
  cat >slow.yaml <<'EOF'
model:
  input_shape: [2]
  layers: [{type: dense, units: 2048}, {type: relu}, {type: dense, units: 2048}, {type: relu}, {type: dense, units: 2}]
loss: {type: sparse_categorical_crossentropy, from_logits: true}
optimizer: {type: adam, lr: 0.001}
data: {train: {format: disc, samples: 2000, seed: 3}, num_classes: 2, batch_size: 100}
train: {epochs: 50, seed: 7}
EOF
}

# Checkpoints and weights: a good run of tiny.yaml (2 epochs), then damaged copies.
fixture_checkpoints() {
  need configs data
  "$T" fit tiny.yaml --out good >/dev/null 2>&1 || die "the good run failed"
  python3 - <<'EOF'
import shutil, struct
def copy(name): shutil.copytree("good", name); return name
st = "checkpoints/epoch-0002.state.safetensors"
w = "checkpoints/epoch-0002.safetensors"
b = bytearray(open("good/" + st, "rb").read()); at = b.find(b"trainer.state"); b[at + 20:at + 28] = b"garbage!"
open(copy("bad_state") + "/" + st, "wb").write(bytes(b))
b = open("good/" + w, "rb").read()
open(copy("cut_ckpt") + "/" + w, "wb").write(b[: len(b) // 2])
copy("fifo_ckpt")
m = open("good/model.safetensors", "rb").read()
open("short.safetensors", "wb").write(m[:3])
open("cut.safetensors", "wb").write(m[: len(m) - 10])
open("huge-header.safetensors", "wb").write(struct.pack("<Q", 1 << 62) + b"{}")
hdr = b'{"dense_1.weight": not json'
open("json.safetensors", "wb").write(struct.pack("<Q", len(hdr)) + hdr)
EOF
  rm fifo_ckpt/checkpoints/epoch-0002.safetensors && mkfifo fifo_ckpt/checkpoints/epoch-0002.safetensors
  mkfifo weights.fifo.safetensors
  mkdir weights.dir.safetensors
  mkdir -p nockpt/checkpoints
  "$T" fit npy.yaml --out good_npy >/dev/null 2>&1 || die "the good npy run failed"
  sed 's/units: 8/units: 9/' tiny.yaml >tiny9.yaml
}

# A run of one epoch for two --resume at once.
fixture_concurrency() {
  need slow
  "$T" fit slow.yaml --out shared2 --epochs 1 >/dev/null 2>&1 || die "the one-epoch run of slow.yaml failed"
}

# Run directories damaged in the ways of issue 30, and its other hostile inputs.
fixture_runs30() {
  local c n
  need configs
  "$T" fit tiny.yaml --epochs 2 --out run30 >/dev/null 2>&1 || die "the issue-30 run failed"
  printf 'precious\n' >victim.txt
  for c in link_csv link_ckpt renamed deleted negative scalars3 scalars_inf; do cp -r run30 "$c"; done
  rm link_csv/metrics.csv && ln -s "$W/victim.txt" link_csv/metrics.csv
  mv link_ckpt/checkpoints elsewhere && ln -s "$W/elsewhere" link_ckpt/checkpoints
  cp renamed/checkpoints/epoch-0001.safetensors renamed/checkpoints/epoch-0002.safetensors
  rm deleted/checkpoints/epoch-0002.safetensors
  python3 - negative/checkpoints/epoch-0002.state.safetensors <<'PY'
import json, struct, sys
b = open(sys.argv[1], "rb").read(); n = struct.unpack("<Q", b[:8])[0]; h = json.loads(b[8:8 + n])
s = json.loads(h["__metadata__"]["trainer.state"]); s["epochs_done"] = -5
h["__metadata__"]["trainer.state"] = json.dumps(s); t = json.dumps(h).encode(); t += b" " * (-len(t) % 8)
open(sys.argv[1], "wb").write(struct.pack("<Q", len(t)) + t + b[8 + n:])
PY
  # The optimizer's scalars (scalars.optimizer_scalars): 3 numbers instead of 5; one of them 1e300 (a float overflows).
  python3 - scalars3/checkpoints/epoch-0002.state.safetensors scalars_inf/checkpoints/epoch-0002.state.safetensors <<'PY'
import json, struct, sys
for path, value in ((sys.argv[1], "[0.5, 0.25, 1.0]"), (sys.argv[2], "[0.5, 0.25, 1e300, 0.0, 0.0]")):
    b = open(path, "rb").read(); n = struct.unpack("<Q", b[:8])[0]; h = json.loads(b[8:8 + n])
    s = json.loads(h["__metadata__"]["trainer.state"]); s["scalars"]["optimizer_scalars"] = "@@"
    h["__metadata__"]["trainer.state"] = json.dumps(s).replace('"@@"', value)
    t = json.dumps(h).encode(); t += b" " * (-len(t) % 8)
    open(path, "wb").write(struct.pack("<Q", len(t)) + t + b[8 + n:])
PY
  mkdir -p mine notes && { echo '# my notes'; cat tiny.yaml; } >mine/config.yaml
  : >notes/run.lock && echo mine >notes/notes.tmp-99999999
  for n in 16 17; do blocks_yaml $n >blocks$n.yaml; done
  for n in 64 65; do concat_yaml $n >concat$n.yaml; done
  python3 -c "open('long_type.yaml', 'w').write(open('tiny.yaml').read().replace('  type: adam', '  type: ' + 'a' * 5000000))"
  printf 'a,b,label\n1,2,0\n1\0x,2,1\n' >nul.csv
  sed 's|^  train: {format: disc.*|  train: {format: csv, path: nul.csv, label_column: label, header: true}|; /validation_split/d' \
    tiny.yaml >nulcsv.yaml
  mkdir -p out.npy && printf '0.1,0.2\n0.3,0.4\n' >x2.csv
}

# The hostile probe of issue 30: runs to resume, plot and predict from, and its inputs.
fixture_probe30() {
  need configs data checkpoints
  "$T" fit idx.yaml --out run_idx >/dev/null 2>&1 || die "the idx run failed"
  "$T" fit tiny.yaml --out run9 --epochs 3 >/dev/null 2>&1 || die "the 3-epoch run failed"
  cp -r run9 run17 && rm run17/metrics.csv && mkdir run17/metrics.csv
  cp -r run9 run18 && echo "1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20" >>run18/metrics.csv
  python3 - <<'PY'
import gzip, json, struct
def npy(path, descr, shape, payload):
    h = "{'descr': '%s', 'fortran_order': False, 'shape': (%s), }" % (descr, "".join(f"{s}," for s in shape))
    h = h.ljust(118) + "\n"
    open(path, "wb").write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(h)) + h.encode() + payload)
# The same five 4x4 images as uint8 NPY and as CSV numbers 0..255.
img = open("img.idx", "rb").read()[16:16 + 5 * 16]
npy("x5.npy", "|u1", (5, 1, 4, 4), img)
open("x5.csv", "w").write("".join(",".join(str(b) for b in img[i * 16:(i + 1) * 16]) + "\n" for i in range(5)))
# Channels-last images for a channels-first model.
npy("x-nhwc.npy", "<f4", (40, 4, 4, 3), struct.pack("<1920f", *[(i % 9) / 9 for i in range(1920)]))
# Weights that are all NaN.
b = open("good/model.safetensors", "rb").read(); n = struct.unpack("<Q", b[:8])[0]
data = bytearray(b[8 + n:]); nan = struct.pack("<f", float("nan"))
for i in range(0, len(data), 4): data[i:i + 4] = nan
open("nan.safetensors", "wb").write(b[:8 + n] + bytes(data))
# A class-names file of 40 KB that inflates to 40 MiB.
with gzip.open("bomb-names.txt.gz", "wb", compresslevel=9) as f:
    for _ in range(40): f.write(b"a" * (1 << 20))
# CIFAR-10 as 1,000 files of one record each.
import os
os.makedirs("c1000", exist_ok=True)
rec = lambda label: bytes([label]) + bytes((i * 3) % 256 for i in range(3072))
for k in range(1000): open(f"c1000/f{k:04d}.bin", "wb").write(rec(k % 10))
files = ", ".join(f"c1000/f{k:04d}.bin" for k in range(1000))
open("cifar1000.yaml", "w").write(open("cifar.yaml").read().replace("files: [cifar.bin]", "files: [" + files + "]"))
PY
  sed 's/{format: csv, path: good.csv}/{format: npy, x: x-nhwc.npy, y: y.npy}/; s/input_shape: \[2\]/input_shape: [3, 4, 4]/; s/layers: \[{type: dense/layers: [{type: flatten}, {type: dense/' csv.yaml >nhwc.yaml
  sed 's/units: 8/units: 032/' tiny.yaml >octal.yaml
  sed 's/^    - {type: dense, units: 8}/    - \&d {type: dense, units: 8}\n    - {type: relu}\n    - *d/' tiny.yaml >alias.yaml
  sed 's/^    - {type: dense, units: 8}/    - {type: dense, units: 8, name: dense_2}/' tiny.yaml >dupname.yaml
  sed 's/^    - {type: relu}/    - {type: batchnorm}/' tiny.yaml >bn.yaml
}

# Image folders (issue 28): good, with bad images, and bad folders; one to stream.
fixture_images() {
  /usr/bin/python3 - "$repo" <<'PY'
import os, shutil, struct, sys, zlib
repo = sys.argv[1]
def png(path, w, h, value=7, claim=None):  # an 8-bit gray PNG; claim: the (w, h) its header says
    cw, ch = claim or (w, h)
    chunk = lambda t, d: struct.pack(">I", len(d)) + t + d + struct.pack(">I", zlib.crc32(t + d))
    raw = b"".join(b"\0" + bytes([value]) * w for _ in range(h))
    open(path, "wb").write(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", cw, ch, 8, 0, 0, 0, 0)) +
                           chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b""))
def folder(root, per_class=4):
    shutil.rmtree(root, ignore_errors=True)
    for c in ("cat", "dog"):
        os.makedirs(f"{root}/{c}")
        for i in range(per_class): png(f"{root}/{c}/{i:02d}.png", 4, 4, (20 * i + (c == "dog") * 100) % 256)
folder("imgs")
for name in ("cut", "zero", "huge", "jpegcut", "size", "emptyclass", "loop"): folder(f"imgs-{name}")
good = open("imgs/cat/00.png", "rb").read()
open("imgs-cut/cat/01.png", "wb").write(good[:len(good) // 2])
open("imgs-zero/cat/01.png", "wb").write(b"")
png("imgs-huge/cat/01.png", 4, 4, claim=(100000, 100000))
jpeg = open(f"{repo}/tests/fuzz/corpus/fuzz_jpeg/baseline", "rb").read()[3:]  # after the fuzz target's 3 option bytes
open("imgs-jpegcut/cat/01.jpg", "wb").write(jpeg[:len(jpeg) * 2 // 3])
png("imgs-size/cat/01.png", 5, 4)
shutil.rmtree("imgs-emptyclass/dog"); os.makedirs("imgs-emptyclass/dog")
os.symlink("loop-b", "imgs-loop/cat/loop-a"); os.symlink("loop-a", "imgs-loop/cat/loop-b")
folder("imgs-stream", 10)
open("imgs-stream/dog/09.png", "wb").write(b"")  # the last file: met after some batches
os.makedirs("imgs-none", exist_ok=True)
PY
  cat >img.yaml <<'EOF'
model:
  input_shape: [1, 4, 4]
  layers: [{type: flatten}, {type: dense, units: 2}]
loss: {type: sparse_categorical_crossentropy, from_logits: true}
data:
  train: {format: image_folder, path: imgs}
  batch_size: 4
train: {epochs: 1, seed: 1}
EOF
}

# ---------------------------------------------------------------------------------------------
# Runners: a row whose "runner" cell is NAME ARGS runs as run_NAME COMMAND ARGS (in $W, in a bash
# of its own, $T the trainer); its exit status and stderr are the row's. The rest run COMMAND
# with `bash -o pipefail -c`.
# ---------------------------------------------------------------------------------------------

# wait_for GLOB: waits (up to 30 s) until a file matching GLOB exists.
wait_for() {
  for _ in $(seq 3000); do
    compgen -G "$1" >/dev/null && return 0
    sleep 0.01
  done
  echo "timed out waiting for $1" >&2
  return 1
}

# trainer_words TEXT: the words of a "trainer ARGS  # comment" command line, without "trainer", as
# the array `words`.
trainer_words() {
  local text="${1%%  #*}"
  [[ $text == "trainer "* ]] || { echo "not a trainer command: $text" >&2 && return 1; }
  eval "words=(${text#trainer })"
}

# The value that follows FLAG in `words`.
flag_value() {
  local i
  for ((i = 0; i + 1 < ${#words[@]}; i++)); do [ "${words[i]}" = "$1" ] && echo "${words[i + 1]}" && return 0; done
  return 1
}

# shows: runs COMMAND; what it prints on stdout (timestamps dropped) becomes one "shows:" line on
# stderr, the evidence of a row whose input is accepted. A `time` in it says "shows: S s elapsed".
run_shows() {
  local status=0
  TIMEFORMAT='shows: %3R s elapsed' bash -o pipefail -c "$1" >"$W/.shows" || status=$?
  sed -E 's/^\[[0-9-]+ [0-9:]+\] //; s/^ +//; s/  +/ /g' "$W/.shows" |
    awk 'NR > 1 { printf "; " } { printf "%s", $0 } END { if (NR) print "" }' | sed 's/^./shows: &/' >&2
  return "$status"
}

# signal GLOB [SECONDS]: COMMAND is "trainer ARGS & kill -SIG $![; kill -SIG $!][; trainer ARGS2]
# [  # comment]". Starts trainer ARGS, sends SIG once a file matches GLOB (and SECONDS later), a
# second time 0.05 s after when COMMAND says so, and waits. Its exit status is the row's; with a
# trainer ARGS2, the first must have died of SIG and ARGS2's status is the row's. A run stopped
# with exit 130 and a checkpoint must resume to the end of epoch 2, and after one signal leave no
# temporary file and print no warning.
run_signal() {
  local cmd="${1%%  #*}" glob="$2" delay="${3:-0}" p="" sig="" kills=0 rest status out config
  local words=()
  trap '[ -n "$p" ] && kill -9 $p 2>/dev/null; exit 124' TERM
  rest="${cmd#* & }"
  while [[ $rest == "kill -"* ]]; do
    sig="${rest#kill -}" && sig="${sig%% *}" && kills=$((kills + 1))
    rest="${rest#kill -"$sig" \$!}" && rest="${rest#; }"
  done
  [ -n "$sig" ] || { echo "run_signal: no kill in: $cmd" >&2 && return 99; }
  trainer_words "${cmd%% & *}" || return 99
  if [ -n "$rest" ]; then
    "$T" "${words[@]}" >/dev/null 2>&1 &
  else
    "$T" "${words[@]}" >/dev/null 2>"$W/.signalled" &
  fi
  p=$!
  wait_for "$glob" && sleep "$delay"
  kill -"$sig" $p
  [ "$kills" -lt 2 ] || { sleep 0.05 && kill -"$sig" $p; }
  wait $p 2>/dev/null
  status=$?
  p=""
  if [ -n "$rest" ]; then
    [ "$status" -eq $((128 + $(kill -l "$sig"))) ] || { echo "error: the first run exited $status, not by SIG$sig" >&2 && return 99; }
    trainer_words "$rest" || return 99
    exec "$T" "${words[@]}"
  fi
  cat "$W/.signalled" >&2
  out="$(flag_value --out)" && config="${words[1]}"
  if [ "$status" -eq 130 ] && compgen -G "$out/checkpoints/*.state.safetensors" >/dev/null; then
    if [ "$kills" -eq 1 ]; then # a second signal leaves at once: the --resume cleans up
      ! compgen -G "$out/checkpoints/*.tmp-*" >/dev/null || { echo "error: a temporary file is left in $out/checkpoints" >&2 && return 98; }
      ! grep -E -q 'warning|skipping checkpoint' "$W/.signalled" || { echo "error: a warning on stopping" >&2 && return 98; }
    fi
    "$T" fit "$config" --resume "$out" --epochs 2 >/dev/null 2>"$W/.resumed" ||
      { echo "error: trainer fit $config --resume $out --epochs 2 failed:" >&2 && cat "$W/.resumed" >&2 && return 98; }
  fi
  return "$status"
}

# concurrent GLOB [SECONDS]: COMMAND is "trainer ARGS1 & trainer ARGS2". Starts ARGS1, runs ARGS2
# once a file matches GLOB (and SECONDS later), then kills ARGS1. ARGS2 is the row's.
run_concurrent() {
  local cmd="${1%%  #*}" glob="$2" delay="${3:-0}" p="" status=0 words=()
  trap '[ -n "$p" ] && kill -9 $p 2>/dev/null; exit 124' TERM
  trainer_words "${cmd%% & *}" || return 99
  "$T" "${words[@]}" >/dev/null 2>&1 &
  p=$!
  wait_for "$glob" && sleep "$delay"
  trainer_words "${cmd#* & }" || return 99
  "$T" "${words[@]}" || status=$?
  kill -9 $p
  wait $p 2>/dev/null
  return "$status"
}

# tmpfs DIR SIZE [ro]: runs COMMAND with a tmpfs of SIZE (read-only with ro) mounted on DIR, in a
# private mount namespace. Exit 77 and "skipped: ..." where that cannot be mounted.
run_tmpfs() {
  local opts="size=$3"
  [ "${4:-}" != ro ] || opts="ro,$opts"
  mkdir -p "$2"
  unshare --mount --propagation private true 2>/dev/null || { echo "skipped: no private mount namespace here" >&2 && return 77; }
  # shellcheck disable=SC2016 # expanded by the inner bash
  exec unshare --mount --propagation private bash -o pipefail -c '
    mount -t tmpfs -o "$2" tmpfs "$1" 2>/dev/null || { echo "skipped: mount -t tmpfs is not permitted here" >&2; exit 77; }
    eval "$3"' - "$2" "$opts" "$1"
}

# pending SIG: runs the trainer command with SIG already pending (blocked) as it starts.
run_pending() {
  local words=()
  trainer_words "$1" || return 99
  exec python3 -c "import os, signal, sys; signal.pthread_sigmask(signal.SIG_BLOCK, [signal.SIG$2]); os.kill(os.getpid(), signal.SIG$2); os.execv(sys.argv[1], sys.argv[1:])" "$T" "${words[@]}"
}

# summary_kept KEY...: runs the trainer command (a --resume), which must leave these keys of the
# run's summary.json as they were.
run_summary_kept() {
  local words=() dir before after status=0
  trainer_words "$1" || return 99
  dir="$(flag_value --resume)" || return 99
  shift
  keys() { python3 -c 'import json, sys; s = json.load(open(sys.argv[1])); print(*(s[k] for k in sys.argv[2:]))' "$dir/summary.json" "$@"; }
  before="$(keys "$@")" || return 99
  "$T" "${words[@]}" >/dev/null || status=$?
  after="$(keys "$@")" || return 99
  local names
  names="$(printf '%s, ' "$@")"
  echo "shows: ${names%, } $before before, $after after" >&2
  [ "$before" = "$after" ] || return 98
  return "$status"
}

# json_records: runs the trainer command (a fit), whose run directory (--out) must then hold
# whole JSON records: every line of events.jsonl, and summary.json.
run_json_records() {
  local words=() status=0
  trainer_words "$1" || return 99
  "$T" "${words[@]}" >/dev/null || status=$?
  [ "$status" -eq 0 ] || return "$status"
  python3 - "$(flag_value --out)" <<'PY' >&2
import json, sys
lines = open(sys.argv[1] + "/events.jsonl", "rb").read().splitlines()
for line in lines: json.loads(line)
run_dir = json.load(open(sys.argv[1] + "/summary.json"))["run_dir"]
print(f"shows: events.jsonl: every line is JSON ({len(lines)} lines); summary.json: run_dir ...{run_dir[-6:]}")
PY
}

# ---------------------------------------------------------------------------------------------
# Rows
# ---------------------------------------------------------------------------------------------
# shellcheck disable=SC2046 # function names are words
export -f wait_for trainer_words flag_value $(compgen -A function run_)

made=" "
# need FIXTURE...: makes each fixture once (in $W).
need() {
  local f
  for f in "$@"; do
    [[ $made == *" $f "* ]] && continue
    declare -F "fixture_$f" >/dev/null || die "no fixture '$f' (in $CASES)"
    "fixture_$f"
    made+="$f "
  done
}

# The line of stderr ($W/.msg: timestamps dropped, the scratch directory shown as .) that holds
# WANT, else the first error or warning (or "skipped") line, else the first "interrupted" line,
# else "(none)".
message_of() {
  local want="$1" line=""
  case "$want" in "" | "(none)") ;; *) line="$(grep -F -m1 -- "$want" "$W/.msg")" ;; esac
  [ -n "$line" ] || line="$(grep -E -m1 '^(error|warning):|^skipped' "$W/.msg")" ||
    line="$(grep -E -m1 '^interrupted' "$W/.msg")" || line="(none)"
  printf '%s' "${line//|/\\|}"
}

# check WANT EXPECT CODE MESSAGE: the problems of a row's result, one a line (none: it passed).
check() {
  local want="$1" expect="$2" code="$3" msg="$4" rest
  [ "$code" = "$expect" ] || echo "exit $code, expected $expect"
  if [ "$want" = "(none)" ]; then
    [ "$msg" = "(none)" ] || echo "expected no error or warning"
  elif [ -n "$want" ] && ! grep -F -q -- "$want" "$W/.msg"; then
    echo "stderr does not hold: $want"
  fi
  case "$expect" in
    2 | 3 | 4) # one error line after the info lines (libgomp's own complaint cannot be suppressed)
      rest="$(grep -v -E '^\[[0-9-]+ [0-9:]+\] info:|^libgomp: |^$' "$W/.err")"
      if [ "$(printf '%s\n' "$rest" | wc -l)" -ne 1 ] || [[ $rest != "error: "* ]]; then
        echo "stderr is not one error line"
      elif [ "$(printf '%s' "$rest" | LC_ALL=C wc -c)" -gt 2000 ]; then
        echo "the error line is over 2,000 bytes"
      fi
      ;;
  esac
}

rows=()
n=0
mismatches=0
# run_row CASE COMMAND WANT EXPECT TEST RUNNER COMMAND_CELL: runs one row and adds it to the table.
run_row() {
  local name="$1" cmd="$2" want="$3" expect="$4" test="$5" runner="$6" cell="$7" code=0 msg problems
  local r=()
  if [ -z "$runner" ]; then
    timeout -s KILL "$LIMIT" bash -o pipefail -c "$cmd" >"$W/.out" 2>"$W/.err" </dev/null || code=$?
  else
    read -r -a r <<<"$runner"
    declare -F "run_${r[0]}" >/dev/null || die "$name: no runner '${r[0]}' (in $CASES)"
    timeout -k 5 -s TERM "$LIMIT" bash -c "run_${r[0]}"' "$@"' - "$cmd" "${r[@]:1}" >"$W/.out" 2>"$W/.err" </dev/null ||
      code=$?
  fi
  sed -E 's/^\[[0-9-]+ [0-9:]+\] //' "$W/.err" | sed "s#$W/##g; s#$W#.#g; s#$repo/##g" >"$W/.msg"
  n=$((n + 1))
  msg="$(message_of "$want")"
  [ "$code" = 77 ] && grep -q '^skipped' "$W/.msg" && code="skipped" # not possible on this machine
  local mark="" note=""
  if [ "$code" != skipped ]; then
    problems="$(check "$want" "$expect" "$code" "$msg")"
    if [ -n "$problems" ]; then
      mismatches=$((mismatches + 1))
      [ "$code" = "$expect" ] || mark=" **(expected $expect)**"
      note=" **(${problems//$'\n'/; })**"
      echo "MISMATCH: $name: ${problems//$'\n'/; }: $msg" >&2
    fi
  fi
  rows+=("| $name | $cell | $msg$note | $code$mark | $expect | $test |")
}

# The data file: "## SECTION" headings, each with a "fixtures: NAME..." line, then table rows
# | case | command | message | exit | test | runner |, cells split at | (a \| is a |).
trim() {
  local s="$1"
  s="${s#"${s%%[![:space:]]*}"}"
  printf '%s' "${s%"${s##*[![:space:]]}"}"
}
unquote() {
  local s="${1//$'\x1f'/|}"
  s="${s#\`}"
  printf '%s' "${s%\`}"
}
section="" fixtures="" shown=""
while IFS= read -r line <&3; do
  case "$line" in
    "## "*) section="${line#\#\# }" fixtures="" ;;
    "fixtures: "*) fixtures="${line#fixtures: }" && fixtures="${fixtures//\`/}" ;;
    "| case |"* | "|---"*) ;;
    "| "*)
      [ -n "$section" ] || die "a row before the first section: $line"
      IFS='|' read -r -a cells <<<"${line//\\|/$'\x1f'}"
      [ "${#cells[@]}" -ge 6 ] || die "not a row of 6 cells: $line"
      for i in 1 2 3 4 5 6; do cells[i]="$(trim "${cells[i]:-}")"; done
      name="${cells[1]//$'\x1f'/\\|}"
      if [ -n "$only" ] && ! grep -E -q -- "$only" <<<"${cells[1]//$'\x1f'/|}"; then continue; fi
      if [ "$shown" != "$section" ]; then
        shown="$section"
        rows+=("| **$section** | | | | | |")
        # shellcheck disable=SC2086 # the names are words
        need $fixtures </dev/null
      fi
      run_row "$name" "$(unquote "${cells[2]}")" "$(unquote "${cells[3]}")" "${cells[4]}" \
        "${cells[5]//$'\x1f'/\\|}" "$(unquote "${cells[6]}")" "${cells[2]//$'\x1f'/\\|}"
      ;;
  esac
done 3<"$CASES"
[ "$n" -gt 0 ] || die "no row of $CASES matches '$only'"

# No row wrote through a symbolic link or into a file given as --out.
if [[ $made == *" runs30 "* ]] && [ "$(cat victim.txt)" != precious ]; then
  echo "MISMATCH: a run wrote through a symbolic link into victim.txt" >&2
  mismatches=$((mismatches + 1))
fi
if [[ $made == *" configs "* ]] && [ "$(cat afile)" != "not a run directory" ]; then
  echo "MISMATCH: a run wrote into afile" >&2
  mismatches=$((mismatches + 1))
fi

echo "| case | command | message | exit | expected | test |"
echo "|---|---|---|---|---|---|"
printf '%s\n' "${rows[@]}"
secs=$((($(date +%s%N) - t_start) / 1000000000))
echo "bad_input_table: $n cases, $mismatches with an unexpected exit code or message, $secs s" >&2
[ "$mismatches" -eq 0 ]

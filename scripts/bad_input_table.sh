#!/usr/bin/env bash
# The "Bad input" table of docs/reliability.md (issue 10): creates every hostile input in a scratch
# directory, runs build/trainer on each and prints one Markdown row per case on stdout:
#   case | command | message | exit | expected | test
# "message" is the first error (or warning) line on stderr (timestamps dropped, the scratch
# directory shown as .); "test" is the Catch2 test case (or script) that checks the same exit code
# and message. Exits 1 when any exit code differs from the expected one.
#   scripts/bad_input_table.sh                 # about a minute on 2 cores
#   TRAINER=path/to/trainer scripts/bad_input_table.sh
#
# Unwritable outputs: the suite often runs as root, which ignores directory permissions, so an
# unwritable --out is a path below a regular file (afile/sub) or in /proc. The full disk is a 1 MiB
# tmpfs mounted in a private mount namespace (unshare); where that is not permitted the row says
# "skipped". Signals "during a checkpoint write" are sent as soon as a checkpoint's temporary file
# (*.tmp-PID) appears, while its 48 MB are being written.
set -uo pipefail
cd "$(dirname "$0")/.."
repo="$(pwd)"
T="$(realpath "${TRAINER:-build/trainer}")"
[ -x "$T" ] || { echo "bad_input_table: no trainer at $T (build it first: scripts/setup.sh)" >&2; exit 2; }
W="$(mktemp -d /tmp/badinput.XXXXXX)"
cleanup() {
  jobs -p | xargs -r kill -9 2>/dev/null
  rm -rf "$W"
}
trap cleanup EXIT
cd "$W"
t_start=$(date +%s%N)
export OMP_WAIT_POLICY=passive  # two trainers at once on 2 cores must not spin against each other
LIMIT="${CASE_TIMEOUT:-60}"      # seconds; a case that runs longer is a hang (exit 137)

# ---------------------------------------------------------------------------------------------
# Rows
# ---------------------------------------------------------------------------------------------
rows=()
mismatches=0
n=0
MSG_PATTERN='^(error|warning):'

# The message: the first line matching $MSG_PATTERN (default: error or warning) after the
# timestamps are dropped, else the first line starting with "interrupted", else "(none)".
message_of() {
  local f="$1" line
  line="$(sed -E 's/^\[[0-9-]+ [0-9:]+\] //' "$f" | grep -E -m1 -- "$MSG_PATTERN")" ||
    line="$(grep -E -m1 '^interrupted' "$f")" || line="(none)"
  line="${line//$W\//}"
  line="${line//$W/.}"
  line="${line//$repo\//}"
  line="${line//|/\\|}"
  printf '%s' "$line"
}

# add CASE EXPECTED TEST DISPLAY ERRFILE CODE
add() {
  local name="$1" expect="$2" test="$3" display="$4" errf="$5" code="$6"
  n=$((n + 1))
  local msg mark=""
  msg="$(message_of "$errf")"
  [ "$code" = 77 ] && grep -q '^skipped' "$errf" && code="skipped"  # not possible on this machine
  if [ "$code" != "$expect" ] && [ "$code" != skipped ]; then
    mismatches=$((mismatches + 1))
    mark=" **(expected $expect)**"
    echo "MISMATCH: $name: exit $code, expected $expect: $msg" >&2
  fi
  # A refused input (2, 3, 4) gets one line on stderr and nothing else.
  case "$expect" in
    2 | 3 | 4)
      local lines
      lines=$(grep -cv -E '^\[[0-9-]+ [0-9:]+\] info:' "$errf")
      [ "$lines" -eq 1 ] || echo "NOTE: $name: $lines lines on stderr" >&2
      ;;
  esac
  display="${display//$repo\//}"
  display="${display//|/\\|}"
  rows+=("| $name | \`$display\` | $msg | $code$mark | $expect | $test |")
}

# row CASE EXPECTED TEST -- trainer ARGS...: runs trainer ARGS (in $W) and adds its row.
row() {
  local name="$1" expect="$2" test="$3"
  shift 4
  local display code=0
  display="trainer$(printf ' %q' "$@")"
  timeout -s KILL "$LIMIT" "$T" "$@" >"$W/.out" 2>"$W/.err" </dev/null || code=$?
  add "$name" "$expect" "$test" "$display" "$W/.err" "$code"
}

# srow CASE EXPECTED TEST DISPLAY SNIPPET: runs the bash SNIPPET (in $W, $T is the trainer); its
# exit status and its stderr are the row's.
srow() {
  local name="$1" expect="$2" test="$3" display="$4" snippet="$5" code=0
  T="$T" W="$W" timeout -k 5 -s TERM "$LIMIT" bash -c "$snippet" >"$W/.out" 2>"$W/.err" </dev/null || code=$?
  add "$name" "$expect" "$test" "$display" "$W/.err" "$code"
}

section() { rows+=("| **$1** | | | | | |"); }

# Test references.
CFG="test_bad_input_config.cc"
CLI="test_bad_input_cli.cc"
TAB="test_bad_input_table.cc"
UNT="datasets/test_untrusted_files.cc"
CKP="test_checkpoint.cc"
HARDEN_CI="(branch harden-ci)"

# ---------------------------------------------------------------------------------------------
# Inputs
# ---------------------------------------------------------------------------------------------
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

# Data files in every format, good and hostile.
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
EOF
mkfifo data.fifo
mkdir data.dir

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

# Diverges: SGD at lr 1e6 overflows the weights within a few steps (tests/test_divergence.cc).
printf '1,2,0\n3,4,1\n5,6,2\n' >three_labels.csv
cat >sgd.yaml <<'EOF'
model:
  input_shape: [2]
  layers: [{type: dense, units: 16}, {type: relu}, {type: dense, units: 2}]
loss: {type: sparse_categorical_crossentropy, from_logits: true}
optimizer: {type: sgd, lr: 0.1}
data: {train: {format: disc, samples: 500, seed: 3}, num_classes: 2, batch_size: 10, validation_split: 0.2}
train: {epochs: 1, seed: 7}
EOF
# Long enough to be signalled: 4.2M parameters, so each checkpoint (weights + Adam state) is
# about 48 MB; 20 steps per epoch.
cat >slow.yaml <<'EOF'
model:
  input_shape: [2]
  layers: [{type: dense, units: 2048}, {type: relu}, {type: dense, units: 2048}, {type: relu}, {type: dense, units: 2}]
loss: {type: sparse_categorical_crossentropy, from_logits: true}
optimizer: {type: adam, lr: 0.001}
data: {train: {format: disc, samples: 2000, seed: 3}, num_classes: 2, batch_size: 100}
train: {epochs: 50, seed: 7}
EOF

# Checkpoints and weights: a good run of tiny.yaml (2 epochs), then damaged copies.
"$T" fit tiny.yaml --out good >/dev/null 2>&1 || { echo "bad_input_table: the good run failed" >&2; exit 2; }
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
"$T" fit npy.yaml --out good_npy >/dev/null 2>&1 || { echo "bad_input_table: the good npy run failed" >&2; exit 2; }
sed 's/units: 8/units: 9/' tiny.yaml >tiny9.yaml

# ---------------------------------------------------------------------------------------------
# Config
# ---------------------------------------------------------------------------------------------
section "Config"
row "malformed YAML" 3 "$TAB: bad-input table: config rows" -- fit malformed.yaml --no-out
row "duplicate key (lr twice)" 3 "$CLI: a duplicate key is a config error naming both lines" -- fit dup_lr.yaml --no-out
row "duplicate section (optimizer twice)" 3 "$CLI: a duplicate key is a config error naming both lines" -- fit dup_opt.yaml --no-out
row "empty config" 3 "$CLI: a config that is not a regular file, too big, too deep or empty ..." -- fit empty.yaml --set optimizer.lr=0.1
row "binary config (0xff bytes)" 3 "$TAB: bad-input table: config rows" -- fit binary.yaml
row "NUL and escape bytes in the config" 3 "$CLI: control and non-UTF-8 bytes ... are escaped in messages" -- fit nul.yaml
row "10,000-deep nesting" 3 "$CLI: a config that is not a regular file, too big, too deep or empty ..." -- fit deep.yaml
row "40 MB config" 3 "$TAB: bad-input table: config rows" -- fit huge.yaml
row "200,000-item list" 3 "$CLI: a config that is not a regular file, too big, too deep or empty ..." -- fit many.yaml
row "alias bomb (10^7 nodes)" 3 "$TAB: bad-input table: config rows" -- fit aliases.yaml
row "unknown key" 3 "$TAB: bad-input table: config rows" -- fit unknown_key.yaml
row "unknown layer type" 3 "$TAB: bad-input table: config rows" -- fit unknown_layer.yaml
row "merge key of a value (<<: 5)" 3 "$TAB: bad-input table: config rows" -- fit merge_value.yaml
row "device that is not one" 3 "$TAB: bad-input table: config rows" -- fit device_tpu.yaml
row "device mapping, misspelt key" 3 "$TAB: bad-input table: config rows" -- fit device_key.yaml
row "config missing" 2 "$TAB: bad-input table: config rows" -- fit missing.yaml
row "config is a directory" 2 "$TAB: bad-input table: config rows" -- fit adir
row "config is a FIFO" 2 "$CLI: a config that is not a regular file, too big, too deep or empty ..." -- fit fifo.yaml
row "config is /dev/zero" 2 "$CLI: a config that is not a regular file, too big, too deep or empty ..." -- fit /dev/zero

# ---------------------------------------------------------------------------------------------
# Sizes
# ---------------------------------------------------------------------------------------------
section "Sizes"
row "batch_size: 0" 3 "$TAB: bad-input table: size rows" -- fit batch0.yaml --no-out
row "batch_size: -5" 3 "$TAB: bad-input table: size rows" -- fit batchneg.yaml --no-out
row "units: -3" 3 "$TAB: bad-input table: size rows" -- fit units_neg.yaml --no-out
row "units: 0" 3 "$TAB: bad-input table: size rows" -- fit units0.yaml --no-out
row "num_classes: 0" 3 "$TAB: bad-input table: size rows" -- fit classes0.yaml --no-out
row "normalize.scale: 0" 3 "$CLI: config errors from --set and the data section exit 3 ..." -- fit scale0.yaml --no-out
row "input_shape product overflows int64" 3 "$CLI: a size product that overflows is a config error in every verb, never a crash" -- \
  fit tiny.yaml --no-out --set 'model.input_shape=[769546, 494770, 48448661]' --set 'model.layers=[{type: global_avg_pool}]'
row "input_shape 2^31 per entry (summary)" 3 "$CLI: a size product that overflows is a config error in every verb, never a crash" -- \
  summary tiny.yaml --set 'model.input_shape=[2147483648, 2147483648, 2147483648]'
row "10^10-parameter dense layer" 3 "$TAB: bad-input table: size rows" -- fit tiny.yaml --no-out --set 'model.input_shape=[100000]' --set model.layers.0.units=100000
row "batch too large for one tensor (bench)" 3 "$CLI: a size product that overflows is a config error in every verb, never a crash" -- \
  bench "$repo/configs/fashion_mnist_cnn.yaml" --batch-size 1048576
row "kernel larger than its input" 3 "$TAB: bad-input table: size rows" -- fit tiny.yaml --no-out --set 'model.input_shape=[1, 4, 4]' \
  --set 'model.layers=[{type: conv2d, filters: 2, kernel_size: 9}, {type: flatten}, {type: dense, units: 2}]'
row "avgpool2d padding above half its window" 3 "test_layer_rules.cc: pooling padding above half the window is a config error, ..." -- \
  fit tiny.yaml --no-out --set 'model.input_shape=[1, 4, 4]' \
  --set 'model.layers=[{type: avgpool2d, pool_size: 2, padding: 2}, {type: flatten}, {type: dense, units: 2}]'
row "binary_cross_entropy with a label of 2 (csv)" 4 "test_value_losses.cc: binary targets outside 0 and 1 and a wrong target width are data errors" -- \
  fit tiny.yaml --no-out --set loss=binary_cross_entropy --set 'model.layers=[{type: dense, units: 1}]' \
  --set 'data.train={format: csv, path: three_labels.csv}' --set data.validation_split=0
row "train.epochs: 0" 3 "$TAB: bad-input table: size rows" -- fit tiny.yaml --no-out --set train.epochs=0
row "--epochs 0" 2 "$TAB: bad-input table: flag rows" -- fit tiny.yaml --no-out --epochs 0
row "--batch-size 99999999999" 2 "$TAB: bad-input table: flag rows" -- fit tiny.yaml --no-out --batch-size 99999999999

# ---------------------------------------------------------------------------------------------
# Flags
# ---------------------------------------------------------------------------------------------
section "Flags"
row "unknown verb" 2 "$CLI: usage errors are one line pointing at the verb's --help, exit 2" -- frobnicate
row "unknown flag" 2 "$CLI: usage errors are one line pointing at the verb's --help, exit 2" -- fit tiny.yaml --frobnicate
row "--epochs not a number" 2 "$CLI: usage errors are one line pointing at the verb's --help, exit 2" -- fit tiny.yaml --epochs zero
row "--out ''" 2 "$CLI: usage errors are one line pointing at the verb's --help, exit 2" -- fit tiny.yaml --out ''
row "--resume ''" 2 "$CLI: usage errors are one line pointing at the verb's --help, exit 2" -- fit tiny.yaml --resume ''
row "--device ''" 2 "$CLI: usage errors are one line pointing at the verb's --help, exit 2" -- fit tiny.yaml --device ''
row "--device tpu" 2 "$CLI: usage errors are one line pointing at the verb's --help, exit 2" -- fit tiny.yaml --device tpu
row "--device gpu:7 (no such GPU)" 5 "$TAB: bad-input table: flag rows" -- fit tiny.yaml --no-out --device gpu:7
row "--set without =" 2 "$TAB: bad-input table: flag rows" -- fit tiny.yaml --no-out --set optimizer.lr
row "--set ''" 2 "$CLI: usage errors are one line pointing at the verb's --help, exit 2" -- summary tiny.yaml --set ''
row "--set empty key segment" 2 "$CLI: usage errors are one line pointing at the verb's --help, exit 2" -- fit tiny.yaml --set optimizer.lr.=1
row "--set index 10^23" 3 "$CLI: config errors from --set and the data section exit 3 ..." -- fit tiny.yaml --set model.layers.99999999999999999999999.units=3
row "--set value not YAML" 3 "$TAB: bad-input table: flag rows" -- fit tiny.yaml --no-out --set 'model.input_shape=[1,'
row "--set unknown key" 3 "$TAB: bad-input table: flag rows" -- fit tiny.yaml --no-out --set optimizer.lrr=0.1
row "escape bytes in an argument" 2 "$CLI: control and non-UTF-8 bytes ... are escaped in messages" -- fit $'\e[31mred\377'
row "--out and --no-out" 2 "$TAB: bad-input table: flag rows" -- fit tiny.yaml --out x --no-out

# ---------------------------------------------------------------------------------------------
# Data
# ---------------------------------------------------------------------------------------------
section "Data"
row "missing data file" 4 "$TAB: bad-input table: data rows" -- fit idx.yaml --no-out --set data.train.images=missing.idx
row "truncated IDX" 4 "$TAB: bad-input table: data rows" -- fit idx.yaml --no-out --set data.train.images=img-cut.idx
row "IDX with a wrong magic" 4 "$TAB: bad-input table: data rows" -- fit idx.yaml --no-out --set data.train.images=img-magic.idx
row "gzip bomb (64 MiB of zeros behind a valid header)" 4 "$UNT: a gzip IDX file must inflate to exactly the size its header gives ..." -- \
  fit idx.yaml --no-out --set data.train.images=bomb.idx.gz
row "gzip IDX header claiming 3.4 TB" 4 "$UNT: a gzip IDX header claiming more than the file can inflate to ..." -- \
  fit idx.yaml --no-out --set data.train.images=lying.idx.gz
row "truncated gzip stream" 4 "$TAB: bad-input table: data rows" -- fit idx.yaml --no-out --set data.train.images=cut.idx.gz
row "corrupt gzip stream" 4 "$TAB: bad-input table: data rows" -- fit idx.yaml --no-out --set data.train.images=corrupt.idx.gz
row "IDX label out of range" 4 "$TAB: bad-input table: data rows" -- fit idx.yaml --no-out --set data.train.labels=lab-range.idx
row "IDX images and labels disagree in count" 4 "$TAB: bad-input table: data rows" -- fit idx.yaml --no-out --set data.train.labels=lab-short.idx
row "IDX shape differs from the model" 4 "$TAB: bad-input table: data rows" -- fit idx.yaml --no-out --set 'model.input_shape=[1, 5, 5]'
row "data file is a FIFO" 4 "$UNT: trainer fit exits 4 naming a data file that is a FIFO or a device, without blocking" -- \
  fit idx.yaml --no-out --set data.train.images=data.fifo
row "data file is /dev/zero" 4 "$UNT: trainer fit exits 4 naming a data file that is a FIFO or a device, without blocking" -- \
  fit idx.yaml --no-out --set data.train.images=/dev/zero
row "data file is a directory" 4 "$TAB: bad-input table: data rows" -- fit idx.yaml --no-out --set data.train.labels=data.dir
row "CIFAR-10 record cut short" 4 "$TAB: bad-input table: data rows" -- fit cifar.yaml --no-out --set 'data.train.files=[cifar-cut.bin]'
row "CIFAR-10 label 10" 4 "$TAB: bad-input table: data rows" -- fit cifar.yaml --no-out --set 'data.train.files=[cifar-label.bin]'
row "CSV ragged row" 4 "$TAB: bad-input table: data rows" -- fit csv.yaml --no-out --set data.train.path=ragged.csv
row "CSV text in a number column" 4 "$TAB: bad-input table: data rows" -- fit csv.yaml --no-out --set data.train.path=text.csv
row "CSV label out of range" 4 "$TAB: bad-input table: data rows" -- fit csv.yaml --no-out --set data.train.path=label.csv
row "CSV empty file" 4 "$TAB: bad-input table: data rows" -- fit csv.yaml --no-out --set data.train.path=empty.csv
row "CSV string label in a numeric label column" 4 "$TAB: bad-input table: CSV table rows" -- \
  fit csv.yaml --no-out --set data.train.path=label-string.csv
row "CSV fractional label for a classification loss" 4 "$TAB: bad-input table: CSV table rows" -- \
  fit csv.yaml --no-out --set data.train.path=fraction.csv
row "CSV missing value" 4 "$TAB: bad-input table: CSV table rows" -- fit csv.yaml --no-out --set data.train.path=missing.csv
row "CSV unseen category" 4 "$TAB: bad-input table: CSV table rows" -- fit category.yaml --no-out
row "CSV multi-label row with an unknown label" 4 "$TAB: bad-input table: CSV task rows" -- fit multilabel.yaml --no-out
row "CSV string target for a regression loss" 4 "$TAB: bad-input table: CSV task rows" -- fit regression.yaml --no-out
row "CSV columns differ from the model" 4 "$TAB: bad-input table: data rows" -- fit csv.yaml --no-out --set 'model.input_shape=[3]'
row "NPY truncated" 4 "$TAB: bad-input table: data rows" -- fit npy.yaml --no-out --set data.train.x=x-cut.npy
row "NPY Fortran order" 4 "$TAB: bad-input table: data rows" -- fit npy.yaml --no-out --set data.train.x=x-fortran.npy
row "NPY object array" 4 "$TAB: bad-input table: data rows" -- fit npy.yaml --no-out --set data.train.x=x-object.npy
row "NPY header claiming 1.6e19 elements" 4 "$TAB: bad-input table: data rows" -- fit npy.yaml --no-out --set data.train.x=x-lying.npy
row "NPY not an NPY file" 4 "$TAB: bad-input table: data rows" -- fit npy.yaml --no-out --set data.train.x=x-garbage.npy
row "NPY label out of range" 4 "$TAB: bad-input table: data rows" -- fit npy.yaml --no-out --set data.train.y=y-range.npy
row "sequences: token not a number" 4 "$TAB: bad-input table: data rows" -- fit seq.yaml --no-out --set data.train.path=seq-token.txt
row "sequences: negative token" 4 "$TAB: bad-input table: data rows" -- fit seq.yaml --no-out --set data.train.path=seq-neg.txt
row "sequences: label out of range" 4 "$TAB: bad-input table: data rows" -- fit seq.yaml --no-out --set data.train.path=seq-label.txt

# ---------------------------------------------------------------------------------------------
# Checkpoints and weights
# ---------------------------------------------------------------------------------------------
section "Checkpoints and weights"
row "--weights missing" 2 "$TAB: bad-input table: checkpoint rows" -- eval tiny.yaml --weights missing.safetensors
row "--weights of 3 bytes" 4 "$TAB: bad-input table: checkpoint rows" -- eval tiny.yaml --weights short.safetensors
row "--weights truncated" 4 "$TAB: bad-input table: checkpoint rows" -- eval tiny.yaml --weights cut.safetensors
row "--weights header length 2^62" 4 "$TAB: bad-input table: checkpoint rows" -- eval tiny.yaml --weights huge-header.safetensors
row "--weights header not JSON" 4 "$TAB: bad-input table: checkpoint rows" -- eval tiny.yaml --weights json.safetensors
row "--weights is a directory" 4 "$CKP: directories, FIFOs and truncated reads are data errors, never a hang or garbage" -- \
  eval tiny.yaml --weights weights.dir.safetensors
row "--weights is a FIFO" 4 "$CKP: directories, FIFOs and truncated reads are data errors, never a hang or garbage" -- \
  eval tiny.yaml --weights weights.fifo.safetensors
row "--weights of another model" 3 "$TAB: bad-input table: checkpoint rows" -- eval tiny9.yaml --weights good
row "--resume: corrupt state file" 4 "$CKP: resuming from a damaged or non-regular state file is a data error (exit 4) naming it" -- \
  fit tiny.yaml --resume bad_state --epochs 3
row "--resume: truncated checkpoint weights" 4 "$TAB: bad-input table: checkpoint rows" -- fit tiny.yaml --resume cut_ckpt --epochs 3
row "--resume: checkpoint replaced by a FIFO" 4 "$TAB: bad-input table: checkpoint rows" -- fit tiny.yaml --resume fifo_ckpt --epochs 3
row "--resume with a changed model" 3 "$CKP: resuming with a changed model or optimizer is a config error naming the difference" -- \
  fit tiny9.yaml --resume good --epochs 3
row "--resume: directory missing" 2 "$TAB: bad-input table: checkpoint rows" -- fit tiny.yaml --resume nowhere
row "--resume: no checkpoint in it" 2 "$TAB: bad-input table: checkpoint rows" -- fit tiny.yaml --resume nockpt
row "--out at a run with checkpoints" 2 "$TAB: bad-input table: checkpoint rows" -- fit tiny.yaml --out good

# ---------------------------------------------------------------------------------------------
# Outputs and disk
# ---------------------------------------------------------------------------------------------
section "Outputs and disk"
row "--out at a file" 2 "$CLI: an existing file given as --out is a usage error before the run starts" -- fit tiny.yaml --out afile
row "--out below a file (unwritable)" 2 "$TAB: bad-input table: output rows ..." -- fit tiny.yaml --out afile/sub
row "--out in /proc (unwritable)" 2 "$TAB: bad-input table: output rows ..." -- fit tiny.yaml --out /proc/trainer-run
row "predict --output below a file" 2 "$TAB: bad-input table: output rows ..." -- predict npy.yaml --weights good_npy --input x.npy --output afile/p.npy
srow "closed stdout (\`\| head -1\`)" 0 "test_signals.cc: fit with a closed stdout goes on and completes its run directory" \
  "trainer fit tiny.yaml --out piped --epochs 5 | head -1" \
  '"$T" fit tiny.yaml --out piped --epochs 5 | head -1 >/dev/null; exit ${PIPESTATUS[0]}'
# 67k parameters: each checkpoint (weights + Adam state) is 0.8 MB, and all are kept.
wide='model.layers=[{type: dense, units: 256}, {type: relu}, {type: dense, units: 256}, {type: relu}, {type: dense, units: 2}]'
cat >full_disk.sh <<'EOF'
mkdir -p disk
unshare --mount --propagation private true 2>/dev/null || { echo "skipped: no private mount namespace here" >&2; exit 77; }
exec unshare --mount --propagation private bash -c '
  mount -t tmpfs -o size=2m tmpfs disk 2>/dev/null || { echo "skipped: mount -t tmpfs is not permitted here" >&2; exit 77; }
  "$T" fit tiny.yaml --out disk/run --epochs 30 --set checkpoint.keep_last=0 --set "$1"' - "$1"
EOF
MSG_PATTERN='^(error|warning|skipped)'
srow "full disk (2 MiB tmpfs)" 5 "scripts/full_disk_test.sh $HARDEN_CI" \
  "trainer fit tiny.yaml --out disk/run --epochs 30 --set checkpoint.keep_last=0 --set '$wide'  # disk: a 2 MiB tmpfs" \
  "bash full_disk.sh '$wide'"
MSG_PATTERN='^(error|warning):'

# ---------------------------------------------------------------------------------------------
# NaN
# ---------------------------------------------------------------------------------------------
section "NaN"
row "diverges, train.on_nan: stop" 5 "test_divergence.cc: a diverging run stops with exit 5 naming epoch and step, ..." -- \
  fit sgd.yaml --out nan_stop --set optimizer.lr=1e6
MSG_PATTERN='^warning: epoch'
row "diverges, train.on_nan: skip" 0 "test_divergence.cc: with train.on_nan: skip the non-finite batches are skipped, ..." -- \
  fit sgd.yaml --out nan_skip --set optimizer.lr=1e6 --set train.on_nan=skip --set train.divergence=warn
MSG_PATTERN='^error: the training diverged: the training loss'
row "loss grows to 1e29 (finite)" 5 "test_divergence.cc: a loss that grows by orders of magnitude stops the run, or ..." -- \
  fit sgd.yaml --out nan_grow --set 'optimizer={type: adam, lr: 1.0e6}' --epochs 2
MSG_PATTERN='^(error|warning):'
row "loss grows to 1e29, train.divergence: warn" 0 "test_divergence.cc: a loss that grows by orders of magnitude stops the run, or ..." -- \
  fit sgd.yaml --out nan_grow_warn --set 'optimizer={type: adam, lr: 1.0e6}' --epochs 2 --set train.divergence=warn

# ---------------------------------------------------------------------------------------------
# Signals
# ---------------------------------------------------------------------------------------------
section "Signals"
# Helpers for the snippets: wait_for GLOB waits (up to 30 s) until a file matching GLOB exists.
helpers='
p=""
trap '"'"'[ -n "$p" ] && kill -9 $p 2>/dev/null; exit 124'"'"' TERM
wait_for() { for _ in $(seq 3000); do compgen -G "$1" >/dev/null && return 0; sleep 0.01; done; echo "timed out waiting for $1" >&2; return 1; }
'
for sig in INT TERM; do
  srow "SIG$sig during start-up" 130 "test_signals.cc: SIGTERM during start-up stops before the first step with one message and exit 130" \
    "trainer fit configs/fashion_mnist_cnn.yaml --out start_$sig & kill -$sig \$!  # once start_$sig exists: reading the data" \
    "$helpers"'"$T" fit "'"$repo"'/configs/fashion_mnist_cnn.yaml" --out start_'$sig' & p=$!; wait_for start_'$sig'; kill -'$sig' $p; wait $p'
  srow "SIG$sig during training" 130 "$TAB: bad-input table: signal rows (... during training ...)" \
    "trainer fit slow.yaml --out train_$sig & kill -$sig \$!  # in epoch 2" \
    "$helpers"'"$T" fit slow.yaml --out train_'$sig' & p=$!; wait_for "train_'$sig'/checkpoints/epoch-0001.state.safetensors" && sleep 0.2; kill -'$sig' $p; wait $p'
  srow "SIG$sig during a checkpoint write" 130 "$TAB: bad-input table: signal rows (... during a checkpoint write ...)" \
    "trainer fit slow.yaml --out ckpt_$sig & kill -$sig \$!  # once checkpoints/*.tmp-PID exists" \
    "$helpers"'"$T" fit slow.yaml --out ckpt_'$sig' & p=$!; wait_for "ckpt_'$sig'/checkpoints/*.tmp-*" && kill -'$sig' $p; wait $p'
done
MSG_PATTERN='^(error|warning|stopping)'
srow "second SIGINT" 130 "$TAB: bad-input table: signal rows (... during training ...)" \
  "trainer fit slow.yaml --out twice & kill -INT \$!; kill -INT \$!" \
  "$helpers"'"$T" fit slow.yaml --out twice & p=$!; wait_for "twice/checkpoints/epoch-0001.state.safetensors" && sleep 0.2; kill -INT $p; sleep 0.05; kill -INT $p; wait $p'
MSG_PATTERN='^(error|warning|info: removed|info: resum)'
srow "SIGKILL during training, then --resume" 0 "scripts/kill_loop.sh $HARDEN_CI; test_run_lock.cc: the run lock is released when its holder is killed with SIGKILL" \
  "trainer fit slow.yaml --out kill9 --epochs 3 & kill -KILL \$!; trainer fit slow.yaml --resume kill9 --epochs 3" \
  "$helpers"'"$T" fit slow.yaml --out kill9 --epochs 3 >/dev/null 2>&1 & p=$!; wait_for "kill9/checkpoints/epoch-0001.state.safetensors" && sleep 0.2; kill -KILL $p; wait $p; [ $? -eq 137 ] || exit 99; "$T" fit slow.yaml --resume kill9 --epochs 3'
srow "SIGKILL during a checkpoint write, then --resume" 0 "scripts/kill_loop.sh $HARDEN_CI; test_run_lock.cc: temporary files of dead processes are removed ..." \
  "trainer fit slow.yaml --out kill9w --epochs 3 & kill -KILL \$!  # once epoch 2's *.tmp-PID exists; trainer fit slow.yaml --resume kill9w --epochs 3" \
  "$helpers"'"$T" fit slow.yaml --out kill9w --epochs 3 >/dev/null 2>&1 & p=$!; wait_for "kill9w/checkpoints/epoch-0001.state.safetensors" && wait_for "kill9w/checkpoints/epoch-0002*.tmp-*" && kill -KILL $p; wait $p; [ $? -eq 137 ] || exit 99; "$T" fit slow.yaml --resume kill9w --epochs 3'
MSG_PATTERN='^(error|warning):'

# ---------------------------------------------------------------------------------------------
# Concurrency
# ---------------------------------------------------------------------------------------------
section "Concurrency"
srow "two runs on one --out" 2 "test_run_lock.cc: a second fit or --resume on a run directory in use fails at once ...; scripts/concurrent_writers_test.sh $HARDEN_CI" \
  "trainer fit slow.yaml --out shared & trainer fit slow.yaml --out shared" \
  "$helpers"'"$T" fit slow.yaml --out shared >/dev/null 2>&1 & p=$!; wait_for shared/run.lock && sleep 0.1; "$T" fit slow.yaml --out shared; c=$?; kill -9 $p; exit $c'
srow "two --resume of one directory" 2 "test_run_lock.cc: a second fit or --resume on a run directory in use fails at once ...; scripts/concurrent_writers_test.sh $HARDEN_CI" \
  "trainer fit slow.yaml --resume shared2 & trainer fit slow.yaml --resume shared2" \
  "$helpers"'"$T" fit slow.yaml --out shared2 --epochs 1 >/dev/null 2>&1 || exit 98; "$T" fit slow.yaml --resume shared2 >/dev/null 2>&1 & p=$!; wait_for "shared2/checkpoints/epoch-0002.*"; "$T" fit slow.yaml --resume shared2; c=$?; kill -9 $p; exit $c'

# ---------------------------------------------------------------------------------------------
# Run directories, crashes and messages (issue 30)
# ---------------------------------------------------------------------------------------------
section "Run directories, crashes and messages"
R30="test_bad_input_table_robust.cc: bad-input table: issue 30 rows ..."
HOSTILE="crash/test_run_dir_hostile.cc"
"$T" fit tiny.yaml --epochs 2 --out run30 >/dev/null 2>&1 || { echo "bad_input_table: the issue-30 run failed" >&2; exit 2; }
printf 'precious\n' >victim.txt
for c in link_csv link_ckpt renamed deleted negative; do cp -r run30 "$c"; done
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
mkdir -p mine notes && { echo '# my notes'; cat tiny.yaml; } >mine/config.yaml
: >notes/run.lock && echo mine >notes/notes.tmp-99999999
{
  sed -n '1,/^  layers:/p' tiny.yaml | sed '$d'
  echo '  blocks:'
  for i in $(seq 0 16); do echo "    b$i: {layers: [{type: $([ "$i" -lt 16 ] && echo "b$((i + 1))" || echo relu)}]}"; done
  echo '  layers: [{type: b0}, {type: dense, units: 2}]'
  sed -n '/^loss:/,$p' tiny.yaml
} >blocks17.yaml
{
  sed -n '1,/^  layers:/p' tiny.yaml
  for i in $(seq 0 64); do echo "    - {type: dense, units: 2, name: d$i, inputs: [input]}"; done
  echo "    - {type: concat, inputs: [$(seq -s ', ' -f 'd%g' 0 64)]}"
  echo '    - {type: dense, units: 2}'
  sed -n '/^loss:/,$p' tiny.yaml
} >concat65.yaml
python3 -c "open('long_type.yaml', 'w').write(open('tiny.yaml').read().replace('  type: adam', '  type: ' + 'a' * 5000000))"
printf 'a,b,label\n1,2,0\n1\0x,2,1\n' >nul.csv
sed 's|^  train: {format: disc.*|  train: {format: csv, path: nul.csv, label_column: label, header: true}|; /validation_split/d' \
  tiny.yaml >nulcsv.yaml
mkdir -p out.npy && printf '0.1,0.2\n0.3,0.4\n' >x2.csv
deep="model.blocks.b.$(printf 'x.%.0s' $(seq 40000))y=1"
row "metrics.csv a symbolic link (--resume)" 4 "$HOSTILE: a symbolic link among a run's files is refused ..." -- \
  fit tiny.yaml --resume link_csv --epochs 3
row "checkpoints/ a symbolic link (--resume)" 4 "$HOSTILE: a symbolic link among a run's files is refused ..." -- \
  fit tiny.yaml --resume link_ckpt --epochs 3
row "--out: the user's own config.yaml" 2 "$HOSTILE: an --out holding files no trainer run wrote is refused ..." -- \
  fit mine/config.yaml --out mine
row "--out: a file no run wrote (notes.tmp-N)" 2 "$HOSTILE: an --out holding files no trainer run wrote is refused ..." -- \
  fit tiny.yaml --out notes
row "--resume: state epochs_done -5" 4 "$HOSTILE: a checkpoint's state is checked field by field ..." -- \
  fit tiny.yaml --resume negative --epochs 3
row "--resume: epoch-1 weights renamed epoch 2" 4 "$HOSTILE: a checkpoint's state is checked field by field ..." -- \
  fit tiny.yaml --resume renamed --epochs 3
row "--resume: weights file deleted" 4 "$HOSTILE: a checkpoint's state is checked field by field ..." -- \
  fit tiny.yaml --resume deleted --epochs 3
srow "--set key 40,000 levels deep" 3 "$R30" "trainer fit tiny.yaml --no-out --set model.blocks.b.x.x.(40,000 x).y=1" \
  '"$T" fit tiny.yaml --no-out --set "'"$deep"'"'
srow "OMP_NUM_THREADS=99999" 2 "$R30" "OMP_NUM_THREADS=99999 trainer fit tiny.yaml --no-out" \
  'OMP_NUM_THREADS=99999 "$T" fit tiny.yaml --no-out'
srow "--threads 3 on 1 core" 0 "$R30" "taskset -c 0 trainer fit tiny.yaml --no-out --epochs 1 --threads 3" \
  'taskset -c 0 "$T" fit tiny.yaml --no-out --epochs 1 --threads 3'
srow "--out not UTF-8 (byte 0xff)" 0 "$R30" "trainer fit tiny.yaml --out \$'run\\xff'" \
  '"$T" fit tiny.yaml --out "$(printf "run\377")"'
row "format: random, 2^32 samples" 3 "$R30" -- fit tiny.yaml --no-out --set data.train.format=random --set data.train.samples=4294967296
row "17 nested blocks" 3 "$R30" -- fit blocks17.yaml --no-out
row "concat of 65 inputs" 3 "$R30" -- fit concat65.yaml --no-out
row "NUL byte in a CSV cell" 4 "$R30" -- fit nulcsv.yaml --no-out
srow "5 MB optimizer.type" 3 "$R30" "trainer fit long_type.yaml --no-out  # type: aaa...a (5,000,000 bytes)" \
  '"$T" fit long_type.yaml --no-out'
row "predict --output onto a directory" 2 "$R30" -- predict tiny.yaml --weights run30 --input x2.csv --output out.npy
cat >readonly.sh <<'EOF'
mkdir -p ro
unshare --mount --propagation private true 2>/dev/null || { echo "skipped: no private mount namespace here" >&2; exit 77; }
exec unshare --mount --propagation private bash -c '
  mount -t tmpfs -o ro,size=1m tmpfs ro 2>/dev/null || { echo "skipped: mount -t tmpfs is not permitted here" >&2; exit 77; }
  "$T" fit tiny.yaml --out ro'
EOF
srow "read-only --out" 2 "test_bad_input_table_robust.cc: bad-input table: a read-only --out is a usage error ..." \
  "trainer fit tiny.yaml --out ro  # ro: a read-only tmpfs" 'bash readonly.sh'
srow "SIGINT to eval" 130 "test_signals.cc: the first SIGINT or SIGTERM ends eval, predict and bench with exit 130; ..." \
  "trainer eval run30  # SIGINT pending as it starts" \
  'python3 -c "import os, signal, sys; signal.pthread_sigmask(signal.SIG_BLOCK, [signal.SIGINT]); os.kill(os.getpid(), signal.SIGINT); os.execv(sys.argv[1], sys.argv[1:])" "$T" eval run30'
[ "$(cat victim.txt)" = precious ] || { echo "MISMATCH: a run wrote through a symbolic link into victim.txt" >&2; mismatches=$((mismatches + 1)); }

# ---------------------------------------------------------------------------------------------
# The hostile probe of issue 30, item by item: the rows above cover items 8, 11, 12, 14-17, 19,
# 21, 23 and 24; these the rest. A row whose input is now accepted shows its evidence as a
# "shows:" line (the summary's layer, the recorded value, the two outputs compared).
# ---------------------------------------------------------------------------------------------
section "Hostile probe, item by item (issue 30)"
"$T" fit idx.yaml --out run_idx >/dev/null 2>&1 || { echo "bad_input_table: the idx run failed" >&2; exit 2; }
"$T" fit tiny.yaml --out run9 --epochs 3 >/dev/null 2>&1 || { echo "bad_input_table: the 3-epoch run failed" >&2; exit 2; }
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
MSG_PATTERN='^(error|warning|shows):'
srow "30.1 the default byte scale (1/255) in the resolved config" 0 "test_run_config_scale.cc" \
  "trainer fit idx.yaml --print-config | grep scale" \
  '"$T" fit idx.yaml --print-config | grep -m1 "scale:" | sed "s/^ */shows: data.normalize./" >&2'
srow "30.2 predict: the same pixels as uint8 .npy and as .csv" 0 "test_run_config_scale.cc" \
  "trainer predict run_idx --input x5.npy --output a.csv; ... --input x5.csv --output b.csv; cmp a.csv b.csv" \
  '"$T" predict run_idx --input x5.npy --output a.csv 2>/dev/null && "$T" predict run_idx --input x5.csv --output b.csv 2>/dev/null && cmp a.csv b.csv && echo "shows: a.csv and b.csv are byte-identical (5 x 10 probabilities)" >&2'
row "30.3 (N, 4, 4, 3) NPY for input_shape [3, 4, 4]" 4 "test_layout_guard.cc" -- fit nhwc.yaml --no-out
srow "30.4 units: 032 (a leading zero)" 0 "test_yaml_integers.cc" "trainer summary octal.yaml | grep dense_1" \
  '"$T" summary octal.yaml | grep -m1 "^dense_1" | sed "s/^/shows: /; s/  */ /g" >&2'
srow "30.5 --set on an aliased item (- *d)" 0 "test_config.cc: a --set override on an aliased item changes that item only ..." \
  "trainer summary alias.yaml --set model.layers.2.units=5 | grep dense_[12]" \
  '"$T" summary alias.yaml --set model.layers.2.units=5 | grep "^dense_[12] " | sed "s/  */ /g" | paste -sd";" | sed "s/^/shows: /" >&2'
row "30.6 maxpool2d padding above half its window" 3 "test_layer_rules.cc; test_probe_messages.cc" -- \
  fit tiny.yaml --no-out --set 'model.input_shape=[1,4,4]' --set 'model.layers.0={type: maxpool2d, pool_size: 2, padding: 2}'
row "30.7 weights that are all NaN (eval)" 4 "test_layer_rules.cc" -- eval tiny.yaml --weights nan.safetensors
srow "30.9 summary.json after a resume with nothing left to do" 0 "crash/test_run_dir_hostile.cc" \
  "trainer fit tiny.yaml --resume run9 --epochs 3; jq .best_val_accuracy,.final_lr run9/summary.json" \
  'before=$(python3 -c "import json; s = json.load(open(\"run9/summary.json\")); print(s[\"best_val_accuracy\"], s[\"final_lr\"])"); "$T" fit tiny.yaml --resume run9 --epochs 3 >/dev/null 2>&1 || exit $?; after=$(python3 -c "import json; s = json.load(open(\"run9/summary.json\")); print(s[\"best_val_accuracy\"], s[\"final_lr\"])"); echo "shows: best_val_accuracy, final_lr $before before, $after after" >&2; [ "$before" = "$after" ]'
srow "30.13 sweep.sh lr=0.3,0.3" 0 "tests/scripts/sweep_test.sh" "scripts/sweep.sh tiny.yaml optimizer.lr=0.3,0.3 --out sw -- --epochs 1" \
  'bash "'"$repo"'/scripts/sweep.sh" tiny.yaml optimizer.lr=0.3,0.3 --out sw -- --epochs 1 2>&1 | grep "runs," | sed "s/^sweep: /shows: /" >&2'
row "30.17 metrics.csv a directory (--resume)" 4 "crash/test_run_dir_hostile.cc" -- fit tiny.yaml --resume run17 --epochs 4
MSG_PATTERN='^(error|warning|shows|plot):'
srow "30.18 plot: a metrics row longer than its header" 4 "tests/scripts/plot_test.sh" "trainer plot run18 --out p.png" \
  '"$T" plot run18 --out p.png'
MSG_PATTERN='^(error|warning|shows):'
row "30.20 class names: 40 KB of gzip inflating to 40 MiB" 4 "test_class_names.cc" -- \
  fit tiny.yaml --no-out --set data.class_names=bomb-names.txt.gz
srow "30.20 CIFAR-10 in 1,000 files" 0 "(a measurement: this row)" "time trainer fit cifar1000.yaml --no-out --epochs 1" \
  's=$(date +%s%N); "$T" fit cifar1000.yaml --no-out --epochs 1 >/dev/null 2>&1 || exit $?; echo "shows: loaded and trained in $(( ($(date +%s%N) - s) / 1000000 )) ms" >&2'
srow "30.22 --set data.class_names= (the default)" 0 "test_class_names.cc" "trainer fit tiny.yaml --no-out --epochs 1 --set data.class_names=" \
  '"$T" fit tiny.yaml --no-out --epochs 1 --set data.class_names= 2>&1 | grep -m1 "done:" | sed "s/^\[[^]]*\] /shows: /" >&2'
row "30.25 a default name taken by a named layer" 3 "test_probe_messages.cc" -- summary dupname.yaml
row "30.25 --mem-limit abc" 2 "test_probe_messages.cc" -- fit tiny.yaml --no-out --mem-limit abc
row "30.25 --out given twice" 2 "test_probe_messages.cc" -- fit tiny.yaml --out a1 --out a2
row "30.26 batchnorm with a batch of 1" 3 "test_probe_messages.cc" -- fit bn.yaml --no-out --batch-size 1
row "30.26 input_shape: [] (summary)" 3 "test_probe_messages.cc" -- summary tiny.yaml --set 'model.input_shape=[]'
row "30.26 top_k_accuracy with k above the class count" 3 "test_probe_messages.cc" -- \
  fit tiny.yaml --no-out --set 'metrics=[{type: top_k_accuracy, k: 5}]'
MSG_PATTERN='^(error|warning):'

# ---------------------------------------------------------------------------------------------
# Image folders (issue 28): bad images, bad folders, and a bad image met while streaming
# ---------------------------------------------------------------------------------------------
section "Image folders"
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
IMG="datasets/test_image_folder.cc"
STREAM="datasets/test_image_stream.cc"
row "a good image folder" 0 "$IMG" -- fit img.yaml --no-out
row "truncated PNG" 4 "$IMG" -- fit img.yaml --no-out --set data.train.path=imgs-cut
row "zero-byte PNG" 4 "$IMG" -- fit img.yaml --no-out --set data.train.path=imgs-zero
row "PNG header claiming 100000x100000" 4 "$IMG" -- fit img.yaml --no-out --set data.train.path=imgs-huge
row "truncated JPEG" 4 "$IMG" -- fit img.yaml --no-out --set data.train.path=imgs-jpegcut
row "an image of another size, no resize" 4 "$IMG" -- fit img.yaml --no-out --set data.train.path=imgs-size
row "an empty class folder" 4 "$IMG" -- fit img.yaml --no-out --set data.train.path=imgs-emptyclass
row "a folder with no class folders" 4 "$IMG" -- fit img.yaml --no-out --set data.train.path=imgs-none
row "a symlink loop in a class folder" 4 "$IMG" -- fit img.yaml --no-out --set data.train.path=imgs-loop
row "image_folder path is a file" 4 "$IMG" -- fit img.yaml --no-out --set data.train.path=img.yaml
row "cache: disk" 3 "$STREAM" -- fit img.yaml --no-out --set data.train.cache=disk
row "cache: memory over cache_mb" 4 "$STREAM" -- fit img.yaml --no-out --set data.train.cache=memory \
  --set data.train.cache_mb=1 --set data.train.resize=1024 --set 'model.input_shape=[1, 1024, 1024]'
row "a bad image met while streaming (cache: none)" 4 "$STREAM; tests/scripts/image_folder_test.sh" -- \
  fit img.yaml --out stream_run --set data.train.path=imgs-stream --set data.train.cache=none --set data.shuffle=false
MSG_PATTERN='^(error|warning):'

# ---------------------------------------------------------------------------------------------
echo "| case | command | message | exit | expected | test |"
echo "|---|---|---|---|---|---|"
printf '%s\n' "${rows[@]}"
secs=$(( ($(date +%s%N) - t_start) / 1000000000 ))
echo "bad_input_table: $n cases, $mismatches with an unexpected exit code, $secs s" >&2
[ "$mismatches" -eq 0 ]

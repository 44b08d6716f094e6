#!/usr/bin/env bash
# ctest "image_folder_fashion_mnist": scripts/make_image_folder.py writes 50 real Fashion-MNIST
# images per class as PNG class folders (train and test); configs/fashion_mnist_folder.yaml
# trains one epoch from them; predict reads a PNG, a JPEG (when python3-pil can write one) and a
# folder, and writes a file column first; a streamed run (cache: none) trains the same weights; bad
# images exit 4 naming the file, and one met while streaming saves the batches trained first.
#   tests/scripts/image_folder_test.sh TRAINER_BINARY
set -euo pipefail
trainer=$(realpath "$1")
repo=$(cd "$(dirname "$0")/../.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"  # the config's paths (data/fashion_mnist_folder/...) are relative to here
fail() { echo "image_folder_test: $*" >&2; exit 1; }
[ -f /usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz ] || { echo "SKIPPED: no Fashion-MNIST"; exit 77; }

python3 "$repo/scripts/make_image_folder.py" --out data/fashion_mnist_folder --per-class 50 --jpeg
[ "$(find data/fashion_mnist_folder/train -name '*.png' | wc -l)" -eq 500 ] || fail "expected 500 training PNGs"

"$trainer" fit "$repo/configs/fashion_mnist_folder.yaml" --epochs 1 --out run >fit.txt 2>&1 ||
  fail "fit failed: $(cat fit.txt)"
cat fit.txt
grep -q "data.train: decoded 500 images" fit.txt || fail "the decode summary line is missing"
grep -qE "epoch 1/1 .*val_accuracy=" fit.txt || fail "no epoch line with val_accuracy"
[ -f run/model.safetensors ] || fail "no weights in the run directory"

one=$(find data/fashion_mnist_folder/test/Bag -name '*.png' | sort | head -1)
"$trainer" predict run --input "$one" --output one.csv --write both >/dev/null 2>&1 || fail "predict on a PNG failed"
head -1 one.csv | grep -q '^file,T-shirt_top,Trouser,' || fail "one.csv header: $(head -1 one.csv)"
[ "$(wc -l <one.csv)" -eq 2 ] || fail "one.csv: expected a header and one row"
grep -q "^$one," one.csv || fail "the row names its file"
if [ -d data/fashion_mnist_folder/jpeg ]; then
  jpg=$(find data/fashion_mnist_folder/jpeg/test/Sneaker -name '*.jpg' | sort | head -1)
  "$trainer" predict run --input "$jpg" --output jpg.csv >/dev/null 2>&1 || fail "predict on a JPEG failed"
  grep -q "^$jpg," jpg.csv || fail "jpg.csv names its file"
fi
"$trainer" predict run --input data/fashion_mnist_folder/test --output all.csv --write class >/dev/null 2>&1 ||
  fail "predict on a folder failed"
[ "$(wc -l <all.csv)" -eq 501 ] || fail "all.csv: expected a header and 500 rows"
head -1 all.csv | grep -q '^file,predicted_id,predicted_name$' || fail "all.csv header: $(head -1 all.csv)"

# Streamed (cache: none): decoded as batches are drawn, the same training bit for bit.
"$trainer" fit "$repo/configs/fashion_mnist_folder.yaml" --epochs 1 --out run_stream \
  --set data.train.cache=none --set data.validation.cache=none >stream.txt 2>&1 ||
  fail "streamed fit failed: $(cat stream.txt)"
grep -q "data.train: streaming 500 images" stream.txt || fail "no streaming line: $(cat stream.txt)"
# The tensors, not the files: the header records each run's config, cache key included.
tensors() { python3 -c 'import json,struct,sys; b=open(sys.argv[1],"rb").read(); n=struct.unpack("<Q",b[:8])[0]; sys.stdout.buffer.write(b[8+n:])' "$1"; }
cmp -s <(tensors run/model.safetensors) <(tensors run_stream/model.safetensors) ||
  fail "streamed weights differ from the in-memory run's"
# predict with the streamed run's config streams its --input folder too: the same rows.
"$trainer" predict run_stream --input data/fashion_mnist_folder/test --output stream.csv --write class \
  >/dev/null 2>&1 || fail "predict on a folder, streamed, failed"
"$trainer" predict run --input data/fashion_mnist_folder/test --output memory.csv --write class >/dev/null 2>&1 ||
  fail "predict on a folder failed"
cmp -s stream.csv memory.csv || fail "streamed predict differs: $(diff stream.csv memory.csv | head -3)"

# Bad images: exit 4 (data) and the file named.
expect() {  # expect CODE TEXT -- command...
  local code=$1 text=$2 rc=0
  shift 3
  "$@" >out.txt 2>&1 || rc=$?
  [ "$rc" -eq "$code" ] || fail "expected exit $code, got $rc from $*: $(cat out.txt)"
  grep -qF -- "$text" out.txt || fail "expected '$text' in: $(cat out.txt)"
}
: >data/fashion_mnist_folder/train/Bag/empty.png
expect 4 "empty.png' is empty (0 bytes), not an image" -- "$trainer" fit "$repo/configs/fashion_mnist_folder.yaml" --epochs 1 --out bad1
rm data/fashion_mnist_folder/train/Bag/empty.png
mkdir data/fashion_mnist_folder/train/Unknown
cp "$one" data/fashion_mnist_folder/train/Unknown/
expect 4 "class subfolder 'data/fashion_mnist_folder/train/Unknown' is not one of data.class_names" -- \
  "$trainer" fit "$repo/configs/fashion_mnist_folder.yaml" --epochs 1 --out bad2

# A bad file met while streaming: the batches trained so far are saved, and --resume continues
# once the file is mended.
cp -r data/fashion_mnist_folder/train streamed && rm -rf streamed/Unknown
: >streamed/Bag/zz_empty.png
expect 4 "data.train: 'streamed/Bag/zz_empty.png' is empty (0 bytes), not an image; the " -- "$trainer" fit \
  "$repo/configs/fashion_mnist_folder.yaml" --epochs 1 --out bad3 --set data.train.path=streamed \
  --set data.train.cache=none --set data.batch_size=20
grep -qF "trained so far are saved in" out.txt || fail "no checkpoint named: $(cat out.txt)"
grep -qF "continue with: trainer fit --resume" out.txt || fail "no resume command: $(cat out.txt)"
cp "$one" streamed/Bag/zz_empty.png
"$trainer" fit --resume bad3 >resumed.txt 2>&1 || fail "resume after mending failed: $(cat resumed.txt)"
grep -qE "epoch 1/1 .*val_accuracy=" resumed.txt || fail "the resumed run did not finish the epoch: $(cat resumed.txt)"
echo "image_folder_test: ok"

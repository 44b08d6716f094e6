#!/usr/bin/env bash
# ONNX export, checked twice for each config: a short run is trained, exported with `trainer export`,
#   (a) checked by Debian's python3-onnx (onnx.checker.check_model with full_check, and strict
#       shape inference), and
#   (b) run by ONNX Runtime (npm's onnxruntime-node, scripts/onnx_run.js) on N test inputs whose
#       outputs are compared with `trainer predict RUN` on the same inputs: the largest absolute
#       difference must be <= 1e-4 (fp32) and the decisions (arg-max class; binary and multi-label:
#       each label's p > 0.5) the same for every sample.
# Prints a table (config, samples, largest absolute and relative difference, agreement, the
# runtime's and onnx's versions) and exits 1 when a row fails, 77 when a tool is missing (the ctest
# then reports "skipped").
#
#   scripts/onnx_check.sh [--trainer build/trainer] [--samples 1000] [--epochs N] [--work DIR] [CONFIG...]
#
# --epochs N trains every config N epochs (default: 1, and their own for the small data sets below);
# --work DIR keeps the runs, models, inputs and outputs there (default: a temporary folder).
# Default configs: every configs/*.yaml, the layer-zoo configs tests/scripts/onnx_layers_*.yaml
# (every layer type the registry has, in odd geometries) and tests/scripts/onnx_targets_normalized.yaml
# (a regression's `values` output with data.normalize_targets). Data Debian ships is used as it is
# (Fashion-MNIST, scikit-learn's CSVs; wine_multilabel's and fashion_mnist_folder's files are made
# from them by their scripts); configs whose data it does not ship (CIFAR-10, MNIST, ImageNet,
# Reuters) train on `format: random` data for one short epoch instead, and are fed generated test
# inputs (pixel bytes, token ids): the point is the export's fidelity, not accuracy.
# Needs: /usr/bin/python3 with python3-onnx, python3-numpy and python3-yaml; node and
# onnxruntime-node under $ONNX_PEER (default: onnx-peer beside the trainer binary, build/onnx-peer):
#   apt-get install python3-onnx python3-yaml
#   npm install --prefix build/onnx-peer onnxruntime-node
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
trainer="$repo/build/trainer"
samples=1000
epochs=""
work=""
configs=()
while [ $# -gt 0 ]; do
  case "$1" in
    --trainer) trainer=$(realpath "$2"); shift 2 ;;
    --samples) samples="$2"; shift 2 ;;
    --work) work="$2"; shift 2 ;;
    --epochs) epochs="$2"; shift 2 ;;
    -h | --help) sed -n '2,/^set -e/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    -*) echo "onnx_check: unknown flag $1 (see --help)" >&2; exit 2 ;;
    *) configs+=("$(realpath "$1")"); shift ;;
  esac
done
[ ${#configs[@]} -eq 0 ] && configs=("$repo"/configs/*.yaml "$repo"/tests/scripts/onnx_layers_*.yaml "$repo"/tests/scripts/onnx_targets_normalized.yaml)
# onnxruntime-node lives in the build folder of the trainer checked (build/onnx-peer).
export ONNX_PEER="${ONNX_PEER:-$(dirname "$trainer")/onnx-peer}"
py=/usr/bin/python3  # Debian's python: python3-onnx is its package, not a pyenv's on PATH
helper="$repo/scripts/onnx_check.py"

skip() { echo "SKIPPED: $*"; exit 77; }
if ! [ -x "$py" ] || ! "$py" -c 'import onnx, numpy, yaml' 2>/dev/null; then
  skip "python3-onnx, python3-numpy or python3-yaml is missing for $py (apt-get install python3-onnx python3-yaml)"
fi
command -v node >/dev/null || skip "node is missing (apt-get install nodejs)"
[ -d "$ONNX_PEER/node_modules/onnxruntime-node" ] ||
  skip "onnxruntime-node is not installed under $ONNX_PEER (npm install --prefix $ONNX_PEER onnxruntime-node)"
[ -x "$trainer" ] || { echo "onnx_check: no trainer binary at $trainer (build first, or --trainer PATH)" >&2; exit 2; }

if [ -z "$work" ]; then
  work=$(mktemp -d)
  trap 'rm -rf "$work"' EXIT
  kept=" (give --work DIR to keep the work files)"
else
  mkdir -p "$work"
  work=$(realpath "$work")
  kept=" (work files: $work)"
fi
fashion=/usr/share/datasets/fashion-mnist

# overrides=(the fit flags that make a short run of config $1 here); returns 1 when its data is missing.
# Configs whose data is small (the scikit-learn CSVs, the generated disc) train their full epochs.
set_overrides() {
  overrides=(--epochs "${epochs:-1}")
  case "$1" in
    fashion_mnist_cnn | fashion_mnist_sgd | resnet_fashion_mnist)
      [ -f "$fashion/t10k-images-idx3-ubyte.gz" ] || return 1
      overrides+=(--set data.train.limit=2000 --set data.validation.limit=500 --set data.batch_size=100) ;;
    fashion_mnist_folder)
      [ -f "$fashion/t10k-images-idx3-ubyte.gz" ] || return 1
      [ -d "$work/fashion_mnist_folder/test" ] ||
        "$py" "$repo/scripts/make_image_folder.py" --out "$work/fashion_mnist_folder" \
          --per-class $(((samples + 9) / 10)) >/dev/null
      overrides+=(--set data.train.path="$work/fashion_mnist_folder/train"
                   --set data.validation.path="$work/fashion_mnist_folder/test" --set data.batch_size=100) ;;
    wine_multilabel)
      [ -f "$work/wine_multilabel.csv" ] ||
        "$py" "$repo/scripts/make_multilabel_csv.py" --out "$work/wine_multilabel.csv" >/dev/null
      overrides=(${epochs:+--epochs "$epochs"} --set data.train.path="$work/wine_multilabel.csv") ;;
    resnet18_imagenet)  # bf16 is its GPU recipe; the export and this comparison are fp32
      overrides+=(--set 'data.train={format: random, samples: 16, seed: 1}'
                  --set 'data.validation={format: random, samples: 8, seed: 2}' --set data.batch_size=8
                  --set math=fp32) ;;
    mnist_cnn | cifar10_cnn | resnet18_cifar | vgg11_bn_cifar | reuters_conv1d)
      overrides+=(--set 'data.train={format: random, samples: 64, seed: 1}'
                  --set 'data.validation={format: random, samples: 32, seed: 2}' --set data.batch_size=32) ;;
    *) overrides=(${epochs:+--epochs "$epochs"}) ;;  # the data is in the config: generated, or scikit-learn's CSVs
  esac
}

table="$work/table.md"
printf '| config | samples | largest abs. difference | largest rel. difference | agreement | ONNX Runtime | onnx.checker |\n|---|---|---|---|---|---|---|\n' >"$table"
failed=0
row() { printf '| %s | %s |\n' "$name" "$*" >>"$table"; }
for config in "${configs[@]}"; do
  name=$(basename "$config" .yaml)
  dir="$work/$name"
  rm -rf "$dir"
  mkdir -p "$dir"
  if ! set_overrides "$name"; then
    row "skipped: its data is missing | | | | |"
    continue
  fi
  if ! (cd "$work" && "$trainer" fit "$config" --device cpu -q --out "$dir/run" "${overrides[@]}") \
    >"$dir/fit.txt" 2>&1; then
    echo "onnx_check: $name: fit failed:" >&2
    cat "$dir/fit.txt" >&2
    row "FAILED: fit (see above) | | | | |"
    failed=1
    continue
  fi
  if ! "$trainer" export "$dir/run" --out "$dir/model.onnx" >"$dir/export.txt" 2>&1 ||
    ! "$py" "$helper" check "$dir/model.onnx" >"$dir/check.json" 2>"$dir/check.err"; then
    echo "onnx_check: $name: export or onnx.checker failed:" >&2
    cat "$dir/export.txt" "$dir/check.err" >&2
    row "FAILED: export or onnx.checker (see above) | | | | |"
    failed=1
    continue
  fi
  if ! predict_input=$("$py" "$helper" inputs "$dir/run" "$dir/inputs.npy" --samples "$samples" 2>"$dir/inputs.err"); then
    echo "onnx_check: $name: making the test inputs failed:" >&2
    cat "$dir/inputs.err" >&2
    row "FAILED: test inputs (see above) | | | | |"
    failed=1
    continue
  fi
  predicted="$dir/predict.npy"
  case "$predict_input" in *.list.csv) predicted="$dir/predict.csv" ;; esac
  if ! "$trainer" predict "$dir/run" --input "$predict_input" --output "$predicted" >"$dir/predict.txt" 2>&1 ||
    ! node "$repo/scripts/onnx_run.js" "$dir/model.onnx" "$dir/inputs.npy" "$dir/ort.npy" >"$dir/ort.json" 2>"$dir/ort.err"; then
    echo "onnx_check: $name: predict or ONNX Runtime failed:" >&2
    cat "$dir/predict.txt" "$dir/ort.err" >&2
    row "FAILED: predict or ONNX Runtime (see above) | | | | |"
    failed=1
    continue
  fi
  result=$("$py" "$helper" compare "$dir/run" "$predicted" "$dir/ort.npy")
  verdict=$("$py" - "$result" "$dir/ort.json" "$dir/check.json" <<'EOF'
import json, sys
r = json.loads(sys.argv[1])
ort = json.load(open(sys.argv[2]))
chk = json.load(open(sys.argv[3]))
ok = r["max_abs_diff"] <= 1e-4 and r["agreement"] in (None, 1.0)
agree = "n/a (regression)" if r["agreement"] is None else "%.1f%%" % (100 * r["agreement"])
agree += "" if r["agreement"] in (None, 1.0) else " (FAILED)"
diff = "%.2e" % r["max_abs_diff"] + ("" if r["max_abs_diff"] <= 1e-4 else " (over 1e-4: FAILED)")
print("%s|%d | %s | %.1e | %s | %s %s (%s) | onnx %s: OK, opset %s, %d nodes"
      % ("ok" if ok else "FAILED", r["samples"], diff, r["max_rel_diff"], agree, ort["runtime"], ort["version"],
         ort["output"], chk["onnx"], chk["opset"][0], chk["nodes"]))
EOF
  )
  [ "${verdict%%|*}" = ok ] || failed=1
  row "${verdict#*|}"
  [ "${verdict%%|*}" = ok ] || echo "onnx_check: $name: FAILED: a difference over 1e-4 or a decision differs" >&2
done
cat "$table"
[ "$failed" -eq 0 ] || { echo "onnx_check: FAILED$kept" >&2; exit 1; }
echo "onnx_check: ok: every config's ONNX model passes onnx.checker and agrees with trainer predict"

#!/usr/bin/env bash
# Times trainer on the seed workloads with synthetic data (the same shapes as PyTorch's peer
# script, ../shared/bench/peer_torch.py), and prints one line per workload:
#   workload device steps/s (median epoch after the first) first-epoch seconds
#
#   scripts/bench.sh [--device cpu|gpu:0] [--epochs N] [--trainer PATH] [WORKLOAD...]
#   WORKLOAD: mnist_cnn (default), cifar_cnn, reuters_conv1d, mlp8_disc, mlp12_disc
# CPU threads: OMP_NUM_THREADS. Compare with: CPU_THREADS=2 python3 peer_torch.py mnist_cnn cpu
set -euo pipefail
cd "$(dirname "$0")/.."
device=cpu; epochs=4; trainer=build/trainer; works=()
while [ $# -gt 0 ]; do
  case "$1" in
    --device) device="$2"; shift 2;;
    --epochs) epochs="$2"; shift 2;;
    --trainer) trainer="$2"; shift 2;;
    -h|--help) sed -n 2,9p "$0"; exit 0;;
    *) works+=("$1"); shift;;
  esac
done
[ ${#works[@]} -gt 0 ] || works=(mnist_cnn)

# workload -> config and the overrides that swap in synthetic data of the peer's size.
args_for() {
  case "$1" in
    mnist_cnn) echo "configs/fashion_mnist_sgd.yaml --set data.train={format: random, samples: 60000} --batch-size 200";;
    cifar_cnn) echo "configs/cifar10_cnn.yaml --set data.train={format: random, samples: 50000} --batch-size 32";;
    reuters_conv1d) echo "configs/reuters_conv1d.yaml --set data.train={format: random, samples: 8982, vocab: 30982} --batch-size 32";;
    mlp8_disc) echo "configs/mlp_disc.yaml --set data.train={format: disc, samples: 1000} --set model.layers.0.depth=8 --batch-size 100";;
    mlp12_disc) echo "configs/mlp_disc.yaml --set data.train={format: disc, samples: 1000} --set model.layers.0.depth=12 --batch-size 100";;
    *) echo "unknown workload: $1" >&2; exit 2;;
  esac
}

printf '%-16s %-8s %10s %14s\n' workload device steps/s first_epoch_s
for w in "${works[@]}"; do
  read -r -a a <<<"$(args_for "$w")"
  # Rebuild the words split by spaces inside {...} values.
  cmd=("$trainer" fit)
  buf=""
  for word in "${a[@]}"; do
    if [ -n "$buf" ]; then buf="$buf $word"; [[ "$word" == *"}" ]] && { cmd+=("$buf"); buf=""; }; continue; fi
    if [[ "$word" == *"={"* && "$word" != *"}" ]]; then buf="$word"; continue; fi
    cmd+=("$word")
  done
  out=$("${cmd[@]}" --set data.validation=null --set data.validation_split=0 --epochs "$epochs" --device "$device" 2>/dev/null)
  ms=$(echo "$out" | grep -E ' epoch [0-9]+/' | sed -E 's/.*\(([0-9.]+) ms\/step\).*/\1/')
  first=$(echo "$out" | grep -E ' epoch 1/' | sed -E 's/.*time=([0-9.]+)s.*/\1/')
  med=$(echo "$ms" | tail -n +2 | sort -g | awk '{v[NR]=$1} END {print (NR%2) ? v[(NR+1)/2] : (v[NR/2]+v[NR/2+1])/2}')
  awk -v w="$w" -v d="$device" -v med="$med" -v first="$first" \
    'BEGIN { printf "%-16s %-8s %10.1f %14.2f\n", w, d, 1000 / med, first }'
done

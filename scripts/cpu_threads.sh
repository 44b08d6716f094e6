#!/usr/bin/env bash
# CPU thread scaling, trainer against PyTorch at equal thread counts, in one run: steps/s of a
# training step on synthetic batches for mnist_cnn, cifar_cnn and reuters_conv1d.
#
#   scripts/cpu_threads.sh [THREADS...]          # default: 1 2 4 8 16
#   TRAINER=/path/to/trainer PEER=/path/to/peer_torch.py scripts/cpu_threads.sh 1 16
#
# trainer: `trainer bench CONFIG --device cpu --threads T` (steady state after a warm-up).
# PyTorch: `CPU_THREADS=T python3 peer_torch.py WORKLOAD cpu` (median steady epoch; the shared
# bench/peer_torch.py, which must be given with PEER when not at ../shared/bench).
# Prints one table (Markdown) at the end; the raw JSON lines go to stderr.
set -uo pipefail
cd "$(dirname "$0")/.."
trainer="${TRAINER:-build/trainer}"
peer="${PEER:-../shared/bench/peer_torch.py}"
threads=("$@")
[ "${#threads[@]}" -gt 0 ] || threads=(1 2 4 8 16)
steps="${STEPS:-200}"

# workload  trainer config (same network, batch and optimizer as the PyTorch peer)
workloads=("mnist_cnn configs/fashion_mnist_sgd.yaml"
           "cifar_cnn configs/cifar10_cnn.yaml"
           "reuters_conv1d configs/reuters_conv1d.yaml")

declare -A ours theirs
for t in "${threads[@]}"; do
  for w in "${workloads[@]}"; do
    set -- $w
    name=$1 cfg=$2
    j=$("$trainer" bench "$cfg" --device cpu --threads "$t" --steps "$steps" --warmup 20 --json 2>/dev/null)
    echo "trainer $name threads=$t $j" >&2
    ours[$name/$t]=$(python3 -c 'import json,sys; print(round(float(json.loads(sys.argv[1])["steps_per_s"]), 1))' "$j" 2>/dev/null || echo "-")
    if [ -f "$peer" ]; then
      p=$(CPU_THREADS=$t OMP_NUM_THREADS=$t python3 "$peer" "$name" cpu 2>/dev/null | tail -1)
      echo "torch $name threads=$t $p" >&2
      theirs[$name/$t]=$(python3 -c 'import json,sys; print(round(float(json.loads(sys.argv[1])["steps_per_s"]), 1))' "$p" 2>/dev/null || echo "-")
    else
      theirs[$name/$t]="-"
    fi
  done
done

header="| workload | |"; rule="|---|---|"
for t in "${threads[@]}"; do header+=" $t |"; rule+="---|"; done
echo "steps/s by thread count (trainer $("$trainer" --version 2>/dev/null | awk '{print $2}'), $(nproc) cores)"
echo "$header"; echo "$rule"
for w in "${workloads[@]}"; do
  set -- $w
  name=$1
  a="| $name | trainer |"; b="| | PyTorch |"; r="| | ratio |"
  for t in "${threads[@]}"; do
    x=${ours[$name/$t]} y=${theirs[$name/$t]}
    a+=" $x |"; b+=" $y |"
    r+=" $(python3 -c 'import sys; x,y=sys.argv[1:]; print(f"{float(x)/float(y):.2f}x")' "$x" "$y" 2>/dev/null || echo "-") |"
  done
  echo "$a"; echo "$b"; echo "$r"
done

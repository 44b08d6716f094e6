#!/usr/bin/env bash
# Depth sweep of configs/mlp_disc.yaml: trains depth 2..12 (dense layers, output included) and
# prints one line per depth with the parameter count and the final training loss and error.
#   scripts/mlp_sweep.sh                      # cpu, build/trainer
#   TRAINER=build-l/trainer scripts/mlp_sweep.sh --device gpu --epochs 50
# Extra arguments go to every `trainer fit`. Full logs: runs/mlp_sweep/depth_N.log.
set -euo pipefail
cd "$(dirname "$0")/.."
trainer="${TRAINER:-build/trainer}"
[ -x "$trainer" ] || { echo "mlp_sweep: $trainer not found; build first (scripts/setup.sh)" >&2; exit 1; }
logs=runs/mlp_sweep
mkdir -p "$logs"
printf "%-6s %12s %10s %12s\n" depth params loss train_error
for depth in $(seq 2 12); do
  log="$logs/depth_$depth.log"
  "$trainer" fit configs/mlp_disc.yaml --set "model.layers.0.depth=$depth" "$@" >"$log" 2>&1 ||
    { echo "depth $depth failed; see $log" >&2; continue; }
  last=$(grep -E "epoch [0-9]+/[0-9]+ " "$log" | tail -1)
  loss=$(sed -E 's/.* loss=([0-9.naif-]+).*/\1/' <<<"$last")
  acc=$(sed -E 's/.* accuracy=([0-9.]+).*/\1/' <<<"$last")
  params=$(sed -nE 's/.*params=([0-9]+).*/\1/p' "$log" | tail -1)
  printf "%-6s %12s %10s %12s\n" "$depth" "$params" "$loss" "$(awk -v a="$acc" 'BEGIN{printf "%.4f", 1-a}')"
done

#!/usr/bin/env bash
# Two trainer builds timed against each other on one device: `trainer bench` of each workload, the
# builds alternating ROUNDS times (so drifting clocks or a neighbour's load hit both alike), then
# each build's runs and median in steps/s and the ratio of the medians.
#   scripts/ab_bench.sh OLD NEW [--device gpu:0] [--rounds 2] [--steps 200] [--cold] WORKLOAD...
# --cold: every run starts with an empty algorithm cache (TRAINER_CACHE_DIR, a new directory each
# time), and a second line gives each run's seconds to its first step and their medians.
#   WORKLOAD: CONFIG:MATH:BATCH, CONFIG a name under configs/ (vgg11_bn_cifar) or a path
# e.g. scripts/ab_bench.sh /tmp/trainer_old build/trainer vgg11_bn_cifar:bf16:256 mnist_cnn:fp32:200
# prints: vgg11_bn_cifar bf16 256: old 544.6 545.2 (544.9) | new 693.4 692.8 (693.1) | 1.27x
# Exit 0 when every run gave a number, 1 otherwise (2: bad arguments).
set -uo pipefail
usage() { sed -n 2,9p "$0"; exit 2; }
[ $# -ge 2 ] || usage
old=$1 new=$2
shift 2
device=gpu:0 rounds=2 steps=200 cold=0 works=()
while [ $# -gt 0 ]; do
  case "$1" in
    --device) device=$2; shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    --steps) steps=$2; shift 2 ;;
    --cold) cold=1; shift ;;
    -h | --help) usage ;;
    *) works+=("$1"); shift ;;
  esac
done
[ ${#works[@]} -gt 0 ] || usage
[[ $rounds =~ ^[1-9][0-9]*$ && $steps =~ ^[1-9][0-9]*$ ]] || usage
cd "$(dirname "$0")/.." || exit 2
failed=0
rate() {  # TRAINER CONFIG MATH BATCH: "STEPS_PER_S FIRST_STEP_S" of one bench run, or "failed failed"
  local r cache=""
  [ "$cold" = 1 ] && cache=$(mktemp -d /tmp/ab_bench_cache.XXXXXX)
  r=$(TRAINER_CACHE_DIR=${cache:-${TRAINER_CACHE_DIR:-}} timeout -k 3 600 "$1" bench "$2" --device "$device" \
    --math "$3" --batch-size "$4" --steps "$steps" --json 2>/dev/null | tail -1 |
    python3 -c "import json, sys; j = json.load(sys.stdin); print('%.1f %.2f' % (j['steps_per_s'], j['first_step_s']))" \
      2>/dev/null)
  [ -n "$cache" ] && rm -rf "$cache"
  echo "${r:-failed failed}"
}
median() {  # DIGITS VALUES...: the median of the numbers among VALUES to DIGITS decimals, or "failed"
  python3 -c "import statistics, sys; v = [float(x) for x in sys.argv[2:] if x != 'failed']; print('%.*f' % (int(sys.argv[1]), statistics.median(v)) if v else 'failed')" "$@"
}
for w in "${works[@]}"; do
  IFS=: read -r config math batch <<<"$w"
  if [ -z "${config:-}" ] || [ -z "${math:-}" ] || [ -z "${batch:-}" ]; then
    echo "$w: not CONFIG:MATH:BATCH" >&2
    exit 2
  fi
  path=$config
  [ -f "$path" ] || path=configs/$config.yaml
  if [ ! -f "$path" ]; then
    echo "$w: no config $config (nor configs/$config.yaml)" >&2
    exit 2
  fi
  a=() b=() fa=() fb=()
  for ((r = 0; r < rounds; ++r)); do
    read -r v f <<<"$(rate "$old" "$path" "$math" "$batch")"
    a+=("$v") fa+=("$f")
    read -r v f <<<"$(rate "$new" "$path" "$math" "$batch")"
    b+=("$v") fb+=("$f")
  done
  ma=$(median 1 "${a[@]}") mb=$(median 1 "${b[@]}")
  for v in "${a[@]}" "${b[@]}"; do [[ $v =~ ^[0-9.]+$ ]] || failed=1; done
  ratio=$(python3 -c "import sys; a, b = sys.argv[1:]; print('%.2fx' % (float(b) / float(a)) if 'failed' not in (a, b) else '-')" "$ma" "$mb")
  echo "$(basename "$config" .yaml) $math $batch: old ${a[*]} ($ma) | new ${b[*]} ($mb) | $ratio"
  if [ "$cold" = 1 ]; then
    echo "  first step, cold (s): old ${fa[*]} ($(median 2 "${fa[@]}")) | new ${fb[*]} ($(median 2 "${fb[@]}"))"
  fi
done
exit $failed

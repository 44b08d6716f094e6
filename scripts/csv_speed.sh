#!/usr/bin/env bash
# CSV loading against pandas (issue 29): a 1,000,000-row x 50-column numeric CSV (49 features and
# an integer label), read by trainer's read_csv (scripts/csv_bench.cc) and by Debian's pandas
# (python3-pandas): pandas.read_csv with its defaults (float64) and with dtype float32. Prints the
# parse time each reports and the peak RSS of each process (/usr/bin/time -v).
#   scripts/csv_speed.sh                 # ROWS=1000000 COLS=50 DIR=/tmp/csv_speed
set -euo pipefail
cd "$(dirname "$0")/.."
rows="${ROWS:-1000000}" cols="${COLS:-50}" dir="${DIR:-/tmp/csv_speed}"
[ -f build/libtrainer_datasets.a ] || { echo "csv_speed: build the project first (scripts/setup.sh)" >&2; exit 2; }
mkdir -p "$dir"
g++ -O2 -std=c++17 -I. scripts/csv_bench.cc build/libtrainer_datasets.a build/libtrainer_lib.a -lz -lpthread \
  -o "$dir/csv_bench"
table="$dir/table_${rows}x${cols}.csv"
[ -f "$table" ] || "$dir/csv_bench" --write "$table" "$rows" "$cols"
echo "table: $table, $(du -m "$table" | cut -f1) MB; float32 array: $((rows * (cols - 1) * 4 / 1000000)) MB"
sync
peak() { grep 'Maximum resident set size' "$1" | awk '{printf "%.0f MB", $6 / 1000}'; }
/usr/bin/time -v "$dir/csv_bench" "$table" 2>"$dir/time_trainer.txt"
echo "  trainer peak RSS $(peak "$dir/time_trainer.txt")"
for dtype in None float32; do
  /usr/bin/time -v /usr/bin/python3 -c "
import sys, time, numpy, pandas
t, c = time.time(), time.process_time()
df = pandas.read_csv(sys.argv[1], dtype=None if sys.argv[2] == 'None' else numpy.float32)
print(f'pandas.read_csv(dtype={sys.argv[2]}): {df.shape[0]} rows x {df.shape[1]} columns in {time.time() - t:.2f} s wall, {time.process_time() - c:.2f} s cpu')
" "$table" "$dtype" 2>"$dir/time_pandas.txt"
  echo "  pandas peak RSS $(peak "$dir/time_pandas.txt") (import numpy+pandas alone: ~$(/usr/bin/time -v /usr/bin/python3 -c 'import numpy, pandas' 2>&1 | grep 'Maximum resident' | awk '{printf "%.0f MB", $6 / 1000}'))"
done

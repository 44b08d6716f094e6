#!/usr/bin/env bash
# The include-layer check (CI runs it first, from scripts/test.sh). A file includes only from its
# own layer or a lower one. The layers, lowest first:
#
#   lib/core  errors, shapes, RNG, printable: the leaves; includes nothing of the project
#   datasets  readers, generators, batch loader; may include lib/core only
#   lib       in an order of its own, each folder including only from the folders before it
#             (folders of one rank, written a | b, include neither each other):
#               keys < memory | checkpoint < backend < dist < registry < layers < losses | optim
#               < model < data < config < metrics < train < export | schema
#             keys: the key declarations and their validator, YAML loading; backend: the device
#             contract (memory, streams, kernels' interfaces, collectives); registry: what a layer
#             is and which exist; data: the data sources and formats of a config; config: the
#             Config a run reads, assembled from all the sections below it.
#   kernels   the backends: kernels/cpu and kernels/cuda (siblings: neither includes the other),
#             and kernels/register_backends.cc, which registers both
#   cmd       the CLI verbs
#   tests     may include anything
#
# Project headers are included by their path from the repository root ("lib/core/error.h"); an
# include written relative to the including file's folder is reported too. Exit 1 on a violation,
# naming file:line and the include; otherwise one line of summary.
set -euo pipefail
cd "$(dirname "$0")/.."

dirs=(lib datasets kernels cmd tests)
files=$(find "${dirs[@]}" -type f \( -name '*.h' -o -name '*.cc' -o -name '*.cu' -o -name '*.cuh' \) | wc -l)

grep -rnH --include='*.h' --include='*.cc' --include='*.cu' --include='*.cuh' \
  -E '^[[:space:]]*#[[:space:]]*include[[:space:]]*"' "${dirs[@]}" |
  awk -v files="$files" '
    function layer(path) {
      if (path ~ /^lib\/core\//) return 0
      if (path ~ /^datasets\//) return 1
      if (path ~ /^lib\//) return 2
      if (path ~ /^kernels\//) return 3
      if (path ~ /^cmd\//) return 4
      if (path ~ /^tests\//) return 5
      return -1
    }
    # lib/<folder>/...: the rank of the folder in the order inside lib (lib/core is its own layer).
    function librank(path,   f) {
      if (path !~ /^lib\/[^\/]+\//) return -1
      f = substr(path, 5); f = substr(f, 1, index(f, "/") - 1)
      return (f in rank) ? rank[f] : -2
    }
    function libdir(path,   f) { f = substr(path, 5); return substr(f, 1, index(f, "/") - 1) }
    function backend(path) {  # "cpu", "cuda" or "" for kernels/<backend>/...
      return (path ~ /^kernels\/[^\/]+\//) ? substr(path, 9, index(substr(path, 9), "/") - 1) : ""
    }
    BEGIN {
      split("lib/core datasets lib kernels cmd tests", name, " "); bad = 0
      order = "keys memory|checkpoint backend dist registry layers losses|optim model data config metrics train export|schema"
      n = split(order, ranks, " ")
      for (i = 1; i <= n; i++) { m = split(ranks[i], fs, "|"); for (j = 1; j <= m; j++) rank[fs[j]] = i }
    }
    {
      colon1 = index($0, ":"); rest = substr($0, colon1 + 1); colon2 = index(rest, ":")
      file = substr($0, 1, colon1 - 1); line = substr(rest, 1, colon2 - 1)
      text = substr(rest, colon2 + 1)
      inc = text; sub(/^[^"]*"/, "", inc); sub(/".*$/, "", inc)
      from = layer(file); to = layer(inc)
      if (to < 0) {
        dir = file; sub(/\/[^\/]*$/, "", dir)
        if ((getline probe < (dir "/" inc)) >= 0) {
          close(dir "/" inc)
          printf "%s:%s: #include \"%s\" is relative to its folder; include project headers by their path from the repository root\n", file, line, inc
          bad++
        }
        next  # a generated or system header
      }
      if (to > from) {
        printf "%s:%s: #include \"%s\": layer %s includes from %s, a layer above it (%s)\n", file, line, inc, name[from + 1], name[to + 1], "lib/core < datasets < lib < kernels < cmd < tests"
        bad++
      } else if (from == 2 && to == 2 && librank(file) != -1 && librank(inc) != -1 && libdir(file) != libdir(inc) &&
                 (librank(file) == -2 || librank(inc) == -2 || librank(inc) >= librank(file))) {
        if (librank(file) == -2 || librank(inc) == -2)
          printf "%s:%s: #include \"%s\": lib/%s is not in lib'"'"'s order (scripts/check_layers.sh)\n", file, line, inc, librank(file) == -2 ? libdir(file) : libdir(inc)
        else
          printf "%s:%s: #include \"%s\": lib/%s includes from lib/%s, which is not before it in lib'"'"'s order (%s)\n", file, line, inc, libdir(file), libdir(inc), order
        bad++
      } else if (from == 3 && backend(file) != "" && backend(inc) != "" && backend(file) != backend(inc)) {
        printf "%s:%s: #include \"%s\": kernels/%s includes from kernels/%s; backends are siblings and share only lib\n", file, line, inc, backend(file), backend(inc)
        bad++
      }
      checked++
    }
    END {
      if (bad) { printf "check_layers: %d include(s) against the layering\n", bad; exit 1 }
      printf "check_layers: OK: %d files, %d project includes, none upward; layers lib/core < datasets < lib < kernels (cpu | cuda) < cmd < tests; inside lib: %s\n", files, checked, order
    }'

// What a run directory may hold: the names trainer writes (lib/train/run_dir.h), and nothing else.
// A run overwrites, appends to or removes only files of these names, and only in a directory that
// its lock (run.lock) proves a trainer run owns: a directory of the user's (their notes, their own
// config.yaml) is refused as --out instead of being written over.
//
//   top level     config.yaml, metrics.csv, events.jsonl, model.safetensors, summary.json,
//                 run.lock, checkpoints/
//   checkpoints/  epoch-NNNN[-batch-NNNNNN][.state].safetensors, best.safetensors
//   either        "<one of those>.tmp-<pid>": an atomic write (lib/checkpoint/atomic_file.h)
//
// Every entry trainer writes through or reads from is a regular file or a real directory: a
// symbolic link would send a write (metrics.csv appended, checkpoints pruned) outside the run.
#pragma once

#include <string>
#include <vector>

namespace trainer {

// A name trainer writes at the top of a run directory ("checkpoints" included).
bool is_run_file_name(const std::string& name);
// A name trainer writes in checkpoints/.
bool is_checkpoint_file_name(const std::string& name);
// "<name>.tmp-<pid>" where <name> passes `is_ours`: stores the pid. False for anything else.
bool is_temp_file_name(const std::string& name, bool (*is_ours)(const std::string&), long* pid);

// Entries of `dir` (and of its checkpoints/) that no trainer run writes, as paths relative to
// `dir`, sorted; at most `limit` of them.
std::vector<std::string> foreign_entries(const std::string& dir, size_t limit = 4);

// DataError when dir/checkpoints, dir/metrics.csv or dir/events.jsonl is a symbolic link or
// (checkpoints) not a directory; `flag` ("--out", "--resume") starts the message.
void refuse_links_in_run_dir(const std::string& dir, const std::string& flag);

// Opens dir/name for appending (truncated first when `truncate`), never through a symbolic link
// and only when it is a regular file (or is created as one). DataError naming it otherwise,
// RuntimeError when it cannot be opened (permissions, disk). Returns the descriptor.
int open_run_file_for_append(const std::string& path, bool truncate);

}  // namespace trainer

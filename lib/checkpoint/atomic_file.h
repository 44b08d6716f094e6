// Atomic file replacement: a reader (or a crash, or a second Ctrl-C) sees either the previous
// file or the complete new one, never a torn mix.
//
//   1. write everything to "<path>.tmp-<pid>" in the same directory,
//   2. fsync the file, close it,
//   3. rename() it over <path> (atomic on POSIX file systems),
//   4. fsync the directory so the rename itself survives a power loss.
// On any failure the temporary file is removed and RuntimeError names the path and the reason;
// the previous <path>, if any, is untouched.
#pragma once

#include <cstddef>
#include <functional>
#include <string>
#include <vector>

namespace trainer {

// One piece of the file's content; pieces are written back to back.
struct ByteSpan {
  const void* data;
  size_t size;
};

void write_file_atomic(const std::string& path, const std::vector<ByteSpan>& pieces);
void write_file_atomic(const std::string& path, const std::string& text);

// Makes a completed rename/unlink in `dir` durable. Best effort: errors are ignored (some file
// systems refuse fsync on directories).
void fsync_directory(const std::string& dir);

// Test hook: called before each chunk (at most 1 MiB) is written, with the final path and the
// bytes of the temporary file written so far; throwing from it simulates a failure midway
// (disk full, crash). Pass an empty function to remove it.
using AtomicWriteHook = std::function<void(const std::string& path, size_t written)>;
void set_atomic_write_hook(AtomicWriteHook hook);

}  // namespace trainer

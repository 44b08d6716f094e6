// What a non-regular file is, for messages that refuse it ("is a FIFO (named pipe), not a regular
// file"): one wording for the config loader and the data, weights and checkpoint reader.
#pragma once

#include <sys/stat.h>

namespace trainer {

inline const char* file_kind(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO (named pipe)";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISSOCK(mode)) return "a socket";
  return "not a regular file";
}

}  // namespace trainer

#include "lib/checkpoint/atomic_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <mutex>

#include "lib/core/error.h"

namespace trainer {
namespace {

std::mutex g_hook_mu;
AtomicWriteHook g_hook;

AtomicWriteHook current_hook() {
  std::lock_guard<std::mutex> lock(g_hook_mu);
  return g_hook;
}

std::string parent_of(const std::string& path) {
  std::string dir = std::filesystem::path(path).parent_path().string();
  return dir.empty() ? "." : dir;
}

// Closes and removes the temporary file unless released (the rename happened).
struct TempFile {
  std::string path;
  int fd = -1;
  bool keep = false;
  ~TempFile() {
    if (fd >= 0) ::close(fd);
    if (!keep) ::unlink(path.c_str());
  }
};

[[noreturn]] void fail(const std::string& path, const std::string& what, int err) {
  throw RuntimeError("cannot write " + path + ": " + what +
                     (err ? std::string(": ") + std::strerror(err) : ""));
}

}  // namespace

void set_atomic_write_hook(AtomicWriteHook hook) {
  std::lock_guard<std::mutex> lock(g_hook_mu);
  g_hook = std::move(hook);
}

void fsync_directory(const std::string& dir) {
  int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return;
  ::fsync(fd);
  ::close(fd);
}

void write_file_atomic(const std::string& path, const std::vector<ByteSpan>& pieces) {
  const AtomicWriteHook hook = current_hook();
  TempFile tmp;
  tmp.path = path + ".tmp-" + std::to_string(::getpid());
  tmp.fd = ::open(tmp.path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (tmp.fd < 0) fail(path, "cannot create " + tmp.path, errno);
  constexpr size_t kChunk = size_t(1) << 20;
  size_t written = 0;
  for (const ByteSpan& piece : pieces) {
    const char* p = static_cast<const char*>(piece.data);
    size_t left = piece.size;
    while (left > 0) {
      if (hook) hook(path, written);
      const size_t n = std::min(left, kChunk);
      const ssize_t w = ::write(tmp.fd, p, n);
      if (w < 0) {
        if (errno == EINTR) continue;  // a signal (Ctrl-C) arrived: the handler only set a flag
        fail(path, "write failed", errno);
      }
      p += w;
      left -= size_t(w);
      written += size_t(w);
    }
  }
  if (hook) hook(path, written);
  if (::fsync(tmp.fd) != 0) fail(path, "fsync failed", errno);
  const int fd = tmp.fd;
  tmp.fd = -1;
  if (::close(fd) != 0) fail(path, "close failed", errno);
  if (::rename(tmp.path.c_str(), path.c_str()) != 0) fail(path, "rename from " + tmp.path + " failed", errno);
  tmp.keep = true;
  fsync_directory(parent_of(path));
}

void write_file_atomic(const std::string& path, const std::string& text) {
  write_file_atomic(path, std::vector<ByteSpan>{{text.data(), text.size()}});
}

}  // namespace trainer

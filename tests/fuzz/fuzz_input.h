// Shared by the libFuzzer targets. The readers take paths, so each input is written to a scratch
// file that lives as long as the process. The first bytes of an input choose the reader's options
// (and where one file ends and the next begins), so one corpus file is one complete call.
//
// A target lets the project's typed errors (DataError, ConfigError, OutOfMemoryError, ...) pass:
// they are the documented answer to bad input. Anything else escaping a reader (InternalError, a
// std::exception of another type), a crash, a sanitizer report or a hang is a finding.
#pragma once

#include <fcntl.h>
#include <unistd.h>
#include <zlib.h>

#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "lib/core/error.h"

namespace trainer::fuzz {

// Consumes a fuzz input front to back; reads past the end give zeros / empty pieces.
class InputBytes {
 public:
  InputBytes(const uint8_t* data, size_t size) : p_(data), n_(size) {}
  uint8_t u8() { return n_ ? (--n_, *p_++) : 0; }
  uint16_t u16() { return uint16_t(u8() | (u8() << 8)); }
  std::vector<uint8_t> take(size_t n) {
    n = n < n_ ? n : n_;
    std::vector<uint8_t> out(p_, p_ + n);
    p_ += n;
    n_ -= n;
    return out;
  }
  std::vector<uint8_t> rest() { return take(n_); }

 private:
  const uint8_t* p_;
  size_t n_;
};

// A file named after the process and `tag` in $TMPDIR, else /dev/shm (memory), else /tmp; written
// afresh for each input and removed at exit. Unlink and create rather than truncate: ext4 flushes
// a file truncated to zero when it is closed, which made each execution wait for the disk.
class ScratchFile {
 public:
  explicit ScratchFile(const std::string& tag) {
    const char* env = std::getenv("TMPDIR");
    const std::string dir = env && *env ? env : ::access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
    path_ = dir + "/trainer_fuzz_" + std::to_string(::getpid()) + "_" + tag;
  }
  ~ScratchFile() { ::unlink(path_.c_str()); }
  const std::string& write(const std::vector<uint8_t>& bytes) {
    ::unlink(path_.c_str());
    const int fd = ::open(path_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0) std::abort();
    for (size_t done = 0; done < bytes.size();) {
      const ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
      if (n <= 0) std::abort();
      done += size_t(n);
    }
    ::close(fd);
    return path_;
  }

 private:
  std::string path_;
};

// gzip (one member, or two when `split` > 0: bytes [0, split) and [split, end)).
inline std::vector<uint8_t> gzip(const std::vector<uint8_t>& in, size_t split = 0) {
  std::vector<uint8_t> out;
  const auto member = [&](const uint8_t* p, size_t n) {
    z_stream zs{};
    if (deflateInit2(&zs, Z_DEFAULT_COMPRESSION, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK)
      std::abort();
    std::vector<uint8_t> buf(deflateBound(&zs, uLong(n)) + 32);
    zs.next_in = const_cast<Bytef*>(p);
    zs.avail_in = uInt(n);
    zs.next_out = buf.data();
    zs.avail_out = uInt(buf.size());
    if (deflate(&zs, Z_FINISH) != Z_STREAM_END) std::abort();
    out.insert(out.end(), buf.data(), buf.data() + zs.total_out);
    deflateEnd(&zs);
  };
  if (split > 0 && split < in.size()) {
    member(in.data(), split);
    member(in.data() + split, in.size() - split);
  } else {
    member(in.data(), in.size());
  }
  return out;
}

// Runs a reader; typed errors are its answer to bad input, InternalError is a bug.
template <class Call>
void expect_typed_errors(Call&& call) {
  try {
    call();
  } catch (const InternalError&) {
    throw;
  } catch (const Error&) {
  }
}

}  // namespace trainer::fuzz

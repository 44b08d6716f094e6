// DataFile: open(O_NONBLOCK) + fstat, so nothing but a regular file is ever read; then read(2)
// through a buffer of up to 256 KiB (large reads of stored bytes go straight to the caller's memory), and
// zlib's inflate from that buffer into the caller's memory for gzip files.
#include "datasets/file_bytes.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <new>

#include "lib/core/error.h"
#include "lib/core/file_kind.h"

namespace trainer {
namespace {

constexpr size_t kBufferBytes = 256 << 10;
constexpr size_t kMaxChunk = 16 << 20;  // the stop hook is checked at least this often
constexpr uint64_t kDeflateMaxRatio = 1032;

std::atomic<bool (*)()> g_stop_check{nullptr};

void check_stop(const std::string& path) {
  bool (*stop)() = g_stop_check.load();
  if (stop && stop()) throw InterruptedError("interrupted while reading '" + path + "'");
}

std::string gib(uint64_t bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f GiB", double(bytes) / double(1ull << 30));
  return buf;
}

// read(2), retried when a signal interrupts it (after asking the stop hook).
size_t read_some(int fd, uint8_t* dst, size_t n, const std::string& path) {
  for (;;) {
    const ssize_t got = ::read(fd, dst, n);
    if (got >= 0) return size_t(got);
    if (errno != EINTR) throw DataError("cannot read '" + path + "': " + std::strerror(errno));
    check_stop(path);
  }
}

}  // namespace

void set_read_stop_check(bool (*stop_requested)()) { g_stop_check = stop_requested; }
bool (*read_stop_check())() { return g_stop_check.load(); }

void check_fits_in_memory(const std::string& path, uint64_t bytes, const std::string& what) {
  const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGE_SIZE);
  if (pages <= 0 || page <= 0) return;
  const uint64_t memory = uint64_t(pages) * uint64_t(page);
  if (bytes > memory)
    throw OutOfMemoryError("'" + path + "': holding " + what + " takes " + std::to_string(bytes) +
                           " bytes (" + gib(bytes) + "), more than this machine's " + gib(memory) +
                           " of memory");
}

DataFile::DataFile(const std::string& path, Gzip gzip) : path_(path) {
  // O_NONBLOCK: opening a FIFO that has no writer would otherwise wait for one, forever.
  do fd_ = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  while (fd_ < 0 && errno == EINTR);
  if (fd_ < 0) throw DataError("cannot open '" + path + "': " + std::strerror(errno));
  try {
    struct stat st {};
    if (::fstat(fd_, &st) != 0) throw DataError("cannot read '" + path + "': " + std::strerror(errno));
    if (!S_ISREG(st.st_mode))
      throw DataError("'" + path + "' is " + file_kind(st.st_mode) +
                      ", not a regular file; data, weights and checkpoint files must be regular files");
    file_size_ = uint64_t(st.st_size);
    // A small file gets a small buffer: fuzzing opens thousands of them a second.
    in_.resize(size_t(std::clamp<uint64_t>(file_size_ + 1, 4096, kBufferBytes)));
    if (gzip == Gzip::never) return;
    while (in_end_ < 2 && refill()) {
    }
    if (in_end_ >= 2 && in_[0] == 0x1f && in_[1] == 0x8b) {
      auto zs = std::make_unique<z_stream_s>();
      if (inflateInit2(zs.get(), 15 + 16) != Z_OK)
        throw DataError("zlib initialisation failed for '" + path + "'");
      zs_ = std::move(zs);
    }
  } catch (...) {
    ::close(fd_);
    throw;
  }
}

DataFile::~DataFile() {
  if (zs_) inflateEnd(zs_.get());
  if (fd_ >= 0) ::close(fd_);
}

uint64_t DataFile::max_content_size() const {
  if (!zs_) return file_size_;
  return file_size_ > UINT64_MAX / kDeflateMaxRatio ? UINT64_MAX : file_size_ * kDeflateMaxRatio;
}

bool DataFile::refill() {
  if (eof_) return false;
  check_stop(path_);
  if (in_pos_ > 0) {  // keep the unread tail at the front
    std::memmove(in_.data(), in_.data() + in_pos_, in_end_ - in_pos_);
    in_offset_ += in_pos_;
    in_end_ -= in_pos_;
    in_pos_ = 0;
  }
  if (in_end_ == in_.size()) return true;
  const size_t got = read_some(fd_, in_.data() + in_end_, in_.size() - in_end_, path_);
  if (got == 0) eof_ = true;
  in_end_ += got;
  return got > 0;
}

size_t DataFile::read_stored(uint8_t* dst, size_t n) {
  size_t done = 0;
  while (done < n) {
    if (in_pos_ < in_end_) {
      const size_t take = std::min(n - done, in_end_ - in_pos_);
      std::memcpy(dst + done, in_.data() + in_pos_, take);
      in_pos_ += take;
      done += take;
    } else if (n - done >= in_.size() && !eof_) {  // large: straight into the caller's memory
      check_stop(path_);
      const size_t got = read_some(fd_, dst + done, std::min(n - done, kMaxChunk), path_);
      if (got == 0) eof_ = true;
      in_offset_ += got;
      done += got;
    } else if (!refill()) {
      break;
    }
  }
  return done;
}

size_t DataFile::inflate_into(uint8_t* dst, size_t n) {
  z_stream_s& zs = *zs_;
  size_t done = 0;
  while (done < n && !content_done_) {
    if (in_pos_ == in_end_) refill();
    if (member_done_) {  // at the end of a member: another one, or the end of the file
      while (in_end_ - in_pos_ < 2 && refill()) {
      }
      if (in_pos_ == in_end_) {
        content_done_ = true;
        break;
      }
      if (in_end_ - in_pos_ < 2 || in_[in_pos_] != 0x1f || in_[in_pos_ + 1] != 0x8b)
        throw DataError("'" + path_ + "': " + std::to_string(file_size_ - (in_offset_ + in_pos_)) +
                        " unexpected bytes after the end of the gzip data");
      inflateReset(&zs);
      member_done_ = false;
    }
    const size_t out_avail = std::min(n - done, kMaxChunk);
    zs.next_in = in_.data() + in_pos_;
    zs.avail_in = uInt(in_end_ - in_pos_);
    zs.next_out = dst + done;
    zs.avail_out = uInt(out_avail);
    const int rc = inflate(&zs, Z_NO_FLUSH);
    const size_t produced = out_avail - zs.avail_out;
    in_pos_ = in_end_ - zs.avail_in;
    done += produced;
    if (rc == Z_STREAM_END) {
      member_done_ = true;
      continue;
    }
    if (rc == Z_MEM_ERROR) throw OutOfMemoryError("out of memory while decompressing '" + path_ + "'");
    if (rc != Z_OK && rc != Z_BUF_ERROR)
      throw DataError("'" + path_ + "' is not valid gzip data (" + (zs.msg ? zs.msg : "corrupt stream") +
                      ")");
    // No progress with every stored byte consumed: the file ends inside the stream.
    if (produced == 0 && in_pos_ == in_end_ && eof_)
      throw DataError("'" + path_ + "' is truncated: its " + std::to_string(file_size_) +
                      " bytes end inside the gzip stream, before its end marker");
  }
  return done;
}

size_t DataFile::read(void* dst, size_t n) {
  uint8_t* out = static_cast<uint8_t*>(dst);
  size_t done = 0;
  if (n > 0 && peeked_ >= 0) {
    out[done++] = uint8_t(peeked_);
    peeked_ = -1;
  }
  done += zs_ ? inflate_into(out + done, n - done) : read_stored(out + done, n - done);
  position_ += done;
  return done;
}

bool DataFile::at_end() {
  if (peeked_ >= 0) return false;
  uint8_t byte;
  if (read(&byte, 1) == 0) return true;
  --position_;
  peeked_ = byte;
  return false;
}

uint64_t DataFile::content_size_hint() const {
  if (!zs_) return file_size_;
  // The gzip trailer's ISIZE: the last member's size mod 2^32, exact for the usual file.
  uint8_t t[4];
  if (file_size_ < 4 || ::pread(fd_, t, 4, off_t(file_size_ - 4)) != 4) return 0;
  const uint64_t isize = t[0] | (uint64_t(t[1]) << 8) | (uint64_t(t[2]) << 16) | (uint64_t(t[3]) << 24);
  return std::min(isize, max_content_size());
}

std::vector<uint8_t> read_file_bytes(const std::string& path, uint64_t max_bytes, const std::string& what) {
  DataFile f(path);
  // Sized from the file (+1 so the end is seen without growing), doubled while too small.
  uint64_t capacity = std::max<uint64_t>(f.content_size_hint(), f.gzipped() ? 64 << 10 : 0) + 1;
  if (max_bytes > 0) capacity = std::min(capacity, max_bytes + 1);
  std::vector<uint8_t> bytes;
  size_t used = 0;
  for (;; capacity *= 2) {
    check_fits_in_memory(path, capacity, "its contents");
    try {
      bytes.resize(size_t(capacity));
    } catch (const std::bad_alloc&) {
      throw OutOfMemoryError("'" + path + "': out of host memory for its contents (" +
                             std::to_string(capacity) + " bytes)");
    }
    used += f.read(bytes.data() + used, bytes.size() - used);
    if (max_bytes > 0 && used > max_bytes)
      throw DataError("'" + path + "': " + what + " holds more than " + std::to_string(max_bytes) + " bytes" +
                      (f.gzipped() ? " once decompressed" : "") + ", the limit for " + what);
    if (used < bytes.size()) break;
    if (max_bytes > 0) capacity = std::min(capacity, max_bytes / 2 + 1);  // doubled below: max_bytes + 2
  }
  bytes.resize(used);
  if (bytes.capacity() - used > used / 4) bytes.shrink_to_fit();
  return bytes;
}

}  // namespace trainer

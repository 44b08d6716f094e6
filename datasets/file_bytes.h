// Reading data files, the one way every reader (and the safetensors reader) opens them.
//
// Only regular files are read: a FIFO, a directory, a device (/dev/zero) or a socket is refused
// with a DataError naming the path and what it is, before anything is read. The open uses
// O_NONBLOCK, so even opening a FIFO without a writer returns at once.
//
// A file whose first two bytes are the gzip magic (1f 8b) is inflated while it is read, so
// "train-images-idx3-ubyte.gz" and its unpacked twin read the same. Readers pull the bytes they
// need, so they check a header before the data it describes is inflated, and they inflate
// exactly what the header says (a decompressed stream longer or shorter than that is a data
// error). Concatenated gzip members are joined (as gunzip does); anything else after the last
// member, a truncated stream or a CRC mismatch is a DataError.
//
// A read checks the stop hook (set_read_stop_check) between chunks and throws InterruptedError
// when it says so; a read that the kernel interrupts (EINTR) is retried.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

struct z_stream_s;  // zlib

namespace trainer {

class DataFile {
 public:
  enum class Gzip { detect, never };  // never: the bytes as stored (safetensors)

  // Throws DataError naming the path: missing, unreadable or not a regular file.
  explicit DataFile(const std::string& path, Gzip gzip = Gzip::detect);
  ~DataFile();
  DataFile(const DataFile&) = delete;
  DataFile& operator=(const DataFile&) = delete;

  const std::string& path() const { return path_; }
  bool gzipped() const { return zs_ != nullptr; }
  uint64_t file_size() const { return file_size_; }  // bytes on disk
  // The most content bytes the file can hold: its size, or for gzip its size times deflate's
  // largest expansion (1032). A header that describes more is lying.
  uint64_t max_content_size() const;
  // A first guess of the content size: the file size, or for gzip the size its trailer records
  // (mod 2^32), capped by max_content_size(). Only for sizing buffers: nothing checks it.
  uint64_t content_size_hint() const;
  uint64_t position() const { return position_; }  // content bytes read so far

  // Up to n content bytes; fewer only at the end of the content.
  size_t read(void* dst, size_t n);
  // True when no content byte is left. For gzip this inflates to the end of the stream, so the
  // CRC and length in its trailer are checked too.
  bool at_end();

 private:
  size_t read_stored(uint8_t* dst, size_t n);
  size_t inflate_into(uint8_t* dst, size_t n);
  bool refill();  // reads more stored bytes into the input buffer; false at end of file

  std::string path_;
  int fd_ = -1;
  uint64_t file_size_ = 0;
  std::vector<uint8_t> in_;  // stored bytes read ahead: in_[in_pos_, in_end_)
  size_t in_pos_ = 0, in_end_ = 0;
  uint64_t in_offset_ = 0;  // file offset of in_[0]
  bool eof_ = false;
  std::unique_ptr<z_stream_s> zs_;  // null for stored bytes
  bool member_done_ = false;        // the current gzip member ended; another may follow
  bool content_done_ = false;
  int peeked_ = -1;  // a content byte read ahead by at_end()
  uint64_t position_ = 0;
};

// The whole content of a data file (gunzipped when gzip-compressed), for the text formats.
// Throws DataError naming the path and the reason, OutOfMemoryError when it cannot fit in memory.
// max_bytes > 0: a DataError, naming `what`, once the content exceeds it (small side files such
// as a class-names list, where a few KB of gzip could otherwise inflate to gigabytes).
std::vector<uint8_t> read_file_bytes(const std::string& path, uint64_t max_bytes = 0,
                                     const std::string& what = "");

// Throws OutOfMemoryError naming `path` and `what` when `bytes` exceed this machine's memory.
void check_fits_in_memory(const std::string& path, uint64_t bytes, const std::string& what);

// The hook reads call between chunks; when it returns true they throw InterruptedError. The CLI
// passes its SIGINT/SIGTERM flag (nullptr: never interrupted).
void set_read_stop_check(bool (*stop_requested)());
// The hook in place (nullptr when none).
bool (*read_stop_check())();

}  // namespace trainer

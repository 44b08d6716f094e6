// read_file_bytes: stdio read into a buffer sized from the file size (pipes work too), then zlib
// inflate of one gzip member at a time into a buffer sized from the gzip trailer.
#include "datasets/file_bytes.h"

#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>

#include "lib/core/error.h"

namespace trainer {
namespace {

// Truncates to `used` bytes, returning spare capacity only when it is worth a copy.
std::vector<uint8_t> fit(std::vector<uint8_t> v, size_t used) {
  v.resize(used);
  if (v.capacity() - used > used / 4) v.shrink_to_fit();
  return v;
}

struct FileCloser {
  void operator()(std::FILE* f) const { std::fclose(f); }
};

std::vector<uint8_t> read_raw(const std::string& path) {
  std::unique_ptr<std::FILE, FileCloser> f(std::fopen(path.c_str(), "rb"));
  if (!f) throw DataError("cannot open '" + path + "': " + std::strerror(errno));
  // Size a regular file exactly (+1 so EOF is seen without growing); pipes grow by doubling.
  std::error_code ec;
  const uintmax_t size_hint = std::filesystem::file_size(path, ec);
  std::vector<uint8_t> bytes(ec ? size_t(1) << 20 : static_cast<size_t>(size_hint) + 1);
  size_t used = 0;
  for (;;) {
    if (used == bytes.size()) bytes.resize(bytes.size() * 2);
    const size_t got = std::fread(bytes.data() + used, 1, bytes.size() - used, f.get());
    used += got;
    if (got == 0) break;
  }
  if (std::ferror(f.get())) throw DataError("cannot read '" + path + "': " + std::strerror(errno));
  return fit(std::move(bytes), used);
}

bool has_gzip_magic(const uint8_t* p, size_t n) { return n >= 2 && p[0] == 0x1f && p[1] == 0x8b; }

std::vector<uint8_t> gunzip(const std::string& path, const std::vector<uint8_t>& in) {
  // Start from the size in the trailer (ISIZE: uncompressed size mod 2^32 of the last member,
  // exact for the usual single-member file under 4 GiB; deflate expands at most ~1032x, which
  // bounds a corrupt value) and double when it is too small.
  const size_t n = in.size();
  const size_t isize = n >= 4 ? in[n - 4] | (size_t(in[n - 3]) << 8) | (size_t(in[n - 2]) << 16) |
                                    (size_t(in[n - 1]) << 24)
                              : 0;
  std::vector<uint8_t> out(std::max<size_t>(std::min(isize, n * 1032), 1u << 16) + 1);
  size_t in_pos = 0, out_pos = 0;
  z_stream zs{};
  if (inflateInit2(&zs, 15 + 16) != Z_OK) throw DataError("zlib initialisation failed for '" + path + "'");
  std::unique_ptr<z_stream, int (*)(z_stream*)> guard(&zs, inflateEnd);

  constexpr size_t kChunk = 1u << 30;  // z_stream counts in uInt (32-bit)
  for (;;) {
    if (out_pos == out.size()) out.resize(out.size() * 2);
    const size_t in_avail = std::min(in.size() - in_pos, kChunk);
    const size_t out_avail = std::min(out.size() - out_pos, kChunk);
    zs.next_in = const_cast<Bytef*>(in.data() + in_pos);
    zs.avail_in = static_cast<uInt>(in_avail);
    zs.next_out = out.data() + out_pos;
    zs.avail_out = static_cast<uInt>(out_avail);
    const int rc = inflate(&zs, Z_NO_FLUSH);
    in_pos += in_avail - zs.avail_in;
    out_pos += out_avail - zs.avail_out;
    if (rc == Z_STREAM_END) {
      if (in_pos == in.size()) break;
      if (!has_gzip_magic(in.data() + in_pos, in.size() - in_pos))
        throw DataError("'" + path + "': " + std::to_string(in.size() - in_pos) +
                        " unexpected bytes after the end of the gzip data");
      inflateReset(&zs);  // next concatenated member
      continue;
    }
    if (rc == Z_MEM_ERROR) throw DataError("out of memory while decompressing '" + path + "'");
    if (rc != Z_OK && rc != Z_BUF_ERROR)
      throw DataError("'" + path + "' is not valid gzip data (" + (zs.msg ? zs.msg : "corrupt stream") + ")");
    // Z_BUF_ERROR or Z_OK with all input consumed and output space left: the stream stopped early.
    if (in_pos == in.size() && zs.avail_out != 0)
      throw DataError("'" + path + "' is truncated: its " + std::to_string(in.size()) +
                      " bytes end inside the gzip stream, before its end marker");
  }
  return fit(std::move(out), out_pos);
}

}  // namespace

std::vector<uint8_t> read_file_bytes(const std::string& path) {
  std::vector<uint8_t> raw = read_raw(path);
  if (!has_gzip_magic(raw.data(), raw.size())) return raw;
  return gunzip(path, raw);
}

}  // namespace trainer

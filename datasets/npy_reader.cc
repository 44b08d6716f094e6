// NPY: "\x93NUMPY", major, minor, header length (u16 for v1, u32 for v2/v3), then an ASCII
// (v3: UTF-8) Python dict literal such as {'descr': '<f4', 'fortran_order': False,
// 'shape': (60000, 28, 28), } padded with spaces and '\n', then the raw data. The header is
// parsed by a tiny recursive-descent reader of exactly that subset of Python syntax.
// Data is little-endian on disk; this file assumes a little-endian host (checked below).
#include "datasets/npy_reader.h"

#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <memory>
#include <type_traits>

#include "datasets/file_bytes.h"
#include "lib/core/error.h"

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "npy_reader assumes a little-endian host"
#endif

namespace trainer {
namespace {

const char kMagic[] = "\x93NUMPY";
constexpr size_t kMagicLen = 6;
constexpr size_t kMaxHeader =
    1 << 20;  // numpy writes a few hundred bytes; its reader's default limit is 10000

// Parses the header dict; `where` prefixes every message.
class HeaderParser {
 public:
  HeaderParser(const std::string& text, const std::string& where) : s_(text), where_(where) {}

  void parse(std::string* descr, bool* fortran, std::vector<int64_t>* shape) {
    bool seen[3] = {false, false, false};
    expect('{');
    while (!peek('}')) {
      const std::string key = string_literal();
      expect(':');
      if (key == "descr") {
        if (peek('[')) fail("structured dtypes (descr is a list of fields) are not supported");
        *descr = string_literal();
        seen[0] = true;
      } else if (key == "fortran_order") {
        *fortran = boolean();
        seen[1] = true;
      } else if (key == "shape") {
        *shape = int_tuple();
        seen[2] = true;
      } else {
        fail("unexpected key '" + key + "' in the header");
      }
      if (!peek('}')) expect(',');
    }
    if (!seen[0] || !seen[1] || !seen[2]) fail("header lacks one of 'descr', 'fortran_order', 'shape'");
  }

 private:
  [[noreturn]] void fail(const std::string& what) const { throw DataError(where_ + ": " + what); }
  void skip_ws() {
    while (pos_ < s_.size() && std::isspace(static_cast<unsigned char>(s_[pos_]))) ++pos_;
  }
  bool peek(char c) {
    skip_ws();
    return pos_ < s_.size() && s_[pos_] == c;
  }
  void expect(char c) {
    if (!peek(c))
      fail(std::string("malformed header: expected '") + c + "' at offset " + std::to_string(pos_));
    ++pos_;
  }
  std::string string_literal() {
    skip_ws();
    const char quote = pos_ < s_.size() ? s_[pos_] : '\0';
    if (quote != '\'' && quote != '"')
      fail("malformed header: expected a string at offset " + std::to_string(pos_));
    const size_t end = s_.find(quote, pos_ + 1);
    if (end == std::string::npos) fail("malformed header: unterminated string");
    std::string out = s_.substr(pos_ + 1, end - pos_ - 1);
    pos_ = end + 1;
    return out;
  }
  bool boolean() {
    skip_ws();
    for (const char* word : {"True", "False"}) {
      if (s_.compare(pos_, std::strlen(word), word) == 0) {
        pos_ += std::strlen(word);
        return word[0] == 'T';
      }
    }
    fail("malformed header: 'fortran_order' must be True or False");
  }
  std::vector<int64_t> int_tuple() {
    std::vector<int64_t> out;
    expect('(');
    while (!peek(')')) {
      int64_t v = 0;
      size_t digits = 0;
      for (; pos_ < s_.size() && std::isdigit(static_cast<unsigned char>(s_[pos_])); ++pos_, ++digits) {
        if (v > (std::numeric_limits<int64_t>::max() - 9) / 10) fail("shape dimension too large");
        v = v * 10 + (s_[pos_] - '0');
      }
      if (digits == 0) fail("malformed header: 'shape' must be a tuple of non-negative integers");
      if (pos_ < s_.size() && s_[pos_] == 'L') ++pos_;  // Python 2 long suffix
      out.push_back(v);
      if (!peek(')')) expect(',');
    }
    ++pos_;
    return out;
  }

  const std::string& s_;
  const std::string& where_;
  size_t pos_ = 0;
};

// Element size in bytes of a supported descr; throws with a re-save hint otherwise.
size_t item_size(const std::string& descr, const std::string& where) {
  if (descr == "|u1" || descr == "<u1") return 1;
  if (descr == "<i4" || descr == "<f4") return 4;
  if (descr == "<i8" || descr == "<f8") return 8;
  if (!descr.empty() && descr.find('O') != std::string::npos)
    throw DataError(where + " holds an object array (descr '" + descr +
                    "'), e.g. ragged lists; save a numeric array instead (pad sequences first)");
  if (!descr.empty() && descr[0] == '>')
    throw DataError(where + " is big-endian (descr '" + descr + "'); re-save it with a.astype('<" +
                    descr.substr(1) + "')");
  throw DataError(where + " has unsupported dtype '" + descr +
                  "'; supported: uint8 '|u1', int32 '<i4', int64 '<i8', float32 '<f4', float64 '<f8'");
}

}  // namespace

int64_t NpyArray::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

namespace {

// Magic, version and header length (u16 for v1, u32 for v2/v3) first, then the header dict; `f`
// is left at the first data byte. Returns the array's descr and shape (no data); *data_start:
// the data's offset in the (decompressed) file; *fortran: its fortran_order.
NpyArray read_header(DataFile& f, const std::string& where, uint64_t* data_start, bool* fortran) {
  uint8_t pre[12];
  const size_t got = f.read(pre, kMagicLen + 4);
  if (got == 0) throw DataError(where + " is empty");
  if (got < kMagicLen + 4 || std::memcmp(pre, kMagic, kMagicLen) != 0)
    throw DataError(where + " does not start with the NPY magic \\x93NUMPY (is it a .npz or text file?)");
  const uint8_t major = pre[6];
  if (major < 1 || major > 3)
    throw DataError(where + " has format version " + std::to_string(major) + "." + std::to_string(pre[7]) +
                    "; supported: 1.0, 2.0, 3.0");
  size_t header_len = pre[8] | (size_t(pre[9]) << 8);
  size_t header_start = 10;
  if (major >= 2) {
    if (f.read(pre + 10, 2) != 2) throw DataError(where + " is truncated inside its header");
    header_len |= (size_t(pre[10]) << 16) | (size_t(pre[11]) << 24);
    header_start = 12;
  }
  const auto truncated_header = [&](uint64_t has) {
    return DataError(where + " is truncated inside its header: header needs " +
                     std::to_string(header_start + header_len) + " bytes, " +
                     (f.gzipped() ? "the decompressed data has " : "file has ") + std::to_string(has));
  };
  if (!f.gzipped() && f.file_size() < header_start + header_len) throw truncated_header(f.file_size());
  if (header_len > kMaxHeader)
    throw DataError(where + ": its header length " + std::to_string(header_len) + " is over the " +
                    std::to_string(kMaxHeader) + " bytes any NPY header needs");
  std::string header(header_len, '\0');
  if (f.read(header.data(), header_len) != header_len) throw truncated_header(f.position());

  NpyArray a;
  *fortran = false;
  HeaderParser(header, where).parse(&a.descr, fortran, &a.shape);
  *data_start = header_start + header_len;
  return a;
}

}  // namespace

NpyArray read_npy_header(const std::string& path) {
  DataFile f(path);
  uint64_t data_start = 0;
  bool fortran = false;
  return read_header(f, "NPY file '" + path + "'", &data_start, &fortran);
}

NpyArray read_npy(const std::string& path) {
  DataFile f(path);
  const std::string where = "NPY file '" + path + "'";
  uint64_t data_start = 0;
  bool fortran = false;
  NpyArray a = read_header(f, where, &data_start, &fortran);
  const size_t item = item_size(a.descr, where);
  if (fortran)
    throw DataError(where +
                    " is stored in Fortran (column-major) order; re-save it with "
                    "np.save(path, np.ascontiguousarray(a))");

  uint64_t numel = 1;
  for (int64_t d : a.shape) {
    if (d != 0 && numel > std::numeric_limits<uint64_t>::max() / item / static_cast<uint64_t>(d))
      throw DataError(where + ": shape describes more data than any file can hold");
    numel *= static_cast<uint64_t>(d);
  }
  const uint64_t data_bytes = numel * item;
  const uint64_t expected = data_start + data_bytes;
  const std::string needs = "descr '" + a.descr + "' with " + std::to_string(numel) + " elements needs " +
                            std::to_string(expected) + " bytes";
  if (!f.gzipped() && f.file_size() != expected)
    throw DataError(where + (f.file_size() < expected ? " is truncated" : " has trailing bytes") + ": " +
                    needs + ", file has " + std::to_string(f.file_size()));
  if (expected > f.max_content_size())
    throw DataError(where + " is truncated: " + needs + ", more than its " + std::to_string(f.file_size()) +
                    " gzip bytes can hold");
  check_fits_in_memory(path, data_bytes, "its data");

  const auto read_exact = [&](void* dst, size_t n) {
    if (f.read(dst, n) != n)
      throw DataError(where + " is truncated: " + needs + ", " +
                      (f.gzipped() ? "the decompressed data has " : "file has ") +
                      std::to_string(f.position()));
  };
  // Narrowing or widening conversions go through a small buffer of stored elements.
  const auto convert = [&](auto stored, auto* out) {
    using Stored = decltype(stored);
    std::vector<Stored> chunk(size_t(std::min<uint64_t>(numel, 1 << 16)));
    for (uint64_t i = 0; i < numel; i += chunk.size()) {
      const size_t m = size_t(std::min<uint64_t>(chunk.size(), numel - i));
      read_exact(chunk.data(), m * sizeof(Stored));
      for (size_t j = 0; j < m; ++j) out[i + j] = static_cast<std::remove_pointer_t<decltype(out)>>(chunk[j]);
    }
  };
  if (item == 1) {
    a.u8.resize(numel);
    read_exact(a.u8.data(), numel);
  } else if (a.descr == "<f4") {
    a.f32.resize(numel);
    read_exact(a.f32.data(), numel * 4);
  } else if (a.descr == "<f8") {
    a.f32.resize(numel);
    convert(double(), a.f32.data());
  } else if (a.descr == "<i4") {
    a.i64.resize(numel);
    convert(int32_t(), a.i64.data());
  } else {  // <i8
    a.i64.resize(numel);
    read_exact(a.i64.data(), numel * 8);
  }
  if (!f.at_end())
    throw DataError(where + " has trailing bytes: " + needs + ", " +
                    (f.gzipped() ? "the decompressed data is longer" : "the file is longer"));
  return a;
}

template <typename T>
void nhwc_to_nchw(std::vector<T>& data, std::vector<int64_t>& shape) {
  if (shape.size() != 4) throw InternalError("nhwc_to_nchw: a 4-D shape is needed");
  const int64_t N = shape[0], H = shape[1], W = shape[2], C = shape[3];
  std::vector<T> out(data.size());
  for (int64_t n = 0; n < N; ++n) {
    const T* src = data.data() + n * H * W * C;  // (H, W, C)
    T* dst = out.data() + n * C * H * W;         // (C, H, W)
    for (int64_t h = 0; h < H; ++h)
      for (int64_t w = 0; w < W; ++w)
        for (int64_t c = 0; c < C; ++c) dst[(c * H + h) * W + w] = src[(h * W + w) * C + c];
  }
  data.swap(out);
  shape = {N, C, H, W};
}

template void nhwc_to_nchw<uint8_t>(std::vector<uint8_t>&, std::vector<int64_t>&);
template void nhwc_to_nchw<float>(std::vector<float>&, std::vector<int64_t>&);
template void nhwc_to_nchw<int64_t>(std::vector<int64_t>&, std::vector<int64_t>&);

Dataset dataset_from_npy(const std::string& x_path, const std::string& y_path, int num_classes,
                         bool channels_last, const TargetLayout& target) {
  const bool values = target.kind == TargetKind::values;
  if (num_classes < 1 && !values)
    throw DataError("num_classes must be >= 1, got " + std::to_string(num_classes));
  NpyArray x = read_npy(x_path);
  const NpyArray y = read_npy(y_path);
  const std::string xw = "NPY samples file '" + x_path + "'", yw = "NPY labels file '" + y_path + "'";
  if (x.shape.empty() || x.shape[0] == 0)
    throw DataError(xw + " holds no samples: shape must be (N, ...) with N > 0");
  if (channels_last) {
    if (x.shape.size() != 4)
      throw DataError(xw + " has shape " + Shape(x.shape).str() +
                      "; layout: nhwc takes channels-last images of shape (N, height, width, channels)");
    if (!x.u8.empty())
      nhwc_to_nchw(x.u8, x.shape);
    else if (!x.f32.empty())
      nhwc_to_nchw(x.f32, x.shape);
    else
      nhwc_to_nchw(x.i64, x.shape);
  }
  const int64_t n = x.shape[0];
  const bool y_shape_ok =
      y.shape.size() == 1 || (y.shape.size() == 2 && (values ? y.shape[1] >= 1 : y.shape[1] == 1));
  if (!y_shape_ok || y.shape[0] != n)
    throw DataError(yw + " has shape " + Shape(y.shape).str() + "; expected (" + std::to_string(n) +
                    ",) or (" + std::to_string(n) + (values ? ", K)" : ", 1)") + " to match the " +
                    std::to_string(n) + " samples in '" + x_path + "'" +
                    (!values && y.shape.size() == 2 ? " (a 2-D y of several columns needs a loss that takes "
                                                      "value targets, such as binary_cross_entropy)"
                                                    : ""));
  if (y.descr[1] == 'f' && !values)
    throw DataError(yw + " holds floating-point values (descr '" + y.descr +
                    "'); labels must be integers: re-save with y.astype('int64')");

  Dataset ds;
  ds.name = x_path;
  ds.num_classes = num_classes;
  ds.sample_shape =
      x.shape.size() == 1 ? Shape{1} : Shape(std::vector<int64_t>(x.shape.begin() + 1, x.shape.end()));
  if (ds.sample_shape.numel() == 0)
    throw DataError(xw + " has shape " + Shape(x.shape).str() + ": samples must not have a zero dimension");
  if (values) {
    ds.target_width = y.shape.size() == 2 ? y.shape[1] : 1;
    if (y.descr[1] == 'f') {
      ds.targets = y.f32;
    } else if (y.descr[1] == 'u') {
      ds.targets.assign(y.u8.begin(), y.u8.end());
    } else {
      ds.targets.assign(y.i64.begin(), y.i64.end());
    }
    for (size_t i = 0; i < ds.targets.size(); ++i)
      if (!std::isfinite(ds.targets[i]))
        throw DataError(yw + ": element " + std::to_string(i) + " (sample " +
                        std::to_string(int64_t(i) / ds.target_width) + ") is not a finite number");
  } else {
    ds.labels.resize(n);
    for (int64_t i = 0; i < n; ++i) {
      const int64_t v = y.descr[1] == 'u' ? y.u8[i] : y.i64[i];
      if (v < 0 || v >= num_classes)
        throw DataError(yw + ": label " + std::to_string(v) + " at index " + std::to_string(i) +
                        " is out of range for num_classes=" + std::to_string(num_classes) + " (allowed 0.." +
                        std::to_string(num_classes - 1) + ")");
      ds.labels[i] = static_cast<int32_t>(v);
    }
  }
  if (x.descr[1] == 'u') {
    ds.dtype = SampleDtype::u8;
    ds.u8 = std::move(x.u8);
  } else if (x.descr[1] == 'f') {
    ds.dtype = SampleDtype::f32;
    ds.f32 = std::move(x.f32);
  } else {
    constexpr int64_t kExact = int64_t(1) << 24;  // float32 holds every integer up to 2^24
    ds.dtype = SampleDtype::f32;
    ds.f32.resize(x.i64.size());
    for (size_t i = 0; i < x.i64.size(); ++i) {
      const int64_t v = x.i64[i];
      if (v > kExact || v < -kExact)
        throw DataError(xw + ": element " + std::to_string(i) + " is " + std::to_string(v) +
                        ", which float32 cannot hold exactly (|value| must be <= 16777216)");
      ds.f32[i] = static_cast<float>(v);
    }
  }
  return ds;
}

namespace {

void write_npy(const std::string& path, const char* descr, const std::vector<int64_t>& shape,
               const void* data, size_t element_bytes) {
  std::string dims;
  int64_t numel = 1;
  for (int64_t d : shape) {
    dims += std::to_string(d) + ", ";
    numel *= d;
  }
  if (shape.size() > 1)
    dims.resize(dims.size() - 2);  // numpy: (3,) for 1-D, (2, 3) otherwise
  else if (shape.size() == 1)
    dims.pop_back();
  std::string header =
      std::string("{'descr': '") + descr + "', 'fortran_order': False, 'shape': (" + dims + "), }";
  // Pad with spaces so magic + version + length + header (ending in '\n') is a multiple of 64.
  const size_t prefix = kMagicLen + 2 + 2;
  header.append((64 - (prefix + header.size() + 1) % 64) % 64, ' ');
  header += '\n';

  std::string out(kMagic, kMagicLen);
  out += '\x01';
  out += '\x00';
  out += static_cast<char>(header.size() & 0xFF);
  out += static_cast<char>(header.size() >> 8);  // rank would need to exceed ~6000 to overflow u16
  out += header;

  std::unique_ptr<std::FILE, int (*)(std::FILE*)> f(std::fopen(path.c_str(), "wb"), std::fclose);
  if (!f) throw DataError("cannot create '" + path + "': " + std::strerror(errno));
  const size_t n = static_cast<size_t>(numel);
  if (std::fwrite(out.data(), 1, out.size(), f.get()) != out.size() ||
      (n > 0 && std::fwrite(data, element_bytes, n, f.get()) != n) || std::fclose(f.release()) != 0)
    throw DataError("cannot write '" + path + "': " + std::strerror(errno));
}

}  // namespace

void write_npy_f32(const std::string& path, const std::vector<int64_t>& shape, const float* data) {
  write_npy(path, "<f4", shape, data, sizeof(float));
}

void write_npy_i64(const std::string& path, const std::vector<int64_t>& shape, const int64_t* data) {
  write_npy(path, "<i8", shape, data, sizeof(int64_t));
}

void write_npy_u8(const std::string& path, const std::vector<int64_t>& shape, const uint8_t* data) {
  write_npy(path, "|u1", shape, data, 1);
}

}  // namespace trainer

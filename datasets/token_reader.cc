#include "datasets/token_reader.h"

#include <cstring>

#include "datasets/file_bytes.h"
#include "lib/core/error.h"

namespace trainer {
namespace {

constexpr int32_t kLlmcMagic = 20240520;
constexpr size_t kLlmcHeaderBytes = 256 * sizeof(int32_t);

}  // namespace

std::vector<uint16_t> read_token_file(const std::string& path) {
  const std::vector<uint8_t> bytes = read_file_bytes(path);
  size_t begin = 0, count = bytes.size() / 2;
  int32_t head[3] = {0, 0, 0};
  if (bytes.size() >= kLlmcHeaderBytes) std::memcpy(head, bytes.data(), sizeof head);
  if (head[0] == kLlmcMagic) {
    if (head[1] != 1)
      throw DataError(path + ": llm.c token file version " + std::to_string(head[1]) +
                      " (its header, bytes 4-7); version 1 (uint16 ids) is read");
    begin = kLlmcHeaderBytes;
    const uint64_t stored = (bytes.size() - begin) / 2;
    if (head[2] < 0 || uint64_t(head[2]) != stored || (bytes.size() - begin) % 2 != 0)
      throw DataError(path + ": the llm.c header (bytes 8-11) says " + std::to_string(head[2]) +
                      " tokens, and the file holds " + std::to_string(bytes.size() - begin) +
                      " bytes after it (2 a token): the file is truncated or not a token file");
    count = size_t(stored);
  } else if (bytes.size() % 2 != 0) {
    throw DataError(path + ": " + std::to_string(bytes.size()) +
                    " bytes, an odd count: a token file holds uint16 ids (2 bytes each), raw or after "
                    "llm.c's 1,024-byte header");
  }
  std::vector<uint16_t> ids(count);
  if (count) std::memcpy(ids.data(), bytes.data() + begin, count * 2);  // little-endian hosts
  return ids;
}

Dataset token_windows(const std::vector<uint16_t>& tokens, const TokenWindowOptions& o,
                      const std::string& what, bool bytes) {
  const int64_t T = o.context, n = int64_t(tokens.size());
  const int64_t stride = o.stride > 0 ? o.stride : T;
  if (T < 1) throw InternalError("token_windows: context " + std::to_string(T));
  if (n < T + 1)
    throw DataError(what + ": " + std::to_string(n) + " tokens, fewer than one window of context " +
                    std::to_string(T) + " plus the token after it (" + std::to_string(T + 1) + ")");
  if (o.num_classes > 0)
    for (int64_t i = 0; i < n; ++i)
      if (tokens[size_t(i)] >= o.num_classes)
        throw DataError(what + ": token " + std::to_string(i) + " is id " +
                        std::to_string(tokens[size_t(i)]) + ", outside the vocabulary [0, " +
                        std::to_string(o.num_classes) + ") (data.num_classes)");
  int64_t windows = (n - T - 1) / stride + 1;
  if (o.limit > 0 && o.limit < windows) windows = o.limit;
  Dataset d;
  d.name = what;
  d.sample_shape = Shape({T});
  d.label_positions = T;
  d.num_classes = bytes ? 256 : o.num_classes;
  d.dtype = bytes ? SampleDtype::u8 : SampleDtype::f32;
  check_fits_in_memory(what, uint64_t(windows) * uint64_t(T) * (bytes ? 5 : 8), "its token windows");
  if (bytes)
    d.u8.resize(size_t(windows * T));
  else
    d.f32.resize(size_t(windows * T));
  d.labels.resize(size_t(windows * T));
  for (int64_t w = 0; w < windows; ++w) {
    const uint16_t* src = tokens.data() + w * stride;
    for (int64_t t = 0; t < T; ++t) {
      if (bytes)
        d.u8[size_t(w * T + t)] = uint8_t(src[t]);
      else
        d.f32[size_t(w * T + t)] = float(src[t]);
      d.labels[size_t(w * T + t)] = int32_t(src[t + 1]);
    }
  }
  return d;
}

Dataset read_text_windows(const std::string& path, const TokenWindowOptions& o) {
  const std::vector<uint8_t> bytes = read_file_bytes(path);
  const std::vector<uint16_t> ids(bytes.begin(), bytes.end());
  TokenWindowOptions bo = o;
  bo.num_classes = 0;  // every byte is below 256; a smaller data.num_classes is the model's error
  if (o.num_classes > 0 && o.num_classes < 256)
    for (size_t i = 0; i < bytes.size(); ++i)
      if (bytes[i] >= o.num_classes)
        throw DataError(path + ": byte " + std::to_string(i) + " is " + std::to_string(bytes[i]) +
                        ", and data.num_classes is " + std::to_string(o.num_classes) +
                        ": a text's tokens are its bytes, so num_classes is 256 (or leave it out)");
  return token_windows(ids, bo, path, true);
}

Dataset read_token_windows(const std::string& path, const TokenWindowOptions& o) {
  return token_windows(read_token_file(path), o, path, false);
}

}  // namespace trainer

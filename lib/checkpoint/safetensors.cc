#include "lib/checkpoint/safetensors.h"

#include <algorithm>
#include <cstring>
#include <nlohmann/json.hpp>

#include "datasets/file_bytes.h"
#include "lib/checkpoint/atomic_file.h"
#include "lib/core/error.h"
#include "lib/core/json_text.h"

namespace trainer {
namespace {

constexpr uint64_t kMaxHeader = 100'000'000;  // the safetensors package's own limit

bool host_is_little_endian() {
  const uint16_t one = 1;
  uint8_t first;
  std::memcpy(&first, &one, 1);
  return first == 1;
}

int64_t numel_of(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

std::string shape_text(const std::vector<int64_t>& s) {
  std::string t = "[";
  for (size_t i = 0; i < s.size(); ++i) t += (i ? ", " : "") + std::to_string(s[i]);
  return t + "]";
}

[[noreturn]] void bad(const std::string& path, const std::string& what) {
  throw DataError(path + ": not a valid safetensors file: " + what);
}

struct Header {
  nlohmann::json json;
  uint64_t header_len = 0;
  uint64_t file_size = 0;
};

// Reads the 8-byte length and the JSON header; `in` is then at the first data byte.
Header read_header(DataFile& in, const std::string& path) {
  Header h;
  h.file_size = in.file_size();
  if (h.file_size < 8)
    bad(path, "the file has " + std::to_string(h.file_size) + " bytes, fewer than the 8-byte header length");
  uint8_t len[8];
  if (in.read(len, 8) != 8) bad(path, "the file ends inside the 8-byte header length");
  for (int i = 7; i >= 0; --i) h.header_len = (h.header_len << 8) | len[i];
  if (h.header_len > kMaxHeader || h.header_len + 8 > h.file_size)
    bad(path, "header length " + std::to_string(h.header_len) + " does not fit the file size " +
                  std::to_string(h.file_size));
  std::string text(size_t(h.header_len), '\0');
  if (in.read(text.data(), text.size()) != text.size()) bad(path, "the file ends inside the header");
  try {
    h.json = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    bad(path, std::string("the header is not JSON: ") + e.what());
  }
  if (!h.json.is_object()) bad(path, "the header is not a JSON object");
  return h;
}

std::map<std::string, std::string> metadata_of(const nlohmann::json& header, const std::string& path) {
  std::map<std::string, std::string> m;
  auto it = header.find("__metadata__");
  if (it == header.end() || it->is_null()) return m;
  if (!it->is_object()) bad(path, "__metadata__ is not an object of strings");
  for (auto kv = it->begin(); kv != it->end(); ++kv) {
    if (!kv->is_string()) bad(path, "__metadata__." + kv.key() + " is not a string");
    m[kv.key()] = kv->get<std::string>();
  }
  return m;
}

}  // namespace

std::string safetensors_header(const std::vector<TensorRef>& tensors,
                               const std::map<std::string, std::string>& metadata) {
  nlohmann::ordered_json h = nlohmann::ordered_json::object();
  if (!metadata.empty()) {
    nlohmann::ordered_json m = nlohmann::ordered_json::object();
    for (const auto& kv : metadata) m[kv.first] = kv.second;
    h["__metadata__"] = m;
  }
  uint64_t offset = 0;
  for (const TensorRef& t : tensors) {
    if (t.name.empty() || t.name == "__metadata__" || h.contains(t.name))
      throw InternalError("safetensors: bad or duplicate tensor name '" + t.name + "'");
    const uint64_t bytes = uint64_t(numel_of(t.shape)) * sizeof(float);
    h[t.name] = {{"dtype", "F32"}, {"shape", t.shape}, {"data_offsets", {offset, offset + bytes}}};
    offset += bytes;
  }
  return json_text(h);
}

void write_safetensors(const std::string& path, const std::vector<TensorRef>& tensors,
                       const std::map<std::string, std::string>& metadata) {
  if (!host_is_little_endian()) throw InternalError("safetensors: big-endian hosts are not supported");
  std::string header = safetensors_header(tensors, metadata);
  header.append((8 - header.size() % 8) % 8, ' ');  // tensor data starts 8-byte aligned
  uint8_t len[8];
  uint64_t n = header.size();
  for (int i = 0; i < 8; ++i) len[i] = uint8_t(n >> (8 * i));
  std::vector<ByteSpan> pieces{{len, 8}, {header.data(), header.size()}};
  for (const TensorRef& t : tensors) pieces.push_back({t.data, size_t(numel_of(t.shape)) * sizeof(float)});
  write_file_atomic(path, pieces);
}

std::map<std::string, std::string> read_safetensors_metadata(const std::string& path) {
  DataFile in(path, DataFile::Gzip::never);
  return metadata_of(read_header(in, path).json, path);
}

SafetensorsFile read_safetensors(const std::string& path) {
  if (!host_is_little_endian()) throw InternalError("safetensors: big-endian hosts are not supported");
  DataFile in(path, DataFile::Gzip::never);
  Header h = read_header(in, path);
  SafetensorsFile f;
  f.metadata = metadata_of(h.json, path);
  const uint64_t data_len = h.file_size - 8 - h.header_len;
  struct Entry {
    std::string name;
    uint64_t begin, end;
  };
  std::vector<Entry> entries;
  for (auto it = h.json.begin(); it != h.json.end(); ++it) {
    if (it.key() == "__metadata__") continue;
    const std::string& name = it.key();
    const nlohmann::json& t = it.value();
    if (!t.is_object() || !t.contains("dtype") || !t.contains("shape") || !t.contains("data_offsets"))
      bad(path, "tensor '" + name + "' needs dtype, shape and data_offsets");
    if (!t["dtype"].is_string()) bad(path, "tensor '" + name + "': dtype is not a string");
    const std::string dtype = t["dtype"].get<std::string>();
    if (dtype != "F32")
      throw DataError(path + ": tensor '" + name + "' has dtype " + dtype +
                      "; only F32 (float32) tensors are supported: save with tensor.float()");
    StoredTensor st;
    if (!t["shape"].is_array()) bad(path, "tensor '" + name + "': shape is not a list");
    // Every size and the product stay below 2^61, so numel * 4 fits an int64.
    constexpr uint64_t kMaxElements = uint64_t(1) << 61;
    uint64_t numel = 1;
    for (const auto& d : t["shape"]) {
      if (!d.is_number_unsigned())
        bad(path, "tensor '" + name + "': shape has a non-integer or negative size");
      const uint64_t size = d.get<uint64_t>();
      if (size != 0 && (size > kMaxElements || numel > kMaxElements / size))
        bad(path, "tensor '" + name + "': shape " + t["shape"].dump() + " has more than 2^61 elements");
      numel *= size;
      st.shape.push_back(int64_t(size));
    }
    const auto& off = t["data_offsets"];
    if (!off.is_array() || off.size() != 2 || !off[0].is_number_unsigned() || !off[1].is_number_unsigned())
      bad(path, "tensor '" + name + "': data_offsets must be [begin, end]");
    Entry e{name, off[0].get<uint64_t>(), off[1].get<uint64_t>()};
    if (e.end < e.begin || e.end > data_len)
      bad(path, "tensor '" + name + "': data_offsets [" + std::to_string(e.begin) + ", " +
                    std::to_string(e.end) + "] fall outside the " + std::to_string(data_len) + " data bytes");
    if (e.end - e.begin != numel * sizeof(float))
      bad(path, "tensor '" + name + "': shape " + shape_text(st.shape) + " needs " +
                    std::to_string(numel * sizeof(float)) + " bytes but data_offsets span " +
                    std::to_string(e.end - e.begin));
    entries.push_back(e);
    f.tensors[name] = std::move(st);
  }
  std::sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) {
    return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
  });
  uint64_t at = 0;
  for (const Entry& e : entries) {
    if (e.begin != at)
      bad(path, "tensor '" + e.name + "' starts at byte " + std::to_string(e.begin) +
                    " of the data; expected " + std::to_string(at) + " (a hole or an overlap)");
    at = e.end;
  }
  if (at != data_len)
    bad(path,
        "the tensors cover " + std::to_string(at) + " of the " + std::to_string(data_len) + " data bytes");
  // The entries now tile the data in order, so it is read front to back.
  check_fits_in_memory(path, data_len, "its tensors");
  for (const Entry& e : entries) {
    StoredTensor& st = f.tensors[e.name];
    st.data.resize(size_t((e.end - e.begin) / sizeof(float)));
    if (in.read(st.data.data(), size_t(e.end - e.begin)) != e.end - e.begin)
      bad(path, "the file ends inside tensor '" + e.name + "' (was it cut while being read?)");
    f.names.push_back(e.name);
  }
  return f;
}

}  // namespace trainer

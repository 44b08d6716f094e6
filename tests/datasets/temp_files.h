// Test helpers for the dataset readers: a self-deleting unique temporary directory and writers
// for raw, text and gzip files. Header-only; everything lives in trainer::dataset_tests.
#pragma once

#include <unistd.h>
#include <zlib.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace trainer {
namespace dataset_tests {

class TempDir {
 public:
  TempDir() {
    static std::atomic<int> counter{0};
    const auto base = std::filesystem::temp_directory_path();
    for (;;) {
      const auto ticks = std::chrono::steady_clock::now().time_since_epoch().count();
      dir_ = base / ("trainer_datasets_" + std::to_string(::getpid()) + "_" + std::to_string(counter++) +
                     "_" + std::to_string(ticks));
      if (std::filesystem::create_directory(dir_)) return;
    }
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  std::string path(const std::string& name) const { return (dir_ / name).string(); }

 private:
  std::filesystem::path dir_;
};

inline void write_bytes(const std::string& path, const std::vector<uint8_t>& bytes) {
  std::ofstream f(path, std::ios::binary);
  f.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  if (!f) throw std::runtime_error("test helper: cannot write " + path);
}

inline void write_text(const std::string& path, const std::string& text) {
  write_bytes(path, std::vector<uint8_t>(text.begin(), text.end()));
}

inline std::vector<uint8_t> gzip_bytes(const std::vector<uint8_t>& bytes, const std::string& scratch_path) {
  gzFile gz = gzopen(scratch_path.c_str(), "wb");
  if (!gz || (!bytes.empty() && gzwrite(gz, bytes.data(), static_cast<unsigned>(bytes.size())) == 0) ||
      gzclose(gz) != Z_OK)
    throw std::runtime_error("test helper: gzip failed for " + scratch_path);
  std::ifstream f(scratch_path, std::ios::binary);
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
}

// Writes `bytes` gzip-compressed to `path` with zlib's gzopen/gzwrite.
inline void write_gz(const std::string& path, const std::vector<uint8_t>& bytes) { gzip_bytes(bytes, path); }

inline std::vector<uint8_t> to_bytes(const std::string& s) {
  return std::vector<uint8_t>(s.begin(), s.end());
}

}  // namespace dataset_tests
}  // namespace trainer

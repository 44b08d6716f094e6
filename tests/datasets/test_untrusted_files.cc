// What every reader of a user's file promises (datasets/file_bytes.h): only regular files are
// read, a header is checked before the data it describes is inflated, a gzip stream must hold
// exactly what the header says, reads stop when asked, and each error names the file.
#include <sys/stat.h>

#include <catch2/catch.hpp>
#include <cstring>
#include <functional>

#include "datasets/cifar10_reader.h"
#include "datasets/csv_reader.h"
#include "datasets/file_bytes.h"
#include "datasets/idx_reader.h"
#include "datasets/npy_reader.h"
#include "datasets/sequence_reader.h"
#include "lib/checkpoint/safetensors.h"
#include "lib/core/error.h"
#include "tests/datasets/temp_files.h"
#include "tests/test_util.h"

using namespace trainer;
using namespace trainer::dataset_tests;
using Catch::Contains;

namespace {

void put_be32(std::vector<uint8_t>* b, uint32_t v) {
  for (int s = 24; s >= 0; s -= 8) b->push_back(static_cast<uint8_t>(v >> s));
}

std::vector<uint8_t> idx_header(uint32_t magic, std::vector<uint32_t> dims) {
  std::vector<uint8_t> b;
  put_be32(&b, magic);
  for (uint32_t d : dims) put_be32(&b, d);
  return b;
}

// Every reader, each opening `path` as its first (or only) file.
std::vector<std::pair<std::string, std::function<void(const std::string&)>>> all_readers(
    const std::string& valid) {
  return {
      {"read_file_bytes", [](const std::string& p) { read_file_bytes(p); }},
      {"read_idx", [valid](const std::string& p) { read_idx(p, valid, 10); }},
      {"read_npy", [](const std::string& p) { read_npy(p); }},
      {"read_cifar10", [](const std::string& p) { read_cifar10({p}); }},
      {"read_csv",
       [](const std::string& p) {
         CsvOptions o;
         o.num_classes = 2;
         read_csv(p, o);
       }},
      {"read_sequences",
       [](const std::string& p) {
         read_sequences(p, SequenceOptions{0, true, true, 2});
       }},
      {"read_safetensors", [](const std::string& p) { read_safetensors(p); }},
      {"read_safetensors_metadata", [](const std::string& p) { read_safetensors_metadata(p); }},
  };
}

}  // namespace

TEST_CASE("every reader refuses a FIFO, a directory and a device at once, naming the file and what it is",
          "[datasets]") {
  TempDir dir;
  const std::string fifo = dir.path("fifo.idx"), folder = dir.path("x.safetensors");
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  REQUIRE(::mkdir(folder.c_str(), 0700) == 0);
  write_bytes(dir.path("labels.idx"), idx_header(0x801, {0}));
  for (const auto& [name, read] : all_readers(dir.path("labels.idx"))) {
    INFO(name);
    // Without O_NONBLOCK the FIFO's open would wait for a writer forever.
    REQUIRE_THROWS_AS(read(fifo), DataError);
    REQUIRE_THROWS_WITH(read(fifo), Contains("'" + fifo + "' is a FIFO (named pipe), not a regular file"));
    REQUIRE_THROWS_WITH(read(folder), Contains("'" + folder + "' is a directory, not a regular file"));
    REQUIRE_THROWS_WITH(read("/dev/zero"), Contains("'/dev/zero' is a character device, not a regular file"));
  }
}

TEST_CASE("a read stops with InterruptedError naming the file once the stop hook says so", "[datasets]") {
  TempDir dir;
  write_text(dir.path("rows.csv"), "1,0\n2,1\n");
  set_read_stop_check([] { return true; });
  CsvOptions o;
  o.num_classes = 2;
  const auto read = [&] { read_csv(dir.path("rows.csv"), o); };
  REQUIRE_THROWS_AS(read(), InterruptedError);
  REQUIRE_THROWS_WITH(read(), Contains("interrupted while reading '" + dir.path("rows.csv") + "'"));
  set_read_stop_check(nullptr);
  REQUIRE_NOTHROW(read());
}

TEST_CASE("a gzip IDX header claiming more than the file can inflate to is rejected before inflating",
          "[datasets]") {
  TempDir dir;
  std::vector<uint8_t> img = idx_header(0x803, {3000000, 28, 28});  // 2.35 GB of pixels
  img.resize(img.size() + 64);
  write_gz(dir.path("images.gz"), img);
  write_gz(dir.path("labels.gz"), idx_header(0x801, {3000000}));
  REQUIRE_THROWS_AS(read_idx(dir.path("images.gz"), dir.path("labels.gz"), 10), DataError);
  REQUIRE_THROWS_WITH(
      read_idx(dir.path("images.gz"), dir.path("labels.gz"), 10),
      Contains("images.gz' is truncated: header says 3000000 x 28 x 28 images = 2352000016 bytes") &&
          Contains("gzip bytes can hold"));
}

TEST_CASE("a gzip IDX file must inflate to exactly the size its header gives, no more and no less",
          "[datasets]") {
  TempDir dir;
  std::vector<uint8_t> img = idx_header(0x803, {1, 2, 2});
  img.insert(img.end(), {1, 2, 3, 4});
  write_gz(dir.path("labels.gz"), [] {
    auto l = idx_header(0x801, {1});
    l.push_back(0);
    return l;
  }());
  SECTION("a payload far longer than the header says (a gzip bomb behind a small header)") {
    std::vector<uint8_t> bomb = img;
    bomb.resize(bomb.size() + (16 << 20));
    write_gz(dir.path("images.gz"), bomb);
    REQUIRE_THROWS_WITH(read_idx(dir.path("images.gz"), dir.path("labels.gz"), 10),
                        Contains("images.gz' has trailing bytes: header says 1 x 2 x 2 images = 20 bytes") &&
                            Contains("decompressed data is longer"));
    DataFile f(dir.path("images.gz"));  // the reader pulls only what it asks for
    std::vector<uint8_t> first(20);
    REQUIRE(f.read(first.data(), first.size()) == 20);
    REQUIRE_FALSE(f.at_end());
    REQUIRE(f.position() == 20);
  }
  SECTION("a payload shorter than the header says") {
    img.pop_back();
    write_gz(dir.path("images.gz"), img);
    REQUIRE_THROWS_WITH(read_idx(dir.path("images.gz"), dir.path("labels.gz"), 10),
                        Contains("images.gz' is truncated: header says 1 x 2 x 2 images = 20 bytes") &&
                            Contains("decompressed data has 19"));
  }
}

TEST_CASE("gzip NPY and CIFAR-10 files are checked against their headers and records while inflating",
          "[datasets]") {
  TempDir dir;
  std::vector<uint8_t> npy;
  write_npy_f32(dir.path("x.npy"), {2, 3}, std::vector<float>(6, 1.f).data());
  npy = to_bytes(test::slurp(dir.path("x.npy")));
  std::vector<uint8_t> cut(npy.begin(), npy.end() - 4), longer = npy;
  longer.push_back(0);
  write_gz(dir.path("cut.npy.gz"), cut);
  write_gz(dir.path("long.npy.gz"), longer);
  REQUIRE_THROWS_WITH(read_npy(dir.path("cut.npy.gz")),
                      Contains("cut.npy.gz' is truncated") && Contains("the decompressed data has"));
  REQUIRE_THROWS_WITH(read_npy(dir.path("long.npy.gz")),
                      Contains("long.npy.gz' has trailing bytes") && Contains("decompressed data is longer"));
  write_gz(dir.path("batch.bin.gz"), std::vector<uint8_t>(3073 + 100, 1));
  REQUIRE_THROWS_WITH(
      read_cifar10({dir.path("batch.bin.gz")}),
      Contains("batch.bin.gz' has 3173 bytes decompressed, not a multiple of the 3073-byte record"));
}

TEST_CASE("sequences padded to more memory than the machine has are refused before allocating",
          "[datasets]") {
  TempDir dir;
  write_text(dir.path("seq.txt"), "0 1 2\n1 3\n");
  REQUIRE_THROWS_AS(read_sequences(dir.path("seq.txt"), SequenceOptions{int64_t(1) << 62, true, true, 2}),
                    DataError);
  REQUIRE_THROWS_WITH(read_sequences(dir.path("seq.txt"), SequenceOptions{int64_t(1) << 62, true, true, 2}),
                      Contains("more data than any machine can hold"));
  REQUIRE_THROWS_AS(read_sequences(dir.path("seq.txt"), SequenceOptions{int64_t(1) << 50, true, true, 2}),
                    OutOfMemoryError);
  REQUIRE_THROWS_WITH(read_sequences(dir.path("seq.txt"), SequenceOptions{int64_t(1) << 50, true, true, 2}),
                      Contains("seq.txt") && Contains("more than this machine's"));
}

TEST_CASE("safetensors: a short length field and absurd shapes are data errors, not undefined behaviour",
          "[datasets]") {
  TempDir dir;
  write_bytes(dir.path("short.safetensors"), {16, 0, 0});
  REQUIRE_THROWS_WITH(read_safetensors(dir.path("short.safetensors")),
                      Contains("fewer than the 8-byte header"));
  const std::string header = R"({"w":{"dtype":"F32","shape":[4611686018427387904,4],"data_offsets":[0,0]}})";
  std::vector<uint8_t> b(8);
  b[0] = uint8_t(header.size());
  b.insert(b.end(), header.begin(), header.end());
  write_bytes(dir.path("huge.safetensors"), b);
  REQUIRE_THROWS_AS(read_safetensors(dir.path("huge.safetensors")), DataError);
  REQUIRE_THROWS_WITH(read_safetensors(dir.path("huge.safetensors")), Contains("more than 2^61 elements"));
}

TEST_CASE("trainer fit exits 4 naming a data file that is a FIFO or a device, without blocking",
          "[datasets][cli]") {
  TempDir dir;
  const std::string fifo = dir.path("train.csv");
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  for (const std::string& data : {fifo, std::string("/dev/zero")}) {
    const std::string config = dir.path("config.yaml");
    write_text(config,
               "model: {input_shape: [1], layers: [{type: dense, units: 2}]}\n"
               "loss: cross_entropy\noptimizer: {type: sgd, lr: 0.1}\n"
               "data: {train: {format: csv, path: '" +
                   data + "'}, num_classes: 2}\n");
    const test::CommandResult r = test::run_trainer("fit " + config + " --no-out --epochs 1");
    INFO(r.err);
    REQUIRE(r.exit_code == 4);
    REQUIRE_THAT(r.err, Contains("'" + data + "' is a"));
    REQUIRE_THAT(r.err, Contains("not a regular file"));
  }
}

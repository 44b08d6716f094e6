// Streamed image folders (cache: none, and auto over cache_mb): the batch loader decodes each
// batch's images as it fills the batch, and gives the bytes the in-memory set gives, in the same
// seeded order, with crops, splits and data-parallel shards; the cache keeps the first files once
// read; a bad file fails the batch that draws it, naming the file.
#include <catch2/catch.hpp>
#include <filesystem>

#include "datasets/batch_loader.h"
#include "datasets/image_folder.h"
#include "datasets/image_loader.h"
#include "datasets/sample_stream.h"
#include "datasets/split.h"
#include "lib/core/error.h"
#include "lib/data/data_sources.h"
#include "tests/datasets/image_writers.h"
#include "tests/datasets/temp_files.h"

using namespace trainer;
using namespace trainer::dataset_tests;
using Catch::Contains;
namespace fs = std::filesystem;

namespace {

// An h x w gray PNG whose pixel (y, x) is (seed + 3y + 5x) mod 256: every image differs.
void pattern_png(const std::string& path, int w, int h, int seed) {
  std::vector<uint8_t> px(size_t(w) * size_t(h));
  for (int y = 0; y < h; ++y)
    for (int x = 0; x < w; ++x) px[size_t(y * w + x)] = uint8_t((seed + 3 * y + 5 * x) & 255);
  write_bytes(path, encode_png8(w, h, 1, px));
}

// root/{a,b,c}/NN.png: `per_class` images per class of h x w, distinct.
void make_folder(const TempDir& dir, int per_class, int h, int w) {
  int seed = 0;
  for (const char* c : {"a", "b", "c"}) {
    fs::create_directories(dir.path("root/") + c);
    for (int i = 0; i < per_class; ++i)
      pattern_png(dir.path("root/") + c + "/" + std::to_string(10 + i) + ".png", w, h, 17 * seed++);
  }
}

ImageLoadOptions gray(int64_t h, int64_t w, ImageCache cache) {
  ImageLoadOptions o;
  o.channels = 1;
  o.height = h;
  o.width = w;
  o.cache = cache;
  o.key = "data.train";
  return o;
}

// Every batch of `epochs` epochs, x and labels concatenated.
struct Pass {
  std::vector<float> x;
  std::vector<int32_t> y;
  std::vector<int64_t> rows;
};
Pass drain(const Dataset& d, int64_t batch, int threads, int epochs, RandomResizedCrop crop = {},
           int rank = 0, int ranks = 1) {
  BatchLoader loader(d, batch, true, false, Normalization{1.f / 255.f, {0.5f}, {0.25f}}, 42, rank, ranks,
                     threads, crop);
  Pass p;
  for (int e = 0; e < epochs; ++e) {
    loader.start_epoch(e);
    const float* x;
    const int32_t* y;
    int64_t n;
    const int64_t numel = crop.active() ? crop.out_h * crop.out_w : d.sample_numel();
    while (loader.next(&x, &y, &n)) {
      p.x.insert(p.x.end(), x, x + n * numel);
      p.y.insert(p.y.end(), y, y + n);
      p.rows.push_back(n);
    }
  }
  return p;
}

}  // namespace

TEST_CASE("a streamed image folder gives the in-memory set's batches, in the same seeded order",
          "[datasets][images][stream]") {
  TempDir dir;
  make_folder(dir, 7, 6, 5);
  const ImageListing l = list_image_folder(dir.path("root"), {});
  const Dataset memory = load_images(l, gray(6, 5, ImageCache::memory));
  const Dataset streamed = load_images(l, gray(6, 5, ImageCache::none));
  REQUIRE(memory.stream == nullptr);
  REQUIRE(memory.u8.size() == 21 * 30);
  REQUIRE(streamed.stream != nullptr);
  REQUIRE(streamed.u8.empty());  // nothing decoded up front
  REQUIRE(streamed.size() == 21);
  REQUIRE(streamed.labels == memory.labels);
  REQUIRE(streamed.class_names == memory.class_names);

  std::vector<uint8_t> one(30);
  streamed.stream->read(8, one.data());
  REQUIRE(std::equal(one.begin(), one.end(), memory.u8.begin() + 8 * 30));

  const Pass want = drain(memory, 4, 1, 2);
  REQUIRE(want.x.size() == 2 * 21 * 30);
  for (int threads : {1, 3}) {
    const Pass got = drain(streamed, 4, threads, 2);
    REQUIRE(got.rows == want.rows);
    REQUIRE(got.y == want.y);
    REQUIRE(got.x == want.x);
  }
  // RandomResizedCrop's draws and data-parallel shards do not depend on where the bytes live.
  RandomResizedCrop crop;
  crop.out_h = crop.out_w = 4;
  REQUIRE(drain(streamed, 5, 2, 2, crop).x == drain(memory, 5, 1, 2, crop).x);
  const Pass shard_memory = drain(memory, 6, 1, 1, {}, 1, 2),
             shard_stream = drain(streamed, 6, 2, 1, {}, 1, 2);
  REQUIRE(shard_stream.x == shard_memory.x);
  REQUIRE(shard_stream.y == shard_memory.y);
}

TEST_CASE("a streamed set splits into streamed parts holding the same images", "[datasets][images][stream]") {
  TempDir dir;
  make_folder(dir, 6, 3, 3);
  const ImageListing l = list_image_folder(dir.path("root"), {});
  const Dataset memory = load_images(l, gray(3, 3, ImageCache::memory));
  const Dataset streamed = load_images(l, gray(3, 3, ImageCache::none));
  SplitOptions so;
  so.fraction = 0.34;
  so.seed = 5;
  const SplitResult m = split_validation(memory, so), s = split_validation(streamed, so);
  REQUIRE(s.train.stream != nullptr);
  REQUIRE(s.validation.stream != nullptr);
  REQUIRE(s.train.u8.empty());
  REQUIRE(s.validation.size() == m.validation.size());
  REQUIRE(s.validation.labels == m.validation.labels);
  REQUIRE(drain(s.train, 4, 2, 1).x == drain(m.train, 4, 1, 1).x);
  REQUIRE(drain(s.validation, 4, 2, 1).x == drain(m.validation, 4, 1, 1).x);
}

TEST_CASE("cache: auto streams a set over cache_mb and keeps the first files decoded once read",
          "[datasets][images][stream]") {
  TempDir dir;
  make_folder(dir, 2, 512, 512);  // 6 images of 256 KiB decoded: 1.5 MiB
  const ImageListing l = list_image_folder(dir.path("root"), {});
  ImageLoadOptions o = gray(512, 512, ImageCache::automatic);
  o.cache_mb = 1;
  REQUIRE(cached_image_count(o, 6) == 4);
  const Dataset d = load_images(l, o);
  REQUIRE(d.stream != nullptr);
  const Pass first = drain(d, 3, 2, 1);
  // The first four files in listing order are cached: deleting them changes nothing.
  for (int i = 0; i < 4; ++i) fs::remove(l.files[size_t(i)].path);
  REQUIRE(drain(d, 3, 2, 1).x == first.x);
  // The fifth is read from disk every epoch.
  fs::remove(l.files[4].path);
  BatchLoader loader(d, 3, true, false, Normalization{}, 42, 0, 1, 2);
  loader.start_epoch(0);
  const float* x;
  const int32_t* y;
  int64_t n;
  REQUIRE_THROWS_WITH(
      [&] {
        while (loader.next(&x, &y, &n)) {
        }
      }(),
      Contains("cannot open '" + l.files[4].path + "'"));

  // cache: memory refuses the set instead; auto holds a set that fits.
  o.cache = ImageCache::memory;
  REQUIRE_THROWS_WITH(
      load_images(l, o),  // before any file is read
      Contains("more than the budget data.train.cache_mb: 1 MiB; raise it if this machine has "
               "the memory, or set data.train.cache: auto to stream the images from disk"));
  o.cache = ImageCache::automatic;
  o.cache_mb = 2;
  fs::remove_all(dir.path("root"));
  make_folder(dir, 2, 512, 512);
  REQUIRE(load_images(list_image_folder(dir.path("root"), {}), o).stream == nullptr);
}

TEST_CASE("a streamed file that does not decode fails the batch that draws it, naming the file",
          "[datasets][images][stream]") {
  TempDir dir;
  make_folder(dir, 4, 4, 4);
  const ImageListing l = list_image_folder(dir.path("root"), {});
  write_text(l.files[5].path, "");  // an image name, no bytes
  const Dataset d = load_images(l, gray(4, 4, ImageCache::none));
  BatchLoader loader(d, 4, false, false, Normalization{}, 1, 0, 1, 3);
  loader.start_epoch(0);
  const float* x;
  const int32_t* y;
  int64_t n;
  REQUIRE(loader.next(&x, &y, &n));  // rows 0-3
  REQUIRE_THROWS_AS(loader.next(&x, &y, &n), DataError);
  loader.start_epoch(1);
  REQUIRE(loader.next(&x, &y, &n));
  REQUIRE_THROWS_WITH(loader.next(&x, &y, &n),
                      "data.train: '" + l.files[5].path + "' is empty (0 bytes), not an image");
}

TEST_CASE("data.train.cache is read from the config, and an unknown value names the allowed ones",
          "[datasets][images][stream]") {
  TempDir dir;
  make_folder(dir, 2, 4, 4);
  SourceContext c;
  c.num_classes = 3;
  c.input_shape = Shape{1, 4, 4};
  const std::string path = "path: '" + dir.path("root") + "'";
  REQUIRE(
      load_source(YAML::Load("{format: image_folder, " + path + ", cache: none}"), "data.train", "t.yaml", c)
          .stream != nullptr);
  REQUIRE(load_source(YAML::Load("{format: image_folder, " + path + "}"), "data.train", "t.yaml", c).stream ==
          nullptr);
  REQUIRE_THROWS_WITH(
      load_source(YAML::Load("{format: image_folder, " + path + ", cache: disk}"), "data.train", "t.yaml", c),
      Contains("data.train.cache") && Contains("auto, memory, none"));
}

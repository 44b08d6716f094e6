// image_folder and image_list end to end: listing, class names, decoding in threads into the
// (C, H, W) uint8 Dataset, sizing, the memory budget, and the message for each bad input.
#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>

#include "datasets/image_folder.h"
#include "datasets/image_loader.h"
#include "lib/core/error.h"
#include "lib/data/data_sources.h"
#include "tests/datasets/image_writers.h"
#include "tests/datasets/temp_files.h"
#include "tests/warning_sink.h"

using namespace trainer;

static SourceContext ctx(int num_classes, const Shape& input) {
  SourceContext c;
  c.num_classes = num_classes;
  c.input_shape = input;
  return c;
}
using namespace trainer::dataset_tests;
using Catch::Contains;
namespace fs = std::filesystem;

namespace {

// A w x h gray PNG filled with `value`.
void flat_png(const std::string& path, int w, int h, uint8_t value) {
  write_bytes(path, encode_png8(w, h, 1, std::vector<uint8_t>(size_t(w * h), value)));
}

ImageLoadOptions gray(int64_t h, int64_t w) {
  ImageLoadOptions o;
  o.channels = 1;
  o.height = h;
  o.width = w;
  return o;
}

// root/{b: 2 images, a: 1 image, c: 1 JPEG named .jpeg}, 4x4 gray, plus files to skip.
void make_tree(const TempDir& dir) {
  for (const char* c : {"a", "b", "c"}) fs::create_directories(dir.path("root/") + c);
  flat_png(dir.path("root/b/2.png"), 4, 4, 20);
  flat_png(dir.path("root/b/1.PNG"), 4, 4, 10);
  flat_png(dir.path("root/a/x.png"), 4, 4, 30);
  JpegSpec j;
  j.width = j.height = 4;
  j.color_space = JCS_GRAYSCALE;
  j.samples.assign(16, 200);
  write_bytes(dir.path("root/c/photo.jpeg"), encode_jpeg(j));
  write_text(dir.path("root/a/notes.txt"), "not an image");
  write_text(dir.path("root/README"), "outside the classes");
}

}  // namespace

TEST_CASE("image_folder lists classes and files sorted, decodes them into (C, H, W) and skips non-images",
          "[datasets][images]") {
  TempDir dir;
  make_tree(dir);
  ListingOptions lo;
  const ImageListing l = list_image_folder(dir.path("root"), lo);
  REQUIRE(l.class_names == std::vector<std::string>{"a", "b", "c"});
  REQUIRE(l.num_classes == 3);
  REQUIRE(l.files.size() == 4);
  REQUIRE(l.files[0].path == dir.path("root/a/x.png"));
  REQUIRE(l.files[1].path == dir.path("root/b/1.PNG"));  // sorted bytewise: "1.PNG" < "2.png"
  REQUIRE(l.skipped.size() == 2);
  REQUIRE_THAT(l.skipped[0], Contains("README (outside the class subfolders)"));
  REQUIRE_THAT(l.skipped[1], Contains("notes.txt (not a PNG or JPEG file)"));

  for (int threads : {1, 3}) {
    ImageLoadOptions o = gray(4, 4);
    o.threads = threads;
    const Dataset d = load_images(l, o);
    REQUIRE(d.sample_shape == Shape{1, 4, 4});
    REQUIRE(d.labels == std::vector<int32_t>{0, 1, 1, 2});
    REQUIRE(d.class_names == l.class_names);
    REQUIRE(d.num_classes == 3);
    REQUIRE(d.u8.size() == 4 * 16);
    REQUIRE(d.u8[0] == 30);
    REQUIRE(d.u8[16] == 10);
    REQUIRE(d.u8[32] == 20);
    REQUIRE(std::abs(int(d.u8[48]) - 200) <= 1);
  }
}

TEST_CASE("image_folder writes RGB as (3, H, W) planes, resizes and center-crops", "[datasets][images]") {
  TempDir dir;
  fs::create_directories(dir.path("r/k"));
  // 2 x 3 RGB: pixel (y, x) = (10 x + y, 100, 200)
  std::vector<uint8_t> px;
  for (int y = 0; y < 2; ++y)
    for (int x = 0; x < 3; ++x) px.insert(px.end(), {uint8_t(10 * x + y), 100, 200});
  write_bytes(dir.path("r/k/a.png"), encode_png8(3, 2, 3, px));
  const ImageListing l = list_image_folder(dir.path("r"), {});
  ImageLoadOptions o;
  o.channels = 3;
  o.height = 2;
  o.width = 3;
  const Dataset d = load_images(l, o);
  REQUIRE(d.u8 == std::vector<uint8_t>{0, 10, 20, 1, 11, 21, 100, 100, 100, 100, 100, 100, 200, 200, 200, 200,
                                       200, 200});
  // resize [4, 6] then center_crop [2, 2]: the same numbers as resizing and cropping by hand.
  o.height = o.width = 2;
  o.sizing.resize_h = 4;
  o.sizing.resize_w = 6;
  o.sizing.crop_h = o.sizing.crop_w = 2;
  const Dataset c = load_images(l, o);
  REQUIRE(c.u8.size() == 12);
  REQUIRE(c.u8[4] == 100);   // green plane constant
  REQUIRE(c.u8[11] == 200);  // blue plane constant
  // {shorter: 4} of 2 x 3 -> 4 x 6, crop 4 x 4.
  o.height = o.width = 4;
  o.sizing = ImageSizing{};
  o.sizing.shorter = 4;
  o.sizing.crop_h = o.sizing.crop_w = 4;
  REQUIRE(load_images(l, o).u8.size() == 48);
  // The pixel limit also bounds what {shorter: S} makes of a long thin image (4 x 6 here).
  o.max_pixels = 23;
  REQUIRE_THROWS_WITH(load_images(l, o),
                      Contains("resize {shorter: 4} would make it 4x6, more pixels than the "
                               "limit of 23 (max_pixels)"));
  o.max_pixels = default_max_image_pixels;
  // {shorter: 4} alone keeps the aspect: 4 x 6 is not the model's 4 x 4, and the message says what to add.
  o.sizing.crop_h = o.sizing.crop_w = 0;
  REQUIRE_THROWS_WITH(load_images(l, o),
                      Contains("is 2x3 (height x width) and 4x6 after data.resize/center_crop") &&
                          Contains("add center_crop: [4, 4]"));
}

TEST_CASE("image_folder maps subfolders through data.class_names and checks data.num_classes",
          "[datasets][images]") {
  TempDir dir;
  make_tree(dir);
  ListingOptions lo;
  lo.class_names = {"c", "zebra", "b", "a"};
  const ImageListing l = list_image_folder(dir.path("root"), lo);
  REQUIRE(l.num_classes == 4);
  REQUIRE(l.class_names == lo.class_names);
  std::vector<int32_t> labels;
  for (const ImageFile& f : l.files) labels.push_back(f.label);
  REQUIRE(labels == std::vector<int32_t>{3, 2, 2, 0});

  lo.class_names = {"a", "b"};
  REQUIRE_THROWS_WITH(list_image_folder(dir.path("root"), lo),
                      "data: class subfolder '" + dir.path("root/c") +
                          "' is not one of data.class_names (a, b); add it there, or remove data.class_names "
                          "to use the names found");
  ListingOptions n;
  n.num_classes = 4;
  n.key = "data.validation";
  REQUIRE_THROWS_WITH(list_image_folder(dir.path("root"), n),
                      Contains("data.validation: '" + dir.path("root") +
                               "' has 3 class subfolders (a, b, c) but data.num_classes is 4"));
}

TEST_CASE("image_folder names each bad input: missing, a file, no subfolders, an empty class, a link loop",
          "[datasets][images]") {
  TempDir dir;
  ListingOptions lo;
  lo.key = "data.train";
  REQUIRE_THROWS_WITH(list_image_folder(dir.path("nowhere"), lo),
                      "data.train: cannot read '" + dir.path("nowhere") + "': No such file or directory");
  write_text(dir.path("file.txt"), "x");
  REQUIRE_THROWS_WITH(list_image_folder(dir.path("file.txt"), lo),
                      Contains("is not a folder; format image_folder"));
  fs::create_directories(dir.path("flat"));
  flat_png(dir.path("flat/1.png"), 2, 2, 0);
  REQUIRE_THROWS_WITH(list_image_folder(dir.path("flat"), lo), Contains("has no subfolders"));
  fs::create_directories(dir.path("r/full"));
  fs::create_directories(dir.path("r/empty"));
  flat_png(dir.path("r/full/1.png"), 2, 2, 0);
  write_text(dir.path("r/empty/readme.md"), "x");
  REQUIRE_THROWS_WITH(list_image_folder(dir.path("r"), lo),
                      "data.train: class folder '" + dir.path("r/empty") +
                          "' holds no PNG or JPEG images; remove it or add its images");
  // A symlink loop: the entry cannot be resolved, and nothing recurses.
  fs::create_directories(dir.path("loop/cls"));
  flat_png(dir.path("loop/cls/1.png"), 2, 2, 0);
  fs::create_symlink(dir.path("loop/cls/self.png"), dir.path("loop/cls/self.png"));
  REQUIRE_THROWS_WITH(list_image_folder(dir.path("loop"), lo),
                      Contains("cannot read '" + dir.path("loop/cls/self.png") +
                               "': Too many levels of symbolic links (a symbolic link)"));
  // A link back to the root inside a class folder is a folder there: skipped, never entered.
  fs::remove(dir.path("loop/cls/self.png"));
  fs::create_directory_symlink(dir.path("loop"), dir.path("loop/cls/up"));
  const ImageListing l = list_image_folder(dir.path("loop"), lo);
  REQUIRE(l.files.size() == 1);
  REQUIRE_THAT(l.skipped.at(0), Contains("up (a folder inside a class folder: only one level is read)"));
}

TEST_CASE("load_images names the file of a wrong size, a corrupt image, and refuses a set over the budget",
          "[datasets][images]") {
  TempDir dir;
  fs::create_directories(dir.path("r/a"));
  flat_png(dir.path("r/a/1.png"), 4, 4, 0);
  flat_png(dir.path("r/a/2.png"), 5, 4, 0);
  write_text(dir.path("r/a/3.png"), "");
  const ImageListing l = list_image_folder(dir.path("r"), {});
  ImageLoadOptions o = gray(4, 4);
  o.key = "data.train";
  REQUIRE_THROWS_WITH(load_images(l, o),
                      "'" + dir.path("r/a/2.png") +
                          "' is 4x5 (height x width) but model.input_shape is [1, 4, 4]: every "
                          "image must have that size, or set data.train.resize: [4, 4]");
  ImageListing first_and_empty = l;
  first_and_empty.files.erase(first_and_empty.files.begin() + 1);
  REQUIRE_THROWS_WITH(load_images(first_and_empty, o),
                      "'" + dir.path("r/a/3.png") + "' is empty (0 bytes), not an image");
  o.cache = ImageCache::memory;
  o.cache_mb = 1;
  o.height = o.width = 1024;
  REQUIRE_THROWS_WITH(load_images(l, o),
                      "data.train: 3 images of 1x1024x1024 take 3145728 bytes (3 MiB) decoded, "
                      "more than the budget data.train.cache_mb: 1 MiB; raise it if this machine "
                      "has the memory, or set data.train.cache: auto to stream the images from disk");
}

TEST_CASE("image_list reads file,label rows relative to the list, by class name or index",
          "[datasets][images]") {
  TempDir dir;
  fs::create_directories(dir.path("imgs"));
  flat_png(dir.path("imgs/1.png"), 2, 2, 1);
  flat_png(dir.path("imgs/2.png"), 2, 2, 2);
  write_text(dir.path("names.csv"), "file,label\nimgs/1.png,dog\nimgs/2.png,cat\n");
  ImageListing l = list_image_list(dir.path("names.csv"), {});
  REQUIRE(l.class_names == std::vector<std::string>{"cat", "dog"});
  REQUIRE(l.files.at(0).path == dir.path("imgs/1.png"));
  REQUIRE(l.files[0].label == 1);
  REQUIRE(l.files[1].label == 0);
  const Dataset d = load_images(l, gray(2, 2));
  REQUIRE(d.u8 == std::vector<uint8_t>{1, 1, 1, 1, 2, 2, 2, 2});

  write_text(dir.path("ids.csv"), "imgs/2.png,4\n" + dir.path("imgs/1.png") + ",0\n");
  l = list_image_list(dir.path("ids.csv"), {});
  REQUIRE(l.class_names.empty());
  REQUIRE(l.num_classes == 5);
  REQUIRE(l.files[0].label == 4);
  REQUIRE(l.files[1].path == dir.path("imgs/1.png"));  // an absolute path stays as written

  ListingOptions named;
  named.class_names = {"cat", "dog"};
  write_text(dir.path("bad.csv"), "file,label\nimgs/1.png,dog\nimgs/2.png,cow\n");
  REQUIRE_THROWS_WITH(
      list_image_list(dir.path("bad.csv"), named),
      Contains(dir.path("bad.csv") + ":3: label 'cow' is not one of data.class_names (cat, dog)"));
  write_text(dir.path("missing.csv"), "file,label\nimgs/none.png,0\n");
  REQUIRE_THROWS_WITH(load_images(list_image_list(dir.path("missing.csv"), {}), gray(2, 2)),
                      Contains("cannot open '" + dir.path("imgs/none.png") + "'"));
  write_text(dir.path("short.csv"), "file,label\nimgs/1.png\n");
  REQUIRE_THROWS_WITH(list_image_list(dir.path("short.csv"), {}),
                      dir.path("short.csv") + ":2: expected the columns file,label; this row has 1 field");
}

TEST_CASE("load_source reads format image_folder with its keys and hands class names on",
          "[datasets][images]") {
  TempDir dir;
  make_tree(dir);
  YAML::Node section = YAML::Load("{format: image_folder, path: '" + dir.path("root") +
                                  "', resize: [8, 8], center_crop: 6, cache_mb: 64}");
  Dataset d;
  {
    test::ExpectWarning skipped("skipped 2 entries");
    d = load_source(section, "data.train", "t.yaml", ctx(3, Shape{1, 6, 6}));
  }
  REQUIRE(d.size() == 4);
  REQUIRE(d.sample_shape == Shape{1, 6, 6});
  REQUIRE(d.class_names == std::vector<std::string>{"a", "b", "c"});
  REQUIRE(d.u8[0] == 30);  // a constant image stays constant through resize and crop
  YAML::Node shorter = YAML::Load("{format: image_folder, path: x, resize: {shorter: 0}}");
  REQUIRE_THROWS_WITH(load_source(shorter, "data.train", "t.yaml", ctx(3, Shape{1, 6, 6})),
                      Contains("data.train.resize.shorter"));
  REQUIRE_THROWS_WITH(load_source(section, "data.train", "t.yaml", ctx(3, Shape{6, 6, 1})),
                      Contains("needs model.input_shape [1, H, W] (gray) or [3, H, W] (RGB)") &&
                          Contains("(channels come first: [1, 6, 6])"));
}

// The fuzzer's out-of-memory input (CI, fuzz_png): a 1-pixel-wide image thousands of rows tall,
// resized to a few columns, first grows to (rows, new width) before the rows shrink. The pixel
// limit bounds that intermediate image as it bounds the decoded one.
TEST_CASE("prepare_image refuses a resize whose intermediate image exceeds the pixel limit",
          "[datasets][images]") {
  const std::vector<uint8_t> tall = encode_png8(1, 4000, 1, std::vector<uint8_t>(4000, 7));
  ImageLoadOptions o = gray(8, 8);
  o.sizing.resize_h = o.sizing.resize_w = 8;
  o.max_pixels = 16000;
  std::vector<uint8_t> out(64);
  REQUIRE_THROWS_WITH(prepare_image(tall.data(), tall.size(), "tall.png", o, out.data()),
                      "'tall.png' is 4000x1 (height x width): resizing it to 8x8 passes through 4000x8, "
                      "more pixels than the limit of 16000 (max_pixels)");
  o.max_pixels = 32000;  // exactly enough
  prepare_image(tall.data(), tall.size(), "tall.png", o, out.data());
  REQUIRE(out == std::vector<uint8_t>(64, 7));
}

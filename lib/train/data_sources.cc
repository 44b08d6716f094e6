#include "lib/train/data_sources.h"

#include <spdlog/spdlog.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>

#include "datasets/cifar10_reader.h"
#include "datasets/csv_reader.h"
#include "datasets/disc_generator.h"
#include "datasets/idx_reader.h"
#include "datasets/image_loader.h"
#include "datasets/npy_reader.h"
#include "datasets/random_generator.h"
#include "datasets/sequence_reader.h"
#include "lib/config/key_spec.h"
#include "lib/core/error.h"

namespace trainer {
namespace {

// A key naming a file that the format needs.
KeySpec file_key(const std::string& format, const std::string& key, const std::string& example,
                 const std::string& doc) {
  return string_key(key, "", doc)
      .require("is required for format " + format + ", e.g. " + key + ": " + example);
}

KeySpec limit_key() {
  return integer_key("limit", 0, 0, int64_t(1) << 40, "keep the first N samples (0: all)");
}

KeySpecs generated_keys(const std::string& what) {
  return {integer_key("samples", 1000, 1, int64_t(1) << 32, what),
          integer_key("seed", 0, 0, int64_t(1) << 62, "seed of the generator")};
}

// image_folder and image_list: how images are sized to model.input_shape and the memory budget.
KeySpecs image_keys(const std::string& format, const std::string& example, const std::string& doc) {
  return {
      file_key(format, "path", example, doc),
      image_size_key("resize", 1, 1 << 16,
                     "[H, W]: antialiased bilinear resize (torchvision Resize); {shorter: S}: the shorter "
                     "side to S, aspect kept"),
      size_pair_key("center_crop", 0, 1, 1 << 16, "[H, W]: the centred window, after resize"),
      integer_key("cache_mb", 8192, 1, int64_t(1) << 30,
                  "MiB the decoded uint8 images may take; a larger set is refused"),
      integer_key("max_pixels", default_max_image_pixels, 1, int64_t(1) << 40,
                  "width x height above which an image is refused before decoding (Pillow's limit)")};
}

}  // namespace

const KeyVariants& data_source_keys() {
  static const KeyVariants formats{
      {"idx",
       {file_key("idx", "images", "/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz",
                 "IDX images, gzipped or raw"),
        file_key("idx", "labels", "/usr/share/datasets/fashion-mnist/train-labels-idx1-ubyte.gz",
                 "IDX labels, gzipped or raw"),
        limit_key()}},
      {"cifar10",
       {string_list_key("files", "CIFAR-10 binary batches")
            .require("is required: the CIFAR-10 .bin files, e.g. files: [data_batch_1.bin]"),
        limit_key()}},
      {"npy",
       {file_key("npy", "x", "x_train.npy", "samples, (N, ...)"),
        file_key("npy", "y", "y_train.npy", "labels, (N)"), limit_key()}},
      {"csv",
       {file_key("csv", "path", "train.csv", "one sample per row"),
        bool_key("header", false, "the first row names the columns"),
        string_key("label_column", "-1", "name or index of the label column (-1: last)"),
        char_key("delimiter", ",", "the column separator"), limit_key()}},
      {"sequences",
       {file_key("sequences", "path", "reuters_train.txt", "one sample per line: label, then token ids"),
        integer_key("maxlen", 0, 0, 1 << 24, "pad or truncate to this length (0: the longest)"),
        choice_key("padding", "pre", {"pre", "post"}, "where short sequences are padded"),
        choice_key("truncating", "pre", {"pre", "post"}, "where long sequences are cut"), limit_key()}},
      {"image_folder", image_keys("image_folder", "images/train",
                                  "a folder with one subfolder of PNG/JPEG images per class")},
      {"image_list",
       image_keys("image_list", "train_list.csv", "a CSV of file,label rows (files relative to it)")},
      {"disc", generated_keys("points in [0,1]^2")},
      {"random", generated_keys("normal features of model.input_shape, uniform labels")},
  };
  return formats;
}

namespace {

KeyValues read_section(const YAML::Node& section, const std::string& path, const std::string& file) {
  NodeReader r(section, path, file);
  return read_variant(r, "format", "idx", data_source_keys());
}

Dataset first_n(Dataset d, int64_t limit) {
  if (limit <= 0 || limit >= d.size()) return d;
  const int64_t n = d.sample_numel() * limit;
  if (d.dtype == SampleDtype::u8)
    d.u8.resize(size_t(n));
  else
    d.f32.resize(size_t(n));
  d.labels.resize(size_t(limit));
  return d;
}

bool is_image_format(const std::string& format) { return format == "image_folder" || format == "image_list"; }

ImageLoadOptions image_options(const KeyValues& s, const std::string& path, const Shape& input_shape) {
  ImageLoadOptions o;
  o.key = path;
  if (input_shape.rank() != 3 || (input_shape[0] != 1 && input_shape[0] != 3))
    throw ConfigError(path + ": format " + s.string("format") +
                      " needs model.input_shape [1, H, W] (gray) or [3, H, W] (RGB), not " +
                      input_shape.str() +
                      (input_shape.rank() == 3 && (input_shape[2] == 1 || input_shape[2] == 3)
                           ? " (channels come first: [" + std::to_string(input_shape[2]) + ", " +
                                 std::to_string(input_shape[0]) + ", " + std::to_string(input_shape[1]) + "])"
                           : ""));
  o.channels = input_shape[0];
  o.height = input_shape[1];
  o.width = input_shape[2];
  if (s.has("resize")) {
    const YAML::Node r = s.node("resize");
    if (r.IsMap()) {
      o.sizing.shorter = r["shorter"].as<int64_t>();
    } else {
      o.sizing.resize_h = r[0].as<int64_t>();
      o.sizing.resize_w = r[1].as<int64_t>();
    }
  }
  if (s.has("center_crop")) {
    const std::vector<int64_t> c = s.integers("center_crop");
    o.sizing.crop_h = c[0];
    o.sizing.crop_w = c[1];
  }
  o.cache_mb = s.integer("cache_mb");
  o.max_pixels = s.integer("max_pixels");
  return o;
}

// A line redrawn on a terminal while a large set is decoded ("data.train: decoding images
// 12000/60000 (20%)"); nothing elsewhere, where the summary line after it says enough.
std::function<void(int64_t, int64_t)> decode_progress(const std::string& key) {
  if (!::isatty(STDERR_FILENO)) return {};
  return [key, drawn = false](int64_t done, int64_t total) mutable {
    if (total < 1000) return;
    if (done < total) {
      std::fprintf(stderr, "\r%s: decoding images %lld/%lld (%d%%)", key.c_str(), (long long)done,
                   (long long)total, int(100 * done / total));
      drawn = true;
    } else if (drawn) {
      std::fprintf(stderr, "\r\033[K");
    }
    std::fflush(stderr);
  };
}

Dataset load_image_source(const KeyValues& s, const std::string& path, int num_classes,
                          const Shape& input_shape, const std::vector<std::string>& class_names) {
  ImageLoadOptions o = image_options(s, path, input_shape);
  ListingOptions lo;
  lo.class_names = class_names;
  lo.num_classes = num_classes;
  lo.key = path;
  const std::string where = s.string("path");
  const ImageListing listing =
      s.string("format") == "image_folder" ? list_image_folder(where, lo) : list_image_list(where, lo);
  if (!listing.skipped.empty()) {
    std::string examples;
    for (size_t i = 0; i < listing.skipped.size() && i < 3; ++i)
      examples += (i ? "; " : "") + listing.skipped[i];
    spdlog::warn("{}: skipped {} {} of {} that {} not images to read: {}{}", path, listing.skipped.size(),
                 listing.skipped.size() == 1 ? "entry" : "entries", where,
                 listing.skipped.size() == 1 ? "is" : "are", examples,
                 listing.skipped.size() > 3 ? "; ..." : "");
  }
  o.progress = decode_progress(path);
  const auto t0 = std::chrono::steady_clock::now();
  Dataset d = load_images(listing, o);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  spdlog::info("{}: decoded {} images from {} in {:.2f} s ({:.0f} images/s)", path, d.size(), where, seconds,
               double(d.size()) / std::max(seconds, 1e-9));
  return d;
}

}  // namespace

bool image_source_options(const YAML::Node& section, const std::string& path, const std::string& file,
                          const Shape& input_shape, ImageLoadOptions* out) {
  const KeyValues s = read_section(section, path, file);
  if (!is_image_format(s.string("format"))) return false;
  *out = image_options(s, path, input_shape);
  return true;
}

YAML::Node describe_source(const YAML::Node& section, const std::string& path, const std::string& file) {
  return read_section(section, path, file).resolved();
}

Dataset load_source(const YAML::Node& section, const std::string& path, const std::string& file,
                    int num_classes, const Shape& input_shape, const std::vector<std::string>& class_names) {
  const KeyValues s = read_section(section, path, file);
  const std::string format = s.string("format");
  const int64_t limit = s.has("limit") ? s.integer("limit") : 0;
  Dataset d;
  if (format == "idx") {
    d = read_idx(s.string("images"), s.string("labels"), num_classes, limit);
  } else if (format == "cifar10") {
    d = first_n(read_cifar10(s.strings("files")), limit);
  } else if (format == "npy") {
    d = first_n(dataset_from_npy(s.string("x"), s.string("y"), num_classes), limit);
  } else if (format == "csv") {
    CsvOptions o;
    o.has_header = s.boolean("header");
    o.label_column = s.string("label_column");
    o.delimiter = s.string("delimiter")[0];
    o.num_classes = num_classes;
    d = first_n(read_csv(s.string("path"), o), limit);
  } else if (format == "sequences") {
    SequenceOptions o;
    o.maxlen = s.integer("maxlen");
    o.pad_pre = s.string("padding") == "pre";
    o.trunc_pre = s.string("truncating") == "pre";
    o.num_classes = num_classes;
    d = first_n(read_sequences(s.string("path"), o), limit);
  } else if (is_image_format(format)) {
    d = load_image_source(s, path, num_classes, input_shape, class_names);
  } else if (format == "disc") {
    d = make_disc(s.integer("samples"), uint64_t(s.integer("seed")));
  } else {
    d = make_random(s.integer("samples"), input_shape, num_classes, uint64_t(s.integer("seed")));
  }
  for (int32_t y : d.labels)
    if (y < 0 || y >= num_classes)
      throw DataError(path + ": label " + std::to_string(y) + " is outside [0, " +
                      std::to_string(num_classes) + ") (data.num_classes)");
  if (d.sample_shape.numel() != input_shape.numel())
    throw DataError(path + ": samples have shape " + d.sample_shape.str() + " but model.input_shape is " +
                    input_shape.str());
  if (d.size() == 0) throw DataError(path + ": the data source has no samples");
  d.name = path;
  return d;
}

}  // namespace trainer

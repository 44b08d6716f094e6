#include "lib/train/data_sources.h"

#include <spdlog/spdlog.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <numeric>

#include "datasets/cifar10_reader.h"
#include "datasets/csv_reader.h"
#include "datasets/disc_generator.h"
#include "datasets/idx_reader.h"
#include "datasets/image_loader.h"
#include "datasets/npy_reader.h"
#include "datasets/random_generator.h"
#include "datasets/sample_stream.h"
#include "datasets/sequence_reader.h"
#include "lib/config/key_spec.h"
#include "lib/config/node_reader.h"
#include "lib/config/yaml_floats.h"
#include "lib/core/error.h"
#include "lib/train/csv_source.h"
#include "lib/train/input_files.h"

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
      choice_key("cache", "auto", {"auto", "memory", "none"},
                 "memory: decode every image before training (refused over cache_mb); none: stream from "
                 "disk, decoding ahead of each step; auto: memory when the set fits cache_mb, else stream "
                 "with cache_mb of decoded images cached"),
      integer_key("cache_mb", 8192, 1, int64_t(1) << 30,
                  "MiB of decoded uint8 images to hold in memory (cache: memory and auto)"),
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
        limit_key()},
       "MNIST's IDX files: an images file and a labels file"},
      {"cifar10",
       {string_list_key("files", "CIFAR-10 binary batches")
            .require("is required: the CIFAR-10 .bin files, e.g. files: [data_batch_1.bin]"),
        limit_key()},
       "the CIFAR-10 binary version: records of a label byte and 3x32x32 pixel bytes"},
      {"npy",
       {file_key("npy", "x", "x_train.npy", "samples, (N, ...)"),
        file_key("npy", "y", "y_train.npy",
                 "targets: (N) class indices, or float values (N) or (N, K) for losses that take values"),
        choice_key("layout", "nchw", {"nchw", "nhwc"},
                   "nhwc: x holds channels-last images (N, H, W, C), transposed on load to (N, C, H, W)"),
        limit_key()},
       "NumPy .npy arrays: samples x and targets y"},
      {"csv", csv_source_keys(), "a CSV (or whitespace-separated) table, one sample per row"},
      {"sequences",
       {file_key("sequences", "path", "reuters_train.txt", "one sample per line: label, then token ids"),
        integer_key("maxlen", 0, 0, 1 << 24, "pad or truncate to this length (0: the longest)"),
        choice_key("padding", "pre", {"pre", "post"}, "where short sequences are padded"),
        choice_key("truncating", "pre", {"pre", "post"}, "where long sequences are cut"), limit_key()},
       "token id sequences, one text line per sample (Keras' pad_sequences applied)"},
      {"image_folder",
       image_keys("image_folder", "images/train", "a folder with one subfolder of PNG/JPEG images per class"),
       "PNG/JPEG images in one subfolder per class (torchvision's ImageFolder)"},
      {"image_list",
       image_keys("image_list", "train_list.csv", "a CSV of file,label rows (files relative to it)"),
       "PNG/JPEG images listed in a CSV of file,label rows"},
      {"disc", generated_keys("points in [0,1]^2"),
       "generated: 2-D points, label 1 inside a quarter disc (a toy problem)"},
      {"random", generated_keys("normal features of model.input_shape, uniform labels"),
       "generated: random features and labels (benchmarks, tests)"},
  };
  return formats;
}

namespace {

KeyValues read_section(const YAML::Node& section, const std::string& path, const std::string& file) {
  NodeReader r(section, path, file);
  KeyValues s = read_variant(r, "format", kDefaultDataFormat, data_source_keys());
  if (s.string("format") == "csv") check_csv_section(s, section, path, file);
  return s;
}

Dataset first_n(Dataset d, int64_t limit) {
  if (limit <= 0 || limit >= d.size()) return d;
  const int64_t n = d.sample_numel() * limit;
  if (d.stream) {
    std::vector<int64_t> rows(static_cast<size_t>(limit));
    std::iota(rows.begin(), rows.end(), int64_t(0));
    d.stream = d.stream->subset(rows);
  } else if (d.dtype == SampleDtype::u8)
    d.u8.resize(size_t(n));
  else
    d.f32.resize(size_t(n));
  if (d.target_width > 0)
    d.targets.resize(size_t(limit * d.target_width));
  else
    d.labels.resize(size_t(limit));
  return d;
}

// The keys that name files or folders: the resolved config records them as absolute paths, so
// that a run directory's config.yaml reads the same data from any directory.
const std::vector<std::string> kFileKeys{"images", "labels", "x", "y", "path", "files", "targets"};

std::string absolute_path(const std::string& p) {
  std::error_code ec;
  const std::filesystem::path a = std::filesystem::absolute(p, ec);
  return ec ? p : a.lexically_normal().string();
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
  const std::string cache = s.string("cache");
  o.cache = cache == "memory" ? ImageCache::memory
            : cache == "none" ? ImageCache::none
                              : ImageCache::automatic;
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
                          const Shape& input_shape, const std::vector<std::string>& class_names,
                          bool any_image_size) {
  ImageLoadOptions o = image_options(s, path, input_shape);
  if (any_image_size) {  // random_resized_crop's training images: the size the source's sizing gives
    if (o.sizing.crop_h > 0) {
      o.height = o.sizing.crop_h, o.width = o.sizing.crop_w;
    } else if (o.sizing.resize_h > 0) {
      o.height = o.sizing.resize_h, o.width = o.sizing.resize_w;
    } else if (o.sizing.shorter > 0) {
      s.fail("resize",
             "gives images of different sizes; random_resized_crop's training images need one size: add "
             "center_crop: [S, S] (e.g. resize: {shorter: 256} and center_crop: [256, 256])");
    }
  }
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
  if (d.stream) {
    const int64_t n = d.size(), cached = cached_image_count(o, n);
    const double gib = double(n) * double(d.sample_numel()) / double(1 << 30);
    spdlog::info(
        "{}: streaming {} images from {} ({:.1f} GiB decoded{}): decoded as batches are drawn{}", path, n,
        where, gib,
        o.cache == ImageCache::none ? ", cache: none" : ", over cache_mb " + std::to_string(o.cache_mb),
        cached == 0 ? std::string() : "; the first " + std::to_string(cached) + " stay cached once read");
    return d;
  }
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
  YAML::Node out = YAML::Clone(read_section(section, path, file).resolved());
  for (const std::string& key : kFileKeys) {
    YAML::Node v = out[key];
    if (!v || v.IsNull()) continue;
    if (v.IsScalar()) {
      out[key] = absolute_path(v.Scalar());
    } else if (v.IsSequence()) {
      YAML::Node list(YAML::NodeType::Sequence);
      for (const auto& item : v) list.push_back(absolute_path(item.Scalar()));
      out[key] = list;
    }
  }
  return out;
}

std::optional<double> default_scale(const YAML::Node& section, const std::string& path,
                                    const std::string& file) {
  const KeyValues s = read_section(section, path, file);
  const std::string format = s.string("format");
  if (format == "idx" || format == "cifar10") return 1.0 / 255.0;
  if (format == "csv" || format == "sequences" || format == "disc" || format == "random") return 1.0;
  if (format != "npy") return std::nullopt;
  try {
    const NpyArray head = read_npy_header(s.string("x"));
    return head.descr == "|u1" || head.descr == "<u1" ? 1.0 / 255.0 : 1.0;
  } catch (const Error&) {
    return std::nullopt;  // reading the file will say what is wrong with it
  }
}

namespace {

Shape squeezed(const Shape& s) {
  std::vector<int64_t> d;
  for (int64_t v : s.dims)
    if (v != 1) d.push_back(v);
  return Shape(d);
}

// [28, 28, 1], as the config writes a shape.
std::string as_list(const std::vector<int64_t>& dims) {
  std::string s = "[";
  for (size_t i = 0; i < dims.size(); ++i) s += (i ? ", " : "") + std::to_string(dims[i]);
  return s + "]";
}

}  // namespace

std::string channels_first_hint(const Shape& in) {
  if (in.rank() != 3 || in[0] <= 4 || in[1] <= 4) return "";
  if (in[2] != 1 && in[2] != 3 && in[2] != 4) return "";
  return "model.input_shape " + as_list(in.dims) +
         " looks channels-last (height, width, channels); trainer's images are channels-first: "
         "input_shape: " +
         as_list({in[2], in[0], in[1]});
}

std::string sample_shape_mismatch(const Shape& found, const Shape& input, const std::string& nhwc_fix) {
  if (found == input) return "";
  const bool same_count = found.numel() == input.numel();
  // A flat sample (a CSV row, an (N, F) array) or a flat input reshapes in C order; so does an
  // extra axis of 1 ((N, 28, 28) for [1, 28, 28]). Two layouts of one rank do not: that is how
  // (N, 32, 32, 3) images pass for [3, 32, 32] and scramble every pixel.
  if (same_count && found.rank() != input.rank()) {
    const Shape f = squeezed(found), i = squeezed(input);
    if (f.rank() <= 1 || i.rank() <= 1 || f == i) return "";
  }
  std::string m = "samples have shape " + found.str() + " but model.input_shape is " + input.str();
  if (same_count && found.rank() == input.rank()) m += " (the same number of values, in another layout)";
  const std::string hint = channels_first_hint(input);
  if (!hint.empty()) return m + "; " + hint;
  // The rule: the last axis is the input's channels while the first axis is not.
  const bool nhwc = found.rank() == 3 && input.rank() == 3 && found[2] == input[0] && found[0] != input[0];
  if (!nhwc) return m;
  m += ": they look channels-last (height, width, channels), and trainer's images are channels-first";
  if (found[0] == input[1] && found[1] == input[2] && !nhwc_fix.empty()) m += "; " + nhwc_fix;
  return m;
}

void to_value_targets(Dataset& d, const TargetLayout& target, const std::string& path, bool warn) {
  const int64_t K = target.width;
  if (!warn) {
  } else if (d.target_width == 0 && K > 1 && !target.binary)
    spdlog::warn(
        "{}: the data has one integer label a sample and the model has {} outputs for a regression loss: "
        "each label becomes a "
        "one-hot row of targets. For classification use loss cross_entropy (or "
        "sparse_categorical_crossentropy)",
        path, K);
  else if (d.target_width == 0 && K > 1)
    spdlog::warn(
        "{}: the data has one integer label a sample for binary_cross_entropy's {} outputs (multi-label): "
        "each "
        "label becomes a one-hot row, one positive a sample. For one class a sample, use loss cross_entropy",
        path, K);
  if (d.target_width == 0) {
    const int64_t n = d.size();
    d.targets.assign(size_t(n * K), 0.f);
    for (int64_t i = 0; i < n; ++i) {
      const int32_t y = d.labels[size_t(i)];
      if (K == 1) {
        d.targets[size_t(i)] = float(y);
      } else if (y < 0 || y >= K) {
        throw DataError(path + ": sample " + std::to_string(i) + " has label " + std::to_string(y) +
                        ", which names none of the model's " + std::to_string(K) +
                        " outputs (a multi-label loss takes a multi-hot row, or one label in [0, " +
                        std::to_string(K) + ") a sample)");
      } else {
        d.targets[size_t(i * K + y)] = 1.f;
      }
    }
    d.labels.clear();
    d.target_width = K;
  }
  if (d.target_width != K)
    throw DataError(path + ": the data has " + std::to_string(d.target_width) +
                    " target values a sample, but the model has " + std::to_string(K) +
                    " outputs (the loss takes one output per target)");
  for (size_t j = 0; j < d.targets.size(); ++j) {
    const float v = d.targets[j];
    const std::string where = path + ": sample " + std::to_string(int64_t(j) / K) +
                              (K > 1 ? ", target " + std::to_string(int64_t(j) % K) : std::string());
    if (!std::isfinite(v)) throw DataError(where + " is " + std::to_string(v) + ": targets must be finite");
    if (target.binary && v != 0.f && v != 1.f)
      throw DataError(where + " is " + std::to_string(v) +
                      ": binary_cross_entropy takes targets of 0 or 1 (a regression target needs mse, mae or "
                      "huber)");
  }
}

bool source_discovers_classes(const YAML::Node& section) {
  return section.IsMap() && section["format"] && section["format"].IsScalar() &&
         (section["format"].Scalar() == "csv" || is_image_format(section["format"].Scalar()));
}

namespace {

Dataset read_source(const YAML::Node& section, const std::string& path, const std::string& file,
                    const SourceContext& ctx, YAML::Node* learned);

}  // namespace

Dataset load_source(const YAML::Node& section, const std::string& path, const std::string& file,
                    const SourceContext& ctx, YAML::Node* learned) {
  try {
    return read_source(section, path, file, ctx, learned);
  } catch (const DataError& e) {
    throw DataError(data_error_place(section, path, file, e.what()) + e.what());  // input_files.h
  }
}

namespace {

Dataset read_source(const YAML::Node& section, const std::string& path, const std::string& file,
                    const SourceContext& ctx, YAML::Node* learned) {
  const KeyValues s = read_section(section, path, file);
  const std::string format = s.string("format");
  const int64_t limit = s.has("limit") ? s.integer("limit") : 0;
  int num_classes = ctx.num_classes;
  const Shape& input_shape = ctx.input_shape;
  const TargetLayout& target = ctx.target;
  if (learned) *learned = YAML::Node(YAML::NodeType::Map);
  if (num_classes == 0 && format != "csv" && !is_image_format(format) &&
      target.kind == TargetKind::class_index)
    throw ConfigError(file + ": data.num_classes is required with " + path + ".format " + format +
                      " (only csv and image folder sources discover their classes)");
  // A loss on values takes the readers' integer labels as they are (to_value_targets below):
  // no class range to check them against.
  const int classes = target.kind == TargetKind::values ? (1 << 30) : num_classes;
  Dataset d;
  if (format == "idx") {
    d = read_idx(s.string("images"), s.string("labels"), classes, limit);
  } else if (format == "cifar10") {
    d = first_n(read_cifar10(s.strings("files")), limit);
  } else if (format == "npy") {
    d = first_n(dataset_from_npy(s.string("x"), s.string("y"), classes, s.string("layout") == "nhwc", target),
                limit);
  } else if (format == "csv") {
    const CsvOptions o = csv_options(s, ctx.learned_from, ctx);
    CsvEncoding e;
    d = first_n(read_csv(s.string("path"), o, &e), limit);
    if (learned && !o.encoding.known) *learned = csv_learned_keys(e, o);
  } else if (format == "sequences") {
    SequenceOptions o;
    o.maxlen = s.integer("maxlen");
    o.pad_pre = s.string("padding") == "pre";
    o.trunc_pre = s.string("truncating") == "pre";
    o.num_classes = classes;
    d = first_n(read_sequences(s.string("path"), o), limit);
  } else if (is_image_format(format)) {
    d = load_image_source(s, path, num_classes, input_shape, ctx.class_names, ctx.any_image_size);
  } else if (format == "disc" || format == "random") {
    // A generator makes every sample in host memory up front: a count that cannot fit is the
    // config's mistake, said before a container is asked for more than it can hold.
    const int64_t n = s.integer("samples");
    const int64_t per_sample = format == "disc" ? 2 : std::max<int64_t>(input_shape.numel(), 1);
    const double bytes = double(n) * double(per_sample + 1) * 4.0;
    const double host = double(sysconf(_SC_PHYS_PAGES)) * double(sysconf(_SC_PAGESIZE));
    if (host > 0 && bytes > host)
      throw ConfigError(path + ".samples: " + std::to_string(n) + " generated samples of " +
                        std::to_string(per_sample) + " values need " + std::to_string(int64_t(bytes / 1e9)) +
                        " GB of host memory, more than this machine's " +
                        std::to_string(int64_t(host / 1e9)) + " GB; generate fewer");
  }
  if (format == "disc") {
    d = make_disc(s.integer("samples"), uint64_t(s.integer("seed")));
  } else if (format == "random") {
    d = target.kind == TargetKind::values
            ? make_random_values(s.integer("samples"), input_shape, target.width, target.binary,
                                 uint64_t(s.integer("seed")))
            : make_random(s.integer("samples"), input_shape, num_classes, uint64_t(s.integer("seed")));
  }
  if (target.kind == TargetKind::values) {
    to_value_targets(d, target, path);
    num_classes = 0;  // no class range to check
  }
  // Classes a reader discovered (data.num_classes left out) bound its labels.
  const int C = num_classes > 0 ? num_classes : (target.kind == TargetKind::values ? 0 : d.num_classes);
  for (int32_t y : d.labels)
    if (y < 0 || y >= C)
      throw DataError(path + ": label " + std::to_string(y) + " is outside [0, " + std::to_string(C) +
                      ") (data.num_classes)");
  const bool any_image_size = ctx.any_image_size;
  const bool any_size_image = any_image_size && input_shape.rank() == 3 && d.sample_shape.rank() == 3 &&
                              d.sample_shape[0] == input_shape[0];
  const std::string mismatch =
      any_size_image
          ? std::string()
          : sample_shape_mismatch(
                d.sample_shape, input_shape,
                format == "npy" ? "add layout: nhwc to " + path + " to transpose them on load" : "");
  if (!mismatch.empty())
    throw DataError(
        path + ": " + mismatch +
        (any_image_size ? " (random_resized_crop takes images of any size, with the same channels)" : ""));
  if (d.size() == 0) throw DataError(path + ": the data source has no samples");
  d.name = path;
  return d;
}

}  // namespace

Dataset load_predict_csv(const std::string& input, const YAML::Node& train, const std::string& file,
                         const SourceContext& ctx) {
  CsvOptions o;
  if (source_discovers_classes(train)) {
    const KeyValues s = read_section(train, "data.train", file);
    o = csv_options(s, train, ctx);
    o.labels_optional = true;
    o.learn = false;
  } else {  // features only, an optional header row
    o.label_columns.clear();
    o.detect_header = true;
  }
  Dataset d = read_csv(input, o);
  const int64_t F = ctx.input_shape.numel(), found = d.sample_shape.numel();
  if (found != F)
    throw DataError(input + ": " + std::to_string(found) + " values per row; the model takes " +
                    std::to_string(F) + " features per sample (model.input_shape " + ctx.input_shape.str() +
                    ")" + (found == F + 1 ? ": remove the label column" : ""));
  d.sample_shape = ctx.input_shape;
  return d;
}

void record_learned(YAML::Node data, const YAML::Node& learned, const std::vector<std::string>& class_names,
                    int64_t num_classes) {
  if (learned && learned.IsMap())
    for (const auto& kv : learned) data["train"][kv.first.Scalar()] = YAML::Clone(kv.second);
  const YAML::Node names = data["class_names"];
  if (!class_names.empty() && !(names && names.IsSequence() && names.size() > 0)) {
    data["class_names"] = string_sequence(class_names);  // "1.50" stays "1.50" through dump_yaml
    data["class_names"].SetStyle(YAML::EmitterStyle::Flow);
  }
  if (num_classes > 0) data["num_classes"] = num_classes;
}

}  // namespace trainer

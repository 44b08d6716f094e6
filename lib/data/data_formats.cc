// The data format table (lib/data/data_formats.h): one entry per format, its keys and its
// reader, which calls the format's reader in datasets/.
#include "lib/data/data_formats.h"

#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>

#include "datasets/cifar10_reader.h"
#include "datasets/csv_reader.h"
#include "datasets/disc_generator.h"
#include "datasets/idx_reader.h"
#include "datasets/npy_reader.h"
#include "datasets/random_generator.h"
#include "datasets/sequence_reader.h"
#include "datasets/token_reader.h"
#include "lib/core/elapsed.h"
#include "lib/core/error.h"
#include "lib/data/csv_source.h"

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

// The `limit` key of the formats that read into memory (no image format has one).
Dataset first_n(Dataset d, int64_t limit) {
  if (limit <= 0 || limit >= d.size()) return d;
  const int64_t n = d.sample_numel() * limit;
  if (d.dtype == SampleDtype::u8)
    d.u8.resize(size_t(n));
  else
    d.f32.resize(size_t(n));
  if (d.target_width > 0)
    d.targets.resize(size_t(limit * d.target_width));
  else
    d.labels.resize(size_t(limit));
  return d;
}

// A generator makes every sample in host memory up front: a count that cannot fit is the
// config's mistake, said before a container is asked for more than it can hold.
void check_generated_fits(const SourceRead& r, int64_t per_sample) {
  const int64_t n = r.keys.integer("samples");
  const double bytes = double(n) * double(per_sample + 1) * 4.0;
  const double host = double(sysconf(_SC_PHYS_PAGES)) * double(sysconf(_SC_PAGESIZE));
  if (host > 0 && bytes > host)
    throw ConfigError(r.path + ".samples: " + std::to_string(n) + " generated samples of " +
                      std::to_string(per_sample) + " values need " + std::to_string(int64_t(bytes / 1e9)) +
                      " GB of host memory, more than this machine's " + std::to_string(int64_t(host / 1e9)) +
                      " GB; generate fewer");
}

}  // namespace

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

namespace {

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

using ImageLister = ImageListing (*)(const std::string&, const ListingOptions&);

// An image format's reader: `list` gives the files (list_image_folder, list_image_list).
Dataset read_images(const SourceRead& r, ImageLister list) {
  const KeyValues& s = r.keys;
  const std::string& path = r.path;
  ImageLoadOptions o = image_options(s, path, r.ctx.input_shape);
  const bool any_image_size = r.ctx.any_image_size;
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
  lo.class_names = r.ctx.class_names;
  lo.num_classes = r.ctx.num_classes;
  lo.key = path;
  const std::string where = s.string("path");
  const ImageListing listing = list(where, lo);
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
  const double seconds = seconds_since(t0);
  spdlog::info("{}: decoded {} images from {} in {:.2f} s ({:.0f} images/s)", path, d.size(), where, seconds,
               double(d.size()) / std::max(seconds, 1e-9));
  return d;
}

std::vector<DataFormat> make_formats() {
  const auto u8_scale = [](const KeyValues&) -> std::optional<double> { return 1.0 / 255.0; };
  const auto unit_scale = [](const KeyValues&) -> std::optional<double> { return 1.0; };
  const auto sample_scale = [](const KeyValues&) -> std::optional<double> { return std::nullopt; };
  std::vector<DataFormat> f;
  f.push_back({"idx",
               "MNIST's IDX files: an images file and a labels file",
               {file_key("idx", "images", "/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz",
                         "IDX images, gzipped or raw"),
                file_key("idx", "labels", "/usr/share/datasets/fashion-mnist/train-labels-idx1-ubyte.gz",
                         "IDX labels, gzipped or raw"),
                limit_key()},
               {"images", "labels"},
               /*folder=*/false,
               /*discovers_classes=*/false,
               u8_scale,
               [](const SourceRead& r) {
                 return read_idx(r.keys.string("images"), r.keys.string("labels"), r.classes, r.limit);
               }});
  f.push_back({"cifar10",
               "the CIFAR-10 binary version: records of a label byte and 3x32x32 pixel bytes",
               {string_list_key("files", "CIFAR-10 binary batches")
                    .require("is required: the CIFAR-10 .bin files, e.g. files: [data_batch_1.bin]"),
                limit_key()},
               {"files"},
               /*folder=*/false,
               /*discovers_classes=*/false,
               u8_scale,
               [](const SourceRead& r) { return first_n(read_cifar10(r.keys.strings("files")), r.limit); }});
  f.push_back(
      {"npy",
       "NumPy .npy arrays: samples x and targets y",
       {file_key("npy", "x", "x_train.npy", "samples, (N, ...)"),
        file_key("npy", "y", "y_train.npy",
                 "targets: (N) class indices, or float values (N) or (N, K) for losses that take values"),
        choice_key("layout", "nchw", {"nchw", "nhwc"},
                   "nhwc: x holds channels-last images (N, H, W, C), transposed on load to (N, C, H, W)"),
        limit_key()},
       {"x", "y"},
       /*folder=*/false,
       /*discovers_classes=*/false,
       [](const KeyValues& s) -> std::optional<double> {
         try {
           const NpyArray head = read_npy_header(s.string("x"));
           return head.descr == "|u1" || head.descr == "<u1" ? 1.0 / 255.0 : 1.0;
         } catch (const Error&) {
           return std::nullopt;  // reading the file will say what is wrong with it
         }
       },
       [](const SourceRead& r) {
         return first_n(dataset_from_npy(r.keys.string("x"), r.keys.string("y"), r.classes,
                                         r.keys.string("layout") == "nhwc", r.ctx.target),
                        r.limit);
       }});
  f.push_back({"csv",
               "a CSV (or whitespace-separated) table, one sample per row",
               csv_source_keys(),
               {"path", "targets"},
               /*folder=*/false,
               /*discovers_classes=*/true,
               unit_scale,
               [](const SourceRead& r) {
                 const CsvOptions o = csv_options(r.keys, r.ctx.learned_from, r.ctx);
                 CsvEncoding e;
                 Dataset d = first_n(read_csv(r.keys.string("path"), o, &e), r.limit);
                 if (r.learned && !o.encoding.known) *r.learned = csv_learned_keys(e, o);
                 return d;
               }});
  f.push_back(
      {"sequences",
       "token id sequences, one text line per sample (Keras' pad_sequences applied)",
       {file_key("sequences", "path", "reuters_train.txt", "one sample per line: label, then token ids"),
        integer_key("maxlen", 0, 0, 1 << 24, "pad or truncate to this length (0: the longest)"),
        choice_key("padding", "pre", {"pre", "post"}, "where short sequences are padded"),
        choice_key("truncating", "pre", {"pre", "post"}, "where long sequences are cut"), limit_key()},
       {"path"},
       /*folder=*/false,
       /*discovers_classes=*/false,
       unit_scale,
       [](const SourceRead& r) {
         SequenceOptions o;
         o.maxlen = r.keys.integer("maxlen");
         o.pad_pre = r.keys.string("padding") == "pre";
         o.trunc_pre = r.keys.string("truncating") == "pre";
         o.num_classes = r.classes;
         return first_n(read_sequences(r.keys.string("path"), o), r.limit);
       }});
  const auto window_keys = [](const std::string& format, const std::string& example, const std::string& doc) {
    return KeySpecs{
        file_key(format, "path", example, doc),
        integer_key("context", 256, 1, 1 << 20,
                    "tokens a sample (model.input_shape: [context]); its labels are the next token at "
                    "every position"),
        integer_key("stride", 0, 0, 1 << 30,
                    "tokens between the starts of consecutive windows (0: context, no overlap; smaller: "
                    "overlapping windows)"),
        integer_key("limit", 0, 0, int64_t(1) << 40, "keep the first N windows (0: all)")};
  };
  const auto window_options = [](const SourceRead& r) {
    TokenWindowOptions o;
    o.context = r.keys.integer("context");
    o.stride = r.keys.integer("stride");
    o.limit = r.limit;
    o.num_classes = r.classes < (1 << 30) ? r.classes : 0;
    return o;
  };
  // text and tokens: the same keys and options, each its own reader.
  const auto window_format = [&](const std::string& name, const std::string& doc, const std::string& example,
                                 const std::string& file_doc, bool discovers_classes,
                                 Dataset (*reader)(const std::string&, const TokenWindowOptions&)) {
    return DataFormat{name,
                      doc,
                      window_keys(name, example, file_doc),
                      {"path"},
                      /*folder=*/false,
                      discovers_classes,
                      unit_scale,
                      [window_options, reader](const SourceRead& r) {
                        return reader(r.keys.string("path"), window_options(r));
                      }};
  };
  f.push_back(window_format("text",
                            "a text file as its UTF-8 bytes (256 tokens), in windows of `context` bytes; the "
                            "labels are the next byte at every position (character-level language models)",
                            "train.txt", "a text file (gzipped or not)", /*discovers_classes=*/true,
                            read_text_windows));
  f.push_back(
      window_format("tokens",
                    "uint16 token ids in a flat file (nanoGPT's raw .bin, or llm.c's with its header), in "
                    "windows of `context` tokens; the labels are the next token at every position",
                    "train.bin", "a token file", /*discovers_classes=*/false, read_token_windows));
  f.push_back(
      {"image_folder",
       "PNG/JPEG images in one subfolder per class (torchvision's ImageFolder)",
       image_keys("image_folder", "images/train", "a folder with one subfolder of PNG/JPEG images per class"),
       {"path"},
       /*folder=*/true,
       /*discovers_classes=*/true,
       sample_scale,
       [](const SourceRead& r) { return read_images(r, list_image_folder); }});
  f.push_back({"image_list",
               "PNG/JPEG images listed in a CSV of file,label rows",
               image_keys("image_list", "train_list.csv", "a CSV of file,label rows (files relative to it)"),
               {"path"},
               /*folder=*/false,
               /*discovers_classes=*/true,
               sample_scale,
               [](const SourceRead& r) { return read_images(r, list_image_list); }});
  f.push_back({"disc",
               "generated: 2-D points, label 1 inside a quarter disc (a toy problem)",
               generated_keys("points in [0,1]^2"),
               {},
               /*folder=*/false,
               /*discovers_classes=*/false,
               unit_scale,
               [](const SourceRead& r) {
                 check_generated_fits(r, 2);
                 return make_disc(r.keys.integer("samples"), uint64_t(r.keys.integer("seed")));
               }});
  f.push_back({"random",
               "generated: random features and labels (benchmarks, tests)",
               generated_keys("normal features of model.input_shape, uniform labels"),
               {},
               /*folder=*/false,
               /*discovers_classes=*/false,
               unit_scale,
               [](const SourceRead& r) {
                 const Shape& in = r.ctx.input_shape;
                 check_generated_fits(r, std::max<int64_t>(in.numel(), 1));
                 const TargetLayout& t = r.ctx.target;
                 const uint64_t seed = uint64_t(r.keys.integer("seed"));
                 return t.kind == TargetKind::values
                            ? make_random_values(r.keys.integer("samples"), in, t.width, t.binary, seed)
                            : make_random(r.keys.integer("samples"), in, r.ctx.num_classes, seed);
               }});
  return f;
}

}  // namespace

const std::vector<DataFormat>& data_formats() {
  static const std::vector<DataFormat> formats = make_formats();
  return formats;
}

const DataFormat* find_data_format(const std::string& name) {
  for (const DataFormat& f : data_formats())
    if (f.name == name) return &f;
  return nullptr;
}

const DataFormat* section_format(const YAML::Node& section) {
  if (!section.IsMap()) return nullptr;
  const YAML::Node format = section["format"];
  if (!format) return find_data_format(kDefaultDataFormat);
  return format.IsScalar() ? find_data_format(format.Scalar()) : nullptr;
}

bool DataFormat::per_position() const {
  for (const KeySpec& k : keys)
    if (k.name == "context") return true;
  return false;
}

int64_t section_positions(const YAML::Node& section) {
  const DataFormat* f = section_format(section);
  if (!f || !f->per_position()) return 1;
  int64_t def = 1;
  for (const KeySpec& k : f->keys)
    if (k.name == "context" && k.def) def = k.def.as<int64_t>();
  const YAML::Node v = section["context"];
  if (!v || !v.IsScalar()) return def;
  try {
    return std::max<int64_t>(1, v.as<int64_t>());
  } catch (const YAML::Exception&) {
    return def;
  }
}

}  // namespace trainer

#include "lib/train/data_sources.h"

#include "datasets/cifar10_reader.h"
#include "datasets/csv_reader.h"
#include "datasets/disc_generator.h"
#include "datasets/idx_reader.h"
#include "datasets/npy_reader.h"
#include "datasets/random_generator.h"
#include "datasets/sequence_reader.h"
#include "lib/config/node_reader.h"
#include "lib/core/error.h"

namespace trainer {
namespace {

// The validated keys of one source, with no file read yet.
struct Source {
  std::string format;
  std::string images, labels, x, y, path, label_column = "-1", delimiter = ",";
  std::vector<std::string> files;
  int64_t limit = 0, samples = 1000, maxlen = 0;
  uint64_t seed = 0;
  bool header = false, pad_pre = true, trunc_pre = true;
  YAML::Node resolved;
};

Source read_section(const YAML::Node& section, const std::string& path, const std::string& file) {
  NodeReader r(section, path, file);
  Source s;
  s.format = r.choice("format", "idx", {"idx", "cifar10", "npy", "csv", "sequences", "disc", "random"});
  auto required = [&](const std::string& key, const std::string& example) {
    if (!r.has(key)) r.fail(key, "is required for format " + s.format + ", e.g. " + key + ": " + example);
    return r.string(key, "");
  };
  if (s.format == "idx") {
    s.images = required("images", "/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz");
    s.labels = required("labels", "/usr/share/datasets/fashion-mnist/train-labels-idx1-ubyte.gz");
  } else if (s.format == "cifar10") {
    if (!r.has("files"))
      r.fail("files", "is required: the CIFAR-10 .bin files, e.g. files: [data_batch_1.bin]");
    s.files = r.string_list("files", {});
  } else if (s.format == "npy") {
    s.x = required("x", "x_train.npy");
    s.y = required("y", "y_train.npy");
  } else if (s.format == "csv") {
    s.path = required("path", "train.csv");
    s.header = r.boolean("header", false);
    s.label_column = r.string("label_column", "-1");
    s.delimiter = r.string("delimiter", ",");
    if (s.delimiter.size() != 1) r.fail("delimiter", "must be a single character");
  } else if (s.format == "sequences") {
    s.path = required("path", "reuters_train.txt");
    s.maxlen = r.integer("maxlen", 0, 0, 1 << 24);
    s.pad_pre = r.choice("padding", "pre", {"pre", "post"}) == "pre";
    s.trunc_pre = r.choice("truncating", "pre", {"pre", "post"}) == "pre";
  } else {  // disc, random: generated
    s.samples = r.integer("samples", 1000, 1, int64_t(1) << 32);
    s.seed = uint64_t(r.integer("seed", 0, 0, int64_t(1) << 62));
  }
  if (s.format != "disc" && s.format != "random") s.limit = r.integer("limit", 0, 0, int64_t(1) << 40);
  r.finish();
  s.resolved = r.resolved();
  return s;
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

}  // namespace

YAML::Node describe_source(const YAML::Node& section, const std::string& path, const std::string& file) {
  return read_section(section, path, file).resolved;
}

Dataset load_source(const YAML::Node& section, const std::string& path, const std::string& file,
                    int num_classes, const Shape& input_shape) {
  Source s = read_section(section, path, file);
  Dataset d;
  if (s.format == "idx") {
    d = read_idx(s.images, s.labels, num_classes, s.limit);
  } else if (s.format == "cifar10") {
    d = first_n(read_cifar10(s.files), s.limit);
  } else if (s.format == "npy") {
    d = first_n(dataset_from_npy(s.x, s.y, num_classes), s.limit);
  } else if (s.format == "csv") {
    CsvOptions o;
    o.has_header = s.header;
    o.label_column = s.label_column;
    o.delimiter = s.delimiter[0];
    o.num_classes = num_classes;
    d = first_n(read_csv(s.path, o), s.limit);
  } else if (s.format == "sequences") {
    SequenceOptions o;
    o.maxlen = s.maxlen;
    o.pad_pre = s.pad_pre;
    o.trunc_pre = s.trunc_pre;
    o.num_classes = num_classes;
    d = first_n(read_sequences(s.path, o), s.limit);
  } else if (s.format == "disc") {
    d = make_disc(s.samples, s.seed);
  } else {
    d = make_random(s.samples, input_shape, num_classes, s.seed);
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

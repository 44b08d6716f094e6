// The data format table (lib/data/data_formats.h): every entry is complete and consistent with
// what validation, the file probe, describe_source and default_scale read from it.
#include <catch2/catch.hpp>
#include <filesystem>
#include <set>

#include "lib/data/data_formats.h"
#include "lib/data/data_sources.h"
#include "lib/keys/key_spec.h"

using namespace trainer;

TEST_CASE("every data format declares its file keys, a reader and a scale, once", "[data][formats]") {
  std::set<std::string> names;
  for (const DataFormat& f : data_formats()) {
    INFO(f.name);
    REQUIRE(names.insert(f.name).second);
    REQUIRE(find_data_format(f.name) == &f);
    REQUIRE(f.read);
    REQUIRE(f.scale);
    REQUIRE_FALSE(f.doc.empty());
    for (const std::string& key : f.file_keys) REQUIRE_NOTHROW(key_named(f.keys, key));
    if (f.folder) REQUIRE(std::count(f.file_keys.begin(), f.file_keys.end(), "path") == 1);
  }
  REQUIRE(find_data_format("parquet") == nullptr);
  REQUIRE(find_data_format(kDefaultDataFormat) != nullptr);
  // Config validation takes its variants from the table, in its order.
  const KeyVariants& variants = data_source_keys();
  REQUIRE(variants.size() == data_formats().size());
  for (size_t i = 0; i < variants.size(); ++i) {
    REQUIRE(variants[i].name == data_formats()[i].name);
    REQUIRE(variants[i].doc == data_formats()[i].doc);
    REQUIRE(variants[i].keys.size() == data_formats()[i].keys.size());
  }
}

TEST_CASE("classes, scale and recorded paths come from the format's entry", "[data][formats]") {
  const auto section = [](const std::string& yaml) { return YAML::Load(yaml); };
  for (const char* f : {"csv", "image_folder", "image_list"})
    REQUIRE(source_discovers_classes(section(std::string("{format: ") + f + ", path: p}")));
  for (const char* f : {"idx", "npy", "cifar10", "sequences", "disc", "random", "parquet"})
    REQUIRE_FALSE(source_discovers_classes(section(std::string("{format: ") + f + "}")));
  REQUIRE_FALSE(source_discovers_classes(section("{path: p}")));  // idx, the default

  REQUIRE(default_scale(section("{format: idx, images: a, labels: b}"), "data.train", "t.yaml") ==
          1.0 / 255.0);
  REQUIRE(default_scale(section("{format: cifar10, files: [a.bin]}"), "data.train", "t.yaml") == 1.0 / 255.0);
  REQUIRE(default_scale(section("{format: csv, path: a.csv}"), "data.train", "t.yaml") == 1.0);
  REQUIRE(default_scale(section("{format: disc}"), "data.train", "t.yaml") == 1.0);
  REQUIRE_FALSE(
      default_scale(section("{format: image_folder, path: a}"), "data.train", "t.yaml").has_value());
  REQUIRE_FALSE(default_scale(section("{format: npy, x: missing.npy, y: y.npy}"), "data.train", "t.yaml"));

  const std::string cwd = std::filesystem::current_path().lexically_normal().string();
  const YAML::Node npy =
      describe_source(section("{format: npy, x: a/x.npy, y: y.npy}"), "data.train", "t.yaml");
  REQUIRE(npy["x"].Scalar() == cwd + "/a/x.npy");
  REQUIRE(npy["y"].Scalar() == cwd + "/y.npy");
  REQUIRE(npy["layout"].Scalar() == "nchw");  // defaults filled, not paths
  const YAML::Node cifar =
      describe_source(section("{format: cifar10, files: [a.bin, /abs/b.bin]}"), "data.train", "t.yaml");
  REQUIRE(cifar["files"][0].Scalar() == cwd + "/a.bin");
  REQUIRE(cifar["files"][1].Scalar() == "/abs/b.bin");
  const YAML::Node folder =
      describe_source(section("{format: image_folder, path: imgs}"), "data.train", "t.yaml");
  REQUIRE(folder["path"].Scalar() == cwd + "/imgs");
  REQUIRE(folder["cache"].Scalar() == "auto");
}

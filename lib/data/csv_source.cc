#include "lib/data/csv_source.h"

#include <charconv>

#include "lib/core/error.h"
#include "lib/data/data_sources.h"
#include "lib/keys/node_reader.h"
#include "lib/keys/yaml_floats.h"

namespace trainer {

KeySpecs csv_source_keys() {
  return {
      string_key("path", "", "one sample per row (gzip is read as such)")
          .require("is required for format csv, e.g. path: train.csv"),
      bool_key("header", false, "the first row (after skip_rows) names the columns"),
      [] {
        KeySpec k = string_list_key("label_column",
                                    "name or index of the target column, or a list of them (-1: the last)");
        k.def = YAML::Node(std::vector<std::string>{"-1"});
        return k;
      }(),
      string_list_key("feature_columns",
                      "names or indexes of the feature columns, in order (default: all others)"),
      string_list_key("ignore_columns", "names or indexes of columns that are neither features nor targets"),
      string_list_key("categorical_columns",
                      "feature columns read as categories (one-hot) even where numeric"),
      string_key("delimiter", ",", "the column separator: one character, or whitespace (runs of blanks)"),
      integer_key("skip_rows", 0, 0, int64_t(1) << 40, "records skipped before the header or the first row"),
      string_key("targets", "", "a second CSV holding the target columns, row for row"),
      string_key("label_delimiter", "",
                 "one label column holds a list of class names (multi-label), e.g. '|'"),
      choice_key("normalize", "none", {"none", "standardize"},
                 "standardize: (x - mean) / std per numeric feature, statistics from the training data"),
      mapping_key("missing", "fill missing cells: {fill: mean | zero | a number} (default: an error)"),
      [] {
        KeySpec k =
            integer_key("columns", 0, 1, int64_t(1) << 40, "learned: the training file's column count");
        k.def = YAML::Node();  // absent until a run records it
        return k;
      }(),
      mapping_key("categories", "learned: the categories of each categorical column"),
      mapping_key("standardize", "learned: {mean: [...], std: [...]} per numeric feature"),
      integer_key("limit", 0, 0, int64_t(1) << 40, "keep the first N samples (0: all)"),
  };
}

namespace {

MissingFill fill_of(const std::string& s, double* value) {
  if (s == "mean") return MissingFill::mean;
  if (s == "zero") return MissingFill::zero;
  const char* end = s.data() + s.size();
  const auto r = std::from_chars(s.data(), end, *value);
  return !s.empty() && r.ec == std::errc() && r.ptr == end ? MissingFill::value : MissingFill::none;
}

}  // namespace

void check_csv_section(const KeyValues& s, const YAML::Node& section, const std::string& path,
                       const std::string& file) {
  const std::string d = s.string("delimiter");
  if (d.size() != 1 && d != "whitespace")
    s.fail("delimiter", "must be one character or 'whitespace', found '" + d + "'");
  if (d == "\"" || d == "\n" || d == "\r") s.fail("delimiter", "cannot be a quote or a line end");
  if (s.has("missing")) {
    NodeReader m(section["missing"], path + ".missing", file);
    m.accept({"fill", "values"});
    m.finish();  // a misspelt key before a missing one
    if (!m.has("fill")) m.fail("fill", "is required: mean, zero or a number, e.g. missing: {fill: mean}");
    const std::string f = m.string("fill", "");
    double v = 0;
    if (fill_of(f, &v) == MissingFill::none)
      m.fail("fill", "expected mean, zero or a number, found '" + f + "'");
    m.number_list("values", {}, -3.4e38, 3.4e38);
    m.finish();
  }
  if (s.has("standardize")) {
    NodeReader m(section["standardize"], path + ".standardize", file);
    const size_t n = m.number_list("mean", {}, -3.4e38, 3.4e38).size();
    if (m.number_list("std", {}, 1e-30, 3.4e38).size() != n) m.fail("std", "needs one value per mean");
    m.finish();
  }
  if (s.has("categories"))
    for (const auto& kv : section["categories"]) {
      NodeReader m(section["categories"], path + ".categories", file);
      m.string_list(kv.first.Scalar(), {});
    }
}

CsvOptions csv_options(const KeyValues& s, const YAML::Node& learned_from, const SourceContext& ctx) {
  CsvOptions o;
  o.has_header = s.boolean("header");
  o.label_columns = s.strings("label_column");
  if (s.has("feature_columns")) o.feature_columns = s.strings("feature_columns");
  if (s.has("ignore_columns")) o.ignore_columns = s.strings("ignore_columns");
  if (s.has("categorical_columns")) o.categorical_columns = s.strings("categorical_columns");
  const std::string d = s.string("delimiter");
  o.whitespace = d == "whitespace";
  o.delimiter = o.whitespace ? ' ' : d[0];
  o.skip_rows = s.integer("skip_rows");
  if (s.has("targets")) o.targets_path = s.string("targets");
  if (s.has("label_delimiter")) o.label_delimiter = s.string("label_delimiter");
  o.standardize = s.string("normalize") == "standardize";
  if (s.has("missing")) o.fill = fill_of(s.resolved()["missing"]["fill"].Scalar(), &o.fill_value);
  o.target = ctx.target;
  o.num_classes = ctx.num_classes;
  o.class_names = ctx.class_names;
  if (ctx.split) {
    // The split that session.cc applies after loading, replayed on the targets alone: the rows
    // past `limit` are dropped first, and class labels become values as the loss takes them (a
    // binary value column stratifies as its labels did; one-hot rows do not stratify).
    const SplitOptions split = *ctx.split;
    const TargetLayout target = ctx.target;
    const int64_t limit = s.integer("limit");
    const std::string path = s.string("path");
    o.statistics_rows = [split, target, limit, path](const Dataset& d) {
      Dataset t;
      t.name = d.name;
      t.labels = d.labels;
      t.targets = d.targets;
      t.target_width = d.target_width;
      t.num_classes = d.num_classes;
      const int64_t n = t.size(), kept = limit > 0 && limit < n ? limit : n;
      if (t.target_width > 0)
        t.targets.resize(size_t(kept * t.target_width));
      else
        t.labels.resize(size_t(kept));
      if (target.kind == TargetKind::values) to_value_targets(t, target, path, /*warn=*/false);
      const std::vector<bool> validation = validation_mask(t, split);
      std::vector<bool> training(size_t(n), false);
      for (int64_t i = 0; i < kept; ++i) training[size_t(i)] = !validation[size_t(i)];
      return training;
    };
  }
  // The training source's learned keys (a run's config.yaml), when it has them.
  const YAML::Node& l = learned_from;
  if (l && l.IsMap() && l["columns"] && l["columns"].as<int64_t>() > 0) {
    CsvEncoding& e = o.encoding;
    e.known = true;
    e.columns = l["columns"].as<int64_t>();
    if (l["categories"] && l["categories"].IsMap())
      for (const auto& kv : l["categories"])
        e.categories.emplace_back(kv.first.Scalar(), kv.second.as<std::vector<std::string>>());
    if (l["standardize"] && l["standardize"].IsMap()) {
      e.mean = l["standardize"]["mean"].as<std::vector<double>>();
      e.std = l["standardize"]["std"].as<std::vector<double>>();
    }
    if (l["missing"] && l["missing"]["values"]) e.fill = l["missing"]["values"].as<std::vector<double>>();
  }
  return o;
}

YAML::Node csv_learned_keys(const CsvEncoding& e, const CsvOptions& o) {
  YAML::Node n(YAML::NodeType::Map);
  n["columns"] = e.columns;
  if (!e.categories.empty()) {
    YAML::Node c(YAML::NodeType::Map);
    for (const auto& [key, cats] : e.categories) {
      c[key] = string_sequence(cats);  // "1.50" stays "1.50" through dump_yaml
      c[key].SetStyle(YAML::EmitterStyle::Flow);
    }
    n["categories"] = c;
  }
  if (o.standardize) {
    n["standardize"]["mean"] = e.mean;
    n["standardize"]["std"] = e.std;
    n["standardize"]["mean"].SetStyle(YAML::EmitterStyle::Flow);
    n["standardize"]["std"].SetStyle(YAML::EmitterStyle::Flow);
  }
  if (o.fill != MissingFill::none) {
    n["missing"]["fill"] = o.fill == MissingFill::mean   ? std::string("mean")
                           : o.fill == MissingFill::zero ? std::string("zero")
                                                         : YAML::Node(o.fill_value).Scalar();
    n["missing"]["values"] = e.fill;
    n["missing"]["values"].SetStyle(YAML::EmitterStyle::Flow);
  }
  return n;
}

}  // namespace trainer

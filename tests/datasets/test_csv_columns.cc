// read_csv on tables as people have them: columns chosen by name or index, string labels (given
// or discovered), float and multi-hot targets, one-hot categories, missing values, standardize,
// the encoding learned once and reused, the layouts of scikit-learn's files (a first line of
// counts, whitespace, gzip, targets in a second file), and records cut by the 4 MiB chunks.
#include <catch2/catch.hpp>
#include <cmath>

#include "datasets/csv_reader.h"
#include "datasets/csv_records.h"
#include "datasets/file_bytes.h"
#include "lib/core/error.h"
#include "tests/datasets/temp_files.h"

using namespace trainer;
using namespace trainer::dataset_tests;
using Catch::Contains;

namespace {

CsvOptions header_label(const std::string& label) {
  CsvOptions o;
  o.has_header = true;
  o.label_columns = {label};
  return o;
}

CsvOptions values_of(std::vector<std::string> labels) {
  CsvOptions o;
  o.has_header = true;
  o.label_columns = std::move(labels);
  o.target = TargetLayout{TargetKind::values, 0};
  return o;
}

const char* kIris =
    "sepal_length,sepal_width,species\n"
    "5.1,3.5,setosa\n"
    "7.0,3.2,versicolor\n"
    "6.3,3.3,virginica\n"
    "4.9,3.0,setosa\n";

}  // namespace

TEST_CASE("string labels are discovered as sorted class names and become their indexes", "[datasets][csv]") {
  TempDir dir;
  write_text(dir.path("iris.csv"), kIris);
  const Dataset d = read_csv(dir.path("iris.csv"), header_label("species"));
  REQUIRE(d.class_names == std::vector<std::string>{"setosa", "versicolor", "virginica"});
  REQUIRE(d.labels == std::vector<int32_t>{0, 1, 2, 0});
  REQUIRE(d.num_classes == 3);
  REQUIRE(d.f32 == std::vector<float>{5.1f, 3.5f, 7.0f, 3.2f, 6.3f, 3.3f, 4.9f, 3.0f});
}

TEST_CASE("string labels map through given class_names; an unseen label names file:line and the value",
          "[datasets][csv]") {
  TempDir dir;
  write_text(dir.path("iris.csv"), kIris);
  CsvOptions o = header_label("species");
  o.class_names = {"virginica", "versicolor", "setosa"};  // the given order wins
  REQUIRE(read_csv(dir.path("iris.csv"), o).labels == std::vector<int32_t>{2, 1, 0, 2});
  o.class_names = {"setosa", "versicolor"};
  REQUIRE_THROWS_WITH(
      read_csv(dir.path("iris.csv"), o),
      Contains(dir.path("iris.csv") + ":4: column 3 ('species') (label): 'virginica' is not one "
                                      "of the class names (setosa, versicolor) nor a class index 0..1"));
}

TEST_CASE("numeric labels with given class names are class indexes (iris.csv's first line names them)",
          "[datasets][csv]") {
  TempDir dir;
  write_text(dir.path("iris.csv"),
             "150,4,setosa,versicolor,virginica\n5.1,3.5,1.4,0.2,0\n6.3,3.3,6.0,2.5,2\n");
  CsvOptions o;
  o.skip_rows = 1;
  o.class_names = {"setosa", "versicolor", "virginica"};
  const Dataset d = read_csv(dir.path("iris.csv"), o);
  REQUIRE(d.labels == std::vector<int32_t>{0, 2});
  REQUIRE(d.sample_shape == Shape{4});
  o.skip_rows = 0;  // the count line read as a row: its names make columns 3 and 4 look categorical
  REQUIRE_THROWS_WITH(
      read_csv(dir.path("iris.csv"), o),
      Contains(":2: column 3: found the number '1.4' in a column whose first value, 'setosa' on "
               "line 1, is not a number"));
}

TEST_CASE("a string label where the first label was a number is an error that says how to name classes",
          "[datasets][csv]") {
  TempDir dir;
  write_text(dir.path("l.csv"), "1,0\n2,cat\n");
  CsvOptions o;
  REQUIRE_THROWS_WITH(read_csv(dir.path("l.csv"), o),
                      Contains(":2: column 2 (label): expected an integer class index >= 0, found 'cat'") &&
                          Contains("data.class_names"));
}

TEST_CASE("feature_columns choose and order the features; ignore_columns drop columns", "[datasets][csv]") {
  TempDir dir;
  write_text(dir.path("t.csv"), "id,a,b,c,y\n7,1,2,3,0\n8,4,5,6,1\n");
  CsvOptions o = header_label("y");
  o.feature_columns = {"c", "1"};  // a name and an index
  Dataset d = read_csv(dir.path("t.csv"), o);
  REQUIRE(d.f32 == std::vector<float>{3, 1, 6, 4});
  o.feature_columns.clear();
  o.ignore_columns = {"id", "-3"};  // -3: b
  d = read_csv(dir.path("t.csv"), o);
  REQUIRE(d.f32 == std::vector<float>{1, 3, 4, 6});
  o.feature_columns = {"y"};
  REQUIRE_THROWS_WITH(read_csv(dir.path("t.csv"), o),
                      Contains("feature_columns 'y' is column 5 ('y'), which is also a "
                               "label or ignored column"));
  o.feature_columns = {"d"};
  REQUIRE_THROWS_WITH(read_csv(dir.path("t.csv"), o),
                      Contains("feature_columns 'd' is neither a header name nor a column index"));
}

TEST_CASE("values targets: one or several float columns (multi-output regression)", "[datasets][csv]") {
  TempDir dir;
  write_text(dir.path("r.csv"), "x,y1,y2\n1,0.5,-2\n2,1e3,3\n");
  Dataset d = read_csv(dir.path("r.csv"), values_of({"y1", "y2"}));
  REQUIRE(d.target_width == 2);
  REQUIRE(d.targets == std::vector<float>{0.5f, -2.f, 1000.f, 3.f});
  REQUIRE(d.labels.empty());
  REQUIRE(d.size() == 2);
  REQUIRE(d.f32 == std::vector<float>{1, 2});
  d = read_csv(dir.path("r.csv"), values_of({"y2"}));
  REQUIRE(d.target_width == 1);
  REQUIRE(d.f32 == std::vector<float>{1, 0.5f, 2, 1000.f});
}

TEST_CASE("a string target for a loss that takes numbers is an error naming file:line and column",
          "[datasets][csv]") {
  TempDir dir;
  write_text(dir.path("r.csv"), "x,y\n1,0.5\n2,high\n");
  REQUIRE_THROWS_WITH(
      read_csv(dir.path("r.csv"), values_of({"y"})),
      Contains(dir.path("r.csv") + ":3: column 2 ('y') (target): expected a number (the loss takes "
                                   "float targets), found 'high'"));
  // Binary labels written as names: their index in class_names.
  write_text(dir.path("b.csv"), "x,y\n1,benign\n2,malignant\n");
  CsvOptions o = values_of({"y"});
  o.class_names = {"malignant", "benign"};
  REQUIRE(read_csv(dir.path("b.csv"), o).targets == std::vector<float>{1, 0});
}

TEST_CASE("multi-label: multi-hot 0/1 columns, or one delimited list column over class_names",
          "[datasets][csv]") {
  TempDir dir;
  write_text(dir.path("m.csv"), "x,tags\n1,b|a\n2,\n3,c\n");
  CsvOptions o = values_of({"tags"});
  o.label_delimiter = "|";
  Dataset d = read_csv(dir.path("m.csv"), o);  // discovered, sorted
  REQUIRE(d.class_names == std::vector<std::string>{"a", "b", "c"});
  REQUIRE(d.target_width == 3);
  REQUIRE(d.targets == std::vector<float>{1, 1, 0, 0, 0, 0, 0, 0, 1});
  o.class_names = {"c", "b", "a", "d"};
  d = read_csv(dir.path("m.csv"), o);
  REQUIRE(d.target_width == 4);
  REQUIRE(d.targets == std::vector<float>{0, 1, 1, 0, 0, 0, 0, 0, 1, 0, 0, 0});
  o.class_names = {"a", "b"};
  REQUIRE_THROWS_WITH(
      read_csv(dir.path("m.csv"), o),
      Contains(dir.path("m.csv") + ":4: column 2 ('tags') (labels): unknown label 'c' in 'c'; "
                                   "class_names: a, b"));
  write_text(dir.path("h.csv"), "x,a,b\n1,1,0\n2,1,1\n");
  d = read_csv(dir.path("h.csv"), values_of({"a", "b"}));
  REQUIRE(d.targets == std::vector<float>{1, 0, 1, 1});
  CsvOptions classes = header_label("tags");
  classes.label_delimiter = "|";
  REQUIRE_THROWS_WITH(read_csv(dir.path("m.csv"), classes),
                      Contains("label_delimiter needs one label column and a "
                               "loss that takes value targets"));
}

TEST_CASE("string feature columns are one-hot encoded over their sorted categories, learned once",
          "[datasets][csv]") {
  TempDir dir;
  write_text(dir.path("c.csv"), "size,color,y\n1,red,0\n2,blue,1\n3,green,0\n4,red,1\n");
  CsvEncoding e;
  const Dataset d = read_csv(dir.path("c.csv"), header_label("y"), &e);
  REQUIRE(d.sample_shape == Shape{4});
  REQUIRE(d.f32 == std::vector<float>{1, 0, 0, 1, 2, 1, 0, 0, 3, 0, 1, 0, 4, 0, 0, 1});
  REQUIRE(e.known);
  REQUIRE(e.columns == 3);
  REQUIRE(e.categories.size() == 1);
  REQUIRE(e.categories[0].first == "color");
  REQUIRE(e.categories[0].second == std::vector<std::string>{"blue", "green", "red"});

  // Another file with the training encoding: same columns, an unseen category is an error.
  write_text(dir.path("v.csv"), "size,color,y\n5,green,1\n6,purple,0\n");
  CsvOptions o = header_label("y");
  o.encoding = e;
  REQUIRE_THROWS_WITH(
      read_csv(dir.path("v.csv"), o),
      Contains(dir.path("v.csv") + ":3: column 2 ('color'): unseen category 'purple' (the training "
                                   "data's categories: blue, green, red)"));
  write_text(dir.path("v.csv"), "size,color,y\n5,green,1\n");
  REQUIRE(read_csv(dir.path("v.csv"), o).f32 == std::vector<float>{5, 0, 1, 0});
  // categorical_columns: numbers read as categories.
  o = header_label("y");
  o.categorical_columns = {"size"};
  REQUIRE(read_csv(dir.path("c.csv"), o).sample_shape == Shape{7});
}

TEST_CASE("a number in a column whose first value was a string asks whether that line is a header",
          "[datasets][csv]") {
  TempDir dir;
  write_text(dir.path("h.csv"), "width,y\n1.5,0\n");
  CsvOptions o;  // header: false
  REQUIRE_THROWS_WITH(
      read_csv(dir.path("h.csv"), o),
      Contains(":2: column 1: found the number '1.5' in a column whose first value, 'width' on line "
               "1, is not a number (is that line a header? set header: true"));
}

TEST_CASE("missing values are an error naming file:line, column name and index, unless filled",
          "[datasets][csv]") {
  TempDir dir;
  write_text(dir.path("m.csv"), "a,b,y\n1,2,0\n3,NA,1\n5,,0\nN/A,8,1\n");
  CsvOptions o = header_label("y");
  REQUIRE_THROWS_WITH(
      read_csv(dir.path("m.csv"), o),
      Contains(dir.path("m.csv") + ":3: column 2 ('b'): missing value ('NA'); set missing: {fill: "
                                   "mean|zero|VALUE}"));
  o.fill = MissingFill::mean;
  CsvEncoding e;
  Dataset d = read_csv(dir.path("m.csv"), o, &e);
  REQUIRE(d.f32 == std::vector<float>{1, 2, 3, 5, 5, 5, 3, 8});
  REQUIRE(e.fill == std::vector<double>{3, 5});
  o.fill = MissingFill::zero;
  REQUIRE(read_csv(dir.path("m.csv"), o).f32 == std::vector<float>{1, 2, 3, 0, 5, 0, 0, 8});
  o.fill = MissingFill::value;
  o.fill_value = -1;
  REQUIRE(read_csv(dir.path("m.csv"), o).f32 == std::vector<float>{1, 2, 3, -1, 5, -1, -1, 8});
  // Mean fill with the training values, on other data.
  o.fill = MissingFill::mean;
  o.encoding = e;
  write_text(dir.path("v.csv"), "a,b,y\nnan,100,0\n");
  REQUIRE(read_csv(dir.path("v.csv"), o).f32 == std::vector<float>{3, 100});
  // Targets are never filled.
  write_text(dir.path("t.csv"), "a,b,y\n1,2,\n");
  REQUIRE_THROWS_WITH(read_csv(dir.path("t.csv"), o),
                      Contains(":2: column 3 ('y') (target): missing value (an empty cell)"));
  // A missing category with fill: an all-zero one-hot row.
  write_text(dir.path("c.csv"), "a,c,y\n1,x,0\n2,,1\n3,y,0\n");
  o = header_label("y");
  o.fill = MissingFill::zero;
  REQUIRE(read_csv(dir.path("c.csv"), o).f32 == std::vector<float>{1, 1, 0, 2, 0, 0, 3, 0, 1});
}

TEST_CASE("standardize uses the training statistics, from the training part of a split", "[datasets][csv]") {
  TempDir dir;
  write_text(dir.path("s.csv"), "a,c,b,y\n1,u,10,0\n3,v,10,1\n100,u,0,0\n");
  CsvOptions o = header_label("y");
  o.standardize = true;
  o.statistics_rows = [](const Dataset& d) {  // the targets are read first
    REQUIRE(d.labels == std::vector<int32_t>{0, 1, 0});
    return std::vector<bool>{true, true, false};  // the first two rows
  };
  CsvEncoding e;
  const Dataset d = read_csv(dir.path("s.csv"), o, &e);
  REQUIRE(e.mean == std::vector<double>{2, 10});
  REQUIRE(e.std == std::vector<double>{1, 1});  // b's std is 0: counted as 1
  // Categories are not standardized.
  REQUIRE(d.f32 == std::vector<float>{-1, 1, 0, 0, 1, 0, 1, 0, 98, 1, 0, -10});
  o.encoding = e;
  o.statistics_rows = nullptr;
  write_text(dir.path("v.csv"), "a,c,b,y\n4,v,12,0\n");
  REQUIRE(read_csv(dir.path("v.csv"), o).f32 == std::vector<float>{2, 0, 1, 2});
}

TEST_CASE("predict inputs: label columns optional, no learning without a recorded encoding",
          "[datasets][csv]") {
  TempDir dir;
  write_text(dir.path("c.csv"), "size,color,y\n1,red,a\n2,blue,b\n");
  CsvEncoding e;
  read_csv(dir.path("c.csv"), header_label("y"), &e);
  CsvOptions o = header_label("y");
  o.labels_optional = true;
  o.learn = false;
  o.encoding = e;
  write_text(dir.path("p.csv"), "size,color\n3,red\n");
  Dataset d = read_csv(dir.path("p.csv"), o);
  REQUIRE(d.f32 == std::vector<float>{3, 0, 1});
  write_text(dir.path("p.csv"), "size,color,y\n3,blue,zzz\n");  // labels present: not read
  d = read_csv(dir.path("p.csv"), o);
  REQUIRE(d.f32 == std::vector<float>{3, 1, 0});
  REQUIRE(d.labels == std::vector<int32_t>{0});
  // No header: the labels are absent when the file has that many fewer columns than training.
  write_text(dir.path("n.csv"), "1,7,0\n2,8,1\n");
  CsvOptions n;
  n.label_columns = {"0"};
  read_csv(dir.path("n.csv"), n, &e);
  n.labels_optional = true;
  n.learn = false;
  n.encoding = e;
  write_text(dir.path("q.csv"), "7,0\n");
  REQUIRE(read_csv(dir.path("q.csv"), n).f32 == std::vector<float>{7, 0});
  write_text(dir.path("q.csv"), "1,7,0\n");
  REQUIRE(read_csv(dir.path("q.csv"), n).f32 == std::vector<float>{7, 0});
  // Standardize without recorded statistics cannot be predicted.
  o.encoding = CsvEncoding{};
  o.standardize = true;
  REQUIRE_THROWS_WITH(read_csv(dir.path("p.csv"), o),
                      Contains("standardize needs the training data's statistics"));
}

TEST_CASE("scikit-learn's layouts: whitespace-separated gzip features with targets in a second file",
          "[datasets][csv]") {
  TempDir dir;
  write_gz(dir.path("x.csv.gz"), to_bytes("59 2 32.1\n48  1\t21.6 \n"));
  write_gz(dir.path("y.csv.gz"), to_bytes("1.51e+02\n7.5e+01\n"));
  CsvOptions o;
  o.whitespace = true;
  o.targets_path = dir.path("y.csv.gz");
  o.target = TargetLayout{TargetKind::values, 0};
  const Dataset d = read_csv(dir.path("x.csv.gz"), o);
  REQUIRE(d.f32 == std::vector<float>{59, 2, 32.1f, 48, 1, 21.6f});
  REQUIRE(d.targets == std::vector<float>{151, 75});
  write_text(dir.path("y.csv"), "1\n");
  o.targets_path = dir.path("y.csv");
  REQUIRE_THROWS_WITH(
      read_csv(dir.path("x.csv.gz"), o),
      Contains(dir.path("x.csv.gz") + ":2: this row has no target row: '" + dir.path("y.csv") + "' ends"));
  write_text(dir.path("y.csv"), "1\n2\n3\n");
  REQUIRE_THROWS_WITH(read_csv(dir.path("x.csv.gz"), o),
                      Contains(dir.path("y.csv") + ":3: a target row beyond"));
}

TEST_CASE("a ragged row is an error naming its line, in either file", "[datasets][csv]") {
  TempDir dir;
  write_text(dir.path("x.csv"), "1 2\n3 4 5\n");
  CsvOptions o;
  o.whitespace = true;
  o.label_columns.clear();
  REQUIRE_THROWS_WITH(read_csv(dir.path("x.csv"), o),
                      Contains(dir.path("x.csv") + ":2: expected 2 columns (as on line 1), found 3"));
}

TEST_CASE("records cut by the 4 MiB chunk boundary parse whole, and lines stay counted", "[datasets][csv]") {
  TempDir dir;
  // ~5.6 MB: the boundary falls inside some record; a quoted header with a newline counts two lines.
  std::string text = "\"a\nb\",c,y\n";
  const int rows = 400000;
  for (int i = 0; i < rows; ++i) text += std::to_string(i) + ",0.25," + std::to_string(i % 3) + "\n";
  text += "1,2\n";  // ragged, on line rows + 3
  write_text(dir.path("big.csv"), text);
  CsvOptions o = header_label("y");
  REQUIRE_THROWS_WITH(read_csv(dir.path("big.csv"), o),
                      Contains(":" + std::to_string(rows + 3) + ": expected 3 columns"));
  text.resize(text.size() - 4);
  write_text(dir.path("big.csv"), text);
  const Dataset d = read_csv(dir.path("big.csv"), o);
  REQUIRE(d.size() == rows);
  for (int i = 0; i < rows; i += 9973) {
    REQUIRE(d.f32[size_t(2 * i)] == float(i));
    REQUIRE(d.labels[size_t(i)] == i % 3);
  }
  // The same through a quoted field that spans the boundary.
  CsvRecords whole(text, ',', "mem");
  CsvRecords streamed(std::make_unique<DataFile>(dir.path("big.csv")), ',');
  std::vector<std::string_view> a, b;
  size_t n = 0;
  while (whole.next(&a)) {
    REQUIRE(streamed.next(&b));
    REQUIRE(a == b);
    REQUIRE(whole.line() == streamed.line());
    ++n;
  }
  REQUIRE_FALSE(streamed.next(&b));
  REQUIRE(n == size_t(rows) + 1);
}

// read_csv: label column by name / index / negative index, delimiters and line ends, and the
// file:line:column messages for bad cells and ragged rows.
#include <catch2/catch.hpp>

#include "datasets/csv_reader.h"
#include "lib/core/error.h"
#include "tests/datasets/temp_files.h"

using namespace trainer;
using namespace trainer::dataset_tests;

namespace {

CsvOptions opts(bool header, const std::string& label, int classes = 3, char delimiter = ',') {
  CsvOptions o;
  o.has_header = header;
  o.label_columns = {label};
  o.num_classes = classes;
  o.delimiter = delimiter;
  return o;
}

}  // namespace

TEST_CASE("read_csv takes the label column by header name and keeps the other columns in order",
          "[datasets]") {
  TempDir dir;
  write_text(dir.path("iris.csv"), "a,species,b\n1.5,2,-3\n4e2,0,+0.25\n");
  const Dataset d = read_csv(dir.path("iris.csv"), opts(true, "species"));
  REQUIRE(d.dtype == SampleDtype::f32);
  REQUIRE(d.sample_shape == Shape{2});
  REQUIRE(d.f32 == std::vector<float>{1.5f, -3.f, 400.f, 0.25f});
  REQUIRE(d.labels == std::vector<int32_t>{2, 0});
  REQUIRE(d.num_classes == 3);
  REQUIRE(d.name == dir.path("iris.csv"));
}

TEST_CASE(
    "read_csv without a header uses the last column by default and counts negative indexes from the end",
    "[datasets]") {
  TempDir dir;
  write_text(dir.path("d.csv"), "1,2,0\n3,4,1\n");
  CsvOptions o;
  o.num_classes = 2;
  const Dataset last = read_csv(dir.path("d.csv"), o);
  REQUIRE(last.f32 == std::vector<float>{1, 2, 3, 4});
  REQUIRE(last.labels == std::vector<int32_t>{0, 1});
  const Dataset first = read_csv(dir.path("d.csv"), opts(false, "-3", 5));
  REQUIRE(first.labels == std::vector<int32_t>{1, 3});
  REQUIRE(first.f32 == std::vector<float>{2, 0, 4, 1});
  REQUIRE(read_csv(dir.path("d.csv"), opts(false, "0", 5)).labels == first.labels);
}

TEST_CASE("read_csv with a header also accepts a column index", "[datasets]") {
  TempDir dir;
  write_text(dir.path("d.csv"), "x,y,label\n1,2,1\n");
  REQUIRE(read_csv(dir.path("d.csv"), opts(true, "1")).labels == std::vector<int32_t>{2});
}

TEST_CASE("read_csv handles other delimiters, CRLF, blank lines, a BOM, quotes and integral float labels",
          "[datasets]") {
  TempDir dir;
  write_text(dir.path("d.csv"), "\xEF\xBB\xBF\"f1\"; \"cls\"\r\n\r\n 0.5 ; 1.0\r\n\n-1;2\r\n\n");
  const Dataset d = read_csv(dir.path("d.csv"), opts(true, "cls", 3, ';'));
  REQUIRE(d.f32 == std::vector<float>{0.5f, -1.f});
  REQUIRE(d.labels == std::vector<int32_t>{1, 2});
}

TEST_CASE("read_csv reads a gzip-compressed file", "[datasets]") {
  TempDir dir;
  write_gz(dir.path("d.csv.gz"), to_bytes("1,2,0\n"));
  REQUIRE(read_csv(dir.path("d.csv.gz"), opts(false, "-1")).f32 == std::vector<float>{1, 2});
}

TEST_CASE("read_csv names file, line and column of a non-numeric cell", "[datasets]") {
  TempDir dir;
  const std::string path = dir.path("bad.csv");
  write_text(path, "a,b,label\n1,2,0\n\n3,abc,1\n");
  REQUIRE_THROWS_AS(read_csv(path, opts(true, "label")), DataError);
  REQUIRE_THROWS_WITH(read_csv(path, opts(true, "label")),
                      Catch::Contains(path + ":4: column 2 ('b')") && Catch::Contains("found 'abc'"));
  write_text(path, "1,,0\n");
  REQUIRE_THROWS_WITH(read_csv(path, opts(false, "-1")),
                      Catch::Contains(path + ":1: column 2") && Catch::Contains("an empty cell"));
  write_text(path, "1,nan,0\n2,1e39,0\n");
  REQUIRE_THROWS_WITH(read_csv(path, opts(false, "-1")), Catch::Contains(":1: column 2"));
  write_text(path, "1,1e39,0\n");
  REQUIRE_THROWS_WITH(read_csv(path, opts(false, "-1")), Catch::Contains("finite float32"));
}

TEST_CASE("read_csv names the line of a ragged row", "[datasets]") {
  TempDir dir;
  const std::string path = dir.path("ragged.csv");
  write_text(path, "1,2,0\n3,4,1\n5,1\n");
  REQUIRE_THROWS_WITH(read_csv(path, opts(false, "-1")),
                      Catch::Contains(path + ":3: expected 3 columns (as on line 1), found 2"));
}

TEST_CASE("read_csv rejects labels that are not integers below num_classes", "[datasets]") {
  TempDir dir;
  const std::string path = dir.path("l.csv");
  write_text(path, "1,0\n2,3\n");
  REQUIRE_THROWS_WITH(read_csv(path, opts(false, "-1")),
                      Catch::Contains(path + ":2: column 2 (label): expected an integer in 0..2, found '3'"));
  write_text(path, "1,1.5\n");
  REQUIRE_THROWS_WITH(read_csv(path, opts(false, "-1")), Catch::Contains("found '1.5'"));
  write_text(path, "1,-1\n");
  REQUIRE_THROWS_WITH(read_csv(path, opts(false, "-1")), Catch::Contains("found '-1'"));
}

TEST_CASE("read_csv explains an unknown or out-of-range label column", "[datasets]") {
  TempDir dir;
  const std::string path = dir.path("c.csv");
  write_text(path, "x,y\n1,0\n");
  REQUIRE_THROWS_WITH(
      read_csv(path, opts(true, "target")),
      Catch::Contains("neither a header name nor a column index") && Catch::Contains("'x' 'y'"));
  REQUIRE_THROWS_WITH(read_csv(path, opts(true, "2")),
                      Catch::Contains("out of range for 2 columns (allowed -2..1)"));
  REQUIRE_THROWS_WITH(read_csv(path, opts(false, "target")), Catch::Contains("must be a column index"));
}

TEST_CASE("read_csv rejects empty files, header-only files and single-column files", "[datasets]") {
  TempDir dir;
  const std::string path = dir.path("e.csv");
  write_text(path, "");
  REQUIRE_THROWS_WITH(read_csv(path, opts(false, "-1")), Catch::Contains("has no data rows"));
  write_text(path, "a,b\n\n");
  REQUIRE_THROWS_WITH(read_csv(path, opts(true, "b")), Catch::Contains("has no data rows"));
  write_text(path, "1;2;0\n");
  REQUIRE_THROWS_WITH(read_csv(path, opts(false, "-1")),
                      Catch::Contains(":1: found 1 column") && Catch::Contains("delimiter ','"));
}

TEST_CASE("read_csv reads what pandas writes: quoted header names, quoted numbers, CRLF", "[datasets]") {
  TempDir dir;
  // df.to_csv(index=False, quoting=csv.QUOTE_NONNUMERIC, lineterminator="\r\n") with a header cell
  // holding a comma, a quote and a line end.
  write_text(dir.path("p.csv"),
             "\"width, cm\",\"say \"\"x\"\"\",\"the\r\nlabel\"\r\n1.5,\"2\",1\r\n-3,4e1,0\r\n");
  const Dataset d = read_csv(dir.path("p.csv"), opts(true, "the\r\nlabel", 2));
  REQUIRE(d.f32 == std::vector<float>{1.5f, 2.f, -3.f, 40.f});
  REQUIRE(d.labels == std::vector<int32_t>{1, 0});
  write_text(dir.path("q.csv"), "\"a,b\",c,label\n1,2,0\n1,\"x\",0\n");
  REQUIRE_THROWS_WITH(read_csv(dir.path("q.csv"), opts(true, "label")),
                      Catch::Contains(":3: column 2 ('c'): expected a finite float32 number, found 'x'"));
}

TEST_CASE("read_csv names the right line after a record that spans lines", "[datasets]") {
  TempDir dir;
  const std::string path = dir.path("m.csv");
  write_text(path, "\"long\nheader\",label\n1,0\n2\n");
  REQUIRE_THROWS_WITH(read_csv(path, opts(true, "label")),
                      Catch::Contains(path + ":4: expected 2 columns (as on line 1), found 1"));
}

TEST_CASE("read_csv without labels reads every column as a feature and detects a header", "[datasets]") {
  TempDir dir;
  CsvOptions o;
  o.label_columns.clear();
  o.detect_header = true;
  write_text(dir.path("x.csv"), "\"f,1\",f2\n1,2\n3,4\n");
  Dataset d = read_csv(dir.path("x.csv"), o);
  REQUIRE(d.sample_shape == Shape{2});
  REQUIRE(d.f32 == std::vector<float>{1, 2, 3, 4});
  REQUIRE(d.labels == std::vector<int32_t>{0, 0});
  write_text(dir.path("x.csv"), "5\n6\n");  // one column, no header
  d = read_csv(dir.path("x.csv"), o);
  REQUIRE(d.f32 == std::vector<float>{5, 6});
  write_text(dir.path("x.csv"), "1,2\n3,x\n");  // only the first record may be a header
  REQUIRE_THROWS_WITH(read_csv(dir.path("x.csv"), o), Catch::Contains(":2: column 2: expected a finite"));
}

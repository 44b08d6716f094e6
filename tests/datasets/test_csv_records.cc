// CsvRecords: RFC 4180 records and fields as pandas' to_csv (Python's csv module, QUOTE_MINIMAL or
// QUOTE_ALL, "\n" or "\r\n" line ends) writes them, and the line numbers of records and errors.
#include <catch2/catch.hpp>

#include "datasets/csv_records.h"
#include "lib/core/error.h"

using namespace trainer;

namespace {

// Every record of `text` as strings, each prefixed by its line: {"1|a|b", "3|c"}.
std::vector<std::string> records_of(const std::string& text, char delimiter = ',') {
  CsvRecords r(text, delimiter, "t.csv");
  std::vector<std::string_view> fields;
  std::vector<std::string> out;
  while (r.next(&fields)) {
    std::string s = std::to_string(r.line());
    for (std::string_view f : fields) s += "|" + std::string(f);
    out.push_back(s);
  }
  return out;
}

using Rows = std::vector<std::string>;

}  // namespace

TEST_CASE("CsvRecords splits plain records on LF and CRLF, with or without a final line end", "[datasets]") {
  REQUIRE(records_of("a,b\n1,2\n") == Rows{"1|a|b", "2|1|2"});
  REQUIRE(records_of("a,b\r\n1,2\r\n") == Rows{"1|a|b", "2|1|2"});
  REQUIRE(records_of("a,b\r\n1,2") == Rows{"1|a|b", "2|1|2"});
  REQUIRE(records_of("1,,3\n") == Rows{"1|1||3"});
  REQUIRE(records_of("1,2,\n") == Rows{"1|1|2|"});
}

TEST_CASE("CsvRecords reads quoted fields with delimiters, doubled quotes and line ends inside",
          "[datasets]") {
  // pandas: pd.DataFrame({"name, full": ['say "hi"', "two\nlines"], "x": [1, 2]}).to_csv(index=False)
  const std::string pandas = "\"name, full\",x\n\"say \"\"hi\"\"\",1\n\"two\nlines\",2\n";
  REQUIRE(records_of(pandas) == Rows{"1|name, full|x", "2|say \"hi\"|1", "3|two\nlines|2"});
  // The same with lineterminator="\r\n" (pandas on Windows): the "\r\n" inside quotes is data.
  const std::string crlf = "\"name, full\",x\r\n\"say \"\"hi\"\"\",1\r\n\"two\r\nlines\",2\r\n";
  REQUIRE(records_of(crlf) == Rows{"1|name, full|x", "2|say \"hi\"|1", "3|two\r\nlines|2"});
  // QUOTE_ALL: every field quoted, numbers too; "" is an empty field.
  REQUIRE(records_of("\"1.5\",\"\",\"\"\"\"\n") == Rows{"1|1.5||\""});
}

TEST_CASE("CsvRecords counts the lines inside quoted fields in later records' line numbers", "[datasets]") {
  REQUIRE(records_of("\"a\nb\nc\",1\n\n2,3\n") == Rows{"1|a\nb\nc|1", "5|2|3"});
}

TEST_CASE("CsvRecords skips blank lines and trims blanks around fields, never the delimiter", "[datasets]") {
  REQUIRE(records_of("\n  \r\n1 , \"x y\" ,2\n\t\n") == Rows{"3|1|x y|2"});
  REQUIRE(records_of("1 2  3\n", ' ') == Rows{"1|1|2||3"});
  REQUIRE(records_of("1\t\"a\tb\"\t3\n", '\t') == Rows{"1|1|a\tb|3"});
  REQUIRE(records_of("\"\"\n") == Rows{"1|"});  // a quoted empty field is a record
  REQUIRE(records_of("\xEF\xBB\xBF"
                     "a;b\n",
                     ';') == Rows{"1|a|b"});
  REQUIRE(records_of("ab\"c,d\n") == Rows{"1|ab\"c|d"});  // a quote inside an unquoted field is kept
}

TEST_CASE("CsvRecords names the line and column of an unclosed quote and of text after a closing quote",
          "[datasets]") {
  REQUIRE_THROWS_AS(records_of("a,b\n1,\"2\n3,4\n"), DataError);
  REQUIRE_THROWS_WITH(
      records_of("a,b\n1,\"2\n3,4\n"),
      Catch::StartsWith("t.csv:2: column 2: the quoted field that starts here is never closed"));
  REQUIRE_THROWS_WITH(records_of("a,b\n\"x\ny\"z,1\n"),
                      Catch::StartsWith("t.csv:3: column 1: unexpected 'z' after the closing quote"));
}

// The conformance table covers the registry: every registered layer type has a row for every
// dtype, so a new layer fails here until it has one; every row names a registered type; every
// row with a reference has a CPU kernel and every kernelless row none.
#include <catch2/catch.hpp>
#include <set>

#include "lib/registry/registry.h"
#include "tests/conformance/conformance_table.h"

using namespace trainer;
using namespace trainer::conformance;

TEST_CASE("every registered layer type has a conformance row for every dtype", "[conformance]") {
  std::set<std::pair<std::string, DType>> rows;
  for (const Row& r : conformance_table()) {
    INFO("row " << r.type << " " << dtype_name(r.dtype));
    CHECK(rows.insert({r.type, r.dtype}).second);  // no duplicates
    CHECK_NOTHROW(Registry::global().layer(r.type, "conformance table"));
    if (r.reference) {
      CHECK(!r.cases.empty());
      CHECK(Registry::global().layer(r.type, "conformance table").kernels.count("cpu") == 1);
    } else {
      CHECK(!r.no_kernel.empty());
    }
  }
  for (const std::string& type : Registry::global().layer_types())
    for (DType dtype : kDTypes) {
      INFO("the registered layer type '" << type << "' has no " << dtype_name(dtype)
                                         << " row in tests/conformance/conformance_table.cc: add one");
      CHECK(rows.count({type, dtype}) == 1);
    }
}

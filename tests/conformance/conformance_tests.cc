#include "tests/conformance/conformance_tests.h"

#include <catch2/catch.hpp>

#include "tests/conformance/harness.h"

namespace trainer::conformance {
namespace {

class RowTest : public Catch::ITestInvoker {
 public:
  RowTest(size_t row, std::string backend_name, Backend& (*backend)(), Backend& (*cpu)())
      : row_(row), backend_name_(std::move(backend_name)), backend_(backend), cpu_(cpu) {}

  void invoke() const override {
    const Row& row = conformance_table()[row_];
    if (!row.reference) {
      run_kernelless_row(row, backend_name_);
      return;
    }
    for (size_t i = 0; i < row.cases.size(); ++i) {
      const Case& c = row.cases[i];
      DYNAMIC_SECTION("case " << i << ": " << c.yaml << " on " << c.input.batched_str() << " batch "
                              << c.batch << (c.training ? "" : " eval")) {
        run_case(row, c, backend_(), cpu_ ? &cpu_() : nullptr);
      }
    }
  }

 private:
  size_t row_;
  std::string backend_name_;
  Backend& (*backend_)();
  Backend& (*cpu_)();
};

void register_rows(const std::string& backend_name, Backend& (*backend)(), Backend& (*cpu)()) {
  const std::vector<Row>& rows = conformance_table();
  for (size_t i = 0; i < rows.size(); ++i) {
    const std::string name = "conformance: " + rows[i].type + " " + dtype_name(rows[i].dtype) + " on " +
                             backend_name + (cpu ? " against cpu" : "");
    const std::string tags = cpu ? "[conformance][gpu]" : "[conformance]";
    // Catch copies the name and tags; the invoker lives as long as the process.
    Catch::AutoReg(new RowTest(i, backend_name, backend, cpu), CATCH_INTERNAL_LINEINFO, Catch::StringRef(),
                   Catch::NameAndTags{name, tags});
  }
}

}  // namespace

void register_cpu_tests() { register_rows("cpu", cpu_backend, nullptr); }

void register_backend_tests(const std::string& backend_name, Backend& (*backend)(), Backend& (*cpu)()) {
  register_rows(backend_name, backend, cpu);
}

}  // namespace trainer::conformance

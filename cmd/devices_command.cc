// trainer devices: every GPU this process can see, and the CPU.
#include <iostream>
#include <thread>

#include "cmd/commands.h"
#include "kernels/cpu/cpu_backend.h"
#include "lib/backend/backend_registry.h"
#include "lib/core/usable_cores.h"

namespace trainer::cmd {

void add_devices_command(CLI::App& app) {
  CLI::App* sub = app.add_subcommand("devices", "List the GPUs and the CPU this build can use");
  sub->callback([]() {
    std::string why;
    auto gpus = BackendRegistry::global().list_gpus(&why);
    std::cout << "cpu: " << usable_cores() << " cores usable, oneDNN " << CpuBackend::onednn_version()
              << ", isa " << CpuBackend::cpu_isa() << "\n";
    if (gpus.empty()) {
      std::cout << "gpu: none usable (" << why << ")\n";
      return;
    }
    std::cout << "cuda: " << BackendRegistry::global().gpu_versions() << "\n";
    for (const auto& g : gpus) {
      std::cout << "gpu:" << g.index << "  " << g.name << "  compute capability " << g.cc_major << "."
                << g.cc_minor << "  memory " << (g.total_bytes >> 20) << " MiB total, "
                << (g.free_bytes >> 20) << " MiB free\n";
      if (!g.problem.empty()) std::cout << "  not usable: " << g.problem << "\n";
    }
  });
}

}  // namespace trainer::cmd

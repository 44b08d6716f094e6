#include "lib/dist/world.h"

#include <cstdio>
#include <cstdlib>
#include <memory>

#include "lib/core/error.h"

namespace trainer {

#ifdef TRAINER_HAVE_MPI
std::unique_ptr<Communicator> make_mpi_world();  // lib/dist/mpi_world.cc
void finalize_mpi_world();
std::string mpi_library_version();
#endif

std::string mpi_library() {
#ifdef TRAINER_HAVE_MPI
  return mpi_library_version();
#else
  return "";
#endif
}

void SingleProcess::abort(int exit_code) {
  std::fflush(nullptr);
  std::_Exit(exit_code);
}

namespace {
std::unique_ptr<Communicator> g_world;
bool g_mpi = false;
}  // namespace

int launcher_world_size() {
  // Open MPI's mpirun, then MPICH's Hydra and srun --mpi=pmi2 (PMI-1/2); PMIx (srun --mpi=pmix,
  // prterun) names the rank but not the size.
  for (const char* name : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE"})
    if (const char* v = std::getenv(name); v && *v) {
      const long n = std::strtol(v, nullptr, 10);
      if (n > 0) return int(n);
    }
  if (const char* v = std::getenv("PMIX_RANK"); v && *v) return -1;
  return 0;
}

Communicator& world() {
  if (g_world) return *g_world;
  const int launched = launcher_world_size();
  if (launched > 1 || launched < 0) {
#ifdef TRAINER_HAVE_MPI
    g_world = make_mpi_world();
    g_mpi = true;
#else
    throw UsageError(
        "started by an MPI launcher" +
        (launched > 1 ? " as one of " + std::to_string(launched) + " processes" : std::string()) +
        ", but this trainer was built without MPI: install libopenmpi-dev and rebuild "
        "(scripts/setup.sh), or run it without mpirun");
#endif
  }
  // mpirun -np 1 is one process: no MPI needed.
  if (!g_world) g_world = std::make_unique<SingleProcess>();
  return *g_world;
}

Communicator* joined_world() { return g_world && g_world->size() > 1 ? g_world.get() : nullptr; }

void finalize_world() {
#ifdef TRAINER_HAVE_MPI
  if (g_mpi) finalize_mpi_world();
#endif
  g_mpi = false;
}

}  // namespace trainer

// The world this process belongs to.
//
// mpirun (Open MPI), mpiexec (MPICH) and srun --mpi=pmi2|pmix say so in the environment of the
// processes they start; then, in a build with MPI, world() initializes MPI and is MPI's
// MPI_COMM_WORLD. Otherwise it is a world of one (SingleProcess). Only `trainer fit` joins a world:
// other verbs run as independent processes under mpirun.
#pragma once

#include <string>

#include "lib/dist/communicator.h"

namespace trainer {

// The world, made on the first call (MPI_Init_thread there). Throws UsageError when a launcher
// started several processes but this build has no MPI, and RuntimeError when MPI fails to start.
Communicator& world();

// The world if world() has made one with more than one rank, else null (for main's error path).
Communicator* joined_world();

// Ends MPI (MPI_Finalize) if world() started it. Every rank calls it before a normal exit.
void finalize_world();

// What the launcher's environment says: the number of processes it started (0: no launcher
// variables; -1: a launcher that does not say how many, e.g. PMIx).
int launcher_world_size();

// The MPI library this build runs with ("Open MPI v4.1.4"), "" without MPI (trainer --version).
std::string mpi_library();

}  // namespace trainer

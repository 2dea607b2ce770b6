// MpiSession::finalize's bound, under mpiexec -n 2 (finalize_bound.sh): rank 1's
// MPI_Finalize never returns, as MPICH 4.0's does now and then over UCX. This program's
// own MPI_Finalize (MPI's profiling interface) sleeps on rank 1 and passes through to
// PMPI_Finalize on the others. The job must still end, with the exit code given as the
// argument, and rank 1 must say why.
#include <mpi.h>

#include <chrono>
#include <cstdlib>
#include <thread>

#include "ccscope/collectives/world.h"

extern "C" int MPI_Finalize() {
  int rank = 0;
  PMPI_Comm_rank(MPI_COMM_WORLD, &rank);
  if (rank == 1)
    for (;;) std::this_thread::sleep_for(std::chrono::hours(1));
  return PMPI_Finalize();
}

int main(int argc, char** argv) {
  ccscope::MpiSession session(&argc, &argv);
  const int exit_code = argc > 1 ? std::atoi(argv[1]) : 0;
  return session.finalize(exit_code, std::chrono::milliseconds(1000));
}

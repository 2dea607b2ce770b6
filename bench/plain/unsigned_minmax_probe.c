/* Does this MPI library reduce unsigned integers correctly under MPI_MAX and
 * MPI_MIN? MPICH 4.0.x compares them as signed (pmodels/mpich#6083). Two or
 * more ranks: rank 0 offers the type's maximum, the others 1. Prints, on rank 0,
 * one word per type (uint8 uint32 uint64): "ok" or "signed". Exit 0 either way;
 * the integration matrix uses the answer to know which wrong results to expect. */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>

#define PROBE(ctype, mpitype, label)                                                  \
  do {                                                                                \
    ctype mine = rank == 0 ? (ctype)-1 : (ctype)1, largest = 0, smallest = 0;         \
    MPI_Allreduce(&mine, &largest, 1, mpitype, MPI_MAX, MPI_COMM_WORLD);              \
    MPI_Allreduce(&mine, &smallest, 1, mpitype, MPI_MIN, MPI_COMM_WORLD);             \
    if (rank == 0)                                                                    \
      printf("%s %s\n", label,                                                        \
             largest == (ctype)-1 && smallest == (ctype)1 ? "ok" : "signed");         \
  } while (0)

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  PROBE(uint8_t, MPI_UINT8_T, "uint8");
  PROBE(uint32_t, MPI_UINT32_T, "uint32");
  PROBE(uint64_t, MPI_UINT64_T, "uint64");
  MPI_Finalize();
  return 0;
}

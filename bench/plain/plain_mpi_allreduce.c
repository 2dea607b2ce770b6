/* The smallest honest MPI_Allreduce timing loop, for comparison with ccscope:
 * float sum, out of place, `warmup` untimed iterations, a barrier, then `iters`
 * timed back to back with MPI_Wtime. Prints, on rank 0, one line per size:
 *   size_bytes  time_us(max over ranks of mean over iterations)  algbw_GBps  busbw_GBps
 * usage: plain_mpi_allreduce SIZE_BYTES [ITERS [WARMUP]]  (several sizes: comma-separated) */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, ranks = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &ranks);
  if (argc < 2) {
    if (rank == 0) fprintf(stderr, "usage: plain_mpi_allreduce SIZES [ITERS [WARMUP]]\n");
    MPI_Finalize();
    return 2;
  }
  const int iters = argc > 2 ? atoi(argv[2]) : 20;
  const int warmup = argc > 3 ? atoi(argv[3]) : 5;
  char* sizes = strdup(argv[1]);
  for (char* token = strtok(sizes, ","); token != NULL; token = strtok(NULL, ",")) {
    const size_t bytes = strtoull(token, NULL, 10);
    const size_t count = bytes / sizeof(float);
    float* send = calloc(count + 1, sizeof(float));
    float* recv = calloc(count + 1, sizeof(float));
    for (size_t i = 0; i < count; ++i) send[i] = (float)((rank + i) % 29);
    for (int i = 0; i < warmup; ++i)
      MPI_Allreduce(send, recv, (int)count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    MPI_Barrier(MPI_COMM_WORLD);
    const double start = MPI_Wtime();
    for (int i = 0; i < iters; ++i)
      MPI_Allreduce(send, recv, (int)count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    double mean = (MPI_Wtime() - start) / iters;
    double slowest = 0;
    MPI_Reduce(&mean, &slowest, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
    if (rank == 0) {
      const double algbw = slowest > 0 ? (double)(count * sizeof(float)) / slowest / 1e9 : 0;
      printf("%zu %.3f %.4f %.4f\n", count * sizeof(float), slowest * 1e6, algbw,
             algbw * 2.0 * (ranks - 1) / ranks);
    }
    free(send);
    free(recv);
  }
  free(sizes);
  MPI_Finalize();
  return 0;
}

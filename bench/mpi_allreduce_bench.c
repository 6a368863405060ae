/* MPI_Allreduce (float, sum) timed like hetccl-perf: warmup, then the mean
 * of -n iterations, max over ranks; prints size, time and busbw (nccl-tests'
 * all-reduce factor 2(n-1)/n). Usage: mpirun -np 4 mpi_allreduce_bench MIN MAX ITERS */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank, n;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  size_t minBytes = argc > 1 ? strtoull(argv[1], NULL, 0) : 1 << 20;
  size_t maxBytes = argc > 2 ? strtoull(argv[2], NULL, 0) : 64 << 20;
  int iters = argc > 3 ? atoi(argv[3]) : 20;
  float* in = malloc(maxBytes);
  float* out = malloc(maxBytes);
  for (size_t i = 0; i < maxBytes / 4; ++i) in[i] = (float)(i % 97) * 0.5f + rank;
  if (rank == 0) printf("# MPI_Allreduce float sum, %d ranks\n# %12s %12s %10s %10s\n", n, "size(B)", "count", "time(us)", "busbw(GB/s)");
  for (size_t bytes = minBytes; bytes <= maxBytes; bytes *= 2) {
    int count = (int)(bytes / 4);
    for (int w = 0; w < 5; ++w) MPI_Allreduce(in, out, count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = MPI_Wtime();
    for (int i = 0; i < iters; ++i) MPI_Allreduce(in, out, count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    double us = (MPI_Wtime() - t0) / iters * 1e6, maxUs;
    MPI_Allreduce(&us, &maxUs, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    double busbw = (double)bytes / maxUs / 1e3 * 2.0 * (n - 1) / n;
    if (rank == 0) printf("  %12zu %12d %10.1f %10.2f\n", bytes, count, maxUs, busbw);
  }
  free(in);
  free(out);
  MPI_Finalize();
  return 0;
}

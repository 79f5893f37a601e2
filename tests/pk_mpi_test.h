/**
 * @file pk_mpi_test.h
 * @brief Harness of the MPI tests (t9NN-mpi-*.c, run under mpirun by ctest): MPI_Init, the case, then the
 *        worst outcome over the ranks (any rank failing fails the test on every rank), MPI_Finalize.
 */
#ifndef PK_MPI_TEST_H
#define PK_MPI_TEST_H

#include <mpi.h>
#include <string.h>

#include "pk_test.h"
#include "pkrylov_mpi.h"

#define PK_MPI_TEST_MAIN(...)                                                                      \
  int main(int argc, char **argv) {                                                                \
    static const pk_test_entry entries[] = {__VA_ARGS__};                                          \
    const int count_ = (int)(sizeof(entries) / sizeof(entries[0]));                                \
    if (argc > 1 && strncmp(argv[1], "serial_", 7) == 0) /* starts mpirun itself: no MPI here */    \
      return pk_test_main(argc, argv, entries, count_);                                            \
    MPI_Init(&argc, &argv);                                                                        \
    int rc = pk_test_main(argc, argv, entries, count_);                                            \
    int fail = rc != PK_PASS && rc != PK_SKIP, skip = rc == PK_SKIP, anyfail = 0, allskip = 0;     \
    MPI_Allreduce(&fail, &anyfail, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);                           \
    MPI_Allreduce(&skip, &allskip, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);                           \
    MPI_Finalize();                                                                                \
    return anyfail ? PK_FAIL : allskip ? PK_SKIP : PK_PASS;                                        \
  }

/** Rank and size of MPI_COMM_WORLD. */
static inline void pk_mpi_world(int *rank, int *size) {
  MPI_Comm_rank(MPI_COMM_WORLD, rank);
  MPI_Comm_size(MPI_COMM_WORLD, size);
}

/** Restrict a global k-slow vector g (gnx x gny x nz) to the block [i0, i0+nxl) x [j0, j0+nyl) (l, local
 *  k-slow order). */
static inline void pk_mpi_restrict_block(const double *g, int32_t gnx, int32_t gny, int32_t nz, int32_t i0,
                                         int32_t nxl, int32_t j0, int32_t nyl, double *l) {
  for (int64_t k = 0; k < nz; k++)
    for (int64_t j = 0; j < nyl; j++)
      memcpy(l + nxl * (j + (int64_t)nyl * k), g + i0 + (int64_t)gnx * (j0 + j + (int64_t)gny * k),
             sizeof(double) * (size_t)nxl);
}

#ifdef CUDART_VERSION /* the MPI + CUDA tests (cuda_runtime_api.h included first) */
int setenv(const char *name, const char *value, int overwrite); /* POSIX (the C11 build hides it) */

/** 1 when every rank sees a GPU (the same answer on every rank: a skip must be collective). */
static inline int pk_mpi_have_gpu(void) {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    cudaGetLastError();
    count = 0;
  }
  int mine = count > 0, all = 0;
  MPI_Allreduce(&mine, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  return all;
}

/** Select the exchange path of the next distributed solves / products: NCCL (1, when available) or
 *  host-staged (0): the option dist.nccl of ctx, or, with ctx NULL, of the contexts created afterwards
 *  (the environment variable PKRYLOV_OPTIONS, read at context creation). */
static inline void pk_mpi_set_path(pkrylov_context ctx, int nccl) {
  if (ctx)
    pkrylov_context_set_option(ctx, "dist.nccl", nccl ? "1" : "0");
  else { /* appended: a later pair overrides an earlier one, the others (e.g. a script's) are kept */
    const char *old = getenv("PKRYLOV_OPTIONS");
    char buf[1024];
    snprintf(buf, sizeof buf, "%s dist.nccl=%d", old ? old : "", nccl ? 1 : 0);
    setenv("PKRYLOV_OPTIONS", buf, 1);
  }
}
#endif

#endif /* PK_MPI_TEST_H */

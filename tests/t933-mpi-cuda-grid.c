/**
 * @file t933-mpi-cuda-grid.c
 * @brief Tiled grids on CUDA contexts over 1 to 4 ranks (one GPU per rank; ranks share a GPU when there are
 *        fewer, then the exchange is host-staged): random decompositions of a rectangle with walls, a doubly
 *        periodic one and the cube sphere. The product (its halo exchange packed on the GPU, NCCL or staged
 *        through the host) bitwise equal to the brute-force global operator (pk_grid_test.h); reproducible
 *        solves of every CG-family and BiCGStab type bitwise the single-rank CPU solve of another tiling;
 *        the fast paths (NCCL and host-staged, graphs) against that CPU solution; the approximate inverse
 *        (r's halo exchanged on the device) applied and in reproducible solves bitwise the single-rank CPU.
 *        Skipped (77) without a GPU.
 */
#include <cuda_runtime_api.h>
#include <math.h>
#include <string.h>

#include "pk_grid_mpi_test.h"

/** The CUDA context on MPI_COMM_WORLD, or NULL (the case skips when no rank has a GPU: pk_mpi_have_gpu). */
static pkrylov_context cuda_world(void) { return pkt_world_ctx(PKRYLOV_BACKEND_CUDA); }

PK_TEST_CASE(product_random_decomp) {
  if (!pk_mpi_have_gpu()) return PK_SKIP;
  pkrylov_context ctx = cuda_world();
  PK_REQUIRE(ctx, "CUDA context");
  for (int path = 0; path < 2; path++) {
    pk_mpi_set_path(ctx, path);
    for (int which = 0; which < 3; which++)
      for (int nz = 1; nz <= 3; nz += 2) {
        pkt_global G;
        int sn;
        pkt_make_problem(which, nz, &G, &sn);
        pkt_tiling T = which == 1 ? pkt_tiling_make(&G, 4, 3, 2, 2) : pkt_tiling_make(&G, sn, sn, 1, 2);
        for (uint64_t seed = 1; seed <= 2; seed++) {
          int nl = 0;
          const int64_t bad = pkt_product_mismatches(ctx, &G, &T, seed * 37 + which, seed + 10 * (uint64_t)which, &nl);
          PK_EXPECT(bad == 0, "path %d problem %d nz %d seed %d (%d tiles here): %lld cells differ from the brute "
                    "force (-1: a call failed)", path, which, nz, (int)seed, nl, (long long)bad);
        }
        pkt_global_free(&G);
      }
  }
  pkrylov_context_destroy(&ctx);
  PK_TEST_END();
}

static const int32_t kTypes[] = {PKRYLOV_SOLVER_CG, PKRYLOV_SOLVER_PIPECG, PKRYLOV_SOLVER_SRCG,
                                 PKRYLOV_SOLVER_BICGSTAB};

PK_TEST_CASE(reproducible_bitwise_cpu) {
  /* the 3-D cube sphere and the 2-D periodic problem, column preconditioner: the distributed CUDA solve of one
     tiling (exact sums) is bitwise the single-rank CPU solve of another tiling */
  if (!pk_mpi_have_gpu()) return PK_SKIP;
  for (int which = 1; which <= 2; which++) {
    pkt_global G;
    int sn;
    pkt_make_problem(which, which == 2 ? 3 : 1, &G, &sn);
    pkt_tiling Td = which == 1 ? pkt_tiling_make(&G, 4, 3, 1, 1) : pkt_tiling_make(&G, 2, 2, 1, 1);
    pkt_tiling Ts = which == 1 ? pkt_tiling_make(&G, 8, 9, 1, 1) : pkt_tiling_make(&G, 4, 4, 1, 1);
    for (int a = 0; a < 4; a++) {
      pk_mpi_set_path(NULL, a & 1); /* the contexts made below */
      double *xd = calloc((size_t)G.ncell, sizeof(double)), *xs = calloc((size_t)G.ncell, sizeof(double));
      int32_t itd = -1, its = -2;
      int32_t tiles[64];
      const int nl = pkt_random_tiles(Td.ntiles, 91 + a, tiles);
      pkrylov_context ctx = cuda_world();
      PK_REQUIRE(ctx, "CUDA context");
      if (pkt_solve_global(ctx, &G, &Td, nl, tiles, kTypes[a], 0, 1, xd, &itd, 1) != PK_PASS) pk_test_failures++;
      pkrylov_context_destroy(&ctx);
      pkrylov_context self = NULL;
      PK_REQUIRE_OK(NULL, pkrylov_context_create(PKRYLOV_BACKEND_CPU, &self));
      int32_t all[64];
      for (int t = 0; t < Ts.ntiles; t++) all[t] = t;
      if (pkt_solve_global(self, &G, &Ts, Ts.ntiles, all, kTypes[a], 0, 1, xs, &its, 0) != PK_PASS)
        pk_test_failures++;
      pkrylov_context_destroy(&self);
      PK_EXPECT(itd == its, "problem %d type %d: %d iterations on CUDA, %d on the CPU", which, kTypes[a], itd, its);
      int64_t bad = 0;
      for (int64_t q = 0; q < G.ncell; q++) bad += G.mask[q] && !pkt_same_bits(xd[q], xs[q]);
      PK_EXPECT(bad == 0, "problem %d type %d: %lld cells of x differ from the CPU", which, kTypes[a], (long long)bad);
      free(xd), free(xs);
    }
    pkt_global_free(&G);
  }
  PK_TEST_END();
}

PK_TEST_CASE(fast_paths_match_cpu) {
  /* the default (not reproducible) solves on both exchange paths: within 1e-8 of the CPU solution (both
     solve to rtol 1e-10), a few iterations apart at most (other sums) */
  if (!pk_mpi_have_gpu()) return PK_SKIP;
  pkt_global G;
  int sn;
  pkt_make_problem(2, 4, &G, &sn);
  pkt_tiling T = pkt_tiling_make(&G, 2, 2, 1, 1);
  double *xs = calloc((size_t)G.ncell, sizeof(double)), *xd = calloc((size_t)G.ncell, sizeof(double));
  for (int a = 0; a < 4; a++) {
    int32_t its = -1;
    pkrylov_context self = NULL;
    PK_REQUIRE_OK(NULL, pkrylov_context_create(PKRYLOV_BACKEND_CPU, &self));
    int32_t all[64];
    for (int t = 0; t < T.ntiles; t++) all[t] = t;
    if (pkt_solve_global(self, &G, &T, T.ntiles, all, kTypes[a], 0, 1, xs, &its, 0) != PK_PASS) pk_test_failures++;
    pkrylov_context_destroy(&self);
    for (int path = 0; path < 2; path++) {
      pk_mpi_set_path(NULL, path); /* the context made below */
      int32_t tiles[64], itd = -1;
      const int nl = pkt_random_tiles(T.ntiles, 200 + a + 7 * path, tiles);
      pkrylov_context ctx = cuda_world();
      PK_REQUIRE(ctx, "CUDA context");
      if (pkt_solve_global(ctx, &G, &T, nl, tiles, kTypes[a], 0, 0, xd, &itd, 1) != PK_PASS) pk_test_failures++;
      pkrylov_context_destroy(&ctx);
      double d2 = 0, s2 = 0;
      for (int64_t q = 0; q < G.ncell; q++)
        if (G.mask[q]) d2 += (xd[q] - xs[q]) * (xd[q] - xs[q]), s2 += xs[q] * xs[q];
      PK_EXPECT(sqrt(d2) <= 1e-8 * sqrt(s2), "type %d path %d: relative difference %.3g from the CPU", kTypes[a],
                path, sqrt(d2 / s2));
      PK_EXPECT(abs(itd - its) <= 3, "type %d path %d: %d iterations, the CPU %d", kTypes[a], path, itd, its);
    }
  }
  free(xs), free(xd);
  pkt_global_free(&G);
  PK_TEST_END();
}

PK_TEST_CASE(ainv_apply_bitwise_cpu) {
  /* the approximate inverse of a distributed CUDA grid (r's halo exchanged on the device, both paths)
     bitwise the single-rank CPU one, in the single-rank compact order mapped through the global order */
  if (!pk_mpi_have_gpu()) return PK_SKIP;
  pkt_global G;
  int sn;
  pkt_make_problem(2, 1, &G, &sn);
  pkt_tiling T = pkt_tiling_make(&G, 2, 2, 1, 1);
  pkrylov_context self = NULL;
  PK_REQUIRE_OK(NULL, pkrylov_context_create(PKRYLOV_BACKEND_CPU, &self));
  int32_t all[64];
  for (int t = 0; t < T.ntiles; t++) all[t] = t;
  pkrylov_grid g1 = NULL;
  pkrylov_operator A1 = NULL;
  pkrylov_precond M1 = NULL;
  PK_REQUIRE_OK(self, pkt_grid_operator(self, &G, &T, T.ntiles, all, 1, &g1, &A1));
  PK_REQUIRE_OK(self, pkrylov_precond_create_ainv(self, A1, 0.51, &M1));
  double *rg = malloc(sizeof(double) * (size_t)G.ncell), *zg = malloc(sizeof(double) * (size_t)G.ncell);
  double *r1 = malloc(sizeof(double) * (size_t)G.ncell), *z1 = malloc(sizeof(double) * (size_t)G.ncell);
  uint64_t st = 3;
  for (int64_t q = 0; q < G.ncell; q++) rg[q] = G.mask[q] ? pk_test_rand(&st) : 0.0;
  for (int64_t p = 0; p < G.ncell; p++) r1[p] = rg[pkt_compact_to_global(&G, &T, T.ntiles, all, p)];
  PK_REQUIRE_OK(self, pkrylov_precond_apply(M1, PKRYLOV_MEM_HOST, r1, z1));
  for (int64_t p = 0; p < G.ncell; p++) zg[pkt_compact_to_global(&G, &T, T.ntiles, all, p)] = z1[p];
  for (int path = 0; path < 2; path++) {
    pk_mpi_set_path(NULL, path); /* the context made below */
    pkrylov_context ctx = cuda_world();
    PK_REQUIRE(ctx, "CUDA context");
    int32_t tiles[64];
    const int nl = pkt_random_tiles(T.ntiles, 5 + (uint64_t)path, tiles);
    pkrylov_grid g = NULL;
    pkrylov_operator A = NULL;
    pkrylov_precond M = NULL;
    PK_REQUIRE_OK(ctx, pkt_grid_operator(ctx, &G, &T, nl, tiles, 1, &g, &A));
    PK_REQUIRE_OK(ctx, pkrylov_precond_create_ainv(ctx, A, 0.51, &M));
    const int64_t n = (int64_t)T.snx * T.sny * nl;
    double *rc = malloc(sizeof(double) * (size_t)(n ? n : 1)), *zc = malloc(sizeof(double) * (size_t)(n ? n : 1));
    for (int64_t q = 0; q < n; q++) rc[q] = rg[pkt_compact_to_global(&G, &T, nl, tiles, q)];
    PK_REQUIRE_OK(ctx, pkrylov_precond_apply(M, PKRYLOV_MEM_HOST, rc, zc));
    int64_t bad = 0;
    for (int64_t q = 0; q < n; q++) {
      const int64_t gq = pkt_compact_to_global(&G, &T, nl, tiles, q);
      bad += G.mask[gq] && !pkt_same_bits(zc[q], zg[gq]);
    }
    PK_EXPECT(bad == 0, "path %d: %lld cells differ from the single-rank CPU approximate inverse", path,
              (long long)bad);
    free(rc), free(zc);
    pkrylov_precond_destroy(&M);
    pkrylov_operator_destroy(&A);
    pkrylov_grid_destroy(&g);
    pkrylov_context_destroy(&ctx);
  }
  free(rg), free(zg), free(r1), free(z1);
  pkrylov_precond_destroy(&M1);
  pkrylov_operator_destroy(&A1);
  pkrylov_grid_destroy(&g1);
  pkrylov_context_destroy(&self);
  pkt_global_free(&G);
  PK_TEST_END();
}

PK_TEST_CASE(ainv_solves_bitwise_cpu) {
  /* the 2-D periodic problem with the approximate inverse (CG, pipelined CG, SRCG, BiCGStab; reproducible
     mode, both paths): the distributed CUDA solve bitwise the single-rank CPU solve of another tiling */
  if (!pk_mpi_have_gpu()) return PK_SKIP;
  pkt_global G;
  int sn;
  pkt_make_problem(1, 1, &G, &sn);
  pkt_tiling Td = pkt_tiling_make(&G, 4, 3, 1, 1), Ts = pkt_tiling_make(&G, 8, 9, 1, 1);
  for (int a = 0; a < 4; a++) {
    pk_mpi_set_path(NULL, a & 1); /* the contexts made below */
    double *xd = calloc((size_t)G.ncell, sizeof(double)), *xs = calloc((size_t)G.ncell, sizeof(double));
    int32_t itd = -1, its = -2, tiles[64];
    const int nl = pkt_random_tiles(Td.ntiles, 300 + a, tiles);
    pkrylov_context ctx = cuda_world();
    PK_REQUIRE(ctx, "CUDA context");
    if (pkt_solve_global(ctx, &G, &Td, nl, tiles, kTypes[a], 1, 1, xd, &itd, 1) != PK_PASS) pk_test_failures++;
    pkrylov_context_destroy(&ctx);
    pkrylov_context self = NULL;
    PK_REQUIRE_OK(NULL, pkrylov_context_create(PKRYLOV_BACKEND_CPU, &self));
    int32_t all[64];
    for (int t = 0; t < Ts.ntiles; t++) all[t] = t;
    if (pkt_solve_global(self, &G, &Ts, Ts.ntiles, all, kTypes[a], 1, 1, xs, &its, 0) != PK_PASS)
      pk_test_failures++;
    pkrylov_context_destroy(&self);
    PK_EXPECT(itd == its, "type %d: %d iterations on CUDA, %d on the CPU", kTypes[a], itd, its);
    int64_t bad = 0;
    for (int64_t q = 0; q < G.ncell; q++) bad += G.mask[q] && !pkt_same_bits(xd[q], xs[q]);
    PK_EXPECT(bad == 0, "type %d: %lld cells of x differ from the CPU", kTypes[a], (long long)bad);
    free(xd), free(xs);
  }
  pkt_global_free(&G);
  PK_TEST_END();
}

PK_MPI_TEST_MAIN(PK_TEST_ENTRY(product_random_decomp), PK_TEST_ENTRY(reproducible_bitwise_cpu),
                 PK_TEST_ENTRY(fast_paths_match_cpu), PK_TEST_ENTRY(ainv_apply_bitwise_cpu),
                 PK_TEST_ENTRY(ainv_solves_bitwise_cpu))

/**
 * @file t960-mpi-grid.c
 * @brief Tiled grids over 1 to 4 ranks: random decompositions (1 to 6 tiles per rank, any tile order) of a
 *        rectangle with walls, a doubly periodic one and the cube sphere; the distributed product bitwise
 *        equal to the brute-force global operator (pk_grid_test.h); the approximate inverse distributed
 *        equal to the single-rank one; reproducible solves bitwise identical to a single-rank solve of
 *        another tiling; bad input with the same error on every rank, never a hang.
 */
#include <string.h>

#include "pk_grid_mpi_test.h"

static pkrylov_context world_ctx(void) { return pkt_world_ctx(PKRYLOV_BACKEND_CPU); }

PK_TEST_CASE(product_random_decomp) {
  pkrylov_context ctx = world_ctx();
  PK_REQUIRE(ctx, "context");
  for (int which = 0; which < 3; which++)
    for (int nz = 1; nz <= 2; nz++) {
      pkt_global G;
      int sn;
      pkt_make_problem(which, nz, &G, &sn);
      pkt_tiling T = which == 1 ? pkt_tiling_make(&G, 4, 3, 2, 2) : pkt_tiling_make(&G, sn, sn, 1, 2);
      for (uint64_t seed = 1; seed <= 3; seed++) {
        int nl = 0;
        const int64_t bad = pkt_product_mismatches(ctx, &G, &T, seed * 31 + which, seed, &nl);
        PK_EXPECT(bad == 0, "problem %d nz %d seed %d (%d tiles here): %lld cells differ from the brute force (-1: "
                  "a call failed)", which, nz, (int)seed, nl, (long long)bad);
      }
      pkt_global_free(&G);
    }
  pkrylov_context_destroy(&ctx);
  PK_TEST_END();
}

PK_TEST_CASE(reproducible_across_tilings_and_ranks) {
  /* 3-D cube sphere with the column preconditioner (CG, pipelined CG) and the 2-D periodic problem with the
     approximate inverse (CG, BiCGStab): the distributed solve of one tiling is bitwise the single-rank solve
     of another */
  for (int which = 1; which <= 2; which++) {
    pkt_global G;
    int sn;
    pkt_make_problem(which, which == 2 ? 3 : 1, &G, &sn);
    pkt_tiling Td = which == 1 ? pkt_tiling_make(&G, 4, 3, 1, 1) : pkt_tiling_make(&G, 2, 2, 1, 1);
    pkt_tiling Ts = which == 1 ? pkt_tiling_make(&G, 8, 9, 1, 1) : pkt_tiling_make(&G, 4, 4, 1, 1);
    const int32_t types[2] = {PKRYLOV_SOLVER_CG, which == 1 ? PKRYLOV_SOLVER_BICGSTAB : PKRYLOV_SOLVER_PIPECG};
    for (int a = 0; a < 2; a++) {
      double *xd = calloc((size_t)G.ncell, sizeof(double)), *xs = calloc((size_t)G.ncell, sizeof(double));
      int32_t itd = -1, its = -2;
      int32_t tiles[64];
      const int nl = pkt_random_tiles(Td.ntiles, 77 + a, tiles);
      pkrylov_context ctx = world_ctx();
      if (pkt_solve_global(ctx, &G, &Td, nl, tiles, types[a], which == 1, 1, xd, &itd, 1) != PK_PASS) pk_test_failures++;
      pkrylov_context_destroy(&ctx);
      /* the single-rank reference, another tiling, every tile here */
      pkrylov_context self = NULL;
      PK_REQUIRE_OK(NULL, pkrylov_context_create(PKRYLOV_BACKEND_CPU, &self));
      int32_t all[64];
      for (int t = 0; t < Ts.ntiles; t++) all[t] = t;
      if (pkt_solve_global(self, &G, &Ts, Ts.ntiles, all, types[a], which == 1, 1, xs, &its, 0) != PK_PASS)
        pk_test_failures++;
      pkrylov_context_destroy(&self);
      PK_EXPECT(itd == its, "problem %d type %d: %d iterations distributed, %d on one rank", which, types[a], itd, its);
      int64_t bad = 0;
      for (int64_t q = 0; q < G.ncell; q++) bad += G.mask[q] && !pkt_same_bits(xd[q], xs[q]);
      PK_EXPECT(bad == 0, "problem %d type %d: %lld cells of x differ", which, types[a], (long long)bad);
      free(xd), free(xs);
    }
    pkt_global_free(&G);
  }
  PK_TEST_END();
}

PK_TEST_CASE(ainv_distributed) {
  pkrylov_context ctx = world_ctx();
  pkt_global G;
  int sn;
  pkt_make_problem(2, 1, &G, &sn);
  pkt_tiling T = pkt_tiling_make(&G, 2, 2, 1, 1);
  int32_t tiles[64];
  const int nl = pkt_random_tiles(T.ntiles, 5, tiles);
  pkrylov_grid g = NULL;
  pkrylov_operator A = NULL;
  pkrylov_precond M = NULL;
  PK_REQUIRE_OK(ctx, pkt_grid_operator(ctx, &G, &T, nl, tiles, 1, &g, &A));
  PK_REQUIRE_OK(ctx, pkrylov_precond_create_ainv(ctx, A, 0.51, &M));
  /* single rank: all tiles */
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
  /* the single-rank compact order, and its result back in the global order */
  for (int64_t p = 0; p < G.ncell; p++) r1[p] = rg[pkt_compact_to_global(&G, &T, T.ntiles, all, p)];
  PK_REQUIRE_OK(self, pkrylov_precond_apply(M1, PKRYLOV_MEM_HOST, r1, z1));
  for (int64_t p = 0; p < G.ncell; p++) zg[pkt_compact_to_global(&G, &T, T.ntiles, all, p)] = z1[p];
  const int64_t n = (int64_t)T.snx * T.sny * nl;
  double *rc = malloc(sizeof(double) * (size_t)n), *zc = malloc(sizeof(double) * (size_t)n);
  for (int64_t q = 0; q < n; q++) rc[q] = rg[pkt_compact_to_global(&G, &T, nl, tiles, q)];
  PK_REQUIRE_OK(ctx, pkrylov_precond_apply(M, PKRYLOV_MEM_HOST, rc, zc));
  int64_t bad = 0;
  for (int64_t q = 0; q < n; q++) {
    const int64_t gq = pkt_compact_to_global(&G, &T, nl, tiles, q);
    bad += G.mask[gq] && !pkt_same_bits(zc[q], zg[gq]);
  }
  PK_EXPECT(bad == 0, "%lld cells differ from the single-rank approximate inverse", (long long)bad);
  free(rg), free(zg), free(r1), free(z1), free(rc), free(zc);
  pkrylov_precond_destroy(&M1);
  pkrylov_operator_destroy(&A1);
  pkrylov_grid_destroy(&g1);
  pkrylov_context_destroy(&self);
  pkrylov_precond_destroy(&M);
  pkrylov_operator_destroy(&A);
  pkrylov_grid_destroy(&g);
  pkt_global_free(&G);
  pkrylov_context_destroy(&ctx);
  PK_TEST_END();
}

/** The call's code must be `code` on every rank, with a message. */
#define EXPECT_ALL(ctx, call, code)                                                                \
  do {                                                                                             \
    const int got_ = (call);                                                                       \
    const char *msg_ = "";                                                                         \
    pkrylov_context_get_last_error((ctx), NULL, &msg_);                                            \
    PK_EXPECT(got_ == (code) && ((code) == 0 || msg_[0] != 0), "%s: %d (%s), expected %d", #call, got_, msg_, \
              (int)(code));                                                                        \
  } while (0)

PK_TEST_CASE(bad_input_every_rank) {
  int rank, size;
  pk_mpi_world(&rank, &size);
  pkrylov_context ctx = world_ctx();
  const int ntiles = 8;
  int32_t conn[12 * 8], tiles[8];
  PK_REQUIRE_OK(NULL, pkrylov_grid_connect_rect(4, 2, PKRYLOV_PERIODIC_X, conn));
  int nl = 0;
  for (int t = 0; t < ntiles; t++)
    if (t % size == rank) tiles[nl++] = t;
  pkrylov_grid g = NULL;
  /* the table differs on the last rank (only there: the others must learn it) */
  {
    int32_t c2[12 * 8];
    memcpy(c2, conn, sizeof c2);
    if (rank == size - 1) c2[3 * (4 * 1 + 0) + 2] = 1, c2[3 * (4 * 0 + 1) + 2] = 1; /* symmetric, but other */
    EXPECT_ALL(ctx, pkrylov_grid_create(ctx, 3, 3, 1, 1, ntiles, c2, nl, tiles, &g),
               size > 1 ? PKRYLOV_ERR_TOPOLOGY : PKRYLOV_SUCCESS);
    pkrylov_grid_destroy(&g);
  }
  /* a size that differs on one rank */
  EXPECT_ALL(ctx, pkrylov_grid_create(ctx, 3, rank == 0 && size > 1 ? 4 : 3, 1, 1, ntiles, conn, nl, tiles, &g),
             size > 1 ? PKRYLOV_ERR_SIZE_MISMATCH : PKRYLOV_SUCCESS);
  pkrylov_grid_destroy(&g);
  /* a tile owned twice (rank 0 also claims the last rank's first tile) and a rank with no tile */
  if (size > 1) {
    int32_t t2[9];
    memcpy(t2, tiles, sizeof(int32_t) * (size_t)nl);
    int n2 = nl;
    if (rank == 0) t2[n2++] = size - 1;
    EXPECT_ALL(ctx, pkrylov_grid_create(ctx, 3, 3, 1, 1, ntiles, conn, n2, t2, &g), PKRYLOV_ERR_TOPOLOGY);
    EXPECT_ALL(ctx, pkrylov_grid_create(ctx, 3, 3, 1, 1, ntiles, conn, rank == size - 1 ? 0 : nl, tiles, &g),
               PKRYLOV_ERR_TOPOLOGY);
  }
  /* tiles that differ in Nr: the levels differ on one rank */
  {
    PK_REQUIRE_OK(ctx, pkrylov_grid_create(ctx, 3, 3, 1, 1, ntiles, conn, nl, tiles, &g));
    const int64_t hn3 = 5 * 5 * nl * 3;
    double *a3 = malloc(sizeof(double) * (size_t)hn3), *c3 = malloc(sizeof(double) * (size_t)hn3);
    for (int64_t i = 0; i < hn3; i++) a3[i] = 1.0, c3[i] = -7.0;
    pkrylov_operator A3 = NULL;
    EXPECT_ALL(ctx,
               pkrylov_operator_create_grid_stencil(g, rank == size - 1 && size > 1 ? 2 : 3, a3, a3, a3, c3, NULL, &A3),
               size > 1 ? PKRYLOV_ERR_SIZE_MISMATCH : PKRYLOV_SUCCESS);
    pkrylov_operator_destroy(&A3);
    free(a3), free(c3);
    pkrylov_grid_destroy(&g);
  }
  /* a non-finite coefficient on one rank only */
  PK_REQUIRE_OK(ctx, pkrylov_grid_create(ctx, 3, 3, 1, 1, ntiles, conn, nl, tiles, &g));
  const int64_t hn = 5 * 5 * nl;
  double *a = malloc(sizeof(double) * (size_t)hn), *c = malloc(sizeof(double) * (size_t)hn);
  for (int64_t i = 0; i < hn; i++) a[i] = 1.0, c[i] = -5.0;
  if (rank == size - 1) c[1 + 5 * 2] = NAN;
  pkrylov_operator A = NULL;
  EXPECT_ALL(ctx, pkrylov_operator_create_grid_stencil(g, 1, a, a, NULL, c, NULL, &A), PKRYLOV_ERR_NOT_FINITE);
  PK_EXPECT(A == NULL, "an operator was returned");
  free(a), free(c);
  pkrylov_grid_destroy(&g);
  pkrylov_context_destroy(&ctx);
  PK_TEST_END();
}

PK_MPI_TEST_MAIN(PK_TEST_ENTRY(product_random_decomp), PK_TEST_ENTRY(reproducible_across_tilings_and_ranks),
                 PK_TEST_ENTRY(ainv_distributed), PK_TEST_ENTRY(bad_input_every_rank))

/**
 * @file t960-mpi-grid.c
 * @brief Tiled grids over 1 to 4 ranks: random decompositions (1 to 6 tiles per rank, any tile order) of a
 *        rectangle with walls, a doubly periodic one and the cube sphere; the distributed product bitwise
 *        equal to the brute-force global operator (pk_grid_test.h); the approximate inverse distributed
 *        equal to the single-rank one; reproducible solves bitwise identical to a single-rank solve of
 *        another tiling; bad input with the same error on every rank, never a hang.
 */
#include <string.h>

#include "pk_grid_test.h"
#include "pk_mpi_test.h"

static pkrylov_context world_ctx(void) {
  pkrylov_context ctx = NULL;
  if (pkrylov_context_create(PKRYLOV_BACKEND_CPU, &ctx) || pkrylov_context_set_comm(ctx, MPI_COMM_WORLD))
    return NULL;
  return ctx;
}

/**
 * This rank's tiles of a random assignment of ntiles tiles to the ranks (every rank at least one; the same
 * on every rank for a seed), in a random local order. Returns the count; tiles has room for ntiles.
 */
static int random_tiles(int ntiles, uint64_t seed, int32_t *tiles) {
  int rank, size;
  pk_mpi_world(&rank, &size);
  int32_t *perm = malloc(sizeof(int32_t) * (size_t)ntiles), *owner = malloc(sizeof(int32_t) * (size_t)ntiles);
  for (int t = 0; t < ntiles; t++) perm[t] = t;
  uint64_t st = seed;
  for (int i = ntiles - 1; i > 0; i--) {
    const int j = (int)((pk_test_rand(&st) * 0.5 + 0.5) * (i + 1)) % (i + 1);
    const int32_t x = perm[i];
    perm[i] = perm[j], perm[j] = x;
  }
  /* the first size tiles of the permutation go one to each rank, the others anywhere */
  for (int i = 0; i < ntiles; i++)
    owner[perm[i]] = i < size ? i : (int)((pk_test_rand(&st) * 0.5 + 0.5) * size) % size;
  int n = 0;
  for (int i = 0; i < ntiles; i++)
    if (owner[perm[ntiles - 1 - i]] == rank) tiles[n++] = perm[ntiles - 1 - i];
  free(perm), free(owner);
  return n;
}

/** The global vector from every rank's compact part (exact: index-value pairs, every cell from one rank). */
static void gather_global(const pkt_global *G, const pkt_tiling *T, int nlocal, const int32_t *tiles,
                          const double *xc, double *xg) {
  int size;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  const int n = (int)((int64_t)T->snx * T->sny * nlocal * G->nz);
  int *counts = malloc(sizeof(int) * (size_t)size), *displs = malloc(sizeof(int) * (size_t)size);
  MPI_Allgather(&n, 1, MPI_INT, counts, 1, MPI_INT, MPI_COMM_WORLD);
  int total = 0;
  for (int r = 0; r < size; r++) displs[r] = total, total += counts[r];
  double *vals = malloc(sizeof(double) * (size_t)total);
  int64_t *idx = malloc(sizeof(int64_t) * (size_t)total), *mine = malloc(sizeof(int64_t) * (size_t)(n ? n : 1));
  for (int q = 0; q < n; q++) mine[q] = pkt_compact_to_global(G, T, nlocal, tiles, q);
  MPI_Allgatherv(xc, n, MPI_DOUBLE, vals, counts, displs, MPI_DOUBLE, MPI_COMM_WORLD);
  MPI_Allgatherv(mine, n, MPI_INT64_T, idx, counts, displs, MPI_INT64_T, MPI_COMM_WORLD);
  for (int i = 0; i < total; i++) xg[idx[i]] = vals[i];
  free(counts), free(displs), free(vals), free(idx), free(mine);
}

static int same_bits(double a, double b) { return memcmp(&a, &b, sizeof a) == 0 && a == a; }

/** The problems of the cases: 0 rectangle with walls, 1 doubly periodic, 2 cube sphere. */
static void make_problem(int which, int nz, pkt_global *G, int *sn) {
  if (which == 0) pkt_global_make(G, 1, 12, 6, nz, 0, 0, 0.2, 1, 900 + nz), *sn = 3;
  else if (which == 1) pkt_global_make(G, 1, 8, 9, nz, 1, 1, 0.2, 1, 910 + nz), *sn = 0;
  else pkt_global_make(G, 6, 4, 4, nz, 0, 0, 0.15, 1, 920 + nz), *sn = 2;
}

PK_TEST_CASE(product_random_decomp) {
  pkrylov_context ctx = world_ctx();
  PK_REQUIRE(ctx, "context");
  for (int which = 0; which < 3; which++)
    for (int nz = 1; nz <= 2; nz++) {
      pkt_global G;
      int sn;
      make_problem(which, nz, &G, &sn);
      pkt_tiling T = which == 1 ? pkt_tiling_make(&G, 4, 3, 2, 2) : pkt_tiling_make(&G, sn, sn, 1, 2);
      for (uint64_t seed = 1; seed <= 3; seed++) {
        int32_t tiles[64];
        const int nl = random_tiles(T.ntiles, seed * 31 + which, tiles);
        pkrylov_grid g = NULL;
        pkrylov_operator A = NULL;
        PK_REQUIRE_OK(ctx, pkt_grid_operator(ctx, &G, &T, nl, tiles, 1, &g, &A));
        const int64_t n = (int64_t)T.snx * T.sny * nl * nz;
        double *xg = malloc(sizeof(double) * (size_t)G.ncell), *yg = malloc(sizeof(double) * (size_t)G.ncell);
        uint64_t st = seed;
        for (int64_t q = 0; q < G.ncell; q++) xg[q] = pk_test_rand(&st);
        pkt_global_apply(&G, 1, xg, yg);
        double *xc = malloc(sizeof(double) * (size_t)n), *yc = malloc(sizeof(double) * (size_t)n);
        for (int64_t q = 0; q < n; q++) xc[q] = xg[pkt_compact_to_global(&G, &T, nl, tiles, q)];
        PK_REQUIRE_OK(ctx, pkrylov_operator_apply(A, PKRYLOV_MEM_HOST, xc, yc));
        int64_t bad = 0;
        for (int64_t q = 0; q < n; q++) bad += !same_bits(yc[q], yg[pkt_compact_to_global(&G, &T, nl, tiles, q)]);
        PK_EXPECT(bad == 0, "problem %d nz %d seed %d (%d tiles here): %lld cells differ from the brute force",
                  which, nz, (int)seed, nl, (long long)bad);
        free(xg), free(yg), free(xc), free(yc);
        pkrylov_operator_destroy(&A);
        pkrylov_grid_destroy(&g);
      }
      pkt_global_free(&G);
    }
  pkrylov_context_destroy(&ctx);
  PK_TEST_END();
}

/**
 * Solve the problem with tiling T (tiles nl, tiles) on ctx, reproducible mode; the solution into xg (global
 * order, every rank) and the iterations into *its.
 */
static int solve_global(pkrylov_context ctx, const pkt_global *G, const pkt_tiling *T, int nl, const int32_t *tiles,
                        int32_t type, int ainv, double *xg, int32_t *its, int world) {
  pkrylov_grid g = NULL;
  pkrylov_operator A = NULL;
  pkrylov_precond M = NULL;
  pkrylov_solver s = NULL;
  PK_REQUIRE_OK(ctx, pkrylov_context_set_reproducible(ctx, 1));
  PK_REQUIRE_OK(ctx, pkt_grid_operator(ctx, G, T, nl, tiles, 1, &g, &A));
  if (ainv)
    PK_REQUIRE_OK(ctx, pkrylov_precond_create_ainv(ctx, A, 0.51, &M));
  else
    PK_REQUIRE_OK(ctx, pkrylov_precond_create(ctx, A, PKRYLOV_PRECOND_COLUMN, 0, PKRYLOV_LAYOUT_AUTO, &M));
  PK_REQUIRE_OK(ctx, pkrylov_solver_create(ctx, type, A, M, &s));
  PK_REQUIRE_OK(ctx, pkrylov_solver_set_tolerances(s, 1e-10, 0.0));
  double *bg = malloc(sizeof(double) * (size_t)G->ncell);
  uint64_t st = 4242;
  for (int64_t q = 0; q < G->ncell; q++) bg[q] = G->mask[q] ? pk_test_rand(&st) : 0.0;
  double *bh = pkt_halo_array(G, T, nl, tiles, bg);
  double *xh = pkt_halo_array(G, T, nl, tiles, bg);
  PK_REQUIRE_OK(ctx, pkrylov_solver_solve_halo(s, PKRYLOV_MEM_HOST, bh, xh));
  pkrylov_result res;
  PK_REQUIRE_OK(ctx, pkrylov_solver_get_result(s, &res));
  PK_EXPECT(res.converged, "%s after %d iterations", pkrylov_reason_string(res.reason), res.iterations);
  *its = res.iterations;
  const int64_t n = (int64_t)T->snx * T->sny * nl * G->nz;
  double *xc = malloc(sizeof(double) * (size_t)n);
  PK_REQUIRE_OK(ctx, pkrylov_grid_pack(g, G->nz, PKRYLOV_MEM_HOST, xh, xc));
  if (world)
    gather_global(G, T, nl, tiles, xc, xg);
  else
    for (int64_t q = 0; q < n; q++) xg[pkt_compact_to_global(G, T, nl, tiles, q)] = xc[q];
  free(bg), free(bh), free(xh), free(xc);
  pkrylov_solver_destroy(&s);
  pkrylov_precond_destroy(&M);
  pkrylov_operator_destroy(&A);
  pkrylov_grid_destroy(&g);
  PK_TEST_END();
}

PK_TEST_CASE(reproducible_across_tilings_and_ranks) {
  /* 3-D cube sphere with the column preconditioner (CG, pipelined CG) and the 2-D periodic problem with the
     approximate inverse (CG, BiCGStab): the distributed solve of one tiling is bitwise the single-rank solve
     of another */
  for (int which = 1; which <= 2; which++) {
    pkt_global G;
    int sn;
    make_problem(which, which == 2 ? 3 : 1, &G, &sn);
    pkt_tiling Td = which == 1 ? pkt_tiling_make(&G, 4, 3, 1, 1) : pkt_tiling_make(&G, 2, 2, 1, 1);
    pkt_tiling Ts = which == 1 ? pkt_tiling_make(&G, 8, 9, 1, 1) : pkt_tiling_make(&G, 4, 4, 1, 1);
    const int32_t types[2] = {PKRYLOV_SOLVER_CG, which == 1 ? PKRYLOV_SOLVER_BICGSTAB : PKRYLOV_SOLVER_PIPECG};
    for (int a = 0; a < 2; a++) {
      double *xd = calloc((size_t)G.ncell, sizeof(double)), *xs = calloc((size_t)G.ncell, sizeof(double));
      int32_t itd = -1, its = -2;
      int32_t tiles[64];
      const int nl = random_tiles(Td.ntiles, 77 + a, tiles);
      pkrylov_context ctx = world_ctx();
      if (solve_global(ctx, &G, &Td, nl, tiles, types[a], which == 1, xd, &itd, 1) != PK_PASS) pk_test_failures++;
      pkrylov_context_destroy(&ctx);
      /* the single-rank reference, another tiling, every tile here */
      pkrylov_context self = NULL;
      PK_REQUIRE_OK(NULL, pkrylov_context_create(PKRYLOV_BACKEND_CPU, &self));
      int32_t all[64];
      for (int t = 0; t < Ts.ntiles; t++) all[t] = t;
      if (solve_global(self, &G, &Ts, Ts.ntiles, all, types[a], which == 1, xs, &its, 0) != PK_PASS)
        pk_test_failures++;
      pkrylov_context_destroy(&self);
      PK_EXPECT(itd == its, "problem %d type %d: %d iterations distributed, %d on one rank", which, types[a], itd, its);
      int64_t bad = 0;
      for (int64_t q = 0; q < G.ncell; q++) bad += G.mask[q] && !same_bits(xd[q], xs[q]);
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
  make_problem(2, 1, &G, &sn);
  pkt_tiling T = pkt_tiling_make(&G, 2, 2, 1, 1);
  int32_t tiles[64];
  const int nl = random_tiles(T.ntiles, 5, tiles);
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
    bad += G.mask[gq] && !same_bits(zc[q], zg[gq]);
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

/**
 * @file pk_grid_mpi_test.h
 * @brief The MPI half of the tiled-grid test references (t960 on the CPU, t933 on CUDA contexts): random
 *        assignments of tiles to ranks, global vectors gathered from the ranks' compact parts, the test
 *        problems and one solve of a problem on any tiling.
 */
#ifndef PK_GRID_MPI_TEST_H
#define PK_GRID_MPI_TEST_H

#include <string.h>

#include "pk_grid_test.h"
#include "pk_mpi_test.h"

/** A context of the backend on MPI_COMM_WORLD (NULL on failure). */
static pkrylov_context pkt_world_ctx(int32_t backend) {
  pkrylov_context ctx = NULL;
  if (pkrylov_context_create(backend, &ctx) || pkrylov_context_set_comm(ctx, MPI_COMM_WORLD)) {
    pkrylov_context_destroy(&ctx);
    return NULL;
  }
  return ctx;
}

/**
 * This rank's tiles of a random assignment of ntiles tiles to the ranks (every rank at least one; the same
 * on every rank for a seed), in a random local order. Returns the count; tiles has room for ntiles.
 */
static int pkt_random_tiles(int ntiles, uint64_t seed, int32_t *tiles) {
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
static void pkt_gather_global(const pkt_global *G, const pkt_tiling *T, int nlocal, const int32_t *tiles,
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

static int pkt_same_bits(double a, double b) { return memcmp(&a, &b, sizeof a) == 0 && a == a; }

/** The problems of the cases: 0 rectangle with walls, 1 doubly periodic, 2 cube sphere. */
static void pkt_make_problem(int which, int nz, pkt_global *G, int *sn) {
  if (which == 0) pkt_global_make(G, 1, 12, 6, nz, 0, 0, 0.2, 1, 900 + nz), *sn = 3;
  else if (which == 1) pkt_global_make(G, 1, 8, 9, nz, 1, 1, 0.2, 1, 910 + nz), *sn = 0;
  else pkt_global_make(G, 6, 4, 4, nz, 0, 0, 0.15, 1, 920 + nz), *sn = 2;
}

/**
 * The product of a grid stencil of problem G on ctx, tiling T, the tiles of pkt_random_tiles(T.ntiles,
 * tiles_seed), against the brute-force global product (x random from x_seed): the cells that differ (not
 * bitwise); -1 when a call failed (the message in ctx). *nl: this rank's tiles.
 */
static int64_t pkt_product_mismatches(pkrylov_context ctx, const pkt_global *G, const pkt_tiling *T,
                                      uint64_t tiles_seed, uint64_t x_seed, int *nl) {
  int32_t tiles[64];
  *nl = pkt_random_tiles(T->ntiles, tiles_seed, tiles);
  pkrylov_grid g = NULL;
  pkrylov_operator A = NULL;
  if (pkt_grid_operator(ctx, G, T, *nl, tiles, 1, &g, &A)) return -1;
  const int64_t n = (int64_t)T->snx * T->sny * *nl * G->nz;
  double *xg = malloc(sizeof(double) * (size_t)G->ncell), *yg = malloc(sizeof(double) * (size_t)G->ncell);
  double *xc = malloc(sizeof(double) * (size_t)(n ? n : 1)), *yc = malloc(sizeof(double) * (size_t)(n ? n : 1));
  uint64_t st = x_seed;
  for (int64_t q = 0; q < G->ncell; q++) xg[q] = pk_test_rand(&st);
  pkt_global_apply(G, 1, xg, yg);
  for (int64_t q = 0; q < n; q++) xc[q] = xg[pkt_compact_to_global(G, T, *nl, tiles, q)];
  int64_t bad = -1;
  if (pkrylov_operator_apply(A, PKRYLOV_MEM_HOST, xc, yc) == PKRYLOV_SUCCESS) {
    bad = 0;
    for (int64_t q = 0; q < n; q++) bad += !pkt_same_bits(yc[q], yg[pkt_compact_to_global(G, T, *nl, tiles, q)]);
  }
  free(xg), free(yg), free(xc), free(yc);
  pkrylov_operator_destroy(&A);
  pkrylov_grid_destroy(&g);
  return bad;
}

/**
 * Solve the problem with tiling T (tiles nl, tiles) on ctx (reproducible mode when repro), the approximate
 * inverse (ainv) or the column preconditioner, rtol 1e-10; the solution into xg (global order; every rank
 * when world, else this rank's cells) and the iterations into *its.
 */
static int pkt_solve_global(pkrylov_context ctx, const pkt_global *G, const pkt_tiling *T, int nl,
                            const int32_t *tiles, int32_t type, int ainv, int repro, double *xg, int32_t *its,
                            int world) {
  pkrylov_grid g = NULL;
  pkrylov_operator A = NULL;
  pkrylov_precond M = NULL;
  pkrylov_solver s = NULL;
  PK_REQUIRE_OK(ctx, pkrylov_context_set_reproducible(ctx, repro));
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
    pkt_gather_global(G, T, nl, tiles, xc, xg);
  else
    for (int64_t q = 0; q < n; q++) xg[pkt_compact_to_global(G, T, nl, tiles, q)] = xc[q];
  free(bg), free(bh), free(xh), free(xc);
  pkrylov_solver_destroy(&s);
  pkrylov_precond_destroy(&M);
  pkrylov_operator_destroy(&A);
  pkrylov_grid_destroy(&g);
  PK_TEST_END();
}

#endif /* PK_GRID_MPI_TEST_H */

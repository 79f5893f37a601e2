/**
 * @file t917-mpi-pipecg-replace.c
 * @brief Pipelined CG's automatic residual replacement distributed over 1 to 4 ranks (every px x py split),
 *        CPU backend: the distributed thin shell at rtol 1e-10 and the distributed 3-D basin of
 *        legacy_examples/mitgcm_style (pkrylov_operator_create_stencil7_dist from each rank's tile) at 1e-13
 *        take at most 1.02 times the iterations of a hand-written PCG on the global problem (pk_rr_test.h,
 *        run on every rank), replace at least once, and the true residual (the distributed product of the
 *        returned x, summed over the ranks here) meets the tolerance; in reproducible mode the gathered x,
 *        the iterations and the replacements are bitwise those of the single-rank reproducible solve.
 */
#include <string.h>

#include "pk_mpi_test.h"
#include "pk_rr_test.h"

/** A context on MPI_COMM_WORLD (CPU). */
static pkrylov_context world_ctx(int reproducible) {
  pkrylov_context ctx = NULL;
  if (pkrylov_context_create(PKRYLOV_BACKEND_CPU, &ctx) || pkrylov_context_set_comm(ctx, MPI_COMM_WORLD) ||
      pkrylov_context_set_reproducible(ctx, reproducible))
    return NULL;
  return ctx;
}

/** The block [i0, i0 + nl) of n cells split into p blocks, block b (the first n mod p get one more). */
static void split(int32_t n, int p, int b, int32_t *i0, int32_t *nl) {
  const int32_t q = n / p, r = n % p;
  *nl = q + (b < r ? 1 : 0);
  *i0 = b * q + (b < r ? b : r);
}

/** ||b - A x|| over the ranks (wet cells: mask NULL = all), A x by the distributed operator. */
static double dist_true_residual(pkrylov_operator Ad, int64_t n, const double *b, const double *x,
                                 const int32_t *mask) {
  double *y = malloc(sizeof(double) * (size_t)n), s = 0.0, g = -1.0;
  if (!y || pkrylov_operator_apply(Ad, PKRYLOV_MEM_HOST, x, y)) {
    free(y);
    return -1.0;
  }
  for (int64_t i = 0; i < n; i++)
    if (!mask || mask[i]) s += (b[i] - y[i]) * (b[i] - y[i]);
  MPI_Allreduce(&s, &g, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
  free(y);
  return sqrt(g);
}

/** Pipelined CG with the automatic rule on the distributed operator Ad (column preconditioner) with the
 *  tolerances of G: x (n local values, from 0) and *res; returns the status. */
static int dist_solve(pkrylov_context ctx, const pk_rr_problem *G, pkrylov_operator Ad, const double *bl,
                      double *x, int64_t n, pkrylov_result *res) {
  pkrylov_precond M = NULL;
  pkrylov_solver s = NULL;
  memset(x, 0, sizeof(double) * (size_t)n);
  int e = pkrylov_precond_create(ctx, Ad, PKRYLOV_PRECOND_COLUMN, 0, PKRYLOV_LAYOUT_AUTO, &M);
  if (!e) e = pkrylov_solver_create(ctx, PKRYLOV_SOLVER_PIPECG, Ad, M, &s);
  if (!e) e = pkrylov_solver_set_tolerances(s, G->rtol, G->atol);
  if (!e) e = pkrylov_solver_set_max_iterations(s, 3000);
  if (!e) e = pkrylov_solver_solve(s, PKRYLOV_MEM_HOST, bl, x);
  if (!e) e = pkrylov_solver_get_result(s, res);
  pkrylov_solver_destroy(&s);
  pkrylov_precond_destroy(&M);
  return e;
}

/**
 * The distributed solve of the global problem G (its operator and right-hand side built on every rank) with
 * operator Ad and the local right-hand side bl (n values, mask ml or NULL): the checks of the file header.
 * ref: the reference CG's iterations.
 */
static void check_dist(pkrylov_context ctx, const pk_rr_problem *G, pkrylov_operator Ad, int64_t n,
                       const double *bl, const int32_t *ml, int ref, const char *what) {
  pkrylov_result res;
  double *x = malloc(sizeof(double) * (size_t)n);
  const int e = x ? dist_solve(ctx, G, Ad, bl, x, n, &res) : PKRYLOV_ERR_OUT_OF_MEMORY;
  PK_EXPECT(e == 0, "%s: solve failed (%d)", what, e);
  if (!e) {
    const double tol = pk_rr_tol(G), tr = dist_true_residual(Ad, n, bl, x, ml);
    PK_EXPECT(res.converged, "%s: %s", what, pkrylov_reason_string(res.reason));
    PK_EXPECT(res.iterations <= PK_RR_ITER_FACTOR * ref, "%s: %d iterations, reference CG %d", what,
              res.iterations, ref);
    PK_EXPECT(tr >= 0 && tr <= tol, "%s: true residual %.3e > tolerance %.3e", what, tr, tol);
    PK_EXPECT(res.residual_replacements >= 1, "%s: no replacement", what);
  }
  free(x);
}

PK_TEST_CASE(thinshell) {
  int rank, size;
  pk_mpi_world(&rank, &size);
  pkrylov_context serial, ctx = world_ctx(0);
  pk_rr_problem G;
  PK_REQUIRE(ctx != NULL, "context");
  PK_REQUIRE_OK(NULL, pkrylov_context_create(PKRYLOV_BACKEND_CPU, &serial));
  const int32_t gnx = 64, gny = 48, nz = 24;
  PK_REQUIRE_OK(serial, pk_rr_thinshell(serial, gnx, gny, nz, &G));
  const int ref = pk_rr_reference_cg(&G, NULL, 3000);
  PK_REQUIRE(ref > 0, "the reference CG did not converge");
  for (int px = 1; px <= size; px++) {
    if (size % px) continue;
    const int py = size / px;
    pkrylov_thinshell_params p;
    pkrylov_operator Ad;
    int32_t i0, nxl, j0, nyl;
    PK_REQUIRE_OK(ctx, pkrylov_thinshell_params_default(gnx, gny, nz, &p));
    PK_REQUIRE_OK(ctx, pkrylov_operator_create_thinshell_dist(ctx, &p, px, py, &Ad));
    PK_REQUIRE_OK(ctx, pkrylov_operator_get_dist_info(Ad, NULL, NULL, &i0, &nxl, &j0, &nyl, NULL, NULL));
    const int64_t n = (int64_t)nxl * nyl * nz;
    double *bl = malloc(sizeof(double) * (size_t)n);
    PK_REQUIRE(bl != NULL, "out of memory");
    pk_mpi_restrict_block(G.b, gnx, gny, nz, i0, nxl, j0, nyl, bl);
    char what[64];
    snprintf(what, sizeof what, "thin shell %d x %d ranks", px, py);
    check_dist(ctx, &G, Ad, n, bl, NULL, ref, what);
    free(bl);
    pkrylov_operator_destroy(&Ad);
  }
  pk_rr_free(&G);
  pkrylov_context_destroy(&serial);
  pkrylov_context_destroy(&ctx);
  PK_TEST_END();
}

/** The basin's tile of rank (rx, ry) of px x py: its operator on ctx, local b and mask (malloc'ed). */
static int basin_tile(pkrylov_context ctx, const pk_rr_problem *G, int px, int py, pkrylov_operator *Ad,
                      double **bl, int32_t **ml, int64_t *n) {
  int rank, size;
  pk_mpi_world(&rank, &size);
  const pk_basin3d *B = &G->basin;
  int32_t i0, nxl, j0, nyl;
  split(B->nx, px, rank % px, &i0, &nxl);
  split(B->ny, py, rank / px, &j0, &nyl);
  *n = (int64_t)nxl * nyl * B->nz;
  double *t[5];
  for (int a = 0; a < 5; a++) t[a] = malloc(sizeof(double) * (size_t)*n);
  *ml = malloc(sizeof(int32_t) * (size_t)*n);
  *bl = t[4];
  if (!t[0] || !t[1] || !t[2] || !t[3] || !t[4] || !*ml) return PKRYLOV_ERR_OUT_OF_MEMORY;
  const double *g[5] = {B->aW, B->aS, B->aV, B->aC, G->b};
  for (int a = 0; a < 5; a++) pk_mpi_restrict_block(g[a], B->nx, B->ny, B->nz, i0, nxl, j0, nyl, t[a]);
  for (int64_t k = 0; k < B->nz; k++)
    for (int64_t j = 0; j < nyl; j++)
      for (int64_t i = 0; i < nxl; i++)
        (*ml)[i + nxl * (j + nyl * k)] = B->mask[i0 + i + (int64_t)B->nx * (j0 + j + (int64_t)B->ny * k)];
  const int e =
      pkrylov_operator_create_stencil7_dist(ctx, px, py, nxl, nyl, B->nz, t[0], t[1], t[2], t[3], *ml, Ad);
  for (int a = 0; a < 4; a++) free(t[a]);
  return e;
}

PK_TEST_CASE(basin) {
  int rank, size;
  pk_mpi_world(&rank, &size);
  pkrylov_context serial, ctx = world_ctx(0);
  pk_rr_problem G;
  PK_REQUIRE(ctx != NULL, "context");
  PK_REQUIRE_OK(NULL, pkrylov_context_create(PKRYLOV_BACKEND_CPU, &serial));
  PK_REQUIRE_OK(serial, pk_rr_basin(serial, 64, 48, 15, &G));
  const int ref = pk_rr_reference_cg(&G, NULL, 3000);
  PK_REQUIRE(ref > 0, "the reference CG did not converge");
  for (int px = 1; px <= size; px++) {
    if (size % px) continue;
    const int py = size / px;
    pkrylov_operator Ad = NULL;
    double *bl = NULL;
    int32_t *ml = NULL;
    int64_t n = 0;
    PK_REQUIRE_OK(ctx, basin_tile(ctx, &G, px, py, &Ad, &bl, &ml, &n));
    char what[64];
    snprintf(what, sizeof what, "basin %d x %d ranks", px, py);
    check_dist(ctx, &G, Ad, n, bl, ml, ref, what);
    free(bl), free(ml);
    pkrylov_operator_destroy(&Ad);
  }
  pk_rr_free(&G);
  pkrylov_context_destroy(&serial);
  pkrylov_context_destroy(&ctx);
  PK_TEST_END();
}

/** Reproducible mode: the distributed solve (gathered) bitwise the single-rank reproducible one, with the
 *  same iterations and replacements (the rule's norms are exact sums and ||A|| an exact maximum). */
PK_TEST_CASE(basin_reproducible) {
  int rank, size;
  pk_mpi_world(&rank, &size);
  pkrylov_context serial, ctx = world_ctx(1);
  pk_rr_problem G;
  PK_REQUIRE(ctx != NULL, "context");
  PK_REQUIRE_OK(NULL, pkrylov_context_create(PKRYLOV_BACKEND_CPU, &serial));
  PK_REQUIRE_OK(serial, pkrylov_context_set_reproducible(serial, 1));
  PK_REQUIRE_OK(serial, pk_rr_basin(serial, 40, 30, 15, &G));
  double *xs = malloc(sizeof(double) * (size_t)G.n), *xg = malloc(sizeof(double) * (size_t)G.n);
  PK_REQUIRE(xs && xg, "out of memory");
  pkrylov_result rs, rd;
  PK_REQUIRE_OK(serial, pk_rr_solve(serial, &G, PKRYLOV_SOLVER_PIPECG, PKRYLOV_REPLACE_AUTO, NULL, xs, &rs));
  PK_EXPECT(rs.converged && rs.residual_replacements > 0, "single rank: %s, %d replacements",
            pkrylov_reason_string(rs.reason), rs.residual_replacements);
  for (int px = 1; px <= size; px++) {
    if (size % px) continue;
    const int py = size / px;
    pkrylov_operator Ad = NULL;
    double *bl = NULL;
    int32_t *ml = NULL;
    int64_t n = 0;
    PK_REQUIRE_OK(ctx, basin_tile(ctx, &G, px, py, &Ad, &bl, &ml, &n));
    double *xl = malloc(sizeof(double) * (size_t)n);
    PK_REQUIRE(xl != NULL, "out of memory");
    PK_REQUIRE_OK(ctx, dist_solve(ctx, &G, Ad, bl, xl, n, &rd));
    PK_REQUIRE_OK(ctx, pkrylov_operator_gather(Ad, 0, xl, rank == 0 ? xg : NULL));
    PK_EXPECT(rd.iterations == rs.iterations && rd.residual_replacements == rs.residual_replacements,
              "%d x %d ranks: %d iterations, %d replacements; single rank %d, %d", px, py, rd.iterations,
              rd.residual_replacements, rs.iterations, rs.residual_replacements);
    if (rank == 0)
      PK_EXPECT(memcmp(xg, xs, sizeof(double) * (size_t)G.n) == 0, "%d x %d ranks: x differs from the single "
                "rank's", px, py);
    pkrylov_operator_destroy(&Ad);
    free(bl), free(ml), free(xl);
  }
  free(xs), free(xg);
  pk_rr_free(&G);
  pkrylov_context_destroy(&serial);
  pkrylov_context_destroy(&ctx);
  PK_TEST_END();
}

PK_MPI_TEST_MAIN(PK_TEST_ENTRY(thinshell), PK_TEST_ENTRY(basin), PK_TEST_ENTRY(basin_reproducible))

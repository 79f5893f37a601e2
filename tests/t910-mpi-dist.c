/**
 * @file t910-mpi-dist.c
 * @brief Distributed operators and solves (run with 1 to 4 ranks, every px x py decomposition of the
 *        ranks): the distributed thin-shell and column-stencil products equal the single-rank operator's
 *        product restricted to the rank's block bitwise (halo exchange included); gather/scatter; CG and
 *        pipelined CG with the column preconditioner take the single-rank solve's iterations and solution
 *        (1e-10) by default and are bitwise identical to it in reproducible mode (and between runs); bad
 *        input gives the same error on every rank.
 */
#include <string.h>

#include "pk_mpi_test.h"

/** A context on MPI_COMM_WORLD (CPU). */
static pkrylov_context world_ctx(void) {
  pkrylov_context ctx = NULL;
  if (pkrylov_context_create(PKRYLOV_BACKEND_CPU, &ctx) || pkrylov_context_set_comm(ctx, MPI_COMM_WORLD))
    return NULL;
  return ctx;
}

/** Distributed product against the single-rank one, bitwise, on every rank; also gather/scatter. */
static int check_product(pkrylov_context ctx, pkrylov_operator Ad, pkrylov_operator Ag, uint64_t seed) {
  int32_t gnx, gny, i0, nxl, j0, nyl, px, py, nz;
  int64_t n, ng;
  PK_REQUIRE_OK(ctx, pkrylov_operator_get_dist_info(Ad, &gnx, &gny, &i0, &nxl, &j0, &nyl, &px, &py));
  PK_REQUIRE_OK(ctx, pkrylov_operator_get_info(Ad, &n, NULL, NULL, NULL, NULL, &nz));
  PK_REQUIRE_OK(NULL, pkrylov_operator_get_info(Ag, &ng, NULL, NULL, NULL, NULL, NULL));
  PK_EXPECT(n == (int64_t)nxl * nyl * nz && ng == (int64_t)gnx * gny * nz, "sizes %lld, %lld", (long long)n,
            (long long)ng);
  double *xg = malloc(sizeof(double) * ng), *yg = malloc(sizeof(double) * ng), *g2 = malloc(sizeof(double) * ng);
  double *xl = malloc(sizeof(double) * n), *yl = malloc(sizeof(double) * n), *ref = malloc(sizeof(double) * n);
  if (!xg || !yg || !g2 || !xl || !yl || !ref) return PK_FAIL;
  uint64_t st = seed;
  for (int64_t i = 0; i < ng; i++) xg[i] = pk_test_rand(&st);
  PK_REQUIRE_OK(NULL, pkrylov_operator_apply(Ag, PKRYLOV_MEM_HOST, xg, yg));
  pk_mpi_restrict_block(xg, gnx, gny, nz, i0, nxl, j0, nyl, xl);
  pk_mpi_restrict_block(yg, gnx, gny, nz, i0, nxl, j0, nyl, ref);
  PK_REQUIRE_OK(ctx, pkrylov_operator_apply(Ad, PKRYLOV_MEM_HOST, xl, yl));
  int64_t bad = -1;
  for (int64_t i = 0; i < n && bad < 0; i++)
    if (memcmp(&yl[i], &ref[i], sizeof(double)) != 0) bad = i;
  PK_EXPECT(bad < 0, "%dx%d: local row %lld: %.17g, single rank %.17g", px, py, (long long)bad,
            bad >= 0 ? yl[bad] : 0.0, bad >= 0 ? ref[bad] : 0.0);
  /* gather to the last rank, scatter back from it */
  int rank, size;
  pk_mpi_world(&rank, &size);
  memset(g2, 0, sizeof(double) * ng);
  PK_REQUIRE_OK(ctx, pkrylov_operator_gather(Ad, size - 1, yl, rank == size - 1 ? g2 : NULL));
  if (rank == size - 1) PK_EXPECT(memcmp(g2, yg, sizeof(double) * ng) == 0, "gathered product = global product");
  memset(yl, 0, sizeof(double) * n);
  PK_REQUIRE_OK(ctx, pkrylov_operator_scatter(Ad, size - 1, rank == size - 1 ? yg : NULL, yl));
  PK_EXPECT(memcmp(yl, ref, sizeof(double) * n) == 0, "scattered = restricted");
  free(xg), free(yg), free(g2), free(xl), free(yl), free(ref);
  return PK_PASS;
}

PK_TEST_CASE(thinshell_product_bitwise) {
  int rank, size;
  pk_mpi_world(&rank, &size);
  pkrylov_context ctx = world_ctx(), c1;
  if (!ctx) return PK_FAIL;
  PK_REQUIRE_OK(NULL, pkrylov_context_create(PKRYLOV_BACKEND_CPU, &c1));
  for (int geo = 0; geo < 2; geo++)
    for (int px = 1; px <= size; px++) {
      if (size % px) continue;
      const int py = size / px;
      pkrylov_thinshell_params p;
      PK_REQUIRE_OK(NULL, pkrylov_thinshell_params_default(13, 11, 6, &p));
      p.geometry = geo ? PKRYLOV_GEOMETRY_UNIFORM : PKRYLOV_GEOMETRY_GNOMONIC;
      pkrylov_operator Ad, Ag;
      PK_REQUIRE_OK(ctx, pkrylov_operator_create_thinshell_dist(ctx, &p, px, py, &Ad));
      PK_REQUIRE_OK(c1, pkrylov_operator_create_thinshell(c1, &p, &Ag));
      if (check_product(ctx, Ad, Ag, 7 + px) != PK_PASS) return PK_FAIL;
      pkrylov_operator_destroy(&Ad);
      pkrylov_operator_destroy(&Ag);
    }
  /* a grid one column wide in x: every block is one column wide in x when px = nx */
  pkrylov_thinshell_params p;
  PK_REQUIRE_OK(NULL, pkrylov_thinshell_params_default(size, 3, 4, &p));
  pkrylov_operator Ad, Ag;
  PK_REQUIRE_OK(ctx, pkrylov_operator_create_thinshell_dist(ctx, &p, size, 1, &Ad));
  PK_REQUIRE_OK(c1, pkrylov_operator_create_thinshell(c1, &p, &Ag));
  if (check_product(ctx, Ad, Ag, 99) != PK_PASS) return PK_FAIL;
  pkrylov_operator_destroy(&Ad);
  pkrylov_operator_destroy(&Ag);
  pkrylov_context_destroy(&c1);
  pkrylov_context_destroy(&ctx);
  PK_TEST_END();
}

/** Global stencil coefficients: the thin shell's, perturbed per face (still symmetric), with a mask. */
static int stencil_global(int32_t nx, int32_t ny, int32_t nz, double **aW, double **aS, double **aV, double **aC,
                          int32_t **mask) {
  const int64_t n = (int64_t)nx * ny * nz;
  *aW = malloc(sizeof(double) * n), *aS = malloc(sizeof(double) * n), *aV = malloc(sizeof(double) * n);
  *aC = malloc(sizeof(double) * n), *mask = malloc(sizeof(int32_t) * n);
  if (!*aW || !*aS || !*aV || !*aC || !*mask) return 1;
  pkrylov_thinshell_params p;
  pkrylov_thinshell_params_default(nx, ny, nz, &p);
  if (pkrylov_thinshell_stencil_coefficients(&p, *aW, *aS, *aV, *aC)) return 1;
  uint64_t st = 5;
  for (int64_t c = 0; c < n; c++) {
    (*aW)[c] *= 1.0 + 0.3 * pk_test_rand(&st);
    (*aS)[c] *= 1.0 + 0.3 * pk_test_rand(&st);
    (*mask)[c] = pk_test_rand(&st) > -0.8; /* about 10 % dry */
    if (c % nx == 0) (*aW)[c] = 1e300;      /* ignored: couples across the west boundary */
  }
  return 0;
}

PK_TEST_CASE(stencil_product_bitwise) {
  int rank, size;
  pk_mpi_world(&rank, &size);
  const int32_t gnx = 11, gny = 9, nz = 5;
  double *aW, *aS, *aV, *aC;
  int32_t *mask;
  if (stencil_global(gnx, gny, nz, &aW, &aS, &aV, &aC, &mask)) return PK_FAIL;
  pkrylov_context ctx = world_ctx(), c1;
  if (!ctx) return PK_FAIL;
  PK_REQUIRE_OK(NULL, pkrylov_context_create(PKRYLOV_BACKEND_CPU, &c1));
  for (int masked = 0; masked < 2; masked++)
    for (int px = 1; px <= size; px++) {
      if (size % px) continue;
      const int py = size / px, rx = rank % px, ry = rank / px;
      /* uneven tiles: the last block of each direction gets the remainder */
      const int32_t bx = gnx / px, by = gny / py;
      const int32_t i0 = rx * bx, nxl = rx == px - 1 ? gnx - i0 : bx, j0 = ry * by, nyl = ry == py - 1 ? gny - j0 : by;
      const int64_t nl = (int64_t)nxl * nyl * nz;
      double *tW = malloc(sizeof(double) * nl), *tS = malloc(sizeof(double) * nl);
      double *tV = malloc(sizeof(double) * nl), *tC = malloc(sizeof(double) * nl);
      double *mk = malloc(sizeof(double) * nl), *gm = malloc(sizeof(double) * (size_t)gnx * gny * nz);
      int32_t *tm = malloc(sizeof(int32_t) * nl);
      if (!tW || !tS || !tV || !tC || !mk || !gm || !tm) return PK_FAIL;
      pk_mpi_restrict_block(aW, gnx, gny, nz, i0, nxl, j0, nyl, tW);
      pk_mpi_restrict_block(aS, gnx, gny, nz, i0, nxl, j0, nyl, tS);
      pk_mpi_restrict_block(aV, gnx, gny, nz, i0, nxl, j0, nyl, tV);
      pk_mpi_restrict_block(aC, gnx, gny, nz, i0, nxl, j0, nyl, tC);
      for (int64_t c = 0; c < (int64_t)gnx * gny * nz; c++) gm[c] = mask[c];
      pk_mpi_restrict_block(gm, gnx, gny, nz, i0, nxl, j0, nyl, mk);
      for (int64_t c = 0; c < nl; c++) tm[c] = (int32_t)mk[c];
      pkrylov_operator Ad, Ag;
      PK_REQUIRE_OK(ctx, pkrylov_operator_create_stencil7_dist(ctx, px, py, nxl, nyl, nz, tW, tS, tV, tC,
                                                               masked ? tm : NULL, &Ad));
      PK_REQUIRE_OK(c1, pkrylov_operator_create_stencil7(c1, gnx, gny, nz, aW, aS, aV, aC, masked ? mask : NULL, &Ag));
      int32_t qi0, qnxl, qgnx;
      PK_REQUIRE_OK(ctx, pkrylov_operator_get_dist_info(Ad, &qgnx, NULL, &qi0, &qnxl, NULL, NULL, NULL, NULL));
      PK_EXPECT(qgnx == gnx && qi0 == i0 && qnxl == nxl, "block %d+%d of %d", qi0, qnxl, qgnx);
      if (check_product(ctx, Ad, Ag, 31 + px) != PK_PASS) return PK_FAIL;
      pkrylov_operator_destroy(&Ad);
      pkrylov_operator_destroy(&Ag);
      free(tW), free(tS), free(tV), free(tC), free(mk), free(gm), free(tm);
    }
  pkrylov_context_destroy(&c1);
  pkrylov_context_destroy(&ctx);
  free(aW), free(aS), free(aV), free(aC), free(mask);
  PK_TEST_END();
}

/**
 * Solve the thin shell 24 x 20 x 16 with b = A * (smooth field) on the ranks (every decomposition) and on
 * one rank; compare iterations and the gathered solution (bitwise when reproducible).
 */
static int solve_compare(int32_t type, int reproducible) {
  int rank, size;
  pk_mpi_world(&rank, &size);
  pkrylov_thinshell_params p;
  PK_REQUIRE_OK(NULL, pkrylov_thinshell_params_default(24, 20, 16, &p));
  p.nu = 1.0; /* conditioned so that a tolerance of 1e-12 gives x to ~1e-11 (the default nu = 10 leaves
                 pipelined CG's attainable error near 1e-9, which different sums then reach differently) */
  const int64_t ng = 24 * 20 * 16;
  double *bg = malloc(sizeof(double) * ng), *xg = malloc(sizeof(double) * ng), *x1 = malloc(sizeof(double) * ng);
  if (!bg || !xg || !x1) return PK_FAIL;
  /* single rank */
  pkrylov_context c1;
  pkrylov_operator A1;
  pkrylov_precond M1;
  pkrylov_solver s1;
  pkrylov_result r1;
  PK_REQUIRE_OK(NULL, pkrylov_context_create(PKRYLOV_BACKEND_CPU, &c1));
  PK_REQUIRE_OK(c1, pkrylov_context_set_reproducible(c1, reproducible));
  PK_REQUIRE_OK(c1, pkrylov_operator_create_thinshell(c1, &p, &A1));
  for (int64_t c = 0; c < ng; c++) xg[c] = sin(0.01 * (double)c) + 0.5;
  PK_REQUIRE_OK(c1, pkrylov_operator_apply(A1, PKRYLOV_MEM_HOST, xg, bg));
  PK_REQUIRE_OK(c1, pkrylov_precond_create(c1, A1, PKRYLOV_PRECOND_COLUMN, 0, PKRYLOV_LAYOUT_AUTO, &M1));
  PK_REQUIRE_OK(c1, pkrylov_solver_create(c1, type, A1, M1, &s1));
  PK_REQUIRE_OK(c1, pkrylov_solver_set_tolerances(s1, 1e-12, 0.0));
  PK_REQUIRE_OK(c1, pkrylov_solver_solve(s1, PKRYLOV_MEM_HOST, bg, x1));
  PK_REQUIRE_OK(c1, pkrylov_solver_get_result(s1, &r1));
  PK_EXPECT(r1.converged, "single rank converged (%s)", pkrylov_reason_string(r1.reason));
  double xmax = 0, emax = 0;
  for (int64_t c = 0; c < ng; c++) xmax = fmax(xmax, fabs(x1[c])), emax = fmax(emax, fabs(x1[c] - xg[c]));
  if (rank == 0) printf("single rank: %d iterations, max error %.3g\n", r1.iterations, emax);

  pkrylov_context ctx = world_ctx();
  if (!ctx) return PK_FAIL;
  PK_REQUIRE_OK(ctx, pkrylov_context_set_reproducible(ctx, reproducible));
  for (int px = 1; px <= size; px++) {
    if (size % px) continue;
    pkrylov_operator A;
    pkrylov_precond M;
    pkrylov_solver s;
    pkrylov_result res;
    PK_REQUIRE_OK(ctx, pkrylov_operator_create_thinshell_dist(ctx, &p, px, size / px, &A));
    int64_t n;
    int32_t i0, nxl, j0, nyl;
    PK_REQUIRE_OK(ctx, pkrylov_operator_get_info(A, &n, NULL, NULL, NULL, NULL, NULL));
    PK_REQUIRE_OK(ctx, pkrylov_operator_get_dist_info(A, NULL, NULL, &i0, &nxl, &j0, &nyl, NULL, NULL));
    double *b = malloc(sizeof(double) * n), *x = malloc(sizeof(double) * n);
    if (!b || !x) return PK_FAIL;
    pk_mpi_restrict_block(bg, 24, 20, 16, i0, nxl, j0, nyl, b);
    PK_REQUIRE_OK(ctx, pkrylov_precond_create(ctx, A, PKRYLOV_PRECOND_COLUMN, 0, PKRYLOV_LAYOUT_AUTO, &M));
    PK_REQUIRE_OK(ctx, pkrylov_solver_create(ctx, type, A, M, &s));
    PK_REQUIRE_OK(ctx, pkrylov_solver_set_tolerances(s, 1e-12, 0.0));
    for (int run = 0; run < 2; run++) {
      PK_REQUIRE_OK(ctx, pkrylov_solver_solve(s, PKRYLOV_MEM_HOST, b, x));
      PK_REQUIRE_OK(ctx, pkrylov_solver_get_result(s, &res));
      PK_EXPECT(res.converged, "%dx%d converged (%s)", px, size / px, pkrylov_reason_string(res.reason));
      PK_EXPECT(res.iterations == r1.iterations, "%dx%d: %d iterations, single rank %d", px, size / px,
                res.iterations, r1.iterations);
      PK_REQUIRE_OK(ctx, pkrylov_operator_gather(A, 0, x, rank == 0 ? xg : NULL));
      if (rank == 0) {
        if (reproducible) {
          PK_EXPECT(memcmp(xg, x1, sizeof(double) * ng) == 0, "%dx%d run %d: reproducible solution differs from "
                    "the single-rank one", px, size / px, run);
          PK_EXPECT(memcmp(&res.final_residual, &r1.final_residual, sizeof(double)) == 0,
                    "final residual %.17g vs %.17g", res.final_residual, r1.final_residual);
        } else {
          double dmax = 0;
          for (int64_t c = 0; c < ng; c++) dmax = fmax(dmax, fabs(xg[c] - x1[c]));
          PK_EXPECT(dmax <= 1e-10 * xmax, "%dx%d: max |x - x_1rank| = %.3g (max |x| %.3g)", px, size / px, dmax,
                    xmax);
        }
      }
    }
    pkrylov_solver_destroy(&s);
    pkrylov_precond_destroy(&M);
    pkrylov_operator_destroy(&A);
    free(b), free(x);
  }
  pkrylov_context_destroy(&ctx);
  pkrylov_solver_destroy(&s1);
  pkrylov_precond_destroy(&M1);
  pkrylov_operator_destroy(&A1);
  pkrylov_context_destroy(&c1);
  free(bg), free(xg), free(x1);
  return pk_test_failures ? PK_FAIL : PK_PASS;
}

PK_TEST_CASE(cg_column) { return solve_compare(PKRYLOV_SOLVER_CG, 0); }
PK_TEST_CASE(pipecg_column) { return solve_compare(PKRYLOV_SOLVER_PIPECG, 0); }
PK_TEST_CASE(cg_reproducible) { return solve_compare(PKRYLOV_SOLVER_CG, 1); }
PK_TEST_CASE(pipecg_reproducible) { return solve_compare(PKRYLOV_SOLVER_PIPECG, 1); }

/** Reverse communication on distributed vectors, the library summing over the communicator: run rci to
 *  its end answering MATVEC with A and PRECOND with M (both collective); returns the iterations or -1. */
static int rci_run(pkrylov_rci r, pkrylov_operator A, pkrylov_precond M, const double *b, double *x) {
  if (pkrylov_rci_start(r, PKRYLOV_MEM_HOST, b, x, 0)) return -1;
  for (;;) {
    int32_t req;
    double *in, *out;
    if (pkrylov_rci_step(r, &req, &in, &out, NULL, NULL)) return -1;
    if (req == PKRYLOV_RCI_DONE) break;
    if (req == PKRYLOV_RCI_MATVEC && pkrylov_operator_apply(A, PKRYLOV_MEM_HOST, in, out)) return -1;
    if (req == PKRYLOV_RCI_PRECOND && pkrylov_precond_apply(M, PKRYLOV_MEM_HOST, in, out)) return -1;
  }
  pkrylov_result res;
  if (pkrylov_rci_get_result(r, &res) || !res.converged) return -1;
  return res.iterations;
}

/** One solver type (CG family: the same iterations as on one rank; BiCGStab: within 2, its sums rounded in
 *  another order). */
static int rci_distributed_type(int32_t type) {
  int rank, size;
  pk_mpi_world(&rank, &size);
  pkrylov_thinshell_params p;
  PK_REQUIRE_OK(NULL, pkrylov_thinshell_params_default(16, 12, 10, &p));
  p.nu = 1.0;
  const int64_t ng = 16 * 12 * 10;
  double *bg = malloc(sizeof(double) * ng), *x1 = malloc(sizeof(double) * ng), *xg = malloc(sizeof(double) * ng);
  if (!bg || !x1 || !xg) return PK_FAIL;
  pkrylov_context c1, ctx = world_ctx();
  pkrylov_operator A1, A;
  pkrylov_precond M1, M;
  pkrylov_rci r1, r;
  if (!ctx) return PK_FAIL;
  PK_REQUIRE_OK(NULL, pkrylov_context_create(PKRYLOV_BACKEND_CPU, &c1));
  PK_REQUIRE_OK(c1, pkrylov_operator_create_thinshell(c1, &p, &A1));
  for (int64_t c = 0; c < ng; c++) xg[c] = cos(0.003 * (double)c);
  PK_REQUIRE_OK(c1, pkrylov_operator_apply(A1, PKRYLOV_MEM_HOST, xg, bg));
  PK_REQUIRE_OK(c1, pkrylov_precond_create(c1, A1, PKRYLOV_PRECOND_COLUMN, 0, PKRYLOV_LAYOUT_AUTO, &M1));
  PK_REQUIRE_OK(c1, pkrylov_rci_create(c1, type, ng, 1, 0, &r1));
  PK_REQUIRE_OK(c1, pkrylov_rci_set_tolerances(r1, 1e-12, 0.0));
  const int it1 = rci_run(r1, A1, M1, bg, x1);
  PK_EXPECT(it1 > 0, "single-rank reverse communication converged");
  double xmax = 0;
  for (int64_t c = 0; c < ng; c++) xmax = fmax(xmax, fabs(x1[c]));
  PK_REQUIRE_OK(ctx, pkrylov_operator_create_thinshell_dist(ctx, &p, 1, size, &A));
  int64_t n;
  int32_t i0, nxl, j0, nyl;
  PK_REQUIRE_OK(ctx, pkrylov_operator_get_info(A, &n, NULL, NULL, NULL, NULL, NULL));
  PK_REQUIRE_OK(ctx, pkrylov_operator_get_dist_info(A, NULL, NULL, &i0, &nxl, &j0, &nyl, NULL, NULL));
  double *b = malloc(sizeof(double) * n), *x = malloc(sizeof(double) * n);
  if (!b || !x) return PK_FAIL;
  pk_mpi_restrict_block(bg, 16, 12, 10, i0, nxl, j0, nyl, b);
  PK_REQUIRE_OK(ctx, pkrylov_precond_create(ctx, A, PKRYLOV_PRECOND_COLUMN, 0, PKRYLOV_LAYOUT_AUTO, &M));
  PK_REQUIRE_OK(ctx, pkrylov_rci_create(ctx, type, n, 1, 0, &r));
  PK_REQUIRE_OK(ctx, pkrylov_rci_set_tolerances(r, 1e-12, 0.0));
  const int it = rci_run(r, A, M, b, x);
  PK_EXPECT(it > 0 && abs(it - it1) <= (type == PKRYLOV_SOLVER_BICGSTAB ? 2 : 0), "type %d, %d ranks: %d iterations, one rank %d", type, size, it, it1);
  PK_REQUIRE_OK(ctx, pkrylov_operator_gather(A, 0, x, rank == 0 ? xg : NULL));
  if (rank == 0) {
    double dmax = 0;
    for (int64_t c = 0; c < ng; c++) dmax = fmax(dmax, fabs(xg[c] - x1[c]));
    PK_EXPECT(dmax <= 1e-10 * xmax, "max |x - x_1rank| = %.3g (max |x| %.3g)", dmax, xmax);
  }
  pkrylov_rci_destroy(&r);
  pkrylov_rci_destroy(&r1);
  pkrylov_precond_destroy(&M);
  pkrylov_precond_destroy(&M1);
  pkrylov_operator_destroy(&A);
  pkrylov_operator_destroy(&A1);
  pkrylov_context_destroy(&ctx);
  pkrylov_context_destroy(&c1);
  free(bg), free(x1), free(xg), free(b), free(x);
  PK_TEST_END();
}

PK_TEST_CASE(rci_distributed) { return rci_distributed_type(PKRYLOV_SOLVER_PIPECG); }
PK_TEST_CASE(rci_distributed_cg) { return rci_distributed_type(PKRYLOV_SOLVER_CG); }
PK_TEST_CASE(rci_distributed_bicgstab) { return rci_distributed_type(PKRYLOV_SOLVER_BICGSTAB); }

/** Every rank must get code; the message must contain needle on every rank. */
static void expect_everywhere(pkrylov_context ctx, int got, int code, const char *needle) {
  PK_EXPECT(got == code, "got %d (%s), expected %d", got, pkrylov_error_string(got), code);
  if (got == code && needle) PK_EXPECT(pk_test_msg_has(ctx, needle), "message");
}

PK_TEST_CASE(bad_input_every_rank) {
  int rank, size;
  pk_mpi_world(&rank, &size);
  pkrylov_context ctx = world_ctx();
  if (!ctx) return PK_FAIL;
  pkrylov_thinshell_params p;
  pkrylov_operator A = NULL;
  PK_REQUIRE_OK(NULL, pkrylov_thinshell_params_default(8, 6, 4, &p));
  /* px * py != ranks */
  expect_everywhere(ctx, pkrylov_operator_create_thinshell_dist(ctx, &p, size + 1, 1, &A), PKRYLOV_ERR_SIZE_MISMATCH,
                    "ranks");
  /* a rank with no columns */
  pkrylov_thinshell_params q = p;
  q.nx = size - 1 > 0 ? size - 1 : 0;
  if (size > 1)
    expect_everywhere(ctx, pkrylov_operator_create_thinshell_dist(ctx, &q, size, 1, &A), PKRYLOV_ERR_INVALID_SIZE,
                      "no columns");
  /* parameters that differ between ranks (the last rank has one more level) */
  q = p;
  if (rank == size - 1 && size > 1) q.nz = p.nz + 1;
  if (size > 1)
    expect_everywhere(ctx, pkrylov_operator_create_thinshell_dist(ctx, &q, size, 1, &A), PKRYLOV_ERR_INVALID_VALUE,
                      "p->nz");
  /* a bad value on one rank only: the same error everywhere, naming that rank */
  q = p;
  if (rank == size - 1) q.H = -1.0;
  expect_everywhere(ctx, pkrylov_operator_create_thinshell_dist(ctx, &q, size, 1, &A), PKRYLOV_ERR_INVALID_VALUE,
                    "p->H");
  /* stencil tiles that do not add up: the last rank's tile is one row taller in a 1 x size arrangement */
  {
    const int32_t nx = 3, ny = 2 + (rank == size - 1 && size > 1), nz = 2;
    double c[3 * 3 * 2];
    for (int i = 0; i < 18; i++) c[i] = -1.0;
    if (size > 1)
      expect_everywhere(ctx, pkrylov_operator_create_stencil7_dist(ctx, size, 1, nx, ny, nz, c, c, c, c, NULL, &A),
                        PKRYLOV_ERR_SIZE_MISMATCH, "ny");
  }
  /* a tile of 2^31-1 x 2^31-1 columns (issue 14 item 13: nx + 1 overflowed int before the size check; UBSan)
   */
  {
    double c[1] = {-1.0};
    expect_everywhere(
        ctx,
        pkrylov_operator_create_stencil7_dist(ctx, size, 1, INT32_MAX, INT32_MAX, 1, c, c, c, c, NULL, &A),
        PKRYLOV_ERR_INVALID_SIZE, "too many cells");
  }
  PK_EXPECT(A == NULL, "no operator after the errors");
  /* solves: NaN in b on one rank, a different rtol on one rank */
  pkrylov_precond M;
  pkrylov_solver s;
  PK_REQUIRE_OK(ctx, pkrylov_operator_create_thinshell_dist(ctx, &p, size, 1, &A));
  PK_REQUIRE_OK(ctx, pkrylov_precond_create(ctx, A, PKRYLOV_PRECOND_COLUMN, 0, PKRYLOV_LAYOUT_AUTO, &M));
  PK_REQUIRE_OK(ctx, pkrylov_solver_create(ctx, PKRYLOV_SOLVER_PIPECG, A, M, &s));
  int64_t n;
  PK_REQUIRE_OK(ctx, pkrylov_operator_get_info(A, &n, NULL, NULL, NULL, NULL, NULL));
  double *b = malloc(sizeof(double) * n), *x = calloc((size_t)n, sizeof(double));
  if (!b || !x) return PK_FAIL;
  for (int64_t i = 0; i < n; i++) b[i] = 1.0;
  if (rank == size - 1) b[n / 2] = NAN;
  expect_everywhere(ctx, pkrylov_solver_solve(s, PKRYLOV_MEM_HOST, b, x), PKRYLOV_ERR_NOT_FINITE, "'b'");
  b[n / 2] = 1.0;
  if (size > 1) {
    PK_REQUIRE_OK(ctx, pkrylov_solver_set_tolerances(s, rank == 0 ? 1e-6 : 1e-8, 0.0));
    expect_everywhere(ctx, pkrylov_solver_solve(s, PKRYLOV_MEM_HOST, b, x), PKRYLOV_ERR_INVALID_VALUE, "rtol");
    PK_REQUIRE_OK(ctx, pkrylov_solver_set_tolerances(s, 1e-8, 0.0));
  }
  PK_REQUIRE_OK(ctx, pkrylov_solver_solve(s, PKRYLOV_MEM_HOST, b, x)); /* and a good solve afterwards */
  pkrylov_result res;
  PK_REQUIRE_OK(ctx, pkrylov_solver_get_result(s, &res));
  PK_EXPECT(res.converged, "converged after the errors");
  /* reproducible mode on some ranks only */
  if (size > 1) {
    PK_REQUIRE_OK(ctx, pkrylov_context_set_reproducible(ctx, rank == 0));
    expect_everywhere(ctx, pkrylov_solver_solve(s, PKRYLOV_MEM_HOST, b, x), PKRYLOV_ERR_INVALID_VALUE,
                      "reproducible");
    PK_REQUIRE_OK(ctx, pkrylov_context_set_reproducible(ctx, 0));
  }
  /* gather with a bad root */
  expect_everywhere(ctx, pkrylov_operator_gather(A, size, x, x), PKRYLOV_ERR_INVALID_VALUE, "'root'");
  pkrylov_solver_destroy(&s);
  pkrylov_precond_destroy(&M);
  pkrylov_operator_destroy(&A);
  pkrylov_context_destroy(&ctx);
  free(b), free(x);
  PK_TEST_END();
}

PK_MPI_TEST_MAIN(PK_TEST_ENTRY(thinshell_product_bitwise), PK_TEST_ENTRY(stencil_product_bitwise),
                 PK_TEST_ENTRY(cg_column), PK_TEST_ENTRY(pipecg_column), PK_TEST_ENTRY(cg_reproducible),
                 PK_TEST_ENTRY(pipecg_reproducible), PK_TEST_ENTRY(rci_distributed), PK_TEST_ENTRY(rci_distributed_cg),
                 PK_TEST_ENTRY(rci_distributed_bicgstab),
                 PK_TEST_ENTRY(bad_input_every_rank))

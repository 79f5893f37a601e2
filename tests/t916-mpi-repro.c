/**
 * @file t916-mpi-repro.c
 * @brief Reproducible mode for every solver type (run with 1 to 4 ranks): BiCGStab, pipelined BiCGStab,
 *        GMRES, FGMRES, pipelined GMRES and CA-GMRES (a fixed step, and step 0 = automatic, which
 *        reproducible mode fixes instead of timing) on the distributed thin shell (every px x py
 *        decomposition; single-reduction CG too) and on a distributed nonsymmetric CSR (blocks of rows): the
 *        iterations, the gathered solution and the final residual are bitwise those of the single-rank
 *        reproducible solve, on a second run too; the single-rank reproducible solutions meet the tolerance
 *        on a residual the test recomputes. The recurrence stop rule and the minimum-residual iterate (CG,
 *        pipelined CG, single-reduction CG, an iteration cap above an earlier minimum) distributed: bitwise
 *        the single-rank solve, the minimum's iteration and value included.
 */
#include <string.h>

#include "pk_mpi_test.h"

static pkrylov_context world_ctx(void) {
  pkrylov_context ctx = NULL;
  if (pkrylov_context_create(PKRYLOV_BACKEND_CPU, &ctx) || pkrylov_context_set_comm(ctx, MPI_COMM_WORLD) ||
      pkrylov_context_set_reproducible(ctx, 1))
    return NULL;
  return ctx;
}

static const int32_t types[] = {PKRYLOV_SOLVER_BICGSTAB, PKRYLOV_SOLVER_PIPEBICGSTAB, PKRYLOV_SOLVER_GMRES,
                                PKRYLOV_SOLVER_FGMRES,   PKRYLOV_SOLVER_PIPEGMRES,    PKRYLOV_SOLVER_CAGMRES,
                                PKRYLOV_SOLVER_CAGMRES,  PKRYLOV_SOLVER_SRCG};
static const int32_t steps[] = {0, 0, 0, 0, 0, 4, 0, 0};
#define NTYPES 8        /* all, on the symmetric definite thin shell */
#define NTYPES_NONSYM 7 /* the nonsymmetric CSR: all but single-reduction CG */

/** Solve with solver k of the table (restart 12) and return the result; x in, x out. */
static int solve(pkrylov_context ctx, pkrylov_operator A, pkrylov_precond M, int k, const double *b,
                 double *x, pkrylov_result *res) {
  pkrylov_solver s;
  PK_REQUIRE_OK(ctx, pkrylov_solver_create(ctx, types[k], A, M, &s));
  PK_REQUIRE_OK(ctx, pkrylov_solver_set_tolerances(s, 1e-10, 0.0));
  PK_REQUIRE_OK(ctx, pkrylov_solver_set_max_iterations(s, 600));
  if (types[k] >= PKRYLOV_SOLVER_GMRES)
    PK_REQUIRE_OK(ctx, pkrylov_solver_set_restart(s, 12));
  if (types[k] == PKRYLOV_SOLVER_CAGMRES)
    PK_REQUIRE_OK(ctx, pkrylov_solver_set_step(s, steps[k]));
  PK_REQUIRE_OK(ctx, pkrylov_solver_solve(s, PKRYLOV_MEM_HOST, b, x));
  PK_REQUIRE_OK(ctx, pkrylov_solver_get_result(s, res));
  pkrylov_solver_destroy(&s);
  return PK_PASS;
}

/** The distributed result (gathered xg on rank 0) against the single-rank one, bitwise. */
static void compare(int rank, int k, const char *what, const pkrylov_result *r, const pkrylov_result *r1,
                    const double *xg, const double *x1, int64_t n) {
  PK_EXPECT(r->converged, "%s, type %d step %d: converged (%s)", what, types[k], steps[k],
            pkrylov_reason_string(r->reason));
  PK_EXPECT(r->iterations == r1->iterations, "%s, type %d step %d: %d iterations, single rank %d", what,
            types[k], steps[k], r->iterations, r1->iterations);
  PK_EXPECT(memcmp(&r->final_residual, &r1->final_residual, sizeof(double)) == 0,
            "%s, type %d: final residual %.17g vs %.17g", what, types[k], r->final_residual,
            r1->final_residual);
  if (rank == 0)
    PK_EXPECT(memcmp(xg, x1, sizeof(double) * (size_t)n) == 0,
              "%s, type %d step %d: solution differs from the "
              "single-rank one",
              what, types[k], steps[k]);
}

/**
 * The single-rank reference: every type solved on (c1, A1, M1) into x1 + k ng, results r1[k]; each must
 * converge with ||b - A x|| / ||b|| <= 1.01e-10, recomputed by the test.
 */
static int single_rank_solves(pkrylov_context c1, pkrylov_operator A1, pkrylov_precond M1, const double *bg,
                              int64_t ng, double *x1, pkrylov_result *r1, int ntypes) {
  for (int k = 0; k < ntypes; k++) {
    memset(x1 + k * ng, 0, sizeof(double) * ng);
    if (solve(c1, A1, M1, k, bg, x1 + k * ng, &r1[k]) != PK_PASS)
      return PK_FAIL;
    const double rr = pk_test_true_relres(A1, bg, x1 + k * ng); /* recomputed by the test */
    PK_EXPECT(r1[k].converged && rr <= 1.01e-10, "type %d: single rank: %s, ||b - A x|| / ||b|| = %.3g",
              types[k], pkrylov_reason_string(r1[k].reason), rr);
  }
  return PK_PASS;
}

PK_TEST_CASE(thinshell_all_solvers) {
  int rank, size;
  pk_mpi_world(&rank, &size);
  pkrylov_thinshell_params p;
  PK_REQUIRE_OK(NULL, pkrylov_thinshell_params_default(20, 16, 10, &p));
  p.nu = 1.0;
  const int64_t ng = 20 * 16 * 10;
  double *bg = malloc(sizeof(double) * ng), *xt = malloc(sizeof(double) * ng),
         *xg = malloc(sizeof(double) * ng);
  double *x1 = malloc(sizeof(double) * NTYPES * ng);
  pkrylov_result r1[NTYPES];
  if (!bg || !xt || !xg || !x1)
    return PK_FAIL;
  pkrylov_context c1;
  pkrylov_operator A1;
  pkrylov_precond M1;
  PK_REQUIRE_OK(NULL, pkrylov_context_create(PKRYLOV_BACKEND_CPU, &c1));
  PK_REQUIRE_OK(c1, pkrylov_context_set_reproducible(c1, 1));
  PK_REQUIRE_OK(c1, pkrylov_operator_create_thinshell(c1, &p, &A1));
  for (int64_t c = 0; c < ng; c++)
    xt[c] = cos(0.013 * (double)c) + 0.25;
  PK_REQUIRE_OK(c1, pkrylov_operator_apply(A1, PKRYLOV_MEM_HOST, xt, bg));
  PK_REQUIRE_OK(c1, pkrylov_precond_create(c1, A1, PKRYLOV_PRECOND_COLUMN, 0, PKRYLOV_LAYOUT_AUTO, &M1));
  if (single_rank_solves(c1, A1, M1, bg, ng, x1, r1, NTYPES) != PK_PASS)
    return PK_FAIL;
  pkrylov_context ctx = world_ctx();
  if (!ctx)
    return PK_FAIL;
  for (int px = 1; px <= size; px++) {
    if (size % px)
      continue;
    pkrylov_operator A;
    pkrylov_precond M;
    PK_REQUIRE_OK(ctx, pkrylov_operator_create_thinshell_dist(ctx, &p, px, size / px, &A));
    int64_t n;
    PK_REQUIRE_OK(ctx, pkrylov_operator_get_info(A, &n, NULL, NULL, NULL, NULL, NULL));
    double *b = malloc(sizeof(double) * n), *x = malloc(sizeof(double) * n);
    if (!b || !x)
      return PK_FAIL;
    PK_REQUIRE_OK(ctx, pkrylov_operator_scatter(A, 0, rank == 0 ? bg : NULL, b));
    PK_REQUIRE_OK(ctx, pkrylov_precond_create(ctx, A, PKRYLOV_PRECOND_COLUMN, 0, PKRYLOV_LAYOUT_AUTO, &M));
    for (int k = 0; k < NTYPES; k++)
      for (int run = 0; run < (px == 1 ? 2 : 1); run++) {
        pkrylov_result r;
        memset(x, 0, sizeof(double) * n);
        if (solve(ctx, A, M, k, b, x, &r) != PK_PASS)
          return PK_FAIL;
        PK_REQUIRE_OK(ctx, pkrylov_operator_gather(A, 0, x, rank == 0 ? xg : NULL));
        char what[64];
        snprintf(what, sizeof what, "thin shell %dx%d run %d", px, size / px, run);
        compare(rank, k, what, &r, &r1[k], xg, x1 + k * ng, ng);
      }
    pkrylov_precond_destroy(&M);
    pkrylov_operator_destroy(&A);
    free(b), free(x);
  }
  pkrylov_context_destroy(&ctx);
  pkrylov_precond_destroy(&M1);
  pkrylov_operator_destroy(&A1);
  pkrylov_context_destroy(&c1);
  free(bg), free(xt), free(xg), free(x1);
  PK_TEST_END();
}

PK_TEST_CASE(csr_all_solvers) {
  /* the nonsymmetric convection-diffusion operator (CSR, k-slow) on blocks of rows, Jacobi */
  int rank, size;
  pk_mpi_world(&rank, &size);
  const double wind[3] = {1.5, -0.7, 0.3};
  pkrylov_context c1;
  pkrylov_operator A1;
  pkrylov_precond M1;
  PK_REQUIRE_OK(NULL, pkrylov_context_create(PKRYLOV_BACKEND_CPU, &c1));
  PK_REQUIRE_OK(c1, pkrylov_context_set_reproducible(c1, 1));
  PK_REQUIRE_OK(c1, pkrylov_operator_create_convdiff(c1, 14, 12, 9, wind, 4.0, &A1));
  int64_t ng, nnz;
  PK_REQUIRE_OK(c1, pkrylov_operator_get_info(A1, &ng, &nnz, NULL, NULL, NULL, NULL));
  int64_t *rp = malloc(sizeof(int64_t) * (ng + 1)), *ci = malloc(sizeof(int64_t) * nnz);
  double *v = malloc(sizeof(double) * nnz), *bg = malloc(sizeof(double) * ng),
         *xt = malloc(sizeof(double) * ng);
  double *xg = malloc(sizeof(double) * ng), *x1 = malloc(sizeof(double) * NTYPES * ng);
  pkrylov_result r1[NTYPES];
  if (!rp || !ci || !v || !bg || !xt || !xg || !x1)
    return PK_FAIL;
  PK_REQUIRE_OK(c1, pkrylov_operator_get_csr(A1, rp, ci, v));
  for (int64_t c = 0; c < ng; c++)
    xt[c] = sin(0.021 * (double)c) - 0.3;
  PK_REQUIRE_OK(c1, pkrylov_operator_apply(A1, PKRYLOV_MEM_HOST, xt, bg));
  PK_REQUIRE_OK(c1, pkrylov_precond_create(c1, A1, PKRYLOV_PRECOND_JACOBI, 0, PKRYLOV_LAYOUT_AUTO, &M1));
  if (single_rank_solves(c1, A1, M1, bg, ng, x1, r1, NTYPES_NONSYM) != PK_PASS)
    return PK_FAIL;
  /* uneven blocks: rank r gets a share proportional to r + 1 */
  const int64_t tot = (int64_t)size * (size + 1) / 2;
  int64_t a = 0;
  for (int q = 0; q < rank; q++)
    a += q + 1;
  const int64_t r0 = ng * a / tot, r1b = ng * (a + rank + 1) / tot, nl = r1b - r0;
  int64_t *lrp = malloc(sizeof(int64_t) * (nl + 1));
  double *x = malloc(sizeof(double) * nl);
  if (!lrp || !x)
    return PK_FAIL;
  for (int64_t r = 0; r <= nl; r++)
    lrp[r] = rp[r0 + r] - rp[r0];
  pkrylov_context ctx = world_ctx();
  if (!ctx)
    return PK_FAIL;
  pkrylov_operator A;
  pkrylov_precond M;
  PK_REQUIRE_OK(ctx, pkrylov_operator_create_csr_dist(ctx, ng, r0, nl, 0, lrp, ci + rp[r0], v + rp[r0], &A));
  PK_REQUIRE_OK(ctx, pkrylov_precond_create(ctx, A, PKRYLOV_PRECOND_JACOBI, 0, PKRYLOV_LAYOUT_AUTO, &M));
  for (int k = 0; k < NTYPES_NONSYM; k++) {
    pkrylov_result r;
    memset(x, 0, sizeof(double) * nl);
    if (solve(ctx, A, M, k, bg + r0, x, &r) != PK_PASS)
      return PK_FAIL;
    PK_REQUIRE_OK(ctx, pkrylov_operator_gather(A, 0, x, rank == 0 ? xg : NULL));
    compare(rank, k, "convection-diffusion CSR", &r, &r1[k], xg, x1 + k * ng, ng);
  }
  pkrylov_precond_destroy(&M);
  pkrylov_operator_destroy(&A);
  pkrylov_context_destroy(&ctx);
  pkrylov_precond_destroy(&M1);
  pkrylov_operator_destroy(&A1);
  pkrylov_context_destroy(&c1);
  free(rp), free(ci), free(v), free(bg), free(xt), free(xg), free(x1), free(lrp), free(x);
  PK_TEST_END();
}

/** One solve of type with the recurrence rule and the minimum-residual iterate, an iteration cap. */
static int solve_rule(pkrylov_context ctx, pkrylov_operator A, pkrylov_precond M, int32_t type, int32_t maxit,
                      const double *b, double *x, pkrylov_result *res) {
  pkrylov_solver s;
  PK_REQUIRE_OK(ctx, pkrylov_solver_create(ctx, type, A, M, &s));
  PK_REQUIRE_OK(ctx, pkrylov_solver_set_tolerances(s, 0.0, 1e-300));
  PK_REQUIRE_OK(ctx, pkrylov_solver_set_max_iterations(s, maxit));
  PK_REQUIRE_OK(ctx, pkrylov_solver_set_stop_rule(s, PKRYLOV_STOP_RECURRENCE));
  PK_REQUIRE_OK(ctx, pkrylov_solver_set_min_residual(s, 1));
  PK_REQUIRE_OK(ctx, pkrylov_solver_solve(s, PKRYLOV_MEM_HOST, b, x));
  PK_REQUIRE_OK(ctx, pkrylov_solver_get_result(s, res));
  pkrylov_solver_destroy(&s);
  return PK_PASS;
}

PK_TEST_CASE(thinshell_stop_rule_minres) {
  int rank, size;
  pk_mpi_world(&rank, &size);
  pkrylov_thinshell_params p;
  PK_REQUIRE_OK(NULL, pkrylov_thinshell_params_default(16, 12, 8, &p));
  const int64_t ng = 16 * 12 * 8;
  double *bg = malloc(sizeof(double) * ng), *x1 = malloc(sizeof(double) * ng),
         *xg = malloc(sizeof(double) * ng);
  if (!bg || !x1 || !xg)
    return PK_FAIL;
  uint64_t st = 3;
  for (int64_t c = 0; c < ng; c++)
    bg[c] = pk_test_rand(&st);
  pkrylov_context c1;
  pkrylov_operator A1;
  pkrylov_precond M1;
  PK_REQUIRE_OK(NULL, pkrylov_context_create(PKRYLOV_BACKEND_CPU, &c1));
  PK_REQUIRE_OK(c1, pkrylov_context_set_reproducible(c1, 1));
  PK_REQUIRE_OK(c1, pkrylov_operator_create_thinshell(c1, &p, &A1));
  PK_REQUIRE_OK(c1, pkrylov_precond_create(c1, A1, PKRYLOV_PRECOND_COLUMN, 0, PKRYLOV_LAYOUT_AUTO, &M1));
  pkrylov_context ctx = world_ctx();
  if (!ctx)
    return PK_FAIL;
  pkrylov_operator A;
  pkrylov_precond M;
  PK_REQUIRE_OK(ctx, pkrylov_operator_create_thinshell_dist(ctx, &p, size, 1, &A));
  int64_t n;
  PK_REQUIRE_OK(ctx, pkrylov_operator_get_info(A, &n, NULL, NULL, NULL, NULL, NULL));
  double *b = malloc(sizeof(double) * n), *x = malloc(sizeof(double) * n);
  if (!b || !x)
    return PK_FAIL;
  PK_REQUIRE_OK(ctx, pkrylov_operator_scatter(A, 0, rank == 0 ? bg : NULL, b));
  PK_REQUIRE_OK(ctx, pkrylov_precond_create(ctx, A, PKRYLOV_PRECOND_COLUMN, 0, PKRYLOV_LAYOUT_AUTO, &M));
  static const int32_t cg_types[3] = {PKRYLOV_SOLVER_CG, PKRYLOV_SOLVER_PIPECG, PKRYLOV_SOLVER_SRCG};
  static const int32_t caps[2] = {23, 61};
  for (int t = 0; t < 3; t++)
    for (int c = 0; c < 2; c++) {
      pkrylov_result r1, r;
      memset(x1, 0, sizeof(double) * ng);
      memset(x, 0, sizeof(double) * n);
      if (solve_rule(c1, A1, M1, cg_types[t], caps[c], bg, x1, &r1) != PK_PASS ||
          solve_rule(ctx, A, M, cg_types[t], caps[c], b, x, &r) != PK_PASS)
        return PK_FAIL;
      PK_REQUIRE_OK(ctx, pkrylov_operator_gather(A, 0, x, rank == 0 ? xg : NULL));
      PK_EXPECT(r.iterations == caps[c] && r1.iterations == caps[c] && r.true_residual_checks == 0,
                "type %d cap %d: %d / %d iterations", cg_types[t], caps[c], r.iterations, r1.iterations);
      PK_EXPECT(memcmp(&r.final_residual, &r1.final_residual, sizeof(double)) == 0 &&
                    memcmp(&r.min_residual, &r1.min_residual, sizeof(double)) == 0 &&
                    r.min_residual_iteration == r1.min_residual_iteration && r.min_residual_iteration >= 0,
                "type %d cap %d: final %.17g / %.17g, min %.17g / %.17g at %d / %d", cg_types[t], caps[c],
                r.final_residual, r1.final_residual, r.min_residual, r1.min_residual,
                r.min_residual_iteration, r1.min_residual_iteration);
      if (rank == 0)
        PK_EXPECT(memcmp(xg, x1, sizeof(double) * (size_t)ng) == 0,
                  "type %d cap %d: x differs from one rank's", cg_types[t], caps[c]);
    }
  pkrylov_precond_destroy(&M);
  pkrylov_operator_destroy(&A);
  pkrylov_context_destroy(&ctx);
  pkrylov_precond_destroy(&M1);
  pkrylov_operator_destroy(&A1);
  pkrylov_context_destroy(&c1);
  free(bg), free(x1), free(xg), free(b), free(x);
  PK_TEST_END();
}

PK_MPI_TEST_MAIN(PK_TEST_ENTRY(thinshell_all_solvers), PK_TEST_ENTRY(csr_all_solvers),
                 PK_TEST_ENTRY(thinshell_stop_rule_minres))

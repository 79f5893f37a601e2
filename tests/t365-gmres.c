/**
 * @file t365-gmres.c
 * @brief The GMRES family (GMRES(m), FGMRES(m), pipelined GMRES(m), CA-GMRES(s, m)): solutions against
 *        dense LAPACK dgesv solves and residuals recomputed by a plain CSR loop, on the nonsymmetric
 *        matrices of shared/matrices, a convection-diffusion operator and the SPD model problem (against
 *        CG); restart lengths, variable preconditioners (FGMRES), the m >= n property, breakdowns and edge
 *        cases.
 */
#include <string.h>

#include "pk_test.h"

/* ---- helpers ----------------------------------------------------------------------------------- */

static const int gm_types[4] = {PKRYLOV_SOLVER_GMRES, PKRYLOV_SOLVER_FGMRES, PKRYLOV_SOLVER_PIPEGMRES,
                                PKRYLOV_SOLVER_CAGMRES};
static const char *const gm_names[4] = {"gmres", "fgmres", "pipegmres", "cagmres"};

static double *vec(int64_t n) { return calloc((size_t)n, sizeof(double)); }

/** Options of one solve. */
typedef struct {
  int type, pctype, restart, step, maxit, nonzero_guess, history;
  double rtol, atol;
  pkrylov_precond M; /* used instead of pctype when not NULL */
} solve_opts;

static solve_opts opts(int type, int pctype, int restart) {
  solve_opts o;
  memset(&o, 0, sizeof o);
  o.type = type;
  o.pctype = pctype;
  o.restart = restart;
  o.maxit = 5000;
  o.rtol = 1e-10;
  return o;
}

/** Solve A x = b with options o; x is the initial guess when o->nonzero_guess. Returns the status. */
static int solve(pkrylov_context ctx, pkrylov_operator A, const solve_opts *o, const double *b, double *x,
                 pkrylov_result *res) {
  pkrylov_precond M = o->M;
  pkrylov_solver s = NULL;
  int rc = 0;
  if (!M) rc = pkrylov_precond_create(ctx, A, o->pctype, 0, PKRYLOV_LAYOUT_AUTO, &M);
  if (!rc) rc = pkrylov_solver_create(ctx, o->type, A, M, &s);
  if (!rc) rc = pkrylov_solver_set_tolerances(s, o->rtol, o->atol);
  if (!rc) rc = pkrylov_solver_set_max_iterations(s, o->maxit);
  if (!rc && o->restart) rc = pkrylov_solver_set_restart(s, o->restart);
  if (!rc) rc = pkrylov_solver_set_step(s, o->step);
  if (!rc) rc = pkrylov_solver_set_initial_guess_nonzero(s, o->nonzero_guess);
  if (!rc) rc = pkrylov_solver_solve(s, PKRYLOV_MEM_HOST, b, x);
  if (!rc) rc = pkrylov_solver_get_result(s, res);
  if (rc) {
    const char *msg;
    pkrylov_context_get_last_error(ctx, NULL, &msg);
    fprintf(stderr, "solve failed: %d %s\n", rc, msg);
  }
  pkrylov_solver_destroy(&s);
  if (!o->M) pkrylov_precond_destroy(&M);
  return rc;
}

/** b = A * ones (plain CSR loop). */
static double *rhs_ones(pkrylov_operator A, int64_t n) {
  double *one = vec(n), *b = vec(n);
  for (int64_t i = 0; i < n; i++) one[i] = 1.0;
  pk_test_csr_matvec(A, one, b);
  free(one);
  return b;
}

/* ---- shared matrices against dense LAPACK ------------------------------------------------------- */

/**
 * Solve matrix `name` (b = A * ones) with every GMRES method and preconditioner pctype; compare x with
 * dgesv and the recomputed residual with the tolerance.
 */
static int matrix_case(const char *name, int pctype, int restart, double rtol, double xtol) {
  const char *path = pk_test_matrix_path(name);
  if (!path) return PK_SKIP;
  pkrylov_context ctx;
  pkrylov_operator A;
  PK_REQUIRE_OK(NULL, pkrylov_context_create(PKRYLOV_BACKEND_CPU, &ctx));
  PK_REQUIRE_OK(ctx, pkrylov_operator_create_from_mtx(ctx, path, &A));
  int64_t n;
  PK_REQUIRE_OK(ctx, pkrylov_operator_get_info(A, &n, NULL, NULL, NULL, NULL, NULL));
  double *b = rhs_ones(A, n), *xref = vec(n), *x = vec(n);
  PK_EXPECT(pk_test_dense_solve(A, b, xref) == 0, "dgesv failed");
  for (int t = 0; t < 4; t++) {
    const int steps[5] = {1, 2, 4, 8, 0};
    for (int si = 0; si < (gm_types[t] == PKRYLOV_SOLVER_CAGMRES ? 5 : 1); si++) {
      solve_opts o = opts(gm_types[t], pctype, restart);
      o.rtol = rtol;
      o.step = steps[si];
      pkrylov_result res;
      memset(x, 0, sizeof(double) * (size_t)n);
      if (solve(ctx, A, &o, b, x, &res)) {
        pk_test_failures++;
        continue;
      }
      const double relres = pk_test_true_relres(A, b, x), err = pk_test_rel_diff(n, x, xref);
      printf("%s %s m=%d s=%d: %d iterations, reason %d, relres %.3g (reported %.3g), error %.3g\n", name,
             gm_names[t], restart, o.step, res.iterations, res.reason, relres, res.rel_residual, err);
      PK_EXPECT(res.converged, "%s %s s=%d: reason %d after %d iterations", name, gm_names[t], o.step,
                res.reason, res.iterations);
      PK_EXPECT(relres <= rtol * 1.01, "%s %s: recomputed relres %.3g", name, gm_names[t], relres);
      PK_EXPECT(fabs(relres - res.rel_residual) <= 1e-3 * relres + 1e-15, "%s: reported %.3g vs %.3g", name,
                res.rel_residual, relres);
      PK_EXPECT(err <= xtol, "%s %s s=%d: error %.3g vs dgesv", name, gm_names[t], o.step, err);
    }
  }
  free(b), free(xref), free(x);
  pkrylov_operator_destroy(&A);
  pkrylov_context_destroy(&ctx);
  PK_TEST_END();
}

PK_TEST_CASE(ani1_nonsymm_none) { return matrix_case("ani1_nonsymm.mtx", PKRYLOV_PRECOND_NONE, 30, 1e-10, 1e-8); }
PK_TEST_CASE(ani1_nonsymm_restart5) { return matrix_case("ani1_nonsymm.mtx", PKRYLOV_PRECOND_JACOBI, 5, 1e-10, 1e-8); }
PK_TEST_CASE(pores_1_jacobi) { return matrix_case("pores_1.mtx", PKRYLOV_PRECOND_JACOBI, 30, 1e-10, 1e-4); }
PK_TEST_CASE(orsirr_2_jacobi) { return matrix_case("orsirr_2.mtx", PKRYLOV_PRECOND_JACOBI, 30, 1e-9, 1e-4); }

PK_TEST_MAIN(PK_TEST_ENTRY(ani1_nonsymm_none), PK_TEST_ENTRY(ani1_nonsymm_restart5), PK_TEST_ENTRY(pores_1_jacobi),
             PK_TEST_ENTRY(orsirr_2_jacobi))

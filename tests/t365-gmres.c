/**
 * @file t365-gmres.c
 * @brief The GMRES family (GMRES(m), FGMRES(m), pipelined GMRES(m), CA-GMRES(s, m)): solutions against
 *        dense LAPACK dgesv solves and residuals recomputed by a plain CSR loop, on the nonsymmetric
 *        matrices of shared/matrices, a convection-diffusion operator and the SPD model problem (against
 *        CG); restart lengths, variable preconditioners (FGMRES), the m >= n property, breakdowns and edge
 *        cases.
 *
 * PK_TEST_BACKENDS: cpu cuda (pk_test.h): host arrays on a CUDA context, references on the host. CPU only:
 * the cases with a host routine as user operator or preconditioner (a CUDA context passes device arrays to
 * it; the CUDA engine's callbacks: t720, t721).
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
  int type, pctype, levels, restart, step, maxit, nonzero_guess, history;
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
  if (!M)
    rc = pkrylov_precond_create(ctx, A, o->pctype, o->levels,
                                o->levels ? PKRYLOV_LAYOUT_KSLOW : PKRYLOV_LAYOUT_AUTO, &M);
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
 * Solve A x = b with method t, step and preconditioner pctype; compare x with the reference xref and the
 * recomputed residual with the tolerance. Returns the iterations (-1 on error).
 */
static int check_solve(pkrylov_context ctx, pkrylov_operator A, const char *tag, int t, int pctype,
                       int levels, int restart, int step, double rtol, const double *b, const double *xref,
                       double xtol) {
  int64_t n;
  if (pkrylov_operator_get_info(A, &n, NULL, NULL, NULL, NULL, NULL)) return pk_test_failures++, -1;
  double *x = vec(n);
  solve_opts o = opts(gm_types[t], pctype, restart);
  o.rtol = rtol;
  o.step = step;
  o.levels = pctype == PKRYLOV_PRECOND_COLUMN ? levels : 0;
  pkrylov_result res;
  if (solve(ctx, A, &o, b, x, &res)) {
    pk_test_failures++;
    free(x);
    return -1;
  }
  const double relres = pk_test_true_relres(A, b, x), err = pk_test_rel_diff(n, x, xref);
  printf("%s %s m=%d s=%d: %d iterations, reason %d, relres %.3g (reported %.3g), error %.3g\n", tag,
         gm_names[t], restart, step, res.iterations, res.reason, relres, res.rel_residual, err);
  PK_EXPECT(res.converged, "%s %s s=%d: reason %d after %d iterations", tag, gm_names[t], step, res.reason,
            res.iterations);
  PK_EXPECT(relres <= rtol * 1.01, "%s %s s=%d: recomputed relres %.3g", tag, gm_names[t], step, relres);
  PK_EXPECT(fabs(relres - res.rel_residual) <= 1e-3 * relres + 1e-15, "%s: reported %.3g vs %.3g", tag,
            res.rel_residual, relres);
  PK_EXPECT(err <= xtol, "%s %s s=%d: error %.3g vs the reference", tag, gm_names[t], step, err);
  free(x);
  return res.iterations;
}

/** Every method (CA-GMRES with each step of `steps`, ending with -1) on matrix `name`, b = A * ones. */
static int matrix_case(const char *name, int pctype, int restart, const int *steps, double rtol,
                       double xtol) {
  const char *path = pk_test_matrix_path(name);
  if (!path) return PK_SKIP;
  pkrylov_context ctx;
  pkrylov_operator A;
  PK_REQUIRE_OK(NULL, pk_test_context_create(&ctx));
  PK_REQUIRE_OK(ctx, pkrylov_operator_create_from_mtx(ctx, path, &A));
  int64_t n;
  PK_REQUIRE_OK(ctx, pkrylov_operator_get_info(A, &n, NULL, NULL, NULL, NULL, NULL));
  double *b = rhs_ones(A, n), *xref = vec(n);
  PK_EXPECT(pk_test_dense_solve(A, b, xref) == 0, "dgesv failed");
  for (int t = 0; t < 3; t++) check_solve(ctx, A, name, t, pctype, 0, restart, 0, rtol, b, xref, xtol);
  for (int k = 0; steps[k] >= 0; k++)
    check_solve(ctx, A, name, 3, pctype, 0, restart, steps[k], rtol, b, xref, xtol);
  free(b), free(xref);
  pkrylov_operator_destroy(&A);
  pkrylov_context_destroy(&ctx);
  PK_TEST_END();
}

static const int steps_all[] = {1, 2, 3, 4, 5, 6, 7, 8, 0, -1};
static const int steps_some[] = {1, 4, 8, 0, -1};

PK_TEST_CASE(ani1_nonsymm_none) {
  return matrix_case("ani1_nonsymm.mtx", PKRYLOV_PRECOND_NONE, 30, steps_all, 1e-10, 1e-8);
}
PK_TEST_CASE(ani1_nonsymm_jacobi_restart5) {
  static const int st[] = {1, 5, -1}; /* CA-GMRES rounds m up to a multiple of s: keep m = 5 */
  return matrix_case("ani1_nonsymm.mtx", PKRYLOV_PRECOND_JACOBI, 5, st, 1e-10, 1e-8);
}
PK_TEST_CASE(pores_1_jacobi) {
  /* cond 1.8e6: the error is bounded by cond * relres */
  return matrix_case("pores_1.mtx", PKRYLOV_PRECOND_JACOBI, 30, steps_all, 1e-10, 1e-4);
}
PK_TEST_CASE(orsirr_2_jacobi) {
  return matrix_case("orsirr_2.mtx", PKRYLOV_PRECOND_JACOBI, 30, steps_some, 1e-9, 1e-5);
}

/* ---- convection-diffusion: preconditioners and restart lengths ------------------------------------ */

static int convdiff_case(int pctype, double wz) {
  pkrylov_context ctx;
  pkrylov_operator A;
  PK_REQUIRE_OK(NULL, pk_test_context_create(&ctx));
  const double wind[3] = {1.5, -0.7, wz};
  PK_REQUIRE_OK(ctx, pkrylov_operator_create_convdiff(ctx, 10, 9, 8, wind, 20.0, &A));
  const int64_t n = 10 * 9 * 8;
  double *b = rhs_ones(A, n), *xref = vec(n);
  PK_EXPECT(pk_test_dense_solve(A, b, xref) == 0, "dgesv failed");
  const int restarts[3] = {1, 5, 30};
  for (int r = 0; r < 3; r++)
    for (int t = 0; t < 4; t++) {
      const int step = t == 3 ? (restarts[r] == 30 ? 0 : restarts[r]) : 0;
      check_solve(ctx, A, "convdiff", t, pctype, 8, restarts[r], step, 1e-10, b, xref, 1e-8);
    }
  free(b), free(xref);
  pkrylov_operator_destroy(&A);
  pkrylov_context_destroy(&ctx);
  PK_TEST_END();
}

PK_TEST_CASE(convdiff_none) { return convdiff_case(PKRYLOV_PRECOND_NONE, 0.4); }
PK_TEST_CASE(convdiff_jacobi) { return convdiff_case(PKRYLOV_PRECOND_JACOBI, 0.4); }
PK_TEST_CASE(convdiff_column) { return convdiff_case(PKRYLOV_PRECOND_COLUMN, 0.4); }

/* ---- the SPD model problem against CG ------------------------------------------------------------- */

PK_TEST_CASE(thinshell_against_cg) {
  pkrylov_context ctx;
  pkrylov_operator A;
  pkrylov_thinshell_params p;
  PK_REQUIRE_OK(NULL, pk_test_context_create(&ctx));
  PK_REQUIRE_OK(ctx, pkrylov_thinshell_params_default(12, 10, 16, &p));
  PK_REQUIRE_OK(ctx, pkrylov_operator_create_thinshell(ctx, &p, &A));
  const int64_t n = 12 * 10 * 16;
  uint64_t seed = 7;
  double *b = vec(n), *xcg = vec(n), *x = vec(n);
  for (int64_t i = 0; i < n; i++) b[i] = pk_test_rand(&seed);
  solve_opts o = opts(PKRYLOV_SOLVER_CG, PKRYLOV_PRECOND_COLUMN, 0);
  o.rtol = 1e-9;
  pkrylov_result rcg, res;
  PK_REQUIRE_OK(ctx, solve(ctx, A, &o, b, xcg, &rcg));
  PK_EXPECT(rcg.converged, "CG: reason %d", rcg.reason);
  for (int t = 0; t < 4; t++) {
    o = opts(gm_types[t], PKRYLOV_PRECOND_COLUMN, 30);
    o.rtol = 1e-9;
    memset(x, 0, sizeof(double) * (size_t)n);
    PK_REQUIRE_OK(ctx, solve(ctx, A, &o, b, x, &res));
    const double relres = pk_test_true_relres(A, b, x), diff = pk_test_rel_diff(n, x, xcg);
    printf("thinshell %s: %d iterations (CG %d), relres %.3g, |x - x_cg| / |x_cg| = %.3g\n", gm_names[t],
           res.iterations, rcg.iterations, relres, diff);
    PK_EXPECT(res.converged && relres <= 1.01e-9, "%s: reason %d, relres %.3g", gm_names[t], res.reason,
              relres);
    PK_EXPECT(diff <= 1e-6, "%s: differs from CG by %.3g", gm_names[t], diff);
  }
  free(b), free(xcg), free(x);
  pkrylov_operator_destroy(&A);
  pkrylov_context_destroy(&ctx);
  PK_TEST_END();
}

/* ---- GMRES with m >= n: at most n iterations ------------------------------------------------------- */

PK_TEST_CASE(full_space_n_iterations) {
  const char *path = pk_test_matrix_path("ani1_nonsymm.mtx");
  if (!path) return PK_SKIP;
  pkrylov_context ctx;
  pkrylov_operator A;
  PK_REQUIRE_OK(NULL, pk_test_context_create(&ctx));
  PK_REQUIRE_OK(ctx, pkrylov_operator_create_from_mtx(ctx, path, &A));
  const int64_t n = 36;
  uint64_t seed = 3;
  double *b = vec(n), *x = vec(n), *xref = vec(n);
  for (int64_t i = 0; i < n; i++) b[i] = pk_test_rand(&seed);
  PK_EXPECT(pk_test_dense_solve(A, b, xref) == 0, "dgesv failed");
  /* GMRES, FGMRES, CA-GMRES(1), CA-GMRES(4) (m = 40), pipelined GMRES last: its basis loses orthogonality
     (the recurrences), so it may restart once the space is exhausted; it must converge within 2n */
  const int tt[5] = {0, 1, 3, 3, 2}, ss[5] = {0, 0, 1, 4, 0};
  for (int c = 0; c < 5; c++) {
    const int t = tt[c];
    solve_opts o = opts(gm_types[t], PKRYLOV_PRECOND_NONE, 40);
    o.rtol = 1e-12;
    o.step = ss[c];
    pkrylov_result res;
    memset(x, 0, sizeof(double) * (size_t)n);
    PK_REQUIRE_OK(ctx, solve(ctx, A, &o, b, x, &res));
    const double err = pk_test_rel_diff(n, x, xref);
    printf("m = 40 >= n = 36, %s s=%d: %d iterations, relres %.3g, error %.3g\n", gm_names[t], ss[c],
           res.iterations, res.rel_residual, err);
    const int bound = t == 2 ? 2 * (int)n : (int)n;
    PK_EXPECT(res.converged && res.iterations <= bound, "%s s=%d: %d iterations (reason %d) for n = %lld",
              gm_names[t], ss[c], res.iterations, res.reason, (long long)n);
    PK_EXPECT(err <= 1e-9, "%s: error %.3g", gm_names[t], err);
  }
  free(b), free(x), free(xref);
  pkrylov_operator_destroy(&A);
  pkrylov_context_destroy(&ctx);
  PK_TEST_END();
}

/* ---- FGMRES with a variable preconditioner ---------------------------------------------------------- */

/** A preconditioner that changes between calls: 1 + (call % 4) Jacobi sweeps for A z = r from z = 0. */
typedef struct {
  const int64_t *rp, *ci;
  const double *v;
  double *tmp;
  int calls, counts[5];
} var_pc;

static int var_pc_apply(void *user, int64_t n, const double *r, double *z) {
  var_pc *P = user;
  const int sweeps = 1 + P->calls % 4;
  P->counts[sweeps]++;
  P->calls++;
  for (int64_t i = 0; i < n; i++) z[i] = 0.0;
  for (int sw = 0; sw < sweeps; sw++) {
    for (int64_t i = 0; i < n; i++) {
      double d = 0.0, az = 0.0;
      for (int64_t k = P->rp[i]; k < P->rp[i + 1]; k++) {
        az += P->v[k] * z[P->ci[k]];
        if (P->ci[k] == i) d = P->v[k];
      }
      P->tmp[i] = z[i] + (r[i] - az) / d;
    }
    for (int64_t i = 0; i < n; i++) z[i] = P->tmp[i];
  }
  return 0;
}

/* CPU only: var_pc_apply is a host loop */
PK_TEST_CASE_CPU(fgmres_variable_preconditioner) {
  pkrylov_context ctx;
  pkrylov_operator A;
  PK_REQUIRE_OK(NULL, pk_test_context_create(&ctx));
  const double wind[3] = {3.0, 2.0, 0.5};
  PK_REQUIRE_OK(ctx, pkrylov_operator_create_convdiff(ctx, 12, 10, 6, wind, 4.0, &A));
  int64_t n, nnz;
  PK_REQUIRE_OK(ctx, pkrylov_operator_get_info(A, &n, &nnz, NULL, NULL, NULL, NULL));
  int64_t *rp = malloc(sizeof(int64_t) * (size_t)(n + 1)), *ci = malloc(sizeof(int64_t) * (size_t)nnz);
  double *v = malloc(sizeof(double) * (size_t)nnz);
  PK_REQUIRE_OK(ctx, pkrylov_operator_get_csr(A, rp, ci, v));
  var_pc P = {rp, ci, v, vec(n), 0, {0}};
  pkrylov_precond M;
  PK_REQUIRE_OK(ctx, pkrylov_precond_create_user(ctx, n, var_pc_apply, &P, &M));
  double *b = rhs_ones(A, n), *xref = vec(n), *x = vec(n);
  PK_EXPECT(pk_test_dense_solve(A, b, xref) == 0, "dgesv failed");
  solve_opts o = opts(PKRYLOV_SOLVER_FGMRES, 0, 10);
  o.M = M;
  o.rtol = 1e-10;
  pkrylov_result res;
  PK_REQUIRE_OK(ctx, solve(ctx, A, &o, b, x, &res));
  const double relres = pk_test_true_relres(A, b, x), err = pk_test_rel_diff(n, x, xref);
  printf("FGMRES(10), variable Jacobi sweeps: %d iterations, reason %d, relres %.3g, error %.3g; sweeps used "
         "1:%d 2:%d 3:%d 4:%d times\n",
         res.iterations, res.reason, relres, err, P.counts[1], P.counts[2], P.counts[3], P.counts[4]);
  PK_EXPECT(res.converged && relres <= 1.01e-10, "FGMRES: reason %d, relres %.3g", res.reason, relres);
  PK_EXPECT(err <= 1e-8, "FGMRES: error %.3g", err);
  PK_EXPECT(P.counts[1] > 0 && P.counts[2] > 0 && P.counts[3] > 0 && P.counts[4] > 0,
            "the preconditioner did not vary");
  /* GMRES assumes a fixed M (x = x0 + M^-1 V y applies M once more): its residual estimate is then not the
     true residual, but it must never report a convergence the true residual does not show */
  P.calls = 0;
  o.type = PKRYLOV_SOLVER_GMRES;
  memset(x, 0, sizeof(double) * (size_t)n);
  PK_REQUIRE_OK(ctx, solve(ctx, A, &o, b, x, &res));
  const double relres_g = pk_test_true_relres(A, b, x);
  printf("GMRES(10), same variable preconditioner: %d iterations, reason %d, relres %.3g\n", res.iterations,
         res.reason, relres_g);
  PK_EXPECT(!res.converged || relres_g <= 1.01e-10, "GMRES reported convergence at relres %.3g", relres_g);
  free(b), free(xref), free(x), free(P.tmp), free(rp), free(ci), free(v);
  pkrylov_precond_destroy(&M);
  pkrylov_operator_destroy(&A);
  pkrylov_context_destroy(&ctx);
  PK_TEST_END();
}

/* ---- edge cases -------------------------------------------------------------------------------------- */

/** Diagonal CSR matrix with the given diagonal. */
static int make_diag(pkrylov_context ctx, int n, const double *d, pkrylov_operator *A) {
  int *rp = malloc(sizeof(int) * (size_t)(n + 1)), *ci = malloc(sizeof(int) * (size_t)n);
  for (int i = 0; i <= n; i++) rp[i] = i;
  for (int i = 0; i < n; i++) ci[i] = i;
  int rc = pkrylov_operator_create_csr(ctx, n, 0, rp, ci, d, A);
  free(rp), free(ci);
  return rc;
}

PK_TEST_CASE(zero_rhs_and_exact_guess) {
  pkrylov_context ctx;
  pkrylov_operator A;
  PK_REQUIRE_OK(NULL, pk_test_context_create(&ctx));
  const double wind[3] = {1.0, 0.5, 0.2};
  PK_REQUIRE_OK(ctx, pkrylov_operator_create_convdiff(ctx, 6, 5, 4, wind, 2.0, &A));
  const int64_t n = 120;
  double *b = vec(n), *x = vec(n), *one = vec(n);
  for (int t = 0; t < 4; t++) {
    /* b = 0 (and a nonzero x0): x = 0 at once, converged by atol */
    solve_opts o = opts(gm_types[t], PKRYLOV_PRECOND_JACOBI, 30);
    for (int64_t i = 0; i < n; i++) x[i] = 1.0, b[i] = 0.0;
    pkrylov_result res;
    PK_REQUIRE_OK(ctx, solve(ctx, A, &o, b, x, &res));
    PK_EXPECT(res.reason == PKRYLOV_CONVERGED_ATOL && res.iterations == 0 && pk_test_norm(n, x) == 0.0,
              "%s b = 0: reason %d, %d iterations, |x| %g", gm_names[t], res.reason, res.iterations,
              pk_test_norm(n, x));
    /* x0 = the solution (b = A * ones by the library's own product): no iteration, x unchanged */
    for (int64_t i = 0; i < n; i++) one[i] = 1.0, x[i] = 1.0;
    PK_REQUIRE_OK(ctx, pkrylov_operator_apply(A, PKRYLOV_MEM_HOST, one, b));
    o.nonzero_guess = 1;
    PK_REQUIRE_OK(ctx, solve(ctx, A, &o, b, x, &res));
    PK_EXPECT(res.converged && res.iterations == 0 && pk_test_rel_diff(n, x, one) == 0.0,
              "%s exact x0: reason %d, %d iterations", gm_names[t], res.reason, res.iterations);
    /* maxit = 0 from a nonzero guess: x returned as it came */
    for (int64_t i = 0; i < n; i++) x[i] = 0.5;
    o.maxit = 0;
    PK_REQUIRE_OK(ctx, solve(ctx, A, &o, b, x, &res));
    PK_EXPECT(res.reason == PKRYLOV_DIVERGED_MAX_ITERATIONS && res.iterations == 0 && x[0] == 0.5 &&
                  x[n - 1] == 0.5,
              "%s maxit 0: reason %d, %d iterations", gm_names[t], res.reason, res.iterations);
  }
  free(b), free(x), free(one);
  pkrylov_operator_destroy(&A);
  pkrylov_context_destroy(&ctx);
  PK_TEST_END();
}

PK_TEST_CASE(lucky_breakdown) {
  /* A diagonal with ne distinct eigenvalues: the Krylov space of any b has dimension ne, GMRES is exact after
     ne iterations (h_{ne+1,ne} = 0) */
  pkrylov_context ctx;
  PK_REQUIRE_OK(NULL, pk_test_context_create(&ctx));
  const int n = 50;
  double d[50], *b = vec(n), *x = vec(n), xref[50];
  for (int ne = 1; ne <= 3; ne += 2) {
    pkrylov_operator A;
    uint64_t seed = 11;
    for (int i = 0; i < n; i++) {
      d[i] = 1.0 + (i % ne) * 1.5;
      b[i] = pk_test_rand(&seed);
      xref[i] = b[i] / d[i];
    }
    PK_REQUIRE_OK(ctx, make_diag(ctx, n, d, &A));
    const int tt[6] = {0, 1, 2, 3, 3, 3}, ss[6] = {0, 0, 0, 1, 4, 0};
    for (int c = 0; c < 6; c++) {
      solve_opts o = opts(gm_types[tt[c]], PKRYLOV_PRECOND_NONE, 30);
      o.rtol = 1e-13;
      o.step = ss[c];
      pkrylov_result res;
      memset(x, 0, sizeof(double) * (size_t)n);
      PK_REQUIRE_OK(ctx, solve(ctx, A, &o, b, x, &res));
      const double err = pk_test_rel_diff(n, x, xref);
      printf("%d eigenvalue(s), %s s=%d: %d iterations, reason %d, error %.3g\n", ne, gm_names[tt[c]], ss[c],
             res.iterations, res.reason, err);
      /* pipelined GMRES sees h_{ne+1,ne} = 0 as (z, z) - sum h^2 <= 0, which it cannot tell from a loss of
         orthogonality without another reduction: it ends the cycle before that column and finishes with a
         classical GMRES cycle */
      const int its_ok = tt[c] == 2 ? res.iterations >= ne && res.iterations <= 2 * ne : res.iterations == ne;
      PK_EXPECT(res.converged && its_ok, "%s s=%d: %d iterations, reason %d", gm_names[tt[c]], ss[c],
                res.iterations, res.reason);
      PK_EXPECT(err <= 1e-13, "%s s=%d: error %.3g", gm_names[tt[c]], ss[c], err);
    }
    pkrylov_operator_destroy(&A);
  }
  free(b), free(x);
  pkrylov_context_destroy(&ctx);
  PK_TEST_END();
}

/**
 * Issue 14 item 17: GMRES on a singular inconsistent system (the 1-D Laplacian with Neumann ends, null space
 * the constants, b with a nonzero mean). With m > n the Krylov space becomes invariant, the least-squares
 * problem of the cycle degenerates and its update made x far worse than x0 (relative residual 33 for GMRES,
 * 1.5e10 for pipelined GMRES) before the solve stopped on stagnation. The returned x is never worse than the
 * best iterate the solve saw (x0 included): its recomputed residual (plain CSR loop) is the reported final
 * residual, at most the initial one, and at least the least-squares minimum |sum b| / sqrt(n). Every type,
 * restart 10 and 60, from zero and from a nonzero initial guess.
 */
PK_TEST_CASE(singular_inconsistent_never_worse) {
  pkrylov_context ctx;
  PK_REQUIRE_OK(NULL, pk_test_context_create(&ctx));
  enum { N = 50 };
  int rp[N + 1], ci[3 * N], k = 0;
  double v[3 * N], b[N], x[N], x0[N], sum = 0.0;
  for (int i = 0; i < N; i++) {
    rp[i] = k;
    if (i > 0) ci[k] = i - 1, v[k++] = -1.0;
    ci[k] = i, v[k++] = (i > 0) + (i < N - 1);
    if (i < N - 1) ci[k] = i + 1, v[k++] = -1.0;
    b[i] = sin(1.0 + i) + 0.3, sum += b[i];
    x0[i] = 0.25 * cos(0.3 * i);
  }
  rp[N] = k;
  pkrylov_operator A;
  PK_REQUIRE_OK(ctx, pkrylov_operator_create_csr(ctx, N, 0, rp, ci, v, &A));
  const double bnorm = pk_test_norm(N, b), lsq = fabs(sum) / sqrt((double)N);
  const int restarts[2] = {10, 60};
  for (int t = 0; t < 4; t++)
    for (int r = 0; r < 2; r++)
      for (int guess = 0; guess < 2; guess++) {
        solve_opts o = opts(gm_types[t], PKRYLOV_PRECOND_NONE, restarts[r]);
        o.maxit = 400;
        o.nonzero_guess = guess;
        memcpy(x, x0, sizeof x);
        pkrylov_result res;
        PK_REQUIRE_OK(ctx, solve(ctx, A, &o, b, x, &res));
        const double fin = pk_test_true_relres(A, b, x) * bnorm;
        PK_EXPECT(!res.converged && fabs(fin - res.final_residual) <= 1e-12 * bnorm,
                  "%s m %d guess %d: reason %d, final residual %.17g reported, %.17g recomputed", gm_names[t],
                  restarts[r], guess, res.reason, res.final_residual, fin);
        PK_EXPECT(fin <= res.initial_residual * (1 + 1e-14) && fin >= lsq * (1 - 1e-12),
                  "%s m %d guess %d: residual %.6g, initial %.6g, least-squares minimum %.6g (reason %d)",
                  gm_names[t], restarts[r], guess, fin, res.initial_residual, lsq, res.reason);
      }
  pkrylov_operator_destroy(&A);
  pkrylov_context_destroy(&ctx);
  PK_TEST_END();
}

typedef struct {
  int stop_at, calls;
} mon_data;

static int monitor(void *user, int32_t it, double res) {
  mon_data *m = user;
  (void)res;
  m->calls++;
  return it >= m->stop_at;
}

PK_TEST_CASE(monitor_history) {
  pkrylov_context ctx;
  pkrylov_operator A;
  PK_REQUIRE_OK(NULL, pk_test_context_create(&ctx));
  const double wind[3] = {2.0, 1.0, 0.5};
  PK_REQUIRE_OK(ctx, pkrylov_operator_create_convdiff(ctx, 8, 7, 6, wind, 3.0, &A));
  const int64_t n = 8 * 7 * 6;
  double *b = rhs_ones(A, n), *x = vec(n), hist[64];
  for (int t = 0; t < 4; t++) {
    pkrylov_solver s;
    mon_data md = {7, 0};
    PK_REQUIRE_OK(ctx, pkrylov_solver_create(ctx, gm_types[t], A, NULL, &s));
    PK_REQUIRE_OK(ctx, pkrylov_solver_set_history(s, 1));
    PK_REQUIRE_OK(ctx, pkrylov_solver_set_restart(s, 4));
    PK_REQUIRE_OK(ctx, pkrylov_solver_set_step(s, t == 3 ? 2 : 0));
    PK_REQUIRE_OK(ctx, pkrylov_solver_set_monitor(s, monitor, &md));
    /* a CUDA context polls every sync_interval iterations (32; a monitor stop applies at the poll,
       pk_kry.h): every iteration here, as on the CPU */
    if (pk_test_on_cuda()) PK_REQUIRE_OK(ctx, pkrylov_solver_set_sync_interval(s, 1));
    memset(x, 0, sizeof(double) * (size_t)n);
    PK_REQUIRE_OK(ctx, pkrylov_solver_solve(s, PKRYLOV_MEM_HOST, b, x));
    pkrylov_result res;
    int32_t len = 0;
    PK_REQUIRE_OK(ctx, pkrylov_solver_get_result(s, &res));
    PK_REQUIRE_OK(ctx, pkrylov_solver_get_history(s, 64, hist, &len));
    const double tr = pk_test_true_relres(A, b, x) * pk_test_norm(n, b);
    printf("%s: monitor stop: %d iterations, reason %d, history %d values, last %.6g, true residual %.6g\n",
           gm_names[t], res.iterations, res.reason, len, len ? hist[len - 1] : 0.0, tr);
    /* CA-GMRES (s = 2) polls once per block: the stop applies at the end of the block */
    const int its_ok = t == 3 ? res.iterations == 7 || res.iterations == 8 : res.iterations == 7;
    PK_EXPECT(res.reason == PKRYLOV_STOPPED_BY_MONITOR && its_ok && len == res.iterations + 1 &&
                  md.calls == res.iterations + 1,
              "%s: reason %d, %d iterations, %d history values, %d monitor calls", gm_names[t], res.reason,
              res.iterations, len, md.calls);
    PK_EXPECT(fabs(hist[0] - pk_test_norm(n, b)) <= 1e-12 * hist[0], "%s: history[0] %.17g", gm_names[t],
              hist[0]);
    /* the estimates are the residuals of the minimisation: non-increasing (within a restart cycle and across
       cycles), and the last is the true residual of the returned x */
    for (int i = 1; i < len; i++)
      PK_EXPECT(hist[i] <= hist[i - 1] * (1 + 1e-12), "%s: history[%d] = %.6g > history[%d] = %.6g",
                gm_names[t], i, hist[i], i - 1, hist[i - 1]);
    PK_EXPECT(fabs(tr - hist[len - 1]) <= 1e-8 * hist[0], "%s: true residual %.10g vs estimate %.10g",
              gm_names[t], tr, hist[len - 1]);
    PK_EXPECT(tr < 0.9 * hist[0], "%s: x did not improve", gm_names[t]);
    pkrylov_solver_destroy(&s);
  }
  free(b), free(x);
  pkrylov_operator_destroy(&A);
  pkrylov_context_destroy(&ctx);
  PK_TEST_END();
}

/** A user operator: the CSR operator's product, NaN from call nan_from on, or a failure from call fail_from.
 */
typedef struct {
  pkrylov_operator A;
  int calls, nan_from, fail_from;
} bad_op;

static int bad_op_apply(void *user, int64_t n, const double *x, double *y) {
  bad_op *B = user;
  B->calls++;
  if (B->fail_from > 0 && B->calls >= B->fail_from) return 3;
  if (pkrylov_operator_apply(B->A, PKRYLOV_MEM_HOST, x, y)) return 1;
  if (B->nan_from > 0 && B->calls >= B->nan_from) y[n / 2] = NAN;
  return 0;
}

/* CPU only: bad_op_apply writes a NaN into y on the host */
PK_TEST_CASE_CPU(nan_and_callback_failure) {
  pkrylov_context ctx;
  pkrylov_operator A, U;
  PK_REQUIRE_OK(NULL, pk_test_context_create(&ctx));
  const double wind[3] = {2.0, 1.0, 0.5};
  PK_REQUIRE_OK(ctx, pkrylov_operator_create_convdiff(ctx, 8, 7, 6, wind, 3.0, &A));
  const int64_t n = 8 * 7 * 6;
  bad_op B = {A, 0, 0, 0};
  PK_REQUIRE_OK(ctx, pkrylov_operator_create_user(ctx, n, bad_op_apply, &B, &U));
  double *b = rhs_ones(A, n), *x = vec(n);
  for (int t = 0; t < 4; t++) {
    solve_opts o = opts(gm_types[t], PKRYLOV_PRECOND_NONE, 5);
    o.step = t == 3 ? 2 : 0;
    pkrylov_result res;
    /* NaN from the 9th product on: x is the last good iterate (finite, better than x0 = 0) */
    B.calls = 0, B.nan_from = 9, B.fail_from = 0;
    memset(x, 0, sizeof(double) * (size_t)n);
    PK_REQUIRE_OK(ctx, solve(ctx, U, &o, b, x, &res));
    int finite = 1;
    for (int64_t i = 0; i < n; i++) finite = finite && isfinite(x[i]);
    const double rr = finite ? pk_test_true_relres(A, b, x) : NAN;
    printf("%s: NaN from product 9: reason %d at iteration %d (%d iterations), x finite %d, relres %.3g\n",
           gm_names[t], res.reason, res.breakdown_iteration, res.iterations, finite, rr);
    PK_EXPECT(res.reason == PKRYLOV_DIVERGED_NAN && res.breakdown_iteration > 0 && finite && rr < 1.0,
              "%s: reason %d, breakdown at %d, finite %d, relres %.3g", gm_names[t], res.reason,
              res.breakdown_iteration, finite, rr);
    /* the routine fails: PKRYLOV_ERR_CALLBACK and x as it came */
    B.calls = 0, B.nan_from = 0, B.fail_from = 6;
    for (int64_t i = 0; i < n; i++) x[i] = 0.25;
    o.nonzero_guess = 1;
    pkrylov_solver s;
    PK_REQUIRE_OK(ctx, pkrylov_solver_create(ctx, gm_types[t], U, NULL, &s));
    PK_REQUIRE_OK(ctx, pkrylov_solver_set_initial_guess_nonzero(s, 1));
    PK_EXPECT_CODE(ctx, pkrylov_solver_solve(s, PKRYLOV_MEM_HOST, b, x), PKRYLOV_ERR_CALLBACK);
    PK_EXPECT(x[0] == 0.25 && x[n - 1] == 0.25, "%s: x changed by a failed solve", gm_names[t]);
    pkrylov_solver_destroy(&s);
  }
  free(b), free(x);
  pkrylov_operator_destroy(&U);
  pkrylov_operator_destroy(&A);
  pkrylov_context_destroy(&ctx);
  PK_TEST_END();
}

PK_TEST_CASE(bad_options) {
  pkrylov_context ctx;
  pkrylov_operator A;
  pkrylov_solver s;
  PK_REQUIRE_OK(NULL, pk_test_context_create(&ctx));
  const double d[4] = {1, 2, 3, 4};
  PK_REQUIRE_OK(ctx, make_diag(ctx, 4, d, &A));
  PK_REQUIRE_OK(ctx, pkrylov_solver_create(ctx, PKRYLOV_SOLVER_CAGMRES, A, NULL, &s));
  PK_EXPECT_CODE(ctx, pkrylov_solver_set_restart(s, 0), PKRYLOV_ERR_INVALID_VALUE);
  PK_EXPECT(pk_test_msg_has(ctx, "'m'"), "message");
  PK_EXPECT_CODE(ctx, pkrylov_solver_set_restart(s, 1001), PKRYLOV_ERR_INVALID_VALUE);
  PK_EXPECT_CODE(ctx, pkrylov_solver_set_step(s, 17), PKRYLOV_ERR_INVALID_VALUE);
  PK_EXPECT(pk_test_msg_has(ctx, "'step'"), "message");
  PK_EXPECT_CODE(ctx, pkrylov_solver_set_step(s, -1), PKRYLOV_ERR_INVALID_VALUE);
  /* the largest step and a restart that is not a multiple of it (rounded up) */
  PK_REQUIRE_OK(ctx, pkrylov_solver_set_step(s, 16));
  PK_REQUIRE_OK(ctx, pkrylov_solver_set_restart(s, 3));
  double b[4] = {1, 1, 1, 1}, x[4] = {0};
  PK_REQUIRE_OK(ctx, pkrylov_solver_solve(s, PKRYLOV_MEM_HOST, b, x));
  pkrylov_result res;
  PK_REQUIRE_OK(ctx, pkrylov_solver_get_result(s, &res));
  PK_EXPECT(res.converged && fabs(x[3] - 0.25) < 1e-12, "step 16: reason %d, x[3] = %g", res.reason, x[3]);
  pkrylov_solver_destroy(&s);
  pkrylov_operator_destroy(&A);
  pkrylov_context_destroy(&ctx);
  PK_TEST_END();
}

PK_TEST_MAIN(PK_TEST_ENTRY(ani1_nonsymm_none), PK_TEST_ENTRY(ani1_nonsymm_jacobi_restart5),
             PK_TEST_ENTRY(pores_1_jacobi), PK_TEST_ENTRY(orsirr_2_jacobi), PK_TEST_ENTRY(convdiff_none),
             PK_TEST_ENTRY(convdiff_jacobi), PK_TEST_ENTRY(convdiff_column),
             PK_TEST_ENTRY(thinshell_against_cg), PK_TEST_ENTRY(full_space_n_iterations),
             PK_TEST_ENTRY(fgmres_variable_preconditioner), PK_TEST_ENTRY(zero_rhs_and_exact_guess),
             PK_TEST_ENTRY(lucky_breakdown), PK_TEST_ENTRY(singular_inconsistent_never_worse),
             PK_TEST_ENTRY(monitor_history), PK_TEST_ENTRY(nan_and_callback_failure),
             PK_TEST_ENTRY(bad_options))

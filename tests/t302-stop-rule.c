/**
 * @file t302-stop-rule.c
 * @brief The model's own stopping rule (pkrylov_solver_set_stop_rule, PKRYLOV_STOP_RECURRENCE), single-
 *        reduction CG (PKRYLOV_SOLVER_SRCG) and the minimum-residual iterate (pkrylov_solver_set_min_residual),
 *        CPU backend, against hand-written solvers with MITgcm's loops (pk_stop_test.h: CG2D and CG2D_SR):
 *        a masked, negative definite 2-D free-surface problem with the approximate-inverse preconditioner
 *        (a user preconditioner given to both) or Jacobi, and the thin shell with the column preconditioner.
 *        Same iterations, first and last residuals to 1e-14, x to 1e-12, tolerances met exactly at a
 *        boundary; the rule on every solver type; bad input.
 */
#include "pk_stop_test.h"

/** A library solve and the reference it must match. */
typedef struct {
  int32_t type;            /* CG, PIPECG or SRCG */
  double rtol, atol;
  int32_t maxit, minres, rule;
  const double *x0;        /* NULL: zero */
} run_opts;

static run_opts ropts(int32_t type, double rtol, double atol, int32_t maxit) {
  run_opts o;
  memset(&o, 0, sizeof o);
  o.type = type, o.rtol = rtol, o.atol = atol, o.maxit = maxit, o.rule = PKRYLOV_STOP_RECURRENCE;
  return o;
}

/** Solve with the library: x (n), result, and the history (hist: maxit + 1 values, may be NULL). */
static int lib_solve(pkrylov_context ctx, pkrylov_operator A, pkrylov_precond M, const run_opts *o,
                     const double *b, double *x, pkrylov_result *res, double *hist) {
  pkrylov_solver s;
  int64_t n;
  pkrylov_operator_get_info(A, &n, NULL, NULL, NULL, NULL, NULL);
  int e = pkrylov_solver_create(ctx, o->type, A, M, &s);
  if (e) return e;
  if (!e) e = pkrylov_solver_set_tolerances(s, o->rtol, o->atol);
  if (!e) e = pkrylov_solver_set_max_iterations(s, o->maxit);
  if (!e) e = pkrylov_solver_set_stop_rule(s, o->rule);
  if (!e) e = pkrylov_solver_set_min_residual(s, o->minres);
  if (!e && hist) e = pkrylov_solver_set_history(s, 1);
  if (o->x0) {
    memcpy(x, o->x0, sizeof(double) * (size_t)n);
    if (!e) e = pkrylov_solver_set_initial_guess_nonzero(s, 1);
  }
  if (!e) e = pkrylov_solver_solve(s, PKRYLOV_MEM_HOST, b, x);
  if (!e) e = pkrylov_solver_get_result(s, res);
  int32_t len;
  if (!e && hist) e = pkrylov_solver_get_history(s, o->maxit + 1, hist, &len);
  pkrylov_solver_destroy(&s);
  return e;
}

/** ||b|| over the wet cells, in index order (as the reference's sums). */
static double wet_norm(const pk_ref_problem *P, const double *b) { return sqrt(pk_ref_dot(P, b, b)); }

/**
 * The library (type o->type, recurrence rule) against the reference (CG2D for CG and pipelined CG, CG2D_SR
 * for SRCG) with the same tolerance: iterations, first and last residual, x, reason, min-residual output.
 * xtol: relative tolerance on x (1e-12; pipelined CG, whose recurrences differ more, gets its own).
 */
static int compare(pkrylov_context ctx, pkrylov_operator A, pkrylov_precond M, const pk_ref_problem *P,
                   const run_opts *o, const double *b, double rtol_res, double xtol, const char *what) {
  const int64_t n = P->n;
  double *x = malloc(sizeof(double) * (size_t)n), *xr = calloc((size_t)n, sizeof(double));
  if (o->x0) memcpy(xr, o->x0, sizeof(double) * (size_t)n);
  pkrylov_result res;
  PK_REQUIRE_OK(ctx, lib_solve(ctx, A, M, o, b, x, &res, NULL));
  double tol = o->rtol * wet_norm(P, b);
  if (o->atol > tol) tol = o->atol;
  pk_ref_out ro;
  memset(&ro, 0, sizeof ro);
  if (o->type == PKRYLOV_SOLVER_SRCG)
    pk_ref_cg2d_sr(P, b, xr, tol, o->maxit, o->minres, &ro);
  else
    pk_ref_cg2d(P, b, xr, tol, o->maxit, o->minres, &ro);
  PK_EXPECT(res.iterations == ro.its, "%s: %d iterations, the hand-written solver %d", what, res.iterations,
            ro.its);
  PK_EXPECT(fabs(res.initial_residual - ro.first) <= rtol_res * ro.first,
            "%s: initial residual %.17g vs firstResidual %.17g", what, res.initial_residual, ro.first);
  /* rounding-level agreement is relative to the problem's scale, the first residual: the two solvers sum
     in other orders (and CG keeps q = A p by recurrence), so the last residuals, which are tol or less,
     differ by rounding errors of the size of the first residual's */
  PK_EXPECT(fabs(res.final_residual - ro.last) <= rtol_res * ro.first,
            "%s: final residual %.17g vs lastResidual %.17g (difference %.3g of the first residual)", what,
            res.final_residual, ro.last, fabs(res.final_residual - ro.last) / ro.first);
  const double dx = pk_test_rel_diff(n, x, xr);
  PK_EXPECT(dx <= xtol, "%s: ||x - x_ref|| / ||x_ref|| = %.3g", what, dx);
  PK_EXPECT(res.converged == ro.converged, "%s: converged %d (%s), reference %d", what, res.converged,
            pkrylov_reason_string(res.reason), ro.converged);
  if (ro.converged)
    PK_EXPECT(res.reason == (o->atol >= o->rtol * res.rhs_norm ? PKRYLOV_CONVERGED_ATOL : PKRYLOV_CONVERGED_RTOL),
              "%s: reason %s", what, pkrylov_reason_string(res.reason));
  else
    PK_EXPECT(res.reason == PKRYLOV_DIVERGED_MAX_ITERATIONS, "%s: reason %s", what,
              pkrylov_reason_string(res.reason));
  PK_EXPECT(res.true_residual_checks == 0, "%s: %d true residual checks", what, res.true_residual_checks);
  PK_EXPECT(fabs(res.rel_residual - res.final_residual / res.rhs_norm) <= 1e-15 * res.rel_residual,
            "%s: rel_residual %g", what, res.rel_residual);
  if (o->minres) {
    PK_EXPECT(res.min_residual_iteration == ro.it_min, "%s: min_residual_iteration %d, reference %d", what,
              res.min_residual_iteration, ro.it_min);
    PK_EXPECT(fabs(res.min_residual - sqrt(ro.min_rr)) <= rtol_res * ro.first,
              "%s: min_residual %.17g vs sqrt(minResidualSq) %.17g", what, res.min_residual, sqrt(ro.min_rr));
  } else {
    PK_EXPECT(res.min_residual == -1.0 && res.min_residual_iteration == -1, "%s: min residual %g at %d (off)",
              what, res.min_residual, res.min_residual_iteration);
  }
  free(x), free(xr);
  return pk_test_failures ? PK_FAIL : PK_PASS;
}

/** The basin problem: the library's stencil (nz = 1, mask) and preconditioner pc (JACOBI, USER = the
 *  approximate inverse, NONE) and the reference's callbacks. */
typedef struct {
  pk_basin B;
  pkrylov_context ctx;
  pkrylov_operator A;
  pkrylov_precond M;
  pk_ref_problem P;
  double *b;
} basin_case;

static int basin_setup(basin_case *c, int nx, int ny, uint64_t seed, int integer, int32_t pc) {
  memset(c, 0, sizeof *c);
  pk_basin_make(&c->B, nx, ny, seed, integer);
  if (pkrylov_context_create(PKRYLOV_BACKEND_CPU, &c->ctx)) return 1;
  pk_basin *B = &c->B;
  if (pkrylov_operator_create_stencil7(c->ctx, nx, ny, 1, B->aW, B->aS, B->aV, B->aC, B->mask, &c->A)) return 1;
  c->P.n = B->n;
  c->P.A = pk_basin_apply, c->P.Auser = B;
  c->P.wet = B->mask;
  if (pc == PKRYLOV_PRECOND_USER) {
    if (pkrylov_precond_create_user(c->ctx, B->n, pk_basin_ainv, B, &c->M)) return 1;
    c->P.M = pk_basin_ainv, c->P.Muser = B;
  } else if (pc == PKRYLOV_PRECOND_JACOBI) {
    if (pkrylov_precond_create(c->ctx, c->A, PKRYLOV_PRECOND_JACOBI, 0, PKRYLOV_LAYOUT_AUTO, &c->M)) return 1;
    c->P.M = pk_basin_jacobi, c->P.Muser = B;
  }
  c->b = calloc((size_t)B->n, sizeof(double));
  uint64_t st = seed + 7;
  for (int64_t i = 0; i < B->n; i++) {
    const double v = pk_test_rand(&st);
    if (B->mask[i]) c->b[i] = integer ? (double)(int)(4.0 * v) : v;
  }
  return 0;
}

static void basin_teardown(basin_case *c) {
  pkrylov_precond_destroy(&c->M);
  pkrylov_operator_destroy(&c->A);
  pkrylov_context_destroy(&c->ctx);
  free(c->b);
  pk_basin_free(&c->B);
}

/** The basin with preconditioner pc, method type: several tolerances (absolute and relative). */
static int basin_tolerances(int32_t type, int32_t pc) {
  basin_case c;
  PK_REQUIRE(basin_setup(&c, 40, 30, 11, 0, pc) == 0, "basin set-up failed");
  const double bn = wet_norm(&c.P, c.b);
  static const double f[4] = {1e-3, 1e-6, 1e-9, 1e-11};
  for (int k = 0; k < 4; k++) {
    char what[96];
    run_opts o = ropts(type, 0.0, f[k] * bn, 500);
    snprintf(what, sizeof what, "atol %.0e ||b||", f[k]);
    compare(c.ctx, c.A, c.M, &c.P, &o, c.b, 1e-14, 1e-12, what);
    o = ropts(type, f[k], 0.0, 500);
    snprintf(what, sizeof what, "rtol %.0e", f[k]);
    compare(c.ctx, c.A, c.M, &c.P, &o, c.b, 1e-14, 1e-12, what);
  }
  /* an initial guess; an iteration cap */
  double *x0 = malloc(sizeof(double) * (size_t)c.B.n);
  uint64_t st = 99;
  for (int64_t i = 0; i < c.B.n; i++) x0[i] = c.B.mask[i] ? pk_test_rand(&st) : 0.0;
  run_opts o = ropts(type, 1e-8, 0.0, 500);
  o.x0 = x0;
  compare(c.ctx, c.A, c.M, &c.P, &o, c.b, 1e-14, 1e-12, "initial guess");
  o = ropts(type, 1e-12, 0.0, 7);
  compare(c.ctx, c.A, c.M, &c.P, &o, c.b, 1e-14, 1e-12, "maxit 7");
  free(x0);
  basin_teardown(&c);
  PK_TEST_END();
}

PK_TEST_CASE(cg_basin_ainv) { return basin_tolerances(PKRYLOV_SOLVER_CG, PKRYLOV_PRECOND_USER); }
PK_TEST_CASE(cg_basin_jacobi) { return basin_tolerances(PKRYLOV_SOLVER_CG, PKRYLOV_PRECOND_JACOBI); }
PK_TEST_CASE(srcg_basin_ainv) { return basin_tolerances(PKRYLOV_SOLVER_SRCG, PKRYLOV_PRECOND_USER); }
PK_TEST_CASE(srcg_basin_jacobi) { return basin_tolerances(PKRYLOV_SOLVER_SRCG, PKRYLOV_PRECOND_JACOBI); }

/* ---- the thin shell with the column preconditioner ---------------------------------------------------- */

static int ts_apply(void *user, int64_t n, const double *x, double *y) {
  (void)n;
  return pkrylov_operator_apply((pkrylov_operator)user, PKRYLOV_MEM_HOST, x, y);
}
static int ts_precond(void *user, int64_t n, const double *r, double *z) {
  (void)n;
  return pkrylov_precond_apply((pkrylov_precond)user, PKRYLOV_MEM_HOST, r, z);
}

static int thinshell_column(int32_t type) {
  pkrylov_context ctx;
  PK_REQUIRE_OK(NULL, pkrylov_context_create(PKRYLOV_BACKEND_CPU, &ctx));
  pkrylov_thinshell_params p;
  pkrylov_thinshell_params_default(24, 20, 16, &p);
  pkrylov_operator A;
  PK_REQUIRE_OK(ctx, pkrylov_operator_create_thinshell(ctx, &p, &A));
  pkrylov_precond M;
  PK_REQUIRE_OK(ctx, pkrylov_precond_create(ctx, A, PKRYLOV_PRECOND_COLUMN, 0, PKRYLOV_LAYOUT_AUTO, &M));
  int64_t n;
  pkrylov_operator_get_info(A, &n, NULL, NULL, NULL, NULL, NULL);
  pk_ref_problem P = {n, ts_apply, ts_precond, A, M, NULL};
  double *b = malloc(sizeof(double) * (size_t)n);
  uint64_t st = 5;
  for (int64_t i = 0; i < n; i++) b[i] = pk_test_rand(&st);
  const double bn = wet_norm(&P, b);
  static const double f[3] = {1e-4, 1e-6, 1e-8};
  for (int k = 0; k < 3; k++) {
    char what[96];
    snprintf(what, sizeof what, "thin shell, atol %.0e ||b||", f[k]);
    run_opts o = ropts(type, 0.0, f[k] * bn, 1000);
    compare(ctx, A, M, &P, &o, b, 1e-14, 1e-12, what);
  }
  free(b);
  pkrylov_precond_destroy(&M);
  pkrylov_operator_destroy(&A);
  pkrylov_context_destroy(&ctx);
  PK_TEST_END();
}

PK_TEST_CASE(cg_thinshell_column) { return thinshell_column(PKRYLOV_SOLVER_CG); }
PK_TEST_CASE(srcg_thinshell_column) { return thinshell_column(PKRYLOV_SOLVER_SRCG); }

PK_TEST_MAIN(PK_TEST_ENTRY(cg_basin_ainv), PK_TEST_ENTRY(cg_basin_jacobi), 
             PK_TEST_ENTRY(srcg_basin_ainv), PK_TEST_ENTRY(srcg_basin_jacobi), 
             PK_TEST_ENTRY(cg_thinshell_column), PK_TEST_ENTRY(srcg_thinshell_column))

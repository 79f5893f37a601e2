/**
 * @file t713-cuda-stop-rule.c
 * @brief The recurrence stop rule, the minimum-residual iterate and single-reduction CG on CUDA contexts
 *        (CG and pipelined CG: pk_cuda_cg.cu, the rule and the minimum in the device state, the iterate
 *        copied by pk_cuda_copy_improved; SRCG: the CUDA vector engine), against the CPU backend:
 *  - repro_bitwise: reproducible mode on both backends (the same exact sums, the same per-element
 *    arithmetic): CG, pipelined CG and SRCG with the recurrence rule, a tolerance and an iteration cap with
 *    the minimum-residual iterate, blocks of 8 iterations (graphs, the copy kernel captured) and of 1: the
 *    GPU solve bitwise the CPU's (x, final and minimum residual, iterations, reason, min iteration);
 *  - minres_self: default mode, folded and one-block launchers, blocks of 1 and 6: the iterate returned
 *    with the minimum-residual option is bitwise the iterate of a solve capped at min_residual_iteration
 *    (so the copy kernel kept the right one); the CPU backend picks the same iteration;
 *  - rule_basin: the masked, negative definite free-surface problem with Jacobi, recurrence rule, several
 *    tolerances: no true residual, the CPU backend's iterations (within one: other sums), final residual
 *    the last recurrence residual, x within 1e-9 where the iterations agree;
 *  - srcg_preconditioners: SRCG with Jacobi and column on the thin shell, none and Jacobi on the basin, on
 *    the GPU against the CPU (converged, iterations, x);
 *  - bad_input: the setters on a CUDA solver (codes as on the CPU).
 * Every case skips (77) without a GPU.
 */
#include <cuda_runtime.h>
#include <math.h>
#include <string.h>

#include "pk_test.h"
/* after pk_test.h */
#include "pk_cuda_test.h"
#include "pk_stop_test.h"

static const int32_t TYPES[3] = {PKRYLOV_SOLVER_CG, PKRYLOV_SOLVER_PIPECG, PKRYLOV_SOLVER_SRCG};

typedef struct {
  int32_t type, rule, minres, maxit, sync, fold, repro, pct;
  double rtol, atol;
} cfg;

static cfg mkcfg(int32_t type, int32_t pct) {
  cfg c;
  memset(&c, 0, sizeof c);
  c.type = type, c.rule = PKRYLOV_STOP_RECURRENCE, c.maxit = 2000, c.sync = 32, c.fold = -1, c.pct = pct;
  c.rtol = 1e-8;
  return c;
}

/** One solve of the thin shell (p) with b on `backend`; x (n), the result, and when h is not NULL the
 *  residual history (maxit + 1 values, *len). */
static int ts_solve_h(int32_t backend, const pkrylov_thinshell_params *p, const cfg *c, const double *b,
                      double *x, pkrylov_result *res, double *h, int32_t *len) {
  pkrylov_context ctx;
  pkrylov_operator A;
  pkrylov_precond M = NULL;
  pkrylov_solver s;
  PK_REQUIRE_OK(NULL, pkrylov_context_create(backend, &ctx));
  if (c->repro)
    PK_REQUIRE_OK(ctx, pkrylov_context_set_reproducible(ctx, 1));
  PK_REQUIRE_OK(ctx, pkrylov_operator_create_thinshell(ctx, p, &A));
  if (c->pct != PKRYLOV_PRECOND_NONE)
    PK_REQUIRE_OK(ctx, pkrylov_precond_create(ctx, A, c->pct, 0, PKRYLOV_LAYOUT_AUTO, &M));
  PK_REQUIRE_OK(ctx, pkrylov_solver_create(ctx, c->type, A, M, &s));
  PK_REQUIRE_OK(ctx, pkrylov_solver_set_tolerances(s, c->rtol, c->atol));
  PK_REQUIRE_OK(ctx, pkrylov_solver_set_max_iterations(s, c->maxit));
  PK_REQUIRE_OK(ctx, pkrylov_solver_set_stop_rule(s, c->rule));
  PK_REQUIRE_OK(ctx, pkrylov_solver_set_min_residual(s, c->minres));
  PK_REQUIRE_OK(ctx, pkrylov_solver_set_history(s, h != NULL));
  if (backend == PKRYLOV_BACKEND_CUDA) {
    PK_REQUIRE_OK(ctx, pkrylov_solver_set_sync_interval(s, c->sync));
    if (c->type != PKRYLOV_SOLVER_SRCG)
      pk_cuda_solver_set_launch(s, c->fold, -1);
  }
  memset(x, 0, sizeof(double) * (size_t)(p->nx * p->ny * p->nz));
  PK_REQUIRE_OK(ctx, pkrylov_solver_solve(s, PKRYLOV_MEM_HOST, b, x));
  PK_REQUIRE_OK(ctx, pkrylov_solver_get_result(s, res));
  if (h)
    PK_REQUIRE_OK(ctx, pkrylov_solver_get_history(s, c->maxit + 1, h, len));
  pkrylov_solver_destroy(&s);
  pkrylov_precond_destroy(&M);
  pkrylov_operator_destroy(&A);
  pkrylov_context_destroy(&ctx);
  return PK_PASS;
}

static int ts_solve(int32_t backend, const pkrylov_thinshell_params *p, const cfg *c, const double *b,
                    double *x, pkrylov_result *res) {
  return ts_solve_h(backend, p, c, b, x, res, NULL, NULL);
}

/** The recurrence residual history of a CPU solve of c's type that does not converge (maxit + 1 values
 *  into h; *len). */
static int cpu_history(const pkrylov_thinshell_params *p, const cfg *c, const double *b, double *h,
                       int32_t *len) {
  cfg a = *c;
  a.rtol = 0.0, a.atol = 1e-300, a.rule = PKRYLOV_STOP_RECURRENCE, a.minres = 0;
  const int64_t n = (int64_t)p->nx * p->ny * p->nz;
  double *x = calloc((size_t)n, sizeof(double));
  pkrylov_result res;
  const int rc = ts_solve_h(PKRYLOV_BACKEND_CPU, p, &a, b, x, &res, h, len);
  free(x);
  return rc;
}

/**
 * The first iteration k >= 10 (a cap beyond a block of iterations) whose residual is above the minimum of
 * the earlier ones (-1: none; the thin shell here has one at 10, well above rounding); *early = 1
 * when that minimum is well above the attainable accuracy (1e-9 of the first residual), so that another
 * backend's rounding picks the same iteration.
 */
static int32_t first_rise(const double *h, int32_t len, int *early) {
  double m = h[0];
  for (int32_t k = 1; k < len; k++) {
    if (k >= 10 && h[k] > m) {
      *early = m > 1e-9 * h[0];
      return k;
    }
    if (h[k] < m)
      m = h[k];
  }
  return -1;
}

static void thinshell(pkrylov_thinshell_params *p, double **b, int64_t *n) {
  pkrylov_thinshell_params_default(24, 20, 12, p);
  p->nu = 2.0;
  *n = 24 * 20 * 12;
  *b = malloc(sizeof(double) * (size_t)*n);
  uint64_t st = 17;
  for (int64_t i = 0; i < *n; i++)
    (*b)[i] = pk_test_rand(&st);
}

PK_TEST_CASE(repro_bitwise) {
  SKIP_WITHOUT_GPU();
  pkrylov_thinshell_params p;
  double *b;
  int64_t n;
  thinshell(&p, &b, &n);
  double *xc = malloc(sizeof(double) * (size_t)n), *xg = malloc(sizeof(double) * (size_t)n);
  double *h = malloc(sizeof(double) * 2001);
  for (int t = 0; t < 3; t++)
    for (int variant = 0; variant < 2; variant++) {
      cfg c = mkcfg(TYPES[t], PKRYLOV_PRECOND_COLUMN);
      c.repro = 1;
      if (variant == 1) { /* an iteration cap above an earlier minimum, the minimum-residual iterate */
        int32_t len;
        c.maxit = 400;
        if (cpu_history(&p, &c, b, h, &len) != PK_PASS)
          return PK_FAIL;
        int early;
        c.maxit = first_rise(h, len, &early);
        PK_REQUIRE(c.maxit > 0, "type %d: a monotone residual history", TYPES[t]);
        c.rtol = 0.0, c.atol = 1e-300, c.minres = 1;
      }
      pkrylov_result rc, rg;
      if (ts_solve(PKRYLOV_BACKEND_CPU, &p, &c, b, xc, &rc) != PK_PASS)
        return PK_FAIL;
      for (int sync = 8; sync >= 1; sync -= 7) {
        c.sync = sync;
        if (ts_solve(PKRYLOV_BACKEND_CUDA, &p, &c, b, xg, &rg) != PK_PASS)
          return PK_FAIL;
        char tag[96];
        snprintf(tag, sizeof tag, "type %d %s blocks of %d", TYPES[t], variant ? "minres cap" : "rtol", sync);
        PK_EXPECT(rg.iterations == rc.iterations && rg.reason == rc.reason,
                  "%s: GPU %d iterations (%s), CPU %d (%s)", tag, rg.iterations,
                  pkrylov_reason_string(rg.reason), rc.iterations, pkrylov_reason_string(rc.reason));
        pkt_same_bits(tag, "x", n, xg, xc);
        PK_EXPECT(memcmp(&rg.final_residual, &rc.final_residual, sizeof(double)) == 0 &&
                      memcmp(&rg.min_residual, &rc.min_residual, sizeof(double)) == 0 &&
                      rg.min_residual_iteration == rc.min_residual_iteration,
                  "%s: final %.17g / %.17g, min %.17g / %.17g at %d / %d", tag, rg.final_residual,
                  rc.final_residual, rg.min_residual, rc.min_residual, rg.min_residual_iteration,
                  rc.min_residual_iteration);
        PK_EXPECT(rg.true_residual_checks == 0, "%s: %d true residual checks", tag, rg.true_residual_checks);
        if (variant == 1)
          PK_EXPECT(rg.min_residual_iteration >= 0 && rg.min_residual_iteration < rg.iterations,
                    "%s: min at %d of %d", tag, rg.min_residual_iteration, rg.iterations);
      }
    }
  free(xc), free(xg), free(h), free(b);
  PK_TEST_END();
}

PK_TEST_CASE(minres_self) {
  SKIP_WITHOUT_GPU();
  pkrylov_thinshell_params p;
  double *b;
  int64_t n;
  thinshell(&p, &b, &n);
  double *x1 = malloc(sizeof(double) * (size_t)n), *x2 = malloc(sizeof(double) * (size_t)n);
  double *xc = malloc(sizeof(double) * (size_t)n), *h = malloc(sizeof(double) * 2001);
  for (int t = 0; t < 3; t++) {
    cfg c = mkcfg(TYPES[t], PKRYLOV_PRECOND_COLUMN);
    int32_t len;
    c.maxit = 400;
    if (cpu_history(&p, &c, b, h, &len) != PK_PASS)
      return PK_FAIL;
    int early;
    const int32_t cap = first_rise(h, len, &early);
    PK_REQUIRE(cap > 0, "type %d: a monotone residual history", TYPES[t]);
    printf("type %d: cap %d (%s the attainable accuracy)\n", TYPES[t], cap, early ? "above" : "at");
    c.rtol = 0.0, c.atol = 1e-300, c.minres = 1, c.maxit = cap;
    pkrylov_result rc;
    if (ts_solve(PKRYLOV_BACKEND_CPU, &p, &c, b, xc, &rc) != PK_PASS)
      return PK_FAIL;
    for (int fold = 0; fold <= 1; fold++)
      for (int sync = 1; sync <= 6; sync += 5) {
        char tag[96];
        snprintf(tag, sizeof tag, "type %d fold %d blocks of %d", TYPES[t], fold, sync);
        cfg a = c;
        a.fold = fold, a.sync = sync;
        pkrylov_result r1, r2;
        if (ts_solve(PKRYLOV_BACKEND_CUDA, &p, &a, b, x1, &r1) != PK_PASS)
          return PK_FAIL;
        PK_EXPECT(r1.iterations == cap && r1.reason == PKRYLOV_DIVERGED_MAX_ITERATIONS,
                  "%s: %d iterations (%s)", tag, r1.iterations, pkrylov_reason_string(r1.reason));
        if (early) { /* (at the attainable accuracy the residuals are rounding: another order, another min) */
          PK_EXPECT(r1.min_residual_iteration == rc.min_residual_iteration,
                    "%s: min at %d, the CPU backend's at %d", tag, r1.min_residual_iteration,
                    rc.min_residual_iteration);
          PK_EXPECT(fabs(r1.min_residual - rc.min_residual) <= 1e-10 * r1.initial_residual,
                    "%s: min residual %.17g, CPU %.17g", tag, r1.min_residual, rc.min_residual);
          PK_EXPECT(pk_test_rel_diff(n, x1, xc) <= 1e-10, "%s: x vs the CPU's: %.3g", tag,
                    pk_test_rel_diff(n, x1, xc));
          PK_EXPECT(r1.min_residual_iteration < cap, "%s: min at %d of %d", tag, r1.min_residual_iteration,
                    cap);
        }
        PK_EXPECT(r1.min_residual_iteration >= 0, "%s: min at %d", tag, r1.min_residual_iteration);
        /* the same solve capped at the minimum's iteration, without the option: x bitwise */
        a.minres = 0, a.maxit = r1.min_residual_iteration;
        if (ts_solve(PKRYLOV_BACKEND_CUDA, &p, &a, b, x2, &r2) != PK_PASS)
          return PK_FAIL;
        PK_EXPECT(r2.min_residual == -1.0 && r2.min_residual_iteration == -1, "%s: min fields when off", tag);
        pkt_same_bits(tag, "x (the kept iterate vs the capped solve)", n, x1, x2);
        PK_EXPECT(r2.final_residual == r1.min_residual,
                  "%s: the capped solve's last residual %.17g, min %.17g", tag, r2.final_residual,
                  r1.min_residual);
      }
  }
  free(x1), free(x2), free(xc), free(h), free(b);
  PK_TEST_END();
}

/** The basin B with right-hand side b solved on `backend` (type, preconditioner pct, rtol, rule): x, the
 *  result and the last recorded residual (*hlast). */
static int basin_solve(int32_t backend, const pk_basin *B, const double *b, int32_t type, int32_t pct,
                       double rtol, int32_t rule, double *x, pkrylov_result *res, double *hlast) {
  pkrylov_context ctx;
  pkrylov_operator A;
  pkrylov_precond M = NULL;
  pkrylov_solver s;
  PK_REQUIRE_OK(NULL, pkrylov_context_create(backend, &ctx));
  PK_REQUIRE_OK(
      ctx, pkrylov_operator_create_stencil7(ctx, B->nx, B->ny, 1, B->aW, B->aS, B->aV, B->aC, B->mask, &A));
  if (pct != PKRYLOV_PRECOND_NONE)
    PK_REQUIRE_OK(ctx, pkrylov_precond_create(ctx, A, pct, 0, PKRYLOV_LAYOUT_AUTO, &M));
  PK_REQUIRE_OK(ctx, pkrylov_solver_create(ctx, type, A, M, &s));
  PK_REQUIRE_OK(ctx, pkrylov_solver_set_tolerances(s, rtol, 0.0));
  PK_REQUIRE_OK(ctx, pkrylov_solver_set_stop_rule(s, rule));
  PK_REQUIRE_OK(ctx, pkrylov_solver_set_history(s, 1));
  memset(x, 0, sizeof(double) * (size_t)B->n);
  PK_REQUIRE_OK(ctx, pkrylov_solver_solve(s, PKRYLOV_MEM_HOST, b, x));
  PK_REQUIRE_OK(ctx, pkrylov_solver_get_result(s, res));
  int32_t len;
  PK_REQUIRE_OK(ctx, pkrylov_solver_get_history(s, 0, NULL, &len));
  double *hh = malloc(sizeof(double) * (size_t)len);
  PK_REQUIRE_OK(ctx, pkrylov_solver_get_history(s, len, hh, &len));
  *hlast = hh[len - 1];
  free(hh);
  pkrylov_solver_destroy(&s);
  pkrylov_precond_destroy(&M);
  pkrylov_operator_destroy(&A);
  pkrylov_context_destroy(&ctx);
  return PK_PASS;
}

/** The basin of rule_basin and its right-hand side (0 at land). */
static double *basin_rhs(pk_basin *B) {
  pk_basin_make(B, 61, 47, 3, 0);
  double *b = calloc((size_t)B->n, sizeof(double));
  uint64_t st = 5;
  for (int64_t i = 0; i < B->n; i++)
    if (B->mask[i])
      b[i] = pk_test_rand(&st);
  return b;
}

PK_TEST_CASE(rule_basin) {
  SKIP_WITHOUT_GPU();
  pk_basin B;
  double *b = basin_rhs(&B), *xs[2];
  xs[0] = malloc(sizeof(double) * (size_t)B.n), xs[1] = malloc(sizeof(double) * (size_t)B.n);
  static const double tols[3] = {1e-4, 1e-7, 1e-10};
  for (int t = 0; t < 3; t++)
    for (int k = 0; k < 3; k++) {
      pkrylov_result res[2];
      for (int be = 0; be < 2; be++) {
        double hl;
        if (basin_solve(be ? PKRYLOV_BACKEND_CUDA : PKRYLOV_BACKEND_CPU, &B, b, TYPES[t],
                        PKRYLOV_PRECOND_JACOBI, tols[k], PKRYLOV_STOP_RECURRENCE, xs[be], &res[be],
                        &hl) != PK_PASS)
          return PK_FAIL;
        PK_EXPECT(res[be].converged && res[be].true_residual_checks == 0 && res[be].final_residual == hl,
                  "type %d tol %g backend %d: %s, %d checks, final %.17g, last recorded %.17g", TYPES[t],
                  tols[k], be, pkrylov_reason_string(res[be].reason), res[be].true_residual_checks,
                  res[be].final_residual, hl);
        PK_EXPECT(res[be].final_residual <= tols[k] * res[be].rhs_norm, "type %d: final residual above tol",
                  TYPES[t]);
      }
      PK_EXPECT(abs(res[0].iterations - res[1].iterations) <= 1, "type %d tol %g: CPU %d iterations, GPU %d",
                TYPES[t], tols[k], res[0].iterations, res[1].iterations);
      if (res[0].iterations == res[1].iterations)
        PK_EXPECT(pk_test_rel_diff(B.n, xs[1], xs[0]) <= 1e-9, "type %d tol %g: x differs by %.3g", TYPES[t],
                  tols[k], pk_test_rel_diff(B.n, xs[1], xs[0]));
    }
  free(b), free(xs[0]), free(xs[1]);
  pk_basin_free(&B);
  PK_TEST_END();
}

/** The GPU's and the CPU's solves of one configuration: converged, iterations, x, final residual. */
static void expect_close(const char *tag, int64_t n, const pkrylov_result *rc, const pkrylov_result *rg,
                         const double *xc, const double *xg, double rtol) {
  PK_EXPECT(rc->converged && rg->converged, "%s: CPU %s, GPU %s", tag, pkrylov_reason_string(rc->reason),
            pkrylov_reason_string(rg->reason));
  PK_EXPECT(abs(rc->iterations - rg->iterations) <= 2 + rc->iterations / 50, "%s: CPU %d iterations, GPU %d",
            tag, rc->iterations, rg->iterations);
  PK_EXPECT(pk_test_rel_diff(n, xg, xc) <= 1e-6, "%s: x differs by %.3g", tag, pk_test_rel_diff(n, xg, xc));
  PK_EXPECT(rg->final_residual <= rtol * rg->rhs_norm, "%s: final residual %g", tag, rg->final_residual);
}

/** SRCG with the confirmed rule: Jacobi and column on the thin shell, none and Jacobi on the basin. */
PK_TEST_CASE(srcg_preconditioners) {
  SKIP_WITHOUT_GPU();
  pkrylov_thinshell_params p;
  double *b;
  int64_t n;
  thinshell(&p, &b, &n);
  double *xc = malloc(sizeof(double) * (size_t)n), *xg = malloc(sizeof(double) * (size_t)n);
  static const int32_t pcs[2] = {PKRYLOV_PRECOND_JACOBI, PKRYLOV_PRECOND_COLUMN};
  for (int k = 0; k < 2; k++) {
    cfg c = mkcfg(PKRYLOV_SOLVER_SRCG, pcs[k]);
    c.rule = PKRYLOV_STOP_CONFIRMED;
    c.rtol = 1e-9;
    pkrylov_result rc, rg;
    if (ts_solve(PKRYLOV_BACKEND_CPU, &p, &c, b, xc, &rc) != PK_PASS ||
        ts_solve(PKRYLOV_BACKEND_CUDA, &p, &c, b, xg, &rg) != PK_PASS)
      return PK_FAIL;
    char tag[64];
    snprintf(tag, sizeof tag, "thin shell, precond %d", pcs[k]);
    expect_close(tag, n, &rc, &rg, xc, xg, 1e-9);
  }
  free(xc), free(xg), free(b);
  pk_basin B;
  b = basin_rhs(&B);
  xc = malloc(sizeof(double) * (size_t)B.n), xg = malloc(sizeof(double) * (size_t)B.n);
  static const int32_t bpcs[2] = {PKRYLOV_PRECOND_NONE, PKRYLOV_PRECOND_JACOBI};
  for (int k = 0; k < 2; k++) {
    pkrylov_result rc, rg;
    double hl;
    if (basin_solve(PKRYLOV_BACKEND_CPU, &B, b, PKRYLOV_SOLVER_SRCG, bpcs[k], 1e-9, PKRYLOV_STOP_CONFIRMED,
                    xc, &rc, &hl) != PK_PASS ||
        basin_solve(PKRYLOV_BACKEND_CUDA, &B, b, PKRYLOV_SOLVER_SRCG, bpcs[k], 1e-9, PKRYLOV_STOP_CONFIRMED,
                    xg, &rg, &hl) != PK_PASS)
      return PK_FAIL;
    char tag[64];
    snprintf(tag, sizeof tag, "basin (negative definite), precond %d", bpcs[k]);
    expect_close(tag, B.n, &rc, &rg, xc, xg, 1e-9);
  }
  free(xc), free(xg), free(b);
  pk_basin_free(&B);
  PK_TEST_END();
}

PK_TEST_CASE(bad_input) {
  SKIP_WITHOUT_GPU();
  pkrylov_context ctx;
  pkrylov_operator A;
  pkrylov_solver s;
  pkrylov_thinshell_params p;
  pkrylov_thinshell_params_default(6, 5, 4, &p);
  PK_REQUIRE_OK(NULL, pkrylov_context_create(PKRYLOV_BACKEND_CUDA, &ctx));
  PK_REQUIRE_OK(ctx, pkrylov_operator_create_thinshell(ctx, &p, &A));
  PK_REQUIRE_OK(ctx, pkrylov_solver_create(ctx, PKRYLOV_SOLVER_FGMRES, A, NULL, &s));
  PK_EXPECT_CODE(ctx, pkrylov_solver_set_min_residual(s, 1), PKRYLOV_ERR_UNSUPPORTED);
  PK_EXPECT(pk_test_msg_has(ctx, "solver type 306"), "message names the type");
  PK_EXPECT_CODE(ctx, pkrylov_solver_set_stop_rule(s, PKRYLOV_STOP_RECURRENCE + 1),
                 PKRYLOV_ERR_INVALID_VALUE);
  pkrylov_solver_destroy(&s);
  pkrylov_operator_destroy(&A);
  pkrylov_context_destroy(&ctx);
  PK_TEST_END();
}

PK_TEST_MAIN(PK_TEST_ENTRY(repro_bitwise), PK_TEST_ENTRY(minres_self), PK_TEST_ENTRY(rule_basin),
             PK_TEST_ENTRY(srcg_preconditioners), PK_TEST_ENTRY(bad_input))

/**
 * @file solver.c
 * @brief Solver objects: creation, settings, results, and pkrylov_solver_solve (argument checks, routing).
 *
 * The solve routes to the vector engine's frame (pk_kry_solve, kry.c) for every method the engine of the
 * context's backend serves (pk_kry_serves: on the CPU all of them, CG and pipelined CG included, cg.c; on
 * CUDA all but CG and pipelined CG), else to the backend's own driver (the CUDA CG drivers of
 * pk_cuda_solver.cu). The residual bookkeeping the drivers share (history, monitor, stagnation window, the
 * stop rules, the minimum-residual result) is here: pk_solver_record, pk_solver_converged(_rr),
 * pk_solver_min_result.
 *
 * Stop rule (pkrylov_solver_set_stop_rule): the confirmed rule (||r|| <= tol on the recurrence residual, then
 * the true residual must meet it too, else the iteration restarts from x) or the recurrence rule (sum r^2 <
 * tol^2 and no confirmation). Minimum-residual iterate (pkrylov_solver_set_min_residual): CG, pipelined CG
 * and single-reduction CG keep the iterate of the smallest recurrence sum and return it when the last sum is
 * larger (pk_solver_min_result).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "pk_impl.h"
#include "pk_kry.h"

int pkrylov_solver_create(pkrylov_context ctx, int32_t type, pkrylov_operator A, pkrylov_precond M,
                          pkrylov_solver *s) {
  PK_CHECK(ctx != NULL, NULL, PKRYLOV_ERR_NULL_POINTER, "argument 'ctx' is NULL");
  PK_CHECK_PTR(s, ctx);
  PK_CHECK_PTR(A, ctx);
  PK_CHECK(type == PKRYLOV_SOLVER_CG || type == PKRYLOV_SOLVER_PIPECG || pk_kry_is_kry_type(type), ctx,
           PKRYLOV_ERR_INVALID_VALUE, "argument 'type' = %d is not a pkrylov_solver_type (%d to %d)", type,
           PKRYLOV_SOLVER_CG, PKRYLOV_SOLVER_SRCG);
  PK_CHECK(A->ctx == ctx, ctx, PKRYLOV_ERR_INCOMPATIBLE, "operator 'A' belongs to another context");
  if (M) {
    PK_CHECK(M->ctx == ctx, ctx, PKRYLOV_ERR_INCOMPATIBLE,
             "preconditioner 'M' belongs to another context");
    PK_CHECK(M->n == A->n, ctx, PKRYLOV_ERR_SIZE_MISMATCH,
             "preconditioner 'M' has size %lld but operator 'A' has size %lld", (long long)M->n,
             (long long)A->n);
  }
  pkrylov_solver S;
  PK_CALLOC(S, 1, ctx);
  S->ctx = ctx;
  S->type = type;
  S->A = A;
  S->Mobj = M;
  S->M = (M && M->type != PKRYLOV_PRECOND_NONE) ? M : NULL;
  S->n = A->n;
  S->rtol = 1e-8;
  S->atol = 0.0;
  S->maxit = 1000;
  S->replace_interval = PKRYLOV_REPLACE_AUTO;
  S->restart = 30;
  S->step = 0;
  S->stop_rule = PKRYLOV_STOP_CONFIRMED;
  S->opts = ctx->opts; /* the solver-level options: the context's now, changed by pkrylov_solver_set_option */
  /* the methods on the vector engine (pk_kry.h; CG and pipelined CG where the engine has their loops) keep
     their vectors in their engine, made at the first solve; a device backend's own CG driver keeps its
     vectors on the device (its solver_setup) */
  const int kry = pk_kry_serves(ctx, &S->opts, type);
  S->part = calloc((size_t)pk_cpu_scratch_size(A->n, S->M), sizeof(double));
  if (!S->part) {
    free(S);
    return pk_error(ctx, PKRYLOV_ERR_OUT_OF_MEMORY, __func__, "cannot allocate the partial sums of %lld values",
                    (long long)A->n);
  }
  S->sync_interval = 32;
  if (kry && ctx->be->device && (type == PKRYLOV_SOLVER_CG || type == PKRYLOV_SOLVER_PIPECG)) {
    const int ierr = pk_kry_reserve(S); /* device memory for the work vectors, checked now (the driver's rule) */
    if (ierr) {
      free(S->part);
      free(S);
      return ierr;
    }
  }
  if (ctx->be->solver_setup && !kry) {
    int ierr = ctx->be->solver_setup(S);
    if (ierr) {
      ctx->be->solver_free(S);
      free(S->part);
      free(S);
      return ierr;
    }
  }
  A->refs++;
  if (M) M->refs++;
  ctx->live_objects++;
  *s = S;
  return PKRYLOV_SUCCESS;
}

/**
 * Take the solver for the call func: every call on a solver holds its flag (a solve for its whole length),
 * so a second thread's call is refused instead of racing the first (PKRYLOV_ERR_BUSY naming 's').
 */
static int solver_take(pkrylov_solver s, const char *func) {
  if (pk_busy_take(&s->busy)) return PKRYLOV_SUCCESS;
  return pk_error(s->ctx, PKRYLOV_ERR_BUSY, func,
                  "argument 's' is in use by another thread (a solver serves one call at a time, and a "
                  "callback of its solve may not call back into it)");
}

/** Give back the solver taken by solver_take() and pass the call's status on. */
static int solver_give(pkrylov_solver s, int ierr) {
  pk_busy_drop(&s->busy);
  return ierr;
}

int pkrylov_solver_set_option(pkrylov_solver s, const char *name, const char *value) {
  PK_CHECK(s != NULL, NULL, PKRYLOV_ERR_NULL_POINTER, "argument 's' is NULL");
  PK_CALL(solver_take(s, __func__));
  int e = pk_options_set(s->ctx, __func__, &s->opts, 1, name, value);
  if (!e && s->dev) s->ctx->be->solver_options(s); /* the device state's copies of the launch options */
  return solver_give(s, e);
}

int pkrylov_solver_get_option(pkrylov_solver s, const char *name, char *buf, int32_t buflen) {
  PK_CHECK(s != NULL, NULL, PKRYLOV_ERR_NULL_POINTER, "argument 's' is NULL");
  /* the context-level options are the context's (the solver reads them there) */
  const pk_options *o = pk_options_is_solver_level(name) ? &s->opts : &s->ctx->opts;
  return pk_options_get(s->ctx, __func__, o, name, buf, buflen);
}

int pkrylov_solver_destroy(pkrylov_solver *s) {
  PK_CHECK(s != NULL, NULL, PKRYLOV_ERR_NULL_POINTER, "argument 's' is NULL");
  pkrylov_solver S = *s;
  if (!S) return PKRYLOV_SUCCESS;
  PK_CALL(solver_take(S, __func__)); /* never free a solver another thread is solving with */
  S->A->refs--;
  if (S->Mobj) S->Mobj->refs--;
  S->ctx->live_objects--;
  if (S->ctx->be->solver_free) S->ctx->be->solver_free(S);
  pk_kry_destroy((pk_kry *)S->kry);
  free(S->halo_bx);
  if (S->halo_bx_dev) S->ctx->be->buffer_free(S->halo_bx_dev);
  free(S->part);
  free(S->hist);
  free(S);
  *s = NULL;
  return PKRYLOV_SUCCESS;
}

#define PK_SOLVER_BEGIN(s)                                                                         \
  PK_CHECK((s) != NULL, NULL, PKRYLOV_ERR_NULL_POINTER, "argument 's' is NULL")

/** The body of a public call on a solver: s is checked, taken for the call, given back after body. */
#define PK_SOLVER_CALL(s, body)                                                                    \
  do {                                                                                             \
    PK_SOLVER_BEGIN(s);                                                                            \
    PK_CALL(solver_take((s), __func__));                                                           \
    return solver_give((s), (body));                                                               \
  } while (0)

static int set_tolerances(pkrylov_solver s, const char *func, double rtol, double atol) {
  PK_CHECK_AS(func, isfinite(rtol) && rtol >= 0, s->ctx, PKRYLOV_ERR_INVALID_VALUE,
              "argument 'rtol' = %g must be finite and >= 0", rtol);
  PK_CHECK_AS(func, isfinite(atol) && atol >= 0, s->ctx, PKRYLOV_ERR_INVALID_VALUE,
              "argument 'atol' = %g must be finite and >= 0", atol);
  PK_CHECK_AS(func, rtol > 0 || atol > 0, s->ctx, PKRYLOV_ERR_INVALID_VALUE,
              "arguments 'rtol' and 'atol' are both 0: the solve could never stop on its own");
  s->rtol = rtol;
  s->atol = atol;
  return PKRYLOV_SUCCESS;
}

int pkrylov_solver_set_tolerances(pkrylov_solver s, double rtol, double atol) {
  PK_SOLVER_CALL(s, set_tolerances(s, __func__, rtol, atol));
}

/** Shared body of the integer setters: value in [lo, hi] (the message names the argument) into *field. */
static int pk_set_int(pkrylov_solver s, const char *func, const char *name, int32_t v, int32_t lo, int32_t hi,
                      int32_t *field) {
  if (!s) return pk_error(NULL, PKRYLOV_ERR_NULL_POINTER, func, "argument 's' is NULL");
  if (v < lo || v > hi) {
    if (hi == 1 && lo == 0)
      return pk_error(s->ctx, PKRYLOV_ERR_INVALID_VALUE, func, "argument '%s' = %d must be 0 or 1", name, v);
    if (hi == INT32_MAX)
      return pk_error(s->ctx, PKRYLOV_ERR_INVALID_VALUE, func, "argument '%s' = %d must be >= %d", name, v, lo);
    return pk_error(s->ctx, PKRYLOV_ERR_INVALID_VALUE, func, "argument '%s' = %d must be in %d..%d", name, v, lo, hi);
  }
  PK_CALL(solver_take(s, func));
  *field = v;
  return solver_give(s, PKRYLOV_SUCCESS);
}

int pkrylov_solver_set_max_iterations(pkrylov_solver s, int32_t maxit) {
  return pk_set_int(s, __func__, "maxit", maxit, 0, INT32_MAX, s ? &s->maxit : NULL);
}

int pkrylov_solver_set_initial_guess_nonzero(pkrylov_solver s, int32_t flag) {
  return pk_set_int(s, __func__, "flag", flag, 0, 1, s ? &s->nonzero_guess : NULL);
}

int pkrylov_solver_set_true_residual_interval(pkrylov_solver s, int32_t k) {
  return pk_set_int(s, __func__, "k", k, 0, INT32_MAX, s ? &s->true_res_interval : NULL);
}

int pkrylov_solver_set_residual_replacement(pkrylov_solver s, int32_t k) {
  PK_SOLVER_BEGIN(s);
  PK_CHECK(k >= 0 || k == PKRYLOV_REPLACE_AUTO, s->ctx, PKRYLOV_ERR_INVALID_VALUE,
           "argument 'k' = %d must be >= 0 (every k iterations, 0 = never) or PKRYLOV_REPLACE_AUTO (%d)", k,
           PKRYLOV_REPLACE_AUTO);
  s->replace_interval = k;
  return PKRYLOV_SUCCESS;
}

int pk_solver_replace_every(const struct pkrylov_solver_s *s) {
  return s->replace_interval == PKRYLOV_REPLACE_AUTO ? PK_REPLACE_FIXED_DEFAULT : s->replace_interval;
}

int pk_rr_init(pkrylov_solver s, double bnorm, pk_rr_est *e) {
  double v[2];
  memset(e, 0, sizeof *e);
  if (!s->rr_have || s->rr_version != s->A->coef_version) { /* the rank's part, once per coefficients */
    PK_CALL(pk_op_rr_norm(s->A, &s->rr_amax, &s->rr_mu));
    s->rr_have = 1;
    s->rr_version = s->A->coef_version;
  }
  v[0] = s->rr_amax, v[1] = s->rr_mu;
  PK_CALL(pk_allreduce_max_nonneg(s->ctx, v, 2)); /* every solve (a rank's update alone changes it) */
  pk_rr_start(e, 2.0 * v[0], v[1], bnorm);
  return PKRYLOV_SUCCESS;
}

int pkrylov_solver_set_stop_rule(pkrylov_solver s, int32_t rule) {
  PK_SOLVER_BEGIN(s);
  PK_CHECK(rule == PKRYLOV_STOP_CONFIRMED || rule == PKRYLOV_STOP_RECURRENCE, s->ctx,
           PKRYLOV_ERR_INVALID_VALUE,
           "argument 'rule' = %d is not a pkrylov_stop_rule (CONFIRMED %d, RECURRENCE %d)", rule,
           PKRYLOV_STOP_CONFIRMED, PKRYLOV_STOP_RECURRENCE);
  s->stop_rule = rule;
  return PKRYLOV_SUCCESS;
}

int pkrylov_solver_set_min_residual(pkrylov_solver s, int32_t flag) {
  int32_t v = 0;
  PK_CALL(pk_set_int(s, __func__, "flag", flag, 0, 1, &v));
  PK_CHECK(!v || s->type == PKRYLOV_SOLVER_CG || s->type == PKRYLOV_SOLVER_PIPECG ||
               s->type == PKRYLOV_SOLVER_SRCG,
           s->ctx, PKRYLOV_ERR_UNSUPPORTED,
           "argument 'flag' = 1: the minimum-residual iterate is implemented for CG (%d), pipelined CG (%d) and "
           "single-reduction CG (%d), not for solver type %d", PKRYLOV_SOLVER_CG, PKRYLOV_SOLVER_PIPECG,
           PKRYLOV_SOLVER_SRCG, s->type);
  s->min_res = v;
  return PKRYLOV_SUCCESS;
}

int pkrylov_solver_set_stagnation_window(pkrylov_solver s, int32_t window) {
  return pk_set_int(s, __func__, "window", window, 0, INT32_MAX, s ? &s->stag_window : NULL);
}

int pkrylov_solver_set_history(pkrylov_solver s, int32_t flag) {
  return pk_set_int(s, __func__, "flag", flag, 0, 1, s ? &s->history_on : NULL);
}

static int set_precision(pkrylov_solver s, const char *func, int32_t precision) {
  PK_CHECK_AS(func, precision >= PKRYLOV_PRECISION_FP64 && precision <= PKRYLOV_PRECISION_MIXED, s->ctx,
              PKRYLOV_ERR_INVALID_VALUE,
              "argument 'precision' = %d is not a pkrylov_precision (FP64 %d, MIXED_PRECOND %d, MIXED %d)",
              precision, PKRYLOV_PRECISION_FP64, PKRYLOV_PRECISION_MIXED_PRECOND, PKRYLOV_PRECISION_MIXED);
  PK_CHECK_AS(func, precision == PKRYLOV_PRECISION_FP64 || s->ctx->be->fp32, s->ctx,
              PKRYLOV_ERR_UNSUPPORTED,
              "argument 'precision' = %d: mixed precision is implemented by the CUDA backend only",
              precision);
  s->mixed = precision - PKRYLOV_PRECISION_FP64; /* 0 fp64, 1 fp32 factors, 2 fp32 factors and operator */
  return PKRYLOV_SUCCESS;
}

int pkrylov_solver_set_precision(pkrylov_solver s, int32_t precision) {
  PK_SOLVER_CALL(s, set_precision(s, __func__, precision));
}

int pkrylov_solver_set_sync_interval(pkrylov_solver s, int32_t k) {
  return pk_set_int(s, __func__, "k", k, 1, 4096, s ? &s->sync_interval : NULL);
}

int pkrylov_solver_set_restart(pkrylov_solver s, int32_t m) {
  return pk_set_int(s, __func__, "m", m, 1, 1000, s ? &s->restart : NULL);
}

int pkrylov_solver_set_step(pkrylov_solver s, int32_t step) {
  return pk_set_int(s, __func__, "step", step, 0, 16, s ? &s->step : NULL);
}

static int set_monitor(pkrylov_solver s, pkrylov_monitor_fn fn, void *user) {
  s->monitor = fn;
  s->monitor_user = user;
  return PKRYLOV_SUCCESS;
}

int pkrylov_solver_set_monitor(pkrylov_solver s, pkrylov_monitor_fn fn, void *user) {
  PK_SOLVER_CALL(s, set_monitor(s, fn, user));
}

static int get_result(pkrylov_solver s, const char *func, pkrylov_result *result) {
  PK_CHECK_AS(func, result != NULL, s->ctx, PKRYLOV_ERR_NULL_POINTER, "argument 'result' is NULL");
  PK_CHECK_AS(func, s->has_result, s->ctx, PKRYLOV_ERR_INVALID_STATE,
              "no solve has been done with this solver");
  *result = s->res;
  return PKRYLOV_SUCCESS;
}

int pkrylov_solver_get_result(pkrylov_solver s, pkrylov_result *result) {
  PK_SOLVER_CALL(s, get_result(s, __func__, result));
}

static int get_history(pkrylov_solver s, const char *func, int32_t capacity, double *hist, int32_t *length) {
  PK_CHECK_AS(func, length != NULL, s->ctx, PKRYLOV_ERR_NULL_POINTER, "argument 'length' is NULL");
  PK_CHECK_AS(func, capacity >= 0, s->ctx, PKRYLOV_ERR_INVALID_SIZE, "argument 'capacity' = %d must be >= 0",
              capacity);
  PK_CHECK_AS(func, s->has_result, s->ctx, PKRYLOV_ERR_INVALID_STATE,
              "no solve has been done with this solver");
  PK_CHECK_AS(func, s->history_on, s->ctx, PKRYLOV_ERR_INVALID_STATE,
              "history was not enabled (pkrylov_solver_set_history) for the last solve");
  *length = s->hist_len;
  if (hist) memcpy(hist, s->hist, sizeof(double) * (size_t)(capacity < s->hist_len ? capacity : s->hist_len));
  return PKRYLOV_SUCCESS;
}

int pkrylov_solver_get_history(pkrylov_solver s, int32_t capacity, double *hist, int32_t *length) {
  PK_SOLVER_CALL(s, get_history(s, __func__, capacity, hist, length));
}

/* ------------------------------------------------------------------------------------------------ */
/* Residual bookkeeping shared by the drivers (kry.c, cg.c, the CUDA driver)                        */

int pk_solver_record(pkrylov_solver s, double *best, int32_t *stalled, int32_t it, double res) {
  if (s->history_on && s->hist) {
    if (it < s->hist_cap) s->hist[it] = res;
    if (it + 1 > s->hist_len) s->hist_len = it + 1 <= s->hist_cap ? it + 1 : s->hist_cap;
  }
  if (s->monitor && s->monitor(s->monitor_user, it, res)) return PKRYLOV_STOPPED_BY_MONITOR;
  if (s->stag_window > 0) {
    if (res < *best * (1.0 - 1e-3)) {
      *best = res;
      *stalled = 0;
    } else if (++*stalled >= s->stag_window) {
      return PKRYLOV_DIVERGED_STAGNATION;
    }
  }
  return 0;
}

int pk_solver_converged(pkrylov_solver s, double tol, double res) {
  if (!(res <= tol)) return 0;
  return res <= s->atol ? PKRYLOV_CONVERGED_ATOL : PKRYLOV_CONVERGED_RTOL;
}

int pk_solver_min_result(pkrylov_result *res, int tracked, double min_rr, int32_t min_it, double last_rr) {
  if (!tracked) return 0;
  res->min_residual = sqrt(min_rr);
  res->min_residual_iteration = min_it;
  return last_rr > min_rr || last_rr != last_rr; /* a NaN last residual: the kept iterate */
}

int pk_solver_converged_rr(pkrylov_solver s, double tol, double rr) {
  if (!pk_solver_recurrence(s)) return pk_solver_converged(s, tol, sqrt(rr));
  if (!(rr < tol * tol || rr == 0.0)) return 0;
  return s->atol >= tol ? PKRYLOV_CONVERGED_ATOL : PKRYLOV_CONVERGED_RTOL;
}

/** Make room for the history of a solve (when on); an error names func. */
static int history_grow(pkrylov_solver s, const char *func) {
  if (s->history_on) {
    const int32_t cap = s->maxit < INT32_MAX - 1 ? s->maxit + 1 : INT32_MAX;
    if (cap > s->hist_cap) {
      double *h = realloc(s->hist, sizeof(double) * (size_t)cap);
      if (!h)
        return pk_error(s->ctx, PKRYLOV_ERR_OUT_OF_MEMORY, func,
                        "cannot allocate the residual history (%d values)", cap);
      s->hist = h;
      s->hist_cap = cap;
    }
  }
  return PKRYLOV_SUCCESS;
}

int pk_solver_history_reserve(pkrylov_solver s) {
  PK_CALL(history_grow(s, __func__));
  s->hist_len = 0;
  return PKRYLOV_SUCCESS;
}

int pk_solver_check_finite(pkrylov_solver s, const char *func, const double *b, const double *x) {
  int64_t bad = pk_first_nonfinite(b, s->n);
  if (bad >= 0)
    return pk_error(s->ctx, PKRYLOV_ERR_NOT_FINITE, func,
                    "argument 'b' has a non-finite value (%g) at index %lld", b[bad], (long long)bad);
  if (s->nonzero_guess) {
    bad = pk_first_nonfinite(x, s->n);
    if (bad >= 0)
      return pk_error(s->ctx, PKRYLOV_ERR_NOT_FINITE, func,
                      "argument 'x' (initial guess) has a non-finite value (%g) at index %lld", x[bad],
                      (long long)bad);
  }
  return PKRYLOV_SUCCESS;
}

/** 1 when s is solved on the vector engine (pk_kry_serves with its options; a solver created with kry.cg=1
 *  has no work area of the backend's own CG driver and stays on the engine whatever the option says now). */
static int solve_on_engine(pkrylov_solver s) {
  if (pk_kry_serves(s->ctx, &s->opts, s->type)) return 1;
  pk_options o = s->opts;
  o.kry_cg = 1;
  return !s->dev && pk_kry_serves(s->ctx, &o, s->type);
}

static int solver_solve(pkrylov_solver s, int32_t mem, const double *b, double *x) {
  pkrylov_context ctx = s->ctx;
  const int64_t n = s->n;
  /* the types the drivers below dispatch on: an unknown one is a corrupted handle, never another method */
  PK_CHECK_AS("pkrylov_solver_solve", s->type >= PKRYLOV_SOLVER_CG && s->type <= PKRYLOV_SOLVER_SRCG, ctx,
              PKRYLOV_ERR_INTERNAL,
              "argument 's' has the unknown solver type %d (CG %d to SRCG %d): a corrupted or destroyed handle",
              (int)s->type, PKRYLOV_SOLVER_CG, PKRYLOV_SOLVER_SRCG);
  PK_CALL(pk_op_check_type(s->A, "pkrylov_solver_solve"));
  if (s->Mobj) PK_CALL(pk_pc_check_type(s->Mobj, "pkrylov_solver_solve"));
  /* distributed: the argument checks and the settings agree on every rank (else the same error on each) */
  PK_CALL(pk_mpi_solve_check(s, mem, b, x));
  PK_CALL(pk_check_vectors(ctx, "pkrylov_solver_solve", mem, b, "b", x, "x", n));
  if (solve_on_engine(s)) return pk_kry_solve(s, mem, b, x);
  /* CG and pipelined CG on a backend whose engine lacks CG's fused loops: its own driver (CUDA) */
  PK_CHECK_AS("pkrylov_solver_solve", ctx->be->solver_solve != NULL, ctx, PKRYLOV_ERR_UNSUPPORTED,
              "solver type %d is not implemented on the %s backend", (int)s->type, ctx->be->name);
  PK_CALL(history_grow(s, "pkrylov_solver_solve")); /* the device solve empties the history itself */
  return ctx->be->solver_solve(s, mem, b, x);
}

int pkrylov_solver_solve(pkrylov_solver s, int32_t mem, const double *b, double *x) {
  PK_SOLVER_BEGIN(s);
  PK_CALL(solver_take(s, __func__));
  /* what the solve uses with it: an exclusive context, a stateful operator or preconditioner */
  int ierr = pk_use_begin(s->ctx, __func__, "s", s->A, s->Mobj);
  if (ierr) return solver_give(s, ierr);
  pk_threads_begin(s); /* the default count or one thread, as the solver measured them */
  ierr = solver_solve(s, mem, b, x);
  pk_threads_end(s, ierr == PKRYLOV_SUCCESS);
  pk_use_end(s->ctx, s->A, s->Mobj);
  return solver_give(s, ierr);
}

/**
 * @file solver.c
 * @brief Solver objects and the host-side drivers of CG and pipelined CG.
 *
 * The drivers hold the scalar recurrences, the convergence test, breakdown detection, history and the
 * monitor; every pass over vectors is one fused step of the backend (cpu_kernels.c), and every global
 * sum goes through reduce.c.
 *
 * CG is the two-loop form of Mueller et al. (seed 002): a "preconditioner loop" (r -= alpha q; z = M^-1 r;
 * partial (r,z), (r,r)) and an "operator loop" (x += alpha p; p = z + beta p; q = A z + beta q; partial
 * (p,q)), with q = A p kept by recurrence so that A is applied to z while p is being formed. The update
 * of x lags one loop behind and is completed when the iteration stops.
 *
 * Pipelined CG is Ghysels and Vanroose (2014), Algorithm 4: one reduction of (r,u), (w,u) and (r,r) per
 * iteration, started after the fused vector update and finished after the preconditioner is applied to
 * w (where MPI will overlap it). Recurrence vectors drift from their definitions in finite precision;
 * residual replacement (Cools et al. 2018) recomputes r, u, w, s, q, z explicitly every k iterations.
 *
 * Negative definite operators (as ocean models store them) work: the signs of (p, A p) and (r, M^-1 r)
 * are fixed by the first iteration and a breakdown is a zero or a change of sign.
 *
 * Stop rule (pkrylov_solver_set_stop_rule): both drivers test the recurrence residual's squared sum with
 * pk_solver_converged_rr (the confirmed rule: ||r|| <= tol, then pk_confirm on the true residual; the
 * recurrence rule: sum r^2 < tol^2 and no confirmation, pk_accept). Minimum-residual iterate
 * (pkrylov_solver_set_min_residual): pk_min_track keeps the iterate of the smallest sum in s->xmin (CG's is
 * x + alpha p, its x update lagging one loop), and the end of the solve returns it when the last sum is
 * larger (pk_solver_min_result).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "pk_impl.h"
#include "pk_kry.h"


/** Extra doubles between consecutive work vectors (5 cache lines), see pkrylov_solver_create. */
#define PK_VEC_SHIFT 40

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
  /* CG: r z p q (+ t for true residuals); pipelined CG: all; the BiCGStab and GMRES families keep their
     vectors in their engine (pk_kry.h), made at the first solve */
  const int kry = pk_kry_is_kry_type(type);
  /* pipelined CG: n = A m of its own (V_N) only for operators applied on whole vectors (computed while
     the reduction is in flight) */
  const int nvec = kry ? 0 : type == PKRYLOV_SOLVER_CG ? V_U + 1 : pk_op_whole_vector(A) ? PK_NVEC : V_N;
  /* Work vectors in one block, each start shifted by 5 more cache lines than the previous one: large
     power-of-two strides would map every vector of a fused loop to the same cache sets. */
  const size_t stride = ((size_t)A->n + 7) / 8 * 8 + PK_VEC_SHIFT;
  /* a device backend keeps its vectors on the device (its solver_setup) */
  S->work = !ctx->be->device && nvec > 0 ? calloc((size_t)nvec * stride, sizeof(double))
                                                              : malloc(1);
  S->part = calloc((size_t)pk_cpu_scratch_size(A->n, S->M), sizeof(double));
  if (!S->work || !S->part) {
    free(S->work);
    free(S->part);
    free(S);
    return pk_error(ctx, PKRYLOV_ERR_OUT_OF_MEMORY, __func__,
                    "cannot allocate %d work vectors of %lld values", nvec, (long long)A->n);
  }
  if (!ctx->be->device && nvec > 0)
    for (int i = 0; i < nvec; i++) S->v[i] = S->work + (size_t)i * stride;
  S->sync_interval = 32;
  if (type == PKRYLOV_SOLVER_CG) S->v[V_T] = S->v[V_U]; /* scratch for true residuals */
  if (ctx->be->solver_setup && !kry) {
    int ierr = ctx->be->solver_setup(S);
    if (ierr) {
      ctx->be->solver_free(S);
      free(S->work);
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
  free(S->work);
  free(S->part);
  free(S->hist);
  free(S->xmin);
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
/* Drivers                                                                                           */

/** State shared by the drivers for one solve. */
typedef struct {
  pkrylov_solver s;
  const double *b;
  double *x;
  double tol;        /* max(rtol ||b||, atol) */
  double bnorm;      /* ||b|| (wet cells) */
  double best;       /* best residual so far (stagnation) */
  int32_t stalled;   /* iterations without progress */
  int32_t confirm_failures;
  int32_t restarts;  /* pipelined CG: restarts after a suspicious recurrence scalar */
  double final_res;  /* ||b - A x|| of the returned x when have_final */
  int32_t have_final;
  double cur_rr;     /* recurrence (r, r) of the iterate x holds (-1: none yet) */
  /* minimum-residual iterate (s->min_res): the smallest recurrence (r, r) seen, its iteration, its x */
  double min_rr;
  int32_t min_it;
  double *xmin;
} pk_run;

/** Restarts of pipelined CG after its recurrence (p, A p) lost the sign the true one has, before the solve
 *  reports stagnation. */
#define PK_MAX_RESTARTS 5

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

/** Record the residual of iteration it; returns a stop reason (monitor, stagnation) or 0. */
static int pk_record(pk_run *R, int32_t it, double res) {
  return pk_solver_record(R->s, &R->best, &R->stalled, it, res);
}

/** Converged reason for the recurrence residual of squared sum rr (the solver's stop rule), or 0. */
static int pk_converged(const pk_run *R, double rr) { return pk_solver_converged_rr(R->s, R->tol, rr); }

/** x_it = x + a p (a = 0: x) into R->xmin: the minimum-residual iterate, at iteration it with sum rr. */
static void pk_min_keep(pk_run *R, int32_t it, double rr, const double *x, double a, const double *p) {
  const int64_t n = R->s->n;
  R->min_rr = rr;
  R->min_it = it;
  if (a == 0.0) {
    memcpy(R->xmin, x, sizeof(double) * (size_t)n);
    return;
  }
  double *xm = R->xmin;
  const int nt = pk_num_threads(R->s->ctx);
  (void)nt; /* read by the OpenMP pragma only */
#pragma omp parallel for schedule(static) num_threads(nt) if (pk_par(n))
  for (int64_t i = 0; i < n; i++) xm[i] = x[i] + a * p[i]; /* the arithmetic of the x update */
}

/**
 * Minimum-residual tracking (MITgcm's cg2dUseMinResSol) of iterate it = x + a p with recurrence sum rr, every
 * iterate the last included: reset (iteration 0 and restarts) keeps it unconditionally, otherwise only when
 * rr < the minimum so far.
 */
static void pk_min_track(pk_run *R, int reset, int32_t it, double rr, const double *x, double a,
                         const double *p) {
  if (!R->xmin) return;
  if (reset || rr < R->min_rr) pk_min_keep(R, it, rr, x, a, p);
}

/**
 * The outcome of an accepted convergence: confirmed mode checks the true residual (pk_confirm);
 * the recurrence rule accepts at once (*accept = 1, *stagnated = 0).
 */
static int pk_confirm(pk_run *R, pkrylov_result *res, int *accept, int *stagnated);
static int pk_accept(pk_run *R, pkrylov_result *res, int *accept, int *stagnated) {
  if (pk_solver_recurrence(R->s)) {
    *accept = 1;
    *stagnated = 0;
    return PKRYLOV_SUCCESS;
  }
  return pk_confirm(R, res, accept, stagnated);
}

/** r = b - A x; returns ||r|| (global). */
static int pk_true_residual(pkrylov_solver s, const double *b, const double *x, double *r, double *res) {
  double rr;
  pk_cpu_residual(s->A, b, x, r, s->part, &rr);
  PK_CALL(pk_allreduce_dots(s->ctx, &rr, 1, s->n, (const double *[]){r}, (const double *[]){r}, NULL));
  PK_CALL(pk_user_check(s->A, NULL)); /* a user operator's routine failed */
  *res = sqrt(rr);
  return PKRYLOV_SUCCESS;
}

/**
 * The recurrence residual says converged: check the true residual of x (which the result needs anyway).
 * *accept = 1 when it meets the tolerance too; else the caller restarts from x, unless that happened
 * too often, which *stagnated reports.
 */
static int pk_confirm(pk_run *R, pkrylov_result *res, int *accept, int *stagnated) {
  pkrylov_solver s = R->s;
  double tr;
  PK_CALL(pk_true_residual(s, R->b, R->x, s->v[V_T], &tr));
  res->true_residual_checks++;
  R->final_res = tr;
  R->have_final = 1;
  *accept = pk_solver_converged(s, R->tol, tr) != 0;
  *stagnated = !*accept && ++R->confirm_failures > PK_MAX_CONFIRM_FAILURES;
  return PKRYLOV_SUCCESS;
}

/** z = M^-1 r (copy without a preconditioner). */
static void pk_precond(pkrylov_solver s, const double *r, double *z) {
  if (s->M)
    pk_pc_apply_all(s->M, r, z);
  else
    memcpy(z, r, sizeof(double) * (size_t)s->n);
}

/**
 * Two-loop fused CG. On return res->iterations, reason, breakdown_iteration are set and x holds the
 * last good iterate.
 */
static int pk_solve_cg(pk_run *R, pkrylov_result *res) {
  pkrylov_solver s = R->s;
  const int64_t n = s->n;
  double *r = s->v[V_R], *z = s->v[V_Z], *p = s->v[V_P], *q = s->v[V_Q];
  double *x = R->x;
  double d[2], sigma, rho, rnorm, alpha = 0.0, beta;
  double sigma_sign = 0.0, rho_sign = 0.0;
  int32_t it = 0;

restart:
  /* r = b - A x; z = M^-1 r; rho = (r, z) */
  pk_cpu_residual(s->A, R->b, x, r, s->part, d);
  memset(q, 0, sizeof(double) * (size_t)n);
  pk_cpu_cg_precond_step(s->ctx, s->M, n, 0.0, r, q, z, s->part, d);
  PK_CALL(pk_allreduce_dots(s->ctx, d, 2, n, (const double *[]){r, r}, (const double *[]){z, r}, NULL));
  PK_CALL(pk_user_check(s->A, s->M)); /* a user routine failed (then d is NaN) */
  rho = d[0];
  rnorm = sqrt(d[1]);
  if (!isfinite(rho) || !isfinite(rnorm)) {
    res->reason = PKRYLOV_DIVERGED_NAN;
    res->breakdown_iteration = it + 1;
    return PKRYLOV_SUCCESS;
  }
  R->cur_rr = d[1];
  if (it == 0) {
    int stop = pk_record(R, 0, rnorm);
    if ((res->reason = pk_converged(R, d[1]))) return PKRYLOV_SUCCESS;
    if (stop) return res->reason = stop, PKRYLOV_SUCCESS;
    if (s->maxit == 0) return res->reason = PKRYLOV_DIVERGED_MAX_ITERATIONS, PKRYLOV_SUCCESS;
  }
  pk_min_track(R, 1, it, d[1], x, 0.0, NULL); /* iteration 0, or a restart from x */
  if (!pk_sign_ok(rho, &rho_sign)) {
    res->reason = PKRYLOV_DIVERGED_BREAKDOWN_INDEFINITE_PRECOND;
    res->breakdown_iteration = it + 1;
    return PKRYLOV_SUCCESS;
  }
  /* p = z; q = A p; sigma = (p, q) */
  memset(p, 0, sizeof(double) * (size_t)n);
  pk_cpu_cg_operator_step(s->A, 0.0, 0.0, x, p, z, q, s->part, &sigma);
  PK_CALL(pk_allreduce_dots(s->ctx, &sigma, 1, n, (const double *[]){p}, (const double *[]){q}, NULL));
  PK_CALL(pk_user_check(s->A, s->M));
  if (!pk_sign_ok(sigma, &sigma_sign)) {
    res->reason = isfinite(sigma) ? PKRYLOV_DIVERGED_BREAKDOWN_INDEFINITE_MATRIX : PKRYLOV_DIVERGED_NAN;
    res->breakdown_iteration = it + 1;
    return PKRYLOV_SUCCESS;
  }
  alpha = rho / sigma;

  for (;;) {
    /* preconditioner loop: r -= alpha q; z = M^-1 r; (r, z), (r, r) */
    pk_cpu_cg_precond_step(s->ctx, s->M, n, alpha, r, q, z, s->part, d);
    PK_CALL(pk_allreduce_dots(s->ctx, d, 2, n, (const double *[]){r, r}, (const double *[]){z, r}, NULL));
    PK_CALL(pk_user_check(s->A, s->M));
    if (!isfinite(d[0]) || !isfinite(d[1])) { /* x is still the previous iterate */
      res->reason = PKRYLOV_DIVERGED_NAN;
      res->breakdown_iteration = it + 1;
      return PKRYLOV_SUCCESS;
    }
    it++;
    res->iterations = it;
    rnorm = sqrt(d[1]);
    R->cur_rr = d[1];
    /* x_it = x + alpha p is due; it is applied in the operator loop or below when stopping */
    pk_min_track(R, 0, it, d[1], x, alpha, p);
    int stop = pk_record(R, it, rnorm);
    int conv = pk_converged(R, d[1]);
    int brk = !conv && !pk_sign_ok(d[0], &rho_sign);
    if (conv || stop || brk || it >= s->maxit) {
      for (int64_t i = 0; i < n; i++) x[i] += alpha * p[i];
      if (conv) {
        int accept, stagnated;
        PK_CALL(pk_accept(R, res, &accept, &stagnated));
        if (stagnated) return res->reason = PKRYLOV_DIVERGED_STAGNATION, PKRYLOV_SUCCESS;
        if (!accept && it < s->maxit) {
          rho_sign = sigma_sign = 0.0; /* restart the recurrences from the current x */
          goto restart;
        }
        if (!accept) conv = 0;
      }
      if (conv) res->reason = conv;
      else if (brk) res->reason = PKRYLOV_DIVERGED_BREAKDOWN_INDEFINITE_PRECOND, res->breakdown_iteration = it + 1;
      else if (stop) res->reason = stop;
      else res->reason = PKRYLOV_DIVERGED_MAX_ITERATIONS;
      return PKRYLOV_SUCCESS;
    }
    beta = d[0] / rho;
    rho = d[0];
    /* operator loop: x += alpha p; p = z + beta p; q = A z + beta q; (p, q) */
    pk_cpu_cg_operator_step(s->A, alpha, beta, x, p, z, q, s->part, &sigma);
    PK_CALL(pk_allreduce_dots(s->ctx, &sigma, 1, n, (const double *[]){p}, (const double *[]){q}, NULL));
    PK_CALL(pk_user_check(s->A, s->M));
    if (!pk_sign_ok(sigma, &sigma_sign)) {
      res->reason = isfinite(sigma) ? PKRYLOV_DIVERGED_BREAKDOWN_INDEFINITE_MATRIX : PKRYLOV_DIVERGED_NAN;
      res->breakdown_iteration = it + 1;
      return PKRYLOV_SUCCESS;
    }
    alpha = rho / sigma;
    if (s->true_res_interval > 0 && it % s->true_res_interval == 0) {
      /* x and r are both at iteration it here: replace the recurrence residual by the true one */
      double tr;
      PK_CALL(pk_true_residual(s, R->b, x, r, &tr));
      res->true_residual_checks++;
    }
  }
}

/**
 * Pipelined CG: recompute r = b - A x, u = M^-1 r, w = A u, and (when have_p) s = A p, q = M^-1 s,
 * z = A q; then the local partial sums (r,u), (w,u), (r,r) into d, and with nv = PK_RR_NV the norms of the
 * automatic rule (x, x), (p, p), (u, u), (q, q) (pk_rr.h).
 */
static void pk_pipecg_replace(pkrylov_solver s, const double *b, const double *x, int have_p, int nv,
                              double *d) {
  double *r = s->v[V_R], *u = s->v[V_U], *w = s->v[V_W];
  pk_cpu_residual(s->A, b, x, r, s->part, d);
  pk_precond(s, r, u);
  pk_op_apply_all(s->A, u, w);
  if (have_p) {
    pk_op_apply_all(s->A, s->v[V_P], s->v[V_S]);
    pk_precond(s, s->v[V_S], s->v[V_Q]);
    pk_op_apply_all(s->A, s->v[V_Q], s->v[V_Z]);
  }
  pk_cpu_dot(s->ctx, s->n, r, u, s->part, d);
  pk_cpu_dot(s->ctx, s->n, w, u, s->part, d + 1);
  pk_cpu_dot(s->ctx, s->n, r, r, s->part, d + 2);
  if (nv == PK_RR_NV) {
    const double *v[4] = {x, s->v[V_P], u, s->v[V_Q]};
    for (int i = 0; i < 4; i++) pk_cpu_dot(s->ctx, s->n, v[i], v[i], s->part, d + 3 + i);
  }
}

/**
 * Pipelined preconditioned CG (Ghysels-Vanroose) with residual replacement: every s->replace_interval
 * iterations after the update, or with PKRYLOV_REPLACE_AUTO when the estimate of pk_rr.h says so after the
 * reduction: the vectors are replaced before the iteration's residual is recorded and tested, and the
 * iteration goes on from the replacement's sums (the convergence test then sees the true residual).
 */
static int pk_solve_pipecg(pk_run *R, pkrylov_result *res) {
  pkrylov_solver s = R->s;
  const int64_t n = s->n;
  double *r = s->v[V_R], *u = s->v[V_U], *w = s->v[V_W], *m = s->v[V_M], *z = s->v[V_Z];
  double *q = s->v[V_Q], *sv = s->v[V_S], *p = s->v[V_P];
  double *x = R->x;
  double d[PK_RR_NV], gamma_old = 0.0, alpha_old = 0.0, alpha, beta = 0.0;
  double sigma_sign = 0.0, rho_sign = 0.0;
  int32_t it = 0, since_replace = 0;
  pk_reduce_request req;
  /* the automatic rule: its norms ride in the same reduction (nv sums instead of 3) */
  const int autorr = s->replace_interval == PKRYLOV_REPLACE_AUTO;
  const int nv = autorr ? PK_RR_NV : PK_RR_NV_BASE;
  const double *dx[PK_RR_NV] = {r, w, r, x, p, u, q}, *dy[PK_RR_NV] = {u, u, r, x, p, u, q};
  pk_rr_est est = {0};
  if (autorr) PK_CALL(pk_rr_init(s, R->bnorm, &est));

restart:
  for (int v = V_Z; v <= V_S; v++)
    if (v != V_U && v != V_W && v != V_M) memset(s->v[v], 0, sizeof(double) * (size_t)n);
  pk_pipecg_replace(s, R->b, x, 0, nv, d);
  est.fresh = 1;
  PK_CALL(pk_allreduce_dots_begin(s->ctx, d, nv, n, dx, dy, NULL, &req));
  int first = 1;
  for (;;) {
    /* overlapped with the reduction: m = M^-1 w, and for operators applied on whole vectors (distributed:
       its halo exchange; user routines) also n = A m, which the fused update would otherwise compute after
       the reduction (the same product, so the iterates are the same either way) */
    pk_precond(s, w, m);
    double *am = NULL;
    if (pk_op_whole_vector(s->A)) {
      am = s->v[V_N];
      pk_op_apply_all(s->A, m, am);
    }
    PK_CALL(pk_allreduce_end(s->ctx, &req));
    /* a user routine failed in this, the previous step or a replacement (the flags are sticky) */
    PK_CALL(pk_user_check(s->A, s->M));
    const double gamma = d[0], delta = d[1], rnorm = sqrt(d[2]);
    if (!isfinite(gamma) || !isfinite(delta) || !isfinite(rnorm)) { /* x is the last good iterate */
      res->reason = PKRYLOV_DIVERGED_NAN;
      res->breakdown_iteration = it + 1;
      return PKRYLOV_SUCCESS;
    }
    if (autorr && pk_rr_step(&est, d, alpha_old, beta) && it < s->maxit) {
      /* the gap estimate crossed sqrt(eps) |r|: replace now, measuring the gap closed (t = r_old - r_new,
         which calibrates the estimate); iteration it goes on from the new sums */
      double *t = s->v[V_T], gap2;
      memcpy(t, r, sizeof(double) * (size_t)n);
      pk_pipecg_replace(s, R->b, x, 1, nv, d);
      for (int64_t i = 0; i < n; i++) t[i] -= r[i];
      pk_cpu_dot(s->ctx, n, t, t, s->part, &gap2);
      PK_CALL(pk_allreduce_dots(s->ctx, &gap2, 1, n, (const double *[]){t}, (const double *[]){t}, NULL));
      res->residual_replacements++;
      est.gap = sqrt(gap2);
      est.fresh = 1;
      PK_CALL(pk_allreduce_dots_begin(s->ctx, d, nv, n, dx, dy, NULL, &req));
      continue;
    }
    R->cur_rr = d[2];
    pk_min_track(R, first, it, d[2], x, 0.0, NULL); /* x is iterate it (a (re)start: kept unconditionally) */
    if (it == 0 && first) {
      int stop = pk_record(R, 0, rnorm);
      if ((res->reason = pk_converged(R, d[2]))) return PKRYLOV_SUCCESS;
      if (stop) return res->reason = stop, PKRYLOV_SUCCESS;
    } else if (!first) {
      res->iterations = it;
      int stop = pk_record(R, it, rnorm);
      int conv = pk_converged(R, d[2]);
      if (conv) {
        int accept, stagnated;
        PK_CALL(pk_accept(R, res, &accept, &stagnated));
        if (stagnated) return res->reason = PKRYLOV_DIVERGED_STAGNATION, PKRYLOV_SUCCESS;
        if (!accept && it < s->maxit) {
          rho_sign = sigma_sign = 0.0;
          goto restart;
        }
        if (!accept) conv = 0;
      }
      if (conv) return res->reason = conv, PKRYLOV_SUCCESS;
      if (stop) return res->reason = stop, PKRYLOV_SUCCESS;
    }
    if (it >= s->maxit) return res->reason = PKRYLOV_DIVERGED_MAX_ITERATIONS, PKRYLOV_SUCCESS;
    /* scalars: gamma = (r,u) = (r, M^-1 r); sigma = delta - beta gamma / alpha_old = (p, A p) */
    if (!pk_sign_ok(gamma, &rho_sign)) {
      res->reason = PKRYLOV_DIVERGED_BREAKDOWN_INDEFINITE_PRECOND;
      res->breakdown_iteration = it + 1;
      return PKRYLOV_SUCCESS;
    }
    double sigma;
    if (first) {
      beta = 0.0;
      sigma = delta;
    } else {
      beta = gamma / gamma_old;
      sigma = delta - beta * gamma / alpha_old;
    }
    if (!pk_sign_ok(sigma, &sigma_sign)) {
      if (!first && isfinite(sigma)) {
        /* sigma came from the recurrence, which rounding can spoil near the attainable accuracy: compute
           the curvature (p, A p) of the next direction p = u + beta p directly to tell the cases apart */
        double *t = s->v[V_T], *at = s->v[V_AT], curv;
        for (int64_t i = 0; i < n; i++) t[i] = u[i] + beta * p[i];
        pk_op_apply_all(s->A, t, at);
        pk_cpu_dot(s->ctx, n, t, at, s->part, &curv);
        PK_CALL(pk_allreduce_dots(s->ctx, &curv, 1, n, (const double *[]){t}, (const double *[]){at}, NULL));
        PK_CALL(pk_user_check(s->A, s->M));
        if (pk_sign_ok(curv, &sigma_sign)) { /* a sound matrix: restart the recurrences from x */
          if (R->restarts++ >= PK_MAX_RESTARTS)
            return res->reason = PKRYLOV_DIVERGED_STAGNATION, PKRYLOV_SUCCESS;
          rho_sign = sigma_sign = 0.0;
          goto restart;
        }
      }
      res->reason = isfinite(sigma) ? PKRYLOV_DIVERGED_BREAKDOWN_INDEFINITE_MATRIX : PKRYLOV_DIVERGED_NAN;
      res->breakdown_iteration = it + 1;
      return PKRYLOV_SUCCESS;
    }
    alpha = gamma / sigma;
    /* fused: n = A m; z,q,s,p; x,r,u,w; partial (r,u), (w,u), (r,r) (and the rule's norms) */
    pk_cpu_pipecg_step(s->A, am, alpha, beta, m, z, q, sv, p, x, r, u, w, nv, s->part, d);
    it++;
    since_replace++;
    first = 0;
    gamma_old = gamma;
    alpha_old = alpha;
    int replace = s->replace_interval > 0 && since_replace >= s->replace_interval;
    if (s->true_res_interval > 0 && it % s->true_res_interval == 0) {
      replace = 1;
      res->true_residual_checks++;
    }
    if (replace) {
      pk_pipecg_replace(s, R->b, x, 1, nv, d);
      res->residual_replacements++;
      since_replace = 0;
      est.fresh = 1;
    }
    PK_CALL(pk_allreduce_dots_begin(s->ctx, d, nv, n, dx, dy, NULL, &req));
  }
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
  if (pk_kry_is_kry_type(s->type)) return pk_kry_solve(s, mem, b, x);
  if (ctx->be->solver_solve) {
    PK_CALL(history_grow(s, "pkrylov_solver_solve")); /* the device solve empties the history itself */
    return ctx->be->solver_solve(s, mem, b, x);
  }
  PK_CALL(pk_solver_check_finite(s, "pkrylov_solver_solve", b, x));
  PK_CALL(history_grow(s, "pkrylov_solver_solve"));
  s->hist_len = 0;
  pk_user_reset(s->A, s->M); /* forget callback failures of earlier calls */

  if (s->min_res && !s->xmin) {
    s->xmin = malloc(sizeof(double) * (size_t)n);
    PK_CHECK(s->xmin != NULL, ctx, PKRYLOV_ERR_OUT_OF_MEMORY,
             "cannot allocate the minimum-residual iterate (%lld values)", (long long)n);
  }
  const double t0 = pk_wtime();
  pkrylov_result res;
  pk_result_init(&res);
  const uint8_t *wet = s->A->wet;
  /* ||b|| over the wet cells */
  double bb = 0.0;
  if (wet) {
    for (int64_t i = 0; i < n; i++)
      if (wet[i]) bb += b[i] * b[i];
  } else {
    pk_cpu_dot(ctx, n, b, b, s->part, &bb);
  }
  PK_CALL(pk_allreduce_dots(ctx, &bb, 1, n, (const double *[]){b}, (const double *[]){b}, wet));
  res.rhs_norm = sqrt(bb);
  PK_CHECK_AS("pkrylov_solver_solve", isfinite(res.rhs_norm), ctx, PKRYLOV_ERR_NOT_FINITE,
              "argument 'b': its 2-norm overflows (scale the system)");
  /* user callbacks may fail in the middle of the iteration: keep the entry x to restore it then, so that an
     error leaves x unchanged as everywhere else */
  double *x_entry = NULL;
  if (pk_op_whole_vector(s->A) || (s->Mobj && s->Mobj->type == PKRYLOV_PRECOND_USER)) {
    x_entry = malloc(sizeof(double) * (size_t)n);
    PK_CHECK_AS("pkrylov_solver_solve", x_entry != NULL, ctx, PKRYLOV_ERR_OUT_OF_MEMORY,
                "cannot allocate a copy of 'x' (%lld values)", (long long)n);
    memcpy(x_entry, x, sizeof(double) * (size_t)n);
  }
  if (!s->nonzero_guess) memset(x, 0, sizeof(double) * (size_t)n);
  int ierr = pk_true_residual(s, b, x, s->v[V_R], &res.initial_residual);
  if (ierr) goto failed;

  pk_run R = {.s = s, .b = b, .x = x, .bnorm = res.rhs_norm, .best = INFINITY, .cur_rr = -1.0, .min_it = -1,
             .xmin = s->min_res ? s->xmin : NULL};
  R.tol = s->rtol * res.rhs_norm;
  if (s->atol > R.tol) R.tol = s->atol;
  ierr = s->type == PKRYLOV_SOLVER_CG ? pk_solve_cg(&R, &res) : pk_solve_pipecg(&R, &res);
  if (ierr) goto failed;
  const int tracked = R.xmin != NULL && R.min_it >= 0;
  const int replaced = pk_solver_min_result(&res, tracked, R.min_rr, R.min_it, R.cur_rr);
  if (replaced) memcpy(x, R.xmin, sizeof(double) * (size_t)n);

  /* the recurrence rule: the last recurrence residual; else the true residual of the returned x (already
     known when convergence was confirmed) */
  if (pk_solver_recurrence(s) && res.reason != PKRYLOV_DIVERGED_NAN && R.cur_rr >= 0)
    res.final_residual = sqrt(R.cur_rr);
  else if (R.have_final && res.reason > 0 && !replaced)
    res.final_residual = R.final_res;
  else if ((ierr = pk_true_residual(s, b, x, s->v[V_R], &res.final_residual)) != PKRYLOV_SUCCESS)
    goto failed;
  free(x_entry);
  res.rel_residual = res.rhs_norm > 0 ? res.final_residual / res.rhs_norm : res.final_residual;
  res.converged = res.reason > 0;
  res.solve_time_s = pk_wtime() - t0;
  s->res = res;
  s->has_result = 1;
  return PKRYLOV_SUCCESS;

failed: /* only user callbacks fail after the arguments were checked: give x back as it came */
  if (x_entry) memcpy(x, x_entry, sizeof(double) * (size_t)n);
  free(x_entry);
  return ierr;
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

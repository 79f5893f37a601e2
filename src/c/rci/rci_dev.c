/**
 * @file rci_dev.c
 * @brief Handle-based reverse communication on DEVICE vectors (mem = PKRYLOV_MEM_DEVICE on a CUDA context):
 *        CG and pipelined CG as state machines whose vector steps are the backend's rci_* kernels.
 *
 * Host vectors (every backend, every type) do not come here: rci_kry.c runs the library's own solve
 * (pkrylov_solver_solve, the drivers of cg.c on the vector engine) as a coroutine. This file is what is
 * left of the former host-and-device state machine (issue 15): the recurrences, convergence test with
 * true-residual confirmation, breakdown checks, restarts and result fields of cg.c's drivers, with every
 * application of A or M^-1 turned into a request. The drivers are written as straight-line code; a request
 * is a yield: RCI_YIELD stores the resume point (the source line) in R->pc and returns, and
 * pk_rci_dev_step() jumps back there through the switch in rci_run(). Everything that lives across a yield
 * is in the pk_rci_dev struct.
 *
 * CG: the library's two-loop form keeps q = A p by recurrence and applies A to z (q = A z + beta q), so the
 * MATVEC request of an iteration is in = z. Pipelined CG (Ghysels-Vanroose): m = M^-1 w and n = A m do not
 * depend on the scalars of the iteration, so they are requested while the reduction of (r,u), (w,u),
 * (r,r) is in flight: REDUCE_START, PRECOND, MATVEC, REDUCE_WAIT, then the fused vector update. Unlike the
 * host path the solve starts with its first reduction carrying (b, b) (no separate norm of b and initial
 * residual) and works on the caller's x in place.
 *
 * Every vector step runs as kernels (pk_cuda.h, "device work of a handle-based reverse-communication
 * solve") and the local sums come back to the host array `part` handed to the caller. The stream is
 * synchronised before each request. Left for later: serving device vectors through rci_kry.c too (a private
 * CUDA context whose user operator and preconditioner routines receive device pointers), which would
 * retire this file.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "pk_rci.h"

/** As cg.c: confirmation failures and pipelined restarts before reporting stagnation. */
#define RCI_MAX_CONFIRM_FAILURES 5
#define RCI_MAX_RESTARTS 5

/** Work vectors (CG uses R..U, U as the scratch of true residuals). */
enum { W_R, W_Z, W_P, W_Q, W_T, W_U, W_W, W_M, W_S, W_N, W_AT, RCI_NVEC };

struct pk_rci_dev {
  pkrylov_context ctx;
  int32_t type, preconditioned, by_caller;
  int64_t n;
  double rtol, atol; /* the settings of the solve in progress */
  int32_t maxit, replace_interval;
  void *cu;      /* device work area (the backend's rci_create) */
  double *dwork; /* its nvec device vectors */
  double *v[RCI_NVEC];
  double part[4]; /* the partial sums handed to the caller */
  /* request being answered */
  int32_t req, npart;
  double *in, *out;
  /* solve */
  int32_t pc, x_zero;
  const double *b;
  double *x;
  pkrylov_result res;
  double t0, tol, rho, sigma, alpha, beta, gamma, delta, rnorm, gamma_old, alpha_old, rho_sign, sigma_sign;
  double final_res;
  int32_t it, first, since_replace, confirm_failures, restarts, have_final, conv, brk, have_bb;
  pk_reduce_request rq;
};

/** Yield request q with operands i, o; the next pkrylov_rci_step() resumes after this line. */
#define RCI_YIELD(R, q, i, o)                                                                                \
  do {                                                                                                       \
    (R)->req = (q);                                                                                          \
    (R)->in = (i);                                                                                           \
    (R)->out = (o);                                                                                          \
    (R)->pc = __LINE__;                                                                                      \
    return PKRYLOV_SUCCESS;                                                                                  \
  case __LINE__:;                                                                                            \
  } while (0)

/** Start the global sum of R->part[0..cnt): a REDUCE_START request or the library's reduction layer. */
#define RCI_REDUCE_START(R, cnt)                                                                             \
  do {                                                                                                       \
    (R)->npart = (cnt);                                                                                      \
    if ((R)->by_caller)                                                                                      \
      RCI_YIELD(R, PKRYLOV_RCI_REDUCE_START, NULL, NULL);                                                    \
    else                                                                                                     \
      PK_CALL(pk_allreduce_begin((R)->ctx, (R)->part, (cnt), &(R)->rq));                                     \
  } while (0)

/** Finish the global sum started by RCI_REDUCE_START. */
#define RCI_REDUCE_WAIT(R)                                                                                   \
  do {                                                                                                       \
    if ((R)->by_caller)                                                                                      \
      RCI_YIELD(R, PKRYLOV_RCI_REDUCE_WAIT, NULL, NULL);                                                     \
    else                                                                                                     \
      PK_CALL(pk_allreduce_end((R)->ctx, &(R)->rq));                                                         \
  } while (0)

/** out = M^-1 in: a PRECOND request, or a copy without preconditioner. */
#define RCI_PRECOND(R, i, o)                                                                                 \
  do {                                                                                                       \
    if ((R)->preconditioned)                                                                                 \
      RCI_YIELD(R, PKRYLOV_RCI_PRECOND, (i), (o));                                                           \
    else                                                                                                     \
      PK_CALL(rci_copy((R), (o), (i)));                                                                      \
  } while (0)

/** Converged reason for residual res, or 0 (as solver.c). */
static int rci_converged(const pk_rci_dev *R, double res) {
  if (!(res <= R->tol))
    return 0;
  return res <= R->atol ? PKRYLOV_CONVERGED_ATOL : PKRYLOV_CONVERGED_RTOL;
}

/* ---- vector steps: the backend's device kernels ------------------------------------------------------ */

/* the backend's device steps */
#define RCI_BE(R) ((R)->ctx->be)

/** v = 0. */
static int rci_zero(pk_rci_dev *R, double *v) {
  return RCI_BE(R)->rci_zero(R->cu, v);
}

/** dst = src. */
static int rci_copy(pk_rci_dev *R, double *dst, const double *src) {
  return RCI_BE(R)->rci_copy(R->cu, dst, src);
}

/** out[j] = (x[j], y[j]) local, j < nv. */
static int rci_dots(pk_rci_dev *R, int nv, const double *const *x, const double *const *y, double *out) {
  return RCI_BE(R)->rci_dots(R->cu, nv, x, y, out);
}

/** r = b - t (b when x is known to be zero); *rr = local (r, r). */
static int rci_resid(pk_rci_dev *R, const double *t, double *r, double *rr) {
  return RCI_BE(R)->rci_residual(R->cu, R->b, R->x_zero ? NULL : t, r, rr);
}

/** Stop the solve with the current reason: the final true residual, then DONE. */
#define RCI_FINISH() goto finish

/**
 * The solve as straight-line code, resumed at R->pc. Returns a status; on success R->req is the request for
 * the caller (PKRYLOV_RCI_DONE at the end).
 */
static int rci_run(pk_rci_dev *R) {
  double *r = R->v[W_R], *z = R->v[W_Z], *p = R->v[W_P], *q = R->v[W_Q], *t = R->v[W_T];
  double *u = R->v[W_U], *w = R->v[W_W], *m = R->v[W_M], *sv = R->v[W_S], *nv = R->v[W_N];
  double *at = R->v[W_AT], *x = R->x;
  double *scr = R->type == PKRYLOV_SOLVER_CG ? u : at; /* b - A x of the confirmation and the result */
  double *d = R->part;
  switch (R->pc) {
  case 0:
    R->npart = 0;
    if (R->type == PKRYLOV_SOLVER_PIPECG)
      goto pipecg;

    /* ---------------- CG (cg.c) ---------------- */
  cg_restart:
    /* r = b - A x; z = M^-1 r; rho = (r, z) (+ (b, b) in the first reduction) */
    if (!R->x_zero)
      RCI_YIELD(R, PKRYLOV_RCI_MATVEC, x, t);
    PK_CALL(rci_resid(R, t, r, &d[1]));
    R->x_zero = 0;
    PK_CALL(rci_zero(R, q));
    RCI_PRECOND(R, r, z);
    {
      const double *xs[2] = {r, R->b}, *ys[2] = {z, R->b};
      double o[2];
      PK_CALL(rci_dots(R, 2, xs, ys, o));
      d[0] = o[0], d[2] = o[1];
    }
    RCI_REDUCE_START(R, R->have_bb ? 2 : 3);
    RCI_REDUCE_WAIT(R);
    if (!R->have_bb) {
      R->res.rhs_norm = sqrt(d[2]);
      R->res.initial_residual = sqrt(d[1]);
      R->tol = R->rtol * R->res.rhs_norm;
      if (R->atol > R->tol)
        R->tol = R->atol;
      R->have_bb = 1;
    }
    R->rho = d[0];
    R->rnorm = sqrt(d[1]);
    if (!isfinite(R->rho) || !isfinite(R->rnorm)) {
      R->res.reason = PKRYLOV_DIVERGED_NAN;
      R->res.breakdown_iteration = R->it + 1;
      RCI_FINISH();
    }
    if (R->it == 0) {
      if ((R->res.reason = rci_converged(R, R->rnorm)))
        RCI_FINISH();
      if (R->maxit == 0) {
        R->res.reason = PKRYLOV_DIVERGED_MAX_ITERATIONS;
        RCI_FINISH();
      }
    }
    if (!pk_sign_ok(R->rho, &R->rho_sign)) {
      R->res.reason = PKRYLOV_DIVERGED_BREAKDOWN_INDEFINITE_PRECOND;
      R->res.breakdown_iteration = R->it + 1;
      RCI_FINISH();
    }
    /* p = z; q = A p; sigma = (p, q) */
    RCI_YIELD(R, PKRYLOV_RCI_MATVEC, z, t);
    PK_CALL(rci_copy(R, p, z));
    PK_CALL(rci_copy(R, q, t));
    {
      const double *xs[1] = {p}, *ys[1] = {q};
      PK_CALL(rci_dots(R, 1, xs, ys, d));
    }
    RCI_REDUCE_START(R, 1);
    RCI_REDUCE_WAIT(R);
    R->sigma = d[0];
    if (!pk_sign_ok(R->sigma, &R->sigma_sign)) {
      R->res.reason =
          isfinite(R->sigma) ? PKRYLOV_DIVERGED_BREAKDOWN_INDEFINITE_MATRIX : PKRYLOV_DIVERGED_NAN;
      R->res.breakdown_iteration = R->it + 1;
      RCI_FINISH();
    }
    R->alpha = R->rho / R->sigma;

    for (;;) {
      /* r -= alpha q; z = M^-1 r; (r, z), (r, r) */
      PK_CALL(RCI_BE(R)->rci_xpay(R->cu, r, -R->alpha, q, r)); /* r + (-alpha) q: bitwise r - alpha q */
      RCI_PRECOND(R, r, z);
      {
        const double *xs[2] = {r, r}, *ys[2] = {z, r};
        PK_CALL(rci_dots(R, 2, xs, ys, d));
      }
      RCI_REDUCE_START(R, 2);
      RCI_REDUCE_WAIT(R);
      if (!isfinite(d[0]) || !isfinite(d[1])) { /* x is still the previous iterate */
        R->res.reason = PKRYLOV_DIVERGED_NAN;
        R->res.breakdown_iteration = R->it + 1;
        RCI_FINISH();
      }
      R->it++;
      R->res.iterations = R->it;
      R->rnorm = sqrt(d[1]);
      R->conv = rci_converged(R, R->rnorm);
      R->brk = !R->conv && !pk_sign_ok(d[0], &R->rho_sign);
      if (R->conv || R->brk || R->it >= R->maxit) {
        /* x_it = x + alpha p */
        PK_CALL(RCI_BE(R)->rci_xpay(R->cu, x, R->alpha, p, x));
        if (R->conv) {
          /* confirm on the true residual b - A x */
          RCI_YIELD(R, PKRYLOV_RCI_MATVEC, x, t);
          PK_CALL(rci_resid(R, t, scr, &d[0]));
          RCI_REDUCE_START(R, 1);
          RCI_REDUCE_WAIT(R);
          R->res.true_residual_checks++;
          R->final_res = sqrt(d[0]);
          R->have_final = 1;
          if (!rci_converged(R, R->final_res)) {
            if (++R->confirm_failures > RCI_MAX_CONFIRM_FAILURES) {
              R->res.reason = PKRYLOV_DIVERGED_STAGNATION;
              RCI_FINISH();
            }
            if (R->it < R->maxit) {
              R->rho_sign = R->sigma_sign = 0.0; /* restart the recurrences from the current x */
              goto cg_restart;
            }
            R->conv = 0;
          }
        }
        if (R->conv)
          R->res.reason = R->conv;
        else if (R->brk)
          R->res.reason = PKRYLOV_DIVERGED_BREAKDOWN_INDEFINITE_PRECOND,
          R->res.breakdown_iteration = R->it + 1;
        else
          R->res.reason = PKRYLOV_DIVERGED_MAX_ITERATIONS;
        RCI_FINISH();
      }
      R->beta = d[0] / R->rho;
      R->rho = d[0];
      /* x += alpha p; p = z + beta p; q = A z + beta q; (p, q) */
      RCI_YIELD(R, PKRYLOV_RCI_MATVEC, z, t);
      PK_CALL(RCI_BE(R)->rci_cg_update(R->cu, R->alpha, R->beta, x, p, z, q, t, d));
      RCI_REDUCE_START(R, 1);
      RCI_REDUCE_WAIT(R);
      R->sigma = d[0];
      if (!pk_sign_ok(R->sigma, &R->sigma_sign)) {
        R->res.reason =
            isfinite(R->sigma) ? PKRYLOV_DIVERGED_BREAKDOWN_INDEFINITE_MATRIX : PKRYLOV_DIVERGED_NAN;
        R->res.breakdown_iteration = R->it + 1;
        RCI_FINISH();
      }
      R->alpha = R->rho / R->sigma;
    }

    /* ---------------- pipelined CG (as pk_pipecg_solve in cg.c) ---------------- */
  pipecg:
  pipecg_restart:
    PK_CALL(rci_zero(R, z));
    PK_CALL(rci_zero(R, p));
    PK_CALL(rci_zero(R, q));
    PK_CALL(rci_zero(R, sv));
    R->first = 1;
    R->since_replace = 0;
  pipecg_replace:
    /* r = b - A x, u = M^-1 r, w = A u; after iterations also s = A p, q = M^-1 s, z = A q */
    if (!R->x_zero)
      RCI_YIELD(R, PKRYLOV_RCI_MATVEC, x, t);
    PK_CALL(rci_resid(R, t, r, &d[2]));
    R->x_zero = 0;
    RCI_PRECOND(R, r, u);
    RCI_YIELD(R, PKRYLOV_RCI_MATVEC, u, w);
    if (!R->first) {
      RCI_YIELD(R, PKRYLOV_RCI_MATVEC, p, sv);
      RCI_PRECOND(R, sv, q);
      RCI_YIELD(R, PKRYLOV_RCI_MATVEC, q, z);
    }
    {
      const double *xs[3] = {r, w, R->b}, *ys[3] = {u, u, R->b};
      double o[3];
      PK_CALL(rci_dots(R, 3, xs, ys, o));
      d[0] = o[0], d[1] = o[1], d[3] = o[2];
    }
    RCI_REDUCE_START(R, R->have_bb ? 3 : 4);
    for (;;) {
      /* overlapped with the reduction: m = M^-1 w, n = A m */
      RCI_PRECOND(R, w, m);
      RCI_YIELD(R, PKRYLOV_RCI_MATVEC, m, nv);
      RCI_REDUCE_WAIT(R);
      if (!R->have_bb) {
        R->res.rhs_norm = sqrt(d[3]);
        R->res.initial_residual = sqrt(d[2]);
        R->tol = R->rtol * R->res.rhs_norm;
        if (R->atol > R->tol)
          R->tol = R->atol;
        R->have_bb = 1;
      }
      R->gamma = d[0];
      R->delta = d[1];
      R->rnorm = sqrt(d[2]);
      if (!isfinite(R->gamma) || !isfinite(R->delta) || !isfinite(R->rnorm)) {
        R->res.reason = PKRYLOV_DIVERGED_NAN;
        R->res.breakdown_iteration = R->it + 1;
        RCI_FINISH();
      }
      if (R->it == 0 && R->first) {
        if ((R->res.reason = rci_converged(R, R->rnorm)))
          RCI_FINISH();
      } else if (!R->first) {
        R->res.iterations = R->it;
        R->conv = rci_converged(R, R->rnorm);
        if (R->conv) {
          RCI_YIELD(R, PKRYLOV_RCI_MATVEC, x, t);
          PK_CALL(rci_resid(R, t, scr, &d[0]));
          RCI_REDUCE_START(R, 1);
          RCI_REDUCE_WAIT(R);
          R->res.true_residual_checks++;
          R->final_res = sqrt(d[0]);
          R->have_final = 1;
          if (!rci_converged(R, R->final_res)) {
            if (++R->confirm_failures > RCI_MAX_CONFIRM_FAILURES) {
              R->res.reason = PKRYLOV_DIVERGED_STAGNATION;
              RCI_FINISH();
            }
            if (R->it < R->maxit) {
              R->rho_sign = R->sigma_sign = 0.0;
              goto pipecg_restart;
            }
            R->conv = 0;
          }
        }
        if (R->conv) {
          R->res.reason = R->conv;
          RCI_FINISH();
        }
      }
      if (R->it >= R->maxit) {
        R->res.reason = PKRYLOV_DIVERGED_MAX_ITERATIONS;
        RCI_FINISH();
      }
      /* gamma = (r, M^-1 r); sigma = delta - beta gamma / alpha_old = (p, A p) */
      if (!pk_sign_ok(R->gamma, &R->rho_sign)) {
        R->res.reason = PKRYLOV_DIVERGED_BREAKDOWN_INDEFINITE_PRECOND;
        R->res.breakdown_iteration = R->it + 1;
        RCI_FINISH();
      }
      if (R->first) {
        R->beta = 0.0;
        R->sigma = R->delta;
      } else {
        R->beta = R->gamma / R->gamma_old;
        R->sigma = R->delta - R->beta * R->gamma / R->alpha_old;
      }
      if (!pk_sign_ok(R->sigma, &R->sigma_sign)) {
        if (!R->first && isfinite(R->sigma)) {
          /* the recurrence sigma may be spoilt by rounding: compute (p, A p) of p = u + beta p directly */
          PK_CALL(RCI_BE(R)->rci_xpay(R->cu, u, R->beta, p, t));
          RCI_YIELD(R, PKRYLOV_RCI_MATVEC, t, at);
          {
            const double *xs[1] = {t}, *ys[1] = {at};
            PK_CALL(rci_dots(R, 1, xs, ys, d));
          }
          RCI_REDUCE_START(R, 1);
          RCI_REDUCE_WAIT(R);
          if (pk_sign_ok(d[0], &R->sigma_sign)) { /* a sound matrix: restart from x */
            if (R->restarts++ >= RCI_MAX_RESTARTS) {
              R->res.reason = PKRYLOV_DIVERGED_STAGNATION;
              RCI_FINISH();
            }
            R->rho_sign = R->sigma_sign = 0.0;
            goto pipecg_restart;
          }
        }
        R->res.reason =
            isfinite(R->sigma) ? PKRYLOV_DIVERGED_BREAKDOWN_INDEFINITE_MATRIX : PKRYLOV_DIVERGED_NAN;
        R->res.breakdown_iteration = R->it + 1;
        RCI_FINISH();
      }
      R->alpha = R->gamma / R->sigma;
      /* z = n + beta z; q = m + beta q; s = w + beta s; p = u + beta p;
         x += alpha p; r -= alpha s; u -= alpha q; w -= alpha z; partials (r,u), (w,u), (r,r) */
      PK_CALL(RCI_BE(R)->rci_pipecg_update(R->cu, R->alpha, R->beta, m, nv, z, q, sv, p, x, r, u, w, d));
      R->it++;
      R->since_replace++;
      R->first = 0;
      R->gamma_old = R->gamma;
      R->alpha_old = R->alpha;
      if (R->replace_interval > 0 && R->since_replace >= R->replace_interval) {
        R->res.residual_replacements++;
        R->since_replace = 0;
        goto pipecg_replace;
      }
      RCI_REDUCE_START(R, 3);
    }

  finish:
    /* the true residual of the returned x (already known when convergence was confirmed) */
    if (R->have_final && R->res.reason > 0) {
      R->res.final_residual = R->final_res;
    } else if (R->x_zero) { /* x = 0 was never touched (maxit 0 from a zero guess, b = 0) */
      R->res.final_residual = R->res.initial_residual;
    } else {
      RCI_YIELD(R, PKRYLOV_RCI_MATVEC, x, t);
      PK_CALL(rci_resid(R, t, scr, &d[0]));
      RCI_REDUCE_START(R, 1);
      RCI_REDUCE_WAIT(R);
      R->res.final_residual = sqrt(d[0]);
    }
    R->res.rel_residual =
        R->res.rhs_norm > 0 ? R->res.final_residual / R->res.rhs_norm : R->res.final_residual;
    R->res.converged = R->res.reason > 0;
    R->res.solve_time_s = pk_wtime() - R->t0;
    R->pc = 0;
    R->req = PKRYLOV_RCI_DONE;
    R->in = R->out = NULL;
    R->npart = 0;
    return PKRYLOV_SUCCESS;
  default:
    break;
  }
  return pk_error(R->ctx, PKRYLOV_ERR_INTERNAL, __func__, "unknown resume point %d", R->pc);
}

int pk_rci_dev_create(pkrylov_context ctx, int32_t type, int64_t n, int32_t preconditioned,
                      int32_t reduce_by_caller, pk_rci_dev **out) {
  *out = NULL;
  pk_rci_dev *R = calloc(1, sizeof *R);
  if (!R)
    return pk_error(ctx, PKRYLOV_ERR_OUT_OF_MEMORY, "pkrylov_rci_start",
                    "cannot allocate the reverse-communication state");
  R->ctx = ctx;
  R->type = type;
  R->n = n;
  R->preconditioned = preconditioned;
  R->by_caller = reduce_by_caller;
  const int nvec = type == PKRYLOV_SOLVER_CG ? W_U + 1 : RCI_NVEC;
  int ierr = ctx->be->rci_create(ctx, n, nvec, &R->cu, &R->dwork);
  if (ierr) {
    free(R);
    return ierr;
  }
  for (int i = 0; i < nvec; i++)
    R->v[i] = R->dwork + (size_t)i * (size_t)n;
  *out = R;
  return PKRYLOV_SUCCESS;
}

void pk_rci_dev_destroy(pk_rci_dev *R) {
  if (!R)
    return;
  if (R->cu)
    R->ctx->be->rci_free(R->cu);
  free(R);
}

int pk_rci_dev_check(pk_rci_dev *R, const char *func, const double *b, const double *x, int32_t x_nonzero) {
  pkrylov_context ctx = R->ctx;
  RCI_BE(R)->rci_set_func(R->cu, func); /* the device work's CUDA errors name this call */
  const double *xs[2] = {b, x};
  double o[2];
  PK_CALL(RCI_BE(R)->rci_dots(R->cu, x_nonzero ? 2 : 1, xs, xs, o));
  PK_CHECK(isfinite(o[0]), ctx, PKRYLOV_ERR_NOT_FINITE,
           "argument 'b' has NaN or Inf values, or its 2-norm overflows");
  PK_CHECK(!x_nonzero || isfinite(o[1]), ctx, PKRYLOV_ERR_NOT_FINITE,
           "argument 'x' (initial guess) has NaN or Inf values");
  return PKRYLOV_SUCCESS;
}

int pk_rci_dev_start(pk_rci_dev *R, const pk_rci_kry_settings *set, const double *b, double *x,
                     int32_t x_nonzero) {
  if (!x_nonzero) {
    PK_CALL(RCI_BE(R)->rci_zero(R->cu, x));
    PK_CALL(RCI_BE(R)->rci_sync(R->cu));
  }
  R->rtol = set->rtol;
  R->atol = set->atol;
  R->maxit = set->maxit;
  R->replace_interval = set->replace_interval;
  R->b = b;
  R->x = x;
  R->x_zero = !x_nonzero;
  pk_result_init(&R->res);
  R->t0 = pk_wtime();
  R->it = R->first = R->since_replace = R->confirm_failures = R->restarts = 0;
  R->have_final = R->conv = R->brk = R->have_bb = 0;
  R->rho_sign = R->sigma_sign = 0.0;
  R->gamma_old = R->alpha_old = 0.0;
  R->rq.active = 0;
  R->req = 0;
  R->npart = 0;
  R->pc = 0;
  return PKRYLOV_SUCCESS;
}

int pk_rci_dev_step(pk_rci_dev *R, int32_t *req, double **in, double **out, double **partials,
                    int32_t *npartials, pkrylov_result *res) {
  RCI_BE(R)->rci_set_func(R->cu, "pkrylov_rci_step");
  int ierr = rci_run(R);
  if (!ierr) /* the request's vectors (and x at DONE) are complete before the caller sees them */
    ierr = RCI_BE(R)->rci_sync(R->cu);
  if (ierr)
    return ierr;
  *req = R->req;
  *in = R->in;
  *out = R->out;
  *partials = R->part;
  *npartials = R->npart;
  if (R->req == PKRYLOV_RCI_DONE)
    *res = R->res;
  return PKRYLOV_SUCCESS;
}

/**
 * @file rci.c
 * @brief Handle-based reverse communication: CG and pipelined CG as state machines that hand the matvec,
 *        the preconditioner and (optionally) the global reductions back to the caller.
 *
 * The algorithms mirror the CG and pipelined CG drivers of cg.c (same recurrences, convergence test
 * with true-residual confirmation, breakdown checks, restarts and result fields), with every application of
 * A or M^-1 turned into a request. The drivers are written as straight-line code; a request is a yield:
 * RCI_YIELD stores the resume point (the source line) in R->pc and returns, and pkrylov_rci_step() jumps
 * back there through the switch in rci_run(). Everything that lives across a yield is in the rci struct.
 *
 * CG: the library's two-loop form keeps q = A p by recurrence and applies A to z (q = A z + beta q), so the
 * MATVEC request of an iteration is in = z. Pipelined CG (Ghysels-Vanroose): m = M^-1 w and n = A m do not
 * depend on the scalars of the iteration, so they are requested while the reduction of (r,u), (w,u),
 * (r,r) is in flight: REDUCE_START, PRECOND, MATVEC, REDUCE_WAIT, then the fused vector update.
 *
 * The BiCGStab and GMRES families are not state machines here: rci_kry.c runs the library's own solve of
 * those types as a coroutine (worker thread) and turns its operator, preconditioner and global sums into
 * the same requests. This file routes them there (R->kry) and keeps the argument checks and the settings
 * common to both paths.
 *
 * Device vectors (mem = PKRYLOV_MEM_DEVICE on a CUDA context): the same state machine with the work vectors
 * on the GPU; every vector step goes through the rci_* helpers below, which run it as kernels (pk_cuda.h,
 * "device work of a handle-based reverse-communication solve") and bring the local sums to the host array
 * `part` handed to the caller. The stream is synchronised before each request.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "pk_kry.h"
#include "pk_rci.h"

/** As cg.c: confirmation failures and pipelined restarts before reporting stagnation. */
#define RCI_MAX_CONFIRM_FAILURES 5
#define RCI_MAX_RESTARTS 5

/** Work vectors of the rci (CG uses R..U, U as the scratch of true residuals). */
enum { W_R, W_Z, W_P, W_Q, W_T, W_U, W_W, W_M, W_S, W_N, W_AT, RCI_NVEC };

struct pkrylov_rci_s {
  pkrylov_context ctx;
  int32_t type, preconditioned, by_caller;
  int64_t n;
  double rtol, atol;
  int32_t maxit, replace_interval, restart, step;
  pk_rci_kry *kry; /* BiCGStab and GMRES families: the coroutine (rci_kry.c); NULL for CG and pipelined CG */
  double *work; /* nvec * n (host; on a CUDA context allocated at the first host solve) */
  double *v[RCI_NVEC];
  int32_t nvec;
  int32_t dev;  /* the solve in progress works on device vectors (CUDA context, mem = DEVICE) */
  void *cu;         /* device work area (the backend's rci_create), made at the first device solve */
  double *dwork;    /* its nvec device vectors */
  double part[4]; /* the partial sums handed to the caller */
  double *kpart;  /* BiCGStab and GMRES families: the driver's partial sums of the request */
  /* request being answered */
  int32_t req, npart;
  double *in, *out;
  /* solve */
  int32_t active, pc, has_result, x_zero;
  const double *b;
  double *x;
  pkrylov_result res, done;
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
static int rci_converged(const struct pkrylov_rci_s *R, double res) {
  if (!(res <= R->tol))
    return 0;
  return res <= R->atol ? PKRYLOV_CONVERGED_ATOL : PKRYLOV_CONVERGED_RTOL;
}

/** (x, y) over n values, plain loop. */
static double rci_dot(int64_t n, const double *x, const double *y) {
  double s = 0.0;
  for (int64_t i = 0; i < n; i++)
    s += x[i] * y[i];
  return s;
}

/** r = b - t (t = A x; t = 0 when x is known to be zero); returns the local (r, r). */
static double rci_residual(const struct pkrylov_rci_s *R, const double *t, double *r) {
  double rr = 0.0;
  for (int64_t i = 0; i < R->n; i++) {
    r[i] = R->x_zero ? R->b[i] : R->b[i] - t[i];
    rr += r[i] * r[i];
  }
  return rr;
}

/* ---- vector steps on the host or (R->dev) on the device ---------------------------------------------- */

/* R->dev is set only on a context whose backend has the rci_* entries (a device backend) */
#define RCI_ON_DEVICE(R) ((R)->dev)
/* the backend's device steps */
#define RCI_BE(R) ((R)->ctx->be)

/** v = 0. */
static int rci_zero(struct pkrylov_rci_s *R, double *v) {
  if (RCI_ON_DEVICE(R))
    return RCI_BE(R)->rci_zero(R->cu, v);
  memset(v, 0, sizeof(double) * (size_t)R->n);
  return PKRYLOV_SUCCESS;
}

/** dst = src. */
static int rci_copy(struct pkrylov_rci_s *R, double *dst, const double *src) {
  if (RCI_ON_DEVICE(R))
    return RCI_BE(R)->rci_copy(R->cu, dst, src);
  memcpy(dst, src, sizeof(double) * (size_t)R->n);
  return PKRYLOV_SUCCESS;
}

/** out[j] = (x[j], y[j]) local, j < nv (host: plain loops, one per pair). */
static int rci_dots(struct pkrylov_rci_s *R, int nv, const double *const *x, const double *const *y,
                    double *out) {
  if (RCI_ON_DEVICE(R))
    return RCI_BE(R)->rci_dots(R->cu, nv, x, y, out);
  for (int j = 0; j < nv; j++)
    out[j] = rci_dot(R->n, x[j], y[j]);
  return PKRYLOV_SUCCESS;
}

/** r = b - t (b when x is known to be zero); *rr = local (r, r). */
static int rci_resid(struct pkrylov_rci_s *R, const double *t, double *r, double *rr) {
  if (RCI_ON_DEVICE(R))
    return RCI_BE(R)->rci_residual(R->cu, R->b, R->x_zero ? NULL : t, r, rr);
  *rr = rci_residual(R, t, r);
  return PKRYLOV_SUCCESS;
}

/** Stop the solve with the current reason: the final true residual, then DONE. */
#define RCI_FINISH() goto finish

/**
 * The solve as straight-line code, resumed at R->pc. Returns a status; on success R->req is the request for
 * the caller (PKRYLOV_RCI_DONE at the end).
 */
static int rci_run(struct pkrylov_rci_s *R) {
  const int64_t n = R->n;
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
      if (RCI_ON_DEVICE(R))
        PK_CALL(RCI_BE(R)->rci_xpay(R->cu, r, -R->alpha, q, r)); /* r + (-alpha) q: bitwise r - alpha q */
      else
        for (int64_t i = 0; i < n; i++)
          r[i] -= R->alpha * q[i];
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
        if (RCI_ON_DEVICE(R))
          PK_CALL(RCI_BE(R)->rci_xpay(R->cu, x, R->alpha, p, x));
        else
          for (int64_t i = 0; i < n; i++)
            x[i] += R->alpha * p[i];
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
      if (RCI_ON_DEVICE(R)) {
        PK_CALL(RCI_BE(R)->rci_cg_update(R->cu, R->alpha, R->beta, x, p, z, q, t, d));
      } else {
        for (int64_t i = 0; i < n; i++) {
          x[i] += R->alpha * p[i];
          p[i] = z[i] + R->beta * p[i];
          q[i] = t[i] + R->beta * q[i];
        }
        d[0] = rci_dot(n, p, q);
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
          if (RCI_ON_DEVICE(R))
            PK_CALL(RCI_BE(R)->rci_xpay(R->cu, u, R->beta, p, t));
          else
            for (int64_t i = 0; i < n; i++)
              t[i] = u[i] + R->beta * p[i];
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
      if (RCI_ON_DEVICE(R)) {
        PK_CALL(RCI_BE(R)->rci_pipecg_update(R->cu, R->alpha, R->beta, m, nv, z, q, sv, p, x, r, u, w, d));
      } else {
        const double al = R->alpha, be = R->beta;
        double ru = 0.0, wu = 0.0, rr = 0.0;
        for (int64_t i = 0; i < n; i++) {
          z[i] = nv[i] + be * z[i];
          q[i] = m[i] + be * q[i];
          sv[i] = w[i] + be * sv[i];
          p[i] = u[i] + be * p[i];
          x[i] += al * p[i];
          r[i] -= al * sv[i];
          u[i] -= al * q[i];
          w[i] -= al * z[i];
          ru += r[i] * u[i];
          wu += w[i] * u[i];
          rr += r[i] * r[i];
        }
        d[0] = ru;
        d[1] = wu;
        d[2] = rr;
      }
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
    R->done = R->res;
    R->has_result = 1;
    R->active = 0;
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

int pkrylov_rci_create(pkrylov_context ctx, int32_t type, int64_t n, int32_t preconditioned,
                       int32_t reduce_by_caller, pkrylov_rci *r) {
  PK_CHECK(ctx != NULL, NULL, PKRYLOV_ERR_NULL_POINTER, "argument 'ctx' is NULL");
  PK_CHECK_PTR(r, ctx);
  PK_CHECK(type == PKRYLOV_SOLVER_CG || type == PKRYLOV_SOLVER_PIPECG || pk_kry_is_kry_type(type), ctx,
           PKRYLOV_ERR_INVALID_VALUE, "argument 'type' = %d is not a pkrylov_solver_type (%d to %d)", type,
           PKRYLOV_SOLVER_CG, PKRYLOV_SOLVER_SRCG);
  PK_CHECK(n > 0, ctx, PKRYLOV_ERR_INVALID_SIZE, "argument 'n' = %lld must be > 0", (long long)n);
  PK_CHECK(preconditioned == 0 || preconditioned == 1, ctx, PKRYLOV_ERR_INVALID_VALUE,
           "argument 'preconditioned' = %d must be 0 or 1", preconditioned);
  PK_CHECK(reduce_by_caller == 0 || reduce_by_caller == 1, ctx, PKRYLOV_ERR_INVALID_VALUE,
           "argument 'reduce_by_caller' = %d must be 0 or 1", reduce_by_caller);
  PK_CHECK(!ctx->be->device || type == PKRYLOV_SOLVER_CG || type == PKRYLOV_SOLVER_PIPECG, ctx,
           PKRYLOV_ERR_UNSUPPORTED,
           "argument 'ctx': reverse communication on the %s backend is implemented for CG and pipelined CG only",
           ctx->be->name);
  const int kry = pk_kry_is_kry_type(type);
  const int nvec = kry ? 0 : type == PKRYLOV_SOLVER_CG ? W_U + 1 : RCI_NVEC;
  PK_CHECK((uint64_t)n <= SIZE_MAX / sizeof(double) / (size_t)(nvec > 0 ? nvec : 4), ctx,
           PKRYLOV_ERR_INVALID_SIZE,
           "argument 'n' = %lld is too large", (long long)n);
  struct pkrylov_rci_s *R;
  PK_CALLOC(R, 1, ctx);
  if (kry) {
    int ierr = pk_rci_kry_create(ctx, type, n, preconditioned, reduce_by_caller, &R->kry);
    if (ierr) {
      free(R);
      return ierr;
    }
  } else if (!ctx->be->device) { /* a device backend: host and device work are made at the first start */
    R->work = calloc((size_t)nvec * (size_t)n, sizeof(double));
    if (!R->work) {
      free(R);
      return pk_error(ctx, PKRYLOV_ERR_OUT_OF_MEMORY, __func__,
                      "cannot allocate %d work vectors of %lld values", nvec, (long long)n);
    }
    for (int i = 0; i < nvec; i++)
      R->v[i] = R->work + (size_t)i * (size_t)n;
  }
  R->nvec = nvec;
  R->ctx = ctx;
  R->type = type;
  R->n = n;
  R->preconditioned = preconditioned;
  R->by_caller = reduce_by_caller;
  R->rtol = 1e-8;
  R->atol = 0.0;
  R->maxit = 1000;
  R->replace_interval = 50;
  R->restart = 30;
  R->step = 0;
  ctx->live_objects++;
  *r = R;
  return PKRYLOV_SUCCESS;
}

int pkrylov_rci_destroy(pkrylov_rci *r) {
  PK_CHECK(r != NULL, NULL, PKRYLOV_ERR_NULL_POINTER, "argument 'r' is NULL");
  if (!*r)
    return PKRYLOV_SUCCESS;
  (*r)->ctx->live_objects--;
  pk_rci_kry_destroy((*r)->kry); /* abandons a solve in progress, stops the worker */
  free((*r)->work);
  if ((*r)->cu) (*r)->ctx->be->rci_free((*r)->cu);
  free(*r);
  *r = NULL;
  return PKRYLOV_SUCCESS;
}

/** The BiCGStab and GMRES families take their settings at pkrylov_rci_start: none may change mid-solve. */
#define RCI_CHECK_SETTABLE(r)                                                                                \
  PK_CHECK(!((r)->kry && (r)->active), (r)->ctx, PKRYLOV_ERR_INVALID_STATE,                                 \
           "a solve is in progress: settings change between solves (finish it, or abandon it with "          \
           "pkrylov_rci_start)")

int pkrylov_rci_set_tolerances(pkrylov_rci r, double rtol, double atol) {
  PK_CHECK(r != NULL, NULL, PKRYLOV_ERR_NULL_POINTER, "argument 'r' is NULL");
  RCI_CHECK_SETTABLE(r);
  PK_CHECK(isfinite(rtol) && rtol >= 0, r->ctx, PKRYLOV_ERR_INVALID_VALUE,
           "argument 'rtol' = %g must be finite and >= 0", rtol);
  PK_CHECK(isfinite(atol) && atol >= 0, r->ctx, PKRYLOV_ERR_INVALID_VALUE,
           "argument 'atol' = %g must be finite and >= 0", atol);
  PK_CHECK(rtol > 0 || atol > 0, r->ctx, PKRYLOV_ERR_INVALID_VALUE,
           "arguments 'rtol' and 'atol' are both 0: the solve could never stop on its own");
  r->rtol = rtol;
  r->atol = atol;
  return PKRYLOV_SUCCESS;
}

int pkrylov_rci_set_max_iterations(pkrylov_rci r, int32_t maxit) {
  PK_CHECK(r != NULL, NULL, PKRYLOV_ERR_NULL_POINTER, "argument 'r' is NULL");
  RCI_CHECK_SETTABLE(r);
  PK_CHECK(maxit >= 0, r->ctx, PKRYLOV_ERR_INVALID_VALUE, "argument 'maxit' = %d must be >= 0", maxit);
  r->maxit = maxit;
  return PKRYLOV_SUCCESS;
}

int pkrylov_rci_set_residual_replacement(pkrylov_rci r, int32_t k) {
  PK_CHECK(r != NULL, NULL, PKRYLOV_ERR_NULL_POINTER, "argument 'r' is NULL");
  RCI_CHECK_SETTABLE(r);
  PK_CHECK(k >= 0, r->ctx, PKRYLOV_ERR_INVALID_VALUE,
           "argument 'k' = %d must be >= 0 (the handles replace at fixed intervals: no PKRYLOV_REPLACE_AUTO)", k);
  r->replace_interval = k;
  return PKRYLOV_SUCCESS;
}

int pkrylov_rci_set_restart(pkrylov_rci r, int32_t m) {
  PK_CHECK(r != NULL, NULL, PKRYLOV_ERR_NULL_POINTER, "argument 'r' is NULL");
  RCI_CHECK_SETTABLE(r);
  PK_CHECK(m >= 1 && m <= 1000, r->ctx, PKRYLOV_ERR_INVALID_VALUE, "argument 'm' = %d must be in [1, 1000]",
           m);
  r->restart = m;
  return PKRYLOV_SUCCESS;
}

int pkrylov_rci_set_step(pkrylov_rci r, int32_t step) {
  PK_CHECK(r != NULL, NULL, PKRYLOV_ERR_NULL_POINTER, "argument 'r' is NULL");
  RCI_CHECK_SETTABLE(r);
  PK_CHECK(step >= 0 && step <= 16, r->ctx, PKRYLOV_ERR_INVALID_VALUE,
           "argument 'step' = %d must be in [0, 16] (0 = auto)", step);
  r->step = step;
  return PKRYLOV_SUCCESS;
}

int pkrylov_rci_start(pkrylov_rci r, int32_t mem, const double *b, double *x, int32_t x_nonzero) {
  PK_CHECK(r != NULL, NULL, PKRYLOV_ERR_NULL_POINTER, "argument 'r' is NULL");
  pkrylov_context ctx = r->ctx;
  PK_CALL(pk_check_vectors(ctx, __func__, mem, b, "b", x, "x", r->n));
  PK_CHECK(x_nonzero == 0 || x_nonzero == 1, ctx, PKRYLOV_ERR_INVALID_VALUE,
           "argument 'x_nonzero' = %d must be 0 or 1", x_nonzero);
  /* the reverse-communication solves sum their local dots as doubles (the caller's or the library's
     reduction): not the exact sums reproducible mode promises, so they refuse it rather than ignore it */
  PK_CHECK(!ctx->reproducible, ctx, PKRYLOV_ERR_UNSUPPORTED,
           "reproducible mode (pkrylov_context_set_reproducible) is not implemented for reverse "
           "communication; solve with pkrylov_solver_solve, or turn it off for this context");
  int on_device = 0; /* the solve runs on device vectors (CUDA context, mem = DEVICE) */
  if (ctx->be->rci_create) { /* b and x where mem says; the work vectors of that space */
    PK_CALL(ctx->be->check_pointer(ctx, __func__, mem, b, "b"));
    PK_CALL(ctx->be->check_pointer(ctx, __func__, mem, x, "x"));
    on_device = mem == PKRYLOV_MEM_DEVICE;
    if (on_device) {
      if (!r->cu)
        PK_CALL(ctx->be->rci_create(ctx, r->n, r->nvec, &r->cu, &r->dwork));
      RCI_BE(r)->rci_set_func(r->cu, __func__); /* the device work's CUDA errors name this call */
      const double *xs[2] = {b, x};
      double o[2];
      PK_CALL(RCI_BE(r)->rci_dots(r->cu, x_nonzero ? 2 : 1, xs, xs, o));
      PK_CHECK(isfinite(o[0]), ctx, PKRYLOV_ERR_NOT_FINITE,
               "argument 'b' has NaN or Inf values, or its 2-norm overflows");
      PK_CHECK(!x_nonzero || isfinite(o[1]), ctx, PKRYLOV_ERR_NOT_FINITE,
               "argument 'x' (initial guess) has NaN or Inf values");
    } else if (!r->work) {
      r->work = calloc((size_t)r->nvec * (size_t)r->n, sizeof(double));
      PK_CHECK(r->work != NULL, ctx, PKRYLOV_ERR_OUT_OF_MEMORY, "cannot allocate %d work vectors of %lld values",
               r->nvec, (long long)r->n);
    }
  }
  if (!on_device) {
    int64_t bad = pk_first_nonfinite(b, r->n);
    PK_CHECK(bad < 0, ctx, PKRYLOV_ERR_NOT_FINITE, "argument 'b' has a non-finite value (%g) at index %lld",
             bad >= 0 ? b[bad] : 0.0, (long long)bad);
    if (x_nonzero) {
      bad = pk_first_nonfinite(x, r->n);
      PK_CHECK(bad < 0, ctx, PKRYLOV_ERR_NOT_FINITE,
               "argument 'x' (initial guess) has a non-finite value (%g) at index %lld",
               bad >= 0 ? x[bad] : 0.0, (long long)bad);
    }
  }
  if (r->kry) {
    /* abandon a solve in progress first (it writes nothing of the caller's while it unwinds) */
    pk_rci_kry_abandon(r->kry);
    r->active = 0;
    if (!x_nonzero) memset(x, 0, sizeof(double) * (size_t)r->n);
    pk_rci_kry_settings set = {r->rtol, r->atol, r->maxit, r->replace_interval, r->restart, r->step};
    PK_CALL(pk_rci_kry_start(r->kry, &set, b, x, x_nonzero));
    r->b = b;
    r->x = x;
    r->active = 1;
    return PKRYLOV_SUCCESS;
  }
  if (ctx->be->rci_create) { /* every check passed: the work vectors of this solve */
    r->active = 0;
    r->dev = on_device;
    for (int i = 0; i < r->nvec; i++)
      r->v[i] = (on_device ? r->dwork : r->work) + (size_t)i * (size_t)r->n;
    if (on_device && !x_nonzero) {
      PK_CALL(RCI_BE(r)->rci_zero(r->cu, x));
      PK_CALL(RCI_BE(r)->rci_sync(r->cu));
    }
  }
  if (!x_nonzero && !on_device) memset(x, 0, sizeof(double) * (size_t)r->n);
  r->b = b;
  r->x = x;
  r->x_zero = !x_nonzero;
  pk_result_init(&r->res);
  r->t0 = pk_wtime();
  r->it = r->first = r->since_replace = r->confirm_failures = r->restarts = 0;
  r->have_final = r->conv = r->brk = r->have_bb = 0;
  r->rho_sign = r->sigma_sign = 0.0;
  r->gamma_old = r->alpha_old = 0.0;
  r->rq.active = 0;
  r->req = 0;
  r->npart = 0;
  r->pc = 0;
  r->active = 1;
  return PKRYLOV_SUCCESS;
}

int pkrylov_rci_step(pkrylov_rci r, int32_t *request, double **in, double **out, double **partials,
                     int32_t *npartials) {
  PK_CHECK(r != NULL, NULL, PKRYLOV_ERR_NULL_POINTER, "argument 'r' is NULL");
  PK_CHECK_PTR(request, r->ctx);
  PK_CHECK(r->active, r->ctx, PKRYLOV_ERR_INVALID_STATE,
           "no solve in progress: call pkrylov_rci_start first (a finished solve answered PKRYLOV_RCI_DONE)");
  if (r->kry) {
    double *ki, *ko, *kp;
    int32_t kq, kn;
    pkrylov_result kres;
    int ierr = pk_rci_kry_step(r->kry, &kq, &ki, &ko, &kp, &kn, &kres);
    if (ierr || kq == PKRYLOV_RCI_DONE) r->active = 0;
    if (ierr) return ierr;
    if (kq == PKRYLOV_RCI_DONE) {
      r->done = kres;
      r->has_result = 1;
    }
    r->req = kq;
    r->in = ki;
    r->out = ko;
    if (kp) r->kpart = kp;
    r->npart = kn;
  } else {
    if (r->dev) RCI_BE(r)->rci_set_func(r->cu, __func__);
    int ierr = rci_run(r);
    if (!ierr && r->dev) /* the request's vectors (and x at DONE) are complete before the caller sees them */
      ierr = RCI_BE(r)->rci_sync(r->cu);
    if (ierr) {
      r->active = 0;
      return ierr;
    }
  }
  const int is_vec = r->req == PKRYLOV_RCI_MATVEC || r->req == PKRYLOV_RCI_PRECOND;
  const int is_red = r->req == PKRYLOV_RCI_REDUCE_START || r->req == PKRYLOV_RCI_REDUCE_WAIT;
  *request = r->req;
  if (in)
    *in = is_vec ? r->in : NULL;
  if (out)
    *out = is_vec ? r->out : NULL;
  if (partials)
    *partials = is_red ? (r->kry ? r->kpart : r->part) : NULL;
  if (npartials)
    *npartials = is_red ? r->npart : 0;
  return PKRYLOV_SUCCESS;
}

int pkrylov_rci_get_result(pkrylov_rci r, pkrylov_result *res) {
  PK_CHECK(r != NULL, NULL, PKRYLOV_ERR_NULL_POINTER, "argument 'r' is NULL");
  PK_CHECK_PTR(res, r->ctx);
  PK_CHECK(r->has_result, r->ctx, PKRYLOV_ERR_INVALID_STATE, "no solve has finished with this rci");
  *res = r->done;
  return PKRYLOV_SUCCESS;
}

/**
 * @file kry_scalar_pcg.h
 * @brief Scalar steps of CG and pipelined CG (cg.c; see kry_scalar.h for the rules).
 *
 * CG is the two-loop form of Mueller et al.: after the preconditioner loop (r -= alpha q; z = M^-1 r;
 * (r, z), (r, r)) PK_KSS_CG_ITER tests iteration it's residual and gives beta = (r, z) / rho; after the
 * operator loop (x += alpha p; p = z + beta p; q = A z + beta q; (p, q)) PK_KSS_CG_SIGMA gives alpha =
 * rho / (p, q). The update of x lags one loop behind: when the iteration stops, x_it = x + alpha p is due
 * (the driver applies it). PK_KSS_CG_INIT takes the sums of a (re)start (r = b - A x, z = M^-1 r).
 *
 * Pipelined CG (Ghysels and Vanroose 2014, Algorithm 4): PK_KSS_PCG_SUMS takes the one reduction
 * (r, u), (w, u), (r, r) (and with the automatic residual replacement the norms of pk_rr.h); it first asks
 * the estimate whether the vectors must be replaced now (PK_PCG_REPLACE: the driver replaces and calls the
 * step again on the new sums), then records and tests iteration it's residual and gives alpha, beta of the
 * fused update that completes iteration it + 1. PK_KSS_PCG_START begins a (re)start.
 *
 * The logic is that of the host drivers these replace and of the CUDA scalar steps (cg_rho_update,
 * cg_sigma_update, pipe_update in pk_cuda_kernels.cu): negative definite operators solve (the signs of
 * (r, M^-1 r) and of the curvature are fixed by their first values, pk_ks_sign_ok; a zero or a change of
 * sign is a breakdown at iteration it + 1); NaN or Inf in a sum stops with PKRYLOV_DIVERGED_NAN; the stop
 * rule's test (pk_ks_test_rr, the code CONVERGED_RTOL: the driver confirms and tells RTOL from ATOL); maxit;
 * the minimum-residual iterate (TAKE = 1: the driver keeps the iterate of this step, CG's x + alpha p,
 * pipelined CG's x); pipelined CG's recurrence curvature that loses its sign while finite is SUSPECT (the
 * driver computes the true one before it calls it a breakdown). Monitor and stagnation are the host's
 * (pk_kry_poll); they rank below convergence and breakdown, above maxit.
 */
#ifndef PK_KRY_SCALAR_PCG_H
#define PK_KRY_SCALAR_PCG_H

#include "pk_rr.h"

/** Scalars of CG, after the common header. */
enum {
  PK_CG_RZ = PK_KS_DRIVER, /* the preconditioner loop: (r, z) */
  PK_CG_RR,                /*                          (r, r) */
  PK_CG_PQ,                /* the operator loop: (p, q) */
  PK_CG_TRUE,              /* true_res_interval: the sum of the recomputed residual */
  PK_CG_RHO,               /* (r, z) of the direction's iteration */
  PK_CG_ALPHA,             /* rho / (p, q) */
  PK_CG_BETA,              /* (r, z) / rho_old */
  PK_CG_RHO_SIGN,          /* 0 until fixed by the first value, then +-1 */
  PK_CG_SIGMA_SIGN,
  PK_CG_IT,                /* iterations done (x + alpha p is iterate IT once the preconditioner loop ran) */
  PK_CG_MAXIT,             /* written by the driver */
  PK_CG_LAST_RR,           /* (r, r) of the last iterate */
  PK_CG_MIN_ON,            /* 1: track the minimum-residual iterate (written by the driver) */
  PK_CG_MIN_RR,            /* the smallest (r, r) so far */
  PK_CG_MIN_IT,            /* its iteration (-1 before any) */
  PK_CG_TAKE,              /* 1: the step's iterate is the new minimum: the driver keeps it */
  PK_CG_KEEP,              /* 1 - TAKE: the coefficients of the kept iterate's update x_min = KEEP x_min + */
  PK_CG_TAKE_ALPHA,        /* TAKE x + TAKE_ALPHA p (TAKE_ALPHA = alpha when TAKE, else 0) */
  PK_CG_NSCALARS
};

/** The estimate of the automatic residual replacement (pk_rr_est), field by field as doubles. */
enum {
  PK_PE_F, PK_PE_G, PK_PE_H, PK_PE_J, PK_PE_ANORM, PK_PE_RAY, PK_PE_BNORM, PK_PE_MU, PK_PE_NQ, PK_PE_SCALE,
  PK_PE_GAP, PK_PE_BELOW, PK_PE_FRESH, PK_PE_N
};

/** Scalars of pipelined CG, after the common header. */
enum {
  PK_PCG_GAMMA = PK_KS_DRIVER, /* the reduction: (r, u) */
  PK_PCG_DELTA,                /*                (w, u) */
  PK_PCG_RR,                   /*                (r, r), then (x, x), (p, p), (u, u), (q, q) (PK_RR_NV) */
  PK_PCG_GAP = PK_PCG_GAMMA + PK_RR_NV, /* ||r_new - r_old||^2 of a replacement the rule decided */
  PK_PCG_CURV,                 /* the driver's direct curvature (t, A t), t = u + beta p */
  PK_PCG_ALPHA,
  PK_PCG_BETA,
  PK_PCG_GAMMA_OLD,
  PK_PCG_ALPHA_OLD,
  PK_PCG_RHO_SIGN,
  PK_PCG_SIGMA_SIGN,
  PK_PCG_FIRST,                /* 1: the sums are those of a (re)start */
  PK_PCG_IT,                   /* iterations done: x is iterate IT */
  PK_PCG_MAXIT,                /* written by the driver */
  PK_PCG_LAST_RR,
  PK_PCG_MIN_ON,
  PK_PCG_MIN_RR,
  PK_PCG_MIN_IT,
  PK_PCG_TAKE,
  PK_PCG_SUSPECT,              /* 1: the stop is a recurrence curvature that lost its sign */
  PK_PCG_AUTO,                 /* 1: the automatic residual replacement (written by the driver) */
  PK_PCG_REPLACE,              /* 1: the estimate says replace now (nothing else changed) */
  PK_PCG_KEEP,                 /* 1 - TAKE: x_min = KEEP x_min + TAKE x */
  PK_PCG_EST,                  /* the estimate: PK_PE_N values */
  PK_PCG_NSCALARS = PK_PCG_EST + PK_PE_N
};

/**
 * Stop code (not a pkrylov_reason) of pipelined CG's automatic residual replacement: the estimate says the
 * vectors must be replaced now (PK_PCG_REPLACE is 1 too). Like any stop it makes the rest of a block of
 * iterations do nothing (the fused loops run with PK_KRY_IF_RUNNING); the driver replaces the vectors,
 * clears the stop and goes on with the same iteration.
 */
#define PK_KS_REPLACE 98

enum {
  PK_KSS_CG_INIT = 500,  /* arg 0: the first start (records iteration 0), 1: a restart from x */
  PK_KSS_CG_ITER = 501,  /* after the preconditioner loop */
  PK_KSS_CG_SIGMA = 502, /* after the operator loop */
  PK_KSS_PCG_START = 510, /* arg 0: the first start, 1: a restart from x (before its vectors) */
  PK_KSS_PCG_SUMS = 511   /* after the reduction */
};

/** The estimate kept in S[at..at + PK_PE_N) as a pk_rr_est and back. */
PK_HD static inline void pk_pcg_est_load(const double *S, int at, pk_rr_est *e) {
  e->f = S[at + PK_PE_F], e->g = S[at + PK_PE_G], e->h = S[at + PK_PE_H], e->j = S[at + PK_PE_J];
  e->anorm = S[at + PK_PE_ANORM], e->ray = S[at + PK_PE_RAY], e->bnorm = S[at + PK_PE_BNORM];
  e->mu = S[at + PK_PE_MU], e->nq = S[at + PK_PE_NQ], e->scale = S[at + PK_PE_SCALE];
  e->gap = S[at + PK_PE_GAP];
  e->below = (int32_t)S[at + PK_PE_BELOW], e->fresh = (int32_t)S[at + PK_PE_FRESH];
}
PK_HD static inline void pk_pcg_est_store(double *S, int at, const pk_rr_est *e) {
  S[at + PK_PE_F] = e->f, S[at + PK_PE_G] = e->g, S[at + PK_PE_H] = e->h, S[at + PK_PE_J] = e->j;
  S[at + PK_PE_ANORM] = e->anorm, S[at + PK_PE_RAY] = e->ray, S[at + PK_PE_BNORM] = e->bnorm;
  S[at + PK_PE_MU] = e->mu, S[at + PK_PE_NQ] = e->nq, S[at + PK_PE_SCALE] = e->scale;
  S[at + PK_PE_GAP] = e->gap;
  S[at + PK_PE_BELOW] = (double)e->below, S[at + PK_PE_FRESH] = (double)e->fresh;
}

/** The minimum-residual bookkeeping of iterate it with sum rr (reset: a (re)start keeps it unconditionally);
 *  S[take] = 1 when the driver must keep the iterate. */
PK_HD static inline void pk_pcg_track_min(double *S, int on, int take, int it, double rr, int reset) {
  S[take] = 0.0;
  if (S[on] == 0.0) return;
  if (reset || rr < S[on + 1]) { /* MIN_RR, MIN_IT follow MIN_ON */
    S[on + 1] = rr;
    S[on + 2] = (double)it;
    S[take] = 1.0;
  }
}

/** CG's coefficients of x_min = KEEP x_min + TAKE x + TAKE_ALPHA p from TAKE (the iterate x + alpha p). */
PK_HD static inline void pk_cg_keep_coefs(double *S) {
  const int take = S[PK_CG_TAKE] != 0.0;
  S[PK_CG_KEEP] = take ? 0.0 : 1.0;
  S[PK_CG_TAKE_ALPHA] = take ? S[PK_CG_ALPHA] : 0.0;
}

/** PK_KSS_CG_INIT: the sums (r, z), (r, r) of r = b - A x, z = M^-1 r of a (re)start. */
PK_HD static inline void pk_kss_cg_init_(double *S, int arg) {
  S[PK_KS_STOP] = 0.0;
  S[PK_KS_STOP_IT] = 0.0;
  if (arg == 0) { /* nothing recorded yet (a NaN here records nothing) */
    S[PK_CG_IT] = 0.0;
    S[PK_KS_ITS] = -1.0;
    S[PK_CG_MIN_IT] = -1.0;
  }
  S[PK_CG_RHO_SIGN] = S[PK_CG_SIGMA_SIGN] = 0.0;
  S[PK_CG_ALPHA] = S[PK_CG_BETA] = 0.0; /* the first operator loop: p = z, q = A z */
  S[PK_CG_TAKE] = 0.0;
  const int it = (int)S[PK_CG_IT];
  const double rz = S[PK_CG_RZ], rr = S[PK_CG_RR];
  if (!isfinite(rz) || !isfinite(rr)) {
    pk_ks_stop(S, PKRYLOV_DIVERGED_NAN, it + 1);
    return;
  }
  S[PK_CG_LAST_RR] = rr;
  if (it == 0) {
    pk_ks_record(S, 0, sqrt(rr));
    if (pk_ks_test_rr(S, 0, rr)) return;
    if (S[PK_CG_MAXIT] == 0.0) {
      pk_ks_stop(S, PKRYLOV_DIVERGED_MAX_ITERATIONS, 0);
      return;
    }
  }
  pk_pcg_track_min(S, PK_CG_MIN_ON, PK_CG_TAKE, it, rr, 1);
  if (!pk_ks_sign_ok(rz, &S[PK_CG_RHO_SIGN])) {
    pk_ks_stop(S, PKRYLOV_DIVERGED_BREAKDOWN_INDEFINITE_PRECOND, it + 1);
    return;
  }
  S[PK_CG_RHO] = rz;
}

/** PK_KSS_CG_SIGMA: (p, q) = (p, A p) of the operator loop; alpha = rho / (p, q). */
PK_HD static inline void pk_kss_cg_sigma(double *S, int arg) {
  (void)arg;
  if (!pk_ks_running(S)) return;
  const double sigma = S[PK_CG_PQ];
  if (!pk_ks_sign_ok(sigma, &S[PK_CG_SIGMA_SIGN])) {
    pk_ks_stop(S, isfinite(sigma) ? PKRYLOV_DIVERGED_BREAKDOWN_INDEFINITE_MATRIX : PKRYLOV_DIVERGED_NAN,
               (int)S[PK_CG_IT] + 1);
    return;
  }
  S[PK_CG_ALPHA] = S[PK_CG_RHO] / sigma;
}

/** PK_KSS_CG_ITER: the sums of the preconditioner loop; iteration IT + 1 is done once x += alpha p. */
PK_HD static inline void pk_kss_cg_iter_(double *S, int arg) {
  (void)arg;
  S[PK_CG_TAKE] = 0.0;
  if (!pk_ks_running(S)) return;
  const double rz = S[PK_CG_RZ], rr = S[PK_CG_RR];
  if (!isfinite(rz) || !isfinite(rr)) { /* x is still the previous iterate */
    pk_ks_stop(S, PKRYLOV_DIVERGED_NAN, (int)S[PK_CG_IT] + 1);
    return;
  }
  const int it = (int)S[PK_CG_IT] + 1;
  S[PK_CG_IT] = (double)it;
  S[PK_CG_LAST_RR] = rr;
  pk_ks_record(S, it, sqrt(rr));
  pk_pcg_track_min(S, PK_CG_MIN_ON, PK_CG_TAKE, it, rr, 0); /* every iterate, the last included */
  if (pk_ks_test_rr(S, it, rr)) return;
  if (!pk_ks_sign_ok(rz, &S[PK_CG_RHO_SIGN])) {
    pk_ks_stop(S, PKRYLOV_DIVERGED_BREAKDOWN_INDEFINITE_PRECOND, it + 1);
    return;
  }
  if (it >= S[PK_CG_MAXIT]) {
    pk_ks_stop(S, PKRYLOV_DIVERGED_MAX_ITERATIONS, it);
    return;
  }
  S[PK_CG_BETA] = rz / S[PK_CG_RHO];
  S[PK_CG_RHO] = rz;
}

PK_HD static inline void pk_kss_cg_init(double *S, int arg) {
  pk_kss_cg_init_(S, arg);
  pk_cg_keep_coefs(S);
}
PK_HD static inline void pk_kss_cg_iter(double *S, int arg) {
  pk_kss_cg_iter_(S, arg);
  pk_cg_keep_coefs(S);
}

/** PK_KSS_PCG_START: a (re)start from x (arg 1) or the first (arg 0); its sums come with the next SUMS. */
PK_HD static inline void pk_kss_pcg_start(double *S, int arg) {
  S[PK_KS_STOP] = 0.0;
  S[PK_KS_STOP_IT] = 0.0;
  if (arg == 0) {
    S[PK_PCG_IT] = 0.0;
    S[PK_KS_ITS] = -1.0;
    S[PK_PCG_MIN_IT] = -1.0;
    S[PK_PCG_ALPHA_OLD] = S[PK_PCG_BETA] = S[PK_PCG_GAMMA_OLD] = 0.0;
  }
  S[PK_PCG_RHO_SIGN] = S[PK_PCG_SIGMA_SIGN] = 0.0;
  S[PK_PCG_FIRST] = 1.0;
  S[PK_PCG_TAKE] = S[PK_PCG_SUSPECT] = S[PK_PCG_REPLACE] = 0.0;
  S[PK_PCG_KEEP] = 1.0;
  S[PK_PCG_EST + PK_PE_FRESH] = 1.0;
}

/** PK_KSS_PCG_SUMS: the reduction after a (re)start, a replacement or the fused update of iteration IT. */
PK_HD static inline void pk_kss_pcg_sums_(double *S, int arg) {
  (void)arg;
  S[PK_PCG_TAKE] = S[PK_PCG_REPLACE] = 0.0;
  if (!pk_ks_running(S)) return;
  const int it = (int)S[PK_PCG_IT], first = S[PK_PCG_FIRST] != 0.0;
  const double gamma = S[PK_PCG_GAMMA], delta = S[PK_PCG_DELTA], rr = S[PK_PCG_RR], rnorm = sqrt(rr);
  if (!isfinite(gamma) || !isfinite(delta) || !isfinite(rnorm)) { /* x is the last good iterate */
    pk_ks_stop(S, PKRYLOV_DIVERGED_NAN, it + 1);
    return;
  }
  if (S[PK_PCG_AUTO] != 0.0) {
    pk_rr_est e;
    pk_pcg_est_load(S, PK_PCG_EST, &e);
    const int replace = pk_rr_step(&e, &S[PK_PCG_GAMMA], S[PK_PCG_ALPHA_OLD], S[PK_PCG_BETA]);
    pk_pcg_est_store(S, PK_PCG_EST, &e);
    if (replace && it < S[PK_PCG_MAXIT]) { /* the driver replaces; iteration it goes on from the new sums */
      S[PK_PCG_REPLACE] = 1.0;
      pk_ks_stop(S, PK_KS_REPLACE, it);
      return;
    }
  }
  S[PK_PCG_LAST_RR] = rr;
  pk_pcg_track_min(S, PK_PCG_MIN_ON, PK_PCG_TAKE, it, rr, first); /* x is iterate it */
  if (!first || it == 0) {
    pk_ks_record(S, it, rnorm);
    if (pk_ks_test_rr(S, it, rr)) return;
  } else { /* a restart records nothing; its residual is the iterate's last (the recurrence rule's final) */
    pk_ks_ring_put(S, it, rnorm);
  }
  if (it >= S[PK_PCG_MAXIT]) {
    pk_ks_stop(S, PKRYLOV_DIVERGED_MAX_ITERATIONS, it);
    return;
  }
  /* gamma = (r, M^-1 r); sigma = delta - beta gamma / alpha_old = (p, A p) */
  if (!pk_ks_sign_ok(gamma, &S[PK_PCG_RHO_SIGN])) {
    pk_ks_stop(S, PKRYLOV_DIVERGED_BREAKDOWN_INDEFINITE_PRECOND, it + 1);
    return;
  }
  const double beta = first ? 0.0 : gamma / S[PK_PCG_GAMMA_OLD];
  const double sigma = first ? delta : delta - beta * gamma / S[PK_PCG_ALPHA_OLD];
  S[PK_PCG_BETA] = beta;
  if (!pk_ks_sign_ok(sigma, &S[PK_PCG_SIGMA_SIGN])) {
    S[PK_PCG_SUSPECT] = !first && isfinite(sigma) ? 1.0 : 0.0;
    pk_ks_stop(S, isfinite(sigma) ? PKRYLOV_DIVERGED_BREAKDOWN_INDEFINITE_MATRIX : PKRYLOV_DIVERGED_NAN,
               it + 1);
    return;
  }
  const double alpha = gamma / sigma;
  S[PK_PCG_ALPHA] = alpha;
  S[PK_PCG_GAMMA_OLD] = gamma;
  S[PK_PCG_ALPHA_OLD] = alpha;
  S[PK_PCG_FIRST] = 0.0;
  S[PK_PCG_IT] = (double)(it + 1); /* the fused update that follows completes iteration it + 1 */
}

PK_HD static inline void pk_kss_pcg_sums(double *S, int arg) {
  pk_kss_pcg_sums_(S, arg);
  S[PK_PCG_KEEP] = S[PK_PCG_TAKE] != 0.0 ? 0.0 : 1.0;
}

/** Dispatch for this family's ids; -1 for an unknown id. */
PK_HD static inline int pk_kss_pcg(int id, double *S, int arg) {
  switch (id) {
  case PK_KSS_CG_INIT: pk_kss_cg_init(S, arg); return 0;
  case PK_KSS_CG_ITER: pk_kss_cg_iter(S, arg); return 0;
  case PK_KSS_CG_SIGMA: pk_kss_cg_sigma(S, arg); return 0;
  case PK_KSS_PCG_START: pk_kss_pcg_start(S, arg); return 0;
  case PK_KSS_PCG_SUMS: pk_kss_pcg_sums(S, arg); return 0;
  default: return -1;
  }
}

#endif

/**
 * @file pk_rr.h
 * @brief The automatic residual replacement of pipelined CG (pkrylov_solver_set_residual_replacement(s,
 *        PKRYLOV_REPLACE_AUTO), the default), shared by the CPU driver (solver.c) and the device scalar
 *        step (pk_cuda_scalar.cuh): one estimate and one decision, so both backends replace at the same
 *        iterations.
 *
 * After Cools, Yetkin, Agullo, Giraud and Vanroose (SIAM J. Matrix Anal. Appl. 39(1), 2018), whose test is
 * Van der Vorst and Ye's (SIAM J. Sci. Comput. 22(3), 2000). Pipelined CG carries four vectors by
 * recurrence, and in finite precision they drift from their definitions: the gaps f = b - A x - r,
 * g = A p - s, h = A u - w and j = A q - z. One iteration (step alpha, beta; n = A m computed) changes
 * them by
 *
 *     j' = beta j + (A m - n) + (rounding of the q, z updates)
 *     g' = h + beta g + (rounding of the p, s updates)
 *     f' = f - alpha g' + (rounding of the x, r updates)
 *     h' = h - alpha j' + (rounding of the u, w updates)
 *
 * The estimate bounds the gaps' norms by these recurrences with absolute values, each rounding by the unit
 * roundoff eps times the norms of the operands: a vector update v + c y is within eps (|v| + 2 |c| |y|) of
 * the exact one, a product A y within mu eps ||A|| |y| (mu: the most nonzeros of a row), and A applied to a
 * rounding error within ||A|| times its bound. The norms of x, p, u, q ride in the iteration's one global
 * reduction next to its three dots (PK_RR_NV sums in all); those of s = A p, w = A u, z = A q and n = A m are
 * bounded by ||A|| times those of p, u, q, m, and |m| <= |q| + |beta| |q_old| (q = m + beta q_old), so they
 * need no sums of their own:
 *
 *     j' = |beta| j + eps ||A|| ((mu + 2) |m| + 4 |beta| |q_old|)
 *     g' = h + |beta| g + eps ||A|| (2 |u| + 4 |beta| |p|)
 *     f' = f + |alpha| g' + eps (||A|| (|x| + 4 |alpha| |p|) + |r|)
 *     h' = h + |alpha| j' + eps ||A|| (2 |u| + 4 |alpha| |q|)
 *
 * where |x|, |r|, |u| are the new vectors' norms, |p|, |q| those of the step's directions. A
 * replacement computes r = b - A x, u = M^-1 r, w = A u, s = A p, q = M^-1 s, z = A q; the gaps then start
 * again from the rounding of those products: f = eps ((mu + 1) ||A|| |x| + ||b||), g = mu eps ||A|| |p|,
 * h = mu eps ||A|| |u|, j = mu eps ||A|| |q|. The test: replace when c f crosses tau |r|, tau = sqrt(eps),
 * from below (c f <= tau |r| at the previous iteration, c f > tau |r| now). A replacement while the gap is
 * still small against the residual does not disturb the convergence; once c f stays above tau |r| (the
 * residual has fallen to about sqrt(eps) times the rounding of b - A x) no more replacements come.
 *
 * Calibration c: the bounds are worst cases of norms. On these operators they exceed the gaps by a factor
 * that is about the same for all four and all iterations of a solve (measured, thin shell 48 x 40 x 24:
 * 700 to 1000; the 3-D basin of legacy_examples/mitgcm_style: 50 to 150), so with c = 1 the test fires in
 * the first iterations only and, the reset value then staying above tau |r|, never again: the thin shell
 * took 134 iterations against CG's 128, at rtol 1e-12 (128 x 128 x 32) 370 against 270. A replacement
 * knows the gap it closes: ||r_new - r_old|| (one global sum, the driver's, pk_rr_est.gap), and c = that gap
 * / the f that triggered it (within [PK_RR_SCALE_MIN, PK_RR_SCALE_MAX]), until the next replacement; c = 1
 * before the first one. With it both problems take CG's iterations with 3 or 4 replacements
 * (docs/design.md).
 *
 * Cools et al. bound a product's rounding by mu sqrt(n) eps ||A|| |y| (the worst case of || |A| |y| ||
 * against ||A|| |y|); with sqrt(n) the reset value alone passes tau |r| early on large grids and the rule
 * stops replacing too soon (on the 3-D basin of legacy_examples/mitgcm_style, 64 x 48 x 15 at 1e-13: 211
 * iterations against CG's 200; without it 200). ||A|| is 2 max |a_ii| over the rows, from the operator's
 * diagonal (pk_rr_init: the rank's pass over the operator once per coefficients, kept by the solver until
 * an update changes them; the maximum over the ranks at each solve): for the symmetric definite matrices pipelined CG works
 * on |a_ij| <= max |a_ii|, and ||A||_2 <= 2 max |a_ii| when the rows are diagonally dominant, as the pressure
 * operators of these models are; exact and order-free, so every rank and backend gets the same value.
 * Operators without entries (user routines) take the largest Rayleigh quotient |(w, u)| / (u, u) seen in
 * the solve, a lower bound of ||A||_2.
 *
 * The functions are `static inline`, `__host__ __device__` for the CUDA compiler.
 */
#ifndef PK_RR_H
#define PK_RR_H

#include <math.h>
#include <stdint.h>

#if defined(__CUDACC__)
#define PK_RR_HD __host__ __device__
#else
#define PK_RR_HD
#endif

/**
 * Sums of pipelined CG's one reduction with the automatic rule, in this order: (r, u), (w, u), (r, r), then
 * (x, x), (p, p), (u, u), (q, q) of the vectors the fused update (or a replacement) wrote. Other settings sum
 * the first PK_RR_NV_BASE only.
 */
#define PK_RR_NV 7
#define PK_RR_NV_BASE 3

/** The estimate (part of the CUDA device state: doubles and 32-bit integers only). */
typedef struct {
  double f, g, h, j; /* bounds of the gaps b - A x - r, A p - s, A u - w, A q - z */
  double anorm;      /* ||A||: 2 max |a_ii|, or 0: the running Rayleigh quotient ray */
  double ray;        /* operators without entries: the largest |(w, u)| / (u, u) so far */
  double bnorm;      /* ||b|| (wet cells) */
  double mu;         /* the most nonzeros of a row */
  double nq;         /* |q| of the last iteration (the bound of |m|) */
  double scale;      /* the calibration c: measured gap / f at the last replacement decision (1 before one) */
  double gap;        /* set by the driver after a replacement the rule decided: ||r_new - r_old|| (else -1) */
  int32_t below;     /* 1: f <= tau |r| at the last iteration */
  int32_t fresh;     /* 1: the next sums are those of a (re)start or replacement: reset, no decision */
} pk_rr_est;

/** Unit roundoff of double precision (2^-53) and the threshold tau = sqrt(eps). */
#define PK_RR_EPS 1.1102230246251565e-16
#define PK_RR_TAU 1.0536712127723509e-08
/** Bounds of the calibration (a gap measured as 0, or bounds far off, keep the rule working). */
#define PK_RR_SCALE_MIN 1e-8
#define PK_RR_SCALE_MAX 1e8

/** A fresh estimate: ||A|| = anorm (0: the Rayleigh quotient), mu, ||b||; reset by the first sums. */
static inline PK_RR_HD void pk_rr_start(pk_rr_est *e, double anorm, double mu, double bnorm) {
  e->f = e->g = e->h = e->j = e->ray = e->nq = 0.0;
  e->anorm = anorm, e->mu = mu, e->bnorm = bnorm;
  e->scale = 1.0, e->gap = -1.0;
  e->below = 0, e->fresh = 1;
}

/** The ||A|| of the estimate, after the sums v (PK_RR_NV values) of this iteration. */
static inline PK_RR_HD double pk_rr_anorm(pk_rr_est *e, const double *v) {
  if (e->anorm > 0.0) return e->anorm;
  if (v[5] > 0.0 && isfinite(v[1])) {
    const double q = fabs(v[1]) / v[5];
    if (q > e->ray) e->ray = q;
  }
  return e->ray;
}

/** Start again from the sums v of a (re)start or replacement (the vectors computed explicitly); after a
 *  replacement the rule decided (gap >= 0), calibrate first (e->f still holds the f of the decision). */
static inline PK_RR_HD void pk_rr_reset(pk_rr_est *e, const double *v) {
  const double a = pk_rr_anorm(e, v), eps = PK_RR_EPS, mu = e->mu;
  const double nr = sqrt(v[2]), nx = sqrt(v[3]), np = sqrt(v[4]), nu = sqrt(v[5]), nq = sqrt(v[6]);
  if (e->gap >= 0.0 && e->f > 0.0) {
    const double c = e->gap / e->f;
    e->scale = c < PK_RR_SCALE_MIN ? PK_RR_SCALE_MIN : c > PK_RR_SCALE_MAX ? PK_RR_SCALE_MAX : c;
  }
  e->gap = -1.0;
  e->f = eps * ((mu + 1.0) * a * nx + e->bnorm);
  e->g = mu * eps * a * np;
  e->h = mu * eps * a * nu;
  e->j = mu * eps * a * nq;
  e->nq = nq;
  e->below = e->scale * e->f <= PK_RR_TAU * nr;
  e->fresh = 0;
}

/**
 * One iteration: the sums v (PK_RR_NV values, finite) after the update with alpha, beta; a fresh estimate is
 * reset from them instead. Returns 1 when the vectors must be replaced now: the caller replaces, sets gap to
 * the norm of the change of r and fresh (the replacement's sums then calibrate and reset the estimate).
 */
static inline PK_RR_HD int pk_rr_step(pk_rr_est *e, const double *v, double alpha, double beta) {
  if (e->fresh) {
    pk_rr_reset(e, v);
    return 0;
  }
  const double A = pk_rr_anorm(e, v), eps = PK_RR_EPS, mu = e->mu;
  const double nr = sqrt(v[2]), nx = sqrt(v[3]), np = sqrt(v[4]), nu = sqrt(v[5]), nq = sqrt(v[6]);
  const double a = fabs(alpha), b = fabs(beta), nm = nq + b * e->nq;
  e->j = b * e->j + eps * A * ((mu + 2.0) * nm + 4.0 * b * e->nq);
  e->nq = nq;
  e->g = e->h + b * e->g + eps * A * (2.0 * nu + 4.0 * b * np);
  e->f = e->f + a * e->g + eps * (A * (nx + 4.0 * a * np) + nr);
  e->h = e->h + a * e->j + eps * A * (2.0 * nu + 4.0 * a * nq);
  const int below = e->scale * e->f <= PK_RR_TAU * nr;
  const int replace = e->below && !below;
  e->below = below;
  return replace;
}

#endif

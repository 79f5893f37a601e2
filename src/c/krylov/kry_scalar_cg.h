/**
 * @file kry_scalar_cg.h
 * @brief Scalar steps of single-reduction CG (srcg.c; see kry_scalar.h for the rules).
 *
 * Chronopoulos and Gear (1989), in the form of d'Azevedo, Eijkhout and Romine (LAPACK Working Note 56) that
 * MITgcm's CG2D_SR uses: after the vector update of iteration k (x_k, r_k), z = M^-1 r_k and v = A z, and one
 * global reduction gives eta = (z, r), delta = (z, v) and rr = (r, r). Then rr is iteration k's residual
 * (tested first), beta = eta / eta_old and the curvature of the next direction s = z + beta s comes from the
 * recurrence (s, A s) = delta - beta^2 (s_old, A s_old), so alpha = eta / (s, A s) needs no second sum.
 *
 * Breakdowns as CG's (solver.c): eta = (r, M^-1 r) and the curvature must keep the sign of their first value
 * (negative definite operators, as ocean models store them, solve) and be nonzero; a recurrence curvature
 * that loses its sign sets PK_SR_SUSPECT, and the driver computes the true curvature before it calls it a
 * breakdown (the recurrence can lose the sign to rounding near the attainable accuracy). NaN or Inf in a sum:
 * PKRYLOV_DIVERGED_NAN.
 *
 * Minimum-residual iterate (PK_SR_MIN_ON, MITgcm's cg2dUseMinResSol): the start keeps x (the driver copies
 * it) with its rr; an iteration whose rr is strictly below the minimum sets TAKE = 1, KEEP = 0, so the next
 * vector update copies x_k into x_min (x_min = KEEP x_min + TAKE x, applied before x moves on), else
 * TAKE = 0, KEEP = 1 (x_min unchanged). Once stopped every step sets ALPHA = 0, TAKE = 0, KEEP = 1: the rest
 * of a block changes neither x nor x_min.
 */
#ifndef PK_KRY_SCALAR_CG_H
#define PK_KRY_SCALAR_CG_H

/** Scalars of single-reduction CG, after the common header. */
enum {
  PK_SR_ETA = PK_KS_DRIVER, /* the reduction: (z, r) */
  PK_SR_DELTA,              /*                (z, A z) */
  PK_SR_RR,                 /*                (r, r) */
  PK_SR_ETA_OLD,            /* eta of the previous iteration */
  PK_SR_DEN,                /* (s, A s) of the current direction */
  PK_SR_ALPHA,              /* eta / den: the coefficient of s (x) and of q (r); 0 once stopped */
  PK_SR_BETA,               /* eta / eta_old: the coefficient of the old s and q; 0 at a start */
  PK_SR_ETA_SIGN,           /* 0 until fixed by the first value, then +-1 */
  PK_SR_DEN_SIGN,
  PK_SR_SUSPECT,            /* 1: the stop is a recurrence curvature that lost its sign */
  PK_SR_CURV,               /* the driver's direct curvature (t, A t), t = z + beta s */
  PK_SR_LAST_RR,            /* (r, r) of the iterate x holds */
  PK_SR_MIN_ON,             /* 1: track the minimum-residual iterate (written by the driver) */
  PK_SR_MIN_RR,             /* the smallest rr so far */
  PK_SR_MIN_IT,             /* its iteration (-1 before any) */
  PK_SR_KEEP,               /* x_min = KEEP x_min + TAKE x in the next update */
  PK_SR_TAKE,
  PK_SR_NSCALARS            /* count (the header included) */
};

enum {
  PK_KSS_SR_INIT = 400, /* arg 0: first start (records iteration 0), 1: restart from x */
  PK_KSS_SR_ITER = 401  /* arg k: the reduction of iteration k */
};

/** Sign bookkeeping as CG's (solver.c pk_sign_ok): v finite, nonzero, of the sign fixed by the first. */
PK_HD static inline int pk_ks_sign_ok(double v, double *sign) {
  if (!isfinite(v) || v == 0.0) return 0;
  const double sg = v > 0 ? 1.0 : -1.0;
  if (*sign == 0.0) *sign = sg;
  return sg == *sign;
}

/** Stop with reason at iteration it; nothing moves in the rest of the block. */
PK_HD static inline void pk_sr_stop(double *S, int reason, int it) {
  pk_ks_stop(S, reason, it);
  S[PK_SR_ALPHA] = 0.0;
}

/** The coefficients after a sign check of eta and a curvature den of iteration it (next: it + 1). */
PK_HD static inline void pk_sr_coefficients(double *S, int it, double eta, double beta, double den,
                                            int recur) {
  if (!pk_ks_sign_ok(eta, &S[PK_SR_ETA_SIGN])) {
    pk_sr_stop(S, PKRYLOV_DIVERGED_BREAKDOWN_INDEFINITE_PRECOND, it + 1);
    return;
  }
  if (!pk_ks_sign_ok(den, &S[PK_SR_DEN_SIGN])) {
    S[PK_SR_SUSPECT] = recur && isfinite(den) ? 1.0 : 0.0;
    S[PK_SR_BETA] = beta; /* for the driver's direct curvature */
    pk_sr_stop(S, isfinite(den) ? PKRYLOV_DIVERGED_BREAKDOWN_INDEFINITE_MATRIX : PKRYLOV_DIVERGED_NAN,
               it + 1);
    return;
  }
  S[PK_SR_BETA] = beta;
  S[PK_SR_DEN] = den;
  S[PK_SR_ETA_OLD] = eta;
  S[PK_SR_ALPHA] = eta / den;
}

/** PK_KSS_SR_INIT: r = b - A x, z = M^-1 r, v = A z and their sums of a (re)start. */
PK_HD static inline void pk_kss_sr_init(double *S, int arg) {
  S[PK_KS_STOP] = 0.0;
  S[PK_KS_STOP_IT] = 0.0;
  if (arg == 0) S[PK_KS_ITS] = 0.0;
  S[PK_SR_ETA_SIGN] = S[PK_SR_DEN_SIGN] = 0.0;
  S[PK_SR_ALPHA] = S[PK_SR_BETA] = S[PK_SR_SUSPECT] = 0.0;
  S[PK_SR_KEEP] = 1.0;
  S[PK_SR_TAKE] = 0.0;
  const int it = (int)S[PK_KS_ITS];
  const double rr = S[PK_SR_RR], eta = S[PK_SR_ETA], delta = S[PK_SR_DELTA];
  if (!isfinite(rr)) {
    pk_sr_stop(S, PKRYLOV_DIVERGED_NAN, it + 1);
    return;
  }
  S[PK_SR_LAST_RR] = rr;
  if (arg == 0) pk_ks_record(S, 0, sqrt(rr));
  if (S[PK_SR_MIN_ON] != 0.0) { /* the driver has copied x: a (re)start keeps it unconditionally */
    S[PK_SR_MIN_RR] = rr;
    S[PK_SR_MIN_IT] = (double)it;
  }
  if (pk_ks_test_rr(S, it, rr)) return;
  if (!isfinite(eta) || !isfinite(delta)) {
    pk_sr_stop(S, PKRYLOV_DIVERGED_NAN, it + 1);
    return;
  }
  pk_sr_coefficients(S, it, eta, 0.0, delta, 0); /* s = z: (s, A s) = delta directly */
}

/** PK_KSS_SR_ITER, arg k: x and r are iterate k; the sums of r_k, z = M^-1 r_k, v = A z. */
PK_HD static inline void pk_kss_sr_iter(double *S, int k) {
  S[PK_SR_KEEP] = 1.0;
  S[PK_SR_TAKE] = 0.0;
  if (!pk_ks_running(S)) {
    S[PK_SR_ALPHA] = 0.0;
    return;
  }
  const double rr = S[PK_SR_RR], eta = S[PK_SR_ETA], delta = S[PK_SR_DELTA];
  if (!isfinite(rr)) {
    S[PK_KS_ITS] = (double)k; /* x was updated in this iteration */
    S[PK_SR_LAST_RR] = rr;    /* (the minimum-residual iterate, when kept, is returned) */
    pk_sr_stop(S, PKRYLOV_DIVERGED_NAN, k);
    return;
  }
  S[PK_SR_LAST_RR] = rr;
  pk_ks_record(S, k, sqrt(rr));
  if (S[PK_SR_MIN_ON] != 0.0 && rr < S[PK_SR_MIN_RR]) { /* every iterate, the last included */
    S[PK_SR_MIN_RR] = rr;
    S[PK_SR_MIN_IT] = (double)k;
    S[PK_SR_KEEP] = 0.0;
    S[PK_SR_TAKE] = 1.0;
  }
  if (pk_ks_test_rr(S, k, rr)) {
    S[PK_SR_ALPHA] = 0.0;
    return;
  }
  if (!isfinite(eta) || !isfinite(delta)) {
    pk_sr_stop(S, PKRYLOV_DIVERGED_NAN, k + 1);
    return;
  }
  const double beta = eta / S[PK_SR_ETA_OLD];
  pk_sr_coefficients(S, k, eta, beta, delta - (beta * beta) * S[PK_SR_DEN], 1);
}

/** Dispatch for this family's ids; -1 for an unknown id. */
PK_HD static inline int pk_kss_cg(int id, double *S, int arg) {
  switch (id) {
  case PK_KSS_SR_INIT: pk_kss_sr_init(S, arg); return 0;
  case PK_KSS_SR_ITER: pk_kss_sr_iter(S, arg); return 0;
  default: return -1;
  }
}

#endif

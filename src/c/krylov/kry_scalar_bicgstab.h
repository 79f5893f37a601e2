/**
 * @file kry_scalar_bicgstab.h
 * @brief Scalar steps of BiCGStab and pipelined BiCGStab (bicgstab.c; see kry_scalar.h for the rules).
 *
 * Every step of iteration k gets arg = k (1-based). A step tests what it computed (NaN, breakdown,
 * convergence), stops the iteration through pk_ks_stop() and, once stopped, sets the coefficients of the
 * updates that follow to 0, so the rest of a block of iterations leaves x at the last good iterate.
 */
#ifndef PK_KRY_SCALAR_BICGSTAB_H
#define PK_KRY_SCALAR_BICGSTAB_H

/* ---- BiCGStab (classical, right preconditioned) -------------------------------------------------- */

/** Scalars of BiCGStab, after the common header. */
enum {
  PK_BS_RHO = PK_KS_DRIVER, /* (r0*, r) of the current r */
  PK_BS_SIG,                /* (r0*, v), v = A p^ */
  PK_BS_ALPHA,              /* rho / sig; the coefficient of p^ in the x update */
  PK_BS_SS,                 /* (s, s) */
  PK_BS_TS,                 /* (t, s), t = A s^ */
  PK_BS_TT,                 /* (t, t) */
  PK_BS_OMEGA,              /* (t, s) / (t, t); the coefficient of s^ in the x update */
  PK_BS_RHONEW,             /* (r0*, r) of the new r */
  PK_BS_RR,                 /* (r, r) */
  PK_BS_BETA,               /* (rho_new / rho) (alpha / omega) */
  PK_BS_BW,                 /* beta * omega */
  PK_BS_NSCALARS            /* count (the header included) */
};

enum {
  PK_KSS_BCG_INIT = 100,   /* arg 0: first start (records iteration 0), 1: restart. S[RR] = (r, r) */
  PK_KSS_BCG_ALPHA = 101,  /* alpha = rho / (r0*, v) */
  PK_KSS_BCG_SCHECK = 102, /* ||s|| small: converged with x += alpha p^ */
  PK_KSS_BCG_OMEGA = 103,  /* omega = (t, s) / (t, t) */
  PK_KSS_BCG_BETA = 104    /* convergence test on ||r||; beta; rho = rho_new */
};

PK_HD static inline void pk_kss_bcg_init(double *S, int arg) {
  if (arg == 0) { /* a new solve: the frame cleared the header */
    S[PK_KS_STOP] = 0.0;
    S[PK_KS_STOP_IT] = 0.0;
    S[PK_KS_ITS] = 0.0;
  } else { /* a restart from the current x after an unconfirmed convergence */
    S[PK_KS_STOP] = 0.0;
    S[PK_KS_STOP_IT] = 0.0;
  }
  S[PK_BS_RHO] = S[PK_BS_RR]; /* r0* = r */
  S[PK_BS_ALPHA] = 0.0;
  S[PK_BS_OMEGA] = 0.0;
  S[PK_BS_BETA] = 0.0;
  S[PK_BS_BW] = 0.0;
  const int it = (int)S[PK_KS_ITS];
  const double res = sqrt(S[PK_BS_RR]);
  if (arg == 0) pk_ks_record(S, 0, res);
  pk_ks_test_rr(S, it + 1, S[PK_BS_RR]);
}

PK_HD static inline void pk_kss_bcg_alpha(double *S, int k) {
  S[PK_BS_ALPHA] = 0.0;
  if (!pk_ks_running(S)) return;
  const double sig = S[PK_BS_SIG];
  if (!isfinite(sig)) {
    pk_ks_stop(S, PKRYLOV_DIVERGED_NAN, k);
    return;
  }
  if (sig == 0.0) {
    pk_ks_stop(S, PKRYLOV_DIVERGED_BREAKDOWN_SHADOW, k);
    return;
  }
  const double a = S[PK_BS_RHO] / sig;
  if (!isfinite(a)) {
    pk_ks_stop(S, PKRYLOV_DIVERGED_NAN, k);
    return;
  }
  S[PK_BS_ALPHA] = a;
}

PK_HD static inline void pk_kss_bcg_scheck(double *S, int k) {
  if (!pk_ks_running(S)) return;
  const double ss = S[PK_BS_SS];
  if (!isfinite(ss)) {
    pk_ks_stop(S, PKRYLOV_DIVERGED_NAN, k);
    S[PK_BS_ALPHA] = 0.0;
    return;
  }
  if (pk_ks_test_rr(S, k, ss) > 0) /* the classical early exit: x_k = x + alpha p^, r_k = s */
    pk_ks_record(S, k, sqrt(ss));
}

PK_HD static inline void pk_kss_bcg_omega(double *S, int k) {
  S[PK_BS_OMEGA] = 0.0;
  if (!pk_ks_running(S)) return; /* alpha stays for the early exit of this iteration */
  const double ts = S[PK_BS_TS], tt = S[PK_BS_TT];
  int reason = 0;
  double w = 0.0;
  if (!isfinite(ts) || !isfinite(tt)) {
    reason = PKRYLOV_DIVERGED_NAN;
  } else if (tt == 0.0) {
    reason = PKRYLOV_DIVERGED_BREAKDOWN_OMEGA;
  } else {
    w = ts / tt;
    if (!isfinite(w)) reason = PKRYLOV_DIVERGED_NAN;
    else if (w == 0.0) reason = PKRYLOV_DIVERGED_BREAKDOWN_OMEGA;
  }
  if (reason) {
    pk_ks_stop(S, reason, k);
    S[PK_BS_ALPHA] = 0.0; /* x stays the iterate of iteration k-1 */
    return;
  }
  S[PK_BS_OMEGA] = w;
}

PK_HD static inline void pk_kss_bcg_beta(double *S, int k) {
  S[PK_BS_BETA] = 0.0;
  S[PK_BS_BW] = 0.0;
  if (!pk_ks_running(S)) return;
  const double rr = S[PK_BS_RR], rhon = S[PK_BS_RHONEW];
  const double res = sqrt(rr);
  if (!isfinite(rhon) || !isfinite(rr)) {
    pk_ks_stop(S, PKRYLOV_DIVERGED_NAN, k);
    S[PK_KS_ITS] = (double)k; /* x was updated in this iteration */
    return;
  }
  pk_ks_record(S, k, res);
  if (pk_ks_test_rr(S, k, rr)) return;
  if (rhon == 0.0) { /* iteration k+1 cannot be formed */
    pk_ks_stop(S, PKRYLOV_DIVERGED_BREAKDOWN_RHO, k + 1);
    return;
  }
  const double beta = (rhon / S[PK_BS_RHO]) * (S[PK_BS_ALPHA] / S[PK_BS_OMEGA]);
  if (!isfinite(beta)) {
    pk_ks_stop(S, PKRYLOV_DIVERGED_NAN, k + 1);
    return;
  }
  S[PK_BS_RHO] = rhon;
  S[PK_BS_BETA] = beta;
  S[PK_BS_BW] = beta * S[PK_BS_OMEGA];
}

/* ---- pipelined BiCGStab (Cools-Vanroose, right preconditioned) ------------------------------------- */

/** Scalars of pipelined BiCGStab, after the common header. */
enum {
  PK_PB_RHO = PK_KS_DRIVER, /* (r0*, r_i) */
  PK_PB_ALPHA,              /* alpha_i; the coefficient of p^ in the x update */
  PK_PB_OMEGA,              /* omega_i; the coefficient of q^ */
  PK_PB_BETA,               /* beta_{i-1} */
  PK_PB_BW,                 /* beta omega */
  PK_PB_OA,                 /* omega alpha */
  PK_PB_QY,                 /* phase 1: (q, y) */
  PK_PB_YY,                 /*          (y, y) */
  PK_PB_QQ,                 /*          (q, q) (early exit) */
  PK_PB_RSS,                /*          (r0*, s) */
  PK_PB_RSZ,                /*          (r0*, z) */
  PK_PB_RHONEW,             /* phase 2: (r0*, r_{i+1}) */
  PK_PB_RSW,                /*          (r0*, w_{i+1}) */
  PK_PB_RR,                 /*          (r_{i+1}, r_{i+1}) */
  PK_PB_NSCALARS
};

enum {
  PK_KSS_PBCG_INIT = 110,  /* arg 0: first start, 1: restart; S[RHONEW], S[RSW], S[RR] of r_0, w_0 */
  PK_KSS_PBCG_OMEGA = 111, /* early exit on ||q||; omega = (q, y) / (y, y) */
  PK_KSS_PBCG_BETA = 112   /* convergence test on ||r||; beta, the next alpha */
};

PK_HD static inline void pk_kss_pbcg_init(double *S, int arg) {
  S[PK_KS_STOP] = 0.0;
  S[PK_KS_STOP_IT] = 0.0;
  if (arg == 0) S[PK_KS_ITS] = 0.0;
  S[PK_PB_OMEGA] = S[PK_PB_BETA] = S[PK_PB_BW] = S[PK_PB_OA] = S[PK_PB_ALPHA] = 0.0;
  S[PK_PB_RHO] = S[PK_PB_RHONEW];
  const int it = (int)S[PK_KS_ITS];
  const double res = sqrt(S[PK_PB_RR]);
  if (arg == 0) pk_ks_record(S, 0, res);
  if (pk_ks_test_rr(S, it + 1, S[PK_PB_RR])) return;
  const double rsw = S[PK_PB_RSW];
  if (!isfinite(rsw) || !isfinite(S[PK_PB_RHO])) {
    pk_ks_stop(S, PKRYLOV_DIVERGED_NAN, it + 1);
    return;
  }
  if (rsw == 0.0) {
    pk_ks_stop(S, PKRYLOV_DIVERGED_BREAKDOWN_SHADOW, it + 1);
    return;
  }
  S[PK_PB_ALPHA] = S[PK_PB_RHO] / rsw;
}

PK_HD static inline void pk_kss_pbcg_omega(double *S, int k) {
  S[PK_PB_OMEGA] = 0.0;
  S[PK_PB_OA] = 0.0;
  if (!pk_ks_running(S)) {
    S[PK_PB_ALPHA] = 0.0; /* stopped before: x stays */
    return;
  }
  const double qy = S[PK_PB_QY], yy = S[PK_PB_YY], qq = S[PK_PB_QQ];
  int reason = 0;
  double w = 0.0;
  if (!isfinite(qy) || !isfinite(yy) || !isfinite(qq)) {
    reason = PKRYLOV_DIVERGED_NAN;
  } else if (pk_ks_test_rr(S, k, qq) > 0) { /* early exit: x_k = x + alpha p^, r_k = q */
    pk_ks_record(S, k, sqrt(qq));
    return;
  } else if (yy == 0.0) {
    reason = PKRYLOV_DIVERGED_BREAKDOWN_OMEGA;
  } else {
    w = qy / yy;
    if (!isfinite(w)) reason = PKRYLOV_DIVERGED_NAN;
    else if (w == 0.0) reason = PKRYLOV_DIVERGED_BREAKDOWN_OMEGA;
  }
  if (reason) {
    pk_ks_stop(S, reason, k);
    S[PK_PB_ALPHA] = 0.0;
    return;
  }
  S[PK_PB_OMEGA] = w;
  S[PK_PB_OA] = w * S[PK_PB_ALPHA];
}

PK_HD static inline void pk_kss_pbcg_beta(double *S, int k) {
  S[PK_PB_BETA] = 0.0;
  S[PK_PB_BW] = 0.0;
  if (!pk_ks_running(S)) return;
  const double rr = S[PK_PB_RR], rhon = S[PK_PB_RHONEW], rsw = S[PK_PB_RSW];
  if (!isfinite(rr) || !isfinite(rhon) || !isfinite(rsw)) {
    pk_ks_stop(S, PKRYLOV_DIVERGED_NAN, k);
    S[PK_KS_ITS] = (double)k; /* x was updated in this iteration */
    return;
  }
  const double res = sqrt(rr);
  pk_ks_record(S, k, res);
  if (pk_ks_test_rr(S, k, rr)) return;
  if (rhon == 0.0) {
    pk_ks_stop(S, PKRYLOV_DIVERGED_BREAKDOWN_RHO, k + 1);
    return;
  }
  const double beta = (S[PK_PB_ALPHA] / S[PK_PB_OMEGA]) * (rhon / S[PK_PB_RHO]);
  /* (r0*, A p^_{i+1}) = (r0*, w_{i+1}) + beta (r0*, s_i) - beta omega (r0*, z_i) */
  const double den = rsw + beta * S[PK_PB_RSS] - beta * S[PK_PB_OMEGA] * S[PK_PB_RSZ];
  if (!isfinite(beta) || !isfinite(den)) {
    pk_ks_stop(S, PKRYLOV_DIVERGED_NAN, k + 1);
    return;
  }
  if (den == 0.0) {
    pk_ks_stop(S, PKRYLOV_DIVERGED_BREAKDOWN_SHADOW, k + 1);
    return;
  }
  S[PK_PB_BETA] = beta;
  S[PK_PB_BW] = beta * S[PK_PB_OMEGA];
  S[PK_PB_ALPHA] = rhon / den;
  S[PK_PB_RHO] = rhon;
}

/** Dispatch for this family's ids; -1 for an unknown id. */
PK_HD static inline int pk_kss_bicgstab(int id, double *S, int arg) {
  switch (id) {
  case PK_KSS_BCG_INIT: pk_kss_bcg_init(S, arg); return 0;
  case PK_KSS_BCG_ALPHA: pk_kss_bcg_alpha(S, arg); return 0;
  case PK_KSS_BCG_SCHECK: pk_kss_bcg_scheck(S, arg); return 0;
  case PK_KSS_BCG_OMEGA: pk_kss_bcg_omega(S, arg); return 0;
  case PK_KSS_BCG_BETA: pk_kss_bcg_beta(S, arg); return 0;
  case PK_KSS_PBCG_INIT: pk_kss_pbcg_init(S, arg); return 0;
  case PK_KSS_PBCG_OMEGA: pk_kss_pbcg_omega(S, arg); return 0;
  case PK_KSS_PBCG_BETA: pk_kss_pbcg_beta(S, arg); return 0;
  default: return -1;
  }
}

#endif

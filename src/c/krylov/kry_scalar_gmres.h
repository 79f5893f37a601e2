/**
 * @file kry_scalar_gmres.h
 * @brief Scalar steps of the gmres driver (GMRES(m), FGMRES(m), pipelined GMRES(m)); see kry_scalar.h
 * for the rules.
 *
 * Scalar layout: the frame's header (PK_KS_*, kry_scalar.h: tolerance, stop code and iteration, ITS, the
 * residual ring), then (m = restart, stored at S[PK_GM_M] so that the steps find the arrays):
 *   PK_GM_IT0      iterations done before this cycle (S[PK_KS_ITS] = IT0 + the valid columns)
 *   PK_GM_NVALID   columns of the Hessenberg matrix that are valid (the x update uses that many)
 *   PK_GM_RES      residual estimate |g_{j+1}| after the last valid column
 *   PK_GM_INV      the scale of the next basis vector (1 / its norm; 0 when there is none)
 *   PK_GM_RR       (r, r) of the residual that starts a cycle
 *   PK_GM_HSUB     pipelined GMRES: h_{i,i-1}, the norm of the unnormalised last basis vector
 *   PK_GM_M        m
 *   then arrays (offsets pk_gm_off()): HIST[m] residual estimate after each column of the cycle, CS[m],
 *   SN[m] the Givens rotations, G[m+1] the rotated right-hand side, Y[m] the least-squares solution,
 *   D1[m+2], D2[m+2] reduction results, H[(m+1)*m] the Hessenberg columns (rotated in place: the upper
 *   triangle is the R factor).
 */
#ifndef PK_KRY_SCALAR_GMRES_H
#define PK_KRY_SCALAR_GMRES_H

enum {
  PK_GM_IT0 = PK_KS_DRIVER + 0,
  PK_GM_NVALID = PK_KS_DRIVER + 1,
  PK_GM_RES = PK_KS_DRIVER + 2,
  PK_GM_INV = PK_KS_DRIVER + 3,
  PK_GM_RR = PK_KS_DRIVER + 4,
  PK_GM_HSUB = PK_KS_DRIVER + 5,
  PK_GM_M = PK_KS_DRIVER + 6,
  PK_GM_NFIXED = PK_KS_DRIVER + 8
};

/*
 * Stop codes (S[PK_KS_STOP], first stop wins): PKRYLOV_CONVERGED_RTOL when the residual estimate met the
 * tolerance or h_{j+1,j} = 0 (lucky breakdown: the Krylov space is invariant; with the recurrence stop
 * rule, where nothing confirms a convergence, PK_KS_CYCLE_END instead unless the estimate met it),
 * PKRYLOV_DIVERGED_NAN,
 * PKRYLOV_DIVERGED_BREAKDOWN_ORTHOGONALITY (pipelined GMRES: square root of a negative number; CA-GMRES:
 * Gram matrix not positive definite). After a stop every later step of the cycle returns at once, so the
 * operations queued behind it change nothing that the end of the cycle reads; a new cycle clears it.
 */

/** Step ids (200-299). */
enum {
  PK_KSS_GM_CYCLE_INIT = 200, /**< beta = sqrt(S[RR]), g = beta e1, INV = 1/beta, STOP = NVALID = 0 */
  PK_KSS_GM_ARNOLDI = 201,    /**< arg j: column j from the two CGS passes (D1, D2 with (w,w)) */
  PK_KSS_GM_PIPE_COLUMN = 202,/**< arg i >= 1: pipelined GMRES, column i-1 from the dots of z_i in D1 */
  PK_KSS_GM_SOLVE = 203       /**< arg k: Y = R^-1 G on the first k columns */
};

/** Offsets of the arrays for restart m. */
typedef struct {
  int hist, cs, sn, g, y, d1, d2, h, total;
} pk_gm_off_t;

PK_HD static inline pk_gm_off_t pk_gm_off(int m) {
  pk_gm_off_t o;
  o.hist = PK_GM_NFIXED;
  o.cs = o.hist + m;
  o.sn = o.cs + m;
  o.g = o.sn + m;
  o.y = o.g + m + 1;
  o.d1 = o.y + m;
  o.d2 = o.d1 + m + 2;
  o.h = o.d2 + m + 2;
  o.total = o.h + (m + 1) * m;
  return o;
}

/** sqrt(a^2 + b^2) without overflow or underflow of the squares. */
PK_HD static inline double pk_gm_hypot(double a, double b) {
  const double fa = fabs(a), fb = fabs(b);
  const double t = fa > fb ? fa : fb;
  if (t == 0.0) return 0.0;
  const double ra = fa / t, rb = fb / t;
  return t * sqrt(ra * ra + rb * rb);
}

/**
 * Column j of the Hessenberg matrix is in H[(m+1)*j + 0..j] and hsub = h_{j+1,j} is given: rotate it with
 * the earlier rotations, make rotation j, update g, record the residual estimate of iteration IT0 + j + 1
 * (ring, ITS, NVALID) and test it (convergence, lucky breakdown, NaN). Used by GMRES, FGMRES, pipelined
 * GMRES and CA-GMRES.
 */
PK_HD static inline void pk_gm_finish_column(double *S, int m, int j, double hsub) {
  const pk_gm_off_t o = pk_gm_off(m);
  const int it = (int)S[PK_GM_IT0] + j + 1;
  double *h = S + o.h + (m + 1) * j;
  double *cs = S + o.cs, *sn = S + o.sn, *g = S + o.g;
  int finite = isfinite(hsub);
  for (int i = 0; i <= j; i++) finite = finite && isfinite(h[i]);
  if (!finite) {
    pk_ks_stop(S, PKRYLOV_DIVERGED_NAN, it);
    return;
  }
  h[j + 1] = hsub;
  for (int i = 0; i < j; i++) {
    const double t = cs[i] * h[i] + sn[i] * h[i + 1];
    h[i + 1] = -sn[i] * h[i] + cs[i] * h[i + 1];
    h[i] = t;
  }
  const double a = h[j], b = h[j + 1];
  const double r = pk_gm_hypot(a, b);
  if (r == 0.0) { /* a singular column cannot reduce the residual: the cycle ends before it (the true
                     residual decides) */
    pk_ks_stop(S, pk_ks_cycle_end_code(S), it - 1);
    return;
  }
  cs[j] = a / r;
  sn[j] = b / r;
  h[j] = r;
  h[j + 1] = 0.0;
  g[j + 1] = -sn[j] * g[j];
  g[j] = cs[j] * g[j];
  const double res = fabs(g[j + 1]);
  if (!isfinite(res)) {
    pk_ks_stop(S, PKRYLOV_DIVERGED_NAN, it);
    return;
  }
  S[o.hist + j] = res;
  S[PK_GM_RES] = res;
  S[PK_GM_NVALID] = j + 1;
  pk_ks_record(S, it, res);
  if (pk_ks_test(S, it, res) == 0 && hsub == 0.0) pk_ks_stop(S, pk_ks_cycle_end_code(S), it);
}

/**
 * PK_KSS_GM_CYCLE_INIT: a new cycle from the residual r (its (r, r) in S[RR]): clears the stop code,
 * IT0 = ITS, beta = ||r||, g = beta e1, INV = 1/beta; the first cycle records iteration 0. beta at the
 * tolerance stops at once (converged, no column).
 */
PK_HD static inline void pk_gm_cycle_init(double *S) {
  const int m = (int)S[PK_GM_M];
  const pk_gm_off_t o = pk_gm_off(m);
  const double beta = sqrt(S[PK_GM_RR]);
  const int it0 = (int)S[PK_KS_ITS];
  S[PK_KS_STOP] = 0.0;
  S[PK_KS_STOP_IT] = 0.0;
  S[PK_GM_IT0] = it0;
  S[PK_GM_NVALID] = 0;
  S[PK_GM_RES] = beta;
  S[PK_GM_INV] = beta > 0.0 && isfinite(beta) ? 1.0 / beta : 0.0;
  S[PK_GM_HSUB] = 1.0;
  S[o.g] = beta;
  /* the ring entry of iteration it0 becomes the cycle's true residual (the host has read the entry of a
     later cycle's it0 before: the history keeps the estimate; the recurrence rule's final residual reads
     this one) */
  pk_ks_record(S, it0, beta);
  pk_ks_test(S, it0, beta);
}

/**
 * PK_KSS_GM_ARNOLDI, arg j: classical Gram-Schmidt with one reorthogonalisation. D1[0..j] = (v_i, w) of
 * the first pass, D2[0..j] = (v_i, w') of the second and D2[j+1] = (w', w') (w' = w after the first
 * pass). h_{i,j} = D1[i] + D2[i]; h_{j+1,j} = ||w' - V D2|| = sqrt((w', w') - sum D2[i]^2) (V orthonormal);
 * a norm at rounding level of ||A v_j|| is an invariant subspace (lucky breakdown, h_{j+1,j} = 0).
 */
PK_HD static inline void pk_gm_arnoldi(double *S, int j) {
  if (!pk_ks_running(S)) return;
  const int m = (int)S[PK_GM_M];
  const pk_gm_off_t o = pk_gm_off(m);
  double *h = S + o.h + (m + 1) * j;
  const double *d1 = S + o.d1, *d2 = S + o.d2;
  double ss = 0.0, hn = 0.0;
  for (int i = 0; i <= j; i++) {
    h[i] = d1[i] + d2[i];
    ss += d2[i] * d2[i];
    hn += h[i] * h[i];
  }
  const double hh = d2[j + 1] - ss;
  double hsub = hh > 0.0 ? sqrt(hh) : 0.0;
  if (!isfinite(hh)) hsub = hh; /* NaN/Inf: finish_column reports it */
  if (hsub <= 4.0 * 2.220446049250313e-16 * sqrt(hn + (hh > 0.0 ? hh : 0.0))) hsub = 0.0;
  S[PK_GM_INV] = hsub > 0.0 && isfinite(hsub) ? 1.0 / hsub : 0.0;
  pk_gm_finish_column(S, m, j, hsub);
}

/**
 * PK_KSS_GM_PIPE_COLUMN, arg i >= 1 (pipelined GMRES, Ghysels et al. 2013). On entry D1[0..i-1] =
 * (z_i, v_l) with v_0..v_{i-2} normalised and v_{i-1} not yet (its norm eta = h_{i-1,i-2} is S[HSUB], 1 for
 * i = 1), D1[i] = (z_i, z_i), z_i = A M^-1 v_{i-1} unnormalised. Scaling by 1/eta gives column i-1:
 * h_{l,i-1} = (z_i, v_l) and h_{i,i-1} = sqrt((z_i, z_i) - sum_l h_{l,i-1}^2); a radicand <= 0 (lost
 * orthogonality, or an invariant subspace within rounding) stops the cycle before column i-1 with
 * PKRYLOV_DIVERGED_BREAKDOWN_ORTHOGONALITY (the driver restarts from the true residual).
 * Sets INV = 1/eta (the driver scales v_{i-1}, z_i and w with it), D2[0..i-1] = the unrotated column (the
 * coefficients of the basis recurrences) and HSUB = h_{i,i-1}.
 */
PK_HD static inline void pk_gm_pipe_column(double *S, int i) {
  if (!pk_ks_running(S)) return;
  const int m = (int)S[PK_GM_M];
  const pk_gm_off_t o = pk_gm_off(m);
  const int j = i - 1;
  double *h = S + o.h + (m + 1) * j;
  const double *d1 = S + o.d1;
  double *d2 = S + o.d2;
  const double eta = S[PK_GM_HSUB];
  const double inv = eta != 0.0 ? 1.0 / eta : 0.0;
  double ss = 0.0;
  for (int l = 0; l < j; l++) h[l] = d1[l] * inv;
  h[j] = d1[j] * inv * inv;
  const double zeta = d1[i] * inv * inv;
  for (int l = 0; l <= j; l++) {
    d2[l] = h[l];
    ss += h[l] * h[l];
  }
  S[PK_GM_INV] = inv;
  const double hh = zeta - ss;
  /* (z, z) - sum h^2 = ||v~_i||^2 in exact arithmetic; a radicand <= 0 means the basis lost orthogonality
     (or, within rounding, an invariant subspace): the column is not usable, the driver restarts (Ghysels et
     al.), and the restart's true residual tells the two apart */
  if (isfinite(hh) && !(hh > 0.0)) {
    pk_ks_stop(S, PKRYLOV_DIVERGED_BREAKDOWN_ORTHOGONALITY, (int)S[PK_GM_IT0] + i);
    return;
  }
  const double hsub = sqrt(hh);
  S[PK_GM_HSUB] = hsub;
  pk_gm_finish_column(S, m, j, hsub);
}

/** PK_KSS_GM_SOLVE, arg k: Y[0..k) = R^-1 G[0..k) (R = the rotated upper triangle). */
PK_HD static inline void pk_gm_solve(double *S, int k) {
  const int m = (int)S[PK_GM_M];
  const pk_gm_off_t o = pk_gm_off(m);
  const double *g = S + o.g, *H = S + o.h;
  double *y = S + o.y;
  for (int i = k - 1; i >= 0; i--) {
    double t = g[i];
    for (int l = i + 1; l < k; l++) t -= H[(m + 1) * l + i] * y[l];
    y[i] = t / H[(m + 1) * i + i];
  }
}

/** Dispatch for this family's ids; -1 for an unknown id. */
PK_HD static inline int pk_kss_gmres(int id, double *S, int arg) {
  switch (id) {
  case PK_KSS_GM_CYCLE_INIT: pk_gm_cycle_init(S); return 0;
  case PK_KSS_GM_ARNOLDI: pk_gm_arnoldi(S, arg); return 0;
  case PK_KSS_GM_PIPE_COLUMN: pk_gm_pipe_column(S, arg); return 0;
  case PK_KSS_GM_SOLVE: pk_gm_solve(S, arg); return 0;
  default: return -1;
  }
}

#endif

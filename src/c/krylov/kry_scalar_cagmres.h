/**
 * @file kry_scalar_cagmres.h
 * @brief Scalar steps of the cagmres driver (CA-GMRES(s, m)); see kry_scalar.h for the rules.
 *
 * CA-GMRES shares the GMRES layout of kry_scalar_gmres.h (header, IT0, NVALID, the Givens rotations, g, y,
 * the rotated Hessenberg columns, the residual estimates; m there is the largest cycle length mmax) and
 * appends (pk_ca_off(), smax = the largest block):
 *   HU[(mmax+1)*mmax]   the Hessenberg matrix before rotation (the reconstruction and the Ritz values use it)
 *   C[(mmax+1)*smax]    block Gram-Schmidt coefficients (V_0..V_j0)^T P_1..P_k, leading dimension j0+1
 *   C2[(mmax+1)*smax]   those of the second pass (reorthogonalisation), same layout
 *   T[(mmax+1+smax)*smax]  [-C; I]: the scratch block W = [V_0..V_j0, P] T = P - V C
 *   GRAM[2*smax*smax]   W^T W (double-double hi/lo pairs, or plain doubles)
 *   R[smax*smax], RINV[smax*smax]   the Cholesky factor W = Q R and its inverse (column-major, ld k)
 *   CY, CX, CXX[smax]   matrix-powers coefficients: p_{t+1} = CY_t A M^-1 p_t + CX_t p_t + CXX_t p_{t-1}
 *   SHRE, SHIM[PK_CA_MAXSHIFT]  Newton shifts (Leja order, complex pairs adjacent with +im first)
 *   then the fixed slots PK_CA_* below (at the end of the layout: pk_ca_off().fixed).
 */
#ifndef PK_KRY_SCALAR_CAGMRES_H
#define PK_KRY_SCALAR_CAGMRES_H

#include "kry_scalar_gmres.h"

#define PK_CA_MAXSHIFT 40 /**< Ritz values computed (leading block of the first cycle's Hessenberg) */

/** Fixed slots, relative to pk_ca_off().fixed. */
enum {
  PK_CA_NSHIFT = 0, /**< Newton shifts available (0: monomial basis) */
  PK_CA_SIGMA = 1,  /**< scale of the matrix-powers steps (largest ||A M^-1 v_j|| seen; 0 = unknown) */
  PK_CA_KFAIL = 2,  /**< CHOL: columns of the block that factored (k when all) */
  PK_CA_KLUCKY = 3, /**< CHOL: 1 when column KFAIL is numerically dependent (lucky), 0 when the Gram matrix
                         is indefinite (loss of orthogonality) */
  PK_CA_SUSED = 4,  /**< the step size the last solve used after the first cycle (test hook) */
  PK_CA_NFIXED = 8
};

/** Step ids (300-399); arg packs j0 * 64 + k (k <= 16) where a step needs both. */
enum {
  PK_KSS_CA_COEF = 300,    /**< arg k: CY/CX/CXX of the next block (Newton with shifts, else monomial) */
  PK_KSS_CA_BUILD_T = 301, /**< arg j0*64+k: T = [-C; I] */
  PK_KSS_CA_CHOL = 302,    /**< arg k + 32*dd: Cholesky of GRAM (double-double or double): R, RINV, KFAIL */
  PK_KSS_CA_HESS = 303,    /**< arg j0*64+k: Hessenberg columns j0..j0+k-1 from C, C2, R, the coefficients */
  PK_KSS_CA_RITZ = 304     /**< arg kr: Ritz values of the leading kr x kr block of HU: Leja-ordered shifts */
};

typedef struct {
  pk_gm_off_t gm;
  int hu, c, c2, t, gram, r, rinv, cy, cx, cxx, shre, shim, fixed, total;
} pk_ca_off_t;

PK_HD static inline pk_ca_off_t pk_ca_off(int mmax, int smax) {
  pk_ca_off_t o;
  o.gm = pk_gm_off(mmax);
  o.hu = o.gm.total;
  o.c = o.hu + (mmax + 1) * mmax;
  o.c2 = o.c + (mmax + 1) * smax;
  o.t = o.c2 + (mmax + 1) * smax;
  o.gram = o.t + (mmax + 1 + smax) * smax;
  o.r = o.gram + 2 * smax * smax;
  o.rinv = o.r + smax * smax;
  o.cy = o.rinv + smax * smax;
  o.cx = o.cy + smax;
  o.cxx = o.cx + smax;
  o.shre = o.cxx + smax;
  o.shim = o.shre + PK_CA_MAXSHIFT;
  o.fixed = o.shim + PK_CA_MAXSHIFT;
  o.total = o.fixed + PK_CA_NFIXED;
  return o;
}

/** smax is kept in S[PK_GM_M + 1] (the slot after m). */
#define PK_CA_SMAX_SLOT (PK_GM_M + 1)

PK_HD static inline pk_ca_off_t pk_ca_off_S(const double *S) {
  return pk_ca_off((int)S[PK_GM_M], (int)S[PK_CA_SMAX_SLOT]);
}

/* ---- double-double arithmetic (Dekker, Knuth; the QD library's algorithms) ---------------------- */

typedef struct {
  double hi, lo;
} pk_dd;

PK_HD static inline pk_dd pk_dd_make(double hi, double lo) {
  pk_dd r;
  r.hi = hi;
  r.lo = lo;
  return r;
}
PK_HD static inline pk_dd pk_dd_quick_two_sum(double a, double b) {
  const double s = a + b;
  return pk_dd_make(s, b - (s - a));
}
PK_HD static inline pk_dd pk_dd_two_sum(double a, double b) {
  const double s = a + b, bb = s - a;
  return pk_dd_make(s, (a - (s - bb)) + (b - bb));
}
PK_HD static inline pk_dd pk_dd_add(pk_dd a, pk_dd b) {
  pk_dd s = pk_dd_two_sum(a.hi, b.hi);
  pk_dd t = pk_dd_two_sum(a.lo, b.lo);
  s.lo += t.hi;
  s = pk_dd_quick_two_sum(s.hi, s.lo);
  s.lo += t.lo;
  return pk_dd_quick_two_sum(s.hi, s.lo);
}
PK_HD static inline pk_dd pk_dd_neg(pk_dd a) { return pk_dd_make(-a.hi, -a.lo); }
PK_HD static inline pk_dd pk_dd_sub(pk_dd a, pk_dd b) { return pk_dd_add(a, pk_dd_neg(b)); }
PK_HD static inline pk_dd pk_dd_mul(pk_dd a, pk_dd b) {
  const double p = a.hi * b.hi;
  double e = fma(a.hi, b.hi, -p);
  e += a.hi * b.lo + a.lo * b.hi;
  return pk_dd_quick_two_sum(p, e);
}
PK_HD static inline pk_dd pk_dd_mul_d(pk_dd a, double b) { return pk_dd_mul(a, pk_dd_make(b, 0.0)); }
PK_HD static inline pk_dd pk_dd_div(pk_dd a, pk_dd b) {
  const double q1 = a.hi / b.hi;
  pk_dd r = pk_dd_sub(a, pk_dd_mul_d(b, q1));
  const double q2 = r.hi / b.hi;
  r = pk_dd_sub(r, pk_dd_mul_d(b, q2));
  const double q3 = r.hi / b.hi;
  pk_dd q = pk_dd_quick_two_sum(q1, q2);
  return pk_dd_add(q, pk_dd_make(q3, 0.0));
}
/** sqrt(a), a > 0: one Newton step from the double square root. */
PK_HD static inline pk_dd pk_dd_sqrt(pk_dd a) {
  const double x = sqrt(a.hi);
  const pk_dd x2 = pk_dd_mul(pk_dd_make(x, 0.0), pk_dd_make(x, 0.0));
  const pk_dd d = pk_dd_sub(a, x2);
  return pk_dd_two_sum(x, d.hi * 0.5 / x);
}

/* ---- steps ---------------------------------------------------------------------------------------- */

/**
 * PK_KSS_CA_COEF, arg k: coefficients of the k matrix-powers steps of the next block. With Newton shifts
 * theta_t (S[NSHIFT] > 0; used cyclically when k exceeds their number), p_{t+1} = (A M^-1 - theta_t) p_t /
 * sigma for a real shift; a complex pair alpha +- i beta takes two steps, p_{t+1} = (A M^-1 - alpha) p_t /
 * sigma, p_{t+2} = ((A M^-1 - alpha) p_{t+1} + beta^2 / sigma p_t) / sigma (real arithmetic), a pair cut by
 * the end of the block uses alpha alone. Without shifts the scaled monomial basis p_{t+1} = A M^-1 p_t /
 * sigma. sigma = S[SIGMA] (1 while unknown).
 */
PK_HD static inline void pk_ca_coef(double *S, int k) {
  const pk_ca_off_t o = pk_ca_off_S(S);
  double sigma = S[o.fixed + PK_CA_SIGMA];
  if (!(sigma > 0.0) || !isfinite(sigma)) sigma = 1.0;
  const int ns = (int)S[o.fixed + PK_CA_NSHIFT];
  const double inv = 1.0 / sigma;
  int t = 0;
  while (t < k) {
    const double re = ns > 0 ? S[o.shre + t % ns] : 0.0;
    const double im = ns > 0 ? S[o.shim + t % ns] : 0.0;
    S[o.cy + t] = inv;
    S[o.cx + t] = -re * inv;
    S[o.cxx + t] = 0.0;
    if (im > 0.0 && t + 1 < k && (t % ns) + 1 < ns) { /* the pair (re + i im, re - i im) */
      S[o.cy + t + 1] = inv;
      S[o.cx + t + 1] = -re * inv;
      S[o.cxx + t + 1] = im * im * inv * inv;
      t += 2;
    } else {
      t += 1;
    }
  }
}

/** PK_KSS_CA_BUILD_T, arg j0*64+k: T = [-C; I_k], leading dimension j0 + 1 + k. */
PK_HD static inline void pk_ca_build_t(double *S, int arg) {
  const pk_ca_off_t o = pk_ca_off_S(S);
  const int j0 = arg / 64, k = arg % 64, q = j0 + 1, ldt = q + k;
  for (int j = 0; j < k; j++) {
    for (int i = 0; i < q; i++) S[o.t + i + ldt * j] = -S[o.c + i + q * j];
    for (int i = 0; i < k; i++) S[o.t + q + i + ldt * j] = i == j ? 1.0 : 0.0;
  }
}

/**
 * PK_KSS_CA_CHOL, arg k + 32*dd: R^T R = GRAM (k x k; dd = 1: hi/lo pairs and the factorisation in
 * double-double, rounded to double at the end; dd = 0: doubles throughout), RINV = R^-1. A pivot that is not
 * positive stops the factorisation at column KFAIL (k when all factored): numerically dependent (pivot
 * within rounding of the double-double, or of double, times the column's norm, KLUCKY = 1: R's column KFAIL
 * is kept with a zero diagonal) or an indefinite Gram matrix (KLUCKY = 0). RINV's columns from KFAIL on are
 * 0, so that W RINV leaves no NaN in the basis.
 */
PK_HD static inline void pk_ca_chol(double *S, int arg) {
  const pk_ca_off_t o = pk_ca_off_S(S);
  const int k = arg % 32, dd = arg / 32;
  double *R = S + o.r, *Ri = S + o.rinv;
  const double *G = S + o.gram;
  /* the factor in double-double (the plain mode rounds every operation to double) */
  pk_dd Rd[16 * 16];
  for (int i = 0; i < k * k; i++) {
    R[i] = 0.0;
    Ri[i] = 0.0;
    Rd[i] = pk_dd_make(0.0, 0.0);
  }
  int kfail = k, lucky = 0;
  const double rel = dd ? 1e-30 : 1e-15;
  for (int j = 0; j < k && kfail == k; j++) {
    for (int i = 0; i <= j; i++) {
      pk_dd gij = dd ? pk_dd_make(G[2 * (i + k * j)], G[2 * (i + k * j) + 1]) : pk_dd_make(G[i + k * j], 0.0);
      pk_dd sum = gij;
      for (int l = 0; l < i; l++) {
        if (dd)
          sum = pk_dd_sub(sum, pk_dd_mul(Rd[l + k * i], Rd[l + k * j]));
        else
          sum.hi -= Rd[l + k * i].hi * Rd[l + k * j].hi;
      }
      if (i < j) {
        Rd[i + k * j] = dd ? pk_dd_div(sum, Rd[i + k * i]) : pk_dd_make(sum.hi / Rd[i + k * i].hi, 0.0);
      } else {
        const double gjj = gij.hi;
        if (!(sum.hi > rel * gjj) || !(sum.hi > 0.0) || !isfinite(sum.hi)) {
          kfail = j;
          lucky = isfinite(sum.hi) && (gjj == 0.0 || fabs(sum.hi) <= rel * gjj);
          Rd[j + k * j] = pk_dd_make(0.0, 0.0);
        } else {
          Rd[j + k * j] = dd ? pk_dd_sqrt(sum) : pk_dd_make(sqrt(sum.hi), 0.0);
        }
      }
    }
  }
  /* R in double: the columns that factored, and the dependent column of a lucky stop */
  const int kr = kfail < k && lucky ? kfail + 1 : kfail;
  for (int j = 0; j < kr; j++)
    for (int i = 0; i <= j; i++) R[i + k * j] = Rd[i + k * j].hi + Rd[i + k * j].lo;
  /* RINV of the leading kfail x kfail block (upper triangular, column by column) */
  for (int j = 0; j < kfail; j++) {
    Ri[j + k * j] = 1.0 / R[j + k * j];
    for (int i = j - 1; i >= 0; i--) {
      double t = 0.0;
      for (int l = i + 1; l <= j; l++) t += R[i + k * l] * Ri[l + k * j];
      Ri[i + k * j] = -t / R[i + k * i];
    }
  }
  S[o.fixed + PK_CA_KFAIL] = kfail;
  S[o.fixed + PK_CA_KLUCKY] = lucky;
}

/**
 * PK_KSS_CA_HESS, arg j0*64+k: the Hessenberg columns j0..j0+k-1 of the block. With the raw block
 * P = [v_j0, p_1..p_k] = V Rc (Rc: column 0 = e_j0, column t = [C(:, t-1) + C2(:, t-1); R(:, t-1)], the
 * coefficients of both Gram-Schmidt passes and of CholQR) and the
 * matrix-powers relation A M^-1 P(:, 0:k-1) = P B (B from CY/CX/CXX), splitting Rc's first k columns into
 * rows 0..j0-1 (X) and the upper triangular rows j0..j0+k-1 (U) gives
 *   H(:, j0:j0+k-1) = (Rc B - [H_old X; 0]) U^-1
 * (H_old: the earlier columns, from HU). Each column is stored in HU and finished like a GMRES column
 * (rotations, residual estimate, tests). A Cholesky stop at column KFAIL keeps the columns before it (and
 * the column with a zero subdiagonal for a dependent block: a lucky breakdown); an indefinite Gram matrix
 * then stops with PKRYLOV_DIVERGED_BREAKDOWN_ORTHOGONALITY. Updates SIGMA from the column norms.
 */
PK_HD static inline void pk_ca_hess(double *S, int arg) {
  if (!pk_ks_running(S)) return;
  const int mmax = (int)S[PK_GM_M];
  const pk_ca_off_t o = pk_ca_off_S(S);
  const int j0 = arg / 64, k = arg % 64, q = j0 + 1;
  const int kfail = (int)S[o.fixed + PK_CA_KFAIL], lucky = (int)S[o.fixed + PK_CA_KLUCKY];
  const int ncol = kfail < k ? (lucky ? kfail + 1 : kfail) : k;
  const double *C = S + o.c, *C2 = S + o.c2, *R = S + o.r;
  double *HU = S + o.hu;
  const int ldh = mmax + 1;
  double sigma = S[o.fixed + PK_CA_SIGMA];
  /* Rc(row, col) for rows 0..j0+k, cols 0..k */
#define PK_CA_RC(row, col)                                                                         \
  ((col) == 0 ? ((row) == j0 ? 1.0 : 0.0)                                                          \
              : ((row) <= j0 ? C[(row) + q * ((col)-1)] + C2[(row) + q * ((col)-1)]               \
                             : ((row)-q < k ? R[((row)-q) + k * ((col)-1)] : 0.0)))
  for (int t = 0; t < ncol; t++) {
    double *h = HU + ldh * (j0 + t);
    const int nrow = j0 + t + 2; /* rows 0..j0+t+1 */
    /* N(:, t) = Rc B(:, t) - [H_old X(:, t); 0]; B(t+1,t) = 1/CY_t, B(t,t) = -CX_t/CY_t,
       B(t-1,t) = -CXX_t/CY_t */
    const double cy = S[o.cy + t], b1 = 1.0 / cy, b0 = -S[o.cx + t] / cy;
    const double bm = t > 0 ? -S[o.cxx + t] / cy : 0.0;
    for (int r = 0; r < nrow; r++) {
      double v = b1 * PK_CA_RC(r, t + 1) + b0 * PK_CA_RC(r, t);
      if (t > 0) v += bm * PK_CA_RC(r, t - 1);
      if (r <= j0) { /* - H_old X(:, t): X(c, t) = Rc(c, t) for c < j0 */
        double hx = 0.0;
        for (int c = (r > 0 ? r - 1 : 0); c < j0; c++) hx += HU[r + ldh * c] * PK_CA_RC(c, t);
        v -= hx;
      }
      h[r] = v;
    }
    /* times U^-1: h = (N(:, t) - sum_{l<t} H(:, j0+l) U(l, t)) / U(t, t), U(l, t) = Rc(j0 + l, t) */
    for (int l = 0; l < t; l++) {
      const double u = PK_CA_RC(j0 + l, t);
      if (u != 0.0) {
        const double *hl = HU + ldh * (j0 + l);
        for (int r = 0; r <= j0 + l + 1; r++) h[r] -= hl[r] * u;
      }
    }
    const double utt = PK_CA_RC(j0 + t, t);
    double nrm = 0.0;
    for (int r = 0; r < nrow; r++) {
      h[r] /= utt;
      nrm += h[r] * h[r];
    }
    nrm = sqrt(nrm);
    if (nrm > sigma && isfinite(nrm)) sigma = nrm;
    /* the column to rotate */
    double *hr = S + o.gm.h + ldh * (j0 + t);
    for (int r = 0; r < nrow - 1; r++) hr[r] = h[r];
    const double hsub = lucky && t == kfail ? 0.0 : h[nrow - 1];
    if (lucky && t == kfail) h[nrow - 1] = 0.0;
    pk_gm_finish_column(S, mmax, j0 + t, hsub);
    if (!pk_ks_running(S)) break;
  }
#undef PK_CA_RC
  S[o.fixed + PK_CA_SIGMA] = sigma;
  if (kfail < k && !lucky)
    pk_ks_stop(S, PKRYLOV_DIVERGED_BREAKDOWN_ORTHOGONALITY, (int)S[PK_GM_IT0] + j0 + kfail + 1);
}

/**
 * Eigenvalues of the upper Hessenberg n x n matrix a (column-major, leading dimension lda; destroyed) by
 * the Francis double-shift QR iteration (EISPACK hqr). Returns the number of eigenvalues found (n unless
 * the iteration did not converge; those found are at the end of wr/wi then: the caller uses [n - ret, n)).
 */
PK_HD static inline int pk_ca_hqr(double *a, int n, int lda, double *wr, double *wi) {
#define A_(i, j) a[(i) + lda * (j)]
  double anorm = 0.0;
  for (int i = 0; i < n; i++)
    for (int j = (i > 0 ? i - 1 : 0); j < n; j++) anorm += fabs(A_(i, j));
  int nn = n - 1, found = 0;
  double t = 0.0;
  while (nn >= 0) {
    int its = 0, l;
    do {
      for (l = nn; l >= 1; l--) {
        double s = fabs(A_(l - 1, l - 1)) + fabs(A_(l, l));
        if (s == 0.0) s = anorm;
        if (fabs(A_(l, l - 1)) + s == s) {
          A_(l, l - 1) = 0.0;
          break;
        }
      }
      double x = A_(nn, nn);
      if (l == nn) {
        wr[nn] = x + t;
        wi[nn] = 0.0;
        nn--;
        found++;
      } else {
        double y = A_(nn - 1, nn - 1), w = A_(nn, nn - 1) * A_(nn - 1, nn);
        if (l == nn - 1) {
          const double p = 0.5 * (y - x), q = p * p + w;
          double z = sqrt(fabs(q));
          x += t;
          if (q >= 0.0) {
            z = p + (p >= 0.0 ? fabs(z) : -fabs(z));
            wr[nn - 1] = wr[nn] = x + z;
            if (z != 0.0) wr[nn] = x - w / z;
            wi[nn - 1] = wi[nn] = 0.0;
          } else {
            wr[nn - 1] = wr[nn] = x + p;
            wi[nn - 1] = z;
            wi[nn] = -z;
          }
          nn -= 2;
          found += 2;
        } else {
          if (its == 60) return found;
          if (its == 10 || its == 20) { /* exceptional shift */
            t += x;
            for (int i = 0; i <= nn; i++) A_(i, i) -= x;
            const double s = fabs(A_(nn, nn - 1)) + fabs(A_(nn - 1, nn - 2));
            y = x = 0.75 * s;
            w = -0.4375 * s * s;
          }
          ++its;
          int m;
          double p = 0.0, q = 0.0, r = 0.0, z;
          for (m = nn - 2; m >= l; m--) {
            z = A_(m, m);
            r = x - z;
            double s = y - z;
            p = (r * s - w) / A_(m + 1, m) + A_(m, m + 1);
            q = A_(m + 1, m + 1) - z - r - s;
            r = A_(m + 2, m + 1);
            s = fabs(p) + fabs(q) + fabs(r);
            p /= s;
            q /= s;
            r /= s;
            if (m == l) break;
            const double u = fabs(A_(m, m - 1)) * (fabs(q) + fabs(r));
            const double v = fabs(p) * (fabs(A_(m - 1, m - 1)) + fabs(z) + fabs(A_(m + 1, m + 1)));
            if (u + v == v) break;
          }
          for (int i = m + 2; i <= nn; i++) {
            A_(i, i - 2) = 0.0;
            if (i != m + 2) A_(i, i - 3) = 0.0;
          }
          for (int kk = m; kk <= nn - 1; kk++) {
            if (kk != m) {
              p = A_(kk, kk - 1);
              q = A_(kk + 1, kk - 1);
              r = 0.0;
              if (kk != nn - 1) r = A_(kk + 2, kk - 1);
              if ((x = fabs(p) + fabs(q) + fabs(r)) != 0.0) {
                p /= x;
                q /= x;
                r /= x;
              }
            }
            double s = sqrt(p * p + q * q + r * r);
            if (p < 0.0) s = -s;
            if (s != 0.0) {
              if (kk == m) {
                if (l != m) A_(kk, kk - 1) = -A_(kk, kk - 1);
              } else {
                A_(kk, kk - 1) = -s * x;
              }
              p += s;
              x = p / s;
              y = q / s;
              z = r / s;
              q /= p;
              r /= p;
              for (int j = kk; j <= nn; j++) {
                p = A_(kk, j) + q * A_(kk + 1, j);
                if (kk != nn - 1) {
                  p += r * A_(kk + 2, j);
                  A_(kk + 2, j) -= p * z;
                }
                A_(kk + 1, j) -= p * y;
                A_(kk, j) -= p * x;
              }
              const int mmin = nn < kk + 3 ? nn : kk + 3;
              for (int i = l; i <= mmin; i++) {
                p = x * A_(i, kk) + y * A_(i, kk + 1);
                if (kk != nn - 1) {
                  p += z * A_(i, kk + 2);
                  A_(i, kk + 2) -= p * r;
                }
                A_(i, kk + 1) -= p * q;
                A_(i, kk) -= p;
              }
            }
          }
        }
      }
    } while (nn >= 0 && l < nn - 1);
  }
#undef A_
  return found;
}

/**
 * PK_KSS_CA_RITZ, arg kr (<= PK_CA_MAXSHIFT): the eigenvalues of the leading kr x kr block of HU (Ritz
 * values of the cycle's Krylov space; HU is overwritten) in modified Leja order (Bai, Hu, Reichel 1994):
 * first the largest in modulus, then each maximising the product of its distances to those already chosen, a
 * complex value followed by its conjugate. Into SHRE/SHIM and NSHIFT (0 when the iteration failed).
 */
PK_HD static inline void pk_ca_ritz(double *S, int kr) {
  const pk_ca_off_t o = pk_ca_off_S(S);
  const int ldh = (int)S[PK_GM_M] + 1;
  double wr[PK_CA_MAXSHIFT], wi[PK_CA_MAXSHIFT];
  int used[PK_CA_MAXSHIFT];
  if (kr > PK_CA_MAXSHIFT) kr = PK_CA_MAXSHIFT;
  S[o.fixed + PK_CA_NSHIFT] = 0.0;
  if (kr < 1) return;
  /* in place in HU (the cycle is over; the next one rewrites it): zero below the subdiagonal first */
  double *a = S + o.hu;
  for (int j = 0; j < kr; j++)
    for (int i = j + 2; i < kr; i++) a[i + ldh * j] = 0.0;
  const int found = pk_ca_hqr(a, kr, ldh, wr, wi);
  if (found < kr) return;
  double scale = 0.0;
  for (int i = 0; i < kr; i++) {
    used[i] = !(isfinite(wr[i]) && isfinite(wi[i]));
    const double r = pk_gm_hypot(wr[i], wi[i]);
    if (r > scale && isfinite(r)) scale = r;
  }
  if (!(scale > 0.0)) return;
  int ns = 0;
  while (ns < kr) {
    int best = -1;
    double bestv = -1.0;
    for (int i = 0; i < kr; i++) {
      if (used[i] || wi[i] < 0.0) continue; /* a conjugate follows its partner */
      double v = 1.0;
      if (ns == 0) {
        v = pk_gm_hypot(wr[i], wi[i]);
      } else {
        for (int l = 0; l < ns; l++) v *= pk_gm_hypot(wr[i] - S[o.shre + l], wi[i] - S[o.shim + l]) / scale;
      }
      if (v > bestv) {
        bestv = v;
        best = i;
      }
    }
    if (best < 0) break;
    used[best] = 1;
    S[o.shre + ns] = wr[best];
    S[o.shim + ns] = wi[best];
    ns++;
    if (wi[best] > 0.0) { /* its conjugate */
      for (int i = 0; i < kr; i++)
        if (!used[i] && wi[i] < 0.0 && wr[i] == wr[best] && wi[i] == -wi[best]) {
          used[i] = 1;
          break;
        }
      if (ns < PK_CA_MAXSHIFT) {
        S[o.shre + ns] = wr[best];
        S[o.shim + ns] = -wi[best];
        ns++;
      }
    }
  }
  S[o.fixed + PK_CA_NSHIFT] = ns;
}

/** Dispatch for this family's ids; -1 for an unknown id. */
PK_HD static inline int pk_kss_cagmres(int id, double *S, int arg) {
  switch (id) {
  case PK_KSS_CA_COEF: pk_ca_coef(S, arg); return 0;
  case PK_KSS_CA_BUILD_T: pk_ca_build_t(S, arg); return 0;
  case PK_KSS_CA_CHOL: pk_ca_chol(S, arg); return 0;
  case PK_KSS_CA_HESS: pk_ca_hess(S, arg); return 0;
  case PK_KSS_CA_RITZ: pk_ca_ritz(S, arg); return 0;
  default: return -1;
  }
}

#endif

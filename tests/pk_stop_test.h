/**
 * @file pk_stop_test.h
 * @brief What the stop-rule tests share (t302, t713): a masked 2-D free-surface problem stored as an ocean
 *        model stores it (MITgcm's 5-point aW2d, aS2d, aC2d, negative definite), its approximate-inverse
 *        preconditioner (MITgcm's ini_cg2d pC, pW, pS), and hand-written solvers with MITgcm's loops:
 *        CG2D (pcg) and CG2D_SR (single reduction), their stopping rule (err_sq = sum r^2 < tol^2, tested
 *        before the first iteration), first/last residual and minimum-residual iterate
 *        (cg2dUseMinResSol). Independent of the library: the references apply A and M through the
 *        callbacks they are given.
 */
#ifndef PK_STOP_TEST_H
#define PK_STOP_TEST_H

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "pk_test.h"

/* ---- the basin ------------------------------------------------------------------------------------- */

/** nx x ny cells (index i + nx*j), mask 1 wet / 0 land; coefficients 0 across land and the outer wall. */
typedef struct {
  int nx, ny;
  int64_t n;
  double *aW, *aS, *aV, *aC; /* aV = 0 (pkrylov's stencil with nz = 1) */
  double *pC, *pW, *pS;      /* the approximate inverse */
  int32_t *mask;
} pk_basin;

static int pk_basin_wet(const pk_basin *B, int i, int j) {
  return i >= 0 && i < B->nx && j >= 0 && j < B->ny && B->mask[i + B->nx * j];
}

/**
 * A basin with land: the outer ring of cells, an island and a peninsula are dry. integer = 1: face
 * coefficients 1, 2 or 3 and aC = -(sum of faces) - 1, so that products with integer vectors are exact;
 * else face coefficients in [0.5, 1.5] and aC = -(sum of faces) - a free-surface term in [0.01, 0.03]
 * (negative definite). The approximate inverse as ini_cg2d builds it with off-diagonal factor 0.51:
 * pC = 1 / aC, pW = -aW / (0.51 (aC(i-1) + aC(i)))^2, pS alike (0 at land and walls).
 */
static void pk_basin_make(pk_basin *B, int nx, int ny, uint64_t seed, int integer) {
  memset(B, 0, sizeof *B);
  B->nx = nx, B->ny = ny, B->n = (int64_t)nx * ny;
  const size_t n = (size_t)B->n;
  B->aW = calloc(n, sizeof(double)), B->aS = calloc(n, sizeof(double)), B->aV = calloc(n, sizeof(double));
  B->aC = calloc(n, sizeof(double)), B->pC = calloc(n, sizeof(double)), B->pW = calloc(n, sizeof(double));
  B->pS = calloc(n, sizeof(double)), B->mask = calloc(n, sizeof(int32_t));
  for (int j = 0; j < ny; j++)
    for (int i = 0; i < nx; i++) {
      int wet = i > 0 && i < nx - 1 && j > 0 && j < ny - 1;
      if (i >= nx / 3 && i < nx / 3 + 3 && j >= ny / 3 && j < ny / 3 + 2)
        wet = 0; /* an island */
      if (i == nx / 2 && j >= ny / 2)
        wet = 0; /* a peninsula */
      B->mask[i + nx * j] = wet;
    }
  uint64_t st = seed;
  for (int j = 0; j < ny; j++)
    for (int i = 0; i < nx; i++) {
      const int64_t c = i + (int64_t)nx * j;
      const double rw = pk_test_rand(&st), rs = pk_test_rand(&st);
      if (pk_basin_wet(B, i, j) && pk_basin_wet(B, i - 1, j))
        B->aW[c] = integer ? (double)(1 + (int)(1.5 * (rw + 1.0))) : 1.0 + 0.5 * rw;
      if (pk_basin_wet(B, i, j) && pk_basin_wet(B, i, j - 1))
        B->aS[c] = integer ? (double)(1 + (int)(1.5 * (rs + 1.0))) : 1.0 + 0.5 * rs;
    }
  for (int j = 0; j < ny; j++)
    for (int i = 0; i < nx; i++) {
      const int64_t c = i + (int64_t)nx * j;
      if (!B->mask[c])
        continue;
      const double e = i + 1 < nx ? B->aW[c + 1] : 0.0, nn = j + 1 < ny ? B->aS[c + nx] : 0.0;
      const double fs = integer ? 1.0 : 0.02 + 0.01 * pk_test_rand(&st);
      B->aC[c] = -(B->aW[c] + e + B->aS[c] + nn) - fs;
    }
  for (int64_t c = 0; c < B->n; c++) {
    if (!B->mask[c])
      continue;
    B->pC[c] = 1.0 / B->aC[c];
    const int i = (int)(c % nx);
    if (B->aW[c] != 0.0) {
      const double d = 0.51 * (B->aC[c - 1] + B->aC[c]);
      B->pW[c] = -B->aW[c] / (d * d);
    }
    if (B->aS[c] != 0.0) {
      const double d = 0.51 * (B->aC[c - nx] + B->aC[c]);
      B->pS[c] = -B->aS[c] / (d * d);
    }
    (void)i;
  }
}

static void pk_basin_free(pk_basin *B) {
  free(B->aW), free(B->aS), free(B->aV), free(B->aC), free(B->pC), free(B->pW), free(B->pS), free(B->mask);
  memset(B, 0, sizeof *B);
}

/** The value of v at (i, j), 0 outside the grid. */
static double pk_basin_at(const pk_basin *B, const double *v, int i, int j) {
  return i >= 0 && i < B->nx && j >= 0 && j < B->ny ? v[i + (int64_t)B->nx * j] : 0.0;
}

/**
 * y = the 5-point face stencil (cW, cS, cC) applied to x, 0 at land, in MITgcm's expression orders: the
 * centre last (the operator, cg2d.F) or first (the approximate inverse).
 */
static void pk_basin_5pt(const pk_basin *B, const double *cW, const double *cS, const double *cC,
                         int centre_first, const double *x, double *y) {
  for (int j = 0; j < B->ny; j++)
    for (int i = 0; i < B->nx; i++) {
      const int64_t c = i + (int64_t)B->nx * j;
      if (!B->mask[c]) {
        y[c] = 0.0;
        continue;
      }
      const double e = i + 1 < B->nx ? cW[c + 1] : 0.0, nn = j + 1 < B->ny ? cS[c + B->nx] : 0.0;
      double t = centre_first ? cC[c] * x[c] : 0.0;
      t = (centre_first ? t + cW[c] * pk_basin_at(B, x, i - 1, j) : cW[c] * pk_basin_at(B, x, i - 1, j)) +
          e * pk_basin_at(B, x, i + 1, j) + cS[c] * pk_basin_at(B, x, i, j - 1) + nn * pk_basin_at(B, x, i, j + 1);
      y[c] = centre_first ? t : t + cC[c] * x[c];
    }
}

/** y = A x (MITgcm's order); 0 at land. */
static int pk_basin_apply(void *user, int64_t n, const double *x, double *y) {
  const pk_basin *B = (const pk_basin *)user;
  (void)n;
  pk_basin_5pt(B, B->aW, B->aS, B->aC, 0, x, y);
  return 0;
}

/** z = M^-1 r by the approximate inverse (MITgcm's order); 0 at land. */
static int pk_basin_ainv(void *user, int64_t n, const double *r, double *z) {
  const pk_basin *B = (const pk_basin *)user;
  (void)n;
  pk_basin_5pt(B, B->pW, B->pS, B->pC, 1, r, z);
  return 0;
}

/** z = r / aC (Jacobi as pkrylov's: 1/diag; land cells keep r, which is 0 there). */
static int pk_basin_jacobi(void *user, int64_t n, const double *r, double *z) {
  const pk_basin *B = (const pk_basin *)user;
  for (int64_t c = 0; c < n; c++)
    z[c] = B->mask[c] ? r[c] * (1.0 / B->aC[c]) : r[c];
  return 0;
}

/* ---- the hand-written solvers ----------------------------------------------------------------------- */

typedef int (*pk_ref_fn)(void *user, int64_t n, const double *x, double *y);

/** A problem for the references: y = A x, z = M^-1 r (NULL: none), the wet cells (NULL: all). */
typedef struct {
  int64_t n;
  pk_ref_fn A, M;
  void *Auser, *Muser;
  const int32_t *wet;
} pk_ref_problem;

/**
 * What a reference solve returns (MITgcm's CG2D arguments). min_rr, it_min: the minimum over every iterate,
 * the last included, which is what the library reports; MITgcm's minResidualSq leaves out a last iterate that
 * converged (CG2D tests convergence before the minimum) or that the loop of CG2D_SR ran out at, whose
 * residual is then below the minimum or the last anyway: the returned x is the same.
 */
typedef struct {
  int32_t its;        /* numIters: iterations done */
  double first, last; /* firstResidual, lastResidual (sqrt of err_sq) */
  double min_rr;      /* minResidualSq (see above) */
  int32_t it_min;     /* nIterMin */
  int32_t converged;  /* stopped by err_sq < tol^2 */
  double *rr;         /* when not NULL (maxit + 1 values): err_sq of every iteration */
} pk_ref_out;

static double pk_ref_dot(const pk_ref_problem *P, const double *a, const double *b) {
  double t = 0.0;
  for (int64_t i = 0; i < P->n; i++)
    if (!P->wet || P->wet[i])
      t += a[i] * b[i];
  return t;
}

static void pk_ref_precond(const pk_ref_problem *P, const double *r, double *z) {
  if (P->M)
    P->M(P->Muser, P->n, r, z);
  else
    memcpy(z, r, sizeof(double) * (size_t)P->n);
}

/** r = b - A x (0 at land); err_sq. */
static double pk_ref_residual(const pk_ref_problem *P, const double *b, const double *x, double *r) {
  P->A(P->Auser, P->n, x, r);
  for (int64_t i = 0; i < P->n; i++)
    r[i] = (!P->wet || P->wet[i]) ? b[i] - r[i] : 0.0;
  return pk_ref_dot(P, r, r);
}

/** Iterate it with err_sq: the history entry, the minimum (iteration 0 and every later one, the last
 *  included: see pk_ref_out) and its x. */
static void pk_ref_note(pk_ref_out *o, int32_t it, double err_sq, const double *x, double *xmin, int64_t n) {
  if (o->rr)
    o->rr[it] = err_sq;
  if (it == 0 || err_sq < o->min_rr) {
    o->min_rr = err_sq, o->it_min = it;
    memcpy(xmin, x, sizeof(double) * (size_t)n);
  }
}

/** A reference solve starts: r = b - A x, firstResidual, iteration 0; returns err_sq. */
static double pk_ref_start(const pk_ref_problem *P, const double *b, const double *x, double *r, double *xmin,
                           pk_ref_out *o) {
  const double err_sq = pk_ref_residual(P, b, x, r);
  o->first = sqrt(err_sq);
  o->converged = 0;
  pk_ref_note(o, 0, err_sq, x, xmin, P->n);
  return err_sq;
}

/** A reference solve ends after it iterations with err_sq: the kept iterate when minres and the last is
 *  worse (MITgcm's rule), numIters, lastResidual. */
static void pk_ref_finish(const pk_ref_problem *P, pk_ref_out *o, int minres, int32_t it, double err_sq,
                          double *x, const double *xmin) {
  if (minres && err_sq > o->min_rr)
    memcpy(x, xmin, sizeof(double) * (size_t)P->n);
  o->its = it;
  o->last = sqrt(err_sq);
}

/**
 * MITgcm's CG2D: x (initial guess in, solution out), tolerance tol (err_sq < tol^2), at most maxit
 * iterations, minres: cg2dUseMinResSol.
 */
static void pk_ref_cg2d(const pk_ref_problem *P, const double *b, double *x, double tol, int32_t maxit,
                        int minres, pk_ref_out *o) {
  const size_t bytes = sizeof(double) * (size_t)P->n;
  double *r = malloc(bytes), *z = malloc(bytes), *s = calloc((size_t)P->n, sizeof(double)),
         *q = malloc(bytes);
  double *xmin = malloc(bytes);
  const double tol_sq = tol * tol;
  double err_sq = pk_ref_start(P, b, x, r, xmin, o);
  int32_t it = 0;
  if (err_sq < tol_sq) {
    o->converged = 1;
  } else {
    double eta_old = 1.0;
    for (it = 1; it <= maxit; it++) {
      pk_ref_precond(P, r, z);
      const double eta = pk_ref_dot(P, z, r);
      const double beta = eta / eta_old;
      eta_old = eta;
      for (int64_t i = 0; i < P->n; i++)
        s[i] = z[i] + beta * s[i];
      P->A(P->Auser, P->n, s, q);
      const double alpha = eta / pk_ref_dot(P, s, q);
      for (int64_t i = 0; i < P->n; i++) {
        x[i] = x[i] + alpha * s[i];
        r[i] = r[i] - alpha * q[i];
      }
      err_sq = pk_ref_dot(P, r, r);
      pk_ref_note(o, it, err_sq, x, xmin, P->n); /* (CG2D tests convergence first: see pk_ref_out) */
      if (err_sq < tol_sq) {
        o->converged = 1;
        break;
      }
    }
    if (it > maxit)
      it = maxit;
  }
  pk_ref_finish(P, o, minres, it, err_sq, x, xmin);
  free(r), free(z), free(s), free(q), free(xmin);
}

/** MITgcm's CG2D_SR (single reduction, d'Azevedo-Eijkhout-Romine), same arguments as pk_ref_cg2d. */
static void pk_ref_cg2d_sr(const pk_ref_problem *P, const double *b, double *x, double tol, int32_t maxit,
                           int minres, pk_ref_out *o) {
  const int64_t n = P->n;
  const size_t bytes = sizeof(double) * (size_t)n;
  double *r = malloc(bytes), *y = malloc(bytes), *v = malloc(bytes), *s = malloc(bytes), *q = malloc(bytes);
  double *xmin = malloc(bytes);
  const double tol_sq = tol * tol;
  double err_sq = pk_ref_start(P, b, x, r, xmin, o);
  int32_t it = 0;
  if (err_sq < tol_sq) {
    o->converged = 1;
  } else if (maxit > 0) {
    /* the first iteration outside the loop */
    pk_ref_precond(P, r, y);
    memcpy(s, y, bytes);
    double eta = pk_ref_dot(P, y, r), eta_old = eta;
    P->A(P->Auser, n, s, q);
    double alpha = pk_ref_dot(P, s, q);
    double sigma = eta / alpha;
    for (int64_t i = 0; i < n; i++) {
      x[i] = x[i] + sigma * s[i];
      r[i] = r[i] - sigma * q[i];
    }
    for (it = 1; it <= maxit - 1; it++) {
      pk_ref_precond(P, r, y);
      P->A(P->Auser, n, y, v);
      eta = pk_ref_dot(P, y, r);
      const double delta = pk_ref_dot(P, y, v);
      err_sq = pk_ref_dot(P, r, r);
      pk_ref_note(o, it, err_sq, x, xmin, n); /* (CG2D_SR tests convergence first: see pk_ref_out) */
      if (err_sq < tol_sq) {
        o->converged = 1;
        break;
      }
      const double beta = eta / eta_old;
      eta_old = eta;
      alpha = delta - (beta * beta) * alpha;
      sigma = eta / alpha;
      for (int64_t i = 0; i < n; i++) {
        s[i] = y[i] + beta * s[i];
        x[i] = x[i] + sigma * s[i];
        q[i] = v[i] + beta * q[i];
        r[i] = r[i] - sigma * q[i];
      }
    }
    if (!o->converged) { /* the loop ran out: it = maxit, err_sq of the last r */
      it = maxit;
      err_sq = pk_ref_dot(P, r, r);
      pk_ref_note(o, it, err_sq, x, xmin, n);
      if (err_sq < tol_sq)
        o->converged = 1;
    }
  }
  pk_ref_finish(P, o, minres, it, err_sq, x, xmin);
  free(r), free(y), free(v), free(s), free(q), free(xmin);
}

#endif /* PK_STOP_TEST_H */

/**
 * @file pk_basin3d_test.h
 * @brief The 3-D basin of legacy_examples/mitgcm_style (MITgcm's CG3D operator) in C, for the tests: the
 *        grid of its ini_grid (a continent at i = 1, an island, a shelf and a ridge, full cells, levels from
 *        5 m at the surface to 44 m at the bottom for nz = 15, else the same 271 m growing geometrically),
 *        the operator of ini_cg3d (face coefficients times deltaTMom, the free-surface term in the surface
 *        cell, normalised by the largest coupling: negative definite, dry cells masked) as the arrays of
 *        pkrylov_operator_create_stencil7, and the right-hand side of its nh_rhs at time t (the divergence of
 *        a baroclinic provisional flow, normalised to max |b| = 1 as CG3D does). Header-only (static).
 */
#ifndef PK_BASIN3D_TEST_H
#define PK_BASIN3D_TEST_H

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "pkrylov.h"

typedef struct {
  int nx, ny, nz;
  int64_t n;
  double *aW, *aS, *aV, *aC; /* pkrylov_operator_create_stencil7's arrays, index i + nx*(j + ny*k) */
  int32_t *mask;
  double *drF, *rC;          /* level thickness, depth of the centres (< 0) */
  double *hC;                /* hFacC (0 or 1) */
} pk_basin3d;

/** hFacC(i, j, k) with the model's 1-based indices; 0 outside the tile (walls in y, the continent at i = 1
 *  closes the periodic boundary in x). */
static double pk_basin3d_hc(const pk_basin3d *B, int i, int j, int k) {
  if (i < 1 || i > B->nx || j < 1 || j > B->ny) return 0.0;
  return B->hC[(i - 1) + (int64_t)B->nx * ((j - 1) + (int64_t)B->ny * (k - 1))];
}

/** The basin of nx x ny columns and nz levels (the legacy example: 32 x 24 x 15). */
static int pk_basin3d_make(pk_basin3d *B, int nx, int ny, int nz) {
  static const double drF15[15] = {5, 5, 6, 7, 8, 10, 12, 14, 17, 20, 24, 28, 33, 38, 44};
  const double dxC = 250.0, dyC = 250.0, dxG = dxC, dyG = dyC, rA = dxC * dyC;
  const double gravity = 9.81, deltaTMom = 30.0;
  memset(B, 0, sizeof *B);
  B->nx = nx, B->ny = ny, B->nz = nz;
  B->n = (int64_t)nx * ny * nz;
  const size_t n = (size_t)B->n;
  B->aW = calloc(n, sizeof(double)), B->aS = calloc(n, sizeof(double));
  B->aV = calloc(n, sizeof(double)), B->aC = calloc(n, sizeof(double));
  B->mask = calloc(n, sizeof(int32_t));
  B->hC = calloc(n, sizeof(double));
  B->drF = calloc((size_t)nz, sizeof(double)), B->rC = calloc((size_t)nz, sizeof(double));
  double *drC = calloc((size_t)nz, sizeof(double));
  if (!B->aW || !B->aS || !B->aV || !B->aC || !B->mask || !B->hC || !B->drF || !B->rC || !drC) {
    free(drC);
    return -1;
  }
  double tot = 0.0;
  for (int k = 0; k < 15; k++) tot += drF15[k];
  if (nz == 15) {
    memcpy(B->drF, drF15, sizeof drF15);
  } else if (nz == 1) {
    B->drF[0] = tot;
  } else {
    double s = 0.0;
    for (int k = 0; k < nz; k++) s += B->drF[k] = pow(44.0 / 5.0, (double)k / (nz - 1));
    for (int k = 0; k < nz; k++) B->drF[k] *= tot / s;
  }
  double rF = 0.0;
  for (int k = 0; k < nz; k++) {
    B->rC[k] = rF - 0.5 * B->drF[k];
    rF -= B->drF[k];
  }
  drC[0] = 0.5 * B->drF[0];
  for (int k = 1; k < nz; k++) drC[k] = 0.5 * (B->drF[k - 1] + B->drF[k]);
  for (int j = 1; j <= ny; j++)
    for (int i = 2; i <= nx; i++) {
      double depth = 60.0 + 210.0 * fmin(1.0, (i - 2) / 10.0) -
                     120.0 * exp(-pow((j - 8.0) / 3.0, 2)) * (i > 16 ? 1.0 : 0.0);
      if ((i - 22) * (i - 22) + (j - 16) * (j - 16) <= 5) depth = 0.0; /* island */
      for (int k = 1; k <= nz; k++)
        if (B->rC[k - 1] > -depth) B->hC[(i - 1) + (int64_t)nx * ((j - 1) + (int64_t)ny * (k - 1))] = 1.0;
    }
  /* face coefficients (1-based i, j, k as the model), the largest coupling for the normalisation */
  double amax = 0.0;
  for (int k = 1; k <= nz; k++)
    for (int j = 1; j <= ny; j++)
      for (int i = 1; i <= nx; i++) {
        const int64_t c = (i - 1) + (int64_t)nx * ((j - 1) + (int64_t)ny * (k - 1));
        const double hW = fmin(pk_basin3d_hc(B, i - 1, j, k), pk_basin3d_hc(B, i, j, k));
        const double hS = fmin(pk_basin3d_hc(B, i, j - 1, k), pk_basin3d_hc(B, i, j, k));
        B->aW[c] = dyG * B->drF[k - 1] * hW / dxC * deltaTMom;
        B->aS[c] = dxG * B->drF[k - 1] * hS / dyC * deltaTMom;
        if (k > 1)
          B->aV[c] = rA * pk_basin3d_hc(B, i, j, k) * pk_basin3d_hc(B, i, j, k - 1) / drC[k - 1] * deltaTMom;
        amax = fmax(amax, fmax(B->aW[c], fmax(B->aS[c], B->aV[c])));
      }
  const double norm = 1.0 / amax;
  for (int k = 1; k <= nz; k++)
    for (int j = 1; j <= ny; j++)
      for (int i = 1; i <= nx; i++) {
        const int64_t c = (i - 1) + (int64_t)nx * ((j - 1) + (int64_t)ny * (k - 1));
        const int64_t cE = i < nx ? c + 1 : -1, cN = j < ny ? c + nx : -1;
        const int64_t cD = k < nz ? c + (int64_t)nx * ny : -1;
        /* the east face of the last column couples to i = nx + 1 = 1 (periodic): dry, so zero */
        double a =
            -B->aW[c] - (cE >= 0 ? B->aW[cE] : 0.0) - B->aS[c] - (cN >= 0 ? B->aS[cN] : 0.0) - B->aV[c];
        if (cD >= 0) a -= B->aV[cD];
        if (k == 1) a -= 1.0 / deltaTMom / gravity * rA * pk_basin3d_hc(B, i, j, 1);
        B->aC[c] = a;
        B->mask[c] = pk_basin3d_hc(B, i, j, k) > 0.0;
      }
  for (size_t c = 0; c < n; c++) {
    B->aW[c] *= norm, B->aS[c] *= norm, B->aV[c] *= norm, B->aC[c] *= norm;
  }
  free(drC);
  return 0;
}

static void pk_basin3d_free(pk_basin3d *B) {
  free(B->aW), free(B->aS), free(B->aV), free(B->aC), free(B->mask), free(B->hC), free(B->drF), free(B->rC);
  memset(B, 0, sizeof *B);
}

/** b = the model's RHS at time t (nh_rhs), masked and normalised to max |b| = 1 (CG3D; the operator's own
 *  normalisation does not change the direction). Returns the maximum before the normalisation (the model's
 *  rhsMax), NaN when out of memory. */
static double pk_basin3d_rhs(const pk_basin3d *B, double time, double *b) {
  const double pi = 3.14159265358979323846, dxC = 250.0, dyC = 250.0, dxG = dxC, dyG = dyC, rA = dxC * dyC;
  const int nx = B->nx, ny = B->ny, nz = B->nz;
  const int mx = nx + 1, my = ny + 1;
  /* transports through the west (u), south (v) faces and the top (r) of cell (i, j, k), 1-based,
     i <= nx + 1, j <= ny + 1 */
  double *u = calloc((size_t)mx * my * nz, sizeof(double)), *v = calloc((size_t)mx * my * nz, sizeof(double));
  double *r = calloc((size_t)mx * my * (nz + 1), sizeof(double));
  if (!u || !v || !r) {
    free(u), free(v), free(r);
    for (int64_t c = 0; c < B->n; c++) b[c] = NAN;
    return NAN;
  }
#define PK_B3_F(a, i, j, k) a[((i) - 1) + (size_t)mx * (((j) - 1) + (size_t)my * ((k) - 1))]
  const double xp = 8.0 * dxC + 0.05 * time;
  for (int k = 1; k <= nz; k++)
    for (int j = 1; j <= my; j++)
      for (int i = 1; i <= mx; i++) {
        const double x = (i - 1) * dxC, y = (j - 1) * dyC, rc = B->rC[k - 1], dr = B->drF[k - 1];
        const double hW = fmin(pk_basin3d_hc(B, i - 1, j, k), pk_basin3d_hc(B, i, j, k));
        const double hS = fmin(pk_basin3d_hc(B, i, j - 1, k), pk_basin3d_hc(B, i, j, k));
        const double mk = pk_basin3d_hc(B, i, j, k) * pk_basin3d_hc(B, i, j, k > 1 ? k - 1 : 1);
        PK_B3_F(u, i, j, k) =
            0.1 * sin(2.0 * pi * (x / 4000.0 - time / 600.0)) * (1.0 + rc / 300.0) * dyG * dr * hW;
        PK_B3_F(v, i, j, k) =
            0.05 * cos(pi * y / 6000.0) * cos(time / 300.0) * exp(rc / 100.0) * dxG * dr * hS;
        PK_B3_F(r, i, j, k) = k == 1
                                  ? 0.0
                                  : 0.02 * exp(-((x - xp) * (x - xp) + (y - 3000.0) * (y - 3000.0)) / 1.0e6) *
                                        sin(pi * rc / (-270.0)) * rA * mk;
      }
  for (int j = 1; j <= my; j++)
    for (int i = 1; i <= mx; i++) {
      double dW = 0.0, dS = 0.0, sU = 0.0, sV = 0.0;
      for (int k = 1; k <= nz; k++) {
        const double hW = fmin(pk_basin3d_hc(B, i - 1, j, k), pk_basin3d_hc(B, i, j, k));
        const double hS = fmin(pk_basin3d_hc(B, i, j - 1, k), pk_basin3d_hc(B, i, j, k));
        dW += B->drF[k - 1] * hW, dS += B->drF[k - 1] * hS;
        sU += PK_B3_F(u, i, j, k), sV += PK_B3_F(v, i, j, k);
      }
      for (int k = 1; k <= nz; k++) { /* baroclinic: the vertical sums through each face removed */
        const double hW = fmin(pk_basin3d_hc(B, i - 1, j, k), pk_basin3d_hc(B, i, j, k));
        const double hS = fmin(pk_basin3d_hc(B, i, j - 1, k), pk_basin3d_hc(B, i, j, k));
        if (dW > 0.0) PK_B3_F(u, i, j, k) -= sU * B->drF[k - 1] * hW / dW;
        if (dS > 0.0) PK_B3_F(v, i, j, k) -= sV * B->drF[k - 1] * hS / dS;
      }
    }
  double bmax = 0.0;
  for (int k = 1; k <= nz; k++)
    for (int j = 1; j <= ny; j++)
      for (int i = 1; i <= nx; i++) {
        const int64_t c = (i - 1) + (int64_t)nx * ((j - 1) + (int64_t)ny * (k - 1));
        const double rb = k < nz ? PK_B3_F(r, i, j, k + 1) : 0.0;
        double val = PK_B3_F(u, i + 1, j, k) - PK_B3_F(u, i, j, k) + PK_B3_F(v, i, j + 1, k) -
                     PK_B3_F(v, i, j, k) + PK_B3_F(r, i, j, k) - rb;
        b[c] = B->mask[c] ? val : 0.0;
        bmax = fmax(bmax, fabs(b[c]));
      }
#undef PK_B3_F
  if (bmax > 0.0)
    for (int64_t c = 0; c < B->n; c++) b[c] /= bmax;
  free(u), free(v), free(r);
  return bmax;
}

/** The stencil operator of the basin on ctx. */
static int pk_basin3d_operator(pkrylov_context ctx, const pk_basin3d *B, pkrylov_operator *A) {
  return pkrylov_operator_create_stencil7(ctx, B->nx, B->ny, B->nz, B->aW, B->aS, B->aV, B->aC, B->mask, A);
}

#endif

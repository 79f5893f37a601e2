/**
 * @file problems.c
 * @brief The model problems on the models' own grids (docs/model-problem.md): the 2-D free-surface
 *        (barotropic) operator of a global ocean with continents, and the thin shell on the six faces of
 *        the cube sphere, as face coefficients (aW, aS, aV, aC) in the global order, for tests, the
 *        command-line solver and the benchmarks to cut into tiles.
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "pk_impl.h"

#define PK_PI 3.14159265358979323846

/* ------------------------------------------------------------------------------------------------ */
/* The barotropic (2-D free-surface) problem                                                         */

/** 1 when (lon, lat) in degrees (lon in [0, 360)) is land: three continents and a polar cap. */
static int baro_land(double lon, double lat) {
  if (lat < -70.0) return 1;
  /* superellipses |dx/a|^4 + |dy/b|^4 <= 1 (dx the longitude difference, wrapped) */
  static const double c[3][4] = {{290.0, 10.0, 22.0, 55.0}, {35.0, 20.0, 45.0, 45.0}, {135.0, -25.0, 18.0, 12.0}};
  for (int q = 0; q < 3; q++) {
    double dx = lon - c[q][0];
    if (dx > 180.0) dx -= 360.0;
    if (dx < -180.0) dx += 360.0;
    const double u = dx / c[q][2], v = (lat - c[q][1]) / c[q][3];
    if (u * u * u * u + v * v * v * v <= 1.0) return 1;
  }
  return 0;
}

int pkrylov_barotropic_coefficients(int32_t nx, int32_t ny, int32_t periodic, double *aW, double *aS, double *aC,
                                    int32_t *mask) {
  PK_CHECK(nx >= 4 && ny >= 4, NULL, PKRYLOV_ERR_INVALID_SIZE, "arguments 'nx' x 'ny' = %d x %d: each must be >= 4",
           nx, ny);
  PK_CHECK((int64_t)nx * ny <= INT64_MAX / 64, NULL, PKRYLOV_ERR_INVALID_SIZE, "too many columns");
  PK_CHECK(periodic >= PKRYLOV_PERIODIC_NONE && periodic <= PKRYLOV_PERIODIC_XY, NULL, PKRYLOV_ERR_INVALID_VALUE,
           "argument 'periodic' = %d is not a pkrylov_periodic (NONE %d, X %d, Y %d, XY %d)", periodic,
           PKRYLOV_PERIODIC_NONE, PKRYLOV_PERIODIC_X, PKRYLOV_PERIODIC_Y, PKRYLOV_PERIODIC_XY);
  PK_CHECK_PTR(aW, NULL);
  PK_CHECK_PTR(aS, NULL);
  PK_CHECK_PTR(aC, NULL);
  PK_CHECK_PTR(mask, NULL);
  const int px = (periodic - PKRYLOV_PERIODIC_NONE) & 1, py = ((periodic - PKRYLOV_PERIODIC_NONE) & 2) != 0;
  const int64_t NX = nx, NY = ny, n = NX * NY;
  /* longitude [0, 360), latitude [-80, 80]: cell (i, j) centred at lon_i, lat_j */
  const double R = 6.371e6, g = 9.81, dt = 1200.0, H0 = 4000.0, Hshelf = 500.0;
  const double dlon = 2.0 * PK_PI / NX, dlat = (160.0 / 180.0 * PK_PI) / NY, lat0 = -80.0 / 180.0 * PK_PI;
  double *H = malloc(sizeof(double) * (size_t)n);
  PK_CHECK(H != NULL, NULL, PKRYLOV_ERR_OUT_OF_MEMORY, "cannot allocate the depths (%lld columns)", (long long)n);
  for (int64_t j = 0; j < NY; j++)
    for (int64_t i = 0; i < NX; i++) {
      const double lon = (i + 0.5) * 360.0 / NX, lat = -80.0 + (j + 0.5) * 160.0 / NY;
      mask[i + NX * j] = !baro_land(lon, lat);
    }
  /* depth: the open ocean H0, a shelf of Hshelf within two cells of land */
  for (int64_t j = 0; j < NY; j++)
    for (int64_t i = 0; i < NX; i++) {
      int coast = 0;
      for (int64_t dj = -2; dj <= 2 && !coast; dj++)
        for (int64_t di = -2; di <= 2 && !coast; di++) {
          int64_t ii = i + di, jj = j + dj;
          if (px) ii = (ii + NX) % NX;
          if (py) jj = (jj + NY) % NY;
          if (ii < 0 || ii >= NX || jj < 0 || jj >= NY) continue;
          coast = !mask[ii + NX * jj];
        }
      H[i + NX * j] = mask[i + NX * j] ? (coast ? Hshelf : H0) : 0.0;
    }
  /* MITgcm's cg2d operator: aW = g dt^2 H_w dyG / dxC, aS = g dt^2 H_s dxG / dyC, the free-surface term rA,
     aC = -(the four couplings) - rA; then scaled by 1 / max |coefficient| (cg2dNorm) */
  double amax = 0.0;
  for (int64_t j = 0; j < NY; j++) {
    const double lat = lat0 + (j + 0.5) * dlat, latS = lat0 + j * dlat;
    const double dx = R * cos(lat) * dlon, dy = R * dlat, dxS = R * cos(latS) * dlon;
    for (int64_t i = 0; i < NX; i++) {
      const int64_t c = i + NX * j;
      const int64_t iw = i > 0 ? c - 1 : (px ? c + NX - 1 : -1);
      const int64_t js = j > 0 ? c - NX : (py ? c + NX * (NY - 1) : -1);
      const double Hw = iw >= 0 ? fmin(H[iw], H[c]) : 0.0, Hs = js >= 0 ? fmin(H[js], H[c]) : 0.0;
      aW[c] = g * dt * dt * Hw * dy / dx;
      aS[c] = g * dt * dt * Hs * dxS / dy;
      if (aW[c] > amax) amax = aW[c];
      if (aS[c] > amax) amax = aS[c];
    }
  }
  for (int64_t j = 0; j < NY; j++) {
    const double lat = lat0 + (j + 0.5) * dlat, rA = R * cos(lat) * dlon * R * dlat;
    for (int64_t i = 0; i < NX; i++) {
      const int64_t c = i + NX * j;
      const int64_t ie = i < NX - 1 ? c + 1 : (px ? c - (NX - 1) : -1);
      const int64_t jn = j < NY - 1 ? c + NX : (py ? c - NX * (NY - 1) : -1);
      const double s = aW[c] + (ie >= 0 ? aW[ie] : 0.0) + aS[c] + (jn >= 0 ? aS[jn] : 0.0);
      aC[c] = mask[c] ? -(s + rA) : 0.0;
      if (-aC[c] > amax) amax = -aC[c];
    }
  }
  const double norm = amax > 0 ? 1.0 / amax : 1.0;
  for (int64_t c = 0; c < n; c++) {
    aW[c] *= norm;
    aS[c] *= norm;
    aC[c] *= norm;
  }
  free(H);
  return PKRYLOV_SUCCESS;
}

/* ------------------------------------------------------------------------------------------------ */
/* The thin shell on the cube sphere                                                                 */

/** Face frames: centre normal n, axes u (i) and v (j), u x v = n; the joins of grid.c's cube table. */
static const double cube_n[6][3] = {{1, 0, 0}, {0, 1, 0}, {0, 0, 1}, {-1, 0, 0}, {0, -1, 0}, {0, 0, -1}};
static const double cube_u[6][3] = {{0, 1, 0}, {-1, 0, 0}, {-1, 0, 0}, {0, 0, -1}, {0, 0, -1}, {0, 1, 0}};
static const double cube_v[6][3] = {{0, 0, 1}, {0, 0, 1}, {0, -1, 0}, {0, -1, 0}, {1, 0, 0}, {1, 0, 0}};

/** The unit-sphere point of face f at equiangular grid coordinates (s, t) (cell units: s = i + 0.5 is the
 *  centre of column i; N columns per face edge). */
static void cube_point(int f, double s, double t, int64_t N, double p[3]) {
  const double X = tan(-PK_PI / 4 + s * (PK_PI / 2) / (double)N), Y = tan(-PK_PI / 4 + t * (PK_PI / 2) / (double)N);
  double q[3], r = 0;
  for (int d = 0; d < 3; d++) {
    q[d] = cube_n[f][d] + X * cube_u[f][d] + Y * cube_v[f][d];
    r += q[d] * q[d];
  }
  r = 1.0 / sqrt(r);
  for (int d = 0; d < 3; d++) p[d] = q[d] * r;
}

/** Great-circle distance of unit vectors. */
static double arc(const double a[3], const double b[3]) {
  const double w0 = a[1] * b[2] - a[2] * b[1], w1 = a[2] * b[0] - a[0] * b[2], w2 = a[0] * b[1] - a[1] * b[0];
  return atan2(sqrt(w0 * w0 + w1 * w1 + w2 * w2), a[0] * b[0] + a[1] * b[1] + a[2] * b[2]);
}

/** The cell across edge e of face f at position m (the cube table of grid.c, one tile per face) and the edge
 *  of its face that meets this one. */
static void cube_across(int f, int e, int64_t m, int64_t N, int *g, int64_t *i2, int64_t *j2, int *e2) {
  int32_t conn[12 * 6];
  pkrylov_grid_connect_cubesphere(1, conn);
  const int32_t *c = conn + 3 * (4 * f + e);
  *g = c[0];
  *e2 = c[1];
  const int64_t m2 = c[2] ? N - 1 - m : m;
  *i2 = c[1] == PK_EDGE_W ? 0 : c[1] == PK_EDGE_E ? N - 1 : m2;
  *j2 = c[1] == PK_EDGE_S ? 0 : c[1] == PK_EDGE_N ? N - 1 : m2;
}

int pkrylov_cubesphere_stencil_coefficients(const pkrylov_thinshell_params *p, double *aW, double *aS, double *aV,
                                            double *aC) {
  PK_CHECK(p != NULL, NULL, PKRYLOV_ERR_NULL_POINTER, "argument 'p' is NULL");
  PK_CHECK_PTR(aW, NULL);
  PK_CHECK_PTR(aS, NULL);
  PK_CHECK_PTR(aV, NULL);
  PK_CHECK_PTR(aC, NULL);
  PK_CALL(pk_thinshell_check_params(NULL, __func__, p));
  PK_CHECK(p->nx == p->ny, NULL, PKRYLOV_ERR_INVALID_SIZE,
           "arguments 'p->nx' = %d and 'p->ny' = %d: the faces of the cube are square", p->nx, p->ny);
  PK_CHECK(p->geometry == PKRYLOV_GEOMETRY_GNOMONIC, NULL, PKRYLOV_ERR_INVALID_VALUE,
           "argument 'p->geometry': the cube sphere is gnomonic");
  const int64_t N = p->nx, nz = p->nz, ncol = 6 * N * N;
  PK_CHECK(ncol <= (INT64_MAX / 64) / nz, NULL, PKRYLOV_ERR_INVALID_SIZE, "too many cells");
  /* per column: area, the alphas of its west and south faces, their sum over the four faces */
  double *lev = malloc(sizeof(double) * (size_t)(4 * nz)), *col = malloc(sizeof(double) * (size_t)(4 * ncol));
  if (!lev || !col) {
    free(lev), free(col);
    return pk_error(NULL, PKRYLOV_ERR_OUT_OF_MEMORY, __func__, "cannot allocate the geometry (%lld columns)",
                    (long long)ncol);
  }
  double *a = lev, *b = a + nz, *c = b + nz, *d = c + nz;
  double *area = col, *axw = area + ncol, *ays = axw + ncol, *asum = ays + ncol;
  pk_thinshell_levels(p, a, b, c, d);
  for (int f = 0; f < 6; f++)
    for (int64_t j = 0; j < N; j++)
      for (int64_t i = 0; i < N; i++) {
        const int64_t q = i + N * (j + N * f);
        double v00[3], v10[3], v01[3], v11[3], ctr[3];
        cube_point(f, (double)i, (double)j, N, v00);
        cube_point(f, (double)(i + 1), (double)j, N, v10);
        cube_point(f, (double)i, (double)(j + 1), N, v01);
        cube_point(f, (double)(i + 1), (double)(j + 1), N, v11);
        cube_point(f, i + 0.5, j + 0.5, N, ctr);
        /* the spherical quadrilateral's area: two spherical triangles (l'Huilier through the solid angle) */
        double tri = 0.0;
        const double *T[2][3] = {{v00, v10, v11}, {v00, v11, v01}};
        for (int t = 0; t < 2; t++) {
          const double *A = T[t][0], *B = T[t][1], *C = T[t][2];
          const double det = A[0] * (B[1] * C[2] - B[2] * C[1]) - A[1] * (B[0] * C[2] - B[2] * C[0]) +
                             A[2] * (B[0] * C[1] - B[1] * C[0]);
          const double den = 1.0 + (A[0] * B[0] + A[1] * B[1] + A[2] * B[2]) + (B[0] * C[0] + B[1] * C[1] + B[2] * C[2]) +
                             (C[0] * A[0] + C[1] * A[1] + C[2] * A[2]);
          tri += 2.0 * atan2(fabs(det), den);
        }
        area[q] = tri;
        /* west face: edge v00-v01, centres of (i-1, j) (across the cube edge at i = 0) and (i, j) */
        double cw[3], cs[3];
        if (i > 0) {
          cube_point(f, i - 0.5, j + 0.5, N, cw);
        } else {
          int g, e2;
          int64_t i2, j2;
          cube_across(f, PK_EDGE_W, j, N, &g, &i2, &j2, &e2);
          cube_point(g, i2 + 0.5, j2 + 0.5, N, cw);
        }
        if (j > 0) {
          cube_point(f, i + 0.5, j - 0.5, N, cs);
        } else {
          int g, e2;
          int64_t i2, j2;
          cube_across(f, PK_EDGE_S, i, N, &g, &i2, &j2, &e2);
          cube_point(g, i2 + 0.5, j2 + 0.5, N, cs);
        }
        axw[q] = arc(v00, v01) / arc(cw, ctr);
        ays[q] = arc(v00, v10) / arc(cs, ctr);
      }
  /* the east and north faces are the neighbours' west or south ones (every cube join pairs an east or north
     edge with a west or south one) */
  for (int f = 0; f < 6; f++)
    for (int64_t j = 0; j < N; j++)
      for (int64_t i = 0; i < N; i++) {
        const int64_t q = i + N * (j + N * f);
        double ae, an;
        if (i < N - 1) {
          ae = axw[q + 1];
        } else {
          int g, e2;
          int64_t i2, j2;
          cube_across(f, PK_EDGE_E, j, N, &g, &i2, &j2, &e2);
          ae = (e2 == PK_EDGE_W ? axw : ays)[i2 + N * (j2 + N * g)];
        }
        if (j < N - 1) {
          an = ays[q + N];
        } else {
          int g, e2;
          int64_t i2, j2;
          cube_across(f, PK_EDGE_N, i, N, &g, &i2, &j2, &e2);
          an = (e2 == PK_EDGE_W ? axw : ays)[i2 + N * (j2 + N * g)];
        }
        asum[q] = axw[q] + ays[q] + ae + an;
      }
  for (int64_t k = 0; k < nz; k++)
    for (int64_t q = 0; q < ncol; q++) {
      const int64_t cell = q + ncol * k;
      aW[cell] = -a[k] * axw[q];
      aS[cell] = -a[k] * ays[q];
      aV[cell] = k > 0 ? -area[q] * b[k] : 0.0;
      aC[cell] = area[q] * (d[k] + b[k] + c[k]) + asum[q] * a[k];
    }
  free(lev), free(col);
  return PKRYLOV_SUCCESS;
}

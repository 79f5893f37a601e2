/**
 * @file pk_grid_test.h
 * @brief Independent references for the tiled-grid tests (t160, t960): a global problem on one rectangle or
 *        the six faces of a cube, its neighbours found WITHOUT the library's connectivity tables (rectangle:
 *        coordinates; cube: the 3-D positions of the cell centres, nearest neighbour by brute force), a
 *        brute-force global product in the documented row order, and the model's halo'd arrays of any tiling.
 */
#ifndef PK_GRID_TEST_H
#define PK_GRID_TEST_H

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "pk_test.h"

enum { PKT_W = 0, PKT_E = 1, PKT_S = 2, PKT_N = 3 };

/** A global problem: nf faces of fx x fy cells (1 face: a rectangle; 6: the cube), nz levels. */
typedef struct {
  int nf, fx, fy, nz;
  int perx, pery;      /* rectangle: periodic in x / y */
  int64_t ncell;       /* nf fx fy nz */
  /* per cell (index pkt_gidx): the coefficients of its west, south and lower faces, its diagonal, its mask */
  double *fW, *fS, *fV, *fC;
  int32_t *mask;
  /* neighbours per column and direction (W, E, S, N): column index f*fx*fy + I + fx*J, -1 wall; and the
     direction under which the neighbour sees this column */
  int64_t *nb;
  int *nbdir;
} pkt_global;

static inline int64_t pkt_col(const pkt_global *G, int f, int64_t I, int64_t J) {
  return (int64_t)f * G->fx * G->fy + I + (int64_t)G->fx * J;
}
static inline int64_t pkt_gidx(const pkt_global *G, int64_t col, int64_t k) {
  return col + (int64_t)G->nf * G->fx * G->fy * k;
}

/* ---- cube geometry: face f has centre normal n, axes u (i) and v (j), u x v = n ---- */
static const double pkt_cube_n[6][3] = {{1, 0, 0}, {0, 1, 0}, {0, 0, 1}, {-1, 0, 0}, {0, -1, 0}, {0, 0, -1}};
static const double pkt_cube_u[6][3] = {{0, 1, 0}, {-1, 0, 0}, {-1, 0, 0}, {0, 0, -1}, {0, 0, -1}, {0, 1, 0}};
static const double pkt_cube_v[6][3] = {{0, 0, 1}, {0, 0, 1}, {0, -1, 0}, {0, -1, 0}, {1, 0, 0}, {1, 0, 0}};

/** 3-D point n + a u + b v (+ c n) of face f. */
static inline void pkt_cube_point(int f, double a, double b, double c, double p[3]) {
  for (int d = 0; d < 3; d++) p[d] = (1.0 + c) * pkt_cube_n[f][d] + a * pkt_cube_u[f][d] + b * pkt_cube_v[f][d];
}

/** Cell centre of face f cell (I, J), N cells per face edge. */
static inline void pkt_cube_centre(int f, int64_t I, int64_t J, int64_t N, double p[3]) {
  pkt_cube_point(f, -1.0 + (2.0 * I + 1.0) / N, -1.0 + (2.0 * J + 1.0) / N, 0.0, p);
}

/** The neighbours of every column: coordinates (rectangle) or the nearest centre across the cube edge. */
static void pkt_global_neighbours(pkt_global *G) {
  const int64_t ncol = (int64_t)G->nf * G->fx * G->fy;
  G->nb = malloc(sizeof(int64_t) * 4 * (size_t)ncol);
  G->nbdir = malloc(sizeof(int) * 4 * (size_t)ncol);
  for (int f = 0; f < G->nf; f++)
    for (int64_t J = 0; J < G->fy; J++)
      for (int64_t I = 0; I < G->fx; I++) {
        const int64_t c = pkt_col(G, f, I, J);
        for (int d = 0; d < 4; d++) {
          int64_t I2 = I + (d == PKT_W ? -1 : d == PKT_E ? 1 : 0), J2 = J + (d == PKT_S ? -1 : d == PKT_N ? 1 : 0);
          int64_t nbc = -1;
          int nd = d ^ 1;
          if (I2 >= 0 && I2 < G->fx && J2 >= 0 && J2 < G->fy) {
            nbc = pkt_col(G, f, I2, J2);
          } else if (G->nf == 1) {
            if ((d <= PKT_E && G->perx) || (d >= PKT_S && G->pery))
              nbc = pkt_col(G, f, (I2 + G->fx) % G->fx, (J2 + G->fy) % G->fy);
          } else {
            /* the centre of the cell across the cube edge: one half cell on this face to the edge, one half
               cell into the other face (direction -n) */
            const int64_t N = G->fx;
            double a = -1.0 + (2.0 * I + 1.0) / N, b = -1.0 + (2.0 * J + 1.0) / N, p[3];
            if (d == PKT_W) a = -1.0;
            if (d == PKT_E) a = 1.0;
            if (d == PKT_S) b = -1.0;
            if (d == PKT_N) b = 1.0;
            pkt_cube_point(f, a, b, -1.0 / N, p);
            double best = 1e300;
            for (int g = 0; g < 6; g++)
              for (int64_t JJ = 0; JJ < N; JJ++)
                for (int64_t II = 0; II < N; II++) {
                  if (g == f) continue;
                  double q[3], dd = 0;
                  pkt_cube_centre(g, II, JJ, N, q);
                  for (int x = 0; x < 3; x++) dd += (q[x] - p[x]) * (q[x] - p[x]);
                  if (dd < best) best = dd, nbc = pkt_col(G, g, II, JJ);
                }
          }
          G->nb[4 * c + d] = nbc;
          G->nbdir[4 * c + d] = nd;
        }
      }
  /* the direction the neighbour sees us under (the cube's rotated edges): search its four */
  for (int64_t c = 0; c < ncol; c++)
    for (int d = 0; d < 4; d++) {
      const int64_t b = G->nb[4 * c + d];
      if (b < 0) continue;
      int found = -1;
      for (int d2 = 0; d2 < 4; d2++)
        if (G->nb[4 * b + d2] == c && (b != c || d2 != d)) {
          if (found < 0 || d2 == (d ^ 1)) found = d2;
        }
      G->nbdir[4 * c + d] = found;
    }
}

/**
 * A random global problem (negative definite like the models' when neg; symmetric by the face storage),
 * seed fixed. mask_dry: fraction of dry columns (0 = no mask). The coefficient of a face is stored on the
 * cell whose west / south / lower face it is; faces across the cube edges are stored on the cell for which
 * the face is a west or south one (every cube join pairs such an edge with an east or north one).
 */
static void pkt_global_make(pkt_global *G, int nf, int fx, int fy, int nz, int perx, int pery, double mask_dry,
                            int neg, uint64_t seed) {
  memset(G, 0, sizeof *G);
  G->nf = nf, G->fx = fx, G->fy = fy, G->nz = nz, G->perx = perx, G->pery = pery;
  G->ncell = (int64_t)nf * fx * fy * nz;
  const int64_t n = G->ncell, ncol = (int64_t)nf * fx * fy;
  G->fW = malloc(sizeof(double) * (size_t)n);
  G->fS = malloc(sizeof(double) * (size_t)n);
  G->fV = malloc(sizeof(double) * (size_t)n);
  G->fC = malloc(sizeof(double) * (size_t)n);
  G->mask = malloc(sizeof(int32_t) * (size_t)n);
  pkt_global_neighbours(G);
  uint64_t st = seed;
  const double sg = neg ? -1.0 : 1.0;
  for (int64_t q = 0; q < n; q++) {
    G->fW[q] = sg * (0.5 + 0.5 * pk_test_rand(&st)) * -1.0;
    G->fS[q] = sg * (0.5 + 0.5 * pk_test_rand(&st)) * -1.0;
    G->fV[q] = sg * (2.0 + pk_test_rand(&st)) * -1.0;
  }
  for (int64_t c = 0; c < ncol; c++) {
    const int dry = mask_dry > 0 && (pk_test_rand(&st) * 0.5 + 0.5) < mask_dry;
    for (int64_t k = 0; k < nz; k++) {
      const int64_t q = pkt_gidx(G, c, k);
      /* the bottom levels of some columns are dry too */
      G->mask[q] = !(dry || (mask_dry > 0 && k == nz - 1 && nz > 1 && (c % 3) == 0));
    }
  }
  /* diagonal: minus the sum of the couplings of the faces that exist, plus a mass term (definite) */
  for (int64_t c = 0; c < ncol; c++)
    for (int64_t k = 0; k < nz; k++) {
      const int64_t q = pkt_gidx(G, c, k);
      double s = 0.0;
      for (int d = 0; d < 4; d++) {
        const int64_t b = G->nb[4 * c + d];
        if (b < 0) continue;
        const int64_t qb = pkt_gidx(G, b, k);
        const int nd = G->nbdir[4 * c + d];
        s += (d == PKT_W) ? G->fW[q] : (d == PKT_S) ? G->fS[q] : (nd == PKT_W) ? G->fW[qb] : G->fS[qb];
      }
      if (k > 0) s += G->fV[q];
      if (k < nz - 1) s += G->fV[pkt_gidx(G, c, k + 1)];
      G->fC[q] = -s + sg * (0.1 + 0.05 * (pk_test_rand(&st) + 1.0));
    }
}

static void pkt_global_free(pkt_global *G) {
  free(G->fW), free(G->fS), free(G->fV), free(G->fC), free(G->mask), free(G->nb), free(G->nbdir);
  memset(G, 0, sizeof *G);
}

static inline int pkt_wet(const pkt_global *G, int64_t q, int use_mask) { return !use_mask || G->mask[q]; }

/**
 * The coupling of the face of cell (column c, level k) in direction d (0 when none: a wall, a dry cell),
 * from the cell that stores it.
 */
static inline double pkt_coupling(const pkt_global *G, int64_t c, int64_t k, int d, int use_mask) {
  const int64_t b = G->nb[4 * c + d];
  if (b < 0) return 0.0;
  const int64_t q = pkt_gidx(G, c, k), qb = pkt_gidx(G, b, k);
  if (!pkt_wet(G, q, use_mask) || !pkt_wet(G, qb, use_mask)) return 0.0;
  const int nd = G->nbdir[4 * c + d];
  return (d == PKT_W) ? G->fW[q] : (d == PKT_S) ? G->fS[q] : (nd == PKT_W) ? G->fW[qb] : G->fS[qb];
}

/**
 * y = A x, brute force over the global problem, each row in the documented order of
 * pkrylov_operator_create_grid_stencil(): aC x + cW xW + cE xE + cS xS + cN xN + cD xD + cU xU, a west wall
 * as aC x + S + N + D + U (+ E), an east wall without E, missing S, N, D, U as 0 times the own value.
 */
static void pkt_global_apply(const pkt_global *G, int use_mask, const double *x, double *y) {
  const int64_t ncol = (int64_t)G->nf * G->fx * G->fy, nz = G->nz;
  for (int64_t k = 0; k < nz; k++)
    for (int64_t c = 0; c < ncol; c++) {
      const int64_t q = pkt_gidx(G, c, k);
      const int wc = pkt_wet(G, q, use_mask);
      const double xc = x[q], ac = wc ? G->fC[q] : 0.0;
      double xv[4], cv[4];
      for (int d = 0; d < 4; d++) {
        const int64_t b = G->nb[4 * c + d];
        xv[d] = b >= 0 ? x[pkt_gidx(G, b, k)] : xc;
        cv[d] = pkt_coupling(G, c, k, d, use_mask);
      }
      const int downok = k > 0 && wc && pkt_wet(G, q - ncol, use_mask);
      const int upok = k < nz - 1 && wc && pkt_wet(G, q + ncol, use_mask);
      const double cd = downok ? G->fV[q] : 0.0, cu = upok ? G->fV[q + ncol] : 0.0;
      const double xd = k > 0 ? x[q - ncol] : xc, xu = k < nz - 1 ? x[q + ncol] : xc;
      const int hasW = G->nb[4 * c + PKT_W] >= 0, hasE = G->nb[4 * c + PKT_E] >= 0;
      double s;
      if (!hasW) {
        s = ac * xc + cv[PKT_S] * xv[PKT_S] + cv[PKT_N] * xv[PKT_N] + cd * xd + cu * xu;
        if (hasE) s += cv[PKT_E] * xv[PKT_E];
      } else if (hasE) {
        s = ac * xc + cv[PKT_W] * xv[PKT_W] + cv[PKT_E] * xv[PKT_E] + cv[PKT_S] * xv[PKT_S] + cv[PKT_N] * xv[PKT_N] +
            cd * xd + cu * xu;
      } else {
        s = ac * xc + cv[PKT_W] * xv[PKT_W] + cv[PKT_S] * xv[PKT_S] + cv[PKT_N] * xv[PKT_N] + cd * xd + cu * xu;
      }
      y[q] = s;
    }
}

/** A tiling: tiles of snx x sny per face (ntx x nty per face), global tile numbers as the library's
 *  connectivity helpers number them. */
typedef struct {
  int snx, sny, olx, oly, ntx, nty, ntiles;
} pkt_tiling;

static inline pkt_tiling pkt_tiling_make(const pkt_global *G, int snx, int sny, int olx, int oly) {
  pkt_tiling T = {snx, sny, olx, oly, G->fx / snx, G->fy / sny, 0};
  T.ntiles = G->nf * T.ntx * T.nty;
  return T;
}

/** Face and tile coordinates of global tile number T. */
static inline void pkt_tile_pos(const pkt_tiling *T, int tile, int *f, int *tx, int *ty) {
  const int per = T->ntx * T->nty;
  *f = tile / per;
  *tx = (tile % per) % T->ntx;
  *ty = (tile % per) / T->ntx;
}

/** Halo'd array (NaN in the halos: the library must not read them) of the nlocal tiles of a global field. */
static double *pkt_halo_array(const pkt_global *G, const pkt_tiling *T, int nlocal, const int32_t *tiles,
                              const double *glob) {
  const int64_t hx = T->snx + 2 * T->olx, hy = T->sny + 2 * T->oly, nz = G->nz;
  double *h = malloc(sizeof(double) * (size_t)(hx * hy * nz * nlocal));
  for (int64_t i = 0; i < hx * hy * nz * nlocal; i++) h[i] = NAN;
  for (int t = 0; t < nlocal; t++) {
    int f, tx, ty;
    pkt_tile_pos(T, tiles[t], &f, &tx, &ty);
    for (int64_t k = 0; k < nz; k++)
      for (int64_t j = 0; j < T->sny; j++)
        for (int64_t i = 0; i < T->snx; i++) {
          const int64_t c = pkt_col(G, f, (int64_t)tx * T->snx + i, (int64_t)ty * T->sny + j);
          h[(i + T->olx) + hx * ((j + T->oly) + hy * (k + nz * t))] = glob[pkt_gidx(G, c, k)];
        }
  }
  return h;
}

/** The same for an int32 field (the mask; 0 in the halos). */
static int32_t *pkt_halo_mask(const pkt_global *G, const pkt_tiling *T, int nlocal, const int32_t *tiles) {
  const int64_t hx = T->snx + 2 * T->olx, hy = T->sny + 2 * T->oly, nz = G->nz;
  int32_t *h = calloc((size_t)(hx * hy * nz * nlocal), sizeof(int32_t));
  for (int t = 0; t < nlocal; t++) {
    int f, tx, ty;
    pkt_tile_pos(T, tiles[t], &f, &tx, &ty);
    for (int64_t k = 0; k < nz; k++)
      for (int64_t j = 0; j < T->sny; j++)
        for (int64_t i = 0; i < T->snx; i++) {
          const int64_t c = pkt_col(G, f, (int64_t)tx * T->snx + i, (int64_t)ty * T->sny + j);
          h[(i + T->olx) + hx * ((j + T->oly) + hy * (k + nz * t))] = G->mask[pkt_gidx(G, c, k)];
        }
  }
  return h;
}

/** Global index of compact cell q of the local tiles. */
static inline int64_t pkt_compact_to_global(const pkt_global *G, const pkt_tiling *T, int nlocal,
                                            const int32_t *tiles, int64_t q) {
  const int64_t snx = T->snx, sny = T->sny, ncol = snx * sny * nlocal;
  const int64_t col = q % ncol, k = q / ncol, t = col / (snx * sny), j = (col / snx) % sny, i = col % snx;
  int f, tx, ty;
  pkt_tile_pos(T, tiles[t], &f, &tx, &ty);
  return pkt_gidx(G, pkt_col(G, f, (int64_t)tx * snx + i, (int64_t)ty * sny + j), k);
}

/** A grid stencil of the local tiles of G on ctx (conn from the library's helper for G's topology). */
static int pkt_grid_operator(pkrylov_context ctx, const pkt_global *G, const pkt_tiling *T, int nlocal,
                             const int32_t *tiles, int use_mask, pkrylov_grid *g, pkrylov_operator *A) {
  int32_t *conn = malloc(sizeof(int32_t) * 12 * (size_t)T->ntiles);
  int e;
  if (G->nf == 1)
    e = pkrylov_grid_connect_rect(T->ntx, T->nty,
                                  PKRYLOV_PERIODIC_NONE + (G->perx ? 1 : 0) + (G->pery ? 2 : 0), conn);
  else
    e = pkrylov_grid_connect_cubesphere(T->ntx, conn);
  if (!e) e = pkrylov_grid_create(ctx, T->snx, T->sny, T->olx, T->oly, T->ntiles, conn, nlocal, tiles, g);
  free(conn);
  if (e) return e;
  double *w = pkt_halo_array(G, T, nlocal, tiles, G->fW), *s = pkt_halo_array(G, T, nlocal, tiles, G->fS);
  double *v = pkt_halo_array(G, T, nlocal, tiles, G->fV), *c = pkt_halo_array(G, T, nlocal, tiles, G->fC);
  int32_t *m = use_mask ? pkt_halo_mask(G, T, nlocal, tiles) : NULL;
  e = pkrylov_operator_create_grid_stencil(*g, G->nz, w, s, G->nz > 1 ? v : NULL, c, m, A);
  free(w), free(s), free(v), free(c), free(m);
  return e;
}

#endif /* PK_GRID_TEST_H */

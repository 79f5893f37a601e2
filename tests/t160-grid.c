/**
 * @file t160-grid.c
 * @brief Tiled grids on one rank: the connectivity helpers against independent geometry, the grid stencil's
 *        product against the one-tile stencil and a brute-force global operator (walls, periodic, cube
 *        sphere; several tiles per rank in any order; halos never read), the approximate-inverse
 *        preconditioner against MITgcm's formula, coefficient updates, solves on halo'd arrays against a
 *        dense LAPACK solve, and every bad input with its code.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pk_grid_test.h"
#include "pk_test.h"
#include "pkrylov.h"

static pkrylov_context cpu_ctx(void) {
  pkrylov_context ctx = NULL;
  if (pkrylov_context_create(PKRYLOV_BACKEND_CPU, &ctx)) return NULL;
  return ctx;
}

/** Random vector of n values. */
static double *rand_vec(int64_t n, uint64_t seed) {
  double *v = malloc(sizeof(double) * (size_t)n);
  for (int64_t i = 0; i < n; i++) v[i] = pk_test_rand(&seed);
  return v;
}

/** Bitwise equality of two doubles (NaN never equal). */
static int same_bits(double a, double b) { return memcmp(&a, &b, sizeof a) == 0 && a == a; }

/** A permutation of 0..n-1 (the local tiles in an arbitrary order). */
static void shuffle_i32(int32_t *v, int n, uint64_t seed) {
  for (int i = n - 1; i > 0; i--) {
    const int j = (int)((pk_test_rand(&seed) * 0.5 + 0.5) * (i + 1)) % (i + 1);
    const int32_t t = v[i];
    v[i] = v[j], v[j] = t;
  }
}

/**
 * The tiled product of G (tiling T, all tiles on this rank in a shuffled order) against the brute-force
 * global product, bitwise; with cmp_stencil7 also against pkrylov_operator_create_stencil7 of the global
 * arrays (a rectangle with walls).
 */
static int check_product(const pkt_global *G, int snx, int sny, int use_mask, int cmp_stencil7, uint64_t seed) {
  pkrylov_context ctx = cpu_ctx();
  PK_REQUIRE(ctx, "context");
  pkt_tiling T = pkt_tiling_make(G, snx, sny, 2, 1);
  int32_t *tiles = malloc(sizeof(int32_t) * (size_t)T.ntiles);
  for (int t = 0; t < T.ntiles; t++) tiles[t] = t;
  shuffle_i32(tiles, T.ntiles, seed);
  pkrylov_grid g = NULL;
  pkrylov_operator A = NULL;
  PK_REQUIRE_OK(ctx, pkt_grid_operator(ctx, G, &T, T.ntiles, tiles, use_mask, &g, &A));
  const int64_t n = G->ncell;
  double *xg = rand_vec(n, seed + 1), *yg = malloc(sizeof(double) * (size_t)n);
  double *xc = malloc(sizeof(double) * (size_t)n), *yc = malloc(sizeof(double) * (size_t)n);
  for (int64_t q = 0; q < n; q++) xc[q] = xg[pkt_compact_to_global(G, &T, T.ntiles, tiles, q)];
  PK_REQUIRE_OK(ctx, pkrylov_operator_apply(A, PKRYLOV_MEM_HOST, xc, yc));
  pkt_global_apply(G, use_mask, xg, yg);
  int64_t bad = 0;
  for (int64_t q = 0; q < n; q++) {
    const int64_t gq = pkt_compact_to_global(G, &T, T.ntiles, tiles, q);
    if (!same_bits(yc[q], yg[gq]) && bad++ < 3)
      PK_EXPECT(0, "tiles %dx%d: cell %lld (global %lld): %.17g vs brute force %.17g", snx, sny, (long long)q,
                (long long)gq, yc[q], yg[gq]);
  }
  PK_EXPECT(bad == 0, "%lld cells differ from the brute-force product", (long long)bad);
  if (cmp_stencil7) {
    pkrylov_operator S = NULL;
    PK_REQUIRE_OK(ctx, pkrylov_operator_create_stencil7(ctx, G->fx, G->fy, G->nz, G->fW, G->fS, G->fV, G->fC,
                                                        use_mask ? G->mask : NULL, &S));
    double *ys = malloc(sizeof(double) * (size_t)n);
    PK_REQUIRE_OK(ctx, pkrylov_operator_apply(S, PKRYLOV_MEM_HOST, xg, ys));
    int64_t bad7 = 0;
    for (int64_t q = 0; q < n; q++) {
      const int64_t gq = pkt_compact_to_global(G, &T, T.ntiles, tiles, q);
      if (!same_bits(yc[q], ys[gq])) bad7++;
    }
    PK_EXPECT(bad7 == 0, "tiles %dx%d: %lld cells differ from the one-tile stencil", snx, sny, (long long)bad7);
    /* the brute force itself is the one-tile stencil on a rectangle with walls */
    int64_t badb = 0;
    for (int64_t q = 0; q < n; q++) badb += !same_bits(yg[q], ys[q]);
    PK_EXPECT(badb == 0, "the brute-force reference differs from the one-tile stencil in %lld cells", (long long)badb);
    free(ys);
    pkrylov_operator_destroy(&S);
  }
  free(xg), free(yg), free(xc), free(yc), free(tiles);
  PK_EXPECT_CODE(ctx, pkrylov_grid_destroy(&g), PKRYLOV_ERR_INVALID_STATE); /* A still uses it */
  pkrylov_operator_destroy(&A);
  PK_REQUIRE_OK(ctx, pkrylov_grid_destroy(&g));
  pkrylov_context_destroy(&ctx);
  PK_TEST_END();
}

PK_TEST_CASE(connect_rect) {
  /* every tile's neighbours from its coordinates, walls and all periodic variants */
  const int ntx = 4, nty = 3;
  for (int per = PKRYLOV_PERIODIC_NONE; per <= PKRYLOV_PERIODIC_XY; per++) {
    int32_t conn[12 * 12];
    PK_REQUIRE_OK(NULL, pkrylov_grid_connect_rect(ntx, nty, per, conn));
    const int px = (per - PKRYLOV_PERIODIC_NONE) & 1, py = ((per - PKRYLOV_PERIODIC_NONE) & 2) != 0;
    for (int ty = 0; ty < nty; ty++)
      for (int tx = 0; tx < ntx; tx++) {
        const int t = tx + ntx * ty;
        const int dx[4] = {-1, 1, 0, 0}, dy[4] = {0, 0, -1, 1};
        for (int e = 0; e < 4; e++) {
          int x = tx + dx[e], y = ty + dy[e];
          int want = -1;
          if (x >= 0 && x < ntx && y >= 0 && y < nty) want = x + ntx * y;
          else if (e < 2 && px) want = ((x + ntx) % ntx) + ntx * y;
          else if (e >= 2 && py) want = x + ntx * ((y + nty) % nty);
          const int32_t *c = conn + 3 * (4 * t + e);
          PK_EXPECT(c[0] == want, "periodic %d tile %d edge %d: neighbour %d, want %d", per, t, e, c[0], want);
          if (want >= 0) PK_EXPECT(c[1] == (e ^ 1) && c[2] == 0, "tile %d edge %d: edge %d flag %d", t, e, c[1], c[2]);
        }
      }
  }
  PK_TEST_END();
}

PK_TEST_CASE(connect_cubesphere_geometry) {
  /* each cell across a tile edge, as the table says, is the nearest cell centre across the cube edge in 3-D
     (pkt_global_neighbours, brute force), for 1, 2 and 3 tiles per face edge */
  for (int nf = 1; nf <= 3; nf++) {
    const int snx = 2, N = nf * snx;
    pkt_global G;
    pkt_global_make(&G, 6, N, N, 1, 0, 0, 0.0, 0, 7);
    const int ntiles = 6 * nf * nf;
    int32_t *conn = malloc(sizeof(int32_t) * 12 * (size_t)ntiles);
    PK_REQUIRE_OK(NULL, pkrylov_grid_connect_cubesphere(nf, conn));
    pkt_tiling T = pkt_tiling_make(&G, snx, snx, 1, 1);
    int64_t bad = 0;
    for (int t = 0; t < ntiles; t++) {
      int f, tx, ty;
      pkt_tile_pos(&T, t, &f, &tx, &ty);
      for (int e = 0; e < 4; e++) {
        const int32_t *c = conn + 3 * (4 * t + e);
        PK_EXPECT(c[0] >= 0, "cube: tile %d edge %d is a wall", t, e);
        if (c[0] < 0) continue;
        int f2, tx2, ty2;
        pkt_tile_pos(&T, c[0], &f2, &tx2, &ty2);
        for (int m = 0; m < snx; m++) {
          /* this edge cell and the table's cell across it */
          const int i = e == 0 ? 0 : e == 1 ? snx - 1 : m, j = e == 2 ? 0 : e == 3 ? snx - 1 : m;
          const int m2 = c[2] ? snx - 1 - m : m;
          const int i2 = c[1] == 0 ? 0 : c[1] == 1 ? snx - 1 : m2, j2 = c[1] == 2 ? 0 : c[1] == 3 ? snx - 1 : m2;
          const int64_t mine = pkt_col(&G, f, tx * snx + i, ty * snx + j);
          const int64_t across = pkt_col(&G, f2, tx2 * snx + i2, ty2 * snx + j2);
          if (G.nb[4 * mine + e] != across) bad++;
        }
      }
    }
    PK_EXPECT(bad == 0, "nf = %d: %lld edge cells meet another cell than the 3-D geometry says", nf, (long long)bad);
    free(conn);
    pkt_global_free(&G);
  }
  PK_TEST_END();
}

PK_TEST_CASE(product_rect_walls_bitwise) {
  /* walls: bitwise the one-tile stencil for every tiling (tiles of one column or row included), with and
     without a mask, 3-D and 2-D */
  const int tilings[][2] = {{12, 8}, {6, 4}, {4, 4}, {3, 2}, {1, 8}, {12, 1}, {1, 1}, {2, 8}};
  for (int nz = 1; nz <= 3; nz += 2)
    for (int use_mask = 0; use_mask <= 1; use_mask++) {
      pkt_global G;
      pkt_global_make(&G, 1, 12, 8, nz, 0, 0, use_mask ? 0.2 : 0.0, 1, 11 + nz);
      for (size_t a = 0; a < sizeof tilings / sizeof tilings[0]; a++)
        if (check_product(&G, tilings[a][0], tilings[a][1], use_mask, 1, 100 + a) != PK_PASS) pk_test_failures++;
      pkt_global_free(&G);
    }
  PK_TEST_END();
}

PK_TEST_CASE(product_periodic_bruteforce) {
  const int tilings[][2] = {{10, 6}, {5, 3}, {2, 2}, {5, 6}, {1, 3}};
  for (int per = 1; per <= 3; per++)
    for (int use_mask = 0; use_mask <= 1; use_mask++) {
      pkt_global G;
      pkt_global_make(&G, 1, 10, 6, 2, per & 1, (per & 2) != 0, use_mask ? 0.25 : 0.0, 1, 31 + per);
      for (size_t a = 0; a < sizeof tilings / sizeof tilings[0]; a++)
        if (check_product(&G, tilings[a][0], tilings[a][1], use_mask, 0, 200 + a) != PK_PASS) pk_test_failures++;
      pkt_global_free(&G);
    }
  PK_TEST_END();
}

PK_TEST_CASE(product_cubesphere_bruteforce) {
  /* faces of 6 x 6 columns: 1, 2 and 3 tiles per face edge (36, 9, 4 columns a tile) */
  for (int use_mask = 0; use_mask <= 1; use_mask++) {
    pkt_global G;
    pkt_global_make(&G, 6, 6, 6, 2, 0, 0, use_mask ? 0.2 : 0.0, 0, 41);
    for (int snx = 6; snx >= 2; snx /= 2 + (snx == 6))
      if (check_product(&G, snx, snx, use_mask, 0, 300 + snx) != PK_PASS) pk_test_failures++;
    if (check_product(&G, 2, 2, use_mask, 0, 399) != PK_PASS) pk_test_failures++;
    pkt_global_free(&G);
  }
  PK_TEST_END();
}

/** MITgcm's approximate inverse of a 2-D problem (test's own formula on the global arrays), applied. */
static void ainv_reference(const pkt_global *G, double f, const double *r, double *z) {
  const int64_t ncol = (int64_t)G->nf * G->fx * G->fy;
  double *pC = malloc(sizeof(double) * (size_t)ncol), *pF = malloc(sizeof(double) * 4 * (size_t)ncol);
  for (int64_t c = 0; c < ncol; c++) pC[c] = G->mask[c] ? (G->fC[c] == 0 ? 1.0 : 1.0 / G->fC[c]) : 1.0;
  for (int64_t c = 0; c < ncol; c++)
    for (int d = 0; d < 4; d++) {
      const int64_t b = G->nb[4 * c + d];
      pF[4 * c + d] = 0.0;
      if (b < 0) continue;
      const double a = pkt_coupling(G, c, 0, d, 1);
      /* the west (south) cell of the face: the neighbour when it lies west (south) of c */
      const double acw = G->mask[b] ? G->fC[b] : 0.0, acc = G->mask[c] ? G->fC[c] : 0.0;
      const int nb_is_ws = d == PKT_W || d == PKT_S;
      const double aw = nb_is_ws ? acw : acc, ac = nb_is_ws ? acc : acw;
      if (aw == 0.0) continue;
      const double t = f * (aw + ac);
      pF[4 * c + d] = -a / (t * t);
    }
  for (int64_t c = 0; c < ncol; c++) {
    double xv[4];
    for (int d = 0; d < 4; d++) xv[d] = G->nb[4 * c + d] >= 0 ? r[G->nb[4 * c + d]] : r[c];
    const int hasW = G->nb[4 * c + PKT_W] >= 0, hasE = G->nb[4 * c + PKT_E] >= 0;
    double s;
    if (!hasW) {
      s = pC[c] * r[c] + pF[4 * c + PKT_S] * xv[PKT_S] + pF[4 * c + PKT_N] * xv[PKT_N] + 0.0 * r[c] + 0.0 * r[c];
      if (hasE) s += pF[4 * c + PKT_E] * xv[PKT_E];
    } else if (hasE) {
      s = pC[c] * r[c] + pF[4 * c + PKT_W] * xv[PKT_W] + pF[4 * c + PKT_E] * xv[PKT_E] +
          pF[4 * c + PKT_S] * xv[PKT_S] + pF[4 * c + PKT_N] * xv[PKT_N] + 0.0 * r[c] + 0.0 * r[c];
    } else {
      s = pC[c] * r[c] + pF[4 * c + PKT_W] * xv[PKT_W] + pF[4 * c + PKT_S] * xv[PKT_S] +
          pF[4 * c + PKT_N] * xv[PKT_N] + 0.0 * r[c] + 0.0 * r[c];
    }
    z[c] = s;
  }
  free(pC), free(pF);
}

PK_TEST_CASE(ainv_formula) {
  /* the library's approximate inverse against MITgcm's formula (the test's), periodic rectangle and cube,
     masked, several tilings; and the caller's coefficients give the same preconditioner */
  const double f = 0.51;
  for (int cube = 0; cube <= 1; cube++) {
    pkt_global G;
    if (cube)
      pkt_global_make(&G, 6, 4, 4, 1, 0, 0, 0.2, 1, 51);
    else
      pkt_global_make(&G, 1, 8, 6, 1, 1, 1, 0.25, 1, 52);
    const int64_t n = G.ncell;
    double *r = rand_vec(n, 5), *zref = malloc(sizeof(double) * (size_t)n);
    for (int64_t q = 0; q < n; q++)
      if (!G.mask[q]) r[q] = 0.0; /* the solvers keep r = 0 at dry cells */
    ainv_reference(&G, f, r, zref);
    const int tiles_edge[2] = {cube ? 2 : 4, cube ? 4 : 2};
    for (int a = 0; a < 2; a++) {
      pkrylov_context ctx = cpu_ctx();
      const int sn = tiles_edge[a];
      pkt_tiling T = cube ? pkt_tiling_make(&G, sn, sn, 1, 1) : pkt_tiling_make(&G, sn, 3, 1, 1);
      int32_t *tiles = malloc(sizeof(int32_t) * (size_t)T.ntiles);
      for (int t = 0; t < T.ntiles; t++) tiles[t] = t;
      shuffle_i32(tiles, T.ntiles, 9 + a);
      pkrylov_grid g = NULL;
      pkrylov_operator A = NULL;
      pkrylov_precond M = NULL, M2 = NULL;
      PK_REQUIRE_OK(ctx, pkt_grid_operator(ctx, &G, &T, T.ntiles, tiles, 1, &g, &A));
      PK_REQUIRE_OK(ctx, pkrylov_precond_create_ainv(ctx, A, f, &M));
      double *rc = malloc(sizeof(double) * (size_t)n), *zc = malloc(sizeof(double) * (size_t)n);
      for (int64_t q = 0; q < n; q++) rc[q] = r[pkt_compact_to_global(&G, &T, T.ntiles, tiles, q)];
      PK_REQUIRE_OK(ctx, pkrylov_precond_apply(M, PKRYLOV_MEM_HOST, rc, zc));
      int64_t bad = 0;
      for (int64_t q = 0; q < n; q++) {
        const int64_t gq = pkt_compact_to_global(&G, &T, T.ntiles, tiles, q);
        if (!G.mask[gq]) continue; /* dry: z = r = 0 either way */
        if (!same_bits(zc[q], zref[gq]) && bad++ < 3)
          PK_EXPECT(0, "cube %d tiles %d: cell %lld: %.17g vs formula %.17g", cube, sn, (long long)gq, zc[q], zref[gq]);
      }
      PK_EXPECT(bad == 0, "cube %d tiles %d: %lld cells differ from MITgcm's formula", cube, sn, (long long)bad);
      /* the model's own pW, pS, pC (halo'd arrays; the cells that store each face) */
      {
        const int64_t ncol = (int64_t)G.nf * G.fx * G.fy;
        double *pW = calloc((size_t)ncol, sizeof(double)), *pS = calloc((size_t)ncol, sizeof(double));
        double *pC = malloc(sizeof(double) * (size_t)ncol), *e1 = calloc((size_t)ncol, sizeof(double));
        for (int64_t c = 0; c < ncol; c++) {
          e1[c] = 1.0;
          double zz[1];
          (void)zz;
        }
        /* pC and the face terms: apply the reference to unit vectors would be slow; recompute directly */
        for (int64_t c = 0; c < ncol; c++) {
          pC[c] = G.mask[c] ? (G.fC[c] == 0 ? 1.0 : 1.0 / G.fC[c]) : 1.0;
          for (int d = 0; d < 4; d += 2) { /* W and S faces stored on c */
            const int64_t b = G.nb[4 * c + d];
            if (b < 0) continue;
            const double aw = G.mask[b] ? G.fC[b] : 0.0, ac = G.mask[c] ? G.fC[c] : 0.0;
            const double cpl = pkt_coupling(&G, c, 0, d, 1), t = f * (aw + ac);
            (d == PKT_W ? pW : pS)[c] = aw == 0.0 ? 0.0 : -cpl / (t * t);
          }
        }
        /* faces across the cube edges stored on the cell whose W or S face they are: for an E or N cube
           edge of c the neighbour stores it (its W or S face) */
        if (cube)
          for (int64_t c = 0; c < ncol; c++)
            for (int d = 1; d < 4; d += 2) {
              const int64_t b = G.nb[4 * c + d];
              const int nd = G.nbdir[4 * c + d];
              if (b < 0 || (nd != PKT_W && nd != PKT_S)) continue;
              const double aw = G.mask[c] ? G.fC[c] : 0.0, ac = G.mask[b] ? G.fC[b] : 0.0;
              const double cpl = pkt_coupling(&G, c, 0, d, 1), t = f * (aw + ac);
              (nd == PKT_W ? pW : pS)[b] = aw == 0.0 ? 0.0 : -cpl / (t * t);
            }
        double *hW = pkt_halo_array(&G, &T, T.ntiles, tiles, pW), *hS = pkt_halo_array(&G, &T, T.ntiles, tiles, pS);
        double *hC = pkt_halo_array(&G, &T, T.ntiles, tiles, pC);
        PK_REQUIRE_OK(ctx, pkrylov_precond_create_ainv_coefficients(ctx, A, hW, hS, hC, &M2));
        double *z2 = malloc(sizeof(double) * (size_t)n);
        PK_REQUIRE_OK(ctx, pkrylov_precond_apply(M2, PKRYLOV_MEM_HOST, rc, z2));
        int64_t bad2 = 0;
        for (int64_t q = 0; q < n; q++) {
          const int64_t gq = pkt_compact_to_global(&G, &T, T.ntiles, tiles, q);
          if (G.mask[gq] && !same_bits(z2[q], zc[q])) bad2++;
        }
        PK_EXPECT(bad2 == 0, "cube %d: the model's coefficients give another preconditioner in %lld cells", cube,
                  (long long)bad2);
        free(pW), free(pS), free(pC), free(e1), free(hW), free(hS), free(hC), free(z2);
      }
      free(rc), free(zc), free(tiles);
      pkrylov_precond_destroy(&M2);
      pkrylov_precond_destroy(&M);
      pkrylov_operator_destroy(&A);
      pkrylov_grid_destroy(&g);
      pkrylov_context_destroy(&ctx);
    }
    free(r), free(zref);
    pkt_global_free(&G);
  }
  PK_TEST_END();
}

PK_TEST_CASE(ainv_plain_stencil) {
  /* on a 2-D column stencil (one tile, walls) the approximate inverse equals the formula's */
  pkrylov_context ctx = cpu_ctx();
  pkt_global G;
  pkt_global_make(&G, 1, 9, 7, 1, 0, 0, 0.2, 1, 61);
  pkrylov_operator A = NULL;
  pkrylov_precond M = NULL;
  PK_REQUIRE_OK(ctx, pkrylov_operator_create_stencil7(ctx, 9, 7, 1, G.fW, G.fS, G.fV, G.fC, G.mask, &A));
  PK_REQUIRE_OK(ctx, pkrylov_precond_create_ainv(ctx, A, 0.51, &M));
  double *r = rand_vec(G.ncell, 3), *z = malloc(sizeof(double) * (size_t)G.ncell);
  double *zref = malloc(sizeof(double) * (size_t)G.ncell);
  for (int64_t q = 0; q < G.ncell; q++)
    if (!G.mask[q]) r[q] = 0.0;
  ainv_reference(&G, 0.51, r, zref);
  PK_REQUIRE_OK(ctx, pkrylov_precond_apply(M, PKRYLOV_MEM_HOST, r, z));
  int64_t bad = 0;
  for (int64_t q = 0; q < G.ncell; q++)
    if (G.mask[q] && !same_bits(z[q], zref[q])) bad++;
  PK_EXPECT(bad == 0, "%lld cells differ from the formula", (long long)bad);
  free(r), free(z), free(zref);
  pkrylov_precond_destroy(&M);
  pkrylov_operator_destroy(&A);
  pkt_global_free(&G);
  pkrylov_context_destroy(&ctx);
  PK_TEST_END();
}

/** Solve with solver type st and preconditioner kind pk (0 none, 1 jacobi, 2 column, 3 ainv) on the grid of G
 *  (halo'd arrays) and compare with LAPACK on the operator's CSR export. */
static int solve_vs_dense(const pkt_global *G, int snx, int sny, int32_t st, int pk, double tol) {
  pkrylov_context ctx = cpu_ctx();
  pkt_tiling T = pkt_tiling_make(G, snx, sny, 3, 2);
  int32_t *tiles = malloc(sizeof(int32_t) * (size_t)T.ntiles);
  for (int t = 0; t < T.ntiles; t++) tiles[t] = T.ntiles - 1 - t;
  pkrylov_grid g = NULL;
  pkrylov_operator A = NULL;
  pkrylov_precond M = NULL;
  pkrylov_solver s = NULL;
  PK_REQUIRE_OK(ctx, pkt_grid_operator(ctx, G, &T, T.ntiles, tiles, 1, &g, &A));
  if (pk == 1) PK_REQUIRE_OK(ctx, pkrylov_precond_create(ctx, A, PKRYLOV_PRECOND_JACOBI, 0, PKRYLOV_LAYOUT_AUTO, &M));
  if (pk == 2) PK_REQUIRE_OK(ctx, pkrylov_precond_create(ctx, A, PKRYLOV_PRECOND_COLUMN, 0, PKRYLOV_LAYOUT_AUTO, &M));
  if (pk == 3) PK_REQUIRE_OK(ctx, pkrylov_precond_create_ainv(ctx, A, 0.51, &M));
  PK_REQUIRE_OK(ctx, pkrylov_solver_create(ctx, st, A, M, &s));
  PK_REQUIRE_OK(ctx, pkrylov_solver_set_tolerances(s, tol, 0.0));
  PK_REQUIRE_OK(ctx, pkrylov_solver_set_max_iterations(s, 2000));
  const int64_t n = G->ncell;
  double *bg = rand_vec(n, 77);
  for (int64_t q = 0; q < n; q++)
    if (!G->mask[q]) bg[q] = 0.0;
  double *bh = pkt_halo_array(G, &T, T.ntiles, tiles, bg);
  double *xh = pkt_halo_array(G, &T, T.ntiles, tiles, bg); /* halos NaN: must stay untouched */
  PK_REQUIRE_OK(ctx, pkrylov_solver_solve_halo(s, PKRYLOV_MEM_HOST, bh, xh));
  pkrylov_result res;
  PK_REQUIRE_OK(ctx, pkrylov_solver_get_result(s, &res));
  PK_EXPECT(res.converged, "type %d precond %d: %s after %d iterations", st, pk, pkrylov_reason_string(res.reason),
            res.iterations);
  /* the dense reference on the compact order */
  double *bc = malloc(sizeof(double) * (size_t)n), *xd = malloc(sizeof(double) * (size_t)n);
  double *xc = malloc(sizeof(double) * (size_t)n);
  PK_REQUIRE_OK(ctx, pkrylov_grid_pack(g, G->nz, PKRYLOV_MEM_HOST, bh, bc));
  PK_REQUIRE_OK(ctx, pkrylov_grid_pack(g, G->nz, PKRYLOV_MEM_HOST, xh, xc));
  /* dense LAPACK on the wet rows only (dry rows are empty) */
  int64_t nw = 0;
  int64_t *map = malloc(sizeof(int64_t) * (size_t)n);
  for (int64_t q = 0; q < n; q++) map[q] = G->mask[pkt_compact_to_global(G, &T, T.ntiles, tiles, q)] ? nw++ : -1;
  int64_t nn = 0;
  double *dense = pk_test_dense_from_operator(A, &nn);
  PK_REQUIRE(dense && nn == n, "dense export");
  double *Aw = calloc((size_t)(nw * nw), sizeof(double)), *bw = malloc(sizeof(double) * (size_t)nw);
  for (int64_t q = 0; q < n; q++) {
    if (map[q] < 0) continue;
    bw[map[q]] = bc[q];
    for (int64_t p = 0; p < n; p++)
      if (map[p] >= 0) Aw[map[q] + nw * map[p]] = dense[q * n + p]; /* column-major for LAPACK */
  }
  int info = pk_test_lapack_solve((int)nw, Aw, bw);
  PK_REQUIRE(info == 0, "dgesv info %d", info);
  double num = 0, den = 0;
  for (int64_t q = 0; q < n; q++) {
    if (map[q] < 0) {
      PK_EXPECT(xc[q] == bc[q], "dry cell %lld: x changed", (long long)q); /* x kept its initial value */
      continue;
    }
    num += (xc[q] - bw[map[q]]) * (xc[q] - bw[map[q]]);
    den += bw[map[q]] * bw[map[q]];
  }
  PK_EXPECT(sqrt(num / den) < 100 * tol, "type %d precond %d: relative error %.3g against LAPACK", st, pk,
            sqrt(num / den));
  /* halos untouched */
  const int64_t hx = snx + 2 * T.olx, hy = sny + 2 * T.oly, hn = hx * hy * G->nz * T.ntiles;
  int64_t touched = 0;
  for (int64_t i = 0; i < hn; i++) {
    const int64_t ii = i % hx, jj = (i / hx) % hy;
    const int halo = ii < T.olx || ii >= T.olx + snx || jj < T.oly || jj >= T.oly + sny;
    if (halo && !isnan(xh[i])) touched++;
  }
  PK_EXPECT(touched == 0, "%lld halo cells of x were written", (long long)touched);
  free(bg), free(bh), free(xh), free(bc), free(xd), free(xc), free(map), free(dense), free(Aw), free(bw), free(tiles);
  pkrylov_solver_destroy(&s);
  pkrylov_precond_destroy(&M);
  pkrylov_operator_destroy(&A);
  pkrylov_grid_destroy(&g);
  pkrylov_context_destroy(&ctx);
  PK_TEST_END();
}

PK_TEST_CASE(solve_periodic_2d_dense) {
  pkt_global G;
  pkt_global_make(&G, 1, 12, 8, 1, 1, 1, 0.15, 1, 71);
  static const int32_t types[] = {PKRYLOV_SOLVER_CG, PKRYLOV_SOLVER_PIPECG, PKRYLOV_SOLVER_BICGSTAB,
                                  PKRYLOV_SOLVER_GMRES};
  for (size_t a = 0; a < sizeof types / sizeof types[0]; a++)
    for (int pk = 0; pk <= 3; pk += (pk == 1 ? 2 : 1))
      if (solve_vs_dense(&G, 4, 4, types[a], pk, 1e-10) != PK_PASS) pk_test_failures++;
  pkt_global_free(&G);
  PK_TEST_END();
}

PK_TEST_CASE(solve_cubesphere_3d_dense) {
  pkt_global G;
  pkt_global_make(&G, 6, 4, 4, 3, 0, 0, 0.1, 1, 81);
  static const int32_t types[] = {PKRYLOV_SOLVER_CG, PKRYLOV_SOLVER_PIPECG, PKRYLOV_SOLVER_PIPEBICGSTAB,
                                  PKRYLOV_SOLVER_FGMRES};
  for (size_t a = 0; a < sizeof types / sizeof types[0]; a++)
    if (solve_vs_dense(&G, 2, 2, types[a], 2, 1e-10) != PK_PASS) pk_test_failures++;
  pkt_global_free(&G);
  PK_TEST_END();
}

PK_TEST_CASE(column_precond_matches_stencil7) {
  /* the column preconditioner of a grid stencil on a rectangle with walls is the one-tile stencil's */
  pkrylov_context ctx = cpu_ctx();
  pkt_global G;
  pkt_global_make(&G, 1, 8, 6, 5, 0, 0, 0.2, 1, 91);
  pkt_tiling T = pkt_tiling_make(&G, 4, 3, 1, 1);
  int32_t tiles[4] = {2, 0, 3, 1};
  pkrylov_grid g = NULL;
  pkrylov_operator A = NULL, S = NULL;
  pkrylov_precond M = NULL, MS = NULL;
  PK_REQUIRE_OK(ctx, pkt_grid_operator(ctx, &G, &T, 4, tiles, 1, &g, &A));
  PK_REQUIRE_OK(ctx, pkrylov_operator_create_stencil7(ctx, 8, 6, 5, G.fW, G.fS, G.fV, G.fC, G.mask, &S));
  PK_REQUIRE_OK(ctx, pkrylov_precond_create(ctx, A, PKRYLOV_PRECOND_COLUMN, 0, PKRYLOV_LAYOUT_AUTO, &M));
  PK_REQUIRE_OK(ctx, pkrylov_precond_create(ctx, S, PKRYLOV_PRECOND_COLUMN, 0, PKRYLOV_LAYOUT_AUTO, &MS));
  const int64_t n = G.ncell;
  double *rg = rand_vec(n, 4), *zg = malloc(sizeof(double) * (size_t)n);
  double *rc = malloc(sizeof(double) * (size_t)n), *zc = malloc(sizeof(double) * (size_t)n);
  for (int64_t q = 0; q < n; q++) rc[q] = rg[pkt_compact_to_global(&G, &T, 4, tiles, q)];
  PK_REQUIRE_OK(ctx, pkrylov_precond_apply(M, PKRYLOV_MEM_HOST, rc, zc));
  PK_REQUIRE_OK(ctx, pkrylov_precond_apply(MS, PKRYLOV_MEM_HOST, rg, zg));
  int64_t bad = 0;
  for (int64_t q = 0; q < n; q++) bad += !same_bits(zc[q], zg[pkt_compact_to_global(&G, &T, 4, tiles, q)]);
  PK_EXPECT(bad == 0, "%lld cells differ", (long long)bad);
  free(rg), free(zg), free(rc), free(zc);
  pkrylov_precond_destroy(&M);
  pkrylov_precond_destroy(&MS);
  pkrylov_operator_destroy(&A);
  pkrylov_operator_destroy(&S);
  pkrylov_grid_destroy(&g);
  pkt_global_free(&G);
  pkrylov_context_destroy(&ctx);
  PK_TEST_END();
}

PK_TEST_CASE(update_coefficients) {
  /* an operator updated to new coefficients gives the product of one created from them; the
     preconditioners follow pkrylov_precond_update */
  pkrylov_context ctx = cpu_ctx();
  pkt_global G1, G2;
  pkt_global_make(&G1, 1, 8, 6, 1, 1, 0, 0.2, 1, 101);
  pkt_global_make(&G2, 1, 8, 6, 1, 1, 0, 0.2, 1, 102);
  memcpy(G2.mask, G1.mask, sizeof(int32_t) * (size_t)G1.ncell); /* the mask is kept */
  pkt_tiling T = pkt_tiling_make(&G1, 4, 3, 1, 1);
  int32_t tiles[4] = {0, 1, 2, 3};
  pkrylov_grid g1 = NULL, g2 = NULL;
  pkrylov_operator A = NULL, B = NULL;
  PK_REQUIRE_OK(ctx, pkt_grid_operator(ctx, &G1, &T, 4, tiles, 1, &g1, &A));
  PK_REQUIRE_OK(ctx, pkt_grid_operator(ctx, &G2, &T, 4, tiles, 1, &g2, &B));
  pkrylov_precond MA[3] = {NULL, NULL, NULL}, MB[3] = {NULL, NULL, NULL};
  PK_REQUIRE_OK(ctx, pkrylov_precond_create_ainv(ctx, A, 0.51, &MA[0]));
  PK_REQUIRE_OK(ctx, pkrylov_precond_create_ainv(ctx, B, 0.51, &MB[0]));
  PK_REQUIRE_OK(ctx, pkrylov_precond_create(ctx, A, PKRYLOV_PRECOND_JACOBI, 0, PKRYLOV_LAYOUT_AUTO, &MA[1]));
  PK_REQUIRE_OK(ctx, pkrylov_precond_create(ctx, B, PKRYLOV_PRECOND_JACOBI, 0, PKRYLOV_LAYOUT_AUTO, &MB[1]));
  PK_REQUIRE_OK(ctx, pkrylov_precond_create(ctx, A, PKRYLOV_PRECOND_COLUMN, 0, PKRYLOV_LAYOUT_AUTO, &MA[2]));
  PK_REQUIRE_OK(ctx, pkrylov_precond_create(ctx, B, PKRYLOV_PRECOND_COLUMN, 0, PKRYLOV_LAYOUT_AUTO, &MB[2]));
  double *w = pkt_halo_array(&G2, &T, 4, tiles, G2.fW), *s = pkt_halo_array(&G2, &T, 4, tiles, G2.fS);
  double *c = pkt_halo_array(&G2, &T, 4, tiles, G2.fC);
  PK_REQUIRE_OK(ctx, pkrylov_operator_update_grid_stencil(A, w, s, NULL, c));
  const int64_t n = G1.ncell;
  double *x = rand_vec(n, 8), *ya = malloc(sizeof(double) * (size_t)n), *yb = malloc(sizeof(double) * (size_t)n);
  PK_REQUIRE_OK(ctx, pkrylov_operator_apply(A, PKRYLOV_MEM_HOST, x, ya));
  PK_REQUIRE_OK(ctx, pkrylov_operator_apply(B, PKRYLOV_MEM_HOST, x, yb));
  int64_t bad = 0;
  for (int64_t q = 0; q < n; q++) bad += !same_bits(ya[q], yb[q]);
  PK_EXPECT(bad == 0, "updated operator: %lld cells differ", (long long)bad);
  for (int p = 0; p < 3; p++) {
    /* not yet updated: the old preconditioner (differs somewhere), then the new one bitwise */
    PK_REQUIRE_OK(ctx, pkrylov_precond_apply(MA[p], PKRYLOV_MEM_HOST, x, ya));
    PK_REQUIRE_OK(ctx, pkrylov_precond_apply(MB[p], PKRYLOV_MEM_HOST, x, yb));
    int64_t diff = 0;
    for (int64_t q = 0; q < n; q++) diff += !same_bits(ya[q], yb[q]);
    PK_EXPECT(diff > 0, "preconditioner %d changed before pkrylov_precond_update", p);
    PK_REQUIRE_OK(ctx, pkrylov_precond_update(MA[p]));
    PK_REQUIRE_OK(ctx, pkrylov_precond_apply(MA[p], PKRYLOV_MEM_HOST, x, ya));
    bad = 0;
    for (int64_t q = 0; q < n; q++) bad += !same_bits(ya[q], yb[q]);
    PK_EXPECT(bad == 0, "updated preconditioner %d: %lld cells differ", p, (long long)bad);
  }
  /* a failed update leaves A as it was */
  c[(1 + 1) + (4 + 2) * (1 + 1)] = NAN;
  PK_EXPECT_CODE(ctx, pkrylov_operator_update_grid_stencil(A, w, s, NULL, c), PKRYLOV_ERR_NOT_FINITE);
  PK_REQUIRE_OK(ctx, pkrylov_operator_apply(A, PKRYLOV_MEM_HOST, x, ya));
  PK_REQUIRE_OK(ctx, pkrylov_operator_apply(B, PKRYLOV_MEM_HOST, x, yb));
  bad = 0;
  for (int64_t q = 0; q < n; q++) bad += !same_bits(ya[q], yb[q]);
  PK_EXPECT(bad == 0, "a failed update changed the operator (%lld cells)", (long long)bad);
  free(w), free(s), free(c), free(x), free(ya), free(yb);
  for (int p = 0; p < 3; p++) pkrylov_precond_destroy(&MA[p]), pkrylov_precond_destroy(&MB[p]);
  pkrylov_operator_destroy(&A);
  pkrylov_operator_destroy(&B);
  pkrylov_grid_destroy(&g1);
  pkrylov_grid_destroy(&g2);
  pkt_global_free(&G1);
  pkt_global_free(&G2);
  pkrylov_context_destroy(&ctx);
  PK_TEST_END();
}

PK_TEST_CASE(bad_input) {
  pkrylov_context ctx = cpu_ctx();
  int32_t conn[12 * 4];
  int32_t tiles[4] = {0, 1, 2, 3};
  pkrylov_grid g = NULL;
  PK_REQUIRE_OK(ctx, pkrylov_grid_connect_rect(2, 2, PKRYLOV_PERIODIC_XY, conn));
  PK_EXPECT_CODE(NULL, pkrylov_grid_connect_rect(0, 2, PKRYLOV_PERIODIC_XY, conn), PKRYLOV_ERR_INVALID_SIZE);
  PK_EXPECT_CODE(NULL, pkrylov_grid_connect_rect(2, 2, 7, conn), PKRYLOV_ERR_INVALID_VALUE);
  PK_EXPECT_CODE(NULL, pkrylov_grid_connect_rect(2, 2, PKRYLOV_PERIODIC_XY, NULL), PKRYLOV_ERR_NULL_POINTER);
  PK_EXPECT_CODE(NULL, pkrylov_grid_connect_cubesphere(0, conn), PKRYLOV_ERR_INVALID_SIZE);
  /* halo width 0, sizes */
  PK_EXPECT_CODE(ctx, pkrylov_grid_create(ctx, 4, 4, 0, 1, 4, conn, 4, tiles, &g), PKRYLOV_ERR_INVALID_SIZE);
  PK_EXPECT_CODE(ctx, pkrylov_grid_create(ctx, 4, 4, 1, 0, 4, conn, 4, tiles, &g), PKRYLOV_ERR_INVALID_SIZE);
  PK_EXPECT_CODE(ctx, pkrylov_grid_create(ctx, 0, 4, 1, 1, 4, conn, 4, tiles, &g), PKRYLOV_ERR_INVALID_SIZE);
  PK_EXPECT_CODE(ctx, pkrylov_grid_create(ctx, 4, 4, 1, 1, 4, NULL, 4, tiles, &g), PKRYLOV_ERR_NULL_POINTER);
  PK_EXPECT_CODE(ctx, pkrylov_grid_create(ctx, 4, 4, 1, 1, 4, conn, 4, NULL, &g), PKRYLOV_ERR_NULL_POINTER);
  /* a rank that owns no tile; a tile owned by nobody; a tile owned twice; a tile number out of range */
  PK_EXPECT_CODE(ctx, pkrylov_grid_create(ctx, 4, 4, 1, 1, 4, conn, 0, tiles, &g), PKRYLOV_ERR_TOPOLOGY);
  PK_EXPECT_CODE(ctx, pkrylov_grid_create(ctx, 4, 4, 1, 1, 4, conn, 3, tiles, &g), PKRYLOV_ERR_TOPOLOGY);
  {
    int32_t twice[4] = {0, 1, 1, 3};
    PK_EXPECT_CODE(ctx, pkrylov_grid_create(ctx, 4, 4, 1, 1, 4, conn, 4, twice, &g), PKRYLOV_ERR_TOPOLOGY);
    int32_t out[4] = {0, 1, 2, 4};
    PK_EXPECT_CODE(ctx, pkrylov_grid_create(ctx, 4, 4, 1, 1, 4, conn, 4, out, &g), PKRYLOV_ERR_INDEX_OUT_OF_RANGE);
  }
  /* neighbour tables: out of range, asymmetric, self join, bad flag, mismatched edge lengths */
  {
    int32_t c2[12 * 4];
    memcpy(c2, conn, sizeof c2);
    c2[3 * (4 * 0 + 1)] = 9;
    PK_EXPECT_CODE(ctx, pkrylov_grid_create(ctx, 4, 4, 1, 1, 4, c2, 4, tiles, &g), PKRYLOV_ERR_INDEX_OUT_OF_RANGE);
    memcpy(c2, conn, sizeof c2);
    c2[3 * (4 * 0 + 1) + 1] = 5;
    PK_EXPECT_CODE(ctx, pkrylov_grid_create(ctx, 4, 4, 1, 1, 4, c2, 4, tiles, &g), PKRYLOV_ERR_INDEX_OUT_OF_RANGE);
    memcpy(c2, conn, sizeof c2);
    c2[3 * (4 * 0 + 1)] = 2; /* tile 0 east meets tile 2, but tile 2's west meets tile 3 */
    PK_EXPECT_CODE(ctx, pkrylov_grid_create(ctx, 4, 4, 1, 1, 4, c2, 4, tiles, &g), PKRYLOV_ERR_TOPOLOGY);
    memcpy(c2, conn, sizeof c2);
    c2[3 * (4 * 0 + 1) + 2] = 1; /* one side reversed */
    PK_EXPECT_CODE(ctx, pkrylov_grid_create(ctx, 4, 4, 1, 1, 4, c2, 4, tiles, &g), PKRYLOV_ERR_TOPOLOGY);
    memcpy(c2, conn, sizeof c2);
    c2[3 * (4 * 0 + 1) + 2] = 2;
    PK_EXPECT_CODE(ctx, pkrylov_grid_create(ctx, 4, 4, 1, 1, 4, c2, 4, tiles, &g), PKRYLOV_ERR_INVALID_VALUE);
    memcpy(c2, conn, sizeof c2);
    c2[3 * (4 * 1 + 0)] = 1, c2[3 * (4 * 1 + 0) + 1] = 0; /* tile 1 west meets itself */
    PK_EXPECT_CODE(ctx, pkrylov_grid_create(ctx, 4, 4, 1, 1, 4, c2, 4, tiles, &g), PKRYLOV_ERR_TOPOLOGY);
    int32_t cube[12 * 6];
    PK_REQUIRE_OK(NULL, pkrylov_grid_connect_cubesphere(1, cube));
    int32_t six[6] = {0, 1, 2, 3, 4, 5};
    PK_EXPECT_CODE(ctx, pkrylov_grid_create(ctx, 4, 3, 1, 1, 6, cube, 6, six, &g), PKRYLOV_ERR_SIZE_MISMATCH);
  }
  PK_EXPECT(g == NULL, "a failed create returned a grid");
  /* operators: sizes, NULL, non-finite, disagreeing owners of a face */
  PK_REQUIRE_OK(ctx, pkrylov_grid_create(ctx, 4, 4, 1, 1, 4, conn, 4, tiles, &g));
  const int64_t hn = 6 * 6 * 4;
  double *a = malloc(sizeof(double) * (size_t)hn * 2), *c = malloc(sizeof(double) * (size_t)hn * 2);
  for (int64_t i = 0; i < 2 * hn; i++) a[i] = 1.0, c[i] = -5.0;
  pkrylov_operator A = NULL;
  PK_EXPECT_CODE(ctx, pkrylov_operator_create_grid_stencil(g, 0, a, a, NULL, c, NULL, &A), PKRYLOV_ERR_INVALID_SIZE);
  PK_EXPECT_CODE(ctx, pkrylov_operator_create_grid_stencil(g, 2, a, a, NULL, c, NULL, &A), PKRYLOV_ERR_NULL_POINTER);
  PK_EXPECT_CODE(ctx, pkrylov_operator_create_grid_stencil(g, 1, NULL, a, NULL, c, NULL, &A), PKRYLOV_ERR_NULL_POINTER);
  PK_EXPECT_CODE(ctx, pkrylov_operator_create_grid_stencil(NULL, 1, a, a, NULL, c, NULL, &A), PKRYLOV_ERR_NULL_POINTER);
  c[1 + 6 * 1 + 36 * 2] = INFINITY; /* interior cell (0,0) of tile 2 */
  PK_EXPECT_CODE(ctx, pkrylov_operator_create_grid_stencil(g, 1, a, a, NULL, c, NULL, &A), PKRYLOV_ERR_NOT_FINITE);
  c[1 + 6 * 1 + 36 * 2] = -5.0;
  a[1 + 6 * 2 + 36 * 1] = NAN; /* the west face of tile 1, row 1: across the tile edge */
  PK_EXPECT_CODE(ctx, pkrylov_operator_create_grid_stencil(g, 1, a, a, NULL, c, NULL, &A), PKRYLOV_ERR_NOT_FINITE);
  a[1 + 6 * 2 + 36 * 1] = 1.0;
  PK_EXPECT(A == NULL, "a failed create returned an operator");
  {
    /* two west edges meeting (a 180-degree turn): both tiles store the face; values must agree */
    int32_t ww[12 * 2];
    for (int i = 0; i < 24; i++) ww[i] = -1;
    ww[3 * (4 * 0 + 0)] = 1, ww[3 * (4 * 0 + 0) + 1] = 0, ww[3 * (4 * 0 + 0) + 2] = 1;
    ww[3 * (4 * 1 + 0)] = 0, ww[3 * (4 * 1 + 0) + 1] = 0, ww[3 * (4 * 1 + 0) + 2] = 1;
    int32_t two[2] = {0, 1};
    pkrylov_grid g2 = NULL;
    PK_REQUIRE_OK(ctx, pkrylov_grid_create(ctx, 4, 4, 1, 1, 2, ww, 2, two, &g2));
    PK_REQUIRE_OK(ctx, pkrylov_operator_create_grid_stencil(g2, 1, a, a, NULL, c, NULL, &A));
    pkrylov_operator_destroy(&A);
    a[1 + 6 * 3 + 36 * 1] = 2.0; /* tile 1's west face of row 2 now differs from tile 0's of row 1 */
    PK_EXPECT_CODE(ctx, pkrylov_operator_create_grid_stencil(g2, 1, a, a, NULL, c, NULL, &A), PKRYLOV_ERR_TOPOLOGY);
    a[1 + 6 * 3 + 36 * 1] = 1.0;
    pkrylov_grid_destroy(&g2);
  }
  /* preconditioner and solve misuse */
  PK_REQUIRE_OK(ctx, pkrylov_operator_create_grid_stencil(g, 1, a, a, NULL, c, NULL, &A));
  pkrylov_precond M = NULL;
  PK_EXPECT_CODE(ctx, pkrylov_precond_create_ainv(ctx, A, 0.0, &M), PKRYLOV_ERR_INVALID_VALUE);
  PK_EXPECT_CODE(ctx, pkrylov_precond_create_ainv(ctx, A, NAN, &M), PKRYLOV_ERR_INVALID_VALUE);
  PK_EXPECT_CODE(ctx, pkrylov_precond_create_ainv_coefficients(ctx, A, a, NULL, c, &M), PKRYLOV_ERR_NULL_POINTER);
  PK_EXPECT_CODE(ctx, pkrylov_precond_create(ctx, A, PKRYLOV_PRECOND_AINV, 0, PKRYLOV_LAYOUT_AUTO, &M),
                 PKRYLOV_ERR_INVALID_VALUE);
  pkrylov_operator A3 = NULL;
  PK_REQUIRE_OK(ctx, pkrylov_operator_create_grid_stencil(g, 2, a, a, a, c, NULL, &A3));
  PK_EXPECT_CODE(ctx, pkrylov_precond_create_ainv(ctx, A3, 0.51, &M), PKRYLOV_ERR_UNSUPPORTED);
  PK_REQUIRE_OK(ctx, pkrylov_precond_create_ainv(ctx, A, 0.51, &M));
  PK_EXPECT_CODE(ctx, pkrylov_precond_update_ainv_coefficients(M, a, a, NULL), PKRYLOV_ERR_NULL_POINTER);
  PK_EXPECT_CODE(ctx, pkrylov_operator_update_grid_stencil(A, a, a, NULL, NULL), PKRYLOV_ERR_NULL_POINTER);
  PK_EXPECT_CODE(ctx, pkrylov_operator_update_grid_stencil(A3, a, a, NULL, c), PKRYLOV_ERR_NULL_POINTER);
  pkrylov_operator S = NULL;
  pkrylov_solver s = NULL;
  PK_REQUIRE_OK(ctx, pkrylov_operator_create_stencil7(ctx, 4, 4, 1, a, a, a, c, NULL, &S));
  PK_EXPECT_CODE(ctx, pkrylov_operator_update_grid_stencil(S, a, a, NULL, c), PKRYLOV_ERR_INCOMPATIBLE);
  PK_REQUIRE_OK(ctx, pkrylov_solver_create(ctx, PKRYLOV_SOLVER_CG, S, NULL, &s));
  PK_EXPECT_CODE(ctx, pkrylov_solver_solve_halo(s, PKRYLOV_MEM_HOST, a, c), PKRYLOV_ERR_INCOMPATIBLE);
  pkrylov_solver_destroy(&s);
  PK_REQUIRE_OK(ctx, pkrylov_solver_create(ctx, PKRYLOV_SOLVER_CG, A, M, &s));
  PK_EXPECT_CODE(ctx, pkrylov_solver_solve_halo(s, PKRYLOV_MEM_HOST, NULL, c), PKRYLOV_ERR_NULL_POINTER);
  PK_EXPECT_CODE(ctx, pkrylov_solver_solve_halo(s, 7, a, c), PKRYLOV_ERR_INVALID_VALUE);
  PK_EXPECT_CODE(ctx, pkrylov_grid_pack(g, 1, PKRYLOV_MEM_DEVICE, a, c), PKRYLOV_ERR_MEMTYPE);
  PK_EXPECT_CODE(ctx, pkrylov_grid_pack(g, 0, PKRYLOV_MEM_HOST, a, c), PKRYLOV_ERR_INVALID_SIZE);
  PK_EXPECT_CODE(ctx, pkrylov_precond_update(NULL), PKRYLOV_ERR_NULL_POINTER);
  pkrylov_solver_destroy(&s);
  pkrylov_operator_destroy(&S);
  pkrylov_precond_destroy(&M);
  pkrylov_operator_destroy(&A3);
  pkrylov_operator_destroy(&A);
  PK_REQUIRE_OK(ctx, pkrylov_grid_destroy(&g));
  free(a), free(c);
  pkrylov_context_destroy(&ctx);
  PK_TEST_END();
}

PK_TEST_MAIN(PK_TEST_ENTRY(connect_rect), PK_TEST_ENTRY(connect_cubesphere_geometry),
             PK_TEST_ENTRY(product_rect_walls_bitwise), PK_TEST_ENTRY(product_periodic_bruteforce),
             PK_TEST_ENTRY(product_cubesphere_bruteforce), PK_TEST_ENTRY(ainv_formula),
             PK_TEST_ENTRY(ainv_plain_stencil), PK_TEST_ENTRY(solve_periodic_2d_dense),
             PK_TEST_ENTRY(solve_cubesphere_3d_dense), PK_TEST_ENTRY(column_precond_matches_stencil7),
             PK_TEST_ENTRY(update_coefficients), PK_TEST_ENTRY(bad_input))

/**
 * @file t165-problems.c
 * @brief The model problems on the models' grids: the barotropic basin (symmetric, negative definite by a
 *        Cholesky factorisation of -A, a land fraction that looks like Earth's, the periodic wrap) and the
 *        cube-sphere thin shell (the cells cover the sphere: areas sum to 4 pi; the couplings inside a face
 *        equal the one-panel problem's; SPD by Cholesky), and their bad input.
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "pk_test.h"
#include "pkrylov.h"

extern void dpotrf_(const char *uplo, const int *n, double *a, const int *lda, int *info);

/** 1 when the dense symmetric matrix s*A (n x n, the wet rows only) is positive definite (LAPACK dpotrf). */
static int definite(const double *dense, int64_t n, const uint8_t *keep, double s) {
  int64_t m = 0;
  int64_t *map = malloc(sizeof(int64_t) * (size_t)n);
  for (int64_t i = 0; i < n; i++) map[i] = keep[i] ? m++ : -1;
  double *a = calloc((size_t)(m * m), sizeof(double));
  for (int64_t i = 0; i < n; i++)
    for (int64_t j = 0; j < n; j++)
      if (map[i] >= 0 && map[j] >= 0) a[map[i] + m * map[j]] = s * dense[i * n + j];
  int mi = (int)m, info = 0;
  dpotrf_("L", &mi, a, &mi, &info);
  free(a), free(map);
  return info == 0;
}

PK_TEST_CASE(barotropic_basin) {
  const int nx = 48, ny = 24;
  const int64_t n = (int64_t)nx * ny;
  double *aW = malloc(sizeof(double) * n), *aS = malloc(sizeof(double) * n), *aC = malloc(sizeof(double) * n);
  int32_t *mask = malloc(sizeof(int32_t) * n);
  PK_REQUIRE_OK(NULL, pkrylov_barotropic_coefficients(nx, ny, PKRYLOV_PERIODIC_X, aW, aS, aC, mask));
  int64_t land = 0, wrap = 0;
  double amax = 0;
  for (int64_t c = 0; c < n; c++) {
    land += !mask[c];
    amax = fmax(amax, fmax(fabs(aW[c]), fmax(fabs(aS[c]), fabs(aC[c]))));
    PK_EXPECT(aW[c] >= 0 && aS[c] >= 0, "couplings >= 0 (cell %lld)", (long long)c);
    PK_EXPECT(mask[c] || aC[c] == 0.0, "a land cell has aC = 0 (cell %lld)", (long long)c);
    if (c % nx == 0 && mask[c] && mask[c + nx - 1]) wrap += aW[c] > 0;
  }
  PK_EXPECT(land > n / 6 && land < n / 2, "land fraction %.2f", (double)land / n);
  PK_EXPECT(wrap > 0, "the periodic wrap couples the first and the last columns");
  PK_EXPECT(fabs(amax - 1.0) < 1e-15, "normalised: largest coefficient %.17g", amax);
  /* the operator: symmetric (face form), -A definite on the wet cells */
  pkrylov_context ctx = NULL;
  pkrylov_grid g = NULL;
  pkrylov_operator A = NULL;
  PK_REQUIRE_OK(NULL, pkrylov_context_create(PKRYLOV_BACKEND_CPU, &ctx));
  int32_t conn[12];
  PK_REQUIRE_OK(NULL, pkrylov_grid_connect_rect(1, 1, PKRYLOV_PERIODIC_X, conn));
  int32_t t0 = 0;
  PK_REQUIRE_OK(ctx, pkrylov_grid_create(ctx, nx, ny, 1, 1, 1, conn, 1, &t0, &g));
  /* halo'd copies (halos NaN) */
  const int64_t hn = (int64_t)(nx + 2) * (ny + 2);
  double *h[3];
  int32_t *hm = calloc((size_t)hn, sizeof(int32_t));
  const double *src[3] = {aW, aS, aC};
  for (int a = 0; a < 3; a++) {
    h[a] = malloc(sizeof(double) * hn);
    for (int64_t i = 0; i < hn; i++) h[a][i] = NAN;
    for (int64_t j = 0; j < ny; j++)
      for (int64_t i = 0; i < nx; i++) h[a][(i + 1) + (nx + 2) * (j + 1)] = src[a][i + nx * j];
  }
  for (int64_t j = 0; j < ny; j++)
    for (int64_t i = 0; i < nx; i++) hm[(i + 1) + (nx + 2) * (j + 1)] = mask[i + nx * j];
  PK_REQUIRE_OK(ctx, pkrylov_operator_create_grid_stencil(g, 1, h[0], h[1], NULL, h[2], hm, &A));
  int64_t nn = 0;
  double *dense = pk_test_dense_from_operator(A, &nn);
  PK_REQUIRE(dense && nn == n, "dense export");
  double asym = 0;
  for (int64_t i = 0; i < n; i++)
    for (int64_t j = 0; j < i; j++) asym = fmax(asym, fabs(dense[i * n + j] - dense[j * n + i]));
  PK_EXPECT(asym == 0.0, "symmetric: largest difference %g", asym);
  uint8_t *keep = malloc((size_t)n);
  for (int64_t i = 0; i < n; i++) keep[i] = mask[i] != 0;
  PK_EXPECT(definite(dense, n, keep, -1.0), "-A is positive definite on the wet cells");
  PK_EXPECT(!definite(dense, n, keep, 1.0), "A is not positive definite (negative definite, as models store it)");
  PK_EXPECT_CODE(NULL, pkrylov_barotropic_coefficients(3, ny, PKRYLOV_PERIODIC_X, aW, aS, aC, mask),
                 PKRYLOV_ERR_INVALID_SIZE);
  PK_EXPECT_CODE(NULL, pkrylov_barotropic_coefficients(nx, ny, 5, aW, aS, aC, mask), PKRYLOV_ERR_INVALID_VALUE);
  PK_EXPECT_CODE(NULL, pkrylov_barotropic_coefficients(nx, ny, PKRYLOV_PERIODIC_X, aW, aS, aC, NULL),
                 PKRYLOV_ERR_NULL_POINTER);
  free(dense), free(keep), free(hm);
  for (int a = 0; a < 3; a++) free(h[a]);
  pkrylov_operator_destroy(&A);
  pkrylov_grid_destroy(&g);
  pkrylov_context_destroy(&ctx);
  free(aW), free(aS), free(aC), free(mask);
  PK_TEST_END();
}

PK_TEST_CASE(cubesphere_shell) {
  const int N = 6, nz = 3;
  pkrylov_thinshell_params p;
  PK_REQUIRE_OK(NULL, pkrylov_thinshell_params_default(N, N, nz, &p));
  const int64_t ncol = 6 * N * N, n = ncol * nz;
  double *aW = malloc(sizeof(double) * n), *aS = malloc(sizeof(double) * n), *aV = malloc(sizeof(double) * n);
  double *aC = malloc(sizeof(double) * n);
  PK_REQUIRE_OK(NULL, pkrylov_cubesphere_stencil_coefficients(&p, aW, aS, aV, aC));
  /* the one-panel problem: the same couplings inside a face (its own chart, thinshell.c's formulas) */
  const int64_t np = (int64_t)N * N * nz;
  double *pW = malloc(sizeof(double) * np), *pS = malloc(sizeof(double) * np), *pV = malloc(sizeof(double) * np);
  double *pC = malloc(sizeof(double) * np);
  PK_REQUIRE_OK(NULL, pkrylov_thinshell_stencil_coefficients(&p, pW, pS, pV, pC));
  double worst = 0;
  for (int f = 0; f < 6; f++)
    for (int64_t k = 0; k < nz; k++)
      for (int64_t j = 0; j < N; j++)
        for (int64_t i = 0; i < N; i++) {
          const int64_t q = i + N * (j + N * (f + 6 * k)), pq = i + N * (j + N * k);
          if (i > 0) worst = fmax(worst, fabs(aW[q] - pW[pq]) / fabs(pW[pq]));
          if (j > 0) worst = fmax(worst, fabs(aS[q] - pS[pq]) / fabs(pS[pq]));
          worst = fmax(worst, fabs(aV[q] - pV[pq]) / fmax(fabs(pV[pq]), 1e-300));
          PK_EXPECT(aW[q] < 0 && aS[q] < 0, "every face couples (a closed surface): cell %lld", (long long)q);
        }
  PK_EXPECT(worst < 1e-13, "inside a face the couplings equal the panel's to %.3g", worst);
  /* the cells cover the sphere: aV(k=1) = -|T| b_1 per column, so the areas sum to -sum aV(k=1) / b_1, with b_1
     from the panel's column (0,0) and its area by the panel formula F(X2,Y2) - F(X1,Y2) - F(X2,Y1) + F(X1,Y1) */
  {
    const double pi = 3.14159265358979323846;
    double area = 0;
    for (int64_t col = 0; col < ncol; col++) area += aV[col + ncol * 1];
    const double X1 = tan(-pi / 4), X2 = tan(-pi / 4 + (pi / 2) / N);
#define PKF(X, Y) atan((X) * (Y) / sqrt(1.0 + (X) * (X) + (Y) * (Y)))
    const double T00 = PKF(X2, X2) - PKF(X1, X2) - PKF(X2, X1) + PKF(X1, X1);
#undef PKF
    const double b1 = -pV[0 + (int64_t)N * N * 1] / T00;
    PK_EXPECT(fabs(-area / b1 - 4 * pi) < 1e-12 * 4 * pi, "the areas sum to %.17g, 4 pi = %.17g", -area / b1, 4 * pi);
  }
  /* SPD */
  pkrylov_context ctx = NULL;
  pkrylov_grid g = NULL;
  pkrylov_operator A = NULL;
  PK_REQUIRE_OK(NULL, pkrylov_context_create(PKRYLOV_BACKEND_CPU, &ctx));
  int32_t conn[12 * 6], tiles[6] = {0, 1, 2, 3, 4, 5};
  PK_REQUIRE_OK(NULL, pkrylov_grid_connect_cubesphere(1, conn));
  PK_REQUIRE_OK(ctx, pkrylov_grid_create(ctx, N, N, 1, 1, 6, conn, 6, tiles, &g));
  const int64_t hx = N + 2, hn = hx * hx * nz * 6;
  double *h[4];
  const double *src[4] = {aW, aS, aV, aC};
  for (int a = 0; a < 4; a++) {
    h[a] = malloc(sizeof(double) * hn);
    for (int64_t i = 0; i < hn; i++) h[a][i] = NAN;
    for (int f = 0; f < 6; f++)
      for (int64_t k = 0; k < nz; k++)
        for (int64_t j = 0; j < N; j++)
          for (int64_t i = 0; i < N; i++)
            h[a][(i + 1) + hx * ((j + 1) + hx * (k + nz * f))] = src[a][i + N * (j + N * (f + 6 * k))];
  }
  PK_REQUIRE_OK(ctx, pkrylov_operator_create_grid_stencil(g, nz, h[0], h[1], h[2], h[3], NULL, &A));
  int64_t nn = 0;
  double *dense = pk_test_dense_from_operator(A, &nn);
  PK_REQUIRE(dense && nn == n, "dense export");
  uint8_t *keep = malloc((size_t)n);
  memset(keep, 1, (size_t)n);
  double asym = 0;
  for (int64_t i = 0; i < n; i++)
    for (int64_t j = 0; j < i; j++) asym = fmax(asym, fabs(dense[i * n + j] - dense[j * n + i]));
  PK_EXPECT(asym == 0.0, "symmetric: largest difference %g", asym);
  PK_EXPECT(definite(dense, n, keep, 1.0), "the cube-sphere shell is positive definite");
  p.ny = N + 1;
  PK_EXPECT_CODE(NULL, pkrylov_cubesphere_stencil_coefficients(&p, aW, aS, aV, aC), PKRYLOV_ERR_INVALID_SIZE);
  p.ny = N;
  p.geometry = PKRYLOV_GEOMETRY_UNIFORM;
  PK_EXPECT_CODE(NULL, pkrylov_cubesphere_stencil_coefficients(&p, aW, aS, aV, aC), PKRYLOV_ERR_INVALID_VALUE);
  free(dense), free(keep);
  for (int a = 0; a < 4; a++) free(h[a]);
  pkrylov_operator_destroy(&A);
  pkrylov_grid_destroy(&g);
  pkrylov_context_destroy(&ctx);
  free(aW), free(aS), free(aV), free(aC), free(pW), free(pS), free(pV), free(pC);
  PK_TEST_END();
}

PK_TEST_MAIN(PK_TEST_ENTRY(barotropic_basin), PK_TEST_ENTRY(cubesphere_shell))

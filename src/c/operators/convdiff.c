/**
 * @file convdiff.c
 * @brief A generated nonsymmetric convection-diffusion operator with column structure
 *        (pkrylov_operator_create_convdiff), for the tests and benchmarks of the BiCGStab and GMRES
 *        families.
 *
 * On an nx x ny x nz grid of unit cells, index i + nx*(j + ny*k) (k slow, as the thin shell), the
 * operator is -div(D grad u) + w . grad u with Dirichlet walls (neighbours outside the grid dropped, the
 * diagonal kept), D = diag(1, 1, aniso), discretised by the 7-point stencil with first-order upwind
 * convection. Row of cell c:
 *
 *   A[c][c]      = 2 (1 + 1 + aniso) + |wx| + |wy| + |wz|
 *   A[c][c-1]    = -1 - max(wx, 0)        A[c][c+1]    = -1 - max(-wx, 0)        (x: i -+ 1)
 *   A[c][c-nx]   = -1 - max(wy, 0)        A[c][c+nx]   = -1 - max(-wy, 0)        (y: j -+ 1)
 *   A[c][c-nxy]  = -aniso - max(wz, 0)    A[c][c+nxy]  = -aniso - max(-wz, 0)    (z: k -+ 1)
 *
 * Upwinding keeps A an M-matrix (weakly diagonally dominant, strictly in the rows at a wall) for any
 * wind, so A is nonsingular; it is nonsymmetric as soon as the wind is nonzero, and its columns (the
 * vertical tridiagonals) are nonsymmetric when wz != 0. Large aniso gives the strong vertical coupling of
 * the thin-shell problem.
 */
#include <math.h>
#include <stdlib.h>

#include "pk_impl.h"

int pkrylov_operator_create_convdiff(pkrylov_context ctx, int32_t nx, int32_t ny, int32_t nz,
                                     const double wind[3], double aniso, pkrylov_operator *A) {
  PK_CHECK(ctx != NULL, NULL, PKRYLOV_ERR_NULL_POINTER, "argument 'ctx' is NULL");
  PK_CHECK_PTR(A, ctx);
  PK_CHECK_PTR(wind, ctx);
  PK_CHECK(nx >= 1 && ny >= 1 && nz >= 1, ctx, PKRYLOV_ERR_INVALID_SIZE,
           "arguments 'nx', 'ny', 'nz' = %d, %d, %d must be >= 1", nx, ny, nz);
  const int64_t n = (int64_t)nx * ny * nz;
  PK_CHECK(n * 7 <= INT32_MAX, ctx, PKRYLOV_ERR_INVALID_SIZE,
           "grid %d x %d x %d has too many cells (at most %d entries)", nx, ny, nz, INT32_MAX);
  for (int d = 0; d < 3; d++)
    PK_CHECK(isfinite(wind[d]), ctx, PKRYLOV_ERR_NOT_FINITE, "argument 'wind[%d]' = %g is not finite", d,
             wind[d]);
  PK_CHECK(isfinite(aniso), ctx, PKRYLOV_ERR_NOT_FINITE, "argument 'aniso' = %g is not finite", aniso);
  PK_CHECK(aniso > 0, ctx, PKRYLOV_ERR_INVALID_VALUE, "argument 'aniso' = %g must be > 0", aniso);
  *A = NULL;
  int32_t *rp = malloc(sizeof(int32_t) * (size_t)(n + 1));
  int32_t *ci = malloc(sizeof(int32_t) * (size_t)n * 7);
  double *v = malloc(sizeof(double) * (size_t)n * 7);
  if (!rp || !ci || !v) {
    free(rp), free(ci), free(v);
    return pk_error(ctx, PKRYLOV_ERR_OUT_OF_MEMORY, __func__, "cannot allocate the CSR arrays (%lld rows)",
                    (long long)n);
  }
  const double wx = wind[0], wy = wind[1], wz = wind[2];
  const double diag = 2.0 * (2.0 + aniso) + fabs(wx) + fabs(wy) + fabs(wz);
  const double xm = -1.0 - fmax(wx, 0.0), xp = -1.0 - fmax(-wx, 0.0);
  const double ym = -1.0 - fmax(wy, 0.0), yp = -1.0 - fmax(-wy, 0.0);
  const double zm = -aniso - fmax(wz, 0.0), zp = -aniso - fmax(-wz, 0.0);
  const int64_t nxy = (int64_t)nx * ny;
  int32_t e = 0;
  rp[0] = 0;
  for (int32_t k = 0; k < nz; k++)
    for (int32_t j = 0; j < ny; j++)
      for (int32_t i = 0; i < nx; i++) {
        const int32_t c = (int32_t)(i + nx * (j + (int64_t)ny * k));
        /* columns in increasing order */
        if (k > 0) ci[e] = (int32_t)(c - nxy), v[e++] = zm;
        if (j > 0) ci[e] = c - nx, v[e++] = ym;
        if (i > 0) ci[e] = c - 1, v[e++] = xm;
        ci[e] = c, v[e++] = diag;
        if (i < nx - 1) ci[e] = c + 1, v[e++] = xp;
        if (j < ny - 1) ci[e] = c + nx, v[e++] = yp;
        if (k < nz - 1) ci[e] = (int32_t)(c + nxy), v[e++] = zp;
        rp[c + 1] = e;
      }
  int ierr = pkrylov_operator_create_csr(ctx, (int32_t)n, 0, rp, ci, v, A);
  free(rp), free(ci), free(v);
  return ierr;
}

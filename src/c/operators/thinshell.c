/**
 * @file thinshell.c
 * @brief The thin-shell model problem (docs/model-problem.md): parameters, geometry of the horizontal
 *        grid (one gnomonic cubed-sphere panel or a uniform grid), the level vectors, the matrix-free
 *        operator and its column-stencil coefficients.
 *
 * Matrix (i, j horizontal columns, k level):
 *   A[(i,k),(j,k)] = -alpha_ij a_k,  A[(i,k),(i,k-1)] = -|T_i| b_k,  A[(i,k),(i,k+1)] = -|T_i| c_k,
 *   A[(i,k),(i,k)] = |T_i| (d_k + b_k + c_k) + (sum_j alpha_ij) a_k   (missing neighbours drop out).
 * Both the operator (A->ts) and pkrylov_thinshell_stencil_coefficients() are filled by the same helpers
 * (ts_levels, ts_columns) and write the entries with the same expressions, so the forms agree exactly.
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>

#include "pk_impl.h"

#define PK_PI 3.14159265358979323846

/** Validate thin-shell parameters; errors go to ctx (NULL: the thread-local slot) as raised by func. */
static int ts_check_params(pkrylov_context ctx, const char *func, const pkrylov_thinshell_params *p) {
  if (p->nx < 1)
    return pk_error(ctx, PKRYLOV_ERR_INVALID_SIZE, func, "argument 'p->nx' = %d must be >= 1", p->nx);
  if (p->ny < 1)
    return pk_error(ctx, PKRYLOV_ERR_INVALID_SIZE, func, "argument 'p->ny' = %d must be >= 1", p->ny);
  if (p->nz < 1)
    return pk_error(ctx, PKRYLOV_ERR_INVALID_SIZE, func, "argument 'p->nz' = %d must be >= 1", p->nz);
  if ((int64_t)p->nx * p->ny > (INT64_MAX / 16) / p->nz)
    return pk_error(ctx, PKRYLOV_ERR_INVALID_SIZE, func,
                    "arguments 'p->nx' x 'p->ny' x 'p->nz' = %d x %d x %d: too many cells", p->nx, p->ny,
                    p->nz);
  if (!(isfinite(p->H) && p->H > 0))
    return pk_error(ctx, PKRYLOV_ERR_INVALID_VALUE, func, "argument 'p->H' = %g must be finite and > 0",
                    p->H);
  if (!(isfinite(p->lambda) && p->lambda > 0))
    return pk_error(ctx, PKRYLOV_ERR_INVALID_VALUE, func,
                    "argument 'p->lambda' = %g must be finite and > 0", p->lambda);
  if (!(isfinite(p->nu) && p->nu > 0))
    return pk_error(ctx, PKRYLOV_ERR_INVALID_VALUE, func, "argument 'p->nu' = %g must be finite and > 0",
                    p->nu);
  if (p->geometry != PKRYLOV_GEOMETRY_GNOMONIC && p->geometry != PKRYLOV_GEOMETRY_UNIFORM)
    return pk_error(ctx, PKRYLOV_ERR_INVALID_VALUE, func,
                    "argument 'p->geometry' = %d is not a pkrylov_geometry (GNOMONIC %d, UNIFORM %d)",
                    p->geometry, PKRYLOV_GEOMETRY_GNOMONIC, PKRYLOV_GEOMETRY_UNIFORM);
  return PKRYLOV_SUCCESS;
}

int pkrylov_thinshell_params_default(int32_t nx, int32_t ny, int32_t nz, pkrylov_thinshell_params *p) {
  PK_CHECK(p != NULL, NULL, PKRYLOV_ERR_NULL_POINTER, "argument 'p' is NULL");
  PK_CHECK(nx >= 1, NULL, PKRYLOV_ERR_INVALID_SIZE, "argument 'nx' = %d must be >= 1", nx);
  PK_CHECK(ny >= 1, NULL, PKRYLOV_ERR_INVALID_SIZE, "argument 'ny' = %d must be >= 1", ny);
  PK_CHECK(nz >= 1, NULL, PKRYLOV_ERR_INVALID_SIZE, "argument 'nz' = %d must be >= 1", nz);
  p->H = 0.01;
  p->lambda = 1.0;
  p->nu = 10.0;
  p->nx = nx;
  p->ny = ny;
  p->nz = nz;
  p->geometry = PKRYLOV_GEOMETRY_GNOMONIC;
  return PKRYLOV_SUCCESS;
}

/**
 * Level vectors (nz each). r_k = 1 + H (k/nz)^2, h_k = r_{k+1} - r_k, rho_k = (r_k + r_{k+1})/2,
 * V_k = (r_{k+1}^3 - r_k^3)/3, beta_k = r_k^2 / (rho_k - rho_{k-1}) (k = 1..nz-1), beta_0 = beta_nz = 0;
 * a_k = omega^2 h_k, b_k = omega^2 lambda^2 beta_k, c_k = b_{k+1}, d_k = V_k, omega = nu (pi/2)/nx.
 * The differences are evaluated without cancellation (same values in exact arithmetic):
 * h_k = H (2k+1)/nz^2, V_k = h_k (r_{k+1}^2 + r_{k+1} r_k + r_k^2)/3, rho_k - rho_{k-1} = (h_k + h_{k-1})/2.
 */
static void ts_levels(const pkrylov_thinshell_params *p, double *a, double *b, double *c, double *d) {
  const int64_t nz = p->nz;
  const double omega = p->nu * (PK_PI / 2) / p->nx, w2 = omega * omega;
  const double nz2 = (double)nz * (double)nz;
  for (int64_t k = 0; k < nz; k++) {
    const double t0 = (double)k / (double)nz, t1 = (double)(k + 1) / (double)nz;
    const double r0 = 1.0 + p->H * t0 * t0, r1 = 1.0 + p->H * t1 * t1;
    const double h = p->H * (double)(2 * k + 1) / nz2;
    a[k] = w2 * h;
    d[k] = h * (r1 * r1 + r1 * r0 + r0 * r0) / 3.0;
    if (k == 0) {
      b[k] = 0.0;
    } else {
      const double hm = p->H * (double)(2 * k - 1) / nz2;
      const double beta = r0 * r0 / (0.5 * (h + hm));
      b[k] = w2 * (p->lambda * p->lambda) * beta;
    }
  }
  for (int64_t k = 0; k < nz; k++) c[k] = k < nz - 1 ? b[k + 1] : 0.0;
}

/** F(X, Y) = atan(XY / sqrt(1 + X^2 + Y^2)): area of the gnomonic rectangle [0,X] x [0,Y] on the sphere. */
static double ts_F(double X, double Y) { return atan(X * Y / sqrt(1.0 + X * X + Y * Y)); }

/** Great-circle distance between the unit-sphere points of gnomonic coordinates (X1,Y1), (X2,Y2):
 *  u = (1,X,Y)/sqrt(1+X^2+Y^2), distance atan2(|u x v|, u.v). */
static double ts_gc(double X1, double Y1, double X2, double Y2) {
  const double s1 = 1.0 / sqrt(1.0 + X1 * X1 + Y1 * Y1), s2 = 1.0 / sqrt(1.0 + X2 * X2 + Y2 * Y2);
  const double u[3] = {s1, X1 * s1, Y1 * s1}, v[3] = {s2, X2 * s2, Y2 * s2};
  const double w0 = u[1] * v[2] - u[2] * v[1], w1 = u[2] * v[0] - u[0] * v[2], w2 = u[0] * v[1] - u[1] * v[0];
  return atan2(sqrt(w0 * w0 + w1 * w1 + w2 * w2), u[0] * v[0] + u[1] * v[1] + u[2] * v[2]);
}

/** tan of the equiangular coordinate -pi/4 + t dxi (t may be fractional: cell centres). */
static double ts_tan(double t, double dxi) { return tan(-PK_PI / 4 + t * dxi); }

/**
 * Per-column geometry of the block of columns [i0, i0+nxl) x [j0, j0+nyl) (global indices, local
 * arrays in the layout of the whole grid's with nxl, nyl): area |T| (nx*ny), face weights ax ((nx+1)*ny, between (i-1,j) and (i,j) at
 * ax[i + (nx+1) j], 0 on the boundary faces i = 0, nx), ay (nx*(ny+1), between (i,j-1) and (i,j) at
 * ay[i + nx j], 0 for j = 0, ny) and asum (nx*ny, sum of the four face weights of a column).
 * Gnomonic: xi, eta in [-pi/4, pi/4], X = tan xi, Y = tan eta,
 *   |T| = F(X2,Y2) - F(X1,Y2) - F(X2,Y1) + F(X1,Y1),
 *   alpha = (great-circle length of the shared edge) / (great-circle distance of the cell centres),
 *   cell centre at the mid angles. Uniform: |T| = dx^2, alpha = 1, dx = (pi/2)/nx.
 */
void pk_thinshell_columns(const pkrylov_thinshell_params *p, int64_t i0, int64_t nxl, int64_t j0, int64_t nyl,
                          double *area, double *ax, double *ay, double *asum) {
  const int64_t gnx = p->nx, gny = p->ny;
  const double dxi = (PK_PI / 2) / (double)gnx, deta = (PK_PI / 2) / (double)gny;
  const int gnomonic = p->geometry == PKRYLOV_GEOMETRY_GNOMONIC;
  for (int64_t jl = 0; jl < nyl; jl++)
    for (int64_t il = 0; il < nxl; il++) {
      const int64_t i = i0 + il, j = j0 + jl; /* global indices in the formulas */
      if (gnomonic) {
        const double X1 = ts_tan((double)i, dxi), X2 = ts_tan((double)(i + 1), dxi);
        const double Y1 = ts_tan((double)j, deta), Y2 = ts_tan((double)(j + 1), deta);
        area[il + nxl * jl] = ts_F(X2, Y2) - ts_F(X1, Y2) - ts_F(X2, Y1) + ts_F(X1, Y1);
      } else {
        area[il + nxl * jl] = dxi * dxi;
      }
    }
  for (int64_t jl = 0; jl < nyl; jl++)
    for (int64_t il = 0; il <= nxl; il++) {
      const int64_t i = i0 + il, j = j0 + jl;
      double w = 0.0;
      if (i > 0 && i < gnx) {
        if (gnomonic) {
          /* edge xi = xi_i from eta_j to eta_{j+1}; centres (i-1, j) and (i, j) */
          const double X = ts_tan((double)i, dxi);
          const double Y1 = ts_tan((double)j, deta), Y2 = ts_tan((double)(j + 1), deta);
          const double Yc = ts_tan(j + 0.5, deta);
          w = ts_gc(X, Y1, X, Y2) / ts_gc(ts_tan(i - 0.5, dxi), Yc, ts_tan(i + 0.5, dxi), Yc);
        } else {
          w = 1.0;
        }
      }
      ax[il + (nxl + 1) * jl] = w;
    }
  for (int64_t jl = 0; jl <= nyl; jl++)
    for (int64_t il = 0; il < nxl; il++) {
      const int64_t i = i0 + il, j = j0 + jl;
      double w = 0.0;
      if (j > 0 && j < gny) {
        if (gnomonic) {
          /* edge eta = eta_j from xi_i to xi_{i+1}; centres (i, j-1) and (i, j) */
          const double Y = ts_tan((double)j, deta);
          const double X1 = ts_tan((double)i, dxi), X2 = ts_tan((double)(i + 1), dxi);
          const double Xc = ts_tan(i + 0.5, dxi);
          w = ts_gc(X1, Y, X2, Y) / ts_gc(Xc, ts_tan(j - 0.5, deta), Xc, ts_tan(j + 0.5, deta));
        } else {
          w = 1.0;
        }
      }
      ay[il + nxl * jl] = w;
    }
  for (int64_t jl = 0; jl < nyl; jl++)
    for (int64_t il = 0; il < nxl; il++)
      asum[il + nxl * jl] = ax[il + (nxl + 1) * jl] + ax[il + 1 + (nxl + 1) * jl] + ay[il + nxl * jl] +
                            ay[il + nxl * (jl + 1)];
}

/** The whole grid's geometry (pk_thinshell_columns over every column). */
static void ts_columns(const pkrylov_thinshell_params *p, double *area, double *ax, double *ay, double *asum) {
  pk_thinshell_columns(p, 0, p->nx, 0, p->ny, area, ax, ay, asum);
}

void pk_thinshell_levels(const pkrylov_thinshell_params *p, double *a, double *b, double *c, double *d) {
  ts_levels(p, a, b, c, d);
}

int pk_thinshell_check_params(pkrylov_context ctx, const char *func, const pkrylov_thinshell_params *p) {
  return ts_check_params(ctx, func, p);
}

int pk_thinshell_setup(pkrylov_context ctx, struct pkrylov_operator_s *A) {
  const pkrylov_thinshell_params *p = &A->ts.p;
  PK_CALL(ts_check_params(ctx, __func__, p));
  const int64_t nx = p->nx, ny = p->ny, nz = p->nz;
  PK_CALLOC(A->ts.a, nz, ctx);
  PK_CALLOC(A->ts.b, nz, ctx);
  PK_CALLOC(A->ts.c, nz, ctx);
  PK_CALLOC(A->ts.d, nz, ctx);
  PK_CALLOC(A->ts.area, nx * ny, ctx);
  PK_CALLOC(A->ts.ax, (nx + 1) * ny, ctx);
  PK_CALLOC(A->ts.ay, nx * (ny + 1), ctx);
  PK_CALLOC(A->ts.asum, nx * ny, ctx);
  ts_levels(p, A->ts.a, A->ts.b, A->ts.c, A->ts.d);
  ts_columns(p, A->ts.area, A->ts.ax, A->ts.ay, A->ts.asum);
  return PKRYLOV_SUCCESS;
}


/**
 * The equivalent CSR of the thin shell holds the diagonal of every cell and each lateral and vertical
 * coupling between existing neighbours, in both rows: n + 2 nz ((nx-1) ny + nx (ny-1)) + 2 (nz-1) nx ny.
 */
int pkrylov_operator_create_thinshell(pkrylov_context ctx, const pkrylov_thinshell_params *p,
                                      pkrylov_operator *A) {
  PK_CHECK(ctx != NULL, NULL, PKRYLOV_ERR_NULL_POINTER, "argument 'ctx' is NULL");
  PK_CHECK_PTR(p, ctx);
  PK_CHECK_PTR(A, ctx);
  PK_CALL(ts_check_params(ctx, __func__, p));
  struct pkrylov_operator_s *B = calloc(1, sizeof *B);
  PK_CHECK(B != NULL, ctx, PKRYLOV_ERR_OUT_OF_MEMORY, "cannot allocate the operator");
  B->ctx = ctx;
  B->type = PKRYLOV_OPERATOR_THINSHELL;
  B->ts.p = *p;
  B->nx = p->nx, B->ny = p->ny, B->nz = p->nz;
  const int64_t nx = p->nx, ny = p->ny, nz = p->nz;
  B->n = nx * ny * nz;
  B->nnz = B->n + 2 * nz * ((nx - 1) * ny + nx * (ny - 1)) + 2 * (nz - 1) * nx * ny;
  int ierr = pk_thinshell_setup(ctx, B);
  if (ierr) {
    pk_op_free(B);
    return ierr;
  }
  return pk_op_register(ctx, B, A);
}

/**
 * aW(i,j,k) = -a_k ax(i,j), aS(i,j,k) = -a_k ay(i,j), aV(i,j,k) = -|T(i,j)| b_k, aC = the diagonal;
 * the couplings across the grid boundary (i = 0, j = 0, k = 0) are 0.
 */
int pkrylov_thinshell_stencil_coefficients(const pkrylov_thinshell_params *p, double *aW, double *aS,
                                           double *aV, double *aC) {
  PK_CHECK(p != NULL, NULL, PKRYLOV_ERR_NULL_POINTER, "argument 'p' is NULL");
  PK_CHECK_PTR(aW, NULL);
  PK_CHECK_PTR(aS, NULL);
  PK_CHECK_PTR(aV, NULL);
  PK_CHECK_PTR(aC, NULL);
  PK_CALL(ts_check_params(NULL, __func__, p));
  const int64_t nx = p->nx, ny = p->ny, nz = p->nz;
  /* one block: a, b, c, d (nz each), area, asum (nx*ny each), ax ((nx+1)*ny), ay (nx*(ny+1)) */
  const int64_t len = 4 * nz + 2 * nx * ny + (nx + 1) * ny + nx * (ny + 1);
  double *w;
  PK_CALLOC(w, len, NULL);
  double *a = w, *b = a + nz, *c = b + nz, *d = c + nz, *area = d + nz, *asum = area + nx * ny;
  double *ax = asum + nx * ny, *ay = ax + (nx + 1) * ny;
  ts_levels(p, a, b, c, d);
  ts_columns(p, area, ax, ay, asum);
  for (int64_t k = 0; k < nz; k++) {
    const double ak = a[k], bk = b[k], ck = c[k], dk = d[k];
    for (int64_t j = 0; j < ny; j++)
      for (int64_t i = 0; i < nx; i++) {
        const int64_t col = i + nx * j, cell = col + nx * ny * k;
        const double ar = area[col], as = asum[col];
        aW[cell] = i > 0 ? -ak * ax[i + (nx + 1) * j] : 0.0;
        aS[cell] = j > 0 ? -ak * ay[i + nx * j] : 0.0;
        aV[cell] = k > 0 ? -ar * bk : 0.0;
        aC[cell] = ar * (dk + bk + ck) + as * ak;
      }
  }
  free(w);
  return PKRYLOV_SUCCESS;
}

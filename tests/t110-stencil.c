/**
 * @file t110-stencil.c
 * @brief 7-point column stencil operators: apply against a plain 7-point loop written here (odd grid,
 *        random coefficients, with and without a mask), symmetry and structure of the CSR export, the
 *        diagonal and column tridiagonal (seen through the Jacobi and column preconditioners), bad inputs.
 */
#include <string.h>

#include "pk_test.h"

enum { NX = 5, NY = 3, NZ = 4, NC = NX * NY * NZ };


typedef struct {
  double aW[NC], aS[NC], aV[NC], aC[NC];
  int32_t mask[NC];
} coeffs;

/** Random coefficients (also at the ignored boundary positions), diagonally dominant aC. */
static void make_coeffs(coeffs *c, uint64_t seed) {
  for (int i = 0; i < NC; i++) {
    c->aW[i] = pk_test_rand(&seed) - 1.0;
    c->aS[i] = pk_test_rand(&seed) - 1.0;
    c->aV[i] = pk_test_rand(&seed) - 1.0;
    c->aC[i] = 20.0 + pk_test_rand(&seed);
    c->mask[i] = 1;
  }
}

static int idx(int i, int j, int k) { return i + NX * (j + NY * k); }
static int wet_at(const int32_t *mask, int c) { return !mask || mask[c] != 0; }

/**
 * Plain 7-point loop of the header formula: couplings to cells outside the grid ignored; with a mask,
 * couplings touching dry cells dropped and dry rows zero.
 */
static void ref_apply(const coeffs *cf, const int32_t *mask, const double *x, double *y) {
  for (int k = 0; k < NZ; k++)
    for (int j = 0; j < NY; j++)
      for (int i = 0; i < NX; i++) {
        int c = idx(i, j, k);
        if (!wet_at(mask, c)) {
          y[c] = 0;
          continue;
        }
        double s = cf->aC[c] * x[c];
        if (i > 0 && wet_at(mask, c - 1)) s += cf->aW[c] * x[c - 1];
        if (i < NX - 1 && wet_at(mask, c + 1)) s += cf->aW[c + 1] * x[c + 1];
        if (j > 0 && wet_at(mask, c - NX)) s += cf->aS[c] * x[c - NX];
        if (j < NY - 1 && wet_at(mask, c + NX)) s += cf->aS[c + NX] * x[c + NX];
        if (k > 0 && wet_at(mask, c - NX * NY)) s += cf->aV[c] * x[c - NX * NY];
        if (k < NZ - 1 && wet_at(mask, c + NX * NY)) s += cf->aV[c + NX * NY] * x[c + NX * NY];
        y[c] = s;
      }
}

/** Expected nnz: diagonal of wet cells + 2 per coupling between existing wet neighbours. */
static int64_t ref_nnz(const int32_t *mask) {
  int64_t nnz = 0;
  for (int k = 0; k < NZ; k++)
    for (int j = 0; j < NY; j++)
      for (int i = 0; i < NX; i++) {
        int c = idx(i, j, k);
        if (!wet_at(mask, c)) continue;
        nnz++;
        if (i > 0 && wet_at(mask, c - 1)) nnz += 2;
        if (j > 0 && wet_at(mask, c - NX)) nnz += 2;
        if (k > 0 && wet_at(mask, c - NX * NY)) nnz += 2;
      }
  return nnz;
}

typedef struct {
  int64_t rp[NC + 1], ci[7 * NC];
  double v[7 * NC];
  int64_t nnz;
} csr_export;

static int export(pkrylov_operator A, csr_export *e) {
  if (pkrylov_operator_get_info(A, NULL, &e->nnz, NULL, NULL, NULL, NULL)) return 1;
  if (e->nnz > 7 * NC) return 1;
  return pkrylov_operator_get_csr(A, e->rp, e->ci, e->v);
}

/** A[r][c] from an export (0 when absent); *found says whether the entry is stored. */
static double ex_entry(const csr_export *e, int64_t r, int64_t c, int *found) {
  for (int64_t p = e->rp[r]; p < e->rp[r + 1]; p++)
    if (e->ci[p] == c) {
      if (found) *found = 1;
      return e->v[p];
    }
  if (found) *found = 0;
  return 0.0;
}

/** Apply through the operator and through the export (pk_test_csr_matvec) vs the plain loop. */
static void check_apply(pkrylov_operator A, const coeffs *cf, const int32_t *mask) {
  double x[NC], y[NC], y2[NC], yref[NC];
  uint64_t s = 99;
  for (int i = 0; i < NC; i++) x[i] = pk_test_rand(&s);
  ref_apply(cf, mask, x, yref);
  PK_EXPECT(pkrylov_operator_apply(A, PKRYLOV_MEM_HOST, x, y) == 0, "apply");
  PK_EXPECT(pk_test_csr_matvec(A, x, y2) == 0, "csr matvec");
  for (int i = 0; i < NC; i++) {
    PK_EXPECT_NEAR(y[i], yref[i], 1e-13 * (1 + fabs(yref[i])));
    PK_EXPECT_NEAR(y2[i], yref[i], 1e-13 * (1 + fabs(yref[i])));
  }
}

PK_TEST_CASE(apply_random_odd_grid) {
  static coeffs cf;
  make_coeffs(&cf, 1);
  pkrylov_context ctx;
  pkrylov_operator A = NULL;
  PK_REQUIRE_OK(NULL, pkrylov_context_create(PKRYLOV_BACKEND_CPU, &ctx));
  PK_REQUIRE_OK(ctx, pkrylov_operator_create_stencil7(ctx, NX, NY, NZ, cf.aW, cf.aS, cf.aV, cf.aC, NULL, &A));
  int64_t n, nnz;
  int32_t type, nx, ny, nz;
  PK_REQUIRE_OK(ctx, pkrylov_operator_get_info(A, &n, &nnz, &type, &nx, &ny, &nz));
  PK_EXPECT(n == NC && type == PKRYLOV_OPERATOR_STENCIL7 && nx == NX && ny == NY && nz == NZ, "info");
  PK_EXPECT(nnz == ref_nnz(NULL), "nnz %lld vs %lld", (long long)nnz, (long long)ref_nnz(NULL));
  check_apply(A, &cf, NULL);
  /* the caller's arrays are copied: changing them afterwards changes nothing */
  cf.aC[7] = 1e6;
  cf.aW[8] = 1e6;
  double x[NC], y[NC], y2[NC];
  for (int i = 0; i < NC; i++) x[i] = 1.0 + i;
  PK_REQUIRE_OK(ctx, pkrylov_operator_apply(A, PKRYLOV_MEM_HOST, x, y));
  make_coeffs(&cf, 1);
  ref_apply(&cf, NULL, x, y2);
  PK_EXPECT(pk_test_rel_diff(NC, y, y2) < 1e-14, "operator depends on the caller's arrays");
  PK_REQUIRE_OK(ctx, pkrylov_operator_destroy(&A));
  PK_REQUIRE_OK(NULL, pkrylov_context_destroy(&ctx));
  PK_TEST_END();
}

PK_TEST_CASE(larger_grid_apply_chunks) {
  /* a grid whose lines straddle the row chunks: 37 x 29 x 11 (11803 cells) vs the export matvec */
  const int32_t nx = 37, ny = 29, nz = 11;
  const int64_t n = (int64_t)nx * ny * nz;
  double *a = malloc(sizeof(double) * 4 * n), *x = malloc(sizeof(double) * n);
  double *y = malloc(sizeof(double) * n), *y2 = malloc(sizeof(double) * n), *yr = malloc(sizeof(double) * n);
  uint64_t s = 3;
  for (int64_t i = 0; i < 4 * n; i++) a[i] = pk_test_rand(&s);
  for (int64_t i = 0; i < n; i++) x[i] = pk_test_rand(&s);
  const double *aW = a, *aS = a + n, *aV = a + 2 * n, *aC = a + 3 * n;
  /* plain loop with the boundary couplings ignored */
  for (int64_t k = 0; k < nz; k++)
    for (int64_t j = 0; j < ny; j++)
      for (int64_t i = 0; i < nx; i++) {
        int64_t c = i + nx * (j + ny * k), nxy = (int64_t)nx * ny;
        double t = aC[c] * x[c];
        if (i > 0) t += aW[c] * x[c - 1];
        if (i < nx - 1) t += aW[c + 1] * x[c + 1];
        if (j > 0) t += aS[c] * x[c - nx];
        if (j < ny - 1) t += aS[c + nx] * x[c + nx];
        if (k > 0) t += aV[c] * x[c - nxy];
        if (k < nz - 1) t += aV[c + nxy] * x[c + nxy];
        yr[c] = t;
      }
  pkrylov_context ctx;
  pkrylov_operator A = NULL;
  PK_REQUIRE_OK(NULL, pkrylov_context_create(PKRYLOV_BACKEND_CPU, &ctx));
  PK_REQUIRE_OK(ctx, pkrylov_operator_create_stencil7(ctx, nx, ny, nz, aW, aS, aV, aC, NULL, &A));
  PK_REQUIRE_OK(ctx, pkrylov_operator_apply(A, PKRYLOV_MEM_HOST, x, y));
  PK_EXPECT(pk_test_csr_matvec(A, x, y2) == 0, "csr matvec");
  PK_EXPECT(pk_test_rel_diff(n, y, yr) < 1e-14, "apply vs loop %g", pk_test_rel_diff(n, y, yr));
  PK_EXPECT(pk_test_rel_diff(n, y2, yr) < 1e-14, "export vs loop %g", pk_test_rel_diff(n, y2, yr));
  /* nx = 1 and ny = 1 grids (degenerate lines) */
  pkrylov_operator B = NULL;
  PK_REQUIRE_OK(ctx, pkrylov_operator_create_stencil7(ctx, 1, 1, 7, aW, aS, aV, aC, NULL, &B));
  PK_REQUIRE_OK(ctx, pkrylov_operator_apply(B, PKRYLOV_MEM_HOST, x, y));
  PK_EXPECT(pk_test_csr_matvec(B, x, y2) == 0, "csr matvec");
  PK_EXPECT(pk_test_rel_diff(7, y, y2) < 1e-14, "1x1x7");
  for (int k = 0; k < 7; k++) {
    double t = aC[k] * x[k] + (k > 0 ? aV[k] * x[k - 1] : 0) + (k < 6 ? aV[k + 1] * x[k + 1] : 0);
    PK_EXPECT_NEAR(y[k], t, 1e-14 * (1 + fabs(t)));
  }
  PK_REQUIRE_OK(ctx, pkrylov_operator_destroy(&B));
  PK_REQUIRE_OK(ctx, pkrylov_operator_destroy(&A));
  PK_REQUIRE_OK(NULL, pkrylov_context_destroy(&ctx));
  free(a), free(x), free(y), free(y2), free(yr);
  PK_TEST_END();
}

PK_TEST_CASE(export_symmetric) {
  static coeffs cf;
  static csr_export e;
  make_coeffs(&cf, 2);
  pkrylov_context ctx;
  pkrylov_operator A = NULL;
  PK_REQUIRE_OK(NULL, pkrylov_context_create(PKRYLOV_BACKEND_CPU, &ctx));
  PK_REQUIRE_OK(ctx, pkrylov_operator_create_stencil7(ctx, NX, NY, NZ, cf.aW, cf.aS, cf.aV, cf.aC, NULL, &A));
  PK_REQUIRE_OK(ctx, export(A, &e));
  PK_EXPECT(e.rp[0] == 0 && e.rp[NC] == e.nnz, "rowptr ends");
  for (int64_t r = 0; r < NC; r++)
    for (int64_t p = e.rp[r]; p < e.rp[r + 1]; p++) {
      if (p > e.rp[r]) PK_EXPECT(e.ci[p] > e.ci[p - 1], "row %lld not sorted", (long long)r);
      int found;
      double t = ex_entry(&e, e.ci[p], r, &found);
      PK_EXPECT(found && t == e.v[p], "A(%lld,%lld) = %g but A^T = %g", (long long)r, (long long)e.ci[p],
                e.v[p], t);
    }
  /* a few entries against the coefficients: the face of the larger index */
  int found;
  PK_EXPECT(ex_entry(&e, idx(2, 1, 1), idx(1, 1, 1), &found) == cf.aW[idx(2, 1, 1)] && found, "west");
  PK_EXPECT(ex_entry(&e, idx(2, 1, 1), idx(2, 2, 1), &found) == cf.aS[idx(2, 2, 1)] && found, "north");
  PK_EXPECT(ex_entry(&e, idx(2, 1, 1), idx(2, 1, 2), &found) == cf.aV[idx(2, 1, 2)] && found, "up");
  ex_entry(&e, idx(0, 1, 1), idx(4, 0, 1), &found); /* x[c-1] of i = 0 is another line */
  PK_EXPECT(!found, "no coupling across the line end");
  PK_REQUIRE_OK(ctx, pkrylov_operator_destroy(&A));
  PK_REQUIRE_OK(NULL, pkrylov_context_destroy(&ctx));
  PK_TEST_END();
}

PK_TEST_CASE(mask_dry_cells) {
  static coeffs cf;
  static csr_export e;
  make_coeffs(&cf, 3);
  const int dry[] = {idx(0, 0, 0), idx(2, 1, 1), idx(4, 2, 3), idx(2, 1, 2), idx(3, 0, 2)};
  for (size_t d = 0; d < sizeof dry / sizeof dry[0]; d++) {
    cf.mask[dry[d]] = 0;
    cf.aC[dry[d]] = INFINITY; /* ignored at dry cells */
    cf.aW[dry[d]] = NAN;      /* coupling to a dry cell: ignored */
  }
  cf.mask[idx(1, 1, 1)] = -7; /* any nonzero value is wet */
  cf.aW[idx(0, 2, 2)] = NAN;  /* couples outside the grid: ignored */
  cf.aS[idx(3, 0, 1)] = INFINITY;
  cf.aV[idx(1, 1, 0)] = NAN;
  pkrylov_context ctx;
  pkrylov_operator A = NULL;
  PK_REQUIRE_OK(NULL, pkrylov_context_create(PKRYLOV_BACKEND_CPU, &ctx));
  PK_REQUIRE_OK(ctx,
                pkrylov_operator_create_stencil7(ctx, NX, NY, NZ, cf.aW, cf.aS, cf.aV, cf.aC, cf.mask, &A));
  int64_t nnz;
  PK_REQUIRE_OK(ctx, pkrylov_operator_get_info(A, NULL, &nnz, NULL, NULL, NULL, NULL));
  PK_EXPECT(nnz == ref_nnz(cf.mask), "nnz %lld vs %lld", (long long)nnz, (long long)ref_nnz(cf.mask));
  PK_REQUIRE_OK(ctx, export(A, &e));
  for (int64_t r = 0; r < NC; r++) {
    if (!cf.mask[r]) PK_EXPECT(e.rp[r + 1] == e.rp[r], "dry row %lld not empty", (long long)r);
    for (int64_t p = e.rp[r]; p < e.rp[r + 1]; p++)
      PK_EXPECT(cf.mask[e.ci[p]] != 0, "row %lld couples to dry cell %lld", (long long)r, (long long)e.ci[p]);
  }
  /* apply: the NaN/Inf at ignored positions must not leak; dry rows give 0 */
  check_apply(A, &cf, cf.mask);
  double x[NC], y[NC];
  for (int i = 0; i < NC; i++) x[i] = 1.0;
  PK_REQUIRE_OK(ctx, pkrylov_operator_apply(A, PKRYLOV_MEM_HOST, x, y));
  for (size_t d = 0; d < sizeof dry / sizeof dry[0]; d++) PK_EXPECT(y[dry[d]] == 0.0, "dry cell result");
  PK_REQUIRE_OK(ctx, pkrylov_operator_destroy(&A));
  PK_REQUIRE_OK(NULL, pkrylov_context_destroy(&ctx));
  PK_TEST_END();
}

/** r = T v with T the column tridiagonal of the stencil (couplings k-1, k+1 and the diagonal), identity
 *  rows at dry cells. */
static void ref_tridiag_apply(const coeffs *cf, const int32_t *mask, const double *v, double *r) {
  const int nxy = NX * NY;
  for (int c = 0; c < NC; c++) {
    int k = c / nxy;
    if (!wet_at(mask, c)) {
      r[c] = v[c];
      continue;
    }
    double s = cf->aC[c] * v[c];
    if (k > 0 && wet_at(mask, c - nxy)) s += cf->aV[c] * v[c - nxy];
    if (k < NZ - 1 && wet_at(mask, c + nxy)) s += cf->aV[c + nxy] * v[c + nxy];
    r[c] = s;
  }
}

PK_TEST_CASE(diagonal_and_tridiag) {
  static coeffs cf;
  static csr_export e;
  make_coeffs(&cf, 4);
  pkrylov_context ctx;
  pkrylov_operator A = NULL, Ac = NULL, Af = NULL;
  pkrylov_precond M = NULL;
  double v[NC], r[NC], z[NC];
  uint64_t s = 17;
  for (int i = 0; i < NC; i++) v[i] = pk_test_rand(&s);
  PK_REQUIRE_OK(NULL, pkrylov_context_create(PKRYLOV_BACKEND_CPU, &ctx));
  PK_REQUIRE_OK(ctx, pkrylov_operator_create_stencil7(ctx, NX, NY, NZ, cf.aW, cf.aS, cf.aV, cf.aC, NULL, &A));
  /* diagonal: Jacobi z = r / aC */
  PK_REQUIRE_OK(ctx, pkrylov_precond_create(ctx, A, PKRYLOV_PRECOND_JACOBI, 0, PKRYLOV_LAYOUT_AUTO, &M));
  PK_EXPECT_CODE(ctx, pkrylov_operator_destroy(&A), PKRYLOV_ERR_INVALID_STATE); /* held by M */
  PK_EXPECT(A != NULL, "handle cleared by a refused destroy");
  for (int i = 0; i < NC; i++) r[i] = v[i] * cf.aC[i];
  PK_REQUIRE_OK(ctx, pkrylov_precond_apply(M, PKRYLOV_MEM_HOST, r, z));
  PK_EXPECT(pk_test_rel_diff(NC, z, v) < 1e-14, "jacobi %g", pk_test_rel_diff(NC, z, v));
  PK_REQUIRE_OK(ctx, pkrylov_precond_destroy(&M));
  /* column tridiagonal (stencil, its own kslow layout): M^-1 (T v) = v */
  ref_tridiag_apply(&cf, NULL, v, r);
  PK_REQUIRE_OK(ctx, pkrylov_precond_create(ctx, A, PKRYLOV_PRECOND_COLUMN, 0, PKRYLOV_LAYOUT_AUTO, &M));
  PK_REQUIRE_OK(ctx, pkrylov_precond_apply(M, PKRYLOV_MEM_HOST, r, z));
  PK_EXPECT(pk_test_rel_diff(NC, z, v) < 1e-12, "column stencil %g", pk_test_rel_diff(NC, z, v));
  PK_REQUIRE_OK(ctx, pkrylov_precond_destroy(&M));
  /* the same matrix as CSR (export), kslow: the binary-search path */
  PK_REQUIRE_OK(ctx, export(A, &e));
  PK_REQUIRE_OK(ctx, pkrylov_operator_create_csr64(ctx, NC, 0, e.rp, e.ci, e.v, &Ac));
  PK_REQUIRE_OK(ctx, pkrylov_precond_create(ctx, Ac, PKRYLOV_PRECOND_COLUMN, NZ, PKRYLOV_LAYOUT_KSLOW, &M));
  PK_REQUIRE_OK(ctx, pkrylov_precond_apply(M, PKRYLOV_MEM_HOST, r, z));
  PK_EXPECT(pk_test_rel_diff(NC, z, v) < 1e-12, "column csr kslow %g", pk_test_rel_diff(NC, z, v));
  PK_REQUIRE_OK(ctx, pkrylov_precond_destroy(&M));
  /* permuted to kfast order: cell(c, k) = k + NZ c */
  {
    static int64_t rp[NC + 1], ci[7 * NC];
    static double vv[7 * NC];
    double rf[NC], vf[NC], zf[NC];
    int perm[NC]; /* kslow index -> kfast index */
    for (int c = 0; c < NX * NY; c++)
      for (int k = 0; k < NZ; k++) perm[c + NX * NY * k] = k + NZ * c;
    int64_t pos = 0;
    rp[0] = 0;
    for (int rf_i = 0; rf_i < NC; rf_i++) {
      int r0 = -1;
      for (int q = 0; q < NC; q++)
        if (perm[q] == rf_i) r0 = q;
      for (int64_t p = e.rp[r0]; p < e.rp[r0 + 1]; p++) ci[pos] = perm[e.ci[p]], vv[pos++] = e.v[p];
      rp[rf_i + 1] = pos;
    }
    for (int q = 0; q < NC; q++) rf[perm[q]] = r[q], vf[perm[q]] = v[q];
    PK_REQUIRE_OK(ctx, pkrylov_operator_create_csr64(ctx, NC, 0, rp, ci, vv, &Af)); /* rows unsorted */
    PK_REQUIRE_OK(ctx, pkrylov_precond_create(ctx, Af, PKRYLOV_PRECOND_COLUMN, NZ, PKRYLOV_LAYOUT_KFAST, &M));
    PK_REQUIRE_OK(ctx, pkrylov_precond_apply(M, PKRYLOV_MEM_HOST, rf, zf));
    PK_EXPECT(pk_test_rel_diff(NC, zf, vf) < 1e-12, "column csr kfast %g", pk_test_rel_diff(NC, zf, vf));
    PK_REQUIRE_OK(ctx, pkrylov_precond_destroy(&M));
  }
  /* with a mask: dry cells are identity rows of the column tridiagonal */
  pkrylov_operator Am = NULL;
  cf.mask[idx(1, 1, 0)] = 0;
  cf.mask[idx(3, 2, 2)] = 0;
  ref_tridiag_apply(&cf, cf.mask, v, r);
  PK_REQUIRE_OK(ctx,
                pkrylov_operator_create_stencil7(ctx, NX, NY, NZ, cf.aW, cf.aS, cf.aV, cf.aC, cf.mask, &Am));
  PK_REQUIRE_OK(ctx, pkrylov_precond_create(ctx, Am, PKRYLOV_PRECOND_COLUMN, 0, PKRYLOV_LAYOUT_AUTO, &M));
  PK_REQUIRE_OK(ctx, pkrylov_precond_apply(M, PKRYLOV_MEM_HOST, r, z));
  PK_EXPECT(pk_test_rel_diff(NC, z, v) < 1e-12, "column masked %g", pk_test_rel_diff(NC, z, v));
  PK_REQUIRE_OK(ctx, pkrylov_precond_destroy(&M));
  PK_REQUIRE_OK(ctx, pkrylov_operator_destroy(&Am));
  PK_REQUIRE_OK(ctx, pkrylov_operator_destroy(&Af));
  PK_REQUIRE_OK(ctx, pkrylov_operator_destroy(&Ac));
  PK_REQUIRE_OK(ctx, pkrylov_operator_destroy(&A));
  PK_REQUIRE_OK(NULL, pkrylov_context_destroy(&ctx));
  PK_TEST_END();
}

/* ---- bad inputs ---------------------------------------------------------------------------------- */

PK_TEST_CASE(bad_size) {
  static coeffs cf;
  make_coeffs(&cf, 5);
  pkrylov_context ctx;
  pkrylov_operator A = NULL;
  PK_REQUIRE_OK(NULL, pkrylov_context_create(PKRYLOV_BACKEND_CPU, &ctx));
  PK_EXPECT_CODE(ctx, pkrylov_operator_create_stencil7(ctx, 0, NY, NZ, cf.aW, cf.aS, cf.aV, cf.aC, NULL, &A),
                 PKRYLOV_ERR_INVALID_SIZE);
  PK_EXPECT(pk_test_msg_has(ctx, "'nx' = 0"), "names nx");
  PK_EXPECT_CODE(ctx, pkrylov_operator_create_stencil7(ctx, NX, -2, NZ, cf.aW, cf.aS, cf.aV, cf.aC, NULL, &A),
                 PKRYLOV_ERR_INVALID_SIZE);
  PK_EXPECT(pk_test_msg_has(ctx, "'ny' = -2"), "names ny");
  PK_EXPECT_CODE(ctx, pkrylov_operator_create_stencil7(ctx, NX, NY, 0, cf.aW, cf.aS, cf.aV, cf.aC, NULL, &A),
                 PKRYLOV_ERR_INVALID_SIZE);
  PK_EXPECT(pk_test_msg_has(ctx, "'nz'"), "names nz");
  PK_EXPECT(A == NULL, "handle modified");
  PK_REQUIRE_OK(NULL, pkrylov_context_destroy(&ctx));
  PK_TEST_END();
}

PK_TEST_CASE(bad_null) {
  static coeffs cf;
  make_coeffs(&cf, 6);
  pkrylov_context ctx;
  pkrylov_operator A = NULL;
  PK_EXPECT_CODE(NULL,
                 pkrylov_operator_create_stencil7(NULL, NX, NY, NZ, cf.aW, cf.aS, cf.aV, cf.aC, NULL, &A),
                 PKRYLOV_ERR_NULL_POINTER);
  PK_EXPECT(pk_test_msg_has(NULL, "'ctx'"), "names ctx");
  PK_REQUIRE_OK(NULL, pkrylov_context_create(PKRYLOV_BACKEND_CPU, &ctx));
  PK_EXPECT_CODE(ctx, pkrylov_operator_create_stencil7(ctx, NX, NY, NZ, cf.aW, cf.aS, cf.aV, NULL, NULL, &A),
                 PKRYLOV_ERR_NULL_POINTER);
  PK_EXPECT(pk_test_msg_has(ctx, "'aC'"), "names aC");
  PK_EXPECT_CODE(ctx, pkrylov_operator_create_stencil7(ctx, NX, NY, NZ, NULL, cf.aS, cf.aV, cf.aC, NULL, &A),
                 PKRYLOV_ERR_NULL_POINTER);
  PK_EXPECT(pk_test_msg_has(ctx, "'aW'"), "names aW");
  PK_EXPECT_CODE(ctx,
                 pkrylov_operator_create_stencil7(ctx, NX, NY, NZ, cf.aW, cf.aS, cf.aV, cf.aC, NULL, NULL),
                 PKRYLOV_ERR_NULL_POINTER);
  PK_EXPECT(pk_test_msg_has(ctx, "'A'"), "names A");
  PK_EXPECT(A == NULL, "handle modified");
  PK_REQUIRE_OK(NULL, pkrylov_context_destroy(&ctx));
  PK_TEST_END();
}

PK_TEST_CASE(bad_not_finite) {
  static coeffs cf;
  make_coeffs(&cf, 7);
  pkrylov_context ctx;
  pkrylov_operator A = NULL;
  PK_REQUIRE_OK(NULL, pkrylov_context_create(PKRYLOV_BACKEND_CPU, &ctx));
  cf.aV[idx(1, 2, 3)] = NAN;
  PK_EXPECT_CODE(ctx, pkrylov_operator_create_stencil7(ctx, NX, NY, NZ, cf.aW, cf.aS, cf.aV, cf.aC, NULL, &A),
                 PKRYLOV_ERR_NOT_FINITE);
  PK_EXPECT(pk_test_msg_has(ctx, "'aV'") && pk_test_msg_has(ctx, "(1,2,3)"), "names aV and the cell");
  make_coeffs(&cf, 7);
  cf.aC[idx(4, 0, 0)] = -INFINITY;
  PK_EXPECT_CODE(ctx, pkrylov_operator_create_stencil7(ctx, NX, NY, NZ, cf.aW, cf.aS, cf.aV, cf.aC, NULL, &A),
                 PKRYLOV_ERR_NOT_FINITE);
  PK_EXPECT(pk_test_msg_has(ctx, "'aC'") && pk_test_msg_has(ctx, "(4,0,0)"), "names aC and the cell");
  PK_EXPECT(A == NULL, "handle modified");
  PK_REQUIRE_OK(NULL, pkrylov_context_destroy(&ctx));
  PK_TEST_END();
}

PK_TEST_MAIN(PK_TEST_ENTRY(apply_random_odd_grid), PK_TEST_ENTRY(larger_grid_apply_chunks),
             PK_TEST_ENTRY(export_symmetric), PK_TEST_ENTRY(mask_dry_cells),
             PK_TEST_ENTRY(diagonal_and_tridiag), PK_TEST_ENTRY(bad_size), PK_TEST_ENTRY(bad_null),
             PK_TEST_ENTRY(bad_not_finite))

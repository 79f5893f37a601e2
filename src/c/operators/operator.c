/**
 * @file operator.c
 * @brief Operators: CSR (32/64-bit input), the 7-point column stencil, the thin shell (created in
 *        thinshell.c) and user callbacks: validation, destruction, row-range apply, diagonal, column
 *        tridiagonal, CSR export; the failure flags of user callbacks (operators and preconditioners).
 *
 * Equivalent CSR of the grid operators (what pkrylov_operator_get_csr() writes and what
 * pkrylov_operator_get_info() counts as nnz):
 *  - column stencil: the diagonal of every wet cell, plus every coupling between two EXISTING (inside
 *    the grid) and WET neighbours, listed in both rows, even when its coefficient is 0.0. A dry cell
 *    has an empty row and appears in no other row. Without a mask every cell is wet.
 *  - thin shell: the diagonal of every cell plus every lateral and vertical coupling between existing
 *    neighbours (the structure of the stencil without a mask).
 * Within a row the entries are in increasing column order: k-1, j-1, i-1, diagonal, i+1, j+1, k+1.
 *
 * The grid apply loops run over (j,k) lines with a vectorisable inner loop over i (i = 0 and nx - 1
 * peeled). They assume x is finite: a coupling that does not exist has a zero coefficient (stencil: the
 * zeroed copies; thin shell: zero boundary face weights, b_0 = 0, c_{nz-1} = 0) and is multiplied by a
 * value inside x (the own line stands in for a missing neighbour line), so no load leaves x.
 * The thin shell is applied in flux form (see ts_line), which equals its matrix up to rounding.
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "pk_impl.h"
/* ------------------------------------------------------------------------------------------------ */
/* Helpers                                                                                           */

/** Free every array of an operator and the operator itself (any field may be NULL). */
void pk_op_free(struct pkrylov_operator_s *A) {
  if (A && A->dev) A->ctx->be->operator_free(A);
  if (!A) return;
  free(A->csr.rowptr);
  free(A->csr.colind32);
  free(A->csr.colind64);
  free(A->csr.values);
  pk_stencil_free(&A->st);
  pk_grid_xchg_free(&A->gx);
  if (A->grid) A->grid->refs--;
  free(A->ts.a);
  free(A->ts.b);
  free(A->ts.c);
  free(A->ts.d);
  free(A->ts.area);
  free(A->ts.ax);
  free(A->ts.ay);
  free(A->ts.asum);
  free(A->user.scratch);
  free(A->halo.xh);
  free(A->halo.cw);
  free(A->halo.ce);
  free(A->halo.cs);
  free(A->halo.cn);
  pk_dist_free(A->dist);
  free(A);
}

/** Thin-shell diagonal of column col on level k: |T| (d_k + b_k + c_k) + asum a_k (the same expression
 *  as the stencil coefficient aC of thinshell.c, so both forms round alike). */
static inline double ts_diag(const struct pkrylov_operator_s *A, int64_t col, int64_t k) {
  return A->ts.area[col] * (A->ts.d[k] + A->ts.b[k] + A->ts.c[k]) + A->ts.asum[col] * A->ts.a[k];
}

/**
 * Entries of row (i,j,k) of a grid operator (stencil or thin shell) in increasing column order.
 * Writes the columns and values when cols/vals are not NULL; returns the number of entries.
 */
static int grid_row(const struct pkrylov_operator_s *A, int64_t i, int64_t j, int64_t k, int64_t *cols,
                    double *vals) {
  const int64_t nx = A->nx, ny = A->ny, nz = A->nz, nxy = nx * ny;
  const int64_t c = i + nx * (j + ny * k);
  if (A->grid) return pk_grid_op_row(A, c, cols, vals); /* a grid stencil: the plan's neighbours */
  int64_t nb[7];
  double v[7];
  int cnt = 0;
  if (A->type == PKRYLOV_OPERATOR_STENCIL7) {
    const uint8_t *wet = A->st.wet;
    if (wet && !wet[c]) return 0;
    /* couplings between existing wet neighbours, coefficient as stored (face of the larger index) */
#define PK_ST_NB(cond, col, val)                                                                   \
  if ((cond) && (!wet || wet[col])) {                                                              \
    nb[cnt] = (col);                                                                               \
    v[cnt++] = (val);                                                                              \
  }
    PK_ST_NB(k > 0, c - nxy, A->st.aV[c]);
    PK_ST_NB(j > 0, c - nx, A->st.aS[c]);
    PK_ST_NB(i > 0, c - 1, A->st.aW[c]);
    nb[cnt] = c;
    v[cnt++] = A->st.aC[c];
    PK_ST_NB(i < nx - 1, c + 1, A->st.aW[c + 1]);
    PK_ST_NB(j < ny - 1, c + nx, A->st.aS[c + nx]);
    PK_ST_NB(k < nz - 1, c + nxy, A->st.aV[c + nxy]);
#undef PK_ST_NB
  } else {
    /* thin shell: A[(i,k),(j,k)] = -alpha a_k, A[(i,k),(i,k-+1)] = -|T| b_k, -|T| c_k,
       diagonal |T| (d_k + b_k + c_k) + (sum alpha) a_k */
    const int64_t col = i + nx * j;
    const double ak = A->ts.a[k], bk = A->ts.b[k], ck = A->ts.c[k], ar = A->ts.area[col];
    const double *ax = A->ts.ax + (nx + 1) * j;
    if (k > 0) nb[cnt] = c - nxy, v[cnt++] = -ar * bk;
    if (j > 0) nb[cnt] = c - nx, v[cnt++] = -ak * A->ts.ay[i + nx * j];
    if (i > 0) nb[cnt] = c - 1, v[cnt++] = -ak * ax[i];
    nb[cnt] = c, v[cnt++] = ts_diag(A, col, k);
    if (i < nx - 1) nb[cnt] = c + 1, v[cnt++] = -ak * ax[i + 1];
    if (j < ny - 1) nb[cnt] = c + nx, v[cnt++] = -ak * A->ts.ay[i + nx * (j + 1)];
    if (k < nz - 1) nb[cnt] = c + nxy, v[cnt++] = -ar * ck;
  }
  if (cols)
    for (int e = 0; e < cnt; e++) cols[e] = nb[e];
  if (vals)
    for (int e = 0; e < cnt; e++) vals[e] = v[e];
  return cnt;
}

/** Position of column col in the sorted CSR row, or -1 (binary search). */
static int64_t csr_find(const struct pkrylov_operator_s *A, int64_t row, int64_t col) {
  col += A->csr.col_offset; /* a distributed CSR stores its ghost columns below the block first */
  int64_t lo = A->csr.rowptr[row], hi = A->csr.rowptr[row + 1];
  while (lo < hi) {
    int64_t mid = lo + (hi - lo) / 2;
    int64_t cm = A->csr.colind32 ? (int64_t)A->csr.colind32[mid] : A->csr.colind64[mid];
    if (cm == col) return mid;
    if (cm < col)
      lo = mid + 1;
    else
      hi = mid;
  }
  return -1;
}

/** A[row][col] of any operator (0 where no entry is stored). Not for hot loops. */
static double op_entry(const struct pkrylov_operator_s *A, int64_t row, int64_t col) {
  if (A->type == PKRYLOV_OPERATOR_CSR) {
    int64_t p = csr_find(A, row, col);
    return p < 0 ? 0.0 : A->csr.values[p];
  }
  const int64_t nx = A->nx, ny = A->ny;
  const int64_t line = row / nx, k = line / ny;
  int64_t cols[7];
  double vals[7];
  int cnt = grid_row(A, row - line * nx, line - k * ny, k, cols, vals);
  for (int e = 0; e < cnt; e++)
    if (cols[e] == col) return vals[e];
  return 0.0;
}

/* ------------------------------------------------------------------------------------------------ */
/* CSR creation                                                                                      */

/** The caller's CSR arrays, 32- or 64-bit (exactly one pair is set). */
typedef struct {
  const int32_t *rp32, *ci32;
  const int64_t *rp64, *ci64;
} csr_input;

static inline int64_t in_rp(const csr_input *in, int64_t i) {
  return in->rp32 ? (int64_t)in->rp32[i] : in->rp64[i];
}
static inline int64_t in_ci(const csr_input *in, int64_t p) {
  return in->ci32 ? (int64_t)in->ci32[p] : in->ci64[p];
}

/** (column, value) pair for sorting a row. */
typedef struct {
  int64_t col;
  double val;
} csr_pair;

static int csr_pair_cmp(const void *a, const void *b) {
  int64_t ca = ((const csr_pair *)a)->col, cb = ((const csr_pair *)b)->col;
  return (ca > cb) - (ca < cb);
}

/**
 * Validate and copy a CSR matrix (common part of the 32- and 64-bit constructors). ctx, A and the
 * arrays are known non-NULL. Checks in order: n, index_base, rowptr, column range, finite values,
 * duplicates (after sorting the copy).
 */
static int csr_create(pkrylov_context ctx, const char *func, int64_t n, int32_t index_base,
                      const csr_input *in, const double *values, pkrylov_operator *Aout) {
  if (n <= 0) return pk_error(ctx, PKRYLOV_ERR_INVALID_SIZE, func, "argument 'n' = %lld must be > 0",
                              (long long)n);
  if (index_base != 0 && index_base != 1)
    return pk_error(ctx, PKRYLOV_ERR_INVALID_VALUE, func, "argument 'index_base' = %d must be 0 or 1",
                    index_base);
  const int64_t base = index_base;
  if (in_rp(in, 0) != base)
    return pk_error(ctx, PKRYLOV_ERR_INDEX_OUT_OF_RANGE, func,
                    "argument 'rowptr': rowptr[0] = %lld (row 0) must equal index_base = %d",
                    (long long)in_rp(in, 0), index_base);
  for (int64_t r = 0; r < n; r++)
    if (in_rp(in, r + 1) < in_rp(in, r))
      return pk_error(ctx, PKRYLOV_ERR_INDEX_OUT_OF_RANGE, func,
                      "argument 'rowptr' decreases at row %lld: rowptr[%lld] = %lld < rowptr[%lld] = %lld",
                      (long long)r, (long long)(r + 1), (long long)in_rp(in, r + 1), (long long)r,
                      (long long)in_rp(in, r));
  const int64_t nnz = in_rp(in, n) - base;
  for (int64_t r = 0; r < n; r++)
    for (int64_t p = in_rp(in, r) - base; p < in_rp(in, r + 1) - base; p++) {
      int64_t c = in_ci(in, p);
      if (c < base || c >= n + base)
        return pk_error(ctx, PKRYLOV_ERR_INDEX_OUT_OF_RANGE, func,
                        "argument 'colind': colind[%lld] = %lld in row %lld (row numbered from index_base "
                        "%d) is outside [%lld, %lld)",
                        (long long)p, (long long)c, (long long)(r + base), index_base, (long long)base,
                        (long long)(n + base));
    }
  for (int64_t r = 0; r < n; r++)
    for (int64_t p = in_rp(in, r) - base; p < in_rp(in, r + 1) - base; p++)
      if (!isfinite(values[p]))
        return pk_error(ctx, PKRYLOV_ERR_NOT_FINITE, func,
                        "argument 'values': values[%lld] = %g at row %lld, column %lld (numbered from "
                        "index_base %d) is not finite",
                        (long long)p, values[p], (long long)(r + base), (long long)in_ci(in, p), index_base);

  struct pkrylov_operator_s *A = calloc(1, sizeof *A);
  if (!A) return pk_error(ctx, PKRYLOV_ERR_OUT_OF_MEMORY, func, "cannot allocate the operator");
  A->ctx = ctx;
  A->type = PKRYLOV_OPERATOR_CSR;
  A->n = n;
  A->nnz = nnz;
  A->csr.rowptr = malloc(sizeof(int64_t) * (size_t)(n + 1));
  A->csr.values = malloc(sizeof(double) * (size_t)(nnz ? nnz : 1));
  if (n <= INT32_MAX)
    A->csr.colind32 = malloc(sizeof(int32_t) * (size_t)(nnz ? nnz : 1));
  else
    A->csr.colind64 = malloc(sizeof(int64_t) * (size_t)(nnz ? nnz : 1));
  if (!A->csr.rowptr || !A->csr.values || !(A->csr.colind32 || A->csr.colind64)) {
    pk_op_free(A);
    return pk_error(ctx, PKRYLOV_ERR_OUT_OF_MEMORY, func, "cannot allocate the CSR copy (nnz = %lld)",
                    (long long)nnz);
  }
  int64_t *rp = A->csr.rowptr;
  for (int64_t r = 0; r <= n; r++) rp[r] = in_rp(in, r) - base;
  memcpy(A->csr.values, values, sizeof(double) * (size_t)nnz);
  if (A->csr.colind32)
    for (int64_t p = 0; p < nnz; p++) A->csr.colind32[p] = (int32_t)(in_ci(in, p) - base);
  else
    for (int64_t p = 0; p < nnz; p++) A->csr.colind64[p] = in_ci(in, p) - base;

  /* sort the rows that are not sorted: (col, value) pairs */
  csr_pair *tmp = NULL;
  int64_t tmp_len = 0;
  for (int64_t r = 0; r < n; r++) {
    int64_t p0 = rp[r], p1 = rp[r + 1], sorted = 1;
    for (int64_t p = p0 + 1; p < p1 && sorted; p++)
      if (in_ci(in, p) < in_ci(in, p - 1)) sorted = 0;
    if (!sorted) {
      if (p1 - p0 > tmp_len) {
        free(tmp);
        tmp_len = p1 - p0;
        tmp = malloc(sizeof(csr_pair) * (size_t)tmp_len);
        if (!tmp) {
          pk_op_free(A);
          return pk_error(ctx, PKRYLOV_ERR_OUT_OF_MEMORY, func, "cannot allocate %lld bytes to sort a row",
                          (long long)(sizeof(csr_pair) * (size_t)tmp_len));
        }
      }
      for (int64_t p = p0; p < p1; p++) tmp[p - p0] = (csr_pair){in_ci(in, p) - base, values[p]};
      qsort(tmp, (size_t)(p1 - p0), sizeof(csr_pair), csr_pair_cmp);
      for (int64_t p = p0; p < p1; p++) {
        if (A->csr.colind32)
          A->csr.colind32[p] = (int32_t)tmp[p - p0].col;
        else
          A->csr.colind64[p] = tmp[p - p0].col;
        A->csr.values[p] = tmp[p - p0].val;
      }
    }
    for (int64_t p = p0 + 1; p < p1; p++) {
      int64_t cp = A->csr.colind32 ? (int64_t)A->csr.colind32[p] : A->csr.colind64[p];
      int64_t cq = A->csr.colind32 ? (int64_t)A->csr.colind32[p - 1] : A->csr.colind64[p - 1];
      if (cp == cq) {
        free(tmp);
        pk_op_free(A);
        return pk_error(ctx, PKRYLOV_ERR_DUPLICATE_ENTRY, func,
                        "arguments 'colind'/'rowptr': entry (row %lld, column %lld) (numbered from "
                        "index_base %d) appears more than once",
                        (long long)(r + base), (long long)(cp + base), index_base);
      }
    }
  }
  free(tmp);
  return pk_op_register(ctx, A, Aout);
}

int pkrylov_operator_create_csr(pkrylov_context ctx, int32_t n, int32_t index_base, const int32_t *rowptr,
                                const int32_t *colind, const double *values, pkrylov_operator *A) {
  PK_CHECK(ctx != NULL, NULL, PKRYLOV_ERR_NULL_POINTER, "argument 'ctx' is NULL");
  PK_CHECK_PTR(A, ctx);
  PK_CHECK_PTR(rowptr, ctx);
  PK_CHECK_PTR(colind, ctx);
  PK_CHECK_PTR(values, ctx);
  csr_input in = {rowptr, colind, NULL, NULL};
  return csr_create(ctx, __func__, n, index_base, &in, values, A);
}

int pkrylov_operator_create_csr64(pkrylov_context ctx, int64_t n, int32_t index_base, const int64_t *rowptr,
                                  const int64_t *colind, const double *values, pkrylov_operator *A) {
  PK_CHECK(ctx != NULL, NULL, PKRYLOV_ERR_NULL_POINTER, "argument 'ctx' is NULL");
  PK_CHECK_PTR(A, ctx);
  PK_CHECK_PTR(rowptr, ctx);
  PK_CHECK_PTR(colind, ctx);
  PK_CHECK_PTR(values, ctx);
  PK_CHECK(n < INT64_MAX, ctx, PKRYLOV_ERR_INVALID_SIZE, "argument 'n' = %lld is too large", (long long)n);
  csr_input in = {NULL, NULL, rowptr, colind};
  return csr_create(ctx, __func__, n, index_base, &in, values, A);
}

/* ------------------------------------------------------------------------------------------------ */
/* Column stencil creation                                                                           */

/** Report the first non-finite value of a stencil array copy (index -> (i,j,k)); 0 when all finite. */
static int st_check_finite(pkrylov_context ctx, const char *func, const char *name, const double *v,
                           int64_t n, int64_t nx, int64_t ny) {
  int64_t c = pk_first_nonfinite(v, n);
  if (c < 0) return PKRYLOV_SUCCESS;
  int64_t line = c / nx, k = line / ny;
  return pk_error(ctx, PKRYLOV_ERR_NOT_FINITE, func,
                  "argument '%s' = %g at cell (i,j,k) = (%lld,%lld,%lld) (0-based, linear index %lld) is "
                  "not finite",
                  name, v[c], (long long)(c - line * nx), (long long)(line - k * ny), (long long)k,
                  (long long)c);
}

/**
 * The copies keep only the coefficients that enter A: couplings across the grid boundary (aW at i = 0,
 * aS at j = 0, aV at k = 0) and, with a mask, every coupling touching a dry cell and aC of dry cells
 * are set to 0. Only the values that enter A are checked for NaN/Inf (ignored ones may hold anything).
 */
static int st_build(pkrylov_context ctx, const char *func, int32_t nx, int32_t ny, int32_t nz,
                    const double *aW, const double *aS, const double *aV, const double *aC,
                    const int32_t *mask, struct pkrylov_operator_s **out) {
  PK_CHECK(nx >= 1, ctx, PKRYLOV_ERR_INVALID_SIZE, "argument 'nx' = %d must be >= 1", nx);
  PK_CHECK(ny >= 1, ctx, PKRYLOV_ERR_INVALID_SIZE, "argument 'ny' = %d must be >= 1", ny);
  PK_CHECK(nz >= 1, ctx, PKRYLOV_ERR_INVALID_SIZE, "argument 'nz' = %d must be >= 1", nz);
  const int64_t nxy = (int64_t)nx * ny;
  PK_CHECK(nxy <= (INT64_MAX / 16) / nz, ctx, PKRYLOV_ERR_INVALID_SIZE,
           "arguments 'nx' x 'ny' x 'nz' = %d x %d x %d: too many cells", nx, ny, nz);
  const int64_t n = nxy * nz;

  struct pkrylov_operator_s *B = calloc(1, sizeof *B);
  PK_CHECK(B != NULL, ctx, PKRYLOV_ERR_OUT_OF_MEMORY, "cannot allocate the operator");
  B->ctx = ctx;
  B->type = PKRYLOV_OPERATOR_STENCIL7;
  B->n = n;
  B->nx = nx, B->ny = ny, B->nz = nz;
  B->st.aW = malloc(sizeof(double) * (size_t)n);
  B->st.aS = malloc(sizeof(double) * (size_t)n);
  B->st.aV = malloc(sizeof(double) * (size_t)n);
  B->st.aC = malloc(sizeof(double) * (size_t)n);
  if (mask) B->st.wet = malloc((size_t)n);
  if (!B->st.aW || !B->st.aS || !B->st.aV || !B->st.aC || (mask && !B->st.wet)) {
    pk_op_free(B);
    return pk_error(ctx, PKRYLOV_ERR_OUT_OF_MEMORY, func, "cannot allocate the stencil copy (%lld cells)",
                    (long long)n);
  }
  uint8_t *wet = B->st.wet;
  if (wet)
    for (int64_t c = 0; c < n; c++) wet[c] = mask[c] != 0;
  /* copy, keeping the couplings between existing (wet) neighbours only */
  for (int64_t k = 0; k < nz; k++)
    for (int64_t j = 0; j < ny; j++) {
      const int64_t c0 = nx * (j + ny * k);
      for (int64_t i = 0; i < nx; i++) {
        const int64_t c = c0 + i;
        const int wc = !wet || wet[c];
        B->st.aC[c] = wc ? aC[c] : 0.0;
        B->st.aW[c] = (i > 0 && wc && (!wet || wet[c - 1])) ? aW[c] : 0.0;
        B->st.aS[c] = (j > 0 && wc && (!wet || wet[c - nx])) ? aS[c] : 0.0;
        B->st.aV[c] = (k > 0 && wc && (!wet || wet[c - nxy])) ? aV[c] : 0.0;
      }
    }
  int ierr = st_check_finite(ctx, func, "aW", B->st.aW, n, nx, ny);
  if (!ierr) ierr = st_check_finite(ctx, func, "aS", B->st.aS, n, nx, ny);
  if (!ierr) ierr = st_check_finite(ctx, func, "aV", B->st.aV, n, nx, ny);
  if (!ierr) ierr = st_check_finite(ctx, func, "aC", B->st.aC, n, nx, ny);
  if (ierr) {
    pk_op_free(B);
    return ierr;
  }
  B->wet = B->st.wet;
  int64_t nnz = 0;
  for (int64_t k = 0; k < nz; k++)
    for (int64_t j = 0; j < ny; j++)
      for (int64_t i = 0; i < nx; i++) nnz += grid_row(B, i, j, k, NULL, NULL);
  B->nnz = nnz;
  *out = B;
  return PKRYLOV_SUCCESS;
}

int pkrylov_operator_create_stencil7(pkrylov_context ctx, int32_t nx, int32_t ny, int32_t nz,
                                     const double *aW, const double *aS, const double *aV,
                                     const double *aC, const int32_t *mask, pkrylov_operator *A) {
  PK_CHECK(ctx != NULL, NULL, PKRYLOV_ERR_NULL_POINTER, "argument 'ctx' is NULL");
  PK_CHECK_PTR(A, ctx);
  PK_CHECK_PTR(aW, ctx);
  PK_CHECK_PTR(aS, ctx);
  PK_CHECK_PTR(aV, ctx);
  PK_CHECK_PTR(aC, ctx);
  struct pkrylov_operator_s *B = NULL;
  PK_CALL(st_build(ctx, __func__, nx, ny, nz, aW, aS, aV, aC, mask, &B));
  return pk_op_register(ctx, B, A);
}

/** First non-finite value of a halo coupling array (m x nz, index a + m*k), reported as the caller's
 *  array name at the cell (i,j,k) it belongs to; 0 when all finite. */
static int halo_check_finite(pkrylov_context ctx, const char *func, const char *name, const double *v,
                             int64_t m, int64_t nz, int along_x, int64_t fixed) {
  int64_t p = pk_first_nonfinite(v, m * nz);
  if (p < 0) return PKRYLOV_SUCCESS;
  const int64_t a = p % m, k = p / m;
  return pk_error(ctx, PKRYLOV_ERR_NOT_FINITE, func,
                  "argument '%s' = %g at the tile-edge face of cell (i,j,k) = (%lld,%lld,%lld) (0-based) "
                  "is not finite",
                  name, v[p], (long long)(along_x ? a : fixed), (long long)(along_x ? fixed : a),
                  (long long)k);
}

/**
 * The stencil copy as for pkrylov_operator_create_stencil7 (in-tile couplings), plus the couplings of the
 * edge cells to the halo: cw = aW at i = 0, ce = aW_east, cs = aS at j = 0, cn = aS_north, each 0 for dry
 * cells and for NULL (wall) arrays.
 */
int pkrylov_operator_create_stencil7_exchange(pkrylov_context ctx, int32_t nx, int32_t ny, int32_t nz,
                                              const double *aW, const double *aS, const double *aV,
                                              const double *aC, const int32_t *mask, const double *aW_east,
                                              const double *aS_north, pkrylov_halo_fn exchange, void *user,
                                              pkrylov_operator *A) {
  PK_CHECK(ctx != NULL, NULL, PKRYLOV_ERR_NULL_POINTER, "argument 'ctx' is NULL");
  PK_CHECK_PTR(A, ctx);
  PK_CHECK_PTR(aW, ctx);
  PK_CHECK_PTR(aS, ctx);
  PK_CHECK_PTR(aV, ctx);
  PK_CHECK_PTR(aC, ctx);
  PK_CHECK_PTR(exchange, ctx);
  PK_CHECK(nx >= 1, ctx, PKRYLOV_ERR_INVALID_SIZE, "argument 'nx' = %d must be >= 1", nx);
  PK_CHECK(ny >= 1, ctx, PKRYLOV_ERR_INVALID_SIZE, "argument 'ny' = %d must be >= 1", ny);
  PK_CHECK(nz >= 1, ctx, PKRYLOV_ERR_INVALID_SIZE, "argument 'nz' = %d must be >= 1", nz);
  PK_CHECK(((int64_t)nx + 2) * ((int64_t)ny + 2) <= (INT64_MAX / 16) / nz, ctx, PKRYLOV_ERR_INVALID_SIZE,
           "arguments 'nx' x 'ny' x 'nz' = %d x %d x %d: too many cells", nx, ny, nz);
  struct pkrylov_operator_s *B = NULL;
  PK_CALL(st_build(ctx, __func__, nx, ny, nz, aW, aS, aV, aC, mask, &B));
  const int64_t NX = nx, NY = ny, NZ = nz, nxy = NX * NY;
  B->nnz = -1;
  B->halo.xh = malloc(sizeof(double) * (size_t)((NX + 2) * (NY + 2) * NZ));
  B->halo.cw = malloc(sizeof(double) * (size_t)(NY * NZ));
  B->halo.ce = malloc(sizeof(double) * (size_t)(NY * NZ));
  B->halo.cs = malloc(sizeof(double) * (size_t)(NX * NZ));
  B->halo.cn = malloc(sizeof(double) * (size_t)(NX * NZ));
  B->user.scratch = malloc(sizeof(double) * (size_t)B->n);
  if (!B->halo.xh || !B->halo.cw || !B->halo.ce || !B->halo.cs || !B->halo.cn || !B->user.scratch) {
    pk_op_free(B);
    return pk_error(ctx, PKRYLOV_ERR_OUT_OF_MEMORY, __func__,
                    "cannot allocate the halo work arrays (%lld x %lld x %lld cells)", (long long)(NX + 2),
                    (long long)(NY + 2), (long long)NZ);
  }
  const uint8_t *wet = B->st.wet;
  for (int64_t k = 0; k < NZ; k++) {
    for (int64_t j = 0; j < NY; j++) { /* west and east edge cells */
      const int64_t cwc = NX * (j + NY * k), cec = cwc + NX - 1, h = j + NY * k;
      B->halo.cw[h] = (!wet || wet[cwc]) ? aW[cwc] : 0.0;
      B->halo.ce[h] = (aW_east && (!wet || wet[cec])) ? aW_east[h] : 0.0;
    }
    for (int64_t i = 0; i < NX; i++) { /* south and north edge cells */
      const int64_t csc = i + nxy * k, cnc = csc + NX * (NY - 1), h = i + NX * k;
      B->halo.cs[h] = (!wet || wet[csc]) ? aS[csc] : 0.0;
      B->halo.cn[h] = (aS_north && (!wet || wet[cnc])) ? aS_north[h] : 0.0;
    }
  }
  int ierr = halo_check_finite(ctx, __func__, "aW", B->halo.cw, NY, NZ, 0, 0);
  if (!ierr) ierr = halo_check_finite(ctx, __func__, "aW_east", B->halo.ce, NY, NZ, 0, NX - 1);
  if (!ierr) ierr = halo_check_finite(ctx, __func__, "aS", B->halo.cs, NX, NZ, 1, 0);
  if (!ierr) ierr = halo_check_finite(ctx, __func__, "aS_north", B->halo.cn, NX, NZ, 1, NY - 1);
  if (ierr) {
    pk_op_free(B);
    return ierr;
  }
  B->halo.exchange = exchange;
  B->halo.data = user;
  return pk_op_register(ctx, B, A);
}

/* ------------------------------------------------------------------------------------------------ */
/* User callbacks                                                                                    */

int pkrylov_operator_create_user(pkrylov_context ctx, int64_t n, pkrylov_apply_fn apply, void *user,
                                 pkrylov_operator *A) {
  PK_CHECK(ctx != NULL, NULL, PKRYLOV_ERR_NULL_POINTER, "argument 'ctx' is NULL");
  PK_CHECK_PTR(A, ctx);
  PK_CHECK_PTR(apply, ctx);
  PK_CHECK(n > 0, ctx, PKRYLOV_ERR_INVALID_SIZE, "argument 'n' = %lld must be > 0", (long long)n);
  PK_CHECK(n <= (int64_t)(SIZE_MAX / sizeof(double)) - 1, ctx, PKRYLOV_ERR_INVALID_SIZE,
           "argument 'n' = %lld is too large", (long long)n);
  struct pkrylov_operator_s *B;
  PK_CALLOC(B, 1, ctx);
  B->ctx = ctx;
  B->type = PKRYLOV_OPERATOR_USER;
  B->n = n;
  B->nnz = -1;
  B->user.apply = apply;
  B->user.data = user;
  B->user.scratch = malloc(sizeof(double) * (size_t)n);
  if (!B->user.scratch) {
    pk_op_free(B);
    return pk_error(ctx, PKRYLOV_ERR_OUT_OF_MEMORY, __func__,
                    "cannot allocate the work vector of n = %lld values", (long long)n);
  }
  return pk_op_register(ctx, B, A);
}

/**
 * Call a user routine y = op(x) of an object of size n. On a nonzero return, or when the object's routine
 * already failed since the last reset (it is not called again, so the first message stays), y = NaN and
 * the sticky flag is set; the first failure is recorded in ctx. what names the object in the message.
 */
static void user_apply(pkrylov_context ctx, pkrylov_apply_fn apply, void *data, int32_t *failed, int64_t n,
                       const double *x, double *y, const char *what) {
  if (!*failed) {
    const int rc = apply(data, n, x, y);
    if (rc == 0) return;
    *failed = 1;
    pk_error(ctx, PKRYLOV_ERR_CALLBACK, "user callback",
             "the apply routine of the user %s (n = %lld) returned %d (nonzero aborts the solve)",
             what, (long long)n, rc);
  }
  for (int64_t i = 0; i < n; i++) y[i] = NAN; /* a caller that does not check the flag sees a NaN */
}

/** y = A x by the routine of user operator A (the failure flag is the one member the loops change). */
static void op_user_apply(const struct pkrylov_operator_s *A, const double *x, double *y) {
  struct pkrylov_operator_s *W = (struct pkrylov_operator_s *)A; /* heap object: the cast is defined */
  user_apply(A->ctx, A->user.apply, A->user.data, &W->user.failed, A->n, x, y, "operator");
}

/** z = M^-1 r by the routine of user preconditioner M (used by pk_pc_apply_all, precond.c). */
void pk_pc_user_apply(const struct pkrylov_precond_s *M, const double *r, double *z) {
  struct pkrylov_precond_s *W = (struct pkrylov_precond_s *)M;
  user_apply(M->ctx, M->user.apply, M->user.data, &W->user.failed, M->n, r, z, "preconditioner");
}

void pk_user_reset(struct pkrylov_operator_s *A, struct pkrylov_precond_s *M) {
  /* written only when set: the flag of an operator without state (never set) is only read, so solves that
     share it in several threads do not race on it */
  if (A && A->user.failed) A->user.failed = 0;
  if (M && M->user.failed) M->user.failed = 0;
}

int pk_user_check(const struct pkrylov_operator_s *A, const struct pkrylov_precond_s *M) {
  if ((A && A->user.failed) || (M && M->user.failed)) return PKRYLOV_ERR_CALLBACK;
  return PKRYLOV_SUCCESS;
}

int pk_op_register(pkrylov_context ctx, struct pkrylov_operator_s *A, pkrylov_operator *out) {
  if (ctx->be->operator_upload) {
    int ierr = ctx->be->operator_upload(A);
    if (ierr) {
      pk_op_free(A);
      return ierr;
    }
  }
  ctx->live_objects++;
  *out = A;
  return PKRYLOV_SUCCESS;
}

/* ------------------------------------------------------------------------------------------------ */
/* Destroy, info, export                                                                             */

int pkrylov_operator_destroy(pkrylov_operator *A) {
  PK_CHECK(A != NULL, NULL, PKRYLOV_ERR_NULL_POINTER, "argument 'A' is NULL");
  if (!*A) return PKRYLOV_SUCCESS;
  pkrylov_operator B = *A;
  PK_CHECK(B->refs == 0, B->ctx, PKRYLOV_ERR_INVALID_STATE,
           "argument 'A' is still used by %lld preconditioner(s)/solver(s): destroy those first",
           (long long)B->refs);
  if (B->ctx) B->ctx->live_objects--;
  pk_op_free(B);
  *A = NULL;
  return PKRYLOV_SUCCESS;
}

int pkrylov_operator_get_info(pkrylov_operator A, int64_t *n, int64_t *nnz, int32_t *type, int32_t *nx,
                              int32_t *ny, int32_t *nz) {
  PK_CHECK(A != NULL, NULL, PKRYLOV_ERR_NULL_POINTER, "argument 'A' is NULL");
  if (n) *n = A->n;
  if (nnz) *nnz = A->nnz;
  if (type) *type = A->type;
  if (nx) *nx = A->nx;
  if (ny) *ny = A->ny;
  if (nz) *nz = A->nz;
  return PKRYLOV_SUCCESS;
}

int pkrylov_operator_get_csr(pkrylov_operator A, int64_t *rowptr, int64_t *colind, double *values) {
  PK_CHECK(A != NULL, NULL, PKRYLOV_ERR_NULL_POINTER, "argument 'A' is NULL");
  PK_CALL(pk_op_check_type(A, __func__));
  PK_CHECK(A->type != PKRYLOV_OPERATOR_USER, A->ctx, PKRYLOV_ERR_UNSUPPORTED,
           "argument 'A' is a user operator (pkrylov_operator_create_user): it has no matrix entries to "
           "export");
  PK_CHECK(A->halo.exchange == NULL, A->ctx, PKRYLOV_ERR_UNSUPPORTED,
           "argument 'A' is a halo-exchange stencil (pkrylov_operator_create_stencil7_exchange): its "
           "couplings across the tile edges reach the caller's halo, so it has no CSR form");
  PK_CHECK(!A->grid || A->nnz >= 0, A->ctx, PKRYLOV_ERR_UNSUPPORTED,
           "argument 'A' is a grid stencil on several ranks: its couplings to other ranks have no local CSR "
           "form");
  PK_CHECK(A->dist == NULL, A->ctx, PKRYLOV_ERR_UNSUPPORTED,
           "argument 'A' is a distributed operator: its couplings to other ranks have no local CSR form "
           "(build the global operator on one rank to export it)");
  PK_CHECK_PTR(rowptr, A->ctx);
  PK_CHECK_PTR(colind, A->ctx);
  PK_CHECK_PTR(values, A->ctx);
  if (A->type == PKRYLOV_OPERATOR_CSR) {
    memcpy(rowptr, A->csr.rowptr, sizeof(int64_t) * (size_t)(A->n + 1));
    memcpy(values, A->csr.values, sizeof(double) * (size_t)A->nnz);
    if (A->csr.colind32)
      for (int64_t p = 0; p < A->nnz; p++) colind[p] = A->csr.colind32[p];
    else
      memcpy(colind, A->csr.colind64, sizeof(int64_t) * (size_t)A->nnz);
    return PKRYLOV_SUCCESS;
  }
  int64_t pos = 0, c = 0;
  rowptr[0] = 0;
  for (int64_t k = 0; k < A->nz; k++)
    for (int64_t j = 0; j < A->ny; j++)
      for (int64_t i = 0; i < A->nx; i++, c++) {
        pos += grid_row(A, i, j, k, colind + pos, values + pos);
        rowptr[c + 1] = pos;
      }
  if (pos != A->nnz)
    return pk_error(A->ctx, PKRYLOV_ERR_INTERNAL, __func__, "exported %lld entries, expected nnz = %lld",
                    (long long)pos, (long long)A->nnz);
  return PKRYLOV_SUCCESS;
}

/* ------------------------------------------------------------------------------------------------ */
/* Apply                                                                                             */

/** CSR rows [r0, r1): y_r = sum_p values[p] x[colind[p]]. */
static void csr_apply_rows(const struct pkrylov_operator_s *A, const double *restrict x, double *restrict y,
                           int64_t r0, int64_t r1) {
  const int64_t *restrict rp = A->csr.rowptr;
  const double *restrict v = A->csr.values;
  if (A->csr.colind32) {
    const int32_t *restrict ci = A->csr.colind32;
    for (int64_t r = r0; r < r1; r++) {
      double s = 0.0;
      for (int64_t p = rp[r]; p < rp[r + 1]; p++) s += v[p] * x[ci[p]];
      y[r] = s;
    }
  } else {
    const int64_t *restrict ci = A->csr.colind64;
    for (int64_t r = r0; r < r1; r++) {
      double s = 0.0;
      for (int64_t p = rp[r]; p < rp[r + 1]; p++) s += v[p] * x[ci[p]];
      y[r] = s;
    }
  }
}

/** One line of the column stencil, i in [ia, ib): y = aC x + aW x_w + aW_e x_e + cs x_s + cn x_n +
 *  cd x_d + cu x_u. The missing neighbours of the grid boundary have zero coefficients; i = 0 and
 *  i = nx - 1 are peeled so that no load leaves the line. */
static inline void st_line(int64_t ia, int64_t ib, int64_t nx, const double *restrict aC,
                           const double *restrict aW, const double *restrict cs, const double *restrict cn,
                           const double *restrict cd, const double *restrict cu, const double *restrict xc,
                           const double *restrict xs, const double *restrict xn, const double *restrict xd,
                           const double *restrict xu, double *restrict yc) {
  int64_t lo = ia;
  if (lo == 0 && ib > 0) {
    double s = aC[0] * xc[0] + cs[0] * xs[0] + cn[0] * xn[0] + cd[0] * xd[0] + cu[0] * xu[0];
    if (nx > 1) s += aW[1] * xc[1];
    yc[0] = s;
    lo = 1;
  }
  const int64_t hi = ib < nx - 1 ? ib : nx - 1;
  for (int64_t i = lo; i < hi; i++)
    yc[i] = aC[i] * xc[i] + aW[i] * xc[i - 1] + aW[i + 1] * xc[i + 1] + cs[i] * xs[i] + cn[i] * xn[i] +
            cd[i] * xd[i] + cu[i] * xu[i];
  if (ib == nx && nx - 1 >= lo) {
    const int64_t i = nx - 1;
    yc[i] = aC[i] * xc[i] + aW[i] * xc[i - 1] + cs[i] * xs[i] + cn[i] * xn[i] + cd[i] * xd[i] +
            cu[i] * xu[i];
  }
}

void pk_st_apply_rows(const pk_stencil *st, int64_t nx, int64_t ny, int64_t nz, const double *x, double *y,
                      int64_t r0, int64_t r1) {
  const int64_t nxy = nx * ny;
  int64_t line = r0 / nx, k = line / ny, j = line - k * ny;
  for (int64_t c0 = line * nx; c0 < r1; c0 += nx) {
    const int64_t ia = r0 > c0 ? r0 - c0 : 0, ib = r1 - c0 < nx ? r1 - c0 : nx;
    const double *xc = x + c0;
    /* a missing neighbour line: point at a zero coefficient line (aS of line j = 0, aV of plane
       k = 0, both zeroed at creation) and at the own x line */
    const double *cs = st->aS + c0, *xs = j > 0 ? xc - nx : xc;
    const double *cn = j < ny - 1 ? st->aS + c0 + nx : st->aS + nxy * k;
    const double *xn = j < ny - 1 ? xc + nx : xc;
    const double *cd = st->aV + c0, *xd = k > 0 ? xc - nxy : xc;
    const double *cu = k < nz - 1 ? st->aV + c0 + nxy : st->aV + nx * j;
    const double *xu = k < nz - 1 ? xc + nxy : xc;
    st_line(ia, ib, nx, st->aC + c0, st->aW + c0, cs, cn, cd, cu, xc, xs, xn, xd, xu, y + c0);
    if (++j == ny) j = 0, k++;
  }
}

/** One line of the thin shell, i in [ia, ib), in flux form (the diagonal is never formed):
 *  y = |T| (d x + b (x - x_d) + c (x - x_u)) + a (ax_w (x - x_w) + ax_e (x - x_e) + ay_s (x - x_s)
 *      + ay_n (x - x_n)),
 *  which equals the matrix rows (diagonal |T|(d+b+c) + asum a) and reads no asum. Boundary faces have
 *  zero weights (b = 0 at k = 0, c = 0 at the top, a missing neighbour line is the own line);
 *  i = 0 and nx - 1 are peeled so that no load leaves the line. */
static inline void ts_line(int64_t ia, int64_t ib, int64_t nx, double ak, double bk, double ck, double dk,
                           const double *restrict ar, const double *restrict ax, const double *restrict ays,
                           const double *restrict ayn, const double *restrict xc, const double *restrict xs,
                           const double *restrict xn, const double *restrict xd, const double *restrict xu,
                           double *restrict yc) {
  int64_t lo = ia;
  if (lo == 0 && ib > 0) {
    const double x0 = xc[0], e = nx > 1 ? ax[1] * (x0 - xc[1]) : 0.0;
    yc[0] = ar[0] * (dk * x0 + bk * (x0 - xd[0]) + ck * (x0 - xu[0])) +
            ak * (e + ays[0] * (x0 - xs[0]) + ayn[0] * (x0 - xn[0]));
    lo = 1;
  }
  const int64_t hi = ib < nx - 1 ? ib : nx - 1;
  for (int64_t i = lo; i < hi; i++) {
    const double xi = xc[i];
    yc[i] = ar[i] * (dk * xi + bk * (xi - xd[i]) + ck * (xi - xu[i])) +
            ak * (ax[i] * (xi - xc[i - 1]) + ax[i + 1] * (xi - xc[i + 1]) + ays[i] * (xi - xs[i]) +
                  ayn[i] * (xi - xn[i]));
  }
  if (ib == nx && nx - 1 >= lo) {
    const int64_t i = nx - 1;
    const double xi = xc[i];
    yc[i] = ar[i] * (dk * xi + bk * (xi - xd[i]) + ck * (xi - xu[i])) +
            ak * (ax[i] * (xi - xc[i - 1]) + ays[i] * (xi - xs[i]) + ayn[i] * (xi - xn[i]));
  }
}

/** Thin-shell rows [r0, r1), matrix-free from the level vectors and the per-column geometry. */
static void ts_apply_rows(const struct pkrylov_operator_s *A, const double *x, double *y, int64_t r0,
                          int64_t r1) {
  const int64_t nx = A->nx, ny = A->ny, nz = A->nz, nxy = nx * ny;
  int64_t line = r0 / nx, k = line / ny, j = line - k * ny;
  for (int64_t c0 = line * nx; c0 < r1; c0 += nx) {
    const int64_t ia = r0 > c0 ? r0 - c0 : 0, ib = r1 - c0 < nx ? r1 - c0 : nx;
    const double ak = A->ts.a[k], bk = A->ts.b[k], ck = A->ts.c[k], dk = A->ts.d[k];
    const double *xc = x + c0;
    /* missing neighbours: zero weight (boundary face, b_0 = 0, c_{nz-1} = 0) times the own line */
    const double *xs = j > 0 ? xc - nx : xc, *xn = j < ny - 1 ? xc + nx : xc;
    const double *xd = k > 0 ? xc - nxy : xc, *xu = k < nz - 1 ? xc + nxy : xc;
    ts_line(ia, ib, nx, ak, bk, ck, dk, A->ts.area + nx * j, A->ts.ax + (nx + 1) * j, A->ts.ay + nx * j,
            A->ts.ay + nx * (j + 1), xc, xs, xn, xd, xu, y + c0);
    if (++j == ny) j = 0, k++;
  }
}

/** The couplings of the rows [r0, r1) of a halo-exchange stencil to the halo of A->halo.xh:
 *  y(0,j,k) += cw x(-1,j,k), y(nx-1,j,k) += ce x(nx,j,k), y(i,0,k) += cs x(i,-1,k),
 *  y(i,ny-1,k) += cn x(i,ny,k). */
static void halo_edge_rows(const struct pkrylov_operator_s *A, double *y, int64_t r0, int64_t r1) {
  const int64_t nx = A->nx, ny = A->ny, hx = nx + 2;
  int64_t line = r0 / nx, k = line / ny, j = line - k * ny;
  for (int64_t c0 = line * nx; c0 < r1; c0 += nx) {
    const int64_t ia = r0 > c0 ? r0 - c0 : 0, ib = r1 - c0 < nx ? r1 - c0 : nx;
    const double *xl = A->halo.xh + 1 + hx * ((j + 1) + (ny + 2) * k); /* x(0,j,k) in xh */
    double *yl = y + c0;
    if (ia == 0) yl[0] += A->halo.cw[j + ny * k] * xl[-1];
    if (ib == nx) yl[nx - 1] += A->halo.ce[j + ny * k] * xl[nx];
    if (j == 0)
      for (int64_t i = ia; i < ib; i++) yl[i] += A->halo.cs[i + nx * k] * xl[i - hx];
    if (j == ny - 1)
      for (int64_t i = ia; i < ib; i++) yl[i] += A->halo.cn[i + nx * k] * xl[i + hx];
    if (++j == ny) j = 0, k++;
  }
}

/**
 * y = A x of a halo-exchange stencil: x into the interior of A->halo.xh (halo zeroed), the caller's
 * exchange fills the halo, then the in-tile stencil plus the edge couplings, OpenMP over fixed row chunks.
 * A failing exchange (or one that failed since the last pk_user_reset(): it is not called again) gives
 * y = NaN, the sticky flag A->user.failed and PKRYLOV_ERR_CALLBACK in the context, as a user operator.
 */
static void halo_apply(const struct pkrylov_operator_s *A, const double *x, double *y) {
  struct pkrylov_operator_s *W = (struct pkrylov_operator_s *)A; /* heap object: the cast is defined */
  const int64_t nx = A->nx, ny = A->ny, nz = A->nz, n = A->n, hx = nx + 2, hxy = hx * (ny + 2);
  const int nt = pk_num_threads(A->ctx);
  (void)nt; /* read by the OpenMP pragmas only */
  if (!A->user.failed) {
    double *xh = A->halo.xh;
#ifdef _OPENMP
#pragma omp parallel for schedule(static) num_threads(nt) if (pk_par(n))
#endif
    for (int64_t k = 0; k < nz; k++) {
      double *pl = xh + hxy * k;
      memset(pl, 0, sizeof(double) * (size_t)hx);                  /* row j = -1 */
      memset(pl + hx * (ny + 1), 0, sizeof(double) * (size_t)hx);  /* row j = ny */
      for (int64_t j = 0; j < ny; j++) {
        double *row = pl + hx * (j + 1);
        row[0] = row[nx + 1] = 0.0;
        memcpy(row + 1, x + nx * (j + ny * k), sizeof(double) * (size_t)nx);
      }
    }
    const int rc = A->halo.exchange(A->halo.data, A->nx, A->ny, A->nz, xh);
    if (rc == 0) {
      const int64_t nchunks = (n + PK_ROW_CHUNK - 1) / PK_ROW_CHUNK;
#ifdef _OPENMP
#pragma omp parallel for schedule(static) num_threads(nt) if (pk_par(n))
#endif
      for (int64_t ch = 0; ch < nchunks; ch++) {
        const int64_t r0 = ch * PK_ROW_CHUNK, r1 = r0 + PK_ROW_CHUNK < n ? r0 + PK_ROW_CHUNK : n;
        pk_st_apply_rows(&A->st, A->nx, A->ny, A->nz, x, y, r0, r1);
        halo_edge_rows(A, y, r0, r1);
      }
      return;
    }
    W->user.failed = 1;
    pk_error(A->ctx, PKRYLOV_ERR_CALLBACK, "user callback",
             "the halo exchange routine of the stencil operator (nx x ny x nz = %d x %d x %d) returned %d "
             "(nonzero aborts the solve)",
             A->nx, A->ny, A->nz, rc);
  }
  for (int64_t i = 0; i < n; i++) y[i] = NAN; /* a caller that does not check the flag sees a NaN */
}

void pk_op_apply_rows(const struct pkrylov_operator_s *A, const double *x, double *y, int64_t r0,
                      int64_t r1) {
  if (r1 <= r0) return;
  if (A->dist) { /* whole vectors only (see pk_impl.h) */
    if (r0 == 0 && r1 == A->n)
      pk_dist_apply(A, x, y);
    else
      for (int64_t r = r0; r < r1; r++) y[r] = NAN;
    return;
  }
  if (A->halo.exchange || A->grid) { /* whole vectors only (see pk_impl.h) */
    if (r0 == 0 && r1 == A->n)
      pk_op_apply_all(A, x, y);
    else
      for (int64_t r = r0; r < r1; r++) y[r] = NAN;
    return;
  }
  switch (A->type) {
  case PKRYLOV_OPERATOR_CSR: csr_apply_rows(A, x, y, r0, r1); break;
  case PKRYLOV_OPERATOR_STENCIL7: pk_st_apply_rows(&A->st, A->nx, A->ny, A->nz, x, y, r0, r1); break;
  case PKRYLOV_OPERATOR_USER: /* whole vectors only (see pk_impl.h) */
    if (r0 == 0 && r1 == A->n)
      op_user_apply(A, x, y);
    else
      for (int64_t r = r0; r < r1; r++) y[r] = NAN;
    break;
  case PKRYLOV_OPERATOR_THINSHELL: ts_apply_rows(A, x, y, r0, r1); break;
  default: /* an unknown type (pk_op_check_type refuses it before any product): NaN, never another form */
    for (int64_t r = r0; r < r1; r++) y[r] = NAN;
    break;
  }
}

int pk_op_check_type(const struct pkrylov_operator_s *A, const char *func) {
  switch (A->type) {
  case PKRYLOV_OPERATOR_CSR:
  case PKRYLOV_OPERATOR_STENCIL7:
  case PKRYLOV_OPERATOR_THINSHELL:
  case PKRYLOV_OPERATOR_USER: return PKRYLOV_SUCCESS;
  default:
    return pk_error(A->ctx, PKRYLOV_ERR_INTERNAL, func,
                    "argument 'A' has the unknown operator type %d (CSR %d to USER %d): a corrupted or "
                    "destroyed handle",
                    (int)A->type, PKRYLOV_OPERATOR_CSR, PKRYLOV_OPERATOR_USER);
  }
}

void pk_op_apply_all(const struct pkrylov_operator_s *A, const double *x, double *y) {
  if (A->type == PKRYLOV_OPERATOR_USER) {
    op_user_apply(A, x, y);
    return;
  }
  if (A->halo.exchange) {
    halo_apply(A, x, y);
    return;
  }
  if (A->dist) {
    pk_dist_apply(A, x, y);
    return;
  }
  if (A->grid) {
    pk_grid_op_apply(A, x, y);
    return;
  }
  const int64_t n = A->n, nchunks = (n + PK_ROW_CHUNK - 1) / PK_ROW_CHUNK;
#ifdef _OPENMP
#pragma omp parallel for schedule(static) num_threads(pk_num_threads(A->ctx)) if (pk_par(n))
#endif
  for (int64_t ch = 0; ch < nchunks; ch++) {
    const int64_t r0 = ch * PK_ROW_CHUNK, r1 = r0 + PK_ROW_CHUNK < n ? r0 + PK_ROW_CHUNK : n;
    pk_op_apply_rows(A, x, y, r0, r1);
  }
}

static int operator_apply(pkrylov_operator A, int32_t mem, const double *x, double *y) {
  pkrylov_context ctx = A->ctx;
  PK_CALL(pk_op_check_type(A, "pkrylov_operator_apply"));
  if (ctx->be->operator_apply) return ctx->be->operator_apply(A, mem, x, y);
  PK_CALL(pk_check_vectors(ctx, "pkrylov_operator_apply", mem, x, "x", y, "y", A->n));
  pk_user_reset(A, NULL);
  pk_op_apply_all(A, x, y);
  return pk_user_check(A, NULL);
}

int pkrylov_operator_apply(pkrylov_operator A, int32_t mem, const double *x, double *y) {
  PK_CHECK(A != NULL, NULL, PKRYLOV_ERR_NULL_POINTER, "argument 'A' is NULL");
  PK_CALL(pk_use_begin(A->ctx, __func__, "A", A, NULL)); /* a stateful operator: one product at a time */
  const int ierr = operator_apply(A, mem, x, y);
  pk_use_end(A->ctx, A, NULL);
  return ierr;
}

/* ------------------------------------------------------------------------------------------------ */
/* Diagonal and column tridiagonal                                                                   */

/** The entries of a user operator are unknown (pkrylov_precond_create refuses it earlier). */
static int op_no_entries(const struct pkrylov_operator_s *A, const char *func) {
  return pk_error(A->ctx, PKRYLOV_ERR_UNSUPPORTED, func,
                  "argument 'A' is a user operator (callback): its matrix entries are unknown; pass a user "
                  "preconditioner (pkrylov_precond_create_user)");
}

int pk_op_get_diagonal(const struct pkrylov_operator_s *A, double *diag) {
  const int64_t n = A->n;
  PK_CALL(pk_op_check_type(A, __func__));
  if (A->type == PKRYLOV_OPERATOR_USER) return op_no_entries(A, __func__);
  if (A->type == PKRYLOV_OPERATOR_CSR) {
    for (int64_t r = 0; r < n; r++) {
      int64_t p = csr_find(A, r, r);
      diag[r] = p < 0 ? 0.0 : A->csr.values[p];
    }
  } else if (A->type == PKRYLOV_OPERATOR_STENCIL7) {
    memcpy(diag, A->st.aC, sizeof(double) * (size_t)n);
  } else {
    const int64_t ncol = (int64_t)A->nx * A->ny;
    for (int64_t k = 0; k < A->nz; k++)
      for (int64_t c = 0; c < ncol; c++) diag[c + ncol * k] = ts_diag(A, c, k);
  }
  return PKRYLOV_SUCCESS;
}

int pk_op_rr_norm(const struct pkrylov_operator_s *A, double *amax, double *mu) {
  const int64_t n = A->n;
  double m = 0.0;
  *mu = 7.0; /* grid operators (and what a user operator is taken to have) */
  PK_CALL(pk_op_check_type(A, __func__));
  if (A->type == PKRYLOV_OPERATOR_USER) {
    *amax = 0.0;
    return PKRYLOV_SUCCESS;
  }
  /* maxima: exact and independent of the order, so of the thread count */
  const int nt = pk_num_threads(A->ctx);
  if (A->type == PKRYLOV_OPERATOR_CSR) {
    int64_t len = 1;
#pragma omp parallel for schedule(static) num_threads(nt) if (pk_par(n)) reduction(max : m, len)
    for (int64_t r = 0; r < n; r++) {
      const int64_t p = csr_find(A, r, r), l = A->csr.rowptr[r + 1] - A->csr.rowptr[r];
      if (p >= 0 && fabs(A->csr.values[p]) > m) m = fabs(A->csr.values[p]);
      if (l > len) len = l;
    }
    *mu = (double)len;
  } else if (A->type == PKRYLOV_OPERATOR_STENCIL7) {
    const uint8_t *wet = A->st.wet;
#pragma omp parallel for schedule(static) num_threads(nt) if (pk_par(n)) reduction(max : m)
    for (int64_t c = 0; c < n; c++)
      if ((!wet || wet[c]) && fabs(A->st.aC[c]) > m) m = fabs(A->st.aC[c]);
  } else {
    const int64_t ncol = (int64_t)A->nx * A->ny;
#pragma omp parallel for schedule(static) num_threads(nt) if (pk_par(n)) reduction(max : m)
    for (int64_t q = 0; q < ncol * A->nz; q++) {
      const double v = fabs(ts_diag(A, q % ncol, q / ncol));
      if (v > m) m = v;
    }
  }
  *amax = m;
  return PKRYLOV_SUCCESS;
}

int pk_op_get_tridiag(const struct pkrylov_operator_s *A, int32_t nz, int32_t layout, double *lo,
                      double *di, double *up) {
  PK_CALL(pk_op_check_type(A, __func__));
  if (A->type == PKRYLOV_OPERATOR_USER) return op_no_entries(A, __func__);
  PK_CHECK(nz >= 1 && A->n % nz == 0, A->ctx, PKRYLOV_ERR_LAYOUT,
           "argument 'levels' = %d must be >= 1 and divide n = %lld", nz, (long long)A->n);
  PK_CHECK(layout == PKRYLOV_LAYOUT_KSLOW || layout == PKRYLOV_LAYOUT_KFAST, A->ctx,
           PKRYLOV_ERR_INVALID_VALUE,
           "argument 'layout' = %d must be PKRYLOV_LAYOUT_KSLOW (%d) or PKRYLOV_LAYOUT_KFAST (%d)", layout,
           PKRYLOV_LAYOUT_KSLOW, PKRYLOV_LAYOUT_KFAST);
  const int64_t ncols = A->n / nz;
  if (A->type != PKRYLOV_OPERATOR_CSR && layout == PKRYLOV_LAYOUT_KSLOW && nz == A->nz) {
    /* grid operators in their own layout: the vertical couplings directly */
    for (int64_t k = 0; k < nz; k++) {
      const int64_t off = ncols * k;
      if (A->type == PKRYLOV_OPERATOR_STENCIL7) {
        /* aV copy is 0 at k = 0 and for couplings touching a dry cell */
        for (int64_t c = 0; c < ncols; c++) {
          lo[off + c] = A->st.aV[off + c];
          di[off + c] = A->st.aC[off + c];
          up[off + c] = k < nz - 1 ? A->st.aV[off + ncols + c] : 0.0;
        }
      } else {
        const double bk = A->ts.b[k], ck = A->ts.c[k];
        for (int64_t c = 0; c < ncols; c++) {
          const double ar = A->ts.area[c];
          lo[off + c] = k > 0 ? -ar * bk : 0.0;
          di[off + c] = ts_diag(A, c, k);
          up[off + c] = k < nz - 1 ? -ar * ck : 0.0;
        }
      }
    }
    return PKRYLOV_SUCCESS;
  }
  /* generic: look the entries up (binary search in CSR rows, row recomputation for grids) */
  const int64_t cs = layout == PKRYLOV_LAYOUT_KSLOW ? 1 : nz, ls = layout == PKRYLOV_LAYOUT_KSLOW ? ncols : 1;
  for (int64_t c = 0; c < ncols; c++)
    for (int64_t k = 0; k < nz; k++) {
      const int64_t cell = c * cs + k * ls;
      lo[cell] = k > 0 ? op_entry(A, cell, cell - ls) : 0.0;
      di[cell] = op_entry(A, cell, cell);
      up[cell] = k < nz - 1 ? op_entry(A, cell, cell + ls) : 0.0;
    }
  return PKRYLOV_SUCCESS;
}

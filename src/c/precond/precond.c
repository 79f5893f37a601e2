/**
 * @file precond.c
 * @brief Preconditioners: none, Jacobi, column (block Jacobi over vertical columns) and user callbacks.
 *
 * The column preconditioner takes the tridiagonal part of A along every vertical column (its diagonal
 * and the couplings to the levels above and below, pk_op_get_tridiag()), factorises it once here with
 * LAPACK, and solves it exactly at every application:
 *  - symmetric path: every column symmetric (to rounding) and, segment by segment, definite of one sign
 *    (MITgcm stores its operator negative definite): s*T = L D L^T by dpttrf, the sign s folded into the
 *    stored reciprocals dinv = s/D. The apply is a multi-column sweep without divisions: in the k-slow
 *    layout the inner loop runs over neighbouring columns and is contiguous (the CPU analogue of the
 *    GPU's one thread per column).
 *  - general path: dgttrf (partial pivoting) per column, applied in place with the arithmetic of
 *    LAPACK dgttrs/dgtts2, so no scratch vector is needed.
 * Dry cells (a tridiagonal row that is entirely zero) become identity rows and split their column.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pk_impl.h"
/* LAPACK, Fortran calling convention (no character arguments are used, so no hidden lengths). */
extern void dpttrf_(const int *n, double *d, double *e, int *info);
extern void dgttrf_(const int *n, double *dl, double *d, double *du, double *du2, int *ipiv, int *info);

/** Relative tolerance of the symmetry test of a column: |lo[k+1] - up[k]| <= tol (|lo[k+1]| + |up[k]|). */
#define PK_PC_SYM_TOL 1e-14

/* ------------------------------------------------------------------------------------------------ */
/* Set-up helpers                                                                                    */

/** Free every array of a preconditioner and the struct itself. */
/** Free the factor arrays of a preconditioner (not the struct). */
static void pc_free_factors(struct pkrylov_precond_s *P) {
  free(P->dinv);
  free(P->lmul);
  free(P->gdl);
  free(P->gd);
  free(P->gdu);
  free(P->gdu2);
  free(P->ipiv);
  P->dinv = P->lmul = P->gdl = P->gd = P->gdu = P->gdu2 = NULL;
  P->ipiv = NULL;
}

static void pc_free(struct pkrylov_precond_s *P) {
  if (!P) return;
  if (P->dev) P->ctx->be->precond_free(P);
  pc_free_factors(P);
  pk_ainv_free(P);
  free(P);
}

/** Cell index of level k of column c. */
static inline int64_t pc_cell(const struct pkrylov_precond_s *P, int64_t c, int64_t k) {
  return c * P->col_stride + k * P->lev_stride;
}

/**
 * Raise PKRYLOV_ERR_SINGULAR for column c, naming (i, j) when the operator has a grid, and the level
 * (0-based) where the factorisation met an exact zero pivot.
 */
static int pc_singular_column(const struct pkrylov_precond_s *P, const char *func, int64_t c, int level) {
  const struct pkrylov_operator_s *A = P->A;
  if (A->nx > 0 && A->ny > 0)
    return pk_error(P->ctx, PKRYLOV_ERR_SINGULAR, func,
                    "argument 'A': the tridiagonal of column %lld (i = %lld, j = %lld) is singular "
                    "(zero pivot at level k = %d)",
                    (long long)c, (long long)(c % A->nx), (long long)(c / A->nx), level);
  return pk_error(P->ctx, PKRYLOV_ERR_SINGULAR, func,
                  "argument 'A': the tridiagonal of column %lld is singular (zero pivot at level k = %d)",
                  (long long)c, level);
}

/**
 * Resolve levels and layout of a COLUMN preconditioner on A into P (nz, ncols, layout, strides); errors
 * are raised for the public function func. Column stencil and thin shell: levels 0 or A->nz, layout AUTO
 * or KSLOW. CSR (and user operators, which have no grid; only caller factors reach here with one):
 * levels > 0 dividing n, layout KSLOW or KFAST.
 */
static int pc_resolve_columns(pkrylov_context ctx, const char *func, const struct pkrylov_operator_s *A,
                              int32_t levels, int32_t layout, struct pkrylov_precond_s *P) {
  const char *kind = A->type == PKRYLOV_OPERATOR_USER ? "a user" : "a CSR";
  if (layout != PKRYLOV_LAYOUT_AUTO && layout != PKRYLOV_LAYOUT_KSLOW && layout != PKRYLOV_LAYOUT_KFAST)
    return pk_error(ctx, PKRYLOV_ERR_INVALID_VALUE, func,
                    "argument 'layout' = %d is not a pkrylov_layout (AUTO %d, KSLOW %d, KFAST %d)", layout,
                    PKRYLOV_LAYOUT_AUTO, PKRYLOV_LAYOUT_KSLOW, PKRYLOV_LAYOUT_KFAST);
  if (levels < 0)
    return pk_error(ctx, PKRYLOV_ERR_INVALID_SIZE, func, "argument 'levels' = %d must be >= 0", levels);
  int32_t nz;
  if (A->type == PKRYLOV_OPERATOR_CSR || A->type == PKRYLOV_OPERATOR_USER) {
    if (A->dist) PK_CALL(pk_dist_csr_check_columns(A, func, levels, layout)); /* whole columns per rank */
    if (levels == 0)
      return pk_error(ctx, PKRYLOV_ERR_LAYOUT, func,
                      "argument 'levels' = 0: %s operator needs 'levels' (the number of vertical "
                      "levels of a column, dividing n = %lld)",
                      kind, (long long)A->n);
    if ((int64_t)levels > A->n || A->n % levels != 0)
      return pk_error(ctx, PKRYLOV_ERR_LAYOUT, func,
                      "argument 'levels' = %d does not divide the operator size n = %lld", levels,
                      (long long)A->n);
    if (layout == PKRYLOV_LAYOUT_AUTO)
      return pk_error(ctx, PKRYLOV_ERR_LAYOUT, func,
                      "argument 'layout' = AUTO: %s operator needs 'layout' (KSLOW %d or KFAST %d)", kind,
                      PKRYLOV_LAYOUT_KSLOW, PKRYLOV_LAYOUT_KFAST);
    nz = levels;
  } else {
    if (levels != 0 && levels != A->nz)
      return pk_error(ctx, PKRYLOV_ERR_LAYOUT, func,
                      "argument 'levels' = %d does not match the operator's nz = %d (pass 0 or %d)", levels,
                      A->nz, A->nz);
    if (layout == PKRYLOV_LAYOUT_KFAST)
      return pk_error(ctx, PKRYLOV_ERR_LAYOUT, func,
                      "argument 'layout' = KFAST: a column-stencil or thin-shell operator stores its levels "
                      "k-slow (pass AUTO or KSLOW)");
    nz = A->nz;
    layout = PKRYLOV_LAYOUT_KSLOW;
  }
  if (nz <= 0 || A->n % nz != 0)
    return pk_error(ctx, PKRYLOV_ERR_INTERNAL, func, "operator with n = %lld has nz = %d", (long long)A->n,
                    nz);
  P->nz = nz;
  P->ncols = A->n / nz;
  P->layout = layout;
  if (layout == PKRYLOV_LAYOUT_KSLOW) {
    P->col_stride = 1;            /* cell(c,k) = c + ncols*k */
    P->lev_stride = P->ncols;
  } else {
    P->col_stride = nz;           /* cell(c,k) = k + nz*c */
    P->lev_stride = 1;
  }
  return PKRYLOV_SUCCESS;
}

/** Jacobi: dinv = 1/diag(A); dry rows (A->wet[i] == 0) get 1; any other zero diagonal is singular. */
static int pc_setup_jacobi(struct pkrylov_precond_s *P) {
  const struct pkrylov_operator_s *A = P->A;
  const int64_t n = P->n;
  PK_CALLOC(P->dinv, n, P->ctx);
  PK_CALL(pk_op_get_diagonal(A, P->dinv));
  for (int64_t i = 0; i < n; i++) {
    if (A->wet && !A->wet[i]) {
      P->dinv[i] = 1.0;
    } else if (P->dinv[i] == 0.0) {
      return pk_error(P->ctx, PKRYLOV_ERR_SINGULAR, "pkrylov_precond_create",
                      "argument 'A' has a zero diagonal entry in row %lld: Jacobi needs a nonzero diagonal",
                      (long long)i);
    } else {
      P->dinv[i] = 1.0 / P->dinv[i];
    }
  }
  return PKRYLOV_SUCCESS;
}

/** Columns per block of the set-up passes (column-contiguous copies of a block stay in L2). */
#define PK_PC_SETUP_BLOCK 64

/** Work space of the set-up passes over blocks of PK_PC_SETUP_BLOCK columns. */
typedef struct {
  double *bl, *bd, *bu; /* tridiagonals of the block, column-contiguous: column j, level k at j*nz + k */
  double *wd, *we;      /* one segment for dpttrf, nz each */
  uint8_t *dry;         /* nz */
} pc_work;

static void pc_work_free(pc_work *w) {
  free(w->bl), free(w->bd), free(w->bu), free(w->wd), free(w->we), free(w->dry);
}

static int pc_work_alloc(struct pkrylov_precond_s *P, pc_work *w) {
  const size_t bn = (size_t)PK_PC_SETUP_BLOCK * (size_t)P->nz;
  PK_CALLOC(w->bl, bn, P->ctx);
  PK_CALLOC(w->bd, bn, P->ctx);
  PK_CALLOC(w->bu, bn, P->ctx);
  PK_CALLOC(w->wd, P->nz, P->ctx);
  PK_CALLOC(w->we, P->nz, P->ctx);
  PK_CALLOC(w->dry, P->nz, P->ctx);
  return PKRYLOV_SUCCESS;
}

/**
 * Copy the tridiagonals of columns [cb, cb + nb) into the column-contiguous block buffers (levels outer,
 * columns inner, so the k-slow source is read contiguously) and decouple the dry cells: a cell whose
 * tridiagonal row is entirely zero becomes an identity row, and the couplings of its neighbours in the
 * column to it are dropped, so the column splits there. Dry cells are found on the values of A, before
 * any decoupling, so the result does not depend on the order.
 */
static void pc_gather_block(const struct pkrylov_precond_s *P, const double *lo, const double *di,
                            const double *up, int64_t cb, int64_t nb, pc_work *w) {
  const int32_t nz = P->nz;
  for (int32_t k = 0; k < nz; k++)
    for (int64_t j = 0; j < nb; j++) {
      const int64_t i = pc_cell(P, cb + j, k);
      w->bl[j * nz + k] = lo[i];
      w->bd[j * nz + k] = di[i];
      w->bu[j * nz + k] = up[i];
    }
  for (int64_t j = 0; j < nb; j++) {
    double *l = w->bl + j * nz, *d = w->bd + j * nz, *u = w->bu + j * nz;
    for (int32_t k = 0; k < nz; k++) w->dry[k] = l[k] == 0.0 && d[k] == 0.0 && u[k] == 0.0;
    for (int32_t k = 0; k < nz; k++) {
      if (!w->dry[k]) continue;
      d[k] = 1.0;
      if (k > 0) u[k - 1] = 0.0;
      if (k + 1 < nz) l[k + 1] = 0.0;
    }
  }
}

/** 1 when the nb gathered columns are symmetric to rounding: |lo[k+1] - up[k]| <= tol (|lo| + |up|). */
static int pc_block_symmetric(const struct pkrylov_precond_s *P, int64_t nb, const pc_work *w) {
  const int32_t nz = P->nz;
  for (int64_t j = 0; j < nb; j++)
    for (int32_t k = 0; k + 1 < nz; k++) {
      const double l = w->bl[j * nz + k + 1], u = w->bu[j * nz + k];
      if (!(fabs(l - u) <= PK_PC_SYM_TOL * (fabs(l) + fabs(u)))) return 0;
    }
  return 1;
}

/**
 * Symmetric factorisation of the nb gathered columns starting at column cb. A column splits into
 * segments wherever its coupling e_k = up_k is zero (dry cells included); each segment T_s is factorised
 * by dpttrf as s T_s = L D L^T with s = +1 or, failing that, s = -1. Stored per cell: lmul = L's
 * subdiagonal (0 at a segment end) and dinv = s / D. Returns 1 on success, 0 when a segment is indefinite
 * (the caller then takes the general path), or a negative error code.
 */
static int pc_factor_symmetric_block(struct pkrylov_precond_s *P, int64_t cb, int64_t nb, pc_work *w) {
  const int32_t nz = P->nz;
  for (int64_t j = 0; j < nb; j++) {
    double *d = w->bd + j * nz, *u = w->bu + j * nz; /* overwritten with dinv and lmul */
    int32_t k0 = 0;
    while (k0 < nz) {
      int32_t k1 = k0; /* segment [k0, k1]: e_k != 0 for k0 <= k < k1 */
      while (k1 + 1 < nz && u[k1] != 0.0) k1++;
      const int m = k1 - k0 + 1;
      double s = 1.0;
      int info = 1;
      for (int attempt = 0; attempt < 2 && info != 0; attempt++) {
        s = attempt == 0 ? 1.0 : -1.0;
        for (int q = 0; q < m; q++) {
          w->wd[q] = s * d[k0 + q];
          if (q + 1 < m) w->we[q] = s * u[k0 + q];
        }
        dpttrf_(&m, w->wd, w->we, &info);
        if (info < 0)
          return pk_error(P->ctx, PKRYLOV_ERR_BACKEND, "pkrylov_precond_create",
                          "LAPACK dpttrf rejected argument %d", -info);
      }
      if (info != 0) return 0;
      for (int q = 0; q < m; q++) {
        d[k0 + q] = s / w->wd[q];                /* T_s^-1 = L^-T (s D^-1) L^-1 */
        u[k0 + q] = q + 1 < m ? w->we[q] : 0.0;  /* L(k+1, k) */
      }
      k0 = k1 + 1;
    }
  }
  for (int32_t k = 0; k < nz; k++) /* scatter to the cell layout */
    for (int64_t j = 0; j < nb; j++) {
      const int64_t i = pc_cell(P, cb + j, k);
      P->dinv[i] = w->bd[j * nz + k];
      P->lmul[i] = w->bu[j * nz + k];
    }
  return 1;
}

/**
 * Symmetric path over all columns: 1 when every column is symmetric and every segment definite
 * (dinv, lmul set), 0 otherwise (nothing kept), or a negative error code.
 */
static int pc_setup_symmetric(struct pkrylov_precond_s *P, const double *lo, const double *di,
                              const double *up, pc_work *w) {
  PK_CALLOC(P->dinv, P->n, P->ctx);
  PK_CALLOC(P->lmul, P->n, P->ctx);
  int rc = 1;
  for (int64_t cb = 0; cb < P->ncols && rc == 1; cb += PK_PC_SETUP_BLOCK) {
    const int64_t nb = P->ncols - cb < PK_PC_SETUP_BLOCK ? P->ncols - cb : PK_PC_SETUP_BLOCK;
    pc_gather_block(P, lo, di, up, cb, nb, w);
    rc = pc_block_symmetric(P, nb, w) ? pc_factor_symmetric_block(P, cb, nb, w) : 0;
  }
  if (rc != 1) {
    free(P->dinv);
    free(P->lmul);
    P->dinv = P->lmul = NULL;
  }
  return rc;
}

/**
 * General path: dgttrf (LU with partial pivoting) of every column's tridiagonal, stored per column
 * contiguously at offset c*nz (gdl, gd, gdu, gdu2, ipiv as LAPACK returns them, ipiv 1-based).
 * An exactly zero pivot is PKRYLOV_ERR_SINGULAR naming the column and the level.
 */
static int pc_setup_general(struct pkrylov_precond_s *P, const double *lo, const double *di,
                            const double *up, pc_work *w) {
  const int32_t nz = P->nz;
  const int64_t n = P->n;
  PK_CALLOC(P->gdl, n, P->ctx);
  PK_CALLOC(P->gd, n, P->ctx);
  PK_CALLOC(P->gdu, n, P->ctx);
  PK_CALLOC(P->gdu2, n, P->ctx);
  PK_CALLOC(P->ipiv, n, P->ctx);
  for (int64_t cb = 0; cb < P->ncols; cb += PK_PC_SETUP_BLOCK) {
    const int64_t nb = P->ncols - cb < PK_PC_SETUP_BLOCK ? P->ncols - cb : PK_PC_SETUP_BLOCK;
    pc_gather_block(P, lo, di, up, cb, nb, w);
    for (int64_t j = 0; j < nb; j++) {
      const int64_t c = cb + j, o = c * nz;
      const double *l = w->bl + j * nz, *d = w->bd + j * nz, *u = w->bu + j * nz;
      for (int32_t k = 0; k < nz; k++) {
        P->gd[o + k] = d[k];
        if (k + 1 < nz) {
          P->gdl[o + k] = l[k + 1]; /* A(k+1, k) */
          P->gdu[o + k] = u[k];     /* A(k, k+1) */
        }
      }
      int m = nz, info = 0;
      dgttrf_(&m, P->gdl + o, P->gd + o, P->gdu + o, P->gdu2 + o, (int *)(P->ipiv + o), &info);
      if (info < 0)
        return pk_error(P->ctx, PKRYLOV_ERR_BACKEND, "pkrylov_precond_create",
                        "LAPACK dgttrf rejected argument %d", -info);
      if (info > 0) return pc_singular_column(P, "pkrylov_precond_create", c, info - 1);
    }
  }
  return PKRYLOV_SUCCESS;
}

/** COLUMN: tridiagonals, dry cells, then the symmetric factorisation or, failing that, the general one. */
static int pc_setup_column(struct pkrylov_precond_s *P) {
  const int64_t n = P->n;
  double *lo = malloc(sizeof(double) * (size_t)n);
  double *di = malloc(sizeof(double) * (size_t)n);
  double *up = malloc(sizeof(double) * (size_t)n);
  pc_work w = {0};
  int ierr = PKRYLOV_SUCCESS, rc;
  if (!lo || !di || !up) {
    ierr = pk_error(P->ctx, PKRYLOV_ERR_OUT_OF_MEMORY, "pkrylov_precond_create",
                    "cannot allocate 3 x %lld doubles for the column tridiagonals", (long long)n);
    goto done;
  }
  ierr = pc_work_alloc(P, &w);
  if (ierr != PKRYLOV_SUCCESS) goto done;
  ierr = pk_op_get_tridiag(P->A, P->nz, P->layout, lo, di, up);
  if (ierr != PKRYLOV_SUCCESS) goto done;
  rc = pc_setup_symmetric(P, lo, di, up, &w);
  if (rc < 0) {
    ierr = rc;
    goto done;
  }
  P->symmetric = rc;
  if (!P->symmetric) ierr = pc_setup_general(P, lo, di, up, &w);
done:
  pc_work_free(&w);
  free(lo);
  free(di);
  free(up);
  return ierr;
}

/* ------------------------------------------------------------------------------------------------ */
/* Application                                                                                       */

/**
 * Backward sweep of the symmetric k-slow path on columns [c0, c1), y held in z:
 * z_{nz-1} = dinv_{nz-1} y_{nz-1}, z_k = dinv_k y_k - l_k z_{k+1}.
 */
static void pc_sym_kslow_backward(const struct pkrylov_precond_s *P, double *restrict z, int64_t c0,
                                  int64_t c1) {
  const int64_t nc = P->ncols, w = c1 - c0;
  const int32_t nz = P->nz;
  const double *restrict lmul = P->lmul;
  const double *restrict dinv = P->dinv;
  {
    const int64_t o = (int64_t)(nz - 1) * nc + c0;
    const double *restrict dk = dinv + o;
    double *restrict zk = z + o;
    for (int64_t c = 0; c < w; c++) zk[c] *= dk[c];
  }
  for (int32_t k = nz - 2; k >= 0; k--) {
    const int64_t o = (int64_t)k * nc + c0, q = o + nc;
    const double *restrict dk = dinv + o;
    const double *restrict lk = lmul + o;
    const double *restrict zq = z + q;
    double *restrict zk = z + o;
    for (int64_t c = 0; c < w; c++) zk[c] = dk[c] * zk[c] - lk[c] * zq[c];
  }
}

/**
 * Symmetric path, k-slow layout, columns [c0, c1) at once (k outer, columns inner, contiguous):
 *   forward   y_0 = r_0,  y_k = r_k - l_{k-1} y_{k-1}            (L y = r)
 *   backward  z_{nz-1} = dinv_{nz-1} y_{nz-1},  z_k = dinv_k y_k - l_k z_{k+1}   (D L^T z = y)
 * y is kept in z.
 */
static void pc_sym_kslow(const struct pkrylov_precond_s *P, const double *restrict r, double *restrict z,
                         int64_t c0, int64_t c1) {
  const int64_t nc = P->ncols, w = c1 - c0;
  const int32_t nz = P->nz;
  const double *restrict lmul = P->lmul;
  {
    const double *restrict rk = r + c0;
    double *restrict zk = z + c0;
    for (int64_t c = 0; c < w; c++) zk[c] = rk[c];
  }
  for (int32_t k = 1; k < nz; k++) {
    const int64_t o = (int64_t)k * nc + c0, p = o - nc;
    const double *restrict rk = r + o;
    const double *restrict lp = lmul + p;
    const double *restrict zp = z + p;
    double *restrict zk = z + o;
    for (int64_t c = 0; c < w; c++) zk[c] = rk[c] - lp[c] * zp[c];
  }
  pc_sym_kslow_backward(P, z, c0, c1);
}

/** Widest column chunk the fused CG sweep handles (its per-column accumulators live on the stack). */
#define PC_FUSED_MAX_COLS 8192

/**
 * The CG "preconditioner loop" in one sweep pair over the columns [c0, c1), symmetric k-slow path:
 *   forward   r_k -= alpha q_k;  y_k = r_k - l_{k-1} y_{k-1};  rr += r_k^2;  rz += dinv_k y_k^2
 *   backward  z_k = dinv_k y_k - l_k z_{k+1}
 * using (r, M^-1 r) = (L^-1 r)^T D^-1 (L^-1 r), so r is not read again after the forward sweep.
 * Partial sums per column, added in column order: out[0] = (r, z), out[1] = (r, r).
 */
static void pc_sym_kslow_cg(const struct pkrylov_precond_s *P, double alpha, double *restrict r,
                            const double *restrict q, double *restrict z, int64_t c0, int64_t c1,
                            double *out) {
  const int64_t nc = P->ncols, w = c1 - c0;
  const int32_t nz = P->nz;
  const double *restrict lmul = P->lmul;
  const double *restrict dinv = P->dinv;
  double arz[PC_FUSED_MAX_COLS], arr[PC_FUSED_MAX_COLS];
  {
    double *restrict rk = r + c0;
    const double *restrict qk = q + c0, *restrict dk = dinv + c0;
    double *restrict zk = z + c0;
    for (int64_t c = 0; c < w; c++) {
      const double rv = rk[c] - alpha * qk[c];
      rk[c] = rv;
      zk[c] = rv;
      arr[c] = rv * rv;
      arz[c] = dk[c] * rv * rv;
    }
  }
  for (int32_t k = 1; k < nz; k++) {
    const int64_t o = (int64_t)k * nc + c0, p = o - nc;
    double *restrict rk = r + o;
    const double *restrict qk = q + o, *restrict dk = dinv + o;
    const double *restrict lp = lmul + p;
    const double *restrict zp = z + p;
    double *restrict zk = z + o;
    for (int64_t c = 0; c < w; c++) {
      const double rv = rk[c] - alpha * qk[c];
      const double y = rv - lp[c] * zp[c];
      rk[c] = rv;
      zk[c] = y;
      arr[c] += rv * rv;
      arz[c] += dk[c] * y * y;
    }
  }
  pc_sym_kslow_backward(P, z, c0, c1);
  double rz = 0.0, rr = 0.0;
  for (int64_t c = 0; c < w; c++) rz += arz[c], rr += arr[c];
  out[0] = rz;
  out[1] = rr;
}

int pk_pc_cg_step_cols(const struct pkrylov_precond_s *M, double alpha, double *r, const double *q, double *z,
                       int64_t c0, int64_t c1, double *out) {
  if (M->type != PKRYLOV_PRECOND_COLUMN || !M->symmetric || M->layout != PKRYLOV_LAYOUT_KSLOW ||
      c1 - c0 > PC_FUSED_MAX_COLS)
    return 0;
  pc_sym_kslow_cg(M, alpha, r, q, z, c0, c1, out);
  return 1;
}

/** Symmetric path, k-fast layout: the same sweeps column by column (levels contiguous). */
static void pc_sym_kfast(const struct pkrylov_precond_s *P, const double *restrict r, double *restrict z,
                         int64_t c0, int64_t c1) {
  const int32_t nz = P->nz;
  for (int64_t c = c0; c < c1; c++) {
    const int64_t o = c * nz;
    const double *restrict rc = r + o;
    const double *restrict lc = P->lmul + o;
    const double *restrict dc = P->dinv + o;
    double *restrict zc = z + o;
    double y = rc[0];
    zc[0] = y;
    for (int32_t k = 1; k < nz; k++) { /* y_k = r_k - l_{k-1} y_{k-1} */
      y = rc[k] - lc[k - 1] * y;
      zc[k] = y;
    }
    double zn = dc[nz - 1] * zc[nz - 1];
    zc[nz - 1] = zn;
    for (int32_t k = nz - 2; k >= 0; k--) { /* z_k = dinv_k y_k - l_k z_{k+1} */
      zn = dc[k] * zc[k] - lc[k] * zn;
      zc[k] = zn;
    }
  }
}

/**
 * General path, column by column in place in z (used for k-fast), with the arithmetic of LAPACK dgtts2
 * (dgttrs, no transpose, one right-hand side): L solve with the row interchanges of ipiv, then the
 * upper triangular U with its two superdiagonals du and du2.
 */
static void pc_general(const struct pkrylov_precond_s *P, const double *restrict r, double *restrict z,
                       int64_t c0, int64_t c1) {
  const int32_t nz = P->nz;
  const int64_t ls = P->lev_stride;
  for (int64_t c = c0; c < c1; c++) {
    const int64_t o = c * nz;
    const double *dl = P->gdl + o, *d = P->gd + o, *du = P->gdu + o, *du2 = P->gdu2 + o;
    const int32_t *ip = P->ipiv + o;
    double *b = z + c * P->col_stride;
    const double *rb = r + c * P->col_stride;
    for (int32_t k = 0; k < nz; k++) b[k * ls] = rb[k * ls];
    for (int32_t i = 0; i + 1 < nz; i++) { /* L: ipiv(i) = i (no interchange) or i + 1 (1-based) */
      const double bi = b[i * ls], bi1 = b[(i + 1) * ls];
      if (ip[i] == i + 1) {
        b[(i + 1) * ls] = bi1 - dl[i] * bi;
      } else {
        b[i * ls] = bi1;
        b[(i + 1) * ls] = bi - dl[i] * bi1;
      }
    }
    const int32_t m = nz - 1; /* U x = y, backward */
    b[m * ls] = b[m * ls] / d[m];
    if (nz > 1) b[(m - 1) * ls] = (b[(m - 1) * ls] - du[m - 1] * b[m * ls]) / d[m - 1];
    for (int32_t i = nz - 3; i >= 0; i--)
      b[i * ls] = (b[i * ls] - du[i] * b[(i + 1) * ls] - du2[i] * b[(i + 2) * ls]) / d[i];
  }
}

/**
 * General path, k-slow layout, columns [c0, c1) at once (levels outer, columns inner and contiguous in
 * r and z; the factors are read with stride nz and stay in cache across 8 levels). Same arithmetic,
 * in the same order, as pc_general() and LAPACK dgtts2, so the results are bitwise equal.
 */
static void pc_general_kslow(const struct pkrylov_precond_s *P, const double *restrict r,
                             double *restrict z, int64_t c0, int64_t c1) {
  const int64_t nc = P->ncols, w = c1 - c0;
  const int32_t nz = P->nz, m = nz - 1;
  const double *restrict dl = P->gdl + c0 * nz;
  const double *restrict d = P->gd + c0 * nz;
  const double *restrict du = P->gdu + c0 * nz;
  const double *restrict du2 = P->gdu2 + c0 * nz;
  const int32_t *restrict ip = P->ipiv + c0 * nz;
  for (int32_t k = 0; k < nz; k++) memcpy(z + k * nc + c0, r + k * nc + c0, sizeof(double) * (size_t)w);
  for (int32_t i = 0; i < m; i++) { /* L with the interchanges of ipiv (1-based: i + 1 = none) */
    double *restrict zi = z + i * nc + c0;
    double *restrict zi1 = zi + nc;
    for (int64_t c = 0; c < w; c++) {
      const int64_t o = c * nz + i;
      const double bi = zi[c], bi1 = zi1[c], l = dl[o];
      const int keep = ip[o] == i + 1;
      zi[c] = keep ? bi : bi1;
      zi1[c] = keep ? bi1 - l * bi : bi - l * bi1;
    }
  }
  { /* U x = y, backward: x_m = y_m / d_m, x_{m-1} = (y_{m-1} - du_{m-1} x_m) / d_{m-1} */
    double *restrict zm = z + m * nc + c0;
    for (int64_t c = 0; c < w; c++) zm[c] = zm[c] / d[c * nz + m];
    if (m > 0) {
      double *restrict zp = zm - nc;
      for (int64_t c = 0; c < w; c++) {
        const int64_t o = c * nz + m - 1;
        zp[c] = (zp[c] - du[o] * zm[c]) / d[o];
      }
    }
  }
  for (int32_t i = nz - 3; i >= 0; i--) { /* x_i = (y_i - du_i x_{i+1} - du2_i x_{i+2}) / d_i */
    double *restrict zi = z + i * nc + c0;
    const double *restrict zi1 = zi + nc;
    const double *restrict zi2 = zi1 + nc;
    for (int64_t c = 0; c < w; c++) {
      const int64_t o = c * nz + i;
      zi[c] = (zi[c] - du[o] * zi1[c] - du2[o] * zi2[c]) / d[o];
    }
  }
}

void pk_pc_apply_cols(const struct pkrylov_precond_s *M, const double *r, double *z, int64_t c0,
                      int64_t c1) {
  if (c1 <= c0) return;
  switch (M->type) {
  case PKRYLOV_PRECOND_USER: /* whole vectors only (see pk_impl.h) */
  case PKRYLOV_PRECOND_AINV:
    if (c0 == 0 && c1 == M->n)
      pk_pc_apply_all(M, r, z);
    else
      for (int64_t i = c0; i < c1; i++) z[i] = NAN;
    return;
  case PKRYLOV_PRECOND_NONE:
    memcpy(z + c0, r + c0, sizeof(double) * (size_t)(c1 - c0));
    return;
  case PKRYLOV_PRECOND_JACOBI: {
    const double *restrict dv = M->dinv;
    const double *restrict rr = r;
    double *restrict zz = z;
    for (int64_t i = c0; i < c1; i++) zz[i] = dv[i] * rr[i]; /* z = D^-1 r */
    return;
  }
  case PKRYLOV_PRECOND_COLUMN:
    if (!M->symmetric && M->layout == PKRYLOV_LAYOUT_KSLOW)
      pc_general_kslow(M, r, z, c0, c1);
    else if (!M->symmetric)
      pc_general(M, r, z, c0, c1);
    else if (M->layout == PKRYLOV_LAYOUT_KSLOW)
      pc_sym_kslow(M, r, z, c0, c1);
    else
      pc_sym_kfast(M, r, z, c0, c1);
    return;
  default: /* an unknown type (pk_pc_check_type refuses it before any product): NaN, never another kind */
    for (int64_t c = c0; c < c1; c++)
      for (int64_t k = 0; k < M->nz; k++) {
        const int64_t cell = c * M->col_stride + k * M->lev_stride;
        if (cell >= 0 && cell < M->n) z[cell] = NAN;
      }
    return;
  }
}

int pk_pc_check_type(const struct pkrylov_precond_s *M, const char *func) {
  switch (M->type) {
  case PKRYLOV_PRECOND_NONE:
  case PKRYLOV_PRECOND_JACOBI:
  case PKRYLOV_PRECOND_COLUMN:
  case PKRYLOV_PRECOND_USER:
  case PKRYLOV_PRECOND_AINV: return PKRYLOV_SUCCESS;
  default:
    return pk_error(M->ctx, PKRYLOV_ERR_INTERNAL, func,
                    "argument 'M' has the unknown preconditioner type %d (NONE %d to AINV %d): a corrupted or "
                    "destroyed handle",
                    (int)M->type, PKRYLOV_PRECOND_NONE, PKRYLOV_PRECOND_AINV);
  }
}

int64_t pk_pc_chunk_cols(const struct pkrylov_precond_s *M) {
  if (M->type != PKRYLOV_PRECOND_COLUMN) return PK_ROW_CHUNK;
  const int64_t nz = M->nz;
  if (M->layout == PKRYLOV_LAYOUT_KFAST) { /* contiguous columns: about 8192 cells per chunk */
    const int64_t ch = 8192 / nz;
    return ch > 1 ? ch : 1;
  }
  /*
   * k-slow: a chunk reads one run of `chunk` contiguous values per level and array. Runs shorter than a
   * 4 KiB page starve the hardware prefetcher and the TLB: measured on 256x256x128 (one core), 64
   * columns took 1.5x the time of 512, 16 columns 2.5x. So about 64 Ki cells per chunk (512 KiB per
   * vector, so the second sweep finds most of z in L2), 256 to 8192 columns, a multiple of 64; but at
   * least 8 chunks when there are 8 x 64 columns or more, so that small grids still spread over threads.
   */
  int64_t ch = 65536 / nz;
  if (ch < 256) ch = 256;
  if (ch > 8192) ch = 8192;
  int64_t eighth = (M->ncols + 7) / 8;
  eighth = (eighth + 63) / 64 * 64;
  if (ch > eighth) ch = eighth;
  if (ch < 64) ch = 64;
  return ch / 64 * 64;
}

void pk_pc_apply_all(const struct pkrylov_precond_s *M, const double *r, double *z) {
  if (M->type == PKRYLOV_PRECOND_USER) {
    pk_pc_user_apply(M, r, z);
    return;
  }
  if (M->type == PKRYLOV_PRECOND_AINV) {
    pk_ainv_apply(M, r, z);
    return;
  }
  const int64_t chunk = pk_pc_chunk_cols(M);
  const int64_t nchunks = (M->ncols + chunk - 1) / chunk;
#pragma omp parallel for schedule(static) num_threads(pk_num_threads(M->ctx)) if (pk_par(M->n))
  for (int64_t ic = 0; ic < nchunks; ic++) {
    const int64_t c0 = ic * chunk, c1 = c0 + chunk < M->ncols ? c0 + chunk : M->ncols;
    pk_pc_apply_cols(M, r, z, c0, c1);
  }
}

/* ------------------------------------------------------------------------------------------------ */
/* Public API                                                                                        */

int pkrylov_precond_create(pkrylov_context ctx, pkrylov_operator A, int32_t type, int32_t levels,
                           int32_t layout, pkrylov_precond *M) {
  PK_CHECK(ctx != NULL, NULL, PKRYLOV_ERR_NULL_POINTER, "argument 'ctx' is NULL");
  PK_CHECK_PTR(A, ctx);
  PK_CHECK_PTR(M, ctx);
  PK_CHECK(A->ctx == ctx, ctx, PKRYLOV_ERR_INCOMPATIBLE,
           "argument 'A' was created from another context than argument 'ctx'");
  PK_CALL(pk_op_check_type(A, __func__)); /* the set-up reads A's entries by its type */
  PK_CHECK(type == PKRYLOV_PRECOND_NONE || type == PKRYLOV_PRECOND_JACOBI || type == PKRYLOV_PRECOND_COLUMN,
           ctx, PKRYLOV_ERR_INVALID_VALUE,
           "argument 'type' = %d is not a pkrylov_precond_type (NONE %d, JACOBI %d, COLUMN %d; USER "
           "preconditioners come from pkrylov_precond_create_user, AINV from pkrylov_precond_create_ainv)", type,
           PKRYLOV_PRECOND_NONE, PKRYLOV_PRECOND_JACOBI, PKRYLOV_PRECOND_COLUMN);
  PK_CHECK(A->type != PKRYLOV_OPERATOR_USER || type == PKRYLOV_PRECOND_NONE, ctx, PKRYLOV_ERR_UNSUPPORTED,
           "argument 'type' = %s needs the matrix entries of A, but argument 'A' is a user operator "
           "(callback) whose entries are unknown: pass a user preconditioner (pkrylov_precond_create_user) "
           "or none", type == PKRYLOV_PRECOND_JACOBI ? "JACOBI" : "COLUMN");

  struct pkrylov_precond_s *P;
  PK_CALLOC(P, 1, ctx);
  P->ctx = ctx;
  P->A = A;
  P->type = type;
  P->n = A->n;
  int ierr;
  if (type == PKRYLOV_PRECOND_COLUMN) {
    ierr = pc_resolve_columns(ctx, "pkrylov_precond_create", A, levels, layout, P);
    if (ierr == PKRYLOV_SUCCESS) ierr = pc_setup_column(P);
  } else {
    P->nz = 1;
    P->ncols = A->n;
    P->layout = PKRYLOV_LAYOUT_KSLOW;
    P->col_stride = 1;
    P->lev_stride = A->n;
    ierr = type == PKRYLOV_PRECOND_JACOBI ? pc_setup_jacobi(P) : PKRYLOV_SUCCESS;
  }
  if (ierr == PKRYLOV_SUCCESS && ctx->be->precond_upload) ierr = ctx->be->precond_upload(P);
  if (ierr != PKRYLOV_SUCCESS) {
    pc_free(P);
    return ierr;
  }
  A->refs++;
  ctx->live_objects++;
  *M = P;
  return PKRYLOV_SUCCESS;
}

/**
 * Check one of the caller's factor arrays of pkrylov_precond_create_column_factors() (P resolved): every
 * value finite and, when nonzero is set (zmc), nonzero. The message names the array and the cell, with its
 * column and level (and (i, j) when the operator has a grid).
 */
static int pc_check_factors(const struct pkrylov_precond_s *P, const double *v, const char *name,
                            int nonzero) {
  const char *func = "pkrylov_precond_create_column_factors";
  const struct pkrylov_operator_s *A = P->A;
  for (int64_t i = 0; i < P->n; i++) {
    const int bad_nf = !isfinite(v[i]), bad_zero = nonzero && v[i] == 0.0;
    if (!bad_nf && !bad_zero) continue;
    const int64_t c = P->layout == PKRYLOV_LAYOUT_KSLOW ? i % P->ncols : i / P->nz;
    const int64_t k = P->layout == PKRYLOV_LAYOUT_KSLOW ? i / P->ncols : i % P->nz;
    char where[160];
    if (A->nx > 0 && A->ny > 0)
      snprintf(where, sizeof where, "column %lld (i = %lld, j = %lld), level k = %lld", (long long)c,
               (long long)(c % A->nx), (long long)(c / A->nx), (long long)k);
    else
      snprintf(where, sizeof where, "column %lld, level k = %lld", (long long)c, (long long)k);
    if (bad_nf)
      return pk_error(P->ctx, PKRYLOV_ERR_NOT_FINITE, func,
                      "argument '%s': %s[%lld] = %g (cell %lld: %s) is not finite", name, name, (long long)i,
                      v[i], (long long)i, where);
    return pk_error(P->ctx, PKRYLOV_ERR_SINGULAR, func,
                    "argument '%s': %s[%lld] = 0 (cell %lld: %s): the factor 1/den of a pivot must be "
                    "nonzero (a dry cell takes zmc = 1, zmu = 0)",
                    name, name, (long long)i, (long long)i, where);
  }
  return PKRYLOV_SUCCESS;
}

/*
 * Why the caller's Thomas factors are the symmetric path's dinv and lmul. Column tridiagonal T with
 * diagonal a_k and coupling b_k between k and k+1 (T symmetric). MITgcm (ini_cg3d):
 *   den_0 = a_0, den_k = a_k - b_{k-1} zmu_{k-1},  zmc_k = 1/den_k,  zmu_k = b_k zmc_k,
 * applied as  y_k = (r_k - b_{k-1} y_{k-1}) zmc_k,  z_k = y_k - zmu_k z_{k+1}.
 * LDL^T of T: d_0 = a_0, l_k = b_k / d_k, d_{k+1} = a_{k+1} - l_k b_k, so d_k = den_k and l_k = zmu_k. The
 * library applies  y'_k = r_k - l_{k-1} y'_{k-1}  (L y' = r),  z_k = dinv_k y'_k - l_k z_{k+1}. With
 * y'_k = d_k y_k the forward sweep reads d_k y_k = r_k - (b_{k-1}/d_{k-1}) d_{k-1} y_{k-1}, which is
 * MITgcm's forward sweep, and dinv_k y'_k = y_k makes the backward sweeps equal: dinv = zmc, lmul = zmu.
 * For a negative definite T (MITgcm's sign), dpttrf factors -T = L (-D) L^T with the same L and the
 * library stores dinv = -1/(-d_k) = 1/d_k: again zmc. So the caller's factors need no conversion.
 */
int pkrylov_precond_create_column_factors(pkrylov_context ctx, pkrylov_operator A, int32_t levels,
                                          int32_t layout, const double *zmc, const double *zmu,
                                          pkrylov_precond *M) {
  PK_CHECK(ctx != NULL, NULL, PKRYLOV_ERR_NULL_POINTER, "argument 'ctx' is NULL");
  PK_CHECK_PTR(A, ctx);
  PK_CHECK_PTR(zmc, ctx);
  PK_CHECK_PTR(zmu, ctx);
  PK_CHECK_PTR(M, ctx);
  PK_CHECK(A->ctx == ctx, ctx, PKRYLOV_ERR_INCOMPATIBLE,
           "argument 'A' was created from another context than argument 'ctx'");

  struct pkrylov_precond_s *P;
  PK_CALLOC(P, 1, ctx);
  P->ctx = ctx;
  P->A = A;
  P->type = PKRYLOV_PRECOND_COLUMN;
  P->n = A->n;
  P->symmetric = 1;
  P->from_caller = 1;
  int ierr = pc_resolve_columns(ctx, "pkrylov_precond_create_column_factors", A, levels, layout, P);
  if (ierr == PKRYLOV_SUCCESS) ierr = pc_check_factors(P, zmc, "zmc", 1);
  if (ierr == PKRYLOV_SUCCESS) ierr = pc_check_factors(P, zmu, "zmu", 0);
  if (ierr == PKRYLOV_SUCCESS) {
    P->dinv = malloc(sizeof(double) * (size_t)P->n);
    P->lmul = malloc(sizeof(double) * (size_t)P->n);
    if (!P->dinv || !P->lmul)
      ierr = pk_error(ctx, PKRYLOV_ERR_OUT_OF_MEMORY, "pkrylov_precond_create_column_factors",
                      "cannot allocate 2 x %lld doubles for the factors", (long long)P->n);
  }
  if (ierr == PKRYLOV_SUCCESS) {
    memcpy(P->dinv, zmc, sizeof(double) * (size_t)P->n); /* dinv = zmc, lmul = zmu (see above) */
    memcpy(P->lmul, zmu, sizeof(double) * (size_t)P->n);
    for (int64_t c = 0; c < P->ncols; c++) P->lmul[pc_cell(P, c, P->nz - 1)] = 0.0; /* no level below */
  }
  if (ierr == PKRYLOV_SUCCESS && ctx->be->precond_upload) ierr = ctx->be->precond_upload(P);
  if (ierr != PKRYLOV_SUCCESS) {
    pc_free(P);
    return ierr;
  }
  A->refs++;
  ctx->live_objects++;
  *M = P;
  return PKRYLOV_SUCCESS;
}

int pk_pc_refactor(struct pkrylov_precond_s *M, const char *func) {
  if (M->type != PKRYLOV_PRECOND_JACOBI && M->type != PKRYLOV_PRECOND_COLUMN)
    return pk_error(M->ctx, PKRYLOV_ERR_INTERNAL, func, "preconditioner type %d cannot be refactored", M->type);
  /* the settings of M, new factors: M is unchanged on an error */
  struct pkrylov_precond_s T = *M;
  T.dinv = T.lmul = T.gdl = T.gd = T.gdu = T.gdu2 = NULL;
  T.ipiv = NULL;
  T.dev = NULL;
  int e = M->type == PKRYLOV_PRECOND_JACOBI ? pc_setup_jacobi(&T) : pc_setup_column(&T);
  if (!e && M->dev && T.symmetric != M->symmetric) /* the device arrays keep their kind (graphs hold them) */
    e = pk_error(M->ctx, PKRYLOV_ERR_UNSUPPORTED, func,
                 "the new coefficients turn the column factorisation %s: on a CUDA context the column "
                 "preconditioner keeps its kind; create it again",
                 T.symmetric ? "symmetric" : "nonsymmetric");
  if (M->A && M->A->grid) e = pk_mpi_agree(M->ctx, e); /* grid stencils: collective */
  if (e) {
    pc_free_factors(&T);
    return e;
  }
  pc_free_factors(M);
  M->dinv = T.dinv, M->lmul = T.lmul, M->gdl = T.gdl, M->gd = T.gd, M->gdu = T.gdu, M->gdu2 = T.gdu2;
  M->ipiv = T.ipiv;
  M->symmetric = T.symmetric;
  if (M->dev) return M->ctx->be->precond_refresh(M, func); /* into the device arrays the solvers' graphs hold */
  return PKRYLOV_SUCCESS;
}

static int precond_apply(pkrylov_precond M, int32_t mem, const double *r, double *z) {
  pkrylov_context ctx = M->ctx;
  PK_CALL(pk_pc_check_type(M, "pkrylov_precond_apply"));
  if (ctx->be->precond_apply) return ctx->be->precond_apply(M, mem, r, z);
  PK_CALL(pk_check_vectors(ctx, "pkrylov_precond_apply", mem, r, "r", z, "z", M->n));
  pk_user_reset(NULL, M);
  pk_pc_apply_all(M, r, z);
  return pk_user_check(NULL, M);
}

int pkrylov_precond_apply(pkrylov_precond M, int32_t mem, const double *r, double *z) {
  PK_CHECK(M != NULL, NULL, PKRYLOV_ERR_NULL_POINTER, "argument 'M' is NULL");
  PK_CALL(pk_use_begin(M->ctx, __func__, "M", NULL, M)); /* a user preconditioner: one at a time */
  const int ierr = precond_apply(M, mem, r, z);
  pk_use_end(M->ctx, NULL, M);
  return ierr;
}

int pkrylov_precond_create_user(pkrylov_context ctx, int64_t n, pkrylov_apply_fn apply, void *user,
                                pkrylov_precond *M) {
  PK_CHECK(ctx != NULL, NULL, PKRYLOV_ERR_NULL_POINTER, "argument 'ctx' is NULL");
  PK_CHECK_PTR(M, ctx);
  PK_CHECK_PTR(apply, ctx);
  PK_CHECK(n > 0, ctx, PKRYLOV_ERR_INVALID_SIZE, "argument 'n' = %lld must be > 0", (long long)n);
  struct pkrylov_precond_s *P;
  PK_CALLOC(P, 1, ctx);
  P->ctx = ctx;
  P->A = NULL;
  P->type = PKRYLOV_PRECOND_USER;
  P->n = n;
  P->nz = 1; /* one level per "column", as NONE and JACOBI */
  P->ncols = n;
  P->layout = PKRYLOV_LAYOUT_KSLOW;
  P->col_stride = 1;
  P->lev_stride = n;
  P->user.apply = apply;
  P->user.data = user;
  ctx->live_objects++;
  *M = P;
  return PKRYLOV_SUCCESS;
}

int pkrylov_precond_get_info(pkrylov_precond M, int32_t *type, int32_t *levels, int32_t *layout) {
  PK_CHECK(M != NULL, NULL, PKRYLOV_ERR_NULL_POINTER, "argument 'M' is NULL");
  if (type) *type = M->type;
  if (levels) *levels = M->nz;
  if (layout) *layout = M->layout;
  return PKRYLOV_SUCCESS;
}

int pkrylov_precond_destroy(pkrylov_precond *M) {
  PK_CHECK(M != NULL, NULL, PKRYLOV_ERR_NULL_POINTER, "argument 'M' is NULL");
  if (!*M) return PKRYLOV_SUCCESS;
  struct pkrylov_precond_s *P = *M;
  PK_CHECK(P->refs == 0, P->ctx, PKRYLOV_ERR_INVALID_STATE,
           "argument 'M' is still used by %lld solver(s): destroy those first", (long long)P->refs);
  if (P->A) P->A->refs--; /* a user preconditioner has no operator */
  P->ctx->live_objects--;
  pc_free(P);
  *M = NULL;
  return PKRYLOV_SUCCESS;
}

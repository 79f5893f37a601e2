/**
 * @file t200-precond.c
 * @brief Preconditioners: none, Jacobi and column (tridiagonal per vertical column).
 *
 * References are independent of the library: plain loops over the CSR arrays built here, dense LAPACK
 * solves (dgesv) of the column blocks extracted here, and LAPACK dpttrf/dpttrs and dgttrf/dgttrs called
 * here on the same tridiagonals. White box: pk_impl.h is included only to check which factorisation path
 * (symmetric dpttrf or general dgttrf) the preconditioner took.
 */
#include <string.h>

#include "pk_test.h"

#include "pk_impl.h"

/* LAPACK, Fortran calling convention */
extern void dgesv_(const int *n, const int *nrhs, double *a, const int *lda, int *ipiv, double *b,
                   const int *ldb, int *info);
extern void dpttrf_(const int *n, double *d, double *e, int *info);
extern void dpttrs_(const int *n, const int *nrhs, const double *d, const double *e, double *b,
                    const int *ldb, int *info);
extern void dgttrf_(const int *n, double *dl, double *d, double *du, double *du2, int *ipiv, int *info);
extern void dgttrs_(const char *trans, const int *n, const int *nrhs, const double *dl, const double *d,
                    const double *du, const double *du2, const int *ipiv, double *b, const int *ldb,
                    int *info, size_t trans_len);

/* ---- helpers ----------------------------------------------------------------------------------- */

/** The context's last error message. */
static const char *last_msg(pkrylov_context ctx) {
  const char *m = "";
  pkrylov_context_get_last_error(ctx, NULL, &m);
  return m ? m : "";
}

/** The call must fail with `code` and a message containing `name`. */
#define EXPECT_ERR(ctx, call, code, name)                                                          \
  do {                                                                                             \
    PK_EXPECT_CODE(ctx, call, code);                                                               \
    PK_EXPECT(strstr(last_msg(ctx), (name)) != NULL, "message '%s' does not name %s",              \
              last_msg(ctx), (name));                                                              \
  } while (0)

/**
 * A column problem in logical form: column c, level k at L = c*nz + k; lo[L] couples (c,k) to (c,k-1),
 * up[L] to (c,k+1), di[L] is the diagonal; hx[L] couples (c,k) and (c+1,k) symmetrically (horizontal
 * entries, which the column preconditioner must ignore).
 */
typedef struct {
  int ncols, nz;
  double *lo, *di, *up, *hx;
} colprob;

/** CSR matrix with 32-bit indices. */
typedef struct {
  int32_t n;
  int32_t *rp, *ci;
  double *v;
} csr32;

/** Cell index of (c, k) in a layout. */
static int64_t cell_of(int32_t layout, int ncols, int nz, int64_t c, int64_t k) {
  return layout == PKRYLOV_LAYOUT_KSLOW ? c + (int64_t)ncols * k : k + (int64_t)nz * c;
}

/** (c, k) of a cell index. */
static void decode(int32_t layout, int ncols, int nz, int64_t cell, int64_t *c, int64_t *k) {
  if (layout == PKRYLOV_LAYOUT_KSLOW) {
    *c = cell % ncols;
    *k = cell / ncols;
  } else {
    *c = cell / nz;
    *k = cell % nz;
  }
}

enum { GEN_SPD, GEN_NONSYM };

/** Random problem: SPD (diagonally dominant symmetric columns) or nonsymmetric columns. */
static int colprob_make(colprob *p, int ncols, int nz, int kind, uint64_t seed) {
  size_t n = (size_t)ncols * (size_t)nz;
  p->ncols = ncols;
  p->nz = nz;
  p->lo = calloc(n, sizeof(double));
  p->di = calloc(n, sizeof(double));
  p->up = calloc(n, sizeof(double));
  p->hx = calloc(n, sizeof(double));
  if (!p->lo || !p->di || !p->up || !p->hx) return 1;
  uint64_t s = seed;
  for (int c = 0; c < ncols; c++)
    for (int k = 0; k < nz; k++) {
      size_t L = (size_t)c * nz + k;
      if (k + 1 < nz) {
        double u = pk_test_rand(&s);
        u = (u < 0 ? -1.0 : 1.0) * (0.2 + 4.0 * fabs(u));
        p->up[L] = u;
        p->lo[L + 1] = kind == GEN_SPD ? u : 3.0 * pk_test_rand(&s);
      }
      if (c + 1 < ncols) p->hx[L] = 0.5 * pk_test_rand(&s);
    }
  for (size_t L = 0; L < n; L++) {
    if (kind == GEN_SPD)
      p->di[L] = fabs(p->lo[L]) + fabs(p->up[L]) + 0.1 + fabs(pk_test_rand(&s));
    else
      p->di[L] = 2.0 * pk_test_rand(&s); /* small diagonals: dgttrf pivots */
  }
  return 0;
}

static void colprob_free(colprob *p) {
  free(p->lo), free(p->di), free(p->up), free(p->hx);
}

static void colprob_negate(colprob *p) {
  size_t n = (size_t)p->ncols * (size_t)p->nz;
  for (size_t L = 0; L < n; L++) {
    p->lo[L] = -p->lo[L];
    p->di[L] = -p->di[L];
    p->up[L] = -p->up[L];
    p->hx[L] = -p->hx[L];
  }
}

static void csr_free(csr32 *m) {
  free(m->rp), free(m->ci), free(m->v);
}

/** The CSR matrix of a column problem in a layout (rows in cell order, nonzero entries only). */
static int csr_build(const colprob *p, int32_t layout, csr32 *m) {
  const int ncols = p->ncols, nz = p->nz;
  const int32_t n = ncols * nz;
  m->n = n;
  m->rp = malloc(sizeof(int32_t) * (size_t)(n + 1));
  m->ci = malloc(sizeof(int32_t) * (size_t)n * 5);
  m->v = malloc(sizeof(double) * (size_t)n * 5);
  if (!m->rp || !m->ci || !m->v) return 1;
  int32_t nnz = 0;
  m->rp[0] = 0;
  for (int32_t row = 0; row < n; row++) {
    int64_t c, k;
    decode(layout, ncols, nz, row, &c, &k);
    size_t L = (size_t)c * nz + (size_t)k;
#define ADD(col, val)                                                                              \
  do {                                                                                             \
    if ((val) != 0.0) {                                                                            \
      m->ci[nnz] = (int32_t)(col);                                                                 \
      m->v[nnz++] = (val);                                                                         \
    }                                                                                              \
  } while (0)
    if (c + 1 < ncols) ADD(cell_of(layout, ncols, nz, c + 1, k), p->hx[L]);
    if (k > 0) ADD(cell_of(layout, ncols, nz, c, k - 1), p->lo[L]);
    ADD(row, p->di[L]);
    if (k + 1 < nz) ADD(cell_of(layout, ncols, nz, c, k + 1), p->up[L]);
    if (c > 0) ADD(cell_of(layout, ncols, nz, c - 1, k), p->hx[L - (size_t)nz]);
#undef ADD
    m->rp[row + 1] = nnz;
  }
  return 0;
}

/**
 * Reference for column c: extract its block (entries between cells of column c, |k - k'| <= 1) from the
 * CSR arrays and solve it densely with dgesv; x[k] for level k. Returns the dgesv info.
 */
static int csr_column_solve(const csr32 *m, int32_t layout, int ncols, int nz, int64_t c, const double *r,
                            double *x) {
  double *B = calloc((size_t)nz * (size_t)nz, sizeof(double));
  int *ipiv = malloc(sizeof(int) * (size_t)nz);
  int info = -100, one = 1;
  if (!B || !ipiv) goto done;
  for (int k = 0; k < nz; k++) {
    int64_t row = cell_of(layout, ncols, nz, c, k);
    x[k] = r[row];
    for (int32_t e = m->rp[row]; e < m->rp[row + 1]; e++) {
      int64_t c2, k2;
      decode(layout, ncols, nz, m->ci[e], &c2, &k2);
      if (c2 == c && llabs(k2 - k) <= 1) B[k + (size_t)nz * (size_t)k2] += m->v[e];
    }
  }
  dgesv_(&nz, &one, B, &nz, ipiv, x, &nz, &info);
done:
  free(B);
  free(ipiv);
  return info;
}

/**
 * Compare z with the per-column dense solves of the CSR matrix; returns the largest relative difference
 * over columns (||z_c - x_c|| / ||x_c||), or INFINITY when a reference solve failed.
 */
static double compare_columns_dense(const csr32 *m, int32_t layout, int ncols, int nz, const double *r,
                                    const double *z) {
  double worst = 0.0;
  double *x = malloc(sizeof(double) * (size_t)nz), *zc = malloc(sizeof(double) * (size_t)nz);
  if (!x || !zc) worst = INFINITY;
  for (int64_t c = 0; c < ncols && worst < INFINITY; c++) {
    if (csr_column_solve(m, layout, ncols, nz, c, r, x) != 0) {
      worst = INFINITY;
      break;
    }
    for (int k = 0; k < nz; k++) zc[k] = z[cell_of(layout, ncols, nz, c, k)];
    double d = pk_test_rel_diff(nz, zc, x);
    if (d > worst) worst = d;
  }
  free(x);
  free(zc);
  return worst;
}

/** Random vector. */
static double *rand_vec(int64_t n, uint64_t seed) {
  double *v = malloc(sizeof(double) * (size_t)(n ? n : 1));
  uint64_t s = seed;
  if (v)
    for (int64_t i = 0; i < n; i++) v[i] = pk_test_rand(&s);
  return v;
}

/** CSR operator of a column problem. */
static int make_csr_op(pkrylov_context ctx, const colprob *p, int32_t layout, csr32 *m,
                       pkrylov_operator *A) {
  if (csr_build(p, layout, m)) return PKRYLOV_ERR_OUT_OF_MEMORY;
  return pkrylov_operator_create_csr(ctx, m->n, 0, m->rp, m->ci, m->v, A);
}

/**
 * Column preconditioner on a CSR column problem in one layout: apply it to r and return the worst
 * column difference against dense solves; *z_out (malloc'ed) receives z, *symmetric the path taken.
 */
static double run_column_csr(pkrylov_context ctx, const colprob *p, int32_t layout, const double *r,
                             double **z_out, int *symmetric) {
  csr32 m = {0};
  pkrylov_operator A = NULL;
  pkrylov_precond M = NULL;
  double worst = INFINITY;
  int64_t n = (int64_t)p->ncols * p->nz;
  double *z = calloc((size_t)n, sizeof(double));
  if (z && make_csr_op(ctx, p, layout, &m, &A) == PKRYLOV_SUCCESS &&
      pkrylov_precond_create(ctx, A, PKRYLOV_PRECOND_COLUMN, p->nz, layout, &M) == PKRYLOV_SUCCESS &&
      pkrylov_precond_apply(M, PKRYLOV_MEM_HOST, r, z) == PKRYLOV_SUCCESS) {
    worst = compare_columns_dense(&m, layout, p->ncols, p->nz, r, z);
    if (symmetric) *symmetric = M->symmetric;
  } else {
    fprintf(stderr, "run_column_csr: %s\n", last_msg(ctx));
  }
  pkrylov_precond_destroy(&M);
  pkrylov_operator_destroy(&A);
  csr_free(&m);
  if (z_out)
    *z_out = z;
  else
    free(z);
  return worst;
}

/** r permuted from the k-slow to the k-fast layout. */
static void kslow_to_kfast(int ncols, int nz, const double *slow, double *fast) {
  for (int c = 0; c < ncols; c++)
    for (int k = 0; k < nz; k++)
      fast[cell_of(PKRYLOV_LAYOUT_KFAST, ncols, nz, c, k)] =
          slow[cell_of(PKRYLOV_LAYOUT_KSLOW, ncols, nz, c, k)];
}

/** A small SPD CSR operator (KSLOW column problem) for the bad-input cases. */
static int small_csr(pkrylov_context ctx, int ncols, int nz, pkrylov_operator *A) {
  colprob p;
  csr32 m = {0};
  int rc = colprob_make(&p, ncols, nz, GEN_SPD, 7) ? PKRYLOV_ERR_OUT_OF_MEMORY
                                                   : make_csr_op(ctx, &p, PKRYLOV_LAYOUT_KSLOW, &m, A);
  colprob_free(&p);
  csr_free(&m);
  return rc;
}

/**
 * MITgcm-like stencil coefficients on nx x ny x nz: positive face couplings (vertical ones 100 times
 * stronger), aC = -(sum of the couplings of the cell) - margin, so A is negative definite.
 * sign = -1 gives that; sign = +1 the SPD negation.
 */
static void stencil_coeffs(int nx, int ny, int nz, double sign, uint64_t seed, double *aW, double *aS,
                           double *aV, double *aC) {
  uint64_t s = seed;
  size_t n = (size_t)nx * ny * nz;
  for (size_t i = 0; i < n; i++) {
    aW[i] = 0.5 + 0.5 * fabs(pk_test_rand(&s));
    aS[i] = 0.5 + 0.5 * fabs(pk_test_rand(&s));
    aV[i] = 100.0 * (0.5 + 0.5 * fabs(pk_test_rand(&s)));
  }
  for (int k = 0; k < nz; k++)
    for (int j = 0; j < ny; j++)
      for (int i = 0; i < nx; i++) {
        size_t q = (size_t)i + (size_t)nx * ((size_t)j + (size_t)ny * k);
        double sum = aW[q] + aS[q] + aV[q];
        if (i + 1 < nx) sum += aW[q + 1];
        if (j + 1 < ny) sum += aS[q + nx];
        if (k + 1 < nz) sum += aV[q + (size_t)nx * ny];
        aC[q] = -(sum + 0.05 + 0.05 * fabs(pk_test_rand(&s)));
      }
  for (size_t i = 0; i < n; i++) {
    aW[i] *= -sign;
    aS[i] *= -sign;
    aV[i] *= -sign;
    aC[i] *= -sign;
  }
}

/* ---- cases ------------------------------------------------------------------------------------- */

/** NONE is the identity; get_info reports type, levels 1 and layout KSLOW whatever was passed. */
PK_TEST_CASE(none_is_identity) {
  pkrylov_context ctx;
  pkrylov_operator A;
  pkrylov_precond M = NULL;
  PK_REQUIRE_OK(NULL, pkrylov_context_create(PKRYLOV_BACKEND_CPU, &ctx));
  PK_REQUIRE_OK(ctx, small_csr(ctx, 7, 5, &A));
  PK_REQUIRE_OK(ctx, pkrylov_precond_create(ctx, A, PKRYLOV_PRECOND_NONE, 3, 999, &M));
  double *r = rand_vec(35, 1), z[35];
  PK_REQUIRE_OK(ctx, pkrylov_precond_apply(M, PKRYLOV_MEM_HOST, r, z));
  for (int i = 0; i < 35; i++) PK_EXPECT(z[i] == r[i], "z[%d] = %g, r = %g", i, z[i], r[i]);
  int32_t type = 0, levels = 0, layout = 0;
  PK_REQUIRE_OK(ctx, pkrylov_precond_get_info(M, &type, &levels, &layout));
  PK_EXPECT(type == PKRYLOV_PRECOND_NONE && levels == 1 && layout == PKRYLOV_LAYOUT_KSLOW,
            "info %d %d %d", type, levels, layout);
  PK_REQUIRE_OK(ctx, pkrylov_precond_get_info(M, NULL, NULL, NULL));
  PK_REQUIRE_OK(ctx, pkrylov_precond_destroy(&M));
  PK_EXPECT(M == NULL, "destroy must clear the handle");
  PK_REQUIRE_OK(ctx, pkrylov_precond_destroy(&M)); /* NULL handle: no-op */
  free(r);
  PK_REQUIRE_OK(ctx, pkrylov_operator_destroy(&A));
  PK_REQUIRE_OK(NULL, pkrylov_context_destroy(&ctx));
  PK_TEST_END();
}

/**
 * Jacobi on a random SPD CSR matrix: z = r ./ diag (diagonal read from the CSR arrays, plain loop);
 * on a masked stencil, dry rows give z = r.
 */
PK_TEST_CASE(jacobi_matches_diagonal) {
  pkrylov_context ctx;
  PK_REQUIRE_OK(NULL, pkrylov_context_create(PKRYLOV_BACKEND_CPU, &ctx));
  colprob p;
  csr32 m = {0};
  pkrylov_operator A;
  pkrylov_precond M;
  PK_REQUIRE_OK(ctx, colprob_make(&p, 9000, 1, GEN_SPD, 11) ? PKRYLOV_ERR_OUT_OF_MEMORY : 0);
  for (int c = 0; c < 9000; c++) p.di[c] += 1.0 + 2.0 * fabs(p.hx[c]) + (c % 7); /* varied, SPD */
  PK_REQUIRE_OK(ctx, make_csr_op(ctx, &p, PKRYLOV_LAYOUT_KSLOW, &m, &A));
  PK_REQUIRE_OK(ctx, pkrylov_precond_create(ctx, A, PKRYLOV_PRECOND_JACOBI, 0, 0, &M));
  double *r = rand_vec(m.n, 2), *z = malloc(sizeof(double) * (size_t)m.n);
  PK_REQUIRE_OK(ctx, pkrylov_precond_apply(M, PKRYLOV_MEM_HOST, r, z));
  for (int32_t i = 0; i < m.n; i++) {
    double d = 0;
    for (int32_t e = m.rp[i]; e < m.rp[i + 1]; e++)
      if (m.ci[e] == i) d = m.v[e];
    PK_EXPECT(fabs(z[i] - r[i] / d) <= 4e-16 * fabs(r[i] / d), "row %d: %.17g vs %.17g", i, z[i], r[i] / d);
  }
  int32_t type, levels, layout;
  PK_REQUIRE_OK(ctx, pkrylov_precond_get_info(M, &type, &levels, &layout));
  PK_EXPECT(type == PKRYLOV_PRECOND_JACOBI && levels == 1, "info %d %d", type, levels);
  pkrylov_precond_destroy(&M);
  pkrylov_operator_destroy(&A);
  csr_free(&m);
  colprob_free(&p);
  free(r);
  free(z);

  /* masked stencil: dry rows are identity rows */
  enum { NX = 4, NY = 3, NZ = 5, N = NX * NY * NZ };
  double aW[N], aS[N], aV[N], aC[N], rr[N], zz[N];
  int32_t mask[N];
  uint64_t s = 5;
  stencil_coeffs(NX, NY, NZ, 1.0, 3, aW, aS, aV, aC);
  for (int i = 0; i < N; i++) {
    mask[i] = (i % 7) != 3;
    rr[i] = pk_test_rand(&s);
  }
  PK_REQUIRE_OK(ctx, pkrylov_operator_create_stencil7(ctx, NX, NY, NZ, aW, aS, aV, aC, mask, &A));
  PK_REQUIRE_OK(ctx, pkrylov_precond_create(ctx, A, PKRYLOV_PRECOND_JACOBI, 0, 0, &M));
  PK_REQUIRE_OK(ctx, pkrylov_precond_apply(M, PKRYLOV_MEM_HOST, rr, zz));
  for (int i = 0; i < N; i++) {
    double ref = mask[i] ? rr[i] / aC[i] : rr[i];
    PK_EXPECT(fabs(zz[i] - ref) <= 4e-16 * fabs(ref), "cell %d (mask %d): %.17g vs %.17g", i, mask[i],
              zz[i], ref);
  }
  pkrylov_precond_destroy(&M);
  pkrylov_operator_destroy(&A);
  PK_REQUIRE_OK(NULL, pkrylov_context_destroy(&ctx));
  PK_TEST_END();
}

/**
 * Column on a CSR block matrix (tridiagonal columns + horizontal couplings, ncols 7, nz 5) in both layouts:
 * each column of M^-1 r equals a dense dgesv solve of that column's block extracted from the CSR arrays;
 * the two layouts of the same matrix agree after permutation; the symmetric path is taken.
 */
PK_TEST_CASE(column_csr_both_layouts_dense) {
  pkrylov_context ctx;
  PK_REQUIRE_OK(NULL, pkrylov_context_create(PKRYLOV_BACKEND_CPU, &ctx));
  const int ncols = 7, nz = 5, n = ncols * nz;
  colprob p;
  PK_REQUIRE_OK(ctx, colprob_make(&p, ncols, nz, GEN_SPD, 21) ? PKRYLOV_ERR_OUT_OF_MEMORY : 0);
  double *rs = rand_vec(n, 3), *rf = malloc(sizeof(double) * n), *zs = NULL, *zf = NULL;
  kslow_to_kfast(ncols, nz, rs, rf);
  int sym_s = -1, sym_f = -1;
  double ds = run_column_csr(ctx, &p, PKRYLOV_LAYOUT_KSLOW, rs, &zs, &sym_s);
  double df = run_column_csr(ctx, &p, PKRYLOV_LAYOUT_KFAST, rf, &zf, &sym_f);
  PK_EXPECT(ds <= 1e-13, "kslow: column diff %.3g", ds);
  PK_EXPECT(df <= 1e-13, "kfast: column diff %.3g", df);
  PK_EXPECT(sym_s == 1 && sym_f == 1, "symmetric path expected (%d, %d)", sym_s, sym_f);
  double *zsf = malloc(sizeof(double) * n);
  kslow_to_kfast(ncols, nz, zs, zsf);
  PK_EXPECT(pk_test_rel_diff(n, zf, zsf) <= 1e-15, "layouts differ: %.3g", pk_test_rel_diff(n, zf, zsf));

  /* get_info reports what was resolved */
  csr32 m = {0};
  pkrylov_operator A;
  pkrylov_precond M;
  PK_REQUIRE_OK(ctx, make_csr_op(ctx, &p, PKRYLOV_LAYOUT_KFAST, &m, &A));
  PK_REQUIRE_OK(ctx, pkrylov_precond_create(ctx, A, PKRYLOV_PRECOND_COLUMN, nz, PKRYLOV_LAYOUT_KFAST, &M));
  int32_t type, levels, layout;
  PK_REQUIRE_OK(ctx, pkrylov_precond_get_info(M, &type, &levels, &layout));
  PK_EXPECT(type == PKRYLOV_PRECOND_COLUMN && levels == nz && layout == PKRYLOV_LAYOUT_KFAST, "info %d %d %d",
            type, levels, layout);
  pkrylov_precond_destroy(&M);
  pkrylov_operator_destroy(&A);
  csr_free(&m);
  free(rs), free(rf), free(zs), free(zf), free(zsf);
  colprob_free(&p);

  /* one level (levels = 1): the column solve is a diagonal scaling (diagonals of both signs) */
  for (int kind = 0; kind < 2; kind++) {
    int bad = colprob_make(&p, 35, 1, kind ? GEN_NONSYM : GEN_SPD, 22);
    PK_REQUIRE_OK(ctx, bad ? PKRYLOV_ERR_OUT_OF_MEMORY : 0);
    rs = rand_vec(35, 4);
    for (int lay = 0; lay < 2; lay++) {
      double d1 = run_column_csr(ctx, &p, lay ? PKRYLOV_LAYOUT_KFAST : PKRYLOV_LAYOUT_KSLOW, rs, NULL, NULL);
      PK_EXPECT(d1 <= 1e-15, "levels 1, kind %d, layout %d: diff %.3g", kind, lay, d1);
    }
    free(rs);
    colprob_free(&p);
  }
  PK_REQUIRE_OK(NULL, pkrylov_context_destroy(&ctx));
  PK_TEST_END();
}

/**
 * The symmetric multi-column sweep equals LAPACK dpttrf + dpttrs called here on the same tridiagonals
 * (1e-13), for a size spanning several column chunks and set-up blocks (the last of one column), in
 * both layouts, with 1 and 2 threads (bitwise equal).
 */
PK_TEST_CASE(symmetric_sweep_matches_dpttrs) {
  pkrylov_context ctx;
  PK_REQUIRE_OK(NULL, pkrylov_context_create(PKRYLOV_BACKEND_CPU, &ctx));
  const int ncols = 1153, nz = 17, n = ncols * nz; /* 18 x 64 + 1: a one-column last block */
  colprob p;
  PK_REQUIRE_OK(ctx, colprob_make(&p, ncols, nz, GEN_SPD, 31) ? PKRYLOV_ERR_OUT_OF_MEMORY : 0);
  double *d = malloc(sizeof(double) * nz), *e = malloc(sizeof(double) * nz), *x = malloc(sizeof(double) * nz);
  double *z = malloc(sizeof(double) * n), *z1 = malloc(sizeof(double) * n);
  for (int lay = 0; lay < 2; lay++) {
    int32_t layout = lay ? PKRYLOV_LAYOUT_KFAST : PKRYLOV_LAYOUT_KSLOW;
    csr32 m = {0};
    pkrylov_operator A;
    pkrylov_precond M;
    double *r = rand_vec(n, 40 + lay);
    PK_REQUIRE_OK(ctx, make_csr_op(ctx, &p, layout, &m, &A));
    PK_REQUIRE_OK(ctx, pkrylov_precond_create(ctx, A, PKRYLOV_PRECOND_COLUMN, nz, layout, &M));
    PK_EXPECT(M->symmetric == 1, "symmetric path expected");
    PK_REQUIRE_OK(ctx, pkrylov_context_set_num_threads(ctx, 2));
    PK_REQUIRE_OK(ctx, pkrylov_precond_apply(M, PKRYLOV_MEM_HOST, r, z));
    PK_REQUIRE_OK(ctx, pkrylov_context_set_num_threads(ctx, 1));
    PK_REQUIRE_OK(ctx, pkrylov_precond_apply(M, PKRYLOV_MEM_HOST, r, z1));
    PK_EXPECT(memcmp(z, z1, sizeof(double) * n) == 0, "1 and 2 threads differ");
    double worst = 0;
    for (int c = 0; c < ncols; c++) {
      int info = 0, one = 1;
      for (int k = 0; k < nz; k++) {
        d[k] = p.di[c * nz + k];
        if (k + 1 < nz) e[k] = p.up[c * nz + k];
        x[k] = r[cell_of(layout, ncols, nz, c, k)];
      }
      dpttrf_(&nz, d, e, &info);
      PK_EXPECT(info == 0, "reference dpttrf info %d", info);
      dpttrs_(&nz, &one, d, e, x, &nz, &info);
      for (int k = 0; k < nz; k++) {
        double diff = fabs(z[cell_of(layout, ncols, nz, c, k)] - x[k]) / (pk_test_norm(nz, x) / sqrt(nz));
        if (diff > worst) worst = diff;
      }
    }
    PK_EXPECT(worst <= 1e-13, "layout %d: max relative difference to dpttrs %.3g", layout, worst);
    pkrylov_precond_destroy(&M);
    pkrylov_operator_destroy(&A);
    csr_free(&m);
    free(r);
  }
  free(d), free(e), free(x), free(z), free(z1);
  colprob_free(&p);
  PK_REQUIRE_OK(NULL, pkrylov_context_destroy(&ctx));
  PK_TEST_END();
}

/**
 * Nonsymmetric tridiagonal columns take the general (dgttrf) path: equal to dense solves of the column
 * blocks and to LAPACK dgttrf + dgttrs called here, in both layouts.
 */
PK_TEST_CASE(nonsymmetric_general_path) {
  pkrylov_context ctx;
  PK_REQUIRE_OK(NULL, pkrylov_context_create(PKRYLOV_BACKEND_CPU, &ctx));
  const int ncols = 150, nz = 9, n = ncols * nz;
  colprob p;
  PK_REQUIRE_OK(ctx, colprob_make(&p, ncols, nz, GEN_NONSYM, 51) ? PKRYLOV_ERR_OUT_OF_MEMORY : 0);
  double *rs = rand_vec(n, 52), *rf = malloc(sizeof(double) * n), *zs = NULL, *zf = NULL;
  kslow_to_kfast(ncols, nz, rs, rf);
  int sym_s = -1, sym_f = -1;
  double ds = run_column_csr(ctx, &p, PKRYLOV_LAYOUT_KSLOW, rs, &zs, &sym_s);
  double df = run_column_csr(ctx, &p, PKRYLOV_LAYOUT_KFAST, rf, &zf, &sym_f);
  PK_EXPECT(ds <= 1e-11, "kslow: column diff to dense %.3g", ds);
  PK_EXPECT(df <= 1e-11, "kfast: column diff to dense %.3g", df);
  PK_EXPECT(sym_s == 0 && sym_f == 0, "general path expected (%d, %d)", sym_s, sym_f);
  /* LAPACK dgttrf/dgttrs reference on the k-slow result */
  double *dl = malloc(sizeof(double) * nz), *dd = malloc(sizeof(double) * nz);
  double *du = malloc(sizeof(double) * nz), *du2 = malloc(sizeof(double) * nz);
  double *x = malloc(sizeof(double) * nz);
  int *ipiv = malloc(sizeof(int) * nz);
  double worst = 0;
  for (int c = 0; c < ncols; c++) {
    int info = 0, one = 1;
    for (int k = 0; k < nz; k++) {
      dd[k] = p.di[c * nz + k];
      if (k + 1 < nz) {
        dl[k] = p.lo[c * nz + k + 1];
        du[k] = p.up[c * nz + k];
      }
      x[k] = rs[cell_of(PKRYLOV_LAYOUT_KSLOW, ncols, nz, c, k)];
    }
    dgttrf_(&nz, dl, dd, du, du2, ipiv, &info);
    PK_EXPECT(info == 0, "reference dgttrf info %d", info);
    dgttrs_("N", &nz, &one, dl, dd, du, du2, ipiv, x, &nz, &info, 1);
    for (int k = 0; k < nz; k++) {
      double diff = fabs(zs[cell_of(PKRYLOV_LAYOUT_KSLOW, ncols, nz, c, k)] - x[k]) /
                    (pk_test_norm(nz, x) / sqrt(nz));
      if (diff > worst) worst = diff;
    }
  }
  PK_EXPECT(worst <= 1e-14, "max relative difference to dgttrs %.3g", worst);
  double *zsf = malloc(sizeof(double) * n);
  kslow_to_kfast(ncols, nz, zs, zsf);
  PK_EXPECT(pk_test_rel_diff(n, zf, zsf) <= 1e-15, "layouts differ: %.3g", pk_test_rel_diff(n, zf, zsf));
  free(dl), free(dd), free(du), free(du2), free(x), free(ipiv);
  free(rs), free(rf), free(zs), free(zf), free(zsf);
  /* nonsymmetric but diagonally dominant, positive (dpttrf on either triangle alone would succeed) */
  for (int L = 0; L < n; L++) p.di[L] = 10.0 + fabs(p.hx[L]); /* |lo|, |up| <= 4.2 */
  rs = rand_vec(n, 53);
  int sym = -1;
  double dd2 = run_column_csr(ctx, &p, PKRYLOV_LAYOUT_KSLOW, rs, NULL, &sym);
  PK_EXPECT(dd2 <= 1e-13 && sym == 0, "dominant: column diff to dense %.3g, symmetric %d", dd2, sym);
  free(rs);
  colprob_free(&p);
  PK_REQUIRE_OK(NULL, pkrylov_context_destroy(&ctx));
  PK_TEST_END();
}

/**
 * Negative definite columns (an SPD matrix negated, as MITgcm stores its operator) work through the
 * symmetric path: z = -M_pos^-1 r, and z equals dense column solves. Mixed signs (every other column
 * negated) also stay on the symmetric path.
 */
PK_TEST_CASE(negative_definite_columns) {
  pkrylov_context ctx;
  PK_REQUIRE_OK(NULL, pkrylov_context_create(PKRYLOV_BACKEND_CPU, &ctx));
  const int ncols = 40, nz = 12, n = ncols * nz;
  colprob p;
  PK_REQUIRE_OK(ctx, colprob_make(&p, ncols, nz, GEN_SPD, 61) ? PKRYLOV_ERR_OUT_OF_MEMORY : 0);
  double *r = rand_vec(n, 62), *zp = NULL, *zn = NULL, *zm = NULL;
  int sym = -1;
  double dp = run_column_csr(ctx, &p, PKRYLOV_LAYOUT_KSLOW, r, &zp, &sym);
  PK_EXPECT(dp <= 1e-13 && sym == 1, "positive: diff %.3g, symmetric %d", dp, sym);
  colprob_negate(&p);
  double dn = run_column_csr(ctx, &p, PKRYLOV_LAYOUT_KSLOW, r, &zn, &sym);
  PK_EXPECT(dn <= 1e-13 && sym == 1, "negative: diff %.3g, symmetric %d", dn, sym);
  for (int i = 0; i < n; i++) PK_EXPECT(zn[i] == -zp[i], "cell %d: %.17g vs %.17g", i, zn[i], -zp[i]);
  /* mixed: negate every other column back to positive */
  for (int c = 0; c < ncols; c += 2)
    for (int k = 0; k < nz; k++) {
      size_t L = (size_t)c * nz + k;
      p.lo[L] = -p.lo[L], p.di[L] = -p.di[L], p.up[L] = -p.up[L];
    }
  double dm = run_column_csr(ctx, &p, PKRYLOV_LAYOUT_KFAST, r, &zm, &sym);
  PK_EXPECT(dm <= 1e-13 && sym == 1, "mixed: diff %.3g, symmetric %d", dm, sym);
  free(r), free(zp), free(zn), free(zm);
  colprob_free(&p);
  PK_REQUIRE_OK(NULL, pkrylov_context_destroy(&ctx));
  PK_TEST_END();
}

/**
 * Dry cells: a masked MITgcm-like (negative definite) stencil. z = r at dry cells; the wet segments
 * between dry cells equal dense solves of their own tridiagonals (built here from aV, aC and the mask).
 */
PK_TEST_CASE(dry_cells_split_columns) {
  enum { NX = 4, NY = 3, NZ = 8, N = NX * NY * NZ, NC = NX * NY };
  pkrylov_context ctx;
  PK_REQUIRE_OK(NULL, pkrylov_context_create(PKRYLOV_BACKEND_CPU, &ctx));
  double aW[N], aS[N], aV[N], aC[N], r[N], z[N];
  int32_t mask[N];
  stencil_coeffs(NX, NY, NZ, -1.0, 71, aW, aS, aV, aC);
  uint64_t s = 72;
  for (int i = 0; i < N; i++) {
    mask[i] = 1;
    r[i] = pk_test_rand(&s);
  }
#define DRY(i, j, k) mask[(i) + NX * ((j) + NY * (k))] = 0
  DRY(0, 0, 3);                                       /* middle of a column */
  DRY(1, 0, 0), DRY(1, 0, 7);                         /* top and bottom */
  for (int k = 0; k < NZ; k++) DRY(2, 1, k);          /* a fully dry column */
  DRY(3, 2, 2), DRY(3, 2, 3);                         /* two dry cells in a row */
  DRY(0, 2, 1), DRY(0, 2, 4), DRY(0, 2, 6);           /* segments of one wet cell */
#undef DRY
  pkrylov_operator A;
  pkrylov_precond M;
  PK_REQUIRE_OK(ctx, pkrylov_operator_create_stencil7(ctx, NX, NY, NZ, aW, aS, aV, aC, mask, &A));
  PK_REQUIRE_OK(ctx, pkrylov_precond_create(ctx, A, PKRYLOV_PRECOND_COLUMN, 0, PKRYLOV_LAYOUT_AUTO, &M));
  PK_EXPECT(M->symmetric == 1, "symmetric path expected for a negative definite masked stencil");
  PK_REQUIRE_OK(ctx, pkrylov_precond_apply(M, PKRYLOV_MEM_HOST, r, z));
  int dry = 0;
  for (int c = 0; c < NC; c++) {
    int k = 0;
    while (k < NZ) {
      int q = c + NC * k;
      if (!mask[q]) {
        PK_EXPECT(z[q] == r[q], "dry cell %d: z %.17g r %.17g", q, z[q], r[q]);
        dry++;
        k++;
        continue;
      }
      int k1 = k;
      while (k1 + 1 < NZ && mask[c + NC * (k1 + 1)]) k1++;
      int m = k1 - k + 1, one = 1, info = 0, ipiv[NZ];
      double B[NZ * NZ] = {0}, x[NZ], zc[NZ];
      for (int a = 0; a < m; a++) {
        int qa = c + NC * (k + a);
        B[a + m * a] = aC[qa];
        if (a > 0) B[a + m * (a - 1)] = aV[qa];           /* coupling to the level below */
        if (a + 1 < m) B[a + m * (a + 1)] = aV[qa + NC]; /* to the level above */
        x[a] = r[qa];
        zc[a] = z[qa];
      }
      dgesv_(&m, &one, B, &m, ipiv, x, &m, &info);
      PK_EXPECT(info == 0, "reference dgesv info %d", info);
      PK_EXPECT(pk_test_rel_diff(m, zc, x) <= 1e-13, "column %d levels %d..%d: diff %.3g", c, k, k1,
                pk_test_rel_diff(m, zc, x));
      k = k1 + 1;
    }
  }
  PK_EXPECT(dry == 16, "%d dry cells seen", dry);
  pkrylov_precond_destroy(&M);
  pkrylov_operator_destroy(&A);
  PK_REQUIRE_OK(NULL, pkrylov_context_destroy(&ctx));
  PK_TEST_END();
}

/**
 * Dry rows in a CSR matrix whose neighbours in the column still couple to them (and which keep their
 * horizontal entries): the dry cell is an identity row and the column splits there, so each wet segment
 * equals a dense solve of its own tridiagonal (built here from the generator's arrays); the symmetric
 * path is still taken, in both layouts.
 */
PK_TEST_CASE(dry_rows_csr_split) {
  pkrylov_context ctx;
  PK_REQUIRE_OK(NULL, pkrylov_context_create(PKRYLOV_BACKEND_CPU, &ctx));
  const int ncols = 6, nz = 7, n = ncols * nz;
  colprob p;
  PK_REQUIRE_OK(ctx, colprob_make(&p, ncols, nz, GEN_SPD, 111) ? PKRYLOV_ERR_OUT_OF_MEMORY : 0);
  int dry[6 * 7] = {0};
  dry[0 * nz + 3] = dry[1 * nz + 0] = dry[1 * nz + 6] = dry[2 * nz + 2] = dry[2 * nz + 3] = 1;
  for (int k = 0; k < nz; k++) dry[4 * nz + k] = 1; /* a fully dry column */
  for (int L = 0; L < n; L++)
    if (dry[L]) p.lo[L] = p.di[L] = p.up[L] = 0.0; /* the row only: neighbours keep their coupling */
  for (int lay = 0; lay < 2; lay++) {
    int32_t layout = lay ? PKRYLOV_LAYOUT_KFAST : PKRYLOV_LAYOUT_KSLOW;
    csr32 m = {0};
    pkrylov_operator A;
    pkrylov_precond M;
    double *r = rand_vec(n, 112), *z = malloc(sizeof(double) * n);
    PK_REQUIRE_OK(ctx, make_csr_op(ctx, &p, layout, &m, &A));
    PK_REQUIRE_OK(ctx, pkrylov_precond_create(ctx, A, PKRYLOV_PRECOND_COLUMN, nz, layout, &M));
    PK_EXPECT(M->symmetric == 1, "symmetric path expected after decoupling the dry cells");
    PK_REQUIRE_OK(ctx, pkrylov_precond_apply(M, PKRYLOV_MEM_HOST, r, z));
    for (int c = 0; c < ncols; c++) {
      int k = 0;
      while (k < nz) {
        int64_t q = cell_of(layout, ncols, nz, c, k);
        if (dry[c * nz + k]) {
          PK_EXPECT(z[q] == r[q], "layout %d: dry cell (%d, %d): z %.17g r %.17g", layout, c, k, z[q], r[q]);
          k++;
          continue;
        }
        int k1 = k;
        while (k1 + 1 < nz && !dry[c * nz + k1 + 1]) k1++;
        int mm = k1 - k + 1, one = 1, info = 0, ipiv[7];
        double B[49] = {0}, x[7], zc[7];
        for (int a = 0; a < mm; a++) {
          int L = c * nz + k + a;
          B[a + mm * a] = p.di[L];
          if (a > 0) B[a + mm * (a - 1)] = p.lo[L];
          if (a + 1 < mm) B[a + mm * (a + 1)] = p.up[L];
          x[a] = r[cell_of(layout, ncols, nz, c, k + a)];
          zc[a] = z[cell_of(layout, ncols, nz, c, k + a)];
        }
        dgesv_(&mm, &one, B, &mm, ipiv, x, &mm, &info);
        PK_EXPECT(info == 0, "reference dgesv info %d", info);
        PK_EXPECT(pk_test_rel_diff(mm, zc, x) <= 1e-13, "layout %d column %d levels %d..%d: diff %.3g",
                  layout, c, k, k1, pk_test_rel_diff(mm, zc, x));
        k = k1 + 1;
      }
    }
    pkrylov_precond_destroy(&M);
    pkrylov_operator_destroy(&A);
    csr_free(&m);
    free(r), free(z);
  }
  colprob_free(&p);
  PK_REQUIRE_OK(NULL, pkrylov_context_destroy(&ctx));
  PK_TEST_END();
}

/**
 * The column preconditioner of a stencil operator (with and without mask, SPD and negative definite)
 * equals the one of its CSR export (pkrylov_operator_get_csr + create_csr64, levels nz, KSLOW).
 */
PK_TEST_CASE(stencil_equals_csr_export) {
  enum { NX = 5, NY = 4, NZ = 6, N = NX * NY * NZ };
  pkrylov_context ctx;
  PK_REQUIRE_OK(NULL, pkrylov_context_create(PKRYLOV_BACKEND_CPU, &ctx));
  double aW[N], aS[N], aV[N], aC[N], r[N], z1[N], z2[N];
  int32_t mask[N];
  uint64_t s = 81;
  for (int i = 0; i < N; i++) {
    mask[i] = (i % 11) != 5;
    r[i] = pk_test_rand(&s);
  }
  for (int variant = 0; variant < 4; variant++) {
    stencil_coeffs(NX, NY, NZ, variant & 1 ? -1.0 : 1.0, 82 + variant, aW, aS, aV, aC);
    pkrylov_operator A, B;
    pkrylov_precond M1, M2;
    PK_REQUIRE_OK(ctx, pkrylov_operator_create_stencil7(ctx, NX, NY, NZ, aW, aS, aV, aC,
                                                        variant & 2 ? mask : NULL, &A));
    int64_t n, nnz;
    PK_REQUIRE_OK(ctx, pkrylov_operator_get_info(A, &n, &nnz, NULL, NULL, NULL, NULL));
    int64_t *rp = malloc(sizeof(int64_t) * (size_t)(n + 1)), *ci = malloc(sizeof(int64_t) * (size_t)nnz);
    double *v = malloc(sizeof(double) * (size_t)nnz);
    PK_REQUIRE_OK(ctx, pkrylov_operator_get_csr(A, rp, ci, v));
    PK_REQUIRE_OK(ctx, pkrylov_operator_create_csr64(ctx, n, 0, rp, ci, v, &B));
    PK_REQUIRE_OK(ctx, pkrylov_precond_create(ctx, A, PKRYLOV_PRECOND_COLUMN, NZ, PKRYLOV_LAYOUT_KSLOW, &M1));
    PK_REQUIRE_OK(ctx, pkrylov_precond_create(ctx, B, PKRYLOV_PRECOND_COLUMN, NZ, PKRYLOV_LAYOUT_KSLOW, &M2));
    PK_REQUIRE_OK(ctx, pkrylov_precond_apply(M1, PKRYLOV_MEM_HOST, r, z1));
    PK_REQUIRE_OK(ctx, pkrylov_precond_apply(M2, PKRYLOV_MEM_HOST, r, z2));
    PK_EXPECT(pk_test_rel_diff(N, z1, z2) <= 1e-15, "variant %d: diff %.3g", variant,
              pk_test_rel_diff(N, z1, z2));
    int32_t type, levels, layout;
    PK_REQUIRE_OK(ctx, pkrylov_precond_get_info(M1, &type, &levels, &layout));
    PK_EXPECT(levels == NZ && layout == PKRYLOV_LAYOUT_KSLOW, "info %d %d", levels, layout);
    pkrylov_precond_destroy(&M1);
    pkrylov_precond_destroy(&M2);
    pkrylov_operator_destroy(&A);
    pkrylov_operator_destroy(&B);
    free(rp), free(ci), free(v);
  }
  PK_REQUIRE_OK(NULL, pkrylov_context_destroy(&ctx));
  PK_TEST_END();
}

/**
 * The column preconditioner of the matrix-free thin-shell operator (levels 0, layout AUTO) equals the
 * one of its CSR export, and dense solves of the exported column blocks.
 */
PK_TEST_CASE(thinshell_equals_csr_export) {
  pkrylov_context ctx;
  PK_REQUIRE_OK(NULL, pkrylov_context_create(PKRYLOV_BACKEND_CPU, &ctx));
  pkrylov_thinshell_params tp;
  PK_REQUIRE_OK(ctx, pkrylov_thinshell_params_default(6, 5, 10, &tp));
  pkrylov_operator A, B;
  pkrylov_precond M1, M2;
  PK_REQUIRE_OK(ctx, pkrylov_operator_create_thinshell(ctx, &tp, &A));
  int64_t n, nnz;
  PK_REQUIRE_OK(ctx, pkrylov_operator_get_info(A, &n, &nnz, NULL, NULL, NULL, NULL));
  int64_t *rp = malloc(sizeof(int64_t) * (size_t)(n + 1)), *ci = malloc(sizeof(int64_t) * (size_t)nnz);
  double *v = malloc(sizeof(double) * (size_t)nnz);
  PK_REQUIRE_OK(ctx, pkrylov_operator_get_csr(A, rp, ci, v));
  PK_REQUIRE_OK(ctx, pkrylov_operator_create_csr64(ctx, n, 0, rp, ci, v, &B));
  PK_REQUIRE_OK(ctx, pkrylov_precond_create(ctx, A, PKRYLOV_PRECOND_COLUMN, 0, PKRYLOV_LAYOUT_AUTO, &M1));
  PK_REQUIRE_OK(ctx, pkrylov_precond_create(ctx, B, PKRYLOV_PRECOND_COLUMN, 10, PKRYLOV_LAYOUT_KSLOW, &M2));
  double *r = rand_vec(n, 91), *z1 = malloc(sizeof(double) * (size_t)n);
  double *z2 = malloc(sizeof(double) * (size_t)n);
  PK_REQUIRE_OK(ctx, pkrylov_precond_apply(M1, PKRYLOV_MEM_HOST, r, z1));
  PK_REQUIRE_OK(ctx, pkrylov_precond_apply(M2, PKRYLOV_MEM_HOST, r, z2));
  PK_EXPECT(pk_test_rel_diff(n, z1, z2) <= 1e-14, "diff %.3g", pk_test_rel_diff(n, z1, z2));
  /* dense column solves on the exported arrays (32-bit copy) */
  csr32 m = {(int32_t)n, malloc(sizeof(int32_t) * (size_t)(n + 1)), malloc(sizeof(int32_t) * (size_t)nnz),
             v};
  for (int64_t i = 0; i <= n; i++) m.rp[i] = (int32_t)rp[i];
  for (int64_t e = 0; e < nnz; e++) m.ci[e] = (int32_t)ci[e];
  double d = compare_columns_dense(&m, PKRYLOV_LAYOUT_KSLOW, (int)(n / 10), 10, r, z1);
  PK_EXPECT(d <= 1e-11, "dense column diff %.3g", d);
  int32_t levels, layout;
  PK_REQUIRE_OK(ctx, pkrylov_precond_get_info(M1, NULL, &levels, &layout));
  PK_EXPECT(levels == 10 && layout == PKRYLOV_LAYOUT_KSLOW, "info %d %d", levels, layout);
  pkrylov_precond_destroy(&M1);
  pkrylov_precond_destroy(&M2);
  pkrylov_operator_destroy(&A);
  pkrylov_operator_destroy(&B);
  csr_free(&m);
  free(rp), free(ci), free(r), free(z1), free(z2);
  PK_REQUIRE_OK(NULL, pkrylov_context_destroy(&ctx));
  PK_TEST_END();
}

/* ---- bad input --------------------------------------------------------------------------------- */

/** CSR + COLUMN with levels 0: PKRYLOV_ERR_LAYOUT naming 'levels'; the handle is not touched. */
PK_TEST_CASE(bad_csr_levels_zero) {
  pkrylov_context ctx;
  pkrylov_operator A;
  pkrylov_precond M = NULL;
  PK_REQUIRE_OK(NULL, pkrylov_context_create(PKRYLOV_BACKEND_CPU, &ctx));
  PK_REQUIRE_OK(ctx, small_csr(ctx, 7, 5, &A));
  EXPECT_ERR(ctx, pkrylov_precond_create(ctx, A, PKRYLOV_PRECOND_COLUMN, 0, PKRYLOV_LAYOUT_KSLOW, &M),
             PKRYLOV_ERR_LAYOUT, "'levels'");
  PK_EXPECT(M == NULL, "handle modified on error");
  PK_REQUIRE_OK(ctx, pkrylov_operator_destroy(&A));
  PK_REQUIRE_OK(NULL, pkrylov_context_destroy(&ctx));
  PK_TEST_END();
}

/** CSR + COLUMN with levels not dividing n, or above n: LAYOUT naming 'levels'; negative: INVALID_SIZE. */
PK_TEST_CASE(bad_csr_levels_not_dividing) {
  pkrylov_context ctx;
  pkrylov_operator A;
  pkrylov_precond M = NULL;
  PK_REQUIRE_OK(NULL, pkrylov_context_create(PKRYLOV_BACKEND_CPU, &ctx));
  PK_REQUIRE_OK(ctx, small_csr(ctx, 7, 5, &A));
  EXPECT_ERR(ctx, pkrylov_precond_create(ctx, A, PKRYLOV_PRECOND_COLUMN, 4, PKRYLOV_LAYOUT_KSLOW, &M),
             PKRYLOV_ERR_LAYOUT, "'levels'");
  PK_EXPECT(strstr(last_msg(ctx), "35") != NULL, "message should give n: %s", last_msg(ctx));
  EXPECT_ERR(ctx, pkrylov_precond_create(ctx, A, PKRYLOV_PRECOND_COLUMN, 70, PKRYLOV_LAYOUT_KFAST, &M),
             PKRYLOV_ERR_LAYOUT, "'levels'");
  EXPECT_ERR(ctx, pkrylov_precond_create(ctx, A, PKRYLOV_PRECOND_COLUMN, -5, PKRYLOV_LAYOUT_KFAST, &M),
             PKRYLOV_ERR_INVALID_SIZE, "'levels'");
  PK_EXPECT(M == NULL, "handle modified on error");
  PK_REQUIRE_OK(ctx, pkrylov_operator_destroy(&A));
  PK_REQUIRE_OK(NULL, pkrylov_context_destroy(&ctx));
  PK_TEST_END();
}

/** CSR + COLUMN with layout AUTO: LAYOUT naming 'layout'; layout 999: INVALID_VALUE naming 'layout'. */
PK_TEST_CASE(bad_csr_layout) {
  pkrylov_context ctx;
  pkrylov_operator A;
  pkrylov_precond M = NULL;
  PK_REQUIRE_OK(NULL, pkrylov_context_create(PKRYLOV_BACKEND_CPU, &ctx));
  PK_REQUIRE_OK(ctx, small_csr(ctx, 7, 5, &A));
  EXPECT_ERR(ctx, pkrylov_precond_create(ctx, A, PKRYLOV_PRECOND_COLUMN, 5, PKRYLOV_LAYOUT_AUTO, &M),
             PKRYLOV_ERR_LAYOUT, "'layout'");
  EXPECT_ERR(ctx, pkrylov_precond_create(ctx, A, PKRYLOV_PRECOND_COLUMN, 5, 999, &M),
             PKRYLOV_ERR_INVALID_VALUE, "'layout'");
  PK_EXPECT(M == NULL, "handle modified on error");
  PK_REQUIRE_OK(ctx, pkrylov_operator_destroy(&A));
  PK_REQUIRE_OK(NULL, pkrylov_context_destroy(&ctx));
  PK_TEST_END();
}

/**
 * Stencil operator: levels other than 0 or nz is LAYOUT naming 'levels' (and nz); layout KFAST is
 * LAYOUT naming 'layout'; levels nz with KSLOW works.
 */
PK_TEST_CASE(bad_stencil_levels_layout) {
  enum { NX = 3, NY = 2, NZ = 4, N = NX * NY * NZ };
  pkrylov_context ctx;
  pkrylov_operator A;
  pkrylov_precond M = NULL;
  double aW[N], aS[N], aV[N], aC[N];
  stencil_coeffs(NX, NY, NZ, 1.0, 101, aW, aS, aV, aC);
  PK_REQUIRE_OK(NULL, pkrylov_context_create(PKRYLOV_BACKEND_CPU, &ctx));
  PK_REQUIRE_OK(ctx, pkrylov_operator_create_stencil7(ctx, NX, NY, NZ, aW, aS, aV, aC, NULL, &A));
  EXPECT_ERR(ctx, pkrylov_precond_create(ctx, A, PKRYLOV_PRECOND_COLUMN, 2, PKRYLOV_LAYOUT_AUTO, &M),
             PKRYLOV_ERR_LAYOUT, "'levels'");
  PK_EXPECT(strstr(last_msg(ctx), "nz = 4") != NULL, "message should give nz: %s", last_msg(ctx));
  EXPECT_ERR(ctx, pkrylov_precond_create(ctx, A, PKRYLOV_PRECOND_COLUMN, 0, PKRYLOV_LAYOUT_KFAST, &M),
             PKRYLOV_ERR_LAYOUT, "'layout'");
  EXPECT_ERR(ctx, pkrylov_precond_create(ctx, A, PKRYLOV_PRECOND_COLUMN, 0, -1, &M),
             PKRYLOV_ERR_INVALID_VALUE, "'layout'");
  PK_EXPECT(M == NULL, "handle modified on error");
  PK_REQUIRE_OK(ctx, pkrylov_precond_create(ctx, A, PKRYLOV_PRECOND_COLUMN, NZ, PKRYLOV_LAYOUT_KSLOW, &M));
  PK_REQUIRE_OK(ctx, pkrylov_precond_destroy(&M));
  PK_REQUIRE_OK(ctx, pkrylov_operator_destroy(&A));
  PK_REQUIRE_OK(NULL, pkrylov_context_destroy(&ctx));
  PK_TEST_END();
}

/** type 999 (and a layout value given as type): INVALID_VALUE naming 'type'. */
PK_TEST_CASE(bad_type) {
  pkrylov_context ctx;
  pkrylov_operator A;
  pkrylov_precond M = NULL;
  PK_REQUIRE_OK(NULL, pkrylov_context_create(PKRYLOV_BACKEND_CPU, &ctx));
  PK_REQUIRE_OK(ctx, small_csr(ctx, 7, 5, &A));
  EXPECT_ERR(ctx, pkrylov_precond_create(ctx, A, 999, 5, PKRYLOV_LAYOUT_KSLOW, &M), PKRYLOV_ERR_INVALID_VALUE,
             "'type'");
  EXPECT_ERR(ctx, pkrylov_precond_create(ctx, A, PKRYLOV_LAYOUT_KSLOW, 5, PKRYLOV_PRECOND_COLUMN, &M),
             PKRYLOV_ERR_INVALID_VALUE, "'type'");
  PK_EXPECT(M == NULL, "handle modified on error");
  PK_REQUIRE_OK(ctx, pkrylov_operator_destroy(&A));
  PK_REQUIRE_OK(NULL, pkrylov_context_destroy(&ctx));
  PK_TEST_END();
}

/** Jacobi with a zero diagonal entry (explicit zero, and none stored): SINGULAR naming the row. */
PK_TEST_CASE(bad_jacobi_zero_diagonal) {
  pkrylov_context ctx;
  pkrylov_operator A;
  pkrylov_precond M = NULL;
  PK_REQUIRE_OK(NULL, pkrylov_context_create(PKRYLOV_BACKEND_CPU, &ctx));
  /* 3x3: row 2 has an explicit zero diagonal */
  int32_t rp[] = {0, 2, 4, 6}, ci[] = {0, 2, 1, 2, 0, 2};
  double v[] = {2.0, 1.0, 3.0, 1.0, 1.0, 0.0};
  PK_REQUIRE_OK(ctx, pkrylov_operator_create_csr(ctx, 3, 0, rp, ci, v, &A));
  EXPECT_ERR(ctx, pkrylov_precond_create(ctx, A, PKRYLOV_PRECOND_JACOBI, 0, 0, &M), PKRYLOV_ERR_SINGULAR,
             "row 2");
  PK_REQUIRE_OK(ctx, pkrylov_operator_destroy(&A));
  /* 3x3: row 1 has no diagonal entry stored */
  int32_t rp2[] = {0, 1, 2, 3}, ci2[] = {0, 2, 2};
  double v2[] = {1.0, 1.0, 1.0};
  PK_REQUIRE_OK(ctx, pkrylov_operator_create_csr(ctx, 3, 0, rp2, ci2, v2, &A));
  EXPECT_ERR(ctx, pkrylov_precond_create(ctx, A, PKRYLOV_PRECOND_JACOBI, 0, 0, &M), PKRYLOV_ERR_SINGULAR,
             "row 1");
  PK_EXPECT(M == NULL, "handle modified on error");
  PK_REQUIRE_OK(ctx, pkrylov_operator_destroy(&A));
  PK_REQUIRE_OK(NULL, pkrylov_context_destroy(&ctx));
  PK_TEST_END();
}

/**
 * A column whose tridiagonal is exactly singular ([[1,1],[1,1]], column 1 of a k-fast CSR matrix, and
 * the same block on the stencil grid): SINGULAR naming the column and the level.
 */
PK_TEST_CASE(bad_column_singular) {
  pkrylov_context ctx;
  pkrylov_operator A;
  pkrylov_precond M = NULL;
  PK_REQUIRE_OK(NULL, pkrylov_context_create(PKRYLOV_BACKEND_CPU, &ctx));
  /* kfast, nz 2: column 0 = diag(2, 2), column 1 = [[1,1],[1,1]] */
  int32_t rp[] = {0, 1, 2, 4, 6}, ci[] = {0, 1, 2, 3, 2, 3};
  double v[] = {2.0, 2.0, 1.0, 1.0, 1.0, 1.0};
  PK_REQUIRE_OK(ctx, pkrylov_operator_create_csr(ctx, 4, 0, rp, ci, v, &A));
  EXPECT_ERR(ctx, pkrylov_precond_create(ctx, A, PKRYLOV_PRECOND_COLUMN, 2, PKRYLOV_LAYOUT_KFAST, &M),
             PKRYLOV_ERR_SINGULAR, "column 1");
  PK_EXPECT(strstr(last_msg(ctx), "level") != NULL, "message should name the level: %s", last_msg(ctx));
  PK_EXPECT(M == NULL, "handle modified on error");
  PK_REQUIRE_OK(ctx, pkrylov_operator_destroy(&A));
  /* stencil 2 x 1 x 2: column (1, 0) = [[1,1],[1,1]] gives i = 1, j = 0 in the message */
  double aW[4] = {0}, aS[4] = {0}, aV[4] = {0, 0, 3.0, 1.0}, aC[4] = {5.0, 1.0, 5.0, 1.0};
  PK_REQUIRE_OK(ctx, pkrylov_operator_create_stencil7(ctx, 2, 1, 2, aW, aS, aV, aC, NULL, &A));
  EXPECT_ERR(ctx, pkrylov_precond_create(ctx, A, PKRYLOV_PRECOND_COLUMN, 0, PKRYLOV_LAYOUT_AUTO, &M),
             PKRYLOV_ERR_SINGULAR, "i = 1, j = 0");
  PK_REQUIRE_OK(ctx, pkrylov_operator_destroy(&A));
  PK_REQUIRE_OK(NULL, pkrylov_context_destroy(&ctx));
  PK_TEST_END();
}

/** An operator of another context: INCOMPATIBLE naming 'A'. */
PK_TEST_CASE(bad_other_context) {
  pkrylov_context ctx, ctx2;
  pkrylov_operator A;
  pkrylov_precond M = NULL;
  PK_REQUIRE_OK(NULL, pkrylov_context_create(PKRYLOV_BACKEND_CPU, &ctx));
  PK_REQUIRE_OK(NULL, pkrylov_context_create(PKRYLOV_BACKEND_CPU, &ctx2));
  PK_REQUIRE_OK(ctx2, small_csr(ctx2, 7, 5, &A));
  EXPECT_ERR(ctx, pkrylov_precond_create(ctx, A, PKRYLOV_PRECOND_JACOBI, 0, 0, &M), PKRYLOV_ERR_INCOMPATIBLE,
             "'A'");
  PK_EXPECT(M == NULL, "handle modified on error");
  PK_REQUIRE_OK(ctx2, pkrylov_operator_destroy(&A));
  PK_REQUIRE_OK(NULL, pkrylov_context_destroy(&ctx2));
  PK_REQUIRE_OK(NULL, pkrylov_context_destroy(&ctx));
  PK_TEST_END();
}

/** apply with PKRYLOV_MEM_DEVICE: MEMTYPE naming 'mem'; a value that is no memtype: INVALID_VALUE. */
PK_TEST_CASE(bad_apply_memtype) {
  pkrylov_context ctx;
  pkrylov_operator A;
  pkrylov_precond M;
  PK_REQUIRE_OK(NULL, pkrylov_context_create(PKRYLOV_BACKEND_CPU, &ctx));
  PK_REQUIRE_OK(ctx, small_csr(ctx, 7, 5, &A));
  PK_REQUIRE_OK(ctx, pkrylov_precond_create(ctx, A, PKRYLOV_PRECOND_COLUMN, 5, PKRYLOV_LAYOUT_KSLOW, &M));
  double r[35] = {0}, z[35];
  for (int i = 0; i < 35; i++) z[i] = 42.0;
  EXPECT_ERR(ctx, pkrylov_precond_apply(M, PKRYLOV_MEM_DEVICE, r, z), PKRYLOV_ERR_MEMTYPE, "'mem'");
  EXPECT_ERR(ctx, pkrylov_precond_apply(M, PKRYLOV_LAYOUT_KSLOW, r, z), PKRYLOV_ERR_INVALID_VALUE, "'mem'");
  for (int i = 0; i < 35; i++) PK_EXPECT(z[i] == 42.0, "z[%d] modified on error", i);
  PK_REQUIRE_OK(ctx, pkrylov_precond_destroy(&M));
  PK_REQUIRE_OK(ctx, pkrylov_operator_destroy(&A));
  PK_REQUIRE_OK(NULL, pkrylov_context_destroy(&ctx));
  PK_TEST_END();
}

/** apply with r == z, or overlapping r and z: ALIASING naming 'r' and 'z'. */
PK_TEST_CASE(bad_apply_aliasing) {
  pkrylov_context ctx;
  pkrylov_operator A;
  pkrylov_precond M;
  PK_REQUIRE_OK(NULL, pkrylov_context_create(PKRYLOV_BACKEND_CPU, &ctx));
  PK_REQUIRE_OK(ctx, small_csr(ctx, 7, 5, &A));
  PK_REQUIRE_OK(ctx, pkrylov_precond_create(ctx, A, PKRYLOV_PRECOND_JACOBI, 0, 0, &M));
  double r[70];
  for (int i = 0; i < 70; i++) r[i] = 1.0 + i;
  EXPECT_ERR(ctx, pkrylov_precond_apply(M, PKRYLOV_MEM_HOST, r, r), PKRYLOV_ERR_ALIASING, "'r'");
  PK_EXPECT(strstr(last_msg(ctx), "'z'") != NULL, "message should name 'z': %s", last_msg(ctx));
  EXPECT_ERR(ctx, pkrylov_precond_apply(M, PKRYLOV_MEM_HOST, r, r + 34), PKRYLOV_ERR_ALIASING, "'z'");
  EXPECT_ERR(ctx, pkrylov_precond_apply(M, PKRYLOV_MEM_HOST, r + 34, r), PKRYLOV_ERR_ALIASING, "'z'");
  for (int i = 0; i < 70; i++) PK_EXPECT(r[i] == 1.0 + i, "r[%d] modified on error", i);
  PK_REQUIRE_OK(ctx, pkrylov_precond_apply(M, PKRYLOV_MEM_HOST, r, r + 35)); /* adjacent is fine */
  PK_REQUIRE_OK(ctx, pkrylov_precond_destroy(&M));
  PK_REQUIRE_OK(ctx, pkrylov_operator_destroy(&A));
  PK_REQUIRE_OK(NULL, pkrylov_context_destroy(&ctx));
  PK_TEST_END();
}

/** NULL ctx, A, M (create), r, z, M (apply), handle address (destroy): NULL_POINTER naming it. */
PK_TEST_CASE(bad_null_arguments) {
  pkrylov_context ctx;
  pkrylov_operator A;
  pkrylov_precond M = NULL;
  PK_REQUIRE_OK(NULL, pkrylov_context_create(PKRYLOV_BACKEND_CPU, &ctx));
  PK_REQUIRE_OK(ctx, small_csr(ctx, 7, 5, &A));
  PK_EXPECT_CODE(NULL, pkrylov_precond_create(NULL, A, PKRYLOV_PRECOND_NONE, 0, 0, &M),
                 PKRYLOV_ERR_NULL_POINTER);
  PK_EXPECT(strstr(pkrylov_last_error_message(), "'ctx'") != NULL, "orphan message: %s",
            pkrylov_last_error_message());
  EXPECT_ERR(ctx, pkrylov_precond_create(ctx, NULL, PKRYLOV_PRECOND_NONE, 0, 0, &M), PKRYLOV_ERR_NULL_POINTER,
             "'A'");
  EXPECT_ERR(ctx, pkrylov_precond_create(ctx, A, PKRYLOV_PRECOND_NONE, 0, 0, NULL), PKRYLOV_ERR_NULL_POINTER,
             "'M'");
  PK_EXPECT(M == NULL, "handle modified on error");
  PK_REQUIRE_OK(ctx, pkrylov_precond_create(ctx, A, PKRYLOV_PRECOND_NONE, 0, 0, &M));
  double r[35] = {0}, z[35];
  EXPECT_ERR(ctx, pkrylov_precond_apply(M, PKRYLOV_MEM_HOST, NULL, z), PKRYLOV_ERR_NULL_POINTER, "'r'");
  EXPECT_ERR(ctx, pkrylov_precond_apply(M, PKRYLOV_MEM_HOST, r, NULL), PKRYLOV_ERR_NULL_POINTER, "'z'");
  PK_EXPECT_CODE(NULL, pkrylov_precond_apply(NULL, PKRYLOV_MEM_HOST, r, z), PKRYLOV_ERR_NULL_POINTER);
  PK_EXPECT(strstr(pkrylov_last_error_message(), "'M'") != NULL, "orphan message: %s",
            pkrylov_last_error_message());
  PK_EXPECT_CODE(NULL, pkrylov_precond_get_info(NULL, NULL, NULL, NULL), PKRYLOV_ERR_NULL_POINTER);
  PK_EXPECT_CODE(NULL, pkrylov_precond_destroy(NULL), PKRYLOV_ERR_NULL_POINTER);
  PK_REQUIRE_OK(ctx, pkrylov_precond_destroy(&M));
  PK_REQUIRE_OK(ctx, pkrylov_operator_destroy(&A));
  PK_REQUIRE_OK(NULL, pkrylov_context_destroy(&ctx));
  PK_TEST_END();
}

/**
 * Destroying the operator while a preconditioner holds it: INVALID_STATE and the operator survives (the
 * preconditioner still applies); after the preconditioner is destroyed it succeeds, and so does the
 * context's destruction (no live objects left).
 */
PK_TEST_CASE(bad_operator_destroy_while_held) {
  pkrylov_context ctx;
  pkrylov_operator A;
  pkrylov_precond M, M2;
  PK_REQUIRE_OK(NULL, pkrylov_context_create(PKRYLOV_BACKEND_CPU, &ctx));
  PK_REQUIRE_OK(ctx, small_csr(ctx, 7, 5, &A));
  PK_REQUIRE_OK(ctx, pkrylov_precond_create(ctx, A, PKRYLOV_PRECOND_COLUMN, 5, PKRYLOV_LAYOUT_KFAST, &M));
  PK_REQUIRE_OK(ctx, pkrylov_precond_create(ctx, A, PKRYLOV_PRECOND_JACOBI, 0, 0, &M2));
  pkrylov_operator A0 = A;
  PK_EXPECT_CODE(ctx, pkrylov_operator_destroy(&A), PKRYLOV_ERR_INVALID_STATE);
  PK_EXPECT(A == A0, "handle cleared on error");
  PK_EXPECT_CODE(NULL, pkrylov_context_destroy(&ctx), PKRYLOV_ERR_INVALID_STATE);
  double r[35] = {1.0}, z[35];
  PK_REQUIRE_OK(ctx, pkrylov_precond_apply(M, PKRYLOV_MEM_HOST, r, z));
  PK_REQUIRE_OK(ctx, pkrylov_precond_destroy(&M));
  PK_EXPECT_CODE(ctx, pkrylov_operator_destroy(&A), PKRYLOV_ERR_INVALID_STATE); /* M2 still holds it */
  PK_REQUIRE_OK(ctx, pkrylov_precond_destroy(&M2));
  PK_REQUIRE_OK(ctx, pkrylov_operator_destroy(&A));
  PK_EXPECT(A == NULL, "destroy must clear the handle");
  PK_REQUIRE_OK(NULL, pkrylov_context_destroy(&ctx));
  PK_TEST_END();
}

/**
 * Destroying a preconditioner while a solver holds it: INVALID_STATE naming 'M', the handle is kept and
 * still works; after the solver is destroyed it succeeds.
 */
PK_TEST_CASE(bad_precond_destroy_while_held) {
  pkrylov_context ctx;
  pkrylov_operator A;
  pkrylov_precond M;
  pkrylov_solver S;
  PK_REQUIRE_OK(NULL, pkrylov_context_create(PKRYLOV_BACKEND_CPU, &ctx));
  PK_REQUIRE_OK(ctx, small_csr(ctx, 7, 5, &A));
  PK_REQUIRE_OK(ctx, pkrylov_precond_create(ctx, A, PKRYLOV_PRECOND_COLUMN, 5, PKRYLOV_LAYOUT_KSLOW, &M));
  PK_REQUIRE_OK(ctx, pkrylov_solver_create(ctx, PKRYLOV_SOLVER_CG, A, M, &S));
  pkrylov_precond M0 = M;
  EXPECT_ERR(ctx, pkrylov_precond_destroy(&M), PKRYLOV_ERR_INVALID_STATE, "'M'");
  PK_EXPECT(M == M0, "handle cleared on error");
  double r[35] = {0, 1.0}, z[35];
  PK_REQUIRE_OK(ctx, pkrylov_precond_apply(M, PKRYLOV_MEM_HOST, r, z));
  PK_REQUIRE_OK(ctx, pkrylov_solver_destroy(&S));
  PK_REQUIRE_OK(ctx, pkrylov_precond_destroy(&M));
  PK_EXPECT(M == NULL, "destroy must clear the handle");
  PK_REQUIRE_OK(ctx, pkrylov_operator_destroy(&A));
  PK_REQUIRE_OK(NULL, pkrylov_context_destroy(&ctx));
  PK_TEST_END();
}

PK_TEST_MAIN(PK_TEST_ENTRY(none_is_identity), PK_TEST_ENTRY(jacobi_matches_diagonal),
             PK_TEST_ENTRY(column_csr_both_layouts_dense), PK_TEST_ENTRY(symmetric_sweep_matches_dpttrs),
             PK_TEST_ENTRY(nonsymmetric_general_path), PK_TEST_ENTRY(negative_definite_columns),
             PK_TEST_ENTRY(dry_cells_split_columns), PK_TEST_ENTRY(dry_rows_csr_split),
             PK_TEST_ENTRY(stencil_equals_csr_export),
             PK_TEST_ENTRY(thinshell_equals_csr_export), PK_TEST_ENTRY(bad_csr_levels_zero),
             PK_TEST_ENTRY(bad_csr_levels_not_dividing), PK_TEST_ENTRY(bad_csr_layout),
             PK_TEST_ENTRY(bad_stencil_levels_layout), PK_TEST_ENTRY(bad_type),
             PK_TEST_ENTRY(bad_jacobi_zero_diagonal), PK_TEST_ENTRY(bad_column_singular),
             PK_TEST_ENTRY(bad_other_context), PK_TEST_ENTRY(bad_apply_memtype),
             PK_TEST_ENTRY(bad_apply_aliasing), PK_TEST_ENTRY(bad_null_arguments),
             PK_TEST_ENTRY(bad_operator_destroy_while_held),
             PK_TEST_ENTRY(bad_precond_destroy_while_held))

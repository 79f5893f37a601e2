/**
 * @file pk_cuda_test.h
 * @brief Test-only helpers of the CUDA tests: device views (pk_cuda_op / pk_cuda_pc) of host operators and
 *        preconditioners uploaded here with plain cudaMalloc/cudaMemcpy (independent of the backend's own
 *        upload code), small device-vector helpers. Header-only (static inline), C.
 */
#ifndef PK_CUDA_TEST_H
#define PK_CUDA_TEST_H

#include <cuda_runtime_api.h>
#include <math.h>
#include <stdio.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "pk_cuda.h"
#include "pk_impl.h"
#ifndef PK_TEST_HAVE_CUDART
#define PK_TEST_HAVE_CUDART 1 /* pk_test.h's CUDA helpers (SKIP_WITHOUT_GPU) */
#endif
#include "pk_test.h"

/** A launcher or CUDA call must return cudaSuccess (0). */
#define CK(call)                                                                                             \
  do {                                                                                                       \
    int ck_e_ = (int)(call);                                                                                 \
    PK_EXPECT(ck_e_ == 0, "%s -> CUDA error %d (%s)", #call, ck_e_, cudaGetErrorString((cudaError_t)ck_e_)); \
  } while (0)

/** Bitwise comparison of n values; prints the first difference and counts a failure. */
static inline int pkt_same_bits(const char *tag, const char *what, int64_t n, const double *gpu,
                                const double *cpu) {
  int64_t bad = 0, first = -1;
  for (int64_t i = 0; i < n; i++)
    if (memcmp(&gpu[i], &cpu[i], sizeof(double)) != 0) {
      if (first < 0) first = i;
      bad++;
    }
  if (bad) {
    fprintf(stderr, "%s: %s differs in %lld of %lld values; first at %lld: gpu %.17g cpu %.17g\n", tag, what,
            (long long)bad, (long long)n, (long long)first, gpu[first], cpu[first]);
    pk_test_failures++;
  }
  return bad == 0;
}

/** Device vector d bitwise equal to host vector h (a failed copy counts as a difference). */
static inline int pkt_dev_same(const char *tag, const char *what, int64_t n, const double *d, const double *h) {
  double *g = (double *)malloc(sizeof(double) * (size_t)(n ? n : 1));
  if (!g || cudaMemcpy(g, d, sizeof(double) * (size_t)n, cudaMemcpyDeviceToHost) != cudaSuccess) {
    fprintf(stderr, "%s: %s: cannot copy the device vector\n", tag, what);
    pk_test_failures++;
    free(g);
    return 0;
  }
  const int ok = pkt_same_bits(tag, what, n, g, h);
  free(g);
  return ok;
}

/** A non-symmetric tridiagonal CSR matrix of size n (diagonally dominant), rows i: -1.3, 4 + i%3, -0.7
 *  (t720, t726). */
static inline int pkt_tri_csr(pkrylov_context ctx, int64_t n, pkrylov_operator *A) {
  int32_t *rp = (int32_t *)malloc(sizeof(int32_t) * (size_t)(n + 1));
  int32_t *ci = (int32_t *)malloc(sizeof(int32_t) * (size_t)(3 * n));
  double *v = (double *)malloc(sizeof(double) * (size_t)(3 * n));
  int32_t k = 0;
  rp[0] = 0;
  for (int64_t i = 0; i < n; i++) {
    if (i > 0)
      ci[k] = (int32_t)i - 1, v[k++] = -1.3;
    ci[k] = (int32_t)i, v[k++] = 4.0 + (double)(i % 3);
    if (i < n - 1)
      ci[k] = (int32_t)i + 1, v[k++] = -0.7;
    rp[i + 1] = k;
  }
  int rc = pkrylov_operator_create_csr(ctx, (int32_t)n, 0, rp, ci, v, A);
  free(rp), free(ci), free(v);
  return rc;
}

/** A CUDA context, or NULL when there is no device (the case then skips) or the context fails (said). */
static inline pkrylov_context pkt_cuda_ctx(void) {
  pkrylov_context ctx = NULL;
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
    cudaGetLastError();
    return NULL;
  }
  if (pkrylov_context_create(PKRYLOV_BACKEND_CUDA, &ctx)) {
    fprintf(stderr, "CUDA context: %s\n", pkrylov_last_error_message());
    return NULL;
  }
  return ctx;
}

/** Device buffers owned by a test view. */
typedef struct {
  void *buf[32];
  int nbuf;
  int failed; /* a cudaMalloc/cudaMemcpy failed */
} pkt_mem;

/** Free every buffer of m. */
static inline void pkt_free(pkt_mem *m) {
  for (int i = 0; i < m->nbuf; i++) cudaFree(m->buf[i]);
  m->nbuf = 0;
}

/** Device copy of bytes from host src (NULL src: NULL). */
static inline void *pkt_dev(pkt_mem *m, const void *src, size_t bytes) {
  if (!src || m->nbuf >= 32) return NULL;
  void *d = NULL;
  if (cudaMalloc(&d, bytes ? bytes : 1) != cudaSuccess) {
    m->failed = 1;
    return NULL;
  }
  m->buf[m->nbuf++] = d;
  if (bytes && cudaMemcpy(d, src, bytes, cudaMemcpyHostToDevice) != cudaSuccess) m->failed = 1;
  return d;
}

/** Device float copy of n doubles (each rounded to float). */
static inline float *pkt_devf(pkt_mem *m, const double *src, int64_t n) {
  if (!src) return NULL;
  float *h = (float *)malloc(sizeof(float) * (size_t)(n ? n : 1));
  if (!h) {
    m->failed = 1;
    return NULL;
  }
  for (int64_t i = 0; i < n; i++) h[i] = (float)src[i];
  float *d = (float *)pkt_dev(m, h, sizeof(float) * (size_t)n);
  free(h);
  return d;
}

/**
 * Device view of host operator A. fp32: float coefficients only (the double pointers stay NULL, so a
 * kernel that read them would fault). col64: upload the CSR columns as 64-bit indices (the library keeps
 * 32-bit ones up to 2^31 rows) to exercise that path. Returns 0 on success.
 */
static inline int pkt_upload_op(const struct pkrylov_operator_s *A, int fp32, int col64, pk_cuda_op *v,
                                pkt_mem *m) {
  memset(v, 0, sizeof *v);
  v->type = A->type;
  v->n = A->n;
  v->nx = A->nx, v->ny = A->ny, v->nz = A->nz;
  const int64_t n = A->n;
  if (A->type == PKRYLOV_OPERATOR_CSR) {
    v->fp32 = fp32;
    v->rowptr = (const int64_t *)pkt_dev(m, A->csr.rowptr, sizeof(int64_t) * (size_t)(n + 1));
    if (col64 || !A->csr.colind32) {
      int64_t *c = (int64_t *)malloc(sizeof(int64_t) * (size_t)(A->nnz ? A->nnz : 1));
      if (!c) return 1;
      for (int64_t p = 0; p < A->nnz; p++) c[p] = A->csr.colind32 ? A->csr.colind32[p] : A->csr.colind64[p];
      v->col64 = (const int64_t *)pkt_dev(m, c, sizeof(int64_t) * (size_t)A->nnz);
      free(c);
    } else {
      v->col32 = (const int32_t *)pkt_dev(m, A->csr.colind32, sizeof(int32_t) * (size_t)A->nnz);
    }
    if (fp32)
      v->valf = pkt_devf(m, A->csr.values, A->nnz);
    else
      v->val = (const double *)pkt_dev(m, A->csr.values, sizeof(double) * (size_t)A->nnz);
  } else if (A->type == PKRYLOV_OPERATOR_STENCIL7) {
    v->fp32 = fp32;
    if (fp32) {
      v->aWf = pkt_devf(m, A->st.aW, n);
      v->aSf = pkt_devf(m, A->st.aS, n);
      v->aVf = pkt_devf(m, A->st.aV, n);
      v->aCf = pkt_devf(m, A->st.aC, n);
    } else {
      v->aW = (const double *)pkt_dev(m, A->st.aW, sizeof(double) * (size_t)n);
      v->aS = (const double *)pkt_dev(m, A->st.aS, sizeof(double) * (size_t)n);
      v->aV = (const double *)pkt_dev(m, A->st.aV, sizeof(double) * (size_t)n);
      v->aC = (const double *)pkt_dev(m, A->st.aC, sizeof(double) * (size_t)n);
    }
    v->wet = (const uint8_t *)pkt_dev(m, A->st.wet, (size_t)n);
  } else {
    const size_t nz = (size_t)A->nz, nx = (size_t)A->nx, ny = (size_t)A->ny;
    v->ta = (const double *)pkt_dev(m, A->ts.a, sizeof(double) * nz);
    v->tb = (const double *)pkt_dev(m, A->ts.b, sizeof(double) * nz);
    v->tc = (const double *)pkt_dev(m, A->ts.c, sizeof(double) * nz);
    v->td = (const double *)pkt_dev(m, A->ts.d, sizeof(double) * nz);
    v->area = (const double *)pkt_dev(m, A->ts.area, sizeof(double) * nx * ny);
    v->ax = (const double *)pkt_dev(m, A->ts.ax, sizeof(double) * (nx + 1) * ny);
    v->ay = (const double *)pkt_dev(m, A->ts.ay, sizeof(double) * nx * (ny + 1));
  }
  return m->failed;
}

/**
 * Device view of host preconditioner M (pk_cuda.h layout): Jacobi dinv; column symmetric dinv, lmul;
 * column general factors re-laid out from per-column (c*nz + k) to per-cell (cell(c, k)) storage.
 * fp32: float dinv / lmul only (the general path has no fp32 copies). Returns 0 on success.
 */
static inline int pkt_upload_pc(const struct pkrylov_precond_s *M, int fp32, pk_cuda_pc *v, pkt_mem *m) {
  memset(v, 0, sizeof *v);
  v->type = M->type;
  v->n = M->n;
  v->ncols = M->ncols;
  v->nz = M->nz;
  v->layout = M->layout;
  v->symmetric = M->symmetric;
  const int64_t n = M->n;
  if (M->type == PKRYLOV_PRECOND_JACOBI || (M->type == PKRYLOV_PRECOND_COLUMN && M->symmetric)) {
    v->fp32 = fp32;
    if (fp32) {
      v->dinvf = pkt_devf(m, M->dinv, n);
      v->lmulf = M->type == PKRYLOV_PRECOND_COLUMN ? pkt_devf(m, M->lmul, n) : NULL;
    } else {
      v->dinv = (const double *)pkt_dev(m, M->dinv, sizeof(double) * (size_t)n);
      v->lmul = M->type == PKRYLOV_PRECOND_COLUMN
                    ? (const double *)pkt_dev(m, M->lmul, sizeof(double) * (size_t)n)
                    : NULL;
    }
  } else if (M->type == PKRYLOV_PRECOND_COLUMN) {
    double *h = (double *)calloc(4 * (size_t)n, sizeof(double));
    int32_t *hp = (int32_t *)calloc((size_t)n, sizeof(int32_t));
    if (!h || !hp) {
      free(h), free(hp);
      return 1;
    }
    const double *src[4] = {M->gdl, M->gd, M->gdu, M->gdu2};
    for (int64_t c = 0; c < M->ncols; c++)
      for (int32_t k = 0; k < M->nz; k++) {
        const int64_t cell = c * M->col_stride + (int64_t)k * M->lev_stride, o = c * M->nz + k;
        for (int a = 0; a < 4; a++) h[(size_t)a * (size_t)n + (size_t)cell] = src[a][o];
        hp[cell] = M->ipiv[o];
      }
    v->gdl = (const double *)pkt_dev(m, h, sizeof(double) * (size_t)n);
    v->gd = (const double *)pkt_dev(m, h + n, sizeof(double) * (size_t)n);
    v->gdu = (const double *)pkt_dev(m, h + 2 * n, sizeof(double) * (size_t)n);
    v->gdu2 = (const double *)pkt_dev(m, h + 3 * n, sizeof(double) * (size_t)n);
    v->ipiv = (const int32_t *)pkt_dev(m, hp, sizeof(int32_t) * (size_t)n);
    free(h), free(hp);
  }
  return m->failed;
}

/**
 * 1 when the backend marks the device view of M `onthefly` (pk_cuda_precond_upload's rule, restated here):
 * column preconditioner, symmetric path, k-slow, on a thin-shell or unmasked column-stencil operator,
 * every dinv > 0 and every lmul below the top level nonzero (each column one positive definite segment).
 */
static inline int pkt_onthefly_ok(const struct pkrylov_precond_s *M) {
  const struct pkrylov_operator_s *A = M->A;
  if (M->type != PKRYLOV_PRECOND_COLUMN || !M->symmetric || M->layout != PKRYLOV_LAYOUT_KSLOW) return 0;
  if (!(A->type == PKRYLOV_OPERATOR_THINSHELL || (A->type == PKRYLOV_OPERATOR_STENCIL7 && !A->wet))) return 0;
  for (int64_t i = 0; i < M->n; i++)
    if (!(M->dinv[i] > 0.0)) return 0;
  for (int64_t i = 0; i < M->n - M->ncols; i++)
    if (M->lmul[i] == 0.0) return 0;
  return 1;
}

/**
 * Device view of M (as pkt_upload_pc) with the matrix-free column factors switched on: v->onthefly =
 * onthefly (1: where the kernels find it pays, as the backend sets it; 2: always, the chunked on-chip
 * sweeps; 3: always, the resident thin-shell sweeps) and v->op = the fp64 view of M->A.
 * drop_factors: the stored factors (and their float copies) are left NULL in the view, so a kernel that
 * read them would fault. Returns 0 on success.
 */
static inline int pkt_upload_pc_otf(const struct pkrylov_precond_s *M, int fp32, int onthefly,
                                    int drop_factors, pk_cuda_pc *v, pkt_mem *m) {
  if (pkt_upload_pc(M, fp32, v, m)) return 1;
  if (pkt_upload_op(M->A, 0, 0, &v->op, m)) return 1;
  v->onthefly = onthefly;
  if (drop_factors) v->lmul = v->dinv = NULL, v->lmulf = v->dinvf = NULL;
  return 0;
}

/** Rows of a symmetric matrix under construction (pkt_long_csr). */
typedef struct {
  int32_t **col;
  double **val;
  int32_t *len, *cap;
  int64_t n;
} pkt_sym_rows;

/** Add a_ij = a_ji = v (i != j) unless the entry exists. */
static inline void pkt_sym_add(pkt_sym_rows *S, int32_t i, int32_t j, double v, int check) {
  if (check)
    for (int32_t q = 0; q < S->len[i]; q++)
      if (S->col[i][q] == j) return;
  for (int side = 0; side < 2; side++) {
    const int32_t a = side ? j : i, b = side ? i : j;
    if (S->len[a] == S->cap[a]) {
      S->cap[a] = S->cap[a] ? 2 * S->cap[a] : 8;
      S->col[a] = realloc(S->col[a], sizeof(int32_t) * (size_t)S->cap[a]);
      S->val[a] = realloc(S->val[a], sizeof(double) * (size_t)S->cap[a]);
      if (!S->col[a] || !S->val[a]) exit(1);
    }
    S->col[a][S->len[a]] = b;
    S->val[a][S->len[a]++] = v;
  }
}

/**
 * Random sparse symmetric, diagonally dominant positive definite CSR matrix of odd order n with long rows:
 * row a couples to a + d (mod n) for the offsets d of a fixed random set of `noff` offsets in [1, n/2),
 * each with probability p_a in [0.02, 0.9) (so rows differ in length), coupling values in [-1, -0.1);
 * `nhub` rows couple in addition to about `hublen` random rows each (a few very long rows). Diagonal:
 * 1 + sum of |couplings| of the row. Columns given unsorted. Prints the row-length statistics. Needs
 * pk_test.h (pk_test_rand) included before this header.
 */
static inline int pkt_long_csr(pkrylov_context ctx, int64_t n, int noff, int nhub, int hublen, uint64_t seed,
                         pkrylov_operator *A) {
  pkt_sym_rows S = {calloc((size_t)n, sizeof(int32_t *)), calloc((size_t)n, sizeof(double *)),
                calloc((size_t)n, sizeof(int32_t)), calloc((size_t)n, sizeof(int32_t)), n};
  int32_t *off = malloc(sizeof(int32_t) * (size_t)(noff ? noff : 1));
  if (!S.col || !S.val || !S.len || !S.cap || !off) exit(1);
  uint64_t s = seed;
  for (int k = 0; k < noff; k++) { /* distinct offsets in [1, (n-1)/2]: every pair {a, b} at most once */
    int dup;
    do {
      off[k] = 1 + (int32_t)((pk_test_rand(&s) + 1.0) * 0.5 * (double)((n - 1) / 2 - 1));
      dup = 0;
      for (int q = 0; q < k; q++) dup |= off[q] == off[k];
    } while (dup);
  }
  for (int64_t a = 0; a < n; a++) {
    const double pa = 0.02 + 0.44 * (pk_test_rand(&s) + 1.0);
    for (int k = 0; k < noff; k++)
      if (0.5 * (pk_test_rand(&s) + 1.0) < pa)
        pkt_sym_add(&S, (int32_t)a, (int32_t)((a + off[k]) % n), -0.55 + 0.45 * pk_test_rand(&s), 0);
  }
  for (int h = 0; h < nhub; h++) {
    const int32_t a = (int32_t)((int64_t)(h + 1) * n / (nhub + 1));
    for (int t = 0; t < hublen; t++) {
      int32_t b = (int32_t)((pk_test_rand(&s) + 1.0) * 0.5 * (double)n);
      if (b >= n) b = (int32_t)n - 1;
      if (b != a) pkt_sym_add(&S, a, b, -0.55 + 0.45 * pk_test_rand(&s), 1);
    }
  }
  int64_t nnz = n, minr = INT64_MAX, maxr = 0;
  for (int64_t a = 0; a < n; a++) {
    nnz += S.len[a];
    if (S.len[a] + 1 < minr) minr = S.len[a] + 1;
    if (S.len[a] + 1 > maxr) maxr = S.len[a] + 1;
  }
  int32_t *rp = malloc(sizeof(int32_t) * (size_t)(n + 1)), *ci = malloc(sizeof(int32_t) * (size_t)nnz);
  double *v = malloc(sizeof(double) * (size_t)nnz);
  if (!rp || !ci || !v) exit(1);
  rp[0] = 0;
  int64_t pos = 0;
  for (int64_t a = 0; a < n; a++) {
    double diag = 1.0;
    for (int32_t q = 0; q < S.len[a]; q++) {
      ci[pos] = S.col[a][q];
      v[pos++] = S.val[a][q];
      diag += fabs(S.val[a][q]);
    }
    ci[pos] = (int32_t)a;
    v[pos++] = diag;
    rp[a + 1] = (int32_t)pos;
    free(S.col[a]), free(S.val[a]);
  }
  printf("long-row CSR n = %lld: nnz %lld, rows %lld .. %lld entries, mean %.1f\n", (long long)n,
         (long long)nnz, (long long)minr, (long long)maxr, (double)nnz / (double)n);
  int rc = pkrylov_operator_create_csr(ctx, (int32_t)n, 0, rp, ci, v, A);
  free(rp), free(ci), free(v), free(off);
  free(S.col), free(S.val), free(S.len), free(S.cap);
  return rc;
}

#endif /* PK_CUDA_TEST_H */

/**
 * @file t700-cuda-kernels.c
 * @brief The CUDA launchers (pk_cuda_op.cu, pk_cuda_precond.cu, pk_cuda_steps.cu, pk_cuda_vec.cu) against
 *        their CPU twins (white box, links the internal static library).
 *
 * Operators and preconditioners are built on the CPU through the public API and uploaded here
 * (pk_cuda_test.h, plain cudaMemcpy, per-cell re-layout of the general column factors, float copies for
 * the fp32 views with the double pointers left NULL). Every launcher gets random inputs of odd sizes that
 * are not multiples of the block size, outputs poisoned with NaN, and is compared with the CPU function
 * that the solvers use on the host (pk_op_apply_all, pk_pc_apply_all, pk_cpu_residual, pk_cpu_dot,
 * pk_cpu_cg_precond_step, pk_cpu_cg_operator_step, pk_cpu_pipecg_step) or a plain loop written here:
 *  - vectors bitwise equal (the kernels compute every cell with the CPU's expressions, -fmad=false);
 *  - summed partials within 1e-13 relative to the sum of the magnitudes of the terms (only the order of
 *    the global sum differs between the two backends; for sums with terms of both signs, e.g. (w, u),
 *    the magnitude sum is the scale of the rounding error, not the possibly small sum itself).
 * fp32 views are checked against the CPU run on the coefficients / factors rounded to float in place.
 * The scalar steps (one-block and folded into the steps) are checked against the scalar recurrences of
 * solver.c written again here, on partial slots summed on the host in the order pk_cuda.h documents: the
 * device state and the history bitwise, and the vectors of the folded steps bitwise those of the CPU
 * steps run with the reference scalars.
 * Every case returns PK_SKIP (77) when no CUDA device is visible.
 */
#include <math.h>
#include <string.h>

#include "pk_test.h"
#include "pk_cuda_test.h"

/** Wait for the device and check that no kernel failed. */
#define SYNC() CK(cudaDeviceSynchronize())

/* ---- host and device vectors ------------------------------------------------------------------- */

/** Host vector of n doubles (aborts the program on failure: tests only). */
static double *hnew(int64_t n) {
  double *h = malloc(sizeof(double) * (size_t)(n ? n : 1));
  if (!h) {
    fprintf(stderr, "out of host memory\n");
    exit(PK_FAIL);
  }
  return h;
}

/** Host copy. */
static double *hdup(const double *h, int64_t n) {
  double *c = hnew(n);
  memcpy(c, h, sizeof(double) * (size_t)n);
  return c;
}

/** Random host vector in [-1, 1). */
static double *hrand(int64_t n, uint64_t seed) {
  double *h = hnew(n);
  uint64_t s = seed * 0x9e3779b97f4a7c15ULL + 12345;
  for (int64_t i = 0; i < n; i++) h[i] = pk_test_rand(&s);
  return h;
}

/** Device vector of n doubles poisoned with NaN (all bits set). */
static double *dnew(int64_t n) {
  double *d = NULL;
  if (cudaMalloc((void **)&d, sizeof(double) * (size_t)(n ? n : 1)) != cudaSuccess) {
    fprintf(stderr, "out of device memory\n");
    exit(PK_FAIL);
  }
  cudaMemset(d, 0xff, sizeof(double) * (size_t)(n ? n : 1));
  return d;
}

/** Device copy of a host vector. */
static double *dup_dev(const double *h, int64_t n) {
  double *d = dnew(n);
  cudaMemcpy(d, h, sizeof(double) * (size_t)n, cudaMemcpyHostToDevice);
  return d;
}

/** Host copy of a device vector (malloc'ed). */
static double *dget(const double *d, int64_t n) {
  double *h = hnew(n);
  cudaMemcpy(h, d, sizeof(double) * (size_t)n, cudaMemcpyDeviceToHost);
  return h;
}

/** 1 when every value of the device vector still has the NaN poison bits. */
static int still_poisoned(const double *d, int64_t n) {
  double *h = dget(d, n);
  uint64_t poison;
  memset(&poison, 0xff, sizeof poison);
  int ok = 1;
  for (int64_t i = 0; i < n && ok; i++) ok = memcmp(&h[i], &poison, sizeof poison) == 0;
  free(h);
  return ok;
}

/** |gpu - cpu| <= 1e-13 max(scale, |cpu|), scale = sum of the magnitudes of the terms. */
static void near_sum(const char *tag, const char *what, double gpu, double cpu, double scale) {
  const double tol = 1e-13 * fmax(scale, fabs(cpu));
  if (!(fabs(gpu - cpu) <= tol)) {
    fprintf(stderr, "%s: %s gpu %.17g cpu %.17g (diff %.3g, tol %.3g)\n", tag, what, gpu, cpu,
            fabs(gpu - cpu), tol);
    pk_test_failures++;
  }
}

/** sum |a_i b_i| */
static double abs_dot(int64_t n, const double *a, const double *b) {
  double s = 0;
  for (int64_t i = 0; i < n; i++) s += fabs(a[i] * b[i]);
  return s;
}

/**
 * Row scale of A x for a CSR view on the vector kernel (v->csr_lanes > 1): rs[i] = sum_j |a_ij x_j|, the
 * scale of the rounding difference between the GPU's and the CPU's order of a row sum. NULL otherwise (the
 * thread-per-row and grid kernels: bitwise comparisons).
 */
static double *row_scale(const struct pkrylov_operator_s *A, const pk_cuda_op *v, const double *x) {
  if (A->type != PKRYLOV_OPERATOR_CSR || v->csr_lanes <= 1) return NULL;
  double *rs = malloc(sizeof(double) * (size_t)(A->n ? A->n : 1));
  if (!rs) exit(PK_FAIL);
  for (int64_t i = 0; i < A->n; i++) {
    double t = 0.0;
    for (int64_t p = A->csr.rowptr[i]; p < A->csr.rowptr[i + 1]; p++) {
      const int64_t j = A->csr.colind32 ? A->csr.colind32[p] : A->csr.colind64[p];
      t += fabs(A->csr.values[p] * x[j]);
    }
    rs[i] = t;
  }
  return rs;
}

/**
 * Device vector d against host vector h: bitwise when rs is NULL, else |gpu - cpu| <= 1e-13 (f rs[i] +
 * |cpu|) (a value computed from a row sum of the vector kernel; f scales rs for values that take the row
 * sum times a factor, e.g. w -= alpha z).
 */
static int dev_close(const char *tag, const char *what, int64_t n, const double *d, const double *h,
                     const double *rs, double f) {
  if (!rs) return pkt_dev_same(tag, what, n, d, h);
  double *g = dget(d, n);
  int64_t bad = 0, first = -1;
  for (int64_t i = 0; i < n; i++)
    if (!(fabs(g[i] - h[i]) <= 1e-13 * (f * rs[i] + fabs(h[i])))) {
      if (first < 0) first = i;
      bad++;
    }
  if (bad) {
    fprintf(stderr, "%s: %s differs beyond 1e-13 of the row scale in %lld of %lld values; first at %lld: gpu "
            "%.17g cpu %.17g (row scale %.3g)\n", tag, what, (long long)bad, (long long)n, (long long)first,
            g[first], h[first], rs[first]);
    pk_test_failures++;
  }
  free(g);
  return bad == 0;
}

/** sum |a_i| f rs_i (0 when rs is NULL): what a dot product with a row-sum vector may differ by, scaled. */
static double abs_dot_rs(int64_t n, const double *a, const double *rs, double f) {
  if (!rs) return 0.0;
  double s = 0;
  for (int64_t i = 0; i < n; i++) s += fabs(a[i]) * f * rs[i];
  return s;
}

/** out[0..nv) = pk_cuda_sum_partials of the device slots. */
static void gpu_sums(const double *part, int64_t nb, int nv, double *out) {
  double *d = dnew(nv);
  CK(pk_cuda_sum_partials(NULL, part, nb, nv, d));
  SYNC();
  cudaMemcpy(out, d, sizeof(double) * (size_t)nv, cudaMemcpyDeviceToHost);
  cudaFree(d);
}

/** Device solver state with the given scalars and status. */
static pk_cuda_state *dstate(double alpha, double beta, int32_t status) {
  pk_cuda_state h;
  memset(&h, 0, sizeof h);
  h.alpha = alpha;
  h.beta = beta;
  h.status = status;
  h.breakdown_it = -1;
  pk_cuda_state *d = NULL;
  if (cudaMalloc((void **)&d, sizeof h) != cudaSuccess) exit(PK_FAIL);
  cudaMemcpy(d, &h, sizeof h, cudaMemcpyHostToDevice);
  return d;
}

/** Values per partial-sum slot the driver allocates (pipelined CG's update writes PK_RR_NV). */
#define PART_NV 8

/** Partial-sum scratch for op/pc (PART_NV values per slot, as the driver allocates), poisoned. */
static double *dpart(const pk_cuda_op *op, const pk_cuda_pc *pc, int64_t *cap) {
  *cap = pk_cuda_partials_needed(op, pc);
  return dnew(PART_NV * *cap);
}

/** 1 <= nb <= cap */
static void check_nb(const char *tag, int64_t nb, int64_t cap) {
  PK_EXPECT(nb >= 1 && nb <= cap, "%s: nblocks %lld outside [1, partials_needed = %lld]", tag, (long long)nb,
            (long long)cap);
}

/* ---- host objects -------------------------------------------------------------------------------- */

/**
 * Random 7-point stencil: couplings in [-1, -0.1), aC = 6.5 + U[0, 1) (symmetric positive definite),
 * times sign (-1: negative definite, as ocean models store it). masked: about 1 cell in 6 dry.
 */
static int make_stencil(pkrylov_context ctx, int nx, int ny, int nz, int masked, double sign, uint64_t seed,
                        pkrylov_operator *A) {
  const int64_t n = (int64_t)nx * ny * nz;
  double *aW = hnew(n), *aS = hnew(n), *aV = hnew(n), *aC = hnew(n);
  int32_t *mask = masked ? malloc(sizeof(int32_t) * (size_t)n) : NULL;
  uint64_t s = seed;
  for (int64_t i = 0; i < n; i++) {
    aW[i] = sign * (-0.55 + 0.45 * pk_test_rand(&s));
    aS[i] = sign * (-0.55 + 0.45 * pk_test_rand(&s));
    aV[i] = sign * (-0.55 + 0.45 * pk_test_rand(&s));
    aC[i] = sign * (7.0 + 0.5 * pk_test_rand(&s));
    if (mask) mask[i] = pk_test_rand(&s) > -2.0 / 3.0;
  }
  int rc = pkrylov_operator_create_stencil7(ctx, nx, ny, nz, aW, aS, aV, aC, mask, A);
  free(aW), free(aS), free(aV), free(aC), free(mask);
  return rc;
}

/** Thin-shell model problem on nx x ny x nz (geometry gnomonic or uniform). */
static int make_thinshell(pkrylov_context ctx, int nx, int ny, int nz, int32_t geometry,
                          pkrylov_operator *A) {
  pkrylov_thinshell_params p;
  int rc = pkrylov_thinshell_params_default(nx, ny, nz, &p);
  if (rc) return rc;
  p.geometry = geometry;
  return pkrylov_operator_create_thinshell(ctx, &p, A);
}

/**
 * Random CSR on n = ncols * nz cells with vertical columns in `layout`: diagonal d, the couplings to the
 * levels above/below (sym: one value e shared by both rows, |e| < 1, d in [3, 5): the symmetric column
 * path; else lo in [-4, 4), up in [-1, 1), d in [1, 3): the general path, with pivoting), plus `extra`
 * random off-column entries per row. Rows are given unsorted (the library sorts them).
 */
static int make_csr(pkrylov_context ctx, int64_t ncols, int nz, int32_t layout, int sym, int extra,
                    uint64_t seed, pkrylov_operator *A) {
  const int64_t n = ncols * nz, maxr = 3 + extra;
  int32_t *rp = malloc(sizeof(int32_t) * (size_t)(n + 1));
  int32_t *ci = malloc(sizeof(int32_t) * (size_t)(n * maxr));
  double *v = hnew(n * maxr);
  double *ev = hrand(n, seed + 7); /* coupling between a cell and the level above (sym) */
  if (!rp || !ci) exit(PK_FAIL);
  const int64_t cs = layout == PKRYLOV_LAYOUT_KSLOW ? 1 : nz, ls = layout == PKRYLOV_LAYOUT_KSLOW ? ncols : 1;
  uint64_t s = seed;
  int64_t pos = 0;
  rp[0] = 0;
  for (int64_t row = 0; row < n; row++) {
    const int64_t c = layout == PKRYLOV_LAYOUT_KSLOW ? row % ncols : row / nz;
    const int k = (int)(layout == PKRYLOV_LAYOUT_KSLOW ? row / ncols : row % nz);
    const int64_t p0 = pos;
    /* extra entries first (unsorted), then the column couplings, then the diagonal */
    for (int e = 0; e < extra; e++) {
      int64_t col = (int64_t)((pk_test_rand(&s) + 1.0) * 0.5 * (double)n);
      if (col >= n) col = n - 1;
      int dup = col == row || (k > 0 && col == c * cs + (k - 1) * ls) ||
                (k < nz - 1 && col == c * cs + (k + 1) * ls);
      for (int64_t q = p0; q < pos && !dup; q++) dup = ci[q] == col;
      if (dup) continue;
      ci[pos] = (int32_t)col;
      v[pos++] = 0.3 * pk_test_rand(&s);
    }
    if (k < nz - 1) {
      ci[pos] = (int32_t)(c * cs + (k + 1) * ls);
      v[pos++] = sym ? 0.9 * ev[row] : pk_test_rand(&s);
    }
    if (k > 0) {
      ci[pos] = (int32_t)(c * cs + (k - 1) * ls);
      v[pos++] = sym ? 0.9 * ev[c * cs + (k - 1) * ls] : 4.0 * pk_test_rand(&s);
    }
    ci[pos] = (int32_t)row;
    v[pos++] = sym ? 4.0 + pk_test_rand(&s) : 2.0 + pk_test_rand(&s);
    rp[row + 1] = (int32_t)pos;
  }
  int rc = pkrylov_operator_create_csr(ctx, (int32_t)n, 0, rp, ci, v, A);
  free(rp), free(ci), free(v), free(ev);
  return rc;
}

/** Round the coefficients of a host operator to float in place (CPU twin of an fp32 view). */
static void round_op(struct pkrylov_operator_s *A) {
  if (A->type == PKRYLOV_OPERATOR_CSR) {
    for (int64_t p = 0; p < A->nnz; p++) A->csr.values[p] = (double)(float)A->csr.values[p];
  } else if (A->type == PKRYLOV_OPERATOR_STENCIL7) {
    double *arr[4] = {A->st.aW, A->st.aS, A->st.aV, A->st.aC};
    for (int a = 0; a < 4; a++)
      for (int64_t i = 0; i < A->n; i++) arr[a][i] = (double)(float)arr[a][i];
  }
}

/** Round the factors of a host preconditioner (Jacobi / column symmetric) to float in place. */
static void round_pc(struct pkrylov_precond_s *M) {
  for (int64_t i = 0; i < M->n; i++) {
    if (M->dinv) M->dinv[i] = (double)(float)M->dinv[i];
    if (M->lmul) M->lmul[i] = (double)(float)M->lmul[i];
  }
}

/* ---- checks of one launcher on one object ------------------------------------------------------- */

/** y = A x. */
static void check_apply(const char *tag, const struct pkrylov_operator_s *A, const pk_cuda_op *v,
                        uint64_t seed) {
  const int64_t n = A->n;
  double *x = hrand(n, seed), *y = hnew(n);
  pk_op_apply_all(A, x, y);
  double *dx = dup_dev(x, n), *dy = dnew(n);
  CK(pk_cuda_op_apply(NULL, v, dx, dy));
  SYNC();
  double *rs = row_scale(A, v, x);
  dev_close(tag, "A x", n, dy, y, rs, 1.0);
  pkt_dev_same(tag, "x (input)", n, dx, x);
  if (rs) { /* the vector kernel's documented order (pk_cuda.h), written again here: bitwise */
    const int L = v->csr_lanes;
    double lane[32];
    for (int64_t i = 0; i < n; i++) {
      for (int l = 0; l < L; l++) {
        lane[l] = 0.0;
        for (int64_t p = A->csr.rowptr[i] + l; p < A->csr.rowptr[i + 1]; p += L) {
          const int64_t j = A->csr.colind32 ? A->csr.colind32[p] : A->csr.colind64[p];
          lane[l] += (v->fp32 ? (double)(float)A->csr.values[p] : A->csr.values[p]) * x[j];
        }
      }
      for (int o = L / 2; o > 0; o >>= 1)
        for (int l = 0; l < o; l++) lane[l] += lane[l + o];
      y[i] = lane[0];
    }
    pkt_dev_same(tag, "A x (in the order of the vector kernel)", n, dy, y);
  }
  cudaFree(dx), cudaFree(dy);
  free(x), free(y), free(rs);
}

/** r = b - A x (0 at dry cells), (r, r). */
static void check_residual(const char *tag, const struct pkrylov_operator_s *A, const pk_cuda_op *v,
                           uint64_t seed) {
  const int64_t n = A->n;
  double *b = hrand(n, seed), *x = hrand(n, seed + 1), *r = hnew(n);
  double *cpart = hnew(pk_cpu_scratch_size(n, NULL)), rr;
  pk_cpu_residual(A, b, x, r, cpart, &rr, NULL);
  int64_t cap, nb = -1;
  double *db = dup_dev(b, n), *dx = dup_dev(x, n), *dr = dnew(n), *part = dpart(v, NULL, &cap);
  CK(pk_cuda_residual(NULL, v, db, dx, dr, part, &nb));
  SYNC();
  check_nb(tag, nb, cap);
  double *rs = row_scale(A, v, x);
  dev_close(tag, "r = b - A x", n, dr, r, rs, 1.0);
  double *g = dget(dr, n);
  if (A->wet)
    for (int64_t i = 0; i < n; i++)
      if (!A->wet[i] && g[i] != 0.0) {
        PK_EXPECT(0, "%s: r[%lld] = %g at a dry cell", tag, (long long)i, g[i]);
        break;
      }
  double s;
  gpu_sums(part, nb, 1, &s);
  near_sum(tag, "(r, r)", s, rr, rr + abs_dot_rs(n, r, rs, 2.0));
  cudaFree(db), cudaFree(dx), cudaFree(dr), cudaFree(part);
  free(b), free(x), free(r), free(cpart), free(g), free(rs);
}

/** CG operator loop; init = 1: alpha = beta = 0 and p, q, x not read (poisoned / untouched here). */
static void check_cg_op(const char *tag, const struct pkrylov_operator_s *A, const pk_cuda_op *v, int init,
                        uint64_t seed) {
  const int64_t n = A->n;
  const double alpha = init ? 0.0 : 0.3721, beta = init ? 0.0 : -0.6143;
  double *x = hrand(n, seed), *p = hrand(n, seed + 1), *z = hrand(n, seed + 2), *q = hrand(n, seed + 3);
  double *x0 = hdup(x, n), *p0 = hdup(p, n), *z0 = hdup(z, n), *q0 = hdup(q, n);
  if (init) memset(p, 0, sizeof(double) * (size_t)n), memset(q, 0, sizeof(double) * (size_t)n);
  double *cpart = hnew(pk_cpu_scratch_size(n, NULL)), pq;
  pk_cpu_cg_operator_step(A, alpha, beta, x, p, z, q, cpart, &pq, NULL);
  int64_t cap, nb = -1;
  double *dx = dup_dev(x0, n), *dz = dup_dev(z0, n), *part = dpart(v, NULL, &cap);
  double *dp = init ? dnew(n) : dup_dev(p0, n), *dq = init ? dnew(n) : dup_dev(q0, n);
  /* init must ignore the state's scalars */
  pk_cuda_state *st = init ? dstate(1e300, -7.0, PK_ST_RUNNING) : dstate(alpha, beta, PK_ST_RUNNING);
  CK(pk_cuda_cg_operator_step(NULL, v, st, init, dx, dp, dz, dq, part, &nb, 0));
  SYNC();
  check_nb(tag, nb, cap);
  double *rs = row_scale(A, v, z0);
  pkt_dev_same(tag, "x", n, dx, x);
  pkt_dev_same(tag, "p", n, dp, p);
  dev_close(tag, "q", n, dq, q, rs, 1.0);
  pkt_dev_same(tag, "z (input)", n, dz, z0);
  double s;
  gpu_sums(part, nb, 1, &s);
  near_sum(tag, "(p, q)", s, pq, abs_dot(n, p, q) + abs_dot_rs(n, p, rs, 1.0));
  cudaFree(dx), cudaFree(dp), cudaFree(dz), cudaFree(dq), cudaFree(part), cudaFree(st);
  free(x), free(p), free(z), free(q), free(x0), free(p0), free(z0), free(q0), free(cpart), free(rs);
}

/** Pipelined CG fused step. */
static void check_pipe(const char *tag, const struct pkrylov_operator_s *A, const pk_cuda_op *v,
                       uint64_t seed) {
  const int64_t n = A->n;
  const double alpha = 0.5813, beta = 0.2719;
  double *h[9], *d[9], *d0[9]; /* m z q s p x r u w (d0: a second device copy) */
  for (int i = 0; i < 9; i++) {
    h[i] = hrand(n, seed + (uint64_t)i);
    d[i] = dup_dev(h[i], n);
    d0[i] = dup_dev(h[i], n);
  }
  double *rs = row_scale(A, v, h[0]); /* before h is updated: A m */
  double *cpart = hnew(pk_cpu_scratch_size(n, NULL)), out[PK_RR_NV];
  pk_cpu_pipecg_step(A, NULL, alpha, beta, h[0], h[1], h[2], h[3], h[4], h[5], h[6], h[7], h[8], PK_RR_NV,
                     cpart, out, NULL);
  int64_t cap, nb = -1;
  double *part = dpart(v, NULL, &cap);
  pk_cuda_state *st = dstate(alpha, beta, PK_ST_RUNNING);
  /* without the norms (replacement off or at fixed intervals) first, on copies: the same vectors and the
     same three sums, bitwise, as the launch with them below */
  double g0[PK_RR_NV_BASE];
  int64_t nb0 = -1;
  double *part0 = dpart(v, NULL, &cap);
  pk_cuda_state *st0 = dstate(alpha, beta, PK_ST_RUNNING);
  CK(pk_cuda_pipecg_step(NULL, v, st0, d0[0], d0[1], d0[2], d0[3], d0[4], d0[5], d0[6], d0[7], d0[8], part0,
                         &nb0, 0));
  CK(pk_cuda_pipecg_step(NULL, v, st, d[0], d[1], d[2], d[3], d[4], d[5], d[6], d[7], d[8], part, &nb, 1));
  SYNC();
  check_nb(tag, nb, cap);
  PK_EXPECT(nb0 == nb, "%s: %lld slots without the norms, %lld with", tag, (long long)nb0, (long long)nb);
  {
    gpu_sums(part0, nb0, PK_RR_NV_BASE, g0); /* without the norms: slots of the three dots */
    for (int i = 0; i < 9; i++) {
      double *a = hnew(n), *b = hnew(n);
      cudaMemcpy(a, d0[i], sizeof(double) * (size_t)n, cudaMemcpyDeviceToHost);
      cudaMemcpy(b, d[i], sizeof(double) * (size_t)n, cudaMemcpyDeviceToHost);
      PK_EXPECT(memcmp(a, b, sizeof(double) * (size_t)n) == 0, "%s: vector %d differs without the norms", tag, i);
      free(a), free(b);
      cudaFree(d0[i]);
    }
    cudaFree(part0), cudaFree(st0);
  }
  static const char *names[9] = {"m (input)", "z", "q", "s", "p", "x", "r", "u", "w"};
  /* z = A m + beta z and w -= alpha z take the row sums; the others do not (bitwise) */
  for (int i = 0; i < 9; i++)
    dev_close(tag, names[i], n, d[i], h[i], i == 1 || i == 8 ? rs : NULL, i == 8 ? fabs(alpha) : 1.0);
  double g[PK_RR_NV];
  gpu_sums(part, nb, PK_RR_NV, g);
  near_sum(tag, "(r, u)", g[0], out[0], abs_dot(n, h[6], h[7]));
  near_sum(tag, "(w, u)", g[1], out[1], abs_dot(n, h[8], h[7]) + abs_dot_rs(n, h[7], rs, fabs(alpha)));
  near_sum(tag, "(r, r)", g[2], out[2], out[2]);
  for (int j = 0; j < PK_RR_NV_BASE; j++)
    PK_EXPECT(g0[j] == g[j], "%s: sum %d without the norms %.17g, with %.17g", tag, j, g0[j], g[j]);
  /* the automatic residual replacement's norms (x, x), (p, p), (u, u), (q, q) */
  near_sum(tag, "(x, x)", g[3], out[3], out[3]);
  near_sum(tag, "(p, p)", g[4], out[4], out[4]);
  near_sum(tag, "(u, u)", g[5], out[5], out[5]);
  near_sum(tag, "(q, q)", g[6], out[6], out[6]);
  for (int i = 0; i < 9; i++) cudaFree(d[i]), free(h[i]);
  cudaFree(part), cudaFree(st);
  free(cpart), free(rs);
}

/** z = M^-1 r, with st NULL and with a running state. */
static void check_pc_apply(const char *tag, const struct pkrylov_precond_s *M, const pk_cuda_pc *v,
                           uint64_t seed) {
  const int64_t n = M->n;
  double *r = hrand(n, seed), *z = hnew(n);
  pk_pc_apply_all(M, r, z);
  double *dr = dup_dev(r, n);
  pk_cuda_state *st = dstate(1.0, 1.0, PK_ST_RUNNING);
  for (int with_st = 0; with_st < 2; with_st++) {
    double *dz = dnew(n);
    CK(pk_cuda_pc_apply(NULL, v, with_st ? st : NULL, dr, dz));
    SYNC();
    pkt_dev_same(tag, with_st ? "z = M^-1 r (state running)" : "z = M^-1 r", n, dz, z);
    cudaFree(dz);
  }
  pkt_dev_same(tag, "r (input)", n, dr, r);
  cudaFree(dr), cudaFree(st);
  free(r), free(z);
}

/** CG preconditioner loop; alpha_zero: alpha = 0, q not read (poisoned), r unchanged. M NULL: none. */
static void check_cg_pc(const char *tag, pkrylov_context ctx, const struct pkrylov_precond_s *M,
                        const pk_cuda_pc *v, int64_t n, int alpha_zero, uint64_t seed) {
  const double alpha = alpha_zero ? 0.0 : 0.7319;
  double *r = hrand(n, seed), *q = hrand(n, seed + 1), *z = hnew(n);
  double *r0 = hdup(r, n), *q0 = hdup(q, n);
  if (alpha_zero) memset(q, 0, sizeof(double) * (size_t)n);
  double *cpart = hnew(pk_cpu_scratch_size(n, (struct pkrylov_precond_s *)M)), out[2];
  pk_cpu_cg_precond_step(ctx, M, n, alpha, r, q, z, cpart, out, NULL);
  int64_t cap = pk_cuda_partials_needed(NULL, v), nb = -1;
  if (!v) {
    pk_cuda_op o; /* no view: the size comes from n */
    memset(&o, 0, sizeof o);
    o.type = PKRYLOV_OPERATOR_CSR;
    o.n = n;
    cap = pk_cuda_partials_needed(&o, NULL);
  }
  double *part = dnew(PART_NV * cap);
  double *dr = dup_dev(r0, n), *dq = alpha_zero ? dnew(n) : dup_dev(q0, n), *dz = dnew(n);
  pk_cuda_state *st = dstate(alpha_zero ? 1e300 : alpha, 3.0, PK_ST_RUNNING);
  CK(pk_cuda_cg_precond_step(NULL, v, st, alpha_zero, n, dr, dq, dz, part, &nb));
  SYNC();
  check_nb(tag, nb, cap);
  pkt_dev_same(tag, "r", n, dr, r);
  pkt_dev_same(tag, "z", n, dz, z);
  if (alpha_zero)
    PK_EXPECT(still_poisoned(dq, n), "%s: q was written", tag);
  else
    pkt_dev_same(tag, "q (input)", n, dq, q0);
  double g[2];
  gpu_sums(part, nb, 2, g);
  near_sum(tag, "(r, z)", g[0], out[0], abs_dot(n, r, z));
  near_sum(tag, "(r, r)", g[1], out[1], out[1]);
  cudaFree(dr), cudaFree(dq), cudaFree(dz), cudaFree(part), cudaFree(st);
  free(r), free(q), free(z), free(r0), free(q0), free(cpart);
}

/** CSR lanes per row that op_suite and fold_suite set in their views (0: the thread-per-row kernel). */
static int g_lanes = 0;

/** Every operator launcher on A, fp64 then (except thin shell) fp32 (A rounded in place after that). */
static void op_suite(const char *name, struct pkrylov_operator_s *A, int col64, uint64_t seed) {
  for (int fp32 = 0; fp32 < 2; fp32++) {
    if (fp32 && A->type == PKRYLOV_OPERATOR_THINSHELL) break;
    char tag[160];
    snprintf(tag, sizeof tag, "%s %s", name, fp32 ? "fp32" : "fp64");
    pkt_mem mem = {0};
    pk_cuda_op v;
    PK_EXPECT(pkt_upload_op(A, fp32, col64, &v, &mem) == 0, "%s: upload failed", tag);
    if (A->type == PKRYLOV_OPERATOR_CSR) v.csr_lanes = g_lanes;
    if (fp32) round_op(A);
    check_apply(tag, A, &v, seed);
    check_residual(tag, A, &v, seed + 10);
    check_cg_op(tag, A, &v, 0, seed + 20);
    check_cg_op(tag, A, &v, 1, seed + 30);
    check_pipe(tag, A, &v, seed + 40);
    pkt_free(&mem);
  }
}

/** Preconditioner launchers on M (fp64, then fp32 where the path has float factors: M rounded after). */
static void pc_suite(const char *name, pkrylov_context ctx, struct pkrylov_precond_s *M, uint64_t seed) {
  for (int fp32 = 0; fp32 < 2; fp32++) {
    if (fp32 && (M->type == PKRYLOV_PRECOND_NONE || (M->type == PKRYLOV_PRECOND_COLUMN && !M->symmetric)))
      break;
    char tag[160];
    snprintf(tag, sizeof tag, "%s %s", name, fp32 ? "fp32" : "fp64");
    pkt_mem mem = {0};
    pk_cuda_pc v;
    PK_EXPECT(pkt_upload_pc(M, fp32, &v, &mem) == 0, "%s: upload failed", tag);
    if (fp32) round_pc(M);
    check_pc_apply(tag, M, &v, seed);
    check_cg_pc(tag, ctx, M, &v, M->n, 0, seed + 10);
    check_cg_pc(tag, ctx, M, &v, M->n, 1, seed + 20);
    pkt_free(&mem);
  }
}

/** Column preconditioner on A (levels 0 = the operator's), the expected path, then pc_suite. */
static int column_suite(const char *name, pkrylov_context ctx, pkrylov_operator A, int32_t levels,
                        int32_t layout, int expect_sym, uint64_t seed) {
  pkrylov_precond M;
  PK_REQUIRE_OK(ctx, pkrylov_precond_create(ctx, A, PKRYLOV_PRECOND_COLUMN, levels, layout, &M));
  PK_EXPECT(M->symmetric == expect_sym, "%s: symmetric = %d, expected %d", name, M->symmetric, expect_sym);
  if (!M->symmetric) { /* the test is only meaningful with row interchanges somewhere */
    int64_t swaps = 0;
    for (int64_t c = 0; c < M->ncols; c++)
      for (int k = 0; k + 1 < M->nz; k++) swaps += M->ipiv[c * M->nz + k] != k + 1;
    PK_EXPECT(swaps > 0, "%s: no pivoting in the general factors", name);
  }
  pc_suite(name, ctx, M, seed);
  pkrylov_precond_destroy(&M);
  return PK_PASS;
}

/* ---- scalar steps and folded launchers ------------------------------------------------------------ */

/** Sums of nv values over nb host slots in the order pk_cuda.h documents (256 lanes, then the tree). */
static void ref_sums(const double *part, int64_t nb, int nv, double *out) {
  for (int j = 0; j < nv; j++) {
    double lane[256];
    for (int t = 0; t < 256; t++) {
      lane[t] = 0.0;
      for (int64_t b = t; b < nb; b += 256) lane[t] += part[b * nv + j];
    }
    for (int o = 128; o > 0; o >>= 1)
      for (int t = 0; t < o; t++) lane[t] += lane[t + o];
    out[j] = lane[0];
  }
}

/** The sign rule of solver.c (pk_sign_ok), written again: finite, nonzero, the sign of the first value. */
static int ref_sign(double v, double *sign) {
  if (!isfinite(v) || v == 0.0) return 0;
  const double sg = v > 0 ? 1.0 : -1.0;
  if (*sign == 0.0) *sign = sg;
  return sg == *sign;
}

/** cg.c's CG (pk_cg_solve) after the operator loop: (p, A p) = sigma. */
static void ref_cg_sigma(pk_cuda_state *s, double sigma) {
  if (s->status != PK_ST_RUNNING) return;
  if (!ref_sign(sigma, &s->sigma_sign)) {
    s->status = isfinite(sigma) ? PK_ST_BREAKDOWN_MATRIX : PK_ST_NAN;
    s->breakdown_it = s->it + 1;
    return;
  }
  s->sigma = sigma;
  s->alpha = s->rho / sigma;
}

/** cg.c's CG (pk_cg_solve) after the preconditioner loop ((r, z) = rz, (r, r) = rr); init: the restart's first loop. */
static void ref_cg_rho(pk_cuda_state *s, double rz, double rr, double *hist, int init) {
  if (s->status != PK_ST_RUNNING) return;
  if (!isfinite(rz) || !isfinite(rr)) {
    s->status = PK_ST_NAN;
    s->breakdown_it = s->it + 1;
    return;
  }
  const double rnorm = sqrt(rr);
  s->rnorm = rnorm;
  s->rr = rr; /* the sum as the stop rule tests it (min_on, recur 0 here: t713 tests those) */
  if (init) {
    s->rho = rz;
    if (s->it == 0) {
      hist[0] = rnorm;
      if (rnorm <= s->tol || s->maxit == 0) {
        s->status = rnorm <= s->tol ? PK_ST_CONVERGED : PK_ST_MAXIT;
        return;
      }
    }
    if (!ref_sign(rz, &s->rho_sign)) s->status = PK_ST_BREAKDOWN_PRECOND, s->breakdown_it = s->it + 1;
    return;
  }
  s->it++;
  hist[s->it] = rnorm;
  if (rnorm <= s->tol) {
    s->status = PK_ST_CONVERGED;
  } else if (!ref_sign(rz, &s->rho_sign)) {
    s->status = PK_ST_BREAKDOWN_PRECOND;
    s->breakdown_it = s->it + 1;
  } else if (s->it >= s->maxit) {
    s->status = PK_ST_MAXIT;
  } else {
    s->beta = rz / s->rho;
    s->rho = rz;
  }
}

/**
 * pk_pipecg_solve's scalar part (cg.c) ((r, u) = g, (w, u) = dl, (r, r) = rr) up to the fused step; norms: the sums
 * (x, x), (p, p), (u, u), (q, q) of the automatic residual replacement, est its estimate (host; NULL = off:
 * with it pk_rr_step, as pk_pipecg_solve calls it after the NaN check, a replacement due before the cap
 * stops with REPLACE).
 */
static void ref_pipe(pk_cuda_state *s, double g, double dl, double rr, const double *norms, double *hist,
                     pk_rr_est *est) {
  if (s->status != PK_ST_RUNNING) return;
  const double rnorm = sqrt(rr);
  if (!isfinite(g) || !isfinite(dl) || !isfinite(rnorm)) {
    s->status = PK_ST_NAN;
    s->breakdown_it = s->it + 1;
    return;
  }
  if (est) {
    const double v[PK_RR_NV] = {g, dl, rr, norms[0], norms[1], norms[2], norms[3]};
    if (pk_rr_step(est, v, s->alpha_old, s->beta) && s->it < s->maxit) {
      s->status = PK_ST_REPLACE;
      return;
    }
  }
  s->rnorm = rnorm;
  s->rr = rr;
  if (!s->first || s->it == 0) {
    hist[s->it] = rnorm;
    if (rnorm <= s->tol) {
      s->status = PK_ST_CONVERGED;
      return;
    }
  }
  if (s->it >= s->maxit) {
    s->status = PK_ST_MAXIT;
    return;
  }
  if (!ref_sign(g, &s->rho_sign)) {
    s->status = PK_ST_BREAKDOWN_PRECOND;
    s->breakdown_it = s->it + 1;
    return;
  }
  const double beta = s->first ? 0.0 : g / s->rho_old;
  const double sigma = s->first ? dl : dl - beta * g / s->alpha_old;
  s->beta = beta, s->delta = dl, s->rho = g, s->sigma = sigma;
  if (!ref_sign(sigma, &s->sigma_sign)) {
    s->status = !isfinite(sigma) ? PK_ST_NAN : s->first ? PK_ST_BREAKDOWN_MATRIX : PK_ST_SUSPECT;
    s->breakdown_it = s->it + 1;
    return;
  }
  s->alpha = g / sigma;
  s->rho_old = g;
  s->alpha_old = s->alpha;
  s->first = 0;
  s->it++;
}

/** A running state in the middle of a solve (signs fixed positive, iteration 5 of 100). */
static pk_cuda_state mid_state(void) {
  pk_cuda_state h;
  memset(&h, 0, sizeof h);
  h.rho = 0.8125, h.rho_old = 0.9, h.sigma = 2.5, h.delta = 3.0;
  h.alpha = 0.3721, h.alpha_old = 0.41, h.beta = -0.6143, h.rnorm = 7.0;
  h.tol = 1e-30, h.rho_sign = 1.0, h.sigma_sign = 1.0;
  h.it = 5, h.maxit = 100, h.status = PK_ST_RUNNING, h.first = 0, h.breakdown_it = -1;
  return h;
}

/** Device copy of a host state. */
static pk_cuda_state *dstate_of(const pk_cuda_state *h) {
  pk_cuda_state *d = NULL;
  if (cudaMalloc((void **)&d, sizeof *h) != cudaSuccess) exit(PK_FAIL);
  cudaMemcpy(d, h, sizeof *h, cudaMemcpyHostToDevice);
  return d;
}

/** Device state poisoned with all bits set (a write is then visible in every field). */
static pk_cuda_state *dstate_poison(void) {
  pk_cuda_state *d = NULL;
  if (cudaMalloc((void **)&d, sizeof *d) != cudaSuccess) exit(PK_FAIL);
  cudaMemset(d, 0xff, sizeof *d);
  return d;
}

/** Device state d bitwise equal to host state h (prints the scalars on a difference). */
static int state_same(const char *tag, const char *what, const pk_cuda_state *d, const pk_cuda_state *h) {
  pk_cuda_state g;
  cudaMemcpy(&g, d, sizeof g, cudaMemcpyDeviceToHost);
  if (memcmp(&g, h, sizeof g) == 0) return 1;
  fprintf(stderr,
          "%s: %s differs: status %d/%d it %d/%d breakdown_it %d/%d first %d/%d alpha %.17g/%.17g beta "
          "%.17g/%.17g rho %.17g/%.17g sigma %.17g/%.17g rnorm %.17g/%.17g\n",
          tag, what, g.status, h->status, g.it, h->it, g.breakdown_it, h->breakdown_it, g.first, h->first,
          g.alpha, h->alpha, g.beta, h->beta, g.rho, h->rho, g.sigma, h->sigma, g.rnorm, h->rnorm);
  pk_test_failures++;
  return 0;
}

/** nb * nv slot values in [lo, lo + 1) (positive sums for lo >= 0). */
static double *hslots(int64_t nb, int nv, double lo, uint64_t seed) {
  double *h = hrand(nb * nv, seed);
  for (int64_t i = 0; i < nb * nv; i++) h[i] = lo + 0.5 * (h[i] + 1.0);
  return h;
}

/** Producer slot counts of the fold checks: one, and more than 256 (several per lane, not a multiple). */
static const int64_t fold_nbs[2] = {1, 577};

/**
 * CG preconditioner loop with the sigma step folded in: the new state as the reference step makes it from
 * the slots summed in the documented order, r and z bitwise those of the CPU loop with the reference alpha,
 * (r, z), (r, r) near the CPU's; `in` unchanged. pdl: launched as a programmatic dependent launch.
 */
static void check_cg_pc_fold(const char *tag, pkrylov_context ctx, const struct pkrylov_precond_s *M,
                             const pk_cuda_pc *v, int64_t n, int64_t nbi, int pdl, uint64_t seed) {
  pk_cuda_state in = mid_state(), ref = in;
  double *pin = hslots(nbi, 1, 0.5, seed + 5), sig;
  ref_sums(pin, nbi, 1, &sig);
  ref_cg_sigma(&ref, sig);
  PK_EXPECT(ref.status == PK_ST_RUNNING, "%s: reference state stopped", tag);
  double *r = hrand(n, seed), *q = hrand(n, seed + 1), *z = hnew(n), *r0 = hdup(r, n), *q0 = hdup(q, n);
  double *cpart = hnew(pk_cpu_scratch_size(n, (struct pkrylov_precond_s *)M)), out[2];
  pk_cpu_cg_precond_step(ctx, M, n, ref.alpha, r, q, z, cpart, out, NULL);
  int64_t cap = pk_cuda_partials_needed(NULL, v), nb = -1;
  if (!v) {
    pk_cuda_op o;
    memset(&o, 0, sizeof o);
    o.type = PKRYLOV_OPERATOR_CSR;
    o.n = n;
    cap = pk_cuda_partials_needed(&o, NULL);
  }
  double *part = dnew(PART_NV * cap), *dpin = dup_dev(pin, nbi);
  double *dr = dup_dev(r0, n), *dq = dup_dev(q0, n), *dz = dnew(n);
  pk_cuda_state *din = dstate_of(&in), *dout = dstate_poison();
  const pk_cuda_fold f = {din, dout, dpin, nbi, NULL, pdl};
  CK(pk_cuda_cg_precond_step_fold(NULL, v, &f, n, dr, dq, dz, part, &nb));
  SYNC();
  check_nb(tag, nb, cap);
  state_same(tag, "state after the folded sigma step", dout, &ref);
  state_same(tag, "state read", din, &in);
  pkt_dev_same(tag, "r", n, dr, r);
  pkt_dev_same(tag, "z", n, dz, z);
  pkt_dev_same(tag, "q (input)", n, dq, q0);
  double g[2];
  gpu_sums(part, nb, 2, g);
  near_sum(tag, "(r, z)", g[0], out[0], abs_dot(n, r, z));
  near_sum(tag, "(r, r)", g[1], out[1], out[1]);
  cudaFree(dr), cudaFree(dq), cudaFree(dz), cudaFree(part), cudaFree(dpin), cudaFree(din), cudaFree(dout);
  free(r), free(q), free(z), free(r0), free(q0), free(cpart), free(pin);
}

/**
 * The automatic residual replacement's estimate of a test (pk_rr.h), *e (host): case 0 off (returns NULL, the
 * state's repl stays NULL); 1 on, ||A|| tiny (the estimate stays below tau |r|: updated, no replacement); 2
 * on, ||A|| huge (it crosses: REPLACE); 3 on and fresh after a replacement (calibrated from the gap, then
 * reset from the sums, no decision). On: *dev (allocated once, NULL before) gets a copy of *e and s->repl
 * points to it; returns e.
 */
static pk_rr_est *rr_case(pk_cuda_state *s, int c, pk_rr_est *e, pk_rr_est **dev) {
  s->repl = NULL;
  if (!c) return NULL;
  memset(e, 0, sizeof *e);
  pk_rr_start(e, c == 2 ? 1e30 : 1e-30, 7.0, 3.0);
  e->nq = 0.25, e->scale = 0.5;
  e->f = 1e-40, e->g = 2e-40, e->h = 3e-40, e->j = 4e-40;
  e->below = 1;
  e->fresh = c == 3;
  if (c == 3) e->gap = 1e-41;
  if (!*dev && cudaMalloc((void **)dev, sizeof **dev) != cudaSuccess) exit(PK_FAIL);
  cudaMemcpy(*dev, e, sizeof *e, cudaMemcpyHostToDevice);
  s->repl = *dev;
  return e;
}

/** The device estimate d bitwise equal to the host one h. */
static void rr_same(const char *tag, const pk_rr_est *d, const pk_rr_est *h) {
  pk_rr_est g;
  cudaMemcpy(&g, d, sizeof g, cudaMemcpyDeviceToHost);
  PK_EXPECT(memcmp(&g, h, sizeof g) == 0, "%s: the replacement estimate differs (f %.17g/%.17g, scale %.17g/%.17g, "
            "below %d/%d)", tag, g.f, h->f, g.scale, h->scale, g.below, h->below);
}

/** Pipelined CG: the scalar step folded into z = M^-1 r (z bitwise the CPU's; the state as the reference),
 *  with the automatic residual replacement off, on, replacing (z then undefined: not compared) and fresh. */
static void check_pc_apply_fold(const char *tag, const struct pkrylov_precond_s *M, const pk_cuda_pc *v,
                                int64_t nbi, int pdl, uint64_t seed) {
  const int64_t n = M->n;
  double *pin = hslots(nbi, PK_RR_NV, 0.5, seed + 5), sums[PK_RR_NV];
  for (int64_t b = 0; b < nbi; b++)
    pin[PK_RR_NV * b + 1] += 2.0; /* (w, u) well above beta (r, u) / alpha_old */
  ref_sums(pin, nbi, PK_RR_NV, sums);
  double *r = hrand(n, seed), *z = hnew(n);
  pk_pc_apply_all(M, r, z);
  double *dr = dup_dev(r, n), *dpin = dup_dev(pin, nbi * PK_RR_NV), *dhist = dnew(8);
  double *p3 = hnew(nbi * PK_RR_NV_BASE); /* without the rule the update's slots hold the three dots only */
  for (int64_t b = 0; b < nbi; b++)
    for (int j = 0; j < PK_RR_NV_BASE; j++) p3[PK_RR_NV_BASE * b + j] = pin[PK_RR_NV * b + j];
  double *dpin3 = dup_dev(p3, nbi * PK_RR_NV_BASE);
  free(p3);
  pk_rr_est *dest = NULL;
  for (int c = 0; c < 4; c++) {
    char t2[160];
    snprintf(t2, sizeof t2, "%s, replacement case %d", tag, c);
    pk_cuda_state in = mid_state();
    in.rho_old = 2.0 * sums[0], in.alpha_old = 1.0; /* beta = 1/2: sigma = delta - gamma / 2 > 0 */
    pk_rr_est est;
    pk_rr_est *e = rr_case(&in, c, &est, &dest);
    pk_cuda_state ref = in;
    double hist[8];
    ref_pipe(&ref, sums[0], sums[1], sums[2], sums + 3, hist, e);
    PK_EXPECT(c == 2 ? ref.status == PK_ST_REPLACE && ref.it == in.it
                     : ref.status == PK_ST_RUNNING && ref.it == in.it + 1,
              "%s: reference state %d", t2, ref.status);
    double *dz = dnew(n);
    pk_cuda_state *din = dstate_of(&in), *dout = dstate_poison();
    const pk_cuda_fold f = {din, dout, e ? dpin : dpin3, nbi, dhist, pdl, e != NULL}; /* repl: the rule's */
    CK(pk_cuda_pc_apply_fold(NULL, v, &f, dr, dz));
    SYNC();
    state_same(t2, "state after the folded pipelined step", dout, &ref);
    state_same(t2, "state read", din, &in);
    if (e) rr_same(t2, dest, e);
    if (c != 2) {
      pkt_dev_same(t2, "z = M^-1 r", n, dz, z);
      double hg[8];
      cudaMemcpy(hg, dhist, sizeof hg, cudaMemcpyDeviceToHost);
      pkt_same_bits(t2, "history entry", 1, hg + in.it, hist + in.it);
    }
    pkt_dev_same(t2, "r (input)", n, dr, r);
    cudaFree(dz), cudaFree(din), cudaFree(dout);
  }
  cudaFree(dr), cudaFree(dpin), cudaFree(dpin3), cudaFree(dhist), cudaFree(dest);
  free(r), free(z), free(pin);
}

/** CG operator loop with the rho step folded in: x, p, q bitwise the CPU's with the reference beta. */
static void check_cg_op_fold(const char *tag, const struct pkrylov_operator_s *A, const pk_cuda_op *v,
                             int64_t nbi, int pdl, uint64_t seed) {
  const int64_t n = A->n;
  pk_cuda_state in = mid_state(), ref = in;
  double *pin = hslots(nbi, 2, 0.25, seed + 5), sums[2], hist[8];
  ref_sums(pin, nbi, 2, sums);
  ref_cg_rho(&ref, sums[0], sums[1], hist, 0);
  PK_EXPECT(ref.status == PK_ST_RUNNING && ref.it == in.it + 1, "%s: reference state stopped", tag);
  double *x = hrand(n, seed), *p = hrand(n, seed + 1), *z = hrand(n, seed + 2), *q = hrand(n, seed + 3);
  double *x0 = hdup(x, n), *p0 = hdup(p, n), *q0 = hdup(q, n), *cpart = hnew(pk_cpu_scratch_size(n, NULL)),
         pq;
  pk_cpu_cg_operator_step(A, ref.alpha, ref.beta, x, p, z, q, cpart, &pq, NULL);
  int64_t cap, nb = -1;
  double *part = dpart(v, NULL, &cap), *dpin = dup_dev(pin, 2 * nbi), *dhist = dnew(8);
  double *dx = dup_dev(x0, n), *dp = dup_dev(p0, n), *dz = dup_dev(z, n), *dq = dup_dev(q0, n);
  pk_cuda_state *din = dstate_of(&in), *dout = dstate_poison();
  const pk_cuda_fold f = {din, dout, dpin, nbi, dhist, pdl};
  CK(pk_cuda_cg_operator_step_fold(NULL, v, &f, dx, dp, dz, dq, part, &nb));
  SYNC();
  check_nb(tag, nb, cap);
  PK_EXPECT(nb == pk_cuda_op_partials(v), "%s: %lld slots, pk_cuda_op_partials says %lld", tag, (long long)nb,
            (long long)pk_cuda_op_partials(v));
  state_same(tag, "state after the folded rho step", dout, &ref);
  state_same(tag, "state read", din, &in);
  double *rs = row_scale(A, v, z);
  pkt_dev_same(tag, "x", n, dx, x);
  pkt_dev_same(tag, "p", n, dp, p);
  dev_close(tag, "q", n, dq, q, rs, 1.0);
  double hg[8], s;
  cudaMemcpy(hg, dhist, sizeof hg, cudaMemcpyDeviceToHost);
  pkt_same_bits(tag, "history entry", 1, hg + ref.it, hist + ref.it);
  gpu_sums(part, nb, 1, &s);
  near_sum(tag, "(p, q)", s, pq, abs_dot(n, p, q) + abs_dot_rs(n, p, rs, 1.0));
  cudaFree(dx), cudaFree(dp), cudaFree(dz), cudaFree(dq), cudaFree(part), cudaFree(dpin), cudaFree(dhist);
  cudaFree(din), cudaFree(dout);
  free(x), free(p), free(z), free(q), free(x0), free(p0), free(q0), free(cpart), free(pin), free(rs);
}

/**
 * Folded launchers that stop: a scalar step that ends the solve (sigma of the wrong sign, converged,
 * iteration cap, NaN) and a state already stopped. The new state is the reference's (a stopped one copied
 * unchanged), and nothing else is written: vectors and partial sums keep their poison / values.
 */
static void check_fold_stops(const char *tag, const pk_cuda_op *vop, const pk_cuda_pc *vpc, int64_t n) {
  for (int sc = 0; sc < 4; sc++) { /* 0 the scalar step stops, 1 NaN in a slot, 2 stopped state, 3 sign/cap */
    double *h[6], *d[6];
    for (int i = 0; i < 6; i++)
      h[i] = hrand(n, 700 + 6 * (uint64_t)sc + (uint64_t)i), d[i] = dup_dev(h[i], n);
    int64_t cap = pk_cuda_partials_needed(vop, vpc), nb;
    double *part = dnew(PART_NV * cap), *dhist = dnew(8);
    const int64_t nbi = 577;
    double *slots = hslots(nbi, PK_RR_NV, 0.5, 800 + (uint64_t)sc), sums[PK_RR_NV], hist[8];
    if (sc == 1) slots[PK_RR_NV * 40] = NAN;
    for (int which = 0; which < 3; which++) { /* sigma (precond loop), rho (operator loop), pipelined */
      pk_cuda_state in = mid_state();
      if (sc == 0) in.tol = 1e300;                   /* rho / pipelined: converged */
      if (sc == 0 && which == 0) in.sigma_sign = -1; /* sigma: positive after negative */
      if (sc == 2) in.status = PK_ST_CONVERGED;
      if (sc == 3 && which == 0) in.sigma_sign = -1;
      if (sc == 3 && which > 0) in.maxit = which == 1 ? in.it + 1 : in.it; /* the cap */
      const int nv = which == 0 ? 1 : which == 1 ? 2 : PK_RR_NV_BASE; /* pipelined, no rule: three dots */
      double *dslots = dnew(nbi * nv);
      double *hs = hnew(nbi * nv);
      for (int64_t b = 0; b < nbi; b++)
        for (int j = 0; j < nv; j++) hs[b * nv + j] = slots[b * PK_RR_NV + j];
      cudaMemcpy(dslots, hs, sizeof(double) * (size_t)(nbi * nv), cudaMemcpyHostToDevice);
      ref_sums(hs, nbi, nv, sums);
      pk_cuda_state ref = in;
      if (which == 0) ref_cg_sigma(&ref, sums[0]);
      if (which == 1) ref_cg_rho(&ref, sums[0], sums[1], hist, 0);
      if (which == 2) ref_pipe(&ref, sums[0], sums[1], sums[2], sums + 3, hist, NULL);
      char t2[200];
      snprintf(t2, sizeof t2, "%s stop case %d launcher %d", tag, sc, which);
      PK_EXPECT(ref.status != PK_ST_RUNNING, "%s: reference state running", t2);
      pk_cuda_state *din = dstate_of(&in), *dout = dstate_poison();
      const pk_cuda_fold f = {din, dout, dslots, nbi, dhist, which % 2};
      if (which == 0) CK(pk_cuda_cg_precond_step_fold(NULL, vpc, &f, n, d[0], d[1], d[2], part, &nb));
      if (which == 1) CK(pk_cuda_cg_operator_step_fold(NULL, vop, &f, d[3], d[4], d[1], d[5], part, &nb));
      if (which == 2) CK(pk_cuda_pc_apply_fold(NULL, vpc, &f, d[0], d[2]));
      SYNC();
      state_same(t2, "state", dout, &ref);
      cudaFree(din), cudaFree(dout), cudaFree(dslots);
      free(hs);
    }
    for (int i = 0; i < 6; i++) pkt_dev_same(tag, "vector of a stopped fold", n, d[i], h[i]);
    PK_EXPECT(still_poisoned(part, PART_NV * cap), "%s stop case %d: partial sums written", tag, sc);
    for (int i = 0; i < 6; i++) cudaFree(d[i]), free(h[i]);
    cudaFree(part), cudaFree(dhist);
    free(slots);
  }
}

/** Every fold check on one operator / preconditioner pair (A NULL: preconditioner checks only). */
static void fold_suite(const char *name, pkrylov_context ctx, const struct pkrylov_operator_s *A,
                       const pk_cuda_op *vop, const struct pkrylov_precond_s *M, const pk_cuda_pc *vpc,
                       uint64_t seed) {
  for (int i = 0; i < 2; i++) {
    char tag[200];
    snprintf(tag, sizeof tag, "%s, %lld producer slots%s", name, (long long)fold_nbs[i], i ? ", pdl" : "");
    if (A) check_cg_op_fold(tag, A, vop, fold_nbs[i], i, seed + 100 * (uint64_t)i);
    if (M) {
      check_cg_pc_fold(tag, ctx, M, vpc, M->n, fold_nbs[i], i, seed + 100 * (uint64_t)i + 10);
      check_pc_apply_fold(tag, M, vpc, fold_nbs[i], 1 - i, seed + 100 * (uint64_t)i + 20);
    }
  }
}

/* ---- cases --------------------------------------------------------------------------------------- */

/** pk_cuda_dots (nv 1..4, grid-stride beyond the block cap), pk_cuda_sum_partials, axpy_dev, zero_dry. */
PK_TEST_CASE(vector_kernels) {
  SKIP_WITHOUT_GPU();
  pkrylov_context ctx;
  PK_REQUIRE_OK(NULL, pkrylov_context_create(PKRYLOV_BACKEND_CPU, &ctx));
  const int64_t sizes[3] = {1001, 37 * 29 * 11, 1234567};
  for (int si = 0; si < 3; si++) {
    const int64_t n = sizes[si];
    char tag[64];
    snprintf(tag, sizeof tag, "dots n=%lld", (long long)n);
    double *h[4], *d[4];
    for (int i = 0; i < 4; i++)
      h[i] = hrand(n, 100 + 4 * (uint64_t)si + (uint64_t)i), d[i] = dup_dev(h[i], n);
    const double *xs[4] = {d[0], d[1], d[2], d[0]}, *ys[4] = {d[1], d[2], d[2], d[3]};
    const double *hx[4] = {h[0], h[1], h[2], h[0]}, *hy[4] = {h[1], h[2], h[2], h[3]};
    pk_cuda_op o;
    memset(&o, 0, sizeof o);
    o.type = PKRYLOV_OPERATOR_CSR;
    o.n = n;
    int64_t cap;
    double *part = dpart(&o, NULL, &cap), *cpart = hnew(pk_cpu_scratch_size(n, NULL));
    for (int nv = 1; nv <= 4; nv++) {
      int64_t nb = -1;
      CK(pk_cuda_dots(NULL, n, nv, xs, ys, part, &nb));
      SYNC();
      check_nb(tag, nb, cap);
      double g[4];
      gpu_sums(part, nb, nv, g);
      for (int j = 0; j < nv; j++) {
        double ref;
        pk_cpu_dot(ctx, n, hx[j], hy[j], cpart, &ref);
        near_sum(tag, "dot", g[j], ref, abs_dot(n, hx[j], hy[j]));
      }
    }
    /* y += a x with a on the device, bitwise against the plain loop */
    double a = -0.8125 + 1e-3 * (double)si, *da = dup_dev(&a, 1);
    CK(pk_cuda_axpy_dev(NULL, n, da, d[0], d[1]));
    SYNC();
    for (int64_t i = 0; i < n; i++) h[1][i] = h[1][i] + a * h[0][i];
    pkt_dev_same(tag, "axpy", n, d[1], h[1]);
    pkt_dev_same(tag, "axpy x (input)", n, d[0], h[0]);
    /* zero_dry: NULL mask is a no-op, else zeros exactly the dry cells */
    uint8_t *wet = malloc((size_t)n);
    uint64_t s = 77 + (uint64_t)si;
    for (int64_t i = 0; i < n; i++) wet[i] = pk_test_rand(&s) > -0.6;
    uint8_t *dwet = NULL;
    cudaMalloc((void **)&dwet, (size_t)n);
    cudaMemcpy(dwet, wet, (size_t)n, cudaMemcpyHostToDevice);
    CK(pk_cuda_zero_dry(NULL, n, NULL, d[2]));
    SYNC();
    pkt_dev_same(tag, "zero_dry(NULL)", n, d[2], h[2]);
    CK(pk_cuda_zero_dry(NULL, n, dwet, d[2]));
    SYNC();
    for (int64_t i = 0; i < n; i++)
      if (!wet[i]) h[2][i] = 0.0;
    pkt_dev_same(tag, "zero_dry", n, d[2], h[2]);
    cudaFree(dwet), cudaFree(da), cudaFree(part);
    free(wet), free(cpart);
    for (int i = 0; i < 4; i++) cudaFree(d[i]), free(h[i]);
  }
  /* sum_partials: several slot counts and widths against the in-order host sum */
  const int64_t nbs[4] = {1, 5, 257, 5003};
  for (int bi = 0; bi < 4; bi++)
    for (int nv = 1; nv <= 4; nv++) {
      const int64_t nb = nbs[bi];
      double *hp = hrand(nb * nv, 500 + (uint64_t)(bi * 4 + nv)), ref[4], g[4], scale[4] = {0, 0, 0, 0};
      pk_sum_partials(hp, nb, nv, ref);
      for (int64_t b = 0; b < nb; b++)
        for (int j = 0; j < nv; j++) scale[j] += fabs(hp[b * nv + j]);
      double *dp = dup_dev(hp, nb * nv);
      gpu_sums(dp, nb, nv, g);
      for (int j = 0; j < nv; j++) near_sum("sum_partials", "slot sum", g[j], ref[j], scale[j]);
      if (nb == 1)
        for (int j = 0; j < nv; j++) PK_EXPECT(g[j] == ref[j], "one slot: %.17g vs %.17g", g[j], ref[j]);
      cudaFree(dp);
      free(hp);
    }
  pkrylov_context_destroy(&ctx);
  PK_TEST_END();
}

/** CSR (32- and 64-bit columns, fp64 and fp32): apply, residual, CG operator loop (both), pipelined step. */
PK_TEST_CASE(csr_operator) {
  SKIP_WITHOUT_GPU();
  pkrylov_context ctx;
  PK_REQUIRE_OK(NULL, pkrylov_context_create(PKRYLOV_BACKEND_CPU, &ctx));
  pkrylov_operator A;
  PK_REQUIRE_OK(ctx, make_csr(ctx, 143, 7, PKRYLOV_LAYOUT_KSLOW, 0, 6, 11, &A)); /* n = 1001 */
  op_suite("csr n=1001 col32", A, 0, 1000);
  pkrylov_operator_destroy(&A);
  PK_REQUIRE_OK(ctx, make_csr(ctx, 259, 3, PKRYLOV_LAYOUT_KFAST, 1, 4, 12, &A)); /* n = 777 */
  op_suite("csr n=777 col64", A, 1, 1100);
  pkrylov_operator_destroy(&A);
  PK_REQUIRE_OK(ctx, make_csr(ctx, 1, 1, PKRYLOV_LAYOUT_KSLOW, 1, 0, 13, &A)); /* n = 1 */
  op_suite("csr n=1", A, 0, 1200);
  pkrylov_operator_destroy(&A);
  pkrylov_context_destroy(&ctx);
  PK_TEST_END();
}

/**
 * CSR with long rows on the vector kernel (pk_cuda_op.csr_lanes = 2 ... 32): a random SPD matrix of order
 * 10007 with 20 to 200 entries per row, and one of order 5003 with short rows and a few rows of about 2000
 * entries. Every operator launcher (32- and 64-bit columns, fp64 and fp32) against the CPU within 1e-13 of
 * the row scale (A x also bitwise against the kernel's documented order written here), the folded CG
 * operator loop, the stopped state; the backend's choice of lanes from the row lengths.
 */
PK_TEST_CASE(csr_long_rows) {
  SKIP_WITHOUT_GPU();
  pkrylov_context ctx;
  PK_REQUIRE_OK(NULL, pkrylov_context_create(PKRYLOV_BACKEND_CPU, &ctx));
  pkrylov_operator A;
  for (int mtx = 0; mtx < 2; mtx++) {
    if (mtx == 0)
      PK_REQUIRE_OK(ctx, pkt_long_csr(ctx, 10007, 120, 0, 0, 31, &A));
    else
      PK_REQUIRE_OK(ctx, pkt_long_csr(ctx, 5003, 2, 4, 2000, 32, &A));
    int64_t maxrow = 0;
    for (int64_t r = 0; r < A->n; r++)
      if (A->csr.rowptr[r + 1] - A->csr.rowptr[r] > maxrow) maxrow = A->csr.rowptr[r + 1] - A->csr.rowptr[r];
    const int32_t autol = pk_cuda_csr_lanes(A->n, A->nnz, maxrow);
    PK_EXPECT(autol >= 2 && autol <= 32, "matrix %d: lanes %d chosen, expected the vector kernel", mtx, autol);
    printf("matrix %d: %d lanes per row chosen\n", mtx, autol);
    static const int lanes[3] = {2, 8, 32};
    for (int li = 0; li < 4; li++) {
      g_lanes = li < 3 ? lanes[li] : autol;
      char name[96];
      snprintf(name, sizeof name, "long csr %d lanes %d %s", mtx, g_lanes, li % 2 ? "col64" : "col32");
      op_suite(name, A, li % 2, 30000 + 100 * (uint64_t)(4 * mtx + li));
    }
    /* folded CG operator loop and a stopped state on the vector kernel */
    pkt_mem mem = {0};
    pk_cuda_op v;
    PK_EXPECT(pkt_upload_op(A, 0, 0, &v, &mem) == 0, "upload");
    v.csr_lanes = autol;
    fold_suite(mtx ? "fold long csr hubs" : "fold long csr", ctx, A, &v, NULL, NULL, 31000 + 100 * (uint64_t)mtx);
    {
      const int64_t n = A->n;
      double *h[9], *d[9];
      for (int i = 0; i < 9; i++) h[i] = hrand(n, 32000 + (uint64_t)i), d[i] = dup_dev(h[i], n);
      int64_t cap = pk_cuda_partials_needed(&v, NULL), nb;
      double *part = dnew(PART_NV * cap);
      pk_cuda_state *st = dstate(0.5, 0.25, PK_ST_CONVERGED);
      CK(pk_cuda_cg_operator_step(NULL, &v, st, 0, d[3], d[4], d[1], d[2], part, &nb, 0));
      CK(pk_cuda_pipecg_step(NULL, &v, st, d[0], d[1], d[2], d[3], d[4], d[5], d[6], d[7], d[8], part, &nb, 1));
      SYNC();
      for (int i = 0; i < 9; i++) pkt_dev_same("long csr stopped state", "vector", n, d[i], h[i]);
      PK_EXPECT(still_poisoned(part, PART_NV * cap), "long csr stopped state: partial sums written");
      for (int i = 0; i < 9; i++) cudaFree(d[i]), free(h[i]);
      cudaFree(part), cudaFree(st);
    }
    pkt_free(&mem);
    pkrylov_operator_destroy(&A);
  }
  g_lanes = 0;
  /* short rows keep one thread per row (bitwise): 7-point rows, and the choice's thresholds */
  PK_EXPECT(pk_cuda_csr_lanes(1000, 7000, 7) == 0, "7 entries per row: vector kernel chosen");
  PK_EXPECT(pk_cuda_csr_lanes(1000, 27000, 27) == 4, "27 entries per row: %d lanes", pk_cuda_csr_lanes(1000, 27000, 27));
  PK_EXPECT(pk_cuda_csr_lanes(1000, 19000, 19) == 0, "19 entries per row: %d lanes", pk_cuda_csr_lanes(1000, 19000, 19));
  PK_EXPECT(pk_cuda_csr_lanes(1000, 64000, 64) == 8, "64 entries per row: %d lanes", pk_cuda_csr_lanes(1000, 64000, 64));
  PK_EXPECT(pk_cuda_csr_lanes(1000, 5000, 3000) == 4, "uneven rows: %d lanes", pk_cuda_csr_lanes(1000, 5000, 3000));
  PK_EXPECT(pk_cuda_csr_lanes(1000, 1000000, 1000) == 32, "1000 per row: %d lanes", pk_cuda_csr_lanes(1000, 1000000, 1000));
  pkrylov_context_destroy(&ctx);
  PK_TEST_END();
}

/**
 * Column stencil, unmasked, on odd grids incl. nx = 1, ny = 1, nz = 1 and many level chunks; the last four
 * from 2^21 cells, where a thread works on cells instead of walking a column (k_stencil_cells).
 */
PK_TEST_CASE(stencil_operator) {
  SKIP_WITHOUT_GPU();
  pkrylov_context ctx;
  PK_REQUIRE_OK(NULL, pkrylov_context_create(PKRYLOV_BACKEND_CPU, &ctx));
  static const int g[11][3] = {{37, 29, 11}, {5, 3, 7},   {1, 1, 5},     {1, 6, 1},    {3, 2, 40},  {7, 1, 3},
                               {300, 7, 2},  {131, 127, 130}, {2, 1031, 1020}, {1031, 1, 2040}, {1, 1, 2100000}};
  for (int t = 0; t < 11; t++) {
    pkrylov_operator A;
    char name[64];
    snprintf(name, sizeof name, "stencil %dx%dx%d", g[t][0], g[t][1], g[t][2]);
    PK_REQUIRE_OK(ctx,
                  make_stencil(ctx, g[t][0], g[t][1], g[t][2], 0, t % 2 ? -1.0 : 1.0, 20 + (uint64_t)t, &A));
    op_suite(name, A, 0, 2000 + 100 * (uint64_t)t);
    pkrylov_operator_destroy(&A);
  }
  pkrylov_context_destroy(&ctx);
  PK_TEST_END();
}

/** Masked column stencil: r = 0 at dry cells (residual), every operator launcher (the last from 2^21 cells). */
PK_TEST_CASE(stencil_masked) {
  SKIP_WITHOUT_GPU();
  pkrylov_context ctx;
  PK_REQUIRE_OK(NULL, pkrylov_context_create(PKRYLOV_BACKEND_CPU, &ctx));
  static const int g[4][3] = {{37, 29, 11}, {5, 3, 7}, {1, 4, 9}, {131, 127, 130}};
  for (int t = 0; t < 4; t++) {
    pkrylov_operator A;
    char name[64];
    snprintf(name, sizeof name, "masked stencil %dx%dx%d", g[t][0], g[t][1], g[t][2]);
    PK_REQUIRE_OK(ctx, make_stencil(ctx, g[t][0], g[t][1], g[t][2], 1, 1.0, 40 + (uint64_t)t, &A));
    PK_EXPECT(A->wet != NULL, "%s: no mask", name);
    op_suite(name, A, 0, 3000 + 100 * (uint64_t)t);
    pkrylov_operator_destroy(&A);
  }
  pkrylov_context_destroy(&ctx);
  PK_TEST_END();
}

/** Thin shell (difference form), gnomonic and uniform geometry, odd grids. */
PK_TEST_CASE(thinshell_operator) {
  SKIP_WITHOUT_GPU();
  pkrylov_context ctx;
  PK_REQUIRE_OK(NULL, pkrylov_context_create(PKRYLOV_BACKEND_CPU, &ctx));
  static const int g[5][3] = {{37, 29, 11}, {5, 3, 7}, {1, 1, 5}, {2, 3, 40}, {9, 1, 1}};
  for (int t = 0; t < 5; t++)
    for (int geo = 0; geo < 2; geo++) {
      pkrylov_operator A;
      char name[80];
      snprintf(name, sizeof name, "thinshell %dx%dx%d %s", g[t][0], g[t][1], g[t][2],
               geo ? "uniform" : "gnomonic");
      PK_REQUIRE_OK(ctx, make_thinshell(ctx, g[t][0], g[t][1], g[t][2],
                                        geo ? PKRYLOV_GEOMETRY_UNIFORM : PKRYLOV_GEOMETRY_GNOMONIC, &A));
      op_suite(name, A, 0, 4000 + 100 * (uint64_t)t + 50 * (uint64_t)geo);
      pkrylov_operator_destroy(&A);
    }
  pkrylov_context_destroy(&ctx);
  PK_TEST_END();
}

/** None (a NONE view, and pc NULL in the CG step) and Jacobi (fp64, fp32), stencil and CSR. */
PK_TEST_CASE(precond_pointwise) {
  SKIP_WITHOUT_GPU();
  pkrylov_context ctx;
  PK_REQUIRE_OK(NULL, pkrylov_context_create(PKRYLOV_BACKEND_CPU, &ctx));
  pkrylov_operator As, Ac;
  PK_REQUIRE_OK(ctx, make_stencil(ctx, 37, 29, 11, 1, 1.0, 60, &As));
  PK_REQUIRE_OK(ctx, make_csr(ctx, 143, 7, PKRYLOV_LAYOUT_KSLOW, 0, 5, 61, &Ac));
  pkrylov_operator ops[2] = {As, Ac};
  for (int o = 0; o < 2; o++) {
    pkrylov_precond M;
    PK_REQUIRE_OK(ctx, pkrylov_precond_create(ctx, ops[o], PKRYLOV_PRECOND_NONE, 0, PKRYLOV_LAYOUT_AUTO, &M));
    pc_suite(o ? "none (csr)" : "none (masked stencil)", ctx, M, 5000 + 10 * (uint64_t)o);
    pkrylov_precond_destroy(&M);
    PK_REQUIRE_OK(ctx,
                  pkrylov_precond_create(ctx, ops[o], PKRYLOV_PRECOND_JACOBI, 0, PKRYLOV_LAYOUT_AUTO, &M));
    pc_suite(o ? "jacobi (csr)" : "jacobi (masked stencil)", ctx, M, 5100 + 10 * (uint64_t)o);
    pkrylov_precond_destroy(&M);
    /* CG step with no preconditioner at all (pc NULL) */
    check_cg_pc("pc NULL", ctx, NULL, NULL, ops[o]->n, 0, 5200 + 10 * (uint64_t)o);
    check_cg_pc("pc NULL alpha_zero", ctx, NULL, NULL, ops[o]->n, 1, 5300 + 10 * (uint64_t)o);
  }
  pkrylov_operator_destroy(&As);
  pkrylov_operator_destroy(&Ac);
  pkrylov_context_destroy(&ctx);
  PK_TEST_END();
}

/** Column symmetric, k-slow: stencil (positive and negative definite, masked), thin shell, CSR. */
PK_TEST_CASE(column_sym_kslow) {
  SKIP_WITHOUT_GPU();
  pkrylov_context ctx;
  PK_REQUIRE_OK(NULL, pkrylov_context_create(PKRYLOV_BACKEND_CPU, &ctx));
  pkrylov_operator A;
  PK_REQUIRE_OK(ctx, make_stencil(ctx, 37, 29, 11, 0, 1.0, 70, &A));
  column_suite("column stencil 37x29x11", ctx, A, 0, PKRYLOV_LAYOUT_AUTO, 1, 6000);
  pkrylov_operator_destroy(&A);
  PK_REQUIRE_OK(ctx, make_stencil(ctx, 5, 3, 7, 1, -1.0, 71, &A));
  column_suite("column masked negative stencil 5x3x7", ctx, A, 0, PKRYLOV_LAYOUT_AUTO, 1, 6100);
  pkrylov_operator_destroy(&A);
  PK_REQUIRE_OK(ctx, make_stencil(ctx, 300, 1, 1, 0, 1.0, 72, &A));
  column_suite("column stencil nz=1", ctx, A, 0, PKRYLOV_LAYOUT_AUTO, 1, 6200);
  pkrylov_operator_destroy(&A);
  PK_REQUIRE_OK(ctx, make_thinshell(ctx, 37, 29, 11, PKRYLOV_GEOMETRY_GNOMONIC, &A));
  column_suite("column thinshell 37x29x11", ctx, A, 0, PKRYLOV_LAYOUT_AUTO, 1, 6300);
  pkrylov_operator_destroy(&A);
  PK_REQUIRE_OK(ctx, make_csr(ctx, 143, 7, PKRYLOV_LAYOUT_KSLOW, 1, 4, 73, &A));
  column_suite("column csr kslow sym", ctx, A, 7, PKRYLOV_LAYOUT_KSLOW, 1, 6400);
  pkrylov_operator_destroy(&A);
  pkrylov_context_destroy(&ctx);
  PK_TEST_END();
}

/** Column symmetric, k-fast (CSR): the separate-pass CG step. */
PK_TEST_CASE(column_sym_kfast) {
  SKIP_WITHOUT_GPU();
  pkrylov_context ctx;
  PK_REQUIRE_OK(NULL, pkrylov_context_create(PKRYLOV_BACKEND_CPU, &ctx));
  pkrylov_operator A;
  PK_REQUIRE_OK(ctx, make_csr(ctx, 91, 11, PKRYLOV_LAYOUT_KFAST, 1, 4, 80, &A)); /* n = 1001 */
  column_suite("column csr kfast sym nz=11", ctx, A, 11, PKRYLOV_LAYOUT_KFAST, 1, 7000);
  pkrylov_operator_destroy(&A);
  PK_REQUIRE_OK(ctx, make_csr(ctx, 3, 333, PKRYLOV_LAYOUT_KFAST, 1, 2, 81, &A)); /* few long columns */
  column_suite("column csr kfast sym nz=333", ctx, A, 333, PKRYLOV_LAYOUT_KFAST, 1, 7100);
  pkrylov_operator_destroy(&A);
  pkrylov_context_destroy(&ctx);
  PK_TEST_END();
}

/** Column general (nonsymmetric columns, LU with pivoting), k-slow and k-fast. */
PK_TEST_CASE(column_general) {
  SKIP_WITHOUT_GPU();
  pkrylov_context ctx;
  PK_REQUIRE_OK(NULL, pkrylov_context_create(PKRYLOV_BACKEND_CPU, &ctx));
  pkrylov_operator A;
  PK_REQUIRE_OK(ctx, make_csr(ctx, 143, 7, PKRYLOV_LAYOUT_KSLOW, 0, 5, 90, &A));
  column_suite("column csr kslow general nz=7", ctx, A, 7, PKRYLOV_LAYOUT_KSLOW, 0, 8000);
  pkrylov_operator_destroy(&A);
  PK_REQUIRE_OK(ctx, make_csr(ctx, 77, 13, PKRYLOV_LAYOUT_KFAST, 0, 5, 91, &A));
  column_suite("column csr kfast general nz=13", ctx, A, 13, PKRYLOV_LAYOUT_KFAST, 0, 8100);
  pkrylov_operator_destroy(&A);
  PK_REQUIRE_OK(ctx, make_csr(ctx, 301, 2, PKRYLOV_LAYOUT_KSLOW, 0, 3, 92, &A));
  column_suite("column csr kslow general nz=2", ctx, A, 2, PKRYLOV_LAYOUT_KSLOW, 0, 8200);
  pkrylov_operator_destroy(&A);
  pkrylov_context_destroy(&ctx);
  PK_TEST_END();
}

/** The on-the-fly factors of pk_cuda_pc_onthefly_factors against the stored ones (dpttrf), bitwise. */
static void check_otf_factors(const char *tag, const struct pkrylov_precond_s *M, const pk_cuda_pc *v) {
  const int64_t n = M->n;
  double *dl = dnew(n), *dd = dnew(n);
  CK(pk_cuda_pc_onthefly_factors(NULL, v, dl, dd));
  SYNC();
  pkt_dev_same(tag, "lmul recomputed", n, dl, M->lmul);
  pkt_dev_same(tag, "dinv recomputed", n, dd, M->dinv);
  cudaFree(dl), cudaFree(dd);
}

/**
 * Matrix-free column factors on one operator: the recomputed factors bitwise equal to the stored ones,
 * then pc_apply and the CG step (alpha and alpha_zero) with onthefly = mode (1 automatic, 2 chunked
 * on-chip sweeps, 3 resident thin-shell sweeps), fp64 then fp32 (M's factors rounded in place after
 * that). drop: the view carries no stored factors (a read would fault), which proves the path reads none;
 * only where the column fits in shared memory (the kernels fall back to the stored factors otherwise).
 */
static void otf_suite(const char *name, pkrylov_context ctx, pkrylov_operator A, int mode, int drop,
                      uint64_t seed) {
  pkrylov_precond M;
  if (pkrylov_precond_create(ctx, A, PKRYLOV_PRECOND_COLUMN, 0, PKRYLOV_LAYOUT_AUTO, &M) != PKRYLOV_SUCCESS) {
    PK_EXPECT(0, "%s: precond_create failed", name);
    return;
  }
  PK_EXPECT(pkt_onthefly_ok(M), "%s: the column factors do not qualify for the on-the-fly path", name);
  for (int fp32 = 0; fp32 < 2; fp32++) {
    char tag[160];
    snprintf(tag, sizeof tag, "%s onthefly=%d%s %s", name, mode, drop ? " (no stored factors)" : "",
             fp32 ? "fp32" : "fp64");
    pkt_mem mem = {0};
    pk_cuda_pc v;
    PK_EXPECT(pkt_upload_pc_otf(M, fp32, mode, drop, &v, &mem) == 0, "%s: upload failed", tag);
    if (!fp32) check_otf_factors(tag, M, &v);
    if (fp32) round_pc(M);
    check_pc_apply(tag, M, &v, seed);
    check_cg_pc(tag, ctx, M, &v, M->n, 0, seed + 10);
    check_cg_pc(tag, ctx, M, &v, M->n, 1, seed + 20);
    pkt_free(&mem);
  }
  pkrylov_precond_destroy(&M);
}

/**
 * Column preconditioner with factors recomputed from the operator (thin shell, unmasked stencil), every
 * sweep kernel: onthefly = 2 (the chunked on-chip sweeps, thin shell and stencil), 3 (the resident
 * thin-shell sweeps), 1 (automatic: resident from 2^20 cells, else the staged stored factors). Odd grids,
 * nz = 1, nz = 256, nz = 300, nz = 700 (onthefly = 2: too long for shared memory, the stored-factor
 * fallback), more than 4096 blocks (grid-stride) of each kernel, and partial level chunks.
 */
PK_TEST_CASE(column_onthefly) {
  SKIP_WITHOUT_GPU();
  pkrylov_context ctx;
  PK_REQUIRE_OK(NULL, pkrylov_context_create(PKRYLOV_BACKEND_CPU, &ctx));
  static const int g[7][3] = {{37, 29, 11}, {5, 3, 7},   {1, 1, 5}, {9, 1, 1},
                              {2, 3, 256},  {3, 1, 300}, {2, 1, 700}};
  for (int t = 0; t < 7; t++)
    for (int kind = 0; kind < 3; kind++) { /* thin shell gnomonic, thin shell uniform, stencil */
      pkrylov_operator A;
      char name[96];
      if (kind < 2) {
        PK_REQUIRE_OK(ctx, make_thinshell(ctx, g[t][0], g[t][1], g[t][2],
                                          kind ? PKRYLOV_GEOMETRY_UNIFORM : PKRYLOV_GEOMETRY_GNOMONIC, &A));
      } else {
        PK_REQUIRE_OK(ctx, make_stencil(ctx, g[t][0], g[t][1], g[t][2], 0, 1.0, 120 + (uint64_t)t, &A));
      }
      static const char *kinds[3] = {"thinshell", "thinshell uniform", "stencil"};
      snprintf(name, sizeof name, "%s %dx%dx%d", kinds[kind], g[t][0], g[t][1], g[t][2]);
      const uint64_t seed = 10000 + 100 * (uint64_t)t + 30 * (uint64_t)kind;
      otf_suite(name, ctx, A, 2, g[t][2] <= 300, seed);
      if (kind < 2) otf_suite(name, ctx, A, 3, g[t][2] <= 300, seed + 7);
      pkrylov_operator_destroy(&A);
    }
  pkrylov_operator A;
  /* 132400 columns: more than PKC_MAX_BLOCKS blocks of 32, forced and (below the threshold) stored */
  PK_REQUIRE_OK(ctx, make_thinshell(ctx, 400, 331, 3, PKRYLOV_GEOMETRY_GNOMONIC, &A));
  otf_suite("thinshell 400x331x3", ctx, A, 2, 1, 11000);
  otf_suite("thinshell 400x331x3", ctx, A, 1, 0, 11100);
  pkrylov_operator_destroy(&A);
  /* over 2^20 cells: the automatic choice recomputes the thin shell's factors (none stored in the view);
     17 levels: two chunks of 8 and a partial one */
  PK_REQUIRE_OK(ctx, make_thinshell(ctx, 256, 256, 17, PKRYLOV_GEOMETRY_GNOMONIC, &A));
  otf_suite("thinshell 256x256x17", ctx, A, 1, 1, 11200);
  pkrylov_operator_destroy(&A);
  /* 1.1 M columns of one level: the resident sweeps beyond 4096 blocks of 256 */
  PK_REQUIRE_OK(ctx, make_thinshell(ctx, 1100, 1000, 1, PKRYLOV_GEOMETRY_UNIFORM, &A));
  otf_suite("thinshell 1100x1000x1", ctx, A, 3, 1, 11300);
  pkrylov_operator_destroy(&A);
  /* stored factors, over 2^20 cells and 4096 blocks of 32 columns: the chunked on-chip sweeps */
  PK_REQUIRE_OK(ctx, make_stencil(ctx, 400, 400, 7, 0, 1.0, 130, &A));
  column_suite("column stencil 400x400x7", ctx, A, 0, PKRYLOV_LAYOUT_AUTO, 1, 11400);
  pkrylov_operator_destroy(&A);
  pkrylov_context_destroy(&ctx);
  PK_TEST_END();
}

/** A state that is not RUNNING turns every launcher taking st into a no-op (all outputs untouched). */
PK_TEST_CASE(stopped_state_noop) {
  SKIP_WITHOUT_GPU();
  pkrylov_context ctx;
  PK_REQUIRE_OK(NULL, pkrylov_context_create(PKRYLOV_BACKEND_CPU, &ctx));
  pkrylov_operator A[3];
  PK_REQUIRE_OK(ctx, make_stencil(ctx, 37, 29, 11, 1, 1.0, 100, &A[0]));
  PK_REQUIRE_OK(ctx, make_thinshell(ctx, 5, 3, 7, PKRYLOV_GEOMETRY_UNIFORM, &A[1]));
  PK_REQUIRE_OK(ctx, make_csr(ctx, 143, 7, PKRYLOV_LAYOUT_KFAST, 0, 3, 101, &A[2]));
  static const int32_t stops[3] = {PK_ST_CONVERGED, PK_ST_BREAKDOWN_MATRIX, PK_ST_NAN};
  for (int o = 0; o < 3; o++) {
    const int64_t n = A[o]->n;
    pkt_mem mem = {0};
    pk_cuda_op v;
    PK_EXPECT(pkt_upload_op(A[o], 0, 0, &v, &mem) == 0, "upload");
    /* preconditioners of this operator: none, Jacobi, column (general for the CSR) */
    pkrylov_precond M[3];
    PK_REQUIRE_OK(ctx,
                  pkrylov_precond_create(ctx, A[o], PKRYLOV_PRECOND_NONE, 0, PKRYLOV_LAYOUT_AUTO, &M[0]));
    PK_REQUIRE_OK(ctx,
                  pkrylov_precond_create(ctx, A[o], PKRYLOV_PRECOND_JACOBI, 0, PKRYLOV_LAYOUT_AUTO, &M[1]));
    PK_REQUIRE_OK(ctx, pkrylov_precond_create(ctx, A[o], PKRYLOV_PRECOND_COLUMN, o == 2 ? 7 : 0,
                                              o == 2 ? PKRYLOV_LAYOUT_KFAST : PKRYLOV_LAYOUT_AUTO, &M[2]));
    pk_cuda_pc pv[5];
    for (int i = 0; i < 3; i++) PK_EXPECT(pkt_upload_pc(M[i], 0, &pv[i], &mem) == 0, "upload pc");
    pv[3] = pv[4] = pv[2]; /* thin shell: the column factors recomputed from the operator (both kernels) */
    if (o == 1) {
      PK_EXPECT(pkt_upload_pc_otf(M[2], 0, 2, 1, &pv[3], &mem) == 0, "upload pc onthefly");
      PK_EXPECT(pkt_upload_pc_otf(M[2], 0, 3, 1, &pv[4], &mem) == 0, "upload pc onthefly");
    }
    double *h[9], *d[9];
    for (int i = 0; i < 9; i++) h[i] = hrand(n, 900 + 9 * (uint64_t)o + (uint64_t)i), d[i] = dup_dev(h[i], n);
    int64_t cap = pk_cuda_partials_needed(&v, &pv[2]);
    double *part = dnew(PART_NV * cap);
    for (int si = 0; si < 3; si++) {
      pk_cuda_state *st = dstate(0.5, 0.25, stops[si]);
      int64_t nb;
      for (int i = 0; i < 5; i++) {
        CK(pk_cuda_pc_apply(NULL, &pv[i], st, d[0], d[1]));
        CK(pk_cuda_cg_precond_step(NULL, &pv[i], st, 0, n, d[0], d[2], d[1], part, &nb));
        CK(pk_cuda_cg_precond_step(NULL, &pv[i], st, 1, n, d[0], d[2], d[1], part, &nb));
      }
      CK(pk_cuda_cg_precond_step(NULL, NULL, st, 0, n, d[0], d[2], d[1], part, &nb));
      CK(pk_cuda_cg_operator_step(NULL, &v, st, 0, d[3], d[4], d[1], d[2], part, &nb, 0));
      CK(pk_cuda_cg_operator_step(NULL, &v, st, 1, d[3], d[4], d[1], d[2], part, &nb, 0));
      CK(pk_cuda_pipecg_step(NULL, &v, st, d[0], d[1], d[2], d[3], d[4], d[5], d[6], d[7], d[8], part, &nb, 1));
      SYNC();
      cudaFree(st);
    }
    for (int i = 0; i < 9; i++) pkt_dev_same("stopped state", "vector", n, d[i], h[i]);
    PK_EXPECT(still_poisoned(part, PART_NV * cap), "stopped state: partial sums written (operator %d)", o);
    for (int i = 0; i < 9; i++) cudaFree(d[i]), free(h[i]);
    cudaFree(part);
    for (int i = 0; i < 3; i++) pkrylov_precond_destroy(&M[i]);
    pkt_free(&mem);
  }
  for (int o = 0; o < 3; o++) pkrylov_operator_destroy(&A[o]);
  pkrylov_context_destroy(&ctx);
  PK_TEST_END();
}

/** More than 4096 * 256 rows / columns: the grid-stride loops of the capped 1-D and column kernels. */
PK_TEST_CASE(large_grid_stride) {
  SKIP_WITHOUT_GPU();
  pkrylov_context ctx;
  PK_REQUIRE_OK(NULL, pkrylov_context_create(PKRYLOV_BACKEND_CPU, &ctx));
  pkrylov_operator A;
  PK_REQUIRE_OK(ctx, make_csr(ctx, 1100003, 2, PKRYLOV_LAYOUT_KFAST, 1, 1, 110, &A)); /* n = 2200006 */
  pkt_mem mem = {0};
  pk_cuda_op v;
  PK_EXPECT(pkt_upload_op(A, 0, 0, &v, &mem) == 0, "upload");
  check_apply("large csr", A, &v, 9000);
  check_cg_op("large csr", A, &v, 0, 9010);
  check_pipe("large csr", A, &v, 9020);
  pkrylov_precond M;
  PK_REQUIRE_OK(ctx, pkrylov_precond_create(ctx, A, PKRYLOV_PRECOND_COLUMN, 2, PKRYLOV_LAYOUT_KFAST, &M));
  PK_EXPECT(M->symmetric == 1, "large: expected the symmetric path");
  pk_cuda_pc pv;
  PK_EXPECT(pkt_upload_pc(M, 0, &pv, &mem) == 0, "upload pc");
  check_pc_apply("large column kfast", M, &pv, 9030);
  check_cg_pc("large column kfast", ctx, M, &pv, M->n, 0, 9040);
  pkrylov_precond_destroy(&M);
  pkt_free(&mem);
  pkrylov_operator_destroy(&A);
  /* a big stencil (8.5 M cells): level chunks of 9 levels (the block cap), the last one partial */
  PK_REQUIRE_OK(ctx, make_stencil(ctx, 257, 253, 131, 0, 1.0, 111, &A));
  PK_EXPECT(pkt_upload_op(A, 0, 0, &v, &mem) == 0, "upload");
  check_residual("large stencil", A, &v, 9050);
  check_pipe("large stencil", A, &v, 9060);
  PK_REQUIRE_OK(ctx, pkrylov_precond_create(ctx, A, PKRYLOV_PRECOND_COLUMN, 0, PKRYLOV_LAYOUT_AUTO, &M));
  PK_EXPECT(pkt_upload_pc(M, 0, &pv, &mem) == 0, "upload pc");
  check_cg_pc("large column kslow", ctx, M, &pv, M->n, 0, 9070);
  pkrylov_precond_destroy(&M);
  pkt_free(&mem);
  pkrylov_operator_destroy(&A);
  pkrylov_context_destroy(&ctx);
  PK_TEST_END();
}

/**
 * Launch shapes of huge problems (views without arrays, state stopped so that no kernel reads memory):
 * every launch is valid (grid limits) and writes at most pk_cuda_partials_needed slots.
 */
PK_TEST_CASE(partials_needed_bounds) {
  SKIP_WITHOUT_GPU();
  pk_cuda_state *st = dstate(1.0, 1.0, PK_ST_MAXIT);
  static const int g[5][3] = {{4001, 3001, 100}, {1, 1, 1000000}, {64, 64, 4000}, {1000, 1000, 1}, {3, 5, 7}};
  for (int t = 0; t < 10; t++) {
    pk_cuda_op v;
    memset(&v, 0, sizeof v);
    v.type = t < 5 ? PKRYLOV_OPERATOR_STENCIL7 : PKRYLOV_OPERATOR_THINSHELL;
    v.nx = g[t % 5][0], v.ny = g[t % 5][1], v.nz = g[t % 5][2];
    v.n = (int64_t)v.nx * v.ny * v.nz;
    const int64_t cap = pk_cuda_partials_needed(&v, NULL);
    int64_t nb1 = -1, nb2 = -1;
    CK(pk_cuda_cg_operator_step(NULL, &v, st, 0, NULL, NULL, NULL, NULL, NULL, &nb1, 0));
    CK(pk_cuda_pipecg_step(NULL, &v, st, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, &nb2, 0));
    check_nb("grid shape", nb1, cap);
    PK_EXPECT(nb1 == nb2, "operator launches disagree: %lld vs %lld", (long long)nb1, (long long)nb2);
  }
  const int64_t ns[3] = {3000000009LL, 1001, 1};
  for (int t = 0; t < 3; t++) {
    pk_cuda_op v;
    memset(&v, 0, sizeof v);
    v.type = PKRYLOV_OPERATOR_CSR;
    v.n = ns[t];
    pk_cuda_pc pc[3];
    memset(pc, 0, sizeof pc);
    pc[0].type = PKRYLOV_PRECOND_JACOBI;
    pc[1].type = pc[2].type = PKRYLOV_PRECOND_COLUMN;
    pc[1].symmetric = 1, pc[1].layout = PKRYLOV_LAYOUT_KSLOW;
    pc[2].symmetric = 0, pc[2].layout = PKRYLOV_LAYOUT_KFAST;
    for (int i = 0; i < 3; i++) {
      pc[i].n = ns[t];
      pc[i].nz = i == 0 ? 1 : (t == 0 ? 3 : 1);
      pc[i].ncols = ns[t] / pc[i].nz;
      const int64_t cap = pk_cuda_partials_needed(&v, &pc[i]);
      int64_t nb = -1;
      CK(pk_cuda_cg_precond_step(NULL, &pc[i], st, 0, ns[t], NULL, NULL, NULL, NULL, &nb));
      check_nb("precond shape", nb, cap);
      CK(pk_cuda_cg_operator_step(NULL, &v, st, 0, NULL, NULL, NULL, NULL, NULL, &nb, 0));
      check_nb("csr shape", nb, cap);
      for (int L = 2; L <= 32; L *= 2) { /* the vector kernel: more threads per row */
        pk_cuda_op vl = v;
        vl.csr_lanes = L;
        const int64_t capl = pk_cuda_partials_needed(&vl, &pc[i]);
        CK(pk_cuda_cg_operator_step(NULL, &vl, st, 0, NULL, NULL, NULL, NULL, NULL, &nb, 0));
        check_nb("csr vector shape", nb, capl);
        PK_EXPECT(nb == pk_cuda_op_partials(&vl), "csr vector shape: %lld slots, op_partials %lld", (long long)nb,
                  (long long)pk_cuda_op_partials(&vl));
      }
    }
  }
  SYNC();
  cudaFree(st);
  PK_TEST_END();
}

/**
 * The one-block scalar launchers (pk_cuda_cg_scalar_rho with init 0 and 1, pk_cuda_cg_scalar_sigma,
 * pk_cuda_pipecg_scalar), in place and in -> out, against the steps of solver.c written again here, on
 * slots summed in the documented order: 1, 300 and 4100 slots; running, converged, iteration cap, NaN,
 * (re)start, stopped, sign changes, SUSPECT; pipelined CG with the automatic residual replacement off, on,
 * replacing (REPLACE) and fresh (the estimate by pk_rr.h on the same sums). The state and the history are
 * compared bitwise.
 */
PK_TEST_CASE(scalar_steps) {
  SKIP_WITHOUT_GPU();
  int seen[8] = {0};
  static const int64_t nbs[3] = {1, 300, 4100};
  for (int ib = 0; ib < 3; ib++)
    for (int sc = 0; sc < 9; sc++)
      for (int which = 0; which < 4; which++) { /* rho, rho init, sigma, pipelined */
        const int64_t nb = nbs[ib];
        const int nv = which < 2 ? 2 : which == 2 ? 1 : PK_RR_NV; /* pipelined: the update's slots */
        double *slots = hslots(nb, nv, 0.5, 1000 + 40 * (uint64_t)ib + 4 * (uint64_t)sc + (uint64_t)which);
        double sums[PK_RR_NV];
        if (which == 3)
          for (int64_t b = 0; b < nb; b++) slots[PK_RR_NV * b + 1] += 2.0;
        if (sc == 4) slots[(nb / 2) * nv] = NAN;
        if (sc == 7)
          for (int64_t i = 0; i < nb * nv; i++) slots[i] = -slots[i];
        ref_sums(slots, nb, nv, sums);
        double *dslots = dup_dev(slots, nb * nv), *dslots3 = NULL;
        if (which == 3) { /* without the rule the update's slots hold the three dots only */
          double *s3 = hnew(nb * PK_RR_NV_BASE);
          for (int64_t b = 0; b < nb; b++)
            for (int j = 0; j < PK_RR_NV_BASE; j++) s3[PK_RR_NV_BASE * b + j] = slots[PK_RR_NV * b + j];
          dslots3 = dup_dev(s3, nb * PK_RR_NV_BASE);
          free(s3);
        }
        pk_rr_est *dest = NULL;
        /* pipelined: the automatic residual replacement off, on, replacing, fresh (rr_case) */
        for (int rc = 0; rc < (which == 3 ? 4 : 1); rc++) {
          pk_cuda_state in = mid_state();
          if (which == 3) in.rho_old = 2.0 * sums[0], in.alpha_old = 1.0;
          switch (sc) {
          case 1: in.tol = 1e300; break;
          case 2: in.maxit = which == 3 ? in.it : in.it + 1; break;
          case 3: in.it = 0, in.first = 1, in.rho_sign = in.sigma_sign = 0.0; break;
          case 5: in.it = 7, in.first = 1, in.rho_sign = in.sigma_sign = 0.0; break;
          case 6: in.status = PK_ST_BREAKDOWN_MATRIX, in.breakdown_it = 3; break;
          case 8:
            if (which == 3)
              in.rho_old = 0.01 * sums[0]; /* beta = 100: sigma = delta - 100 gamma < 0 */
            else
              in.maxit = 0, in.it = 0;
            break;
          default: break;
          }
          pk_rr_est est0, *e0 = which == 3 ? rr_case(&in, rc, &est0, &dest) : NULL;
          for (int inplace = 0; inplace < 2; inplace++) {
            char tag[140];
            snprintf(tag, sizeof tag, "scalar step %d, %lld slots, case %d, replacement case %d%s", which,
                     (long long)nb, sc, rc, inplace ? ", in place" : "");
            pk_cuda_state ref = in;
            double href[16];
            memset(href, 0xff, sizeof href);
            pk_rr_est est, *e = NULL; /* the device estimate is updated in place: from the start again */
            if (e0) {
              est = *e0, e = &est;
              cudaMemcpy(dest, e0, sizeof *e0, cudaMemcpyHostToDevice);
            }
            if (which < 2) ref_cg_rho(&ref, sums[0], sums[1], href, which);
            if (which == 2) ref_cg_sigma(&ref, sums[0]);
            if (which == 3) ref_pipe(&ref, sums[0], sums[1], sums[2], sums + 3, href, e);
            seen[ref.status]++;
            double *dhist = dnew(16);
            pk_cuda_state *din = dstate_of(&in), *dout = inplace ? din : dstate_poison();
            if (which < 2) CK(pk_cuda_cg_scalar_rho(NULL, din, dout, dslots, nb, dhist, which, 0));
            if (which == 2) CK(pk_cuda_cg_scalar_sigma(NULL, din, dout, dslots, nb, 0));
            if (which == 3) CK(pk_cuda_pipecg_scalar(NULL, din, dout, e0 ? dslots : dslots3, nb, dhist, e0 != NULL));
            SYNC();
            state_same(tag, "state", dout, &ref);
            if (!inplace) state_same(tag, "state read", din, &in);
            if (e) rr_same(tag, dest, e);
            pkt_dev_same(tag, "history", 16, dhist, href);
            cudaFree(dhist), cudaFree(din);
            if (!inplace) cudaFree(dout);
          }
        }
        cudaFree(dslots), cudaFree(dslots3), cudaFree(dest);
        free(slots);
      }
  for (int st = 0; st < 8; st++) PK_EXPECT(seen[st] > 0, "no scalar step ended with status %d", st);
  PK_TEST_END();
}

/**
 * The folded launchers: the CG preconditioner loop with the sigma step, the CG operator loop with the rho
 * step and the pipelined preconditioner application with its scalar step, against the CPU loops run with
 * the reference scalars; every kernel family (pointwise none / Jacobi, staged, chunked and resident column
 * sweeps, k-fast and general columns; thin shell, stencil (fp64, fp32), CSR), plain and programmatic
 * dependent launches, 1 and 577 producer slots; then the folds that stop the solve write nothing but the
 * state.
 */
PK_TEST_CASE(folded_steps) {
  SKIP_WITHOUT_GPU();
  pkrylov_context ctx;
  PK_REQUIRE_OK(NULL, pkrylov_context_create(PKRYLOV_BACKEND_CPU, &ctx));
  pkrylov_operator A;
  pkrylov_precond M;
  pk_cuda_op vop;
  pk_cuda_pc vpc;
  /* thin shell: column factors staged (stored), chunked on chip and resident (recomputed) */
  {
    pkt_mem mem = {0};
    PK_REQUIRE_OK(ctx, make_thinshell(ctx, 37, 29, 11, PKRYLOV_GEOMETRY_GNOMONIC, &A));
    PK_REQUIRE_OK(ctx, pkrylov_precond_create(ctx, A, PKRYLOV_PRECOND_COLUMN, 0, PKRYLOV_LAYOUT_AUTO, &M));
    PK_EXPECT(pkt_upload_op(A, 0, 0, &vop, &mem) == 0, "upload");
    PK_EXPECT(pkt_upload_pc(M, 0, &vpc, &mem) == 0, "upload pc");
    fold_suite("fold thinshell column", ctx, A, &vop, M, &vpc, 20000);
    check_fold_stops("fold thinshell column", &vop, &vpc, A->n);
    for (int mode = 2; mode <= 3; mode++) {
      pk_cuda_pc vo;
      PK_EXPECT(pkt_upload_pc_otf(M, 0, mode, 1, &vo, &mem) == 0, "upload pc onthefly");
      fold_suite(mode == 2 ? "fold thinshell column on chip" : "fold thinshell column resident", ctx, NULL,
                 NULL, M, &vo, 20100 + 100 * (uint64_t)mode);
    }
    pkrylov_precond_destroy(&M);
    pkt_free(&mem);
    pkrylov_operator_destroy(&A);
  }
  /* masked stencil, fp64 and fp32: none (and no view at all), Jacobi */
  for (int fp32 = 0; fp32 < 2; fp32++) {
    pkt_mem mem = {0};
    PK_REQUIRE_OK(ctx, make_stencil(ctx, 5, 3, 7, 1, 1.0, 140, &A));
    PK_EXPECT(pkt_upload_op(A, fp32, 0, &vop, &mem) == 0, "upload");
    if (fp32) round_op(A);
    PK_REQUIRE_OK(ctx, pkrylov_precond_create(ctx, A, PKRYLOV_PRECOND_JACOBI, 0, PKRYLOV_LAYOUT_AUTO, &M));
    PK_EXPECT(pkt_upload_pc(M, fp32, &vpc, &mem) == 0, "upload pc");
    if (fp32) round_pc(M);
    fold_suite(fp32 ? "fold stencil jacobi fp32" : "fold stencil jacobi", ctx, A, &vop, M, &vpc, 20400);
    pkrylov_precond_destroy(&M);
    PK_REQUIRE_OK(ctx, pkrylov_precond_create(ctx, A, PKRYLOV_PRECOND_NONE, 0, PKRYLOV_LAYOUT_AUTO, &M));
    PK_EXPECT(pkt_upload_pc(M, 0, &vpc, &mem) == 0, "upload pc");
    fold_suite("fold none", ctx, NULL, NULL, M, &vpc, 20500);
    check_cg_pc_fold("fold pc NULL", ctx, NULL, NULL, A->n, 577, fp32, 20600);
    pkrylov_precond_destroy(&M);
    pkt_free(&mem);
    pkrylov_operator_destroy(&A);
  }
  /* long columns (chunked sweeps with stored factors) */
  {
    pkt_mem mem = {0};
    PK_REQUIRE_OK(ctx, make_stencil(ctx, 3, 1, 300, 0, -1.0, 141, &A));
    PK_REQUIRE_OK(ctx, pkrylov_precond_create(ctx, A, PKRYLOV_PRECOND_COLUMN, 0, PKRYLOV_LAYOUT_AUTO, &M));
    PK_EXPECT(pkt_upload_pc(M, 0, &vpc, &mem) == 0, "upload pc");
    fold_suite("fold stencil 3x1x300 column", ctx, NULL, NULL, M, &vpc, 20700);
    pkrylov_precond_destroy(&M);
    pkt_free(&mem);
    pkrylov_operator_destroy(&A);
  }
  /* CSR: general columns (k-slow), symmetric k-fast columns */
  for (int t = 0; t < 2; t++) {
    pkt_mem mem = {0};
    if (t == 0)
      PK_REQUIRE_OK(ctx, make_csr(ctx, 143, 7, PKRYLOV_LAYOUT_KSLOW, 0, 5, 142, &A));
    else
      PK_REQUIRE_OK(ctx, make_csr(ctx, 91, 11, PKRYLOV_LAYOUT_KFAST, 1, 4, 143, &A));
    PK_REQUIRE_OK(ctx, pkrylov_precond_create(ctx, A, PKRYLOV_PRECOND_COLUMN, t ? 11 : 7,
                                              t ? PKRYLOV_LAYOUT_KFAST : PKRYLOV_LAYOUT_KSLOW, &M));
    PK_EXPECT(M->symmetric == t, "csr %d: symmetric = %d", t, M->symmetric);
    PK_EXPECT(pkt_upload_op(A, 0, t, &vop, &mem) == 0, "upload");
    PK_EXPECT(pkt_upload_pc(M, 0, &vpc, &mem) == 0, "upload pc");
    fold_suite(t ? "fold csr column kfast" : "fold csr column general", ctx, A, &vop, M, &vpc,
               20800 + 100 * (uint64_t)t);
    if (t == 0) check_fold_stops("fold csr column general", &vop, &vpc, A->n);
    pkrylov_precond_destroy(&M);
    pkt_free(&mem);
    pkrylov_operator_destroy(&A);
  }
  pkrylov_context_destroy(&ctx);
  PK_TEST_END();
}

/**
 * Views of unknown type (a corrupted handle): pk_cuda_op_apply and pk_cuda_pc_apply refuse them with
 * cudaErrorInvalidValue before launching, the output untouched (they ran as a thin shell and as a column
 * solve before); the same views with their types restored apply.
 */
PK_TEST_CASE(unknown_type_refused) {
  SKIP_WITHOUT_GPU();
  pkrylov_context ctx;
  PK_REQUIRE_OK(NULL, pkrylov_context_create(PKRYLOV_BACKEND_CPU, &ctx));
  pkrylov_thinshell_params p;
  PK_REQUIRE_OK(ctx, pkrylov_thinshell_params_default(5, 4, 3, &p));
  pkrylov_operator A;
  PK_REQUIRE_OK(ctx, pkrylov_operator_create_thinshell(ctx, &p, &A));
  pkrylov_precond M;
  PK_REQUIRE_OK(ctx, pkrylov_precond_create(ctx, A, PKRYLOV_PRECOND_COLUMN, 0, PKRYLOV_LAYOUT_AUTO, &M));
  enum { N = 60 };
  double one[N], poison[N], ref[N];
  for (int i = 0; i < N; i++) one[i] = 1.0, poison[i] = 3.0;
  pkt_mem m = {0};
  pk_cuda_op v;
  pk_cuda_pc pv;
  PK_REQUIRE(pkt_upload_op(A, 0, 0, &v, &m) == 0 && pkt_upload_pc(M, 0, &pv, &m) == 0, "upload failed");
  double *dx = (double *)pkt_dev(&m, one, sizeof one), *dy = (double *)pkt_dev(&m, poison, sizeof poison);
  PK_REQUIRE(dx && dy && !m.failed, "device vectors");
  v.type = 799;
  int e = pk_cuda_op_apply(NULL, &v, dx, dy);
  PK_EXPECT(e == (int)cudaErrorInvalidValue, "operator type 799: launcher returned %d", e);
  SYNC();
  pkt_dev_same("unknown operator type", "y", N, dy, poison);
  pv.type = 499;
  e = pk_cuda_pc_apply(NULL, &pv, NULL, dx, dy);
  PK_EXPECT(e == (int)cudaErrorInvalidValue, "preconditioner type 499: launcher returned %d", e);
  SYNC();
  pkt_dev_same("unknown preconditioner type", "z", N, dy, poison);
  v.type = PKRYLOV_OPERATOR_THINSHELL;
  CK(pk_cuda_op_apply(NULL, &v, dx, dy));
  SYNC();
  pk_op_apply_all(A, one, ref);
  pkt_dev_same("thin shell restored", "y", N, dy, ref);
  pv.type = PKRYLOV_PRECOND_COLUMN;
  CK(pk_cuda_pc_apply(NULL, &pv, NULL, dx, dy));
  SYNC();
  pk_pc_apply_all(M, one, ref);
  pkt_dev_same("column restored", "z", N, dy, ref);
  pkt_free(&m);
  pkrylov_precond_destroy(&M);
  pkrylov_operator_destroy(&A);
  pkrylov_context_destroy(&ctx);
  PK_TEST_END();
}

/** A status for PK_CUDA_CHECK below (a launcher's cudaError_t as int). */
static int status_of(int e) { return e; }

/** PK_CUDA_CHECK as the backend's files use it. */
static int checked_step(pkrylov_context ctx, int e) {
  PK_CUDA_CHECK(ctx, "pkrylov_operator_apply", status_of(e), "the step");
  return PKRYLOV_SUCCESS;
}

/**
 * pk_cuda_error and PK_CUDA_CHECK (pk_cuda.h), the backend's one report of a failed CUDA call: out of memory
 * for cudaErrorMemoryAllocation, else a backend error; the message names the public function given, what
 * was being done, the call's text and the CUDA error's name. Host code: runs without a device.
 */
PK_TEST_CASE(error_report) {
  pkrylov_context ctx;
  PK_REQUIRE_OK(NULL, pkrylov_context_create(PKRYLOV_BACKEND_CPU, &ctx));
  PK_EXPECT_CODE(ctx,
                 pk_cuda_error(ctx, "pkrylov_solver_solve", (int)cudaErrorMemoryAllocation, "allocating x",
                               "cudaMalloc(&x, bytes)"),
                 PKRYLOV_ERR_OUT_OF_MEMORY);
  PK_EXPECT(pk_test_msg_has(ctx, "pkrylov_solver_solve") && pk_test_msg_has(ctx, "allocating x") &&
                pk_test_msg_has(ctx, "cudaMalloc(&x, bytes)") && pk_test_msg_has(ctx, "cudaErrorMemoryAllocation"),
            "out-of-memory message");
  PK_EXPECT_CODE(ctx, pk_cuda_error(ctx, "pkrylov_rci_start", (int)cudaErrorInvalidValue, "dots", NULL),
                 PKRYLOV_ERR_BACKEND);
  PK_EXPECT(pk_test_msg_has(ctx, "pkrylov_rci_start") && pk_test_msg_has(ctx, "dots: CUDA error cudaErrorInvalidValue"),
            "message without a call");
  PK_EXPECT_CODE(ctx, checked_step(ctx, 0), PKRYLOV_SUCCESS);
  PK_EXPECT_CODE(ctx, checked_step(ctx, (int)cudaErrorLaunchFailure), PKRYLOV_ERR_BACKEND);
  PK_EXPECT(pk_test_msg_has(ctx, "pkrylov_operator_apply") && pk_test_msg_has(ctx, "the step: status_of(e)") &&
                pk_test_msg_has(ctx, "cudaErrorLaunchFailure"),
            "PK_CUDA_CHECK message");
  pkrylov_context_destroy(&ctx);
  PK_TEST_END();
}

PK_TEST_MAIN(PK_TEST_ENTRY(vector_kernels), PK_TEST_ENTRY(csr_operator), PK_TEST_ENTRY(csr_long_rows),
             PK_TEST_ENTRY(stencil_operator),
             PK_TEST_ENTRY(stencil_masked), PK_TEST_ENTRY(thinshell_operator),
             PK_TEST_ENTRY(precond_pointwise), PK_TEST_ENTRY(column_sym_kslow),
             PK_TEST_ENTRY(column_sym_kfast), PK_TEST_ENTRY(column_general), PK_TEST_ENTRY(column_onthefly),
             PK_TEST_ENTRY(stopped_state_noop), PK_TEST_ENTRY(large_grid_stride),
             PK_TEST_ENTRY(partials_needed_bounds), PK_TEST_ENTRY(scalar_steps), PK_TEST_ENTRY(folded_steps),
             PK_TEST_ENTRY(unknown_type_refused), PK_TEST_ENTRY(error_report))

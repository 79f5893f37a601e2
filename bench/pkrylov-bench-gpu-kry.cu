/**
 * @file pkrylov-bench-gpu-kry.cu
 * @brief GPU benchmark of the BiCGStab and GMRES families: pkrylov (CUDA and CPU backends) against
 *        BiCGStab and GMRES(m) written with the vendor libraries (cuSPARSE SpMV + cuBLAS), against the GPU's
 *        copy bandwidth measured in the same run.
 *
 *   pkrylov-bench-gpu-kry [--problems LIST] [--restart M] [--step S] [--iters K] [--repeat R] [--cpu-iters K]
 *                         [--cpu-repeat R] [--copy-gib G] [--no-cpu] [--repro] [--json FILE]
 *
 * LIST is a comma-separated list of: all (default: cd:64x64x64, cd:128x128x64, lap:32, lap:64, lap:128),
 * cd:NXxNYxNZ (convection-diffusion, see below), lap:N (CSR 7-point Laplacian on an N^3 grid).
 *
 * CA-GMRES runs with step S (--step, default 5: a divisor of the default restart 30, so that a cycle is whole
 * blocks; the automatic choice times candidates during the first cycle, which would blur a fixed-count
 * timing).
 *
 * Every solve is Jacobi-preconditioned (right preconditioning; the vendor codes apply diag(A)^-1 with
 * cublasDdgmm), from x0 = 0, on the operator in CSR form (the same matrix for every row).
 *
 * Timing: the time per iteration is the difference of two solves with fixed iteration counts, divided by
 * the difference of the counts, best of R. The tolerance is never reached (rtol = 1e-300, atol = 0: every
 * solve, pkrylov and vendor alike, runs exactly maxit iterations; the row is marked "error" when a solve
 * stops earlier, e.g. by a breakdown), so both sides do the same number of iterations; set-up, initial and
 * final residuals cancel out. BiCGStab family: maxit 10 and 10 + K. GMRES family: maxit M and M + M*c
 * (whole restart cycles, M = --restart, default 30, c = max(1, K / M)), so the per-iteration time is that
 * of a whole cycle, with its growing Gram-Schmidt cost and the end-of-cycle update. GPU solves are timed
 * with a host clock after cudaDeviceSynchronize(); pkrylov CUDA solves take b and x as DEVICE pointers.
 *
 * THE VENDOR BASELINES, as a user writes them with cuSPARSE (CSR SpMV, CUSPARSE_SPMV_CSR_ALG1, int32
 * indices) and cuBLAS in CUBLAS_POINTER_MODE_HOST (each dot product and norm returns to the host: one host
 * synchronisation each), on the legacy default stream:
 *  - BiCGStab (van der Vorst, right preconditioned): per iteration rho = (r0, r), p = r + beta (p - omega v),
 *    ph = M^-1 p, v = A ph, alpha = rho / (r0, v), s = r - alpha v, ||s|| (convergence test), sh = M^-1 s,
 *    t = A sh, omega = (t, s) / (t, t), x += alpha ph + omega sh, r = s - omega t, ||r||: 2 SpMV, 2 Jacobi,
 *    6 host synchronisations.
 *  - GMRES(m) with classical Gram-Schmidt (one pass), right preconditioned: per iteration z = M^-1 v_j,
 *    w = A z, h = V_j^T w (cublasDgemv, copied to the host), w -= V_j h (cublasDgemv), ||w|| (host),
 *    v_{j+1} = w / ||w||; the Hessenberg matrix, its Givens rotations and the least-squares solve on the
 *    host; at the end of a cycle x += M^-1 (V y) (cublasDgemv, Jacobi, axpy), and r = b - A x, ||r||.
 *
 * Bytes per iteration (to turn times into bandwidth): one count per method family, the same for every
 * implementation of it (vendor, pkrylov classical, pipelined), so the fraction ranks times; it counts the
 * traffic of the classical method with each vector pass fused as far as its data flow allows:
 *   operator application: CSR 12 B per nonzero + 8 B per row (row pointer) + x and y (16 B per row);
 *   Jacobi: dinv, in, out 24 B per row;
 *   BiCGStab: 2 applications + 2 Jacobi + 18 vector words per row (p update 4, (r0, v) 2, s and ||s|| 3,
 *     (t, s) and (t, t) 2, x update 4, r update and (r0, r) and ||r|| 3);
 *   GMRES(m): per iteration 1 application + 1 Jacobi + (m + 1) + 5 vector words per row on average over a
 *     cycle (Gram-Schmidt: dots read j + 1 basis vectors and w, the update reads them again and writes w,
 *     the normalisation reads w and writes v_{j+1}; mean j = (m - 1) / 2).
 * The copy bandwidth is the faster of a copy kernel and cudaMemcpy over >= 1 GiB (read + write bytes, best
 * of 10), measured at the start of the run (as bench/pkrylov-bench-gpu.cu does, bench_gpu_common.cuh).
 *
 * --repro: reproducible mode against the default mode, per solver, on the GPU: FGMRES and SRCG (SRCG on the
 * symmetric lap: problems only) join the list, and every solver gets, besides its default CUDA row, the
 * rows cuda-repro (a context with pkrylov_context_set_reproducible: the exact sums in the pass of the fused
 * kernels, pk_cuda_xsum.cuh) and cuda-repro-2p (the same with the solver option kry.xfuse=0: the exact sums
 * in a second pass over the vectors, the code before the one-pass sums); their message column gives the
 * time per iteration over the default row's. SRCG's bytes use the BiCGStab count (its fraction column is
 * only indicative).
 *
 * The convection-diffusion problem is the library's pkrylov_operator_create_convdiff (CSR, 7-point,
 * first-order upwind) with wind (1, 0.5, 0.25) and aniso 1: non-symmetric, an M-matrix. It is exported as
 * CSR once (pkrylov_operator_get_csr), so the vendor and every pkrylov row use the same matrix.
 */
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cusparse.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <string>
#include <vector>

#include "pkrylov.h"

#define PKB_PROG "pkrylov-bench-gpu-kry"
#include "bench_gpu_common.cuh" /* CK_CUDA/CK_SPARSE/CK_BLAS, now, random_rhs, copy_bandwidth, js, jn, ... */

/* ---- matrices -------------------------------------------------------------------------------------- */

struct HostCsr {
  int64_t n = 0, nnz = 0;
  std::vector<int32_t> rowptr, col;
  std::vector<double> val;
};

/** 7-point operator on an nx x ny x nz grid, index i + nx (j + ny k): diagonal dg, lower neighbour in
 *  direction d lo[d], upper neighbour up[d] (couplings across the boundary dropped). */
static void grid7_csr(int nx, int ny, int nz, double dg, const double lo[3], const double up[3], HostCsr &A) {
  csr_begin(A, (int64_t)nx * ny * nz, 7);
  const int64_t sx = 1, sy = nx, sz = (int64_t)nx * ny;
  for (int k = 0; k < nz; k++)
    for (int j = 0; j < ny; j++)
      for (int i = 0; i < nx; i++) {
        const int64_t r = i + sy * j + sz * k;
        if (k > 0)
          A.col.push_back((int32_t)(r - sz)), A.val.push_back(lo[2]);
        if (j > 0)
          A.col.push_back((int32_t)(r - sy)), A.val.push_back(lo[1]);
        if (i > 0)
          A.col.push_back((int32_t)(r - sx)), A.val.push_back(lo[0]);
        A.col.push_back((int32_t)r), A.val.push_back(dg);
        if (i < nx - 1)
          A.col.push_back((int32_t)(r + sx)), A.val.push_back(up[0]);
        if (j < ny - 1)
          A.col.push_back((int32_t)(r + sy)), A.val.push_back(up[1]);
        if (k < nz - 1)
          A.col.push_back((int32_t)(r + sz)), A.val.push_back(up[2]);
        A.rowptr[(size_t)r + 1] = (int32_t)A.col.size();
      }
  A.nnz = (int64_t)A.col.size();
}

static void laplacian(int m, HostCsr &A) {
  const double lo[3] = {-1, -1, -1}, up[3] = {-1, -1, -1};
  grid7_csr(m, m, m, 6.0, lo, up, A);
}

/** The library's convection-diffusion operator (pkrylov_operator_create_convdiff, wind kWind, aniso 1) as
 *  host CSR, through pkrylov_operator_get_csr on a CPU context. Returns 0 or the pkrylov status. */
static const double kWind[3] = {1.0, 0.5, 0.25};
static int convdiff(pkrylov_context cpu, int nx, int ny, int nz, HostCsr &A) {
  pkrylov_operator op = NULL;
  int rc = pkrylov_operator_create_convdiff(cpu, nx, ny, nz, kWind, 1.0, &op);
  int64_t n = 0, nnz = 0;
  if (!rc)
    rc = pkrylov_operator_get_info(op, &n, &nnz, NULL, NULL, NULL, NULL);
  std::vector<int64_t> rp, ci;
  if (!rc) {
    rp.resize((size_t)n + 1), ci.resize((size_t)nnz);
    A.val.resize((size_t)nnz);
    rc = pkrylov_operator_get_csr(op, rp.data(), ci.data(), A.val.data());
  }
  pkrylov_operator_destroy(&op);
  if (rc)
    return rc;
  A.n = n, A.nnz = nnz;
  A.rowptr.assign(rp.begin(), rp.end());
  A.col.assign(ci.begin(), ci.end());
  return 0;
}

/* ---- the vendor baselines ---------------------------------------------------------------------------- */

struct Vendor {
  cusparseHandle_t sp = NULL;
  cublasHandle_t bl = NULL;
  int n = 0, m = 0; /* m: GMRES restart */
  int *rowptr = NULL, *col = NULL;
  double *val = NULL, *dinv = NULL;
  cusparseSpMatDescr_t A = NULL;
  void *spmv_buf = NULL;
  /* vectors: b x r r0 p ph v s sh t (BiCGStab), w z (GMRES), V (m + 1 columns) */
  double *b = NULL, *x = NULL, *r = NULL, *r0 = NULL, *p = NULL, *ph = NULL, *v = NULL, *s = NULL, *sh = NULL,
         *t = NULL, *w = NULL, *z = NULL, *V = NULL, *hdev = NULL;
};

static void spmv(Vendor &V, const double *x, double *y) {
  const double one = 1.0, zero = 0.0;
  cusparseDnVecDescr_t dx, dy;
  CK_SPARSE(cusparseCreateDnVec(&dx, V.n, (void *)x, CUDA_R_64F));
  CK_SPARSE(cusparseCreateDnVec(&dy, V.n, y, CUDA_R_64F));
  CK_SPARSE(cusparseSpMV(V.sp, CUSPARSE_OPERATION_NON_TRANSPOSE, &one, V.A, dx, &zero, dy, CUDA_R_64F,
                         CUSPARSE_SPMV_CSR_ALG1, V.spmv_buf));
  cusparseDestroyDnVec(dx);
  cusparseDestroyDnVec(dy);
}

/** y = diag(A)^-1 x. */
static void jacobi(Vendor &V, const double *x, double *y) {
  CK_BLAS(cublasDdgmm(V.bl, CUBLAS_SIDE_LEFT, V.n, 1, x, V.n, V.dinv, 1, y, V.n));
}

static void vendor_setup(Vendor &V, const HostCsr &A, const std::vector<double> &b, int m) {
  V.n = (int)A.n;
  V.m = m;
  const size_t n = (size_t)A.n, nnz = (size_t)A.nnz, vb = n * sizeof(double);
  CK_CUDA(cudaMalloc(&V.rowptr, (n + 1) * sizeof(int)));
  CK_CUDA(cudaMalloc(&V.col, nnz * sizeof(int)));
  CK_CUDA(cudaMalloc(&V.val, nnz * sizeof(double)));
  CK_CUDA(cudaMemcpy(V.rowptr, A.rowptr.data(), (n + 1) * sizeof(int), cudaMemcpyHostToDevice));
  CK_CUDA(cudaMemcpy(V.col, A.col.data(), nnz * sizeof(int), cudaMemcpyHostToDevice));
  CK_CUDA(cudaMemcpy(V.val, A.val.data(), nnz * sizeof(double), cudaMemcpyHostToDevice));
  double **vecs[] = {&V.b, &V.x, &V.r, &V.r0, &V.p, &V.ph, &V.v, &V.s, &V.sh, &V.t, &V.w, &V.z, &V.dinv};
  for (double **p : vecs) {
    CK_CUDA(cudaMalloc(p, vb));
    CK_CUDA(cudaMemset(*p, 0, vb));
  }
  CK_CUDA(cudaMalloc(&V.V, vb * (size_t)(m + 1)));
  CK_CUDA(cudaMalloc(&V.hdev, sizeof(double) * (size_t)(m + 2)));
  CK_CUDA(cudaMemcpy(V.b, b.data(), vb, cudaMemcpyHostToDevice));
  std::vector<double> dv(n, 0.0);
  for (size_t i = 0; i < n; i++)
    for (int e = A.rowptr[i]; e < A.rowptr[i + 1]; e++)
      if (A.col[(size_t)e] == (int)i)
        dv[i] = 1.0 / A.val[(size_t)e];
  CK_CUDA(cudaMemcpy(V.dinv, dv.data(), vb, cudaMemcpyHostToDevice));
  CK_SPARSE(cusparseCreate(&V.sp));
  CK_BLAS(cublasCreate(&V.bl));
  CK_BLAS(cublasSetPointerMode(V.bl, CUBLAS_POINTER_MODE_HOST));
  CK_SPARSE(cusparseCreateCsr(&V.A, A.n, A.n, A.nnz, V.rowptr, V.col, V.val, CUSPARSE_INDEX_32I,
                              CUSPARSE_INDEX_32I, CUSPARSE_INDEX_BASE_ZERO, CUDA_R_64F));
  cusparseDnVecDescr_t dx, dy;
  CK_SPARSE(cusparseCreateDnVec(&dx, V.n, V.x, CUDA_R_64F));
  CK_SPARSE(cusparseCreateDnVec(&dy, V.n, V.t, CUDA_R_64F));
  const double one = 1.0, zero = 0.0;
  size_t sz = 0;
  CK_SPARSE(cusparseSpMV_bufferSize(V.sp, CUSPARSE_OPERATION_NON_TRANSPOSE, &one, V.A, dx, &zero, dy,
                                    CUDA_R_64F, CUSPARSE_SPMV_CSR_ALG1, &sz));
  CK_CUDA(cudaMalloc(&V.spmv_buf, sz ? sz : 16));
  cusparseDestroyDnVec(dx);
  cusparseDestroyDnVec(dy);
  CK_CUDA(cudaDeviceSynchronize());
}

static void vendor_free(Vendor &V) {
  if (V.A)
    cusparseDestroySpMat(V.A);
  if (V.sp)
    cusparseDestroy(V.sp);
  if (V.bl)
    cublasDestroy(V.bl);
  void *ptrs[] = {V.rowptr, V.col, V.val, V.dinv, V.spmv_buf, V.b, V.x, V.r, V.r0,  V.p,
                  V.ph,     V.v,   V.s,   V.sh,   V.t,        V.w, V.z, V.V, V.hdev};
  for (void *p : ptrs)
    if (p)
      cudaFree(p);
  V = Vendor();
}

/** ||b - A x|| / ||b|| (t is overwritten). */
static double vendor_relres(Vendor &V) {
  const double one = 1.0, mone = -1.0;
  double bn, tn;
  spmv(V, V.x, V.t);
  CK_BLAS(cublasDscal(V.bl, V.n, &mone, V.t, 1));
  CK_BLAS(cublasDaxpy(V.bl, V.n, &one, V.b, 1, V.t, 1));
  CK_BLAS(cublasDnrm2(V.bl, V.n, V.t, 1, &tn));
  CK_BLAS(cublasDnrm2(V.bl, V.n, V.b, 1, &bn));
  return tn / bn;
}

/** Vendor BiCGStab from x0 = 0; returns the iterations done (stops at ||r|| <= rtol ||b|| or maxit). */
static int vendor_bicgstab(Vendor &V, int maxit, double rtol) {
  const int n = V.n;
  const size_t vb = (size_t)n * sizeof(double);
  const double one = 1.0;
  CK_CUDA(cudaMemsetAsync(V.x, 0, vb));
  CK_CUDA(cudaMemcpyAsync(V.r, V.b, vb, cudaMemcpyDeviceToDevice));
  CK_CUDA(cudaMemcpyAsync(V.r0, V.b, vb, cudaMemcpyDeviceToDevice));
  CK_CUDA(cudaMemsetAsync(V.p, 0, vb));
  CK_CUDA(cudaMemsetAsync(V.v, 0, vb));
  double bnorm, rnorm, rho_old = 1.0, alpha = 1.0, omega = 1.0;
  CK_BLAS(cublasDnrm2(V.bl, n, V.b, 1, &bnorm));
  rnorm = bnorm;
  int it = 0;
  while (it < maxit && !(rnorm <= rtol * bnorm)) {
    double rho, r0v, ts, tt;
    CK_BLAS(cublasDdot(V.bl, n, V.r0, 1, V.r, 1, &rho));
    if (rho == 0.0)
      break;
    const double beta = (rho / rho_old) * (alpha / omega);
    double momega = -omega;
    CK_BLAS(cublasDaxpy(V.bl, n, &momega, V.v, 1, V.p, 1)); /* p = r + beta (p - omega v) */
    CK_BLAS(cublasDscal(V.bl, n, &beta, V.p, 1));
    CK_BLAS(cublasDaxpy(V.bl, n, &one, V.r, 1, V.p, 1));
    jacobi(V, V.p, V.ph);
    spmv(V, V.ph, V.v);
    CK_BLAS(cublasDdot(V.bl, n, V.r0, 1, V.v, 1, &r0v));
    alpha = rho / r0v;
    const double malpha = -alpha;
    CK_BLAS(cublasDaxpy(V.bl, n, &malpha, V.v, 1, V.r, 1)); /* s (in r) = r - alpha v */
    double snorm;
    CK_BLAS(cublasDnrm2(V.bl, n, V.r, 1, &snorm));
    it++;
    if (snorm <= rtol * bnorm) {
      CK_BLAS(cublasDaxpy(V.bl, n, &alpha, V.ph, 1, V.x, 1));
      rnorm = snorm;
      break;
    }
    jacobi(V, V.r, V.sh);
    spmv(V, V.sh, V.t);
    CK_BLAS(cublasDdot(V.bl, n, V.t, 1, V.r, 1, &ts));
    CK_BLAS(cublasDdot(V.bl, n, V.t, 1, V.t, 1, &tt));
    omega = ts / tt;
    momega = -omega;
    CK_BLAS(cublasDaxpy(V.bl, n, &alpha, V.ph, 1, V.x, 1));
    CK_BLAS(cublasDaxpy(V.bl, n, &omega, V.sh, 1, V.x, 1));
    CK_BLAS(cublasDaxpy(V.bl, n, &momega, V.t, 1, V.r, 1));
    CK_BLAS(cublasDnrm2(V.bl, n, V.r, 1, &rnorm));
    rho_old = rho;
    if (omega == 0.0)
      break;
  }
  CK_CUDA(cudaDeviceSynchronize());
  return it;
}

/** Vendor GMRES(m) from x0 = 0 (see the file comment); returns the iterations done. */
static int vendor_gmres(Vendor &V, int maxit, double rtol) {
  const int n = V.n, m = V.m;
  const size_t vb = (size_t)n * sizeof(double);
  const double one = 1.0, zero = 0.0, mone = -1.0;
  std::vector<double> H((size_t)(m + 1) * m), cs(m), sn(m), g(m + 1), h(m + 1), y(m);
  CK_CUDA(cudaMemsetAsync(V.x, 0, vb));
  double bnorm;
  CK_BLAS(cublasDnrm2(V.bl, n, V.b, 1, &bnorm));
  int it = 0;
  while (it < maxit) {
    /* r = b - A x */
    spmv(V, V.x, V.r);
    CK_BLAS(cublasDscal(V.bl, n, &mone, V.r, 1));
    CK_BLAS(cublasDaxpy(V.bl, n, &one, V.b, 1, V.r, 1));
    double beta;
    CK_BLAS(cublasDnrm2(V.bl, n, V.r, 1, &beta));
    if (beta <= rtol * bnorm || beta == 0.0)
      break;
    const double ib = 1.0 / beta;
    CK_BLAS(cublasDcopy(V.bl, n, V.r, 1, V.V, 1));
    CK_BLAS(cublasDscal(V.bl, n, &ib, V.V, 1));
    std::fill(g.begin(), g.end(), 0.0);
    g[0] = beta;
    int j = 0;
    bool done = false;
    for (; j < m && it < maxit; j++) {
      double *vj = V.V + (size_t)j * n, *vn = V.V + (size_t)(j + 1) * n;
      jacobi(V, vj, V.z);
      spmv(V, V.z, V.w);
      /* classical Gram-Schmidt: h = V^T w, w -= V h */
      CK_BLAS(cublasDgemv(V.bl, CUBLAS_OP_T, n, j + 1, &one, V.V, n, V.w, 1, &zero, V.hdev, 1));
      CK_CUDA(cudaMemcpy(h.data(), V.hdev, sizeof(double) * (size_t)(j + 1), cudaMemcpyDeviceToHost));
      CK_BLAS(cublasDgemv(V.bl, CUBLAS_OP_N, n, j + 1, &mone, V.V, n, V.hdev, 1, &one, V.w, 1));
      double hn;
      CK_BLAS(cublasDnrm2(V.bl, n, V.w, 1, &hn));
      h[(size_t)j + 1] = hn;
      if (hn > 0) {
        const double ih = 1.0 / hn;
        CK_BLAS(cublasDcopy(V.bl, n, V.w, 1, vn, 1));
        CK_BLAS(cublasDscal(V.bl, n, &ih, vn, 1));
      }
      /* Givens on the host */
      for (int i = 0; i < j; i++) {
        const double a = cs[i] * h[i] + sn[i] * h[i + 1];
        h[i + 1] = -sn[i] * h[i] + cs[i] * h[i + 1];
        h[i] = a;
      }
      const double d = hypot(h[j], h[j + 1]);
      cs[j] = d > 0 ? h[j] / d : 1.0;
      sn[j] = d > 0 ? h[j + 1] / d : 0.0;
      h[j] = d;
      h[j + 1] = 0.0;
      g[j + 1] = -sn[j] * g[j];
      g[j] = cs[j] * g[j];
      for (int i = 0; i <= j; i++)
        H[(size_t)i + (size_t)(m + 1) * j] = h[i];
      it++;
      if (fabs(g[j + 1]) <= rtol * bnorm || hn == 0.0) {
        j++;
        done = true;
        break;
      }
    }
    /* y = H^-1 g, x += M^-1 (V y) */
    for (int i = j - 1; i >= 0; i--) {
      double s = g[i];
      for (int k = i + 1; k < j; k++)
        s -= H[(size_t)i + (size_t)(m + 1) * k] * y[k];
      y[i] = s / H[(size_t)i + (size_t)(m + 1) * i];
    }
    CK_CUDA(cudaMemcpy(V.hdev, y.data(), sizeof(double) * (size_t)j, cudaMemcpyHostToDevice));
    CK_BLAS(cublasDgemv(V.bl, CUBLAS_OP_N, n, j, &one, V.V, n, V.hdev, 1, &zero, V.w, 1));
    jacobi(V, V.w, V.z);
    CK_BLAS(cublasDaxpy(V.bl, n, &one, V.z, 1, V.x, 1));
    if (done)
      break;
  }
  CK_CUDA(cudaDeviceSynchronize());
  return it;
}

/* ---- rows -------------------------------------------------------------------------------------------- */

struct Row {
  std::string problem, impl, solver;
  int64_t n = 0, nnz = 0;
  std::string status = "ok", message;
  double t_iter = NAN, bytes = NAN, gbs = NAN, fraction = NAN, vendor_ratio = NAN;
  int its_tol = 0;     /* iterations to rtol 1e-8 (negative: not reached within maxit) */
  double relres = NAN; /* true relative residual of that solve */
};

struct Config {
  int K = 40, R = 3, cpuK = 10, cpuR = 1, m = 30, step = 5, maxit = 2000;
  double copy_gib = 1.0;
  bool cpu = true;
  bool repro = false; /* --repro */
};

static bool is_gmres(int type) {
  return type != PKRYLOV_SOLVER_BICGSTAB && type != PKRYLOV_SOLVER_PIPEBICGSTAB && type != PKRYLOV_SOLVER_SRCG;
}

static const char *solver_name(int type) {
  switch (type) {
  case PKRYLOV_SOLVER_BICGSTAB:
    return "bicgstab";
  case PKRYLOV_SOLVER_PIPEBICGSTAB:
    return "pipebicgstab";
  case PKRYLOV_SOLVER_GMRES:
    return "gmres";
  case PKRYLOV_SOLVER_PIPEGMRES:
    return "pipegmres";
  case PKRYLOV_SOLVER_FGMRES:
    return "fgmres";
  case PKRYLOV_SOLVER_SRCG:
    return "srcg";
  default:
    return "cagmres";
  }
}

/** Bytes per iteration of the method family (see the file comment). */
static double model_bytes(bool gmres, int m, int64_t n, int64_t nnz) {
  const double op = 12.0 * (double)nnz + 8.0 * (double)n + 16.0 * (double)n, jac = 24.0 * (double)n;
  if (!gmres)
    return 2 * op + 2 * jac + 18.0 * 8.0 * (double)n;
  return op + jac + ((double)m + 6.0) * 8.0 * (double)n;
}

/** Iteration counts of the two timed solves. */
static void counts(bool gmres, int K, int m, int *i0, int *i1) {
  if (!gmres) {
    *i0 = 10, *i1 = 10 + K;
  } else {
    const int c = K / m > 1 ? K / m : 1;
    *i0 = m, *i1 = m + c * m;
  }
}

static Row vendor_row(Vendor &V, const Row &proto, const Config &cf, bool gmres) {
  Row row = proto;
  row.impl = "vendor";
  row.solver = gmres ? "gmres" : "bicgstab";
  row.bytes = model_bytes(gmres, cf.m, row.n, row.nnz);
  auto solve = [&](int maxit, double rtol) {
    return gmres ? vendor_gmres(V, maxit, rtol) : vendor_bicgstab(V, maxit, rtol);
  };
  const int its = solve(cf.maxit, 1e-8);
  row.relres = vendor_relres(V);
  row.its_tol = row.relres <= 1.1e-8 ? its : -its;
  int i0, i1;
  counts(gmres, cf.K, cf.m, &i0, &i1);
  row.t_iter = time_per_iteration(
      [&](int k) {
        CK_CUDA(cudaDeviceSynchronize());
        const double t0 = now();
        const int done = solve(k, 1e-300);
        const double t = now() - t0;
        return done == k ? t : -1.0;
      },
      i0, i1, cf.R);
  if (row.t_iter < 0)
    row.status = "error", row.message = "stopped before the fixed iteration count";
  return row;
}

/** One pkrylov row on context ctx (device: b and x are device arrays); impl: the row's name (NULL: by the
 *  backend), xfuse >= 0: the solver option kry.xfuse set to it. */
static Row pk_row(const Row &proto, const Config &cf, pkrylov_context ctx, bool device, const HostCsr &C,
                  const std::vector<double> &b, int type, const char *impl = NULL, int xfuse = -1) {
  Row row = proto;
  row.impl = impl ? impl : device ? "pkrylov-cuda" : "pkrylov-cpu";
  row.solver = solver_name(type);
  const bool gmres = is_gmres(type);
  row.bytes = model_bytes(gmres, cf.m, row.n, row.nnz);
  pkrylov_operator A = NULL;
  pkrylov_precond M = NULL;
  pkrylov_solver s = NULL;
  double *db = NULL, *dx = NULL;
  std::vector<double> hx((size_t)C.n, 0.0);
  const size_t vb = sizeof(double) * (size_t)C.n;
  int rc = pkrylov_operator_create_csr(ctx, (int32_t)C.n, 0, C.rowptr.data(), C.col.data(), C.val.data(), &A);
  if (!rc)
    rc = pkrylov_precond_create(ctx, A, PKRYLOV_PRECOND_JACOBI, 0, PKRYLOV_LAYOUT_AUTO, &M);
  if (!rc)
    rc = pkrylov_solver_create(ctx, type, A, M, &s);
  if (!rc && xfuse >= 0)
    rc = pkrylov_solver_set_option(s, "kry.xfuse", xfuse ? "1" : "0");
  if (!rc)
    rc = pkrylov_solver_set_restart(s, cf.m);
  if (!rc && type == PKRYLOV_SOLVER_CAGMRES)
    rc = pkrylov_solver_set_step(s, cf.step);
  if (!rc && device) {
    CK_CUDA(cudaMalloc(&db, vb));
    CK_CUDA(cudaMalloc(&dx, vb));
    CK_CUDA(cudaMemcpy(db, b.data(), vb, cudaMemcpyHostToDevice));
  }
  const int mem = device ? PKRYLOV_MEM_DEVICE : PKRYLOV_MEM_HOST;
  const double *bp = device ? db : b.data();
  double *xp = device ? dx : hx.data();
  pkrylov_result res;
  if (!rc && (device || C.n <= 300000)) { /* to rtol 1e-8 (CPU: small problems only, to keep the run short) */
    rc = pkrylov_solver_set_tolerances(s, 1e-8, 0.0);
    if (!rc)
      rc = pkrylov_solver_set_max_iterations(s, cf.maxit);
    if (!rc)
      rc = pkrylov_solver_solve(s, mem, bp, xp);
    if (!rc)
      rc = pkrylov_solver_get_result(s, &res);
    if (!rc) {
      row.its_tol = res.converged ? res.iterations : -res.iterations;
      row.relres = res.rel_residual;
    }
  }
  if (!rc)
    rc = pkrylov_solver_set_tolerances(s, 1e-300, 0.0);
  if (rc) {
    row.status = "unavailable";
    row.message = pk_msg(ctx, rc);
  } else {
    int i0, i1;
    const int K = device ? cf.K : cf.cpuK;
    counts(gmres, K, cf.m, &i0, &i1);
    int got = -1;
    row.t_iter = time_per_iteration(
        [&](int k) {
          if (pkrylov_solver_set_max_iterations(s, k))
            return -1.0;
          if (device)
            CK_CUDA(cudaDeviceSynchronize());
          const double t0 = now();
          if (pkrylov_solver_solve(s, mem, bp, xp))
            return -1.0;
          if (device)
            CK_CUDA(cudaDeviceSynchronize());
          const double t = now() - t0;
          pkrylov_result r;
          pkrylov_solver_get_result(s, &r);
          got = r.iterations;
          return r.iterations == k ? t : -1.0;
        },
        i0, i1, device ? cf.R : cf.cpuR);
    if (row.t_iter < 0) {
      row.status = "error";
      char msg[128];
      snprintf(msg, sizeof msg, "stopped before the fixed iteration count (%d iterations)", got);
      row.message = msg;
    }
  }
  pkrylov_solver_destroy(&s);
  pkrylov_precond_destroy(&M);
  pkrylov_operator_destroy(&A);
  if (db)
    cudaFree(db);
  if (dx)
    cudaFree(dx);
  return row;
}

static void print_header(void) {
  printf("%-14s %-13s %-13s %9s %10s %8s %8s %8s %9s  %s\n", "problem", "impl", "solver", "unknowns",
         "us/iter", "GB/s", "of copy", "vend/it", "its@1e-8", "note");
}

static void print_row(const Row &r) {
  char t[32] = "-", g[32] = "-", f[32] = "-", v[32] = "-", it[32] = "-";
  if (r.status == "ok") {
    snprintf(t, sizeof t, "%.2f", r.t_iter * 1e6);
    snprintf(g, sizeof g, "%.1f", r.gbs);
    snprintf(f, sizeof f, "%.0f%%", 100 * r.fraction);
    if (r.vendor_ratio == r.vendor_ratio)
      snprintf(v, sizeof v, "%.2fx", r.vendor_ratio);
  }
  if (r.its_tol)
    snprintf(it, sizeof it, "%d", r.its_tol);
  const std::string note =
      r.status == "ok" ? r.message : r.status + (r.message.empty() ? "" : ": " + r.message);
  printf("%-14s %-13s %-13s %9lld %10s %8s %8s %8s %9s  %s\n", r.problem.c_str(), r.impl.c_str(),
         r.solver.c_str(), (long long)r.n, t, g, f, v, it, note.c_str());
  fflush(stdout);
}

/** The rows so far as JSON (rewritten after every problem, so a run cut short keeps what it measured). */
static int write_json(const char *json, const char *device, double copy_bw, int m,
                      const std::vector<Row> &rows) {
  FILE *f = fopen(json, "w");
  if (!f) {
    perror(json);
    return 1;
  }
  fprintf(f, "{\n  \"device\": %s,\n  \"copy_bandwidth_Bps\": %s,\n  \"restart\": %d,\n  \"rows\": [\n",
          js(device).c_str(), jn(copy_bw).c_str(), m);
  for (size_t i = 0; i < rows.size(); i++) {
    const Row &r = rows[i];
    fprintf(f,
            "    {\"problem\": %s, \"impl\": %s, \"solver\": %s, \"n\": %lld, \"nnz\": %lld, \"status\": %s, "
            "\"message\": %s, \"t_iter_s\": %s, \"bytes\": %s, \"GBps\": %s, \"copy_fraction\": %s, "
            "\"vendor_ratio\": %s, \"its_to_1e-8\": %d, \"relres\": %s}%s\n",
            js(r.problem).c_str(), js(r.impl).c_str(), js(r.solver).c_str(), (long long)r.n, (long long)r.nnz,
            js(r.status).c_str(), js(r.message).c_str(), jn(r.t_iter).c_str(), jn(r.bytes).c_str(),
            jn(r.gbs).c_str(), jn(r.fraction).c_str(), jn(r.vendor_ratio).c_str(), r.its_tol,
            jn(r.relres).c_str(), i + 1 < rows.size() ? "," : "");
  }
  fprintf(f, "  ]\n}\n");
  fclose(f);
  return 0;
}

static const int kTypes[] = {PKRYLOV_SOLVER_BICGSTAB, PKRYLOV_SOLVER_PIPEBICGSTAB, PKRYLOV_SOLVER_GMRES,
                             PKRYLOV_SOLVER_PIPEGMRES, PKRYLOV_SOLVER_CAGMRES};

int main(int argc, char **argv) {
  Config cf;
  std::string problems = "all";
  const char *json = NULL;
  for (int i = 1; i < argc; i++) {
    const std::string a = argv[i];
    const bool has = i + 1 < argc;
    if (a == "--problems" && has)
      problems = argv[++i];
    else if (a == "--restart" && has)
      cf.m = atoi(argv[++i]);
    else if (a == "--step" && has)
      cf.step = atoi(argv[++i]);
    else if (a == "--iters" && has)
      cf.K = atoi(argv[++i]);
    else if (a == "--repeat" && has)
      cf.R = atoi(argv[++i]);
    else if (a == "--cpu-iters" && has)
      cf.cpuK = atoi(argv[++i]);
    else if (a == "--cpu-repeat" && has)
      cf.cpuR = atoi(argv[++i]);
    else if (a == "--copy-gib" && has)
      cf.copy_gib = atof(argv[++i]);
    else if (a == "--json" && has)
      json = argv[++i];
    else if (a == "--no-cpu")
      cf.cpu = false;
    else if (a == "--repro")
      cf.repro = true;
    else {
      fprintf(stderr,
              "usage: %s [--problems LIST] [--restart M] [--step S] [--iters K] [--repeat R] [--cpu-iters K] "
              "[--cpu-repeat R]\n"
              "          [--copy-gib G] [--no-cpu] [--repro] [--json FILE]\n",
              argv[0]);
      return 2;
    }
  }
  if (cf.K < 1 || cf.R < 1 || cf.cpuK < 1 || cf.cpuR < 1 || cf.m < 1 || cf.copy_gib <= 0) {
    fprintf(stderr, "pkrylov-bench-gpu-kry: counts must be >= 1\n");
    return 2;
  }
  if (problems == "all")
    problems = "cd:64x64x64,cd:128x128x64,lap:32,lap:64,lap:128";
  int ndev = 0;
  if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev < 1) {
    fprintf(stderr, "pkrylov-bench-gpu-kry: no CUDA device\n");
    return 2;
  }
  cudaDeviceProp prop;
  CK_CUDA(cudaGetDeviceProperties(&prop, 0));
  double memcpy_bw;
  const double kernel_bw = copy_bandwidth(cf.copy_gib, &memcpy_bw);
  const double copy_bw = kernel_bw > memcpy_bw ? kernel_bw : memcpy_bw; /* the faster of the two */
  printf("device: %s; copy bandwidth %.0f GB/s; restart %d; GPU K %d R %d, CPU K %d R %d\n", prop.name,
         copy_bw / 1e9, cf.m, cf.K, cf.R, cf.cpuK, cf.cpuR);
  pkrylov_context gctx = NULL, cctx = NULL;
  int rc = pkrylov_context_create(PKRYLOV_BACKEND_CUDA, &gctx);
  if (rc)
    fprintf(stderr, "no pkrylov CUDA context: %s\n", pkrylov_error_string(rc));
  pkrylov_context xctx = NULL; /* CPU context for building the matrices */
  if (pkrylov_context_create(PKRYLOV_BACKEND_CPU, &xctx)) {
    fprintf(stderr, "pkrylov-bench-gpu-kry: no CPU context\n");
    return 2;
  }
  if (cf.cpu)
    cctx = xctx;
  pkrylov_context rctx = NULL; /* --repro: a reproducible CUDA context */
  if (cf.repro && gctx && (pkrylov_context_create(PKRYLOV_BACKEND_CUDA, &rctx) ||
                           pkrylov_context_set_reproducible(rctx, 1))) {
    fprintf(stderr, "pkrylov-bench-gpu-kry: no reproducible CUDA context\n");
    return 2;
  }
  std::vector<Row> rows;
  print_header();
  size_t pos = 0;
  while (pos < problems.size()) {
    size_t e = problems.find(',', pos);
    if (e == std::string::npos)
      e = problems.size();
    const std::string p = problems.substr(pos, e - pos);
    pos = e + 1;
    HostCsr C;
    int nx = 0, ny = 0, nz = 0, m = 0;
    if (sscanf(p.c_str(), "cd:%dx%dx%d", &nx, &ny, &nz) == 3 && nx > 0 && ny > 0 && nz > 0) {
      if (convdiff(xctx, nx, ny, nz, C)) {
        fprintf(stderr, "pkrylov-bench-gpu-kry: convdiff %s: %s\n", p.c_str(), pk_msg(xctx, 1).c_str());
        continue;
      }
    } else if (sscanf(p.c_str(), "lap:%d", &m) == 1 && m > 0)
      laplacian(m, C);
    else {
      fprintf(stderr, "pkrylov-bench-gpu-kry: unknown problem '%s'\n", p.c_str());
      continue;
    }
    std::vector<double> b((size_t)C.n);
    random_rhs(b);
    Row proto;
    proto.problem = p;
    proto.n = C.n;
    proto.nnz = C.nnz;
    const size_t first = rows.size();
    Vendor V;
    vendor_setup(V, C, b, cf.m);
    for (int g = 0; g < 2; g++)
      rows.push_back(vendor_row(V, proto, cf, g == 1)), print_row(rows.back());
    vendor_free(V);
    std::vector<int> types(kTypes, kTypes + sizeof kTypes / sizeof kTypes[0]);
    if (rctx) {
      types.push_back(PKRYLOV_SOLVER_FGMRES);
      if (p.compare(0, 4, "lap:") == 0) /* SPD only */
        types.push_back(PKRYLOV_SOLVER_SRCG);
    }
    for (int type : types) {
      if (gctx)
        rows.push_back(pk_row(proto, cf, gctx, true, C, b, type)), print_row(rows.back());
      if (rctx) {
        rows.push_back(pk_row(proto, cf, rctx, true, C, b, type, "cuda-repro", 1)), print_row(rows.back());
        rows.push_back(pk_row(proto, cf, rctx, true, C, b, type, "cuda-repro-2p", 0)), print_row(rows.back());
      }
      if (cctx)
        rows.push_back(pk_row(proto, cf, cctx, false, C, b, type)), print_row(rows.back());
    }
    /* derived columns: bandwidth, ratio to the vendor code of the same family */
    double tv[2] = {NAN, NAN};
    for (size_t i = first; i < rows.size(); i++)
      if (rows[i].impl == "vendor" && rows[i].status == "ok")
        tv[rows[i].solver == "gmres"] = rows[i].t_iter;
    for (size_t i = first; i < rows.size(); i++) {
      Row &r = rows[i];
      if (r.status != "ok")
        continue;
      /* a time that is not positive, or above the copy bandwidth, is flagged */
      if (const char *flag = pkb_flag(r.t_iter, r.bytes, copy_bw))
        r.message = r.message.empty() ? flag : r.message + "; " + flag;
      r.gbs = r.bytes / r.t_iter / 1e9;
      r.fraction = r.bytes / r.t_iter / copy_bw;
      const bool g = r.solver != "bicgstab" && r.solver != "pipebicgstab";
      r.vendor_ratio = tv[g] / r.t_iter;
      if (r.impl.compare(0, 10, "cuda-repro") == 0) /* over the default CUDA row of the solver */
        for (size_t k = first; k < rows.size(); k++)
          if (rows[k].impl == "pkrylov-cuda" && rows[k].solver == r.solver && rows[k].status == "ok") {
            char t[64];
            snprintf(t, sizeof t, "%.2fx the default mode", r.t_iter / rows[k].t_iter);
            r.message = r.message.empty() ? t : r.message + "; " + t;
          }
    }
    printf("-- %s (derived columns filled in):\n", p.c_str());
    for (size_t i = first; i < rows.size(); i++)
      print_row(rows[i]);
    if (json && write_json(json, prop.name, copy_bw, cf.m, rows))
      return 1;
  }
  if (json && write_json(json, prop.name, copy_bw, cf.m, rows))
    return 1;
  if (gctx)
    pkrylov_context_destroy(&gctx);
  if (rctx)
    pkrylov_context_destroy(&rctx);
  pkrylov_context_destroy(&xctx);
  return 0;
}

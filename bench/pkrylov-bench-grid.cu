/**
 * @file pkrylov-bench-grid.cu
 * @brief Benchmark of the models' own grids on one GPU (issue "drop-in at production shape"): the 2-D
 *        free-surface (barotropic) solve with the approximate-inverse preconditioner against a vendor PCG,
 *        the 3-D thin shell in column-stencil form on several tiles against one tile, and the cube sphere.
 *
 *   pkrylov-bench-grid [--problems LIST] [--iters K] [--repeat R] [--maxit N] [--json FILE] [--no-cpu] [--repro]
 *
 * LIST, separated by ';': baro:NX,NY (the barotropic basin, pkrylov_barotropic_coefficients; pkrylov on 2 x 2
 * tiles of one GPU; baro:NX,NY:jacobi the pkrylov rows with the Jacobi preconditioner, no vendor or CPU
 * row), ts:NX,NY,NZ (the thin shell as a column stencil: one tile through
 * pkrylov_operator_create_stencil7, one tile and 2 x 2 tiles through the grid), cube:N,NZ (the thin shell on
 * the six faces of the cube, one tile per face). Default: baro:256,256, baro:1024,1024, baro:4096,2048,
 * ts:256,256,128, cube:256,64.
 *
 * Timing: a solve of i0 = 10 and one of i1 = 10 + K iterations (a tolerance never reached), each the least
 * of R runs, t = (t(i1) - t(i0)) / K per iteration; b and x are DEVICE arrays, so no transfer is timed;
 * residual replacement off. Iterations to rtol 1e-8 from a separate solve (negative: not reached within
 * --maxit). The vendor baseline is PCG as a user writes it with cuSPARSE and cuBLAS on the legacy stream,
 * scalars returned to the host (cuBLAS pointer mode host): q = A p (SpMV), (p, q), x += alpha p, r -= alpha
 * q, ||r||, z = P r (the same approximate inverse as a CSR matrix, SpMV), (r, z), p = z + beta p. Bandwidth
 * fractions are of the copy bandwidth measured at the start (bench_gpu_common.cuh), with the byte model
 * printed in the table (words of 8 bytes per cell and iteration).
 *
 * --repro: each pkrylov GPU row of baro and ts again in reproducible mode (pkrylov_context_set_reproducible on
 * the same context, operator and preconditioner), impl "... repro", right after the default row, so the ratio
 * of the two is from the same run; kry.xfuse=0 through PKRYLOV_OPTIONS gives the exact sums' second pass.
 */
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cusparse.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <string>
#include <vector>

#include "pkrylov.h"

#define PKB_PROG "pkrylov-bench-grid"
#include "bench_gpu_common.cuh"

struct HostCsr {
  int64_t n = 0;
  std::vector<int64_t> rowptr, col;
  std::vector<double> val;
};

struct Row {
  std::string problem, impl, solver, precond;
  int64_t n = 0;
  double t_iter = -1, words = 0;
  int its_tol = 0;
  double relres = -1;
  std::string status = "ok", message;
};

struct Config {
  int K = 200, R = 5, maxit = 5000;
  bool cpu = true;
  bool repro = false; /* --repro */
  double copy_bw = 0;
};

/* ---- tiling a global field into the model's halo'd arrays --------------------------------------- */

/** nTx x nTy tiles of (nx/nTx) x (ny/nTy) columns, halo 1, nz levels, tile (tx, ty) the array's tile tx + nTx ty. */
static std::vector<double> tile_field(const double *g, int64_t nx, int64_t ny, int64_t nz, int ntx, int nty) {
  const int64_t snx = nx / ntx, sny = ny / nty, hx = snx + 2, hy = sny + 2;
  std::vector<double> h((size_t)(hx * hy * nz * ntx * nty), 0.0);
  for (int64_t t = 0; t < ntx * nty; t++)
    for (int64_t k = 0; k < nz; k++)
      for (int64_t j = 0; j < sny; j++)
        for (int64_t i = 0; i < snx; i++) {
          const int64_t gi = (t % ntx) * snx + i, gj = (t / ntx) * sny + j;
          h[(size_t)((i + 1) + hx * ((j + 1) + hy * (k + nz * t)))] = g[gi + nx * (gj + ny * k)];
        }
  return h;
}

static std::vector<int32_t> tile_mask(const int32_t *g, int64_t nx, int64_t ny, int ntx, int nty) {
  std::vector<double> d((size_t)(nx * ny));
  for (int64_t i = 0; i < nx * ny; i++) d[(size_t)i] = g[i];
  std::vector<double> h = tile_field(d.data(), nx, ny, 1, ntx, nty);
  std::vector<int32_t> m(h.size());
  for (size_t i = 0; i < h.size(); i++) m[i] = h[i] != 0.0;
  return m;
}

/** A grid stencil of ntx x nty tiles (one rank) of a global rectangle. */
static int grid_op(pkrylov_context ctx, int64_t nx, int64_t ny, int64_t nz, int ntx, int nty, int periodic,
                   const double *w, const double *s, const double *v, const double *c, const int32_t *mask,
                   pkrylov_grid *g, pkrylov_operator *A) {
  std::vector<int32_t> conn((size_t)(12 * ntx * nty)), tiles((size_t)(ntx * nty));
  for (int t = 0; t < ntx * nty; t++) tiles[(size_t)t] = t;
  int rc = pkrylov_grid_connect_rect(ntx, nty, periodic, conn.data());
  if (!rc) rc = pkrylov_grid_create(ctx, (int32_t)(nx / ntx), (int32_t)(ny / nty), 1, 1, ntx * nty, conn.data(),
                                    ntx * nty, tiles.data(), g);
  if (rc) return rc;
  std::vector<double> hw = tile_field(w, nx, ny, nz, ntx, nty), hs = tile_field(s, nx, ny, nz, ntx, nty);
  std::vector<double> hc = tile_field(c, nx, ny, nz, ntx, nty), hv;
  if (v) hv = tile_field(v, nx, ny, nz, ntx, nty);
  std::vector<int32_t> hm;
  if (mask) hm = tile_mask(mask, nx, ny, ntx, nty);
  return pkrylov_operator_create_grid_stencil(*g, (int32_t)nz, hw.data(), hs.data(), v ? hv.data() : NULL, hc.data(),
                                              mask ? hm.data() : NULL, A);
}

/* ---- pkrylov rows ------------------------------------------------------------------------------------ */

/** Time per iteration and iterations to 1e-8 of (A, M) with solver type st on ctx; b, x in memory mem. */
static Row pk_row(Row row, pkrylov_context ctx, pkrylov_operator A, pkrylov_precond M, int st, int mem,
                  const double *b, double *x, const Config &cf) {
  pkrylov_solver s = NULL;
  int rc = pkrylov_solver_create(ctx, st, A, M, &s);
  if (rc) {
    row.status = "unavailable", row.message = pk_msg(ctx, rc);
    return row;
  }
  pkrylov_solver_set_residual_replacement(s, 0);
  std::string err;
  auto solve = [&](int its, double rtol) -> double {
    pkrylov_solver_set_max_iterations(s, its);
    pkrylov_solver_set_tolerances(s, rtol, 0.0);
    cudaDeviceSynchronize();
    const double t0 = now();
    const int e = pkrylov_solver_solve(s, mem, b, x);
    cudaDeviceSynchronize();
    const double t = now() - t0;
    if (e) {
      err = pk_msg(ctx, e);
      return -1;
    }
    return t;
  };
  if (solve(cf.maxit, 1e-8) < 0) {
    row.status = "error", row.message = err;
    pkrylov_solver_destroy(&s);
    return row;
  }
  pkrylov_result res;
  pkrylov_solver_get_result(s, &res);
  row.its_tol = res.converged ? res.iterations : -res.iterations;
  row.relres = res.rel_residual;
  /* the least of R solves of i0 and of i1 iterations, each on its own */
  const int i0 = 10, i1 = 10 + cf.K;
  double t0 = INFINITY, t1 = INFINITY;
  for (int r = 0; r < cf.R; r++) {
    const double a = solve(i0, 1e-300), c = solve(i1, 1e-300);
    if (a < 0 || c < 0) {
      row.status = "error", row.message = err;
      break;
    }
    t0 = fmin(t0, a), t1 = fmin(t1, c);
  }
  if (row.status == "ok") row.t_iter = (t1 - t0) / cf.K;
  pkrylov_solver_destroy(&s);
  return row;
}

/* ---- the vendor PCG ---------------------------------------------------------------------------------- */

struct Vendor {
  cusparseHandle_t sp = NULL;
  cublasHandle_t bl = NULL;
  int n = 0;
  int *rp[2] = {NULL, NULL}, *ci[2] = {NULL, NULL};
  double *va[2] = {NULL, NULL};
  cusparseSpMatDescr_t M[2] = {NULL, NULL}; /* A, P */
  cusparseDnVecDescr_t vp = NULL, vq = NULL, vr = NULL, vz = NULL;
  void *buf[2] = {NULL, NULL};
  double *b = NULL, *x = NULL, *r = NULL, *z = NULL, *p = NULL, *q = NULL;
};

static void vendor_setup(Vendor &V, const HostCsr *mats, const double *b) {
  V.n = (int)mats[0].n;
  const size_t n = (size_t)V.n, vb = n * sizeof(double);
  CK_SPARSE(cusparseCreate(&V.sp));
  CK_BLAS(cublasCreate(&V.bl));
  CK_BLAS(cublasSetPointerMode(V.bl, CUBLAS_POINTER_MODE_HOST));
  double **vecs[] = {&V.b, &V.x, &V.r, &V.z, &V.p, &V.q};
  for (double **v : vecs) {
    CK_CUDA(cudaMalloc(v, vb));
    CK_CUDA(cudaMemset(*v, 0, vb));
  }
  CK_CUDA(cudaMemcpy(V.b, b, vb, cudaMemcpyHostToDevice));
  CK_SPARSE(cusparseCreateDnVec(&V.vp, V.n, V.p, CUDA_R_64F));
  CK_SPARSE(cusparseCreateDnVec(&V.vq, V.n, V.q, CUDA_R_64F));
  CK_SPARSE(cusparseCreateDnVec(&V.vr, V.n, V.r, CUDA_R_64F));
  CK_SPARSE(cusparseCreateDnVec(&V.vz, V.n, V.z, CUDA_R_64F));
  for (int m = 0; m < 2; m++) {
    const HostCsr &A = mats[m];
    const size_t nnz = A.val.size();
    std::vector<int> rp(n + 1), ci(nnz);
    for (size_t i = 0; i <= n; i++) rp[i] = (int)A.rowptr[i];
    for (size_t i = 0; i < nnz; i++) ci[i] = (int)A.col[i];
    CK_CUDA(cudaMalloc(&V.rp[m], (n + 1) * sizeof(int)));
    CK_CUDA(cudaMalloc(&V.ci[m], nnz * sizeof(int)));
    CK_CUDA(cudaMalloc(&V.va[m], nnz * sizeof(double)));
    CK_CUDA(cudaMemcpy(V.rp[m], rp.data(), (n + 1) * sizeof(int), cudaMemcpyHostToDevice));
    CK_CUDA(cudaMemcpy(V.ci[m], ci.data(), nnz * sizeof(int), cudaMemcpyHostToDevice));
    CK_CUDA(cudaMemcpy(V.va[m], A.val.data(), nnz * sizeof(double), cudaMemcpyHostToDevice));
    CK_SPARSE(cusparseCreateCsr(&V.M[m], V.n, V.n, (int64_t)nnz, V.rp[m], V.ci[m], V.va[m], CUSPARSE_INDEX_32I,
                                CUSPARSE_INDEX_32I, CUSPARSE_INDEX_BASE_ZERO, CUDA_R_64F));
    const double one = 1.0, zero = 0.0;
    size_t sz = 0;
    CK_SPARSE(cusparseSpMV_bufferSize(V.sp, CUSPARSE_OPERATION_NON_TRANSPOSE, &one, V.M[m], V.vp, &zero, V.vq,
                                      CUDA_R_64F, CUSPARSE_SPMV_CSR_ALG1, &sz));
    CK_CUDA(cudaMalloc(&V.buf[m], sz ? sz : 16));
  }
  CK_CUDA(cudaDeviceSynchronize());
}

static void vendor_free(Vendor &V) {
  for (int m = 0; m < 2; m++) {
    if (V.M[m]) cusparseDestroySpMat(V.M[m]);
    cudaFree(V.rp[m]), cudaFree(V.ci[m]), cudaFree(V.va[m]), cudaFree(V.buf[m]);
  }
  cusparseDnVecDescr_t dv[] = {V.vp, V.vq, V.vr, V.vz};
  for (auto d : dv)
    if (d) cusparseDestroyDnVec(d);
  double *vecs[] = {V.b, V.x, V.r, V.z, V.p, V.q};
  for (double *v : vecs) cudaFree(v);
  if (V.sp) cusparseDestroy(V.sp);
  if (V.bl) cublasDestroy(V.bl);
  V = Vendor();
}

/** PCG from x = 0, at most maxit iterations or ||r|| <= rtol ||b||; iterations done. */
static int vendor_solve(Vendor &V, int maxit, double rtol) {
  const int n = V.n;
  const double one = 1.0, zero = 0.0;
  const size_t vb = (size_t)n * sizeof(double);
  CK_CUDA(cudaMemsetAsync(V.x, 0, vb));
  CK_CUDA(cudaMemcpyAsync(V.r, V.b, vb, cudaMemcpyDeviceToDevice));
  double bnorm, rnorm, rho, rho_new, pq;
  CK_BLAS(cublasDnrm2(V.bl, n, V.b, 1, &bnorm));
  rnorm = bnorm;
  CK_SPARSE(cusparseSpMV(V.sp, CUSPARSE_OPERATION_NON_TRANSPOSE, &one, V.M[1], V.vr, &zero, V.vz, CUDA_R_64F,
                         CUSPARSE_SPMV_CSR_ALG1, V.buf[1]));
  CK_BLAS(cublasDdot(V.bl, n, V.r, 1, V.z, 1, &rho));
  CK_BLAS(cublasDcopy(V.bl, n, V.z, 1, V.p, 1));
  int it = 0;
  while (it < maxit && !(rnorm <= rtol * bnorm)) {
    CK_SPARSE(cusparseSpMV(V.sp, CUSPARSE_OPERATION_NON_TRANSPOSE, &one, V.M[0], V.vp, &zero, V.vq, CUDA_R_64F,
                           CUSPARSE_SPMV_CSR_ALG1, V.buf[0]));
    CK_BLAS(cublasDdot(V.bl, n, V.p, 1, V.q, 1, &pq));
    const double alpha = rho / pq, malpha = -alpha;
    CK_BLAS(cublasDaxpy(V.bl, n, &alpha, V.p, 1, V.x, 1));
    CK_BLAS(cublasDaxpy(V.bl, n, &malpha, V.q, 1, V.r, 1));
    it++;
    CK_BLAS(cublasDnrm2(V.bl, n, V.r, 1, &rnorm));
    if (rnorm <= rtol * bnorm) break;
    CK_SPARSE(cusparseSpMV(V.sp, CUSPARSE_OPERATION_NON_TRANSPOSE, &one, V.M[1], V.vr, &zero, V.vz, CUDA_R_64F,
                           CUSPARSE_SPMV_CSR_ALG1, V.buf[1]));
    CK_BLAS(cublasDdot(V.bl, n, V.r, 1, V.z, 1, &rho_new));
    const double beta = rho_new / rho;
    rho = rho_new;
    CK_BLAS(cublasDscal(V.bl, n, &beta, V.p, 1));
    CK_BLAS(cublasDaxpy(V.bl, n, &one, V.z, 1, V.p, 1));
  }
  CK_CUDA(cudaDeviceSynchronize());
  return it;
}

static Row vendor_row(Row row, Vendor &V, const Config &cf) {
  const int its = vendor_solve(V, cf.maxit, 1e-8);
  row.its_tol = its < cf.maxit ? its : -its;
  const int i0 = 10, i1 = 10 + cf.K;
  double t0 = INFINITY, t1 = INFINITY;
  for (int r = 0; r < cf.R; r++) {
    double a = now();
    vendor_solve(V, i0, 1e-300);
    a = now() - a;
    double c = now();
    vendor_solve(V, i1, 1e-300);
    c = now() - c;
    t0 = fmin(t0, a), t1 = fmin(t1, c);
  }
  row.t_iter = (t1 - t0) / cf.K;
  return row;
}

/** CSR export of a (single-rank) operator. */
static int export_csr(pkrylov_operator A, HostCsr &C) {
  int64_t n = 0, nnz = 0;
  pkrylov_operator_get_info(A, &n, &nnz, NULL, NULL, NULL, NULL);
  if (nnz < 0) return PKRYLOV_ERR_UNSUPPORTED;
  C.n = n;
  C.rowptr.resize((size_t)n + 1);
  C.col.resize((size_t)nnz);
  C.val.resize((size_t)nnz);
  return pkrylov_operator_get_csr(A, C.rowptr.data(), C.col.data(), C.val.data());
}

/**
 * The approximate inverse of MITgcm's formula as a CSR matrix, from A's CSR (compact order): P_ii = 1/a_ii
 * (1 where 0), P_ij = -a_ij / (f (a_ii + a_jj))^2 (0 where a diagonal is 0).
 */
static void ainv_csr(const HostCsr &A, double f, HostCsr &P) {
  P = A;
  std::vector<double> d((size_t)A.n, 0.0);
  for (int64_t i = 0; i < A.n; i++)
    for (int64_t e = A.rowptr[(size_t)i]; e < A.rowptr[(size_t)i + 1]; e++)
      if (A.col[(size_t)e] == i) d[(size_t)i] = A.val[(size_t)e];
  for (int64_t i = 0; i < A.n; i++)
    for (int64_t e = A.rowptr[(size_t)i]; e < A.rowptr[(size_t)i + 1]; e++) {
      const int64_t j = A.col[(size_t)e];
      if (j == i) {
        P.val[(size_t)e] = d[(size_t)i] == 0 ? 1.0 : 1.0 / d[(size_t)i];
      } else {
        const double t = f * (d[(size_t)i] + d[(size_t)j]);
        P.val[(size_t)e] = (d[(size_t)i] == 0 || d[(size_t)j] == 0) ? 0.0 : -A.val[(size_t)e] / (t * t);
      }
    }
}

/* ---- output --------------------------------------------------------------------------------------- */

static void print_row(const Row &r, double copy_bw) {
  const double gbs = r.t_iter > 0 ? r.words * 8.0 * (double)r.n / r.t_iter / 1e9 : 0;
  printf("%-22s %-22s %-7s %-7s %10lld %9.2f %7d %8.1f %6.1f%%  %s%s\n", r.problem.c_str(), r.impl.c_str(),
         r.solver.c_str(), r.precond.c_str(), (long long)r.n, r.t_iter * 1e6, r.its_tol, gbs,
         copy_bw > 0 ? 100.0 * gbs * 1e9 / copy_bw : 0.0, r.status == "ok" ? "" : r.status.c_str(),
         r.message.empty() ? "" : (" " + r.message).c_str());
  fflush(stdout);
}

static const char *solver_name(int st) { return st == PKRYLOV_SOLVER_CG ? "cg" : "pipecg"; }

/**
 * Vector and coefficient words per cell and iteration of the fused CUDA paths (the byte model), approximate:
 * CG + column: precond loop r,q,l,1/d -> r,z (6), operator loop z,p,q,x + 4 coefficients -> x,p,q (11);
 * CG + AINV (2-D): r -= alpha q (3), z = P r: r + 3 coefficients + 1 (aV) -> z (5), operator loop 4 + 4 -> 3 (11);
 * pipelined CG: m = M^-1 w (column 4, AINV 5), the update 9 in + 8 out + 4 coefficients (21).
 */
static double words(int st, bool ainv) {
  if (st == PKRYLOV_SOLVER_CG) return ainv ? 19 : 17;
  return ainv ? 26 : 25;
}

int main(int argc, char **argv) {
  Config cf;
  std::string problems = "baro:256,256;baro:1024,1024;baro:4096,2048;ts:256,256,128;cube:256,64", json;
  for (int a = 1; a < argc; a++) {
    std::string o = argv[a];
    if (o == "--problems" && a + 1 < argc) problems = argv[++a];
    else if (o == "--iters" && a + 1 < argc) cf.K = atoi(argv[++a]);
    else if (o == "--repeat" && a + 1 < argc) cf.R = atoi(argv[++a]);
    else if (o == "--maxit" && a + 1 < argc) cf.maxit = atoi(argv[++a]);
    else if (o == "--json" && a + 1 < argc) json = argv[++a];
    else if (o == "--no-cpu") cf.cpu = false;
    else if (o == "--repro") cf.repro = true;
    else {
      fprintf(stderr,
              "usage: %s [--problems LIST] [--iters K] [--repeat R] [--maxit N] [--json FILE] [--no-cpu] [--repro]\n",
              argv[0]);
      return 2;
    }
  }
  int ndev = 0;
  if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev == 0) {
    fprintf(stderr, PKB_PROG ": no GPU\n");
    return 77;
  }
  cudaDeviceProp prop;
  CK_CUDA(cudaGetDeviceProperties(&prop, 0));
  double mcpy = 0;
  cf.copy_bw = copy_bandwidth(1.0, &mcpy);
  printf("# %s on %s; copy bandwidth %.0f GB/s (cudaMemcpy %.0f); K = %d, R = %d\n", PKB_PROG, prop.name,
         cf.copy_bw / 1e9, mcpy / 1e9, cf.K, cf.R);
  printf("%-22s %-22s %-7s %-7s %10s %9s %7s %8s %7s\n", "problem", "impl", "solver", "precond", "cells", "us/iter",
         "its1e-8", "GB/s", "copy%");
  std::vector<Row> rows;
  pkrylov_context gctx = NULL, cctx = NULL;
  if (pkrylov_context_create(PKRYLOV_BACKEND_CUDA, &gctx)) {
    fprintf(stderr, PKB_PROG ": CUDA context: %s\n", pkrylov_last_error_message());
    return 2;
  }
  pkrylov_context_create(PKRYLOV_BACKEND_CPU, &cctx);
  size_t pos = 0;
  while (pos <= problems.size()) {
    size_t end = problems.find(';', pos);
    if (end == std::string::npos) end = problems.size();
    const std::string p = problems.substr(pos, end - pos);
    pos = end + 1;
    if (p.empty()) continue;
    int a1 = 0, a2 = 0, a3 = 0;
    char pcname[16] = "";
    if (sscanf(p.c_str(), "baro:%d,%d:%15s", &a1, &a2, pcname) >= 2) {
      const bool jacobi = std::string(pcname) == "jacobi";
      if (pcname[0] && !jacobi) {
        fprintf(stderr, "%s: unknown preconditioner '%s' (jacobi, or none for the approximate inverse)\n",
                p.c_str(), pcname);
        continue;
      }
      const int64_t nx = a1, ny = a2, n = nx * ny;
      std::vector<double> w((size_t)n), s((size_t)n), c((size_t)n), b((size_t)n);
      std::vector<int32_t> mask((size_t)n);
      if (pkrylov_barotropic_coefficients(a1, a2, PKRYLOV_PERIODIC_X, w.data(), s.data(), c.data(), mask.data())) {
        fprintf(stderr, "%s: %s\n", p.c_str(), pkrylov_last_error_message());
        continue;
      }
      random_rhs(b);
      for (int64_t i = 0; i < n; i++)
        if (!mask[(size_t)i]) b[(size_t)i] = 0.0; /* no source on land (pkrylov ignores it, the vendor PCG not) */
      const int ntx = nx % 2 == 0 ? 2 : 1, nty = ny % 2 == 0 ? 2 : 1;
      pkrylov_grid g = NULL, gc = NULL;
      pkrylov_operator A = NULL, Ac = NULL;
      pkrylov_precond M = NULL, Mc = NULL;
      int rc = grid_op(gctx, nx, ny, 1, ntx, nty, PKRYLOV_PERIODIC_X, w.data(), s.data(), NULL, c.data(),
                       mask.data(), &g, &A);
      if (!rc)
        rc = jacobi ? pkrylov_precond_create(gctx, A, PKRYLOV_PRECOND_JACOBI, 0, PKRYLOV_LAYOUT_KSLOW, &M)
                    : pkrylov_precond_create_ainv(gctx, A, 0.51, &M);
      if (rc) {
        fprintf(stderr, "%s: %s\n", p.c_str(), pk_msg(gctx, rc).c_str());
        continue;
      }
      /* b in the compact order, on the device */
      std::vector<double> bh = tile_field(b.data(), nx, ny, 1, ntx, nty), bc((size_t)n);
      pkrylov_grid_pack(g, 1, PKRYLOV_MEM_HOST, bh.data(), bc.data());
      double *db, *dx;
      CK_CUDA(cudaMalloc(&db, sizeof(double) * n));
      CK_CUDA(cudaMalloc(&dx, sizeof(double) * n));
      CK_CUDA(cudaMemcpy(db, bc.data(), sizeof(double) * n, cudaMemcpyHostToDevice));
      Row proto;
      proto.problem = p, proto.n = n, proto.precond = jacobi ? "jacobi" : "ainv";
      for (int st : {PKRYLOV_SOLVER_CG, PKRYLOV_SOLVER_PIPECG}) {
        Row r = proto;
        r.impl = "pkrylov-cuda 2x2 tiles", r.solver = solver_name(st), r.words = words(st, true);
        rows.push_back(pk_row(r, gctx, A, M, st, PKRYLOV_MEM_DEVICE, db, dx, cf));
        print_row(rows.back(), cf.copy_bw);
        if (cf.repro) {
          pkrylov_context_set_reproducible(gctx, 1);
          r.impl = "pkrylov-cuda 2x2 tiles repro";
          rows.push_back(pk_row(r, gctx, A, M, st, PKRYLOV_MEM_DEVICE, db, dx, cf));
          print_row(rows.back(), cf.copy_bw);
          pkrylov_context_set_reproducible(gctx, 0);
        }
      }
      /* the vendor PCG on the same matrix (the CPU grid operator's CSR export) and preconditioner */
      if (!jacobi && !grid_op(cctx, nx, ny, 1, ntx, nty, PKRYLOV_PERIODIC_X, w.data(), s.data(), NULL, c.data(),
                              mask.data(), &gc, &Ac)) {
        HostCsr mats[2];
        if (!export_csr(Ac, mats[0])) {
          ainv_csr(mats[0], 0.51, mats[1]);
          Vendor V;
          vendor_setup(V, mats, bc.data());
          Row r = proto;
          r.impl = "vendor cusparse+cublas", r.solver = "cg", r.words = 0;
          rows.push_back(vendor_row(r, V, cf));
          print_row(rows.back(), cf.copy_bw);
          vendor_free(V);
        }
        if (cf.cpu && n <= (1 << 22)) {
          pkrylov_precond_create_ainv(cctx, Ac, 0.51, &Mc);
          std::vector<double> hx((size_t)n);
          Row r = proto;
          r.impl = "pkrylov-cpu", r.solver = "cg", r.words = words(PKRYLOV_SOLVER_CG, true);
          Config c2 = cf;
          c2.K = cf.K / 4 > 10 ? cf.K / 4 : 10, c2.R = 3;
          rows.push_back(pk_row(r, cctx, Ac, Mc, PKRYLOV_SOLVER_CG, PKRYLOV_MEM_HOST, bc.data(), hx.data(), c2));
          print_row(rows.back(), cf.copy_bw);
        }
      }
      cudaFree(db), cudaFree(dx);
      pkrylov_precond_destroy(&Mc), pkrylov_operator_destroy(&Ac), pkrylov_grid_destroy(&gc);
      pkrylov_precond_destroy(&M), pkrylov_operator_destroy(&A), pkrylov_grid_destroy(&g);
    } else if (sscanf(p.c_str(), "ts:%d,%d,%d", &a1, &a2, &a3) == 3) {
      const int64_t nx = a1, ny = a2, nz = a3, n = nx * ny * nz;
      pkrylov_thinshell_params tp;
      pkrylov_thinshell_params_default(a1, a2, a3, &tp);
      std::vector<double> w((size_t)n), s((size_t)n), v((size_t)n), c((size_t)n), b((size_t)n);
      pkrylov_thinshell_stencil_coefficients(&tp, w.data(), s.data(), v.data(), c.data());
      random_rhs(b);
      double *db, *dx;
      CK_CUDA(cudaMalloc(&db, sizeof(double) * n));
      CK_CUDA(cudaMalloc(&dx, sizeof(double) * n));
      Row proto;
      proto.problem = p, proto.n = n, proto.precond = "column";
      /* one tile: the plain column stencil (the path of the earlier sessions), then the grid, 1 and 2 x 2 tiles */
      for (int variant = 0; variant < 3; variant++) {
        pkrylov_grid g = NULL;
        pkrylov_operator A = NULL;
        pkrylov_precond M = NULL;
        int rc;
        std::vector<double> bc((size_t)n);
        if (variant == 0) {
          rc = pkrylov_operator_create_stencil7(gctx, a1, a2, a3, w.data(), s.data(), v.data(), c.data(), NULL, &A);
          bc = b;
        } else {
          const int t = variant == 1 ? 1 : 2;
          rc = grid_op(gctx, nx, ny, nz, t, t, PKRYLOV_PERIODIC_NONE, w.data(), s.data(), v.data(), c.data(), NULL,
                       &g, &A);
          if (!rc) {
            std::vector<double> bh = tile_field(b.data(), nx, ny, nz, t, t);
            pkrylov_grid_pack(g, a3, PKRYLOV_MEM_HOST, bh.data(), bc.data());
          }
        }
        if (!rc) rc = pkrylov_precond_create(gctx, A, PKRYLOV_PRECOND_COLUMN, 0, PKRYLOV_LAYOUT_AUTO, &M);
        if (rc) {
          fprintf(stderr, "%s: %s\n", p.c_str(), pk_msg(gctx, rc).c_str());
        } else {
          CK_CUDA(cudaMemcpy(db, bc.data(), sizeof(double) * n, cudaMemcpyHostToDevice));
          for (int st : {PKRYLOV_SOLVER_CG, PKRYLOV_SOLVER_PIPECG}) {
            Row r = proto;
            r.impl = variant == 0 ? "stencil7 one tile" : variant == 1 ? "grid 1 tile" : "grid 2x2 tiles";
            r.solver = solver_name(st), r.words = words(st, false);
            rows.push_back(pk_row(r, gctx, A, M, st, PKRYLOV_MEM_DEVICE, db, dx, cf));
            print_row(rows.back(), cf.copy_bw);
            if (cf.repro && variant != 1) {
              pkrylov_context_set_reproducible(gctx, 1);
              r.impl += " repro";
              rows.push_back(pk_row(r, gctx, A, M, st, PKRYLOV_MEM_DEVICE, db, dx, cf));
              print_row(rows.back(), cf.copy_bw);
              pkrylov_context_set_reproducible(gctx, 0);
            }
          }
        }
        pkrylov_precond_destroy(&M), pkrylov_operator_destroy(&A), pkrylov_grid_destroy(&g);
      }
      cudaFree(db), cudaFree(dx);
    } else if (sscanf(p.c_str(), "cube:%d,%d", &a1, &a2) == 2) {
      const int64_t N = a1, nz = a2, n = 6 * N * N * nz;
      pkrylov_thinshell_params tp;
      pkrylov_thinshell_params_default(a1, a1, a2, &tp);
      std::vector<double> w((size_t)n), s((size_t)n), v((size_t)n), c((size_t)n), b((size_t)n);
      if (pkrylov_cubesphere_stencil_coefficients(&tp, w.data(), s.data(), v.data(), c.data())) {
        fprintf(stderr, "%s: %s\n", p.c_str(), pkrylov_last_error_message());
        continue;
      }
      random_rhs(b);
      /* six faces of one tile: the global order i + N (j + N (f + 6 k)) is a 6 N-row rectangle of N x N tiles */
      std::vector<int32_t> conn(12 * 6), tiles{0, 1, 2, 3, 4, 5};
      pkrylov_grid_connect_cubesphere(1, conn.data());
      pkrylov_grid g = NULL;
      pkrylov_operator A = NULL;
      pkrylov_precond M = NULL;
      int rc = pkrylov_grid_create(gctx, a1, a1, 1, 1, 6, conn.data(), 6, tiles.data(), &g);
      std::vector<double> hw = tile_field(w.data(), N, 6 * N, nz, 1, 6), hs = tile_field(s.data(), N, 6 * N, nz, 1, 6);
      std::vector<double> hv = tile_field(v.data(), N, 6 * N, nz, 1, 6), hc = tile_field(c.data(), N, 6 * N, nz, 1, 6);
      std::vector<double> hb = tile_field(b.data(), N, 6 * N, nz, 1, 6), bc((size_t)n);
      if (!rc) rc = pkrylov_operator_create_grid_stencil(g, a2, hw.data(), hs.data(), hv.data(), hc.data(), NULL, &A);
      if (!rc) rc = pkrylov_precond_create(gctx, A, PKRYLOV_PRECOND_COLUMN, 0, PKRYLOV_LAYOUT_AUTO, &M);
      if (rc) {
        fprintf(stderr, "%s: %s\n", p.c_str(), pk_msg(gctx, rc).c_str());
      } else {
        pkrylov_grid_pack(g, a2, PKRYLOV_MEM_HOST, hb.data(), bc.data());
        double *db, *dx;
        CK_CUDA(cudaMalloc(&db, sizeof(double) * n));
        CK_CUDA(cudaMalloc(&dx, sizeof(double) * n));
        CK_CUDA(cudaMemcpy(db, bc.data(), sizeof(double) * n, cudaMemcpyHostToDevice));
        Row proto;
        proto.problem = p, proto.n = n, proto.precond = "column";
        for (int st : {PKRYLOV_SOLVER_CG, PKRYLOV_SOLVER_PIPECG}) {
          Row r = proto;
          r.impl = "pkrylov-cuda 6 faces", r.solver = solver_name(st), r.words = words(st, false);
          rows.push_back(pk_row(r, gctx, A, M, st, PKRYLOV_MEM_DEVICE, db, dx, cf));
          print_row(rows.back(), cf.copy_bw);
        }
        cudaFree(db), cudaFree(dx);
      }
      pkrylov_precond_destroy(&M), pkrylov_operator_destroy(&A), pkrylov_grid_destroy(&g);
    } else {
      fprintf(stderr, PKB_PROG ": unknown problem '%s'\n", p.c_str());
      return 2;
    }
  }
  if (!json.empty()) {
    FILE *f = fopen(json.c_str(), "w");
    if (f) {
      fprintf(f, "{\"device\": %s, \"copy_bw\": %s, \"rows\": [\n", js(prop.name).c_str(), jn(cf.copy_bw).c_str());
      for (size_t i = 0; i < rows.size(); i++) {
        const Row &r = rows[i];
        fprintf(f,
                "  {\"problem\": %s, \"impl\": %s, \"solver\": %s, \"precond\": %s, \"cells\": %lld, \"us_per_iter\": "
                "%s, \"its_1e-8\": %d, \"status\": %s}%s\n",
                js(r.problem).c_str(), js(r.impl).c_str(), js(r.solver).c_str(), js(r.precond).c_str(),
                (long long)r.n, jn(r.t_iter * 1e6).c_str(), r.its_tol, js(r.status).c_str(),
                i + 1 < rows.size() ? "," : "");
      }
      fprintf(f, "]}\n");
      fclose(f);
    }
  }
  pkrylov_context_destroy(&gctx);
  pkrylov_context_destroy(&cctx);
  return 0;
}

/**
 * @file bench_gpu_common.cuh
 * @brief What the GPU benchmarks (pkrylov-bench-gpu.cu, pkrylov-bench-gpu-kry.cu) share: error checks of
 *        the vendor calls, the host clock, the fixed-seed right-hand side, the device copy bandwidth, the
 *        time per iteration from two fixed-count solves (pkb_timing.h, shared with pkrylov-bench-cpu), host
 *        CSR set-up, error messages and JSON values.
 *
 * Header-only (each benchmark is one translation unit): define PKB_PROG, the program name that starts every
 * error line, before including it.
 */
#ifndef PKRYLOV_BENCH_GPU_COMMON_CUH
#define PKRYLOV_BENCH_GPU_COMMON_CUH

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cusparse.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include <string>
#include <vector>

#include "pkb_timing.h"
#include "pkrylov.h"

#ifndef PKB_PROG
#error "define PKB_PROG (the program name of the error lines) before including bench_gpu_common.cuh"
#endif

/* ---- error checks for the vendor part (a failure there is a failure of the benchmark) ------------- */
#define CK_CUDA(call)                                                                                        \
  do {                                                                                                       \
    cudaError_t e_ = (call);                                                                                 \
    if (e_ != cudaSuccess) {                                                                                 \
      fprintf(stderr, PKB_PROG ": %s:%d: %s: %s\n", __FILE__, __LINE__, #call, cudaGetErrorString(e_));      \
      exit(2);                                                                                               \
    }                                                                                                        \
  } while (0)
#define CK_SPARSE(call)                                                                                      \
  do {                                                                                                       \
    cusparseStatus_t e_ = (call);                                                                            \
    if (e_ != CUSPARSE_STATUS_SUCCESS) {                                                                     \
      fprintf(stderr, PKB_PROG ": %s:%d: %s: %s\n", __FILE__, __LINE__, #call, cusparseGetErrorString(e_));  \
      exit(2);                                                                                               \
    }                                                                                                        \
  } while (0)
#define CK_BLAS(call)                                                                                        \
  do {                                                                                                       \
    cublasStatus_t e_ = (call);                                                                              \
    if (e_ != CUBLAS_STATUS_SUCCESS) {                                                                       \
      fprintf(stderr, PKB_PROG ": %s:%d: %s: cuBLAS status %d\n", __FILE__, __LINE__, #call, (int)e_);       \
      exit(2);                                                                                               \
    }                                                                                                        \
  } while (0)

/** Seconds on a monotonic host clock. */
static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/** Pseudo-random right-hand side in [-0.5, 0.5), fixed seed (the same as pkrylov-bench-cpu). */
static void random_rhs(std::vector<double> &b) {
  uint64_t st = 12345;
  for (double &v : b) {
    st = st * 6364136223846793005ULL + 1442695040888963407ULL;
    v = (double)(st >> 11) / 9007199254740992.0 - 0.5;
  }
}

/**
 * Time per iteration: (least t(i1) - least t(i0)) / (i1 - i0) over R solves of each (pkb_timing.h);
 * solve(its) returns seconds, < 0: failed (then -1).
 */
template <class F> static double time_per_iteration(F solve, int i0, int i1, int R) {
  std::vector<double> lo(R), hi(R);
  for (int r = 0; r < R; r++) {
    lo[r] = solve(i0), hi[r] = solve(i1);
    if (lo[r] < 0 || hi[r] < 0)
      return -1;
  }
  return pkb_time_per_iteration(lo.data(), hi.data(), R, i0, i1);
}

/* ---- copy bandwidth -------------------------------------------------------------------------------- */

/** b = a over n double2, 4 independent 16-byte loads in flight per thread, coalesced across the warp. */
__global__ void copy_kernel(const double2 *__restrict__ a, double2 *__restrict__ b, size_t n) {
  const size_t base = (size_t)blockIdx.x * blockDim.x * 4 + threadIdx.x;
  double2 v[4];
#pragma unroll
  for (int j = 0; j < 4; j++) {
    const size_t i = base + (size_t)j * blockDim.x;
    if (i < n)
      v[j] = a[i];
  }
#pragma unroll
  for (int j = 0; j < 4; j++) {
    const size_t i = base + (size_t)j * blockDim.x;
    if (i < n)
      b[i] = v[j];
  }
}

/** a[i] = (i mod 97) + 0.5 (not zeros: zeros can run faster than real data). */
__global__ void fill_kernel(double2 *a, size_t n) {
  for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
    a[i] = make_double2((double)(i % 97) + 0.5, (double)(i % 89) - 0.25);
}

/**
 * Device-to-device copy bandwidth of copy_kernel over `gib` GiB (read + write bytes counted), best of 10
 * after 2 warm-ups; cudaMemcpy's, measured alternately with it, in *memcpy_bw.
 */
static double copy_bandwidth(double gib, double *memcpy_bw) {
  const size_t bytes = (size_t)(gib * 1073741824.0) & ~(size_t)255, n2 = bytes / 16;
  double2 *a, *b;
  CK_CUDA(cudaMalloc(&a, bytes));
  CK_CUDA(cudaMalloc(&b, bytes));
  fill_kernel<<<1024, 256>>>(a, n2);
  CK_CUDA(cudaGetLastError());
  cudaEvent_t e0, e1;
  CK_CUDA(cudaEventCreate(&e0));
  CK_CUDA(cudaEventCreate(&e1));
  const unsigned threads = 256;
  const size_t blocks = (n2 + 4 * threads - 1) / (4 * threads);
  float best = 1e30f, bestm = 1e30f;
  for (int r = 0; r < 12; r++) {
    CK_CUDA(cudaEventRecord(e0));
    copy_kernel<<<(unsigned)blocks, threads>>>(a, b, n2);
    CK_CUDA(cudaEventRecord(e1));
    CK_CUDA(cudaEventSynchronize(e1));
    CK_CUDA(cudaGetLastError());
    float ms;
    CK_CUDA(cudaEventElapsedTime(&ms, e0, e1));
    if (r >= 2 && ms < best)
      best = ms;
    CK_CUDA(cudaEventRecord(e0));
    CK_CUDA(cudaMemcpyAsync(b, a, bytes, cudaMemcpyDeviceToDevice));
    CK_CUDA(cudaEventRecord(e1));
    CK_CUDA(cudaEventSynchronize(e1));
    CK_CUDA(cudaEventElapsedTime(&ms, e0, e1));
    if (r >= 2 && ms < bestm)
      bestm = ms;
  }
  /* check the copy (a kernel that does nothing would be fast) */
  double2 probe[2];
  CK_CUDA(cudaMemcpy(probe, b + n2 / 3, sizeof probe, cudaMemcpyDeviceToHost));
  const size_t i0 = n2 / 3;
  if (probe[0].x != (double)(i0 % 97) + 0.5 || probe[1].y != (double)((i0 + 1) % 89) - 0.25) {
    fprintf(stderr, PKB_PROG ": copy kernel check failed\n");
    exit(2);
  }
  CK_CUDA(cudaEventDestroy(e0));
  CK_CUDA(cudaEventDestroy(e1));
  CK_CUDA(cudaFree(a));
  CK_CUDA(cudaFree(b));
  *memcpy_bw = 2.0 * (double)bytes / (bestm * 1e-3);
  return 2.0 * (double)bytes / (best * 1e-3);
}

/* ---- host CSR and messages ------------------------------------------------------------------------- */

/** Start a host CSR matrix (fields n, rowptr, col, val) of n rows with room for per_row entries a row. */
template <class Csr> static void csr_begin(Csr &A, int64_t n, int per_row) {
  A.n = n;
  A.rowptr.assign((size_t)n + 1, 0);
  A.col.clear();
  A.val.clear();
  A.col.reserve((size_t)(per_row * n));
  A.val.reserve((size_t)(per_row * n));
}

/** Last error message of a context (or the thread's, without a context or when the context has none). */
static std::string pk_msg(pkrylov_context ctx, int rc) {
  const char *msg = NULL;
  if (ctx)
    pkrylov_context_get_last_error(ctx, NULL, &msg);
  if (!msg || !*msg)
    msg = pkrylov_last_error_message();
  std::string s = pkrylov_error_string(rc);
  if (msg && *msg)
    s += std::string(": ") + msg;
  return s;
}

/* ---- JSON values ----------------------------------------------------------------------------------- */

/** A JSON string literal. */
static std::string js(const std::string &s) {
  std::string o = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\')
      o += '\\', o += c;
    else if ((unsigned char)c < 0x20) {
      char b[8];
      snprintf(b, sizeof b, "\\u%04x", (unsigned)(unsigned char)c);
      o += b;
    } else
      o += c;
  }
  return o + "\"";
}

/** A JSON number (null for NaN/Inf). */
static std::string jn(double v, const char *fmt = "%.6e") {
  if (!(v == v) || isinf(v))
    return "null";
  char b[64];
  snprintf(b, sizeof b, fmt, v);
  return b;
}

#endif

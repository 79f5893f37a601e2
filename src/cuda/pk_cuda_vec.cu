/**
 * @file pk_cuda_vec.cu
 * @brief Vector launchers of the CUDA backend (pk_cuda.h): dot products into partial-sum slots, the one-block
 *        sum of partials, axpy, dry cells, the minimum-residual copy, z = x + a y, and the copy between a
 *        tiled model's halo'd arrays and the compact order. See pk_cuda_dev.cuh for the reductions.
 */
#include <cuda_runtime.h>

#include <stdint.h>

#include "pk_cuda.h"
#include "pk_cuda_dev.cuh"
#include "pkrylov.h"

namespace {

/* ---- vector kernels ----------------------------------------------------------------------------- */

/** The nv vector pairs of pk_cuda_dots, passed by value. */
struct DotArgs {
  const double *x[4];
  const double *y[4];
};

/** part[block * NV + j] = block's partial of (x[j], y[j]). */
template <int NV> __global__ void __launch_bounds__(PKC_BLOCK) k_dots(int64_t n, DotArgs a, double *part) {
  double acc[NV];
#pragma unroll
  for (int j = 0; j < NV; j++) acc[j] = 0.0;
  const int64_t stride = (int64_t)gridDim.x * PKC_BLOCK;
  for (int64_t i = (int64_t)blockIdx.x * PKC_BLOCK + threadIdx.x; i < n; i += stride) {
#pragma unroll
    for (int j = 0; j < NV; j++) acc[j] += a.x[j][i] * a.y[j][i];
  }
  block_store<NV>(acc, part, blockIdx.x);
}

/** One block: out[j] = sum_b part[b * nvals + j]; thread t adds b = t, t + 256, ... in order, then a tree. */
__global__ void __launch_bounds__(PKC_BLOCK)
    k_sum_partials(const double *part, int64_t nb, int nvals, double *out) {
  for (int j = 0; j < nvals; j++) {
    double acc[1] = {0.0};
    for (int64_t b = threadIdx.x; b < nb; b += PKC_BLOCK) acc[0] += part[b * nvals + j];
    block_store<1>(acc, out, j); /* out[j] */
    __syncthreads();             /* the shared scratch is reused for the next j */
  }
}

/** y += a x, a read from device memory. */
__global__ void __launch_bounds__(PKC_BLOCK) k_axpy(int64_t n, const double *a, const double *x, double *y) {
  const double av = *a;
  const int64_t stride = (int64_t)gridDim.x * PKC_BLOCK;
  for (int64_t i = (int64_t)blockIdx.x * PKC_BLOCK + threadIdx.x; i < n; i += stride) y[i] = y[i] + av * x[i];
}

/** x = 0 at dry cells. */
__global__ void __launch_bounds__(PKC_BLOCK) k_zero_dry(int64_t n, const uint8_t *wet, double *x) {
  const int64_t stride = (int64_t)gridDim.x * PKC_BLOCK;
  for (int64_t i = (int64_t)blockIdx.x * PKC_BLOCK + threadIdx.x; i < n; i += stride)
    if (!wet[i]) x[i] = 0.0;
}

/** dst = src when the state says the current iterate improved the minimum residual (pk_cuda_copy_improved) */
__global__ void __launch_bounds__(PKC_BLOCK) k_copy_improved(const pk_cuda_state *st, int64_t n,
                                                             const double *__restrict__ src,
                                                             double *__restrict__ dst) {
  step_wait();
  if (!st->improved || st->status != PK_ST_RUNNING) return;
  const int64_t stride = (int64_t)gridDim.x * PKC_BLOCK;
  for (int64_t i = (int64_t)blockIdx.x * PKC_BLOCK + threadIdx.x; i < n; i += stride) dst[i] = src[i];
}

/** z = x + a y. */
__global__ void __launch_bounds__(PKC_BLOCK)
    k_xpay(int64_t n, const double *x, double a, const double *y, double *z) {
  const int64_t stride = (int64_t)gridDim.x * PKC_BLOCK;
  for (int64_t i = (int64_t)blockIdx.x * PKC_BLOCK + threadIdx.x; i < n; i += stride) z[i] = x[i] + a * y[i];
}

} // namespace

/* ---- launchers (pk_cuda.h) ---------------------------------------------------------------------- */

extern "C" int pk_cuda_xpay(void *stream, int64_t n, const double *x, double a, const double *y, double *z) {
  k_xpay<<<(unsigned)blocks_1d(n), PKC_BLOCK, 0, (cudaStream_t)stream>>>(n, x, a, y, z);
  return (int)cudaGetLastError();
}

extern "C" int pk_cuda_dots(void *stream, int64_t n, int nv, const double *const *x, const double *const *y,
                            double *part, int64_t *nblocks) {
  if (nv < 1 || nv > 4) return (int)cudaErrorInvalidValue;
  DotArgs a = {};
  for (int j = 0; j < nv; j++) a.x[j] = x[j], a.y[j] = y[j];
  const int64_t nb = blocks_1d(n);
  if (nblocks) *nblocks = nb;
  cudaStream_t s = (cudaStream_t)stream;
  const unsigned g = (unsigned)nb;
  switch (nv) {
  case 1: k_dots<1><<<g, PKC_BLOCK, 0, s>>>(n, a, part); break;
  case 2: k_dots<2><<<g, PKC_BLOCK, 0, s>>>(n, a, part); break;
  case 3: k_dots<3><<<g, PKC_BLOCK, 0, s>>>(n, a, part); break;
  default: k_dots<4><<<g, PKC_BLOCK, 0, s>>>(n, a, part); break;
  }
  return (int)cudaGetLastError();
}

extern "C" int pk_cuda_sum_partials(void *stream, const double *part, int64_t nblocks, int nvals,
                                    double *out) {
  k_sum_partials<<<1, PKC_BLOCK, 0, (cudaStream_t)stream>>>(part, nblocks, nvals, out);
  return (int)cudaGetLastError();
}

extern "C" int pk_cuda_axpy_dev(void *stream, int64_t n, const double *a, const double *x, double *y) {
  k_axpy<<<(unsigned)blocks_1d(n), PKC_BLOCK, 0, (cudaStream_t)stream>>>(n, a, x, y);
  return (int)cudaGetLastError();
}

extern "C" int pk_cuda_zero_dry(void *stream, int64_t n, const uint8_t *wet, double *x) {
  if (!wet) return (int)cudaGetLastError();
  k_zero_dry<<<(unsigned)blocks_1d(n), PKC_BLOCK, 0, (cudaStream_t)stream>>>(n, wet, x);
  return (int)cudaGetLastError();
}

extern "C" int pk_cuda_copy_improved(void *stream, const pk_cuda_state *st, int64_t n, const double *src,
                                     double *dst) {
  k_copy_improved<<<(unsigned)blocks_1d(n), PKC_BLOCK, 0, (cudaStream_t)stream>>>(st, n, src, dst);
  return (int)cudaGetLastError();
}

/* ---- tiled grids: the model's halo'd arrays <-> the compact order ----------------------------------- */

/** dir 0: dst[compact] = src[halo'd]; 1: dst[halo'd] = src[compact]. One thread per cell, grid-stride. */
__global__ void __launch_bounds__(PKC_BLOCK)
    k_grid_copy(int64_t snx, int64_t sny, int64_t olx, int64_t oly, int64_t nt, int64_t nz,
                const double *__restrict__ src, double *__restrict__ dst, int dir) {
  const int64_t n = snx * sny * nt * nz, hx = snx + 2 * olx, hy = sny + 2 * oly;
  const int64_t stride = (int64_t)gridDim.x * PKC_BLOCK;
  for (int64_t q = (int64_t)blockIdx.x * PKC_BLOCK + threadIdx.x; q < n; q += stride) {
    const int64_t i = q % snx, l = q / snx, j = l % sny, t = (l / sny) % nt, k = l / (sny * nt);
    const int64_t h = (i + olx) + hx * ((j + oly) + hy * (k + nz * t));
    if (dir == 0)
      dst[q] = src[h];
    else
      dst[h] = src[q];
  }
}

extern "C" int pk_cuda_grid_copy(void *stream, int64_t snx, int64_t sny, int64_t olx, int64_t oly, int64_t nt,
                                 int64_t nz, const double *src, double *dst, int dir) {
  const int64_t n = snx * sny * nt * nz;
  k_grid_copy<<<(unsigned)blocks_1d(n), PKC_BLOCK, 0, (cudaStream_t)stream>>>(snx, sny, olx, oly, nt, nz, src, dst,
                                                                             dir);
  return (int)cudaGetLastError();
}

/**
 * @file pk_cuda_op.cu
 * @brief Operator launchers of the CUDA backend (pk_cuda.h): the product y = A x and the residual r = b - A x
 *        (the actions ActApply, ActResidual over launch_op, pk_cuda_op.cuh), the halo-exchange stencil's
 *        fill and edge kernels, and the partial-sum slots the launches write. See pk_cuda_dev.cuh for the
 *        thread mappings, the bytes per cell and the reductions.
 */
#include <cuda_runtime.h>

#include <stdint.h>

#include "pk_cuda.h"
#include "pk_cuda_dev.cuh"
#include "pk_cuda_op.cuh"
#include "pkrylov.h"

namespace {

/** y = A x. */
struct ActApply {
  static constexpr int NV = 0;
  static constexpr int MINB = 0;
  static constexpr bool PREFETCH = false;
  struct In {};
  double *y;
  __device__ bool begin() { return true; }
  __device__ In load(int64_t) const { return In{}; }
  __device__ void operator()(int64_t c, double ax, double, const In &, double *) const { y[c] = ax; }
};

/** r = b - A x, 0 at dry cells; acc[0] += r^2 (cpu_kernels.c: pk_cpu_residual). */
struct ActResidual {
  static constexpr int NV = 1;
  static constexpr int MINB = 0;
  static constexpr bool PREFETCH = false;
  struct In {
    double b;
  };
  const double *b;
  double *r;
  const uint8_t *wet;
  __device__ bool begin() { return true; }
  __device__ In load(int64_t c) const { return In{b[c]}; }
  __device__ void operator()(int64_t c, double ax, double, const In &in, double *acc) const {
    const double ri = (wet && !wet[c]) ? 0.0 : in.b - ax;
    r[c] = ri;
    acc[0] += ri * ri;
  }
};

/** Halo-exchange stencil: xh (hx = nx+2, hy = ny+2, nz planes) = x in the interior, 0 in the halo. */
__global__ void __launch_bounds__(PKC_BLOCK)
    k_halo_fill(int nx, int ny, int64_t m, const double *__restrict__ x, double *__restrict__ xh) {
  const int64_t hx = (int64_t)nx + 2, hy = (int64_t)ny + 2;
  const int64_t stride = (int64_t)gridDim.x * PKC_BLOCK;
  for (int64_t h = (int64_t)blockIdx.x * PKC_BLOCK + threadIdx.x; h < m; h += stride) {
    const int64_t ih = h % hx, rest = h / hx, jh = rest % hy, k = rest / hy;
    const bool inner = ih >= 1 && ih <= nx && jh >= 1 && jh <= ny;
    xh[h] = inner ? x[(ih - 1) + (int64_t)nx * ((jh - 1) + (int64_t)ny * k)] : 0.0;
  }
}

/** Halo-exchange stencil: y += edge couplings times the halo values (operator.c halo_edge_rows' order). */
__global__ void __launch_bounds__(PKC_BLOCK)
    k_halo_edges(int nx, int ny, int64_t n, const double *__restrict__ cw, const double *__restrict__ ce,
                 const double *__restrict__ cs, const double *__restrict__ cn, const double *__restrict__ xh,
                 double *__restrict__ y) {
  const int64_t hx = (int64_t)nx + 2, hy = (int64_t)ny + 2;
  const int64_t stride = (int64_t)gridDim.x * PKC_BLOCK;
  for (int64_t c = (int64_t)blockIdx.x * PKC_BLOCK + threadIdx.x; c < n; c += stride) {
    const int64_t i = c % nx, line = c / nx, j = line % ny, k = line / ny;
    if (i != 0 && i != nx - 1 && j != 0 && j != ny - 1) continue;
    const double *xl = xh + 1 + hx * ((j + 1) + hy * k); /* xl[i] = x(i,j,k) */
    double v = y[c];
    if (i == 0) v += cw[j + ny * k] * xl[-1];
    if (i == nx - 1) v += ce[j + ny * k] * xl[nx];
    if (j == 0) v += cs[i + nx * k] * xl[i - hx];
    if (j == ny - 1) v += cn[i + nx * k] * xl[i + hx];
    y[c] = v;
  }
}

} // namespace

/* ---- launchers (pk_cuda.h) ---------------------------------------------------------------------- */

extern "C" int pk_cuda_halo_fill(void *stream, const pk_cuda_op *op, const double *x) {
  if (!op->halo || !op->xh) return (int)cudaErrorInvalidValue;
  const int64_t m = ((int64_t)op->nx + 2) * ((int64_t)op->ny + 2) * op->nz;
  k_halo_fill<<<(unsigned)blocks_1d(m), PKC_BLOCK, 0, (cudaStream_t)stream>>>(op->nx, op->ny, m, x, op->xh);
  return (int)cudaGetLastError();
}

extern "C" int pk_cuda_halo_edges(void *stream, const pk_cuda_op *op, double *y) {
  if (!op->halo || !op->xh) return (int)cudaErrorInvalidValue;
  k_halo_edges<<<(unsigned)blocks_1d(op->n), PKC_BLOCK, 0, (cudaStream_t)stream>>>(
      op->nx, op->ny, op->n, op->hcw, op->hce, op->hcs, op->hcn, op->xh, y);
  return (int)cudaGetLastError();
}

extern "C" int64_t pk_cuda_partials_needed(const pk_cuda_op *op, const pk_cuda_pc *pc) {
  int64_t m = 1;
  if (op) {
    int64_t a = op_blocks(op);
    const int64_t b = blocks_1d(op->n);
    if (op->dist && op->type != PKRYLOV_OPERATOR_CSR && op->type != PKRYLOV_OPERATOR_USER) {
      pk_cuda_op e = *op; /* distributed: an interior launch (all columns' grid) and an edge launch */
      e.cols = 0;
      a = op_blocks(&e);
      e.cols = 2;
      a += op_blocks(&e);
    }
    m = a > m ? a : m;
    m = b > m ? b : m;
  }
  if (pc) {
    const int64_t a = blocks_1d(pc->n), b = blocks_1d(pc->ncols);
    const int64_t c = pc->type == PKRYLOV_PRECOND_COLUMN ? sm_blocks(pc->ncols) : 1;
    const int64_t d = pc->type == PKRYLOV_PRECOND_AINV ? op_blocks(&pc->op) : 1;
    m = a > m ? a : m;
    m = b > m ? b : m;
    m = c > m ? c : m;
    m = d > m ? d : m;
  }
  return m;
}

extern "C" int32_t pk_cuda_grid2d_cap(int64_t n) {
  int dev = 0, nsm = 0;
  if (cudaGetDevice(&dev) != cudaSuccess ||
      cudaDeviceGetAttribute(&nsm, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess || nsm < 1) {
    cudaGetLastError();
    return (int32_t)PKC_GRID2D_BLOCKS;
  }
  const int64_t wave = (int64_t)nsm * PKC_GRID2D_PER_SM;
  if (n > PKC_GRID2D_WAVE_CELLS) return (int32_t)(PKC_GRID2D_WAVES_ABOVE * wave); /* unfolded: slots by n */
  return (int32_t)(wave < PKC_GRID2D_BLOCKS ? wave : PKC_GRID2D_BLOCKS);
}

extern "C" int pk_cuda_op_apply(void *stream, const pk_cuda_op *op, const double *x, double *y) {
  ActApply act;
  act.y = y;
  return launch_op((cudaStream_t)stream, op, x, act, nullptr, nullptr);
}

extern "C" int pk_cuda_residual(void *stream, const pk_cuda_op *op, const double *b, const double *x,
                                double *r, double *part, int64_t *nblocks) {
  ActResidual act;
  act.b = b;
  act.r = r;
  act.wet = op->wet;
  return launch_op((cudaStream_t)stream, op, x, act, part, nblocks);
}

extern "C" int64_t pk_cuda_op_partials(const pk_cuda_op *op) { return op_blocks(op); }

/**
 * @file pk_cuda_csr.cuh
 * @brief The CSR operator kernels (one thread or a group of lanes per row), CSR stored as diagonals (DIA /
 *        SYMDIA) and the USER operator's precomputed product: templates over the per-cell action
 *        (pk_cuda_dev.cuh), launched by launch_op (pk_cuda_op.cuh). See pk_cuda_dev.cuh for the overview.
 */
#ifndef PK_CUDA_CSR_CUH
#define PK_CUDA_CSR_CUH

#include "pk_cuda_dev.cuh"

namespace {

/* ---- operator kernels --------------------------------------------------------------------------- */

/** CSR, one thread per row (grid-stride): y_r = sum_p val[p] x[col[p]] in row order (csr_apply_rows). */
template <typename V, typename I, class Act>
__global__ void __launch_bounds__(PKC_BLOCK)
    k_csr(const int64_t *__restrict__ rp, const I *__restrict__ ci, const V *__restrict__ val, int64_t n,
          const double *__restrict__ x, Act act, double *part) {
  if (!act.begin()) return;
  Acc<Act> acc = {};
  const int64_t stride = (int64_t)gridDim.x * PKC_BLOCK;
  for (int64_t r = (int64_t)blockIdx.x * PKC_BLOCK + threadIdx.x; r < n; r += stride) {
    double s = 0.0;
    const int64_t p1 = rp[r + 1];
    for (int64_t p = rp[r]; p < p1; p++) s += (double)val[p] * x[ci[p]];
    act(r, s, x[r], act.load(r), acc.v);
  }
  finish<Act>(acc, part);
}

/** Offsets of a DIA view, by value (kernel parameter space). */
struct DiaOff {
  int64_t o[PK_CUDA_DIA_MAX];
};

/**
 * CSR in diagonal storage (pk_cuda_op.csr_format DIA / SYMDIA), one thread per row (grid-stride, the grid of
 * k_csr): y_r = the row's terms in ascending column order from 0.0, slots holding 0 (absent entries, or
 * outside the matrix) skipped, so the sum is csr_apply_rows' bit for bit (pk_cuda.h). SYM: diagonal d holds
 * A[i, i + k_d] for k_d = off[d] >= 0 (off[0] = 0); the lower entry A[r, r - k] is dia[d n + r - k], the
 * upper neighbour row's own coefficient (a shifted read of an array the grid streams anyway: mostly from
 * cache), so DRAM sees nd * sizeof(V) bytes of coefficients per row. ND: a bound on nd (8 or
 * PK_CUDA_DIA_MAX), so the loops unroll with uniform guards.
 * Every load of a row (coefficients and x, at an index clamped into the matrix where the slot lies outside
 * it) is issued before the sum, which then skips a term by a select (s = a != 0 ? s + a x : s, the same
 * value as not adding it): no load waits for another. (A first version loaded x only behind the a != 0
 * test: one memory round trip per diagonal; 7-point Laplacian 256^3 on an H200, plain CG, symmetric DIA
 * 789 us per iteration, no faster than CSR.)
 */
template <typename V, bool SYM, int ND, class Act>
__global__ void __launch_bounds__(PKC_BLOCK)
    k_dia(const V *__restrict__ dia, int64_t n, int nd, DiaOff off, const double *__restrict__ x, Act act,
          double *part) {
  constexpr int CH = ND < 8 ? ND : 8; /* diagonals whose loads are issued together (registers) */
  if (!act.begin()) return;
  Acc<Act> acc = {};
  const int64_t stride = (int64_t)gridDim.x * PKC_BLOCK;
  for (int64_t r = (int64_t)blockIdx.x * PKC_BLOCK + threadIdx.x; r < n; r += stride) {
    double s = 0.0;
    if constexpr (SYM) {
#pragma unroll
      for (int hi = ND - 1; hi >= 1; hi -= CH) { /* lower entries, d = hi, hi - 1, ...: ascending columns */
        V a[CH];
        double xv[CH];
#pragma unroll
        for (int j = 0; j < CH; j++) {
          const int d = hi - j;
          a[j] = V(0), xv[j] = 0.0;
          if (d >= 1 && d < nd) {
            const int64_t c = r - off.o[d];
            a[j] = c >= 0 ? dia[(int64_t)d * n + c] : V(0);
            xv[j] = x[c >= 0 ? c : r];
          }
        }
#pragma unroll
        for (int j = 0; j < CH; j++)
          if (hi - j >= 1 && hi - j < nd) s = a[j] != V(0) ? s + (double)a[j] * xv[j] : s;
      }
      const V a0 = dia[r];
      s = a0 != V(0) ? s + (double)a0 * x[r] : s;
#pragma unroll
      for (int lo = 1; lo < ND; lo += CH) { /* upper entries, d = lo, lo + 1, ... */
        V a[CH];
        double xv[CH];
#pragma unroll
        for (int j = 0; j < CH; j++) {
          const int d = lo + j;
          a[j] = V(0), xv[j] = 0.0;
          if (d < ND && d < nd) {
            const int64_t c = r + off.o[d];
            a[j] = dia[(int64_t)d * n + r]; /* 0 where c >= n */
            xv[j] = x[c < n ? c : r];
          }
        }
#pragma unroll
        for (int j = 0; j < CH; j++)
          if (lo + j < ND && lo + j < nd) s = a[j] != V(0) ? s + (double)a[j] * xv[j] : s;
      }
    } else {
#pragma unroll
      for (int lo = 0; lo < ND; lo += CH) {
        V a[CH];
        double xv[CH];
#pragma unroll
        for (int j = 0; j < CH; j++) {
          const int d = lo + j;
          a[j] = V(0), xv[j] = 0.0;
          if (d < ND && d < nd) {
            const int64_t c = r + off.o[d];
            a[j] = dia[(int64_t)d * n + r]; /* 0 where c is outside the matrix */
            xv[j] = x[c >= 0 && c < n ? c : r];
          }
        }
#pragma unroll
        for (int j = 0; j < CH; j++)
          if (lo + j < ND && lo + j < nd) s = a[j] != V(0) ? s + (double)a[j] * xv[j] : s;
      }
    }
    act(r, s, x[r], act.load(r), acc.v);
  }
  finish<Act>(acc, part);
}

/** USER operator: (A x)[cell] precomputed in pre by the caller's routine; one thread per cell, grid-stride. */
template <class Act>
__global__ void __launch_bounds__(PKC_BLOCK)
    k_pre(const double *__restrict__ pre, int64_t n, const double *__restrict__ x, Act act, double *part) {
  if (!act.begin()) return;
  Acc<Act> acc = {};
  const int64_t stride = (int64_t)gridDim.x * PKC_BLOCK;
  for (int64_t r = (int64_t)blockIdx.x * PKC_BLOCK + threadIdx.x; r < n; r += stride)
    act(r, pre[r], x[r], act.load(r), acc.v);
  finish<Act>(acc, part);
}

/**
 * CSR, a group of L lanes (2 ... 32, a power of two) per row for long rows (pk_cuda_op.csr_lanes). Warp w of
 * the grid owns the 32 rows r0 = 32 w ... r0 + 31 (grid-stride over warps, so the loop bounds are the same
 * for the whole warp and every lane takes part in the shuffles). The row sums come in L passes of G = 32/L
 * rows: in pass t, group g = lane / L takes row r0 + t G + g; lane l of the group adds val[p] x[col[p]] for
 * p = rp[r] + l, rp[r] + l + L, ... (consecutive lanes read consecutive entries: coalesced loads of val and
 * col, and the G rows of a pass are contiguous in them), then the group's sums are combined by the tree
 * lane l += lane l + o, o = L/2, ..., 1 (shuffles within the group), and lane 0 of the group stores the row
 * sum in shared memory. Then all 32 lanes apply the action, lane i to row r0 + i (coalesced vector
 * updates: the fused steps' 3 to 9 vectors per row are read and written by the whole warp, not by one lane
 * per group). Partial sums: each lane accumulates the rows it updated, then the usual fixed block tree. The
 * row sum's order differs from csr_apply_rows' (see pk_cuda.h); the actions' arithmetic is the same.
 */
template <typename V, typename I, class Act>
__global__ void __launch_bounds__(PKC_BLOCK)
    k_csr_vec(const int64_t *__restrict__ rp, const I *__restrict__ ci, const V *__restrict__ val, int64_t n,
              int L, const double *__restrict__ x, Act act, double *part) {
  if (!act.begin()) return;
  __shared__ double rowsum[PKC_BLOCK]; /* 32 per warp */
  Acc<Act> acc = {};
  const int wl = threadIdx.x & 31, lane = wl & (L - 1), g = wl / L, G = 32 / L;
  double *ws = rowsum + (threadIdx.x & ~31);
  const int64_t stride = (int64_t)gridDim.x * PKC_BLOCK;
  for (int64_t r0 = (int64_t)blockIdx.x * PKC_BLOCK + (threadIdx.x & ~31); r0 < n; r0 += stride) {
    for (int t = 0; t < L; t++) {
      const int64_t r = r0 + t * G + g;
      double s = 0.0;
      if (r < n) {
        const int64_t p1 = rp[r + 1];
#pragma unroll 4
        for (int64_t p = rp[r] + lane; p < p1; p += L) s += (double)val[p] * x[ci[p]];
      }
      for (int o = L / 2; o > 0; o >>= 1) s += __shfl_down_sync(0xffffffffu, s, o, L);
      if (lane == 0) ws[t * G + g] = s;
    }
    __syncwarp();
    const int64_t r = r0 + wl;
    if (r < n) act(r, ws[wl], x[r], act.load(r), acc.v);
    __syncwarp(); /* ws is rewritten by the next rows */
  }
  finish<Act>(acc, part);
}

} // namespace

#endif /* PK_CUDA_CSR_CUH */

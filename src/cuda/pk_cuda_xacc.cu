/**
 * @file pk_cuda_xacc.cu
 * @brief Reproducible mode on the GPU: exact dot products into the exact accumulator of reduce.c (the
 *        format and the add / carry / round code of pk_xacc.h, shared with the CPU), so a CUDA context
 *        gets, for the same vectors, the CPU's reproducible sum bitwise.
 *
 * Kernels:
 *  - k_xacc_dots<NV, EP>: each thread adds the rounded products x[j][i] * y[j][i] (__dmul_rn: never
 *    fused with anything) of its grid-stride elements into a register window of four digits (the three
 *    digits of a product at level L, L + 1 land in digits B..B+3 when L is B or B + 1; any other level
 *    first flushes the window), flushes the window into the block's shared accumulator with 64-bit
 *    INTEGER atomics (integer addition is exact and associative: the order of the atomics does not
 *    matter), and the block writes its accumulator after a carry pass (canonical digits); EP (exact
 *    products, pk_cuda_xacc_dots_ex): the rounding error fma(x, y, -p) of every finite product p goes
 *    into a second window and shared accumulator, added to the first one after both carry passes: the
 *    exact dot product (reduce.c's exact_prod, the double-double Gram matrices of the CUDA vector
 *    engine's reproducible mode);
 *  - k_xacc_finish: the blocks' accumulators added as int64 (one warp per digit, shuffles), a carry pass,
 *    and (when asked) the rounding to doubles (pk_xacc_value: the host's fixed rounding sequence);
 *  - k_xacc_round: carry pass and rounding of accumulators (after the ranks' accumulators were added by
 *    MPI_SUM on MPI_INT64_T or ncclSum on ncclInt64, both exact); k_xacc_round_n: any number of them,
 *    rounded to doubles or to reduce.c's double-double pairs (hi, the rest rounded).
 *
 * Headroom: a digit is below 2^32 and every element adds to a slot of its dot at most once, so a slot
 * holds less than (elements added) 2^32. The launcher sizes the grid so that a thread adds at most 2^20
 * elements (its window digits stay below 2^52, a warp's shuffle sum of them below 2^57) and a block at most
 * 2^28 (its shared slots stay below 2^60); the finisher adds at most kMaxBlocks canonical accumulators
 * (digits below 2^32), the ranks at most 2^31 of them. Larger local vectors are refused
 * (PKRYLOV_ERR_UNSUPPORTED: more than 2^28 elements per block at the largest grid).
 */
#include <cuda_runtime.h>
#include <stdint.h>

extern "C" {
#include "pk_impl.h"
}
#include "pk_cuda.h"

namespace {

constexpr int kBlock = 256;
constexpr int64_t kMaxBlocks = 4096;             /* grid cap (and the block accumulators' buffer) */
constexpr int64_t kPerThread = (int64_t)1 << 20; /* elements per thread, at most */
constexpr int64_t kPerBlock = (int64_t)1 << 28;  /* elements per block, at most */
constexpr int kFinishThreads = 1024;

struct XPairs {
  const double *x[PKC_XACC_MAXV], *y[PKC_XACC_MAXV];
};

/** Add the window (digits a0..a3 at B) to the shared accumulator. */
__device__ __forceinline__ void flush(unsigned long long *sh, int B, int64_t &a0, int64_t &a1, int64_t &a2,
                                      int64_t &a3) {
  if (B < 0) return;
  if (a0) atomicAdd(sh + B, (unsigned long long)a0); /* two's complement: signed addition */
  if (a1) atomicAdd(sh + B + 1, (unsigned long long)a1);
  if (a2) atomicAdd(sh + B + 2, (unsigned long long)a2);
  if (a3) atomicAdd(sh + B + 3, (unsigned long long)a3);
  a0 = a1 = a2 = a3 = 0;
}

/** Add the double p to the window (digits a0..a3 at B; B = -1: empty) of the shared accumulator sh, flushing
 *  the window first when p's digits do not fit it; a non-finite p is counted in *bad. */
__device__ __forceinline__ void win_add(unsigned long long *sh, double p, int &B, int64_t &a0, int64_t &a1,
                                        int64_t &a2, int64_t &a3, unsigned &bad) {
  unsigned L;
  int64_t d0, d1, d2;
  int neg;
  const int k = pk_xacc_split(p, &L, &d0, &d1, &d2, &neg);
  if (k == 0) return;
  if (k == 2) {
    bad++;
    return;
  }
  if (neg) d0 = -d0, d1 = -d1, d2 = -d2;
  if (B < 0 || ((int)L != B && (int)L != B + 1)) { /* B = -1: empty window (not L = 0) */
    flush(sh, B, a0, a1, a2, a3);
    B = (int)L; /* L <= 63: digits B..B+3 <= 66 = PK_XACC_DIGITS - 1 */
  }
  if ((int)L == B) {
    a0 += d0, a1 += d1, a2 += d2;
  } else {
    a1 += d0, a2 += d1, a3 += d2;
  }
}

/**
 * NV dots. EP (exact products): the product's rounding error e = fma(x, y, -p) of every finite product p is
 * added too (into a second window and shared accumulator per dot, added to the first one at the end), so
 * the accumulator holds the exact dot product (reduce.c's exact_prod).
 */
template <int NV, bool EP>
__global__ void __launch_bounds__(kBlock) k_xacc_dots(int64_t n, XPairs pr, int64_t *blk) {
  constexpr int NW = EP ? 2 * NV : NV; /* windows / shared accumulators: the products', then the errors' */
  __shared__ unsigned long long sh[NW][PK_XACC_LEN];
  for (int q = threadIdx.x; q < NW * PK_XACC_LEN; q += blockDim.x) (&sh[0][0])[q] = 0;
  __syncthreads();
  int B[NW];
  int64_t a0[NW], a1[NW], a2[NW], a3[NW];
  unsigned bad[NW];
#pragma unroll
  for (int j = 0; j < NW; j++) B[j] = -1, a0[j] = a1[j] = a2[j] = a3[j] = 0, bad[j] = 0;
  const int64_t stride = (int64_t)gridDim.x * blockDim.x;
  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
#pragma unroll
    for (int j = 0; j < NV; j++) {
      const double x = pr.x[j][i], y = pr.y[j][i];
      const double p = __dmul_rn(x, y); /* the rounded product, as the CPU's x * y */
      win_add(sh[j], p, B[j], a0[j], a1[j], a2[j], a3[j], bad[j]);
      if (EP && isfinite(p)) /* p + e = x y exactly */
        win_add(sh[NV + j], __fma_rn(x, y, -p), B[NV + j], a0[NV + j], a1[NV + j], a2[NV + j], a3[NV + j],
                bad[NV + j]);
    }
  }
  /* the warp's lanes with the same window add theirs by shuffles first (fewer atomics on one address) */
  const unsigned lane = threadIdx.x & 31u;
#pragma unroll
  for (int j = 0; j < NW; j++) {
    const int B0 = __shfl_sync(0xffffffffu, B[j], 0);
    if (__all_sync(0xffffffffu, B[j] == B0 || (a0[j] | a1[j] | a2[j] | a3[j]) == 0) && B0 >= 0) {
      for (int o = 16; o > 0; o >>= 1) {
        a0[j] += __shfl_down_sync(0xffffffffu, a0[j], o);
        a1[j] += __shfl_down_sync(0xffffffffu, a1[j], o);
        a2[j] += __shfl_down_sync(0xffffffffu, a2[j], o);
        a3[j] += __shfl_down_sync(0xffffffffu, a3[j], o);
      }
      if (lane == 0) flush(sh[j], B0, a0[j], a1[j], a2[j], a3[j]);
    } else {
      flush(sh[j], B[j], a0[j], a1[j], a2[j], a3[j]);
    }
    if (bad[j]) atomicAdd(&sh[j][PK_XACC_DIGITS], (unsigned long long)bad[j]);
  }
  __syncthreads();
  if (threadIdx.x < NV) { /* the carry pass of accumulator j by thread j, then out to the block's slots */
    int64_t a[PK_XACC_LEN];
    for (int i = 0; i < PK_XACC_LEN; i++) a[i] = (int64_t)sh[threadIdx.x][i];
    pk_xacc_normalize(a);
    if (EP) { /* plus the errors' accumulator (both canonical: digits below 2^33 after the addition) */
      int64_t e[PK_XACC_LEN];
      for (int i = 0; i < PK_XACC_LEN; i++) e[i] = (int64_t)sh[NV + threadIdx.x][i];
      pk_xacc_normalize(e);
      for (int i = 0; i < PK_XACC_LEN; i++) a[i] += e[i];
      pk_xacc_normalize(a);
    }
    int64_t *o = blk + ((int64_t)blockIdx.x * NV + threadIdx.x) * PK_XACC_LEN;
    for (int i = 0; i < PK_XACC_LEN; i++) o[i] = a[i];
  }
}

/**
 * The first stage of a sum over many blocks' accumulators, in place: block g adds the len values of rows
 * [g R, (g + 1) R) of blk (row b at blk + b * bstride; fewer at the end) and writes the sums over row g R.
 * Each thread owns its digits (it reads and writes only those), and each row it reads has at most 8 loads
 * in flight per round. The sums are not canonical (R canonical digits each: below R 2^32), which
 * k_xacc_finish's headroom takes. A single block adding hundreds of rows one load after another was the
 * cost of the exact sums' finish: 20 us per sum for 528 blocks, 85 us for 4096 (H100, ncu).
 */
constexpr int64_t kRowsPerBlock = 16;
__global__ void __launch_bounds__(kBlock)
    k_xacc_rows(int64_t *blk, int64_t nb, int64_t bstride, int len) {
  const int64_t b0 = (int64_t)blockIdx.x * kRowsPerBlock;
  const int64_t b1 = b0 + kRowsPerBlock < nb ? b0 + kRowsPerBlock : nb;
  for (int q = threadIdx.x; q < len; q += blockDim.x) {
    int64_t s = 0;
#pragma unroll 8
    for (int64_t b = b0; b < b1; b++) s += blk[b * bstride + q];
    blk[b0 * bstride + q] = s;
  }
}

/* ---- one accumulator's carry pass and rounding by a warp (k_xacc_finish) --------------------------------
 * pk_xacc_normalize and pk_xacc_value run by one thread took about 10 us per call on an H100 (68 dependent
 * steps through shared and local memory), most of the finishing kernel's time. Here lane l holds the
 * digits 3l .. 3l + 2 (lanes 0 .. 22 hold the 67): each round every lane propagates the carry coming in
 * from the lane below through its digits and hands its carry out up, until no lane has one (two or three
 * rounds: the first leaves carries below 2^14, the second at most 1, then only chains of full digits).
 * The digits end canonical (digits 0 .. 65 in [0, 2^32), the carries in the top one): the one
 * representation of the value, so pk_xacc_normalize's digits; the rounding is pk_xacc_value's sequence on
 * them (the top three nonzero digits of the magnitude, the same roundings), so the same double. */

constexpr int kTop = PK_XACC_DIGITS - 1; /* the top digit: keeps its carries */

/** The canonical digits of the value held 3 per lane (d[k] = digit 3 lane + k; 0 beyond the top). */
__device__ __forceinline__ void warp_carry(int64_t (&d)[3], int lane) {
  int64_t cin = 0;
  for (;;) {
    int64_t c = cin;
#pragma unroll
    for (int k = 0; k < 3; k++) {
      const int i = 3 * lane + k;
      if (i < kTop) {
        const int64_t v = d[k] + c;
        c = (v - (v & 0xffffffff)) / ((int64_t)1 << 32); /* floor(v / 2^32), as pk_xacc_normalize */
        d[k] = v & 0xffffffff;
      } else if (i == kTop) {
        d[k] += c;
        c = 0;
      }
    }
    const bool more = __any_sync(0xffffffffu, c != 0);
    cin = __shfl_up_sync(0xffffffffu, c, 1);
    if (lane == 0) cin = 0;
    if (!more) break;
  }
}

/** Digit i (0 <= i <= kTop, warp-uniform) of the digits held 3 per lane. */
__device__ __forceinline__ int64_t warp_digit(const int64_t (&d)[3], int i) {
  const int64_t a = __shfl_sync(0xffffffffu, d[0], i / 3), b = __shfl_sync(0xffffffffu, d[1], i / 3),
                c = __shfl_sync(0xffffffffu, d[2], i / 3);
  return i % 3 == 0 ? a : i % 3 == 1 ? b : c;
}

/** The accumulator a (shared, any carries) made canonical in place by the warp; *out (lane 0, when out is
 *  not NULL) its rounding: pk_xacc_normalize then pk_xacc_value, bitwise. */
__device__ void warp_finish(int64_t *a, double *out, int lane) {
  int64_t d[3];
#pragma unroll
  for (int k = 0; k < 3; k++) d[k] = 3 * lane + k <= kTop ? a[3 * lane + k] : 0;
  warp_carry(d, lane);
  __syncwarp();
#pragma unroll
  for (int k = 0; k < 3; k++)
    if (3 * lane + k <= kTop) a[3 * lane + k] = d[k];
  if (!out) return;
  double v;
  if (a[PK_XACC_DIGITS] != 0) {
    v = __longlong_as_double(0x7ff8000000000000LL); /* a non-finite term */
  } else {
    double sign = 1.0;
    if (warp_digit(d, kTop) < 0) { /* the magnitude of a negative value */
#pragma unroll
      for (int k = 0; k < 3; k++) d[k] = -d[k];
      warp_carry(d, lane);
      sign = -1.0;
    }
    int hi = -1;
#pragma unroll
    for (int k = 0; k < 3; k++)
      if (3 * lane + k <= kTop && d[k] != 0) hi = 3 * lane + k;
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
      const int t = __shfl_xor_sync(0xffffffffu, hi, o);
      hi = t > hi ? t : hi;
    }
    if (hi < 0) {
      v = 0.0;
    } else {
      double r = (double)warp_digit(d, hi);
      const int low = hi >= 2 ? hi - 2 : 0;
      for (int i = hi - 1; i >= low; i--) r = pk_xacc_addd(pk_xacc_mul(r, 4294967296.0), (double)warp_digit(d, i));
      v = pk_xacc_mul(sign, ldexp(r, 32 * low - 1074));
    }
  }
  if (lane == 0) *out = v;
}

/** acc[j] = sum over the nb blocks of blk (block b's at blk + b * bstride; canonical, or k_xacc_rows' sums),
 *  normalised; out[j] its rounding when out != NULL. */
__global__ void __launch_bounds__(kFinishThreads)
    k_xacc_finish(const int64_t *blk, int64_t nb, int64_t bstride, int nv, int64_t *acc, double *out) {
  __shared__ int64_t sh[PKC_XACC_MAXV * PK_XACC_LEN];
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, nw = blockDim.x >> 5;
  const int len = nv * PK_XACC_LEN;
  for (int q = warp; q < len; q += nw) {
    int64_t s = 0;
    for (int64_t b = lane; b < nb; b += 32) s += blk[b * bstride + q];
    for (int o = 16; o > 0; o >>= 1) s += __shfl_down_sync(0xffffffffu, s, o);
    if (lane == 0) sh[q] = s;
  }
  __syncthreads();
  if (warp < nv) warp_finish(sh + warp * PK_XACC_LEN, out ? out + warp : nullptr, lane);
  __syncthreads();
  for (int q = threadIdx.x; q < len; q += blockDim.x) acc[q] = sh[q];
}

__global__ void k_xacc_round(const int64_t *acc, int nv, double *out) {
  if (threadIdx.x >= nv) return;
  int64_t a[PK_XACC_LEN];
  for (int i = 0; i < PK_XACC_LEN; i++) a[i] = acc[threadIdx.x * PK_XACC_LEN + i];
  pk_xacc_normalize(a);
  out[threadIdx.x] = pk_xacc_value(a);
}

/** Any number of accumulators, one thread each: out[v] (dd 0) or the double-double pair out[2v], out[2v+1]
 *  (dd 1: hi rounded, lo = the rest rounded), as reduce.c's xacc_finish. */
__global__ void k_xacc_round_n(const int64_t *acc, int nv, int dd, double *out) {
  const int v = blockIdx.x * blockDim.x + threadIdx.x;
  if (v >= nv) return;
  int64_t a[PK_XACC_LEN];
  for (int i = 0; i < PK_XACC_LEN; i++) a[i] = acc[(int64_t)v * PK_XACC_LEN + i];
  pk_xacc_normalize(a);
  const double hi = pk_xacc_value(a);
  if (!dd) {
    out[v] = hi;
    return;
  }
  double lo = 0.0;
  if (isfinite(hi)) { /* the accumulator minus hi, exactly, rounded */
    pk_xacc_add(a, -hi);
    pk_xacc_normalize(a);
    lo = pk_xacc_value(a);
  }
  out[2 * v] = hi;
  out[2 * v + 1] = lo;
}

} // namespace

extern "C" int64_t pk_cuda_xacc_grid(int64_t n) {
  int64_t grid = (n + kBlock - 1) / kBlock;
  if (grid > 512) grid = 512; /* a few waves: enough loads in flight, few block accumulators to add */
  if (grid < 1) grid = 1;
  const int64_t need = (n + kPerBlock - 1) / kPerBlock; /* the headroom bounds (see the file comment) */
  static_assert(kPerBlock <= kBlock * kPerThread, "a block's bound implies its threads'");
  if (grid < need) grid = need;
  return grid <= kMaxBlocks ? grid : -1;
}

extern "C" int pk_cuda_xacc_dots_ex(void *stream, int64_t n, int nv, const double *const *x,
                                    const double *const *y, int exact_prod, int64_t *blk, int64_t *acc,
                                    double *out) {
  const int64_t grid = pk_cuda_xacc_grid(n);
  if (nv < 1 || nv > PKC_XACC_MAXV || n < 0 || grid < 1) return (int)cudaErrorInvalidValue;
  XPairs pr;
  for (int j = 0; j < PKC_XACC_MAXV; j++) pr.x[j] = x[j < nv ? j : 0], pr.y[j] = y[j < nv ? j : 0];
  cudaStream_t st = (cudaStream_t)stream;
  if (!exact_prod) {
    switch (nv) {
    case 1: k_xacc_dots<1, false><<<(unsigned)grid, kBlock, 0, st>>>(n, pr, blk); break;
    case 2: k_xacc_dots<2, false><<<(unsigned)grid, kBlock, 0, st>>>(n, pr, blk); break;
    case 3: k_xacc_dots<3, false><<<(unsigned)grid, kBlock, 0, st>>>(n, pr, blk); break;
    default: k_xacc_dots<4, false><<<(unsigned)grid, kBlock, 0, st>>>(n, pr, blk); break;
    }
  } else {
    switch (nv) {
    case 1: k_xacc_dots<1, true><<<(unsigned)grid, kBlock, 0, st>>>(n, pr, blk); break;
    case 2: k_xacc_dots<2, true><<<(unsigned)grid, kBlock, 0, st>>>(n, pr, blk); break;
    case 3: k_xacc_dots<3, true><<<(unsigned)grid, kBlock, 0, st>>>(n, pr, blk); break;
    default: k_xacc_dots<4, true><<<(unsigned)grid, kBlock, 0, st>>>(n, pr, blk); break;
    }
  }
  return pk_cuda_xacc_blocks(stream, blk, grid, nv, acc, out);
}

extern "C" int pk_cuda_xacc_blocks(void *stream, int64_t *blk, int64_t nb, int nv, int64_t *acc, double *out) {
  /* the headroom: nb canonical accumulators (digits below 2^32) added as int64 */
  if (nv < 1 || nb < 1 || nb > ((int64_t)1 << 30)) return (int)cudaErrorInvalidValue;
  cudaStream_t st = (cudaStream_t)stream;
  int64_t bstride = (int64_t)nv * PK_XACC_LEN;
  if (nb > 2 * kRowsPerBlock) { /* the rows in groups first, in place: the finisher adds one row per group */
    const int64_t g = (nb + kRowsPerBlock - 1) / kRowsPerBlock;
    k_xacc_rows<<<(unsigned)g, kBlock, 0, st>>>(blk, nb, bstride, nv * PK_XACC_LEN);
    nb = g;
    bstride *= kRowsPerBlock;
  }
  for (int g0 = 0; g0 < nv; g0 += PKC_XACC_MAXV) { /* groups of PKC_XACC_MAXV (the finisher's shared sums) */
    const int gn = nv - g0 < PKC_XACC_MAXV ? nv - g0 : PKC_XACC_MAXV;
    k_xacc_finish<<<1, kFinishThreads, 0, st>>>(blk + (int64_t)g0 * PK_XACC_LEN, nb, bstride, gn,
                                               acc + (int64_t)g0 * PK_XACC_LEN, out ? out + g0 : nullptr);
  }
  return (int)cudaGetLastError();
}

extern "C" int pk_cuda_xacc_dots(void *stream, int64_t n, int nv, const double *const *x, const double *const *y,
                                 int64_t *blk, int64_t *acc, double *out) {
  return pk_cuda_xacc_dots_ex(stream, n, nv, x, y, 0, blk, acc, out);
}

extern "C" int pk_cuda_xacc_round_ex(void *stream, const int64_t *acc, int nv, int dd, double *out) {
  if (nv < 1) return (int)cudaErrorInvalidValue;
  const int t = 64;
  k_xacc_round_n<<<(unsigned)((nv + t - 1) / t), t, 0, (cudaStream_t)stream>>>(acc, nv, dd ? 1 : 0, out);
  return (int)cudaGetLastError();
}

extern "C" int pk_cuda_xacc_round(void *stream, const int64_t *acc, int nv, double *out) {
  if (nv < 1 || nv > PKC_XACC_MAXV) return (int)cudaErrorInvalidValue;
  k_xacc_round<<<1, 32, 0, (cudaStream_t)stream>>>(acc, nv, out);
  return (int)cudaGetLastError();
}

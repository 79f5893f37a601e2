/**
 * @file pk_cuda_xsum.cuh
 * @brief One-pass exact sums of reproducible mode on the GPU: the device pieces the CUDA vector engine's
 *        fused kernels (update + dots, multi-dots, the fused Gram-Schmidt pass, the fused operator product
 *        and update) use to add their products exactly in the same pass that reads the vectors.
 *
 * Each thread keeps, per sum, a two-term floating-point expansion (a0, a1) in registers (the ExBLAS method,
 * as the CPU's xdot.c): a term p is added by two TwoSums, (s0, e0) = a0 + p, (s1, e1) = a1 + e0, so that
 * a0 + a1 + p = s0 + s1 + e1 exactly (every operation round-to-nearest, written with __dadd_rn / __dsub_rn:
 * never contracted). When e1 = 0 (the common case: the terms' exponents span less than the expansion's
 * 106 bits) the expansion is (s0, s1) and nothing else happens; when e1 is finite and nonzero the expansion
 * cannot hold the term, (s0, s1) is kept and e1 goes to the block's exact accumulator (xs_put); when e1 is
 * not finite (p is Inf or NaN, or an intermediate overflowed: then s0 or s1 is not finite either and e1 is
 * NaN) the expansion is left as it was and p itself goes to the accumulator: finite, exactly; non-finite,
 * counted (pk_xacc.h's slot PK_XACC_DIGITS: the value is NaN). A product sum adds the rounded product
 * p = __dmul_rn(x, y) (the CPU's x * y); the double-double sums (dd) add p and, when p is finite, its
 * rounding error __fma_rn(x, y, -p) (reduce.c's exact_prod). So the accumulator ends with the exact sum of
 * the same terms as the CPU's and the two-pass GPU kernels' (pk_cuda_xacc.cu), whose canonical digits and
 * rounding (pk_xacc_value) are those of pk_xacc.h: the same doubles, bitwise.
 *
 * The block's accumulators are PK_XACC_LEN unsigned 64-bit slots each in shared memory (two's-complement
 * signed digits of pk_xacc.h), added to by 64-bit integer atomics (exact and associative: the atomics'
 * order does not matter). Flushes are rare inside the loop; at the end (xs_flush, all 32 lanes of every
 * warp) a1 (mostly 0) is put directly and the a0 of the lanes whose level is the warp's lowest level B or
 * B + 1 are combined by shuffles into a four-digit window added by lane 0 (a few atomics per warp and sum
 * instead of three per thread); then xs_store (all threads of the block) carries each accumulator to its
 * canonical form in place and writes the block's accumulators out, coalesced.
 *
 * Headroom: a slot receives at most one digit (< 2^32) per term flushed, per end flush of a lane's a1 and
 * per warp window (< 2^37); the launchers keep the elements per block below 2^26 (xgrid, pk_cuda_kry.cuh),
 * so a slot stays far below 2^63 before the block's carry pass.
 */
#ifndef PK_CUDA_XSUM_CUH
#define PK_CUDA_XSUM_CUH

#include <stdint.h>

extern "C" {
#include "pk_xacc.h"
}

namespace pkc_xsum {

typedef unsigned long long xslot;

/** Zero nacc accumulators (every thread of the block calls it; the caller synchronises after it). */
__device__ __forceinline__ void xs_zero(xslot *sh, int nacc) {
  for (int q = threadIdx.x; q < nacc * PK_XACC_LEN; q += blockDim.x)
    sh[q] = 0;
}

/** Add the signed digits d0, d1, d2 at slots L..L + 2 (L <= 63: at most slot 65) of sh. */
__device__ __forceinline__ void xs_digits(xslot *sh, unsigned L, int64_t d0, int64_t d1, int64_t d2) {
  if (d0)
    atomicAdd(sh + L, (xslot)d0); /* two's complement: signed addition */
  if (d1)
    atomicAdd(sh + L + 1, (xslot)d1);
  if (d2)
    atomicAdd(sh + L + 2, (xslot)d2);
}

/** Add the double v exactly to the accumulator sh (shared memory, integer atomics); Inf / NaN counted. */
static __device__ __noinline__ void xs_put(xslot *sh, double v) {
  unsigned L;
  int64_t d0, d1, d2;
  int neg;
  const int k = pk_xacc_split(v, &L, &d0, &d1, &d2, &neg);
  if (k == 0)
    return;
  if (k == 2) {
    atomicAdd(sh + PK_XACC_DIGITS, 1ull);
    return;
  }
  if (neg)
    d0 = -d0, d1 = -d1, d2 = -d2;
  xs_digits(sh, L, d0, d1, d2);
}

/** s + e = a + b exactly (Knuth's TwoSum; explicit roundings: never contracted). */
__device__ __forceinline__ void xs_two_sum(double a, double b, double &s, double &e) {
  s = __dadd_rn(a, b);
  const double bb = __dsub_rn(s, a);
  e = __dadd_rn(__dsub_rn(a, __dsub_rn(s, bb)), __dsub_rn(b, bb));
}

/** (a0, a1) += p exactly, the excess into the accumulator sh (see the file comment). */
__device__ __forceinline__ void xs_add(double &a0, double &a1, double p, xslot *sh) {
  double s0, e0, s1, e1;
  xs_two_sum(a0, p, s0, e0);
  xs_two_sum(a1, e0, s1, e1);
  if (__builtin_expect(e1 == 0.0, 1)) {
    a0 = s0, a1 = s1;
    return;
  }
  const bool fin = isfinite(e1); /* false: p non-finite or an overflow (then s0 or s1 is not finite) */
  if (fin)
    a0 = s0, a1 = s1;
  xs_put(sh, fin ? e1 : p);
}

/** The terms of the product x y: the rounded product p (the CPU's x * y); DD: and, p finite, its rounding
 *  error fma(x, y, -p) (reduce.c's exact_prod). */
template <bool DD>
__device__ __forceinline__ void xs_add_prod(double &a0, double &a1, double x, double y, xslot *sh) {
  const double p = __dmul_rn(x, y);
  xs_add(a0, a1, p, sh);
  if (DD && isfinite(p))
    xs_add(a0, a1, __fma_rn(x, y, -p), sh);
}

/** The end of a lane's expansion (a0, a1) into sh. All 32 lanes of the warp call it (converged), each with
 *  its own expansion (zeros where a lane added nothing). */
__device__ __forceinline__ void xs_flush(double a0, double a1, xslot *sh) {
  if (a1 != 0.0)
    xs_put(sh, a1);
  unsigned L = 0;
  int64_t d0 = 0, d1 = 0, d2 = 0;
  int neg = 0;
  const int k = pk_xacc_split(a0, &L, &d0, &d1, &d2, &neg); /* a0 is finite: k is 0 or 1 */
  unsigned B = k == 1 ? L : 0xffffffffu;
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
    const unsigned t = __shfl_xor_sync(0xffffffffu, B, o);
    B = t < B ? t : B;
  }
  if (B == 0xffffffffu)
    return; /* every lane's a0 is 0 (uniform over the warp) */
  if (neg)
    d0 = -d0, d1 = -d1, d2 = -d2;
  int64_t w0 = 0, w1 = 0, w2 = 0, w3 = 0; /* the window: digits B..B + 3 (B <= 63: at most slot 66) */
  if (k == 1 && L == B) {
    w0 = d0, w1 = d1, w2 = d2;
  } else if (k == 1 && L == B + 1) {
    w1 = d0, w2 = d1, w3 = d2;
  } else if (k == 1) { /* a level above the window: directly */
    xs_digits(sh, L, d0, d1, d2);
  }
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) { /* 32 digits below 2^32 each: below 2^37 */
    w0 += __shfl_down_sync(0xffffffffu, w0, o);
    w1 += __shfl_down_sync(0xffffffffu, w1, o);
    w2 += __shfl_down_sync(0xffffffffu, w2, o);
    w3 += __shfl_down_sync(0xffffffffu, w3, o);
  }
  if ((threadIdx.x & 31u) == 0) { /* B <= 63: at most slot 66 */
    xs_digits(sh, B, w0, w1, w2);
    if (w3)
      atomicAdd(sh + B + 3, (xslot)w3);
  }
}

/** After every flush of the block: the carry pass of accumulator j (< nacc) by thread j, in place. Every
 *  thread of the block calls it; the accumulators are canonical when it returns. */
__device__ __forceinline__ void xs_carry(xslot *sh, int nacc) {
  __syncthreads();
  for (int j = threadIdx.x; j < nacc; j += blockDim.x)
    pk_xacc_normalize((int64_t *)(sh + (int64_t)j * PK_XACC_LEN));
  __syncthreads();
}

/** xs_carry, then the block's nacc accumulators out to out[0 .. nacc * PK_XACC_LEN). */
__device__ __forceinline__ void xs_store(xslot *sh, int nacc, int64_t *out) {
  xs_carry(sh, nacc);
  for (int q = threadIdx.x; q < nacc * PK_XACC_LEN; q += blockDim.x)
    out[q] = (int64_t)sh[q];
}

/* ---- the CG drivers' loops (pk_cuda_steps.cu, pk_cuda_precond.cu) ---------------------------------------
 * An action's sum j of products, written once for both modes: acc[j] += a b (the default mode: the same
 * expression as before, bitwise), or with XR the one-pass exact sum in a four-term expansion (acc[XS_K j ..
 * XS_K j + 3]; the block's accumulator sh + j * PK_XACC_LEN). The operator loops' sums cancel (q = A p has
 * both signs), so the two terms of xs_add overflow into the accumulator's atomics often (H100, thin shell
 * 256 x 256 x 128: the operator loop 340 -> 600 us); the third and fourth terms take what the first two
 * cannot hold (xs_add4) and are touched only then. They did not make those loops fast (divergent overflows
 * remain: docs/notes/performance-history.md), so the drivers take one pass only on small problems
 * (kXOneAuto, pk_cuda_solver.cu). An XR action zeroes sh in begin() (xs_begin, every
 * thread) and its finish (xs_end, every thread) writes the block's NS canonical accumulators to its slot. */

constexpr int XS_K = 4; /* terms of an XR action's expansion per sum */

/** (a0, a1, a2, a3) += p exactly, the excess into the accumulator sh (xs_add with two more terms). */
__device__ __forceinline__ void xs_add4(double *a, double p, xslot *sh) {
  double s0, e0, s1, e1;
  xs_two_sum(a[0], p, s0, e0);
  xs_two_sum(a[1], e0, s1, e1);
  if (__builtin_expect(e1 == 0.0, 1)) {
    a[0] = s0, a[1] = s1;
    return;
  }
  if (!isfinite(e1)) { /* p non-finite or an overflow: the expansion as it was, p to the accumulator */
    xs_put(sh, p);
    return;
  }
  a[0] = s0, a[1] = s1;
  double s2, e2, s3, e3;
  xs_two_sum(a[2], e1, s2, e2);
  if (!isfinite(e2)) { /* (cannot happen with |e1| below an ulp of a0; kept exact anyway) */
    xs_put(sh, e1);
    return;
  }
  a[2] = s2;
  if (e2 == 0.0)
    return;
  xs_two_sum(a[3], e2, s3, e3);
  if (!isfinite(e3)) {
    xs_put(sh, e2);
    return;
  }
  a[3] = s3;
  if (e3 != 0.0)
    xs_put(sh, e3);
}

template <bool XR>
__device__ __forceinline__ void xs_acc(double *acc, int j, double a, double b, xslot *sh) {
  if constexpr (XR)
    xs_add4(acc + XS_K * j, __dmul_rn(a, b), sh + j * PK_XACC_LEN);
  else
    acc[j] += a * b;
}

/** The XR action's begin: its NS accumulators zeroed (every thread, before anything else of the action). */
__device__ __forceinline__ void xs_begin(xslot *sh, int ns) {
  xs_zero(sh, ns);
  __syncthreads();
}

/** The XR action's finish: every lane's expansions flushed (the third and fourth terms directly, mostly 0),
 *  the block's NS accumulators to slot `slot` of part (read as int64: NS * PK_XACC_LEN per block). */
template <int NS> __device__ __forceinline__ void xs_end(const double *acc, xslot *sh, double *part, int64_t slot) {
#pragma unroll
  for (int j = 0; j < NS; j++) {
    const double *a = acc + XS_K * j;
    if (a[2] != 0.0)
      xs_put(sh + j * PK_XACC_LEN, a[2]);
    if (a[3] != 0.0)
      xs_put(sh + j * PK_XACC_LEN, a[3]);
    xs_flush(a[0], a[1], sh + j * PK_XACC_LEN);
  }
  xs_store(sh, NS, (int64_t *)part + slot * NS * PK_XACC_LEN);
}

} // namespace pkc_xsum

#endif /* PK_CUDA_XSUM_CUH */

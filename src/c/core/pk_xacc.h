/**
 * @file pk_xacc.h
 * @brief The exact accumulator of reproducible mode, shared by the CPU (reduce.c) and the GPU
 *        (pk_cuda_xacc.cu): one digit format and one add / carry / round code, so that both backends build
 *        the same accumulator and the same double for the same multiset of terms.
 *
 * A double m 2^e (m a 53-bit integer) is added as the three 32-bit digits of m shifted to its bit position
 * above 2^-1074, each digit into an int64 slot; digits 0..PK_XACC_DIGITS-1 cover 2^-1074 to 2^1070 plus
 * carries, slot PK_XACC_DIGITS counts non-finite terms (the value is then NaN). A slot has room for 2^31
 * additions of a digit (< 2^32) before a carry pass (pk_xacc_normalize); the canonical form after a carry
 * pass has digits 0..PK_XACC_DIGITS-2 in [0, 2^32) and a signed top digit, so integer sums of normalised
 * accumulators (threads, GPU blocks, ranks: any order) stay exact for up to 2^31 of them.
 *
 * The functions are `static inline`, and for the CUDA compiler `__host__ __device__`. The rounding
 * (pk_xacc_value) is a fixed sequence of IEEE operations written with explicit roundings on the device
 * (__dmul_rn / __dadd_rn: no fused multiply-add contraction), so the device gives the host's double.
 */
#ifndef PK_XACC_H
#define PK_XACC_H

#include <math.h>
#include <stdint.h>
#include <string.h>

/** Digits of the exact accumulator: 32-bit digits from 2^-1074 up (67 of them, the last holding the sign
 *  and the carries) and a count of non-finite terms. */
#define PK_XACC_DIGITS 67
#define PK_XACC_LEN (PK_XACC_DIGITS + 1)

#if defined(__CUDACC__)
#define PK_XACC_HD __host__ __device__
#else
#define PK_XACC_HD
#endif

/** The raw bits of v. */
static inline PK_XACC_HD uint64_t pk_xacc_bits(double v) {
#if defined(__CUDA_ARCH__)
  return (uint64_t)__double_as_longlong(v);
#else
  uint64_t bits;
  memcpy(&bits, &v, sizeof bits);
  return bits;
#endif
}

/**
 * The digits of v: v = sign (d0 + d1 2^32 + d2 2^64) 2^(32 L - 1074), d0, d1 in [0, 2^32), d2 in [0, 2^21).
 * Returns 0 for a zero (nothing to add), 1 for a finite nonzero value (*neg its sign), 2 for Inf or NaN.
 */
static inline PK_XACC_HD int pk_xacc_split(double v, unsigned *L, int64_t *d0, int64_t *d1, int64_t *d2,
                                           int *neg) {
  const uint64_t bits = pk_xacc_bits(v);
  const unsigned ex = (unsigned)(bits >> 52) & 0x7ffu;
  uint64_t m = bits & ((UINT64_C(1) << 52) - 1);
  if (ex == 0x7ffu) return 2;
  unsigned pos = 0; /* bit position of m's lowest bit above 2^-1074 */
  if (ex != 0) {
    m |= UINT64_C(1) << 52;
    pos = ex - 1;
  }
  if (m == 0) return 0;
  const unsigned s = pos & 31u;
  const uint64_t sh = m << s; /* the low 64 bits of m 2^s */
  *L = pos >> 5;
  *d0 = (int64_t)(sh & 0xffffffffu);
  *d1 = (int64_t)(sh >> 32);
  *d2 = s ? (int64_t)(m >> (64 - s)) : 0;
  *neg = (int)(bits >> 63);
  return 1;
}

/** Add v to the accumulator d (PK_XACC_LEN slots). */
static inline PK_XACC_HD void pk_xacc_add(int64_t *d, double v) {
  unsigned L;
  int64_t d0, d1, d2;
  int neg;
  const int k = pk_xacc_split(v, &L, &d0, &d1, &d2, &neg);
  if (k == 2) { /* Inf or NaN: counted, the result is NaN */
    d[PK_XACC_DIGITS]++;
    return;
  }
  if (k == 0) return;
  if (neg) {
    d[L] -= d0, d[L + 1] -= d1, d[L + 2] -= d2;
  } else {
    d[L] += d0, d[L + 1] += d1, d[L + 2] += d2;
  }
}

/** Carry pass: digits 0..PK_XACC_DIGITS-2 into [0, 2^32), the top digit signed. Canonical for a value. */
static inline PK_XACC_HD void pk_xacc_normalize(int64_t *d) {
  for (int i = 0; i < PK_XACC_DIGITS - 1; i++) {
    const int64_t c = (d[i] - (d[i] & 0xffffffff)) / ((int64_t)1 << 32); /* floor(d / 2^32), exact */
    d[i] &= 0xffffffff;
    d[i + 1] += c;
  }
}

/** Round-to-nearest product and sum, never contracted into a fused multiply-add. */
static inline PK_XACC_HD double pk_xacc_mul(double a, double b) {
#if defined(__CUDA_ARCH__)
  return __dmul_rn(a, b);
#else
  return a * b;
#endif
}
static inline PK_XACC_HD double pk_xacc_addd(double a, double b) {
#if defined(__CUDA_ARCH__)
  return __dadd_rn(a, b);
#else
  return a + b;
#endif
}

/**
 * The accumulator (normalised) rounded to a double by a fixed procedure: the top three nonzero digits (at
 * least 65 significant bits; the digits below change the value by less than 2^-64 of it) combined by a
 * fixed sequence of roundings, then scaled (ldexp, exact or correctly rounded on both). NaN when a
 * non-finite term was added. Equal accumulators give equal doubles on the host and on the device.
 */
static inline PK_XACC_HD double pk_xacc_value(const int64_t *din) {
  if (din[PK_XACC_DIGITS] != 0) {
#if defined(__CUDA_ARCH__)
    return __longlong_as_double(0x7ff8000000000000LL);
#else
    return NAN;
#endif
  }
  int64_t d[PK_XACC_LEN];
  for (int i = 0; i < PK_XACC_LEN; i++) d[i] = din[i];
  double sign = 1.0;
  if (d[PK_XACC_DIGITS - 1] < 0) { /* magnitude of a negative value */
    for (int i = 0; i < PK_XACC_DIGITS; i++) d[i] = -d[i];
    pk_xacc_normalize(d);
    sign = -1.0;
  }
  int top = PK_XACC_DIGITS - 1;
  while (top >= 0 && d[top] == 0) top--;
  if (top < 0) return 0.0;
  double r = (double)d[top]; /* digits < 2^32: exact conversions */
  const int low = top >= 2 ? top - 2 : 0;
  for (int i = top - 1; i >= low; i--) r = pk_xacc_addd(pk_xacc_mul(r, 4294967296.0), (double)d[i]);
  return pk_xacc_mul(sign, ldexp(r, 32 * low - 1074));
}

#endif /* PK_XACC_H */

/**
 * @file xdot.c
 * @brief Reproducible mode's exact dot products in one pass (the CPU side of pk_xacc.h): each thread keeps,
 *        per sum, a short floating-point expansion in PK_XD_W independent lanes and adds to the exact
 *        accumulator only what the expansion cannot hold.
 *
 * The method is ExBLAS's (Iakymchuk, Collange, Defour, Graillat): a term p (the rounded product x*y; for
 * exact products also e = fma(x, y, -p), in an expansion of its own, as the errors are 2^-53 of the
 * products) is added to its lane's expansion by error-free TwoSums, a0 + p = s0 + e0, a1 + e0 = s1 + e1.
 * When e1 is 0 in every lane of a vector, (s0, s1) replace (a0, a1) and nothing else is touched (the usual
 * case: the terms of one sum seldom span more than the 106 bits two levels hold); otherwise the levels
 * 2..PK_XD_K-1 take the error in turn, and a lane whose last error is still not 0 adds it to the thread's
 * exact accumulator (pk_xacc.h). A lane whose chain is not finite (a term that is Inf or NaN, or a sum
 * that overflows: TwoSum then gives NaN) keeps its expansion and adds the term itself to the accumulator,
 * which counts the non-finite terms and holds any finite one exactly. pk_xdot_merge adds every level to
 * the accumulator. Each step is exact, so the accumulator holds the exact sum of the terms: the integer
 * that adding each term to it gives (reduce.c's former second pass), the same canonical digits after a
 * carry pass and the same double, for any partition into lanes, chunks, threads and ranks.
 *
 * The lanes are GNU C vector types. The library is built for the x86-64 baseline (SSE2), where the loop
 * runs at about a third of the speed of AVX2's; with GCC on x86-64 the loop is compiled three times
 * (xdot_kernel.h: 2, 4 and 8 doubles a vector; the baseline, x86-64-v3 and x86-64-v4) and the widest the
 * CPU runs is chosen once. Only the speed differs. No product is contracted into a fused multiply-add (ISO
 * C: -ffp-contract=off), so p is the rounded product that the CUDA kernels sum too.
 */
#include <math.h>
#include <string.h>

#include "pk_impl.h"

/** Additions to an accumulator's digits between two carry passes (each adds < 2^32 to a digit). */
#define PK_XD_CARRY_EVERY ((int64_t)1 << 30)
/** Calls of pk_xdot_add that test every vector after one whose optimistic pass failed. */
#define PK_XD_CAREFUL_CALLS 8

void pk_xdot_init(pk_xdot *X, int count) {
  X->count = count;
  memset(X->lev, 0, sizeof X->lev[0] * (size_t)count);
  memset(X->acc, 0, sizeof(int64_t) * PK_XACC_LEN * (size_t)count);
  memset(X->since, 0, sizeof(int64_t) * (size_t)count);
  memset(X->careful, 0, sizeof(int) * (size_t)count);
}

/** Add v to sum j's accumulator, with a carry pass when the digits' room runs short. */
static void xd_acc_add(pk_xdot *X, int j, double v) {
  pk_xacc_add(X->acc[j], v);
  if (++X->since[j] >= PK_XD_CARRY_EVERY) {
    pk_xacc_normalize(X->acc[j]);
    X->since[j] = 0;
  }
}

/** s + e = a + b exactly (Knuth's TwoSum; NaN in e when a + b is not finite). */
#define PK_XD_TWOSUM(T, a, b, s, e)                                                                \
  do {                                                                                             \
    const T s_ = (a) + (b), bb_ = s_ - (a);                                                        \
    (e) = ((a) - (s_ - bb_)) + ((b) - bb_);                                                        \
    (s) = s_;                                                                                      \
  } while (0)

#if defined(__GNUC__)

/* The row loop, once per vector width (xdot_kernel.h): the baseline's (2 doubles, SSE2), and with GCC on
   x86-64 also AVX2's (4, x86-64-v3) and AVX-512's (8, x86-64-v4), chosen once from the CPU's features:
   the library is built for the baseline, where GCC keeps neither wide vectors in registers. */
#define XD_V 2
#define XD_SFX _base
#define XD_TARGET
#include "xdot_kernel.h"

#if defined(__GNUC__) && __GNUC__ >= 12 && !defined(__clang__) && defined(__x86_64__)
#define PK_XD_MULTI 1
#define XD_V 4
#define XD_SFX _v3
#define XD_TARGET __attribute__((target("arch=x86-64-v3")))
#include "xdot_kernel.h"
#define XD_V 8
#define XD_SFX _v4
#define XD_TARGET __attribute__((target("arch=x86-64-v4")))
#include "xdot_kernel.h"
#endif

typedef void (*xd_add_fn)(pk_xdot *, int, const double *, const double *, const uint8_t *, int, int64_t, int64_t,
                          int64_t, int64_t);

/** The widest row loop this CPU runs (the same sums: only the speed differs). */
static xd_add_fn xd_choose(void) {
#if defined(PK_XD_MULTI)
  __builtin_cpu_init();
  if (__builtin_cpu_supports("x86-64-v4")) return xd_add_v4;
  if (__builtin_cpu_supports("x86-64-v3")) return xd_add_v3;
#endif
  return xd_add_base;
}

void pk_xdot_add(pk_xdot *X, int j, const double *x, const double *y, const uint8_t *wet, int exact_prod,
                 int64_t i0, int64_t len, int64_t nrun, int64_t stride) {
  static xd_add_fn fn; /* set once; threads racing here store the same pointer */
  xd_add_fn f = __atomic_load_n(&fn, __ATOMIC_RELAXED);
  if (!f) {
    f = xd_choose();
    __atomic_store_n(&fn, f, __ATOMIC_RELAXED);
  }
  f(X, j, x, y, wet, exact_prod, i0, len, nrun, stride);
}

#else /* no vector types: lane 0 of each level, one term at a time */

/** Add p to lane 0 of stream st of sum j (the levels, then the accumulator, as xd_deep). */
static void xd_add1(pk_xdot *X, int j, int st, double p) {
  double(*lv)[PK_XD_W] = X->lev[j][st], s[PK_XD_K], e = p;
  for (int v = 0; v < PK_XD_K; v++) PK_XD_TWOSUM(double, lv[v][0], e, s[v], e);
  if (!isfinite(e)) {
    xd_acc_add(X, j, p);
    return;
  }
  for (int v = 0; v < PK_XD_K; v++) lv[v][0] = s[v];
  if (e != 0.0) xd_acc_add(X, j, e);
}

void pk_xdot_add(pk_xdot *X, int j, const double *x, const double *y, const uint8_t *wet, int exact_prod,
                 int64_t i0, int64_t len, int64_t nrun, int64_t stride) {
  for (int64_t k = 0; k < nrun; k++)
    for (int64_t i = i0 + k * stride; i < i0 + k * stride + len; i++) {
      if (wet && !wet[i]) continue;
      const double p = x[i] * y[i];
      xd_add1(X, j, 0, p);
      if (exact_prod && isfinite(p)) xd_add1(X, j, 1, fma(x[i], y[i], -p));
    }
}

#endif

void pk_xdot_merge(pk_xdot *X, int64_t *out) {
  for (int j = 0; j < X->count; j++) {
    for (int st = 0; st < 2; st++)
      for (int v = 0; v < PK_XD_K; v++)
        for (int l = 0; l < PK_XD_W; l++) pk_xacc_add(X->acc[j], X->lev[j][st][v][l]); /* all finite */
    pk_xacc_normalize(X->acc[j]);
  }
#pragma omp critical(pk_xacc)
  for (int j = 0; j < X->count; j++)
    for (int q = 0; q < PK_XACC_LEN; q++) out[(int64_t)j * PK_XACC_LEN + q] += X->acc[j][q]; /* any order */
}

/**
 * @file fuzz_common.h
 * @brief What the libFuzzer harnesses of tests/fuzz share: reading the fuzzer's bytes as the caller's
 *        choices (small counts, values of any bit pattern, values that matter to the state machines), and
 *        the check that a library call stayed within what the caller gave it.
 *
 * A harness is a caller of the public API that does whatever the bytes say, including everything a caller
 * must not do short of breaking the documented contract (arrays shorter than documented): the library must
 * answer every such call with a status, never a crash, an out-of-bounds access (AddressSanitizer), undefined
 * behaviour (UndefinedBehaviorSanitizer), a hang or unbounded memory.
 */
#ifndef PKRYLOV_FUZZ_COMMON_H
#define PKRYLOV_FUZZ_COMMON_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pkrylov.h"

/** The fuzzer's bytes, read front to back; past the end every read gives 0. */
typedef struct {
  const uint8_t *p;
  size_t n, k;
} fz_in;

static inline int fz_more(const fz_in *in) { return in->k < in->n; }

static inline uint8_t fz_u8(fz_in *in) { return in->k < in->n ? in->p[in->k++] : 0; }

static inline int32_t fz_i32(fz_in *in) {
  uint32_t v = 0;
  for (int b = 0; b < 4; b++) v |= (uint32_t)fz_u8(in) << (8 * b);
  int32_t s;
  memcpy(&s, &v, sizeof s);
  return s;
}

/** Any bit pattern: NaN, Inf, subnormals, huge values. */
static inline double fz_raw(fz_in *in) {
  uint64_t v = 0;
  for (int b = 0; b < 8; b++) v |= (uint64_t)fz_u8(in) << (8 * b);
  double d;
  memcpy(&d, &v, sizeof d);
  return d;
}

/** Mostly a modest number (k / 8 for a signed byte k), sometimes (1 in 16) any bit pattern. */
static inline double fz_f64(fz_in *in) {
  const uint8_t c = fz_u8(in);
  if ((c & 15) == 15) return fz_raw(in);
  return (double)(int8_t)fz_u8(in) / 8.0;
}

/**
 * An integer that matters to a state machine: one of the boundary values (0, +-1, 2, n, n +- 1, m, m +- 1,
 * len, len +- 1, 2^31 - 1, -2^31, ...) or, now and then, any 32-bit value.
 */
static inline int32_t fz_int(fz_in *in, int64_t n, int64_t m, int64_t len) {
  const int64_t v[] = {0, 1, -1, 2, 3, n, n + 1, n - 1, m, m + 1, m - 1, len, len + 1, len - 1, 2 * n + 1,
                       INT32_MAX, INT32_MIN, 150, 6};
  const uint8_t c = fz_u8(in);
  const size_t nv = sizeof v / sizeof v[0];
  if (c % 24 >= nv) return fz_i32(in);
  const int64_t x = v[c % 24];
  return x > INT32_MAX ? INT32_MAX : x < INT32_MIN ? INT32_MIN : (int32_t)x;
}

/** Stop the fuzzer with a message: a promise of the library was broken (the harness found a bug). */
#define FZ_ASSERT(cond, ...)                                                                                 \
  do {                                                                                                       \
    if (!(cond)) {                                                                                           \
      fprintf(stderr, "fuzz harness: %s:%d: %s: ", __FILE__, __LINE__, #cond);                               \
      fprintf(stderr, __VA_ARGS__);                                                                          \
      fprintf(stderr, "\n");                                                                                 \
      abort();                                                                                               \
    }                                                                                                        \
  } while (0)

/** y = A x for the dense n x n matrix A (row major) the harness made from its bytes. */
static inline void fz_matvec(int64_t n, const double *A, const double *x, double *y) {
  for (int64_t i = 0; i < n; i++) {
    double s = 0.0;
    for (int64_t j = 0; j < n; j++) s += A[i * n + j] * x[j];
    y[i] = s;
  }
}

/**
 * A dense n x n matrix from the bytes: the diagonal dominant (so that many solves converge) unless a byte
 * says otherwise, entries fz_f64 (sometimes NaN, Inf, huge), symmetric when sym.
 */
static inline void fz_matrix(fz_in *in, int64_t n, int sym, double *A) {
  const int wild = fz_u8(in) % 4 == 0;
  for (int64_t i = 0; i < n; i++)
    for (int64_t j = sym ? i : 0; j < n; j++) {
      double a = i == j ? 0.0 : fz_f64(in);
      A[i * n + j] = a;
      if (sym) A[j * n + i] = a;
    }
  for (int64_t i = 0; i < n; i++) {
    double s = 1.0;
    for (int64_t j = 0; j < n; j++)
      if (j != i && A[i * n + j] == A[i * n + j]) s += A[i * n + j] < 0 ? -A[i * n + j] : A[i * n + j];
    A[i * n + i] = wild ? fz_f64(in) : (fz_u8(in) & 1 ? -s : s);
  }
}

/**
 * The system of a harness: A by fz_matrix, its diagonal D (the Jacobi preconditioner the harness applies),
 * and two vectors u, v of n values (x and b, in the order the harness passes them), read u_i, v_i by i.
 */
static inline void fz_system(fz_in *in, int64_t n, int sym, double *A, double *D, double *u, double *v) {
  fz_matrix(in, n, sym, A);
  for (int64_t i = 0; i < n; i++) D[i] = A[i * n + i], u[i] = fz_f64(in), v[i] = fz_f64(in);
}

#endif

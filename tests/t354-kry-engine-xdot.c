/**
 * @file t354-kry-engine-xdot.c
 * @brief Reproducible mode's one-pass exact sums (pk_xdot, xdot.c; the CPU fused loops of cpu_kernels.c)
 *        against an independent reference: each term added on its own to a pk_xacc accumulator, in order.
 *
 *  - xdot_nasty: pk_xdot on products spanning 2^-1100 to 2^1000 (subnormal products, products that
 *    underflow to 0), heavy cancellation, sums that overflow a double, subnormal inputs, Inf and NaN,
 *    rounded and exact (fma) products, with and without a wet mask, lengths that are and are not
 *    multiples of the lanes, in one call, in random pieces, in strided runs, and several data kinds
 *    into one sum (its careful mode): the accumulator digits (and the non-finite count) bitwise the
 *    reference's.
 *  - xdots_threads: pk_allreduce_dots and pk_allreduce_xdots_begin (exact products, double-double result)
 *    on a reproducible context with 1 to 16 threads: every value bitwise the reference's rounding.
 *  - fused_steps: the fused CG loops with their exact sums (pk_cpu_residual, pk_cpu_cg_precond_step with
 *    no, Jacobi and column preconditioners (k-slow on the thin shell, k-fast on a CSR matrix), pk_cpu_cg_operator_step, pk_cpu_pipecg_step
 *    with 3 and 7 sums), 1 and 3 threads: the vectors bitwise those of the loop without exact sums, the
 *    accumulators bitwise the reference of the updated vectors.
 *
 * White-box (pk_impl.h; links the internal static library). CPU only.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "pk_kry.h"
#include "pk_test.h"

/** ref += the terms of the products x[i] y[i], i in idx[0..m) (exact_prod: p and fma(x, y, -p)). */
static void ref_add(int64_t *ref, const double *x, const double *y, const int64_t *idx, int64_t m,
                    int exact_prod) {
  for (int64_t k = 0; k < m; k++) {
    const int64_t i = idx[k];
    const double p = x[i] * y[i];
    pk_xacc_add(ref, p);
    if (exact_prod && isfinite(p)) pk_xacc_add(ref, fma(x[i], y[i], -p));
    if ((k & 0xfffff) == 0xfffff) pk_xacc_normalize(ref);
  }
  pk_xacc_normalize(ref);
}

/** Uniform in [0, 1) (pk_test_rand is uniform in [-1, 1)). */
static double u01(uint64_t *seed) { return 0.5 * (pk_test_rand(seed) + 1.0); }

/** A random double with exponent in [e0, e1) (e0 >= -1074: subnormals below -1022), random sign. */
static double rand_exp(uint64_t *seed, int e0, int e1) {
  const int e = e0 + (int)(u01(seed) * (e1 - e0));
  const double v = ldexp(1.0 + u01(seed), e);
  return u01(seed) < 0.5 ? -v : v;
}

enum { KIND_UNIFORM, KIND_WIDE, KIND_CANCEL, KIND_HUGE, KIND_NONFINITE, KIND_SUBNORMAL, KIND_SMALLRANGE, NKIND };

/** x, y of kind `kind` over n values. */
static void fill(int kind, int64_t n, double *x, double *y, uint64_t *seed) {
  for (int64_t i = 0; i < n; i++) {
    switch (kind) {
    case KIND_UNIFORM: x[i] = u01(seed) - 0.5, y[i] = u01(seed) - 0.3; break;
    case KIND_WIDE: /* products from 2^-1100 (underflow) to 2^1000 */
      x[i] = rand_exp(seed, -560, 500), y[i] = rand_exp(seed, -560, 500);
      break;
    case KIND_CANCEL: /* pairs (x, y), (-x, y) a random distance apart, a few left uncancelled */
      if (i % 2 == 0 || u01(seed) < 0.01) {
        x[i] = rand_exp(seed, -300, 300), y[i] = rand_exp(seed, -300, 300);
      } else {
        const int64_t j = (int64_t)(u01(seed) * (double)(i / 2)) * 2;
        x[i] = -x[j], y[i] = y[j];
      }
      break;
    case KIND_HUGE: /* products near 2^1020: their sums overflow a double */
      x[i] = ldexp(1.0 + u01(seed), 510), y[i] = (u01(seed) < 0.7 ? 1 : -1) * ldexp(1.5, 509);
      break;
    case KIND_NONFINITE:
      x[i] = u01(seed) - 0.5, y[i] = rand_exp(seed, -20, 20);
      if (u01(seed) < 0.002) x[i] = u01(seed) < 0.5 ? INFINITY : (u01(seed) < 0.5 ? -INFINITY : NAN);
      break;
    case KIND_SUBNORMAL: x[i] = rand_exp(seed, -1074, -1000), y[i] = u01(seed) < 0.5 ? 1.0 : rand_exp(seed, 0, 60); break;
    default: x[i] = 1.0 + 1e-3 * u01(seed), y[i] = 1.0; break;
    }
  }
}

/** pk_xdot of sum 0 over its own X, merged into out (zeroed first, normalised after). */
static void xdot_out(pk_xdot *X, int64_t *out) {
  memset(out, 0, sizeof(int64_t) * PK_XACC_LEN);
  pk_xdot_merge(X, out);
  pk_xacc_normalize(out);
}

static int acc_equal(const int64_t *a, const int64_t *b) { return memcmp(a, b, sizeof(int64_t) * PK_XACC_LEN) == 0; }

PK_TEST_CASE_CPU(xdot_nasty) {
  const int64_t sizes[] = {1, 3, 7, 8, 9, 17, 1000, 4097, 33333};
  uint64_t seed = 7;
  const int64_t nmax = 33333;
  double *x = malloc(sizeof(double) * nmax), *y = malloc(sizeof(double) * nmax);
  uint8_t *wet = malloc(nmax);
  int64_t *idx = malloc(sizeof(int64_t) * nmax);
  pk_xdot X;
  int64_t ref[PK_XACC_LEN], got[PK_XACC_LEN];
  for (int kind = 0; kind < NKIND; kind++)
    for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++)
      for (int ep = 0; ep < 2; ep++)
        for (int usewet = 0; usewet < 2; usewet++) {
          const int64_t n = sizes[s];
          fill(kind, n, x, y, &seed);
          int64_t m = 0;
          for (int64_t i = 0; i < n; i++) {
            wet[i] = !usewet || u01(&seed) < 0.8;
            if (wet[i]) idx[m++] = i;
          }
          const uint8_t *w = usewet ? wet : NULL;
          memset(ref, 0, sizeof ref);
          ref_add(ref, x, y, idx, m, ep);
          /* one call */
          pk_xdot_init(&X, 1);
          pk_xdot_add(&X, 0, x, y, w, ep, 0, n, 1, 0);
          xdot_out(&X, got);
          PK_EXPECT(acc_equal(got, ref), "kind %d n %lld exact_prod %d wet %d: one call", kind, (long long)n, ep,
                    usewet);
          /* random pieces, in a random order of two halves */
          pk_xdot_init(&X, 1);
          const int64_t half = n / 2;
          for (int part = 1; part >= 0; part--) {
            int64_t i0 = part ? half : 0, i1 = part ? n : half;
            while (i0 < i1) {
              int64_t len = 1 + (int64_t)(u01(&seed) * 40);
              if (len > i1 - i0) len = i1 - i0;
              pk_xdot_add(&X, 0, x, y, w, ep, i0, len, 1, 0);
              i0 += len;
            }
          }
          xdot_out(&X, got);
          PK_EXPECT(acc_equal(got, ref), "kind %d n %lld exact_prod %d wet %d: pieces (%.17g vs %.17g)", kind,
                    (long long)n, ep, usewet, pk_xacc_value(got), pk_xacc_value(ref));
          /* strided runs: rows [k stride + 2, k stride + 2 + len) of n / stride runs */
          if (n >= 17) {
            const int64_t stride = 17, len = 13, nrun = n / stride;
            int64_t mr = 0;
            for (int64_t k = 0; k < nrun; k++)
              for (int64_t i = k * stride + 2; i < k * stride + 2 + len; i++)
                if (!w || w[i]) idx[mr++] = i;
            memset(ref, 0, sizeof ref);
            ref_add(ref, x, y, idx, mr, ep);
            pk_xdot_init(&X, 1);
            pk_xdot_add(&X, 0, x, y, w, ep, 2, len, nrun, stride);
            xdot_out(&X, got);
            PK_EXPECT(acc_equal(got, ref), "kind %d n %lld exact_prod %d wet %d: runs", kind, (long long)n, ep,
                      usewet);
          }
        }
  /* every kind into one sum, twice over (the careful mode after a failed optimistic pass, then back) */
  for (int ep = 0; ep < 2; ep++) {
    memset(ref, 0, sizeof ref);
    pk_xdot_init(&X, 1);
    for (int rep = 0; rep < 2; rep++)
      for (int kind = 0; kind < NKIND; kind++) {
        const int64_t n = 4097;
        fill(kind == KIND_NONFINITE ? KIND_UNIFORM : kind, n, x, y, &seed); /* finite: a value to compare */
        for (int64_t i = 0; i < n; i++) idx[i] = i;
        ref_add(ref, x, y, idx, n, ep);
        pk_xdot_add(&X, 0, x, y, NULL, ep, 0, n, 1, 0);
      }
    xdot_out(&X, got);
    PK_EXPECT(acc_equal(got, ref), "mixed kinds, exact_prod %d", ep);
  }
  free(x), free(y), free(wet), free(idx);
  PK_TEST_END();
}

PK_TEST_CASE_CPU(xdots_threads) {
  const int64_t n = 100003;
  double *x = malloc(sizeof(double) * n), *y = malloc(sizeof(double) * n);
  int64_t *idx = malloc(sizeof(int64_t) * n);
  uint64_t seed = 11;
  pkrylov_context ctx;
  PK_REQUIRE_OK(NULL, pkrylov_context_create(PKRYLOV_BACKEND_CPU, &ctx));
  PK_REQUIRE_OK(ctx, pkrylov_context_set_reproducible(ctx, 1));
  for (int64_t i = 0; i < n; i++) idx[i] = i;
  for (int kind = 0; kind < NKIND; kind++) {
    fill(kind, n, x, y, &seed);
    int64_t ref[PK_XACC_LEN] = {0}, refe[PK_XACC_LEN] = {0};
    ref_add(ref, x, y, idx, n, 0);
    ref_add(refe, x, y, idx, n, 1);
    const double want = pk_xacc_value(ref), hi = pk_xacc_value(refe);
    double lo = 0.0;
    if (isfinite(hi)) {
      pk_xacc_add(refe, -hi);
      pk_xacc_normalize(refe);
      lo = pk_xacc_value(refe);
    }
    const int threads[] = {1, 2, 3, 5, 16};
    for (size_t t = 0; t < sizeof threads / sizeof threads[0]; t++) {
      PK_REQUIRE_OK(ctx, pkrylov_context_set_num_threads(ctx, threads[t]));
      double v = 0.0;
      PK_REQUIRE_OK(ctx, pk_allreduce_dots(ctx, &v, 1, n, (const double *[]){x}, (const double *[]){y}, NULL));
      PK_EXPECT(memcmp(&v, &want, sizeof v) == 0 || (isnan(v) && isnan(want)), "kind %d, %d threads: %.17g vs %.17g",
                kind, threads[t], v, want);
      double dd[2];
      int64_t acc[PK_XACC_LEN];
      pk_reduce_request rq;
      PK_REQUIRE_OK(ctx, pk_allreduce_xdots_begin(ctx, dd, 1, n, (const double *[]){x}, (const double *[]){y}, NULL,
                                                  1, 1, acc, &rq));
      PK_REQUIRE_OK(ctx, pk_allreduce_end(ctx, &rq));
      PK_EXPECT((memcmp(&dd[0], &hi, sizeof hi) == 0 && memcmp(&dd[1], &lo, sizeof lo) == 0) ||
                    (isnan(dd[0]) && isnan(hi)),
                "kind %d, %d threads, exact products: (%.17g, %.17g) vs (%.17g, %.17g)", kind, threads[t], dd[0],
                dd[1], hi, lo);
    }
  }
  pkrylov_context_destroy(&ctx);
  free(x), free(y), free(idx);
  PK_TEST_END();
}

/** ref (count accumulators) of the pairs (a[j], b[j]) over n rows. */
static void ref_pairs(int64_t *ref, int count, const double *const *a, const double *const *b, int64_t n,
                      int64_t *idx) {
  for (int64_t i = 0; i < n; i++) idx[i] = i;
  memset(ref, 0, sizeof(int64_t) * PK_XACC_LEN * (size_t)count);
  for (int j = 0; j < count; j++) ref_add(ref + (int64_t)j * PK_XACC_LEN, a[j], b[j], idx, n, 0);
}

enum { NV = 13 }; /* vectors of the fused steps */

PK_TEST_CASE_CPU(fused_steps) {
  pkrylov_context ctx;
  PK_REQUIRE_OK(NULL, pkrylov_context_create(PKRYLOV_BACKEND_CPU, &ctx));
  pkrylov_thinshell_params tp;
  PK_REQUIRE_OK(ctx, pkrylov_thinshell_params_default(70, 45, 12, &tp));
  pkrylov_operator A;
  PK_REQUIRE_OK(ctx, pkrylov_operator_create_thinshell(ctx, &tp, &A));
  const int64_t n = 70 * 45 * 12;
  const struct {
    int32_t type, layout;
  } pcs[] = {{PKRYLOV_PRECOND_NONE, PKRYLOV_LAYOUT_AUTO},
             {PKRYLOV_PRECOND_JACOBI, PKRYLOV_LAYOUT_AUTO},
             {PKRYLOV_PRECOND_COLUMN, PKRYLOV_LAYOUT_KSLOW},
             {PKRYLOV_PRECOND_COLUMN, PKRYLOV_LAYOUT_KFAST}};
  /* a CSR matrix whose columns of 12 levels are contiguous (k-fast), for the column preconditioner's other
     layout: within a column -1, 4, -1, and a coupling to the next column */
  int32_t *rp = malloc(sizeof(int32_t) * (size_t)(n + 1)), *ci = malloc(sizeof(int32_t) * (size_t)n * 4);
  double *cv = malloc(sizeof(double) * (size_t)n * 4);
  int64_t nnz = 0;
  rp[0] = 0;
  for (int64_t i = 0; i < n; i++) {
    const int64_t k = i % 12;
    if (k > 0) ci[nnz] = (int32_t)(i - 1), cv[nnz++] = -1.0;
    ci[nnz] = (int32_t)i, cv[nnz++] = 4.5;
    if (k < 11) ci[nnz] = (int32_t)(i + 1), cv[nnz++] = -1.0;
    if (i + 12 < n) ci[nnz] = (int32_t)(i + 12), cv[nnz++] = -0.25;
    rp[i + 1] = (int32_t)nnz;
  }
  pkrylov_operator C;
  PK_REQUIRE_OK(ctx, pkrylov_operator_create_csr(ctx, (int32_t)n, 0, rp, ci, cv, &C));
  free(rp), free(ci), free(cv);
  double *v0[NV], *v1[NV];
  for (int k = 0; k < NV; k++) v0[k] = malloc(sizeof(double) * n), v1[k] = malloc(sizeof(double) * n);
  int64_t *idx = malloc(sizeof(int64_t) * n);
  int64_t acc[PK_RR_NV * PK_XACC_LEN], ref[PK_RR_NV * PK_XACC_LEN];
  uint64_t seed = 5;
  for (size_t c = 0; c < sizeof pcs / sizeof pcs[0]; c++) {
    pkrylov_precond M = NULL;
    if (pcs[c].type != PKRYLOV_PRECOND_NONE)
      PK_REQUIRE_OK(ctx, pkrylov_precond_create(ctx, pcs[c].layout == PKRYLOV_LAYOUT_KFAST ? C : A, pcs[c].type, 12,
                                                pcs[c].layout, &M));
    double *part = malloc(sizeof(double) * (size_t)pk_cpu_scratch_size(n, M));
    for (int nt = 1; nt <= 3; nt += 2) {
      PK_REQUIRE_OK(ctx, pkrylov_context_set_num_threads(ctx, nt));
      double out0[PK_RR_NV], out1[PK_RR_NV];
      /* fresh vectors in v0, copied to v1: the step without exact sums on v0, with them on v1 */
#define FRESH()                                                                                    \
  do {                                                                                             \
    for (int k = 0; k < NV; k++)                                                                   \
      for (int64_t i = 0; i < n; i++) v0[k][i] = u01(&seed) - 0.5;                        \
    for (int k = 0; k < NV; k++) memcpy(v1[k], v0[k], sizeof(double) * n);                        \
  } while (0)
#define SAME_VECTORS(what)                                                                         \
  for (int k = 0; k < NV; k++)                                                                     \
    PK_EXPECT(memcmp(v0[k], v1[k], sizeof(double) * n) == 0, "%s: vector %d differs (precond %zu, %d threads)", \
              what, k, c, nt)
      if (c == 0) { /* the residual and the operator-side loops do not depend on M */
        FRESH();
        pk_cpu_residual(A, v0[0], v0[1], v0[2], part, out0, NULL);
        pk_cpu_residual(A, v1[0], v1[1], v1[2], part, out1, acc);
        SAME_VECTORS("residual");
        ref_pairs(ref, 1, (const double *[]){v1[2]}, (const double *[]){v1[2]}, n, idx);
        PK_EXPECT(memcmp(acc, ref, sizeof(int64_t) * PK_XACC_LEN) == 0, "residual: exact sum (%d threads)", nt);
        FRESH();
        pk_cpu_cg_operator_step(A, 0.3, -0.7, v0[0], v0[1], v0[2], v0[3], part, out0, NULL);
        pk_cpu_cg_operator_step(A, 0.3, -0.7, v1[0], v1[1], v1[2], v1[3], part, out1, acc);
        SAME_VECTORS("cg_operator");
        ref_pairs(ref, 1, (const double *[]){v1[1]}, (const double *[]){v1[3]}, n, idx);
        PK_EXPECT(memcmp(acc, ref, sizeof(int64_t) * PK_XACC_LEN) == 0, "cg_operator: exact sum (%d threads)", nt);
        for (int nv = PK_RR_NV_BASE; nv <= PK_RR_NV; nv += PK_RR_NV - PK_RR_NV_BASE) {
          FRESH();
          /* m z q s p x r u w */
          pk_cpu_pipecg_step(A, NULL, 0.3, -0.7, v0[0], v0[1], v0[2], v0[3], v0[4], v0[5], v0[6], v0[7], v0[8], nv,
                             part, out0, NULL);
          pk_cpu_pipecg_step(A, NULL, 0.3, -0.7, v1[0], v1[1], v1[2], v1[3], v1[4], v1[5], v1[6], v1[7], v1[8], nv,
                             part, out1, acc);
          SAME_VECTORS("pipecg");
          double *r = v1[6], *u = v1[7], *w = v1[8], *x = v1[5], *p = v1[4], *q = v1[2];
          ref_pairs(ref, nv, (const double *[]){r, w, r, x, p, u, q}, (const double *[]){u, u, r, x, p, u, q}, n, idx);
          PK_EXPECT(memcmp(acc, ref, sizeof(int64_t) * PK_XACC_LEN * nv) == 0, "pipecg %d sums: exact sums (%d threads)",
                    nv, nt);
        }
      }
      FRESH();
      pk_cpu_cg_precond_step(ctx, M, n, 0.4, v0[0], v0[1], v0[2], part, out0, NULL);
      pk_cpu_cg_precond_step(ctx, M, n, 0.4, v1[0], v1[1], v1[2], part, out1, acc);
      SAME_VECTORS("cg_precond");
      ref_pairs(ref, 2, (const double *[]){v1[0], v1[0]}, (const double *[]){v1[2], v1[0]}, n, idx);
      PK_EXPECT(memcmp(acc, ref, sizeof(int64_t) * PK_XACC_LEN * 2) == 0,
                "cg_precond: exact sums (precond %zu, %d threads)", c, nt);
#undef FRESH
#undef SAME_VECTORS
    }
    free(part);
    if (M) pkrylov_precond_destroy(&M);
  }
  for (int k = 0; k < NV; k++) free(v0[k]), free(v1[k]);
  free(idx);
  pkrylov_operator_destroy(&A);
  pkrylov_operator_destroy(&C);
  pkrylov_context_destroy(&ctx);
  PK_TEST_END();
}

PK_TEST_MAIN(PK_TEST_ENTRY(xdot_nasty), PK_TEST_ENTRY(xdots_threads), PK_TEST_ENTRY(fused_steps))

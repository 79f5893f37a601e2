/**
 * @file t726-cuda-kry-xsum.c
 * @brief Reproducible mode's one-pass exact sums in the CUDA vector engine's fused kernels
 *        (pk_cuda_xsum.cuh: k_update, k_mdot, k_axpy_dots, the fused CSR matvec_update of
 *        pk_cuda_kry_fused.cu) against an independent reference computed here on the host: the terms of
 *        every sum (the rounded products x[i] * y[i] of the vectors read back from the engine after the
 *        operation, and for the double-double Gram matrices also fma(x, y, -p) where p is finite) added one
 *        by one to a pk_xacc accumulator, rounded by pk_xacc_value (the double-double pairs: hi, then the
 *        rest rounded). Every sum must be bitwise the reference's (NaN: NaN).
 *
 * Data (each vector of its own kind): uniform; products from 2^-1100 (underflow) to 2^1000; heavy
 * cancellation (a vector whose second half is the negated first half against one whose second half
 * repeats its first, a few left out); products near 2^1020 whose sums
 * overflow a double; subnormal inputs and products; a few Inf and NaN among ordinary values; one exponent
 * window. Lengths 1, 255, 257, 70001 and 1000003 (not multiples of the block, many blocks). Operations:
 * update with 1, 3 and 8 pairs (one update besides), matvec_update on a CSR matrix (1, 3 and 8 pairs, an
 * update besides), block_dots (4x4 and 8x1 tiles, double-double 2x2 tiles), basis_dots with the norm,
 * basis_axpy_dots with k = 5, 12 and 20 (the kernel's three register sizes). White box (pk_kry.h); skips
 * (77) without a GPU. PK_T726_QUICK=1 leaves out the largest length (for compute-sanitizer runs).
 */
#include <cuda_runtime.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "pk_cuda.h"
#include "pk_kry.h"
#include "pk_test.h"
#include "pk_cuda_test.h"

enum { NW = 6, NB = 24, NS = 400, OUT = 200 };

/* ---- data ------------------------------------------------------------------------------------------ */

static double u01(uint64_t *seed) { return 0.5 * (pk_test_rand(seed) + 1.0); }

/** A random double with exponent in [e0, e1), random sign (2^e0 below 2^-1022: subnormal). */
static double rand_exp(uint64_t *seed, int e0, int e1) {
  const int e = e0 + (int)(u01(seed) * (e1 - e0));
  const double v = ldexp(1.0 + u01(seed), e);
  return u01(seed) < 0.5 ? -v : v;
}

enum { K_UNIFORM, K_WIDE, K_CANCEL, K_HUGE, K_SUBNORMAL, K_NONFINITE, K_WINDOW, NKIND };
static const char *kind_name[NKIND] = {"uniform", "wide", "cancel", "huge", "subnormal", "nonfinite", "window"};

static void fill(int kind, int64_t n, double *v, uint64_t *seed) {
  for (int64_t i = 0; i < n; i++) {
    switch (kind) {
    case K_UNIFORM: v[i] = u01(seed) - 0.4; break;
    case K_WIDE: /* the second half repeats the first (a few not): against K_CANCEL, cancellation */
      v[i] = i >= (n + 1) / 2 && u01(seed) >= 0.01 ? v[i - (n + 1) / 2] : rand_exp(seed, -550, 500);
      break;
    case K_CANCEL:
      if (i < (n + 1) / 2 || u01(seed) < 0.01)
        v[i] = rand_exp(seed, -300, 300);
      else
        v[i] = -v[i - (n + 1) / 2];
      break;
    case K_HUGE: v[i] = (u01(seed) < 0.8 ? 1 : -1) * ldexp(1.0 + u01(seed), 510); break;
    case K_SUBNORMAL: v[i] = u01(seed) < 0.5 ? rand_exp(seed, -1074, -1022) : rand_exp(seed, -30, 20); break;
    case K_NONFINITE: {
      const double r = u01(seed);
      v[i] = r < 0.0005 ? INFINITY : r < 0.001 ? -INFINITY : r < 0.0015 ? NAN : u01(seed) - 0.5;
      break;
    }
    default: v[i] = rand_exp(seed, -2, 2); break;
    }
  }
}

/* ---- the reference ----------------------------------------------------------------------------------- */

/** The exact sum of the products a[i] b[i] (dd: and their rounding errors), rounded: r[0] (dd: r[0], r[1]). */
static void ref_dot(const double *a, const double *b, int64_t n, int dd, double *r) {
  int64_t acc[PK_XACC_LEN];
  memset(acc, 0, sizeof acc);
  for (int64_t i = 0; i < n; i++) {
    const double p = a[i] * b[i];
    pk_xacc_add(acc, p);
    if (dd && isfinite(p))
      pk_xacc_add(acc, fma(a[i], b[i], -p));
    if ((i & 0xfffff) == 0xfffff)
      pk_xacc_normalize(acc);
  }
  pk_xacc_normalize(acc);
  r[0] = pk_xacc_value(acc);
  if (!dd)
    return;
  r[1] = 0.0;
  if (isfinite(r[0])) {
    pk_xacc_add(acc, -r[0]);
    pk_xacc_normalize(acc);
    r[1] = pk_xacc_value(acc);
  }
}

static int same_val(double g, double r) {
  return (isnan(g) && isnan(r)) || memcmp(&g, &r, sizeof g) == 0;
}

/* ---- the engine ---------------------------------------------------------------------------------------- */

typedef struct {
  pkrylov_context ctx;
  pkrylov_operator A;
  pkrylov_solver s;
  pk_kry *E;
  int64_t n;
  double *dummy_b, *h[NW + NB]; /* host copies of the vectors */
} eng;

static pk_vid vid(int k) { return k < NW ? PK_KV_W0 + k : PK_KV_V0 + (k - NW); }

static int eng_put(eng *G, int k) {
  PK_CALL(pk_kry_bind(G->E, PKRYLOV_MEM_HOST, G->dummy_b, G->h[k], 0));
  PK_CALL(pk_kry_copy(G->E, PK_KV_X, vid(k)));
  return pk_kry_unbind(G->E);
}
/** Host copy k := the engine's vector k. */
static int eng_get(eng *G, int k) {
  PK_CALL(pk_kry_bind(G->E, PKRYLOV_MEM_HOST, G->dummy_b, G->h[k], 1));
  PK_CALL(pk_kry_copy(G->E, vid(k), PK_KV_X));
  return pk_kry_unbind(G->E);
}

static int eng_open(eng *G, pkrylov_context gpu, int64_t n) {
  memset(G, 0, sizeof *G);
  G->ctx = gpu, G->n = n;
  PK_CALL(pkt_tri_csr(gpu, n, &G->A));
  PK_CALL(pkrylov_solver_create(gpu, PKRYLOV_SOLVER_BICGSTAB, G->A, NULL, &G->s));
  PK_CALL(pk_kry_create(G->s, NW, NB, NS, &G->E));
  G->dummy_b = calloc((size_t)n, sizeof(double));
  for (int k = 0; k < NW + NB; k++)
    if (!(G->h[k] = calloc((size_t)n, sizeof(double))))
      return PKRYLOV_ERR_OUT_OF_MEMORY;
  return G->dummy_b ? 0 : PKRYLOV_ERR_OUT_OF_MEMORY;
}

static void eng_close(eng *G) {
  pk_kry_destroy(G->E);
  pkrylov_solver_destroy(&G->s);
  pkrylov_operator_destroy(&G->A);
  for (int k = 0; k < NW + NB; k++)
    free(G->h[k]);
  free(G->dummy_b);
}

/** S[OUT + j] (dd: pairs) against the reference of the pairs (a[j], b[j]) of the host copies. */
static void check(eng *G, const char *what, int count, const int *a, const int *b, int dd) {
  double S[NS];
  if (pk_kry_get(G->E, 0, NS, S) != 0) {
    PK_EXPECT(0, "%s: reading S", what);
    return;
  }
  for (int j = 0; j < count; j++) {
    double r[2];
    ref_dot(G->h[a[j]], G->h[b[j]], G->n, dd, r);
    for (int q = 0; q < (dd ? 2 : 1); q++) {
      const double g = S[OUT + (dd ? 2 * j + q : j)];
      PK_EXPECT(same_val(g, r[q]), "n %lld %s: sum %d (%d, %d)%s: gpu %a, reference %a", (long long)G->n, what, j,
                a[j], b[j], dd ? (q ? " lo" : " hi") : "", g, r[q]);
    }
  }
}

PK_TEST_CASE(one_pass_sums) {
  pkrylov_context gpu = pkt_cuda_ctx();
  if (!gpu)
    return PK_SKIP;
  PK_REQUIRE_OK(gpu, pkrylov_context_set_reproducible(gpu, 1));
  static const int64_t sizes[] = {1, 255, 257, 70001, 1000003};
  /* PK_T726_QUICK set (e.g. under compute-sanitizer): lengths up to 70001 only */
  const size_t nsizes = sizeof sizes / sizeof sizes[0] - (getenv("PK_T726_QUICK") ? 1 : 0);
  uint64_t seed = 20261127;
  for (size_t si = 0; si < nsizes; si++) {
    eng G;
    PK_REQUIRE_OK(gpu, eng_open(&G, gpu, sizes[si]));
    for (int round = 0; round < NKIND; round++) {
      char what[128];
      /* vector k of kind (k + round) % NKIND: every pair mixes kinds, every kind meets every other */
      for (int k = 0; k < NW + NB; k++) {
        fill((k + round) % NKIND, G.n, G.h[k], &seed);
        PK_REQUIRE_OK(gpu, eng_put(&G, k));
      }
      double S[NS];
      for (int i = 0; i < NS; i++)
        S[i] = i < OUT ? ldexp(1.0 + 0.1 * (i % 7), -(i % 5)) * (i % 3 ? 1 : -1) : 0.0;
      S[10 + 3] = 0.0; /* a zero coefficient: its term is skipped */
      PK_REQUIRE_OK(gpu, pk_kry_set(G.E, 0, NS, S));
      const int pa[8] = {0, 2, 0, 1, 3, 5, 4, 2}, pb[8] = {1, 3, 0, 2, 4, 5, 1, 2};
      /* update: W5 = S[0] W5 + W4, then 1, 3, 8 pairs */
      static const int nps[3] = {1, 3, 8};
      for (int t = 0; t < 3; t++) {
        pk_kupd u;
        memset(&u, 0, sizeof u);
        u.y = PK_KV_W0 + 5, u.cy.idx = 0, u.nterms = 1, u.x[0] = PK_KV_W0 + 4, u.c[0].idx = PK_S_ONE;
        pk_kpair pr[8];
        for (int j = 0; j < nps[t]; j++)
          pr[j].a = vid(pa[j]), pr[j].b = vid(pb[j]);
        PK_REQUIRE_OK(gpu, pk_kry_update(G.E, 1, &u, nps[t], pr, OUT, 0));
        PK_REQUIRE_OK(gpu, eng_get(&G, 5));
        snprintf(what, sizeof what, "%s: update, %d pairs", kind_name[round], nps[t]);
        check(&G, what, nps[t], pa, pb, 0);
      }
      /* matvec_update: W5 = A W0; W4 = W4 + S[1] W1; then the pairs (W5 and W4 among them) */
      for (int t = 0; t < 3; t++) {
        pk_kupd u;
        memset(&u, 0, sizeof u);
        u.y = PK_KV_W0 + 4, u.cy.idx = PK_S_ONE, u.nterms = 1, u.x[0] = PK_KV_W0 + 1, u.c[0].idx = 1;
        pk_kpair pr[8];
        for (int j = 0; j < nps[t]; j++)
          pr[j].a = vid(pa[j]), pr[j].b = vid(pb[j]);
        PK_REQUIRE_OK(gpu, pk_kry_matvec_update(G.E, PK_KV_W0, PK_KV_W0 + 5, 1, &u, nps[t], pr, OUT, 0));
        PK_REQUIRE_OK(gpu, eng_get(&G, 4));
        PK_REQUIRE_OK(gpu, eng_get(&G, 5));
        snprintf(what, sizeof what, "%s: matvec_update, %d pairs", kind_name[round], nps[t]);
        check(&G, what, nps[t], pa, pb, 0);
      }
      /* block_dots: (V_i, V_{5+j}) i < 5, j < 3 (4x4 tiles); 7 x 1 (8x1 tiles); double-double 5 x 3 */
      {
        int a[16], b[16], c = 0;
        for (int j = 0; j < 3; j++)
          for (int i = 0; i < 5; i++)
            a[c] = NW + i, b[c] = NW + 5 + j, c++;
        PK_REQUIRE_OK(gpu, pk_kry_block_dots(G.E, 0, 5, 5, 3, 0, OUT, 0));
        snprintf(what, sizeof what, "%s: block_dots 5 x 3", kind_name[round]);
        check(&G, what, 15, a, b, 0);
        PK_REQUIRE_OK(gpu, pk_kry_block_dots(G.E, 0, 5, 5, 3, 1, OUT, 0));
        snprintf(what, sizeof what, "%s: block_dots 5 x 3 double-double", kind_name[round]);
        check(&G, what, 15, a, b, 1);
        for (int i = 0; i < 7; i++)
          a[i] = NW + 10 + i, b[i] = NW + 3;
        PK_REQUIRE_OK(gpu, pk_kry_block_dots(G.E, 10, 7, 3, 1, 0, OUT, 0));
        snprintf(what, sizeof what, "%s: block_dots 7 x 1", kind_name[round]);
        check(&G, what, 7, a, b, 0);
      }
      /* basis_dots: (V_i, W2), i < 20, and (W2, W2) */
      {
        int a[21], b[21];
        for (int i = 0; i < 21; i++)
          a[i] = i < 20 ? NW + i : 2, b[i] = 2;
        PK_REQUIRE_OK(gpu, pk_kry_basis_dots(G.E, PK_KV_W0 + 2, 0, 20, 1, OUT, 0));
        snprintf(what, sizeof what, "%s: basis_dots 20 + norm", kind_name[round]);
        check(&G, what, 21, a, b, 0);
      }
      /* basis_axpy_dots: W3 = W3 - sum_j S[10 + j] V_{2 + j}, then (V_{2 + j}, W3), (W3, W3) */
      static const int ks[3] = {5, 12, 20};
      for (int t = 0; t < 3; t++) {
        const int k = ks[t];
        pk_coef one = {PK_S_ONE, 0};
        PK_REQUIRE_OK(gpu, pk_kry_basis_axpy_dots(G.E, PK_KV_W0 + 3, one, 2, k, 10, 1, t != 1, OUT, 0));
        PK_REQUIRE_OK(gpu, eng_get(&G, 3));
        int a[21], b[21];
        for (int i = 0; i < k; i++)
          a[i] = NW + 2 + i, b[i] = 3;
        a[k] = b[k] = 3;
        snprintf(what, sizeof what, "%s: basis_axpy_dots k %d%s", kind_name[round], k, t != 1 ? " + norm" : "");
        check(&G, what, k + (t != 1), a, b, 0);
      }
      if (pk_test_failures > 20)
        break;
    }
    eng_close(&G);
  }
  PK_REQUIRE_OK(gpu, pkrylov_context_destroy(&gpu));
  PK_TEST_END();
}

PK_TEST_MAIN(PK_TEST_ENTRY(one_pass_sums))

/**
 * @file t353-kry-engine-fused.c
 * @brief The engine's fused operator / preconditioner application with the update after it
 *        (pk_kry_matvec_update, pk_kry_precond_update; pk_kry.h) against pk_kry_matvec / pk_kry_precond
 *        followed by pk_kry_update, bitwise (vectors and sums), for each operator type, with and without
 *        a preconditioner; their argument checks.
 *
 * PK_TEST_BACKENDS: cpu cuda (pk_test.h): host arrays on a CUDA context; vectors go in and out through the
 * bound x (unbind copies the engine's x back, bind copies it in). The user-callback case is CPU only (the
 * routine is a host loop).
 *
 * White-box: links the internal static library. The contract is "the results of the two calls", vectors
 * and sums bitwise, on every backend, whether the backend fuses or the front end composes.
 */
#include <math.h>
#include <string.h>

#include "pk_kry.h"
#include "pk_test.h"

enum { W = PK_KV_W0, NW = 8, NS = 64 };

typedef struct {
  pkrylov_context ctx;
  pkrylov_operator A, U;
  pkrylov_precond M;
  pkrylov_solver s;
  pk_kry *E;
  int64_t n;
  double *b, *x;
} setup;

/** y = A x through the library's own operator (the user-callback case). */
static int user_apply(void *user, int64_t n, const double *x, double *y) {
  (void)n;
  return pkrylov_operator_apply((pkrylov_operator)user, PKRYLOV_MEM_HOST, x, y);
}

/** An n x n random nonsymmetric CSR (tridiagonal plus a far coupling). */
static int make_csr(pkrylov_context ctx, int32_t n, pkrylov_operator *A) {
  int32_t *rp = malloc(sizeof(int32_t) * (size_t)(n + 1)), *ci = malloc(sizeof(int32_t) * (size_t)n * 4);
  double *v = malloc(sizeof(double) * (size_t)n * 4);
  uint64_t seed = 31 + (uint64_t)n;
  int64_t k = 0;
  rp[0] = 0;
  for (int32_t i = 0; i < n; i++) {
    const int32_t far = (int32_t)((i + n / 2 + 1) % n);
    for (int32_t j = i - 1; j <= i + 1; j++) {
      if (j < 0 || j >= n) continue;
      ci[k] = j;
      v[k++] = j == i ? 4.0 + pk_test_rand(&seed) : pk_test_rand(&seed) - 0.5;
    }
    if (far < i - 1 || far > i + 1) {
      ci[k] = far;
      v[k++] = 0.5 * pk_test_rand(&seed);
    }
    rp[i + 1] = (int32_t)k;
  }
  int ierr = pkrylov_operator_create_csr(ctx, n, 0, rp, ci, v, A);
  free(rp), free(ci), free(v);
  return ierr;
}

/** An n x n symmetric tridiagonal CSR (symmetric DIA storage on CUDA). */
static int make_csr_sym(pkrylov_context ctx, int32_t n, pkrylov_operator *A) {
  int32_t *rp = malloc(sizeof(int32_t) * (size_t)(n + 1)), *ci = malloc(sizeof(int32_t) * (size_t)n * 3);
  double *v = malloc(sizeof(double) * (size_t)n * 3);
  int64_t k = 0;
  rp[0] = 0;
  for (int32_t i = 0; i < n; i++) {
    for (int32_t j = i - 1; j <= i + 1; j++) {
      if (j < 0 || j >= n) continue;
      const int32_t m = j < i ? j : i; /* the pair's value from its smaller index: A[i][j] = A[j][i] */
      ci[k] = j;
      v[k++] = j == i ? 4.0 + 0.001 * (i % 97) : -0.5 - 0.003 * (m % 89);
    }
    rp[i + 1] = (int32_t)k;
  }
  int ierr = pkrylov_operator_create_csr(ctx, n, 0, rp, ci, v, A);
  free(rp), free(ci), free(v);
  return ierr;
}

/* CUDA variants of the CSR cases (options of the context / solver, set by make_setup): the device storage
   (cuda.csr_format: NULL auto, which is DIA for make_csr's 5 offsets; "csr" plain rows), the lanes per row
   (cuda.csr_lanes: NULL auto, "4" the vector kernel), fp32 operator coefficients (PKRYLOV_PRECISION_MIXED),
   reproducible sums */
static const char *g_fmt, *g_lanes;
static int g_mixed, g_repro;

/** op: 0 CSR (n values), 1 convection-diffusion stencil (nx = n / 30, 5 x 6 columns), 2 the CSR through a
 *  user callback, 3 a symmetric tridiagonal CSR; jacobi: a Jacobi preconditioner. */
static int make_setup(int op, int32_t n, int jacobi, setup *T) {
  memset(T, 0, sizeof *T);
  if (pk_test_context_create(&T->ctx)) return 1;
  pkrylov_context_set_num_threads(T->ctx, 2);
  if (g_fmt && pkrylov_context_set_option(T->ctx, "cuda.csr_format", g_fmt)) return 1;
  if (g_lanes && pkrylov_context_set_option(T->ctx, "cuda.csr_lanes", g_lanes)) return 1;
  if (g_repro && pkrylov_context_set_reproducible(T->ctx, 1)) return 1;
  if (op == 3) {
    if (make_csr_sym(T->ctx, n, &T->A)) return 1;
  } else if (op == 1) {
    const double wind[3] = {1.5, -0.75, 2.0};
    if (pkrylov_operator_create_convdiff(T->ctx, n / 30, 5, 6, wind, 3.0, &T->A)) return 1;
    n = (n / 30) * 30;
  } else if (make_csr(T->ctx, n, &T->A)) {
    return 1;
  }
  T->n = n;
  pkrylov_operator A = T->A;
  if (op == 2) {
    if (pkrylov_operator_create_user(T->ctx, n, user_apply, T->A, &T->U)) return 1;
    A = T->U;
  }
  if (jacobi && pkrylov_precond_create(T->ctx, T->A, PKRYLOV_PRECOND_JACOBI, 0, PKRYLOV_LAYOUT_AUTO, &T->M))
    return 1;
  if (pkrylov_solver_create(T->ctx, PKRYLOV_SOLVER_BICGSTAB, A, T->M, &T->s)) return 1;
  if (g_mixed && pkrylov_solver_set_precision(T->s, PKRYLOV_PRECISION_MIXED)) return 1;
  if (pk_kry_create(T->s, NW, 0, NS, &T->E)) return 1;
  T->b = malloc(sizeof(double) * (size_t)n);
  T->x = malloc(sizeof(double) * (size_t)n);
  uint64_t seed = 9 + (uint64_t)n;
  for (int64_t i = 0; i < n; i++) T->b[i] = pk_test_rand(&seed), T->x[i] = 0;
  return pk_kry_bind(T->E, PKRYLOV_MEM_HOST, T->b, T->x, 0) != 0;
}

static void free_setup(setup *T) {
  if (T->E) pk_kry_unbind(T->E);
  pk_kry_destroy(T->E);
  pkrylov_solver_destroy(&T->s);
  pkrylov_precond_destroy(&T->M);
  pkrylov_operator_destroy(&T->U);
  pkrylov_operator_destroy(&T->A);
  pkrylov_context_destroy(&T->ctx);
  free(T->b);
  free(T->x);
}

/** Engine vector id := data (through the bound x: unbind, bind copies it in on CUDA). */
static int put(setup *T, pk_vid id, const double *data) {
  if (pk_kry_unbind(T->E)) return 1;
  memcpy(T->x, data, sizeof(double) * (size_t)T->n);
  if (pk_kry_bind(T->E, PKRYLOV_MEM_HOST, T->b, T->x, 0)) return 1;
  return id == PK_KV_X ? 0 : pk_kry_copy(T->E, PK_KV_X, id);
}
/** data := engine vector id. */
static int take(setup *T, pk_vid id, double *data) {
  if (id != PK_KV_X && pk_kry_copy(T->E, id, PK_KV_X)) return 1;
  if (pk_kry_unbind(T->E)) return 1;
  memcpy(data, T->x, sizeof(double) * (size_t)T->n);
  return pk_kry_bind(T->E, PKRYLOV_MEM_HOST, T->b, T->x, 0);
}

static pk_kupd mk(pk_vid y, pk_coef cy, int nt, const pk_vid *x, const pk_coef *c) {
  return pk_kupd_make(y, cy, nt, x, c);
}

/**
 * One comparison: the same start vectors, then (fused 0) apply + update or (fused 1) the fused op; the
 * work vectors and S[20..20+npairs) into out_v (NW * n) and out_s. pc: the preconditioner instead of A.
 * The update reads y = w1 (the product), writes w2, w3 and w5; w5 (written with cy = 0) and w6 (a term with
 * the coefficient 0) hold NaN, which must not be read.
 */
static int run_once(setup *T, int pc, int fused, int nupd, int npairs, double *out_v, double *out_s) {
  const int64_t n = T->n;
  uint64_t seed = 1234 + (uint64_t)n;
  double *v = malloc(sizeof(double) * (size_t)n);
  for (int k = 0; k < NW; k++) {
    for (int64_t i = 0; i < n; i++) v[i] = k == 5 || k == 6 ? NAN : pk_test_rand(&seed) - 0.25;
    if (put(T, W + k, v)) return 1;
  }
  free(v);
  const double S[6] = {0.75, -1.5, 2.25, 0.0, 3.0, -0.125};
  if (pk_kry_set(T->E, 10, 6, S)) return 1;
  const double zero[8] = {0};
  if (pk_kry_set(T->E, 20, 8, zero)) return 1;
  const pk_vid x0[3] = {W + 1, W + 4, W + 6}, x1[2] = {W + 2, W + 1}, x2[2] = {W + 3, W + 7};
  const pk_coef c0[3] = {pk_c(10), pk_cneg(11), pk_c(13)}, c1[2] = {pk_c(PK_S_ONE), pk_cneg(15)},
                c2[2] = {pk_c(14), pk_c(12)};
  const pk_kupd u[3] = {mk(W + 2, pk_c(12), 3, x0, c0), /* w2 = S12 w2 + S10 A w0 - S11 w4 (+ 0 w6) */
                        mk(W + 3, pk_c(PK_S_ZERO), 2, x1, c1), /* w3 = w2 (new) - S15 A w0 */
                        mk(W + 5, pk_c(PK_S_ZERO), 2, x2, c2)}; /* w5 = S14 w3 (new) + S12 w7 */
  const pk_kpair pr[5] = {{W + 1, W + 2}, {W + 3, W + 3}, {W + 0, W + 1}, {W + 5, W + 1}, {W + 1, W + 1}};
  /* nupd == PK_KRY_MAXUPD: the limits, PK_KRY_MAXUPD updates of PK_KRY_MAXTERMS terms (w2, w3, w4 written
     in turn, reading the product w1, x = w0 and the new values; zero coefficients S13 and cy = 0 among
     them; w5, w6 not read) and PK_KRY_MAXPAIRS pairs */
  pk_kupd uf[PK_KRY_MAXUPD];
  pk_kpair pf[PK_KRY_MAXPAIRS];
  const pk_kupd *ul = u;
  const pk_kpair *pl = pr;
  if (nupd == PK_KRY_MAXUPD) {
    static const pk_vid src[6] = {W + 1, W + 7, W + 0, W + 2, W + 3, W + 4};
    for (int k = 0; k < PK_KRY_MAXUPD; k++) {
      pk_vid xs[PK_KRY_MAXTERMS];
      pk_coef cs[PK_KRY_MAXTERMS];
      for (int t = 0; t < PK_KRY_MAXTERMS; t++) {
        xs[t] = src[(t + k) % 6];
        cs[t] = (t + k) % 5 == 0 ? pk_cneg(10 + (t + 2 * k) % 6) : pk_c(10 + (t + k) % 6);
      }
      uf[k] = mk(W + 2 + k % 3, k % 4 == 0 ? pk_c(PK_S_ZERO) : pk_c(10 + (k + 5) % 6), PK_KRY_MAXTERMS, xs, cs);
    }
    static const pk_vid pa[8] = {W + 1, W + 2, W + 3, W + 4, W + 0, W + 7, W + 2, W + 4},
                        pb[8] = {W + 2, W + 2, W + 1, W + 3, W + 1, W + 4, W + 7, W + 4};
    for (int j = 0; j < PK_KRY_MAXPAIRS; j++) pf[j].a = pa[j % 8], pf[j].b = pb[j % 8];
    ul = uf, pl = pf;
  }
  int ierr;
  if (fused)
    ierr = pc ? pk_kry_precond_update(T->E, W + 0, W + 1, nupd, ul, npairs, pl, 20, 0)
              : pk_kry_matvec_update(T->E, W + 0, W + 1, nupd, ul, npairs, pl, 20, 0);
  else {
    ierr = pc ? pk_kry_precond(T->E, W + 0, W + 1) : pk_kry_matvec(T->E, W + 0, W + 1);
    if (!ierr) ierr = pk_kry_update(T->E, nupd, ul, npairs, pl, 20, 0);
  }
  if (ierr) return ierr;
  for (int k = 0; k < NW; k++)
    if (take(T, W + k, out_v + (size_t)k * (size_t)n)) return 1;
  return pk_kry_get(T->E, 20, 8, out_s);
}

/** Every (nupd, npairs) shape, operator and preconditioner, fused against composed. */
static int compare(int op, int32_t n, int jacobi) {
  setup T;
  PK_REQUIRE_OK(NULL, make_setup(op, n, jacobi, &T));
  const size_t nv = (size_t)NW * (size_t)T.n;
  double *a = malloc(sizeof(double) * nv), *b = malloc(sizeof(double) * nv);
  static const int shapes[][2] = {{0, 0}, {0, 1}, {0, 2}, {1, 0}, {3, 0}, {3, 5}, {2, 3},
                                  {PK_KRY_MAXUPD, PK_KRY_MAXPAIRS}};
  for (int pc = 0; pc < 2; pc++)
    for (size_t k = 0; k < sizeof shapes / sizeof shapes[0]; k++) {
      double sa[8], sb[8];
      PK_REQUIRE_OK(T.ctx, run_once(&T, pc, 0, shapes[k][0], shapes[k][1], a, sa));
      PK_REQUIRE_OK(T.ctx, run_once(&T, pc, 1, shapes[k][0], shapes[k][1], b, sb));
      PK_EXPECT(memcmp(a, b, sizeof(double) * nv) == 0, "op %d n %lld jacobi %d pc %d nupd %d npairs %d: vectors",
                op, (long long)T.n, jacobi, pc, shapes[k][0], shapes[k][1]);
      PK_EXPECT(memcmp(sa, sb, sizeof sa) == 0, "op %d n %lld jacobi %d pc %d nupd %d npairs %d: sums", op,
                (long long)T.n, jacobi, pc, shapes[k][0], shapes[k][1]);
      if (shapes[k][1] > 0) /* the sums were taken (w1 = A w0 or M^-1 w0 is finite and not all 0) */
        PK_EXPECT(sa[0] != 0.0, "op %d pc %d: (w1, w2) = %g", op, pc, sa[0]);
      for (int j = 0; j < shapes[k][1]; j++) /* the NaN of w5 (cy = 0) and w6 (coefficient 0) not read */
        PK_EXPECT(isfinite(sa[j]), "op %d pc %d nupd %d: sum %d = %g", op, pc, shapes[k][0], j, sa[j]);
      for (int64_t i = 2 * T.n; i < 4 * T.n; i++) /* w2, w3 */
        if (!isfinite(a[i])) {
          PK_EXPECT(0, "op %d pc %d nupd %d: w%d[%lld] = %g", op, pc, shapes[k][0], (int)(i / T.n),
                    (long long)(i % T.n), a[i]);
          break;
        }
    }
  free(a), free(b);
  free_setup(&T);
  return PK_PASS;
}

PK_TEST_CASE(fused_csr) {
  static const int32_t sizes[] = {1, 7, 4097, 10001};
  for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++)
    for (int jacobi = 0; jacobi < 2; jacobi++) PK_REQUIRE(compare(0, sizes[i], jacobi) == PK_PASS, "setup");
  PK_TEST_END();
}

/* the CUDA engine fuses the CSR product with the update on k_update's grid (at most 1024 blocks of 256
   threads, the operator's own launch up to 4096): sizes about that cap (262144 rows) and past it, where
   each thread takes several rows; every storage the engine's product runs on (DIA, symmetric DIA, plain
   rows, vector lanes, fp32 coefficients) and reproducible sums. On the CPU: the same cases, composed. */
PK_TEST_CASE(fused_csr_storage) {
  static const int32_t sizes[] = {262143, 262145, 600001};
  for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
    PK_REQUIRE(compare(0, sizes[i], i == 1) == PK_PASS, "setup"); /* DIA (auto) */
    PK_REQUIRE(compare(3, sizes[i], i == 2) == PK_PASS, "setup"); /* symmetric DIA (auto) */
  }
  const int on_cuda = pk_test_on_cuda();
  g_fmt = "csr"; /* plain rows: one thread per row */
  PK_REQUIRE(compare(0, 262145, 0) == PK_PASS, "setup");
  PK_REQUIRE(compare(3, 4097, 1) == PK_PASS, "setup");
  if (on_cuda) {
    g_lanes = "4"; /* a group of 4 lanes per row (k_csr_vec) */
    PK_REQUIRE(compare(0, 262145, 0) == PK_PASS, "setup");
    PK_REQUIRE(compare(0, 10001, 1) == PK_PASS, "setup");
    g_lanes = NULL;
    g_mixed = 1; /* fp32 coefficients: plain rows, then DIA */
    PK_REQUIRE(compare(0, 300007, 0) == PK_PASS, "setup");
    g_fmt = NULL;
    PK_REQUIRE(compare(0, 300007, 1) == PK_PASS, "setup");
    PK_REQUIRE(compare(3, 4097, 0) == PK_PASS, "setup");
    g_mixed = 0;
  }
  g_fmt = NULL;
  g_repro = 1; /* exact sums */
  PK_REQUIRE(compare(0, 10001, 0) == PK_PASS, "setup");
  PK_REQUIRE(compare(0, 300007, 1) == PK_PASS, "setup");
  g_repro = 0;
  PK_TEST_END();
}

PK_TEST_CASE(fused_stencil) {
  static const int32_t sizes[] = {30, 7 * 30, 401 * 30};
  for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++)
    for (int jacobi = 0; jacobi < 2; jacobi++) PK_REQUIRE(compare(1, sizes[i], jacobi) == PK_PASS, "setup");
  PK_TEST_END();
}

/* CPU only: the callback is a host loop (a CUDA context would pass it device arrays) */
PK_TEST_CASE_CPU(fused_user) {
  PK_REQUIRE(compare(2, 4097, 0) == PK_PASS, "setup");
  PK_REQUIRE(compare(2, 4097, 1) == PK_PASS, "setup");
  PK_TEST_END();
}

PK_TEST_CASE(bad_arguments) {
  setup T;
  PK_REQUIRE_OK(NULL, make_setup(0, 100, 1, &T));
  pk_kry *E = T.E;
  const pk_vid x1[1] = {W + 1};
  const pk_coef c1[1] = {pk_c(PK_S_ONE)};
  pk_kupd u = mk(W + 2, pk_c(PK_S_ZERO), 1, x1, c1);
  const pk_kpair pr[1] = {{W + 1, W + 2}};
  const int I = PKRYLOV_ERR_INTERNAL;
  for (int pc = 0; pc < 2; pc++) {
    int (*f)(pk_kry *, pk_vid, pk_vid, int32_t, const pk_kupd *, int32_t, const pk_kpair *, int32_t,
             int32_t) = pc ? pk_kry_precond_update : pk_kry_matvec_update;
    PK_EXPECT_CODE(T.ctx, f(NULL, W + 0, W + 1, 1, &u, 1, pr, 20, 0), I);
    PK_EXPECT_CODE(T.ctx, f(E, W + 0, W + 0, 1, &u, 1, pr, 20, 0), I);       /* x == y */
    PK_EXPECT_CODE(T.ctx, f(E, W + NW, W + 1, 1, &u, 1, pr, 20, 0), I);      /* bad x */
    PK_EXPECT_CODE(T.ctx, f(E, W + 0, PK_KV_B, 1, &u, 1, pr, 20, 0), I);     /* y read only */
    PK_EXPECT_CODE(T.ctx, f(E, W + 0, W + 1, -1, &u, 1, pr, 20, 0), I);      /* counts */
    PK_EXPECT_CODE(T.ctx, f(E, W + 0, W + 1, PK_KRY_MAXUPD + 1, &u, 1, pr, 20, 0), I);
    PK_EXPECT_CODE(T.ctx, f(E, W + 0, W + 1, 1, NULL, 1, pr, 20, 0), I);
    PK_EXPECT_CODE(T.ctx, f(E, W + 0, W + 1, 1, &u, PK_KRY_MAXPAIRS + 1, pr, 20, 0), I);
    PK_EXPECT_CODE(T.ctx, f(E, W + 0, W + 1, 1, &u, 1, NULL, 20, 0), I);
    PK_EXPECT_CODE(T.ctx, f(E, W + 0, W + 1, 1, &u, 1, pr, NS, 0), I);       /* out of range */
    PK_EXPECT_CODE(T.ctx, f(E, W + 0, W + 1, 1, &u, 1, pr, 20, 7), I);       /* flags */
    pk_kupd bad = u;
    bad.y = W + 0; /* an update writing the operator's input */
    PK_EXPECT_CODE(T.ctx, f(E, W + 0, W + 1, 1, &bad, 0, NULL, 0, 0), I);
    bad = u;
    bad.y = PK_KV_B;
    PK_EXPECT_CODE(T.ctx, f(E, W + 0, W + 1, 1, &bad, 0, NULL, 0, 0), I);
    bad = u;
    bad.x[0] = -5;
    PK_EXPECT_CODE(T.ctx, f(E, W + 0, W + 1, 1, &bad, 0, NULL, 0, 0), I);
    bad = u;
    bad.c[0] = pk_c(NS);
    PK_EXPECT_CODE(T.ctx, f(E, W + 0, W + 1, 1, &bad, 0, NULL, 0, 0), I);
    bad = u;
    bad.nterms = PK_KRY_MAXTERMS + 1;
    PK_EXPECT_CODE(T.ctx, f(E, W + 0, W + 1, 1, &bad, 0, NULL, 0, 0), I);
    /* reading x in the update is fine; nothing to update is the plain application */
    u.x[0] = W + 0;
    PK_REQUIRE_OK(T.ctx, f(E, W + 0, W + 1, 1, &u, 1, pr, 20, PK_KRY_ASYNC));
    PK_REQUIRE_OK(T.ctx, pk_kry_wait(E));
    u.x[0] = W + 1;
    PK_REQUIRE_OK(T.ctx, f(E, W + 0, W + 1, 0, NULL, 0, NULL, 0, 0));
  }
  free_setup(&T);
  PK_TEST_END();
}

PK_TEST_MAIN(PK_TEST_ENTRY(fused_csr), PK_TEST_ENTRY(fused_csr_storage), PK_TEST_ENTRY(fused_stencil), PK_TEST_ENTRY(fused_user),
             PK_TEST_ENTRY(bad_arguments))

/**
 * @file t350-kry-engine.c
 * @brief The CPU vector engine of the BiCGStab and GMRES families (pk_kry.h), op by op against naive loops
 *        on random data of odd sizes: update semantics, dots, double-double block products, basis
 *        operations, residual with dry cells, argument checks, thread-count independence.
 *
 * White-box: links the internal static library. Reductions of the engine are chunk-ordered (PK_ROW_CHUNK
 * rows per partial), so the references here sum the same way and the results must agree bitwise; the
 * double-double products are checked against long double and an exactly known sum.
 *
 * CPU only (no PK_TEST_BACKENDS line): the CPU engine's table; the CUDA engine's ops: t720.
 */
#include <string.h>

#include "pk_kry.h"
#include "pk_test.h"

static const int64_t sizes[] = {1, 7, 4097, 10001};

/** A test setup: an n x n random nonsymmetric CSR (tridiagonal plus a far coupling), a solver, an
 *  engine with 8 work and 10 basis vectors and 256 scalars, b and x bound. */
typedef struct {
  pkrylov_context ctx;
  pkrylov_operator A;
  pkrylov_precond M;
  pkrylov_solver s;
  pk_kry *E;
  int64_t n;
  double *b, *x;
} setup;

static int make_setup(int64_t n, int jacobi, int nthreads, setup *T) {
  memset(T, 0, sizeof *T);
  T->n = n;
  if (pkrylov_context_create(PKRYLOV_BACKEND_CPU, &T->ctx)) return 1;
  pkrylov_context_set_num_threads(T->ctx, nthreads);
  int32_t *rp = malloc(sizeof(int32_t) * (size_t)(n + 1)), *ci = malloc(sizeof(int32_t) * (size_t)n * 4);
  double *v = malloc(sizeof(double) * (size_t)n * 4);
  uint64_t seed = 77 + (uint64_t)n;
  int64_t k = 0;
  rp[0] = 0;
  for (int64_t i = 0; i < n; i++) {
    const int64_t far = (i + n / 2 + 1) % n;
    for (int64_t j = i - 1; j <= i + 1; j++) {
      if (j < 0 || j >= n) continue;
      ci[k] = (int32_t)j;
      v[k++] = j == i ? 4.0 + pk_test_rand(&seed) : pk_test_rand(&seed);
    }
    if (far < i - 1 || far > i + 1) {
      ci[k] = (int32_t)far;
      v[k++] = 0.5 * pk_test_rand(&seed);
    }
    rp[i + 1] = (int32_t)k;
  }
  int ierr = pkrylov_operator_create_csr(T->ctx, (int32_t)n, 0, rp, ci, v, &T->A);
  free(rp), free(ci), free(v);
  if (ierr) return 1;
  if (jacobi && pkrylov_precond_create(T->ctx, T->A, PKRYLOV_PRECOND_JACOBI, 0, PKRYLOV_LAYOUT_AUTO, &T->M))
    return 1;
  if (pkrylov_solver_create(T->ctx, PKRYLOV_SOLVER_BICGSTAB, T->A, T->M, &T->s)) return 1;
  if (pk_kry_create(T->s, 8, 10, 256, &T->E)) return 1;
  T->b = malloc(sizeof(double) * (size_t)n);
  T->x = malloc(sizeof(double) * (size_t)n);
  for (int64_t i = 0; i < n; i++) T->b[i] = pk_test_rand(&seed), T->x[i] = 0;
  return pk_kry_bind(T->E, PKRYLOV_MEM_HOST, T->b, T->x, 0) != 0;
}

static void free_setup(setup *T) {
  if (T->E) pk_kry_unbind(T->E);
  pk_kry_destroy(T->E);
  pkrylov_solver_destroy(&T->s);
  pkrylov_precond_destroy(&T->M);
  pkrylov_operator_destroy(&T->A);
  pkrylov_context_destroy(&T->ctx);
  free(T->b);
  free(T->x);
}

/** Engine vector id := data (through the bound x). */
static int put(setup *T, pk_vid id, const double *data) {
  memcpy(T->x, data, sizeof(double) * (size_t)T->n);
  return id == PK_KV_X ? 0 : pk_kry_copy(T->E, PK_KV_X, id);
}
/** data := engine vector id. */
static int take(setup *T, pk_vid id, double *data) {
  if (id != PK_KV_X && pk_kry_copy(T->E, id, PK_KV_X)) return 1;
  memcpy(data, T->x, sizeof(double) * (size_t)T->n);
  return 0;
}

static double *rand_vec(int64_t n, uint64_t *seed) {
  double *v = malloc(sizeof(double) * (size_t)n);
  for (int64_t i = 0; i < n; i++) v[i] = pk_test_rand(seed);
  return v;
}

/** The engine's summation order: sequential within chunks of PK_ROW_CHUNK, chunks in order. */
static double chunked_dot(int64_t n, const double *a, const double *b) {
  double tot = 0.0;
  for (int64_t c0 = 0; c0 < n; c0 += PK_ROW_CHUNK) {
    double t = 0.0;
    for (int64_t i = c0; i < n && i < c0 + PK_ROW_CHUNK; i++) t += a[i] * b[i];
    tot += t;
  }
  return tot;
}

static int bitwise_equal(int64_t n, const double *a, const double *b) {
  return memcmp(a, b, sizeof(double) * (size_t)n) == 0;
}

static pk_kupd mk_upd(pk_vid y, pk_coef cy, int nt, const pk_vid *x, const pk_coef *c) {
  pk_kupd u;
  memset(&u, 0, sizeof u);
  u.y = y, u.cy = cy, u.nterms = nt;
  for (int t = 0; t < nt; t++) u.x[t] = x[t], u.c[t] = c[t];
  return u;
}

PK_TEST_CASE(update_semantics) {
  for (size_t si = 0; si < sizeof sizes / sizeof sizes[0]; si++) {
    const int64_t n = sizes[si];
    setup T;
    PK_REQUIRE_OK(NULL, make_setup(n, 0, 2, &T));
    uint64_t seed = 5 + (uint64_t)n;
    double *w[6], *nanv = malloc(sizeof(double) * (size_t)n);
    for (int i = 0; i < 6; i++) w[i] = rand_vec(n, &seed), put(&T, PK_KV_W0 + i, w[i]);
    for (int64_t i = 0; i < n; i++) nanv[i] = NAN;
    put(&T, PK_KV_W0 + 6, nanv);
    put(&T, PK_KV_W0 + 7, nanv); /* y of an update with cy = 0: never read */
    double S[8] = {0.75, -1.5, 2.25, 0.0, 3.0, -0.125, 1e-3, 7.0};
    PK_REQUIRE_OK(T.ctx, pk_kry_set(T.E, 10, 8, S));
    /* u0: w0 = S2*w0 + S0*w1 - S1*w2 + 0*nan (S3 = 0: skipped)
       u1: w1 = S4*w1 + S5*w0   (reads the new w0)
       u2: w7 = 0*w7 + S6*w3 + 1*w1   (w7 is NaN and must not be read; reads the new w1)
       u3: w2 = 1*w2 + S7*w2  (y among its own terms)
       u4: w4 = 0 (cy 0, no terms) */
    const pk_vid x0[3] = {PK_KV_W0 + 1, PK_KV_W0 + 2, PK_KV_W0 + 6};
    const pk_coef c0[3] = {pk_c(10), pk_cneg(11), pk_c(13)};
    const pk_vid x1[1] = {PK_KV_W0};
    const pk_coef c1[1] = {pk_c(15)};
    const pk_vid x2[2] = {PK_KV_W0 + 3, PK_KV_W0 + 1};
    const pk_coef c2[2] = {pk_c(16), pk_c(PK_S_ONE)};
    const pk_vid x3[1] = {PK_KV_W0 + 2};
    const pk_coef c3[1] = {pk_c(17)};
    pk_kupd u[5] = {mk_upd(PK_KV_W0, pk_c(12), 3, x0, c0), mk_upd(PK_KV_W0 + 1, pk_c(14), 1, x1, c1),
                    mk_upd(PK_KV_W0 + 7, pk_c(PK_S_ZERO), 2, x2, c2), mk_upd(PK_KV_W0 + 2, pk_c(PK_S_ONE), 1, x3, c3),
                    mk_upd(PK_KV_W0 + 4, pk_c(PK_S_ZERO), 0, NULL, NULL)};
    pk_kpair pr[4] = {{PK_KV_W0, PK_KV_W0 + 1}, {PK_KV_W0 + 7, PK_KV_W0 + 7}, {PK_KV_W0 + 2, PK_KV_W0 + 5},
                      {PK_KV_W0 + 4, PK_KV_W0 + 4}};
    PK_REQUIRE_OK(T.ctx, pk_kry_update(T.E, 5, u, 4, pr, 40, 0));
    /* reference, the documented arithmetic */
    double *r0 = malloc(sizeof(double) * (size_t)n), *r1 = malloc(sizeof(double) * (size_t)n);
    double *r7 = malloc(sizeof(double) * (size_t)n), *r2 = malloc(sizeof(double) * (size_t)n);
    double *r4 = calloc((size_t)n, sizeof(double)), *got = malloc(sizeof(double) * (size_t)n);
    for (int64_t i = 0; i < n; i++) {
      double t = S[2] * w[0][i];
      t = t + S[0] * w[1][i];
      t = t + (-S[1]) * w[2][i];
      r0[i] = t;
      t = S[4] * w[1][i];
      r1[i] = t + S[5] * r0[i];
      t = S[6] * w[3][i];
      r7[i] = t + 1.0 * r1[i];
      t = 1.0 * w[2][i];
      r2[i] = t + S[7] * w[2][i];
    }
    take(&T, PK_KV_W0, got);
    PK_EXPECT(bitwise_equal(n, got, r0), "n %lld: w0", (long long)n);
    take(&T, PK_KV_W0 + 1, got);
    PK_EXPECT(bitwise_equal(n, got, r1), "n %lld: w1 (reads the updated w0)", (long long)n);
    take(&T, PK_KV_W0 + 7, got);
    PK_EXPECT(bitwise_equal(n, got, r7), "n %lld: w7 (cy = 0 must not read the NaN y)", (long long)n);
    take(&T, PK_KV_W0 + 2, got);
    PK_EXPECT(bitwise_equal(n, got, r2), "n %lld: w2", (long long)n);
    take(&T, PK_KV_W0 + 4, got);
    PK_EXPECT(bitwise_equal(n, got, r4), "n %lld: w4 = 0", (long long)n);
    take(&T, PK_KV_W0 + 3, got);
    PK_EXPECT(bitwise_equal(n, got, w[3]), "n %lld: w3 unchanged", (long long)n);
    double d[4];
    PK_REQUIRE_OK(T.ctx, pk_kry_get(T.E, 40, 4, d));
    PK_EXPECT(d[0] == chunked_dot(n, r0, r1), "n %lld: (w0, w1) %.17g vs %.17g", (long long)n, d[0],
              chunked_dot(n, r0, r1));
    PK_EXPECT(d[1] == chunked_dot(n, r7, r7), "n %lld: (w7, w7)", (long long)n);
    PK_EXPECT(d[2] == chunked_dot(n, r2, w[5]), "n %lld: (w2, w5)", (long long)n);
    PK_EXPECT(d[3] == 0.0, "n %lld: (w4, w4) = %g", (long long)n, d[3]);
    /* long double sanity check of the chunked reference */
    long double ld = 0;
    for (int64_t i = 0; i < n; i++) ld += (long double)r0[i] * r1[i];
    PK_EXPECT(fabsl(ld - d[0]) <= 1e-13L * (1 + fabsl(ld)), "n %lld: (w0,w1) vs long double", (long long)n);
    /* the same with PK_KRY_ASYNC: the values appear after pk_kry_wait */
    PK_REQUIRE_OK(T.ctx, pk_kry_update(T.E, 0, NULL, 1, pr, 50, PK_KRY_ASYNC));
    PK_REQUIRE_OK(T.ctx, pk_kry_wait(T.E));
    double da;
    PK_REQUIRE_OK(T.ctx, pk_kry_get(T.E, 50, 1, &da));
    PK_EXPECT(da == d[0], "n %lld: async dot %.17g vs %.17g", (long long)n, da, d[0]);
    for (int i = 0; i < 6; i++) free(w[i]);
    free(nanv), free(r0), free(r1), free(r7), free(r2), free(r4), free(got);
    free_setup(&T);
  }
  PK_TEST_END();
}

PK_TEST_CASE(matvec_precond_residual) {
  for (size_t si = 0; si < sizeof sizes / sizeof sizes[0]; si++) {
    const int64_t n = sizes[si];
    setup T;
    PK_REQUIRE_OK(NULL, make_setup(n, 1, 2, &T));
    uint64_t seed = 9 + (uint64_t)n;
    double *xv = rand_vec(n, &seed), *got = malloc(sizeof(double) * (size_t)n);
    double *ref = malloc(sizeof(double) * (size_t)n);
    put(&T, PK_KV_W0, xv);
    PK_REQUIRE_OK(T.ctx, pk_kry_matvec(T.E, PK_KV_W0, PK_KV_W0 + 1));
    take(&T, PK_KV_W0 + 1, got);
    PK_REQUIRE_OK(T.ctx, pk_test_csr_matvec(T.A, xv, ref) == 0 ? 0 : 1);
    PK_EXPECT(pk_test_rel_diff(n, got, ref) <= 1e-15, "n %lld: matvec", (long long)n);
    PK_REQUIRE_OK(T.ctx, pk_kry_precond(T.E, PK_KV_W0, PK_KV_W0 + 2));
    take(&T, PK_KV_W0 + 2, got);
    PK_REQUIRE_OK(T.ctx, pkrylov_precond_apply(T.M, PKRYLOV_MEM_HOST, xv, ref));
    PK_EXPECT(bitwise_equal(n, got, ref), "n %lld: precond", (long long)n);
    /* residual r = b - A x with the norm */
    put(&T, PK_KV_W0, xv);
    PK_REQUIRE_OK(T.ctx, pk_kry_residual(T.E, PK_KV_W0, PK_KV_W0 + 3, 7));
    take(&T, PK_KV_W0 + 3, got);
    pk_test_csr_matvec(T.A, xv, ref);
    for (int64_t i = 0; i < n; i++) ref[i] = T.b[i] - ref[i];
    PK_EXPECT(pk_test_rel_diff(n, got, ref) <= 1e-14, "n %lld: residual", (long long)n);
    double rr;
    pk_kry_get(T.E, 7, 1, &rr);
    PK_EXPECT(rr == chunked_dot(n, got, got), "n %lld: residual norm", (long long)n);
    /* first_nonfinite */
    int64_t idx;
    double val;
    xv[n - 1] = INFINITY;
    put(&T, PK_KV_W0 + 4, xv);
    PK_REQUIRE_OK(T.ctx, pk_kry_first_nonfinite(T.E, PK_KV_W0 + 4, &idx, &val));
    PK_EXPECT(idx == n - 1 && isinf(val), "first_nonfinite %lld", (long long)idx);
    PK_REQUIRE_OK(T.ctx, pk_kry_first_nonfinite(T.E, PK_KV_B, &idx, &val));
    PK_EXPECT(idx == -1, "b is finite");
    free(xv), free(got), free(ref);
    free_setup(&T);
  }
  PK_TEST_END();
}

/** Residual on a stencil with dry cells: 0 there, b - A x elsewhere; no preconditioner: a copy. */
PK_TEST_CASE(residual_dry_cells_and_copy_precond) {
  pkrylov_context ctx;
  PK_REQUIRE_OK(NULL, pkrylov_context_create(PKRYLOV_BACKEND_CPU, &ctx));
  const int nx = 13, ny = 11, nz = 9, n = nx * ny * nz;
  double *aW = malloc(sizeof(double) * n), *aS = malloc(sizeof(double) * n), *aV = malloc(sizeof(double) * n);
  double *aC = malloc(sizeof(double) * n), *b = malloc(sizeof(double) * n), *x = malloc(sizeof(double) * n);
  double *xv = malloc(sizeof(double) * n), *got = malloc(sizeof(double) * n), *ref = malloc(sizeof(double) * n);
  int32_t *mask = malloc(sizeof(int32_t) * n);
  uint64_t seed = 3;
  for (int i = 0; i < n; i++) {
    aW[i] = -1 + 0.2 * pk_test_rand(&seed), aS[i] = -1, aV[i] = -2, aC[i] = 12;
    mask[i] = (i % 7) != 3;
    b[i] = pk_test_rand(&seed), xv[i] = pk_test_rand(&seed);
  }
  pkrylov_operator A;
  PK_REQUIRE_OK(ctx, pkrylov_operator_create_stencil7(ctx, nx, ny, nz, aW, aS, aV, aC, mask, &A));
  pkrylov_solver s;
  PK_REQUIRE_OK(ctx, pkrylov_solver_create(ctx, PKRYLOV_SOLVER_BICGSTAB, A, NULL, &s));
  pk_kry *E;
  PK_REQUIRE_OK(ctx, pk_kry_create(s, 3, 0, 4, &E));
  PK_REQUIRE_OK(ctx, pk_kry_bind(E, PKRYLOV_MEM_HOST, b, x, 1));
  for (int i = 0; i < n; i++) PK_EXPECT(x[i] == 0.0, "x_zero");
  memcpy(x, xv, sizeof(double) * n);
  PK_REQUIRE_OK(ctx, pk_kry_residual(E, PK_KV_X, PK_KV_W0, 0));
  PK_REQUIRE_OK(ctx, pk_kry_copy(E, PK_KV_W0, PK_KV_X));
  memcpy(got, x, sizeof(double) * n);
  pk_test_csr_matvec(A, xv, ref);
  double rr = 0, err = 0;
  for (int i = 0; i < n; i++) {
    ref[i] = mask[i] ? b[i] - ref[i] : 0.0;
    rr += ref[i] * ref[i];
    if (!mask[i]) PK_EXPECT(got[i] == 0.0, "dry cell %d: r = %g", i, got[i]);
    err = fmax(err, fabs(got[i] - ref[i]));
  }
  PK_EXPECT(err <= 1e-13, "residual error %g", err);
  double norm;
  pk_kry_get(E, 0, 1, &norm);
  PK_EXPECT(fabs(norm - rr) <= 1e-12 * rr, "(r,r) %g vs %g", norm, rr);
  /* precond without M is a copy */
  memcpy(x, xv, sizeof(double) * n);
  PK_REQUIRE_OK(ctx, pk_kry_precond(E, PK_KV_X, PK_KV_W0 + 1));
  PK_REQUIRE_OK(ctx, pk_kry_copy(E, PK_KV_W0 + 1, PK_KV_X));
  PK_EXPECT(bitwise_equal(n, x, xv), "precond without M copies");
  pk_kry_unbind(E);
  pk_kry_destroy(E);
  pkrylov_solver_destroy(&s);
  pkrylov_operator_destroy(&A);
  pkrylov_context_destroy(&ctx);
  free(aW), free(aS), free(aV), free(aC), free(b), free(x), free(xv), free(got), free(ref), free(mask);
  PK_TEST_END();
}

PK_TEST_CASE(basis_ops) {
  for (size_t si = 0; si < sizeof sizes / sizeof sizes[0]; si++) {
    const int64_t n = sizes[si];
    setup T;
    PK_REQUIRE_OK(NULL, make_setup(n, 0, 2, &T));
    uint64_t seed = 11 + (uint64_t)n;
    double *V[10], *got = malloc(sizeof(double) * (size_t)n), *ref = malloc(sizeof(double) * (size_t)n);
    for (int j = 0; j < 10; j++) V[j] = rand_vec(n, &seed), put(&T, PK_KV_V0 + j, V[j]);
    double *w = rand_vec(n, &seed);
    put(&T, PK_KV_W0, w);
    /* block dots plain: S[out + i + ka*j] = (V_{a0+i}, V_{b0+j}), a0 = 1, ka = 3, b0 = 5, kb = 4 */
    PK_REQUIRE_OK(T.ctx, pk_kry_block_dots(T.E, 1, 3, 5, 4, 0, 0, 0));
    double G[24];
    pk_kry_get(T.E, 0, 12, G);
    for (int j = 0; j < 4; j++)
      for (int i = 0; i < 3; i++)
        PK_EXPECT(G[i + 3 * j] == chunked_dot(n, V[1 + i], V[5 + j]), "n %lld block dot (%d,%d)",
                  (long long)n, i, j);
    /* dd: against long double */
    PK_REQUIRE_OK(T.ctx, pk_kry_block_dots(T.E, 1, 3, 5, 4, 1, 0, PK_KRY_ASYNC));
    PK_REQUIRE_OK(T.ctx, pk_kry_wait(T.E));
    pk_kry_get(T.E, 0, 24, G);
    for (int j = 0; j < 4; j++)
      for (int i = 0; i < 3; i++) {
        long double r = 0, mag = 0;
        for (int64_t k = 0; k < n; k++) {
          r += (long double)V[1 + i][k] * V[5 + j][k];
          mag += fabsl((long double)V[1 + i][k] * V[5 + j][k]);
        }
        const long double dd = (long double)G[2 * (i + 3 * j)] + G[2 * (i + 3 * j) + 1];
        PK_EXPECT(fabsl(dd - r) <= 1e-17L * mag + 1e-300L, "n %lld dd (%d,%d): %Lg vs %Lg", (long long)n, i,
                  j, dd, r);
        PK_EXPECT(fabs(G[2 * (i + 3 * j) + 1]) <= 1.2e-16 * fabs(G[2 * (i + 3 * j)]) + 1e-300,
                  "dd lo not normalised");
      }
    /* basis dots with norm: S[60 + j] = (V_{2+j}, w), S[60+5] = (w, w) */
    PK_REQUIRE_OK(T.ctx, pk_kry_basis_dots(T.E, PK_KV_W0, 2, 5, 1, 60, 0));
    double bd[6];
    pk_kry_get(T.E, 60, 6, bd);
    for (int j = 0; j < 5; j++) PK_EXPECT(bd[j] == chunked_dot(n, V[2 + j], w), "basis dot %d", j);
    PK_EXPECT(bd[5] == chunked_dot(n, w, w), "basis dots norm");
    /* basis vector as x too */
    PK_REQUIRE_OK(T.ctx, pk_kry_basis_dots(T.E, PK_KV_V0 + 9, 0, 2, 0, 70, 0));
    pk_kry_get(T.E, 70, 2, bd);
    PK_EXPECT(bd[0] == chunked_dot(n, V[0], V[9]) && bd[1] == chunked_dot(n, V[1], V[9]), "basis dots V9");
    /* basis axpy: w = 0.5 w - sum_j S[80+j] V_{3+j}, with a zero coefficient (term skipped) */
    double c[4] = {0.25, 0.0, -1.75, 3.5}, half = 0.5;
    pk_kry_set(T.E, 80, 4, c);
    pk_kry_set(T.E, 90, 1, &half);
    PK_REQUIRE_OK(T.ctx, pk_kry_basis_axpy(T.E, PK_KV_W0, pk_c(90), 3, 4, 80, 1));
    take(&T, PK_KV_W0, got);
    for (int64_t k = 0; k < n; k++) {
      double t = 0.5 * w[k];
      for (int j = 0; j < 4; j++)
        if (c[j] != 0.0) t = t + (-c[j]) * V[3 + j][k];
      ref[k] = t;
    }
    PK_EXPECT(bitwise_equal(n, got, ref), "n %lld basis_axpy", (long long)n);
    /* gemm, general: V_{6+j} = sum_{i<3} V_{0+i} T[i + 4 j], j < 3 (ldt 4) */
    double Tm[16];
    for (int i = 0; i < 16; i++) Tm[i] = pk_test_rand(&seed);
    pk_kry_set(T.E, 100, 16, Tm);
    PK_REQUIRE_OK(T.ctx, pk_kry_basis_gemm(T.E, 0, 3, 100, 4, 6, 3));
    for (int j = 0; j < 3; j++) {
      take(&T, PK_KV_V0 + 6 + j, got);
      for (int64_t k = 0; k < n; k++) {
        double t = V[0][k] * Tm[4 * j];
        for (int i = 1; i < 3; i++) t = t + V[i][k] * Tm[i + 4 * j];
        ref[k] = t;
      }
      PK_EXPECT(bitwise_equal(n, got, ref), "n %lld gemm column %d", (long long)n, j);
    }
    /* gemm in place, upper triangular 4x4 on V_2..V_5 (entries below the diagonal are garbage that
       must not be used) */
    for (int j = 0; j < 4; j++)
      for (int i = j + 1; i < 4; i++) Tm[i + 4 * j] = NAN;
    pk_kry_set(T.E, 100, 16, Tm);
    PK_REQUIRE_OK(T.ctx, pk_kry_basis_gemm(T.E, 2, 4, 100, 4, 2, 4));
    for (int j = 0; j < 4; j++) {
      take(&T, PK_KV_V0 + 2 + j, got);
      for (int64_t k = 0; k < n; k++) {
        double t = V[2][k] * Tm[4 * j];
        for (int i = 1; i <= j; i++) t = t + V[2 + i][k] * Tm[i + 4 * j];
        ref[k] = t;
      }
      PK_EXPECT(bitwise_equal(n, got, ref), "n %lld in-place gemm column %d", (long long)n, j);
    }
    for (int j = 0; j < 10; j++) free(V[j]);
    free(w), free(got), free(ref);
    free_setup(&T);
  }
  PK_TEST_END();
}

/** basis_axpy_dots: y = 0.5 y - sum_j S[c0+j] V_{1+j} (a zero coefficient skipped), then (V_{1+j}, y) and
 *  (y, y) of the new y: against a naive loop and the chunked sums of the reference vector; blocks (ignored
 *  by the CPU engine) change nothing. */
PK_TEST_CASE(basis_axpy_dots) {
  for (size_t si = 0; si < sizeof sizes / sizeof sizes[0]; si++) {
    const int64_t n = sizes[si];
    setup T;
    PK_REQUIRE_OK(NULL, make_setup(n, 0, 2, &T));
    uint64_t seed = 23 + (uint64_t)n;
    double *V[6], *got = malloc(sizeof(double) * (size_t)n), *ref = malloc(sizeof(double) * (size_t)n);
    for (int j = 0; j < 6; j++) V[j] = rand_vec(n, &seed), put(&T, PK_KV_V0 + j, V[j]);
    double *w = rand_vec(n, &seed);
    put(&T, PK_KV_W0 + 1, w);
    double c[5] = {0.25, 0.0, -1.75, 3.5, 0.125}, half = 0.5;
    pk_kry_set(T.E, 80, 5, c);
    pk_kry_set(T.E, 90, 1, &half);
    PK_REQUIRE_OK(T.ctx, pk_kry_block_begin(T.E));
    PK_REQUIRE_OK(T.ctx, pk_kry_basis_axpy_dots(T.E, PK_KV_W0 + 1, pk_c(90), 1, 5, 80, 1, 1, 100, 0));
    PK_REQUIRE_OK(T.ctx, pk_kry_block_end(T.E));
    take(&T, PK_KV_W0 + 1, got);
    for (int64_t k = 0; k < n; k++) {
      double t = 0.5 * w[k];
      for (int j = 0; j < 5; j++)
        if (c[j] != 0.0) t = t + (-c[j]) * V[1 + j][k];
      ref[k] = t;
    }
    PK_EXPECT(bitwise_equal(n, got, ref), "n %lld basis_axpy_dots vector", (long long)n);
    double d[6];
    pk_kry_get(T.E, 100, 6, d);
    for (int j = 0; j < 5; j++)
      PK_EXPECT(d[j] == chunked_dot(n, V[1 + j], ref), "n %lld basis_axpy_dots dot %d", (long long)n, j);
    PK_EXPECT(d[5] == chunked_dot(n, ref, ref), "n %lld basis_axpy_dots norm", (long long)n);
    /* without the norm: S[106] untouched */
    const double sentinel = 12345.0;
    pk_kry_set(T.E, 106, 1, &sentinel);
    PK_REQUIRE_OK(T.ctx, pk_kry_basis_axpy_dots(T.E, PK_KV_W0 + 1, pk_c(PK_S_ONE), 1, 2, 80, 0, 0, 104, 0));
    pk_kry_get(T.E, 104, 3, d);
    take(&T, PK_KV_W0 + 1, got);
    for (int64_t k = 0; k < n; k++) ref[k] = ref[k] + 0.25 * V[1][k]; /* c[1] = 0: skipped */
    PK_EXPECT(bitwise_equal(n, got, ref), "n %lld basis_axpy_dots without norm", (long long)n);
    PK_EXPECT(d[0] == chunked_dot(n, V[1], ref) && d[1] == chunked_dot(n, V[2], ref) && d[2] == sentinel,
              "n %lld basis_axpy_dots without norm: sums", (long long)n);
    for (int j = 0; j < 6; j++) free(V[j]);
    free(w), free(got), free(ref);
    free_setup(&T);
  }
  PK_TEST_END();
}

/** An ill-conditioned dot: big products that cancel exactly plus small integers. dd recovers the exact
 *  sum; the plain double sum does not. */
PK_TEST_CASE(dd_ill_conditioned) {
  const int64_t n = 10001;
  setup T;
  PK_REQUIRE_OK(NULL, make_setup(n, 0, 2, &T));
  double *a = malloc(sizeof(double) * n), *b = malloc(sizeof(double) * n);
  uint64_t seed = 21;
  double exact = 0.0; /* sum of small integers: exact in double */
  for (int64_t i = 0; i + 1 < n; i += 2) {
    const double big = 1e12 * (1.5 + pk_test_rand(&seed)), c = 1e6 * (1.5 + pk_test_rand(&seed));
    a[i] = big, b[i] = c;         /* product p, rounding error e */
    a[i + 1] = big, b[i + 1] = -c; /* exactly -(p + e) */
  }
  /* interleave small terms: every 10th pair is replaced by an integer product */
  for (int64_t i = 0; i + 1 < n; i += 20) {
    a[i] = (double)(i % 97), b[i] = 1.0;
    a[i + 1] = 0.0, b[i + 1] = 0.0;
    exact += (double)(i % 97);
  }
  a[n - 1] = 3.0, b[n - 1] = 1.0;
  exact += 3.0;
  put(&T, PK_KV_V0, a);
  put(&T, PK_KV_V0 + 1, b);
  PK_REQUIRE_OK(T.ctx, pk_kry_block_dots(T.E, 0, 1, 1, 1, 0, 0, 0));
  PK_REQUIRE_OK(T.ctx, pk_kry_block_dots(T.E, 0, 1, 1, 1, 1, 2, 0));
  double S[4];
  pk_kry_get(T.E, 0, 4, S);
  const double err_plain = fabs(S[0] - exact), err_dd = fabs((S[2] - exact) + S[3]);
  PK_EXPECT(err_dd <= 1e-9 * exact, "dd error %g (exact %.17g, hi %.17g lo %g)", err_dd, exact, S[2], S[3]);
  PK_EXPECT(err_plain > 1e3 * (err_dd + 1e-300), "plain error %g should be far larger than dd's %g", err_plain,
            err_dd);
  free(a), free(b);
  free_setup(&T);
  PK_TEST_END();
}

PK_TEST_CASE(bad_ids_and_counts) {
  setup T;
  PK_REQUIRE_OK(NULL, make_setup(7, 0, 1, &T));
  pk_kry *E = T.E;
  pkrylov_context ctx = T.ctx;
  PK_EXPECT_CODE(ctx, pk_kry_scalar(E, 99999, 0), PKRYLOV_ERR_INTERNAL);
  PK_EXPECT(pk_test_msg_has(ctx, "99999"), "message names the id");
  PK_EXPECT_CODE(ctx, pk_kry_scalar(E, 150, 0), PKRYLOV_ERR_INTERNAL); /* unused id in the BiCGStab range */
  PK_EXPECT_CODE(ctx, pk_kry_matvec(E, PK_KV_W0 + 8, PK_KV_W0), PKRYLOV_ERR_INTERNAL);
  PK_EXPECT_CODE(ctx, pk_kry_matvec(E, PK_KV_W0, PK_KV_B), PKRYLOV_ERR_INTERNAL);
  PK_EXPECT_CODE(ctx, pk_kry_matvec(E, PK_KV_W0, PK_KV_W0), PKRYLOV_ERR_INTERNAL);
  PK_EXPECT_CODE(ctx, pk_kry_precond(E, 5, PK_KV_W0), PKRYLOV_ERR_INTERNAL);
  PK_EXPECT_CODE(ctx, pk_kry_copy(E, PK_KV_V0 + 10, PK_KV_W0), PKRYLOV_ERR_INTERNAL);
  PK_EXPECT_CODE(ctx, pk_kry_residual(E, PK_KV_X, PK_KV_W0, 256), PKRYLOV_ERR_INTERNAL);
  PK_EXPECT_CODE(ctx, pk_kry_get(E, 250, 7, (double[7]){0}), PKRYLOV_ERR_INTERNAL);
  PK_EXPECT_CODE(ctx, pk_kry_set(E, -1, 1, (double[1]){0}), PKRYLOV_ERR_INTERNAL);
  { /* several ranges in one read: each checked, none read when one is bad */
    double a[3] = {-1, -1, -1}, b[2] = {-1, -1};
    const double v[3] = {1.5, 2.5, 3.5};
    PK_REQUIRE_OK(ctx, pk_kry_set(E, 10, 3, v));
    const pk_krange bad[2] = {{10, 3, a}, {255, 2, b}};
    PK_EXPECT_CODE(ctx, pk_kry_getv(E, 2, bad), PKRYLOV_ERR_INTERNAL);
    PK_EXPECT(a[0] == -1 && b[0] == -1, "nothing read when a range is bad");
    const pk_krange nul[2] = {{10, 3, a}, {20, 1, NULL}};
    PK_EXPECT_CODE(ctx, pk_kry_getv(E, 2, nul), PKRYLOV_ERR_INTERNAL);
    PK_EXPECT(pk_test_msg_has(ctx, "NULL"), "message names the NULL array");
    const pk_krange many[5] = {{10, 1, a}, {10, 1, a}, {10, 1, a}, {10, 1, a}, {10, 1, a}};
    PK_EXPECT_CODE(ctx, pk_kry_getv(E, 5, many), PKRYLOV_ERR_INTERNAL);
    PK_EXPECT(pk_test_msg_has(ctx, "5 ranges"), "message names the count");
    const pk_krange ok[3] = {{10, 3, a}, {11, 2, b}, {30, 0, NULL}}; /* overlapping; an empty one */
    PK_REQUIRE_OK(ctx, pk_kry_getv(E, 3, ok));
    PK_EXPECT(a[0] == 1.5 && a[1] == 2.5 && a[2] == 3.5 && b[0] == 2.5 && b[1] == 3.5, "ranges read");
  }
  pk_kupd u;
  memset(&u, 0, sizeof u);
  u.y = PK_KV_W0;
  u.cy = pk_c(PK_S_ONE);
  u.nterms = PK_KRY_MAXTERMS + 1;
  PK_EXPECT_CODE(ctx, pk_kry_update(E, 1, &u, 0, NULL, 0, 0), PKRYLOV_ERR_INTERNAL);
  u.nterms = 1;
  u.x[0] = PK_KV_W0 + 1;
  u.c[0] = pk_c(300);
  PK_EXPECT_CODE(ctx, pk_kry_update(E, 1, &u, 0, NULL, 0, 0), PKRYLOV_ERR_INTERNAL);
  u.c[0] = pk_c(-3);
  PK_EXPECT_CODE(ctx, pk_kry_update(E, 1, &u, 0, NULL, 0, 0), PKRYLOV_ERR_INTERNAL);
  u.c[0] = pk_c(0);
  PK_EXPECT_CODE(ctx, pk_kry_update(E, PK_KRY_MAXUPD + 1, &u, 0, NULL, 0, 0), PKRYLOV_ERR_INTERNAL);
  pk_kpair pr = {PK_KV_W0, PK_KV_W0};
  PK_EXPECT_CODE(ctx, pk_kry_update(E, 0, NULL, PK_KRY_MAXPAIRS + 1, &pr, 0, 0), PKRYLOV_ERR_INTERNAL);
  PK_EXPECT_CODE(ctx, pk_kry_update(E, 0, NULL, 1, &pr, 255, 0), PKRYLOV_SUCCESS);
  PK_EXPECT_CODE(ctx, pk_kry_update(E, 0, NULL, 1, &pr, 256, 0), PKRYLOV_ERR_INTERNAL);
  PK_EXPECT_CODE(ctx, pk_kry_update(E, 0, NULL, 1, &pr, 0, 7), PKRYLOV_ERR_INTERNAL);
  PK_EXPECT_CODE(ctx, pk_kry_block_dots(E, 8, 3, 0, 1, 0, 0, 0), PKRYLOV_ERR_INTERNAL);
  PK_EXPECT_CODE(ctx, pk_kry_block_dots(E, 0, 3, 0, 1, 2, 0, 0), PKRYLOV_ERR_INTERNAL);
  PK_EXPECT_CODE(ctx, pk_kry_block_dots(E, 0, 10, 0, 10, 1, 100, 0), PKRYLOV_ERR_INTERNAL); /* 200 > 156 */
  PK_EXPECT_CODE(ctx, pk_kry_basis_dots(E, PK_KV_W0, 0, 11, 0, 0, 0), PKRYLOV_ERR_INTERNAL);
  PK_EXPECT_CODE(ctx, pk_kry_basis_axpy(E, PK_KV_V0 + 2, pk_c(PK_S_ONE), 0, 4, 0, 0), PKRYLOV_ERR_INTERNAL);
  PK_EXPECT_CODE(ctx, pk_kry_basis_axpy_dots(E, PK_KV_V0 + 2, pk_c(PK_S_ONE), 0, 4, 0, 0, 1, 10, 0),
                 PKRYLOV_ERR_INTERNAL); /* y in the basis range */
  PK_EXPECT_CODE(ctx, pk_kry_basis_axpy_dots(E, PK_KV_W0, pk_c(PK_S_ONE), 0, 4, 0, 0, 1, 2, 0),
                 PKRYLOV_ERR_INTERNAL); /* outputs overlap the coefficients */
  PK_EXPECT(pk_test_msg_has(ctx, "overlap"), "message names the overlap");
  PK_EXPECT_CODE(ctx, pk_kry_basis_axpy_dots(E, PK_KV_W0, pk_c(PK_S_ONE), 0, 4, 0, 0, 2, 10, 0),
                 PKRYLOV_ERR_INTERNAL); /* with_norm not 0 or 1 */
  PK_EXPECT_CODE(ctx, pk_kry_basis_axpy_dots(E, PK_KV_W0, pk_c(PK_S_ONE), 0, 4, 0, 0, 1, 253, 0),
                 PKRYLOV_ERR_INTERNAL); /* out outside S */
  PK_EXPECT_CODE(ctx, pk_kry_basis_gemm(E, 0, 4, 0, 3, 5, 2), PKRYLOV_ERR_INTERNAL); /* ldt < kin */
  PK_EXPECT_CODE(ctx, pk_kry_basis_gemm(E, 0, 4, 0, 4, 2, 2), PKRYLOV_ERR_INTERNAL); /* overlap */
  PK_EXPECT_CODE(ctx, pk_kry_basis_gemm(E, 0, 4, 250, 4, 5, 2), PKRYLOV_ERR_INTERNAL); /* T outside S */
  pk_kry *E2 = NULL;
  PK_EXPECT_CODE(ctx, pk_kry_create(T.s, -1, 0, 1, &E2), PKRYLOV_ERR_INTERNAL);
  PK_EXPECT(E2 == NULL, "no engine on failure");
  /* X and B need a bound solve */
  pk_kry_unbind(E);
  PK_EXPECT_CODE(ctx, pk_kry_copy(E, PK_KV_X, PK_KV_W0), PKRYLOV_ERR_INTERNAL);
  PK_EXPECT_CODE(ctx, pk_kry_residual(E, PK_KV_W0, PK_KV_W0 + 1, -1), PKRYLOV_ERR_INTERNAL);
  free_setup(&T);
  PK_TEST_END();
}

/** Every op with 1 and with 2 threads on n = 10001 (3 chunks): bitwise equal results. */
static int run_ops(int nthreads, double *out, int64_t n) {
  setup T;
  if (make_setup(n, 1, nthreads, &T)) return 1;
  uint64_t seed = 31;
  for (int j = 0; j < 6; j++) {
    double *v = rand_vec(n, &seed);
    put(&T, PK_KV_V0 + j, v);
    put(&T, PK_KV_W0 + j, v);
    free(v);
  }
  double c[8] = {0.3, -0.7, 1.1, 2.0, -0.2, 0.9, 0.4, -1.3};
  pk_kry_set(T.E, 0, 8, c);
  const pk_vid xs[2] = {PK_KV_W0 + 1, PK_KV_W0 + 2};
  const pk_coef cs[2] = {pk_c(0), pk_c(1)};
  pk_kupd u = mk_upd(PK_KV_W0, pk_c(2), 2, xs, cs);
  pk_kpair pr[2] = {{PK_KV_W0, PK_KV_W0 + 3}, {PK_KV_W0, PK_KV_W0}};
  int e = pk_kry_update(T.E, 1, &u, 2, pr, 10, 0);
  e |= pk_kry_block_dots(T.E, 0, 3, 2, 3, 1, 20, 0);
  e |= pk_kry_block_dots(T.E, 0, 3, 2, 3, 0, 40, 0);
  e |= pk_kry_basis_dots(T.E, PK_KV_W0, 0, 6, 1, 50, 0);
  e |= pk_kry_residual(T.E, PK_KV_W0, PK_KV_W0 + 4, 60);
  e |= pk_kry_precond(T.E, PK_KV_W0 + 4, PK_KV_W0 + 5);
  e |= pk_kry_basis_axpy(T.E, PK_KV_W0 + 5, pk_c(3), 0, 4, 0, 0);
  e |= pk_kry_basis_gemm(T.E, 0, 3, 0, 3, 3, 3);
  e |= pk_kry_get(T.E, 0, 64, out);
  take(&T, PK_KV_W0 + 5, out + 64);
  take(&T, PK_KV_V0 + 5, out + 64 + n);
  free_setup(&T);
  return e;
}

PK_TEST_CASE(thread_count_independence) {
  const int64_t n = 10001;
  double *a = malloc(sizeof(double) * (size_t)(64 + 2 * n)), *b = malloc(sizeof(double) * (size_t)(64 + 2 * n));
  PK_EXPECT(run_ops(1, a, n) == 0, "ops with 1 thread");
  PK_EXPECT(run_ops(2, b, n) == 0, "ops with 2 threads");
  PK_EXPECT(memcmp(a, b, sizeof(double) * (size_t)(64 + 2 * n)) == 0, "1 and 2 threads differ");
  free(a), free(b);
  PK_TEST_END();
}

PK_TEST_MAIN(PK_TEST_ENTRY(update_semantics), PK_TEST_ENTRY(matvec_precond_residual),
             PK_TEST_ENTRY(residual_dry_cells_and_copy_precond), PK_TEST_ENTRY(basis_ops), PK_TEST_ENTRY(basis_axpy_dots),
             PK_TEST_ENTRY(dd_ill_conditioned), PK_TEST_ENTRY(bad_ids_and_counts),
             PK_TEST_ENTRY(thread_count_independence))

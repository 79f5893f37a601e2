/**
 * @file t366-cholqr.c
 * @brief CholQR of CA-GMRES on an ill-conditioned block: the monomial Krylov basis of a diagonal matrix with
 *        eigenvalues spread over three decades. Plain CholQR (Gram matrix and Cholesky in double) loses
 *        orthogonality (||I - Q^T Q|| ~ eps cond^2) or cannot factor at all; with the Gram matrix and the
 *        Cholesky factorisation in double-double (Yamazaki et al., seed 003) the error is ~ eps cond. The
 *        orthogonality and the condition numbers are measured independently here (host loops in long double,
 *        LAPACK dgesvd). Also the automatic step choice of CA-GMRES (test hook).
 *
 * White-box: links the internal static library (pk_kry.h test hooks). CPU only (no PK_TEST_BACKENDS line):
 * the CPU engine's CholQR and step choice; the CUDA engine's: t720.
 */
#include <string.h>

#include "kry_scalar.h"
#include "pk_kry.h"
#include "pk_test.h"

void dgesvd_(const char *jobu, const char *jobvt, const int *m, const int *n, double *a, const int *lda,
             double *s, double *u, const int *ldu, double *vt, const int *ldvt, double *work,
             const int *lwork, int *info);

void dgeev_(const char *jobvl, const char *jobvr, const int *n, double *a, const int *lda, double *wr,
            double *wi, double *vl, const int *ldvl, double *vr, const int *ldvr, double *work,
            const int *lwork, int *info);

/** 2-norm condition number of the n x k column-major block V (dgesvd on a copy). */
static double cond2(int n, int k, const double *V) {
  double *a = malloc(sizeof(double) * (size_t)n * k), s[16], work[4096], dummy = 0;
  memcpy(a, V, sizeof(double) * (size_t)n * k);
  int lwork = 4096, info, one = 1;
  dgesvd_("N", "N", &n, &k, a, &n, s, &dummy, &one, &dummy, &one, work, &lwork, &info);
  free(a);
  return info == 0 ? s[0] / s[k - 1] : NAN;
}

/** max |(I - Q^T Q)_ij| of the n x k block, accumulated in long double. */
static double orth_error(int n, int k, const double *Q) {
  double e = 0.0;
  for (int i = 0; i < k; i++)
    for (int j = 0; j <= i; j++) {
      long double d = 0.0L;
      for (int r = 0; r < n; r++) d += (long double)Q[r + (size_t)n * i] * Q[r + (size_t)n * j];
      const double v = fabs((double)((i == j ? 1.0L : 0.0L) - d));
      if (v > e || v != v) e = v;
    }
  return e;
}

/** The engine of a CA-GMRES solver with step k (basis vectors 0..k-1 hold the block), b and x bound. */
typedef struct {
  pkrylov_context ctx;
  pkrylov_operator A;
  pkrylov_solver s;
  pk_kry *E;
  double *b, *x;
  int n;
} setup;

static int make_setup(int n, int k, const double *diag, setup *T) {
  memset(T, 0, sizeof *T);
  T->n = n;
  if (pkrylov_context_create(PKRYLOV_BACKEND_CPU, &T->ctx)) return 1;
  int *rp = malloc(sizeof(int) * (size_t)(n + 1)), *ci = malloc(sizeof(int) * (size_t)n);
  for (int i = 0; i <= n; i++) rp[i] = i;
  for (int i = 0; i < n; i++) ci[i] = i;
  int ierr = pkrylov_operator_create_csr(T->ctx, n, 0, rp, ci, diag, &T->A);
  free(rp), free(ci);
  if (ierr) return 1;
  if (pkrylov_solver_create(T->ctx, PKRYLOV_SOLVER_CAGMRES, T->A, NULL, &T->s)) return 1;
  if (pkrylov_solver_set_step(T->s, k) || pkrylov_solver_set_restart(T->s, k)) return 1;
  pk_kry_sizes z;
  memset(&z, 0, sizeof z);
  if (pk_cagmres_sizes(T->s, &z)) return 1;
  if (pk_kry_create(T->s, z.nwork + 1, z.nbasis, z.nscalars + 2, &T->E)) return 1;
  T->b = calloc((size_t)n, sizeof(double));
  T->x = calloc((size_t)n, sizeof(double));
  return pk_kry_bind(T->E, PKRYLOV_MEM_HOST, T->b, T->x, 0) != 0;
}

static void free_setup(setup *T) {
  if (T->E) pk_kry_unbind(T->E);
  pk_kry_destroy(T->E);
  pkrylov_solver_destroy(&T->s);
  pkrylov_operator_destroy(&T->A);
  pkrylov_context_destroy(&T->ctx);
  free(T->b), free(T->x);
}

/** Basis vectors [0, k) := the columns of V / back. */
static int put_block(setup *T, int k, const double *V) {
  for (int j = 0; j < k; j++) {
    memcpy(T->x, V + (size_t)T->n * j, sizeof(double) * (size_t)T->n);
    if (pk_kry_copy(T->E, PK_KV_X, PK_KV_V0 + j)) return 1;
  }
  return 0;
}
static int get_block(setup *T, int k, double *V) {
  for (int j = 0; j < k; j++) {
    if (pk_kry_copy(T->E, PK_KV_V0 + j, PK_KV_X)) return 1;
    memcpy(V + (size_t)T->n * j, T->x, sizeof(double) * (size_t)T->n);
  }
  return 0;
}

/**
 * The monomial Krylov block [b, A b, ..., A^(k-1) b] (columns scaled to norm 1) of diag(lambda), lambda
 * spread geometrically over [1, lmax]; CholQR in double and in double-double.
 */
static int cholqr_case(int k, double lmax, double *cond_out, double *err_d, double *err_dd, double *err_dd2,
                       int *kfail_d, int *kfail_dd) {
  const int n = 3000;
  double *diag = malloc(sizeof(double) * n), *V = malloc(sizeof(double) * (size_t)n * k),
         *Q = malloc(sizeof(double) * (size_t)n * k);
  uint64_t seed = 5;
  for (int i = 0; i < n; i++) diag[i] = pow(lmax, (double)i / (n - 1));
  for (int i = 0; i < n; i++) V[i] = 1.0 + 0.1 * pk_test_rand(&seed);
  for (int j = 1; j < k; j++) {
    double nrm = 0.0;
    for (int i = 0; i < n; i++) {
      V[i + (size_t)n * j] = diag[i] * V[i + (size_t)n * (j - 1)];
      nrm += V[i + (size_t)n * j] * V[i + (size_t)n * j];
    }
    for (int i = 0; i < n; i++) V[i + (size_t)n * j] /= sqrt(nrm);
  }
  *cond_out = cond2(n, k, V);
  setup T;
  PK_REQUIRE_OK(NULL, make_setup(n, k, diag, &T) ? PKRYLOV_ERR_INTERNAL : 0);
  int32_t kf;
  PK_REQUIRE_OK(T.ctx, put_block(&T, k, V) ? PKRYLOV_ERR_INTERNAL : 0);
  PK_REQUIRE_OK(T.ctx, pk_cagmres_cholqr(T.E, 0, k, 0, &kf));
  *kfail_d = kf;
  PK_REQUIRE_OK(T.ctx, get_block(&T, k, Q) ? PKRYLOV_ERR_INTERNAL : 0);
  *err_d = kf == k ? orth_error(n, k, Q) : NAN;
  PK_REQUIRE_OK(T.ctx, put_block(&T, k, V) ? PKRYLOV_ERR_INTERNAL : 0);
  PK_REQUIRE_OK(T.ctx, pk_cagmres_cholqr(T.E, 0, k, 1, &kf));
  *kfail_dd = kf;
  PK_REQUIRE_OK(T.ctx, get_block(&T, k, Q) ? PKRYLOV_ERR_INTERNAL : 0);
  *err_dd = kf == k ? orth_error(n, k, Q) : NAN;
  /* a second pass (CholQR2) on the double-double result: Q is well conditioned now */
  PK_REQUIRE_OK(T.ctx, pk_cagmres_cholqr(T.E, 0, k, 0, &kf));
  PK_REQUIRE_OK(T.ctx, get_block(&T, k, Q) ? PKRYLOV_ERR_INTERNAL : 0);
  *err_dd2 = kf == k ? orth_error(n, k, Q) : NAN;
  free_setup(&T);
  free(diag), free(V), free(Q);
  return PK_PASS;
}

PK_TEST_CASE(double_double_gram) {
  /* (k, lambda_max): condition numbers from about 1e5 to 1e12 */
  const int ks[6] = {6, 10, 12, 14, 16, 16};
  const double lm[6] = {1e2, 1e2, 1e2, 1e2, 1e2, 1e3};
  int seen_plain_loss = 0;
  for (int c = 0; c < 6; c++) {
    double cond, ed, edd, edd2;
    int kd, kdd;
    if (cholqr_case(ks[c], lm[c], &cond, &ed, &edd, &edd2, &kd, &kdd) != PK_PASS) return PK_FAIL;
    printf("k = %d, lambda in [1, %g]: cond(V) = %.3g; ||I - Q^T Q||_max: double CholQR %s%.3g "
           "(factored %d of %d columns), double-double Gram CholQR %.3g (factored %d), then a second "
           "double pass %.3g; eps*cond = %.3g, eps*cond^2 = %.3g\n",
           ks[c], lm[c], cond, kd < ks[c] ? "FAILED " : "", ed, kd, ks[c], edd, kdd, edd2, 2.2e-16 * cond,
           2.2e-16 * cond * cond);
    PK_EXPECT(edd2 <= 1e-14, "CholQR2: error %.3g", edd2);
    PK_EXPECT(isfinite(cond) && cond > 1e4, "cond %.3g", cond);
    /* double-double: factors, error ~ eps cond (not eps cond^2) */
    PK_EXPECT(kdd == ks[c], "dd CholQR factored %d of %d", kdd, ks[c]);
    PK_EXPECT(edd <= 1e-13 + 20 * 2.2e-16 * cond, "dd CholQR: error %.3g for cond %.3g", edd, cond);
    /* double: fails or loses orthogonality once eps cond^2 is large */
    if (2.2e-16 * cond * cond > 1e-2) {
      PK_EXPECT(kd < ks[c] || ed > 1e-6, "double CholQR: error %.3g for cond %.3g", ed, cond);
      PK_EXPECT(kd < ks[c] || ed > 100 * edd, "double %.3g vs double-double %.3g", ed, edd);
      seen_plain_loss = 1;
    }
  }
  PK_EXPECT(seen_plain_loss, "no case where double CholQR loses orthogonality");
  PK_TEST_END();
}

PK_TEST_CASE(auto_step) {
  const char *path = pk_test_matrix_path("orsirr_2.mtx");
  if (!path) return PK_SKIP;
  pkrylov_context ctx;
  pkrylov_operator A;
  pkrylov_precond M;
  PK_REQUIRE_OK(NULL, pkrylov_context_create(PKRYLOV_BACKEND_CPU, &ctx));
  PK_REQUIRE_OK(ctx, pkrylov_operator_create_from_mtx(ctx, path, &A));
  PK_REQUIRE_OK(ctx, pkrylov_precond_create(ctx, A, PKRYLOV_PRECOND_JACOBI, 0, PKRYLOV_LAYOUT_AUTO, &M));
  int64_t n;
  PK_REQUIRE_OK(ctx, pkrylov_operator_get_info(A, &n, NULL, NULL, NULL, NULL, NULL));
  double *b = malloc(sizeof(double) * (size_t)n), *x = calloc((size_t)n, sizeof(double));
  uint64_t seed = 9;
  for (int64_t i = 0; i < n; i++) b[i] = pk_test_rand(&seed);
  const int restarts[5] = {30, 5, 3, 1, 7}, steps[5] = {0, 0, 0, 0, 3};
  for (int c = 0; c < 5; c++) {
    pkrylov_solver s;
    PK_REQUIRE_OK(ctx, pkrylov_solver_create(ctx, PKRYLOV_SOLVER_CAGMRES, A, M, &s));
    PK_REQUIRE_OK(ctx, pkrylov_solver_set_restart(s, restarts[c]));
    PK_REQUIRE_OK(ctx, pkrylov_solver_set_step(s, steps[c]));
    PK_REQUIRE_OK(ctx, pkrylov_solver_set_max_iterations(s, 40));
    int32_t used = -1;
    PK_REQUIRE_OK(ctx, pk_cagmres_step_used(s, &used));
    PK_EXPECT(used == 0, "before a solve: %d", used);
    memset(x, 0, sizeof(double) * (size_t)n);
    PK_REQUIRE_OK(ctx, pkrylov_solver_solve(s, PKRYLOV_MEM_HOST, b, x));
    PK_REQUIRE_OK(ctx, pk_cagmres_step_used(s, &used));
    printf("m = %d, step %d: used step %d\n", restarts[c], steps[c], used);
    if (steps[c] > 0)
      PK_EXPECT(used == steps[c], "step %d: used %d", steps[c], used);
    else if (restarts[c] >= 2)
      PK_EXPECT((used == 2 || used == 4 || used == 8) && used <= restarts[c], "m = %d: auto chose %d",
                restarts[c], used);
    else
      PK_EXPECT(used == 1, "m = 1: auto chose %d", used);
    pkrylov_solver_destroy(&s);
  }
  free(b), free(x);
  pkrylov_precond_destroy(&M);
  pkrylov_operator_destroy(&A);
  pkrylov_context_destroy(&ctx);
  PK_TEST_END();
}

/** The Hessenberg QR iteration of the Newton shifts (a scalar step) against LAPACK dgeev: every eigenvalue
 *  of random upper Hessenberg matrices (real and complex pairs) matched to 1e-9 relative. */
PK_TEST_CASE(ritz_values_vs_dgeev) {
  uint64_t seed = 21;
  const int sizes[5] = {1, 2, 5, 17, 40};
  for (int c = 0; c < 5; c++) {
    const int n = sizes[c], ld = n + 3;
    double *H = calloc((size_t)ld * n, sizeof(double)), *a = calloc((size_t)n * n, sizeof(double));
    double wr[40], wi[40], lr[40], li[40], work[4 * 40 + 64], dummy = 0;
    for (int j = 0; j < n; j++)
      for (int i = 0; i <= j + 1 && i < n; i++)
        H[i + ld * j] = pk_test_rand(&seed) + (i == j ? 0.5 * c : 0.0);
    for (int j = 0; j < n; j++)
      for (int i = 0; i < n; i++) a[i + n * j] = H[i + ld * j];
    const int found = pk_ca_hqr(H, n, ld, wr, wi);
    int info, one = 1, lwork = 4 * 40 + 64;
    dgeev_("N", "N", &n, a, &n, lr, li, &dummy, &one, &dummy, &one, work, &lwork, &info);
    PK_EXPECT(found == n && info == 0, "n = %d: found %d, dgeev info %d", n, found, info);
    double scale = 0;
    for (int i = 0; i < n; i++) scale = fmax(scale, hypot(lr[i], li[i]));
    int ncomplex = 0;
    for (int i = 0; i < n; i++) {
      double best = INFINITY;
      for (int k = 0; k < n; k++) best = fmin(best, hypot(wr[i] - lr[k], wi[i] - li[k]));
      PK_EXPECT(best <= 1e-9 * scale, "n = %d: eigenvalue %g%+gi not in dgeev's list (distance %.3g)", n,
                wr[i], wi[i], best);
      ncomplex += wi[i] != 0.0;
    }
    printf("n = %d: %d eigenvalues (%d complex) match dgeev\n", n, n, ncomplex);
    free(H), free(a);
  }
  PK_TEST_END();
}

PK_TEST_MAIN(PK_TEST_ENTRY(double_double_gram), PK_TEST_ENTRY(auto_step), PK_TEST_ENTRY(ritz_values_vs_dgeev))

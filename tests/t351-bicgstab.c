/**
 * @file t351-bicgstab.c
 * @brief BiCGStab and pipelined BiCGStab: nonsymmetric shared matrices against a dense LAPACK
 *        solution and the recomputed residual, the convection-diffusion operator with every
 *        preconditioner (the column preconditioner on its nonsymmetric path), SPD problems against CG,
 *        each breakdown reason constructed, user callbacks, history/monitor/maxit, thread-count
 *        independence.
 *
 * PK_TEST_BACKENDS: cpu cuda (pk_test.h): host arrays on a CUDA context, references on the host. CPU only:
 * the user callbacks (host routines; a CUDA context passes device arrays: t720) and the thread count.
 */
#include <string.h>

#include "pk_test.h"

/* LAPACK (the reference tridiagonal solve for the column preconditioner check) */
void dgtsv_(const int *n, const int *nrhs, double *dl, double *d, double *du, double *b, const int *ldb,
            int *info);

static const int32_t methods[] = {PKRYLOV_SOLVER_BICGSTAB, PKRYLOV_SOLVER_PIPEBICGSTAB};
#define NMETHODS 2
static const char *mname(int32_t t) { return t == PKRYLOV_SOLVER_BICGSTAB ? "bicgstab" : "pipebicgstab"; }

/** Solve A x = b with method t; result in *res. Returns the solve's status. */
static int solve(pkrylov_context ctx, int32_t t, pkrylov_operator A, pkrylov_precond M, double rtol,
                 int32_t maxit, const double *b, double *x, pkrylov_result *res) {
  pkrylov_solver s;
  int e = pkrylov_solver_create(ctx, t, A, M, &s);
  if (e) return e;
  pkrylov_solver_set_tolerances(s, rtol, 0.0);
  pkrylov_solver_set_max_iterations(s, maxit);
  e = pkrylov_solver_solve(s, PKRYLOV_MEM_HOST, b, x);
  if (!e) pkrylov_solver_get_result(s, res);
  pkrylov_solver_destroy(&s);
  return e;
}

/** Shared nonsymmetric matrix: b = A * (1 + i/n), solve, compare with dgesv and the true residual. */
static int check_matrix(const char *file, int32_t pctype, double rtol, double xtol) {
  const char *path = pk_test_matrix_path(file);
  if (!path) return PK_SKIP;
  pkrylov_context ctx;
  PK_REQUIRE_OK(NULL, pk_test_context_create(&ctx));
  pkrylov_operator A;
  PK_REQUIRE_OK(ctx, pkrylov_operator_create_from_mtx(ctx, path, &A));
  int64_t n;
  pkrylov_operator_get_info(A, &n, NULL, NULL, NULL, NULL, NULL);
  pkrylov_precond M = NULL;
  if (pctype != PKRYLOV_PRECOND_NONE)
    PK_REQUIRE_OK(ctx, pkrylov_precond_create(ctx, A, pctype, 0, PKRYLOV_LAYOUT_AUTO, &M));
  double *xt = malloc(sizeof(double) * n), *b = malloc(sizeof(double) * n), *x = malloc(sizeof(double) * n);
  double *xd = malloc(sizeof(double) * n);
  for (int64_t i = 0; i < n; i++) xt[i] = 1.0 + (double)i / (double)n;
  pk_test_csr_matvec(A, xt, b);
  PK_REQUIRE_OK(ctx, pk_test_dense_solve(A, b, xd) == 0 ? 0 : 1);
  for (int m = 0; m < NMETHODS; m++) {
    pkrylov_result res;
    PK_REQUIRE_OK(ctx, solve(ctx, methods[m], A, M, rtol, 5000, b, x, &res));
    const double tr = pk_test_true_relres(A, b, x);
    PK_EXPECT(res.converged, "%s %s: reason %s after %d iterations", file, mname(methods[m]),
              pkrylov_reason_string(res.reason), res.iterations);
    PK_EXPECT(tr <= rtol * 1.0001, "%s %s: true relres %g > rtol %g", file, mname(methods[m]), tr, rtol);
    PK_EXPECT(fabs(res.rel_residual - tr) <= 1e-3 * tr + 1e-300, "%s %s: reported rel_residual %g vs %g",
              file, mname(methods[m]), res.rel_residual, tr);
    const double err = pk_test_rel_diff(n, x, xd);
    PK_EXPECT(err <= xtol, "%s %s: ||x - x_dense|| / ||x_dense|| = %g > %g", file, mname(methods[m]), err, xtol);
    PK_EXPECT(res.breakdown_iteration == -1, "%s: breakdown_iteration %d", file, res.breakdown_iteration);
  }
  free(xt), free(b), free(x), free(xd);
  pkrylov_precond_destroy(&M);
  pkrylov_operator_destroy(&A);
  pkrylov_context_destroy(&ctx);
  PK_TEST_END();
}

PK_TEST_CASE(ani1_nonsymm_dense) { return check_matrix("ani1_nonsymm.mtx", PKRYLOV_PRECOND_NONE, 1e-12, 1e-9); }
PK_TEST_CASE(pores_1_jacobi_dense) { return check_matrix("pores_1.mtx", PKRYLOV_PRECOND_JACOBI, 1e-12, 1e-5); }
PK_TEST_CASE(orsirr_2_jacobi_dense) { return check_matrix("orsirr_2.mtx", PKRYLOV_PRECOND_JACOBI, 1e-11, 1e-6); }

/** Convection-diffusion 12 x 10 x 16 with vertical wind and anisotropy 50: none, Jacobi, column. */
PK_TEST_CASE(convdiff_preconditioners) {
  pkrylov_context ctx;
  PK_REQUIRE_OK(NULL, pk_test_context_create(&ctx));
  const int nx = 12, ny = 10, nz = 16, n = nx * ny * nz;
  const double wind[3] = {3.0, -2.0, 20.0};
  pkrylov_operator A;
  PK_REQUIRE_OK(ctx, pkrylov_operator_create_convdiff(ctx, nx, ny, nz, wind, 50.0, &A));
  double *b = malloc(sizeof(double) * n), *x = malloc(sizeof(double) * n), *xd = malloc(sizeof(double) * n);
  uint64_t seed = 5;
  for (int i = 0; i < n; i++) b[i] = pk_test_rand(&seed);
  PK_REQUIRE_OK(ctx, pk_test_dense_solve(A, b, xd) == 0 ? 0 : 1);
  for (int m = 0; m < NMETHODS; m++) {
    int its[3];
    for (int p = 0; p < 3; p++) {
      const int32_t pt[3] = {PKRYLOV_PRECOND_NONE, PKRYLOV_PRECOND_JACOBI, PKRYLOV_PRECOND_COLUMN};
      pkrylov_precond M = NULL;
      if (p > 0) PK_REQUIRE_OK(ctx, pkrylov_precond_create(ctx, A, pt[p], p == 2 ? nz : 0, PKRYLOV_LAYOUT_KSLOW, &M));
      pkrylov_result res;
      PK_REQUIRE_OK(ctx, solve(ctx, methods[m], A, M, 1e-10, 2000, b, x, &res));
      its[p] = res.iterations;
      PK_EXPECT(res.converged, "%s precond %d: %s", mname(methods[m]), p, pkrylov_reason_string(res.reason));
      PK_EXPECT(pk_test_true_relres(A, b, x) <= 1e-10, "%s precond %d: true relres %g", mname(methods[m]), p,
                pk_test_true_relres(A, b, x));
      PK_EXPECT(pk_test_rel_diff(n, x, xd) <= 1e-8, "%s precond %d: vs dense %g", mname(methods[m]), p,
                pk_test_rel_diff(n, x, xd));
      pkrylov_precond_destroy(&M);
    }
    PK_EXPECT(2 * its[2] < its[1] && 2 * its[2] < its[0], "%s: column %d iterations, Jacobi %d, none %d",
              mname(methods[m]), its[2], its[1], its[0]);
  }
  free(b), free(x), free(xd);
  pkrylov_operator_destroy(&A);
  pkrylov_context_destroy(&ctx);
  PK_TEST_END();
}

/** The column preconditioner on the nonsymmetric columns of convdiff equals a per-column dgtsv solve. */
PK_TEST_CASE(convdiff_column_nonsymmetric_path) {
  pkrylov_context ctx;
  PK_REQUIRE_OK(NULL, pk_test_context_create(&ctx));
  const int nx = 5, ny = 4, nz = 9, n = nx * ny * nz, nc = nx * ny;
  const double wind[3] = {1.0, 0.5, -30.0}, aniso = 10.0;
  pkrylov_operator A;
  PK_REQUIRE_OK(ctx, pkrylov_operator_create_convdiff(ctx, nx, ny, nz, wind, aniso, &A));
  pkrylov_precond M;
  PK_REQUIRE_OK(ctx, pkrylov_precond_create(ctx, A, PKRYLOV_PRECOND_COLUMN, nz, PKRYLOV_LAYOUT_KSLOW, &M));
  double *r = malloc(sizeof(double) * n), *z = malloc(sizeof(double) * n);
  uint64_t seed = 8;
  for (int i = 0; i < n; i++) r[i] = pk_test_rand(&seed);
  PK_REQUIRE_OK(ctx, pkrylov_precond_apply(M, PKRYLOV_MEM_HOST, r, z));
  /* reference: the documented coefficients, one dgtsv per column */
  const double diag = 2 * (2 + aniso) + 1.0 + 0.5 + 30.0, below = -aniso - fmax(wind[2], 0),
               above = -aniso - fmax(-wind[2], 0);
  PK_EXPECT(below != above, "the columns must be nonsymmetric");
  double err = 0;
  for (int c = 0; c < nc; c++) {
    double dl[16], d[16], du[16], rhs[16];
    for (int k = 0; k < nz; k++) d[k] = diag, rhs[k] = r[c + nc * k];
    for (int k = 0; k + 1 < nz; k++) dl[k] = below, du[k] = above; /* row k+1 to k: below; row k to k+1: above */
    int nn = nz, one = 1, info;
    dgtsv_(&nn, &one, dl, d, du, rhs, &nn, &info);
    PK_EXPECT(info == 0, "dgtsv info %d", info);
    for (int k = 0; k < nz; k++) err = fmax(err, fabs(rhs[k] - z[c + nc * k]) / (fabs(rhs[k]) + 1e-300));
  }
  PK_EXPECT(err <= 1e-12, "column preconditioner vs dgtsv: %g", err);
  free(r), free(z);
  pkrylov_precond_destroy(&M);
  pkrylov_operator_destroy(&A);
  pkrylov_context_destroy(&ctx);
  PK_TEST_END();
}

PK_TEST_CASE(convdiff_bad_input) {
  pkrylov_context ctx;
  PK_REQUIRE_OK(NULL, pk_test_context_create(&ctx));
  pkrylov_operator A = NULL;
  const double w[3] = {1, 2, 3}, wnan[3] = {1, NAN, 3};
  PK_EXPECT_CODE(ctx, pkrylov_operator_create_convdiff(ctx, 0, 2, 2, w, 1.0, &A), PKRYLOV_ERR_INVALID_SIZE);
  PK_EXPECT(pk_test_msg_has(ctx, "nx"), "names nx");
  PK_EXPECT_CODE(ctx, pkrylov_operator_create_convdiff(ctx, 2, 2, 2, NULL, 1.0, &A), PKRYLOV_ERR_NULL_POINTER);
  PK_EXPECT(pk_test_msg_has(ctx, "wind"), "names wind");
  PK_EXPECT_CODE(ctx, pkrylov_operator_create_convdiff(ctx, 2, 2, 2, wnan, 1.0, &A), PKRYLOV_ERR_NOT_FINITE);
  PK_EXPECT(pk_test_msg_has(ctx, "wind[1]"), "names wind[1]");
  PK_EXPECT_CODE(ctx, pkrylov_operator_create_convdiff(ctx, 2, 2, 2, w, 0.0, &A), PKRYLOV_ERR_INVALID_VALUE);
  PK_EXPECT(pk_test_msg_has(ctx, "aniso"), "names aniso");
  PK_EXPECT_CODE(ctx, pkrylov_operator_create_convdiff(ctx, 2, 2, 2, w, INFINITY, &A), PKRYLOV_ERR_NOT_FINITE);
  PK_EXPECT_CODE(ctx, pkrylov_operator_create_convdiff(ctx, 2, 2, 2, w, 1.0, NULL), PKRYLOV_ERR_NULL_POINTER);
  PK_EXPECT_CODE(ctx, pkrylov_operator_create_convdiff(ctx, 100000, 100000, 100, w, 1.0, &A),
                 PKRYLOV_ERR_INVALID_SIZE);
  PK_EXPECT(A == NULL, "no operator on failure");
  /* the matrix entries as documented: compare a 3x2x2 operator's CSR with the formula */
  PK_REQUIRE_OK(ctx, pkrylov_operator_create_convdiff(ctx, 3, 2, 2, w, 4.0, &A));
  int64_t nn;
  double *D = pk_test_dense_from_operator(A, &nn);
  PK_REQUIRE_OK(ctx, D && nn == 12 ? 0 : 1);
  for (int c = 0; c < 12; c++) {
    const int i = c % 3, j = (c / 3) % 2, k = c / 6;
    PK_EXPECT(D[c * 12 + c] == 2 * (2 + 4.0) + 6.0, "diag %d", c);
    if (i > 0) PK_EXPECT(D[c * 12 + c - 1] == -1 - 1.0, "west %d", c);
    if (i < 2) PK_EXPECT(D[c * 12 + c + 1] == -1.0, "east %d", c);
    if (j > 0) PK_EXPECT(D[c * 12 + c - 3] == -1 - 2.0, "south %d", c);
    if (k > 0) PK_EXPECT(D[c * 12 + c - 6] == -4.0 - 3.0, "below %d", c);
    if (k < 1) PK_EXPECT(D[c * 12 + c + 6] == -4.0, "above %d", c);
  }
  free(D);
  pkrylov_operator_destroy(&A);
  pkrylov_context_destroy(&ctx);
  PK_TEST_END();
}

/** SPD problems: the CG solution (rtol 1e-13) is the reference. */
PK_TEST_CASE(spd_against_cg) {
  const char *path = pk_test_matrix_path("gr_900_900_crg.mtx");
  if (!path) return PK_SKIP;
  pkrylov_context ctx;
  PK_REQUIRE_OK(NULL, pk_test_context_create(&ctx));
  pkrylov_operator A[2];
  PK_REQUIRE_OK(ctx, pkrylov_operator_create_from_mtx(ctx, path, &A[0]));
  pkrylov_thinshell_params tp;
  pkrylov_thinshell_params_default(16, 16, 12, &tp);
  PK_REQUIRE_OK(ctx, pkrylov_operator_create_thinshell(ctx, &tp, &A[1]));
  for (int a = 0; a < 2; a++) {
    int64_t n;
    pkrylov_operator_get_info(A[a], &n, NULL, NULL, NULL, NULL, NULL);
    pkrylov_precond M = NULL;
    if (a == 1) PK_REQUIRE_OK(ctx, pkrylov_precond_create(ctx, A[a], PKRYLOV_PRECOND_COLUMN, 0, PKRYLOV_LAYOUT_AUTO, &M));
    double *b = malloc(sizeof(double) * n), *x = malloc(sizeof(double) * n), *xc = malloc(sizeof(double) * n);
    uint64_t seed = 12;
    for (int64_t i = 0; i < n; i++) b[i] = pk_test_rand(&seed);
    pkrylov_result res;
    PK_REQUIRE_OK(ctx, solve(ctx, PKRYLOV_SOLVER_CG, A[a], M, 1e-11, 5000, b, xc, &res));
    PK_EXPECT(res.converged, "CG reference %d: %s", a, pkrylov_reason_string(res.reason));
    for (int m = 0; m < NMETHODS; m++) {
      PK_REQUIRE_OK(ctx, solve(ctx, methods[m], A[a], M, 1e-9, 5000, b, x, &res));
      PK_EXPECT(res.converged, "%s on SPD %d: %s", mname(methods[m]), a, pkrylov_reason_string(res.reason));
      PK_EXPECT(pk_test_rel_diff(n, x, xc) <= 1e-7, "%s on SPD %d: vs CG %g", mname(methods[m]), a,
                pk_test_rel_diff(n, x, xc));
    }
    pkrylov_precond_destroy(&M);
    free(b), free(x), free(xc);
  }
  pkrylov_operator_destroy(&A[0]);
  pkrylov_operator_destroy(&A[1]);
  pkrylov_context_destroy(&ctx);
  PK_TEST_END();
}

/** Small dense matrix (row-major) as CSR with every entry stored. */
static int dense_csr(pkrylov_context ctx, int n, const double *D, pkrylov_operator *A) {
  int32_t rp[9], ci[64];
  double v[64];
  int k = 0;
  rp[0] = 0;
  for (int i = 0; i < n; i++) {
    for (int j = 0; j < n; j++)
      if (D[i * n + j] != 0.0) ci[k] = j, v[k++] = D[i * n + j];
    rp[i + 1] = k;
  }
  return pkrylov_operator_create_csr(ctx, n, 0, rp, ci, v, A);
}

/** A skew-symmetric matrix: (r, A r) = 0 for every r, so the first (r0*, A p) vanishes: SHADOW at
 *  iteration 1, x is the initial guess. */
PK_TEST_CASE(breakdown_shadow_skew) {
  pkrylov_context ctx;
  PK_REQUIRE_OK(NULL, pk_test_context_create(&ctx));
  const double D[16] = {0, 1, 0, 0, -1, 0, 0, 0, 0, 0, 0, 2, 0, 0, -2, 0};
  pkrylov_operator A;
  PK_REQUIRE_OK(ctx, dense_csr(ctx, 4, D, &A));
  const double b[4] = {1, -2, 0.5, 3}, x0[4] = {0.25, 1, -1, 2};
  for (int m = 0; m < NMETHODS; m++) {
    pkrylov_solver s;
    PK_REQUIRE_OK(ctx, pkrylov_solver_create(ctx, methods[m], A, NULL, &s));
    pkrylov_solver_set_initial_guess_nonzero(s, 1);
    double x[4];
    memcpy(x, x0, sizeof x);
    PK_REQUIRE_OK(ctx, pkrylov_solver_solve(s, PKRYLOV_MEM_HOST, b, x));
    pkrylov_result res;
    pkrylov_solver_get_result(s, &res);
    PK_EXPECT(res.reason == PKRYLOV_DIVERGED_BREAKDOWN_SHADOW, "%s: reason %s", mname(methods[m]),
              pkrylov_reason_string(res.reason));
    PK_EXPECT(res.breakdown_iteration == 1 && res.iterations == 0, "%s: breakdown at %d, iterations %d",
              mname(methods[m]), res.breakdown_iteration, res.iterations);
    PK_EXPECT(memcmp(x, x0, sizeof x) == 0, "%s: x must be the initial guess", mname(methods[m]));
    PK_EXPECT(!res.converged, "not converged");
    pkrylov_solver_destroy(&s);
  }
  pkrylov_operator_destroy(&A);
  pkrylov_context_destroy(&ctx);
  PK_TEST_END();
}

/** A = [[0,-2],[1,-2]], b = (-1,-2): v = A b = (4,3), alpha = -1/2, s = (1,-1/2), t = A s = (1,2), (t,s) = 0
 *  exactly: omega = 0 at iteration 1 (||s|| is far from converged): x stays 0. */
PK_TEST_CASE(breakdown_omega) {
  pkrylov_context ctx;
  PK_REQUIRE_OK(NULL, pk_test_context_create(&ctx));
  const double D[4] = {0, -2, 1, -2};
  pkrylov_operator A;
  PK_REQUIRE_OK(ctx, dense_csr(ctx, 2, D, &A));
  const double b[2] = {-1, -2};
  for (int m = 0; m < NMETHODS; m++) {
    double x[2] = {5, 5};
    pkrylov_result res;
    PK_REQUIRE_OK(ctx, solve(ctx, methods[m], A, NULL, 1e-10, 100, b, x, &res));
    PK_EXPECT(res.reason == PKRYLOV_DIVERGED_BREAKDOWN_OMEGA, "%s: reason %s", mname(methods[m]),
              pkrylov_reason_string(res.reason));
    PK_EXPECT(res.breakdown_iteration == 1 && res.iterations == 0, "%s: breakdown at %d, iterations %d",
              mname(methods[m]), res.breakdown_iteration, res.iterations);
    PK_EXPECT(x[0] == 0 && x[1] == 0, "%s: x must be x0 = 0: %g %g", mname(methods[m]), x[0], x[1]);
    PK_EXPECT(fabs(res.final_residual - sqrt(5.0)) <= 1e-15, "final residual %g", res.final_residual);
  }
  pkrylov_operator_destroy(&A);
  pkrylov_context_destroy(&ctx);
  PK_TEST_END();
}

/** 3x3 case where the first iteration completes and (r0*, r1) = 0 exactly: RHO, reported for iteration 2,
 *  iterations 1, x = x1 (computed here by the textbook formulas). */
PK_TEST_CASE(breakdown_rho) {
  pkrylov_context ctx;
  PK_REQUIRE_OK(NULL, pk_test_context_create(&ctx));
  const double D[9] = {0, -1, -1, -2, 1, 1, -2, -2, 3};
  pkrylov_operator A;
  PK_REQUIRE_OK(ctx, dense_csr(ctx, 3, D, &A));
  const double b[3] = {-2, -1, 2};
  /* reference iterate x1 */
  double v[3], s[3], t[3], x1[3], r1[3], rho = 0, sig = 0, ts = 0, tt = 0, rn = 0;
  for (int i = 0; i < 3; i++) {
    v[i] = D[3 * i] * b[0] + D[3 * i + 1] * b[1] + D[3 * i + 2] * b[2];
    rho += b[i] * b[i];
  }
  for (int i = 0; i < 3; i++) sig += b[i] * v[i];
  const double alpha = rho / sig;
  for (int i = 0; i < 3; i++) s[i] = b[i] - alpha * v[i];
  for (int i = 0; i < 3; i++) t[i] = D[3 * i] * s[0] + D[3 * i + 1] * s[1] + D[3 * i + 2] * s[2];
  for (int i = 0; i < 3; i++) ts += t[i] * s[i], tt += t[i] * t[i];
  const double omega = ts / tt;
  for (int i = 0; i < 3; i++) x1[i] = alpha * b[i] + omega * s[i], r1[i] = s[i] - omega * t[i];
  for (int i = 0; i < 3; i++) rn += b[i] * r1[i];
  PK_EXPECT(rn == 0.0, "construction: (r0*, r1) = %g", rn);
  for (int m = 0; m < 1; m++) { /* classical only: the pipelined recurrences are not exact here */
    double x[3];
    pkrylov_result res;
    PK_REQUIRE_OK(ctx, solve(ctx, methods[m], A, NULL, 1e-10, 100, b, x, &res));
    PK_EXPECT(res.reason == PKRYLOV_DIVERGED_BREAKDOWN_RHO, "%s: reason %s", mname(methods[m]),
              pkrylov_reason_string(res.reason));
    PK_EXPECT(res.breakdown_iteration == 2 && res.iterations == 1, "%s: breakdown at %d, iterations %d",
              mname(methods[m]), res.breakdown_iteration, res.iterations);
    /* x is the better of x1 and x0 = 0 (a solve returns no iterate worse than one it has seen): here x0,
       ||r1|| = ||s - omega t|| > ||b|| */
    const double r1n = sqrt(r1[0] * r1[0] + r1[1] * r1[1] + r1[2] * r1[2]), bn = 3.0;
    const double zero[3] = {0, 0, 0};
    PK_EXPECT(r1n > bn, "construction: ||r1|| = %g", r1n);
    PK_EXPECT(pk_test_rel_diff(3, x, r1n <= bn ? x1 : zero) <= 1e-15 &&
                  fabs(res.final_residual - bn) <= 1e-15,
              "%s: x is not x0 (|x - x1| / |x1| = %g, final residual %g)", mname(methods[m]),
              pk_test_rel_diff(3, x, x1), res.final_residual);
  }
  pkrylov_operator_destroy(&A);
  pkrylov_context_destroy(&ctx);
  PK_TEST_END();
}

/* ---- user callbacks ---------------------------------------------------------------------------- */

typedef struct {
  pkrylov_operator A; /* applied through the public API */
  int calls, fail_at, nan_at;
} user_op;

static int user_apply(void *data, int64_t n, const double *x, double *y) {
  (void)n;
  user_op *u = data;
  u->calls++;
  if (u->fail_at && u->calls == u->fail_at) return 7;
  int e = pk_test_csr_matvec(u->A, x, y);
  if (u->nan_at && u->calls >= u->nan_at) y[0] = NAN;
  return e;
}

typedef struct {
  pkrylov_precond M;
} user_pc;

static int user_prec(void *data, int64_t n, const double *r, double *z) {
  (void)n;
  return pkrylov_precond_apply(((user_pc *)data)->M, PKRYLOV_MEM_HOST, r, z);
}

/* CPU only: user_apply is a host loop (pk_test_csr_matvec); a CUDA context would pass it device arrays */
PK_TEST_CASE_CPU(user_callbacks) {
  pkrylov_context ctx;
  PK_REQUIRE_OK(NULL, pk_test_context_create(&ctx));
  const int nx = 8, ny = 7, nz = 10, n = nx * ny * nz;
  const double wind[3] = {2, 1, 5};
  pkrylov_operator A, U;
  PK_REQUIRE_OK(ctx, pkrylov_operator_create_convdiff(ctx, nx, ny, nz, wind, 20.0, &A));
  pkrylov_precond J, UP;
  PK_REQUIRE_OK(ctx, pkrylov_precond_create(ctx, A, PKRYLOV_PRECOND_JACOBI, 0, PKRYLOV_LAYOUT_AUTO, &J));
  user_op uo = {A, 0, 0, 0};
  user_pc up = {J};
  PK_REQUIRE_OK(ctx, pkrylov_operator_create_user(ctx, n, user_apply, &uo, &U));
  PK_REQUIRE_OK(ctx, pkrylov_precond_create_user(ctx, n, user_prec, &up, &UP));
  double *b = malloc(sizeof(double) * n), *x = malloc(sizeof(double) * n), *xr = malloc(sizeof(double) * n);
  uint64_t seed = 4;
  for (int i = 0; i < n; i++) b[i] = pk_test_rand(&seed);
  for (int m = 0; m < NMETHODS; m++) {
    pkrylov_result r1, r2;
    PK_REQUIRE_OK(ctx, solve(ctx, methods[m], A, J, 1e-10, 1000, b, xr, &r1));
    uo.calls = 0;
    PK_REQUIRE_OK(ctx, solve(ctx, methods[m], U, UP, 1e-10, 1000, b, x, &r2));
    PK_EXPECT(r2.converged && r2.iterations == r1.iterations, "%s: user %d iterations vs %d", mname(methods[m]),
              r2.iterations, r1.iterations);
    PK_EXPECT(pk_test_rel_diff(n, x, xr) <= 1e-12, "%s: user vs library %g", mname(methods[m]),
              pk_test_rel_diff(n, x, xr));
    PK_EXPECT(uo.calls > r2.iterations, "the user routine was called (%d)", uo.calls);
    /* a failing routine: PKRYLOV_ERR_CALLBACK, x as it came in */
    pkrylov_solver s;
    PK_REQUIRE_OK(ctx, pkrylov_solver_create(ctx, methods[m], U, UP, &s));
    pkrylov_solver_set_initial_guess_nonzero(s, 1);
    for (int i = 0; i < n; i++) x[i] = 0.5;
    uo.calls = 0;
    uo.fail_at = 6;
    PK_EXPECT_CODE(ctx, pkrylov_solver_solve(s, PKRYLOV_MEM_HOST, b, x), PKRYLOV_ERR_CALLBACK);
    int same = 1;
    for (int i = 0; i < n; i++) same &= x[i] == 0.5;
    PK_EXPECT(same, "%s: x restored after a callback failure", mname(methods[m]));
    uo.fail_at = 0;
    /* NaN from the 8th product on: DIVERGED_NAN, x finite */
    uo.calls = 0;
    uo.nan_at = 8;
    PK_REQUIRE_OK(ctx, pkrylov_solver_solve(s, PKRYLOV_MEM_HOST, b, x));
    pkrylov_solver_get_result(s, &r2);
    PK_EXPECT(r2.reason == PKRYLOV_DIVERGED_NAN, "%s: NaN reason %s", mname(methods[m]),
              pkrylov_reason_string(r2.reason));
    PK_EXPECT(r2.breakdown_iteration >= 1 && r2.breakdown_iteration <= 8, "%s: NaN at %d", mname(methods[m]),
              r2.breakdown_iteration);
    int fin = 1;
    for (int i = 0; i < n; i++) fin &= isfinite(x[i]);
    PK_EXPECT(fin, "%s: x finite after NaN", mname(methods[m]));
    uo.nan_at = 0;
    pkrylov_solver_destroy(&s);
  }
  free(b), free(x), free(xr);
  pkrylov_operator_destroy(&U);
  pkrylov_precond_destroy(&UP);
  pkrylov_precond_destroy(&J);
  pkrylov_operator_destroy(&A);
  pkrylov_context_destroy(&ctx);
  PK_TEST_END();
}

static int stop_at_3(void *u, int32_t it, double r) {
  (void)r;
  ++*(int *)u;
  return it >= 3;
}

PK_TEST_CASE(history_monitor_maxit_options) {
  pkrylov_context ctx;
  PK_REQUIRE_OK(NULL, pk_test_context_create(&ctx));
  const int nx = 10, ny = 9, nz = 8, n = nx * ny * nz;
  const double wind[3] = {4, -3, 2};
  pkrylov_operator A;
  PK_REQUIRE_OK(ctx, pkrylov_operator_create_convdiff(ctx, nx, ny, nz, wind, 5.0, &A));
  double *b = malloc(sizeof(double) * n), *x = malloc(sizeof(double) * n);
  uint64_t seed = 6;
  for (int i = 0; i < n; i++) b[i] = pk_test_rand(&seed);
  for (int m = 0; m < NMETHODS; m++) {
    pkrylov_solver s;
    PK_REQUIRE_OK(ctx, pkrylov_solver_create(ctx, methods[m], A, NULL, &s));
    pkrylov_solver_set_history(s, 1);
    PK_REQUIRE_OK(ctx, pkrylov_solver_solve(s, PKRYLOV_MEM_HOST, b, x));
    pkrylov_result res;
    pkrylov_solver_get_result(s, &res);
    int32_t len;
    double hist[2000];
    PK_REQUIRE_OK(ctx, pkrylov_solver_get_history(s, 2000, hist, &len));
    PK_EXPECT(res.converged && len == res.iterations + 1, "%s: history %d for %d iterations", mname(methods[m]),
              len, res.iterations);
    PK_EXPECT(fabs(hist[0] - res.initial_residual) <= 1e-14 * res.initial_residual, "%s: history[0] %g vs %g",
              mname(methods[m]), hist[0], res.initial_residual);
    PK_EXPECT(hist[len - 1] <= 1e-8 * res.rhs_norm, "%s: last history entry %g", mname(methods[m]), hist[len - 1]);
    PK_EXPECT(fabs(hist[len - 1] - res.final_residual) <= 1e-3 * res.rhs_norm * 1e-8 + 0.5 * res.final_residual,
              "%s: last history %g vs true %g", mname(methods[m]), hist[len - 1], res.final_residual);
    /* monitor stop at iteration 3. A CUDA context runs blocks of sync_interval iterations (32) and applies a
       monitor stop found inside a block at its end (pk_kry.h, pk_kry_poll): blocks of one iteration here, so
       that the stop is at once as on the CPU */
    if (pk_test_on_cuda()) PK_REQUIRE_OK(ctx, pkrylov_solver_set_sync_interval(s, 1));
    int calls = 0;
    pkrylov_solver_set_monitor(s, stop_at_3, &calls);
    PK_REQUIRE_OK(ctx, pkrylov_solver_solve(s, PKRYLOV_MEM_HOST, b, x));
    pkrylov_solver_get_result(s, &res);
    PK_EXPECT(res.reason == PKRYLOV_STOPPED_BY_MONITOR && res.iterations == 3 && calls == 4,
              "%s: monitor: %s, %d iterations, %d calls", mname(methods[m]), pkrylov_reason_string(res.reason),
              res.iterations, calls);
    PK_EXPECT(fabs(res.final_residual / res.rhs_norm - pk_test_true_relres(A, b, x)) <= 1e-12,
              "%s: final residual is x's", mname(methods[m]));
    pkrylov_solver_set_monitor(s, NULL, NULL);
    /* maxit */
    pkrylov_solver_set_max_iterations(s, 4);
    PK_REQUIRE_OK(ctx, pkrylov_solver_solve(s, PKRYLOV_MEM_HOST, b, x));
    pkrylov_solver_get_result(s, &res);
    PK_EXPECT(res.reason == PKRYLOV_DIVERGED_MAX_ITERATIONS && res.iterations == 4, "%s: maxit: %s %d",
              mname(methods[m]), pkrylov_reason_string(res.reason), res.iterations);
    pkrylov_solver_set_max_iterations(s, 0);
    PK_REQUIRE_OK(ctx, pkrylov_solver_solve(s, PKRYLOV_MEM_HOST, b, x));
    pkrylov_solver_get_result(s, &res);
    PK_EXPECT(res.reason == PKRYLOV_DIVERGED_MAX_ITERATIONS && res.iterations == 0, "%s: maxit 0",
              mname(methods[m]));
    /* b = 0: converged at once with x = 0 */
    pkrylov_solver_set_max_iterations(s, 100);
    double *z = calloc(n, sizeof(double));
    PK_REQUIRE_OK(ctx, pkrylov_solver_solve(s, PKRYLOV_MEM_HOST, z, x));
    pkrylov_solver_get_result(s, &res);
    PK_EXPECT(res.converged && res.iterations == 0 && pk_test_norm(n, x) == 0, "%s: b = 0", mname(methods[m]));
    /* true-residual replacement every 5 iterations: still converges, checks counted */
    pkrylov_solver_set_true_residual_interval(s, 5);
    PK_REQUIRE_OK(ctx, pkrylov_solver_solve(s, PKRYLOV_MEM_HOST, b, x));
    pkrylov_solver_get_result(s, &res);
    PK_EXPECT(res.converged && res.true_residual_checks >= res.iterations / 5, "%s: true residual interval %d checks, %d its",
              mname(methods[m]), res.true_residual_checks, res.iterations);
    PK_EXPECT(pk_test_true_relres(A, b, x) <= 1e-8, "%s: true relres with replacement", mname(methods[m]));
    /* bad b */
    z[3] = NAN;
    PK_EXPECT_CODE(ctx, pkrylov_solver_solve(s, PKRYLOV_MEM_HOST, z, x), PKRYLOV_ERR_NOT_FINITE);
    PK_EXPECT(pk_test_msg_has(ctx, "'b'"), "message names b");
    free(z);
    pkrylov_solver_destroy(&s);
  }
  free(b), free(x);
  pkrylov_operator_destroy(&A);
  pkrylov_context_destroy(&ctx);
  PK_TEST_END();
}

/* CPU only: the thread count is the CPU backend's */
PK_TEST_CASE_CPU(thread_count_independence) {
  const int nx = 40, ny = 30, nz = 12, n = nx * ny * nz; /* 14400: four row chunks */
  const double wind[3] = {2, 3, -6};
  double *b = malloc(sizeof(double) * n), *x[2];
  uint64_t seed = 2;
  for (int i = 0; i < n; i++) b[i] = pk_test_rand(&seed);
  for (int m = 0; m < NMETHODS; m++) {
    int its[2];
    for (int t = 0; t < 2; t++) {
      pkrylov_context ctx;
      PK_REQUIRE_OK(NULL, pk_test_context_create(&ctx));
      pkrylov_context_set_num_threads(ctx, t + 1);
      pkrylov_operator A;
      pkrylov_precond M;
      PK_REQUIRE_OK(ctx, pkrylov_operator_create_convdiff(ctx, nx, ny, nz, wind, 30.0, &A));
      PK_REQUIRE_OK(ctx, pkrylov_precond_create(ctx, A, PKRYLOV_PRECOND_COLUMN, nz, PKRYLOV_LAYOUT_KSLOW, &M));
      x[t] = malloc(sizeof(double) * n);
      pkrylov_result res;
      PK_REQUIRE_OK(ctx, solve(ctx, methods[m], A, M, 1e-10, 1000, b, x[t], &res));
      its[t] = res.iterations;
      PK_EXPECT(res.converged, "%s converged", mname(methods[m]));
      pkrylov_precond_destroy(&M);
      pkrylov_operator_destroy(&A);
      pkrylov_context_destroy(&ctx);
    }
    PK_EXPECT(its[0] == its[1] && memcmp(x[0], x[1], sizeof(double) * n) == 0,
              "%s: 1 and 2 threads differ (%d vs %d iterations)", mname(methods[m]), its[0], its[1]);
    free(x[0]), free(x[1]);
  }
  free(b);
  PK_TEST_END();
}

PK_TEST_MAIN(PK_TEST_ENTRY(ani1_nonsymm_dense), PK_TEST_ENTRY(pores_1_jacobi_dense),
             PK_TEST_ENTRY(orsirr_2_jacobi_dense), PK_TEST_ENTRY(convdiff_preconditioners),
             PK_TEST_ENTRY(convdiff_column_nonsymmetric_path), PK_TEST_ENTRY(convdiff_bad_input),
             PK_TEST_ENTRY(spd_against_cg), PK_TEST_ENTRY(breakdown_shadow_skew), PK_TEST_ENTRY(breakdown_omega),
             PK_TEST_ENTRY(breakdown_rho), PK_TEST_ENTRY(user_callbacks),
             PK_TEST_ENTRY(history_monitor_maxit_options), PK_TEST_ENTRY(thread_count_independence))

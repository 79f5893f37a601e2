/**
 * @file t140-user-operator.c
 * @brief User-callback operators and preconditioners (pkrylov_operator_create_user,
 *        pkrylov_precond_create_user): CG and pipelined CG with a CSR matvec and a Jacobi written here
 *        against the same matrix given as CSR with the library's Jacobi; callback failures; the kinds
 *        of preconditioner and export a user operator cannot have; bad input.
 */
#include <string.h>

#include "pk_test.h"

/* ---- the model side: a CSR matrix, its matvec and a Jacobi, written here ----------------------- */

/** A 3-D 7-point SPD matrix in 0-based CSR (columns sorted), with random positive couplings. */
typedef struct {
  int n;
  int *rp, *ci;
  double *v;
  double *dinv; /* 1 / diagonal */
} test_csr;

/**
 * nx x ny x nz grid, cell i + nx*(j + ny*k); A = D - W with W the couplings (random in [0.5, 1]) and
 * D = sum of a row's couplings + shift (strictly diagonally dominant, so SPD).
 */
static int make_grid_csr(int nx, int ny, int nz, double shift, uint64_t seed, test_csr *m) {
  const int n = nx * ny * nz;
  m->n = n;
  m->rp = malloc(sizeof(int) * (size_t)(n + 1));
  m->ci = malloc(sizeof(int) * (size_t)n * 7);
  m->v = malloc(sizeof(double) * (size_t)n * 7);
  m->dinv = malloc(sizeof(double) * (size_t)n);
  double *wx = malloc(sizeof(double) * (size_t)n), *wy = malloc(sizeof(double) * (size_t)n);
  double *wz = malloc(sizeof(double) * (size_t)n);
  if (!m->rp || !m->ci || !m->v || !m->dinv || !wx || !wy || !wz) return 1;
  /* w?[c]: coupling between c and its neighbour with the smaller index in that direction */
  for (int c = 0; c < n; c++) {
    wx[c] = 0.75 + 0.25 * pk_test_rand(&seed);
    wy[c] = 0.75 + 0.25 * pk_test_rand(&seed);
    wz[c] = 0.75 + 0.25 * pk_test_rand(&seed);
  }
  int nnz = 0;
  m->rp[0] = 0;
  for (int k = 0; k < nz; k++)
    for (int j = 0; j < ny; j++)
      for (int i = 0; i < nx; i++) {
        const int c = i + nx * (j + ny * k), nxy = nx * ny;
        /* neighbours in increasing column order: k-1, j-1, i-1, (diag), i+1, j+1, k+1 */
        const int has[6] = {k > 0, j > 0, i > 0, i < nx - 1, j < ny - 1, k < nz - 1};
        const int col[6] = {c - nxy, c - nx, c - 1, c + 1, c + nx, c + nxy};
        double w[6];
        w[0] = has[0] ? wz[c] : 0, w[1] = has[1] ? wy[c] : 0, w[2] = has[2] ? wx[c] : 0;
        w[3] = has[3] ? wx[c + 1] : 0, w[4] = has[4] ? wy[c + nx] : 0, w[5] = has[5] ? wz[c + nxy] : 0;
        double diag = shift;
        for (int e = 0; e < 6; e++) diag += w[e];
        for (int e = 0; e < 6; e++) {
          if (e == 3) m->ci[nnz] = c, m->v[nnz++] = diag;
          if (has[e]) m->ci[nnz] = col[e], m->v[nnz++] = -w[e];
        }
        m->rp[c + 1] = nnz;
        m->dinv[c] = 1.0 / diag;
      }
  free(wx), free(wy), free(wz);
  return 0;
}

static void free_csr(test_csr *m) { free(m->rp), free(m->ci), free(m->v), free(m->dinv); }

/** What the callbacks get as `user`: the matrix, a call counter, and when to fail. */
typedef struct {
  const test_csr *m;
  int64_t calls;
  int64_t fail_at; /* return 7 from this call on (1-based); 0 = never */
  int64_t wrong_n; /* calls with n != the matrix size */
  const double *last_x, *last_y;
} cb_data;

/** y = A x, plain CSR loop (columns in increasing order). */
static int cb_matvec(void *user, int64_t n, const double *x, double *y) {
  cb_data *d = user;
  d->calls++;
  d->last_x = x, d->last_y = y;
  if (n != d->m->n) d->wrong_n++;
  if (d->fail_at > 0 && d->calls >= d->fail_at) return 7;
  for (int64_t r = 0; r < n; r++) {
    double s = 0.0;
    for (int p = d->m->rp[r]; p < d->m->rp[r + 1]; p++) s += d->m->v[p] * x[d->m->ci[p]];
    y[r] = s;
  }
  return 0;
}

/** y = D^-1 x (Jacobi), with the reciprocal formed once as the library does. */
static int cb_jacobi(void *user, int64_t n, const double *x, double *y) {
  cb_data *d = user;
  d->calls++;
  if (n != d->m->n) d->wrong_n++;
  if (d->fail_at > 0 && d->calls >= d->fail_at) return 7;
  for (int64_t i = 0; i < n; i++) y[i] = d->m->dinv[i] * x[i];
  return 0;
}

static double *rand_vec(int64_t n, uint64_t seed) {
  double *v = malloc(sizeof(double) * (size_t)n);
  for (int64_t i = 0; i < n; i++) v[i] = pk_test_rand(&seed);
  return v;
}

/** One solve: type, A, M (may be NULL), rtol, initial guess x0 (NULL = zero) into x; result in res. */
static int run(pkrylov_context ctx, int type, pkrylov_operator A, pkrylov_precond M, double rtol,
               const double *b, const double *x0, double *x, int64_t n, pkrylov_result *res) {
  pkrylov_solver s = NULL;
  int rc = pkrylov_solver_create(ctx, type, A, M, &s);
  if (!rc) rc = pkrylov_solver_set_tolerances(s, rtol, 0.0);
  if (!rc && x0) rc = pkrylov_solver_set_initial_guess_nonzero(s, 1);
  if (x0)
    memcpy(x, x0, sizeof(double) * (size_t)n);
  else
    memset(x, 0, sizeof(double) * (size_t)n);
  if (!rc) rc = pkrylov_solver_solve(s, PKRYLOV_MEM_HOST, b, x);
  if (!rc) rc = pkrylov_solver_get_result(s, res);
  pkrylov_solver_destroy(&s);
  return rc;
}

/* ---- against the same matrix as CSR ------------------------------------------------------------ */

/**
 * type: CG or PIPECG. The user operator + user Jacobi, the user operator + no preconditioner, and the CSR
 * operator + user Jacobi each give the iteration count and the solution (1e-12) of the CSR operator with
 * the library's Jacobi (or none); the solutions meet the tolerance on a residual recomputed here.
 */
static int same_as_csr(int type) {
  test_csr m;
  if (make_grid_csr(18, 17, 16, 0.05, 11, &m)) return PK_FAIL; /* n = 4896 > one 4096-row chunk */
  const int64_t n = m.n;
  const double rtol = 1e-9;
  pkrylov_context ctx;
  PK_REQUIRE_OK(NULL, pkrylov_context_create(PKRYLOV_BACKEND_CPU, &ctx));
  pkrylov_operator Acsr, Au;
  pkrylov_precond Mj, Mu, Mnone_u;
  cb_data da = {&m, 0, 0, 0, NULL, NULL}, dm = {&m, 0, 0, 0, NULL, NULL};
  PK_REQUIRE_OK(ctx, pkrylov_operator_create_csr(ctx, m.n, 0, m.rp, m.ci, m.v, &Acsr));
  PK_REQUIRE_OK(ctx, pkrylov_operator_create_user(ctx, n, cb_matvec, &da, &Au));
  PK_REQUIRE_OK(ctx, pkrylov_precond_create(ctx, Acsr, PKRYLOV_PRECOND_JACOBI, 0, PKRYLOV_LAYOUT_AUTO, &Mj));
  PK_REQUIRE_OK(ctx, pkrylov_precond_create_user(ctx, n, cb_jacobi, &dm, &Mu));
  /* NONE is allowed on a user operator */
  PK_REQUIRE_OK(ctx, pkrylov_precond_create(ctx, Au, PKRYLOV_PRECOND_NONE, 0, PKRYLOV_LAYOUT_AUTO, &Mnone_u));

  double *b = rand_vec(n, 5), *x0 = rand_vec(n, 6);
  double *xr = malloc(sizeof(double) * (size_t)n), *xu = malloc(sizeof(double) * (size_t)n);
  pkrylov_result rr, ru;
  for (int guess = 0; guess < 2; guess++) {
    const double *g = guess ? x0 : NULL;
    /* user operator + user Jacobi vs CSR + JACOBI */
    PK_REQUIRE_OK(ctx, run(ctx, type, Acsr, Mj, rtol, b, g, xr, n, &rr));
    PK_REQUIRE_OK(ctx, run(ctx, type, Au, Mu, rtol, b, g, xu, n, &ru));
    PK_EXPECT(rr.converged && ru.converged, "both converge (%d, %d)", rr.reason, ru.reason);
    PK_EXPECT(rr.iterations == ru.iterations, "user/user %d iterations, CSR/JACOBI %d (guess %d)",
              ru.iterations, rr.iterations, guess);
    PK_EXPECT(pk_test_rel_diff(n, xu, xr) <= 1e-12, "user/user vs CSR/JACOBI: rel diff %g",
              pk_test_rel_diff(n, xu, xr));
    PK_EXPECT(pk_test_true_relres(Acsr, b, xu) <= rtol * (1 + 1e-6), "user/user residual %g",
              pk_test_true_relres(Acsr, b, xu));
    PK_EXPECT_NEAR(ru.rel_residual, pk_test_true_relres(Acsr, b, xu), 1e-3 * rtol);
    PK_EXPECT(ru.residual_replacements == rr.residual_replacements, "replacements %d vs %d",
              ru.residual_replacements, rr.residual_replacements);
    /* CSR operator + user Jacobi */
    PK_REQUIRE_OK(ctx, run(ctx, type, Acsr, Mu, rtol, b, g, xu, n, &ru));
    PK_EXPECT(rr.iterations == ru.iterations, "CSR/user %d iterations, CSR/JACOBI %d", ru.iterations,
              rr.iterations);
    PK_EXPECT(pk_test_rel_diff(n, xu, xr) <= 1e-12, "CSR/user vs CSR/JACOBI: rel diff %g",
              pk_test_rel_diff(n, xu, xr));
    /* no preconditioner: user operator (M = NULL and M = NONE) vs CSR */
    PK_REQUIRE_OK(ctx, run(ctx, type, Acsr, NULL, rtol, b, g, xr, n, &rr));
    PK_REQUIRE_OK(ctx, run(ctx, type, Au, NULL, rtol, b, g, xu, n, &ru));
    PK_EXPECT(rr.converged && ru.converged && rr.iterations == ru.iterations,
              "no precond: user %d iterations, CSR %d", ru.iterations, rr.iterations);
    PK_EXPECT(pk_test_rel_diff(n, xu, xr) <= 1e-12, "no precond: rel diff %g", pk_test_rel_diff(n, xu, xr));
    PK_REQUIRE_OK(ctx, run(ctx, type, Au, Mnone_u, rtol, b, g, xu, n, &ru));
    PK_EXPECT(ru.iterations == rr.iterations && pk_test_rel_diff(n, xu, xr) <= 1e-12,
              "NONE on a user operator: %d iterations", ru.iterations);
  }
  PK_EXPECT(da.calls > 0 && dm.calls > 0, "the callbacks were called (%lld, %lld)", (long long)da.calls,
            (long long)dm.calls);
  PK_EXPECT(da.wrong_n == 0 && dm.wrong_n == 0, "every call got n = %lld", (long long)n);

  free(b), free(x0), free(xr), free(xu);
  PK_REQUIRE_OK(ctx, pkrylov_precond_destroy(&Mnone_u));
  PK_REQUIRE_OK(ctx, pkrylov_precond_destroy(&Mu));
  PK_REQUIRE_OK(ctx, pkrylov_precond_destroy(&Mj));
  PK_REQUIRE_OK(ctx, pkrylov_operator_destroy(&Au));
  PK_REQUIRE_OK(ctx, pkrylov_operator_destroy(&Acsr));
  PK_REQUIRE_OK(NULL, pkrylov_context_destroy(&ctx));
  free_csr(&m);
  PK_TEST_END();
}

PK_TEST_CASE(cg_same_as_csr) { return same_as_csr(PKRYLOV_SOLVER_CG); }

PK_TEST_CASE(pipecg_same_as_csr) { return same_as_csr(PKRYLOV_SOLVER_PIPECG); }

/** apply, get_info on user objects; the callbacks get the caller's arrays. */
PK_TEST_CASE(apply_and_info) {
  test_csr m;
  if (make_grid_csr(5, 4, 3, 0.1, 3, &m)) return PK_FAIL;
  const int64_t n = m.n;
  pkrylov_context ctx;
  PK_REQUIRE_OK(NULL, pkrylov_context_create(PKRYLOV_BACKEND_CPU, &ctx));
  cb_data da = {&m, 0, 0, 0, NULL, NULL}, dm = {&m, 0, 0, 0, NULL, NULL};
  pkrylov_operator A;
  pkrylov_precond M;
  PK_REQUIRE_OK(ctx, pkrylov_operator_create_user(ctx, n, cb_matvec, &da, &A));
  PK_REQUIRE_OK(ctx, pkrylov_precond_create_user(ctx, n, cb_jacobi, &dm, &M));
  int64_t gn = 0, gnnz = 0;
  int32_t type = 0, nx = -1, ny = -1, nz = -1, levels = 0, layout = 0;
  PK_REQUIRE_OK(ctx, pkrylov_operator_get_info(A, &gn, &gnnz, &type, &nx, &ny, &nz));
  PK_EXPECT(gn == n && gnnz == -1 && type == PKRYLOV_OPERATOR_USER && nx == 0 && ny == 0 && nz == 0,
            "info: n %lld nnz %lld type %d grid %d %d %d", (long long)gn, (long long)gnnz, type, nx, ny, nz);
  PK_REQUIRE_OK(ctx, pkrylov_precond_get_info(M, &type, &levels, &layout));
  PK_EXPECT(type == PKRYLOV_PRECOND_USER && levels == 1 && layout == PKRYLOV_LAYOUT_KSLOW,
            "precond info: type %d levels %d layout %d", type, levels, layout);
  double *x = rand_vec(n, 9), *y = malloc(sizeof(double) * (size_t)n);
  double *ref = malloc(sizeof(double) * (size_t)n);
  PK_REQUIRE_OK(ctx, pkrylov_operator_apply(A, PKRYLOV_MEM_HOST, x, y));
  PK_EXPECT(da.calls == 1 && da.last_x == x && da.last_y == y, "one call on the caller's arrays");
  for (int64_t r = 0; r < n; r++) { /* reference: the same matrix, row by row */
    double s = 0;
    for (int p = m.rp[r]; p < m.rp[r + 1]; p++) s += m.v[p] * x[m.ci[p]];
    ref[r] = s;
  }
  PK_EXPECT(memcmp(y, ref, sizeof(double) * (size_t)n) == 0, "apply = the callback's product");
  PK_REQUIRE_OK(ctx, pkrylov_precond_apply(M, PKRYLOV_MEM_HOST, x, y));
  int bad = 0;
  for (int64_t i = 0; i < n; i++) bad += y[i] != m.dinv[i] * x[i];
  PK_EXPECT(bad == 0 && dm.calls == 1, "precond apply = D^-1 x (%d wrong)", bad);
  /* the vector checks of apply still hold */
  PK_EXPECT_CODE(ctx, pkrylov_operator_apply(A, PKRYLOV_MEM_HOST, x, x), PKRYLOV_ERR_ALIASING);
  PK_EXPECT_CODE(ctx, pkrylov_operator_apply(A, PKRYLOV_MEM_DEVICE, x, y), PKRYLOV_ERR_MEMTYPE);
  PK_EXPECT(da.calls == 1, "no call on invalid input");
  PK_EXPECT(strcmp(pkrylov_error_string(PKRYLOV_ERR_CALLBACK), "unknown status code") != 0,
            "PKRYLOV_ERR_CALLBACK has a description");
  free(x), free(y), free(ref);
  PK_REQUIRE_OK(ctx, pkrylov_precond_destroy(&M));
  PK_REQUIRE_OK(ctx, pkrylov_operator_destroy(&A));
  PK_REQUIRE_OK(NULL, pkrylov_context_destroy(&ctx));
  free_csr(&m);
  PK_TEST_END();
}

/** pkrylov_operator_apply / pkrylov_precond_apply: a failing routine gives PKRYLOV_ERR_CALLBACK. */
PK_TEST_CASE(apply_callback_failure) {
  test_csr m;
  if (make_grid_csr(4, 3, 2, 0.1, 3, &m)) return PK_FAIL;
  const int64_t n = m.n;
  pkrylov_context ctx;
  PK_REQUIRE_OK(NULL, pkrylov_context_create(PKRYLOV_BACKEND_CPU, &ctx));
  cb_data da = {&m, 0, 1, 0, NULL, NULL}, dm = {&m, 0, 1, 0, NULL, NULL};
  pkrylov_operator A;
  pkrylov_precond M;
  PK_REQUIRE_OK(ctx, pkrylov_operator_create_user(ctx, n, cb_matvec, &da, &A));
  PK_REQUIRE_OK(ctx, pkrylov_precond_create_user(ctx, n, cb_jacobi, &dm, &M));
  double *x = rand_vec(n, 1), *y = rand_vec(n, 2);
  PK_EXPECT_CODE(ctx, pkrylov_operator_apply(A, PKRYLOV_MEM_HOST, x, y), PKRYLOV_ERR_CALLBACK);
  PK_EXPECT(pk_test_msg_has(ctx, "returned 7") && pk_test_msg_has(ctx, "user operator"), "message");
  int32_t code = 0;
  pkrylov_context_get_last_error(ctx, &code, NULL);
  PK_EXPECT(code == PKRYLOV_ERR_CALLBACK, "last error code %d", code);
  PK_EXPECT_CODE(ctx, pkrylov_precond_apply(M, PKRYLOV_MEM_HOST, x, y), PKRYLOV_ERR_CALLBACK);
  PK_EXPECT(pk_test_msg_has(ctx, "returned 7") && pk_test_msg_has(ctx, "user preconditioner"), "message");
  /* the failure is not sticky across calls: a routine that works again is used again */
  da.fail_at = dm.fail_at = 0;
  PK_EXPECT_CODE(ctx, pkrylov_operator_apply(A, PKRYLOV_MEM_HOST, x, y), PKRYLOV_SUCCESS);
  PK_EXPECT_CODE(ctx, pkrylov_precond_apply(M, PKRYLOV_MEM_HOST, x, y), PKRYLOV_SUCCESS);
  PK_EXPECT(da.calls == 2 && dm.calls == 2, "calls %lld %lld", (long long)da.calls, (long long)dm.calls);
  free(x), free(y);
  PK_REQUIRE_OK(ctx, pkrylov_precond_destroy(&M));
  PK_REQUIRE_OK(ctx, pkrylov_operator_destroy(&A));
  PK_REQUIRE_OK(NULL, pkrylov_context_destroy(&ctx));
  free_csr(&m);
  PK_TEST_END();
}

/**
 * A routine that returns nonzero in the middle of a solve stops it with PKRYLOV_ERR_CALLBACK (CG and
 * pipelined CG, operator and preconditioner, at the first call and later), without calling the routine
 * again; the next solve with a working routine converges.
 */
PK_TEST_CASE(solve_callback_failure) {
  test_csr m;
  if (make_grid_csr(10, 9, 8, 0.05, 21, &m)) return PK_FAIL;
  const int64_t n = m.n;
  pkrylov_context ctx;
  PK_REQUIRE_OK(NULL, pkrylov_context_create(PKRYLOV_BACKEND_CPU, &ctx));
  cb_data da = {&m, 0, 0, 0, NULL, NULL}, dm = {&m, 0, 0, 0, NULL, NULL};
  pkrylov_operator A;
  pkrylov_precond M;
  PK_REQUIRE_OK(ctx, pkrylov_operator_create_user(ctx, n, cb_matvec, &da, &A));
  PK_REQUIRE_OK(ctx, pkrylov_precond_create_user(ctx, n, cb_jacobi, &dm, &M));
  double *b = rand_vec(n, 4), *x = malloc(sizeof(double) * (size_t)n), *x0 = malloc(sizeof(double) * (size_t)n);
  const int types[2] = {PKRYLOV_SOLVER_CG, PKRYLOV_SOLVER_PIPECG};
  const int64_t when[3] = {1, 2, 9};
  for (int t = 0; t < 2; t++)
    for (int which = 0; which < 2; which++)
      for (int w = 0; w < 3; w++) {
        cb_data *d = which ? &dm : &da;
        da.calls = dm.calls = 0;
        da.fail_at = dm.fail_at = 0;
        d->fail_at = when[w];
        pkrylov_result res;
        /* from an initial guess: a failed solve must give x back as it came */
        for (int64_t i = 0; i < n; i++) x0[i] = 0.25 + (double)(i % 5);
        PK_EXPECT_CODE(ctx, run(ctx, types[t], A, M, 1e-10, b, x0, x, n, &res), PKRYLOV_ERR_CALLBACK);
        for (int64_t i = 0; i < n; i++)
          if (x[i] != x0[i]) {
            PK_EXPECT(0, "x[%lld] = %g changed by a failed solve", (long long)i, x[i]);
            break;
          }
        PK_EXPECT(pk_test_msg_has(ctx, "returned 7") &&
                      pk_test_msg_has(ctx, which ? "user preconditioner" : "user operator"),
                  "message names the routine");
        PK_EXPECT(d->calls == when[w], "solver %d, %s fails at call %lld: called %lld times", types[t],
                  which ? "precond" : "operator", (long long)when[w], (long long)d->calls);
      }
  /* a working routine again: the next solve converges */
  da.fail_at = dm.fail_at = 0;
  for (int t = 0; t < 2; t++) {
    pkrylov_result res;
    PK_REQUIRE_OK(ctx, run(ctx, types[t], A, M, 1e-10, b, NULL, x, n, &res));
    PK_EXPECT(res.converged == 1, "converges after a failed solve (reason %d)", res.reason);
  }
  free(b), free(x), free(x0);
  PK_REQUIRE_OK(ctx, pkrylov_precond_destroy(&M));
  PK_REQUIRE_OK(ctx, pkrylov_operator_destroy(&A));
  PK_REQUIRE_OK(NULL, pkrylov_context_destroy(&ctx));
  free_csr(&m);
  PK_TEST_END();
}

/** Jacobi and column need matrix entries: UNSUPPORTED on a user operator, naming the way out. */
PK_TEST_CASE(no_entries_preconditioners) {
  test_csr m;
  if (make_grid_csr(4, 3, 2, 0.1, 3, &m)) return PK_FAIL;
  pkrylov_context ctx;
  PK_REQUIRE_OK(NULL, pkrylov_context_create(PKRYLOV_BACKEND_CPU, &ctx));
  cb_data da = {&m, 0, 0, 0, NULL, NULL};
  pkrylov_operator A;
  pkrylov_precond M = NULL;
  PK_REQUIRE_OK(ctx, pkrylov_operator_create_user(ctx, m.n, cb_matvec, &da, &A));
  PK_EXPECT_CODE(ctx, pkrylov_precond_create(ctx, A, PKRYLOV_PRECOND_JACOBI, 0, PKRYLOV_LAYOUT_AUTO, &M),
                 PKRYLOV_ERR_UNSUPPORTED);
  PK_EXPECT(pk_test_msg_has(ctx, "'A'") && pk_test_msg_has(ctx, "pkrylov_precond_create_user") &&
                pk_test_msg_has(ctx, "JACOBI"),
            "message");
  PK_EXPECT_CODE(ctx, pkrylov_precond_create(ctx, A, PKRYLOV_PRECOND_COLUMN, 2, PKRYLOV_LAYOUT_KSLOW, &M),
                 PKRYLOV_ERR_UNSUPPORTED);
  PK_EXPECT(pk_test_msg_has(ctx, "'A'") && pk_test_msg_has(ctx, "pkrylov_precond_create_user") &&
                pk_test_msg_has(ctx, "COLUMN"),
            "message");
  /* USER is made by pkrylov_precond_create_user only */
  PK_EXPECT_CODE(ctx, pkrylov_precond_create(ctx, A, PKRYLOV_PRECOND_USER, 0, PKRYLOV_LAYOUT_AUTO, &M),
                 PKRYLOV_ERR_INVALID_VALUE);
  PK_EXPECT(pk_test_msg_has(ctx, "'type'"), "message names 'type'");
  PK_EXPECT(M == NULL, "no preconditioner after an error");
  PK_EXPECT(da.calls == 0, "the routine was not called");
  PK_REQUIRE_OK(ctx, pkrylov_operator_destroy(&A));
  PK_REQUIRE_OK(NULL, pkrylov_context_destroy(&ctx)); /* nothing leaked into the context */
  free_csr(&m);
  PK_TEST_END();
}

/** A user operator has no CSR form: get_csr and write_mtx answer UNSUPPORTED. */
PK_TEST_CASE(no_csr_export) {
  test_csr m;
  if (make_grid_csr(4, 3, 2, 0.1, 3, &m)) return PK_FAIL;
  pkrylov_context ctx;
  PK_REQUIRE_OK(NULL, pkrylov_context_create(PKRYLOV_BACKEND_CPU, &ctx));
  cb_data da = {&m, 0, 0, 0, NULL, NULL};
  pkrylov_operator A;
  PK_REQUIRE_OK(ctx, pkrylov_operator_create_user(ctx, m.n, cb_matvec, &da, &A));
  int64_t rowptr[25] = {0}, colind[200] = {0};
  double values[200] = {0};
  PK_EXPECT_CODE(ctx, pkrylov_operator_get_csr(A, rowptr, colind, values), PKRYLOV_ERR_UNSUPPORTED);
  PK_EXPECT(pk_test_msg_has(ctx, "'A'") && pk_test_msg_has(ctx, "user operator"), "message");
  PK_EXPECT(rowptr[0] == 0 && rowptr[1] == 0, "nothing written");
  PK_EXPECT_CODE(ctx, pkrylov_operator_write_mtx(A, pk_test_tmp_path("t140-user.mtx")),
                 PKRYLOV_ERR_UNSUPPORTED);
  PK_REQUIRE_OK(ctx, pkrylov_operator_destroy(&A));
  PK_REQUIRE_OK(NULL, pkrylov_context_destroy(&ctx));
  free_csr(&m);
  PK_TEST_END();
}

/** Bad input to the constructors: the specific code, the message names the argument, nothing created. */
PK_TEST_CASE(bad_input) {
  test_csr m;
  if (make_grid_csr(4, 3, 2, 0.1, 3, &m)) return PK_FAIL;
  const int64_t n = m.n;
  pkrylov_context ctx;
  PK_REQUIRE_OK(NULL, pkrylov_context_create(PKRYLOV_BACKEND_CPU, &ctx));
  cb_data da = {&m, 0, 0, 0, NULL, NULL};
  pkrylov_operator A = NULL;
  pkrylov_precond M = NULL;
  for (int pc = 0; pc < 2; pc++) {
    /* the same checks for both constructors */
#define CREATE(c, nn, fn, out)                                                                     \
  (pc ? pkrylov_precond_create_user((c), (nn), (fn), &da, (out) ? &M : NULL)                       \
      : pkrylov_operator_create_user((c), (nn), (fn), &da, (out) ? &A : NULL))
    pkrylov_apply_fn fn = pc ? cb_jacobi : cb_matvec;
    PK_EXPECT_CODE(ctx, CREATE(ctx, n, NULL, 1), PKRYLOV_ERR_NULL_POINTER);
    PK_EXPECT(pk_test_msg_has(ctx, "'apply'"), "NULL apply");
    PK_EXPECT_CODE(ctx, CREATE(ctx, 0, fn, 1), PKRYLOV_ERR_INVALID_SIZE);
    PK_EXPECT(pk_test_msg_has(ctx, "'n' = 0"), "n = 0");
    PK_EXPECT_CODE(ctx, CREATE(ctx, -3, fn, 1), PKRYLOV_ERR_INVALID_SIZE);
    PK_EXPECT(pk_test_msg_has(ctx, "'n' = -3"), "n = -3");
    PK_EXPECT_CODE(ctx, CREATE(ctx, n, fn, 0), PKRYLOV_ERR_NULL_POINTER);
    PK_EXPECT(pk_test_msg_has(ctx, pc ? "'M'" : "'A'"), "NULL output");
    PK_EXPECT_CODE(NULL, CREATE(NULL, n, fn, 1), PKRYLOV_ERR_NULL_POINTER);
    PK_EXPECT(pk_test_msg_has(NULL, "'ctx'"), "NULL ctx");
#undef CREATE
  }
  PK_EXPECT(A == NULL && M == NULL && da.calls == 0, "nothing created, nothing called");
  /* a user preconditioner of another size than the operator */
  PK_REQUIRE_OK(ctx, pkrylov_operator_create_user(ctx, n, cb_matvec, &da, &A));
  PK_REQUIRE_OK(ctx, pkrylov_precond_create_user(ctx, n + 1, cb_jacobi, &da, &M));
  pkrylov_solver s = NULL;
  PK_EXPECT_CODE(ctx, pkrylov_solver_create(ctx, PKRYLOV_SOLVER_CG, A, M, &s), PKRYLOV_ERR_SIZE_MISMATCH);
  PK_EXPECT(pk_test_msg_has(ctx, "'M'"), "size mismatch names 'M'");
  /* objects of another context */
  pkrylov_context ctx2;
  PK_REQUIRE_OK(NULL, pkrylov_context_create(PKRYLOV_BACKEND_CPU, &ctx2));
  PK_EXPECT_CODE(ctx2, pkrylov_solver_create(ctx2, PKRYLOV_SOLVER_CG, A, NULL, &s), PKRYLOV_ERR_INCOMPATIBLE);
  PK_REQUIRE_OK(NULL, pkrylov_context_destroy(&ctx2));
  /* destroy refused while a solver holds them, then fine */
  PK_REQUIRE_OK(ctx, pkrylov_precond_destroy(&M));
  PK_REQUIRE_OK(ctx, pkrylov_precond_create_user(ctx, n, cb_jacobi, &da, &M));
  PK_REQUIRE_OK(ctx, pkrylov_solver_create(ctx, PKRYLOV_SOLVER_PIPECG, A, M, &s));
  PK_EXPECT_CODE(ctx, pkrylov_precond_destroy(&M), PKRYLOV_ERR_INVALID_STATE);
  PK_EXPECT_CODE(ctx, pkrylov_operator_destroy(&A), PKRYLOV_ERR_INVALID_STATE);
  PK_REQUIRE_OK(ctx, pkrylov_solver_destroy(&s));
  PK_REQUIRE_OK(ctx, pkrylov_precond_destroy(&M));
  PK_REQUIRE_OK(ctx, pkrylov_operator_destroy(&A));
  PK_EXPECT(A == NULL && M == NULL, "destroy nulls the handles");
  PK_REQUIRE_OK(NULL, pkrylov_context_destroy(&ctx));
  free_csr(&m);
  PK_TEST_END();
}

/**
 * A CUDA context accepts user operators and preconditioners (their routines get device pointers there;
 * t710 user_callbacks_match_cpu solves with them); skipped without a CUDA device.
 */
PK_TEST_CASE(cuda_context_accepts) {
  pkrylov_context ctx;
  if (!pkrylov_has_cuda() || pkrylov_context_create(PKRYLOV_BACKEND_CUDA, &ctx) != PKRYLOV_SUCCESS)
    return PK_SKIP;
  test_csr m;
  if (make_grid_csr(4, 3, 2, 0.1, 3, &m)) return PK_FAIL;
  cb_data da = {&m, 0, 0, 0, NULL, NULL};
  pkrylov_operator A = NULL;
  pkrylov_precond M = NULL;
  PK_REQUIRE_OK(ctx, pkrylov_operator_create_user(ctx, m.n, cb_matvec, &da, &A));
  PK_REQUIRE_OK(ctx, pkrylov_precond_create_user(ctx, m.n, cb_jacobi, &da, &M));
  PK_EXPECT(A != NULL && M != NULL, "created");
  PK_REQUIRE_OK(ctx, pkrylov_precond_destroy(&M));
  PK_REQUIRE_OK(ctx, pkrylov_operator_destroy(&A));
  PK_REQUIRE_OK(NULL, pkrylov_context_destroy(&ctx));
  free_csr(&m);
  PK_TEST_END();
}

PK_TEST_MAIN(PK_TEST_ENTRY(cg_same_as_csr), PK_TEST_ENTRY(pipecg_same_as_csr), PK_TEST_ENTRY(apply_and_info),
             PK_TEST_ENTRY(apply_callback_failure), PK_TEST_ENTRY(solve_callback_failure),
             PK_TEST_ENTRY(no_entries_preconditioners), PK_TEST_ENTRY(no_csr_export),
             PK_TEST_ENTRY(bad_input), PK_TEST_ENTRY(cuda_context_accepts))

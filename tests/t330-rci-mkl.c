/**
 * @file t330-rci-mkl.c
 * @brief MKL-compatible reverse-communication CG (pkrylov_dcg_init/check/dcg/get): the RCI loop driven with a
 *        matvec and Jacobi / column-tridiagonal preconditioners written here over the CSR export of the
 *        operator; solutions against dense LAPACK solves, iteration counts against the library's CG,
 *        dpar(3..8) against norms and coefficients recomputed here, the request sequence, the user
 *        stopping test, resuming, re-entrancy (interleaved solves) and the MKL error codes.
 *
 * CPU only (no PK_TEST_BACKENDS line): the MKL-compatible interface has no context and runs on the host
 * whatever the build has; the contexts here only build the test matrices and the reference CG solves.
 */
#include <pthread.h>
#include <string.h>
#include <unistd.h>

#include "pk_test.h"

/* ---- the caller's side of the RCI loop: a model's matvec and preconditioners ------------------- */

/** Preconditioners the test applies itself. */
enum { PC_NONE, PC_JACOBI, PC_COLUMN };

/** A problem as a model holds it: CSR copy of A and the preconditioner data. */
typedef struct {
  int64_t n;
  int64_t *rp, *ci;
  double *v;
  int pc;
  double *diag;          /* Jacobi: diag(A) */
  int64_t ncol;          /* column: number of columns (stride between levels, KSLOW layout) */
  int32_t nz;            /* column: levels */
  double *lo, *di, *up;  /* column: tridiagonal part of A (row idx couples to idx -/+ ncol) */
  double *cp, *dp;       /* column: Thomas scratch, nz each */
} problem;

/** Entry A(i, j) of the CSR copy (0 when not stored). */
static double csr_entry(const problem *P, int64_t i, int64_t j) {
  for (int64_t k = P->rp[i]; k < P->rp[i + 1]; k++)
    if (P->ci[k] == j) return P->v[k];
  return 0.0;
}

/** Copy A into P through the library's CSR export and set up the preconditioner data. */
static int problem_init(problem *P, pkrylov_operator A, int pc) {
  memset(P, 0, sizeof *P);
  int64_t n, nnz;
  int32_t nx, ny, nz;
  if (pkrylov_operator_get_info(A, &n, &nnz, NULL, &nx, &ny, &nz)) return -1;
  P->n = n;
  P->pc = pc;
  P->rp = malloc(sizeof(int64_t) * (size_t)(n + 1));
  P->ci = malloc(sizeof(int64_t) * (size_t)nnz);
  P->v = malloc(sizeof(double) * (size_t)nnz);
  P->diag = malloc(sizeof(double) * (size_t)n);
  if (!P->rp || !P->ci || !P->v || !P->diag) return -1;
  if (pkrylov_operator_get_csr(A, P->rp, P->ci, P->v)) return -1;
  for (int64_t i = 0; i < n; i++) P->diag[i] = csr_entry(P, i, i);
  if (pc == PC_COLUMN) {
    P->nz = nz;
    P->ncol = (int64_t)nx * ny;
    P->lo = malloc(sizeof(double) * (size_t)n);
    P->di = malloc(sizeof(double) * (size_t)n);
    P->up = malloc(sizeof(double) * (size_t)n);
    P->cp = malloc(sizeof(double) * (size_t)nz);
    P->dp = malloc(sizeof(double) * (size_t)nz);
    if (!P->lo || !P->di || !P->up || !P->cp || !P->dp) return -1;
    for (int64_t i = 0; i < n; i++) {
      P->di[i] = P->diag[i];
      P->lo[i] = i >= P->ncol ? csr_entry(P, i, i - P->ncol) : 0.0;
      P->up[i] = i + P->ncol < n ? csr_entry(P, i, i + P->ncol) : 0.0;
    }
  }
  return 0;
}

static void problem_free(problem *P) {
  free(P->rp), free(P->ci), free(P->v), free(P->diag);
  free(P->lo), free(P->di), free(P->up), free(P->cp), free(P->dp);
}

/** y = A x, a plain CSR loop. */
static void matvec(const problem *P, const double *x, double *y) {
  for (int64_t i = 0; i < P->n; i++) {
    double s = 0.0;
    for (int64_t k = P->rp[i]; k < P->rp[i + 1]; k++) s += P->v[k] * x[P->ci[k]];
    y[i] = s;
  }
}

/** z = M^-1 r: Jacobi (r / diag) or one Thomas tridiagonal solve per column (levels ncol apart). */
static void precond(const problem *P, const double *r, double *z) {
  if (P->pc == PC_JACOBI) {
    for (int64_t i = 0; i < P->n; i++) z[i] = r[i] / P->diag[i];
    return;
  }
  if (P->pc == PC_NONE) {
    memcpy(z, r, sizeof(double) * (size_t)P->n);
    return;
  }
  for (int64_t c = 0; c < P->ncol; c++) {
    /* forward elimination: m_k = di_k - lo_k cp_{k-1}, cp_k = up_k / m_k,
       dp_k = (r_k - lo_k dp_{k-1}) / m_k */
    for (int32_t k = 0; k < P->nz; k++) {
      const int64_t i = c + k * P->ncol;
      const double m = P->di[i] - (k ? P->lo[i] * P->cp[k - 1] : 0.0);
      P->cp[k] = P->up[i] / m;
      P->dp[k] = (r[i] - (k ? P->lo[i] * P->dp[k - 1] : 0.0)) / m;
    }
    /* back substitution: z_k = dp_k - cp_k z_{k+1} */
    for (int32_t k = P->nz - 1; k >= 0; k--) {
      const int64_t i = c + k * P->ncol;
      z[i] = P->dp[k] - (k + 1 < P->nz ? P->cp[k] * z[i + P->ncol] : 0.0);
    }
  }
}

static double dot(int64_t n, const double *x, const double *y) {
  double s = 0.0;
  for (int64_t i = 0; i < n; i++) s += x[i] * y[i];
  return s;
}

/** ||b - A x||^2 with the test's matvec. */
static double true_res2(const problem *P, const double *b, const double *x) {
  double *y = malloc(sizeof(double) * (size_t)P->n), s = 0.0;
  matvec(P, x, y);
  for (int64_t i = 0; i < P->n; i++) s += (b[i] - y[i]) * (b[i] - y[i]);
  free(y);
  return s;
}

static double *vec(int64_t n) { return calloc((size_t)n, sizeof(double)); }

static double *rand_vec(int64_t n, uint64_t seed) {
  double *v = vec(n);
  for (int64_t i = 0; i < n; i++) v[i] = pk_test_rand(&seed);
  return v;
}

/** Random sparse SPD matrix (symmetric, strictly diagonally dominant) in CSR, n rows. */
static int make_spd_csr(pkrylov_context ctx, int n, uint64_t seed, pkrylov_operator *A) {
  int *rp = malloc(sizeof(int) * (size_t)(n + 1));
  int *ci = malloc(sizeof(int) * (size_t)n * 5);
  double *v = malloc(sizeof(double) * (size_t)n * 5);
  double *offd = calloc((size_t)n * 2, sizeof(double)); /* couplings i-(i+1) and i-(i+7) */
  double *scale = calloc((size_t)n, sizeof(double));   /* varying diagonal so that Jacobi matters */
  for (int i = 0; i < 2 * n; i++) offd[i] = -0.5 - 0.5 * fabs(pk_test_rand(&seed));
  for (int i = 0; i < n; i++) scale[i] = 0.1 + 20.0 * fabs(pk_test_rand(&seed));
  int nnz = 0;
  rp[0] = 0;
  for (int i = 0; i < n; i++) {
    double diag = scale[i];
    const int nb[4] = {i - 7, i - 1, i + 1, i + 7};
    const double w[4] = {i >= 7 ? offd[2 * (i - 7) + 1] : 0, i >= 1 ? offd[2 * (i - 1)] : 0,
                         i + 1 < n ? offd[2 * i] : 0, i + 7 < n ? offd[2 * i + 1] : 0};
    int placed = 0;
    for (int k = 0; k < 4; k++) {
      if (nb[k] < 0 || nb[k] >= n) continue;
      if (!placed && nb[k] > i) ci[nnz] = i, v[nnz++] = 0, placed = 1; /* diagonal, in sorted position */
      ci[nnz] = nb[k], v[nnz++] = w[k];
      diag += fabs(w[k]);
    }
    if (!placed) ci[nnz] = i, v[nnz++] = 0;
    for (int k = rp[i]; k < nnz; k++)
      if (ci[k] == i) v[k] = diag;
    rp[i + 1] = nnz;
  }
  int rc = pkrylov_operator_create_csr(ctx, n, 0, rp, ci, v, A);
  free(rp), free(ci), free(v), free(offd), free(scale);
  return rc;
}

/** Thin-shell operator on an nx x ny x nz grid. */
static int make_thinshell(pkrylov_context ctx, int nx, int ny, int nz, pkrylov_operator *A) {
  pkrylov_thinshell_params p;
  int rc = pkrylov_thinshell_params_default(nx, ny, nz, &p);
  return rc ? rc : pkrylov_operator_create_thinshell(ctx, &p, A);
}

/** Library CG with the same preconditioner: iterations (or -1). */
static int library_cg_iterations(pkrylov_context ctx, pkrylov_operator A, int pctype, double rtol,
                                 const double *b, double *x) {
  pkrylov_precond M = NULL;
  pkrylov_solver s = NULL;
  pkrylov_result res;
  int rc = pkrylov_precond_create(ctx, A, pctype, 0, PKRYLOV_LAYOUT_AUTO, &M);
  if (!rc) rc = pkrylov_solver_create(ctx, PKRYLOV_SOLVER_CG, A, M, &s);
  if (!rc) rc = pkrylov_solver_set_tolerances(s, rtol, 0.0);
  if (!rc) rc = pkrylov_solver_set_max_iterations(s, 2000);
  if (!rc) rc = pkrylov_solver_solve(s, PKRYLOV_MEM_HOST, b, x);
  if (!rc) rc = pkrylov_solver_get_result(s, &res);
  pkrylov_solver_destroy(&s);
  pkrylov_precond_destroy(&M);
  if (rc || !res.converged) return -1;
  return res.iterations;
}

/** Run the RCI loop to its end with the automatic tests only; returns the final RCI_request. */
static int32_t run_to_end(const problem *P, double *x, const double *b, int32_t *ipar, double *dpar,
                          double *tmp) {
  const int32_t n = (int32_t)P->n;
  int32_t req;
  for (;;) {
    if (pkrylov_dcg(&n, x, b, &req, ipar, dpar, tmp) != PKRYLOV_SUCCESS) return req;
    if (req == 1)
      matvec(P, tmp, tmp + n);
    else if (req == 3)
      precond(P, tmp + 2 * (int64_t)n, tmp + 3 * (int64_t)n);
    else if (req != 2)
      return req;
  }
}

/** Init + the usual settings: automatic residual test to rtol (squared, as MKL), no user test, silent. */
static int setup(const problem *P, const double *x, const double *b, double rtol, int32_t *ipar, double *dpar,
                 double *tmp) {
  const int32_t n = (int32_t)P->n;
  int32_t req = 99;
  if (pkrylov_dcg_init(&n, x, b, &req, ipar, dpar, tmp) || req != 0) return -1;
  ipar[4] = 2000;              /* ipar(5): maximum iterations */
  ipar[5] = ipar[6] = 0;       /* ipar(6), ipar(7): no messages */
  ipar[8] = 1;                 /* ipar(9): automatic residual test */
  ipar[9] = 0;                 /* ipar(10): no user test */
  ipar[10] = P->pc != PC_NONE; /* ipar(11): preconditioned */
  dpar[0] = rtol * rtol;       /* dpar(1): MKL compares squared norms */
  if (pkrylov_dcg_check(&n, x, b, &req, ipar, dpar, tmp) || req != 0) return -1;
  return 0;
}

/* ---- solve and check every request ------------------------------------------------------------- */

/**
 * Drive the loop on P from x = 0 to rtol, checking at every step: tmp(:,1) = x0 at the first request;
 * after each residual update dpar(3)/(4)/(5)/(6) against norms recomputed here, x - x_old = dpar(7) p with
 * dpar(7) = (r, z)/(p, A p) recomputed here; at each direction tmp(:,1) = z + dpar(8) p_old with dpar(8) =
 * (r, z)/(r_old, z_old) recomputed here. Returns the iterations done (or -1) and the solution in x.
 */
static int checked_solve(const problem *P, const double *b, double *x, double rtol) {
  const int32_t n = (int32_t)P->n;
  const int64_t nn = P->n;
  int32_t ipar[128], req;
  double dpar[128];
  double *tmp = vec(4 * nn), *pold = vec(nn), *xold = vec(nn), *x0 = vec(nn);
  double *p = tmp, *q = tmp + nn, *r = tmp + 2 * nn, *z = P->pc != PC_NONE ? tmp + 3 * nn : r;
  memset(x, 0, sizeof(double) * (size_t)nn);
  if (setup(P, x, b, rtol, ipar, dpar, tmp)) return -1;
  int calls = 0, seen_it = -1, ndir = 0, result = -1;
  double alpha_ref = 0, rz_old = 0, last_r2 = 0;
  for (;;) {
    PK_EXPECT(pkrylov_dcg(&n, x, b, &req, ipar, dpar, tmp) == PKRYLOV_SUCCESS, "dcg failed, req %d", req);
    calls++;
    if (calls == 1) {
      PK_EXPECT(req == 1 && ipar[3] == 0, "first request %d (ipar(4) %d), expected 1 for A x0", req, ipar[3]);
      PK_EXPECT(pk_test_rel_diff(nn, p, x) == 0.0, "tmp(:,1) is not x0 at the first request");
      memcpy(x0, x, sizeof(double) * (size_t)nn);
      matvec(P, p, q);
      continue;
    }
    if (ipar[3] != seen_it) { /* a new residual: check the stored norms */
      const double r2 = dot(nn, r, r), t2 = true_res2(P, b, x);
      PK_EXPECT_NEAR(dpar[4], r2, 1e-12 * r2);
      PK_EXPECT(fabs(sqrt(t2) - sqrt(dpar[4])) <= 1e-6 * sqrt(dpar[4]) + 1e-10 * sqrt(dpar[2]),
                "it %d: true residual^2 %.17g vs dpar(5) %.17g", ipar[3], t2, dpar[4]);
      PK_EXPECT_NEAR(dpar[3], dpar[0] * dpar[2] + dpar[1], 1e-15 * dpar[2]);
      if (ipar[3] == 0) {
        PK_EXPECT_NEAR(dpar[2], true_res2(P, b, x0), 1e-13 * dpar[2]);
        PK_EXPECT(dpar[4] == dpar[2] && dpar[5] == 0.0, "dpar(5) %g dpar(6) %g at iteration 0", dpar[4],
                  dpar[5]);
      } else {
        PK_EXPECT(ipar[3] == seen_it + 1, "iteration jumped from %d to %d", seen_it, ipar[3]);
        PK_EXPECT(dpar[5] == last_r2, "dpar(6) %.17g is not the previous dpar(5) %.17g", dpar[5], last_r2);
        PK_EXPECT_NEAR(dpar[6], alpha_ref, 1e-10 * alpha_ref);
        double err = 0.0, scale = 0.0;
        for (int64_t i = 0; i < nn; i++) {
          err = fmax(err, fabs(x[i] - xold[i] - dpar[6] * pold[i]));
          scale = fmax(scale, fabs(x[i]));
        }
        PK_EXPECT(err <= 1e-12 * scale, "it %d: x - x_old differs from dpar(7) p by %.3e", ipar[3], err);
        if (P->pc == PC_NONE)
          PK_EXPECT_NEAR(dpar[7], dpar[4] / dpar[5], 1e-14 * dpar[7]);
      }
      last_r2 = dpar[4];
      seen_it = ipar[3];
    }
    if (req == 3) {
      PK_EXPECT(P->pc != PC_NONE, "request 3 without preconditioner");
      precond(P, r, tmp + 3 * nn);
    } else if (req == 1) { /* a new direction */
      const double rz = dot(nn, r, z);
      if (ndir == 0) {
        PK_EXPECT(dpar[7] == 0.0, "dpar(8) %g for the first direction", dpar[7]);
        PK_EXPECT(pk_test_rel_diff(nn, p, z) == 0.0, "first direction is not z");
      } else {
        const double beta_ref = rz / rz_old;
        PK_EXPECT_NEAR(dpar[7], beta_ref, 1e-10 * beta_ref);
        double err = 0.0, scale = 0.0;
        for (int64_t i = 0; i < nn; i++) {
          err = fmax(err, fabs(p[i] - z[i] - dpar[7] * pold[i]));
          scale = fmax(scale, fabs(p[i]));
        }
        PK_EXPECT(err <= 1e-13 * scale, "direction %d: p differs from z + dpar(8) p_old by %.3e", ndir, err);
      }
      ndir++;
      rz_old = rz;
      matvec(P, p, q);
      alpha_ref = rz / dot(nn, p, q);
      memcpy(pold, p, sizeof(double) * (size_t)nn);
      memcpy(xold, x, sizeof(double) * (size_t)nn);
    } else if (req == 0) {
      PK_EXPECT(dpar[4] <= dpar[3], "converged with dpar(5) %g > dpar(4) %g", dpar[4], dpar[3]);
      int32_t it = -5;
      PK_EXPECT_CODE(NULL, pkrylov_dcg_get(&n, x, b, &req, ipar, dpar, tmp, &it), PKRYLOV_SUCCESS);
      PK_EXPECT(it == ipar[3], "itercount %d vs ipar(4) %d", it, ipar[3]);
      result = it;
      break;
    } else {
      PK_EXPECT(0, "unexpected RCI_request %d", req);
      break;
    }
  }
  free(tmp), free(pold), free(xold), free(x0);
  return result;
}

/** checked_solve against the dense solve and against the library CG's iteration count. */
static int dense_and_library_case(pkrylov_context ctx, pkrylov_operator A, int pc, int lib_pc, double rtol,
                                  double sol_tol) {
  problem P;
  PK_EXPECT(problem_init(&P, A, pc) == 0, "problem_init failed");
  const int64_t n = P.n;
  double *b = rand_vec(n, 7), *x = vec(n), *xref = vec(n), *xlib = vec(n);
  PK_EXPECT(pk_test_dense_solve(A, b, xref) == 0, "dense reference failed");
  const int it = checked_solve(&P, b, x, rtol);
  PK_EXPECT(it > 0, "RCI solve did not converge");
  PK_EXPECT(pk_test_rel_diff(n, x, xref) < sol_tol, "rel error %.3e", pk_test_rel_diff(n, x, xref));
  const int lib_it = library_cg_iterations(ctx, A, lib_pc, rtol, b, xlib);
  PK_EXPECT(lib_it > 0 && abs(it - lib_it) <= 1, "RCI iterations %d, library CG %d", it, lib_it);
  free(b), free(x), free(xref), free(xlib);
  problem_free(&P);
  PK_TEST_END();
}

PK_TEST_CASE(jacobi_spd_dense) {
  pkrylov_context ctx;
  pkrylov_operator A;
  PK_REQUIRE_OK(NULL, pkrylov_context_create(PKRYLOV_BACKEND_CPU, &ctx));
  PK_REQUIRE_OK(ctx, make_spd_csr(ctx, 157, 42, &A));
  int rc = dense_and_library_case(ctx, A, PC_JACOBI, PKRYLOV_PRECOND_JACOBI, 1e-10, 1e-8);
  pkrylov_operator_destroy(&A);
  pkrylov_context_destroy(&ctx);
  return rc;
}

PK_TEST_CASE(none_spd_dense) {
  pkrylov_context ctx;
  pkrylov_operator A;
  PK_REQUIRE_OK(NULL, pkrylov_context_create(PKRYLOV_BACKEND_CPU, &ctx));
  PK_REQUIRE_OK(ctx, make_spd_csr(ctx, 120, 5, &A));
  int rc = dense_and_library_case(ctx, A, PC_NONE, PKRYLOV_PRECOND_NONE, 1e-10, 1e-8);
  pkrylov_operator_destroy(&A);
  pkrylov_context_destroy(&ctx);
  return rc;
}

PK_TEST_CASE(column_thinshell_dense) {
  pkrylov_context ctx;
  pkrylov_operator A;
  PK_REQUIRE_OK(NULL, pkrylov_context_create(PKRYLOV_BACKEND_CPU, &ctx));
  PK_REQUIRE_OK(ctx, make_thinshell(ctx, 7, 6, 9, &A));
  /* rtol 1e-9 is near the attainable accuracy of the thin shell (see t300); error bound ~ 10 * relres */
  int rc = dense_and_library_case(ctx, A, PC_COLUMN, PKRYLOV_PRECOND_COLUMN, 1e-9, 1e-7);
  pkrylov_operator_destroy(&A);
  pkrylov_context_destroy(&ctx);
  return rc;
}

PK_TEST_CASE(jacobi_large) {
  /* n = 20000: the library's vector kernels run over several fixed chunks (in parallel with OpenMP) */
  pkrylov_context ctx;
  pkrylov_operator A;
  PK_REQUIRE_OK(NULL, pkrylov_context_create(PKRYLOV_BACKEND_CPU, &ctx));
  PK_REQUIRE_OK(ctx, make_spd_csr(ctx, 20000, 23, &A));
  problem P;
  PK_EXPECT(problem_init(&P, A, PC_JACOBI) == 0, "problem_init failed");
  const int32_t n = (int32_t)P.n;
  double *b = rand_vec(n, 29), *x = vec(n), *xlib = vec(n), *tmp = vec(4 * (int64_t)n);
  int32_t ipar[128], req, it = -1;
  double dpar[128];
  PK_EXPECT(setup(&P, x, b, 1e-10, ipar, dpar, tmp) == 0, "setup");
  PK_EXPECT(run_to_end(&P, x, b, ipar, dpar, tmp) == 0, "did not converge");
  pkrylov_dcg_get(&n, x, b, &req, ipar, dpar, tmp, &it);
  const double bn = pk_test_norm(n, b), r = sqrt(true_res2(&P, b, x));
  PK_EXPECT(r <= 1.5e-10 * bn, "true relative residual %.3e", r / bn);
  PK_EXPECT_NEAR(dpar[2], bn * bn, 1e-13 * bn * bn);
  const int lib_it = library_cg_iterations(ctx, A, PKRYLOV_PRECOND_JACOBI, 1e-10, b, xlib);
  PK_EXPECT(lib_it > 0 && abs(it - lib_it) <= 1, "RCI iterations %d, library CG %d", it, lib_it);
  PK_EXPECT(pk_test_rel_diff(n, x, xlib) < 1e-8, "RCI vs library: %.3e", pk_test_rel_diff(n, x, xlib));
  free(b), free(x), free(xlib), free(tmp);
  problem_free(&P);
  pkrylov_operator_destroy(&A);
  pkrylov_context_destroy(&ctx);
  PK_TEST_END();
}

/* ---- user stopping test, request sequence, iteration cap, resuming ---------------------------- */

PK_TEST_CASE(user_stopping_test) {
  pkrylov_context ctx;
  pkrylov_operator A;
  PK_REQUIRE_OK(NULL, pkrylov_context_create(PKRYLOV_BACKEND_CPU, &ctx));
  PK_REQUIRE_OK(ctx, make_thinshell(ctx, 6, 5, 8, &A));
  problem P;
  PK_EXPECT(problem_init(&P, A, PC_COLUMN) == 0, "problem_init failed");
  const int32_t n = (int32_t)P.n;
  double *b = rand_vec(n, 11), *x = vec(n), *tmp = vec(4 * (int64_t)n);
  int32_t ipar[128], req;
  double dpar[128];
  PK_EXPECT(setup(&P, x, b, 1e-8, ipar, dpar, tmp) == 0, "setup");
  ipar[8] = 0; /* ipar(9): no automatic residual test */
  ipar[9] = 1; /* ipar(10): user test */
  PK_EXPECT_CODE(NULL, pkrylov_dcg_check(&n, x, b, &req, ipar, dpar, tmp), PKRYLOV_SUCCESS);
  PK_EXPECT(req == 0, "dcg_check gave %d", req);
  /* expected sequence: 1 (A x0), then per iteration k = 0, 1, ...: 2 (test at ipar(4) = k), 3, 1 */
  const double bnorm = pk_test_norm(n, b);
  int expect = 1, tests = 0, stopped_at = -1;
  for (int step = 0; step < 10000 && stopped_at < 0; step++) {
    PK_EXPECT_CODE(NULL, pkrylov_dcg(&n, x, b, &req, ipar, dpar, tmp), PKRYLOV_SUCCESS);
    PK_EXPECT(req == expect, "step %d: request %d, expected %d", step, req, expect);
    if (req == 1) {
      matvec(&P, tmp, tmp + n);
      expect = 2;
    } else if (req == 2) {
      PK_EXPECT(ipar[3] == tests, "user test %d at ipar(4) = %d", tests, ipar[3]);
      /* the user's test on the current iterate: true relative residual <= 1e-8. dpar(5) is the recurrence
         residual: it follows the true one down to the attainable accuracy of the thin shell (~1e-9) */
      const double t = sqrt(true_res2(&P, b, x)) / bnorm;
      PK_EXPECT(fabs(sqrt(dpar[4]) / bnorm - t) <= 1e-6 * t + 5e-9, "dpar(5) %.3e vs true %.3e (it %d)",
                sqrt(dpar[4]) / bnorm, t, ipar[3]);
      tests++;
      if (t <= 1e-8) stopped_at = ipar[3];
      expect = 3;
    } else if (req == 3) {
      precond(&P, tmp + 2 * n, tmp + 3 * n);
      expect = 1;
    } else {
      break;
    }
  }
  PK_EXPECT(stopped_at > 0, "the user test never stopped the solve");
  int32_t it = -1;
  PK_EXPECT_CODE(NULL, pkrylov_dcg_get(&n, x, b, &req, ipar, dpar, tmp, &it), PKRYLOV_SUCCESS);
  PK_EXPECT(it == stopped_at && tests == stopped_at + 1, "itercount %d, stopped at %d after %d tests", it,
            stopped_at, tests);
  double *xref = vec(n);
  PK_EXPECT(pk_test_dense_solve(A, b, xref) == 0, "dense reference failed");
  PK_EXPECT(pk_test_rel_diff(n, x, xref) < 1e-6, "rel error %.3e", pk_test_rel_diff(n, x, xref));
  free(b), free(x), free(tmp), free(xref);
  problem_free(&P);
  pkrylov_operator_destroy(&A);
  pkrylov_context_destroy(&ctx);
  PK_TEST_END();
}

PK_TEST_CASE(max_iterations_then_resume) {
  pkrylov_context ctx;
  pkrylov_operator A;
  PK_REQUIRE_OK(NULL, pkrylov_context_create(PKRYLOV_BACKEND_CPU, &ctx));
  PK_REQUIRE_OK(ctx, make_spd_csr(ctx, 90, 3, &A));
  problem P;
  PK_EXPECT(problem_init(&P, A, PC_JACOBI) == 0, "problem_init failed");
  const int32_t n = (int32_t)P.n;
  double *b = rand_vec(n, 13), *x = vec(n), *xs = vec(n), *tmp = vec(4 * (int64_t)n);
  int32_t ipar[128], ipar_s[128], req, it = -1, it_s = -1;
  double dpar[128], dpar_s[128];
  /* reference: one uninterrupted solve */
  PK_EXPECT(setup(&P, xs, b, 1e-10, ipar_s, dpar_s, tmp) == 0, "setup");
  PK_EXPECT(run_to_end(&P, xs, b, ipar_s, dpar_s, tmp) == 0, "reference solve did not converge");
  pkrylov_dcg_get(&n, xs, b, &req, ipar_s, dpar_s, tmp, &it_s);
  /* capped at 5 iterations: -1 with ipar(4) = 5, twice; then resumed */
  PK_EXPECT(setup(&P, x, b, 1e-10, ipar, dpar, tmp) == 0, "setup");
  ipar[4] = 5;
  PK_EXPECT(run_to_end(&P, x, b, ipar, dpar, tmp) == -1, "expected -1 at the iteration cap");
  PK_EXPECT(ipar[3] == 5, "ipar(4) = %d after the cap", ipar[3]);
  PK_EXPECT(sqrt(true_res2(&P, b, x)) > 1e-10 * pk_test_norm(n, b), "converged already?");
  PK_EXPECT(run_to_end(&P, x, b, ipar, dpar, tmp) == -1 && ipar[3] == 5, "cap not kept");
  ipar[4] = 2000;
  PK_EXPECT(run_to_end(&P, x, b, ipar, dpar, tmp) == 0, "resumed solve did not converge");
  pkrylov_dcg_get(&n, x, b, &req, ipar, dpar, tmp, &it);
  PK_EXPECT(it == it_s, "resumed %d iterations, uninterrupted %d", it, it_s);
  PK_EXPECT(memcmp(x, xs, sizeof(double) * (size_t)n) == 0, "resumed solution differs from uninterrupted");
  /* restart with ipar(3) = 1 from the converged x with an absolute tolerance: done at iteration 0 */
  ipar[2] = 1;
  dpar[1] = 1e-16 * dpar[2]; /* dpar(2): absolute, squared */
  PK_EXPECT(run_to_end(&P, x, b, ipar, dpar, tmp) == 0 && ipar[3] == 0, "warm restart: ipar(4) = %d",
            ipar[3]);
  PK_EXPECT(memcmp(x, xs, sizeof(double) * (size_t)n) == 0, "warm restart changed x");
  /* zero right-hand side from x = 0: exactly zero residual, done at iteration 0 without a direction */
  double *zero = vec(n);
  memset(x, 0, sizeof(double) * (size_t)n);
  PK_EXPECT(setup(&P, x, zero, 1e-10, ipar, dpar, tmp) == 0, "setup");
  PK_EXPECT(run_to_end(&P, x, zero, ipar, dpar, tmp) == 0 && ipar[3] == 0 && dpar[2] == 0.0, "b = 0");
  PK_EXPECT(pk_test_norm(n, x) == 0.0, "x changed for b = 0");
  free(b), free(x), free(xs), free(tmp), free(zero);
  problem_free(&P);
  pkrylov_operator_destroy(&A);
  pkrylov_context_destroy(&ctx);
  PK_TEST_END();
}

/* ---- re-entrancy ------------------------------------------------------------------------------- */

/** One RCI solve's own state. */
typedef struct {
  const problem *P;
  const double *b;
  double *x, *tmp;
  int32_t ipar[128], req, done;
  double dpar[128];
} rci_state;

/** Advance s by one pkrylov_dcg call and serve its request. */
static void step(rci_state *s) {
  const int32_t n = (int32_t)s->P->n;
  pkrylov_dcg(&n, s->x, s->b, &s->req, s->ipar, s->dpar, s->tmp);
  if (s->req == 1)
    matvec(s->P, s->tmp, s->tmp + n);
  else if (s->req == 3)
    precond(s->P, s->tmp + 2 * n, s->tmp + 3 * n);
  else if (s->req != 2)
    s->done = 1;
}

PK_TEST_CASE(reentrant_interleaved) {
  pkrylov_context ctx;
  pkrylov_operator A1, A2;
  PK_REQUIRE_OK(NULL, pkrylov_context_create(PKRYLOV_BACKEND_CPU, &ctx));
  PK_REQUIRE_OK(ctx, make_spd_csr(ctx, 133, 9, &A1));
  PK_REQUIRE_OK(ctx, make_thinshell(ctx, 5, 6, 7, &A2));
  problem P1, P2;
  PK_EXPECT(problem_init(&P1, A1, PC_JACOBI) == 0 && problem_init(&P2, A2, PC_COLUMN) == 0, "problem_init");
  rci_state s[2], r[2]; /* interleaved, sequential */
  const problem *Ps[2] = {&P1, &P2};
  for (int k = 0; k < 2; k++) {
    for (int m = 0; m < 2; m++) {
      rci_state *t = m ? &r[k] : &s[k];
      memset(t, 0, sizeof *t);
      t->P = Ps[k];
      t->b = m ? s[k].b : rand_vec(Ps[k]->n, 100 + k);
      t->x = vec(Ps[k]->n);
      t->tmp = vec(4 * Ps[k]->n);
      PK_EXPECT(setup(Ps[k], t->x, t->b, 1e-9, t->ipar, t->dpar, t->tmp) == 0, "setup");
      t->ipar[9] = 1; /* also the user test (never satisfied), so request 2 is interleaved too */
    }
  }
  /* interleaved: one request of solve 0, one of solve 1, ... */
  for (int guard = 0; guard < 100000 && !(s[0].done && s[1].done); guard++)
    for (int k = 0; k < 2; k++)
      if (!s[k].done) step(&s[k]);
  /* sequential */
  for (int k = 0; k < 2; k++)
    for (int guard = 0; guard < 100000 && !r[k].done; guard++) step(&r[k]);
  for (int k = 0; k < 2; k++) {
    const size_t n = (size_t)Ps[k]->n;
    PK_EXPECT(s[k].req == 0 && r[k].req == 0, "solve %d ended with %d / %d", k, s[k].req, r[k].req);
    PK_EXPECT(memcmp(s[k].x, r[k].x, sizeof(double) * n) == 0, "solve %d: x differs", k);
    PK_EXPECT(memcmp(s[k].ipar, r[k].ipar, sizeof s[k].ipar) == 0, "solve %d: ipar differs", k);
    PK_EXPECT(memcmp(s[k].dpar, r[k].dpar, sizeof s[k].dpar) == 0, "solve %d: dpar differs", k);
    PK_EXPECT(s[k].ipar[3] > 3, "solve %d: only %d iterations", k, s[k].ipar[3]);
    free((double *)s[k].b), free(s[k].x), free(s[k].tmp), free(r[k].x), free(r[k].tmp);
  }
  problem_free(&P1), problem_free(&P2);
  pkrylov_operator_destroy(&A1), pkrylov_operator_destroy(&A2);
  pkrylov_context_destroy(&ctx);
  PK_TEST_END();
}

/** Thread body: run the solve in s to its end. */
static void *run_thread(void *arg) {
  rci_state *s = arg;
  for (int guard = 0; guard < 100000 && !s->done; guard++) step(s);
  return NULL;
}

PK_TEST_CASE(reentrant_threads) {
  /* four solves on four threads at once (two problems, two right-hand sides each) against the same
     solves run one after the other: no hidden shared state */
  pkrylov_context ctx;
  pkrylov_operator A1, A2;
  PK_REQUIRE_OK(NULL, pkrylov_context_create(PKRYLOV_BACKEND_CPU, &ctx));
  PK_REQUIRE_OK(ctx, make_spd_csr(ctx, 211, 17, &A1));
  PK_REQUIRE_OK(ctx, make_thinshell(ctx, 6, 6, 8, &A2));
  problem P[4];
  PK_EXPECT(problem_init(&P[0], A1, PC_JACOBI) == 0 && problem_init(&P[1], A1, PC_NONE) == 0 &&
                problem_init(&P[2], A2, PC_COLUMN) == 0 && problem_init(&P[3], A2, PC_COLUMN) == 0,
            "problem_init"); /* one problem copy per thread: the column scratch is per problem */
  rci_state *s = calloc(8, sizeof *s); /* 0..3 threaded, 4..7 sequential */
  for (int k = 0; k < 8; k++) {
    s[k].P = &P[k % 4];
    s[k].b = k < 4 ? rand_vec(P[k].n, 200 + k) : s[k - 4].b;
    s[k].x = vec(P[k % 4].n);
    s[k].tmp = vec(4 * P[k % 4].n);
    PK_EXPECT(setup(s[k].P, s[k].x, s[k].b, 1e-9, s[k].ipar, s[k].dpar, s[k].tmp) == 0, "setup");
  }
  for (int k = 4; k < 8; k++) run_thread(&s[k]);
  pthread_t th[4];
  int started[4] = {0};
  for (int k = 0; k < 4; k++) started[k] = pthread_create(&th[k], NULL, run_thread, &s[k]) == 0;
  for (int k = 0; k < 4; k++)
    if (started[k]) pthread_join(th[k], NULL);
  for (int k = 0; k < 4; k++) {
    PK_EXPECT(started[k], "thread %d did not start", k);
    PK_EXPECT(s[k].req == 0 && s[k + 4].req == 0, "solve %d ended with %d / %d", k, s[k].req, s[k + 4].req);
    PK_EXPECT(memcmp(s[k].x, s[k + 4].x, sizeof(double) * (size_t)P[k].n) == 0, "solve %d: x differs", k);
    PK_EXPECT(s[k].ipar[3] == s[k + 4].ipar[3], "solve %d: iterations differ", k);
  }
  for (int k = 0; k < 8; k++) {
    if (k < 4) free((double *)s[k].b);
    free(s[k].x), free(s[k].tmp);
  }
  free(s);
  for (int k = 0; k < 4; k++) problem_free(&P[k]);
  pkrylov_operator_destroy(&A1), pkrylov_operator_destroy(&A2);
  pkrylov_context_destroy(&ctx);
  PK_TEST_END();
}

/* ---- errors and MKL codes ---------------------------------------------------------------------- */

PK_TEST_CASE(init_errors) {
  int32_t ipar[128], req = 99, n = 0;
  double dpar[128], x[4] = {0}, b[4] = {1, 1, 1, 1}, tmp[16];
  PK_EXPECT_CODE(NULL, pkrylov_dcg_init(&n, x, b, &req, ipar, dpar, tmp), PKRYLOV_ERR_INVALID_SIZE);
  PK_EXPECT(req == -10000 && pk_test_msg_has(NULL, "'n' = 0"), "n = 0: RCI_request %d", req);
  n = -3, req = 99;
  PK_EXPECT_CODE(NULL, pkrylov_dcg_init(&n, x, b, &req, ipar, dpar, tmp), PKRYLOV_ERR_INVALID_SIZE);
  PK_EXPECT(req == -10000 && pk_test_msg_has(NULL, "'n' = -3"), "n = -3: RCI_request %d", req);
  n = 4, req = 99;
  PK_EXPECT_CODE(NULL, pkrylov_dcg_init(&n, x, b, &req, NULL, dpar, tmp), PKRYLOV_ERR_NULL_POINTER);
  PK_EXPECT(req == -10000 && pk_test_msg_has(NULL, "'ipar'"), "NULL ipar: RCI_request %d", req);
  PK_EXPECT_CODE(NULL, pkrylov_dcg_init(NULL, x, b, &req, ipar, dpar, tmp), PKRYLOV_ERR_NULL_POINTER);
  PK_EXPECT_CODE(NULL, pkrylov_dcg_init(&n, x, b, NULL, ipar, dpar, tmp), PKRYLOV_ERR_NULL_POINTER);
  PK_EXPECT(pk_test_msg_has(NULL, "'rci_request'"), "message");
  /* the documented defaults */
  for (int i = 0; i < 16; i++) tmp[i] = 7.0;
  PK_EXPECT_CODE(NULL, pkrylov_dcg_init(&n, x, b, &req, ipar, dpar, tmp), PKRYLOV_SUCCESS);
  PK_EXPECT(req == 0, "RCI_request %d", req);
  const int32_t want[11] = {4, 6, 1, 0, 4, 1, 1, 1, 0, 1, 0}; /* ipar(5) = min(150, n) */
  for (int i = 0; i < 11; i++)
    PK_EXPECT(ipar[i] == want[i], "ipar(%d) = %d, expected %d", i + 1, ipar[i], want[i]);
  PK_EXPECT(dpar[0] == 1e-6 && dpar[1] == 0.0, "dpar(1:2) = %g %g", dpar[0], dpar[1]);
  for (int i = 2; i < 8; i++) PK_EXPECT(dpar[i] == 0.0, "dpar(%d) = %g", i + 1, dpar[i]);
  for (int i = 0; i < 16; i++) PK_EXPECT(tmp[i] == 0.0, "tmp not zeroed");
  n = 1000;
  double *t2 = vec(4000), *x2 = vec(1000);
  PK_EXPECT_CODE(NULL, pkrylov_dcg_init(&n, x2, x2, &req, ipar, dpar, t2), PKRYLOV_SUCCESS);
  PK_EXPECT(ipar[4] == 150, "ipar(5) = %d for n = 1000", ipar[4]);
  free(t2), free(x2);
  PK_TEST_END();
}

/** 2x2 problem A = diag(d0, d1) for the error and breakdown cases. */
static void diag2(const double *d, const double *x, double *y) { y[0] = d[0] * x[0], y[1] = d[1] * x[1]; }

PK_TEST_CASE(dcg_errors) {
  int32_t ipar[128], ipar0[128], req, n = 2, other = 3;
  double dpar[128], dpar0[128], x[2] = {0.5, -0.25}, x0[2], b[2] = {1, 2}, tmp[8];
  memcpy(x0, x, sizeof x);
  /* before pkrylov_dcg_init: -11, nothing touched */
  memset(ipar, 0, sizeof ipar), memset(dpar, 0, sizeof dpar);
  req = 99;
  PK_EXPECT_CODE(NULL, pkrylov_dcg(&n, x, b, &req, ipar, dpar, tmp), PKRYLOV_ERR_INVALID_STATE);
  PK_EXPECT(req == -11 && pk_test_msg_has(NULL, "pkrylov_dcg_init"), "before init: %d", req);
  PK_EXPECT(memcmp(x, x0, sizeof x) == 0 && ipar[2] == 0, "modified before init");
  int32_t it = 77;
  PK_EXPECT_CODE(NULL, pkrylov_dcg_get(&n, x, b, &req, ipar, dpar, tmp, &it), PKRYLOV_ERR_INVALID_STATE);
  PK_EXPECT(it == 77 && pk_test_msg_has(NULL, "'ipar'"), "dcg_get before init");
  PK_EXPECT_CODE(NULL, pkrylov_dcg(&n, x, b, NULL, ipar, dpar, tmp), PKRYLOV_ERR_NULL_POINTER);

  PK_EXPECT_CODE(NULL, pkrylov_dcg_init(&n, x, b, &req, ipar, dpar, tmp), PKRYLOV_SUCCESS);
  ipar[5] = ipar[6] = 0; /* silent */
  memcpy(ipar0, ipar, sizeof ipar), memcpy(dpar0, dpar, sizeof dpar);
  /* each bad input: its MKL code, the pkrylov code, a message naming it, nothing modified */
  struct {
    int idx_i, val_i, idx_d;
    double val_d;
    int32_t *np;
    int32_t mkl;
    int code;
    const char *needle;
  } bad[] = {
      {-1, 0, -1, 0, &other, -11, PKRYLOV_ERR_SIZE_MISMATCH, "'n' = 3"},
      {0, 5, -1, 0, &n, -11, PKRYLOV_ERR_SIZE_MISMATCH, "ipar(1) = 5"},
      {2, 42, -1, 0, &n, -11, PKRYLOV_ERR_INVALID_STATE, "ipar(3) = 42"},
      {3, -1, -1, 0, &n, -11, PKRYLOV_ERR_INVALID_VALUE, "ipar(4) = -1"},
      {4, -2, -1, 0, &n, -11, PKRYLOV_ERR_INVALID_VALUE, "ipar(5) = -2"},
      {-1, 0, 0, -1e-3, &n, -10, PKRYLOV_ERR_INVALID_VALUE, "dpar(1)"},
      {-1, 0, 1, NAN, &n, -10, PKRYLOV_ERR_INVALID_VALUE, "dpar(2)"},
  };
  for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
    if (bad[k].idx_i >= 0) ipar[bad[k].idx_i] = bad[k].val_i;
    if (bad[k].idx_d >= 0) dpar[bad[k].idx_d] = bad[k].val_d;
    int32_t ipar1[128];
    double dpar1[128];
    memcpy(ipar1, ipar, sizeof ipar), memcpy(dpar1, dpar, sizeof dpar);
    req = 99;
    PK_EXPECT_CODE(NULL, pkrylov_dcg(bad[k].np, x, b, &req, ipar, dpar, tmp), bad[k].code);
    PK_EXPECT(req == bad[k].mkl, "case %zu: RCI_request %d, expected %d", k, req, bad[k].mkl);
    PK_EXPECT(pk_test_msg_has(NULL, bad[k].needle), "case %zu", k);
    PK_EXPECT(memcmp(ipar, ipar1, sizeof ipar) == 0 && memcmp(x, x0, sizeof x) == 0, "case %zu modified", k);
    memcpy(ipar, ipar0, sizeof ipar), memcpy(dpar, dpar0, sizeof dpar);
  }
  /* no stopping test at all: dcg refuses (-11), dcg_check would fix it */
  ipar[7] = ipar[8] = ipar[9] = 0;
  PK_EXPECT_CODE(NULL, pkrylov_dcg(&n, x, b, &req, ipar, dpar, tmp), PKRYLOV_ERR_INVALID_VALUE);
  PK_EXPECT(req == -11 && pk_test_msg_has(NULL, "ipar(8), ipar(9) and ipar(10)"), "no test: %d", req);
  memcpy(ipar, ipar0, sizeof ipar);
  /* a stored squared norm altered mid-solve: -10 */
  const double d[2] = {2.0, 3.0};
  PK_EXPECT_CODE(NULL, pkrylov_dcg(&n, x, b, &req, ipar, dpar, tmp), PKRYLOV_SUCCESS);
  PK_EXPECT(req == 1, "request %d", req);
  diag2(d, tmp, tmp + 2);
  PK_EXPECT_CODE(NULL, pkrylov_dcg(&n, x, b, &req, ipar, dpar, tmp), PKRYLOV_SUCCESS);
  PK_EXPECT(req == 2, "request %d (user test at iteration 0)", req);
  dpar[4] = NAN;
  PK_EXPECT_CODE(NULL, pkrylov_dcg(&n, x, b, &req, ipar, dpar, tmp), PKRYLOV_ERR_INVALID_VALUE);
  PK_EXPECT(req == -10 && pk_test_msg_has(NULL, "dpar(5)"), "altered dpar(5): %d", req);
  /* NaN in b: the initial residual is not finite: -10 */
  double bnan[2] = {NAN, 1.0};
  PK_EXPECT_CODE(NULL, pkrylov_dcg_init(&n, x, bnan, &req, ipar, dpar, tmp), PKRYLOV_SUCCESS);
  ipar[5] = 0;
  PK_EXPECT_CODE(NULL, pkrylov_dcg(&n, x, bnan, &req, ipar, dpar, tmp), PKRYLOV_SUCCESS);
  diag2(d, tmp, tmp + 2);
  PK_EXPECT_CODE(NULL, pkrylov_dcg(&n, x, bnan, &req, ipar, dpar, tmp), PKRYLOV_ERR_NOT_FINITE);
  PK_EXPECT(req == -10 && pk_test_msg_has(NULL, "NaN"), "NaN in b: %d", req);
  PK_TEST_END();
}

PK_TEST_CASE(check_codes) {
  int32_t ipar[128], ipar0[128], req, n = 3;
  double dpar[128], dpar0[128], x[3] = {0}, b[3] = {1, 2, 3}, tmp[12];
  memset(ipar, 0, sizeof ipar), memset(dpar, 0, sizeof dpar);
  PK_EXPECT_CODE(NULL, pkrylov_dcg_check(&n, x, b, &req, ipar, dpar, tmp), PKRYLOV_ERR_INVALID_STATE);
  PK_EXPECT(req == -1100 && pk_test_msg_has(NULL, "pkrylov_dcg_init"), "before init: %d", req);
  PK_EXPECT_CODE(NULL, pkrylov_dcg_init(&n, x, b, &req, ipar, dpar, tmp), PKRYLOV_SUCCESS);
  ipar[5] = ipar[6] = 0; /* silent */
  memcpy(ipar0, ipar, sizeof ipar), memcpy(dpar0, dpar, sizeof dpar);
  PK_EXPECT_CODE(NULL, pkrylov_dcg_check(&n, x, b, &req, ipar, dpar, tmp), PKRYLOV_SUCCESS);
  PK_EXPECT(req == 0, "defaults: %d", req);
  /* errors: -1100, nothing changed */
  ipar[0] = 4;
  PK_EXPECT_CODE(NULL, pkrylov_dcg_check(&n, x, b, &req, ipar, dpar, tmp), PKRYLOV_ERR_SIZE_MISMATCH);
  PK_EXPECT(req == -1100 && pk_test_msg_has(NULL, "ipar(1) = 4") && ipar[0] == 4, "ipar(1): %d", req);
  memcpy(ipar, ipar0, sizeof ipar);
  dpar[1] = -1.0;
  PK_EXPECT_CODE(NULL, pkrylov_dcg_check(&n, x, b, &req, ipar, dpar, tmp), PKRYLOV_ERR_INVALID_VALUE);
  PK_EXPECT(req == -1100 && pk_test_msg_has(NULL, "dpar(2) = -1"), "dpar(2): %d", req);
  memcpy(dpar, dpar0, sizeof dpar);
  b[1] = INFINITY;
  PK_EXPECT_CODE(NULL, pkrylov_dcg_check(&n, x, b, &req, ipar, dpar, tmp), PKRYLOV_ERR_NOT_FINITE);
  PK_EXPECT(req == -1100 && pk_test_msg_has(NULL, "'b'") && pk_test_msg_has(NULL, "index 2"), "b: %d", req);
  b[1] = 2.0;
  int32_t bad_n = -1;
  PK_EXPECT_CODE(NULL, pkrylov_dcg_check(&bad_n, x, b, &req, ipar, dpar, tmp), PKRYLOV_ERR_INVALID_SIZE);
  PK_EXPECT(req == -1100 && pk_test_msg_has(NULL, "'n' = -1"), "n: %d", req);
  /* fixed: no stopping test -> ipar(8) = ipar(9) = 1, -1010 */
  ipar[7] = ipar[8] = ipar[9] = 0;
  dpar[0] = 1e-12;
  PK_EXPECT_CODE(NULL, pkrylov_dcg_check(&n, x, b, &req, ipar, dpar, tmp), PKRYLOV_SUCCESS);
  PK_EXPECT(req == -1010 && ipar[7] == 1 && ipar[8] == 1 && ipar[9] == 0, "fix: %d", req);
  /* warning only: residual test with both tolerances 0, -1001, nothing changed */
  memcpy(ipar, ipar0, sizeof ipar), memcpy(dpar, dpar0, sizeof dpar);
  ipar[8] = 1, dpar[0] = 0.0;
  memcpy(ipar0, ipar, sizeof ipar);
  PK_EXPECT_CODE(NULL, pkrylov_dcg_check(&n, x, b, &req, ipar, dpar, tmp), PKRYLOV_SUCCESS);
  PK_EXPECT(req == -1001 && memcmp(ipar, ipar0, sizeof ipar) == 0, "warning: %d", req);
  /* both: -1011 */
  ipar[7] = ipar[8] = ipar[9] = 0;
  PK_EXPECT_CODE(NULL, pkrylov_dcg_check(&n, x, b, &req, ipar, dpar, tmp), PKRYLOV_SUCCESS);
  PK_EXPECT(req == -1011, "fixed + warning: %d", req);
  PK_TEST_END();
}

PK_TEST_CASE(messages_to_log_file) {
  /* ipar(2) != 6 sends messages to pkrylov_rci_cg.log in the working directory */
  char cwd[4096];
  PK_EXPECT(getcwd(cwd, sizeof cwd) != NULL, "getcwd");
  PK_EXPECT(chdir(PK_TEST_TMPDIR) == 0, "chdir");
  remove("pkrylov_rci_cg.log");
  int32_t ipar[128], req, n = 3;
  double dpar[128], x[3] = {0}, b[3] = {1, 2, 3}, tmp[12];
  PK_EXPECT_CODE(NULL, pkrylov_dcg_init(&n, x, b, &req, ipar, dpar, tmp), PKRYLOV_SUCCESS);
  ipar[1] = 17; /* not 6: log file */
  ipar[8] = 1;  /* ipar(9): the residual test, so that dpar(1) >= 1 is worth a warning */
  dpar[0] = -5.0;
  PK_EXPECT_CODE(NULL, pkrylov_dcg_check(&n, x, b, &req, ipar, dpar, tmp), PKRYLOV_ERR_INVALID_VALUE);
  dpar[0] = 2.0; /* a warning */
  PK_EXPECT_CODE(NULL, pkrylov_dcg_check(&n, x, b, &req, ipar, dpar, tmp), PKRYLOV_SUCCESS);
  ipar[6] = 0; /* warnings off: not logged */
  dpar[0] = 3.0;
  PK_EXPECT_CODE(NULL, pkrylov_dcg_check(&n, x, b, &req, ipar, dpar, tmp), PKRYLOV_SUCCESS);
  char text[4096] = "";
  FILE *f = fopen("pkrylov_rci_cg.log", "r");
  PK_EXPECT(f != NULL, "no log file");
  if (f) {
    size_t len = fread(text, 1, sizeof text - 1, f);
    text[len] = '\0';
    fclose(f);
  }
  PK_EXPECT(strstr(text, "error") && strstr(text, "dpar(1) = -5") && strstr(text, "-1100"), "log: %s", text);
  PK_EXPECT(strstr(text, "warning") && strstr(text, "dpar(1) = 2"), "log: %s", text);
  PK_EXPECT(!strstr(text, "dpar(1) = 3"), "a warning was logged with ipar(7) = 0: %s", text);
  remove("pkrylov_rci_cg.log");
  PK_EXPECT(chdir(cwd) == 0, "chdir back");
  PK_TEST_END();
}

PK_TEST_CASE(breakdown_indefinite) {
  /* A = diag(1, -1), b = (1, 1), x0 = 0: p = r0 = b, (p, A p) = 0: -2, and -2 again on every later call */
  const double d[2] = {1.0, -1.0};
  int32_t ipar[128], req, n = 2;
  double dpar[128], x[2] = {0, 0}, b[2] = {1, 1}, tmp[8];
  PK_EXPECT_CODE(NULL, pkrylov_dcg_init(&n, x, b, &req, ipar, dpar, tmp), PKRYLOV_SUCCESS);
  ipar[5] = ipar[6] = 0;
  ipar[8] = 1, ipar[9] = 0, dpar[0] = 1e-20;
  for (int k = 0; k < 10; k++) {
    PK_EXPECT_CODE(NULL, pkrylov_dcg(&n, x, b, &req, ipar, dpar, tmp), PKRYLOV_SUCCESS);
    if (req != 1) break;
    diag2(d, tmp, tmp + 2);
  }
  PK_EXPECT(req == -2 && pk_test_msg_has(NULL, "(p, A p)"), "RCI_request %d", req);
  PK_EXPECT(x[0] == 0.0 && x[1] == 0.0 && ipar[3] == 0, "x or ipar(4) changed at the breakdown");
  PK_EXPECT_CODE(NULL, pkrylov_dcg(&n, x, b, &req, ipar, dpar, tmp), PKRYLOV_SUCCESS);
  PK_EXPECT(req == -2, "second call: %d", req);
  PK_TEST_END();
}

/**
 * Issue 14 item 18: a negative definite operator, as ocean models store the pressure operator (here -A for a
 * random SPD A): (p, A p) < 0 throughout, and with the Jacobi preconditioner of that operator (r, M^-1 r) < 0
 * too. pk_dcg solves it as the library's CG does: converged (0), the solution against the dense solve, the
 * iterations within one of pkrylov_solver_solve's CG with the same preconditioner on the same operator, and
 * alpha = dpar(7) of the sign (r, z) / (p, A p) gives.
 */
PK_TEST_CASE(negative_definite) {
  pkrylov_context ctx;
  PK_REQUIRE_OK(NULL, pkrylov_context_create(PKRYLOV_BACKEND_CPU, &ctx));
  pkrylov_operator Apos, Aneg;
  PK_REQUIRE_OK(ctx, make_spd_csr(ctx, 80, 23, &Apos));
  problem P;
  PK_REQUIRE(problem_init(&P, Apos, PC_NONE) == 0, "problem_init");
  const int64_t n = P.n, nnz = P.rp[n];
  for (int64_t k = 0; k < nnz; k++) P.v[k] = -P.v[k];
  for (int64_t i = 0; i < n; i++) P.diag[i] = -P.diag[i];
  PK_REQUIRE_OK(ctx, pkrylov_operator_create_csr64(ctx, n, 0, P.rp, P.ci, P.v, &Aneg));
  double *b = rand_vec(n, 5), *x = vec(n), *xref = vec(n), *xlib = vec(n);
  PK_REQUIRE(pk_test_dense_solve(Aneg, b, xref) == 0, "dense solve");
  int32_t ipar[128], dpar_ok = 1;
  double dpar[128], *tmp = vec(4 * n);
  for (int pc = PC_NONE; pc <= PC_JACOBI; pc++) {
    P.pc = pc;
    memset(x, 0, sizeof(double) * (size_t)n);
    PK_REQUIRE(setup(&P, x, b, 1e-10, ipar, dpar, tmp) == 0, "setup");
    const int32_t req = run_to_end(&P, x, b, ipar, dpar, tmp);
    PK_EXPECT(req == 0, "pc %d: RCI_request %d after %d iterations: %s", pc, req, ipar[3],
              pkrylov_last_error_message());
    PK_EXPECT(pk_test_rel_diff(n, x, xref) < 1e-7, "pc %d: error %.3e against the dense solve", pc,
              pk_test_rel_diff(n, x, xref));
    const int lib = library_cg_iterations(
        ctx, Aneg, pc == PC_JACOBI ? PKRYLOV_PRECOND_JACOBI : PKRYLOV_PRECOND_NONE, 1e-10, b, xlib);
    PK_EXPECT(lib > 0 && abs(ipar[3] - lib) <= 1, "pc %d: %d iterations, the library's CG %d", pc, ipar[3],
              lib);
    /* (r, z) > 0 and (p, A p) < 0 without preconditioner; both < 0 with the Jacobi of the negative operator
     */
    dpar_ok &= pc == PC_NONE ? dpar[6] < 0 : dpar[6] > 0;
    PK_EXPECT(dpar_ok, "pc %d: alpha = dpar(7) = %g", pc, dpar[6]);
  }
  free(b), free(x), free(xref), free(xlib), free(tmp);
  problem_free(&P);
  pkrylov_operator_destroy(&Aneg);
  pkrylov_operator_destroy(&Apos);
  pkrylov_context_destroy(&ctx);
  PK_TEST_END();
}

/**
 * A sign that changes after the first iteration is still a breakdown (-2), for (p, A p) (A = diag(3, -1),
 * b = (1, 1): (p, A p) = 2, then -24) and for (r, M^-1 r) (A = I, M^-1 = diag(1, -1), b = (2, 1): (r, z) = 3,
 * then -1.92); x keeps the first iterate.
 */
PK_TEST_CASE(sign_change_breakdown) {
  for (int which = 0; which < 2; which++) {
    const double d[2] = {which == 0 ? 3.0 : 1.0, which == 0 ? -1.0 : 1.0}, minv[2] = {1.0, -1.0};
    int32_t ipar[128], req, n = 2;
    double dpar[128], x[2] = {0, 0}, b[2] = {which == 0 ? 1.0 : 2.0, 1.0}, tmp[8];
    PK_EXPECT_CODE(NULL, pkrylov_dcg_init(&n, x, b, &req, ipar, dpar, tmp), PKRYLOV_SUCCESS);
    ipar[5] = ipar[6] = 0;
    ipar[8] = 1, ipar[9] = 0, ipar[10] = which, dpar[0] = 1e-20;
    for (int k = 0; k < 20; k++) {
      PK_EXPECT_CODE(NULL, pkrylov_dcg(&n, x, b, &req, ipar, dpar, tmp), PKRYLOV_SUCCESS);
      if (req == 1)
        diag2(d, tmp, tmp + 2);
      else if (req == 3)
        diag2(minv, tmp + 4, tmp + 6);
      else
        break;
    }
    PK_EXPECT(req == -2 && ipar[3] == 1 && pk_test_msg_has(NULL, which == 0 ? "(p, A p)" : "(r, M^-1 r)"),
              "case %d: RCI_request %d at iteration %d: %s", which, req, ipar[3],
              pkrylov_last_error_message());
    /* the first iterate: alpha = 1 (case 0), 3/5 (case 1) times p = b (case 0), z = (2, -1) (case 1) */
    const double xe[2] = {which == 0 ? 1.0 : 1.2, which == 0 ? 1.0 : -0.6};
    PK_EXPECT(fabs(x[0] - xe[0]) < 1e-15 && fabs(x[1] - xe[1]) < 1e-15, "case %d: x = %g %g", which, x[0],
              x[1]);
  }
  PK_TEST_END();
}

/**
 * Issue 14 item 12: ipar(4) = 2^31 - 1 (the iteration count at its limit) at any request: the next
 * iteration could not be counted (signed overflow, undefined behaviour): -11, nothing written.
 */
PK_TEST_CASE(iteration_count_limit) {
  const double d[2] = {2.0, 3.0};
  int32_t ipar[128], req, n = 2;
  double dpar[128], x[2] = {0.5, -0.25}, b[2] = {1, 2}, tmp[8];
  PK_EXPECT_CODE(NULL, pkrylov_dcg_init(&n, x, b, &req, ipar, dpar, tmp), PKRYLOV_SUCCESS);
  ipar[5] = ipar[6] = 0;
  ipar[4] = 100, ipar[9] = 0, ipar[10] = 1;
  int seen = 0;
  for (int k = 0; k < 40; k++) {
    /* every stage the call is made in: start, A x0, M^-1 r, A p */
    int32_t ipar1[128], r2 = 99;
    double dpar1[128], x1[2], tmp1[8];
    memcpy(ipar1, ipar, sizeof ipar), memcpy(dpar1, dpar, sizeof dpar), memcpy(x1, x, sizeof x);
    memcpy(tmp1, tmp, sizeof tmp);
    ipar[3] = INT32_MAX;
    PK_EXPECT_CODE(NULL, pkrylov_dcg(&n, x, b, &r2, ipar, dpar, tmp), PKRYLOV_ERR_INVALID_VALUE);
    PK_EXPECT(r2 == -11 && pk_test_msg_has(NULL, "ipar(4) = 2147483647"), "stage %d: %d", ipar1[2], r2);
    PK_EXPECT(memcmp(dpar, dpar1, sizeof dpar) == 0 && memcmp(x, x1, sizeof x) == 0 &&
                  memcmp(tmp, tmp1, sizeof tmp) == 0 && ipar[3] == INT32_MAX,
              "stage %d: written", ipar1[2]);
    memcpy(ipar, ipar1, sizeof ipar);
    seen |= 1 << ipar[2];
    PK_EXPECT_CODE(NULL, pkrylov_dcg(&n, x, b, &req, ipar, dpar, tmp), PKRYLOV_SUCCESS);
    if (req == 1)
      diag2(d, tmp, tmp + 2);
    else if (req == 3)
      memcpy(tmp + 6, tmp + 4, 2 * sizeof(double));
    else
      break;
  }
  PK_EXPECT(req == 0 && seen == (1 << 1 | 1 << 2 | 1 << 3 | 1 << 4), "outcome %d, stages seen %#x", req,
            seen);
  /* dcg_get only reads: the count at its limit is reported */
  int32_t it = 0;
  ipar[3] = INT32_MAX;
  PK_EXPECT_CODE(NULL, pkrylov_dcg_get(&n, x, b, &req, ipar, dpar, tmp, &it), PKRYLOV_SUCCESS);
  PK_EXPECT(it == INT32_MAX, "itercount %d", it);
  PK_TEST_END();
}

PK_TEST_MAIN(PK_TEST_ENTRY(jacobi_spd_dense), PK_TEST_ENTRY(none_spd_dense),
             PK_TEST_ENTRY(column_thinshell_dense), PK_TEST_ENTRY(jacobi_large),
             PK_TEST_ENTRY(user_stopping_test), PK_TEST_ENTRY(max_iterations_then_resume),
             PK_TEST_ENTRY(reentrant_interleaved), PK_TEST_ENTRY(reentrant_threads),
             PK_TEST_ENTRY(init_errors), PK_TEST_ENTRY(dcg_errors), PK_TEST_ENTRY(check_codes),
             PK_TEST_ENTRY(messages_to_log_file), PK_TEST_ENTRY(breakdown_indefinite),
             PK_TEST_ENTRY(negative_definite), PK_TEST_ENTRY(sign_change_breakdown),
             PK_TEST_ENTRY(iteration_count_limit))

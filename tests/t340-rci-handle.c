/**
 * @file t340-rci-handle.c
 * @brief Handle-based reverse communication (pkrylov_rci_*): the loop driven with a CSR matvec and a Jacobi
 *        preconditioner written here, the "global sum" done by the test (identity on one process); solutions
 *        against a dense LAPACK solve, iteration counts against pkrylov_solver_* on the same matrix (within
 *        one: the test's Jacobi divides where the library multiplies by 1/d; t341 compares CG and pipelined
 *        CG bitwise with the library's arithmetic), the request order of pipelined CG, bad input and a
 *        breakdown.
 *
 * PK_TEST_BACKENDS: cpu cuda (pk_test.h). With host vectors a CUDA context runs the same host loop (device
 * vectors: t711); the library solves compared with run on the context's backend. On a CUDA context
 * bad_input also checks that the types other than CG and pipelined CG are refused (PKRYLOV_ERR_UNSUPPORTED).
 */
#include <string.h>

#include "pk_test.h"

/** A CSR matrix owned by the test, 0-based. */
typedef struct {
  int32_t n;
  int32_t *rowptr, *colind;
  double *val;
} csr;

/**
 * 2D 5-point operator on an m x m grid with variable face coefficients k in [1, 10] and a variable
 * diagonal shift in [0, 5): SPD with a diagonal that varies (Jacobi matters). sign -1: negative definite.
 */
static csr make_matrix(int m, double sign) {
  csr A;
  A.n = m * m;
  A.rowptr = malloc(sizeof(int32_t) * (size_t)(A.n + 1));
  A.colind = malloc(sizeof(int32_t) * (size_t)A.n * 5);
  A.val = malloc(sizeof(double) * (size_t)A.n * 5);
  uint64_t seed = 42;
  double *kx = malloc(sizeof(double) * (size_t)(m + 1) * (size_t)m), *ky = malloc(sizeof(double) * (size_t)(m + 1) * (size_t)m);
  for (int i = 0; i < (m + 1) * m; i++) {
    kx[i] = 5.5 + 4.5 * pk_test_rand(&seed);
    ky[i] = 5.5 + 4.5 * pk_test_rand(&seed);
  }
  int32_t nz = 0;
  for (int j = 0; j < m; j++)
    for (int i = 0; i < m; i++) {
      const int row = i + m * j;
      A.rowptr[row] = nz;
      /* faces: west kx[i + (m+1) j], east kx[i+1 + (m+1) j], south ky[j + (m+1) i], north ky[j+1 + (m+1) i] */
      const double w = kx[i + (m + 1) * j], e = kx[i + 1 + (m + 1) * j];
      const double s = ky[j + (m + 1) * i], nn = ky[j + 1 + (m + 1) * i];
      const double diag = w + e + s + nn + 2.5 + 2.5 * pk_test_rand(&seed);
      if (j > 0) A.colind[nz] = row - m, A.val[nz++] = -sign * s;
      if (i > 0) A.colind[nz] = row - 1, A.val[nz++] = -sign * w;
      A.colind[nz] = row, A.val[nz++] = sign * diag;
      if (i < m - 1) A.colind[nz] = row + 1, A.val[nz++] = -sign * e;
      if (j < m - 1) A.colind[nz] = row + m, A.val[nz++] = -sign * nn;
    }
  A.rowptr[A.n] = nz;
  /* symmetric: the coupling of row and neighbour uses the shared face value */
  free(kx);
  free(ky);
  return A;
}

static void free_matrix(csr *A) {
  free(A->rowptr);
  free(A->colind);
  free(A->val);
}

/** y = A x, plain CSR loop. */
static void matvec(const csr *A, const double *x, double *y) {
  for (int32_t i = 0; i < A->n; i++) {
    double s = 0.0;
    for (int32_t k = A->rowptr[i]; k < A->rowptr[i + 1]; k++) s += A->val[k] * x[A->colind[k]];
    y[i] = s;
  }
}

/** y = D^-1 x (Jacobi). */
static void jacobi(const csr *A, const double *x, double *y) {
  for (int32_t i = 0; i < A->n; i++)
    for (int32_t k = A->rowptr[i]; k < A->rowptr[i + 1]; k++)
      if (A->colind[k] == i) y[i] = x[i] / A->val[k];
}

/** Requests of one solve, recorded in order. */
typedef struct {
  int32_t req[20000];
  int32_t npart[20000];
  double *in[20000], *out[20000];
  int len;
  int bad; /* a request broke the protocol (operand NULL, in == out, unknown request) */
} trace;

/** Drive the rci loop to DONE; returns the status of the first failing call. */
static int drive(pkrylov_rci r, const csr *A, const double *b, double *x, int32_t x_nonzero, trace *tr) {
  int ierr = pkrylov_rci_start(r, PKRYLOV_MEM_HOST, b, x, x_nonzero);
  if (ierr) return ierr;
  tr->len = 0;
  tr->bad = 0;
  for (;;) {
    int32_t req, np;
    double *in, *out, *part;
    if ((ierr = pkrylov_rci_step(r, &req, &in, &out, &part, &np))) return ierr;
    if (tr->len < 20000) {
      tr->req[tr->len] = req;
      tr->npart[tr->len] = np;
      tr->in[tr->len] = in;
      tr->out[tr->len] = out;
      tr->len++;
    }
    if (req == PKRYLOV_RCI_DONE) return 0;
    if (req == PKRYLOV_RCI_MATVEC || req == PKRYLOV_RCI_PRECOND) {
      if (!in || !out || in == out) {
        tr->bad = 1;
        return -1;
      }
      if (req == PKRYLOV_RCI_MATVEC)
        matvec(A, in, out);
      else
        jacobi(A, in, out);
    } else if (req == PKRYLOV_RCI_REDUCE_START || req == PKRYLOV_RCI_REDUCE_WAIT) {
      if (!part || np < 1 || np > 4) tr->bad = 1; /* one process: the global sum is the identity */
    } else {
      tr->bad = 1;
      return -1;
    }
  }
}

/** Count of request q in the trace. */
static int count(const trace *tr, int32_t q) {
  int c = 0;
  for (int i = 0; i < tr->len; i++) c += tr->req[i] == q;
  return c;
}

/** The same problem through pkrylov_solver_*: its result (x discarded). */
static int library_solve(pkrylov_context ctx, pkrylov_operator Aop, int32_t type, int precond, double rtol,
                         const double *b, pkrylov_result *res) {
  pkrylov_precond M = NULL;
  pkrylov_solver s = NULL;
  double *x;
  int64_t n;
  int ierr = pkrylov_operator_get_info(Aop, &n, NULL, NULL, NULL, NULL, NULL);
  if (ierr) return ierr;
  x = calloc((size_t)n, sizeof(double));
  if (precond) ierr = pkrylov_precond_create(ctx, Aop, PKRYLOV_PRECOND_JACOBI, 0, PKRYLOV_LAYOUT_AUTO, &M);
  if (!ierr) ierr = pkrylov_solver_create(ctx, type, Aop, M, &s);
  if (!ierr) ierr = pkrylov_solver_set_tolerances(s, rtol, 0.0);
  if (!ierr) ierr = pkrylov_solver_solve(s, PKRYLOV_MEM_HOST, b, x);
  if (!ierr) ierr = pkrylov_solver_get_result(s, res);
  pkrylov_solver_destroy(&s);
  pkrylov_precond_destroy(&M);
  free(x);
  return ierr;
}

/**
 * One configuration: solve with the rci, compare x with the dense solve and the iteration count with the
 * library solver; check which requests appear. Returns the number of failures.
 */
static int run_case(int32_t type, int precond, int by_caller, double sign, int nonzero_guess, trace *tr) {
  const int before = pk_test_failures;
  pkrylov_context ctx;
  if (pk_test_context_create(&ctx)) return 1;
  csr A = make_matrix(16, sign);
  pkrylov_operator Aop;
  if (pkrylov_operator_create_csr(ctx, A.n, 0, A.rowptr, A.colind, A.val, &Aop)) return 1;
  const int n = A.n;
  double *b = malloc(sizeof(double) * n), *x = malloc(sizeof(double) * n), *xr = malloc(sizeof(double) * n);
  double *ax = malloc(sizeof(double) * n);
  uint64_t seed = 7;
  for (int i = 0; i < n; i++) b[i] = pk_test_rand(&seed);
  for (int i = 0; i < n; i++) x[i] = nonzero_guess ? pk_test_rand(&seed) : 123.0; /* 123: must be ignored */
  PK_EXPECT(pk_test_dense_solve(Aop, b, xr) == 0, "dense solve failed");

  pkrylov_rci r = NULL;
  PK_EXPECT_CODE(ctx, pkrylov_rci_create(ctx, type, n, precond, by_caller, &r), PKRYLOV_SUCCESS);
  PK_EXPECT_CODE(ctx, pkrylov_rci_set_tolerances(r, 1e-10, 0.0), PKRYLOV_SUCCESS);
  PK_EXPECT(drive(r, &A, b, x, nonzero_guess, tr) == 0 && !tr->bad, "rci loop failed");
  pkrylov_result res, lib;
  PK_EXPECT_CODE(ctx, pkrylov_rci_get_result(r, &res), PKRYLOV_SUCCESS);
  PK_EXPECT(res.converged == 1 && res.reason > 0, "reason %d", res.reason);
  PK_EXPECT(pk_test_rel_diff(n, x, xr) < 1e-7, "x differs from the dense solve: %g", pk_test_rel_diff(n, x, xr));
  /* result fields against a residual recomputed here */
  matvec(&A, x, ax);
  for (int i = 0; i < n; i++) ax[i] = b[i] - ax[i];
  const double bn = pk_test_norm(n, b), rn = pk_test_norm(n, ax);
  PK_EXPECT_NEAR(res.rhs_norm, bn, 1e-12 * bn);
  PK_EXPECT_NEAR(res.final_residual, rn, 1e-6 * rn + 1e-15 * bn);
  PK_EXPECT(res.final_residual <= 1e-10 * bn, "final residual %g", res.final_residual);
  PK_EXPECT_NEAR(res.rel_residual, res.final_residual / bn, 1e-14);
  PK_EXPECT(res.true_residual_checks >= 1 && res.breakdown_iteration == -1, "checks %d breakdown %d",
            res.true_residual_checks, res.breakdown_iteration);
  if (!nonzero_guess) PK_EXPECT_NEAR(res.initial_residual, bn, 1e-12 * bn);
  /* iteration count of the library solver on the same matrix and preconditioner (zero guess) */
  if (!nonzero_guess) {
    PK_EXPECT(library_solve(ctx, Aop, type, precond, 1e-10, b, &lib) == 0, "library solve failed");
    PK_EXPECT(abs(lib.iterations - res.iterations) <= 1, "rci %d iterations, library %d", res.iterations,
              lib.iterations);
    PK_EXPECT(lib.reason == res.reason, "reason rci %d library %d", res.reason, lib.reason);
  }
  /* which requests appear */
  PK_EXPECT(tr->len > 0 && tr->req[tr->len - 1] == PKRYLOV_RCI_DONE, "no DONE at the end");
  PK_EXPECT(count(tr, PKRYLOV_RCI_DONE) == 1, "DONE %d times", count(tr, PKRYLOV_RCI_DONE));
  if (!precond) PK_EXPECT(count(tr, PKRYLOV_RCI_PRECOND) == 0, "PRECOND without preconditioner");
  if (precond) PK_EXPECT(count(tr, PKRYLOV_RCI_PRECOND) >= res.iterations, "too few PRECOND");
  PK_EXPECT(count(tr, PKRYLOV_RCI_MATVEC) >= res.iterations, "too few MATVEC");
  if (!by_caller)
    PK_EXPECT(count(tr, PKRYLOV_RCI_REDUCE_START) + count(tr, PKRYLOV_RCI_REDUCE_WAIT) == 0, "REDUCE requests");
  else
    PK_EXPECT(count(tr, PKRYLOV_RCI_REDUCE_START) == count(tr, PKRYLOV_RCI_REDUCE_WAIT) &&
                  count(tr, PKRYLOV_RCI_REDUCE_START) > res.iterations,
              "START %d WAIT %d", count(tr, PKRYLOV_RCI_REDUCE_START), count(tr, PKRYLOV_RCI_REDUCE_WAIT));
  /* after DONE the rci wants a new start */
  int32_t req;
  PK_EXPECT_CODE(ctx, pkrylov_rci_step(r, &req, NULL, NULL, NULL, NULL), PKRYLOV_ERR_INVALID_STATE);
  /* the caller inspects the order: the iteration count goes into the npart slot of DONE */
  tr->npart[tr->len - 1] = res.iterations;
  PK_EXPECT_CODE(ctx, pkrylov_rci_destroy(&r), PKRYLOV_SUCCESS);
  PK_EXPECT(r == NULL, "destroy did not clear the handle");
  pkrylov_operator_destroy(&Aop);
  pkrylov_context_destroy(&ctx);
  free_matrix(&A);
  free(b);
  free(x);
  free(xr);
  free(ax);
  return pk_test_failures - before;
}

static trace g_tr;

PK_TEST_CASE(cg_jacobi_library_reduce) {
  run_case(PKRYLOV_SOLVER_CG, 1, 0, 1.0, 0, &g_tr);
  PK_TEST_END();
}

PK_TEST_CASE(cg_jacobi_caller_reduce) {
  run_case(PKRYLOV_SOLVER_CG, 1, 1, 1.0, 0, &g_tr);
  /* CG: every REDUCE_START is immediately followed by its REDUCE_WAIT (blocking reductions) */
  for (int i = 0; i < g_tr.len; i++)
    if (g_tr.req[i] == PKRYLOV_RCI_REDUCE_START)
      PK_EXPECT(i + 1 < g_tr.len && g_tr.req[i + 1] == PKRYLOV_RCI_REDUCE_WAIT, "START at %d not followed by WAIT",
                i);
  PK_TEST_END();
}

PK_TEST_CASE(cg_none_negative_definite) {
  run_case(PKRYLOV_SOLVER_CG, 0, 1, -1.0, 0, &g_tr);
  PK_TEST_END();
}

PK_TEST_CASE(cg_initial_guess) {
  run_case(PKRYLOV_SOLVER_CG, 1, 1, 1.0, 1, &g_tr);
  PK_TEST_END();
}

PK_TEST_CASE(pipecg_jacobi_library_reduce) {
  run_case(PKRYLOV_SOLVER_PIPECG, 1, 0, 1.0, 0, &g_tr);
  PK_TEST_END();
}

PK_TEST_CASE(pipecg_initial_guess) {
  run_case(PKRYLOV_SOLVER_PIPECG, 1, 1, 1.0, 1, &g_tr);
  PK_TEST_END();
}

/** The overlap pattern of pipelined CG: START(3 partials), [PRECOND in=w], MATVEC, WAIT. */
static void check_pipecg_order(int precond) {
  const int iters = g_tr.npart[g_tr.len - 1];
  int patterns = 0;
  for (int i = 0; i < g_tr.len; i++) {
    if (g_tr.req[i] != PKRYLOV_RCI_REDUCE_START || g_tr.npart[i] < 3) continue;
    int j = i + 1;
    double *m = NULL;
    if (precond) {
      PK_EXPECT(j < g_tr.len && g_tr.req[j] == PKRYLOV_RCI_PRECOND, "START at %d: next is %d, not PRECOND", i,
                g_tr.req[j]);
      m = g_tr.out[j];
      j++;
    }
    PK_EXPECT(j < g_tr.len && g_tr.req[j] == PKRYLOV_RCI_MATVEC, "START at %d: then %d, not MATVEC", i, g_tr.req[j]);
    if (precond) PK_EXPECT(g_tr.in[j] == m, "MATVEC after START at %d is not A (M^-1 w)", i);
    j++;
    PK_EXPECT(j < g_tr.len && g_tr.req[j] == PKRYLOV_RCI_REDUCE_WAIT && g_tr.npart[j] == g_tr.npart[i],
              "START at %d: then %d, not WAIT", i, g_tr.req[j]);
    patterns++;
  }
  /* one overlapped reduction per iteration plus the initial one */
  PK_EXPECT(patterns == iters + 1, "%d overlapped reductions for %d iterations", patterns, iters);
  /* the first reduction of a host solve is the solve frame's (b, b) (a device solve, t711, folds it into its
     first overlapped reduction as a fourth partial) */
  for (int i = 0; i < g_tr.len; i++)
    if (g_tr.req[i] == PKRYLOV_RCI_REDUCE_START) {
      PK_EXPECT(g_tr.npart[i] == 1, "first START has %d partials", g_tr.npart[i]);
      break;
    }
}

PK_TEST_CASE(pipecg_jacobi_request_order) {
  run_case(PKRYLOV_SOLVER_PIPECG, 1, 1, 1.0, 0, &g_tr);
  check_pipecg_order(1);
  PK_TEST_END();
}

PK_TEST_CASE(pipecg_none_request_order) {
  run_case(PKRYLOV_SOLVER_PIPECG, 0, 1, -1.0, 0, &g_tr);
  check_pipecg_order(0);
  PK_TEST_END();
}

PK_TEST_CASE(max_iterations) {
  pkrylov_context ctx;
  PK_REQUIRE_OK(NULL, pk_test_context_create(&ctx));
  csr A = make_matrix(16, 1.0);
  double *b = malloc(sizeof(double) * A.n), *x = malloc(sizeof(double) * A.n), *t = malloc(sizeof(double) * A.n);
  for (int i = 0; i < A.n; i++) b[i] = 1.0;
  for (int32_t type = PKRYLOV_SOLVER_CG; type <= PKRYLOV_SOLVER_PIPECG; type++) {
    pkrylov_rci r;
    PK_REQUIRE_OK(ctx, pkrylov_rci_create(ctx, type, A.n, 1, 1, &r));
    PK_REQUIRE_OK(ctx, pkrylov_rci_set_max_iterations(r, 3));
    PK_EXPECT(drive(r, &A, b, x, 0, &g_tr) == 0 && !g_tr.bad, "loop failed");
    pkrylov_result res;
    PK_REQUIRE_OK(ctx, pkrylov_rci_get_result(r, &res));
    PK_EXPECT(res.reason == PKRYLOV_DIVERGED_MAX_ITERATIONS && res.iterations == 3 && !res.converged,
              "reason %d iterations %d", res.reason, res.iterations);
    matvec(&A, x, t);
    for (int i = 0; i < A.n; i++) t[i] = b[i] - t[i];
    PK_EXPECT_NEAR(res.final_residual, pk_test_norm(A.n, t), 1e-10 * pk_test_norm(A.n, b));
    PK_EXPECT(res.final_residual < res.initial_residual, "no progress in 3 iterations");
    pkrylov_rci_destroy(&r);
  }
  free(b);
  free(x);
  free(t);
  free_matrix(&A);
  pkrylov_context_destroy(&ctx);
  PK_TEST_END();
}

PK_TEST_CASE(breakdown_indefinite) {
  /* A = diag(1, -1), b = (1, 1): (b, A b) = 0, so the first curvature (p, A p) is zero */
  int32_t rp[3] = {0, 1, 2}, ci[2] = {0, 1};
  double va[2] = {1.0, -1.0};
  csr A = {2, rp, ci, va};
  double b[2] = {1.0, 1.0}, x[2];
  pkrylov_context ctx;
  PK_REQUIRE_OK(NULL, pk_test_context_create(&ctx));
  pkrylov_operator Aop;
  PK_REQUIRE_OK(ctx, pkrylov_operator_create_csr(ctx, 2, 0, rp, ci, va, &Aop));
  for (int32_t type = PKRYLOV_SOLVER_CG; type <= PKRYLOV_SOLVER_PIPECG; type++)
    for (int by_caller = 0; by_caller <= 1; by_caller++) {
      pkrylov_rci r;
      PK_REQUIRE_OK(ctx, pkrylov_rci_create(ctx, type, 2, 0, by_caller, &r));
      PK_EXPECT(drive(r, &A, b, x, 0, &g_tr) == 0 && !g_tr.bad, "loop failed");
      pkrylov_result res, lib;
      PK_REQUIRE_OK(ctx, pkrylov_rci_get_result(r, &res));
      PK_EXPECT(res.reason == PKRYLOV_DIVERGED_BREAKDOWN_INDEFINITE_MATRIX && res.breakdown_iteration == 1 &&
                    !res.converged,
                "type %d: reason %d at %d", type, res.reason, res.breakdown_iteration);
      PK_EXPECT(library_solve(ctx, Aop, type, 0, 1e-8, b, &lib) == 0, "library solve failed");
      PK_EXPECT(lib.reason == res.reason, "library reason %d", lib.reason);
      PK_EXPECT(isfinite(x[0]) && isfinite(x[1]), "x not finite");
      pkrylov_rci_destroy(&r);
    }
  pkrylov_operator_destroy(&Aop);
  pkrylov_context_destroy(&ctx);
  PK_TEST_END();
}

PK_TEST_CASE(bad_input) {
  pkrylov_context ctx;
  PK_REQUIRE_OK(NULL, pk_test_context_create(&ctx));
  pkrylov_rci r = NULL;
  double b[4] = {1, 2, 3, 4}, x[4] = {0, 0, 0, 0};
  int32_t req;
  pkrylov_result res;
  PK_EXPECT_CODE(NULL, pkrylov_rci_create(NULL, PKRYLOV_SOLVER_CG, 4, 0, 0, &r), PKRYLOV_ERR_NULL_POINTER);
  PK_EXPECT(pk_test_msg_has(NULL, "'ctx'"), "message");
  PK_EXPECT_CODE(ctx, pkrylov_rci_create(ctx, PKRYLOV_SOLVER_CG, 4, 0, 0, NULL), PKRYLOV_ERR_NULL_POINTER);
  PK_EXPECT(pk_test_msg_has(ctx, "'r'"), "message");
  PK_EXPECT_CODE(ctx, pkrylov_rci_create(ctx, PKRYLOV_SOLVER_CG, 0, 0, 0, &r), PKRYLOV_ERR_INVALID_SIZE);
  PK_EXPECT(pk_test_msg_has(ctx, "'n'"), "message");
  PK_EXPECT_CODE(ctx, pkrylov_rci_create(ctx, PKRYLOV_SOLVER_CG, -3, 0, 0, &r), PKRYLOV_ERR_INVALID_SIZE);
  PK_EXPECT_CODE(ctx, pkrylov_rci_create(ctx, PKRYLOV_PRECOND_JACOBI, 4, 0, 0, &r), PKRYLOV_ERR_INVALID_VALUE);
  PK_EXPECT(pk_test_msg_has(ctx, "'type'"), "message");
  PK_EXPECT_CODE(ctx, pkrylov_rci_create(ctx, PKRYLOV_SOLVER_CG, 4, 2, 0, &r), PKRYLOV_ERR_INVALID_VALUE);
  PK_EXPECT(pk_test_msg_has(ctx, "'preconditioned'"), "message");
  PK_EXPECT_CODE(ctx, pkrylov_rci_create(ctx, PKRYLOV_SOLVER_CG, 4, 0, -1, &r), PKRYLOV_ERR_INVALID_VALUE);
  PK_EXPECT(pk_test_msg_has(ctx, "'reduce_by_caller'"), "message");
  if (pk_test_on_cuda()) { /* CUDA: CG and pipelined CG only (the other types on the CPU: t341) */
    static const int32_t others[3] = {PKRYLOV_SOLVER_BICGSTAB, PKRYLOV_SOLVER_GMRES, PKRYLOV_SOLVER_SRCG};
    for (int k = 0; k < 3; k++) {
      PK_EXPECT_CODE(ctx, pkrylov_rci_create(ctx, others[k], 4, 0, 0, &r), PKRYLOV_ERR_UNSUPPORTED);
      PK_EXPECT(pk_test_msg_has(ctx, "CG and pipelined CG only"), "message");
    }
  }
  PK_EXPECT(r == NULL, "handle set on error");

  PK_REQUIRE_OK(ctx, pkrylov_rci_create(ctx, PKRYLOV_SOLVER_PIPECG, 4, 1, 1, &r));
  PK_EXPECT_CODE(ctx, pkrylov_rci_step(r, &req, NULL, NULL, NULL, NULL), PKRYLOV_ERR_INVALID_STATE);
  PK_EXPECT(pk_test_msg_has(ctx, "pkrylov_rci_start"), "message");
  PK_EXPECT_CODE(ctx, pkrylov_rci_get_result(r, &res), PKRYLOV_ERR_INVALID_STATE);
  PK_EXPECT_CODE(NULL, pkrylov_rci_step(NULL, &req, NULL, NULL, NULL, NULL), PKRYLOV_ERR_NULL_POINTER);
  PK_EXPECT_CODE(ctx, pkrylov_rci_set_tolerances(r, -1.0, 0.0), PKRYLOV_ERR_INVALID_VALUE);
  PK_EXPECT(pk_test_msg_has(ctx, "'rtol'"), "message");
  PK_EXPECT_CODE(ctx, pkrylov_rci_set_tolerances(r, 0.0, 0.0), PKRYLOV_ERR_INVALID_VALUE);
  PK_EXPECT_CODE(ctx, pkrylov_rci_set_max_iterations(r, -1), PKRYLOV_ERR_INVALID_VALUE);
  PK_EXPECT(pk_test_msg_has(ctx, "'maxit'"), "message");
  PK_EXPECT_CODE(ctx, pkrylov_rci_set_residual_replacement(r, -2), PKRYLOV_ERR_INVALID_VALUE);
  PK_EXPECT_CODE(ctx, pkrylov_rci_set_residual_replacement(r, PKRYLOV_REPLACE_AUTO), PKRYLOV_ERR_INVALID_VALUE);
  PK_EXPECT(pk_test_msg_has(ctx, "PKRYLOV_REPLACE_AUTO"), "message says the handles take no automatic rule");
  PK_EXPECT(pk_test_msg_has(ctx, "'k'"), "message");
  PK_EXPECT_CODE(ctx, pkrylov_rci_start(r, PKRYLOV_MEM_HOST, NULL, x, 0), PKRYLOV_ERR_NULL_POINTER);
  PK_EXPECT(pk_test_msg_has(ctx, "'b'"), "message");
  PK_EXPECT_CODE(ctx, pkrylov_rci_start(r, PKRYLOV_MEM_HOST, b, NULL, 0), PKRYLOV_ERR_NULL_POINTER);
  PK_EXPECT(pk_test_msg_has(ctx, "'x'"), "message");
  PK_EXPECT_CODE(ctx, pkrylov_rci_start(r, PKRYLOV_MEM_DEVICE, b, x, 0), PKRYLOV_ERR_MEMTYPE);
  PK_EXPECT_CODE(ctx, pkrylov_rci_start(r, PKRYLOV_MEM_HOST, b, b, 0), PKRYLOV_ERR_ALIASING);
  PK_EXPECT_CODE(ctx, pkrylov_rci_start(r, PKRYLOV_MEM_HOST, b, x, 3), PKRYLOV_ERR_INVALID_VALUE);
  PK_EXPECT(pk_test_msg_has(ctx, "'x_nonzero'"), "message");
  b[2] = NAN;
  PK_EXPECT_CODE(ctx, pkrylov_rci_start(r, PKRYLOV_MEM_HOST, b, x, 0), PKRYLOV_ERR_NOT_FINITE);
  PK_EXPECT(pk_test_msg_has(ctx, "'b'"), "message");
  b[2] = 3.0;
  x[1] = INFINITY;
  PK_EXPECT_CODE(ctx, pkrylov_rci_start(r, PKRYLOV_MEM_HOST, b, x, 1), PKRYLOV_ERR_NOT_FINITE);
  PK_EXPECT(x[1] == INFINITY, "x modified on error");
  /* still not started: the failed starts changed nothing */
  PK_EXPECT_CODE(ctx, pkrylov_rci_step(r, &req, NULL, NULL, NULL, NULL), PKRYLOV_ERR_INVALID_STATE);
  x[1] = 0.0;
  /* reproducible mode: refused (the reverse-communication sums are not exact), named; off again: accepted */
  PK_REQUIRE_OK(ctx, pkrylov_context_set_reproducible(ctx, 1));
  PK_EXPECT_CODE(ctx, pkrylov_rci_start(r, PKRYLOV_MEM_HOST, b, x, 0), PKRYLOV_ERR_UNSUPPORTED);
  PK_EXPECT(pk_test_msg_has(ctx, "reproducible"), "message");
  PK_EXPECT_CODE(ctx, pkrylov_rci_step(r, &req, NULL, NULL, NULL, NULL), PKRYLOV_ERR_INVALID_STATE);
  PK_REQUIRE_OK(ctx, pkrylov_context_set_reproducible(ctx, 0));
  PK_REQUIRE_OK(ctx, pkrylov_rci_start(r, PKRYLOV_MEM_HOST, b, x, 0));
  PK_EXPECT_CODE(ctx, pkrylov_rci_step(r, NULL, NULL, NULL, NULL, NULL), PKRYLOV_ERR_NULL_POINTER);
  PK_EXPECT(pk_test_msg_has(ctx, "'request'"), "message");
  PK_EXPECT_CODE(ctx, pkrylov_rci_destroy(&r), PKRYLOV_SUCCESS);
  PK_EXPECT_CODE(ctx, pkrylov_rci_destroy(&r), PKRYLOV_SUCCESS); /* NULL: no-op */
  PK_EXPECT_CODE(NULL, pkrylov_rci_destroy(NULL), PKRYLOV_ERR_NULL_POINTER);
  pkrylov_context_destroy(&ctx);

  /* a CUDA context takes CG and pipelined CG (t711 drives them with device vectors) */
  if (pkrylov_has_cuda()) {
    pkrylov_context cctx;
    if (pkrylov_context_create(PKRYLOV_BACKEND_CUDA, &cctx) == PKRYLOV_SUCCESS) {
      pkrylov_rci cr = NULL;
      PK_EXPECT_CODE(cctx, pkrylov_rci_create(cctx, PKRYLOV_SOLVER_PIPECG, 4, 1, 1, &cr), PKRYLOV_SUCCESS);
      PK_EXPECT(cr != NULL, "no handle");
      PK_EXPECT_CODE(cctx, pkrylov_rci_destroy(&cr), PKRYLOV_SUCCESS);
      pkrylov_context_destroy(&cctx);
    }
  }
  PK_TEST_END();
}

PK_TEST_MAIN(PK_TEST_ENTRY(cg_jacobi_library_reduce), PK_TEST_ENTRY(cg_jacobi_caller_reduce),
             PK_TEST_ENTRY(cg_none_negative_definite), PK_TEST_ENTRY(cg_initial_guess),
             PK_TEST_ENTRY(pipecg_jacobi_library_reduce), PK_TEST_ENTRY(pipecg_initial_guess),
             PK_TEST_ENTRY(pipecg_jacobi_request_order), PK_TEST_ENTRY(pipecg_none_request_order),
             PK_TEST_ENTRY(max_iterations), PK_TEST_ENTRY(breakdown_indefinite), PK_TEST_ENTRY(bad_input))

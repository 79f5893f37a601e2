/**
 * @file pk_rr_test.h
 * @brief Shared pieces of the tests of pipelined CG's automatic residual replacement (t303, t715, t917): the
 *        two problems of issue 13 (the thin shell at rtol 1e-10, the 3-D basin of
 *        legacy_examples/mitgcm_style at 1e-13, pk_basin3d_test.h), a hand-written preconditioned CG that
 *        gives the reference iteration count (Hestenes-Stiefel, the library's operator and preconditioner
 *        applied through the public calls; it stops when its recurrence residual and the true residual both
 *        meet the tolerance), and the true residual of a solution recomputed.
 *        Header-only (static).
 */
#ifndef PK_RR_TEST_H
#define PK_RR_TEST_H

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "pk_basin3d_test.h"
#include "pk_test.h"

/** Pipelined CG may take at most this factor times the reference CG's iterations (issue 13). */
#define PK_RR_ITER_FACTOR 1.02

/** A problem: operator, preconditioner, right-hand side, tolerances. */
typedef struct {
  pkrylov_operator A;
  pkrylov_precond M;
  int64_t n;
  double *b;
  double rtol, atol;
  const int32_t *mask; /* dry cells (basin) or NULL */
  pk_basin3d basin;    /* the basin's arrays (zeroed for the thin shell) */
} pk_rr_problem;

/** The thin shell nx x ny x nz, column preconditioner, b = A * ones, rtol 1e-10. */
static int pk_rr_thinshell(pkrylov_context ctx, int nx, int ny, int nz, pk_rr_problem *P) {
  memset(P, 0, sizeof *P);
  pkrylov_thinshell_params p;
  int e = pkrylov_thinshell_params_default(nx, ny, nz, &p);
  if (!e) e = pkrylov_operator_create_thinshell(ctx, &p, &P->A);
  if (e) return e;
  P->n = (int64_t)nx * ny * nz;
  P->b = malloc(sizeof(double) * (size_t)P->n);
  double *ones = malloc(sizeof(double) * (size_t)P->n);
  if (!P->b || !ones) {
    free(ones);
    return PKRYLOV_ERR_OUT_OF_MEMORY;
  }
  for (int64_t i = 0; i < P->n; i++) ones[i] = 1.0;
  e = pkrylov_operator_apply(P->A, PKRYLOV_MEM_HOST, ones, P->b);
  free(ones);
  if (!e) e = pkrylov_precond_create(ctx, P->A, PKRYLOV_PRECOND_COLUMN, 0, PKRYLOV_LAYOUT_AUTO, &P->M);
  P->rtol = 1e-10;
  return e;
}

/** The basin nx x ny x nz (negative definite, masked), column preconditioner, the model's right-hand side of
 *  its first step (normalised to max |b| = 1), rtol 1e-13. */
static int pk_rr_basin(pkrylov_context ctx, int nx, int ny, int nz, pk_rr_problem *P) {
  memset(P, 0, sizeof *P);
  if (pk_basin3d_make(&P->basin, nx, ny, nz)) return PKRYLOV_ERR_OUT_OF_MEMORY;
  P->n = P->basin.n;
  P->mask = P->basin.mask;
  P->b = malloc(sizeof(double) * (size_t)P->n);
  if (!P->b) return PKRYLOV_ERR_OUT_OF_MEMORY;
  pk_basin3d_rhs(&P->basin, 30.0, P->b);
  int e = pk_basin3d_operator(ctx, &P->basin, &P->A);
  if (!e) e = pkrylov_precond_create(ctx, P->A, PKRYLOV_PRECOND_COLUMN, 0, PKRYLOV_LAYOUT_AUTO, &P->M);
  P->rtol = 1e-13;
  return e;
}

static void pk_rr_free(pk_rr_problem *P) {
  pkrylov_precond_destroy(&P->M);
  pkrylov_operator_destroy(&P->A);
  free(P->b);
  pk_basin3d_free(&P->basin);
  memset(P, 0, sizeof *P);
}

/** (a, b) over the wet cells. */
static double pk_rr_dot(const pk_rr_problem *P, const double *a, const double *b) {
  double s = 0.0;
  for (int64_t i = 0; i < P->n; i++)
    if (!P->mask || P->mask[i]) s += a[i] * b[i];
  return s;
}

/** The stopping tolerance max(rtol ||b||, atol) (||b|| over the wet cells). */
static double pk_rr_tol(const pk_rr_problem *P) {
  const double t = P->rtol * sqrt(pk_rr_dot(P, P->b, P->b));
  return t > P->atol ? t : P->atol;
}

/** ||b - A x|| over the wet cells, A x by pkrylov_operator_apply (the thin shell's CSR export loses digits:
 *  its assembled rows cancel to many digits near the ground); -1 on error. */
static double pk_rr_true_residual(const pk_rr_problem *P, const double *x) {
  double *y = malloc(sizeof(double) * (size_t)P->n);
  if (!y || pkrylov_operator_apply(P->A, PKRYLOV_MEM_HOST, x, y)) {
    free(y);
    return -1.0;
  }
  double s = 0.0;
  for (int64_t i = 0; i < P->n; i++)
    if (!P->mask || P->mask[i]) s += (P->b[i] - y[i]) * (P->b[i] - y[i]);
  free(y);
  return sqrt(s);
}

/**
 * The reference: hand-written PCG from x = x0 (NULL: 0) with the problem's operator and preconditioner
 * (pkrylov_operator_apply, pkrylov_precond_apply). When its recurrence residual meets the tolerance it checks
 * the true residual b - A x; if that does not, it starts again from x (r = b - A x, p = M^-1 r; at most 5
 * times), as the library's solvers do (the recurrence residual of a tight tolerance may pass below the
 * accuracy the recurrences keep). Returns the iterations when both meet the tolerance, -1 on an error, when
 * maxit passes or after 5 restarts.
 */
static int pk_rr_reference_cg(const pk_rr_problem *P, const double *x0, int maxit) {
  const int64_t n = P->n;
  const size_t bytes = sizeof(double) * (size_t)n;
  double *x = calloc((size_t)n, sizeof(double)), *r = malloc(bytes), *z = malloc(bytes), *p = malloc(bytes);
  double *q = malloc(bytes), rz = 0.0;
  int it = -1, restarts = 0;
  if (!x || !r || !z || !p || !q) goto done;
  if (x0) memcpy(x, x0, bytes);
  const double tol = pk_rr_tol(P);
  for (int k = 0; k <= maxit; k++) {
    if (k == 0 || (sqrt(pk_rr_dot(P, r, r)) <= tol)) {
      if (k > 0) { /* the recurrence says converged: the true residual decides */
        const double tr = pk_rr_true_residual(P, x);
        if (tr >= 0 && tr <= tol) {
          it = k;
          goto done;
        }
        if (tr < 0 || ++restarts > 5) goto done;
      }
      /* (re)start from x */
      if (pkrylov_operator_apply(P->A, PKRYLOV_MEM_HOST, x, q)) goto done;
      for (int64_t i = 0; i < n; i++) r[i] = (!P->mask || P->mask[i]) ? P->b[i] - q[i] : 0.0;
      if (pkrylov_precond_apply(P->M, PKRYLOV_MEM_HOST, r, z)) goto done;
      memcpy(p, z, bytes);
      rz = pk_rr_dot(P, r, z);
    } else {
      if (pkrylov_precond_apply(P->M, PKRYLOV_MEM_HOST, r, z)) goto done;
      const double rzn = pk_rr_dot(P, r, z), beta = rzn / rz;
      rz = rzn;
      for (int64_t i = 0; i < n; i++) p[i] = z[i] + beta * p[i];
    }
    if (k == maxit) break;
    if (pkrylov_operator_apply(P->A, PKRYLOV_MEM_HOST, p, q)) goto done;
    const double alpha = rz / pk_rr_dot(P, p, q);
    for (int64_t i = 0; i < n; i++) {
      x[i] += alpha * p[i];
      r[i] -= alpha * q[i];
    }
  }
done:
  free(x), free(r), free(z), free(p), free(q);
  return it;
}

/** A library solve of P with solver type (replacement setting k for pipelined CG) into x (from x0 when not
 *  NULL, else 0); *res the result. */
static int pk_rr_solve(pkrylov_context ctx, const pk_rr_problem *P, int32_t type, int32_t k, const double *x0,
                       double *x, pkrylov_result *res) {
  pkrylov_solver s;
  int e = pkrylov_solver_create(ctx, type, P->A, P->M, &s);
  if (e) return e;
  e = pkrylov_solver_set_tolerances(s, P->rtol, P->atol);
  if (!e) e = pkrylov_solver_set_max_iterations(s, 3000);
  if (!e && type == PKRYLOV_SOLVER_PIPECG) e = pkrylov_solver_set_residual_replacement(s, k);
  if (!e && x0) e = pkrylov_solver_set_initial_guess_nonzero(s, 1);
  if (x0) memcpy(x, x0, sizeof(double) * (size_t)P->n);
  if (!e) e = pkrylov_solver_solve(s, PKRYLOV_MEM_HOST, P->b, x);
  if (!e) e = pkrylov_solver_get_result(s, res);
  pkrylov_solver_destroy(&s);
  return e;
}

#endif

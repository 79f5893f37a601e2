/**
 * @file pkrylov-demo.c
 * @brief Demo: the thin-shell pressure problem (default 128 x 128 x 64, gnomonic panel) solved with
 *        pipelined CG and the column preconditioner, b = A * ones, rtol 1e-8, backend AUTO.
 *
 * usage: pkrylov-demo [NX NY NZ]
 * Prints what it runs on and why (e.g. "built without CUDA: CPU backend, 2 OpenMP threads", "GPU visible:
 * CUDA backend on NVIDIA H100 80GB HBM3 (device 0 of 1)"), the problem size, iterations, the true
 * residual reduction, the error against the exact solution (all ones), the solve time and the time per
 * iteration. Exit 0 when converged, 1 when
 * not (or when a library call fails), 2 on bad arguments. Uses the public API of pkrylov.h only.
 */
#define _POSIX_C_SOURCE 200809L

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "pkrylov.h"

#define PROG "pkrylov-demo"

/** Parse a whole string as a positive int32; 0 on success. */
static int parse_dim(const char *s, int32_t *v) {
  char *end = NULL;
  if (!s || *s < '0' || *s > '9') return 1;
  errno = 0;
  long l = strtol(s, &end, 10);
  if (errno != 0 || *end != '\0' || l < 1 || l > INT32_MAX) return 1;
  *v = (int32_t)l;
  return 0;
}

/** Monotonic wall clock in seconds. */
static double wall_time(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/** Print a failed library call with the library's message. */
static void lib_error(pkrylov_context ctx, int status, const char *what) {
  const char *msg = NULL;
  if (ctx) pkrylov_context_get_last_error(ctx, NULL, &msg);
  if (!msg || !*msg) msg = pkrylov_last_error_message();
  fprintf(stderr, "%s: error: %s: %s (%s)\n", PROG, what, msg ? msg : "", pkrylov_error_string(status));
}

int main(int argc, char **argv) {
  int32_t nx = 128, ny = 128, nz = 64;
  if (argc == 2 && (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0)) {
    printf("usage: %s [NX NY NZ]   (default 128 128 64)\n", PROG);
    return 0;
  }
  if (argc != 1 && argc != 4) {
    fprintf(stderr, "%s: error: expected no arguments or three grid sizes NX NY NZ\n", PROG);
    return 2;
  }
  if (argc == 4) {
    const char *names[3] = {"NX", "NY", "NZ"};
    int32_t *dims[3] = {&nx, &ny, &nz};
    for (int d = 0; d < 3; d++)
      if (parse_dim(argv[1 + d], dims[d])) {
        fprintf(stderr, "%s: error: invalid %s '%s': expected a positive integer\n", PROG, names[d],
                argv[1 + d]);
        return 2;
      }
  }

  int rc = 1, st;
  pkrylov_context ctx = NULL;
  pkrylov_operator A = NULL;
  pkrylov_precond M = NULL;
  pkrylov_solver s = NULL;
  double *b = NULL, *x = NULL;
  int64_t n = 0;

  if ((st = pkrylov_context_create(PKRYLOV_BACKEND_AUTO, &ctx)) != PKRYLOV_SUCCESS) {
    lib_error(NULL, st, "cannot create a context");
    goto done;
  }
  int32_t backend = 0;
  pkrylov_context_get_backend(ctx, &backend);
  /* what the context runs on, and why AUTO chose it */
  char where[256] = "";
  pkrylov_context_describe(ctx, where, sizeof where);
  const char *why = backend == PKRYLOV_BACKEND_CUDA ? "GPU visible"
                    : pkrylov_has_cuda()            ? "CUDA built in but no GPU visible"
                                                    : "built without CUDA";

  pkrylov_thinshell_params p;
  if ((st = pkrylov_thinshell_params_default(nx, ny, nz, &p)) != PKRYLOV_SUCCESS ||
      (st = pkrylov_operator_create_thinshell(ctx, &p, &A)) != PKRYLOV_SUCCESS) {
    lib_error(ctx, st, "cannot build the thin-shell problem");
    goto done;
  }
  int64_t nnz = 0;
  pkrylov_operator_get_info(A, &n, &nnz, NULL, NULL, NULL, NULL);

  /* b = A * ones: the exact solution is x = 1 everywhere */
  b = calloc((size_t)n, sizeof(double));
  x = calloc((size_t)n, sizeof(double));
  if (!b || !x) {
    fprintf(stderr, "%s: error: out of memory for n = %lld\n", PROG, (long long)n);
    goto done;
  }
  for (int64_t i = 0; i < n; i++) x[i] = 1.0;
  if ((st = pkrylov_operator_apply(A, PKRYLOV_MEM_HOST, x, b)) != PKRYLOV_SUCCESS) {
    lib_error(ctx, st, "cannot compute b = A * ones");
    goto done;
  }
  memset(x, 0, sizeof(double) * (size_t)n);

  double t0 = wall_time();
  if ((st = pkrylov_precond_create(ctx, A, PKRYLOV_PRECOND_COLUMN, 0, PKRYLOV_LAYOUT_AUTO, &M)) !=
          PKRYLOV_SUCCESS ||
      (st = pkrylov_solver_create(ctx, PKRYLOV_SOLVER_PIPECG, A, M, &s)) != PKRYLOV_SUCCESS ||
      (st = pkrylov_solver_set_tolerances(s, 1e-8, 0.0)) != PKRYLOV_SUCCESS) {
    lib_error(ctx, st, "cannot set up the preconditioner and solver");
    goto done;
  }
  double setup_time = wall_time() - t0;

  t0 = wall_time();
  st = pkrylov_solver_solve(s, PKRYLOV_MEM_HOST, b, x);
  double solve_time = wall_time() - t0;
  pkrylov_result res;
  if (st != PKRYLOV_SUCCESS || (st = pkrylov_solver_get_result(s, &res)) != PKRYLOV_SUCCESS) {
    lib_error(ctx, st, "the solve failed");
    goto done;
  }

  /* error against the exact solution: max_i |x_i - 1| */
  double err = 0.0;
  for (int64_t i = 0; i < n; i++) {
    double e = fabs(x[i] - 1.0);
    if (!(e <= err)) err = e; /* also catches NaN */
  }
  double reduction = res.initial_residual > 0.0 ? res.final_residual / res.initial_residual : 0.0;

  printf("pkrylov %d.%d.%d demo: thin-shell pressure problem, pipelined CG + column preconditioner\n",
         PKRYLOV_VERSION_MAJOR, PKRYLOV_VERSION_MINOR, PKRYLOV_VERSION_PATCH);
  printf("backend             %s: %s\n", why, where);
  printf("problem size        %d x %d x %d = %lld unknowns, %lld nonzeros (gnomonic)\n", (int)nx, (int)ny,
         (int)nz, (long long)n, (long long)nnz);
  printf("iterations          %d (%s)\n", (int)res.iterations, pkrylov_reason_string(res.reason));
  printf("residual reduction  %.3e (true residual final / initial, rtol 1e-8)\n", reduction);
  printf("error max|x - 1|    %.3e\n", err);
  printf("setup time          %.4f s\n", setup_time);
  printf("solve time          %.4f s\n", solve_time);
  printf("time per iteration  %.3e s\n", res.iterations > 0 ? solve_time / res.iterations : 0.0);
  rc = res.converged ? 0 : 1;

done:
  pkrylov_solver_destroy(&s);
  pkrylov_precond_destroy(&M);
  pkrylov_operator_destroy(&A);
  pkrylov_context_destroy(&ctx);
  free(x);
  free(b);
  return rc;
}

/**
 * @file pkrylov-bench-cpu.c
 * @brief CPU benchmark: CG and pipelined CG with the column preconditioner on the thin-shell problem,
 *        against the machine's memory bandwidth measured in the same run (a STREAM-like triad).
 *
 *   pkrylov-bench-cpu [--sizes NXxNYxNZ,...] [--iters K] [--repeat R] [--json FILE]
 *
 * Time per iteration is the difference of two solves with a fixed number of iterations (10 and 10+K),
 * divided by K, so the set-up, the initial and the final residual do not count: (least t(10+K) - least
 * t(10)) / K over R repetitions of each (pkb_timing.h). A figure that is not positive or above the copy or
 * triad bandwidth measured in the same run is flagged (a "!" in the table, "flag" in the JSON): timing
 * noise, or a problem that fits in cache. Bytes per iteration are those the fused loops must move
 * (docs/notes/performance-history.md, "Bytes the fused loops must move"):
 *   CG (two loops):  preconditioner loop r,q,l,dinv read, r,z written (6 words); operator loop z,p,q,x
 *                    read, x,p,q written (7 words): 13 words = 104 B per unknown.
 *   pipelined CG:    m = M^-1 w: w,l,dinv read, m written (4 words); fused update: m,z,q,s,p,x,r,u,w
 *                    read, z,q,s,p,x,r,u,w written (17 words): 21 words = 168 B per unknown.
 * (the matrix-free thin-shell operator reads only per-level vectors and per-column scalars; the factors
 * l, dinv of the column preconditioner are stored per cell). Residual replacement is switched off so the
 * count is exact.
 */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#define PKB_NAME "pkrylov-bench-cpu"
#include "pkb_cpu_common.h"
#include "pkb_timing.h"
#include "pkrylov.h"

/**
 * Copy a = b and triad a = b + s c over n doubles, best of `reps` each: bytes counted 16 and 24 per element
 * (as STREAM), into *copy and *triad (bytes per second).
 */
static void stream_bandwidth(int64_t n, int reps, double *copy, double *triad) {
  double *a = malloc(sizeof(double) * (size_t)n), *b = malloc(sizeof(double) * (size_t)n),
         *c = malloc(sizeof(double) * (size_t)n);
  *copy = *triad = 0;
  if (!a || !b || !c) {
    free(a), free(b), free(c);
    return;
  }
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < n; i++) a[i] = 0, b[i] = 1.0 + (double)(i % 7), c[i] = 2.0;
  double best_copy = 1e30, best_triad = 1e30;
  for (int r = 0; r < reps; r++) {
    const double s = 0.5 + r;
    double t0 = now();
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < n; i++) a[i] = b[i];
    double t = now() - t0;
    if (t < best_copy) best_copy = t;
    t0 = now();
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < n; i++) a[i] = b[i] + s * c[i];
    t = now() - t0;
    if (t < best_triad) best_triad = t;
  }
  volatile double sink = a[n / 2];
  (void)sink;
  free(a), free(b), free(c);
  *copy = 16.0 * (double)n / best_copy;
  *triad = 24.0 * (double)n / best_triad;
}

typedef struct {
  int nx, ny, nz;
  int solver;
  double t_iter, bytes_per_iter, gbs, fraction;
  int iters_to_1e8;
  const char *flag; /* why the figure is implausible (pkb_flag), or NULL */
} result_t;

static void bench_size(pkrylov_context ctx, int nx, int ny, int nz, int K, int R, double bw, double bw_max,
                       result_t *out) {
  pkrylov_thinshell_params p;
  pkrylov_operator A;
  pkrylov_precond M;
  const int64_t n = (int64_t)nx * ny * nz;
  if (pkrylov_thinshell_params_default(nx, ny, nz, &p) || pkrylov_operator_create_thinshell(ctx, &p, &A))
    die(ctx, "thin-shell operator");
  if (pkrylov_precond_create(ctx, A, PKRYLOV_PRECOND_COLUMN, 0, PKRYLOV_LAYOUT_AUTO, &M)) die(ctx, "precond");
  double *b = malloc(sizeof(double) * (size_t)n), *x = malloc(sizeof(double) * (size_t)n);
  random_rhs(b, n);
  const int types[2] = {PKRYLOV_SOLVER_CG, PKRYLOV_SOLVER_PIPECG};
  for (int t = 0; t < 2; t++) {
    pkrylov_solver s;
    if (pkrylov_solver_create(ctx, types[t], A, M, &s)) die(ctx, "solver");
    pkrylov_solver_set_residual_replacement(s, 0);
    /* iterations to 1e-8, for the record */
    pkrylov_solver_set_tolerances(s, 1e-8, 0);
    pkrylov_solver_set_max_iterations(s, 10000);
    if (pkrylov_solver_solve(s, PKRYLOV_MEM_HOST, b, x)) die(ctx, "solve");
    pkrylov_result res;
    pkrylov_solver_get_result(s, &res);
    /* fixed iteration counts: a tolerance that is not reached */
    pkrylov_solver_set_tolerances(s, 1e-300, 0);
    double *t10 = malloc(sizeof(double) * (size_t)R), *tk = malloc(sizeof(double) * (size_t)R);
    if (!t10 || !tk) die(ctx, "allocation of the timings");
    for (int r = 0; r < R; r++) {
      t10[r] = timed_solve(ctx, s, 10, b, x);
      tk[r] = timed_solve(ctx, s, 10 + K, b, x);
    }
    result_t *o = &out[t];
    o->nx = nx, o->ny = ny, o->nz = nz, o->solver = types[t];
    o->t_iter = pkb_time_per_iteration(t10, tk, R, 10, 10 + K);
    free(t10), free(tk);
    o->bytes_per_iter = (types[t] == PKRYLOV_SOLVER_CG ? 13.0 : 21.0) * 8.0 * (double)n;
    o->gbs = o->bytes_per_iter / o->t_iter / 1e9;
    o->fraction = o->gbs * 1e9 / bw;
    o->flag = pkb_flag(o->t_iter, o->bytes_per_iter, bw_max);
    o->iters_to_1e8 = res.converged ? res.iterations : -res.iterations;
    pkrylov_solver_destroy(&s);
  }
  free(b), free(x);
  pkrylov_precond_destroy(&M);
  pkrylov_operator_destroy(&A);
}

int main(int argc, char **argv) {
  const char *sizes = "32x32x32,128x128x64,256x256x128";
  const char *json = NULL;
  int K = 20, R = 3;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--sizes") && i + 1 < argc) sizes = argv[++i];
    else if (!strcmp(argv[i], "--iters") && i + 1 < argc) K = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--repeat") && i + 1 < argc) R = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--json") && i + 1 < argc) json = argv[++i];
    else {
      fprintf(stderr, "usage: %s [--sizes NXxNYxNZ,...] [--iters K] [--repeat R] [--json FILE]\n", argv[0]);
      return 2;
    }
  }
  if (K < 1 || R < 1) {
    fprintf(stderr, "--iters and --repeat must be >= 1\n");
    return 2;
  }
  int threads = 1;
#ifdef _OPENMP
  threads = omp_get_max_threads();
#endif
  double copy_bw, bw;
  stream_bandwidth((int64_t)1 << 25, 5, &copy_bw, &bw);
  const double bw_max = copy_bw > bw ? copy_bw : bw; /* no fused loop moves bytes faster than both */
  printf("pkrylov CPU benchmark: %d threads, copy bandwidth %.2f GB/s, triad %.2f GB/s (256 MiB arrays, best "
         "of 5)\n",
         threads, copy_bw / 1e9, bw / 1e9);
  printf(
      "thin shell, gnomonic, fp64, column preconditioner, time per iteration (least t(10+%d) - least t(10)) "
      "/ %d of %d runs each; '!': not positive or above the measured bandwidth\n\n",
      K, K, R);
  printf("%-14s %-7s %10s %12s %10s %9s %8s\n", "problem", "solver", "unknowns", "time/it [ms]", "GB/s",
         "of triad", "its@1e-8");
  pkrylov_context ctx;
  if (pkrylov_context_create(PKRYLOV_BACKEND_CPU, &ctx)) die(NULL, "context");
  result_t res[32][2];
  int nres = 0;
  char *list = strdup(sizes), *save = NULL;
  for (char *tok = strtok_r(list, ",", &save); tok && nres < 32; tok = strtok_r(NULL, ",", &save)) {
    int nx, ny, nz;
    if (sscanf(tok, "%dx%dx%d", &nx, &ny, &nz) != 3 || nx < 1 || ny < 1 || nz < 1) {
      fprintf(stderr, "bad size '%s'\n", tok);
      return 2;
    }
    bench_size(ctx, nx, ny, nz, K, R, bw, bw_max, res[nres]);
    for (int t = 0; t < 2; t++) {
      result_t *o = &res[nres][t];
      char prob[64];
      snprintf(prob, sizeof prob, "%dx%dx%d", nx, ny, nz);
      printf("%-14s %-7s %10lld %12.3f %10.2f %8.0f%% %8d%s\n", prob, t ? "pipecg" : "cg",
             (long long)nx * ny * nz, o->t_iter * 1e3, o->gbs, 100 * o->fraction, o->iters_to_1e8,
             o->flag ? " !" : "");
      if (o->flag) fprintf(stderr, "pkrylov-bench-cpu: %s %s: %s\n", prob, t ? "pipecg" : "cg", o->flag);
    }
    fflush(stdout);
    nres++;
  }
  free(list);
  pkrylov_context_destroy(&ctx);
  if (json) {
    FILE *f = fopen(json, "w");
    if (!f) {
      perror(json);
      return 2;
    }
    fprintf(f, "{\"benchmark\":\"pkrylov-bench-cpu\",\"threads\":%d,\"copy_GBs\":%.4f,\"triad_GBs\":%.4f,"
            "\"results\":[",
            threads, copy_bw / 1e9, bw / 1e9);
    for (int i = 0; i < nres; i++)
      for (int t = 0; t < 2; t++) {
        result_t *o = &res[i][t];
        fprintf(
            f,
            "%s{\"nx\":%d,\"ny\":%d,\"nz\":%d,\"solver\":\"%s\",\"time_per_iteration_s\":%.6e,"
            "\"bytes_per_iteration\":%.0f,\"GBs\":%.4f,\"fraction_of_triad\":%.4f,\"iterations_to_1e-8\":%d,"
            "\"flag\":%s%s%s}",
            (i || t) ? "," : "", o->nx, o->ny, o->nz, t ? "pipecg" : "cg", o->t_iter, o->bytes_per_iter,
            o->gbs, o->fraction, o->iters_to_1e8, o->flag ? "\"" : "", o->flag ? o->flag : "null",
            o->flag ? "\"" : "");
      }
    fprintf(f, "]}\n");
    fclose(f);
  }
  return 0;
}

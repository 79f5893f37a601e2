/**
 * @file pkrylov-bench-threads.c
 * @brief How the CPU backend's OpenMP threads behave: where threads stop paying, and what idle threads
 *        cost the process that calls the library (docs/performance.md, "Threads").
 *
 *   pkrylov-bench-threads crossover [--sizes N1,N2,...] [--iters K] [--repeat R]
 *     Time per iteration of CG and pipelined CG (column preconditioner), BiCGStab and GMRES(30) (Jacobi) on
 *     the thin shell of N unknowns (32 x N/256 columns of 8 levels), with 1 and with 2 threads: the median
 *     of the times between consecutive iterations (a monitor reads the clock at every iteration) over R
 *     solves of 5 + K iterations each, the first 5 not counted. The median of many short intervals is what a
 *     shared machine allows: a process that preempts ours lengthens a few intervals, not the median (the
 *     least interval is printed too: what an idle machine would give). The
 *     two thread counts alternate solve by solve so that a drift of the machine touches both. The library
 *     runs a loop
 *     on one thread below PK_PAR_MIN_ROWS whatever the count: build with -DPK_PAR_MIN_ROWS=0 to measure
 *     below it.
 *
 *   pkrylov-bench-threads idle [--size N] [--steps S] [--work MS] [--pause] [--busy] [--threads T]
 *     A model's time step: one solve (CG, column preconditioner, 20 iterations), then MS milliseconds of
 *     the model's own serial work on the calling thread; S steps. Reports the median solve time, the median
 *     wall time of the model's work and the CPU time the process's other threads (the library's idle
 *     OpenMP team) burn during it. --pause calls omp_pause_resource_all(omp_pause_soft) after each solve;
 *     --busy forks one competing process that spins for the whole run (a busy node).
 */
#define _GNU_SOURCE
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#define PKB_NAME "pkrylov-bench-threads"
#include "pkb_cpu_common.h"
#include "pkrylov.h"

static double tv(struct timeval t) {
  return (double)t.tv_sec + 1e-6 * (double)t.tv_usec;
}

/** CPU seconds (user + system) of the whole process and of the calling thread. */
static void cpu_times(double *process, double *thread) {
  struct rusage r;
  getrusage(RUSAGE_SELF, &r);
  *process = tv(r.ru_utime) + tv(r.ru_stime);
  getrusage(RUSAGE_THREAD, &r);
  *thread = tv(r.ru_utime) + tv(r.ru_stime);
}

static int cmp_double(const void *a, const void *b) {
  const double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static double median(double *v, int n) {
  qsort(v, (size_t)n, sizeof *v, cmp_double);
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

typedef struct {
  pkrylov_context ctx;
  pkrylov_operator A;
  pkrylov_precond M;
  double *b, *x;
  int64_t n;
} problem;

/** The thin shell of about n unknowns: 32 x ny columns of 8 levels (ny = n / 256, at least 1). */
static void make_problem(problem *P, int64_t n, int precond) {
  pkrylov_thinshell_params p;
  const int nx = 32, nz = 8, ny = (int)(n / (nx * nz)) > 0 ? (int)(n / (nx * nz)) : 1;
  P->n = (int64_t)nx * ny * nz;
  if (pkrylov_thinshell_params_default(nx, ny, nz, &p) ||
      pkrylov_operator_create_thinshell(P->ctx, &p, &P->A))
    die(P->ctx, "thin-shell operator");
  if (pkrylov_precond_create(P->ctx, P->A, precond, 0, PKRYLOV_LAYOUT_AUTO, &P->M)) die(P->ctx, "precond");
  P->b = malloc(sizeof(double) * (size_t)P->n);
  P->x = malloc(sizeof(double) * (size_t)P->n);
  if (!P->b || !P->x) die(NULL, "malloc");
  random_rhs(P->b, P->n);
}

static void free_problem(problem *P) {
  pkrylov_precond_destroy(&P->M);
  pkrylov_operator_destroy(&P->A);
  free(P->b), free(P->x);
}

/** Monitor of the crossover: the clock at every iteration. */
typedef struct {
  double *t;
  int cap, count;
} stamps;

static int stamp(void *user, int32_t it, double res) {
  (void)res;
  stamps *S = user;
  if (it >= 0 && it < S->cap) S->t[it] = now(), S->count = it + 1;
  return 0;
}

static int crossover(int argc, char **argv) {
  const char *sizes = "4096,8192,12288,16384,24576,32768,49152,65536,131072,262144";
  int K = 40, R = 15;
  for (int i = 0; i < argc; i++) {
    if (!strcmp(argv[i], "--sizes") && i + 1 < argc)
      sizes = argv[++i];
    else if (!strcmp(argv[i], "--iters") && i + 1 < argc)
      K = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--repeat") && i + 1 < argc)
      R = atoi(argv[++i]);
    else {
      fprintf(stderr, "crossover: unknown option '%s'\n", argv[i]);
      return 2;
    }
  }
  if (K < 1 || R < 1 || R > 1000) {
    fprintf(stderr, "--iters and --repeat must be >= 1 (repeat <= 1000)\n");
    return 2;
  }
  static const struct {
    const char *name;
    int type, precond;
  } solvers[] = {{"cg", PKRYLOV_SOLVER_CG, PKRYLOV_PRECOND_COLUMN},
                 {"pipecg", PKRYLOV_SOLVER_PIPECG, PKRYLOV_PRECOND_COLUMN},
                 {"bicgstab", PKRYLOV_SOLVER_BICGSTAB, PKRYLOV_PRECOND_JACOBI},
                 {"gmres", PKRYLOV_SOLVER_GMRES, PKRYLOV_PRECOND_JACOBI}};
  printf("time per iteration [us], 1 and 2 threads: medians of the %d intervals between iterations 5 to %d "
         "of %d "
         "solves\n",
         K * R, K + 5, R);
  printf("%-9s %8s %10s %10s %8s   %10s %10s %8s\n", "solver", "n", "1 thread", "2 threads", "2t / 1t",
         "min 1t", "min 2t", "ratio");
  double *dt[2];
  for (int t = 0; t < 2; t++) dt[t] = malloc(sizeof(double) * (size_t)R * (size_t)K);
  stamps st = {malloc(sizeof(double) * (size_t)(K + 8)), K + 8, 0};
  char *list = strdup(sizes), *save = NULL;
  for (char *tok = strtok_r(list, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
    const long long nreq = atoll(tok);
    if (nreq < 256) {
      fprintf(stderr, "bad size '%s' (>= 256)\n", tok);
      return 2;
    }
    for (unsigned v = 0; v < sizeof solvers / sizeof *solvers; v++) {
      problem P = {0};
      if (pkrylov_context_create(PKRYLOV_BACKEND_CPU, &P.ctx)) die(NULL, "context");
      make_problem(&P, nreq, solvers[v].precond);
      pkrylov_solver s;
      if (pkrylov_solver_create(P.ctx, solvers[v].type, P.A, P.M, &s)) die(P.ctx, "solver");
      pkrylov_solver_set_residual_replacement(s, 0);
      pkrylov_solver_set_tolerances(s, 1e-300, 0); /* fixed iteration counts: never reached */
      pkrylov_solver_set_stagnation_window(s, 0);
      pkrylov_solver_set_monitor(s, stamp, &st);
      for (int r = -1; r < R; r++) /* r = -1: warm-up */
        for (int t = 0; t < 2; t++) {
          pkrylov_context_set_num_threads(P.ctx, t + 1);
          st.count = 0;
          timed_solve(P.ctx, s, 5 + K, P.b, P.x);
          if (st.count != K + 6) die(NULL, "monitor");
          for (int k = 0; k < K && r >= 0; k++) dt[t][(size_t)r * K + k] = st.t[5 + k + 1] - st.t[5 + k];
        }
      double per[2], least[2];
      for (int t = 0; t < 2; t++) {
        per[t] = median(dt[t], R * K); /* sorts: the least is first */
        least[t] = dt[t][0];
      }
      printf("%-9s %8lld %10.1f %10.1f %8.2f   %10.1f %10.1f %8.2f\n", solvers[v].name, (long long)P.n,
             1e6 * per[0], 1e6 * per[1], per[1] / per[0], 1e6 * least[0], 1e6 * least[1],
             least[1] / least[0]);
      fflush(stdout);
      pkrylov_solver_destroy(&s);
      free_problem(&P);
      pkrylov_context_destroy(&P.ctx);
    }
  }
  free(list);
  for (int t = 0; t < 2; t++) free(dt[t]);
  free(st.t);
  return 0;
}

/** The model's own serial work: ms milliseconds of arithmetic on the calling thread. */
static double model_work(double ms) {
  volatile double acc = 0;
  const double t0 = now();
  while (now() - t0 < 1e-3 * ms)
    for (int i = 0; i < 1000; i++) acc = acc * 0.999 + 1.0;
  return acc;
}

static int idle(int argc, char **argv) {
  long long nreq = 65536;
  int steps = 40, pause_after = 0, busy = 0, threads = 0;
  double work_ms = 50;
  for (int i = 0; i < argc; i++) {
    if (!strcmp(argv[i], "--size") && i + 1 < argc)
      nreq = atoll(argv[++i]);
    else if (!strcmp(argv[i], "--steps") && i + 1 < argc)
      steps = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--work") && i + 1 < argc)
      work_ms = atof(argv[++i]);
    else if (!strcmp(argv[i], "--threads") && i + 1 < argc)
      threads = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--pause"))
      pause_after = 1;
    else if (!strcmp(argv[i], "--busy"))
      busy = 1;
    else {
      fprintf(stderr, "idle: unknown option '%s'\n", argv[i]);
      return 2;
    }
  }
  if (nreq < 256 || steps < 1 || steps > 100000 || !(work_ms >= 0)) {
    fprintf(stderr, "idle: bad --size, --steps or --work\n");
    return 2;
  }
  pid_t child = -1;
  if (busy) {
    child = fork();
    if (child == 0) {
      volatile double a = 0;
      for (;;) a = a * 0.999 + 1.0;
    }
    if (child < 0) die(NULL, "fork");
  }
  problem P = {0};
  if (pkrylov_context_create(PKRYLOV_BACKEND_CPU, &P.ctx)) die(NULL, "context");
  if (threads > 0) pkrylov_context_set_num_threads(P.ctx, threads);
  make_problem(&P, nreq, PKRYLOV_PRECOND_COLUMN);
  pkrylov_solver s;
  if (pkrylov_solver_create(P.ctx, PKRYLOV_SOLVER_CG, P.A, P.M, &s)) die(P.ctx, "solver");
  pkrylov_solver_set_tolerances(s, 1e-300, 0);
  pkrylov_solver_set_stagnation_window(s, 0);
  double *ts = malloc(sizeof(double) * (size_t)steps), *tw = malloc(sizeof(double) * (size_t)steps),
         *burn = malloc(sizeof(double) * (size_t)steps);
  double total_p0, total_t0, total_p1, total_t1;
  cpu_times(&total_p0, &total_t0);
  const double wall0 = now();
  for (int k = -1; k < steps; k++) { /* k = -1: warm-up */
    const double t = timed_solve(P.ctx, s, 20, P.b, P.x);
#ifdef _OPENMP
    if (pause_after && omp_pause_resource_all(omp_pause_soft) != 0) die(NULL, "omp_pause_resource_all");
#endif
    double p0, t0, p1, t1;
    cpu_times(&p0, &t0);
    const double w0 = now();
    model_work(work_ms);
    const double w = now() - w0;
    cpu_times(&p1, &t1);
    if (k >= 0) ts[k] = t, tw[k] = w, burn[k] = (p1 - p0) - (t1 - t0);
  }
  const double wall = now() - wall0;
  cpu_times(&total_p1, &total_t1);
  int32_t nt = 0;
  pkrylov_context_get_num_threads(P.ctx, &nt);
  printf("n %lld, %d threads%s, %s%s: solve %.2f ms, model work %.2f ms (asked %.1f), other threads' CPU "
         "during the work %.3f ms per step; whole run %.3f s wall, %.3f s CPU (%.3f s the calling thread)\n",
         (long long)P.n, (int)nt, threads > 0 ? "" : " (the default count: the solver's measured choice)",
         pause_after ? "pause after each solve" : "no pause",
         busy ? ", one competing busy process" : "", 1e3 * median(ts, steps), 1e3 * median(tw, steps),
         work_ms, 1e3 * median(burn, steps), wall, total_p1 - total_p0, total_t1 - total_t0);
  pkrylov_solver_destroy(&s);
  free_problem(&P);
  pkrylov_context_destroy(&P.ctx);
  free(ts), free(tw), free(burn);
  if (child > 0) {
    kill(child, SIGKILL);
    waitpid(child, NULL, 0);
  }
  return 0;
}

int main(int argc, char **argv) {
  if (argc >= 2 && !strcmp(argv[1], "crossover")) return crossover(argc - 2, argv + 2);
  if (argc >= 2 && !strcmp(argv[1], "idle")) return idle(argc - 2, argv + 2);
  fprintf(stderr,
          "usage: %s crossover [--sizes N,...] [--iters K] [--repeat R]\n"
          "       %s idle [--size N] [--steps S] [--work MS] [--pause] [--busy] [--threads T]\n",
          argv[0], argv[0]);
  return 2;
}

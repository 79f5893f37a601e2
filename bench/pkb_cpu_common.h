/**
 * @file pkb_cpu_common.h
 * @brief What the CPU benchmarks share (pkrylov-bench-cpu, pkrylov-bench-threads): the clock, the exit on a
 *        failed call, a solve of a fixed number of iterations, a pseudo-random right-hand side. Define
 *        PKB_NAME (the program's name, for messages) before including it.
 */
#ifndef PKB_CPU_COMMON_H
#define PKB_CPU_COMMON_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "pkrylov.h"

/** Monotonic wall clock in seconds. */
static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/** Report the failed call `what` with the library's message (ctx may be NULL) and exit with status 2. */
static void die(pkrylov_context ctx, const char *what) {
  const char *msg = "";
  if (ctx) pkrylov_context_get_last_error(ctx, NULL, &msg);
  fprintf(stderr, PKB_NAME ": %s failed: %s %s\n", what, msg, pkrylov_last_error_message());
  exit(2);
}

/** Seconds for a solve of exactly `its` iterations (the solver's tolerance must not be reached). */
static double timed_solve(pkrylov_context ctx, pkrylov_solver s, int its, const double *b, double *x) {
  if (pkrylov_solver_set_max_iterations(s, its)) die(ctx, "set_max_iterations");
  const double t0 = now();
  if (pkrylov_solver_solve(s, PKRYLOV_MEM_HOST, b, x)) die(ctx, "solve");
  const double t = now() - t0;
  pkrylov_result r;
  pkrylov_solver_get_result(s, &r);
  if (r.iterations != its) {
    fprintf(stderr, PKB_NAME ": expected %d iterations, did %d (%s)\n", its, r.iterations,
            pkrylov_reason_string(r.reason));
    exit(2);
  }
  return t;
}

/** b[0..n) pseudo-random in [-0.5, 0.5), the same sequence for every run (fixed seed). */
static void random_rhs(double *b, int64_t n) {
  uint64_t st = 12345;
  for (int64_t i = 0; i < n; i++) {
    st = st * 6364136223846793005ULL + 1442695040888963407ULL;
    b[i] = (double)(st >> 11) / 9007199254740992.0 - 0.5;
  }
}

#endif /* PKB_CPU_COMMON_H */

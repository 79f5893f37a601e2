/**
 * @file t310-threads.c
 * @brief Threads: the default thread count (against this process's affinity mask, read here with
 *        sched_getaffinity), the explicit count and its bad input, one thread inside a caller's parallel
 *        region; independent systems solved at once from several threads (separate contexts, and separate
 *        solvers on one context sharing an operator and a preconditioner), bitwise equal to the same solves
 *        one after another; and an object used by two threads at once: the second caller gets
 *        PKRYLOV_ERR_BUSY naming the argument while the first solve, held in a user callback on a barrier,
 *        goes on to the right answer.
 *
 * CPU backend (no PK_TEST_BACKENDS line): the thread counts are the CPU backend's; a CUDA context serves one
 * solve at a time, which cuda_context_one_solve_at_a_time checks.
 */
#define _GNU_SOURCE /* sched_getaffinity, CPU_COUNT */
#include <pthread.h>
#include <sched.h>
#include <string.h>

#include "pk_test.h"

#ifdef PK_TEST_HAVE_OPENMP
#include <omp.h>
#endif
#ifdef PK_TEST_HAVE_CUDART
#include <cuda_runtime_api.h>
#endif

/* ---- the default count, computed here independently of the library ---------------------------- */

/** CPUs in the calling thread's affinity mask. */
static int affinity_cpus(void) {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) != 0) return -1;
  return CPU_COUNT(&set);
}

/** The first value of OMP_NUM_THREADS (a number or a list "4,2"), or 0 when it is not set. */
static int omp_num_threads_env(void) {
  const char *e = getenv("OMP_NUM_THREADS");
  if (!e || !*e) return 0;
  const long v = strtol(e, NULL, 10);
  return v > 0 && v < 1 << 20 ? (int)v : 0;
}

/** What the header promises for a context without a communicator, outside parallel regions. */
static int expected_default(int cpus) {
#ifdef PK_TEST_HAVE_OPENMP
  const int cap = omp_num_threads_env();
  return cap > 0 && cap < cpus ? cap : cpus;
#else
  (void)cpus;
  return 1; /* a library built without OpenMP runs one thread */
#endif
}

static int context_threads(int32_t *n) {
  pkrylov_context ctx;
  int e = pkrylov_context_create(PKRYLOV_BACKEND_CPU, &ctx);
  if (e) return e;
  e = pkrylov_context_get_num_threads(ctx, n);
  pkrylov_context_destroy(&ctx);
  return e;
}

PK_TEST_CASE(default_count_follows_affinity) {
  const int cpus = affinity_cpus();
  PK_REQUIRE(cpus >= 1, "sched_getaffinity failed");
  int32_t n = -1;
  PK_REQUIRE_OK(NULL, context_threads(&n));
  PK_EXPECT(n == expected_default(cpus),
            "default %d threads, expected %d (%d CPUs in the mask, OMP_NUM_THREADS %s)", (int)n,
            expected_default(cpus), cpus, getenv("OMP_NUM_THREADS") ? getenv("OMP_NUM_THREADS") : "unset");
  /* a process confined to one CPU (as a batch system or mpirun binds it): one thread */
  cpu_set_t all, one;
  PK_REQUIRE(sched_getaffinity(0, sizeof all, &all) == 0, "sched_getaffinity");
  CPU_ZERO(&one);
  for (int c = 0; c < CPU_SETSIZE; c++)
    if (CPU_ISSET(c, &all)) {
      CPU_SET(c, &one);
      break;
    }
  PK_REQUIRE(sched_setaffinity(0, sizeof one, &one) == 0, "sched_setaffinity");
  const int e = context_threads(&n);
  sched_setaffinity(0, sizeof all, &all);
  PK_REQUIRE_OK(NULL, e);
  PK_EXPECT(n == 1, "confined to one CPU: %d threads", (int)n);
  PK_REQUIRE_OK(NULL, context_threads(&n)); /* the mask back: the count back */
  PK_EXPECT(n == expected_default(cpus), "mask restored: %d threads, expected %d", (int)n,
            expected_default(cpus));
  PK_TEST_END();
}

PK_TEST_CASE(explicit_count_and_bad_input) {
  pkrylov_context ctx;
  PK_REQUIRE_OK(NULL, pkrylov_context_create(PKRYLOV_BACKEND_CPU, &ctx));
  int32_t def = -1, n = -1;
  PK_REQUIRE_OK(ctx, pkrylov_context_get_num_threads(ctx, &def));
  PK_EXPECT(def >= 1, "default %d", (int)def);
  PK_REQUIRE_OK(ctx, pkrylov_context_set_num_threads(ctx, 3));
  PK_REQUIRE_OK(ctx, pkrylov_context_get_num_threads(ctx, &n));
#ifdef PK_TEST_HAVE_OPENMP
  PK_EXPECT(n == 3, "set 3, got %d", (int)n);
#else
  PK_EXPECT(n == 1, "without OpenMP: %d", (int)n);
#endif
  PK_REQUIRE_OK(ctx, pkrylov_context_set_num_threads(ctx, PKRYLOV_MAX_THREADS));
  PK_REQUIRE_OK(ctx, pkrylov_context_set_num_threads(ctx, 0));
  PK_REQUIRE_OK(ctx, pkrylov_context_get_num_threads(ctx, &n));
  PK_EXPECT(n == def, "0 restores the default %d, got %d", (int)def, (int)n);
  PK_REQUIRE_OK(ctx, pkrylov_context_set_num_threads(ctx, 2));
  PK_REQUIRE_OK(ctx, pkrylov_context_set_num_threads(ctx, -7));
  PK_REQUIRE_OK(ctx, pkrylov_context_get_num_threads(ctx, &n));
  PK_EXPECT(n == def, "-7 restores the default %d, got %d", (int)def, (int)n);
  /* bad input: too many threads (nothing changes), NULL output, NULL context */
  PK_REQUIRE_OK(ctx, pkrylov_context_set_num_threads(ctx, 2));
  PK_EXPECT_CODE(ctx, pkrylov_context_set_num_threads(ctx, PKRYLOV_MAX_THREADS + 1),
                 PKRYLOV_ERR_INVALID_VALUE);
  PK_EXPECT(pk_test_msg_has(ctx, "'n'"), "message names 'n'");
  PK_REQUIRE_OK(ctx, pkrylov_context_get_num_threads(ctx, &n));
#ifdef PK_TEST_HAVE_OPENMP
  PK_EXPECT(n == 2, "a refused count changed the count to %d", (int)n);
#endif
  PK_EXPECT_CODE(ctx, pkrylov_context_get_num_threads(ctx, NULL), PKRYLOV_ERR_NULL_POINTER);
  PK_EXPECT(pk_test_msg_has(ctx, "'n'"), "message names 'n'");
  PK_EXPECT_CODE(NULL, pkrylov_context_get_num_threads(NULL, &n), PKRYLOV_ERR_NULL_POINTER);
  PK_EXPECT(pk_test_msg_has(NULL, "'ctx'"), "message names 'ctx'");
  PK_REQUIRE_OK(ctx, pkrylov_context_destroy(&ctx));
  PK_TEST_END();
}

/** Called from inside an active parallel region of the caller, the default is one thread. */
PK_TEST_CASE(one_thread_inside_a_parallel_region) {
#ifndef PK_TEST_HAVE_OPENMP
  return PK_SKIP;
#else
  pkrylov_context ctx;
  PK_REQUIRE_OK(NULL, pkrylov_context_create(PKRYLOV_BACKEND_CPU, &ctx));
  int32_t inside = -1, set_inside = -1, team = 0;
#pragma omp parallel num_threads(2)
  {
#pragma omp single
    {
      team = omp_get_num_threads();
      pkrylov_context_get_num_threads(ctx, &inside);
      pkrylov_context_set_num_threads(ctx, 2); /* a count the caller set is kept inside too */
      pkrylov_context_get_num_threads(ctx, &set_inside);
      pkrylov_context_set_num_threads(ctx, 0);
    }
  }
  if (team < 2) { /* the runtime gave a team of one (OMP_THREAD_LIMIT, OMP_DYNAMIC): the region is inactive */
    pkrylov_context_destroy(&ctx);
    return PK_SKIP;
  }
  PK_EXPECT(inside == 1, "inside a team of %d: %d threads", (int)team, (int)inside);
  PK_EXPECT(set_inside == 2, "a count set explicitly: %d", (int)set_inside);
  PK_REQUIRE_OK(ctx, pkrylov_context_destroy(&ctx));
  PK_TEST_END();
#endif
}

/* ---- independent systems solved at once --------------------------------------------------------- */

/** The thin shell nx x ny x nz, its right-hand side (fixed seed) and a solver of one type. */
typedef struct {
  pkrylov_context ctx; /* the system's own context, or a shared one */
  int own_ctx;
  pkrylov_operator A;
  pkrylov_precond M;
  pkrylov_solver s;
  int own_ops;
  int64_t n;
  double *b, *x;
  pkrylov_result res;
  int rounds, status;
} system_t;

static int make_ops(pkrylov_context ctx, int nx, int ny, int nz, pkrylov_operator *A, pkrylov_precond *M) {
  pkrylov_thinshell_params p;
  int e = pkrylov_thinshell_params_default(nx, ny, nz, &p);
  if (!e) e = pkrylov_operator_create_thinshell(ctx, &p, A);
  if (!e) e = pkrylov_precond_create(ctx, *A, PKRYLOV_PRECOND_COLUMN, 0, PKRYLOV_LAYOUT_AUTO, M);
  return e;
}

static int make_system(system_t *S, pkrylov_context shared, pkrylov_operator A, pkrylov_precond M, int nx,
                       int ny, int nz, int type, uint64_t seed) {
  memset(S, 0, sizeof *S);
  int e = PKRYLOV_SUCCESS;
  S->own_ctx = shared == NULL;
  if (S->own_ctx)
    e = pkrylov_context_create(PKRYLOV_BACKEND_CPU, &S->ctx);
  else
    S->ctx = shared;
  S->own_ops = A == NULL;
  if (!e && S->own_ops) e = make_ops(S->ctx, nx, ny, nz, &A, &M);
  S->A = A, S->M = M;
  if (!e) e = pkrylov_solver_create(S->ctx, type, A, M, &S->s);
  if (!e) e = pkrylov_solver_set_tolerances(S->s, 1e-8, 0);
  S->n = (int64_t)nx * ny * nz;
  S->b = malloc(sizeof(double) * (size_t)S->n);
  S->x = calloc((size_t)S->n, sizeof(double));
  if (!S->b || !S->x) return PKRYLOV_ERR_OUT_OF_MEMORY;
  for (int64_t i = 0; i < S->n; i++) S->b[i] = pk_test_rand(&seed);
  S->rounds = 2;
  return e;
}

static void free_system(system_t *S) {
  pkrylov_solver_destroy(&S->s);
  if (S->own_ops) {
    pkrylov_precond_destroy(&S->M);
    pkrylov_operator_destroy(&S->A);
  }
  if (S->own_ctx) pkrylov_context_destroy(&S->ctx);
  free(S->b), free(S->x);
}

/** Thread body: the system's solve, `rounds` times from x = 0 (the last one's x and result stay). */
static void *solve_rounds(void *arg) {
  system_t *S = arg;
  for (int r = 0; r < S->rounds && !S->status; r++) {
    memset(S->x, 0, sizeof(double) * (size_t)S->n);
    S->status = pkrylov_solver_solve(S->s, PKRYLOV_MEM_HOST, S->b, S->x);
    if (!S->status) S->status = pkrylov_solver_get_result(S->s, &S->res);
  }
  return NULL;
}

/** Solve every system one after another (the reference), then all at once in threads: bitwise equal. */
static int concurrent_vs_sequential(system_t *sys, int count) {
  double **ref = calloc((size_t)count, sizeof *ref);
  pkrylov_result *rr = calloc((size_t)count, sizeof *rr);
  PK_REQUIRE(ref && rr, "malloc");
  for (int k = 0; k < count; k++) {
    solve_rounds(&sys[k]);
    PK_EXPECT(sys[k].status == 0, "sequential solve %d: %s", k, pkrylov_error_string(sys[k].status));
    PK_EXPECT(sys[k].res.converged, "sequential solve %d did not converge (%s)", k,
              pkrylov_reason_string(sys[k].res.reason));
    /* the reference itself is right: its residual recomputed from the CSR export of the operator */
    const double rel = pk_test_true_relres(sys[k].A, sys[k].b, sys[k].x);
    PK_EXPECT(rel <= 1e-7, "sequential solve %d: true relative residual %.3g", k, rel);
    ref[k] = malloc(sizeof(double) * (size_t)sys[k].n);
    PK_REQUIRE(ref[k], "malloc");
    memcpy(ref[k], sys[k].x, sizeof(double) * (size_t)sys[k].n);
    rr[k] = sys[k].res;
  }
  pthread_t *th = calloc((size_t)count, sizeof *th);
  PK_REQUIRE(th, "malloc");
  for (int k = 0; k < count; k++)
    PK_REQUIRE(pthread_create(&th[k], NULL, solve_rounds, &sys[k]) == 0, "pthread_create");
  for (int k = 0; k < count; k++) pthread_join(th[k], NULL);
  for (int k = 0; k < count; k++) {
    PK_EXPECT(sys[k].status == 0, "concurrent solve %d: %s", k, pkrylov_error_string(sys[k].status));
    PK_EXPECT(sys[k].res.iterations == rr[k].iterations, "system %d: %d iterations at once, %d one by one", k,
              (int)sys[k].res.iterations, (int)rr[k].iterations);
    PK_EXPECT(memcmp(sys[k].x, ref[k], sizeof(double) * (size_t)sys[k].n) == 0,
              "system %d: x solved at once differs from x solved alone", k);
    free(ref[k]);
  }
  free(ref), free(rr), free(th);
  return pk_test_failures ? PK_FAIL : PK_PASS;
}

/* Systems above the library's one-thread threshold (PK_PAR_MIN_ROWS = 8192: each solve runs OpenMP teams of
   its own while the others do), of different sizes and solver types. */
static const struct {
  int nx, ny, nz, type;
} cases[4] = {{32, 24, 16, PKRYLOV_SOLVER_CG},
              {28, 28, 16, PKRYLOV_SOLVER_PIPECG},
              {30, 24, 18, PKRYLOV_SOLVER_BICGSTAB},
              {26, 26, 20, PKRYLOV_SOLVER_GMRES}};

PK_TEST_CASE(concurrent_separate_contexts) {
  system_t sys[4];
  for (int k = 0; k < 4; k++)
    PK_REQUIRE_OK(sys[k].ctx, make_system(&sys[k], NULL, NULL, NULL, cases[k].nx, cases[k].ny, cases[k].nz,
                                          cases[k].type, 100 + (uint64_t)k));
  const int rc = concurrent_vs_sequential(sys, 4);
  for (int k = 0; k < 4; k++) free_system(&sys[k]);
  return rc;
}

/** Four solvers of one CPU context sharing its thin-shell operator and column preconditioner. */
PK_TEST_CASE(concurrent_solvers_one_context) {
  pkrylov_context ctx;
  pkrylov_operator A;
  pkrylov_precond M;
  PK_REQUIRE_OK(NULL, pkrylov_context_create(PKRYLOV_BACKEND_CPU, &ctx));
  PK_REQUIRE_OK(ctx, make_ops(ctx, 32, 24, 16, &A, &M));
  system_t sys[4];
  for (int k = 0; k < 4; k++)
    PK_REQUIRE_OK(ctx, make_system(&sys[k], ctx, A, M, 32, 24, 16, cases[k].type, 200 + (uint64_t)k));
  const int rc = concurrent_vs_sequential(sys, 4);
  for (int k = 0; k < 4; k++) free_system(&sys[k]);
  pkrylov_precond_destroy(&M);
  pkrylov_operator_destroy(&A);
  PK_REQUIRE_OK(NULL, pkrylov_context_destroy(&ctx));
  return rc;
}

/* ---- one object, two threads ---------------------------------------------------------------------- */

/**
 * A user operator (and preconditioner) that compute what a built-in operator computes (pkrylov_operator_apply
 * of `inner`), and on the product numbered `block_at` wait on a barrier with the test's other thread twice:
 * in between, the other thread makes its calls while the solve is held inside the callback.
 */
typedef struct {
  pkrylov_operator inner;
  pkrylov_precond inner_M;
  pthread_barrier_t *bar;
  int calls, block_at;
} blocking_op;

static int blocking_matvec(void *data, int64_t n, const double *x, double *y) {
  (void)n;
  blocking_op *B = data;
  if (++B->calls == B->block_at) {
    pthread_barrier_wait(B->bar); /* 1: the solve is inside; the other thread goes */
    pthread_barrier_wait(B->bar); /* 2: the other thread is done */
  }
  return pkrylov_operator_apply(B->inner, PKRYLOV_MEM_HOST, x, y);
}

static int blocking_precond(void *data, int64_t n, const double *x, double *y) {
  (void)n;
  blocking_op *B = data;
  return pkrylov_precond_apply(B->inner_M, PKRYLOV_MEM_HOST, x, y);
}

typedef struct {
  pkrylov_solver s;
  const double *b;
  double *x;
  int status;
} solve_job;

static void *solve_job_run(void *arg) {
  solve_job *J = arg;
  J->status = pkrylov_solver_solve(J->s, PKRYLOV_MEM_HOST, J->b, J->x);
  return NULL;
}

/** The call returns PKRYLOV_ERR_BUSY and the context's message contains both needles. */
#define EXPECT_BUSY(ctx, call, needle1, needle2)                                                             \
  do {                                                                                                       \
    PK_EXPECT_CODE(ctx, call, PKRYLOV_ERR_BUSY);                                                             \
    PK_EXPECT(pk_test_msg_has(ctx, needle1) && pk_test_msg_has(ctx, needle2), "message of %s", #call);       \
  } while (0)

PK_TEST_CASE(same_solver_two_threads_busy) {
  pkrylov_context ctx;
  pkrylov_operator T, Au, A2;
  pkrylov_precond Mc, Mu;
  PK_REQUIRE_OK(NULL, pkrylov_context_create(PKRYLOV_BACKEND_CPU, &ctx));
  PK_REQUIRE_OK(ctx, make_ops(ctx, 24, 20, 16, &T, &Mc));
  const int64_t n = 24 * 20 * 16;
  pthread_barrier_t bar;
  PK_REQUIRE(pthread_barrier_init(&bar, NULL, 2) == 0, "barrier");
  blocking_op B = {T, Mc, &bar, 0, 5};
  PK_REQUIRE_OK(ctx, pkrylov_operator_create_user(ctx, n, blocking_matvec, &B, &Au));
  PK_REQUIRE_OK(ctx, pkrylov_precond_create_user(ctx, n, blocking_precond, &B, &Mu));
  pkrylov_thinshell_params p;
  PK_REQUIRE_OK(ctx, pkrylov_thinshell_params_default(24, 20, 16, &p));
  PK_REQUIRE_OK(ctx, pkrylov_operator_create_thinshell(ctx, &p, &A2));
  /* s: the solve that blocks; s2: another solver on the same user operator; s3: a built-in operator with the
     user preconditioner; s4: built-in only, on the same context (runs meanwhile) */
  pkrylov_solver s, s2, s3, s4;
  PK_REQUIRE_OK(ctx, pkrylov_solver_create(ctx, PKRYLOV_SOLVER_CG, Au, Mu, &s));
  PK_REQUIRE_OK(ctx, pkrylov_solver_create(ctx, PKRYLOV_SOLVER_CG, Au, NULL, &s2));
  PK_REQUIRE_OK(ctx, pkrylov_solver_create(ctx, PKRYLOV_SOLVER_CG, A2, Mu, &s3));
  PK_REQUIRE_OK(ctx, pkrylov_solver_create(ctx, PKRYLOV_SOLVER_CG, A2, Mc, &s4));
  PK_REQUIRE_OK(ctx, pkrylov_solver_set_tolerances(s, 1e-10, 0));
  PK_REQUIRE_OK(ctx, pkrylov_solver_set_tolerances(s4, 1e-10, 0));
  double *b = malloc(sizeof(double) * (size_t)n), *x = calloc((size_t)n, sizeof(double)),
         *xo = malloc(sizeof(double) * (size_t)n), *xref = calloc((size_t)n, sizeof(double)),
         *y = malloc(sizeof(double) * (size_t)n), *x4 = calloc((size_t)n, sizeof(double));
  PK_REQUIRE(b && x && xo && xref && y && x4, "malloc");
  uint64_t seed = 7;
  for (int64_t i = 0; i < n; i++) b[i] = pk_test_rand(&seed), xo[i] = 12345.0;

  solve_job J = {s, b, x, -1};
  pthread_t th;
  PK_REQUIRE(pthread_create(&th, NULL, solve_job_run, &J) == 0, "pthread_create");
  pthread_barrier_wait(&bar); /* 1: s is solving, held in its operator's 5th product */
  EXPECT_BUSY(ctx, pkrylov_solver_solve(s, PKRYLOV_MEM_HOST, b, xo), "'s'", "another thread");
  EXPECT_BUSY(ctx, pkrylov_solver_set_tolerances(s, 1e-6, 0), "'s'", "another thread");
  EXPECT_BUSY(ctx, pkrylov_solver_set_max_iterations(s, 3), "'s'", "another thread");
  pkrylov_result r;
  EXPECT_BUSY(ctx, pkrylov_solver_get_result(s, &r), "'s'", "another thread");
  pkrylov_solver sd = s;
  EXPECT_BUSY(ctx, pkrylov_solver_destroy(&sd), "'s'", "another thread");
  PK_EXPECT(sd == s, "a refused destroy cleared the handle");
  EXPECT_BUSY(ctx, pkrylov_solver_solve(s2, PKRYLOV_MEM_HOST, b, xo), "'s'", "operator");
  EXPECT_BUSY(ctx, pkrylov_solver_solve(s3, PKRYLOV_MEM_HOST, b, xo), "'s'", "preconditioner");
  EXPECT_BUSY(ctx, pkrylov_operator_apply(Au, PKRYLOV_MEM_HOST, b, xo), "'A'", "operator");
  EXPECT_BUSY(ctx, pkrylov_precond_apply(Mu, PKRYLOV_MEM_HOST, b, xo), "'M'", "preconditioner");
  int changed = 0;
  for (int64_t i = 0; i < n; i++) changed += xo[i] != 12345.0;
  PK_EXPECT(changed == 0, "refused calls wrote %d values of their output", changed);
  /* a solver of built-in objects on the same CPU context solves meanwhile */
  PK_EXPECT_CODE(ctx, pkrylov_solver_solve(s4, PKRYLOV_MEM_HOST, b, x4), PKRYLOV_SUCCESS);
  pthread_barrier_wait(&bar); /* 2: let s go on */
  pthread_join(th, NULL);
  PK_EXPECT(J.status == PKRYLOV_SUCCESS, "the held solve returned %d (%s)", J.status,
            pkrylov_error_string(J.status));
  PK_EXPECT(B.calls > 5, "the operator was called %d times", B.calls);
  PK_REQUIRE_OK(ctx, pkrylov_solver_get_result(s, &r));
  PK_EXPECT(r.converged, "the held solve did not converge (%s)", pkrylov_reason_string(r.reason));
  /* its x is right: the residual recomputed from the CSR export of the thin shell, and bitwise the solve of
     the same system repeated alone */
  const double rel = pk_test_true_relres(T, b, x);
  PK_EXPECT(rel <= 1e-9, "the held solve's true relative residual %.3g", rel);
  B.block_at = -1;
  PK_REQUIRE_OK(ctx, pkrylov_solver_solve(s, PKRYLOV_MEM_HOST, b, xref));
  PK_EXPECT(memcmp(x, xref, sizeof(double) * (size_t)n) == 0,
            "the held solve differs from the same solve alone");
  pkrylov_result r4;
  PK_REQUIRE_OK(ctx, pkrylov_solver_get_result(s4, &r4));
  PK_EXPECT(r4.converged && pk_test_true_relres(A2, b, x4) <= 1e-9, "the solve made meanwhile: %s",
            pkrylov_reason_string(r4.reason));
  /* everything is free again */
  PK_EXPECT_CODE(ctx, pkrylov_solver_set_tolerances(s, 1e-10, 0), PKRYLOV_SUCCESS);
  PK_EXPECT_CODE(ctx, pkrylov_operator_apply(Au, PKRYLOV_MEM_HOST, b, y), PKRYLOV_SUCCESS);
  PK_EXPECT_CODE(ctx, pkrylov_precond_apply(Mu, PKRYLOV_MEM_HOST, b, y), PKRYLOV_SUCCESS);
  PK_EXPECT_CODE(ctx, pkrylov_solver_solve(s2, PKRYLOV_MEM_HOST, b, xo), PKRYLOV_SUCCESS);
  PK_REQUIRE_OK(ctx, pkrylov_solver_destroy(&s));
  PK_REQUIRE_OK(ctx, pkrylov_solver_destroy(&s2));
  PK_REQUIRE_OK(ctx, pkrylov_solver_destroy(&s3));
  PK_REQUIRE_OK(ctx, pkrylov_solver_destroy(&s4));
  pkrylov_precond_destroy(&Mu);
  pkrylov_precond_destroy(&Mc);
  pkrylov_operator_destroy(&Au);
  pkrylov_operator_destroy(&A2);
  pkrylov_operator_destroy(&T);
  PK_REQUIRE_OK(NULL, pkrylov_context_destroy(&ctx));
  pthread_barrier_destroy(&bar);
  free(b), free(x), free(xo), free(xref), free(y), free(x4);
  PK_TEST_END();
}

/** A monitor that asks its own solver for its result: refused (the solver is in use by the solve). */
typedef struct {
  pkrylov_solver s;
  int status, calls;
} monitor_probe;

static int probing_monitor(void *user, int32_t it, double res) {
  (void)it, (void)res;
  monitor_probe *P = user;
  pkrylov_result r;
  if (P->calls++ == 0) P->status = pkrylov_solver_get_result(P->s, &r);
  return 0;
}

PK_TEST_CASE(callback_calling_back_busy) {
  pkrylov_context ctx;
  pkrylov_operator A;
  pkrylov_precond M;
  pkrylov_solver s;
  PK_REQUIRE_OK(NULL, pkrylov_context_create(PKRYLOV_BACKEND_CPU, &ctx));
  PK_REQUIRE_OK(ctx, make_ops(ctx, 8, 8, 6, &A, &M));
  PK_REQUIRE_OK(ctx, pkrylov_solver_create(ctx, PKRYLOV_SOLVER_CG, A, M, &s));
  monitor_probe P = {s, -1, 0};
  PK_REQUIRE_OK(ctx, pkrylov_solver_set_monitor(s, probing_monitor, &P));
  double b[8 * 8 * 6], x[8 * 8 * 6] = {0};
  uint64_t seed = 3;
  for (int i = 0; i < 8 * 8 * 6; i++) b[i] = pk_test_rand(&seed);
  PK_REQUIRE_OK(ctx, pkrylov_solver_solve(s, PKRYLOV_MEM_HOST, b, x));
  PK_EXPECT(P.calls > 0 && P.status == PKRYLOV_ERR_BUSY, "get_result inside the monitor: %d", P.status);
  pkrylov_result r;
  PK_REQUIRE_OK(ctx, pkrylov_solver_get_result(s, &r)); /* afterwards: fine */
  PK_EXPECT(r.converged && pk_test_true_relres(A, b, x) <= 1e-7, "solve %s", pkrylov_reason_string(r.reason));
  pkrylov_solver_destroy(&s);
  pkrylov_precond_destroy(&M);
  pkrylov_operator_destroy(&A);
  PK_REQUIRE_OK(NULL, pkrylov_context_destroy(&ctx));
  PK_TEST_END();
}

#ifdef PK_TEST_HAVE_CUDART
/** CUDA: y = A x of a built-in operator of the same context applied from inside the callback (a nested
 *  product of the thread that holds the context), after the barriers. */
static int blocking_device_matvec(void *data, int64_t n, const double *x, double *y) {
  (void)n;
  blocking_op *B = data;
  if (++B->calls == B->block_at) {
    pthread_barrier_wait(B->bar);
    pthread_barrier_wait(B->bar);
  }
  return pkrylov_operator_apply(B->inner, PKRYLOV_MEM_DEVICE, x, y);
}
#endif

/** A CUDA context serves one solve at a time: a second thread's solve on it is refused, the first's goes on.
 */
PK_TEST_CASE(cuda_context_one_solve_at_a_time) {
#ifndef PK_TEST_HAVE_CUDART
  return PK_SKIP;
#else
  SKIP_WITHOUT_GPU();
  pkrylov_context ctx, cpu;
  pkrylov_operator T, Au, Tc;
  PK_REQUIRE_OK(NULL, pkrylov_context_create(PKRYLOV_BACKEND_CUDA, &ctx));
  PK_REQUIRE_OK(NULL, pkrylov_context_create(PKRYLOV_BACKEND_CPU, &cpu));
  pkrylov_thinshell_params p;
  PK_REQUIRE_OK(ctx, pkrylov_thinshell_params_default(16, 12, 10, &p));
  PK_REQUIRE_OK(ctx, pkrylov_operator_create_thinshell(ctx, &p, &T));
  PK_REQUIRE_OK(cpu, pkrylov_operator_create_thinshell(cpu, &p, &Tc));
  const int64_t n = 16 * 12 * 10;
  pthread_barrier_t bar;
  PK_REQUIRE(pthread_barrier_init(&bar, NULL, 2) == 0, "barrier");
  blocking_op B = {T, NULL, &bar, 0, 3};
  PK_REQUIRE_OK(ctx, pkrylov_operator_create_user(ctx, n, blocking_device_matvec, &B, &Au));
  pkrylov_solver s, s2;
  pkrylov_precond Mc; /* the column preconditioner of the thin shell (unpreconditioned CG needs ~3000 its) */
  PK_REQUIRE_OK(ctx, pkrylov_precond_create(ctx, T, PKRYLOV_PRECOND_COLUMN, 0, PKRYLOV_LAYOUT_AUTO, &Mc));
  PK_REQUIRE_OK(ctx, pkrylov_solver_create(ctx, PKRYLOV_SOLVER_CG, Au, Mc, &s));
  PK_REQUIRE_OK(ctx, pkrylov_solver_create(ctx, PKRYLOV_SOLVER_CG, T, NULL, &s2));
  PK_REQUIRE_OK(ctx, pkrylov_solver_set_tolerances(s, 1e-10, 0));
  double *b = malloc(sizeof(double) * (size_t)n), *x = calloc((size_t)n, sizeof(double)),
         *xo = calloc((size_t)n, sizeof(double));
  PK_REQUIRE(b && x && xo, "malloc");
  uint64_t seed = 11;
  for (int64_t i = 0; i < n; i++) b[i] = pk_test_rand(&seed);
  solve_job J = {s, b, x, -1};
  pthread_t th;
  PK_REQUIRE(pthread_create(&th, NULL, solve_job_run, &J) == 0, "pthread_create");
  pthread_barrier_wait(&bar);
  EXPECT_BUSY(ctx, pkrylov_solver_solve(s2, PKRYLOV_MEM_HOST, b, xo), "'s'", "context");
  EXPECT_BUSY(ctx, pkrylov_operator_apply(T, PKRYLOV_MEM_HOST, b, xo), "'A'", "context");
  pthread_barrier_wait(&bar);
  pthread_join(th, NULL);
  PK_EXPECT(J.status == PKRYLOV_SUCCESS, "the held solve returned %d (%s)", J.status,
            pkrylov_error_string(J.status));
  pkrylov_result r;
  PK_REQUIRE_OK(ctx, pkrylov_solver_get_result(s, &r));
  const double rel = pk_test_true_relres(Tc, b, x); /* checked on the CPU backend's operator */
  PK_EXPECT(r.converged && rel <= 1e-9, "held solve: %s, true relative residual %.3g",
            pkrylov_reason_string(r.reason), rel);
  PK_EXPECT_CODE(ctx, pkrylov_solver_solve(s2, PKRYLOV_MEM_HOST, b, xo), PKRYLOV_SUCCESS); /* free again */
  pkrylov_solver_destroy(&s);
  pkrylov_solver_destroy(&s2);
  pkrylov_precond_destroy(&Mc);
  pkrylov_operator_destroy(&Au);
  pkrylov_operator_destroy(&T);
  pkrylov_operator_destroy(&Tc);
  PK_REQUIRE_OK(NULL, pkrylov_context_destroy(&ctx));
  PK_REQUIRE_OK(NULL, pkrylov_context_destroy(&cpu));
  pthread_barrier_destroy(&bar);
  free(b), free(x), free(xo);
  PK_TEST_END();
#endif
}

/**
 * CUDA: CG solves of three contexts in three threads at once, each with the L2 window (the solver option
 * cuda.l2persist=4 or 1; the device's persisting limit belongs to the process): x and the iterations bitwise
 * the solves one after another, and the limit as before once all are done.
 */
PK_TEST_CASE(cuda_l2_windows_at_once) {
#ifndef PK_TEST_HAVE_CUDART
  return PK_SKIP;
#else
  SKIP_WITHOUT_GPU();
  size_t lim0 = 0, lim = 0;
  PK_REQUIRE(cudaDeviceGetLimit(&lim0, cudaLimitPersistingL2CacheSize) == cudaSuccess, "persisting L2 limit");
  pkrylov_context ctx[3];
  system_t sys[3];
  for (int k = 0; k < 3; k++) {
    PK_REQUIRE_OK(NULL, pkrylov_context_create(PKRYLOV_BACKEND_CUDA, &ctx[k]));
    PK_REQUIRE_OK(ctx[k], make_system(&sys[k], ctx[k], NULL, NULL, 32 - 2 * k, 24, 16, PKRYLOV_SOLVER_CG,
                                      300 + (uint64_t)k));
    PK_REQUIRE_OK(ctx[k], pkrylov_solver_set_option(sys[k].s, "cuda.l2persist", k == 2 ? "1" : "4"));
  }
  const int rc = concurrent_vs_sequential(sys, 3);
  PK_EXPECT(cudaDeviceGetLimit(&lim, cudaLimitPersistingL2CacheSize) == cudaSuccess && lim == lim0,
            "the persisting L2 limit is %zu after the solves (%zu before)", lim, lim0);
  for (int k = 0; k < 3; k++) {
    free_system(&sys[k]);
    pkrylov_context_destroy(&ctx[k]);
  }
  return rc == PK_PASS && !pk_test_failures ? PK_PASS : PK_FAIL;
#endif
}

PK_TEST_MAIN(PK_TEST_ENTRY(default_count_follows_affinity), PK_TEST_ENTRY(explicit_count_and_bad_input),
             PK_TEST_ENTRY(one_thread_inside_a_parallel_region), PK_TEST_ENTRY(concurrent_separate_contexts),
             PK_TEST_ENTRY(concurrent_solvers_one_context), PK_TEST_ENTRY(same_solver_two_threads_busy),
             PK_TEST_ENTRY(callback_calling_back_busy), PK_TEST_ENTRY(cuda_context_one_solve_at_a_time),
             PK_TEST_ENTRY(cuda_l2_windows_at_once))

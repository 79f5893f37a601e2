/**
 * @file t311-thread-choice.c
 * @brief White-box test of a solver's choice between the default thread count and one thread
 *        (pk_thread_choice, context.c): the solves' times are set here, so every decision is known in
 *        advance: the first solve is not timed, the third probes one thread, the faster choice is kept,
 *        probes grow rarer (4, 8, ... 64 solves apart) while it holds and come back to 4 when it changes, a
 *        solve on the default count twice as slow as the last one probes at once (one thread's slowing down
 *        does not); no choice with a count the caller set, a default of one thread or a vector below
 *        PK_PAR_MIN_ROWS; the override is the calling thread's and is undone after each solve.
 *
 * CPU backend only (no PK_TEST_BACKENDS line): the thread choice is the CPU backend's.
 */
#include <string.h>

#include "pk_impl.h"
#include "pk_test.h"

typedef struct {
  pkrylov_context ctx;
  pkrylov_operator A;
  pkrylov_precond M;
  pkrylov_solver s;
} rig;

/** A CPU context whose default count is 2 (set here: the machine may have one core) and a CG solver with the
 *  column preconditioner on a thin shell of nx x ny x nz unknowns. */
static int make_rig(rig *R, int nx, int ny, int nz) {
  pkrylov_thinshell_params p;
  int e = pkrylov_context_create(PKRYLOV_BACKEND_CPU, &R->ctx);
  if (!e) e = pkrylov_thinshell_params_default(nx, ny, nz, &p);
  if (!e) e = pkrylov_operator_create_thinshell(R->ctx, &p, &R->A);
  if (!e) e = pkrylov_precond_create(R->ctx, R->A, PKRYLOV_PRECOND_COLUMN, 0, PKRYLOV_LAYOUT_AUTO, &R->M);
  if (!e) e = pkrylov_solver_create(R->ctx, PKRYLOV_SOLVER_CG, R->A, R->M, &R->s);
  if (!e) R->ctx->default_threads = 2;
  return e;
}

/** The cases choose between counts the library has only with OpenMP. */
#ifdef _OPENMP
#define NEED_OPENMP() ((void)0)
#else
#define NEED_OPENMP() return PK_SKIP
#endif

static void free_rig(rig *R) {
  pkrylov_solver_destroy(&R->s);
  pkrylov_precond_destroy(&R->M);
  pkrylov_operator_destroy(&R->A);
  pkrylov_context_destroy(&R->ctx);
}

/**
 * One simulated solve: the count its loops get, then 10 iterations taking t2 seconds each on the default
 * count or t1 on one thread. Returns the count.
 */
static int fake_solve(rig *R, double t2, double t1) {
  pk_threads_begin(R->s);
  const int nt = pk_num_threads(R->ctx);
  R->s->res.iterations = 10;
  R->s->res.solve_time_s = 10 * (nt == 1 ? t1 : t2);
  pk_threads_end(R->s, 1);
  return nt;
}

/**
 * Expected counts of a run of solves: a string of '2' (default) and '1' (one thread), spaces between groups
 * ignored.
 */
static int expect_run(rig *R, const char *want_spaced, double t2, double t1, const char *what) {
  char got[256], want[256];
  size_t k = 0, w = 0;
  for (const char *c = want_spaced; *c && w < sizeof want - 1; c++)
    if (*c != ' ') want[w++] = *c;
  want[w] = '\0';
  for (; want[k] && k < sizeof got - 1; k++) got[k] = (char)('0' + fake_solve(R, t2, t1));
  got[k] = '\0';
  if (strcmp(got, want) != 0) {
    fprintf(stderr, "%s: counts %s, expected %s\n", what, got, want);
    return 1;
  }
  return 0;
}

PK_TEST_CASE(threads_keep_paying) {
  NEED_OPENMP();
  rig R;
  PK_REQUIRE_OK(NULL, make_rig(&R, 64, 32, 24)); /* 49152 unknowns */
  PK_REQUIRE(pk_par(R.s->n), "the rig must lie above PK_PAR_MIN_ROWS = %d", (int)PK_PAR_MIN_ROWS);
  /* two threads twice as fast: warm-up, measure, the 3rd solve probes one thread; the choice holds, so the
     probes come 8, 16, 32, 64 and 64 solves apart (solves 12, 29, 62, 127, 192) */
  char want[200];
  memset(want, '2', 192);
  want[192] = '\0';
  const int probes[] = {2, 11, 28, 61, 126, 191};
  for (int k = 0; k < 6; k++) want[probes[k]] = '1';
  PK_EXPECT(!expect_run(&R, want, 1e-3, 2e-3, "threads pay"), "run");
  free_rig(&R);
  PK_TEST_END();
}

PK_TEST_CASE(starved_threads_fall_back_to_one) {
  NEED_OPENMP();
  rig R;
  PK_REQUIRE_OK(NULL, make_rig(&R, 64, 32, 24));
  /* a busy node: two threads 20 times slower than one. The probe at the 3rd solve switches to one thread; the
     next probe (4 solves later) tries two threads again, finds them still slow, keeps one and waits 8, then
     16 */
  PK_EXPECT(!expect_run(&R, "221 1111 2 11111111 2 1", 20e-3, 1e-3, "starved"), "run");
  /* the node is quiet again: one thread's solves are no slower than before, so only the probe sees it (at
     solve 34); it finds two threads faster and switches back, probing one thread 4 solves later */
  PK_EXPECT(!expect_run(&R, "111111111111111 2 2222 1 2222", 1e-3, 1.5e-3, "quiet again"), "run");
  free_rig(&R);
  PK_TEST_END();
}

PK_TEST_CASE(a_slower_solve_probes_at_once) {
  NEED_OPENMP();
  rig R;
  PK_REQUIRE_OK(NULL, make_rig(&R, 64, 32, 24));
  PK_EXPECT(!expect_run(&R, "221 222", 1e-3, 2e-3, "threads pay"), "run"); /* next probe: solve 12 */
  /* other processes arrive: the next two-thread solve is 30 times slower, so the one after it probes (at
     solve 8, not 12), finds one thread faster and keeps it (next probe at solve 12) */
  PK_EXPECT(!expect_run(&R, "2 1 1", 30e-3, 2e-3, "load arrives"), "run");
  /* more load from solve 10: one thread's solves 5 times slower. That says nothing in favour of two threads,
     so no early probe: the scheduled one, at solve 12 */
  PK_EXPECT(!expect_run(&R, "111 2 1111", 30e-3, 10e-3, "more load"), "run");
  free_rig(&R);
  PK_TEST_END();
}

PK_TEST_CASE(no_choice_where_it_does_not_apply) {
  NEED_OPENMP();
  rig R;
  PK_REQUIRE_OK(NULL, make_rig(&R, 64, 32, 24));
  /* a count the caller set is kept, however slow */
  PK_REQUIRE_OK(R.ctx, pkrylov_context_set_num_threads(R.ctx, 2));
  PK_EXPECT(!expect_run(&R, "2222222222", 50e-3, 1e-3, "count set"), "run");
  /* a default of one thread: nothing to choose */
  PK_REQUIRE_OK(R.ctx, pkrylov_context_set_num_threads(R.ctx, 0));
  R.ctx->default_threads = 1;
  PK_EXPECT(!expect_run(&R, "1111111111", 1e-3, 1e-3, "default 1"), "run");
  free_rig(&R);
  /* a vector below the threshold: its loops run on one thread anyway, the count is not touched */
  rig S;
  PK_REQUIRE_OK(NULL, make_rig(&S, 8, 8, 8));
  PK_REQUIRE(!pk_par(S.s->n), "the small rig must lie below PK_PAR_MIN_ROWS");
  PK_EXPECT(!expect_run(&S, "2222222222", 50e-3, 1e-3, "small"), "run");
  free_rig(&S);
  PK_TEST_END();
}

/** The count the solve's loops got, seen by count_monitor. */
static int seen_threads = -1;
/** Another context (default count 2), and the count its loops get during the solve. */
static pkrylov_context other_ctx;
static int seen_other = -1;

/** A monitor that records the count the solve's loops get (pk_num_threads on the solving thread). */
static int count_monitor(void *user, int32_t it, double res) {
  (void)it, (void)res;
  seen_threads = pk_num_threads(((rig *)user)->ctx);
  seen_other = pk_num_threads(other_ctx);
  return 0;
}

/** The override lives only during the solve, on the solving thread. */
PK_TEST_CASE(override_undone_after_the_solve) {
  NEED_OPENMP();
  rig R;
  PK_REQUIRE_OK(NULL, make_rig(&R, 64, 32, 24));
  PK_EXPECT(!expect_run(&R, "221", 20e-3, 1e-3, "starved"), "run"); /* the solver now chooses one thread */
  PK_EXPECT(pk_num_threads(R.ctx) == 2, "between solves the context's count is %d", pk_num_threads(R.ctx));
  int32_t n = 0;
  PK_REQUIRE_OK(R.ctx, pkrylov_context_get_num_threads(R.ctx, &n));
  PK_EXPECT(n == 2, "get_num_threads %d", (int)n);
  /* a real solve with the choice of one thread: its result is right and the count is back afterwards */
  double *b = malloc(sizeof(double) * (size_t)R.s->n), *x = calloc((size_t)R.s->n, sizeof(double));
  PK_REQUIRE(b && x, "malloc");
  uint64_t seed = 5;
  for (int64_t i = 0; i < R.s->n; i++) b[i] = pk_test_rand(&seed);
  PK_REQUIRE_OK(R.ctx, pkrylov_solver_set_tolerances(R.s, 1e-8, 0));
  PK_REQUIRE_OK(R.ctx, pkrylov_solver_set_monitor(R.s, count_monitor, &R));
  PK_REQUIRE_OK(NULL, pkrylov_context_create(PKRYLOV_BACKEND_CPU, &other_ctx));
  other_ctx->default_threads = 2; /* the choice is the solver's, for its own context only */
  PK_REQUIRE_OK(R.ctx, pkrylov_solver_solve(R.s, PKRYLOV_MEM_HOST, b, x));
  PK_EXPECT(seen_threads == 1, "the solve's loops got %d threads, the solver chose one", seen_threads);
  PK_EXPECT(seen_other == 2, "another context's loops during the solve got %d threads, its default is 2",
            seen_other);
  PK_EXPECT(pk_num_threads(R.ctx) == 2, "after a solve the context's count is %d", pk_num_threads(R.ctx));
  pkrylov_result res;
  PK_REQUIRE_OK(R.ctx, pkrylov_solver_get_result(R.s, &res));
  PK_EXPECT(res.converged && pk_test_true_relres(R.A, b, x) <= 1e-7, "solve: %s",
            pkrylov_reason_string(res.reason));
  free(b), free(x);
  pkrylov_context_destroy(&other_ctx);
  free_rig(&R);
  PK_TEST_END();
}

PK_TEST_MAIN(PK_TEST_ENTRY(threads_keep_paying), PK_TEST_ENTRY(starved_threads_fall_back_to_one),
             PK_TEST_ENTRY(a_slower_solve_probes_at_once), PK_TEST_ENTRY(no_choice_where_it_does_not_apply),
             PK_TEST_ENTRY(override_undone_after_the_solve))

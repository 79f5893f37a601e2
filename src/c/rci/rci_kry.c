/**
 * @file rci_kry.c
 * @brief Handle-based reverse communication on host vectors, every solver type: the library's own solve
 *        (pkrylov_solver_solve, i.e. the solve frame pk_kry_solve and the engine's drivers of cg.c,
 *        bicgstab.c, gmres.c, cagmres.c, srcg.c) runs unchanged as a coroutine in a worker thread.
 *
 * The rci owns a private CPU context with
 *  - a user operator and (when preconditioned) a user preconditioner whose routines do not compute
 *    anything: they post a MATVEC or PRECOND request with the driver's operand and result vectors and wait
 *    for the caller's answer;
 *  - with reduce_by_caller, the reduction hook of reduce.c (pk_reduce_hook): pk_allreduce_begin posts
 *    REDUCE_START with the driver's local sums, pk_allreduce_end REDUCE_WAIT with the same array, and the
 *    blocking pk_allreduce_sum both in a row. So the requests and their order are exactly the driver's: the
 *    asynchronous reductions of the pipelined methods appear as START, PRECOND, MATVEC, WAIT.
 *  - without reduce_by_caller on a context with a communicator (pk_distributed), the same hook: the
 *    caller's thread serves those requests itself inside pkrylov_rci_step (pk_allreduce_begin / _end on the
 *    caller's context, so that MPI is called from the caller's thread only) and hands the turn back.
 *
 * Handoff: one mutex and one condition variable; `turn` says which side runs (the caller, in
 * pkrylov_rci_step and when it answers, or the worker, in the driver). Each side changes the shared fields
 * only while it has the turn and passes the turn under the mutex, so exactly one side runs at a time and
 * every access is ordered by the mutex (the driver's OpenMP loops run in the worker thread, with its own
 * team). The worker is made with the rci and lives until it is destroyed; it runs one solve per
 * pkrylov_rci_start, begun at the first pkrylov_rci_step.
 *
 * The solve works on the rci's own copy of x (xw: the caller's initial guess copied in at the start, the
 * result copied out to the caller's x at DONE), so an abandoned solve never writes to the caller's arrays,
 * which may already be gone then.
 *
 * Abandoning a solve (a new start, destroy): `abort` is set and the worker is given the turn; the pending
 * routine returns nonzero (or the hook an error), so the driver stops with PKRYLOV_ERR_CALLBACK exactly as
 * on a failing user callback: every later routine or hook returns at once without posting, and the worker
 * hands the turn back when pkrylov_solver_solve has returned. Nothing is left allocated or running.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "pk_kry.h"
#include "pk_rci.h"

enum { TURN_CALLER, TURN_WORKER };
enum { CMD_NONE, CMD_SOLVE, CMD_QUIT };

struct pk_rci_kry {
  pkrylov_context ctx;  /* the caller's: errors */
  pkrylov_context pctx; /* private CPU context: the operator, preconditioner, solver and the hook */
  pkrylov_operator A;
  pkrylov_precond M; /* NULL without preconditioner */
  pkrylov_solver s;
  int64_t n;
  int32_t by_caller;    /* the caller answers the REDUCE requests */
  pk_reduce_request rq; /* without it, on a distributed context: the sum in flight over ctx's communicator */
  pthread_t thread;
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int have_mu, have_cv, have_thread;
  /* shared between the sides: read and written only by the side that has the turn */
  int turn;           /* TURN_CALLER or TURN_WORKER (changed under mu) */
  int cmd;            /* what the worker does when it gets the turn outside a solve */
  int abort;          /* the caller abandons the solve in progress */
  int busy;           /* a solve runs in the worker (it holds a request pending) */
  int pending;        /* a solve was started (pkrylov_rci_start) and not begun yet */
  int32_t req, npart; /* the request posted */
  double *in, *out, *part;
  const double *b; /* the solve's arrays: the caller's b and x */
  double *x;
  double *xw;         /* n: the iterate the solve works on */
  int ierr;           /* status of the finished solve */
  pkrylov_result res; /* and its result */
};

/* ---- worker side -------------------------------------------------------------------------------- */

/** Post request q and wait for the answer. Returns 1 when the solve is being abandoned (nothing posted). */
static int rk_post(pk_rci_kry *K, int32_t q, double *in, double *out, double *part, int32_t npart) {
  pthread_mutex_lock(&K->mu);
  int ab = K->abort;
  if (!ab) {
    K->req = q;
    K->in = in;
    K->out = out;
    K->part = part;
    K->npart = npart;
    K->turn = TURN_CALLER;
    pthread_cond_broadcast(&K->cv);
    while (K->turn != TURN_WORKER)
      pthread_cond_wait(&K->cv, &K->mu);
    ab = K->abort;
  }
  pthread_mutex_unlock(&K->mu);
  return ab;
}

/** The user operator's routine: y = A x by the caller (nonzero: abandoned). */
static int rk_matvec(void *data, int64_t n, const double *x, double *y) {
  (void)n;
  return rk_post((pk_rci_kry *)data, PKRYLOV_RCI_MATVEC, (double *)x, y, NULL, 0);
}

/** The user preconditioner's routine: y = M^-1 x by the caller. */
static int rk_precond(void *data, int64_t n, const double *x, double *y) {
  (void)n;
  return rk_post((pk_rci_kry *)data, PKRYLOV_RCI_PRECOND, (double *)x, y, NULL, 0);
}

static int rk_abandoned(pkrylov_context ctx) {
  return pk_error(ctx, PKRYLOV_ERR_CALLBACK, "pkrylov_rci", "the solve was abandoned");
}

/** Hook: the caller starts the global sum of vals[0..count). */
static int rk_hook_begin(void *data, pkrylov_context ctx, double *vals, int count) {
  if (rk_post((pk_rci_kry *)data, PKRYLOV_RCI_REDUCE_START, NULL, NULL, vals, count))
    return rk_abandoned(ctx);
  return PKRYLOV_SUCCESS;
}

/** Hook: the caller finishes it (vals then hold the global sums). */
static int rk_hook_end(void *data, pkrylov_context ctx, double *vals, int count) {
  if (rk_post((pk_rci_kry *)data, PKRYLOV_RCI_REDUCE_WAIT, NULL, NULL, vals, count))
    return rk_abandoned(ctx);
  return PKRYLOV_SUCCESS;
}

/** Hook: a blocking global sum, START and WAIT in a row. */
static int rk_hook_sum(void *data, pkrylov_context ctx, double *vals, int count) {
  PK_CALL(rk_hook_begin(data, ctx, vals, count));
  return rk_hook_end(data, ctx, vals, count);
}

static const pk_reduce_hook rk_hook = {rk_hook_sum, rk_hook_begin, rk_hook_end};

/** The worker thread: one pkrylov_solver_solve per CMD_SOLVE, until CMD_QUIT. */
static void *rk_main(void *arg) {
  pk_rci_kry *K = (pk_rci_kry *)arg;
  pthread_mutex_lock(&K->mu);
  for (;;) {
    while (K->turn != TURN_WORKER)
      pthread_cond_wait(&K->cv, &K->mu);
    if (K->cmd == CMD_QUIT)
      break;
    K->cmd = CMD_NONE;
    pthread_mutex_unlock(&K->mu);
    pkrylov_result res;
    memset(&res, 0, sizeof res);
    int ierr = pkrylov_solver_solve(K->s, PKRYLOV_MEM_HOST, K->b, K->xw);
    if (!ierr)
      ierr = pkrylov_solver_get_result(K->s, &res);
    pthread_mutex_lock(&K->mu);
    K->ierr = ierr;
    K->res = res;
    K->busy = 0;
    K->req = PKRYLOV_RCI_DONE;
    K->in = K->out = K->part = NULL;
    K->npart = 0;
    K->turn = TURN_CALLER;
    pthread_cond_broadcast(&K->cv);
  }
  pthread_mutex_unlock(&K->mu);
  return NULL;
}

/* ---- caller side -------------------------------------------------------------------------------- */

/** Give the worker the turn and wait until it hands it back (with K->mu held). */
static void rk_run_worker(pk_rci_kry *K) {
  K->turn = TURN_WORKER;
  pthread_cond_broadcast(&K->cv);
  while (K->turn != TURN_CALLER)
    pthread_cond_wait(&K->cv, &K->mu);
}

void pk_rci_kry_abandon(pk_rci_kry *K) {
  if (!K)
    return;
  K->pending = 0;
  if (K->rq.active) /* a sum over ctx's communicator started for the driver: finish it (every rank does) */
    (void)pk_allreduce_end(K->ctx, &K->rq);
  if (!K->busy)
    return;
  pthread_mutex_lock(&K->mu);
  K->abort = 1;
  while (K->busy)
    rk_run_worker(K); /* after the abort the worker hands back only at the end of the solve */
  K->abort = 0;
  pthread_mutex_unlock(&K->mu);
  pkrylov_context_clear_error(K->pctx);
}

void pk_rci_kry_destroy(pk_rci_kry *K) {
  if (!K)
    return;
  if (K->have_thread) {
    pk_rci_kry_abandon(K);
    pthread_mutex_lock(&K->mu);
    K->cmd = CMD_QUIT;
    K->turn = TURN_WORKER;
    pthread_cond_broadcast(&K->cv);
    pthread_mutex_unlock(&K->mu);
    pthread_join(K->thread, NULL);
  }
  if (K->have_cv)
    pthread_cond_destroy(&K->cv);
  if (K->have_mu)
    pthread_mutex_destroy(&K->mu);
  pkrylov_solver_destroy(&K->s);
  pkrylov_precond_destroy(&K->M);
  pkrylov_operator_destroy(&K->A);
  pkrylov_context_destroy(&K->pctx);
  free(K->xw);
  free(K);
}

/** Copy the private context's last error into the caller's context (as raised by func). */
static int rk_forward(pk_rci_kry *K, int ierr, const char *func) {
  const char *msg = "";
  pkrylov_context_get_last_error(K->pctx, NULL, &msg);
  ierr = pk_error(K->ctx, ierr, func, "%s", msg && msg[0] ? msg : pkrylov_error_string(ierr));
  pkrylov_context_clear_error(K->pctx);
  return ierr;
}

int pk_rci_kry_create(pkrylov_context ctx, int32_t type, int64_t n, int32_t preconditioned,
                      int32_t reduce_by_caller, pk_rci_kry **out) {
  const char *func = "pkrylov_rci_create";
  *out = NULL;
  pk_rci_kry *K = calloc(1, sizeof *K);
  if (!K)
    return pk_error(ctx, PKRYLOV_ERR_OUT_OF_MEMORY, func, "cannot allocate the reverse-communication state");
  K->ctx = ctx;
  K->n = n;
  K->xw = calloc((size_t)n, sizeof(double));
  if (!K->xw) {
    free(K);
    return pk_error(ctx, PKRYLOV_ERR_OUT_OF_MEMORY, func, "cannot allocate a vector of %lld values",
                    (long long)n);
  }
  K->turn = TURN_CALLER;
  int ierr = pkrylov_context_create(PKRYLOV_BACKEND_CPU, &K->pctx);
  if (ierr) {
    free(K->xw);
    free(K);
    return pk_error(ctx, ierr, func, "cannot make the private context: %s", pkrylov_last_error_message());
  }
  if (!(ierr = pkrylov_operator_create_user(K->pctx, n, rk_matvec, K, &K->A)) && preconditioned)
    ierr = pkrylov_precond_create_user(K->pctx, n, rk_precond, K, &K->M);
  if (!ierr)
    ierr = pkrylov_solver_create(K->pctx, type, K->A, K->M, &K->s);
  if (ierr) {
    ierr = rk_forward(K, ierr, func);
    pk_rci_kry_destroy(K);
    return ierr;
  }
  K->by_caller = reduce_by_caller;
  K->pctx->reduce_hook_data = K;
  if (pthread_mutex_init(&K->mu, NULL) == 0)
    K->have_mu = 1;
  if (K->have_mu && pthread_cond_init(&K->cv, NULL) == 0)
    K->have_cv = 1;
  if (K->have_cv && pthread_create(&K->thread, NULL, rk_main, K) == 0)
    K->have_thread = 1;
  if (!K->have_thread) {
    pk_rci_kry_destroy(K);
    return pk_error(ctx, PKRYLOV_ERR_OUT_OF_MEMORY, func, "cannot start the solver's worker thread");
  }
  *out = K;
  return PKRYLOV_SUCCESS;
}

int pk_rci_kry_start(pk_rci_kry *K, const pk_rci_kry_settings *set, const double *b, double *x,
                     int32_t x_nonzero) {
  const char *func = "pkrylov_rci_start";
  pk_rci_kry_abandon(K);
  pkrylov_solver s = K->s;
  int ierr = pkrylov_solver_set_tolerances(s, set->rtol, set->atol);
  if (!ierr)
    ierr = pkrylov_solver_set_max_iterations(s, set->maxit);
  if (!ierr)
    ierr = pkrylov_solver_set_residual_replacement(s, set->replace_interval);
  if (!ierr)
    ierr = pkrylov_solver_set_restart(s, set->restart);
  if (!ierr)
    ierr = pkrylov_solver_set_step(s, set->step);
  if (!ierr)
    ierr = pkrylov_solver_set_initial_guess_nonzero(s, x_nonzero);
  if (!ierr) /* the caller's context's count: its setting, else its default (a rank's share of its node) */
    ierr = pkrylov_context_set_num_threads(K->pctx, K->ctx->num_threads);
  K->pctx->default_threads = K->ctx->default_threads;
  if (ierr)
    return rk_forward(K, ierr, func);
  /* the global sums: the caller's, or over the caller's communicator (served in pk_rci_kry_step), or the
     private context's (one rank: the local sums) */
  K->pctx->reduce_hook = K->by_caller || pk_distributed(K->ctx) ? &rk_hook : NULL;
  K->b = b;
  K->x = x;
  if (x_nonzero)
    memcpy(K->xw, x, sizeof(double) * (size_t)K->n);
  K->pending = 1;
  return PKRYLOV_SUCCESS;
}

int pk_rci_kry_step(pk_rci_kry *K, int32_t *req, double **in, double **out, double **partials,
                    int32_t *npartials, pkrylov_result *res) {
  pthread_mutex_lock(&K->mu);
  if (!K->busy) { /* the first step of a solve: the worker begins it */
    if (!K->pending) {
      pthread_mutex_unlock(&K->mu);
      return pk_error(K->ctx, PKRYLOV_ERR_INTERNAL, "pkrylov_rci_step", "no solve to run");
    }
    K->pending = 0;
    K->busy = 1;
    K->cmd = CMD_SOLVE;
  }
  rk_run_worker(K);
  /* without reduce_by_caller (distributed context): the global sums over the caller's communicator, here */
  while (!K->by_caller && (K->req == PKRYLOV_RCI_REDUCE_START || K->req == PKRYLOV_RCI_REDUCE_WAIT)) {
    int ierr = K->req == PKRYLOV_RCI_REDUCE_START ? pk_allreduce_begin(K->ctx, K->part, K->npart, &K->rq)
                                                  : pk_allreduce_end(K->ctx, &K->rq);
    if (ierr) { /* (the message is in ctx) */
      pthread_mutex_unlock(&K->mu);
      pk_rci_kry_abandon(K);
      return ierr;
    }
    rk_run_worker(K);
  }
  pthread_mutex_unlock(&K->mu);
  *req = K->req;
  *in = K->in;
  *out = K->out;
  *partials = K->part;
  *npartials = K->npart;
  if (K->req != PKRYLOV_RCI_DONE)
    return PKRYLOV_SUCCESS;
  if (K->ierr)
    return rk_forward(K, K->ierr, "pkrylov_rci_step"); /* x keeps its value from the start */
  memcpy(K->x, K->xw, sizeof(double) * (size_t)K->n);
  *res = K->res;
  return PKRYLOV_SUCCESS;
}

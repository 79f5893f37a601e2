/**
 * @file rci.c
 * @brief Handle-based reverse communication (pkrylov_rci_*): the front end. Argument checks, the settings
 *        and the routing of a solve to one of two paths:
 *
 * - host vectors (every backend, every solver type): rci_kry.c runs the library's own solve
 *   (pkrylov_solver_solve: the solve frame pk_kry_solve and the engine's drivers of cg.c, bicgstab.c,
 *   gmres.c, cagmres.c, srcg.c) as a coroutine in a worker thread and turns its operator, preconditioner and
 *   global sums into the caller's requests; CG and pipelined CG are cg.c's drivers, written once;
 * - device vectors (mem = PKRYLOV_MEM_DEVICE on a CUDA context; CG and pipelined CG): rci_dev.c, a state
 *   machine whose vector steps are the backend's kernels.
 *
 * Every type takes its settings when a solve starts; a setter in the middle of a solve is refused.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "pk_kry.h"
#include "pk_rci.h"

struct pkrylov_rci_s {
  pkrylov_context ctx;
  int32_t type, preconditioned, by_caller;
  int64_t n;
  double rtol, atol;
  int32_t maxit, replace_interval, restart, step;
  pk_rci_kry *kry; /* host vectors: the coroutine (made with the rci) */
  pk_rci_dev *dev; /* device vectors (CG, pipelined CG on a device backend): made at the first device start */
  int32_t on_dev;  /* the solve in progress runs on dev */
  /* the request being answered */
  int32_t req, npart;
  double *in, *out, *part;
  int32_t active, has_result;
  pkrylov_result done;
};

int pkrylov_rci_create(pkrylov_context ctx, int32_t type, int64_t n, int32_t preconditioned,
                       int32_t reduce_by_caller, pkrylov_rci *r) {
  PK_CHECK(ctx != NULL, NULL, PKRYLOV_ERR_NULL_POINTER, "argument 'ctx' is NULL");
  PK_CHECK_PTR(r, ctx);
  PK_CHECK(type == PKRYLOV_SOLVER_CG || type == PKRYLOV_SOLVER_PIPECG || pk_kry_is_kry_type(type), ctx,
           PKRYLOV_ERR_INVALID_VALUE, "argument 'type' = %d is not a pkrylov_solver_type (%d to %d)", type,
           PKRYLOV_SOLVER_CG, PKRYLOV_SOLVER_SRCG);
  PK_CHECK(n > 0, ctx, PKRYLOV_ERR_INVALID_SIZE, "argument 'n' = %lld must be > 0", (long long)n);
  PK_CHECK(preconditioned == 0 || preconditioned == 1, ctx, PKRYLOV_ERR_INVALID_VALUE,
           "argument 'preconditioned' = %d must be 0 or 1", preconditioned);
  PK_CHECK(reduce_by_caller == 0 || reduce_by_caller == 1, ctx, PKRYLOV_ERR_INVALID_VALUE,
           "argument 'reduce_by_caller' = %d must be 0 or 1", reduce_by_caller);
  PK_CHECK(!ctx->be->device || type == PKRYLOV_SOLVER_CG || type == PKRYLOV_SOLVER_PIPECG, ctx,
           PKRYLOV_ERR_UNSUPPORTED,
           "argument 'ctx': reverse communication on the %s backend is implemented for CG and pipelined CG only",
           ctx->be->name);
  /* the most vectors of n values a path keeps: the device state machine's (pipelined CG 11, CG 6), 4 else */
  const int nvec = pk_kry_is_kry_type(type) ? 4 : type == PKRYLOV_SOLVER_CG ? 6 : 11;
  PK_CHECK((uint64_t)n <= SIZE_MAX / sizeof(double) / (size_t)nvec, ctx, PKRYLOV_ERR_INVALID_SIZE,
           "argument 'n' = %lld is too large", (long long)n);
  struct pkrylov_rci_s *R;
  PK_CALLOC(R, 1, ctx);
  int ierr = pk_rci_kry_create(ctx, type, n, preconditioned, reduce_by_caller, &R->kry);
  if (ierr) {
    free(R);
    return ierr;
  }
  R->ctx = ctx;
  R->type = type;
  R->n = n;
  R->preconditioned = preconditioned;
  R->by_caller = reduce_by_caller;
  R->rtol = 1e-8;
  R->atol = 0.0;
  R->maxit = 1000;
  R->replace_interval = 50;
  R->restart = 30;
  R->step = 0;
  ctx->live_objects++;
  *r = R;
  return PKRYLOV_SUCCESS;
}

int pkrylov_rci_destroy(pkrylov_rci *r) {
  PK_CHECK(r != NULL, NULL, PKRYLOV_ERR_NULL_POINTER, "argument 'r' is NULL");
  if (!*r)
    return PKRYLOV_SUCCESS;
  (*r)->ctx->live_objects--;
  pk_rci_kry_destroy((*r)->kry); /* abandons a solve in progress, stops the worker */
  pk_rci_dev_destroy((*r)->dev);
  free(*r);
  *r = NULL;
  return PKRYLOV_SUCCESS;
}

/** A solve takes its settings at pkrylov_rci_start: none may change mid-solve. */
#define RCI_CHECK_SETTABLE(r)                                                                                \
  PK_CHECK(!(r)->active, (r)->ctx, PKRYLOV_ERR_INVALID_STATE,                                                \
           "a solve is in progress: settings change between solves (finish it, or abandon it with "          \
           "pkrylov_rci_start)")

int pkrylov_rci_set_tolerances(pkrylov_rci r, double rtol, double atol) {
  PK_CHECK(r != NULL, NULL, PKRYLOV_ERR_NULL_POINTER, "argument 'r' is NULL");
  RCI_CHECK_SETTABLE(r);
  PK_CHECK(isfinite(rtol) && rtol >= 0, r->ctx, PKRYLOV_ERR_INVALID_VALUE,
           "argument 'rtol' = %g must be finite and >= 0", rtol);
  PK_CHECK(isfinite(atol) && atol >= 0, r->ctx, PKRYLOV_ERR_INVALID_VALUE,
           "argument 'atol' = %g must be finite and >= 0", atol);
  PK_CHECK(rtol > 0 || atol > 0, r->ctx, PKRYLOV_ERR_INVALID_VALUE,
           "arguments 'rtol' and 'atol' are both 0: the solve could never stop on its own");
  r->rtol = rtol;
  r->atol = atol;
  return PKRYLOV_SUCCESS;
}

int pkrylov_rci_set_max_iterations(pkrylov_rci r, int32_t maxit) {
  PK_CHECK(r != NULL, NULL, PKRYLOV_ERR_NULL_POINTER, "argument 'r' is NULL");
  RCI_CHECK_SETTABLE(r);
  PK_CHECK(maxit >= 0, r->ctx, PKRYLOV_ERR_INVALID_VALUE, "argument 'maxit' = %d must be >= 0", maxit);
  r->maxit = maxit;
  return PKRYLOV_SUCCESS;
}

int pkrylov_rci_set_residual_replacement(pkrylov_rci r, int32_t k) {
  PK_CHECK(r != NULL, NULL, PKRYLOV_ERR_NULL_POINTER, "argument 'r' is NULL");
  RCI_CHECK_SETTABLE(r);
  PK_CHECK(k >= 0, r->ctx, PKRYLOV_ERR_INVALID_VALUE,
           "argument 'k' = %d must be >= 0 (the handles replace at fixed intervals: no PKRYLOV_REPLACE_AUTO)", k);
  r->replace_interval = k;
  return PKRYLOV_SUCCESS;
}

int pkrylov_rci_set_restart(pkrylov_rci r, int32_t m) {
  PK_CHECK(r != NULL, NULL, PKRYLOV_ERR_NULL_POINTER, "argument 'r' is NULL");
  RCI_CHECK_SETTABLE(r);
  PK_CHECK(m >= 1 && m <= 1000, r->ctx, PKRYLOV_ERR_INVALID_VALUE, "argument 'm' = %d must be in [1, 1000]",
           m);
  r->restart = m;
  return PKRYLOV_SUCCESS;
}

int pkrylov_rci_set_step(pkrylov_rci r, int32_t step) {
  PK_CHECK(r != NULL, NULL, PKRYLOV_ERR_NULL_POINTER, "argument 'r' is NULL");
  RCI_CHECK_SETTABLE(r);
  PK_CHECK(step >= 0 && step <= 16, r->ctx, PKRYLOV_ERR_INVALID_VALUE,
           "argument 'step' = %d must be in [0, 16] (0 = auto)", step);
  r->step = step;
  return PKRYLOV_SUCCESS;
}

int pkrylov_rci_start(pkrylov_rci r, int32_t mem, const double *b, double *x, int32_t x_nonzero) {
  PK_CHECK(r != NULL, NULL, PKRYLOV_ERR_NULL_POINTER, "argument 'r' is NULL");
  pkrylov_context ctx = r->ctx;
  PK_CALL(pk_check_vectors(ctx, __func__, mem, b, "b", x, "x", r->n));
  PK_CHECK(x_nonzero == 0 || x_nonzero == 1, ctx, PKRYLOV_ERR_INVALID_VALUE,
           "argument 'x_nonzero' = %d must be 0 or 1", x_nonzero);
  /* the reverse-communication solves sum their local dots as doubles (the caller's or the library's
     reduction): not the exact sums reproducible mode promises, so they refuse it rather than ignore it */
  PK_CHECK(!ctx->reproducible, ctx, PKRYLOV_ERR_UNSUPPORTED,
           "reproducible mode (pkrylov_context_set_reproducible) is not implemented for reverse "
           "communication; solve with pkrylov_solver_solve, or turn it off for this context");
  /* device vectors: CG or pipelined CG (pkrylov_rci_create refuses the other types on a device backend) */
  const int on_device = ctx->be->rci_create && mem == PKRYLOV_MEM_DEVICE;
  if (ctx->be->rci_create) { /* b and x where mem says */
    PK_CALL(ctx->be->check_pointer(ctx, __func__, mem, b, "b"));
    PK_CALL(ctx->be->check_pointer(ctx, __func__, mem, x, "x"));
  }
  if (on_device) {
    if (!r->dev)
      PK_CALL(pk_rci_dev_create(ctx, r->type, r->n, r->preconditioned, r->by_caller, &r->dev));
    PK_CALL(pk_rci_dev_check(r->dev, __func__, b, x, x_nonzero));
  } else {
    int64_t bad = pk_first_nonfinite(b, r->n);
    PK_CHECK(bad < 0, ctx, PKRYLOV_ERR_NOT_FINITE, "argument 'b' has a non-finite value (%g) at index %lld",
             bad >= 0 ? b[bad] : 0.0, (long long)bad);
    if (x_nonzero) {
      bad = pk_first_nonfinite(x, r->n);
      PK_CHECK(bad < 0, ctx, PKRYLOV_ERR_NOT_FINITE,
               "argument 'x' (initial guess) has a non-finite value (%g) at index %lld",
               bad >= 0 ? x[bad] : 0.0, (long long)bad);
    }
  }
  /* every check passed: abandon a solve in progress (it writes nothing of the caller's while it unwinds) */
  pk_rci_kry_abandon(r->kry);
  r->active = 0;
  pk_rci_kry_settings set = {r->rtol, r->atol, r->maxit, r->replace_interval, r->restart, r->step};
  if (on_device) {
    PK_CALL(pk_rci_dev_start(r->dev, &set, b, x, x_nonzero));
  } else {
    if (!x_nonzero)
      memset(x, 0, sizeof(double) * (size_t)r->n);
    PK_CALL(pk_rci_kry_start(r->kry, &set, b, x, x_nonzero));
  }
  r->on_dev = on_device;
  r->active = 1;
  return PKRYLOV_SUCCESS;
}

int pkrylov_rci_step(pkrylov_rci r, int32_t *request, double **in, double **out, double **partials,
                     int32_t *npartials) {
  PK_CHECK(r != NULL, NULL, PKRYLOV_ERR_NULL_POINTER, "argument 'r' is NULL");
  PK_CHECK_PTR(request, r->ctx);
  PK_CHECK(r->active, r->ctx, PKRYLOV_ERR_INVALID_STATE,
           "no solve in progress: call pkrylov_rci_start first (a finished solve answered PKRYLOV_RCI_DONE)");
  double *in_, *out_, *part_;
  int32_t q, np;
  pkrylov_result res;
  int ierr = r->on_dev ? pk_rci_dev_step(r->dev, &q, &in_, &out_, &part_, &np, &res)
                       : pk_rci_kry_step(r->kry, &q, &in_, &out_, &part_, &np, &res);
  if (ierr || q == PKRYLOV_RCI_DONE)
    r->active = 0;
  if (ierr)
    return ierr;
  if (q == PKRYLOV_RCI_DONE) {
    r->done = res;
    r->has_result = 1;
  }
  r->req = q;
  r->in = in_;
  r->out = out_;
  r->part = part_;
  r->npart = np;
  const int is_vec = r->req == PKRYLOV_RCI_MATVEC || r->req == PKRYLOV_RCI_PRECOND;
  const int is_red = r->req == PKRYLOV_RCI_REDUCE_START || r->req == PKRYLOV_RCI_REDUCE_WAIT;
  *request = r->req;
  if (in)
    *in = is_vec ? r->in : NULL;
  if (out)
    *out = is_vec ? r->out : NULL;
  if (partials)
    *partials = is_red ? r->part : NULL;
  if (npartials)
    *npartials = is_red ? r->npart : 0;
  return PKRYLOV_SUCCESS;
}

int pkrylov_rci_get_result(pkrylov_rci r, pkrylov_result *res) {
  PK_CHECK(r != NULL, NULL, PKRYLOV_ERR_NULL_POINTER, "argument 'r' is NULL");
  PK_CHECK_PTR(res, r->ctx);
  PK_CHECK(r->has_result, r->ctx, PKRYLOV_ERR_INVALID_STATE, "no solve has finished with this rci");
  *res = r->done;
  return PKRYLOV_SUCCESS;
}

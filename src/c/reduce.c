/**
 * @file reduce.c
 * @brief The global reduction layer. Every global sum a solver needs goes through pk_allreduce_sum() or
 *        the split-phase pk_allreduce_begin()/pk_allreduce_end() pair, so distributing the solve (MPI) or a
 *        reproducible summation mode is a change in this file only. Without MPI the local sums are global.
 */
#include "pk_impl.h"

/* ---- the reduction hook (pk_reduce_hook, pk_impl.h): one line at the top of each pk_allreduce_* hands
   the sum to the hook of the context when it has one (the private context of a reverse-communication
   solve, rci_kry.c); nothing else in this file knows about it (a hooked request is finished by
   reduce_hook_end only, which reads vals, count and active). ---------------------------------------- */

static int reduce_hook_begin(pkrylov_context ctx, double *vals, int count, pk_reduce_request *req) {
  req->vals = vals;
  req->count = count;
  req->active = 1;
  int ierr = ctx->reduce_hook->begin(ctx->reduce_hook_data, ctx, vals, count);
  if (ierr) req->active = 0;
  return ierr;
}

static int reduce_hook_end(pkrylov_context ctx, pk_reduce_request *req) {
  if (!req->active) return pk_error(ctx, PKRYLOV_ERR_INTERNAL, __func__, "no reduction in flight");
  req->active = 0;
  return ctx->reduce_hook->end(ctx->reduce_hook_data, ctx, req->vals, req->count);
}

/* ---- end of the hook -------------------------------------------------------------------------------- */

int pk_allreduce_sum(pkrylov_context ctx, double *vals, int count) {
  if (ctx && ctx->reduce_hook) /* hook */
    return ctx->reduce_hook->sum(ctx->reduce_hook_data, ctx, vals, count);
  (void)ctx;
  (void)vals;
  (void)count;
  return PKRYLOV_SUCCESS;
}

int pk_allreduce_begin(pkrylov_context ctx, double *vals, int count, pk_reduce_request *req) {
  if (ctx && ctx->reduce_hook) return reduce_hook_begin(ctx, vals, count, req); /* hook */
  req->vals = vals;
  req->count = count;
  req->active = 1;
  return PKRYLOV_SUCCESS;
}

int pk_allreduce_end(pkrylov_context ctx, pk_reduce_request *req) {
  if (ctx && ctx->reduce_hook) return reduce_hook_end(ctx, req); /* hook */
  if (!req->active) return pk_error(ctx, PKRYLOV_ERR_INTERNAL, __func__, "no reduction in flight");
  req->active = 0;
  return PKRYLOV_SUCCESS; /* without MPI the local sums are already global */
}

void pk_sum_partials(const double *partials, int64_t nchunks, int nvals, double *sums) {
  for (int j = 0; j < nvals; j++) sums[j] = 0.0;
  for (int64_t c = 0; c < nchunks; c++)
    for (int j = 0; j < nvals; j++) sums[j] += partials[c * nvals + j];
}

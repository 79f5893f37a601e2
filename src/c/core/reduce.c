/**
 * @file reduce.c
 * @brief The global reduction layer. Every global sum a solver needs goes through pk_allreduce_sum(),
 *        pk_allreduce_dots() or the split-phase pk_allreduce_begin()/pk_allreduce_dots_begin() and
 *        pk_allreduce_end(), so distributing the solve (MPI) and the reproducible summation mode live in
 *        this file only.
 *
 * Default mode: the local sums (fixed-order chunked sums of the fused loops) are added over the ranks
 * through the context's communication table (pk_comm.h): MPI_Allreduce (blocking) or MPI_Iallreduce +
 * MPI_Wait (split phase: pipelined CG starts it after its fused update and finishes it after the
 * preconditioner). Without a communicator the local sums are the global ones and nothing is sent.
 *
 * Reproducible mode (pkrylov_context_set_reproducible): a dot product is summed exactly, by the fused loop
 * that reads its vectors (pk_xdot, xdot.c; pk_allreduce_xacc_begin reduces what it filled) or in a pass of
 * its own (pk_allreduce_dots, pk_allreduce_xdots_begin), into an exact accumulator: a double m 2^e (m a 53-bit integer) is added as the three 32-bit digits of m
 * shifted to its bit position, each digit into an int64 slot (room for 2^31 additions before a carry
 * pass), the digits covering 2^-1074 to 2^1070 plus carries. Integer addition is exact and associative,
 * so the accumulators of the threads and of the ranks (MPI_SUM over MPI_INT64_T) add up to the same
 * integer whatever the order and the decomposition; after a carry pass into canonical digits (0 <= d <
 * 2^32 below the top one) it is rounded to a double by a fixed procedure. The result is the exact sum of
 * the (rounded) products, rounded once: bitwise the same for any number of ranks, threads and chunks.
 */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "pk_comm.h"
#include "pk_impl.h"

/* ------------------------------------------------------------------------------------------------ */
/* Exact accumulator                                                                                 */

/* The digit format, xacc_add, xacc_normalize and xacc_value: pk_xacc.h (shared with the CUDA kernels, so
   both backends give the same accumulator and the same double). */
#define xacc_add pk_xacc_add
#define xacc_normalize pk_xacc_normalize
#define xacc_value pk_xacc_value

/**
 * Exact local accumulators acc[j] of the dots (x[j], y[j]) over n values (wet rows only when wet != 0), any
 * count (in groups of PK_XACC_MAX per pass over the rows). exact_prod 0: the rounded products are summed
 * exactly; 1: the exact products (p + e = x*y by fma, both added), so the result is the exact dot product
 * rounded once. Each thread sums its chunks in its expansions (pk_xdot, xdot.c), the threads' exact sums
 * are added as integers.
 */
static void xacc_dots(pkrylov_context ctx, int count, int64_t n, const double *const *x, const double *const *y,
                      const uint8_t *wet, int exact_prod, int64_t *acc) {
  memset(acc, 0, sizeof(int64_t) * (size_t)count * PK_XACC_LEN);
  const int64_t nch = (n + PK_ROW_CHUNK - 1) / PK_ROW_CHUNK;
  const int nt = pk_num_threads(ctx);
  (void)nt; /* read by the OpenMP pragmas only */
  for (int g0 = 0; g0 < count; g0 += PK_XACC_MAX) {
    const int gn = count - g0 < PK_XACC_MAX ? count - g0 : PK_XACC_MAX;
#pragma omp parallel num_threads(nt) if (pk_par(n))
    {
      pk_xdot X;
      pk_xdot_init(&X, gn);
#pragma omp for schedule(static)
      for (int64_t c = 0; c < nch; c++) {
        const int64_t i0 = c * PK_ROW_CHUNK, i1 = i0 + PK_ROW_CHUNK < n ? i0 + PK_ROW_CHUNK : n;
        for (int j = 0; j < gn; j++) pk_xdot_add(&X, j, x[g0 + j], y[g0 + j], wet, exact_prod, i0, i1 - i0, 1, 0);
      }
      pk_xdot_merge(&X, acc + (int64_t)g0 * PK_XACC_LEN);
    }
  }
  for (int j = 0; j < count; j++) xacc_normalize(acc + (int64_t)j * PK_XACC_LEN);
}

/** vals[j] (dd 0) or the double-double pair vals[2j], vals[2j+1] (dd 1) of the normalised accumulator j. */
static void xacc_finish(int64_t *acc, int count, int dd, double *vals) {
  for (int j = 0; j < count; j++) {
    int64_t *a = acc + (int64_t)j * PK_XACC_LEN;
    xacc_normalize(a);
    const double hi = xacc_value(a);
    if (!dd) {
      vals[j] = hi;
      continue;
    }
    double lo = 0.0;
    if (isfinite(hi)) { /* the rest: the accumulator minus hi, exactly, rounded */
      xacc_add(a, -hi);
      xacc_normalize(a);
      lo = xacc_value(a);
    }
    vals[2 * j] = hi;
    vals[2 * j + 1] = lo;
  }
}

/* ------------------------------------------------------------------------------------------------ */
/* The reductions                                                                                    */

/** The communication table's request stored opaquely in a pk_reduce_request. */
static inline pk_comm_req *req_comm(pk_reduce_request *req) {
  _Static_assert(sizeof(pk_comm_req) <= sizeof req->mpi_req.bytes, "pk_comm_req does not fit");
  return (pk_comm_req *)(void *)req->mpi_req.bytes;
}

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
  if (pk_distributed(ctx)) {
    int rc = pk_comm_ops_of(ctx)->allreduce(pk_comm_of(ctx), NULL, vals, count, PK_COMM_DOUBLE, PK_COMM_SUM);
    if (rc != 0) return pk_comm_error(ctx, __func__, "MPI_Allreduce", rc);
  }
  return PKRYLOV_SUCCESS;
}

int pk_allreduce_max_nonneg(pkrylov_context ctx, double *vals, int count) {
  /* the bits of doubles >= 0 order as the values do: an int64 maximum is the double maximum, exactly */
  int64_t bits[8];
  if (count < 1 || count > 8)
    return pk_error(ctx, PKRYLOV_ERR_INTERNAL, __func__, "count = %d outside 1..8", count);
  for (int i = 0; i < count; i++) memcpy(&bits[i], &vals[i], sizeof(double));
  PK_CALL(pk_mpi_allreduce_i64(ctx, bits, count, 2));
  for (int i = 0; i < count; i++) memcpy(&vals[i], &bits[i], sizeof(double));
  return PKRYLOV_SUCCESS;
}

int pk_allreduce_begin(pkrylov_context ctx, double *vals, int count, pk_reduce_request *req) {
  if (ctx && ctx->reduce_hook) return reduce_hook_begin(ctx, vals, count, req); /* hook */
  req->vals = vals;
  req->count = count;
  req->active = 1;
  req->exact = 0;
  if (pk_distributed(ctx)) {
    int rc = pk_comm_ops_of(ctx)->iallreduce(pk_comm_of(ctx), vals, count, PK_COMM_DOUBLE, PK_COMM_SUM,
                                             req_comm(req));
    if (rc != 0) {
      req->active = 0;
      return pk_comm_error(ctx, __func__, "MPI_Iallreduce", rc);
    }
  }
  return PKRYLOV_SUCCESS;
}

int pk_allreduce_end(pkrylov_context ctx, pk_reduce_request *req) {
  if (ctx && ctx->reduce_hook) return reduce_hook_end(ctx, req); /* hook */
  if (!req->active) return pk_error(ctx, PKRYLOV_ERR_INTERNAL, __func__, "no reduction in flight");
  req->active = 0;
  if (pk_distributed(ctx)) {
    int rc = pk_comm_ops_of(ctx)->wait(req_comm(req));
    if (rc != 0) return pk_comm_error(ctx, __func__, "MPI_Wait", rc);
  }
  if (req->exact) xacc_finish(req->xacc ? req->xacc : req->acc, req->count, req->dd, req->vals);
  return PKRYLOV_SUCCESS;
}

int pk_allreduce_dots_begin(pkrylov_context ctx, double *vals, int count, int64_t n, const double *const *x,
                            const double *const *y, const uint8_t *wet, pk_reduce_request *req) {
  if (!ctx->reproducible) return pk_allreduce_begin(ctx, vals, count, req);
  if (count < 1 || count > PK_XACC_MAX)
    return pk_error(ctx, PKRYLOV_ERR_INTERNAL, __func__, "count = %d outside 1..%d", count, PK_XACC_MAX);
  /* the request's own accumulators; xacc = NULL makes pk_allreduce_end find them there even when the
     request is moved */
  const int ierr = pk_allreduce_xdots_begin(ctx, vals, count, n, x, y, wet, 0, 0, req->acc, req);
  req->xacc = NULL;
  return ierr;
}

int pk_allreduce_xdots_begin(pkrylov_context ctx, double *vals, int count, int64_t n, const double *const *x,
                             const double *const *y, const uint8_t *wet, int exact_prod, int dd, int64_t *acc,
                             pk_reduce_request *req) {
  if (count < 1) return pk_error(ctx, PKRYLOV_ERR_INTERNAL, __func__, "count = %d", count);
  xacc_dots(ctx, count, n, x, y, wet, exact_prod, acc);
  return pk_allreduce_xacc_begin(ctx, vals, count, dd, acc, req);
}

int pk_allreduce_xacc_begin(pkrylov_context ctx, double *vals, int count, int dd, int64_t *acc,
                            pk_reduce_request *req) {
  if (count < 1) return pk_error(ctx, PKRYLOV_ERR_INTERNAL, __func__, "count = %d", count);
  req->vals = vals;
  req->count = count;
  req->active = 1;
  req->exact = 1;
  req->xacc = acc;
  req->dd = dd;
  if (pk_distributed(ctx)) {
    if ((int64_t)count * PK_XACC_LEN > INT32_MAX) {
      req->active = 0;
      return pk_error(ctx, PKRYLOV_ERR_UNSUPPORTED, __func__, "%d exact sums at once: too many", count);
    }
    int rc = pk_comm_ops_of(ctx)->iallreduce(pk_comm_of(ctx), acc, count * PK_XACC_LEN, PK_COMM_INT64,
                                             PK_COMM_SUM, req_comm(req));
    if (rc != 0) {
      req->active = 0;
      return pk_comm_error(ctx, __func__, "MPI_Iallreduce", rc);
    }
  }
  return PKRYLOV_SUCCESS;
}

int pk_allreduce_xacc(pkrylov_context ctx, double *vals, int count, int dd, int64_t *acc) {
  pk_reduce_request req;
  PK_CALL(pk_allreduce_xacc_begin(ctx, vals, count, dd, acc, &req));
  return pk_allreduce_end(ctx, &req);
}

int pk_allreduce_dots(pkrylov_context ctx, double *vals, int count, int64_t n, const double *const *x,
                      const double *const *y, const uint8_t *wet) {
  if (!ctx->reproducible) return pk_allreduce_sum(ctx, vals, count);
  pk_reduce_request req;
  PK_CALL(pk_allreduce_dots_begin(ctx, vals, count, n, x, y, wet, &req));
  return pk_allreduce_end(ctx, &req);
}

void pk_sum_partials(const double *partials, int64_t nchunks, int nvals, double *sums) {
  for (int j = 0; j < nvals; j++) sums[j] = 0.0;
  for (int64_t c = 0; c < nchunks; c++)
    for (int j = 0; j < nvals; j++) sums[j] += partials[c * nvals + j];
}

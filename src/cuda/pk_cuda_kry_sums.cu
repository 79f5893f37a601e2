/**
 * @file pk_cuda_kry_sums.cu
 * @brief The sums of the CUDA vector engine (pk_cuda_kry.cu): the partial-sum buffer, the second stage of
 *        every reduction into S (k_sum, fp64 or double-double), the global sums of a distributed engine
 *        (NCCL or host-staged, added in rank order: k_gsum) and the exact sums of the reproducible mode.
 */
#include <cuda_runtime.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "pk_cuda_kry.cuh"

using namespace pkc_kry;

namespace {

/**
 * Second stage of every reduction: one block per value v (blockIdx.x), out[v] = sum over blocks b in order
 * of part[b * nvals + v] (lane t adds b = t, t + KB, ... from 0.0, then the block tree).
 * DD: value v is the pair (part[b * nvals + 2v], part[b * nvals + 2v + 1]); out[2v], out[2v + 1].
 */
template <bool DD>
__global__ void __launch_bounds__(KB) k_sum(const double *part, int64_t nb, int nvals, double *out) {
  __shared__ double sh[2 * (KB / 32)];
  const int v = blockIdx.x;
  if (!DD) {
    double acc = 0.0;
    for (int64_t b = threadIdx.x; b < nb; b += KB)
      acc += part[b * nvals + v];
    acc = block_sum(acc, sh);
    if (threadIdx.x == 0)
      out[v] = acc;
  } else {
    double h = 0.0, l = 0.0;
    for (int64_t b = threadIdx.x; b < nb; b += KB)
      dd_add(h, l, part[b * nvals + 2 * v], part[b * nvals + 2 * v + 1]);
    block_sum_dd(h, l, sh);
    if (threadIdx.x == 0)
      out[2 * v] = h, out[2 * v + 1] = l;
  }
}

/**
 * Global sums of a distributed engine: out[v] = the ranks' sums g[r * stride + v] added in rank order
 * (r = 0, 1, ...; DD: the pairs (g[r * stride + 2v], g[r * stride + 2v + 1]) by dd_add), one thread per
 * value. Every rank adds the same gathered values in the same order: bitwise the same scalars everywhere.
 */
__global__ void k_gsum(const double *g, int nranks, int64_t stride, int nvals, int dd, double *out) {
  const int v = blockIdx.x * blockDim.x + threadIdx.x;
  if (v >= nvals)
    return;
  if (!dd) {
    double t = g[v];
    for (int r = 1; r < nranks; r++)
      t = t + g[r * stride + v];
    out[v] = t;
  } else {
    double h = g[2 * v], l = g[2 * v + 1];
    for (int r = 1; r < nranks; r++)
      dd_add(h, l, g[r * stride + 2 * v], g[r * stride + 2 * v + 1]);
    out[2 * v] = h, out[2 * v + 1] = l;
  }
}

/**
 * The one-pass exact sums' second stage: acc[v] = the sum over the nb blocks b of blk[(b * nv + v) *
 * PK_XACC_LEN ..] (canonical accumulators, nb <= XR_MAX_BLOCKS: digit sums below 2^42), not carried
 * (pk_cuda_xacc_round_ex carries before it rounds; the ranks' sums stay far below 2^63). Grid (nv,
 * XF_QUADS): block (v, y) takes digits 4y .. 4y + 3 of value v, its thread t digit 4y + t % 4 of blocks
 * t / 4, t / 4 + XF_GROUPS, ... (four consecutive digits a group: one 32-byte sector), then the groups'
 * sums are added in shared memory.
 */
constexpr int XF_GROUPS = KB / 4;
constexpr int XF_QUADS = (PK_XACC_LEN + 3) / 4;
__global__ void __launch_bounds__(KB) k_xfin(const int64_t *blk, int64_t nb, int nv, int64_t *acc) {
  __shared__ int64_t sh[XF_GROUPS][4];
  const int v = blockIdx.x, g = threadIdx.x / 4, r = threadIdx.x % 4, q = 4 * blockIdx.y + r;
  int64_t s = 0;
  if (q < PK_XACC_LEN) {
#pragma unroll 4
    for (int64_t b = g; b < nb; b += XF_GROUPS)
      s += blk[(b * nv + v) * PK_XACC_LEN + q];
  }
  sh[g][r] = s;
  __syncthreads();
  if (threadIdx.x < 4 && q < PK_XACC_LEN) {
    int64_t t = 0;
    for (int k = 0; k < XF_GROUPS; k++)
      t += sh[k][threadIdx.x];
    acc[(int64_t)v * PK_XACC_LEN + q] = t;
  }
}

} // namespace

namespace pkc_kry {

/** Make the partial-sum buffer hold at least `need` doubles (stream-ordered reallocation). */
int ensure_part(pk_kry *E, size_t need) {
  KryDev *D = dev_of(E);
  if (need <= D->part_cap)
    return PKRYLOV_SUCCESS;
  if (!D->rec_on) /* a CG loop's pending sums are read from the old buffer first */
    PK_CALL(psum_flush(E));
  drop_graphs(E); /* they hold the old buffer */
  if (D->part)
    PK_CUDA_CHECK(E->ctx, kSolve, cudaFreeAsync(D->part, D->st), "freeing the partial sums");
  D->part = NULL;
  D->part_cap = 0;
  PK_CUDA_CHECK(E->ctx, kSolve, cudaMallocAsync((void **)&D->part, sizeof(double) * need, D->st),
                "allocating the partial sums");
  D->part_cap = need;
  return PKRYLOV_SUCCESS;
}

/* ---- global sums (distributed context) ---------------------------------------------------------------
 * Every sum is first the rank's local sum, made by the two stages above into the slot's dsum (the single-GPU
 * order over the rank's values); the ranks' sums are gathered rank after rank into gath (gath[r * count +
 * v] = rank r's value v) and k_gsum adds them in rank order into S[out ..]. The gathered values and the
 * order do not depend on the path, so both give bitwise the same scalars on every rank:
 *  NCCL (D->nccl, a distributed grid operator D->dop): ncclAllGather on the operator's communication
 *        stream in stream order (pk_cuda_dist_allgather), no host synchronisation (blocks can be captured);
 *  host-staged: dsum copied to pinned memory (an event), MPI_Allgather on the host (pk_mpi_allgather_f64,
 *        mpi.c), gath copied back to the device.
 * Blocking sums (slot 0) are finished at once. A sum started with PK_KRY_ASYNC (slot 1) is begun (NCCL: the
 * gather enqueued; host: the copy to the host enqueued) and finished by pk_kry_wait (OP_WAIT), so the
 * operations queued in between (the preconditioner and the operator product of the pipelined methods) run
 * on the device meanwhile. */

/** Room for `count` doubles per rank in both slots (outside any capture: reallocation drops the graphs). */
int ensure_gsum(pk_kry *E, size_t count) {
  KryDev *D = dev_of(E);
  if (!D->dist || count <= D->gs_cap)
    return PKRYLOV_SUCCESS;
  drop_graphs(E); /* they hold the old buffers */
  cudaStreamSynchronize(D->st);
  const size_t all = count * (size_t)D->nranks;
  for (int k = 0; k < 2; k++) {
    GSlot &g = D->gs[k];
    cudaFree(g.dsum), cudaFree(g.gath), cudaFreeHost(g.hsum), cudaFreeHost(g.hgath);
    g.dsum = g.gath = g.hsum = g.hgath = NULL;
  }
  D->gs_cap = 0;
  for (int k = 0; k < 2; k++) {
    GSlot &g = D->gs[k];
    PK_CUDA_CHECK(E->ctx, kSolve, cudaMalloc((void **)&g.dsum, sizeof(double) * count),
                  "allocating the global sums");
    PK_CUDA_CHECK(E->ctx, kSolve, cudaMalloc((void **)&g.gath, sizeof(double) * all),
                  "allocating the global sums");
    PK_CUDA_CHECK(E->ctx, kSolve, cudaMallocHost((void **)&g.hsum, sizeof(double) * count),
                  "allocating the global sums");
    PK_CUDA_CHECK(E->ctx, kSolve, cudaMallocHost((void **)&g.hgath, sizeof(double) * all),
                  "allocating the global sums");
    if (!g.ev)
      PK_CUDA_CHECK(E->ctx, kSolve, cudaEventCreateWithFlags(&g.ev, cudaEventDisableTiming),
                    "creating an event");
  }
  D->gs_cap = count;
  return PKRYLOV_SUCCESS;
}

/** Start the global sum of the `count` doubles in slot k's dsum. */
int gsum_begin(pk_kry *E, int k, int count) {
  KryDev *D = dev_of(E);
  GSlot &g = D->gs[k];
  if ((size_t)count > D->gs_cap)
    return pk_error(E->ctx, PKRYLOV_ERR_INTERNAL, "pk_kry", "global sums: %d values, room for %zu", count,
                    D->gs_cap);
  if (D->nccl)
    return pk_cuda_dist_allgather(D->dop, D->nccl, g.dsum, g.gath, count, 0);
  PK_CUDA_CHECK(
      E->ctx, kSolve,
      cudaMemcpyAsync(g.hsum, g.dsum, sizeof(double) * (size_t)count, cudaMemcpyDeviceToHost, D->st),
      "copying the local sums");
  PK_CUDA_CHECK(E->ctx, kSolve, cudaEventRecord(g.ev, D->st), "recording an event");
  return PKRYLOV_SUCCESS;
}

/** Finish the global sum of slot k (count doubles: nvals values, DD pairs) into S[out ..]. */
int gsum_end(pk_kry *E, int k, int nvals, bool dd, int32_t out) {
  KryDev *D = dev_of(E);
  GSlot &g = D->gs[k];
  const int count = nvals * (dd ? 2 : 1);
  if (D->nccl) {
    PK_CALL(pk_cuda_dist_allgather_wait(D->dop)); /* the launches enqueued from now on see gath */
  } else {
    PK_CUDA_CHECK(E->ctx, kSolve, cudaEventSynchronize(g.ev), "waiting for the local sums");
    const double t0 = pk_wtime();
    PK_CALL(pk_mpi_allgather_f64(E->ctx, g.hsum, count, g.hgath));
    pk_cuda_dist_add_reduce_time(pk_wtime() - t0);
    PK_CUDA_CHECK(E->ctx, kSolve,
                  cudaMemcpyAsync(g.gath, g.hgath, sizeof(double) * (size_t)count * (size_t)D->nranks,
                                  cudaMemcpyHostToDevice, D->st),
                  "copying the gathered sums");
  }
  k_gsum<<<(unsigned)((nvals + KB - 1) / KB), KB, 0, D->st>>>(g.gath, D->nranks, count, nvals, dd ? 1 : 0,
                                                                D->S + out);
  PK_CUDA_CHECK(E->ctx, kSolve, cudaGetLastError(), "adding the ranks' sums");
  return PKRYLOV_SUCCESS;
}

/**
 * Second stage into S[out ..] (nvals values; DD: nvals pairs). Distributed: into a slot's dsum, then the
 * global sum, finished at once or (async) started for OP_WAIT.
 */
int sum_into(pk_kry *E, int64_t nb, int nvals, bool dd, int32_t out, bool async) {
  KryDev *D = dev_of(E);
  if (nvals <= 0)
    return PKRYLOV_SUCCESS;
  const int k = async ? 1 : 0;
  double *dst = D->dist ? D->gs[k].dsum : D->S + out;
  if (D->dist && async && D->pend_on)
    return pk_error(E->ctx, PKRYLOV_ERR_INTERNAL, "pk_kry", "a reduction is already in flight");
  if (dd)
    k_sum<true><<<nvals, KB, 0, D->st>>>(D->part, nb, 2 * nvals, dst);
  else
    k_sum<false><<<nvals, KB, 0, D->st>>>(D->part, nb, nvals, dst);
  PK_CUDA_CHECK(E->ctx, kSolve, cudaGetLastError(), "summing partials");
  if (!D->dist)
    return PKRYLOV_SUCCESS;
  PK_CALL(gsum_begin(E, k, nvals * (dd ? 2 : 1)));
  if (!async)
    return gsum_end(E, 0, nvals, dd, out);
  D->pend_on = 1, D->pend_nv = nvals, D->pend_dd = dd ? 1 : 0, D->pend_out = out;
  return PKRYLOV_SUCCESS;
}

/** OP_WAIT: finish the sum started with PK_KRY_ASYNC (none: nothing). */
int do_wait(pk_kry *E) {
  KryDev *D = dev_of(E);
  if (!D->pend_on)
    return PKRYLOV_SUCCESS;
  D->pend_on = 0;
  return gsum_end(E, 1, D->pend_nv, D->pend_dd != 0, D->pend_out);
}

/* ---- exact sums (reproducible mode, ctx->reproducible) ------------------------------------------------
 * One pass (the default): the fused kernels that read the vectors (k_update, k_mdot, k_axpy_dots, the CSR
 * matvec_update) run their XR instances, which add the rounded products (block_dots with dd: the exact
 * products, p and fma(x, y, -p)) exactly into per-thread expansions and per-block accumulators
 * (pk_cuda_xsum.cuh) and write the blocks' canonical accumulators to D->xpart (block b, value v at
 * (b * count + v) * PK_XACC_LEN; xgrid bounds the grid); xfinish adds them (k_xfin) into D->xacc.
 * Two passes (the residual's norm, kry.xfuse=0, a launch past xgrid's headroom bound): the data-parallel
 * kernel skips its partials and xsums recomputes every sum from its vectors by pk_cuda_xacc_dots_ex (groups
 * of PKC_XACC_MAXV dots) into D->xacc. Then, both ways, xround: the ranks' accumulators are added as
 * integers (NCCL: ncclSum on ncclInt64, pk_cuda_dist_allreduce_i64; host-staged: MPI_SUM on MPI_INT64_T
 * through pinned memory), and pk_cuda_xacc_round_ex rounds them into S[out ..] (dd: the (hi, lo) pairs).
 * These are the CPU engine's reproducible sums (kry_cpu.c, reduce.c) of the same products, bitwise, for
 * any number of ranks (an exact sum has one canonical accumulator, whatever adds it). A sum asked for with
 * PK_KRY_ASYNC is finished at once (pk_kry_wait has nothing left to do); graphs of blocks on one GPU
 * only. */

/** Room for `count` accumulators and the block scratch (outside any capture: reallocation drops graphs). */
int ensure_xacc(pk_kry *E, size_t count) {
  KryDev *D = dev_of(E);
  if (!D->repro)
    return PKRYLOV_SUCCESS;
  if (!D->xblk) {
    const int64_t grid = pk_cuda_xacc_grid(E->n);
    if (grid < 1)
      return pk_error(E->ctx, PKRYLOV_ERR_UNSUPPORTED, "pkrylov_solver_solve",
                      "reproducible mode: %lld local values are more than the exact sums take on a GPU",
                      (long long)E->n);
    const int64_t len = grid * PKC_XACC_MAXV * PK_XACC_LEN;
    PK_CUDA_CHECK(E->ctx, kSolve, cudaMalloc((void **)&D->xblk, sizeof(int64_t) * (size_t)len),
                  "allocating the exact sums");
    D->xblk_len = len;
  }
  if (xpart_need(count) > D->xpart_cap) { /* the one-pass sums' block accumulators */
    drop_graphs(E); /* they hold the old buffer */
    cudaStreamSynchronize(D->st);
    cudaFree(D->xpart);
    D->xpart = NULL;
    D->xpart_cap = 0;
    const size_t need = xpart_need(count);
    PK_CUDA_CHECK(E->ctx, kSolve, cudaMalloc((void **)&D->xpart, sizeof(int64_t) * PK_XACC_LEN * need),
                  "allocating the exact sums");
    D->xpart_cap = need;
  }
  if (count <= D->xcap)
    return PKRYLOV_SUCCESS;
  drop_graphs(E); /* they hold the old buffers */
  cudaStreamSynchronize(D->st);
  cudaFree(D->xacc), cudaFreeHost(D->hxacc);
  D->xacc = D->hxacc = NULL;
  D->xcap = 0;
  PK_CUDA_CHECK(E->ctx, kSolve, cudaMalloc((void **)&D->xacc, sizeof(int64_t) * PK_XACC_LEN * count),
                "allocating the exact sums");
  PK_CUDA_CHECK(E->ctx, kSolve, cudaMallocHost((void **)&D->hxacc, sizeof(int64_t) * PK_XACC_LEN * count),
                "allocating the exact sums");
  D->xcap = count;
  return PKRYLOV_SUCCESS;
}

static int xround(pk_kry *E, int count, bool dd, int32_t out);

/** S[out ..] = the exact global dots (a[j], b[j]), j < count (dd: exact products, (hi, lo) pairs). */
int xsums(pk_kry *E, int count, const double *const *a, const double *const *b, bool dd, int32_t out) {
  KryDev *D = dev_of(E);
  if (count <= 0)
    return PKRYLOV_SUCCESS;
  if ((size_t)count > D->xcap || !D->xblk)
    return pk_error(E->ctx, PKRYLOV_ERR_INTERNAL, "pk_kry", "exact sums: %d values, room for %zu", count,
                    D->xcap);
  for (int g0 = 0; g0 < count; g0 += PKC_XACC_MAXV) {
    const int gn = count - g0 < PKC_XACC_MAXV ? count - g0 : PKC_XACC_MAXV;
    PK_CUDA_CHECK(E->ctx, kSolve,
                  pk_cuda_xacc_dots_ex(D->st, E->n, gn, a + g0, b + g0, dd ? 1 : 0, D->xblk,
                                       D->xacc + (size_t)g0 * PK_XACC_LEN, NULL),
                  "exact sums");
  }
  return xround(E, count, dd, out);
}

/** S[out ..] = D->xacc's count accumulators (the rank's), added over the ranks, rounded (dd: pairs). */
static int xround(pk_kry *E, int count, bool dd, int32_t out) {
  KryDev *D = dev_of(E);
  if (D->dist) {
    const int cnt = count * PK_XACC_LEN;
    if (D->nccl) {
      PK_CALL(pk_cuda_dist_allreduce_i64(D->dop, D->nccl, D->xacc, cnt));
    } else {
      PK_CUDA_CHECK(
          E->ctx, kSolve,
          cudaMemcpyAsync(D->hxacc, D->xacc, sizeof(int64_t) * (size_t)cnt, cudaMemcpyDeviceToHost, D->st),
          "copying the exact sums");
      PK_CUDA_CHECK(E->ctx, kSolve, cudaStreamSynchronize(D->st), "waiting for the exact sums");
      const double t0 = pk_wtime();
      PK_CALL(pk_mpi_allreduce_i64(E->ctx, D->hxacc, cnt, 0));
      pk_cuda_dist_add_reduce_time(pk_wtime() - t0);
      PK_CUDA_CHECK(
          E->ctx, kSolve,
          cudaMemcpyAsync(D->xacc, D->hxacc, sizeof(int64_t) * (size_t)cnt, cudaMemcpyHostToDevice, D->st),
          "copying the exact sums");
    }
  }
  PK_CUDA_CHECK(E->ctx, kSolve, pk_cuda_xacc_round_ex(D->st, D->xacc, count, dd ? 1 : 0, D->S + out),
                "rounding the exact sums");
  return PKRYLOV_SUCCESS;
}

} // namespace pkc_kry

namespace pkc_kry {

/**
 * The one-pass exact sums (the fused kernels' block accumulators in D->xpart: nb blocks of count values,
 * canonical) into S[out ..]: added by k_xfin into D->xacc, then over the ranks and rounded as xsums does.
 */
int xfinish(pk_kry *E, int64_t nb, int count, bool dd, int32_t out) {
  KryDev *D = dev_of(E);
  if (count <= 0)
    return PKRYLOV_SUCCESS;
  if ((size_t)count > D->xcap || (size_t)(nb * count) > D->xpart_cap)
    return pk_error(E->ctx, PKRYLOV_ERR_INTERNAL, "pk_kry", "exact sums: %lld x %d values, room for %zu",
                    (long long)nb, count, D->xpart_cap);
  k_xfin<<<dim3((unsigned)count, XF_QUADS), KB, 0, D->st>>>(D->xpart, nb, count, D->xacc);
  PK_CUDA_CHECK(E->ctx, kSolve, cudaGetLastError(), "exact sums");
  return xround(E, count, dd, out);
}

} // namespace pkc_kry

/**
 * @file pk_cuda_dist.cu
 * @brief Distributed grid operators on CUDA contexts (one GPU per rank): the device side of the halo
 *        exchange of dist.c, host-staged.
 *
 * A distributed thin-shell or column-stencil operator (dist.c) uploads like an ordinary one of its tile;
 * pk_cuda_dist_attach adds a device buffer for the four halos (W, E: ny*nz values, S, N: nx*nz) and the
 * four packed tile edges, pinned host copies of both, and for the stencil the neighbours' coefficients the
 * tile-edge rows need (the east neighbour's aW of its first column, the north neighbour's aS of its first
 * row). The view's dhw ... dhn point at the halos of the directions that have a neighbour, so the grid
 * kernels (pk_cuda_kernels.cu, Halo) evaluate a tile-edge row with the single-rank expression of its global
 * row: the distributed product is bitwise the single-rank one (test t930).
 *
 * Two paths, chosen per solve / product (pk_mpi_nccl: NCCL when it was built in, the ranks have GPUs of
 * their own and PKRYLOV_DIST_NCCL is not 0):
 *
 * NCCL (device to device, no host synchronisation): _begin makes the operator's communication stream
 * (`copy`) wait for the context's (an event: x is complete), then runs there the pack kernel and ncclSend of
 * each packed edge and ncclRecv of each halo straight into the device halo buffers, in one
 * ncclGroupStart/End, so the context's stream goes on at once; _end makes the context's stream wait for the
 * group (an event). The packed edges are not overwritten before they are sent (one stream), nor x before
 * it is packed (the context's stream waits for the halos before the edge columns, which precede the next
 * write of x). The global sums of the solver (pk_cuda_dist_allgather)
 * run on the same communication stream, so all NCCL calls of a solve are issued in one order on every rank
 * and never run concurrently on the communicator. Each pair of ranks is neighbours in one direction only
 * (no periodic wrap), so the one send and one receive between two ranks match whatever the order. Nothing
 * of this calls the host in between: the solver captures blocks of iterations in CUDA graphs.
 *
 * Host-staged (MPI without CUDA-aware transport; the fallback):
 * An exchange is split so that the kernels that need no halo run meanwhile (pk_cuda_solver.cu):
 *   _begin: pack kernel (edges of x into the device send buffer) on the context's stream, device-to-host
 *           copies of the directions that have a neighbour into pinned memory on a copy stream behind it,
 *           an event; nothing waits, and the context's stream goes on with the next kernels;
 *   _end:   wait for the event, MPI_Irecv/MPI_Isend/MPI_Waitall through dist.c (host buffers), then the
 *           host-to-device copies of the received halos on the copy stream, and the context's stream waits
 *           for them (cudaStreamWaitEvent), so every launch enqueued after _end reads them.
 * Buffer reuse is ordered: the next pack follows the last edge kernel on the context's stream, and the
 * host waits for the edges on the host (after the last halo copy of the copy stream) before it receives
 * into the host halos again.
 * MPI stays in the C files (dist.c, reduce.c); this file never sees mpi.h. The exchange does not use
 * CUDA-aware MPI (device pointers to MPI): the staging copies are a few hundred KiB per direction at the
 * benchmark sizes and overlap the interior columns (docs/performance.md, "MPI scaling on GPUs").
 *
 * Timers of the host time spent in the exchanges and the global sums serve the benchmark. In the
 * instrumented mode (environment PKRYLOV_DIST_INSTRUMENT=1, read at each exchange) the device work queued
 * before an exchange or a sum is waited for outside the timers and the copies are made blocking, so the
 * timers hold the whole cost of the communication (packing and copies included) without overlap; the
 * results are the same, only slower.
 */
#include <cuda_runtime.h>
#include <stdlib.h>
#include <string.h>
#ifdef PKRYLOV_HAVE_NCCL
#include <nccl.h>
#endif

extern "C" {
#include "pk_impl.h"
}
#include "pk_cuda.h"

namespace {

constexpr int PKD_BLOCK = 256;

/** Device and host buffers of one distributed operator (pk_cuda_op.dist). */
struct DistDev {
  int nx, ny, nz;
  int has[4];             /* W, E, S, N */
  int64_t off[4], len[4]; /* offsets and lengths of the four directions in a halo / send block */
  int64_t total;          /* 2 (ny + nx) nz */
  double *dbuf;           /* device: halos (total) then the packed edges (total) */
  double *dcoef;          /* device, stencil: aWe (ny*nz) then aSn (nx*nz) */
  double *hrcv, *hsnd;    /* pinned host: halos, packed edges (total each) */
  cudaStream_t copy;      /* the copies, so that they overlap the kernels of the context's stream */
  cudaEvent_t packed_dev; /* on the context's stream after the pack kernel */
  cudaEvent_t packed;     /* on the copy stream: the edges are on the host */
  cudaEvent_t arrived;    /* on the copy stream: the halos are on the device */
  cudaEvent_t fork, join; /* NCCL sums: the communication stream waits for / is waited for by the context's */
  int nb[4];              /* neighbour ranks (-1: none) */
  int pending;            /* _begin done, _end not yet */
  int any;                /* some neighbour exists */
};

double g_halo_s = 0.0, g_reduce_s = 0.0;

/** Edges of x into snd: W (x(0, j, k) at j + ny k), E (x(nx-1, j, k)), S (x(i, 0, k) at i + nx k), N; only
 *  the directions in mask (1 W, 2 E, 4 S, 8 N: those with a neighbour). */
__global__ void __launch_bounds__(PKD_BLOCK)
    k_pack(int nx, int ny, int nz, int mask, const double *__restrict__ x, double *__restrict__ snd) {
  const int64_t ex = (int64_t)ny * nz, ey = (int64_t)nx * nz, m = 2 * (ex + ey);
  const int64_t stride = (int64_t)gridDim.x * PKD_BLOCK;
  for (int64_t t = (int64_t)blockIdx.x * PKD_BLOCK + threadIdx.x; t < m; t += stride) {
    const int dir = t < ex ? 0 : t < 2 * ex ? 1 : t < 2 * ex + ey ? 2 : 3;
    if (!((mask >> dir) & 1))
      continue;
    int64_t src;
    if (t < 2 * ex) {
      const int64_t u = t < ex ? t : t - ex, j = u % ny, k = u / ny;
      src = (t < ex ? 0 : nx - 1) + (int64_t)nx * (j + (int64_t)ny * k);
    } else {
      const int64_t v = t - 2 * ex, u = v < ey ? v : v - ey, i = u % nx, k = u / nx;
      src = i + (int64_t)nx * ((v < ey ? 0 : ny - 1) + (int64_t)ny * k);
    }
    snd[t] = x[src];
  }
}

/** The directions of d with a neighbour (k_pack's mask). */
int pack_mask(const DistDev *d) {
  return (d->has[0] ? 1 : 0) | (d->has[1] ? 2 : 0) | (d->has[2] ? 4 : 0) | (d->has[3] ? 8 : 0);
}

cudaStream_t stream_of(pkrylov_context ctx) {
  return (cudaStream_t)pk_cuda_context_stream(ctx);
}

/** d's communication stream waits for the work enqueued so far on st (event ev recorded there). */
cudaError_t comm_after(DistDev *d, cudaEvent_t ev, cudaStream_t st) {
  cudaError_t e = cudaEventRecord(ev, st);
  return e == cudaSuccess ? cudaStreamWaitEvent(d->copy, ev, 0) : e;
}

int cuda_err(pkrylov_context ctx, cudaError_t e, const char *what) {
  cudaGetLastError();
  return pk_error(ctx, e == cudaErrorMemoryAllocation ? PKRYLOV_ERR_OUT_OF_MEMORY : PKRYLOV_ERR_BACKEND,
                  "halo exchange", "%s: CUDA error %s (%s)", what, cudaGetErrorName(e),
                  cudaGetErrorString(e));
}

DistDev *dist_of(struct pkrylov_operator_s *A) {
  pk_cuda_op v;
  if (!A->dist || !A->dev || pk_cuda_operator_view(A, 0, &v))
    return NULL;
  return (DistDev *)v.dist;
}

} // namespace

extern "C" int pk_cuda_dist_attach(struct pkrylov_operator_s *A, pk_cuda_op *view) {
  pkrylov_context ctx = A->ctx;
  pk_dist_tile t;
  PK_CALL(pk_dist_get_tile(A, &t));
  DistDev *d = (DistDev *)calloc(1, sizeof(DistDev));
  if (!d) {
    free(t.aWe), free(t.aSn);
    return pk_error(ctx, PKRYLOV_ERR_OUT_OF_MEMORY, "pkrylov_operator_create", "cannot allocate");
  }
  view->dist = d;
  d->nx = t.nx, d->ny = t.ny, d->nz = t.nz;
  const int64_t ex = (int64_t)t.ny * t.nz, ey = (int64_t)t.nx * t.nz;
  d->len[0] = d->len[1] = ex, d->len[2] = d->len[3] = ey;
  d->off[0] = 0, d->off[1] = ex, d->off[2] = 2 * ex, d->off[3] = 2 * ex + ey;
  d->total = 2 * (ex + ey);
  for (int k = 0; k < 4; k++)
    d->has[k] = t.has[k], d->any |= t.has[k], d->nb[k] = t.nb[k];
  cudaStream_t st = stream_of(ctx);
  cudaError_t e = cudaMalloc(&d->dbuf, sizeof(double) * 2 * (size_t)d->total);
  if (e == cudaSuccess)
    e = cudaMemsetAsync(d->dbuf, 0, sizeof(double) * 2 * (size_t)d->total, st);
  if (e == cudaSuccess)
    e = cudaMallocHost(&d->hrcv, sizeof(double) * (size_t)d->total);
  if (e == cudaSuccess)
    e = cudaMallocHost(&d->hsnd, sizeof(double) * (size_t)d->total);
  if (e == cudaSuccess)
    e = cudaEventCreateWithFlags(&d->packed, cudaEventDisableTiming);
  if (e == cudaSuccess)
    e = cudaEventCreateWithFlags(&d->packed_dev, cudaEventDisableTiming);
  if (e == cudaSuccess)
    e = cudaEventCreateWithFlags(&d->arrived, cudaEventDisableTiming);
  if (e == cudaSuccess)
    e = cudaEventCreateWithFlags(&d->fork, cudaEventDisableTiming);
  if (e == cudaSuccess)
    e = cudaEventCreateWithFlags(&d->join, cudaEventDisableTiming);
  if (e == cudaSuccess)
    e = cudaStreamCreateWithFlags(&d->copy, cudaStreamNonBlocking);
  if (e == cudaSuccess && t.aWe) {
    e = cudaMalloc(&d->dcoef, sizeof(double) * (size_t)(ex + ey));
    if (e == cudaSuccess)
      e = cudaMemcpyAsync(d->dcoef, t.aWe, sizeof(double) * ex, cudaMemcpyHostToDevice, st);
    if (e == cudaSuccess)
      e = cudaMemcpyAsync(d->dcoef + ex, t.aSn, sizeof(double) * ey, cudaMemcpyHostToDevice, st);
  }
  if (e == cudaSuccess)
    e = cudaStreamSynchronize(st);
  free(t.aWe), free(t.aSn);
  if (e != cudaSuccess)
    return cuda_err(ctx, e, "allocating the halo buffers");
  view->dhw = d->has[0] ? d->dbuf + d->off[0] : NULL;
  view->dhe = d->has[1] ? d->dbuf + d->off[1] : NULL;
  view->dhs = d->has[2] ? d->dbuf + d->off[2] : NULL;
  view->dhn = d->has[3] ? d->dbuf + d->off[3] : NULL;
  view->dWe = d->dcoef;
  view->dSn = d->dcoef ? d->dcoef + ex : NULL;
  view->cols = 0;
  return PKRYLOV_SUCCESS;
}

extern "C" void pk_cuda_dist_detach(pk_cuda_op *view) {
  DistDev *d = (DistDev *)view->dist;
  if (!d)
    return;
  cudaFree(d->dbuf);
  cudaFree(d->dcoef);
  cudaFreeHost(d->hrcv);
  cudaFreeHost(d->hsnd);
  if (d->packed)
    cudaEventDestroy(d->packed);
  if (d->packed_dev)
    cudaEventDestroy(d->packed_dev);
  if (d->arrived)
    cudaEventDestroy(d->arrived);
  if (d->fork)
    cudaEventDestroy(d->fork);
  if (d->join)
    cudaEventDestroy(d->join);
  if (d->copy)
    cudaStreamDestroy(d->copy);
  free(d);
  view->dist = NULL;
}

#ifdef PKRYLOV_HAVE_NCCL
namespace {
int nccl_err(pkrylov_context ctx, ncclResult_t r, const char *what) {
  return pk_error(ctx, PKRYLOV_ERR_BACKEND, "halo exchange", "%s: NCCL error %d (%s)", what, (int)r,
                  ncclGetErrorString(r));
}

/** The NCCL half of _begin: pack (context's stream), then the group of sends and receives (copy stream). */
int nccl_halo_begin(pkrylov_context ctx, DistDev *d, const double *x, ncclComm_t comm) {
  cudaStream_t st = stream_of(ctx);
  const int instr = pk_cuda_dist_instrumented();
  double t0 = 0.0;
  if (instr) {
    cudaError_t e = cudaStreamSynchronize(st);
    if (e != cudaSuccess)
      return cuda_err(ctx, e, "synchronising");
    t0 = pk_wtime();
  }
  double *snd = d->dbuf + d->total;
  int64_t nb = (d->total + PKD_BLOCK - 1) / PKD_BLOCK;
  if (nb > 4096)
    nb = 4096;
  /* x is complete at this point of the context's stream; the pack runs on the communication stream, off
     the context's (whose next kernels only read x) */
  cudaError_t e = comm_after(d, d->packed_dev, st);
  if (e == cudaSuccess) {
    k_pack<<<(unsigned)nb, PKD_BLOCK, 0, d->copy>>>(d->nx, d->ny, d->nz, pack_mask(d), x, snd);
    e = cudaGetLastError();
  }
  if (e != cudaSuccess)
    return cuda_err(ctx, e, "packing the tile edges");
  ncclResult_t r = ncclGroupStart();
  for (int k = 0; k < 4 && r == ncclSuccess; k++) {
    if (!d->has[k])
      continue;
    r = ncclSend(snd + d->off[k], (size_t)d->len[k], ncclDouble, d->nb[k], comm, d->copy);
    if (r == ncclSuccess)
      r = ncclRecv(d->dbuf + d->off[k], (size_t)d->len[k], ncclDouble, d->nb[k], comm, d->copy);
  }
  const ncclResult_t r2 = ncclGroupEnd();
  if (r != ncclSuccess || r2 != ncclSuccess)
    return nccl_err(ctx, r != ncclSuccess ? r : r2, "ncclSend/ncclRecv");
  e = cudaEventRecord(d->arrived, d->copy);
  if (e == cudaSuccess && instr)
    e = cudaEventSynchronize(d->arrived);
  if (e != cudaSuccess)
    return cuda_err(ctx, e, "halo exchange");
  if (instr)
    g_halo_s += pk_wtime() - t0;
  return PKRYLOV_SUCCESS;
}
} // namespace
#endif

extern "C" int pk_cuda_dist_halo_begin(struct pkrylov_operator_s *A, const double *x, void *nccl) {
  DistDev *d = dist_of(A);
  if (!d || !d->any)
    return PKRYLOV_SUCCESS;
  pkrylov_context ctx = A->ctx;
  if (d->pending)
    return pk_error(ctx, PKRYLOV_ERR_INTERNAL, "halo exchange", "an exchange is pending");
#ifdef PKRYLOV_HAVE_NCCL
  if (nccl) {
    PK_CALL(nccl_halo_begin(ctx, d, x, (ncclComm_t)nccl));
    d->pending = 2;
    return PKRYLOV_SUCCESS;
  }
#else
  (void)nccl;
#endif
  cudaStream_t st = stream_of(ctx);
  const int instr = pk_cuda_dist_instrumented();
  double t0 = 0.0;
  if (instr) { /* the work queued before is not the exchange's */
    cudaError_t e = cudaStreamSynchronize(st);
    if (e != cudaSuccess)
      return cuda_err(ctx, e, "synchronising");
    t0 = pk_wtime();
  }
  double *snd = d->dbuf + d->total;
  int64_t nb = (d->total + PKD_BLOCK - 1) / PKD_BLOCK;
  if (nb > 4096)
    nb = 4096;
  k_pack<<<(unsigned)nb, PKD_BLOCK, 0, st>>>(d->nx, d->ny, d->nz, pack_mask(d), x, snd);
  cudaError_t e = cudaGetLastError();
  /* the copies on the copy stream after the pack: the context's stream goes on with the next kernels */
  if (e == cudaSuccess)
    e = comm_after(d, d->packed_dev, st);
  for (int k = 0; k < 4 && e == cudaSuccess; k++)
    if (d->has[k])
      e = cudaMemcpyAsync(d->hsnd + d->off[k], snd + d->off[k], sizeof(double) * (size_t)d->len[k],
                          cudaMemcpyDeviceToHost, d->copy);
  if (e == cudaSuccess)
    e = cudaEventRecord(d->packed, d->copy);
  if (e == cudaSuccess && instr)
    e = cudaEventSynchronize(d->packed);
  if (e != cudaSuccess)
    return cuda_err(ctx, e, "packing the tile edges");
  if (instr)
    g_halo_s += pk_wtime() - t0;
  d->pending = 1;
  return PKRYLOV_SUCCESS;
}

extern "C" int pk_cuda_dist_halo_end(struct pkrylov_operator_s *A, void *nccl) {
  DistDev *d = dist_of(A);
  if (!d || !d->any)
    return PKRYLOV_SUCCESS;
  pkrylov_context ctx = A->ctx;
  if (!d->pending)
    return pk_error(ctx, PKRYLOV_ERR_INTERNAL, "halo exchange", "no exchange was begun");
  if ((d->pending == 2) != (nccl != NULL))
    return pk_error(ctx, PKRYLOV_ERR_INTERNAL, "halo exchange", "begun and ended on different paths");
  const int was = d->pending;
  d->pending = 0;
  if (was == 2) { /* NCCL: the launches enqueued from now on wait for the received halos */
    cudaError_t e = cudaStreamWaitEvent(stream_of(ctx), d->arrived, 0);
    return e == cudaSuccess ? PKRYLOV_SUCCESS : cuda_err(ctx, e, "waiting for the halos");
  }
  const int instr = pk_cuda_dist_instrumented();
  cudaError_t e = cudaEventSynchronize(d->packed);
  if (e != cudaSuccess)
    return cuda_err(ctx, e, "waiting for the packed edges");
  const double t0 = pk_wtime();
  int rc = pk_dist_exchange_begin(A, d->hrcv, d->hsnd);
  const int rc2 = pk_dist_exchange_end(A);
  if (rc || rc2)
    return rc ? rc : rc2;
  cudaStream_t st = stream_of(ctx);
  /* the copies on the copy stream (they overlap the kernels queued on the context's stream, which waits
     for them before the next launch); instrumented: waited for here, so that the timer holds them */
  for (int k = 0; k < 4 && e == cudaSuccess; k++)
    if (d->has[k])
      e = cudaMemcpyAsync(d->dbuf + d->off[k], d->hrcv + d->off[k], sizeof(double) * (size_t)d->len[k],
                          cudaMemcpyHostToDevice, d->copy);
  if (e == cudaSuccess)
    e = cudaEventRecord(d->arrived, d->copy);
  if (e == cudaSuccess)
    e = cudaStreamWaitEvent(st, d->arrived, 0);
  if (e == cudaSuccess && instr)
    e = cudaEventSynchronize(d->arrived);
  g_halo_s += pk_wtime() - t0;
  if (e != cudaSuccess)
    return cuda_err(ctx, e, "copying the halos to the device");
  return PKRYLOV_SUCCESS;
}

extern "C" int pk_cuda_dist_halo_end_comm(struct pkrylov_operator_s *A, void **comm) {
  DistDev *d = dist_of(A);
  *comm = NULL;
  if (!d || !d->any)
    return PKRYLOV_SUCCESS;
  if (d->pending != 2)
    return pk_error(A->ctx, PKRYLOV_ERR_INTERNAL, "halo exchange", "no NCCL exchange was begun");
  d->pending = 0;
  *comm = d->copy;
  return PKRYLOV_SUCCESS;
}

extern "C" void *pk_cuda_dist_comm_stream(struct pkrylov_operator_s *A) {
  DistDev *d = dist_of(A);
  return d ? (void *)d->copy : NULL;
}

extern "C" int pk_cuda_dist_fork(struct pkrylov_operator_s *A, void **comm) {
  DistDev *d = dist_of(A);
  *comm = NULL;
  if (!d)
    return pk_error(A->ctx, PKRYLOV_ERR_INTERNAL, "global sums", "not a distributed operator");
  const cudaError_t e = comm_after(d, d->fork, stream_of(A->ctx));
  if (e != cudaSuccess)
    return cuda_err(A->ctx, e, "global sums");
  *comm = d->copy;
  return PKRYLOV_SUCCESS;
}

extern "C" int pk_cuda_dist_halo(struct pkrylov_operator_s *A, const double *x, void *nccl) {
  PK_CALL(pk_cuda_dist_halo_begin(A, x, nccl));
  return pk_cuda_dist_halo_end(A, nccl);
}

extern "C" int pk_cuda_dist_allgather_wait(struct pkrylov_operator_s *A) {
  DistDev *d = dist_of(A);
  if (!d)
    return pk_error(A->ctx, PKRYLOV_ERR_INTERNAL, "global sums", "not a distributed operator");
  cudaError_t e = cudaStreamWaitEvent(stream_of(A->ctx), d->join, 0);
  return e == cudaSuccess ? PKRYLOV_SUCCESS : cuda_err(A->ctx, e, "waiting for the global sums");
}

extern "C" int pk_cuda_dist_allgather(struct pkrylov_operator_s *A, void *nccl, const double *src,
                                      double *dst, int count, int wait) {
  pkrylov_context ctx = A->ctx;
  DistDev *d = dist_of(A);
  if (!d || !nccl)
    return pk_error(ctx, PKRYLOV_ERR_INTERNAL, "global sums", "no NCCL communicator / distributed operator");
#ifdef PKRYLOV_HAVE_NCCL
  cudaStream_t st = stream_of(ctx);
  const int instr = pk_cuda_dist_instrumented();
  double t0 = 0.0;
  cudaError_t e = cudaSuccess;
  if (instr) {
    e = cudaStreamSynchronize(st);
    if (e != cudaSuccess)
      return cuda_err(ctx, e, "synchronising");
    t0 = pk_wtime();
  }
  e = comm_after(d, d->fork, st);
  if (e != cudaSuccess)
    return cuda_err(ctx, e, "global sums");
  ncclResult_t r = ncclAllGather(src, dst, (size_t)count, ncclDouble, (ncclComm_t)nccl, d->copy);
  if (r != ncclSuccess)
    return pk_error(ctx, PKRYLOV_ERR_BACKEND, "global sums", "ncclAllGather: NCCL error %d (%s)", (int)r,
                    ncclGetErrorString(r));
  e = cudaEventRecord(d->join, d->copy);
  if (e == cudaSuccess && (wait || instr))
    e = cudaStreamWaitEvent(st, d->join, 0);
  if (e == cudaSuccess && instr)
    e = cudaStreamSynchronize(st);
  if (e != cudaSuccess)
    return cuda_err(ctx, e, "global sums");
  if (instr)
    g_reduce_s += pk_wtime() - t0;
  return PKRYLOV_SUCCESS;
#else
  (void)src, (void)dst, (void)count;
  return pk_error(ctx, PKRYLOV_ERR_INTERNAL, "global sums", "built without NCCL");
#endif
}

/* reproducible mode (pk_cuda_solver.cu): the ranks' exact accumulators added by ncclSum on ncclInt64, on the
   communication stream like the gathers above (one order of NCCL calls on every rank) */
extern "C" int pk_cuda_dist_allreduce_i64(struct pkrylov_operator_s *A, void *nccl, int64_t *buf, int count) {
  pkrylov_context ctx = A->ctx;
  DistDev *d = dist_of(A);
  if (!d || !nccl)
    return pk_error(ctx, PKRYLOV_ERR_INTERNAL, "global sums", "no NCCL communicator / distributed operator");
#ifdef PKRYLOV_HAVE_NCCL
  cudaStream_t st = stream_of(ctx);
  cudaError_t e = comm_after(d, d->fork, st);
  if (e != cudaSuccess)
    return cuda_err(ctx, e, "global sums");
  ncclResult_t r = ncclAllReduce(buf, buf, (size_t)count, ncclInt64, ncclSum, (ncclComm_t)nccl, d->copy);
  if (r != ncclSuccess)
    return pk_error(ctx, PKRYLOV_ERR_BACKEND, "global sums", "ncclAllReduce: NCCL error %d (%s)", (int)r,
                    ncclGetErrorString(r));
  e = cudaEventRecord(d->join, d->copy);
  if (e == cudaSuccess)
    e = cudaStreamWaitEvent(st, d->join, 0);
  return e == cudaSuccess ? PKRYLOV_SUCCESS : cuda_err(ctx, e, "global sums");
#else
  (void)buf, (void)count;
  return pk_error(ctx, PKRYLOV_ERR_INTERNAL, "global sums", "built without NCCL");
#endif
}

extern "C" int pk_cuda_nccl_compiled(void) {
#ifdef PKRYLOV_HAVE_NCCL
  return 1;
#else
  return 0;
#endif
}

extern "C" int pk_cuda_nccl_unique_id(void *id, int bytes) {
#ifdef PKRYLOV_HAVE_NCCL
  ncclUniqueId u;
  if ((size_t)bytes < sizeof u || ncclGetUniqueId(&u) != ncclSuccess)
    return 1;
  memcpy(id, &u, sizeof u);
  return 0;
#else
  (void)id, (void)bytes;
  return 1;
#endif
}

extern "C" int pk_cuda_nccl_comm_create(const void *id, int rank, int size, void **comm) {
  *comm = NULL;
#ifdef PKRYLOV_HAVE_NCCL
  ncclUniqueId u;
  memcpy(&u, id, sizeof u);
  ncclComm_t c = NULL;
  if (ncclCommInitRank(&c, size, u, rank) != ncclSuccess)
    return 1;
  *comm = c;
  return 0;
#else
  (void)id, (void)rank, (void)size;
  return 1;
#endif
}

extern "C" void pk_cuda_nccl_comm_destroy(void *comm) {
#ifdef PKRYLOV_HAVE_NCCL
  if (comm)
    ncclCommDestroy((ncclComm_t)comm);
#else
  (void)comm;
#endif
}

extern "C" int pk_cuda_device_uuid(unsigned char uuid[16]) {
  int dev = 0;
  cudaDeviceProp prop;
  if (cudaGetDevice(&dev) != cudaSuccess || cudaGetDeviceProperties(&prop, dev) != cudaSuccess) {
    cudaGetLastError();
    return 1;
  }
  memcpy(uuid, prop.uuid.bytes, 16);
  return 0;
}

extern "C" int pk_cuda_dist_apply_public(struct pkrylov_operator_s *A, int32_t mem, const double *x,
                                         double *y) {
  pkrylov_context ctx = A->ctx;
  const char *func = "pkrylov_operator_apply";
  int e = pk_cuda_check_pointer(ctx, func, mem, x, "x");
  if (!e)
    e = pk_cuda_check_pointer(ctx, func, mem, y, "y");
  const size_t bytes = sizeof(double) * (size_t)A->n;
  double *dx = NULL, *dy = NULL;
  cudaStream_t st = stream_of(ctx);
  if (!e && mem == PKRYLOV_MEM_HOST) {
    cudaError_t ce = cudaMalloc(&dx, bytes ? bytes : 1);
    if (ce == cudaSuccess)
      ce = cudaMalloc(&dy, bytes ? bytes : 1);
    if (ce == cudaSuccess)
      ce = cudaMemcpyAsync(dx, x, bytes, cudaMemcpyHostToDevice, st);
    if (ce != cudaSuccess)
      e = cuda_err(ctx, ce, "copying x to the device");
  }
  e = pk_mpi_agree(ctx, e); /* every rank reaches the exchange, or none */
  void *nccl = NULL;
  if (!e)
    e = pk_mpi_nccl(ctx, &nccl); /* collective */
  if (!e) {
    const double *in = mem == PKRYLOV_MEM_HOST ? dx : x;
    double *out = mem == PKRYLOV_MEM_HOST ? dy : y;
    pk_cuda_op v;
    e = pk_cuda_dist_halo(A, in, nccl);
    if (!e)
      e = pk_cuda_operator_view(A, 0, &v);
    if (!e) {
      cudaError_t ce = (cudaError_t)pk_cuda_op_apply(st, &v, in, out);
      if (ce == cudaSuccess && mem == PKRYLOV_MEM_HOST)
        ce = cudaMemcpyAsync(y, dy, bytes, cudaMemcpyDeviceToHost, st);
      if (ce == cudaSuccess)
        ce = cudaStreamSynchronize(st);
      if (ce != cudaSuccess)
        e = cuda_err(ctx, ce, "applying the operator");
    }
  }
  cudaFree(dx);
  cudaFree(dy);
  return e;
}

extern "C" void pk_cuda_dist_timers(double *halo_s, double *reduce_s, int reset) {
  if (halo_s)
    *halo_s = g_halo_s;
  if (reduce_s)
    *reduce_s = g_reduce_s;
  if (reset)
    g_halo_s = g_reduce_s = 0.0;
}

extern "C" void pk_cuda_dist_add_reduce_time(double t) {
  g_reduce_s += t;
}

extern "C" int pk_cuda_dist_instrumented(void) {
  const char *s = getenv("PKRYLOV_DIST_INSTRUMENT");
  return s && s[0] == '1';
}

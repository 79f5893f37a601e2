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
 * kernels (pk_cuda_grid.cuh, Halo) evaluate a tile-edge row with the single-rank expression of its global
 * row: the distributed product is bitwise the single-rank one (test t930).
 *
 * A grid stencil on several ranks (grid.c's plan; pk_cuda_dist_attach through grid_attach) uses the same
 * machinery with one direction per neighbour rank: the pack kernel gathers the plan's send list level by
 * level (a warp reads consecutive entries of a row: coalesced along the south and north edges), each
 * neighbour rank's block (level-major inside: entry i of a block of m at level k is its k m + i) travels
 * as one message (NCCL or host-staged MPI through pk_grid_exchange_bufs, which moves blocks as they are),
 * the unpack kernel turns the received blocks into the level-major halo the grid kernel reads
 * (pk_cuda_op.ghalo: slot h level k at h + nhalo k, so a warp of edge columns reads consecutive slots), and
 * the split launches run the columns that read no halo slot (cols = 1) while the halos travel, then the
 * rest (cols = 2, the list grcols): bitwise grid.c's product (only the order of the values in the buffers
 * differs from grid.c's slot-major one).
 *
 * Two paths, chosen per solve / product (pk_mpi_nccl: NCCL when it was built in, the ranks have GPUs of
 * their own and the option dist.nccl is not 0):
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
 * An exchange is split so that the kernels that need no halo run meanwhile (pk_cuda_cg.cu):
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
 * benchmark sizes and overlap the interior columns (docs/notes/performance-history.md, "The host-staged
 * path (before NCCL)").
 *
 * Timers of the host time spent in the exchanges and the global sums serve the benchmark. In the
 * instrumented mode (context option dist.instrument=1, read at each exchange) the device work queued
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
  int grid;               /* 0: a distributed tile (dist.c); 1: a grid stencil on several ranks (grid.c) */
  int nx, ny, nz;
  /* the directions: a tile's four (W, E, S, N; has[] says which have a neighbour), a grid's neighbour ranks
     (every one has); per direction its received block in the halo area (roff, rlen) and its sent block in
     the send area (soff, slen) */
  int ndir;
  int *has, *nb;
  int64_t *roff, *rlen, *soff, *slen;
  int64_t rtotal, stotal; /* tile: 2 (ny + nx) nz each; grid: nhalo nz, send_off[nnb] nz */
  double *dbuf;           /* device: halos (rtotal) then the packed edges (stotal) */
  /* grid: the compact column of every sent entry (nsend, in grid.c's order) and where its levels go in the
     send area (sdst[s] + sstr[s] k), where the levels of every halo slot are in the received blocks
     (rsrc[h] + rstr[h] k; nhalo slots), the level-major halo the kernels read (dlm, rtotal), the columns
     that read a halo slot (rcols, nrc) and their flags (rmask, per column) */
  const struct pkrylov_grid_s *g;
  int64_t nsend, ncol, nrc, nhalo;
  int64_t *dsidx, *drcols;
  int64_t *dlay;          /* device: sdst, sstr (nsend each), rsrc, rstr (nhalo each) */
  double *dlm;
  uint8_t *drmask;
  double *dcoef;          /* device, stencil: aWe (ny*nz) then aSn (nx*nz) */
  double *hrcv, *hsnd;    /* pinned host: halos, packed edges (total each) */
  cudaStream_t copy;      /* the copies, so that they overlap the kernels of the context's stream */
  cudaEvent_t packed_dev; /* on the context's stream after the pack kernel */
  cudaEvent_t packed;     /* on the copy stream: the edges are on the host */
  cudaEvent_t arrived;    /* on the copy stream: the halos are on the device */
  cudaEvent_t fork, join; /* NCCL sums: the communication stream waits for / is waited for by the context's */
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

/** Grid: the values other ranks need into snd, level by level (thread t: entry s = t mod nsend, level
 *  k = t / nsend), entry s level k at sdst[s] + sstr[s] k (its neighbour's block, level-major inside). */
__global__ void __launch_bounds__(PKD_BLOCK)
    k_gpack(int64_t nsend, int nz, int64_t ncol, const int64_t *__restrict__ sidx,
            const int64_t *__restrict__ sdst, const int64_t *__restrict__ sstr, const double *__restrict__ x,
            double *__restrict__ snd) {
  const int64_t m = nsend * nz, stride = (int64_t)gridDim.x * PKD_BLOCK;
  for (int64_t t = (int64_t)blockIdx.x * PKD_BLOCK + threadIdx.x; t < m; t += stride) {
    const int64_t k = t / nsend, s = t - k * nsend;
    snd[sdst[s] + sstr[s] * k] = x[sidx[s] + ncol * k];
  }
}

/** Grid: the received blocks (rcv) into the level-major halo (slot h level k at h + nhalo k; thread t is
 *  that value), slot h's levels at rsrc[h] + rstr[h] k in rcv. */
__global__ void __launch_bounds__(PKD_BLOCK)
    k_gunpack(int64_t nhalo, int nz, const int64_t *__restrict__ rsrc, const int64_t *__restrict__ rstr,
              const double *__restrict__ rcv, double *__restrict__ halo) {
  const int64_t m = nhalo * nz, stride = (int64_t)gridDim.x * PKD_BLOCK;
  for (int64_t t = (int64_t)blockIdx.x * PKD_BLOCK + threadIdx.x; t < m; t += stride) {
    const int64_t k = t / nhalo, h = t - k * nhalo;
    halo[t] = rcv[rsrc[h] + rstr[h] * k];
  }
}

/** The directions of d with a neighbour (k_pack's mask). */
int pack_mask(const DistDev *d) {
  return (d->has[0] ? 1 : 0) | (d->has[1] ? 2 : 0) | (d->has[2] ? 4 : 0) | (d->has[3] ? 8 : 0);
}

/** Pack x's values the neighbours need into the send area, on stream st. */
cudaError_t pack(DistDev *d, const double *x, cudaStream_t st) {
  double *snd = d->dbuf + d->rtotal;
  int64_t nb = (d->stotal + PKD_BLOCK - 1) / PKD_BLOCK;
  if (nb > 4096) nb = 4096;
  if (nb < 1) nb = 1;
  if (d->grid)
    k_gpack<<<(unsigned)nb, PKD_BLOCK, 0, st>>>(d->nsend, d->nz, d->ncol, d->dsidx, d->dlay,
                                                 d->dlay + d->nsend, x, snd);
  else
    k_pack<<<(unsigned)nb, PKD_BLOCK, 0, st>>>(d->nx, d->ny, d->nz, pack_mask(d), x, snd);
  return cudaGetLastError();
}

/** Grid: the received blocks into the level-major halo the kernels read, on stream st (after the arrival;
 *  nothing for a distributed tile, whose kernels read the received halos directly). */
cudaError_t unpack(DistDev *d, cudaStream_t st) {
  if (!d->grid || d->rtotal == 0)
    return cudaSuccess;
  int64_t nb = (d->rtotal + PKD_BLOCK - 1) / PKD_BLOCK;
  if (nb > 4096) nb = 4096;
  const int64_t *rsrc = d->dlay + 2 * d->nsend;
  k_gunpack<<<(unsigned)nb, PKD_BLOCK, 0, st>>>(d->nhalo, d->nz, rsrc, rsrc + d->nhalo, d->dbuf, d->dlm);
  return cudaGetLastError();
}

/** The host side of the host-staged exchange: hsnd out, hrcv in (MPI through dist.c or grid.c). */
int host_exchange(struct pkrylov_operator_s *A, DistDev *d) {
  if (d->grid) return pk_grid_exchange_bufs(d->g, d->nz, d->hsnd, d->hrcv);
  const int rc = pk_dist_exchange_begin(A, d->hrcv, d->hsnd);
  const int rc2 = pk_dist_exchange_end(A);
  return rc ? rc : rc2;
}

/** Allocate the per-direction arrays of d (n directions). */
int alloc_dirs(DistDev *d, int n) {
  d->ndir = n;
  d->has = (int *)calloc((size_t)(2 * n + 1), sizeof(int));
  d->roff = (int64_t *)calloc((size_t)(4 * n + 1), sizeof(int64_t));
  if (!d->has || !d->roff) return 1;
  d->nb = d->has + n;
  d->rlen = d->roff + n, d->soff = d->roff + 2 * n, d->slen = d->roff + 3 * n;
  return 0;
}

cudaStream_t stream_of(pkrylov_context ctx) {
  return (cudaStream_t)pk_cuda_context_stream(ctx);
}

/** d's communication stream waits for the work enqueued so far on st (event ev recorded there). */
cudaError_t comm_after(DistDev *d, cudaEvent_t ev, cudaStream_t st) {
  cudaError_t e = cudaEventRecord(ev, st);
  return e == cudaSuccess ? cudaStreamWaitEvent(d->copy, ev, 0) : e;
}

/* the public functions the exchanges and sums serve, for pk_cuda_error (pk_cuda.h): a solve's, an operator's
   set-up; the public products (dist_public) pass their own */
constexpr const char *kSolve = "pkrylov_solver_solve", *kCreate = "pkrylov_operator_create";

DistDev *dist_of(struct pkrylov_operator_s *A) {
  pk_cuda_op v;
  if (!(A->dist || A->grid) || !A->dev || pk_cuda_operator_view(A, 0, &v))
    return NULL;
  return (DistDev *)v.dist;
}

} // namespace

namespace {
/** The buffers, streams and events every distributed operator has (d's sizes set); 0 or a CUDA error. */
cudaError_t alloc_common(DistDev *d, cudaStream_t st) {
  const size_t tot = (size_t)(d->rtotal + d->stotal);
  cudaError_t e = cudaMalloc(&d->dbuf, sizeof(double) * (tot ? tot : 1));
  if (e == cudaSuccess) e = cudaMemsetAsync(d->dbuf, 0, sizeof(double) * tot, st);
  if (e == cudaSuccess) e = cudaMallocHost(&d->hrcv, sizeof(double) * (size_t)(d->rtotal ? d->rtotal : 1));
  if (e == cudaSuccess) e = cudaMallocHost(&d->hsnd, sizeof(double) * (size_t)(d->stotal ? d->stotal : 1));
  if (e == cudaSuccess) e = cudaEventCreateWithFlags(&d->packed, cudaEventDisableTiming);
  if (e == cudaSuccess) e = cudaEventCreateWithFlags(&d->packed_dev, cudaEventDisableTiming);
  if (e == cudaSuccess) e = cudaEventCreateWithFlags(&d->arrived, cudaEventDisableTiming);
  if (e == cudaSuccess) e = cudaEventCreateWithFlags(&d->fork, cudaEventDisableTiming);
  if (e == cudaSuccess) e = cudaEventCreateWithFlags(&d->join, cudaEventDisableTiming);
  if (e == cudaSuccess) e = cudaStreamCreateWithFlags(&d->copy, cudaStreamNonBlocking);
  return e;
}

/** The level-major layout of the neighbours' blocks (entries off[q] .. off[q+1]-1 for neighbour q): entry e
 *  of a block of m entries from o, level k, at base[e] + str[e] k with base[e] = o nz + (e - o), str[e] = m. */
void block_layout(const int64_t *off, int nnb, int64_t nz, int64_t *base, int64_t *str) {
  for (int q = 0; q < nnb; q++) {
    const int64_t o = off[q], m = off[q + 1] - o;
    for (int64_t e = o; e < o + m; e++) base[e] = o * nz + (e - o), str[e] = m;
  }
}

/** A grid stencil on several ranks: the plan's send list, halo blocks and remote-reading columns. */
int grid_attach(struct pkrylov_operator_s *A, DistDev *d, pk_cuda_op *view) {
  pkrylov_context ctx = A->ctx;
  const struct pkrylov_grid_s *g = A->grid;
  const int64_t nz = A->nz;
  d->grid = 1, d->g = g;
  d->nx = A->nx, d->ny = A->ny, d->nz = A->nz;
  d->ncol = g->ncol, d->nsend = g->send_off[g->nnb];
  if (alloc_dirs(d, g->nnb))
    return pk_error(ctx, PKRYLOV_ERR_OUT_OF_MEMORY, "pkrylov_operator_create", "cannot allocate");
  for (int q = 0; q < g->nnb; q++) {
    d->has[q] = 1, d->nb[q] = g->nb_rank[q];
    d->roff[q] = g->recv_off[q] * nz, d->rlen[q] = (g->recv_off[q + 1] - g->recv_off[q]) * nz;
    d->soff[q] = g->send_off[q] * nz, d->slen[q] = (g->send_off[q + 1] - g->send_off[q]) * nz;
  }
  d->any = g->nnb > 0;
  d->nhalo = g->nhalo;
  d->rtotal = g->nhalo * nz, d->stotal = d->nsend * nz;
  /* the host lists: sent columns, the blocks' layout, the columns that read a slot (ascending), their flags */
  const int64_t nlay = 2 * (d->nsend + d->nhalo);
  int64_t *sidx = (int64_t *)malloc(sizeof(int64_t) * (size_t)(d->nsend + 1));
  int64_t *lay = (int64_t *)malloc(sizeof(int64_t) * (size_t)(nlay + 1));
  uint8_t *rmask = (uint8_t *)calloc((size_t)g->ncol + 1, 1);
  int64_t *rcols = NULL;
  if (sidx && lay && rmask) {
    for (int64_t s = 0; s < d->nsend; s++) sidx[s] = g->ecol[g->send_ecell[s]];
    /* entry i of neighbour q's block (m entries from o) level k at o nz + i + m k, sent and received alike */
    int64_t *sdst = lay, *sstr = lay + d->nsend, *rsrc = lay + 2 * d->nsend, *rstr = rsrc + d->nhalo;
    block_layout(g->send_off, g->nnb, nz, sdst, sstr);
    block_layout(g->recv_off, g->nnb, nz, rsrc, rstr);
    for (int64_t ec = 0; ec < g->nedge; ec++)
      if (g->nbr[ec] <= -2) rmask[g->ecol[ec]] = 1;
    for (int64_t c = 0; c < g->ncol; c++) d->nrc += rmask[c];
    rcols = (int64_t *)malloc(sizeof(int64_t) * (size_t)(d->nrc + 1));
    if (rcols)
      for (int64_t c = 0, m = 0; c < g->ncol; c++)
        if (rmask[c]) rcols[m++] = c;
  }
  cudaStream_t st = stream_of(ctx);
  cudaError_t e = sidx && lay && rmask && rcols ? cudaSuccess : cudaErrorMemoryAllocation;
  if (e == cudaSuccess) e = alloc_common(d, st);
  if (e == cudaSuccess) e = cudaMalloc(&d->dlm, sizeof(double) * (size_t)(d->rtotal + 1));
  if (e == cudaSuccess) e = cudaMemsetAsync(d->dlm, 0, sizeof(double) * (size_t)d->rtotal, st);
  if (e == cudaSuccess) e = cudaMalloc(&d->dlay, sizeof(int64_t) * (size_t)(nlay + 1));
  if (e == cudaSuccess)
    e = cudaMemcpyAsync(d->dlay, lay, sizeof(int64_t) * (size_t)nlay, cudaMemcpyHostToDevice, st);
  if (e == cudaSuccess) e = cudaMalloc(&d->dsidx, sizeof(int64_t) * (size_t)(d->nsend + 1));
  if (e == cudaSuccess) e = cudaMalloc(&d->drcols, sizeof(int64_t) * (size_t)(d->nrc + 1));
  if (e == cudaSuccess) e = cudaMalloc(&d->drmask, (size_t)g->ncol + 1);
  if (e == cudaSuccess)
    e = cudaMemcpyAsync(d->dsidx, sidx, sizeof(int64_t) * (size_t)d->nsend, cudaMemcpyHostToDevice, st);
  if (e == cudaSuccess)
    e = cudaMemcpyAsync(d->drcols, rcols, sizeof(int64_t) * (size_t)d->nrc, cudaMemcpyHostToDevice, st);
  if (e == cudaSuccess) e = cudaMemcpyAsync(d->drmask, rmask, (size_t)g->ncol, cudaMemcpyHostToDevice, st);
  if (e == cudaSuccess) e = cudaStreamSynchronize(st);
  free(sidx), free(lay), free(rmask), free(rcols);
  if (e != cudaSuccess)
    return pk_cuda_error(ctx, kCreate, (int)e, "allocating the halo buffers", NULL);
  view->ghalo = d->dlm, view->gnhalo = d->nhalo;
  view->grcols = d->drcols, view->grmask = d->drmask, view->gnrc = d->nrc;
  view->cols = 0;
  return PKRYLOV_SUCCESS;
}
} // namespace

extern "C" int pk_cuda_dist_attach(struct pkrylov_operator_s *A, pk_cuda_op *view) {
  pkrylov_context ctx = A->ctx;
  DistDev *d = (DistDev *)calloc(1, sizeof(DistDev));
  if (!d) return pk_error(ctx, PKRYLOV_ERR_OUT_OF_MEMORY, "pkrylov_operator_create", "cannot allocate");
  view->dist = d;
  if (A->grid) return grid_attach(A, d, view);
  pk_dist_tile t;
  PK_CALL(pk_dist_get_tile(A, &t));
  d->nx = t.nx, d->ny = t.ny, d->nz = t.nz;
  const int64_t ex = (int64_t)t.ny * t.nz, ey = (int64_t)t.nx * t.nz;
  if (alloc_dirs(d, 4)) {
    free(t.aWe), free(t.aSn);
    return pk_error(ctx, PKRYLOV_ERR_OUT_OF_MEMORY, "pkrylov_operator_create", "cannot allocate");
  }
  d->rlen[0] = d->rlen[1] = ex, d->rlen[2] = d->rlen[3] = ey;
  d->roff[0] = 0, d->roff[1] = ex, d->roff[2] = 2 * ex, d->roff[3] = 2 * ex + ey;
  for (int k = 0; k < 4; k++) {
    d->soff[k] = d->roff[k], d->slen[k] = d->rlen[k];
    d->has[k] = t.has[k], d->any |= t.has[k], d->nb[k] = t.nb[k];
  }
  d->rtotal = d->stotal = 2 * (ex + ey);
  cudaStream_t st = stream_of(ctx);
  cudaError_t e = alloc_common(d, st);
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
    return pk_cuda_error(ctx, kCreate, (int)e, "allocating the halo buffers", NULL);
  view->dhw = d->has[0] ? d->dbuf + d->roff[0] : NULL;
  view->dhe = d->has[1] ? d->dbuf + d->roff[1] : NULL;
  view->dhs = d->has[2] ? d->dbuf + d->roff[2] : NULL;
  view->dhn = d->has[3] ? d->dbuf + d->roff[3] : NULL;
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
  cudaFree(d->dsidx);
  cudaFree(d->dlay);
  cudaFree(d->dlm);
  cudaFree(d->drcols);
  cudaFree(d->drmask);
  free(d->has);
  free(d->roff);
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
int nccl_err(pkrylov_context ctx, const char *func, ncclResult_t r, const char *what) {
  return pk_error(ctx, PKRYLOV_ERR_BACKEND, func, "%s: NCCL error %d (%s)", what, (int)r,
                  ncclGetErrorString(r));
}

/** The NCCL half of _begin: pack (context's stream), then the group of sends and receives (copy stream). */
int nccl_halo_begin(pkrylov_context ctx, DistDev *d, const double *x, ncclComm_t comm, const char *func) {
  cudaStream_t st = stream_of(ctx);
  const int instr = pk_cuda_dist_instrumented(ctx);
  double t0 = 0.0;
  if (instr) {
    cudaError_t e = cudaStreamSynchronize(st);
    if (e != cudaSuccess)
      return pk_cuda_error(ctx, func, (int)e, "synchronising", NULL);
    t0 = pk_wtime();
  }
  double *snd = d->dbuf + d->rtotal;
  /* x is complete at this point of the context's stream; the pack runs on the communication stream, off
     the context's (whose next kernels only read x) */
  cudaError_t e = comm_after(d, d->packed_dev, st);
  if (e == cudaSuccess)
    e = pack(d, x, d->copy);
  if (e != cudaSuccess)
    return pk_cuda_error(ctx, func, (int)e, "packing the tile edges", NULL);
  ncclResult_t r = ncclGroupStart();
  for (int k = 0; k < d->ndir && r == ncclSuccess; k++) {
    if (!d->has[k])
      continue;
    r = ncclSend(snd + d->soff[k], (size_t)d->slen[k], ncclDouble, d->nb[k], comm, d->copy);
    if (r == ncclSuccess)
      r = ncclRecv(d->dbuf + d->roff[k], (size_t)d->rlen[k], ncclDouble, d->nb[k], comm, d->copy);
  }
  const ncclResult_t r2 = ncclGroupEnd();
  if (r != ncclSuccess || r2 != ncclSuccess)
    return nccl_err(ctx, func, r != ncclSuccess ? r : r2, "ncclSend/ncclRecv");
  e = unpack(d, d->copy);
  if (e == cudaSuccess)
    e = cudaEventRecord(d->arrived, d->copy);
  if (e == cudaSuccess && instr)
    e = cudaEventSynchronize(d->arrived);
  if (e != cudaSuccess)
    return pk_cuda_error(ctx, func, (int)e, "halo exchange", NULL);
  if (instr)
    g_halo_s += pk_wtime() - t0;
  return PKRYLOV_SUCCESS;
}
} // namespace
#endif

/** pk_cuda_dist_halo_begin for the public function func. */
static int halo_begin(struct pkrylov_operator_s *A, const double *x, void *nccl, const char *func) {
  DistDev *d = dist_of(A);
  if (!d || !d->any)
    return PKRYLOV_SUCCESS;
  pkrylov_context ctx = A->ctx;
  if (d->pending)
    return pk_error(ctx, PKRYLOV_ERR_INTERNAL, "halo exchange", "an exchange is pending");
#ifdef PKRYLOV_HAVE_NCCL
  if (nccl) {
    PK_CALL(nccl_halo_begin(ctx, d, x, (ncclComm_t)nccl, func));
    d->pending = 2;
    return PKRYLOV_SUCCESS;
  }
#else
  (void)nccl;
#endif
  cudaStream_t st = stream_of(ctx);
  const int instr = pk_cuda_dist_instrumented(ctx);
  double t0 = 0.0;
  if (instr) { /* the work queued before is not the exchange's */
    cudaError_t e = cudaStreamSynchronize(st);
    if (e != cudaSuccess)
      return pk_cuda_error(ctx, func, (int)e, "synchronising", NULL);
    t0 = pk_wtime();
  }
  double *snd = d->dbuf + d->rtotal;
  cudaError_t e = pack(d, x, st);
  /* the copies on the copy stream after the pack: the context's stream goes on with the next kernels */
  if (e == cudaSuccess)
    e = comm_after(d, d->packed_dev, st);
  for (int k = 0; k < d->ndir && e == cudaSuccess; k++)
    if (d->has[k])
      e = cudaMemcpyAsync(d->hsnd + d->soff[k], snd + d->soff[k], sizeof(double) * (size_t)d->slen[k],
                          cudaMemcpyDeviceToHost, d->copy);
  if (e == cudaSuccess)
    e = cudaEventRecord(d->packed, d->copy);
  if (e == cudaSuccess && instr)
    e = cudaEventSynchronize(d->packed);
  if (e != cudaSuccess)
    return pk_cuda_error(ctx, func, (int)e, "packing the tile edges", NULL);
  if (instr)
    g_halo_s += pk_wtime() - t0;
  d->pending = 1;
  return PKRYLOV_SUCCESS;
}

/** pk_cuda_dist_halo_end for the public function func. */
static int halo_end(struct pkrylov_operator_s *A, void *nccl, const char *func) {
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
    return e == cudaSuccess ? PKRYLOV_SUCCESS
                            : pk_cuda_error(ctx, func, (int)e, "waiting for the halos", NULL);
  }
  const int instr = pk_cuda_dist_instrumented(ctx);
  cudaError_t e = cudaEventSynchronize(d->packed);
  if (e != cudaSuccess)
    return pk_cuda_error(ctx, func, (int)e, "waiting for the packed edges", NULL);
  const double t0 = pk_wtime();
  PK_CALL(host_exchange(A, d));
  cudaStream_t st = stream_of(ctx);
  /* the copies on the copy stream (they overlap the kernels queued on the context's stream, which waits
     for them before the next launch); instrumented: waited for here, so that the timer holds them */
  for (int k = 0; k < d->ndir && e == cudaSuccess; k++)
    if (d->has[k])
      e = cudaMemcpyAsync(d->dbuf + d->roff[k], d->hrcv + d->roff[k], sizeof(double) * (size_t)d->rlen[k],
                          cudaMemcpyHostToDevice, d->copy);
  if (e == cudaSuccess)
    e = unpack(d, d->copy);
  if (e == cudaSuccess)
    e = cudaEventRecord(d->arrived, d->copy);
  if (e == cudaSuccess)
    e = cudaStreamWaitEvent(st, d->arrived, 0);
  if (e == cudaSuccess && instr)
    e = cudaEventSynchronize(d->arrived);
  g_halo_s += pk_wtime() - t0;
  if (e != cudaSuccess)
    return pk_cuda_error(ctx, func, (int)e, "copying the halos to the device", NULL);
  return PKRYLOV_SUCCESS;
}

/** halo_begin, then halo_end. */
static int halo_both(struct pkrylov_operator_s *A, const double *x, void *nccl, const char *func) {
  PK_CALL(halo_begin(A, x, nccl, func));
  return halo_end(A, nccl, func);
}

/* the solve drivers' exchanges */
extern "C" int pk_cuda_dist_halo_begin(struct pkrylov_operator_s *A, const double *x, void *nccl) {
  return halo_begin(A, x, nccl, kSolve);
}

extern "C" int pk_cuda_dist_halo_end(struct pkrylov_operator_s *A, void *nccl) {
  return halo_end(A, nccl, kSolve);
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
    return pk_cuda_error(A->ctx, kSolve, (int)e, "global sums", NULL);
  *comm = d->copy;
  return PKRYLOV_SUCCESS;
}

extern "C" int pk_cuda_dist_halo(struct pkrylov_operator_s *A, const double *x, void *nccl) {
  return halo_both(A, x, nccl, kSolve);
}

extern "C" int pk_cuda_dist_allgather_wait(struct pkrylov_operator_s *A) {
  DistDev *d = dist_of(A);
  if (!d)
    return pk_error(A->ctx, PKRYLOV_ERR_INTERNAL, "global sums", "not a distributed operator");
  cudaError_t e = cudaStreamWaitEvent(stream_of(A->ctx), d->join, 0);
  return e == cudaSuccess ? PKRYLOV_SUCCESS
                          : pk_cuda_error(A->ctx, kSolve, (int)e, "waiting for the global sums", NULL);
}

extern "C" int pk_cuda_dist_allgather(struct pkrylov_operator_s *A, void *nccl, const double *src,
                                      double *dst, int count, int wait) {
  pkrylov_context ctx = A->ctx;
  DistDev *d = dist_of(A);
  if (!d || !nccl)
    return pk_error(ctx, PKRYLOV_ERR_INTERNAL, "global sums", "no NCCL communicator / distributed operator");
#ifdef PKRYLOV_HAVE_NCCL
  cudaStream_t st = stream_of(ctx);
  const int instr = pk_cuda_dist_instrumented(ctx);
  double t0 = 0.0;
  cudaError_t e = cudaSuccess;
  if (instr) {
    e = cudaStreamSynchronize(st);
    if (e != cudaSuccess)
      return pk_cuda_error(ctx, kSolve, (int)e, "synchronising", NULL);
    t0 = pk_wtime();
  }
  e = comm_after(d, d->fork, st);
  if (e != cudaSuccess)
    return pk_cuda_error(ctx, kSolve, (int)e, "global sums", NULL);
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
    return pk_cuda_error(ctx, kSolve, (int)e, "global sums", NULL);
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
    return pk_cuda_error(ctx, kSolve, (int)e, "global sums", NULL);
  ncclResult_t r = ncclAllReduce(buf, buf, (size_t)count, ncclInt64, ncclSum, (ncclComm_t)nccl, d->copy);
  if (r != ncclSuccess)
    return pk_error(ctx, PKRYLOV_ERR_BACKEND, "global sums", "ncclAllReduce: NCCL error %d (%s)", (int)r,
                    ncclGetErrorString(r));
  e = cudaEventRecord(d->join, d->copy);
  if (e == cudaSuccess)
    e = cudaStreamWaitEvent(st, d->join, 0);
  return e == cudaSuccess ? PKRYLOV_SUCCESS : pk_cuda_error(ctx, kSolve, (int)e, "global sums", NULL);
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

namespace {
/** y = A x (pc NULL) or y = M^-1 x (pc: a view of M, which reads x's neighbours) on the public path, with
 *  x's halo exchanged through the distributed operator A first. Collective. */
int dist_public(struct pkrylov_operator_s *A, const pk_cuda_pc *pc, const char *func, int32_t mem,
                const double *x, double *y) {
  pkrylov_context ctx = A->ctx;
  int e = pk_check_vectors(ctx, func, mem, x, pc ? "r" : "x", y, pc ? "z" : "y", A->n);
  if (!e)
    e = pk_cuda_check_pointer(ctx, func, mem, x, pc ? "r" : "x");
  if (!e)
    e = pk_cuda_check_pointer(ctx, func, mem, y, pc ? "z" : "y");
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
      e = pk_cuda_error(ctx, func, (int)ce, "copying x to the device", NULL);
  }
  e = pk_mpi_agree(ctx, e); /* every rank reaches the exchange, or none */
  void *nccl = NULL;
  if (!e) /* the options that choose the path agree (collective; the same error on every rank) */
    e = pk_mpi_check_options(ctx, "pkrylov_operator_apply");
  if (!e)
    e = pk_mpi_nccl(ctx, &nccl); /* collective */
  if (!e) {
    const double *in = mem == PKRYLOV_MEM_HOST ? dx : x;
    double *out = mem == PKRYLOV_MEM_HOST ? dy : y;
    pk_cuda_op v;
    e = halo_both(A, in, nccl, func);
    if (!e && !pc)
      e = pk_cuda_operator_view(A, 0, &v);
    if (!e) {
      cudaError_t ce = (cudaError_t)(pc ? pk_cuda_pc_apply(st, pc, NULL, in, out) : pk_cuda_op_apply(st, &v, in, out));
      if (ce == cudaSuccess && mem == PKRYLOV_MEM_HOST)
        ce = cudaMemcpyAsync(y, dy, bytes, cudaMemcpyDeviceToHost, st);
      if (ce == cudaSuccess)
        ce = cudaStreamSynchronize(st);
      if (ce != cudaSuccess)
        e = pk_cuda_error(ctx, func, (int)ce, pc ? "applying the preconditioner" : "applying the operator",
                          NULL);
    }
  }
  cudaFree(dx);
  cudaFree(dy);
  return e;
}
} // namespace

extern "C" int pk_cuda_dist_apply_public(struct pkrylov_operator_s *A, int32_t mem, const double *x,
                                         double *y) {
  return dist_public(A, NULL, "pkrylov_operator_apply", mem, x, y);
}

extern "C" int pk_cuda_dist_precond_apply_public(struct pkrylov_precond_s *M, int32_t mem, const double *r,
                                                 double *z) {
  pk_cuda_pc v;
  PK_CALL(pk_cuda_precond_view(M, 0, &v));
  return dist_public(M->A, &v, "pkrylov_precond_apply", mem, r, z);
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

extern "C" int pk_cuda_dist_instrumented(const struct pkrylov_context_s *ctx) {
  return ctx && ctx->opts.dist_instrument != 0;
}

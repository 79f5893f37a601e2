/**
 * @file pk_cuda_kry.cu
 * @brief The CUDA backend of the vector engine of the BiCGStab and GMRES families (pk_kry.h).
 *
 * Everything the drivers ask for is enqueued on the context's stream; the host waits for the device only in
 * get, sync, unbind and first_nonfinite. Device state per engine: the work vectors and the basis block
 * (column-major, leading dimension ld = n rounded up to 32 values, 256 bytes), the scalar array S, the
 * device copies of b and x when the caller passed host arrays, and the partial-sum buffer of the
 * reductions.
 *
 * Kernels (all 1-D blocks of KB = 256 threads, grid sizes a function of the problem only):
 *  - update: one generic fused kernel per call. The update list and the pairs travel by value in a kernel
 *    parameter struct (copied to shared memory by every block); the coefficient values are read from S on
 *    the device (so an update can use a scalar that a device-side scalar step just computed). Per element,
 *    the updates run in list order with the arithmetic of pk_kry.h (t = cy*y; t = t + c*x ...; a zero
 *    coefficient skips its term; compiled with -fmad=false, so each element is bitwise the CPU engine's),
 *    then the dot products of the pairs are accumulated; one partial per block.
 *  - multi-dot (block_dots, basis_dots): a tile of TA x TB dot products per block row (grid.y = tiles),
 *    each thread loading TA + TB vectors per element; double-double variant with the exact two-product
 *    (fma) and two-sum.
 *  - basis_axpy, basis_gemm: one thread per element walking the basis columns (each basis vector read once
 *    per output chunk), no reduction.
 *  - sums: every reduction is two-stage and deterministic: each thread adds its elements in order, a fixed
 *    tree (warp shuffles 16..1, then warp 0 over the 8 warp sums) gives one partial per block, then one
 *    block per value adds the partials in block order (lane t: blocks t, t + 256, ...; then the same tree)
 *    and writes S[out + j] directly. No atomics on floating-point values.
 *  - reproducible mode (ctx->reproducible): every sum is recomputed after its kernel as an exact sum
 *    (pk_cuda_xacc.cu; see "exact sums"), the kernel skipping its own partials.
 *  - scalar steps: a <<<1, 1>>> kernel calling pk_kry_scalar_step (kry_scalar.h).
 *  - basis_axpy_dots: one pass that updates y and accumulates (V_j, y) and (y, y) of the new values, the
 *    basis values of an element held in registers (k <= 32; more: the two kernels).
 * The operator products, preconditioner applications and residuals use the launchers of
 * pk_cuda_kernels.cu (every operator and preconditioner type they support). User-callback operators and
 * preconditioners: the stream is synchronised and the routine called with device pointers of the engine's
 * vectors (pk_cuda_user_call; a nonzero return is PKRYLOV_ERR_CALLBACK); a residual gets A x from the
 * routine into D->ax, which the residual launcher reads. Operators with the caller's halo-exchange routine
 * (pkrylov_operator_create_stencil7_exchange) are applied like a user operator, as on the CG path: every
 * product (matvec, also CA-GMRES's basis products) and every residual runs pk_cuda_halo_apply (a kernel
 * fills the operator's device halo'ed array from x, the stream is synchronised, the caller's exchange fills
 * the halo through the device pointer, then the stencil and edge-coupling kernels: A x bitwise the CPU's;
 * a nonzero return is PKRYLOV_ERR_CALLBACK), into y or, for a residual, into D->ax (the residual launcher
 * reads it over a USER view that keeps the mask). Such blocks hold host calls: no graphs, and the drivers
 * poll every iteration (pk_kry_sync_interval), so the routine is not called after the solve stopped. On a
 * distributed context the caller's exchange does the communication; the engine's sums are global
 * (host-staged: the operator is not A->dist, so there is no NCCL communicator).
 *
 * Distributed contexts (several ranks, one GPU per rank or ranks sharing one): a distributed grid operator
 * (A->dist: thin shell, column stencil) gets its halo exchanged on the device (pk_cuda_dist.cu): an operator
 * product runs the columns off the tile edges while the halo travels, then the edge columns; a residual
 * exchanges first. Every sum becomes global (see "global sums"): the rank's sums of the single-GPU kernels,
 * gathered over the ranks (NCCL or host-staged MPI) and added in rank order on every rank, so all ranks get
 * bitwise the same scalars, take the same decisions (convergence, breakdown, NaN) and stay in lockstep. A sum
 * started with PK_KRY_ASYNC is finished by pk_kry_wait, after the preconditioner and the operator product
 * the pipelined methods queue in between. Graphs of blocks: on the NCCL path only (the host-staged path
 * calls MPI between the kernels), and not for blocks that a started sum crosses (pipelined GMRES).
 *
 * Blocks (pk_kry_block_begin/end): the operations of a block are recorded and replayed as a CUDA graph when
 * the same sequence comes again (see "operations" below). The solver's options, read at create:
 * kry.graph=0 (no graphs), kry.fuse=0 (basis_axpy_dots as two kernels), kry.profile=1
 * (every operation timed with events and a synchronisation; a summary on stderr when the engine is freed;
 * no graphs).
 *
 * On one rank, PK_KRY_ASYNC is the same as the blocking form: the sums are in S when the next operation on
 * the stream runs.
 */
#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>

#include <new>
#include <vector>

extern "C" {
#include "pk_kry.h"
}
#include "kry_scalar.h"
#include "pk_cuda.h"

namespace {

constexpr int KB = 256;                   /* threads per block */
constexpr int64_t KMAX_UPD_BLOCKS = 1024; /* update / axpy / gemm grid cap */
constexpr int64_t KMAX_DOT_BLOCKS = 256;  /* multi-dot grid cap (grid.x): bounds the partial slots */
constexpr int KGEMM_J = 8;                /* outputs per chunk of basis_gemm */

/** A graph of a block: the block's operation records (scalar arguments relative) and its executable. */
struct GraphEntry {
  std::vector<int32_t> sig;
  cudaGraphExec_t exec; /* NULL: seen once (run directly), or the capture failed (failed = 1) */
  int failed;
};

/** Buffers of one global sum of a distributed engine: the rank's sums (device, pinned host copy), all
 *  ranks' sums rank after rank (device; pinned host on the host-staged path), the event of the host copy. */
struct GSlot {
  double *dsum, *gath, *hsum, *hgath;
  cudaEvent_t ev;
};

/** Engine state on the device (E->priv). */
struct KryDev {
  cudaStream_t st;
  double *vec;     /* nwork work vectors, then nbasis basis vectors, then bound copies of b and x: ld apart */
  double *S;       /* nscalars (at least 1) */
  double *b, *x;   /* the bound b and x on the device (own copies or the caller's device arrays) */
  double *part;    /* partial sums */
  size_t part_cap; /* doubles */
  double *hbuf;    /* pinned host buffer for get (nscalars) */
  unsigned long long *aux;  /* device: [0] first non-finite index, [1] unknown scalar step id + 1 (0: none) */
  unsigned long long *haux; /* pinned host twin */
  pk_cuda_op op;            /* the operator of matvec (fp32 coefficients with mixed precision level 2) */
  pk_cuda_op op64;          /* fp64: residuals */
  pk_cuda_pc pc;            /* preconditioner view (a NONE view without one) */
  /* user callbacks (the routine gets device pointers after a stream synchronisation) */
  int uop, upc;             /* the operator (or its halo exchange) / the preconditioner is a user routine */
  double *ax;               /* A x of a user or halo-exchange operator for residuals (pk_cuda_op.pre) */
  /* options (environment, read at create): graphs of blocks, fused kernels, per-operation profile */
  int graph_on, fuse_on, prof;
  /* blocks: the operations of the current block (recorded, not yet launched) and the graphs of blocks */
  int rec_on;               /* recording a block */
  int have_base;
  int32_t base;             /* first scalar-step argument of the block (the others relative to it) */
  std::vector<int32_t> log; /* the recorded operations (op records, see exec_op) */
  std::vector<GraphEntry> graphs;
  size_t graph_next;        /* the entry replaced next when the cache is full */
  int *argbase;             /* device: the block's base argument, read by the scalar steps of a graph */
  double prof_ms[32];
  long long prof_n[32];
  cudaEvent_t ev[2];
  /* distributed context (several ranks; see "global sums" below) */
  int dist;                      /* ctx->size > 1: every sum is made global */
  int nranks;
  struct pkrylov_operator_s *dop; /* the distributed grid operator (A->dist): halo exchange, NCCL stream */
  void *nccl;                    /* its NCCL communicator for this solve (pk_mpi_nccl), NULL: host-staged */
  void *nccl_warm;               /* the communicator a first allgather has run on (outside any capture) */
  pk_cuda_op op_in, op_edge;     /* op on the columns off the tile edges / on the edge columns */
  GSlot gs[2];                   /* [0] blocking sums, [1] the one started with PK_KRY_ASYNC */
  size_t gs_cap;                 /* doubles per rank in every slot */
  int pend_on, pend_nv, pend_dd; /* the started sum (slot 1): finished by OP_WAIT into S[pend_out..] */
  int32_t pend_out;
  int q_pend;                    /* submitted: an async sum without its wait yet (blocks) */
  int rec_pend0;                 /* q_pend when the block being recorded began */
  /* reproducible mode (ctx->reproducible at bind; see "exact sums"): the exact accumulators */
  int repro;
  int64_t *xblk;                 /* the blocks' accumulators of pk_cuda_xacc_dots_ex (xblk_len int64) */
  int64_t xblk_len;
  int64_t *xacc, *hxacc;         /* xcap accumulators: device; pinned host (host-staged sums) */
  size_t xcap;
  std::vector<const double *> xa, xb; /* the pairs of one exact sum (host) */
};

KryDev *dev_of(pk_kry *E) {
  return (KryDev *)E->priv;
}

/* the public function the engine serves, for pk_cuda_error / PK_CUDA_CHECK (pk_cuda.h) */
constexpr const char *kSolve = "pkrylov_solver_solve";

/** Device pointer of vector id v (ids were checked by the front end). */
double *vp(pk_kry *E, pk_vid v) {
  KryDev *D = dev_of(E);
  if (v == PK_KV_X)
    return D->x;
  if (v == PK_KV_B)
    return D->b;
  if (v >= PK_KV_V0)
    return D->vec + (size_t)(E->nwork + (v - PK_KV_V0)) * (size_t)E->ld;
  return D->vec + (size_t)(v - PK_KV_W0) * (size_t)E->ld;
}
/** Basis vector j. */
double *bp(pk_kry *E, int32_t j) {
  return vp(E, PK_KV_V0 + j);
}

int64_t grid_1d(int64_t n, int64_t cap) {
  int64_t b = (n + KB - 1) / KB;
  if (b > cap)
    b = cap;
  return b < 1 ? 1 : b;
}
/** Multi-dot grid.x: about 4 elements per thread, at most KMAX_DOT_BLOCKS. */
int64_t grid_dot(int64_t n) {
  int64_t b = (n + 4 * KB - 1) / (4 * KB);
  if (b > KMAX_DOT_BLOCKS)
    b = KMAX_DOT_BLOCKS;
  return b < 1 ? 1 : b;
}

/** Destroy the graphs of blocks (after the work queued so far: they may be running). */
void drop_graphs(pk_kry *E) {
  KryDev *D = dev_of(E);
  if (D->graphs.empty())
    return;
  cudaStreamSynchronize(D->st);
  for (GraphEntry &g : D->graphs)
    if (g.exec)
      cudaGraphExecDestroy(g.exec);
  D->graphs.clear();
  D->graph_next = 0;
}

/** Make the partial-sum buffer hold at least `need` doubles (stream-ordered reallocation). */
int ensure_part(pk_kry *E, size_t need) {
  KryDev *D = dev_of(E);
  if (need <= D->part_cap)
    return PKRYLOV_SUCCESS;
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

/* ---- device helpers ------------------------------------------------------------------------------- */

/** Fixed-shape block sum: warp shuffles (16..1), then warp 0 over the KB/32 warp sums. Result in thread 0.
 *  Every thread must call it; sh holds KB/32 doubles and may be reused after the call's last sync. */
__device__ __forceinline__ double block_sum(double v, double *sh) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
#pragma unroll
  for (int o = 16; o > 0; o >>= 1)
    v += __shfl_down_sync(0xffffffffu, v, o);
  __syncthreads(); /* sh may still be read by a previous call */
  if (lane == 0)
    sh[warp] = v;
  __syncthreads();
  double r = 0.0;
  if (warp == 0) {
    r = lane < KB / 32 ? sh[lane] : 0.0;
#pragma unroll
    for (int o = (KB / 32) / 2; o > 0; o >>= 1)
      r += __shfl_down_sync(0xffffffffu, r, o);
  }
  return r;
}

/* double-double arithmetic (no contraction: -fmad=false; the products' errors by an explicit fma) */
__device__ __forceinline__ void two_sum(double a, double b, double &s, double &e) {
  s = a + b;
  const double bb = s - a;
  e = (a - (s - bb)) + (b - bb);
}
__device__ __forceinline__ void fast_two_sum(double a, double b, double &s, double &e) {
  s = a + b;
  e = b - (s - a);
}
/** (ah, al) += (bh, bl), the accurate double-double sum. */
__device__ __forceinline__ void dd_add(double &ah, double &al, double bh, double bl) {
  double s1, s2, t1, t2;
  two_sum(ah, bh, s1, s2);
  two_sum(al, bl, t1, t2);
  s2 = s2 + t1;
  fast_two_sum(s1, s2, s1, s2);
  s2 = s2 + t2;
  fast_two_sum(s1, s2, ah, al);
}
/** (ah, al) += a * b exactly multiplied. */
__device__ __forceinline__ void dd_fma(double &ah, double &al, double a, double b) {
  const double p = a * b;
  const double e = fma(a, b, -p);
  dd_add(ah, al, p, e);
}

/** Block sum in double-double: the tree of block_sum with dd_add. Result in thread 0. */
__device__ __forceinline__ void block_sum_dd(double &h, double &l, double *sh) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
    const double oh = __shfl_down_sync(0xffffffffu, h, o), ol = __shfl_down_sync(0xffffffffu, l, o);
    dd_add(h, l, oh, ol);
  }
  __syncthreads();
  if (lane == 0)
    sh[2 * warp] = h, sh[2 * warp + 1] = l;
  __syncthreads();
  if (warp == 0) {
    h = lane < KB / 32 ? sh[2 * lane] : 0.0;
    l = lane < KB / 32 ? sh[2 * lane + 1] : 0.0;
#pragma unroll
    for (int o = (KB / 32) / 2; o > 0; o >>= 1) {
      const double oh = __shfl_down_sync(0xffffffffu, h, o), ol = __shfl_down_sync(0xffffffffu, l, o);
      dd_add(h, l, oh, ol);
    }
  }
}

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

/* ---- the fused update ----------------------------------------------------------------------------- */

struct UpdK {
  double *y;
  const double *x[PK_KRY_MAXTERMS];
  pk_coef cy;
  pk_coef c[PK_KRY_MAXTERMS];
  int32_t nterms;
  int32_t pad;
};

struct UpdArgs {
  UpdK u[PK_KRY_MAXUPD];
  const double *pa[PK_KRY_MAXPAIRS];
  const double *pb[PK_KRY_MAXPAIRS];
  int32_t nupd, npairs;
};
static_assert(sizeof(UpdArgs) % 8 == 0, "UpdArgs is copied as 64-bit words");
static_assert(sizeof(UpdArgs) <= 4000, "UpdArgs must fit the kernel parameter space");

/** Updates, then the partial dot products of the pairs (part[block * npairs + j]) when part != NULL. */
__global__ void __launch_bounds__(KB) k_update(int64_t n, const UpdArgs args, const double *S, double *part) {
  __shared__ UpdArgs a;
  __shared__ double cv[PK_KRY_MAXUPD][PK_KRY_MAXTERMS + 1];
  __shared__ double sh[KB / 32];
  {
    const unsigned long long *src = (const unsigned long long *)&args;
    unsigned long long *dst = (unsigned long long *)&a;
    for (int w = threadIdx.x; w < (int)(sizeof(UpdArgs) / 8); w += KB)
      dst[w] = src[w];
  }
  __syncthreads();
  for (int t = threadIdx.x; t < a.nupd * (PK_KRY_MAXTERMS + 1); t += KB) {
    const int u = t / (PK_KRY_MAXTERMS + 1), k = t % (PK_KRY_MAXTERMS + 1);
    double v = 0.0;
    if (k == 0)
      v = pk_coef_value(a.u[u].cy, S);
    else if (k - 1 < a.u[u].nterms)
      v = pk_coef_value(a.u[u].c[k - 1], S);
    cv[u][k] = v;
  }
  __syncthreads();
  const int nupd = a.nupd, np = a.npairs;
  double acc[PK_KRY_MAXPAIRS];
#pragma unroll
  for (int j = 0; j < PK_KRY_MAXPAIRS; j++)
    acc[j] = 0.0;
  const int64_t stride = (int64_t)gridDim.x * KB;
  for (int64_t i = (int64_t)blockIdx.x * KB + threadIdx.x; i < n; i += stride) {
    for (int u = 0; u < nupd; u++) {
      double *y = a.u[u].y;
      const double cy = cv[u][0];
      double t = 0.0;
      bool live = false;
      if (cy != 0.0) {
        t = cy * y[i];
        live = true;
      }
      const int nt = a.u[u].nterms;
      for (int k = 0; k < nt; k++) {
        const double c = cv[u][k + 1];
        if (c == 0.0)
          continue;
        const double p = c * a.u[u].x[k][i];
        t = live ? t + p : p;
        live = true;
      }
      y[i] = t;
    }
#pragma unroll
    for (int j = 0; j < PK_KRY_MAXPAIRS; j++)
      if (j < np)
        acc[j] += a.pa[j][i] * a.pb[j][i];
  }
  if (!part)
    return;
#pragma unroll
  for (int j = 0; j < PK_KRY_MAXPAIRS; j++) {
    if (j < np) { /* np is uniform over the block: every thread takes the same branches */
      const double s = block_sum(acc[j], sh);
      if (threadIdx.x == 0)
        part[(int64_t)blockIdx.x * np + j] = s;
    }
  }
}

/* ---- multi-dot ------------------------------------------------------------------------------------ */

/** One side of a multi-dot: vector i < k is base + i * ld, except the last one when `last` is set. */
struct Side {
  const double *base;
  const double *last;
  int64_t ld;
  int32_t k;
};
__device__ __forceinline__ const double *side_ptr(const Side &s, int i) {
  return (s.last && i == s.k - 1) ? s.last : s.base + (int64_t)i * s.ld;
}

/**
 * Tile (ta, tb) = (blockIdx.y % nta, blockIdx.y / nta) of the dot products (A_i, B_j), i < A.k, j < B.k:
 * partials of value p = i + A.k * j at part[blockIdx.x * nvals + p] (DD: 2p, 2p + 1), nvals = A.k * B.k
 * (DD: twice that).
 */
template <int TA, int TB, bool DD>
__global__ void __launch_bounds__(KB) k_mdot(int64_t n, Side A, Side B, int nta, double *part) {
  __shared__ double sh[2 * (KB / 32)];
  const int ta = blockIdx.y % nta, tb = blockIdx.y / nta;
  const int i0 = ta * TA, j0 = tb * TB;
  const double *pa[TA], *pb[TB];
#pragma unroll
  for (int q = 0; q < TA; q++)
    pa[q] = i0 + q < A.k ? side_ptr(A, i0 + q) : nullptr;
#pragma unroll
  for (int q = 0; q < TB; q++)
    pb[q] = j0 + q < B.k ? side_ptr(B, j0 + q) : nullptr;
  double h[TA][TB], l[TA][TB];
#pragma unroll
  for (int p = 0; p < TA; p++)
#pragma unroll
    for (int q = 0; q < TB; q++)
      h[p][q] = 0.0, l[p][q] = 0.0;
  const int64_t stride = (int64_t)gridDim.x * KB;
  for (int64_t i = (int64_t)blockIdx.x * KB + threadIdx.x; i < n; i += stride) {
    double va[TA], vb[TB];
#pragma unroll
    for (int p = 0; p < TA; p++)
      va[p] = pa[p] ? pa[p][i] : 0.0;
#pragma unroll
    for (int q = 0; q < TB; q++)
      vb[q] = pb[q] ? pb[q][i] : 0.0;
#pragma unroll
    for (int p = 0; p < TA; p++)
#pragma unroll
      for (int q = 0; q < TB; q++) {
        if (DD)
          dd_fma(h[p][q], l[p][q], va[p], vb[q]);
        else
          h[p][q] += va[p] * vb[q];
      }
  }
  const int ka = A.k, nv = A.k * B.k * (DD ? 2 : 1);
#pragma unroll
  for (int p = 0; p < TA; p++)
#pragma unroll
    for (int q = 0; q < TB; q++) {
      if (!pa[p] || !pb[q])
        continue; /* uniform over the block */
      const int64_t v = (int64_t)(i0 + p) + (int64_t)ka * (j0 + q);
      if (DD) {
        double hh = h[p][q], ll = l[p][q];
        block_sum_dd(hh, ll, sh);
        if (threadIdx.x == 0)
          part[(int64_t)blockIdx.x * nv + 2 * v] = hh, part[(int64_t)blockIdx.x * nv + 2 * v + 1] = ll;
      } else {
        const double s = block_sum(h[p][q], sh);
        if (threadIdx.x == 0)
          part[(int64_t)blockIdx.x * nv + v] = s;
      }
    }
}

/* ---- basis_axpy, basis_gemm ------------------------------------------------------------------------- */

/**
 * Shared-memory doubles for the coefficients of k_basis_axpy: k + 1, rounded up to even, plus two. The
 * compiler loads the coefficient loop's shared values in 16-byte pairs and may read one pair past the last
 * coefficient (compute-sanitizer memcheck saw it); the padding is zeroed.
 */
__host__ __device__ inline int basis_axpy_npad(int k) { return ((k + 2) & ~1) + 2; }

/** y = cy*y + sum_{j < k} s S[c0 + j] V_j (the update's arithmetic: zero coefficients skip their term). */
__global__ void __launch_bounds__(KB) k_basis_axpy(int64_t n, double *y, pk_coef cy, const double *V,
                                                   int64_t ld, int k, const double *S, int c0, int neg) {
  extern __shared__ double cf[]; /* k + 1 coefficients, zero-padded to basis_axpy_npad(k) */
  const int npad = basis_axpy_npad(k);
  for (int j = threadIdx.x; j < npad; j += KB) {
    double v = 0.0;
    if (j == 0)
      v = pk_coef_value(cy, S);
    else if (j <= k)
      v = neg ? -S[c0 + j - 1] : S[c0 + j - 1];
    cf[j] = v;
  }
  __syncthreads();
  const int64_t stride = (int64_t)gridDim.x * KB;
  for (int64_t i = (int64_t)blockIdx.x * KB + threadIdx.x; i < n; i += stride) {
    double t = 0.0;
    bool live = false;
    if (cf[0] != 0.0) {
      t = cf[0] * y[i];
      live = true;
    }
    for (int j = 0; j < k; j++) {
      const double c = cf[j + 1];
      if (c == 0.0)
        continue;
      const double p = c * V[(int64_t)j * ld + i];
      t = live ? t + p : p;
      live = true;
    }
    y[i] = t;
  }
}

/**
 * V_{out_j} = sum_{i < iend} V_{in_i} T[i + ldt j] for j < kout, with the CPU engine's arithmetic: t = V_0
 * T_0j, then t = t + V_i T_ij for i ascending (every term, zeros included); iend = kin, or min(j + 1, kin)
 * in place (out == in: T upper triangular, so column j reads rows i <= j only). Outputs in chunks of
 * KGEMM_J, all of a chunk computed before any is written, chunks in descending order: in place, the rows
 * a chunk reads are overwritten only by itself (after it is computed) or by lower chunks, which come later.
 */
__global__ void __launch_bounds__(KB) k_basis_gemm(int64_t n, const double *Vin, double *Vout, int64_t ld,
                                                   int kin, int kout, const double *T, int ldt, int inplace) {
  const int64_t stride = (int64_t)gridDim.x * KB;
  const int nch = (kout + KGEMM_J - 1) / KGEMM_J;
  for (int64_t i = (int64_t)blockIdx.x * KB + threadIdx.x; i < n; i += stride) {
    for (int ch = nch - 1; ch >= 0; ch--) {
      double acc[KGEMM_J];
#pragma unroll
      for (int q = 0; q < KGEMM_J; q++)
        acc[q] = 0.0;
      const int j0 = ch * KGEMM_J;
      int rend = kin;
      if (inplace && j0 + KGEMM_J < rend)
        rend = j0 + KGEMM_J; /* rows <= the chunk's last column */
      for (int r = 0; r < rend; r++) {
        const double v = Vin[(int64_t)r * ld + i];
#pragma unroll
        for (int q = 0; q < KGEMM_J; q++) {
          const int j = j0 + q;
          if (j >= kout || (inplace && r > j))
            continue;
          const double p = v * __ldg(T + r + (int64_t)ldt * j);
          acc[q] = r == 0 ? p : acc[q] + p;
        }
      }
#pragma unroll
      for (int q = 0; q < KGEMM_J; q++)
        if (j0 + q < kout)
          Vout[(int64_t)(j0 + q) * ld + i] = acc[q];
    }
  }
}

/**
 * Fused Gram-Schmidt pass: y = cy*y + sum_{j < k} s S[c0 + j] V_j (k_basis_axpy's arithmetic), then the
 * partial dot products (V_j, y) for j < k and (y, y) with with_norm, of the new y, in the same pass: every
 * basis vector is read once (the separate kernels read it twice). KM >= k: the basis values of an element
 * are held in registers. Partials at part[block * (k + with_norm) + j].
 */
template <int KM>
__global__ void __launch_bounds__(KB) k_axpy_dots(int64_t n, double *y, pk_coef cy, const double *V, int64_t ld,
                                                  int k, const double *S, int c0, int neg, int with_norm,
                                                  double *part) {
  __shared__ double cf[KM + 2];
  __shared__ double sh[KB / 32];
  for (int j = threadIdx.x; j < KM + 2; j += KB) {
    double v = 0.0;
    if (j == 0)
      v = pk_coef_value(cy, S);
    else if (j <= k)
      v = neg ? -S[c0 + j - 1] : S[c0 + j - 1];
    cf[j] = v;
  }
  __syncthreads();
  double acc[KM];
#pragma unroll
  for (int j = 0; j < KM; j++)
    acc[j] = 0.0;
  double nn = 0.0;
  const int64_t stride = (int64_t)gridDim.x * KB;
  for (int64_t i = (int64_t)blockIdx.x * KB + threadIdx.x; i < n; i += stride) {
    double v[KM];
#pragma unroll
    for (int j = 0; j < KM; j++)
      v[j] = j < k ? V[(int64_t)j * ld + i] : 0.0;
    double t = 0.0;
    bool live = false;
    if (cf[0] != 0.0) {
      t = cf[0] * y[i];
      live = true;
    }
#pragma unroll
    for (int j = 0; j < KM; j++) {
      const double c = cf[j + 1]; /* 0 beyond k */
      if (j >= k || c == 0.0)
        continue;
      const double p = c * v[j];
      t = live ? t + p : p;
      live = true;
    }
    y[i] = t;
#pragma unroll
    for (int j = 0; j < KM; j++)
      acc[j] += v[j] * t;
    nn += t * t;
  }
  const int nv = k + with_norm;
#pragma unroll
  for (int j = 0; j < KM; j++) {
    if (j < k) { /* uniform over the block */
      const double s = block_sum(acc[j], sh);
      if (threadIdx.x == 0)
        part[(int64_t)blockIdx.x * nv + j] = s;
    }
  }
  if (with_norm) {
    const double s = block_sum(nn, sh);
    if (threadIdx.x == 0)
      part[(int64_t)blockIdx.x * nv + k] = s;
  }
}

/* ---- small kernels ---------------------------------------------------------------------------------- */

/** The scalar step with argument arg (+ *base in a graph of a block); an unknown id is remembered in *bad
 *  (read back by get / sync / unbind). */
__global__ void k_scalar(int id, double *S, int arg, const int *base, unsigned long long *bad) {
  if (base)
    arg += *base;
  if (pk_kry_scalar_step(id, S, arg) < 0)
    *bad = (unsigned long long)(id + 1);
}

__global__ void k_setbase(int *base, int v) { *base = v; }

constexpr int KSET_MAX = 64;
struct SetArgs {
  double v[KSET_MAX];
};
__global__ void k_set(double *S, int count, const SetArgs a) {
  if ((int)threadIdx.x < count)
    S[threadIdx.x] = a.v[threadIdx.x];
}

/** *slot = min index i with v[i] not finite (integer atomics: the result is the same in any order). */
__global__ void __launch_bounds__(KB)
    k_first_nonfinite(int64_t n, const double *v, unsigned long long *slot) {
  const int64_t stride = (int64_t)gridDim.x * KB;
  for (int64_t i = (int64_t)blockIdx.x * KB + threadIdx.x; i < n; i += stride)
    if (!isfinite(v[i])) {
      atomicMin(slot, (unsigned long long)i);
      return; /* later indices of this thread are larger */
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

/* ---- helpers ---------------------------------------------------------------------------------------- */

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
int sum_into(pk_kry *E, int64_t nb, int nvals, bool dd, int32_t out, bool async = false) {
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
 * Every global sum the engine produces (the pairs of an update, block_dots, basis_dots, axpy_dots and the
 * norm of a residual) is recomputed from its vectors after the data-parallel kernel, which then skips its
 * own partial sums: the rounded products (block_dots with dd: the exact products, p and fma(x, y, -p)) are
 * added exactly into the accumulator of pk_xacc.h by pk_cuda_xacc_dots_ex (groups of PKC_XACC_MAXV dots),
 * the ranks' accumulators are added as integers (NCCL: ncclSum on ncclInt64, pk_cuda_dist_allreduce_i64;
 * host-staged: MPI_SUM on MPI_INT64_T through pinned memory), and pk_cuda_xacc_round_ex rounds them into
 * S[out ..] (dd: the (hi, lo) pairs). These are the CPU engine's reproducible sums (kry_cpu.c, reduce.c)
 * of the same products, bitwise, for any number of ranks. A sum asked for with PK_KRY_ASYNC is finished at
 * once (pk_kry_wait has nothing left to do); graphs of blocks on one GPU only. The cost: one more pass over
 * the vectors of every sum (and a host synchronisation per sum on the host-staged path). */

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

/** Host twin of side_ptr. */
const double *side_ptr_h(const Side &s, int i) {
  return (s.last && i == s.k - 1) ? s.last : s.base + (int64_t)i * s.ld;
}

/** All dot products (A_i, B_j) into S[out + i + A.k * j] (DD: pairs). */
int mdot(pk_kry *E, const Side &A, const Side &B, bool dd, int32_t out, bool async) {
  KryDev *D = dev_of(E);
  const int64_t n = E->n;
  if (A.k <= 0 || B.k <= 0)
    return PKRYLOV_SUCCESS;
  if (D->repro) { /* the exact sums only (the CPU engine's pairs: (A_i, B_j) at i + A.k * j) */
    const int nv = A.k * B.k;
    D->xa.resize((size_t)nv), D->xb.resize((size_t)nv);
    for (int j = 0; j < B.k; j++)
      for (int i = 0; i < A.k; i++) {
        const size_t v = (size_t)i + (size_t)A.k * j;
        D->xa[v] = side_ptr_h(A, i), D->xb[v] = side_ptr_h(B, j);
      }
    return xsums(E, nv, D->xa.data(), D->xb.data(), dd, out);
  }
  const int64_t nb = grid_dot(n);
  const int nvals = A.k * B.k;
  PK_CALL(ensure_part(E, (size_t)nb * (size_t)nvals * (dd ? 2 : 1)));
  cudaStream_t s = D->st;
  if (dd) {
    constexpr int TA = 2, TB = 2;
    const int nta = (A.k + TA - 1) / TA, ntb = (B.k + TB - 1) / TB;
    k_mdot<TA, TB, true><<<dim3((unsigned)nb, (unsigned)(nta * ntb)), KB, 0, s>>>(n, A, B, nta, D->part);
  } else if (B.k == 1) {
    constexpr int TA = 8, TB = 1;
    const int nta = (A.k + TA - 1) / TA;
    k_mdot<TA, TB, false><<<dim3((unsigned)nb, (unsigned)nta), KB, 0, s>>>(n, A, B, nta, D->part);
  } else {
    constexpr int TA = 4, TB = 4;
    const int nta = (A.k + TA - 1) / TA, ntb = (B.k + TB - 1) / TB;
    k_mdot<TA, TB, false><<<dim3((unsigned)nb, (unsigned)(nta * ntb)), KB, 0, s>>>(n, A, B, nta, D->part);
  }
  PK_CUDA_CHECK(E->ctx, kSolve, cudaGetLastError(), "dot products");
  return sum_into(E, nb, nvals, dd, out, async);
}

/** Wait for the stream, then report a scalar step id that the device did not know (a driver bug). */
int sync_checked(pk_kry *E, const char *what) {
  KryDev *D = dev_of(E);
  PK_CUDA_CHECK(
      E->ctx, kSolve,
      cudaMemcpyAsync(D->haux + 1, D->aux + 1, sizeof(unsigned long long), cudaMemcpyDeviceToHost, D->st),
      what);
  PK_CUDA_CHECK(E->ctx, kSolve, cudaStreamSynchronize(D->st), what);
  if (D->haux[1])
    return pk_error(E->ctx, PKRYLOV_ERR_INTERNAL, "pk_kry_scalar", "unknown scalar step id %lld",
                    (long long)D->haux[1] - 1);
  return PKRYLOV_SUCCESS;
}

/* ---- operations: records, direct execution, blocks ------------------------------------------------------
 * Every operation the drivers queue becomes a record (int32 words: type, length, arguments). Outside a block
 * a record runs at once (exec_op); inside a block it is appended to D->log, and pk_kry_block_end() runs the
 * log: the first time a log is seen directly, the second time it is captured into a CUDA graph (stream
 * capture of the same launches) and from then on the graph is replayed. Scalar-step arguments are stored
 * relative to the block's first one (D->base); a graph's scalar steps add the device value *argbase, which
 * k_setbase sets before each replay, so blocks that differ only by their iteration numbers share a graph.
 * The graphs hold device pointers of this engine's buffers (vectors, S, partial sums): they are dropped when
 * the partial-sum buffer is reallocated and when the engine is destroyed. */

enum {
  OP_MATVEC = 1,
  OP_PRECOND,
  OP_RESIDUAL,
  OP_UPDATE,
  OP_BLOCK_DOTS,
  OP_BASIS_DOTS,
  OP_AXPY,
  OP_GEMM,
  OP_SCALAR,
  OP_SET,
  OP_COPY,
  OP_AXPY_DOTS,
  OP_WAIT,
  OP_COUNT
};
const char *const op_names[OP_COUNT] = {"",           "matvec",    "precond",    "residual",
                                        "update",     "block_dots", "basis_dots", "basis_axpy",
                                        "basis_gemm", "scalar",     "set",        "copy",
                                        "axpy_dots",  "wait"};
constexpr size_t KGRAPH_CACHE = 48; /* graphs kept per engine */

/** y = A x by the caller's routine (device pointers): the user operator's, or the halo-exchange stencil's
 *  exchange between the fill and the stencil kernels (pk_cuda_halo_apply, the CG path's product). */
int uop_apply(pk_kry *E, const double *x, double *y) {
  pkrylov_operator A = E->s->A;
  if (A->halo.exchange)
    return pk_cuda_halo_apply(A, x, y, "pkrylov_solver_solve");
  return pk_cuda_user_call(E->ctx, A->user.apply, A->user.data, E->n, x, y, "operator");
}

int do_matvec(pk_kry *E, pk_vid x, pk_vid y) {
  KryDev *D = dev_of(E);
  if (D->uop)
    return uop_apply(E, vp(E, x), vp(E, y));
  if (D->dop) { /* distributed: the columns off the tile edges while the halo travels, then the edges */
    PK_CALL(pk_cuda_dist_halo_begin(D->dop, vp(E, x), D->nccl));
    PK_CUDA_CHECK(E->ctx, kSolve, pk_cuda_op_apply(D->st, &D->op_in, vp(E, x), vp(E, y)), "operator product");
    PK_CALL(pk_cuda_dist_halo_end(D->dop, D->nccl));
    PK_CUDA_CHECK(E->ctx, kSolve, pk_cuda_op_apply(D->st, &D->op_edge, vp(E, x), vp(E, y)),
                  "operator product (tile edges)");
    return PKRYLOV_SUCCESS;
  }
  PK_CUDA_CHECK(E->ctx, kSolve, pk_cuda_op_apply(D->st, &D->op, vp(E, x), vp(E, y)), "operator product");
  return PKRYLOV_SUCCESS;
}

int do_precond(pk_kry *E, pk_vid x, pk_vid y) {
  KryDev *D = dev_of(E);
  double *a = vp(E, x), *b = vp(E, y);
  if (D->upc)
    return pk_cuda_user_call(E->ctx, E->s->M->user.apply, E->s->M->user.data, E->n, a, b, "preconditioner");
  if (D->pc.type == PKRYLOV_PRECOND_NONE) {
    if (a != b)
      PK_CUDA_CHECK(E->ctx, kSolve,
                    cudaMemcpyAsync(b, a, sizeof(double) * (size_t)E->n, cudaMemcpyDeviceToDevice, D->st),
                    "copy");
    return PKRYLOV_SUCCESS;
  }
  if (D->dop && D->pc.type == PKRYLOV_PRECOND_AINV) /* it reads a's neighbours: their halo first */
    PK_CALL(pk_cuda_dist_halo(D->dop, a, D->nccl));
  PK_CUDA_CHECK(E->ctx, kSolve, pk_cuda_pc_apply(D->st, &D->pc, NULL, a, b), "preconditioner");
  return PKRYLOV_SUCCESS;
}

int do_residual(pk_kry *E, pk_vid x, pk_vid r, int32_t out) {
  KryDev *D = dev_of(E);
  int64_t nb = 0;
  if (D->uop) /* A x by the routine (or the halo exchange) into D->ax, which the residual launcher reads */
    PK_CALL(uop_apply(E, vp(E, x), D->ax));
  if (D->dop) /* distributed: the halo of x first (the residual's partial slots need one launch) */
    PK_CALL(pk_cuda_dist_halo(D->dop, vp(E, x), D->nccl));
  PK_CUDA_CHECK(E->ctx, kSolve, pk_cuda_residual(D->st, &D->op64, D->b, vp(E, x), vp(E, r), D->part, &nb),
                "residual");
  if (out >= 0 && D->repro) { /* (r, r) exact; the launcher's partials are ignored */
    const double *rp = vp(E, r);
    return xsums(E, 1, &rp, &rp, false, out);
  }
  if (out >= 0)
    return sum_into(E, nb, 1, false, out);
  return PKRYLOV_SUCCESS;
}

int do_update(pk_kry *E, int32_t nupd, const pk_kupd *u, int32_t npairs, const pk_kpair *pairs, int32_t out,
              bool async) {
  KryDev *D = dev_of(E);
  if (nupd <= 0 && npairs <= 0)
    return PKRYLOV_SUCCESS;
  UpdArgs a;
  memset(&a, 0, sizeof a);
  a.nupd = nupd;
  a.npairs = npairs;
  for (int i = 0; i < nupd; i++) {
    a.u[i].y = vp(E, u[i].y);
    a.u[i].cy = u[i].cy;
    a.u[i].nterms = u[i].nterms;
    for (int k = 0; k < u[i].nterms; k++) {
      a.u[i].x[k] = vp(E, u[i].x[k]);
      a.u[i].c[k] = u[i].c[k];
    }
  }
  for (int j = 0; j < npairs; j++) {
    a.pa[j] = vp(E, pairs[j].a);
    a.pb[j] = vp(E, pairs[j].b);
  }
  const int64_t nb = grid_1d(E->n, KMAX_UPD_BLOCKS);
  if (D->repro && npairs > 0) { /* the updates only, then the exact sums of the updated vectors */
    a.npairs = 0;
    k_update<<<(unsigned)nb, KB, 0, D->st>>>(E->n, a, D->S, nullptr);
    PK_CUDA_CHECK(E->ctx, kSolve, cudaGetLastError(), "vector update");
    return xsums(E, npairs, a.pa, a.pb, false, out);
  }
  k_update<<<(unsigned)nb, KB, 0, D->st>>>(E->n, a, D->S, npairs > 0 ? D->part : nullptr);
  PK_CUDA_CHECK(E->ctx, kSolve, cudaGetLastError(), "vector update");
  if (npairs > 0)
    return sum_into(E, nb, npairs, false, out, async);
  return PKRYLOV_SUCCESS;
}

int do_block_dots(pk_kry *E, int32_t a0, int32_t ka, int32_t b0, int32_t kb, int32_t dd, int32_t out,
                  bool async) {
  Side A, B;
  A.base = bp(E, a0), A.last = nullptr, A.ld = E->ld, A.k = ka;
  B.base = bp(E, b0), B.last = nullptr, B.ld = E->ld, B.k = kb;
  return mdot(E, A, B, dd != 0, out, async);
}

int do_basis_dots(pk_kry *E, pk_vid x, int32_t b0, int32_t k, int32_t with_norm, int32_t out, bool async) {
  Side A, B;
  const double *xp = vp(E, x);
  A.base = k > 0 ? bp(E, b0) : xp, A.ld = E->ld, A.k = k + (with_norm ? 1 : 0);
  A.last = with_norm ? xp : nullptr;
  B.base = xp, B.last = nullptr, B.ld = 0, B.k = 1;
  return mdot(E, A, B, false, out, async);
}

int do_basis_axpy(pk_kry *E, pk_vid y, pk_coef cy, int32_t b0, int32_t k, int32_t c0, int32_t neg) {
  KryDev *D = dev_of(E);
  const size_t smem = sizeof(double) * (size_t)basis_axpy_npad(k);
  k_basis_axpy<<<(unsigned)grid_1d(E->n, KMAX_UPD_BLOCKS), KB, smem, D->st>>>(
      E->n, vp(E, y), cy, bp(E, b0 < E->nbasis ? b0 : 0), E->ld, k, D->S, c0, neg);
  PK_CUDA_CHECK(E->ctx, kSolve, cudaGetLastError(), "basis axpy");
  return PKRYLOV_SUCCESS;
}

int do_basis_gemm(pk_kry *E, int32_t a0, int32_t kin, int32_t t0, int32_t ldt, int32_t b1, int32_t kout) {
  KryDev *D = dev_of(E);
  if (kout <= 0)
    return PKRYLOV_SUCCESS;
  if (kin <= 0)
    return PKRYLOV_SUCCESS; /* nothing defined to write (the CPU engine reads row 0 regardless) */
  k_basis_gemm<<<(unsigned)grid_1d(E->n, KMAX_UPD_BLOCKS), KB, 0, D->st>>>(
      E->n, bp(E, a0), bp(E, b1), E->ld, kin, kout, D->S + t0, ldt, b1 == a0);
  PK_CUDA_CHECK(E->ctx, kSolve, cudaGetLastError(), "basis gemm");
  return PKRYLOV_SUCCESS;
}

int do_axpy_dots(pk_kry *E, pk_vid y, pk_coef cy, int32_t b0, int32_t k, int32_t c0, int32_t neg,
                 int32_t with_norm, int32_t out, bool async) {
  KryDev *D = dev_of(E);
  if (!D->fuse_on || k < 1 || k > 32 || D->repro) { /* the two passes (reproducible: exact sums) */
    PK_CALL(do_basis_axpy(E, y, cy, b0, k, c0, neg));
    if (k + with_norm == 0)
      return PKRYLOV_SUCCESS;
    return do_basis_dots(E, y, b0, k, with_norm, out, async);
  }
  const int64_t nb = grid_dot(E->n);
  const int nv = k + with_norm;
  PK_CALL(ensure_part(E, (size_t)nb * (size_t)nv));
  double *yp = vp(E, y);
  const double *V = bp(E, b0);
  if (k <= 8)
    k_axpy_dots<8><<<(unsigned)nb, KB, 0, D->st>>>(E->n, yp, cy, V, E->ld, k, D->S, c0, neg, with_norm, D->part);
  else if (k <= 16)
    k_axpy_dots<16><<<(unsigned)nb, KB, 0, D->st>>>(E->n, yp, cy, V, E->ld, k, D->S, c0, neg, with_norm,
                                                     D->part);
  else
    k_axpy_dots<32><<<(unsigned)nb, KB, 0, D->st>>>(E->n, yp, cy, V, E->ld, k, D->S, c0, neg, with_norm,
                                                     D->part);
  PK_CUDA_CHECK(E->ctx, kSolve, cudaGetLastError(), "basis axpy and dots");
  return sum_into(E, nb, nv, false, out, async);
}

int do_set(pk_kry *E, int32_t first, int32_t count, const double *host) {
  KryDev *D = dev_of(E);
  for (int32_t o = 0; o < count; o += KSET_MAX) { /* values by value: the host array is free on return */
    const int c = count - o < KSET_MAX ? count - o : KSET_MAX;
    SetArgs a;
    memcpy(a.v, host + o, sizeof(double) * (size_t)c);
    k_set<<<1, KSET_MAX, 0, D->st>>>(D->S + first + o, c, a);
    PK_CUDA_CHECK(E->ctx, kSolve, cudaGetLastError(), "writing the scalars");
  }
  return PKRYLOV_SUCCESS;
}

pk_coef rd_coef(const int32_t *&p) {
  pk_coef c;
  c.idx = *p++;
  c.neg = *p++;
  return c;
}

/**
 * Run one record. graph: inside a capture (scalar steps read the block's base from the device); else the
 * scalar-step arguments are r's plus base.
 */
int exec_op(pk_kry *E, const int32_t *r, bool graph, int32_t base) {
  KryDev *D = dev_of(E);
  const int type = r[0];
  const int32_t *p = r + 2;
  const bool prof = D->prof && !graph;
  if (prof)
    PK_CUDA_CHECK(E->ctx, kSolve, cudaEventRecord(D->ev[0], D->st), "profile");
  int rc = PKRYLOV_SUCCESS;
  switch (type) {
  case OP_MATVEC:
    rc = do_matvec(E, p[0], p[1]);
    break;
  case OP_PRECOND:
    rc = do_precond(E, p[0], p[1]);
    break;
  case OP_RESIDUAL:
    rc = do_residual(E, p[0], p[1], p[2]);
    break;
  case OP_UPDATE: {
    pk_kupd u[PK_KRY_MAXUPD];
    pk_kpair pr[PK_KRY_MAXPAIRS];
    const int32_t nupd = *p++;
    for (int i = 0; i < nupd; i++) {
      memset(&u[i], 0, sizeof u[i]);
      u[i].y = *p++;
      u[i].cy = rd_coef(p);
      u[i].nterms = *p++;
      for (int t = 0; t < u[i].nterms; t++) {
        u[i].x[t] = *p++;
        u[i].c[t] = rd_coef(p);
      }
    }
    const int32_t np = *p++;
    for (int j = 0; j < np; j++) {
      pr[j].a = *p++;
      pr[j].b = *p++;
    }
    rc = do_update(E, nupd, u, np, pr, p[0], p[1] != 0);
    break;
  }
  case OP_BLOCK_DOTS:
    rc = do_block_dots(E, p[0], p[1], p[2], p[3], p[4], p[5], p[6] != 0);
    break;
  case OP_BASIS_DOTS:
    rc = do_basis_dots(E, p[0], p[1], p[2], p[3], p[4], p[5] != 0);
    break;
  case OP_AXPY: {
    pk_coef cy;
    cy.idx = p[1], cy.neg = p[2];
    rc = do_basis_axpy(E, p[0], cy, p[3], p[4], p[5], p[6]);
    break;
  }
  case OP_GEMM:
    rc = do_basis_gemm(E, p[0], p[1], p[2], p[3], p[4], p[5]);
    break;
  case OP_SCALAR:
    k_scalar<<<1, 1, 0, D->st>>>(p[0], D->S, graph ? p[1] : p[1] + base, graph ? D->argbase : nullptr,
                                 D->aux + 1);
    PK_CUDA_CHECK(E->ctx, kSolve, cudaGetLastError(), "scalar step");
    break;
  case OP_SET: {
    const int32_t count = p[1];
    double v[KSET_MAX];
    for (int32_t o = 0; o < count; o += KSET_MAX) {
      const int c = count - o < KSET_MAX ? count - o : KSET_MAX;
      memcpy(v, p + 2 + 2 * o, sizeof(double) * (size_t)c);
      rc = do_set(E, p[0] + o, c, v);
      if (rc)
        break;
    }
    break;
  }
  case OP_COPY: {
    double *a = vp(E, p[0]), *b = vp(E, p[1]);
    if (a != b)
      PK_CUDA_CHECK(E->ctx, kSolve,
                    cudaMemcpyAsync(b, a, sizeof(double) * (size_t)E->n, cudaMemcpyDeviceToDevice, D->st),
                    "copy");
    break;
  }
  case OP_AXPY_DOTS: {
    pk_coef cy;
    cy.idx = p[1], cy.neg = p[2];
    rc = do_axpy_dots(E, p[0], cy, p[3], p[4], p[5], p[6], p[7], p[8], p[9] != 0);
    break;
  }
  case OP_WAIT:
    rc = do_wait(E);
    break;
  default:
    return pk_error(E->ctx, PKRYLOV_ERR_INTERNAL, "pk_kry", "CUDA engine: unknown operation record %d", type);
  }
  if (prof && rc == PKRYLOV_SUCCESS) {
    float ms = 0.0f;
    PK_CUDA_CHECK(E->ctx, kSolve, cudaEventRecord(D->ev[1], D->st), "profile");
    PK_CUDA_CHECK(E->ctx, kSolve, cudaEventSynchronize(D->ev[1]), "profile");
    PK_CUDA_CHECK(E->ctx, kSolve, cudaEventElapsedTime(&ms, D->ev[0], D->ev[1]), "profile");
    D->prof_ms[type] += ms;
    D->prof_n[type]++;
  }
  return rc;
}

/** Run the records of log directly (graph false) or into a capture (graph true). */
int play(pk_kry *E, const std::vector<int32_t> &log, bool graph, int32_t base) {
  for (size_t o = 0; o < log.size(); o += (size_t)log[o + 1])
    PK_CALL(exec_op(E, log.data() + o, graph, base));
  return PKRYLOV_SUCCESS;
}

/** A record: run it now, or append it to the block being recorded. */
int submit(pk_kry *E, std::vector<int32_t> &r) {
  KryDev *D = dev_of(E);
  r[1] = (int32_t)r.size();
  if (!D->rec_on)
    return exec_op(E, r.data(), false, 0);
  if (r[0] == OP_SCALAR) { /* arguments relative to the block's first one */
    if (!D->have_base)
      D->base = r[3], D->have_base = 1;
    r[3] -= D->base;
  }
  D->log.insert(D->log.end(), r.begin(), r.end());
  return PKRYLOV_SUCCESS;
}

/** Run what the current block recorded so far, directly, and stop recording it (a host read comes). */
int flush(pk_kry *E) {
  KryDev *D = dev_of(E);
  if (!D->rec_on)
    return PKRYLOV_SUCCESS;
  D->rec_on = 0;
  int rc = play(E, D->log, false, D->base);
  D->log.clear();
  return rc;
}

/** Capture log into a graph; NULL when the capture or the instantiation failed (then nothing ran). */
cudaGraphExec_t capture(pk_kry *E, const std::vector<int32_t> &log) {
  KryDev *D = dev_of(E);
  cudaGraph_t g = NULL;
  cudaGraphExec_t x = NULL;
  if (cudaStreamBeginCapture(D->st, cudaStreamCaptureModeThreadLocal) != cudaSuccess) {
    cudaGetLastError();
    return NULL;
  }
  const int rc = play(E, log, true, 0);
  cudaError_t e = cudaStreamEndCapture(D->st, &g);
  if (rc == PKRYLOV_SUCCESS && e == cudaSuccess && g)
    e = cudaGraphInstantiate(&x, g, 0);
  if (g)
    cudaGraphDestroy(g);
  if (rc != PKRYLOV_SUCCESS || e != cudaSuccess)
    x = NULL;
  cudaGetLastError();
  return x;
}

/* ---- the backend table ------------------------------------------------------------------------------ */

void kd_destroy(pk_kry *E);

int kd_create(pk_kry *E) {
  pkrylov_solver s = E->s;
  pkrylov_context ctx = E->ctx;
  const char *fn = "pkrylov_solver_solve";
  if (!s->A->dev)
    return pk_error(ctx, PKRYLOV_ERR_UNSUPPORTED, fn,
                    "the operator has no device form, which the CUDA BiCGStab/GMRES engine needs");
  if (s->M && s->M->type != PKRYLOV_PRECOND_USER && !s->M->dev)
    return pk_error(ctx, PKRYLOV_ERR_UNSUPPORTED, fn,
                    "the preconditioner has no device form, which the CUDA BiCGStab/GMRES engine needs");
  KryDev *D = new (std::nothrow) KryDev();
  if (!D)
    return pk_error(ctx, PKRYLOV_ERR_OUT_OF_MEMORY, fn, "cannot allocate the CUDA engine state");
  E->priv = D;
  D->st = (cudaStream_t)pk_cuda_context_stream(ctx);
  /* a halo-exchange stencil runs like a user operator: its exchange is a host call between the kernels */
  D->uop = s->A->type == PKRYLOV_OPERATOR_USER || s->A->halo.exchange != NULL;
  D->upc = s->M && s->M->type == PKRYLOV_PRECOND_USER;
  D->graph_on = s->opts.kry_graph; /* the solver's options kry.graph, kry.fuse, kry.profile */
  D->fuse_on = s->opts.kry_fuse;
  D->prof = s->opts.kry_profile;
  D->dist = pk_distributed(ctx);
  D->nranks = D->dist ? ctx->size : 1;
  D->dop = D->dist && (s->A->dist || s->A->grid) ? s->A : NULL; /* one rank: the single-GPU products */
  const int64_t n = E->n;
  E->ld = (n + 31) / 32 * 32;
  PK_CALL(pk_cuda_operator_view(s->A, 0, &D->op64));
  if (s->A->halo.exchange) { /* the launchers read A x from D->ax (set below), as for a user operator; the
                                mask kept; products in fp64 (pk_cuda_halo_apply), as on the CG path */
    pk_cuda_op u;
    memset(&u, 0, sizeof u);
    u.type = PKRYLOV_OPERATOR_USER;
    u.n = n;
    u.wet = D->op64.wet;
    D->op = D->op64 = u;
  } else {
    PK_CALL(pk_cuda_operator_view(s->A, s->mixed >= 2, &D->op));
  }
  if (s->M && !D->upc) {
    PK_CALL(pk_cuda_precond_view(s->M, s->mixed >= 1, &D->pc));
  } else { /* none, or a user routine (called by do_precond) */
    memset(&D->pc, 0, sizeof D->pc);
    D->pc.type = PKRYLOV_PRECOND_NONE;
    D->pc.n = D->pc.ncols = n;
    D->pc.nz = 1;
    D->pc.layout = PKRYLOV_LAYOUT_KSLOW;
  }
  const size_t nvec = (size_t)E->nwork + (size_t)E->nbasis + 2;
  const size_t vbytes = sizeof(double) * nvec * (size_t)E->ld;
  const int32_t ns = E->nscalars > 0 ? E->nscalars : 1;
  cudaError_t e = cudaMalloc((void **)&D->vec, vbytes);
  if (e == cudaSuccess)
    e = cudaMalloc((void **)&D->S, sizeof(double) * (size_t)ns);
  if (e == cudaSuccess)
    e = cudaMallocHost((void **)&D->hbuf, sizeof(double) * (size_t)ns);
  if (e == cudaSuccess)
    e = cudaMalloc((void **)&D->aux, sizeof(unsigned long long) * 2);
  if (e == cudaSuccess)
    e = cudaMallocHost((void **)&D->haux, sizeof(unsigned long long) * 2);
  if (e == cudaSuccess)
    e = cudaMalloc((void **)&D->argbase, sizeof(int));
  if (e == cudaSuccess && D->uop)
    e = cudaMalloc((void **)&D->ax, sizeof(double) * (size_t)E->ld);
  if (e == cudaSuccess)
    e = cudaEventCreate(&D->ev[0]);
  if (e == cudaSuccess)
    e = cudaEventCreate(&D->ev[1]);
  if (e == cudaSuccess)
    e = cudaMemsetAsync(D->vec, 0, vbytes, D->st);
  if (e == cudaSuccess)
    e = cudaMemsetAsync(D->S, 0, sizeof(double) * (size_t)ns, D->st);
  if (e == cudaSuccess)
    e = cudaMemsetAsync(D->aux, 0, sizeof(unsigned long long) * 2, D->st);
  if (e == cudaSuccess) { /* the shared memory of basis_axpy for the largest k (set once, outside captures) */
    const size_t smem = sizeof(double) * (size_t)basis_axpy_npad(E->nbasis);
    if (smem > 48 * 1024)
      e = cudaFuncSetAttribute(k_basis_axpy, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem);
  }
  if (e != cudaSuccess) {
    char what[96];
    snprintf(what, sizeof what, "allocating the CUDA engine (%zu vectors of %lld values)", nvec,
             (long long)n);
    return pk_cuda_error(ctx, fn, (int)e, what, NULL);
  }
  if (D->uop)
    D->op.pre = D->op64.pre = D->ax;
  D->op_in = D->op_edge = D->op;
  D->op_in.cols = 1;
  D->op_edge.cols = 2;
  if (D->dist) { /* the largest sums the drivers ask for at once; more are made room for when asked */
    size_t g = (size_t)(E->nbasis + 2 > PK_KRY_MAXPAIRS ? E->nbasis + 2 : PK_KRY_MAXPAIRS);
    PK_CALL(ensure_gsum(E, 2 * g));
  }
  D->b = D->vec + (nvec - 2) * (size_t)E->ld;
  D->x = D->vec + (nvec - 1) * (size_t)E->ld;
  const int64_t need = pk_cuda_partials_needed(&D->op64, s->M && !D->upc ? &D->pc : NULL);
  size_t cap = (size_t)(need > KMAX_UPD_BLOCKS ? need : KMAX_UPD_BLOCKS) * PK_KRY_MAXPAIRS;
  const size_t bd = (size_t)KMAX_DOT_BLOCKS * ((size_t)E->nbasis + 2);
  if (bd > cap)
    cap = bd;
  return ensure_part(E, cap);
}

void kd_destroy(pk_kry *E) {
  KryDev *D = dev_of(E);
  if (!D)
    return;
  cudaStreamSynchronize(D->st); /* queued work may still use the buffers */
  drop_graphs(E);
  if (D->prof) {
    double tot = 0.0;
    for (int t = 1; t < OP_COUNT; t++)
      tot += D->prof_ms[t];
    fprintf(stderr, "pk_kry CUDA profile (n = %lld, %d basis vectors): %.3f ms in operations\n",
            (long long)E->n, E->nbasis, tot);
    for (int t = 1; t < OP_COUNT; t++)
      if (D->prof_n[t])
        fprintf(stderr, "  %-11s %8lld calls %10.3f ms %8.2f us/call %5.1f%%\n", op_names[t], D->prof_n[t],
                D->prof_ms[t], 1e3 * D->prof_ms[t] / (double)D->prof_n[t],
                tot > 0 ? 100.0 * D->prof_ms[t] / tot : 0.0);
  }
  cudaFree(D->vec);
  cudaFree(D->S);
  if (D->part)
    cudaFree(D->part);
  cudaFree(D->aux);
  cudaFree(D->argbase);
  cudaFree(D->ax);
  if (D->ev[0])
    cudaEventDestroy(D->ev[0]);
  if (D->ev[1])
    cudaEventDestroy(D->ev[1]);
  cudaFreeHost(D->hbuf);
  cudaFreeHost(D->haux);
  for (int k = 0; k < 2; k++) {
    GSlot &g = D->gs[k];
    cudaFree(g.dsum), cudaFree(g.gath), cudaFreeHost(g.hsum), cudaFreeHost(g.hgath);
    if (g.ev)
      cudaEventDestroy(g.ev);
  }
  cudaFree(D->xblk), cudaFree(D->xacc), cudaFreeHost(D->hxacc);
  cudaGetLastError();
  delete D;
  E->priv = NULL;
}

int kd_bind(pk_kry *E, int32_t x_zero) {
  KryDev *D = dev_of(E);
  pkrylov_context ctx = E->ctx;
  const char *fn = "pkrylov_solver_solve";
  PK_CALL(flush(E));
  PK_CALL(pk_cuda_check_pointer(ctx, fn, E->mem, E->b_user, "b"));
  PK_CALL(pk_cuda_check_pointer(ctx, fn, E->mem, E->x_user, "x"));
  D->pend_on = D->q_pend = 0;
  const int repro = ctx->reproducible != 0;
  if (repro != D->repro)
    drop_graphs(E); /* they hold the other mode's kernels */
  D->repro = repro;
  if (repro) /* the largest sums the drivers ask for at once; more are made room for when asked */
    PK_CALL(ensure_xacc(E, (size_t)(E->nbasis + 2 > PK_KRY_MAXPAIRS ? E->nbasis + 2 : PK_KRY_MAXPAIRS)));
  if (D->dist && D->dop) { /* the path of this solve (the option dist.nccl is read per solve, collectively) */
    void *nc = NULL;
    PK_CALL(pk_mpi_nccl(ctx, &nc));
    if (nc != D->nccl)
      drop_graphs(E); /* they hold the other path's calls */
    D->nccl = nc;
    if (nc && D->nccl_warm != nc) { /* the collective's connections are set up outside any capture */
      PK_CALL(pk_cuda_dist_allgather(D->dop, nc, D->gs[0].dsum, D->gs[0].gath, 1, 1));
      D->nccl_warm = nc;
    }
  }
  const size_t bytes = sizeof(double) * (size_t)E->n;
  const size_t nvec = (size_t)E->nwork + (size_t)E->nbasis + 2;
  /* b and x always live in the engine's own (padded, aligned) vectors: the operator and preconditioner
     launchers are written for the library's buffers, and the caller's x stays as it came until the solve
     has finished (a device-to-device copy each way costs two vector passes per solve) */
  const cudaMemcpyKind kin = E->mem == PKRYLOV_MEM_DEVICE ? cudaMemcpyDeviceToDevice : cudaMemcpyHostToDevice;
  D->b = D->vec + (nvec - 2) * (size_t)E->ld;
  D->x = D->vec + (nvec - 1) * (size_t)E->ld;
  PK_CUDA_CHECK(E->ctx, kSolve, cudaMemcpyAsync(D->b, E->b_user, bytes, kin, D->st), "copying b");
  if (!x_zero)
    PK_CUDA_CHECK(E->ctx, kSolve, cudaMemcpyAsync(D->x, E->x_user, bytes, kin, D->st), "copying x");
  if (x_zero)
    PK_CUDA_CHECK(E->ctx, kSolve, cudaMemsetAsync(D->x, 0, bytes, D->st), "zeroing x");
  return PKRYLOV_SUCCESS;
}

int kd_unbind(pk_kry *E) {
  KryDev *D = dev_of(E);
  const int frc = flush(E);
  if (E->x_user && !E->discard_x && frc == PKRYLOV_SUCCESS)
    PK_CUDA_CHECK(
        E->ctx, kSolve,
        cudaMemcpyAsync(E->x_user, D->x, sizeof(double) * (size_t)E->n,
                        E->mem == PKRYLOV_MEM_DEVICE ? cudaMemcpyDeviceToDevice : cudaMemcpyDeviceToHost,
                        D->st),
        "copying x back");
  PK_CALL(frc);
  PK_CALL(sync_checked(E, "finishing the solve"));
  const size_t nvec = (size_t)E->nwork + (size_t)E->nbasis + 2;
  D->b = D->vec + (nvec - 2) * (size_t)E->ld; /* never leave the caller's device arrays behind */
  D->x = D->vec + (nvec - 1) * (size_t)E->ld;
  return PKRYLOV_SUCCESS;
}

int kd_copy(pk_kry *E, pk_vid src, pk_vid dst) {
  std::vector<int32_t> r = {OP_COPY, 0, src, dst};
  return submit(E, r);
}

int kd_first_nonfinite(pk_kry *E, pk_vid v, int64_t *index, double *value) {
  KryDev *D = dev_of(E);
  PK_CALL(flush(E));
  const double *p = vp(E, v);
  PK_CUDA_CHECK(E->ctx, kSolve, cudaMemsetAsync(D->aux, 0xff, sizeof(unsigned long long), D->st),
                "first non-finite");
  k_first_nonfinite<<<(unsigned)grid_1d(E->n, KMAX_UPD_BLOCKS), KB, 0, D->st>>>(E->n, p, D->aux);
  PK_CUDA_CHECK(E->ctx, kSolve, cudaGetLastError(), "first non-finite");
  PK_CUDA_CHECK(E->ctx, kSolve,
                cudaMemcpyAsync(D->haux, D->aux, sizeof(unsigned long long), cudaMemcpyDeviceToHost, D->st),
                "copy");
  PK_CUDA_CHECK(E->ctx, kSolve, cudaStreamSynchronize(D->st), "first non-finite");
  const unsigned long long i = D->haux[0];
  *index = -1;
  if (value)
    *value = 0.0;
  if (i != ~0ULL) {
    *index = (int64_t)i;
    double h = 0.0;
    PK_CUDA_CHECK(E->ctx, kSolve, cudaMemcpy(&h, p + i, sizeof(double), cudaMemcpyDeviceToHost), "copy");
    if (value)
      *value = h;
  }
  return PKRYLOV_SUCCESS;
}

int kd_matvec(pk_kry *E, pk_vid x, pk_vid y) {
  std::vector<int32_t> r = {OP_MATVEC, 0, x, y};
  return submit(E, r);
}

int kd_precond(pk_kry *E, pk_vid x, pk_vid y) {
  std::vector<int32_t> r = {OP_PRECOND, 0, x, y};
  return submit(E, r);
}

int kd_residual(pk_kry *E, pk_vid x, pk_vid r, int32_t out) {
  PK_CALL(ensure_gsum(E, 1));
  PK_CALL(ensure_xacc(E, 1));
  std::vector<int32_t> rec = {OP_RESIDUAL, 0, x, r, out};
  return submit(E, rec);
}

/** The async flag of a reduction record: 1 for PK_KRY_ASYNC on a distributed engine (else the sums are in S
 *  when the next operation runs, and the record is the single-GPU one). Marks the sum as started. */
int32_t async_of(pk_kry *E, int32_t flags, int nvals) {
  KryDev *D = dev_of(E);
  const int32_t a = D->dist && !D->repro && (flags & PK_KRY_ASYNC) && nvals > 0 ? 1 : 0;
  if (a)
    D->q_pend = 1;
  return a;
}

int kd_update(pk_kry *E, int32_t nupd, const pk_kupd *u, int32_t npairs, const pk_kpair *pairs, int32_t out,
              int32_t flags) {
  if (nupd <= 0 && npairs <= 0)
    return PKRYLOV_SUCCESS;
  PK_CALL(ensure_gsum(E, (size_t)npairs));
  PK_CALL(ensure_xacc(E, (size_t)npairs));
  std::vector<int32_t> r;
  r.reserve(8 + (size_t)nupd * (6 + 3 * PK_KRY_MAXTERMS) + 2 * (size_t)npairs);
  r.push_back(OP_UPDATE);
  r.push_back(0);
  r.push_back(nupd);
  for (int i = 0; i < nupd; i++) {
    r.push_back(u[i].y);
    r.push_back(u[i].cy.idx);
    r.push_back(u[i].cy.neg);
    r.push_back(u[i].nterms);
    for (int t = 0; t < u[i].nterms; t++) {
      r.push_back(u[i].x[t]);
      r.push_back(u[i].c[t].idx);
      r.push_back(u[i].c[t].neg);
    }
  }
  r.push_back(npairs);
  for (int j = 0; j < npairs; j++) {
    r.push_back(pairs[j].a);
    r.push_back(pairs[j].b);
  }
  r.push_back(out);
  r.push_back(async_of(E, flags, npairs));
  return submit(E, r);
}

int kd_block_dots(pk_kry *E, int32_t a0, int32_t ka, int32_t b0, int32_t kb, int32_t dd, int32_t out,
                  int32_t flags) {
  /* the partial sums' room now: a reallocation inside a capture would be part of the graph */
  PK_CALL(ensure_part(E, (size_t)grid_dot(E->n) * (size_t)ka * (size_t)kb * (dd ? 2 : 1)));
  PK_CALL(ensure_gsum(E, (size_t)ka * (size_t)kb * (dd ? 2 : 1)));
  PK_CALL(ensure_xacc(E, (size_t)ka * (size_t)kb));
  std::vector<int32_t> r = {OP_BLOCK_DOTS, 0, a0, ka, b0, kb, dd, out, async_of(E, flags, ka * kb)};
  return submit(E, r);
}

int kd_basis_dots(pk_kry *E, pk_vid x, int32_t b0, int32_t k, int32_t with_norm, int32_t out, int32_t flags) {
  PK_CALL(ensure_part(E, (size_t)grid_dot(E->n) * ((size_t)k + 1)));
  PK_CALL(ensure_gsum(E, (size_t)k + 1));
  PK_CALL(ensure_xacc(E, (size_t)k + 1));
  std::vector<int32_t> r = {OP_BASIS_DOTS, 0, x, b0, k, with_norm, out, async_of(E, flags, k + (with_norm ? 1 : 0))};
  return submit(E, r);
}

int kd_basis_axpy(pk_kry *E, pk_vid y, pk_coef cy, int32_t b0, int32_t k, int32_t c0, int32_t neg) {
  std::vector<int32_t> r = {OP_AXPY, 0, y, cy.idx, cy.neg, b0, k, c0, neg};
  return submit(E, r);
}

int kd_basis_axpy_dots(pk_kry *E, pk_vid y, pk_coef cy, int32_t b0, int32_t k, int32_t c0, int32_t neg,
                       int32_t with_norm, int32_t out, int32_t flags) {
  PK_CALL(ensure_part(E, (size_t)grid_dot(E->n) * ((size_t)k + 1)));
  PK_CALL(ensure_gsum(E, (size_t)k + 1));
  PK_CALL(ensure_xacc(E, (size_t)k + 1));
  std::vector<int32_t> r = {OP_AXPY_DOTS, 0,   y,   cy.idx,    cy.neg,
                            b0,           k,   c0,  neg, with_norm, out, async_of(E, flags, k + (with_norm ? 1 : 0))};
  return submit(E, r);
}

int kd_basis_gemm(pk_kry *E, int32_t a0, int32_t kin, int32_t t0, int32_t ldt, int32_t b1, int32_t kout) {
  std::vector<int32_t> r = {OP_GEMM, 0, a0, kin, t0, ldt, b1, kout};
  return submit(E, r);
}

int kd_scalar(pk_kry *E, int32_t id, int32_t arg) {
  std::vector<int32_t> r = {OP_SCALAR, 0, id, arg};
  return submit(E, r);
}

int kd_wait(pk_kry *E) {
  KryDev *D = dev_of(E);
  if (!D->dist)
    return PKRYLOV_SUCCESS; /* one rank: the sums are in S already */
  D->q_pend = 0;
  std::vector<int32_t> r = {OP_WAIT, 0};
  return submit(E, r);
}

int kd_get(pk_kry *E, int32_t first, int32_t count, double *host) {
  KryDev *D = dev_of(E);
  if (count <= 0)
    return PKRYLOV_SUCCESS;
  PK_CALL(flush(E));
  PK_CUDA_CHECK(
      E->ctx, kSolve,
      cudaMemcpyAsync(D->hbuf, D->S + first, sizeof(double) * (size_t)count, cudaMemcpyDeviceToHost, D->st),
      "reading the scalars");
  PK_CALL(sync_checked(E, "reading the scalars"));
  memcpy(host, D->hbuf, sizeof(double) * (size_t)count);
  return PKRYLOV_SUCCESS;
}

int kd_set(pk_kry *E, int32_t first, int32_t count, const double *host) {
  if (count <= 0)
    return PKRYLOV_SUCCESS;
  std::vector<int32_t> r((size_t)4 + 2 * (size_t)count);
  r[0] = OP_SET;
  r[2] = first;
  r[3] = count;
  memcpy(r.data() + 4, host, sizeof(double) * (size_t)count);
  return submit(E, r);
}

int kd_sync(pk_kry *E) {
  PK_CALL(flush(E));
  return sync_checked(E, "synchronising");
}

int kd_block_begin(pk_kry *E) {
  KryDev *D = dev_of(E);
  PK_CALL(flush(E));
  if (!D->graph_on || D->uop || D->upc || D->prof)
    return PKRYLOV_SUCCESS; /* host calls (user routines, the caller's halo exchange) cannot be in a graph;
                               the profile times operations one by one */
  if (D->dist && (!D->nccl || pk_cuda_dist_instrumented(E->ctx) || D->repro))
    return PKRYLOV_SUCCESS; /* host-staged exchanges and sums are MPI calls between the kernels; the exact
                               sums of several ranks are not captured */
  D->rec_on = 1;
  D->rec_pend0 = D->q_pend;
  D->have_base = 0;
  D->base = 0;
  D->log.clear();
  return PKRYLOV_SUCCESS;
}

int kd_block_end(pk_kry *E) {
  KryDev *D = dev_of(E);
  if (!D->rec_on)
    return PKRYLOV_SUCCESS;
  D->rec_on = 0;
  if (D->log.empty())
    return PKRYLOV_SUCCESS;
  if (D->rec_pend0 || D->q_pend) { /* a global sum crosses the block's bounds (pipelined GMRES): a graph
                                      would hold half of it; such blocks run directly */
    const int rc = play(E, D->log, false, D->base);
    D->log.clear();
    return rc;
  }
  GraphEntry *g = nullptr;
  for (GraphEntry &c : D->graphs)
    if (c.sig == D->log) {
      g = &c;
      break;
    }
  int rc = PKRYLOV_SUCCESS;
  if (!g) { /* first time: run directly, remember the sequence */
    GraphEntry ne;
    ne.sig = D->log;
    ne.exec = NULL;
    ne.failed = 0;
    if (D->graphs.size() < KGRAPH_CACHE) {
      D->graphs.push_back(ne);
    } else {
      GraphEntry &old = D->graphs[D->graph_next];
      D->graph_next = (D->graph_next + 1) % KGRAPH_CACHE;
      if (old.exec) {
        cudaStreamSynchronize(D->st);
        cudaGraphExecDestroy(old.exec);
      }
      old = ne;
    }
    rc = play(E, D->log, false, D->base);
  } else {
    if (!g->exec && !g->failed) {
      g->exec = capture(E, D->log);
      g->failed = g->exec == NULL;
    }
    if (g->exec) {
      k_setbase<<<1, 1, 0, D->st>>>(D->argbase, D->base);
      cudaError_t e = cudaGetLastError();
      if (e == cudaSuccess)
        e = cudaGraphLaunch(g->exec, D->st);
      if (e != cudaSuccess)
        rc = pk_cuda_error(E->ctx, kSolve, (int)e, "launching the graph of a block", NULL);
    } else {
      rc = play(E, D->log, false, D->base);
    }
  }
  D->log.clear();
  return rc;
}

} // namespace

extern "C" const pk_kry_backend pk_kry_cuda_backend = {
    kd_create,  kd_destroy,  kd_bind,   kd_unbind,     kd_copy,       kd_first_nonfinite, kd_matvec,
    kd_precond, kd_residual, kd_update, kd_block_dots, kd_basis_dots, kd_basis_axpy,      kd_basis_gemm,
    kd_scalar,  kd_wait,     kd_get,    kd_set,        kd_sync,       kd_basis_axpy_dots, kd_block_begin,
    kd_block_end};

/**
 * @file pk_cuda_kry.cuh
 * @brief Private header of the CUDA vector engine (pk_kry.h): the engine's device state (KryDev), its
 *        helpers (vector pointers, grid sizes, the block sums in fp64 and double-double) and the functions
 *        its files share: pk_cuda_kry.cu (records, blocks and CUDA graphs, scalar steps, the backend table),
 *        pk_cuda_kry_ops.cu (the vector operations and their kernels), pk_cuda_kry_sums.cu (the second
 *        stage of the reductions, global sums over the ranks, exact sums). Namespace pkc_kry; the kernels
 *        and their argument types stay in each file's unnamed namespace.
 */
#ifndef PK_CUDA_KRY_CUH
#define PK_CUDA_KRY_CUH

#include <cuda_runtime.h>
#include <stdint.h>

#include <vector>

extern "C" {
#include "pk_kry.h"
}
#include "pk_cuda.h"

namespace pkc_kry {

constexpr int KB = 256;                   /* threads per block */
constexpr int64_t KMAX_UPD_BLOCKS = 1024; /* update / axpy / gemm grid cap */
constexpr int64_t KMAX_DOT_BLOCKS = 256;  /* multi-dot grid cap (grid.x): bounds the partial slots */
constexpr int KGEMM_J = 8;                /* outputs per chunk of basis_gemm */

/** A graph of a block: the block's operation records (scalar arguments relative) and its executable. */
struct GraphEntry {
  std::vector<int32_t> sig;
  cudaGraphExec_t exec; /* NULL: seen once (run directly), or the capture failed (failed = 1) */
  int failed;
  int ralt0;            /* KryDev.ralt_on when the block began (the graph holds that parity's arrays) */
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
  int xfuse_on; /* reproducible mode: the one-pass exact sums (kry.xfuse; 0: xsums' second pass) */
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
  int64_t *xpart;                /* the blocks' accumulators of the one-pass exact sums (xgrid; xpart_cap) */
  size_t xpart_cap;              /* accumulators */
  /* CG's fused loops on one GPU (pk_cuda_kry_cg.cu): the partial sums of the last loop, not yet added
     (p2_nb slots of p2_nv values in part, for S[p2_out ..]): the next operation adds them first, a scalar
     step in the same kernel */
  int p2_on, p2_nv;
  int64_t p2_nb;
  int32_t p2_out;
  double *p2_part;               /* the buffer that holds them: part, or part2 after a folded loop */
  /* folded steps (pk_cuda_kry_cg.cu, "folded steps"): the solver options cuda.fold (-1: the CG driver's
     automatic choice by size), cuda.pdl */
  int fold, pdl;
  int fold_ns;                   /* the method's scalars (PK_CG_NSCALARS, PK_PCG_NSCALARS) */
  double *S2, *S3;               /* the other scalar buffers of the folded steps (fold_ns values) */
  double *Sc;                    /* the buffer with the current scalars: S, or S2 / S3 after a folded step */
  double *part2;                 /* the second partial-sum buffer (a folded loop reads one, writes the other) */
  size_t part2_cap;
  /* the scalar step a folded loop runs first (recorded SCALAR deferred by play's plan) */
  int fs_on, fs_id;
  int32_t fs_arg;
  const int *fs_base;
  int fs_pdl;                    /* the block has folded launches: its pipelined-CG updates launch with PDL */
  /* the CG driver's overlap on distributed grid operators (pk_cuda_kry_cg.cu): the vector whose halo
     exchange a loop began for the product of the next one (CG's z with the preconditioner loop's sums,
     pipelined CG's m = M^-1 w with the update's sums); pipelined CG's edge columns on the communication
     stream (context option dist.edge_comm) */
  const double *halo_begun;
  cudaEvent_t ev_scal, ev_edge;
  /* CG's fused 2-D loop on one GPU (the CG driver's fuse_r; pk_cuda_kry_cg.cu do_cg_precond): the approximate
     inverse's loop reads r - alpha q at every neighbour and writes the new r to the other of two arrays, so
     vector ralt_vid lives in ralt while ralt_on (vp); each such loop flips ralt_on, a replayed graph of a block
     by the parity of its loops (kd_block_end) */
  int fuse_r;
  int ralt_on, ralt0; /* ralt0: ralt_on when the block being recorded began */
  pk_vid ralt_vid;
  double *ralt;
  /* unfolded: the two loops and the one-block steps after them as programmatic dependent launches when the
     record before was the kernel they follow (prev_op, cur_op: the record types run last, 0 at a block's
     start), so that no programmatic launch follows a copy or a set in a graph */
  int upd_pdl;
  int prev_op, cur_op;
  /* its L2 window (option cuda.l2persist, the driver's rule): q, p, z, opened by the solve's first operator
     loop outside a capture when the three are consecutive vectors, closed by unbind */
  pk_cuda_l2 l2w;
  int l2_tried;
};

/** A record's part in a block's folded steps (play's plan, pk_cuda_kry_cg.cu). */
struct FoldPlan {
  int8_t act;  /* FP_* */
  int8_t sout; /* the scalar buffer the folded kernel writes (0: S, 1: S2, 2: S3) */
};
/** The record types of the operations (pk_cuda_kry.cu, "operations: records"). */
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
  OP_MATVEC_UPDATE,
  OP_CG_PRECOND,
  OP_CG_OPERATOR,
  OP_PIPECG,
  OP_COUNT
};

enum { FP_NONE = 0, FP_DEFER = 1, FP_HOST = 2, FP_SKIP = 3, FP_HALO = 4 };

inline KryDev *dev_of(pk_kry *E) {
  return (KryDev *)E->priv;
}

/* the public function the engine serves, for pk_cuda_error / PK_CUDA_CHECK (pk_cuda.h) */
constexpr const char *kSolve = "pkrylov_solver_solve";

/** Device pointer of vector id v in its own place (ids were checked by the front end). */
inline double *vp_home(pk_kry *E, pk_vid v) {
  KryDev *D = dev_of(E);
  if (v == PK_KV_X)
    return D->x;
  if (v == PK_KV_B)
    return D->b;
  if (v >= PK_KV_V0)
    return D->vec + (size_t)(E->nwork + (v - PK_KV_V0)) * (size_t)E->ld;
  return D->vec + (size_t)(v - PK_KV_W0) * (size_t)E->ld;
}
/** Device pointer of vector id v: in KryDev.ralt while CG's fused 2-D loop has moved it there. */
inline double *vp(pk_kry *E, pk_vid v) {
  KryDev *D = dev_of(E);
  return D->ralt_on && v == D->ralt_vid ? D->ralt : vp_home(E, v);
}
/** Basis vector j. */
inline double *bp(pk_kry *E, int32_t j) {
  return vp(E, PK_KV_V0 + j);
}

inline int64_t grid_1d(int64_t n, int64_t cap) {
  int64_t b = (n + KB - 1) / KB;
  if (b > cap)
    b = cap;
  return b < 1 ? 1 : b;
}
/** Multi-dot grid.x: about 4 elements per thread, at most KMAX_DOT_BLOCKS. */
inline int64_t grid_dot(int64_t n) {
  int64_t b = (n + 4 * KB - 1) / (4 * KB);
  if (b > KMAX_DOT_BLOCKS)
    b = KMAX_DOT_BLOCKS;
  return b < 1 ? 1 : b;
}

/* one-pass exact sums (reproducible mode): at most XR_MAX_BLOCKS blocks and XR_SLOTS block accumulators
   per launch (or 16 blocks per value when a launch has more than XR_SLOTS / 16 values), and below 2^26
   elements per block */
constexpr int64_t XR_MAX_BLOCKS = 512; /* (the second stage, k_xfin, reads every block's digits) */
constexpr int64_t XR_SLOTS = 16384;
constexpr int64_t XR_MIN_BLOCKS = 16;
constexpr int64_t XR_PER_BLOCK = (int64_t)1 << 26;
/** Room for the block accumulators of a launch of `nvals` values per block (ensure_xacc). */
inline size_t xpart_need(size_t nvals) {
  const size_t a = (size_t)XR_MIN_BLOCKS * nvals;
  return a > (size_t)XR_SLOTS ? a : (size_t)XR_SLOTS;
}
/** The grid.x of a one-pass exact launch whose default grid is `grid` and whose blocks (of one grid row)
 *  hold `nvals` accumulators; 0 when a block would take more than XR_PER_BLOCK elements (then the two-pass
 *  exact sums). grid.x * nvals <= xpart_need(nvals). */
inline int64_t xgrid(int64_t n, int64_t grid, int64_t nvals, int on = 1) {
  if (!on)
    return 0;
  int64_t cap = XR_SLOTS / (nvals > 0 ? nvals : 1);
  if (cap > XR_MAX_BLOCKS)
    cap = XR_MAX_BLOCKS;
  if (cap < XR_MIN_BLOCKS)
    cap = XR_MIN_BLOCKS;
  const int64_t g = grid < cap ? grid : cap;
  return n > g * XR_PER_BLOCK ? 0 : g;
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

/* ---- what the engine's files share ---------------------------------------------------------------- */

/* ---- the update list (k_update in pk_cuda_kry_ops.cu; the fused operator product of
        pk_cuda_kry_fused.cu runs the same list at each element) ----------------------------------- */

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

/** The arguments of an update list and pairs (the engine's vector ids as device pointers). */
void upd_args(pk_kry *E, int32_t nupd, const pk_kupd *u, int32_t npairs, const pk_kpair *pairs, UpdArgs *a);

/** k_update's prologue, by every thread of a block of KB: the arguments into the block's shared copy a,
 *  then their coefficient values (references into S resolved) into cv. */
__device__ __forceinline__ void upd_stage(UpdArgs &a, const UpdArgs &args, double (*cv)[PK_KRY_MAXTERMS + 1],
                                          const double *S) {
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
}

/** The first nupd updates of the list at element i (a, cv: upd_stage's). */
__device__ __forceinline__ void upd_at(const UpdArgs &a, const double (*cv)[PK_KRY_MAXTERMS + 1], int nupd,
                                       int64_t i) {
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
}

/* pk_cuda_kry.cu (records, blocks and graphs, the backend table) */
void drop_graphs(pk_kry *E);
/* pk_cuda_kry_sums.cu (partial-sum buffer, global and exact sums) */
int ensure_part(pk_kry *E, size_t need);
int ensure_gsum(pk_kry *E, size_t count);
int sum_into(pk_kry *E, int64_t nb, int nvals, bool dd, int32_t out, bool async = false);
int do_wait(pk_kry *E);
int ensure_xacc(pk_kry *E, size_t count);
int xsums(pk_kry *E, int count, const double *const *a, const double *const *b, bool dd, int32_t out);
int xfinish(pk_kry *E, int64_t nb, int count, bool dd, int32_t out);
/* pk_cuda_kry_ops.cu (the vector operations) */
cudaError_t basis_axpy_smem(int k);
int do_matvec(pk_kry *E, pk_vid x, pk_vid y);
int do_precond(pk_kry *E, pk_vid x, pk_vid y);
int do_residual(pk_kry *E, pk_vid x, pk_vid r, int32_t out, bool x_zero = false);
int do_update(pk_kry *E, int32_t nupd, const pk_kupd *u, int32_t npairs, const pk_kpair *pairs, int32_t out,
              bool async);
int do_block_dots(pk_kry *E, int32_t a0, int32_t ka, int32_t b0, int32_t kb, int32_t dd, int32_t out,
                  bool async);
int do_basis_dots(pk_kry *E, pk_vid x, int32_t b0, int32_t k, int32_t with_norm, int32_t out, bool async);
int do_basis_axpy(pk_kry *E, pk_vid y, pk_coef cy, int32_t b0, int32_t k, int32_t c0, int32_t neg);
int do_basis_gemm(pk_kry *E, int32_t a0, int32_t kin, int32_t t0, int32_t ldt, int32_t b1, int32_t kout);
int do_axpy_dots(pk_kry *E, pk_vid y, pk_coef cy, int32_t b0, int32_t k, int32_t c0, int32_t neg,
                 int32_t with_norm, int32_t out, bool async);
/* pk_cuda_kry_fused.cu (the operator product fused with the update on CSR views) */
bool matvec_update_fusable(pk_kry *E);
int do_matvec_update(pk_kry *E, pk_vid x, pk_vid y, int32_t nupd, const pk_kupd *u, int32_t npairs,
                     const pk_kpair *pairs, int32_t out, bool async);
int uop_apply(pk_kry *E, const double *x, double *y);
/* pk_cuda_kry_cg.cu (CG's fused loops; flags: PK_KRY_IF_RUNNING) */
int do_cg_precond(pk_kry *E, pk_vid r, pk_vid q, pk_vid z, pk_coef alpha, int32_t out, int32_t flags,
                  bool async, int sout = -1);
int do_cg_operator(pk_kry *E, pk_vid x, pk_vid p, pk_vid z, pk_vid q, pk_coef alpha, pk_coef beta, int32_t out,
                   int32_t flags, bool async, int sout = -1);
int do_pipecg(pk_kry *E, const pk_kpipecg *v, pk_coef alpha, pk_coef beta, int32_t nsums, int32_t out,
              int32_t flags, bool async);
/** The pending sums of a CG loop into S (nothing pending: nothing), alone or with the scalar step id; the
 *  scalars back in S when a folded step left them in S2 / S3. */
int psum_flush(pk_kry *E);
int psum_launch(pk_kry *E, int id, int arg, const int *base);
/** The folded steps of a block's records (log, fold off: all FP_NONE). */
void fold_plan(pk_kry *E, const std::vector<int32_t> &log, std::vector<FoldPlan> &plan);
/** The scalar buffer b (0: S, 1: S2, 2: S3). */
double *sbuf(pk_kry *E, int b);
/** Pipelined CG's m = M^-1 w with the step of the SCALAR record sc folded in (writes buffer sout). */
int do_pc_apply_fold(pk_kry *E, pk_vid x, pk_vid y, const int32_t *sc, bool graph, int32_t base, int sout);
/** The deferred step (D->fs_*) folded into the CG loops (sout: the buffer the folded step writes; < 0 none). */

} // namespace pkc_kry

#endif /* PK_CUDA_KRY_CUH */

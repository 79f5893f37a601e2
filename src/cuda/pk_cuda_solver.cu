/**
 * @file pk_cuda_solver.cu
 * @brief CG and pipelined CG on the GPU: the solver's device work area, the solve's entry and the host
 *        helpers of the drivers (the iterations: pk_cuda_cg.cu; shared declarations: pk_cuda_solver.h).
 *
 * The iteration never waits for the host: alpha, beta, the convergence test and the breakdown checks live in
 * a device state (pk_cuda_state) that the scalar steps update (pk_cuda_scalar.cuh: the scalar recurrences of
 * solver.c); every other kernel reads it and does nothing once the solve has stopped. The host enqueues
 * blocks of `sync_interval` iterations, captured once in a CUDA graph, and reads the state back after each
 * block (one synchronisation per block). The host also does the rare steps: confirming convergence on the
 * true residual, residual replacement, the curvature check of pipelined CG, the monitor callback and the
 * stagnation window (these two force a sync every iteration).
 *
 * Two ways to launch an iteration, with the same arithmetic and the same sums bit for bit: the scalar
 * steps as one-block kernels of their own (4 kernels per CG iteration, 3 per pipelined one), or folded
 * into the data-parallel kernel that follows them (2 per iteration; pk_cuda.h, "folded steps"), with
 * programmatic dependent launches. Small problems take the folded path (kernel latency dominates there),
 * large ones the one-block kernels (a fold makes every block of a many-wave kernel wait for the sums).
 *
 * The logic mirrors the CPU drivers of cg.c (and their scalar steps, kry_scalar_pcg.h) step for step, so both backends stop at the
 * same iteration for the same reason.
 */
#include <cuda_runtime.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <algorithm>
#include <mutex>
#include <utility>

extern "C" {
#include "pk_impl.h"
}
#include "pk_cuda.h"
#include "pk_cuda_solver.h"

/**
 * The folded launchers are used (fold = -1, the automatic choice) for grid operators up to kFoldMaxCells
 * unknowns and for CSR operators and CG's fused 2-D loop (fuse_r) while the steps write at most kFoldMaxSlots
 * partial-sum slots. Every block of a folded kernel first adds all the producer's slots, a cost that grows
 * with (number of blocks)^2: it pays for small problems, which are latency-bound and save a kernel launch per
 * scalar step, and not once the grids have many blocks (the grid operators use one thread per column and
 * level chunk, CSR one thread per row, so CSR and the grids of one level, a thread per cell, reach that point
 * at smaller sizes: the flat rule). Measured on an H200 (us
 * per iteration, one-block / folded with programmatic dependent launches): thin shell, column
 * preconditioner, CG 32^3 11.4 / 7.4, 64^3 18.1 / 15.2, 128^2 x 64 40.9 / 40.8, 256^2 x 128 272 / 278;
 * pipelined CG 32^3 10.2 / 7.9, 64^3 20.6 / 19.6; CSR 7-point Laplacian 64^3 (1024 slots: one thread per
 * row), CG 17.6 / 36.1, pipelined CG 19.2 / 29.0. The fused 2-D loop (H100, barotropic with the approximate
 * inverse, us per iteration unfolded / folded): 128^2 7.82 / 6.34, 256^2 8.83 / 8.11, 384^2 13.22 / 19.29,
 * 512^2 15.42 / 21.98, the loops one wave of 528 blocks from 384^2: every folded block adds them all.
 * Pipelined CG on the same grids (a thread per cell, 1024 slots at 512^2), H200, the CUDA engine's kernels,
 * folded / not: 256^2 10.44 / 10.83, 512^2 30.89 / 17.46 (the driver's folded: 25.66): the flat rule for
 * every grid of one level since 2026-11-28 (before, only for CG's fused loop); the driver's pipelined CG
 * 25.49 -> 16.42 at 512^2, with Jacobi CG 19.78 -> 13.30 and pipelined CG 22.85 -> 13.93.
 */
static constexpr int64_t kFoldMaxCells = (int64_t)1 << 20;
static constexpr int64_t kFoldMaxSlots = 256;
/* grid operators also stop folding past kFoldMaxGridSlots slots (H100, barotropic 1024 x 1024 with the
   approximate inverse launched a thread per cell, 4096 slots: CG 244 us per iteration folded, the slots' sums
   dominating); in CG 2-D grid stencils launch one wave of blocks, grid-stride (pk_cuda_op gcap,
   pk_cuda_grid2d_cap: 528 on an H100), and 3-D grids up to kFoldMaxCells fill the GPU with about
   PKC_FILL_BLOCKS (512) to 1024 blocks: both fold */
static constexpr int64_t kFoldMaxGridSlots = 1024;

extern "C" int pk_cuda_fold_auto(int csr, int64_t n, int64_t nslots, int32_t nz) {
  if (csr || nz == 1) return nslots <= kFoldMaxSlots && (csr || n <= kFoldMaxCells); /* the flat rule */
  return n <= kFoldMaxCells && nslots <= kFoldMaxGridSlots;
}

namespace pkc_solver {

/**
 * The L2 window of CG on one GPU (option cuda.l2persist). Each iteration reads and writes its work vectors
 * once or twice (q: read twice, written once; z, p, x: read and written once; r: read in one array and
 * written to the other), and the operator's and the preconditioner's coefficients stream past them: once
 * the vectors and the coefficients no longer fit in the L2 together, the vectors come from DRAM every time.
 * An access policy window over the first m work vectors (v[D_Q], v[D_Z], v[D_P], v[D_X]: contiguous, the
 * most traffic first) marks their lines persisting, and a set-aside part of the L2 as large as the window
 * (at most the device's maximum) keeps them there from one kernel to the next. auto: the models' 2-D solve
 * (CG with the approximate inverse fused on a 2-D grid of one rank, fuse_r), from 16 vectors' bytes above
 * the L2's size (2^19 cells on an H100), m = 0.8 x the maximum part / the vector's bytes, at most 4 (none:
 * no window). Measured on an H100 (50 MB L2, 32.8 MB maximum part; barotropic, 2 x 2 tiles, us per
 * iteration, none / m = 1 / 2 / 3 / 4): 512 x 1024 35.4 / 34.4 / 33.8 / 32.7 / 32.0; 1024 x 1024 66.9 /
 * 62.3 / 58.7 / 56.7 / 56.8; 1280 x 1024 79.3 / 71.5 / 67.9 / 68.0 / 73.4; 1536 x 1024 93.4 / 84.0 / 79.6 /
 * 87.0 / 93.0; 2048 x 1024 122.6 / 111.5 / 114.9 / 128.9 / 140.2; 2048 x 2048 234.6 / 251.6 / 305.4 / 307.9 /
 * 446.5: a window larger than the part (hit ratio below 1) loses, so the rule takes the largest m whose
 * window fits in 0.8 of it. The solve then restores the stream's window, and the last of the windows open on
 * the device at once (solves in several threads) resets the persisting lines and restores the device's
 * limit (the lines left behind slowed a vendor PCG run after it 1.24x): l2_begin and l2_end
 * cost about 30 us per solve. The 3-D grids (thin shell, column stencil, 128 x 128 x 64) gained nothing
 * from it and pipelined CG (other vectors) lost (82.1 -> 85.5 at 1024 x 1024), so auto leaves them alone.
 */
/* The device's persisting limit while windows are open (threads of one process solving at once on one
   device, each with its own context): the first window saves the limit, each one raises it to its part if
   smaller, the last one resets the lines and restores the saved limit. */
constexpr int kL2Devices = 64;
std::mutex g_l2_mu;
int g_l2_open[kL2Devices];
size_t g_l2_saved[kL2Devices];

} // namespace pkc_solver

extern "C" int pk_cuda_l2_vectors(int opt, int fused_2d, size_t vbytes, int maxm) {
  if (opt == 0 || vbytes == 0) return 0;
  int dev = 0, maxp = 0, l2size = 0;
  if (cudaGetDevice(&dev) != cudaSuccess ||
      cudaDeviceGetAttribute(&maxp, cudaDevAttrMaxPersistingL2CacheSize, dev) != cudaSuccess ||
      cudaDeviceGetAttribute(&l2size, cudaDevAttrL2CacheSize, dev) != cudaSuccess || maxp <= 0) {
    cudaGetLastError();
    return 0;
  }
  int m = opt;
  if (opt < 0) {
    if (!fused_2d || 16 * vbytes <= (size_t)l2size) return 0;
    m = (int)(0.8 * (double)maxp / (double)vbytes);
  }
  return m < 0 ? 0 : m > maxm ? maxm : m;
}

extern "C" void pk_cuda_l2_open(pk_cuda_l2 *w, void *stream, const void *base, int m, size_t vbytes) {
  using namespace pkc_solver;
  const cudaStream_t st = (cudaStream_t)stream;
  w->m = 0;
  if (m <= 0) return;
  int dev = 0, maxp = 0, maxw = 0;
  if (cudaGetDevice(&dev) != cudaSuccess || dev < 0 || dev >= kL2Devices ||
      cudaDeviceGetAttribute(&maxp, cudaDevAttrMaxPersistingL2CacheSize, dev) != cudaSuccess ||
      cudaDeviceGetAttribute(&maxw, cudaDevAttrMaxAccessPolicyWindowSize, dev) != cudaSuccess || maxp <= 0 ||
      maxw <= 0) {
    cudaGetLastError();
    return;
  }
  size_t bytes = (size_t)m * vbytes;
  if (bytes > (size_t)maxw) bytes = (size_t)maxw;
  if (cudaStreamGetAttribute(st, cudaStreamAttributeAccessPolicyWindow, &w->prev) != cudaSuccess) {
    cudaGetLastError();
    return;
  }
  const size_t part = bytes < (size_t)maxp ? bytes : (size_t)maxp; /* the set-aside part: the window, at most */
  {
    std::lock_guard<std::mutex> lock(g_l2_mu);
    size_t lim = 0;
    if (cudaDeviceGetLimit(&lim, cudaLimitPersistingL2CacheSize) != cudaSuccess) lim = 0;
    const size_t want = g_l2_open[dev] > 0 && lim > part ? lim : part; /* another window open: the larger part */
    if (lim != want && cudaDeviceSetLimit(cudaLimitPersistingL2CacheSize, want) != cudaSuccess) {
      cudaGetLastError(); /* MIG or MPS: no set-aside part */
      return;
    }
    if (g_l2_open[dev]++ == 0) g_l2_saved[dev] = lim;
  }
  w->dev = dev;
  const double ratio = (double)part / (double)bytes;
  memset(&w->win, 0, sizeof w->win);
  w->win.base_ptr = (void *)base;
  w->win.num_bytes = bytes;
  w->win.hitRatio = (float)(ratio < 1.0 ? ratio : 1.0);
  w->win.hitProp = cudaAccessPropertyPersisting;
  w->win.missProp = cudaAccessPropertyStreaming;
  cudaStreamAttrValue a;
  memset(&a, 0, sizeof a);
  a.accessPolicyWindow = w->win;
  w->m = m;
  if (cudaStreamSetAttribute(st, cudaStreamAttributeAccessPolicyWindow, &a) != cudaSuccess) {
    cudaGetLastError();
    pk_cuda_l2_close(w, stream);
  }
}

extern "C" void pk_cuda_l2_close(pk_cuda_l2 *w, void *stream) {
  using namespace pkc_solver;
  if (!w->m) return;
  const cudaStream_t st = (cudaStream_t)stream;
  cudaStreamSetAttribute(st, cudaStreamAttributeAccessPolicyWindow, &w->prev);
  cudaStreamSynchronize(st);
  {
    std::lock_guard<std::mutex> lock(g_l2_mu);
    if (--g_l2_open[w->dev] == 0) { /* the last window of the device */
      cudaCtxResetPersistingL2Cache();
      size_t lim = 0;
      if (cudaDeviceGetLimit(&lim, cudaLimitPersistingL2CacheSize) == cudaSuccess && lim != g_l2_saved[w->dev])
        cudaDeviceSetLimit(cudaLimitPersistingL2CacheSize, g_l2_saved[w->dev]);
    }
  }
  cudaGetLastError(); /* none of this changes a result */
  w->m = 0;
}

extern "C" void pk_cuda_l2_nodes(const pk_cuda_l2 *w, cudaGraph_t g) {
  if (!w->m) return;
  size_t nn = 0;
  cudaError_t e = cudaGraphGetNodes(g, NULL, &nn);
  cudaGraphNode_t *nodes = e == cudaSuccess ? (cudaGraphNode_t *)malloc(sizeof(cudaGraphNode_t) * (nn ? nn : 1)) : NULL;
  if (nodes && cudaGraphGetNodes(g, nodes, &nn) == cudaSuccess) {
    cudaKernelNodeAttrValue kv;
    memset(&kv, 0, sizeof kv);
    kv.accessPolicyWindow = w->win;
    for (size_t i = 0; i < nn; i++) {
      cudaGraphNodeType t;
      if (cudaGraphNodeGetType(nodes[i], &t) == cudaSuccess && t == cudaGraphNodeTypeKernel)
        cudaGraphKernelNodeSetAttribute(nodes[i], cudaKernelNodeAttributeAccessPolicyWindow, &kv);
    }
  }
  free(nodes);
  cudaGetLastError(); /* a node without the window only loses its effect */
}

namespace pkc_solver {

/** CG's window (option cuda.l2persist): its first m work vectors from v[D_Q] (q, z, p, x). */
void l2_begin(Run &R) {
  SolverDev *d = R.d;
  R.l2 = 0;
  if (R.distributed) return;
  const size_t vb = (size_t)(d->v[1] - d->v[0]) * sizeof(double);
  pk_cuda_l2_open(&R.l2w, R.stream, d->v[D_Q], pk_cuda_l2_vectors(d->l2persist, R.fuse_r, vb, 4), vb);
  R.l2 = R.l2w.m;
}

/** The end of the L2 window (after the iterations): the stream's window, the lines and the limit as before. */
void l2_end(Run &R) {
  pk_cuda_l2_close(&R.l2w, R.stream);
  R.l2 = 0;
}

/* ---- timeline (solver option cuda.timeline=1; benchmarks, not for production) ---------------------------
 * CUDA events with timing at the steps of each pipelined CG iteration, on the stream that runs the step
 * (the communication stream for the gather and the halos), for the first TL_MAXIT iterations of a solve;
 * blocks then run without graphs. At the end of a solve of 20 or more iterations one line per rank goes
 * to stderr: the median time of each step's end after the iteration's start and the median iteration,
 * over iterations 2 .. n-2 (medians: the iterations at the ends of blocks wait for the host, and those
 * after the solve has stopped do nothing). Points: 0 start, 1 local sums summed, 2 gather done (comm.), 3 m = M^-1 w, 4 pack,
 * 5 halos arrived (comm.), 6 scalar step, 7 update (interior columns when distributed), 8 edge columns.
 * The switch is process-wide (g_tl.on), set from the solving solver's option at the start of each solve. */
constexpr int TL_MAXIT = 256, TL_NPT = 9;
struct Timeline {
  int on = 0;
  int it = -1;
  bool created = false;
  cudaEvent_t ev[TL_MAXIT][TL_NPT];
  bool used[TL_MAXIT][TL_NPT];
};
Timeline g_tl;

int tl_on() { return g_tl.on; }

/** Record point p of the current iteration on stream st (p = 0 starts the next iteration). */
void tl_mark(cudaStream_t st, int p) {
  if (!tl_on()) return;
  if (p == 0) g_tl.it++;
  const int i = g_tl.it;
  if (i < 0 || i >= TL_MAXIT) return;
  if (!g_tl.created) {
    for (int a = 0; a < TL_MAXIT; a++)
      for (int b = 0; b < TL_NPT; b++) cudaEventCreate(&g_tl.ev[a][b]);
    memset(g_tl.used, 0, sizeof g_tl.used);
    g_tl.created = true;
  }
  if (cudaEventRecord(g_tl.ev[i][p], st) == cudaSuccess) g_tl.used[i][p] = true;
}

/** The solve's line (see above), then a reset. */
void tl_report(pkrylov_context ctx, const char *what) {
  if (!tl_on()) return;
  const int n = g_tl.it < TL_MAXIT ? g_tl.it : TL_MAXIT - 1; /* iterations with the next one's start */
  if (n >= 20 && cudaDeviceSynchronize() == cudaSuccess) {
    static double val[TL_NPT][TL_MAXIT];
    int cnt[TL_NPT] = {0};
    for (int i = 2; i < n - 1; i++) {
      float ms;
      if (!g_tl.used[i][0] || !g_tl.used[i + 1][0] ||
          cudaEventElapsedTime(&ms, g_tl.ev[i][0], g_tl.ev[i + 1][0]) != cudaSuccess)
        continue;
      val[0][cnt[0]++] = 1e3 * ms; /* point 0: the iteration */
      for (int p = 1; p < TL_NPT; p++)
        if (g_tl.used[i][p] && cudaEventElapsedTime(&ms, g_tl.ev[i][0], g_tl.ev[i][p]) == cudaSuccess)
          val[p][cnt[p]++] = 1e3 * ms;
    }
    double med[TL_NPT];
    for (int p = 0; p < TL_NPT; p++) {
      std::sort(val[p], val[p] + cnt[p]);
      med[p] = cnt[p] ? val[p][cnt[p] / 2] : 0.0;
    }
    static const char *names[TL_NPT] = {"start", "sums", "gather", "pc", "pack", "halo", "scalar", "update",
                                        "edge"};
    char line[512];
    int len = snprintf(line, sizeof line, "timeline rank %d %s: %d its, median iteration %.1f us (us after "
                       "its start:", (int)ctx->rank, what, cnt[0], med[0]);
    for (int p = 1; p < TL_NPT && len < (int)sizeof line; p++)
      if (cnt[p]) len += snprintf(line + len, sizeof line - len, " %s %.1f", names[p], med[p]);
    if (len < (int)sizeof line) snprintf(line + len, sizeof line - len, ")");
    fprintf(stderr, "%s\n", line);
  }
  cudaGetLastError();
  g_tl.it = -1;
  if (g_tl.created) memset(g_tl.used, 0, sizeof g_tl.used);
}

/** Distributed operator: exchange the halo of x (blocking) before a launch that applies it to x. */
int halo(Run &R, const double *x) { return R.dop ? pk_cuda_dist_halo(R.dop, x, R.nccl) : PKRYLOV_SUCCESS; }

/** Minimum-residual iterate (R.minres): x_min = x on stream st when state sp says x improved. */
int keep_min(Run &R, void *st, const pk_cuda_state *sp) {
  pkrylov_context ctx = R.ctx;
  if (!R.minres) return PKRYLOV_SUCCESS;
  PK_CUDA_CHECK(ctx, kSolve, pk_cuda_copy_improved(st, sp, R.n, R.d->v[D_X], R.d->xmin),
                "minimum-residual iterate");
  return PKRYLOV_SUCCESS;
}

/* ---- user callbacks (pkrylov_operator_create_user, pkrylov_precond_create_user) -----------------------
 * The routine gets DEVICE pointers after the stream has been synchronised (pk_cuda_user_call); the driver
 * then runs one iteration per block (no graph, no folded launchers: a graph cannot hold a host call) and
 * reads the device state before each call inside an iteration, so the routine is not called once the solve
 * has stopped. A user operator writes A x into d->ax, which the launchers read (pk_cuda_op.pre). */

/** *running = 1 when the device state is RUNNING (reads it back: one synchronisation). */
int still_running(Run &R, int *running) {
  PK_CALL(state_to_host(R));
  *running = R.d->hst->status == PK_ST_RUNNING;
  return PKRYLOV_SUCCESS;
}

/** y = A x by the caller's routine: the user operator's, or the halo stencil's exchange (then the kernels). */
int uop_apply(Run &R, const double *x, double *y) {
  if (R.uop->halo.exchange) return pk_cuda_halo_apply(R.uop, x, y, "pkrylov_solver_solve");
  return pk_cuda_user_call(R.ctx, R.uop->user.apply, R.uop->user.data, R.n, x, y, "operator");
}

/** y = A x on whole vectors: the launcher, or the caller's routine. */
int apply_op(Run &R, const double *x, double *y) {
  pkrylov_context ctx = R.ctx;
  if (R.uop) return uop_apply(R, x, y);
  PK_CALL(halo(R, x));
  PK_CUDA_CHECK(ctx, kSolve, pk_cuda_op_apply(R.stream, &R.op, x, y), "operator");
  return PKRYLOV_SUCCESS;
}

/** A user operator: d->ax = A x (the launchers that follow read it); else nothing. */
int user_ax(Run &R, const double *x) {
  if (!R.uop) return PKRYLOV_SUCCESS;
  return uop_apply(R, x, R.d->ax);
}

/** Several ranks and a preconditioner that reads the neighbours of its input (AINV): exchange them first. */
bool pc_reads_halo(const Run &R) { return R.dop && R.pcp->type == PKRYLOV_PRECOND_AINV; }

/** z = M^-1 r on whole vectors: the launcher (st may be NULL), or the caller's routine (when running). */
int apply_pc(Run &R, const pk_cuda_state *st, const double *r, double *z) {
  pkrylov_context ctx = R.ctx;
  if (pc_reads_halo(R)) PK_CALL(halo(R, r));
  if (R.upc) {
    if (st) {
      int running;
      PK_CALL(still_running(R, &running));
      if (!running) return PKRYLOV_SUCCESS;
    }
    return pk_cuda_user_call(ctx, R.upc->user.apply, R.upc->user.data, R.n, r, z, "preconditioner");
  }
  PK_CUDA_CHECK(ctx, kSolve, pk_cuda_pc_apply(R.stream, R.pcp, st, r, z), "z = M^-1 r");
  return PKRYLOV_SUCCESS;
}

/** The CG preconditioner loop on st[0] (unfolded); with a user preconditioner: r -= alpha q (the NONE
 *  loop), the routine z = M^-1 r, then the sums (r, z), (r, r). */
int cg_precond(Run &R, int alpha_zero, int64_t *nb) {
  pkrylov_context ctx = R.ctx;
  SolverDev *d = R.d;
  double **v = d->v;
  if (pc_reads_halo(R)) { /* r -= alpha q, r's halo, then z = M^-1 r with the sums */
    PK_CUDA_CHECK(ctx, kSolve, pk_cuda_cg_rupdate(R.stream, d->st, alpha_zero, R.n, v[D_R], v[D_Q]),
                  "CG preconditioner loop");
    PK_CALL(halo(R, v[D_R]));
    PK_CUDA_CHECK(ctx, kSolve,
                  R.xrho ? pk_cuda_cg_precond_after_x(R.stream, R.pcp, d->st, v[D_R], v[D_Z], d->xloop, nb)
                         : pk_cuda_cg_precond_after(R.stream, R.pcp, d->st, v[D_R], v[D_Z], d->part, nb),
                  "CG preconditioner loop");
    return PKRYLOV_SUCCESS;
  }
  PK_CUDA_CHECK(
      ctx, kSolve,
      R.xrho ? pk_cuda_cg_precond_step_x(R.stream, R.pcp, d->st, alpha_zero, R.n, v[D_R], v[D_Q], v[D_Z], d->xloop,
                                         nb)
             : pk_cuda_cg_precond_step(R.stream, R.pcp, d->st, alpha_zero, R.n, v[D_R], v[D_Q], v[D_Z], d->part,
                                       nb),
      "CG preconditioner loop");
  if (!R.upc) return PKRYLOV_SUCCESS;
  int running;
  PK_CALL(still_running(R, &running));
  if (!running) return PKRYLOV_SUCCESS; /* the scalar step copies a stopped state */
  PK_CALL(pk_cuda_user_call(ctx, R.upc->user.apply, R.upc->user.data, R.n, v[D_R], v[D_Z], "preconditioner"));
  const double *xs[2] = {v[D_R], v[D_R]}, *ys[2] = {v[D_Z], v[D_R]};
  PK_CUDA_CHECK(ctx, kSolve, pk_cuda_dots(R.stream, R.n, 2, xs, ys, d->part, nb), "dots");
  return PKRYLOV_SUCCESS;
}

/** The CG operator loop on st[0] (unfolded); a user operator's routine first (when running). */
int cg_operator(Run &R, int init, int64_t *nb, int pdl) {
  double **v = R.d->v;
  if (R.uop) {
    int running;
    PK_CALL(still_running(R, &running));
    if (running) PK_CALL(user_ax(R, v[D_Z]));
  }
  PK_CALL(halo(R, v[D_Z]));
  return cg_operator_on(R, &R.op, init, 0, nb, pdl, "CG operator loop");
}

int cg_operator_on(Run &R, const pk_cuda_op *op, int init, int64_t slot, int64_t *nb, int pdl, const char *what) {
  SolverDev *d = R.d;
  double **v = d->v;
  if (slot > d->nslots) return pk_error(R.ctx, PKRYLOV_ERR_INTERNAL, __func__, "more slots than sized");
  PK_CUDA_CHECK(R.ctx, kSolve,
                R.xone ? pk_cuda_cg_operator_step_x(R.stream, op, d->st, init, v[D_X], v[D_P], v[D_Z], v[D_Q],
                                                    d->xloop + slot * PK_XACC_LEN, nb)
                       : pk_cuda_cg_operator_step(R.stream, op, d->st, init, v[D_X], v[D_P], v[D_Z], v[D_Q],
                                                  d->part + slot, nb, pdl),
                what);
  return PKRYLOV_SUCCESS;
}

int pipecg_update_on(Run &R, void *stream, const pk_cuda_op *op, int64_t slot, int64_t *nb, const char *what) {
  SolverDev *d = R.d;
  double **v = d->v;
  const int nv = pipe_nv(R);
  if (slot > d->nslots) return pk_error(R.ctx, PKRYLOV_ERR_INTERNAL, __func__, "more slots than sized");
  PK_CUDA_CHECK(R.ctx, kSolve,
                R.xone ? pk_cuda_pipecg_step_x(stream, op, d->st, v[D_M], v[D_Z], v[D_Q], v[D_S], v[D_P], v[D_X],
                                               v[D_R], v[D_U], v[D_W], d->xloop + slot * nv * PK_XACC_LEN, nb, R.rr_on)
                       : pk_cuda_pipecg_step(stream, op, d->st, v[D_M], v[D_Z], v[D_Q], v[D_S], v[D_P], v[D_X],
                                             v[D_R], v[D_U], v[D_W], d->part + (int64_t)nv * slot, nb, R.rr_on),
                what);
  return PKRYLOV_SUCCESS;
}

/** Sum nvals partials on the device and bring the sums to the host (one synchronisation). */
int sums_to_host(Run &R, int64_t nb, int nvals, double *out) {
  pkrylov_context ctx = R.ctx;
  PK_CUDA_CHECK(ctx, kSolve, pk_cuda_sum_partials(R.stream, R.d->part, nb, nvals, R.d->dsum),
                "summing partials");
  PK_CUDA_CHECK(
      ctx, kSolve,
      cudaMemcpyAsync(R.d->hsum, R.d->dsum, sizeof(double) * nvals, cudaMemcpyDeviceToHost, R.stream),
      "copy");
  PK_CUDA_CHECK(ctx, kSolve, cudaStreamSynchronize(R.stream), "synchronising");
  memcpy(out, R.d->hsum, sizeof(double) * nvals);
  return PKRYLOV_SUCCESS;
}

/* ---- MPI (pk_cuda_dist.cu; sums through mpi.c or NCCL) -------------------------------------------------
 * With several ranks every scalar step reads global sums. The rank's partial slots are summed on the device
 * (dsum, nvals values, the single-GPU order), the ranks' sums gathered rank after rank into d->gath
 * (gath[r * nvals + j] = rank r's sum j), and the scalar step reads gath as `ranks` partial slots: it adds
 * them by its fixed tree, so the global sums depend only on the rank count and the decomposition, never on
 * the path, the run or the collective's algorithm (the same results between runs, and bitwise the same on
 * the NCCL and the host-staged path).
 *  NCCL (R.nccl): ncclAllGather of dsum on the operator's communication stream, in stream order
 *        (pk_cuda_dist_allgather): no host synchronisation, so blocks of iterations run as CUDA graphs;
 *  host: dsum (and the device state, for the early end of a block) copied to pinned memory, MPI_Allgather,
 *        gath copied back to the device.
 * Every rank gets the same sums and so the same device state: the ranks take the same branches and make
 * the same collective calls. */

/** d->gath / d->hgath for the context's ranks (allocated on first use). */
int gath_alloc(Run &R) {
  pkrylov_context ctx = R.ctx;
  SolverDev *d = R.d;
  if (d->gath && d->gath_ranks >= ctx->size) return PKRYLOV_SUCCESS;
  cudaFree(d->gath), cudaFreeHost(d->hgath);
  d->gath = d->hgath = NULL, d->gath_ranks = 0;
  PK_CUDA_CHECK(ctx, kSolve, cudaMalloc(&d->gath, sizeof(double) * kPartNV * (size_t)ctx->size),
                "allocating the gathered sums");
  PK_CUDA_CHECK(ctx, kSolve, cudaMallocHost(&d->hgath, sizeof(double) * kPartNV * (size_t)ctx->size),
                "allocating the gathered sums");
  d->gath_ranks = ctx->size;
  return PKRYLOV_SUCCESS;
}

/** Host path: the ranks' sums d->hsum (nvals) gathered on the host, then enqueued to d->gath. */
int gather_host(Run &R, int nvals) {
  pkrylov_context ctx = R.ctx;
  SolverDev *d = R.d;
  PK_CALL(pk_mpi_allgather_f64(ctx, d->hsum, nvals, d->hgath));
  PK_CUDA_CHECK(ctx, kSolve,
                cudaMemcpyAsync(d->gath, d->hgath, sizeof(double) * (size_t)nvals * ctx->size,
                                cudaMemcpyHostToDevice, R.stream),
                "copy");
  return PKRYLOV_SUCCESS;
}

/** Enqueue the device sum of nvals partials (part, nb) and the gather (NCCL), or its copy to the host (and
 *  the state's; event). */
int sums_begin(Run &R, const double *part, int64_t nb, int nvals) {
  pkrylov_context ctx = R.ctx;
  SolverDev *d = R.d;
  PK_CALL(gath_alloc(R));
  if (R.nccl) {
    /* the sum of the slots and the gather on the communication stream: the context's stream goes on at
       once (pipelined CG: the preconditioner) until sums_end waits */
    void *comm;
    PK_CALL(pk_cuda_dist_fork(R.dop, &comm));
    PK_CUDA_CHECK(ctx, kSolve, pk_cuda_sum_partials(comm, part, nb, nvals, d->dsum), "summing partials");
    PK_CALL(pk_cuda_dist_allgather(R.dop, R.nccl, d->dsum, d->gath, nvals, 0));
    R.sums_done = 1;
    return PKRYLOV_SUCCESS;
  }
  if (!d->ev_sums)
    PK_CUDA_CHECK(ctx, kSolve, cudaEventCreateWithFlags(&d->ev_sums, cudaEventDisableTiming), "event");
  const int instr = pk_cuda_dist_instrumented(ctx);
  double t0 = 0.0;
  if (instr) { /* the work queued before is not the reduction's */
    PK_CUDA_CHECK(ctx, kSolve, cudaStreamSynchronize(R.stream), "synchronising");
    t0 = pk_wtime();
  }
  PK_CUDA_CHECK(ctx, kSolve, pk_cuda_sum_partials(R.stream, part, nb, nvals, d->dsum), "summing partials");
  PK_CUDA_CHECK(ctx, kSolve,
                cudaMemcpyAsync(d->hsum, d->dsum, sizeof(double) * nvals, cudaMemcpyDeviceToHost, R.stream),
                "copy");
  PK_CUDA_CHECK(ctx, kSolve,
                cudaMemcpyAsync(d->hst, d->st, sizeof(pk_cuda_state), cudaMemcpyDeviceToHost, R.stream),
                "state");
  PK_CUDA_CHECK(ctx, kSolve, cudaEventRecord(d->ev_sums, R.stream), "event");
  R.sums_done = 0;
  if (instr) { /* the whole reduction now, timed alone (sums_end then only hands out the result) */
    PK_CUDA_CHECK(ctx, kSolve, cudaEventSynchronize(d->ev_sums), "synchronising");
    PK_CALL(gather_host(R, nvals));
    PK_CUDA_CHECK(ctx, kSolve, cudaStreamSynchronize(R.stream), "synchronising");
    pk_cuda_dist_add_reduce_time(pk_wtime() - t0);
    R.sums_done = 1;
  }
  return PKRYLOV_SUCCESS;
}

/** Host path: wait for sums_begin's copy, gather over the ranks, enqueue the copy into d->gath. Both paths:
 *  (*gpart, *gnb) = (d->gath, ranks), the slots the scalar step reads. */
int sums_end(Run &R, int nvals, const double **gpart, int64_t *gnb) {
  pkrylov_context ctx = R.ctx;
  SolverDev *d = R.d;
  if (R.nccl) { /* the launches enqueued from now on wait for the gather */
    PK_CALL(pk_cuda_dist_allgather_wait(R.dop));
  } else if (!R.sums_done) {
    PK_CUDA_CHECK(ctx, kSolve, cudaEventSynchronize(d->ev_sums), "synchronising");
    const double t0 = pk_wtime();
    PK_CALL(gather_host(R, nvals));
    pk_cuda_dist_add_reduce_time(pk_wtime() - t0);
  }
  R.sums_done = 0;
  *gpart = d->gath;
  *gnb = ctx->size;
  return PKRYLOV_SUCCESS;
}

/** Distributed context: (*part, *nb) := the global sums of the nvals partials (part, nb); else unchanged. */
int global_part(Run &R, const double **part, int64_t *nb, int nvals) {
  if (!R.distributed) return PKRYLOV_SUCCESS;
  PK_CALL(sums_begin(R, *part, *nb, nvals));
  return sums_end(R, nvals, part, nb);
}

/* ---- reproducible mode (ctx->reproducible) ----------------------------------------------------------
 * Every global sum the iteration reads is recomputed from its vectors by pk_cuda_xacc_dots: the rounded
 * products summed exactly into the accumulator of reduce.c (pk_xacc.h), added over the ranks as integers
 * (NCCL: ncclAllReduce on ncclInt64; host-staged: MPI_SUM on MPI_INT64_T through pinned memory), rounded
 * once on the device into d->xs, which the scalar steps read as their one partial slot. The same sums
 * (the same products) as the CPU backend's reproducible mode: (r, z) and (r, r) after CG's preconditioner
 * loop, (p, q) after its operator loop, (r, u), (w, u), (r, r) before pipelined CG's scalar step, (r, r)
 * of the true residual, (b, b) and the curvature (t, A t). The results depend neither on the rank count nor
 * on the decomposition; the fused partial sums of the launchers are computed and ignored. No folded
 * launchers; graphs on one GPU only. In one pass (Run.xone: kry.xfuse, by default up to kXOneAuto local
 * values) the loops add the same products exactly themselves (the _x launchers, pk_cuda_xsum.cuh) and
 * exact_blocks adds their blocks' accumulators: CG's operator loop, its preconditioner loop except the
 * column sweeps (Run.xrho), pipelined CG's update (read by the next iteration of the block; a block's first
 * iteration and the residuals keep the second pass). */

int exact_reduce(Run &R, int nv, const double **gp, int64_t *gnb);

/**
 * Local values up to which the CG drivers add reproducible mode's exact sums in their loops' pass (option
 * kry.xfuse=auto; pk_cuda_xsum.cuh's four-term expansions) rather than in a second pass (k_xacc_dots' digit
 * windows). H100, 2026-11-28, us per iteration, one pass against two (the same build, one run): thin shell
 * 32^3 CG 51.1 / 57.9, pipelined CG 24.2 / 43.8; barotropic 256^2 33.4 / 65.8, 26.2 / 48.1: the iteration is
 * launch-bound there and one pass saves two kernels per sum. Above it the loops' exact accumulation costs
 * more than the second pass in most rows: 64^3 98.2 / 79.2, 120.3 / 68.5; 128^2 x 64 157.7 / 141.0, 191.3 /
 * 152.6; barotropic 512^2 108.2 / 88.5 (pipelined CG 49.1 / 75.4), 1024^2 173.4 / 167.3 (153.5 / 174.4),
 * 2048^2 355.5 / 403.1 (525.9 / 464.6); thin shell 256^2 x 128 850.8 / 712.2, 1023.2 / 865.7.
 */
constexpr int64_t kXOneAuto = (int64_t)1 << 17;

/** The exact-sum buffers (first reproducible solve). */
int xacc_alloc(Run &R) {
  pkrylov_context ctx = R.ctx;
  SolverDev *d = R.d;
  const int64_t grid = pk_cuda_xacc_grid(R.n);
  if (grid < 1)
    return pk_error(ctx, PKRYLOV_ERR_UNSUPPORTED, "pkrylov_solver_solve",
                    "reproducible mode: %lld local values are more than the exact sums take on a GPU",
                    (long long)R.n);
  const int64_t len = grid * PKC_XACC_MAXV * PK_XACC_LEN;
  if (d->xblk && d->xblk_len >= len) return PKRYLOV_SUCCESS;
  cudaFree(d->xblk);
  d->xblk = NULL, d->xblk_len = 0;
  if (!d->xacc) {
    PK_CUDA_CHECK(ctx, kSolve, cudaMalloc(&d->xacc, sizeof(int64_t) * kPartNV * PK_XACC_LEN),
                  "allocating the exact sums");
    PK_CUDA_CHECK(ctx, kSolve, cudaMallocHost(&d->hxacc, sizeof(int64_t) * kPartNV * PK_XACC_LEN),
                  "allocating the exact sums");
    PK_CUDA_CHECK(ctx, kSolve, cudaMalloc(&d->xs, sizeof(double) * kPartNV), "allocating the exact sums");
  }
  PK_CUDA_CHECK(ctx, kSolve, cudaMalloc(&d->xblk, sizeof(int64_t) * (size_t)len),
                "allocating the exact sums");
  d->xblk_len = len;
  return PKRYLOV_SUCCESS;
}

/** The one-pass loops' block accumulators (Run.xone): every launch of the solve writes at most d->nslots
 *  blocks of at most nv sums each (CG 2, pipelined CG pipe_nv). */
int xloop_alloc(Run &R, int nv) {
  SolverDev *d = R.d;
  const int64_t len = d->nslots * nv * PK_XACC_LEN;
  if (d->xloop && d->xloop_len >= len) return PKRYLOV_SUCCESS;
  cudaFree(d->xloop);
  d->xloop = NULL, d->xloop_len = 0;
  PK_CUDA_CHECK(R.ctx, kSolve, cudaMalloc(&d->xloop, sizeof(int64_t) * (size_t)len), "allocating the exact sums");
  d->xloop_len = len;
  return PKRYLOV_SUCCESS;
}

/** The exact global dots (x[j], y[j]), j < nv <= kPartNV, into d->xs (device); (*gp, *gnb) = (d->xs, 1)
 *  when gp is not NULL. Host-staged: the device state comes to the host with the accumulators, as in
 *  sums_begin. */
int exact_sums(Run &R, int nv, const double *const *x, const double *const *y, const double **gp,
               int64_t *gnb) {
  pkrylov_context ctx = R.ctx;
  SolverDev *d = R.d;
  if (nv > kPartNV) return pk_error(ctx, PKRYLOV_ERR_INTERNAL, __func__, "%d exact sums: too many", nv);
  /* groups of PKC_XACC_MAXV dots (the scratch d->xblk in turn) */
  for (int g0 = 0; g0 < nv; g0 += PKC_XACC_MAXV) {
    const int gn = nv - g0 < PKC_XACC_MAXV ? nv - g0 : PKC_XACC_MAXV;
    PK_CUDA_CHECK(ctx, kSolve,
                  pk_cuda_xacc_dots(R.stream, R.n, gn, x + g0, y + g0, d->xblk,
                                    d->xacc + (size_t)g0 * PK_XACC_LEN, R.distributed ? NULL : d->xs + g0),
                  "exact sums");
  }
  return exact_reduce(R, nv, gp, gnb);
}

/** The nv exact sums of the nb blocks' accumulators a one-pass loop wrote to d->xloop (Run.xone), into d->xs
 *  as exact_sums. */
int exact_blocks(Run &R, int64_t nb, int nv, const double **gp, int64_t *gnb) {
  SolverDev *d = R.d;
  if (nv > kPartNV || nb * nv * PK_XACC_LEN > d->xloop_len)
    return pk_error(R.ctx, PKRYLOV_ERR_INTERNAL, __func__, "%lld blocks of %d exact sums: more than sized",
                    (long long)nb, nv);
  PK_CUDA_CHECK(R.ctx, kSolve, pk_cuda_xacc_blocks(R.stream, d->xloop, nb, nv, d->xacc, R.distributed ? NULL : d->xs),
                "exact sums");
  return exact_reduce(R, nv, gp, gnb);
}

/** CG's sums after the preconditioner loop (nb: the slots or blocks it wrote): the scalar step's part and
 *  slots, one-pass, exact or plain. */
int cg_rho_sums(Run &R, const double **gp, int64_t *gnb) {
  if (R.xrho) return exact_blocks(R, *gnb, 2, gp, gnb);
  if (R.repro) return exact_cg_rho(R, gp, gnb);
  return global_part(R, gp, gnb, 2);
}

/** CG's (p, q) after the operator loop, as cg_rho_sums. */
int cg_sigma_sums(Run &R, const double **gp, int64_t *gnb) {
  if (R.xone) return exact_blocks(R, *gnb, 1, gp, gnb);
  if (R.repro) return exact_cg_sigma(R, gp, gnb);
  return global_part(R, gp, gnb, 1);
}

/** The accumulators d->xacc[0 .. nv) of this rank added over the ranks and rounded into d->xs (one rank:
 *  rounded already); (*gp, *gnb) = (d->xs, 1) when gp is not NULL. */
int exact_reduce(Run &R, int nv, const double **gp, int64_t *gnb) {
  pkrylov_context ctx = R.ctx;
  SolverDev *d = R.d;
  if (R.distributed) {
    const int cnt = nv * PK_XACC_LEN;
    if (R.nccl) {
      PK_CALL(pk_cuda_dist_allreduce_i64(R.dop, R.nccl, d->xacc, cnt));
    } else {
      PK_CUDA_CHECK(
          ctx, kSolve,
          cudaMemcpyAsync(d->hxacc, d->xacc, sizeof(int64_t) * cnt, cudaMemcpyDeviceToHost, R.stream),
          "copy");
      PK_CUDA_CHECK(ctx, kSolve,
                    cudaMemcpyAsync(d->hst, d->st, sizeof(pk_cuda_state), cudaMemcpyDeviceToHost, R.stream),
                    "state");
      PK_CUDA_CHECK(ctx, kSolve, cudaStreamSynchronize(R.stream), "synchronising");
      const double t0 = pk_wtime();
      PK_CALL(pk_mpi_allreduce_i64(ctx, d->hxacc, cnt, 0));
      pk_cuda_dist_add_reduce_time(pk_wtime() - t0);
      PK_CUDA_CHECK(
          ctx, kSolve,
          cudaMemcpyAsync(d->xacc, d->hxacc, sizeof(int64_t) * cnt, cudaMemcpyHostToDevice, R.stream),
          "copy");
    }
    PK_CUDA_CHECK(ctx, kSolve, pk_cuda_xacc_round_ex(R.stream, d->xacc, nv, 0, d->xs), "exact sums");
  }
  if (gp) *gp = d->xs, *gnb = 1;
  return PKRYLOV_SUCCESS;
}

/** exact_sums brought to the host: out[0..nv) (one synchronisation). */
int exact_sums_host(Run &R, int nv, const double *const *x, const double *const *y, double *out) {
  pkrylov_context ctx = R.ctx;
  PK_CALL(exact_sums(R, nv, x, y, NULL, NULL));
  PK_CUDA_CHECK(ctx, kSolve,
                cudaMemcpyAsync(R.d->hsum, R.d->xs, sizeof(double) * nv, cudaMemcpyDeviceToHost, R.stream),
                "copy");
  PK_CUDA_CHECK(ctx, kSolve, cudaStreamSynchronize(R.stream), "synchronising");
  memcpy(out, R.d->hsum, sizeof(double) * nv);
  return PKRYLOV_SUCCESS;
}

/** CG's sums after the preconditioner loop, (r, z) and (r, r), exact: the scalar step's slots. */
int exact_cg_rho(Run &R, const double **gp, int64_t *gnb) {
  double **v = R.d->v;
  const double *xs[2] = {v[D_R], v[D_R]}, *ys[2] = {v[D_Z], v[D_R]};
  return exact_sums(R, 2, xs, ys, gp, gnb);
}
/** CG's (p, q) after the operator loop, exact. */
int exact_cg_sigma(Run &R, const double **gp, int64_t *gnb) {
  double **v = R.d->v;
  const double *xs[1] = {v[D_P]}, *ys[1] = {v[D_Q]};
  return exact_sums(R, 1, xs, ys, gp, gnb);
}
/** Pipelined CG's (r, u), (w, u), (r, r) and with the automatic residual replacement its (x, x), (p, p),
 *  (u, u), (q, q), exact (the one slot the scalar step reads). */
int exact_pipecg(Run &R, const double **gp, int64_t *gnb) {
  double **v = R.d->v;
  const double *xs[PK_RR_NV] = {v[D_R], v[D_W], v[D_R], v[D_X], v[D_P], v[D_U], v[D_Q]};
  const double *ys[PK_RR_NV] = {v[D_U], v[D_U], v[D_R], v[D_X], v[D_P], v[D_U], v[D_Q]};
  return exact_sums(R, pipe_nv(R), xs, ys, gp, gnb);
}

/** ||b - A x|| into *res (r is overwritten). */
int true_residual(Run &R, double *r, double *res) {
  pkrylov_context ctx = R.ctx;
  int64_t nb;
  double rr;
  PK_CALL(user_ax(R, R.d->v[D_X]));
  PK_CALL(halo(R, R.d->v[D_X]));
  PK_CUDA_CHECK(ctx, kSolve, pk_cuda_residual(R.stream, &R.op64, R.d->v[D_B], R.d->v[D_X], r, R.d->part, &nb),
                "residual");
  if (R.repro) {
    const double *xs[1] = {r};
    PK_CALL(exact_sums_host(R, 1, xs, xs, &rr));
  } else {
    PK_CALL(sums_to_host(R, nb, 1, &rr));
    PK_CALL(pk_allreduce_sum(ctx, &rr, 1));
  }
  *res = sqrt(rr);
  return PKRYLOV_SUCCESS;
}

/** bytes from src to dst on the solver's stream (kind: the direction), then (sync) wait for it. */
int copy_small(Run &R, void *dst, const void *src, size_t bytes, cudaMemcpyKind kind, int sync,
               const char *what) {
  pkrylov_context ctx = R.ctx;
  PK_CUDA_CHECK(ctx, kSolve, cudaMemcpyAsync(dst, src, bytes, kind, R.stream), what);
  if (sync)
    PK_CUDA_CHECK(ctx, kSolve, cudaStreamSynchronize(R.stream), "synchronising");
  return PKRYLOV_SUCCESS;
}

int state_to_device(Run &R) {
  return copy_small(R, R.d->st, R.d->hst, sizeof(pk_cuda_state), cudaMemcpyHostToDevice, 0, "state");
}

int state_to_host(Run &R) {
  return copy_small(R, R.d->hst, R.d->st, sizeof(pk_cuda_state), cudaMemcpyDeviceToHost, 1, "state");
}

/**
 * Host-side per-iteration bookkeeping for the recorded iterations [hist_seen, upto]: history copy for the
 * monitor and the stagnation window. Returns a stop reason or 0.
 */
int host_record(Run &R, int32_t upto) {
  pkrylov_solver s = R.s;
  if (!s->monitor && s->stag_window <= 0) return 0;
  pkrylov_context ctx = R.ctx;
  for (int32_t i = R.hist_seen; i <= upto; i++) {
    double h;
    PK_CUDA_CHECK(ctx, kSolve, cudaMemcpy(&h, R.d->hist + i, sizeof(double), cudaMemcpyDeviceToHost),
                  "history");
    R.hist_seen = i + 1;
    if (s->monitor && s->monitor(s->monitor_user, i, h)) return PKRYLOV_STOPPED_BY_MONITOR;
    if (s->stag_window > 0) {
      if (h < R.best * (1.0 - 1e-3)) {
        R.best = h;
        R.stalled = 0;
      } else if (++R.stalled >= s->stag_window) {
        return PKRYLOV_DIVERGED_STAGNATION;
      }
    }
  }
  return 0;
}

/** Converged reason of a CONVERGED device state, as cg.c's steps (pk_solver_converged_rr: the solver's stop rule). */
int converged_reason(const Run &R) {
  const int r = pk_solver_converged_rr(R.s, R.tol, R.d->hst->rr);
  return r ? r : PKRYLOV_CONVERGED_RTOL;
}

/** Check the true residual of x; *accept / *stagnated as pk_kry_confirm in kry.c (the recurrence stop rule
 *  accepts at once, no true residual). */
int confirm(Run &R, int *accept, int *stagnated) {
  if (pk_solver_recurrence(R.s)) {
    *accept = 1;
    *stagnated = 0;
    return PKRYLOV_SUCCESS;
  }
  double tr;
  PK_CALL(true_residual(R, R.d->v[D_T], &tr));
  R.res->true_residual_checks++;
  R.final_res = tr;
  R.have_final = 1;
  *accept = tr <= R.tol;
  *stagnated = !*accept && ++R.confirm_failures > 5;
  return PKRYLOV_SUCCESS;
}

} // namespace pkc_solver

using namespace pkc_solver;

extern "C" int pk_cuda_solver_setup(struct pkrylov_solver_s *s) {
  pkrylov_context ctx = s->ctx;
  SolverDev *d = (SolverDev *)calloc(1, sizeof(SolverDev));
  if (!d) return pk_error(ctx, PKRYLOV_ERR_OUT_OF_MEMORY, "pkrylov_solver_create", "cannot allocate");
  s->dev = d;
  const int64_t n = s->n;
  const size_t stride = ((size_t)n + 31) / 32 * 32 + 32; /* 256-byte aligned, shifted */
  pk_cuda_op op;
  pk_cuda_pc pc;
  int rc = pk_cuda_operator_view(s->A, 0, &op);
  if (!rc && s->M) rc = pk_cuda_precond_view(s->M, 0, &pc);
  if (rc) return rc;
  if (s->type == PKRYLOV_SOLVER_CG)
    d->gcap = op.gcap = pc.op.gcap = pk_cuda_grid2d_cap(n); /* the solves' cap */
  d->nslots = pk_cuda_partials_needed(&op, s->M ? &pc : NULL);
  if (d->nslots < 1) d->nslots = 1;
  pk_cuda_solver_options(s); /* cuda.fold, cuda.pdl, cuda.pipe_none */
  cudaError_t e = cudaMalloc(&d->work, sizeof(double) * stride * D_NVEC);
  if (e == cudaSuccess) e = cudaMalloc(&d->part, sizeof(double) * 2 * kPartNV * (size_t)d->nslots);
  if (e == cudaSuccess) e = cudaMalloc(&d->st, sizeof(pk_cuda_state) * 3);
  if (e == cudaSuccess) e = cudaMallocHost(&d->hst, sizeof(pk_cuda_state));
  if (e == cudaSuccess) e = cudaMalloc(&d->dsum, sizeof(double) * kPartNV);
  if (e == cudaSuccess) e = cudaMallocHost(&d->hsum, sizeof(double) * kPartNV);
  if (e == cudaSuccess) e = cudaMalloc(&d->rre, sizeof(pk_rr_est));
  if (e == cudaSuccess) e = cudaMallocHost(&d->hrre, sizeof(pk_rr_est));
  /* on the solver's stream: a plain cudaMemset runs on the legacy default stream, which does not order
     with the context's non-blocking stream (the first solve's copy of b could land before the zeroing) */
  cudaStream_t stream = stream_of(ctx);
  if (e == cudaSuccess) e = cudaMemsetAsync(d->work, 0, sizeof(double) * stride * D_NVEC, stream);
  if (e == cudaSuccess)
    e = cudaMemsetAsync(d->part, 0, sizeof(double) * 2 * kPartNV * (size_t)d->nslots, stream);
  if (e == cudaSuccess) e = cudaMemsetAsync(d->st, 0, sizeof(pk_cuda_state) * 3, stream);
  if (e == cudaSuccess) e = cudaStreamSynchronize(stream);
  if (e != cudaSuccess) {
    char what[96];
    snprintf(what, sizeof what, "allocating the device work area (%d vectors of %lld values)", D_NVEC,
             (long long)n);
    return pk_cuda_error(ctx, "pkrylov_solver_create", (int)e, what, NULL);
  }
  for (int i = 0; i < D_NVEC; i++) d->v[i] = d->work + (size_t)i * stride;
  return PKRYLOV_SUCCESS;
}

extern "C" void pk_cuda_solver_free(struct pkrylov_solver_s *s) {
  SolverDev *d = (SolverDev *)s->dev;
  if (!d) return;
  if (d->graph) cudaGraphExecDestroy(d->graph);
  if (d->graph_alt) cudaGraphExecDestroy(d->graph_alt);
  if (d->ev_sums) cudaEventDestroy(d->ev_sums);
  if (d->ev_scal) cudaEventDestroy(d->ev_scal);
  if (d->ev_edge) cudaEventDestroy(d->ev_edge);
  cudaFree(d->gath);
  cudaFreeHost(d->hgath);
  cudaFree(d->xblk);
  cudaFree(d->xloop);
  cudaFree(d->xacc);
  cudaFreeHost(d->hxacc);
  cudaFree(d->xs);
  cudaFree(d->work);
  cudaFree(d->part);
  cudaFree(d->hist);
  cudaFree(d->ax);
  cudaFree(d->xmin);
  cudaFree(d->st);
  cudaFreeHost(d->hst);
  cudaFree(d->dsum);
  cudaFreeHost(d->hsum);
  cudaFree(d->rre);
  cudaFreeHost(d->hrre);
  free(d);
  s->dev = NULL;
}

extern "C" void pk_cuda_solver_options(struct pkrylov_solver_s *s) {
  SolverDev *d = (SolverDev *)s->dev;
  if (!d) return;
  d->fold_mode = s->opts.cuda_fold;
  d->pdl = s->opts.cuda_pdl;
  d->pipe_none = s->opts.cuda_pipe_none;
  d->l2persist = s->opts.cuda_l2persist;
}

extern "C" void pk_cuda_solver_set_launch(struct pkrylov_solver_s *s, int fold, int pdl) {
  s->opts.cuda_fold = fold < 0 ? -1 : fold != 0;
  s->opts.cuda_pdl = pdl < 0 ? 1 : pdl != 0;
  pk_cuda_solver_options(s);
}

extern "C" void pk_cuda_solver_set_pipe_none(struct pkrylov_solver_s *s, int on) {
  s->opts.cuda_pipe_none = on < 0 ? 1 : on != 0;
  pk_cuda_solver_options(s);
}

extern "C" int pk_cuda_solver_used_pipe_none(const struct pkrylov_solver_s *s) {
  const SolverDev *d = (const SolverDev *)s->dev;
  return d ? d->last_pnone : 0;
}

extern "C" int pk_cuda_solver_solve(struct pkrylov_solver_s *s, int32_t mem, const double *b, double *x) {
  pkrylov_context ctx = s->ctx;
  SolverDev *d = (SolverDev *)s->dev;
  const int64_t n = s->n;
  const size_t bytes = sizeof(double) * (size_t)n;
  PK_CALL(pk_cuda_check_pointer(ctx, "pkrylov_solver_solve", mem, b, "b"));
  PK_CALL(pk_cuda_check_pointer(ctx, "pkrylov_solver_solve", mem, x, "x"));
  if (mem == PKRYLOV_MEM_HOST) { /* checked on the host, with the index, as the CPU backend does */
    int64_t bad = pk_first_nonfinite(b, n);
    if (bad >= 0)
      return pk_error(ctx, PKRYLOV_ERR_NOT_FINITE, "pkrylov_solver_solve",
                      "argument 'b' has a non-finite value (%g) at index %lld", b[bad], (long long)bad);
    if (s->nonzero_guess && (bad = pk_first_nonfinite(x, n)) >= 0)
      return pk_error(ctx, PKRYLOV_ERR_NOT_FINITE, "pkrylov_solver_solve",
                      "argument 'x' (initial guess) has a non-finite value (%g) at index %lld", x[bad],
                      (long long)bad);
  }
  const double t0 = pk_wtime();
  d->last_pnone = 0;
  g_tl.on = s->opts.cuda_timeline; /* the timeline (process-wide) follows the solving solver's option */
  Run R;
  memset(&R, 0, sizeof R);
  R.s = s, R.d = d, R.ctx = ctx, R.n = n;
  R.stream = stream_of(ctx);
  R.best = INFINITY;
  R.k = (s->monitor || s->stag_window > 0) ? 1 : s->sync_interval;
  const int csr = s->A->type == PKRYLOV_OPERATOR_CSR;
  R.fold = d->fold_mode >= 0 ? d->fold_mode : pk_cuda_fold_auto(csr, n, d->nslots, s->A->nz);
  /* a halo-exchange stencil runs like a user operator: its exchange is a host call between the kernels */
  R.uop = s->A->type == PKRYLOV_OPERATOR_USER || s->A->halo.exchange ? s->A : NULL;
  R.upc = s->M && s->M->type == PKRYLOV_PRECOND_USER ? s->M : NULL;
  if (R.uop || R.upc) R.k = 1, R.fold = 0; /* host calls: one iteration per block, no graph, no fold */
  R.distributed = pk_distributed(ctx);
  R.dop = R.distributed && (s->A->dist || s->A->grid) ? s->A : NULL;
  if (R.distributed) R.fold = 0; /* MPI / NCCL calls between the kernels: no folded launchers */
  if (R.dop) PK_CALL(pk_mpi_nccl(ctx, &R.nccl)); /* collective on its first call; NULL: host-staged */
  if (R.distributed) { /* before any graph capture: no allocation and no first NCCL call inside one */
    PK_CALL(gath_alloc(R));
    if (R.nccl && d->nccl_warm != R.nccl) { /* the collective's connections are set up outside a capture */
      PK_CALL(pk_cuda_dist_allgather(s->A, R.nccl, d->dsum, d->gath, 1, 1));
      d->nccl_warm = R.nccl;
    }
  }
  R.repro = ctx->reproducible != 0;
  R.minres = s->min_res != 0;
  if (R.minres && !d->xmin) { /* before any graph capture */
    if (cudaMalloc(&d->xmin, sizeof(double) * (size_t)n) != cudaSuccess) {
      cudaGetLastError();
      d->xmin = NULL;
      return pk_error(ctx, PKRYLOV_ERR_OUT_OF_MEMORY, "pkrylov_solver_solve",
                      "cannot allocate the minimum-residual iterate (%lld values)", (long long)n);
    }
  }
  if (R.nccl && R.dop && !R.repro) {
    R.edge_comm = ctx->opts.dist_edge_comm != 0; /* collective option (checked by pk_mpi_solve_check) */
    if (R.edge_comm && !d->ev_scal) {
      PK_CUDA_CHECK(ctx, kSolve, cudaEventCreateWithFlags(&d->ev_scal, cudaEventDisableTiming), "event");
      PK_CUDA_CHECK(ctx, kSolve, cudaEventCreateWithFlags(&d->ev_edge, cudaEventDisableTiming), "event");
    }
  }
  if (R.repro) { /* the exact sums (pk_cuda_xacc.cu) between the launchers: no folded steps */
    R.fold = 0;
    PK_CALL(xacc_alloc(R));
    /* one pass (the accumulators' headroom: a block covers at most 2^26 values); auto: up to kXOneAuto */
    const int xf = s->opts.kry_xfuse;
    R.xone = (xf > 0 || (xf < 0 && n <= kXOneAuto)) && n <= ((int64_t)1 << 26);
    if (R.xone) PK_CALL(xloop_alloc(R, s->type == PKRYLOV_SOLVER_CG ? 2 : PK_RR_NV));
  }
  R.pdl = R.fold && d->pdl;
  PK_CALL(pk_cuda_operator_view(s->A, 0, &R.op64));
  PK_CALL(pk_cuda_operator_view(s->A, s->mixed >= 2, &R.op));
  R.op_in = R.op_edge = R.op;
  R.op_in.cols = 1;
  R.op_edge.cols = 2;
  if (R.uop) {
    if (!d->ax && cudaMalloc(&d->ax, sizeof(double) * (size_t)n) != cudaSuccess) {
      cudaGetLastError();
      d->ax = NULL;
      return pk_error(ctx, PKRYLOV_ERR_OUT_OF_MEMORY, "pkrylov_solver_solve",
                      "cannot allocate the work vector of the user operator (%lld values)", (long long)n);
    }
    if (s->A->halo.exchange) { /* the launchers read A x from d->ax, as for a user operator; mask kept */
      pk_cuda_op u;
      memset(&u, 0, sizeof u);
      u.type = PKRYLOV_OPERATOR_USER;
      u.n = n;
      u.wet = R.op64.wet;
      R.op = R.op64 = u;
    }
    R.op.pre = R.op64.pre = d->ax;
  }
  if (s->M && !R.upc) {
    PK_CALL(pk_cuda_precond_view(s->M, s->mixed >= 1, &R.pc));
  } else { /* the launchers take a NONE view for "no preconditioner" (and a user one: its routine is called) */
    R.pc.type = PKRYLOV_PRECOND_NONE;
    R.pc.n = R.pc.ncols = n;
    R.pc.nz = 1;
    R.pc.layout = PKRYLOV_LAYOUT_KSLOW;
  }
  R.pcp = &R.pc;
  R.xrho = R.xone && s->type == PKRYLOV_SOLVER_CG && !R.upc && pk_cuda_cg_precond_x_ok(R.pcp);
  /* CG's 2-D grid stencils: grid-stride launches of the cap the slots were sized for (pk_cuda_op gcap) */
  R.op.gcap = R.op64.gcap = R.op_in.gcap = R.op_edge.gcap = R.pc.op.gcap = d->gcap;
  if (s->history_on || s->monitor || s->stag_window > 0) { /* else the kernels record nothing */
    const int32_t cap = s->maxit < INT32_MAX - 1 ? s->maxit + 1 : INT32_MAX;
    if (cap > d->hist_cap) {
      if (d->hist) cudaFree(d->hist), d->hist = NULL, d->hist_cap = 0;
      if (cudaMalloc(&d->hist, sizeof(double) * (size_t)cap) != cudaSuccess) {
        cudaGetLastError();
        return pk_error(ctx, PKRYLOV_ERR_OUT_OF_MEMORY, "pkrylov_solver_solve", "cannot allocate the history");
      }
      d->hist_cap = cap;
    }
    R.hist = d->hist;
  }
  double **v = d->v;
  cudaMemcpyKind kind = mem == PKRYLOV_MEM_HOST ? cudaMemcpyHostToDevice : cudaMemcpyDeviceToDevice;
  PK_CUDA_CHECK(ctx, kSolve, cudaMemcpyAsync(v[D_B], b, bytes, kind, R.stream), "copying b");
  if (s->nonzero_guess)
    PK_CUDA_CHECK(ctx, kSolve, cudaMemcpyAsync(v[D_X], x, bytes, kind, R.stream), "copying x");
  else
    PK_CUDA_CHECK(ctx, kSolve, cudaMemsetAsync(v[D_X], 0, bytes, R.stream), "memset");
  double sums[2];
  {
    const double *xs[2] = {v[D_B], v[D_X]}, *ys[2] = {v[D_B], v[D_X]};
    int64_t nb;
    PK_CUDA_CHECK(ctx, kSolve, pk_cuda_dots(R.stream, n, 2, xs, ys, d->part, &nb), "norms");
    PK_CALL(sums_to_host(R, nb, 2, sums));
  }
  if (!isfinite(sums[0]))
    return pk_error(ctx, PKRYLOV_ERR_NOT_FINITE, "pkrylov_solver_solve",
                    "argument 'b' has NaN or Inf values, or its 2-norm overflows");
  if (s->nonzero_guess && !isfinite(sums[1]))
    return pk_error(ctx, PKRYLOV_ERR_NOT_FINITE, "pkrylov_solver_solve",
                    "argument 'x' (initial guess) has NaN or Inf values");
  pkrylov_result res;
  pk_result_init(&res);
  R.res = &res;
  if (s->A->wet) { /* b is ignored at dry cells */
    int64_t nb;
    PK_CUDA_CHECK(ctx, kSolve, pk_cuda_zero_dry(R.stream, n, R.op64.wet, v[D_B]), "dry cells");
    const double *xs[1] = {v[D_B]};
    PK_CUDA_CHECK(ctx, kSolve, pk_cuda_dots(R.stream, n, 1, xs, xs, d->part, &nb), "norm");
    PK_CALL(sums_to_host(R, nb, 1, sums));
  }
  if (R.repro) { /* (b, b) exact (b is 0 at dry cells: the CPU's sum over the wet ones) */
    const double *xs[1] = {v[D_B]};
    PK_CALL(exact_sums_host(R, 1, xs, xs, sums));
  } else {
    PK_CALL(pk_allreduce_sum(ctx, sums, 1));
  }
  res.rhs_norm = sqrt(sums[0]);
  if (!isfinite(res.rhs_norm))
    return pk_error(ctx, PKRYLOV_ERR_NOT_FINITE, "pkrylov_solver_solve",
                    "argument 'b': its 2-norm overflows (scale the system)");
  PK_CALL(true_residual(R, v[D_R], &res.initial_residual));
  R.tol = s->rtol * res.rhs_norm;
  if (s->atol > R.tol) R.tol = s->atol;
  R.rr_on = s->type == PKRYLOV_SOLVER_PIPECG && s->replace_interval == PKRYLOV_REPLACE_AUTO;
  if (R.rr_on) { /* ||A|| from the host copy of the operator */
    PK_CALL(pk_rr_init(s, res.rhs_norm, d->hrre));
    PK_CALL(rr_put(R));
  }
  int rc;
  if (s->type == PKRYLOV_SOLVER_CG) {
    R.fuse_r = !R.distributed && (!R.repro || R.xrho) && !R.uop && !R.upc && pk_cuda_cg_precond_fuses_r(R.pcp);
    if (R.fuse_r && !R.fold) R.pdl = d->pdl; /* its unfolded loop's launches too (cg_enqueue) */
    l2_begin(R);
    rc = solve_cg(R);
    l2_end(R);
  } else {
    rc = solve_pipecg(R);
  }
  if (s->type == PKRYLOV_SOLVER_PIPECG)
    tl_report(ctx, R.dop ? (R.nccl ? (R.edge_comm ? "pipecg nccl edge-comm" : "pipecg nccl") : "pipecg host")
                         : "pipecg");
  if (rc) return rc;
  const pk_cuda_state *h = d->hst; /* the state the solve stopped in */
  const int replaced = pk_solver_min_result(&res, R.minres && h->min_it >= 0, h->min_rr, h->min_it, h->rr);
  if (replaced)
    PK_CUDA_CHECK(ctx, kSolve, cudaMemcpyAsync(v[D_X], d->xmin, bytes, cudaMemcpyDeviceToDevice, R.stream),
                  "x = x_min");
  /* the recurrence rule: the last recurrence residual; else the true residual of the returned x */
  if (pk_solver_recurrence(s) && res.reason != PKRYLOV_DIVERGED_NAN)
    res.final_residual = h->rnorm;
  else if (R.have_final && res.reason > 0 && !replaced)
    res.final_residual = R.final_res;
  else
    PK_CALL(true_residual(R, v[D_T], &res.final_residual));
  res.rel_residual = res.rhs_norm > 0 ? res.final_residual / res.rhs_norm : res.final_residual;
  res.converged = res.reason > 0;
  /* results out */
  PK_CUDA_CHECK(ctx, kSolve,
                cudaMemcpyAsync(x, v[D_X], bytes,
                                mem == PKRYLOV_MEM_HOST ? cudaMemcpyDeviceToHost : cudaMemcpyDeviceToDevice,
                                R.stream),
                "copying x");
  s->hist_len = 0;
  if (s->history_on) {
    const int32_t len = res.iterations + 1 <= s->hist_cap ? res.iterations + 1 : s->hist_cap;
    if (len > 0)
      PK_CUDA_CHECK(ctx, kSolve,
                    cudaMemcpyAsync(s->hist, d->hist, sizeof(double) * len, cudaMemcpyDeviceToHost, R.stream),
                    "history");
    s->hist_len = len;
  }
  PK_CUDA_CHECK(ctx, kSolve, cudaStreamSynchronize(R.stream), "synchronising");
  res.solve_time_s = pk_wtime() - t0;
  s->res = res;
  s->has_result = 1;
  return PKRYLOV_SUCCESS;
}

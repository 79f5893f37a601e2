/**
 * @file pk_cuda_solver.cu
 * @brief CG and pipelined CG on the GPU: the host drivers of the device-resident iteration.
 *
 * The iteration never waits for the host: alpha, beta, the convergence test and the breakdown checks live in
 * a device state (pk_cuda_state) that the scalar steps update (pk_cuda_kernels.cu: the scalar recurrences of
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
 * The logic mirrors pk_solve_cg / pk_solve_pipecg in solver.c step for step, so both backends stop at the
 * same iteration for the same reason.
 */
#include <cuda_runtime.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <algorithm>
#include <utility>

extern "C" {
#include "pk_impl.h"
}
#include "pk_cuda.h"

namespace {

enum { D_R, D_Z, D_P, D_Q, D_U, D_W, D_M, D_S, D_T, D_AT, D_B, D_X, D_NVEC };

/**
 * The folded launchers are used (fold = -1, the automatic choice) for grid operators up to kFoldMaxCells
 * unknowns and for CSR operators while the steps write at most kFoldMaxSlots partial-sum slots. Every block
 * of a folded kernel first adds all the producer's slots, a cost that grows with (number of blocks)^2: it
 * pays for small problems, which are latency-bound and save a kernel launch per scalar step, and not once
 * the grids have many blocks (the grid operators use one thread per column and level chunk, CSR one thread
 * per row, so CSR reaches that point at smaller sizes). Measured on an H200 (us per iteration,
 * one-block / folded with programmatic dependent launches): thin shell, column preconditioner, CG 32^3
 * 11.4 / 7.4, 64^3 18.1 / 15.2, 128^2 x 64 40.9 / 40.8, 256^2 x 128 272 / 278; pipelined CG 32^3 10.2 /
 * 7.9, 64^3 20.6 / 19.6; CSR 7-point Laplacian 64^3 (1024 slots: one thread per row), CG 17.6 / 36.1,
 * pipelined CG 19.2 / 29.0.
 */
constexpr int64_t kFoldMaxCells = (int64_t)1 << 20;
constexpr int64_t kFoldMaxSlots = 256;
/* grid operators also stop folding past kFoldMaxGridSlots slots (H100, barotropic 1024 x 1024 with the
   approximate inverse launched a thread per cell, 4096 slots: CG 244 us per iteration folded, the slots' sums
   dominating); in CG 2-D grid stencils launch at most PKC_GRID2D_BLOCKS (1024) blocks, grid-stride (pk_cuda_op
   gcap), and 3-D grids up to kFoldMaxCells fill the GPU with about PKC_FILL_BLOCKS (512) to 1024 blocks: both
   fold */
constexpr int64_t kFoldMaxGridSlots = 1024;

/** Values per partial-sum slot the buffers hold: pipelined CG's update writes PK_RR_NV (its three dots and
 *  the automatic residual replacement's norms, pk_rr.h), every other producer fewer. Also the size of the
 *  sums (dsum, hsum) and of a rank's row of the gathered sums. */
constexpr int kPartNV = 8;
static_assert(PK_RR_NV <= kPartNV && PKC_XACC_MAXV <= kPartNV, "partial-sum slots too small");

/** Device work area of a solver. */
struct SolverDev {
  double *work;           /* D_NVEC vectors */
  double *v[D_NVEC];
  double *part;           /* partial sums: 2 buffers of kPartNV * nslots (buffer 0: the host's) */
  int64_t nslots;
  double *hist;           /* maxit + 1 */
  int32_t hist_cap;
  pk_cuda_state *st;      /* device: 3 states; st[0] is the current one between blocks */
  pk_cuda_state *hst;     /* pinned host copy of st[0] */
  double *dsum, *hsum;    /* kPartNV sums: device, pinned host */
  cudaGraphExec_t graph;  /* one block of graph_k iterations */
  int graph_k, graph_type, graph_mixed, graph_fold, graph_pdl, graph_pnone, graph_edge;
  const double *graph_w;  /* v[D_W] when the graph was captured (the pointers its kernels hold) */
  cudaGraphExec_t graph_alt; /* the same block captured with v[D_W] = graph_alt_w (the other buffer parity
                                of the pipelined CG update without a preconditioner), or NULL */
  const double *graph_alt_w;
  const double *graph_hist; /* the history the graph records into (its kernels hold the pointer) */
  double *ax;             /* user operator: A x from the caller's routine (n), allocated on first use */
  double *xmin;           /* minimum-residual iterate (n), allocated on the first solve that tracks it */
  int graph_minres;       /* the graph's blocks copy the improved iterate */
  int graph_rr;           /* the graph's updates sum the automatic residual replacement's norms */
  int fold_mode;          /* -1 auto, 0 off, 1 on (solver option cuda.fold, pk_cuda_solver_set_launch) */
  int pdl;                /* 1: programmatic dependent launches on the folded path (option cuda.pdl) */
  int pipe_none;          /* 1: pipelined CG without a preconditioner uses the specialised update where it
                             applies (option cuda.pipe_none, pk_cuda_solver_set_pipe_none) */
  int last_pnone;         /* the last solve ran the specialised update (pk_cuda_solver_used_pipe_none) */
  cudaEvent_t ev_sums;    /* distributed: the local sums are on the host (created on first use) */
  cudaEvent_t ev_scal, ev_edge; /* distributed pipelined CG, edge columns on the communication stream: the
                                   scalar step done (context's stream), the edge update done (comm.) */
  double *gath, *hgath;   /* distributed: the ranks' sums, rank after rank (device; pinned host), kPartNV *
                             ranks */
  int gath_ranks;         /* ranks gath was sized for */
  void *graph_nccl;       /* the NCCL communicator the graph's exchanges use (NULL: not distributed) */
  int dist_graph_failed;  /* a capture of a distributed block failed: run those blocks directly */
  void *nccl_warm;        /* the NCCL communicator an allgather has run on (outside a graph capture) */
  /* reproducible mode (allocated on its first solve): the exact sums of pk_cuda_xacc.cu */
  int64_t *xblk;          /* the blocks' accumulators (xblk_len int64) */
  int64_t xblk_len;
  int64_t *xacc, *hxacc;  /* kPartNV accumulators: device; pinned host (MPI) */
  double *xs;             /* kPartNV rounded exact sums (device): the scalar steps' one partial slot */
  int graph_repro;        /* the graph's blocks use the exact sums */
  pk_rr_est *rre, *hrre;  /* pipelined CG's automatic residual replacement: its estimate (device, what
                             pk_cuda_state.repl points to; pinned host image), allocated with the solver */
};

/** Partial-sum buffer i (0 or 1) of d. */
double *part_buf(const SolverDev *d, int i) { return d->part + (size_t)i * kPartNV * (size_t)d->nslots; }

cudaStream_t stream_of(pkrylov_context ctx) { return (cudaStream_t)pk_cuda_context_stream(ctx); }

/* ---- host helpers ------------------------------------------------------------------------------------ */

/* the public function the drivers serve, for pk_cuda_error / PK_CUDA_CHECK (pk_cuda.h) */
constexpr const char *kSolve = "pkrylov_solver_solve";

/** One run of a solve: what the host keeps between blocks. */
struct Run {
  pkrylov_solver s;
  SolverDev *d;
  pkrylov_context ctx;
  cudaStream_t stream;
  pk_cuda_op op;         /* the operator the iteration applies (fp32 coefficients at mixed level 2) */
  pk_cuda_op op64;       /* fp64: true residuals, replacement residuals, confirmation */
  pk_cuda_pc pc;
  const pk_cuda_pc *pcp; /* always set: a NONE view without a preconditioner */
  int64_t n;
  int k;                 /* iterations per block: the sync interval, 1 with a monitor or stagnation window */
  int fold, pdl;         /* folded launchers; programmatic dependent launches (with fold only) */
  pkrylov_operator uop;  /* user operator (callback) or halo-exchange stencil, else NULL: A x by its routine
                            (pk_cuda_halo_apply for the halo stencil) into d->ax = op.pre */
  pkrylov_precond upc;   /* user preconditioner (callback), else NULL (pc is then a NONE view) */
  double *hist;          /* device history, NULL when nothing reads it (history off, no monitor / window) */
  double tol, best;
  int32_t stalled, confirm_failures, restarts, have_final, hist_seen;
  double final_res;
  pkrylov_result *res;
  /* MPI (several ranks): the scalar steps read global sums (global_part); a distributed grid operator
     (A->dist) gets its halo exchanged before every launch that applies it, and the iteration launches it in
     two halves (op_in: the columns off the tile edges, while the halo travels; op_edge: the edge columns) */
  int distributed;
  pkrylov_operator dop;
  pk_cuda_op op_in, op_edge;
  int sums_done;         /* instrumented mode: sums_begin did the whole reduction */
  int64_t nb_update;     /* pipelined CG: slots the last update wrote (local sums) */
  void *nccl;            /* NCCL communicator (distributed grid operator, pk_mpi_nccl), NULL: host-staged */
  int repro;             /* reproducible mode: every global sum the iteration reads is an exact one */
  int edge_comm;         /* NCCL path, pipelined CG: the edge-column update on the communication stream, after
                            the halos and the scalar step, concurrent with the interior update (default;
                            option dist.edge_comm=0: on the context's stream after it) */
  /* pipelined CG without a preconditioner on the unfolded single-GPU path (solve_pipecg sets it): the
     update pk_cuda_pipecg_none_step, no m = w copy; u (= r) and q (= s) are not updated and stay out of
     every computation until pipecg_replace recomputes them; w alternates between the arrays v[D_W] and
     v[D_M] (w_old in one, w_new into the other), and after a block of odd length run_block swaps the two
     host pointers, so v[D_W] holds the current w between blocks */
  int pnone;
  int minres;            /* the minimum-residual iterate (s->min_res): copy kernels after the scalar steps */
  int rr_on;             /* pipelined CG with the automatic residual replacement (PKRYLOV_REPLACE_AUTO) */
};

int state_to_host(Run &R);

/** Values per partial-sum slot of pipelined CG's update (and of its gathered and exact sums): the three dots,
 *  and with the automatic residual replacement its four norms. */
int pipe_nv(const Run &R) { return R.rr_on ? PK_RR_NV : PK_RR_NV_BASE; }

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
    PK_CUDA_CHECK(ctx, kSolve, pk_cuda_cg_precond_after(R.stream, R.pcp, d->st, v[D_R], v[D_Z], d->part, nb),
                  "CG preconditioner loop");
    return PKRYLOV_SUCCESS;
  }
  PK_CUDA_CHECK(
      ctx, kSolve,
      pk_cuda_cg_precond_step(R.stream, R.pcp, d->st, alpha_zero, R.n, v[D_R], v[D_Q], v[D_Z], d->part, nb),
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
int cg_operator(Run &R, int init, int64_t *nb) {
  pkrylov_context ctx = R.ctx;
  SolverDev *d = R.d;
  double **v = d->v;
  if (R.uop) {
    int running;
    PK_CALL(still_running(R, &running));
    if (running) PK_CALL(user_ax(R, v[D_Z]));
  }
  PK_CALL(halo(R, v[D_Z]));
  PK_CUDA_CHECK(
      ctx, kSolve,
      pk_cuda_cg_operator_step(R.stream, &R.op, d->st, init, v[D_X], v[D_P], v[D_Z], v[D_Q], d->part, nb),
      "CG operator loop");
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
 * launchers; graphs on one GPU only. */

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

/** Converged reason of a CONVERGED device state, as pk_converged in solver.c (the solver's stop rule). */
int converged_reason(const Run &R) {
  const int r = pk_solver_converged_rr(R.s, R.tol, R.d->hst->rr);
  return r ? r : PKRYLOV_CONVERGED_RTOL;
}

/** Check the true residual of x; *accept / *stagnated as pk_confirm in solver.c (the recurrence stop rule
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

/**
 * `count` CG iterations on a distributed grid operator (R.dop). Per iteration: the preconditioner loop;
 * its sums gathered over the ranks while z's tile edges are packed and sent (NCCL: both on the
 * communication stream, no host synchronisation; host: through pinned memory and MPI); the
 * rho step; the operator loop on the columns off the tile edges, enqueued before the halo exchange of z so
 * that it runs while the halos travel; the exchange; the operator loop on the edge columns (partial slots
 * after the interior ones); the sigma step on global sums. The same arithmetic per cell as cg_enqueue.
 */
int dist_cg_enqueue(Run &R, int count) {
  pkrylov_context ctx = R.ctx;
  SolverDev *d = R.d;
  double **v = d->v;
  for (int i = 0; i < count; i++) {
    int64_t nbp = 0, nb1 = 0, nb2 = 0, gnb;
    const double *gp;
    PK_CALL(cg_precond(R, 0, &nbp));
    if (R.repro) {
      PK_CALL(exact_cg_rho(R, &gp, &gnb));
      PK_CALL(pk_cuda_dist_halo_begin(R.dop, v[D_Z], R.nccl));
    } else {
      PK_CALL(sums_begin(R, d->part, nbp, 2));
      PK_CALL(pk_cuda_dist_halo_begin(R.dop, v[D_Z], R.nccl));
      PK_CALL(sums_end(R, 2, &gp, &gnb));
    }
    PK_CUDA_CHECK(ctx, kSolve, pk_cuda_cg_scalar_rho(R.stream, d->st, d->st, gp, gnb, R.hist, 0),
                  "CG scalar step");
    PK_CUDA_CHECK(
        ctx, kSolve,
        pk_cuda_cg_operator_step(R.stream, &R.op_in, d->st, 0, v[D_X], v[D_P], v[D_Z], v[D_Q], d->part, &nb1),
        "CG operator loop");
    PK_CALL(pk_cuda_dist_halo_end(R.dop, R.nccl));
    PK_CUDA_CHECK(ctx, kSolve,
                  pk_cuda_cg_operator_step(R.stream, &R.op_edge, d->st, 0, v[D_X], v[D_P], v[D_Z], v[D_Q],
                                           d->part + nb1, &nb2),
                  "CG operator loop (tile edges)");
    PK_CALL(keep_min(R, R.stream, d->st)); /* x is the iterate of the rho step */
    if (nb1 + nb2 > d->nslots) return pk_error(ctx, PKRYLOV_ERR_INTERNAL, __func__, "more slots than sized");
    if (R.repro) {
      PK_CALL(exact_cg_sigma(R, &gp, &gnb));
    } else {
      PK_CALL(sums_begin(R, d->part, nb1 + nb2, 1));
      PK_CALL(sums_end(R, 1, &gp, &gnb));
    }
    PK_CUDA_CHECK(ctx, kSolve, pk_cuda_cg_scalar_sigma(R.stream, d->st, d->st, gp, gnb), "CG scalar step");
    /* host path: stopped at the rho step or before (the state copied with the sums): the rest does nothing.
       NCCL: the host does not see the state inside a block; the kernels of a stopped solve do nothing. */
    if (!R.nccl && d->hst->status != PK_ST_RUNNING) break;
  }
  return PKRYLOV_SUCCESS;
}

/**
 * `count` pipelined CG iterations on a distributed grid operator (R.dop). Per iteration: the last update's
 * (or replacement's) local sums gathered over the ranks (NCCL: the sum of the slots and ncclAllGather on the
 * communication stream; host: copied to the host, MPI_Allgather) while the GPU applies the preconditioner
 * m = M^-1 w (the overlap of pipelined CG); m's tile edges packed and sent (NCCL: on the communication
 * stream, so the context's stream goes straight on), the scalar step on the gathered sums, the update on
 * the columns off the tile edges while m's halo travels, the update on the edge columns. NCCL path, by
 * default (R.edge_comm), the edge update runs on the communication stream behind the halos and the scalar
 * step, beside the interior update, and the next iteration waits for it: on the context's stream only the
 * preconditioner, the scalar step and the interior update remain, as on one GPU. The same arithmetic per
 * cell as pipecg_enqueue; on the NCCL path no host synchronisation (blocks run as CUDA graphs).
 */
int dist_pipecg_enqueue(Run &R, int count) {
  pkrylov_context ctx = R.ctx;
  SolverDev *d = R.d;
  double **v = d->v;
  cudaStream_t comm = (cudaStream_t)pk_cuda_dist_comm_stream(R.dop); /* (the timeline's marks) */
  for (int i = 0; i < count; i++) {
    const double *gp = d->part;
    int64_t gnb = d->nslots, nb1 = 0, nb2 = 0;
    /* all nslots slots: the update's and zeros beyond (pipecg_replace), the same calls every iteration */
    tl_mark(R.stream, 0);
    if (R.repro) { /* the exact sums of r, u, w first (not overlapped) */
      PK_CALL(exact_pipecg(R, &gp, &gnb));
      PK_CALL(apply_pc(R, d->st, v[D_W], v[D_M]));
      PK_CALL(pk_cuda_dist_halo_begin(R.dop, v[D_M], R.nccl));
    } else {
      PK_CALL(sums_begin(R, d->part, d->nslots, pipe_nv(R)));
      tl_mark(R.stream, 1);
      if (R.nccl) tl_mark(comm, 2);
      PK_CALL(apply_pc(R, d->st, v[D_W], v[D_M]));
      tl_mark(R.stream, 3);
      PK_CALL(pk_cuda_dist_halo_begin(R.dop, v[D_M], R.nccl));
      tl_mark(R.stream, 4);
      if (R.nccl) tl_mark(comm, 5);
      PK_CALL(sums_end(R, pipe_nv(R), &gp, &gnb));
    }
    PK_CUDA_CHECK(ctx, kSolve, pk_cuda_pipecg_scalar(R.stream, d->st, d->st, gp, gnb, R.hist, R.rr_on),
                  "pipelined CG scalar step");
    PK_CALL(keep_min(R, R.stream, d->st));
    tl_mark(R.stream, 6);
    void *ecomm = NULL; /* the edge update's stream when it runs on the communication stream */
    if (R.edge_comm) {
      PK_CALL(pk_cuda_dist_halo_end_comm(R.dop, &ecomm));
      if (ecomm) {
        PK_CUDA_CHECK(ctx, kSolve, cudaEventRecord(d->ev_scal, R.stream), "event");
        PK_CUDA_CHECK(ctx, kSolve, cudaStreamWaitEvent((cudaStream_t)ecomm, d->ev_scal, 0), "event");
      }
    }
    PK_CUDA_CHECK(ctx, kSolve,
                  pk_cuda_pipecg_step(R.stream, &R.op_in, d->st, v[D_M], v[D_Z], v[D_Q], v[D_S], v[D_P],
                                      v[D_X], v[D_R], v[D_U], v[D_W], d->part, &nb1, R.rr_on),
                  "pipelined CG update");
    tl_mark(R.stream, 7);
    if (!R.edge_comm) PK_CALL(pk_cuda_dist_halo_end(R.dop, R.nccl));
    PK_CUDA_CHECK(ctx, kSolve,
                  pk_cuda_pipecg_step(ecomm ? ecomm : R.stream, &R.op_edge, d->st, v[D_M], v[D_Z], v[D_Q],
                                      v[D_S], v[D_P], v[D_X], v[D_R], v[D_U], v[D_W],
                                      d->part + pipe_nv(R) * nb1, &nb2, R.rr_on),
                  "pipelined CG update (tile edges)");
    if (ecomm) { /* what follows on the context's stream (the next sums, m = M^-1 w) waits for the edges */
      PK_CUDA_CHECK(ctx, kSolve, cudaEventRecord(d->ev_edge, (cudaStream_t)ecomm), "event");
      PK_CUDA_CHECK(ctx, kSolve, cudaStreamWaitEvent(R.stream, d->ev_edge, 0), "event");
    }
    tl_mark(R.stream, 8);
    if (nb1 + nb2 > d->nslots) return pk_error(ctx, PKRYLOV_ERR_INTERNAL, __func__, "more slots than sized");
    R.nb_update = nb1 + nb2;
    if (!R.nccl && d->hst->status != PK_ST_RUNNING) break; /* stopped before this iteration */
  }
  return PKRYLOV_SUCCESS;
}

/**
 * Enqueue `count` CG iterations. Unfolded: 4 kernels each (the two loops and their one-block scalar steps),
 * on st[0] and part buffer 0. Folded (R.fold): the preconditioner loop, then per iteration the operator
 * loop with the rho step folded in and (except after the last) the preconditioner loop with the sigma step
 * folded in, then a one-block sigma step: 2 kernels per iteration and 2 per block. The state alternates
 * between st[0] and st[1] and ends in st[0]; the preconditioner loop's partial sums go to part buffer 1, the
 * operator loop's to buffer 0. A block ends at the same point as an unfolded one (after the sigma step).
 */
int cg_enqueue(Run &R, int count) {
  pkrylov_context ctx = R.ctx;
  SolverDev *d = R.d;
  double **v = d->v;
  int64_t nbp = 0, nbo = 0;
  if (R.dop && !R.upc) return dist_cg_enqueue(R, count); /* a user preconditioner: below */
  if (!R.fold) {
    for (int i = 0; i < count; i++) {
      const double *pp = d->part;
      PK_CALL(cg_precond(R, 0, &nbp));
      PK_CALL(R.repro ? exact_cg_rho(R, &pp, &nbp) : global_part(R, &pp, &nbp, 2));
      PK_CUDA_CHECK(ctx, kSolve, pk_cuda_cg_scalar_rho(R.stream, d->st, d->st, pp, nbp, R.hist, 0),
                    "CG scalar step");
      PK_CALL(cg_operator(R, 0, &nbo));
      PK_CALL(keep_min(R, R.stream, d->st)); /* x is the iterate of the rho step */
      pp = d->part;
      PK_CALL(R.repro ? exact_cg_sigma(R, &pp, &nbo) : global_part(R, &pp, &nbo, 1));
      PK_CUDA_CHECK(ctx, kSolve, pk_cuda_cg_scalar_sigma(R.stream, d->st, d->st, pp, nbo), "CG scalar step");
      if (R.distributed && !R.nccl && d->hst->status != PK_ST_RUNNING) break; /* the rest would do nothing */
    }
    return PKRYLOV_SUCCESS;
  }
  pk_cuda_state *A = d->st, *B = d->st + 1;
  double *ppc = part_buf(d, 1), *pop = part_buf(d, 0);
  PK_CUDA_CHECK(ctx, kSolve,
                pk_cuda_cg_precond_step(R.stream, R.pcp, A, 0, R.n, v[D_R], v[D_Q], v[D_Z], ppc, &nbp),
                "CG preconditioner loop");
  for (int i = 0; i < count; i++) {
    if (i > 0) {
      const pk_cuda_fold f = {B, A, pop, nbo, NULL, R.pdl};
      PK_CUDA_CHECK(ctx, kSolve,
                    pk_cuda_cg_precond_step_fold(R.stream, R.pcp, &f, R.n, v[D_R], v[D_Q], v[D_Z], ppc, &nbp),
                    "CG preconditioner loop (folded)");
    }
    const pk_cuda_fold g = {A, B, ppc, nbp, R.hist, R.pdl};
    PK_CUDA_CHECK(
        ctx, kSolve,
        pk_cuda_cg_operator_step_fold(R.stream, &R.op, &g, v[D_X], v[D_P], v[D_Z], v[D_Q], pop, &nbo),
        "CG operator loop (folded)");
    PK_CALL(keep_min(R, R.stream, B)); /* the folded rho step's state */
  }
  PK_CUDA_CHECK(ctx, kSolve, pk_cuda_cg_scalar_sigma(R.stream, B, A, pop, nbo), "CG scalar step");
  return PKRYLOV_SUCCESS;
}

/**
 * Enqueue `count` pipelined CG iterations. Unfolded (or count == 1): m = M^-1 w, the one-block scalar step
 * and the update, 3 kernels each, on st[0] (the scalar step reads all nslots slots of part buffer 0; those
 * beyond the update's own are zero since pipecg_replace). Folded: the scalar step folded into m = M^-1 w,
 * then the update, 2 kernels each; the state moves to another of st[0..2] every iteration (the order
 * 0 1 0 1 ... 0 for an even count, 0 2 1 0 1 ... 0 for an odd one), so it ends in st[0]; the partial sums
 * stay in part buffer 0 (the kernel of the scalar step reads them before the update writes them).
 */
int pipecg_enqueue(Run &R, int count) {
  pkrylov_context ctx = R.ctx;
  SolverDev *d = R.d;
  double **v = d->v;
  int64_t nb = 0;
  if (R.dop && !R.upc) return dist_pipecg_enqueue(R, count); /* a user preconditioner: below */
  if (R.pnone) { /* M = I: the specialised update, w_old / w_new alternating (run_block swaps after an odd count) */
    for (int i = 0; i < count; i++) {
      const double *wo = v[i % 2 ? D_M : D_W];
      double *wn = v[i % 2 ? D_W : D_M];
      PK_CUDA_CHECK(ctx, kSolve,
                    pk_cuda_pipecg_scalar(R.stream, d->st, d->st, d->part, d->nslots, R.hist, R.rr_on),
                    "pipelined CG scalar step");
      PK_CALL(keep_min(R, R.stream, d->st));
      PK_CUDA_CHECK(ctx, kSolve,
                    pk_cuda_pipecg_none_step(R.stream, &R.op, d->st, wo, v[D_Z], v[D_S], v[D_P], v[D_X],
                                             v[D_R], wn, d->part, &nb, R.rr_on),
                    "pipelined CG update (no preconditioner)");
      if (nb > d->nslots)
        return pk_error(ctx, PKRYLOV_ERR_INTERNAL, __func__, "more partial slots than sized");
      R.nb_update = nb;
    }
    return PKRYLOV_SUCCESS;
  }
  if (!R.fold || count == 1) {
    for (int i = 0; i < count; i++) {
      tl_mark(R.stream, 0);
      PK_CALL(apply_pc(R, d->st, v[D_W], v[D_M]));
      tl_mark(R.stream, 3);
      const double *gp = d->part;
      int64_t gnb = d->nslots;
      if (R.repro) {
        PK_CALL(exact_pipecg(R, &gp, &gnb));
      } else if (R.distributed) {
        gnb = R.nb_update;
        PK_CALL(global_part(R, &gp, &gnb, pipe_nv(R)));
      }
      PK_CUDA_CHECK(ctx, kSolve, pk_cuda_pipecg_scalar(R.stream, d->st, d->st, gp, gnb, R.hist, R.rr_on),
                    "pipelined CG scalar step");
      PK_CALL(keep_min(R, R.stream, d->st));
      tl_mark(R.stream, 6);
      if (R.uop) {
        int running;
        PK_CALL(still_running(R, &running));
        if (running) PK_CALL(user_ax(R, v[D_M]));
      }
      PK_CALL(halo(R, v[D_M]));
      PK_CUDA_CHECK(ctx, kSolve,
                    pk_cuda_pipecg_step(R.stream, &R.op, d->st, v[D_M], v[D_Z], v[D_Q], v[D_S], v[D_P],
                                        v[D_X], v[D_R], v[D_U], v[D_W], d->part, &nb, R.rr_on),
                    "pipelined CG update");
      tl_mark(R.stream, 7);
      if (nb > d->nslots)
        return pk_error(ctx, PKRYLOV_ERR_INTERNAL, __func__, "more partial slots than sized");
      R.nb_update = nb;
    }
    return PKRYLOV_SUCCESS;
  }
  const int64_t nbu = pk_cuda_op_partials(&R.op); /* slots of the update (after a replacement: 1, rest 0) */
  if (nbu > d->nslots) return pk_error(ctx, PKRYLOV_ERR_INTERNAL, __func__, "more partial slots than sized");
  int cur = 0;
  for (int i = 0; i < count; i++) {
    int next = cur == 0 ? 1 : 0;
    if (count % 2 == 1 && i < 2) next = i == 0 ? 2 : 1; /* odd count: 0 -> 2 -> 1, then alternate to 0 */
    const pk_cuda_fold f = {d->st + cur, d->st + next, d->part, nbu, R.hist, R.pdl, R.rr_on};
    PK_CUDA_CHECK(ctx, kSolve, pk_cuda_pc_apply_fold(R.stream, R.pcp, &f, v[D_W], v[D_M]),
                  "m = M^-1 w (folded)");
    PK_CALL(keep_min(R, R.stream, d->st + next));
    PK_CUDA_CHECK(ctx, kSolve,
                  pk_cuda_pipecg_step_pdl(R.stream, &R.op, d->st + next, v[D_M], v[D_Z], v[D_Q], v[D_S],
                                          v[D_P], v[D_X], v[D_R], v[D_U], v[D_W], d->part, &nb, R.rr_on,
                                          R.pdl),
                  "pipelined CG update");
    cur = next;
  }
  if (cur != 0) return pk_error(ctx, PKRYLOV_ERR_INTERNAL, __func__, "state buffer order");
  return PKRYLOV_SUCCESS;
}

/**
 * Capture `k` iterations of `type` into d->graph. Returns the CUDA status of the capture; *rc gets the
 * enqueue's pkrylov status.
 */
cudaError_t capture_graph(Run &R, int k, int type, int *rc) {
  SolverDev *d = R.d;
  cudaGraph_t g = NULL;
  cudaError_t e = cudaStreamBeginCapture(R.stream, cudaStreamCaptureModeThreadLocal);
  if (e != cudaSuccess) return e;
  *rc = type == PKRYLOV_SOLVER_CG ? cg_enqueue(R, k) : pipecg_enqueue(R, k);
  e = cudaStreamEndCapture(R.stream, &g);
  if (*rc || e != cudaSuccess) {
    if (g) cudaGraphDestroy(g);
    return e != cudaSuccess ? e : cudaErrorUnknown;
  }
  e = cudaGraphInstantiate(&d->graph, g, 0);
  cudaGraphDestroy(g);
  if (e != cudaSuccess) d->graph = NULL;
  return e;
}

/** Run `count` iterations: through the solver's graph when count is the graph's length, else directly. */
int run_block(Run &R, int count, int type) {
  pkrylov_context ctx = R.ctx;
  SolverDev *d = R.d;
  const int k = R.k;
  /* distributed: a graph only on the NCCL path (the host-staged one calls MPI between the kernels), and not
     in the instrumented mode (it synchronises around every exchange) */
  const int dist_graph =
      R.nccl && R.dop && !R.upc && !d->dist_graph_failed && !pk_cuda_dist_instrumented(ctx) && !R.repro;
  if (count == k && k > 1 && (!R.distributed || dist_graph) && !tl_on()) {
    const double *w = d->v[D_W];
    if (!d->graph || d->graph_k != k || d->graph_type != type || d->graph_mixed != R.s->mixed ||
        d->graph_fold != R.fold || d->graph_pdl != R.pdl || d->graph_hist != R.hist ||
        d->graph_nccl != R.nccl || d->graph_repro != R.repro || d->graph_pnone != R.pnone ||
        d->graph_edge != R.edge_comm || d->graph_minres != R.minres || d->graph_rr != R.rr_on) {
      if (d->graph) cudaGraphExecDestroy(d->graph), d->graph = NULL;
      if (d->graph_alt) cudaGraphExecDestroy(d->graph_alt), d->graph_alt = NULL;
    } else if (d->graph_w != w) { /* the other parity of v[D_W] / v[D_M]: its graph, kept or captured */
      if (d->graph_alt && d->graph_alt_w == w) {
        std::swap(d->graph, d->graph_alt);
        std::swap(d->graph_w, d->graph_alt_w);
      } else {
        if (d->graph_alt) cudaGraphExecDestroy(d->graph_alt);
        d->graph_alt = d->graph, d->graph_alt_w = d->graph_w;
        d->graph = NULL;
      }
    }
    if (!d->graph) {
      int rc = 0;
      cudaError_t e = capture_graph(R, k, type, &rc);
      if (e != cudaSuccess && R.distributed && !rc) { /* NCCL not capturable here: blocks run directly */
        cudaGetLastError();
        d->dist_graph_failed = 1;
        PK_CALL(type == PKRYLOV_SOLVER_CG ? cg_enqueue(R, count) : pipecg_enqueue(R, count));
        return state_to_host(R);
      }
      if (e != cudaSuccess && R.pdl) { /* programmatic launches not capturable here: capture without them */
        cudaGetLastError();
        d->pdl = R.pdl = 0;
        rc = 0;
        e = capture_graph(R, k, type, &rc);
      }
      if (rc) return rc;
      PK_CUDA_CHECK(ctx, kSolve, e, "graph capture");
      d->graph_k = k, d->graph_type = type, d->graph_mixed = R.s->mixed;
      d->graph_fold = R.fold, d->graph_pdl = R.pdl, d->graph_hist = R.hist, d->graph_nccl = R.nccl;
      d->graph_repro = R.repro, d->graph_pnone = R.pnone, d->graph_edge = R.edge_comm;
      d->graph_minres = R.minres, d->graph_rr = R.rr_on;
      d->graph_w = w;
    }
    PK_CUDA_CHECK(ctx, kSolve, cudaGraphLaunch(d->graph, R.stream), "graph launch");
  } else {
    PK_CALL(type == PKRYLOV_SOLVER_CG ? cg_enqueue(R, count) : pipecg_enqueue(R, count));
  }
  /* the specialised pipelined CG update left the current w in v[D_M] after an odd count (when the solve
     stopped inside the block w may be the other one: nothing reads it then, a restart recomputes it) */
  if (type == PKRYLOV_SOLVER_PIPECG && R.pnone && count % 2) std::swap(d->v[D_W], d->v[D_M]);
  return state_to_host(R);
}

/** Iterations in the next block: up to sync_interval, ending at the next multiple of `every` (if > 0). */
int block_length(const Run &R, int32_t it, int every) {
  int k = R.k;
  if (every > 0) {
    const int to_next = every - (int)(it % every);
    if (to_next < k) k = to_next;
  }
  return k;
}

/** Fresh device state for a (re)start. */
void reset_state(Run &R, int32_t it, int first) {
  pk_cuda_state *h = R.d->hst;
  memset(h, 0, sizeof *h);
  h->tol = R.tol;
  h->maxit = R.s->maxit;
  h->it = it;
  h->first = first;
  h->status = PK_ST_RUNNING;
  h->breakdown_it = -1;
  h->recur = pk_solver_recurrence(R.s);
  h->min_on = R.minres;
  h->min_it = -1;
  h->repl = R.rr_on ? R.d->rre : NULL;
}

/** The device estimate of the automatic residual replacement from its host image d->hrre (enqueued). */
int rr_put(Run &R) {
  return copy_small(R, R.d->rre, R.d->hrre, sizeof(pk_rr_est), cudaMemcpyHostToDevice, 0, "estimate");
}

/** The estimate starts again from the next sums (a (re)start or a replacement), after a replacement the
 *  rule decided with the gap it closed (gap >= 0; else -1): the device's copied back, changed, copied. */
int rr_fresh(Run &R, double gap) {
  if (!R.rr_on) return PKRYLOV_SUCCESS;
  PK_CALL(copy_small(R, R.d->hrre, R.d->rre, sizeof(pk_rr_est), cudaMemcpyDeviceToHost, 1, "estimate"));
  R.d->hrre->fresh = 1;
  R.d->hrre->gap = gap;
  return rr_put(R);
}

/** Reason and breakdown iteration from a stopped device state (CONVERGED is handled by the caller). */
void finish_from_state(Run &R) {
  const pk_cuda_state *h = R.d->hst;
  R.res->iterations = h->it;
  switch (h->status) {
  case PK_ST_MAXIT: R.res->reason = PKRYLOV_DIVERGED_MAX_ITERATIONS; break;
  case PK_ST_BREAKDOWN_MATRIX:
    R.res->reason = PKRYLOV_DIVERGED_BREAKDOWN_INDEFINITE_MATRIX;
    R.res->breakdown_iteration = h->breakdown_it;
    break;
  case PK_ST_BREAKDOWN_PRECOND:
    R.res->reason = PKRYLOV_DIVERGED_BREAKDOWN_INDEFINITE_PRECOND;
    R.res->breakdown_iteration = h->breakdown_it;
    break;
  default:
    R.res->reason = PKRYLOV_DIVERGED_NAN;
    R.res->breakdown_iteration = h->breakdown_it;
  }
}

/** CG on the device; mirrors pk_solve_cg. */
int solve_cg(Run &R) {
  pkrylov_context ctx = R.ctx;
  pkrylov_solver s = R.s;
  double **v = R.d->v;
  const size_t bytes = sizeof(double) * (size_t)R.n;
  int32_t it = 0;
restart:
  reset_state(R, it, 0);
  PK_CALL(state_to_device(R));
  {
    int64_t nb;
    PK_CALL(user_ax(R, v[D_X]));
    PK_CALL(halo(R, v[D_X]));
    PK_CUDA_CHECK(ctx, kSolve, pk_cuda_residual(R.stream, &R.op64, v[D_B], v[D_X], v[D_R], R.d->part, &nb),
                  "residual");
    PK_CUDA_CHECK(ctx, kSolve, cudaMemsetAsync(v[D_Q], 0, bytes, R.stream), "memset");
    PK_CALL(cg_precond(R, 1, &nb));
    const double *pp = R.d->part;
    PK_CALL(R.repro ? exact_cg_rho(R, &pp, &nb) : global_part(R, &pp, &nb, 2));
    PK_CUDA_CHECK(ctx, kSolve, pk_cuda_cg_scalar_rho(R.stream, R.d->st, R.d->st, pp, nb, R.hist, 1),
                  "CG scalar step");
    PK_CUDA_CHECK(ctx, kSolve, cudaMemsetAsync(v[D_P], 0, bytes, R.stream), "memset");
    PK_CALL(cg_operator(R, 1, &nb));
    PK_CALL(keep_min(R, R.stream, R.d->st)); /* a (re)start keeps its x */
    pp = R.d->part;
    PK_CALL(R.repro ? exact_cg_sigma(R, &pp, &nb) : global_part(R, &pp, &nb, 1));
    PK_CUDA_CHECK(ctx, kSolve, pk_cuda_cg_scalar_sigma(R.stream, R.d->st, R.d->st, pp, nb), "CG scalar step");
    PK_CALL(state_to_host(R));
  }
  if (it == 0) {
    int stop = host_record(R, 0);
    if (R.d->hst->status == PK_ST_CONVERGED) {
      R.res->reason = converged_reason(R);
      return PKRYLOV_SUCCESS;
    }
    if (stop) return R.res->reason = stop, PKRYLOV_SUCCESS;
  }
  if (R.d->hst->status != PK_ST_RUNNING) {
    finish_from_state(R);
    return PKRYLOV_SUCCESS;
  }
  for (;;) {
    const int every = s->true_res_interval;
    PK_CALL(run_block(R, block_length(R, R.d->hst->it, every), PKRYLOV_SOLVER_CG));
    pk_cuda_state *h = R.d->hst;
    it = h->it;
    const int stop = host_record(R, it); /* the CG scalar kernel records iteration it as it counts it */
    const int st = h->status;
    if (st == PK_ST_RUNNING && !stop) {
      if (every > 0 && it % every == 0) { /* x and r are at iteration it: replace r by b - A x */
        double tr;
        PK_CALL(true_residual(R, v[D_R], &tr));
        R.res->true_residual_checks++;
      }
      continue;
    }
    R.res->iterations = it;
    /* the lagging update x_it = x + alpha p, except after a breakdown found in the operator loop (x is
       already x_it there) or NaN */
    if (st == PK_ST_RUNNING || st == PK_ST_CONVERGED || st == PK_ST_MAXIT || st == PK_ST_BREAKDOWN_PRECOND) {
      if (st == PK_ST_RUNNING) { /* stopped by the host between loops: x is already x_it */
        R.res->reason = stop;
        return PKRYLOV_SUCCESS;
      }
      PK_CUDA_CHECK(ctx, kSolve, pk_cuda_axpy_dev(R.stream, R.n, &R.d->st->alpha, v[D_P], v[D_X]),
                    "x += alpha p");
    }
    if (st == PK_ST_CONVERGED) {
      int accept, stagnated;
      PK_CALL(confirm(R, &accept, &stagnated));
      if (stagnated) return R.res->reason = PKRYLOV_DIVERGED_STAGNATION, PKRYLOV_SUCCESS;
      if (!accept && it < s->maxit) goto restart;
      if (accept) return R.res->reason = converged_reason(R), PKRYLOV_SUCCESS;
      R.res->reason = stop ? stop : PKRYLOV_DIVERGED_MAX_ITERATIONS;
      return PKRYLOV_SUCCESS;
    }
    if (stop && st == PK_ST_MAXIT) return R.res->reason = stop, PKRYLOV_SUCCESS;
    finish_from_state(R);
    return PKRYLOV_SUCCESS;
  }
}

/** Pipelined CG: recompute r, u, w (and s, q, z from p) and the partial sums, as pk_pipecg_replace. */
int pipecg_replace(Run &R, int have_p) {
  pkrylov_context ctx = R.ctx;
  double **v = R.d->v;
  int64_t nb;
  PK_CALL(user_ax(R, v[D_X]));
  PK_CALL(halo(R, v[D_X]));
  PK_CUDA_CHECK(ctx, kSolve, pk_cuda_residual(R.stream, &R.op64, v[D_B], v[D_X], v[D_R], R.d->part, &nb),
                "residual");
  PK_CALL(apply_pc(R, NULL, v[D_R], v[D_U]));  /* u = M^-1 r */
  PK_CALL(apply_op(R, v[D_U], v[D_W]));        /* w = A u */
  if (have_p) {
    PK_CALL(apply_op(R, v[D_P], v[D_S]));       /* s = A p */
    PK_CALL(apply_pc(R, NULL, v[D_S], v[D_Q])); /* q = M^-1 s */
    PK_CALL(apply_op(R, v[D_Q], v[D_Z]));       /* z = A q */
  }
  /* the update's sums: (r, u), (w, u), (r, r), with the automatic rule then the norms (x, x), (p, p), (u, u),
     (q, q) */
  const double *xs[PK_RR_NV] = {v[D_R], v[D_W], v[D_R], v[D_X], v[D_P], v[D_U], v[D_Q]};
  const double *ys[PK_RR_NV] = {v[D_U], v[D_U], v[D_R], v[D_X], v[D_P], v[D_U], v[D_Q]};
  const int nv = pipe_nv(R);
  for (int g0 = 0; g0 < nv; g0 += 4) { /* pk_cuda_dots: at most 4 at once */
    const int gn = nv - g0 < 4 ? nv - g0 : 4;
    PK_CUDA_CHECK(ctx, kSolve, pk_cuda_dots(R.stream, R.n, gn, xs + g0, ys + g0, R.d->part, &nb), "dots");
    PK_CUDA_CHECK(ctx, kSolve, pk_cuda_sum_partials(R.stream, R.d->part, nb, gn, R.d->dsum + g0), "sums");
  }
  /* The scalar kernel adds nslots slots, the most any launcher writes; the update writes its own number of
     slots and every other slot must be zero: keep the sums in slot 0 and clear the rest. Distributed:
     these are the rank's local sums, which the next iteration adds over the ranks like an update's
     (sums of all nslots slots: the zeros add exactly), so every iteration of a block does the same calls
     (a graph captured after a replacement is right for the blocks after an update too). */
  R.nb_update = R.d->nslots;
  PK_CUDA_CHECK(ctx, kSolve,
                cudaMemsetAsync(R.d->part, 0, sizeof(double) * nv * (size_t)R.d->nslots, R.stream), "memset");
  PK_CUDA_CHECK(
      ctx, kSolve,
      cudaMemcpyAsync(R.d->part, R.d->dsum, sizeof(double) * nv, cudaMemcpyDeviceToDevice, R.stream), "copy");
  return PKRYLOV_SUCCESS;
}

/**
 * The device state said REPLACE (the automatic rule, pk_rr.h: its scalar step stopped before recording the
 * iteration, and every kernel after it in the block did nothing): replace the vectors from x and p, measure
 * the gap closed, ||r_old - r_new|| (a global sum, exact in reproducible mode: the calibration of the
 * estimate, as pk_solve_pipecg measures it), then RUNNING with a fresh estimate; the next block starts with
 * the same iteration's scalar step on the replacement's sums, as pk_solve_pipecg goes on after its
 * replacement.
 */
int replace_now(Run &R) {
  pkrylov_context ctx = R.ctx;
  SolverDev *d = R.d;
  double **v = d->v;
  pk_cuda_state *h = d->hst;
  double gap2;
  PK_CUDA_CHECK(
      ctx, kSolve,
      cudaMemcpyAsync(v[D_T], v[D_R], sizeof(double) * (size_t)R.n, cudaMemcpyDeviceToDevice, R.stream),
      "copy");
  PK_CALL(pipecg_replace(R, 1));
  PK_CUDA_CHECK(ctx, kSolve, pk_cuda_xpay(R.stream, R.n, v[D_T], -1.0, v[D_R], v[D_T]), "t = r_old - r_new");
  const double *xs[1] = {v[D_T]};
  if (R.repro) {
    PK_CALL(exact_sums_host(R, 1, xs, xs, &gap2));
  } else { /* the sums of part buffer 1 (buffer 0 holds the replacement's sums for the next step) */
    int64_t nb;
    PK_CUDA_CHECK(ctx, kSolve, pk_cuda_dots(R.stream, R.n, 1, xs, xs, part_buf(d, 1), &nb), "dot");
    PK_CUDA_CHECK(ctx, kSolve, pk_cuda_sum_partials(R.stream, part_buf(d, 1), nb, 1, d->dsum), "sums");
    PK_CUDA_CHECK(ctx, kSolve,
                  cudaMemcpyAsync(d->hsum, d->dsum, sizeof(double), cudaMemcpyDeviceToHost, R.stream),
                  "copy");
    PK_CUDA_CHECK(ctx, kSolve, cudaStreamSynchronize(R.stream), "synchronising");
    gap2 = d->hsum[0];
    PK_CALL(pk_allreduce_sum(ctx, &gap2, 1));
  }
  R.res->residual_replacements++;
  h->status = PK_ST_RUNNING;
  PK_CALL(rr_fresh(R, sqrt(gap2)));
  return state_to_device(R);
}

/** Pipelined CG on the device; mirrors pk_solve_pipecg. */
int solve_pipecg(Run &R) {
  pkrylov_context ctx = R.ctx;
  pkrylov_solver s = R.s;
  double **v = R.d->v;
  const size_t bytes = sizeof(double) * (size_t)R.n;
  /* the monitor and the stagnation window see every residual before the next step runs */
  const int host_mode = s->monitor != NULL || s->stag_window > 0;
  int32_t it = 0, since_replace = 0;
  R.pnone = R.d->pipe_none && !host_mode && !R.fold && !R.distributed && !R.repro && !R.uop && !R.upc &&
            R.pc.type == PKRYLOV_PRECOND_NONE;
  R.d->last_pnone = R.pnone;
restart: /* (a restart keeps the estimate's ||A||, Rayleigh quotient and calibration) */
  for (int i : {D_Z, D_Q, D_S, D_P})
    PK_CUDA_CHECK(ctx, kSolve, cudaMemsetAsync(v[i], 0, bytes, R.stream), "memset");
  PK_CALL(pipecg_replace(R, 0));
  PK_CALL(rr_fresh(R, -1.0));
  reset_state(R, it, 1);
  PK_CALL(state_to_device(R));
  for (;;) {
    pk_cuda_state *h = R.d->hst;
    if (host_mode) { /* one iteration in two halves: [m = M^-1 w, scalars] sync [update] */
      PK_CALL(apply_pc(R, R.d->st, v[D_W], v[D_M]));
      const double *gp = R.d->part;
      int64_t gnb = R.d->nslots;
      if (R.repro) {
        PK_CALL(exact_pipecg(R, &gp, &gnb));
      } else if (R.distributed) {
        gnb = R.nb_update;
        PK_CALL(global_part(R, &gp, &gnb, pipe_nv(R)));
      }
      PK_CUDA_CHECK(ctx, kSolve, pk_cuda_pipecg_scalar(R.stream, R.d->st, R.d->st, gp, gnb, R.hist, R.rr_on),
                    "pipelined CG scalar step");
      PK_CALL(keep_min(R, R.stream, R.d->st));
      PK_CALL(state_to_host(R));
      if (h->status == PK_ST_REPLACE) { /* nothing recorded: replace, then this iteration again */
        PK_CALL(replace_now(R));
        continue;
      }
      const int32_t recorded = h->status == PK_ST_RUNNING ? h->it - 1 : h->it;
      const int stop = host_record(R, recorded);
      if (h->status == PK_ST_RUNNING && stop) { /* x is x_recorded: the update has not run */
        R.res->iterations = recorded;
        return R.res->reason = stop, PKRYLOV_SUCCESS;
      }
      if (h->status == PK_ST_RUNNING) {
        int64_t nb;
        PK_CALL(user_ax(R, v[D_M]));
        PK_CALL(halo(R, v[D_M]));
        PK_CUDA_CHECK(ctx, kSolve,
                      pk_cuda_pipecg_step(R.stream, &R.op, R.d->st, v[D_M], v[D_Z], v[D_Q], v[D_S], v[D_P],
                                          v[D_X], v[D_R], v[D_U], v[D_W], R.d->part, &nb, R.rr_on),
                      "pipelined CG update");
        R.nb_update = nb;
      }
      if (stop && h->status != PK_ST_CONVERGED) {
        R.res->iterations = h->it;
        return R.res->reason = stop, PKRYLOV_SUCCESS;
      }
    } else {
      /* a block ends at the next replacement point (residual replacement, true-residual interval) */
      int len = R.k;
      if (s->replace_interval > 0 && s->replace_interval - since_replace < len)
        len = s->replace_interval - since_replace;
      if (s->true_res_interval > 0) {
        const int to_next = s->true_res_interval - (int)(it % s->true_res_interval);
        if (to_next < len) len = to_next;
      }
      if (len < 1) len = 1;
      PK_CALL(run_block(R, len, PKRYLOV_SOLVER_PIPECG));
    }
    const int32_t it_before = it;
    it = h->it;
    since_replace += it - it_before;
    const int st = h->status;
    R.res->iterations = it;
    if (st == PK_ST_CONVERGED) {
      int accept, stagnated;
      PK_CALL(confirm(R, &accept, &stagnated));
      if (stagnated) return R.res->reason = PKRYLOV_DIVERGED_STAGNATION, PKRYLOV_SUCCESS;
      if (accept) return R.res->reason = converged_reason(R), PKRYLOV_SUCCESS;
      if (it < s->maxit) goto restart;
      return R.res->reason = PKRYLOV_DIVERGED_MAX_ITERATIONS, PKRYLOV_SUCCESS;
    }
    if (st == PK_ST_SUSPECT) {
      /* the recurrence (p, A p) lost its sign: compute the curvature of p = u + beta p directly */
      int64_t nb;
      double curv;
      /* u (= r bitwise; not updated by the update without a preconditioner: read r there) */
      PK_CUDA_CHECK(
          ctx, kSolve,
          cudaMemcpyAsync(v[D_T], v[R.pnone ? D_R : D_U], bytes, cudaMemcpyDeviceToDevice, R.stream), "copy");
      PK_CUDA_CHECK(ctx, kSolve, pk_cuda_axpy_dev(R.stream, R.n, &R.d->st->beta, v[D_P], v[D_T]),
                    "t = u + beta p");
      PK_CALL(apply_op(R, v[D_T], v[D_AT])); /* A t */
      const double *xs[1] = {v[D_T]}, *ys[1] = {v[D_AT]};
      if (R.repro) {
        PK_CALL(exact_sums_host(R, 1, xs, ys, &curv));
      } else {
        PK_CUDA_CHECK(ctx, kSolve, pk_cuda_dots(R.stream, R.n, 1, xs, ys, R.d->part, &nb), "dot");
        PK_CALL(sums_to_host(R, nb, 1, &curv));
        PK_CALL(pk_allreduce_sum(ctx, &curv, 1));
      }
      if (isfinite(curv) && curv != 0.0 && (curv > 0 ? 1.0 : -1.0) == h->sigma_sign) {
        if (R.restarts++ >= 5) return R.res->reason = PKRYLOV_DIVERGED_STAGNATION, PKRYLOV_SUCCESS;
        goto restart;
      }
      R.res->reason = PKRYLOV_DIVERGED_BREAKDOWN_INDEFINITE_MATRIX;
      R.res->breakdown_iteration = h->breakdown_it;
      return PKRYLOV_SUCCESS;
    }
    if (st == PK_ST_REPLACE) { /* the automatic rule: the rest of the block did nothing */
      PK_CALL(replace_now(R));
      since_replace = 0;
      continue;
    }
    if (st != PK_ST_RUNNING) {
      finish_from_state(R);
      return PKRYLOV_SUCCESS;
    }
    int replace = s->replace_interval > 0 && since_replace >= s->replace_interval;
    if (s->true_res_interval > 0 && it % s->true_res_interval == 0) {
      replace = 1;
      R.res->true_residual_checks++;
    }
    if (replace) {
      PK_CALL(pipecg_replace(R, 1));
      R.res->residual_replacements++;
      since_replace = 0;
      PK_CALL(rr_fresh(R, -1.0)); /* (the true-residual interval) the estimate starts again from it */
    }
  }
}

} // namespace

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
  if (s->type == PKRYLOV_SOLVER_CG) op.gcap = pc.op.gcap = 1; /* as the solves set it (solve_views) */
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
  R.fold = d->fold_mode >= 0 ? d->fold_mode
          : s->A->type == PKRYLOV_OPERATOR_CSR ? d->nslots <= kFoldMaxSlots
                                               : n <= kFoldMaxCells && d->nslots <= kFoldMaxGridSlots;
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
  if (s->type == PKRYLOV_SOLVER_CG) /* 2-D grid stencils: grid-stride launches (pk_cuda_op gcap; setup sized) */
    R.op.gcap = R.op64.gcap = R.op_in.gcap = R.op_edge.gcap = R.pc.op.gcap = 1;
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
  int rc = s->type == PKRYLOV_SOLVER_CG ? solve_cg(R) : solve_pipecg(R);
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

/* ---- device work of the handle-based reverse communication (rci.c) -------------------------------- */

struct pk_cuda_rci_s {
  pkrylov_context ctx;
  cudaStream_t stream;
  int64_t n, nslots;
  double *work;       /* nvec * n */
  double *part;       /* kPartNV * nslots partial sums */
  double *dsum;       /* kPartNV device sums */
  double *hsum;       /* kPartNV pinned host sums */
  pk_cuda_state *st;  /* device state carrying alpha and beta to the fused launchers */
  pk_cuda_state hst;  /* its host image (pageable: the copy is staged at once) */
  const char *func;   /* the public function in progress (pkrylov_rci_start or _step), for errors */
};

namespace {

/** A USER view of n values whose A x is pre. */
pk_cuda_op pre_view(int64_t n, const double *pre) {
  pk_cuda_op u;
  memset(&u, 0, sizeof u);
  u.type = PKRYLOV_OPERATOR_USER;
  u.n = n;
  u.pre = pre;
  return u;
}

/** nvals sums of nb partial slots to out (host). */
int rci_sums(pk_cuda_rci *d, int64_t nb, int nvals, double *out) {
  if (nb > d->nslots) return pk_error(d->ctx, PKRYLOV_ERR_INTERNAL, "pkrylov_rci_step", "more slots than sized");
  PK_CUDA_CHECK(d->ctx, d->func, pk_cuda_sum_partials(d->stream, d->part, nb, nvals, d->dsum),
                "summing partials");
  PK_CUDA_CHECK(
      d->ctx, d->func,
      cudaMemcpyAsync(d->hsum, d->dsum, sizeof(double) * (size_t)nvals, cudaMemcpyDeviceToHost, d->stream),
      "copying sums");
  PK_CUDA_CHECK(d->ctx, d->func, cudaStreamSynchronize(d->stream), "synchronising");
  memcpy(out, d->hsum, sizeof(double) * (size_t)nvals);
  return PKRYLOV_SUCCESS;
}

/** The device state with alpha, beta, RUNNING. */
int rci_state(pk_cuda_rci *d, double alpha, double beta) {
  memset(&d->hst, 0, sizeof d->hst);
  d->hst.alpha = alpha;
  d->hst.beta = beta;
  d->hst.status = PK_ST_RUNNING;
  d->hst.breakdown_it = -1;
  PK_CUDA_CHECK(d->ctx, d->func,
                cudaMemcpyAsync(d->st, &d->hst, sizeof d->hst, cudaMemcpyHostToDevice, d->stream),
                "copying the state");
  return PKRYLOV_SUCCESS;
}

} // namespace

extern "C" int pk_cuda_rci_create(pkrylov_context ctx, int64_t n, int nvec, pk_cuda_rci **out, double **work) {
  pk_cuda_rci *d = (pk_cuda_rci *)calloc(1, sizeof(pk_cuda_rci));
  if (!d) return pk_error(ctx, PKRYLOV_ERR_OUT_OF_MEMORY, "pkrylov_rci_start", "cannot allocate");
  d->ctx = ctx;
  d->func = "pkrylov_rci_start";
  d->stream = stream_of(ctx);
  d->n = n;
  const pk_cuda_op u = pre_view(n, NULL);
  d->nslots = pk_cuda_partials_needed(&u, NULL);
  cudaError_t e = cudaMalloc(&d->work, sizeof(double) * (size_t)nvec * (size_t)n);
  if (e == cudaSuccess) e = cudaMalloc(&d->part, sizeof(double) * kPartNV * (size_t)d->nslots);
  if (e == cudaSuccess) e = cudaMalloc(&d->dsum, sizeof(double) * kPartNV);
  if (e == cudaSuccess) e = cudaMallocHost(&d->hsum, sizeof(double) * kPartNV);
  if (e == cudaSuccess) e = cudaMalloc(&d->st, sizeof(pk_cuda_state));
  if (e == cudaSuccess) e = cudaMemsetAsync(d->work, 0, sizeof(double) * (size_t)nvec * (size_t)n, d->stream);
  if (e == cudaSuccess) e = cudaStreamSynchronize(d->stream);
  if (e != cudaSuccess) {
    pk_cuda_rci_free(d);
    char what[96];
    snprintf(what, sizeof what, "allocating the device work area (%d vectors of %lld values)", nvec,
             (long long)n);
    return pk_cuda_error(ctx, "pkrylov_rci_start", (int)e, what, NULL);
  }
  *out = d;
  *work = d->work;
  return PKRYLOV_SUCCESS;
}

extern "C" void pk_cuda_rci_free(pk_cuda_rci *d) {
  if (!d) return;
  cudaFree(d->work);
  cudaFree(d->part);
  cudaFree(d->dsum);
  cudaFreeHost(d->hsum);
  cudaFree(d->st);
  free(d);
}

extern "C" void pk_cuda_rci_set_func(pk_cuda_rci *d, const char *func) {
  d->func = func;
}

extern "C" int pk_cuda_rci_sync(pk_cuda_rci *d) {
  PK_CUDA_CHECK(d->ctx, d->func, cudaStreamSynchronize(d->stream), "synchronising");
  return PKRYLOV_SUCCESS;
}

extern "C" int pk_cuda_rci_zero(pk_cuda_rci *d, double *v) {
  PK_CUDA_CHECK(d->ctx, d->func, cudaMemsetAsync(v, 0, sizeof(double) * (size_t)d->n, d->stream), "memset");
  return PKRYLOV_SUCCESS;
}

extern "C" int pk_cuda_rci_copy(pk_cuda_rci *d, double *dst, const double *src) {
  PK_CUDA_CHECK(d->ctx, d->func,
                cudaMemcpyAsync(dst, src, sizeof(double) * (size_t)d->n, cudaMemcpyDeviceToDevice, d->stream),
                "copy");
  return PKRYLOV_SUCCESS;
}

extern "C" int pk_cuda_rci_xpay(pk_cuda_rci *d, const double *x, double a, const double *y, double *z) {
  PK_CUDA_CHECK(d->ctx, d->func, pk_cuda_xpay(d->stream, d->n, x, a, y, z), "z = x + a y");
  return PKRYLOV_SUCCESS;
}

extern "C" int pk_cuda_rci_dots(pk_cuda_rci *d, int nv, const double *const *x, const double *const *y,
                                double *out) {
  int64_t nb;
  PK_CUDA_CHECK(d->ctx, d->func, pk_cuda_dots(d->stream, d->n, nv, x, y, d->part, &nb), "dots");
  return rci_sums(d, nb, nv, out);
}

extern "C" int pk_cuda_rci_residual(pk_cuda_rci *d, const double *b, const double *t, double *r, double *rr) {
  if (!t) {
    PK_CALL(pk_cuda_rci_copy(d, r, b));
    const double *xs[1] = {r};
    return pk_cuda_rci_dots(d, 1, xs, xs, rr);
  }
  const pk_cuda_op u = pre_view(d->n, t);
  int64_t nb;
  PK_CUDA_CHECK(d->ctx, d->func, pk_cuda_residual(d->stream, &u, b, b, r, d->part, &nb), "r = b - A x");
  return rci_sums(d, nb, 1, rr);
}

extern "C" int pk_cuda_rci_cg_update(pk_cuda_rci *d, double alpha, double beta, double *x, double *p,
                                     const double *z, double *q, const double *t, double *pq) {
  PK_CALL(rci_state(d, alpha, beta));
  const pk_cuda_op u = pre_view(d->n, t);
  int64_t nb;
  PK_CUDA_CHECK(d->ctx, d->func, pk_cuda_cg_operator_step(d->stream, &u, d->st, 0, x, p, z, q, d->part, &nb),
                "CG update");
  return rci_sums(d, nb, 1, pq);
}

extern "C" int pk_cuda_rci_pipecg_update(pk_cuda_rci *d, double alpha, double beta, const double *m,
                                         const double *nv, double *z, double *q, double *s, double *p, double *x,
                                         double *r, double *u, double *w, double *out) {
  PK_CALL(rci_state(d, alpha, beta));
  const pk_cuda_op v = pre_view(d->n, nv);
  int64_t nb;
  PK_CUDA_CHECK(d->ctx, d->func,
                pk_cuda_pipecg_step(d->stream, &v, d->st, m, z, q, s, p, x, r, u, w, d->part, &nb, 0),
                "pipelined CG update");
  return rci_sums(d, nb, PK_RR_NV_BASE, out); /* the update without the norms: slots of the three dots */
}

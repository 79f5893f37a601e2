/**
 * @file pk_cuda_solver.h
 * @brief Private header of the CG and pipelined-CG drivers on the GPU: the solver's device work area
 *        (SolverDev), one run of a solve (Run) and the functions the driver files share. pk_cuda_solver.cu:
 *        the work area, the solve's entry and the drivers' host helpers (operator and preconditioner calls,
 *        sums on one GPU, over the ranks and exact, the true residual, state copies, confirmation, the
 *        timeline); pk_cuda_cg.cu: the iterations (blocks, graphs, restarts, replacements); pk_cuda_rci.cu:
 *        the device work of the reverse communication. Host code only (namespace pkc_solver).
 */
#ifndef PK_CUDA_SOLVER_H
#define PK_CUDA_SOLVER_H

#include <cuda_runtime.h>

#include <stdint.h>

extern "C" {
#include "pk_impl.h"
}
#include "pk_cuda.h"

namespace pkc_solver {

/* the work vectors, in the order of the work area: CG's q, z, p, x first, the L2 window's candidates (l2_begin,
   pk_cuda_solver.cu: the most reads and writes per iteration first) */
enum { D_Q, D_Z, D_P, D_X, D_R, D_U, D_W, D_M, D_S, D_T, D_AT, D_B, D_NVEC };

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
  int32_t gcap;           /* CG's 2-D block cap (pk_cuda_op gcap) as nslots was sized; 0 other solvers */
  double *hist;           /* maxit + 1 */
  int32_t hist_cap;
  pk_cuda_state *st;      /* device: 3 states; st[0] is the current one between blocks */
  pk_cuda_state *hst;     /* pinned host copy of st[0] */
  double *dsum, *hsum;    /* kPartNV sums: device, pinned host */
  cudaGraphExec_t graph;  /* one block of graph_k iterations */
  int graph_k, graph_type, graph_mixed, graph_fold, graph_pdl, graph_pnone, graph_edge, graph_fuse_r;
  int graph_l2;           /* the L2 window's vectors on the graph's kernel nodes (Run.l2) */
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
  int l2persist;          /* option cuda.l2persist: -1 auto, 0 off, 1 .. 4 vectors (l2_begin) */
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
  int64_t *xloop;         /* one pass (Run.xone): the blocks' accumulators the loops write (xloop_len int64) */
  int64_t xloop_len;
  int graph_repro;        /* the graph's blocks use the exact sums */
  int graph_xone;         /* ... in one pass: 2 Run.xone + Run.xrho */
  pk_rr_est *rre, *hrre;  /* pipelined CG's automatic residual replacement: its estimate (device, what
                             pk_cuda_state.repl points to; pinned host image), allocated with the solver */
};

/** Partial-sum buffer i (0 or 1) of d. */
inline double *part_buf(const SolverDev *d, int i) { return d->part + (size_t)i * kPartNV * (size_t)d->nslots; }

inline cudaStream_t stream_of(pkrylov_context ctx) { return (cudaStream_t)pk_cuda_context_stream(ctx); }

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
  /* reproducible mode in one pass (solver option kry.xfuse, the default; n <= 2^26): the operator loop and
     pipelined CG's update add their sums exactly in their own pass (the _x launchers, d->xloop), and so does
     CG's preconditioner loop where it can (xrho: none, Jacobi, the approximate inverse; not a user one);
     the rest (the column sweeps, pipelined CG's first step of a block, the residuals) a second pass */
  int xone, xrho;
  int edge_comm;         /* NCCL path, pipelined CG: the edge-column update on the communication stream, after
                            the halos and the scalar step, concurrent with the interior update (default;
                            option dist.edge_comm=0: on the context's stream after it) */
  /* pipelined CG without a preconditioner on the unfolded single-GPU path (solve_pipecg sets it): the
     update pk_cuda_pipecg_none_step, no m = w copy; u (= r) and q (= s) are not updated and stay out of
     every computation until pipecg_replace recomputes them; w alternates between the arrays v[D_W] and
     v[D_M] (w_old in one, w_new into the other), and after a block of odd length run_block swaps the two
     host pointers, so v[D_W] holds the current w between blocks */
  int pnone;
  /* CG with an approximate inverse on a grid stencil of one rank (solve_cg sets it): r -= alpha q fused into
     the preconditioner loop (pk_cuda_cg_precond_step_r), r alternating between v[D_R] and v[D_U] inside a
     block like pnone's w; run_block swaps the two host pointers after a block of odd length */
  int fuse_r;
  int minres;            /* the minimum-residual iterate (s->min_res): copy kernels after the scalar steps */
  int rr_on;             /* pipelined CG with the automatic residual replacement (PKRYLOV_REPLACE_AUTO) */
  /* CG on one GPU: the L2 window (l2_begin / l2_end, option cuda.l2persist): its first l2 work vectors
     (v[D_Q] ...) persisting in the L2's set-aside part, on the stream and on every kernel node of a graph */
  int l2;
  pk_cuda_l2 l2w;
};

int state_to_host(Run &R);

/** Values per partial-sum slot of pipelined CG's update (and of its gathered and exact sums): the three dots,
 *  and with the automatic residual replacement its four norms. */
inline int pipe_nv(const Run &R) { return R.rr_on ? PK_RR_NV : PK_RR_NV_BASE; }


/* ---- the drivers' host helpers (pk_cuda_solver.cu) ------------------------------------------------- */

int tl_on();
void tl_mark(cudaStream_t st, int p);
int halo(Run &R, const double *x);
int keep_min(Run &R, void *st, const pk_cuda_state *sp);
int still_running(Run &R, int *running);
int apply_op(Run &R, const double *x, double *y);
int user_ax(Run &R, const double *x);
int apply_pc(Run &R, const pk_cuda_state *st, const double *r, double *z);
int cg_precond(Run &R, int alpha_zero, int64_t *nb);
int cg_operator(Run &R, int init, int64_t *nb, int pdl = 0);
/** CG's operator loop on op (R.op; distributed: R.op_in, R.op_edge) on st[0], writing its sums from slot `slot`
 *  on: the blocks' exact accumulators in d->xloop (Run.xone) or the partial sums in d->part; *nb slots. */
int cg_operator_on(Run &R, const pk_cuda_op *op, int init, int64_t slot, int64_t *nb, int pdl, const char *what);
/** Pipelined CG's update on op on stream, its sums from slot `slot` on, as cg_operator_on. */
int pipecg_update_on(Run &R, void *stream, const pk_cuda_op *op, int64_t slot, int64_t *nb, const char *what);
int sums_to_host(Run &R, int64_t nb, int nvals, double *out);
int sums_begin(Run &R, const double *part, int64_t nb, int nvals);
int sums_end(Run &R, int nvals, const double **gpart, int64_t *gnb);
int global_part(Run &R, const double **part, int64_t *nb, int nvals);
int exact_sums_host(Run &R, int nv, const double *const *x, const double *const *y, double *out);
int exact_cg_rho(Run &R, const double **gp, int64_t *gnb);
int exact_cg_sigma(Run &R, const double **gp, int64_t *gnb);
int exact_pipecg(Run &R, const double **gp, int64_t *gnb);
int exact_blocks(Run &R, int64_t nb, int nv, const double **gp, int64_t *gnb);
int cg_rho_sums(Run &R, const double **gp, int64_t *gnb);
int cg_sigma_sums(Run &R, const double **gp, int64_t *gnb);
int true_residual(Run &R, double *r, double *res);
int copy_small(Run &R, void *dst, const void *src, size_t bytes, cudaMemcpyKind kind, int sync,
               const char *what);
int state_to_device(Run &R);
int host_record(Run &R, int32_t upto);
int converged_reason(const Run &R);
int confirm(Run &R, int *accept, int *stagnated);

/* ---- the iterations (pk_cuda_cg.cu) ------------------------------------------------------------------ */

int rr_put(Run &R);
int solve_cg(Run &R);
int solve_pipecg(Run &R);

} // namespace pkc_solver

#endif /* PK_CUDA_SOLVER_H */

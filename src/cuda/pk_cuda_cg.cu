/**
 * @file pk_cuda_cg.cu
 * @brief CG and pipelined CG on the GPU: the iterations of the host drivers (pk_cuda_solver.cu has the entry,
 *        pk_cuda_solver.h the shared state): blocks of iterations enqueued unfolded, folded or distributed,
 *        captured as CUDA graphs, and the restarts, replacements and confirmations of solve_cg and
 *        solve_pipecg, which mirror the CPU drivers of cg.c (pk_cg_solve / pk_pipecg_solve) step for step.
 */
#include <cuda_runtime.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <utility>

#include "pk_cuda_solver.h"

namespace pkc_solver {

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
      gnb = nbp;
      PK_CALL(cg_rho_sums(R, &gp, &gnb));
      PK_CALL(pk_cuda_dist_halo_begin(R.dop, v[D_Z], R.nccl));
    } else {
      PK_CALL(sums_begin(R, d->part, nbp, 2));
      PK_CALL(pk_cuda_dist_halo_begin(R.dop, v[D_Z], R.nccl));
      PK_CALL(sums_end(R, 2, &gp, &gnb));
    }
    PK_CUDA_CHECK(ctx, kSolve, pk_cuda_cg_scalar_rho(R.stream, d->st, d->st, gp, gnb, R.hist, 0, 0),
                  "CG scalar step");
    PK_CALL(cg_operator_on(R, &R.op_in, 0, 0, &nb1, 0, "CG operator loop"));
    PK_CALL(pk_cuda_dist_halo_end(R.dop, R.nccl));
    PK_CALL(cg_operator_on(R, &R.op_edge, 0, nb1, &nb2, 0, "CG operator loop (tile edges)"));
    PK_CALL(keep_min(R, R.stream, d->st)); /* x is the iterate of the rho step */
    if (nb1 + nb2 > d->nslots) return pk_error(ctx, PKRYLOV_ERR_INTERNAL, __func__, "more slots than sized");
    if (R.repro) {
      gnb = nb1 + nb2;
      PK_CALL(cg_sigma_sums(R, &gp, &gnb));
    } else {
      PK_CALL(sums_begin(R, d->part, nb1 + nb2, 1));
      PK_CALL(sums_end(R, 1, &gp, &gnb));
    }
    PK_CUDA_CHECK(ctx, kSolve, pk_cuda_cg_scalar_sigma(R.stream, d->st, d->st, gp, gnb, 0), "CG scalar step");
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
    if (R.repro) { /* the exact sums of r, u, w first (not overlapped; one pass: the update before added them) */
      if (R.xone && i > 0) /* R.nb_update: the blocks the update before wrote */
        PK_CALL(exact_blocks(R, R.nb_update, pipe_nv(R), &gp, &gnb));
      else
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
    PK_CALL(pipecg_update_on(R, R.stream, &R.op_in, 0, &nb1, "pipelined CG update"));
    tl_mark(R.stream, 7);
    if (!R.edge_comm) PK_CALL(pk_cuda_dist_halo_end(R.dop, R.nccl));
    PK_CALL(pipecg_update_on(R, ecomm ? ecomm : R.stream, &R.op_edge, nb1, &nb2, "pipelined CG update (tile edges)"));
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
  /* fuse_r: iteration i reads r from ra[i % 2] and writes the new one to ra[(i + 1) % 2] */
  double *ra[2] = {v[D_R], v[D_U]};
  if (!R.fold) {
    /* the fused 2-D loop of one rank: its 4 kernels as programmatic dependent launches (R.pdl, cuda.pdl) */
    const int pdl = R.fuse_r && R.pdl;
    for (int i = 0; i < count; i++) {
      const double *pp = d->part;
      if (R.fuse_r)
        PK_CUDA_CHECK(ctx, kSolve,
                      R.xrho ? pk_cuda_cg_precond_step_r_x(R.stream, R.pcp, d->st, 0, ra[i % 2], ra[(i + 1) % 2],
                                                           v[D_Q], v[D_Z], d->xloop, &nbp, pdl && i > 0)
                             : pk_cuda_cg_precond_step_r(R.stream, R.pcp, d->st, 0, ra[i % 2], ra[(i + 1) % 2],
                                                         v[D_Q], v[D_Z], d->part, &nbp, pdl && i > 0),
                      "CG preconditioner loop");
      else
        PK_CALL(cg_precond(R, 0, &nbp));
      PK_CALL(cg_rho_sums(R, &pp, &nbp));
      PK_CUDA_CHECK(ctx, kSolve, pk_cuda_cg_scalar_rho(R.stream, d->st, d->st, pp, nbp, R.hist, 0, pdl),
                    "CG scalar step");
      PK_CALL(cg_operator(R, 0, &nbo, pdl));
      PK_CALL(keep_min(R, R.stream, d->st)); /* x is the iterate of the rho step */
      pp = d->part;
      PK_CALL(cg_sigma_sums(R, &pp, &nbo));
      PK_CUDA_CHECK(ctx, kSolve, pk_cuda_cg_scalar_sigma(R.stream, d->st, d->st, pp, nbo, pdl),
                    "CG scalar step");
      if (R.distributed && !R.nccl && d->hst->status != PK_ST_RUNNING) break; /* the rest would do nothing */
    }
    return PKRYLOV_SUCCESS;
  }
  pk_cuda_state *A = d->st, *B = d->st + 1;
  double *ppc = part_buf(d, 1), *pop = part_buf(d, 0);
  PK_CUDA_CHECK(ctx, kSolve,
                R.fuse_r ? pk_cuda_cg_precond_step_r(R.stream, R.pcp, A, 0, ra[0], ra[1], v[D_Q], v[D_Z], ppc, &nbp, 0)
                         : pk_cuda_cg_precond_step(R.stream, R.pcp, A, 0, R.n, v[D_R], v[D_Q], v[D_Z], ppc, &nbp),
                "CG preconditioner loop");
  for (int i = 0; i < count; i++) {
    if (i > 0) {
      const pk_cuda_fold f = {B, A, pop, nbo, NULL, R.pdl};
      PK_CUDA_CHECK(ctx, kSolve,
                    R.fuse_r ? pk_cuda_cg_precond_step_r_fold(R.stream, R.pcp, &f, ra[i % 2], ra[(i + 1) % 2],
                                                              v[D_Q], v[D_Z], ppc, &nbp)
                             : pk_cuda_cg_precond_step_fold(R.stream, R.pcp, &f, R.n, v[D_R], v[D_Q], v[D_Z], ppc,
                                                            &nbp),
                    "CG preconditioner loop (folded)");
    }
    const pk_cuda_fold g = {A, B, ppc, nbp, R.hist, R.pdl};
    PK_CUDA_CHECK(
        ctx, kSolve,
        pk_cuda_cg_operator_step_fold(R.stream, &R.op, &g, v[D_X], v[D_P], v[D_Z], v[D_Q], pop, &nbo),
        "CG operator loop (folded)");
    PK_CALL(keep_min(R, R.stream, B)); /* the folded rho step's state */
  }
  PK_CUDA_CHECK(ctx, kSolve, pk_cuda_cg_scalar_sigma(R.stream, B, A, pop, nbo, 0), "CG scalar step");
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
      if (R.xone && i > 0) { /* the sums the update before added exactly (a block's first: a second pass) */
        PK_CALL(exact_blocks(R, nb, pipe_nv(R), &gp, &gnb));
      } else if (R.repro) {
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
      PK_CALL(pipecg_update_on(R, R.stream, &R.op, 0, &nb, "pipelined CG update"));
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
  if (R.l2) pk_cuda_l2_nodes(&R.l2w, g); /* the L2 window on every kernel node (not left to the capture) */
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
    /* the vector that alternates inside a block (pipelined CG without preconditioner: w; CG with fuse_r: r):
       a graph per parity */
    const double *w = d->v[type == PKRYLOV_SOLVER_CG ? D_R : D_W];
    if (!d->graph || d->graph_k != k || d->graph_type != type || d->graph_mixed != R.s->mixed ||
        d->graph_fold != R.fold || d->graph_pdl != R.pdl || d->graph_hist != R.hist ||
        d->graph_nccl != R.nccl || d->graph_repro != R.repro || d->graph_pnone != R.pnone || d->graph_fuse_r != R.fuse_r ||
        d->graph_l2 != R.l2 || d->graph_xone != 2 * R.xone + R.xrho ||
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
      d->graph_repro = R.repro, d->graph_pnone = R.pnone, d->graph_edge = R.edge_comm, d->graph_fuse_r = R.fuse_r;
      d->graph_l2 = R.l2;
      d->graph_xone = 2 * R.xone + R.xrho;
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
  /* the same for CG's r with fuse_r (a restart or a replacement writes r afresh; confirmation reads D_T) */
  if (type == PKRYLOV_SOLVER_CG && R.fuse_r && count % 2) std::swap(d->v[D_R], d->v[D_U]);
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

/** CG on the device; mirrors cg.c's CG. */
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
    PK_CALL(cg_rho_sums(R, &pp, &nb));
    PK_CUDA_CHECK(ctx, kSolve, pk_cuda_cg_scalar_rho(R.stream, R.d->st, R.d->st, pp, nb, R.hist, 1, 0),
                  "CG scalar step");
    PK_CUDA_CHECK(ctx, kSolve, cudaMemsetAsync(v[D_P], 0, bytes, R.stream), "memset");
    PK_CALL(cg_operator(R, 1, &nb));
    PK_CALL(keep_min(R, R.stream, R.d->st)); /* a (re)start keeps its x */
    pp = R.d->part;
    PK_CALL(cg_sigma_sums(R, &pp, &nb));
    PK_CUDA_CHECK(ctx, kSolve, pk_cuda_cg_scalar_sigma(R.stream, R.d->st, R.d->st, pp, nb, 0),
                  "CG scalar step");
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
 * estimate, as cg.c's pipelined CG measures it), then RUNNING with a fresh estimate; the next block starts with
 * the same iteration's scalar step on the replacement's sums, as cg.c's pipelined CG goes on after its
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

/** Pipelined CG on the device; mirrors cg.c's pipelined CG. */
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

} // namespace pkc_solver

/**
 * @file pk_cuda_kry.cu
 * @brief The CUDA backend of the vector engine of the BiCGStab and GMRES families (pk_kry.h): its records,
 *        blocks and graphs, scalar steps and backend table; the vector operations and their kernels are in
 *        pk_cuda_kry_ops.cu, the sums in pk_cuda_kry_sums.cu, the shared state in pk_cuda_kry.cuh.
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
 *  - reproducible mode (ctx->reproducible): the fused kernels add their sums exactly in the same pass
 *    (their XR template instances, pk_cuda_xsum.cuh; see "exact sums" in pk_cuda_kry_sums.cu); the
 *    residual's norm (and kry.xfuse=0) recomputes the sum after its kernel (pk_cuda_xacc.cu).
 *  - scalar steps: a <<<1, 1>>> kernel calling pk_kry_scalar_step (kry_scalar.h).
 *  - basis_axpy_dots: one pass that updates y and accumulates (V_j, y) and (y, y) of the new values, the
 *    basis values of an element held in registers (k <= 32; more: the two kernels).
 *  - matvec_update on CSR operators: the engine's CSR kernel with an action running the update's per-row
 *    body and sums on the update's grid and slots (pk_cuda_kry_fused.cu); other operators: two records.
 * The operator products, preconditioner applications and residuals use the launchers of pk_cuda_op.cu and
 * pk_cuda_precond.cu (every operator and preconditioner type they support). User-callback operators and
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
 * kry.graph=0 (no graphs), kry.fuse=0 (basis_axpy_dots and matvec_update as two kernels each), kry.profile=1
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
#include "pk_cuda_kry.cuh"

using namespace pkc_kry;

namespace pkc_kry {

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

} // namespace pkc_kry

namespace {

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

const char *const op_names[OP_COUNT] = {"",           "matvec",    "precond",    "residual",
                                        "update",     "block_dots", "basis_dots", "basis_axpy",
                                        "basis_gemm", "scalar",     "set",        "copy",
                                        "axpy_dots",  "wait",       "matvec_upd", "cg_precond",
                                        "cg_operator", "pipecg"};
constexpr size_t KGRAPH_CACHE = 48; /* graphs kept per engine */

} // namespace

namespace pkc_kry {

/*
 * Folded steps (KryDev.fold: the solver option cuda.fold, by default the CG driver's choice by size; one GPU,
 * no user routine, not reproducible). In a block, play() runs the records after this plan: CG's scalar step
 * after a loop (PK_KSS_CG_ITER after the preconditioner loop, PK_KSS_CG_SIGMA after the operator loop) is
 * deferred (FP_DEFER) and run at the start of every block of the next loop's kernel (FP_HOST) from the pending
 * sums, as the CG driver's folded path does: per iteration the operator loop with the ITER step, the
 * preconditioner loop with the SIGMA step, the block's first preconditioner loop and its last SIGMA step
 * (one-block, psum) as that driver's; 2 kernels per iteration. Pipelined CG: the step after m = M^-1 w runs
 * in that kernel (the product precedes the step in the record order; FP_HOST on the PRECOND record, FP_SKIP
 * on the SCALAR record), the update after it reads the new scalars: 2 kernels per iteration, with
 * programmatic dependent launches (cuda.pdl). A folded kernel reads the scalars from one buffer while its
 * block 0 writes them to another (S, S2, S3 in turn): CG alternates S and S2 and its last step moves them back
 * to S; a pipelined-CG block with an odd number of folded steps starts S -> S3 -> S2 so that it ends in S
 * (the driver's three states), and a block with one folded step runs unfolded (as the driver's).
 */
void fold_plan(pk_kry *E, const std::vector<int32_t> &log, std::vector<FoldPlan> &plan) {
  KryDev *D = dev_of(E);
  std::vector<size_t> at;
  for (size_t o = 0; o < log.size(); o += (size_t)log[o + 1])
    at.push_back(o);
  plan.assign(at.size(), FoldPlan{FP_NONE, 0});
  if (D->dop && !D->repro && !D->uop && !D->upc && E->s->type == PKRYLOV_SOLVER_PIPECG) {
    /* several ranks: m = M^-1 w, then (the reduction's wait, the step, the minimum-residual update) the
       update with that m in the same block: m's halo exchange begins right after the product, so that it
       travels while the reduction ends (the driver's dist_pipecg_enqueue) */
    for (size_t i = 0; i < at.size(); i++) {
      const int32_t *b = log.data() + at[i];
      if (b[0] != OP_PRECOND)
        continue;
      for (size_t j = i + 1; j < at.size(); j++) {
        const int32_t *c = log.data() + at[j];
        if (c[0] == OP_PIPECG) {
          if (c[2] == b[3] && c[2 + 9] < 0)
            plan[i].act = FP_HALO;
          break;
        }
        if (c[0] != OP_WAIT && c[0] != OP_SCALAR && c[0] != OP_UPDATE)
          break;
      }
    }
    return;
  }
  if (!D->fold || D->repro || D->dist || D->uop || D->upc || !D->S2)
    return;
  const bool pcg = E->s->type == PKRYLOV_SOLVER_PIPECG;
  std::vector<size_t> hosts;
  for (size_t i = 1; i + 1 < at.size(); i++) {
    const int32_t *a = log.data() + at[i - 1], *b = log.data() + at[i], *c = log.data() + at[i + 1];
    const int32_t *pa = a + 2, *pb = b + 2, *pc = c + 2;
    if (plan[i - 1].act != FP_NONE && plan[i - 1].act != FP_HOST)
      continue;
    if (pcg) { /* update (with sums) -> m = M^-1 w -> PCG_SUMS */
      if (a[0] == OP_PIPECG && pa[9] < 0 && (pa[14] == PK_RR_NV || pa[14] == PK_RR_NV_BASE) &&
          pa[15] == PK_PCG_GAMMA && b[0] == OP_PRECOND && c[0] == OP_SCALAR && pc[0] == PK_KSS_PCG_SUMS) {
        plan[i].act = FP_HOST;
        plan[i + 1].act = FP_SKIP;
        hosts.push_back(i);
      }
      continue;
    }
    if (b[0] != OP_SCALAR)
      continue;
    const bool iter = pb[0] == PK_KSS_CG_ITER && a[0] == OP_CG_PRECOND && pa[5] == PK_CG_RZ &&
                      c[0] == OP_CG_OPERATOR && pc[4] == PK_CG_ALPHA && pc[5] == 0 && pc[6] == PK_CG_BETA &&
                      pc[7] == 0;
    const bool sigma = pb[0] == PK_KSS_CG_SIGMA && a[0] == OP_CG_OPERATOR && pa[8] == PK_CG_PQ &&
                       c[0] == OP_CG_PRECOND && pc[3] == PK_CG_ALPHA && pc[4] == 0;
    if (iter || sigma) {
      plan[i].act = FP_DEFER;
      plan[i + 1].act = FP_HOST;
      hosts.push_back(i + 1);
    }
  }
  const size_t nf = hosts.size();
  if (pcg && nf == 1) { /* one folded step could not end in S: the block runs unfolded */
    plan.assign(at.size(), FoldPlan{FP_NONE, 0});
    return;
  }
  int cur = 0;
  for (size_t k = 0; k < nf; k++) {
    int out = cur == 0 ? 1 : 0;
    if (pcg && nf % 2 == 1 && k < 2)
      out = k == 0 ? 2 : 1; /* odd: S -> S3 -> S2, then S and S2 in turn to S */
    plan[hosts[k]].sout = (int8_t)out;
    cur = out;
  }
}

} // namespace pkc_kry

namespace {

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

/** The update list and pairs of an OP_UPDATE / OP_MATVEC_UPDATE record (push_update's layout); p is left at
 *  the words after them (out, async). */
void rd_update(const int32_t *&p, pk_kupd *u, int32_t &nupd, pk_kpair *pr, int32_t &np) {
  nupd = *p++;
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
  np = *p++;
  for (int j = 0; j < np; j++) {
    pr[j].a = *p++;
    pr[j].b = *p++;
  }
}

/**
 * Run one record. graph: inside a capture (scalar steps read the block's base from the device); else the
 * scalar-step arguments are r's plus base.
 */
int exec_op(pk_kry *E, const int32_t *r, bool graph, int32_t base, int sout = -1) {
  KryDev *D = dev_of(E);
  const int type = r[0];
  const int32_t *p = r + 2;
  const bool prof = D->prof && !graph;
  D->prev_op = D->cur_op, D->cur_op = type; /* (the unfolded fused 2-D loop's programmatic launches) */
  /* a CG loop's pending sums (pk_cuda_kry_cg.cu) before an operation that reads or writes S or the partial
     sums; the products in between (pipelined CG's m = M^-1 w, n = A m) leave them for the step after them;
     the scalars a folded step left in S2 / S3 back in S (sout >= 0: a folded loop, which takes both; pipelined
     CG's update reads its coefficients where they are, D->Sc, as the driver's update after a folded step) */
  if (sout < 0 && (D->p2_on || D->Sc != D->S || D->fs_on) &&
      ((type != OP_PRECOND && type != OP_MATVEC && type != OP_COPY && type != OP_SCALAR &&
        (type != OP_PIPECG || D->p2_on)) ||
       (type == OP_SCALAR && !D->p2_on) || D->fs_on))
    PK_CALL(psum_flush(E));
  if (prof)
    PK_CUDA_CHECK(E->ctx, kSolve, cudaEventRecord(D->ev[0], D->st), "profile");
  int rc = PKRYLOV_SUCCESS;
  switch (type) {
  case OP_MATVEC:
    rc = do_matvec(E, p[0], p[1]);
    break;
  case OP_PRECOND:
    if (sout >= 0) { /* pipelined CG: the SCALAR record after it runs in it (play's plan) */
      rc = do_pc_apply_fold(E, p[0], p[1], r + r[1], graph, base, sout);
      break;
    }
    rc = do_precond(E, p[0], p[1]);
    break;
  case OP_RESIDUAL:
    rc = do_residual(E, p[0], p[1], p[2], p[3] != 0);
    break;
  case OP_UPDATE: {
    pk_kupd u[PK_KRY_MAXUPD];
    pk_kpair pr[PK_KRY_MAXPAIRS];
    int32_t nupd, np;
    rd_update(p, u, nupd, pr, np);
    rc = do_update(E, nupd, u, np, pr, p[0], p[1] != 0);
    break;
  }
  case OP_MATVEC_UPDATE: {
    const pk_vid x = p[0], y = p[1];
    p += 2;
    pk_kupd u[PK_KRY_MAXUPD];
    pk_kpair pr[PK_KRY_MAXPAIRS];
    int32_t nupd, np;
    rd_update(p, u, nupd, pr, np);
    rc = do_matvec_update(E, x, y, nupd, u, np, pr, p[0], p[1] != 0);
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
    if (D->p2_on) { /* the sums of the CG loop before it and the step in one kernel */
      rc = psum_launch(E, p[0], graph ? p[1] : p[1] + base, graph ? D->argbase : nullptr);
      break;
    }
    k_scalar<<<1, 1, 0, D->st>>>(p[0], D->S, graph ? p[1] : p[1] + base, graph ? D->argbase : nullptr,
                                 D->aux + 1);
    PK_CUDA_CHECK(E->ctx, kSolve, cudaGetLastError(), "scalar step");
    break;
  case OP_CG_PRECOND: {
    pk_coef a;
    a.idx = p[3], a.neg = p[4];
    rc = do_cg_precond(E, p[0], p[1], p[2], a, p[5], p[6], p[7] != 0, sout);
    break;
  }
  case OP_CG_OPERATOR: {
    pk_coef a, b;
    a.idx = p[4], a.neg = p[5], b.idx = p[6], b.neg = p[7];
    rc = do_cg_operator(E, p[0], p[1], p[2], p[3], a, b, p[8], p[9], p[10] != 0, sout);
    break;
  }
  case OP_PIPECG: {
    pk_kpipecg v;
    v.m = p[0], v.z = p[1], v.q = p[2], v.s = p[3], v.p = p[4], v.x = p[5], v.r = p[6], v.u = p[7], v.w = p[8];
    v.n = p[9];
    pk_coef a, b;
    a.idx = p[10], a.neg = p[11], b.idx = p[12], b.neg = p[13];
    rc = do_pipecg(E, &v, a, b, p[14], p[15], p[16], p[17] != 0);
    break;
  }
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
  KryDev *D = dev_of(E);
  std::vector<FoldPlan> plan;
  D->cur_op = 0; /* a graph's first kernel has no kernel before it */
  fold_plan(E, log, plan); /* CG's folded steps (pk_cuda_kry_cg.cu) */
  bool folds = false;
  for (const FoldPlan &f : plan)
    folds = folds || f.act != FP_NONE;
  if (folds && (D->Sc != D->S || D->p2_on)) /* (a block starts with the scalars in S, nothing pending) */
    PK_CALL(psum_flush(E));
  D->fs_pdl = folds && D->pdl;
  size_t i = 0;
  int rc = PKRYLOV_SUCCESS;
  for (size_t o = 0; o < log.size() && rc == PKRYLOV_SUCCESS; o += (size_t)log[o + 1], i++) {
    const int32_t *r = log.data() + o;
    switch (plan[i].act) {
    case FP_DEFER: /* the step runs in the next loop's kernel */
      D->fs_on = 1;
      D->fs_id = r[2];
      D->fs_arg = graph ? r[3] : r[3] + base;
      D->fs_base = graph ? D->argbase : nullptr;
      break;
    case FP_HOST:
      rc = exec_op(E, r, graph, base, plan[i].sout);
      break;
    case FP_SKIP: /* run by the product before it */
      break;
    case FP_HALO: /* pipelined CG on several ranks: m's halo exchange begins after the product */
      rc = exec_op(E, r, graph, base);
      if (rc == PKRYLOV_SUCCESS)
        rc = pk_cuda_dist_halo_begin(D->dop, vp(E, r[3]), D->nccl);
      if (rc == PKRYLOV_SUCCESS)
        D->halo_begun = vp(E, r[3]);
      break;
    default:
      rc = exec_op(E, r, graph, base);
    }
  }
  D->fs_pdl = 0;
  return rc;
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
  if (D->rec_on) {
    D->rec_on = 0;
    const int rc = play(E, D->log, false, D->base);
    D->log.clear();
    PK_CALL(rc);
  }
  return psum_flush(E); /* a CG loop's sums into S */
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
  int rc = play(E, log, true, 0);
  if (rc == PKRYLOV_SUCCESS) /* a block's pending sums are the block's: the graph adds them */
    rc = psum_flush(E);
  cudaError_t e = cudaStreamEndCapture(D->st, &g);
  if (rc == PKRYLOV_SUCCESS && e == cudaSuccess && g) {
    pk_cuda_l2_nodes(&D->l2w, g); /* (none open: nothing) */
    e = cudaGraphInstantiate(&x, g, 0);
  }
  if (g)
    cudaGraphDestroy(g);
  if (rc != PKRYLOV_SUCCESS || e != cudaSuccess)
    x = NULL;
  if (!x) { /* nothing ran: the block is played again from its start, where nothing was pending */
    D->p2_on = 0;
    D->fs_on = 0;
    D->Sc = D->S;
    D->halo_begun = nullptr;
    D->ralt_on = D->ralt0;
  }
  cudaGetLastError();
  return x;
}

/* ---- the backend table ------------------------------------------------------------------------------ */

void kd_destroy(pk_kry *E);

/** CG and pipelined CG: the folded steps (cuda.fold: -1 the CG driver's rule, pk_cuda_fold_auto; 0 off, 1 on;
 *  off with user routines,
 *  several ranks), their programmatic dependent launches (cuda.pdl) and buffers (allocated here, outside any
 *  capture: the other scalar buffers and the second partial-sum buffer). */
int fold_setup(pk_kry *E) {
  KryDev *D = dev_of(E);
  pkrylov_solver s = E->s;
  const bool pcg = s->type == PKRYLOV_SOLVER_PIPECG;
  D->fold_ns = pcg ? (int)PK_PCG_NSCALARS : (int)PK_CG_NSCALARS;
  if (D->fold_ns > (E->nscalars > 0 ? E->nscalars : 1))
    D->fold_ns = E->nscalars > 0 ? E->nscalars : 1;
  D->fold = D->pdl = 0;
  if (pcg && D->dop && !D->ev_scal) { /* the edge columns on the communication stream (dist.edge_comm) */
    cudaError_t e = cudaEventCreateWithFlags(&D->ev_scal, cudaEventDisableTiming);
    if (e == cudaSuccess)
      e = cudaEventCreateWithFlags(&D->ev_edge, cudaEventDisableTiming);
    if (e != cudaSuccess)
      return pk_cuda_error(E->ctx, "pkrylov_solver_solve", (int)e, "creating events", NULL);
  }
  if ((s->type != PKRYLOV_SOLVER_CG && !pcg) || D->uop || D->upc || D->dist)
    return PKRYLOV_SUCCESS;
  int64_t nslots = pk_cuda_partials_needed(&D->op, s->M && !D->upc ? &D->pc : NULL);
  if (nslots < 1)
    nslots = 1;
  const int fm = s->opts.cuda_fold;
  /* the CG driver's rule (with CG's fused 2-D loop, KryDev.ralt, the operator has one level) */
  D->fold = fm >= 0 ? fm != 0
                    : pk_cuda_fold_auto(s->A->type == PKRYLOV_OPERATOR_CSR, E->n, nslots, s->A->nz) != 0;
  if (!D->fold)
    return PKRYLOV_SUCCESS;
  D->pdl = s->opts.cuda_pdl != 0;
  D->part2_cap = D->part_cap;
  cudaError_t e = cudaMalloc((void **)&D->S2, sizeof(double) * (size_t)D->fold_ns);
  if (e == cudaSuccess)
    e = cudaMalloc((void **)&D->S3, sizeof(double) * (size_t)D->fold_ns);
  if (e == cudaSuccess)
    e = cudaMalloc((void **)&D->part2, sizeof(double) * D->part2_cap);
  if (e != cudaSuccess) {
    cudaGetLastError();
    D->fold = D->pdl = 0;
    return pk_cuda_error(E->ctx, "pkrylov_solver_solve", (int)e, "allocating the folded steps' buffers", NULL);
  }
  return PKRYLOV_SUCCESS;
}

/**
 * Cells up to which CG on the engine runs the CG driver's fused 2-D loop (KryDev.ralt). H100, barotropic with
 * the approximate inverse, us per iteration, the engine's two kernels -> the fused loop (unfolded loops as
 * programmatic launches, folded up to the driver's rule): 256^2 10.49 -> 9.21, 512^2 25.43 -> 17.96, 1024^2
 * 65.60 -> 65.04, but 2048^2 229.93 -> 232.44 (and 232.19 -> 234.12 in another run), where the driver's own
 * fused loop runs at 223.5: above it the engine keeps its two kernels until it matches the driver there.
 */
constexpr int64_t kFuseRMaxCells = (int64_t)1 << 21;

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
  D->xfuse_on = s->opts.kry_xfuse != 0; /* auto: one pass */
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
  if (s->type == PKRYLOV_SOLVER_CG) /* 2-D grid stencils: grid-stride launches, as the CG driver's views */
    D->op.gcap = D->op64.gcap = D->pc.op.gcap = pk_cuda_grid2d_cap(n);
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
  if (e == cudaSuccess) /* the shared memory of basis_axpy for the largest k (set once, outside captures) */
    e = basis_axpy_smem(E->nbasis);
  if (e != cudaSuccess) {
    char what[96];
    snprintf(what, sizeof what, "allocating the CUDA engine (%zu vectors of %lld values)", nvec,
             (long long)n);
    return pk_cuda_error(ctx, fn, (int)e, what, NULL);
  }
  if (D->uop)
    D->op.pre = D->op64.pre = D->ax;
  D->Sc = D->S;
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
  PK_CALL(ensure_part(E, cap));
  D->p2_part = D->part;
  D->ralt_vid = -1;
  if (s->type == PKRYLOV_SOLVER_CG && !D->dist && !D->uop && !D->upc && n <= kFuseRMaxCells &&
      pk_cuda_cg_precond_fuses_r(&D->pc)) {
    /* CG's fused 2-D loop (the CG driver's fuse_r): the second array of r */
    e = cudaMalloc((void **)&D->ralt, sizeof(double) * (size_t)E->ld);
    if (e == cudaSuccess)
      e = cudaMemsetAsync(D->ralt, 0, sizeof(double) * (size_t)E->ld, D->st);
    if (e != cudaSuccess)
      return pk_cuda_error(ctx, fn, (int)e, "allocating the CUDA engine (the second array of r)", NULL);
  }
  return fold_setup(E);
}

void kd_destroy(pk_kry *E) {
  KryDev *D = dev_of(E);
  if (!D)
    return;
  cudaStreamSynchronize(D->st); /* queued work may still use the buffers */
  pk_cuda_l2_close(&D->l2w, D->st);
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
  cudaFree(D->ralt);
  cudaFree(D->S);
  cudaFree(D->S2);
  cudaFree(D->S3);
  cudaFree(D->part2);
  if (D->ev_scal)
    cudaEventDestroy(D->ev_scal);
  if (D->ev_edge)
    cudaEventDestroy(D->ev_edge);
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
  cudaFree(D->xblk), cudaFree(D->xacc), cudaFreeHost(D->hxacc), cudaFree(D->xpart);
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
  D->fuse_r = D->ralt && !repro; /* CG's fused 2-D loop: not with the exact sums (the driver's rule) */
  /* its unfolded loops and one-block steps as programmatic dependent launches (cuda.pdl), as the driver's */
  D->upd_pdl = D->fuse_r && !D->fold && E->s->opts.cuda_pdl != 0;
  D->cur_op = 0;
  D->l2_tried = 0;
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
  pk_cuda_l2_close(&D->l2w, D->st); /* (synchronises the stream) */
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
  std::vector<int32_t> rec = {OP_RESIDUAL, 0, x, r, out, E->x_is_zero};
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

/** Append the update list, the pairs, out and the async flag to a record (rd_update reads them back). */
void push_update(pk_kry *E, std::vector<int32_t> &r, int32_t nupd, const pk_kupd *u, int32_t npairs,
                 const pk_kpair *pairs, int32_t out, int32_t flags) {
  r.reserve(r.size() + 6 + (size_t)nupd * (4 + 3 * PK_KRY_MAXTERMS) + 2 * (size_t)npairs);
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
}

int kd_update(pk_kry *E, int32_t nupd, const pk_kupd *u, int32_t npairs, const pk_kpair *pairs, int32_t out,
              int32_t flags) {
  if (nupd <= 0 && npairs <= 0)
    return PKRYLOV_SUCCESS;
  PK_CALL(ensure_gsum(E, (size_t)npairs));
  PK_CALL(ensure_xacc(E, (size_t)npairs));
  std::vector<int32_t> r = {OP_UPDATE, 0};
  push_update(E, r, nupd, u, npairs, pairs, out, flags);
  return submit(E, r);
}

/** y = A x and the update: one OP_MATVEC_UPDATE record (CSR views: one kernel, pk_cuda_kry_fused.cu), else
 *  the two records of kd_matvec and kd_update (the composition the front end would run). */
int kd_matvec_update(pk_kry *E, pk_vid x, pk_vid y, int32_t nupd, const pk_kupd *u, int32_t npairs,
                     const pk_kpair *pairs, int32_t out, int32_t flags) {
  if (!matvec_update_fusable(E)) {
    PK_CALL(kd_matvec(E, x, y));
    return kd_update(E, nupd, u, npairs, pairs, out, flags);
  }
  PK_CALL(ensure_gsum(E, (size_t)npairs));
  PK_CALL(ensure_xacc(E, (size_t)npairs));
  std::vector<int32_t> r = {OP_MATVEC_UPDATE, 0, x, y};
  push_update(E, r, nupd, u, npairs, pairs, out, flags);
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

/* CG's fused loops (pk_cuda_kry_cg.cu): flags keep PK_KRY_IF_RUNNING; the record's async word as kd_update's */

int kd_cg_precond(pk_kry *E, pk_vid r, pk_vid q, pk_vid z, pk_coef alpha, int32_t out, int32_t flags) {
  PK_CALL(ensure_gsum(E, 2));
  PK_CALL(ensure_xacc(E, 2));
  std::vector<int32_t> rec = {OP_CG_PRECOND, 0, r, q, z, alpha.idx, alpha.neg, out, flags & PK_KRY_IF_RUNNING,
                              async_of(E, flags, 2)};
  return submit(E, rec);
}

int kd_cg_operator(pk_kry *E, pk_vid x, pk_vid p, pk_vid z, pk_vid q, pk_coef alpha, pk_coef beta, int32_t out,
                   int32_t flags) {
  PK_CALL(ensure_gsum(E, 1));
  PK_CALL(ensure_xacc(E, 1));
  std::vector<int32_t> rec = {OP_CG_OPERATOR, 0,         x,        p,   z,   q, alpha.idx, alpha.neg, beta.idx,
                              beta.neg,       out,       flags & PK_KRY_IF_RUNNING, async_of(E, flags, 1)};
  return submit(E, rec);
}

int kd_pipecg_update(pk_kry *E, const pk_kpipecg *v, pk_coef alpha, pk_coef beta, int32_t nsums, int32_t out,
                     int32_t flags) {
  PK_CALL(ensure_gsum(E, PK_RR_NV));
  PK_CALL(ensure_xacc(E, PK_RR_NV));
  std::vector<int32_t> rec = {OP_PIPECG, 0,         v->m,     v->z,      v->q,     v->s,  v->p,
                              v->x,      v->r,      v->u,     v->w,      v->n,     alpha.idx, alpha.neg,
                              beta.idx,  beta.neg,  nsums,    out,       flags & PK_KRY_IF_RUNNING,
                              async_of(E, flags, nsums)};
  return submit(E, rec);
}

int kd_wait(pk_kry *E) {
  KryDev *D = dev_of(E);
  if (!D->dist)
    return PKRYLOV_SUCCESS; /* one rank: the sums are in S already */
  D->q_pend = 0;
  std::vector<int32_t> r = {OP_WAIT, 0};
  return submit(E, r);
}

int kd_getv(pk_kry *E, int32_t n, const pk_krange *r) {
  KryDev *D = dev_of(E);
  PK_CALL(flush(E));
  for (int32_t i = 0; i < n; i++) /* hbuf mirrors S (nscalars), so ranges may overlap */
    PK_CUDA_CHECK(E->ctx, kSolve,
                  cudaMemcpyAsync(D->hbuf + r[i].first, D->S + r[i].first, sizeof(double) * (size_t)r[i].count,
                                  cudaMemcpyDeviceToHost, D->st),
                  "reading the scalars");
  PK_CALL(sync_checked(E, "reading the scalars"));
  for (int32_t i = 0; i < n; i++) memcpy(r[i].host, D->hbuf + r[i].first, sizeof(double) * (size_t)r[i].count);
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
  D->ralt0 = D->ralt_on;
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
    PK_CALL(rc);
    return psum_flush(E);
  }
  GraphEntry *g = nullptr;
  for (GraphEntry &c : D->graphs)
    if (c.sig == D->log && c.ralt0 == D->ralt0) {
      g = &c;
      break;
    }
  int rc = PKRYLOV_SUCCESS;
  if (!g) { /* first time: run directly, remember the sequence */
    GraphEntry ne;
    ne.sig = D->log;
    ne.exec = NULL;
    ne.failed = 0;
    ne.ralt0 = D->ralt0;
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
    bool played = false; /* the capture ran the records (on the host): r's array flipped as they did */
    if (!g->exec && !g->failed) {
      g->exec = capture(E, D->log);
      g->failed = g->exec == NULL;
      played = g->exec != NULL;
    }
    if (g->exec) {
      if (D->fuse_r && !played) /* a replay: r ends in the array the graph's fused loops leave it in */
        for (size_t o = 0; o < D->log.size(); o += (size_t)D->log[o + 1])
          if (D->log[o] == OP_CG_PRECOND)
            D->ralt_on ^= 1;
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
  PK_CALL(rc);
  return psum_flush(E); /* as a graph of the block does */
}

} // namespace

extern "C" const pk_kry_backend pk_kry_cuda_backend = {
    kd_create,  kd_destroy,  kd_bind,   kd_unbind,     kd_copy,       kd_first_nonfinite, kd_matvec,
    kd_precond, kd_residual, kd_update, kd_block_dots, kd_basis_dots, kd_basis_axpy,      kd_basis_gemm,
    kd_scalar,  kd_wait,     kd_getv,   kd_set,        kd_sync,       kd_basis_axpy_dots, kd_block_begin,
    kd_block_end,
    kd_cg_precond,
    kd_cg_operator,
    kd_pipecg_update,
    kd_matvec_update, /* one kernel on CSR views (pk_cuda_kry_fused.cu), else the two records */
    NULL}; /* precond_update: the front end composes precond and update */

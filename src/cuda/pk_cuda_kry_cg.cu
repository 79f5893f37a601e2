/**
 * @file pk_cuda_kry_cg.cu
 * @brief CG's fused loops on the CUDA vector engine (pk_kry.h: pk_kry_cg_precond, pk_kry_cg_operator,
 *        pk_kry_pipecg_update) with the kernels of the CG driver (pk_cuda_precond.cu, pk_cuda_steps.cu: the
 *        same launchers, scalars read from the engine's S, pk_cuda_escal), and their partial sums.
 *
 * Sums on one GPU: a loop's kernel writes its partial sums (one slot per block, the launchers' layout) and
 * leaves them pending (KryDev.p2_*): the next operation adds them in the fixed order of the CG driver's
 * one-block scalar kernels (block_sums, pk_cuda_scalar.cuh) into S[out ..], and when that operation is the
 * scalar step that reads them (the CG drivers' order: a loop, then its step), one one-block kernel adds the
 * sums and runs the step: the launches and the arithmetic of the CG driver's unfolded path, so CG's iterates
 * are bitwise that driver's. Any other operation, a host read and the end of a block first add the pending
 * sums alone (k_psum with no step).
 * Several ranks: the rank's sums of the same kernels, made global as every engine sum (sum_into: NCCL or
 * host-staged, added in rank order); operators of several ranks (the distributed grid operators) exchange
 * the halo of the product's input while the columns off the tile edges run (op_in), then the edge columns
 * (op_edge), partial slots after the interior ones. Reproducible mode: the exact sums of the vectors (xsums),
 * the CPU engine's pairs. User routines (operator, preconditioner, the caller's halo exchange): called with
 * device pointers as by the engine's products; under PK_KRY_IF_RUNNING the stop code is read first (a host
 * synchronisation; such solves run one iteration per block), so a routine is not called after a stop.
 */
#include <cuda_runtime.h>
#include <stdint.h>
#include <string.h>

#include "pk_cuda_kry.cuh"
#include "pk_cuda_scalar.cuh"

namespace {

/** The pending sums of NV values (slots of NV) into S[out ..] in the CG driver's order, then the scalar step
 *  id (< 0: none) with arg (+ *base in a graph of a block); an unknown id is remembered in *bad. */
template <int NV>
__global__ void __launch_bounds__(PKC_SUM_LANES)
    k_psum(const double *part, int64_t nb, const double *Sin, double *S, int ns, int out, int id, int arg,
           const int *base, unsigned long long *bad) {
  double v[NV];
  block_sums<NV, NV>(part, nb, v);
  if (threadIdx.x != 0) return;
  if (Sin != S) /* the scalars a folded step left in S2 / S3 back in S first */
    for (int i = 0; i < ns; i++) S[i] = Sin[i];
#pragma unroll
  for (int j = 0; j < NV; j++) S[out + j] = v[j];
  if (id < 0) return;
  if (base) arg += *base;
  if (pk_kry_scalar_step(id, S, arg) < 0) *bad = (unsigned long long)(id + 1);
}

/** The folded steps' scalars back in S (S2 / S3 -> S), one block. */
__global__ void k_scopy(const double *Sin, double *S, int ns) {
  for (int i = threadIdx.x; i < ns; i += blockDim.x) S[i] = Sin[i];
}

pk_cuda_escal escal(pk_kry *E, pk_coef a, pk_coef b, int32_t flags) {
  pk_cuda_escal e;
  memset(&e, 0, sizeof e);
  e.S = pkc_kry::dev_of(E)->Sc; /* after a folded step: the buffer it wrote */
  e.ia = a.idx, e.na = a.neg, e.ib = b.idx, e.nb = b.neg;
  e.stop = (flags & PK_KRY_IF_RUNNING) ? PK_KS_STOP : -1;
  return e;
}

} // namespace

namespace pkc_kry {

int psum_launch(pk_kry *E, int id, int arg, const int *base) {
  KryDev *D = dev_of(E);
  D->p2_on = 0;
  D->fs_on = 0;
  const dim3 g(1), b(PKC_SUM_LANES);
  const double *pp = D->p2_part, *Sin = D->Sc;
  const int ns = D->fold_ns;
  D->Sc = D->S;
  if (id >= 0 && !D->repro) { /* the steps the loops fold: their code in one warp, the scalars in registers
                                 (the generic step below keeps them in S, a chain of dependent loads) */
    pk_cuda_efold f;
    memset(&f, 0, sizeof f);
    f.Sin = Sin, f.Sout = D->S, f.Shome = D->S;
    f.part = pp, f.nb = D->p2_nb;
    f.base = base, f.arg = arg;
    f.pdl = D->upd_pdl && (D->prev_op == OP_CG_PRECOND || D->prev_op == OP_CG_OPERATOR);
    const int e = pk_cuda_psum_step_e(D->st, id, D->p2_nv, D->p2_out, &f);
    if (e != (int)cudaErrorNotSupported) {
      PK_CUDA_CHECK(E->ctx, kSolve, (cudaError_t)e, "summing partials");
      return PKRYLOV_SUCCESS;
    }
  }
  switch (D->p2_nv) {
  case 1: k_psum<1><<<g, b, 0, D->st>>>(pp, D->p2_nb, Sin, D->S, ns, D->p2_out, id, arg, base, D->aux + 1); break;
  case 2: k_psum<2><<<g, b, 0, D->st>>>(pp, D->p2_nb, Sin, D->S, ns, D->p2_out, id, arg, base, D->aux + 1); break;
  case PK_RR_NV_BASE:
    k_psum<PK_RR_NV_BASE>
        <<<g, b, 0, D->st>>>(pp, D->p2_nb, Sin, D->S, ns, D->p2_out, id, arg, base, D->aux + 1);
    break;
  case PK_RR_NV:
    k_psum<PK_RR_NV><<<g, b, 0, D->st>>>(pp, D->p2_nb, Sin, D->S, ns, D->p2_out, id, arg, base, D->aux + 1);
    break;
  default:
    return pk_error(E->ctx, PKRYLOV_ERR_INTERNAL, "pk_kry", "CUDA engine: %d pending sums", D->p2_nv);
  }
  PK_CUDA_CHECK(E->ctx, kSolve, cudaGetLastError(), "summing partials");
  return PKRYLOV_SUCCESS;
}

int psum_flush(pk_kry *E) {
  KryDev *D = dev_of(E);
  if (D->p2_on) /* (a deferred step, which play's plan never leaves here: run it with the sums) */
    return psum_launch(E, D->fs_on ? D->fs_id : -1, D->fs_on ? D->fs_arg : 0, D->fs_on ? D->fs_base : nullptr);
  D->fs_on = 0;
  if (D->Sc == D->S)
    return PKRYLOV_SUCCESS;
  const double *Sin = D->Sc;
  D->Sc = D->S;
  k_scopy<<<1, 64, 0, D->st>>>(Sin, D->S, D->fold_ns);
  PK_CUDA_CHECK(E->ctx, kSolve, cudaGetLastError(), "copying the scalars");
  return PKRYLOV_SUCCESS;
}

double *sbuf(pk_kry *E, int b) {
  KryDev *D = dev_of(E);
  return b == 0 ? D->S : b == 1 ? D->S2 : D->S3;
}


namespace {

/** The sums of a loop's kernel (nb slots of nv values in D->part; the pairs a, b for the exact sums): pending
 *  on one GPU, global (started with async) on several ranks, exact in reproducible mode. */
int loop_sums(pk_kry *E, int64_t nb, int nv, const double *const *a, const double *const *b, int32_t out,
              bool async, double *buf = nullptr) {
  KryDev *D = dev_of(E);
  if (nv <= 0) return PKRYLOV_SUCCESS;
  if (D->repro) return xsums(E, nv, a, b, false, out);
  if (D->dist) return sum_into(E, nb, nv, false, out, async);
  if (!buf) buf = D->part;
  const size_t cap = buf == D->part ? D->part_cap : D->part2_cap;
  if ((size_t)nb * (size_t)nv > cap)
    return pk_error(E->ctx, PKRYLOV_ERR_INTERNAL, "pk_kry", "CUDA engine: %lld partial sums, room for %zu",
                    (long long)nb * nv, cap);
  D->p2_on = 1, D->p2_nv = nv, D->p2_nb = nb, D->p2_out = out, D->p2_part = buf;
  return PKRYLOV_SUCCESS;
}

/** The folded step of the deferred SCALAR (D->fs_*, step id) on the pending sums (nv values for S[out ..]),
 *  written to buffer sout; *wpart: the partial-sum buffer the folded loop writes (the other one). */
int fold_take(pk_kry *E, int id, int nv, int32_t out, int sout, pk_cuda_efold *f, double **wpart) {
  KryDev *D = dev_of(E);
  if (!D->fs_on || D->fs_id != id || !D->p2_on || D->p2_nv != nv || D->p2_out != out)
    return pk_error(E->ctx, PKRYLOV_ERR_INTERNAL, "pk_kry", "CUDA engine: folded step %d out of order", id);
  /* the plan's buffer, unless an operation in between brought the scalars back to S (the minimum-residual
     update between pipelined CG's step and update, CG's unfolded ITER step before it): then another one
     (the block's end moves them back to S) */
  if (sbuf(E, sout) == D->Sc)
    sout = D->Sc == D->S ? 1 : 0;
  memset(f, 0, sizeof *f);
  f->Sin = D->Sc;
  f->Sout = sbuf(E, sout);
  f->Shome = D->S;
  f->part = D->p2_part;
  f->nb = D->p2_nb;
  f->base = D->fs_base;
  f->arg = D->fs_arg;
  f->pdl = D->pdl;
  *wpart = D->p2_part == D->part ? D->part2 : D->part;
  D->p2_on = 0;
  D->fs_on = 0;
  return PKRYLOV_SUCCESS;
}

/** Under PK_KRY_IF_RUNNING before a host routine: *run = 0 when a scalar step stopped the iteration (reads
 *  the stop code: a host synchronisation). */
int running_now(pk_kry *E, int32_t flags, int *run) {
  KryDev *D = dev_of(E);
  *run = 1;
  if (!(flags & PK_KRY_IF_RUNNING)) return PKRYLOV_SUCCESS;
  PK_CUDA_CHECK(E->ctx, kSolve,
                cudaMemcpyAsync(D->hbuf, D->S + PK_KS_STOP, sizeof(double), cudaMemcpyDeviceToHost, D->st),
                "reading the stop code");
  PK_CUDA_CHECK(E->ctx, kSolve, cudaStreamSynchronize(D->st), "reading the stop code");
  *run = D->hbuf[0] == 0.0;
  return PKRYLOV_SUCCESS;
}

} // namespace

int do_cg_precond(pk_kry *E, pk_vid r, pk_vid q, pk_vid z, pk_coef alpha, int32_t out, int32_t flags,
                  bool async, int sout) {
  KryDev *D = dev_of(E);
  double *rv = vp(E, r), *zv = vp(E, z);
  const double *qv = vp(E, q);
  const pk_cuda_escal e = escal(E, alpha, pk_c(PK_S_ZERO), flags);
  const double *a[2] = {rv, rv}, *b[2] = {zv, rv};
  int64_t nb = 0;
  if (D->fuse_r) { /* one GPU, an approximate inverse on a 2-D grid: r -= alpha q in the loop (KryDev.ralt) */
    if (D->ralt_vid != r) {
      if (D->ralt_on)
        return pk_error(E->ctx, PKRYLOV_ERR_INTERNAL, "pk_kry", "CUDA engine: the fused loop's r changed");
      D->ralt_vid = r;
    }
    double *rn = rv == D->ralt ? vp_home(E, r) : D->ralt;
    const double *an[2] = {rn, rn}, *bn[2] = {zv, rn};
    if (sout >= 0) {
      pk_cuda_efold f;
      double *wpart;
      PK_CALL(fold_take(E, PK_KSS_CG_SIGMA, 1, PK_CG_PQ, sout, &f, &wpart));
      PK_CUDA_CHECK(E->ctx, kSolve,
                    pk_cuda_cg_precond_step_r_ef(D->st, &D->pc, &e, &f, rv, rn, qv, zv, wpart, &nb),
                    "CG preconditioner loop (folded)");
      D->Sc = f.Sout;
      D->ralt_on ^= 1;
      return loop_sums(E, nb, 2, an, bn, out, async, wpart);
    }
    const int pdl = D->upd_pdl && D->prev_op == OP_SCALAR;
    PK_CUDA_CHECK(E->ctx, kSolve,
                  pk_cuda_cg_precond_step_r_e(D->st, &D->pc, &e, rv, rn, qv, zv, D->part, &nb, pdl),
                  "CG preconditioner loop");
    D->ralt_on ^= 1;
    return loop_sums(E, nb, 2, an, bn, out, async);
  }
  if (sout >= 0) { /* the operator loop's SIGMA step folded in (the plan: one GPU, no routine) */
    pk_cuda_efold f;
    double *wpart;
    PK_CALL(fold_take(E, PK_KSS_CG_SIGMA, 1, PK_CG_PQ, sout, &f, &wpart));
    PK_CUDA_CHECK(E->ctx, kSolve,
                  pk_cuda_cg_precond_step_ef(D->st, &D->pc, &e, &f, E->n, rv, qv, zv, wpart, &nb),
                  "CG preconditioner loop (folded)");
    D->Sc = f.Sout;
    return loop_sums(E, nb, 2, a, b, out, async, wpart);
  }
  if (D->upc) { /* r -= alpha q; the routine z = M^-1 r; then the sums (r, z), (r, r) by the update kernel */
    PK_CUDA_CHECK(E->ctx, kSolve, pk_cuda_cg_rupdate_e(D->st, &e, E->n, rv, qv), "CG preconditioner loop");
    int run;
    PK_CALL(running_now(E, flags, &run));
    if (!run) return PKRYLOV_SUCCESS;
    PK_CALL(pk_cuda_user_call(E->ctx, E->s->M->user.apply, E->s->M->user.data, E->n, rv, zv, "preconditioner"));
    const pk_kpair pr[2] = {{r, z}, {r, r}};
    return do_update(E, 0, NULL, 2, pr, out, async);
  }
  if (D->dop && D->pc.type == PKRYLOV_PRECOND_AINV) { /* r -= alpha q, r's halo, then z = M^-1 r and the sums */
    PK_CUDA_CHECK(E->ctx, kSolve, pk_cuda_cg_rupdate_e(D->st, &e, E->n, rv, qv), "CG preconditioner loop");
    PK_CALL(pk_cuda_dist_halo(D->dop, rv, D->nccl));
    PK_CUDA_CHECK(E->ctx, kSolve, pk_cuda_cg_precond_after_e(D->st, &D->pc, &e, rv, zv, D->part, &nb),
                  "CG preconditioner loop");
  } else {
    PK_CUDA_CHECK(E->ctx, kSolve, pk_cuda_cg_precond_step_e(D->st, &D->pc, &e, E->n, rv, qv, zv, D->part, &nb),
                  "CG preconditioner loop");
  }
  if (D->dop && !D->repro && (flags & PK_KRY_IF_RUNNING)) {
    /* inside a block, where the operator loop follows: the sums gathered while z's halo travels (the CG
       driver's dist_cg_enqueue); that loop then only ends the exchange */
    PK_CALL(sum_into(E, nb, 2, false, out, true));
    PK_CALL(pk_cuda_dist_halo_begin(D->dop, zv, D->nccl));
    D->halo_begun = zv;
    return do_wait(E);
  }
  return loop_sums(E, nb, 2, a, b, out, async);
}

int do_cg_operator(pk_kry *E, pk_vid x, pk_vid p, pk_vid z, pk_vid q, pk_coef alpha, pk_coef beta, int32_t out,
                   int32_t flags, bool async, int sout) {
  KryDev *D = dev_of(E);
  double *xv = vp(E, x), *pv = vp(E, p), *qv = vp(E, q);
  const double *zv = vp(E, z);
  const pk_cuda_escal e = escal(E, alpha, beta, flags);
  const double *a[1] = {pv}, *b[1] = {qv};
  int64_t nb = 0, nb2 = 0;
  if (sout >= 0) { /* the preconditioner loop's ITER step folded in (the plan: one GPU, no routine) */
    pk_cuda_efold f;
    double *wpart;
    PK_CALL(fold_take(E, PK_KSS_CG_ITER, 2, PK_CG_RZ, sout, &f, &wpart));
    PK_CUDA_CHECK(E->ctx, kSolve, pk_cuda_cg_operator_step_ef(D->st, &D->op, &e, &f, xv, pv, zv, qv, wpart, &nb),
                  "CG operator loop (folded)");
    D->Sc = f.Sout;
    return loop_sums(E, nb, 1, a, b, out, async, wpart);
  }
  if (D->uop) { /* A z by the routine into D->ax, which the launcher reads (D->op.pre) */
    int run;
    PK_CALL(running_now(E, flags, &run));
    if (!run) return PKRYLOV_SUCCESS;
    PK_CALL(uop_apply(E, zv, D->ax));
  }
  if (D->dop) { /* the columns off the tile edges while z's halo travels, then the edge columns */
    if (D->halo_begun != zv)
      PK_CALL(pk_cuda_dist_halo_begin(D->dop, zv, D->nccl));
    D->halo_begun = nullptr;
    PK_CUDA_CHECK(E->ctx, kSolve, pk_cuda_cg_operator_step_e(D->st, &D->op_in, &e, xv, pv, zv, qv, D->part, &nb, 0),
                  "CG operator loop");
    PK_CALL(pk_cuda_dist_halo_end(D->dop, D->nccl));
    PK_CUDA_CHECK(E->ctx, kSolve,
                  pk_cuda_cg_operator_step_e(D->st, &D->op_edge, &e, xv, pv, zv, qv, D->part + nb, &nb2, 0),
                  "CG operator loop (tile edges)");
  } else {
    if (D->fuse_r && !D->l2_tried) { /* the L2 window, once per solve, outside a capture (l2_tried) */
      cudaStreamCaptureStatus cs = cudaStreamCaptureStatusNone;
      const double *vz = vp_home(E, z), *vpp = vp_home(E, p), *vq = vp_home(E, q);
      if (cudaStreamIsCapturing(D->st, &cs) == cudaSuccess && cs == cudaStreamCaptureStatusNone) {
        D->l2_tried = 1;
        const size_t vb = sizeof(double) * (size_t)E->ld;
        if (vpp == vz + E->ld && vq == vpp + E->ld) { /* z, p, q consecutive: q first, then p, z */
          const int m = pk_cuda_l2_vectors(E->s->opts.cuda_l2persist, 1, vb, 3);
          pk_cuda_l2_open(&D->l2w, D->st, vq - (size_t)(m > 0 ? m - 1 : 0) * (size_t)E->ld, m, vb);
        }
      }
      cudaGetLastError();
    }
    const int pdl = D->upd_pdl && D->prev_op == OP_SCALAR;
    PK_CUDA_CHECK(E->ctx, kSolve, pk_cuda_cg_operator_step_e(D->st, &D->op, &e, xv, pv, zv, qv, D->part, &nb, pdl),
                  "CG operator loop");
  }
  return loop_sums(E, nb + nb2, 1, a, b, out, async);
}

int do_pipecg(pk_kry *E, const pk_kpipecg *v, pk_coef alpha, pk_coef beta, int32_t nsums, int32_t out,
              int32_t flags, bool async) {
  KryDev *D = dev_of(E);
  double *z = vp(E, v->z), *q = vp(E, v->q), *s = vp(E, v->s), *p = vp(E, v->p), *x = vp(E, v->x),
         *r = vp(E, v->r), *u = vp(E, v->u), *w = vp(E, v->w);
  const double *m = vp(E, v->m);
  const pk_cuda_escal e = escal(E, alpha, beta, flags);
  const int norms = nsums == PK_RR_NV, nv = norms ? PK_RR_NV : PK_RR_NV_BASE; /* slots of nv values */
  const double *a[PK_RR_NV] = {r, w, r, x, p, u, q}, *b[PK_RR_NV] = {u, u, r, x, p, u, q};
  int64_t nb = 0, nb2 = 0;
  pk_cuda_op op = D->op;
  if (v->n >= 0 || D->uop) { /* n = A m made before (the driver's product), or now by the routine */
    if (v->n < 0) {
      int run;
      PK_CALL(running_now(E, flags, &run));
      if (!run) return PKRYLOV_SUCCESS;
      PK_CALL(uop_apply(E, m, D->ax));
    }
    memset(&op, 0, sizeof op); /* a USER view: the launcher reads (A m)[cell] from pre */
    op.type = PKRYLOV_OPERATOR_USER;
    op.n = E->n;
    op.wet = D->op64.wet;
    op.pre = v->n >= 0 ? vp(E, v->n) : D->ax;
  } else if (D->dop) {
    /* the columns off the tile edges while m's halo travels (begun after m = M^-1 w when the plan saw this
       update follow it), then the edge columns: NCCL (dist.edge_comm), on the communication stream behind
       the halos and beside the interior columns, what follows waiting for them (dist_pipecg_enqueue) */
    if (D->halo_begun != m)
      PK_CALL(pk_cuda_dist_halo_begin(D->dop, m, D->nccl));
    D->halo_begun = nullptr;
    void *ecomm = nullptr;
    if (D->nccl && !D->repro && E->ctx->opts.dist_edge_comm && D->ev_scal) {
      PK_CALL(pk_cuda_dist_halo_end_comm(D->dop, &ecomm));
      if (ecomm) { /* the edge update after the scalar step (and the halos) */
        PK_CUDA_CHECK(E->ctx, kSolve, cudaEventRecord(D->ev_scal, D->st), "event");
        PK_CUDA_CHECK(E->ctx, kSolve, cudaStreamWaitEvent((cudaStream_t)ecomm, D->ev_scal, 0), "event");
      }
    }
    PK_CUDA_CHECK(E->ctx, kSolve,
                  pk_cuda_pipecg_step_e(D->st, &D->op_in, &e, m, z, q, s, p, x, r, u, w, D->part, &nb, norms, 0),
                  "pipelined CG update");
    if (!ecomm)
      PK_CALL(pk_cuda_dist_halo_end(D->dop, D->nccl));
    PK_CUDA_CHECK(E->ctx, kSolve,
                  pk_cuda_pipecg_step_e(ecomm ? ecomm : D->st, &D->op_edge, &e, m, z, q, s, p, x, r, u, w,
                                        D->part + nv * nb, &nb2, norms, 0),
                  "pipelined CG update (tile edges)");
    if (ecomm) { /* the sums and what follows on the context's stream wait for the edge columns */
      PK_CUDA_CHECK(E->ctx, kSolve, cudaEventRecord(D->ev_edge, (cudaStream_t)ecomm), "event");
      PK_CUDA_CHECK(E->ctx, kSolve, cudaStreamWaitEvent(D->st, D->ev_edge, 0), "event");
    }
    return loop_sums(E, nb + nb2, nsums, a, b, out, async);
  }
  PK_CUDA_CHECK(E->ctx, kSolve,
                pk_cuda_pipecg_step_e(D->st, &op, &e, m, z, q, s, p, x, r, u, w, D->part, &nb, norms, D->fs_pdl),
                "pipelined CG update");
  return loop_sums(E, nb, nsums, a, b, out, async);
}

} // namespace pkc_kry

namespace pkc_kry {

int do_pc_apply_fold(pk_kry *E, pk_vid x, pk_vid y, const int32_t *sc, bool graph, int32_t base, int sout) {
  KryDev *D = dev_of(E);
  D->fs_on = 1; /* the SCALAR record after the product, run in it */
  D->fs_id = sc[2];
  D->fs_arg = graph ? sc[3] : sc[3] + base;
  D->fs_base = graph ? D->argbase : nullptr;
  const int nv = D->p2_nv;
  pk_cuda_efold f;
  double *wpart;
  PK_CALL(fold_take(E, PK_KSS_PCG_SUMS, nv == PK_RR_NV ? PK_RR_NV : PK_RR_NV_BASE, PK_PCG_GAMMA, sout, &f, &wpart));
  pk_cuda_escal e;
  memset(&e, 0, sizeof e);
  e.ia = e.ib = -2; /* (m = M^-1 w needs no coefficient) */
  e.stop = -1;      /* m written also once stopped, as by the unfolded product */
  PK_CUDA_CHECK(E->ctx, kSolve, pk_cuda_pc_apply_ef(D->st, &D->pc, &e, &f, nv == PK_RR_NV, vp(E, x), vp(E, y)),
                "m = M^-1 w (folded)");
  D->Sc = f.Sout;
  return PKRYLOV_SUCCESS;
}

} // namespace pkc_kry

/**
 * @file pk_cuda_steps.cu
 * @brief The fused steps of CG and pipelined CG (pk_cuda.h): the CG operator loop (ActCgOp), the pipelined-CG
 *        update with and without a preconditioner (ActPipe, ActPipeNone) over launch_op (pk_cuda_op.cuh),
 *        and the one-block scalar steps (k_scalar; folded into the step kernels: pk_cuda_scalar.cuh). The
 *        CG preconditioner loop is in pk_cuda_precond.cu. See pk_cuda_dev.cuh for the overview.
 */
/* the CUDA engine's folded steps (pk_cuda_scalar.cuh) run the scalar steps without the history ring, whose
   entry their writer makes: every index of a thread's copy of the scalars known at compile time */
#define PK_KS_NO_RING 1
#include <cuda_runtime.h>

#include <stdint.h>

#include "pk_cuda.h"
#include "pk_cuda_dev.cuh"
#include "pk_cuda_op.cuh"
#include "pk_cuda_scalar.cuh"
#include "pk_cuda_xsum.cuh"
#include "pkrylov.h"

using namespace pkc_xsum;

namespace {

/* reproducible mode, one pass: the block's exact accumulators of the XR actions below (pk_cuda_xsum.cuh;
   only their kernels reference it) */
__shared__ xslot cgx_sh[PK_RR_NV * PK_XACC_LEN];

/** One-block scalar step: in.st -> in.out (may be the same), PKC_SUM_LANES threads. */
template <int FOLD> __global__ void __launch_bounds__(PKC_SUM_LANES) k_scalar(StepInT<FOLD> in, int init) {
  step_wait();
  pk_cuda_state s;
  if constexpr (FOLD == FOLD_PIPE_RR) {
    /* the three dots, then the rule's four norms (the same sums as all seven at once: each value is added on
       its own) */
    double v[FoldNV<FOLD>::NV], w[PK_RR_NV - PK_RR_NV_BASE];
    block_sums<FoldNV<FOLD>::NV, PK_RR_NV>(in.part, in.nb, v);
    block_sums<PK_RR_NV - PK_RR_NV_BASE, PK_RR_NV>(in.part + PK_RR_NV_BASE, in.nb, w);
    if (threadIdx.x != 0) return;
    s = *in.st;
    if (s.repl) {
      pk_rr_est est = *s.repl;
      scalar_update<FOLD>(s, v, w, &est, in.hist, init);
      *s.repl = est;
    } else {
      scalar_update<FOLD>(s, v, nullptr, nullptr, in.hist, init);
    }
  } else {
    double v[FoldNV<FOLD>::NV];
    block_sums<FoldNV<FOLD>::NV>(in.part, in.nb, v);
    if (threadIdx.x != 0) return;
    s = *in.st;
    scalar_update<FOLD>(s, v, nullptr, nullptr, in.hist, init);
  }
  *in.out = s;
}

/**
 * CG operator loop (pk_cpu_cg_operator_step): x += alpha p; p = z + beta p; q = A z + beta q; acc (p, q).
 * init: alpha = beta = 0 with p and q not read (the CPU's zeroed p, q: p = z + 0, q = A z + 0) and x not
 * touched. FOLD_CG_RHO: the scalar step after the preconditioner loop first (beta from it). XR_: (p, q)
 * summed exactly in the same pass (reproducible mode, pk_cuda_xsum.cuh; FOLD_NONE only).
 */
template <int FOLD, bool XR_ = false> struct ActCgOp {
  static constexpr bool XR = XR_;
  static constexpr int NV = XR ? XS_K : 1;
  /* measured on an H200 (thin shell; 32^3, 64^3, 128^2 x 64, 256^2 x 128 cells, us): no prefetch and the
     default budget (74 registers) 2.97 6.9 17.5 177; no prefetch, 4 blocks (64) 2.99 5.1 11.8 154;
     prefetch, 2 blocks (110) 2.53 5.7 13.6 148; prefetch, 3 blocks (80 + spills) 3.09 7.5 19.4 148 */
  static constexpr int MINB = 2;
  static constexpr bool PREFETCH = true;
  /* the column stencil from 2^21 cells: the column walk (k_stencil, 98 registers) holds the vertical
     neighbours in registers; a thread per cell (k_stencil_cells, 80) read 2 words per cell more from DRAM
     and took 533 us against 528 at 256 x 256 x 128 on an H100 */
  static constexpr bool COLUMNS = true;
  struct In {
    double p, q, x;
  };
  StepInT<FOLD> sin;
  int init;
  double *x, *p, *q;
  double alpha, beta;
  __device__ bool begin() {
    if constexpr (XR) xs_begin(cgx_sh, 1);
    step_wait();
    double a, b;
    if (!step_scalars<FOLD>(sin, a, b)) return false;
    alpha = init ? 0.0 : a;
    beta = init ? 0.0 : b;
    return true;
  }
  __device__ In load(int64_t c) const {
    In in = {0.0, 0.0, 0.0};
    if (!init) in.p = p[c], in.q = q[c], in.x = x[c];
    return in;
  }
  __device__ void l2pf(int64_t c) const {
    if (!init) l2_prefetch(p + c), l2_prefetch(q + c), l2_prefetch(x + c);
  }
  __device__ void operator()(int64_t c, double az, double zc, const In &in, double *acc) const {
    double pn, qn;
    if (init) {
      pn = zc + 0.0; /* z + 0 * 0 as on the CPU (turns -0 into +0 like it) */
      qn = az + 0.0;
    } else {
      const double pi = in.p;
      x[c] = in.x + alpha * pi;
      pn = zc + beta * pi;
      qn = az + beta * in.q;
    }
    p[c] = pn;
    q[c] = qn;
    xs_acc<XR>(acc, 0, pn, qn, cgx_sh);
  }
  static __device__ __forceinline__ void xfinish(const double *acc, double *part) {
    xs_end<1>(acc, cgx_sh, part, block_slot());
  }
};

/**
 * Pipelined CG update (pk_cpu_pipecg_step) with n = A m: z = n + beta z; q = m + beta q; s = w + beta s;
 * p = u + beta p; x += alpha p; r -= alpha s; u -= alpha q; w -= alpha z; acc (r,u), (w,u), (r,r), and with
 * NORMS the automatic residual replacement's (x,x), (p,p), (u,u), (q,q): slots of NV values (the four sums
 * more cost registers and a fifth of the update's time at small sizes, and slots of 7 read at a stride of 7
 * a tenth of the folded barotropic iteration at 256^2: only the automatic rule has them).
 */
template <bool NORMS, bool ENG = false, bool XR_ = false> struct ActPipe {
  static constexpr bool XR = XR_; /* the sums exact in the same pass (reproducible mode; not ENG) */
  static constexpr int NS = NORMS ? PK_RR_NV : PK_RR_NV_BASE;
  static constexpr int NV = XR ? XS_K * NS : NS;
  static constexpr int MINB = PKC_MINB_HEAVY;
  static constexpr bool PREFETCH = false; /* 8 inputs: ahead they would cost 16 more registers (spills) */
  struct In {};
  const pk_cuda_state *st; /* not NULL, unless ENG */
  double *z, *q, *s, *p, *x, *r, *u, *w;
  double alpha, beta;
  pk_cuda_escal e; /* ENG: the CUDA engine's scalars */
  __device__ bool begin() {
    if constexpr (XR) xs_begin(cgx_sh, NS);
    step_wait();
    if constexpr (ENG) return escal_read(e, alpha, beta);
    if (st->status != PK_ST_RUNNING) return false;
    alpha = st->alpha;
    beta = st->beta;
    return true;
  }
  __device__ In load(int64_t) const { return In{}; }
  __device__ void l2pf(int64_t c) const {
    l2_prefetch(u + c), l2_prefetch(w + c), l2_prefetch(z + c), l2_prefetch(q + c), l2_prefetch(s + c),
        l2_prefetch(p + c), l2_prefetch(r + c), l2_prefetch(x + c);
  }
  __device__ void operator()(int64_t c, double an, double mc, const In &, double *acc) const {
    const double uo = u[c], wo = w[c];
    const double zi = an + beta * z[c];
    const double qi = mc + beta * q[c];
    const double si = wo + beta * s[c];
    const double pi = uo + beta * p[c];
    const double ri = r[c] - alpha * si;
    const double ui = uo - alpha * qi;
    const double wi = wo - alpha * zi;
    z[c] = zi, q[c] = qi, s[c] = si, p[c] = pi;
    const double xi = x[c] + alpha * pi;
    x[c] = xi;
    r[c] = ri, u[c] = ui, w[c] = wi;
    xs_acc<XR>(acc, 0, ri, ui, cgx_sh);
    xs_acc<XR>(acc, 1, wi, ui, cgx_sh);
    xs_acc<XR>(acc, 2, ri, ri, cgx_sh);
    if constexpr (NORMS) {
      xs_acc<XR>(acc, 3, xi, xi, cgx_sh); /* the automatic residual replacement's norms (pk_rr.h) */
      xs_acc<XR>(acc, 4, pi, pi, cgx_sh);
      xs_acc<XR>(acc, 5, ui, ui, cgx_sh);
      xs_acc<XR>(acc, 6, qi, qi, cgx_sh);
    }
  }
  static __device__ __forceinline__ void xfinish(const double *acc, double *part) {
    xs_end<NS>(acc, cgx_sh, part, block_slot());
  }
};

/**
 * Pipelined CG update without a preconditioner (M = I), n = A w_old (the operator kernel's input vector is
 * w_old, its value at the cell comes in as wo). With M = I the general update keeps u == r, q == s and
 * m == w bitwise (the same expressions on the same operands), so only x, r, w, z, s, p are carried:
 * z = n + beta z; s = w_old + beta s; p = r + beta p; x += alpha p; r -= alpha s; w_new = w_old - alpha z;
 * acc (r,r), (w_new,r), (r,r), and with NORMS (x,x), (p,p), (r,r), (s,s): ActPipe's sums with u = r and
 * q = s, so every partial sum and scalar is bitwise the general path's. w_new goes to another array than
 * w_old (the kernel reads w_old's neighbours).
 */
template <bool NORMS, bool ENG = false> struct ActPipeNone {
  static constexpr int NV = NORMS ? PK_RR_NV : PK_RR_NV_BASE;
  static constexpr int MINB = PKC_MINB_HEAVY;
  static constexpr bool PREFETCH = false;
  struct In {};
  const pk_cuda_state *st; /* not NULL, unless ENG */
  double *z, *s, *p, *x, *r, *wn;
  double alpha, beta;
  pk_cuda_escal e; /* ENG: the CUDA engine's scalars */
  __device__ bool begin() {
    step_wait();
    if constexpr (ENG) return escal_read(e, alpha, beta);
    if (st->status != PK_ST_RUNNING) return false;
    alpha = st->alpha;
    beta = st->beta;
    return true;
  }
  __device__ In load(int64_t) const { return In{}; }
  __device__ void l2pf(int64_t c) const {
    l2_prefetch(r + c), l2_prefetch(z + c), l2_prefetch(s + c), l2_prefetch(p + c), l2_prefetch(x + c);
  }
  __device__ void operator()(int64_t c, double an, double wo, const In &, double *acc) const {
    const double ro = r[c];
    const double zi = an + beta * z[c];
    const double si = wo + beta * s[c];
    const double pi = ro + beta * p[c];
    const double ri = ro - alpha * si;
    const double wi = wo - alpha * zi;
    z[c] = zi, s[c] = si, p[c] = pi;
    const double xi = x[c] + alpha * pi;
    x[c] = xi;
    r[c] = ri, wn[c] = wi;
    acc[0] += ri * ri;
    acc[1] += wi * ri;
    acc[2] += ri * ri;
    if constexpr (NORMS) {
      acc[3] += xi * xi; /* (x,x), (p,p), (u,u) = (r,r), (q,q) = (s,s) */
      acc[4] += pi * pi;
      acc[5] += ri * ri;
      acc[6] += si * si;
    }
  }
};

/** The CUDA engine's one-block step after a CG loop (pk_cuda_psum_step_e): the sums of the one-block kernels
 *  (block_sums), then thread 0 runs the folded steps' code (efold_step: the scalars in registers, every index
 *  known at compile time) on its copy and writes it back (f.Sout may be f.Sin: only thread 0 reads it). */
template <int FOLD> __global__ void __launch_bounds__(PKC_SUM_LANES) k_epsum(pk_cuda_efold f) {
  constexpr int NS = EFold<FOLD>::NS, OUT = EFold<FOLD>::OUT, NV = FoldNV<FOLD>::NV;
  double v[NV], w[PK_RR_NV - PK_RR_NV_BASE];
  (void)w;
  step_wait(); /* launched programmatically (f.pdl): the loop before has written the sums */
  block_sums<NV, FoldNV<FOLD>::S>(f.part, f.nb, v);
  if constexpr (FOLD == FOLD_E_PIPE_RR) /* the rule's norms (each value summed on its own, as above) */
    block_sums<PK_RR_NV - PK_RR_NV_BASE, PK_RR_NV>(f.part + PK_RR_NV_BASE, f.nb, w);
  if (threadIdx.x != 0) return;
  double loc[NS];
#pragma unroll
  for (int i = 0; i < NS; i++) loc[i] = f.Sin[i];
#pragma unroll
  for (int j = 0; j < NV; j++) loc[OUT + j] = v[j];
  if constexpr (FOLD == FOLD_E_PIPE_RR)
#pragma unroll
    for (int j = 0; j < PK_RR_NV - PK_RR_NV_BASE; j++) loc[OUT + PK_RR_NV_BASE + j] = w[j];
  efold_step<FOLD>(loc, f, true);
}

} // namespace

/* ---- launchers (pk_cuda.h) ---------------------------------------------------------------------- */

extern "C" int pk_cuda_psum_step_e(void *stream, int id, int nv, int out, const pk_cuda_efold *f) {
  if (!f) return (int)cudaErrorInvalidValue;
  const cudaStream_t st = (cudaStream_t)stream;
  const dim3 g(1), b(PKC_SUM_LANES);
  /* f->pdl: CG's fused 2-D loop, unfolded (launch_kernel without it is the plain launch) */
  if (id == PK_KSS_CG_SIGMA && nv == 1 && out == PK_CG_PQ)
    return launch_kernel(f->pdl != 0, k_epsum<FOLD_E_CG_SIGMA>, g, b, 0, st, *f);
  if (id == PK_KSS_CG_ITER && nv == 2 && out == PK_CG_RZ)
    return launch_kernel(f->pdl != 0, k_epsum<FOLD_E_CG_ITER>, g, b, 0, st, *f);
  if (id == PK_KSS_PCG_SUMS && nv == PK_RR_NV_BASE && out == PK_PCG_GAMMA)
    k_epsum<FOLD_E_PIPE><<<g, b, 0, st>>>(*f);
  else if (id == PK_KSS_PCG_SUMS && nv == PK_RR_NV && out == PK_PCG_GAMMA)
    k_epsum<FOLD_E_PIPE_RR><<<g, b, 0, st>>>(*f);
  else
    return (int)cudaErrorNotSupported;
  return (int)cudaGetLastError();
}

/** The CG operator loop with the scalar step FOLD first; XR: (p, q) exact (part: the blocks' accumulators). */
template <int FOLD, bool XR = false>
int cg_operator_step(cudaStream_t s, const pk_cuda_op *op, const StepInT<FOLD> &sin, int init, double *x, double *p,
                     const double *z, double *q, double *part, int64_t *nblocks, bool pdl) {
  ActCgOp<FOLD, XR> act;
  act.sin = sin;
  act.init = init;
  act.x = x, act.p = p, act.q = q;
  act.alpha = act.beta = 0.0;
  return launch_op(s, op, z, act, part, nblocks, pdl);
}

extern "C" int pk_cuda_cg_operator_step(void *stream, const pk_cuda_op *op, const pk_cuda_state *st, int init,
                                        double *x, double *p, const double *z, double *q, double *part,
                                        int64_t *nblocks, int pdl) {
  return cg_operator_step<FOLD_NONE>((cudaStream_t)stream, op, step_in(st), init, x, p, z, q, part, nblocks,
                                     pdl != 0);
}

extern "C" int pk_cuda_cg_operator_step_x(void *stream, const pk_cuda_op *op, const pk_cuda_state *st, int init,
                                          double *x, double *p, const double *z, double *q, int64_t *xblk,
                                          int64_t *nblocks) {
  if (!st || !xblk) return (int)cudaErrorInvalidValue;
  return cg_operator_step<FOLD_NONE, true>((cudaStream_t)stream, op, step_in(st), init, x, p, z, q, (double *)xblk,
                                           nblocks, false);
}

extern "C" int pk_cuda_cg_operator_step_fold(void *stream, const pk_cuda_op *op, const pk_cuda_fold *fold,
                                             double *x, double *p, const double *z, double *q, double *part,
                                             int64_t *nblocks) {
  if (!fold) return (int)cudaErrorInvalidValue;
  return cg_operator_step<FOLD_CG_RHO>((cudaStream_t)stream, op, step_in(fold), 0, x, p, z, q, part, nblocks,
                                       fold->pdl != 0);
}

namespace {
template <bool NORMS, bool XR = false>
int pipecg_step(cudaStream_t stream, const pk_cuda_op *op, const pk_cuda_state *st, const double *m, double *z,
                double *q, double *s, double *p, double *x, double *r, double *u, double *w, double *part,
                int64_t *nblocks, bool pdl) {
  ActPipe<NORMS, false, XR> act;
  act.st = st;
  act.z = z, act.q = q, act.s = s, act.p = p, act.x = x, act.r = r, act.u = u, act.w = w;
  act.alpha = act.beta = 0.0;
  return launch_op(stream, op, m, act, part, nblocks, pdl);
}

template <bool NORMS, bool ENG = false>
int pipecg_none_step(cudaStream_t stream, const pk_cuda_op *op, const pk_cuda_state *st, const pk_cuda_escal *e,
                     const double *w_old, double *z, double *s, double *p, double *x, double *r, double *w_new,
                     double *part, int64_t *nblocks) {
  ActPipeNone<NORMS, ENG> act;
  act.st = st;
  if constexpr (ENG) act.e = *e; /* the CUDA engine's scalars, or the driver's state */
  act.z = z, act.s = s, act.p = p, act.x = x, act.r = r, act.wn = w_new;
  act.alpha = act.beta = 0.0;
  return launch_op(stream, op, w_old, act, part, nblocks);
}
} // namespace

extern "C" int pk_cuda_pipecg_step_pdl(void *stream, const pk_cuda_op *op, const pk_cuda_state *st,
                                       const double *m, double *z, double *q, double *s, double *p, double *x,
                                       double *r, double *u, double *w, double *part, int64_t *nblocks,
                                       int norms, int pdl) {
  if (!st) return (int)cudaErrorInvalidValue;
  return norms ? pipecg_step<true>((cudaStream_t)stream, op, st, m, z, q, s, p, x, r, u, w, part, nblocks,
                                   pdl != 0)
               : pipecg_step<false>((cudaStream_t)stream, op, st, m, z, q, s, p, x, r, u, w, part, nblocks,
                                    pdl != 0);
}

extern "C" int pk_cuda_pipecg_step_x(void *stream, const pk_cuda_op *op, const pk_cuda_state *st, const double *m,
                                     double *z, double *q, double *s, double *p, double *x, double *r, double *u,
                                     double *w, int64_t *xblk, int64_t *nblocks, int norms) {
  if (!st || !xblk) return (int)cudaErrorInvalidValue;
  return norms ? pipecg_step<true, true>((cudaStream_t)stream, op, st, m, z, q, s, p, x, r, u, w, (double *)xblk,
                                         nblocks, false)
               : pipecg_step<false, true>((cudaStream_t)stream, op, st, m, z, q, s, p, x, r, u, w, (double *)xblk,
                                          nblocks, false);
}

extern "C" int pk_cuda_pipecg_none_step(void *stream, const pk_cuda_op *op, const pk_cuda_state *st,
                                        const double *w_old, double *z, double *s, double *p, double *x,
                                        double *r, double *w_new, double *part, int64_t *nblocks, int norms) {
  if (!st || w_old == w_new) return (int)cudaErrorInvalidValue;
  return norms ? pipecg_none_step<true>((cudaStream_t)stream, op, st, nullptr, w_old, z, s, p, x, r, w_new, part,
                                        nblocks)
               : pipecg_none_step<false>((cudaStream_t)stream, op, st, nullptr, w_old, z, s, p, x, r, w_new, part,
                                         nblocks);
}

extern "C" int pk_cuda_pipecg_step(void *stream, const pk_cuda_op *op, const pk_cuda_state *st,
                                   const double *m, double *z, double *q, double *s, double *p, double *x,
                                   double *r, double *u, double *w, double *part, int64_t *nblocks, int norms) {
  return pk_cuda_pipecg_step_pdl(stream, op, st, m, z, q, s, p, x, r, u, w, part, nblocks, norms, 0);
}

/** One-block scalar step FOLD: in -> out. */
template <int FOLD>
int scalar_launch(void *stream, const pk_cuda_state *in, pk_cuda_state *out, const double *part, int64_t nb,
                  double *hist, int init, bool pdl = false) {
  StepIn sin = {};
  sin.st = in;
  sin.out = out;
  sin.part = part;
  sin.nb = nb;
  sin.hist = hist;
  return launch_kernel(pdl, k_scalar<FOLD>, dim3(1), dim3(PKC_SUM_LANES), 0, (cudaStream_t)stream, sin, init);
}

extern "C" int pk_cuda_cg_scalar_rho(void *stream, const pk_cuda_state *in, pk_cuda_state *out,
                                     const double *part, int64_t nblocks, double *hist, int init, int pdl) {
  return scalar_launch<FOLD_CG_RHO>(stream, in, out, part, nblocks, hist, init, pdl != 0);
}

extern "C" int pk_cuda_cg_scalar_sigma(void *stream, const pk_cuda_state *in, pk_cuda_state *out,
                                       const double *part, int64_t nblocks, int pdl) {
  return scalar_launch<FOLD_CG_SIGMA>(stream, in, out, part, nblocks, nullptr, 0, pdl != 0);
}

extern "C" int pk_cuda_pipecg_scalar(void *stream, const pk_cuda_state *in, pk_cuda_state *out,
                                     const double *part, int64_t nblocks, double *hist, int repl) {
  if (repl) return scalar_launch<FOLD_PIPE_RR>(stream, in, out, part, nblocks, hist, 0);
  return scalar_launch<FOLD_PIPE>(stream, in, out, part, nblocks, hist, 0);
}

/* ---- the CUDA engine's CG operator loop and pipelined-CG update (pk_cuda_kry_cg.cu): scalars from its S -- */

extern "C" int pk_cuda_cg_operator_step_e(void *stream, const pk_cuda_op *op, const pk_cuda_escal *e, double *x,
                                          double *p, const double *z, double *q, double *part, int64_t *nblocks,
                                          int pdl) {
  if (!e || !e->S) return (int)cudaErrorInvalidValue;
  return cg_operator_step<FOLD_E_NONE>((cudaStream_t)stream, op, step_in(e), 0, x, p, z, q, part, nblocks, pdl != 0);
}

namespace {
template <bool NORMS>
int pipecg_step_e(cudaStream_t stream, const pk_cuda_op *op, const pk_cuda_escal *e, const double *m, double *z,
                  double *q, double *s, double *p, double *x, double *r, double *u, double *w, double *part,
                  int64_t *nblocks, bool pdl) {
  ActPipe<NORMS, true> act;
  act.st = nullptr;
  act.e = *e;
  act.z = z, act.q = q, act.s = s, act.p = p, act.x = x, act.r = r, act.u = u, act.w = w;
  act.alpha = act.beta = 0.0;
  return launch_op(stream, op, m, act, part, nblocks, pdl);
}

} // namespace

extern "C" int pk_cuda_pipecg_none_step_e(void *stream, const pk_cuda_op *op, const pk_cuda_escal *e,
                                          const double *w_old, double *z, double *s, double *p, double *x, double *r,
                                          double *w_new, double *part, int64_t *nblocks, int norms) {
  if (!e || !e->S || w_old == w_new) return (int)cudaErrorInvalidValue;
  return norms ? pipecg_none_step<true, true>((cudaStream_t)stream, op, nullptr, e, w_old, z, s, p, x, r, w_new,
                                              part, nblocks)
               : pipecg_none_step<false, true>((cudaStream_t)stream, op, nullptr, e, w_old, z, s, p, x, r, w_new,
                                               part, nblocks);
}

extern "C" int pk_cuda_cg_operator_step_ef(void *stream, const pk_cuda_op *op, const pk_cuda_escal *e,
                                           const pk_cuda_efold *f, double *x, double *p, const double *z, double *q,
                                           double *part, int64_t *nblocks) {
  if (!e || !f || f->Sin == f->Sout) return (int)cudaErrorInvalidValue;
  return cg_operator_step<FOLD_E_CG_ITER>((cudaStream_t)stream, op, step_in(e, f), 0, x, p, z, q, part, nblocks,
                                          f->pdl != 0);
}

extern "C" int pk_cuda_pipecg_step_e(void *stream, const pk_cuda_op *op, const pk_cuda_escal *e, const double *m,
                                     double *z, double *q, double *s, double *p, double *x, double *r, double *u,
                                     double *w, double *part, int64_t *nblocks, int norms, int pdl) {
  if (!e || !e->S) return (int)cudaErrorInvalidValue;
  return norms ? pipecg_step_e<true>((cudaStream_t)stream, op, e, m, z, q, s, p, x, r, u, w, part, nblocks,
                                     pdl != 0)
               : pipecg_step_e<false>((cudaStream_t)stream, op, e, m, z, q, s, p, x, r, u, w, part, nblocks,
                                      pdl != 0);
}

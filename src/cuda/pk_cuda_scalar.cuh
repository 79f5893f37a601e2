/**
 * @file pk_cuda_scalar.cuh
 * @brief The scalar steps of CG and pipelined CG on the device (pk_cuda.h): the fixed-order sums of the
 *        partial slots and the recurrences of cg.c (kry_scalar_pcg.h), run by the one-block kernels (pk_cuda_steps.cu,
 *        k_scalar) or folded into the step kernels that follow them (step_scalars: pk_cuda_steps.cu,
 *        pk_cuda_precond.cu). See pk_cuda_dev.cuh for the overview.
 */
#ifndef PK_CUDA_SCALAR_CUH
#define PK_CUDA_SCALAR_CUH

#include "kry_scalar.h" /* the CUDA engine's scalar steps (its folded steps: FOLD_E_*; PK_KS_NO_RING) */
#include "pk_cuda_dev.cuh"

#include <type_traits>

namespace {

/* ---- the scalar steps (pk_cuda.h), run by one block or folded into every block of a step -------- */

/** Which scalar step a step kernel runs first (template argument FOLD). */
enum { FOLD_NONE = 0, FOLD_CG_SIGMA = 1, FOLD_CG_RHO = 2, FOLD_PIPE = 3, FOLD_PIPE_RR = 4 };
/* the CUDA engine's folded steps (pk_cuda_efold, scalars in its S): PK_KSS_CG_SIGMA, PK_KSS_CG_ITER,
   PK_KSS_PCG_SUMS without and with the automatic residual replacement; the same sums as FOLD_CG_SIGMA ..
   FOLD_PIPE_RR */
enum { FOLD_E_CG_SIGMA = 5, FOLD_E_CG_ITER = 6, FOLD_E_PIPE = 7, FOLD_E_PIPE_RR = 8 };
/* the CUDA engine's unfolded loops: no step first, alpha, beta and the stop read from the engine's scalars
   (StepIn.e); its own instances, so that the CG driver's (FOLD_NONE) are those of before the engine */
enum { FOLD_E_NONE = -1 };
/* FOLD_PIPE_RR: pipelined CG's scalar step with the automatic residual replacement's rule (pk_rr.h), a
   separate instantiation so that the kernels of every other setting carry none of its code (with it the
   folded pipelined CG kernels of the thin shell 32^3 took 9.3 us an iteration instead of 7.5, H100) */

/** Values a scalar step sums per slot (NV), and the values a slot holds (S: with the automatic residual
 *  replacement pipelined CG's slots also hold its norms, summed by the writer only, see step_scalars; without
 *  it they hold the three dots, as the update writes them then). */
template <int FOLD> struct FoldNV {
  static constexpr int NV = FOLD == FOLD_CG_SIGMA || FOLD == FOLD_E_CG_SIGMA ? 1
                            : FOLD == FOLD_CG_RHO || FOLD == FOLD_E_CG_ITER  ? 2
                                                                              : 3;
  static constexpr int S = FOLD == FOLD_PIPE_RR || FOLD == FOLD_E_PIPE_RR ? PK_RR_NV : NV;
};

/**
 * What a step kernel gets of the solver state, by value. FOLD_NONE: st is read (NULL: always run,
 * alpha = beta = 0). Folded: every block runs the scalar step on st and part (nb slots) and block 0 writes
 * the result to out (and the history entry to hist).
 */
struct StepIn {
  const pk_cuda_state *st;
  pk_cuda_state *out;
  const double *part;
  int64_t nb;
  double *hist;
};

/** What a kernel of the CUDA engine gets (FOLD_E_NONE): its own type, so that the CG driver's kernels (StepIn)
 *  keep their parameters and code. */
struct StepInE : StepIn {
  pk_cuda_escal e; /* the engine's scalars instead of st */
};
/** What a folded kernel of the CUDA engine gets (FOLD_E_*). The unfolded kernels do not carry the fold's
 *  fields: with them in the kernel's parameters, CG's fused 2-D loop (ActPcCgR) was compiled to 48 registers
 *  instead of the driver's 64 and took 28.3-28.9 us against 25.7-26.6 at 1024^2 (H200, ncu). */
struct StepInEF : StepInE {
  pk_cuda_efold f; /* the engine's folded step (e: the coefficients and the stop slot, e.S unused) */
};

/** The StepIn type of FOLD. */
template <int FOLD>
using StepInT =
    std::conditional_t<(FOLD < 0), StepInE, std::conditional_t<(FOLD >= FOLD_E_CG_SIGMA), StepInEF, StepIn>>;

/** A coefficient of the engine's scalars (pk_coef_value: index -1 is 1, -2 is 0). */
__device__ __forceinline__ double escal_value(const double *S, int32_t i, int32_t neg) {
  const double v = i == -1 ? 1.0 : i == -2 ? 0.0 : S[i];
  return neg ? -v : v;
}

/** The engine's scalars of a fused loop: false when e.stop says the iteration stopped. */
__device__ __forceinline__ bool escal_read(const pk_cuda_escal &e, double &alpha, double &beta) {
  if (e.stop >= 0 && e.S[e.stop] != 0.0) return false;
  alpha = escal_value(e.S, e.ia, e.na);
  beta = escal_value(e.S, e.ib, e.nb);
  return true;
}

/** StepIn of an unfolded kernel. */
StepIn step_in(const pk_cuda_state *st) {
  StepIn in = {};
  in.st = st;
  return in;
}

/** StepIn of a kernel of the CUDA engine (FOLD_E_NONE). */
StepInE step_in(const pk_cuda_escal *e) {
  StepInE in = {};
  in.e = *e;
  return in;
}

/** StepIn of a folded kernel of the CUDA engine (FOLD_E_*). */
StepInEF step_in(const pk_cuda_escal *e, const pk_cuda_efold *f) {
  StepInEF in = {};
  in.e = *e;
  in.f = *f;
  return in;
}

/** StepIn of a folded kernel. */
StepIn step_in(const pk_cuda_fold *f) {
  StepIn in = {};
  in.st = f->in;
  in.out = f->out;
  in.part = f->part;
  in.nb = f->nblocks;
  in.hist = f->hist;
  return in;
}

/** Lanes of the fixed summation order of the scalar steps (pk_cuda.h). */
constexpr int PKC_SUM_LANES = 256;

/**
 * Sums of NV values over nb slots in the fixed order of pk_cuda.h, by one warp (no block barrier: every
 * warp of a folded kernel computes the same sums itself): lane l holds the 8 summation lanes l + 32 c,
 * each adding its slots l + 32 c, l + 32 c + 256, ... in order (8 independent chains, so the loads overlap);
 * the tree levels 128, 64, 32 combine chains inside the lane, 16 ... 1 go through shuffles; every lane gets
 * the sums. Called by all 32 lanes of the warp.
 */
template <int NV, int S = NV>
__device__ __forceinline__ void warp_sums(const double *__restrict__ part, int64_t nb, double (&v)[NV]) {
  constexpr int C = PKC_SUM_LANES / 32;
  const int lane = threadIdx.x & 31;
  double acc[C][NV];
#pragma unroll
  for (int c = 0; c < C; c++)
#pragma unroll
    for (int j = 0; j < NV; j++) acc[c][j] = 0.0;
  for (int64_t b0 = lane; b0 < nb; b0 += PKC_SUM_LANES)
#pragma unroll
    for (int c = 0; c < C; c++) {
      const int64_t b = b0 + 32 * c;
      if (b < nb)
#pragma unroll
        for (int j = 0; j < NV; j++) acc[c][j] += part[b * S + j];
    }
#pragma unroll
  for (int h = C / 2; h >= 1; h >>= 1) /* levels 128, 64, 32: lane l + 32 c += lane l + 32 (c + h) */
#pragma unroll
    for (int c = 0; c < h; c++)
#pragma unroll
      for (int j = 0; j < NV; j++) acc[c][j] += acc[c + h][j];
#pragma unroll
  for (int o = 16; o > 0; o >>= 1)
#pragma unroll
    for (int j = 0; j < NV; j++) acc[0][j] += __shfl_down_sync(0xffffffffu, acc[0][j], o);
#pragma unroll
  for (int j = 0; j < NV; j++) v[j] = __shfl_sync(0xffffffffu, acc[0][j], 0);
}

/**
 * The same sums by a block of PKC_SUM_LANES threads (the one-block scalar kernels: many slots, one load
 * chain per thread): thread t is lane t; levels 128, 64, 32 through shared memory, 16 ... 1 through
 * shuffles in warp 0, whose lanes get the sums (the other warps' v is unset).
 */
template <int NV, int S = NV>
__device__ __forceinline__ void block_sums(const double *__restrict__ part, int64_t nb, double (&v)[NV]) {
  __shared__ double sh[NV][PKC_SUM_LANES];
  const int t = threadIdx.x;
  double acc[NV];
#pragma unroll
  for (int j = 0; j < NV; j++) acc[j] = 0.0;
  for (int64_t b = t; b < nb; b += PKC_SUM_LANES)
#pragma unroll
    for (int j = 0; j < NV; j++) acc[j] += part[b * S + j];
#pragma unroll
  for (int j = 0; j < NV; j++) sh[j][t] = acc[j];
  __syncthreads();
  for (int o = PKC_SUM_LANES / 2; o >= 32; o >>= 1) {
    if (t < o)
#pragma unroll
      for (int j = 0; j < NV; j++) sh[j][t] += sh[j][t + o];
    __syncthreads();
  }
  if (t < 32) {
#pragma unroll
    for (int j = 0; j < NV; j++) {
      double x = sh[j][t];
#pragma unroll
      for (int o = 16; o > 0; o >>= 1) x += __shfl_down_sync(0xffffffffu, x, o);
      v[j] = x;
    }
  }
}

/** Sign bookkeeping as pk_ks_sign_ok (kry_scalar_cg.h): v finite, nonzero, of the sign fixed by the first value. */
__device__ __forceinline__ bool sign_ok(double v, double &sign) {
  if (!isfinite(v) || v == 0.0) return false;
  const double sg = v > 0 ? 1.0 : -1.0;
  if (sign == 0.0) sign = sg;
  return sg == sign;
}

/** The stopping test of a recurrence residual: rr (its sum of squares) and rnorm = sqrt(rr) (pk_cuda.h). */
__device__ __forceinline__ bool converged_rr(const pk_cuda_state &s, double rr, double rnorm) {
  return s.recur ? rr < s.tol * s.tol || rr == 0.0 : rnorm <= s.tol;
}

/** Minimum-residual bookkeeping of iterate it with sum rr: reset (a (re)start) keeps it unconditionally. */
__device__ __forceinline__ void track_min(pk_cuda_state &s, double rr, int reset) {
  s.improved = 0;
  if (!s.min_on) return;
  if (reset || rr < s.min_rr) {
    s.min_rr = rr;
    s.min_it = s.it;
    s.improved = 1;
  }
}

/** CG after the operator loop (cg.c): sigma = (p, A p) sign check, alpha = rho / sigma. */
__device__ __forceinline__ void cg_sigma_update(pk_cuda_state &s, double sigma) {
  if (s.status != PK_ST_RUNNING) return;
  if (!sign_ok(sigma, s.sigma_sign)) {
    s.status = isfinite(sigma) ? PK_ST_BREAKDOWN_MATRIX : PK_ST_NAN;
    s.breakdown_it = s.it + 1;
    return;
  }
  s.sigma = sigma;
  s.alpha = s.rho / sigma;
}

/** CG after the preconditioner loop (cg.c), rz = (r, z), rr = (r, r); hist: NULL = not recorded. */
__device__ __forceinline__ void cg_rho_update(pk_cuda_state &s, double rz, double rr, double *hist,
                                              int init) {
  if (s.status != PK_ST_RUNNING) return;
  if (!isfinite(rz) || !isfinite(rr)) {
    s.status = PK_ST_NAN;
    s.breakdown_it = s.it + 1;
    return;
  }
  const double rnorm = sqrt(rr);
  s.rnorm = rnorm;
  s.rr = rr;
  if (init) { /* r = b - A x, z = M^-1 r of a (re)start */
    s.rho = rz;
    if (s.it == 0) {
      if (hist) hist[0] = rnorm;
      if (converged_rr(s, rr, rnorm)) {
        s.status = PK_ST_CONVERGED;
        return;
      }
      if (s.maxit == 0) {
        s.status = PK_ST_MAXIT;
        return;
      }
    }
    track_min(s, rr, 1);
    if (!sign_ok(rz, s.rho_sign)) {
      s.status = PK_ST_BREAKDOWN_PRECOND;
      s.breakdown_it = s.it + 1;
    }
    return;
  }
  const int it = ++s.it; /* x_it = x + alpha p is due (the operator loop or the host applies it) */
  if (hist) hist[it] = rnorm;
  track_min(s, rr, 0); /* every iterate, the last included (a stopped state copies nothing) */
  if (converged_rr(s, rr, rnorm)) {
    s.status = PK_ST_CONVERGED;
    return;
  }
  if (!sign_ok(rz, s.rho_sign)) {
    s.status = PK_ST_BREAKDOWN_PRECOND;
    s.breakdown_it = it + 1;
    return;
  }
  if (it >= s.maxit) {
    s.status = PK_ST_MAXIT;
    return;
  }
  s.beta = rz / s.rho;
  s.rho = rz;
}

/** The automatic residual replacement's step (pk_rr.h) on est, the caller's copy of *s.repl: 1 when the
 *  vectors must be replaced now (before the iteration cap). Not inlined: the folded kernels that carry it
 *  run it in one block only. */
__device__ __noinline__ int rr_decide(const pk_cuda_state &s, pk_rr_est &est, double gamma, double delta,
                                      double rr, const double *norms) {
  const double v[PK_RR_NV] = {gamma, delta, rr, norms[0], norms[1], norms[2], norms[3]};
  return pk_rr_step(&est, v, s.alpha_old, s.beta) && s.it < s.maxit;
}

/** Pipelined CG (pk_pipecg_solve in cg.c): gamma = (r, u), delta = (w, u), rr = (r, r); norms: the other four sums of
 *  the slots (x, x), (p, p), (u, u), (q, q) for the automatic residual replacement, est: the caller's copy of
 *  its estimate *s.repl, updated (the caller writes it back, once); both NULL where they were not summed (the
 *  blocks of a folded kernel that do not write the state); hist: NULL = not recorded. */
__device__ __forceinline__ void pipe_update(pk_cuda_state &s, double gamma, double delta, double rr,
                                            const double *norms, pk_rr_est *est, double *hist) {
  if (s.status != PK_ST_RUNNING) return;
  const double rnorm = sqrt(rr);
  if (!isfinite(gamma) || !isfinite(delta) || !isfinite(rnorm)) {
    s.status = PK_ST_NAN;
    s.breakdown_it = s.it + 1;
    return;
  }
  if (est && norms && rr_decide(s, *est, gamma, delta, rr, norms)) { /* the host replaces; nothing else changes */
    s.status = PK_ST_REPLACE;
    return;
  }
  s.rnorm = rnorm;
  s.rr = rr;
  track_min(s, rr, s.first); /* x is iterate it (a (re)start keeps its x; a stopped state copies nothing) */
  if ((s.it == 0 && s.first) || !s.first) { /* a restart (first, it > 0) records nothing */
    if (hist) hist[s.it] = rnorm;
    if (converged_rr(s, rr, rnorm)) {
      s.status = PK_ST_CONVERGED;
      return;
    }
  }
  if (s.it >= s.maxit) {
    s.status = PK_ST_MAXIT;
    return;
  }
  if (!sign_ok(gamma, s.rho_sign)) {
    s.status = PK_ST_BREAKDOWN_PRECOND;
    s.breakdown_it = s.it + 1;
    return;
  }
  /* sigma = (p, A p) = delta - beta gamma / alpha_old */
  const double beta = s.first ? 0.0 : gamma / s.rho_old;
  const double sigma = s.first ? delta : delta - beta * gamma / s.alpha_old;
  s.beta = beta;
  s.delta = delta;
  s.rho = gamma;
  s.sigma = sigma;
  if (!sign_ok(sigma, s.sigma_sign)) {
    s.status = (!s.first && isfinite(sigma)) ? PK_ST_SUSPECT
               : isfinite(sigma)             ? PK_ST_BREAKDOWN_MATRIX
                                             : PK_ST_NAN;
    s.breakdown_it = s.it + 1;
    return;
  }
  s.alpha = gamma / sigma;
  s.rho_old = gamma;
  s.alpha_old = s.alpha;
  s.first = 0;
  s.it++; /* the fused step that follows completes this iteration */
}

/** The scalar step FOLD on s with the sums v (and pipelined CG's norms and a copy of the replacement
 *  estimate, or NULL); hist: the writer's history (NULL: none). */
template <int FOLD>
__device__ __forceinline__ void scalar_update(pk_cuda_state &s, const double (&v)[FoldNV<FOLD>::NV],
                                              const double *norms, pk_rr_est *est, double *hist, int init) {
  if constexpr (FOLD == FOLD_CG_SIGMA)
    cg_sigma_update(s, v[0]);
  else if constexpr (FOLD == FOLD_CG_RHO)
    cg_rho_update(s, v[0], v[1], hist, init);
  else
    pipe_update(s, v[0], v[1], v[2], norms, est, hist);
}

/**
 * The CUDA engine's folded step (FOLD_E_*, pk_cuda_efold): every thread copies the method's scalars, adds
 * the pending sums into its copy (warp_sums: bitwise the one-block kernel's block_sums, so the engine's
 * one-block psum step), runs the step on it with the history ring pointed at one slot of its own (so that
 * every index is known at compile time), and block 0's thread 0 writes the scalars to f.Sout and the history
 * entry to f.Shome's ring. alpha, beta: CG's PK_CG_ALPHA and PK_CG_BETA (0 unless e.ib names it) of the
 * copy (pipelined CG's host, m = M^-1 w, uses none); false when e.stop (PK_KS_STOP) says the step stopped.
 */
/** The step of efold_scalars on the copy loc (the sums in it) with f's argument; writer: write the scalars to
 *  f.Sout and the history entry to f.Shome's ring. */
template <int FOLD, int NS>
__device__ __forceinline__ void efold_step(double (&loc)[NS], const pk_cuda_efold &f, bool writer) {
  constexpr bool CG = FOLD == FOLD_E_CG_SIGMA || FOLD == FOLD_E_CG_ITER;
  /* the step writes no history entry into the copy (its ring slot would be an index known only at run
     time, which puts the copy in local memory: the including file defines PK_KS_NO_RING, and the ring
     length is 0 in the copy); the writer writes the entry the step would have written, sqrt(rr) (the step's own expression) at the iteration it recorded (ITS changed) or,
     pipelined CG after a restart, the restart's iteration (first, it > 0, finite sums, no replacement) */
  const double ring_len = loc[PK_KS_RING_LEN], its0 = loc[PK_KS_ITS];
  const int it0 = CG ? 0 : (int)loc[PK_PCG_IT];
  const bool first0 = !CG && loc[PK_PCG_FIRST] != 0.0, run0 = loc[PK_KS_STOP] == 0.0;
  /* pipelined CG without the rule (FOLD_E_PIPE): the writer copies the scalars before the step and after it
     writes only those the step changed, compared bitwise with the copy (the compiler drops the test for the
     entries the step never writes, so those hold no register across it): its preconditioner kernel on a 2-D
     grid 164 -> 124 registers (the driver's FOLD_PIPE: 124). With the rule (FOLD_E_PIPE_RR) the same took 80
     -> 215 (the estimate's entries live across the step), and CG's steps were unchanged (80): those write
     every scalar after the step */
  constexpr bool COPY_FIRST = FOLD == FOLD_E_PIPE;
  double orig[NS];
#pragma unroll
  for (int i = 0; i < NS; i++) orig[i] = loc[i];
  if (COPY_FIRST && writer)
#pragma unroll
    for (int i = 0; i < NS; i++) f.Sout[i] = orig[i];
  loc[PK_KS_RING_LEN] = 0.0;
  const int arg = f.arg + (f.base ? *f.base : 0);
  if constexpr (FOLD == FOLD_E_CG_SIGMA)
    pk_kss_cg_sigma(loc, arg);
  else if constexpr (FOLD == FOLD_E_CG_ITER)
    pk_kss_cg_iter(loc, arg);
  else
    pk_kss_pcg_sums(loc, arg);
  loc[PK_KS_RING_LEN] = ring_len;
  if (writer) {
#pragma unroll
    for (int i = 0; i < NS; i++)
      if (!COPY_FIRST || __double_as_longlong(loc[i]) != __double_as_longlong(orig[i])) f.Sout[i] = loc[i];
    const int len = (int)ring_len;
    if (FOLD != FOLD_E_CG_SIGMA && len > 0) {
      const double rr = loc[CG ? (int)PK_CG_RR : (int)PK_PCG_RR], rn = sqrt(rr);
      int it = -1;
      if (loc[PK_KS_ITS] != its0)
        it = (int)loc[PK_KS_ITS];
      else if (!CG && run0 && first0 && it0 != 0 && loc[PK_PCG_REPLACE] == 0.0 && isfinite(loc[PK_PCG_GAMMA]) &&
               isfinite(loc[PK_PCG_DELTA]) && isfinite(rn))
        it = it0;
      if (it >= 0)
        f.Shome[(int)loc[PK_KS_RING_BASE] + it % len] = rn;
    }
  }
}

/** The method's scalars, the slot of a step's sums and their count (efold_scalars, k_epsum). */
template <int FOLD> struct EFold {
  static constexpr bool CG = FOLD == FOLD_E_CG_SIGMA || FOLD == FOLD_E_CG_ITER;
  static constexpr int NS = CG ? (int)PK_CG_NSCALARS : (int)PK_PCG_NSCALARS;
  static constexpr int OUT = FOLD == FOLD_E_CG_SIGMA ? (int)PK_CG_PQ
                             : FOLD == FOLD_E_CG_ITER ? (int)PK_CG_RZ
                                                       : (int)PK_PCG_GAMMA;
};

template <int FOLD>
__device__ __forceinline__ bool efold_scalars(const StepInEF &in, double &alpha, double &beta) {
  constexpr bool CG = EFold<FOLD>::CG;
  constexpr int NS = EFold<FOLD>::NS, OUT = EFold<FOLD>::OUT;
  constexpr int NV = FoldNV<FOLD>::NV;
  const pk_cuda_efold &f = in.f;
  double loc[NS];
#pragma unroll
  for (int i = 0; i < NS; i++) loc[i] = f.Sin[i];
  double v[NV];
  warp_sums<NV, FoldNV<FOLD>::S>(f.part, f.nb, v);
#pragma unroll
  for (int j = 0; j < NV; j++) loc[OUT + j] = v[j];
  const bool block0 = blockIdx.x == 0 && blockIdx.y == 0;
  const bool writer = block0 && threadIdx.x == 0;
  if constexpr (FOLD == FOLD_E_PIPE_RR) {
    /* the rule's norms: block 0 only (every warp of it, so that its threads agree); the other blocks run
       the step without the rule and only fill their part of m = M^-1 w, which a replacement recomputes */
    if (block0) {
#pragma unroll 1
      for (int j = 0; j < PK_RR_NV - PK_RR_NV_BASE; j++) {
        double t[1];
        warp_sums<1, PK_RR_NV>(f.part + PK_RR_NV_BASE + j, f.nb, t);
        loc[OUT + PK_RR_NV_BASE + j] = t[0];
      }
    } else {
      loc[PK_PCG_AUTO] = 0.0;
    }
  }
  efold_step<FOLD>(loc, f, writer);
  /* fixed slots, so that the copy stays in registers (the launchers fold only these coefficients: CG's
     alpha = PK_CG_ALPHA, beta = PK_CG_BETA or 0, stop = PK_KS_STOP or none) */
  alpha = CG ? loc[PK_CG_ALPHA] : 0.0;
  beta = CG && in.e.ib == PK_CG_BETA ? loc[PK_CG_BETA] : 0.0;
  return in.e.stop < 0 || loc[PK_KS_STOP] == 0.0;
}

/**
 * The scalars a step kernel uses, after step_wait(); false = the solve has stopped (the kernel returns).
 * FOLD_NONE: read from in.st. Folded: every thread runs the scalar step on its own copy of the state (the
 * sums by warp_sums, so every warp of every block gets bitwise the same), thread 0 of block 0 writes the
 * new state to in.out and the history entry; called by every thread of the block (whole warps).
 */
template <int FOLD>
__device__ __forceinline__ bool step_scalars(const StepInT<FOLD> &in, double &alpha, double &beta) {
  if constexpr (FOLD >= FOLD_E_CG_SIGMA) {
    return efold_scalars<FOLD>(in, alpha, beta);
  } else if constexpr (FOLD == FOLD_E_NONE) {
    return escal_read(in.e, alpha, beta);
  } else if constexpr (FOLD == FOLD_NONE) {
    if (!in.st) {
      alpha = beta = 0.0;
      return true;
    }
    if (in.st->status != PK_ST_RUNNING) return false;
    alpha = in.st->alpha;
    beta = in.st->beta;
    return true;
  } else {
    pk_cuda_state s = *in.st;
    double v[FoldNV<FOLD>::NV];
    warp_sums<FoldNV<FOLD>::NV, FoldNV<FOLD>::S>(in.part, in.nb, v);
    const bool writer = blockIdx.x == 0 && blockIdx.y == 0 && threadIdx.x == 0;
    if constexpr (FOLD == FOLD_PIPE_RR) {
      /* the automatic residual replacement: only the writer's block sums the norms and runs the rule (every
         warp of it, so that its threads agree: the kernels synchronise inside a block), each thread on its
         own copy of the estimate read before any is written back (one writer after a barrier: threads
         updating *s.repl in place raced, and the decisions then depended on the warps' timing); a REPLACE it writes
         stops the next kernels, and the other blocks, which read 3 of the slots' 7 values, only fill their
         part of m = M^-1 w, which the replacement makes the next iteration compute again */
      double norms[4];
      pk_rr_est est;
      const bool with_norms = s.repl && blockIdx.x == 0 && blockIdx.y == 0; /* (block-uniform) */
      if (with_norms) {
        est = *s.repl; /* every thread its own copy, the writer writes it back after all have read */
        /* one value at a time (the same order, so the same sums): 8 chains of 4 values would take 64
           registers in every folded kernel */
#pragma unroll 1
        for (int j = 0; j < 4; j++) {
          double t[1];
          warp_sums<1, PK_RR_NV>(in.part + PK_RR_NV_BASE + j, in.nb, t);
          norms[j] = t[0];
        }
      }
      scalar_update<FOLD>(s, v, with_norms ? norms : nullptr, with_norms ? &est : nullptr,
                          writer ? in.hist : nullptr, 0);
      if (with_norms) { /* (block-uniform: every thread of the block is here) */
        __syncthreads();
        if (writer) *s.repl = est;
      }
    } else {
      scalar_update<FOLD>(s, v, nullptr, nullptr, writer ? in.hist : nullptr, 0);
    }
    if (writer) *in.out = s;
    alpha = s.alpha;
    beta = s.beta;
    return s.status == PK_ST_RUNNING;
  }
}

} // namespace

#endif /* PK_CUDA_SCALAR_CUH */

/**
 * @file pk_cuda_precond.cu
 * @brief Preconditioner launchers of the CUDA backend (pk_cuda.h): none and Jacobi (one thread per cell),
 *        the column (tridiagonal) preconditioner, symmetric and general, k-slow and k-fast, with the
 *        column sweeps on chip and the factors recomputed on the fly, and the approximate inverse (its
 *        stencil over launch_op, pk_cuda_op.cuh); z = M^-1 r and CG's fused preconditioner loop, with the
 *        scalar step folded in (pk_cuda_scalar.cuh). See pk_cuda_dev.cuh for the thread mappings, the
 *        bytes per cell and the measurements.
 */
/* the CUDA engine's folded steps (pk_cuda_scalar.cuh) run the scalar steps without the history ring, whose
   entry their writer makes: every index of a thread's copy of the scalars known at compile time */
#define PK_KS_NO_RING 1
#include <cuda_runtime.h>

#include <stdint.h>
#include <stdlib.h>

#include <type_traits>

#include "pk_cuda.h"
#include "pk_cuda_dev.cuh"
#include "pk_cuda_op.cuh"
#include "pk_cuda_scalar.cuh"
#include "pk_cuda_xsum.cuh"
#include "pkrylov.h"

using namespace pkc_xsum;

namespace {

/* reproducible mode, one pass: the block's exact accumulators of CG's preconditioner loops with XR set
   ((r, z), (r, r); pk_cuda_xsum.cuh; only their kernels reference it) */
__shared__ xslot pcx_sh[2 * PK_XACC_LEN];

/**
 * z = M^-1 r of an approximate-inverse preconditioner (its 5-point stencil applied to r, pk_cuda_pc.op):
 * the scalar step FOLD first (pipelined CG folds its scalar step into m = M^-1 w).
 */
template <int FOLD> struct ActPcApply {
  static constexpr int NV = 0;
  static constexpr int MINB = 0;
  static constexpr bool PREFETCH = false;
  struct In {};
  StepInT<FOLD> sin;
  double *z;
  __device__ bool begin() {
    step_wait();
    double a, b;
    return step_scalars<FOLD>(sin, a, b);
  }
  __device__ In load(int64_t) const { return In{}; }
  __device__ void operator()(int64_t c, double y, double, const In &, double *) const { z[c] = y; }
};

/** CG's preconditioner loop with an approximate inverse, after r -= alpha q (k_rupdate): z = M^-1 r;
 *  acc (r, z), (r, r) (cpu_kernels.c's whole-vector path). st NULL: always runs. XR_: the sums exact in
 *  the same pass (reproducible mode, pk_cuda_xsum.cuh; not ENG). */
template <bool ENG = false, bool XR_ = false> struct ActPcCg {
  static constexpr bool XR = XR_;
  static constexpr int NV = XR ? 2 * XS_K : 2;
  static constexpr int MINB = 0;
  static constexpr bool PREFETCH = false;
  struct In {};
  const pk_cuda_state *st;
  double *z;
  pk_cuda_escal e; /* ENG: the CUDA engine's scalars (st NULL) */
  __device__ bool begin() {
    if constexpr (XR) xs_begin(pcx_sh, 2);
    step_wait();
    if constexpr (ENG) {
      double a, b;
      return escal_read(e, a, b);
    }
    return !st || st->status == PK_ST_RUNNING;
  }
  __device__ In load(int64_t) const { return In{}; }
  __device__ void operator()(int64_t c, double y, double rc, const In &, double *acc) const {
    z[c] = y;
    xs_acc<XR>(acc, 0, rc, y, pcx_sh);
    xs_acc<XR>(acc, 1, rc, rc, pcx_sh);
  }
  static __device__ __forceinline__ void xfinish(const double *acc, double *part) {
    xs_end<2>(acc, pcx_sh, part, block_slot());
  }
};

/**
 * CG's preconditioner loop with an approximate inverse on a grid stencil of one rank, with r -= alpha q fused
 * in: the kernel reads r_new = r - alpha q at every neighbour (xin; alpha_zero: r itself), writes rn = r_new
 * (another array than r: the neighbours still read r) and z = M^-1 r_new; acc (r_new, z), (r_new, r_new).
 * The scalar step of FOLD runs first, as in k_rupdate. Bitwise k_rupdate then ActPcCg.
 */
template <int FOLD, bool XR_ = false> struct ActPcCgR {
  static constexpr bool XR = XR_; /* the sums exact in the same pass (reproducible mode; FOLD_NONE) */
  static constexpr int NV = XR ? 2 * XS_K : 2;
  static constexpr int MINB = 0;
  static constexpr bool PREFETCH = false;
  struct In {};
  StepInT<FOLD> sin;
  int alpha_zero;
  const double *q;
  double *rn, *z;
  double alpha;
  __device__ bool begin() {
    if constexpr (XR) xs_begin(pcx_sh, 2);
    step_wait();
    double a0, b0;
    if (!step_scalars<FOLD>(sin, a0, b0)) return false;
    alpha = a0;
    return true;
  }
  __device__ double xin(const double *r, int64_t i) const { return alpha_zero ? r[i] : r[i] - alpha * q[i]; }
  __device__ In load(int64_t) const { return In{}; }
  __device__ void operator()(int64_t c, double y, double rc, const In &, double *acc) const {
    rn[c] = rc;
    z[c] = y;
    xs_acc<XR>(acc, 0, rc, y, pcx_sh);
    xs_acc<XR>(acc, 1, rc, rc, pcx_sh);
  }
  static __device__ __forceinline__ void xfinish(const double *acc, double *part) {
    xs_end<2>(acc, pcx_sh, part, block_slot());
  }
};

/* ---- preconditioner kernels --------------------------------------------------------------------- */

/**
 * One thread per cell (grid-stride), none (T = void: z = r) or Jacobi (z = dinv r).
 * STEP = 0: z = M^-1 r. STEP = 1: CG preconditioner loop r -= alpha q; z = M^-1 r; acc (r, z), (r, r)
 * (alpha_zero: r unchanged and q not read). XR (STEP 1): the sums exact in the same pass, part the blocks'
 * accumulators (reproducible mode, pk_cuda_xsum.cuh).
 */
template <typename T, int STEP, int FOLD, bool XR = false>
__global__ void __launch_bounds__(PKC_BLOCK)
    k_pointwise(const T *__restrict__ dinv, int64_t n, StepInT<FOLD> sin, int alpha_zero, double *__restrict__ r,
                const double *__restrict__ q, double *__restrict__ z, double *part) {
  if constexpr (XR) xs_begin(pcx_sh, 2);
  step_wait();
  double a0, b0;
  if (!step_scalars<FOLD>(sin, a0, b0)) return;
  const double alpha = (STEP && !alpha_zero) ? a0 : 0.0;
  double acc[XR ? 2 * XS_K : 2] = {};
  const int64_t stride = (int64_t)gridDim.x * PKC_BLOCK;
  for (int64_t i = (int64_t)blockIdx.x * PKC_BLOCK + threadIdx.x; i < n; i += stride) {
    double ri = r[i];
    if (STEP && !alpha_zero) {
      ri = ri - alpha * q[i];
      r[i] = ri;
    }
    double zi;
    if constexpr (sizeof(T) == 1)
      zi = ri; /* none */
    else
      zi = (double)dinv[i] * ri;
    z[i] = zi;
    if (STEP) {
      xs_acc<XR>(acc, 0, ri, zi, pcx_sh);
      xs_acc<XR>(acc, 1, ri, ri, pcx_sh);
    }
  }
  if constexpr (XR)
    xs_end<2>(acc, pcx_sh, part, blockIdx.x);
  else if (STEP)
    block_store<2>(acc, part, blockIdx.x);
}

/**
 * Column symmetric (L D L^T), one thread per column (grid-stride), cell(c, k) = c*cs + k*ls:
 *   forward  y_0 = r_0, y_k = r_k - lmul_{k-1} y_{k-1}
 *   backward z_{nz-1} = y dinv, z_k = dinv_k y_k - lmul_k z_{k+1}
 * MODE 0: z = M^-1 r. MODE 1 (pk_cpu_cg_precond_step's separate passes, k-fast): r -= alpha q first, then
 * the sweeps, acc (r, z) as sum r z and (r, r). MODE 2 (pc_sym_kslow_cg, k-slow): the same with
 * (r, z) = sum dinv y^2 accumulated in the forward sweep.
 */
template <typename T, int MODE, int FOLD>
__global__ void __launch_bounds__(PKC_BLOCK, PKC_MINB_HEAVY)
    k_col_sym(const T *__restrict__ lmul, const T *__restrict__ dinv, int64_t ncols, int nz, int64_t cs,
              int64_t ls, StepInT<FOLD> sin, int alpha_zero, double *__restrict__ r, const double *__restrict__ q,
              double *__restrict__ z, double *part) {
  step_wait();
  double a0, b0;
  if (!step_scalars<FOLD>(sin, a0, b0)) return;
  const bool upd = MODE != 0 && !alpha_zero;
  const double alpha = upd ? a0 : 0.0;
  double acc[2] = {0.0, 0.0}; /* (r, z), (r, r) */
  const int64_t stride = (int64_t)gridDim.x * PKC_BLOCK;
  for (int64_t col = (int64_t)blockIdx.x * PKC_BLOCK + threadIdx.x; col < ncols; col += stride) {
    int64_t c = col * cs;
    double y = 0.0, rv = 0.0;
    for (int k = 0; k < nz; k++, c += ls) {
      rv = r[c];
      if (upd) {
        rv = rv - alpha * q[c];
        r[c] = rv;
      }
      y = k == 0 ? rv : rv - (double)lmul[c - ls] * y;
      z[c] = y;
      if (MODE != 0) acc[1] += rv * rv;
      if (MODE == 2) acc[0] += (double)dinv[c] * y * y;
    }
    c -= ls; /* level nz-1 */
    double zn = y * (double)dinv[c];
    z[c] = zn;
    if (MODE == 1) acc[0] += rv * zn;
    for (int k = nz - 2; k >= 0; k--) {
      c -= ls;
      zn = (double)dinv[c] * z[c] - (double)lmul[c] * zn;
      z[c] = zn;
      if (MODE == 1) acc[0] += r[c] * zn;
    }
  }
  if (MODE != 0) block_store<2>(acc, part, blockIdx.x);
}

/**
 * Column general (dgttrf factors per cell), one thread per column (grid-stride), the arithmetic of
 * pc_general / LAPACK dgtts2: L with the interchanges of ipiv (forward, streaming), then U with du, du2
 * (backward). MODE 0: z = M^-1 r. MODE 1: r -= alpha q first, acc (r, z), (r, r).
 */
template <int MODE, int FOLD>
__global__ void __launch_bounds__(PKC_BLOCK, PKC_MINB_HEAVY)
    k_col_gen(const double *__restrict__ gdl, const double *__restrict__ gd, const double *__restrict__ gdu,
              const double *__restrict__ gdu2, const int32_t *__restrict__ ipiv, int64_t ncols, int nz,
              int64_t cs, int64_t ls, StepInT<FOLD> sin, int alpha_zero, double *__restrict__ r,
              const double *__restrict__ q, double *__restrict__ z, double *part) {
  step_wait();
  double a0, b0;
  if (!step_scalars<FOLD>(sin, a0, b0)) return;
  const bool upd = MODE != 0 && !alpha_zero;
  const double alpha = upd ? a0 : 0.0;
  double acc[2] = {0.0, 0.0};
  const int64_t stride = (int64_t)gridDim.x * PKC_BLOCK;
  for (int64_t col = (int64_t)blockIdx.x * PKC_BLOCK + threadIdx.x; col < ncols; col += stride) {
    int64_t c = col * cs;
    double carry = r[c]; /* b_i as modified by the previous elimination step */
    if (upd) {
      carry = carry - alpha * q[c];
      r[c] = carry;
    }
    if (MODE != 0) acc[1] += carry * carry;
    for (int i = 0; i + 1 < nz; i++, c += ls) {
      double b1 = r[c + ls];
      if (upd) {
        b1 = b1 - alpha * q[c + ls];
        r[c + ls] = b1;
      }
      if (MODE != 0) acc[1] += b1 * b1;
      const double l = gdl[c];
      const bool keep = ipiv[c] == i + 1; /* 1-based: no interchange */
      z[c] = keep ? carry : b1;
      carry = keep ? b1 - l * carry : carry - l * b1;
    }
    /* c is level nz-1: U x = y backward */
    double x1 = carry / gd[c], x2 = 0.0;
    z[c] = x1;
    if (MODE != 0) acc[0] += r[c] * x1;
    if (nz > 1) {
      c -= ls;
      const double x0 = (z[c] - gdu[c] * x1) / gd[c];
      z[c] = x0;
      if (MODE != 0) acc[0] += r[c] * x0;
      x2 = x1;
      x1 = x0;
    }
    for (int i = nz - 3; i >= 0; i--) {
      c -= ls;
      const double x0 = (z[c] - gdu[c] * x1 - gdu2[c] * x2) / gd[c];
      z[c] = x0;
      if (MODE != 0) acc[0] += r[c] * x0;
      x2 = x1;
      x1 = x0;
    }
  }
  if (MODE != 0) block_store<2>(acc, part, blockIdx.x);
}

/* ---- column sweeps with the column on chip (symmetric, k-slow) ------------------------------------
 * k_col_sm: one warp per block, one thread per column, PKC_SM_COLS = 32 consecutive columns per block
 * (coalesced). The forward sweep writes, per level, w_k = dinv_k y_k and l_k into shared memory (16 B per
 * level and column); the backward sweep reads them back, so y never goes through device memory. The
 * loads of the forward sweep are issued a chunk of K levels ahead (register double buffer, all loads of a
 * chunk before the dependent recurrence). k_col_stage (small problems) and k_col_ts_res (large thin
 * shells) below are its two specialisations. The factors come from one of:
 *  - FACT_STORED: lmul / dinv (fp64 or fp32 copies) read once per cell;
 *  - FACT_THINSHELL: recomputed from the thin shell (level vectors staged in shared memory per block,
 *    |T| and asum per column), nothing per cell;
 *  - FACT_STENCIL: recomputed from aC and aV (the same 16 B per cell as the stored factors: used only when
 *    forced, pc->onthefly = 2);
 * with the arithmetic of LAPACK dpttrf (dpttrf_step), so the values are the stored ones bit for bit.
 * pc->onthefly (set by the backend when every column is one positive definite segment): 1 = use the
 * recomputation where it pays (thin shell from PKC_OTF_MIN_CELLS cells and PKC_RES_MIN_COLS columns:
 * k_col_ts_res); 2 and 3 force the chunked on-chip (k_col_sm) and the resident (k_col_ts_res, thin shell
 * only) recomputation (tests). The recomputation costs a correctly rounded division per level on each
 * column's critical path (measured ~150 ns per level for a lone warp), which is why small problems read
 * the stored factors. */

/**
 * Cells from which the thin shell's column factors are recomputed rather than read (pc->onthefly = 1).
 * Below it the vectors live in L2, the sweep is latency-bound, and the division chain of the recomputation
 * (one correctly rounded division per level on the critical path) costs more than reading the factors.
 */
constexpr int64_t PKC_OTF_MIN_CELLS = (int64_t)1 << 20;

/** Where the column factors of the on-chip sweeps come from. */
enum { FACT_STORED = 0, FACT_THINSHELL = 1, FACT_STENCIL = 2 };

/** Levels per load chunk of the on-chip sweeps (registers: 4 arrays of 2 K doubles at most). */
template <int FACT> struct SmChunk {
  static constexpr int K = FACT == FACT_THINSHELL ? 16 : 8;
};

/** Inputs of the on-chip sweeps (only the arrays of the factor source are set). */
struct ColArgs {
  int64_t ncols;
  int nz;
  int nx;                     /* thin shell: column col = i + nx j */
  const double *lmul, *dinv;  /* FACT_STORED, fp64 */
  const float *lmulf, *dinvf; /* FACT_STORED, fp32 */
  const double *aC, *aV;      /* FACT_STENCIL */
  const double *ta, *tb, *tc, *td, *area, *ax, *ay; /* FACT_THINSHELL */
};

/** Dynamic shared memory of k_col_sm: w and l per level and column, plus the thin shell's level data. */
size_t sm_bytes(int fact, int nz) {
  const size_t levels = fact == FACT_THINSHELL ? 3 * (size_t)nz : 0;
  return sizeof(double) * ((size_t)2 * (size_t)nz * PKC_SM_COLS + levels);
}

/**
 * Thin-shell column scalars as thinshell.c builds them: |T| = area[col] and
 * asum = ax_w + ax_e + ay_s + ay_n, added left to right (ts_columns).
 */
__device__ __forceinline__ void ts_column(const ColArgs &a, int64_t col, double &ar, double &asum) {
  const int64_t nx = a.nx, j = col / nx, i = col - j * nx;
  ar = a.area[col];
  asum = a.ax[i + (nx + 1) * j] + a.ax[i + 1 + (nx + 1) * j] + a.ay[i + nx * j] + a.ay[i + nx * (j + 1)];
}

/**
 * Thin-shell row k of a column's tridiagonal (pk_op_get_tridiag / ts_diag): diagonal
 * D = |T| ((d_k + b_k) + c_k) + asum a_k (dbc = (d_k + b_k) + c_k), coupling to the level above
 * e = -|T| c_k (0 at the top).
 */
__device__ __forceinline__ void ts_row(double ar, double asum, double dbc, double ak, double ck, bool top,
                                       double &D, double &e) {
  D = ar * dbc + asum * ak;
  e = top ? 0.0 : -ar * ck;
}

/**
 * One step of LAPACK dpttrf (reference: E(I) = EI / D(I); D(I+1) = D(I+1) - E(I) * EI) for level k of a
 * column that is one positive definite segment (s = +1): with the row's diagonal D and coupling e,
 *   d_k = D - l_{k-1} e_{k-1} (d_0 = D),  l_k = e / d_k (0 at the top),  dinv_k = 1 / d_k (precond.c: s / D).
 * lraw, eprev carry l_{k-1}, e_{k-1} to the next level.
 */
__device__ __forceinline__ double dpttrf_step(int k, int nz, double D, double e, double &lraw, double &eprev,
                                              double &l, double &dinv) {
  const double d = k == 0 ? D : D - lraw * eprev;
  lraw = k + 1 < nz ? e / d : 0.0;
  eprev = e;
  l = lraw;
  dinv = 1.0 / d;
  return d;
}

/** Per warp: part[slot * NV + j] = sum of acc[j] over the 32 lanes, fixed shuffle tree (16, 8, 4, 2, 1). */
template <int NV>
__device__ __forceinline__ void warp_store(const double (&acc)[NV], double *part, int64_t slot) {
#pragma unroll
  for (int j = 0; j < NV; j++) {
    double v = acc[j];
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v += __shfl_down_sync(0xffffffffu, v, o);
    if ((threadIdx.x & 31) == 0) part[slot * NV + j] = v;
  }
}

/**
 * Column symmetric sweep pair, k-slow, the column on chip (see above). MODE 0: z = M^-1 r (r read only).
 * MODE 2 (pc_sym_kslow_cg): r -= alpha q (unless alpha_zero), then the sweeps, acc (r, z) = sum dinv y^2
 * in the forward sweep and (r, r). Per cell, as precond.c:
 *   forward  y_0 = r_0, y_k = r_k - l_{k-1} y_{k-1};  w_k = dinv_k y_k
 *   backward z_{nz-1} = w_{nz-1}, z_k = w_k - l_k z_{k+1}
 * F32: the factors used are rounded to float (as the fp32 copies; the recurrence of dpttrf stays fp64).
 */
template <int FACT, int MODE, bool F32, int FOLD>
__global__ void __launch_bounds__(PKC_SM_COLS)
    k_col_sm(ColArgs a, StepInT<FOLD> sin, int alpha_zero, double *__restrict__ r, const double *__restrict__ q,
             double *__restrict__ z, double *part) {
  step_wait();
  double a0, b0;
  if (!step_scalars<FOLD>(sin, a0, b0)) return;
  constexpr int K = SmChunk<FACT>::K, W = PKC_SM_COLS;
  extern __shared__ double smem[];
  const int nz = a.nz, lane = threadIdx.x;
  const int64_t ncols = a.ncols;
  double *sw = smem, *sl = smem + (size_t)nz * W;
  double *sdbc = sl + (size_t)nz * W, *sa = sdbc + nz, *sc = sa + nz; /* thin shell only */
  if constexpr (FACT == FACT_THINSHELL) {
    for (int k = lane; k < nz; k += W) {
      sdbc[k] = a.td[k] + a.tb[k] + a.tc[k]; /* ts_diag: d + b + c */
      sa[k] = a.ta[k];
      sc[k] = a.tc[k];
    }
    __syncthreads();
  }
  const bool upd = MODE == 2 && !alpha_zero;
  const double alpha = upd ? a0 : 0.0;
  double acc[2] = {0.0, 0.0}; /* (r, z), (r, r) */
  const int64_t ngroups = (ncols + W - 1) / W;
  for (int64_t g = blockIdx.x; g < ngroups; g += gridDim.x) {
    const int64_t col = g * W + lane;
    if (col >= ncols) continue;
    double ar = 0.0, asum = 0.0;
    if constexpr (FACT == FACT_THINSHELL) ts_column(a, col, ar, asum);
    /* next chunk: r, q, and the per-cell factor data (stored: l, dinv; stencil: aC, aV of the level above).
       fp32 factors stay float in the buffer and are widened where they are used: a conversion next to the
       load would wait for it there and take away the chunk's look-ahead */
    using FT = typename std::conditional<F32 && FACT == FACT_STORED, float, double>::type;
    double br[K], bq[K];
    FT b0[K], b1[K];
    auto load = [&](int k0) {
#pragma unroll
      for (int i = 0; i < K; i++) {
        const int k = k0 + i;
        br[i] = bq[i] = b0[i] = b1[i] = 0.0;
        if (k < nz) {
          const int64_t c = col + ncols * k;
          br[i] = r[c];
          if (upd) bq[i] = q[c];
          if constexpr (FACT == FACT_STORED) {
            if constexpr (F32) {
              if (k + 1 < nz) b0[i] = a.lmulf[c];
              b1[i] = a.dinvf[c];
            } else {
              if (k + 1 < nz) b0[i] = a.lmul[c];
              b1[i] = a.dinv[c];
            }
          } else if constexpr (FACT == FACT_STENCIL) {
            b0[i] = a.aC[c];
            if (k + 1 < nz) b1[i] = a.aV[c + ncols];
          }
        }
      }
    };
    load(0);
    double y = 0.0, lprev = 0.0, lraw = 0.0, eprev = 0.0;
    for (int k0 = 0; k0 < nz; k0 += K) {
      double cr[K], cq[K];
      FT c0[K], c1[K];
#pragma unroll
      for (int i = 0; i < K; i++) cr[i] = br[i], cq[i] = bq[i], c0[i] = b0[i], c1[i] = b1[i];
      if (k0 + K < nz) load(k0 + K);
#pragma unroll
      for (int i = 0; i < K; i++) {
        const int k = k0 + i;
        if (k < nz) {
          double rv = cr[i];
          if (upd) {
            rv = rv - alpha * cq[i];
            r[col + ncols * k] = rv;
          }
          double lk, dk; /* the factors used at level k */
          if constexpr (FACT == FACT_STORED) {
            lk = (double)c0[i];
            dk = (double)c1[i];
          } else {
            double D, e;
            if constexpr (FACT == FACT_THINSHELL) {
              ts_row(ar, asum, sdbc[k], sa[k], sc[k], k + 1 >= nz, D, e);
            } else {
              D = c0[i];
              e = c1[i];
              if (nz == 1 && D == 0.0) D = 1.0; /* an all-zero row (dry cell) is an identity row */
            }
            dpttrf_step(k, nz, D, e, lraw, eprev, lk, dk);
            if constexpr (F32) lk = (double)(float)lk, dk = (double)(float)dk;
          }
          y = k == 0 ? rv : rv - lprev * y;
          const double w = dk * y;
          if (MODE == 2) {
            acc[1] += rv * rv;
            acc[0] += w * y; /* dinv y y, as (dinv y) y */
          }
          sw[k * W + lane] = w;
          sl[k * W + lane] = lk;
          lprev = lk;
        }
      }
    }
    /* backward, a chunk of K levels of w, l read before the dependent steps */
    double zn = sw[(nz - 1) * W + lane];
    z[col + ncols * (nz - 1)] = zn;
    for (int k1 = nz - 2; k1 >= 0; k1 -= K) {
      double cw[K], cl[K];
#pragma unroll
      for (int i = 0; i < K; i++) {
        const int k = k1 - i;
        cw[i] = cl[i] = 0.0;
        if (k >= 0) cw[i] = sw[k * W + lane], cl[i] = sl[k * W + lane];
      }
#pragma unroll
      for (int i = 0; i < K; i++) {
        const int k = k1 - i;
        if (k >= 0) {
          zn = cw[i] - cl[i] * zn;
          z[col + ncols * k] = zn;
        }
      }
    }
  }
  if (MODE == 2) warp_store<2>(acc, part, blockIdx.x);
}

/**
 * Factors of the on-the-fly sources, one thread per column (test hook: pk_cuda_pc_onthefly_factors):
 * lmul[cell] = l_k (0 at the top), dinv[cell] = 1 / d_k, exactly as k_col_sm computes them (fp64).
 */
template <int FACT>
__global__ void __launch_bounds__(PKC_BLOCK) k_otf_factors(ColArgs a, double *lmul, double *dinv) {
  const int64_t stride = (int64_t)gridDim.x * PKC_BLOCK;
  for (int64_t col = (int64_t)blockIdx.x * PKC_BLOCK + threadIdx.x; col < a.ncols; col += stride) {
    const int nz = a.nz;
    double ar = 0.0, asum = 0.0, lraw = 0.0, eprev = 0.0;
    if constexpr (FACT == FACT_THINSHELL) ts_column(a, col, ar, asum);
    for (int k = 0; k < nz; k++) {
      const int64_t c = col + a.ncols * k;
      double D, e, l, d;
      if constexpr (FACT == FACT_THINSHELL) {
        ts_row(ar, asum, a.td[k] + a.tb[k] + a.tc[k], a.ta[k], a.tc[k], k + 1 >= nz, D, e);
      } else {
        D = a.aC[c];
        e = k + 1 < nz ? a.aV[c + a.ncols] : 0.0;
        if (nz == 1 && D == 0.0) D = 1.0;
      }
      dpttrf_step(k, nz, D, e, lraw, eprev, l, d);
      lmul[c] = l;
      dinv[c] = d;
    }
  }
}

/** cp.async of 4 or 8 bytes from global src to shared dst (L1-allocating; sm_80 and later). */
template <int BYTES> __device__ __forceinline__ void cp_async(void *dst, const void *src) {
  const unsigned d = (unsigned)__cvta_generic_to_shared(dst);
  asm volatile("cp.async.ca.shared.global [%0], [%1], %2;\n" ::"r"(d), "l"(src), "n"(BYTES) : "memory");
}
/** Wait for every cp.async of the calling thread (its copies are then visible to it). */
__device__ __forceinline__ void cp_async_wait_all() { asm volatile("cp.async.wait_all;\n" ::: "memory"); }

/**
 * Stored factors, the whole column staged in shared memory first (small problems: latency-bound). Each
 * thread issues every load of its column at once with cp.async (r, q, lmul, dinv of all levels: one
 * memory latency per column instead of one per chunk), waits, then runs the sweeps of k_col_sm out of
 * shared memory (w overwrites r's slot; l stays in its slot). Shared memory per column and level: 8 (r)
 * + 8 (q, CG step) + 2 sizeof(T) bytes. Same arithmetic and MODEs as k_col_sm.
 * Folded (FOLD != FOLD_NONE, inside a solve only): the loads of the block's first column group are issued
 * before the scalar step, so its latency overlaps theirs; the factors (constant during a solve) even before
 * step_wait(), i.e. while the previous kernel may still run.
 */
template <int MODE, bool F32, int FOLD>
__global__ void __launch_bounds__(PKC_SM_COLS)
    k_col_stage(ColArgs a, StepInT<FOLD> sin, int alpha_zero, double *__restrict__ r, const double *__restrict__ q,
                double *__restrict__ z, double *part) {
  using T = typename std::conditional<F32, float, double>::type;
  constexpr int W = PKC_SM_COLS;
  extern __shared__ double smem[];
  const int nz = a.nz, lane = threadIdx.x;
  const int64_t ncols = a.ncols;
  const bool upd = MODE == 2 && !alpha_zero;
  double *sr = smem, *sq = smem + (size_t)nz * W;                /* r (then w), q */
  T *sl = (T *)(sq + (MODE == 2 ? (size_t)nz * W : 0)), *sd = sl + (size_t)nz * W; /* lmul, dinv */
  const T *lm, *dv;
  if constexpr (F32)
    lm = a.lmulf, dv = a.dinvf;
  else
    lm = a.lmul, dv = a.dinv;
  auto issue_factors = [&](int64_t col) {
    for (int k = 0; k < nz; k++) {
      const int64_t c = col + ncols * k;
      const int o = k * W + lane;
      if (k + 1 < nz) cp_async<sizeof(T)>(sl + o, lm + c);
      cp_async<sizeof(T)>(sd + o, dv + c);
    }
  };
  auto issue_vectors = [&](int64_t col) {
    for (int k = 0; k < nz; k++) {
      const int64_t c = col + ncols * k;
      const int o = k * W + lane;
      cp_async<8>(sr + o, r + c);
      if (upd) cp_async<8>(sq + o, q + c);
    }
  };
  const int64_t ngroups = (ncols + W - 1) / W;
  const bool early =
      FOLD > FOLD_NONE && (int64_t)blockIdx.x < ngroups && (int64_t)blockIdx.x * W + lane < ncols;
  if (early) issue_factors((int64_t)blockIdx.x * W + lane);
  step_wait();
  if (early) issue_vectors((int64_t)blockIdx.x * W + lane);
  double a0, b0;
  if (!step_scalars<FOLD>(sin, a0, b0)) {
    cp_async_wait_all();
    return;
  }
  const double alpha = upd ? a0 : 0.0;
  double acc[2] = {0.0, 0.0}; /* (r, z), (r, r) */
  for (int64_t g = blockIdx.x; g < ngroups; g += gridDim.x) {
    const int64_t col = g * W + lane;
    if (col >= ncols) continue;
    if (!early || g != (int64_t)blockIdx.x) {
      issue_vectors(col);
      issue_factors(col);
    }
    cp_async_wait_all();
    double y = 0.0, lprev = 0.0, w = 0.0;
#pragma unroll 4
    for (int k = 0; k < nz; k++) {
      const int o = k * W + lane;
      double rv = sr[o];
      if (upd) {
        rv = rv - alpha * sq[o];
        r[col + ncols * k] = rv;
      }
      y = k == 0 ? rv : rv - lprev * y;
      w = (double)sd[o] * y;
      if (MODE == 2) {
        acc[1] += rv * rv;
        acc[0] += w * y; /* dinv y y */
      }
      sr[o] = w;
      if (k + 1 < nz) lprev = (double)sl[o];
    }
    double zn = w; /* level nz-1 */
    z[col + ncols * (nz - 1)] = zn;
#pragma unroll 4
    for (int k = nz - 2; k >= 0; k--) {
      const int o = k * W + lane;
      zn = sr[o] - (double)sl[o] * zn;
      z[col + ncols * k] = zn;
    }
  }
  if (MODE == 2) warp_store<2>(acc, part, blockIdx.x);
}

/** Shared memory of k_col_stage per block. */
size_t stage_bytes(int mode, bool f32, int nz) {
  const size_t per = 8 + (mode == 2 ? 8 : 0) + 2 * (f32 ? 4 : 8);
  return per * (size_t)nz * PKC_SM_COLS;
}

/**
 * Columns from which the automatic choice (pc->onthefly = 1) takes the resident thin-shell sweeps: one
 * thread per column, so fewer columns leave SMs idle while each thread's recomputation chain (about
 * 0.2 us per level and sweep) sets the time. Measured on an H200: 128 x 128 x 64 (16384 columns) resident
 * 30 us, stored factors 11.5 us; 256 x 256 x 128 (65536 columns) resident 101 us, stored 152 us.
 */
constexpr int64_t PKC_RES_MIN_COLS = 32768;

/** Levels per chunk of the resident thin-shell sweeps: forward prefetch and backward checkpoint interval. */
constexpr int PKC_RES_K = 8;

/**
 * Thin shell, factors recomputed, every column resident at once (large problems): one thread per column,
 * PKC_BLOCK threads per block, grid-stride. Shared memory cannot hold a column of every resident thread,
 * so w_k = dinv_k y_k goes through z (the output) between the sweeps, and the backward sweep recomputes
 * l_k chunk by chunk (PKC_RES_K levels) from the pivot d saved at each chunk start in shared memory,
 * with the same dpttrf arithmetic as the forward sweep. Bytes per cell: CG step r q in, r w out, w in,
 * z out = 48 (part of the w round trip may stay in L2); apply 32. No factor is read from memory. The
 * level data ((d + b) + c, a, c) are staged per block. MODE and F32 as k_col_sm. (Keeping the top levels
 * of w in shared memory, 32 of 128 at 100 KiB per block, was measured slower on an H200: 101 -> 107 us.)
 */
template <int MODE, bool F32, int FOLD>
__global__ void __launch_bounds__(PKC_BLOCK, 2)
    k_col_ts_res(ColArgs a, StepInT<FOLD> sin, int alpha_zero, double *__restrict__ r, const double *__restrict__ q,
                 double *__restrict__ z, double *part) {
  step_wait();
  double a0, b0;
  if (!step_scalars<FOLD>(sin, a0, b0)) return;
  constexpr int K = PKC_RES_K;
  extern __shared__ double smem[];
  const int nz = a.nz, tid = threadIdx.x, nch = (nz + K - 1) / K;
  const int64_t ncols = a.ncols;
  double *scp = smem;                                               /* [nch][PKC_BLOCK]: d at chunk starts */
  double *sdbc = smem + (size_t)nch * PKC_BLOCK, *sa = sdbc + nz, *sc = sa + nz; /* level data */
  for (int k = tid; k < nz; k += PKC_BLOCK) {
    sdbc[k] = a.td[k] + a.tb[k] + a.tc[k]; /* ts_diag: d + b + c */
    sa[k] = a.ta[k];
    sc[k] = a.tc[k];
  }
  __syncthreads();
  const bool upd = MODE == 2 && !alpha_zero;
  const double alpha = upd ? a0 : 0.0;
  double acc[2] = {0.0, 0.0}; /* (r, z), (r, r) */
  const int64_t stride = (int64_t)gridDim.x * PKC_BLOCK;
  for (int64_t col = (int64_t)blockIdx.x * PKC_BLOCK + tid; col < ncols; col += stride) {
    double ar, asum;
    ts_column(a, col, ar, asum);
    double br[K], bq[K];
    auto load = [&](int k0) {
#pragma unroll
      for (int i = 0; i < K; i++) {
        const int k = k0 + i;
        br[i] = bq[i] = 0.0;
        if (k < nz) {
          br[i] = r[col + ncols * k];
          if (upd) bq[i] = q[col + ncols * k];
        }
      }
    };
    load(0);
    double y = 0.0, lprev = 0.0, lraw = 0.0, eprev = 0.0, w = 0.0;
    for (int j = 0; j < nch; j++) { /* forward */
      const int k0 = j * K;
      double cr[K], cq[K];
#pragma unroll
      for (int i = 0; i < K; i++) cr[i] = br[i], cq[i] = bq[i];
      if (k0 + K < nz) load(k0 + K);
#pragma unroll
      for (int i = 0; i < K; i++) {
        const int k = k0 + i;
        if (k < nz) {
          const int64_t c = col + ncols * k;
          double rv = cr[i];
          if (upd) {
            rv = rv - alpha * cq[i];
            r[c] = rv;
          }
          double D, e, lk, dk;
          ts_row(ar, asum, sdbc[k], sa[k], sc[k], k + 1 >= nz, D, e);
          const double d = dpttrf_step(k, nz, D, e, lraw, eprev, lk, dk);
          if (i == 0) scp[j * PKC_BLOCK + tid] = d;
          if constexpr (F32) lk = (double)(float)lk, dk = (double)(float)dk;
          y = k == 0 ? rv : rv - lprev * y;
          w = dk * y;
          if (MODE == 2) {
            acc[1] += rv * rv;
            acc[0] += w * y; /* dinv y y */
          }
          if (k + 1 < nz) z[c] = w; /* the top level's w stays in w */
          lprev = lk;
        }
      }
    }
    double zn = w; /* backward, chunks from the top */
    z[col + ncols * (nz - 1)] = zn;
    for (int j = nch - 1; j >= 0; j--) {
      const int k0 = j * K;
      double cw[K], cl[K];
#pragma unroll
      for (int i = 0; i < K; i++) { /* the loads first: they overlap the recomputation */
        const int k = k0 + i;
        cw[i] = 0.0;
        if (k + 1 < nz) cw[i] = z[col + ncols * k];
      }
      double d = scp[j * PKC_BLOCK + tid], lr = 0.0, ep = 0.0;
#pragma unroll
      for (int i = 0; i < K; i++) { /* l_k of the chunk, as the forward sweep computed it */
        const int k = k0 + i;
        cl[i] = 0.0;
        if (k + 1 < nz) {
          double D, e;
          ts_row(ar, asum, sdbc[k], sa[k], sc[k], false, D, e);
          if (i > 0) d = D - lr * ep;
          lr = e / d;
          ep = e;
          cl[i] = F32 ? (double)(float)lr : lr;
        }
      }
#pragma unroll
      for (int i = K - 1; i >= 0; i--) {
        const int k = k0 + i;
        if (k + 1 < nz) {
          zn = cw[i] - cl[i] * zn;
          z[col + ncols * k] = zn;
        }
      }
    }
  }
  if (MODE == 2) block_store<2>(acc, part, blockIdx.x);
}

/** Blocks of k_col_ts_res (grid-stride beyond PKC_MAX_BLOCKS): those of the 1-D column kernels. */
int64_t res_blocks(int64_t ncols) { return blocks_1d(ncols); }

/** Shared memory of k_col_ts_res per block: the chunk pivots of every thread and the level data. */
size_t res_bytes(int nz) {
  const size_t nch = ((size_t)nz + PKC_RES_K - 1) / PKC_RES_K;
  return sizeof(double) * (nch * PKC_BLOCK + 3 * (size_t)nz);
}

/** Sweep kernels of the symmetric k-slow column preconditioner (launch_col_sym_kslow picks one). */
enum { SW_OLD = 0, SW_STAGE, SW_CHUNK, SW_RESIDENT };

/**
 * Kernel and factor source for pc. pc->onthefly: 0 stored factors; 1 (the backend's setting) the choice
 * that pays: the resident thin-shell recomputation from PKC_OTF_MIN_CELLS cells and PKC_RES_MIN_COLS
 * columns, else stored; 2 (tests) the chunked on-chip recomputation (thin shell or stencil); 3 (tests)
 * the resident thin-shell one.
 * Stored factors: whole columns staged below PKC_OTF_MIN_CELLS cells, else chunked. A kernel whose shared
 * memory does not fit falls back to the next one (finally k_col_sym, SW_OLD).
 */
void sweep_choice(const pk_cuda_pc *pc, int mode, size_t limit, int *kernel, int *fact, size_t *bytes) {
  const int t = pc->op.type;
  const bool ts = pc->onthefly && t == PKRYLOV_OPERATOR_THINSHELL;
  const bool st = pc->onthefly && t == PKRYLOV_OPERATOR_STENCIL7;
  const bool big = pc->n >= PKC_OTF_MIN_CELLS && pc->ncols >= PKC_RES_MIN_COLS;
  if (ts && (pc->onthefly >= 3 || (pc->onthefly == 1 && big)) &&
      res_bytes(pc->nz) <= limit) {
    *kernel = SW_RESIDENT, *fact = FACT_THINSHELL, *bytes = res_bytes(pc->nz);
    return;
  }
  if (pc->onthefly >= 2 && (ts || st)) {
    const int f = ts ? FACT_THINSHELL : FACT_STENCIL;
    if (sm_bytes(f, pc->nz) <= limit) {
      *kernel = SW_CHUNK, *fact = f, *bytes = sm_bytes(f, pc->nz);
      return;
    }
  }
  *fact = FACT_STORED;
  const size_t sb = stage_bytes(mode, pc->fp32 != 0, pc->nz);
  if (pc->n < PKC_OTF_MIN_CELLS && sb <= limit) {
    *kernel = SW_STAGE, *bytes = sb;
  } else if (sm_bytes(FACT_STORED, pc->nz) <= limit) {
    *kernel = SW_CHUNK, *bytes = sm_bytes(FACT_STORED, pc->nz);
  } else {
    *kernel = SW_OLD, *bytes = 0;
  }
}

/** Arguments of the on-chip sweeps for pc with factor source fact. */
ColArgs sm_args(const pk_cuda_pc *pc, int fact) {
  ColArgs a = {};
  a.ncols = pc->ncols;
  a.nz = pc->nz;
  a.nx = pc->op.nx;
  if (fact == FACT_STORED) {
    a.lmul = pc->lmul, a.dinv = pc->dinv, a.lmulf = pc->lmulf, a.dinvf = pc->dinvf;
  } else if (fact == FACT_STENCIL) {
    a.aC = pc->op.aC, a.aV = pc->op.aV;
  } else {
    a.ta = pc->op.ta, a.tb = pc->op.tb, a.tc = pc->op.tc, a.td = pc->op.td;
    a.area = pc->op.area, a.ax = pc->op.ax, a.ay = pc->op.ay;
  }
  return a;
}

/**
 * Largest shared memory a block may opt in to on the current device (0 on error), less a margin for the
 * static shared memory of the sweep kernels (block_store: 128 bytes).
 */
size_t sm_optin_limit() {
  int dev = 0, v = 0;
  if (cudaGetDevice(&dev) != cudaSuccess ||
      cudaDeviceGetAttribute(&v, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev) != cudaSuccess) {
    cudaGetLastError();
    return 0;
  }
  return v > 1024 ? (size_t)v - 1024 : 0;
}

/** Launch kern<<<nb, threads, bytes>>> after raising its shared-memory limit when bytes > 48 KiB. */
template <class Kern, class SIn>
int launch_sweep(cudaStream_t s, Kern kern, int64_t nb, int threads, size_t bytes, size_t limit,
                 const ColArgs &a, const SIn &sin, int alpha_zero, double *r, const double *q, double *z,
                 double *part, bool pdl) {
  if (bytes > 48 * 1024) {
    /* limit: the opt-in maximum less a margin for static shared memory, a constant of the device, so
       concurrent launches set the same value */
    const cudaError_t e =
        cudaFuncSetAttribute((const void *)kern, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)limit);
    if (e != cudaSuccess) return (int)e;
  }
  return launch_kernel(pdl, kern, dim3((unsigned)nb), dim3(threads), bytes, s, a, sin, alpha_zero, r, q, z,
                       part);
}

/**
 * The sweeps of a symmetric k-slow column preconditioner, MODE 0 (apply) or 2 (CG step), on the kernel
 * sweep_choice picks. Returns -1 when only k_col_sym fits (the caller launches it), else the CUDA status
 * of the launch; *nb = the partial-sum slots written.
 */
template <int MODE, int FOLD>
int launch_col_sym_kslow(cudaStream_t s, const pk_cuda_pc *pc, const StepInT<FOLD> &sin, int alpha_zero, double *r,
                         const double *q, double *z, double *part, int64_t *nb, bool pdl) {
  const size_t limit = sm_optin_limit();
  int kernel, fact;
  size_t bytes;
  sweep_choice(pc, MODE, limit, &kernel, &fact, &bytes);
  if (kernel == SW_OLD) return -1;
  const ColArgs a = sm_args(pc, fact);
  const bool f = pc->fp32 != 0;
#define PKC_SWEEP(K, NB, T) launch_sweep(s, K, NB, T, bytes, limit, a, sin, alpha_zero, r, q, z, part, pdl)
  if (kernel == SW_RESIDENT) {
    *nb = res_blocks(pc->ncols);
    return f ? PKC_SWEEP((k_col_ts_res<MODE, true, FOLD>), *nb, PKC_BLOCK)
             : PKC_SWEEP((k_col_ts_res<MODE, false, FOLD>), *nb, PKC_BLOCK);
  }
  *nb = sm_blocks(pc->ncols);
  if (kernel == SW_STAGE)
    return f ? PKC_SWEEP((k_col_stage<MODE, true, FOLD>), *nb, PKC_SM_COLS)
             : PKC_SWEEP((k_col_stage<MODE, false, FOLD>), *nb, PKC_SM_COLS);
  if (fact == FACT_THINSHELL)
    return f ? PKC_SWEEP((k_col_sm<FACT_THINSHELL, MODE, true, FOLD>), *nb, PKC_SM_COLS)
             : PKC_SWEEP((k_col_sm<FACT_THINSHELL, MODE, false, FOLD>), *nb, PKC_SM_COLS);
  if (fact == FACT_STENCIL)
    return f ? PKC_SWEEP((k_col_sm<FACT_STENCIL, MODE, true, FOLD>), *nb, PKC_SM_COLS)
             : PKC_SWEEP((k_col_sm<FACT_STENCIL, MODE, false, FOLD>), *nb, PKC_SM_COLS);
  return f ? PKC_SWEEP((k_col_sm<FACT_STORED, MODE, true, FOLD>), *nb, PKC_SM_COLS)
           : PKC_SWEEP((k_col_sm<FACT_STORED, MODE, false, FOLD>), *nb, PKC_SM_COLS);
#undef PKC_SWEEP
}

/** r -= alpha q (CG's preconditioner loop before a preconditioner that reads the neighbours of r), the
 *  scalar step FOLD first; alpha_zero: nothing to update. One thread per cell, grid-stride. */
template <int FOLD>
__global__ void __launch_bounds__(PKC_BLOCK)
    k_rupdate(int64_t n, StepInT<FOLD> sin, int alpha_zero, double *__restrict__ r, const double *__restrict__ q) {
  step_wait();
  double a0, b0;
  if (!step_scalars<FOLD>(sin, a0, b0) || alpha_zero) return;
  const int64_t stride = (int64_t)gridDim.x * PKC_BLOCK;
  for (int64_t i = (int64_t)blockIdx.x * PKC_BLOCK + threadIdx.x; i < n; i += stride) r[i] = r[i] - a0 * q[i];
}

/**
 * Launch the preconditioner kernel of pc with STEP (0 apply, 1 CG step) on n cells; FOLD: the scalar step
 * run first (FOLD_NONE, FOLD_CG_SIGMA with STEP 1, FOLD_PIPE with STEP 0); pdl: as a programmatic
 * dependent launch.
 */
template <int STEP, int FOLD, bool XR = false>
int launch_pc(cudaStream_t s, const pk_cuda_pc *pc, const StepInT<FOLD> &sin, int alpha_zero, int64_t n, double *r,
              const double *q, double *z, double *part, int64_t *nblocks, bool pdl = false) {
  static_assert(!XR || (STEP == 1 && FOLD == FOLD_NONE), "the one-pass exact sums: CG's unfolded loop");
  if (pc && pc->type == PKRYLOV_PRECOND_AINV) { /* a stencil on r: r must be complete before it */
    if constexpr (STEP == 0) {
      ActPcApply<FOLD> act{sin, z};
      return launch_op(s, &pc->op, r, act, part, nblocks, pdl);
    } else {
      const int64_t nb1 = blocks_1d(n);
      const int rc = launch_kernel(pdl, k_rupdate<FOLD>, dim3((unsigned)nb1), dim3(PKC_BLOCK), 0, s, n, sin,
                                   alpha_zero, r, q);
      if (rc) return rc;
      ActPcCg<FOLD == FOLD_E_NONE || FOLD >= FOLD_E_CG_SIGMA, XR> act{FOLD == FOLD_NONE ? sin.st : sin.out, z};
      if constexpr (FOLD >= FOLD_E_CG_SIGMA) { /* the engine's: the scalars the folded step wrote */
        act.st = nullptr;
        act.e = sin.e;
        act.e.S = sin.f.Sout;
      } else if constexpr (FOLD == FOLD_E_NONE) {
        act.st = nullptr;
        act.e = sin.e;
      }
      return launch_op(s, &pc->op, r, act, part, nblocks, false);
    }
  }
  if (!pc || pc->type == PKRYLOV_PRECOND_NONE || pc->type == PKRYLOV_PRECOND_JACOBI) {
    const int64_t nb = blocks_1d(n);
    if (nblocks) *nblocks = nb;
    const dim3 g((unsigned)nb), b(PKC_BLOCK);
    if (!pc || pc->type == PKRYLOV_PRECOND_NONE)
      return launch_kernel(pdl, k_pointwise<char, STEP, FOLD, XR>, g, b, 0, s, (const char *)nullptr, n, sin,
                           alpha_zero, r, q, z, part);
    if (pc->fp32)
      return launch_kernel(pdl, k_pointwise<float, STEP, FOLD, XR>, g, b, 0, s, pc->dinvf, n, sin, alpha_zero, r,
                           q, z, part);
    return launch_kernel(pdl, k_pointwise<double, STEP, FOLD, XR>, g, b, 0, s, pc->dinv, n, sin, alpha_zero, r, q,
                         z, part);
  }
  if constexpr (XR) /* the column sweeps keep their own sums (pk_cuda_cg_precond_x_ok) */
    return (int)cudaErrorNotSupported;
  if (pc->type != PKRYLOV_PRECOND_COLUMN) /* an unknown type (or a user view): never run as a column solve */
    return (int)cudaErrorInvalidValue;
  const bool kslow = pc->layout == PKRYLOV_LAYOUT_KSLOW;
  if (pc->symmetric && kslow) { /* the column on chip when it fits in shared memory */
    int64_t nbs = 0;
    constexpr int MODE = STEP == 0 ? 0 : 2;
    const int rc = launch_col_sym_kslow<MODE, FOLD>(s, pc, sin, alpha_zero, r, q, z, part, &nbs, pdl);
    if (rc >= 0) {
      if (nblocks) *nblocks = nbs;
      return rc;
    }
  }
  const int64_t nb = blocks_1d(pc->ncols);
  if (nblocks) *nblocks = nb;
  const int64_t cs = kslow ? 1 : pc->nz, ls = kslow ? pc->ncols : 1;
  const dim3 g((unsigned)nb), b(PKC_BLOCK);
  constexpr int SYM = STEP == 0 ? 0 : 2; /* k-slow CG step: (r, z) as pc_sym_kslow_cg */
  if (!pc->symmetric)
    return launch_kernel(pdl, k_col_gen<STEP, FOLD>, g, b, 0, s, pc->gdl, pc->gd, pc->gdu, pc->gdu2, pc->ipiv,
                         pc->ncols, pc->nz, cs, ls, sin, alpha_zero, r, q, z, part);
  if (STEP == 0 || kslow) {
    if (pc->fp32)
      return launch_kernel(pdl, k_col_sym<float, SYM, FOLD>, g, b, 0, s, pc->lmulf, pc->dinvf, pc->ncols,
                           pc->nz, cs, ls, sin, alpha_zero, r, q, z, part);
    return launch_kernel(pdl, k_col_sym<double, SYM, FOLD>, g, b, 0, s, pc->lmul, pc->dinv, pc->ncols, pc->nz,
                         cs, ls, sin, alpha_zero, r, q, z, part);
  }
  constexpr int KF = STEP == 0 ? 0 : 1; /* k-fast CG step: separate passes */
  if (pc->fp32)
    return launch_kernel(pdl, k_col_sym<float, KF, FOLD>, g, b, 0, s, pc->lmulf, pc->dinvf, pc->ncols, pc->nz,
                         cs, ls, sin, alpha_zero, r, q, z, part);
  return launch_kernel(pdl, k_col_sym<double, KF, FOLD>, g, b, 0, s, pc->lmul, pc->dinv, pc->ncols, pc->nz,
                       cs, ls, sin, alpha_zero, r, q, z, part);
}

} // namespace

/* ---- launchers (pk_cuda.h) ---------------------------------------------------------------------- */

extern "C" int pk_cuda_pc_apply(void *stream, const pk_cuda_pc *pc, const pk_cuda_state *st, const double *r,
                                double *z) {
  if (!pc) return (int)cudaErrorInvalidValue; /* no size without a view: pass a NONE view */
  return launch_pc<0, FOLD_NONE>((cudaStream_t)stream, pc, step_in(st), 1, pc->n, (double *)r, nullptr, z,
                                 nullptr, nullptr);
}

extern "C" int pk_cuda_pc_apply_fold(void *stream, const pk_cuda_pc *pc, const pk_cuda_fold *fold,
                                     const double *r, double *z) {
  if (!pc || !fold) return (int)cudaErrorInvalidValue;
  if (fold->repl)
    return launch_pc<0, FOLD_PIPE_RR>((cudaStream_t)stream, pc, step_in(fold), 1, pc->n, (double *)r, nullptr,
                                      z, nullptr, nullptr, fold->pdl != 0);
  return launch_pc<0, FOLD_PIPE>((cudaStream_t)stream, pc, step_in(fold), 1, pc->n, (double *)r, nullptr, z,
                                 nullptr, nullptr, fold->pdl != 0);
}

/**
 * Test hook: the factors that the on-the-fly column sweeps compute for pc (pc->onthefly set, thin shell
 * or column stencil), written per cell in the k-slow layout: lmul (0 on the top level) and dinv = 1 / d.
 * They must equal the stored factors of precond.c bit for bit. Returns cudaErrorInvalidValue when pc has
 * no on-the-fly source.
 */
extern "C" int pk_cuda_pc_onthefly_factors(void *stream, const pk_cuda_pc *pc, double *lmul, double *dinv) {
  if (!pc || pc->type != PKRYLOV_PRECOND_COLUMN || !pc->symmetric || pc->layout != PKRYLOV_LAYOUT_KSLOW ||
      !pc->onthefly ||
      (pc->op.type != PKRYLOV_OPERATOR_THINSHELL && pc->op.type != PKRYLOV_OPERATOR_STENCIL7))
    return (int)cudaErrorInvalidValue;
  const int fact = pc->op.type == PKRYLOV_OPERATOR_THINSHELL ? FACT_THINSHELL : FACT_STENCIL;
  const ColArgs a = sm_args(pc, fact);
  const unsigned g = (unsigned)blocks_1d(pc->ncols);
  if (fact == FACT_THINSHELL)
    k_otf_factors<FACT_THINSHELL><<<g, PKC_BLOCK, 0, (cudaStream_t)stream>>>(a, lmul, dinv);
  else
    k_otf_factors<FACT_STENCIL><<<g, PKC_BLOCK, 0, (cudaStream_t)stream>>>(a, lmul, dinv);
  return (int)cudaGetLastError();
}

extern "C" int pk_cuda_cg_precond_step(void *stream, const pk_cuda_pc *pc, const pk_cuda_state *st,
                                       int alpha_zero, int64_t n, double *r, const double *q, double *z,
                                       double *part, int64_t *nblocks) {
  return launch_pc<1, FOLD_NONE>((cudaStream_t)stream, pc, step_in(st), alpha_zero, n, r, q, z, part,
                                 nblocks);
}

/* ---- reproducible mode, one pass: CG's unfolded preconditioner loops with (r, z), (r, r) exact ---------- */

extern "C" int pk_cuda_cg_precond_x_ok(const pk_cuda_pc *pc) {
  return pc && (pc->type == PKRYLOV_PRECOND_NONE || pc->type == PKRYLOV_PRECOND_JACOBI ||
                pc->type == PKRYLOV_PRECOND_AINV);
}

extern "C" int pk_cuda_cg_precond_step_x(void *stream, const pk_cuda_pc *pc, const pk_cuda_state *st,
                                         int alpha_zero, int64_t n, double *r, const double *q, double *z,
                                         int64_t *xblk, int64_t *nblocks) {
  if (!pk_cuda_cg_precond_x_ok(pc) || !xblk) return (int)cudaErrorInvalidValue;
  return launch_pc<1, FOLD_NONE, true>((cudaStream_t)stream, pc, step_in(st), alpha_zero, n, r, q, z,
                                       (double *)xblk, nblocks);
}

extern "C" int pk_cuda_cg_precond_after_x(void *stream, const pk_cuda_pc *pc, const pk_cuda_state *st, double *r,
                                          double *z, int64_t *xblk, int64_t *nblocks) {
  if (!pc || pc->type != PKRYLOV_PRECOND_AINV || !xblk) return (int)cudaErrorInvalidValue;
  ActPcCg<false, true> act{st, z};
  return launch_op((cudaStream_t)stream, &pc->op, r, act, (double *)xblk, nblocks, false);
}

extern "C" int pk_cuda_cg_rupdate(void *stream, const pk_cuda_state *st, int alpha_zero, int64_t n, double *r,
                                  const double *q) {
  k_rupdate<FOLD_NONE><<<(unsigned)blocks_1d(n), PKC_BLOCK, 0, (cudaStream_t)stream>>>(n, step_in(st), alpha_zero,
                                                                                     r, q);
  return (int)cudaGetLastError();
}

extern "C" int pk_cuda_cg_precond_after(void *stream, const pk_cuda_pc *pc, const pk_cuda_state *st, double *r,
                                        double *z, double *part, int64_t *nblocks) {
  if (!pc || pc->type != PKRYLOV_PRECOND_AINV) return (int)cudaErrorInvalidValue;
  ActPcCg<> act{st, z};
  return launch_op((cudaStream_t)stream, &pc->op, r, act, part, nblocks, false);
}

extern "C" int pk_cuda_cg_precond_step_fold(void *stream, const pk_cuda_pc *pc, const pk_cuda_fold *fold,
                                            int64_t n, double *r, const double *q, double *z, double *part,
                                            int64_t *nblocks) {
  if (!fold) return (int)cudaErrorInvalidValue;
  return launch_pc<1, FOLD_CG_SIGMA>((cudaStream_t)stream, pc, step_in(fold), 0, n, r, q, z, part, nblocks,
                                     fold->pdl != 0);
}

/* ---- CG's approximate-inverse loop with r -= alpha q fused in (one rank, grid stencil) ------------------ */

/** Whether pk_cuda_cg_precond_step_r can run pc: an approximate inverse on a 2-D grid stencil without halo. */
extern "C" int pk_cuda_cg_precond_fuses_r(const pk_cuda_pc *pc) {
  return pc && pc->type == PKRYLOV_PRECOND_AINV && pc->op.type == PKRYLOV_OPERATOR_STENCIL7 && pc->op.gsny > 0 &&
         pc->op.nz == 1 && !pc->op.ghalo && !pc->op.cols;
}

extern "C" int pk_cuda_cg_precond_step_r(void *stream, const pk_cuda_pc *pc, const pk_cuda_state *st, int alpha_zero,
                                         const double *r, double *rn, const double *q, double *z, double *part,
                                         int64_t *nblocks, int pdl) {
  if (!pk_cuda_cg_precond_fuses_r(pc) || r == rn) return (int)cudaErrorInvalidValue;
  ActPcCgR<FOLD_NONE> act{step_in(st), alpha_zero, q, rn, z, 0.0};
  return launch_gstencil<true>((cudaStream_t)stream, &pc->op, r, act, part, nblocks, pdl != 0);
}

extern "C" int pk_cuda_cg_precond_step_r_x(void *stream, const pk_cuda_pc *pc, const pk_cuda_state *st,
                                           int alpha_zero, const double *r, double *rn, const double *q, double *z,
                                           int64_t *xblk, int64_t *nblocks, int pdl) {
  if (!pk_cuda_cg_precond_fuses_r(pc) || r == rn || !xblk) return (int)cudaErrorInvalidValue;
  ActPcCgR<FOLD_NONE, true> act{step_in(st), alpha_zero, q, rn, z, 0.0};
  return launch_gstencil<true>((cudaStream_t)stream, &pc->op, r, act, (double *)xblk, nblocks, pdl != 0);
}

extern "C" int pk_cuda_cg_precond_step_r_fold(void *stream, const pk_cuda_pc *pc, const pk_cuda_fold *fold,
                                              const double *r, double *rn, const double *q, double *z, double *part,
                                              int64_t *nblocks) {
  if (!fold || !pk_cuda_cg_precond_fuses_r(pc) || r == rn) return (int)cudaErrorInvalidValue;
  ActPcCgR<FOLD_CG_SIGMA> act{step_in(fold), 0, q, rn, z, 0.0};
  return launch_gstencil<true>((cudaStream_t)stream, &pc->op, r, act, part, nblocks, fold->pdl != 0);
}

/* ---- the CUDA engine's CG preconditioner loop (pk_cuda_kry_cg.cu): scalars from its S ---------------- */

extern "C" int pk_cuda_cg_precond_step_r_e(void *stream, const pk_cuda_pc *pc, const pk_cuda_escal *e,
                                           const double *r, double *rn, const double *q, double *z, double *part,
                                           int64_t *nblocks, int pdl) {
  if (!e || !e->S || !pk_cuda_cg_precond_fuses_r(pc) || r == rn) return (int)cudaErrorInvalidValue;
  ActPcCgR<FOLD_E_NONE> act{step_in(e), 0, q, rn, z, 0.0};
  return launch_gstencil<true>((cudaStream_t)stream, &pc->op, r, act, part, nblocks, pdl != 0);
}

extern "C" int pk_cuda_cg_precond_step_r_ef(void *stream, const pk_cuda_pc *pc, const pk_cuda_escal *e,
                                            const pk_cuda_efold *f, const double *r, double *rn, const double *q,
                                            double *z, double *part, int64_t *nblocks) {
  if (!e || !f || f->Sin == f->Sout || !pk_cuda_cg_precond_fuses_r(pc) || r == rn)
    return (int)cudaErrorInvalidValue;
  ActPcCgR<FOLD_E_CG_SIGMA> act{step_in(e, f), 0, q, rn, z, 0.0};
  return launch_gstencil<true>((cudaStream_t)stream, &pc->op, r, act, part, nblocks, f->pdl != 0);
}

extern "C" int pk_cuda_cg_precond_step_e(void *stream, const pk_cuda_pc *pc, const pk_cuda_escal *e, int64_t n,
                                         double *r, const double *q, double *z, double *part, int64_t *nblocks) {
  if (!e || !e->S) return (int)cudaErrorInvalidValue;
  return launch_pc<1, FOLD_E_NONE>((cudaStream_t)stream, pc, step_in(e), 0, n, r, q, z, part, nblocks);
}

extern "C" int pk_cuda_cg_rupdate_e(void *stream, const pk_cuda_escal *e, int64_t n, double *r, const double *q) {
  if (!e || !e->S) return (int)cudaErrorInvalidValue;
  k_rupdate<FOLD_E_NONE><<<(unsigned)blocks_1d(n), PKC_BLOCK, 0, (cudaStream_t)stream>>>(n, step_in(e), 0, r, q);
  return (int)cudaGetLastError();
}

extern "C" int pk_cuda_cg_precond_after_e(void *stream, const pk_cuda_pc *pc, const pk_cuda_escal *e, double *r,
                                          double *z, double *part, int64_t *nblocks) {
  if (!e || !e->S || !pc || pc->type != PKRYLOV_PRECOND_AINV) return (int)cudaErrorInvalidValue;
  ActPcCg<true> act{nullptr, z, *e};
  return launch_op((cudaStream_t)stream, &pc->op, r, act, part, nblocks, false);
}

/* ---- the CUDA engine's folded steps (pk_cuda_efold) ------------------------------------------------- */

extern "C" int pk_cuda_cg_precond_step_ef(void *stream, const pk_cuda_pc *pc, const pk_cuda_escal *e,
                                          const pk_cuda_efold *f, int64_t n, double *r, const double *q, double *z,
                                          double *part, int64_t *nblocks) {
  if (!e || !f || f->Sin == f->Sout) return (int)cudaErrorInvalidValue;
  return launch_pc<1, FOLD_E_CG_SIGMA>((cudaStream_t)stream, pc, step_in(e, f), 0, n, r, q, z, part, nblocks,
                                       f->pdl != 0);
}

extern "C" int pk_cuda_pc_apply_ef(void *stream, const pk_cuda_pc *pc, const pk_cuda_escal *e,
                                   const pk_cuda_efold *f, int rr, const double *r, double *z) {
  if (!pc || !e || !f || f->Sin == f->Sout) return (int)cudaErrorInvalidValue;
  if (rr)
    return launch_pc<0, FOLD_E_PIPE_RR>((cudaStream_t)stream, pc, step_in(e, f), 1, pc->n, (double *)r, nullptr,
                                        z, nullptr, nullptr, f->pdl != 0);
  return launch_pc<0, FOLD_E_PIPE>((cudaStream_t)stream, pc, step_in(e, f), 1, pc->n, (double *)r, nullptr, z,
                                   nullptr, nullptr, f->pdl != 0);
}

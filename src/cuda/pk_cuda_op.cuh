/**
 * @file pk_cuda_op.cuh
 * @brief launch_op: an action over the cells of an operator, on the kernel of the operator's type
 *        (pk_cuda_csr.cuh, pk_cuda_grid.cuh). Each action is instantiated in one file only (pk_cuda_op.cu,
 *        pk_cuda_precond.cu, pk_cuda_steps.cu), so every kernel is compiled once.
 */
#ifndef PK_CUDA_OP_CUH
#define PK_CUDA_OP_CUH

#include "pk_cuda_csr.cuh"
#include "pk_cuda_dev.cuh"
#include "pk_cuda_grid.cuh"

namespace {

/**
 * Cells from which a column stencil of one rank runs a thread per cell (k_stencil_cells) instead of a thread
 * per column walking its levels (k_stencil), unless the action keeps the walk (act_columns). H100, 256 x 256
 * x 128, us per iteration: pipelined CG 719 -> 684, with fp32 coefficients 687 -> 621; the residual kernel
 * 303 -> 266 (ncu). Below it the column walk's launch shape (fewer, longer threads on small grids) is kept.
 */
constexpr int64_t PKC_CELLS_MIN = (int64_t)1 << 21;
/**
 * A 2-D grid stencil (one level) runs the kernels compiled for one level (k_gstencil<..., TWOD>: no level
 * loop, 38-64 registers instead of 64-128) in CG's capped launches (op->gcap) and from this many columns.
 * H100, barotropic with the approximate inverse, us per iteration: CG 86.7 -> 66.5 at 1024^2 (the
 * preconditioner loop 29.9 -> 19.4, the operator loop 41.8 -> 31.6 under ncu), 593 -> 461 at 4096 x 2048,
 * 9.86 -> 9.30 at 256^2; pipelined CG 91.4 -> 82.2 at 1024^2, 661 -> 590 at 4096 x 2048, but 9.52 -> 9.89 at
 * 256^2 (a thread per column, latency-bound), where it keeps the general kernels.
 */
constexpr int64_t PKC_TWOD_MIN_COLS = (int64_t)1 << 18;

/**
 * Launch act over the cells of the grid stencil op (op->gsny > 0): TWOD the kernels compiled for one level
 * (k_gstencil<..., TWOD>, op->nz == 1), else the general ones; the same blocks and cells either way.
 */
template <bool TWOD, class Act>
int launch_gstencil(cudaStream_t s, const pk_cuda_op *op, const double *x, Act act, double *part,
                    int64_t *nblocks, bool pdl = false) {
  const GridShape gs = grid_shape(op);
  if (nblocks) *nblocks = gs.bx * gs.by;
  const dim3 grid((unsigned)gs.bx, (unsigned)gs.by), b(PKC_BLOCK);
  const GHalo gh = ghalo_of(op);
  const bool loop = gs.bx * PKC_BLOCK < launch_cols(op); /* a capped launch (gcap): grid-stride */
  auto kd = Act::MINB > 0 ? (loop ? k_gstencil_minb<double, Act, true, TWOD> : k_gstencil_minb<double, Act, false, TWOD>)
                          : (loop ? k_gstencil<double, Act, true, TWOD> : k_gstencil<double, Act, false, TWOD>);
  auto kf = Act::MINB > 0 ? (loop ? k_gstencil_minb<float, Act, true, TWOD> : k_gstencil_minb<float, Act, false, TWOD>)
                          : (loop ? k_gstencil<float, Act, true, TWOD> : k_gstencil<float, Act, false, TWOD>);
  if (op->fp32)
    return launch_kernel(pdl, kf, grid, b, 0, s, op->aWf, op->aSf, op->aVf, op->aCf, op->nx, op->ny, op->nz, gs.kc,
                         x, act, part, gh);
  return launch_kernel(pdl, kd, grid, b, 0, s, op->aW, op->aS, op->aV, op->aC, op->nx, op->ny, op->nz, gs.kc, x,
                       act, part, gh);
}

/**
 * Launch act over the cells of op with input vector x; *nblocks (may be NULL) = slots written; pdl: as a
 * programmatic dependent launch (Act::begin() calls step_wait()).
 */
template <class Act>
int launch_op(cudaStream_t s, const pk_cuda_op *op, const double *x, Act act, double *part, int64_t *nblocks,
              bool pdl = false) {
  if (op->type == PKRYLOV_OPERATOR_USER) {
    const int64_t nb = blocks_1d(op->n);
    if (nblocks) *nblocks = nb;
    if (!op->pre) return (int)cudaErrorInvalidValue;
    return launch_kernel(pdl, k_pre<Act>, dim3((unsigned)nb), dim3(PKC_BLOCK), 0, s, op->pre, op->n, x, act, part);
  }
  if (op->type == PKRYLOV_OPERATOR_CSR && op->csr_format != PK_CUDA_CSR_PLAIN) {
    const int64_t nb = blocks_1d(op->n);
    if (nblocks) *nblocks = nb;
    const int nd = op->dia_nd;
    if (nd < 1 || nd > PK_CUDA_DIA_MAX || (op->fp32 ? !op->diaf : !op->dia)) return (int)cudaErrorInvalidValue;
    DiaOff off = {};
    for (int d = 0; d < nd; d++) off.o[d] = op->dia_off[d];
    const dim3 g((unsigned)nb), b(PKC_BLOCK);
    const bool sym = op->csr_format == PK_CUDA_CSR_SYMDIA;
    /* the bound ND of the unrolled loops: 4 (a symmetric 7-point matrix), 8 (plain 7-point), else 32 */
#define PKC_DIA(V, SYM, arr)                                                                              \
  do {                                                                                                  \
    if (nd <= 4)                                                                                        \
      return launch_kernel(pdl, k_dia<V, SYM, 4, Act>, g, b, 0, s, arr, op->n, nd, off, x, act, part);  \
    if (nd <= 8)                                                                                        \
      return launch_kernel(pdl, k_dia<V, SYM, 8, Act>, g, b, 0, s, arr, op->n, nd, off, x, act, part);  \
    return launch_kernel(pdl, k_dia<V, SYM, PK_CUDA_DIA_MAX, Act>, g, b, 0, s, arr, op->n, nd, off, x, act, \
                         part);                                                                         \
  } while (0)
    if (op->fp32) {
      if (sym) PKC_DIA(float, true, op->diaf);
      PKC_DIA(float, false, op->diaf);
    }
    if (sym) PKC_DIA(double, true, op->dia);
    PKC_DIA(double, false, op->dia);
#undef PKC_DIA
  }
  if (op->type == PKRYLOV_OPERATOR_CSR) {
    const int L = csr_lanes(op);
    const int64_t nb = blocks_1d(op->n); /* the vector kernel too: a warp owns 32 rows at a time */
    if (nblocks) *nblocks = nb;
    const dim3 g((unsigned)nb), b(PKC_BLOCK);
    if (L > 1) {
      if (op->fp32) {
        if (op->col32)
          return launch_kernel(pdl, k_csr_vec<float, int32_t, Act>, g, b, 0, s, op->rowptr, op->col32, op->valf,
                               op->n, L, x, act, part);
        return launch_kernel(pdl, k_csr_vec<float, int64_t, Act>, g, b, 0, s, op->rowptr, op->col64, op->valf,
                             op->n, L, x, act, part);
      }
      if (op->col32)
        return launch_kernel(pdl, k_csr_vec<double, int32_t, Act>, g, b, 0, s, op->rowptr, op->col32, op->val,
                             op->n, L, x, act, part);
      return launch_kernel(pdl, k_csr_vec<double, int64_t, Act>, g, b, 0, s, op->rowptr, op->col64, op->val,
                           op->n, L, x, act, part);
    }
    if (op->fp32) {
      if (op->col32)
        return launch_kernel(pdl, k_csr<float, int32_t, Act>, g, b, 0, s, op->rowptr, op->col32, op->valf,
                             op->n, x, act, part);
      return launch_kernel(pdl, k_csr<float, int64_t, Act>, g, b, 0, s, op->rowptr, op->col64, op->valf,
                           op->n, x, act, part);
    }
    if (op->col32)
      return launch_kernel(pdl, k_csr<double, int32_t, Act>, g, b, 0, s, op->rowptr, op->col32, op->val,
                           op->n, x, act, part);
    return launch_kernel(pdl, k_csr<double, int64_t, Act>, g, b, 0, s, op->rowptr, op->col64, op->val, op->n,
                         x, act, part);
  }
  /* the device cannot report an unknown type: refuse it here rather than run it as a thin shell */
  if (op->type != PKRYLOV_OPERATOR_STENCIL7 && op->type != PKRYLOV_OPERATOR_THINSHELL)
    return (int)cudaErrorInvalidValue;
  if (op->type == PKRYLOV_OPERATOR_STENCIL7 && op->gsny > 0) { /* a grid stencil: tiles and their edges */
    if (op->nz == 1 && (op->gcap || launch_cols(op) >= PKC_TWOD_MIN_COLS)) /* the 2-D kernels */
      return launch_gstencil<true>(s, op, x, act, part, nblocks, pdl);
    return launch_gstencil<false>(s, op, x, act, part, nblocks, pdl);
  }
  const GridShape gs = grid_shape(op);
  if (nblocks) *nblocks = gs.bx * gs.by;
  const dim3 grid((unsigned)gs.bx, (unsigned)gs.by), b(PKC_BLOCK);
  const Halo h = halo_of(op);
  if constexpr (!act_columns<Act>::value) {
    if (op->type == PKRYLOV_OPERATOR_STENCIL7 && !h.mask && !h.cols && op->n >= PKC_CELLS_MIN) {
      if (op->fp32)
        return launch_kernel(pdl, k_stencil_cells<float, Act>, grid, b, 0, s, op->aWf, op->aSf, op->aVf, op->aCf,
                             op->nx, op->ny, op->nz, x, act, part);
      return launch_kernel(pdl, k_stencil_cells<double, Act>, grid, b, 0, s, op->aW, op->aS, op->aV, op->aC,
                           op->nx, op->ny, op->nz, x, act, part);
    }
  }
  if (op->type == PKRYLOV_OPERATOR_STENCIL7) {
    auto kd = Act::MINB > 0 ? k_stencil_minb<double, Act> : k_stencil<double, Act>;
    auto kf = Act::MINB > 0 ? k_stencil_minb<float, Act> : k_stencil<float, Act>;
    if (op->fp32)
      return launch_kernel(pdl, kf, grid, b, 0, s, op->aWf, op->aSf, op->aVf, op->aCf, op->nx, op->ny, op->nz,
                           gs.kc, x, act, part, h);
    return launch_kernel(pdl, kd, grid, b, 0, s, op->aW, op->aS, op->aV, op->aC, op->nx, op->ny, op->nz,
                         gs.kc, x, act, part, h);
  }
  auto kt = Act::MINB > 0 ? k_thinshell_minb<Act> : k_thinshell<Act>;
  return launch_kernel(pdl, kt, grid, b, 0, s, op->ta, op->tb, op->tc, op->td, op->area, op->ax, op->ay,
                       op->nx, op->ny, op->nz, gs.kc, x, act, part, h);
}

} // namespace

#endif /* PK_CUDA_OP_CUH */

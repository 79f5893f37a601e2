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
  const GridShape gs = grid_shape(op);
  if (nblocks) *nblocks = gs.bx * gs.by;
  const dim3 grid((unsigned)gs.bx, (unsigned)gs.by), b(PKC_BLOCK);
  if (op->type == PKRYLOV_OPERATOR_STENCIL7 && op->gsny > 0) { /* a grid stencil: tiles and their edges */
    const GHalo gh = ghalo_of(op);
    const bool loop = gs.bx * PKC_BLOCK < launch_cols(op); /* a capped launch (gcap): grid-stride */
    auto kd = Act::MINB > 0 ? (loop ? k_gstencil_minb<double, Act, true> : k_gstencil_minb<double, Act, false>)
                            : (loop ? k_gstencil<double, Act, true> : k_gstencil<double, Act, false>);
    auto kf = Act::MINB > 0 ? (loop ? k_gstencil_minb<float, Act, true> : k_gstencil_minb<float, Act, false>)
                            : (loop ? k_gstencil<float, Act, true> : k_gstencil<float, Act, false>);
    if (op->fp32)
      return launch_kernel(pdl, kf, grid, b, 0, s, op->aWf, op->aSf, op->aVf, op->aCf, op->nx, op->ny, op->nz,
                           gs.kc, x, act, part, gh);
    return launch_kernel(pdl, kd, grid, b, 0, s, op->aW, op->aS, op->aV, op->aC, op->nx, op->ny, op->nz,
                         gs.kc, x, act, part, gh);
  }
  const Halo h = halo_of(op);
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

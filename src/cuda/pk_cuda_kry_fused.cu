/**
 * @file pk_cuda_kry_fused.cu
 * @brief The CUDA vector engine's fused operator product and update (pk_kry_matvec_update) for CSR
 *        operators: one launch of the engine's CSR kernel (k_csr, k_csr_vec or k_dia, pk_cuda_csr.cuh, on the
 *        view the engine's matvec uses) with the action ActMvUpd, which stores the row's product y_r and then
 *        runs the update list at element r (k_update's per-element body, pk_cuda_kry_ops.cu) and accumulates
 *        the pairs' products; the partial sums by block_store (block_sum's tree) at k_update's slots, and
 *        the unchanged second stage (sum_into) or the exact sums (reproducible mode).
 *
 * Why the results are bitwise those of the two launches (matvec, then update):
 *  - y: the same kernel template as the matvec's (launch_op's choice for the view: DIA / SYMDIA with the same
 *    ND bound, one thread per row, or k_csr_vec with the same lane count), the same row sum; a row's sum
 *    does not depend on the grid size (grid-stride loops; k_csr_vec's warps own 32 rows each pass).
 *  - the updated vectors: the update body is k_update's, statement for statement (coefficients from S read
 *    once per block by pk_coef_value, list order, zero coefficients skipped, the same live / first-term
 *    rule), at element r, by the thread that just wrote y_r; every file of the CUDA library is compiled
 *    with -fmad=false, so no contraction differs. The front end refuses an update that writes the
 *    product's input x, and updates and pairs are elementwise, so no thread reads what another writes.
 *  - the sums: the launch uses k_update's grid (grid_1d(n, KMAX_UPD_BLOCKS) blocks of KB = PKC_BLOCK =
 *    256 threads) instead of the operator's (blocks_1d: up to PKC_MAX_BLOCKS), so thread t of block b
 *    visits the same elements in the same order as in k_update (every kernel applies the action at row
 *    r = b * 256 + t + k * stride; k_csr_vec applies it by lane r - r0 of the warp owning r0, the same
 *    thread); acc[j] += a_j[r] * b_j[r] as there; block_store<NP> reduces each value by block_sum's tree
 *    (shuffles 16..1, warp 0 over the 8 warp sums 4..1) into part[block * NP + j], k_update's slot.
 * The pair count NP is a template argument (block_store's value count); 0 ... PK_KRY_MAXPAIRS.
 */
#include <cuda_runtime.h>
#include <stdint.h>
#include <string.h>

#include <type_traits>

#include "pk_cuda.h"
#include "pk_cuda_dev.cuh"
#include "pk_cuda_csr.cuh"
#include "pk_cuda_kry.cuh"
#include "pk_cuda_xsum.cuh"

using namespace pkc_kry;
using namespace pkc_xsum;

namespace {

static_assert(KB == PKC_BLOCK, "the fused kernel's blocks must be k_update's");

/* the update list and the pairs: k_update's UpdArgs (pk_cuda_kry.cuh) */

/* the block's copy of the arguments and coefficient values (k_update's shared a and cv) */
__shared__ UpdArgs fu_a;
__shared__ double fu_cv[PK_KRY_MAXUPD][PK_KRY_MAXTERMS + 1];

/* reproducible mode: the block's exact accumulators of the pairs (pk_cuda_xsum.cuh; XR instances only) */
__shared__ xslot fu_x[PK_KRY_MAXPAIRS * PK_XACC_LEN];

/**
 * y = A x, then at the same element the update list and the pairs' products (NP pairs). XR (reproducible
 * mode): the products are added exactly in the same pass, acc holding the expansions (acc[2j], acc[2j + 1])
 * and fu_x the block's accumulators, which xfinish (the kernel's finish) writes to part read as the int64
 * block accumulators of xfinish (pk_cuda_kry_sums.cu), NP per block.
 */
template <int NP, bool XR = false> struct ActMvUpd {
  static constexpr int NV = XR ? 2 * NP : NP; /* (MINB, PREFETCH: the grid kernels' only) */
  struct In {};
  double *y;
  const double *S;
  UpdArgs args;
  /* every thread calls it first: k_update's prologue (arguments and coefficient values into shared memory) */
  __device__ bool begin() {
    if constexpr (XR)
      xs_zero(fu_x, NP); /* before the __syncthreads below */
    {
      const unsigned long long *src = (const unsigned long long *)&args;
      unsigned long long *dst = (unsigned long long *)&fu_a;
      for (int w = threadIdx.x; w < (int)(sizeof(UpdArgs) / 8); w += KB)
        dst[w] = src[w];
    }
    __syncthreads();
    for (int t = threadIdx.x; t < fu_a.nupd * (PK_KRY_MAXTERMS + 1); t += KB) {
      const int u = t / (PK_KRY_MAXTERMS + 1), k = t % (PK_KRY_MAXTERMS + 1);
      double v = 0.0;
      if (k == 0)
        v = pk_coef_value(fu_a.u[u].cy, S);
      else if (k - 1 < fu_a.u[u].nterms)
        v = pk_coef_value(fu_a.u[u].c[k - 1], S);
      fu_cv[u][k] = v;
    }
    __syncthreads();
    return true;
  }
  __device__ In load(int64_t) const { return In{}; }
  __device__ void operator()(int64_t i, double ax, double, const In &, double *acc) const {
    y[i] = ax; /* ActApply */
    /* k_update's loop body at element i */
    const int nupd = fu_a.nupd;
    for (int u = 0; u < nupd; u++) {
      double *yu = fu_a.u[u].y;
      const double cy = fu_cv[u][0];
      double t = 0.0;
      bool live = false;
      if (cy != 0.0) {
        t = cy * yu[i];
        live = true;
      }
      const int nt = fu_a.u[u].nterms;
      for (int k = 0; k < nt; k++) {
        const double c = fu_cv[u][k + 1];
        if (c == 0.0)
          continue;
        const double p = c * fu_a.u[u].x[k][i];
        t = live ? t + p : p;
        live = true;
      }
      yu[i] = t;
    }
#pragma unroll
    for (int j = 0; j < NP; j++) {
      if constexpr (XR)
        xs_add_prod<false>(acc[2 * j], acc[2 * j + 1], fu_a.pa[j][i], fu_a.pb[j][i], fu_x + j * PK_XACC_LEN);
      else
        acc[j] += fu_a.pa[j][i] * fu_a.pb[j][i];
    }
  }
};

/** The exact-sum action (finish calls xfinish: every thread of the block, after the loop). */
template <int NP> struct ActMvUpdX : ActMvUpd<NP, true> {
  static constexpr bool XR = true;
  static __device__ __forceinline__ void xfinish(const double *acc, double *part) {
#pragma unroll
    for (int j = 0; j < NP; j++)
      xs_flush(acc[2 * j], acc[2 * j + 1], fu_x + j * PK_XACC_LEN);
    xs_store(fu_x, NP, (int64_t *)part + block_slot() * NP * PK_XACC_LEN);
  }
};

/** launch_op's CSR branches (DIA / SYMDIA, vector lanes, one thread per row) for op, on nb blocks. */
template <class Act>
int launch_fused(cudaStream_t s, const pk_cuda_op *op, const double *x, const Act &act, double *part,
                 int64_t nb) {
  const dim3 g((unsigned)nb), b(PKC_BLOCK);
  if (op->csr_format != PK_CUDA_CSR_PLAIN) {
    const int nd = op->dia_nd;
    if (nd < 1 || nd > PK_CUDA_DIA_MAX || (op->fp32 ? !op->diaf : !op->dia)) return (int)cudaErrorInvalidValue;
    DiaOff off = {};
    for (int d = 0; d < nd; d++) off.o[d] = op->dia_off[d];
    const bool sym = op->csr_format == PK_CUDA_CSR_SYMDIA;
#define PKC_FDIA(V, SYM, arr)                                                                             \
  do {                                                                                                  \
    if (nd <= 4)                                                                                        \
      return launch_kernel(false, k_dia<V, SYM, 4, Act>, g, b, 0, s, arr, op->n, nd, off, x, act, part); \
    if (nd <= 8)                                                                                        \
      return launch_kernel(false, k_dia<V, SYM, 8, Act>, g, b, 0, s, arr, op->n, nd, off, x, act, part); \
    return launch_kernel(false, k_dia<V, SYM, PK_CUDA_DIA_MAX, Act>, g, b, 0, s, arr, op->n, nd, off, x, act, \
                         part);                                                                         \
  } while (0)
    if (op->fp32) {
      if (sym) PKC_FDIA(float, true, op->diaf);
      PKC_FDIA(float, false, op->diaf);
    }
    if (sym) PKC_FDIA(double, true, op->dia);
    PKC_FDIA(double, false, op->dia);
#undef PKC_FDIA
  }
  const int L = csr_lanes(op);
  if (L > 1) {
    if (op->fp32) {
      if (op->col32)
        return launch_kernel(false, k_csr_vec<float, int32_t, Act>, g, b, 0, s, op->rowptr, op->col32, op->valf,
                             op->n, L, x, act, part);
      return launch_kernel(false, k_csr_vec<float, int64_t, Act>, g, b, 0, s, op->rowptr, op->col64, op->valf,
                           op->n, L, x, act, part);
    }
    if (op->col32)
      return launch_kernel(false, k_csr_vec<double, int32_t, Act>, g, b, 0, s, op->rowptr, op->col32, op->val,
                           op->n, L, x, act, part);
    return launch_kernel(false, k_csr_vec<double, int64_t, Act>, g, b, 0, s, op->rowptr, op->col64, op->val,
                         op->n, L, x, act, part);
  }
  if (op->fp32) {
    if (op->col32)
      return launch_kernel(false, k_csr<float, int32_t, Act>, g, b, 0, s, op->rowptr, op->col32, op->valf, op->n,
                           x, act, part);
    return launch_kernel(false, k_csr<float, int64_t, Act>, g, b, 0, s, op->rowptr, op->col64, op->valf, op->n,
                         x, act, part);
  }
  if (op->col32)
    return launch_kernel(false, k_csr<double, int32_t, Act>, g, b, 0, s, op->rowptr, op->col32, op->val, op->n, x,
                         act, part);
  return launch_kernel(false, k_csr<double, int64_t, Act>, g, b, 0, s, op->rowptr, op->col64, op->val, op->n, x,
                       act, part);
}

/** NP pairs; XR: the one-pass exact sums (reproducible mode), part the blocks' int64 accumulators. */
template <int NP, bool XR>
int launch_np(cudaStream_t s, const pk_cuda_op *op, const double *x, double *y, const double *S,
              const UpdArgs &a, void *part, int64_t nb) {
  typename std::conditional<XR, ActMvUpdX<NP>, ActMvUpd<NP>>::type act;
  act.y = y;
  act.S = S;
  act.args = a;
  return launch_fused(s, op, x, act, (double *)part, nb);
}

/** launch_np<np, XR> for np = 0 ... PK_KRY_MAXPAIRS (XR: 1 ...); -1 for any other count. */
template <bool XR>
int launch_pairs(int np, cudaStream_t s, const pk_cuda_op *op, const double *x, double *y, const double *S,
                 const UpdArgs &a, void *part, int64_t nb) {
  static_assert(PK_KRY_MAXPAIRS == 8, "one case per pair count");
  switch (np) {
  case 0:
    if constexpr (XR)
      return -1; /* (no instance without sums) */
    else
      return launch_np<0, XR>(s, op, x, y, S, a, part, nb);
  case 1: return launch_np<1, XR>(s, op, x, y, S, a, part, nb);
  case 2: return launch_np<2, XR>(s, op, x, y, S, a, part, nb);
  case 3: return launch_np<3, XR>(s, op, x, y, S, a, part, nb);
  case 4: return launch_np<4, XR>(s, op, x, y, S, a, part, nb);
  case 5: return launch_np<5, XR>(s, op, x, y, S, a, part, nb);
  case 6: return launch_np<6, XR>(s, op, x, y, S, a, part, nb);
  case 7: return launch_np<7, XR>(s, op, x, y, S, a, part, nb);
  case 8: return launch_np<8, XR>(s, op, x, y, S, a, part, nb);
  default: return -1;
  }
}

} // namespace

namespace pkc_kry {

bool matvec_update_fusable(pk_kry *E) {
  const KryDev *D = dev_of(E);
  /* CSR views only (the grid operators' blocks are not k_update's); no user routine or caller's halo
     exchange (host calls), no distributed operator (its halo exchange splits the product in two launches) */
  return D->fuse_on && !D->uop && !D->dop && D->op.type == PKRYLOV_OPERATOR_CSR && D->op.n == E->n;
}

int do_matvec_update(pk_kry *E, pk_vid x, pk_vid y, int32_t nupd, const pk_kupd *u, int32_t npairs,
                     const pk_kpair *pairs, int32_t out, bool async) {
  KryDev *D = dev_of(E);
  if (npairs < 0 || npairs > PK_KRY_MAXPAIRS)
    return pk_error(E->ctx, PKRYLOV_ERR_INTERNAL, "pk_kry", "CUDA engine: %d pairs", npairs);
  UpdArgs a;
  upd_args(E, nupd, u, npairs, pairs, &a);
  const int64_t nb = grid_1d(E->n, KMAX_UPD_BLOCKS); /* k_update's grid */
  const double *xp = vp(E, x);
  double *yp = vp(E, y);
  if (D->repro && npairs > 0) {
    const int64_t xb = xgrid(E->n, nb, npairs, D->xfuse_on);
    if (xb > 0) { /* one pass: the product, the updates and the pairs' exact sums */
      const int e = launch_pairs<true>(npairs, D->st, &D->op, xp, yp, D->S, a, D->xpart, xb);
      PK_CUDA_CHECK(E->ctx, kSolve, e, "operator product and update (exact sums)");
      return xfinish(E, xb, npairs, false, out);
    }
  }
  /* reproducible beyond xgrid's bound or with kry.xfuse=0: the updates only, then the exact sums (as
     do_update) */
  const bool exact = D->repro && npairs > 0;
  const int np = exact ? 0 : npairs;
  if (exact)
    a.npairs = 0;
  const int e = launch_pairs<false>(np, D->st, &D->op, xp, yp, D->S, a, np > 0 ? D->part : nullptr, nb);
  PK_CUDA_CHECK(E->ctx, kSolve, e, "operator product and update");
  if (exact)
    return xsums(E, npairs, a.pa, a.pb, false, out);
  if (npairs > 0)
    return sum_into(E, nb, npairs, false, out, async);
  return PKRYLOV_SUCCESS;
}

} // namespace pkc_kry

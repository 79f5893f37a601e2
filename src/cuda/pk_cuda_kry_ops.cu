/**
 * @file pk_cuda_kry_ops.cu
 * @brief The vector operations of the CUDA vector engine (pk_cuda_kry.cu runs them from its records): the
 *        operator product, the preconditioner and the residual through the launchers (pk_cuda.h), the
 *        fused update, the multi-dots (block_dots, basis_dots), basis_axpy, basis_gemm and the fused
 *        Gram-Schmidt pass basis_axpy_dots, with their kernels.
 */
#include <cuda_runtime.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "pk_cuda_kry.cuh"
#include "pk_cuda_xsum.cuh"

using namespace pkc_kry;
using namespace pkc_xsum;

namespace {

/* ---- the fused update ----------------------------------------------------------------------------- */

/* UpdK, UpdArgs, upd_stage, upd_at: pk_cuda_kry.cuh */

/**
 * Updates, then the partial dot products of the pairs (part[block * npairs + j]) when part != NULL.
 * XR (reproducible mode): the pairs' products are added exactly in the same pass (pk_cuda_xsum.cuh) and the
 * block's npairs accumulators go to xpart[block * npairs ..] (part unused).
 */
template <bool XR>
__global__ void __launch_bounds__(KB)
    k_update(int64_t n, const UpdArgs args, const double *S, double *part, int64_t *xpart) {
  __shared__ UpdArgs a;
  __shared__ double cv[PK_KRY_MAXUPD][PK_KRY_MAXTERMS + 1];
  __shared__ double sh[KB / 32];
  __shared__ xslot xs[XR ? PK_KRY_MAXPAIRS * PK_XACC_LEN : 1];
  if constexpr (XR)
    xs_zero(xs, PK_KRY_MAXPAIRS); /* before the first __syncthreads below */
  upd_stage(a, args, cv, S);
  const int nupd = a.nupd, np = a.npairs;
  double acc[PK_KRY_MAXPAIRS];
  double acc1[XR ? PK_KRY_MAXPAIRS : 1]; /* XR: the expansions (acc[j], acc1[j]) */
#pragma unroll
  for (int j = 0; j < PK_KRY_MAXPAIRS; j++)
    acc[j] = 0.0;
#pragma unroll
  for (int j = 0; j < (XR ? PK_KRY_MAXPAIRS : 1); j++)
    acc1[j] = 0.0;
  const int64_t stride = (int64_t)gridDim.x * KB;
  for (int64_t i = (int64_t)blockIdx.x * KB + threadIdx.x; i < n; i += stride) {
    upd_at(a, cv, nupd, i);
#pragma unroll
    for (int j = 0; j < PK_KRY_MAXPAIRS; j++)
      if (j < np) {
        if constexpr (XR)
          xs_add_prod<false>(acc[j], acc1[j], a.pa[j][i], a.pb[j][i], xs + j * PK_XACC_LEN);
        else
          acc[j] += a.pa[j][i] * a.pb[j][i];
      }
  }
  if constexpr (XR) {
    if (np == 0) /* uniform over the block */
      return;
#pragma unroll
    for (int j = 0; j < PK_KRY_MAXPAIRS; j++)
      if (j < np)
        xs_flush(acc[j], acc1[j], xs + j * PK_XACC_LEN);
    xs_store(xs, np, xpart + (int64_t)blockIdx.x * np * PK_XACC_LEN);
  } else {
    if (!part)
      return;
#pragma unroll
    for (int j = 0; j < PK_KRY_MAXPAIRS; j++) {
      if (j < np) { /* np is uniform over the block: every thread takes the same branches */
        const double s = block_sum(acc[j], sh);
        if (threadIdx.x == 0)
          part[(int64_t)blockIdx.x * np + j] = s;
      }
    }
  }
}

/* ---- multi-dot ------------------------------------------------------------------------------------ */

/** One side of a multi-dot: vector i < k is base + i * ld, except the last one when `last` is set. */
struct Side {
  const double *base;
  const double *last;
  int64_t ld;
  int32_t k;
};
__device__ __forceinline__ const double *side_ptr(const Side &s, int i) {
  return (s.last && i == s.k - 1) ? s.last : s.base + (int64_t)i * s.ld;
}

/**
 * Tile (ta, tb) = (blockIdx.y % nta, blockIdx.y / nta) of the dot products (A_i, B_j), i < A.k, j < B.k:
 * partials of value p = i + A.k * j at part[blockIdx.x * nvals + p] (DD: 2p, 2p + 1), nvals = A.k * B.k
 * (DD: twice that).
 */
template <int TA, int TB, bool DD, bool XR = false>
__global__ void __launch_bounds__(KB) k_mdot(int64_t n, Side A, Side B, int nta, double *part, int64_t *xpart) {
  __shared__ double sh[2 * (KB / 32)];
  __shared__ xslot xs[XR ? TA * TB * PK_XACC_LEN : 1];
  if constexpr (XR) { /* the tile's exact accumulators (pk_cuda_xsum.cuh) */
    xs_zero(xs, TA * TB);
    __syncthreads();
  }
  const int ta = blockIdx.y % nta, tb = blockIdx.y / nta;
  const int i0 = ta * TA, j0 = tb * TB;
  const double *pa[TA], *pb[TB];
#pragma unroll
  for (int q = 0; q < TA; q++)
    pa[q] = i0 + q < A.k ? side_ptr(A, i0 + q) : nullptr;
#pragma unroll
  for (int q = 0; q < TB; q++)
    pb[q] = j0 + q < B.k ? side_ptr(B, j0 + q) : nullptr;
  double h[TA][TB], l[TA][TB];
#pragma unroll
  for (int p = 0; p < TA; p++)
#pragma unroll
    for (int q = 0; q < TB; q++)
      h[p][q] = 0.0, l[p][q] = 0.0;
  const int64_t stride = (int64_t)gridDim.x * KB;
  for (int64_t i = (int64_t)blockIdx.x * KB + threadIdx.x; i < n; i += stride) {
    double va[TA], vb[TB];
#pragma unroll
    for (int p = 0; p < TA; p++)
      va[p] = pa[p] ? pa[p][i] : 0.0;
#pragma unroll
    for (int q = 0; q < TB; q++)
      vb[q] = pb[q] ? pb[q][i] : 0.0;
#pragma unroll
    for (int p = 0; p < TA; p++)
#pragma unroll
      for (int q = 0; q < TB; q++) {
        if constexpr (XR) /* (h, l): the expansion */
          xs_add_prod<DD>(h[p][q], l[p][q], va[p], vb[q], xs + (p * TB + q) * PK_XACC_LEN);
        else if (DD)
          dd_fma(h[p][q], l[p][q], va[p], vb[q]);
        else
          h[p][q] += va[p] * vb[q];
      }
  }
  if constexpr (XR) { /* value v = (i0 + p) + A.k (j0 + q) to xpart[(block * A.k B.k + v) * PK_XACC_LEN ..] */
#pragma unroll
    for (int p = 0; p < TA; p++)
#pragma unroll
      for (int q = 0; q < TB; q++)
        xs_flush(h[p][q], l[p][q], xs + (p * TB + q) * PK_XACC_LEN);
    xs_carry(xs, TA * TB);
    const int64_t nvx = (int64_t)A.k * B.k;
    for (int t = threadIdx.x; t < TA * TB * PK_XACC_LEN; t += KB) {
      const int pq = t / PK_XACC_LEN, d = t % PK_XACC_LEN, p = pq / TB, q = pq % TB;
      if (i0 + p >= A.k || j0 + q >= B.k)
        continue;
      const int64_t v = (int64_t)(i0 + p) + (int64_t)A.k * (j0 + q);
      xpart[((int64_t)blockIdx.x * nvx + v) * PK_XACC_LEN + d] = (int64_t)xs[t];
    }
  } else {
    const int ka = A.k, nv = A.k * B.k * (DD ? 2 : 1);
#pragma unroll
    for (int p = 0; p < TA; p++)
#pragma unroll
      for (int q = 0; q < TB; q++) {
        if (!pa[p] || !pb[q])
          continue; /* uniform over the block */
        const int64_t v = (int64_t)(i0 + p) + (int64_t)ka * (j0 + q);
        if (DD) {
          double hh = h[p][q], ll = l[p][q];
          block_sum_dd(hh, ll, sh);
          if (threadIdx.x == 0)
            part[(int64_t)blockIdx.x * nv + 2 * v] = hh, part[(int64_t)blockIdx.x * nv + 2 * v + 1] = ll;
        } else {
          const double s = block_sum(h[p][q], sh);
          if (threadIdx.x == 0)
            part[(int64_t)blockIdx.x * nv + v] = s;
        }
      }
  }
}

/* ---- basis_axpy, basis_gemm ------------------------------------------------------------------------- */

/**
 * Shared-memory doubles for the coefficients of k_basis_axpy: k + 1, rounded up to even, plus two. The
 * compiler loads the coefficient loop's shared values in 16-byte pairs and may read one pair past the last
 * coefficient (compute-sanitizer memcheck saw it); the padding is zeroed.
 */
__host__ __device__ inline int basis_axpy_npad(int k) { return ((k + 2) & ~1) + 2; }

/** y = cy*y + sum_{j < k} s S[c0 + j] V_j (the update's arithmetic: zero coefficients skip their term). */
__global__ void __launch_bounds__(KB) k_basis_axpy(int64_t n, double *y, pk_coef cy, const double *V,
                                                   int64_t ld, int k, const double *S, int c0, int neg) {
  extern __shared__ double cf[]; /* k + 1 coefficients, zero-padded to basis_axpy_npad(k) */
  const int npad = basis_axpy_npad(k);
  for (int j = threadIdx.x; j < npad; j += KB) {
    double v = 0.0;
    if (j == 0)
      v = pk_coef_value(cy, S);
    else if (j <= k)
      v = neg ? -S[c0 + j - 1] : S[c0 + j - 1];
    cf[j] = v;
  }
  __syncthreads();
  const int64_t stride = (int64_t)gridDim.x * KB;
  for (int64_t i = (int64_t)blockIdx.x * KB + threadIdx.x; i < n; i += stride) {
    double t = 0.0;
    bool live = false;
    if (cf[0] != 0.0) {
      t = cf[0] * y[i];
      live = true;
    }
    for (int j = 0; j < k; j++) {
      const double c = cf[j + 1];
      if (c == 0.0)
        continue;
      const double p = c * V[(int64_t)j * ld + i];
      t = live ? t + p : p;
      live = true;
    }
    y[i] = t;
  }
}

/**
 * V_{out_j} = sum_{i < iend} V_{in_i} T[i + ldt j] for j < kout, with the CPU engine's arithmetic: t = V_0
 * T_0j, then t = t + V_i T_ij for i ascending (every term, zeros included); iend = kin, or min(j + 1, kin)
 * in place (out == in: T upper triangular, so column j reads rows i <= j only). Outputs in chunks of
 * KGEMM_J, all of a chunk computed before any is written, chunks in descending order: in place, the rows
 * a chunk reads are overwritten only by itself (after it is computed) or by lower chunks, which come later.
 */
__global__ void __launch_bounds__(KB) k_basis_gemm(int64_t n, const double *Vin, double *Vout, int64_t ld,
                                                   int kin, int kout, const double *T, int ldt, int inplace) {
  const int64_t stride = (int64_t)gridDim.x * KB;
  const int nch = (kout + KGEMM_J - 1) / KGEMM_J;
  for (int64_t i = (int64_t)blockIdx.x * KB + threadIdx.x; i < n; i += stride) {
    for (int ch = nch - 1; ch >= 0; ch--) {
      double acc[KGEMM_J];
#pragma unroll
      for (int q = 0; q < KGEMM_J; q++)
        acc[q] = 0.0;
      const int j0 = ch * KGEMM_J;
      int rend = kin;
      if (inplace && j0 + KGEMM_J < rend)
        rend = j0 + KGEMM_J; /* rows <= the chunk's last column */
      for (int r = 0; r < rend; r++) {
        const double v = Vin[(int64_t)r * ld + i];
#pragma unroll
        for (int q = 0; q < KGEMM_J; q++) {
          const int j = j0 + q;
          if (j >= kout || (inplace && r > j))
            continue;
          const double p = v * __ldg(T + r + (int64_t)ldt * j);
          acc[q] = r == 0 ? p : acc[q] + p;
        }
      }
#pragma unroll
      for (int q = 0; q < KGEMM_J; q++)
        if (j0 + q < kout)
          Vout[(int64_t)(j0 + q) * ld + i] = acc[q];
    }
  }
}

/**
 * Fused Gram-Schmidt pass: y = cy*y + sum_{j < k} s S[c0 + j] V_j (k_basis_axpy's arithmetic), then the
 * partial dot products (V_j, y) for j < k and (y, y) with with_norm, of the new y, in the same pass: every
 * basis vector is read once (the separate kernels read it twice). KM >= k: the basis values of an element
 * are held in registers. Partials at part[block * (k + with_norm) + j].
 */
template <int KM, bool XR = false>
__global__ void __launch_bounds__(KB) k_axpy_dots(int64_t n, double *y, pk_coef cy, const double *V, int64_t ld,
                                                  int k, const double *S, int c0, int neg, int with_norm,
                                                  double *part, int64_t *xpart) {
  __shared__ double cf[KM + 2];
  __shared__ double sh[KB / 32];
  /* XR: the exact accumulators of (V_j, y), j < k, then (y, y) at k (pk_cuda_xsum.cuh) */
  __shared__ xslot xs[XR ? (KM + 1) * PK_XACC_LEN : 1];
  if constexpr (XR)
    xs_zero(xs, KM + 1); /* before the __syncthreads below */
  for (int j = threadIdx.x; j < KM + 2; j += KB) {
    double v = 0.0;
    if (j == 0)
      v = pk_coef_value(cy, S);
    else if (j <= k)
      v = neg ? -S[c0 + j - 1] : S[c0 + j - 1];
    cf[j] = v;
  }
  __syncthreads();
  double acc[KM];
  double acc1[XR ? KM : 1]; /* XR: the expansions (acc[j], acc1[j]), (nn, nn1) */
#pragma unroll
  for (int j = 0; j < KM; j++)
    acc[j] = 0.0;
#pragma unroll
  for (int j = 0; j < (XR ? KM : 1); j++)
    acc1[j] = 0.0;
  double nn = 0.0, nn1 = 0.0;
  const int64_t stride = (int64_t)gridDim.x * KB;
  for (int64_t i = (int64_t)blockIdx.x * KB + threadIdx.x; i < n; i += stride) {
    double v[KM];
#pragma unroll
    for (int j = 0; j < KM; j++)
      v[j] = j < k ? V[(int64_t)j * ld + i] : 0.0;
    double t = 0.0;
    bool live = false;
    if (cf[0] != 0.0) {
      t = cf[0] * y[i];
      live = true;
    }
#pragma unroll
    for (int j = 0; j < KM; j++) {
      const double c = cf[j + 1]; /* 0 beyond k */
      if (j >= k || c == 0.0)
        continue;
      const double p = c * v[j];
      t = live ? t + p : p;
      live = true;
    }
    y[i] = t;
    if constexpr (XR) {
#pragma unroll
      for (int j = 0; j < KM; j++)
        if (j < k) /* uniform */
          xs_add_prod<false>(acc[j], acc1[j], v[j], t, xs + j * PK_XACC_LEN);
      if (with_norm)
        xs_add_prod<false>(nn, nn1, t, t, xs + k * PK_XACC_LEN);
    } else {
#pragma unroll
      for (int j = 0; j < KM; j++)
        acc[j] += v[j] * t;
      nn += t * t;
    }
  }
  const int nv = k + with_norm;
  if constexpr (XR) {
#pragma unroll
    for (int j = 0; j < KM; j++)
      if (j < k)
        xs_flush(acc[j], acc1[j], xs + j * PK_XACC_LEN);
    if (with_norm)
      xs_flush(nn, nn1, xs + k * PK_XACC_LEN);
    xs_store(xs, nv, xpart + (int64_t)blockIdx.x * nv * PK_XACC_LEN);
  } else {
#pragma unroll
    for (int j = 0; j < KM; j++) {
      if (j < k) { /* uniform over the block */
        const double s = block_sum(acc[j], sh);
        if (threadIdx.x == 0)
          part[(int64_t)blockIdx.x * nv + j] = s;
      }
    }
    if (with_norm) {
      const double s = block_sum(nn, sh);
      if (threadIdx.x == 0)
        part[(int64_t)blockIdx.x * nv + k] = s;
    }
  }
}

/** Host twin of side_ptr. */
const double *side_ptr_h(const Side &s, int i) {
  return (s.last && i == s.k - 1) ? s.last : s.base + (int64_t)i * s.ld;
}

/** All dot products (A_i, B_j) into S[out + i + A.k * j] (DD: pairs). */
int mdot(pk_kry *E, const Side &A, const Side &B, bool dd, int32_t out, bool async) {
  KryDev *D = dev_of(E);
  const int64_t n = E->n;
  if (A.k <= 0 || B.k <= 0)
    return PKRYLOV_SUCCESS;
  if (D->repro) { /* the exact sums only (the CPU engine's pairs: (A_i, B_j) at i + A.k * j) */
    const int nv = A.k * B.k;
    const int64_t xb = xgrid(n, grid_dot(n), nv, D->xfuse_on);
    if (xb > 0) { /* one pass, the tiles of the default kernels */
      cudaStream_t s = D->st;
      if (dd) {
        constexpr int TA = 2, TB = 2;
        const int nta = (A.k + TA - 1) / TA, ntb = (B.k + TB - 1) / TB;
        k_mdot<TA, TB, true, true>
            <<<dim3((unsigned)xb, (unsigned)(nta * ntb)), KB, 0, s>>>(n, A, B, nta, nullptr, D->xpart);
      } else if (B.k == 1) {
        constexpr int TA = 8, TB = 1;
        const int nta = (A.k + TA - 1) / TA;
        k_mdot<TA, TB, false, true><<<dim3((unsigned)xb, (unsigned)nta), KB, 0, s>>>(n, A, B, nta, nullptr,
                                                                                    D->xpart);
      } else {
        constexpr int TA = 4, TB = 4;
        const int nta = (A.k + TA - 1) / TA, ntb = (B.k + TB - 1) / TB;
        k_mdot<TA, TB, false, true>
            <<<dim3((unsigned)xb, (unsigned)(nta * ntb)), KB, 0, s>>>(n, A, B, nta, nullptr, D->xpart);
      }
      PK_CUDA_CHECK(E->ctx, kSolve, cudaGetLastError(), "dot products (exact sums)");
      return xfinish(E, xb, nv, dd, out);
    }
    D->xa.resize((size_t)nv), D->xb.resize((size_t)nv);
    for (int j = 0; j < B.k; j++)
      for (int i = 0; i < A.k; i++) {
        const size_t v = (size_t)i + (size_t)A.k * j;
        D->xa[v] = side_ptr_h(A, i), D->xb[v] = side_ptr_h(B, j);
      }
    return xsums(E, nv, D->xa.data(), D->xb.data(), dd, out);
  }
  const int64_t nb = grid_dot(n);
  const int nvals = A.k * B.k;
  PK_CALL(ensure_part(E, (size_t)nb * (size_t)nvals * (dd ? 2 : 1)));
  cudaStream_t s = D->st;
  if (dd) {
    constexpr int TA = 2, TB = 2;
    const int nta = (A.k + TA - 1) / TA, ntb = (B.k + TB - 1) / TB;
    k_mdot<TA, TB, true><<<dim3((unsigned)nb, (unsigned)(nta * ntb)), KB, 0, s>>>(n, A, B, nta, D->part,
                                                                                 nullptr);
  } else if (B.k == 1) {
    constexpr int TA = 8, TB = 1;
    const int nta = (A.k + TA - 1) / TA;
    k_mdot<TA, TB, false><<<dim3((unsigned)nb, (unsigned)nta), KB, 0, s>>>(n, A, B, nta, D->part, nullptr);
  } else {
    constexpr int TA = 4, TB = 4;
    const int nta = (A.k + TA - 1) / TA, ntb = (B.k + TB - 1) / TB;
    k_mdot<TA, TB, false><<<dim3((unsigned)nb, (unsigned)(nta * ntb)), KB, 0, s>>>(n, A, B, nta, D->part,
                                                                                  nullptr);
  }
  PK_CUDA_CHECK(E->ctx, kSolve, cudaGetLastError(), "dot products");
  return sum_into(E, nb, nvals, dd, out, async);
}

} // namespace

namespace pkc_kry {

/** y = A x by the caller's routine (device pointers): the user operator's, or the halo-exchange stencil's
 *  exchange between the fill and the stencil kernels (pk_cuda_halo_apply, the CG path's product). */
int uop_apply(pk_kry *E, const double *x, double *y) {
  pkrylov_operator A = E->s->A;
  if (A->halo.exchange)
    return pk_cuda_halo_apply(A, x, y, "pkrylov_solver_solve");
  return pk_cuda_user_call(E->ctx, A->user.apply, A->user.data, E->n, x, y, "operator");
}

int do_matvec(pk_kry *E, pk_vid x, pk_vid y) {
  KryDev *D = dev_of(E);
  if (D->uop)
    return uop_apply(E, vp(E, x), vp(E, y));
  if (D->dop) { /* distributed: the columns off the tile edges while the halo travels, then the edges */
    PK_CALL(pk_cuda_dist_halo_begin(D->dop, vp(E, x), D->nccl));
    PK_CUDA_CHECK(E->ctx, kSolve, pk_cuda_op_apply(D->st, &D->op_in, vp(E, x), vp(E, y)), "operator product");
    PK_CALL(pk_cuda_dist_halo_end(D->dop, D->nccl));
    PK_CUDA_CHECK(E->ctx, kSolve, pk_cuda_op_apply(D->st, &D->op_edge, vp(E, x), vp(E, y)),
                  "operator product (tile edges)");
    return PKRYLOV_SUCCESS;
  }
  PK_CUDA_CHECK(E->ctx, kSolve, pk_cuda_op_apply(D->st, &D->op, vp(E, x), vp(E, y)), "operator product");
  return PKRYLOV_SUCCESS;
}

int do_precond(pk_kry *E, pk_vid x, pk_vid y) {
  KryDev *D = dev_of(E);
  double *a = vp(E, x), *b = vp(E, y);
  if (D->upc)
    return pk_cuda_user_call(E->ctx, E->s->M->user.apply, E->s->M->user.data, E->n, a, b, "preconditioner");
  if (D->pc.type == PKRYLOV_PRECOND_NONE) {
    if (a != b)
      PK_CUDA_CHECK(E->ctx, kSolve,
                    cudaMemcpyAsync(b, a, sizeof(double) * (size_t)E->n, cudaMemcpyDeviceToDevice, D->st),
                    "copy");
    return PKRYLOV_SUCCESS;
  }
  if (D->dop && D->pc.type == PKRYLOV_PRECOND_AINV) /* it reads a's neighbours: their halo first */
    PK_CALL(pk_cuda_dist_halo(D->dop, a, D->nccl));
  PK_CUDA_CHECK(E->ctx, kSolve, pk_cuda_pc_apply(D->st, &D->pc, NULL, a, b), "preconditioner");
  return PKRYLOV_SUCCESS;
}

int do_residual(pk_kry *E, pk_vid x, pk_vid r, int32_t out, bool x_zero) {
  KryDev *D = dev_of(E);
  int64_t nb = 0;
  if (D->uop && x_zero) /* (the frame's b - A 0: no routine call for A 0 = 0) */
    PK_CUDA_CHECK(E->ctx, kSolve, cudaMemsetAsync(D->ax, 0, sizeof(double) * (size_t)E->n, D->st), "memset");
  else if (D->uop) /* A x by the routine (or the halo exchange) into D->ax, which the residual launcher reads */
    PK_CALL(uop_apply(E, vp(E, x), D->ax));
  if (D->dop) /* distributed: the halo of x first (the residual's partial slots need one launch) */
    PK_CALL(pk_cuda_dist_halo(D->dop, vp(E, x), D->nccl));
  PK_CUDA_CHECK(E->ctx, kSolve, pk_cuda_residual(D->st, &D->op64, D->b, vp(E, x), vp(E, r), D->part, &nb),
                "residual");
  if (out >= 0 && D->repro) { /* (r, r) exact; the launcher's partials are ignored */
    const double *rp = vp(E, r);
    return xsums(E, 1, &rp, &rp, false, out);
  }
  if (out >= 0)
    return sum_into(E, nb, 1, false, out);
  return PKRYLOV_SUCCESS;
}

void upd_args(pk_kry *E, int32_t nupd, const pk_kupd *u, int32_t npairs, const pk_kpair *pairs, UpdArgs *a) {
  memset(a, 0, sizeof *a);
  a->nupd = nupd;
  a->npairs = npairs;
  for (int i = 0; i < nupd; i++) {
    a->u[i].y = vp(E, u[i].y);
    a->u[i].cy = u[i].cy;
    a->u[i].nterms = u[i].nterms;
    for (int k = 0; k < u[i].nterms; k++) {
      a->u[i].x[k] = vp(E, u[i].x[k]);
      a->u[i].c[k] = u[i].c[k];
    }
  }
  for (int j = 0; j < npairs; j++) {
    a->pa[j] = vp(E, pairs[j].a);
    a->pb[j] = vp(E, pairs[j].b);
  }
}

int do_update(pk_kry *E, int32_t nupd, const pk_kupd *u, int32_t npairs, const pk_kpair *pairs, int32_t out,
              bool async) {
  KryDev *D = dev_of(E);
  if (nupd <= 0 && npairs <= 0)
    return PKRYLOV_SUCCESS;
  UpdArgs a;
  upd_args(E, nupd, u, npairs, pairs, &a);
  const int64_t nb = grid_1d(E->n, KMAX_UPD_BLOCKS);
  if (D->repro && npairs > 0) {
    const int64_t xb = xgrid(E->n, nb, npairs, D->xfuse_on);
    if (xb > 0) { /* one pass: the updates and the pairs' exact sums */
      k_update<true><<<(unsigned)xb, KB, 0, D->st>>>(E->n, a, D->S, nullptr, D->xpart);
      PK_CUDA_CHECK(E->ctx, kSolve, cudaGetLastError(), "vector update (exact sums)");
      return xfinish(E, xb, npairs, false, out);
    }
    /* the updates only, then the exact sums of the updated vectors */
    a.npairs = 0;
    k_update<false><<<(unsigned)nb, KB, 0, D->st>>>(E->n, a, D->S, nullptr, nullptr);
    PK_CUDA_CHECK(E->ctx, kSolve, cudaGetLastError(), "vector update");
    return xsums(E, npairs, a.pa, a.pb, false, out);
  }
  k_update<false><<<(unsigned)nb, KB, 0, D->st>>>(E->n, a, D->S, npairs > 0 ? D->part : nullptr, nullptr);
  PK_CUDA_CHECK(E->ctx, kSolve, cudaGetLastError(), "vector update");
  if (npairs > 0)
    return sum_into(E, nb, npairs, false, out, async);
  return PKRYLOV_SUCCESS;
}

int do_block_dots(pk_kry *E, int32_t a0, int32_t ka, int32_t b0, int32_t kb, int32_t dd, int32_t out,
                  bool async) {
  Side A, B;
  A.base = bp(E, a0), A.last = nullptr, A.ld = E->ld, A.k = ka;
  B.base = bp(E, b0), B.last = nullptr, B.ld = E->ld, B.k = kb;
  return mdot(E, A, B, dd != 0, out, async);
}

int do_basis_dots(pk_kry *E, pk_vid x, int32_t b0, int32_t k, int32_t with_norm, int32_t out, bool async) {
  Side A, B;
  const double *xp = vp(E, x);
  A.base = k > 0 ? bp(E, b0) : xp, A.ld = E->ld, A.k = k + (with_norm ? 1 : 0);
  A.last = with_norm ? xp : nullptr;
  B.base = xp, B.last = nullptr, B.ld = 0, B.k = 1;
  return mdot(E, A, B, false, out, async);
}

int do_basis_axpy(pk_kry *E, pk_vid y, pk_coef cy, int32_t b0, int32_t k, int32_t c0, int32_t neg) {
  KryDev *D = dev_of(E);
  const size_t smem = sizeof(double) * (size_t)basis_axpy_npad(k);
  k_basis_axpy<<<(unsigned)grid_1d(E->n, KMAX_UPD_BLOCKS), KB, smem, D->st>>>(
      E->n, vp(E, y), cy, bp(E, b0 < E->nbasis ? b0 : 0), E->ld, k, D->S, c0, neg);
  PK_CUDA_CHECK(E->ctx, kSolve, cudaGetLastError(), "basis axpy");
  return PKRYLOV_SUCCESS;
}

int do_basis_gemm(pk_kry *E, int32_t a0, int32_t kin, int32_t t0, int32_t ldt, int32_t b1, int32_t kout) {
  KryDev *D = dev_of(E);
  if (kout <= 0)
    return PKRYLOV_SUCCESS;
  if (kin <= 0)
    return PKRYLOV_SUCCESS; /* nothing defined to write (the CPU engine reads row 0 regardless) */
  k_basis_gemm<<<(unsigned)grid_1d(E->n, KMAX_UPD_BLOCKS), KB, 0, D->st>>>(
      E->n, bp(E, a0), bp(E, b1), E->ld, kin, kout, D->S + t0, ldt, b1 == a0);
  PK_CUDA_CHECK(E->ctx, kSolve, cudaGetLastError(), "basis gemm");
  return PKRYLOV_SUCCESS;
}

int do_axpy_dots(pk_kry *E, pk_vid y, pk_coef cy, int32_t b0, int32_t k, int32_t c0, int32_t neg,
                 int32_t with_norm, int32_t out, bool async) {
  KryDev *D = dev_of(E);
  const int64_t nb = grid_dot(E->n);
  const int nv = k + with_norm;
  const int64_t xb = D->repro ? xgrid(E->n, nb, nv, D->xfuse_on) : 0;
  if (!D->fuse_on || k < 1 || k > 32 || (D->repro && xb < 1)) { /* the two passes */
    PK_CALL(do_basis_axpy(E, y, cy, b0, k, c0, neg));
    if (k + with_norm == 0)
      return PKRYLOV_SUCCESS;
    return do_basis_dots(E, y, b0, k, with_norm, out, async);
  }
  if (D->repro) { /* one pass: the update and the exact sums of the new y */
    double *yp = vp(E, y);
    const double *V = bp(E, b0);
    if (k <= 8)
      k_axpy_dots<8, true><<<(unsigned)xb, KB, 0, D->st>>>(E->n, yp, cy, V, E->ld, k, D->S, c0, neg, with_norm,
                                                           nullptr, D->xpart);
    else if (k <= 16)
      k_axpy_dots<16, true><<<(unsigned)xb, KB, 0, D->st>>>(E->n, yp, cy, V, E->ld, k, D->S, c0, neg, with_norm,
                                                            nullptr, D->xpart);
    else
      k_axpy_dots<32, true><<<(unsigned)xb, KB, 0, D->st>>>(E->n, yp, cy, V, E->ld, k, D->S, c0, neg, with_norm,
                                                            nullptr, D->xpart);
    PK_CUDA_CHECK(E->ctx, kSolve, cudaGetLastError(), "basis axpy and dots (exact sums)");
    return xfinish(E, xb, nv, false, out);
  }
  PK_CALL(ensure_part(E, (size_t)nb * (size_t)nv));
  double *yp = vp(E, y);
  const double *V = bp(E, b0);
  if (k <= 8)
    k_axpy_dots<8><<<(unsigned)nb, KB, 0, D->st>>>(E->n, yp, cy, V, E->ld, k, D->S, c0, neg, with_norm, D->part,
                                                    nullptr);
  else if (k <= 16)
    k_axpy_dots<16><<<(unsigned)nb, KB, 0, D->st>>>(E->n, yp, cy, V, E->ld, k, D->S, c0, neg, with_norm,
                                                     D->part, nullptr);
  else
    k_axpy_dots<32><<<(unsigned)nb, KB, 0, D->st>>>(E->n, yp, cy, V, E->ld, k, D->S, c0, neg, with_norm,
                                                     D->part, nullptr);
  PK_CUDA_CHECK(E->ctx, kSolve, cudaGetLastError(), "basis axpy and dots");
  return sum_into(E, nb, nv, false, out, async);
}

/** The shared memory of k_basis_axpy for k coefficients beyond the default 48 KiB (kd_create: set once,
 *  outside captures). */
cudaError_t basis_axpy_smem(int k) {
  const size_t smem = sizeof(double) * (size_t)basis_axpy_npad(k);
  if (smem > 48 * 1024)
    return cudaFuncSetAttribute(k_basis_axpy, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem);
  return cudaSuccess;
}

} // namespace pkc_kry

/**
 * @file pk_cuda_rci.cu
 * @brief The device work of the handle-based reverse communication (rci.c, pk_cuda.h): the work vectors,
 *        the sums and the fused CG / pipelined-CG updates of pkrylov_rci_step on a CUDA context.
 */
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pk_cuda_solver.h"

using pkc_solver::kPartNV;
using pkc_solver::stream_of;

struct pk_cuda_rci_s {
  pkrylov_context ctx;
  cudaStream_t stream;
  int64_t n, nslots;
  double *work;       /* nvec * n */
  double *part;       /* kPartNV * nslots partial sums */
  double *dsum;       /* kPartNV device sums */
  double *hsum;       /* kPartNV pinned host sums */
  pk_cuda_state *st;  /* device state carrying alpha and beta to the fused launchers */
  pk_cuda_state hst;  /* its host image (pageable: the copy is staged at once) */
  const char *func;   /* the public function in progress (pkrylov_rci_start or _step), for errors */
};

namespace {

/** A USER view of n values whose A x is pre. */
pk_cuda_op pre_view(int64_t n, const double *pre) {
  pk_cuda_op u;
  memset(&u, 0, sizeof u);
  u.type = PKRYLOV_OPERATOR_USER;
  u.n = n;
  u.pre = pre;
  return u;
}

/** nvals sums of nb partial slots to out (host). */
int rci_sums(pk_cuda_rci *d, int64_t nb, int nvals, double *out) {
  if (nb > d->nslots) return pk_error(d->ctx, PKRYLOV_ERR_INTERNAL, "pkrylov_rci_step", "more slots than sized");
  PK_CUDA_CHECK(d->ctx, d->func, pk_cuda_sum_partials(d->stream, d->part, nb, nvals, d->dsum),
                "summing partials");
  PK_CUDA_CHECK(
      d->ctx, d->func,
      cudaMemcpyAsync(d->hsum, d->dsum, sizeof(double) * (size_t)nvals, cudaMemcpyDeviceToHost, d->stream),
      "copying sums");
  PK_CUDA_CHECK(d->ctx, d->func, cudaStreamSynchronize(d->stream), "synchronising");
  memcpy(out, d->hsum, sizeof(double) * (size_t)nvals);
  return PKRYLOV_SUCCESS;
}

/** The device state with alpha, beta, RUNNING. */
int rci_state(pk_cuda_rci *d, double alpha, double beta) {
  memset(&d->hst, 0, sizeof d->hst);
  d->hst.alpha = alpha;
  d->hst.beta = beta;
  d->hst.status = PK_ST_RUNNING;
  d->hst.breakdown_it = -1;
  PK_CUDA_CHECK(d->ctx, d->func,
                cudaMemcpyAsync(d->st, &d->hst, sizeof d->hst, cudaMemcpyHostToDevice, d->stream),
                "copying the state");
  return PKRYLOV_SUCCESS;
}

} // namespace

extern "C" int pk_cuda_rci_create(pkrylov_context ctx, int64_t n, int nvec, pk_cuda_rci **out, double **work) {
  pk_cuda_rci *d = (pk_cuda_rci *)calloc(1, sizeof(pk_cuda_rci));
  if (!d) return pk_error(ctx, PKRYLOV_ERR_OUT_OF_MEMORY, "pkrylov_rci_start", "cannot allocate");
  d->ctx = ctx;
  d->func = "pkrylov_rci_start";
  d->stream = stream_of(ctx);
  d->n = n;
  const pk_cuda_op u = pre_view(n, NULL);
  d->nslots = pk_cuda_partials_needed(&u, NULL);
  cudaError_t e = cudaMalloc(&d->work, sizeof(double) * (size_t)nvec * (size_t)n);
  if (e == cudaSuccess) e = cudaMalloc(&d->part, sizeof(double) * kPartNV * (size_t)d->nslots);
  if (e == cudaSuccess) e = cudaMalloc(&d->dsum, sizeof(double) * kPartNV);
  if (e == cudaSuccess) e = cudaMallocHost(&d->hsum, sizeof(double) * kPartNV);
  if (e == cudaSuccess) e = cudaMalloc(&d->st, sizeof(pk_cuda_state));
  if (e == cudaSuccess) e = cudaMemsetAsync(d->work, 0, sizeof(double) * (size_t)nvec * (size_t)n, d->stream);
  if (e == cudaSuccess) e = cudaStreamSynchronize(d->stream);
  if (e != cudaSuccess) {
    pk_cuda_rci_free(d);
    char what[96];
    snprintf(what, sizeof what, "allocating the device work area (%d vectors of %lld values)", nvec,
             (long long)n);
    return pk_cuda_error(ctx, "pkrylov_rci_start", (int)e, what, NULL);
  }
  *out = d;
  *work = d->work;
  return PKRYLOV_SUCCESS;
}

extern "C" void pk_cuda_rci_free(pk_cuda_rci *d) {
  if (!d) return;
  cudaFree(d->work);
  cudaFree(d->part);
  cudaFree(d->dsum);
  cudaFreeHost(d->hsum);
  cudaFree(d->st);
  free(d);
}

extern "C" void pk_cuda_rci_set_func(pk_cuda_rci *d, const char *func) {
  d->func = func;
}

extern "C" int pk_cuda_rci_sync(pk_cuda_rci *d) {
  PK_CUDA_CHECK(d->ctx, d->func, cudaStreamSynchronize(d->stream), "synchronising");
  return PKRYLOV_SUCCESS;
}

extern "C" int pk_cuda_rci_zero(pk_cuda_rci *d, double *v) {
  PK_CUDA_CHECK(d->ctx, d->func, cudaMemsetAsync(v, 0, sizeof(double) * (size_t)d->n, d->stream), "memset");
  return PKRYLOV_SUCCESS;
}

extern "C" int pk_cuda_rci_copy(pk_cuda_rci *d, double *dst, const double *src) {
  PK_CUDA_CHECK(d->ctx, d->func,
                cudaMemcpyAsync(dst, src, sizeof(double) * (size_t)d->n, cudaMemcpyDeviceToDevice, d->stream),
                "copy");
  return PKRYLOV_SUCCESS;
}

extern "C" int pk_cuda_rci_xpay(pk_cuda_rci *d, const double *x, double a, const double *y, double *z) {
  PK_CUDA_CHECK(d->ctx, d->func, pk_cuda_xpay(d->stream, d->n, x, a, y, z), "z = x + a y");
  return PKRYLOV_SUCCESS;
}

extern "C" int pk_cuda_rci_dots(pk_cuda_rci *d, int nv, const double *const *x, const double *const *y,
                                double *out) {
  int64_t nb;
  PK_CUDA_CHECK(d->ctx, d->func, pk_cuda_dots(d->stream, d->n, nv, x, y, d->part, &nb), "dots");
  return rci_sums(d, nb, nv, out);
}

extern "C" int pk_cuda_rci_residual(pk_cuda_rci *d, const double *b, const double *t, double *r, double *rr) {
  if (!t) {
    PK_CALL(pk_cuda_rci_copy(d, r, b));
    const double *xs[1] = {r};
    return pk_cuda_rci_dots(d, 1, xs, xs, rr);
  }
  const pk_cuda_op u = pre_view(d->n, t);
  int64_t nb;
  PK_CUDA_CHECK(d->ctx, d->func, pk_cuda_residual(d->stream, &u, b, b, r, d->part, &nb), "r = b - A x");
  return rci_sums(d, nb, 1, rr);
}

extern "C" int pk_cuda_rci_cg_update(pk_cuda_rci *d, double alpha, double beta, double *x, double *p,
                                     const double *z, double *q, const double *t, double *pq) {
  PK_CALL(rci_state(d, alpha, beta));
  const pk_cuda_op u = pre_view(d->n, t);
  int64_t nb;
  PK_CUDA_CHECK(d->ctx, d->func,
                pk_cuda_cg_operator_step(d->stream, &u, d->st, 0, x, p, z, q, d->part, &nb, 0), "CG update");
  return rci_sums(d, nb, 1, pq);
}

extern "C" int pk_cuda_rci_pipecg_update(pk_cuda_rci *d, double alpha, double beta, const double *m,
                                         const double *nv, double *z, double *q, double *s, double *p, double *x,
                                         double *r, double *u, double *w, double *out) {
  PK_CALL(rci_state(d, alpha, beta));
  const pk_cuda_op v = pre_view(d->n, nv);
  int64_t nb;
  PK_CUDA_CHECK(d->ctx, d->func,
                pk_cuda_pipecg_step(d->stream, &v, d->st, m, z, q, s, p, x, r, u, w, d->part, &nb, 0),
                "pipelined CG update");
  return rci_sums(d, nb, PK_RR_NV_BASE, out); /* the update without the norms: slots of the three dots */
}

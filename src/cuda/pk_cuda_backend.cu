/**
 * @file pk_cuda_backend.cu
 * @brief CUDA backend glue: device and stream of a context, one-time uploads of operators and
 *        preconditioners (with float copies for mixed precision on first use), pointer checks, and the
 *        public apply calls on a CUDA context.
 */
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

extern "C" {
#include "pk_impl.h"
}
#include "pk_cuda.h"

extern "C" int pk_cuda_error(pkrylov_context ctx, const char *func, int e, const char *what,
                             const char *call) {
  const cudaError_t ce = (cudaError_t)e;
  cudaGetLastError(); /* a non-sticky error is reported once, here */
  const int code = ce == cudaErrorMemoryAllocation ? PKRYLOV_ERR_OUT_OF_MEMORY : PKRYLOV_ERR_BACKEND;
  if (call)
    return pk_error(ctx, code, func, "%s: %s: CUDA error %s (%s)", what, call, cudaGetErrorName(ce),
                    cudaGetErrorString(ce));
  return pk_error(ctx, code, func, "%s: CUDA error %s (%s)", what, cudaGetErrorName(ce),
                  cudaGetErrorString(ce));
}

namespace {

/** Per-context CUDA state. */
struct CudaCtx {
  int device;
  cudaStream_t stream;
};

/** Device copies owned by an operator. */
struct OpDev {
  pk_cuda_op view;   /* fp64 view (CSR: view.csr_format, dia_nd, dia_off say the device storage) */
  int have_fp32;
  pk_cuda_op view32; /* fp32 view (float copies of CSR values / stencil coefficients) */
  void *owned[16];   /* every cudaMalloc'ed array, for freeing */
  int nowned;
};

/** Device copies owned by a preconditioner. */
struct PcDev {
  pk_cuda_pc view;
  int have_fp32;
  pk_cuda_pc view32;
  void *owned[12];
  int nowned;
};

/** cudaMalloc + copy of `bytes` host bytes; records the allocation in owned[]. NULL src: just allocate. */
template <typename T>
cudaError_t upload(void **owned, int *nowned, const void *src, size_t bytes, T **dst, cudaStream_t stream) {
  *dst = NULL;
  void *d = NULL;
  cudaError_t e = cudaMalloc(&d, bytes ? bytes : 1);
  if (e != cudaSuccess) return e;
  owned[(*nowned)++] = d;
  if (src && bytes) e = cudaMemcpyAsync(d, src, bytes, cudaMemcpyHostToDevice, stream);
  *dst = (T *)d;
  return e;
}

/** Float copy of n host doubles, uploaded. */
cudaError_t upload_float(void **owned, int *nowned, const double *src, int64_t n, float **dst,
                         cudaStream_t stream) {
  float *h = (float *)malloc(sizeof(float) * (size_t)(n ? n : 1));
  if (!h) return cudaErrorMemoryAllocation;
  for (int64_t i = 0; i < n; i++) h[i] = (float)src[i];
  cudaError_t e = upload(owned, nowned, h, sizeof(float) * (size_t)n, dst, stream);
  if (e == cudaSuccess) e = cudaStreamSynchronize(stream); /* h is freed next */
  free(h);
  return e;
}

cudaStream_t stream_of(pkrylov_context ctx) { return ((CudaCtx *)ctx->cuda)->stream; }

/** Column of CSR entry p of A. */
inline int64_t csr_col(const struct pkrylov_operator_s *A, int64_t p) {
  return A->csr.colind32 ? (int64_t)A->csr.colind32[p] : A->csr.colind64[p];
}

/**
 * Host copy of A's diagonals in the device layout of `format` (pk_cuda.h: dia[d * n + i]), values
 * converted to T; h holds nd * n zeros on entry. SYMDIA: the entries with col >= row only.
 */
template <typename T>
void dia_fill(const struct pkrylov_operator_s *A, int32_t format, int32_t nd, const int64_t *off, T *h) {
  const int64_t n = A->n;
  const int64_t *rp = A->csr.rowptr;
  for (int64_t r = 0; r < n; r++) {
    int32_t d = 0; /* offsets ascend along the row as the columns do */
    for (int64_t p = rp[r]; p < rp[r + 1]; p++) {
      const int64_t o = csr_col(A, p) - r;
      if (format == PK_CUDA_CSR_SYMDIA && o < 0) continue;
      while (off[d] < o) d++; /* o is in the set */
      h[(size_t)d * (size_t)n + (size_t)r] = (T)A->csr.values[p];
    }
  }
}

} // namespace

extern "C" int32_t pk_cuda_csr_format_choose(const struct pkrylov_operator_s *A, int32_t *nd, int64_t *off) {
  *nd = 0;
  /* the context's option cuda.csr_format: 0 auto, 1 csr, 2 dia, 3 dia-nosym (PK_OPT_CSR_*) */
  const int mode = A->ctx ? A->ctx->opts.cuda_csr_format : PK_OPT_CSR_AUTO;
  if (mode == 1 || A->type != PKRYLOV_OPERATOR_CSR || A->dist) return PK_CUDA_CSR_PLAIN;
  const int64_t n = A->n, nnz = A->nnz, *rp = A->csr.rowptr;
  const double *v = A->csr.values;
  for (int64_t p = 0; p < nnz; p++)
    if (v[p] == 0.0) return PK_CUDA_CSR_PLAIN; /* a stored zero: the skipped slots would not be the absent ones */
  /* the distinct offsets, kept sorted: a row's offsets ascend, so one forward walk of the list per row */
  int64_t o[PK_CUDA_DIA_MAX];
  int32_t cnt = 0;
  int64_t lower = 0, upper = 0;
  for (int64_t r = 0; r < n; r++) {
    int32_t j = 0;
    for (int64_t p = rp[r]; p < rp[r + 1]; p++) {
      const int64_t off1 = csr_col(A, p) - r;
      lower += off1 < 0, upper += off1 > 0;
      while (j < cnt && o[j] < off1) j++;
      if (j < cnt && o[j] == off1) continue;
      if (cnt == PK_CUDA_DIA_MAX) return PK_CUDA_CSR_PLAIN; /* not banded */
      for (int32_t q = cnt; q > j; q--) o[q] = o[q - 1];
      o[j] = off1;
      cnt++;
    }
  }
  if (mode == 0 && (double)cnt * (double)n > 1.5 * (double)nnz) return PK_CUDA_CSR_PLAIN; /* too much padding */
  /* exactly symmetric: the mirror of every upper entry with bitwise the same value, as many lower entries */
  int sym = mode != 3 && lower == upper;
  for (int64_t r = 0; r < n && sym; r++)
    for (int64_t p = rp[r]; p < rp[r + 1] && sym; p++) {
      const int64_t c = csr_col(A, p);
      if (c <= r) continue;
      int64_t lo = rp[c], hi = rp[c + 1]; /* binary search of column r in row c */
      while (lo < hi) {
        const int64_t mid = lo + (hi - lo) / 2;
        if (csr_col(A, mid) < r)
          lo = mid + 1;
        else
          hi = mid;
      }
      sym = lo < rp[c + 1] && csr_col(A, lo) == r && memcmp(&v[lo], &v[p], sizeof(double)) == 0;
    }
  if (sym) {
    off[(*nd)++] = 0;
    for (int32_t q = 0; q < cnt; q++)
      if (o[q] > 0) off[(*nd)++] = o[q];
    return PK_CUDA_CSR_SYMDIA;
  }
  for (int32_t q = 0; q < cnt; q++) off[q] = o[q];
  *nd = cnt;
  return PK_CUDA_CSR_DIA;
}

extern "C" int32_t pk_cuda_operator_csr_format(const struct pkrylov_operator_s *A, int32_t *nd) {
  if (nd) *nd = 0;
  if (!A || A->type != PKRYLOV_OPERATOR_CSR || !A->dev) return -1;
  const OpDev *d = (const OpDev *)A->dev;
  if (nd) *nd = d->view.csr_format == PK_CUDA_CSR_PLAIN ? 0 : d->view.dia_nd;
  return d->view.csr_format;
}

extern "C" const char *pk_cuda_csr_format_name(int32_t format) {
  return format == PK_CUDA_CSR_DIA ? "dia" : format == PK_CUDA_CSR_SYMDIA ? "symdia" : "csr";
}

extern "C" int pk_cuda_context_init(pkrylov_context ctx) {
  int count = pk_cuda_device_count();
  if (count <= 0)
    return pk_error(NULL, PKRYLOV_ERR_BACKEND_UNAVAILABLE, "pkrylov_context_create",
                    "backend CUDA requested but no CUDA device is visible");
  CudaCtx *c = (CudaCtx *)calloc(1, sizeof(CudaCtx));
  if (!c) return pk_error(NULL, PKRYLOV_ERR_OUT_OF_MEMORY, "pkrylov_context_create", "cannot allocate");
  cudaError_t e = cudaGetDevice(&c->device);
  if (e == cudaSuccess) e = cudaStreamCreateWithFlags(&c->stream, cudaStreamNonBlocking);
  if (e != cudaSuccess) {
    free(c);
    return pk_cuda_error(NULL, "pkrylov_context_create", e, "creating the CUDA stream", NULL);
  }
  ctx->cuda = c;
  return PKRYLOV_SUCCESS;
}

extern "C" int32_t pk_cuda_csr_lanes(int64_t n, int64_t nnz, int64_t maxrow) {
  if (n <= 0) return 0;
  const double mean = (double)nnz / (double)n;
  const int uneven = maxrow > 64 && (double)maxrow > 8.0 * mean;
  /* Measured on an H200, 27-point Laplacian 128^3 (27 entries per row, plain CG), us per iteration, thread
     per row / 4 / 8 / 16 lanes, with the vector kernel whose 32 lanes do the vector updates of the warp's
     rows (the vendor's plain CG: 360): CG 707 / 303 / 370 / 448, pipelined CG 365 / 378 / 426 / 473. (The
     first vector kernel, updates on one lane per group: CG 688 / 458 / 528 / 661, pipelined 363 / 603 /
     667 / 939.) At 27 entries 4 lanes are 2.3x faster for CG and 3.5% slower for pipelined CG, so rows from
     24 entries on take the vector kernel; the 7-point rows (7) stay on one thread per row; between 7 and 27
     nothing was measured. */
  if (mean < 24.0 && !uneven) return 0;
  int lanes = 4; /* the power of two nearest (in log scale) to mean / 8, 4 ... 32 */
  while (lanes < 32 && (double)(2 * lanes) <= mean / 8.0 * 1.41421356) lanes *= 2;
  return lanes;
}

extern "C" void *pk_cuda_context_stream(pkrylov_context ctx) { return (void *)stream_of(ctx); }

extern "C" void pk_cuda_context_describe(pkrylov_context ctx, char *buf, size_t len) {
  const CudaCtx *c = (const CudaCtx *)ctx->cuda;
  cudaDeviceProp prop;
  if (!c || cudaGetDeviceProperties(&prop, c->device) != cudaSuccess) {
    cudaGetLastError();
    snprintf(buf, len, "CUDA backend (device name unavailable)");
    return;
  }
  snprintf(buf, len, "CUDA backend on %s (device %d of %d)", prop.name, c->device, pk_cuda_device_count());
}

extern "C" int pk_cuda_context_set_device(pkrylov_context ctx, int device) {
  CudaCtx *c = (CudaCtx *)ctx->cuda;
  if (!c) return pk_error(ctx, PKRYLOV_ERR_INTERNAL, "pkrylov_context_set_comm", "no CUDA state");
  if (c->device == device) return PKRYLOV_SUCCESS;
  cudaStream_t s = NULL;
  cudaError_t e = cudaSetDevice(device);
  if (e == cudaSuccess) e = cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
  if (e != cudaSuccess) {
    cudaSetDevice(c->device);
    return pk_cuda_error(ctx, "pkrylov_context_set_comm", e, "selecting the rank's CUDA device", NULL);
  }
  cudaSetDevice(c->device); /* the old stream is destroyed on its own device */
  cudaStreamDestroy(c->stream);
  cudaSetDevice(device);
  c->stream = s;
  c->device = device;
  return PKRYLOV_SUCCESS;
}

extern "C" void pk_cuda_context_free(pkrylov_context ctx) {
  CudaCtx *c = (CudaCtx *)ctx->cuda;
  if (!c) return;
  cudaStreamDestroy(c->stream);
  free(c);
  ctx->cuda = NULL;
}

extern "C" int pk_cuda_operator_upload(struct pkrylov_operator_s *A) {
  pkrylov_context ctx = A->ctx;
  cudaStream_t st = stream_of(ctx);
  OpDev *d = (OpDev *)calloc(1, sizeof(OpDev));
  if (!d) return pk_error(ctx, PKRYLOV_ERR_OUT_OF_MEMORY, __func__, "cannot allocate the device view");
  pk_cuda_op *v = &d->view;
  v->type = A->type;
  v->n = A->n;
  v->nx = A->nx, v->ny = A->ny, v->nz = A->nz;
  v->kc = ctx->opts.cuda_kc; /* the grid kernels' shape and prefetch: the context's options, read now */
  v->l2pf = ctx->opts.cuda_l2pf;
  const int64_t n = A->n;
  cudaError_t e = cudaSuccess;
#define UP(src, bytes, dst)                                                                         \
  if (e == cudaSuccess) e = upload(d->owned, &d->nowned, (src), (bytes), (dst), st)
  switch (A->type) {
  case PKRYLOV_OPERATOR_CSR: {
    v->csr_format = pk_cuda_csr_format_choose(A, &v->dia_nd, v->dia_off);
    if (v->csr_format != PK_CUDA_CSR_PLAIN) { /* diagonals only: the CSR arrays stay on the host */
      const size_t cnt = (size_t)v->dia_nd * (size_t)n;
      double *h = (double *)calloc(cnt ? cnt : 1, sizeof(double));
      if (!h) {
        free(d);
        return pk_error(ctx, PKRYLOV_ERR_OUT_OF_MEMORY, "pkrylov_operator_create",
                        "cannot allocate the diagonal storage (%d x %lld values)", v->dia_nd, (long long)n);
      }
      dia_fill(A, v->csr_format, v->dia_nd, v->dia_off, h);
      double *dv;
      UP(h, sizeof(double) * cnt, &dv);
      if (e == cudaSuccess) e = cudaStreamSynchronize(st); /* h is freed next */
      free(h);
      v->dia = dv;
      break;
    }
    int64_t *rp;
    UP(A->csr.rowptr, sizeof(int64_t) * (size_t)(n + 1), &rp);
    v->rowptr = rp;
    if (A->csr.colind32) {
      int32_t *c32;
      UP(A->csr.colind32, sizeof(int32_t) * (size_t)A->nnz, &c32);
      v->col32 = c32;
    } else {
      int64_t *c64;
      UP(A->csr.colind64, sizeof(int64_t) * (size_t)A->nnz, &c64);
      v->col64 = c64;
    }
    double *val;
    UP(A->csr.values, sizeof(double) * (size_t)A->nnz, &val);
    v->val = val;
    int64_t maxrow = 0;
    for (int64_t r = 0; r < n; r++)
      if (A->csr.rowptr[r + 1] - A->csr.rowptr[r] > maxrow) maxrow = A->csr.rowptr[r + 1] - A->csr.rowptr[r];
    /* the context's option cuda.csr_lanes (-1 auto: the rule of pk_cuda_csr_lanes) */
    v->csr_lanes = ctx->opts.cuda_csr_lanes >= 0 ? ctx->opts.cuda_csr_lanes : pk_cuda_csr_lanes(n, A->nnz, maxrow);
    break;
  }
  case PKRYLOV_OPERATOR_STENCIL7: {
    double *w, *s, *vv, *c;
    UP(A->st.aW, sizeof(double) * (size_t)n, &w);
    UP(A->st.aS, sizeof(double) * (size_t)n, &s);
    UP(A->st.aV, sizeof(double) * (size_t)n, &vv);
    UP(A->st.aC, sizeof(double) * (size_t)n, &c);
    v->aW = w, v->aS = s, v->aV = vv, v->aC = c;
    if (A->st.wet) {
      uint8_t *wet;
      UP(A->st.wet, (size_t)n, &wet);
      v->wet = wet;
    }
    if (A->grid) { /* grid stencil: the cells across the tile edges and the couplings to them */
      const struct pkrylov_grid_s *g = A->grid;
      int64_t *gnb;
      double *ge;
      UP(g->nbr, sizeof(int64_t) * (size_t)g->nedge, &gnb);
      UP(A->st.edge, sizeof(double) * (size_t)(g->nedge * A->nz), &ge);
      v->gsny = g->sny, v->gnedge = g->nedge, v->gnb = gnb, v->gedge = ge;
    }
    if (A->halo.exchange) { /* halo-exchange stencil: the edge couplings and the halo'ed work array */
      const size_t nyz = (size_t)A->ny * (size_t)A->nz, nxz = (size_t)A->nx * (size_t)A->nz;
      double *hw, *he, *hs, *hn, *xh;
      UP(A->halo.cw, sizeof(double) * nyz, &hw);
      UP(A->halo.ce, sizeof(double) * nyz, &he);
      UP(A->halo.cs, sizeof(double) * nxz, &hs);
      UP(A->halo.cn, sizeof(double) * nxz, &hn);
      UP(NULL, sizeof(double) * ((size_t)A->nx + 2) * ((size_t)A->ny + 2) * (size_t)A->nz, &xh);
      v->hcw = hw, v->hce = he, v->hcs = hs, v->hcn = hn, v->xh = xh;
      v->halo = 1;
    }
    break;
  }
  case PKRYLOV_OPERATOR_USER: /* the caller's routine: nothing on the device (pk_cuda_op.pre) */
    break;
  case PKRYLOV_OPERATOR_THINSHELL: {
    const int64_t nx = A->nx, ny = A->ny, nz = A->nz;
    double *a, *b, *c, *dd, *area, *ax, *ay;
    UP(A->ts.a, sizeof(double) * (size_t)nz, &a);
    UP(A->ts.b, sizeof(double) * (size_t)nz, &b);
    UP(A->ts.c, sizeof(double) * (size_t)nz, &c);
    UP(A->ts.d, sizeof(double) * (size_t)nz, &dd);
    UP(A->ts.area, sizeof(double) * (size_t)(nx * ny), &area);
    UP(A->ts.ax, sizeof(double) * (size_t)((nx + 1) * ny), &ax);
    UP(A->ts.ay, sizeof(double) * (size_t)(nx * (ny + 1)), &ay);
    v->ta = a, v->tb = b, v->tc = c, v->td = dd, v->area = area, v->ax = ax, v->ay = ay;
    break;
  }
  default: /* pkrylov_operator_create_* set the type: a bug */
    free(d);
    return pk_error(ctx, PKRYLOV_ERR_INTERNAL, "pkrylov_operator_create", "operator type %d is unknown",
                    (int)A->type);
  }
#undef UP
  if (e == cudaSuccess) e = cudaStreamSynchronize(st);
  A->dev = d; /* freed by pk_cuda_operator_free also on failure */
  if (e != cudaSuccess) {
    pk_cuda_operator_free(A);
    return pk_cuda_error(ctx, "pkrylov_operator_create", e, "uploading the operator", NULL);
  }
  if (A->dist || (A->grid && pk_distributed(ctx))) { /* distributed: halo buffers (pk_cuda_dist.cu) */
    const int rc = pk_cuda_dist_attach(A, v);
    if (rc) {
      pk_cuda_operator_free(A);
      return rc;
    }
  }
  return PKRYLOV_SUCCESS;
}

extern "C" void pk_cuda_operator_free(struct pkrylov_operator_s *A) {
  OpDev *d = (OpDev *)A->dev;
  if (!d) return;
  pk_cuda_dist_detach(&d->view);
  for (int i = 0; i < d->nowned; i++) cudaFree(d->owned[i]);
  free(d);
  A->dev = NULL;
}

extern "C" int pk_cuda_operator_view(struct pkrylov_operator_s *A, int fp32, pk_cuda_op *view) {
  OpDev *d = (OpDev *)A->dev;
  if (!fp32 || A->type == PKRYLOV_OPERATOR_THINSHELL || A->type == PKRYLOV_OPERATOR_USER) {
    /* the thin shell has no per-cell coefficients, a user operator none on the device */
    *view = d->view;
    return PKRYLOV_SUCCESS;
  }
  if (!d->have_fp32) {
    cudaStream_t st = stream_of(A->ctx);
    pk_cuda_op v = d->view;
    cudaError_t e = cudaSuccess;
    if (A->type == PKRYLOV_OPERATOR_CSR && v.csr_format != PK_CUDA_CSR_PLAIN) {
      const size_t cnt = (size_t)v.dia_nd * (size_t)A->n;
      float *h = (float *)calloc(cnt ? cnt : 1, sizeof(float)), *f = NULL;
      if (!h) return pk_error(A->ctx, PKRYLOV_ERR_OUT_OF_MEMORY, __func__, "cannot allocate the fp32 diagonals");
      dia_fill(A, v.csr_format, v.dia_nd, v.dia_off, h);
      e = upload(d->owned, &d->nowned, h, sizeof(float) * cnt, &f, st);
      if (e == cudaSuccess) e = cudaStreamSynchronize(st); /* h is freed next */
      free(h);
      v.diaf = f;
    } else if (A->type == PKRYLOV_OPERATOR_CSR) {
      float *f = NULL;
      e = upload_float(d->owned, &d->nowned, A->csr.values, A->nnz, &f, st);
      v.valf = f;
    } else {
      float *w = NULL, *s = NULL, *vv = NULL, *c = NULL;
      e = upload_float(d->owned, &d->nowned, A->st.aW, A->n, &w, st);
      if (e == cudaSuccess) e = upload_float(d->owned, &d->nowned, A->st.aS, A->n, &s, st);
      if (e == cudaSuccess) e = upload_float(d->owned, &d->nowned, A->st.aV, A->n, &vv, st);
      if (e == cudaSuccess) e = upload_float(d->owned, &d->nowned, A->st.aC, A->n, &c, st);
      v.aWf = w, v.aSf = s, v.aVf = vv, v.aCf = c;
      if (e == cudaSuccess && A->grid) {
        float *ge = NULL;
        e = upload_float(d->owned, &d->nowned, A->st.edge, A->grid->nedge * A->nz, &ge, st);
        v.gedgef = ge;
      }
    }
    if (e != cudaSuccess) return pk_cuda_error(A->ctx, "pkrylov_solver_solve", e, "uploading fp32 coefficients", NULL);
    v.fp32 = 1;
    d->view32 = v;
    d->have_fp32 = 1;
  }
  *view = d->view32;
  return PKRYLOV_SUCCESS;
}

namespace {
/** The general column factors (host storage per column, c*nz + k) re-laid out per cell (coalesced on the
 *  device): h = dl, d, du, du2 (n each), hp = the pivots. */
void relayout_general(const struct pkrylov_precond_s *M, double *h, int32_t *hp) {
  const int64_t n = M->n;
  const double *srcs[4] = {M->gdl, M->gd, M->gdu, M->gdu2};
  for (int64_t c = 0; c < M->ncols; c++)
    for (int32_t k = 0; k < M->nz; k++) {
      const int64_t cell = c * M->col_stride + (int64_t)k * M->lev_stride, col = c * M->nz + k;
      for (int a = 0; a < 4; a++) h[(size_t)a * n + cell] = srcs[a][col];
      hp[cell] = M->ipiv[col];
    }
}
} // namespace

extern "C" int pk_cuda_precond_upload(struct pkrylov_precond_s *M) {
  pkrylov_context ctx = M->ctx;
  cudaStream_t st = stream_of(ctx);
  PcDev *d = (PcDev *)calloc(1, sizeof(PcDev));
  if (!d) return pk_error(ctx, PKRYLOV_ERR_OUT_OF_MEMORY, __func__, "cannot allocate the device view");
  pk_cuda_pc *v = &d->view;
  v->type = M->type;
  v->n = M->n;
  v->ncols = M->ncols;
  v->nz = M->nz;
  v->layout = M->layout;
  v->symmetric = M->symmetric;
  const int64_t n = M->n;
  cudaError_t e = cudaSuccess;
  if (M->type == PKRYLOV_PRECOND_JACOBI || (M->type == PKRYLOV_PRECOND_COLUMN && M->symmetric)) {
    double *dv;
    e = upload(d->owned, &d->nowned, M->dinv, sizeof(double) * (size_t)n, &dv, st);
    v->dinv = dv;
    if (M->type == PKRYLOV_PRECOND_COLUMN && e == cudaSuccess) {
      double *lm;
      e = upload(d->owned, &d->nowned, M->lmul, sizeof(double) * (size_t)n, &lm, st);
      v->lmul = lm;
    }
  } else if (M->type == PKRYLOV_PRECOND_COLUMN) {
    /* general path: per-column host storage (c*nz + k) re-laid out per cell for coalesced access */
    double *h = (double *)malloc(sizeof(double) * 4 * (size_t)n);
    int32_t *hp = (int32_t *)malloc(sizeof(int32_t) * (size_t)n);
    if (!h || !hp) {
      free(h), free(hp), free(d);
      return pk_error(ctx, PKRYLOV_ERR_OUT_OF_MEMORY, __func__, "cannot allocate the re-layout buffers");
    }
    relayout_general(M, h, hp);
    double *g;
    int32_t *ip;
    e = upload(d->owned, &d->nowned, h, sizeof(double) * 4 * (size_t)n, &g, st);
    if (e == cudaSuccess) e = upload(d->owned, &d->nowned, hp, sizeof(int32_t) * (size_t)n, &ip, st);
    if (e == cudaSuccess) e = cudaStreamSynchronize(st);
    free(h), free(hp);
    if (e == cudaSuccess) {
      v->gdl = g, v->gd = g + n, v->gdu = g + 2 * n, v->gdu2 = g + 3 * n;
      v->ipiv = ip;
    }
  }
  if (M->type == PKRYLOV_PRECOND_AINV) { /* its own 5-point stencil, applied as an operator (pk_cuda_pc.op) */
    const pk_stencil *c = &M->ainv.c;
    const pk_cuda_op *av = &((const OpDev *)M->A->dev)->view;
    double *w, *sv, *vv, *cc;
    e = upload(d->owned, &d->nowned, c->aW, sizeof(double) * (size_t)n, &w, st);
    if (e == cudaSuccess) e = upload(d->owned, &d->nowned, c->aS, sizeof(double) * (size_t)n, &sv, st);
    if (e == cudaSuccess) e = upload(d->owned, &d->nowned, c->aV, sizeof(double) * (size_t)n, &vv, st);
    if (e == cudaSuccess) e = upload(d->owned, &d->nowned, c->aC, sizeof(double) * (size_t)n, &cc, st);
    pk_cuda_op *o = &v->op;
    memset(o, 0, sizeof *o);
    o->type = PKRYLOV_OPERATOR_STENCIL7;
    o->n = n, o->nx = av->nx, o->ny = av->ny, o->nz = av->nz;
    if (e == cudaSuccess) o->aW = w, o->aS = sv, o->aV = vv, o->aC = cc;
    if (e == cudaSuccess && M->A->grid) {
      double *ge;
      e = upload(d->owned, &d->nowned, c->edge, sizeof(double) * (size_t)M->A->grid->nedge, &ge, st);
      o->gsny = av->gsny, o->gnedge = av->gnedge, o->gnb = av->gnb, o->ghalo = av->ghalo;
      o->gnhalo = av->gnhalo;
      o->gedge = ge;
    }
  }
  if (e == cudaSuccess && M->type == PKRYLOV_PRECOND_COLUMN && M->symmetric && M->layout == PKRYLOV_LAYOUT_KSLOW &&
      (M->A->type == PKRYLOV_OPERATOR_THINSHELL || M->A->type == PKRYLOV_OPERATOR_STENCIL7) && !M->A->wet &&
      !M->A->grid && M->A->dev && !M->from_caller) { /* the caller's factors are not recomputable from A; a grid
                                                        stencil's coefficients may change (refresh) */
    /* matrix-free factors are valid when every column is one positive definite segment */
    int ok = 1;
    for (int64_t i = 0; i < n && ok; i++) ok = M->dinv[i] > 0.0;
    for (int64_t i = 0; i < n - M->ncols && ok; i++) ok = M->lmul[i] != 0.0; /* levels 0 .. nz-2 */
    if (ok) {
      v->onthefly = 1;
      v->op = ((OpDev *)M->A->dev)->view;
    }
  }
  if (e == cudaSuccess) e = cudaStreamSynchronize(st);
  M->dev = d;
  if (e != cudaSuccess) {
    pk_cuda_precond_free(M);
    return pk_cuda_error(ctx, "pkrylov_precond_create", e, "uploading the preconditioner", NULL);
  }
  return PKRYLOV_SUCCESS;
}

extern "C" void pk_cuda_precond_free(struct pkrylov_precond_s *M) {
  PcDev *d = (PcDev *)M->dev;
  if (!d) return;
  for (int i = 0; i < d->nowned; i++) cudaFree(d->owned[i]);
  free(d);
  M->dev = NULL;
}

extern "C" int pk_cuda_precond_view(struct pkrylov_precond_s *M, int fp32, pk_cuda_pc *view) {
  if (M->type == PKRYLOV_PRECOND_USER) { /* the caller's routine, called by the solve driver */
    memset(view, 0, sizeof *view);
    view->type = PKRYLOV_PRECOND_USER;
    view->n = view->ncols = M->n;
    view->nz = 1;
    view->layout = PKRYLOV_LAYOUT_KSLOW;
    return PKRYLOV_SUCCESS;
  }
  PcDev *d = (PcDev *)M->dev;
  /* the general (pivoting) path and the approximate inverse keep fp64 factors */
  if (!fp32 || M->type == PKRYLOV_PRECOND_NONE || M->type == PKRYLOV_PRECOND_AINV ||
      (M->type == PKRYLOV_PRECOND_COLUMN && !M->symmetric)) {
    *view = d->view;
    return PKRYLOV_SUCCESS;
  }
  if (!d->have_fp32) {
    cudaStream_t st = stream_of(M->ctx);
    pk_cuda_pc v = d->view;
    float *df = NULL, *lf = NULL;
    cudaError_t e = upload_float(d->owned, &d->nowned, M->dinv, M->n, &df, st);
    if (e == cudaSuccess && M->type == PKRYLOV_PRECOND_COLUMN)
      e = upload_float(d->owned, &d->nowned, M->lmul, M->n, &lf, st);
    if (e != cudaSuccess) return pk_cuda_error(M->ctx, "pkrylov_solver_solve", e, "uploading fp32 factors", NULL);
    v.dinvf = df, v.lmulf = lf, v.fp32 = 1;
    d->view32 = v;
    d->have_fp32 = 1;
  }
  *view = d->view32;
  return PKRYLOV_SUCCESS;
}

namespace {
/** n doubles (and, when f is not NULL, their float copy) into device arrays that exist, synchronously. */
cudaError_t refresh_copy(double *dst, float *f, const double *src, int64_t n, cudaStream_t st) {
  if (!dst || n <= 0) return cudaSuccess;
  cudaError_t e = cudaMemcpyAsync(dst, src, sizeof(double) * (size_t)n, cudaMemcpyHostToDevice, st);
  if (e == cudaSuccess && f) {
    float *h = (float *)malloc(sizeof(float) * (size_t)n);
    if (!h) return cudaErrorMemoryAllocation;
    for (int64_t i = 0; i < n; i++) h[i] = (float)src[i];
    e = cudaMemcpyAsync(f, h, sizeof(float) * (size_t)n, cudaMemcpyHostToDevice, st);
    if (e == cudaSuccess) e = cudaStreamSynchronize(st); /* h is freed next */
    free(h);
  }
  return e;
}
} // namespace

extern "C" int pk_cuda_operator_refresh(struct pkrylov_operator_s *A) {
  OpDev *d = (OpDev *)A->dev;
  if (!d || A->type != PKRYLOV_OPERATOR_STENCIL7)
    return pk_error(A->ctx, PKRYLOV_ERR_INTERNAL, __func__, "not an uploaded column stencil");
  cudaStream_t st = stream_of(A->ctx);
  const pk_cuda_op *v = &d->view, *f = d->have_fp32 ? &d->view32 : NULL;
  const int64_t n = A->n;
  cudaError_t e = refresh_copy((double *)v->aW, f ? (float *)f->aWf : NULL, A->st.aW, n, st);
  if (e == cudaSuccess) e = refresh_copy((double *)v->aS, f ? (float *)f->aSf : NULL, A->st.aS, n, st);
  if (e == cudaSuccess) e = refresh_copy((double *)v->aV, f ? (float *)f->aVf : NULL, A->st.aV, n, st);
  if (e == cudaSuccess) e = refresh_copy((double *)v->aC, f ? (float *)f->aCf : NULL, A->st.aC, n, st);
  if (e == cudaSuccess && A->grid)
    e = refresh_copy((double *)v->gedge, f ? (float *)f->gedgef : NULL, A->st.edge, A->grid->nedge * A->nz, st);
  if (e == cudaSuccess) e = cudaStreamSynchronize(st);
  return e == cudaSuccess ? PKRYLOV_SUCCESS
                          : pk_cuda_error(A->ctx, "pkrylov_operator_update_grid_stencil", e,
                                          "copying the new coefficients", NULL);
}

extern "C" int pk_cuda_precond_refresh(struct pkrylov_precond_s *M, const char *func) {
  PcDev *d = (PcDev *)M->dev;
  if (!d) return pk_error(M->ctx, PKRYLOV_ERR_INTERNAL, __func__, "not an uploaded preconditioner");
  cudaStream_t st = stream_of(M->ctx);
  pk_cuda_pc *v = &d->view;
  const pk_cuda_pc *f = d->have_fp32 ? &d->view32 : NULL;
  const int64_t n = M->n;
  cudaError_t e = cudaSuccess;
  if (M->type == PKRYLOV_PRECOND_AINV) {
    e = refresh_copy((double *)v->op.aW, NULL, M->ainv.c.aW, n, st);
    if (e == cudaSuccess) e = refresh_copy((double *)v->op.aS, NULL, M->ainv.c.aS, n, st);
    if (e == cudaSuccess) e = refresh_copy((double *)v->op.aC, NULL, M->ainv.c.aC, n, st);
    if (e == cudaSuccess && M->A->grid)
      e = refresh_copy((double *)v->op.gedge, NULL, M->ainv.c.edge, M->A->grid->nedge, st);
  } else if (M->type == PKRYLOV_PRECOND_JACOBI || (M->type == PKRYLOV_PRECOND_COLUMN && M->symmetric)) {
    if (M->type == PKRYLOV_PRECOND_COLUMN && !v->symmetric)
      return pk_error(M->ctx, PKRYLOV_ERR_UNSUPPORTED, "pkrylov_precond_update",
                      "the new coefficients make every column symmetric where some were not: on a CUDA context the "
                      "column preconditioner keeps its kind; create it again");
    e = refresh_copy((double *)v->dinv, f ? (float *)f->dinvf : NULL, M->dinv, n, st);
    if (e == cudaSuccess && M->type == PKRYLOV_PRECOND_COLUMN)
      e = refresh_copy((double *)v->lmul, f ? (float *)f->lmulf : NULL, M->lmul, n, st);
  } else if (M->type == PKRYLOV_PRECOND_COLUMN) {
    if (v->symmetric)
      return pk_error(M->ctx, PKRYLOV_ERR_UNSUPPORTED, "pkrylov_precond_update",
                      "the new coefficients make a column nonsymmetric: on a CUDA context the column preconditioner "
                      "keeps its kind; create it again");
    double *h = (double *)malloc(sizeof(double) * 4 * (size_t)n);
    int32_t *hp = (int32_t *)malloc(sizeof(int32_t) * (size_t)n);
    if (!h || !hp) {
      free(h), free(hp);
      return pk_error(M->ctx, PKRYLOV_ERR_OUT_OF_MEMORY, __func__, "cannot allocate the re-layout buffers");
    }
    relayout_general(M, h, hp);
    e = cudaMemcpyAsync((double *)v->gdl, h, sizeof(double) * 4 * (size_t)n, cudaMemcpyHostToDevice, st);
    if (e == cudaSuccess)
      e = cudaMemcpyAsync((int32_t *)v->ipiv, hp, sizeof(int32_t) * (size_t)n, cudaMemcpyHostToDevice, st);
    if (e == cudaSuccess) e = cudaStreamSynchronize(st);
    free(h), free(hp);
  }
  if (e == cudaSuccess) e = cudaStreamSynchronize(st);
  return e == cudaSuccess ? PKRYLOV_SUCCESS : pk_cuda_error(M->ctx, func, e, "copying the new factors", NULL);
}

extern "C" int pk_cuda_buffer_alloc(pkrylov_context ctx, size_t bytes, void **p) {
  *p = NULL;
  cudaError_t e = cudaMalloc(p, bytes ? bytes : 1);
  if (e != cudaSuccess) {
    *p = NULL;
    return pk_cuda_error(ctx, "pkrylov_solver_solve_halo", e, "allocating device buffers", NULL);
  }
  return PKRYLOV_SUCCESS;
}

extern "C" int pk_cuda_stream_sync(void *stream) { return (int)cudaStreamSynchronize((cudaStream_t)stream); }

extern "C" void pk_cuda_buffer_free(void *p) {
  if (p) cudaFree(p);
}

extern "C" int pk_cuda_check_pointer(pkrylov_context ctx, const char *func, int32_t mem, const void *p,
                                     const char *name) {
  cudaPointerAttributes at;
  cudaError_t e = cudaPointerGetAttributes(&at, p);
  if (e != cudaSuccess) {
    cudaGetLastError();
    return pk_error(ctx, PKRYLOV_ERR_MEMTYPE, func, "argument '%s' = %p is not a valid pointer (%s)", name, p,
                    cudaGetErrorString(e));
  }
  const int on_device = at.type == cudaMemoryTypeDevice || at.type == cudaMemoryTypeManaged;
  const int on_host = at.type == cudaMemoryTypeUnregistered || at.type == cudaMemoryTypeHost ||
                      at.type == cudaMemoryTypeManaged;
  if (mem == PKRYLOV_MEM_DEVICE && !on_device)
    return pk_error(ctx, PKRYLOV_ERR_MEMTYPE, func,
                    "argument '%s' = %p is host memory but 'mem' is PKRYLOV_MEM_DEVICE", name, p);
  if (mem == PKRYLOV_MEM_HOST && !on_host)
    return pk_error(ctx, PKRYLOV_ERR_MEMTYPE, func,
                    "argument '%s' = %p is device memory but 'mem' is PKRYLOV_MEM_HOST", name, p);
  return PKRYLOV_SUCCESS;
}

namespace {

/**
 * Run op(in -> out) on device arrays for a public apply call: host arrays go through two temporary device
 * vectors; device arrays are used in place. Synchronises before returning.
 */
template <typename F>
int public_apply(pkrylov_context ctx, const char *func, int64_t n, int32_t mem, const double *in,
                 const char *in_name, double *out, const char *out_name, F op) {
  PK_CALL(pk_check_vectors(ctx, func, mem, in, in_name, out, out_name, n));
  PK_CALL(pk_cuda_check_pointer(ctx, func, mem, in, in_name));
  PK_CALL(pk_cuda_check_pointer(ctx, func, mem, out, out_name));
  cudaStream_t st = stream_of(ctx);
  double *din = (double *)in, *dout = out, *tmp = NULL;
  const size_t bytes = sizeof(double) * (size_t)n;
  cudaError_t e = cudaSuccess;
  if (mem == PKRYLOV_MEM_HOST) {
    e = cudaMalloc(&tmp, 2 * bytes);
    if (e != cudaSuccess) return pk_cuda_error(ctx, func, e, "allocating temporary vectors", NULL);
    din = tmp, dout = tmp + n;
    e = cudaMemcpyAsync(din, in, bytes, cudaMemcpyHostToDevice, st);
  }
  if (e == cudaSuccess) e = (cudaError_t)op(st, din, dout);
  if (e == cudaSuccess && mem == PKRYLOV_MEM_HOST) e = cudaMemcpyAsync(out, dout, bytes, cudaMemcpyDeviceToHost, st);
  cudaError_t es = cudaStreamSynchronize(st);
  if (e == cudaSuccess) e = es;
  if (tmp) cudaFree(tmp);
  if (e != cudaSuccess) return pk_cuda_error(ctx, func, e, "applying on the device", NULL);
  return PKRYLOV_SUCCESS;
}

} // namespace

namespace {

/**
 * The public apply of a user routine on a CUDA context: apply(data, n, in, out) with DEVICE arrays (host
 * arrays go through device copies), after the stream has been synchronised. A nonzero return is
 * PKRYLOV_ERR_CALLBACK (the output then holds NaN, as on the CPU).
 */
int public_user_apply(pkrylov_context ctx, const char *func, const char *what, pkrylov_apply_fn apply,
                      void *data, int64_t n, int32_t mem, const double *in, const char *in_name, double *out,
                      const char *out_name) {
  int urc = 0;
  int rc = public_apply(ctx, func, n, mem, in, in_name, out, out_name,
                        [&](cudaStream_t st, const double *din, double *dout) {
                          cudaError_t e = cudaStreamSynchronize(st);
                          if (e != cudaSuccess) return (int)e;
                          urc = apply(data, n, din, dout);
                          /* the routine may leave its work queued on any stream (ours is non-blocking) */
                          e = cudaDeviceSynchronize();
                          if (e != cudaSuccess) return (int)e;
                          if (urc) e = cudaMemsetAsync(dout, 0xff, sizeof(double) * (size_t)n, st); /* NaN */
                          return (int)e;
                        });
  if (rc) return rc;
  if (urc)
    return pk_error(ctx, PKRYLOV_ERR_CALLBACK, func,
                    "the apply routine of the user %s (n = %lld) returned %d (nonzero aborts the solve)", what,
                    (long long)n, urc);
  return PKRYLOV_SUCCESS;
}

} // namespace

extern "C" int pk_cuda_user_call(struct pkrylov_context_s *ctx, pkrylov_apply_fn apply, void *data, int64_t n,
                                 const double *x, double *y, const char *what) {
  cudaError_t e = cudaStreamSynchronize(stream_of(ctx));
  if (e != cudaSuccess) return pk_cuda_error(ctx, "pkrylov_solver_solve", e, "synchronising before a callback", NULL);
  const int rc = apply(data, n, x, y);
  /* the routine may leave its kernels or copies queued on any stream (the library's stream is
     non-blocking, so nothing orders them before our next kernel): wait for the whole device */
  e = cudaDeviceSynchronize();
  if (e != cudaSuccess) return pk_cuda_error(ctx, "pkrylov_solver_solve", e, "after the user callback", NULL);
  if (rc)
    return pk_error(ctx, PKRYLOV_ERR_CALLBACK, "user callback",
                    "the apply routine of the user %s (n = %lld) returned %d (nonzero aborts the solve)", what,
                    (long long)n, rc);
  e = cudaGetLastError(); /* a launch failure the routine left behind */
  if (e != cudaSuccess) return pk_cuda_error(ctx, "pkrylov_solver_solve", e, "after the user callback", NULL);
  return PKRYLOV_SUCCESS;
}

extern "C" int pk_cuda_halo_apply(struct pkrylov_operator_s *A, const double *x, double *y,
                                  const char *func) {
  pkrylov_context ctx = A->ctx;
  const OpDev *d = (const OpDev *)A->dev;
  const pk_cuda_op *v = &d->view;
  cudaStream_t st = stream_of(ctx);
  cudaError_t e = (cudaError_t)pk_cuda_halo_fill(st, v, x);
  if (e == cudaSuccess) e = cudaStreamSynchronize(st);
  if (e != cudaSuccess) return pk_cuda_error(ctx, func, e, "filling the halo'ed array", NULL);
  const int rc = A->halo.exchange(A->halo.data, A->nx, A->ny, A->nz, v->xh);
  e = cudaDeviceSynchronize(); /* the exchange may leave copies queued on any stream (ours is non-blocking) */
  if (e != cudaSuccess) return pk_cuda_error(ctx, func, e, "after the halo exchange", NULL);
  if (rc)
    return pk_error(ctx, PKRYLOV_ERR_CALLBACK, "user callback",
                    "the halo exchange routine of the stencil operator (nx x ny x nz = %d x %d x %d) returned %d "
                    "(nonzero aborts the solve)",
                    A->nx, A->ny, A->nz, rc);
  e = cudaGetLastError(); /* a launch failure the routine left behind */
  if (e == cudaSuccess) e = (cudaError_t)pk_cuda_op_apply(st, v, x, y);
  if (e == cudaSuccess) e = (cudaError_t)pk_cuda_halo_edges(st, v, y);
  if (e != cudaSuccess) return pk_cuda_error(ctx, func, e, "after the halo exchange", NULL);
  return PKRYLOV_SUCCESS;
}

extern "C" int pk_cuda_operator_apply_public(struct pkrylov_operator_s *A, int32_t mem, const double *x,
                                             double *y) {
  if (A->dist || (A->grid && pk_distributed(A->ctx)))
    return pk_cuda_dist_apply_public(A, mem, x, y); /* halo exchange first (collective) */
  if (A->halo.exchange) { /* as a user routine: y = NaN and PKRYLOV_ERR_CALLBACK when the exchange fails */
    int hrc = 0;
    const size_t bytes = sizeof(double) * (size_t)A->n;
    int rc = public_apply(A->ctx, "pkrylov_operator_apply", A->n, mem, x, "x", y, "y",
                          [&](cudaStream_t st, const double *in, double *out) {
                            hrc = pk_cuda_halo_apply(A, in, out, "pkrylov_operator_apply");
                            if (hrc == PKRYLOV_ERR_CALLBACK) return (int)cudaMemsetAsync(out, 0xff, bytes, st);
                            return 0;
                          });
    return rc ? rc : hrc;
  }
  if (A->type == PKRYLOV_OPERATOR_USER)
    return public_user_apply(A->ctx, "pkrylov_operator_apply", "operator", A->user.apply, A->user.data, A->n, mem,
                             x, "x", y, "y");
  pk_cuda_op v;
  PK_CALL(pk_cuda_operator_view(A, 0, &v));
  return public_apply(A->ctx, "pkrylov_operator_apply", A->n, mem, x, "x", y, "y",
                      [&](cudaStream_t st, const double *in, double *out) {
                        return pk_cuda_op_apply(st, &v, in, out);
                      });
}

extern "C" int pk_cuda_precond_apply_public(struct pkrylov_precond_s *M, int32_t mem, const double *r,
                                            double *z) {
  if (M->type == PKRYLOV_PRECOND_USER)
    return public_user_apply(M->ctx, "pkrylov_precond_apply", "preconditioner", M->user.apply, M->user.data, M->n,
                             mem, r, "r", z, "z");
  if (M->type == PKRYLOV_PRECOND_AINV && M->A && M->A->grid && pk_distributed(M->ctx))
    return pk_cuda_dist_precond_apply_public(M, mem, r, z); /* r's halo first (collective) */
  pk_cuda_pc v;
  PK_CALL(pk_cuda_precond_view(M, 0, &v));
  return public_apply(M->ctx, "pkrylov_precond_apply", M->n, mem, r, "r", z, "z",
                      [&](cudaStream_t st, const double *in, double *out) {
                        return pk_cuda_pc_apply(st, &v, NULL, in, out);
                      });
}

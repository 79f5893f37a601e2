/**
 * @file pk_halo_test.h
 * @brief Test-only model side of the halo-exchange stencil (pkrylov_operator_create_stencil7_exchange),
 *        written here as a model would: the face coefficients of a channel periodic in x with walls in y,
 *        the periodic matrix as CSR (the independent reference), and the model's exchanges: on host arrays
 *        (CPU contexts) and, when the CUDA runtime header is included before this one, on the DEVICE array
 *        (CUDA contexts). Each exchange wraps x (periodic) or, in walls mode, leaves the whole halo at 0.
 *        Header-only (static inline), C; needs pk_test.h (pk_test_rand) included before.
 */
#ifndef PK_HALO_TEST_H
#define PK_HALO_TEST_H

#include <stdint.h>
#include <stdlib.h>

#include "pk_test.h"

/** Face coefficients of a periodic-in-x channel, MITgcm convention (couplings negative). */
typedef struct {
  int nx, ny, nz;
  double *aW, *aS, *aV, *aC; /* nx*ny*nz each */
  int32_t *mask;             /* NULL or nx*ny*nz */
  double *aWe;               /* ny*nz: the east face of the last cell = aW of cell 0 (periodic) */
} channel;

/** Cell (i,j,k) with i taken modulo nx. */
static inline int cell(const channel *c, int i, int j, int k) {
  i = (i + c->nx) % c->nx;
  return i + c->nx * (j + c->ny * k);
}

static inline int is_wet(const channel *c, int i, int j, int k) {
  return !c->mask || c->mask[cell(c, i, j, k)];
}

/**
 * Random couplings in [-1, -0.5]; with a mask, couplings touching a dry cell are zeroed (as MITgcm's
 * masked coefficients, including the periodic face, so the halo needs no mask); aC = shift - (sum of the
 * couplings of the periodic matrix); aS at j = 0 is random (it multiplies the wall halo, 0); aV at k = 0
 * random (ignored).
 */
static inline int make_channel(int nx, int ny, int nz, int with_mask, uint64_t seed, channel *c) {
  const int n = nx * ny * nz;
  c->nx = nx, c->ny = ny, c->nz = nz;
  c->aW = malloc(sizeof(double) * (size_t)n), c->aS = malloc(sizeof(double) * (size_t)n);
  c->aV = malloc(sizeof(double) * (size_t)n), c->aC = malloc(sizeof(double) * (size_t)n);
  c->aWe = malloc(sizeof(double) * (size_t)(ny * nz));
  c->mask = with_mask ? malloc(sizeof(int32_t) * (size_t)n) : NULL;
  if (!c->aW || !c->aS || !c->aV || !c->aC || !c->aWe || (with_mask && !c->mask))
    return 1;
  if (c->mask) /* a land column at i = 0 (neighbour of i = nx - 1 across the periodic edge), a few cells */
    for (int k = 0; k < nz; k++)
      for (int j = 0; j < ny; j++)
        for (int i = 0; i < nx; i++)
          c->mask[cell(c, i, j, k)] = !((i == 0 && j == 1) || (i == 3 && k == nz - 1));
  for (int p = 0; p < n; p++) {
    c->aW[p] = -0.75 + 0.25 * pk_test_rand(&seed);
    c->aS[p] = -0.75 + 0.25 * pk_test_rand(&seed);
    c->aV[p] = -0.75 + 0.25 * pk_test_rand(&seed);
  }
  for (int k = 0; k < nz; k++)
    for (int j = 0; j < ny; j++)
      for (int i = 0; i < nx; i++) {
        const int p = cell(c, i, j, k);
        if (!is_wet(c, i, j, k) || !is_wet(c, i - 1, j, k))
          c->aW[p] = 0.0;
        if (j > 0 && (!is_wet(c, i, j, k) || !is_wet(c, i, j - 1, k)))
          c->aS[p] = 0.0;
        if (k > 0 && (!is_wet(c, i, j, k) || !is_wet(c, i, j, k - 1)))
          c->aV[p] = 0.0;
      }
  for (int k = 0; k < nz; k++)
    for (int j = 0; j < ny; j++)
      c->aWe[j + ny * k] = c->aW[cell(c, 0, j, k)];
  for (int k = 0; k < nz; k++)
    for (int j = 0; j < ny; j++)
      for (int i = 0; i < nx; i++) {
        const int p = cell(c, i, j, k);
        double s = 0.1 + 0.05 * pk_test_rand(&seed);
        s -= c->aW[p] + c->aW[cell(c, i + 1, j, k)];
        if (j > 0)
          s -= c->aS[p];
        if (j < ny - 1)
          s -= c->aS[cell(c, i, j + 1, k)];
        if (k > 0)
          s -= c->aV[p];
        if (k < nz - 1)
          s -= c->aV[cell(c, i, j, k + 1)];
        c->aC[p] = is_wet(c, i, j, k) ? s : 7.0; /* a dry cell's aC is ignored */
      }
  return 0;
}

static inline void free_channel(channel *c) {
  free(c->aW), free(c->aS), free(c->aV), free(c->aC), free(c->aWe), free(c->mask);
}

/**
 * The periodic matrix as CSR (unsorted rows; the library sorts): dry rows empty (dry_identity: 1 on the
 * diagonal, for the Jacobi preconditioner; the same Krylov iterates where b is 0 on the dry cells), no
 * coupling to them.
 */
static inline int periodic_csr_ex(pkrylov_context ctx, const channel *c, int dry_identity, pkrylov_operator *A) {
  const int nx = c->nx, ny = c->ny, nz = c->nz, n = nx * ny * nz;
  int32_t *rp = malloc(sizeof(int32_t) * (size_t)(n + 1)), *ci = malloc(sizeof(int32_t) * (size_t)n * 7);
  double *v = malloc(sizeof(double) * (size_t)n * 7);
  if (!rp || !ci || !v)
    return 1;
  int nnz = 0;
  rp[0] = 0;
  for (int k = 0; k < nz; k++)
    for (int j = 0; j < ny; j++)
      for (int i = 0; i < nx; i++) {
        const int p = cell(c, i, j, k);
        if (is_wet(c, i, j, k)) {
          ci[nnz] = p, v[nnz++] = c->aC[p];
#define NB(cond, ii, jj, kk, val)                                                                            \
  if ((cond) && is_wet(c, ii, jj, kk))                                                                       \
    ci[nnz] = cell(c, ii, jj, kk), v[nnz++] = (val);
          NB(1, i - 1, j, k, c->aW[p]);
          NB(1, i + 1, j, k, c->aW[cell(c, i + 1, j, k)]);
          NB(j > 0, i, j - 1, k, c->aS[p]);
          NB(j < ny - 1, i, j + 1, k, c->aS[cell(c, i, j + 1, k)]);
          NB(k > 0, i, j, k - 1, c->aV[p]);
          NB(k < nz - 1, i, j, k + 1, c->aV[cell(c, i, j, k + 1)]);
#undef NB
        } else if (dry_identity) {
          ci[nnz] = p, v[nnz++] = 1.0;
        }
        rp[p + 1] = nnz;
      }
  int rc = pkrylov_operator_create_csr(ctx, n, 0, rp, ci, v, A);
  free(rp), free(ci), free(v);
  return rc;
}

/** The periodic matrix as CSR, dry rows empty (periodic_csr_ex). */
static inline int periodic_csr(pkrylov_context ctx, const channel *c, pkrylov_operator *A) {
  return periodic_csr_ex(ctx, c, 0, A);
}

/**
 * The model's exchange: periodic in x, walls in y (leave 0); fails (returns 5) from call fail_at on;
 * walls: walls everywhere (the halo stays 0: the operator is then the plain stencil of
 * pkrylov_operator_create_stencil7 with the same coefficients).
 */
typedef struct {
  int calls, fail_at, bad_dims;
  int nx, ny, nz;
  int walls;
} xch_data;

static inline int xch_periodic(void *user, int32_t nx, int32_t ny, int32_t nz, double *xh) {
  xch_data *d = user;
  d->calls++;
  if (nx != d->nx || ny != d->ny || nz != d->nz)
    d->bad_dims++;
  if (d->fail_at && d->calls >= d->fail_at)
    return 5;
  const int hx = nx + 2, hy = ny + 2;
  for (int k = 0; k < nz; k++)
    for (int j = 0; j < ny; j++) {
      double *row = xh + hx * ((j + 1) + hy * k); /* row[i + 1] = x(i,j,k) */
      if (row[0] != 0.0 || row[nx + 1] != 0.0)
        d->bad_dims++; /* the library zeroes the halo */
      if (d->walls)
        continue;
      row[0] = row[nx];     /* x(-1) = x(nx-1) */
      row[nx + 1] = row[1]; /* x(nx) = x(0) */
    }
  return 0;
}

#ifdef CUDART_VERSION /* the CUDA runtime header was included: the exchange on the device array */

/** Device copy of n host doubles (NULL on failure). */
static inline double *pkt_to_device(const double *h, int64_t n) {
  double *d = NULL;
  if (cudaMalloc((void **)&d, sizeof(double) * (size_t)n) != cudaSuccess)
    return NULL;
  if (cudaMemcpy(d, h, sizeof(double) * (size_t)n, cudaMemcpyHostToDevice) != cudaSuccess) {
    cudaFree(d);
    return NULL;
  }
  return d;
}


/** 1 when p is device memory. */
static inline int is_device(const void *p) {
  struct cudaPointerAttributes at;
  if (cudaPointerGetAttributes(&at, p) != cudaSuccess) {
    cudaGetLastError();
    return 0;
  }
  return at.type == cudaMemoryTypeDevice;
}

/**
 * xch_periodic on the device: the halo columns i = -1 and i = nx of every row (j, k) come from the columns
 * nx-1 and 0 by two strided device-to-device copies (cudaMemcpy2D, one double per row); the halo rows
 * j = -1, ny stay 0 (walls; base.walls: no copy, walls everywhere). Before that the whole array is copied
 * to the host to check that the library zeroed the halo and filled the interior with x (d->x, host).
 * Synchronises before returning.
 */
typedef struct {
  xch_data base;
  int not_device;  /* calls with a host pointer */
  int bad_fill;    /* calls whose halo was not zero or interior not x */
  const double *x; /* host copy of the x of the next apply (NULL: interior not checked) */
  double *hbuf;    /* host scratch of (nx+2)*(ny+2)*nz */
} xch_dev_data;

static inline int xch_periodic_dev(void *user, int32_t nx, int32_t ny, int32_t nz, double *xh) {
  xch_dev_data *d = user;
  d->base.calls++;
  if (nx != d->base.nx || ny != d->base.ny || nz != d->base.nz)
    d->base.bad_dims++;
  if (!is_device(xh)) {
    d->not_device++;
    return 9;
  }
  if (d->base.fail_at && d->base.calls >= d->base.fail_at)
    return 5;
  const size_t hx = (size_t)nx + 2, hy = (size_t)ny + 2, m = hx * hy * (size_t)nz;
  if (cudaMemcpy(d->hbuf, xh, sizeof(double) * m, cudaMemcpyDeviceToHost) != cudaSuccess)
    return 7;
  for (size_t k = 0; k < (size_t)nz; k++)
    for (size_t jh = 0; jh < hy; jh++)
      for (size_t ih = 0; ih < hx; ih++) {
        const double v = d->hbuf[ih + hx * (jh + hy * k)];
        const int inner = ih >= 1 && ih <= (size_t)nx && jh >= 1 && jh <= (size_t)ny;
        if (!inner && v != 0.0)
          d->bad_fill++;
        if (inner && d->x && v != d->x[(ih - 1) + (size_t)nx * ((jh - 1) + (size_t)ny * k)])
          d->bad_fill++;
      }
  if (d->base.walls)
    return cudaDeviceSynchronize() == cudaSuccess ? 0 : 7;
  const size_t pitch = sizeof(double) * hx, rows = hy * (size_t)nz;
  if (cudaMemcpy2D(xh, pitch, xh + nx, pitch, sizeof(double), rows, cudaMemcpyDeviceToDevice) != cudaSuccess)
    return 7; /* x(-1) = x(nx-1) */
  if (cudaMemcpy2D(xh + nx + 1, pitch, xh + 1, pitch, sizeof(double), rows, cudaMemcpyDeviceToDevice) !=
      cudaSuccess)
    return 7; /* x(nx) = x(0) */
  return cudaDeviceSynchronize() == cudaSuccess ? 0 : 7;
}
#endif /* CUDART_VERSION */

#endif /* PK_HALO_TEST_H */

/**
 * @file dist.c
 * @brief Distributed grid operators: the thin shell and the column stencil on a px x py decomposition of
 *        the horizontal grid (each rank owns whole columns), the halo exchange of width one overlapped
 *        with the rows that need no halo, and the gather/scatter of distributed vectors.
 *
 * A distributed operator is an ordinary THINSHELL or STENCIL7 operator of the rank's block (nx, ny, n
 * local; A->ts or A->st hold the block's geometry or coefficients in the layout of a whole grid of that
 * size), so the diagonal, the column tridiagonal and with them the Jacobi and column preconditioners work
 * unchanged and without communication. Only the product differs (pk_dist_apply, reached through
 * pk_op_apply_all): it
 *   1. packs the four tile edges of x and posts MPI_Irecv/MPI_Isend with the four neighbours,
 *   2. computes the rows whose neighbours all lie in the tile (or on the global boundary),
 *   3. waits for the halos (MPI_Waitall) and computes the rows along the tile edges.
 * Every row is evaluated with the expression, and the operand order, that the single-rank operator uses
 * for that row of the global grid (operator.c: st_line, ts_line, with the global boundary rows peeled the
 * same way), so the distributed product equals the single-rank product bitwise.
 *
 * Rank r owns block (rx, ry) = (r mod px, r / px); the block offsets are xoff[0..px], yoff[0..py].
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pk_comm.h"
#include "pk_impl.h"

enum { PK_W = 0, PK_E = 1, PK_S = 2, PK_N = 3 };

/** Requests of one exchange (4 receives, 4 sends). */
typedef struct {
  pk_comm_req r[8];
  int n;
} halo_reqs;

/** The distributed part of an operator (A->dist). */
typedef struct {
  int32_t kind;           /* PK_DIST_GRID (pk_impl.h: the CSR part, dist_csr.c, starts with its kind too) */
  int32_t gnx, gny, nz;   /* global grid */
  int32_t px, py, rx, ry; /* decomposition and this rank's block */
  int32_t i0, nxl, j0, nyl;
  int32_t *xoff, *yoff;   /* px+1, py+1 block offsets */
  int nb[4];              /* neighbour ranks W, E, S, N; -1 on the global boundary */
  double *buf;            /* one block: the four halos h[] then the four send buffers snd[] */
  double *h[4];           /* received: W/E nyl*nz (index j + nyl*k), S/N nxl*nz (index i + nxl*k) */
  double *snd[4];
  double *aWh;            /* stencil: aW per line of nxl+1 (entry nxl: the east neighbour's aW(0)) */
  double *aSh;            /* stencil: aS, nyl+1 lines per level (line nyl: the north neighbour's aS(j=0)) */
  halo_reqs q;            /* the exchange in flight of pk_dist_exchange_begin (CUDA backend) */
} pk_dist;

void pk_dist_free(void *dist) {
  if (pk_dist_kind(dist) == PK_DIST_CSR) {
    pk_dist_csr_free(dist);
    return;
  }
  pk_dist *D = dist;
  if (!D) return;
  free(D->xoff);
  free(D->yoff);
  free(D->buf);
  free(D->aWh);
  free(D->aSh);
  free(D);
}

/* ------------------------------------------------------------------------------------------------ */
/* Halo exchange                                                                                     */

/** Post the receives into rcv and the sends of snd (the layout of D->h and D->snd). 0 or an MPI error. */
static int halo_post(pkrylov_context ctx, pk_dist *D, double *const rcv[4], double *const snd[4], halo_reqs *q) {
  q->n = 0;
  if (!ctx->mpi) return PKRYLOV_SUCCESS;
  const int64_t nx = D->nxl, ny = D->nyl, nz = D->nz;
  const pk_comm_ops *ops = pk_comm_ops_of(ctx);
  void *comm = pk_comm_of(ctx);
  for (int d = 0; d < 4; d++) {
    if (D->nb[d] < 0) continue;
    const int len = (int)((d < 2 ? ny : nx) * nz);
    /* what nb[d] sends towards us travels in the opposite direction: tag d ^ 1 */
    int rc = ops->irecv(comm, rcv[d], len, PK_COMM_DOUBLE, D->nb[d], d ^ 1, &q->r[q->n]);
    if (rc != 0) return pk_comm_error(ctx, "halo exchange", "MPI_Irecv", rc);
    q->n++;
  }
  for (int d = 0; d < 4; d++) {
    if (D->nb[d] < 0) continue;
    const int len = (int)((d < 2 ? ny : nx) * nz);
    int rc = ops->isend(comm, snd[d], len, PK_COMM_DOUBLE, D->nb[d], d, &q->r[q->n]);
    if (rc != 0) return pk_comm_error(ctx, "halo exchange", "MPI_Isend", rc);
    q->n++;
  }
  return PKRYLOV_SUCCESS;
}

/** Pack the tile edges of x (n local values) and post the receives and sends. 0 or an MPI error. */
static int halo_start(pkrylov_context ctx, pk_dist *D, const double *x, halo_reqs *q) {
  q->n = 0;
  if (!ctx->mpi) return PKRYLOV_SUCCESS;
  const int64_t nx = D->nxl, ny = D->nyl, nz = D->nz;
  for (int64_t k = 0; k < nz; k++) {
    for (int64_t j = 0; j < ny; j++) {
      const double *line = x + nx * (j + ny * k);
      D->snd[PK_W][j + ny * k] = line[0];
      D->snd[PK_E][j + ny * k] = line[nx - 1];
    }
    memcpy(D->snd[PK_S] + nx * k, x + nx * ny * k, sizeof(double) * (size_t)nx);
    memcpy(D->snd[PK_N] + nx * k, x + nx * (ny - 1 + ny * k), sizeof(double) * (size_t)nx);
  }
  return halo_post(ctx, D, D->h, D->snd, q);
}

/** Wait for the exchange started by halo_start(). */
static int halo_wait(pkrylov_context ctx, halo_reqs *q) {
  if (q->n > 0) {
    int rc = pk_comm_ops_of(ctx)->waitall(q->n, q->r);
    q->n = 0;
    if (rc != 0) return pk_comm_error(ctx, "halo exchange", "MPI_Waitall", rc);
  }
  return PKRYLOV_SUCCESS;
}

/** Fill D->h with the neighbours' edges of the field f (n local values): a blocking exchange. */
static int halo_exchange(pkrylov_context ctx, pk_dist *D, const double *f) {
  halo_reqs q;
  int e = halo_start(ctx, D, f, &q);
  int e2 = halo_wait(ctx, &q);
  return e ? e : e2;
}

/* ---- for the CUDA backend (pk_cuda_dist.cu): the tile, and an exchange of caller-packed buffers ---- */

int pk_dist_get_tile(const struct pkrylov_operator_s *A, pk_dist_tile *t) {
  const pk_dist *D = A->dist;
  if (!D) return PKRYLOV_ERR_INTERNAL;
  t->nx = D->nxl, t->ny = D->nyl, t->nz = D->nz;
  for (int d = 0; d < 4; d++) {
    t->has[d] = D->nb[d] >= 0 && A->ctx->mpi != NULL;
    t->nb[d] = t->has[d] ? D->nb[d] : -1;
  }
  const int64_t NX = D->nxl, NY = D->nyl, NZ = D->nz;
  t->aWe = NULL, t->aSn = NULL;
  if (A->type == PKRYLOV_OPERATOR_STENCIL7 && D->aWh && D->aSh) {
    double *we = malloc(sizeof(double) * (size_t)(NY * NZ)), *sn = malloc(sizeof(double) * (size_t)(NX * NZ));
    if (!we || !sn) {
      free(we), free(sn);
      return pk_error(A->ctx, PKRYLOV_ERR_OUT_OF_MEMORY, "pkrylov_operator_create", "cannot allocate");
    }
    for (int64_t k = 0; k < NZ; k++) {
      for (int64_t j = 0; j < NY; j++) we[j + NY * k] = D->aWh[(NX + 1) * (j + NY * k) + NX];
      for (int64_t i = 0; i < NX; i++) sn[i + NX * k] = D->aSh[NX * (NY + 1) * k + NX * NY + i];
    }
    t->aWe = we, t->aSn = sn;
  }
  return PKRYLOV_SUCCESS;
}

int pk_dist_exchange_begin(const struct pkrylov_operator_s *A, double *rcv, double *snd) {
  pk_dist *D = A->dist;
  const int64_t ex = (int64_t)D->nyl * D->nz, ey = (int64_t)D->nxl * D->nz;
  double *const r[4] = {rcv, rcv + ex, rcv + 2 * ex, rcv + 2 * ex + ey};
  double *const s[4] = {snd, snd + ex, snd + 2 * ex, snd + 2 * ex + ey};
  if (D->q.n > 0) return pk_error(A->ctx, PKRYLOV_ERR_INTERNAL, "halo exchange", "an exchange is in flight");
  return halo_post(A->ctx, D, r, s, &D->q);
}

int pk_dist_exchange_end(const struct pkrylov_operator_s *A) {
  pk_dist *D = A->dist;
  return halo_wait(A->ctx, &D->q);
}

/* ------------------------------------------------------------------------------------------------ */
/* Rows                                                                                              */

/** Stencil row of local cell i (an edge cell): the single-rank expression of global cell gi (st_line). */
static inline double st_cell(int64_t i, int64_t nx, int64_t gi, int64_t gnx, const double *aC, const double *aW,
                             const double *cs, const double *cn, const double *cd, const double *cu,
                             const double *xc, const double *xs, const double *xn, const double *xd,
                             const double *xu, const double *pw, const double *pe) {
  const double xi = xc[i];
  /* a halo value is read only where the cell has a neighbour tile there (never on the global boundary) */
  const double xW = i > 0 ? xc[i - 1] : (pw ? *pw : 0.0), xE = i < nx - 1 ? xc[i + 1] : (pe ? *pe : 0.0);
  if (gi == 0) {
    double s = aC[i] * xi + cs[i] * xs[i] + cn[i] * xn[i] + cd[i] * xd[i] + cu[i] * xu[i];
    if (gnx > 1) s += aW[i + 1] * xE;
    return s;
  }
  if (gi == gnx - 1)
    return aC[i] * xi + aW[i] * xW + cs[i] * xs[i] + cn[i] * xn[i] + cd[i] * xd[i] + cu[i] * xu[i];
  return aC[i] * xi + aW[i] * xW + aW[i + 1] * xE + cs[i] * xs[i] + cn[i] * xn[i] + cd[i] * xd[i] + cu[i] * xu[i];
}

/** Thin-shell row of local cell i (an edge cell): the single-rank expression of global cell gi (ts_line). */
static inline double ts_cell(int64_t i, int64_t nx, int64_t gi, int64_t gnx, double ak, double bk, double ck,
                             double dk, const double *ar, const double *ax, const double *ays, const double *ayn,
                             const double *xc, const double *xs, const double *xn, const double *xd,
                             const double *xu, const double *pw, const double *pe) {
  const double xi = xc[i];
  /* a halo value is read only where the cell has a neighbour tile there (never on the global boundary) */
  const double xW = i > 0 ? xc[i - 1] : (pw ? *pw : 0.0), xE = i < nx - 1 ? xc[i + 1] : (pe ? *pe : 0.0);
  if (gi == 0) {
    const double e = gnx > 1 ? ax[i + 1] * (xi - xE) : 0.0;
    return ar[i] * (dk * xi + bk * (xi - xd[i]) + ck * (xi - xu[i])) +
           ak * (e + ays[i] * (xi - xs[i]) + ayn[i] * (xi - xn[i]));
  }
  if (gi == gnx - 1)
    return ar[i] * (dk * xi + bk * (xi - xd[i]) + ck * (xi - xu[i])) +
           ak * (ax[i] * (xi - xW) + ays[i] * (xi - xs[i]) + ayn[i] * (xi - xn[i]));
  return ar[i] * (dk * xi + bk * (xi - xd[i]) + ck * (xi - xu[i])) +
         ak * (ax[i] * (xi - xW) + ax[i + 1] * (xi - xE) + ays[i] * (xi - xs[i]) + ayn[i] * (xi - xn[i]));
}

/**
 * Cells [ia, ib) of local line (j, k): the edge cells (i = 0, nx - 1) through st_cell/ts_cell, the others
 * in a vectorisable loop. Reads the halos of the directions it needs (the caller has waited for them).
 */
static void dist_line(const struct pkrylov_operator_s *A, const pk_dist *D, const double *x, double *y, int64_t j,
                      int64_t k, int64_t ia, int64_t ib) {
  if (ib <= ia) return;
  const int64_t nx = D->nxl, ny = D->nyl, nz = D->nz, nxy = nx * ny, c0 = nx * (j + ny * k);
  const int64_t gnx = D->gnx, gi0 = D->i0;
  const double *restrict xc = x + c0;
  double *restrict yc = y + c0;
  /* a missing neighbour line on the global boundary: the own line (times a zero coefficient), as the
     single-rank operator does; across a tile edge: the halo line */
  const double *xs = j > 0 ? xc - nx : (D->nb[PK_S] >= 0 ? D->h[PK_S] + nx * k : xc);
  const double *xn = j < ny - 1 ? xc + nx : (D->nb[PK_N] >= 0 ? D->h[PK_N] + nx * k : xc);
  const double *xd = k > 0 ? xc - nxy : xc, *xu = k < nz - 1 ? xc + nxy : xc;
  const double *xw = D->nb[PK_W] >= 0 ? D->h[PK_W] + j + ny * k : NULL;
  const double *xe = D->nb[PK_E] >= 0 ? D->h[PK_E] + j + ny * k : NULL;
  int64_t lo = ia;
  const int64_t hi = ib < nx - 1 ? ib : nx - 1;
  if (A->type == PKRYLOV_OPERATOR_STENCIL7) {
    const double *restrict aC = A->st.aC + c0, *restrict aW = D->aWh + (nx + 1) * (j + ny * k);
    const double *restrict cs = D->aSh + nx * (j + (ny + 1) * k), *restrict cn = cs + nx;
    const double *restrict cd = A->st.aV + c0;
    const double *restrict cu = k < nz - 1 ? A->st.aV + c0 + nxy : A->st.aV + nx * j; /* level 0: zeros */
    if (lo == 0) {
      yc[0] = st_cell(0, nx, gi0, gnx, aC, aW, cs, cn, cd, cu, xc, xs, xn, xd, xu, xw, xe);
      lo = 1;
    }
    for (int64_t i = lo; i < hi; i++)
      yc[i] = aC[i] * xc[i] + aW[i] * xc[i - 1] + aW[i + 1] * xc[i + 1] + cs[i] * xs[i] + cn[i] * xn[i] +
              cd[i] * xd[i] + cu[i] * xu[i];
    if (ib == nx && nx - 1 >= lo)
      yc[nx - 1] = st_cell(nx - 1, nx, gi0 + nx - 1, gnx, aC, aW, cs, cn, cd, cu, xc, xs, xn, xd, xu, xw, xe);
  } else {
    const double ak = A->ts.a[k], bk = A->ts.b[k], ck = A->ts.c[k], dk = A->ts.d[k];
    const double *restrict ar = A->ts.area + nx * j, *restrict ax = A->ts.ax + (nx + 1) * j;
    const double *restrict ays = A->ts.ay + nx * j, *restrict ayn = A->ts.ay + nx * (j + 1);
    if (lo == 0) {
      yc[0] = ts_cell(0, nx, gi0, gnx, ak, bk, ck, dk, ar, ax, ays, ayn, xc, xs, xn, xd, xu, xw, xe);
      lo = 1;
    }
    for (int64_t i = lo; i < hi; i++) {
      const double xi = xc[i];
      yc[i] = ar[i] * (dk * xi + bk * (xi - xd[i]) + ck * (xi - xu[i])) +
              ak * (ax[i] * (xi - xc[i - 1]) + ax[i + 1] * (xi - xc[i + 1]) + ays[i] * (xi - xs[i]) +
                    ayn[i] * (xi - xn[i]));
    }
    if (ib == nx && nx - 1 >= lo)
      yc[nx - 1] =
          ts_cell(nx - 1, nx, gi0 + nx - 1, gnx, ak, bk, ck, dk, ar, ax, ays, ayn, xc, xs, xn, xd, xu, xw, xe);
  }
}

void pk_dist_apply(const struct pkrylov_operator_s *A, const double *x, double *y) {
  if (pk_dist_kind(A->dist) == PK_DIST_CSR) {
    pk_dist_csr_apply(A, x, y);
    return;
  }
  struct pkrylov_operator_s *Wr = (struct pkrylov_operator_s *)A; /* heap object: the cast is defined */
  pk_dist *D = A->dist;
  const int64_t nx = D->nxl, ny = D->nyl, nz = D->nz, n = A->n;
  const int nt = pk_num_threads(A->ctx);
  (void)nt; /* read by the OpenMP pragmas only */
  if (!A->user.failed) {
    halo_reqs q;
    int e = halo_start(A->ctx, D, x, &q);
    /* rows without halo: lines [jlo, jhi), cells [ilo, ihi) */
    const int64_t jlo = D->nb[PK_S] >= 0 ? 1 : 0, jhi = D->nb[PK_N] >= 0 ? ny - 1 : ny;
    const int64_t ilo = D->nb[PK_W] >= 0 ? 1 : 0, ihi = D->nb[PK_E] >= 0 ? nx - 1 : nx;
    const int64_t nj = jhi > jlo ? jhi - jlo : 0, nlines = nj * nz;
    if (!e) {
#ifdef _OPENMP
#pragma omp parallel for schedule(static) num_threads(nt) if (pk_par(n))
#endif
      for (int64_t l = 0; l < nlines; l++) dist_line(A, D, x, y, jlo + l % nj, l / nj, ilo, ihi);
    }
    const int e2 = halo_wait(A->ctx, &q);
    if (!e && !e2) {
      /* the rest: the edge lines whole, the edge cells of the other lines */
      const int64_t ia = ilo < nx ? ilo : nx, ib = ihi > ia ? ihi : ia;
#ifdef _OPENMP
#pragma omp parallel for schedule(static) num_threads(nt) if (pk_par(n))
#endif
      for (int64_t k = 0; k < nz; k++)
        for (int64_t j = 0; j < ny; j++) {
          if (j < jlo || j >= jhi) {
            dist_line(A, D, x, y, j, k, 0, nx);
          } else {
            dist_line(A, D, x, y, j, k, 0, ia);
            dist_line(A, D, x, y, j, k, ib, nx);
          }
        }
      return;
    }
    Wr->user.failed = 1; /* the message is in the context (pk_comm_error) */
  }
  for (int64_t i = 0; i < n; i++) y[i] = NAN; /* a caller that does not check the flag sees a NaN */
}

/* ------------------------------------------------------------------------------------------------ */
/* Creation                                                                                          */

/** Compare count int64 values between the ranks: 1 in *differ (same on every rank) when they differ. */
static int ranks_differ(pkrylov_context ctx, const int64_t *v, int count, int *differ) {
  int64_t mn[16], mx[16];
  memcpy(mn, v, sizeof(int64_t) * (size_t)count);
  memcpy(mx, v, sizeof(int64_t) * (size_t)count);
  PK_CALL(pk_mpi_allreduce_i64(ctx, mn, count, 1));
  PK_CALL(pk_mpi_allreduce_i64(ctx, mx, count, 2));
  *differ = -1;
  for (int i = 0; i < count && *differ < 0; i++)
    if (mn[i] != mx[i]) *differ = i;
  return PKRYLOV_SUCCESS;
}

/** A new pk_dist for a px x py decomposition with the given block offsets (copied), for this rank. */
static int dist_new(pkrylov_context ctx, const char *func, int32_t gnx, int32_t gny, int32_t nz, int32_t px,
                    int32_t py, const int32_t *xoff, const int32_t *yoff, pk_dist **out) {
  pk_dist *D = calloc(1, sizeof *D);
  if (!D) return pk_error(ctx, PKRYLOV_ERR_OUT_OF_MEMORY, func, "cannot allocate the distributed operator");
  D->kind = PK_DIST_GRID;
  D->gnx = gnx, D->gny = gny, D->nz = nz, D->px = px, D->py = py;
  D->rx = ctx->rank % px, D->ry = ctx->rank / px;
  D->xoff = malloc(sizeof(int32_t) * (size_t)(px + 1));
  D->yoff = malloc(sizeof(int32_t) * (size_t)(py + 1));
  if (!D->xoff || !D->yoff) {
    pk_dist_free(D);
    return pk_error(ctx, PKRYLOV_ERR_OUT_OF_MEMORY, func, "cannot allocate the decomposition");
  }
  memcpy(D->xoff, xoff, sizeof(int32_t) * (size_t)(px + 1));
  memcpy(D->yoff, yoff, sizeof(int32_t) * (size_t)(py + 1));
  D->i0 = xoff[D->rx], D->nxl = xoff[D->rx + 1] - xoff[D->rx];
  D->j0 = yoff[D->ry], D->nyl = yoff[D->ry + 1] - yoff[D->ry];
  D->nb[PK_W] = D->rx > 0 ? ctx->rank - 1 : -1;
  D->nb[PK_E] = D->rx < px - 1 ? ctx->rank + 1 : -1;
  D->nb[PK_S] = D->ry > 0 ? ctx->rank - px : -1;
  D->nb[PK_N] = D->ry < py - 1 ? ctx->rank + px : -1;
  const int64_t ex = (int64_t)D->nyl * nz, ey = (int64_t)D->nxl * nz;
  D->buf = calloc((size_t)(4 * (ex + ey)), sizeof(double));
  if (!D->buf) {
    pk_dist_free(D);
    return pk_error(ctx, PKRYLOV_ERR_OUT_OF_MEMORY, func, "cannot allocate the halo buffers");
  }
  double *p = D->buf;
  for (int s = 0; s < 2; s++) { /* halos, then send buffers */
    double **arr = s ? D->snd : D->h;
    arr[PK_W] = p, p += ex;
    arr[PK_E] = p, p += ex;
    arr[PK_S] = p, p += ey;
    arr[PK_N] = p, p += ey;
  }
  *out = D;
  return PKRYLOV_SUCCESS;
}

/** The common checks of px, py against the communicator (the same outcome on every rank). */
static int check_decomp(pkrylov_context ctx, const char *func, int32_t px, int32_t py) {
  if ((int64_t)px * py != ctx->size)
    return pk_error(ctx, PKRYLOV_ERR_SIZE_MISMATCH, func,
                    "arguments 'px' x 'py' = %d x %d = %lld blocks, but the communicator has %d ranks (one "
                    "block per rank)",
                    px, py, (long long)px * py, ctx->size);
  return PKRYLOV_SUCCESS;
}

/** Allocate the operator shell of a distributed grid operator of this rank's block. */
static int dist_operator(pkrylov_context ctx, const char *func, pk_dist *D, int32_t type,
                         struct pkrylov_operator_s **out) {
  struct pkrylov_operator_s *B = calloc(1, sizeof *B);
  if (!B) return pk_error(ctx, PKRYLOV_ERR_OUT_OF_MEMORY, func, "cannot allocate the operator");
  B->ctx = ctx;
  B->type = type;
  B->nx = D->nxl, B->ny = D->nyl, B->nz = D->nz;
  B->n = (int64_t)D->nxl * D->nyl * D->nz;
  B->nnz = -1;
  B->dist = D;
  B->user.scratch = malloc(sizeof(double) * (size_t)B->n);
  if (!B->user.scratch) {
    pk_op_free(B);
    return pk_error(ctx, PKRYLOV_ERR_OUT_OF_MEMORY, func, "cannot allocate the work vector of %lld values",
                    (long long)B->n);
  }
  *out = B;
  return PKRYLOV_SUCCESS;
}

int pkrylov_operator_create_thinshell_dist(pkrylov_context ctx, const pkrylov_thinshell_params *p, int32_t px,
                                           int32_t py, pkrylov_operator *A) {
  PK_CHECK(ctx != NULL, NULL, PKRYLOV_ERR_NULL_POINTER, "argument 'ctx' is NULL");
  const char *func = __func__;
  /* local checks first, then the same outcome everywhere */
  int e = PKRYLOV_SUCCESS;
  if (!p)
    e = pk_error(ctx, PKRYLOV_ERR_NULL_POINTER, func, "argument 'p' is NULL");
  else if (!A)
    e = pk_error(ctx, PKRYLOV_ERR_NULL_POINTER, func, "argument 'A' is NULL");
  else if (px < 1 || py < 1)
    e = pk_error(ctx, PKRYLOV_ERR_INVALID_SIZE, func, "arguments 'px' = %d and 'py' = %d must be >= 1", px, py);
  else
    e = pk_thinshell_check_params(ctx, func, p);
  PK_CALL(pk_mpi_agree(ctx, e));
  /* the same parameters on every rank */
  double H = p->H, la = p->lambda, nu = p->nu;
  int64_t v[9] = {p->nx, p->ny, p->nz, p->geometry, px, py, 0, 0, 0};
  memcpy(&v[6], &H, sizeof H);
  memcpy(&v[7], &la, sizeof la);
  memcpy(&v[8], &nu, sizeof nu);
  int differ;
  PK_CALL(ranks_differ(ctx, v, 9, &differ));
  static const char *const names[9] = {"p->nx", "p->ny", "p->nz", "p->geometry", "px", "py",
                                       "p->H",  "p->lambda", "p->nu"};
  if (differ >= 0)
    return pk_error(ctx, PKRYLOV_ERR_INVALID_VALUE, func,
                    "argument '%s' differs between the ranks (every rank must pass the same global problem and "
                    "decomposition)",
                    names[differ]);
  PK_CALL(check_decomp(ctx, func, px, py));
  if (p->nx < px || p->ny < py)
    return pk_error(ctx, PKRYLOV_ERR_INVALID_SIZE, func,
                    "the grid's %d x %d columns cannot be cut into px x py = %d x %d blocks: %s would get no "
                    "columns (px <= nx and py <= ny are needed)",
                    p->nx, p->ny, px, py, p->nx < px ? "the last columns of ranks" : "the last rows of ranks");
  /* blocks: the first nx mod px get one column more */
  int32_t *xoff = calloc((size_t)px + 1, sizeof(int32_t)), *yoff = calloc((size_t)py + 1, sizeof(int32_t));
  e = (xoff && yoff) ? PKRYLOV_SUCCESS
                     : pk_error(ctx, PKRYLOV_ERR_OUT_OF_MEMORY, func, "cannot allocate the decomposition");
  if (!e) {
    for (int32_t r = 0; r < px; r++) xoff[r + 1] = xoff[r] + p->nx / px + (r < p->nx % px);
    for (int32_t r = 0; r < py; r++) yoff[r + 1] = yoff[r] + p->ny / py + (r < p->ny % py);
  }
  pk_dist *D = NULL;
  struct pkrylov_operator_s *B = NULL;
  if (!e) e = dist_new(ctx, func, p->nx, p->ny, p->nz, px, py, xoff, yoff, &D);
  free(xoff);
  free(yoff);
  if (!e && (e = dist_operator(ctx, func, D, PKRYLOV_OPERATOR_THINSHELL, &B)) != PKRYLOV_SUCCESS) pk_dist_free(D);
  if (!e) {
    const int64_t nxl = D->nxl, nyl = D->nyl, nz = D->nz;
    B->ts.p = *p;
    B->ts.a = calloc((size_t)nz, sizeof(double));
    B->ts.b = calloc((size_t)nz, sizeof(double));
    B->ts.c = calloc((size_t)nz, sizeof(double));
    B->ts.d = calloc((size_t)nz, sizeof(double));
    B->ts.area = calloc((size_t)(nxl * nyl), sizeof(double));
    B->ts.asum = calloc((size_t)(nxl * nyl), sizeof(double));
    B->ts.ax = calloc((size_t)((nxl + 1) * nyl), sizeof(double));
    B->ts.ay = calloc((size_t)(nxl * (nyl + 1)), sizeof(double));
    if (!B->ts.a || !B->ts.b || !B->ts.c || !B->ts.d || !B->ts.area || !B->ts.asum || !B->ts.ax || !B->ts.ay) {
      e = pk_error(ctx, PKRYLOV_ERR_OUT_OF_MEMORY, func, "cannot allocate the block's geometry (%lld columns)",
                   (long long)(nxl * nyl));
    } else {
      pk_thinshell_levels(p, B->ts.a, B->ts.b, B->ts.c, B->ts.d);
      pk_thinshell_columns(p, D->i0, nxl, D->j0, nyl, B->ts.area, B->ts.ax, B->ts.ay, B->ts.asum);
    }
  }
  e = pk_mpi_agree(ctx, e);
  if (e) {
    pk_op_free(B);
    return e;
  }
  return pk_op_register(ctx, B, A);
}

/** First non-finite value of a block array v (n values) as the caller's array at a global cell; 0 if none. */
static int dist_check_finite(pkrylov_context ctx, const char *func, const char *name, const double *v,
                             const pk_dist *D) {
  const int64_t n = (int64_t)D->nxl * D->nyl * D->nz;
  int64_t c = pk_first_nonfinite(v, n);
  if (c < 0) return PKRYLOV_SUCCESS;
  const int64_t line = c / D->nxl, k = line / D->nyl;
  const int64_t i = c - line * D->nxl, j = line - k * D->nyl;
  return pk_error(ctx, PKRYLOV_ERR_NOT_FINITE, func,
                  "argument '%s' = %g at local cell (i,j,k) = (%lld,%lld,%lld) (0-based; global (%lld,%lld,%lld)) "
                  "is not finite",
                  name, v[c], (long long)i, (long long)j, (long long)k, (long long)(D->i0 + i),
                  (long long)(D->j0 + j), (long long)k);
}

int pkrylov_operator_create_stencil7_dist(pkrylov_context ctx, int32_t px, int32_t py, int32_t nx, int32_t ny,
                                          int32_t nz, const double *aW, const double *aS, const double *aV,
                                          const double *aC, const int32_t *mask, pkrylov_operator *A) {
  PK_CHECK(ctx != NULL, NULL, PKRYLOV_ERR_NULL_POINTER, "argument 'ctx' is NULL");
  const char *func = __func__;
  int e = PKRYLOV_SUCCESS;
  if (!A || !aW || !aS || !aV || !aC)
    e = pk_error(ctx, PKRYLOV_ERR_NULL_POINTER, func, "argument '%s' is NULL",
                 !A ? "A" : !aW ? "aW" : !aS ? "aS" : !aV ? "aV" : "aC");
  else if (px < 1 || py < 1)
    e = pk_error(ctx, PKRYLOV_ERR_INVALID_SIZE, func, "arguments 'px' = %d and 'py' = %d must be >= 1", px, py);
  else if (nx < 1 || ny < 1 || nz < 1)
    e = pk_error(ctx, PKRYLOV_ERR_INVALID_SIZE, func,
                 "arguments 'nx' x 'ny' x 'nz' = %d x %d x %d: this rank's tile must have at least one cell", nx,
                 ny, nz);
  else if (((int64_t)nx + 1) * ((int64_t)ny + 1) > (INT64_MAX / 16) / nz)
    e = pk_error(ctx, PKRYLOV_ERR_INVALID_SIZE, func, "arguments 'nx' x 'ny' x 'nz' = %d x %d x %d: too many cells",
                 nx, ny, nz);
  PK_CALL(pk_mpi_agree(ctx, e));
  int64_t v[2] = {px, py};
  int differ;
  PK_CALL(ranks_differ(ctx, v, 2, &differ));
  if (differ >= 0)
    return pk_error(ctx, PKRYLOV_ERR_INVALID_VALUE, func, "argument '%s' differs between the ranks",
                    differ ? "py" : "px");
  PK_CALL(check_decomp(ctx, func, px, py));
  /* every rank's tile: the tiles of a column of ranks share nx, those of a row share ny, all share nz */
  const int size = ctx->size;
  int32_t mine[3] = {nx, ny, nz}, *all = malloc(sizeof(int32_t) * 3 * (size_t)size);
  int32_t *xoff = calloc((size_t)px + 1, sizeof(int32_t)), *yoff = calloc((size_t)py + 1, sizeof(int32_t));
  e = (all && xoff && yoff) ? PKRYLOV_SUCCESS
                            : pk_error(ctx, PKRYLOV_ERR_OUT_OF_MEMORY, func, "cannot allocate the tile table");
  e = pk_mpi_agree(ctx, e);
  if (!e) e = pk_mpi_allgather_i32(ctx, mine, 3, all);
  if (!e) {
    for (int r = 0; r < size && !e; r++) {
      const int rx = r % px, ry = r / px, c0 = ry * px + 0 /* first rank of its row */, c1 = rx /* of its column */;
      if (all[3 * r + 2] != all[2])
        e = pk_error(ctx, PKRYLOV_ERR_SIZE_MISMATCH, func,
                     "rank %d has nz = %d levels but rank 0 has %d (all tiles need the same levels)", r,
                     all[3 * r + 2], all[2]);
      else if (all[3 * r] != all[3 * c1])
        e = pk_error(ctx, PKRYLOV_ERR_SIZE_MISMATCH, func,
                     "rank %d (tile %d,%d) has nx = %d but rank %d of the same column of tiles has nx = %d: the "
                     "tiles do not add up to a grid",
                     r, rx, ry, all[3 * r], c1, all[3 * c1]);
      else if (all[3 * r + 1] != all[3 * c0 + 1])
        e = pk_error(ctx, PKRYLOV_ERR_SIZE_MISMATCH, func,
                     "rank %d (tile %d,%d) has ny = %d but rank %d of the same row of tiles has ny = %d: the tiles "
                     "do not add up to a grid",
                     r, rx, ry, all[3 * r + 1], c0, all[3 * c0 + 1]);
    }
    if (!e) {
      for (int32_t r = 0; r < px; r++) xoff[r + 1] = xoff[r] + all[3 * r];
      for (int32_t r = 0; r < py; r++) yoff[r + 1] = yoff[r] + all[3 * (r * px) + 1];
    }
  }
  pk_dist *D = NULL;
  struct pkrylov_operator_s *B = NULL;
  if (!e) e = dist_new(ctx, func, xoff[px], yoff[py], nz, px, py, xoff, yoff, &D);
  free(all);
  free(xoff);
  free(yoff);
  if (!e && (e = dist_operator(ctx, func, D, PKRYLOV_OPERATOR_STENCIL7, &B)) != PKRYLOV_SUCCESS) pk_dist_free(D);
  /* every rank reaches the exchanges below (the earlier outcomes were the same everywhere, and a local
     allocation failure is agreed first) */
  const int64_t NX = nx, NY = ny, NZ = nz, n = NX * NY * NZ, nxy = NX * NY;
  double *f = NULL;
  if (!e) {
    B->st.aW = malloc(sizeof(double) * (size_t)n);
    B->st.aS = malloc(sizeof(double) * (size_t)n);
    B->st.aV = malloc(sizeof(double) * (size_t)n);
    B->st.aC = malloc(sizeof(double) * (size_t)n);
    D->aWh = malloc(sizeof(double) * (size_t)((NX + 1) * NY * NZ));
    D->aSh = malloc(sizeof(double) * (size_t)(NX * (NY + 1) * NZ));
    f = malloc(sizeof(double) * (size_t)n);
    if (mask) B->st.wet = malloc((size_t)n);
    if (!B->st.aW || !B->st.aS || !B->st.aV || !B->st.aC || !D->aWh || !D->aSh || !f || (mask && !B->st.wet))
      e = pk_error(ctx, PKRYLOV_ERR_OUT_OF_MEMORY, func, "cannot allocate the tile copy (%lld cells)", (long long)n);
  }
  e = pk_mpi_agree(ctx, e);
  if (e) {
    free(f);
    pk_op_free(B);
    return e;
  }
  /* the mask: whether any rank has one (then the others count as all wet), and the neighbours' edges */
  int64_t anymask = mask != NULL;
  PK_CALL(pk_mpi_allreduce_i64(ctx, &anymask, 1, 2)); /* B leaks only when MPI itself fails */
  uint8_t *wet = B->st.wet;
  for (int64_t c = 0; c < n; c++) f[c] = (!wet || mask[c] != 0) ? 1.0 : 0.0;
  if (wet)
    for (int64_t c = 0; c < n; c++) wet[c] = mask[c] != 0;
  if (anymask) e = halo_exchange(ctx, D, f);
  const double *hwm = D->h[PK_W], *hsm = D->h[PK_S];
  /* local copies with the mask applied, the couplings across the global boundary dropped */
  double *aWm = B->st.aW, *aSm = B->st.aS;
  for (int64_t k = 0; k < NZ; k++)
    for (int64_t j = 0; j < NY; j++)
      for (int64_t i = 0; i < NX; i++) {
        const int64_t c = i + NX * (j + NY * k);
        const int wc = f[c] != 0.0;
        const int ww = i > 0 ? f[c - 1] != 0.0 : (!anymask || hwm[j + NY * k] != 0.0);
        const int ws = j > 0 ? f[c - NX] != 0.0 : (!anymask || hsm[i + NX * k] != 0.0);
        B->st.aC[c] = wc ? aC[c] : 0.0;
        aWm[c] = (D->i0 + i > 0 && wc && ww) ? aW[c] : 0.0;
        aSm[c] = (D->j0 + j > 0 && wc && ws) ? aS[c] : 0.0;
        B->st.aV[c] = (k > 0 && wc && f[c - nxy] != 0.0) ? aV[c] : 0.0;
      }
  if (!e) e = dist_check_finite(ctx, func, "aW", aWm, D);
  if (!e) e = dist_check_finite(ctx, func, "aS", aSm, D);
  if (!e) e = dist_check_finite(ctx, func, "aV", B->st.aV, D);
  if (!e) e = dist_check_finite(ctx, func, "aC", B->st.aC, D);
  /* the east neighbour's aW of its first column and the north neighbour's aS of its first row */
  int e2 = halo_exchange(ctx, D, aWm);
  for (int64_t k = 0; k < NZ; k++)
    for (int64_t j = 0; j < NY; j++) {
      double *line = D->aWh + (NX + 1) * (j + NY * k);
      memcpy(line, aWm + NX * (j + NY * k), sizeof(double) * (size_t)NX);
      line[NX] = D->nb[PK_E] >= 0 ? D->h[PK_E][j + NY * k] : 0.0;
    }
  int e3 = halo_exchange(ctx, D, aSm);
  for (int64_t k = 0; k < NZ; k++) {
    double *plane = D->aSh + NX * (NY + 1) * k;
    memcpy(plane, aSm + nxy * k, sizeof(double) * (size_t)nxy);
    for (int64_t i = 0; i < NX; i++) plane[NX * NY + i] = D->nb[PK_N] >= 0 ? D->h[PK_N][i + NX * k] : 0.0;
  }
  free(f);
  if (!e) e = e2 ? e2 : e3;
  B->wet = B->st.wet;
  e = pk_mpi_agree(ctx, e);
  if (e) {
    pk_op_free(B);
    return e;
  }
  return pk_op_register(ctx, B, A);
}

/* ------------------------------------------------------------------------------------------------ */
/* Queries, gather, scatter                                                                          */

int pkrylov_operator_get_dist_info(pkrylov_operator A, int32_t *gnx, int32_t *gny, int32_t *i0, int32_t *nxl,
                                   int32_t *j0, int32_t *nyl, int32_t *px, int32_t *py) {
  PK_CHECK(A != NULL, NULL, PKRYLOV_ERR_NULL_POINTER, "argument 'A' is NULL");
  PK_CHECK(A->type == PKRYLOV_OPERATOR_THINSHELL || A->type == PKRYLOV_OPERATOR_STENCIL7, A->ctx,
           PKRYLOV_ERR_UNSUPPORTED, "argument 'A' is not a grid operator (thin shell or column stencil)");
  const pk_dist *D = A->dist;
  if (gnx) *gnx = D ? D->gnx : A->nx;
  if (gny) *gny = D ? D->gny : A->ny;
  if (i0) *i0 = D ? D->i0 : 0;
  if (nxl) *nxl = A->nx;
  if (j0) *j0 = D ? D->j0 : 0;
  if (nyl) *nyl = A->ny;
  if (px) *px = D ? D->px : 1;
  if (py) *py = D ? D->py : 1;
  return PKRYLOV_SUCCESS;
}

/** Copy block (rx, ry) between the global vector g and the block vector b (dir 0: b -> g, 1: g -> b). */
static void block_copy(const pk_dist *D, int rx, int ry, double *g, double *b, int dir) {
  const int64_t i0 = D->xoff[rx], nx = D->xoff[rx + 1] - i0, j0 = D->yoff[ry], ny = D->yoff[ry + 1] - j0;
  for (int64_t k = 0; k < D->nz; k++)
    for (int64_t j = 0; j < ny; j++) {
      double *gl = g + i0 + (int64_t)D->gnx * ((j0 + j) + (int64_t)D->gny * k), *bl = b + nx * (j + ny * k);
      if (dir == 0)
        memcpy(gl, bl, sizeof(double) * (size_t)nx);
      else
        memcpy(bl, gl, sizeof(double) * (size_t)nx);
    }
}

/** The common part of gather and scatter: checks (agreed), counts and displacements on root. */
static int gs_prepare(pkrylov_operator A, const char *func, int32_t root, const double *xl, const double *xg,
                      int **counts, int **displs) {
  pkrylov_context ctx = A->ctx;
  *counts = *displs = NULL;
  int e = PKRYLOV_SUCCESS;
  if (A->type != PKRYLOV_OPERATOR_THINSHELL && A->type != PKRYLOV_OPERATOR_STENCIL7)
    e = pk_error(ctx, PKRYLOV_ERR_UNSUPPORTED, func, "argument 'A' is not a grid or CSR operator");
  else if (root < 0 || root >= ctx->size)
    e = pk_error(ctx, PKRYLOV_ERR_INVALID_VALUE, func, "argument 'root' = %d is not a rank (0..%d)", root,
                 ctx->size - 1);
  else if (!A->dist && ctx->size > 1)
    e = pk_error(ctx, PKRYLOV_ERR_UNSUPPORTED, func,
                 "argument 'A' is not distributed (every rank holds the whole grid): nothing to gather");
  else if (!xl)
    e = pk_error(ctx, PKRYLOV_ERR_NULL_POINTER, func, "argument 'x_local' is NULL");
  else if (ctx->rank == root && !xg)
    e = pk_error(ctx, PKRYLOV_ERR_NULL_POINTER, func, "argument 'x_global' is NULL on the root rank %d", root);
  else if (A->dist && ctx->rank == root) {
    const pk_dist *D = A->dist;
    *counts = malloc(sizeof(int) * (size_t)ctx->size);
    *displs = malloc(sizeof(int) * (size_t)ctx->size);
    if (!*counts || !*displs) {
      e = pk_error(ctx, PKRYLOV_ERR_OUT_OF_MEMORY, func, "cannot allocate the gather tables");
    } else {
      int64_t off = 0;
      for (int r = 0; r < ctx->size; r++) {
        const int rx = r % D->px, ry = r / D->px;
        const int64_t cnt =
            (int64_t)(D->xoff[rx + 1] - D->xoff[rx]) * (D->yoff[ry + 1] - D->yoff[ry]) * D->nz;
        if (off + cnt > INT32_MAX) {
          e = pk_error(ctx, PKRYLOV_ERR_UNSUPPORTED, func,
                       "the global vector has more than 2^31 - 1 values: gather it in parts");
          break;
        }
        (*counts)[r] = (int)cnt;
        (*displs)[r] = (int)off;
        off += cnt;
      }
    }
  }
  e = pk_mpi_agree(ctx, e);
  if (e) {
    free(*counts);
    free(*displs);
    *counts = *displs = NULL;
  }
  return e;
}

/**
 * Gather (dir 0: the ranks' blocks x_local into x_global on root) or scatter (dir 1: x_global on root into
 * the blocks) of a grid operator's vector, in the global order (x fastest, then y, then the level).
 */
static int grid_gather_scatter(pkrylov_operator A, const char *func, int32_t root, double *x_local,
                               double *x_global, int dir) {
  int *counts, *displs;
  PK_CALL(gs_prepare(A, func, root, x_local, x_global, &counts, &displs));
  const pk_dist *D = A->dist;
  if (!D || A->ctx->size == 1) {
    if (!D)
      memcpy(dir == 0 ? x_global : x_local, dir == 0 ? x_local : x_global, sizeof(double) * (size_t)A->n);
    else
      block_copy(D, 0, 0, x_global, x_local, dir);
    free(counts);
    free(displs);
    return PKRYLOV_SUCCESS;
  }
  pkrylov_context ctx = A->ctx;
  double *tmp = NULL;
  int e = PKRYLOV_SUCCESS;
  if (ctx->rank == root) {
    tmp = malloc(sizeof(double) * (size_t)((int64_t)D->gnx * D->gny * D->nz));
    if (!tmp)
      e = pk_error(ctx, PKRYLOV_ERR_OUT_OF_MEMORY, func, "cannot allocate the %s buffer",
                   dir == 0 ? "gather" : "scatter");
    else if (dir == 1)
      for (int r = 0; r < ctx->size; r++) block_copy(D, r % D->px, r / D->px, x_global, tmp + displs[r], 1);
  }
  e = pk_mpi_agree(ctx, e);
  if (!e) {
    const pk_comm_ops *ops = pk_comm_ops_of(ctx);
    const int rc = dir == 0 ? ops->gatherv(pk_comm_of(ctx), x_local, (int)A->n, tmp, counts, displs,
                                           PK_COMM_DOUBLE, root)
                            : ops->scatterv(pk_comm_of(ctx), tmp, counts, displs, x_local, (int)A->n,
                                            PK_COMM_DOUBLE, root);
    if (rc != 0) e = pk_comm_error(ctx, func, dir == 0 ? "MPI_Gatherv" : "MPI_Scatterv", rc);
  }
  if (!e && dir == 0 && ctx->rank == root)
    for (int r = 0; r < ctx->size; r++) block_copy(D, r % D->px, r / D->px, x_global, tmp + displs[r], 0);
  free(tmp);
  free(counts);
  free(displs);
  return e;
}

int pkrylov_operator_gather(pkrylov_operator A, int32_t root, const double *x_local, double *x_global) {
  PK_CHECK(A != NULL, NULL, PKRYLOV_ERR_NULL_POINTER, "argument 'A' is NULL");
  if (A->type == PKRYLOV_OPERATOR_CSR) /* row blocks in rank order (dist_csr.c) */
    return pk_dist_csr_gather_scatter(A, __func__, root, x_local, x_global, 0);
  return grid_gather_scatter(A, __func__, root, (double *)x_local, x_global, 0);
}

int pkrylov_operator_scatter(pkrylov_operator A, int32_t root, const double *x_global, double *x_local) {
  PK_CHECK(A != NULL, NULL, PKRYLOV_ERR_NULL_POINTER, "argument 'A' is NULL");
  if (A->type == PKRYLOV_OPERATOR_CSR)
    return pk_dist_csr_gather_scatter(A, __func__, root, x_local, (double *)x_global, 1);
  return grid_gather_scatter(A, __func__, root, x_local, (double *)x_global, 1);
}

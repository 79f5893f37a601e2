/**
 * @file dist_csr.c
 * @brief CSR matrices distributed by blocks of rows (pkrylov_operator_create_csr_dist): the partition
 *        checks, the ghost columns and the exchange lists built once at creation, the product with the
 *        ghost exchange overlapped with the rows that need no ghost, gather/scatter in rank order.
 *
 * Storage: an ordinary CSR operator of the rank's nlocal rows (A->csr, 0-based, each row sorted by global
 * column) whose column indices address an extended vector
 *     xext = [ ghosts below the block (nglo) | the block's own nlocal values | ghosts above (nghi) ],
 * the ghosts in increasing global order. The map from global columns to xext is increasing, so every row
 * is stored, and summed, in increasing global column order, exactly as the single-rank CSR operator sums
 * it: the distributed product equals the single-rank product bitwise. A->csr.col_offset = nglo lets
 * operator.c's lookups (diagonal, column tridiagonal) address the block's own columns.
 *
 * Exchange lists: the ghosts, grouped by their owner (contiguous in xext, since the blocks are in rank
 * order), are what this rank receives; MPI_Alltoall of the counts and MPI_Alltoallv of the global indices
 * tell every rank which of its values each other rank needs (sidx). A product packs those values, posts
 * MPI_Irecv straight into xext's ghost slices and MPI_Isend, copies x into xext, computes the rows without
 * ghost entries, waits and computes the other rows.
 */
#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pk_comm.h"
#include "pk_impl.h"

/** The distributed part of a CSR operator (A->dist). */
typedef struct {
  int32_t kind; /* PK_DIST_CSR (first member: pk_dist_kind) */
  int nranks, rank;
  int64_t nglobal, first, nlocal;
  int64_t *rowoff;    /* nranks + 1: rank r owns rows [rowoff[r], rowoff[r+1]) */
  int64_t nglo, nghi; /* ghost columns below and above the block */
  double *xext;       /* nglo + nlocal + nghi */
  int64_t ninner, nouter;
  int64_t *rows;    /* the rows without ghost entries (ninner), then the others (nouter) */
  int nrecv, nsend; /* neighbours to receive from / send to */
  int *rrank, *srank;
  int64_t *roff, *rcnt; /* ghost slice of each source in xext */
  int64_t *soff, *scnt; /* slice of each destination in sbuf */
  int64_t *sidx;        /* local rows whose values the destinations need, destination by destination */
  double *sbuf;
  pk_comm_req *reqs; /* nrecv + nsend requests */
} pk_dist_csr;

void pk_dist_csr_free(void *dist) {
  pk_dist_csr *D = dist;
  if (!D)
    return;
  free(D->rowoff);
  free(D->xext);
  free(D->rows);
  free(D->rrank);
  free(D->srank);
  free(D->roff);
  free(D->rcnt);
  free(D->soff);
  free(D->scnt);
  free(D->sidx);
  free(D->sbuf);
  free(D->reqs);
  free(D);
}

/* ------------------------------------------------------------------------------------------------ */
/* Product                                                                                           */

/** Row r: the sum in stored (= increasing global column) order, as csr_apply_rows of operator.c. */
static inline double row_sum(const struct pkrylov_operator_s *A, const double *restrict xe, int64_t r) {
  const int64_t *restrict rp = A->csr.rowptr;
  const double *restrict v = A->csr.values;
  double s = 0.0;
  if (A->csr.colind32) {
    const int32_t *restrict ci = A->csr.colind32;
    for (int64_t p = rp[r]; p < rp[r + 1]; p++)
      s += v[p] * xe[ci[p]];
  } else {
    const int64_t *restrict ci = A->csr.colind64;
    for (int64_t p = rp[r]; p < rp[r + 1]; p++)
      s += v[p] * xe[ci[p]];
  }
  return s;
}

/** Rows rows[a..b) of y. */
static void rows_apply(const struct pkrylov_operator_s *A, const pk_dist_csr *D, double *y, int64_t a,
                       int64_t b) {
  const int nt = pk_num_threads(A->ctx);
  (void)nt; /* read by the OpenMP pragmas only */
  const double *xe = D->xext;
  const int64_t *rows = D->rows;
#ifdef _OPENMP
#pragma omp parallel for schedule(static) num_threads(nt) if (pk_par(b - a))
#endif
  for (int64_t q = a; q < b; q++)
    y[rows[q]] = row_sum(A, xe, rows[q]);
}

void pk_dist_csr_apply(const struct pkrylov_operator_s *A, const double *x, double *y) {
  struct pkrylov_operator_s *Wr = (struct pkrylov_operator_s *)A; /* heap object: the cast is defined */
  pk_dist_csr *D = A->dist;
  const int64_t n = A->n;
  if (!A->user.failed) {
    int e = PKRYLOV_SUCCESS;
    pk_comm_req *rq = D->reqs;
    int nreq = 0;
    if (A->ctx->mpi && D->nrecv + D->nsend > 0) {
      const pk_comm_ops *ops = pk_comm_ops_of(A->ctx);
      void *comm = pk_comm_of(A->ctx);
      for (int k = 0; k < D->nrecv && !e; k++) {
        int rc = ops->irecv(comm, D->xext + D->roff[k], (int)D->rcnt[k], PK_COMM_DOUBLE, D->rrank[k], 23,
                            &rq[nreq]);
        if (rc != 0)
          e = pk_comm_error(A->ctx, "distributed CSR product", "MPI_Irecv", rc);
        else
          nreq++;
      }
      const int64_t ns = D->nsend ? D->soff[D->nsend - 1] + D->scnt[D->nsend - 1] : 0;
      for (int64_t i = 0; i < ns; i++)
        D->sbuf[i] = x[D->sidx[i]];
      for (int k = 0; k < D->nsend && !e; k++) {
        int rc = ops->isend(comm, D->sbuf + D->soff[k], (int)D->scnt[k], PK_COMM_DOUBLE, D->srank[k], 23,
                            &rq[nreq]);
        if (rc != 0)
          e = pk_comm_error(A->ctx, "distributed CSR product", "MPI_Isend", rc);
        else
          nreq++;
      }
    }
    memcpy(D->xext + D->nglo, x, sizeof(double) * (size_t)n);
    if (!e)
      rows_apply(A, D, y, 0, D->ninner); /* while the ghosts travel */
    if (nreq > 0) {
      int rc = pk_comm_ops_of(A->ctx)->waitall(nreq, rq);
      if (rc != 0 && !e)
        e = pk_comm_error(A->ctx, "distributed CSR product", "MPI_Waitall", rc);
    }
    if (!e) {
      rows_apply(A, D, y, D->ninner, D->ninner + D->nouter);
      return;
    }
    Wr->user.failed = 1; /* the message is in the context (pk_comm_error) */
  }
  for (int64_t i = 0; i < n; i++)
    y[i] = NAN; /* a caller that does not check the flag sees a NaN */
}

/* ------------------------------------------------------------------------------------------------ */
/* Creation                                                                                          */

/** all[r*count + c] = rank r's mine[c] (int64; a copy on one rank). */
static int allgather_i64(pkrylov_context ctx, const int64_t *mine, int count, int64_t *all) {
  if (ctx->mpi) {
    int rc = pk_comm_ops_of(ctx)->allgather(pk_comm_of(ctx), mine, count, PK_COMM_INT64, all);
    return rc == 0 ? PKRYLOV_SUCCESS
                   : pk_comm_error(ctx, "pkrylov_operator_create_csr_dist", "MPI_Allgather", rc);
  }
  memcpy(all, mine, sizeof(int64_t) * (size_t)count);
  return PKRYLOV_SUCCESS;
}

/** The local checks of the caller's arrays (as pkrylov_operator_create_csr makes them, global columns). */
static int check_arrays(pkrylov_context ctx, const char *func, int64_t n_global, int64_t nlocal, int32_t ib,
                        const int64_t *rowptr, const int64_t *colind, const double *values) {
  const int64_t base = ib;
  if (rowptr[0] != base)
    return pk_error(ctx, PKRYLOV_ERR_INDEX_OUT_OF_RANGE, func,
                    "argument 'rowptr': rowptr[0] = %lld (local row 0) must equal index_base = %d",
                    (long long)rowptr[0], ib);
  for (int64_t r = 0; r < nlocal; r++)
    if (rowptr[r + 1] < rowptr[r])
      return pk_error(
          ctx, PKRYLOV_ERR_INDEX_OUT_OF_RANGE, func,
          "argument 'rowptr' decreases at local row %lld: rowptr[%lld] = %lld < rowptr[%lld] = %lld",
          (long long)r, (long long)(r + 1), (long long)rowptr[r + 1], (long long)r, (long long)rowptr[r]);
  const int64_t nnz = rowptr[nlocal] - base;
  for (int64_t p = 0; p < nnz; p++) {
    if (colind[p] < base || colind[p] >= n_global + base)
      return pk_error(ctx, PKRYLOV_ERR_INDEX_OUT_OF_RANGE, func,
                      "argument 'colind': colind[%lld] = %lld is outside the global columns [%lld, %lld)",
                      (long long)p, (long long)colind[p], (long long)base, (long long)(n_global + base));
    if (!isfinite(values[p]))
      return pk_error(ctx, PKRYLOV_ERR_NOT_FINITE, func, "argument 'values': values[%lld] = %g is not finite",
                      (long long)p, values[p]);
  }
  return PKRYLOV_SUCCESS;
}

/** The partition table of every rank (nlocal, first_row or -1, n_global): the same verdict everywhere. */
static int check_partition(pkrylov_context ctx, const char *func, const int64_t *all, int size, int32_t ib,
                           int64_t *rowoff) {
  rowoff[0] = 0;
  for (int r = 0; r < size; r++) {
    const int64_t nl = all[3 * r], fr = all[3 * r + 1], ng = all[3 * r + 2];
    if (ng != all[2])
      return pk_error(
          ctx, PKRYLOV_ERR_SIZE_MISMATCH, func,
          "argument 'n_global' = %lld on rank %d but %lld on rank 0 (every rank passes the global size)",
          (long long)ng, r, (long long)all[2]);
    if (fr >= 0 && fr != rowoff[r])
      return pk_error(
          ctx, PKRYLOV_ERR_SIZE_MISMATCH, func,
          "argument 'first_row' = %lld on rank %d, but the blocks of the ranks before it end at row "
          "%lld: %s of %lld rows (the blocks must tile the rows in rank order)",
          (long long)(fr + ib), r, (long long)(rowoff[r] + ib), fr > rowoff[r] ? "a gap" : "an overlap",
          (long long)(fr > rowoff[r] ? fr - rowoff[r] : rowoff[r] - fr));
    rowoff[r + 1] = rowoff[r] + nl;
  }
  if (rowoff[size] != all[2])
    return pk_error(ctx, PKRYLOV_ERR_SIZE_MISMATCH, func,
                    "the ranks' blocks ('nlocal') have %lld rows in all, but 'n_global' = %lld",
                    (long long)rowoff[size], (long long)all[2]);
  return PKRYLOV_SUCCESS;
}

typedef struct {
  int64_t col;
  double val;
} cv_pair;

static int cv_cmp(const void *a, const void *b) {
  int64_t ca = ((const cv_pair *)a)->col, cb = ((const cv_pair *)b)->col;
  return (ca > cb) - (ca < cb);
}

static int i64_cmp(const void *a, const void *b) {
  int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
  return (x > y) - (x < y);
}

/** Position of v in the increasing array a[0..n) (v is there). */
static int64_t find_i64(const int64_t *a, int64_t n, int64_t v) {
  int64_t lo = 0, hi = n;
  while (lo < hi) {
    const int64_t mid = lo + (hi - lo) / 2;
    if (a[mid] < v)
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo;
}

/**
 * This rank's part: the sorted local copy with extended column indices, the ghosts, the row classes and
 * the receive lists (local work only; errors recorded, not agreed). *ghost_out: the ghosts' global columns.
 */
static int build_local(pkrylov_context ctx, const char *func, struct pkrylov_operator_s *B, pk_dist_csr *D,
                       int32_t ib, const int64_t *rowptr, const int64_t *colind, const double *values,
                       int64_t **ghost_out) {
  const int64_t nl = D->nlocal, first = D->first, base = ib, nnz = rowptr[nl] - base;
  *ghost_out = NULL;
  cv_pair *pr = malloc(sizeof(cv_pair) * (size_t)(nnz ? nnz : 1));
  int64_t *gh = malloc(sizeof(int64_t) * (size_t)(nnz ? nnz : 1));
  B->csr.rowptr = malloc(sizeof(int64_t) * (size_t)(nl + 1));
  B->csr.values = malloc(sizeof(double) * (size_t)(nnz ? nnz : 1));
  D->rows = malloc(sizeof(int64_t) * (size_t)nl);
  if (!pr || !gh || !B->csr.rowptr || !B->csr.values || !D->rows) {
    free(pr), free(gh);
    return pk_error(ctx, PKRYLOV_ERR_OUT_OF_MEMORY, func, "cannot allocate the local copy (nnz = %lld)",
                    (long long)nnz);
  }
  int64_t ng = 0;
  for (int64_t r = 0; r <= nl; r++)
    B->csr.rowptr[r] = rowptr[r] - base;
  for (int64_t r = 0; r < nl; r++) {
    const int64_t p0 = B->csr.rowptr[r], p1 = B->csr.rowptr[r + 1];
    int sorted = 1;
    for (int64_t p = p0; p < p1; p++) {
      pr[p] = (cv_pair){colind[p] - base, values[p]};
      if (p > p0 && pr[p].col < pr[p - 1].col)
        sorted = 0;
    }
    if (!sorted)
      qsort(pr + p0, (size_t)(p1 - p0), sizeof(cv_pair), cv_cmp);
    for (int64_t p = p0; p < p1; p++) {
      if (p > p0 && pr[p].col == pr[p - 1].col) {
        const int64_t col = pr[p].col;
        free(pr), free(gh);
        return pk_error(ctx, PKRYLOV_ERR_DUPLICATE_ENTRY, func,
                        "arguments 'colind'/'rowptr': entry (global row %lld, column %lld) (numbered from "
                        "index_base %d) appears more than once",
                        (long long)(first + r + base), (long long)(col + base), ib);
      }
      if (pr[p].col < first || pr[p].col >= first + nl)
        gh[ng++] = pr[p].col;
    }
  }
  /* the ghosts: sorted, unique */
  qsort(gh, (size_t)ng, sizeof(int64_t), i64_cmp);
  int64_t u = 0;
  for (int64_t q = 0; q < ng; q++)
    if (u == 0 || gh[q] != gh[u - 1])
      gh[u++] = gh[q];
  ng = u;
  D->nglo = find_i64(gh, ng, first);
  D->nghi = ng - D->nglo;
  const int64_t next = D->nglo + nl + D->nghi;
  D->xext = calloc((size_t)next, sizeof(double));
  if (next <= INT32_MAX)
    B->csr.colind32 = malloc(sizeof(int32_t) * (size_t)(nnz ? nnz : 1));
  else
    B->csr.colind64 = malloc(sizeof(int64_t) * (size_t)(nnz ? nnz : 1));
  if (!D->xext || !(B->csr.colind32 || B->csr.colind64)) {
    free(pr), free(gh);
    return pk_error(ctx, PKRYLOV_ERR_OUT_OF_MEMORY, func, "cannot allocate the column indices (nnz = %lld)",
                    (long long)nnz);
  }
  B->csr.col_offset = D->nglo;
  int64_t ni = 0, no = 0;
  for (int64_t r = 0; r < nl; r++) {
    int outer = 0;
    for (int64_t p = B->csr.rowptr[r]; p < B->csr.rowptr[r + 1]; p++) {
      const int64_t c = pr[p].col;
      int64_t e;
      if (c < first)
        e = find_i64(gh, D->nglo, c), outer = 1;
      else if (c >= first + nl)
        e = nl + D->nglo + find_i64(gh + D->nglo, D->nghi, c), outer = 1;
      else
        e = D->nglo + (c - first);
      if (B->csr.colind32)
        B->csr.colind32[p] = (int32_t)e;
      else
        B->csr.colind64[p] = e;
      B->csr.values[p] = pr[p].val;
    }
    if (!outer)
      D->rows[ni++] = r;
  }
  D->ninner = ni;
  for (int64_t r = 0, q = 0; r < nl; r++) { /* the outer rows after the inner ones, in order */
    if (q < ni && D->rows[q] == r) {
      q++;
      continue;
    }
    D->rows[ni + no++] = r;
  }
  D->nouter = no;
  free(pr);
  /* receive lists: the ghosts by owner (rank order, so each owner's ghosts are one slice of xext) */
  D->rrank = malloc(sizeof(int) * (size_t)(D->nranks ? D->nranks : 1));
  D->roff = malloc(sizeof(int64_t) * (size_t)D->nranks);
  D->rcnt = malloc(sizeof(int64_t) * (size_t)D->nranks);
  if (!D->rrank || !D->roff || !D->rcnt) {
    free(gh);
    return pk_error(ctx, PKRYLOV_ERR_OUT_OF_MEMORY, func, "cannot allocate the exchange lists");
  }
  D->nrecv = 0;
  for (int64_t q = 0, owner = 0; q < ng;) {
    while (gh[q] >= D->rowoff[owner + 1])
      owner++;
    int64_t q1 = q;
    while (q1 < ng && gh[q1] < D->rowoff[owner + 1])
      q1++;
    if (q1 - q > INT_MAX) {
      free(gh);
      return pk_error(ctx, PKRYLOV_ERR_UNSUPPORTED, func, "more than 2^31 - 1 ghost values from rank %lld",
                      (long long)owner);
    }
    D->rrank[D->nrecv] = (int)owner;
    D->roff[D->nrecv] = q < D->nglo ? q : q + nl; /* xext position */
    D->rcnt[D->nrecv++] = q1 - q;
    q = q1;
  }
  *ghost_out = gh;
  return PKRYLOV_SUCCESS;
}

/** The send lists from the receive lists of all ranks (collective: every rank calls it). */
static int build_send(pkrylov_context ctx, const char *func, pk_dist_csr *D, const int64_t *gh) {
  if (!ctx->mpi)
    return PKRYLOV_SUCCESS;
  const int P = D->nranks;
  int *need = calloc((size_t)P, sizeof(int)), *give = calloc((size_t)P, sizeof(int));
  int *nd = calloc((size_t)P, sizeof(int)), *gd = calloc((size_t)P, sizeof(int));
  int e = (need && give && nd && gd)
              ? PKRYLOV_SUCCESS
              : pk_error(ctx, PKRYLOV_ERR_OUT_OF_MEMORY, func, "cannot allocate the counts");
  if (!e)
    for (int k = 0; k < D->nrecv; k++)
      need[D->rrank[k]] = (int)D->rcnt[k];
  e = pk_mpi_agree(ctx, e);
  const pk_comm_ops *ops = pk_comm_ops_of(ctx);
  void *comm = pk_comm_of(ctx);
  int rc;
  if (!e && (rc = ops->alltoall(comm, need, 1, PK_COMM_INT, give)) != 0)
    e = pk_comm_error(ctx, func, "MPI_Alltoall", rc);
  int64_t total = 0;
  if (!e) {
    for (int r = 0; r < P; r++) {
      nd[r] = r ? nd[r - 1] + need[r - 1] : 0; /* the ghosts are in owner order: displacements add up */
      gd[r] = (int)total;
      total += give[r];
    }
    if (total > INT_MAX)
      e = pk_error(ctx, PKRYLOV_ERR_UNSUPPORTED, func, "more than 2^31 - 1 values to send per product");
  }
  if (!e) {
    D->sidx = malloc(sizeof(int64_t) * (size_t)(total ? total : 1));
    D->sbuf = malloc(sizeof(double) * (size_t)(total ? total : 1));
    D->srank = malloc(sizeof(int) * (size_t)P);
    D->soff = malloc(sizeof(int64_t) * (size_t)P);
    D->scnt = malloc(sizeof(int64_t) * (size_t)P);
    D->reqs = malloc(sizeof(pk_comm_req) * (size_t)(2 * P));
    if (!D->sidx || !D->sbuf || !D->srank || !D->soff || !D->scnt || !D->reqs)
      e = pk_error(ctx, PKRYLOV_ERR_OUT_OF_MEMORY, func, "cannot allocate the send lists (%lld values)",
                   (long long)total);
  }
  e = pk_mpi_agree(ctx, e);
  if (!e && (rc = ops->alltoallv(comm, gh, need, nd, D->sidx, give, gd, PK_COMM_INT64)) != 0)
    e = pk_comm_error(ctx, func, "MPI_Alltoallv", rc);
  if (!e) {
    D->nsend = 0;
    for (int r = 0; r < P; r++)
      if (give[r] > 0) {
        D->srank[D->nsend] = r;
        D->soff[D->nsend] = gd[r];
        D->scnt[D->nsend++] = give[r];
      }
    for (int64_t i = 0; i < total && !e; i++) {
      D->sidx[i] -= D->first;
      if (D->sidx[i] < 0 || D->sidx[i] >= D->nlocal)
        e = pk_error(ctx, PKRYLOV_ERR_INTERNAL, func, "a rank asked for row %lld, not in this block",
                     (long long)(D->sidx[i] + D->first));
    }
  }
  free(need), free(give), free(nd), free(gd);
  return pk_mpi_agree(ctx, e);
}

int pkrylov_operator_create_csr_dist(pkrylov_context ctx, int64_t n_global, int64_t first_row, int64_t nlocal,
                                     int32_t index_base, const int64_t *rowptr, const int64_t *colind,
                                     const double *values, pkrylov_operator *A) {
  PK_CHECK(ctx != NULL, NULL, PKRYLOV_ERR_NULL_POINTER, "argument 'ctx' is NULL");
  const char *func = __func__;
  int e = PKRYLOV_SUCCESS;
  if (!A || !rowptr || !colind || !values)
    e = pk_error(ctx, PKRYLOV_ERR_NULL_POINTER, func, "argument '%s' is NULL",
                 !A        ? "A"
                 : !rowptr ? "rowptr"
                 : !colind ? "colind"
                           : "values");
  else if (index_base != 0 && index_base != 1)
    e = pk_error(ctx, PKRYLOV_ERR_INVALID_VALUE, func, "argument 'index_base' = %d must be 0 or 1",
                 index_base);
  else if (n_global < 1)
    e = pk_error(ctx, PKRYLOV_ERR_INVALID_SIZE, func, "argument 'n_global' = %lld must be > 0",
                 (long long)n_global);
  else if (nlocal < 1 || nlocal > n_global)
    e = pk_error(ctx, PKRYLOV_ERR_INVALID_SIZE, func,
                 "argument 'nlocal' = %lld: every rank needs between 1 and n_global = %lld rows",
                 (long long)nlocal, (long long)n_global);
  else if (first_row != -1 && (first_row < index_base || first_row - index_base > n_global - nlocal))
    e = pk_error(ctx, PKRYLOV_ERR_INVALID_VALUE, func,
                 "argument 'first_row' = %lld: the block of %lld rows must lie in [%d, %lld) (or pass -1)",
                 (long long)first_row, (long long)nlocal, index_base, (long long)(n_global + index_base));
  else if (ctx->be->device)
    e = pk_error(ctx, PKRYLOV_ERR_UNSUPPORTED, func,
                 "argument 'ctx' runs on the %s backend: distributed operators run on the CPU backend only "
                 "for now", ctx->be->name);
  else
    e = check_arrays(ctx, func, n_global, nlocal, index_base, rowptr, colind, values);
  PK_CALL(pk_mpi_agree(ctx, e));
  /* the partition: every rank gets every rank's (nlocal, first_row, n_global) and checks the same table */
  const int size = ctx->size;
  int64_t mine[3] = {nlocal, first_row == -1 ? -1 : first_row - index_base, n_global};
  int64_t *all = malloc(sizeof(int64_t) * 3 * (size_t)size);
  pk_dist_csr *D = calloc(1, sizeof *D);
  if (D)
    D->rowoff = malloc(sizeof(int64_t) * ((size_t)size + 1));
  e = (all && D && D->rowoff)
          ? PKRYLOV_SUCCESS
          : pk_error(ctx, PKRYLOV_ERR_OUT_OF_MEMORY, func, "cannot allocate the partition table");
  e = pk_mpi_agree(ctx, e);
  if (!e)
    e = allgather_i64(ctx, mine, 3, all);
  if (!e)
    e = check_partition(ctx, func, all, size, index_base, D->rowoff); /* same verdict on every rank */
  free(all);
  if (e) {
    pk_dist_csr_free(D);
    return e;
  }
  D->kind = PK_DIST_CSR;
  D->nranks = size;
  D->rank = ctx->rank;
  D->nglobal = n_global;
  D->first = D->rowoff[ctx->rank];
  D->nlocal = nlocal;
  struct pkrylov_operator_s *B = calloc(1, sizeof *B);
  int64_t *gh = NULL;
  if (!B) {
    e = pk_error(ctx, PKRYLOV_ERR_OUT_OF_MEMORY, func, "cannot allocate the operator");
  } else {
    B->ctx = ctx;
    B->type = PKRYLOV_OPERATOR_CSR;
    B->n = nlocal;
    B->nnz = rowptr[nlocal] - index_base;
    B->dist = D;
    B->user.scratch = malloc(sizeof(double) * (size_t)nlocal);
    if (!B->user.scratch)
      e = pk_error(ctx, PKRYLOV_ERR_OUT_OF_MEMORY, func, "cannot allocate the work vector of %lld values",
                   (long long)nlocal);
    else
      e = build_local(ctx, func, B, D, index_base, rowptr, colind, values, &gh);
  }
  e = pk_mpi_agree(ctx, e);
  if (!e)
    e = build_send(ctx, func, D, gh); /* collective; agrees itself */
  free(gh);
  if (e) {
    if (B)
      pk_op_free(B); /* frees D through B->dist */
    else
      pk_dist_csr_free(D);
    return e;
  }
  return pk_op_register(ctx, B, A);
}

/* ------------------------------------------------------------------------------------------------ */
/* Queries, gather, scatter, the column preconditioner's condition                                   */

int pkrylov_operator_get_row_block(pkrylov_operator A, int64_t *n_global, int64_t *first_row,
                                   int64_t *nlocal) {
  PK_CHECK(A != NULL, NULL, PKRYLOV_ERR_NULL_POINTER, "argument 'A' is NULL");
  PK_CHECK(A->type == PKRYLOV_OPERATOR_CSR, A->ctx, PKRYLOV_ERR_UNSUPPORTED,
           "argument 'A' is not a CSR operator (grid operators: pkrylov_operator_get_dist_info)");
  const pk_dist_csr *D = A->dist;
  if (n_global)
    *n_global = D ? D->nglobal : A->n;
  if (first_row)
    *first_row = D ? D->first : 0;
  if (nlocal)
    *nlocal = A->n;
  return PKRYLOV_SUCCESS;
}

int pk_dist_csr_check_columns(const struct pkrylov_operator_s *A, const char *func, int32_t levels,
                              int32_t layout) {
  const pk_dist_csr *D = A->dist;
  if (!D || D->nranks == 1 || levels < 1)
    return PKRYLOV_SUCCESS; /* the usual checks follow */
  if (layout == PKRYLOV_LAYOUT_KSLOW)
    return pk_error(
        A->ctx, PKRYLOV_ERR_LAYOUT, func,
        "argument 'layout' = KSLOW: on a CSR operator distributed over %d ranks by rows, a k-slow "
        "column (cell c + ncols*k) spans the blocks of several ranks; the column preconditioner "
        "needs whole columns per rank: number the unknowns k-fast (levels contiguous, layout KFAST) "
        "with blocks of whole columns, or use the Jacobi preconditioner",
        D->nranks);
  if (layout == PKRYLOV_LAYOUT_KFAST)
    for (int r = 0; r < D->nranks; r++)
      if (D->rowoff[r] % levels != 0 || D->rowoff[r + 1] % levels != 0)
        return pk_error(A->ctx, PKRYLOV_ERR_LAYOUT, func,
                        "argument 'levels' = %d: rank %d's rows [%lld, %lld) do not hold whole columns (each "
                        "block of a distributed CSR must start and end at a multiple of the levels for the "
                        "column preconditioner)",
                        levels, r, (long long)D->rowoff[r], (long long)D->rowoff[r + 1]);
  return PKRYLOV_SUCCESS;
}

int pk_dist_csr_gather_scatter(const struct pkrylov_operator_s *A, const char *func, int32_t root,
                               const double *x_local, double *x_global, int dir) {
  pkrylov_context ctx = A->ctx;
  const pk_dist_csr *D = A->dist;
  int e = PKRYLOV_SUCCESS;
  if (root < 0 || root >= ctx->size)
    e = pk_error(ctx, PKRYLOV_ERR_INVALID_VALUE, func, "argument 'root' = %d is not a rank (0..%d)", root,
                 ctx->size - 1);
  else if (!D && ctx->size > 1)
    e = pk_error(ctx, PKRYLOV_ERR_UNSUPPORTED, func,
                 "argument 'A' is not distributed (every rank holds the whole matrix): nothing to gather");
  else if (!x_local)
    e = pk_error(ctx, PKRYLOV_ERR_NULL_POINTER, func, "argument 'x_local' is NULL");
  else if (ctx->rank == root && !x_global)
    e = pk_error(ctx, PKRYLOV_ERR_NULL_POINTER, func, "argument 'x_global' is NULL on the root rank %d",
                 root);
  else if (D && D->nglobal > INT_MAX)
    e = pk_error(ctx, PKRYLOV_ERR_UNSUPPORTED, func,
                 "the global vector has more than 2^31 - 1 values: gather it in parts");
  PK_CALL(pk_mpi_agree(ctx, e));
  if (ctx->size == 1) {
    if (dir == 0)
      memcpy(x_global, x_local, sizeof(double) * (size_t)A->n);
    else
      memcpy((double *)x_local, x_global, sizeof(double) * (size_t)A->n);
    return PKRYLOV_SUCCESS;
  }
  int *counts = NULL, *displs = NULL;
  if (ctx->rank == root) {
    counts = malloc(sizeof(int) * (size_t)ctx->size);
    displs = malloc(sizeof(int) * (size_t)ctx->size);
    if (!counts || !displs)
      e = pk_error(ctx, PKRYLOV_ERR_OUT_OF_MEMORY, func, "cannot allocate the gather tables");
    else
      for (int r = 0; r < ctx->size; r++) {
        counts[r] = (int)(D->rowoff[r + 1] - D->rowoff[r]);
        displs[r] = (int)D->rowoff[r];
      }
  }
  e = pk_mpi_agree(ctx, e);
  if (!e) {
    const pk_comm_ops *ops = pk_comm_ops_of(ctx);
    int rc;
    if (dir == 0)
      rc = ops->gatherv(pk_comm_of(ctx), x_local, (int)A->n, x_global, counts, displs, PK_COMM_DOUBLE, root);
    else
      rc = ops->scatterv(pk_comm_of(ctx), x_global, counts, displs, (double *)x_local, (int)A->n,
                         PK_COMM_DOUBLE, root);
    if (rc != 0)
      e = pk_comm_error(ctx, func, dir == 0 ? "MPI_Gatherv" : "MPI_Scatterv", rc);
  }
  free(counts);
  free(displs);
  return e;
}

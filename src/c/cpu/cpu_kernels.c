/**
 * @file cpu_kernels.c
 * @brief The fused loops of the solvers on the CPU backend.
 *
 * Each function is one pass over memory, written the way the GPU kernels fuse them: the vector updates
 * that sit between two global reductions, the operator or preconditioner application, and the local
 * partial sums of the next reduction. On the CPU a "fused" loop works chunk by chunk (a chunk of rows,
 * or a chunk of vertical columns for the column preconditioner) so that the data a chunk touches stays
 * in cache between the sub-steps and every vector is streamed from memory once.
 *
 * Determinism: chunk boundaries depend on the problem only; each chunk stores its partial sums in its
 * own slot of the caller's scratch array and pk_sum_partials() adds the slots in chunk order, so results
 * do not depend on the number of threads. The returned sums are local: the solver makes them global
 * through reduce.c.
 *
 * Reproducible mode: a step given `xacc` (count * PK_XACC_LEN int64, the step's number of sums) also adds
 * the exact local sums of its pairs there, chunk by chunk while the chunk is in cache (pk_xdot: one
 * expansion per sum and thread, merged as integers at the end of the region; normalised on return), so
 * the exact sums cost no second pass over memory. The same terms as pk_allreduce_dots on the whole
 * vectors: the same exact sums.
 *
 * User callbacks (pkrylov_operator_create_user, pkrylov_precond_create_user) work on whole vectors, so a
 * step applies them once before its chunk loop (the operator into its work vector A->user.scratch) and
 * the chunk loop reads the result (so does a stencil with a halo exchange, whose exchange is called once
 * per product: pk_op_whole_vector()); the arithmetic per element and the chunks of the sums are those of the
 * other kinds, so a user routine computing the same products gives bitwise the same iterates.
 */
#include <string.h>

#include "pk_impl.h"

int64_t pk_cpu_scratch_size(int64_t n, const struct pkrylov_precond_s *M) {
  int64_t nch = (n + PK_ROW_CHUNK - 1) / PK_ROW_CHUNK;
  if (M) {
    const int64_t cw = pk_pc_chunk_cols(M), ncc = (M->ncols + cw - 1) / cw;
    if (ncc > nch) nch = ncc;
  }
  return PK_RR_NV * nch; /* pipelined CG with the automatic residual replacement: the most sums per chunk */
}

/** Reproducible mode: the exact local sums of the np pairs (a[j], b[j]) over the rows [i0, i0 + len) of nrun
 *  runs stride apart, added to the thread's X. */
static inline void pk_chunk_xdots(pk_xdot *X, int np, const double *const *a, const double *const *b, int64_t i0,
                                  int64_t len, int64_t nrun, int64_t stride) {
  for (int j = 0; j < np; j++) pk_xdot_add(X, j, a[j], b[j], NULL, 0, i0, len, nrun, stride);
}

/** The step's exact accumulators zeroed (before its region) or normalised (after it). */
static void pk_xacc_zero(int64_t *xacc, int np) {
  if (xacc) memset(xacc, 0, sizeof(int64_t) * PK_XACC_LEN * (size_t)np);
}
static void pk_xacc_done(int64_t *xacc, int np) {
  if (xacc)
    for (int j = 0; j < np; j++) pk_xacc_normalize(xacc + (int64_t)j * PK_XACC_LEN);
}

/** Row range of chunk c of PK_ROW_CHUNK rows. */
static inline void pk_row_chunk(int64_t c, int64_t n, int64_t *i0, int64_t *i1) {
  *i0 = c * PK_ROW_CHUNK;
  *i1 = *i0 + PK_ROW_CHUNK < n ? *i0 + PK_ROW_CHUNK : n;
}

void pk_cpu_dot(pkrylov_context ctx, int64_t n, const double *x, const double *y, double *part,
                double *out) {
  const int nt = pk_num_threads(ctx);
  (void)nt; /* read by the OpenMP pragmas only */
  const int64_t nch = (n + PK_ROW_CHUNK - 1) / PK_ROW_CHUNK;
#pragma omp parallel for schedule(static) num_threads(nt) if (pk_par(n))
  for (int64_t c = 0; c < nch; c++) {
    int64_t i0, i1;
    pk_row_chunk(c, n, &i0, &i1);
    double t = 0;
    for (int64_t i = i0; i < i1; i++) t += x[i] * y[i];
    part[c] = t;
  }
  pk_sum_partials(part, nch, 1, out);
}

/**
 * Operators that can only be applied to a whole vector (user callbacks, the halo-exchange stencil): y = A x
 * into `y` once, before a chunk loop; returns y, or NULL for operators applied chunk by chunk.
 */
static const double *pk_whole_product(const struct pkrylov_operator_s *A, const double *x, double *y) {
  if (!pk_op_whole_vector(A)) return NULL;
  pk_op_apply_all(A, x, y);
  return y;
}

/** y[i0..i1) = (A x)[i0..i1): copied from the whole-vector product when there is one, else row by row. */
static inline void pk_chunk_product(const struct pkrylov_operator_s *A, const double *x, const double *whole,
                                    double *y, int64_t i0, int64_t i1) {
  if (whole == y) return;
  if (whole)
    memcpy(y + i0, whole + i0, sizeof(double) * (size_t)(i1 - i0));
  else
    pk_op_apply_rows(A, x, y, i0, i1);
}

void pk_cpu_residual(const struct pkrylov_operator_s *A, const double *b, const double *x, double *r,
                     double *part, double *out, int64_t *xacc) {
  const int64_t n = A->n, nch = (n + PK_ROW_CHUNK - 1) / PK_ROW_CHUNK;
  const uint8_t *wet = A->wet;
  const int nt = pk_num_threads(A->ctx);
  (void)nt; /* read by the OpenMP pragmas only */
  const double *ax = pk_whole_product(A, x, r); /* r = A x once, for whole-vector operators */
  const double *xa[1] = {r};
  pk_xacc_zero(xacc, 1);
#pragma omp parallel num_threads(nt) if (pk_par(n))
  {
    pk_xdot X;
    if (xacc) pk_xdot_init(&X, 1);
#pragma omp for schedule(static)
    for (int64_t c = 0; c < nch; c++) {
      int64_t i0, i1;
      pk_row_chunk(c, n, &i0, &i1);
      pk_chunk_product(A, x, ax, r, i0, i1); /* r = A x on the chunk */
      double t = 0;
      for (int64_t i = i0; i < i1; i++) {
        /* r = b - A x, zero at dry cells (b is ignored there) */
        const double ri = (wet && !wet[i]) ? 0.0 : b[i] - r[i];
        r[i] = ri;
        t += ri * ri;
      }
      part[c] = t;
      if (xacc) pk_chunk_xdots(&X, 1, xa, xa, i0, i1 - i0, 1, 0);
    }
    if (xacc) pk_xdot_merge(&X, xacc);
  }
  pk_xacc_done(xacc, 1);
  pk_sum_partials(part, nch, 1, out);
}

/**
 * Visit the cells of columns [c0, c1) of M's column structure: levels outer for KSLOW (so the inner loop
 * over neighbouring columns is contiguous), columns outer for KFAST (levels contiguous).
 */
#define PK_FOR_COLUMN_CELLS(M, c0, c1, cell, body)                                                 \
  do {                                                                                             \
    if ((M)->layout == PKRYLOV_LAYOUT_KFAST) {                                                     \
      for (int64_t cell = (c0) * (M)->nz; cell < (c1) * (M)->nz; cell++) body;                     \
    } else {                                                                                       \
      for (int64_t k_ = 0; k_ < (M)->nz; k_++) {                                                   \
        const int64_t base_ = k_ * (M)->lev_stride;                                                \
        for (int64_t cell = base_ + (c0); cell < base_ + (c1); cell++) body;                       \
      }                                                                                            \
    }                                                                                              \
  } while (0)

void pk_cpu_cg_precond_step(pkrylov_context ctx, const struct pkrylov_precond_s *M, int64_t n, double alpha, double *r,
                            const double *q, double *z, double *part, double *out, int64_t *xacc) {
  const int nt = pk_num_threads(ctx);
  (void)nt; /* read by the OpenMP pragmas only */
  const double *xa[2] = {r, r}, *xb[2] = {z, r}; /* (r, z), (r, r) */
  pk_xacc_zero(xacc, 2);
  if (!M || M->type == PKRYLOV_PRECOND_NONE) {
    const int64_t nch = (n + PK_ROW_CHUNK - 1) / PK_ROW_CHUNK;
#pragma omp parallel num_threads(nt) if (pk_par(n))
    {
      pk_xdot X;
      if (xacc) pk_xdot_init(&X, 2);
#pragma omp for schedule(static)
      for (int64_t c = 0; c < nch; c++) {
        int64_t i0, i1;
        pk_row_chunk(c, n, &i0, &i1);
        double t = 0;
        for (int64_t i = i0; i < i1; i++) {
          /* r -= alpha q; z = r; (r, z) = (r, r) */
          const double ri = r[i] - alpha * q[i];
          r[i] = ri;
          z[i] = ri;
          t += ri * ri;
        }
        part[2 * c] = part[2 * c + 1] = t;
        if (xacc) pk_chunk_xdots(&X, 2, xa, xb, i0, i1 - i0, 1, 0);
      }
      if (xacc) pk_xdot_merge(&X, xacc);
    }
    pk_xacc_done(xacc, 2);
    pk_sum_partials(part, nch, 2, out);
    return;
  }
  if (pk_pc_whole_vector(M)) {
    /* the caller's routine (or the approximate inverse, which reads the neighbours of r) works on whole
       vectors: r -= alpha q; z = M^-1 r; then the dots, by row chunks (the chunks of NONE and JACOBI,
       whose column chunks are these row chunks) */
    const int64_t nch = (n + PK_ROW_CHUNK - 1) / PK_ROW_CHUNK;
#pragma omp parallel for schedule(static) num_threads(nt) if (pk_par(n))
    for (int64_t c = 0; c < nch; c++) {
      int64_t i0, i1;
      pk_row_chunk(c, n, &i0, &i1);
      for (int64_t i = i0; i < i1; i++) r[i] -= alpha * q[i];
    }
    pk_pc_apply_all(M, r, z);
#pragma omp parallel num_threads(nt) if (pk_par(n))
    {
      pk_xdot X;
      if (xacc) pk_xdot_init(&X, 2);
#pragma omp for schedule(static)
      for (int64_t c = 0; c < nch; c++) {
        int64_t i0, i1;
        pk_row_chunk(c, n, &i0, &i1);
        if (xacc) { /* the exact sums replace the partials */
          pk_chunk_xdots(&X, 2, xa, xb, i0, i1 - i0, 1, 0);
          continue;
        }
        double t0 = 0, t1 = 0;
        for (int64_t i = i0; i < i1; i++) { /* (r, z), (r, r) */
          t0 += r[i] * z[i];
          t1 += r[i] * r[i];
        }
        part[2 * c] = t0;
        part[2 * c + 1] = t1;
      }
      if (xacc) pk_xdot_merge(&X, xacc);
    }
    pk_xacc_done(xacc, 2);
    if (!xacc) pk_sum_partials(part, nch, 2, out);
    return;
  }
  /* Column chunks: r -= alpha q on the chunk's cells, z = M^-1 r on those columns, partial dots. */
  const int64_t cw = pk_pc_chunk_cols(M), nch = (M->ncols + cw - 1) / cw;
  const int kfast = M->layout == PKRYLOV_LAYOUT_KFAST;
#pragma omp parallel num_threads(nt) if (pk_par(n))
  {
    pk_xdot X;
    if (xacc) pk_xdot_init(&X, 2);
#pragma omp for schedule(static)
    for (int64_t c = 0; c < nch; c++) {
      const int64_t c0 = c * cw, c1 = c0 + cw < M->ncols ? c0 + cw : M->ncols;
      if (!pk_pc_cg_step_cols(M, alpha, r, q, z, c0, c1, part + 2 * c)) { /* else one sweep pair did it all */
        PK_FOR_COLUMN_CELLS(M, c0, c1, i, { r[i] -= alpha * q[i]; });
        pk_pc_apply_cols(M, r, z, c0, c1);
        double t0 = 0, t1 = 0;
        if (!xacc)
          PK_FOR_COLUMN_CELLS(M, c0, c1, i, {
            t0 += r[i] * z[i];
            t1 += r[i] * r[i];
          });
        part[2 * c] = t0;
        part[2 * c + 1] = t1;
      }
      if (xacc) { /* the chunk's cells: one run (k-fast) or a run of its columns per level (k-slow) */
        if (kfast)
          pk_chunk_xdots(&X, 2, xa, xb, c0 * M->nz, (c1 - c0) * M->nz, 1, 0);
        else
          pk_chunk_xdots(&X, 2, xa, xb, c0, c1 - c0, M->nz, M->lev_stride);
      }
    }
    if (xacc) pk_xdot_merge(&X, xacc);
  }
  pk_xacc_done(xacc, 2);
  pk_sum_partials(part, nch, 2, out);
}

void pk_cpu_cg_operator_step(const struct pkrylov_operator_s *A, double alpha, double beta, double *x,
                             double *p, const double *z, double *q, double *part, double *out, int64_t *xacc) {
  const int64_t n = A->n, nch = (n + PK_ROW_CHUNK - 1) / PK_ROW_CHUNK;
  const int nt = pk_num_threads(A->ctx);
  (void)nt; /* read by the OpenMP pragmas only */
  const double *az = pk_whole_product(A, z, A->user.scratch);
  const double *xa[1] = {p}, *xb[1] = {q};
  pk_xacc_zero(xacc, 1);
#pragma omp parallel num_threads(nt) if (pk_par(n))
  {
    pk_xdot X;
    if (xacc) pk_xdot_init(&X, 1);
    double qold[PK_ROW_CHUNK];
#pragma omp for schedule(static)
    for (int64_t c = 0; c < nch; c++) {
      int64_t i0, i1;
      pk_row_chunk(c, n, &i0, &i1);
      memcpy(qold, q + i0, sizeof(double) * (size_t)(i1 - i0));
      pk_chunk_product(A, z, az, q, i0, i1); /* q = A z on the chunk */
      double t = 0;
      for (int64_t i = i0; i < i1; i++) {
        /* x += alpha p; p = z + beta p; q = A z + beta q; (p, q) */
        const double pi = p[i];
        x[i] += alpha * pi;
        const double pn = z[i] + beta * pi;
        const double qn = q[i] + beta * qold[i - i0];
        p[i] = pn;
        q[i] = qn;
        t += pn * qn;
      }
      part[c] = t;
      if (xacc) pk_chunk_xdots(&X, 1, xa, xb, i0, i1 - i0, 1, 0);
    }
    if (xacc) pk_xdot_merge(&X, xacc);
  }
  pk_xacc_done(xacc, 1);
  pk_sum_partials(part, nch, 1, out);
}

void pk_cpu_pipecg_step(const struct pkrylov_operator_s *A, const double *am_ready, double alpha, double beta,
                        const double *m, double *z, double *q, double *s, double *p, double *x, double *r,
                        double *u, double *w, int nv, double *part, double *out, int64_t *xacc) {
  const int64_t n = A->n, nch = (n + PK_ROW_CHUNK - 1) / PK_ROW_CHUNK;
  const int nt = pk_num_threads(A->ctx);
  (void)nt; /* read by the OpenMP pragmas only */
  const double *am = am_ready ? am_ready : pk_whole_product(A, m, A->user.scratch);
  const int norms = nv == PK_RR_NV;
  const double *xa[PK_RR_NV] = {r, w, r, x, p, u, q}, *xb[PK_RR_NV] = {u, u, r, x, p, u, q}; /* as t[] below */
  if (nv == 0) xacc = NULL;
  pk_xacc_zero(xacc, nv);
#pragma omp parallel num_threads(nt) if (pk_par(n))
  {
    pk_xdot X;
    if (xacc) pk_xdot_init(&X, nv);
    double zold[PK_ROW_CHUNK];
#pragma omp for schedule(static)
    for (int64_t c = 0; c < nch; c++) {
      int64_t i0, i1;
      pk_row_chunk(c, n, &i0, &i1);
      memcpy(zold, z + i0, sizeof(double) * (size_t)(i1 - i0));
      pk_chunk_product(A, m, am, z, i0, i1); /* z = n = A m on the chunk */
      double t[PK_RR_NV] = {0};
      for (int64_t i = i0; i < i1; i++) {
        /* z = n + beta z; q = m + beta q; s = w + beta s; p = u + beta p;
           x += alpha p; r -= alpha s; u -= alpha q; w -= alpha z */
        const double zi = z[i] + beta * zold[i - i0];
        const double qi = m[i] + beta * q[i];
        const double si = w[i] + beta * s[i];
        const double pi = u[i] + beta * p[i];
        const double ri = r[i] - alpha * si;
        const double ui = u[i] - alpha * qi;
        const double wi = w[i] - alpha * zi;
        z[i] = zi, q[i] = qi, s[i] = si, p[i] = pi;
        const double xi = x[i] + alpha * pi;
        x[i] = xi;
        r[i] = ri, u[i] = ui, w[i] = wi;
        t[0] += ri * ui;
        t[1] += wi * ui;
        t[2] += ri * ri;
        if (norms) { /* the automatic residual replacement's norms (pk_rr.h) */
          t[3] += xi * xi;
          t[4] += pi * pi;
          t[5] += ui * ui;
          t[6] += qi * qi;
        }
      }
      for (int j = 0; j < nv; j++) part[nv * c + j] = t[j];
      if (xacc) pk_chunk_xdots(&X, nv, xa, xb, i0, i1 - i0, 1, 0);
    }
    if (xacc) pk_xdot_merge(&X, xacc);
  }
  pk_xacc_done(xacc, nv);
  pk_sum_partials(part, nch, nv, out);
}

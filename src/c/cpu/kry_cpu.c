/**
 * @file kry_cpu.c
 * @brief The CPU vector engine of the BiCGStab and GMRES families (pk_kry.h).
 *
 * Every loop runs over fixed chunks of PK_ROW_CHUNK rows (OpenMP, static schedule); a reduction writes one
 * partial per chunk and value, summed in chunk order (pk_sum_partials), so results are bitwise identical
 * for any thread count. Global sums go through reduce.c (pk_allreduce_sum, or begin/end for PK_KRY_ASYNC).
 * The arguments were checked by the front end (kry.c): ids, counts and ranges are valid here.
 *
 * Double-double block products (block_dots with dd = 1): per chunk the products are split exactly by
 * fma (two-product) and accumulated by two-sum into a (hi, lo) pair; the chunk pairs are added in chunk
 * order in double-double; the global sum then reduces hi and lo as two doubles (exact without MPI; with
 * MPI a plain sum of the hi and lo parts of the ranks is not an exact double-double sum: reproducible mode
 * below is).
 *
 * Reproducible mode (ctx->reproducible): every global sum of the engine is exact (the rounded products
 * summed exactly and rounded once; block_dots with dd = 1 sums the exact fma products and returns the
 * exact sum as a (hi, lo) pair), so the scalars, and with them the iterates, are bitwise the same for any
 * number of ranks and threads. The loops that write vectors (update, residual, CG's fused loops) add
 * their exact sums chunk by chunk in the same pass (pk_xdot) and reduce the accumulators
 * (pk_allreduce_xacc_begin); block_dots and basis_dots, which only read, take them in their pass
 * (pk_allreduce_xdots_begin).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "pk_kry.h"

/** Extra doubles between consecutive work vectors (5 cache lines), as the CG work vectors. */
#define PK_KRY_SHIFT 40

typedef struct {
  double *work;    /* nwork vectors, stride apart */
  int64_t stride;
  double *basis;   /* nbasis vectors, ld apart */
  double *S;       /* nscalars */
  double *part;    /* per-chunk partial sums */
  size_t part_cap; /* doubles in part */
  const double *b; /* bound */
  double *x;
  pk_reduce_request req;
  /* reproducible mode: accumulators (of the reduction in flight and of a blocking one) and pair lists */
  int64_t *xacc[2];
  int32_t xacc_cap[2];
  const double **pa, **pb;
  int32_t pair_cap;
} pk_kry_cpu;

static inline pk_kry_cpu *P_(pk_kry *E) { return (pk_kry_cpu *)E->priv; }

static double *vec(pk_kry *E, pk_vid v) {
  pk_kry_cpu *P = P_(E);
  if (v == PK_KV_X) return P->x;
  if (v == PK_KV_B) return (double *)P->b; /* read only: the front end never passes B as an output */
  if (v >= PK_KV_V0) return P->basis + (int64_t)(v - PK_KV_V0) * E->ld;
  return P->work + (int64_t)(v - PK_KV_W0) * P->stride;
}

static inline int64_t nchunks(int64_t n) { return (n + PK_ROW_CHUNK - 1) / PK_ROW_CHUNK; }

static inline void chunk_rows(int64_t c, int64_t n, int64_t *i0, int64_t *i1) {
  *i0 = c * PK_ROW_CHUNK;
  *i1 = *i0 + PK_ROW_CHUNK < n ? *i0 + PK_ROW_CHUNK : n;
}

/** part with room for nvals values per chunk. */
static int need_part(pk_kry *E, int64_t nvals) {
  pk_kry_cpu *P = P_(E);
  size_t want = (size_t)(nchunks(E->n) * (nvals > 0 ? nvals : 1));
  if (want <= P->part_cap) return PKRYLOV_SUCCESS;
  double *p = realloc(P->part, sizeof(double) * want);
  if (!p)
    return pk_error(E->ctx, PKRYLOV_ERR_OUT_OF_MEMORY, "pk_kry", "cannot allocate %zu partial sums", want);
  P->part = p;
  P->part_cap = want;
  return PKRYLOV_SUCCESS;
}

/** The local sums in S[out..out+count) become global (blocking, or started for PK_KRY_ASYNC). */
static int reduce(pk_kry *E, int32_t out, int32_t count, int32_t flags) {
  pk_kry_cpu *P = P_(E);
  if (flags & PK_KRY_ASYNC) {
    if (P->req.active)
      return pk_error(E->ctx, PKRYLOV_ERR_INTERNAL, "pk_kry", "a reduction is already in flight");
    return pk_allreduce_begin(E->ctx, P->S + out, count, &P->req);
  }
  return pk_allreduce_sum(E->ctx, P->S + out, count);
}

/** Room for count pairs in P->pa, P->pb. */
static int need_pairs(pk_kry *E, int32_t count) {
  pk_kry_cpu *P = P_(E);
  if (count <= P->pair_cap) return PKRYLOV_SUCCESS;
  const double **a = realloc(P->pa, sizeof(double *) * (size_t)count);
  if (a) P->pa = a;
  const double **b = a ? realloc(P->pb, sizeof(double *) * (size_t)count) : NULL;
  if (b) P->pb = b;
  if (!a || !b) return pk_error(E->ctx, PKRYLOV_ERR_OUT_OF_MEMORY, "pk_kry", "cannot allocate %d pairs", count);
  P->pair_cap = count;
  return PKRYLOV_SUCCESS;
}

/**
 * Reproducible mode: *acc = room for count exact accumulators, those of the reduction in flight
 * (PK_KRY_ASYNC; none may be in flight yet) or of a blocking one.
 */
static int xacc_room(pk_kry *E, int32_t count, int32_t flags, int64_t **acc) {
  pk_kry_cpu *P = P_(E);
  const int w = (flags & PK_KRY_ASYNC) ? 0 : 1;
  if (!w && P->req.active) return pk_error(E->ctx, PKRYLOV_ERR_INTERNAL, "pk_kry", "a reduction is already in flight");
  if (count > P->xacc_cap[w]) {
    int64_t *q = realloc(P->xacc[w], sizeof(int64_t) * (size_t)count * PK_XACC_LEN);
    if (!q)
      return pk_error(E->ctx, PKRYLOV_ERR_OUT_OF_MEMORY, "pk_kry", "cannot allocate %d exact accumulators", count);
    P->xacc[w] = q;
    P->xacc_cap[w] = count;
  }
  *acc = P->xacc[w];
  return PKRYLOV_SUCCESS;
}

/** Reproducible mode: S[out..out+count) = the global sums of the local exact accumulators acc (from
 *  xacc_room, filled by a fused loop), blocking or started (PK_KRY_ASYNC). */
static int xreduce_acc(pk_kry *E, int32_t out, int32_t count, int64_t *acc, int32_t flags) {
  pk_kry_cpu *P = P_(E);
  if (flags & PK_KRY_ASYNC) return pk_allreduce_xacc_begin(E->ctx, P->S + out, count, 0, acc, &P->req);
  return pk_allreduce_xacc(E->ctx, P->S + out, count, 0, acc);
}

/**
 * Reproducible mode: S[out..] = the exact global dots of the count pairs (a[j], b[j]) (dd: as (hi, lo)
 * pairs of the exact dots of exact products), blocking or started (PK_KRY_ASYNC): a pass of its own, for
 * the operations that only read (block_dots, basis_dots).
 */
static int xreduce(pk_kry *E, int32_t out, int32_t count, const double *const *a, const double *const *b, int dd,
                   int32_t flags) {
  pk_kry_cpu *P = P_(E);
  int64_t *acc = NULL;
  PK_CALL(xacc_room(E, count, flags, &acc));
  if (flags & PK_KRY_ASYNC)
    return pk_allreduce_xdots_begin(E->ctx, P->S + out, count, E->n, a, b, NULL, dd, dd, acc, &P->req);
  pk_reduce_request rq;
  PK_CALL(pk_allreduce_xdots_begin(E->ctx, P->S + out, count, E->n, a, b, NULL, dd, dd, acc, &rq));
  return pk_allreduce_end(E->ctx, &rq);
}

static int cpu_create(pk_kry *E) {
  pk_kry_cpu *P = calloc(1, sizeof(pk_kry_cpu));
  if (!P) return pk_error(E->ctx, PKRYLOV_ERR_OUT_OF_MEMORY, "pk_kry_create", "cannot allocate the engine");
  E->priv = P;
  const int64_t n = E->n;
  P->stride = (n + 7) / 8 * 8 + PK_KRY_SHIFT;
  E->ld = P->stride;
  P->work = calloc((size_t)(E->nwork > 0 ? E->nwork : 1) * (size_t)P->stride, sizeof(double));
  P->basis = calloc((size_t)(E->nbasis > 0 ? E->nbasis : 1) * (size_t)E->ld, sizeof(double));
  P->S = calloc((size_t)(E->nscalars > 0 ? E->nscalars : 1), sizeof(double));
  if (!P->work || !P->basis || !P->S)
    return pk_error(E->ctx, PKRYLOV_ERR_OUT_OF_MEMORY, "pk_kry_create",
                    "cannot allocate %d work and %d basis vectors of %lld values", E->nwork, E->nbasis,
                    (long long)n);
  return need_part(E, PK_KRY_MAXPAIRS + 2);
}

static void cpu_destroy(pk_kry *E) {
  pk_kry_cpu *P = P_(E);
  if (!P) return;
  free(P->work);
  free(P->basis);
  free(P->S);
  free(P->part);
  free(P->xacc[0]);
  free(P->xacc[1]);
  free(P->pa);
  free(P->pb);
  free(P);
  E->priv = NULL;
}

static int cpu_bind(pk_kry *E, int32_t x_zero) {
  pk_kry_cpu *P = P_(E);
  P->b = E->b_user;
  P->x = E->x_user;
  if (x_zero) memset(P->x, 0, sizeof(double) * (size_t)E->n);
  return PKRYLOV_SUCCESS;
}

static int cpu_unbind(pk_kry *E) {
  pk_kry_cpu *P = P_(E);
  P->b = NULL;
  P->x = NULL;
  P->req.active = 0;
  return PKRYLOV_SUCCESS;
}

static int cpu_copy(pk_kry *E, pk_vid src, pk_vid dst) {
  memcpy(vec(E, dst), vec(E, src), sizeof(double) * (size_t)E->n);
  return PKRYLOV_SUCCESS;
}

static int cpu_first_nonfinite(pk_kry *E, pk_vid v, int64_t *index, double *value) {
  const double *p = vec(E, v);
  const int64_t i = pk_first_nonfinite(p, E->n);
  if (index) *index = i;
  if (value) *value = i >= 0 ? p[i] : 0.0;
  return PKRYLOV_SUCCESS;
}

static int cpu_matvec(pk_kry *E, pk_vid x, pk_vid y) {
  pk_op_apply_all(E->s->A, vec(E, x), vec(E, y));
  return pk_user_check(E->s->A, NULL);
}

static int cpu_precond(pk_kry *E, pk_vid x, pk_vid y) {
  if (E->s->M)
    pk_pc_apply_all(E->s->M, vec(E, x), vec(E, y));
  else
    memcpy(vec(E, y), vec(E, x), sizeof(double) * (size_t)E->n);
  return pk_user_check(NULL, E->s->M);
}

static int cpu_residual(pk_kry *E, pk_vid x, pk_vid r, int32_t out) {
  pk_kry_cpu *P = P_(E);
  double rr;
  int64_t *acc = NULL;
  PK_CALL(need_part(E, 1));
  if (out >= 0 && E->ctx->reproducible) PK_CALL(xacc_room(E, 1, 0, &acc));
  pk_cpu_residual(E->s->A, P->b, vec(E, x), vec(E, r), P->part, &rr, acc);
  PK_CALL(pk_user_check(E->s->A, NULL));
  if (out < 0) return PKRYLOV_SUCCESS;
  P->S[out] = rr;
  if (acc) return xreduce_acc(E, out, 1, acc, 0);
  return pk_allreduce_sum(E->ctx, P->S + out, 1);
}

/** One update resolved to pointers and values (terms with a zero coefficient dropped). */
typedef struct {
  double *y;
  double cy;
  int nt;
  const double *x[PK_KRY_MAXTERMS];
  double c[PK_KRY_MAXTERMS];
} upd_res;

static int cpu_update(pk_kry *E, int32_t nupd, const pk_kupd *u, int32_t npairs, const pk_kpair *pairs,
                      int32_t out, int32_t flags) {
  pk_kry_cpu *P = P_(E);
  const double *S = P->S;
  upd_res U[PK_KRY_MAXUPD];
  for (int k = 0; k < nupd; k++) {
    U[k].y = vec(E, u[k].y);
    U[k].cy = pk_coef_value(u[k].cy, S);
    U[k].nt = 0;
    for (int t = 0; t < u[k].nterms; t++) {
      const double c = pk_coef_value(u[k].c[t], S);
      if (c == 0.0) continue; /* skipped: the vector is not read */
      U[k].x[U[k].nt] = vec(E, u[k].x[t]);
      U[k].c[U[k].nt++] = c;
    }
  }
  const double *pa[PK_KRY_MAXPAIRS], *pb[PK_KRY_MAXPAIRS];
  for (int j = 0; j < npairs; j++) {
    pa[j] = vec(E, pairs[j].a);
    pb[j] = vec(E, pairs[j].b);
  }
  PK_CALL(need_part(E, npairs));
  const int64_t n = E->n, nch = nchunks(n);
  double *part = P->part;
  int64_t *acc = NULL; /* reproducible mode: the exact sums, chunk by chunk, replace the partials */
  if (npairs > 0 && E->ctx->reproducible) {
    PK_CALL(xacc_room(E, npairs, flags, &acc));
    memset(acc, 0, sizeof(int64_t) * PK_XACC_LEN * (size_t)npairs);
  }
  const int nt = pk_num_threads(E->ctx);
  (void)nt; /* read by the OpenMP pragmas only */
#pragma omp parallel num_threads(nt) if (pk_par(n))
  {
    pk_xdot X;
    if (acc) pk_xdot_init(&X, npairs);
#pragma omp for schedule(static)
    for (int64_t ch = 0; ch < nch; ch++) {
      int64_t i0, i1;
      chunk_rows(ch, n, &i0, &i1);
      /* elements are independent: the updates one after the other over the chunk give the in-order
         per-element semantics */
      for (int k = 0; k < nupd; k++) {
        const upd_res *q = &U[k];
        double *y = q->y;
        const double cy = q->cy;
        if (cy != 0.0) {
          for (int64_t i = i0; i < i1; i++) {
            double t = cy * y[i];
            for (int m = 0; m < q->nt; m++) t = t + q->c[m] * q->x[m][i];
            y[i] = t;
          }
        } else if (q->nt == 0) {
          for (int64_t i = i0; i < i1; i++) y[i] = 0.0;
        } else {
          for (int64_t i = i0; i < i1; i++) {
            double t = q->c[0] * q->x[0][i];
            for (int m = 1; m < q->nt; m++) t = t + q->c[m] * q->x[m][i];
            y[i] = t;
          }
        }
      }
      for (int j = 0; j < npairs; j++) {
        const double *a = pa[j], *b = pb[j];
        if (acc) {
          pk_xdot_add(&X, j, a, b, NULL, 0, i0, i1 - i0, 1, 0);
          continue;
        }
        double t = 0.0;
        for (int64_t i = i0; i < i1; i++) t += a[i] * b[i];
        part[ch * npairs + j] = t;
      }
    }
    if (acc) pk_xdot_merge(&X, acc);
  }
  if (npairs == 0) return PKRYLOV_SUCCESS;
  if (acc) {
    for (int j = 0; j < npairs; j++) pk_xacc_normalize(acc + (int64_t)j * PK_XACC_LEN);
    return xreduce_acc(E, out, npairs, acc, flags);
  }
  pk_sum_partials(part, nch, npairs, P->S + out);
  return reduce(E, out, npairs, flags);
}

/* ---- CG's fused loops (cpu_kernels.c; the solver's scratch s->part, sized for column chunks) -------- */

/** Reproducible mode: *acc = room for the count exact sums of a fused loop (NULL in the default mode). */
static int fused_xacc(pk_kry *E, int32_t count, int32_t flags, int64_t **acc) {
  *acc = NULL;
  if (!E->ctx->reproducible || count == 0) return PKRYLOV_SUCCESS;
  return xacc_room(E, count, flags, acc);
}

/** S[out..out+count) holds the local sums of a fused loop (acc: its exact ones, reproducible mode): make
 *  them global, blocking or started (PK_KRY_ASYNC). */
static int reduce_fused(pk_kry *E, int32_t out, int32_t count, int64_t *acc, int32_t flags) {
  if (acc) return xreduce_acc(E, out, count, acc, flags);
  return reduce(E, out, count, flags);
}

/** PK_KRY_IF_RUNNING and a scalar step stopped the iteration: the loop does nothing. */
static int cpu_stopped(pk_kry *E, int32_t flags) {
  return (flags & PK_KRY_IF_RUNNING) && P_(E)->S[PK_KS_STOP] != 0.0;
}

static int cpu_cg_precond(pk_kry *E, pk_vid r, pk_vid q, pk_vid z, pk_coef alpha, int32_t out, int32_t flags) {
  pk_kry_cpu *P = P_(E);
  if (cpu_stopped(E, flags)) return PKRYLOV_SUCCESS;
  int64_t *acc = NULL;
  PK_CALL(fused_xacc(E, 2, flags, &acc));
  pk_cpu_cg_precond_step(E->ctx, E->s->M, E->n, pk_coef_value(alpha, P->S), vec(E, r), vec(E, q), vec(E, z),
                         E->s->part, P->S + out, acc);
  PK_CALL(reduce_fused(E, out, 2, acc, flags));
  return pk_user_check(E->s->A, E->s->M); /* a user routine failed (then the sums are NaN) */
}

static int cpu_cg_operator(pk_kry *E, pk_vid x, pk_vid p, pk_vid z, pk_vid q, pk_coef alpha, pk_coef beta,
                           int32_t out, int32_t flags) {
  pk_kry_cpu *P = P_(E);
  if (cpu_stopped(E, flags)) return PKRYLOV_SUCCESS;
  int64_t *acc = NULL;
  PK_CALL(fused_xacc(E, 1, flags, &acc));
  pk_cpu_cg_operator_step(E->s->A, pk_coef_value(alpha, P->S), pk_coef_value(beta, P->S), vec(E, x), vec(E, p),
                          vec(E, z), vec(E, q), E->s->part, P->S + out, acc);
  PK_CALL(reduce_fused(E, out, 1, acc, flags));
  return pk_user_check(E->s->A, E->s->M);
}

static int cpu_pipecg_update(pk_kry *E, const pk_kpipecg *v, pk_coef alpha, pk_coef beta, int32_t nsums,
                             int32_t out, int32_t flags) {
  pk_kry_cpu *P = P_(E);
  if (cpu_stopped(E, flags)) return PKRYLOV_SUCCESS;
  /* with no sums the loop's sums go to a scratch (the vectors are those of a call with sums) */
  double none[PK_RR_NV];
  int64_t *acc = NULL;
  PK_CALL(fused_xacc(E, nsums, flags, &acc));
  pk_cpu_pipecg_step(E->s->A, v->n == -1 ? NULL : vec(E, v->n), pk_coef_value(alpha, P->S),
                     pk_coef_value(beta, P->S), vec(E, v->m), vec(E, v->z), vec(E, v->q), vec(E, v->s),
                     vec(E, v->p), vec(E, v->x), vec(E, v->r), vec(E, v->u), vec(E, v->w), nsums, E->s->part,
                     nsums > 0 ? P->S + out : none, acc);
  if (nsums == 0) return PKRYLOV_SUCCESS;
  return reduce_fused(E, out, nsums, acc, flags);
}

/* ---- double-double ------------------------------------------------------------------------------ */

/** s + e = a + b exactly (Knuth's two-sum). */
static inline void two_sum(double a, double b, double *s, double *e) {
  const double x = a + b, bb = x - a;
  *e = (a - (x - bb)) + (b - bb);
  *s = x;
}

/** (hi, lo) += (h, l) in double-double. */
static inline void dd_add(double *hi, double *lo, double h, double l) {
  double s, e;
  two_sum(*hi, h, &s, &e);
  e += *lo + l;
  const double t = s + e; /* fast two-sum: |s| >= |e| */
  *lo = e - (t - s);
  *hi = t;
}

static int cpu_block_dots(pk_kry *E, int32_t a0, int32_t ka, int32_t b0, int32_t kb, int32_t dd,
                          int32_t out, int32_t flags) {
  pk_kry_cpu *P = P_(E);
  const int64_t nv = (int64_t)ka * kb * (dd ? 2 : 1);
  if (nv == 0) return PKRYLOV_SUCCESS;
  if (E->ctx->reproducible) {
    PK_CALL(need_pairs(E, ka * kb));
    for (int32_t j = 0; j < kb; j++)
      for (int32_t i = 0; i < ka; i++) {
        P->pa[i + ka * j] = P->basis + (int64_t)(a0 + i) * E->ld;
        P->pb[i + ka * j] = P->basis + (int64_t)(b0 + j) * E->ld;
      }
    return xreduce(E, out, ka * kb, P->pa, P->pb, dd, flags);
  }
  PK_CALL(need_part(E, nv));
  const int64_t n = E->n, nch = nchunks(n), ld = E->ld;
  const double *V = P->basis;
  double *part = P->part;
  const int nt = pk_num_threads(E->ctx);
  (void)nt;
#pragma omp parallel for schedule(static) num_threads(nt) if (pk_par(n))
  for (int64_t ch = 0; ch < nch; ch++) {
    int64_t i0, i1;
    chunk_rows(ch, n, &i0, &i1);
    double *pc = part + ch * nv;
    for (int32_t j = 0; j < kb; j++) {
      const double *vb = V + (int64_t)(b0 + j) * ld;
      for (int32_t i = 0; i < ka; i++) {
        const double *va = V + (int64_t)(a0 + i) * ld;
        const int64_t slot = i + (int64_t)ka * j;
        if (!dd) {
          double t = 0.0;
          for (int64_t r = i0; r < i1; r++) t += va[r] * vb[r];
          pc[slot] = t;
        } else {
          double hi = 0.0, lo = 0.0;
          for (int64_t r = i0; r < i1; r++) {
            const double p = va[r] * vb[r];
            const double pe = fma(va[r], vb[r], -p); /* p + pe = va*vb exactly */
            double s, e;
            two_sum(hi, p, &s, &e);
            hi = s;
            lo += e + pe;
          }
          const double t = hi + lo;
          pc[2 * slot + 1] = lo - (t - hi);
          pc[2 * slot] = t;
        }
      }
    }
  }
  double *o = P->S + out;
  if (!dd) {
    pk_sum_partials(part, nch, (int)nv, o);
  } else {
    for (int64_t v = 0; v < nv; v++) o[v] = 0.0;
    for (int64_t ch = 0; ch < nch; ch++)
      for (int64_t slot = 0; slot < nv / 2; slot++)
        dd_add(&o[2 * slot], &o[2 * slot + 1], part[ch * nv + 2 * slot], part[ch * nv + 2 * slot + 1]);
  }
  return reduce(E, out, (int32_t)nv, flags);
}

static int cpu_basis_dots(pk_kry *E, pk_vid x, int32_t b0, int32_t k, int32_t with_norm, int32_t out,
                          int32_t flags) {
  pk_kry_cpu *P = P_(E);
  const int32_t nv = k + (with_norm ? 1 : 0);
  if (nv == 0) return PKRYLOV_SUCCESS;
  if (E->ctx->reproducible) {
    PK_CALL(need_pairs(E, nv));
    for (int32_t j = 0; j < nv; j++) {
      P->pa[j] = j < k ? P->basis + (int64_t)(b0 + j) * E->ld : vec(E, x);
      P->pb[j] = vec(E, x);
    }
    return xreduce(E, out, nv, P->pa, P->pb, 0, flags);
  }
  PK_CALL(need_part(E, nv));
  const int64_t n = E->n, nch = nchunks(n), ld = E->ld;
  const double *V = P->basis, *xv = vec(E, x);
  double *part = P->part;
  const int nt = pk_num_threads(E->ctx);
  (void)nt;
#pragma omp parallel for schedule(static) num_threads(nt) if (pk_par(n))
  for (int64_t ch = 0; ch < nch; ch++) {
    int64_t i0, i1;
    chunk_rows(ch, n, &i0, &i1);
    for (int32_t j = 0; j < k; j++) {
      const double *vb = V + (int64_t)(b0 + j) * ld;
      double t = 0.0;
      for (int64_t r = i0; r < i1; r++) t += vb[r] * xv[r];
      part[ch * nv + j] = t;
    }
    if (with_norm) {
      double t = 0.0;
      for (int64_t r = i0; r < i1; r++) t += xv[r] * xv[r];
      part[ch * nv + k] = t;
    }
  }
  pk_sum_partials(part, nch, nv, P->S + out);
  return reduce(E, out, nv, flags);
}

static int cpu_basis_axpy(pk_kry *E, pk_vid y, pk_coef cy, int32_t b0, int32_t k, int32_t c0, int32_t neg) {
  pk_kry_cpu *P = P_(E);
  const int64_t n = E->n, nch = nchunks(n), ld = E->ld;
  const double *V = P->basis, *S = P->S;
  double *yv = vec(E, y);
  const double cyv = pk_coef_value(cy, S);
  const double sg = neg ? -1.0 : 1.0;
  const int nt = pk_num_threads(E->ctx);
  (void)nt;
#pragma omp parallel for schedule(static) num_threads(nt) if (pk_par(n))
  for (int64_t ch = 0; ch < nch; ch++) {
    int64_t i0, i1;
    chunk_rows(ch, n, &i0, &i1);
    /* same arithmetic as an update with terms c_j = s*S[c0+j] (zero coefficients skipped) */
    if (cyv != 0.0) {
      for (int64_t r = i0; r < i1; r++) yv[r] = cyv * yv[r];
    }
    int first = cyv == 0.0;
    for (int32_t j = 0; j < k; j++) {
      const double c = sg * S[c0 + j];
      if (c == 0.0) continue;
      const double *vb = V + (int64_t)(b0 + j) * ld;
      if (first) {
        for (int64_t r = i0; r < i1; r++) yv[r] = c * vb[r];
        first = 0;
      } else {
        for (int64_t r = i0; r < i1; r++) yv[r] = yv[r] + c * vb[r];
      }
    }
    if (first)
      for (int64_t r = i0; r < i1; r++) yv[r] = 0.0;
  }
  return PKRYLOV_SUCCESS;
}

static int cpu_basis_gemm(pk_kry *E, int32_t a0, int32_t kin, int32_t t0, int32_t ldt, int32_t b1,
                          int32_t kout) {
  pk_kry_cpu *P = P_(E);
  const int64_t n = E->n, nch = nchunks(n), ld = E->ld;
  double *V = P->basis;
  const double *S = P->S;
  const int inplace = b1 == a0;
  const int nt = pk_num_threads(E->ctx);
  (void)nt;
#pragma omp parallel for schedule(static) num_threads(nt) if (pk_par(n))
  for (int64_t ch = 0; ch < nch; ch++) {
    int64_t i0, i1;
    chunk_rows(ch, n, &i0, &i1);
    /* columns from the last to the first: in place, column j reads inputs i <= j only, none of which is
       overwritten yet */
    for (int32_t j = kout - 1; j >= 0; j--) {
      double *y = V + (int64_t)(b1 + j) * ld;
      const int32_t iend = inplace ? (j + 1 < kin ? j + 1 : kin) : kin;
      const double *T = S + t0 + (int64_t)ldt * j;
      const double *v0 = V + (int64_t)a0 * ld;
      const double c0 = T[0];
      if (inplace) { /* y is v_{a0+j}: accumulate from i = 0 with y read as input j last */
        for (int64_t r = i0; r < i1; r++) {
          double t = v0[r] * c0;
          for (int32_t i = 1; i < iend; i++) t = t + V[(int64_t)(a0 + i) * ld + r] * T[i];
          y[r] = t;
        }
      } else {
        for (int64_t r = i0; r < i1; r++) y[r] = v0[r] * c0;
        for (int32_t i = 1; i < iend; i++) {
          const double *vi = V + (int64_t)(a0 + i) * ld;
          const double ci = T[i];
          for (int64_t r = i0; r < i1; r++) y[r] = y[r] + vi[r] * ci;
        }
      }
    }
  }
  return PKRYLOV_SUCCESS;
}

static int cpu_scalar(pk_kry *E, int32_t id, int32_t arg) {
  if (pk_kry_scalar_step(id, P_(E)->S, arg) < 0)
    return pk_error(E->ctx, PKRYLOV_ERR_INTERNAL, "pk_kry_scalar", "unknown scalar step id %d", id);
  return PKRYLOV_SUCCESS;
}

static int cpu_wait(pk_kry *E) {
  pk_kry_cpu *P = P_(E);
  if (!P->req.active) return PKRYLOV_SUCCESS;
  return pk_allreduce_end(E->ctx, &P->req);
}

static int cpu_getv(pk_kry *E, int32_t n, const pk_krange *r) {
  for (int32_t i = 0; i < n; i++) memcpy(r[i].host, P_(E)->S + r[i].first, sizeof(double) * (size_t)r[i].count);
  return PKRYLOV_SUCCESS;
}

static int cpu_set(pk_kry *E, int32_t first, int32_t count, const double *host) {
  memcpy(P_(E)->S + first, host, sizeof(double) * (size_t)count);
  return PKRYLOV_SUCCESS;
}

static int cpu_sync(pk_kry *E) {
  (void)E;
  return PKRYLOV_SUCCESS;
}

const pk_kry_backend pk_kry_cpu_backend = {
    cpu_create,   cpu_destroy,    cpu_bind,       cpu_unbind,     cpu_copy,       cpu_first_nonfinite,
    cpu_matvec,   cpu_precond,    cpu_residual,   cpu_update,     cpu_block_dots, cpu_basis_dots,
    cpu_basis_axpy, cpu_basis_gemm, cpu_scalar,   cpu_wait,       cpu_getv,        cpu_set,
    cpu_sync,
    NULL /* basis_axpy_dots: the front end runs basis_axpy, then basis_dots */,
    NULL /* block_begin: blocks are a CUDA matter */,
    NULL /* block_end */,
    cpu_cg_precond, cpu_cg_operator, cpu_pipecg_update,
    NULL /* matvec_update: the front end runs matvec, then update */,
    NULL /* precond_update: precond, then update */};

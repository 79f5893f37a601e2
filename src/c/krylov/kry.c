/**
 * @file kry.c
 * @brief The solve frame of the methods on the vector engine and the engine front end (pk_kry.h).
 *
 * Front end: every pk_kry_* function checks its vector ids, counts and scalar ranges (a bad one is a driver
 * bug: PKRYLOV_ERR_INTERNAL with a message naming it, never a crash) and calls the backend table of the
 * solver's context (kry_cpu.c; the CUDA table when the build has it).
 *
 * Frame (pk_kry_solve): argument checks, history, ||b|| over the wet cells, the engine (made at the first
 * solve, remade when the driver's sizes change: restart, step, sync interval), binding, the initial and the
 * final true residual, the result; on a failing user callback x is restored to the caller's entry value.
 * The frame's best-iterate copy (x never worse than one seen) is off for drivers that return their own x
 * (pk_kry_sizes.keep_last: CG and pipelined CG, as the former solver.c drivers and the models' CG).
 * The drivers (bicgstab.c, gmres.c, cagmres.c, srcg.c, cg.c) run the iteration; pk_kry_poll() and pk_kry_confirm()
 * are their bookkeeping (history, monitor, stagnation; convergence confirmed on the true residual unless the
 * solver's stop rule is PKRYLOV_STOP_RECURRENCE: S[PK_KS_RULE], tested by the steps, and the final residual
 * is then the ring's last entry), pk_kry_iterate() the block loop of the methods without restart cycles.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "pk_kry.h"

int pk_kry_is_kry_type(int32_t type) {
  return (type >= PKRYLOV_SOLVER_BICGSTAB && type <= PKRYLOV_SOLVER_CAGMRES) || type == PKRYLOV_SOLVER_SRCG;
}

int pk_kry_serves(pkrylov_context ctx, const pk_options *opts, int32_t type) {
  if (pk_kry_is_kry_type(type)) return 1;
  const pk_kry_backend *be = ctx->be->kry;
  if (type != PKRYLOV_SOLVER_CG && type != PKRYLOV_SOLVER_PIPECG) return 0;
  if (!be || !be->cg_precond || !be->cg_operator || !be->pipecg_update) return 0;
  /* a backend with a CG driver of its own (CUDA) runs the engine when the option kry.cg=1 asks for it (the
     A/B switch of issue 15; default 0, the driver, until the engine is as fast at every size) */
  return !ctx->be->solver_solve || (opts && opts->kry_cg != 0);
}

/* ------------------------------------------------------------------------------------------------ */
/* Front end                                                                                         */

#define KRY_BAD(E, func, ...) pk_error((E) ? (E)->ctx : NULL, PKRYLOV_ERR_INTERNAL, func, __VA_ARGS__)

/* The engine of the context's backend (its table's kry; NULL: not served there). */
static const pk_kry_backend *pk_kry_backend_of(pkrylov_context ctx) { return ctx->be->kry; }

int pk_kry_create(pkrylov_solver s, int32_t nwork, int32_t nbasis, int32_t nscalars, pk_kry **E) {
  if (!s || !E) return pk_error(s ? s->ctx : NULL, PKRYLOV_ERR_INTERNAL, __func__, "NULL solver or output");
  pkrylov_context ctx = s->ctx;
  *E = NULL;
  const pk_kry_backend *be = pk_kry_backend_of(ctx);
  if (!be)
    return pk_error(ctx, PKRYLOV_ERR_UNSUPPORTED, "pkrylov_solver_solve",
                    "solver type %d is not implemented on the %s backend yet", s->type, ctx->be->name);
  if (nwork < 0 || nwork > PK_KV_V0 - PK_KV_W0 || nbasis < 0 || nbasis > 100000 || nscalars < 0 ||
      nscalars > (1 << 26))
    return pk_error(ctx, PKRYLOV_ERR_INTERNAL, __func__, "bad sizes nwork %d (0..%d), nbasis %d, nscalars %d",
                    nwork, PK_KV_V0 - PK_KV_W0, nbasis, nscalars);
  pk_kry *e = calloc(1, sizeof(pk_kry));
  if (!e) return pk_error(ctx, PKRYLOV_ERR_OUT_OF_MEMORY, __func__, "cannot allocate the engine");
  e->s = s;
  e->ctx = ctx;
  e->be = be;
  e->n = s->n;
  e->nwork = nwork;
  e->nbasis = nbasis;
  e->nscalars = nscalars;
  e->ld = s->n;
  int ierr = be->create(e);
  if (ierr) {
    be->destroy(e);
    free(e);
    return ierr;
  }
  *E = e;
  return PKRYLOV_SUCCESS;
}

void pk_kry_destroy(pk_kry *E) {
  if (!E) return;
  E->be->destroy(E);
  free(E);
}

int32_t pk_kry_sync_interval(const pk_kry *E) {
  /* user callbacks on CUDA (a user operator or preconditioner, the caller's halo exchange): one iteration per
     block, so that the routine is not called after a stop; distributed operators exchange their halos on
     the device, between the kernels */
  if (!E || !E->ctx->be->device) return 1;
  const pkrylov_operator A = E->s->A;
  if (A->type == PKRYLOV_OPERATOR_USER || A->halo.exchange) return 1;
  if (E->s->M && E->s->M->type == PKRYLOV_PRECOND_USER) return 1;
  /* grid operators (several ranks: the device halo exchange, NCCL or host-staged): blocks for CG and
     pipelined CG, whose CUDA driver ran them so; the other methods keep one iteration per block, as before
     their blocks were tried with those exchanges */
  if ((A->dist || A->grid) && E->s->type != PKRYLOV_SOLVER_CG && E->s->type != PKRYLOV_SOLVER_PIPECG) return 1;
  return E->s->sync_interval;
}
int32_t pk_kry_nbasis(const pk_kry *E) { return E ? E->nbasis : 0; }
int32_t pk_kry_nscalars(const pk_kry *E) { return E ? E->nscalars : 0; }

/** Check vector id v (writable: not B); the message names func and the argument. */
static int check_vid(pk_kry *E, const char *func, const char *name, pk_vid v, int writable) {
  if (!E) return pk_error(NULL, PKRYLOV_ERR_INTERNAL, func, "engine is NULL");
  int ok = (v == PK_KV_X || v == PK_KV_B) || (v >= PK_KV_W0 && v < PK_KV_W0 + E->nwork) ||
           (v >= PK_KV_V0 && v < PK_KV_V0 + E->nbasis);
  if (!ok)
    return KRY_BAD(E, func, "vector id %s = %d is not X, B, a work vector (%d..%d) or a basis vector (%d..%d)",
                   name, v, PK_KV_W0, PK_KV_W0 + E->nwork - 1, PK_KV_V0, PK_KV_V0 + E->nbasis - 1);
  if (writable && v == PK_KV_B) return KRY_BAD(E, func, "vector %s: B is read only", name);
  if ((v == PK_KV_X || v == PK_KV_B) && !E->x_user)
    return KRY_BAD(E, func, "vector %s = %s used while no solve is bound", name, v == PK_KV_X ? "X" : "B");
  return PKRYLOV_SUCCESS;
}

/** [first, first+count) lies in 0..limit; what ("scalars", "basis range") and name go into the message. */
static int check_span(pk_kry *E, const char *func, const char *what, const char *name, int64_t first,
                      int64_t count, int32_t limit) {
  if (first < 0 || count < 0 || first + count > limit)
    return KRY_BAD(E, func, "%s %s [%lld, %lld) outside 0..%d", what, name, (long long)first,
                   (long long)(first + count), limit);
  return PKRYLOV_SUCCESS;
}

/** Scalars [first, first+count) exist. */
static int check_range(pk_kry *E, const char *func, const char *name, int64_t first, int64_t count) {
  return check_span(E, func, "scalars", name, first, count, E->nscalars);
}

static int check_coef(pk_kry *E, const char *func, pk_coef c) {
  if (c.idx == PK_S_ONE || c.idx == PK_S_ZERO) return PKRYLOV_SUCCESS;
  if (c.idx < 0 || c.idx >= E->nscalars)
    return KRY_BAD(E, func, "coefficient index %d outside 0..%d (or PK_S_ONE, PK_S_ZERO)", c.idx,
                   E->nscalars - 1);
  return PKRYLOV_SUCCESS;
}

/** Basis range [b0, b0+k). */
static int check_basis(pk_kry *E, const char *func, const char *name, int64_t b0, int64_t k) {
  return check_span(E, func, "basis range", name, b0, k, E->nbasis);
}

static int check_flags(pk_kry *E, const char *func, int32_t flags) {
  if (flags != 0 && flags != PK_KRY_ASYNC) return KRY_BAD(E, func, "flags = %d is not 0 or PK_KRY_ASYNC", flags);
  return PKRYLOV_SUCCESS;
}

int pk_kry_bind(pk_kry *E, int32_t mem, const double *b, double *x, int32_t x_zero) {
  if (!E || !b || !x) return KRY_BAD(E, __func__, "NULL engine, b or x");
  E->mem = mem;
  E->b_user = b;
  E->x_user = x;
  int ierr = E->be->bind(E, x_zero);
  if (ierr) E->x_user = NULL, E->b_user = NULL;
  return ierr;
}

int pk_kry_unbind(pk_kry *E) {
  if (!E) return KRY_BAD(E, __func__, "engine is NULL");
  if (!E->x_user) return PKRYLOV_SUCCESS;
  int ierr = E->be->unbind(E);
  E->x_user = NULL;
  E->b_user = NULL;
  return ierr;
}

int pk_kry_copy(pk_kry *E, pk_vid src, pk_vid dst) {
  PK_CALL(check_vid(E, __func__, "src", src, 0));
  PK_CALL(check_vid(E, __func__, "dst", dst, 1));
  if (src == dst) return PKRYLOV_SUCCESS;
  return E->be->copy(E, src, dst);
}

int pk_kry_first_nonfinite(pk_kry *E, pk_vid v, int64_t *index, double *value) {
  PK_CALL(check_vid(E, __func__, "v", v, 0));
  return E->be->first_nonfinite(E, v, index, value);
}

int pk_kry_matvec(pk_kry *E, pk_vid x, pk_vid y) {
  PK_CALL(check_vid(E, __func__, "x", x, 0));
  PK_CALL(check_vid(E, __func__, "y", y, 1));
  if (x == y) return KRY_BAD(E, __func__, "x and y are the same vector (%d)", x);
  return E->be->matvec(E, x, y);
}

int pk_kry_precond(pk_kry *E, pk_vid x, pk_vid y) {
  PK_CALL(check_vid(E, __func__, "x", x, 0));
  PK_CALL(check_vid(E, __func__, "y", y, 1));
  if (x == y) return KRY_BAD(E, __func__, "x and y are the same vector (%d)", x);
  return E->be->precond(E, x, y);
}

int pk_kry_residual(pk_kry *E, pk_vid x, pk_vid r, int32_t out) {
  PK_CALL(check_vid(E, __func__, "x", x, 0));
  PK_CALL(check_vid(E, __func__, "r", r, 1));
  if (x == r) return KRY_BAD(E, __func__, "x and r are the same vector (%d)", x);
  if (!E->x_user) return KRY_BAD(E, __func__, "no solve is bound (b is needed)");
  if (out >= 0) PK_CALL(check_range(E, __func__, "out", out, 1));
  return E->be->residual(E, x, r, out);
}

/** The arguments of pk_kry_update (and of the update part of pk_kry_matvec_update); func names the caller. */
static int check_update(pk_kry *E, const char *func, int32_t nupd, const pk_kupd *u, int32_t npairs,
                        const pk_kpair *pairs, int32_t out, int32_t flags) {
  if (!E) return KRY_BAD(E, func, "engine is NULL");
  if (nupd < 0 || nupd > PK_KRY_MAXUPD || (nupd > 0 && !u))
    return KRY_BAD(E, func, "nupd = %d outside 0..%d (or u NULL)", nupd, PK_KRY_MAXUPD);
  if (npairs < 0 || npairs > PK_KRY_MAXPAIRS || (npairs > 0 && !pairs))
    return KRY_BAD(E, func, "npairs = %d outside 0..%d (or pairs NULL)", npairs, PK_KRY_MAXPAIRS);
  PK_CALL(check_flags(E, func, flags));
  for (int k = 0; k < nupd; k++) {
    PK_CALL(check_vid(E, func, "u[k].y", u[k].y, 1));
    PK_CALL(check_coef(E, func, u[k].cy));
    if (u[k].nterms < 0 || u[k].nterms > PK_KRY_MAXTERMS)
      return KRY_BAD(E, func, "u[%d].nterms = %d outside 0..%d", k, u[k].nterms, PK_KRY_MAXTERMS);
    for (int t = 0; t < u[k].nterms; t++) {
      PK_CALL(check_vid(E, func, "u[k].x[t]", u[k].x[t], 0));
      PK_CALL(check_coef(E, func, u[k].c[t]));
    }
  }
  for (int j = 0; j < npairs; j++) {
    PK_CALL(check_vid(E, func, "pairs[j].a", pairs[j].a, 0));
    PK_CALL(check_vid(E, func, "pairs[j].b", pairs[j].b, 0));
  }
  if (npairs > 0) PK_CALL(check_range(E, func, "out", out, npairs));
  return PKRYLOV_SUCCESS;
}

int pk_kry_update(pk_kry *E, int32_t nupd, const pk_kupd *u, int32_t npairs, const pk_kpair *pairs,
                  int32_t out, int32_t flags) {
  PK_CALL(check_update(E, __func__, nupd, u, npairs, pairs, out, flags));
  if (nupd == 0 && npairs == 0) return PKRYLOV_SUCCESS;
  return E->be->update(E, nupd, u, npairs, pairs, out, flags);
}

/**
 * pk_kry_matvec_update (pc 0) and pk_kry_precond_update (pc 1): y = A x or y = M^-1 x, then the update. The
 * backend's fused entry when it has one, else the two calls (the same results by construction).
 */
static int apply_update(pk_kry *E, const char *func, int pc, pk_vid x, pk_vid y, int32_t nupd,
                        const pk_kupd *u, int32_t npairs, const pk_kpair *pairs, int32_t out, int32_t flags) {
  PK_CALL(check_vid(E, func, "x", x, 0));
  PK_CALL(check_vid(E, func, "y", y, 1));
  if (x == y) return KRY_BAD(E, func, "x and y are the same vector (%d)", x);
  PK_CALL(check_update(E, func, nupd, u, npairs, pairs, out, flags));
  /* a fused backend reads x (and its neighbours) while it writes the updated vectors: none of them may be x
     (vector ids name distinct storage, so the id is the whole aliasing test) */
  for (int k = 0; k < nupd; k++)
    if (u[k].y == x) return KRY_BAD(E, func, "u[%d].y is the input x (%d) of the %s", k, x,
                                    pc ? "preconditioner" : "operator");
  int (*const fused)(pk_kry *, pk_vid, pk_vid, int32_t, const pk_kupd *, int32_t, const pk_kpair *, int32_t,
                     int32_t) = pc ? E->be->precond_update : E->be->matvec_update;
  if ((nupd > 0 || npairs > 0) && fused) return fused(E, x, y, nupd, u, npairs, pairs, out, flags);
  PK_CALL(pc ? E->be->precond(E, x, y) : E->be->matvec(E, x, y));
  if (nupd == 0 && npairs == 0) return PKRYLOV_SUCCESS;
  return E->be->update(E, nupd, u, npairs, pairs, out, flags);
}

int pk_kry_matvec_update(pk_kry *E, pk_vid x, pk_vid y, int32_t nupd, const pk_kupd *u, int32_t npairs,
                         const pk_kpair *pairs, int32_t out, int32_t flags) {
  return apply_update(E, __func__, 0, x, y, nupd, u, npairs, pairs, out, flags);
}

int pk_kry_precond_update(pk_kry *E, pk_vid x, pk_vid y, int32_t nupd, const pk_kupd *u, int32_t npairs,
                          const pk_kpair *pairs, int32_t out, int32_t flags) {
  return apply_update(E, __func__, 1, x, y, nupd, u, npairs, pairs, out, flags);
}

int pk_kry_block_dots(pk_kry *E, int32_t a0, int32_t ka, int32_t b0, int32_t kb, int32_t dd, int32_t out,
                      int32_t flags) {
  if (!E) return KRY_BAD(E, __func__, "engine is NULL");
  PK_CALL(check_basis(E, __func__, "a", a0, ka));
  PK_CALL(check_basis(E, __func__, "b", b0, kb));
  if (dd != 0 && dd != 1) return KRY_BAD(E, __func__, "dd = %d is not 0 or 1", dd);
  PK_CALL(check_flags(E, __func__, flags));
  PK_CALL(check_range(E, __func__, "out", out, (int64_t)ka * kb * (dd ? 2 : 1)));
  if (ka == 0 || kb == 0) return PKRYLOV_SUCCESS;
  return E->be->block_dots(E, a0, ka, b0, kb, dd, out, flags);
}

int pk_kry_basis_dots(pk_kry *E, pk_vid x, int32_t b0, int32_t k, int32_t with_norm, int32_t out,
                      int32_t flags) {
  PK_CALL(check_vid(E, __func__, "x", x, 0));
  PK_CALL(check_basis(E, __func__, "b", b0, k));
  if (with_norm != 0 && with_norm != 1) return KRY_BAD(E, __func__, "with_norm = %d is not 0 or 1", with_norm);
  PK_CALL(check_flags(E, __func__, flags));
  PK_CALL(check_range(E, __func__, "out", out, (int64_t)k + with_norm));
  if (k + with_norm == 0) return PKRYLOV_SUCCESS;
  return E->be->basis_dots(E, x, b0, k, with_norm, out, flags);
}

/** The arguments of y = cy*y + sum s S[c0+j] V_{b0+j} (basis_axpy, basis_axpy_dots). */
static int check_basis_axpy(pk_kry *E, const char *func, pk_vid y, pk_coef cy, int32_t b0, int32_t k,
                            int32_t c0, int32_t neg) {
  PK_CALL(check_vid(E, func, "y", y, 1));
  PK_CALL(check_coef(E, func, cy));
  PK_CALL(check_basis(E, func, "b", b0, k));
  PK_CALL(check_range(E, func, "c", c0, k));
  if (y >= PK_KV_V0 + b0 && y < PK_KV_V0 + b0 + k)
    return KRY_BAD(E, func, "y (%d) is one of the basis vectors summed [%d, %d)", y, b0, b0 + k);
  if (neg != 0 && neg != 1) return KRY_BAD(E, func, "neg = %d is not 0 or 1", neg);
  return PKRYLOV_SUCCESS;
}

int pk_kry_basis_axpy(pk_kry *E, pk_vid y, pk_coef cy, int32_t b0, int32_t k, int32_t c0, int32_t neg) {
  PK_CALL(check_basis_axpy(E, __func__, y, cy, b0, k, c0, neg));
  return E->be->basis_axpy(E, y, cy, b0, k, c0, neg);
}

int pk_kry_basis_gemm(pk_kry *E, int32_t a0, int32_t kin, int32_t t0, int32_t ldt, int32_t b1,
                      int32_t kout) {
  if (!E) return KRY_BAD(E, __func__, "engine is NULL");
  PK_CALL(check_basis(E, __func__, "in", a0, kin));
  PK_CALL(check_basis(E, __func__, "out", b1, kout));
  if (kin < 1 || kout < 0) return KRY_BAD(E, __func__, "kin = %d must be >= 1 (kout = %d)", kin, kout);
  if (ldt < kin) return KRY_BAD(E, __func__, "ldt = %d < kin = %d", ldt, kin);
  if (kout > 0) PK_CALL(check_range(E, __func__, "T", t0, (int64_t)ldt * (kout - 1) + kin));
  if (b1 != a0 && b1 < a0 + kin && a0 < b1 + kout)
    return KRY_BAD(E, __func__, "output block [%d, %d) overlaps the input [%d, %d) other than in place", b1,
                   b1 + kout, a0, a0 + kin);
  if (kout == 0) return PKRYLOV_SUCCESS;
  return E->be->basis_gemm(E, a0, kin, t0, ldt, b1, kout);
}

int pk_kry_basis_axpy_dots(pk_kry *E, pk_vid y, pk_coef cy, int32_t b0, int32_t k, int32_t c0, int32_t neg,
                           int32_t with_norm, int32_t out, int32_t flags) {
  PK_CALL(check_basis_axpy(E, __func__, y, cy, b0, k, c0, neg));
  if (with_norm != 0 && with_norm != 1) return KRY_BAD(E, __func__, "with_norm = %d is not 0 or 1", with_norm);
  PK_CALL(check_flags(E, __func__, flags));
  PK_CALL(check_range(E, __func__, "out", out, (int64_t)k + with_norm));
  if (out < c0 + k && c0 < out + k + with_norm)
    return KRY_BAD(E, __func__, "output scalars [%d, %d) overlap the coefficients [%d, %d)", out,
                   out + k + with_norm, c0, c0 + k);
  if (E->be->basis_axpy_dots) return E->be->basis_axpy_dots(E, y, cy, b0, k, c0, neg, with_norm, out, flags);
  PK_CALL(E->be->basis_axpy(E, y, cy, b0, k, c0, neg));
  if (k + with_norm == 0) return PKRYLOV_SUCCESS;
  return E->be->basis_dots(E, y, b0, k, with_norm, out, flags);
}

/**
 * The n vectors v[] of one fused loop (names: theirs, for the messages): valid ids, writable where bit i of
 * writable is set, distinct; coefficients c[0..nc) valid; flags; S[out..out+nout) exists; the backend has
 * the loop op (CG's entries are optional: PKRYLOV_ERR_INTERNAL naming the operation func).
 */
static int check_loop(pk_kry *E, const char *func, int n, const pk_vid *v, const char *const *names,
                      unsigned writable, int nc, const pk_coef *c, int32_t flags, int32_t out, int32_t nout,
                      const void *op) {
  for (int i = 0; i < n; i++) PK_CALL(check_vid(E, func, names[i], v[i], (int)((writable >> i) & 1u)));
  for (int i = 0; i < n; i++)
    for (int j = i + 1; j < n; j++)
      if (v[i] == v[j]) return KRY_BAD(E, func, "vectors %s and %s are the same (%d)", names[i], names[j], v[i]);
  for (int k = 0; k < nc; k++) PK_CALL(check_coef(E, func, c[k]));
  if (flags & ~(PK_KRY_ASYNC | PK_KRY_IF_RUNNING))
    return KRY_BAD(E, func, "flags = %d is not a combination of PK_KRY_ASYNC and PK_KRY_IF_RUNNING", flags);
  if (nout > 0) PK_CALL(check_range(E, func, "out", out, nout));
  if (flags & PK_KRY_IF_RUNNING) PK_CALL(check_range(E, func, "the stop code", PK_KS_STOP, 1));
  if (!op)
    return KRY_BAD(E, func, "the %s engine has no %s (CG runs on its own driver there)", E->ctx->be->name, func);
  return PKRYLOV_SUCCESS;
}

int pk_kry_cg_precond(pk_kry *E, pk_vid r, pk_vid q, pk_vid z, pk_coef alpha, int32_t out, int32_t flags) {
  static const char *const names[3] = {"r", "q", "z"};
  const pk_vid v[3] = {r, q, z};
  if (!E) return KRY_BAD(E, __func__, "engine is NULL");
  PK_CALL(check_loop(E, __func__, 3, v, names, 5u, 1, &alpha, flags, out, 2, (const void *)E->be->cg_precond));
  return E->be->cg_precond(E, r, q, z, alpha, out, flags);
}

int pk_kry_cg_operator(pk_kry *E, pk_vid x, pk_vid p, pk_vid z, pk_vid q, pk_coef alpha, pk_coef beta,
                       int32_t out, int32_t flags) {
  static const char *const names[4] = {"x", "p", "z", "q"};
  const pk_vid v[4] = {x, p, z, q};
  const pk_coef c[2] = {alpha, beta};
  if (!E) return KRY_BAD(E, __func__, "engine is NULL");
  PK_CALL(check_loop(E, __func__, 4, v, names, 11u, 2, c, flags, out, 1, (const void *)E->be->cg_operator));
  return E->be->cg_operator(E, x, p, z, q, alpha, beta, out, flags);
}

int pk_kry_pipecg_update(pk_kry *E, const pk_kpipecg *v, pk_coef alpha, pk_coef beta, int32_t nsums,
                         int32_t out, int32_t flags) {
  static const char *const names[10] = {"m", "z", "q", "s", "p", "x", "r", "u", "w", "n"};
  if (!E || !v) return KRY_BAD(E, __func__, "NULL engine or vectors");
  const pk_vid ids[10] = {v->m, v->z, v->q, v->s, v->p, v->x, v->r, v->u, v->w, v->n};
  const pk_coef c[2] = {alpha, beta};
  if (nsums != 0 && nsums != PK_RR_NV_BASE && nsums != PK_RR_NV)
    return KRY_BAD(E, __func__, "nsums = %d is not 0, %d or %d", nsums, PK_RR_NV_BASE, PK_RR_NV);
  /* m and n are read, the others written; n = -1: none */
  PK_CALL(check_loop(E, __func__, v->n == -1 ? 9 : 10, ids, names, 0x1feu, 2, c, flags, out, nsums,
                     (const void *)E->be->pipecg_update));
  return E->be->pipecg_update(E, v, alpha, beta, nsums, out, flags);
}

int pk_kry_block_begin(pk_kry *E) {
  if (!E) return KRY_BAD(E, __func__, "engine is NULL");
  return E->be->block_begin ? E->be->block_begin(E) : PKRYLOV_SUCCESS;
}

int pk_kry_block_end(pk_kry *E) {
  if (!E) return KRY_BAD(E, __func__, "engine is NULL");
  return E->be->block_end ? E->be->block_end(E) : PKRYLOV_SUCCESS;
}

int pk_kry_scalar(pk_kry *E, int32_t id, int32_t arg) {
  if (!E) return KRY_BAD(E, __func__, "engine is NULL");
  return E->be->scalar(E, id, arg);
}

int pk_kry_wait(pk_kry *E) {
  if (!E) return KRY_BAD(E, __func__, "engine is NULL");
  return E->be->wait(E);
}

int pk_kry_get(pk_kry *E, int32_t first, int32_t count, double *host) {
  const pk_krange r = {first, count, host};
  return pk_kry_getv(E, 1, &r);
}

int pk_kry_getv(pk_kry *E, int32_t n, const pk_krange *r) {
  enum { MAXR = 4 };
  if (!E || (n > 0 && !r)) return KRY_BAD(E, __func__, "NULL engine or ranges");
  if (n < 0 || n > MAXR) return KRY_BAD(E, __func__, "%d ranges (0..%d)", n, (int)MAXR);
  pk_krange v[MAXR];
  int32_t m = 0;
  for (int32_t i = 0; i < n; i++) {
    PK_CALL(check_range(E, __func__, "get", r[i].first, r[i].count));
    if (r[i].count == 0) continue;
    if (!r[i].host) return KRY_BAD(E, __func__, "NULL host array");
    v[m++] = r[i];
  }
  return m ? E->be->getv(E, m, v) : PKRYLOV_SUCCESS;
}

int pk_kry_set(pk_kry *E, int32_t first, int32_t count, const double *host) {
  if (!E || !host) return KRY_BAD(E, __func__, "NULL engine or host array");
  PK_CALL(check_range(E, __func__, "set", first, count));
  if (count == 0) return PKRYLOV_SUCCESS;
  return E->be->set(E, first, count, host);
}

int pk_kry_sync(pk_kry *E) {
  if (!E) return KRY_BAD(E, __func__, "engine is NULL");
  return E->be->sync(E);
}

/* ------------------------------------------------------------------------------------------------ */
/* Frame                                                                                             */

int pk_kry_converged(const pk_kry_run *R, double v) { return pk_solver_converged(R->s, R->tol, v); }

int pk_kry_poll(pk_kry_run *R, int32_t first, pk_kry_status *st) {
  return pk_kry_poll_read(R, first, st, 0, 0, NULL);
}

int pk_kry_poll_read(pk_kry_run *R, int32_t first, pk_kry_status *st, int32_t vfirst, int32_t vcount,
                     double *vals) {
  (void)first;
  double h[PK_KS_DRIVER];
  /* the header, the ring and the driver's scalars in one read (one host round trip per block on CUDA) */
  const pk_krange rg[3] = {{0, PK_KS_DRIVER, h}, {R->ring_base, R->ring, R->ringbuf}, {vfirst, vcount, vals}};
  PK_CALL(pk_kry_getv(R->E, vals && vcount > 0 ? 3 : 2, rg));
  st->its = (int32_t)h[PK_KS_ITS];
  st->code = (int32_t)h[PK_KS_STOP];
  st->code_it = (int32_t)h[PK_KS_STOP_IT];
  st->host = 0;
  if (st->its > R->recorded) {
    const int32_t len = R->ring;
    if (st->its - R->recorded > len)
      return pk_error(R->s->ctx, PKRYLOV_ERR_INTERNAL, __func__, "%d iterations between polls, ring of %d",
                      st->its - R->recorded, len);
    const double *ring = R->ringbuf;
    for (int32_t k = R->recorded + 1; k <= st->its; k++) {
      int stop = pk_solver_record(R->s, &R->best, &R->stalled, k, ring[k % len]);
      if (stop && !st->host) st->host = stop;
    }
    R->recorded = st->its;
  }
  return PKRYLOV_SUCCESS;
}

/** norm is the true residual of the current x: keep x in R->xbest when it is the best seen. */
static int kry_note_true(pk_kry_run *R, double norm) {
  if (R->xbest < 0 || !(norm < R->best_true)) return PKRYLOV_SUCCESS;
  R->best_true = norm;
  return pk_kry_copy(R->E, PK_KV_X, R->xbest);
}

int pk_kry_keep_best(pk_kry_run *R, int32_t slot) {
  double rr;
  PK_CALL(pk_kry_get(R->E, slot, 1, &rr));
  return kry_note_true(R, sqrt(rr));
}

/** r = b - A x into R->tmp; *norm = ||r||. */
static int kry_true_residual(pk_kry_run *R, double *norm) {
  double rr;
  PK_CALL(pk_kry_residual(R->E, PK_KV_X, R->tmp, PK_KS_TRUE));
  PK_CALL(pk_kry_get(R->E, PK_KS_TRUE, 1, &rr));
  *norm = sqrt(rr);
  return PKRYLOV_SUCCESS;
}

int pk_kry_confirm(pk_kry_run *R, pkrylov_result *res, int *accept, int *stagnated) {
  if (pk_solver_recurrence(R->s)) { /* the steps' test is the rule: no true residual */
    *accept = R->s->atol >= R->tol ? PKRYLOV_CONVERGED_ATOL : PKRYLOV_CONVERGED_RTOL;
    *stagnated = 0;
    return PKRYLOV_SUCCESS;
  }
  double tr;
  PK_CALL(kry_true_residual(R, &tr));
  res->true_residual_checks++;
  R->final_res = tr;
  R->have_final = 1;
  PK_CALL(kry_note_true(R, tr));
  *accept = pk_kry_converged(R, tr);
  *stagnated = !*accept && ++R->confirm_failures > PK_MAX_CONFIRM_FAILURES;
  return PKRYLOV_SUCCESS;
}

int pk_kry_cycle_end(pk_kry_run *R, const pk_kry_status *st, pkrylov_result *res, int *done) {
  *done = 1;
  res->iterations = st->its;
  if (st->code == PKRYLOV_DIVERGED_NAN) {
    res->reason = PKRYLOV_DIVERGED_NAN;
    res->breakdown_iteration = st->code_it;
    return PKRYLOV_SUCCESS;
  }
  if (st->code == PK_KS_CYCLE_END) { /* recurrence rule: the cycle cannot go on, the next one starts from the
                                        true residual; a cycle that makes no progress repeatedly stagnates */
    if (++R->confirm_failures > PK_MAX_CONFIRM_FAILURES)
      return res->reason = PKRYLOV_DIVERGED_STAGNATION, PKRYLOV_SUCCESS;
  } else if (st->code > 0) { /* the estimate says converged: confirm on the true residual */
    int accept, stagnated;
    PK_CALL(pk_kry_confirm(R, res, &accept, &stagnated));
    if (accept) return res->reason = accept, PKRYLOV_SUCCESS;
    if (stagnated) return res->reason = PKRYLOV_DIVERGED_STAGNATION, PKRYLOV_SUCCESS;
  }
  if (st->host) return res->reason = st->host, PKRYLOV_SUCCESS;
  *done = 0;
  return PKRYLOV_SUCCESS;
}

int pk_kry_iterate(pk_kry_run *R, pkrylov_result *res, pk_kry_start_fn start, pk_kry_iter_fn iter,
                   pk_kry_breakdown_fn breakdown) {
  pkrylov_solver s = R->s;
  const int32_t interval = pk_kry_sync_interval(R->E);
  pk_kry_status st;
  PK_CALL(start(R, 0));
  PK_CALL(pk_kry_poll(R, 1, &st));
  for (;;) {
    res->iterations = st.its;
    if (st.code > 0) { /* converged on the recurrence residual */
      int accept, stagnated;
      PK_CALL(pk_kry_confirm(R, res, &accept, &stagnated));
      if (accept) return res->reason = accept, PKRYLOV_SUCCESS;
      if (stagnated) return res->reason = PKRYLOV_DIVERGED_STAGNATION, PKRYLOV_SUCCESS;
      if (st.host) return res->reason = st.host, PKRYLOV_SUCCESS;
      if (st.its >= s->maxit) return res->reason = PKRYLOV_DIVERGED_MAX_ITERATIONS, PKRYLOV_SUCCESS;
      PK_CALL(start(R, 1));
      PK_CALL(pk_kry_poll(R, 0, &st));
      continue;
    }
    if (st.code < 0) {
      int restart = 0;
      if (breakdown && st.code != PKRYLOV_DIVERGED_NAN) PK_CALL(breakdown(R, &st, res, &restart));
      if (restart) {
        PK_CALL(start(R, 1));
        PK_CALL(pk_kry_poll(R, 0, &st));
        continue;
      }
      if (res->reason) return PKRYLOV_SUCCESS; /* the hook decided */
      res->reason = st.code;
      res->breakdown_iteration = st.code_it;
      return PKRYLOV_SUCCESS;
    }
    if (st.host) return res->reason = st.host, PKRYLOV_SUCCESS;
    if (st.its >= s->maxit) return res->reason = PKRYLOV_DIVERGED_MAX_ITERATIONS, PKRYLOV_SUCCESS;
    int32_t nb = s->maxit - st.its < interval ? s->maxit - st.its : interval;
    PK_CALL(pk_kry_block_begin(R->E)); /* the CUDA engine replays a graph of the block */
    for (int32_t j = 1; j <= nb; j++) {
      const int rc = iter(R, res, st.its + j);
      if (rc) {
        (void)pk_kry_block_end(R->E);
        return rc;
      }
    }
    PK_CALL(pk_kry_block_end(R->E));
    PK_CALL(pk_kry_poll(R, 0, &st));
  }
}

/** The method of solver type `type`: sizes and solve. */
static int kry_method(pkrylov_solver s, int (**sizes)(pkrylov_solver, pk_kry_sizes *),
                      int (**solve)(pk_kry_run *, pkrylov_result *)) {
  switch (s->type) {
  case PKRYLOV_SOLVER_CG:
    *sizes = pk_cg_sizes;
    *solve = pk_cg_solve;
    return PKRYLOV_SUCCESS;
  case PKRYLOV_SOLVER_PIPECG:
    *sizes = pk_pipecg_sizes;
    *solve = pk_pipecg_solve;
    return PKRYLOV_SUCCESS;
  case PKRYLOV_SOLVER_BICGSTAB:
    *sizes = pk_bicgstab_sizes;
    *solve = pk_bicgstab_solve;
    return PKRYLOV_SUCCESS;
  case PKRYLOV_SOLVER_PIPEBICGSTAB:
    *sizes = pk_pipebicgstab_sizes;
    *solve = pk_pipebicgstab_solve;
    return PKRYLOV_SUCCESS;
  case PKRYLOV_SOLVER_GMRES:
  case PKRYLOV_SOLVER_PIPEGMRES:
  case PKRYLOV_SOLVER_FGMRES:
  case PKRYLOV_SOLVER_CAGMRES:
    *sizes = pk_gmres_sizes;
    *solve = pk_gmres_solve;
    return PKRYLOV_SUCCESS;
  case PKRYLOV_SOLVER_SRCG:
    *sizes = pk_srcg_sizes;
    *solve = pk_srcg_solve;
    return PKRYLOV_SUCCESS;
  default: /* solver_solve checked the type: a bug */
    return pk_error(s->ctx, PKRYLOV_ERR_INTERNAL, "pkrylov_solver_solve",
                    "solver type %d has no method of the vector engine", s->type);
  }
}

/** b (and a nonzero initial x) of a solve on device arrays: finite, checked on the device; agreed over the ranks. */
static int kry_check_device_inputs(pkrylov_solver s, pk_kry *E) {
  pkrylov_context ctx = s->ctx;
  int64_t bad;
  double val;
  int ierr = pk_kry_first_nonfinite(E, PK_KV_B, &bad, &val);
  if (!ierr && bad >= 0)
    ierr = pk_error(ctx, PKRYLOV_ERR_NOT_FINITE, "pkrylov_solver_solve",
                    "argument 'b' has a non-finite value (%g) at index %lld", val, (long long)bad);
  if (!ierr && s->nonzero_guess) {
    ierr = pk_kry_first_nonfinite(E, PK_KV_X, &bad, &val);
    if (!ierr && bad >= 0)
      ierr = pk_error(ctx, PKRYLOV_ERR_NOT_FINITE, "pkrylov_solver_solve",
                      "argument 'x' (initial guess) has a non-finite value (%g) at index %lld", val,
                      (long long)bad);
  }
  return pk_distributed(ctx) ? pk_mpi_agree(ctx, ierr) : ierr;
}

/** The engine's sizes for the solver's current settings: the driver's (z) plus R.tmp, R.xbest and the
 *  history ring. */
static int kry_engine_sizes(pkrylov_solver s, int (*sizes)(pkrylov_solver, pk_kry_sizes *), pk_kry_sizes *z,
                            int32_t *nwork, int32_t *nscal) {
  memset(z, 0, sizeof *z);
  PK_CALL(sizes(s, z));
  const int32_t interval = s->ctx->be->device ? s->sync_interval : 1;
  const int32_t ring = (z->poll_iters > interval ? z->poll_iters : interval) + 1;
  *nwork = z->nwork + (z->keep_last ? 1 : 2); /* + R.tmp and R.xbest */
  *nscal = z->nscalars + ring;
  return PKRYLOV_SUCCESS;
}

int pk_kry_reserve(pkrylov_solver s) {
  int (*sizes)(pkrylov_solver, pk_kry_sizes *) = NULL;
  int (*solve)(pk_kry_run *, pkrylov_result *) = NULL;
  PK_CALL(kry_method(s, &sizes, &solve));
  if (!pk_kry_backend_of(s->ctx)) return PKRYLOV_SUCCESS; /* (the solve reports it) */
  pk_kry_sizes z;
  int32_t nwork, nscal;
  pk_kry *E = NULL;
  PK_CALL(kry_engine_sizes(s, sizes, &z, &nwork, &nscal));
  PK_CALL(pk_kry_create(s, nwork, z.nbasis, nscal, &E));
  pk_kry_destroy(E); /* made again at the first solve, with the options set by then */
  return PKRYLOV_SUCCESS;
}

int pk_kry_solve(pkrylov_solver s, int32_t mem, const double *b, double *x) {
  pkrylov_context ctx = s->ctx;
  const int64_t n = s->n;
  int (*sizes)(pkrylov_solver, pk_kry_sizes *) = NULL;
  int (*solve)(pk_kry_run *, pkrylov_result *) = NULL;
  PK_CALL(kry_method(s, &sizes, &solve));
  if (!pk_kry_backend_of(ctx))
    return pk_error(ctx, PKRYLOV_ERR_UNSUPPORTED, "pkrylov_solver_solve",
                    "solver type %d is not implemented on the %s backend yet", s->type, ctx->be->name);
  const int host = mem == PKRYLOV_MEM_HOST;
  if (ctx->be->check_pointer) { /* where b and x live, before any host read of them */
    PK_CALL(ctx->be->check_pointer(ctx, "pkrylov_solver_solve", mem, b, "b"));
    PK_CALL(ctx->be->check_pointer(ctx, "pkrylov_solver_solve", mem, x, "x"));
  }
  if (host)
    PK_CALL(pk_solver_check_finite(s, "pkrylov_solver_solve", b, x));
  PK_CALL(pk_solver_history_reserve(s));
  pk_user_reset(s->A, s->M); /* forget callback failures of earlier calls */

  /* the engine, (re)made when the driver's sizes change (restart, step, sync interval) */
  pk_kry_sizes z;
  int32_t nwork, nscal;
  PK_CALL(kry_engine_sizes(s, sizes, &z, &nwork, &nscal));
  pk_kry *E = (pk_kry *)s->kry;
  if (E && (E->nwork != nwork || E->nbasis != z.nbasis || E->nscalars != nscal)) {
    pk_kry_destroy(E);
    s->kry = E = NULL;
  }
  if (!E) {
    PK_CALL(pk_kry_create(s, nwork, z.nbasis, nscal, &E));
    s->kry = E;
  }

  const double t0 = pk_wtime();
  pkrylov_result res;
  pk_result_init(&res);
  /* ||b|| over the wet cells: host arrays on the CPU before x is bound (a failing solve leaves x as it came;
     a zero initial guess is written at binding) */
  double bb = 0.0;
  const int host_norm = host && !ctx->be->device;
  if (host_norm) {
    const uint8_t *wet = s->A->wet;
    if (wet) {
      for (int64_t i = 0; i < n; i++)
        if (wet[i]) bb += b[i] * b[i];
    } else {
      pk_cpu_dot(ctx, n, b, b, s->part, &bb);
    }
    /* (reproducible mode: the exact sum, pk_allreduce_dots; otherwise the sum of the local values) */
    PK_CALL(pk_allreduce_dots(ctx, &bb, 1, n, (const double *[]){b}, (const double *[]){b}, wet));
    PK_CHECK_AS("pkrylov_solver_solve", isfinite(sqrt(bb)), ctx, PKRYLOV_ERR_NOT_FINITE,
                "argument 'b': its 2-norm overflows (scale the system)");
  }
  /* user callbacks may fail in the middle of the iteration: keep the entry x to restore it then */
  double *x_entry = NULL;
  if (host && (pk_op_whole_vector(s->A) || (s->Mobj && s->Mobj->type == PKRYLOV_PRECOND_USER))) {
    x_entry = malloc(sizeof(double) * (size_t)n);
    PK_CHECK(x_entry != NULL, ctx, PKRYLOV_ERR_OUT_OF_MEMORY, "cannot allocate a copy of 'x' (%lld values)",
             (long long)n);
    memcpy(x_entry, x, sizeof(double) * (size_t)n);
  }
  int ierr = pk_kry_bind(E, mem, b, x, !s->nonzero_guess);
  if (ierr) {
    free(x_entry);
    return ierr;
  }
  pk_kry_run R;
  memset(&R, 0, sizeof R);
  R.s = s;
  R.E = E;
  R.mem = mem;
  R.best = INFINITY;
  R.recorded = -1;
  const int32_t ring = nscal - z.nscalars;
  R.ring = ring;
  R.ring_base = z.nscalars;
  R.ringbuf = malloc(sizeof(double) * (size_t)ring);
  if (!R.ringbuf) {
    ierr = pk_error(ctx, PKRYLOV_ERR_OUT_OF_MEMORY, "pkrylov_solver_solve",
                    "cannot allocate the residual ring (%d values)", ring);
    goto failed;
  }
  R.tmp = PK_KV_W0 + z.nwork;
  R.xbest = z.keep_last ? -1 : PK_KV_W0 + z.nwork + 1;
  if (!host) { /* device arrays: check them on the device; distributed: the first failing rank's error on
                  every rank (a rank alone in the error would leave the others waiting in a reduction) */
    if ((ierr = kry_check_device_inputs(s, E)) != PKRYLOV_SUCCESS) goto failed;
  }

  /* ||b|| over the wet cells (host arrays on the CPU: before x is touched, see above) */
  if (!host_norm) { /* b - A 0 = b with the dry cells zeroed (W0 is free before the driver starts) */
    pk_kupd u0;
    memset(&u0, 0, sizeof u0);
    u0.y = PK_KV_W0;
    u0.cy = pk_c(PK_S_ZERO);
    if ((ierr = pk_kry_update(E, 1, &u0, 0, NULL, 0, 0)) != PKRYLOV_SUCCESS) goto failed;
    E->x_is_zero = 1; /* (no call of a user routine for A 0) */
    ierr = pk_kry_residual(E, PK_KV_W0, R.tmp, PK_KS_TRUE);
    E->x_is_zero = 0;
    if (ierr != PKRYLOV_SUCCESS) goto failed;
    if ((ierr = pk_kry_get(E, PK_KS_TRUE, 1, &bb)) != PKRYLOV_SUCCESS) goto failed;
  }
  res.rhs_norm = sqrt(bb);
  if (!isfinite(res.rhs_norm)) {
    ierr = pk_error(ctx, PKRYLOV_ERR_NOT_FINITE, "pkrylov_solver_solve",
                    "argument 'b': its 2-norm overflows (scale the system)");
    goto failed;
  }
  if ((ierr = kry_true_residual(&R, &res.initial_residual)) != PKRYLOV_SUCCESS) goto failed;
  /* x0 is the first iterate seen */
  R.best_true = res.initial_residual;
  if (R.xbest >= 0 && (ierr = pk_kry_copy(E, PK_KV_X, R.xbest)) != PKRYLOV_SUCCESS) goto failed;
  R.tol = s->rtol * res.rhs_norm;
  if (s->atol > R.tol) R.tol = s->atol;
  {
    double hdr[PK_KS_DRIVER];
    memset(hdr, 0, sizeof hdr);
    hdr[PK_KS_TOL] = R.tol;
    hdr[PK_KS_RING_BASE] = (double)z.nscalars;
    hdr[PK_KS_RING_LEN] = (double)ring;
    hdr[PK_KS_RULE] = pk_solver_recurrence(s) ? 1.0 : 0.0;
    if ((ierr = pk_kry_set(E, 0, PK_KS_DRIVER, hdr)) != PKRYLOV_SUCCESS) goto failed;
  }
  if ((ierr = solve(&R, &res)) != PKRYLOV_SUCCESS) goto failed;

  /* the recurrence rule: the residual the steps recorded for the last iteration (the ring); else the true
     residual of the returned x (already known when convergence was confirmed) */
  if (pk_solver_recurrence(s) && res.reason != PKRYLOV_DIVERGED_NAN) {
    if ((ierr = pk_kry_get(E, z.nscalars + res.iterations % ring, 1, &res.final_residual)) != PKRYLOV_SUCCESS)
      goto failed;
  } else if (R.have_final && res.reason > 0) {
    res.final_residual = R.final_res;
  } else if ((ierr = kry_true_residual(&R, &res.final_residual)) != PKRYLOV_SUCCESS) {
    goto failed;
  }
  /* never worse than an iterate seen (x0 included): e.g. GMRES on a singular inconsistent system, whose
     least-squares problem degenerates, or a stagnating or diverging BiCGStab (a NaN final residual, from an
     operator that went bad, says nothing about x: it stays the driver's last good iterate). Not under the
     recurrence rule, which computes no true residual of the final x (the model's own CG returns its last
     iterate) */
  if (R.xbest >= 0 && !pk_solver_recurrence(s) && res.final_residual > R.best_true) {
    if ((ierr = pk_kry_copy(E, R.xbest, PK_KV_X)) != PKRYLOV_SUCCESS) goto failed;
    res.final_residual = R.best_true;
  }
  if ((ierr = pk_kry_unbind(E)) != PKRYLOV_SUCCESS) goto failed;
  free(x_entry);
  free(R.ringbuf);
  res.rel_residual = res.rhs_norm > 0 ? res.final_residual / res.rhs_norm : res.final_residual;
  res.converged = res.reason > 0;
  res.solve_time_s = pk_wtime() - t0;
  s->res = res;
  s->has_result = 1;
  return PKRYLOV_SUCCESS;

failed: /* only user callbacks (and backends) fail after the arguments were checked: give x back */
  E->discard_x = 1;
  (void)pk_kry_unbind(E);
  E->discard_x = 0;
  if (x_entry) memcpy(x, x_entry, sizeof(double) * (size_t)n);
  free(x_entry);
  free(R.ringbuf);
  return ierr;
}

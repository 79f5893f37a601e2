/**
 * @file srcg.c
 * @brief Single-reduction preconditioned CG on the vector engine (pk_kry.h), both backends.
 *
 * Chronopoulos and Gear (1989) in the form of d'Azevedo, Eijkhout and Romine (LAPACK Working Note 56, 1999)
 * that MITgcm's CG2D_SR uses: one global reduction per iteration instead of CG's two. Per iteration k:
 *
 *   s = z + beta s;  q = v + beta q;  x += alpha s;  r -= alpha q          (one fused pass; q = A s)
 *   z = M^-1 r;  v = A z;  (z, r), (z, v), (r, r)                          (one reduction)
 *   -> rr = (r, r): the residual of iterate k (tested first);
 *      beta = (z, r) / (z, r)_old;  (s, A s) = (z, v) - beta^2 (s, A s)_old;  alpha = (z, r) / (s, A s)
 *
 * (the scalar steps of kry_scalar_cg.h). The start computes r = b - A x, z, v and the same three sums, so
 * iteration 0's residual is tested before any iteration and the first direction is s = z, q = v. The vector
 * arithmetic per element is MITgcm's (s = z + beta s, x = x + alpha s with the new s, q = v + beta q,
 * r = r - alpha q), so the iterates are those of CG2D_SR up to the order of the global sums.
 *
 * A recurrence curvature that loses its sign is checked directly, (t, A t) with t = z + beta s, before it is
 * called a breakdown (as pipelined CG does): a sound matrix restarts the recurrences from x (at most
 * PK_SR_MAX_RESTARTS times, then stagnation). The minimum-residual iterate (pkrylov_solver_set_min_residual)
 * is one more vector, copied in the fused update when the steps say the iterate improved.
 */
#include <math.h>
#include <string.h>

#include "pk_kry.h"

/** Restarts after a recurrence curvature lost its sign while the true one kept it, before stagnation. */
#define PK_SR_MAX_RESTARTS 5

enum { SV_R = PK_KV_W0, SV_Z, SV_V, SV_S, SV_Q, SV_T, SV_XMIN, SV_N };

int pk_srcg_sizes(pkrylov_solver s, pk_kry_sizes *z) {
  z->nwork = s->min_res ? SV_N - PK_KV_W0 : SV_XMIN - PK_KV_W0;
  z->nbasis = 0;
  z->nscalars = PK_SR_NSCALARS;
  return PKRYLOV_SUCCESS;
}

static pk_kpair pair(pk_vid a, pk_vid b) {
  pk_kpair p;
  p.a = a;
  p.b = b;
  return p;
}

/** z = M^-1 r; v = A z; one reduction of (z, r), (z, v), (r, r); then scalar step id with arg. */
static int sr_reduce(pk_kry *E, int32_t id, int32_t arg) {
  PK_CALL(pk_kry_precond(E, SV_R, SV_Z));
  PK_CALL(pk_kry_matvec(E, SV_Z, SV_V));
  const pk_kpair pr[3] = {pair(SV_Z, SV_R), pair(SV_Z, SV_V), pair(SV_R, SV_R)};
  PK_CALL(pk_kry_update(E, 0, NULL, 3, pr, PK_SR_ETA, 0));
  return pk_kry_scalar(E, id, arg);
}

static int sr_start(pk_kry_run *R, int restart) {
  pk_kry *E = R->E;
  if (R->s->min_res) {
    if (!restart) {
      const double on[3] = {1.0, 0.0, -1.0}; /* MIN_ON, MIN_RR, MIN_IT */
      PK_CALL(pk_kry_set(E, PK_SR_MIN_ON, 3, on));
    }
    PK_CALL(pk_kry_copy(E, PK_KV_X, SV_XMIN)); /* a (re)start keeps its x */
  } else if (!restart) {
    const double off = 0.0;
    PK_CALL(pk_kry_set(E, PK_SR_MIN_ON, 1, &off));
  }
  PK_CALL(pk_kry_residual(E, PK_KV_X, SV_R, -1));
  return sr_reduce(E, PK_KSS_SR_INIT, restart);
}

static int sr_iter(pk_kry_run *R, pkrylov_result *res, int32_t k) {
  (void)res;
  pk_kry *E = R->E;
  const pk_coef one = pk_c(PK_S_ONE);
  const pk_vid xz[1] = {SV_Z}, xv[1] = {SV_V}, xs[1] = {SV_S}, xq[1] = {SV_Q}, xx[1] = {PK_KV_X};
  const pk_coef c1[1] = {one}, ca[1] = {pk_c(PK_SR_ALPHA)}, cna[1] = {pk_cneg(PK_SR_ALPHA)},
                ctake[1] = {pk_c(PK_SR_TAKE)};
  pk_kupd u[5];
  int nu = 0;
  if (R->s->min_res) u[nu++] = pk_kupd_make(SV_XMIN, pk_c(PK_SR_KEEP), 1, xx, ctake); /* x_{k-1} if it was */
  u[nu++] = pk_kupd_make(SV_S, pk_c(PK_SR_BETA), 1, xz, c1);
  u[nu++] = pk_kupd_make(SV_Q, pk_c(PK_SR_BETA), 1, xv, c1);
  u[nu++] = pk_kupd_make(PK_KV_X, one, 1, xs, ca);
  u[nu++] = pk_kupd_make(SV_R, one, 1, xq, cna);
  PK_CALL(pk_kry_update(E, nu, u, 0, NULL, 0, 0));
  return sr_reduce(E, PK_KSS_SR_ITER, k);
}

/** A recurrence curvature lost its sign: the true curvature of t = z + beta s decides (restart or
 *  breakdown). */
static int sr_breakdown(pk_kry_run *R, const pk_kry_status *st, pkrylov_result *res, int *restart) {
  pk_kry *E = R->E;
  double sc[2]; /* SUSPECT, CURV */
  *restart = 0;
  if (st->code != PKRYLOV_DIVERGED_BREAKDOWN_INDEFINITE_MATRIX) return PKRYLOV_SUCCESS;
  PK_CALL(pk_kry_get(E, PK_SR_SUSPECT, 1, sc));
  if (sc[0] == 0.0) return PKRYLOV_SUCCESS;
  const pk_vid xt[2] = {SV_Z, SV_S};
  const pk_coef ct[2] = {pk_c(PK_S_ONE), pk_c(PK_SR_BETA)};
  const pk_kupd u = pk_kupd_make(R->tmp, pk_c(PK_S_ZERO), 2, xt, ct);
  PK_CALL(pk_kry_update(E, 1, &u, 0, NULL, 0, 0));
  PK_CALL(pk_kry_matvec(E, R->tmp, SV_T));
  const pk_kpair pr[1] = {pair(R->tmp, SV_T)};
  PK_CALL(pk_kry_update(E, 0, NULL, 1, pr, PK_SR_CURV, 0));
  double sign;
  PK_CALL(pk_kry_get(E, PK_SR_DEN_SIGN, 1, &sign));
  PK_CALL(pk_kry_get(E, PK_SR_CURV, 1, &sc[1]));
  const double curv = sc[1];
  if (isfinite(curv) && curv != 0.0 && (curv > 0 ? 1.0 : -1.0) == sign) { /* a sound matrix */
    if (R->restarts++ >= PK_SR_MAX_RESTARTS) res->reason = PKRYLOV_DIVERGED_STAGNATION;
    else *restart = 1;
  }
  return PKRYLOV_SUCCESS;
}

int pk_srcg_solve(pk_kry_run *R, pkrylov_result *res) {
  PK_CALL(pk_kry_iterate(R, res, sr_start, sr_iter, sr_breakdown));
  if (!R->s->min_res) return PKRYLOV_SUCCESS;
  double m[4]; /* LAST_RR, MIN_ON, MIN_RR, MIN_IT */
  PK_CALL(pk_kry_get(R->E, PK_SR_LAST_RR, 4, m));
  if (pk_solver_min_result(res, m[3] >= 0, m[2], (int32_t)m[3], m[0])) {
    PK_CALL(pk_kry_copy(R->E, SV_XMIN, PK_KV_X));
    R->have_final = 0; /* a confirmed true residual was x's, not x_min's */
  }
  return PKRYLOV_SUCCESS;
}

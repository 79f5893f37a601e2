/**
 * @file bicgstab.c
 * @brief BiCGStab and pipelined BiCGStab on the vector engine (pk_kry.h), both backends.
 *
 * BiCGStab is van der Vorst's method, right preconditioned (p^ = M^-1 p, s^ = M^-1 s, so the recurrence
 * residual is the true residual's recurrence and x = x + alpha p^ + omega s^). Per iteration:
 *
 *   p^ = M^-1 p;  v = A p^;  (r0*, v)                         -> alpha = rho / (r0*, v)
 *   s = r - alpha v, fused with (s, s)                        -> early exit when ||s|| <= tol
 *   s^ = M^-1 s;  t = A s^;  (t, s), (t, t)                   -> omega = (t, s) / (t, t)
 *   x += alpha p^ + omega s^;  r = s - omega t, fused with (r0*, r), (r, r)
 *                                                              -> convergence test; beta
 *   p = beta p + r - beta omega v
 *
 * (three global reductions, each after the pass that produces its vectors; the products A p^ and A s^ with
 * the sums after them are one pk_kry_matvec_update each, which a backend may run as one pass). Breakdowns: (r0*, v) = 0 is
 * PKRYLOV_DIVERGED_BREAKDOWN_SHADOW, (t, t) = 0 or omega = 0 PKRYLOV_DIVERGED_BREAKDOWN_OMEGA (x then stays
 * the previous iterate), (r0*, r) = 0 with r not converged PKRYLOV_DIVERGED_BREAKDOWN_RHO (reported for the
 * next iteration, which cannot be formed), a NaN or Inf in any reduction PKRYLOV_DIVERGED_NAN. The steps
 * decide this on the scalars (kry_scalar_bicgstab.h), so the driver works in blocks of
 * pk_kry_sync_interval() iterations without reading anything in between.
 *
 * Residual replacement: with pkrylov_solver_set_true_residual_interval(k), every k-th iteration computes
 * r = b - A x explicitly instead of the recurrence (counted in true_residual_checks). The
 * residual_replacement option (pkrylov_solver_set_residual_replacement) is for the pipelined method only.
 */
#include <string.h>

#include "pk_kry.h"

/** y = cy*y + c0*x0 (+ c1*x1 ...) as an engine update. */
#define upd pk_kupd_make

static pk_kpair pair(pk_vid a, pk_vid b) {
  pk_kpair p;
  p.a = a;
  p.b = b;
  return p;
}

/* ---- BiCGStab ------------------------------------------------------------------------------------- */

enum { BV_R = PK_KV_W0, BV_RS, BV_P, BV_PH, BV_V, BV_S, BV_SH, BV_T, BV_N = 8 };

int pk_bicgstab_sizes(pkrylov_solver s, pk_kry_sizes *z) {
  (void)s;
  z->nwork = BV_N;
  z->nbasis = 0;
  z->nscalars = PK_BS_NSCALARS;
  return PKRYLOV_SUCCESS;
}

/** r = b - A x; r0* = r; p = r; rho = (r, r). */
static int bcg_start(pk_kry_run *R, int restart) {
  pk_kry *E = R->E;
  PK_CALL(pk_kry_residual(E, PK_KV_X, BV_R, PK_BS_RR));
  const pk_vid xr[1] = {BV_R};
  const pk_coef one[1] = {pk_c(PK_S_ONE)};
  pk_kupd u[2] = {upd(BV_RS, pk_c(PK_S_ZERO), 1, xr, one), upd(BV_P, pk_c(PK_S_ZERO), 1, xr, one)};
  PK_CALL(pk_kry_update(E, 2, u, 0, NULL, 0, 0));
  return pk_kry_scalar(E, PK_KSS_BCG_INIT, restart);
}

static int bcg_iter(pk_kry_run *R, pkrylov_result *res, int32_t k) {
  pk_kry *E = R->E;
  pkrylov_solver s = R->s;
  /* p^ = M^-1 p; v = A p^; (r0*, v) */
  PK_CALL(pk_kry_precond(E, BV_P, BV_PH));
  pk_kpair pr[2] = {pair(BV_RS, BV_V)};
  PK_CALL(pk_kry_matvec_update(E, BV_PH, BV_V, 0, NULL, 1, pr, PK_BS_SIG, 0));
  PK_CALL(pk_kry_scalar(E, PK_KSS_BCG_ALPHA, k));
  /* s = r - alpha v; (s, s) */
  {
    const pk_vid xs[2] = {BV_R, BV_V};
    const pk_coef cs[2] = {pk_c(PK_S_ONE), pk_cneg(PK_BS_ALPHA)};
    pk_kupd u = upd(BV_S, pk_c(PK_S_ZERO), 2, xs, cs);
    pr[0] = pair(BV_S, BV_S);
    PK_CALL(pk_kry_update(E, 1, &u, 1, pr, PK_BS_SS, 0));
  }
  PK_CALL(pk_kry_scalar(E, PK_KSS_BCG_SCHECK, k));
  /* s^ = M^-1 s; t = A s^; (t, s), (t, t) */
  PK_CALL(pk_kry_precond(E, BV_S, BV_SH));
  pr[0] = pair(BV_T, BV_S);
  pr[1] = pair(BV_T, BV_T);
  PK_CALL(pk_kry_matvec_update(E, BV_SH, BV_T, 0, NULL, 2, pr, PK_BS_TS, 0));
  PK_CALL(pk_kry_scalar(E, PK_KSS_BCG_OMEGA, k));
  /* x += alpha p^ + omega s^; r = s - omega t; (r0*, r), (r, r) */
  const pk_vid xx[2] = {BV_PH, BV_SH};
  const pk_coef cx[2] = {pk_c(PK_BS_ALPHA), pk_c(PK_BS_OMEGA)};
  const pk_vid xr[2] = {BV_S, BV_T};
  const pk_coef cr[2] = {pk_c(PK_S_ONE), pk_cneg(PK_BS_OMEGA)};
  pk_kupd u[2] = {upd(PK_KV_X, pk_c(PK_S_ONE), 2, xx, cx), upd(BV_R, pk_c(PK_S_ZERO), 2, xr, cr)};
  pr[0] = pair(BV_RS, BV_R);
  pr[1] = pair(BV_R, BV_R);
  if (s->true_res_interval > 0 && k % s->true_res_interval == 0) {
    /* residual replacement: r = b - A x instead of the recurrence */
    PK_CALL(pk_kry_update(E, 1, u, 0, NULL, 0, 0));
    PK_CALL(pk_kry_residual(E, PK_KV_X, BV_R, -1));
    PK_CALL(pk_kry_update(E, 0, NULL, 2, pr, PK_BS_RHONEW, 0));
    res->true_residual_checks++;
  } else {
    PK_CALL(pk_kry_update(E, 2, u, 2, pr, PK_BS_RHONEW, 0));
  }
  PK_CALL(pk_kry_scalar(E, PK_KSS_BCG_BETA, k));
  /* p = beta p + r - beta omega v */
  const pk_vid xp[2] = {BV_R, BV_V};
  const pk_coef cp[2] = {pk_c(PK_S_ONE), pk_cneg(PK_BS_BW)};
  pk_kupd up = upd(BV_P, pk_c(PK_BS_BETA), 2, xp, cp);
  return pk_kry_update(E, 1, &up, 0, NULL, 0, 0);
}

int pk_bicgstab_solve(pk_kry_run *R, pkrylov_result *res) {
  return pk_kry_iterate(R, res, bcg_start, bcg_iter, NULL);
}

/* ---- pipelined BiCGStab --------------------------------------------------------------------------- */

/*
 * Cools and Vanroose (2017), preconditioned p-BiCGStab with right preconditioning. Hats are M^-1 images;
 * s = A p^, z = A s^, v = A z^, w = A r^, t = A w^, q = r - alpha s, y = A q^ = w - alpha z. Per iteration
 * two fused passes, each followed by one global reduction that is started (PK_KRY_ASYNC) and overlapped
 * with a preconditioner application and a matvec:
 *
 *   U1: p^ = r^ + beta (p^ - omega s^);  s = w + beta (s - omega z);  s^ = w^ + beta (s^ - omega z^);
 *       z = t + beta (z - omega v);  q = r - alpha s;  q^ = r^ - alpha s^;  y = w - alpha z
 *       -> (q, y), (y, y), (q, q), (r0*, s), (r0*, z)        [overlapped: z^ = M^-1 z; v = A z^]
 *   omega = (q, y) / (y, y)   (early exit when ||q|| <= tol: x += alpha p^)
 *   U2: x += alpha p^ + omega q^;  r = q - omega y;  r^ = q^ - omega (w^ - alpha z^);
 *       w = y - omega (t - alpha v)
 *       -> (r0*, r), (r0*, w), (r, r)                         [overlapped: w^ = M^-1 w; t = A w^]
 *   beta = (alpha / omega) (r0*, r_new) / (r0*, r);
 *   alpha = (r0*, r_new) / ((r0*, w) + beta (r0*, s) - beta omega (r0*, z))
 *
 * (the paper's (r0*, s) and (r0*, z) are merged into the first reduction, where s and z are final, and
 * the residual norm into the second). Residual replacement every replace_interval iterations (and every
 * true_res_interval iterations): r, r^, w, w^, t and s, s^, z, z^, v recomputed from x and p^.
 */

enum {
  PV_R = PK_KV_W0, PV_RH, PV_W, PV_WH, PV_T, PV_PH, PV_S, PV_SH, PV_Z, PV_ZH, PV_V, PV_Q, PV_QH, PV_Y, PV_RS,
  PV_N = 15
};

int pk_pipebicgstab_sizes(pkrylov_solver s, pk_kry_sizes *z) {
  (void)s;
  z->nwork = PV_N;
  z->nbasis = 0;
  z->nscalars = PK_PB_NSCALARS;
  return PKRYLOV_SUCCESS;
}

/** r^ = M^-1 r; w = A r^; w^ = M^-1 w; t = A w^ (r given). */
static int pbcg_r_chain(pk_kry *E) {
  PK_CALL(pk_kry_precond(E, PV_R, PV_RH));
  PK_CALL(pk_kry_matvec(E, PV_RH, PV_W));
  PK_CALL(pk_kry_precond(E, PV_W, PV_WH));
  return pk_kry_matvec(E, PV_WH, PV_T);
}

static int pbcg_start(pk_kry_run *R, int restart) {
  pk_kry *E = R->E;
  PK_CALL(pk_kry_residual(E, PK_KV_X, PV_R, -1));
  PK_CALL(pbcg_r_chain(E));
  const pk_vid xr[1] = {PV_R};
  const pk_coef one[1] = {pk_c(PK_S_ONE)};
  pk_kupd u = upd(PV_RS, pk_c(PK_S_ZERO), 1, xr, one);
  pk_kpair pr[3] = {pair(PV_RS, PV_R), pair(PV_RS, PV_W), pair(PV_R, PV_R)};
  PK_CALL(pk_kry_update(E, 1, &u, 3, pr, PK_PB_RHONEW, 0));
  return pk_kry_scalar(E, PK_KSS_PBCG_INIT, restart);
}

static int pbcg_iter(pk_kry_run *R, pkrylov_result *res, int32_t k) {
  pk_kry *E = R->E;
  pkrylov_solver s = R->s;
  const pk_coef one = pk_c(PK_S_ONE), zero = pk_c(PK_S_ZERO);
  {
    /* U1 (order matters: p^ reads the old s^, s the old z, s^ the old z^) */
    const pk_vid x0[2] = {PV_RH, PV_SH}, x1[2] = {PV_W, PV_Z}, x2[2] = {PV_WH, PV_ZH}, x3[2] = {PV_T, PV_V};
    const pk_coef cb[2] = {one, pk_cneg(PK_PB_BW)};
    const pk_vid x4[2] = {PV_R, PV_S}, x5[2] = {PV_RH, PV_SH}, x6[2] = {PV_W, PV_Z};
    const pk_coef ca[2] = {one, pk_cneg(PK_PB_ALPHA)};
    pk_kupd u[7] = {upd(PV_PH, pk_c(PK_PB_BETA), 2, x0, cb), upd(PV_S, pk_c(PK_PB_BETA), 2, x1, cb),
                    upd(PV_SH, pk_c(PK_PB_BETA), 2, x2, cb), upd(PV_Z, pk_c(PK_PB_BETA), 2, x3, cb),
                    upd(PV_Q, zero, 2, x4, ca),              upd(PV_QH, zero, 2, x5, ca),
                    upd(PV_Y, zero, 2, x6, ca)};
    pk_kpair pr[5] = {pair(PV_Q, PV_Y), pair(PV_Y, PV_Y), pair(PV_Q, PV_Q), pair(PV_RS, PV_S),
                      pair(PV_RS, PV_Z)};
    PK_CALL(pk_kry_update(E, 7, u, 5, pr, PK_PB_QY, PK_KRY_ASYNC));
  }
  PK_CALL(pk_kry_precond(E, PV_Z, PV_ZH)); /* overlapped with the reduction */
  PK_CALL(pk_kry_matvec(E, PV_ZH, PV_V));
  PK_CALL(pk_kry_wait(E));
  PK_CALL(pk_kry_scalar(E, PK_KSS_PBCG_OMEGA, k));
  /* U2 */
  const pk_vid xx[2] = {PV_PH, PV_QH}, xr[2] = {PV_Q, PV_Y}, xh[3] = {PV_QH, PV_WH, PV_ZH},
               xw[3] = {PV_Y, PV_T, PV_V};
  const pk_coef cx[2] = {pk_c(PK_PB_ALPHA), pk_c(PK_PB_OMEGA)}, cr[2] = {one, pk_cneg(PK_PB_OMEGA)},
                ch[3] = {one, pk_cneg(PK_PB_OMEGA), pk_c(PK_PB_OA)};
  pk_kupd u[4] = {upd(PK_KV_X, one, 2, xx, cx), upd(PV_R, zero, 2, xr, cr), upd(PV_RH, zero, 3, xh, ch),
                  upd(PV_W, zero, 3, xw, ch)};
  pk_kpair pr[3] = {pair(PV_RS, PV_R), pair(PV_RS, PV_W), pair(PV_R, PV_R)};
  const int every = pk_solver_replace_every(s); /* PKRYLOV_REPLACE_AUTO: the fixed default */
  int replace = every > 0 && k % every == 0;
  if (s->true_res_interval > 0 && k % s->true_res_interval == 0) {
    replace = 1;
    res->true_residual_checks++;
  }
  if (!replace) {
    PK_CALL(pk_kry_update(E, 4, u, 3, pr, PK_PB_RHONEW, PK_KRY_ASYNC));
    PK_CALL(pk_kry_precond(E, PV_W, PV_WH)); /* overlapped with the reduction */
    PK_CALL(pk_kry_matvec(E, PV_WH, PV_T));
    PK_CALL(pk_kry_wait(E));
  } else {
    /* residual replacement: x from the recurrence, then r, r^, w, w^, t from b - A x and s, s^, z, z^, v
       from p^ recomputed explicitly */
    PK_CALL(pk_kry_update(E, 1, u, 0, NULL, 0, 0));
    PK_CALL(pk_kry_residual(E, PK_KV_X, PV_R, -1));
    PK_CALL(pbcg_r_chain(E));
    PK_CALL(pk_kry_matvec(E, PV_PH, PV_S));
    PK_CALL(pk_kry_precond(E, PV_S, PV_SH));
    PK_CALL(pk_kry_matvec(E, PV_SH, PV_Z));
    PK_CALL(pk_kry_precond(E, PV_Z, PV_ZH));
    PK_CALL(pk_kry_matvec(E, PV_ZH, PV_V));
    PK_CALL(pk_kry_update(E, 0, NULL, 3, pr, PK_PB_RHONEW, 0));
    pk_kpair p2[2] = {pair(PV_RS, PV_S), pair(PV_RS, PV_Z)};
    PK_CALL(pk_kry_update(E, 0, NULL, 2, p2, PK_PB_RSS, 0));
    res->residual_replacements++;
  }
  return pk_kry_scalar(E, PK_KSS_PBCG_BETA, k);
}

int pk_pipebicgstab_solve(pk_kry_run *R, pkrylov_result *res) {
  return pk_kry_iterate(R, res, pbcg_start, pbcg_iter, NULL);
}

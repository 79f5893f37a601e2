/**
 * @file rci_mkl.c
 * @brief MKL-compatible reverse-communication preconditioned CG: pkrylov_dcg_init, pkrylov_dcg_check,
 *        pkrylov_dcg, pkrylov_dcg_get with the argument lists and the ipar(128)/dpar(128)/tmp(n,4) layout of
 *        Intel MKL's RCI CG (see the group description in pkrylov.h for the caller's view).
 *
 * Re-entrancy: no static or global state. The position of the state machine is kept in ipar(3), the slot MKL
 * reserves for "the current stage of the RCI CG computation"; ipar(128) holds a signature written by
 * pkrylov_dcg_init (so that a call on an ipar that was never initialised is detected), dpar(128) the
 * current (r, z) = (r, M^-1 r) that beta needs and dpar(127) the sign of (p, A p). Every other entry has its
 * documented MKL meaning.
 *
 * Negative definite operators (ocean models store the pressure operator so) solve as with the library's
 * other CG paths: the signs of (r, M^-1 r) and (p, A p) are fixed by their first values in the solve, and a
 * breakdown is a zero, a change of sign or a NaN/Inf (pk_sign_ok).
 *
 * Algorithm (preconditioned CG, Hestenes-Stiefel form, x updated in place so that request 2 sees the
 * current iterate); the columns of tmp(n,4) are p, q = A p, r, z = M^-1 r:
 *
 *     start:   tmp(:,1) = x0                                 -> request 1: q = A x0
 *              r = b - q, ipar(4) = 0, dpar(3) = dpar(5) = (r, r); tests
 *     precond:                                               -> request 3: z = M^-1 r  (z = r without)
 *              rz = (r, z); p = z (first) or p = z + beta p, beta = rz / rz_old   -> request 1: q = A p
 *     update:  alpha = rz / (p, q); x += alpha p; r -= alpha q; dpar(6) = dpar(5); dpar(5) = (r, r);
 *              ipar(4) += 1; tests
 *     tests:   (r, r) == 0 -> 0; ipar(9) and dpar(5) <= dpar(1) dpar(3) + dpar(2) -> 0;
 *              ipar(10) -> request 2; ipar(8) and ipar(4) >= ipar(5) -> -1; else precond.
 */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <string.h>

#include "pk_impl.h"
#include "rci_mkl_common.h"

/* ---- layout of ipar/dpar beyond the entries shared with FGMRES (rci_mkl_common.h) ---------------- */
enum {
  DP_ALPHA = 6,   /* dpar(7) */
  DP_BETA = 7,    /* dpar(8) */
  DP_PQ_SIGN = 126, /* dpar(127): the sign of (p, A p) in this solve, fixed by its first value (internal) */
  DP_RZ = 127     /* dpar(128): current (r, z), of the sign its first value had (internal) */
};

/** Stages kept in ipar(3). 1 is MKL's documented initial value. */
enum {
  ST_START = 1,    /* next call requests A x0 */
  ST_X0 = 2,       /* request 1 for A x0 is out */
  ST_PRECOND = 3,  /* request 3 is out */
  ST_AP = 4,       /* request 1 for A p is out */
  ST_TESTED = 5,   /* tests done (request 2 out, or 0/-1 returned): next call continues */
  ST_BREAKDOWN = 6 /* -2 returned: every further call returns -2 */
};

/** MKL RCI_request values of the CG (beyond those shared with FGMRES, rci_mkl_common.h). */
enum { RCI_CONVERGED = 0, RCI_BREAKDOWN = -2, RCI_BAD_DPAR = -10, RCI_BAD_IPAR = -11 };

/** Names, log file (ipar(2) != 6) and signature in ipar(128) ("PKRC") of the RCI CG. */
static const pk_mkl_rci CG = {"CG",
                              "pkrylov_rci_cg.log",
                              0x504B5243,
                              "pkrylov_dcg_init",
                              "pk_dcg_init",
                              "pkrylov_dcg_check",
                              "internal; set it to 1 to restart"};

/* ---- vector kernels (the reductions in fixed chunks, rci_mkl_common.c) ------------------------- */

typedef struct {
  double alpha;
  const double *p, *q;
  double *x, *r;
} rci_update_args;

static double rci_update_range(int64_t i0, int64_t i1, void *arg) {
  const rci_update_args *a = arg;
  const double alpha = a->alpha, *p = a->p, *q = a->q;
  double *x = a->x, *r = a->r;
  double s = 0.0;
  for (int64_t i = i0; i < i1; i++) {
    x[i] += alpha * p[i];
    r[i] -= alpha * q[i];
    s += r[i] * r[i];
  }
  return s;
}

/** x += alpha p; r -= alpha q; returns (r, r). */
static double rci_update(int64_t n, double alpha, const double *p, const double *q, double *x, double *r) {
  rci_update_args a = {alpha, p, q, x, r};
  return pk_mkl_reduce(n, rci_update_range, &a);
}

/** p = z + beta p */
static void rci_direction(int64_t n, double beta, const double *z, double *p) {
#ifdef _OPENMP
#pragma omp parallel for schedule(static) if (pk_par(n))
#endif
  for (int64_t i = 0; i < n; i++) p[i] = z[i] + beta * p[i];
}

/* ---- argument checks ----------------------------------------------------------------------------- */

/** Which routine validates: the MKL code of an invalid argument differs. */
enum { FOR_CHECK, FOR_DCG };

/**
 * Validate the arguments shared by pkrylov_dcg_check and pkrylov_dcg. On failure sets *rci (dcg_check:
 * -1100; dcg: -10 for dpar, -11 for everything else), records the message and returns the pkrylov error.
 */
static int rci_validate(const char *func, int mode, const int32_t *n, const double *x, const double *b,
                        int32_t *rci, const int32_t *ipar, const double *dpar, const double *tmp) {
  const int32_t bad_ipar = mode == FOR_CHECK ? RCI_CHECK_ERROR : RCI_BAD_IPAR;
  const int32_t bad_dpar = mode == FOR_CHECK ? RCI_CHECK_ERROR : RCI_BAD_DPAR;
  PK_CALL(pk_mkl_check_ipar_n(&CG, func, n, rci, bad_ipar, bad_ipar, ipar));
  if (!x)
    return pk_mkl_fail(&CG, rci, bad_ipar, ipar, PKRYLOV_ERR_NULL_POINTER, func, "argument 'x' is NULL");
  if (!b)
    return pk_mkl_fail(&CG, rci, bad_ipar, ipar, PKRYLOV_ERR_NULL_POINTER, func, "argument 'b' is NULL");
  if (!tmp)
    return pk_mkl_fail(&CG, rci, bad_ipar, ipar, PKRYLOV_ERR_NULL_POINTER, func, "argument 'tmp' is NULL");
  if (!dpar)
    return pk_mkl_fail(&CG, rci, bad_dpar, ipar, PKRYLOV_ERR_NULL_POINTER, func, "argument 'dpar' is NULL");
  PK_CALL(pk_mkl_check_counters(&CG, func, rci, bad_ipar, ipar, ST_START, ST_BREAKDOWN, 1));
  if (mode == FOR_DCG)
    PK_CALL(pk_mkl_check_stop_test(&CG, func, rci, bad_ipar, ipar));
  PK_CALL(pk_mkl_check_tolerance(&CG, func, rci, bad_dpar, ipar, dpar, DP_RTOL, "relative tolerance"));
  PK_CALL(pk_mkl_check_tolerance(&CG, func, rci, bad_dpar, ipar, dpar, DP_ATOL, "absolute tolerance"));
  const int32_t stage = ipar[IP_STAGE];
  if (stage >= ST_PRECOND && stage != ST_BREAKDOWN) {
    /* mid-solve: the stored squared norms, (r, z) and the sign of (p, A p) must still be what pkrylov_dcg
       wrote */
    const int idx[3] = {DP_R0, DP_R, DP_RPREV};
    for (int k = 0; k < 3; k++)
      if (!isfinite(dpar[idx[k]]) || dpar[idx[k]] < 0)
        return pk_mkl_fail(&CG, rci, bad_dpar, ipar, PKRYLOV_ERR_INVALID_VALUE, func,
                           "dpar(%d) = %g was altered: it holds a squared norm of the running solve "
                           "(finite, >= 0)",
                           idx[k] + 1, dpar[idx[k]]);
    if (!isfinite(dpar[DP_RZ]) ||
        (dpar[DP_PQ_SIGN] != 0.0 && dpar[DP_PQ_SIGN] != 1.0 && dpar[DP_PQ_SIGN] != -1.0))
      return pk_mkl_fail(
          &CG, rci, bad_dpar, ipar, PKRYLOV_ERR_INVALID_VALUE, func,
          "dpar(128) = %g or dpar(127) = %g was altered: they hold (r, M^-1 r) and the sign of "
          "(p, A p) of the running solve (internal)",
          dpar[DP_RZ], dpar[DP_PQ_SIGN]);
  }
  return PKRYLOV_SUCCESS;
}

/* ---- the routines -------------------------------------------------------------------------------- */

int pkrylov_dcg_init(const int32_t *n, const double *x, const double *b, int32_t *rci_request, int32_t *ipar,
                     double *dpar, double *tmp) {
  PK_CHECK_PTR(rci_request, NULL);
  PK_CALL(pk_mkl_init_args(&CG, __func__, n, x, b, rci_request, ipar, dpar, tmp));
  pk_mkl_init_defaults(&CG, *n, ipar, dpar);
  memset(tmp, 0, sizeof(double) * 4 * (size_t)*n);
  *rci_request = RCI_CONVERGED;
  return PKRYLOV_SUCCESS;
}

int pkrylov_dcg_check(const int32_t *n, const double *x, const double *b, int32_t *rci_request, int32_t *ipar,
                      double *dpar, double *tmp) {
  PK_CHECK_PTR(rci_request, NULL);
  PK_CALL(rci_validate(__func__, FOR_CHECK, n, x, b, rci_request, ipar, dpar, tmp));
  PK_CALL(pk_mkl_check_finite(&CG, __func__, *n, x, b, rci_request, ipar));
  int changed = 0, warned = 0;
  pk_mkl_check_settings(&CG, ipar, dpar, &changed, &warned);
  *rci_request = pk_mkl_check_request(changed, warned);
  return PKRYLOV_SUCCESS;
}

/** Stop with -2 (breakdown) and remember it in ipar(3). */
static int rci_breakdown(int32_t *rci, int32_t *ipar, const char *what, double value) {
  ipar[IP_STAGE] = ST_BREAKDOWN;
  pk_mkl_fail(&CG, rci, RCI_BREAKDOWN, ipar, PKRYLOV_SUCCESS, "pkrylov_dcg",
              "breakdown at iteration %d: %s = %g is zero, not finite or of the other sign than in the "
              "first iteration (A or the preconditioner is not symmetric definite, or NaN/Inf reached the "
              "iteration)",
              (int)ipar[IP_ITER], what, value);
  return PKRYLOV_SUCCESS;
}

/**
 * After the stopping tests: iteration cap, then the next search direction (through request 3 when
 * preconditioned).
 */
static int rci_continue(int64_t n, int32_t *rci, int32_t *ipar, double *dpar, double *tmp);

/** z is ready: rz = (r, z), beta, p = z + beta p, then request 1 for q = A p. */
static int rci_new_direction(int64_t n, int32_t *rci, int32_t *ipar, double *dpar, double *tmp) {
  double *p = tmp, *r = tmp + 2 * n;
  const double *z = ipar[IP_PRECOND] ? tmp + 3 * n : r;
  const double rz = ipar[IP_PRECOND] ? pk_mkl_dot(n, r, z) : dpar[DP_R];
  /* the sign of the previous (r, z) of this solve, none at its first direction */
  double rz_sign = ipar[IP_ITER] == 0 ? 0.0 : dpar[DP_RZ] > 0 ? 1.0 : dpar[DP_RZ] < 0 ? -1.0 : 0.0;
  if (!pk_sign_ok(rz, &rz_sign)) return rci_breakdown(rci, ipar, "(r, M^-1 r)", rz);
  if (ipar[IP_ITER] == 0 || dpar[DP_RZ] == 0) {
    memcpy(p, z, sizeof(double) * (size_t)n); /* p = z */
    dpar[DP_BETA] = 0.0;
  } else {
    const double beta = rz / dpar[DP_RZ];
    rci_direction(n, beta, z, p); /* p = z + beta p */
    dpar[DP_BETA] = beta;
  }
  dpar[DP_RZ] = rz;
  ipar[IP_STAGE] = ST_AP;
  *rci = RCI_MATVEC;
  return PKRYLOV_SUCCESS;
}

static int rci_continue(int64_t n, int32_t *rci, int32_t *ipar, double *dpar, double *tmp) {
  ipar[IP_STAGE] = ST_TESTED;
  if (dpar[DP_R] == 0) { /* exact solution: there is no next direction */
    *rci = RCI_CONVERGED;
    return PKRYLOV_SUCCESS;
  }
  if (ipar[IP_TEST_MAXIT] && ipar[IP_ITER] >= ipar[IP_MAXIT]) {
    *rci = RCI_MAXIT;
    return PKRYLOV_SUCCESS;
  }
  if (ipar[IP_PRECOND]) {
    ipar[IP_STAGE] = ST_PRECOND;
    *rci = RCI_APPLY_PRECOND;
    return PKRYLOV_SUCCESS;
  }
  return rci_new_direction(n, rci, ipar, dpar, tmp);
}

/** Stopping tests on the residual just computed (ipar(4) iterations done). */
static int rci_tests(int64_t n, int32_t *rci, int32_t *ipar, double *dpar, double *tmp) {
  dpar[DP_TARGET] = dpar[DP_RTOL] * dpar[DP_R0] + dpar[DP_ATOL];
  ipar[IP_STAGE] = ST_TESTED;
  if (dpar[DP_R] == 0 || (ipar[IP_TEST_RES] && dpar[DP_R] <= dpar[DP_TARGET])) {
    *rci = RCI_CONVERGED;
    return PKRYLOV_SUCCESS;
  }
  if (ipar[IP_TEST_USER]) {
    *rci = RCI_USER_TEST;
    return PKRYLOV_SUCCESS;
  }
  return rci_continue(n, rci, ipar, dpar, tmp);
}

int pkrylov_dcg(const int32_t *n, double *x, const double *b, int32_t *rci_request, int32_t *ipar,
                double *dpar, double *tmp) {
  PK_CHECK_PTR(rci_request, NULL);
  PK_CALL(rci_validate(__func__, FOR_DCG, n, x, b, rci_request, ipar, dpar, tmp));
  const int64_t nn = *n;
  double *p = tmp, *q = tmp + nn, *r = tmp + 2 * nn;
  switch (ipar[IP_STAGE]) {
  case ST_START: /* request q = A x0 */
    memcpy(p, x, sizeof(double) * (size_t)nn);
    ipar[IP_STAGE] = ST_X0;
    *rci_request = RCI_MATVEC;
    return PKRYLOV_SUCCESS;
  case ST_X0: { /* r0 = b - A x0 */
    const double rr = pk_mkl_residual(nn, b, q, r);
    if (!isfinite(rr))
      return pk_mkl_fail(&CG, rci_request, RCI_BAD_DPAR, ipar, PKRYLOV_ERR_NOT_FINITE, __func__,
                         "the initial residual norm dpar(3) = %g is not finite: NaN or Inf in 'x', 'b' or "
                         "in tmp(:,2) = A tmp(:,1)",
                         rr);
    ipar[IP_ITER] = 0;
    dpar[DP_R0] = rr;
    dpar[DP_R] = rr;
    dpar[DP_RPREV] = 0.0;
    dpar[DP_ALPHA] = 0.0;
    dpar[DP_BETA] = 0.0;
    dpar[DP_RZ] = 0.0;
    dpar[DP_PQ_SIGN] = 0.0;
    return rci_tests(nn, rci_request, ipar, dpar, tmp);
  }
  case ST_PRECOND: /* z = M^-1 r is in tmp(:,4) */
    return rci_new_direction(nn, rci_request, ipar, dpar, tmp);
  case ST_AP: { /* q = A p is in tmp(:,2): alpha = (r, z)/(p, A p), x += alpha p, r -= alpha A p */
    const double pq = pk_mkl_dot(nn, p, q);
    double pq_sign = ipar[IP_ITER] == 0 ? 0.0 : dpar[DP_PQ_SIGN];
    if (!pk_sign_ok(pq, &pq_sign)) return rci_breakdown(rci_request, ipar, "(p, A p)", pq);
    const double alpha = dpar[DP_RZ] / pq;
    if (alpha == 0 || !isfinite(alpha)) return rci_breakdown(rci_request, ipar, "alpha", alpha);
    dpar[DP_PQ_SIGN] = pq_sign;
    const double rr = rci_update(nn, alpha, p, q, x, r);
    if (!isfinite(rr)) return rci_breakdown(rci_request, ipar, "(r, r)", rr);
    ipar[IP_ITER]++;
    dpar[DP_ALPHA] = alpha;
    dpar[DP_RPREV] = dpar[DP_R];
    dpar[DP_R] = rr;
    if (!ipar[IP_PRECOND]) dpar[DP_BETA] = rr / dpar[DP_RPREV]; /* MKL: beta = dpar(5)/dpar(6) */
    return rci_tests(nn, rci_request, ipar, dpar, tmp);
  }
  case ST_TESTED: /* the user test said "continue" (or the caller resumes after 0 / -1) */
    return rci_continue(nn, rci_request, ipar, dpar, tmp);
  default: /* ST_BREAKDOWN */
    *rci_request = RCI_BREAKDOWN;
    return PKRYLOV_SUCCESS;
  }
}

int pkrylov_dcg_get(const int32_t *n, const double *x, const double *b, const int32_t *rci_request,
                    const int32_t *ipar, const double *dpar, const double *tmp, int32_t *itercount) {
  PK_CHECK_PTR(itercount, NULL);
  PK_CHECK_PTR(ipar, NULL);
  PK_CHECK(ipar[IP_SIGNATURE] == CG.signature, NULL, PKRYLOV_ERR_INVALID_STATE,
           "argument 'ipar' was not initialised by pkrylov_dcg_init (ipar(128) = %d)",
           (int)ipar[IP_SIGNATURE]);
  *itercount = ipar[IP_ITER];
  return PKRYLOV_SUCCESS;
}

/**
 * @file rci_mkl.c
 * @brief MKL-compatible reverse-communication preconditioned CG: pkrylov_dcg_init, pkrylov_dcg_check,
 *        pkrylov_dcg, pkrylov_dcg_get with the argument lists and the ipar(128)/dpar(128)/tmp(n,4) layout of
 *        Intel MKL's RCI CG (see the group description in pkrylov.h for the caller's view).
 *
 * Re-entrancy: no static or global state. The position of the state machine is kept in ipar(3), the slot MKL
 * reserves for "the current stage of the RCI CG computation"; ipar(128) holds a signature written by
 * pkrylov_dcg_init (so that a call on an ipar that was never initialised is detected) and dpar(128) the
 * current (r, z) = (r, M^-1 r) that beta needs. Every other entry has its documented MKL meaning.
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
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "pk_impl.h"

/* ---- layout of ipar/dpar (0-based: ipar(k) is ipar[k - 1]) --------------------------------------- */
enum {
  IP_N = 0,           /* ipar(1): n */
  IP_UNIT = 1,        /* ipar(2): 6 = messages to standard error, else to the log file */
  IP_STAGE = 2,       /* ipar(3): stage of the computation (internal) */
  IP_ITER = 3,        /* ipar(4): iterations done */
  IP_MAXIT = 4,       /* ipar(5): maximum iterations */
  IP_PRINT_ERR = 5,   /* ipar(6): print errors */
  IP_PRINT_WARN = 6,  /* ipar(7): print warnings */
  IP_TEST_MAXIT = 7,  /* ipar(8): iteration-cap test */
  IP_TEST_RES = 8,    /* ipar(9): automatic residual test */
  IP_TEST_USER = 9,   /* ipar(10): user test (request 2) */
  IP_PRECOND = 10,    /* ipar(11): preconditioned */
  IP_SIGNATURE = 127  /* ipar(128): written by pkrylov_dcg_init (internal) */
};
enum {
  DP_RTOL = 0,   /* dpar(1) */
  DP_ATOL = 1,   /* dpar(2) */
  DP_R0 = 2,     /* dpar(3): ||r0||^2 */
  DP_TARGET = 3, /* dpar(4): dpar(1) dpar(3) + dpar(2) */
  DP_R = 4,      /* dpar(5): ||r||^2 */
  DP_RPREV = 5,  /* dpar(6): previous ||r||^2 */
  DP_ALPHA = 6,  /* dpar(7) */
  DP_BETA = 7,   /* dpar(8) */
  DP_RZ = 127    /* dpar(128): current (r, z) (internal) */
};
#define RCI_LEN 128
#define RCI_SIGNATURE 0x504B5243 /* "PKRC" */

/** Stages kept in ipar(3). 1 is MKL's documented initial value. */
enum {
  ST_START = 1,    /* next call requests A x0 */
  ST_X0 = 2,       /* request 1 for A x0 is out */
  ST_PRECOND = 3,  /* request 3 is out */
  ST_AP = 4,       /* request 1 for A p is out */
  ST_TESTED = 5,   /* tests done (request 2 out, or 0/-1 returned): next call continues */
  ST_BREAKDOWN = 6 /* -2 returned: every further call returns -2 */
};

/** MKL RCI_request values. */
enum {
  RCI_CONVERGED = 0,
  RCI_MATVEC = 1,
  RCI_USER_TEST = 2,
  RCI_APPLY_PRECOND = 3,
  RCI_MAXIT = -1,
  RCI_BREAKDOWN = -2,
  RCI_BAD_DPAR = -10,
  RCI_BAD_IPAR = -11,
  RCI_CHECK_WARNINGS = -1001,
  RCI_CHECK_CHANGED = -1010,
  RCI_CHECK_CHANGED_WARNINGS = -1011,
  RCI_CHECK_ERROR = -1100,
  RCI_INIT_FAILED = -10000
};

/* ---- messages ------------------------------------------------------------------------------------ */

/** Print one message line where ipar(2) says: 6 = standard error, else appended to pkrylov_rci_cg.log. */
static void rci_print(const int32_t *ipar, const char *kind, const char *msg, int32_t request) {
  FILE *f = ipar[IP_UNIT] == 6 ? stderr : fopen("pkrylov_rci_cg.log", "a");
  if (!f) return;
  fprintf(f, "pkrylov RCI CG %s: %s (RCI_request = %d)\n", kind, msg, (int)request);
  if (f != stderr) fclose(f);
}

/** 1 when ipar is non-NULL and was initialised by pkrylov_dcg_init (its print flags mean something). */
static int rci_initialised(const int32_t *ipar) { return ipar && ipar[IP_SIGNATURE] == RCI_SIGNATURE; }

/**
 * Record a message as the thread's last error (pkrylov_last_error_message()), set *rci = request when rci is
 * non-NULL, print it when ipar is initialised and ipar(6) != 0, and return code.
 */
static int rci_fail(int32_t *rci, int32_t request, const int32_t *ipar, int code, const char *func,
                    const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 6, 7)))
#endif
    ;
static int rci_fail(int32_t *rci, int32_t request, const int32_t *ipar, int code, const char *func,
                    const char *fmt, ...) {
  char buf[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  pk_error(NULL, code, func, "%s", buf);
  if (rci) *rci = request;
  if (rci_initialised(ipar) && ipar[IP_PRINT_ERR])
    rci_print(ipar, "error", pkrylov_last_error_message(), request);
  return code;
}

/** Print a warning of dcg_check when ipar(7) != 0. */
static void rci_warn(const int32_t *ipar, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;
static void rci_warn(const int32_t *ipar, const char *fmt, ...) {
  if (!ipar[IP_PRINT_WARN]) return;
  char buf[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  rci_print(ipar, "warning", buf, 0);
}

/* ---- vector kernels ------------------------------------------------------------------------------ */
/* Reductions are summed over at most RCI_CHUNKS fixed chunks whose boundaries depend on n only, then in
 * chunk order, so results do not depend on the number of threads. */
#define RCI_CHUNKS 256
#define RCI_MIN_CHUNK 4096

/** Chunk length for n values: at least RCI_MIN_CHUNK and at most RCI_CHUNKS chunks. */
static int64_t rci_chunk(int64_t n) {
  int64_t len = (n + RCI_CHUNKS - 1) / RCI_CHUNKS;
  return len < RCI_MIN_CHUNK ? RCI_MIN_CHUNK : len;
}

/** Sum of the first nc partials, in order. */
static double rci_sum(const double *part, int nc) {
  double s = 0.0;
  for (int c = 0; c < nc; c++) s += part[c];
  return s;
}

/** (x, y) = sum_i x_i y_i */
static double rci_dot(int64_t n, const double *x, const double *y) {
  double part[RCI_CHUNKS];
  const int64_t len = rci_chunk(n);
  const int nc = (int)((n + len - 1) / len);
#ifdef _OPENMP
#pragma omp parallel for schedule(static) if (nc > 1)
#endif
  for (int c = 0; c < nc; c++) {
    const int64_t i1 = (int64_t)c * len + len < n ? (int64_t)c * len + len : n;
    double s = 0.0;
    for (int64_t i = (int64_t)c * len; i < i1; i++) s += x[i] * y[i];
    part[c] = s;
  }
  return rci_sum(part, nc);
}

/** r = b - q (q = A x0); returns (r, r). */
static double rci_residual0(int64_t n, const double *b, const double *q, double *r) {
  double part[RCI_CHUNKS];
  const int64_t len = rci_chunk(n);
  const int nc = (int)((n + len - 1) / len);
#ifdef _OPENMP
#pragma omp parallel for schedule(static) if (nc > 1)
#endif
  for (int c = 0; c < nc; c++) {
    const int64_t i1 = (int64_t)c * len + len < n ? (int64_t)c * len + len : n;
    double s = 0.0;
    for (int64_t i = (int64_t)c * len; i < i1; i++) {
      r[i] = b[i] - q[i];
      s += r[i] * r[i];
    }
    part[c] = s;
  }
  return rci_sum(part, nc);
}

/** x += alpha p; r -= alpha q; returns (r, r). */
static double rci_update(int64_t n, double alpha, const double *p, const double *q, double *x, double *r) {
  double part[RCI_CHUNKS];
  const int64_t len = rci_chunk(n);
  const int nc = (int)((n + len - 1) / len);
#ifdef _OPENMP
#pragma omp parallel for schedule(static) if (nc > 1)
#endif
  for (int c = 0; c < nc; c++) {
    const int64_t i1 = (int64_t)c * len + len < n ? (int64_t)c * len + len : n;
    double s = 0.0;
    for (int64_t i = (int64_t)c * len; i < i1; i++) {
      x[i] += alpha * p[i];
      r[i] -= alpha * q[i];
      s += r[i] * r[i];
    }
    part[c] = s;
  }
  return rci_sum(part, nc);
}

/** p = z + beta p */
static void rci_direction(int64_t n, double beta, const double *z, double *p) {
#ifdef _OPENMP
#pragma omp parallel for schedule(static) if (n > RCI_MIN_CHUNK)
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
  if (!ipar) return rci_fail(rci, bad_ipar, NULL, PKRYLOV_ERR_NULL_POINTER, func, "argument 'ipar' is NULL");
  if (ipar[IP_SIGNATURE] != RCI_SIGNATURE)
    return rci_fail(rci, bad_ipar, ipar, PKRYLOV_ERR_INVALID_STATE, func,
                    "argument 'ipar' was not initialised by pkrylov_dcg_init (ipar(128) = %d): call "
                    "pkrylov_dcg_init (pk_dcg_init) first",
                    (int)ipar[IP_SIGNATURE]);
  if (!n) return rci_fail(rci, bad_ipar, ipar, PKRYLOV_ERR_NULL_POINTER, func, "argument 'n' is NULL");
  if (*n <= 0)
    return rci_fail(rci, bad_ipar, ipar, PKRYLOV_ERR_INVALID_SIZE, func, "argument 'n' = %d must be > 0",
                    (int)*n);
  if (ipar[IP_N] != *n)
    return rci_fail(rci, bad_ipar, ipar, PKRYLOV_ERR_SIZE_MISMATCH, func,
                    "argument 'n' = %d differs from ipar(1) = %d (the length given to pkrylov_dcg_init)",
                    (int)*n, (int)ipar[IP_N]);
  if (!x) return rci_fail(rci, bad_ipar, ipar, PKRYLOV_ERR_NULL_POINTER, func, "argument 'x' is NULL");
  if (!b) return rci_fail(rci, bad_ipar, ipar, PKRYLOV_ERR_NULL_POINTER, func, "argument 'b' is NULL");
  if (!tmp) return rci_fail(rci, bad_ipar, ipar, PKRYLOV_ERR_NULL_POINTER, func, "argument 'tmp' is NULL");
  if (!dpar) return rci_fail(rci, bad_dpar, ipar, PKRYLOV_ERR_NULL_POINTER, func, "argument 'dpar' is NULL");
  const int32_t stage = ipar[IP_STAGE];
  if (stage < ST_START || stage > ST_BREAKDOWN)
    return rci_fail(rci, bad_ipar, ipar, PKRYLOV_ERR_INVALID_STATE, func,
                    "ipar(3) = %d is not a stage of the computation (internal; set it to 1 to restart)",
                    (int)stage);
  if (ipar[IP_ITER] < 0)
    return rci_fail(rci, bad_ipar, ipar, PKRYLOV_ERR_INVALID_VALUE, func,
                    "ipar(4) = %d (iterations done) must be >= 0", (int)ipar[IP_ITER]);
  if (ipar[IP_TEST_MAXIT] && ipar[IP_MAXIT] < 0)
    return rci_fail(rci, bad_ipar, ipar, PKRYLOV_ERR_INVALID_VALUE, func,
                    "ipar(5) = %d (maximum iterations) must be >= 0", (int)ipar[IP_MAXIT]);
  if (mode == FOR_DCG && !ipar[IP_TEST_MAXIT] && !ipar[IP_TEST_RES] && !ipar[IP_TEST_USER])
    return rci_fail(rci, bad_ipar, ipar, PKRYLOV_ERR_INVALID_VALUE, func,
                    "ipar(8), ipar(9) and ipar(10) are all 0: no stopping test, the iteration would not end "
                    "(pkrylov_dcg_check enables ipar(8) and ipar(9))");
  const char *const tol_name[2] = {"relative", "absolute"};
  for (int k = DP_RTOL; k <= DP_ATOL; k++)
    if (!isfinite(dpar[k]) || dpar[k] < 0)
      return rci_fail(rci, bad_dpar, ipar, PKRYLOV_ERR_INVALID_VALUE, func,
                      "dpar(%d) = %g (%s tolerance) must be finite and >= 0", k + 1, dpar[k], tol_name[k]);
  if (stage >= ST_PRECOND && stage != ST_BREAKDOWN) {
    /* mid-solve: the stored squared norms must still be what pkrylov_dcg wrote */
    const int idx[4] = {DP_R0, DP_R, DP_RPREV, DP_RZ};
    for (int k = 0; k < 4; k++)
      if (!isfinite(dpar[idx[k]]) || dpar[idx[k]] < 0)
        return rci_fail(rci, bad_dpar, ipar, PKRYLOV_ERR_INVALID_VALUE, func,
                        "dpar(%d) = %g was altered: it holds a squared norm of the running solve "
                        "(finite, >= 0)",
                        idx[k] + 1, dpar[idx[k]]);
  }
  return PKRYLOV_SUCCESS;
}

/* ---- the routines -------------------------------------------------------------------------------- */

int pkrylov_dcg_init(const int32_t *n, const double *x, const double *b, int32_t *rci_request, int32_t *ipar,
                     double *dpar, double *tmp) {
  PK_CHECK_PTR(rci_request, NULL);
  if (!n) return rci_fail(rci_request, RCI_INIT_FAILED, NULL, PKRYLOV_ERR_NULL_POINTER, __func__,
                          "argument 'n' is NULL");
  if (*n <= 0)
    return rci_fail(rci_request, RCI_INIT_FAILED, NULL, PKRYLOV_ERR_INVALID_SIZE, __func__,
                    "argument 'n' = %d must be > 0", (int)*n);
  const char *names[5] = {"x", "b", "ipar", "dpar", "tmp"};
  const void *ptrs[5] = {x, b, ipar, dpar, tmp};
  for (int k = 0; k < 5; k++)
    if (!ptrs[k])
      return rci_fail(rci_request, RCI_INIT_FAILED, NULL, PKRYLOV_ERR_NULL_POINTER, __func__,
                      "argument '%s' is NULL", names[k]);
  memset(ipar, 0, sizeof(int32_t) * RCI_LEN);
  memset(dpar, 0, sizeof(double) * RCI_LEN);
  memset(tmp, 0, sizeof(double) * 4 * (size_t)*n);
  ipar[IP_N] = *n;
  ipar[IP_UNIT] = 6;
  ipar[IP_STAGE] = ST_START;
  ipar[IP_ITER] = 0;
  ipar[IP_MAXIT] = *n < 150 ? *n : 150;
  ipar[IP_PRINT_ERR] = 1;
  ipar[IP_PRINT_WARN] = 1;
  ipar[IP_TEST_MAXIT] = 1;
  ipar[IP_TEST_RES] = 0;
  ipar[IP_TEST_USER] = 1;
  ipar[IP_PRECOND] = 0;
  ipar[IP_SIGNATURE] = RCI_SIGNATURE;
  dpar[DP_RTOL] = 1e-6;
  dpar[DP_ATOL] = 0.0;
  *rci_request = RCI_CONVERGED;
  return PKRYLOV_SUCCESS;
}

int pkrylov_dcg_check(const int32_t *n, const double *x, const double *b, int32_t *rci_request, int32_t *ipar,
                      double *dpar, double *tmp) {
  PK_CHECK_PTR(rci_request, NULL);
  PK_CALL(rci_validate(__func__, FOR_CHECK, n, x, b, rci_request, ipar, dpar, tmp));
  const int64_t first_x = pk_first_nonfinite(x, *n), first_b = pk_first_nonfinite(b, *n);
  if (first_x >= 0 || first_b >= 0)
    return rci_fail(rci_request, RCI_CHECK_ERROR, ipar, PKRYLOV_ERR_NOT_FINITE, __func__,
                    "argument '%s' has NaN or Inf at index %lld", first_b >= 0 ? "b" : "x",
                    (long long)(first_b >= 0 ? first_b : first_x) + 1);
  int changed = 0, warned = 0;
  if (!ipar[IP_TEST_MAXIT] && !ipar[IP_TEST_RES] && !ipar[IP_TEST_USER]) {
    ipar[IP_TEST_MAXIT] = 1;
    ipar[IP_TEST_RES] = 1;
    changed = 1;
    rci_warn(ipar, "no stopping test was enabled (ipar(8) = ipar(9) = ipar(10) = 0): ipar(8) and ipar(9) "
                   "set to 1");
  }
  if (ipar[IP_TEST_RES] && dpar[DP_RTOL] == 0 && dpar[DP_ATOL] == 0) {
    warned = 1;
    rci_warn(ipar, "ipar(9) != 0 but dpar(1) = dpar(2) = 0: the residual test passes only for a zero "
                   "residual");
  }
  if (ipar[IP_TEST_RES] && dpar[DP_RTOL] >= 1) {
    warned = 1;
    rci_warn(ipar, "dpar(1) = %g >= 1: the residual test passes on the initial residual", dpar[DP_RTOL]);
  }
  if (ipar[IP_TEST_MAXIT] && ipar[IP_MAXIT] == 0) {
    warned = 1;
    rci_warn(ipar, "ipar(5) = 0: the iteration cap stops the solve before the first iteration");
  }
  *rci_request = changed ? (warned ? RCI_CHECK_CHANGED_WARNINGS : RCI_CHECK_CHANGED)
                         : (warned ? RCI_CHECK_WARNINGS : RCI_CONVERGED);
  return PKRYLOV_SUCCESS;
}

/** Stop with -2 (breakdown) and remember it in ipar(3). */
static int rci_breakdown(int32_t *rci, int32_t *ipar, const char *what, double value) {
  ipar[IP_STAGE] = ST_BREAKDOWN;
  rci_fail(rci, RCI_BREAKDOWN, ipar, PKRYLOV_SUCCESS, "pkrylov_dcg",
           "breakdown at iteration %d: %s = %g (A or the preconditioner is not symmetric positive definite, "
           "or NaN/Inf reached the iteration)",
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
  const double rz = ipar[IP_PRECOND] ? rci_dot(n, r, z) : dpar[DP_R];
  if (!(rz > 0) || !isfinite(rz)) return rci_breakdown(rci, ipar, "(r, M^-1 r)", rz);
  if (ipar[IP_ITER] == 0 || !(dpar[DP_RZ] > 0)) {
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
    const double rr = rci_residual0(nn, b, q, r);
    if (!isfinite(rr))
      return rci_fail(rci_request, RCI_BAD_DPAR, ipar, PKRYLOV_ERR_NOT_FINITE, __func__,
                      "the initial residual norm dpar(3) = %g is not finite: NaN or Inf in 'x', 'b' or in "
                      "tmp(:,2) = A tmp(:,1)",
                      rr);
    ipar[IP_ITER] = 0;
    dpar[DP_R0] = rr;
    dpar[DP_R] = rr;
    dpar[DP_RPREV] = 0.0;
    dpar[DP_ALPHA] = 0.0;
    dpar[DP_BETA] = 0.0;
    dpar[DP_RZ] = 0.0;
    return rci_tests(nn, rci_request, ipar, dpar, tmp);
  }
  case ST_PRECOND: /* z = M^-1 r is in tmp(:,4) */
    return rci_new_direction(nn, rci_request, ipar, dpar, tmp);
  case ST_AP: { /* q = A p is in tmp(:,2): alpha = (r, z)/(p, A p), x += alpha p, r -= alpha A p */
    const double pq = rci_dot(nn, p, q);
    if (!(pq > 0) || !isfinite(pq)) return rci_breakdown(rci_request, ipar, "(p, A p)", pq);
    const double alpha = dpar[DP_RZ] / pq;
    if (!(alpha > 0) || !isfinite(alpha)) return rci_breakdown(rci_request, ipar, "alpha", alpha);
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
  PK_CHECK(ipar[IP_SIGNATURE] == RCI_SIGNATURE, NULL, PKRYLOV_ERR_INVALID_STATE,
           "argument 'ipar' was not initialised by pkrylov_dcg_init (ipar(128) = %d)",
           (int)ipar[IP_SIGNATURE]);
  *itercount = ipar[IP_ITER];
  return PKRYLOV_SUCCESS;
}

/**
 * @file rci_mkl_common.c
 * @brief What the MKL-compatible RCI CG (rci_mkl.c) and RCI FGMRES (rci_fgmres.c) share: messages, argument
 *        checks of the same shape, the init defaults and the checks of the check routines, and the
 *        deterministic vector kernels (see rci_mkl_common.h). No static or global state.
 */
#define _POSIX_C_SOURCE 200809L
#include "pk_impl.h"
#include "rci_mkl_common.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "pk_impl.h"

/* ---- messages ------------------------------------------------------------------------------------ */

/** Print one message line where ipar(2) says: 6 = standard error, else appended to the solver's log file. */
static void mkl_print(const pk_mkl_rci *s, const int32_t *ipar, const char *kind, const char *msg,
                      int32_t request) {
  FILE *f = ipar[IP_UNIT] == 6 ? stderr : fopen(s->log_file, "a");
  if (!f)
    return;
  fprintf(f, "pkrylov RCI %s %s: %s (RCI_request = %d)\n", s->tag, kind, msg, (int)request);
  if (f != stderr)
    fclose(f);
}

int pk_mkl_initialised(const pk_mkl_rci *s, const int32_t *ipar) {
  return ipar && ipar[IP_SIGNATURE] == s->signature;
}

int pk_mkl_fail(const pk_mkl_rci *s, int32_t *rci, int32_t request, const int32_t *ipar, int code,
                const char *func, const char *fmt, ...) {
  char buf[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  pk_error(NULL, code, func, "%s", buf);
  if (rci)
    *rci = request;
  if (pk_mkl_initialised(s, ipar) && ipar[IP_PRINT_ERR])
    mkl_print(s, ipar, "error", pkrylov_last_error_message(), request);
  return code;
}

void pk_mkl_warn(const pk_mkl_rci *s, const int32_t *ipar, const char *fmt, ...) {
  if (!ipar[IP_PRINT_WARN])
    return;
  char buf[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  mkl_print(s, ipar, "warning", buf, 0);
}

/* ---- argument checks of the same shape ----------------------------------------------------------- */

int pk_mkl_check_ipar_n(const pk_mkl_rci *s, const char *func, const int32_t *n, int32_t *rci,
                        int32_t bad_arg, int32_t bad, const int32_t *ipar) {
  if (!ipar)
    return pk_mkl_fail(s, rci, bad_arg, NULL, PKRYLOV_ERR_NULL_POINTER, func, "argument 'ipar' is NULL");
  if (ipar[IP_SIGNATURE] != s->signature)
    return pk_mkl_fail(s, rci, bad, ipar, PKRYLOV_ERR_INVALID_STATE, func,
                       "argument 'ipar' was not initialised by %s (ipar(128) = %d): call %s (%s) first",
                       s->init_name, (int)ipar[IP_SIGNATURE], s->init_name, s->finit_name);
  if (!n)
    return pk_mkl_fail(s, rci, bad_arg, ipar, PKRYLOV_ERR_NULL_POINTER, func, "argument 'n' is NULL");
  if (*n <= 0)
    return pk_mkl_fail(s, rci, bad_arg, ipar, PKRYLOV_ERR_INVALID_SIZE, func, "argument 'n' = %d must be > 0",
                       (int)*n);
  if (ipar[IP_N] != *n)
    return pk_mkl_fail(s, rci, bad, ipar, PKRYLOV_ERR_SIZE_MISMATCH, func,
                       "argument 'n' = %d differs from ipar(1) = %d (the length given to %s)", (int)*n,
                       (int)ipar[IP_N], s->init_name);
  return PKRYLOV_SUCCESS;
}

int pk_mkl_check_counters(const pk_mkl_rci *s, const char *func, int32_t *rci, int32_t bad,
                          const int32_t *ipar, int32_t first_stage, int32_t last_stage, int counting) {
  const int32_t stage = ipar[IP_STAGE];
  if (stage < first_stage || stage > last_stage)
    return pk_mkl_fail(s, rci, bad, ipar, PKRYLOV_ERR_INVALID_STATE, func,
                       "ipar(3) = %d is not a stage of the computation (%s)", (int)stage, s->stage_hint);
  if (ipar[IP_ITER] < 0)
    return pk_mkl_fail(s, rci, bad, ipar, PKRYLOV_ERR_INVALID_VALUE, func,
                       "ipar(4) = %d (iterations done) must be >= 0", (int)ipar[IP_ITER]);
  if (counting && ipar[IP_ITER] == INT32_MAX)
    return pk_mkl_fail(
        s, rci, bad, ipar, PKRYLOV_ERR_INVALID_VALUE, func,
        "ipar(4) = %d (iterations done) is the largest 32-bit integer: no further iteration can "
        "be counted (set ipar(3) = 1 to restart from x, which sets it to 0)",
        (int)ipar[IP_ITER]);
  if (ipar[IP_TEST_MAXIT] && ipar[IP_MAXIT] < 0)
    return pk_mkl_fail(s, rci, bad, ipar, PKRYLOV_ERR_INVALID_VALUE, func,
                       "ipar(5) = %d (maximum iterations) must be >= 0", (int)ipar[IP_MAXIT]);
  return PKRYLOV_SUCCESS;
}

int pk_mkl_check_stop_test(const pk_mkl_rci *s, const char *func, int32_t *rci, int32_t bad,
                           const int32_t *ipar) {
  if (!ipar[IP_TEST_MAXIT] && !ipar[IP_TEST_RES] && !ipar[IP_TEST_USER])
    return pk_mkl_fail(
        s, rci, bad, ipar, PKRYLOV_ERR_INVALID_VALUE, func,
        "ipar(8), ipar(9) and ipar(10) are all 0: no stopping test, the iteration would not end "
        "(%s enables ipar(8) and ipar(9))",
        s->check_name);
  return PKRYLOV_SUCCESS;
}

int pk_mkl_check_tolerance(const pk_mkl_rci *s, const char *func, int32_t *rci, int32_t bad,
                           const int32_t *ipar, const double *dpar, int k, const char *what) {
  if (!isfinite(dpar[k]) || dpar[k] < 0)
    return pk_mkl_fail(s, rci, bad, ipar, PKRYLOV_ERR_INVALID_VALUE, func,
                       "dpar(%d) = %g (%s) must be finite and >= 0", k + 1, dpar[k], what);
  return PKRYLOV_SUCCESS;
}

/* ---- init and check routines --------------------------------------------------------------------- */

int pk_mkl_init_args(const pk_mkl_rci *s, const char *func, const int32_t *n, const double *x,
                     const double *b, int32_t *rci, const int32_t *ipar, const double *dpar,
                     const double *tmp) {
  if (!n)
    return pk_mkl_fail(s, rci, RCI_FAILED, NULL, PKRYLOV_ERR_NULL_POINTER, func, "argument 'n' is NULL");
  if (*n <= 0)
    return pk_mkl_fail(s, rci, RCI_FAILED, NULL, PKRYLOV_ERR_INVALID_SIZE, func,
                       "argument 'n' = %d must be > 0", (int)*n);
  const char *names[5] = {"x", "b", "ipar", "dpar", "tmp"};
  const void *ptrs[5] = {x, b, ipar, dpar, tmp};
  for (int k = 0; k < 5; k++)
    if (!ptrs[k])
      return pk_mkl_fail(s, rci, RCI_FAILED, NULL, PKRYLOV_ERR_NULL_POINTER, func, "argument '%s' is NULL",
                         names[k]);
  return PKRYLOV_SUCCESS;
}

void pk_mkl_init_defaults(const pk_mkl_rci *s, int32_t n, int32_t *ipar, double *dpar) {
  memset(ipar, 0, sizeof(int32_t) * PK_MKL_RCI_LEN);
  memset(dpar, 0, sizeof(double) * PK_MKL_RCI_LEN);
  ipar[IP_N] = n;
  ipar[IP_UNIT] = 6;
  ipar[IP_STAGE] = 1; /* MKL's documented initial stage */
  ipar[IP_ITER] = 0;
  ipar[IP_MAXIT] = n < 150 ? n : 150;
  ipar[IP_PRINT_ERR] = 1;
  ipar[IP_PRINT_WARN] = 1;
  ipar[IP_TEST_MAXIT] = 1;
  ipar[IP_TEST_RES] = 0;
  ipar[IP_TEST_USER] = 1;
  ipar[IP_PRECOND] = 0;
  ipar[IP_SIGNATURE] = s->signature;
  dpar[DP_RTOL] = 1e-6;
  dpar[DP_ATOL] = 0.0;
}

int pk_mkl_check_finite(const pk_mkl_rci *s, const char *func, int64_t n, const double *x, const double *b,
                        int32_t *rci, const int32_t *ipar) {
  const int64_t first_x = pk_first_nonfinite(x, n), first_b = pk_first_nonfinite(b, n);
  if (first_x >= 0 || first_b >= 0)
    return pk_mkl_fail(s, rci, RCI_CHECK_ERROR, ipar, PKRYLOV_ERR_NOT_FINITE, func,
                       "argument '%s' has NaN or Inf at index %lld", first_b >= 0 ? "b" : "x",
                       (long long)(first_b >= 0 ? first_b : first_x) + 1);
  return PKRYLOV_SUCCESS;
}

void pk_mkl_check_settings(const pk_mkl_rci *s, int32_t *ipar, const double *dpar, int *changed,
                           int *warned) {
  if (!ipar[IP_TEST_MAXIT] && !ipar[IP_TEST_RES] && !ipar[IP_TEST_USER]) {
    ipar[IP_TEST_MAXIT] = 1;
    ipar[IP_TEST_RES] = 1;
    *changed = 1;
    pk_mkl_warn(
        s, ipar,
        "no stopping test was enabled (ipar(8) = ipar(9) = ipar(10) = 0): ipar(8) and ipar(9) set to 1");
  }
  if (ipar[IP_TEST_RES] && dpar[DP_RTOL] == 0 && dpar[DP_ATOL] == 0) {
    *warned = 1;
    pk_mkl_warn(s, ipar,
                "ipar(9) != 0 but dpar(1) = dpar(2) = 0: the residual test passes only for a zero residual");
  }
  if (ipar[IP_TEST_RES] && dpar[DP_RTOL] >= 1) {
    *warned = 1;
    pk_mkl_warn(s, ipar, "dpar(1) = %g >= 1: the residual test passes on the initial residual",
                dpar[DP_RTOL]);
  }
  if (ipar[IP_TEST_MAXIT] && ipar[IP_MAXIT] == 0) {
    *warned = 1;
    pk_mkl_warn(s, ipar, "ipar(5) = 0: the iteration cap stops the solve before the first iteration");
  }
}

int32_t pk_mkl_check_request(int changed, int warned) {
  return changed ? (warned ? RCI_CHECK_CHANGED_WARNINGS : RCI_CHECK_CHANGED)
                 : (warned ? RCI_CHECK_WARNINGS : 0);
}

/* ---- vector kernels ------------------------------------------------------------------------------ */

double pk_mkl_reduce(int64_t n, pk_mkl_range_fn f, void *arg) {
  double part[PK_MKL_CHUNKS];
  int64_t len = (n + PK_MKL_CHUNKS - 1) / PK_MKL_CHUNKS;
  if (len < PK_MKL_MIN_CHUNK)
    len = PK_MKL_MIN_CHUNK;
  const int nc = (int)((n + len - 1) / len);
#ifdef _OPENMP
#pragma omp parallel for schedule(static) if (pk_par(n))
#endif
  for (int c = 0; c < nc; c++) {
    const int64_t i0 = (int64_t)c * len;
    part[c] = f(i0, i0 + len < n ? i0 + len : n, arg);
  }
  double s = 0.0;
  for (int c = 0; c < nc; c++)
    s += part[c];
  return s;
}

typedef struct {
  const double *x, *y;
  double *r;
} mkl_vectors;

static double dot_range(int64_t i0, int64_t i1, void *arg) {
  const mkl_vectors *v = arg;
  const double *x = v->x, *y = v->y;
  double s = 0.0;
  for (int64_t i = i0; i < i1; i++)
    s += x[i] * y[i];
  return s;
}

double pk_mkl_dot(int64_t n, const double *x, const double *y) {
  mkl_vectors v = {x, y, NULL};
  return pk_mkl_reduce(n, dot_range, &v);
}

static double residual_range(int64_t i0, int64_t i1, void *arg) {
  const mkl_vectors *v = arg;
  const double *b = v->x, *q = v->y;
  double *r = v->r;
  double s = 0.0;
  for (int64_t i = i0; i < i1; i++) {
    r[i] = b[i] - q[i];
    s += r[i] * r[i];
  }
  return s;
}

double pk_mkl_residual(int64_t n, const double *b, const double *q, double *r) {
  mkl_vectors v = {b, q, r};
  return pk_mkl_reduce(n, residual_range, &v);
}

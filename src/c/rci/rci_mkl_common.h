/**
 * @file rci_mkl_common.h
 * @brief What the two MKL-compatible reverse-communication solvers share (internal: included by rci_mkl.c,
 *        the RCI CG, and rci_fgmres.c, the RCI FGMRES, only): the ipar/dpar entries whose meaning MKL's RCI
 *        CG and RCI FGMRES document alike, the RCI_request values both use, the message printing (standard
 *        error or the solver's log file, by ipar(2)), the argument checks of the same shape, the checks of
 *        dcg_check / dfgmres_check, the defaults written by the init routines and the deterministic vector
 *        kernels. Each solver keeps its own stages, request codes and messages; the texts printed here are
 *        parametrised by the solver's description (pk_mkl_rci) so they stay word for word what each solver
 *        printed before.
 */
#ifndef PKRYLOV_RCI_MKL_COMMON_H
#define PKRYLOV_RCI_MKL_COMMON_H

#include <stdint.h>

/* ---- ipar/dpar entries shared by MKL's RCI CG and RCI FGMRES (0-based: ipar(k) is ipar[k - 1]) ---- */
enum {
  IP_N = 0,          /* ipar(1): n */
  IP_UNIT = 1,       /* ipar(2): 6 = messages to standard error, else to the log file */
  IP_STAGE = 2,      /* ipar(3): stage of the computation */
  IP_ITER = 3,       /* ipar(4): iterations done */
  IP_MAXIT = 4,      /* ipar(5): maximum iterations */
  IP_PRINT_ERR = 5,  /* ipar(6): print errors */
  IP_PRINT_WARN = 6, /* ipar(7): print warnings */
  IP_TEST_MAXIT = 7, /* ipar(8): iteration-cap test */
  IP_TEST_RES = 8,   /* ipar(9): automatic residual test */
  IP_TEST_USER = 9,  /* ipar(10): user test (request 2) */
  IP_PRECOND = 10,   /* ipar(11): preconditioned (request 3) */
  IP_SIGNATURE = 127 /* ipar(128): written by the init routine (internal) */
};
enum {
  DP_RTOL = 0,   /* dpar(1): relative tolerance */
  DP_ATOL = 1,   /* dpar(2): absolute tolerance */
  DP_R0 = 2,     /* dpar(3): initial residual (CG: squared norm, FGMRES: norm) */
  DP_TARGET = 3, /* dpar(4): dpar(1) dpar(3) + dpar(2) */
  DP_R = 4,      /* dpar(5): current residual */
  DP_RPREV = 5   /* dpar(6): previous residual */
};
#define PK_MKL_RCI_LEN 128 /* length of ipar and dpar */

/** RCI_request values with the same meaning in MKL's RCI CG and RCI FGMRES. */
enum {
  RCI_MATVEC = 1,
  RCI_USER_TEST = 2,
  RCI_APPLY_PRECOND = 3,
  RCI_MAXIT = -1,
  RCI_CHECK_WARNINGS = -1001,
  RCI_CHECK_CHANGED = -1010,
  RCI_CHECK_CHANGED_WARNINGS = -1011,
  RCI_CHECK_ERROR = -1100,
  RCI_FAILED = -10000 /* the init routine (and FGMRES's get) failed */
};

/** What differs in the shared messages: the solver's names, log file and ipar(128) signature. */
typedef struct pk_mkl_rci {
  const char *tag;        /* in every printed line: "pkrylov RCI <tag> error: ..." */
  const char *log_file;   /* where messages go when ipar(2) != 6 */
  int32_t signature;      /* ipar(128) after the init routine */
  const char *init_name;  /* the C init routine, e.g. "pkrylov_dcg_init" */
  const char *finit_name; /* its Fortran name, e.g. "pk_dcg_init" */
  const char *check_name; /* the check routine, e.g. "pkrylov_dcg_check" */
  const char *stage_hint; /* how to get out of a bad ipar(3), in its message */
} pk_mkl_rci;

/* ---- messages ------------------------------------------------------------------------------------ */

/** 1 when ipar is non-NULL and was initialised by the solver's init routine (its print flags mean something).
 */
int pk_mkl_initialised(const pk_mkl_rci *s, const int32_t *ipar);

/**
 * Record a message as the thread's last error (pkrylov_last_error_message()), set *rci = request when rci is
 * non-NULL, print it when ipar is initialised and ipar(6) != 0 (standard error when ipar(2) = 6, else
 * appended to the solver's log file), and return code.
 */
int pk_mkl_fail(const pk_mkl_rci *s, int32_t *rci, int32_t request, const int32_t *ipar, int code,
                const char *func, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 7, 8)))
#endif
    ;

/** Print a warning when ipar(7) != 0. */
void pk_mkl_warn(const pk_mkl_rci *s, const int32_t *ipar, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;

/* ---- argument checks of the same shape ----------------------------------------------------------- */

/**
 * ipar non-NULL and initialised, n non-NULL, > 0 and equal to ipar(1). bad_arg is the request for a NULL
 * ipar or n and for n <= 0, bad the one for an uninitialised ipar and a mismatch.
 */
int pk_mkl_check_ipar_n(const pk_mkl_rci *s, const char *func, const int32_t *n, int32_t *rci,
                        int32_t bad_arg, int32_t bad, const int32_t *ipar);

/**
 * ipar(3) in first_stage..last_stage, ipar(4) >= 0 (and, for a routine that counts iterations, counting != 0,
 * below INT32_MAX so that the next one can be counted) and, with ipar(8), ipar(5) >= 0; request bad
 * otherwise.
 */
int pk_mkl_check_counters(const pk_mkl_rci *s, const char *func, int32_t *rci, int32_t bad,
                          const int32_t *ipar, int32_t first_stage, int32_t last_stage, int counting);

/** At least one of ipar(8), ipar(9), ipar(10) set (the solve routine); request bad otherwise. */
int pk_mkl_check_stop_test(const pk_mkl_rci *s, const char *func, int32_t *rci, int32_t bad,
                           const int32_t *ipar);

/** dpar(k + 1), the `what`, finite and >= 0; request bad otherwise. */
int pk_mkl_check_tolerance(const pk_mkl_rci *s, const char *func, int32_t *rci, int32_t bad,
                           const int32_t *ipar, const double *dpar, int k, const char *what);

/* ---- init and check routines --------------------------------------------------------------------- */

/** The init routine's checks: n non-NULL and > 0, x, b, ipar, dpar, tmp non-NULL; request RCI_FAILED. */
int pk_mkl_init_args(const pk_mkl_rci *s, const char *func, const int32_t *n, const double *x,
                     const double *b, int32_t *rci, const int32_t *ipar, const double *dpar,
                     const double *tmp);

/**
 * Zero ipar(1:128) and dpar(1:128), then MKL's defaults of the shared entries: ipar(1) = n, ipar(2) = 6,
 * ipar(3) = 1, ipar(5) = min(n, 150), ipar(6) = ipar(7) = ipar(8) = ipar(10) = 1, dpar(1) = 1e-6, and the
 * signature in ipar(128).
 */
void pk_mkl_init_defaults(const pk_mkl_rci *s, int32_t n, int32_t *ipar, double *dpar);

/** The check routine: x and b finite (request RCI_CHECK_ERROR otherwise). */
int pk_mkl_check_finite(const pk_mkl_rci *s, const char *func, int64_t n, const double *x, const double *b,
                        int32_t *rci, const int32_t *ipar);

/**
 * The check routine's corrections and warnings on the shared settings: no stopping test (ipar(8), ipar(9)
 * set: *changed = 1), the residual test with zero tolerances or dpar(1) >= 1, a zero iteration cap
 * (*warned = 1).
 */
void pk_mkl_check_settings(const pk_mkl_rci *s, int32_t *ipar, const double *dpar, int *changed, int *warned);

/** The check routine's RCI_request: 0, -1001, -1010 or -1011. */
int32_t pk_mkl_check_request(int changed, int warned);

/* ---- vector kernels ------------------------------------------------------------------------------ */
/* Reductions are summed over at most PK_MKL_CHUNKS fixed chunks whose boundaries depend on n only, then in
 * chunk order, so results do not depend on the number of threads. */
#define PK_MKL_CHUNKS 256
#define PK_MKL_MIN_CHUNK 4096

/** A chunk's part of a reduction: the partial sum over i0 <= i < i1 (and whatever else it writes there). */
typedef double (*pk_mkl_range_fn)(int64_t i0, int64_t i1, void *arg);

/** Sum of f over the fixed chunks of 0..n, OpenMP-parallel over the chunks, added in chunk order. */
double pk_mkl_reduce(int64_t n, pk_mkl_range_fn f, void *arg);

/** (x, y) = sum_i x_i y_i */
double pk_mkl_dot(int64_t n, const double *x, const double *y);

/** r = b - q; returns (r, r). */
double pk_mkl_residual(int64_t n, const double *b, const double *q, double *r);

#endif

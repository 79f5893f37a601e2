/**
 * @file rci_fgmres.c
 * @brief MKL-compatible reverse-communication flexible GMRES: pkrylov_dfgmres_init, pkrylov_dfgmres_check,
 *        pkrylov_dfgmres, pkrylov_dfgmres_get with the argument lists and the ipar(128)/dpar(128)/tmp layout
 *        of Intel MKL's RCI FGMRES (see the group description in pkrylov.h for the caller's view).
 *
 * Re-entrancy: no static or global state. The position of the state machine is in ipar(3) (MKL's "current
 * stage"), the inner iteration count in ipar(14), and four reserved entries hold what MKL keeps hidden:
 * ipar(128) a signature written by pkrylov_dfgmres_init, ipar(127) the restart length and ipar(126) the
 * preconditioning flag of the running restart cycle (so a change of ipar(15) or ipar(11) in mid-cycle is
 * detected instead of corrupting the cycle), ipar(125) a copy of the stage (so a changed ipar(3) is seen).
 * Everything else lives in the caller's tmp. Every call checks ipar(3), ipar(14), the offsets ipar(16..23)
 * against the stage before it touches anything, so that no ipar makes it read or write outside tmp.
 *
 * tmp layout (1-based offsets, m = ipar(15), length (2m+1)n + m(m+9)/2 + 1 exactly as MKL documents):
 *     tmp(1 : (m+1)n)        the Krylov basis v_1 .. v_{m+1}, v_i at (i-1)n + 1
 *     tmp(ipar(16)), m(m+1)/2 the rotated Hessenberg matrix R, upper triangle packed by columns:
 *                             R(i,j) at ipar(16) - 1 + j(j-1)/2 + i
 *     tmp(ipar(17)), m       the cosines of the Givens rotations
 *     tmp(ipar(18)), m       their sines
 *     tmp(ipar(19)), m+1     the rotated residual vector g (|g(j+1)| is the residual norm after j steps)
 *     tmp(ipar(20)), m       the least-squares solution y (written by dfgmres_get and at restarts)
 *     tmp(ipar(21)), m n     the preconditioned vectors z_1 .. z_m (only with ipar(11) != 0)
 *
 * Algorithm (Saad's flexible GMRES, right preconditioning, modified Gram-Schmidt, Givens rotations):
 *     start:    v_1 slot = x0                                -> request 1: A x0 into the v_2 slot
 *               r0 = b - A x0 (in v_1), dpar(3) = dpar(5) = ||r0||, g = (||r0||, 0, ..); tests; v_1 =
 * r0/||r0|| step j:   [request 3: z_j = M^-1 v_j]  request 1: w = A z_j (z_j = v_j without preconditioner)
 * into v_{j+1} h(i,j) = (w, v_i), w -= h(i,j) v_i (i = 1..j); h(j+1,j) = ||w|| = dpar(7); v_{j+1} = w /
 * h(j+1,j) previous rotations on column j, new rotation zeroing h(j+1,j), g(j+1) = -s_j g(j), g(j) = c_j
 * g(j); dpar(6) = dpar(5), dpar(5) = |g(j+1)|, ipar(4) += 1, ipar(14) = j; tests tests:    h(j+1,j) = 0
 * exactly -> 0 (the solution lies in the Krylov space); ipar(9) and dpar(5) <= dpar(4) = dpar(1) dpar(3) +
 * dpar(2) -> 0; zero-norm check of v_{j+1}: ipar(12) != 0: dpar(7) <= dpar(8) -> 0, ipar(12) = 0: request 4;
 *               ipar(10) -> request 2; ipar(8) and ipar(4) >= ipar(5) -> -1; then the next step, or at j = m
 * the restart: y = R^-1 g, x += Z y (V y without preconditioner), request 1 for A x, r = b - A x, ... get: y
 * = R^-1 g(1:ipar(14)); ipar(13) = 0: x += Z y; > 0: b = x + Z y; < 0: only the count.
 */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <string.h>

#include "pk_impl.h"
#include "rci_mkl_common.h"

/* ---- layout of ipar/dpar beyond the entries shared with CG (rci_mkl_common.h) -------------------- */
enum {
  IP_TEST_ZERO = 11, /* ipar(12): automatic zero-norm test (else request 4) */
  IP_GET_MODE = 12,  /* ipar(13): where dfgmres_get writes the solution */
  IP_INNER = 13,     /* ipar(14): iterations done in the current restart cycle */
  IP_RESTART = 14,   /* ipar(15): restart length m */
  IP_OFF_H = 15,     /* ipar(16..21): offsets of the parts of tmp */
  IP_OFF_COS = 16,
  IP_OFF_SIN = 17,
  IP_OFF_G = 18,
  IP_OFF_Y = 19,
  IP_OFF_Z = 20,
  IP_IN = 21,          /* ipar(22): offset of the operand of requests 1 and 3 */
  IP_OUT = 22,         /* ipar(23): offset of their result */
  IP_STAGE_COPY = 124, /* ipar(125): the stage the machine is in, so a changed ipar(3) is seen (internal) */
  IP_CYCLE_PC = 125,   /* ipar(126): preconditioned flag of the running cycle (internal) */
  IP_CYCLE_M = 126     /* ipar(127): restart length of the running cycle (internal) */
};
enum {
  DP_HNEXT = 6, /* dpar(7): norm of the generated vector, h(j+1,j) */
  DP_ZTOL = 7   /* dpar(8): zero-norm tolerance */
};

/** Stages kept in ipar(3). 1 is MKL's documented initial value. */
enum {
  ST_START = 1,      /* next call requests A x0 */
  ST_AX0 = 2,        /* request 1 for A x0 is out */
  ST_RESTART_AX = 3, /* request 1 for A x after a restart update of x is out */
  ST_PRECOND = 4,    /* request 3 for z_j is out */
  ST_MATVEC = 5,     /* request 1 for A z_j is out */
  ST_ZERO = 6,       /* request 4 is out */
  ST_USER = 7,       /* request 2 is out */
  ST_STOPPED = 8,    /* 0 or -1 was returned: a further call continues with the next step */
  ST_BREAKDOWN = 9   /* -10 was returned: every further call returns -10 */
};

/** MKL RCI_request values of FGMRES (beyond those shared with CG, rci_mkl_common.h). */
enum {
  RCI_DONE = 0,
  RCI_ZERO_CHECK = 4,
  RCI_DIVIDE_BY_ZERO = -10,
  RCI_NO_STOP_TEST = -11,
  RCI_BAD_PARAMS = -12
};

/** Names, log file (ipar(2) != 6) and signature in ipar(128) ("PKFG") of the RCI FGMRES. */
static const pk_mkl_rci FG = {"FGMRES",
                              "pkrylov_rci_fgmres.log",
                              0x504B4647,
                              "pkrylov_dfgmres_init",
                              "pk_dfgmres_init",
                              "pkrylov_dfgmres_check",
                              "set it to 1 to restart from x"};

/* ---- the tmp layout ------------------------------------------------------------------------------ */

/** Offsets (1-based) of the parts of tmp for size n and restart length m (> 0), and the total length. */
typedef struct {
  int64_t h, cs, sn, g, y, z, len;
} fg_layout;

static fg_layout fg_layout_of(int64_t n, int64_t m) {
  fg_layout L;
  L.h = (m + 1) * n + 1;
  L.cs = L.h + m * (m + 1) / 2;
  L.sn = L.cs + m;
  L.g = L.sn + m;
  L.y = L.g + m + 1;
  L.z = L.y + m;
  L.len = (2 * m + 1) * n + m * (m + 9) / 2 + 1; /* = L.z + m n - 1 */
  return L;
}

/** 1 when the tmp of restart length m has every offset (and its length) within 32-bit integers. */
static int fg_layout_fits(int64_t n, int64_t m) {
  if (m <= 0 || n <= 0 || m > INT32_MAX || n > INT32_MAX)
    return 0;
  /* (2m+1) n <= 2^63 for m, n < 2^31: no overflow in int64 */
  return fg_layout_of(n, m).len <= INT32_MAX;
}

/** Write ipar(16..21) for ipar(1), ipar(15) (which must fit). */
static void fg_set_layout(int32_t *ipar) {
  const fg_layout L = fg_layout_of(ipar[IP_N], ipar[IP_RESTART]);
  ipar[IP_OFF_H] = (int32_t)L.h;
  ipar[IP_OFF_COS] = (int32_t)L.cs;
  ipar[IP_OFF_SIN] = (int32_t)L.sn;
  ipar[IP_OFF_G] = (int32_t)L.g;
  ipar[IP_OFF_Y] = (int32_t)L.y;
  ipar[IP_OFF_Z] = (int32_t)L.z;
}

/** 1 when ipar(16..21) are those of ipar(1), ipar(15). */
static int fg_layout_consistent(const int32_t *ipar) {
  const fg_layout L = fg_layout_of(ipar[IP_N], ipar[IP_RESTART]);
  return ipar[IP_OFF_H] == L.h && ipar[IP_OFF_COS] == L.cs && ipar[IP_OFF_SIN] == L.sn &&
         ipar[IP_OFF_G] == L.g && ipar[IP_OFF_Y] == L.y && ipar[IP_OFF_Z] == L.z;
}

/** Pointer to R(i, j) (1-based) in tmp. */
static inline double *fg_R(double *tmp, const int32_t *ipar, int64_t i, int64_t j) {
  return tmp + ipar[IP_OFF_H] - 1 + j * (j - 1) / 2 + (i - 1);
}

/** Move the state machine to `stage`: ipar(3) and its internal copy ipar(125). */
static void fg_set_stage(int32_t *ipar, int32_t stage) {
  ipar[IP_STAGE] = stage;
  ipar[IP_STAGE_COPY] = stage;
}

/**
 * The offsets ipar(22), ipar(23) of the operand and the result of the request out at `stage` (ST_AX0 to
 * ST_MATVEC), for step j = ipar(14) + 1 of the cycle: A x (v_1 slot into the v_2 slot), z_j = M^-1 v_j, and
 * A z_j (A v_j without the cycle's preconditioner) into the v_{j+1} slot.
 */
static void fg_request_offsets(int64_t n, const int32_t *ipar, int32_t stage, int64_t *in, int64_t *out) {
  const int64_t j = (int64_t)ipar[IP_INNER] + 1, z = ipar[IP_OFF_Z] + (j - 1) * n;
  if (stage == ST_AX0 || stage == ST_RESTART_AX) {
    *in = 1;
    *out = n + 1;
  } else if (stage == ST_PRECOND) {
    *in = (j - 1) * n + 1;
    *out = z;
  } else {
    *in = ipar[IP_CYCLE_PC] ? z : (j - 1) * n + 1;
    *out = j * n + 1;
  }
}

/* ---- vector kernels (the reductions in fixed chunks, rci_mkl_common.c) ------------------------- */

/** y += a x */
static void fg_axpy(int64_t n, double a, const double *x, double *y) {
#ifdef _OPENMP
#pragma omp parallel for schedule(static) if (pk_par(n))
#endif
  for (int64_t i = 0; i < n; i++)
    y[i] += a * x[i];
}

/** x = x / d */
static void fg_divide(int64_t n, double d, double *x) {
#ifdef _OPENMP
#pragma omp parallel for schedule(static) if (pk_par(n))
#endif
  for (int64_t i = 0; i < n; i++)
    x[i] /= d;
}

/**
 * y = R(1:k,1:k)^-1 g(1:k) into tmp(ipar(20)); returns the first j with R(j,j) = 0 or not finite (0 if
 * none).
 */
static int64_t fg_least_squares(const int32_t *ipar, double *tmp, int64_t k) {
  double *y = tmp + ipar[IP_OFF_Y] - 1;
  const double *g = tmp + ipar[IP_OFF_G] - 1;
  for (int64_t j = k; j >= 1; j--) {
    double s = g[j - 1];
    for (int64_t i = j + 1; i <= k; i++)
      s -= *fg_R(tmp, ipar, j, i) * y[i - 1];
    const double d = *fg_R(tmp, ipar, j, j);
    if (d == 0 || !isfinite(d))
      return j;
    y[j - 1] = s / d;
  }
  return 0;
}

/**
 * out = base + sum_j y_j u_j (u_j = z_j with the cycle's preconditioner, else v_j), j = 1..k, in a fixed
 * order; out may be base.
 */
static void fg_combine(int64_t n, const int32_t *ipar, const double *tmp, int64_t k, const double *base,
                       double *out) {
  const double *y = tmp + ipar[IP_OFF_Y] - 1;
  const double *u = ipar[IP_CYCLE_PC] ? tmp + ipar[IP_OFF_Z] - 1 : tmp;
#ifdef _OPENMP
#pragma omp parallel for schedule(static) if (pk_par(n))
#endif
  for (int64_t i = 0; i < n; i++) {
    double s = base[i];
    for (int64_t j = 0; j < k; j++)
      s += y[j] * u[j * n + i];
    out[i] = s;
  }
}

/* ---- argument checks ----------------------------------------------------------------------------- */

/** Which routine validates: the MKL code of an invalid argument differs. */
enum { FOR_CHECK, FOR_SOLVE, FOR_GET };

/**
 * Validate the arguments of dfgmres_check / dfgmres / dfgmres_get. On failure sets *rci (check: -1100;
 * dfgmres and get: -12, get: -10000 for a NULL array or n <= 0), records the message and returns the pkrylov
 * error. dfgmres_check tolerates inconsistent ipar(16..21) (it repairs them); dfgmres tolerates them before
 * its first request (stage 1: it sets them itself). ipar(3) must be 1 or the stage the computation is in
 * (its copy ipar(125)), ipar(14) possible at that stage, and while a request is out ipar(22), ipar(23) must
 * name its operand and result.
 */
static int fg_validate(const char *func, int mode, const int32_t *n, const double *x, const double *b,
                       int32_t *rci, const int32_t *ipar, const double *dpar, const double *tmp) {
  const int32_t bad = mode == FOR_CHECK ? RCI_CHECK_ERROR : RCI_BAD_PARAMS;
  const int32_t bad_arg = mode == FOR_CHECK ? RCI_CHECK_ERROR : mode == FOR_GET ? RCI_FAILED : RCI_BAD_PARAMS;
  PK_CALL(pk_mkl_check_ipar_n(&FG, func, n, rci, bad_arg, bad, ipar));
  const char *names[4] = {"x", "b", "dpar", "tmp"};
  const void *ptrs[4] = {x, b, dpar, tmp};
  for (int k = 0; k < 4; k++)
    if (!ptrs[k])
      return pk_mkl_fail(&FG, rci, bad_arg, ipar, PKRYLOV_ERR_NULL_POINTER, func, "argument '%s' is NULL",
                         names[k]);
  PK_CALL(pk_mkl_check_counters(&FG, func, rci, bad, ipar, ST_START, ST_BREAKDOWN, mode != FOR_GET));
  const int32_t stage = ipar[IP_STAGE];
  if (stage != ST_START && stage != ipar[IP_STAGE_COPY])
    return pk_mkl_fail(
        &FG, rci, bad, ipar, PKRYLOV_ERR_INVALID_STATE, func,
        "ipar(3) = %d is not the stage the computation is in (%d): it is internal; set it to 1 "
        "to restart from x",
        (int)stage, (int)ipar[IP_STAGE_COPY]);
  const int32_t m = ipar[IP_RESTART];
  if (m < 1)
    return pk_mkl_fail(&FG, rci, bad, ipar, PKRYLOV_ERR_INVALID_VALUE, func,
                       "ipar(15) = %d (restart length) must be >= 1", (int)m);
  if (!fg_layout_fits(*n, m))
    return pk_mkl_fail(
        &FG, rci, bad, ipar, PKRYLOV_ERR_INVALID_VALUE, func,
        "ipar(15) = %d (restart length): tmp would need (2*ipar(15)+1)*n + ipar(15)*(ipar(15)+9)/2 "
        "+ 1 = %lld entries, more than 32-bit offsets ipar(22), ipar(23) can address",
        (int)m, (long long)fg_layout_of(*n, m).len);
  /* the stages between restart cycles (the cycle's restart length and preconditioning are not frozen yet) */
  const int32_t inner = ipar[IP_INNER];
  const int in_cycle = (stage >= ST_PRECOND && stage <= ST_USER) ||
                       ((stage == ST_STOPPED || stage == ST_BREAKDOWN) && inner > 0);
  if (mode != FOR_CHECK && in_cycle &&
      (ipar[IP_CYCLE_M] != m || ipar[IP_CYCLE_PC] != (ipar[IP_PRECOND] != 0)))
    return pk_mkl_fail(
        &FG, rci, bad, ipar, PKRYLOV_ERR_INVALID_STATE, func,
        "ipar(15) = %d or ipar(11) = %d changed in the middle of a restart cycle (started with %d "
        "and %d): set ipar(3) = 1 to restart from x, or keep them until the cycle ends",
        (int)m, (int)ipar[IP_PRECOND], (int)ipar[IP_CYCLE_M], (int)ipar[IP_CYCLE_PC]);
  /* ipar(14), the steps of the running cycle, as the stage allows: none while A x is requested, fewer than
     m while a step's request is out, at least one after a step */
  int32_t lo = 0, hi = m;
  if (stage == ST_AX0 || stage == ST_RESTART_AX)
    hi = 0;
  else if (stage == ST_PRECOND || stage == ST_MATVEC)
    hi = m - 1;
  else if (stage == ST_ZERO || stage == ST_USER)
    lo = 1;
  if (inner < 0 || (stage != ST_START && (inner < lo || inner > hi)))
    return pk_mkl_fail(
        &FG, rci, bad, ipar, PKRYLOV_ERR_INVALID_STATE, func,
        "ipar(14) = %d (iterations of the restart cycle) is outside %d..%d at stage ipar(3) = %d "
        "(internal; do not modify)",
        (int)inner, (int)(stage == ST_START ? 0 : lo), (int)hi, (int)stage);
  if (mode != FOR_CHECK && stage != ST_START && !fg_layout_consistent(ipar))
    return pk_mkl_fail(&FG, rci, bad, ipar, PKRYLOV_ERR_INVALID_VALUE, func,
                       "ipar(16..21) (offsets into tmp) do not match ipar(1) = %d and ipar(15) = %d: call "
                       "pkrylov_dfgmres_check after changing ipar(15)",
                       (int)ipar[IP_N], (int)m);
  if (mode == FOR_SOLVE && stage >= ST_AX0 && stage <= ST_MATVEC) {
    /* a request is out: its operand and result must be where it named them (the caller's answer is there) */
    int64_t in, out;
    fg_request_offsets(*n, ipar, stage, &in, &out);
    if (ipar[IP_IN] != in || ipar[IP_OUT] != out)
      return pk_mkl_fail(&FG, rci, bad, ipar, PKRYLOV_ERR_INVALID_VALUE, func,
                         "ipar(22) = %d, ipar(23) = %d (offsets of the operand and the result of the request "
                         "out) were changed: the request named %lld and %lld",
                         (int)ipar[IP_IN], (int)ipar[IP_OUT], (long long)in, (long long)out);
  }
  if (mode == FOR_SOLVE)
    PK_CALL(pk_mkl_check_stop_test(&FG, func, rci, RCI_NO_STOP_TEST, ipar));
  PK_CALL(pk_mkl_check_tolerance(&FG, func, rci, bad, ipar, dpar, DP_RTOL, "relative tolerance"));
  PK_CALL(pk_mkl_check_tolerance(&FG, func, rci, bad, ipar, dpar, DP_ATOL, "absolute tolerance"));
  PK_CALL(pk_mkl_check_tolerance(&FG, func, rci, bad, ipar, dpar, DP_ZTOL, "zero-norm tolerance"));
  return PKRYLOV_SUCCESS;
}

/* ---- the routines -------------------------------------------------------------------------------- */

int pkrylov_dfgmres_init(const int32_t *n, const double *x, const double *b, int32_t *rci_request,
                         int32_t *ipar, double *dpar, double *tmp) {
  PK_CHECK_PTR(rci_request, NULL);
  PK_CALL(pk_mkl_init_args(&FG, __func__, n, x, b, rci_request, ipar, dpar, tmp));
  /* default restart length min(150, n), reduced to the largest whose tmp fits 32-bit offsets */
  int64_t m = *n < 150 ? *n : 150;
  while (m > 0 && !fg_layout_fits(*n, m))
    m--;
  if (m == 0)
    return pk_mkl_fail(&FG, rci_request, RCI_FAILED, NULL, PKRYLOV_ERR_INVALID_SIZE, __func__,
                       "argument 'n' = %d: even restart length 1 needs a tmp of more than 2^31-1 entries",
                       (int)*n);
  pk_mkl_init_defaults(&FG, *n, ipar, dpar);
  ipar[IP_TEST_ZERO] = 0;
  ipar[IP_GET_MODE] = 0;
  ipar[IP_INNER] = 0;
  ipar[IP_RESTART] = (int32_t)m;
  fg_set_layout(ipar);
  ipar[IP_IN] = 1;
  ipar[IP_OUT] = *n + 1;
  ipar[IP_STAGE_COPY] = ST_START;
  dpar[DP_ZTOL] = 1e-12;
  /* tmp is not written: callers allocate it for the ipar(15) they set after this call (MKL's examples and
     user codes do), which may be shorter than the default length */
  *rci_request = RCI_DONE;
  return PKRYLOV_SUCCESS;
}

int pkrylov_dfgmres_check(const int32_t *n, const double *x, const double *b, int32_t *rci_request,
                          int32_t *ipar, double *dpar, double *tmp) {
  PK_CHECK_PTR(rci_request, NULL);
  PK_CALL(fg_validate(__func__, FOR_CHECK, n, x, b, rci_request, ipar, dpar, tmp));
  PK_CALL(pk_mkl_check_finite(&FG, __func__, *n, x, b, rci_request, ipar));
  int changed = 0, warned = 0;
  if (!fg_layout_consistent(ipar)) {
    /* MKL: "emits a warning and modifies ipar(16)-ipar(21)"; its own examples treat the outcome of a
       changed ipar(15) as success, so this repair alone leaves RCI_request = 0 */
    pk_mkl_warn(&FG, ipar, "ipar(16..21) did not match ipar(1) = %d and ipar(15) = %d: set for them",
                (int)ipar[IP_N], (int)ipar[IP_RESTART]);
    fg_set_layout(ipar);
  }
  pk_mkl_check_settings(&FG, ipar, dpar, &changed, &warned);
  if (ipar[IP_RESTART] > ipar[IP_N]) {
    warned = 1;
    pk_mkl_warn(&FG, ipar,
                "ipar(15) = %d > n = %d: a restart cycle ends by a zero-norm vector by step n at the latest",
                (int)ipar[IP_RESTART], (int)ipar[IP_N]);
  }
  *rci_request = pk_mkl_check_request(changed, warned);
  return PKRYLOV_SUCCESS;
}

/** Stop with -10 (division by zero / breakdown) and remember it in ipar(3). */
static int fg_breakdown(int32_t *rci, int32_t *ipar, const char *what, double value) {
  fg_set_stage(ipar, ST_BREAKDOWN);
  pk_mkl_fail(&FG, rci, RCI_DIVIDE_BY_ZERO, ipar, PKRYLOV_SUCCESS, "pkrylov_dfgmres",
              "breakdown at iteration %d (step %d of the restart cycle): %s = %g (A or the preconditioner is "
              "singular, or NaN/Inf reached the iteration); dfgmres_get gives the last good iterate",
              (int)ipar[IP_ITER], (int)ipar[IP_INNER] + 1, what, value);
  return PKRYLOV_SUCCESS;
}

/** ipar(22), ipar(23) for the request of the stage ipar(3) is in (ST_AX0 to ST_MATVEC). */
static int fg_set_request(int64_t n, int32_t *ipar) {
  int64_t in, out;
  fg_request_offsets(n, ipar, ipar[IP_STAGE], &in, &out);
  ipar[IP_IN] = (int32_t)in;
  ipar[IP_OUT] = (int32_t)out;
  return PKRYLOV_SUCCESS;
}

/** Set the request of step j = ipar(14) + 1: request 3 (z_j = M^-1 v_j) or request 1 (A v_j). */
static int fg_begin_step(int64_t n, int32_t *rci, int32_t *ipar) {
  if (ipar[IP_INNER] == 0) { /* a new cycle: freeze its restart length and preconditioning */
    ipar[IP_CYCLE_M] = ipar[IP_RESTART];
    ipar[IP_CYCLE_PC] = ipar[IP_PRECOND] != 0;
  }
  fg_set_stage(ipar, ipar[IP_CYCLE_PC] ? ST_PRECOND : ST_MATVEC);
  *rci = ipar[IP_CYCLE_PC] ? RCI_APPLY_PRECOND : RCI_MATVEC;
  return fg_set_request(n, ipar);
}

/** Copy x into the v_1 slot and request A x into the v_2 slot (start or restart). */
static int fg_request_ax(int64_t n, const double *x, int32_t *rci, int32_t *ipar, double *tmp, int stage) {
  memcpy(tmp, x, sizeof(double) * (size_t)n);
  fg_set_stage(ipar, stage);
  *rci = RCI_MATVEC;
  return fg_set_request(n, ipar);
}

/**
 * After the tests: the next step of the cycle, or at the end of the cycle the restart (x += Z y, request 1
 * for A x).
 */
static int fg_advance(int64_t n, double *x, int32_t *rci, int32_t *ipar, double *dpar, double *tmp) {
  const int64_t j = ipar[IP_INNER];
  const double *g = tmp + ipar[IP_OFF_G] - 1;
  if (j == 0) {
    if (g[0] == 0) { /* the residual of x is exactly zero: nothing to iterate on */
      fg_set_stage(ipar, ST_STOPPED);
      *rci = RCI_DONE;
      return PKRYLOV_SUCCESS;
    }
    return fg_begin_step(n, rci, ipar);
  }
  if (j >= ipar[IP_CYCLE_M]) { /* restart: x += Z y, then the true residual of the new x */
    const int64_t bad = fg_least_squares(ipar, tmp, j);
    if (bad)
      return fg_breakdown(rci, ipar, "R(j,j) of the least-squares problem", *fg_R(tmp, ipar, bad, bad));
    fg_combine(n, ipar, tmp, j, x, x);
    ipar[IP_INNER] = 0;
    return fg_request_ax(n, x, rci, ipar, tmp, ST_RESTART_AX);
  }
  /* v_{j+1} was normalised in the step unless h(j+1,j) = 0, i.e. sin_j = 0 */
  if (tmp[ipar[IP_OFF_SIN] - 1 + j - 1] == 0 || !(dpar[DP_HNEXT] > 0))
    return fg_breakdown(rci, ipar, "the norm of the generated vector h(j+1,j) = dpar(7)", dpar[DP_HNEXT]);
  return fg_begin_step(n, rci, ipar);
}

/** Test stage 5: the iteration cap, then the next step. */
static int fg_test_maxit(int64_t n, double *x, int32_t *rci, int32_t *ipar, double *dpar, double *tmp) {
  if (ipar[IP_TEST_MAXIT] && ipar[IP_ITER] >= ipar[IP_MAXIT]) {
    fg_set_stage(ipar, ST_STOPPED);
    *rci = RCI_MAXIT;
    return PKRYLOV_SUCCESS;
  }
  return fg_advance(n, x, rci, ipar, dpar, tmp);
}

/** Test stage 4: the user test (request 2). */
static int fg_test_user(int64_t n, double *x, int32_t *rci, int32_t *ipar, double *dpar, double *tmp) {
  if (ipar[IP_TEST_USER]) {
    fg_set_stage(ipar, ST_USER);
    *rci = RCI_USER_TEST;
    return PKRYLOV_SUCCESS;
  }
  return fg_test_maxit(n, x, rci, ipar, dpar, tmp);
}

/** The stopping tests after step ipar(14) of the cycle. */
static int fg_tests(int64_t n, double *x, int32_t *rci, int32_t *ipar, double *dpar, double *tmp) {
  dpar[DP_TARGET] = dpar[DP_RTOL] * dpar[DP_R0] + dpar[DP_ATOL];
  if (dpar[DP_HNEXT] == 0 || dpar[DP_R] == 0 || (ipar[IP_TEST_RES] && dpar[DP_R] <= dpar[DP_TARGET])) {
    fg_set_stage(ipar, ST_STOPPED);
    *rci = RCI_DONE;
    return PKRYLOV_SUCCESS;
  }
  if (ipar[IP_TEST_ZERO]) {
    if (dpar[DP_HNEXT] <= dpar[DP_ZTOL]) {
      fg_set_stage(ipar, ST_STOPPED);
      *rci = RCI_DONE;
      return PKRYLOV_SUCCESS;
    }
  } else {
    fg_set_stage(ipar, ST_ZERO);
    *rci = RCI_ZERO_CHECK;
    return PKRYLOV_SUCCESS;
  }
  return fg_test_user(n, x, rci, ipar, dpar, tmp);
}

/**
 * The residual of x is in the v_1 slot with norm beta (start or restart): tests on it (the iteration cap only
 * at the start: at a restart it was tested at the end of the cycle), then v_1 = r / beta and the first step
 * of the cycle.
 */
static int fg_cycle_start(int64_t n, double *x, int32_t *rci, int32_t *ipar, double *dpar, double *tmp,
                          double beta, int restart) {
  double *g = tmp + ipar[IP_OFF_G] - 1;
  memset(g, 0, sizeof(double) * (size_t)(ipar[IP_RESTART] + 1));
  g[0] = beta;
  ipar[IP_INNER] = 0;
  dpar[DP_R] = beta;
  dpar[DP_TARGET] = dpar[DP_RTOL] * dpar[DP_R0] + dpar[DP_ATOL];
  if (beta == 0 || (ipar[IP_TEST_RES] && beta <= dpar[DP_TARGET])) {
    if (beta > 0)
      fg_divide(n, beta, tmp); /* so that a further call can continue */
    fg_set_stage(ipar, ST_STOPPED);
    *rci = RCI_DONE;
    return PKRYLOV_SUCCESS;
  }
  fg_divide(n, beta, tmp);
  return restart ? fg_advance(n, x, rci, ipar, dpar, tmp) : fg_test_maxit(n, x, rci, ipar, dpar, tmp);
}

/** Step j: w = A z_j is in the v_{j+1} slot: Arnoldi, rotations, counters, tests. */
static int fg_step(int64_t n, double *x, int32_t *rci, int32_t *ipar, double *dpar, double *tmp) {
  const int64_t j = ipar[IP_INNER] + 1;
  double *w = tmp + j * n;
  const int64_t first = pk_first_nonfinite(w, n);
  if (first >= 0)
    return fg_breakdown(rci, ipar, "an entry of the product A z_j written by the caller", w[first]);
  for (int64_t i = 1; i <= j; i++) { /* modified Gram-Schmidt */
    const double *v = tmp + (i - 1) * n;
    const double h = pk_mkl_dot(n, w, v);
    *fg_R(tmp, ipar, i, j) = h;
    fg_axpy(n, -h, v, w);
  }
  const double hnext = sqrt(pk_mkl_dot(n, w, w));
  if (!isfinite(hnext))
    return fg_breakdown(rci, ipar, "h(j+1,j)", hnext);
  if (hnext > 0)
    fg_divide(n, hnext, w);
  /* previous rotations on column j */
  double *cs = tmp + ipar[IP_OFF_COS] - 1, *sn = tmp + ipar[IP_OFF_SIN] - 1, *g = tmp + ipar[IP_OFF_G] - 1;
  for (int64_t i = 1; i < j; i++) {
    double *a = fg_R(tmp, ipar, i, j), *c = fg_R(tmp, ipar, i + 1, j);
    const double t = cs[i - 1] * *a + sn[i - 1] * *c;
    *c = -sn[i - 1] * *a + cs[i - 1] * *c;
    *a = t;
  }
  double *rjj = fg_R(tmp, ipar, j, j);
  const double rho = hypot(*rjj, hnext);
  if (!(rho > 0) || !isfinite(rho))
    return fg_breakdown(rci, ipar, "R(j,j) after the rotation", rho);
  cs[j - 1] = *rjj / rho;
  sn[j - 1] = hnext / rho;
  *rjj = rho;
  g[j] = -sn[j - 1] * g[j - 1];
  g[j - 1] = cs[j - 1] * g[j - 1];
  ipar[IP_INNER] = (int32_t)j;
  ipar[IP_ITER]++;
  dpar[DP_RPREV] = dpar[DP_R];
  dpar[DP_R] = fabs(g[j]);
  dpar[DP_HNEXT] = hnext;
  return fg_tests(n, x, rci, ipar, dpar, tmp);
}

int pkrylov_dfgmres(const int32_t *n, double *x, const double *b, int32_t *rci_request, int32_t *ipar,
                    double *dpar, double *tmp) {
  PK_CHECK_PTR(rci_request, NULL);
  PK_CALL(fg_validate(__func__, FOR_SOLVE, n, x, b, rci_request, ipar, dpar, tmp));
  const int64_t nn = *n;
  switch (ipar[IP_STAGE]) {
  case ST_START: /* nothing of a cycle is in tmp yet: set the layout for ipar(15) and request A x0 */
    fg_set_layout(ipar);
    ipar[IP_INNER] = 0;
    ipar[IP_CYCLE_M] = ipar[IP_RESTART];
    ipar[IP_CYCLE_PC] = ipar[IP_PRECOND] != 0;
    return fg_request_ax(nn, x, rci_request, ipar, tmp, ST_AX0);
  case ST_AX0:
  case ST_RESTART_AX: { /* A x is in the v_2 slot: r = b - A x into the v_1 slot */
    const int restart = ipar[IP_STAGE] == ST_RESTART_AX;
    const double beta = sqrt(pk_mkl_residual(nn, b, tmp + nn, tmp));
    if (!isfinite(beta))
      return fg_breakdown(rci_request, ipar, restart ? "||b - A x|| at the restart" : "||b - A x0||", beta);
    if (!restart) {
      ipar[IP_ITER] = 0;
      dpar[DP_R0] = beta;
      dpar[DP_RPREV] = 0.0;
      dpar[DP_HNEXT] = 0.0;
    }
    return fg_cycle_start(nn, x, rci_request, ipar, dpar, tmp, beta, restart);
  }
  case ST_PRECOND: { /* z_j is in its slot: request w = A z_j into the v_{j+1} slot */
    fg_set_stage(ipar, ST_MATVEC);
    *rci_request = RCI_MATVEC;
    return fg_set_request(nn, ipar);
  }
  case ST_MATVEC:
    return fg_step(nn, x, rci_request, ipar, dpar, tmp);
  case ST_ZERO: /* the caller found dpar(7) nonzero */
    return fg_test_user(nn, x, rci_request, ipar, dpar, tmp);
  case ST_USER: /* the caller's test said "continue" */
    return fg_test_maxit(nn, x, rci_request, ipar, dpar, tmp);
  case ST_STOPPED: /* the caller continues after 0 or -1 (e.g. after raising ipar(5)) */
    return fg_advance(nn, x, rci_request, ipar, dpar, tmp);
  default: /* ST_BREAKDOWN */
    *rci_request = RCI_DIVIDE_BY_ZERO;
    return PKRYLOV_SUCCESS;
  }
}

int pkrylov_dfgmres_get(const int32_t *n, double *x, double *b, int32_t *rci_request, const int32_t *ipar,
                        const double *dpar, double *tmp, int32_t *itercount) {
  PK_CHECK_PTR(rci_request, NULL);
  if (!itercount)
    return pk_mkl_fail(&FG, rci_request, RCI_FAILED, ipar, PKRYLOV_ERR_NULL_POINTER, __func__,
                       "argument 'itercount' is NULL");
  PK_CALL(fg_validate(__func__, FOR_GET, n, x, b, rci_request, ipar, dpar, tmp));
  *itercount = ipar[IP_ITER];
  *rci_request = RCI_DONE;
  if (ipar[IP_GET_MODE] < 0)
    return PKRYLOV_SUCCESS;
  const int64_t nn = *n;
  /* the steps of the running cycle that are not in x yet (none before the first step or during a restart) */
  const int32_t stage = ipar[IP_STAGE];
  const int64_t k = stage == ST_START || stage == ST_AX0 || stage == ST_RESTART_AX ? 0 : ipar[IP_INNER];
  const int64_t bad = fg_least_squares(ipar, tmp, k);
  if (bad)
    return pk_mkl_fail(&FG, rci_request, RCI_FAILED, ipar, PKRYLOV_ERR_INVALID_STATE, __func__,
                       "R(%lld,%lld) = %g of the least-squares problem is zero or not finite (tmp altered?)",
                       (long long)bad, (long long)bad, *fg_R(tmp, ipar, bad, bad));
  if (ipar[IP_GET_MODE] > 0) {
    fg_combine(nn, ipar, tmp, k, x, b);
  } else if (k > 0) {
    fg_combine(nn, ipar, tmp, k, x, x);
    /* x now holds the iterate: what is left of the residual is g(k+1) on v_{k+1}, so zeroing g(1:k) lets a
       further pkrylov_dfgmres continue consistently from the updated x (MKL documents continuing after
       ipar(13) = 0 as not possible) */
    memset(tmp + ipar[IP_OFF_G] - 1, 0, sizeof(double) * (size_t)k);
  }
  return PKRYLOV_SUCCESS;
}

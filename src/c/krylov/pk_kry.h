/**
 * @file pk_kry.h
 * @brief The vector engine of the BiCGStab and GMRES families, single-reduction CG, CG and pipelined CG
 * (private, not installed).
 *
 * One driver per method (bicgstab.c, gmres.c, cagmres.c, srcg.c; cg.c for CG and pipelined CG, on the
 * backends whose engine has CG's fused loops: the CPU, CUDA with kry.cg=1, pk_kry_serves) runs on both backends: it never touches vector data, only
 * asks the engine for whole-vector operations on vectors named by ids, and for scalar steps that run where
 * the scalars live (a host array on the CPU, a device array on CUDA: one thread of one block there). So the
 * CUDA path keeps its scalars on the device and needs no host synchronisation per iteration: the driver
 * reads the scalar array only when it asks for it (pk_kry_get), every sync_interval iterations on CUDA and
 * every iteration on the CPU (where reading is free).
 *
 * Scalars: the engine owns an array S of nscalars doubles (driver-defined layout). Coefficients of vector
 * updates are references into S (pk_coef), never host values, so an update can use a scalar a device-side
 * step just computed.
 *
 * Semantics every backend implements identically (tests compare the CPU and CUDA engines op by op):
 *  - Vectors: ids PK_KV_X and PK_KV_B are the solve's x and b (bound by pk_kry_bind; on CUDA device copies
 *    when the caller passed host arrays), PK_KV_W0 + i (i < nwork) the work vectors, PK_KV_V0 + j
 *    (j < nbasis) the basis vectors, stored as one column-major block of leading dimension ld >= n so that
 *    block operations are gemv/gemm-shaped. All vectors have n values.
 *  - pk_kry_update: for every element index i independently, the updates are applied in list order (a term
 *    reading a vector updated earlier in the list sees its new value at i), then the dot products of the
 *    pairs are taken of the final values. A coefficient whose value is exactly 0 skips its term (the
 *    vector is not read, so a zero coefficient is also a guard against NaN in an unused vector); cy == 0
 *    means y is written without being read. Arithmetic per element, in this order and without
 *    contraction:  t = cy*y;  t = t + c[0]*x[0];  t = t + c[1]*x[1]; ...  (a skipped cy starts from t = 0
 *    and the first live term then sets t = c*x).
 *  - Reductions: every global sum (dots, norms, Gram matrices) is deterministic for a given backend and
 *    problem size (fixed-order partial sums, no floating-point atomics) and goes through reduce.c on the
 *    CPU (MPI later). With PK_KRY_ASYNC the reduction is started and S[out..] must not be read (by a scalar
 *    step or pk_kry_get) before pk_kry_wait(); without MPI both forms are the same.
 *  - Dry cells (operator mask) are kept at 0 in every residual (pk_kry_residual writes 0 there).
 *  - Errors: every function returns a pkrylov status code (callback failures of user operators included);
 *    vector data never causes an error (NaN propagates into the scalars, where the scalar steps detect it).
 */
#ifndef PK_KRY_H
#define PK_KRY_H

#include "pk_impl.h"
#include "kry_scalar.h"

#include <stdint.h>
#include <string.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------------------------------------ */
/* Vector ids and coefficients                                                                       */

typedef int32_t pk_vid;
enum {
  PK_KV_X = 0,     /**< the solution (bound) */
  PK_KV_B = 1,     /**< the right-hand side (bound, read only) */
  PK_KV_W0 = 16,   /**< work vector i: PK_KV_W0 + i */
  PK_KV_V0 = 1024  /**< basis vector j: PK_KV_V0 + j */
};

/** A coefficient: S[idx] (negated when neg), or one of the constants PK_S_ONE, PK_S_ZERO as idx. */
typedef struct {
  int32_t idx;
  int32_t neg;
} pk_coef;
#define PK_S_ONE (-1)  /**< idx of the constant 1 */
#define PK_S_ZERO (-2) /**< idx of the constant 0 */

static inline pk_coef pk_c(int32_t idx) {
  pk_coef c;
  c.idx = idx;
  c.neg = 0;
  return c;
}
static inline pk_coef pk_cneg(int32_t idx) {
  pk_coef c;
  c.idx = idx;
  c.neg = 1;
  return c;
}

/** Value of coefficient c with scalars S (host or device code). */
#ifdef __CUDACC__
__host__ __device__
#endif
static inline double pk_coef_value(pk_coef c, const double *S) {
  const double v = c.idx == PK_S_ONE ? 1.0 : c.idx == PK_S_ZERO ? 0.0 : S[c.idx];
  return c.neg ? -v : v;
}

#define PK_KRY_MAXTERMS 6  /**< terms per update */
#define PK_KRY_MAXUPD 12   /**< updates per pk_kry_update call */
#define PK_KRY_MAXPAIRS 8  /**< dot products per pk_kry_update call */

/** y = cy*y + sum_{t < nterms} c[t] * x[t] (see the file comment for the exact arithmetic). */
typedef struct {
  pk_vid y;
  pk_coef cy;
  int32_t nterms;
  pk_vid x[PK_KRY_MAXTERMS];
  pk_coef c[PK_KRY_MAXTERMS];
} pk_kupd;

/** The update y = cy*y + c[0]*x[0] + ... + c[nterms-1]*x[nterms-1] (x, c may be NULL when nterms = 0). */
static inline pk_kupd pk_kupd_make(pk_vid y, pk_coef cy, int nterms, const pk_vid *x, const pk_coef *c) {
  pk_kupd u;
  memset(&u, 0, sizeof u);
  u.y = y;
  u.cy = cy;
  u.nterms = nterms;
  for (int t = 0; t < nterms; t++) {
    u.x[t] = x[t];
    u.c[t] = c[t];
  }
  return u;
}

/** A dot product (a, b). */
typedef struct {
  pk_vid a, b;
} pk_kpair;

/** flags */
#define PK_KRY_ASYNC 1 /**< start the global reduction only; finish with pk_kry_wait() */
/** CG's fused loops only: do nothing (vectors unchanged, S[out..] unspecified, no reduction started) once
 *  S[PK_KS_STOP] != 0, so that a block of iterations queued on the device ends where a scalar step stopped */
#define PK_KRY_IF_RUNNING 2

/* ------------------------------------------------------------------------------------------------ */
/* The engine                                                                                        */

typedef struct pk_kry pk_kry;

/**
 * Create the engine of solver s (its context's backend, operator A, preconditioner M, size n): nwork work
 * vectors, nbasis basis vectors, nscalars scalars (all zero).
 */
int pk_kry_create(pkrylov_solver s, int32_t nwork, int32_t nbasis, int32_t nscalars, pk_kry **E);
/** Free (NULL is a no-op). */
void pk_kry_destroy(pk_kry *E);
/** Iterations between host reads the driver should use: 1 on the CPU, the solver's sync interval on CUDA. */
int32_t pk_kry_sync_interval(const pk_kry *E);
/** Number of basis vectors and scalars the engine holds. */
int32_t pk_kry_nbasis(const pk_kry *E);
int32_t pk_kry_nscalars(const pk_kry *E);

/**
 * Bind the solve's arrays (mem: PKRYLOV_MEM_HOST or PKRYLOV_MEM_DEVICE, already checked by the caller).
 * On CUDA b and x are copied into the engine's own device vectors (from host or device arrays; x goes back
 * at unbind, except after a failure). x_zero 1: x := 0 (no initial guess).
 */
int pk_kry_bind(pk_kry *E, int32_t mem, const double *b, double *x, int32_t x_zero);
/** End of solve: on CUDA copy x back to the caller's array unless discard_x (waits for the device). */
int pk_kry_unbind(pk_kry *E);
/** Copy the bound x into work vector id `save` or back (checkpoint for "x holds the last good iterate"). */
int pk_kry_copy(pk_kry *E, pk_vid src, pk_vid dst);
/** Index of the first non-finite value of vector v, or -1 (a host read; for argument checks). */
int pk_kry_first_nonfinite(pk_kry *E, pk_vid v, int64_t *index, double *value);

/** y = A x. */
int pk_kry_matvec(pk_kry *E, pk_vid x, pk_vid y);
/** y = M^-1 x (a copy without preconditioner). */
int pk_kry_precond(pk_kry *E, pk_vid x, pk_vid y);
/** r = b - A x (0 at dry cells); S[out] = (r, r) global (out < 0: no norm). */
int pk_kry_residual(pk_kry *E, pk_vid x, pk_vid r, int32_t out);
/**
 * The fused update: nupd updates (<= PK_KRY_MAXUPD), then npairs dot products (<= PK_KRY_MAXPAIRS) of the
 * updated vectors into S[out + j] (global sums). flags: 0 or PK_KRY_ASYNC.
 */
int pk_kry_update(pk_kry *E, int32_t nupd, const pk_kupd *u, int32_t npairs, const pk_kpair *pairs,
                  int32_t out, int32_t flags);
/**
 * Operator (preconditioner) application fused with the update that follows it: y = A x (pk_kry_matvec_update)
 * or y = M^-1 x (pk_kry_precond_update), then pk_kry_update(E, nupd, u, npairs, pairs, out, flags), whose
 * terms and pairs may read y. The results are those of the two calls: the vectors bitwise, and the sums
 * bitwise too (a fused backend must form the partial sums in the slots and order of its update op, or take
 * them by it). No update may write x (the application reads x, and its neighbours, while the updates are
 * written). A backend without the fused entry (matvec_update / precond_update NULL) gets the two calls.
 */
int pk_kry_matvec_update(pk_kry *E, pk_vid x, pk_vid y, int32_t nupd, const pk_kupd *u, int32_t npairs,
                         const pk_kpair *pairs, int32_t out, int32_t flags);
int pk_kry_precond_update(pk_kry *E, pk_vid x, pk_vid y, int32_t nupd, const pk_kupd *u, int32_t npairs,
                          const pk_kpair *pairs, int32_t out, int32_t flags);
/**
 * Block inner products of basis vectors: S[out + i + ka*j] = (V_{a0+i}, V_{b0+j}) for i < ka, j < kb
 * (global sums). dd = 1: accumulated in double-double (products by an exact two-product, sums by
 * two-sum), stored as hi at S[out + 2*(i + ka*j)] and lo at S[out + 2*(i + ka*j) + 1].
 */
int pk_kry_block_dots(pk_kry *E, int32_t a0, int32_t ka, int32_t b0, int32_t kb, int32_t dd, int32_t out,
                      int32_t flags);
/**
 * Dot products of one vector with basis vectors: S[out + j] = (V_{b0+j}, x) for j < k (x may be a basis
 * vector outside [b0, b0+k) or any other id), and with with_norm also S[out + k] = (x, x).
 */
int pk_kry_basis_dots(pk_kry *E, pk_vid x, int32_t b0, int32_t k, int32_t with_norm, int32_t out,
                      int32_t flags);
/** y = cy*y + sum_{j < k} s * S[c0 + j] * V_{b0+j}, s = -1 when neg else 1 (y not in [b0, b0+k)). */
int pk_kry_basis_axpy(pk_kry *E, pk_vid y, pk_coef cy, int32_t b0, int32_t k, int32_t c0, int32_t neg);
/**
 * Basis block times a small matrix: V_{b1+j} = sum_{i < kin} V_{a0+i} * S[t0 + i + ldt*j] for j < kout.
 * In place (b1 == a0) is allowed when column j of T is zero below row j (upper triangular T, as for
 * V := V R^-1); other overlaps are not.
 */
int pk_kry_basis_gemm(pk_kry *E, int32_t a0, int32_t kin, int32_t t0, int32_t ldt, int32_t b1,
                      int32_t kout);

/**
 * Basis axpy followed by dot products of the result with the same basis vectors (one Gram-Schmidt pass
 * and the next pass's inner products): pk_kry_basis_axpy(E, y, cy, b0, k, c0, neg), then
 * pk_kry_basis_dots(E, y, b0, k, with_norm, out, flags). The vectors are bitwise those of the two calls;
 * the sums are the same global sums (a backend may accumulate them in one pass over the basis, so they may
 * differ from the separate calls' by rounding). A backend without the fused form runs the two calls.
 */
int pk_kry_basis_axpy_dots(pk_kry *E, pk_vid y, pk_coef cy, int32_t b0, int32_t k, int32_t c0, int32_t neg,
                           int32_t with_norm, int32_t out, int32_t flags);

/**
 * CG's fused loops (the two-loop CG of solver.c's history and pipelined CG, cg.c), each one pass over memory
 * with its sums (global, or started with PK_KRY_ASYNC). Coefficients are references into S.
 *
 * pk_kry_cg_precond: r -= alpha q; z = M^-1 r (a copy without preconditioner); S[out] = (r, z),
 * S[out + 1] = (r, r).
 * pk_kry_cg_operator: x += alpha p; p = z + beta p; q = A z + beta q (the old q); S[out] = (p, q).
 * pk_kry_pipecg_update: pipelined CG's update of Ghysels and Vanroose: z = n + beta z with n = A m (or the
 * vector v->n when it is not -1: A m computed before, while the last reduction was in flight); q = m + beta q;
 * s = w + beta s; p = u + beta p; x += alpha p; r -= alpha s; u -= alpha q; w -= alpha z; then nsums (0,
 * PK_RR_NV_BASE or PK_RR_NV) sums into S[out..]: (r, u), (w, u), (r, r), and with PK_RR_NV (x, x), (p, p),
 * (u, u), (q, q) (pk_rr.h).
 * All vectors of one call are distinct. flags: PK_KRY_ASYNC and/or PK_KRY_IF_RUNNING (the call does
 * nothing once a scalar step has stopped the iteration: the drivers queue blocks of iterations). A backend
 * without these entries answers PKRYLOV_ERR_INTERNAL.
 */
int pk_kry_cg_precond(pk_kry *E, pk_vid r, pk_vid q, pk_vid z, pk_coef alpha, int32_t out, int32_t flags);
int pk_kry_cg_operator(pk_kry *E, pk_vid x, pk_vid p, pk_vid z, pk_vid q, pk_coef alpha, pk_coef beta,
                       int32_t out, int32_t flags);
/** The vectors of pk_kry_pipecg_update (n = -1: none). */
typedef struct {
  pk_vid m, z, q, s, p, x, r, u, w, n;
} pk_kpipecg;
int pk_kry_pipecg_update(pk_kry *E, const pk_kpipecg *v, pk_coef alpha, pk_coef beta, int32_t nsums,
                         int32_t out, int32_t flags);

/**
 * Blocks of iterations. A driver brackets the operations it queues between two host reads with
 * pk_kry_block_begin() and pk_kry_block_end(); the CUDA engine then records them, and replays a CUDA graph
 * when the same sequence of operations comes again (scalar-step arguments may differ by one offset for the
 * whole block: iteration numbers), which removes the per-launch cost of small problems. The results are
 * those of the operations issued one by one; an operation that reads on the host (get, sync, unbind) inside
 * a block runs what was recorded first. The CPU engine ignores blocks. Blocks do not nest.
 */
int pk_kry_block_begin(pk_kry *E);
int pk_kry_block_end(pk_kry *E);

/** Run scalar step `id` (kry_scalar.h) with argument arg on S where S lives. */
int pk_kry_scalar(pk_kry *E, int32_t id, int32_t arg);
/** Finish the reduction started with PK_KRY_ASYNC. */
int pk_kry_wait(pk_kry *E);
/** host[0..count) = S[first..first+count) (waits for the device on CUDA). */
int pk_kry_get(pk_kry *E, int32_t first, int32_t count, double *host);
/** A range of S to read: host[0..count) = S[first..first+count). */
typedef struct {
  int32_t first, count;
  double *host;
} pk_krange;
/** Read n ranges of S with one wait for the device (pk_kry_poll: the header, the ring and a driver's
 *  scalars in one host round trip per block). */
int pk_kry_getv(pk_kry *E, int32_t n, const pk_krange *r);
/** S[first..first+count) = host[0..count). */
int pk_kry_set(pk_kry *E, int32_t first, int32_t count, const double *host);
/** Wait until all queued work is done (timings; a no-op on the CPU). */
int pk_kry_sync(pk_kry *E);

/* ------------------------------------------------------------------------------------------------ */
/* Drivers (kry.c: the common solve frame; bicgstab.c, gmres.c, cagmres.c: the methods)              */

/** pkrylov_solver_solve() for the methods on the engine (pk_kry_serves). */
int pk_kry_solve(pkrylov_solver s, int32_t mem, const double *b, double *x);
/**
 * At pkrylov_solver_create() on a device backend, CG and pipelined CG on the engine: make the engine of the
 * solver's settings once and free it (the first solve makes it again, with the options set by then), so that
 * a solver whose device work vectors do not fit fails at creation (PKRYLOV_ERR_OUT_OF_MEMORY), as the CUDA CG
 * driver, which allocates its vectors there, does.
 */
int pk_kry_reserve(pkrylov_solver s);
/** 1 when type is one of the methods that only the engine runs (the BiCGStab and GMRES families, SRCG). */
int pk_kry_is_kry_type(int32_t type);
/**
 * 1 when pk_kry_solve() runs solver type `type` on context ctx with the solver options opts (NULL: the
 * context's at creation): the engine's methods, and CG and pipelined CG where the context's engine has CG's
 * fused loops (the CPU; CUDA with the solver option kry.cg=1, else its own CG driver).
 */
int pk_kry_serves(pkrylov_context ctx, const pk_options *opts, int32_t type);

/*
 * The frame and the drivers.
 *
 * Scalars: every driver's S starts with the common header of kry_scalar.h (PK_KS_*: tolerance, stop code
 * and iteration, iterations done, the residual-history ring, the frame's true-residual slot); its own
 * scalars start at PK_KS_DRIVER; the frame appends the history ring after them (nscalars = the driver's
 * count + ring length). The frame writes S[PK_KS_TOL] and the ring geometry; the driver's scalar steps
 * test convergence and breakdown on S, write the stop code and iteration (pk_ks_stop) and the residual of
 * every iteration into the ring (pk_ks_record), and once stopped set their step coefficients to 0 so that
 * the rest of a block of iterations changes nothing: x keeps the last good iterate without a host sync.
 *
 * A driver enqueues iterations in blocks of pk_kry_sync_interval(E) (1 on the CPU), then calls
 * pk_kry_poll(), which reads the header and the ring once, feeds the history, the monitor and the
 * stagnation test for the iterations done, and says whether and why the block stopped. A convergence
 * found by the steps is confirmed on the true residual with pk_kry_confirm().
 *
 * Work vectors: the driver asks for nwork; the frame adds two more, PK_KV_W0 + nwork (R->tmp), which it
 * uses for true residuals (drivers may use it as scratch between frame calls), and PK_KV_W0 + nwork + 1
 * (R->xbest): the iterate with the smallest true residual the solve computed (x0, confirmations, the starts
 * of GMRES cycles through pk_kry_keep_best()). The frame gives that iterate back when the final x is worse:
 * a solve never returns an x worse than one it has seen (GMRES on a singular inconsistent system). A driver
 * that returns its own x (pk_kry_sizes.keep_last: CG, pipelined CG) gets no R->xbest (-1) and one frame
 * vector only.
 */

/** One solve of a driver. */
typedef struct pk_kry_run {
  pkrylov_solver s;
  pk_kry *E;
  int32_t mem;
  double tol;          /* max(rtol ||b||, atol), also in S[PK_KS_TOL] */
  double best;         /* best residual so far (stagnation) */
  int32_t stalled;     /* iterations without progress */
  int32_t confirm_failures;
  int32_t restarts;    /* restarts of a driver's own (single-reduction CG: a recurrence curvature) */
  int32_t recorded;    /* iterations whose residual the host has recorded (history, monitor) */
  int32_t ring;        /* ring length (S[PK_KS_RING_LEN]) */
  int32_t ring_base;   /* its first scalar (S[PK_KS_RING_BASE]) */
  double *ringbuf;     /* the host's copy of the ring (ring values; pk_kry_poll), allocated per solve */
  pk_vid tmp;          /* the frame's work vector */
  double final_res;    /* ||b - A x|| of the returned x when have_final */
  int32_t have_final;
  pk_vid xbest;        /* the frame's copy of the best iterate seen (-1: none, pk_kry_sizes.keep_last) */
  double best_true;    /* its true residual ||b - A x|| */
} pk_kry_run;

/** Sizes a driver needs for solver s (restart, step, sync interval read from s). */
typedef struct {
  int32_t nwork;    /* work vectors (the frame adds two, one with keep_last) */
  int32_t nbasis;   /* basis vectors */
  int32_t nscalars; /* scalars including the header (>= PK_KS_DRIVER); the frame adds the ring */
  int32_t poll_iters; /* most iterations between two polls when more than the sync interval (0: the sync
                         interval; CA-GMRES finishes a block of s iterations in one step) */
  int32_t keep_last;  /* 1: the frame keeps no best iterate (no R->xbest): the solve returns the driver's x as
                         the models' CG does (CG, pipelined CG) */
} pk_kry_sizes;

/** Outcome of pk_kry_poll(). */
typedef struct {
  int32_t its;      /* iterations done (x holds iterate its) */
  int32_t code;     /* S[PK_KS_STOP]: 0 running, else the steps' pkrylov_reason */
  int32_t code_it;  /* S[PK_KS_STOP_IT] */
  int32_t host;     /* the host's stop: PKRYLOV_STOPPED_BY_MONITOR, PKRYLOV_DIVERGED_STAGNATION or 0 */
} pk_kry_status;

/**
 * Read the header and the ring: record the residuals of the iterations (R->recorded, its] (history,
 * monitor, stagnation; iteration 0 too when first is 1), fill *st. A monitor or stagnation stop found
 * inside a block applies at the end of the block (on the CPU, where blocks are one iteration, at once).
 */
int pk_kry_poll(pk_kry_run *R, int32_t first, pk_kry_status *st);
/** pk_kry_poll, reading vals[0..vcount) = S[vfirst..vfirst+vcount) (a driver's scalars) in the same read. */
int pk_kry_poll_read(pk_kry_run *R, int32_t first, pk_kry_status *st, int32_t vfirst, int32_t vcount,
                     double *vals);
/**
 * The steps say converged: r = b - A x into R->tmp (S[PK_KS_TRUE] = ||r||^2); *accept = the converged reason
 * (PKRYLOV_CONVERGED_RTOL / _ATOL) when it meets the tolerance too, else 0 and the driver restarts from x
 * unless *stagnated (too many failed confirmations: PK_MAX_CONFIRM_FAILURES). The recurrence stop rule
 * accepts at once (no true residual; the reason from atol >= tol).
 */
int pk_kry_confirm(pk_kry_run *R, pkrylov_result *res, int *accept, int *stagnated);
/** Converged reason for residual norm v, or 0. */
int pk_kry_converged(const pk_kry_run *R, double v);
/**
 * S[slot] holds (r, r) of the true residual r = b - A x of the current x (a GMRES cycle start): when it is
 * the smallest seen in the solve, x is copied to R->xbest. Reads S (a host sync on CUDA: call it where the
 * driver syncs anyway, e.g. after the poll that ends a cycle, before x changes).
 */
int pk_kry_keep_best(pk_kry_run *R, int32_t slot);
/**
 * The end of a restart cycle that the steps or the host stopped (st from pk_kry_poll(), after x got the
 * cycle's valid columns): a NaN ends the solve (reason and breakdown iteration), a converged estimate is
 * confirmed on the true residual (accepted: converged; too many failed confirmations: stagnation), a host
 * stop (monitor, stagnation) ends it. *done = 1 when res->reason is set and the driver returns; 0: the
 * driver goes on with its own breakdown handling and the next cycle. res->iterations = st->its.
 */
int pk_kry_cycle_end(pk_kry_run *R, const pk_kry_status *st, pkrylov_result *res, int *done);

/** A driver's start (restart 0: the first, 1: from the current x) and its iteration k (1-based). */
typedef int (*pk_kry_start_fn)(pk_kry_run *R, int restart);
typedef int (*pk_kry_iter_fn)(pk_kry_run *R, pkrylov_result *res, int32_t k);
/**
 * Called when the steps stopped with a breakdown other than NaN (st->code < 0): *restart = 1 restarts from x
 * (the driver found the breakdown to be a rounding artefact of a recurrence); otherwise the hook may set
 * res->reason (and breakdown_iteration) itself, or leave it 0 for the steps' code.
 */
typedef int (*pk_kry_breakdown_fn)(pk_kry_run *R, const pk_kry_status *st, pkrylov_result *res, int *restart);
/**
 * The block loop of the methods without restart cycles (BiCGStab family, single-reduction CG): start, then
 * blocks of pk_kry_sync_interval() iterations until the steps stop the iteration, the host stops it
 * (monitor, stagnation) or maxit; a convergence is confirmed (pk_kry_confirm), restarting from x when the
 * confirmation fails; breakdown (may be NULL) sees the breakdowns first.
 */
int pk_kry_iterate(pk_kry_run *R, pkrylov_result *res, pk_kry_start_fn start, pk_kry_iter_fn iter,
                   pk_kry_breakdown_fn breakdown);

/** BiCGStab and pipelined BiCGStab (bicgstab.c). */
int pk_bicgstab_sizes(pkrylov_solver s, pk_kry_sizes *z);
int pk_bicgstab_solve(pk_kry_run *R, pkrylov_result *res);
int pk_pipebicgstab_sizes(pkrylov_solver s, pk_kry_sizes *z);
int pk_pipebicgstab_solve(pk_kry_run *R, pkrylov_result *res);
/** GMRES family (gmres.c, cagmres.c: written by their helper; declared here so kry.c can route). */
int pk_gmres_sizes(pkrylov_solver s, pk_kry_sizes *z);
int pk_gmres_solve(pk_kry_run *R, pkrylov_result *res);
/** CA-GMRES (cagmres.c; pk_gmres_sizes/solve route to these). */
int pk_cagmres_sizes(pkrylov_solver s, pk_kry_sizes *z);
int pk_cagmres_solve(pk_kry_run *R, pkrylov_result *res);
/** CG and pipelined CG (cg.c). */
int pk_cg_sizes(pkrylov_solver s, pk_kry_sizes *z);
int pk_cg_solve(pk_kry_run *R, pkrylov_result *res);
int pk_pipecg_sizes(pkrylov_solver s, pk_kry_sizes *z);
int pk_pipecg_solve(pk_kry_run *R, pkrylov_result *res);
/** Single-reduction CG (srcg.c). */
int pk_srcg_sizes(pkrylov_solver s, pk_kry_sizes *z);
int pk_srcg_solve(pk_kry_run *R, pkrylov_result *res);
/**
 * Test hooks of CA-GMRES. pk_cagmres_step_used: the step the last solve of s used after its first cycle
 * (the choice of step 0 = auto; 0 before a solve). pk_cagmres_cholqr: CholQR in place of basis vectors
 * [a0, a0+k) of engine E (made for a CA-GMRES solver, k <= its step): Gram matrix and Cholesky factor in
 * double-double (dd = 1) or double (dd = 0), V := V R^-1; *kfail = the columns that factored (k when all).
 */
int pk_cagmres_step_used(pkrylov_solver s, int32_t *step);
int pk_cagmres_cholqr(pk_kry *E, int32_t a0, int32_t k, int32_t dd, int32_t *kfail);

/* ------------------------------------------------------------------------------------------------ */
/* Backends (kry_cpu.c, src/cuda/pk_cuda_kry.cu). kry.c implements the pk_kry_* functions above by      */
/* checking ids and counts (a bad id is a driver bug: PKRYLOV_ERR_INTERNAL... reported, never a crash)  */
/* and calling the backend of the solver's context.                                                   */

struct pk_kry {
  pkrylov_solver s;
  pkrylov_context ctx;
  const struct pk_kry_backend *be;
  int64_t n;
  int32_t nwork, nbasis, nscalars;
  int64_t ld;          /* leading dimension of the basis block (>= n) */
  int32_t mem;         /* of the bound arrays */
  const double *b_user; /* the caller's b and x (host or device) */
  double *x_user;
  int32_t discard_x;    /* unbind after a failure: do not copy the engine's x back (backends that keep
                           their own copy of x; the caller's x then stays as it came) */
  void *priv;          /* backend state: vectors, basis, scalars, bound copies */
  int32_t x_is_zero;   /* set by the frame around its residual of ||b|| (b - A 0 on device backends): the x of
                          that residual is zero, so a backend may take A x = 0 without calling a host routine
                          (a user operator, the caller's halo exchange) */
};

typedef struct pk_kry_backend {
  int (*create)(pk_kry *E);  /* allocate vectors (zeroed), basis, scalars (zeroed) into E->priv */
  void (*destroy)(pk_kry *E);
  int (*bind)(pk_kry *E, int32_t x_zero);
  int (*unbind)(pk_kry *E);
  int (*copy)(pk_kry *E, pk_vid src, pk_vid dst);
  int (*first_nonfinite)(pk_kry *E, pk_vid v, int64_t *index, double *value);
  int (*matvec)(pk_kry *E, pk_vid x, pk_vid y);
  int (*precond)(pk_kry *E, pk_vid x, pk_vid y);
  int (*residual)(pk_kry *E, pk_vid x, pk_vid r, int32_t out);
  int (*update)(pk_kry *E, int32_t nupd, const pk_kupd *u, int32_t npairs, const pk_kpair *pairs,
                int32_t out, int32_t flags);
  int (*block_dots)(pk_kry *E, int32_t a0, int32_t ka, int32_t b0, int32_t kb, int32_t dd, int32_t out,
                    int32_t flags);
  int (*basis_dots)(pk_kry *E, pk_vid x, int32_t b0, int32_t k, int32_t with_norm, int32_t out,
                    int32_t flags);
  int (*basis_axpy)(pk_kry *E, pk_vid y, pk_coef cy, int32_t b0, int32_t k, int32_t c0, int32_t neg);
  int (*basis_gemm)(pk_kry *E, int32_t a0, int32_t kin, int32_t t0, int32_t ldt, int32_t b1, int32_t kout);
  int (*scalar)(pk_kry *E, int32_t id, int32_t arg);
  int (*wait)(pk_kry *E);
  int (*getv)(pk_kry *E, int32_t n, const pk_krange *r); /* ranges checked, counts > 0 */
  int (*set)(pk_kry *E, int32_t first, int32_t count, const double *host);
  int (*sync)(pk_kry *E);
  /* optional (NULL: the front end composes basis_axpy and basis_dots; blocks are ignored) */
  int (*basis_axpy_dots)(pk_kry *E, pk_vid y, pk_coef cy, int32_t b0, int32_t k, int32_t c0, int32_t neg,
                         int32_t with_norm, int32_t out, int32_t flags);
  int (*block_begin)(pk_kry *E);
  int (*block_end)(pk_kry *E);
  /* CG's fused loops (NULL: CG and pipelined CG do not run on this engine; the front end answers
     PKRYLOV_ERR_INTERNAL naming the operation) */
  int (*cg_precond)(pk_kry *E, pk_vid r, pk_vid q, pk_vid z, pk_coef alpha, int32_t out, int32_t flags);
  int (*cg_operator)(pk_kry *E, pk_vid x, pk_vid p, pk_vid z, pk_vid q, pk_coef alpha, pk_coef beta,
                     int32_t out, int32_t flags);
  int (*pipecg_update)(pk_kry *E, const pk_kpipecg *v, pk_coef alpha, pk_coef beta, int32_t nsums,
                       int32_t out, int32_t flags);
  /* optional: an operator / preconditioner application fused with the update after it (NULL: the front end
     runs matvec or precond, then update); called with nupd + npairs > 0 and the arguments checked */
  int (*matvec_update)(pk_kry *E, pk_vid x, pk_vid y, int32_t nupd, const pk_kupd *u, int32_t npairs,
                       const pk_kpair *pairs, int32_t out, int32_t flags);
  int (*precond_update)(pk_kry *E, pk_vid x, pk_vid y, int32_t nupd, const pk_kupd *u, int32_t npairs,
                        const pk_kpair *pairs, int32_t out, int32_t flags);
} pk_kry_backend;

extern const pk_kry_backend pk_kry_cpu_backend;
/* pk_kry_cuda_backend (src/cuda/pk_cuda_kry.cu) is reached through the CUDA backend's table (pk_backend.kry) */
extern const pk_kry_backend pk_kry_cuda_backend;

#ifdef __cplusplus
}
#endif

#endif /* PK_KRY_H */

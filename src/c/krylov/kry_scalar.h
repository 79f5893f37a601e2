/**
 * @file kry_scalar.h
 * @brief Scalar steps of the BiCGStab and GMRES families, compiled for the host (CPU engine) and for the
 * device (CUDA engine: one thread of one block), so both backends run the same scalar arithmetic.
 *
 * Every step is `PK_HD static inline int step(double *S, int arg)` on the engine's scalar array S (layout
 * defined by its driver) and returns 0. Rules for this code (it is compiled as C by gcc and as C++ by
 * nvcc): no variable-length arrays, no compound literals or designated initialisers, no implicit void*
 * conversions, no library calls other than sqrt/fabs/fma/isfinite; fixed-size local arrays only.
 *
 * Ids, one range per family (each family header owns its range and its dispatch function):
 *   100-199  BiCGStab, pipelined BiCGStab     (kry_scalar_bicgstab.h, pk_kss_bicgstab)
 *   200-299  GMRES, pipelined GMRES, FGMRES   (kry_scalar_gmres.h,    pk_kss_gmres)
 *   300-399  CA-GMRES                         (kry_scalar_cagmres.h,  pk_kss_cagmres)
 *   400-499  single-reduction CG              (kry_scalar_cg.h,       pk_kss_cg)
 *   500-599  CG, pipelined CG                 (kry_scalar_pcg.h,      pk_kss_pcg)
 */
#ifndef PK_KRY_SCALAR_H
#define PK_KRY_SCALAR_H

#ifdef __CUDACC__
#define PK_HD __host__ __device__
#else
#define PK_HD
#endif

#include <math.h>

#include "pkrylov.h" /* the pkrylov_reason codes the steps write */

/*
 * The common header of every driver's scalar array (see pk_kry.h, "The frame and the drivers"). Values are
 * doubles; codes and iterations are small integers stored exactly.
 */
enum {
  PK_KS_TOL = 0,       /* convergence threshold on the recurrence residual norm (written by the frame) */
  PK_KS_STOP = 1,      /* 0 while running; else the pkrylov_reason the steps decided */
  PK_KS_STOP_IT = 2,   /* the iteration of that decision (breakdown_iteration) */
  PK_KS_ITS = 3,       /* iterations done: x holds iterate ITS */
  PK_KS_RING_BASE = 4, /* index of the residual-history ring in S (written by the frame) */
  PK_KS_RING_LEN = 5,  /* its length (> the sync interval) */
  PK_KS_TRUE = 6,      /* the frame's true residual ||b - A x||^2 */
  PK_KS_RULE = 7,      /* 1: the recurrence stop rule (PKRYLOV_STOP_RECURRENCE; written by the frame) */
  PK_KS_DRIVER = 8     /* first scalar of the driver */
};

/**
 * Stop code (not a pkrylov_reason) of a GMRES cycle that cannot go on (an invariant subspace, a singular
 * column) while its estimate has not met the recurrence rule's tolerance: the frame starts the next cycle
 * from the true residual (pk_kry_cycle_end). Under the confirmed rule such a cycle stops converged and the
 * confirmation decides.
 */
#define PK_KS_CYCLE_END 99
PK_HD static inline int pk_ks_cycle_end_code(const double *S) {
  return S[PK_KS_RULE] != 0.0 ? PK_KS_CYCLE_END : PKRYLOV_CONVERGED_RTOL;
}

/** 1 while no step has stopped the iteration. */
PK_HD static inline int pk_ks_running(const double *S) { return S[PK_KS_STOP] == 0.0; }

/** Stop with reason at iteration it (the first stop wins). */
PK_HD static inline void pk_ks_stop(double *S, int reason, int it) {
  if (S[PK_KS_STOP] == 0.0) {
    S[PK_KS_STOP] = (double)reason;
    S[PK_KS_STOP_IT] = (double)it;
  }
}

/** The residual-history ring's entry of iteration it. A translation unit that defines PK_KS_NO_RING compiles
 *  the steps without it (the CUDA engine's folded steps, pk_cuda_scalar.cuh: every index of the scalars
 *  then known at compile time, so a thread's copy of them stays in registers; their writer makes the
 *  entry). */
PK_HD static inline void pk_ks_ring_put(double *S, int it, double res) {
#ifdef PK_KS_NO_RING
  (void)S, (void)it, (void)res;
#else
  const int len = (int)S[PK_KS_RING_LEN];
  if (len > 0) S[(int)S[PK_KS_RING_BASE] + it % len] = res;
#endif
}

/** Iteration it is done with recurrence residual norm res: ring entry, iteration count. */
PK_HD static inline void pk_ks_record(double *S, int it, double res) {
  pk_ks_ring_put(S, it, res);
  S[PK_KS_ITS] = (double)it;
}

/**
 * Test the residual of iteration it against the tolerance tol = S[PK_KS_TOL]: stop converged (returns 1) or
 * 0; a NaN or Inf stops with PKRYLOV_DIVERGED_NAN (returns -1). The residual is its norm res, or with
 * squared = 1 the sum rr = res^2 the method computed. The confirmed rule (S[PK_KS_RULE] = 0): norm <= tol
 * (the frame then confirms on the true residual); the recurrence rule: rr < tol^2 (squared) or res < tol
 * (a norm estimate, the GMRES family), strictly, or a residual that is exactly 0.
 */
PK_HD static inline int pk_ks_test_as(double *S, int it, double v, int squared) {
  const double res = squared ? sqrt(v) : v;
  if (!isfinite(res)) {
    pk_ks_stop(S, PKRYLOV_DIVERGED_NAN, it);
    return -1;
  }
  const double tol = S[PK_KS_TOL];
  const int conv = S[PK_KS_RULE] != 0.0 ? (squared ? v < tol * tol : v < tol) || v == 0.0 : res <= tol;
  if (conv) {
    pk_ks_stop(S, PKRYLOV_CONVERGED_RTOL, it); /* the frame tells RTOL from ATOL */
    return 1;
  }
  return 0;
}
/** pk_ks_test_as on a residual norm (estimate). */
PK_HD static inline int pk_ks_test(double *S, int it, double res) { return pk_ks_test_as(S, it, res, 0); }
/** pk_ks_test_as on a squared sum rr = (r, r). */
PK_HD static inline int pk_ks_test_rr(double *S, int it, double rr) { return pk_ks_test_as(S, it, rr, 1); }

#include "kry_scalar_bicgstab.h"
#include "kry_scalar_cagmres.h"
#include "kry_scalar_cg.h"
#include "kry_scalar_gmres.h"
#include "kry_scalar_pcg.h"

/** Run step id on S; returns 0, or -1 for an unknown id. */
PK_HD static inline int pk_kry_scalar_step(int id, double *S, int arg) {
  if (id >= 100 && id < 200) return pk_kss_bicgstab(id, S, arg);
  if (id >= 200 && id < 300) return pk_kss_gmres(id, S, arg);
  if (id >= 300 && id < 400) return pk_kss_cagmres(id, S, arg);
  if (id >= 400 && id < 500) return pk_kss_cg(id, S, arg);
  if (id >= 500 && id < 600) return pk_kss_pcg(id, S, arg);
  return -1;
}

#endif /* PK_KRY_SCALAR_H */

/**
 * @file cg.c
 * @brief CG and pipelined CG on the vector engine (pk_kry.h): every backend without a CG driver of its own (the
 * CPU); on CUDA with the solver option kry.cg=1, the driver of pk_cuda_solver.cu staying the default until the
 * engine is as fast at every size (pk_kry_serves). Blocks of
 * pk_kry_sync_interval() iterations (1 on the CPU) between host reads; see cg_run and pc_run.
 *
 * CG is the two-loop form of Mueller et al.: a "preconditioner loop" (r -= alpha q; z = M^-1 r; (r,z), (r,r):
 * pk_kry_cg_precond) and an "operator loop" (x += alpha p; p = z + beta p; q = A z + beta q; (p,q):
 * pk_kry_cg_operator), with q = A p kept by recurrence so that A is applied to z while p is being formed. The
 * update of x lags one loop behind and is completed when the iteration stops.
 *
 * Pipelined CG is Ghysels and Vanroose (2014), Algorithm 4: one reduction of (r,u), (w,u) and (r,r) per
 * iteration, started after the fused vector update (pk_kry_pipecg_update) and finished after the
 * preconditioner is applied to w (and, for operators applied on whole vectors, A to m: user routines, the
 * distributed stencil's halo exchange), so that MPI overlaps it. Recurrence vectors drift from their
 * definitions in finite precision; residual replacement (Cools et al. 2018) recomputes r, u, w, s, q, z
 * explicitly every k iterations (pkrylov_solver_set_residual_replacement) or when the estimate of pk_rr.h says
 * so (PKRYLOV_REPLACE_AUTO), measuring the gap it closes to calibrate the estimate.
 *
 * The scalar recurrences, the convergence test, breakdown detection (negative definite operators solve: the
 * signs are fixed by the first values) and the minimum-residual bookkeeping are the scalar steps of
 * kry_scalar_pcg.h; the drivers read the scalars after every block of iterations and hold the host's part: history, monitor and stagnation (pk_kry_poll), the confirmation of a convergence on
 * the true residual with a restart from x when it fails (pk_kry_confirm, PK_MAX_CONFIRM_FAILURES), the
 * true-residual interval, the replacements, pipelined CG's direct curvature check (PK_MAX_RESTARTS) and the
 * minimum-residual iterate (CG's is x + alpha p, its x update lagging one loop). The frame's best-iterate
 * copy is off (pk_kry_sizes.keep_last): the solve returns the driver's x, the last iterate or the
 * minimum-residual one, as the models' CG does.
 */
#include <math.h>
#include <string.h>

#include "pk_kry.h"

/** Restarts of pipelined CG after its recurrence (p, A p) lost the sign the true one has, before the solve
 *  reports stagnation. */
#define PK_MAX_RESTARTS 5

static pk_kupd zero_vec(pk_vid y) { return pk_kupd_make(y, pk_c(PK_S_ZERO), 0, NULL, NULL); }

static pk_kpair pair(pk_vid a, pk_vid b) {
  pk_kpair p;
  p.a = a;
  p.b = b;
  return p;
}

/** The reason of a convergence the steps found on the recurrence sum rr (RTOL or ATOL, the stop rule's). */
static int cg_converged(const pk_kry_run *R, double rr) { return pk_solver_converged_rr(R->s, R->tol, rr); }

/**
 * The end of a solve with the minimum-residual iterate: the kept iterate (vector xmin, scalars from `last`:
 * LAST_RR, MIN_ON, MIN_RR, MIN_IT) replaces x when the last residual is larger.
 */
static int cg_min_result(pk_kry_run *R, pkrylov_result *res, int32_t last, pk_vid xmin) {
  if (!R->s->min_res) return PKRYLOV_SUCCESS;
  double m[4];
  PK_CALL(pk_kry_get(R->E, last, 4, m));
  if (pk_solver_min_result(res, m[3] >= 0, m[2], (int32_t)m[3], m[0])) {
    PK_CALL(pk_kry_copy(R->E, xmin, PK_KV_X));
    R->have_final = 0; /* a confirmed true residual was x's, not x_min's */
  }
  return PKRYLOV_SUCCESS;
}

/** The driver's settings in S: maxit, the minimum-residual switch (at `on`, its MIN_RR, MIN_IT after it). */
static int cg_settings(pk_kry_run *R, int32_t maxit_slot, int32_t on) {
  const double mx = (double)R->s->maxit, mo[3] = {R->s->min_res ? 1.0 : 0.0, 0.0, -1.0};
  PK_CALL(pk_kry_set(R->E, maxit_slot, 1, &mx));
  return pk_kry_set(R->E, on, 3, mo);
}

/* ------------------------------------------------------------------------------------------------ */
/* CG                                                                                                */

enum { CG_R = PK_KV_W0, CG_Z, CG_P, CG_Q, CG_XMIN, CG_NW };

int pk_cg_sizes(pkrylov_solver s, pk_kry_sizes *z) {
  z->nwork = (s->min_res ? CG_NW : CG_XMIN) - PK_KV_W0;
  z->nbasis = 0;
  z->nscalars = PK_CG_NSCALARS;
  z->keep_last = 1;
  return PKRYLOV_SUCCESS;
}

/** Scalars the CG driver reads after a step (PK_CG_IT .. PK_CG_TAKE). */
enum { CG_H_IT, CG_H_MAXIT, CG_H_LAST_RR, CG_H_MIN_ON, CG_H_MIN_RR, CG_H_MIN_IT, CG_H_TAKE, CG_H_N };

/** pk_kry_poll, reading the driver's scalars h (CG_H_*) in the same read. */
static int cg_poll(pk_kry_run *R, int32_t first, pk_kry_status *st, double *h) {
  return pk_kry_poll_read(R, first, st, PK_CG_IT, CG_H_N, h);
}

/** Iterations per block: the engine's sync interval (1 on the CPU), 1 with a monitor or a stagnation window
 *  (they see every residual before the next iteration runs). */
static int32_t cg_block(const pk_kry_run *R) {
  return R->s->monitor || R->s->stag_window > 0 ? 1 : pk_kry_sync_interval(R->E);
}

/**
 * Two-loop fused CG in blocks of iterations (cg_block): per iteration the preconditioner loop and its step
 * (PK_KSS_CG_ITER), the minimum-residual update, the operator loop and its step (PK_KSS_CG_SIGMA), the loops
 * with PK_KRY_IF_RUNNING so that the rest of a block does nothing once a step stopped; the host reads the
 * scalars after each block. On return res->iterations, reason, breakdown_iteration are set and x holds the
 * last good iterate.
 */
static int cg_run(pk_kry_run *R, pkrylov_result *res) {
  pkrylov_solver s = R->s;
  pk_kry *E = R->E;
  const pk_coef zero = pk_c(PK_S_ZERO);
  const pk_vid xp[2] = {PK_KV_X, CG_P};
  const pk_coef cxp[2] = {pk_c(PK_S_ONE), pk_c(PK_CG_ALPHA)};
  const pk_kupd xstep = pk_kupd_make(PK_KV_X, pk_c(PK_S_ONE), 1, xp + 1, cxp + 1); /* x += alpha p */
  /* x_min = x + alpha p when the step says so (KEEP 0, TAKE 1, TAKE_ALPHA alpha), else x_min unchanged */
  const pk_coef ckeep[2] = {pk_c(PK_CG_TAKE), pk_c(PK_CG_TAKE_ALPHA)};
  const pk_kupd xmin = pk_kupd_make(CG_XMIN, pk_c(PK_CG_KEEP), 2, xp, ckeep);
  const int32_t run = PK_KRY_IF_RUNNING, every = s->true_res_interval, k = cg_block(R);
  double h[CG_H_N], c[2];
  pk_kry_status st;
  PK_CALL(cg_settings(R, PK_CG_MAXIT, PK_CG_MIN_ON));
  for (int restart = 0;; restart = 1) {
    /* r = b - A x; z = M^-1 r; (r, z), (r, r) */
    PK_CALL(pk_kry_residual(E, PK_KV_X, CG_R, -1));
    const pk_kupd q0 = zero_vec(CG_Q);
    PK_CALL(pk_kry_update(E, 1, &q0, 0, NULL, 0, 0));
    PK_CALL(pk_kry_cg_precond(E, CG_R, CG_Q, CG_Z, zero, PK_CG_RZ, 0));
    PK_CALL(pk_kry_scalar(E, PK_KSS_CG_INIT, restart));
    PK_CALL(cg_poll(R, !restart, &st, h));
    if (st.code == PKRYLOV_DIVERGED_NAN) {
      res->reason = PKRYLOV_DIVERGED_NAN;
      res->breakdown_iteration = st.code_it;
      return PKRYLOV_SUCCESS;
    }
    if (!restart) { /* iteration 0: the residual is the true one */
      if (st.code > 0) return res->reason = cg_converged(R, h[CG_H_LAST_RR]), PKRYLOV_SUCCESS;
      if (st.host) {
        const double none = -1.0; /* stopped before the iterate was kept */
        PK_CALL(pk_kry_set(E, PK_CG_MIN_IT, 1, &none));
        return res->reason = st.host, PKRYLOV_SUCCESS;
      }
      if (st.code == PKRYLOV_DIVERGED_MAX_ITERATIONS) return res->reason = st.code, PKRYLOV_SUCCESS;
    }
    if (h[CG_H_TAKE] != 0.0) PK_CALL(pk_kry_copy(E, PK_KV_X, CG_XMIN)); /* iteration 0, or a restart */
    if (st.code) {
      res->reason = st.code;
      res->breakdown_iteration = st.code_it;
      return PKRYLOV_SUCCESS;
    }
    /* p = z; q = A p; (p, q); alpha */
    const pk_kupd p0 = zero_vec(CG_P);
    PK_CALL(pk_kry_update(E, 1, &p0, 0, NULL, 0, 0));
    PK_CALL(pk_kry_cg_operator(E, PK_KV_X, CG_P, CG_Z, CG_Q, zero, zero, PK_CG_PQ, 0));
    PK_CALL(pk_kry_scalar(E, PK_KSS_CG_SIGMA, 0));
    PK_CALL(pk_kry_get(E, PK_KS_STOP, 2, c)); /* (the step records nothing: no poll needed) */
    if (c[0] != 0.0) {
      res->reason = (int32_t)c[0];
      res->breakdown_iteration = (int32_t)c[1];
      return PKRYLOV_SUCCESS;
    }
    int32_t it = (int32_t)h[CG_H_IT];
    for (;;) {
      /* a block ends where the true residual is due */
      int32_t nb = k;
      if (every > 0 && every - it % every < nb) nb = every - it % every;
      PK_CALL(pk_kry_block_begin(E)); /* the CUDA engine replays a graph of the block */
      for (int32_t j = 0; j < nb; j++) {
        int rc = pk_kry_cg_precond(E, CG_R, CG_Q, CG_Z, pk_c(PK_CG_ALPHA), PK_CG_RZ, run);
        if (!rc) rc = pk_kry_scalar(E, PK_KSS_CG_ITER, 0);
        /* the step's iterate is x + alpha p: applied by the operator loop, or below when the step stopped */
        if (!rc && s->min_res) rc = pk_kry_update(E, 1, &xmin, 0, NULL, 0, 0);
        if (!rc)
          rc = pk_kry_cg_operator(E, PK_KV_X, CG_P, CG_Z, CG_Q, pk_c(PK_CG_ALPHA), pk_c(PK_CG_BETA), PK_CG_PQ,
                                  run);
        if (!rc) rc = pk_kry_scalar(E, PK_KSS_CG_SIGMA, 0);
        if (rc) {
          (void)pk_kry_block_end(E);
          return rc;
        }
      }
      PK_CALL(pk_kry_block_end(E));
      PK_CALL(cg_poll(R, 0, &st, h));
      it = (int32_t)h[CG_H_IT];
      res->iterations = it;
      if (!st.code && !st.host) { /* a whole block: x and r are at iteration it */
        if (every > 0 && it % every == 0) { /* replace the recurrence residual by the true one */
          PK_CALL(pk_kry_residual(E, PK_KV_X, CG_R, PK_CG_TRUE));
          res->true_residual_checks++;
        }
        continue;
      }
      /* NaN (x is the last good iterate either way) or a breakdown found by the operator loop's step (that
         loop ran: x is x_it) */
      if (st.code == PKRYLOV_DIVERGED_NAN || st.code == PKRYLOV_DIVERGED_BREAKDOWN_INDEFINITE_MATRIX) {
        res->reason = st.code;
        res->breakdown_iteration = st.code_it;
        return PKRYLOV_SUCCESS;
      }
      /* stopped by the preconditioner loop's step (the operator loop did nothing: x_it = x + alpha p is
         due), or by the host (monitor, stagnation) after a whole iteration (x is x_it) */
      if (st.code) PK_CALL(pk_kry_update(E, 1, &xstep, 0, NULL, 0, 0));
      int conv = st.code > 0 ? cg_converged(R, h[CG_H_LAST_RR]) : 0;
      if (conv) {
        int accept, stagnated;
        PK_CALL(pk_kry_confirm(R, res, &accept, &stagnated));
        if (stagnated) return res->reason = PKRYLOV_DIVERGED_STAGNATION, PKRYLOV_SUCCESS;
        if (!accept && it < s->maxit) break; /* restart the recurrences from the current x */
        if (!accept) conv = 0;
      }
      if (conv) {
        res->reason = conv;
      } else if (st.code == PKRYLOV_DIVERGED_BREAKDOWN_INDEFINITE_PRECOND) {
        res->reason = st.code;
        res->breakdown_iteration = st.code_it;
      } else {
        res->reason = st.host ? st.host : PKRYLOV_DIVERGED_MAX_ITERATIONS;
      }
      return PKRYLOV_SUCCESS;
    }
  }
}

int pk_cg_solve(pk_kry_run *R, pkrylov_result *res) {
  PK_CALL(cg_run(R, res));
  return cg_min_result(R, res, PK_CG_LAST_RR, CG_XMIN);
}

/* ------------------------------------------------------------------------------------------------ */
/* Pipelined CG                                                                                      */

enum { PC_R = PK_KV_W0, PC_U, PC_W, PC_M, PC_Z, PC_Q, PC_S, PC_P, PC_AT, PC_NFIX };

/** The vectors of one solve: n = A m of its own for operators applied on whole vectors, x_min with
 *  min_res. */
typedef struct {
  pk_kpipecg v;
  pk_vid xmin, t;
  int32_t nv; /* sums per reduction: PK_RR_NV with the automatic replacement, else PK_RR_NV_BASE */
} pc_vecs;

/** 1 when the driver computes n = A m itself, during the reduction: operators applied on whole vectors, on a
 *  device backend only those applied by a host routine (a user operator, the caller's halo exchange; the
 *  device exchanges the halos of distributed operators inside the fused update, as its products do). */
static int pc_own_product(pkrylov_solver s) {
  const pkrylov_operator A = s->A;
  if (!s->ctx->be->device) return pk_op_whole_vector(A);
  return A->type == PKRYLOV_OPERATOR_USER || A->halo.exchange != NULL;
}

static int32_t pc_nwork(pkrylov_solver s, pk_vid *n, pk_vid *xmin) {
  int32_t k = PC_NFIX;
  *n = pc_own_product(s) ? k++ : -1;
  *xmin = s->min_res ? k++ : -1;
  return k - PK_KV_W0;
}

int pk_pipecg_sizes(pkrylov_solver s, pk_kry_sizes *z) {
  pk_vid n, xmin;
  z->nwork = pc_nwork(s, &n, &xmin);
  z->nbasis = 0;
  z->nscalars = PK_PCG_NSCALARS;
  z->keep_last = 1;
  return PKRYLOV_SUCCESS;
}

/**
 * Recompute r = b - A x, u = M^-1 r, w = A u, and (when have_p) s = A p, q = M^-1 s, z = A q (a (re)start or
 * a replacement).
 */
static int pc_replace(pk_kry *E, int have_p) {
  PK_CALL(pk_kry_residual(E, PK_KV_X, PC_R, -1));
  PK_CALL(pk_kry_precond(E, PC_R, PC_U));
  PK_CALL(pk_kry_matvec(E, PC_U, PC_W));
  if (!have_p) return PKRYLOV_SUCCESS;
  PK_CALL(pk_kry_matvec(E, PC_P, PC_S));
  PK_CALL(pk_kry_precond(E, PC_S, PC_Q));
  return pk_kry_matvec(E, PC_Q, PC_Z);
}

/** Start the reduction of the explicitly computed vectors: (r, u), (w, u), (r, r) (and the rule's norms). */
static int pc_sums(pk_kry *E, const pc_vecs *V) {
  const pk_kpair pr[PK_RR_NV] = {pair(PC_R, PC_U),       pair(PC_W, PC_U), pair(PC_R, PC_R), pair(PK_KV_X, PK_KV_X),
                                 pair(PC_P, PC_P),       pair(PC_U, PC_U), pair(PC_Q, PC_Q)};
  return pk_kry_update(E, 0, NULL, V->nv, pr, PK_PCG_GAMMA, PK_KRY_ASYNC);
}

/** Set the estimate's field f (PK_PE_*) to v. */
static int pc_est_set(pk_kry *E, int32_t f, double v) { return pk_kry_set(E, PK_PCG_EST + f, 1, &v); }

/** Scalars the pipelined CG driver reads after a step (PK_PCG_CURV .. PK_PCG_REPLACE). */
enum {
  PC_H_CURV, PC_H_ALPHA, PC_H_BETA, PC_H_GAMMA_OLD, PC_H_ALPHA_OLD, PC_H_RHO_SIGN, PC_H_SIGMA_SIGN, PC_H_FIRST,
  PC_H_IT, PC_H_MAXIT, PC_H_LAST_RR, PC_H_MIN_ON, PC_H_MIN_RR, PC_H_MIN_IT, PC_H_TAKE, PC_H_SUSPECT,
  PC_H_AUTO, PC_H_REPLACE, PC_H_N
};

/**
 * The replacement the estimate asked for (the stop code PK_KS_REPLACE; x is the iterate of the step): the
 * vectors recomputed, the gap closed measured (t = r_old - r_new, which calibrates the estimate), the stop
 * cleared and the reduction of the new vectors started; the iteration goes on from the new sums.
 */
static int pc_replace_now(pk_kry *E, const pc_vecs *V, pkrylov_result *res) {
  const pk_vid t = V->t;
  const pk_vid xr[1] = {PC_R};
  const pk_coef cr[1] = {pk_cneg(PK_S_ONE)};
  const pk_kupd gap = pk_kupd_make(t, pk_c(PK_S_ONE), 1, xr, cr);
  const pk_kpair tt = pair(t, t);
  const double clear[2] = {0.0, 0.0};
  double gap2;
  PK_CALL(pk_kry_copy(E, PC_R, t));
  PK_CALL(pc_replace(E, 1));
  PK_CALL(pk_kry_update(E, 1, &gap, 1, &tt, PK_PCG_GAP, 0));
  PK_CALL(pk_kry_get(E, PK_PCG_GAP, 1, &gap2));
  res->residual_replacements++;
  PK_CALL(pc_est_set(E, PK_PE_GAP, sqrt(gap2)));
  PK_CALL(pc_est_set(E, PK_PE_FRESH, 1.0));
  PK_CALL(pk_kry_set(E, PK_KS_STOP, 2, clear));
  return pc_sums(E, V);
}

/** What follows the fused update: m = M^-1 w overlapped with the reduction, and for operators whose product
 *  the driver makes (pc_vecs.v.n) also n = A m, then the step on the sums; min: the minimum-residual
 *  update x_min = KEEP x_min + TAKE x. */
static int pc_head(pk_kry *E, const pc_vecs *V, int min) {
  const pk_vid xk[1] = {PK_KV_X};
  const pk_coef ck[1] = {pk_c(PK_PCG_TAKE)};
  const pk_kupd keep = pk_kupd_make(V->xmin, pk_c(PK_PCG_KEEP), 1, xk, ck);
  int ierr = pk_kry_precond(E, PC_W, PC_M);
  if (!ierr && V->v.n >= 0) ierr = pk_kry_matvec(E, PC_M, V->v.n);
  const int werr = pk_kry_wait(E); /* the reduction ends on every rank, also after a failing routine */
  PK_CALL(ierr);
  PK_CALL(werr);
  PK_CALL(pk_kry_scalar(E, PK_KSS_PCG_SUMS, 0));
  if (min) PK_CALL(pk_kry_update(E, 1, &keep, 0, NULL, 0, 0));
  return PKRYLOV_SUCCESS;
}

/**
 * Pipelined preconditioned CG (Ghysels-Vanroose) with residual replacement: every s->replace_interval
 * iterations after the update, or with PKRYLOV_REPLACE_AUTO when the estimate of pk_rr.h says so after the
 * reduction: the vectors are replaced before the iteration's residual is recorded and tested, and the
 * iteration goes on from the replacement's sums (the convergence test then sees the true residual).
 *
 * After a (re)start or a replacement the host looks at the first step's scalars (pc_head, then a poll);
 * then the iterations run in blocks (cg_block) of [fused update, m = M^-1 w, the step] with the update under
 * PK_KRY_IF_RUNNING, so the rest of a block does nothing once a step stopped (a replacement the estimate asks
 * for is such a stop, PK_KS_REPLACE); a block ends where a fixed replacement or the true residual is due, its
 * last update then without sums.
 */
static int pc_run(pk_kry_run *R, pkrylov_result *res, const pc_vecs *V) {
  pkrylov_solver s = R->s;
  pk_kry *E = R->E;
  const int autorr = s->replace_interval == PKRYLOV_REPLACE_AUTO;
  const int32_t every = s->true_res_interval, k = cg_block(R);
  const pk_vid t = V->t;
  double h[PC_H_N];
  pk_kry_status st;
  int32_t since_replace = 0, it = 0;
  PK_CALL(cg_settings(R, PK_PCG_MAXIT, PK_PCG_MIN_ON));
  {
    const double a = autorr ? 1.0 : 0.0;
    PK_CALL(pk_kry_set(E, PK_PCG_AUTO, 1, &a));
  }
  if (autorr) {
    pk_rr_est est;
    double e[PK_PE_N];
    PK_CALL(pk_rr_init(s, res->rhs_norm, &est));
    pk_pcg_est_store(e, 0, &est);
    PK_CALL(pk_kry_set(E, PK_PCG_EST, PK_PE_N, e));
  }
  for (int restart = 0;; restart = 1) {
    PK_CALL(pk_kry_scalar(E, PK_KSS_PCG_START, restart));
    const pk_kupd z0[4] = {zero_vec(PC_Z), zero_vec(PC_P), zero_vec(PC_Q), zero_vec(PC_S)};
    PK_CALL(pk_kry_update(E, 4, z0, 0, NULL, 0, 0));
    PK_CALL(pc_replace(E, 0));
    PK_CALL(pc_sums(E, V));
    int32_t first = 1; /* the host has not run an update since the (re)start */
    int head = 1;      /* sums in flight whose step the host has not looked at (a (re)start, a replacement) */
    for (;;) {
      int32_t nb = 0; /* updates in the block */
      int repl_end = 0;
      if (head) {
        PK_CALL(pc_head(E, V, 0));
        head = 0;
      } else {
        /* a block of updates, each followed by its reduction's step; it ends where a replacement is due */
        nb = k;
        if (s->replace_interval > 0 && s->replace_interval - since_replace < nb)
          nb = s->replace_interval - since_replace;
        if (every > 0 && every - it % every < nb) nb = every - it % every;
        if (nb < 1) nb = 1;
        repl_end = (s->replace_interval > 0 && since_replace + nb >= s->replace_interval) ||
                   (every > 0 && (it + nb) % every == 0);
        PK_CALL(pk_kry_block_begin(E)); /* the CUDA engine replays a graph of the block */
        for (int32_t j = 1; j <= nb; j++) {
          const int last = j == nb && repl_end; /* no sums: the vectors are replaced right after */
          int rc = pk_kry_pipecg_update(E, &V->v, pk_c(PK_PCG_ALPHA), pk_c(PK_PCG_BETA), last ? 0 : V->nv,
                                        PK_PCG_GAMMA, PK_KRY_ASYNC | PK_KRY_IF_RUNNING);
          if (!rc && !last) rc = pc_head(E, V, s->min_res);
          if (rc) {
            (void)pk_kry_block_end(E);
            return rc;
          }
        }
        PK_CALL(pk_kry_block_end(E));
      }
      PK_CALL(pk_kry_poll_read(R, 0, &st, PK_PCG_CURV, PC_H_N, h));
      if (nb > 0) { /* the updates that ran: x is iterate IT (after a running step, IT counts the next one) */
        const int32_t it_before = it;
        it = (int32_t)h[PC_H_IT] - (!repl_end && !st.code ? 1 : 0);
        since_replace += it - it_before;
        first = 0;
      }
      if (st.code == PKRYLOV_DIVERGED_NAN) { /* x is the last good iterate */
        res->reason = PKRYLOV_DIVERGED_NAN;
        res->breakdown_iteration = st.code_it;
        return PKRYLOV_SUCCESS;
      }
      if (st.code == PK_KS_REPLACE) { /* the gap estimate crossed sqrt(eps) |r| */
        PK_CALL(pc_replace_now(E, V, res));
        head = 1;
        continue;
      }
      if (nb == 0 && h[PC_H_TAKE] != 0.0) PK_CALL(pk_kry_copy(E, PK_KV_X, V->xmin)); /* x is iterate it */
      if (it == 0 && first) {
        if (st.code > 0) return res->reason = cg_converged(R, h[PC_H_LAST_RR]), PKRYLOV_SUCCESS;
        if (st.host) return res->reason = st.host, PKRYLOV_SUCCESS;
      } else if (!first) {
        res->iterations = it;
        int conv = st.code > 0 ? cg_converged(R, h[PC_H_LAST_RR]) : 0;
        if (conv) {
          int accept, stagnated;
          PK_CALL(pk_kry_confirm(R, res, &accept, &stagnated));
          if (stagnated) return res->reason = PKRYLOV_DIVERGED_STAGNATION, PKRYLOV_SUCCESS;
          if (!accept && it < s->maxit) break; /* restart the recurrences from x */
          if (!accept) conv = 0;
        }
        if (conv) return res->reason = conv, PKRYLOV_SUCCESS;
        if (st.host) return res->reason = st.host, PKRYLOV_SUCCESS;
      }
      if (repl_end && !st.code) { /* the block's last update had no sums: replace now; its step tests it */
        if (every > 0 && it % every == 0) res->true_residual_checks++;
        PK_CALL(pc_replace(E, 1));
        res->residual_replacements++;
        since_replace = 0;
        PK_CALL(pc_est_set(E, PK_PE_FRESH, 1.0));
        PK_CALL(pc_sums(E, V));
        head = 1;
        continue;
      }
      if (it >= s->maxit) return res->reason = PKRYLOV_DIVERGED_MAX_ITERATIONS, PKRYLOV_SUCCESS;
      if (st.code == PKRYLOV_DIVERGED_BREAKDOWN_INDEFINITE_MATRIX && h[PC_H_SUSPECT] != 0.0) {
        /* sigma came from the recurrence, which rounding can spoil near the attainable accuracy: compute
           the curvature (p, A p) of the next direction p = u + beta p directly to tell the cases apart */
        const pk_vid xt[2] = {PC_U, PC_P};
        const pk_coef ct[2] = {pk_c(PK_S_ONE), pk_c(PK_PCG_BETA)};
        const pk_kupd tu = pk_kupd_make(t, pk_c(PK_S_ZERO), 2, xt, ct);
        const pk_kpair ta = pair(t, PC_AT);
        double curv, sign = h[PC_H_SIGMA_SIGN];
        PK_CALL(pk_kry_update(E, 1, &tu, 0, NULL, 0, 0));
        PK_CALL(pk_kry_matvec(E, t, PC_AT));
        PK_CALL(pk_kry_update(E, 0, NULL, 1, &ta, PK_PCG_CURV, 0));
        PK_CALL(pk_kry_get(E, PK_PCG_CURV, 1, &curv));
        if (pk_sign_ok(curv, &sign)) { /* a sound matrix: restart the recurrences from x */
          if (R->restarts++ >= PK_MAX_RESTARTS) return res->reason = PKRYLOV_DIVERGED_STAGNATION, PKRYLOV_SUCCESS;
          break;
        }
      }
      if (st.code) {
        res->reason = st.code;
        res->breakdown_iteration = st.code_it;
        return PKRYLOV_SUCCESS;
      }
    }
  }
}

int pk_pipecg_solve(pk_kry_run *R, pkrylov_result *res) {
  pc_vecs V;
  memset(&V, 0, sizeof V);
  (void)pc_nwork(R->s, &V.v.n, &V.xmin);
  V.v.m = PC_M, V.v.z = PC_Z, V.v.q = PC_Q, V.v.s = PC_S, V.v.p = PC_P, V.v.x = PK_KV_X;
  V.v.r = PC_R, V.v.u = PC_U, V.v.w = PC_W;
  V.t = R->tmp;
  V.nv = R->s->replace_interval == PKRYLOV_REPLACE_AUTO ? PK_RR_NV : PK_RR_NV_BASE;
  PK_CALL(pc_run(R, res, &V));
  return cg_min_result(R, res, PK_PCG_LAST_RR, V.xmin);
}

/**
 * @file gmres.c
 * @brief GMRES(m), flexible GMRES(m) and pipelined GMRES(m) on the vector engine (pk_kry.h).
 *
 * All three are right preconditioned: the Krylov space is that of A M^-1 and x = x0 + M^-1 V y
 * (FGMRES: x = x0 + Z y with z_j = M^-1 v_j kept, so M may change from one application to the next).
 * The driver only queues engine operations; the small dense work (Hessenberg columns, Givens rotations,
 * the triangular solve, convergence, lucky breakdown, NaN) is done by the scalar steps of
 * kry_scalar_gmres.h where the scalars live. The host reads the scalars every pk_kry_sync_interval()
 * iterations and at the end of every cycle; x changes only at the end of a cycle, by the number of valid
 * columns the steps recorded, so the operations queued after a stop inside a block change nothing that
 * counts.
 *
 * GMRES: classical Gram-Schmidt with one reorthogonalisation (CGS2), two reductions per iteration
 * (basis_dots, basis_axpy, basis_dots with the norm, basis_axpy; the new norm comes from the second dots).
 *
 * Pipelined GMRES: p(1)-GMRES of Ghysels, Ashby, Meerbergen and Vanroose (2013): the basis is carried
 * unnormalised one step ahead with z_{i+1} = A M^-1 v~_i kept by the recurrence
 * z_{i+1} = A M^-1 z_i - sum_l h_{l,i-1} z_{l+1}; the one reduction per iteration, (z_{i+1}, v_l) and
 * (z_{i+1}, z_{i+1}), is started asynchronously and finished after the next preconditioner application
 * and matrix-vector product. The norm h_{i,i-1} = sqrt((z,z) - sum h^2) fails (negative radicand) when
 * the basis has lost orthogonality (or, within rounding, the Krylov space is invariant: the two cannot be
 * told apart without another reduction): the cycle then stops at its last valid column, x is updated and
 * the next cycle runs as classical GMRES from the true residual (which finishes an invariant subspace
 * exactly), then pipelining resumes; PK_GM_MAX_BREAKDOWNS pipelined cycles in a row that break down end the
 * solve with PKRYLOV_DIVERGED_BREAKDOWN_ORTHOGONALITY.
 *
 * Every cycle starts from the true residual b - A x, which also confirms a converged estimate.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kry_scalar.h"
#include "pk_kry.h"

/** Pipelined cycles stopped by a loss of orthogonality, with no pipelined cycle between them that ended
 *  without one, before the solve reports it. */
#define PK_GM_MAX_BREAKDOWNS 3

/* vector ids */
#define GV(j) (PK_KV_V0 + (j))
#define W_Z (PK_KV_W0 + 0) /* M^-1 v */
#define W_T (PK_KV_W0 + 1) /* V y */

/** y = coef * y */
static pk_kupd upd_scale(pk_vid y, int32_t coef) {
  return pk_kupd_make(y, pk_c(coef), 0, NULL, NULL);
}

/** y = x */
static pk_kupd upd_copy(pk_vid y, pk_vid x) {
  const pk_coef one = pk_c(PK_S_ONE);
  return pk_kupd_make(y, pk_c(PK_S_ZERO), 1, &x, &one);
}

/** Sizes of GMRES, FGMRES and pipelined GMRES. */
static int gmres_sizes(pkrylov_solver s, pk_kry_sizes *z) {
  const int32_t m = s->restart;
  z->nwork = 2;
  z->nbasis = s->type == PKRYLOV_SOLVER_GMRES ? m + 1 : 2 * m + 1;
  z->nscalars = pk_gm_off(m).total;
  return PKRYLOV_SUCCESS;
}

/** y = A M^-1 x (tmp: the preconditioned vector when there is a preconditioner). */
static int apply_op(pk_kry_run *R, pk_vid x, pk_vid tmp, pk_vid y) {
  if (R->s->M) {
    PK_CALL(pk_kry_precond(R->E, x, tmp));
    return pk_kry_matvec(R->E, tmp, y);
  }
  return pk_kry_matvec(R->E, x, y);
}

/** x += M^-1 V y (GMRES, pipelined) or x += Z y (FGMRES) with the first k columns. */
static int update_x(pk_kry_run *R, int m, int k) {
  pk_kry *E = R->E;
  const pk_gm_off_t o = pk_gm_off(m);
  PK_CALL(pk_kry_scalar(E, PK_KSS_GM_SOLVE, k));
  if (R->s->type == PKRYLOV_SOLVER_FGMRES)
    return pk_kry_basis_axpy(E, PK_KV_X, pk_c(PK_S_ONE), m + 1, k, o.y, 0);
  if (!R->s->M) return pk_kry_basis_axpy(E, PK_KV_X, pk_c(PK_S_ONE), 0, k, o.y, 0);
  PK_CALL(pk_kry_basis_axpy(E, W_T, pk_c(PK_S_ZERO), 0, k, o.y, 0));
  pk_kupd u = upd_scale(PK_KV_X, PK_S_ONE);
  u.nterms = 1;
  u.x[0] = W_Z;
  u.c[0] = pk_c(PK_S_ONE);
  return pk_kry_precond_update(E, W_T, W_Z, 1, &u, 0, NULL, 0, 0); /* W_Z = M^-1 W_T; x += W_Z */
}

/** Queue iteration j of a GMRES / FGMRES cycle (CGS2). */
static int gmres_iteration(pk_kry_run *R, int m, int j) {
  pk_kry *E = R->E;
  const pk_gm_off_t o = pk_gm_off(m);
  const int flex = R->s->type == PKRYLOV_SOLVER_FGMRES;
  if (flex) { /* z_j = M^-1 v_j kept in the second block (a copy without a preconditioner) */
    PK_CALL(pk_kry_precond(E, GV(j), GV(m + 1 + j)));
    PK_CALL(pk_kry_matvec(E, GV(m + 1 + j), GV(j + 1)));
  } else {
    PK_CALL(apply_op(R, GV(j), W_Z, GV(j + 1)));
  }
  PK_CALL(pk_kry_basis_dots(E, GV(j + 1), 0, j + 1, 0, o.d1, 0));
  /* first pass's update and the second pass's products in one pass over the basis */
  PK_CALL(pk_kry_basis_axpy_dots(E, GV(j + 1), pk_c(PK_S_ONE), 0, j + 1, o.d1, 1, 1, o.d2, 0));
  PK_CALL(pk_kry_basis_axpy(E, GV(j + 1), pk_c(PK_S_ONE), 0, j + 1, o.d2, 1));
  PK_CALL(pk_kry_scalar(E, PK_KSS_GM_ARNOLDI, j));
  pk_kupd u = upd_scale(GV(j + 1), PK_GM_INV);
  return pk_kry_update(E, 1, &u, 0, NULL, 0, 0);
}

/**
 * Queue iteration i (0 <= i <= L) of a pipelined cycle of length L. Iteration i < L computes
 * z_{i+1} = A M^-1 z_i (overlapping the reduction of iteration i-1), finishes column i-1 and starts the
 * reduction of z_{i+1}; iteration L only finishes column L-1.
 */
static int pipe_iteration(pk_kry_run *R, int m, int i, int L) {
  pk_kry *E = R->E;
  const pk_gm_off_t o = pk_gm_off(m);
  /* z_i is basis vector m + i (i >= 1); z_0 = v_0 */
  const pk_vid zi = i == 0 ? GV(0) : GV(m + i), zn = GV(m + i + 1);
  if (i < L) PK_CALL(apply_op(R, zi, W_Z, zn)); /* w = A M^-1 z_i, into the slot of z_{i+1} */
  if (i == 0) return pk_kry_basis_dots(E, zn, 0, 1, 1, o.d1, PK_KRY_ASYNC);
  PK_CALL(pk_kry_wait(E));
  PK_CALL(pk_kry_scalar(E, PK_KSS_GM_PIPE_COLUMN, i));
  /* normalise v_{i-1}, z_i, w by 1/h_{i-1,i-2}; v~_i = z_i - sum h_{l,i-1} v_l;
     z_{i+1} = w - sum h_{l,i-1} z_{l+1} */
  pk_kupd u[4];
  int nu = 0;
  if (i >= 2) {
    u[nu++] = upd_scale(GV(i - 1), PK_GM_INV);
    u[nu++] = upd_scale(zi, PK_GM_INV);
    if (i < L) u[nu++] = upd_scale(zn, PK_GM_INV);
  }
  if (i == L) return nu ? pk_kry_update(E, nu, u, 0, NULL, 0, 0) : PKRYLOV_SUCCESS;
  u[nu++] = upd_copy(GV(i), zi);
  PK_CALL(pk_kry_update(E, nu, u, 0, NULL, 0, 0));
  PK_CALL(pk_kry_basis_axpy(E, GV(i), pk_c(PK_S_ONE), 0, i, o.d2, 1));
  PK_CALL(pk_kry_basis_axpy(E, zn, pk_c(PK_S_ONE), m + 1, i, o.d2, 1));
  return pk_kry_basis_dots(E, zn, 0, i + 1, 1, o.d1, PK_KRY_ASYNC);
}

/** GMRES, FGMRES, pipelined GMRES. */
static int gmres_solve(pk_kry_run *R, pkrylov_result *res) {
  pkrylov_solver s = R->s;
  pk_kry *E = R->E;
  const int m = s->restart;
  const int pipe = s->type == PKRYLOV_SOLVER_PIPEGMRES;
  const int32_t sync = pk_kry_sync_interval(E);
  const double md = (double)m;
  int breakdowns = 0; /* pipelined cycles ended by a loss of orthogonality since the last one without */
  int fallback = 0;   /* pipelined: run this cycle as classical GMRES (after a breakdown) */
  pk_kry_status st;
  memset(&st, 0, sizeof st);
  PK_CALL(pk_kry_set(E, PK_GM_M, 1, &md));

  for (int cycle = 0;; cycle++) {
    /* r = b - A x into v_0, v_0 = r / ||r||: every cycle starts from the true residual */
    PK_CALL(pk_kry_residual(E, PK_KV_X, GV(0), PK_GM_RR));
    PK_CALL(pk_kry_scalar(E, PK_KSS_GM_CYCLE_INIT, 0));
    pk_kupd u = upd_scale(GV(0), PK_GM_INV);
    PK_CALL(pk_kry_update(E, 1, &u, 0, NULL, 0, 0));
    if (cycle == 0) { /* iteration 0: b = 0 or an exact x0 stop here */
      PK_CALL(pk_kry_poll(R, 1, &st));
      if (!st.code && st.host) return res->reason = st.host, PKRYLOV_SUCCESS;
    }
    const int32_t it0 = st.its;
    const int L = s->maxit - it0 < m ? s->maxit - it0 : m;
    const int pipe_now = pipe && !fallback;
    int pending = 0; /* pipelined: a reduction started and not finished */
    if (cycle > 0 || !st.code) {
      if (L == 0) return res->reason = PKRYLOV_DIVERGED_MAX_ITERATIONS, PKRYLOV_SUCCESS;
      const int niter = pipe_now ? L + 1 : L;
      for (int i = 0; i < niter; i++) {
        if (i % sync == 0) PK_CALL(pk_kry_block_begin(E)); /* the CUDA engine replays a graph of the block */
        const int rc = pipe_now ? pipe_iteration(R, m, i, L) : gmres_iteration(R, m, i);
        if (rc) {
          (void)pk_kry_block_end(E);
          return rc;
        }
        pending = pipe_now && i < L;
        if ((i + 1) % sync == 0 || i + 1 == niter) {
          PK_CALL(pk_kry_block_end(E));
          PK_CALL(pk_kry_poll(R, 0, &st));
          if (st.code || st.host) break;
        }
      }
    }
    if (pending) PK_CALL(pk_kry_wait(E));
    /* x += M^-1 V y with the valid columns (none after a NaN: x stays the last good iterate) */
    /* x is still the cycle's start, whose true residual is known: the best iterate so far? */
    PK_CALL(pk_kry_keep_best(R, PK_GM_RR));
    const int nvalid = st.its - it0;
    if (st.code != PKRYLOV_DIVERGED_NAN && nvalid > 0) PK_CALL(update_x(R, m, nvalid));
    int done;
    PK_CALL(pk_kry_cycle_end(R, &st, res, &done));
    if (done) return PKRYLOV_SUCCESS;
    if (st.code == PKRYLOV_DIVERGED_BREAKDOWN_ORTHOGONALITY) {
      /* pipelined: the next cycle runs as classical GMRES, which also finishes an invariant subspace that
         the pipelined norm cannot tell from a loss of orthogonality; repeated breakdowns are reported */
      if (++breakdowns >= PK_GM_MAX_BREAKDOWNS) {
        res->reason = PKRYLOV_DIVERGED_BREAKDOWN_ORTHOGONALITY;
        res->breakdown_iteration = st.code_it;
        return PKRYLOV_SUCCESS;
      }
      fallback = 1;
    } else {
      if (pipe_now) breakdowns = 0;
      fallback = 0;
    }
    if (st.its >= s->maxit) return res->reason = PKRYLOV_DIVERGED_MAX_ITERATIONS, PKRYLOV_SUCCESS;
  }
}

int pk_gmres_sizes(pkrylov_solver s, pk_kry_sizes *z) {
  return s->type == PKRYLOV_SOLVER_CAGMRES ? pk_cagmres_sizes(s, z) : gmres_sizes(s, z);
}

int pk_gmres_solve(pk_kry_run *R, pkrylov_result *res) {
  return R->s->type == PKRYLOV_SOLVER_CAGMRES ? pk_cagmres_solve(R, res) : gmres_solve(R, res);
}

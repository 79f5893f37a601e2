/**
 * @file cagmres.c
 * @brief CA-GMRES(s, m) on the vector engine (pk_kry.h): matrix powers, block classical Gram-Schmidt,
 * CholQR with a double-double Gram matrix (Hoemmen 2010; Yamazaki, Tomov, Dong, Dongarra 2014, seed 003).
 *
 * A cycle builds the basis of the Krylov space of A M^-1 (right preconditioning, x = x0 + M^-1 V y) in
 * blocks of s vectors. Block j0 (v_j0 orthonormal to v_0..v_j0-1):
 *  1. matrix powers: p_0 = v_j0, p_{t+1} = CY_t A M^-1 p_t + CX_t p_t + CXX_t p_{t-1} (t < s) into
 *     v_j0+1..v_j0+s: the Newton basis with the Ritz values of the first cycle as shifts (modified Leja
 *     order, complex pairs in real arithmetic), scaled; the first cycle uses the scaled monomial basis;
 *  2. block classical Gram-Schmidt with one reorthogonalisation (BCGS2): C = V^T P (one reduction),
 *     W = P - V C (basis_gemm into a scratch block), C2 = V^T W (one reduction), W := W - V C2;
 *  3. CholQR: W^T W accumulated in double-double (one reduction), R^T R = W^T W factored in double-double
 *     (a scalar step), V_new = W R^-1 (basis_gemm in place);
 *  4. the Hessenberg columns from C, R and the matrix-powers coefficients (kry_scalar_cagmres.h), rotated
 *     and tested like GMRES columns.
 * So a block of s basis vectors costs s preconditioner applications and matrix-vector products and two
 * reductions, against 2 s reductions for GMRES with CGS2.
 *
 * A Gram matrix that is not positive definite even in double-double (the basis lost linear independence)
 * ends the cycle at its last valid column; x is updated, the next cycle runs with half the step (fallback),
 * and after PK_CA_MAX_BREAKDOWNS such cycles the solve stops with PKRYLOV_DIVERGED_BREAKDOWN_ORTHOGONALITY.
 * A numerically dependent block (a zero pivot within rounding) is a lucky breakdown: converged.
 *
 * Step s: the solver's step, or 0 = auto: the first cycle runs blocks of 2, 4, 8 (those <= m) in turn,
 * each timed (pk_kry_sync + pk_wtime), and the later cycles use the one with the least time per basis
 * vector. m is rounded up to a multiple of s.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kry_scalar.h"
#include "pk_kry.h"

/** Cycles ended by an indefinite Gram matrix before the solve reports breakdown_orthogonality. */
#define PK_CA_MAX_BREAKDOWNS 4

#define GV(j) (PK_KV_V0 + (j))
#define W_Z (PK_KV_W0 + 0) /* M^-1 v */
#define W_T (PK_KV_W0 + 1) /* V y */

static const int pk_ca_cand[3] = {2, 4, 8};

/** Cycle length for step s: m rounded up to a multiple of s. */
static int ca_cycle_len(int m, int s) { return (m + s - 1) / s * s; }

/** Largest cycle length and block for solver s (the engine's sizes). */
static void ca_dims(pkrylov_solver s, int *mmax, int *smax) {
  const int m = s->restart;
  if (s->step > 0) {
    *smax = s->step;
    *mmax = ca_cycle_len(m, s->step);
    return;
  }
  *smax = 1;
  *mmax = m;
  for (int c = 0; c < 3; c++)
    if (pk_ca_cand[c] <= m) {
      *smax = pk_ca_cand[c];
      if (ca_cycle_len(m, pk_ca_cand[c]) > *mmax) *mmax = ca_cycle_len(m, pk_ca_cand[c]);
    }
}

int pk_cagmres_sizes(pkrylov_solver s, pk_kry_sizes *z) {
  int mmax, smax;
  ca_dims(s, &mmax, &smax);
  z->nwork = 2;
  z->nbasis = mmax + 1 + smax; /* v_0..v_mmax and the scratch block */
  z->nscalars = pk_ca_off(mmax, smax).total;
  /* a block of up to smax iterations ends in one step: polls come at most sync - 1 + smax apart */
  z->poll_iters = (s->ctx->be->device ? s->sync_interval : 1) + smax;
  return PKRYLOV_SUCCESS;
}

/** Set the layout parameters in S. */
static int ca_set_dims(pk_kry *E, int mmax, int smax) {
  const double d[2] = {(double)mmax, (double)smax};
  PK_CALL(pk_kry_set(E, PK_GM_M, 1, &d[0]));
  return pk_kry_set(E, PK_CA_SMAX_SLOT, 1, &d[1]);
}

/** y = A M^-1 x (tmp: the preconditioned vector when there is a preconditioner). */
static int apply_op(pk_kry_run *R, pk_vid x, pk_vid tmp, pk_vid y) {
  if (R->s->M) {
    PK_CALL(pk_kry_precond(R->E, x, tmp));
    return pk_kry_matvec(R->E, tmp, y);
  }
  return pk_kry_matvec(R->E, x, y);
}

/** CholQR of basis vectors [a0, a0+k) in place: Gram (dd or double), Cholesky (scalar step), V := V R^-1. */
static int ca_cholqr(pk_kry *E, const pk_ca_off_t *o, int a0, int k, int dd, int b1) {
  PK_CALL(pk_kry_block_dots(E, a0, k, a0, k, dd, o->gram, 0));
  PK_CALL(pk_kry_scalar(E, PK_KSS_CA_CHOL, k + 32 * dd));
  return pk_kry_basis_gemm(E, a0, k, o->rinv, k, b1, k);
}

/** Queue block (j0, k) of a cycle: matrix powers, block CGS, CholQR, Hessenberg columns. */
static int ca_block(pk_kry_run *R, const pk_ca_off_t *o, int mmax, int j0, int k) {
  pk_kry *E = R->E;
  const int scr = mmax + 1, q = j0 + 1;
  PK_CALL(pk_kry_scalar(E, PK_KSS_CA_COEF, k));
  for (int t = 0; t < k; t++) {
    PK_CALL(apply_op(R, GV(j0 + t), W_Z, GV(j0 + t + 1)));
    const pk_vid x[2] = {GV(j0 + t), GV(j0 + t - 1)};
    const pk_coef c[2] = {pk_c(o->cx + t), pk_c(o->cxx + t)};
    const pk_kupd u = pk_kupd_make(GV(j0 + t + 1), pk_c(o->cy + t), t > 0 ? 2 : 1, x, c);
    PK_CALL(pk_kry_update(E, 1, &u, 0, NULL, 0, 0));
  }
  /* block CGS, first pass: C = V(0:j0)^T P; W = P - V C into the scratch block */
  PK_CALL(pk_kry_block_dots(E, 0, q, q, k, 0, o->c, 0));
  PK_CALL(pk_kry_scalar(E, PK_KSS_CA_BUILD_T, j0 * 64 + k));
  PK_CALL(pk_kry_basis_gemm(E, 0, q + k, o->t, q + k, scr, k));
  /* second pass: C2 = V(0:j0)^T W; P := W - V C2 (V C2 into P's slots, then the difference) */
  PK_CALL(pk_kry_block_dots(E, 0, q, scr, k, 0, o->c2, 0));
  PK_CALL(pk_kry_basis_gemm(E, 0, q, o->c2, q, q, k));
  for (int t0 = 0; t0 < k; t0 += PK_KRY_MAXUPD) {
    pk_kupd u[PK_KRY_MAXUPD];
    const int nu = k - t0 < PK_KRY_MAXUPD ? k - t0 : PK_KRY_MAXUPD;
    const pk_coef one = pk_c(PK_S_ONE);
    for (int t = 0; t < nu; t++) { /* P := W - P */
      const pk_vid w = GV(scr + t0 + t);
      u[t] = pk_kupd_make(GV(q + t0 + t), pk_cneg(PK_S_ONE), 1, &w, &one);
    }
    PK_CALL(pk_kry_update(E, nu, u, 0, NULL, 0, 0));
  }
  /* CholQR with the double-double Gram matrix, in place: v_{j0+1..j0+k} = W R^-1 */
  PK_CALL(ca_cholqr(E, o, q, k, 1, q));
  return pk_kry_scalar(E, PK_KSS_CA_HESS, j0 * 64 + k);
}

/**
 * The Ritz-value step (PK_KSS_CA_RITZ, once per solve) on the host, on a copy of S: its Francis QR is a
 * long serial computation that takes milliseconds in the one device thread of a CUDA scalar step (a few
 * microseconds here; the host has just read the scalars for the cycle's poll anyway). The shifts and
 * their count go back into S; the Hessenberg matrix it destroys in the copy is rewritten by the next
 * cycle before it is read, so the engine's S keeps it (both engines alike).
 */
static int ca_ritz_host(pk_kry *E, const pk_ca_off_t *o, int kr) {
  double *h = malloc(sizeof(double) * (size_t)o->total);
  if (!h) return pk_error(E->ctx, PKRYLOV_ERR_OUT_OF_MEMORY, "pkrylov_solver_solve", "Ritz values: S copy");
  int ierr = pk_kry_get(E, 0, o->total, h);
  if (!ierr && pk_kry_scalar_step(PK_KSS_CA_RITZ, h, kr) < 0)
    ierr = pk_error(E->ctx, PKRYLOV_ERR_INTERNAL, "pk_kry_scalar", "Ritz step unknown");
  if (!ierr) ierr = pk_kry_set(E, o->shre, 2 * PK_CA_MAXSHIFT, h + o->shre);
  if (!ierr) ierr = pk_kry_set(E, o->fixed + PK_CA_NSHIFT, 1, h + o->fixed + PK_CA_NSHIFT);
  free(h);
  return ierr;
}

/** x += M^-1 V y with the first k columns. */
static int update_x(pk_kry_run *R, const pk_ca_off_t *o, int k) {
  pk_kry *E = R->E;
  PK_CALL(pk_kry_scalar(E, PK_KSS_GM_SOLVE, k));
  if (!R->s->M) return pk_kry_basis_axpy(E, PK_KV_X, pk_c(PK_S_ONE), 0, k, o->gm.y, 0);
  PK_CALL(pk_kry_basis_axpy(E, W_T, pk_c(PK_S_ZERO), 0, k, o->gm.y, 0));
  PK_CALL(pk_kry_precond(E, W_T, W_Z));
  const pk_vid z = W_Z;
  const pk_coef one = pk_c(PK_S_ONE);
  const pk_kupd u = pk_kupd_make(PK_KV_X, one, 1, &z, &one); /* x += z */
  return pk_kry_update(E, 1, &u, 0, NULL, 0, 0);
}

int pk_cagmres_solve(pk_kry_run *R, pkrylov_result *res) {
  pkrylov_solver s = R->s;
  pk_kry *E = R->E;
  int mmax, smax;
  ca_dims(s, &mmax, &smax);
  const pk_ca_off_t o = pk_ca_off(mmax, smax);
  const int32_t sync = pk_kry_sync_interval(E);
  int scur = s->step;         /* 0: auto, not chosen yet */
  int have_sigma = 0;         /* a first block of one vector measured ||A M^-1 v_0|| */
  int tried_ritz = 0;
  int breakdowns = 0;
  double ctime[3] = {0, 0, 0}; /* auto: time and vectors per candidate */
  int cvecs[3] = {0, 0, 0};
  int ncand = 0;
  for (int c = 0; c < 3; c++)
    if (pk_ca_cand[c] <= s->restart) ncand = c + 1;
  if (scur == 0 && ncand == 0) scur = 1; /* m = 1 */
  /* reproducible mode: no timed choice (it would make runs differ): the middle candidate, 4 (2 when m < 4) */
  if (scur == 0 && s->ctx->reproducible) scur = pk_ca_cand[ncand > 1 ? 1 : 0];
  pk_kry_status st;
  memset(&st, 0, sizeof st);
  PK_CALL(ca_set_dims(E, mmax, smax));
  { /* every solve starts with the monomial basis and an unknown scale */
    const double z[2] = {0.0, 0.0};
    PK_CALL(pk_kry_set(E, o.fixed + PK_CA_NSHIFT, 2, z));
  }

  for (int cycle = 0;; cycle++) {
    PK_CALL(pk_kry_residual(E, PK_KV_X, GV(0), PK_GM_RR));
    PK_CALL(pk_kry_scalar(E, PK_KSS_GM_CYCLE_INIT, 0));
    const pk_kupd u = pk_kupd_make(GV(0), pk_c(PK_GM_INV), 0, NULL, NULL);
    PK_CALL(pk_kry_update(E, 1, &u, 0, NULL, 0, 0));
    if (cycle == 0) {
      PK_CALL(pk_kry_poll(R, 1, &st));
      if (!st.code && st.host) return res->reason = st.host, PKRYLOV_SUCCESS;
    }
    const int32_t it0 = st.its;
    const int mc = scur > 0 ? ca_cycle_len(s->restart, scur) : s->restart;
    const int L = s->maxit - it0 < mc ? s->maxit - it0 : mc;
    if (cycle > 0 || !st.code) {
      if (L == 0) return res->reason = PKRYLOV_DIVERGED_MAX_ITERATIONS, PKRYLOV_SUCCESS;
      int j0 = 0, nblock = 0, since_poll = 0;
      while (j0 < L) {
        int k, cand = -1;
        if (!have_sigma) {
          k = 1;
        } else if (scur == 0) {
          cand = nblock++ % ncand;
          k = pk_ca_cand[cand];
        } else {
          k = scur;
        }
        if (k > L - j0) k = L - j0;
        double t0 = 0.0;
        if (cand >= 0) {
          PK_CALL(pk_kry_sync(E));
          t0 = pk_wtime();
        }
        if (since_poll == 0 && cand < 0) PK_CALL(pk_kry_block_begin(E)); /* replayed as a CUDA graph */
        const int rc = ca_block(R, &o, mmax, j0, k);
        if (rc) {
          (void)pk_kry_block_end(E);
          return rc;
        }
        if (cand >= 0) {
          PK_CALL(pk_kry_sync(E));
          ctime[cand] += pk_wtime() - t0;
          cvecs[cand] += k;
        }
        have_sigma = 1;
        j0 += k;
        since_poll += k;
        if (since_poll >= sync || j0 == L) {
          since_poll = 0;
          PK_CALL(pk_kry_block_end(E));
          PK_CALL(pk_kry_poll(R, 0, &st));
          if (st.code || st.host) break;
        }
      }
    }
    /* x is still the cycle's start, whose true residual is known: the best iterate so far? */
    PK_CALL(pk_kry_keep_best(R, PK_GM_RR));
    const int nvalid = st.its - it0;
    if (st.code != PKRYLOV_DIVERGED_NAN && nvalid > 0) PK_CALL(update_x(R, &o, nvalid));
    if (scur == 0 && have_sigma) { /* auto: the candidate with the least time per vector */
      if (pk_distributed(s->ctx)) { /* the slowest rank's times (ns), so every rank picks the same step */
        int64_t tns[3];
        for (int c = 0; c < 3; c++) tns[c] = (int64_t)(ctime[c] * 1e9);
        PK_CALL(pk_mpi_allreduce_i64(s->ctx, tns, 3, 2));
        for (int c = 0; c < 3; c++) ctime[c] = 1e-9 * (double)tns[c];
      }
      double best = INFINITY;
      for (int c = 0; c < ncand; c++)
        if (cvecs[c] > 0 && ctime[c] / cvecs[c] < best) best = ctime[c] / cvecs[c], scur = pk_ca_cand[c];
      if (scur == 0) scur = pk_ca_cand[0];
    }
    if (scur > 0) {
      const double su = scur;
      PK_CALL(pk_kry_set(E, o.fixed + PK_CA_SUSED, 1, &su));
    }
    int done;
    PK_CALL(pk_kry_cycle_end(R, &st, res, &done));
    if (done) return PKRYLOV_SUCCESS;
    if (st.code == PKRYLOV_DIVERGED_BREAKDOWN_ORTHOGONALITY) {
      if (++breakdowns >= PK_CA_MAX_BREAKDOWNS) {
        res->reason = PKRYLOV_DIVERGED_BREAKDOWN_ORTHOGONALITY;
        res->breakdown_iteration = st.code_it;
        return PKRYLOV_SUCCESS;
      }
      if (scur > 1) scur /= 2; /* fallback: a shorter, better conditioned block */
    }
    if (st.its >= s->maxit) return res->reason = PKRYLOV_DIVERGED_MAX_ITERATIONS, PKRYLOV_SUCCESS;
    /* Newton shifts from the Ritz values of the first cycle */
    if (!tried_ritz && nvalid >= 2) {
      tried_ritz = 1;
      PK_CALL(ca_ritz_host(E, &o, nvalid < PK_CA_MAXSHIFT ? nvalid : PK_CA_MAXSHIFT));
    }
  }
}

/* ---- test hooks (pk_kry.h) ------------------------------------------------------------------------ */

int pk_cagmres_step_used(pkrylov_solver s, int32_t *step) {
  *step = 0;
  pk_kry *E = (pk_kry *)s->kry;
  if (!E || s->type != PKRYLOV_SOLVER_CAGMRES) return PKRYLOV_SUCCESS;
  int mmax, smax;
  ca_dims(s, &mmax, &smax);
  double v;
  PK_CALL(pk_kry_get(E, pk_ca_off(mmax, smax).fixed + PK_CA_SUSED, 1, &v));
  *step = (int32_t)v;
  return PKRYLOV_SUCCESS;
}

int pk_cagmres_cholqr(pk_kry *E, int32_t a0, int32_t k, int32_t dd, int32_t *kfail) {
  int mmax, smax;
  ca_dims(E->s, &mmax, &smax);
  PK_CHECK(k >= 1 && k <= smax && a0 >= 0 && a0 + k <= pk_kry_nbasis(E), E->s->ctx, PKRYLOV_ERR_INVALID_VALUE,
           "block [%d, %d) does not fit (step %d, %d basis vectors)", a0, a0 + k, smax, pk_kry_nbasis(E));
  const pk_ca_off_t o = pk_ca_off(mmax, smax);
  PK_CALL(ca_set_dims(E, mmax, smax));
  PK_CALL(ca_cholqr(E, &o, a0, k, dd ? 1 : 0, a0));
  double v;
  PK_CALL(pk_kry_get(E, o.fixed + PK_CA_KFAIL, 1, &v));
  *kfail = (int32_t)v;
  return PKRYLOV_SUCCESS;
}

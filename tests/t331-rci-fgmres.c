/**
 * @file t331-rci-fgmres.c
 * @brief MKL-compatible reverse-communication FGMRES (pkrylov_dfgmres_init/check/dfgmres/get): the RCI loop
 *        driven with a CSR matvec and Jacobi preconditioners written here, on nonsymmetric systems (the
 * shared nonsymmetric Matrix Market matrices and a convection-diffusion matrix built here); solutions against
 *        dense LAPACK dgesv and recomputed residuals, restart lengths 1, 5 and n, with and without request 3,
 *        the user test (request 2), the zero-norm check (request 4), every ipar(13) mode, every documented
 * dpar entry recomputed here, the tmp layout, resuming, re-entrancy and the MKL error codes.
 *
 * CPU only (no PK_TEST_BACKENDS line): the MKL-compatible interface has no context and runs on the host
 * whatever the build has.
 */
#include <string.h>
#include <unistd.h>

#include "pk_test.h"

extern void dgesv_(const int *n, const int *nrhs, double *a, const int *lda, int *ipiv, double *b,
                   const int *ldb, int *info);

/* ---- the caller's side: a nonsymmetric matrix in CSR ----------------------------------------------- */

typedef struct {
  int64_t n;
  int64_t *rp, *ci;
  double *v, *diag;
} problem;

static double *vec(int64_t n) {
  return calloc((size_t)(n > 0 ? n : 1), sizeof(double));
}

static void problem_free(problem *P) {
  free(P->rp), free(P->ci), free(P->v), free(P->diag);
}

static void problem_diag(problem *P) {
  P->diag = vec(P->n);
  for (int64_t i = 0; i < P->n; i++)
    for (int64_t k = P->rp[i]; k < P->rp[i + 1]; k++)
      if (P->ci[k] == i)
        P->diag[i] = P->v[k];
}

/** Read a shared matrix through the library's Matrix Market reader and CSR export; 77 when missing. */
static int problem_mtx(problem *P, const char *name) {
  memset(P, 0, sizeof *P);
  const char *path = pk_test_matrix_path(name);
  if (!path)
    return PK_SKIP;
  pkrylov_context ctx;
  pkrylov_operator A;
  int64_t n, nnz;
  if (pkrylov_context_create(PKRYLOV_BACKEND_CPU, &ctx))
    return PK_FAIL;
  if (pkrylov_operator_create_from_mtx(ctx, path, &A))
    return PK_FAIL;
  if (pkrylov_operator_get_info(A, &n, &nnz, NULL, NULL, NULL, NULL))
    return PK_FAIL;
  P->n = n;
  P->rp = malloc(sizeof(int64_t) * (size_t)(n + 1));
  P->ci = malloc(sizeof(int64_t) * (size_t)nnz);
  P->v = malloc(sizeof(double) * (size_t)nnz);
  if (pkrylov_operator_get_csr(A, P->rp, P->ci, P->v))
    return PK_FAIL;
  pkrylov_operator_destroy(&A);
  pkrylov_context_destroy(&ctx);
  problem_diag(P);
  return PK_PASS;
}

/**
 * Convection-diffusion -Lap u + c . grad u on an nx x ny grid (unit square, Dirichlet), central
 * differences times h^2: diagonal 4, neighbours -1 -/+ (c h / 2). Nonsymmetric; its symmetric part is the
 * 5-point Laplacian (positive definite), so restarted GMRES converges for any restart length.
 */
static void problem_convdiff(problem *P, int nx, int ny, double cx, double cy) {
  memset(P, 0, sizeof *P);
  const int64_t n = (int64_t)nx * ny;
  const double h = 1.0 / (nx + 1);
  P->n = n;
  P->rp = malloc(sizeof(int64_t) * (size_t)(n + 1));
  P->ci = malloc(sizeof(int64_t) * (size_t)n * 5);
  P->v = malloc(sizeof(double) * (size_t)n * 5);
  int64_t k = 0;
  for (int j = 0; j < ny; j++)
    for (int i = 0; i < nx; i++) {
      const int64_t r = (int64_t)j * nx + i;
      P->rp[r] = k;
      if (j > 0)
        P->ci[k] = r - nx, P->v[k++] = -1.0 - 0.5 * cy * h;
      if (i > 0)
        P->ci[k] = r - 1, P->v[k++] = -1.0 - 0.5 * cx * h;
      P->ci[k] = r, P->v[k++] = 4.0;
      if (i < nx - 1)
        P->ci[k] = r + 1, P->v[k++] = -1.0 + 0.5 * cx * h;
      if (j < ny - 1)
        P->ci[k] = r + nx, P->v[k++] = -1.0 + 0.5 * cy * h;
    }
  P->rp[n] = k;
  problem_diag(P);
}

/** y = A x, a plain CSR loop. */
static void matvec(const problem *P, const double *x, double *y) {
  for (int64_t i = 0; i < P->n; i++) {
    double s = 0.0;
    for (int64_t k = P->rp[i]; k < P->rp[i + 1]; k++)
      s += P->v[k] * x[P->ci[k]];
    y[i] = s;
  }
}

static double nrm(int64_t n, const double *v) {
  return pk_test_norm(n, v);
}

/** ||b - A x||, recomputed. */
static double true_res(const problem *P, const double *b, const double *x) {
  double *y = vec(P->n);
  matvec(P, x, y);
  for (int64_t i = 0; i < P->n; i++)
    y[i] = b[i] - y[i];
  const double r = nrm(P->n, y);
  free(y);
  return r;
}

/** x = A^-1 b by LAPACK dgesv on the dense copy. */
static int dense_solve(const problem *P, const double *b, double *x) {
  const int n = (int)P->n, one = 1;
  double *a = calloc((size_t)n * (size_t)n, sizeof(double));
  int *ipiv = malloc(sizeof(int) * (size_t)n), info = 0;
  for (int64_t i = 0; i < P->n; i++)
    for (int64_t k = P->rp[i]; k < P->rp[i + 1]; k++)
      a[P->ci[k] * n + i] = P->v[k]; /* column major */
  memcpy(x, b, sizeof(double) * (size_t)n);
  dgesv_(&n, &one, a, &n, ipiv, x, &n, &info);
  free(a), free(ipiv);
  return info;
}

/** The tmp length MKL documents: (2*ipar(15)+1)*n + ipar(15)*(ipar(15)+9)/2 + 1. */
static int64_t tmp_len(int64_t n, int64_t m) {
  return (2 * m + 1) * n + m * (m + 9) / 2 + 1;
}

#define GUARD 8
#define GUARD_VALUE 12345.678
/** tmp of exactly the documented length followed by GUARD sentinel values (checked by guard_ok). */
static double *tmp_alloc(int64_t n, int64_t m) {
  double *t = vec(tmp_len(n, m) + GUARD);
  for (int g = 0; g < GUARD; g++)
    t[tmp_len(n, m) + g] = GUARD_VALUE;
  return t;
}
static int guard_ok(const double *t, int64_t n, int64_t m) {
  for (int g = 0; g < GUARD; g++)
    if (t[tmp_len(n, m) + g] != GUARD_VALUE)
      return 0;
  return 1;
}

/* ---- one solve through the RCI loop, with the independent checks ---------------------------------- */

enum { PC_NONE, PC_JACOBI, PC_FLEXIBLE };

typedef struct {
  int32_t m;         /* ipar(15) */
  int pc;            /* preconditioner applied on request 3 */
  int res_test;      /* ipar(9) */
  int user_test;     /* ipar(10): request 2 with a true-residual test */
  int zero_auto;     /* ipar(12) */
  double rtol, atol; /* dpar(1), dpar(2) */
  double user_tol;   /* request 2: stop when ||b - A x|| <= user_tol ||b|| */
  int32_t maxit;     /* ipar(5) */
  int check_dpar;    /* recompute dpar(3..8) at every request 2 and 4 (O(n m) each) */
} opts;

typedef struct {
  int32_t outcome;  /* the final RCI_request of dfgmres */
  int32_t iters;    /* dfgmres_get's itercount */
  int32_t n_req[5]; /* requests 1..4 seen */
  int32_t restarts; /* restart products A x seen */
  double dpar7_err; /* max |dpar(7) - recomputed| / ||A z_j|| */
  double dpar5_err; /* max |dpar(5) - ||b - A x_k|| | / ||r0|| (at requests 2) */
} result;

/** Solver state of one solve (so that two can be interleaved). */
typedef struct {
  const problem *P;
  const double *b;
  double *x, *tmp, *scratch, *w_saved;
  int32_t ipar[128], req, n32;
  double dpar[128];
  opts o;
  result res;
  int steps_in_cycle; /* the test's own count of ipar(14) */
  int32_t steps;      /* the test's own count of ipar(4) */
  double dpar5_prev;  /* dpar(5) seen at the previous step */
  int failed;
} solve_state;

static int state_start(solve_state *S, const problem *P, const double *b, double *x, const opts *o) {
  memset(S, 0, sizeof *S);
  S->P = P, S->b = b, S->x = x, S->o = *o;
  S->n32 = (int32_t)P->n;
  const int64_t n = P->n;
  S->tmp = tmp_alloc(n, o->m);
  S->scratch = vec(n);
  S->w_saved = vec(n);
  if (pkrylov_dfgmres_init(&S->n32, x, b, &S->req, S->ipar, S->dpar, S->tmp) || S->req != 0)
    return -1;
  S->ipar[6] = 0; /* no warning lines (ipar(15) changed: check repairs ipar(16..21)) */
  S->ipar[14] = o->m;
  S->ipar[4] = o->maxit;
  S->ipar[7] = 1;
  S->ipar[8] = o->res_test;
  S->ipar[9] = o->user_test;
  S->ipar[10] = o->pc != PC_NONE;
  S->ipar[11] = o->zero_auto;
  S->dpar[0] = o->rtol;
  S->dpar[1] = o->atol;
  if (pkrylov_dfgmres_check(&S->n32, x, b, &S->req, S->ipar, S->dpar, S->tmp))
    return -1;
  if (S->req != 0 && S->req != -1001)
    return -1;
  /* check repaired the offsets for the new ipar(15): they must be MKL's layout */
  const int64_t m = o->m;
  const int64_t h = (m + 1) * n + 1, want[6] = {h,
                                                h + m * (m + 1) / 2,
                                                h + m * (m + 1) / 2 + m,
                                                h + m * (m + 1) / 2 + 2 * m,
                                                h + m * (m + 1) / 2 + 3 * m + 1,
                                                h + m * (m + 1) / 2 + 4 * m + 1};
  for (int k = 0; k < 6; k++)
    if (S->ipar[15 + k] != want[k]) {
      fprintf(stderr, "ipar(%d) = %d, expected %lld\n", 16 + k, S->ipar[15 + k], (long long)want[k]);
      return -1;
    }
  if (want[5] + m * n - 1 != tmp_len(n, m))
    return -1;
  S->dpar5_prev = -1;
  return 0;
}

static void state_free(solve_state *S) {
  free(S->tmp), free(S->scratch), free(S->w_saved);
}

#define SFAIL(S, ...)                                                                                        \
  do {                                                                                                       \
    fprintf(stderr, "%s:%d: ", __FILE__, __LINE__);                                                          \
    fprintf(stderr, __VA_ARGS__);                                                                            \
    fprintf(stderr, "\n");                                                                                   \
    (S)->failed = 1;                                                                                         \
  } while (0)

/**
 * The preconditioner of request 3: Jacobi, or (flexible) Jacobi after an even number of steps and two Jacobi
 * sweeps on A z = in (z = D^-1 in + D^-1 (in - A D^-1 in)) after an odd number: another operator each step.
 */
static void apply_precond(const solve_state *S, const double *in, double *out) {
  const problem *P = S->P;
  for (int64_t i = 0; i < P->n; i++)
    out[i] = in[i] / P->diag[i];
  if (S->o.pc == PC_FLEXIBLE && S->ipar[3] % 2 == 1) {
    double *t = vec(P->n);
    matvec(P, out, t);
    for (int64_t i = 0; i < P->n; i++)
      out[i] += (in[i] - t[i]) / P->diag[i];
    free(t);
  }
}

/**
 * dpar(7) recomputed: the distance of the last product A z_j from span(v_1..v_j), with v_i read from tmp and
 * two classical Gram-Schmidt passes written here. Also checks that v_1..v_j are orthonormal.
 */
static void check_dpar7(solve_state *S) {
  const int64_t n = S->P->n, j = S->ipar[13];
  double *w = vec(n);
  memcpy(w, S->w_saved, sizeof(double) * (size_t)n);
  const double wn = nrm(n, w);
  for (int pass = 0; pass < 2; pass++)
    for (int64_t i = 0; i < j; i++) {
      const double *v = S->tmp + i * n;
      double h = 0;
      for (int64_t l = 0; l < n; l++)
        h += v[l] * w[l];
      for (int64_t l = 0; l < n; l++)
        w[l] -= h * v[l];
    }
  const double ref = nrm(n, w), err = fabs(S->dpar[6] - ref) / (wn > 0 ? wn : 1);
  if (err > S->res.dpar7_err)
    S->res.dpar7_err = err;
  if (err > 1e-8)
    SFAIL(S, "dpar(7) = %.17g, recomputed %.17g (||A z|| %g)", S->dpar[6], ref, wn);
  for (int64_t a = 0; a < j; a++)
    for (int64_t c = 0; c <= a; c++) {
      double s = 0;
      for (int64_t l = 0; l < n; l++)
        s += S->tmp[a * n + l] * S->tmp[c * n + l];
      if (fabs(s - (a == c)) > 1e-8)
        SFAIL(S, "(v_%lld, v_%lld) = %g", (long long)a + 1, (long long)c + 1, s);
    }
  free(w);
}

/**
 * The current iterate through dfgmres_get (ipar(13) = 1, into scratch; x must not change), its true
 * residual against dpar(5), and dpar(4), dpar(6), ipar(4), ipar(14) against the test's own counts.
 */
static double check_iterate(solve_state *S) {
  const int64_t n = S->P->n;
  double *x0 = vec(n);
  memcpy(x0, S->x, sizeof(double) * (size_t)n);
  int32_t it = -1, greq = 99;
  S->ipar[12] = 1;
  if (pkrylov_dfgmres_get(&S->n32, S->x, S->scratch, &greq, S->ipar, S->dpar, S->tmp, &it) || greq != 0)
    SFAIL(S, "dfgmres_get failed: %d", greq);
  S->ipar[12] = 0;
  if (memcmp(x0, S->x, sizeof(double) * (size_t)n) != 0)
    SFAIL(S, "dfgmres_get with ipar(13) = 1 changed x");
  if (it != S->steps || S->ipar[3] != S->steps)
    SFAIL(S, "itercount %d, ipar(4) %d, steps %d", it, S->ipar[3], S->steps);
  if (S->ipar[13] != S->steps_in_cycle)
    SFAIL(S, "ipar(14) = %d, steps in cycle %d", S->ipar[13], S->steps_in_cycle);
  const double r = true_res(S->P, S->b, S->scratch), err = fabs(S->dpar[4] - r) / S->dpar[2];
  if (err > S->res.dpar5_err)
    S->res.dpar5_err = err;
  if (err > 1e-7)
    SFAIL(S, "dpar(5) = %.17g, ||b - A x_k|| = %.17g (||r0|| %g)", S->dpar[4], r, S->dpar[2]);
  if (S->dpar[3] != S->dpar[0] * S->dpar[2] + S->dpar[1])
    SFAIL(S, "dpar(4) = %.17g", S->dpar[3]);
  free(x0);
  return r;
}

/**
 * One call of dfgmres and the answer to its request. Returns 1 while the loop goes on, 0 when it ended
 * (S->res.outcome set).
 */
static int state_step(solve_state *S) {
  const int64_t n = S->P->n, len = tmp_len(n, S->o.m);
  if (pkrylov_dfgmres(&S->n32, S->x, S->b, &S->req, S->ipar, S->dpar, S->tmp) != PKRYLOV_SUCCESS) {
    S->res.outcome = S->req;
    return 0;
  }
  const int32_t in = S->ipar[21], out = S->ipar[22];
  if (S->req >= 1 && S->req <= 4)
    S->res.n_req[S->req]++;
  switch (S->req) {
  case 1: {
    if (in < 1 || out < 1 || in + n - 1 > len || out + n - 1 > len)
      SFAIL(S, "ipar(22/23) = %d %d", in, out);
    matvec(S->P, S->tmp + in - 1, S->tmp + out - 1);
    if (in == 1 && out == n + 1 && S->steps_in_cycle == S->o.m) { /* the restart product A x */
      S->res.restarts++;
      S->steps_in_cycle = 0;
      /* x was updated by the restart: its residual must match the iterate before the restart */
    } else if (S->steps == 0 && S->steps_in_cycle == 0 && S->res.n_req[1] == 1) {
      /* A x0: operand is a copy of x */
      if (memcmp(S->tmp, S->x, sizeof(double) * (size_t)n) != 0)
        SFAIL(S, "operand of A x0 is not x");
    } else {
      /* a step: operand v_j (unpreconditioned) or z_j at ipar(21) + (j-1) n, result v_{j+1} */
      const int64_t j = S->steps_in_cycle + 1;
      const int64_t want_in = S->o.pc != PC_NONE ? S->ipar[20] + (j - 1) * n : (j - 1) * n + 1;
      if (in != want_in || out != j * n + 1)
        SFAIL(S, "step %lld: ipar(22/23) = %d %d, expected %lld %lld", (long long)j, in, out,
              (long long)want_in, (long long)(j * n + 1));
      memcpy(S->w_saved, S->tmp + out - 1, sizeof(double) * (size_t)n);
      S->steps_in_cycle++;
      S->steps++;
    }
    return 1;
  }
  case 3: {
    const int64_t j = S->steps_in_cycle + 1;
    if (in != (j - 1) * n + 1 || out != S->ipar[20] + (j - 1) * n)
      SFAIL(S, "request 3: ipar(22/23) = %d %d", in, out);
    if (S->ipar[3] != S->steps)
      SFAIL(S, "request 3: ipar(4) = %d, steps done %d", S->ipar[3], S->steps);
    apply_precond(S, S->tmp + in - 1, S->tmp + out - 1);
    return 1;
  }
  case 4:
    if (S->o.check_dpar)
      check_dpar7(S);
    if (S->o.zero_auto)
      SFAIL(S, "request 4 with ipar(12) = 1");
    if (S->dpar[6] <= 1e-12 * S->dpar[2]) {
      S->res.outcome = 4;
      return 0;
    }
    return 1;
  case 2: {
    if (S->o.check_dpar) {
      check_dpar7(S);
      if (S->dpar5_prev >= 0 && fabs(S->dpar[5] - S->dpar5_prev) > 1e-8 * S->dpar[2])
        SFAIL(S, "dpar(6) = %.17g, previous dpar(5) %.17g", S->dpar[5], S->dpar5_prev);
    }
    S->dpar5_prev = S->dpar[4];
    const double r = S->o.check_dpar ? check_iterate(S) : 0;
    if (S->o.check_dpar && r <= S->o.user_tol * nrm(n, S->b)) {
      S->res.outcome = 2;
      return 0;
    }
    return 1;
  }
  default:
    S->res.outcome = S->req;
    return 0;
  }
}

/** Final dfgmres_get into x. */
static void state_finish(solve_state *S) {
  int32_t greq = 99;
  S->ipar[12] = 0;
  if (pkrylov_dfgmres_get(&S->n32, S->x, (double *)S->b, &greq, S->ipar, S->dpar, S->tmp, &S->res.iters) ||
      greq != 0)
    SFAIL(S, "final dfgmres_get: %d", greq);
  if (!guard_ok(S->tmp, S->P->n, S->o.m))
    SFAIL(S, "tmp written beyond the documented length");
}

/** Solve A x = b from x0 = x through the RCI loop; checks the result against dgesv. */
static result solve(const problem *P, const double *b, double *x, const opts *o, double xtol) {
  solve_state S;
  result bad = {.outcome = -99999};
  if (state_start(&S, P, b, x, o)) {
    fprintf(stderr, "start of the solve failed\n");
    state_free(&S);
    return bad;
  }
  const double r0 = true_res(P, b, x);
  int guard = 0;
  while (state_step(&S) && guard++ < 10000000) {
  }
  state_finish(&S);
  if (fabs(S.dpar[2] - r0) > 1e-12 * r0)
    SFAIL(&S, "dpar(3) = %.17g, ||b - A x0|| = %.17g", S.dpar[2], r0);
  if (S.res.iters != S.steps)
    SFAIL(&S, "itercount %d, steps %d", S.res.iters, S.steps);
  if (xtol > 0) {
    double *xd = vec(P->n);
    if (dense_solve(P, b, xd))
      SFAIL(&S, "dgesv failed");
    const double e = pk_test_rel_diff(P->n, x, xd);
    if (!(e <= xtol))
      SFAIL(&S, "||x - x_dgesv|| / ||x_dgesv|| = %g > %g (outcome %d, %d iterations)", e, xtol, S.res.outcome,
            S.res.iters);
    free(xd);
  }
  result r = S.res;
  if (S.failed)
    r.outcome = -99999;
  state_free(&S);
  return r;
}

static double *rhs_of_ones(const problem *P) { /* b = A (1, 1, ...) */
  double *one = vec(P->n), *b = vec(P->n);
  for (int64_t i = 0; i < P->n; i++)
    one[i] = 1.0;
  matvec(P, one, b);
  free(one);
  return b;
}

/* ---- cases --------------------------------------------------------------------------------------- */

/** Restart lengths 1, 5, n with and without request 3 on the convection-diffusion matrix. */
PK_TEST_CASE(convdiff_restarts) {
  problem P;
  problem_convdiff(&P, 6, 6, 20.0, -10.0);
  double *b = vec(P.n), *x = vec(P.n);
  uint64_t seed = 7;
  for (int64_t i = 0; i < P.n; i++)
    b[i] = pk_test_rand(&seed);
  const int32_t ms[3] = {1, 5, (int32_t)P.n};
  for (int k = 0; k < 3; k++)
    for (int pc = PC_NONE; pc <= PC_FLEXIBLE; pc++) {
      opts o = {.m = ms[k],
                .pc = pc,
                .res_test = 1,
                .user_test = 0,
                .zero_auto = 1,
                .rtol = 1e-11,
                .maxit = 100000};
      memset(x, 0, sizeof(double) * (size_t)P.n);
      result r = solve(&P, b, x, &o, 1e-9);
      PK_EXPECT(r.outcome == 0, "m = %d, pc %d: outcome %d after %d iterations", ms[k], pc, r.outcome,
                r.iters);
      PK_EXPECT(true_res(&P, b, x) <= 1.01e-11 * nrm(P.n, b), "m = %d pc %d: true residual %g", ms[k], pc,
                true_res(&P, b, x) / nrm(P.n, b));
      PK_EXPECT((pc != PC_NONE) == (r.n_req[3] > 0), "m = %d pc %d: %d requests 3", ms[k], pc, r.n_req[3]);
      /* restarts every m steps: iterations / m of them (the last cycle may end early) */
      PK_EXPECT(r.restarts == (r.iters - 1) / ms[k], "m = %d: %d restarts for %d iterations", ms[k],
                r.restarts, r.iters);
      if (ms[k] == P.n)
        PK_EXPECT(r.iters <= P.n, "full GMRES took %d > n iterations", r.iters);
      PK_EXPECT(r.n_req[2] == 0 && r.n_req[4] == 0, "requests 2/4 with ipar(10) = 0, ipar(12) = 1");
    }
  free(b), free(x);
  problem_free(&P);
  PK_TEST_END();
}

/** The shared nonsymmetric matrices: ani1_nonsymm, pores_1 (badly scaled), orsirr_2 (n = 886). */
PK_TEST_CASE(shared_nonsymmetric) {
  const struct {
    const char *name;
    int32_t m;
    int pc;
    double rtol, xtol;
  } cases[] = {
      {"ani1_nonsymm.mtx", 5, PC_NONE, 1e-12, 1e-9},     {"ani1_nonsymm.mtx", 36, PC_JACOBI, 1e-12, 1e-9},
      {"ani1_nonsymm.mtx", 5, PC_FLEXIBLE, 1e-12, 1e-9}, {"pores_1.mtx", 30, PC_JACOBI, 1e-13, 1e-5},
      {"pores_1.mtx", 30, PC_FLEXIBLE, 1e-12, 1e-5},     {"orsirr_2.mtx", 60, PC_JACOBI, 1e-10, 1e-5},
      {"orsirr_2.mtx", 30, PC_FLEXIBLE, 1e-10, 1e-5},
  };
  for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
    problem P;
    int st = problem_mtx(&P, cases[k].name);
    if (st != PK_PASS) {
      problem_free(&P);
      return st;
    }
    double *b = rhs_of_ones(&P), *x = vec(P.n);
    opts o = {.m = cases[k].m,
              .pc = cases[k].pc,
              .res_test = 1,
              .zero_auto = 1,
              .rtol = cases[k].rtol,
              .maxit = 20000};
    result r = solve(&P, b, x, &o, cases[k].xtol);
    PK_EXPECT(r.outcome == 0, "%s m = %d: outcome %d after %d iterations", cases[k].name, cases[k].m,
              r.outcome, r.iters);
    PK_EXPECT(true_res(&P, b, x) <= 1.5 * cases[k].rtol * nrm(P.n, b), "%s: true residual %g", cases[k].name,
              true_res(&P, b, x) / nrm(P.n, b));
    printf("%s restart %d pc %d: %d iterations\n", cases[k].name, cases[k].m, cases[k].pc, r.iters);
    free(b), free(x);
    problem_free(&P);
  }
  PK_TEST_END();
}

/**
 * Requests 2 and 4 every step (ipar(9) = 0, ipar(10) = 1, ipar(12) = 0), with dpar(3..7), ipar(4),
 * ipar(14), the operand offsets and the basis recomputed at each; the solve stops in the user test on the
 * true residual of the iterate from dfgmres_get.
 */
PK_TEST_CASE(user_test_and_zero_check) {
  problem P;
  problem_convdiff(&P, 7, 5, -15.0, 25.0);
  double *b = rhs_of_ones(&P), *x = vec(P.n);
  for (int64_t i = 0; i < P.n; i++)
    x[i] = 0.1 * (double)(i % 3); /* nonzero initial guess */
  for (int pc = PC_NONE; pc <= PC_JACOBI; pc++)
    for (int32_t m = 1; m <= 8; m += 7) {
      opts o = {.m = m,
                .pc = pc,
                .res_test = 0,
                .user_test = 1,
                .zero_auto = 0,
                .rtol = 1e-6,
                .user_tol = 1e-10,
                .maxit = 5000,
                .check_dpar = 1};
      for (int64_t i = 0; i < P.n; i++)
        x[i] = 0.1 * (double)(i % 3);
      result r = solve(&P, b, x, &o, 1e-8);
      PK_EXPECT(r.outcome == 2, "m = %d pc %d: outcome %d", m, pc, r.outcome);
      PK_EXPECT(r.n_req[4] == r.iters && r.n_req[2] == r.iters,
                "m = %d: %d requests 4, %d requests 2, %d steps", m, r.n_req[4], r.n_req[2], r.iters);
      PK_EXPECT(true_res(&P, b, x) <= 1e-10 * nrm(P.n, b), "true residual %g", true_res(&P, b, x));
      printf("m %d pc %d: %d iterations, max dpar(7) error %.2e, max dpar(5) error %.2e\n", m, pc, r.iters,
             r.dpar7_err, r.dpar5_err);
    }
  free(b), free(x);
  problem_free(&P);
  PK_TEST_END();
}

/** A x = (I + u w^T) x: minimal polynomial of degree 2, so h(3,2) vanishes (to rounding) at step 2. */
static void happy_matrix(problem *P, int64_t n) {
  memset(P, 0, sizeof *P);
  P->n = n;
  P->rp = malloc(sizeof(int64_t) * (size_t)(n + 1));
  P->ci = malloc(sizeof(int64_t) * (size_t)(n * n));
  P->v = malloc(sizeof(double) * (size_t)(n * n));
  for (int64_t i = 0; i < n; i++) {
    P->rp[i] = i * n;
    for (int64_t j = 0; j < n; j++) {
      P->ci[i * n + j] = j;
      P->v[i * n + j] = (i == j) + (0.3 + 0.1 * (double)i) * (j % 2 ? 0.5 : -0.2);
    }
  }
  P->rp[n] = n * n;
  problem_diag(P);
}

PK_TEST_CASE(zero_norm_happy_breakdown) {
  problem P;
  happy_matrix(&P, 12);
  double *b = vec(P.n), *x = vec(P.n);
  uint64_t seed = 3;
  for (int64_t i = 0; i < P.n; i++)
    b[i] = pk_test_rand(&seed);
  /* automatic test (ipar(12) = 1): 0 after 2 steps with dpar(7) <= dpar(8) */
  opts o = {.m = 10, .pc = PC_NONE, .res_test = 0, .user_test = 0, .zero_auto = 1, .maxit = 100};
  result r = solve(&P, b, x, &o, 1e-12);
  PK_EXPECT(r.outcome == 0 && r.iters == 2, "automatic zero-norm test: outcome %d after %d", r.outcome,
            r.iters);
  /* request 4 (ipar(12) = 0): the caller sees dpar(7) ~ 0 at step 2 and stops */
  memset(x, 0, sizeof(double) * (size_t)P.n);
  o.zero_auto = 0, o.check_dpar = 1;
  r = solve(&P, b, x, &o, 1e-12);
  PK_EXPECT(r.outcome == 4 && r.iters == 2 && r.n_req[4] == 2,
            "request 4: outcome %d after %d, %d requests 4", r.outcome, r.iters, r.n_req[4]);
  free(b), free(x);
  problem_free(&P);
  PK_TEST_END();
}

/** Every ipar(13) mode of dfgmres_get in mid-solve, and continuing after ipar(13) = 0. */
PK_TEST_CASE(get_modes) {
  problem P;
  problem_convdiff(&P, 6, 5, 10.0, 5.0);
  const int64_t n = P.n;
  double *b = rhs_of_ones(&P), *x = vec(n), *b_copy = vec(n), *s1 = vec(n), *s2 = vec(n), *x0 = vec(n);
  memcpy(b_copy, b, sizeof(double) * (size_t)n);
  opts o = {
      .m = 6, .pc = PC_JACOBI, .res_test = 1, .user_test = 1, .zero_auto = 1, .rtol = 1e-12, .maxit = 1000};
  solve_state S;
  PK_EXPECT(state_start(&S, &P, b, x, &o) == 0, "start");
  int got = 0, done = 0;
  while (!done && state_step(&S)) {
    if (S.req != 2 || S.steps != 4 || got)
      continue; /* step 4 of the first cycle */
    got = 1;
    int32_t it = -1, greq = 99;
    memcpy(x0, x, sizeof(double) * (size_t)n);
    /* ipar(13) < 0: only the count */
    for (int64_t i = 0; i < n; i++)
      s1[i] = -7.0;
    S.ipar[12] = -1;
    PK_EXPECT_CODE(NULL, pkrylov_dfgmres_get(&S.n32, x, s1, &greq, S.ipar, S.dpar, S.tmp, &it),
                   PKRYLOV_SUCCESS);
    PK_EXPECT(greq == 0 && it == 4 && memcmp(x, x0, sizeof(double) * (size_t)n) == 0 && s1[0] == -7.0,
              "ipar(13) = -1: RCI %d, itercount %d, x or b changed", greq, it);
    /* ipar(13) > 0: into b, x unchanged; residual = dpar(5) */
    S.ipar[12] = 1;
    PK_EXPECT_CODE(NULL, pkrylov_dfgmres_get(&S.n32, x, s1, &greq, S.ipar, S.dpar, S.tmp, &it),
                   PKRYLOV_SUCCESS);
    PK_EXPECT(memcmp(x, x0, sizeof(double) * (size_t)n) == 0, "ipar(13) = 1 changed x");
    PK_EXPECT_NEAR(true_res(&P, b, s1), S.dpar[4], 1e-9 * S.dpar[2]);
    /* the iterate is x0 + Z y with y the least-squares solution in tmp(ipar(20)): recomputed here from
       tmp(ipar(16)) (R) and tmp(ipar(19)) (g) by our own back substitution */
    const int64_t k = S.ipar[13];
    double y[8];
    for (int64_t j = k; j >= 1; j--) {
      double s = S.tmp[S.ipar[18] - 1 + j - 1];
      for (int64_t i = j + 1; i <= k; i++)
        s -= S.tmp[S.ipar[15] - 1 + i * (i - 1) / 2 + j - 1] * y[i - 1];
      y[j - 1] = s / S.tmp[S.ipar[15] - 1 + j * (j - 1) / 2 + j - 1];
    }
    for (int64_t i = 0; i < n; i++) {
      double s = x0[i];
      for (int64_t j = 0; j < k; j++)
        s += y[j] * S.tmp[S.ipar[20] - 1 + j * n + i];
      s2[i] = s;
    }
    PK_EXPECT(pk_test_rel_diff(n, s1, s2) <= 1e-13, "iterate vs x0 + Z y: %g", pk_test_rel_diff(n, s1, s2));
    /* rotations: c^2 + s^2 = 1 */
    for (int64_t j = 0; j < k; j++) {
      const double c = S.tmp[S.ipar[16] - 1 + j], s = S.tmp[S.ipar[17] - 1 + j];
      PK_EXPECT_NEAR(c * c + s * s, 1.0, 1e-14);
    }
    /* ipar(13) = 0: into x, then the solve continues from the updated x (pkrylov's extension) */
    S.ipar[12] = 0;
    PK_EXPECT_CODE(NULL, pkrylov_dfgmres_get(&S.n32, x, s2, &greq, S.ipar, S.dpar, S.tmp, &it),
                   PKRYLOV_SUCCESS);
    PK_EXPECT(memcmp(x, s1, sizeof(double) * (size_t)n) == 0, "ipar(13) = 0 gave another iterate than 1");
    /* after the update, the iterate of the running cycle is x itself (y = 0) */
    S.ipar[12] = 1;
    PK_EXPECT_CODE(NULL, pkrylov_dfgmres_get(&S.n32, x, s2, &greq, S.ipar, S.dpar, S.tmp, &it),
                   PKRYLOV_SUCCESS);
    PK_EXPECT(pk_test_rel_diff(n, s2, x) <= 1e-15, "after ipar(13) = 0 the cycle still adds %g",
              pk_test_rel_diff(n, s2, x));
    S.ipar[12] = 0;
  }
  state_finish(&S);
  PK_EXPECT(got && S.req == 0 && !S.failed, "loop: got %d, outcome %d", got, S.req);
  PK_EXPECT(memcmp(b, b_copy, sizeof(double) * (size_t)n) == 0, "b changed");
  PK_EXPECT(true_res(&P, b, x) <= 1.01e-12 * nrm(n, b), "continued solve: residual %g", true_res(&P, b, x));
  double *xd = vec(n);
  PK_EXPECT(dense_solve(&P, b, xd) == 0 && pk_test_rel_diff(n, x, xd) <= 1e-10, "vs dgesv %g",
            pk_test_rel_diff(n, x, xd));
  state_free(&S);
  free(b), free(x), free(b_copy), free(s1), free(s2), free(x0), free(xd);
  problem_free(&P);
  PK_TEST_END();
}

/** -1 at ipar(5), then raising ipar(5) continues: bitwise the same as one uninterrupted solve. */
PK_TEST_CASE(max_iterations_then_resume) {
  problem P;
  problem_convdiff(&P, 8, 6, 30.0, 0.0);
  const int64_t n = P.n;
  double *b = rhs_of_ones(&P), *x1 = vec(n), *x2 = vec(n);
  opts o = {.m = 7, .pc = PC_JACOBI, .res_test = 1, .zero_auto = 1, .rtol = 1e-12, .maxit = 1000};
  result r1 = solve(&P, b, x1, &o, 1e-9);
  PK_EXPECT(r1.outcome == 0 && r1.iters > 10, "reference: %d after %d", r1.outcome, r1.iters);
  solve_state S;
  o.maxit = 10; /* mid-cycle (10 = 7 + 3) */
  PK_EXPECT(state_start(&S, &P, b, x2, &o) == 0, "start");
  while (state_step(&S)) {
  }
  PK_EXPECT(S.res.outcome == -1 && S.ipar[3] == 10 && S.ipar[13] == 3, "cap: %d, ipar(4) %d, ipar(14) %d",
            S.res.outcome, S.ipar[3], S.ipar[13]);
  /* a further call without raising the cap: -1 again only after the next step */
  S.ipar[4] = 1000;
  while (state_step(&S)) {
  }
  state_finish(&S);
  PK_EXPECT(S.res.outcome == 0 && S.res.iters == r1.iters, "resumed: %d after %d (reference %d)",
            S.res.outcome, S.res.iters, r1.iters);
  PK_EXPECT(memcmp(x1, x2, sizeof(double) * (size_t)n) == 0,
            "resumed solve differs from the uninterrupted one");
  state_free(&S);
  free(b), free(x1), free(x2);
  problem_free(&P);
  PK_TEST_END();
}

/** Two solves (different matrices and restart lengths) stepped alternately give bitwise their lone results.
 */
PK_TEST_CASE(reentrant_interleaved) {
  problem P1, P2;
  problem_convdiff(&P1, 7, 7, 12.0, 3.0);
  problem_convdiff(&P2, 5, 9, -4.0, 18.0);
  double *b1 = rhs_of_ones(&P1), *b2 = rhs_of_ones(&P2);
  double *xa1 = vec(P1.n), *xa2 = vec(P2.n), *xb1 = vec(P1.n), *xb2 = vec(P2.n);
  opts o1 = {.m = 5,
             .pc = PC_JACOBI,
             .res_test = 1,
             .user_test = 1,
             .zero_auto = 0,
             .rtol = 1e-11,
             .user_tol = 0,
             .maxit = 1000,
             .check_dpar = 1};
  opts o2 = {.m = 9, .pc = PC_NONE, .res_test = 1, .zero_auto = 1, .rtol = 1e-11, .maxit = 1000};
  result r1 = solve(&P1, b1, xa1, &o1, 1e-9), r2 = solve(&P2, b2, xa2, &o2, 1e-9);
  PK_EXPECT(r1.outcome == 0 && r2.outcome == 0, "lone solves: %d %d", r1.outcome, r2.outcome);
  solve_state S1, S2;
  PK_EXPECT(state_start(&S1, &P1, b1, xb1, &o1) == 0 && state_start(&S2, &P2, b2, xb2, &o2) == 0, "start");
  int go1 = 1, go2 = 1;
  while (go1 || go2) {
    if (go1)
      go1 = state_step(&S1);
    if (go2)
      go2 = state_step(&S2);
  }
  state_finish(&S1), state_finish(&S2);
  PK_EXPECT(S1.res.iters == r1.iters && S2.res.iters == r2.iters, "iterations %d %d vs %d %d", S1.res.iters,
            S2.res.iters, r1.iters, r2.iters);
  PK_EXPECT(memcmp(xa1, xb1, sizeof(double) * (size_t)P1.n) == 0 &&
                memcmp(xa2, xb2, sizeof(double) * (size_t)P2.n) == 0,
            "interleaved solves differ from the lone ones");
  PK_EXPECT(!S1.failed && !S2.failed, "checks in the interleaved solves");
  state_free(&S1), state_free(&S2);
  free(b1), free(b2), free(xa1), free(xa2), free(xb1), free(xb2);
  problem_free(&P1), problem_free(&P2);
  PK_TEST_END();
}

PK_TEST_CASE(init_defaults_and_errors) {
  int32_t ipar[128], req = 99, n = 0;
  double dpar[128], x[40] = {0}, b[40] = {0};
  const int64_t len = tmp_len(40, 40);
  double *tmp = vec(len + 1);
  PK_EXPECT_CODE(NULL, pkrylov_dfgmres_init(&n, x, b, &req, ipar, dpar, tmp), PKRYLOV_ERR_INVALID_SIZE);
  PK_EXPECT(req == -10000 && pk_test_msg_has(NULL, "'n' = 0"), "n = 0: %d", req);
  n = 40, req = 99;
  PK_EXPECT_CODE(NULL, pkrylov_dfgmres_init(&n, x, b, &req, NULL, dpar, tmp), PKRYLOV_ERR_NULL_POINTER);
  PK_EXPECT(req == -10000 && pk_test_msg_has(NULL, "'ipar'"), "NULL ipar: %d", req);
  req = 99;
  PK_EXPECT_CODE(NULL, pkrylov_dfgmres_init(&n, x, b, &req, ipar, dpar, NULL), PKRYLOV_ERR_NULL_POINTER);
  PK_EXPECT(req == -10000 && pk_test_msg_has(NULL, "'tmp'"), "NULL tmp: %d", req);
  PK_EXPECT_CODE(NULL, pkrylov_dfgmres_init(&n, x, b, NULL, ipar, dpar, tmp), PKRYLOV_ERR_NULL_POINTER);
  for (int64_t i = 0; i <= len; i++)
    tmp[i] = 9.0;
  for (int i = 0; i < 128; i++)
    ipar[i] = -5, dpar[i] = -5.0;
  PK_EXPECT_CODE(NULL, pkrylov_dfgmres_init(&n, x, b, &req, ipar, dpar, tmp), PKRYLOV_SUCCESS);
  PK_EXPECT(req == 0, "RCI_request %d", req);
  /* MKL's documented defaults; ipar(5) = ipar(15) = min(150, n) */
  const int32_t want[15] = {40, 6, 1, 0, 40, 1, 1, 1, 0, 1, 0, 0, 0, 0, 40};
  for (int i = 0; i < 15; i++)
    PK_EXPECT(ipar[i] == want[i], "ipar(%d) = %d, expected %d", i + 1, ipar[i], want[i]);
  const int64_t m = 40, h = (m + 1) * 40 + 1;
  PK_EXPECT(ipar[15] == h && ipar[16] == h + m * (m + 1) / 2 && ipar[20] + m * 40 - 1 == len,
            "ipar(16) %d ipar(17) %d ipar(21) %d", ipar[15], ipar[16], ipar[20]);
  PK_EXPECT(dpar[0] == 1e-6 && dpar[1] == 0 && dpar[7] == 1e-12, "dpar(1,2,8) = %g %g %g", dpar[0], dpar[1],
            dpar[7]);
  for (int i = 2; i < 7; i++)
    PK_EXPECT(dpar[i] == 0, "dpar(%d) = %g", i + 1, dpar[i]);
  for (int i = 23; i < 124; i++)
    PK_EXPECT(ipar[i] == 0, "ipar(%d) = %d", i + 1, ipar[i]);
  PK_EXPECT(ipar[124] == 1, "ipar(125) = %d: the internal copy of the stage ipar(3)", ipar[124]);
  /* tmp is not written: callers allocate it for the ipar(15) they set after dfgmres_init */
  int untouched = 1;
  for (int64_t i = 0; i <= len; i++)
    untouched &= tmp[i] == 9.0;
  PK_EXPECT(untouched, "dfgmres_init wrote tmp");
  /* n = 1000: ipar(5) = ipar(15) = 150 */
  n = 1000;
  double *t2 = vec(tmp_len(1000, 150)), *x2 = vec(1000);
  PK_EXPECT_CODE(NULL, pkrylov_dfgmres_init(&n, x2, x2, &req, ipar, dpar, t2), PKRYLOV_SUCCESS);
  PK_EXPECT(ipar[4] == 150 && ipar[14] == 150, "n = 1000: ipar(5) %d ipar(15) %d", ipar[4], ipar[14]);
  free(t2), free(x2), free(tmp);
  PK_TEST_END();
}

PK_TEST_CASE(check_codes) {
  int32_t ipar[128], ipar0[128], req, n = 6, other = 7;
  double dpar[128], dpar0[128], x[6] = {0}, b[6] = {1, 2, 3, 4, 5, 6};
  double *tmp = vec(tmp_len(6, 6));
  PK_EXPECT_CODE(NULL, pkrylov_dfgmres_init(&n, x, b, &req, ipar, dpar, tmp), PKRYLOV_SUCCESS);
  ipar[5] = ipar[6] = 0; /* silent */
  /* a smaller restart length: ipar(16..21) repaired, RCI_request 0 (as MKL's examples expect) */
  ipar[14] = 2;
  PK_EXPECT_CODE(NULL, pkrylov_dfgmres_check(&n, x, b, &req, ipar, dpar, tmp), PKRYLOV_SUCCESS);
  PK_EXPECT(req == 0 && ipar[15] == 3 * 6 + 1 && ipar[20] + 2 * 6 - 1 == tmp_len(6, 2),
            "ipar(15) = 2: %d, %d %d", req, ipar[15], ipar[20]);
  /* no stopping test: -1010, ipar(8) = ipar(9) = 1 */
  ipar[7] = ipar[8] = ipar[9] = 0;
  PK_EXPECT_CODE(NULL, pkrylov_dfgmres_check(&n, x, b, &req, ipar, dpar, tmp), PKRYLOV_SUCCESS);
  PK_EXPECT(req == -1010 && ipar[7] == 1 && ipar[8] == 1 && ipar[9] == 0, "no test: %d (%d %d %d)", req,
            ipar[7], ipar[8], ipar[9]);
  /* warnings: ipar(9) with dpar(1) = dpar(2) = 0 -> -1001; with the change too -> -1011 */
  dpar[0] = 0;
  PK_EXPECT_CODE(NULL, pkrylov_dfgmres_check(&n, x, b, &req, ipar, dpar, tmp), PKRYLOV_SUCCESS);
  PK_EXPECT(req == -1001, "zero tolerances: %d", req);
  ipar[7] = ipar[8] = 0;
  PK_EXPECT_CODE(NULL, pkrylov_dfgmres_check(&n, x, b, &req, ipar, dpar, tmp), PKRYLOV_SUCCESS);
  PK_EXPECT(req == -1011, "change + warning: %d", req);
  dpar[0] = 2.0;
  PK_EXPECT_CODE(NULL, pkrylov_dfgmres_check(&n, x, b, &req, ipar, dpar, tmp), PKRYLOV_SUCCESS);
  PK_EXPECT(req == -1001, "dpar(1) >= 1: %d", req);
  dpar[0] = 1e-6;
  ipar[4] = 0;
  PK_EXPECT_CODE(NULL, pkrylov_dfgmres_check(&n, x, b, &req, ipar, dpar, tmp), PKRYLOV_SUCCESS);
  PK_EXPECT(req == -1001, "ipar(5) = 0: %d", req);
  ipar[4] = 6;
  PK_EXPECT_CODE(NULL, pkrylov_dfgmres_check(&n, x, b, &req, ipar, dpar, tmp), PKRYLOV_SUCCESS);
  PK_EXPECT(req == 0, "clean: %d", req);
  /* errors: -1100, nothing changed, a message naming the entry */
  memcpy(ipar0, ipar, sizeof ipar), memcpy(dpar0, dpar, sizeof dpar);
  struct {
    int idx_i, val_i, idx_d;
    double val_d;
    int32_t *np;
    int code;
    const char *needle;
  } bad[] = {
      {-1, 0, -1, 0, &other, PKRYLOV_ERR_SIZE_MISMATCH, "'n' = 7"},
      {0, 9, -1, 0, &n, PKRYLOV_ERR_SIZE_MISMATCH, "ipar(1) = 9"},
      {2, 77, -1, 0, &n, PKRYLOV_ERR_INVALID_STATE, "ipar(3) = 77"},
      {3, -1, -1, 0, &n, PKRYLOV_ERR_INVALID_VALUE, "ipar(4) = -1"},
      {4, -3, -1, 0, &n, PKRYLOV_ERR_INVALID_VALUE, "ipar(5) = -3"},
      {14, 0, -1, 0, &n, PKRYLOV_ERR_INVALID_VALUE, "ipar(15) = 0"},
      {14, 2000000000, -1, 0, &n, PKRYLOV_ERR_INVALID_VALUE, "ipar(15) = 2000000000"},
      {13, -2, -1, 0, &n, PKRYLOV_ERR_INVALID_STATE, "ipar(14) = -2"},
      {127, 0, -1, 0, &n, PKRYLOV_ERR_INVALID_STATE, "pkrylov_dfgmres_init"},
      {-1, 0, 0, -1.0, &n, PKRYLOV_ERR_INVALID_VALUE, "dpar(1)"},
      {-1, 0, 1, INFINITY, &n, PKRYLOV_ERR_INVALID_VALUE, "dpar(2)"},
      {-1, 0, 7, NAN, &n, PKRYLOV_ERR_INVALID_VALUE, "dpar(8)"},
  };
  for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
    if (bad[k].idx_i >= 0)
      ipar[bad[k].idx_i] = bad[k].val_i;
    if (bad[k].idx_d >= 0)
      dpar[bad[k].idx_d] = bad[k].val_d;
    int32_t ipar1[128];
    double dpar1[128];
    memcpy(ipar1, ipar, sizeof ipar), memcpy(dpar1, dpar, sizeof dpar);
    req = 99;
    PK_EXPECT_CODE(NULL, pkrylov_dfgmres_check(bad[k].np, x, b, &req, ipar, dpar, tmp), bad[k].code);
    PK_EXPECT(req == -1100 && pk_test_msg_has(NULL, bad[k].needle), "case %zu: %d", k, req);
    PK_EXPECT(memcmp(ipar1, ipar, sizeof ipar) == 0 && memcmp(dpar1, dpar, sizeof dpar) == 0,
              "case %zu: parameters changed", k);
    memcpy(ipar, ipar0, sizeof ipar), memcpy(dpar, dpar0, sizeof dpar);
  }
  b[3] = NAN;
  PK_EXPECT_CODE(NULL, pkrylov_dfgmres_check(&n, x, b, &req, ipar, dpar, tmp), PKRYLOV_ERR_NOT_FINITE);
  PK_EXPECT(req == -1100 && pk_test_msg_has(NULL, "'b' has NaN or Inf at index 4"), "NaN in b: %d", req);
  free(tmp);
  PK_TEST_END();
}

/** y = A x for A = [[0, 1], [0, 0]] (singular, nilpotent), written by the caller. */
PK_TEST_CASE(dfgmres_errors) {
  int32_t ipar[128], ipar0[128], req, n = 2, other = 3, it = -1;
  double dpar[128], dpar0[128], x[2] = {0.5, -0.25}, b[2] = {1, 0};
  double *tmp = vec(tmp_len(2, 2));
  /* before init: -12, nothing touched */
  memset(ipar, 0, sizeof ipar), memset(dpar, 0, sizeof dpar);
  PK_EXPECT_CODE(NULL, pkrylov_dfgmres(&n, x, b, &req, ipar, dpar, tmp), PKRYLOV_ERR_INVALID_STATE);
  PK_EXPECT(req == -12 && pk_test_msg_has(NULL, "pkrylov_dfgmres_init") && ipar[2] == 0, "before init: %d",
            req);
  PK_EXPECT_CODE(NULL, pkrylov_dfgmres_get(&n, x, b, &req, ipar, dpar, tmp, &it), PKRYLOV_ERR_INVALID_STATE);
  PK_EXPECT(req == -12 && it == -1, "get before init: %d", req);
  PK_EXPECT_CODE(NULL, pkrylov_dfgmres(&n, x, b, NULL, ipar, dpar, tmp), PKRYLOV_ERR_NULL_POINTER);

  PK_EXPECT_CODE(NULL, pkrylov_dfgmres_init(&n, x, b, &req, ipar, dpar, tmp), PKRYLOV_SUCCESS);
  ipar[5] = ipar[6] = 0;
  /* -11: no stopping test */
  ipar[7] = ipar[8] = ipar[9] = 0;
  memcpy(ipar0, ipar, sizeof ipar);
  PK_EXPECT_CODE(NULL, pkrylov_dfgmres(&n, x, b, &req, ipar, dpar, tmp), PKRYLOV_ERR_INVALID_VALUE);
  PK_EXPECT(req == -11 && pk_test_msg_has(NULL, "ipar(8), ipar(9) and ipar(10)"), "no test: %d", req);
  PK_EXPECT(memcmp(ipar0, ipar, sizeof ipar) == 0, "-11 changed ipar");
  ipar[7] = 1;
  /* -12: wrong n, negative tolerance */
  PK_EXPECT_CODE(NULL, pkrylov_dfgmres(&other, x, b, &req, ipar, dpar, tmp), PKRYLOV_ERR_SIZE_MISMATCH);
  PK_EXPECT(req == -12 && pk_test_msg_has(NULL, "'n' = 3"), "n: %d", req);
  dpar[0] = -1;
  PK_EXPECT_CODE(NULL, pkrylov_dfgmres(&n, x, b, &req, ipar, dpar, tmp), PKRYLOV_ERR_INVALID_VALUE);
  PK_EXPECT(req == -12 && pk_test_msg_has(NULL, "dpar(1)"), "dpar(1): %d", req);
  dpar[0] = 1e-6;
  /* the singular system: A x0 requested, then A v_1 = 0: h(1,1) = h(2,1) = 0 -> -10 */
  const double xs[2] = {0.5, -0.25};
  PK_EXPECT_CODE(NULL, pkrylov_dfgmres(&n, x, b, &req, ipar, dpar, tmp), PKRYLOV_SUCCESS);
  PK_EXPECT(req == 1 && ipar[21] == 1 && ipar[22] == 3, "A x0: %d %d %d", req, ipar[21], ipar[22]);
  double *in = tmp + ipar[21] - 1, *out = tmp + ipar[22] - 1;
  out[0] = in[1], out[1] = 0;
  PK_EXPECT_CODE(NULL, pkrylov_dfgmres(&n, x, b, &req, ipar, dpar, tmp), PKRYLOV_SUCCESS);
  PK_EXPECT(req == 1, "A v_1: %d", req);
  in = tmp + ipar[21] - 1, out = tmp + ipar[22] - 1;
  out[0] = in[1], out[1] = 0;
  /* r0 = b - A x0 = (1.25, 0): v_1 = e_1, A v_1 = 0 */
  PK_EXPECT_CODE(NULL, pkrylov_dfgmres(&n, x, b, &req, ipar, dpar, tmp), PKRYLOV_SUCCESS);
  PK_EXPECT(req == -10 && pk_test_msg_has(NULL, "R(j,j)"), "singular: %d", req);
  PK_EXPECT(x[0] == xs[0] && x[1] == xs[1] && ipar[3] == 0 && ipar[13] == 0, "x or counts changed");
  PK_EXPECT_NEAR(dpar[2], 1.25, 1e-15);
  PK_EXPECT_CODE(NULL, pkrylov_dfgmres(&n, x, b, &req, ipar, dpar, tmp), PKRYLOV_SUCCESS);
  PK_EXPECT(req == -10, "after the breakdown: %d", req);
  /* dfgmres_get still gives the last good iterate: x0 */
  ipar[12] = 0;
  PK_EXPECT_CODE(NULL, pkrylov_dfgmres_get(&n, x, b, &req, ipar, dpar, tmp, &it), PKRYLOV_SUCCESS);
  PK_EXPECT(req == 0 && it == 0 && x[0] == xs[0] && x[1] == xs[1], "get after breakdown");

  /* NaN in the caller's product: -10 */
  ipar[2] = 1;
  PK_EXPECT_CODE(NULL, pkrylov_dfgmres(&n, x, b, &req, ipar, dpar, tmp), PKRYLOV_SUCCESS);
  tmp[ipar[22] - 1] = NAN, tmp[ipar[22]] = 0;
  PK_EXPECT_CODE(NULL, pkrylov_dfgmres(&n, x, b, &req, ipar, dpar, tmp), PKRYLOV_SUCCESS);
  PK_EXPECT(req == -10, "NaN in A x0: %d", req);

  /* ipar(15) changed in mid-cycle: -12; ipar(16..21) stale in mid-solve: -12 */
  const double A[4] = {2, 1, -1, 3}; /* row major */
  ipar[2] = 1;
  ipar[9] = 1;                           /* user test: request 2 */
  ipar[11] = 1;                          /* automatic zero-norm test: no request 4 */
  for (int step = 0; step < 3; step++) { /* A x0, A v_1, then the step */
    PK_EXPECT_CODE(NULL, pkrylov_dfgmres(&n, x, b, &req, ipar, dpar, tmp), PKRYLOV_SUCCESS);
    if (req != 1)
      break;
    in = tmp + ipar[21] - 1, out = tmp + ipar[22] - 1;
    out[0] = A[0] * in[0] + A[1] * in[1], out[1] = A[2] * in[0] + A[3] * in[1];
  }
  PK_EXPECT(req == 2 && ipar[13] == 1, "user test after step 1: %d, ipar(14) %d", req, ipar[13]);
  memcpy(ipar0, ipar, sizeof ipar), memcpy(dpar0, dpar, sizeof dpar);
  ipar[14] = 1;
  PK_EXPECT_CODE(NULL, pkrylov_dfgmres_check(&n, x, b, &req, ipar, dpar, tmp), PKRYLOV_SUCCESS);
  PK_EXPECT_CODE(NULL, pkrylov_dfgmres(&n, x, b, &req, ipar, dpar, tmp), PKRYLOV_ERR_INVALID_STATE);
  PK_EXPECT(req == -12 && pk_test_msg_has(NULL, "middle of a restart cycle"), "m changed: %d", req);
  memcpy(ipar, ipar0, sizeof ipar);
  ipar[15] += 1;
  PK_EXPECT_CODE(NULL, pkrylov_dfgmres(&n, x, b, &req, ipar, dpar, tmp), PKRYLOV_ERR_INVALID_VALUE);
  PK_EXPECT(req == -12 && pk_test_msg_has(NULL, "ipar(16..21)"), "offsets: %d", req);
  memcpy(ipar, ipar0, sizeof ipar);
  PK_EXPECT_CODE(NULL, pkrylov_dfgmres_get(&n, NULL, b, &req, ipar, dpar, tmp, &it),
                 PKRYLOV_ERR_NULL_POINTER);
  PK_EXPECT(req == -10000 && pk_test_msg_has(NULL, "'x'"), "get NULL x: %d", req);
  PK_EXPECT_CODE(NULL, pkrylov_dfgmres_get(&n, x, b, &req, ipar, dpar, tmp, NULL), PKRYLOV_ERR_NULL_POINTER);
  PK_EXPECT(req == -10000 && pk_test_msg_has(NULL, "'itercount'"), "get NULL itercount: %d", req);
  /* the solve still finishes (exact after 2 steps of full GMRES on a 2x2 system) */
  int guard = 0;
  while (guard++ < 100) {
    PK_EXPECT_CODE(NULL, pkrylov_dfgmres(&n, x, b, &req, ipar, dpar, tmp), PKRYLOV_SUCCESS);
    if (req == 1) {
      in = tmp + ipar[21] - 1, out = tmp + ipar[22] - 1;
      out[0] = A[0] * in[0] + A[1] * in[1], out[1] = A[2] * in[0] + A[3] * in[1];
    } else if (req != 2) {
      break;
    }
  }
  PK_EXPECT(req == 0 && ipar[3] == 2, "2x2: outcome %d after %d", req, ipar[3]);
  PK_EXPECT_CODE(NULL, pkrylov_dfgmres_get(&n, x, b, &req, ipar, dpar, tmp, &it), PKRYLOV_SUCCESS);
  /* exact: x = A^-1 b, A = [[2,1],[-1,3]], b = (1,0): x = (3, 1)/7 */
  PK_EXPECT(fabs(x[0] - 3.0 / 7) < 1e-14 && fabs(x[1] - 1.0 / 7) < 1e-14, "x = %g %g", x[0], x[1]);
  free(tmp);
  PK_TEST_END();
}

/* ---- ipar tampered with between calls: -12 and nothing written (issue 14, items 10 to 12) --------- */

/** Everything a call of dfgmres may write, to compare after a call that must write nothing. */
typedef struct {
  int32_t ipar[128];
  double dpar[128];
  double *tmp, *x;
} fg_snapshot;

static void snap_take(fg_snapshot *c, const solve_state *S, int64_t len) {
  memcpy(c->ipar, S->ipar, sizeof c->ipar);
  memcpy(c->dpar, S->dpar, sizeof c->dpar);
  c->tmp = vec(len + GUARD);
  memcpy(c->tmp, S->tmp, sizeof(double) * (size_t)(len + GUARD));
  c->x = vec(S->P->n);
  memcpy(c->x, S->x, sizeof(double) * (size_t)S->P->n);
}

static void snap_restore(const fg_snapshot *c, solve_state *S, int64_t len) {
  memcpy(S->ipar, c->ipar, sizeof c->ipar);
  memcpy(S->dpar, c->dpar, sizeof c->dpar);
  memcpy(S->tmp, c->tmp, sizeof(double) * (size_t)(len + GUARD));
  memcpy(S->x, c->x, sizeof(double) * (size_t)S->P->n);
}

/** 1 when S holds exactly the snapshot (ipar, dpar, all of tmp and its guard, x). */
static int snap_same(const fg_snapshot *c, const solve_state *S, int64_t len) {
  return memcmp(S->ipar, c->ipar, sizeof c->ipar) == 0 && memcmp(S->dpar, c->dpar, sizeof c->dpar) == 0 &&
         memcmp(S->tmp, c->tmp, sizeof(double) * (size_t)(len + GUARD)) == 0 &&
         memcmp(S->x, c->x, sizeof(double) * (size_t)S->P->n) == 0;
}

/** Stages of ipar(3) (internal, rci_fgmres.c) and the entry that mirrors it (ipar(125), internal). */
enum {
  FG_AX0 = 2,
  FG_RESTART_AX = 3,
  FG_PRECOND = 4,
  FG_MATVEC = 5,
  FG_ZERO = 6,
  FG_USER = 7,
  FG_STOPPED = 8
};
#define FG_STAGE_COPY 124

/**
 * ipar[k] = v on the state S (a request answered, or a stop): the call must answer RCI_request = -12 with
 * status `code` and write nothing (ipar, dpar, x, tmp and the guard behind it as they were). Restores S.
 */
static void tamper_rejected(solve_state *S, int k, int32_t v, int code) {
  const int64_t len = tmp_len(S->P->n, S->o.m);
  fg_snapshot c;
  snap_take(&c, S, len);
  const int32_t orig = S->ipar[k];
  S->ipar[k] = c.ipar[k] = v; /* the tampered ipar itself must stay as the caller left it */
  int32_t req = 99;
  const int st = pkrylov_dfgmres(&S->n32, S->x, S->b, &req, S->ipar, S->dpar, S->tmp);
  if (st != code || req != -12)
    SFAIL(S, "stage %d: ipar(%d) = %d: status %d (expected %d), RCI_request %d (expected -12): %s",
          c.ipar[2], k + 1, (int)v, st, code, req, pkrylov_last_error_message());
  if (!snap_same(&c, S, len))
    SFAIL(S, "stage %d: ipar(%d) = %d: the rejected call wrote to ipar, dpar, x or tmp", c.ipar[2], k + 1,
          (int)v);
  c.ipar[k] = orig;
  snap_restore(&c, S, len);
  free(c.tmp), free(c.x);
}

/**
 * ipar(3) and its internal copy both forged to `stage`: whatever the call answers, neither it nor the next
 * call (after answering a request 1 or 3, which must point into tmp) writes outside tmp. Restores S.
 */
static void tamper_forged_stage(solve_state *S, int32_t stage, int32_t extra_k, int32_t extra_v) {
  const int64_t n = S->P->n, len = tmp_len(n, S->o.m);
  fg_snapshot c;
  snap_take(&c, S, len);
  S->ipar[2] = S->ipar[FG_STAGE_COPY] = stage;
  if (extra_k >= 0)
    S->ipar[extra_k] = extra_v;
  for (int call = 0; call < 2; call++) {
    int32_t req = 99;
    pkrylov_dfgmres(&S->n32, S->x, S->b, &req, S->ipar, S->dpar, S->tmp);
    if (!guard_ok(S->tmp, n, S->o.m))
      SFAIL(S, "forged stage %d (from %d, ipar(%d) = %d): call %d wrote beyond tmp", stage, c.ipar[2],
            extra_k + 1, extra_v, call + 1);
    if (req != 1 && req != 3)
      break;
    const int32_t in = S->ipar[21], out = S->ipar[22];
    if (in < 1 || out < 1 || in > len - n + 1 || out > len - n + 1) {
      SFAIL(S, "forged stage %d (from %d): request %d names tmp(%d) and tmp(%d), outside the %lld values",
            stage, c.ipar[2], req, in, out, (long long)len);
      break;
    }
    if (req == 1)
      matvec(S->P, S->tmp + in - 1, S->tmp + out - 1);
    else
      apply_precond(S, S->tmp + in - 1, S->tmp + out - 1);
  }
  snap_restore(&c, S, len);
  free(c.tmp), free(c.x);
}

/** Every tampering below at the current request of S (stage ipar(3)). */
static void tamper_all(solve_state *S, int32_t *seen) {
  const int32_t stage = S->ipar[2], m = S->o.m;
  const int64_t n = S->P->n, len = tmp_len(n, m);
  seen[stage] = 1;
  const int request_out = stage >= FG_AX0 && stage <= FG_MATVEC;
  const int in_cycle = (stage >= FG_PRECOND && stage <= FG_USER) || (stage == FG_STOPPED && S->ipar[13] > 0);
  /* item 10: the offsets of the parts of tmp, and of a request's operand and result */
  for (int k = 15; k <= 22; k++) {
    if (k >= 21 && !request_out)
      continue;
    const int32_t vals[7] = {S->ipar[k] + 1, S->ipar[k] - 1, 0, -5, (int32_t)len, INT32_MAX, INT32_MIN};
    for (int t = 0; t < 7; t++)
      tamper_rejected(S, k, vals[t], PKRYLOV_ERR_INVALID_VALUE);
  }
  /* item 11: ipar(3) must be the stage the computation is in (1 restarts, tested elsewhere) */
  for (int32_t s = 0; s <= 10; s++)
    if (s != stage && s != 1)
      tamper_rejected(S, 2, s, PKRYLOV_ERR_INVALID_STATE);
  /* item 12: the iteration count at its limit */
  tamper_rejected(S, 3, INT32_MAX, PKRYLOV_ERR_INVALID_VALUE);
  /* ipar(14) outside what the stage allows; the restart length and its internal copy in mid-cycle */
  const int32_t inner_bad[3] = {-1, request_out && !in_cycle ? 1 : m + 1, INT32_MAX};
  for (int t = 0; t < 3; t++)
    tamper_rejected(S, 13, inner_bad[t], PKRYLOV_ERR_INVALID_STATE);
  if (stage == FG_PRECOND || stage == FG_MATVEC)
    tamper_rejected(S, 13, m, PKRYLOV_ERR_INVALID_STATE); /* step m + 1 does not exist */
  if (in_cycle) {
    tamper_rejected(S, 14, m + 1, PKRYLOV_ERR_INVALID_STATE);
    tamper_rejected(S, 14, m - 1, PKRYLOV_ERR_INVALID_STATE);
    tamper_rejected(S, 126, m + 1, PKRYLOV_ERR_INVALID_STATE);
  }
  /* forged: ipar(3) and its copy changed together; the case is stage 4 at the end of a cycle */
  for (int32_t s = 2; s <= 9; s++) {
    tamper_forged_stage(S, s, -1, 0);
    tamper_forged_stage(S, s, 13, m);
    tamper_forged_stage(S, s, 13, 0);
  }
}

/**
 * Items 10 to 12 of issue 14: at every request of a preconditioned solve with the user test, the zero-norm
 * request and restarts (m = 3), and at the stop by the iteration cap in mid-cycle, ipar is tampered with
 * entry by entry; pkrylov_dfgmres answers -12 with the specific status and writes nothing (tmp is followed by
 * sentinels), and with ipar(3) forged together with its internal copy it still never writes outside tmp.
 * Then the untouched solve finishes: the tampering left no trace.
 */
PK_TEST_CASE(tampered_ipar_rejected) {
  problem P;
  problem_convdiff(&P, 4, 3, 15.0, -5.0);
  double *b = rhs_of_ones(&P), *x = vec(P.n), *xref = vec(P.n);
  opts o = {.m = 3, .pc = PC_JACOBI, .res_test = 0, .user_test = 1, .zero_auto = 0, .rtol = 0, .maxit = 7};
  solve_state S;
  PK_REQUIRE(state_start(&S, &P, b, x, &o) == 0, "start");
  S.ipar[5] = 0; /* no error lines on stderr */
  int32_t seen[10] = {0};
  int steps = 0;
  while (state_step(&S) && steps++ < 1000)
    tamper_all(&S, seen);
  PK_EXPECT(S.res.outcome == -1 && S.ipar[2] == FG_STOPPED && S.ipar[13] == 1,
            "stop by the cap in mid-cycle: outcome %d, stage %d, ipar(14) %d", S.res.outcome, S.ipar[2],
            S.ipar[13]);
  tamper_all(&S, seen);
  for (int32_t s = FG_AX0; s <= FG_STOPPED; s++)
    PK_EXPECT(seen[s], "stage %d was not reached", s);
  PK_EXPECT(!S.failed, "tampering");
  /* the same solve untouched gives the same iterate bitwise */
  S.failed = 0;
  state_finish(&S);
  PK_EXPECT(!S.failed && S.res.iters == 7, "finish: %d iterations", S.res.iters);
  state_free(&S);
  solve_state R;
  PK_REQUIRE(state_start(&R, &P, b, xref, &o) == 0, "reference start");
  R.ipar[5] = 0;
  while (state_step(&R)) {
  }
  state_finish(&R);
  PK_EXPECT(memcmp(x, xref, sizeof(double) * (size_t)P.n) == 0, "tampered solve differs from the reference");
  state_free(&R);
  free(b), free(x), free(xref);
  problem_free(&P);
  PK_TEST_END();
}

/**
 * Item 10 of issue 14 as found by fuzzing: ipar(19) (offset of the rotated residual) moved to the end of tmp
 * while the request for A x0 is out wrote m + 1 values from there (ASan: heap-buffer-overflow in
 * fg_cycle_start). -12, nothing written.
 */
PK_TEST_CASE(offset_changed_during_ax0) {
  int32_t ipar[128], req = 0, n = 4;
  double dpar[128], x[4] = {0}, b[4] = {1, 2, 3, 4};
  const int64_t len = tmp_len(4, 4);
  double *tmp = tmp_alloc(4, 4);
  PK_EXPECT_CODE(NULL, pkrylov_dfgmres_init(&n, x, b, &req, ipar, dpar, tmp), PKRYLOV_SUCCESS);
  ipar[5] = 0;
  PK_EXPECT_CODE(NULL, pkrylov_dfgmres(&n, x, b, &req, ipar, dpar, tmp), PKRYLOV_SUCCESS);
  PK_REQUIRE(req == 1 && ipar[21] == 1 && ipar[22] == 5, "A x0 request: %d", req);
  for (int i = 0; i < 4; i++)
    tmp[4 + i] = 2.0 * tmp[i]; /* A = 2 I */
  ipar[18] = (int32_t)len - 1;
  double *before = vec(len + GUARD);
  memcpy(before, tmp, sizeof(double) * (size_t)(len + GUARD));
  PK_EXPECT_CODE(NULL, pkrylov_dfgmres(&n, x, b, &req, ipar, dpar, tmp), PKRYLOV_ERR_INVALID_VALUE);
  PK_EXPECT(req == -12 && pk_test_msg_has(NULL, "ipar(16..21)"), "RCI_request %d: %s", req,
            pkrylov_last_error_message());
  PK_EXPECT(memcmp(before, tmp, sizeof(double) * (size_t)(len + GUARD)) == 0, "tmp written");
  PK_EXPECT(guard_ok(tmp, 4, 4), "written beyond tmp");
  free(before), free(tmp);
  PK_TEST_END();
}

PK_TEST_CASE(messages_to_log_file) {
  int32_t ipar[128], req, n = 3, other = 4;
  double dpar[128], x[3] = {0}, b[3] = {1, 1, 1}, *tmp = vec(tmp_len(3, 3));
  PK_EXPECT_CODE(NULL, pkrylov_dfgmres_init(&n, x, b, &req, ipar, dpar, tmp), PKRYLOV_SUCCESS);
  ipar[1] = 11; /* not 6: appended to pkrylov_rci_fgmres.log in the working directory */
  char cwd[4096];
  PK_EXPECT(getcwd(cwd, sizeof cwd) != NULL, "getcwd");
  PK_EXPECT(chdir(PK_TEST_TMPDIR) == 0, "chdir");
  remove("pkrylov_rci_fgmres.log");
  pkrylov_dfgmres(&other, x, b, &req, ipar, dpar, tmp);
  FILE *f = fopen("pkrylov_rci_fgmres.log", "r");
  char line[1024] = "";
  if (f) {
    if (!fgets(line, sizeof line, f))
      line[0] = 0;
    fclose(f);
  }
  PK_EXPECT(strstr(line, "'n' = 4") && strstr(line, "RCI_request = -12"), "log line: %s", line);
  remove("pkrylov_rci_fgmres.log");
  PK_EXPECT(chdir(cwd) == 0, "chdir back");
  free(tmp);
  PK_TEST_END();
}

PK_TEST_MAIN(PK_TEST_ENTRY(convdiff_restarts), PK_TEST_ENTRY(shared_nonsymmetric),
             PK_TEST_ENTRY(user_test_and_zero_check), PK_TEST_ENTRY(zero_norm_happy_breakdown),
             PK_TEST_ENTRY(get_modes), PK_TEST_ENTRY(max_iterations_then_resume),
             PK_TEST_ENTRY(reentrant_interleaved), PK_TEST_ENTRY(init_defaults_and_errors),
             PK_TEST_ENTRY(check_codes), PK_TEST_ENTRY(dfgmres_errors), PK_TEST_ENTRY(tampered_ipar_rejected),
             PK_TEST_ENTRY(offset_changed_during_ax0), PK_TEST_ENTRY(messages_to_log_file))

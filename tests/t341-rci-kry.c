/**
 * @file t341-rci-kry.c
 * @brief Handle-based reverse communication (pkrylov_rci_*) for the BiCGStab and GMRES families: the loop
 *        is driven by the test with its own CSR matvec (plain loop over the CSR export), its own Jacobi
 *        (z = (1/d) r) and column preconditioner (LAPACK dgttrf per vertical column, applied with the
 *        dgttrs arithmetic), and its own "global sum" of the partials. Reference: pkrylov_solver_solve with
 *        the built-in CSR operator and JACOBI / COLUMN preconditioner on the same matrix and settings.
 *
 * Bitwise: the rci runs the library's own driver, and the test's products are the library's arithmetic
 * (row sums from 0 in column order; dinv * r; the dgttrs recurrences), so the iterations, x, and every
 * result field but the time agree bitwise. The "two ranks" case splits the rows between two rci objects
 * driven in lockstep, the test adding the two ranks' partials: the global sums are then rounded in another
 * order than the library's single-process sums, so x agrees with the library's only to rounding (checked
 * against a dense LAPACK solve and the recomputed residual) and the iteration counts within 2.
 *
 * CPU only: reverse communication on a CUDA context serves CG and pipelined CG (pkrylov_rci_create refuses
 * the other types with PKRYLOV_ERR_UNSUPPORTED there; t340's bad_input checks that on its CUDA variant).
 *
 * Also: the request protocol (every REDUCE_START followed by its REDUCE_WAIT with the same array and
 * count, the partials poisoned with NaN between them to prove the driver does not read them, the
 * pipelined methods' START, PRECOND, MATVEC, WAIT overlap), abandoning a solve mid-way (its x untouched,
 * also while the solve runs: written at DONE only; the next solve bitwise a fresh one), a rejected start
 * that leaves the solve in progress running, destroy mid-solve (ASan/LSan: nothing leaks, the worker is
 * joined), wrong order of calls and bad arguments.
 */
#include <string.h>

#include "pk_test.h"

extern void dgttrf_(const int *n, double *dl, double *d, double *du, double *du2, int *ipiv, int *info);

/* ---- the test's problem: CSR, Jacobi, column factors ------------------------------------------------ */

typedef struct {
  int64_t n, nnz;
  int64_t *rp, *ci;
  double *v;
  double *dinv; /* Jacobi: 1 / diagonal */
  /* column preconditioner (k-slow, ncols columns of nz levels): dgttrf factors per column, at c*nz */
  int32_t nz;
  int64_t ncols;
  double *dl, *d, *du, *du2;
  int *ipiv;
} prob;

static void prob_free(prob *P) {
  free(P->rp), free(P->ci), free(P->v), free(P->dinv);
  free(P->dl), free(P->d), free(P->du), free(P->du2), free(P->ipiv);
  memset(P, 0, sizeof *P);
}

/** The test's copy of operator A (CSR export), its Jacobi scaling and (nz > 0) its column factors. */
static int prob_make(pkrylov_operator A, int32_t nz, prob *P) {
  memset(P, 0, sizeof *P);
  if (pkrylov_operator_get_info(A, &P->n, &P->nnz, NULL, NULL, NULL, NULL))
    return 1;
  const int64_t n = P->n;
  P->rp = malloc(sizeof(int64_t) * (size_t)(n + 1));
  P->ci = malloc(sizeof(int64_t) * (size_t)P->nnz);
  P->v = malloc(sizeof(double) * (size_t)P->nnz);
  P->dinv = malloc(sizeof(double) * (size_t)n);
  if (pkrylov_operator_get_csr(A, P->rp, P->ci, P->v))
    return 1;
  for (int64_t i = 0; i < n; i++) {
    P->dinv[i] = 0.0;
    for (int64_t k = P->rp[i]; k < P->rp[i + 1]; k++)
      if (P->ci[k] == i)
        P->dinv[i] = 1.0 / P->v[k];
  }
  if (nz <= 0)
    return 0;
  P->nz = nz;
  P->ncols = n / nz;
  P->dl = calloc((size_t)n, sizeof(double)), P->d = calloc((size_t)n, sizeof(double));
  P->du = calloc((size_t)n, sizeof(double)), P->du2 = calloc((size_t)n, sizeof(double));
  P->ipiv = calloc((size_t)n, sizeof(int));
  for (int64_t c = 0; c < P->ncols; c++) {
    double *dl = P->dl + c * nz, *d = P->d + c * nz, *du = P->du + c * nz;
    for (int32_t k = 0; k < nz; k++) {
      const int64_t row = c + P->ncols * k;
      for (int64_t q = P->rp[row]; q < P->rp[row + 1]; q++) {
        if (P->ci[q] == row)
          d[k] = P->v[q];
        if (k > 0 && P->ci[q] == row - P->ncols)
          dl[k - 1] = P->v[q]; /* A(k, k-1) */
        if (k < nz - 1 && P->ci[q] == row + P->ncols)
          du[k] = P->v[q]; /* A(k, k+1) */
      }
    }
    int m = nz, info = 0;
    dgttrf_(&m, dl, d, du, P->du2 + c * nz, P->ipiv + c * nz, &info);
    if (info)
      return 1;
  }
  return 0;
}

/** y[r0..r1) = (A x)[r0..r1), plain CSR loop (x global). */
static void matvec_rows(const prob *P, const double *x, double *y, int64_t r0, int64_t r1) {
  for (int64_t i = r0; i < r1; i++) {
    double s = 0.0;
    for (int64_t k = P->rp[i]; k < P->rp[i + 1]; k++)
      s += P->v[k] * x[P->ci[k]];
    y[i - r0] = s;
  }
}

/** z = M^-1 r of the column preconditioner: per column the dgttrs solve with the dgttrf factors. */
static void column_apply(const prob *P, const double *r, double *z) {
  const int32_t nz = P->nz;
  const int64_t nc = P->ncols;
  double *t = malloc(sizeof(double) * (size_t)nz);
  for (int64_t c = 0; c < nc; c++) {
    const double *dl = P->dl + c * nz, *d = P->d + c * nz, *du = P->du + c * nz, *du2 = P->du2 + c * nz;
    const int *ip = P->ipiv + c * nz;
    for (int32_t k = 0; k < nz; k++)
      t[k] = r[c + nc * k];
    for (int32_t i = 0; i < nz - 1; i++) { /* L y = P b */
      const double bi = t[i], bi1 = t[i + 1];
      if (ip[i] == i + 1) {
        t[i + 1] = bi1 - dl[i] * bi;
      } else {
        t[i] = bi1;
        t[i + 1] = bi - dl[i] * bi1;
      }
    }
    const int32_t m = nz - 1; /* U x = y */
    t[m] = t[m] / d[m];
    if (m > 0)
      t[m - 1] = (t[m - 1] - du[m - 1] * t[m]) / d[m - 1];
    for (int32_t i = nz - 3; i >= 0; i--)
      t[i] = (t[i] - du[i] * t[i + 1] - du2[i] * t[i + 2]) / d[i];
    for (int32_t k = 0; k < nz; k++)
      z[c + nc * k] = t[k];
  }
  free(t);
}

/* ---- request traces ---------------------------------------------------------------------------- */

typedef struct {
  int32_t req, np;
  double *in, *out, *part;
} ev;

typedef struct {
  ev *e;
  int len, cap;
  int bad;          /* a protocol violation (message printed) */
  double *inflight; /* the partials array of the reduction in flight, NULL when none */
  int32_t inflight_np;
  double sent[8192]; /* the values "sent" at REDUCE_START */
} trace;

static void trace_reset(trace *T) {
  T->len = 0;
  T->bad = 0;
  T->inflight = NULL;
  T->inflight_np = 0;
}

static void trace_add(trace *T, int32_t req, int32_t np, double *in, double *out, double *part) {
  if (T->len == T->cap) {
    T->cap = T->cap ? 2 * T->cap : 4096;
    T->e = realloc(T->e, sizeof(ev) * (size_t)T->cap);
  }
  ev e = {req, np, in, out, part};
  T->e[T->len++] = e;
}

static int count_req(const trace *T, int32_t q) {
  int c = 0;
  for (int i = 0; i < T->len; i++)
    c += T->e[i].req == q;
  return c;
}

/** Settings of one solve, applied to the rci and to the library solver alike. */
typedef struct {
  double rtol;
  int32_t maxit, restart, step, replace;
} settings;

static const settings DEFAULTS = {1e-9, 3000, 30, 4, 50};

/** Preconditioner kinds of the test. */
enum { PC_NONE, PC_JACOBI, PC_COLUMN };

/** The test's answer to a PRECOND request on the whole vector. */
static void precond_apply(const prob *P, int pc, int64_t r0, int64_t r1, const double *in, double *out) {
  if (pc == PC_JACOBI)
    for (int64_t i = r0; i < r1; i++)
      out[i - r0] = P->dinv[i] * in[i - r0];
  else
    column_apply(P, in, out);
}

/**
 * Check and answer the protocol side of one reduction request for one "rank": START records the array
 * and count, copies the values into sent and poisons the array; WAIT must name the same array and count.
 */
static void reduce_request(trace *T, int32_t req, double *part, int32_t np) {
  if (!part || np < 1 || np > 8192) {
    fprintf(stderr, "reduction request %d with partials %p, npartials %d\n", req, (void *)part, np);
    T->bad = 1;
    return;
  }
  if (req == PKRYLOV_RCI_REDUCE_START) {
    if (T->inflight) {
      fprintf(stderr, "REDUCE_START while another reduction is in flight\n");
      T->bad = 1;
    }
    T->inflight = part;
    T->inflight_np = np;
    memcpy(T->sent, part, sizeof(double) * (size_t)np);
    for (int j = 0; j < np; j++)
      part[j] = NAN; /* undefined until WAIT, as with MPI_Iallreduce */
  } else {
    if (T->inflight != part || T->inflight_np != np) {
      fprintf(stderr, "REDUCE_WAIT (%p, %d) does not match the START (%p, %d)\n", (void *)part, np,
              (void *)T->inflight, T->inflight_np);
      T->bad = 1;
    }
    T->inflight = NULL;
  }
}

static pkrylov_rci make_rci(pkrylov_context ctx, int32_t type, int64_t n, int pc, int by_caller,
                            const settings *S) {
  pkrylov_rci r = NULL;
  if (pkrylov_rci_create(ctx, type, n, pc != PC_NONE, by_caller, &r))
    return NULL;
  if (pkrylov_rci_set_tolerances(r, S->rtol, 0.0) || pkrylov_rci_set_max_iterations(r, S->maxit) ||
      pkrylov_rci_set_restart(r, S->restart) || pkrylov_rci_set_step(r, S->step) ||
      pkrylov_rci_set_residual_replacement(r, S->replace))
    pkrylov_rci_destroy(&r);
  return r;
}

/**
 * Drive an rci solve of the whole problem (one "rank") to DONE, or for at most max_req requests
 * (max_req > 0: the solve is left in progress). Returns the first failing status, -1 on a protocol error.
 */
static int drive(pkrylov_rci r, const prob *P, int pc, const double *b, double *x, int32_t x_nonzero,
                 trace *T, int max_req, int start) {
  int ierr = start ? pkrylov_rci_start(r, PKRYLOV_MEM_HOST, b, x, x_nonzero) : 0;
  if (ierr)
    return ierr;
  trace_reset(T);
  for (int k = 0; max_req <= 0 || k < max_req; k++) {
    int32_t req, np;
    double *in, *out, *part;
    if ((ierr = pkrylov_rci_step(r, &req, &in, &out, &part, &np)))
      return ierr;
    trace_add(T, req, np, in, out, part);
    if (req == PKRYLOV_RCI_DONE)
      return T->bad ? -1 : 0;
    if (req == PKRYLOV_RCI_MATVEC || req == PKRYLOV_RCI_PRECOND) {
      if (!in || !out || in == out || part || np) {
        fprintf(stderr, "request %d: in %p out %p partials %p npartials %d\n", req, (void *)in, (void *)out,
                (void *)part, np);
        return -1;
      }
      if (req == PKRYLOV_RCI_MATVEC)
        matvec_rows(P, in, out, 0, P->n);
      else
        precond_apply(P, pc, 0, P->n, in, out);
    } else if (req == PKRYLOV_RCI_REDUCE_START || req == PKRYLOV_RCI_REDUCE_WAIT) {
      reduce_request(T, req, part, np);
      if (req == PKRYLOV_RCI_REDUCE_WAIT && !T->bad) /* one rank: the global sums are the values sent */
        memcpy(part, T->sent, sizeof(double) * (size_t)np);
    } else {
      fprintf(stderr, "unknown request %d\n", req);
      return -1;
    }
  }
  return T->bad ? -1 : 0;
}

/** The same solve through pkrylov_solver_solve with the built-in operator and preconditioner. */
static int lib_solve(pkrylov_context ctx, pkrylov_operator A, pkrylov_precond M, int32_t type,
                     const settings *S, const double *b, double *x, int32_t x_nonzero, pkrylov_result *res) {
  pkrylov_solver s = NULL;
  int ierr = pkrylov_solver_create(ctx, type, A, M, &s);
  if (!ierr)
    ierr = pkrylov_solver_set_tolerances(s, S->rtol, 0.0);
  if (!ierr)
    ierr = pkrylov_solver_set_max_iterations(s, S->maxit);
  if (!ierr)
    ierr = pkrylov_solver_set_restart(s, S->restart);
  if (!ierr)
    ierr = pkrylov_solver_set_step(s, S->step);
  if (!ierr)
    ierr = pkrylov_solver_set_residual_replacement(s, S->replace);
  if (!ierr)
    ierr = pkrylov_solver_set_initial_guess_nonzero(s, x_nonzero);
  if (!ierr)
    ierr = pkrylov_solver_solve(s, PKRYLOV_MEM_HOST, b, x);
  if (!ierr)
    ierr = pkrylov_solver_get_result(s, res);
  pkrylov_solver_destroy(&s);
  return ierr;
}

static const int32_t TYPES[6] = {PKRYLOV_SOLVER_BICGSTAB, PKRYLOV_SOLVER_PIPEBICGSTAB,
                                 PKRYLOV_SOLVER_GMRES,    PKRYLOV_SOLVER_PIPEGMRES,
                                 PKRYLOV_SOLVER_FGMRES,   PKRYLOV_SOLVER_CAGMRES};

static const char *tname(int32_t t) {
  static const char *names[] = {"bicgstab", "pipebicgstab", "gmres", "pipegmres",
                                "fgmres",   "cagmres",      "srcg"};
  if (t == PKRYLOV_SOLVER_CG) return "cg";
  if (t == PKRYLOV_SOLVER_PIPECG) return "pipecg";
  return t >= PKRYLOV_SOLVER_BICGSTAB && t <= PKRYLOV_SOLVER_SRCG ? names[t - PKRYLOV_SOLVER_BICGSTAB] : "?";
}

static int pipelined(int32_t t) {
  return t == PKRYLOV_SOLVER_PIPEBICGSTAB || t == PKRYLOV_SOLVER_PIPEGMRES;
}

/** All result fields but the time equal (bitwise). */
static void expect_same_result(const char *what, const pkrylov_result *a, const pkrylov_result *b) {
  PK_EXPECT(a->iterations == b->iterations && a->reason == b->reason && a->converged == b->converged,
            "%s: rci %d iterations (%s), library %d (%s)", what, a->iterations,
            pkrylov_reason_string(a->reason), b->iterations, pkrylov_reason_string(b->reason));
  PK_EXPECT(a->final_residual == b->final_residual && a->initial_residual == b->initial_residual &&
                a->rhs_norm == b->rhs_norm && a->rel_residual == b->rel_residual,
            "%s: residuals rci %.17g %.17g %.17g, library %.17g %.17g %.17g", what, a->initial_residual,
            a->final_residual, a->rhs_norm, b->initial_residual, b->final_residual, b->rhs_norm);
  PK_EXPECT(a->true_residual_checks == b->true_residual_checks &&
                a->residual_replacements == b->residual_replacements &&
                a->breakdown_iteration == b->breakdown_iteration,
            "%s: checks %d/%d replacements %d/%d breakdown %d/%d", what, a->true_residual_checks,
            b->true_residual_checks, a->residual_replacements, b->residual_replacements,
            a->breakdown_iteration, b->breakdown_iteration);
}

/** The protocol of a finished trace: DONE once at the end, START/WAIT checked in drive, overlap pattern. */
static void expect_protocol(const char *what, const trace *T, int32_t type, int pc, int by_caller,
                            int iterations, const settings *S) {
  const int restart = S->restart;
  PK_EXPECT(T->len > 0 && T->e[T->len - 1].req == PKRYLOV_RCI_DONE && count_req(T, PKRYLOV_RCI_DONE) == 1,
            "%s: DONE not once at the end", what);
  PK_EXPECT(!T->bad && !T->inflight, "%s: reduction protocol", what);
  if (pc == PC_NONE)
    PK_EXPECT(count_req(T, PKRYLOV_RCI_PRECOND) == 0, "%s: PRECOND without preconditioner", what);
  else
    PK_EXPECT(count_req(T, PKRYLOV_RCI_PRECOND) >= iterations, "%s: too few PRECOND", what);
  PK_EXPECT(count_req(T, PKRYLOV_RCI_MATVEC) >= iterations, "%s: too few MATVEC", what);
  const int starts = count_req(T, PKRYLOV_RCI_REDUCE_START), waits = count_req(T, PKRYLOV_RCI_REDUCE_WAIT);
  if (!by_caller) {
    PK_EXPECT(starts + waits == 0, "%s: REDUCE requests without reduce_by_caller", what);
    return;
  }
  /* at least one per iteration; CA-GMRES: at least one per block of `step` iterations (its point) */
  const int per = type == PKRYLOV_SOLVER_CAGMRES ? S->step : 1;
  PK_EXPECT(starts == waits && starts > iterations / per, "%s: %d START, %d WAIT, %d iterations", what,
            starts, waits, iterations);
  /* the first reduction of a solve is (b, b) */
  for (int i = 0; i < T->len; i++)
    if (T->e[i].req == PKRYLOV_RCI_REDUCE_START) {
      PK_EXPECT(T->e[i].np == 1, "%s: first START has %d partials", what, T->e[i].np);
      break;
    }
  /* overlapped reductions: START, [PRECOND], MATVEC (of the preconditioned vector), WAIT */
  int overlapped = 0;
  for (int i = 0; i + 1 < T->len; i++) {
    if (T->e[i].req != PKRYLOV_RCI_REDUCE_START || T->e[i + 1].req == PKRYLOV_RCI_REDUCE_WAIT)
      continue;
    int j = i + 1;
    double *m = NULL;
    if (pc != PC_NONE) {
      PK_EXPECT(T->e[j].req == PKRYLOV_RCI_PRECOND, "%s: START at %d then %d, not PRECOND", what, i,
                T->e[j].req);
      m = T->e[j].out;
      j++;
    }
    PK_EXPECT(j < T->len && T->e[j].req == PKRYLOV_RCI_MATVEC && (!m || T->e[j].in == m),
              "%s: START at %d: no MATVEC of the preconditioned vector", what, i);
    j++;
    PK_EXPECT(j < T->len && T->e[j].req == PKRYLOV_RCI_REDUCE_WAIT, "%s: START at %d: then %d, not WAIT",
              what, i, j < T->len ? T->e[j].req : -1);
    overlapped++;
  }
  /* pipelined BiCGStab: two per iteration (one in an iteration with residual replacement); pipelined GMRES:
     one per iteration but the first (and the last) of a cycle */
  if (type == PKRYLOV_SOLVER_PIPECG) /* one per iteration, one per (re)start and replacement */
    PK_EXPECT(overlapped >= iterations + 1, "%s: %d overlapped reductions for %d iterations", what, overlapped,
              iterations);
  else if (type == PKRYLOV_SOLVER_PIPEBICGSTAB)
    PK_EXPECT(overlapped >= iterations, "%s: %d overlapped reductions for %d iterations", what, overlapped,
              iterations);
  else if (type == PKRYLOV_SOLVER_PIPEGMRES)
    PK_EXPECT(overlapped >= iterations - 2 * ((iterations + restart - 1) / restart),
              "%s: %d overlapped reductions for %d iterations", what, overlapped, iterations);
  else
    PK_EXPECT(overlapped == 0, "%s: %d overlapped reductions in a method without", what, overlapped);
}

/** b = A (1 + i/n) by the test's matvec. */
static double *make_rhs(const prob *P) {
  double *xt = malloc(sizeof(double) * (size_t)P->n), *b = malloc(sizeof(double) * (size_t)P->n);
  for (int64_t i = 0; i < P->n; i++)
    xt[i] = 1.0 + (double)i / (double)P->n;
  matvec_rows(P, xt, b, 0, P->n);
  free(xt);
  return b;
}

static trace g_T;

/**
 * The ntypes types on operator A with preconditioner pc (levels nz for COLUMN), reduce_by_caller 0 and 1,
 * against the library: bitwise.
 */
static int compare_types(pkrylov_context ctx, pkrylov_operator A, int pc, int32_t nz, const settings *S,
                         const char *label, const int32_t *types, int ntypes) {
  prob P;
  PK_REQUIRE_OK(ctx, prob_make(A, pc == PC_COLUMN ? nz : 0, &P) ? PKRYLOV_ERR_INTERNAL : 0);
  pkrylov_precond M = NULL;
  if (pc == PC_JACOBI)
    PK_REQUIRE_OK(ctx, pkrylov_precond_create(ctx, A, PKRYLOV_PRECOND_JACOBI, 0, PKRYLOV_LAYOUT_AUTO, &M));
  if (pc == PC_COLUMN)
    PK_REQUIRE_OK(ctx, pkrylov_precond_create(ctx, A, PKRYLOV_PRECOND_COLUMN, nz, PKRYLOV_LAYOUT_KSLOW, &M));
  const int64_t n = P.n;
  double *b = make_rhs(&P), *x = malloc(sizeof(double) * n), *xl = malloc(sizeof(double) * n);
  for (int ti = 0; ti < ntypes; ti++) {
    const int32_t TYPE = types[ti];
    pkrylov_result lib, res;
    PK_REQUIRE_OK(ctx, lib_solve(ctx, A, M, TYPE, S, b, xl, 0, &lib));
    PK_EXPECT(lib.converged, "%s %s: the library solve did not converge (%s)", label, tname(TYPE),
              pkrylov_reason_string(lib.reason));
    for (int by_caller = 0; by_caller <= 1; by_caller++) {
      char what[128];
      snprintf(what, sizeof what, "%s %s reduce_by_caller %d", label, tname(TYPE), by_caller);
      pkrylov_rci r = make_rci(ctx, TYPE, n, pc, by_caller, S);
      PK_REQUIRE_OK(ctx, r ? 0 : PKRYLOV_ERR_INTERNAL);
      for (int64_t i = 0; i < n; i++)
        x[i] = 99.0; /* ignored: x_nonzero 0 */
      PK_EXPECT(drive(r, &P, pc, b, x, 0, &g_T, 0, 1) == 0, "%s: rci loop failed", what);
      PK_EXPECT_CODE(ctx, pkrylov_rci_get_result(r, &res), PKRYLOV_SUCCESS);
      expect_same_result(what, &res, &lib);
      PK_EXPECT(memcmp(x, xl, sizeof(double) * n) == 0, "%s: x differs from the library's (rel %g)", what,
                pk_test_rel_diff(n, x, xl));
      expect_protocol(what, &g_T, TYPE, pc, by_caller, res.iterations, S);
      /* a second solve with the same rci, from an initial guess */
      for (int64_t i = 0; i < n; i++)
        x[i] = xl[i] = 0.5;
      PK_REQUIRE_OK(ctx, lib_solve(ctx, A, M, TYPE, S, b, xl, 1, &lib));
      PK_EXPECT(drive(r, &P, pc, b, x, 1, &g_T, 0, 1) == 0, "%s: second rci loop failed", what);
      PK_EXPECT_CODE(ctx, pkrylov_rci_get_result(r, &res), PKRYLOV_SUCCESS);
      expect_same_result(what, &res, &lib);
      PK_EXPECT(memcmp(x, xl, sizeof(double) * n) == 0, "%s: initial guess: x differs from the library's",
                what);
      pkrylov_rci_destroy(&r);
      PK_REQUIRE_OK(ctx, lib_solve(ctx, A, M, TYPE, S, b, xl, 0, &lib)); /* for the next by_caller */
    }
  }
  free(b), free(x), free(xl);
  pkrylov_precond_destroy(&M);
  prob_free(&P);
  PK_TEST_END();
}

/** Every BiCGStab / GMRES type (the nonsymmetric problems). */
static int compare_all(pkrylov_context ctx, pkrylov_operator A, int pc, int32_t nz, const settings *S,
                       const char *label) {
  return compare_types(ctx, A, pc, nz, S, label, TYPES, 6);
}

static int with_mtx(const char *file, int pc, const settings *S) {
  const char *path = pk_test_matrix_path(file);
  if (!path)
    return PK_SKIP;
  pkrylov_context ctx;
  PK_REQUIRE_OK(NULL, pkrylov_context_create(PKRYLOV_BACKEND_CPU, &ctx));
  pkrylov_operator A;
  PK_REQUIRE_OK(ctx, pkrylov_operator_create_from_mtx(ctx, path, &A));
  int rc = compare_all(ctx, A, pc, 0, S, file);
  pkrylov_operator_destroy(&A);
  pkrylov_context_destroy(&ctx);
  return rc;
}

PK_TEST_CASE(orsirr_2_jacobi_same_as_library) {
  settings S = DEFAULTS;
  S.restart = 20; /* also checks that the restart setting reaches the driver */
  return with_mtx("orsirr_2.mtx", PC_JACOBI, &S);
}

PK_TEST_CASE(ani1_nonsymm_none_same_as_library) {
  settings S = DEFAULTS;
  S.restart = 8;
  S.step = 2;
  return with_mtx("ani1_nonsymm.mtx", PC_NONE, &S);
}

/** The convection-diffusion operator with a vertical wind (nonsymmetric columns). */
static int convdiff(pkrylov_context ctx, pkrylov_operator *A, int32_t *nz) {
  const double wind[3] = {1.5, -0.75, 0.6};
  *nz = 6;
  return pkrylov_operator_create_convdiff(ctx, 10, 9, *nz, wind, 20.0, A);
}

PK_TEST_CASE(convdiff_column_same_as_library) {
  pkrylov_context ctx;
  PK_REQUIRE_OK(NULL, pkrylov_context_create(PKRYLOV_BACKEND_CPU, &ctx));
  pkrylov_operator A;
  int32_t nz;
  PK_REQUIRE_OK(ctx, convdiff(ctx, &A, &nz));
  int rc = compare_all(ctx, A, PC_COLUMN, nz, &DEFAULTS, "convdiff column");
  pkrylov_operator_destroy(&A);
  pkrylov_context_destroy(&ctx);
  return rc;
}

PK_TEST_CASE(convdiff_none_same_as_library) {
  pkrylov_context ctx;
  PK_REQUIRE_OK(NULL, pkrylov_context_create(PKRYLOV_BACKEND_CPU, &ctx));
  pkrylov_operator A;
  int32_t nz;
  PK_REQUIRE_OK(ctx, convdiff(ctx, &A, &nz));
  settings S = DEFAULTS;
  S.replace = 7; /* pipelined BiCGStab replaces its residuals every 7 iterations */
  int rc = compare_all(ctx, A, PC_NONE, nz, &S, "convdiff none");
  pkrylov_operator_destroy(&A);
  pkrylov_context_destroy(&ctx);
  return rc;
}

/** Single-reduction CG (symmetric definite: the thin shell as CSR) with Jacobi and without a
 *  preconditioner (the test's column solve is dgttrs's arithmetic, the library's for symmetric columns
 *  dpttrs's). */
/** The thin shell (10 x 9 x 6, symmetric definite) as CSR: the library's products are then the test's row
 *  sums (bitwise the same iterations). */
static int thinshell_csr(pkrylov_context ctx, pkrylov_operator *A) {
  pkrylov_thinshell_params p;
  pkrylov_thinshell_params_default(10, 9, 6, &p);
  pkrylov_operator T;
  int ierr = pkrylov_operator_create_thinshell(ctx, &p, &T);
  if (ierr)
    return ierr;
  int64_t n, nnz;
  pkrylov_operator_get_info(T, &n, &nnz, NULL, NULL, NULL, NULL);
  int64_t *rp = malloc(sizeof(int64_t) * (size_t)(n + 1)), *ci = malloc(sizeof(int64_t) * (size_t)nnz);
  double *va = malloc(sizeof(double) * (size_t)nnz);
  ierr = pkrylov_operator_get_csr(T, rp, ci, va);
  if (!ierr)
    ierr = pkrylov_operator_create_csr64(ctx, n, 0, rp, ci, va, A);
  free(rp), free(ci), free(va);
  pkrylov_operator_destroy(&T);
  return ierr;
}

PK_TEST_CASE(srcg_thinshell_same_as_library) {
  pkrylov_context ctx;
  PK_REQUIRE_OK(NULL, pkrylov_context_create(PKRYLOV_BACKEND_CPU, &ctx));
  pkrylov_operator A;
  PK_REQUIRE_OK(ctx, thinshell_csr(ctx, &A));
  const int32_t srcg[1] = {PKRYLOV_SOLVER_SRCG};
  int rc = compare_types(ctx, A, PC_JACOBI, 0, &DEFAULTS, "thin shell jacobi", srcg, 1);
  if (rc == PK_PASS) rc = compare_types(ctx, A, PC_NONE, 6, &DEFAULTS, "thin shell none", srcg, 1);
  pkrylov_operator_destroy(&A);
  pkrylov_context_destroy(&ctx);
  return rc;
}

/** CG and pipelined CG (cg.c's drivers through the coroutine, issue 15) on the thin shell: with Jacobi and
 *  without, residual replacement every 7 iterations (pipelined CG), the caller's and the library's sums, a
 *  second solve from an initial guess: bitwise the library's. */
PK_TEST_CASE(cg_pipecg_thinshell_same_as_library) {
  pkrylov_context ctx;
  PK_REQUIRE_OK(NULL, pkrylov_context_create(PKRYLOV_BACKEND_CPU, &ctx));
  pkrylov_operator A;
  PK_REQUIRE_OK(ctx, thinshell_csr(ctx, &A));
  const int32_t cgs[2] = {PKRYLOV_SOLVER_CG, PKRYLOV_SOLVER_PIPECG};
  settings S = DEFAULTS;
  S.replace = 7;
  int rc = compare_types(ctx, A, PC_JACOBI, 0, &DEFAULTS, "thin shell jacobi", cgs, 2);
  if (rc == PK_PASS) rc = compare_types(ctx, A, PC_NONE, 6, &S, "thin shell none, replace 7", cgs, 2);
  pkrylov_operator_destroy(&A);
  pkrylov_context_destroy(&ctx);
  return rc;
}

/**
 * CG and pipelined CG where they stop without converging, against the library bitwise (result fields, x):
 * the iteration cap (7), and breakdowns on a symmetric indefinite matrix, the 1-D Laplacian tridiag(-1, 2,
 * -1) shifted by -0.3 (a few negative eigenvalues): the curvature (p, A p) changes sign (x is the last
 * good iterate), and diag(1, -1) with b = (1, 1), whose first curvature is zero (breakdown at iteration 1).
 */
PK_TEST_CASE(cg_pipecg_stops_same_as_library) {
  pkrylov_context ctx;
  PK_REQUIRE_OK(NULL, pkrylov_context_create(PKRYLOV_BACKEND_CPU, &ctx));
  pkrylov_operator ops[3];
  PK_REQUIRE_OK(ctx, thinshell_csr(ctx, &ops[0]));
  enum { NL = 60 };
  int64_t rp[NL + 1], ci[3 * NL], nz = 0;
  double va[3 * NL];
  for (int64_t i = 0; i < NL; i++) {
    rp[i] = nz;
    if (i > 0) ci[nz] = i - 1, va[nz++] = -1.0;
    ci[nz] = i, va[nz++] = 2.0 - 0.3;
    if (i < NL - 1) ci[nz] = i + 1, va[nz++] = -1.0;
  }
  rp[NL] = nz;
  PK_REQUIRE_OK(ctx, pkrylov_operator_create_csr64(ctx, NL, 0, rp, ci, va, &ops[1]));
  const int64_t rp2[3] = {0, 1, 2}, ci2[2] = {0, 1};
  const double va2[2] = {1.0, -1.0};
  PK_REQUIRE_OK(ctx, pkrylov_operator_create_csr64(ctx, 2, 0, rp2, ci2, va2, &ops[2]));
  int breakdowns = 0;
  for (int k = 0; k < 3; k++) {
    prob P;
    PK_REQUIRE_OK(ctx, prob_make(ops[k], 0, &P) ? PKRYLOV_ERR_INTERNAL : 0);
    double *b = malloc(sizeof(double) * P.n), *x = malloc(sizeof(double) * P.n), *xl = malloc(sizeof(double) * P.n);
    for (int64_t i = 0; i < P.n; i++)
      b[i] = k == 2 ? 1.0 : 1.0 + (double)(i % 7) / 7.0;
    settings S = DEFAULTS;
    if (k == 0)
      S.maxit = 7;
    for (int32_t type = PKRYLOV_SOLVER_CG; type <= PKRYLOV_SOLVER_PIPECG; type++)
      for (int by_caller = 0; by_caller <= 1; by_caller++) {
        char what[96];
        snprintf(what, sizeof what, "%s %s reduce_by_caller %d", k == 0 ? "maxit 7" : k == 1 ? "indefinite" : "diag(1,-1)",
                 tname(type), by_caller);
        pkrylov_result lib, res;
        PK_REQUIRE_OK(ctx, lib_solve(ctx, ops[k], NULL, type, &S, b, xl, 0, &lib));
        pkrylov_rci r = make_rci(ctx, type, P.n, PC_NONE, by_caller, &S);
        PK_REQUIRE_OK(ctx, r ? 0 : PKRYLOV_ERR_INTERNAL);
        PK_EXPECT(drive(r, &P, PC_NONE, b, x, 0, &g_T, 0, 1) == 0, "%s: rci loop failed", what);
        PK_REQUIRE_OK(ctx, pkrylov_rci_get_result(r, &res));
        expect_same_result(what, &res, &lib);
        PK_EXPECT(memcmp(x, xl, sizeof(double) * P.n) == 0, "%s: x differs from the library's", what);
        if (k == 0)
          PK_EXPECT(res.reason == PKRYLOV_DIVERGED_MAX_ITERATIONS && res.iterations == 7, "%s: %s after %d", what,
                    pkrylov_reason_string(res.reason), res.iterations);
        else
          PK_EXPECT(!res.converged && res.breakdown_iteration >= 1 && (k == 1 || res.breakdown_iteration == 1),
                    "%s: %s at %d", what, pkrylov_reason_string(res.reason), res.breakdown_iteration);
        breakdowns += res.reason == PKRYLOV_DIVERGED_BREAKDOWN_INDEFINITE_MATRIX && res.breakdown_iteration > 1;
        pkrylov_rci_destroy(&r);
      }
    free(b), free(x), free(xl);
    prob_free(&P);
  }
  PK_EXPECT(breakdowns > 0, "no breakdown after the first iteration on the shifted Laplacian");
  for (int k = 0; k < 3; k++)
    pkrylov_operator_destroy(&ops[k]);
  pkrylov_context_destroy(&ctx);
  PK_TEST_END();
}

PK_TEST_CASE(max_iterations_same_as_library) {
  const char *path = pk_test_matrix_path("orsirr_2.mtx");
  if (!path)
    return PK_SKIP;
  pkrylov_context ctx;
  PK_REQUIRE_OK(NULL, pkrylov_context_create(PKRYLOV_BACKEND_CPU, &ctx));
  pkrylov_operator A;
  PK_REQUIRE_OK(ctx, pkrylov_operator_create_from_mtx(ctx, path, &A));
  prob P;
  PK_REQUIRE_OK(ctx, prob_make(A, 0, &P) ? PKRYLOV_ERR_INTERNAL : 0);
  double *b = make_rhs(&P), *x = malloc(sizeof(double) * P.n), *xl = malloc(sizeof(double) * P.n);
  settings S = DEFAULTS;
  S.maxit = 7;
  S.restart = 5;
  for (int t = 0; t < 6; t++) {
    pkrylov_result lib, res;
    PK_REQUIRE_OK(ctx, lib_solve(ctx, A, NULL, TYPES[t], &S, b, xl, 0, &lib));
    pkrylov_rci r = make_rci(ctx, TYPES[t], P.n, PC_NONE, 1, &S);
    PK_REQUIRE_OK(ctx, r ? 0 : PKRYLOV_ERR_INTERNAL);
    PK_EXPECT(drive(r, &P, PC_NONE, b, x, 0, &g_T, 0, 1) == 0, "%s: loop failed", tname(TYPES[t]));
    PK_REQUIRE_OK(ctx, pkrylov_rci_get_result(r, &res));
    PK_EXPECT(res.reason == PKRYLOV_DIVERGED_MAX_ITERATIONS && res.iterations == 7, "%s: %s after %d",
              tname(TYPES[t]), pkrylov_reason_string(res.reason), res.iterations);
    expect_same_result(tname(TYPES[t]), &res, &lib);
    PK_EXPECT(memcmp(x, xl, sizeof(double) * P.n) == 0, "%s: x differs", tname(TYPES[t]));
    /* the final residual reported is that of x, recomputed here */
    double *ax = malloc(sizeof(double) * P.n);
    matvec_rows(&P, x, ax, 0, P.n);
    for (int64_t i = 0; i < P.n; i++)
      ax[i] = b[i] - ax[i];
    PK_EXPECT_NEAR(res.final_residual, pk_test_norm(P.n, ax), 1e-10 * res.final_residual);
    free(ax);
    pkrylov_rci_destroy(&r);
  }
  free(b), free(x), free(xl);
  prob_free(&P);
  pkrylov_operator_destroy(&A);
  pkrylov_context_destroy(&ctx);
  PK_TEST_END();
}

/* ---- two "ranks" in lockstep --------------------------------------------------------------------- */

/**
 * The rows split between two rci objects (rank 0: [0, h), rank 1: [h, n)), driven in lockstep by one
 * loop that plays both ranks and their communication: MATVEC gathers both operands into the global vector,
 * REDUCE_WAIT writes the elementwise sum of both ranks' partials into both arrays.
 */
PK_TEST_CASE(two_ranks_caller_sums) {
  pkrylov_context ctx;
  PK_REQUIRE_OK(NULL, pkrylov_context_create(PKRYLOV_BACKEND_CPU, &ctx));
  pkrylov_operator A;
  int32_t nz;
  PK_REQUIRE_OK(ctx, convdiff(ctx, &A, &nz));
  pkrylov_precond M;
  PK_REQUIRE_OK(ctx, pkrylov_precond_create(ctx, A, PKRYLOV_PRECOND_JACOBI, 0, PKRYLOV_LAYOUT_AUTO, &M));
  prob P;
  PK_REQUIRE_OK(ctx, prob_make(A, 0, &P) ? PKRYLOV_ERR_INTERNAL : 0);
  const int64_t n = P.n, h = n / 2 + 3, lo[2] = {0, h}, len[2] = {h, n - h};
  double *b = make_rhs(&P), *x = malloc(sizeof(double) * n), *xl = malloc(sizeof(double) * n);
  double *xd = malloc(sizeof(double) * n), *g = malloc(sizeof(double) * n);
  PK_REQUIRE_OK(ctx, pk_test_dense_solve(A, b, xd) ? PKRYLOV_ERR_INTERNAL : 0);
  settings S = DEFAULTS;
  trace T[2];
  memset(T, 0, sizeof T);
  for (int t = 0; t < 6; t++) {
    const char *nm = tname(TYPES[t]);
    pkrylov_result lib, res[2];
    PK_REQUIRE_OK(ctx, lib_solve(ctx, A, M, TYPES[t], &S, b, xl, 0, &lib));
    pkrylov_rci r[2];
    for (int k = 0; k < 2; k++) {
      r[k] = make_rci(ctx, TYPES[t], len[k], PC_JACOBI, 1, &S);
      PK_REQUIRE_OK(ctx, r[k] ? 0 : PKRYLOV_ERR_INTERNAL);
      PK_REQUIRE_OK(ctx, pkrylov_rci_start(r[k], PKRYLOV_MEM_HOST, b + lo[k], x + lo[k], 0));
      trace_reset(&T[k]);
    }
    int ok = 1, nreq = 0;
    for (;;) {
      int32_t q[2], np[2];
      double *in[2], *out[2], *part[2];
      for (int k = 0; k < 2; k++) {
        if (pkrylov_rci_step(r[k], &q[k], &in[k], &out[k], &part[k], &np[k]))
          ok = 0;
        trace_add(&T[k], q[k], np[k], in[k], out[k], part[k]);
      }
      nreq++;
      if (!ok || q[0] != q[1] || np[0] != np[1]) {
        fprintf(stderr, "%s: request %d: ranks ask %d (%d) and %d (%d)\n", nm, nreq, q[0], np[0], q[1],
                np[1]);
        ok = 0;
        break;
      }
      if (q[0] == PKRYLOV_RCI_DONE)
        break;
      if (q[0] == PKRYLOV_RCI_MATVEC) {
        for (int k = 0; k < 2; k++)
          memcpy(g + lo[k], in[k], sizeof(double) * len[k]);
        for (int k = 0; k < 2; k++)
          matvec_rows(&P, g, out[k], lo[k], lo[k] + len[k]);
      } else if (q[0] == PKRYLOV_RCI_PRECOND) {
        for (int k = 0; k < 2; k++)
          precond_apply(&P, PC_JACOBI, lo[k], lo[k] + len[k], in[k], out[k]);
      } else {
        for (int k = 0; k < 2; k++)
          reduce_request(&T[k], q[k], part[k], np[k]);
        if (T[0].bad || T[1].bad) {
          ok = 0;
          break;
        }
        if (q[0] == PKRYLOV_RCI_REDUCE_WAIT)
          for (int k = 0; k < 2; k++)
            for (int j = 0; j < np[k]; j++)
              part[k][j] = T[0].sent[j] + T[1].sent[j];
      }
    }
    PK_EXPECT(ok, "%s: the two ranks' loop failed", nm);
    for (int k = 0; k < 2; k++)
      PK_EXPECT_CODE(ctx, pkrylov_rci_get_result(r[k], &res[k]), PKRYLOV_SUCCESS);
    /* both ranks agree on the outcome; it is the library's up to the rounding of the sums */
    PK_EXPECT(res[0].iterations == res[1].iterations && res[0].reason == res[1].reason &&
                  res[0].final_residual == res[1].final_residual,
              "%s: ranks disagree: %d/%d iterations", nm, res[0].iterations, res[1].iterations);
    PK_EXPECT(res[0].converged && abs(res[0].iterations - lib.iterations) <= 2,
              "%s: %d iterations (%s), library %d", nm, res[0].iterations,
              pkrylov_reason_string(res[0].reason), lib.iterations);
    const double tr = pk_test_true_relres(A, b, x);
    PK_EXPECT(tr <= S.rtol * 1.0001, "%s: true relative residual %g", nm, tr);
    PK_EXPECT_NEAR(res[0].rel_residual, tr, 1e-6 * tr);
    PK_EXPECT(pk_test_rel_diff(n, x, xd) < 1e-5, "%s: x vs dense %g", nm, pk_test_rel_diff(n, x, xd));
    PK_EXPECT(pk_test_rel_diff(n, x, xl) < 1e-5, "%s: x vs library %g", nm, pk_test_rel_diff(n, x, xl));
    for (int k = 0; k < 2; k++)
      pkrylov_rci_destroy(&r[k]);
  }
  free(T[0].e), free(T[1].e);
  free(b), free(x), free(xl), free(xd), free(g);
  prob_free(&P);
  pkrylov_precond_destroy(&M);
  pkrylov_operator_destroy(&A);
  pkrylov_context_destroy(&ctx);
  PK_TEST_END();
}

/* ---- abandon, destroy, errors ---------------------------------------------------------------------- */

/** A convdiff problem with Jacobi for the cases below. */
typedef struct {
  pkrylov_context ctx;
  pkrylov_operator A;
  pkrylov_precond M;
  prob P;
  double *b, *b2, *x, *x2, *xl;
} fixture;

/** spd 0: the convdiff problem; 1: the thin shell as CSR (CG, pipelined CG). */
static int fixture_make(fixture *F, int spd) {
  memset(F, 0, sizeof *F);
  int32_t nz;
  if (pkrylov_context_create(PKRYLOV_BACKEND_CPU, &F->ctx) ||
      (spd ? thinshell_csr(F->ctx, &F->A) : convdiff(F->ctx, &F->A, &nz)) ||
      pkrylov_precond_create(F->ctx, F->A, PKRYLOV_PRECOND_JACOBI, 0, PKRYLOV_LAYOUT_AUTO, &F->M) ||
      prob_make(F->A, 0, &F->P))
    return 1;
  const int64_t n = F->P.n;
  F->b = make_rhs(&F->P);
  F->b2 = malloc(sizeof(double) * n), F->x = malloc(sizeof(double) * n), F->x2 = malloc(sizeof(double) * n);
  F->xl = malloc(sizeof(double) * n);
  uint64_t seed = 11;
  for (int64_t i = 0; i < n; i++)
    F->b2[i] = pk_test_rand(&seed);
  return 0;
}

static void fixture_free(fixture *F) {
  free(F->b), free(F->b2), free(F->x), free(F->x2), free(F->xl);
  prob_free(&F->P);
  pkrylov_precond_destroy(&F->M);
  pkrylov_operator_destroy(&F->A);
  pkrylov_context_destroy(&F->ctx);
}

/** Abandon and restart solves of the ntypes types on fixture F (spd: the thin shell). */
static int abandon_types(int spd, const int32_t *types, int ntypes) {
  fixture F;
  PK_REQUIRE_OK(NULL, fixture_make(&F, spd));
  const int64_t n = F.P.n;
  for (int t = 0; t < ntypes; t++) {
    const char *nm = tname(types[t]);
    for (int by_caller = 0; by_caller <= 1; by_caller++) {
      pkrylov_rci r = make_rci(F.ctx, types[t], n, PC_JACOBI, by_caller, &DEFAULTS);
      PK_REQUIRE_OK(F.ctx, r ? 0 : PKRYLOV_ERR_INTERNAL);
      /* a solve from an initial guess, abandoned after some requests in the middle of its iteration */
      uint64_t seed = 5;
      for (int64_t i = 0; i < n; i++)
        F.x[i] = pk_test_rand(&seed);
      double *x0 = malloc(sizeof(double) * n);
      memcpy(x0, F.x, sizeof(double) * n);
      PK_EXPECT(drive(r, &F.P, PC_JACOBI, F.b, F.x, 1, &g_T, 40 + 7 * t, 1) == 0, "%s: first loop", nm);
      PK_EXPECT(g_T.e[g_T.len - 1].req != PKRYLOV_RCI_DONE, "%s: the first solve ended too early", nm);
      PK_EXPECT(memcmp(F.x, x0, sizeof(double) * n) == 0, "%s: x written before DONE", nm);
      /* a new start (other b, other x) abandons it: its x stays as it was, and may be gone (poisoned here) */
      double *bgone = malloc(sizeof(double) * n);
      memcpy(bgone, F.b, sizeof(double) * n);
      PK_EXPECT(drive(r, &F.P, PC_JACOBI, bgone, F.x, 1, &g_T, 9, 1) == 0, "%s: loop to abandon", nm);
      free(bgone); /* ASan: the abandoning start below must not read b (nor x) */
      for (int64_t i = 0; i < n; i++)
        F.x[i] = -1.0;
      PK_EXPECT(drive(r, &F.P, PC_JACOBI, F.b2, F.x2, 0, &g_T, 0, 1) == 0, "%s: second loop", nm);
      int64_t written = 0;
      for (int64_t i = 0; i < n; i++)
        written += F.x[i] != -1.0;
      PK_EXPECT(written == 0, "%s: the abandoned solve wrote %lld values of its x", nm, (long long)written);
      pkrylov_result res, lib;
      PK_REQUIRE_OK(F.ctx, pkrylov_rci_get_result(r, &res));
      PK_REQUIRE_OK(F.ctx, lib_solve(F.ctx, F.A, F.M, types[t], &DEFAULTS, F.b2, F.xl, 0, &lib));
      expect_same_result(nm, &res, &lib);
      PK_EXPECT(memcmp(F.x2, F.xl, sizeof(double) * n) == 0, "%s: solve after the abandoned one differs", nm);
      expect_protocol(nm, &g_T, types[t], PC_JACOBI, by_caller, res.iterations, &DEFAULTS);
      /* abandon again, with the same x this time, then finish from x = 0 */
      PK_EXPECT(drive(r, &F.P, PC_JACOBI, F.b, F.x, 0, &g_T, 25, 1) == 0, "%s: third loop", nm);
      PK_EXPECT(drive(r, &F.P, PC_JACOBI, F.b, F.x, 0, &g_T, 0, 1) == 0, "%s: fourth loop", nm);
      PK_REQUIRE_OK(F.ctx, pkrylov_rci_get_result(r, &res));
      PK_REQUIRE_OK(F.ctx, lib_solve(F.ctx, F.A, F.M, types[t], &DEFAULTS, F.b, F.xl, 0, &lib));
      expect_same_result(nm, &res, &lib);
      PK_EXPECT(memcmp(F.x, F.xl, sizeof(double) * n) == 0, "%s: solve on the abandoned x differs", nm);
      free(x0);
      pkrylov_rci_destroy(&r);
    }
  }
  fixture_free(&F);
  PK_TEST_END();
}

PK_TEST_CASE(abandon_and_restart) { return abandon_types(0, TYPES, 6); }

PK_TEST_CASE(cg_pipecg_abandon_and_restart) {
  const int32_t cgs[2] = {PKRYLOV_SOLVER_CG, PKRYLOV_SOLVER_PIPECG};
  return abandon_types(1, cgs, 2);
}

PK_TEST_CASE(destroy_mid_solve) {
  fixture F;
  PK_REQUIRE_OK(NULL, fixture_make(&F, 0));
  const int32_t all[8] = {TYPES[0], TYPES[1], TYPES[2], TYPES[3], TYPES[4], TYPES[5], PKRYLOV_SOLVER_CG,
                          PKRYLOV_SOLVER_PIPECG};
  for (int t = 0; t < 8; t++)
    for (int k = 0; k < 3; k++) {
      pkrylov_rci r = make_rci(F.ctx, all[t], F.P.n, PC_JACOBI, k != 1, &DEFAULTS);
      PK_REQUIRE_OK(F.ctx, r ? 0 : PKRYLOV_ERR_INTERNAL);
      /* k = 0: in the middle of the iteration (by caller: maybe between START and WAIT); 1: started, no step;
         2: right after the first request */
      const int nreq = k == 0 ? 31 + 3 * t : k == 1 ? 0 : 1;
      if (nreq)
        PK_EXPECT(drive(r, &F.P, PC_JACOBI, F.b, F.x, 0, &g_T, nreq, 1) == 0, "%s: loop", tname(all[t]));
      else
        PK_REQUIRE_OK(F.ctx, pkrylov_rci_start(r, PKRYLOV_MEM_HOST, F.b, F.x, 0));
      PK_EXPECT_CODE(F.ctx, pkrylov_rci_destroy(&r), PKRYLOV_SUCCESS);
      PK_EXPECT(r == NULL, "handle not cleared");
    }
  /* never started */
  pkrylov_rci r = make_rci(F.ctx, PKRYLOV_SOLVER_GMRES, F.P.n, PC_NONE, 1, &DEFAULTS);
  PK_EXPECT_CODE(F.ctx, pkrylov_rci_destroy(&r), PKRYLOV_SUCCESS);
  fixture_free(&F);
  PK_TEST_END();
}

PK_TEST_CASE(wrong_order_and_bad_input) {
  fixture F;
  PK_REQUIRE_OK(NULL, fixture_make(&F, 0));
  pkrylov_context ctx = F.ctx;
  const int64_t n = F.P.n;
  pkrylov_rci r = NULL;
  int32_t req;
  pkrylov_result res;
  /* bad type, bad sizes, bad flags */
  PK_EXPECT_CODE(ctx, pkrylov_rci_create(ctx, PKRYLOV_SOLVER_SRCG + 1, n, 0, 0, &r),
                 PKRYLOV_ERR_INVALID_VALUE);
  PK_EXPECT(pk_test_msg_has(ctx, "'type'"), "message");
  PK_EXPECT_CODE(ctx, pkrylov_rci_create(ctx, PKRYLOV_PRECOND_JACOBI, n, 0, 0, &r),
                 PKRYLOV_ERR_INVALID_VALUE);
  PK_EXPECT_CODE(ctx, pkrylov_rci_create(ctx, PKRYLOV_SOLVER_GMRES, 0, 0, 0, &r), PKRYLOV_ERR_INVALID_SIZE);
  PK_EXPECT(pk_test_msg_has(ctx, "'n'"), "message");
  PK_EXPECT_CODE(ctx, pkrylov_rci_create(ctx, PKRYLOV_SOLVER_BICGSTAB, -5, 1, 1, &r),
                 PKRYLOV_ERR_INVALID_SIZE);
  PK_EXPECT_CODE(ctx, pkrylov_rci_create(ctx, PKRYLOV_SOLVER_BICGSTAB, INT64_MAX / 2, 1, 1, &r),
                 PKRYLOV_ERR_INVALID_SIZE);
  PK_EXPECT_CODE(ctx, pkrylov_rci_create(ctx, PKRYLOV_SOLVER_FGMRES, n, 3, 0, &r), PKRYLOV_ERR_INVALID_VALUE);
  PK_EXPECT(pk_test_msg_has(ctx, "'preconditioned'"), "message");
  PK_EXPECT(r == NULL, "handle set on error");

  r = make_rci(ctx, PKRYLOV_SOLVER_PIPEGMRES, n, PC_JACOBI, 1, &DEFAULTS);
  PK_REQUIRE_OK(ctx, r ? 0 : PKRYLOV_ERR_INTERNAL);
  /* setters: ranges */
  PK_EXPECT_CODE(ctx, pkrylov_rci_set_restart(r, 0), PKRYLOV_ERR_INVALID_VALUE);
  PK_EXPECT(pk_test_msg_has(ctx, "'m'"), "message");
  PK_EXPECT_CODE(ctx, pkrylov_rci_set_restart(r, 1001), PKRYLOV_ERR_INVALID_VALUE);
  PK_EXPECT_CODE(ctx, pkrylov_rci_set_step(r, 17), PKRYLOV_ERR_INVALID_VALUE);
  PK_EXPECT(pk_test_msg_has(ctx, "'step'"), "message");
  PK_EXPECT_CODE(ctx, pkrylov_rci_set_step(r, -1), PKRYLOV_ERR_INVALID_VALUE);
  PK_EXPECT_CODE(NULL, pkrylov_rci_set_restart(NULL, 5), PKRYLOV_ERR_NULL_POINTER);
  PK_EXPECT_CODE(NULL, pkrylov_rci_set_step(NULL, 5), PKRYLOV_ERR_NULL_POINTER);
  /* wrong order: step and result before a start */
  PK_EXPECT_CODE(ctx, pkrylov_rci_step(r, &req, NULL, NULL, NULL, NULL), PKRYLOV_ERR_INVALID_STATE);
  PK_EXPECT(pk_test_msg_has(ctx, "pkrylov_rci_start"), "message");
  PK_EXPECT_CODE(ctx, pkrylov_rci_get_result(r, &res), PKRYLOV_ERR_INVALID_STATE);
  /* bad start arguments */
  PK_EXPECT_CODE(ctx, pkrylov_rci_start(r, PKRYLOV_MEM_HOST, NULL, F.x, 0), PKRYLOV_ERR_NULL_POINTER);
  PK_EXPECT_CODE(ctx, pkrylov_rci_start(r, PKRYLOV_MEM_DEVICE, F.b, F.x, 0), PKRYLOV_ERR_MEMTYPE);
  PK_EXPECT_CODE(ctx, pkrylov_rci_start(r, PKRYLOV_MEM_HOST, F.b, F.b, 0), PKRYLOV_ERR_ALIASING);
  PK_EXPECT_CODE(ctx, pkrylov_rci_start(r, PKRYLOV_MEM_HOST, F.b, F.x, 2), PKRYLOV_ERR_INVALID_VALUE);
  /* in the middle of a solve: settings refused, a rejected start leaves the solve running */
  PK_EXPECT(drive(r, &F.P, PC_JACOBI, F.b, F.x, 0, &g_T, 20, 1) == 0, "loop");
  PK_EXPECT_CODE(ctx, pkrylov_rci_set_restart(r, 10), PKRYLOV_ERR_INVALID_STATE);
  PK_EXPECT(pk_test_msg_has(ctx, "in progress"), "message");
  PK_EXPECT_CODE(ctx, pkrylov_rci_set_step(r, 2), PKRYLOV_ERR_INVALID_STATE);
  PK_EXPECT_CODE(ctx, pkrylov_rci_set_tolerances(r, 1e-3, 0.0), PKRYLOV_ERR_INVALID_STATE);
  PK_EXPECT_CODE(ctx, pkrylov_rci_set_max_iterations(r, 3), PKRYLOV_ERR_INVALID_STATE);
  PK_EXPECT_CODE(ctx, pkrylov_rci_set_residual_replacement(r, 3), PKRYLOV_ERR_INVALID_STATE);
  PK_EXPECT_CODE(ctx, pkrylov_rci_get_result(r, &res), PKRYLOV_ERR_INVALID_STATE);
  F.b2[3] = NAN;
  PK_EXPECT_CODE(ctx, pkrylov_rci_start(r, PKRYLOV_MEM_HOST, F.b2, F.x2, 0), PKRYLOV_ERR_NOT_FINITE);
  PK_EXPECT(pk_test_msg_has(ctx, "'b'"), "message");
  /* every request drive() got was answered: go on to DONE without a new start (the trace state, e.g. a
     reduction in flight, carries over) */
  {
    int ierr;
    for (;;) {
      int32_t q, np;
      double *in, *out, *part;
      if ((ierr = pkrylov_rci_step(r, &q, &in, &out, &part, &np)))
        break;
      if (q == PKRYLOV_RCI_DONE)
        break;
      if (q == PKRYLOV_RCI_MATVEC)
        matvec_rows(&F.P, in, out, 0, n);
      else if (q == PKRYLOV_RCI_PRECOND)
        precond_apply(&F.P, PC_JACOBI, 0, n, in, out);
      else {
        reduce_request(&g_T, q, part, np);
        if (q == PKRYLOV_RCI_REDUCE_WAIT)
          memcpy(part, g_T.sent, sizeof(double) * np);
      }
    }
    PK_EXPECT(ierr == 0 && !g_T.bad, "continued loop failed");
  }
  pkrylov_result lib;
  PK_REQUIRE_OK(ctx, pkrylov_rci_get_result(r, &res));
  PK_REQUIRE_OK(ctx, lib_solve(ctx, F.A, F.M, PKRYLOV_SOLVER_PIPEGMRES, &DEFAULTS, F.b, F.xl, 0, &lib));
  expect_same_result("continued after a rejected start", &res, &lib);
  PK_EXPECT(memcmp(F.x, F.xl, sizeof(double) * n) == 0, "x differs after a rejected start");
  /* after DONE: a step needs a new start; settings may change again */
  PK_EXPECT_CODE(ctx, pkrylov_rci_step(r, &req, NULL, NULL, NULL, NULL), PKRYLOV_ERR_INVALID_STATE);
  PK_EXPECT_CODE(ctx, pkrylov_rci_set_restart(r, 10), PKRYLOV_SUCCESS);
  PK_EXPECT_CODE(ctx, pkrylov_rci_destroy(&r), PKRYLOV_SUCCESS);
  PK_EXPECT_CODE(ctx, pkrylov_rci_destroy(&r), PKRYLOV_SUCCESS); /* NULL: no-op */
  /* the objects of the rci do not count in the caller's context: it can be destroyed now */
  fixture_free(&F);
  free(g_T.e);
  g_T.e = NULL;
  g_T.cap = 0;
  PK_TEST_END();
}

PK_TEST_MAIN(PK_TEST_ENTRY(orsirr_2_jacobi_same_as_library), PK_TEST_ENTRY(ani1_nonsymm_none_same_as_library),
             PK_TEST_ENTRY(convdiff_column_same_as_library), PK_TEST_ENTRY(convdiff_none_same_as_library),
             PK_TEST_ENTRY(max_iterations_same_as_library), PK_TEST_ENTRY(two_ranks_caller_sums),
             PK_TEST_ENTRY(srcg_thinshell_same_as_library), PK_TEST_ENTRY(cg_pipecg_thinshell_same_as_library),
             PK_TEST_ENTRY(cg_pipecg_stops_same_as_library), PK_TEST_ENTRY(abandon_and_restart),
             PK_TEST_ENTRY(cg_pipecg_abandon_and_restart), PK_TEST_ENTRY(destroy_mid_solve),
             PK_TEST_ENTRY(wrong_order_and_bad_input))

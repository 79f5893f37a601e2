/**
 * @file t210-precond-factors.c
 * @brief pkrylov_precond_create_column_factors: the caller's own Thomas factors of the column tridiagonals.
 *
 * References: the factors are computed here with MITgcm's ini_cg3d formulas (zMC = 1/(aC - zML zMU(k-1)),
 * zMU = aV(k+1) zMC) from the operator's own coefficients, built here, and the application is compared with
 * the library's own column preconditioner (LAPACK factorisation) and, for a matrix with vertical couplings
 * only, with the identity M^-1 (A x) = x. Solves compare iteration counts with the library's preconditioner.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "pk_test.h"

/** The context's last error message. */
static const char *last_msg(pkrylov_context ctx) {
  const char *m = "";
  pkrylov_context_get_last_error(ctx, NULL, &m);
  return m ? m : "";
}

/** The call must fail with `code` and a message containing `name`. */
#define EXPECT_ERR(ctx, call, code, name)                                                          \
  do {                                                                                             \
    PK_EXPECT_CODE(ctx, call, code);                                                               \
    PK_EXPECT(strstr(last_msg(ctx), (name)) != NULL, "message '%s' does not name %s",              \
              last_msg(ctx), (name));                                                              \
  } while (0)

enum { NX = 6, NY = 5, NZ = 7, N = NX * NY * NZ };

/** A column stencil problem, k-slow cells i + NX*(j + NY*k), with a mask. */
typedef struct {
  double aW[N], aS[N], aV[N], aC[N];
  int32_t mask[N];
} stencil;

/**
 * Random stencil of sign s (s = +1: couplings < 0, aC > 0, positive definite by diagonal dominance;
 * s = -1: MITgcm's sign, negative definite), with one dry column and dry bottom cells when dry is set.
 */
static void make_stencil(stencil *p, double s, int dry) {
  uint64_t st = 12345;
  for (int c = 0; c < N; c++) {
    p->aW[c] = -s * (0.5 + 0.4 * pk_test_rand(&st));
    p->aS[c] = -s * (0.5 + 0.4 * pk_test_rand(&st));
    p->aV[c] = -s * (2.0 + 1.5 * pk_test_rand(&st)); /* strong vertical couplings */
    p->mask[c] = 1;
  }
  for (int c = 0; c < N; c++) { /* |aC| >= sum of the |couplings| of the row + 0.1 */
    const int i = c % NX, j = (c / NX) % NY, k = c / (NX * NY);
    double sum = fabs(p->aW[c]) + fabs(p->aS[c]) + fabs(p->aV[c]);
    if (i + 1 < NX) sum += fabs(p->aW[c + 1]);
    if (j + 1 < NY) sum += fabs(p->aS[c + NX]);
    if (k + 1 < NZ) sum += fabs(p->aV[c + NX * NY]);
    p->aC[c] = s * (sum + 0.1);
  }
  if (dry)
    for (int k = 0; k < NZ; k++) {
      p->mask[0 + NX * (0 + NY * k)] = 0;                 /* column (0,0) dry */
      if (k >= NZ - 2) p->mask[2 + NX * (3 + NY * k)] = 0; /* column (2,3): two dry bottom cells */
    }
}

/**
 * MITgcm's ini_cg3d factors from the stencil with its mask applied: vertical coupling between k-1 and k
 * aVe(k) = aV(k) mask(k) mask(k-1); dry cells zmc = 1, zmu = 0; otherwise
 *   zmc_k = 1 / (aC_k - aVe(k) zmu_{k-1}),   zmu_k = aVe(k+1) zmc_k.
 */
static void mitgcm_factors(const stencil *p, double *zmc, double *zmu) {
  const int nc = NX * NY;
  for (int c = 0; c < nc; c++)
    for (int k = 0; k < NZ; k++) {
      const int i = c + nc * k;
      if (!p->mask[i]) {
        zmc[i] = 1.0, zmu[i] = 0.0;
        continue;
      }
      const double zml = k > 0 && p->mask[i - nc] ? p->aV[i] : 0.0;
      const double up = k + 1 < NZ && p->mask[i + nc] ? p->aV[i + nc] : 0.0;
      zmc[i] = 1.0 / (p->aC[i] - (k > 0 ? zml * zmu[i - nc] : 0.0));
      zmu[i] = up * zmc[i];
    }
}

/** Iterations of a CG solve of A x = b with M, rtol 1e-10; the solution in x (x0 = 0). */
static int cg_iterations(pkrylov_context ctx, pkrylov_operator A, pkrylov_precond M, const double *b,
                         double *x, int64_t n) {
  pkrylov_solver s;
  pkrylov_result r;
  memset(x, 0, sizeof(double) * (size_t)n);
  if (pkrylov_solver_create(ctx, PKRYLOV_SOLVER_CG, A, M, &s) != PKRYLOV_SUCCESS) return -1;
  pkrylov_solver_set_tolerances(s, 1e-10, 0.0);
  int ok = pkrylov_solver_solve(s, PKRYLOV_MEM_HOST, b, x) == PKRYLOV_SUCCESS &&
           pkrylov_solver_get_result(s, &r) == PKRYLOV_SUCCESS && r.converged;
  pkrylov_solver_destroy(&s);
  return ok ? r.iterations : -1;
}

/** Factors from MITgcm's formulas vs the library's column preconditioner, for a stencil of sign s. */
static int check_stencil(double s) {
  pkrylov_context ctx;
  pkrylov_operator A;
  pkrylov_precond Mlib, Mf;
  static stencil p;
  static double zmc[N], zmu[N], r[N], z1[N], z2[N], x1[N], x2[N];
  make_stencil(&p, s, 1);
  mitgcm_factors(&p, zmc, zmu);
  PK_REQUIRE_OK(NULL, pkrylov_context_create(PKRYLOV_BACKEND_CPU, &ctx));
  PK_REQUIRE_OK(ctx, pkrylov_operator_create_stencil7(ctx, NX, NY, NZ, p.aW, p.aS, p.aV, p.aC, p.mask, &A));
  PK_REQUIRE_OK(ctx, pkrylov_precond_create(ctx, A, PKRYLOV_PRECOND_COLUMN, 0, PKRYLOV_LAYOUT_AUTO, &Mlib));
  PK_REQUIRE_OK(ctx, pkrylov_precond_create_column_factors(ctx, A, 0, PKRYLOV_LAYOUT_AUTO, zmc, zmu, &Mf));
  int32_t type, lev, lay;
  PK_REQUIRE_OK(ctx, pkrylov_precond_get_info(Mf, &type, &lev, &lay));
  PK_EXPECT(type == PKRYLOV_PRECOND_COLUMN && lev == NZ && lay == PKRYLOV_LAYOUT_KSLOW,
            "info: type %d levels %d layout %d", type, lev, lay);
  uint64_t st = 99;
  for (int i = 0; i < N; i++) r[i] = pk_test_rand(&st);
  PK_REQUIRE_OK(ctx, pkrylov_precond_apply(Mlib, PKRYLOV_MEM_HOST, r, z1));
  PK_REQUIRE_OK(ctx, pkrylov_precond_apply(Mf, PKRYLOV_MEM_HOST, r, z2));
  const double d = pk_test_rel_diff(N, z2, z1);
  PK_EXPECT(d <= 1e-13, "sign %g: caller factors vs library column preconditioner: rel diff %.3g", s, d);
  for (int i = 0; i < N; i++) /* dry cells are identity rows */
    if (!p.mask[i]) PK_EXPECT(z2[i] == r[i], "dry cell %d: z = %.17g, r = %.17g", i, z2[i], r[i]);
  for (int i = 0; i < N; i++) r[i] = p.mask[i] ? r[i] : 0.0;
  const int it1 = cg_iterations(ctx, A, Mlib, r, x1, N), it2 = cg_iterations(ctx, A, Mf, r, x2, N);
  PK_EXPECT(it1 > 1 && it1 == it2, "sign %g: iterations %d (library) vs %d (caller factors)", s, it1, it2);
  PK_EXPECT(pk_test_rel_diff(N, x2, x1) <= 1e-8, "solutions differ by %.3g", pk_test_rel_diff(N, x2, x1));
  pkrylov_precond_destroy(&Mf);
  pkrylov_precond_destroy(&Mlib);
  pkrylov_operator_destroy(&A);
  pkrylov_context_destroy(&ctx);
  return PK_PASS;
}

PK_TEST_CASE(stencil_matches_column) {
  if (check_stencil(1.0) != PK_PASS) return PK_FAIL;
  PK_TEST_END();
}

PK_TEST_CASE(negative_definite_mitgcm_sign) {
  if (check_stencil(-1.0) != PK_PASS) return PK_FAIL;
  PK_TEST_END();
}

PK_TEST_CASE(bad_inputs) {
  pkrylov_context ctx, ctx2;
  pkrylov_operator A, A2;
  pkrylov_precond M = NULL;
  static stencil p;
  static double zmc[N], zmu[N], bad[N];
  make_stencil(&p, 1.0, 0);
  mitgcm_factors(&p, zmc, zmu);
  PK_REQUIRE_OK(NULL, pkrylov_context_create(PKRYLOV_BACKEND_CPU, &ctx));
  PK_REQUIRE_OK(NULL, pkrylov_context_create(PKRYLOV_BACKEND_CPU, &ctx2));
  PK_REQUIRE_OK(ctx, pkrylov_operator_create_stencil7(ctx, NX, NY, NZ, p.aW, p.aS, p.aV, p.aC, NULL, &A));
  PK_REQUIRE_OK(ctx2, pkrylov_operator_create_stencil7(ctx2, NX, NY, NZ, p.aW, p.aS, p.aV, p.aC, NULL, &A2));
  const int32_t AU = PKRYLOV_LAYOUT_AUTO;
  PK_EXPECT_CODE(NULL, pkrylov_precond_create_column_factors(NULL, A, 0, AU, zmc, zmu, &M),
                 PKRYLOV_ERR_NULL_POINTER);
  EXPECT_ERR(ctx, pkrylov_precond_create_column_factors(ctx, NULL, 0, AU, zmc, zmu, &M),
             PKRYLOV_ERR_NULL_POINTER, "'A'");
  EXPECT_ERR(ctx, pkrylov_precond_create_column_factors(ctx, A, 0, AU, NULL, zmu, &M),
             PKRYLOV_ERR_NULL_POINTER, "'zmc'");
  EXPECT_ERR(ctx, pkrylov_precond_create_column_factors(ctx, A, 0, AU, zmc, NULL, &M),
             PKRYLOV_ERR_NULL_POINTER, "'zmu'");
  EXPECT_ERR(ctx, pkrylov_precond_create_column_factors(ctx, A, 0, AU, zmc, zmu, NULL),
             PKRYLOV_ERR_NULL_POINTER, "'M'");
  EXPECT_ERR(ctx, pkrylov_precond_create_column_factors(ctx, A2, 0, AU, zmc, zmu, &M),
             PKRYLOV_ERR_INCOMPATIBLE, "'A'");
  EXPECT_ERR(ctx, pkrylov_precond_create_column_factors(ctx, A, NZ + 1, AU, zmc, zmu, &M), PKRYLOV_ERR_LAYOUT,
             "'levels'");
  EXPECT_ERR(ctx, pkrylov_precond_create_column_factors(ctx, A, 0, PKRYLOV_LAYOUT_KFAST, zmc, zmu, &M),
             PKRYLOV_ERR_LAYOUT, "'layout'");
  /* cell 3 + NX*(2 + NY*4): column 3 + NX*2 = 15 (i = 3, j = 2), level 4 */
  const int cell = 3 + NX * (2 + NY * 4);
  char name[32];
  memcpy(bad, zmc, sizeof bad);
  bad[cell] = NAN;
  snprintf(name, sizeof name, "zmc[%d]", cell);
  EXPECT_ERR(ctx, pkrylov_precond_create_column_factors(ctx, A, 0, AU, bad, zmu, &M), PKRYLOV_ERR_NOT_FINITE,
             name);
  PK_EXPECT(strstr(last_msg(ctx), "i = 3, j = 2") && strstr(last_msg(ctx), "level k = 4"),
            "message '%s' does not give the column and level", last_msg(ctx));
  memcpy(bad, zmu, sizeof bad);
  bad[cell] = -INFINITY;
  snprintf(name, sizeof name, "zmu[%d]", cell);
  EXPECT_ERR(ctx, pkrylov_precond_create_column_factors(ctx, A, 0, AU, zmc, bad, &M), PKRYLOV_ERR_NOT_FINITE,
             name);
  memcpy(bad, zmc, sizeof bad);
  bad[cell] = 0.0;
  snprintf(name, sizeof name, "zmc[%d]", cell);
  EXPECT_ERR(ctx, pkrylov_precond_create_column_factors(ctx, A, 0, AU, bad, zmu, &M), PKRYLOV_ERR_SINGULAR,
             name);
  PK_EXPECT(M == NULL, "M was set by a failed call");
  /* a failed creation leaves no object behind: A can be destroyed */
  PK_EXPECT_CODE(ctx, pkrylov_operator_destroy(&A), PKRYLOV_SUCCESS);
  pkrylov_operator_destroy(&A2);
  pkrylov_context_destroy(&ctx2);
  pkrylov_context_destroy(&ctx);
  PK_TEST_END();
}

/** y = A x for the user-operator check: the stencil operator behind user. */
static int apply_via(void *user, int64_t n, const double *x, double *y) {
  (void)n;
  return pkrylov_operator_apply((pkrylov_operator)user, PKRYLOV_MEM_HOST, x, y);
}

/**
 * CSR: the tridiagonals of NC columns of NZ levels (plus horizontal couplings between neighbouring
 * columns, which a column preconditioner ignores) in k-fast (cell k + NZ c) or k-slow (cell c + NC k)
 * order, built here; factors from the CSR's own values with MITgcm's formulas. Also a user operator.
 */
PK_TEST_CASE(csr_levels_layout) {
  enum { NC = 9, NN = NC * NZ };
  pkrylov_context ctx;
  PK_REQUIRE_OK(NULL, pkrylov_context_create(PKRYLOV_BACKEND_CPU, &ctx));
  double di[NN], cp[NN], hz[NN]; /* logical (c, k) at c*NZ + k: diagonal, coupling to k+1, to column c+1 */
  uint64_t st = 7;
  for (int L = 0; L < NN; L++) {
    cp[L] = L % NZ + 1 < NZ ? -(1.0 + 0.5 * pk_test_rand(&st)) : 0.0;
    hz[L] = L / NZ + 1 < NC ? -0.3 * (1.2 + pk_test_rand(&st)) : 0.0;
  }
  for (int L = 0; L < NN; L++) /* diagonally dominant: |row sum of couplings| + 0.2 */
    di[L] = fabs(cp[L]) + (L % NZ ? fabs(cp[L - 1]) : 0) + fabs(hz[L]) + (L >= NZ ? fabs(hz[L - NZ]) : 0) +
            0.2;
  for (int vert_only = 0; vert_only < 2; vert_only++)
    for (int kfast = 0; kfast < 2; kfast++) {
      const int32_t layout = kfast ? PKRYLOV_LAYOUT_KFAST : PKRYLOV_LAYOUT_KSLOW;
#define CELL(c, k) (kfast ? (k) + NZ * (c) : (c) + NC * (k))
      int32_t rp[NN + 1], ci[5 * NN], cnt = 0;
      double v[5 * NN], zmc[NN], zmu[NN], r[NN], z1[NN], z2[NN], ax[NN];
      /* rows in cell order; entries (col, val) per row, sorted by column */
      for (int row = 0; row < NN; row++) {
        const int c = kfast ? row / NZ : row % NC, k = kfast ? row % NZ : row / NC, L = c * NZ + k;
        int32_t cols[5];
        double vals[5];
        int m = 0;
        cols[m] = row, vals[m++] = di[L];
        if (k > 0) cols[m] = CELL(c, k - 1), vals[m++] = cp[L - 1];
        if (k + 1 < NZ) cols[m] = CELL(c, k + 1), vals[m++] = cp[L];
        if (!vert_only && c > 0) cols[m] = CELL(c - 1, k), vals[m++] = hz[L - NZ];
        if (!vert_only && c + 1 < NC) cols[m] = CELL(c + 1, k), vals[m++] = hz[L];
        for (int a = 1; a < m; a++) /* insertion sort by column */
          for (int b = a; b > 0 && cols[b - 1] > cols[b]; b--) {
            int32_t tc = cols[b];
            double tv = vals[b];
            cols[b] = cols[b - 1], vals[b] = vals[b - 1], cols[b - 1] = tc, vals[b - 1] = tv;
          }
        rp[row] = cnt;
        for (int a = 0; a < m; a++) ci[cnt] = cols[a], v[cnt++] = vals[a];
      }
      rp[NN] = cnt;
      for (int c = 0; c < NC; c++) /* MITgcm: zmc = 1/(aC - zML zMU(k-1)), zMU = coupling(k,k+1) zmc */
        for (int k = 0; k < NZ; k++) {
          const int i = CELL(c, k), L = c * NZ + k;
          zmc[i] = 1.0 / (di[L] - (k > 0 ? cp[L - 1] * zmu[CELL(c, k - 1)] : 0.0));
          zmu[i] = cp[L] * zmc[i];
        }
#undef CELL
      pkrylov_operator A, U;
      pkrylov_precond Mlib, Mf, Mu;
      PK_REQUIRE_OK(ctx, pkrylov_operator_create_csr(ctx, NN, 0, rp, ci, v, &A));
      PK_EXPECT_CODE(ctx, pkrylov_precond_create_column_factors(ctx, A, 0, layout, zmc, zmu, &Mf),
                     PKRYLOV_ERR_LAYOUT);
      PK_EXPECT_CODE(ctx, pkrylov_precond_create_column_factors(ctx, A, 5, layout, zmc, zmu, &Mf),
                     PKRYLOV_ERR_LAYOUT);
      PK_EXPECT_CODE(ctx, pkrylov_precond_create_column_factors(ctx, A, NZ, PKRYLOV_LAYOUT_AUTO, zmc, zmu,
                     &Mf),
                     PKRYLOV_ERR_LAYOUT);
      PK_REQUIRE_OK(ctx, pkrylov_precond_create(ctx, A, PKRYLOV_PRECOND_COLUMN, NZ, layout, &Mlib));
      PK_REQUIRE_OK(ctx, pkrylov_precond_create_column_factors(ctx, A, NZ, layout, zmc, zmu, &Mf));
      for (int i = 0; i < NN; i++) r[i] = pk_test_rand(&st);
      PK_REQUIRE_OK(ctx, pkrylov_precond_apply(Mlib, PKRYLOV_MEM_HOST, r, z1));
      PK_REQUIRE_OK(ctx, pkrylov_precond_apply(Mf, PKRYLOV_MEM_HOST, r, z2));
      PK_EXPECT(pk_test_rel_diff(NN, z2, z1) <= 1e-13, "CSR kfast %d: rel diff %.3g", kfast,
                pk_test_rel_diff(NN, z2, z1));
      if (vert_only) { /* block diagonal: M^-1 (A r) = r */
        PK_REQUIRE_OK(ctx, pkrylov_operator_apply(A, PKRYLOV_MEM_HOST, r, ax));
        PK_REQUIRE_OK(ctx, pkrylov_precond_apply(Mf, PKRYLOV_MEM_HOST, ax, z2));
        PK_EXPECT(pk_test_rel_diff(NN, z2, r) <= 1e-13, "M^-1 A r vs r: %.3g", pk_test_rel_diff(NN, z2, r));
      } else { /* the same operator as a user routine: levels and layout as for CSR */
        PK_REQUIRE_OK(ctx, pkrylov_operator_create_user(ctx, NN, apply_via, A, &U));
        PK_EXPECT_CODE(ctx, pkrylov_precond_create_column_factors(ctx, U, 0, layout, zmc, zmu, &Mu),
                       PKRYLOV_ERR_LAYOUT);
        PK_REQUIRE_OK(ctx, pkrylov_precond_create_column_factors(ctx, U, NZ, layout, zmc, zmu, &Mu));
        PK_REQUIRE_OK(ctx, pkrylov_precond_apply(Mu, PKRYLOV_MEM_HOST, r, z2));
        PK_EXPECT(pk_test_rel_diff(NN, z2, z1) <= 1e-13, "user operator: rel diff %.3g",
                  pk_test_rel_diff(NN, z2, z1));
        double x1[NN], x2[NN];
        const int it1 = cg_iterations(ctx, A, Mlib, r, x1, NN), it2 = cg_iterations(ctx, U, Mu, r, x2, NN);
        PK_EXPECT(it1 > 1 && it1 == it2,
                  "iterations %d (CSR, library) vs %d (user, caller factors)", it1, it2);
        pkrylov_precond_destroy(&Mu);
        pkrylov_operator_destroy(&U);
      }
      pkrylov_precond_destroy(&Mf);
      pkrylov_precond_destroy(&Mlib);
      pkrylov_operator_destroy(&A);
    }
  pkrylov_context_destroy(&ctx);
  PK_TEST_END();
}

PK_TEST_MAIN(PK_TEST_ENTRY(stencil_matches_column), PK_TEST_ENTRY(negative_definite_mitgcm_sign),
             PK_TEST_ENTRY(bad_inputs), PK_TEST_ENTRY(csr_levels_layout))

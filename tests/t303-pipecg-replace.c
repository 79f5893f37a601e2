/**
 * @file t303-pipecg-replace.c
 * @brief Pipelined CG's automatic residual replacement (PKRYLOV_REPLACE_AUTO, the default), on each backend:
 *        at most 1.02 times the iterations of a hand-written PCG (pk_rr_test.h) on the thin shell at rtol
 *        1e-10 and on the 3-D basin of legacy_examples/mitgcm_style at 1e-13 (relative; and absolute 1e-13
 *        over three of the model's time steps, each from the last solution), with the true residual
 *        recomputed here meeting the tolerance; the basin is hard enough that the test can fail (without
 *        replacement pipelined CG needs more than 1.1 times the reference). The count of replacements in
 *        the result against an independent count (a user operator counting its products: every automatic
 *        replacement costs five, four on CUDA); the rule with a user operator (no entries: the Rayleigh estimate of
 *        ||A||); the default is the rule; reproducible mode bitwise the same on 1 and 2 threads; pipelined
 *        BiCGStab with the rule replaces every 50 iterations, bitwise as with 50; bad input.
 *
 * PK_TEST_BACKENDS: cpu cuda (pk_test.h). The reference PCG runs on the host with the library's products
 * (pkrylov_operator_apply and pkrylov_precond_apply on host arrays, also on a CUDA context). The thread case
 * is CPU only.
 */
#include <string.h>

#include "pk_rr_test.h"

/** The library's pipelined CG with the rule on P against the reference; returns the iterations (or -1). */
static int check_auto(pkrylov_context ctx, const pk_rr_problem *P, const double *x0, const char *what) {
  double *x = malloc(sizeof(double) * (size_t)P->n);
  pkrylov_result res;
  int ref = pk_rr_reference_cg(P, x0, 3000);
  PK_EXPECT(ref > 0, "%s: the reference CG did not converge", what);
  int e = x ? pk_rr_solve(ctx, P, PKRYLOV_SOLVER_PIPECG, PKRYLOV_REPLACE_AUTO, x0, x, &res) : -1;
  PK_EXPECT(e == 0, "%s: solve failed (%d)", what, e);
  if (e || ref <= 0) {
    free(x);
    return -1;
  }
  const double tol = pk_rr_tol(P), tr = pk_rr_true_residual(P, x);
  PK_EXPECT(res.converged, "%s: not converged (%s)", what, pkrylov_reason_string(res.reason));
  PK_EXPECT(res.iterations <= PK_RR_ITER_FACTOR * ref, "%s: %d iterations, reference CG %d", what,
            res.iterations, ref);
  PK_EXPECT(tr >= 0 && tr <= tol, "%s: true residual %.3e > tolerance %.3e", what, tr, tol);
  PK_EXPECT(res.residual_replacements >= 1 && res.residual_replacements <= res.iterations / 10,
            "%s: %d replacements in %d iterations", what, res.residual_replacements, res.iterations);
  free(x);
  return res.iterations;
}

PK_TEST_CASE(thinshell_rtol_1e10) {
  pkrylov_context ctx;
  pk_rr_problem P;
  PK_REQUIRE_OK(NULL, pk_test_context_create(&ctx));
  PK_REQUIRE_OK(ctx, pk_rr_thinshell(ctx, 64, 64, 32, &P));
  check_auto(ctx, &P, NULL, "thin shell 64 x 64 x 32");
  pk_rr_free(&P);
  PK_REQUIRE_OK(ctx, pk_rr_thinshell(ctx, 96, 80, 24, &P));
  check_auto(ctx, &P, NULL, "thin shell 96 x 80 x 24");
  pk_rr_free(&P);
  pkrylov_context_destroy(&ctx);
  PK_TEST_END();
}

PK_TEST_CASE(basin_rtol_1e13) {
  pkrylov_context ctx;
  pk_rr_problem P;
  PK_REQUIRE_OK(NULL, pk_test_context_create(&ctx));
  PK_REQUIRE_OK(ctx, pk_rr_basin(ctx, 64, 48, 15, &P));
  check_auto(ctx, &P, NULL, "basin 64 x 48 x 15");
  /* the problem needs the replacements: without, pipelined CG takes more than 1.1 times the reference */
  const int ref = pk_rr_reference_cg(&P, NULL, 3000);
  double *x = malloc(sizeof(double) * (size_t)P.n);
  pkrylov_result res;
  PK_REQUIRE(x != NULL, "out of memory");
  PK_REQUIRE_OK(ctx, pk_rr_solve(ctx, &P, PKRYLOV_SOLVER_PIPECG, 0, NULL, x, &res));
  PK_EXPECT(res.iterations > 1.1 * ref,
            "without replacement %d iterations, reference %d: the test problem does "
            "not need the rule",
            res.iterations, ref);
  free(x);
  pk_rr_free(&P);
  PK_REQUIRE_OK(ctx, pk_rr_basin(ctx, 128, 96, 15, &P));
  check_auto(ctx, &P, NULL, "basin 128 x 96 x 15");
  pk_rr_free(&P);
  pkrylov_context_destroy(&ctx);
  PK_TEST_END();
}

/** The model's use: absolute tolerance 1e-13 on the normalised right-hand side, each step from the last
 *  solution (rescaled as CG3D does), three steps of the legacy example's 32 x 24 x 15 basin. */
PK_TEST_CASE(basin_model_steps) {
  pkrylov_context ctx;
  pk_rr_problem P;
  PK_REQUIRE_OK(NULL, pk_test_context_create(&ctx));
  PK_REQUIRE_OK(ctx, pk_rr_basin(ctx, 32, 24, 15, &P));
  P.rtol = 0.0, P.atol = 1e-13;
  double *phi = calloc((size_t)P.n, sizeof(double)), *x0 = malloc(sizeof(double) * (size_t)P.n);
  double *x = malloc(sizeof(double) * (size_t)P.n);
  PK_REQUIRE(phi && x0 && x, "out of memory");
  for (int step = 1; step <= 3; step++) {
    const double bmax = pk_basin3d_rhs(&P.basin, 30.0 * step, P.b);
    for (int64_t i = 0; i < P.n; i++) x0[i] = phi[i] / bmax;
    char what[64];
    snprintf(what, sizeof what, "basin 32 x 24 x 15, step %d", step);
    check_auto(ctx, &P, x0, what);
    pkrylov_result res;
    PK_REQUIRE_OK(ctx, pk_rr_solve(ctx, &P, PKRYLOV_SOLVER_PIPECG, PKRYLOV_REPLACE_AUTO, x0, x, &res));
    for (int64_t i = 0; i < P.n; i++) phi[i] = x[i] * bmax;
  }
  free(phi), free(x0), free(x);
  pk_rr_free(&P);
  pkrylov_context_destroy(&ctx);
  PK_TEST_END();
}

/* ---- a user operator that counts its products -------------------------------------------------------- */

typedef struct {
  pkrylov_operator A; /* the stencil it applies */
  pkrylov_precond M;
  long applies;
} counting;

/* the library passes host arrays to user routines on the CPU, device arrays on a CUDA context */
static int count_apply(void *user, int64_t n, const double *x, double *y) {
  (void)n;
  counting *c = (counting *)user;
  c->applies++;
  return pkrylov_operator_apply(c->A, pk_test_on_cuda() ? PKRYLOV_MEM_DEVICE : PKRYLOV_MEM_HOST, x, y);
}

static int count_precond(void *user, int64_t n, const double *r, double *z) {
  (void)n;
  return pkrylov_precond_apply(((counting *)user)->M, pk_test_on_cuda() ? PKRYLOV_MEM_DEVICE : PKRYLOV_MEM_HOST,
                               r, z);
}

/**
 * The basin behind a user operator and a user preconditioner (the rule estimates ||A|| from the Rayleigh
 * quotients): the reference's iterations, and the replacements against the products counted: a solve that
 * converges without a failed confirmation applies A once for ||b - A x0||, twice to start (r, w), once per
 * pass of the loop (n = A m: iterations + 1 passes, one more after each replacement), four times per
 * replacement (r, w, s, z) and once to confirm: iterations + 5 + 5 R, and 4 more for every confirmation
 * that failed (the product, two to restart, one more pass).
 */
PK_TEST_CASE(user_operator_count) {
  pkrylov_context ctx;
  pk_rr_problem P, U;
  counting c = {0};
  PK_REQUIRE_OK(NULL, pk_test_context_create(&ctx));
  PK_REQUIRE_OK(ctx, pk_rr_basin(ctx, 64, 48, 15, &P));
  c.A = P.A, c.M = P.M;
  U = P;
  memset(&U.basin, 0, sizeof U.basin);
  PK_REQUIRE_OK(ctx, pkrylov_operator_create_user(ctx, P.n, count_apply, &c, &U.A));
  PK_REQUIRE_OK(ctx, pkrylov_precond_create_user(ctx, P.n, count_precond, &c, &U.M));
  double *x = malloc(sizeof(double) * (size_t)P.n);
  PK_REQUIRE(x != NULL, "out of memory");
  const int ref = pk_rr_reference_cg(&P, NULL, 3000);
  /* CUDA: the engine's path (kry.cg=1, cg.c's driver as on the CPU) and the CUDA CG driver's (kry.cg=0) */
  const int npaths = pk_test_on_cuda() ? 2 : 1;
  for (int path = 0; path < npaths; path++) {
    const int driver = path == 1;
    if (pk_test_on_cuda()) PK_REQUIRE_OK(ctx, pkrylov_context_set_option(ctx, "kry.cg", driver ? "0" : "1"));
    pkrylov_result res;
    c.applies = 0;
    PK_REQUIRE_OK(ctx, pk_rr_solve(ctx, &U, PKRYLOV_SOLVER_PIPECG, PKRYLOV_REPLACE_AUTO, NULL, x, &res));
    const double tol = pk_rr_tol(&P), tr = pk_rr_true_residual(&P, x);
    PK_EXPECT(res.converged && res.true_residual_checks >= 1, "%s, %d confirmations",
              pkrylov_reason_string(res.reason), res.true_residual_checks);
    PK_EXPECT(res.iterations <= PK_RR_ITER_FACTOR * ref, "%d iterations, reference %d", res.iterations, ref);
    PK_EXPECT(tr <= tol, "true residual %.3e > %.3e", tr, tol);
    /* cg.c's driver (every backend's engine; the CUDA engine's frame takes A 0 = 0 for ||b|| without the
       routine): iterations + 5 + 5 R + 4 (checks - 1); a confirmation that fails restarts: one more product
       for it, two to start again, one more pass */
    long extra = c.applies - res.iterations - 5 - 4 * (res.true_residual_checks - 1);
    int per = 5;
    if (driver) {
      /* the CUDA driver (pk_cuda_cg.cu, solve_pipecg) runs the scalar step before the product of the pass:
         a step that says converged or REPLACE (the rule) applies nothing, so the passes are the iterations,
         a replacement costs its four products and a failed confirmation three (the product, two to start
         again): iterations + 4 + 4 R + 3 (checks - 1) */
      extra = c.applies - res.iterations - 4 - 3 * (res.true_residual_checks - 1);
      per = 4;
    }
    PK_EXPECT(extra % per == 0 && extra / per == res.residual_replacements && res.residual_replacements >= 1,
              "%s: %ld products in %d iterations, %d confirmations: %ld replacements by count, %d reported",
              driver ? "CUDA driver" : "engine", c.applies, res.iterations, res.true_residual_checks, extra / per,
              res.residual_replacements);
  }
  free(x);
  pkrylov_precond_destroy(&U.M);
  pkrylov_operator_destroy(&U.A);
  pk_rr_free(&P);
  pkrylov_context_destroy(&ctx);
  PK_TEST_END();
}

/** A new solver's setting is the rule: the same iterations, replacements and x bit for bit. */
PK_TEST_CASE(default_is_auto) {
  pkrylov_context ctx;
  pk_rr_problem P;
  pkrylov_solver s;
  pkrylov_result r1, r2;
  PK_REQUIRE_OK(NULL, pk_test_context_create(&ctx));
  PK_REQUIRE_OK(ctx, pk_rr_basin(ctx, 32, 24, 15, &P));
  double *x1 = malloc(sizeof(double) * (size_t)P.n), *x2 = calloc((size_t)P.n, sizeof(double));
  PK_REQUIRE(x1 && x2, "out of memory");
  PK_REQUIRE_OK(ctx, pk_rr_solve(ctx, &P, PKRYLOV_SOLVER_PIPECG, PKRYLOV_REPLACE_AUTO, NULL, x1, &r1));
  PK_REQUIRE_OK(ctx, pkrylov_solver_create(ctx, PKRYLOV_SOLVER_PIPECG, P.A, P.M, &s));
  PK_REQUIRE_OK(ctx, pkrylov_solver_set_tolerances(s, P.rtol, P.atol));
  PK_REQUIRE_OK(ctx, pkrylov_solver_set_max_iterations(s, 3000));
  PK_REQUIRE_OK(ctx, pkrylov_solver_solve(s, PKRYLOV_MEM_HOST, P.b, x2));
  PK_REQUIRE_OK(ctx, pkrylov_solver_get_result(s, &r2));
  PK_EXPECT(r1.iterations == r2.iterations && r1.residual_replacements == r2.residual_replacements &&
                r2.residual_replacements > 0,
            "auto %d its %d replacements, default %d its %d replacements", r1.iterations,
            r1.residual_replacements, r2.iterations, r2.residual_replacements);
  PK_EXPECT(memcmp(x1, x2, sizeof(double) * (size_t)P.n) == 0, "x differs");
  pkrylov_solver_destroy(&s);
  free(x1), free(x2);
  pk_rr_free(&P);
  pkrylov_context_destroy(&ctx);
  PK_TEST_END();
}

/** Reproducible mode: the rule's norms are exact sums too, so 1 and 2 threads give the same x bit for bit.
 *  CPU only: threads are the CPU backend's (CUDA against the CPU in reproducible mode: t713, t725). */
PK_TEST_CASE_CPU(reproducible_threads) {
  double *x[2] = {NULL, NULL};
  pkrylov_result res[2];
  int64_t n = 0;
  for (int t = 0; t < 2; t++) {
    pkrylov_context ctx;
    pk_rr_problem P;
    PK_REQUIRE_OK(NULL, pk_test_context_create(&ctx));
    PK_REQUIRE_OK(ctx, pkrylov_context_set_reproducible(ctx, 1));
    PK_REQUIRE_OK(ctx, pkrylov_context_set_num_threads(ctx, t + 1));
    PK_REQUIRE_OK(ctx, pk_rr_basin(ctx, 64, 48, 15, &P));
    n = P.n;
    x[t] = malloc(sizeof(double) * (size_t)n);
    PK_REQUIRE(x[t] != NULL, "out of memory");
    PK_REQUIRE_OK(ctx,
                  pk_rr_solve(ctx, &P, PKRYLOV_SOLVER_PIPECG, PKRYLOV_REPLACE_AUTO, NULL, x[t], &res[t]));
    PK_EXPECT(res[t].converged && res[t].residual_replacements > 0, "threads %d: %s, %d replacements", t + 1,
              pkrylov_reason_string(res[t].reason), res[t].residual_replacements);
    pk_rr_free(&P);
    pkrylov_context_destroy(&ctx);
  }
  PK_EXPECT(res[0].iterations == res[1].iterations &&
                res[0].residual_replacements == res[1].residual_replacements,
            "1 thread %d its %d replacements, 2 threads %d its %d", res[0].iterations,
            res[0].residual_replacements, res[1].iterations, res[1].residual_replacements);
  PK_EXPECT(memcmp(x[0], x[1], sizeof(double) * (size_t)n) == 0, "x differs between 1 and 2 threads");
  free(x[0]), free(x[1]);
  PK_TEST_END();
}

/** Pipelined BiCGStab keeps fixed intervals: PKRYLOV_REPLACE_AUTO replaces every 50 iterations, as 50 does.
 */
PK_TEST_CASE(pipebicgstab_fixed) {
  pkrylov_context ctx;
  pk_rr_problem P;
  PK_REQUIRE_OK(NULL, pk_test_context_create(&ctx));
  PK_REQUIRE_OK(ctx, pk_rr_thinshell(ctx, 24, 20, 16, &P));
  double *x1 = malloc(sizeof(double) * (size_t)P.n), *x2 = malloc(sizeof(double) * (size_t)P.n);
  PK_REQUIRE(x1 && x2, "out of memory");
  pkrylov_result r1, r2;
  pkrylov_solver s;
  for (int v = 0; v < 2; v++) {
    PK_REQUIRE_OK(ctx, pkrylov_solver_create(ctx, PKRYLOV_SOLVER_PIPEBICGSTAB, P.A, P.M, &s));
    PK_REQUIRE_OK(ctx, pkrylov_solver_set_tolerances(s, 1e-12, 0));
    PK_REQUIRE_OK(ctx, pkrylov_solver_set_max_iterations(s, 2000));
    PK_REQUIRE_OK(ctx, pkrylov_solver_set_residual_replacement(s, v ? 50 : PKRYLOV_REPLACE_AUTO));
    double *x = v ? x2 : x1;
    memset(x, 0, sizeof(double) * (size_t)P.n);
    PK_REQUIRE_OK(ctx, pkrylov_solver_solve(s, PKRYLOV_MEM_HOST, P.b, x));
    PK_REQUIRE_OK(ctx, pkrylov_solver_get_result(s, v ? &r2 : &r1));
    pkrylov_solver_destroy(&s);
  }
  PK_EXPECT(r1.iterations == r2.iterations && r1.residual_replacements == r2.residual_replacements,
            "auto %d its %d replacements, 50: %d its %d", r1.iterations, r1.residual_replacements,
            r2.iterations, r2.residual_replacements);
  PK_EXPECT(r1.iterations < 50 || r1.residual_replacements >= 1, "%d iterations, %d replacements",
            r1.iterations, r1.residual_replacements);
  PK_EXPECT(memcmp(x1, x2, sizeof(double) * (size_t)P.n) == 0, "x differs");
  free(x1), free(x2);
  pk_rr_free(&P);
  pkrylov_context_destroy(&ctx);
  PK_TEST_END();
}

PK_TEST_CASE(bad_input) {
  pkrylov_context ctx;
  pk_rr_problem P;
  pkrylov_solver s;
  PK_REQUIRE_OK(NULL, pk_test_context_create(&ctx));
  PK_REQUIRE_OK(ctx, pk_rr_thinshell(ctx, 4, 4, 4, &P));
  PK_REQUIRE_OK(ctx, pkrylov_solver_create(ctx, PKRYLOV_SOLVER_PIPECG, P.A, P.M, &s));
  PK_EXPECT_CODE(ctx, pkrylov_solver_set_residual_replacement(s, -2), PKRYLOV_ERR_INVALID_VALUE);
  PK_EXPECT(pk_test_msg_has(ctx, "'k' = -2"), "message names k");
  PK_EXPECT_CODE(ctx, pkrylov_solver_set_residual_replacement(s, -100), PKRYLOV_ERR_INVALID_VALUE);
  PK_EXPECT_CODE(NULL, pkrylov_solver_set_residual_replacement(NULL, PKRYLOV_REPLACE_AUTO),
                 PKRYLOV_ERR_NULL_POINTER);
  PK_EXPECT(pk_test_msg_has(NULL, "'s'"), "message names s");
  PK_EXPECT_CODE(ctx, pkrylov_solver_set_residual_replacement(s, PKRYLOV_REPLACE_AUTO), PKRYLOV_SUCCESS);
  PK_EXPECT_CODE(ctx, pkrylov_solver_set_residual_replacement(s, 0), PKRYLOV_SUCCESS);
  pkrylov_solver_destroy(&s);
  pk_rr_free(&P);
  pkrylov_context_destroy(&ctx);
  PK_TEST_END();
}

PK_TEST_MAIN(PK_TEST_ENTRY(thinshell_rtol_1e10), PK_TEST_ENTRY(basin_rtol_1e13),
             PK_TEST_ENTRY(basin_model_steps), PK_TEST_ENTRY(user_operator_count),
             PK_TEST_ENTRY(default_is_auto), PK_TEST_ENTRY(reproducible_threads),
             PK_TEST_ENTRY(pipebicgstab_fixed), PK_TEST_ENTRY(bad_input))

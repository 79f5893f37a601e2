/**
 * @file t305-unknown-type.c
 * @brief White box (pk_impl.h): an operator, preconditioner or solver whose type field holds no known type
 *        (a corrupted or destroyed handle) is PKRYLOV_ERR_INTERNAL with a message naming the value, from
 *        every call that dispatches on it (products, solves of each family, the column preconditioner's
 *        set-up), never run as another kind (the thin shell and the column solve were the fallthrough) and
 *        without touching the output; with the type restored the same objects work again.
 *
 * PK_TEST_BACKENDS: cpu cuda (pk_test.h): the host checks run before a CUDA context's dispatch. The device
 * launchers' own refusal is t700's unknown_type_refused.
 */
#include <string.h>

#include "pk_impl.h"
#include "pk_test.h"

static const int32_t bad_op_type = 799, bad_pc_type = 499, bad_solver_type = 399;

/** x filled with v (n values). */
static void fill(int64_t n, double *x, double v) {
  for (int64_t i = 0; i < n; i++) x[i] = v;
}

/** 1 when every value of y is v (the failing call left its output alone). */
static int all_are(int64_t n, const double *y, double v) {
  for (int64_t i = 0; i < n; i++)
    if (y[i] != v) return 0;
  return 1;
}

/** The thin shell (the old fallthrough) is not it: a CSR operator whose type is overwritten. */
PK_TEST_CASE(operator_apply) {
  pkrylov_context ctx;
  PK_REQUIRE_OK(NULL, pk_test_context_create(&ctx));
  const int32_t rp[4] = {0, 2, 5, 7}, ci[7] = {0, 1, 0, 1, 2, 1, 2};
  const double v[7] = {4, -1, -1, 4, -1, -1, 4};
  pkrylov_operator A;
  PK_REQUIRE_OK(ctx, pkrylov_operator_create_csr(ctx, 3, 0, rp, ci, v, &A));
  double x[3] = {1, 2, 3}, y[3];
  fill(3, y, -7.0);
  A->type = bad_op_type;
  PK_EXPECT_CODE(ctx, pkrylov_operator_apply(A, PKRYLOV_MEM_HOST, x, y), PKRYLOV_ERR_INTERNAL);
  PK_EXPECT(pk_test_msg_has(ctx, "799") && pk_test_msg_has(ctx, "pkrylov_operator_apply"), "message");
  PK_EXPECT(all_are(3, y, -7.0), "y written by a refused product");
  int64_t rp64[4] = {-1, -1, -1, -1}, ci64[7];
  double vv[7];
  PK_EXPECT_CODE(ctx, pkrylov_operator_get_csr(A, rp64, ci64, vv), PKRYLOV_ERR_INTERNAL);
  PK_EXPECT(pk_test_msg_has(ctx, "799") && rp64[0] == -1, "get_csr: message, or rowptr written");
  A->type = PKRYLOV_OPERATOR_CSR;
  PK_REQUIRE_OK(ctx, pkrylov_operator_apply(A, PKRYLOV_MEM_HOST, x, y));
  PK_EXPECT(y[0] == 2.0 && y[1] == 4.0 && y[2] == 10.0, "A x = %g %g %g", y[0], y[1], y[2]);
  pkrylov_operator_destroy(&A);
  pkrylov_context_destroy(&ctx);
  PK_TEST_END();
}

/** A column preconditioner built on an operator of unknown type: the entries are not read as a thin shell. */
PK_TEST_CASE(column_setup) {
  pkrylov_context ctx;
  PK_REQUIRE_OK(NULL, pk_test_context_create(&ctx));
  pkrylov_thinshell_params p;
  PK_REQUIRE_OK(ctx, pkrylov_thinshell_params_default(4, 3, 5, &p));
  pkrylov_operator A;
  PK_REQUIRE_OK(ctx, pkrylov_operator_create_thinshell(ctx, &p, &A));
  pkrylov_precond M = NULL;
  A->type = bad_op_type;
  PK_EXPECT_CODE(ctx, pkrylov_precond_create(ctx, A, PKRYLOV_PRECOND_COLUMN, 0, PKRYLOV_LAYOUT_AUTO, &M),
                 PKRYLOV_ERR_INTERNAL);
  PK_EXPECT(pk_test_msg_has(ctx, "799"), "message");
  PK_EXPECT(M == NULL, "a preconditioner from a refused call");
  A->type = PKRYLOV_OPERATOR_THINSHELL;
  PK_REQUIRE_OK(ctx, pkrylov_precond_create(ctx, A, PKRYLOV_PRECOND_COLUMN, 0, PKRYLOV_LAYOUT_AUTO, &M));
  pkrylov_precond_destroy(&M);
  pkrylov_operator_destroy(&A);
  pkrylov_context_destroy(&ctx);
  PK_TEST_END();
}

/** A Jacobi preconditioner of unknown type: its product is refused (the column solve was the fallthrough). */
PK_TEST_CASE(precond_apply) {
  pkrylov_context ctx;
  PK_REQUIRE_OK(NULL, pk_test_context_create(&ctx));
  pkrylov_thinshell_params p;
  PK_REQUIRE_OK(ctx, pkrylov_thinshell_params_default(4, 3, 5, &p));
  pkrylov_operator A;
  PK_REQUIRE_OK(ctx, pkrylov_operator_create_thinshell(ctx, &p, &A));
  pkrylov_precond M;
  PK_REQUIRE_OK(ctx, pkrylov_precond_create(ctx, A, PKRYLOV_PRECOND_JACOBI, 0, PKRYLOV_LAYOUT_AUTO, &M));
  const int64_t n = 4 * 3 * 5;
  double r[60], z[60];
  fill(n, r, 1.0);
  fill(n, z, -7.0);
  M->type = bad_pc_type;
  PK_EXPECT_CODE(ctx, pkrylov_precond_apply(M, PKRYLOV_MEM_HOST, r, z), PKRYLOV_ERR_INTERNAL);
  PK_EXPECT(pk_test_msg_has(ctx, "499") && pk_test_msg_has(ctx, "pkrylov_precond_apply"), "message");
  PK_EXPECT(all_are(n, z, -7.0), "z written by a refused product");
  M->type = PKRYLOV_PRECOND_JACOBI;
  PK_REQUIRE_OK(ctx, pkrylov_precond_apply(M, PKRYLOV_MEM_HOST, r, z));
  PK_EXPECT(z[0] > 0.0 && isfinite(z[0]), "z[0] = %g", z[0]);
  pkrylov_precond_destroy(&M);
  pkrylov_operator_destroy(&A);
  pkrylov_context_destroy(&ctx);
  PK_TEST_END();
}

/**
 * Solves of each family (CG, pipelined CG, BiCGStab, GMRES, SRCG) with the operator's, the preconditioner's
 * or the solver's type overwritten: INTERNAL naming the value, x as it came; restored: converged.
 */
PK_TEST_CASE(solve) {
  pkrylov_context ctx;
  PK_REQUIRE_OK(NULL, pk_test_context_create(&ctx));
  pkrylov_thinshell_params p;
  PK_REQUIRE_OK(ctx, pkrylov_thinshell_params_default(6, 5, 4, &p));
  pkrylov_operator A;
  PK_REQUIRE_OK(ctx, pkrylov_operator_create_thinshell(ctx, &p, &A));
  pkrylov_precond M;
  PK_REQUIRE_OK(ctx, pkrylov_precond_create(ctx, A, PKRYLOV_PRECOND_COLUMN, 0, PKRYLOV_LAYOUT_AUTO, &M));
  const int64_t n = 6 * 5 * 4;
  double b[120], x[120];
  uint64_t seed = 3;
  for (int64_t i = 0; i < n; i++) b[i] = pk_test_rand(&seed);
  static const int32_t types[5] = {PKRYLOV_SOLVER_CG, PKRYLOV_SOLVER_PIPECG, PKRYLOV_SOLVER_BICGSTAB,
                                   PKRYLOV_SOLVER_GMRES, PKRYLOV_SOLVER_SRCG};
  for (int t = 0; t < 5; t++) {
    pkrylov_solver s;
    PK_REQUIRE_OK(ctx, pkrylov_solver_create(ctx, types[t], A, M, &s));
    PK_REQUIRE_OK(ctx, pkrylov_solver_set_tolerances(s, 1e-8, 0.0));
    PK_REQUIRE_OK(ctx, pkrylov_solver_set_initial_guess_nonzero(s, 1));
    for (int what = 0; what < 3; what++) { /* the operator's, the preconditioner's, the solver's type */
      int32_t *field = what == 0 ? &A->type : what == 1 ? &M->type : &s->type;
      const int32_t keep = *field, bad = what == 0 ? bad_op_type : what == 1 ? bad_pc_type : bad_solver_type;
      char named[16];
      snprintf(named, sizeof named, "%d", (int)bad);
      fill(n, x, 0.25);
      *field = bad;
      PK_EXPECT_CODE(ctx, pkrylov_solver_solve(s, PKRYLOV_MEM_HOST, b, x), PKRYLOV_ERR_INTERNAL);
      PK_EXPECT(pk_test_msg_has(ctx, named) && pk_test_msg_has(ctx, "pkrylov_solver_solve"),
                "type %d, field %d: message", (int)types[t], what);
      PK_EXPECT(all_are(n, x, 0.25), "type %d, field %d: x changed by a refused solve", (int)types[t], what);
      *field = keep;
    }
    pkrylov_result res;
    PK_REQUIRE_OK(ctx, pkrylov_solver_solve(s, PKRYLOV_MEM_HOST, b, x));
    PK_REQUIRE_OK(ctx, pkrylov_solver_get_result(s, &res));
    PK_EXPECT(res.converged && pk_test_true_relres(A, b, x) <= 1e-7, "type %d restored: %s", (int)types[t],
              pkrylov_reason_string(res.reason));
    pkrylov_solver_destroy(&s);
  }
  pkrylov_precond_destroy(&M);
  pkrylov_operator_destroy(&A);
  pkrylov_context_destroy(&ctx);
  PK_TEST_END();
}

PK_TEST_MAIN(PK_TEST_ENTRY(operator_apply), PK_TEST_ENTRY(column_setup), PK_TEST_ENTRY(precond_apply),
             PK_TEST_ENTRY(solve))

/**
 * @file t100-csr.c
 * @brief CSR operators: creation (32/64-bit, base 0/1, unsorted rows), apply against a plain loop written
 *        here, CSR export round trip, and every bad input with its specific code and message.
 */
#include <string.h>

#include "pk_test.h"

/* A 5x5 nonsymmetric matrix written by hand (0-based, sorted), with an explicit zero (row 2, col 4)
 * and an empty row (row 3):
 *   [ 4  -1   0   0   2 ]
 *   [ 0   5   0  -2   0 ]
 *   [ 1   0   3   0   0 ]   <- plus an explicit 0.0 at (2,4)
 *   [ 0   0   0   0   0 ]
 *   [ 0   7   0   0  -6 ] */
#define N5 5
static const int32_t rp5[N5 + 1] = {0, 3, 5, 8, 8, 10};
static const int32_t ci5[10] = {0, 1, 4, 1, 3, 0, 2, 4, 1, 4};
static const double va5[10] = {4, -1, 2, 5, -2, 1, 3, 0.0, 7, -6};
static const double dense5[N5][N5] = {
    {4, -1, 0, 0, 2}, {0, 5, 0, -2, 0}, {1, 0, 3, 0, 0}, {0, 0, 0, 0, 0}, {0, 7, 0, 0, -6}};


/** The call must fail with code, leave the handle NULL, and its message must name `needle`. */
#define EXPECT_FAIL(ctx, call, code, needle, handle)                                               \
  do {                                                                                             \
    PK_EXPECT_CODE(ctx, call, code);                                                               \
    PK_EXPECT(pk_test_msg_has(ctx, needle), "message must name %s", needle);                               \
    PK_EXPECT((handle) == NULL, "handle modified on error");                                        \
  } while (0)

/** Export A and compare with the dense 5x5 reference entry by entry (structure and values). */
static void check_export5(pkrylov_operator A) {
  int64_t n = 0, nnz = 0, rp[N5 + 1], ci[16];
  int32_t type = 0, nx = -1, ny = -1, nz = -1;
  double v[16];
  PK_EXPECT(pkrylov_operator_get_info(A, &n, &nnz, &type, &nx, &ny, &nz) == 0, "get_info");
  PK_EXPECT(n == N5 && nnz == 10 && type == PKRYLOV_OPERATOR_CSR, "n %lld nnz %lld type %d", (long long)n,
            (long long)nnz, type);
  PK_EXPECT(nx == 0 && ny == 0 && nz == 0, "grid of a CSR operator must be 0");
  PK_EXPECT(pkrylov_operator_get_csr(A, rp, ci, v) == 0, "get_csr");
  PK_EXPECT(rp[0] == 0 && rp[N5] == 10, "rowptr ends");
  for (int r = 0; r < N5; r++) {
    PK_EXPECT(rp[r + 1] - rp[r] == rp5[r + 1] - rp5[r], "row %d length", r);
    for (int64_t p = rp[r]; p < rp[r + 1]; p++) {
      if (p > rp[r]) PK_EXPECT(ci[p] > ci[p - 1], "row %d columns not sorted", r);
      PK_EXPECT(ci[p] >= 0 && ci[p] < N5, "column range");
      if (ci[p] >= 0 && ci[p] < N5)
        PK_EXPECT(v[p] == dense5[r][ci[p]], "value (%d,%lld)", r, (long long)ci[p]);
    }
  }
}

/** y = A x through the operator vs the dense reference loop. */
static void check_apply5(pkrylov_operator A) {
  double x[N5], y[N5], yref[N5];
  uint64_t s = 11;
  for (int i = 0; i < N5; i++) x[i] = pk_test_rand(&s);
  for (int i = 0; i < N5; i++) {
    yref[i] = 0;
    for (int j = 0; j < N5; j++) yref[i] += dense5[i][j] * x[j];
  }
  PK_EXPECT(pkrylov_operator_apply(A, PKRYLOV_MEM_HOST, x, y) == 0, "apply");
  for (int i = 0; i < N5; i++) PK_EXPECT_NEAR(y[i], yref[i], 1e-14 * (1 + fabs(yref[i])));
}

PK_TEST_CASE(apply_and_export) {
  pkrylov_context ctx;
  pkrylov_operator A = NULL;
  PK_REQUIRE_OK(NULL, pkrylov_context_create(PKRYLOV_BACKEND_CPU, &ctx));
  PK_REQUIRE_OK(ctx, pkrylov_operator_create_csr(ctx, N5, 0, rp5, ci5, va5, &A));
  check_export5(A);
  check_apply5(A);
  /* the context refuses to go while the operator lives */
  PK_EXPECT_CODE(ctx, pkrylov_context_destroy(&ctx), PKRYLOV_ERR_INVALID_STATE);
  PK_REQUIRE_OK(ctx, pkrylov_operator_destroy(&A));
  PK_EXPECT(A == NULL, "destroy must NULL the handle");
  PK_REQUIRE_OK(NULL, pkrylov_context_destroy(&ctx));
  PK_TEST_END();
}

PK_TEST_CASE(unsorted_rows_sorted_on_export) {
  /* rows given in scrambled column order (values travel with their columns) */
  const int32_t ci[10] = {4, 0, 1, 3, 1, 4, 2, 0, 4, 1};
  const double va[10] = {2, 4, -1, -2, 5, 0.0, 3, 1, -6, 7};
  pkrylov_context ctx;
  pkrylov_operator A = NULL;
  PK_REQUIRE_OK(NULL, pkrylov_context_create(PKRYLOV_BACKEND_CPU, &ctx));
  PK_REQUIRE_OK(ctx, pkrylov_operator_create_csr(ctx, N5, 0, rp5, ci, va, &A));
  check_export5(A);
  check_apply5(A);
  PK_REQUIRE_OK(ctx, pkrylov_operator_destroy(&A));
  PK_REQUIRE_OK(NULL, pkrylov_context_destroy(&ctx));
  PK_TEST_END();
}

PK_TEST_CASE(csr64_equals_csr32) {
  int64_t rp[N5 + 1], ci[10];
  for (int i = 0; i <= N5; i++) rp[i] = rp5[i];
  for (int i = 0; i < 10; i++) ci[i] = ci5[i];
  pkrylov_context ctx;
  pkrylov_operator A = NULL;
  PK_REQUIRE_OK(NULL, pkrylov_context_create(PKRYLOV_BACKEND_CPU, &ctx));
  PK_REQUIRE_OK(ctx, pkrylov_operator_create_csr64(ctx, N5, 0, rp, ci, va5, &A));
  check_export5(A);
  check_apply5(A);
  PK_REQUIRE_OK(ctx, pkrylov_operator_destroy(&A));
  PK_REQUIRE_OK(NULL, pkrylov_context_destroy(&ctx));
  PK_TEST_END();
}

PK_TEST_CASE(index_base_one) {
  int32_t rp[N5 + 1], ci[10];
  int64_t rp64[N5 + 1], ci64[10];
  for (int i = 0; i <= N5; i++) rp[i] = rp5[i] + 1, rp64[i] = rp5[i] + 1;
  for (int i = 0; i < 10; i++) ci[i] = ci5[i] + 1, ci64[i] = ci5[i] + 1;
  pkrylov_context ctx;
  pkrylov_operator A = NULL, B = NULL;
  PK_REQUIRE_OK(NULL, pkrylov_context_create(PKRYLOV_BACKEND_CPU, &ctx));
  PK_REQUIRE_OK(ctx, pkrylov_operator_create_csr(ctx, N5, 1, rp, ci, va5, &A));
  PK_REQUIRE_OK(ctx, pkrylov_operator_create_csr64(ctx, N5, 1, rp64, ci64, va5, &B));
  check_export5(A);
  check_apply5(A);
  check_export5(B);
  PK_REQUIRE_OK(ctx, pkrylov_operator_destroy(&A));
  PK_REQUIRE_OK(ctx, pkrylov_operator_destroy(&B));
  PK_REQUIRE_OK(NULL, pkrylov_context_destroy(&ctx));
  PK_TEST_END();
}

PK_TEST_CASE(larger_random_apply) {
  /* a random sparse pattern larger than one row chunk, apply vs a plain loop over the input arrays */
  const int32_t n = 9001;
  int32_t *rp = malloc(sizeof(int32_t) * (n + 1)), *ci = malloc(sizeof(int32_t) * 6 * n);
  double *va = malloc(sizeof(double) * 6 * n), *x = malloc(sizeof(double) * n);
  double *y = malloc(sizeof(double) * n), *yref = malloc(sizeof(double) * n);
  uint64_t s = 5;
  rp[0] = 0;
  for (int32_t r = 0; r < n; r++) {
    int32_t cnt = 0;
    for (int32_t off = -2; off <= 2; off++) { /* distinct columns r-2..r+2 (wrapped), shuffled start */
      int32_t c = (r + 3 * off + 7 * n) % n;
      ci[rp[r] + cnt] = c;
      va[rp[r] + cnt] = pk_test_rand(&s);
      cnt++;
    }
    rp[r + 1] = rp[r] + cnt;
  }
  for (int32_t i = 0; i < n; i++) x[i] = pk_test_rand(&s);
  for (int32_t r = 0; r < n; r++) {
    yref[r] = 0;
    for (int32_t p = rp[r]; p < rp[r + 1]; p++) yref[r] += va[p] * x[ci[p]];
  }
  pkrylov_context ctx;
  pkrylov_operator A = NULL;
  PK_REQUIRE_OK(NULL, pkrylov_context_create(PKRYLOV_BACKEND_CPU, &ctx));
  PK_REQUIRE_OK(ctx, pkrylov_operator_create_csr(ctx, n, 0, rp, ci, va, &A));
  PK_REQUIRE_OK(ctx, pkrylov_operator_apply(A, PKRYLOV_MEM_HOST, x, y));
  PK_EXPECT(pk_test_rel_diff(n, y, yref) < 1e-14, "rel diff %g", pk_test_rel_diff(n, y, yref));
  PK_REQUIRE_OK(ctx, pkrylov_operator_destroy(&A));
  PK_REQUIRE_OK(NULL, pkrylov_context_destroy(&ctx));
  free(rp), free(ci), free(va), free(x), free(y), free(yref);
  PK_TEST_END();
}

/* ---- bad inputs ---------------------------------------------------------------------------------- */

PK_TEST_CASE(bad_null_ctx) {
  pkrylov_operator A = NULL;
  PK_EXPECT_CODE(NULL, pkrylov_operator_create_csr(NULL, N5, 0, rp5, ci5, va5, &A), PKRYLOV_ERR_NULL_POINTER);
  PK_EXPECT(pk_test_msg_has(NULL, "'ctx'"), "orphan message names ctx");
  PK_EXPECT(A == NULL, "handle modified");
  int64_t rp[N5 + 1] = {0}, ci[10] = {0};
  PK_EXPECT_CODE(NULL, pkrylov_operator_create_csr64(NULL, N5, 0, rp, ci, va5, &A), PKRYLOV_ERR_NULL_POINTER);
  PK_EXPECT(pk_test_msg_has(NULL, "'ctx'"), "orphan message names ctx");
  PK_TEST_END();
}

PK_TEST_CASE(bad_null_arrays) {
  pkrylov_context ctx;
  pkrylov_operator A = NULL;
  PK_REQUIRE_OK(NULL, pkrylov_context_create(PKRYLOV_BACKEND_CPU, &ctx));
  EXPECT_FAIL(ctx, pkrylov_operator_create_csr(ctx, N5, 0, NULL, ci5, va5, &A), PKRYLOV_ERR_NULL_POINTER,
              "'rowptr'", A);
  EXPECT_FAIL(ctx, pkrylov_operator_create_csr(ctx, N5, 0, rp5, NULL, va5, &A), PKRYLOV_ERR_NULL_POINTER,
              "'colind'", A);
  EXPECT_FAIL(ctx, pkrylov_operator_create_csr(ctx, N5, 0, rp5, ci5, NULL, &A), PKRYLOV_ERR_NULL_POINTER,
              "'values'", A);
  PK_EXPECT_CODE(ctx, pkrylov_operator_create_csr(ctx, N5, 0, rp5, ci5, va5, NULL), PKRYLOV_ERR_NULL_POINTER);
  PK_EXPECT(pk_test_msg_has(ctx, "'A'"), "names A");
  PK_REQUIRE_OK(NULL, pkrylov_context_destroy(&ctx)); /* nothing leaked into live_objects */
  PK_TEST_END();
}

PK_TEST_CASE(bad_size) {
  pkrylov_context ctx;
  pkrylov_operator A = NULL;
  const int32_t rp0[1] = {0};
  const int64_t rp64[1] = {0}, ci64[1] = {0};
  PK_REQUIRE_OK(NULL, pkrylov_context_create(PKRYLOV_BACKEND_CPU, &ctx));
  EXPECT_FAIL(ctx, pkrylov_operator_create_csr(ctx, 0, 0, rp0, ci5, va5, &A), PKRYLOV_ERR_INVALID_SIZE, "'n'",
              A);
  EXPECT_FAIL(ctx, pkrylov_operator_create_csr(ctx, -3, 0, rp0, ci5, va5, &A), PKRYLOV_ERR_INVALID_SIZE,
              "'n' = -3", A);
  EXPECT_FAIL(ctx, pkrylov_operator_create_csr64(ctx, -1, 0, rp64, ci64, va5, &A), PKRYLOV_ERR_INVALID_SIZE,
              "'n'", A);
  PK_REQUIRE_OK(NULL, pkrylov_context_destroy(&ctx));
  PK_TEST_END();
}

PK_TEST_CASE(bad_index_base) {
  pkrylov_context ctx;
  pkrylov_operator A = NULL;
  PK_REQUIRE_OK(NULL, pkrylov_context_create(PKRYLOV_BACKEND_CPU, &ctx));
  EXPECT_FAIL(ctx, pkrylov_operator_create_csr(ctx, N5, 2, rp5, ci5, va5, &A), PKRYLOV_ERR_INVALID_VALUE,
              "'index_base'", A);
  EXPECT_FAIL(ctx, pkrylov_operator_create_csr(ctx, N5, -1, rp5, ci5, va5, &A), PKRYLOV_ERR_INVALID_VALUE,
              "'index_base'", A);
  PK_REQUIRE_OK(NULL, pkrylov_context_destroy(&ctx));
  PK_TEST_END();
}

PK_TEST_CASE(bad_rowptr_start) {
  pkrylov_context ctx;
  pkrylov_operator A = NULL;
  int32_t rp[N5 + 1];
  memcpy(rp, rp5, sizeof rp);
  rp[0] = 1; /* base 0 but rowptr[0] = 1 */
  PK_REQUIRE_OK(NULL, pkrylov_context_create(PKRYLOV_BACKEND_CPU, &ctx));
  EXPECT_FAIL(ctx, pkrylov_operator_create_csr(ctx, N5, 0, rp, ci5, va5, &A), PKRYLOV_ERR_INDEX_OUT_OF_RANGE,
              "'rowptr'", A);
  /* base 1 with a 0-based rowptr */
  EXPECT_FAIL(ctx, pkrylov_operator_create_csr(ctx, N5, 1, rp5, ci5, va5, &A), PKRYLOV_ERR_INDEX_OUT_OF_RANGE,
              "rowptr[0]", A);
  PK_REQUIRE_OK(NULL, pkrylov_context_destroy(&ctx));
  PK_TEST_END();
}

PK_TEST_CASE(bad_rowptr_decreasing) {
  pkrylov_context ctx;
  pkrylov_operator A = NULL;
  const int32_t rp[N5 + 1] = {0, 3, 5, 4, 8, 10}; /* rowptr[3] < rowptr[2]: row 2 */
  PK_REQUIRE_OK(NULL, pkrylov_context_create(PKRYLOV_BACKEND_CPU, &ctx));
  EXPECT_FAIL(ctx, pkrylov_operator_create_csr(ctx, N5, 0, rp, ci5, va5, &A), PKRYLOV_ERR_INDEX_OUT_OF_RANGE,
              "'rowptr' decreases at row 2", A);
  PK_REQUIRE_OK(NULL, pkrylov_context_destroy(&ctx));
  PK_TEST_END();
}

PK_TEST_CASE(bad_column_range) {
  pkrylov_context ctx;
  pkrylov_operator A = NULL;
  int32_t ci[10], rp1[N5 + 1], ci1[10];
  PK_REQUIRE_OK(NULL, pkrylov_context_create(PKRYLOV_BACKEND_CPU, &ctx));
  memcpy(ci, ci5, sizeof ci);
  ci[4] = N5; /* row 1, position 4: column n */
  EXPECT_FAIL(ctx, pkrylov_operator_create_csr(ctx, N5, 0, rp5, ci, va5, &A), PKRYLOV_ERR_INDEX_OUT_OF_RANGE,
              "'colind'", A);
  PK_EXPECT(pk_test_msg_has(ctx, "colind[4]") && pk_test_msg_has(ctx, "row 1"), "names position and row");
  memcpy(ci, ci5, sizeof ci);
  ci[0] = -1;
  EXPECT_FAIL(ctx, pkrylov_operator_create_csr(ctx, N5, 0, rp5, ci, va5, &A), PKRYLOV_ERR_INDEX_OUT_OF_RANGE,
              "colind[0]", A);
  /* base 1: 0 (< base) and n + 1 (>= n + base) */
  for (int i = 0; i <= N5; i++) rp1[i] = rp5[i] + 1;
  for (int i = 0; i < 10; i++) ci1[i] = ci5[i] + 1;
  ci1[9] = 0;
  EXPECT_FAIL(ctx, pkrylov_operator_create_csr(ctx, N5, 1, rp1, ci1, va5, &A), PKRYLOV_ERR_INDEX_OUT_OF_RANGE,
              "colind[9]", A);
  ci1[9] = N5 + 1;
  EXPECT_FAIL(ctx, pkrylov_operator_create_csr(ctx, N5, 1, rp1, ci1, va5, &A), PKRYLOV_ERR_INDEX_OUT_OF_RANGE,
              "'colind'", A);
  ci1[9] = N5; /* the largest valid 1-based column */
  PK_REQUIRE_OK(ctx, pkrylov_operator_create_csr(ctx, N5, 1, rp1, ci1, va5, &A));
  PK_REQUIRE_OK(ctx, pkrylov_operator_destroy(&A));
  PK_REQUIRE_OK(NULL, pkrylov_context_destroy(&ctx));
  PK_TEST_END();
}

PK_TEST_CASE(bad_duplicate) {
  pkrylov_context ctx;
  pkrylov_operator A = NULL;
  int32_t ci[10];
  memcpy(ci, ci5, sizeof ci);
  ci[7] = 0; /* row 2 = {0, 2, 0}: (2,0) twice, not adjacent in the input */
  PK_REQUIRE_OK(NULL, pkrylov_context_create(PKRYLOV_BACKEND_CPU, &ctx));
  EXPECT_FAIL(ctx, pkrylov_operator_create_csr(ctx, N5, 0, rp5, ci, va5, &A), PKRYLOV_ERR_DUPLICATE_ENTRY,
              "(row 2, column 0)", A);
  PK_REQUIRE_OK(NULL, pkrylov_context_destroy(&ctx)); /* the half-built copy was freed, not counted */
  PK_TEST_END();
}

PK_TEST_CASE(bad_not_finite) {
  pkrylov_context ctx;
  pkrylov_operator A = NULL;
  double va[10];
  PK_REQUIRE_OK(NULL, pkrylov_context_create(PKRYLOV_BACKEND_CPU, &ctx));
  memcpy(va, va5, sizeof va);
  va[6] = NAN; /* row 2, column 2 */
  EXPECT_FAIL(ctx, pkrylov_operator_create_csr(ctx, N5, 0, rp5, ci5, va, &A), PKRYLOV_ERR_NOT_FINITE,
              "'values'", A);
  PK_EXPECT(pk_test_msg_has(ctx, "row 2, column 2"), "names row and column");
  memcpy(va, va5, sizeof va);
  va[9] = -INFINITY;
  EXPECT_FAIL(ctx, pkrylov_operator_create_csr(ctx, N5, 0, rp5, ci5, va, &A), PKRYLOV_ERR_NOT_FINITE,
              "row 4, column 4", A);
  PK_REQUIRE_OK(NULL, pkrylov_context_destroy(&ctx));
  PK_TEST_END();
}

PK_TEST_CASE(bad_apply_args) {
  pkrylov_context ctx;
  pkrylov_operator A = NULL;
  double x[N5] = {1, 2, 3, 4, 5}, y[N5] = {0}, big[2 * N5] = {0};
  PK_REQUIRE_OK(NULL, pkrylov_context_create(PKRYLOV_BACKEND_CPU, &ctx));
  PK_REQUIRE_OK(ctx, pkrylov_operator_create_csr(ctx, N5, 0, rp5, ci5, va5, &A));
  PK_EXPECT_CODE(ctx, pkrylov_operator_apply(A, PKRYLOV_MEM_DEVICE, x, y), PKRYLOV_ERR_MEMTYPE);
  PK_EXPECT(pk_test_msg_has(ctx, "'mem'"), "names mem");
  PK_EXPECT_CODE(ctx, pkrylov_operator_apply(A, 12345, x, y), PKRYLOV_ERR_INVALID_VALUE);
  PK_EXPECT(pk_test_msg_has(ctx, "'mem'"), "names mem");
  PK_EXPECT_CODE(ctx, pkrylov_operator_apply(A, PKRYLOV_MEM_HOST, x, x), PKRYLOV_ERR_ALIASING);
  PK_EXPECT(pk_test_msg_has(ctx, "'x'") && pk_test_msg_has(ctx, "'y'"), "names x and y");
  /* partial overlap is aliasing too */
  PK_EXPECT_CODE(ctx, pkrylov_operator_apply(A, PKRYLOV_MEM_HOST, big, big + 2), PKRYLOV_ERR_ALIASING);
  PK_EXPECT_CODE(ctx, pkrylov_operator_apply(A, PKRYLOV_MEM_HOST, NULL, y), PKRYLOV_ERR_NULL_POINTER);
  PK_EXPECT(pk_test_msg_has(ctx, "'x'"), "names x");
  PK_EXPECT_CODE(ctx, pkrylov_operator_apply(A, PKRYLOV_MEM_HOST, x, NULL), PKRYLOV_ERR_NULL_POINTER);
  PK_EXPECT(pk_test_msg_has(ctx, "'y'"), "names y");
  for (int i = 0; i < N5; i++) PK_EXPECT(y[i] == 0, "y modified by a failed apply");
  PK_EXPECT_CODE(NULL, pkrylov_operator_apply(NULL, PKRYLOV_MEM_HOST, x, y), PKRYLOV_ERR_NULL_POINTER);
  PK_EXPECT(pk_test_msg_has(NULL, "'A'"), "orphan message names A");
  int64_t rp[N5 + 1], ci[16];
  double v[16];
  PK_EXPECT_CODE(ctx, pkrylov_operator_get_csr(A, NULL, ci, v), PKRYLOV_ERR_NULL_POINTER);
  PK_EXPECT(pk_test_msg_has(ctx, "'rowptr'"), "names rowptr");
  PK_EXPECT_CODE(NULL, pkrylov_operator_get_csr(NULL, rp, ci, v), PKRYLOV_ERR_NULL_POINTER);
  PK_EXPECT_CODE(NULL, pkrylov_operator_get_info(NULL, NULL, NULL, NULL, NULL, NULL, NULL),
                 PKRYLOV_ERR_NULL_POINTER);
  PK_REQUIRE_OK(ctx, pkrylov_operator_destroy(&A));
  PK_REQUIRE_OK(NULL, pkrylov_context_destroy(&ctx));
  PK_TEST_END();
}

PK_TEST_CASE(destroy_null) {
  PK_EXPECT_CODE(NULL, pkrylov_operator_destroy(NULL), PKRYLOV_ERR_NULL_POINTER);
  PK_EXPECT(pk_test_msg_has(NULL, "'A'"), "names A");
  pkrylov_operator A = NULL;
  PK_EXPECT_CODE(NULL, pkrylov_operator_destroy(&A), PKRYLOV_SUCCESS);
  PK_EXPECT(A == NULL, "stays NULL");
  PK_TEST_END();
}

PK_TEST_MAIN(PK_TEST_ENTRY(apply_and_export), PK_TEST_ENTRY(unsorted_rows_sorted_on_export),
             PK_TEST_ENTRY(csr64_equals_csr32), PK_TEST_ENTRY(index_base_one),
             PK_TEST_ENTRY(larger_random_apply), PK_TEST_ENTRY(bad_null_ctx), PK_TEST_ENTRY(bad_null_arrays),
             PK_TEST_ENTRY(bad_size), PK_TEST_ENTRY(bad_index_base), PK_TEST_ENTRY(bad_rowptr_start),
             PK_TEST_ENTRY(bad_rowptr_decreasing), PK_TEST_ENTRY(bad_column_range),
             PK_TEST_ENTRY(bad_duplicate), PK_TEST_ENTRY(bad_not_finite), PK_TEST_ENTRY(bad_apply_args),
             PK_TEST_ENTRY(destroy_null))

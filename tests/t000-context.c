/**
 * @file t000-context.c
 * @brief Contexts, backends, version, status and reason strings, the error message machinery.
 */
#include <string.h>

#include "pk_test.h"

PK_TEST_CASE(create_cpu_and_auto) {
  pkrylov_context ctx;
  int32_t b;
  PK_REQUIRE_OK(NULL, pkrylov_context_create(PKRYLOV_BACKEND_CPU, &ctx));
  PK_REQUIRE_OK(ctx, pkrylov_context_get_backend(ctx, &b));
  PK_EXPECT(b == PKRYLOV_BACKEND_CPU, "backend %d", b);
  PK_REQUIRE_OK(ctx, pkrylov_context_destroy(&ctx));
  PK_EXPECT(ctx == NULL, "handle not cleared");
  PK_REQUIRE_OK(NULL, pkrylov_context_create(PKRYLOV_BACKEND_AUTO, &ctx));
  PK_REQUIRE_OK(ctx, pkrylov_context_get_backend(ctx, &b));
  PK_EXPECT(b == PKRYLOV_BACKEND_CPU || b == PKRYLOV_BACKEND_CUDA, "AUTO resolved to %d", b);
  if (!pkrylov_has_cuda()) PK_EXPECT(b == PKRYLOV_BACKEND_CPU, "AUTO without CUDA must be CPU, got %d", b);
  PK_REQUIRE_OK(ctx, pkrylov_context_destroy(&ctx));
  PK_REQUIRE_OK(NULL, pkrylov_context_destroy(&ctx)); /* NULL handle: no-op */
  PK_TEST_END();
}

PK_TEST_CASE(bad_backend) {
  pkrylov_context ctx = (pkrylov_context)0x1;
  PK_EXPECT_CODE(NULL, pkrylov_context_create(7, &ctx), PKRYLOV_ERR_INVALID_VALUE);
  PK_EXPECT(strstr(pkrylov_last_error_message(), "'backend'"), "message '%s'", pkrylov_last_error_message());
  PK_EXPECT(ctx == NULL, "handle not cleared on error");
  PK_EXPECT_CODE(NULL, pkrylov_context_create(PKRYLOV_MEM_HOST, &ctx), PKRYLOV_ERR_INVALID_VALUE);
  PK_EXPECT_CODE(NULL, pkrylov_context_create(PKRYLOV_BACKEND_CPU, NULL), PKRYLOV_ERR_NULL_POINTER);
  PK_EXPECT(strstr(pkrylov_last_error_message(), "'ctx'"), "message '%s'", pkrylov_last_error_message());
  PK_TEST_END();
}

/* Without CUDA compiled in, or (until the CUDA solvers land) with it, a CUDA context is refused clearly. */
PK_TEST_CASE(cuda_unavailable) {
  pkrylov_context ctx = NULL;
  const int e = pkrylov_context_create(PKRYLOV_BACKEND_CUDA, &ctx);
  if (e == PKRYLOV_SUCCESS) { /* a CUDA build on a machine with a GPU: nothing to check here */
    int32_t be = 0;
    PK_REQUIRE_OK(ctx, pkrylov_context_get_backend(ctx, &be));
    PK_EXPECT(be == PKRYLOV_BACKEND_CUDA && pkrylov_has_cuda(), "backend %d", be);
    PK_REQUIRE_OK(NULL, pkrylov_context_destroy(&ctx));
    return pk_test_failures ? PK_FAIL : PK_SKIP;
  }
  PK_EXPECT_CODE(NULL, e, PKRYLOV_ERR_BACKEND_UNAVAILABLE);
  PK_EXPECT(strstr(pkrylov_last_error_message(), "CUDA"), "message '%s'", pkrylov_last_error_message());
  PK_TEST_END();
}

PK_TEST_CASE(version) {
  int32_t ma = -1, mi = -1, pa = -1;
  PK_REQUIRE_OK(NULL, pkrylov_get_version(&ma, &mi, &pa));
  PK_EXPECT(ma == PKRYLOV_VERSION_MAJOR && mi == PKRYLOV_VERSION_MINOR && pa == PKRYLOV_VERSION_PATCH,
            "%d.%d.%d", ma, mi, pa);
  PK_REQUIRE_OK(NULL, pkrylov_get_version(NULL, NULL, NULL));
  PK_EXPECT(PKRYLOV_VERSION_GE(0, 1, 0) && !PKRYLOV_VERSION_GE(99, 0, 0), "version macro");
  PK_TEST_END();
}

/** Every status code has its own non-empty string; unknown codes are reported as such. */
PK_TEST_CASE(error_strings) {
  const char *unknown = pkrylov_error_string(12345);
  PK_EXPECT(strstr(unknown, "unknown"), "'%s'", unknown);
  for (int c = PKRYLOV_ERR_BUSY; c <= PKRYLOV_SUCCESS; c++) { /* PKRYLOV_ERR_BUSY: the lowest code */
    const char *s = pkrylov_error_string(c);
    PK_EXPECT(s && *s && strcmp(s, unknown) != 0, "code %d has no string", c);
    for (int d = PKRYLOV_ERR_BUSY; d < c; d++)
      PK_EXPECT(strcmp(s, pkrylov_error_string(d)) != 0, "codes %d and %d share '%s'", c, d, s);
  }
  const int reasons[] = {PKRYLOV_REASON_NONE, PKRYLOV_CONVERGED_RTOL, PKRYLOV_CONVERGED_ATOL,
                         PKRYLOV_DIVERGED_MAX_ITERATIONS, PKRYLOV_DIVERGED_BREAKDOWN_INDEFINITE_MATRIX,
                         PKRYLOV_DIVERGED_BREAKDOWN_INDEFINITE_PRECOND, PKRYLOV_DIVERGED_NAN,
                         PKRYLOV_DIVERGED_STAGNATION, PKRYLOV_STOPPED_BY_MONITOR};
  for (unsigned i = 0; i < sizeof reasons / sizeof *reasons; i++) {
    PK_EXPECT(strcmp(pkrylov_reason_string(reasons[i]), "unknown") != 0, "reason %d", reasons[i]);
    for (unsigned j = 0; j < i; j++)
      PK_EXPECT(strcmp(pkrylov_reason_string(reasons[i]), pkrylov_reason_string(reasons[j])) != 0,
                "reasons %d and %d share a name", reasons[i], reasons[j]);
  }
  PK_EXPECT(strcmp(pkrylov_reason_string(99), "unknown") == 0, "unknown reason");
  PK_TEST_END();
}

/** An error raised through a context is stored there, copied out, truncated safely and cleared. */
PK_TEST_CASE(context_error_message) {
  pkrylov_context ctx;
  pkrylov_operator A = NULL;
  int32_t code;
  const char *msg;
  char buf[16];
  PK_REQUIRE_OK(NULL, pkrylov_context_create(PKRYLOV_BACKEND_CPU, &ctx));
  PK_REQUIRE_OK(ctx, pkrylov_context_get_last_error(ctx, &code, &msg));
  PK_EXPECT(code == PKRYLOV_SUCCESS && msg[0] == '\0', "fresh context has error %d '%s'", code, msg);
  const int32_t rp[2] = {0, 1}, ci[1] = {0};
  const double v[1] = {1.0};
  PK_EXPECT_CODE(ctx, pkrylov_operator_create_csr(ctx, -4, 0, rp, ci, v, &A), PKRYLOV_ERR_INVALID_SIZE);
  PK_REQUIRE_OK(ctx, pkrylov_context_get_last_error(ctx, &code, &msg));
  PK_EXPECT(code == PKRYLOV_ERR_INVALID_SIZE, "stored code %d", code);
  PK_EXPECT(strstr(msg, "pkrylov_operator_create_csr") && strstr(msg, "'n'"), "message '%s'", msg);
  PK_REQUIRE_OK(ctx, pkrylov_context_get_error_message(ctx, buf, sizeof buf));
  PK_EXPECT(strlen(buf) == sizeof buf - 1 && strncmp(buf, msg, sizeof buf - 1) == 0, "copy '%s'", buf);
  PK_EXPECT_CODE(ctx, pkrylov_context_get_error_message(ctx, buf, 0), PKRYLOV_ERR_INVALID_SIZE);
  PK_EXPECT_CODE(ctx, pkrylov_context_get_error_message(ctx, NULL, 8), PKRYLOV_ERR_NULL_POINTER);
  PK_REQUIRE_OK(ctx, pkrylov_context_clear_error(ctx));
  PK_REQUIRE_OK(ctx, pkrylov_context_get_last_error(ctx, &code, &msg));
  PK_EXPECT(code == 0 && msg[0] == '\0', "not cleared: %d '%s'", code, msg);
  PK_EXPECT_CODE(NULL, pkrylov_context_get_last_error(NULL, &code, &msg), PKRYLOV_ERR_NULL_POINTER);
  PK_EXPECT_CODE(NULL, pkrylov_context_get_backend(ctx, NULL), PKRYLOV_ERR_NULL_POINTER);
  PK_EXPECT_CODE(NULL, pkrylov_context_set_num_threads(NULL, 2), PKRYLOV_ERR_NULL_POINTER);
  PK_REQUIRE_OK(ctx, pkrylov_context_destroy(&ctx));
  PK_TEST_END();
}

PK_TEST_MAIN(PK_TEST_ENTRY(create_cpu_and_auto), PK_TEST_ENTRY(bad_backend), PK_TEST_ENTRY(cuda_unavailable),
             PK_TEST_ENTRY(version), PK_TEST_ENTRY(error_strings), PK_TEST_ENTRY(context_error_message))

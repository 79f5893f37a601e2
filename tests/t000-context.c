/**
 * @file t000-context.c
 * @brief Contexts, backends, version, status and reason strings, the error message machinery.
 */
#include <stdio.h>
#include <stdlib.h>
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

/* One version: the CMake project version (PK_PROJECT_VERSION, passed by tests/CMakeLists.txt) is the header's
   PKRYLOV_VERSION_* and the library's at run time. */
PK_TEST_CASE(version_matches_cmake) {
  char hdr[64];
  snprintf(hdr, sizeof hdr, "%d.%d.%d", PKRYLOV_VERSION_MAJOR, PKRYLOV_VERSION_MINOR, PKRYLOV_VERSION_PATCH);
  PK_EXPECT(strcmp(hdr, PK_PROJECT_VERSION) == 0, "pkrylov.h says %s, CMakeLists.txt project() says %s", hdr,
            PK_PROJECT_VERSION);
  int32_t ma = -1, mi = -1, pa = -1;
  PK_REQUIRE_OK(NULL, pkrylov_get_version(&ma, &mi, &pa));
  char lib[64];
  snprintf(lib, sizeof lib, "%d.%d.%d", (int)ma, (int)mi, (int)pa);
  PK_EXPECT(strcmp(lib, PK_PROJECT_VERSION) == 0, "library %s, project %s", lib, PK_PROJECT_VERSION);
  PK_TEST_END();
}

/* The parts a build has, as the library reports them, are what CMake configured (PK_BUILD_*). */
PK_TEST_CASE(features_match_cmake) {
  PK_EXPECT(pkrylov_has_cuda() == PK_BUILD_CUDA, "has_cuda %d, CMake %d", pkrylov_has_cuda(), PK_BUILD_CUDA);
  PK_EXPECT(pkrylov_has_mpi() == PK_BUILD_MPI, "has_mpi %d, CMake %d", pkrylov_has_mpi(), PK_BUILD_MPI);
  PK_EXPECT(pkrylov_has_nccl() == PK_BUILD_NCCL, "has_nccl %d, CMake %d", pkrylov_has_nccl(), PK_BUILD_NCCL);
  PK_EXPECT(pkrylov_has_openmp() == PK_BUILD_OPENMP, "has_openmp %d, CMake %d", pkrylov_has_openmp(),
            PK_BUILD_OPENMP);
  PK_TEST_END();
}

/* pkrylov_context_describe: the backend and the thread count a call uses (the test's environment sets
   OMP_NUM_THREADS), the explicit thread count, truncation, and its bad input. */
PK_TEST_CASE(describe) {
  pkrylov_context ctx;
  char buf[256], want[256];
  PK_REQUIRE_OK(NULL, pkrylov_context_create(PKRYLOV_BACKEND_CPU, &ctx));
  PK_REQUIRE_OK(ctx, pkrylov_context_describe(ctx, buf, sizeof buf));
  const char *env = getenv("OMP_NUM_THREADS");
  if (!pkrylov_has_openmp())
    snprintf(want, sizeof want, "CPU backend, 1 thread (built without OpenMP)");
  else if (env && atoi(env) > 0)
    snprintf(want, sizeof want, "CPU backend, %d OpenMP thread%s", atoi(env), atoi(env) == 1 ? "" : "s");
  else
    snprintf(want, sizeof want, "%s", buf); /* OpenMP's own default: only the form is checked below */
  PK_EXPECT(strcmp(buf, want) == 0 && strncmp(buf, "CPU backend, ", 13) == 0, "'%s', expected '%s'", buf,
            want);
  PK_REQUIRE_OK(ctx, pkrylov_context_set_num_threads(ctx, 3));
  PK_REQUIRE_OK(ctx, pkrylov_context_describe(ctx, buf, sizeof buf));
  if (pkrylov_has_openmp())
    PK_EXPECT(strcmp(buf, "CPU backend, 3 OpenMP threads") == 0, "'%s'", buf);
  PK_REQUIRE_OK(ctx, pkrylov_context_set_num_threads(ctx, 1));
  PK_REQUIRE_OK(ctx, pkrylov_context_describe(ctx, buf, sizeof buf));
  if (pkrylov_has_openmp())
    PK_EXPECT(strcmp(buf, "CPU backend, 1 OpenMP thread") == 0, "'%s'", buf);
  char small[8];
  PK_REQUIRE_OK(ctx, pkrylov_context_describe(ctx, small, sizeof small));
  PK_EXPECT(strcmp(small, "CPU bac") == 0, "cut to 8 bytes: '%s'", small);
  PK_REQUIRE_OK(ctx, pkrylov_context_describe(ctx, small, 1));
  PK_EXPECT(small[0] == '\0', "one byte: '%s'", small);
  PK_EXPECT_CODE(ctx, pkrylov_context_describe(ctx, buf, 0), PKRYLOV_ERR_INVALID_SIZE);
  const char *msg = NULL;
  pkrylov_context_get_last_error(ctx, NULL, &msg);
  PK_EXPECT(strstr(msg, "'buflen'"), "message '%s'", msg);
  PK_EXPECT_CODE(ctx, pkrylov_context_describe(ctx, buf, -5), PKRYLOV_ERR_INVALID_SIZE);
  PK_EXPECT_CODE(ctx, pkrylov_context_describe(ctx, NULL, 16), PKRYLOV_ERR_NULL_POINTER);
  pkrylov_context_get_last_error(ctx, NULL, &msg);
  PK_EXPECT(strstr(msg, "'buf'"), "message '%s'", msg);
  PK_EXPECT_CODE(NULL, pkrylov_context_describe(NULL, buf, sizeof buf), PKRYLOV_ERR_NULL_POINTER);
  PK_EXPECT(strstr(pkrylov_last_error_message(), "'ctx'"), "message '%s'", pkrylov_last_error_message());
  PK_REQUIRE_OK(ctx, pkrylov_context_destroy(&ctx));
  PK_TEST_END();
}

/* On a GPU: the CUDA context names its device ("CUDA backend on <name> (device d of n)"); skipped without. */
PK_TEST_CASE(describe_cuda) {
  pkrylov_context ctx = NULL;
  if (!pkrylov_has_cuda() || pkrylov_context_create(PKRYLOV_BACKEND_CUDA, &ctx) != PKRYLOV_SUCCESS)
    return PK_SKIP;
  char buf[256];
  PK_REQUIRE_OK(ctx, pkrylov_context_describe(ctx, buf, sizeof buf));
  int dev = -1, count = -1;
  const char *paren = strrchr(buf, '(');
  PK_EXPECT(strncmp(buf, "CUDA backend on ", 16) == 0 && strlen(buf) > 16 + 1 && paren &&
                sscanf(paren, "(device %d of %d)", &dev, &count) == 2 && dev >= 0 && dev < count,
            "'%s'", buf);
  PK_REQUIRE_OK(ctx, pkrylov_context_destroy(&ctx));
  PK_TEST_END();
}

/** Every status code has its own non-empty string; unknown codes are reported as such. */
PK_TEST_CASE(error_strings) {
  const char *unknown = pkrylov_error_string(12345);
  PK_EXPECT(strstr(unknown, "unknown"), "'%s'", unknown);
  for (int c = PKRYLOV_ERR_BAD_OPTION; c <= PKRYLOV_SUCCESS; c++) { /* PKRYLOV_ERR_BAD_OPTION: the lowest code */
    const char *s = pkrylov_error_string(c);
    PK_EXPECT(s && *s && strcmp(s, unknown) != 0, "code %d has no string", c);
    for (int d = PKRYLOV_ERR_BAD_OPTION; d < c; d++)
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
             PK_TEST_ENTRY(version), PK_TEST_ENTRY(error_strings), PK_TEST_ENTRY(context_error_message),
             PK_TEST_ENTRY(version_matches_cmake), PK_TEST_ENTRY(features_match_cmake),
             PK_TEST_ENTRY(describe), PK_TEST_ENTRY(describe_cuda))

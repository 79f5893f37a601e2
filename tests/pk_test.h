/**
 * @file pk_test.h
 * @brief Minimal test harness: a test program holds cases declared with PK_TEST_CASE(name) at the start
 *        of a line (CMake registers each as its own ctest test) and listed in PK_TEST_MAIN.
 *        A case returns PK_PASS, PK_FAIL or PK_SKIP (exit code 77); checks print only on failure.
 */
#ifndef PK_TEST_H
#define PK_TEST_H

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "pkrylov.h"

#define PK_PASS 0
#define PK_FAIL 1
#define PK_SKIP 77

#define PK_TEST_CASE(name) static int test_##name(void)

/**
 * Backends. A test whose source has a line "PK_TEST_BACKENDS: cpu cuda" (in a comment) runs its cases on
 * every backend the build has: tests/CMakeLists.txt registers each case as "tNNN-object:case" (CPU) and, in
 * CUDA builds, as "tNNN-object:case:cuda" (label cuda), which runs `tNNN-object case cuda`. Such a test
 * creates its contexts with pk_test_context_create() (the backend of the command line, pk_test_backend).
 * The CUDA variant exits 77 (skipped) where no device is visible or the build has no CUDA (the harness
 * checks before the case runs). A case that makes sense on the CPU only is declared PK_TEST_CASE_CPU(name),
 * with the reason in a comment: it is registered for the CPU alone (and skips when run on another backend).
 */
#define PK_TEST_CASE_CPU(name)                                                                      \
  static int test_##name##_cpu_only(void);                                                         \
  static int test_##name(void) {                                                                   \
    return pk_test_backend == PKRYLOV_BACKEND_CPU ? test_##name##_cpu_only() : PK_SKIP;            \
  }                                                                                                \
  static int test_##name##_cpu_only(void)

/** The backend of this run (::PKRYLOV_BACKEND_CPU unless the command line names another). */
extern int pk_test_backend;

/** Create a context on pk_test_backend (pkrylov_context_create's status). */
int pk_test_context_create(pkrylov_context *ctx);

/** 1 when this run's backend is CUDA. */
static inline int pk_test_on_cuda(void) { return pk_test_backend == PKRYLOV_BACKEND_CUDA; }

typedef struct {
  const char *name;
  int (*fn)(void);
} pk_test_entry;

#define PK_TEST_ENTRY(name) {#name, test_##name}

int pk_test_main(int argc, char **argv, const pk_test_entry *entries, int count);

#define PK_TEST_MAIN(...)                                                                          \
  int main(int argc, char **argv) {                                                                \
    static const pk_test_entry entries[] = {__VA_ARGS__};                                          \
    return pk_test_main(argc, argv, entries, (int)(sizeof(entries) / sizeof(entries[0])));         \
  }

/** Count of failed checks in the current case. */
extern int pk_test_failures;

#define PK_EXPECT(cond, ...)                                                                       \
  do {                                                                                             \
    if (!(cond)) {                                                                                 \
      fprintf(stderr, "%s:%d: check failed: %s: ", __FILE__, __LINE__, #cond);                     \
      fprintf(stderr, __VA_ARGS__);                                                                \
      fprintf(stderr, "\n");                                                                       \
      pk_test_failures++;                                                                          \
    }                                                                                              \
  } while (0)

/** The call must return `code`; on mismatch prints both codes and the context message. */
#define PK_EXPECT_CODE(ctx, call, code)                                                            \
  do {                                                                                             \
    int pk_got_ = (call);                                                                          \
    if (pk_got_ != (code)) {                                                                       \
      const char *pk_msg_ = "";                                                                    \
      if (ctx) pkrylov_context_get_last_error((ctx), NULL, &pk_msg_);                              \
      fprintf(stderr, "%s:%d: %s returned %d (%s), expected %d (%s); message: %s\n", __FILE__,     \
              __LINE__, #call, pk_got_, pkrylov_error_string(pk_got_), (int)(code),                \
              pkrylov_error_string(code), pk_msg_);                                                \
      pk_test_failures++;                                                                          \
    }                                                                                              \
  } while (0)

/** Stop the case when cond is false. */
#define PK_REQUIRE(cond, ...)                                                                                \
  do {                                                                                                       \
    if (!(cond)) {                                                                                           \
      PK_EXPECT(0, __VA_ARGS__);                                                                             \
      return PK_FAIL;                                                                                        \
    }                                                                                                        \
  } while (0)

/** The call must succeed; otherwise the case fails at once. */
#define PK_REQUIRE_OK(ctx, call)                                                                   \
  do {                                                                                             \
    int pk_got_ = (call);                                                                          \
    if (pk_got_ != PKRYLOV_SUCCESS) {                                                              \
      const char *pk_msg_ = "";                                                                    \
      if (ctx) pkrylov_context_get_last_error((ctx), NULL, &pk_msg_);                              \
      fprintf(stderr, "%s:%d: %s failed with %d (%s): %s\n", __FILE__, __LINE__, #call, pk_got_,  \
              pkrylov_error_string(pk_got_), pk_msg_);                                             \
      return PK_FAIL;                                                                              \
    }                                                                                              \
  } while (0)

/** |a - b| <= tol */
#define PK_EXPECT_NEAR(a, b, tol)                                                                  \
  PK_EXPECT(fabs((double)(a) - (double)(b)) <= (tol), "%.17g vs %.17g (tol %.3g)", (double)(a),    \
            (double)(b), (double)(tol))

/** Return the case status from the failure count. */
#define PK_TEST_END() return pk_test_failures ? PK_FAIL : PK_PASS

/* ---- helpers shared by the tests (pk_test.c) --------------------------------------------------- */

/** Path of a shared test matrix, or NULL (and a message) when shared/ is not there. */
const char *pk_test_matrix_path(const char *name);
/** Path in the test scratch folder. Returns a static buffer (one at a time). */
const char *pk_test_tmp_path(const char *name);
/** Deterministic pseudo-random numbers in [-1, 1). */
double pk_test_rand(uint64_t *state);
/** ||a - b||_2 / ||b||_2 (||a - b|| when b = 0). */
double pk_test_rel_diff(int64_t n, const double *a, const double *b);
/** ||v||_2 */
/** Rounding bound of a true relative residual ||b - A x|| / ||b|| (any summation order, pk_test.c). */
double pk_test_relres_rounding(pkrylov_operator A, const double *b, const double *x);
double pk_test_norm(int64_t n, const double *v);
/**
 * Dense copy (row-major, n*n, malloc'ed) of an operator through pkrylov_operator_get_csr; NULL on failure.
 */
double *pk_test_dense_from_operator(pkrylov_operator A, int64_t *n_out);
/**
 * Independent reference: x = A^-1 b by LAPACK dgesv on the dense matrix of A (n <= 4000). Returns 0 on
 * success.
 */
int pk_test_dense_solve(pkrylov_operator A, const double *b, double *x);
/** b := A^-1 b by LAPACK dgesv, A column-major n x n (overwritten by its LU factors); returns dgesv's info. */
int pk_test_lapack_solve(int n, double *a, double *b);
/** y = A x by a plain loop over the CSR export of A (independent of pkrylov_operator_apply). */
int pk_test_csr_matvec(pkrylov_operator A, const double *x, double *y);
/** ||b - A x||_2 / ||b||_2 computed with pk_test_csr_matvec. */
double pk_test_true_relres(pkrylov_operator A, const double *b, const double *x);
/**
 * 1 when the last error message of ctx (or the thread-local one when ctx is NULL) contains needle;
 * otherwise prints both and returns 0.
 */
int pk_test_msg_has(pkrylov_context ctx, const char *needle);
/** Run a shell command, return its exit status (or -1). */
int pk_test_system(const char *cmd);

#endif /* PK_TEST_H */

/* outside the guard: a source that includes this header before pk_cuda_test.h (which defines
   PK_TEST_HAVE_CUDART) gets it at the second inclusion */
#if defined(PK_TEST_HAVE_CUDART) && !defined(SKIP_WITHOUT_GPU) /* tests linked with the CUDA runtime */
#include <cuda_runtime_api.h>
/** Skip the case (PK_SKIP) without a device. */
#define SKIP_WITHOUT_GPU()                                    \
  do {                                                        \
    int nd_ = 0;                                              \
    if (cudaGetDeviceCount(&nd_) != cudaSuccess || nd_ < 1) { \
      cudaGetLastError();                                     \
      return PK_SKIP;                                         \
    }                                                         \
  } while (0)
#endif

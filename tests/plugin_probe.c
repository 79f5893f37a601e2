/**
 * @file plugin_probe.c
 * @brief Backends as tables: how a context finds the CUDA backend (the plugin libpkrylov_cuda.so of a
 *        shared build) and what AUTO and CUDA do when it, the driver or a GPU is missing.
 *
 * The program t604-plugin (not named tNNN-*.c: that is the PK_TEST harness's pattern), run by
 * tests/plugin_test.cmake: built without a run path and run with LD_LIBRARY_PATH naming either the build
 * tree (mode "beside": the plugin sits beside libpkrylov.so) or a scratch folder holding a copy of
 * libpkrylov.so alone (mode "alone": the plugin cannot be found). Mode "nocuda": a build without CUDA. Exit 0 on success, 1 on failure (one line per failed check).
 *
 * beside, no GPU (this machine): pkrylov_has_cuda() = 1; AUTO runs on the CPU and says why ("no CUDA device is
 *   visible" or "no usable CUDA driver"); CUDA is PKRYLOV_ERR_BACKEND_UNAVAILABLE with the same reason.
 * beside, a GPU: AUTO runs on CUDA, no reason; CUDA works.
 * alone: pkrylov_has_cuda() = 0; AUTO runs on the CPU, its reason names the plugin that cannot be loaded (the
 *   loader's text); CUDA is PKRYLOV_ERR_BACKEND_UNAVAILABLE with that text.
 * nocuda: AUTO on the CPU "built without CUDA"; CUDA refused naming the configure switch.
 * Every mode: a CPU context's description has no reason, and an AUTO context solves.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pkrylov.h"

static int failures = 0;
#define CHECK(cond, ...)                                                                           \
  do {                                                                                             \
    if (!(cond)) {                                                                                 \
      printf("FAIL line %d: ", __LINE__);                                                          \
      printf(__VA_ARGS__);                                                                         \
      printf("\n");                                                                                \
      failures++;                                                                                  \
    }                                                                                              \
  } while (0)

/* A small solve on ctx: the 1D Laplacian, CG. */
static int solve_small(pkrylov_context ctx) {
  enum { N = 20 };
  int32_t rp[N + 1], ci[3 * N];
  double v[3 * N], b[N], x[N];
  int32_t k = 0;
  for (int i = 0; i < N; i++) {
    rp[i] = k;
    if (i > 0) ci[k] = i - 1, v[k++] = -1.0;
    ci[k] = i, v[k++] = 2.0;
    if (i < N - 1) ci[k] = i + 1, v[k++] = -1.0;
    b[i] = 1.0, x[i] = 0.0;
  }
  rp[N] = k;
  pkrylov_operator A = NULL;
  pkrylov_solver s = NULL;
  pkrylov_result res;
  int e = pkrylov_operator_create_csr(ctx, N, 0, rp, ci, v, &A);
  if (!e) e = pkrylov_solver_create(ctx, PKRYLOV_SOLVER_CG, A, NULL, &s);
  if (!e) e = pkrylov_solver_solve(s, PKRYLOV_MEM_HOST, b, x);
  if (!e) e = pkrylov_solver_get_result(s, &res);
  if (!e && res.reason != PKRYLOV_CONVERGED_RTOL && res.reason != PKRYLOV_CONVERGED_ATOL) {
    printf("the solve ended with %s after %d iterations\n", pkrylov_reason_string(res.reason), (int)res.iterations);
    e = -1000;
  }
  pkrylov_solver_destroy(&s);
  pkrylov_operator_destroy(&A);
  return e;
}

int main(int argc, char **argv) {
  const char *mode = argc > 1 ? argv[1] : "";
  const int beside = strcmp(mode, "beside") == 0, alone = strcmp(mode, "alone") == 0,
            nocuda = strcmp(mode, "nocuda") == 0;
  if (!beside && !alone && !nocuda) {
    fprintf(stderr, "usage: t604-plugin beside|alone|nocuda\n");
    return 2;
  }
  char buf[512];
  /* the CPU: no reason */
  pkrylov_context cpu = NULL;
  CHECK(pkrylov_context_create(PKRYLOV_BACKEND_CPU, &cpu) == 0, "CPU context: %s", pkrylov_last_error_message());
  if (cpu) {
    pkrylov_context_describe(cpu, buf, sizeof buf);
    CHECK(strncmp(buf, "CPU backend, ", 13) == 0 && !strstr(buf, "AUTO"), "CPU context described as '%s'", buf);
    pkrylov_context_destroy(&cpu);
  }

  CHECK(pkrylov_has_cuda() == (beside ? 1 : 0), "pkrylov_has_cuda() = %d in mode %s", (int)pkrylov_has_cuda(),
        mode);
  if (!pkrylov_has_cuda()) CHECK(pkrylov_has_nccl() == 0, "NCCL without the CUDA backend");

  /* AUTO */
  pkrylov_context ctx = NULL;
  int e = pkrylov_context_create(PKRYLOV_BACKEND_AUTO, &ctx);
  CHECK(e == 0, "AUTO context: %d: %s", e, pkrylov_last_error_message());
  int32_t be = -1;
  int gpu = 0;
  if (ctx) {
    pkrylov_context_get_backend(ctx, &be);
    pkrylov_context_describe(ctx, buf, sizeof buf);
    printf("AUTO: %s\n", buf);
    gpu = be == PKRYLOV_BACKEND_CUDA;
    if (gpu) {
      CHECK(beside, "AUTO on CUDA in mode %s", mode);
      CHECK(strncmp(buf, "CUDA backend on ", 16) == 0 && !strstr(buf, "AUTO"), "AUTO on CUDA described as '%s'",
            buf);
    } else {
      CHECK(be == PKRYLOV_BACKEND_CPU, "AUTO resolved to %d", (int)be);
      CHECK(strncmp(buf, "CPU backend, ", 13) == 0 && strstr(buf, " (AUTO: "), "AUTO on the CPU without a reason: '%s'",
            buf);
      if (beside)
        CHECK(strstr(buf, "CUDA device") || strstr(buf, "CUDA driver"),
              "mode beside: the reason should be the device or driver: '%s'", buf);
      if (alone)
        CHECK(strstr(buf, "the CUDA plugin cannot be loaded") && strstr(buf, "libpkrylov_cuda.so"),
              "mode alone: the reason should name the plugin: '%s'", buf);
      if (nocuda) CHECK(strstr(buf, "built without CUDA"), "mode nocuda: '%s'", buf);
      CHECK(strchr(buf, '\n') == NULL, "the reason is one line: '%s'", buf);
    }
    e = solve_small(ctx);
    CHECK(e == 0, "AUTO solve: %d: %s", e, pkrylov_error_string(e));
    pkrylov_context_destroy(&ctx);
  }

  /* CUDA: works on a GPU, else the specific error naming what is missing */
  e = pkrylov_context_create(PKRYLOV_BACKEND_CUDA, &ctx);
  if (gpu) {
    CHECK(e == 0, "CUDA context where AUTO found a GPU: %d: %s", e, pkrylov_last_error_message());
    if (ctx) {
      e = solve_small(ctx);
      CHECK(e == 0, "CUDA solve: %d: %s", e, pkrylov_error_string(e));
      pkrylov_context_destroy(&ctx);
    }
  } else {
    const char *msg = pkrylov_last_error_message();
    printf("CUDA: %d: %s\n", e, msg);
    CHECK(e == PKRYLOV_ERR_BACKEND_UNAVAILABLE && ctx == NULL, "CUDA context without a GPU: %d", e);
    CHECK(strstr(msg, "backend CUDA requested but "), "message '%s'", msg);
    if (beside) CHECK(strstr(msg, "CUDA device") || strstr(msg, "CUDA driver"), "mode beside: '%s'", msg);
    if (alone) CHECK(strstr(msg, "libpkrylov_cuda.so"), "mode alone: '%s'", msg);
    if (nocuda) CHECK(strstr(msg, "-DPKRYLOV_ENABLE_CUDA=ON"), "mode nocuda: '%s'", msg);
  }
  printf("%s: %d failure%s\n", mode, failures, failures == 1 ? "" : "s");
  return failures ? 1 : 0;
}

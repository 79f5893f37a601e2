/**
 * @file t010-options.c
 * @brief The options database: defaults, parsing of every value type, range checks, unknown names and bad
 *        values (PKRYLOV_ERR_BAD_OPTION and its message), the key=value string, solvers inheriting the
 *        context's options and overriding the solver-level ones, context-level names refused on a solver,
 *        the listing, and the environment variable PKRYLOV_OPTIONS (cases env_applied and env_bad run with
 *        it set by tests/CMakeLists.txt; the others without it).
 *
 * The expected defaults and accepted values are written out here from the specification of the options
 * (include/pkrylov.h, docs/design.md), not read from the library's table.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pk_test.h"

/** The option name's value in ctx as text ("" on error). */
static const char *ctx_get(pkrylov_context ctx, const char *name) {
  static char buf[64];
  if (pkrylov_context_get_option(ctx, name, buf, (int32_t)sizeof buf) != PKRYLOV_SUCCESS) buf[0] = '\0';
  return buf;
}

/** The option name's value as solver s sees it ("" on error). */
static const char *solver_get(pkrylov_solver s, const char *name) {
  static char buf[64];
  if (pkrylov_solver_get_option(s, name, buf, (int32_t)sizeof buf) != PKRYLOV_SUCCESS) buf[0] = '\0';
  return buf;
}

/** The last message of ctx. */
static const char *msg_of(pkrylov_context ctx) {
  const char *m = "";
  pkrylov_context_get_last_error(ctx, NULL, &m);
  return m;
}

/** The documented options and their defaults (the specification, not the library's table). */
static const struct {
  const char *name, *def;
} specs[] = {
    {"cuda.bind", "auto"},   {"cuda.csr_format", "auto"}, {"cuda.csr_lanes", "auto"}, {"cuda.kc", "auto"},
    {"cuda.l2pf", "1"},      {"dist.nccl", "1"},          {"dist.edge_comm", "1"},    {"dist.instrument", "0"},
    {"cuda.fold", "auto"},   {"cuda.pdl", "1"},           {"cuda.pipe_none", "1"},    {"cuda.timeline", "0"},
    {"kry.graph", "1"},      {"kry.fuse", "1"},           {"kry.profile", "0"},       {"kry.xfuse", "auto"},
    {"kry.cg", "0"},         {"cuda.l2persist", "auto"},
};
enum { NSPEC = (int)(sizeof specs / sizeof specs[0]) };

/** Every documented option exists with its documented default (no PKRYLOV_OPTIONS in this case's run). */
PK_TEST_CASE(defaults) {
  PK_REQUIRE(getenv("PKRYLOV_OPTIONS") == NULL, "run without PKRYLOV_OPTIONS (it is set: '%s')",
             getenv("PKRYLOV_OPTIONS"));
  pkrylov_context ctx;
  PK_REQUIRE_OK(NULL, pkrylov_context_create(PKRYLOV_BACKEND_CPU, &ctx));
  for (int i = 0; i < NSPEC; i++)
    PK_EXPECT(strcmp(ctx_get(ctx, specs[i].name), specs[i].def) == 0, "%s = '%s', expected '%s'", specs[i].name,
              ctx_get(ctx, specs[i].name), specs[i].def);
  PK_EXPECT(pkrylov_option_count() == NSPEC, "%d options, %d documented", (int)pkrylov_option_count(), NSPEC);
  PK_REQUIRE_OK(ctx, pkrylov_context_destroy(&ctx));
  PK_TEST_END();
}

/** Values of each type are parsed and read back in their canonical form. */
PK_TEST_CASE(set_and_get) {
  pkrylov_context ctx;
  PK_REQUIRE_OK(NULL, pkrylov_context_create(PKRYLOV_BACKEND_CPU, &ctx));
  static const struct {
    const char *name, *value, *back;
  } cases[] = {
      {"kry.graph", "0", "0"},        {"kry.graph", "on", "1"},          {"kry.graph", "false", "0"},
      {"kry.graph", "yes", "1"},      {"dist.nccl", "off", "0"},         {"cuda.kc", "1024", "1024"},
      {"cuda.kc", "1", "1"},          {"cuda.kc", "auto", "auto"},       {"cuda.l2pf", "0", "0"},
      {"cuda.l2pf", "16", "16"},      {"cuda.csr_lanes", "0", "0"},      {"cuda.csr_lanes", "1", "1"},
      {"cuda.csr_lanes", "32", "32"}, {"cuda.csr_lanes", "4", "4"},      {"cuda.csr_lanes", "auto", "auto"},
      {"cuda.csr_format", "csr", "csr"}, {"cuda.csr_format", "dia-nosym", "dia-nosym"},
      {"cuda.csr_format", "dia", "dia"}, {"cuda.fold", "0", "0"},        {"cuda.fold", "1", "1"},
      {"cuda.fold", "auto", "auto"},  {"cuda.bind", "none", "none"},     {"cuda.timeline", "1", "1"},
      {"cuda.l2persist", "0", "0"},   {"cuda.l2persist", "4", "4"},      {"cuda.l2persist", "auto", "auto"},
  };
  for (unsigned i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    PK_EXPECT_CODE(ctx, pkrylov_context_set_option(ctx, cases[i].name, cases[i].value), PKRYLOV_SUCCESS);
    PK_EXPECT(strcmp(ctx_get(ctx, cases[i].name), cases[i].back) == 0, "%s=%s read back as '%s', expected '%s'",
              cases[i].name, cases[i].value, ctx_get(ctx, cases[i].name), cases[i].back);
  }
  /* a short buffer: cut, NUL-terminated */
  char small[4];
  PK_REQUIRE_OK(ctx, pkrylov_context_get_option(ctx, "cuda.csr_format", small, (int32_t)sizeof small));
  PK_EXPECT(strcmp(small, "dia") == 0, "'%s'", small);
  PK_REQUIRE_OK(ctx, pkrylov_context_set_option(ctx, "cuda.csr_format", "dia-nosym"));
  PK_REQUIRE_OK(ctx, pkrylov_context_get_option(ctx, "cuda.csr_format", small, (int32_t)sizeof small));
  PK_EXPECT(strcmp(small, "dia") == 0 && strlen(small) == 3, "cut to '%s'", small);
  PK_REQUIRE_OK(ctx, pkrylov_context_destroy(&ctx));
  PK_TEST_END();
}

/** Unknown names and values out of range: PKRYLOV_ERR_BAD_OPTION, a message naming the option and what it
 *  accepts, and the option unchanged. */
PK_TEST_CASE(bad_values) {
  pkrylov_context ctx;
  PK_REQUIRE_OK(NULL, pkrylov_context_create(PKRYLOV_BACKEND_CPU, &ctx));
  PK_REQUIRE_OK(ctx, pkrylov_context_set_option(ctx, "cuda.kc", "16"));
  PK_EXPECT_CODE(ctx, pkrylov_context_set_option(ctx, "cuda.kcc", "16"), PKRYLOV_ERR_BAD_OPTION);
  PK_EXPECT(strstr(msg_of(ctx), "pkrylov_context_set_option") && strstr(msg_of(ctx), "unknown option 'cuda.kcc'") &&
                strstr(msg_of(ctx), "cuda.kc,"),
            "message '%s'", msg_of(ctx));
  static const struct {
    const char *name, *value, *accepts;
  } bad[] = {
      {"cuda.kc", "0", "1..1024, or auto"},    {"cuda.kc", "1025", "1..1024"},   {"cuda.kc", "16x", "1..1024"},
      {"cuda.kc", "", "1..1024"},              {"cuda.kc", "-3", "1..1024"},     {"cuda.kc", "99999999999999", "1..1024"},
      {"cuda.l2pf", "17", "0..16"},            {"cuda.l2pf", "-1", "0..16"},     {"cuda.l2pf", "auto", "0..16"},
      {"cuda.l2persist", "5", "0..4"},
      {"cuda.csr_lanes", "3", "power of two"}, {"cuda.csr_lanes", "64", "power of two up to 32"},
      {"cuda.csr_format", "diag", "auto, csr, dia, dia-nosym"}, {"cuda.csr_format", "CSR", "auto, csr"},
      {"dist.nccl", "2", "0 or 1"},            {"kry.graph", "onn", "0 or 1"},   {"cuda.fold", "2", "0..1, or auto"},
      {"kry.xfuse", "2", "0..1, or auto"},     {"kry.xfuse", "-1", "0..1, or auto"},
      {"cuda.bind", "yes", "none, auto"},
  };
  for (unsigned i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    char before[64];
    snprintf(before, sizeof before, "%s", ctx_get(ctx, bad[i].name));
    PK_EXPECT_CODE(ctx, pkrylov_context_set_option(ctx, bad[i].name, bad[i].value), PKRYLOV_ERR_BAD_OPTION);
    char quoted[128];
    snprintf(quoted, sizeof quoted, "option '%s': value '%s'", bad[i].name, bad[i].value);
    PK_EXPECT(strstr(msg_of(ctx), quoted) && strstr(msg_of(ctx), bad[i].accepts), "%s=%s: message '%s'",
              bad[i].name, bad[i].value, msg_of(ctx));
    PK_EXPECT(strcmp(ctx_get(ctx, bad[i].name), before) == 0, "%s changed to '%s' by a refused value", bad[i].name,
              ctx_get(ctx, bad[i].name));
  }
  PK_EXPECT(strcmp(ctx_get(ctx, "cuda.kc"), "16") == 0, "cuda.kc = '%s'", ctx_get(ctx, "cuda.kc"));
  /* the error code's string and the unknown name on get */
  PK_EXPECT(strstr(pkrylov_error_string(PKRYLOV_ERR_BAD_OPTION), "option"), "'%s'",
            pkrylov_error_string(PKRYLOV_ERR_BAD_OPTION));
  char buf[16];
  PK_EXPECT_CODE(ctx, pkrylov_context_get_option(ctx, "nope", buf, (int32_t)sizeof buf), PKRYLOV_ERR_BAD_OPTION);
  PK_EXPECT(strstr(msg_of(ctx), "pkrylov_context_get_option") && strstr(msg_of(ctx), "'nope'"), "message '%s'",
            msg_of(ctx));
  /* NULL and size arguments */
  PK_EXPECT_CODE(ctx, pkrylov_context_set_option(ctx, NULL, "1"), PKRYLOV_ERR_NULL_POINTER);
  PK_EXPECT_CODE(ctx, pkrylov_context_set_option(ctx, "kry.graph", NULL), PKRYLOV_ERR_NULL_POINTER);
  PK_EXPECT(strstr(msg_of(ctx), "'value'"), "message '%s'", msg_of(ctx));
  PK_EXPECT_CODE(NULL, pkrylov_context_set_option(NULL, "kry.graph", "1"), PKRYLOV_ERR_NULL_POINTER);
  PK_EXPECT_CODE(ctx, pkrylov_context_get_option(ctx, "kry.graph", buf, 0), PKRYLOV_ERR_INVALID_SIZE);
  PK_EXPECT_CODE(ctx, pkrylov_context_get_option(ctx, "kry.graph", NULL, 4), PKRYLOV_ERR_NULL_POINTER);
  PK_REQUIRE_OK(ctx, pkrylov_context_destroy(&ctx));
  PK_TEST_END();
}

/** The key=value string: applied in order, all or nothing. */
PK_TEST_CASE(options_string) {
  pkrylov_context ctx;
  PK_REQUIRE_OK(NULL, pkrylov_context_create(PKRYLOV_BACKEND_CPU, &ctx));
  PK_REQUIRE_OK(ctx, pkrylov_context_set_options(ctx, "  cuda.kc=16\tkry.graph=off \n cuda.csr_format=dia cuda.kc=32 "));
  PK_EXPECT(strcmp(ctx_get(ctx, "cuda.kc"), "32") == 0, "the later pair wins: '%s'", ctx_get(ctx, "cuda.kc"));
  PK_EXPECT(strcmp(ctx_get(ctx, "kry.graph"), "0") == 0, "kry.graph '%s'", ctx_get(ctx, "kry.graph"));
  PK_EXPECT(strcmp(ctx_get(ctx, "cuda.csr_format"), "dia") == 0, "'%s'", ctx_get(ctx, "cuda.csr_format"));
  PK_REQUIRE_OK(ctx, pkrylov_context_set_options(ctx, ""));
  PK_REQUIRE_OK(ctx, pkrylov_context_set_options(ctx, NULL));
  /* a bad pair: none applied (cuda.kc=8 came first and is not kept) */
  PK_EXPECT_CODE(ctx, pkrylov_context_set_options(ctx, "cuda.kc=8 cuda.l2pf=99"), PKRYLOV_ERR_BAD_OPTION);
  PK_EXPECT(strstr(msg_of(ctx), "pkrylov_context_set_options") && strstr(msg_of(ctx), "cuda.l2pf") &&
                strstr(msg_of(ctx), "'99'"),
            "message '%s'", msg_of(ctx));
  PK_EXPECT(strcmp(ctx_get(ctx, "cuda.kc"), "32") == 0, "all or nothing: cuda.kc '%s'", ctx_get(ctx, "cuda.kc"));
  PK_EXPECT_CODE(ctx, pkrylov_context_set_options(ctx, "cuda.kc=8 kry.graph"), PKRYLOV_ERR_BAD_OPTION);
  PK_EXPECT(strstr(msg_of(ctx), "'kry.graph' is not key=value"), "message '%s'", msg_of(ctx));
  PK_EXPECT_CODE(ctx, pkrylov_context_set_options(ctx, "=1"), PKRYLOV_ERR_BAD_OPTION);
  PK_EXPECT(strcmp(ctx_get(ctx, "cuda.kc"), "32") == 0, "cuda.kc '%s'", ctx_get(ctx, "cuda.kc"));
  PK_REQUIRE_OK(ctx, pkrylov_context_destroy(&ctx));
  PK_TEST_END();
}

/** A 1-D Laplacian of order n in CSR (0-based). */
static int laplace(pkrylov_context ctx, int32_t n, pkrylov_operator *A) {
  int32_t *rp = malloc(sizeof(int32_t) * (size_t)(n + 1)), *ci = malloc(sizeof(int32_t) * (size_t)(3 * n));
  double *v = malloc(sizeof(double) * (size_t)(3 * n));
  int32_t k = 0;
  for (int32_t i = 0; i < n; i++) {
    rp[i] = k;
    if (i > 0) ci[k] = i - 1, v[k++] = -1.0;
    ci[k] = i, v[k++] = 2.0;
    if (i < n - 1) ci[k] = i + 1, v[k++] = -1.0;
  }
  rp[n] = k;
  int e = pkrylov_operator_create_csr(ctx, n, 0, rp, ci, v, A);
  free(rp), free(ci), free(v);
  return e;
}

/** Solvers copy the context's options at creation; solver-level ones may then change on the solver only;
 *  context-level names are refused on a solver. */
PK_TEST_CASE(solver_inherits) {
  pkrylov_context ctx;
  pkrylov_operator A;
  pkrylov_solver s1, s2;
  PK_REQUIRE_OK(NULL, pkrylov_context_create(PKRYLOV_BACKEND_CPU, &ctx));
  PK_REQUIRE_OK(ctx, laplace(ctx, 20, &A));
  PK_REQUIRE_OK(ctx, pkrylov_context_set_options(ctx, "kry.graph=0 cuda.fold=1 dist.nccl=0"));
  PK_REQUIRE_OK(ctx, pkrylov_solver_create(ctx, PKRYLOV_SOLVER_CG, A, NULL, &s1));
  PK_EXPECT(strcmp(solver_get(s1, "kry.graph"), "0") == 0, "inherited kry.graph '%s'", solver_get(s1, "kry.graph"));
  PK_EXPECT(strcmp(solver_get(s1, "cuda.fold"), "1") == 0, "inherited cuda.fold '%s'", solver_get(s1, "cuda.fold"));
  PK_REQUIRE_OK(ctx, pkrylov_solver_set_option(s1, "kry.graph", "1"));
  PK_REQUIRE_OK(ctx, pkrylov_solver_set_option(s1, "cuda.fold", "auto"));
  PK_EXPECT(strcmp(solver_get(s1, "kry.graph"), "1") == 0, "solver override '%s'", solver_get(s1, "kry.graph"));
  PK_EXPECT(strcmp(solver_get(s1, "cuda.fold"), "auto") == 0, "'%s'", solver_get(s1, "cuda.fold"));
  PK_EXPECT(strcmp(ctx_get(ctx, "kry.graph"), "0") == 0, "the context keeps its value: '%s'", ctx_get(ctx, "kry.graph"));
  /* a context-level option on a solver: refused, named, unchanged */
  PK_EXPECT_CODE(ctx, pkrylov_solver_set_option(s1, "dist.nccl", "1"), PKRYLOV_ERR_BAD_OPTION);
  PK_EXPECT(strstr(msg_of(ctx), "pkrylov_solver_set_option") && strstr(msg_of(ctx), "'dist.nccl'") &&
                strstr(msg_of(ctx), "context-level"),
            "message '%s'", msg_of(ctx));
  PK_EXPECT_CODE(ctx, pkrylov_solver_set_option(s1, "cuda.csr_format", "csr"), PKRYLOV_ERR_BAD_OPTION);
  PK_EXPECT_CODE(ctx, pkrylov_solver_set_option(s1, "kry.graph", "maybe"), PKRYLOV_ERR_BAD_OPTION);
  PK_EXPECT(strcmp(solver_get(s1, "kry.graph"), "1") == 0, "'%s'", solver_get(s1, "kry.graph"));
  PK_EXPECT_CODE(ctx, pkrylov_solver_set_option(s1, "bogus", "1"), PKRYLOV_ERR_BAD_OPTION);
  PK_EXPECT(strstr(msg_of(ctx), "unknown option 'bogus'"), "message '%s'", msg_of(ctx));
  /* the context-level ones as the solver sees them: the context's, now */
  PK_EXPECT(strcmp(solver_get(s1, "dist.nccl"), "0") == 0, "'%s'", solver_get(s1, "dist.nccl"));
  PK_REQUIRE_OK(ctx, pkrylov_context_set_option(ctx, "dist.nccl", "1"));
  PK_EXPECT(strcmp(solver_get(s1, "dist.nccl"), "1") == 0, "'%s'", solver_get(s1, "dist.nccl"));
  /* a solver created later takes the context's values of then */
  PK_REQUIRE_OK(ctx, pkrylov_context_set_option(ctx, "kry.profile", "1"));
  PK_REQUIRE_OK(ctx, pkrylov_solver_create(ctx, PKRYLOV_SOLVER_BICGSTAB, A, NULL, &s2));
  PK_EXPECT(strcmp(solver_get(s2, "kry.graph"), "0") == 0, "'%s'", solver_get(s2, "kry.graph"));
  PK_EXPECT(strcmp(solver_get(s2, "kry.profile"), "1") == 0, "'%s'", solver_get(s2, "kry.profile"));
  PK_EXPECT(strcmp(solver_get(s1, "kry.profile"), "0") == 0, "s1 made before: '%s'", solver_get(s1, "kry.profile"));
  /* options do not change what a CPU solve computes: s1 with other solver options, bitwise */
  enum { N = 20 };
  double b[N], x1[N] = {0}, x2[N] = {0};
  for (int i = 0; i < N; i++) b[i] = 1.0 + 0.1 * i;
  pkrylov_solver s3;
  PK_REQUIRE_OK(ctx, pkrylov_solver_create(ctx, PKRYLOV_SOLVER_CG, A, NULL, &s3));
  PK_REQUIRE_OK(ctx, pkrylov_solver_set_option(s3, "cuda.fold", "0"));
  PK_REQUIRE_OK(ctx, pkrylov_solver_solve(s1, PKRYLOV_MEM_HOST, b, x1));
  PK_REQUIRE_OK(ctx, pkrylov_solver_solve(s3, PKRYLOV_MEM_HOST, b, x2));
  PK_EXPECT(memcmp(x1, x2, sizeof x1) == 0, "CPU solves differ with CUDA-only options");
  /* the solution is the 1-D Laplacian's: A x = b checked directly */
  double rmax = 0.0;
  for (int i = 0; i < N; i++) {
    const double ax = 2.0 * x1[i] - (i > 0 ? x1[i - 1] : 0.0) - (i < N - 1 ? x1[i + 1] : 0.0);
    if (fabs(ax - b[i]) > rmax) rmax = fabs(ax - b[i]);
  }
  PK_EXPECT(rmax < 1e-6, "residual %g", rmax);
  PK_EXPECT_CODE(NULL, pkrylov_solver_set_option(NULL, "kry.graph", "1"), PKRYLOV_ERR_NULL_POINTER);
  PK_REQUIRE_OK(ctx, pkrylov_solver_destroy(&s3));
  PK_REQUIRE_OK(ctx, pkrylov_solver_destroy(&s2));
  PK_REQUIRE_OK(ctx, pkrylov_solver_destroy(&s1));
  PK_REQUIRE_OK(ctx, pkrylov_operator_destroy(&A));
  PK_REQUIRE_OK(ctx, pkrylov_context_destroy(&ctx));
  PK_TEST_END();
}

/** The listing: one line per option, each starting with its name, the level and the default in it. */
PK_TEST_CASE(describe) {
  const int n = pkrylov_option_count();
  char line[512];
  for (int s = 0; s < NSPEC; s++) {
    int found = 0;
    for (int i = 0; i < n; i++) {
      PK_REQUIRE_OK(NULL, pkrylov_option_describe(i, line, (int32_t)sizeof line));
      const size_t l = strlen(specs[s].name);
      if (strncmp(line, specs[s].name, l) == 0 && line[l] == ' ') {
        found++;
        char def[64];
        snprintf(def, sizeof def, "default %s.", specs[s].def);
        PK_EXPECT(strstr(line, def), "'%s' lacks '%s'", line, def);
        const int solver_level = !strncmp(specs[s].name, "kry.", 4) || !strcmp(specs[s].name, "cuda.fold") ||
                                 !strcmp(specs[s].name, "cuda.pdl") || !strcmp(specs[s].name, "cuda.pipe_none") ||
                                 !strcmp(specs[s].name, "cuda.timeline") || !strcmp(specs[s].name, "cuda.l2persist");
        PK_EXPECT(strstr(line, solver_level ? "solver level" : "context level"), "'%s': level", line);
        const int collective = !strncmp(specs[s].name, "dist.", 5);
        PK_EXPECT((strstr(line, "collective") != NULL) == collective, "'%s': collective flag", line);
      }
    }
    PK_EXPECT(found == 1, "%s listed %d times", specs[s].name, found);
  }
  PK_EXPECT_CODE(NULL, pkrylov_option_describe(n, line, (int32_t)sizeof line), PKRYLOV_ERR_INDEX_OUT_OF_RANGE);
  PK_EXPECT_CODE(NULL, pkrylov_option_describe(-1, line, (int32_t)sizeof line), PKRYLOV_ERR_INDEX_OUT_OF_RANGE);
  PK_EXPECT_CODE(NULL, pkrylov_option_describe(0, line, 0), PKRYLOV_ERR_INVALID_SIZE);
  PK_TEST_END();
}

/** Registered with PKRYLOV_OPTIONS="cuda.kc=64 kry.graph=0  cuda.csr_format=dia-nosym dist.nccl=off": a new
 *  context has them, the others at their defaults; calls override them. */
PK_TEST_CASE(env_applied) {
  const char *env = getenv("PKRYLOV_OPTIONS");
  PK_REQUIRE(env && strstr(env, "cuda.kc=64"), "tests/CMakeLists.txt sets PKRYLOV_OPTIONS for this case");
  pkrylov_context ctx;
  PK_REQUIRE_OK(NULL, pkrylov_context_create(PKRYLOV_BACKEND_CPU, &ctx));
  PK_EXPECT(strcmp(ctx_get(ctx, "cuda.kc"), "64") == 0, "cuda.kc '%s'", ctx_get(ctx, "cuda.kc"));
  PK_EXPECT(strcmp(ctx_get(ctx, "kry.graph"), "0") == 0, "kry.graph '%s'", ctx_get(ctx, "kry.graph"));
  PK_EXPECT(strcmp(ctx_get(ctx, "cuda.csr_format"), "dia-nosym") == 0, "'%s'", ctx_get(ctx, "cuda.csr_format"));
  PK_EXPECT(strcmp(ctx_get(ctx, "dist.nccl"), "0") == 0, "dist.nccl '%s'", ctx_get(ctx, "dist.nccl"));
  PK_EXPECT(strcmp(ctx_get(ctx, "cuda.l2pf"), "1") == 0, "untouched default '%s'", ctx_get(ctx, "cuda.l2pf"));
  PK_REQUIRE_OK(ctx, pkrylov_context_set_option(ctx, "cuda.kc", "8"));
  PK_EXPECT(strcmp(ctx_get(ctx, "cuda.kc"), "8") == 0, "explicit call overrides: '%s'", ctx_get(ctx, "cuda.kc"));
  PK_REQUIRE_OK(ctx, pkrylov_context_destroy(&ctx));
  PK_TEST_END();
}

/** Registered with PKRYLOV_OPTIONS="kry.graph=0 cuda.kc=5000": context creation fails with the option's
 *  code and a message naming the variable, the option and its range; no context is returned. */
PK_TEST_CASE(env_bad) {
  const char *env = getenv("PKRYLOV_OPTIONS");
  PK_REQUIRE(env && strstr(env, "cuda.kc=5000"), "tests/CMakeLists.txt sets PKRYLOV_OPTIONS for this case");
  pkrylov_context ctx = (pkrylov_context)0x1;
  PK_EXPECT_CODE(NULL, pkrylov_context_create(PKRYLOV_BACKEND_CPU, &ctx), PKRYLOV_ERR_BAD_OPTION);
  PK_EXPECT(ctx == NULL, "handle not cleared");
  const char *m = pkrylov_last_error_message();
  PK_EXPECT(strstr(m, "pkrylov_context_create") && strstr(m, "PKRYLOV_OPTIONS") && strstr(m, "cuda.kc") &&
                strstr(m, "'5000'") && strstr(m, "1..1024"),
            "message '%s'", m);
  PK_TEST_END();
}

PK_TEST_MAIN(PK_TEST_ENTRY(defaults), PK_TEST_ENTRY(set_and_get), PK_TEST_ENTRY(bad_values),
             PK_TEST_ENTRY(options_string), PK_TEST_ENTRY(solver_inherits), PK_TEST_ENTRY(describe),
             PK_TEST_ENTRY(env_applied), PK_TEST_ENTRY(env_bad))

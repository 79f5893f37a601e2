/**
 * @file t500-cli.c
 * @brief The command-line programs pkrylov-solve and pkrylov-demo, run as child processes.
 *
 * Every number checked comes from an independent reference: the system the program saved
 * (--save-system) and the solution it wrote (--out) are read back and the residual is recomputed here
 * with a plain CSR loop (pk_test_csr_matvec), or the solution is compared with a dense LAPACK solve. The
 * problems on tiled grids (barotropic, cubesphere, --tiles, --periodic) are checked against the brute-force
 * global operator of pk_grid_test.h built here from the library's coefficient functions (neighbours from
 * coordinates and the cube's 3-D geometry), a dense LAPACK solve of it, and the library's one-tile column
 * stencil of the assembled global arrays.
 */
#define _GNU_SOURCE /* sched_getaffinity, CPU_COUNT */
#include "pk_grid_test.h"
#include "pk_test.h"

#include <sched.h>
#include <string.h>
#include <unistd.h>

/** Capacity of the captured stdout / stderr of one run. */
#define PK_CAP 16384
/** Capacity of a scratch path and of a command line. */
#define PK_PATH 1024
#define PK_ARGS 16384

/** A path in the scratch folder, "t500_<tag>_<name>", copied into buf. */
static const char *tmp(char *buf, size_t cap, const char *tag, const char *name) {
  char leaf[512];
  snprintf(leaf, sizeof leaf, "t500_%s_%s", tag, name);
  snprintf(buf, cap, "%s", pk_test_tmp_path(leaf));
  return buf;
}

/** Read a whole (small) text file into buf (NUL-terminated, truncated at cap - 1). */
static void slurp(const char *path, char *buf, size_t cap) {
  buf[0] = '\0';
  FILE *f = fopen(path, "r");
  if (!f) return;
  size_t len = fread(buf, 1, cap - 1, f);
  buf[len] = '\0';
  fclose(f);
}

/**
 * Run "exe args" with stdout and stderr captured into out and err (each PK_CAP bytes, may be NULL).
 * Returns the exit status of the program (-1 when it did not exit normally).
 */
static int run(const char *exe, const char *tag, const char *args, char *out, char *err) {
  char po[PK_PATH], pe[PK_PATH];
  tmp(po, sizeof po, tag, "stdout.txt");
  tmp(pe, sizeof pe, tag, "stderr.txt");
  size_t cap = strlen(exe) + strlen(args) + strlen(po) + strlen(pe) + 32;
  char *cmd = malloc(cap);
  if (!cmd) return -1;
  snprintf(cmd, cap, "\"%s\" %s >\"%s\" 2>\"%s\"", exe, args, po, pe);
  int rc = pk_test_system(cmd);
  free(cmd);
  if (out) slurp(po, out, PK_CAP);
  if (err) slurp(pe, err, PK_CAP);
  return rc;
}

/** Run pkrylov-solve (see run()). */
static int solve(const char *tag, const char *args, char *out, char *err) {
  return run(PK_SOLVE_EXE, tag, args, out, err);
}

/** The number after "key": in a JSON text; 0 when found and parsed. */
static int json_num(const char *js, const char *key, double *v) {
  char pat[128];
  snprintf(pat, sizeof pat, "\"%s\":", key);
  const char *p = strstr(js, pat);
  if (!p) return 1;
  p += strlen(pat);
  while (*p == ' ') p++;
  char *end = NULL;
  *v = strtod(p, &end);
  return end == p;
}

/** 1 if "key":true, 0 if "key":false, -1 otherwise. */
static int json_bool(const char *js, const char *key) {
  char pat[128];
  snprintf(pat, sizeof pat, "\"%s\":", key);
  const char *p = strstr(js, pat);
  if (!p) return -1;
  p += strlen(pat);
  while (*p == ' ') p++;
  if (strncmp(p, "true", 4) == 0) return 1;
  if (strncmp(p, "false", 5) == 0) return 0;
  return -1;
}

/** 1 when js contains "key":"value". */
static int json_str_is(const char *js, const char *key, const char *value) {
  char pat[256];
  snprintf(pat, sizeof pat, "\"%s\":\"%s\"", key, value);
  return strstr(js, pat) != NULL;
}

/**
 * 1 when js is exactly one flat JSON object (optionally followed by a newline) with no nan/inf literals.
 */
static int json_one_object(const char *js) {
  size_t len = strlen(js);
  while (len > 0 && (js[len - 1] == '\n' || js[len - 1] == ' ')) len--;
  if (len < 2 || js[0] != '{' || js[len - 1] != '}') return 0;
  int open = 0, close = 0;
  for (size_t i = 0; i < len; i++) open += js[i] == '{', close += js[i] == '}';
  if (open != 1 || close != 1) return 0;
  static const char *const bad[] = {":nan", ":-nan", ":inf", ":-inf", ":NaN", ":Infinity", NULL};
  for (int i = 0; bad[i]; i++)
    if (strstr(js, bad[i])) return 0;
  return 1;
}

/** Read a Matrix Market vector written by the program; malloc'ed, length in *n; NULL on failure. */
static double *read_vec(const char *path, int64_t *n) {
  *n = 0;
  if (pkrylov_mtx_read_vector(NULL, path, 0, NULL, n) != PKRYLOV_SUCCESS || *n <= 0) return NULL;
  double *v = malloc(sizeof(double) * (size_t)*n);
  int64_t got = 0;
  if (!v || pkrylov_mtx_read_vector(NULL, path, *n, v, &got) != PKRYLOV_SUCCESS || got != *n) {
    free(v);
    return NULL;
  }
  return v;
}

/** 1 when all n values are finite. */
static int all_finite(int64_t n, const double *v) {
  for (int64_t i = 0; i < n; i++)
    if (!isfinite(v[i])) return 0;
  return 1;
}

/** Count the lines of a text file (-1 when it cannot be opened). */
static int count_lines(const char *path) {
  FILE *f = fopen(path, "r");
  if (!f) return -1;
  int c, lines = 0;
  while ((c = fgetc(f)) != EOF) lines += c == '\n';
  fclose(f);
  return lines;
}

/**
 * Independent check of a solve: read the matrix file A, the right-hand side file b (NULL: b = A * ones
 * computed here with the plain CSR loop) and the solution x. Returns ||b - A x|| / ||b|| computed here,
 * and in *round a bound for the difference between two computations of it in floating point:
 * 32 eps || |b| + |A| |x| || / ||b|| (each entry of b - A x sums at most 8 terms, so one computation is
 * off by at most 8 eps (|b_i| + sum_j |a_ij x_j|); two computations, plus a few ulps of difference in
 * coefficients that a matrix-free operator recomputes, stay within 32 eps).
 */
static double indep_relres(const char *apath, const char *bpath, const char *xpath, double *round) {
  double relres = INFINITY;
  pkrylov_context ctx = NULL;
  pkrylov_operator A = NULL;
  double *b = NULL, *x = NULL, *vals = NULL, *ones = NULL;
  int64_t *rp = NULL, *ci = NULL, n = 0, nx = 0, nnz = 0;
  *round = INFINITY;
  if (pkrylov_context_create(PKRYLOV_BACKEND_CPU, &ctx) ||
      pkrylov_operator_create_from_mtx(ctx, apath, &A) ||
      pkrylov_operator_get_info(A, &n, &nnz, NULL, NULL, NULL, NULL)) {
    fprintf(stderr, "cannot read back %s\n", apath);
    goto done;
  }
  x = read_vec(xpath, &nx);
  if (!x || nx != n) {
    fprintf(stderr, "cannot read back %s (n = %lld, expected %lld)\n", xpath, (long long)nx, (long long)n);
    goto done;
  }
  if (bpath) {
    int64_t nb = 0;
    b = read_vec(bpath, &nb);
    if (!b || nb != n) {
      fprintf(stderr, "cannot read back %s\n", bpath);
      goto done;
    }
  } else {
    b = malloc(sizeof(double) * (size_t)n);
    ones = malloc(sizeof(double) * (size_t)n);
    if (!b || !ones) goto done;
    for (int64_t i = 0; i < n; i++) ones[i] = 1.0;
    if (pk_test_csr_matvec(A, ones, b)) goto done;
  }
  relres = pk_test_true_relres(A, b, x);
  /* s_i = |b_i| + sum_j |a_ij x_j|: the size of the terms whose rounding errors enter r_i */
  rp = malloc(sizeof(int64_t) * (size_t)(n + 1));
  ci = malloc(sizeof(int64_t) * (size_t)nnz);
  vals = malloc(sizeof(double) * (size_t)nnz);
  if (!rp || !ci || !vals || pkrylov_operator_get_csr(A, rp, ci, vals)) goto done;
  double s2 = 0;
  for (int64_t i = 0; i < n; i++) {
    double s = fabs(b[i]); /* sum_j |a_ij x_j| + |b_i| */
    for (int64_t k = rp[i]; k < rp[i + 1]; k++) s += fabs(vals[k] * x[ci[k]]);
    s2 += s * s;
  }
  double nb = pk_test_norm(n, b);
  *round = 32.0 * 2.220446049250313e-16 * sqrt(s2) / (nb > 0 ? nb : 1.0);
done:
  free(rp), free(ci), free(vals), free(ones), free(b), free(x);
  pkrylov_operator_destroy(&A);
  pkrylov_context_destroy(&ctx);
  return relres;
}

/**
 * Solve the thin shell 8x8x6 with the given extra options, save the system and the solution, and check
 * the result independently by recomputing ||b - A x|| / ||b|| from the saved files with a plain CSR loop.
 * converged = 1: the run must converge (exit 0, rel_residual <= 1e-8). At rtol 1e-8 the thin shell's
 * residual is at its rounding level (|| |A| |x| || / ||b|| is about 6e6), so there the JSON value and
 * the recomputed one can only be compared to rounding. converged = 0: the run is cut at --maxit 3
 * (exit 1, x still written) where the residual is far above the rounding level, so the comparison is
 * sharp (1e-6 relative) and the test checks that it is.
 */
static void check_thinshell(const char *tag, const char *extra, int converged) {
  char out[PK_CAP], err[PK_CAP], args[PK_ARGS], px[PK_PATH], pp[PK_PATH];
  char pa[PK_PATH + 16], pb[PK_PATH + 16];
  tmp(px, sizeof px, tag, "x.mtx");
  tmp(pp, sizeof pp, tag, "sys");
  snprintf(pa, sizeof pa, "%s_A.mtx", pp);
  snprintf(pb, sizeof pb, "%s_b.mtx", pp);
  remove(px), remove(pa), remove(pb);
  snprintf(args, sizeof args, "--problem thinshell:8,8,6 --json --out \"%s\" --save-system \"%s\" %s %s", px,
           pp, converged ? "" : "--maxit 3", extra);
  int rc = solve(tag, args, out, err);
  PK_EXPECT(rc == (converged ? 0 : 1), "exit status %d; stderr: %s", rc, err);
  PK_EXPECT(json_one_object(out), "stdout is not one JSON object: '%s'", out);
  PK_EXPECT(json_bool(out, "converged") == converged, "converged not %d: %s", converged, out);
  PK_EXPECT(json_str_is(out, "problem", "thinshell:8,8,6"), "%s", out);
  double rel = NAN, n = 0, it = -1, rtol = 0;
  PK_EXPECT(json_num(out, "rel_residual", &rel) == 0 && isfinite(rel), "rel_residual %g", rel);
  PK_EXPECT(json_num(out, "n", &n) == 0 && n == 8 * 8 * 6, "n = %g", n);
  PK_EXPECT(json_num(out, "iterations", &it) == 0 && it >= 1, "iterations = %g", it);
  PK_EXPECT(json_num(out, "rtol", &rtol) == 0 && rtol == 1e-8, "rtol = %g", rtol);
  double round = 0, mine = indep_relres(pa, pb, px, &round);
  if (converged) {
    PK_EXPECT(rel <= 1e-8, "JSON rel_residual %.3e > 1e-8", rel);
    PK_EXPECT(mine <= 1e-8 * (1 + 1e-6), "independent relative residual %.3e > 1e-8", mine);
  } else {
    PK_EXPECT(it == 3, "iterations = %g, expected 3", it);
    PK_EXPECT(round <= 1e-2 * mine, "comparison not sharp: residual %.3e, rounding %.3e", mine, round);
  }
  /* the two residuals are different computations of the same number: they agree to rounding */
  PK_EXPECT(fabs(mine - rel) <= 1e-6 * mine + round, "JSON %.17g vs recomputed %.17g (rounding %.3g)", rel,
            mine, round);
}

PK_TEST_CASE(thinshell_json) {
  check_thinshell("thinshell_json", "", 1);
  check_thinshell("thinshell_json_maxit", "", 0);
  PK_TEST_END();
}

PK_TEST_CASE(thinshell_pipecg_options) {
  static const char opts[] = "--solver pipecg --replace 10 --true-residual 5 --threads 2 --geometry uniform";
  check_thinshell("thinshell_pipecg", opts, 1);
  check_thinshell("thinshell_pipecg_maxit", opts, 0);
  PK_TEST_END();
}

/** One library solve of the thin shell 10 x 9 x 8 (column preconditioner, b = A * ones as the program's):
 *  the reference of the stop-rule cases. */
static int lib_thinshell(int32_t type, int32_t rule, int32_t minres, int32_t maxit, double rtol,
                         pkrylov_result *res) {
  pkrylov_context ctx;
  pkrylov_operator A;
  pkrylov_precond M;
  pkrylov_solver s;
  pkrylov_thinshell_params p;
  PK_REQUIRE_OK(NULL, pkrylov_context_create(PKRYLOV_BACKEND_CPU, &ctx));
  PK_REQUIRE_OK(ctx, pkrylov_thinshell_params_default(10, 9, 8, &p));
  PK_REQUIRE_OK(ctx, pkrylov_operator_create_thinshell(ctx, &p, &A));
  PK_REQUIRE_OK(ctx, pkrylov_precond_create(ctx, A, PKRYLOV_PRECOND_COLUMN, 0, PKRYLOV_LAYOUT_AUTO, &M));
  PK_REQUIRE_OK(ctx, pkrylov_solver_create(ctx, type, A, M, &s));
  PK_REQUIRE_OK(ctx, pkrylov_solver_set_tolerances(s, rtol, 0.0));
  PK_REQUIRE_OK(ctx, pkrylov_solver_set_max_iterations(s, maxit));
  PK_REQUIRE_OK(ctx, pkrylov_solver_set_stop_rule(s, rule));
  PK_REQUIRE_OK(ctx, pkrylov_solver_set_min_residual(s, minres));
  double ones[720], b[720], x[720] = {0};
  for (int i = 0; i < 720; i++)
    ones[i] = 1.0;
  PK_REQUIRE_OK(ctx, pkrylov_operator_apply(A, PKRYLOV_MEM_HOST, ones, b));
  PK_REQUIRE_OK(ctx, pkrylov_solver_solve(s, PKRYLOV_MEM_HOST, b, x));
  PK_REQUIRE_OK(ctx, pkrylov_solver_get_result(s, res));
  pkrylov_solver_destroy(&s);
  pkrylov_precond_destroy(&M);
  pkrylov_operator_destroy(&A);
  pkrylov_context_destroy(&ctx);
  return PK_PASS;
}

/**
 * --replace auto|K: pipelined CG with 'auto' and without the option against the library's solve with its
 * default (PKRYLOV_REPLACE_AUTO; the same iterations and residual_replacements in the JSON), '--replace 0'
 * none, '--replace 4' one every 4 iterations (floor(iterations / 4), or one less when the last iteration
 * falls on one), --help.
 */
PK_TEST_CASE(replace_auto) {
  char out[PK_CAP], err[PK_CAP];
  pkrylov_result ref;
  if (lib_thinshell(PKRYLOV_SOLVER_PIPECG, PKRYLOV_STOP_CONFIRMED, 0, 500, 1e-10, &ref) != PK_PASS)
    return PK_FAIL;
  static const char *const opts[3] = {"--replace auto", "", "--replace 0"};
  for (int i = 0; i < 3; i++) {
    char args[PK_ARGS];
    snprintf(args, sizeof args,
             "--problem thinshell:10,9,8 --solver pipecg --maxit 500 --rtol 1e-10 --json %s", opts[i]);
    const int rc = solve("replace_auto", args, out, err);
    double it = -1, rep = -1;
    PK_EXPECT(rc == 0 && json_num(out, "iterations", &it) == 0 &&
                  json_num(out, "residual_replacements", &rep) == 0,
              "'%s': exit %d: %s %s", args, rc, out, err);
    if (i < 2)
      PK_EXPECT((int)it == ref.iterations && (int)rep == ref.residual_replacements,
                "'%s': %g iterations, %g replacements; library %d, %d", args, it, rep, ref.iterations,
                ref.residual_replacements);
    else
      PK_EXPECT(rep == 0, "'%s': %g replacements", args, rep);
  }
  int rc = solve("replace_4", "--problem thinshell:10,9,8 --solver pipecg --replace 4 --rtol 1e-10 --json",
                 out, err);
  double it = -1, rep = -1;
  PK_EXPECT(rc == 0 && json_num(out, "iterations", &it) == 0 &&
                json_num(out, "residual_replacements", &rep) == 0,
            "--replace 4: exit %d: %s", rc, out);
  PK_EXPECT(rep == floor(it / 4) || rep == floor(it / 4) - 1, "--replace 4: %g replacements in %g iterations",
            rep, it);
  rc = solve("replace_help", "--help", out, err);
  PK_EXPECT(rc == 0 && strstr(out, "--replace auto|K"), "--help: %s", out);
  PK_TEST_END();
}

/**
 * --stop recurrence|confirmed, --solver srcg, --min-residual: the JSON (stop, last_residual, min_residual,
 * min_residual_iteration, true_residual_checks, iterations) against the library's own solve with the same
 * settings, the recomputed residual, the text report.
 */
PK_TEST_CASE(stop_rule_srcg_min_residual) {
  static const char *const names[3] = {"cg", "pipecg", "srcg"};
  static const int32_t types[3] = {PKRYLOV_SOLVER_CG, PKRYLOV_SOLVER_PIPECG, PKRYLOV_SOLVER_SRCG};
  char out[PK_CAP], err[PK_CAP], args[PK_ARGS];
  for (int t = 0; t < 3; t++)
    for (int rule = 0; rule < 2; rule++)
      for (int mr = 0; mr < 2; mr++) {
        const int32_t maxit = mr ? 9 : 500;
        snprintf(args, sizeof args,
                 "--problem thinshell:10,9,8 --solver %s --stop %s%s --maxit %d --rtol 1e-6 --json", names[t],
                 rule ? "recurrence" : "confirmed", mr ? " --min-residual" : "", (int)maxit);
        const int rc = solve("stop_rule", args, out, err);
        pkrylov_result ref;
        if (lib_thinshell(types[t], rule ? PKRYLOV_STOP_RECURRENCE : PKRYLOV_STOP_CONFIRMED, mr, maxit, 1e-6,
                          &ref) != PK_PASS)
          return PK_FAIL;
        double it = -1, last = -1, mres = 0, mit = 0, checks = -1, fin = -1, rhs = -1;
        PK_EXPECT(json_one_object(out) && json_num(out, "iterations", &it) == 0 &&
                      json_num(out, "last_residual", &last) == 0 &&
                      json_num(out, "min_residual", &mres) == 0 &&
                      json_num(out, "min_residual_iteration", &mit) == 0 &&
                      json_num(out, "true_residual_checks", &checks) == 0 &&
                      json_num(out, "final_residual", &fin) == 0 && json_num(out, "rhs_norm", &rhs) == 0,
                  "'%s': %s", args, out);
        PK_EXPECT(json_str_is(out, "stop", rule ? "recurrence" : "confirmed") &&
                      json_str_is(out, "solver", names[t]),
                  "'%s': %s", args, out);
        PK_EXPECT(rc == (ref.converged ? 0 : 1) && (int)it == ref.iterations && last == ref.final_residual &&
                      (int)checks == ref.true_residual_checks,
                  "'%s': exit %d, %g iterations, last residual %.17g, %g checks; library %d, %.17g, %d", args,
                  rc, it, last, checks, ref.iterations, ref.final_residual, ref.true_residual_checks);
        PK_EXPECT(mres == ref.min_residual && (int)mit == ref.min_residual_iteration &&
                      (mr ? mit >= 0 && mit <= maxit : mres == -1 && mit == -1),
                  "'%s': min residual %.17g at %g; library %.17g at %d", args, mres, mit, ref.min_residual,
                  ref.min_residual_iteration);
        if (rule && !mr) /* the recurrence residual of the last iteration against the recomputed true one */
          PK_EXPECT(checks == 0 && last <= 1e-6 * rhs && fabs(fin - last) <= 1e-3 * last,
                    "'%s': %.17g vs %.17g", args, fin, last);
      }
  /* the text report names the rule and the minimum */
  int rc = solve("stop_rule_text",
                 "--problem thinshell:10,9,8 --solver srcg --stop recurrence --min-residual", out, err);
  PK_EXPECT(rc == 0 && strstr(out, "srcg") && strstr(out, "stop rule     recurrence") &&
                strstr(out, "min residual"),
            "text report: exit %d: %s", rc, out);
  rc = solve("stop_rule_help", "--help", out, err);
  PK_EXPECT(rc == 0 && strstr(out, "--stop confirmed|recurrence") && strstr(out, "--min-residual") &&
                strstr(out, "srcg"),
            "--help: %s", out);
  PK_TEST_END();
}

PK_TEST_CASE(text_report_and_quiet) {
  char out[PK_CAP], err[PK_CAP];
  int rc = solve("text", "--problem thinshell:6,6,4", out, err);
  PK_EXPECT(rc == 0, "exit %d: %s", rc, err);
  static const char *const words[] = {"solver", "precond", "backend", "n ", "nnz", "iterations",
                                      "reason", "rel_residual", "time", NULL};
  for (int i = 0; words[i]; i++)
    PK_EXPECT(strstr(out, words[i]) != NULL, "'%s' missing in: %s", words[i], out);
  PK_EXPECT(strchr(out, '{') == NULL, "text report holds JSON: %s", out);
  rc = solve("text_quiet", "--problem thinshell:6,6,4 --quiet", out, err);
  PK_EXPECT(rc == 0, "exit %d: %s", rc, err);
  PK_EXPECT(out[0] == '\0', "--quiet printed: %s", out);
  rc = solve("text_help", "--help", out, err);
  PK_EXPECT(rc == 0 && strstr(out, "usage") && strstr(out, "--precond"), "--help: exit %d: %s", rc, out);
  PK_TEST_END();
}

/**
 * Solve gr_900_900_crg.mtx (b = A * ones) with the given solver and Jacobi, compare with a dense LAPACK
 * solve. With cond(A) = 195 and rtol 1e-10 the forward error is at most about 2e-8.
 */
static int check_matrix_vs_dense(const char *tag, const char *solver) {
  const char *mp = pk_test_matrix_path("gr_900_900_crg.mtx");
  if (!mp) return PK_SKIP;
  char mpath[PK_PATH], out[PK_CAP], err[PK_CAP], args[PK_ARGS], px[PK_PATH];
  snprintf(mpath, sizeof mpath, "%s", mp);
  tmp(px, sizeof px, tag, "x.mtx");
  remove(px);
  snprintf(args, sizeof args, "\"%s\" --solver %s --precond jacobi --rtol 1e-10 --json --out \"%s\"", mpath,
           solver, px);
  int rc = solve(tag, args, out, err);
  PK_EXPECT(rc == 0, "exit %d: %s", rc, err);
  PK_EXPECT(json_one_object(out), "%s", out);
  PK_EXPECT(json_bool(out, "converged") == 1, "%s", out);
  PK_EXPECT(json_str_is(out, "solver", solver) && json_str_is(out, "precond", "jacobi"), "%s", out);
  double rel = NAN;
  PK_EXPECT(json_num(out, "rel_residual", &rel) == 0 && rel <= 1e-10, "rel_residual %g", rel);

  pkrylov_context ctx = NULL;
  pkrylov_operator A = NULL;
  PK_REQUIRE_OK(ctx, pkrylov_context_create(PKRYLOV_BACKEND_CPU, &ctx));
  PK_REQUIRE_OK(ctx, pkrylov_operator_create_from_mtx(ctx, mpath, &A));
  int64_t n = 0, nx = 0;
  pkrylov_operator_get_info(A, &n, NULL, NULL, NULL, NULL, NULL);
  double *ones = malloc(sizeof(double) * (size_t)n), *b = malloc(sizeof(double) * (size_t)n);
  double *xref = malloc(sizeof(double) * (size_t)n);
  double *x = read_vec(px, &nx);
  PK_EXPECT(x && nx == n, "solution file %s: n = %lld", px, (long long)nx);
  if (x && nx == n && ones && b && xref) {
    for (int64_t i = 0; i < n; i++) ones[i] = 1.0;
    PK_EXPECT(pk_test_csr_matvec(A, ones, b) == 0, "csr matvec");
    PK_EXPECT(pk_test_dense_solve(A, b, xref) == 0, "dense solve");
    double d = pk_test_rel_diff(n, x, xref);
    PK_EXPECT(d <= 1e-6, "||x - x_dense|| / ||x_dense|| = %.3e", d);
    double round = 0, mine = indep_relres(mpath, NULL, px, &round);
    PK_EXPECT(mine <= 1e-10 * (1 + 1e-6), "recomputed relative residual %.3e", mine);
    /* cond 195: here the residual is far above its rounding level and the comparison is sharp */
    PK_EXPECT(round <= 1e-2 * mine, "comparison not sharp: residual %.3e, rounding %.3e", mine, round);
    PK_EXPECT(fabs(mine - rel) <= 1e-6 * mine + round, "JSON %.17g vs recomputed %.17g", rel, mine);
  }
  free(x), free(xref), free(b), free(ones);
  pkrylov_operator_destroy(&A);
  pkrylov_context_destroy(&ctx);
  PK_TEST_END();
}

PK_TEST_CASE(matrix_cg_dense) { return check_matrix_vs_dense("matrix_cg", "cg"); }

PK_TEST_CASE(matrix_pipecg_dense) { return check_matrix_vs_dense("matrix_pipecg", "pipecg"); }

PK_TEST_CASE(matrix_bicgstab_dense) { return check_matrix_vs_dense("matrix_bicgstab", "bicgstab"); }

PK_TEST_CASE(matrix_pipebicgstab_dense) { return check_matrix_vs_dense("matrix_pipebicgstab", "pipebicgstab"); }

/** A nonsymmetric matrix (orsirr_2, cond 6e4) with BiCGStab and Jacobi: converged, the residual recomputed
 *  from the written solution, the solution against a dense LAPACK solve. */
PK_TEST_CASE(matrix_bicgstab_nonsymmetric) {
  const char *mp = pk_test_matrix_path("orsirr_2.mtx");
  if (!mp) return PK_SKIP;
  char mpath[PK_PATH], out[PK_CAP], err[PK_CAP], args[PK_ARGS], px[PK_PATH];
  snprintf(mpath, sizeof mpath, "%s", mp);
  tmp(px, sizeof px, "orsirr_bicgstab", "x.mtx");
  remove(px);
  snprintf(args, sizeof args, "\"%s\" --solver bicgstab --precond jacobi --rtol 1e-10 --maxit 5000 --json --out \"%s\"", mpath,
           px);
  int rc = solve("orsirr_bicgstab", args, out, err);
  PK_EXPECT(rc == 0, "exit %d: %s", rc, err);
  PK_EXPECT(json_bool(out, "converged") == 1 && json_str_is(out, "solver", "bicgstab"), "%s", out);
  double round = 0, mine = indep_relres(mpath, NULL, px, &round);
  PK_EXPECT(mine <= 1e-10 * (1 + 1e-6), "recomputed relative residual %.3e", mine);
  pkrylov_context ctx = NULL;
  pkrylov_operator A = NULL;
  PK_REQUIRE_OK(ctx, pkrylov_context_create(PKRYLOV_BACKEND_CPU, &ctx));
  PK_REQUIRE_OK(ctx, pkrylov_operator_create_from_mtx(ctx, mpath, &A));
  int64_t n = 0, nx = 0;
  pkrylov_operator_get_info(A, &n, NULL, NULL, NULL, NULL, NULL);
  double *ones = malloc(sizeof(double) * (size_t)n), *b = malloc(sizeof(double) * (size_t)n);
  double *xref = malloc(sizeof(double) * (size_t)n);
  double *x = read_vec(px, &nx);
  PK_EXPECT(x && nx == n, "solution file %s", px);
  if (x && nx == n) {
    for (int64_t i = 0; i < n; i++) ones[i] = 1.0;
    pk_test_csr_matvec(A, ones, b);
    PK_EXPECT(pk_test_dense_solve(A, b, xref) == 0, "dense solve");
    PK_EXPECT(pk_test_rel_diff(n, x, xref) <= 1e-5, "vs dense %.3e", pk_test_rel_diff(n, x, xref));
  }
  free(x), free(xref), free(b), free(ones);
  pkrylov_operator_destroy(&A);
  pkrylov_context_destroy(&ctx);
  PK_TEST_END();
}

/**
 * The GMRES family from the command line on orsirr_2 (nonsymmetric, cond 6e4) with Jacobi and the given
 * --restart / --step: converged, the residual recomputed from the written solution, the solution against a
 * dense LAPACK solve; a restart of 5 needs many more iterations than 30 (the option reaches the solver).
 */
static int check_gmres_cli(const char *tag, const char *solver, const char *opts, int *iterations) {
  const char *mp = pk_test_matrix_path("orsirr_2.mtx");
  if (!mp) return PK_SKIP;
  char mpath[PK_PATH], out[PK_CAP], err[PK_CAP], args[PK_ARGS], px[PK_PATH];
  snprintf(mpath, sizeof mpath, "%s", mp);
  tmp(px, sizeof px, tag, "x.mtx");
  remove(px);
  snprintf(args, sizeof args,
           "\"%s\" --solver %s %s --precond jacobi --rtol 1e-10 --maxit 20000 --json --out \"%s\"", mpath,
           solver, opts, px);
  int rc = solve(tag, args, out, err);
  PK_EXPECT(rc == 0, "%s: exit %d: %s", tag, rc, err);
  PK_EXPECT(json_bool(out, "converged") == 1 && json_str_is(out, "solver", solver), "%s", out);
  double its = -1;
  PK_EXPECT(json_num(out, "iterations", &its) == 0 && its > 0, "%s", out);
  *iterations = (int)its;
  double round = 0, mine = indep_relres(mpath, NULL, px, &round);
  PK_EXPECT(mine <= 1e-10 * (1 + 1e-6), "%s: recomputed relative residual %.3e", tag, mine);
  pkrylov_context ctx = NULL;
  pkrylov_operator A = NULL;
  PK_REQUIRE_OK(ctx, pkrylov_context_create(PKRYLOV_BACKEND_CPU, &ctx));
  PK_REQUIRE_OK(ctx, pkrylov_operator_create_from_mtx(ctx, mpath, &A));
  int64_t n = 0, nx = 0;
  pkrylov_operator_get_info(A, &n, NULL, NULL, NULL, NULL, NULL);
  double *ones = malloc(sizeof(double) * (size_t)n), *b = malloc(sizeof(double) * (size_t)n);
  double *xref = malloc(sizeof(double) * (size_t)n);
  double *x = read_vec(px, &nx);
  PK_EXPECT(x && nx == n, "solution file %s", px);
  if (x && nx == n) {
    for (int64_t i = 0; i < n; i++) ones[i] = 1.0;
    pk_test_csr_matvec(A, ones, b);
    PK_EXPECT(pk_test_dense_solve(A, b, xref) == 0, "dense solve");
    PK_EXPECT(pk_test_rel_diff(n, x, xref) <= 1e-5, "%s: vs dense %.3e", tag, pk_test_rel_diff(n, x, xref));
  }
  free(x), free(xref), free(b), free(ones);
  pkrylov_operator_destroy(&A);
  pkrylov_context_destroy(&ctx);
  PK_TEST_END();
}

PK_TEST_CASE(matrix_gmres_restart) {
  int its30 = 0, its5 = 0;
  int rc = check_gmres_cli("orsirr_gmres30", "gmres", "--restart 30", &its30);
  if (rc != PK_PASS) return rc;
  rc = check_gmres_cli("orsirr_gmres5", "gmres", "--restart 5", &its5);
  PK_EXPECT(its5 > 2 * its30, "GMRES(5) %d iterations vs GMRES(30) %d: --restart not applied?", its5, its30);
  return rc != PK_PASS ? rc : (pk_test_failures ? PK_FAIL : PK_PASS);
}

PK_TEST_CASE(matrix_pipegmres) {
  int its = 0;
  return check_gmres_cli("orsirr_pipegmres", "pipegmres", "--restart 40", &its);
}

PK_TEST_CASE(matrix_fgmres) {
  int its = 0;
  return check_gmres_cli("orsirr_fgmres", "fgmres", "--restart 20", &its);
}

PK_TEST_CASE(matrix_cagmres_steps) {
  int its = 0, rc = check_gmres_cli("orsirr_cagmres4", "cagmres", "--restart 32 --step 4", &its);
  if (rc != PK_PASS) return rc;
  return check_gmres_cli("orsirr_cagmres_auto", "cagmres", "--restart 30 --step auto", &its);
}

PK_TEST_CASE(matrix_column_lap3d) {
  const char *mp = pk_test_matrix_path("lap3D_7pt_n20.mtx");
  if (!mp) return PK_SKIP;
  char mpath[PK_PATH], out[PK_CAP], err[PK_CAP], args[PK_ARGS], px[PK_PATH];
  snprintf(mpath, sizeof mpath, "%s", mp);
  tmp(px, sizeof px, "lap3d", "x.mtx");
  remove(px);
  snprintf(args, sizeof args, "\"%s\" --precond column --levels 20 --layout kslow --json --out \"%s\"",
           mpath, px);
  int rc = solve("lap3d", args, out, err);
  PK_EXPECT(rc == 0, "exit %d: %s", rc, err);
  PK_EXPECT(json_bool(out, "converged") == 1, "%s", out);
  PK_EXPECT(json_str_is(out, "precond", "column"), "%s", out);
  double rel = NAN, lev = 0;
  PK_EXPECT(json_num(out, "rel_residual", &rel) == 0 && rel <= 1e-8, "rel_residual %g", rel);
  PK_EXPECT(json_num(out, "levels", &lev) == 0 && lev == 20, "levels %g", lev);
  double round = 0, mine = indep_relres(mpath, NULL, px, &round);
  PK_EXPECT(mine <= 1e-8 * (1 + 1e-6), "recomputed relative residual %.3e", mine);
  PK_EXPECT(round <= 1e-2 * mine, "comparison not sharp: residual %.3e, rounding %.3e", mine, round);
  PK_EXPECT(fabs(mine - rel) <= 1e-6 * mine + round, "JSON %.17g vs recomputed %.17g", rel, mine);
  PK_TEST_END();
}

/** Write a vector file of n pseudo-random values (seed) into path; 0 on success. */
static int write_random(const char *path, int64_t n, uint64_t seed) {
  double *v = malloc(sizeof(double) * (size_t)n);
  if (!v) return 1;
  for (int64_t i = 0; i < n; i++) v[i] = pk_test_rand(&seed);
  int st = pkrylov_mtx_write_vector(NULL, path, n, v);
  free(v);
  return st;
}

PK_TEST_CASE(rhs_option) {
  const char *mp = pk_test_matrix_path("gr_900_900_crg.mtx");
  if (!mp) return PK_SKIP;
  char mpath[PK_PATH], out[PK_CAP], err[PK_CAP], args[PK_ARGS], px[PK_PATH], pb[PK_PATH];
  snprintf(mpath, sizeof mpath, "%s", mp);
  tmp(px, sizeof px, "rhs", "x.mtx");
  tmp(pb, sizeof pb, "rhs", "b.mtx");
  remove(px);
  PK_REQUIRE_OK(NULL, write_random(pb, 900, 42));
  snprintf(args, sizeof args, "\"%s\" --solver cg --rhs \"%s\" --json --out \"%s\"", mpath, pb, px);
  int rc = solve("rhs", args, out, err);
  PK_EXPECT(rc == 0, "exit %d: %s", rc, err);
  /* the residual against the random b (not A * ones) must be small: --rhs was used */
  double round = 0, mine = indep_relres(mpath, pb, px, &round), rel = NAN;
  PK_EXPECT(mine <= 1e-8 * (1 + 1e-6), "relative residual against --rhs: %.3e", mine);
  PK_EXPECT(round <= 1e-2 * mine, "comparison not sharp: residual %.3e, rounding %.3e", mine, round);
  PK_EXPECT(json_num(out, "rel_residual", &rel) == 0 && fabs(mine - rel) <= 1e-6 * mine + round,
            "JSON %.17g vs recomputed %.17g", rel, mine);
  PK_TEST_END();
}

PK_TEST_CASE(x0_exact_zero_iterations) {
  const char *mp = pk_test_matrix_path("gr_900_900_crg.mtx");
  if (!mp) return PK_SKIP;
  char mpath[PK_PATH], out[PK_CAP], err[PK_CAP], args[PK_ARGS], px0[PK_PATH];
  snprintf(mpath, sizeof mpath, "%s", mp);
  tmp(px0, sizeof px0, "x0exact", "x0.mtx");
  pkrylov_context ctx = NULL;
  pkrylov_operator A = NULL;
  PK_REQUIRE_OK(ctx, pkrylov_context_create(PKRYLOV_BACKEND_CPU, &ctx));
  PK_REQUIRE_OK(ctx, pkrylov_operator_create_from_mtx(ctx, mpath, &A));
  double *ones = malloc(900 * sizeof(double)), *b = malloc(900 * sizeof(double));
  double *xref = malloc(900 * sizeof(double));
  if (ones && b && xref) {
    /* x0 = the dense LAPACK solution of A x = A * ones: its residual is at rounding level */
    for (int i = 0; i < 900; i++) ones[i] = 1.0;
    PK_EXPECT(pk_test_csr_matvec(A, ones, b) == 0, "matvec");
    PK_EXPECT(pk_test_dense_solve(A, b, xref) == 0, "dense solve");
    PK_EXPECT(pkrylov_mtx_write_vector(NULL, px0, 900, xref) == PKRYLOV_SUCCESS, "write x0");
    snprintf(args, sizeof args, "\"%s\" --x0 \"%s\" --json", mpath, px0);
    int rc = solve("x0exact", args, out, err);
    double it = -1;
    PK_EXPECT(rc == 0, "exit %d: %s", rc, err);
    PK_EXPECT(json_bool(out, "converged") == 1, "%s", out);
    PK_EXPECT(json_num(out, "iterations", &it) == 0 && it == 0, "iterations %g (expected 0): %s", it, out);
    /* the same without --x0 needs iterations: the option made the difference */
    snprintf(args, sizeof args, "\"%s\" --json", mpath);
    rc = solve("x0exact_none", args, out, err);
    PK_EXPECT(rc == 0 && json_num(out, "iterations", &it) == 0 && it > 0, "without --x0: %g", it);
  }
  free(ones), free(b), free(xref);
  pkrylov_operator_destroy(&A);
  pkrylov_context_destroy(&ctx);
  PK_TEST_END();
}

PK_TEST_CASE(x0_returned_with_maxit0) {
  const char *mp = pk_test_matrix_path("gr_900_900_crg.mtx");
  if (!mp) return PK_SKIP;
  char mpath[PK_PATH], out[PK_CAP], err[PK_CAP], args[PK_ARGS], px0[PK_PATH], px[PK_PATH];
  snprintf(mpath, sizeof mpath, "%s", mp);
  tmp(px0, sizeof px0, "x0maxit0", "x0.mtx");
  tmp(px, sizeof px, "x0maxit0", "x.mtx");
  remove(px);
  PK_REQUIRE_OK(NULL, write_random(px0, 900, 7));
  snprintf(args, sizeof args, "\"%s\" --x0 \"%s\" --maxit 0 --json --out \"%s\"", mpath, px0, px);
  int rc = solve("x0maxit0", args, out, err);
  PK_EXPECT(rc == 1, "exit %d (expected 1, not converged): %s", rc, err);
  PK_EXPECT(json_bool(out, "converged") == 0, "%s", out);
  int64_t n0 = 0, n1 = 0;
  double *x0 = read_vec(px0, &n0), *x = read_vec(px, &n1);
  PK_EXPECT(x0 && x && n0 == 900 && n1 == 900, "vectors %lld %lld", (long long)n0, (long long)n1);
  if (x0 && x && n0 == n1) {
    /* no iteration: the written x is the initial guess, to the last bit (17 digits round-trip) */
    int same = 1;
    for (int64_t i = 0; i < n0; i++) same &= x[i] == x0[i];
    PK_EXPECT(same, "x differs from x0 after 0 iterations");
    /* and the program's residual is that of x0, recomputed here */
    double round = 0, mine = indep_relres(mpath, NULL, px0, &round), rel = NAN;
    PK_EXPECT(json_num(out, "rel_residual", &rel) == 0 && fabs(rel - mine) <= 1e-6 * mine + round,
              "JSON %.17g vs recomputed %.17g", rel, mine);
  }
  free(x0), free(x);
  PK_TEST_END();
}

PK_TEST_CASE(maxit_not_converged) {
  const char *mp = pk_test_matrix_path("gr_900_900_crg.mtx");
  if (!mp) return PK_SKIP;
  char mpath[PK_PATH], out[PK_CAP], err[PK_CAP], args[PK_ARGS], px[PK_PATH];
  snprintf(mpath, sizeof mpath, "%s", mp);
  static const char *const solvers[] = {"cg", "pipecg"};
  for (int k = 0; k < 2; k++) {
    tmp(px, sizeof px, "maxit", solvers[k]);
    remove(px);
    snprintf(args, sizeof args, "\"%s\" --solver %s --precond none --maxit 2 --json --out \"%s\"", mpath,
             solvers[k], px);
    int rc = solve("maxit", args, out, err);
    double it = -1;
    PK_EXPECT(rc == 1, "%s: exit %d (expected 1): %s", solvers[k], rc, err);
    PK_EXPECT(json_one_object(out), "%s", out);
    PK_EXPECT(json_bool(out, "converged") == 0, "%s", out);
    PK_EXPECT(json_str_is(out, "reason", "max_iterations"), "%s", out);
    PK_EXPECT(json_num(out, "iterations", &it) == 0 && it == 2, "iterations %g", it);
    int64_t n = 0;
    double *x = read_vec(px, &n);
    PK_EXPECT(x && n == 900 && all_finite(n, x), "x not written or not finite (n = %lld)", (long long)n);
    if (x && n == 900) {
      /* two iterations from zero reduce the residual below ||b|| but not to 1e-8 */
      double round = 0, mine = indep_relres(mpath, NULL, px, &round);
      PK_EXPECT(mine > 1e-8 && mine < 1.0, "relative residual after 2 iterations %.3e", mine);
    }
    free(x);
  }
  PK_TEST_END();
}

/** Check a history file: header, then lines "i,value" for i = 0..lines-1; returns the data lines. */
static int check_history(const char *path, double *first, double *last) {
  FILE *f = fopen(path, "r");
  if (!f) return -1;
  char line[256];
  int rows = 0, ok = fgets(line, sizeof line, f) && strcmp(line, "iteration,residual\n") == 0;
  while (ok && fgets(line, sizeof line, f)) {
    int i = -1;
    double v = NAN;
    ok = sscanf(line, "%d,%lf", &i, &v) == 2 && i == rows && isfinite(v) && v >= 0;
    if (rows == 0) *first = v;
    *last = v;
    rows++;
  }
  fclose(f);
  return ok ? rows : -1;
}

PK_TEST_CASE(history_lines) {
  const char *mp = pk_test_matrix_path("gr_900_900_crg.mtx");
  if (!mp) return PK_SKIP;
  char mpath[PK_PATH], out[PK_CAP], err[PK_CAP], args[PK_ARGS], ph[PK_PATH], px[PK_PATH];
  snprintf(mpath, sizeof mpath, "%s", mp);
  tmp(ph, sizeof ph, "history", "h.csv");
  tmp(px, sizeof px, "history", "x.mtx");
  /* ||b|| = ||A * ones|| computed here: the history starts there (x0 = 0) */
  pkrylov_context ctx = NULL;
  pkrylov_operator A = NULL;
  PK_REQUIRE_OK(ctx, pkrylov_context_create(PKRYLOV_BACKEND_CPU, &ctx));
  PK_REQUIRE_OK(ctx, pkrylov_operator_create_from_mtx(ctx, mpath, &A));
  double ones[900], b[900];
  for (int i = 0; i < 900; i++) ones[i] = 1.0;
  PK_EXPECT(pk_test_csr_matvec(A, ones, b) == 0, "matvec");
  double bnorm = pk_test_norm(900, b);
  pkrylov_operator_destroy(&A);
  pkrylov_context_destroy(&ctx);

  /* not converged: maxit + 1 entries */
  remove(ph);
  snprintf(args, sizeof args, "\"%s\" --precond none --maxit 5 --history \"%s\" --out \"%s\"", mpath, ph,
           px);
  int rc = solve("history", args, out, err);
  PK_EXPECT(rc == 1, "exit %d: %s", rc, err);
  double first = NAN, last = NAN;
  int rows = check_history(ph, &first, &last);
  PK_EXPECT(rows == 6, "%d history lines after 5 iterations (expected 6 plus the header)", rows);
  PK_EXPECT(fabs(first - bnorm) <= 1e-12 * bnorm, "history[0] %.17g vs ||b|| %.17g", first, bnorm);
  PK_EXPECT(count_lines(ph) == 7, "file has %d lines", count_lines(ph));

  /* converged: iterations + 1 entries, the last one below rtol ||b|| */
  remove(ph);
  snprintf(args, sizeof args, "\"%s\" --solver pipecg --json --history \"%s\"", mpath, ph);
  rc = solve("history_conv", args, out, err);
  double it = -1;
  PK_EXPECT(rc == 0, "exit %d: %s", rc, err);
  PK_EXPECT(json_num(out, "iterations", &it) == 0 && it > 0, "%s", out);
  rows = check_history(ph, &first, &last);
  PK_EXPECT(rows == (int)it + 1, "%d history lines for %g iterations", rows, it);
  PK_EXPECT(last <= 1e-8 * bnorm * (1 + 1e-9), "last history value %.3e > rtol ||b|| = %.3e", last,
            1e-8 * bnorm);
  PK_TEST_END();
}

/** Expect exit status 2, nothing on stdout, and every needle in the stderr text. */
static void expect_usage(const char *tag, const char *args, const char *needle1, const char *needle2) {
  char out[PK_CAP], err[PK_CAP];
  int rc = solve(tag, args, out, err);
  PK_EXPECT(rc == 2, "'%s': exit %d (expected 2); stderr: %s", args, rc, err);
  PK_EXPECT(out[0] == '\0', "'%s': stdout not empty: %s", args, out);
  PK_EXPECT(needle1 == NULL || strstr(err, needle1), "'%s': stderr lacks '%s': %s", args, needle1, err);
  PK_EXPECT(needle2 == NULL || strstr(err, needle2), "'%s': stderr lacks '%s': %s", args, needle2, err);
}

PK_TEST_CASE(usage_options) {
  expect_usage("u_unknown", "--problem thinshell:4,4,4 --json --frobnicate", "--frobnicate", NULL);
  expect_usage("u_missing", "--problem thinshell:4,4,4 --json --rtol", "--rtol", "value");
  expect_usage("u_none", "--json", "--problem", NULL);
  expect_usage("u_both", "a.mtx --problem thinshell:4,4,4 --json", "a.mtx", NULL);
  expect_usage("u_two", "a.mtx b.mtx --json", "b.mtx", NULL);
  PK_TEST_END();
}

PK_TEST_CASE(usage_numbers) {
  expect_usage("u_rtol", "--problem thinshell:4,4,4 --json --rtol abc", "--rtol", "abc");
  expect_usage("u_rtol2", "--problem thinshell:4,4,4 --json --rtol 1e-8x", "--rtol", "1e-8x");
  expect_usage("u_rtol3", "--problem thinshell:4,4,4 --json --rtol nan", "--rtol", NULL);
  expect_usage("u_atol", "--problem thinshell:4,4,4 --json --atol -1", "--atol", NULL);
  expect_usage("u_zero", "--problem thinshell:4,4,4 --json --rtol 0 --atol 0", "--rtol", NULL);
  expect_usage("u_maxit", "--problem thinshell:4,4,4 --json --maxit -1", "--maxit", "-1");
  expect_usage("u_maxit2", "--problem thinshell:4,4,4 --json --maxit 2.5", "--maxit", NULL);
  expect_usage("u_maxit3", "--problem thinshell:4,4,4 --json --maxit 99999999999", "--maxit", NULL);
  expect_usage("u_levels", "--problem thinshell:4,4,4 --json --levels 0", "--levels", NULL);
  expect_usage("u_replace", "--problem thinshell:4,4,4 --json --replace x", "--replace", NULL);
  expect_usage("u_replace2", "--problem thinshell:4,4,4 --json --replace -1", "--replace", "'auto'");
  expect_usage("u_replace3", "--problem thinshell:4,4,4 --json --replace Auto", "--replace", "Auto");
  PK_TEST_END();
}

/**
 * --threads: the count the library uses is "threads" in --json (the default computed here: the CPUs of this
 * process's affinity mask, which the child inherits, capped by OMP_NUM_THREADS when it is set; the CPU
 * backend); a value out of 0..PKRYLOV_MAX_THREADS or not an integer is a usage error (exit 2) naming it.
 */
PK_TEST_CASE(threads_option) {
  cpu_set_t set;
  CPU_ZERO(&set);
  PK_REQUIRE(sched_getaffinity(0, sizeof set, &set) == 0, "sched_getaffinity");
  int want = CPU_COUNT(&set);
  const char *env = getenv("OMP_NUM_THREADS");
  const long cap = env ? strtol(env, NULL, 10) : 0;
  if (cap > 0 && cap < want) want = (int)cap;
  char out[PK_CAP], err[PK_CAP];
  double t = -1;
  static const char base[] = "--problem thinshell:6,6,4 --backend cpu";
  char args0[256];
  snprintf(args0, sizeof args0, "%s --json", base);
  PK_EXPECT(solve("threads_default", args0, out, err) == 0, "%s", err);
  PK_EXPECT(json_num(out, "threads", &t) == 0 && t == want, "default: \"threads\" %g, expected %d", t, want);
  snprintf(args0, sizeof args0, "%s --threads 3 --json", base);
  PK_EXPECT(solve("threads_3", args0, out, err) == 0, "%s", err);
  PK_EXPECT(json_num(out, "threads", &t) == 0 && t == 3, "--threads 3: \"threads\" %g", t);
  snprintf(args0, sizeof args0, "%s --threads 0 --json", base);
  PK_EXPECT(solve("threads_0", args0, out, err) == 0, "%s", err);
  PK_EXPECT(json_num(out, "threads", &t) == 0 && t == want, "--threads 0: \"threads\" %g, expected %d", t,
            want);
  snprintf(args0, sizeof args0, "%s --threads 2", base);
  PK_EXPECT(solve("threads_text", args0, out, err) == 0, "%s", err);
  PK_EXPECT(strstr(out, "threads       2") != NULL, "the text report shows the threads: %s", out);
  expect_usage("u_threads_neg", "--problem thinshell:4,4,4 --json --threads -1", "--threads", "-1");
  char args[128], big[32];
  snprintf(big, sizeof big, "%d", PKRYLOV_MAX_THREADS + 1);
  snprintf(args, sizeof args, "--problem thinshell:4,4,4 --json --threads %s", big);
  expect_usage("u_threads_big", args, "--threads", big);
  expect_usage("u_threads_word", "--problem thinshell:4,4,4 --json --threads many", "--threads", "many");
  expect_usage("u_threads_none", "--problem thinshell:4,4,4 --json --threads", "--threads", "value");
  PK_TEST_END();
}

PK_TEST_CASE(usage_problem) {
  expect_usage("u_p1", "--problem thinshell:0,4,4 --json", "--problem", "thinshell:0,4,4");
  expect_usage("u_p2", "--problem thinshell:4,4 --json", "--problem", "thinshell:4,4");
  expect_usage("u_p3", "--problem thinshell:4,4,4,4 --json", "--problem", NULL);
  expect_usage("u_p4", "--problem thinshell:4,-4,4 --json", "--problem", NULL);
  expect_usage("u_p5", "--problem thinshell:4,4,4x --json", "--problem", NULL);
  expect_usage("u_p6", "--problem cube:4,4,4 --json", "--problem", NULL);
  expect_usage("u_p7", "--problem thinshell:4,4,4 --geometry sphere --json", "--geometry", "sphere");
  PK_TEST_END();
}

PK_TEST_CASE(usage_names) {
  expect_usage("u_solver", "--problem thinshell:4,4,4 --json --solver foo", "--solver", "foo");
  expect_usage("u_precond", "--problem thinshell:4,4,4 --json --precond ilu", "--precond", "ilu");
  expect_usage("u_layout", "--problem thinshell:4,4,4 --json --layout kmid", "--layout", "kmid");
  expect_usage("u_backend", "--problem thinshell:4,4,4 --json --backend opencl", "--backend", "opencl");
  expect_usage("u_precision", "--problem thinshell:4,4,4 --json --precision fp16", "--precision", "fp16");
  /* mixed precision on the CPU backend: the library refuses, its message names the argument */
  expect_usage("u_precision_cpu", "--problem thinshell:4,4,4 --json --backend cpu --precision mixed", "--precision",
               "precision");
  PK_TEST_END();
}

PK_TEST_CASE(usage_stop_rule) {
  expect_usage("u_stop", "--problem thinshell:4,4,4 --json --stop strict", "--stop", "strict");
  expect_usage("u_stop2", "--problem thinshell:4,4,4 --json --stop", "--stop", "value");
  /* the library refuses the minimum-residual iterate for GMRES: its message names the argument */
  expect_usage("u_minres", "--problem thinshell:4,4,4 --json --solver gmres --min-residual", "--min-residual",
               "flag");
  expect_usage("u_srcg", "--problem thinshell:4,4,4 --json --solver SRCG", "--solver", "SRCG");
  PK_TEST_END();
}

PK_TEST_CASE(usage_column_levels) {
  const char *mp = pk_test_matrix_path("gr_900_900_crg.mtx");
  if (!mp) return PK_SKIP;
  char mpath[PK_PATH], args[PK_ARGS];
  snprintf(mpath, sizeof mpath, "%s", mp);
  snprintf(args, sizeof args, "\"%s\" --precond column --json", mpath);
  expect_usage("u_col", args, "--levels", NULL);
  /* 7 does not divide n = 900: the library refuses, its message names the levels */
  snprintf(args, sizeof args, "\"%s\" --precond column --levels 7 --json", mpath);
  expect_usage("u_col7", args, "levels", "7");
  PK_TEST_END();
}

PK_TEST_CASE(usage_files) {
  char args[PK_ARGS], pbad[PK_PATH], pmiss[PK_PATH], pvec[PK_PATH], pvec2[PK_PATH];
  tmp(pmiss, sizeof pmiss, "u_files", "no_such_matrix.mtx");
  remove(pmiss);
  snprintf(args, sizeof args, "\"%s\" --json", pmiss);
  expect_usage("u_miss", args, "no_such_matrix.mtx", NULL);

  /* a malformed matrix file: a non-numeric entry on line 3 */
  tmp(pbad, sizeof pbad, "u_files", "bad.mtx");
  FILE *f = fopen(pbad, "w");
  PK_EXPECT(f != NULL, "cannot write %s", pbad);
  if (f) {
    fprintf(f, "%%%%MatrixMarket matrix coordinate real general\n3 3 3\n1 1 x\n2 2 1.0\n3 3 1.0\n");
    fclose(f);
  }
  snprintf(args, sizeof args, "\"%s\" --json", pbad);
  expect_usage("u_bad", args, "bad.mtx", NULL);

  /* --rhs and --x0 with the wrong length (5 values for a 4x4x4 problem) */
  tmp(pvec, sizeof pvec, "u_files", "short.mtx");
  PK_REQUIRE_OK(NULL, write_random(pvec, 5, 1));
  snprintf(args, sizeof args, "--problem thinshell:4,4,4 --rhs \"%s\" --json", pvec);
  expect_usage("u_rhs", args, "--rhs", "5");
  snprintf(args, sizeof args, "--problem thinshell:4,4,4 --x0 \"%s\" --json", pvec);
  expect_usage("u_x0", args, "--x0", NULL);
  tmp(pvec2, sizeof pvec2, "u_files", "no_such_rhs.mtx");
  remove(pvec2);
  snprintf(args, sizeof args, "--problem thinshell:4,4,4 --rhs \"%s\" --json", pvec2);
  expect_usage("u_rhs_miss", args, "no_such_rhs.mtx", NULL);
  PK_TEST_END();
}

/* ---- issue 14: --monitor, outputs checked first, the symmetry warning ---------------------------- */

/**
 * --monitor 4 on a small thin shell (CG, column preconditioner, x0 = 0): a line on stderr at every 4th
 * iteration and nowhere else (the solve takes far less than a second), each with the residual of the
 * --history file at that iteration, the reduction history[I] / history[0], a positive rate and the estimate
 * of the iterations left recomputed here from the history: the factor per iteration since the previous line
 * (over the whole solve when the residual rose), ceil(log(rtol ||b|| / r) / log(factor)).
 */
PK_TEST_CASE(monitor_lines) {
  char out[PK_CAP], err[PK_CAP], args[PK_ARGS], ph[PK_PATH];
  tmp(ph, sizeof ph, "monitor", "h.csv");
  remove(ph);
  snprintf(args, sizeof args, "--problem thinshell:16,16,8 --monitor 4 --quiet --json --history \"%s\"", ph);
  int rc = solve("monitor", args, out, err);
  PK_EXPECT(rc == 0, "exit %d: %s", rc, err);
  double its = -1, bnorm = -1;
  PK_REQUIRE(json_num(out, "iterations", &its) == 0 && json_num(out, "rhs_norm", &bnorm) == 0 && its > 8,
             "%s", out);
  double h[1024];
  int rows = 0;
  FILE *f = fopen(ph, "r");
  PK_REQUIRE(f != NULL, "history %s", ph);
  char line[512];
  while (fgets(line, sizeof line, f) && rows < 1024) {
    int i;
    double v;
    if (sscanf(line, "%d,%lf", &i, &v) == 2 && i == rows) h[rows++] = v;
  }
  fclose(f);
  PK_REQUIRE(rows == (int)its + 1, "%d history rows for %g iterations", rows, its);
  const double target = 1e-8 * bnorm;
  int nlines = 0, prev = 0;
  for (const char *p = strstr(err, "monitor: iteration "); p; p = strstr(p + 1, "monitor: iteration ")) {
    int it = -1;
    double res = -1, red = -1, rate = -1, left = -1;
    PK_EXPECT(sscanf(p, "monitor: iteration %d, residual %lf, reduction %lf, %lf it/s", &it, &res, &red,
                     &rate) == 4,
              "line: %.120s", p);
    nlines++;
    PK_EXPECT(it == 4 * nlines && it <= its, "line %d at iteration %d", nlines, it);
    if (it < 0 || it > (int)its) break;
    PK_EXPECT(fabs(res - h[it]) <= 1e-3 * h[it] && fabs(red - h[it] / h[0]) <= 1e-3 * h[it] / h[0] &&
                  rate > 0,
              "iteration %d: residual %g (history %g), reduction %g (%g), rate %g", it, res, h[it], red,
              h[it] / h[0], rate);
    const char *eol = strchr(p, '\n'), *more = strstr(p, "about ");
    double factor = pow(h[it] / h[prev], 1.0 / (it - prev));
    if (!(factor < 1.0)) factor = pow(h[it] / h[0], 1.0 / it);
    if (h[it] <= target) {
      const char *at = strstr(p, "at the tolerance");
      PK_EXPECT(at && at < eol, "iteration %d: below the tolerance: %.160s", it, p);
    } else if (factor < 1.0) {
      const double want = ceil(log(target / h[it]) / log(factor));
      PK_EXPECT(more && more < eol && sscanf(more, "about %lf more iterations", &left) == 1 &&
                    fabs(left - want) <= 1,
                "iteration %d: %g iterations left printed, %g recomputed: %.160s", it, left, want, p);
    } else {
      const char *no = strstr(p, "no estimate");
      PK_EXPECT(no && no < eol, "iteration %d: residual above the initial one: %.160s", it, p);
    }
    prev = it;
  }
  PK_EXPECT(nlines == (int)its / 4, "%d monitor lines for %g iterations", nlines, its);
  PK_TEST_END();
}

/**
 * --monitor with a K larger than the iterations: the lines come from the clock, at most one per second, so a
 * solve of T seconds prints floor(T) lines give or take one (solve time from the JSON report); a solve of
 * more than 2 s (CG without preconditioner on a 64 x 64 x 32 thin shell, 400 iterations: about 3 s on 2
 * cores) prints at least one.
 */
PK_TEST_CASE(monitor_every_second) {
  char out[PK_CAP], err[PK_CAP];
  int rc = solve("monitor_time",
                 "--problem thinshell:64,64,32 --precond none --maxit 400 --monitor 100000 --json", out, err);
  PK_EXPECT(rc == 1, "exit %d: %s", rc, err);
  double t = -1;
  PK_REQUIRE(json_num(out, "time_s", &t) == 0 && t > 0, "%s", out);
  int nlines = 0;
  for (const char *p = strstr(err, "monitor: iteration "); p; p = strstr(p + 1, "monitor: iteration "))
    nlines++;
  printf("solve %.2f s, %d monitor lines\n", t, nlines);
  PK_EXPECT(nlines <= (int)t + 1 && (t < 2.0 || nlines >= (int)t - 1), "%d lines in %.2f s", nlines, t);
  PK_TEST_END();
}

PK_TEST_CASE(usage_monitor) {
  expect_usage("u_mon0", "--problem thinshell:4,4,4 --json --monitor 0", "--monitor", "0");
  expect_usage("u_mon1", "--problem thinshell:4,4,4 --json --monitor -2", "--monitor", "-2");
  expect_usage("u_mon2", "--problem thinshell:4,4,4 --json --monitor often", "--monitor", "often");
  expect_usage("u_mon3", "--problem thinshell:4,4,4 --json --monitor", "--monitor", "value");
  PK_TEST_END();
}

/**
 * Every output is checked before any work: an --out or --history in a folder that does not exist, or that is
 * a folder, ends the run with exit status 2 and the reason before anything is read, saved or solved (the
 * --save-system files of the same command line are not written, nothing on stdout), and a writable output of
 * such a run is not left behind.
 */
PK_TEST_CASE(usage_outputs_first) {
  char args[PK_ARGS], pp[PK_PATH], pa[PK_PATH + 16], px[PK_PATH], pdir[PK_PATH], pmiss[PK_PATH + 32];
  tmp(pp, sizeof pp, "u_out", "sys");
  snprintf(pa, sizeof pa, "%s_A.mtx", pp);
  tmp(px, sizeof px, "u_out", "x.mtx");
  tmp(pdir, sizeof pdir, "u_out", "nodir");
  remove(pdir);
  snprintf(pmiss, sizeof pmiss, "%s/x.mtx", pdir);
  remove(pa), remove(px);
  snprintf(args, sizeof args, "--problem thinshell:8,8,6 --json --save-system \"%s\" --out \"%s\"", pp,
           pmiss);
  expect_usage("u_out_dir", args, "--out", "No such file or directory");
  PK_EXPECT(access(pa, F_OK) != 0, "--save-system wrote %s before --out was found unwritable", pa);
  snprintf(args, sizeof args, "--problem thinshell:8,8,6 --json --out \"%s\" --history \"%s\"", px, pmiss);
  expect_usage("u_hist_dir", args, "--history", "nodir");
  PK_EXPECT(access(px, F_OK) != 0, "the writable --out %s was left behind by a run that wrote nothing", px);
  snprintf(args, sizeof args, "--problem thinshell:8,8,6 --json --history \"%s\"", PK_TEST_TMPDIR);
  expect_usage("u_hist_isdir", args, "--history", "directory");
  snprintf(args, sizeof args, "--problem thinshell:8,8,6 --json --save-system \"%s/sys\"", pdir);
  expect_usage("u_save_dir", args, "--save-system", "sys_A.mtx");
  PK_TEST_END();
}

/** Write a small diagonally dominant matrix to path: symmetric values when sym, else A(1,2) != A(2,1). */
static int write_small_matrix(const char *path, int sym, const char *symmetry) {
  FILE *f = fopen(path, "w");
  if (!f) return 1;
  fprintf(f, "%%%%MatrixMarket matrix coordinate real %s\n4 4 %d\n", symmetry, sym == 2 ? 7 : 10);
  fprintf(f, "1 1 4\n2 2 4\n3 3 4\n4 4 4\n2 1 -1\n3 2 -1\n4 3 -0.5\n");
  if (sym != 2) fprintf(f, "1 2 %s\n2 3 -1\n3 4 -0.5\n", sym ? "-1" : "-1.5");
  return fclose(f) != 0;
}

/**
 * CG and pipelined CG on a matrix file that is not symmetric warn once on stderr, naming the pair of
 * entries; a "general" file with symmetric entries (ani4: symmetric to rounding, 3e-15), a "symmetric"
 * file, and the nonsymmetric matrix with GMRES do not.
 */
PK_TEST_CASE(nonsymmetric_warning) {
  char out[PK_CAP], err[PK_CAP], args[PK_ARGS], pn[PK_PATH], ps[PK_PATH], pl[PK_PATH];
  tmp(pn, sizeof pn, "nonsym", "a.mtx");
  tmp(ps, sizeof ps, "nonsym", "s.mtx");
  tmp(pl, sizeof pl, "nonsym", "l.mtx");
  PK_REQUIRE(write_small_matrix(pn, 0, "general") == 0 && write_small_matrix(ps, 1, "general") == 0 &&
                 write_small_matrix(pl, 2, "symmetric") == 0,
             "write");
  const char *solvers[2] = {"cg", "pipecg"};
  for (int k = 0; k < 2; k++) {
    snprintf(args, sizeof args, "\"%s\" --solver %s --json", pn, solvers[k]);
    solve("nonsym_cg", args, out, err);
    const char *w = strstr(err, "warning:");
    PK_EXPECT(w && !strstr(w + 1, "warning:") && strstr(w, "assumes a symmetric matrix") &&
                  strstr(w, "A(1,2) = -1.5") && strstr(w, "A(2,1) = -1"),
              "--solver %s: one warning naming the entries expected: %s", solvers[k], err);
    PK_EXPECT(json_one_object(out), "--solver %s: stdout %s", solvers[k], out);
  }
  const char *quiet[4] = {ps, pl, NULL, NULL};
  const char *qsolver[4] = {"cg", "pipecg", "gmres", "cg"};
  const char *ani4 = pk_test_matrix_path("ani4.mtx");
  quiet[2] = pn, quiet[3] = ani4;
  for (int k = 0; k < 4; k++) {
    if (!quiet[k]) continue;
    snprintf(args, sizeof args, "\"%s\" --solver %s --json --maxit 20", quiet[k], qsolver[k]);
    solve("nonsym_ok", args, out, err);
    PK_EXPECT(strstr(err, "warning") == NULL, "%s --solver %s: %s", quiet[k], qsolver[k], err);
  }
  PK_TEST_END();
}

/**
 * -o KEY=VALUE (library options): '-o help' lists them (every documented name, one line each); valid options
 * are accepted and change nothing a CPU solve computes (the same iterations and residual as without them);
 * an unknown name, a value out of range and a pair without '=' are usage errors (exit 2) quoting the
 * library's message; a bad PKRYLOV_OPTIONS in the environment is one too.
 */
PK_TEST_CASE(library_options) {
  char out[PK_CAP], err[PK_CAP], out2[PK_CAP];
  int rc = solve("o_help", "-o help", out, err);
  PK_EXPECT(rc == 0 && err[0] == '\0', "-o help: exit %d: %s", rc, err);
  static const char *const names[] = {"cuda.bind",     "cuda.csr_format", "cuda.csr_lanes", "cuda.kc",
                                      "cuda.l2pf",     "dist.nccl",       "dist.edge_comm", "dist.instrument",
                                      "cuda.fold",     "cuda.pdl",        "cuda.pipe_none", "cuda.timeline",
                                      "kry.graph",     "kry.fuse",        "kry.profile",    "kry.xfuse",
                                      "kry.cg",        "cuda.l2persist"};
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
    char pat[64];
    snprintf(pat, sizeof pat, "\n  %s ", names[i]);
    PK_EXPECT(strstr(out, pat), "-o help lacks the line of %s:\n%s", names[i], out);
  }
  PK_EXPECT(strstr(out, "PKRYLOV_OPTIONS") && strstr(out, "collective"), "-o help:\n%s", out);
  rc = solve("o_none", "--problem thinshell:6,5,4 --solver bicgstab --json", out, err);
  PK_EXPECT(rc == 0 && json_one_object(out), "without -o: exit %d: %s %s", rc, out, err);
  rc = solve("o_some", "--problem thinshell:6,5,4 --solver bicgstab --json -o kry.graph=0 --option=cuda.kc=16 "
                       "-o cuda.csr_format=dia -o kry.fuse=off",
             out2, err);
  PK_EXPECT(rc == 0 && json_one_object(out2), "with -o: exit %d: %s %s", rc, out2, err);
  double i1 = -1, i2 = -2, r1 = -1, r2 = -2;
  PK_EXPECT(!json_num(out, "iterations", &i1) && !json_num(out2, "iterations", &i2) && i1 == i2,
            "iterations %g and %g", i1, i2);
  PK_EXPECT(!json_num(out, "final_residual", &r1) && !json_num(out2, "final_residual", &r2) && r1 == r2,
            "final residual %.17g and %.17g", r1, r2);
  expect_usage("o_range", "--problem thinshell:4,4,4 --json -o cuda.kc=5000", "'-o'", "1..1024");
  expect_usage("o_unknown", "--problem thinshell:4,4,4 --json -o kry.grph=0", "unknown option 'kry.grph'", NULL);
  expect_usage("o_nokey", "--problem thinshell:4,4,4 --json -o kry.graph", "KEY=VALUE", "'-o'");
  expect_usage("o_empty", "--problem thinshell:4,4,4 --json -o =1", "KEY=VALUE", NULL);
  expect_usage("o_missing", "--problem thinshell:4,4,4 --json -o", "'-o'", "value");
  PK_REQUIRE(setenv("PKRYLOV_OPTIONS", "kry.graph=maybe", 1) == 0, "setenv");
  char err2[PK_CAP];
  rc = solve("o_env", "--problem thinshell:4,4,4 --json", out, err2);
  unsetenv("PKRYLOV_OPTIONS");
  PK_EXPECT(rc == 2 && strstr(err2, "PKRYLOV_OPTIONS") && strstr(err2, "kry.graph") && strstr(err2, "'maybe'"),
            "a bad PKRYLOV_OPTIONS: exit %d: %s", rc, err2);
  PK_TEST_END();
}

PK_TEST_CASE(usage_cuda_unavailable) {
  if (pkrylov_has_cuda()) return PK_SKIP;
  expect_usage("u_cuda", "--problem thinshell:4,4,4 --backend cuda --json", "cuda", "CUDA");
  PK_TEST_END();
}

/** --version: the library's version and one line per optional part, as the library reports them. */
PK_TEST_CASE(version_option) {
  char out[PK_CAP], err[PK_CAP], want[256];
  int rc = solve("version", "--version", out, err);
  PK_EXPECT(rc == 0 && err[0] == '\0', "--version: exit %d: %s", rc, err);
  snprintf(want, sizeof want, "pkrylov-solve (pkrylov) %d.%d.%d\nCUDA: %s\nMPI: %s\nNCCL: %s\nOpenMP: %s\n",
           PKRYLOV_VERSION_MAJOR, PKRYLOV_VERSION_MINOR, PKRYLOV_VERSION_PATCH,
           pkrylov_has_cuda() ? "yes" : "no", pkrylov_has_mpi() ? "yes" : "no",
           pkrylov_has_nccl() ? "yes" : "no", pkrylov_has_openmp() ? "yes" : "no");
  PK_EXPECT(strcmp(out, want) == 0, "--version printed:\n%s\nexpected:\n%s", out, want);
  /* the JSON report carries the version too */
  rc = solve("version_json", "--problem thinshell:4,4,4 --json", out, err);
  snprintf(want, sizeof want, "%d.%d.%d", PKRYLOV_VERSION_MAJOR, PKRYLOV_VERSION_MINOR,
           PKRYLOV_VERSION_PATCH);
  PK_EXPECT(rc == 0 && json_one_object(out) && json_str_is(out, "version", want), "exit %d: %s", rc, out);
  /* a value is refused like any unknown option */
  expect_usage("u_version", "--version=2", "--version=2", NULL);
  PK_TEST_END();
}

/* ---- tiled grids: --problem barotropic / cubesphere, --tiles, --periodic, --precond ainv ---- */

/**
 * The model problem kind 'b' (barotropic), 'c' (cubesphere) or 't' (thinshell) as a pk_grid_test.h global
 * problem: the coefficients from the library's functions, the neighbours from the test's own geometry
 * (coordinates; the cube's 3-D cell centres), not from the library's connectivity tables. A periodic thin
 * shell is closed by the rule of docs/model-problem.md, written here: the face across the boundary couples
 * the first and the last column with the coupling of the face between the first two, and both diagonals grow
 * by it.
 */
static int model_global(pkt_global *G, char kind, int fx, int fy, int nz, int perx, int pery) {
  pkt_global_make(G, kind == 'c' ? 6 : 1, fx, fy, nz, perx, pery, 0.0, 0, 1);
  for (int64_t q = 0; q < G->ncell; q++)
    G->mask[q] = 1, G->fV[q] = 0.0;
  if (kind == 'b')
    return pkrylov_barotropic_coefficients(fx, fy, PKRYLOV_PERIODIC_NONE + (perx ? 1 : 0) + (pery ? 2 : 0),
                                           G->fW, G->fS, G->fC, G->mask);
  pkrylov_thinshell_params p;
  int st = pkrylov_thinshell_params_default(fx, fy, nz, &p);
  if (!st && kind == 'c')
    return pkrylov_cubesphere_stencil_coefficients(&p, G->fW, G->fS, G->fV, G->fC);
  if (!st)
    st = pkrylov_thinshell_stencil_coefficients(&p, G->fW, G->fS, G->fV, G->fC);
  for (int64_t k = 0; k < nz; k++)
    for (int64_t j = 0; j < fy; j++)
      for (int64_t i = 0; i < fx; i++) {
        const int64_t q = i + fx * (j + fy * k);
        if (perx && i == 0) {
          const double w = G->fW[q + 1];
          G->fW[q] = w, G->fC[q] -= w, G->fC[q + fx - 1] -= w;
        }
        if (pery && j == 0) {
          const double w = G->fS[q + fx];
          G->fS[q] = w, G->fC[q] -= w, G->fC[q + fx * (fy - 1)] -= w;
        }
      }
  return st;
}

/**
 * ||b - A x|| / ||b|| over the wet cells, A the brute-force product of G, and in *round the bound on the
 * difference of two computations of it (32 eps || |b| + |A| |x| || / ||b||, as indep_relres()).
 */
static double brute_relres(const pkt_global *G, const double *b, const double *x, double *round) {
  const int64_t n = G->ncell;
  double *ax = malloc(sizeof(double) * (size_t)n), *s = malloc(sizeof(double) * (size_t)n);
  double *xa = malloc(sizeof(double) * (size_t)n), *c[4];
  pkt_global A = *G; /* the same neighbours, |coefficients| */
  for (int q = 0; q < 4; q++)
    c[q] = malloc(sizeof(double) * (size_t)n);
  A.fW = c[0], A.fS = c[1], A.fV = c[2], A.fC = c[3];
  for (int64_t q = 0; q < n; q++) {
    c[0][q] = fabs(G->fW[q]), c[1][q] = fabs(G->fS[q]), c[2][q] = fabs(G->fV[q]), c[3][q] = fabs(G->fC[q]);
    xa[q] = fabs(x[q]);
  }
  pkt_global_apply(G, 1, x, ax);
  pkt_global_apply(&A, 1, xa, s);
  double rr = 0, bb = 0, s2 = 0;
  for (int64_t q = 0; q < n; q++) {
    if (!G->mask[q])
      continue;
    rr += (b[q] - ax[q]) * (b[q] - ax[q]), bb += b[q] * b[q];
    s2 += (fabs(b[q]) + s[q]) * (fabs(b[q]) + s[q]);
  }
  *round = 32.0 * 2.220446049250313e-16 * sqrt(s2) / (bb > 0 ? sqrt(bb) : 1.0);
  free(ax), free(s), free(xa);
  for (int q = 0; q < 4; q++)
    free(c[q]);
  return bb > 0 ? sqrt(rr / bb) : sqrt(rr);
}

/** The content of a (small) file, malloc'ed; NULL when it cannot be read. */
static char *read_all(const char *path) {
  FILE *f = fopen(path, "rb");
  if (!f)
    return NULL;
  fseek(f, 0, SEEK_END);
  const long len = ftell(f);
  fseek(f, 0, SEEK_SET);
  char *t = malloc((size_t)len + 1);
  if (t && fread(t, 1, (size_t)len, f) != (size_t)len)
    free(t), t = NULL;
  if (t)
    t[len] = '\0';
  fclose(f);
  return t;
}

/** One run of a grid problem and what it wrote: the JSON, x (--out), the saved b and the saved matrix's path.
 */
typedef struct {
  int rc;
  char js[PK_CAP], err[PK_CAP];
  char apath[PK_PATH + 16], bpath[PK_PATH + 16], xpath[PK_PATH];
  double *x, *b;
  int64_t n;
} grid_run;

/** pkrylov-solve with args plus --json, --out and --save-system in the scratch folder (tag). */
static void grid_solve(const char *tag, const char *args, grid_run *r) {
  char pre[PK_PATH], full[PK_ARGS];
  memset(r, 0, sizeof *r);
  tmp(r->xpath, sizeof r->xpath, tag, "x.mtx");
  tmp(pre, sizeof pre, tag, "sys");
  snprintf(r->apath, sizeof r->apath, "%s_A.mtx", pre);
  snprintf(r->bpath, sizeof r->bpath, "%s_b.mtx", pre);
  remove(r->xpath), remove(r->apath), remove(r->bpath);
  snprintf(full, sizeof full, "%s --json --out \"%s\" --save-system \"%s\"", args, r->xpath, pre);
  r->rc = solve(tag, full, r->js, r->err);
  int64_t nb = 0;
  r->x = read_vec(r->xpath, &r->n);
  r->b = read_vec(r->bpath, &nb);
  if (nb != r->n)
    free(r->b), r->b = NULL;
}

static void grid_run_free(grid_run *r) {
  free(r->x), free(r->b), r->x = r->b = NULL;
}

/**
 * The checks of a converged grid run against G: exit 0, one JSON object with n and nnz (the saved matrix's
 * entries), the saved b equal to the brute-force A * ones, the saved matrix's product (plain CSR loop) equal
 * to the brute-force product of a random vector, and the solution's residual recomputed by brute force at
 * most rtol (the JSON value the same to rounding).
 */
static void check_grid_run(const grid_run *r, const pkt_global *G, double rtol, const char *what) {
  const int64_t n = G->ncell;
  PK_EXPECT(r->rc == 0, "%s: exit %d: %s", what, r->rc, r->err);
  PK_EXPECT(json_one_object(r->js) && json_bool(r->js, "grid") == 1, "%s: %s", what, r->js);
  PK_EXPECT(r->x && r->b && r->n == n, "%s: --out / --save-system have %lld values, expected %lld", what,
            (long long)r->n, (long long)n);
  if (!r->x || !r->b || r->n != n)
    return;
  double jn = -1, jnnz = -1, rel = NAN;
  PK_EXPECT(json_num(r->js, "n", &jn) == 0 && jn == n, "%s: \"n\" %g", what, jn);
  double *ones = malloc(sizeof(double) * (size_t)n), *bref = malloc(sizeof(double) * (size_t)n);
  double *v = malloc(sizeof(double) * (size_t)n), *y1 = malloc(sizeof(double) * (size_t)n);
  double *y2 = malloc(sizeof(double) * (size_t)n);
  uint64_t seed = 5;
  for (int64_t q = 0; q < n; q++)
    ones[q] = 1.0, v[q] = pk_test_rand(&seed);
  pkt_global_apply(G, 1, ones, bref);
  PK_EXPECT(pk_test_rel_diff(n, r->b, bref) <= 1e-14, "%s: saved b vs the brute-force A * ones: %.3e", what,
            pk_test_rel_diff(n, r->b, bref));
  pkrylov_context ctx = NULL;
  pkrylov_operator A = NULL;
  int64_t an = 0, annz = 0;
  if (pkrylov_context_create(PKRYLOV_BACKEND_CPU, &ctx) ||
      pkrylov_operator_create_from_mtx(ctx, r->apath, &A) ||
      pkrylov_operator_get_info(A, &an, &annz, NULL, NULL, NULL, NULL) || an != n ||
      pk_test_csr_matvec(A, v, y1)) {
    PK_EXPECT(0, "%s: cannot read back the saved matrix %s", what, r->apath);
  } else {
    pkt_global_apply(G, 1, v, y2);
    PK_EXPECT(pk_test_rel_diff(n, y1, y2) <= 1e-14, "%s: saved matrix vs brute force: %.3e", what,
              pk_test_rel_diff(n, y1, y2));
    PK_EXPECT(json_num(r->js, "nnz", &jnnz) == 0 && jnnz == annz, "%s: \"nnz\" %g, the saved matrix has %lld",
              what, jnnz, (long long)annz);
  }
  pkrylov_operator_destroy(&A);
  pkrylov_context_destroy(&ctx);
  double round = 0, mine = brute_relres(G, bref, r->x, &round);
  PK_EXPECT(mine <= rtol * (1 + 1e-6) + round, "%s: brute-force relative residual %.3e > rtol %.1e (+ %.1e)",
            what, mine, rtol, round);
  PK_EXPECT(json_num(r->js, "rel_residual", &rel) == 0 && fabs(mine - rel) <= 1e-6 * mine + round,
            "%s: JSON rel_residual %.17g vs recomputed %.17g (rounding %.3g)", what, rel, mine, round);
  free(ones), free(bref), free(v), free(y1), free(y2);
}

/** 1 when the two files have the same bytes (both readable). */
static int same_file(const char *a, const char *b) {
  char *s = read_all(a), *t = read_all(b);
  const int same = s && t && strcmp(s, t) == 0;
  free(s), free(t);
  return same;
}

/**
 * The library's own solve of the barotropic problem with walls on the ASSEMBLED global arrays: the one-tile
 * column stencil (pkrylov_operator_create_stencil7, nz = 1, the mask), the approximate inverse (0.51), b = A
 * * ones, exact sums (reproducible): the reference of the grid path's solves.
 */
static int lib_barotropic(const pkt_global *G, int32_t type, int32_t rule, int32_t minres, int32_t maxit,
                          double rtol, double *x, pkrylov_result *res) {
  pkrylov_context ctx;
  pkrylov_operator A;
  pkrylov_precond M;
  pkrylov_solver s;
  const int64_t n = G->ncell;
  PK_REQUIRE_OK(NULL, pkrylov_context_create(PKRYLOV_BACKEND_CPU, &ctx));
  PK_REQUIRE_OK(ctx, pkrylov_context_set_reproducible(ctx, 1));
  PK_REQUIRE_OK(
      ctx, pkrylov_operator_create_stencil7(ctx, G->fx, G->fy, 1, G->fW, G->fS, G->fV, G->fC, G->mask, &A));
  PK_REQUIRE_OK(ctx, pkrylov_precond_create_ainv(ctx, A, 0.51, &M));
  PK_REQUIRE_OK(ctx, pkrylov_solver_create(ctx, type, A, M, &s));
  PK_REQUIRE_OK(ctx, pkrylov_solver_set_tolerances(s, rtol, 0.0));
  PK_REQUIRE_OK(ctx, pkrylov_solver_set_max_iterations(s, maxit));
  PK_REQUIRE_OK(ctx, pkrylov_solver_set_stop_rule(s, rule));
  PK_REQUIRE_OK(ctx, pkrylov_solver_set_min_residual(s, minres));
  double *ones = malloc(sizeof(double) * (size_t)n), *b = malloc(sizeof(double) * (size_t)n);
  for (int64_t q = 0; q < n; q++)
    ones[q] = 1.0, x[q] = 0.0;
  PK_REQUIRE_OK(ctx, pkrylov_operator_apply(A, PKRYLOV_MEM_HOST, ones, b));
  PK_REQUIRE_OK(ctx, pkrylov_solver_solve(s, PKRYLOV_MEM_HOST, b, x));
  PK_REQUIRE_OK(ctx, pkrylov_solver_get_result(s, res));
  free(ones), free(b);
  pkrylov_solver_destroy(&s);
  pkrylov_precond_destroy(&M);
  pkrylov_operator_destroy(&A);
  pkrylov_context_destroy(&ctx);
  return PK_PASS;
}

/**
 * --problem barotropic: the default preconditioner ainv and periodicity x, --periodic none|x|y|xy, --tiles
 * (and the default one tile): each solution against the brute-force operator; with walls, the library's
 * one-tile stencil of the assembled arrays gives the same iterations and solution; the saved matrix is the
 * same for every tiling.
 */
PK_TEST_CASE(barotropic_tiles_periodic) {
  static const char *const pers[4] = {"none", "x", "y", "xy"};
  static const char *const tilings[3] = {"", "--tiles 3,2", "--tiles 4,4"};
  char args[PK_ARGS], tag[64], keep[PK_PATH + 24];
  for (int per = 0; per < 4; per++) {
    pkt_global G;
    PK_REQUIRE_OK(NULL, model_global(&G, 'b', 24, 12, 1, per & 1, (per & 2) != 0));
    for (int t = 0; t < 3; t++) {
      grid_run r;
      snprintf(tag, sizeof tag, "baro_%s_%d", pers[per], t);
      /* periodic x is the default: left out once */
      snprintf(args, sizeof args, "--problem barotropic:24,12 %s%s %s --reproducible",
               per == 1 && t == 0 ? "" : "--periodic ", per == 1 && t == 0 ? "" : pers[per], tilings[t]);
      grid_solve(tag, args, &r);
      check_grid_run(&r, &G, 1e-8, args);
      PK_EXPECT(json_str_is(r.js, "precond", "ainv") && json_str_is(r.js, "periodic", pers[per]) &&
                    json_str_is(r.js, "problem", "barotropic:24,12"),
                "'%s': %s", args, r.js);
      /* one rank: --tiles TX,TY per rank are TX x TY tiles in all */
      const char *want =
          t == 0   ? "\"tiles_per_rank\":[1,1],\"tile_grid\":[1,1],\"tile_size\":[24,12],\"ntiles\":1,"
                     "\"ntiles_per_rank\":[1,1],\"tile_layout\":\"blocks\""
          : t == 1 ? "\"tiles_per_rank\":[3,2],\"tile_grid\":[3,2],\"tile_size\":[8,6],\"ntiles\":6,"
                     "\"ntiles_per_rank\":[6,6],\"tile_layout\":\"blocks\""
                   : "\"tiles_per_rank\":[4,4],\"tile_grid\":[4,4],\"tile_size\":[6,3],\"ntiles\":16,"
                     "\"ntiles_per_rank\":[16,16],\"tile_layout\":\"blocks\"";
      PK_EXPECT(strstr(r.js, want) != NULL, "'%s': no %s in %s", args, want, r.js);
      /* the solution of b = A * ones is 1 at the wet cells (a well-conditioned 2-D problem) */
      double err = 0;
      for (int64_t q = 0; r.x && q < r.n; q++)
        if (G.mask[q])
          err = fmax(err, fabs(r.x[q] - 1.0));
      PK_EXPECT(r.x && err <= 1e-6, "'%s': max |x - 1| = %.3e at the wet cells", args, err);
      if (t == 0) {
        snprintf(keep, sizeof keep, "%s.keep", r.apath);
        rename(r.apath, keep);
      } else {
        PK_EXPECT(same_file(keep, r.apath), "'%s': the saved matrix differs from the one of one tile", args);
      }
      if (per == 0) { /* walls: the library's one-tile stencil of the global arrays, the same sums */
        double *xr = malloc(sizeof(double) * (size_t)G.ncell);
        pkrylov_result ref;
        double it = -1;
        if (lib_barotropic(&G, PKRYLOV_SOLVER_CG, PKRYLOV_STOP_CONFIRMED, 0, 1000, 1e-8, xr, &ref) != PK_PASS)
          return PK_FAIL;
        PK_EXPECT(json_num(r.js, "iterations", &it) == 0 && (int)it == ref.iterations,
                  "'%s': %g iterations, the one-tile stencil %d", args, it, ref.iterations);
        PK_EXPECT(r.x && r.n == G.ncell && pk_test_rel_diff(G.ncell, r.x, xr) <= 1e-12,
                  "'%s': the solution differs from the one-tile stencil's by %.3e", args,
                  r.x ? pk_test_rel_diff(G.ncell, r.x, xr) : 1.0);
        free(xr);
      }
      grid_run_free(&r);
    }
    pkt_global_free(&G);
  }
  PK_TEST_END();
}

/**
 * --solver cg|pipecg|srcg, --stop confirmed|recurrence, --min-residual and --threads on the grid path
 * (barotropic with walls, 2 x 3 tiles, exact sums): the iterations, the last and the minimum residual and the
 * solution of the library's own solve on the one-tile stencil of the assembled arrays with the same settings.
 */
PK_TEST_CASE(grid_solvers_stop_threads) {
  static const char *const names[3] = {"cg", "pipecg", "srcg"};
  static const int32_t types[3] = {PKRYLOV_SOLVER_CG, PKRYLOV_SOLVER_PIPECG, PKRYLOV_SOLVER_SRCG};
  pkt_global G;
  PK_REQUIRE_OK(NULL, model_global(&G, 'b', 24, 12, 1, 0, 0));
  double *xr = malloc(sizeof(double) * (size_t)G.ncell);
  char args[PK_ARGS];
  for (int t = 0; t < 3; t++)
    for (int rule = 0; rule < 2; rule++)
      for (int mr = 0; mr < 2; mr++) {
        const int32_t maxit = mr ? 7 : 500;
        grid_run r;
        snprintf(
            args, sizeof args,
            "--problem barotropic:24,12 --periodic none --tiles 2,3 --reproducible --threads 2 --solver %s "
            "--stop %s%s --maxit %d --rtol 1e-9",
            names[t], rule ? "recurrence" : "confirmed", mr ? " --min-residual" : "", (int)maxit);
        grid_solve("grid_solvers", args, &r);
        pkrylov_result ref;
        if (lib_barotropic(&G, types[t], rule ? PKRYLOV_STOP_RECURRENCE : PKRYLOV_STOP_CONFIRMED, mr, maxit,
                           1e-9, xr, &ref) != PK_PASS)
          return PK_FAIL;
        double it = -1, last = -1, mres = 0, mit = 0, th = 0;
        PK_EXPECT(
            json_one_object(r.js) && json_num(r.js, "iterations", &it) == 0 &&
                json_num(r.js, "last_residual", &last) == 0 && json_num(r.js, "min_residual", &mres) == 0 &&
                json_num(r.js, "min_residual_iteration", &mit) == 0 && json_num(r.js, "threads", &th) == 0,
            "'%s': %s", args, r.js);
        PK_EXPECT(r.rc == (ref.converged ? 0 : 1) && (int)it == ref.iterations && th == 2 &&
                      json_str_is(r.js, "solver", names[t]) &&
                      json_str_is(r.js, "stop", rule ? "recurrence" : "confirmed"),
                  "'%s': exit %d, %g iterations, %g threads; the one-tile stencil: %d iterations", args, r.rc,
                  it, th, ref.iterations);
        PK_EXPECT(fabs(last - ref.final_residual) <= 1e-12 * ref.final_residual &&
                      fabs(mres - ref.min_residual) <= 1e-12 * fabs(ref.min_residual) &&
                      (int)mit == ref.min_residual_iteration,
                  "'%s': last residual %.17g, min %.17g at %g; the one-tile stencil %.17g, %.17g at %d", args,
                  last, mres, mit, ref.final_residual, ref.min_residual, ref.min_residual_iteration);
        PK_EXPECT(r.x && r.n == G.ncell && pk_test_rel_diff(G.ncell, r.x, xr) <= 1e-12,
                  "'%s': the solution differs from the one-tile stencil's by %.3e", args,
                  r.x ? pk_test_rel_diff(G.ncell, r.x, xr) : 1.0);
        if (!mr)
          check_grid_run(&r, &G, 1e-9 * (rule ? 2 : 1), args);
        grid_run_free(&r);
      }
  free(xr);
  pkt_global_free(&G);
  PK_TEST_END();
}

/**
 * --problem cubesphere:N,NZ: one tile per face (the default), 2 x 2 and 3 x 3 tiles per face: each solution
 * against the brute-force operator (the neighbours across the cube edges from the 3-D geometry), the same
 * saved matrix for every tiling; --precond ainv on one level.
 */
PK_TEST_CASE(cubesphere_tiles) {
  pkt_global G;
  PK_REQUIRE_OK(NULL, model_global(&G, 'c', 6, 6, 3, 0, 0));
  static const char *const tilings[3] = {"", "--tiles 2,2", "--tiles 3,3"};
  char args[PK_ARGS], keep[PK_PATH + 24];
  for (int t = 0; t < 3; t++) {
    grid_run r;
    snprintf(args, sizeof args, "--problem cubesphere:6,3 %s", tilings[t]);
    grid_solve("cube", args, &r);
    check_grid_run(&r, &G, 1e-8, args);
    /* the cube: --tiles T,T cuts each face; the tiles are no block per rank (runs) */
    const char *want =
        t == 0   ? "\"tiles_per_rank\":null,\"tile_grid\":[1,1],\"tile_size\":[6,6],\"ntiles\":6,"
                   "\"ntiles_per_rank\":[6,6],\"tile_layout\":\"runs\""
        : t == 1 ? "\"tiles_per_rank\":null,\"tile_grid\":[2,2],\"tile_size\":[3,3],\"ntiles\":24,"
                   "\"ntiles_per_rank\":[24,24],\"tile_layout\":\"runs\""
                 : "\"tiles_per_rank\":null,\"tile_grid\":[3,3],\"tile_size\":[2,2],\"ntiles\":54,"
                   "\"ntiles_per_rank\":[54,54],\"tile_layout\":\"runs\"";
    PK_EXPECT(strstr(r.js, want) && json_str_is(r.js, "problem", "cubesphere:6,3") &&
                  json_str_is(r.js, "precond", "column") && strstr(r.js, "\"periodic\":null"),
              "'%s': %s", args, r.js);
    if (t == 0) {
      snprintf(keep, sizeof keep, "%s.keep", r.apath);
      rename(r.apath, keep);
    } else {
      PK_EXPECT(same_file(keep, r.apath), "'%s': the saved matrix differs from the one of one tile per face",
                args);
    }
    grid_run_free(&r);
  }
  pkt_global_free(&G);
  /* one level: the approximate inverse */
  PK_REQUIRE_OK(NULL, model_global(&G, 'c', 4, 4, 1, 0, 0));
  grid_run r;
  grid_solve("cube_ainv", "--problem cubesphere:4,1 --tiles 2,2 --precond ainv", &r);
  check_grid_run(&r, &G, 1e-8, "cubesphere:4,1 --precond ainv");
  PK_EXPECT(json_str_is(r.js, "precond", "ainv"), "%s", r.js);
  grid_run_free(&r);
  pkt_global_free(&G);
  PK_TEST_END();
}

/**
 * The thin shell on a grid: --tiles with walls saves the matrix of the one-operator path (the library's
 * matrix-free thin shell) to the byte; --periodic x|y|xy (with and without --tiles: the grid is implied)
 * against the brute force of the periodic closure; --precond ainv on one level.
 */
PK_TEST_CASE(thinshell_tiles_periodic) {
  char args[PK_ARGS], plain[PK_PATH + 24];
  grid_run r;
  pkt_global G;
  PK_REQUIRE_OK(NULL, model_global(&G, 't', 9, 8, 4, 0, 0));
  grid_solve("ts_plain", "--problem thinshell:9,8,4", &r); /* the matrix-free operator */
  PK_EXPECT(r.rc == 0 && json_bool(r.js, "grid") == 0, "%s %s", r.js, r.err);
  snprintf(plain, sizeof plain, "%s.keep", r.apath);
  rename(r.apath, plain);
  grid_run_free(&r);
  grid_solve("ts_tiles", "--problem thinshell:9,8,4 --tiles 3,2", &r);
  check_grid_run(&r, &G, 1e-8, "thinshell --tiles 3,2");
  PK_EXPECT(same_file(plain, r.apath),
            "thinshell --tiles 3,2: the saved matrix differs from the thin shell's");
  PK_EXPECT(json_str_is(r.js, "periodic", "none") &&
                strstr(r.js, "\"tiles_per_rank\":[3,2],\"tile_grid\":[3,2],\"tile_size\":[3,4]"),
            "%s", r.js);
  grid_run_free(&r);
  pkt_global_free(&G);
  static const char *const pers[3] = {"x", "y", "xy"};
  for (int per = 1; per <= 3; per++) {
    PK_REQUIRE_OK(NULL, model_global(&G, 't', 9, 8, 4, per & 1, (per & 2) != 0));
    for (int t = 0; t < 2; t++) {
      snprintf(args, sizeof args, "--problem thinshell:9,8,4 --periodic %s%s", pers[per - 1],
               t ? " --tiles 3,4" : "");
      grid_solve("ts_periodic", args, &r);
      check_grid_run(&r, &G, 1e-8, args);
      PK_EXPECT(json_str_is(r.js, "periodic", pers[per - 1]) &&
                    strstr(r.js, t ? "\"tiles_per_rank\":[3,4],\"tile_grid\":[3,4]"
                                   : "\"tiles_per_rank\":[1,1],\"tile_grid\":[1,1]"),
                "'%s': %s", args, r.js);
      grid_run_free(&r);
    }
    pkt_global_free(&G);
  }
  PK_REQUIRE_OK(NULL, model_global(&G, 't', 8, 8, 1, 0, 0));
  grid_solve("ts_ainv", "--problem thinshell:8,8,1 --precond ainv --tiles 2,2", &r);
  check_grid_run(&r, &G, 1e-8, "thinshell:8,8,1 --precond ainv");
  PK_EXPECT(json_str_is(r.js, "precond", "ainv"), "%s", r.js);
  grid_run_free(&r);
  pkt_global_free(&G);
  PK_TEST_END();
}

/**
 * --rhs, --x0 and --history on a grid (barotropic, 4 x 3 tiles) mean the global order: the solution of a
 * random right-hand side against a dense LAPACK solve of the brute-force operator on the wet cells; at the
 * dry cells x keeps --x0 to the bit; the history starts at ||b - A x0|| (brute force, wet cells) and has
 * iterations + 1 values.
 */
PK_TEST_CASE(grid_rhs_x0_history) {
  pkt_global G;
  PK_REQUIRE_OK(NULL, model_global(&G, 'b', 20, 12, 1, 1, 0));
  const int64_t n = G.ncell;
  char pb[PK_PATH], px0[PK_PATH], ph[PK_PATH], args[PK_ARGS];
  tmp(pb, sizeof pb, "grid_rhs", "b.mtx");
  tmp(px0, sizeof px0, "grid_rhs", "x0.mtx");
  tmp(ph, sizeof ph, "grid_rhs", "h.csv");
  PK_REQUIRE_OK(NULL, write_random(pb, n, 11));
  PK_REQUIRE_OK(NULL, write_random(px0, n, 12));
  int64_t nn = 0;
  double *b = read_vec(pb, &nn), *x0 = read_vec(px0, &nn);
  PK_REQUIRE(b && x0, "read back the random vectors");
  /* the dense matrix of the wet cells, column by column from the brute-force product */
  int64_t *wet = malloc(sizeof(int64_t) * (size_t)n), m = 0;
  for (int64_t q = 0; q < n; q++)
    if (G.mask[q])
      wet[m++] = q;
  double *a = malloc(sizeof(double) * (size_t)(m * m)), *e = calloc((size_t)n, sizeof(double));
  double *col = malloc(sizeof(double) * (size_t)n), *xw = malloc(sizeof(double) * (size_t)m);
  for (int64_t c = 0; c < m; c++) {
    e[wet[c]] = 1.0;
    pkt_global_apply(&G, 1, e, col);
    e[wet[c]] = 0.0;
    for (int64_t rr = 0; rr < m; rr++)
      a[rr + m * c] = col[wet[rr]];
  }
  for (int64_t rr = 0; rr < m; rr++)
    xw[rr] = b[wet[rr]];
  PK_REQUIRE(pk_test_lapack_solve((int)m, a, xw) == 0, "dense solve of the %lld wet cells", (long long)m);
  grid_run r;
  snprintf(args, sizeof args,
           "--problem barotropic:20,12 --tiles 4,3 --rtol 1e-11 --rhs \"%s\" --x0 \"%s\" "
           "--history \"%s\"",
           pb, px0, ph);
  grid_solve("grid_rhs", args, &r);
  double it = -1;
  PK_EXPECT(r.rc == 0 && json_num(r.js, "iterations", &it) == 0 && it > 0, "'%s': exit %d: %s %s", args, r.rc,
            r.js, r.err);
  PK_EXPECT(r.x && r.n == n, "--out: %lld values", (long long)r.n);
  if (r.x && r.n == n) {
    double dx = 0, xmax = 0;
    int same_dry = 1;
    for (int64_t rr = 0; rr < m; rr++)
      dx = fmax(dx, fabs(r.x[wet[rr]] - xw[rr])), xmax = fmax(xmax, fabs(xw[rr]));
    for (int64_t q = 0; q < n; q++)
      same_dry &= G.mask[q] || r.x[q] == x0[q];
    PK_EXPECT(dx <= 1e-8 * xmax, "max |x - x_LAPACK| = %.3e (max |x| %.3e)", dx, xmax);
    PK_EXPECT(same_dry, "x at the dry cells is not --x0");
    PK_EXPECT(r.b && pk_test_rel_diff(n, r.b, b) == 0.0, "the saved b is not --rhs");
  }
  /* the history: ||b - A x0|| over the wet cells first, iterations + 1 values */
  double *ax0 = malloc(sizeof(double) * (size_t)n), r0 = 0, first = NAN, last = NAN;
  pkt_global_apply(&G, 1, x0, ax0);
  for (int64_t q = 0; q < n; q++)
    if (G.mask[q])
      r0 += (b[q] - ax0[q]) * (b[q] - ax0[q]);
  r0 = sqrt(r0);
  const int rows = check_history(ph, &first, &last);
  PK_EXPECT(rows == (int)it + 1, "%d history lines for %g iterations", rows, it);
  PK_EXPECT(fabs(first - r0) <= 1e-12 * r0, "history[0] %.17g vs ||b - A x0|| %.17g", first, r0);
  grid_run_free(&r);
  free(b), free(x0), free(wet), free(a), free(e), free(col), free(xw), free(ax0);
  pkt_global_free(&G);
  PK_TEST_END();
}

/** The bad input of --problem barotropic / cubesphere, --tiles, --periodic and --precond ainv: exit 2, named.
 */
PK_TEST_CASE(usage_grid) {
  expect_usage("ug_p1", "--problem barotropic:3,8 --json", "--problem", "barotropic:3,8");
  expect_usage("ug_p2", "--problem barotropic:8,8,8 --json", "--problem", "barotropic:NX,NY");
  expect_usage("ug_p3", "--problem cubesphere:8 --json", "--problem", "cubesphere:N,NZ");
  expect_usage("ug_p4", "--problem cubesphere:0,4 --json", "--problem", NULL);
  expect_usage("ug_t1", "--problem thinshell:8,8,4 --tiles 2 --json", "--tiles", "'2'");
  expect_usage("ug_t2", "--problem thinshell:8,8,4 --tiles 0,2 --json", "--tiles", "0,2");
  expect_usage("ug_t3", "--problem thinshell:8,8,4 --tiles=-1,2 --json", "--tiles", NULL);
  expect_usage("ug_t4", "--problem thinshell:8,8,4 --tiles 3,2 --json", "--tiles 3,2", "equal tiles");
  expect_usage("ug_t4b", "--problem barotropic:24,12 --tiles 5,2 --json", "'--tiles 5,2' (tiles per rank)",
               "NX = 24 a multiple of px TX = 5 px");
  expect_usage("ug_t4c", "--problem thinshell:12,10,2 --tiles 2,4 --json", "'--tiles 2,4' (tiles per rank)",
               "NY = 10 a multiple of py TY = 4 py (tried 1 x 1)");
  expect_usage("ug_t5", "--problem cubesphere:8,4 --tiles 2,1 --json", "--tiles 2,1", "TX = TY");
  expect_usage("ug_t6", "--problem cubesphere:8,4 --tiles 3,3 --json", "--tiles 3,3", "equal tiles");
  expect_usage("ug_t7", "--problem thinshell:8,8,4 --tiles 2,2 --decomp 1,1 --json", "--tiles", "--decomp");
  expect_usage("ug_t8", "--problem barotropic:8,8 --decomp 1,1 --json", "--decomp", "--tiles");
  expect_usage("ug_t9", "--problem thinshell:8,8,4 --tiles x,y --json", "--tiles", "x,y");
  expect_usage("ug_t10", "a.mtx --tiles 2,2 --json", "--tiles", NULL);
  expect_usage("ug_q1", "--problem thinshell:8,8,4 --periodic z --json", "--periodic", "'z'");
  expect_usage("ug_q2", "--problem cubesphere:8,4 --periodic x --json", "--periodic", "closed");
  expect_usage("ug_q3", "--problem thinshell:8,8,4 --periodic x --decomp 1,1 --json", "--periodic",
               "--decomp");
  expect_usage("ug_q4", "--problem thinshell:2,8,4 --periodic x --json", "--periodic x", "3 columns");
  expect_usage("ug_q5", "a.mtx --periodic x --json", "--periodic", NULL);
  expect_usage("ug_a1", "--problem thinshell:8,8,4 --precond ainv --json", "--precond ainv", "NZ = 4");
  expect_usage("ug_a2", "--problem cubesphere:8,2 --precond ainv --json", "--precond ainv", "2-D");
  expect_usage("ug_a3", "a.mtx --precond ainv --json", "--precond ainv", NULL);
  expect_usage("ug_a4", "--problem thinshell:8,8,1 --precond ainv --decomp 1,1 --json", "--precond ainv",
               "--decomp");
  expect_usage("ug_a5", "--problem barotropic:8,8 --precond ainv2 --json", "--precond", "ainv2");
  expect_usage("ug_g1", "--problem barotropic:8,8 --geometry uniform --json", "--geometry", "thinshell");
  PK_TEST_END();
}

/** --help names the new options; the text report names the grid. */
PK_TEST_CASE(grid_help_text) {
  char out[PK_CAP], err[PK_CAP];
  int rc = solve("grid_help", "--help", out, err);
  static const char *const words[] = {"barotropic:NX,NY",
                                      "cubesphere:N,NZ",
                                      "--tiles TX,TY",
                                      "--periodic none|x|y|xy",
                                      "ainv",
                                      "contiguous runs",
                                      "tiles per rank (MITgcm's nSx x nSy)",
                                      "FACE into T x T tiles",
                                      NULL};
  for (int i = 0; words[i]; i++)
    PK_EXPECT(rc == 0 && strstr(out, words[i]), "--help lacks '%s': %s", words[i], out);
  rc = solve("grid_text", "--problem barotropic:16,8 --tiles 2,2", out, err);
  PK_EXPECT(rc == 0 && strstr(out, "problem       barotropic 16 x 8 (periodic x)") &&
                strstr(out, "grid          2 x 2 tiles of 8 x 4 columns") &&
                strstr(out, "ranks         1 (1 x 1, each a block of 2 x 2 tiles)") &&
                strstr(out, "precond       ainv"),
            "text report: exit %d: %s %s", rc, out, err);
  PK_TEST_END();
}

PK_TEST_CASE(demo_small) {
  char out[PK_CAP], err[PK_CAP];
  int rc = run(PK_DEMO_EXE, "demo", "16 16 8", out, err);
  PK_EXPECT(rc == 0, "exit %d: %s", rc, err);
  PK_EXPECT(strstr(out, "iterations") != NULL, "%s", out);
  PK_EXPECT(strstr(out, "backend") != NULL && strstr(out, "16 x 16 x 8") != NULL, "%s", out);
  /* the banner names the library's version; the backend line says what ran and why */
  char banner[64];
  snprintf(banner, sizeof banner, "pkrylov %d.%d.%d demo", PKRYLOV_VERSION_MAJOR, PKRYLOV_VERSION_MINOR,
           PKRYLOV_VERSION_PATCH);
  PK_EXPECT(strncmp(out, banner, strlen(banner)) == 0, "banner: %s", out);
  const char *why = !pkrylov_has_cuda() ? "built without CUDA: CPU backend, "
                    : strstr(out, "GPU visible: CUDA backend on ")
                        ? "GPU visible: CUDA backend on "
                        : "CUDA built in but no GPU visible: CPU backend, ";
  PK_EXPECT(strstr(out, why) != NULL, "backend line lacks '%s': %s", why, out);
  rc = run(PK_DEMO_EXE, "demo_bad", "16 16", out, err);
  PK_EXPECT(rc == 2, "demo with two sizes: exit %d", rc);
  rc = run(PK_DEMO_EXE, "demo_bad0", "16 0 8", out, err);
  PK_EXPECT(rc == 2, "demo with NY = 0: exit %d", rc);
  PK_TEST_END();
}

PK_TEST_MAIN(PK_TEST_ENTRY(replace_auto), PK_TEST_ENTRY(barotropic_tiles_periodic), PK_TEST_ENTRY(grid_solvers_stop_threads),
             PK_TEST_ENTRY(cubesphere_tiles), PK_TEST_ENTRY(thinshell_tiles_periodic),
             PK_TEST_ENTRY(grid_rhs_x0_history), PK_TEST_ENTRY(usage_grid), PK_TEST_ENTRY(grid_help_text),
             PK_TEST_ENTRY(stop_rule_srcg_min_residual), PK_TEST_ENTRY(usage_stop_rule),
             PK_TEST_ENTRY(thinshell_json), PK_TEST_ENTRY(thinshell_pipecg_options),
             PK_TEST_ENTRY(text_report_and_quiet), PK_TEST_ENTRY(matrix_cg_dense),
             PK_TEST_ENTRY(matrix_pipecg_dense), PK_TEST_ENTRY(matrix_bicgstab_dense),
             PK_TEST_ENTRY(matrix_pipebicgstab_dense), PK_TEST_ENTRY(matrix_bicgstab_nonsymmetric),
             PK_TEST_ENTRY(matrix_gmres_restart), PK_TEST_ENTRY(matrix_pipegmres),
             PK_TEST_ENTRY(matrix_fgmres), PK_TEST_ENTRY(matrix_cagmres_steps),
             PK_TEST_ENTRY(matrix_column_lap3d), PK_TEST_ENTRY(rhs_option),
             PK_TEST_ENTRY(x0_exact_zero_iterations), PK_TEST_ENTRY(x0_returned_with_maxit0),
             PK_TEST_ENTRY(maxit_not_converged), PK_TEST_ENTRY(history_lines), PK_TEST_ENTRY(usage_options),
             PK_TEST_ENTRY(usage_numbers), PK_TEST_ENTRY(threads_option), PK_TEST_ENTRY(usage_problem),
             PK_TEST_ENTRY(usage_names), PK_TEST_ENTRY(usage_column_levels), PK_TEST_ENTRY(usage_files),
             PK_TEST_ENTRY(usage_cuda_unavailable), PK_TEST_ENTRY(demo_small), PK_TEST_ENTRY(version_option),
             PK_TEST_ENTRY(monitor_lines), PK_TEST_ENTRY(monitor_every_second), PK_TEST_ENTRY(usage_monitor),
             PK_TEST_ENTRY(usage_outputs_first), PK_TEST_ENTRY(nonsymmetric_warning),
             PK_TEST_ENTRY(library_options))

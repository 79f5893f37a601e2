/**
 * @file t950-mpi-cli.c
 * @brief pkrylov-solve under mpirun (each case starts mpirun itself, every command bounded by `timeout`):
 *        the same iterations and solution (--out, gathered in the global order) on 1 to 4 ranks, bitwise
 *        identical solutions with --reproducible, --save-system writing the global system as on one rank,
 *        and bad input on many ranks (blocks that do not match the ranks, a rank with no columns, options
 *        that differ between ranks, a matrix file whose columns span ranks) ending with exit status 2 and a
 * message from every rank, and the BiCGStab and GMRES families on distributed operators (the one-rank
 * iterations, no hang); the default thread count under mpirun (ranks not bound: the cores divided by the
 * ranks). The tiled grids
 *        (--tiles, --periodic, barotropic, cubesphere): --tiles as tiles per rank, the one-rank solution in
 *        the global order on 1 to 4 ranks, bitwise the same --out with --reproducible for every tiling and
 *        rank count, the cube sphere on 1, 2 and 3 ranks (6, 3 and 2 faces each), --save-system as on one
 *        rank, tiles per rank that no process grid divides, and a rank without a tile.
 */
#define _GNU_SOURCE /* sched_getaffinity, CPU_COUNT */
#include <sched.h>
#include <string.h>
#include <unistd.h>

#include "pk_mpi_test.h"

#define MPIRUN "timeout 120 " PK_MPIEXEC " " PK_MPIEXEC_NUMPROC_FLAG

/** Read a Matrix Market array vector written by pkrylov-solve (n values into *v, malloc'ed). */
static int read_vec(const char *path, double **v, int64_t *n) {
  pkrylov_context c;
  if (pkrylov_context_create(PKRYLOV_BACKEND_CPU, &c)) return 1;
  int st = pkrylov_mtx_read_vector(c, path, 0, NULL, n);
  if (!st) st = (*v = malloc(sizeof(double) * (size_t)*n)) == NULL;
  if (!st) st = pkrylov_mtx_read_vector(c, path, *n, *v, n);
  pkrylov_context_destroy(&c);
  return st;
}

/** The whole content of a file (malloc'ed, NUL-terminated) or NULL. */
static char *slurp(const char *path) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  fseek(f, 0, SEEK_END);
  long len = ftell(f);
  fseek(f, 0, SEEK_SET);
  char *s = malloc((size_t)len + 1);
  if (s && fread(s, 1, (size_t)len, f) != (size_t)len) len = 0;
  if (s) s[len] = '\0';
  fclose(f);
  return s;
}

/** "key":N from the JSON output file (-1 when missing). */
static int json_int(const char *path, const char *key) {
  char *s = slurp(path), pat[64];
  snprintf(pat, sizeof pat, "\"%s\":", key);
  const char *p = s ? strstr(s, pat) : NULL;
  int v = p ? atoi(p + strlen(pat)) : -1;
  free(s);
  return v;
}

/** "iterations":N from the JSON output file. */
static int json_iterations(const char *path) { return json_int(path, "iterations"); }

PK_TEST_CASE(serial_ranks_same_solution) {
  char cmd[2048], out[512], js[512];
  double *x1 = NULL;
  int64_t n1 = 0;
  int it1 = -1;
  for (int np = 1; np <= 4; np++) {
    snprintf(out, sizeof out, "%s", pk_test_tmp_path("t950_x.mtx"));
    snprintf(js, sizeof js, "%s", pk_test_tmp_path("t950_x.json"));
    snprintf(cmd, sizeof cmd, MPIRUN " %d %s --problem thinshell:20,18,12 --solver cg --rtol 1e-10 --out %s --json --quiet > %s",
             np, PK_SOLVE_EXE, out, js);
    PK_EXPECT(pk_test_system(cmd) == 0, "%s", cmd);
    double *x;
    int64_t n;
    if (read_vec(out, &x, &n)) return PK_FAIL;
    const int it = json_iterations(js);
    if (np == 1) {
      x1 = x, n1 = n, it1 = it;
      PK_EXPECT(it1 > 0, "iterations %d", it1);
      continue;
    }
    PK_EXPECT(n == n1 && n == 20 * 18 * 12, "n = %lld", (long long)n);
    PK_EXPECT(it == it1, "%d ranks: %d iterations, one rank %d", np, it, it1);
    double dmax = 0, xmax = 0;
    for (int64_t i = 0; i < n && n == n1; i++) dmax = fmax(dmax, fabs(x[i] - x1[i])), xmax = fmax(xmax, fabs(x1[i]));
    PK_EXPECT(dmax <= 1e-10 * xmax, "%d ranks: max |x - x_1| = %.3g (max |x| %.3g)", np, dmax, xmax);
    /* b = A * ones: the solution is all ones */
    PK_EXPECT(fabs(x[0] - 1.0) < 1e-4, "x[0] = %.17g", x[0]);
    free(x);
  }
  free(x1);
  PK_TEST_END();
}

PK_TEST_CASE(serial_reproducible_bitwise) {
  char cmd[2048], out[512];
  char *first = NULL;
  for (int solver = 0; solver < 2; solver++)
    for (int np = 1; np <= 4; np++) {
      snprintf(out, sizeof out, "%s", pk_test_tmp_path("t950_r.mtx"));
      snprintf(cmd, sizeof cmd, MPIRUN " %d %s --problem thinshell:21,17,10 --solver %s --reproducible --out %s --quiet",
               np, PK_SOLVE_EXE, solver ? "pipecg" : "cg", out);
      PK_EXPECT(pk_test_system(cmd) == 0, "%s", cmd);
      char *s = slurp(out);
      if (!s) return PK_FAIL;
      if (np == 1) {
        free(first);
        first = s;
        continue;
      }
      PK_EXPECT(strcmp(s, first) == 0, "%s on %d ranks: the solution differs from the one on one rank",
                solver ? "pipecg" : "cg", np);
      free(s);
    }
  free(first);
  PK_TEST_END();
}

PK_TEST_CASE(serial_save_system_global) {
  /* the thin shell in blocks of columns (its file is also serial_bad_input_every_rank's matrix), and on the
     grids: barotropic with 3 x 2 tiles per rank (3 x 2 tiles on one rank, 3 x 6 on 1 x 3 ranks), the cube */
  static const struct {
    const char *args, *prefix, *header;
  } probs[3] = {{"--problem thinshell:9,7,5", "t950_sys", "315 315 "},
                {"--problem barotropic:24,12 --tiles 3,2", "t950_sys_baro", "288 288 "},
                {"--problem cubesphere:6,3", "t950_sys_cube", "216 216 "}};
  char cmd[2048], pre[512], path[600];
  for (int pr = 0; pr < 3; pr++) {
    char *A1 = NULL, *b1 = NULL;
    for (int np = 1; np <= 3; np += 2) {
      snprintf(pre, sizeof pre, "%s", pk_test_tmp_path(probs[pr].prefix));
      snprintf(cmd, sizeof cmd, MPIRUN " %d %s %s --save-system %s --quiet", np, PK_SOLVE_EXE, probs[pr].args,
               pre);
      PK_EXPECT(pk_test_system(cmd) == 0, "%s", cmd);
      snprintf(path, sizeof path, "%s_A.mtx", pre);
      char *A = slurp(path);
      snprintf(path, sizeof path, "%s_b.mtx", pre);
      char *b = slurp(path);
      if (!A || !b) return PK_FAIL;
      if (np == 1) {
        A1 = A, b1 = b;
        PK_EXPECT(strstr(A, probs[pr].header) != NULL, "%s: global size in the header", probs[pr].args);
        continue;
      }
      PK_EXPECT(strcmp(A, A1) == 0, "%s: A on %d ranks differs from A on one", probs[pr].args, np);
      PK_EXPECT(strcmp(b, b1) == 0, "%s: b on %d ranks differs from b on one", probs[pr].args, np);
      free(A), free(b);
    }
    free(A1), free(b1);
  }
  PK_TEST_END();
}

/**
 * Run cmd (stderr captured), expect exit status 2 and every rank 0..np-1 to print "rank R: error". The log is
 * named by the process and a count (ctest runs the cases of this file at the same time).
 */
static void expect_all_ranks_fail(const char *cmd_fmt, int np, const char *needle) {
  static int calls = 0;
  char cmd[2048], log[512], leaf[64];
  snprintf(leaf, sizeof leaf, "t950_err_%ld_%d.log", (long)getpid(), calls++);
  snprintf(log, sizeof log, "%s", pk_test_tmp_path(leaf));
  char args[1500];
  snprintf(args, sizeof args, cmd_fmt, PK_SOLVE_EXE, PK_SOLVE_EXE);
  snprintf(cmd, sizeof cmd, MPIRUN " %s > %s 2>&1", args, log);
  const int rc = pk_test_system(cmd);
  PK_EXPECT(rc == 2, "exit status %d (124 = timed out), expected 2: %s", rc, cmd);
  char *s = slurp(log);
  if (!s) {
    pk_test_failures++;
    return;
  }
  for (int r = 0; r < np; r++) {
    char tag[64];
    snprintf(tag, sizeof tag, "rank %d: error", r);
    PK_EXPECT(strstr(s, tag) != NULL, "no '%s' in the output of %s:\n%s", tag, cmd, s);
  }
  PK_EXPECT(strstr(s, needle) != NULL, "no '%s' in the output of %s:\n%s", needle, cmd, s);
  free(s);
}

PK_TEST_CASE(serial_bad_input_every_rank) {
  expect_all_ranks_fail("2 %s --problem thinshell:16,16,8 --decomp 3,1", 2, "3 blocks but there are 2 ranks");
  expect_all_ranks_fail("4 %s --problem thinshell:3,16,8 --decomp 4,1", 4, "no columns");
  expect_all_ranks_fail("1 %s --problem thinshell:16,16,8 --rtol 1e-8 : " PK_MPIEXEC_NUMPROC_FLAG
                        " 1 %s --problem thinshell:16,16,8 --rtol 1e-6",
                        2, "different command lines");
  expect_all_ranks_fail("1 %s --problem thinshell:16,16,8 : " PK_MPIEXEC_NUMPROC_FLAG
                        " 1 %s --problem thinshell:16,16,9",
                        2, "different command lines");
  expect_all_ranks_fail("1 %s --problem thinshell:16,16,8 : " PK_MPIEXEC_NUMPROC_FLAG
                        " 1 %s --problem thinshell:16,16,8 --maxit x",
                        2, "another rank is invalid");
  char fmt[1024]; /* a matrix file with the column preconditioner in the k-slow layout: columns span ranks */
  snprintf(fmt, sizeof fmt, "3 %%s %s --precond column --levels 5 --layout kslow", pk_test_tmp_path("t950_sys_A.mtx"));
  expect_all_ranks_fail(fmt, 3, "whole columns per rank");
  PK_TEST_END();
}

PK_TEST_CASE(serial_other_solvers) {
  /* the BiCGStab and GMRES families on the distributed thin shell: converged, the one-rank iterations
     (CA-GMRES with a fixed step; its automatic step is timed, and the ranks agree on the slowest's times) */
  static const char *const solvers[] = {"bicgstab", "pipebicgstab", "gmres", "pipegmres", "fgmres",
                                        "cagmres --step 4", "cagmres"};
  char cmd[2048], js[512];
  for (int k = 0; k < 7; k++) {
    int it[2] = {-1, -1};
    for (int q = 0; q < 2; q++) {
      const int np = q ? 3 : 1;
      snprintf(js, sizeof js, "%s", pk_test_tmp_path("t950_s.json"));
      snprintf(cmd, sizeof cmd, MPIRUN " %d %s --problem thinshell:24,20,12 --solver %s --json --quiet > %s", np,
               PK_SOLVE_EXE, solvers[k], js);
      PK_EXPECT(pk_test_system(cmd) == 0, "%s", cmd);
      it[q] = json_iterations(js);
    }
    PK_EXPECT(it[0] > 0, "%s: %d iterations", solvers[k], it[0]);
    if (k < 6) PK_EXPECT(it[1] == it[0], "%s: %d iterations on 3 ranks, %d on one", solvers[k], it[1], it[0]);
  }
  PK_TEST_END();
}

/**
 * Issue 14 items 5, 7, 15 under mpirun: an unwritable --out ends every rank with exit status 2 before any
 * work; the symmetry warning of CG on a nonsymmetric matrix file (read by rank 0) comes once; --monitor lines
 * come from rank 0 only, one per 2 iterations.
 */
PK_TEST_CASE(serial_outputs_warning_monitor) {
  char fmt[1024], cmd[2048], log[512], mtx[512], js[512];
  snprintf(fmt, sizeof fmt, "3 %%s --problem thinshell:16,16,8 --out %s",
           pk_test_tmp_path("t950_nodir/x.mtx"));
  expect_all_ranks_fail(fmt, 3, "cannot write '--out");
  snprintf(mtx, sizeof mtx, "%s", pk_test_tmp_path("t950_nonsym.mtx"));
  FILE *f = fopen(mtx, "w");
  PK_REQUIRE(f != NULL, "write %s", mtx);
  fprintf(f, "%%%%MatrixMarket matrix coordinate real general\n4 4 10\n1 1 4\n2 2 4\n3 3 4\n4 4 4\n2 1 -1\n"
             "1 2 -1.5\n3 2 -1\n2 3 -1\n4 3 -0.5\n3 4 -0.5\n");
  fclose(f);
  snprintf(log, sizeof log, "%s", pk_test_tmp_path("t950_warn.log"));
  snprintf(cmd, sizeof cmd, MPIRUN " 2 %s %s --solver pipecg --quiet > %s 2>&1", PK_SOLVE_EXE, mtx, log);
  pk_test_system(cmd);
  char *s = slurp(log);
  const char *w = s ? strstr(s, "warning:") : NULL;
  PK_EXPECT(w && !strstr(w + 1, "warning:") && strstr(w, "A(1,2) = -1.5"), "one warning expected:\n%s",
            s ? s : "");
  free(s);
  snprintf(js, sizeof js, "%s", pk_test_tmp_path("t950_mon.json"));
  snprintf(cmd, sizeof cmd, MPIRUN " 2 %s --problem thinshell:16,16,8 --monitor 2 --json > %s 2> %s",
           PK_SOLVE_EXE, js, log);
  PK_EXPECT(pk_test_system(cmd) == 0, "%s", cmd);
  const int its = json_iterations(js);
  s = slurp(log);
  int lines = 0;
  for (const char *p = s ? strstr(s, "monitor: iteration") : NULL; p; p = strstr(p + 1, "monitor: iteration"))
    lines++;
  PK_EXPECT(its > 4 && lines == its / 2 && (!s || !strstr(s, "rank 1")), "%d lines for %d iterations:\n%s",
            lines, its, s ? s : "");
  free(s);
  PK_TEST_END();
}

/**
 * The "threads" of --json under mpirun with the ranks not bound (Open MPI reads the binding policy from the
 * environment; others do not bind by default) and OMP_NUM_THREADS unset: the CPUs of this process's mask
 * (which the ranks inherit) divided by the ranks, at least 1; --threads is kept.
 */
PK_TEST_CASE(serial_threads_node_share) {
  cpu_set_t set;
  CPU_ZERO(&set);
  PK_REQUIRE(sched_getaffinity(0, sizeof set, &set) == 0, "sched_getaffinity");
  const int cpus = CPU_COUNT(&set);
  char cmd[2048], js[512];
  snprintf(js, sizeof js, "%s", pk_test_tmp_path("t950_threads.json"));
  for (int np = 1; np <= 2; np++)
    for (int set_one = 0; set_one < 2; set_one++) {
      snprintf(cmd, sizeof cmd,
               "env -u OMP_NUM_THREADS OMPI_MCA_hwloc_base_binding_policy=none " MPIRUN
               " %d %s --problem thinshell:8,8,4 %s --json --quiet > %s",
               np, PK_SOLVE_EXE, set_one ? "--threads 1" : "", js);
      PK_EXPECT(pk_test_system(cmd) == 0, "%s", cmd);
      const int want = set_one ? 1 : cpus / np > 1 ? cpus / np : 1, got = json_int(js, "threads");
      PK_EXPECT(got == want, "%d ranks%s: \"threads\":%d, expected %d (%d CPUs)", np,
                set_one ? ", --threads 1" : "", got, want, cpus);
    }
  PK_TEST_END();
}

/** Max |x - y| / max |y| of two vectors of n values. */
static double max_rel(int64_t n, const double *x, const double *y) {
  double d = 0, m = 0;
  for (int64_t i = 0; i < n; i++)
    d = fmax(d, fabs(x[i] - y[i])), m = fmax(m, fabs(y[i]));
  return m > 0 ? d / m : d;
}

/** "key":[A,B] of the JSON text js is [a,b]. */
static int json_pair_is(const char *js, const char *key, int a, int b) {
  char want[96];
  snprintf(want, sizeof want, "\"%s\":[%d,%d]", key, a, b);
  return js && strstr(js, want) != NULL;
}

/**
 * --tiles TX,TY are tiles per rank: on P ranks the most square px x py process grid whose blocks divide,
 * (px TX) x (py TY) tiles in all. The solution (--out, the global order) and the iterations of one rank with
 * one tile, for the barotropic problem (24 x 16: 4 x 4 on one rank; 2,4 on 2 ranks and 2,2 on 4 ranks, the
 * same 4 x 4 tiles; 2,2 on 3 ranks, 6 x 2 tiles; rtol 1e-10, the same iterations) and the periodic thin
 * shell (16 x 12: 4,2 on one rank; 2,2 on 2 ranks and 2,1 on 4, the same 4 x 2 tiles; 4,1 on 3 ranks, 1 x 3
 * ranks as 3 x 1 does not divide; rtol 1e-9, near the thin shell's rounding level, docs/model-problem.md:
 * the iterations may differ by one with the order of the sums); the JSON says the tiles per rank, the tile
 * grid, the count per rank and the process grid.
 */
PK_TEST_CASE(serial_grid_ranks_same_solution) {
  static const struct {
    const char *prob;
    struct {
      int tx, ty, px, py;
    } r[5]; /* r[np]: --tiles and the process grid on np ranks (r[0]: the one-rank one-tile reference) */
  } probs[2] = {{"--problem barotropic:24,16 --rtol 1e-10",
                 {{1, 1, 1, 1}, {4, 4, 1, 1}, {2, 4, 2, 1}, {2, 2, 3, 1}, {2, 2, 2, 2}}},
                {"--problem thinshell:16,12,6 --periodic x --rtol 1e-9",
                 {{1, 1, 1, 1}, {4, 2, 1, 1}, {2, 2, 2, 1}, {4, 1, 1, 3}, {2, 1, 2, 2}}}};
  char cmd[2048], out[512], js[512];
  for (int pr = 0; pr < 2; pr++) {
    double *x1 = NULL;
    int64_t n1 = 0;
    int it1 = -1;
    for (int np = 0; np <= 4; np++) {
      const int tx = probs[pr].r[np].tx, ty = probs[pr].r[np].ty;
      const int px = probs[pr].r[np].px, py = probs[pr].r[np].py;
      snprintf(out, sizeof out, "%s", pk_test_tmp_path("t950_g.mtx"));
      snprintf(js, sizeof js, "%s", pk_test_tmp_path("t950_g.json"));
      snprintf(cmd, sizeof cmd, MPIRUN " %d %s %s --tiles %d,%d --out %s --json --quiet > %s", np ? np : 1,
               PK_SOLVE_EXE, probs[pr].prob, tx, ty, out, js);
      PK_EXPECT(pk_test_system(cmd) == 0, "%s", cmd);
      double *x;
      int64_t n;
      if (read_vec(out, &x, &n))
        return PK_FAIL;
      const int it = json_iterations(js);
      char *s = slurp(js);
      PK_EXPECT(json_pair_is(s, "tiles_per_rank", tx, ty) && json_pair_is(s, "tile_grid", px * tx, py * ty) &&
                    json_pair_is(s, "ntiles_per_rank", tx * ty, tx * ty) &&
                    json_pair_is(s, "decomp", px, py) && strstr(s, "\"tile_layout\":\"blocks\""),
                "%s: expected %d,%d tiles per rank on %d x %d ranks: %s", cmd, tx, ty, px, py, s ? s : "");
      free(s);
      if (np == 0) {
        x1 = x, n1 = n, it1 = it;
        PK_EXPECT(it1 > 0, "iterations %d", it1);
        continue;
      }
      PK_EXPECT(n == n1, "n = %lld, one rank %lld", (long long)n, (long long)n1);
      PK_EXPECT(pr ? abs(it - it1) <= 1 : it == it1, "%s: %d iterations, one rank and one tile %d", cmd, it,
                it1);
      PK_EXPECT(n == n1 && max_rel(n, x, x1) <= (pr ? 1e-8 : 1e-10), "%s: max |x - x_1| / max |x_1| = %.3g",
                cmd, n == n1 ? max_rel(n, x, x1) : 1.0);
      free(x);
    }
    free(x1);
  }
  PK_TEST_END();
}

/**
 * --reproducible: the same --out to the byte for every tiling and rank count. Barotropic 24 x 12: one tile
 * on one rank, --tiles 4,4 on one rank, 2,2 on 4 ranks (2 x 2 ranks: the same 4 x 4 tiles) and 1,4 on 4
 * ranks (2 x 2 does not divide NY = 12 into 8 tiles: 4 x 1 ranks, again 4 x 4 tiles), 2,2 on 2 ranks (4 x 2
 * tiles), 1,2 on 3 ranks (3 x 2 tiles) and the default on 3 (3 x 1); the cube sphere on 1, 2 and 3 ranks by
 * default (6, 3 and 2 faces each) and with 2 x 2 tiles per face on 4 ranks (runs of 6 tiles); cg, pipecg,
 * and srcg with the recurrence stop rule, the minimum-residual iterate and 2 threads (--history the same
 * too). The JSON says each tiling.
 */
PK_TEST_CASE(serial_grid_reproducible_bitwise) {
  static const struct {
    int np;
    const char *args, *want; /* want: the JSON's tiling */
  } runs[] = {{1, "--problem barotropic:24,12 --tiles 1,1", "\"tiles_per_rank\":[1,1],\"tile_grid\":[1,1]"},
              {1, "--problem barotropic:24,12 --tiles 4,4", "\"tiles_per_rank\":[4,4],\"tile_grid\":[4,4]"},
              {4, "--problem barotropic:24,12 --tiles 2,2", "\"tiles_per_rank\":[2,2],\"tile_grid\":[4,4]"},
              {4, "--problem barotropic:24,12 --tiles 1,4", "\"tiles_per_rank\":[1,4],\"tile_grid\":[4,4]"},
              {2, "--problem barotropic:24,12 --tiles 2,2", "\"tiles_per_rank\":[2,2],\"tile_grid\":[4,2]"},
              {3, "--problem barotropic:24,12 --tiles 1,2", "\"tiles_per_rank\":[1,2],\"tile_grid\":[3,2]"},
              {3, "--problem barotropic:24,12", "\"tiles_per_rank\":[1,1],\"tile_grid\":[3,1]"},
              {1, "--problem cubesphere:8,4",
               "\"tile_grid\":[1,1],\"tile_size\":[8,8],\"ntiles\":6,\"ntiles_per_rank\":[6,6]"},
              {2, "--problem cubesphere:8,4",
               "\"tile_grid\":[1,1],\"tile_size\":[8,8],\"ntiles\":6,\"ntiles_per_rank\":[3,3]"},
              {3, "--problem cubesphere:8,4",
               "\"tile_grid\":[1,1],\"tile_size\":[8,8],\"ntiles\":6,\"ntiles_per_rank\":[2,2]"},
              {4, "--problem cubesphere:8,4 --tiles 2,2",
               "\"tile_grid\":[2,2],\"tile_size\":[4,4],\"ntiles\":24,\"ntiles_per_rank\":[6,6]"}};
  const int nruns = (int)(sizeof runs / sizeof runs[0]);
  char cmd[2048], out[512], js[512], hist[512];
  static const char *const solvers[3] = {"cg", "pipecg", "srcg --stop recurrence --min-residual --threads 2"};
  for (int solver = 0; solver < 3; solver++) {
    char *first[2] = {NULL, NULL}, *first_h[2] = {NULL, NULL}; /* barotropic, cube */
    for (int k = 0; k < nruns; k++) {
      const int cube = strstr(runs[k].args, "cubesphere") != NULL;
      snprintf(out, sizeof out, "%s", pk_test_tmp_path("t950_gr.mtx"));
      snprintf(js, sizeof js, "%s", pk_test_tmp_path("t950_gr.json"));
      snprintf(hist, sizeof hist, "%s", pk_test_tmp_path("t950_gr.csv"));
      snprintf(cmd, sizeof cmd,
               MPIRUN " %d %s %s --solver %s --reproducible --out %s --history %s --json --quiet > %s",
               runs[k].np, PK_SOLVE_EXE, runs[k].args, solvers[solver], out, hist, js);
      PK_EXPECT(pk_test_system(cmd) == 0, "%s", cmd);
      char *s = slurp(out), *j = slurp(js), *h = slurp(hist);
      if (!s || !h)
        return PK_FAIL;
      PK_EXPECT(j && strstr(j, runs[k].want) &&
                    strstr(j, cube ? "\"tiles_per_rank\":null" : "\"tile_layout\":\"blocks\""),
                "%s: no %s in %s", cmd, runs[k].want, j ? j : "");
      free(j);
      if (!first[cube]) {
        first[cube] = s, first_h[cube] = h;
        continue;
      }
      PK_EXPECT(strcmp(s, first[cube]) == 0, "%s: the solution differs from the first run's", cmd);
      PK_EXPECT(strcmp(h, first_h[cube]) == 0, "%s: the history differs from the first run's", cmd);
      free(s), free(h);
    }
    free(first[0]), free(first[1]), free(first_h[0]), free(first_h[1]);
  }
  PK_TEST_END();
}

/**
 * --tiles per rank that no process grid divides (the numbers in the message), the default of one tile per
 * rank that cannot be cut, and a cube with fewer tiles than ranks: exit 2 on every rank, naming --tiles.
 */
PK_TEST_CASE(serial_grid_bad_input_every_rank) {
  expect_all_ranks_fail("4 %s --problem thinshell:8,8,4 --tiles 3,1", 4,
                        "'--tiles 3,1' (tiles per rank) on 4 ranks does not cut the 8 x 8 columns");
  expect_all_ranks_fail("3 %s --problem barotropic:8,8 --tiles 2,1 --periodic xy", 3,
                        "NX = 8 a multiple of px TX = 2 px and NY = 8 a multiple of py TY = 1 py");
  expect_all_ranks_fail("2 %s --problem barotropic:31,17", 2, "--tiles TX,TY");
  expect_all_ranks_fail("2 %s --problem cubesphere:4,2 --tiles 2,2 --decomp 2,1", 2, "--decomp");
  expect_all_ranks_fail("7 %s --problem cubesphere:4,2 --tiles 1,1", 7, "every rank needs at least one tile");
  PK_TEST_END();
}

/** The cube sphere's default of one tile per face on 7 ranks: exit 2 on every rank, naming --tiles. */
PK_TEST_CASE(serial_grid_cube_too_many_ranks) {
  expect_all_ranks_fail("7 %s --problem cubesphere:4,2", 7, "--tiles");
  PK_TEST_END();
}

PK_MPI_TEST_MAIN(PK_TEST_ENTRY(serial_ranks_same_solution), PK_TEST_ENTRY(serial_reproducible_bitwise),
                 PK_TEST_ENTRY(serial_save_system_global), PK_TEST_ENTRY(serial_bad_input_every_rank),
                 PK_TEST_ENTRY(serial_other_solvers), PK_TEST_ENTRY(serial_outputs_warning_monitor),
                 PK_TEST_ENTRY(serial_threads_node_share), PK_TEST_ENTRY(serial_grid_ranks_same_solution),
                 PK_TEST_ENTRY(serial_grid_reproducible_bitwise),
                 PK_TEST_ENTRY(serial_grid_bad_input_every_rank), PK_TEST_ENTRY(serial_grid_cube_too_many_ranks))

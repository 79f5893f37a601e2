/**
 * @file pkrylov-solve.c
 * @brief Command-line solver: reads a Matrix Market matrix or builds a model problem (the thin shell, the
 *        2-D free-surface problem, the thin shell on the cube sphere), solves A x = b with a Krylov method
 *        of pkrylov (on the library's tiled grids for the models' own decompositions) and reports the
 *        outcome as text or one JSON object.
 *
 * Exit status: 0 converged, 1 did not converge or broke down (x is still written), 2 bad input or
 * usage (the message on stderr names the bad option or value and quotes the library's message).
 * Uses the public API of pkrylov.h only.
 */
#define _POSIX_C_SOURCE 200809L

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "pkrylov.h"
#ifdef PKRYLOV_HAVE_MPI
#include "pkrylov_mpi.h"
#endif

#define PROG "pkrylov-solve"

/** This process's rank and the number of ranks (1 when not started by an MPI launcher). */
static int g_rank = 0, g_size = 1;

/** Exit codes. */
enum { EXIT_CONVERGED = 0, EXIT_NOT_CONVERGED = 1, EXIT_USAGE = 2 };

/** The model problems of --problem (docs/model-problem.md). */
enum { PROB_THINSHELL = 1, PROB_BAROTROPIC = 2, PROB_CUBE = 3 };

/** MITgcm's cg2dpcOffDFac: the off-diagonal factor of --precond ainv. */
#define AINV_OFFDIAG 0.51

/** Everything the command line sets. Strings point into argv. */
typedef struct {
  const char *matrix;      /* positional MATRIX.mtx */
  const char *problem;     /* --problem text, as given */
  int32_t kind;            /* PROB_*: which model problem */
  int32_t nx, ny, nz;      /* parsed --problem grid (the cube: nx = ny = N columns per face edge) */
  int32_t tx, ty;          /* --tiles TX,TY: tiles per rank (the cube: per face); 0 = not given */
  int32_t periodic;        /* --periodic: PKRYLOV_PERIODIC_*; set_periodic says whether it was given */
  int set_periodic;
  int grid;                /* 1: the problem is solved on a pkrylov grid (tiles_of_rank, build_grid) */
  int32_t geometry;        /* PKRYLOV_GEOMETRY_*; set_geometry says whether --geometry was given */
  int set_geometry;
  const char *rhs, *x0, *out, *history, *save_system;
  int32_t solver, precond, layout, backend, precision;
  int set_precond, set_layout;
  int32_t levels;          /* 0 = not given */
  double rtol, atol;
  int32_t maxit, replace, true_residual, threads, restart, step;
  int set_restart, set_step;
  int set_replace, set_true_residual, set_threads;
  int32_t monitor;         /* --monitor K: a progress line every K iterations (0 = none) */
  int json, quiet, help, version;
  int reproducible;        /* --reproducible */
  int32_t stop_rule;       /* --stop: PKRYLOV_STOP_* */
  int min_residual;        /* --min-residual */
  int32_t px, py;          /* --decomp PX,PY (0 = automatic) */
  const char *lib_opts[64]; /* -o KEY=VALUE, in order (pkrylov_context_set_option) */
  int nlib_opts;
  int opt_help;            /* -o help: list the library's options */
} options;

/** Print "pkrylov-solve: error: <message>" on stderr. */
static void usage_error(const char *fmt, ...) {
  va_list ap;
  if (g_size > 1)
    fprintf(stderr, "%s: rank %d: error: ", PROG, g_rank);
  else
    fprintf(stderr, "%s: error: ", PROG);
  va_start(ap, fmt);
  vfprintf(stderr, fmt, ap);
  va_end(ap);
  fprintf(stderr, "\n");
}

/** The usage text. */
_Static_assert(PKRYLOV_MAX_THREADS == 4096, "the usage text and the --threads message say 4096");
static void print_help(FILE *f) {
  fprintf(f,
          "usage: " PROG " [MATRIX.mtx | --problem NAME:SIZES] [options]\n"
          "\n"
          "Solve A x = b with a Krylov method of pkrylov.\n"
          "\n"
          "problem (exactly one; docs/model-problem.md):\n"
          "  MATRIX.mtx                 square sparse matrix in Matrix Market format\n"
          "  --problem thinshell:NX,NY,NZ  thin-shell pressure model problem on an NX x NY x NZ grid\n"
          "  --problem barotropic:NX,NY    2-D free-surface problem of a global ocean with continents on an\n"
          "                             NX x NY grid (NX, NY >= 4; periodic in x unless --periodic says)\n"
          "  --problem cubesphere:N,NZ     the thin shell on the cube sphere: six faces of N x N x NZ\n"
          "  --geometry gnomonic|uniform   thin-shell horizontal geometry (default gnomonic)\n"
          "\n"
          "tiled grids (the models' decomposition: pkrylov_grid_create; barotropic and cubesphere always):\n"
          "  --tiles TX,TY              tiles per rank (MITgcm's nSx x nSy) of thinshell and barotropic:\n"
          "                             the P ranks form a px x py process grid (the most square one whose\n"
          "                             blocks divide: NX a multiple of px TX, NY of py TY), each rank a\n"
          "                             block of TX x TY tiles, so (px TX) x (py TY) equal tiles in all;\n"
          "                             default 1,1 (one tile per rank). cubesphere: TX = TY = T cuts each\n"
          "                             FACE into T x T tiles (default 1: one tile per face), the ranks get\n"
          "                             contiguous runs of tiles in tile order (whole faces on 1, 2, 3 or 6\n"
          "                             ranks); every rank needs at least one tile\n"
          "  --periodic none|x|y|xy     periodic directions of thinshell and barotropic (default:\n"
          "                             barotropic x, thinshell none); on thinshell it puts the problem on\n"
          "                             a grid\n"
          "\n"
          "system:\n"
          "  --rhs B.mtx                right-hand side vector (default b = A * ones)\n"
          "  --x0 X0.mtx                initial guess (default zero)\n"
          "\n"
          "method:\n"
          "  --solver NAME              Krylov method: cg (default), pipecg, srcg (single-reduction CG),\n"
          "                             bicgstab, pipebicgstab, gmres, pipegmres, fgmres, cagmres\n"
          "  --restart M                GMRES family: Krylov vectors per cycle (default 30)\n"
          "  --step S|auto              CA-GMRES: basis vectors per block (default auto)\n"
          "  --precond none|jacobi|column|ainv  preconditioner (default: ainv for barotropic, column for\n"
          "                             the other problems, jacobi for a matrix file); ainv: the models'\n"
          "                             5-point approximate inverse (MITgcm's cg2d, off-diagonal factor\n"
          "                             0.51), for 2-D problems only (barotropic, or NZ = 1; puts thinshell\n"
          "                             on a grid)\n"
          "  --levels NZ                vertical levels per column (column preconditioner; required\n"
          "                             for a matrix file)\n"
          "  --layout kslow|kfast       where the levels of a column lie (default kslow)\n"
          "  --backend cpu|cuda|auto    backend (default auto)\n"
          "  --rtol R                   relative tolerance (default 1e-8)\n"
          "  --atol A                   absolute tolerance (default 0)\n"
          "  --maxit N                  iteration cap (default 1000)\n"
          "  --replace auto|K           pipelined CG: residual replacement when an estimate of the\n"
          "                             recurrence's rounding errors says so (auto, the default) or\n"
          "                             every K iterations (0 = never; pipelined BiCGStab: every K,\n"
          "                             every 50 with auto)\n"
          "  --precision P              fp64 (default), mixed-precond (fp32 preconditioner factors) or\n"
          "                             mixed (fp32 factors and operator coefficients); CUDA only\n"
          "  --true-residual K          recompute the true residual every K iterations\n"
          "  --stop confirmed|recurrence  confirmed (default): the recurrence residual meets the\n"
          "                             tolerance and the true residual confirms it; recurrence: a model's\n"
          "                             own CG rule (sum r^2 < tol^2 on the recurrence residual alone)\n"
          "  --min-residual             return the iterate of the smallest recurrence residual (cg,\n"
          "                             pipecg, srcg)\n"
          "  --threads T                CPU threads, 1 to 4096 (0 = the default: the cores available to the\n"
          "                             process; under mpirun, this rank's share of its node's cores)\n"
          "  --reproducible             exact global sums: bitwise the same solution for any number of\n"
          "                             ranks and threads, and any --tiles (every solver, CPU and CUDA)\n"
          "  -o KEY=VALUE               a library option (repeatable; after the environment variable\n"
          "                             PKRYLOV_OPTIONS, which the library reads too), e.g. -o cuda.csr_format=dia\n"
          "                             -o kry.graph=0; '-o help' lists the options, their values and defaults\n"
          "\n"
          "under mpirun (MPI builds; every rank gets the same command line):\n"
          "  --decomp PX,PY             cut the NX x NY columns of thinshell (not on a grid) into PX x PY\n"
          "                             blocks, one per rank (default: chosen from the number of ranks)\n"
          "  --rhs, --x0 files hold the global vector; --out, --save-system write the global solution and\n"
          "  system in the global order (i + NX*(j + NY*k); cubesphere i + N*(j + N*(f + 6*k))) whatever\n"
          "  the tiling and the number of ranks; a MATRIX.mtx is read by rank 0 and distributed by blocks\n"
          "  of rows (balanced; with '--precond column --layout kfast' blocks of whole columns)\n"
          "\n"
          "output:\n"
          "  --out X.mtx                write the solution (also when not converged)\n"
          "  --history H.csv            write the residual history as iteration,residual lines\n"
          "  --save-system PREFIX       write PREFIX_A.mtx and PREFIX_b.mtx before solving\n"
          "  --monitor K                a progress line on stderr every K iterations and at least every\n"
          "                             second: residual, reduction so far, iterations per second and an\n"
          "                             estimate of the iterations and time left from the convergence rate\n"
          "  --json                     print one JSON object on stdout (text report goes to stderr)\n"
          "  --quiet                    no text report\n"
          "  --help                     this text\n"
          "  --version                  the version and the parts compiled in (CUDA, MPI, NCCL, OpenMP)\n"
          "\n"
          "Every output (--out, --history, --save-system) is checked to be writable before any work.\n"
          "CG and pipelined CG on a matrix file that is not symmetric give a warning on stderr.\n"
          "\n"
          "exit status: 0 converged, 1 not converged or breakdown, 2 bad input or usage\n");
}

/** The library's version and the parts compiled into it, one "name: yes|no" line each. */
static void print_version(FILE *f) {
  int32_t major = 0, minor = 0, patch = 0;
  pkrylov_get_version(&major, &minor, &patch);
  fprintf(f, PROG " (pkrylov) %d.%d.%d\n", (int)major, (int)minor, (int)patch);
  const struct {
    const char *name;
    int32_t on;
  } parts[] = {{"CUDA", pkrylov_has_cuda()}, {"MPI", pkrylov_has_mpi()}, {"NCCL", pkrylov_has_nccl()},
               {"OpenMP", pkrylov_has_openmp()}};
  for (size_t i = 0; i < sizeof parts / sizeof parts[0]; i++)
    fprintf(f, "%s: %s\n", parts[i].name, parts[i].on ? "yes" : "no");
}

/** The library's options (-o help): one line each, from the library's table. */
static void print_lib_options(FILE *f) {
  fprintf(f, "library options (-o KEY=VALUE, or the environment variable PKRYLOV_OPTIONS=\"KEY=VALUE ...\"):\n");
  char line[1024];
  for (int32_t i = 0; i < pkrylov_option_count(); i++)
    if (pkrylov_option_describe(i, line, (int32_t)sizeof line) == PKRYLOV_SUCCESS) fprintf(f, "  %s\n", line);
}

/** Parse a whole string as a finite double; 0 on success. */
static int parse_double(const char *s, double *v) {
  char *end = NULL;
  if (!s || !*s) return 1;
  errno = 0;
  double d = strtod(s, &end);
  if (errno != 0 || end == s || *end != '\0' || !isfinite(d)) return 1;
  *v = d;
  return 0;
}

/** Parse a whole string as a base-10 int32; 0 on success. */
static int parse_int(const char *s, int32_t *v) {
  char *end = NULL;
  if (!s || !*s) return 1;
  errno = 0;
  long l = strtol(s, &end, 10);
  if (errno != 0 || end == s || *end != '\0' || l < INT32_MIN || l > INT32_MAX) return 1;
  *v = (int32_t)l;
  return 0;
}

/** Parse exactly `count` comma-separated positive integers ("A,B" or "A,B,C": digits only); 0 on success. */
static int parse_int_list(const char *p, int count, int32_t *v) {
  for (int d = 0; d < count; d++) {
    char *end = NULL;
    if (*p < '0' || *p > '9') return 1; /* no sign, no blank */
    errno = 0;
    long l = strtol(p, &end, 10);
    if (errno != 0 || end == p || l < 1 || l > INT32_MAX) return 1;
    v[d] = (int32_t)l;
    if (d < count - 1) {
      if (*end != ',') return 1;
      p = end + 1;
    } else if (*end != '\0') {
      return 1;
    }
  }
  return 0;
}

/**
 * Parse "thinshell:NX,NY,NZ", "barotropic:NX,NY" (nz = 1) or "cubesphere:N,NZ" (nx = ny = N), each a positive
 * integer; 0 on success.
 */
static int parse_problem(const char *s, int32_t *kind, int32_t *nx, int32_t *ny, int32_t *nz) {
  static const struct {
    const char *prefix;
    int32_t kind, count;
  } kinds[] = {
      {"thinshell:", PROB_THINSHELL, 3}, {"barotropic:", PROB_BAROTROPIC, 2}, {"cubesphere:", PROB_CUBE, 2}};
  for (size_t q = 0; q < sizeof kinds / sizeof kinds[0]; q++) {
    const size_t len = strlen(kinds[q].prefix);
    int32_t d[3] = {1, 1, 1};
    if (strncmp(s, kinds[q].prefix, len) != 0 || parse_int_list(s + len, kinds[q].count, d))
      continue;
    *kind = kinds[q].kind;
    if (*kind == PROB_CUBE)
      *nx = d[0], *ny = d[0], *nz = d[1];
    else
      *nx = d[0], *ny = d[1], *nz = d[2];
    return 0;
  }
  return 1;
}

/** Look name up in a NULL-terminated list of names; the matching value or -1. */
static int32_t lookup(const char *name, const char *const *names, const int32_t *values) {
  for (int i = 0; names[i]; i++)
    if (strcmp(name, names[i]) == 0) return values[i];
  return -1;
}

/** 1 when a pkrylov_periodic value is periodic in x (y). */
static int periodic_x(int32_t periodic) {
  return ((periodic - PKRYLOV_PERIODIC_NONE) & 1) != 0;
}
static int periodic_y(int32_t periodic) {
  return ((periodic - PKRYLOV_PERIODIC_NONE) & 2) != 0;
}

/**
 * The options of the tiled grids (--tiles, --periodic, --precond ainv) against the problem, after the loop of
 * parse_args(): sets o->grid (barotropic and cubesphere always; thinshell with --tiles, --periodic or
 * --precond ainv) and barotropic's default periodicity (x). Returns 0, or 1 after a message naming the
 * option.
 */
static int check_grid_options(options *o) {
  if (!o->problem)
    return 0;
  o->grid = o->kind != PROB_THINSHELL || o->tx > 0 || o->set_periodic || o->precond == PKRYLOV_PRECOND_AINV;
  if (o->kind == PROB_BAROTROPIC && !o->set_periodic)
    o->periodic = PKRYLOV_PERIODIC_X;
  if (o->kind == PROB_CUBE && o->set_periodic) {
    usage_error("option '--periodic' does not apply to '--problem %s': the cube sphere is a closed surface",
                o->problem);
    return 1;
  }
  if (o->px > 0 && o->grid) {
    if (o->tx > 0)
      usage_error("options '--tiles' and '--decomp' exclude each other ('--tiles' gives the tiles per rank; "
                  "the grid arranges the ranks itself)");
    else if (o->kind != PROB_THINSHELL)
      usage_error("option '--decomp' applies to thinshell only: '--problem %s' is cut with '--tiles'",
                  o->problem);
    else
      usage_error(
          "option '%s' puts the thin shell on a tiled grid, which '--decomp' does not cut: use '--tiles' "
          "instead",
          o->set_periodic ? "--periodic" : "--precond ainv");
    return 1;
  }
  if (o->precond == PKRYLOV_PRECOND_AINV && o->nz != 1) {
    usage_error("option '--precond ainv' is for 2-D problems (barotropic, or NZ = 1), but '--problem %s' has "
                "NZ = %d levels",
                o->problem, (int)o->nz);
    return 1;
  }
  if (o->tx > 0 && o->kind == PROB_CUBE && o->tx != o->ty) {
    usage_error("option '--tiles %d,%d' on '--problem %s': the tiles of a cube face must be square (TX = TY)",
                (int)o->tx, (int)o->ty, o->problem);
    return 1;
  }
  if (o->tx > 0 && o->kind == PROB_CUBE && o->nx % o->tx) { /* rectangles: make_tiling(), with the ranks */
    usage_error(
        "option '--tiles %d,%d' does not cut the %d x %d columns of a face of '--problem %s' into equal "
        "tiles (N must be a multiple of T)",
        (int)o->tx, (int)o->ty, (int)o->nx, (int)o->ny, o->problem);
    return 1;
  }
  if ((periodic_x(o->periodic) && o->nx < 3) || (periodic_y(o->periodic) && o->ny < 3)) {
    usage_error("option '--periodic %s' needs at least 3 columns in a periodic direction; '--problem %s' has "
                "%d x %d",
                periodic_x(o->periodic) && periodic_y(o->periodic) ? "xy"
                : periodic_x(o->periodic)                          ? "x"
                                                                   : "y",
                o->problem, (int)o->nx, (int)o->ny);
    return 1;
  }
  return 0;
}

/**
 * Parse argv into o (defaults first). Returns 0 on success, otherwise prints a message naming the
 * offending option and returns 1.
 */
static int parse_args(int argc, char **argv, options *o) {
  static const char *const solver_names[] = {"cg",    "pipecg",    "bicgstab", "pipebicgstab", "gmres",
                                             "pipegmres", "fgmres", "cagmres", "srcg",     NULL};
  static const int32_t solver_values[] = {PKRYLOV_SOLVER_CG,       PKRYLOV_SOLVER_PIPECG,
                                          PKRYLOV_SOLVER_BICGSTAB, PKRYLOV_SOLVER_PIPEBICGSTAB,
                                          PKRYLOV_SOLVER_GMRES,    PKRYLOV_SOLVER_PIPEGMRES,
                                          PKRYLOV_SOLVER_FGMRES,   PKRYLOV_SOLVER_CAGMRES,
                                          PKRYLOV_SOLVER_SRCG};
  static const char *const stop_names[] = {"confirmed", "recurrence", NULL};
  static const int32_t stop_values[] = {PKRYLOV_STOP_CONFIRMED, PKRYLOV_STOP_RECURRENCE};
  static const char *const precond_names[] = {"none", "jacobi", "column", "ainv", NULL};
  static const int32_t precond_values[] = {PKRYLOV_PRECOND_NONE, PKRYLOV_PRECOND_JACOBI,
                                           PKRYLOV_PRECOND_COLUMN, PKRYLOV_PRECOND_AINV};
  static const char *const periodic_names[] = {"none", "x", "y", "xy", NULL};
  static const int32_t periodic_values[] = {PKRYLOV_PERIODIC_NONE, PKRYLOV_PERIODIC_X, PKRYLOV_PERIODIC_Y,
                                            PKRYLOV_PERIODIC_XY};
  static const char *const layout_names[] = {"kslow", "kfast", NULL};
  static const int32_t layout_values[] = {PKRYLOV_LAYOUT_KSLOW, PKRYLOV_LAYOUT_KFAST};
  static const char *const backend_names[] = {"cpu", "cuda", "auto", NULL};
  static const int32_t backend_values[] = {PKRYLOV_BACKEND_CPU, PKRYLOV_BACKEND_CUDA,
                                           PKRYLOV_BACKEND_AUTO};
  static const char *const precision_names[] = {"fp64", "mixed-precond", "mixed", NULL};
  static const int32_t precision_values[] = {PKRYLOV_PRECISION_FP64, PKRYLOV_PRECISION_MIXED_PRECOND,
                                             PKRYLOV_PRECISION_MIXED};
  static const char *const geometry_names[] = {"gnomonic", "uniform", NULL};
  static const int32_t geometry_values[] = {PKRYLOV_GEOMETRY_GNOMONIC, PKRYLOV_GEOMETRY_UNIFORM};

  memset(o, 0, sizeof *o);
  o->geometry = PKRYLOV_GEOMETRY_GNOMONIC;
  o->solver = PKRYLOV_SOLVER_CG;
  o->layout = PKRYLOV_LAYOUT_KSLOW;
  o->backend = PKRYLOV_BACKEND_AUTO;
  o->precision = PKRYLOV_PRECISION_FP64;
  o->rtol = 1e-8;
  o->atol = 0.0;
  o->maxit = 1000;
  o->stop_rule = PKRYLOV_STOP_CONFIRMED;
  o->periodic = PKRYLOV_PERIODIC_NONE;

  for (int i = 1; i < argc; i++) {
    const char *arg = argv[i];
    if (arg[0] != '-' || arg[1] == '\0') { /* positional (a lone "-" is not an option either) */
      if (o->matrix) {
        usage_error("more than one matrix file given ('%s' and '%s')", o->matrix, arg);
        return 1;
      }
      o->matrix = arg;
      continue;
    }
    /* flags without a value */
    if (strcmp(arg, "--json") == 0) { o->json = 1; continue; }
    if (strcmp(arg, "--quiet") == 0) { o->quiet = 1; continue; }
    if (strcmp(arg, "--help") == 0 || strcmp(arg, "-h") == 0) { o->help = 1; continue; }
    if (strcmp(arg, "--version") == 0) { o->version = 1; continue; }
    if (strcmp(arg, "--reproducible") == 0) { o->reproducible = 1; continue; }
    if (strcmp(arg, "--min-residual") == 0) { o->min_residual = 1; continue; }

    /* options with a value: "--opt VALUE" or "--opt=VALUE" */
    static const char *const valued[] = {
        "--problem",   "--geometry",      "--rhs",     "--x0",      "--solver",      "--precond",
        "--levels",    "--layout",        "--backend", "--rtol",    "--atol",        "--maxit",
        "--replace",   "--true-residual", "--out",     "--history", "--save-system", "--threads",
        "--precision", "--restart",       "--step",    "--decomp",  "--stop",        "--monitor",
        "--tiles",     "--periodic",      "-o",        "--option",  NULL};
    char name[64];
    const char *val = NULL;
    const char *eq = strchr(arg, '=');
    size_t len = eq ? (size_t)(eq - arg) : strlen(arg);
    if (len >= sizeof name) len = sizeof name - 1;
    memcpy(name, arg, len);
    name[len] = '\0';
    int known = 0;
    for (int k = 0; valued[k]; k++) known |= strcmp(name, valued[k]) == 0;
    if (!known) {
      usage_error("unknown option '%s' (see --help)", arg);
      return 1;
    }
    if (eq) {
      val = eq + 1;
    } else if (i + 1 < argc) {
      val = argv[++i];
    } else {
      usage_error("option '%s' needs a value", name);
      return 1;
    }
    if (*val == '\0') {
      usage_error("option '%s' has an empty value", name);
      return 1;
    }

    if (strcmp(name, "-o") == 0 || strcmp(name, "--option") == 0) {
      if (strcmp(val, "help") == 0) {
        o->opt_help = 1;
        continue;
      }
      const char *e = strchr(val, '=');
      if (!e || e == val) {
        usage_error("invalid value '%s' for option '-o': expected KEY=VALUE (see '-o help')", val);
        return 1;
      }
      if (o->nlib_opts == (int)(sizeof o->lib_opts / sizeof o->lib_opts[0])) {
        usage_error("more than %d '-o' options", (int)(sizeof o->lib_opts / sizeof o->lib_opts[0]));
        return 1;
      }
      o->lib_opts[o->nlib_opts++] = val;
      continue;
    }
    if (strcmp(name, "--problem") == 0) {
      if (parse_problem(val, &o->kind, &o->nx, &o->ny, &o->nz)) {
        usage_error(
            "invalid value '%s' for option '--problem': expected thinshell:NX,NY,NZ, barotropic:NX,NY "
            "or cubesphere:N,NZ with positive integers",
            val);
        return 1;
      }
      if (o->kind == PROB_BAROTROPIC && (o->nx < 4 || o->ny < 4)) {
        usage_error("invalid value '%s' for option '--problem': barotropic needs NX, NY >= 4", val);
        return 1;
      }
      o->problem = val;
    } else if (strcmp(name, "--periodic") == 0) {
      o->periodic = lookup(val, periodic_names, periodic_values);
      o->set_periodic = 1;
      if (o->periodic < 0) {
        usage_error("invalid value '%s' for option '--periodic' (none, x, y or xy)", val);
        return 1;
      }
    } else if (strcmp(name, "--tiles") == 0) {
      int32_t t[2];
      if (parse_int_list(val, 2, t)) {
        usage_error("invalid value '%s' for option '--tiles': expected TX,TY with positive integers", val);
        return 1;
      }
      o->tx = t[0], o->ty = t[1];
    } else if (strcmp(name, "--geometry") == 0) {
      o->geometry = lookup(val, geometry_names, geometry_values);
      o->set_geometry = 1;
      if (o->geometry < 0) {
        usage_error("invalid value '%s' for option '--geometry' (gnomonic or uniform)", val);
        return 1;
      }
    } else if (strcmp(name, "--solver") == 0) {
      o->solver = lookup(val, solver_names, solver_values);
      if (o->solver < 0) {
        usage_error("invalid value '%s' for option '--solver' (cg, pipecg, srcg, bicgstab, pipebicgstab, "
                    "gmres, pipegmres, fgmres or cagmres)",
                    val);
        return 1;
      }
    } else if (strcmp(name, "--stop") == 0) {
      o->stop_rule = lookup(val, stop_names, stop_values);
      if (o->stop_rule < 0) {
        usage_error("invalid value '%s' for option '--stop' (confirmed or recurrence)", val);
        return 1;
      }
    } else if (strcmp(name, "--precond") == 0) {
      o->precond = lookup(val, precond_names, precond_values);
      o->set_precond = 1;
      if (o->precond < 0) {
        usage_error("invalid value '%s' for option '--precond' (none, jacobi, column or ainv)", val);
        return 1;
      }
    } else if (strcmp(name, "--layout") == 0) {
      o->layout = lookup(val, layout_names, layout_values);
      o->set_layout = 1;
      if (o->layout < 0) {
        usage_error("invalid value '%s' for option '--layout' (kslow or kfast)", val);
        return 1;
      }
    } else if (strcmp(name, "--precision") == 0) {
      o->precision = lookup(val, precision_names, precision_values);
      if (o->precision < 0) {
        usage_error("invalid value '%s' for option '--precision' (fp64, mixed-precond or mixed)", val);
        return 1;
      }
    } else if (strcmp(name, "--backend") == 0) {
      o->backend = lookup(val, backend_names, backend_values);
      if (o->backend < 0) {
        usage_error("invalid value '%s' for option '--backend' (cpu, cuda or auto)", val);
        return 1;
      }
    } else if (strcmp(name, "--rtol") == 0 || strcmp(name, "--atol") == 0) {
      double *dst = name[2] == 'r' ? &o->rtol : &o->atol;
      if (parse_double(val, dst) || *dst < 0.0) {
        usage_error("invalid value '%s' for option '%s': expected a finite number >= 0", val, name);
        return 1;
      }
    } else if (strcmp(name, "--decomp") == 0) {
      int32_t d[2];
      if (parse_int_list(val, 2, d)) {
        usage_error("invalid value '%s' for option '--decomp': expected PX,PY with positive integers", val);
        return 1;
      }
      o->px = d[0], o->py = d[1];
    } else if (strcmp(name, "--rhs") == 0) {
      o->rhs = val;
    } else if (strcmp(name, "--x0") == 0) {
      o->x0 = val;
    } else if (strcmp(name, "--out") == 0) {
      o->out = val;
    } else if (strcmp(name, "--history") == 0) {
      o->history = val;
    } else if (strcmp(name, "--save-system") == 0) {
      o->save_system = val;
    } else if (strcmp(name, "--step") == 0 && strcmp(val, "auto") == 0) {
      o->step = 0, o->set_step = 1;
    } else if (strcmp(name, "--replace") == 0 && strcmp(val, "auto") == 0) {
      o->replace = PKRYLOV_REPLACE_AUTO, o->set_replace = 1;
    } else {
      /* the integer options: --levels, --monitor (> 0), --maxit, --replace, --true-residual, --threads
         (0 to 4096) */
      const int is_levels = strcmp(name, "--levels") == 0, is_threads = strcmp(name, "--threads") == 0,
                positive = is_levels || strcmp(name, "--monitor") == 0;
      int32_t v = 0;
      if (parse_int(val, &v) || v < 0 || (positive && v == 0) || (is_threads && v > PKRYLOV_MAX_THREADS)) {
        usage_error("invalid value '%s' for option '%s': expected %san integer %s", val, name,
                    strcmp(name, "--replace") == 0 ? "'auto' or " : "",
                    positive ? "> 0" : is_threads ? "from 0 (the default) to 4096" : ">= 0");
        return 1;
      }
      if (is_levels) {
        o->levels = v;
      } else if (strcmp(name, "--monitor") == 0) {
        o->monitor = v;
      } else if (strcmp(name, "--maxit") == 0) {
        o->maxit = v;
      } else if (strcmp(name, "--replace") == 0) {
        o->replace = v, o->set_replace = 1;
      } else if (strcmp(name, "--true-residual") == 0) {
        o->true_residual = v, o->set_true_residual = 1;
      } else if (strcmp(name, "--restart") == 0) {
        o->restart = v, o->set_restart = 1;
      } else if (strcmp(name, "--step") == 0) {
        o->step = v, o->set_step = 1;
      } else {
        o->threads = v, o->set_threads = 1;
      }
    }
  }
  if (o->help || o->version || o->opt_help) return 0;

  if (!o->matrix && !o->problem) {
    usage_error("no problem given: name a MATRIX.mtx file or use --problem (thinshell:NX,NY,NZ, "
                "barotropic:NX,NY or cubesphere:N,NZ)");
    return 1;
  }
  if (o->matrix && o->problem) {
    usage_error("both a matrix file ('%s') and '--problem %s' given; use one", o->matrix, o->problem);
    return 1;
  }
  if (o->set_geometry && o->kind != PROB_THINSHELL) {
    usage_error("option '--geometry' applies to '--problem thinshell' only");
    return 1;
  }
  if (!o->set_precond)
    o->precond = o->kind == PROB_BAROTROPIC ? PKRYLOV_PRECOND_AINV
                 : o->problem               ? PKRYLOV_PRECOND_COLUMN
                                            : PKRYLOV_PRECOND_JACOBI;
  if (o->matrix && (o->tx > 0 || o->set_periodic || o->precond == PKRYLOV_PRECOND_AINV)) {
    usage_error("option '%s' applies to '--problem' only", o->tx > 0         ? "--tiles"
                                                           : o->set_periodic ? "--periodic"
                                                                             : "--precond ainv");
    return 1;
  }
  if (check_grid_options(o))
    return 1;
  if (o->matrix && o->precond == PKRYLOV_PRECOND_COLUMN && o->levels == 0) {
    usage_error("'--precond column' on a matrix file needs '--levels NZ' (vertical levels per column)");
    return 1;
  }
  if (o->px > 0 && !o->problem) {
    usage_error("option '--decomp' applies to '--problem' only");
    return 1;
  }
  if (!(o->rtol > 0.0 || o->atol > 0.0)) {
    usage_error("options '--rtol' and '--atol' are both 0: nothing to converge to");
    return 1;
  }
  return 0;
}

/** Monotonic wall clock in seconds. */
static double wall_time(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/**
 * Before any work: can `path`, the value of `option`, be written? It is opened for appending (which creates
 * it) and closed again; a file that did not exist is removed, so nothing is left behind when the run fails
 * later. Returns 0, or 1 after printing the reason.
 */
static int check_writable(const char *option, const char *path) {
  struct stat sb;
  const int existed = stat(path, &sb) == 0;
  if (existed && S_ISDIR(sb.st_mode)) {
    usage_error("cannot write '%s %s': it is a directory", option, path);
    return 1;
  }
  errno = 0;
  FILE *f = fopen(path, "a");
  if (!f) {
    usage_error("cannot write '%s %s': %s", option, path, strerror(errno));
    return 1;
  }
  fclose(f);
  if (!existed) remove(path);
  return 0;
}

/** Every output of the command line writable (--out, --history, --save-system's two files)? 0 or 1. */
static int check_outputs(const options *o) {
  if (o->out && check_writable("--out", o->out)) return 1;
  if (o->history && check_writable("--history", o->history)) return 1;
  if (o->save_system) {
    const size_t len = strlen(o->save_system) + 8;
    char *path = malloc(len);
    if (!path) {
      usage_error("out of memory");
      return 1;
    }
    int bad = 0;
    for (int k = 0; k < 2 && !bad; k++) {
      snprintf(path, len, "%s_%s.mtx", o->save_system, k ? "b" : "A");
      bad = check_writable("--save-system", path);
    }
    free(path);
    return bad;
  }
  return 0;
}

/**
 * The first pair (i, j), i != j, of a CSR matrix with sorted columns where A(i, j) and A(j, i) differ by
 * more than 1e-12 of the larger plus 1e-13 of the largest entry of A (a missing entry is 0; assembled
 * matrices stored "general" are often symmetric only to rounding): 1 and the pair in *pi, *pj, *vij, *vji,
 * or 0 when the matrix is symmetric.
 */
static int csr_asymmetry(int64_t n, const int64_t *rp, const int64_t *ci, const double *v, int64_t *pi,
                         int64_t *pj, double *vij, double *vji) {
  double amax = 0.0;
  for (int64_t k = 0; k < rp[n]; k++) amax = fmax(amax, fabs(v[k]));
  for (int64_t i = 0; i < n; i++)
    for (int64_t k = rp[i]; k < rp[i + 1]; k++) {
      const int64_t j = ci[k];
      if (j == i) continue;
      int64_t lo = rp[j], hi = rp[j + 1]; /* binary search of column i in row j */
      while (lo < hi) {
        const int64_t mid = lo + (hi - lo) / 2;
        if (ci[mid] < i) lo = mid + 1;
        else hi = mid;
      }
      const double a = v[k], b = lo < rp[j + 1] && ci[lo] == i ? v[lo] : 0.0;
      if (fabs(a - b) > 1e-12 * fmax(fabs(a), fabs(b)) + 1e-13 * amax) {
        *pi = i, *pj = j, *vij = a, *vji = b;
        return 1;
      }
    }
  return 0;
}

/** CG or pipelined CG on the matrix file: warn (once, on stderr) when the CSR arrays are not symmetric. */
static void warn_if_not_symmetric(const options *o, int64_t n, const int64_t *rp, const int64_t *ci,
                                  const double *v) {
  int64_t i, j;
  double vij, vji;
  if (!csr_asymmetry(n, rp, ci, v, &i, &j, &vij, &vji)) return;
  fprintf(
      stderr,
      "%s: warning: '--solver %s' assumes a symmetric matrix, but '%s' is not: A(%lld,%lld) = %.17g and "
      "A(%lld,%lld) = %.17g; CG may break down or stop at a wrong answer (use --solver gmres or bicgstab)\n",
      PROG, o->solver == PKRYLOV_SOLVER_CG ? "cg" : "pipecg", o->matrix, (long long)i + 1, (long long)j + 1,
      vij, (long long)j + 1, (long long)i + 1, vji);
}

/** 1 when the options ask for CG or pipelined CG on a matrix file (whose symmetry is then checked). */
static int needs_symmetry_check(const options *o) {
  return o->matrix && (o->solver == PKRYLOV_SOLVER_CG || o->solver == PKRYLOV_SOLVER_PIPECG);
}

/** State of the --monitor callback. */
typedef struct {
  int32_t every;       /* a line every `every` iterations */
  int32_t maxit;       /* the iteration cap */
  double target;       /* the residual the solve stops at: max(rtol ||b||, atol) */
  double t0;           /* wall time at the start of the solve */
  double r0;           /* residual of iteration 0 */
  double t_last, r_last; /* time and residual of the last line */
  int32_t it_last;     /* its iteration */
  int rank0;           /* this rank prints */
} progress;

/**
 * The --monitor callback: a line on stderr every p->every iterations, and whenever a second has passed
 * since the last one. The convergence factor per iteration is taken over the iterations since the last
 * line (over all of them for the first, or when the residual rose since the last line), and gives the
 * iterations (and, at the rate so far, the time) left to reach the tolerance, capped by --maxit.
 */
static int progress_monitor(void *user, int32_t it, double res) {
  progress *p = user;
  const double now = wall_time();
  if (it == 0) {
    p->r0 = res, p->r_last = res, p->it_last = 0, p->t_last = now;
    return 0;
  }
  if (it % p->every != 0 && now - p->t_last < 1.0) return 0;
  const double elapsed = now - p->t0, rate = elapsed > 0 ? it / elapsed : INFINITY;
  const int32_t span = it > p->it_last ? it - p->it_last : it;
  const double base = it > p->it_last ? p->r_last : p->r0;
  double factor = base > 0 && res > 0 ? pow(res / base, 1.0 / span) : NAN;
  if (!(factor < 1.0) && p->r0 > 0 && res > 0) factor = pow(res / p->r0, 1.0 / it); /* the whole solve's */
  if (p->rank0) {
    fprintf(stderr, "%s: monitor: iteration %d, residual %.3e, reduction %.3e, %.4g it/s", PROG, (int)it, res,
            p->r0 > 0 ? res / p->r0 : 0.0, rate);
    if (res <= p->target) {
      fprintf(stderr, ", at the tolerance %.3e\n", p->target);
    } else if (factor < 1.0) {
      double left = ceil(log(p->target / res) / log(factor));
      const int capped = left > (double)p->maxit - it;
      if (capped) left = (double)p->maxit - it;
      fprintf(stderr, ", about %.0f more iterations (%.3g s)%s at %.4f per iteration\n", left, left / rate,
              capped ? " to --maxit" : " to the tolerance", factor);
    } else {
      fprintf(stderr, ", no estimate: the residual is not below the initial one\n");
    }
  }
  p->t_last = now, p->r_last = res, p->it_last = it;
  return 0;
}

/** The context's last error message (or the thread-local one when ctx is NULL). */
static const char *lib_message(pkrylov_context ctx) {
  const char *msg = NULL;
  if (ctx) pkrylov_context_get_last_error(ctx, NULL, &msg);
  if (!msg || !*msg) msg = pkrylov_last_error_message();
  return msg ? msg : "";
}

/** Report a failed library call: what we tried, the status string and the library's message. */
static void lib_error(pkrylov_context ctx, int status, const char *what) {
  if (g_size > 1)
    fprintf(stderr, "%s: rank %d: error: %s: %s (%s)\n", PROG, g_rank, what, lib_message(ctx),
            pkrylov_error_string(status));
  else
    fprintf(stderr, "%s: error: %s: %s (%s)\n", PROG, what, lib_message(ctx), pkrylov_error_string(status));
}

/* ---- MPI: every rank takes the same decisions ---- */

/** 1 when every rank passes ok != 0 (collective under MPI). */
static int all_ok(int ok) {
#ifdef PKRYLOV_HAVE_MPI
  if (g_size > 1) {
    int all = 0;
    MPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    return all;
  }
#endif
  return ok;
}

/** Sum of local values over the ranks (in place). */
static void sum_over_ranks(double *v, int count) {
#ifdef PKRYLOV_HAVE_MPI
  if (g_size > 1) MPI_Allreduce(MPI_IN_PLACE, v, count, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
#else
  (void)v, (void)count;
#endif
}

/** 1 when the command lines of all ranks are the same (FNV-1a hash of the arguments compared). */
static int same_command_line(int argc, char **argv) {
#ifdef PKRYLOV_HAVE_MPI
  if (g_size > 1) {
    uint64_t h = 1469598103934665603ull;
    for (int i = 1; i < argc; i++)
      for (const unsigned char *p = (const unsigned char *)argv[i];; p++) {
        h = (h ^ *p) * 1099511628211ull;
        if (!*p) break;
      }
    unsigned long long mn = h, mx = h;
    MPI_Allreduce(MPI_IN_PLACE, &mn, 1, MPI_UNSIGNED_LONG_LONG, MPI_MIN, MPI_COMM_WORLD);
    MPI_Allreduce(MPI_IN_PLACE, &mx, 1, MPI_UNSIGNED_LONG_LONG, MPI_MAX, MPI_COMM_WORLD);
    return mn == mx;
  }
#endif
  (void)argc, (void)argv;
  return 1;
}

/**
 * size = px x py blocks of an nx x ny grid, the most square ones (least boundary per column: the smallest
 * nx/px + ny/py). gx, gy > 0: every block must be a whole number of gx x gy units (nx a multiple of px gx, ny
 * of py gy); 0: any px <= nx, py <= ny. Returns 0, or 1 when no split fits (*px, *py untouched).
 */
static int square_split(int size, int64_t nx, int64_t ny, int64_t gx, int64_t gy, int32_t *px, int32_t *py) {
  double best = INFINITY;
  for (int a = 1; a <= size; a++) {
    if (size % a) continue;
    const int b = size / a;
    const int fits = gx > 0 ? nx % (a * gx) == 0 && ny % (b * gy) == 0 : a <= nx && b <= ny;
    const double cost = (double)nx / a + (double)ny / b; /* half the perimeter of a block */
    if (fits && cost < best)
      best = cost, *px = a, *py = b;
  }
  return best == INFINITY;
}

/** px x py = size blocks for an nx x ny grid (the default of --decomp): square_split(), else size x 1. */
static void auto_decomp(int size, int32_t nx, int32_t ny, int32_t *px, int32_t *py) {
  if (square_split(size, nx, ny, 0, 0, px, py))
    *px = size, *py = 1;
}

/* ---- the tiled grids: the problem cut into tiles, the tiles spread over the ranks ---- */

/**
 * A problem on a pkrylov grid: nf faces (1: a rectangle, 6: the cube sphere) of fx x fy columns and nz
 * levels, each face cut into ntx x nty tiles of snx x sny columns, numbered as pkrylov_grid_connect_rect()
 * and pkrylov_grid_connect_cubesphere() number them (tile (tx, ty) of face f: f ntx nty + tx + ntx ty). A
 * rectangle: the ranks form a px x py process grid, rank r the block (r mod px, r / px) of bx x by tiles
 * (--tiles, MITgcm's nSx x nSy), so ntx = px bx, nty = py by. The cube: contiguous runs in tile order
 * (balanced: the first ntiles mod size ranks one more).
 */
typedef struct {
  int32_t nf, fx, fy, nz;
  int32_t ntx, nty, snx, sny, ntiles;
  int32_t periodic; /* PKRYLOV_PERIODIC_* (the rectangle) */
  int blocks;       /* 1: blocks of tiles (rectangles); 0: contiguous runs (the cube) */
  int32_t px, py, bx, by;
  int size; /* ranks */
} tiling;

/** The tiles of rank r, in increasing global numbers (the order of the local arrays' tile index): *nt of
 * them. */
static void tiles_of_rank(const tiling *T, int r, int32_t *tiles, int32_t *nt) {
  *nt = 0;
  if (T->blocks) {
    const int32_t X = r % T->px, Y = r / T->px;
    for (int32_t b = 0; b < T->by; b++)
      for (int32_t a = 0; a < T->bx; a++)
        tiles[(*nt)++] = (X * T->bx + a) + T->ntx * (Y * T->by + b);
  } else {
    const int32_t q = T->ntiles / T->size, rem = T->ntiles % T->size;
    const int32_t t0 = r * q + (r < rem ? r : rem), cnt = q + (r < rem);
    for (int32_t t = 0; t < cnt; t++)
      tiles[(*nt)++] = t0 + t;
  }
}

/**
 * The global index of position q of the compact order of the nt tiles `tiles` (i + snx*(j + sny*(t + nt*k)),
 * include/pkrylov.h): i + fx*(j + fy*(f + nf*k)) with i, j the column on face f, that is i + NX*(j + NY*k) on
 * a rectangle and the order of pkrylov_cubesphere_stencil_coefficients() on the cube.
 */
static int64_t global_index(const tiling *T, const int32_t *tiles, int32_t nt, int64_t q) {
  const int64_t i = q % T->snx, r = q / T->snx, j = r % T->sny, tk = r / T->sny, k = tk / nt;
  const int32_t tile = tiles[tk % nt], per = T->ntx * T->nty, f = tile / per;
  const int64_t tx = (tile % per) % T->ntx, ty = (tile % per) / T->ntx;
  return (tx * T->snx + i) + (int64_t)T->fx * ((ty * T->sny + j) + (int64_t)T->fy * (f + (int64_t)T->nf * k));
}

/**
 * The tiling of the problem of o on `size` ranks. A rectangle: px x py ranks, the most square process grid
 * (square_split()) whose blocks of TX x TY tiles (--tiles, default 1 x 1) cut NX x NY into equal tiles, each
 * rank one block. The cube: each face cut into T x T tiles (--tiles T,T, default one tile per face), the
 * ranks contiguous runs. Returns 0, or 1 after a message naming the option (the same on every rank).
 */
static int make_tiling(const options *o, int size, tiling *T) {
  memset(T, 0, sizeof *T);
  T->nf = o->kind == PROB_CUBE ? 6 : 1;
  T->fx = o->nx, T->fy = o->ny, T->nz = o->nz, T->periodic = o->periodic, T->size = size;
  const int32_t tx = o->tx > 0 ? o->tx : 1, ty = o->tx > 0 ? o->ty : 1;
  if (o->kind == PROB_CUBE) {
    T->ntx = tx, T->nty = ty, T->snx = o->nx / tx, T->sny = o->ny / ty, T->ntiles = 6 * tx * ty;
    if (T->ntiles < size) {
      if (o->tx > 0)
        usage_error(
            "'--tiles %d,%d' cuts each face into %d tiles, %d on the six faces, but there are %d ranks: "
            "every rank needs at least one tile",
            (int)tx, (int)ty, (int)(tx * ty), (int)T->ntiles, size);
      else
        usage_error("'--problem %s' has %d tiles (one per face) but there are %d ranks: every rank needs at "
                    "least one tile (give more with '--tiles T,T', T x T tiles per face)",
                    o->problem, (int)T->ntiles, size);
      return 1;
    }
    T->blocks = 0, T->px = size, T->py = 1;
    return 0;
  }
  if (square_split(size, o->nx, o->ny, tx, ty, &T->px, &T->py)) {
    char tried[256] = "";
    size_t len = 0;
    for (int a = 1; a <= size && len < sizeof tried - 32; a++)
      if (size % a == 0)
        len += (size_t)snprintf(tried + len, sizeof tried - len, "%s%d x %d", len ? ", " : "", a, size / a);
    char what[96];
    if (o->tx > 0)
      snprintf(what, sizeof what, "'--tiles %d,%d' (tiles per rank)", (int)tx, (int)ty);
    else
      snprintf(what, sizeof what, "one tile per rank (the default of '--tiles TX,TY')");
    usage_error("%s on %d rank%s does not cut the %d x %d columns of '--problem %s' into equal tiles: no "
                "process grid px x py of %d rank%s has NX = %d a multiple of px TX = %d px and NY = %d a "
                "multiple of py TY = %d py (tried %s)",
                what, size, size > 1 ? "s" : "", (int)o->nx, (int)o->ny, o->problem, size,
                size > 1 ? "s" : "", (int)o->nx, (int)tx, (int)o->ny, (int)ty, tried);
    return 1;
  }
  T->blocks = 1, T->bx = tx, T->by = ty, T->ntx = T->px * tx, T->nty = T->py * ty;
  T->snx = o->nx / T->ntx, T->sny = o->ny / T->nty, T->ntiles = T->ntx * T->nty;
  return 0;
}

/** The coefficients of the whole problem in the global order (on every rank, on the grid path). */
typedef struct {
  double *c[4];  /* aW, aS, aV, aC (aV NULL for barotropic) */
  int32_t *mask; /* barotropic: 0 = land; else NULL */
} global_coeffs;

static void global_coeffs_free(global_coeffs *G) {
  for (int q = 0; q < 4; q++)
    free(G->c[q]), G->c[q] = NULL;
  free(G->mask), G->mask = NULL;
}

/**
 * The coefficients of the problem of o (tiling T) in the global order: pkrylov_barotropic_coefficients(),
 * pkrylov_cubesphere_stencil_coefficients(), or pkrylov_thinshell_stencil_coefficients() closed, in each
 * periodic direction, by the face across the boundary: it couples the first and the last column with the
 * coupling of the face between the first two (aW(0) = aW(1), aS(0) = aS(1)), both diagonals grow by it (the
 * face-sum form of docs/model-problem.md). Returns 0, a library status (its message in
 * pkrylov_last_error_message()) or PKRYLOV_ERR_OUT_OF_MEMORY.
 */
static int global_coefficients(const options *o, const tiling *T, global_coeffs *G) {
  memset(G, 0, sizeof *G);
  const int64_t X = T->fx, Y = T->fy, Z = T->nz, n = (int64_t)T->nf * X * Y * Z;
  for (int q = 0; q < 4; q++)
    if (!(q == 2 && o->kind == PROB_BAROTROPIC) && !(G->c[q] = malloc(sizeof(double) * (size_t)n)))
      return global_coeffs_free(G), PKRYLOV_ERR_OUT_OF_MEMORY;
  double *aW = G->c[0], *aS = G->c[1], *aV = G->c[2], *aC = G->c[3];
  if (o->kind == PROB_BAROTROPIC) {
    if (!(G->mask = malloc(sizeof(int32_t) * (size_t)n)))
      return global_coeffs_free(G), PKRYLOV_ERR_OUT_OF_MEMORY;
    const int st = pkrylov_barotropic_coefficients(o->nx, o->ny, o->periodic, aW, aS, aC, G->mask);
    if (st)
      global_coeffs_free(G);
    return st;
  }
  pkrylov_thinshell_params p;
  int st = pkrylov_thinshell_params_default(o->nx, o->ny, o->nz, &p);
  if (!st && o->kind == PROB_CUBE)
    st = pkrylov_cubesphere_stencil_coefficients(&p, aW, aS, aV, aC);
  if (!st && o->kind == PROB_THINSHELL) {
    p.geometry = o->geometry;
    st = pkrylov_thinshell_stencil_coefficients(&p, aW, aS, aV, aC);
  }
  if (st)
    return global_coeffs_free(G), st;
  for (int64_t k = 0; k < Z && o->kind == PROB_THINSHELL; k++) {
    if (periodic_x(o->periodic))
      for (int64_t j = 0; j < Y; j++) {
        const int64_t c = X * (j + Y * k);
        const double w = aW[c + 1];
        aW[c] = w, aC[c] -= w, aC[c + X - 1] -= w;
      }
    if (periodic_y(o->periodic))
      for (int64_t i = 0; i < X; i++) {
        const int64_t c = i + X * Y * k;
        const double w = aS[c + X];
        aS[c] = w, aC[c] -= w, aC[c + X * (Y - 1)] -= w;
      }
  }
  return 0;
}

/**
 * The halo'd multi-tile array (halo width 1, halos 0) of the nt tiles `tiles` of a global field of nz levels:
 * doubles from dv, or int32 from iv (the other NULL). NULL when out of memory.
 */
static void *tile_arrays(const tiling *T, const int32_t *tiles, int32_t nt, const double *dv,
                         const int32_t *iv) {
  const int64_t hx = T->snx + 2, hy = T->sny + 2, n = (int64_t)T->snx * T->sny * nt * T->nz;
  void *h = calloc((size_t)(hx * hy * T->nz * nt), dv ? sizeof(double) : sizeof(int32_t));
  if (!h)
    return NULL;
  for (int64_t q = 0; q < n; q++) { /* compact position q: i + snx*(j + sny*(t + nt*k)) */
    const int64_t i = q % T->snx, j = (q / T->snx) % T->sny, tk = q / ((int64_t)T->snx * T->sny);
    const int64_t t = tk % nt, k = tk / nt, at = (i + 1) + hx * ((j + 1) + hy * (k + T->nz * t));
    const int64_t g = global_index(T, tiles, nt, q);
    if (dv)
      ((double *)h)[at] = dv[g];
    else
      ((int32_t *)h)[at] = iv[g];
  }
  return h;
}

/**
 * The grid of T on ctx with the nt tiles `tiles` on this rank (halos of width 1), and the grid stencil of G
 * on it (pkrylov_operator_create_grid_stencil()). collective: ctx spans the ranks (the allocations are agreed
 * on before the collective calls). Returns 0, a library status (its message in ctx) or
 * PKRYLOV_ERR_OUT_OF_MEMORY.
 */
static int build_grid(pkrylov_context ctx, const tiling *T, const global_coeffs *G, const int32_t *tiles,
                      int32_t nt, int collective, pkrylov_grid *g, pkrylov_operator *A) {
  int32_t *conn = malloc(sizeof(int32_t) * 12 * (size_t)T->ntiles);
  void *h[5] = {NULL, NULL, NULL, NULL, NULL};
  int ok = conn != NULL;
  for (int q = 0; q < 4 && ok; q++)
    ok = !G->c[q] || (h[q] = tile_arrays(T, tiles, nt, G->c[q], NULL)) != NULL;
  if (ok && G->mask)
    ok = (h[4] = tile_arrays(T, tiles, nt, NULL, G->mask)) != NULL;
  int st = (collective ? all_ok(ok) : ok) ? PKRYLOV_SUCCESS : PKRYLOV_ERR_OUT_OF_MEMORY;
  if (!st)
    st = T->nf == 6 ? pkrylov_grid_connect_cubesphere(T->ntx, conn)
                    : pkrylov_grid_connect_rect(T->ntx, T->nty, T->periodic, conn);
  if (!st)
    st = pkrylov_grid_create(ctx, T->snx, T->sny, 1, 1, T->ntiles, conn, nt, tiles, g);
  if (!st)
    st = pkrylov_operator_create_grid_stencil(*g, T->nz, h[0], h[1], h[2], h[3], h[4], A);
  free(conn);
  for (int q = 0; q < 5; q++)
    free(h[q]);
  return st;
}

/**
 * The entries of the global matrix as pkrylov_operator_get_info() counts a grid stencil's on one rank: the
 * diagonal of every wet cell and every coupling between two wet neighbours (none across a wall).
 */
static int64_t global_nnz(const tiling *T, const int32_t *mask) {
  const int64_t X = T->fx, Y = T->fy, Z = T->nz, ncol = (int64_t)T->nf * X * Y;
  if (T->nf == 6)
    return 5 * ncol * Z + 2 * (Z - 1) * ncol; /* a closed surface: four neighbours each */
  const int px = periodic_x(T->periodic), py = periodic_y(T->periodic);
  int64_t nnz = 0;
#define PKS_WET(q) (!mask || mask[q])
  for (int64_t k = 0; k < Z; k++)
    for (int64_t j = 0; j < Y; j++)
      for (int64_t i = 0; i < X; i++) {
        const int64_t q = i + X * (j + Y * k);
        if (!PKS_WET(q))
          continue;
        const int64_t nb[6] = {i > 0 ? q - 1
                               : px  ? q + X - 1
                                     : -1,
                               i < X - 1 ? q + 1
                               : px      ? q - (X - 1)
                                         : -1,
                               j > 0 ? q - X
                               : py  ? q + X * (Y - 1)
                                     : -1,
                               j < Y - 1 ? q + X
                               : py      ? q - X * (Y - 1)
                                         : -1,
                               k > 0 ? q - ncol : -1,
                               k < Z - 1 ? q + ncol : -1};
        nnz++;
        for (int d = 0; d < 6; d++)
          nnz += nb[d] >= 0 && PKS_WET(nb[d]);
      }
#undef PKS_WET
  return nnz;
}

/**
 * Between this rank's compact vector xl (n_local values) and the global order on rank 0 (xg, every tile's
 * values; NULL elsewhere): dir 0 gathers xl into xg, dir 1 scatters xg into xl. Collective. Returns 0, or 1
 * after a message (on every rank).
 */
static int grid_gather_scatter(const tiling *T, int64_t n_local, double *xl, double *xg, int dir) {
  const int64_t per = (int64_t)T->snx * T->sny * T->nz; /* values of one tile */
  int32_t *tl = malloc(sizeof(int32_t) * (size_t)T->ntiles), nt = 0;
  if (!all_ok(tl != NULL)) {
    usage_error("out of memory for the tile lists");
    free(tl);
    return 1;
  }
  if (g_size == 1) {
    tiles_of_rank(T, 0, tl, &nt);
    for (int64_t q = 0; q < n_local; q++) {
      const int64_t g = global_index(T, tl, nt, q);
      if (dir == 0)
        xg[g] = xl[q];
      else
        xl[q] = xg[g];
    }
    free(tl);
    return 0;
  }
#ifdef PKRYLOV_HAVE_MPI
  const int64_t n_global = per * T->ntiles;
  if (n_global > INT_MAX) {
    usage_error("the global vector has %lld values: more than 2^31 - 1 cannot be gathered on rank 0",
                (long long)n_global);
    free(tl);
    return 1;
  }
  double *buf = NULL;
  int *cnt = NULL, *dsp = NULL, ok = 1;
  if (g_rank == 0) {
    buf = malloc(sizeof(double) * (size_t)(n_global > 0 ? n_global : 1));
    cnt = malloc(sizeof(int) * (size_t)g_size), dsp = malloc(sizeof(int) * (size_t)g_size);
    ok = buf && cnt && dsp;
    for (int r = 0, at = 0; r < g_size && ok; r++) {
      tiles_of_rank(T, r, tl, &nt);
      cnt[r] = (int)(nt * per), dsp[r] = at, at += cnt[r];
      if (dir == 1)
        for (int64_t q = 0; q < cnt[r]; q++)
          buf[dsp[r] + q] = xg[global_index(T, tl, nt, q)];
    }
  }
  if (!all_ok(ok)) {
    usage_error("out of memory for the global vector on rank 0");
    free(buf), free(cnt), free(dsp), free(tl);
    return 1;
  }
  if (dir == 0)
    MPI_Gatherv(xl, (int)n_local, MPI_DOUBLE, buf, cnt, dsp, MPI_DOUBLE, 0, MPI_COMM_WORLD);
  else
    MPI_Scatterv(buf, cnt, dsp, MPI_DOUBLE, xl, (int)n_local, MPI_DOUBLE, 0, MPI_COMM_WORLD);
  if (g_rank == 0 && dir == 0)
    for (int r = 0; r < g_size; r++) {
      tiles_of_rank(T, r, tl, &nt);
      for (int64_t q = 0; q < cnt[r]; q++)
        xg[global_index(T, tl, nt, q)] = buf[dsp[r] + q];
    }
  free(buf), free(cnt), free(dsp), free(tl);
  return 0;
#else
  (void)per, (void)xl, (void)xg, (void)dir, (void)n_local;
  free(tl);
  return 1; /* unreachable: several ranks need MPI */
#endif
}

/**
 * --save-system of a problem on a grid, by rank 0 alone: the grid stencil of every tile (the same tiling) on
 * a CPU context of its own, its CSR form (rows and columns in the compact order of all tiles) permuted into
 * the global order, written as a Matrix Market file. Returns 0, or 1 after the message.
 */
static int write_grid_matrix(const tiling *T, const global_coeffs *G, const char *path) {
  pkrylov_context c = NULL;
  pkrylov_grid g = NULL;
  pkrylov_operator A = NULL, P = NULL;
  int32_t *all = malloc(sizeof(int32_t) * (size_t)T->ntiles);
  int64_t n = 0, nnz = 0, *rp = NULL, *ci = NULL, *map = NULL, *inv = NULL, *rp2 = NULL, *ci2 = NULL;
  double *v = NULL, *v2 = NULL;
  int st = all ? pkrylov_context_create(PKRYLOV_BACKEND_CPU, &c) : PKRYLOV_ERR_OUT_OF_MEMORY;
  for (int32_t t = 0; t < T->ntiles && all; t++)
    all[t] = t;
  if (!st)
    st = build_grid(c, T, G, all, T->ntiles, 0, &g, &A);
  if (!st)
    st = pkrylov_operator_get_info(A, &n, &nnz, NULL, NULL, NULL, NULL);
  if (!st) {
    rp = malloc(sizeof(int64_t) * (size_t)(n + 1)), rp2 = malloc(sizeof(int64_t) * (size_t)(n + 1));
    map = malloc(sizeof(int64_t) * (size_t)n), inv = malloc(sizeof(int64_t) * (size_t)n);
    ci = malloc(sizeof(int64_t) * (size_t)(nnz + 1)), ci2 = malloc(sizeof(int64_t) * (size_t)(nnz + 1));
    v = malloc(sizeof(double) * (size_t)(nnz + 1)), v2 = malloc(sizeof(double) * (size_t)(nnz + 1));
    st = rp && rp2 && map && inv && ci && ci2 && v && v2 ? pkrylov_operator_get_csr(A, rp, ci, v)
                                                         : PKRYLOV_ERR_OUT_OF_MEMORY;
  }
  if (!st) { /* row gr of the global order is row inv[gr] of the compact one; columns mapped alike */
    for (int64_t q = 0; q < n; q++)
      map[q] = global_index(T, all, T->ntiles, q), inv[map[q]] = q;
    rp2[0] = 0;
    for (int64_t gr = 0; gr < n; gr++) {
      const int64_t q = inv[gr];
      rp2[gr + 1] = rp2[gr] + (rp[q + 1] - rp[q]);
      for (int64_t e = rp[q]; e < rp[q + 1]; e++)
        ci2[rp2[gr] + e - rp[q]] = map[ci[e]], v2[rp2[gr] + e - rp[q]] = v[e];
    }
    st = pkrylov_operator_create_csr64(c, n, 0, rp2, ci2, v2, &P);
  }
  if (!st)
    st = pkrylov_operator_write_mtx(P, path);
  if (st) {
    char what[1200];
    snprintf(what, sizeof what, "'--save-system': cannot write '%s'", path);
    lib_error(c, st, what);
  }
  free(all), free(rp), free(ci), free(v), free(map), free(inv), free(rp2), free(ci2), free(v2);
  pkrylov_operator_destroy(&P);
  pkrylov_operator_destroy(&A);
  pkrylov_grid_destroy(&g);
  pkrylov_context_destroy(&c);
  return st != 0;
}

/**
 * This rank's vector xl (n_local values) into the global order on rank 0 (xg; dir 0), or back (dir 1):
 * through the tiles on the grid path (T), else the library's gather and scatter of a distributed operator.
 * Collective. Returns 0, or 1 after the message (what: what failed, for the library's).
 */
static int global_order(pkrylov_context ctx, pkrylov_operator A, const tiling *T, int64_t n_local, double *xl,
                        double *xg, int dir, const char *what) {
  if (T)
    return grid_gather_scatter(T, n_local, xl, xg, dir);
  const int st = dir == 0 ? pkrylov_operator_gather(A, 0, xl, xg) : pkrylov_operator_scatter(A, 0, xg, xl);
  if (st)
    lib_error(ctx, st, what);
  return st != 0;
}

/** 1 when this process was started by an MPI launcher (then MPI_Init is called). */
static int under_mpi_launcher(void) {
  static const char *const vars[] = {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK", "PMI_RANK",
                                     "MV2_COMM_WORLD_SIZE", "MPI_LOCALNRANKS", NULL};
  for (int i = 0; vars[i]; i++)
    if (getenv(vars[i])) return 1;
  return 0;
}

/** Print a JSON number with %.17g, or null when it is not finite. */
static void json_number(FILE *f, const char *key, double v, int comma) {
  if (isfinite(v))
    fprintf(f, "\"%s\":%.17g", key, v);
  else
    fprintf(f, "\"%s\":null", key);
  if (comma) fputc(',', f);
}

/** Print a JSON string value with the characters JSON requires escaped. */
static void json_string(FILE *f, const char *key, const char *s, int comma) {
  fprintf(f, "\"%s\":\"", key);
  for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
    if (*p == '"' || *p == '\\')
      fprintf(f, "\\%c", *p);
    else if (*p < 0x20)
      fprintf(f, "\\u%04x", *p);
    else
      fputc(*p, f);
  }
  fputc('"', f);
  if (comma) fputc(',', f);
}

/** Name of an enumeration value for the report. */
static const char *enum_name(int32_t v) {
  switch (v) {
  case PKRYLOV_SOLVER_CG: return "cg";
  case PKRYLOV_SOLVER_PIPECG: return "pipecg";
  case PKRYLOV_SOLVER_BICGSTAB: return "bicgstab";
  case PKRYLOV_SOLVER_PIPEBICGSTAB: return "pipebicgstab";
  case PKRYLOV_SOLVER_GMRES: return "gmres";
  case PKRYLOV_SOLVER_PIPEGMRES: return "pipegmres";
  case PKRYLOV_SOLVER_FGMRES: return "fgmres";
  case PKRYLOV_SOLVER_CAGMRES: return "cagmres";
  case PKRYLOV_SOLVER_SRCG: return "srcg";
  case PKRYLOV_STOP_CONFIRMED: return "confirmed";
  case PKRYLOV_STOP_RECURRENCE: return "recurrence";
  case PKRYLOV_PRECOND_NONE: return "none";
  case PKRYLOV_PRECOND_JACOBI: return "jacobi";
  case PKRYLOV_PRECOND_COLUMN: return "column";
  case PKRYLOV_PRECOND_AINV:
    return "ainv";
  case PKRYLOV_PERIODIC_NONE:
    return "none";
  case PKRYLOV_PERIODIC_X:
    return "x";
  case PKRYLOV_PERIODIC_Y:
    return "y";
  case PKRYLOV_PERIODIC_XY:
    return "xy";
  case PKRYLOV_BACKEND_CPU: return "cpu";
  case PKRYLOV_BACKEND_CUDA: return "cuda";
  case PKRYLOV_BACKEND_AUTO: return "auto";
  case PKRYLOV_LAYOUT_KSLOW: return "kslow";
  case PKRYLOV_LAYOUT_KFAST: return "kfast";
  case PKRYLOV_LAYOUT_AUTO: return "auto";
  case PKRYLOV_GEOMETRY_GNOMONIC: return "gnomonic";
  case PKRYLOV_GEOMETRY_UNIFORM: return "uniform";
  default: return "unknown";
  }
}

/**
 * Read a vector file that must hold exactly n values into a new array (*v). Returns 0 on success;
 * otherwise prints a message naming the option and returns 1.
 */
static int read_vector(pkrylov_context ctx, const char *option, const char *path, int64_t n, double **v) {
  int64_t len = 0;
  int st = pkrylov_mtx_read_vector(ctx, path, 0, NULL, &len);
  if (st != PKRYLOV_SUCCESS) {
    char what[512];
    snprintf(what, sizeof what, "cannot read %s '%s'", option, path);
    lib_error(ctx, st, what);
    return 1;
  }
  if (len != n) {
    usage_error("%s '%s' has %lld values but the matrix has n = %lld rows", option, path, (long long)len,
                (long long)n);
    return 1;
  }
  *v = calloc((size_t)n, sizeof(double));
  if (!*v) {
    usage_error("out of memory reading %s '%s'", option, path);
    return 1;
  }
  st = pkrylov_mtx_read_vector(ctx, path, n, *v, &len);
  if (st != PKRYLOV_SUCCESS) {
    char what[512];
    snprintf(what, sizeof what, "cannot read %s '%s'", option, path);
    lib_error(ctx, st, what);
    return 1;
  }
  return 0;
}

/** Write the residual history as a CSV file with a header line "iteration,residual". 0 on success. */
static int write_history(pkrylov_solver s, const char *path) {
  int32_t len = 0;
  if (pkrylov_solver_get_history(s, 0, NULL, &len) != PKRYLOV_SUCCESS || len < 0) return 1;
  double *h = calloc((size_t)(len > 0 ? len : 1), sizeof(double));
  if (!h) return 1;
  int32_t got = 0;
  if (pkrylov_solver_get_history(s, len, h, &got) != PKRYLOV_SUCCESS) {
    free(h);
    return 1;
  }
  FILE *f = fopen(path, "w");
  if (!f) {
    free(h);
    return 1;
  }
  fprintf(f, "iteration,residual\n");
  for (int32_t i = 0; i < len && i < got; i++) fprintf(f, "%d,%.17g\n", (int)i, h[i]);
  free(h);
  return fclose(f) != 0;
}

static int run(int argc, char **argv);

int main(int argc, char **argv) {
#ifdef PKRYLOV_HAVE_MPI
  int mpi = under_mpi_launcher();
  if (mpi) {
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &g_size);
  }
  int rc = run(argc, argv);
  if (mpi) MPI_Finalize();
  return rc;
#else
  return run(argc, argv);
#endif
}

/** Sum of local int64 values over the ranks (in place). */
static void sum_over_ranks_i64(int64_t *v, int count) {
#ifdef PKRYLOV_HAVE_MPI
  if (g_size > 1) MPI_Allreduce(MPI_IN_PLACE, v, count, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD);
#else
  (void)v, (void)count;
#endif
}

/**
 * A matrix file on several ranks: rank 0 reads it (into *A0 on a context *ctx0 of its own, kept for
 * --save-system), cuts it into balanced blocks of rows (of whole columns for '--precond column --layout
 * kfast --levels NZ') and sends each rank its rows; every rank builds the distributed CSR operator *A.
 * Returns 0, or 1 after reporting the error (on every rank).
 */
static int distribute_matrix(pkrylov_context ctx, const options *o, pkrylov_context *ctx0, pkrylov_operator *A0,
                             pkrylov_operator *A) {
#ifdef PKRYLOV_HAVE_MPI
  int64_t hdr[2] = {0, 0}; /* n, nnz */
  int64_t *rp = NULL, *ci = NULL;
  double *v = NULL;
  int ok = 1, st;
  char what[1024];
  if (g_rank == 0) {
    st = pkrylov_context_create(PKRYLOV_BACKEND_CPU, ctx0);
    if (!st) st = pkrylov_operator_create_from_mtx(*ctx0, o->matrix, A0);
    if (!st) st = pkrylov_operator_get_info(*A0, &hdr[0], &hdr[1], NULL, NULL, NULL, NULL);
    if (!st && hdr[1] > INT32_MAX) {
      usage_error("matrix file '%s' has %lld entries: more than 2^31 - 1 cannot be sent from rank 0",
                  o->matrix, (long long)hdr[1]);
      ok = 0;
    }
    if (!st && ok) {
      rp = malloc(sizeof(int64_t) * (size_t)(hdr[0] + 1));
      ci = malloc(sizeof(int64_t) * (size_t)(hdr[1] + 1));
      v = malloc(sizeof(double) * (size_t)(hdr[1] + 1));
      st = rp && ci && v ? pkrylov_operator_get_csr(*A0, rp, ci, v) : PKRYLOV_ERR_OUT_OF_MEMORY;
      if (!st && needs_symmetry_check(o)) warn_if_not_symmetric(o, hdr[0], rp, ci, v);
    }
    if (st) {
      snprintf(what, sizeof what, "cannot read matrix file '%s'", o->matrix);
      lib_error(*ctx0, st, what);
      ok = 0;
    }
  }
  if (!all_ok(ok)) {
    if (ok) usage_error("rank 0 cannot read matrix file '%s' (see its message)", o->matrix);
    free(rp), free(ci), free(v);
    return 1;
  }
  MPI_Bcast(hdr, 2, MPI_INT64_T, 0, MPI_COMM_WORLD);
  const int64_t n = hdr[0];
  /* the blocks: balanced rows, or balanced whole columns of levels when the column preconditioner needs them */
  int64_t unit = 1;
  if (o->precond == PKRYLOV_PRECOND_COLUMN && o->levels > 0 && o->layout == PKRYLOV_LAYOUT_KFAST &&
      n % o->levels == 0)
    unit = o->levels;
  const int64_t nu = n / unit;
  if (nu < g_size) {
    usage_error("matrix file '%s' has %lld %s, fewer than the %d ranks", o->matrix, (long long)nu,
                unit > 1 ? "columns" : "rows", g_size);
    free(rp), free(ci), free(v);
    return 1;
  }
  int *cnt = malloc(sizeof(int) * (size_t)g_size), *dsp = malloc(sizeof(int) * (size_t)g_size);
  int *ecnt = malloc(sizeof(int) * (size_t)g_size), *edsp = malloc(sizeof(int) * (size_t)g_size);
  if (!cnt || !dsp || !ecnt || !edsp) {
    usage_error("out of memory");
    free(cnt), free(dsp), free(ecnt), free(edsp), free(rp), free(ci), free(v);
    return 1;
  }
  for (int r = 0; r < g_size; r++) {
    const int64_t u0 = r * (nu / g_size) + (r < nu % g_size ? r : nu % g_size);
    dsp[r] = (int)(unit * u0);
    cnt[r] = (int)(unit * (nu / g_size + (r < nu % g_size)));
    if (r == g_size - 1) cnt[r] = (int)(n - dsp[r]); /* the rows beyond whole units, if any */
  }
  if (g_rank == 0)
    for (int r = 0; r < g_size; r++) {
      edsp[r] = (int)rp[dsp[r]];
      ecnt[r] = (int)(rp[dsp[r] + cnt[r]] - rp[dsp[r]]);
    }
  MPI_Bcast(ecnt, g_size, MPI_INT, 0, MPI_COMM_WORLD);
  const int64_t nl = cnt[g_rank], ne = ecnt[g_rank];
  int64_t *lrp = malloc(sizeof(int64_t) * (size_t)(nl + 1)), *lci = malloc(sizeof(int64_t) * (size_t)(ne + 1));
  double *lv = malloc(sizeof(double) * (size_t)(ne + 1));
  ok = lrp && lci && lv;
  if (!all_ok(ok)) {
    if (!ok) usage_error("out of memory for the rows of this rank");
    free(cnt), free(dsp), free(ecnt), free(edsp), free(rp), free(ci), free(v), free(lrp), free(lci), free(lv);
    return 1;
  }
  MPI_Scatterv(rp, cnt, dsp, MPI_INT64_T, lrp, (int)nl, MPI_INT64_T, 0, MPI_COMM_WORLD);
  MPI_Scatterv(ci, ecnt, edsp, MPI_INT64_T, lci, (int)ne, MPI_INT64_T, 0, MPI_COMM_WORLD);
  MPI_Scatterv(v, ecnt, edsp, MPI_DOUBLE, lv, (int)ne, MPI_DOUBLE, 0, MPI_COMM_WORLD);
  const int64_t p0 = lrp[0];
  for (int64_t r = 0; r < nl; r++) lrp[r] -= p0;
  lrp[nl] = ne;
  st = pkrylov_operator_create_csr_dist(ctx, n, dsp[g_rank], nl, 0, lrp, lci, lv, A);
  free(cnt), free(dsp), free(ecnt), free(edsp), free(rp), free(ci), free(v), free(lrp), free(lci), free(lv);
  if (st) {
    snprintf(what, sizeof what, "cannot distribute matrix file '%s'", o->matrix);
    lib_error(ctx, st, what);
    return 1;
  }
  return 0;
#else
  (void)ctx, (void)o, (void)ctx0, (void)A0, (void)A;
  return 1; /* unreachable: several ranks need MPI */
#endif
}

/** The whole program (between MPI_Init and MPI_Finalize under mpirun). */
static int run(int argc, char **argv) {
  options o;
  const int parsed = parse_args(argc, argv, &o) == 0;
  if (!all_ok(parsed)) {
    if (parsed) usage_error("the command line of another rank is invalid (see its message)");
    fprintf(stderr, "%s: try '%s --help'\n", PROG, PROG);
    return EXIT_USAGE;
  }
  if (!all_ok(same_command_line(argc, argv))) {
    usage_error("the ranks got different command lines (every rank must get the same options and values)");
    return EXIT_USAGE;
  }
  if (o.help) {
    if (g_rank == 0) print_help(stdout);
    return 0;
  }
  if (o.version) {
    if (g_rank == 0) print_version(stdout);
    return 0;
  }
  if (o.opt_help) {
    if (g_rank == 0) print_lib_options(stdout);
    return 0;
  }
  if (o.px > 0 && (int64_t)o.px * o.py != g_size) {
    usage_error("'--decomp %d,%d' makes %lld blocks but there are %d ranks (one block per rank)", (int)o.px,
                (int)o.py, (long long)o.px * o.py, g_size);
    return EXIT_USAGE;
  }
  tiling T = {0}; /* the grid path: the tiles and their ranks (the same decision on every rank) */
  if (o.grid && make_tiling(&o, g_size, &T))
    return EXIT_USAGE;
  const tiling *tg = o.grid ? &T : NULL;

  /* every output writable before any work (rank 0 writes them under MPI): a finished solve is not lost */
  const int outputs_ok = g_rank != 0 || check_outputs(&o) == 0;
  if (!all_ok(outputs_ok)) {
    if (outputs_ok) usage_error("rank 0 cannot write an output (see its message)");
    return EXIT_USAGE;
  }

  int rc = EXIT_USAGE, st;
  pkrylov_context ctx = NULL;
  pkrylov_operator A = NULL;
  pkrylov_precond M = NULL;
  pkrylov_solver s = NULL;
  double *b = NULL, *x = NULL, *y = NULL;
  char what[1024];
  /* the text report goes to stdout, or to stderr when stdout carries the JSON object */
  FILE *rep = o.quiet || g_rank != 0 ? NULL : (o.json ? stderr : stdout);
  int32_t px = g_size > 1 && o.matrix ? g_size : 1, py = 1; /* a matrix file: blocks of rows */
  int64_t n_global = 0;
  const int dist = o.problem && !o.grid && (g_size > 1 || o.px > 0);
  const int dcsr = o.matrix && g_size > 1; /* a matrix file distributed by blocks of rows */
  const int gdist = dist || dcsr || o.grid; /* vectors go through gather/scatter */
  pkrylov_context ctx1 = NULL; /* rank 0, --save-system of a distributed problem: the global operator */
  pkrylov_operator Ag = NULL;
  double *gbuf = NULL;
  pkrylov_grid grid = NULL; /* the grid path: the grid, the global coefficients, this rank's tiles */
  global_coeffs gc;
  memset(&gc, 0, sizeof gc);
  int32_t *mytiles = NULL, nmytiles = 0;

  st = pkrylov_context_create(o.backend, &ctx);
  if (st != PKRYLOV_SUCCESS) {
    snprintf(what, sizeof what, "cannot create a context for '--backend %s'", enum_name(o.backend));
    lib_error(NULL, st, what);
    goto done;
  }
  /* -o KEY=VALUE, before the communicator (cuda.bind is read there, the collective options compared) */
  for (int k = 0; k < o.nlib_opts; k++) {
    char key[128];
    const char *eq = strchr(o.lib_opts[k], '=');
    snprintf(key, sizeof key, "%.*s", (int)(eq - o.lib_opts[k]), o.lib_opts[k]);
    if ((st = pkrylov_context_set_option(ctx, key, eq + 1)) != PKRYLOV_SUCCESS) {
      snprintf(what, sizeof what, "invalid value '%s' for option '-o'", o.lib_opts[k]);
      lib_error(ctx, st, what);
      goto done;
    }
  }
#ifdef PKRYLOV_HAVE_MPI
  if (g_size > 1 && (st = pkrylov_context_set_comm(ctx, MPI_COMM_WORLD)) != PKRYLOV_SUCCESS) {
    lib_error(ctx, st, "cannot distribute the context over the ranks");
    goto done;
  }
#endif
  if (o.reproducible && (st = pkrylov_context_set_reproducible(ctx, 1)) != PKRYLOV_SUCCESS) {
    lib_error(ctx, st, "cannot set '--reproducible'");
    goto done;
  }
  int32_t backend = 0;
  pkrylov_context_get_backend(ctx, &backend);
  if (o.set_threads && (st = pkrylov_context_set_num_threads(ctx, o.threads)) != PKRYLOV_SUCCESS) {
    lib_error(ctx, st, "cannot set '--threads'");
    goto done;
  }
  int32_t threads = 1; /* the CPU threads the library uses (on rank 0 for the report) */
  pkrylov_context_get_num_threads(ctx, &threads);

  /* ---- the operator ---- */
  if (o.grid) {
    st = (mytiles = malloc(sizeof(int32_t) * (size_t)T.ntiles)) ? global_coefficients(&o, &T, &gc)
                                                                : PKRYLOV_ERR_OUT_OF_MEMORY;
    if (!all_ok(st == PKRYLOV_SUCCESS)) {
      snprintf(what, sizeof what, "cannot build the coefficients of '--problem %s'", o.problem);
      if (st)
        lib_error(NULL, st, what);
      else
        usage_error("%s on another rank (see its message)", what);
      goto done;
    }
    tiles_of_rank(&T, g_rank, mytiles, &nmytiles);
    if ((st = build_grid(ctx, &T, &gc, mytiles, nmytiles, 1, &grid, &A)) != PKRYLOV_SUCCESS) {
      snprintf(what, sizeof what, "cannot build '--problem %s' on %d x %d tiles%s ('--tiles')", o.problem,
               (int)T.ntx, (int)T.nty, T.nf == 6 ? " per face" : "");
      lib_error(ctx, st, what);
      goto done;
    }
    px = T.px, py = T.py;
  } else if (o.problem) {
    pkrylov_thinshell_params p;
    st = pkrylov_thinshell_params_default(o.nx, o.ny, o.nz, &p);
    if (st == PKRYLOV_SUCCESS) {
      p.geometry = o.geometry;
      if (dist) {
        if (o.px > 0)
          px = o.px, py = o.py;
        else
          auto_decomp(g_size, o.nx, o.ny, &px, &py);
        st = pkrylov_operator_create_thinshell_dist(ctx, &p, px, py, &A);
      } else {
        st = pkrylov_operator_create_thinshell(ctx, &p, &A);
      }
    }
    if (st != PKRYLOV_SUCCESS) {
      snprintf(what, sizeof what, "cannot build '--problem %s'", o.problem);
      lib_error(ctx, st, what);
      goto done;
    }
  } else if (dcsr) {
    if (distribute_matrix(ctx, &o, &ctx1, &Ag, &A)) goto done;
  } else if ((st = pkrylov_operator_create_from_mtx(ctx, o.matrix, &A)) != PKRYLOV_SUCCESS) {
    snprintf(what, sizeof what, "cannot read matrix file '%s'", o.matrix);
    lib_error(ctx, st, what);
    goto done;
  }
  int64_t n = 0, nnz = 0;
  if ((st = pkrylov_operator_get_info(A, &n, &nnz, NULL, NULL, NULL, NULL)) != PKRYLOV_SUCCESS) {
    lib_error(ctx, st, "cannot query the operator");
    goto done;
  }
  if (needs_symmetry_check(&o) && !dcsr) { /* (a distributed matrix is checked by rank 0 as it reads it) */
    int64_t *rp = malloc(sizeof(int64_t) * (size_t)(n + 1)),
            *ci = malloc(sizeof(int64_t) * (size_t)(nnz + 1));
    double *v = malloc(sizeof(double) * (size_t)(nnz + 1));
    if (rp && ci && v && pkrylov_operator_get_csr(A, rp, ci, v) == PKRYLOV_SUCCESS)
      warn_if_not_symmetric(&o, n, rp, ci, v);
    free(rp), free(ci), free(v);
  }
  n_global = dist ? (int64_t)o.nx * o.ny * o.nz : o.grid ? (int64_t)T.nf * T.fx * T.fy * T.nz : n;
  if (o.grid) {
    nnz = global_nnz(&T, gc.mask);
    if (!o.save_system || g_rank != 0)
      global_coeffs_free(&gc); /* only rank 0's --save-system needs them */
  }
  if (dcsr) {
    int64_t nn[2] = {0, nnz};
    pkrylov_operator_get_row_block(A, &nn[0], NULL, NULL);
    sum_over_ranks_i64(&nn[1], 1);
    n_global = nn[0], nnz = nn[1];
  }
  if (gdist) {
    /* the global system's nonzeros (the thin shell's closed form, pkrylov_operator_create_thinshell) */
    const int64_t X = o.nx, Y = o.ny, Z = o.nz;
    if (dist) nnz = n_global + 2 * Z * ((X - 1) * Y + X * (Y - 1)) + 2 * (Z - 1) * X * Y;
    if (g_rank == 0 && !(gbuf = calloc((size_t)n_global, sizeof(double)))) {
      usage_error("out of memory for the global vector of n = %lld", (long long)n_global);
      goto agreed_fail;
    }
    if (!all_ok(1)) goto done;
  }

  /* ---- right-hand side and initial guess ---- */
  x = calloc((size_t)n, sizeof(double));
  y = calloc((size_t)n, sizeof(double));
  if (!x || !y) {
    usage_error("out of memory for vectors of n = %lld", (long long)n);
    goto done;
  }
  if (o.rhs && gdist) {
    /* rank 0 reads the global vector, the ranks get their blocks */
    double *bg = NULL;
    int ok = g_rank != 0 || read_vector(ctx, "--rhs", o.rhs, n_global, &bg) == 0;
    if (!all_ok(ok)) {
      if (ok) usage_error("rank 0 cannot read '--rhs %s' (see its message)", o.rhs);
      free(bg);
      goto done;
    }
    b = calloc((size_t)n, sizeof(double));
    if (!all_ok(b != NULL)) {
      usage_error("out of memory for vectors of n = %lld", (long long)n);
      free(bg);
      goto done;
    }
    ok = global_order(ctx, A, tg, n, b, bg, 1, "cannot distribute '--rhs'") == 0;
    free(bg);
    if (!ok)
      goto done;
  } else if (o.rhs) {
    if (read_vector(ctx, "--rhs", o.rhs, n, &b)) goto done;
  } else {
    /* b = A * ones, so the exact solution is all ones */
    b = calloc((size_t)n, sizeof(double));
    if (!b) {
      usage_error("out of memory for vectors of n = %lld", (long long)n);
      goto done;
    }
    for (int64_t i = 0; i < n; i++) y[i] = 1.0;
    if ((st = pkrylov_operator_apply(A, PKRYLOV_MEM_HOST, y, b)) != PKRYLOV_SUCCESS) {
      lib_error(ctx, st, "cannot compute b = A * ones");
      goto done;
    }
  }
  if (o.x0 && gdist) {
    double *xg = NULL;
    int ok = g_rank != 0 || read_vector(ctx, "--x0", o.x0, n_global, &xg) == 0;
    if (!all_ok(ok)) {
      if (ok) usage_error("rank 0 cannot read '--x0 %s' (see its message)", o.x0);
      free(xg);
      goto done;
    }
    ok = global_order(ctx, A, tg, n, x, xg, 1, "cannot distribute '--x0'") == 0;
    free(xg);
    if (!ok)
      goto done;
  } else if (o.x0) {
    double *x0 = NULL;
    if (read_vector(ctx, "--x0", o.x0, n, &x0)) goto done;
    free(x);
    x = x0;
  }

  if (o.save_system && gdist) {
    /* the global system: rank 0 builds the global operator on a context of its own, b is gathered */
    if (global_order(ctx, A, tg, n, b, gbuf, 0, "'--save-system': cannot gather b"))
      goto done;
    int ok = 1;
    if (g_rank == 0) {
      size_t plen = strlen(o.save_system) + 8;
      char *path = malloc(plen);
      pkrylov_thinshell_params p;
      ok = path != NULL;
      if (ok && o.grid) { /* the grid's matrix in the global order (write_grid_matrix), then b */
        snprintf(path, plen, "%s_A.mtx", o.save_system);
        ok = write_grid_matrix(&T, &gc, path) == 0;
        snprintf(path, plen, "%s_b.mtx", o.save_system);
        if (ok && (st = pkrylov_mtx_write_vector(NULL, path, n_global, gbuf)) != PKRYLOV_SUCCESS) {
          snprintf(what, sizeof what, "'--save-system %s': cannot write '%s'", o.save_system, path);
          lib_error(NULL, st, what);
          ok = 0;
        }
      } else if (ok) {
        snprintf(path, plen, "%s_A.mtx", o.save_system);
        st = ctx1 ? PKRYLOV_SUCCESS : pkrylov_context_create(PKRYLOV_BACKEND_CPU, &ctx1);
        if (!st && !Ag) st = pkrylov_thinshell_params_default(o.nx, o.ny, o.nz, &p);
        if (!st && !Ag) p.geometry = o.geometry, st = pkrylov_operator_create_thinshell(ctx1, &p, &Ag);
        if (!st) st = pkrylov_operator_write_mtx(Ag, path);
        if (!st) {
          snprintf(path, plen, "%s_b.mtx", o.save_system);
          st = pkrylov_mtx_write_vector(ctx1, path, n_global, gbuf);
        }
        if (st) {
          snprintf(what, sizeof what, "'--save-system %s': cannot write '%s'", o.save_system, path);
          lib_error(ctx1, st, what);
          ok = 0;
        }
      }
      free(path);
    }
    if (!all_ok(ok)) {
      if (ok) usage_error("rank 0 cannot write '--save-system %s' (see its message)", o.save_system);
      goto done;
    }
  } else if (o.save_system) {
    size_t plen = strlen(o.save_system) + 8;
    char *path = malloc(plen);
    if (!path) {
      usage_error("out of memory");
      goto done;
    }
    snprintf(path, plen, "%s_A.mtx", o.save_system);
    st = pkrylov_operator_write_mtx(A, path);
    if (st == PKRYLOV_SUCCESS) {
      snprintf(path, plen, "%s_b.mtx", o.save_system);
      st = pkrylov_mtx_write_vector(ctx, path, n, b);
    }
    if (st != PKRYLOV_SUCCESS) {
      snprintf(what, sizeof what, "'--save-system %s': cannot write '%s'", o.save_system, path);
      lib_error(ctx, st, what);
      free(path);
      goto done;
    }
    free(path);
  }

  /* ---- preconditioner and solver (the setup) ---- */
  double t0 = wall_time();
  int32_t levels = o.levels, layout = o.layout;
  if (o.problem && !o.set_layout) layout = PKRYLOV_LAYOUT_AUTO;
  if (o.precond != PKRYLOV_PRECOND_COLUMN) levels = 0, layout = PKRYLOV_LAYOUT_AUTO;
  st = o.precond == PKRYLOV_PRECOND_AINV ? pkrylov_precond_create_ainv(ctx, A, AINV_OFFDIAG, &M)
                                         : pkrylov_precond_create(ctx, A, o.precond, levels, layout, &M);
  if (st != PKRYLOV_SUCCESS) {
    if (o.precond == PKRYLOV_PRECOND_COLUMN && o.levels > 0)
      snprintf(what, sizeof what, "cannot build '--precond column' with '--levels %d --layout %s'",
               (int)o.levels, enum_name(o.layout));
    else if (o.precond == PKRYLOV_PRECOND_COLUMN)
      snprintf(what, sizeof what, "cannot build '--precond column' with '--layout %s'", enum_name(o.layout));
    else
      snprintf(what, sizeof what, "cannot build '--precond %s'", enum_name(o.precond));
    lib_error(ctx, st, what);
    goto done;
  }
  pkrylov_precond_get_info(M, NULL, &levels, &layout);
  if ((st = pkrylov_solver_create(ctx, o.solver, A, M, &s)) != PKRYLOV_SUCCESS) {
    snprintf(what, sizeof what, "cannot create '--solver %s'", enum_name(o.solver));
    lib_error(ctx, st, what);
    goto done;
  }
  double setup_time = wall_time() - t0;
  if ((st = pkrylov_solver_set_tolerances(s, o.rtol, o.atol)) != PKRYLOV_SUCCESS) {
    lib_error(ctx, st, "invalid '--rtol'/'--atol'");
    goto done;
  }
  if ((st = pkrylov_solver_set_max_iterations(s, o.maxit)) != PKRYLOV_SUCCESS) {
    lib_error(ctx, st, "invalid '--maxit'");
    goto done;
  }
  if (o.set_restart && (st = pkrylov_solver_set_restart(s, o.restart)) != PKRYLOV_SUCCESS) {
    lib_error(ctx, st, "invalid '--restart'");
    goto done;
  }
  if (o.set_step && (st = pkrylov_solver_set_step(s, o.step)) != PKRYLOV_SUCCESS) {
    lib_error(ctx, st, "invalid '--step'");
    goto done;
  }
  if ((st = pkrylov_solver_set_precision(s, o.precision)) != PKRYLOV_SUCCESS) {
    lib_error(ctx, st, "invalid '--precision'");
    goto done;
  }
  if (o.set_replace && (st = pkrylov_solver_set_residual_replacement(s, o.replace)) != PKRYLOV_SUCCESS) {
    lib_error(ctx, st, "invalid '--replace'");
    goto done;
  }
  if (o.set_true_residual &&
      (st = pkrylov_solver_set_true_residual_interval(s, o.true_residual)) != PKRYLOV_SUCCESS) {
    lib_error(ctx, st, "invalid '--true-residual'");
    goto done;
  }
  if (o.x0 && (st = pkrylov_solver_set_initial_guess_nonzero(s, 1)) != PKRYLOV_SUCCESS) {
    lib_error(ctx, st, "cannot use '--x0'");
    goto done;
  }
  if (o.history && (st = pkrylov_solver_set_history(s, 1)) != PKRYLOV_SUCCESS) {
    lib_error(ctx, st, "cannot record '--history'");
    goto done;
  }
  if ((st = pkrylov_solver_set_stop_rule(s, o.stop_rule)) != PKRYLOV_SUCCESS) {
    lib_error(ctx, st, "invalid '--stop'");
    goto done;
  }
  if (o.min_residual && (st = pkrylov_solver_set_min_residual(s, 1)) != PKRYLOV_SUCCESS) {
    snprintf(what, sizeof what, "cannot use '--min-residual' with '--solver %s'", enum_name(o.solver));
    lib_error(ctx, st, what);
    goto done;
  }

  progress prog;
  memset(&prog, 0, sizeof prog);
  if (o.monitor > 0) { /* the tolerance the solve stops at: max(rtol ||b||, atol) */
    double bb = 0.0;
    for (int64_t i = 0; i < n; i++) bb += b[i] * b[i];
    sum_over_ranks(&bb, 1);
    prog.every = o.monitor, prog.maxit = o.maxit, prog.target = fmax(o.rtol * sqrt(bb), o.atol);
    prog.rank0 = g_rank == 0;
    if ((st = pkrylov_solver_set_monitor(s, progress_monitor, &prog)) != PKRYLOV_SUCCESS) {
      lib_error(ctx, st, "cannot set '--monitor'");
      goto done;
    }
  }

  /* ---- solve ---- */
  t0 = wall_time();
  prog.t0 = t0;
  st = pkrylov_solver_solve(s, PKRYLOV_MEM_HOST, b, x);
  double solve_time = wall_time() - t0;
  if (st != PKRYLOV_SUCCESS) {
    lib_error(ctx, st, "the solve failed");
    goto done;
  }
  pkrylov_result res;
  if ((st = pkrylov_solver_get_result(s, &res)) != PKRYLOV_SUCCESS) {
    lib_error(ctx, st, "cannot get the result");
    goto done;
  }

  /* ---- our own check: rel_residual = ||b - A x||_2 / ||b||_2 (||b - A x|| when b = 0) ---- */
  if ((st = pkrylov_operator_apply(A, PKRYLOV_MEM_HOST, x, y)) != PKRYLOV_SUCCESS) {
    lib_error(ctx, st, "cannot compute A x");
    goto done;
  }
  double rr = 0.0, bb = 0.0;
  for (int64_t i = 0; i < n; i++) {
    double r = b[i] - y[i];
    rr += r * r;
    bb += b[i] * b[i];
  }
  double sums[2] = {rr, bb};
  sum_over_ranks(sums, 2);
  rr = sums[0], bb = sums[1];
  double final_residual = sqrt(rr), rhs_norm = sqrt(bb);
  double rel_residual = rhs_norm > 0.0 ? final_residual / rhs_norm : final_residual;

  rc = res.converged ? EXIT_CONVERGED : EXIT_NOT_CONVERGED;
  if (o.out && gdist) { /* the global solution in the global order, written by rank 0 */
    if (global_order(ctx, A, tg, n, x, gbuf, 0, "'--out': cannot gather x")) {
      rc = EXIT_USAGE;
    } else if (g_rank == 0 &&
               (st = pkrylov_mtx_write_vector(ctx, o.out, n_global, gbuf)) != PKRYLOV_SUCCESS) {
      snprintf(what, sizeof what, "cannot write '--out %s'", o.out);
      lib_error(ctx, st, what);
      rc = EXIT_USAGE;
    }
  } else if (o.out && (st = pkrylov_mtx_write_vector(ctx, o.out, n, x)) != PKRYLOV_SUCCESS) {
    snprintf(what, sizeof what, "cannot write '--out %s'", o.out);
    lib_error(ctx, st, what);
    rc = EXIT_USAGE;
  }
  if (o.history && g_rank == 0 && write_history(s, o.history)) {
    usage_error("cannot write '--history %s'", o.history);
    rc = EXIT_USAGE;
  }
  if (!all_ok(rc != EXIT_USAGE)) rc = EXIT_USAGE; /* a write failed on some rank */

  double per_it = res.iterations > 0 ? solve_time / res.iterations : NAN;
  if (rep) {
    if (o.kind == PROB_THINSHELL)
      fprintf(rep, "problem       thinshell %d x %d x %d (%s, periodic %s)\n", (int)o.nx, (int)o.ny,
              (int)o.nz, enum_name(o.geometry), enum_name(o.periodic));
    else if (o.kind == PROB_BAROTROPIC)
      fprintf(rep, "problem       barotropic %d x %d (periodic %s)\n", (int)o.nx, (int)o.ny,
              enum_name(o.periodic));
    else if (o.kind == PROB_CUBE)
      fprintf(rep, "problem       cubesphere: 6 faces of %d x %d x %d\n", (int)o.nx, (int)o.ny, (int)o.nz);
    else
      fprintf(rep, "matrix        %s\n", o.matrix);
    if (o.grid)
      fprintf(rep, "grid          %d x %d tiles of %d x %d columns%s, %d in all, halo 1\n", (int)T.ntx,
              (int)T.nty, (int)T.snx, (int)T.sny, T.nf == 6 ? " on each face" : "", (int)T.ntiles);
    fprintf(rep, "solver        %s\n", enum_name(o.solver));
    if (o.precond == PKRYLOV_PRECOND_COLUMN)
      fprintf(rep, "precond       column (levels %d, layout %s)\n", (int)levels, enum_name(layout));
    else
      fprintf(rep, "precond       %s\n", enum_name(o.precond));
    fprintf(rep, "backend       %s\n", enum_name(backend));
    if (backend == PKRYLOV_BACKEND_CPU) fprintf(rep, "threads       %d\n", (int)threads);
    fprintf(rep, "n             %lld\n", (long long)n_global);
    if (dcsr)
      fprintf(rep, "ranks         %d (blocks of rows)\n", g_size);
    else if (o.grid && T.blocks)
      fprintf(rep, "ranks         %d (%d x %d, each a block of %d x %d tiles)\n", g_size, (int)T.px,
              (int)T.py, (int)T.bx, (int)T.by);
    else if (o.grid)
      fprintf(rep, "ranks         %d (contiguous runs of %d to %d tiles in tile order)\n", g_size,
              (int)(T.ntiles / g_size), (int)((T.ntiles + g_size - 1) / g_size));
    else if (g_size > 1 || dist)
      fprintf(rep, "ranks         %d (decomposition %d x %d)\n", g_size, (int)px, (int)py);
    if (o.reproducible) fprintf(rep, "reproducible  yes (exact global sums)\n");
    fprintf(rep, "nnz           %lld\n", (long long)nnz);
    fprintf(rep, "iterations    %d\n", (int)res.iterations);
    fprintf(rep, "reason        %s\n", pkrylov_reason_string(res.reason));
    fprintf(rep, "converged     %s\n", res.converged ? "yes" : "no");
    if (o.stop_rule == PKRYLOV_STOP_RECURRENCE)
      fprintf(rep, "stop rule     recurrence (last recurrence residual %.6e)\n", res.final_residual);
    if (o.min_residual)
      fprintf(rep, "min residual  %.6e at iteration %d\n", res.min_residual, (int)res.min_residual_iteration);
    fprintf(rep, "rel_residual  %.6e  (||b - A x|| / ||b||, recomputed; rtol %.3g)\n", rel_residual, o.rtol);
    fprintf(rep, "setup time    %.6f s\n", setup_time);
    fprintf(rep, "time          %.6f s (%.3e s per iteration)\n", solve_time,
            res.iterations > 0 ? per_it : 0.0);
  }
  if (o.json && g_rank == 0) {
    printf("{");
    char version[32];
    int32_t major = 0, minor = 0, patch = 0;
    pkrylov_get_version(&major, &minor, &patch);
    snprintf(version, sizeof version, "%d.%d.%d", (int)major, (int)minor, (int)patch);
    json_string(stdout, "version", version, 1);
    json_string(stdout, "solver", enum_name(o.solver), 1);
    json_string(stdout, "precond", enum_name(o.precond), 1);
    json_string(stdout, "backend", enum_name(backend), 1);
    printf("\"threads\":%d,", (int)threads);
    if (o.problem) {
      char prob[96];
      if (o.kind == PROB_THINSHELL)
        snprintf(prob, sizeof prob, "thinshell:%d,%d,%d", (int)o.nx, (int)o.ny, (int)o.nz);
      else if (o.kind == PROB_BAROTROPIC)
        snprintf(prob, sizeof prob, "barotropic:%d,%d", (int)o.nx, (int)o.ny);
      else
        snprintf(prob, sizeof prob, "cubesphere:%d,%d", (int)o.nx, (int)o.nz);
      json_string(stdout, "problem", prob, 1);
      if (o.kind != PROB_BAROTROPIC)
        json_string(stdout, "geometry", enum_name(o.geometry), 1);
      if (o.kind == PROB_CUBE)
        printf("\"periodic\":null,");
      else
        json_string(stdout, "periodic", enum_name(o.periodic), 1);
      printf("\"grid\":%s,", o.grid ? "true" : "false");
      if (o.grid && T.blocks)
        printf("\"tiles_per_rank\":[%d,%d],", (int)T.bx, (int)T.by);
      else if (o.grid)
        printf("\"tiles_per_rank\":null,");
      if (o.grid)
        printf("\"tile_grid\":[%d,%d],\"tile_size\":[%d,%d],\"ntiles\":%d,\"ntiles_per_rank\":[%d,%d],"
               "\"tile_layout\":\"%s\",",
               (int)T.ntx, (int)T.nty, (int)T.snx, (int)T.sny, (int)T.ntiles, (int)(T.ntiles / g_size),
               (int)((T.ntiles + g_size - 1) / g_size), T.blocks ? "blocks" : "runs");
    } else {
      json_string(stdout, "matrix", o.matrix, 1);
    }
    if (o.precond == PKRYLOV_PRECOND_COLUMN) {
      printf("\"levels\":%d,", (int)levels);
      json_string(stdout, "layout", enum_name(layout), 1);
    }
    printf("\"n\":%lld,\"nnz\":%lld,", (long long)n_global, (long long)nnz);
    printf("\"ranks\":%d,\"decomp\":[%d,%d],\"reproducible\":%s,", g_size, (int)px, (int)py,
           o.reproducible ? "true" : "false");
    printf("\"iterations\":%d,\"converged\":%s,", (int)res.iterations, res.converged ? "true" : "false");
    json_string(stdout, "reason", pkrylov_reason_string(res.reason), 1);
    json_number(stdout, "rel_residual", rel_residual, 1);
    json_number(stdout, "time_s", solve_time, 1);
    json_number(stdout, "setup_time_s", setup_time, 1);
    json_number(stdout, "time_per_iteration_s", per_it, 1);
    json_number(stdout, "initial_residual", res.initial_residual, 1);
    json_number(stdout, "final_residual", final_residual, 1);
    json_number(stdout, "last_residual", res.final_residual, 1);
    json_string(stdout, "stop", enum_name(o.stop_rule), 1);
    json_number(stdout, "min_residual", res.min_residual, 1);
    printf("\"min_residual_iteration\":%d,", (int)res.min_residual_iteration);
    json_number(stdout, "rhs_norm", rhs_norm, 1);
    json_number(stdout, "rtol", o.rtol, 1);
    json_number(stdout, "atol", o.atol, 1);
    printf("\"maxit\":%d,", (int)o.maxit);
    printf("\"residual_replacements\":%d,\"true_residual_checks\":%d,\"breakdown_iteration\":%d",
           (int)res.residual_replacements, (int)res.true_residual_checks, (int)res.breakdown_iteration);
    printf("}\n");
    fflush(stdout);
  }

  goto done;
agreed_fail: /* a local failure the other ranks must hear of before they go on */
  all_ok(0);
done:
  pkrylov_operator_destroy(&Ag);
  pkrylov_context_destroy(&ctx1);
  free(gbuf);
  pkrylov_solver_destroy(&s);
  pkrylov_precond_destroy(&M);
  pkrylov_operator_destroy(&A);
  pkrylov_grid_destroy(&grid);
  global_coeffs_free(&gc);
  free(mytiles);
  pkrylov_context_destroy(&ctx);
  free(y);
  free(x);
  free(b);
  if (rc == EXIT_USAGE) fflush(stdout);
  return rc;
}

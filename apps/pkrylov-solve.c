/**
 * @file pkrylov-solve.c
 * @brief Command-line solver: reads a Matrix Market matrix (or builds the thin-shell model problem),
 *        solves A x = b with CG or pipelined CG and reports the outcome as text or one JSON object.
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

/** Everything the command line sets. Strings point into argv. */
typedef struct {
  const char *matrix;      /* positional MATRIX.mtx */
  const char *problem;     /* --problem text, as given */
  int32_t nx, ny, nz;      /* parsed --problem grid */
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
  int json, quiet, help, version;
  int reproducible;        /* --reproducible */
  int32_t stop_rule;       /* --stop: PKRYLOV_STOP_* */
  int min_residual;        /* --min-residual */
  int32_t px, py;          /* --decomp PX,PY (0 = automatic) */
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
static void print_help(FILE *f) {
  fprintf(f,
          "usage: " PROG " [MATRIX.mtx | --problem thinshell:NX,NY,NZ] [options]\n"
          "\n"
          "Solve A x = b with a Krylov method of pkrylov.\n"
          "\n"
          "problem (exactly one):\n"
          "  MATRIX.mtx                 square sparse matrix in Matrix Market format\n"
          "  --problem thinshell:NX,NY,NZ  thin-shell pressure model problem on an NX x NY x NZ grid\n"
          "  --geometry gnomonic|uniform   thin-shell horizontal geometry (default gnomonic)\n"
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
          "  --precond none|jacobi|column  preconditioner (default column for --problem, jacobi for a\n"
          "                             matrix file)\n"
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
          "  --threads T                CPU threads (0 = default)\n"
          "  --reproducible             exact global sums: bitwise the same solution for any number of\n"
          "                             ranks and threads (every solver, CPU and CUDA)\n"
          "\n"
          "under mpirun (MPI builds; every rank gets the same command line):\n"
          "  --decomp PX,PY             cut the NX x NY columns of --problem into PX x PY blocks, one per\n"
          "                             rank (default: chosen from the number of ranks)\n"
          "  --rhs, --x0 files hold the global vector; --out, --save-system write the global solution and\n"
          "  system in the global order; a MATRIX.mtx is read by rank 0 and distributed by blocks of\n"
          "  rows (balanced; with '--precond column --layout kfast' blocks of whole columns)\n"
          "\n"
          "output:\n"
          "  --out X.mtx                write the solution (also when not converged)\n"
          "  --history H.csv            write the residual history as iteration,residual lines\n"
          "  --save-system PREFIX       write PREFIX_A.mtx and PREFIX_b.mtx before solving\n"
          "  --json                     print one JSON object on stdout (text report goes to stderr)\n"
          "  --quiet                    no text report\n"
          "  --help                     this text\n"
          "  --version                  the version and the parts compiled in (CUDA, MPI, NCCL, OpenMP)\n"
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

/** Parse "thinshell:NX,NY,NZ" (each a positive integer); 0 on success. */
static int parse_problem(const char *s, int32_t *nx, int32_t *ny, int32_t *nz) {
  static const char prefix[] = "thinshell:";
  if (strncmp(s, prefix, sizeof prefix - 1) != 0) return 1;
  const char *p = s + sizeof prefix - 1;
  int32_t dims[3];
  for (int d = 0; d < 3; d++) {
    char *end = NULL;
    if (*p < '0' || *p > '9') return 1; /* no sign, no blank */
    errno = 0;
    long l = strtol(p, &end, 10);
    if (errno != 0 || end == p || l < 1 || l > INT32_MAX) return 1;
    dims[d] = (int32_t)l;
    if (d < 2) {
      if (*end != ',') return 1;
      p = end + 1;
    } else if (*end != '\0') {
      return 1;
    }
  }
  *nx = dims[0], *ny = dims[1], *nz = dims[2];
  return 0;
}

/** Look name up in a NULL-terminated list of names; the matching value or -1. */
static int32_t lookup(const char *name, const char *const *names, const int32_t *values) {
  for (int i = 0; names[i]; i++)
    if (strcmp(name, names[i]) == 0) return values[i];
  return -1;
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
  static const char *const precond_names[] = {"none", "jacobi", "column", NULL};
  static const int32_t precond_values[] = {PKRYLOV_PRECOND_NONE, PKRYLOV_PRECOND_JACOBI,
                                           PKRYLOV_PRECOND_COLUMN};
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
        "--problem", "--geometry", "--rhs", "--x0", "--solver", "--precond", "--levels",
        "--layout", "--backend", "--rtol", "--atol", "--maxit", "--replace", "--true-residual",
        "--out", "--history", "--save-system", "--threads", "--precision", "--restart", "--step", "--decomp",
        "--stop", NULL};
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

    if (strcmp(name, "--problem") == 0) {
      if (parse_problem(val, &o->nx, &o->ny, &o->nz)) {
        usage_error("invalid value '%s' for option '--problem': expected thinshell:NX,NY,NZ with "
                    "positive integers NX, NY, NZ", val);
        return 1;
      }
      o->problem = val;
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
        usage_error("invalid value '%s' for option '--precond' (none, jacobi or column)", val);
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
      char *end = NULL;
      long a = strtol(val, &end, 10), b = 0;
      int okd = end != val && *end == ',' && a >= 1 && a <= INT32_MAX;
      if (okd) {
        const char *q = end + 1;
        b = strtol(q, &end, 10);
        okd = end != q && *end == '\0' && b >= 1 && b <= INT32_MAX && *val >= '0' && *val <= '9' && *q >= '0' &&
              *q <= '9';
      }
      if (!okd) {
        usage_error("invalid value '%s' for option '--decomp': expected PX,PY with positive integers", val);
        return 1;
      }
      o->px = (int32_t)a, o->py = (int32_t)b;
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
      /* the integer options: --levels (> 0), --maxit, --replace, --true-residual, --threads (>= 0) */
      int is_levels = strcmp(name, "--levels") == 0;
      int32_t v = 0;
      if (parse_int(val, &v) || v < 0 || (is_levels && v == 0)) {
        usage_error("invalid value '%s' for option '%s': expected %san integer %s", val, name,
                    strcmp(name, "--replace") == 0 ? "'auto' or " : "", is_levels ? "> 0" : ">= 0");
        return 1;
      }
      if (is_levels) {
        o->levels = v;
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
  if (o->help || o->version) return 0;

  if (!o->matrix && !o->problem) {
    usage_error("no problem given: name a MATRIX.mtx file or use --problem thinshell:NX,NY,NZ");
    return 1;
  }
  if (o->matrix && o->problem) {
    usage_error("both a matrix file ('%s') and '--problem %s' given; use one", o->matrix, o->problem);
    return 1;
  }
  if (o->matrix && o->set_geometry) {
    usage_error("option '--geometry' applies to '--problem' only");
    return 1;
  }
  if (!o->set_precond) o->precond = o->problem ? PKRYLOV_PRECOND_COLUMN : PKRYLOV_PRECOND_JACOBI;
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

/** px x py = size blocks for an nx x ny grid: the most square blocks (least boundary per column). */
static void auto_decomp(int size, int32_t nx, int32_t ny, int32_t *px, int32_t *py) {
  double best = INFINITY;
  *px = size, *py = 1;
  for (int a = 1; a <= size; a++) {
    if (size % a) continue;
    const int b = size / a;
    if (a > nx || b > ny) continue;
    const double cost = (double)nx / a + (double)ny / b; /* half the perimeter of a block */
    if (cost < best) best = cost, *px = a, *py = b;
  }
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
  if (o.px > 0 && (int64_t)o.px * o.py != g_size) {
    usage_error("'--decomp %d,%d' makes %lld blocks but there are %d ranks (one block per rank)", (int)o.px,
                (int)o.py, (long long)o.px * o.py, g_size);
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
  const int dist = o.problem && (g_size > 1 || o.px > 0);
  const int dcsr = o.matrix && g_size > 1; /* a matrix file distributed by blocks of rows */
  const int gdist = dist || dcsr;           /* vectors go through gather/scatter */
  pkrylov_context ctx1 = NULL; /* rank 0, --save-system of a distributed problem: the global operator */
  pkrylov_operator Ag = NULL;
  double *gbuf = NULL;

  st = pkrylov_context_create(o.backend, &ctx);
  if (st != PKRYLOV_SUCCESS) {
    snprintf(what, sizeof what, "cannot create a context for '--backend %s'", enum_name(o.backend));
    lib_error(NULL, st, what);
    goto done;
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

  /* ---- the operator ---- */
  if (o.problem) {
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
  n_global = dist ? (int64_t)o.nx * o.ny * o.nz : n;
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
    if (!b || (st = pkrylov_operator_scatter(A, 0, bg, b)) != PKRYLOV_SUCCESS) {
      free(bg);
      lib_error(ctx, b ? st : PKRYLOV_ERR_OUT_OF_MEMORY, "cannot distribute '--rhs'");
      goto done;
    }
    free(bg);
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
    st = pkrylov_operator_scatter(A, 0, xg, x);
    free(xg);
    if (st != PKRYLOV_SUCCESS) {
      lib_error(ctx, st, "cannot distribute '--x0'");
      goto done;
    }
  } else if (o.x0) {
    double *x0 = NULL;
    if (read_vector(ctx, "--x0", o.x0, n, &x0)) goto done;
    free(x);
    x = x0;
  }

  if (o.save_system && gdist) {
    /* the global system: rank 0 builds the global operator on a context of its own, b is gathered */
    if ((st = pkrylov_operator_gather(A, 0, b, gbuf)) != PKRYLOV_SUCCESS) {
      lib_error(ctx, st, "'--save-system': cannot gather b");
      goto done;
    }
    int ok = 1;
    if (g_rank == 0) {
      size_t plen = strlen(o.save_system) + 8;
      char *path = malloc(plen);
      pkrylov_thinshell_params p;
      ok = path != NULL;
      if (ok) {
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
  if ((st = pkrylov_precond_create(ctx, A, o.precond, levels, layout, &M)) != PKRYLOV_SUCCESS) {
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

  /* ---- solve ---- */
  t0 = wall_time();
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
    if ((st = pkrylov_operator_gather(A, 0, x, gbuf)) != PKRYLOV_SUCCESS) {
      lib_error(ctx, st, "'--out': cannot gather x");
      rc = EXIT_USAGE;
    } else if (g_rank == 0 && (st = pkrylov_mtx_write_vector(ctx, o.out, n_global, gbuf)) != PKRYLOV_SUCCESS) {
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
    if (o.problem)
      fprintf(rep, "problem       thinshell %d x %d x %d (%s)\n", (int)o.nx, (int)o.ny, (int)o.nz,
              enum_name(o.geometry));
    else
      fprintf(rep, "matrix        %s\n", o.matrix);
    fprintf(rep, "solver        %s\n", enum_name(o.solver));
    if (o.precond == PKRYLOV_PRECOND_COLUMN)
      fprintf(rep, "precond       column (levels %d, layout %s)\n", (int)levels, enum_name(layout));
    else
      fprintf(rep, "precond       %s\n", enum_name(o.precond));
    fprintf(rep, "backend       %s\n", enum_name(backend));
    fprintf(rep, "n             %lld\n", (long long)n_global);
    if (dcsr)
      fprintf(rep, "ranks         %d (blocks of rows)\n", g_size);
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
    if (o.problem) {
      char prob[96];
      snprintf(prob, sizeof prob, "thinshell:%d,%d,%d", (int)o.nx, (int)o.ny, (int)o.nz);
      json_string(stdout, "problem", prob, 1);
      json_string(stdout, "geometry", enum_name(o.geometry), 1);
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
  pkrylov_context_destroy(&ctx);
  free(y);
  free(x);
  free(b);
  if (rc == EXIT_USAGE) fflush(stdout);
  return rc;
}

/**
 * @file options.c
 * @brief The options database: one table of descriptors, parsing and printing of values, the public
 *        set/get calls of contexts and solvers.
 *
 * Every option is one line of the table below: its name, type (flag, integer range, list of names), level
 * (context or solver), whether every rank must agree on it (collective: it chooses a communication path),
 * its default, the field of pk_options that holds it and one line of help. Adding an option is adding a
 * line and a field (pk_impl.h); the code that uses it reads the field. The environment variable
 * PKRYLOV_OPTIONS is read in one place, pkrylov_context_create (context.c).
 */
#include <ctype.h>
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pk_impl.h"

enum { OPT_BOOL, OPT_INT, OPT_ENUM };
enum { LEVEL_CONTEXT, LEVEL_SOLVER };

/** One option. Integers: min..max (pow2: only 0 and powers of two), auto_name an extra keyword for
 *  auto_value (NULL: none). Names: value i is names[i]. */
typedef struct {
  const char *name;
  int type, level, collective;
  int32_t def;
  int32_t min, max, pow2;
  const char *auto_name;
  int32_t auto_value;
  const char *const *names;
  size_t off;
  const char *help;
} opt_desc;

static const char *const csr_format_names[] = {"auto", "csr", "dia", "dia-nosym", NULL};
static const char *const bind_names[] = {"none", "auto", NULL};

#define OFF(f) offsetof(pk_options, f)
/* name, type, level, collective, default, min, max, pow2, auto keyword, its value, names, field, help */
static const opt_desc table[] = {
    {"cuda.bind", OPT_ENUM, LEVEL_CONTEXT, 0, 1, 0, 1, 0, NULL, 0, bind_names, OFF(cuda_bind),
     "pkrylov_context_set_comm: auto moves a CUDA context to GPU local rank mod devices, none keeps the "
     "device current at creation"},
    {"cuda.csr_format", OPT_ENUM, LEVEL_CONTEXT, 0, PK_OPT_CSR_AUTO, 0, 3, 0, NULL, 0, csr_format_names,
     OFF(cuda_csr_format),
     "device storage of CSR operators created afterwards: auto (diagonals when banded without much "
     "padding), csr, dia (whenever banded), dia-nosym (banded, never the symmetric form)"},
    {"cuda.csr_lanes", OPT_INT, LEVEL_CONTEXT, 0, -1, 0, 32, 1, "auto", -1, NULL, OFF(cuda_csr_lanes),
     "CUDA threads per CSR row for operators created afterwards (0 or 1: one thread; 2 ... 32: the vector "
     "kernel); auto: from the row lengths"},
    {"cuda.kc", OPT_INT, LEVEL_CONTEXT, 0, 0, 1, 1024, 0, "auto", 0, NULL, OFF(cuda_kc),
     "levels per thread of the CUDA grid kernels (thin shell, column stencil) of operators created "
     "afterwards; auto: 32 for the thin shell, 8 for the stencil"},
    {"cuda.l2pf", OPT_INT, LEVEL_CONTEXT, 0, 1, 0, 16, 0, NULL, 0, NULL, OFF(cuda_l2pf),
     "L2 prefetch distance in levels of the CUDA grid kernels of operators created afterwards (0: off)"},
    {"dist.nccl", OPT_BOOL, LEVEL_CONTEXT, 1, 1, 0, 1, 0, NULL, 0, NULL, OFF(dist_nccl),
     "distributed CUDA solves and products: NCCL when built in and each rank has its own GPU; 0 forces "
     "the host-staged path"},
    {"dist.edge_comm", OPT_BOOL, LEVEL_CONTEXT, 1, 1, 0, 1, 0, NULL, 0, NULL, OFF(dist_edge_comm),
     "distributed pipelined CG on the NCCL path: the edge columns on the communication stream, beside the "
     "interior update (0: on the solver's stream after it)"},
    {"dist.instrument", OPT_BOOL, LEVEL_CONTEXT, 1, 0, 0, 1, 0, NULL, 0, NULL, OFF(dist_instrument),
     "distributed CUDA solves: wait for the work queued before each exchange and sum and for the exchange "
     "itself (communication timers; no graphs). Measurement only"},
    {"cuda.fold", OPT_INT, LEVEL_SOLVER, 0, -1, 0, 1, 0, "auto", -1, NULL, OFF(cuda_fold),
     "CUDA CG and pipelined CG: the scalar steps folded into the fused kernels (1), one-block scalar "
     "kernels (0), or chosen from the problem size (auto)"},
    {"cuda.pdl", OPT_BOOL, LEVEL_SOLVER, 0, 1, 0, 1, 0, NULL, 0, NULL, OFF(cuda_pdl),
     "CUDA CG and pipelined CG: programmatic dependent launches on the folded path and in CG's unfolded loop "
     "on a 2-D grid of one GPU"},
    {"cuda.pipe_none", OPT_BOOL, LEVEL_SOLVER, 0, 1, 0, 1, 0, NULL, 0, NULL, OFF(cuda_pipe_none),
     "CUDA pipelined CG without a preconditioner: the specialised update (0: the general one)"},
    {"cuda.l2persist", OPT_INT, LEVEL_SOLVER, 0, -1, 0, 4, 0, "auto", -1, NULL, OFF(cuda_l2persist),
     "CUDA CG on one GPU: how many of its work vectors (q, z, p, x in that order) its kernels keep in the L2's "
     "persisting part (0: none); auto: for the 2-D solve (approximate inverse on a 2-D grid) once its vectors "
     "and coefficients no longer fit in the L2, as many as fit in 0.8 of the largest part (up to 4); the "
     "device's limit and the stream's window are restored after each solve"},
    {"cuda.timeline", OPT_BOOL, LEVEL_SOLVER, 0, 0, 0, 1, 0, NULL, 0, NULL, OFF(cuda_timeline),
     "CUDA pipelined CG: events at each step of an iteration, one line of medians per solve to stderr "
     "(no graphs). Measurement only"},
    {"kry.graph", OPT_BOOL, LEVEL_SOLVER, 0, 1, 0, 1, 0, NULL, 0, NULL, OFF(kry_graph),
     "CUDA BiCGStab/GMRES families and SRCG: blocks of iterations as CUDA graphs"},
    {"kry.fuse", OPT_BOOL, LEVEL_SOLVER, 0, 1, 0, 1, 0, NULL, 0, NULL, OFF(kry_fuse),
     "CUDA BiCGStab/GMRES families: the fused Gram-Schmidt kernel and the CSR product fused with the "
     "update after it (0: two kernels each)"},
    {"kry.xfuse", OPT_INT, LEVEL_SOLVER, 0, -1, 0, 1, 0, "auto", -1, NULL, OFF(kry_xfuse),
     "CUDA reproducible mode: the exact sums added in the pass of the fused kernels that read the vectors (1), "
     "or in a second pass over the vectors after each kernel (0); auto: 1 for the BiCGStab/GMRES families and "
     "SRCG, and for CG and pipelined CG up to 2^17 values per GPU"},
    {"kry.profile", OPT_BOOL, LEVEL_SOLVER, 0, 0, 0, 1, 0, NULL, 0, NULL, OFF(kry_profile),
     "CUDA BiCGStab/GMRES families and SRCG: every operation timed, a profile per solve to stderr "
     "(no graphs). Measurement only"},
    {"kry.cg", OPT_BOOL, LEVEL_SOLVER, 0, 0, 0, 1, 0, NULL, 0, NULL, OFF(kry_cg),
     "CUDA CG and pipelined CG on the vector engine (1) or on their own driver (0, the default until the engine "
     "is as fast at every size; read when the solver is created: a solver created with 1 stays on the engine)"},
};
#undef OFF
enum { NOPT = (int)(sizeof table / sizeof table[0]) };

static int32_t *field(pk_options *o, const opt_desc *d) { return (int32_t *)(void *)((char *)o + d->off); }
static int32_t cfield(const pk_options *o, const opt_desc *d) {
  return *(const int32_t *)(const void *)((const char *)o + d->off);
}

void pk_options_default(pk_options *o) {
  memset(o, 0, sizeof *o);
  for (int i = 0; i < NOPT; i++) *field(o, &table[i]) = table[i].def;
}

static const opt_desc *find(const char *name) {
  for (int i = 0; i < NOPT; i++)
    if (strcmp(table[i].name, name) == 0) return &table[i];
  return NULL;
}

/** What option d accepts, e.g. "0 or 1 (also off/on, false/true, no/yes)" or "auto, csr, dia, dia-nosym". */
static void accepted(const opt_desc *d, char *buf, size_t len) {
  switch (d->type) {
  case OPT_BOOL: snprintf(buf, len, "0 or 1 (also off/on, false/true, no/yes)"); break;
  case OPT_INT:
    if (d->pow2)
      snprintf(buf, len, "0 or a power of two up to %d%s%s", (int)d->max, d->auto_name ? ", or " : "",
               d->auto_name ? d->auto_name : "");
    else
      snprintf(buf, len, "an integer %d..%d%s%s", (int)d->min, (int)d->max, d->auto_name ? ", or " : "",
               d->auto_name ? d->auto_name : "");
    break;
  default: {
    size_t off = 0;
    buf[0] = '\0';
    for (int k = 0; d->names[k] && off < len; k++) {
      int w = snprintf(buf + off, len - off, "%s%s", k ? ", " : "", d->names[k]);
      if (w < 0) break;
      off += (size_t)w;
    }
  }
  }
}

/** The text of value v of option d. */
static void value_text(const opt_desc *d, int32_t v, char *buf, size_t len) {
  if (d->type == OPT_INT && d->auto_name && v == d->auto_value)
    snprintf(buf, len, "%s", d->auto_name);
  else if (d->type == OPT_ENUM && v >= 0 && v <= d->max)
    snprintf(buf, len, "%s", d->names[v]);
  else
    snprintf(buf, len, "%d", (int)v);
}

/** Parse text for option d into *v: 0 on success, -1 when d does not accept it. */
static int parse_value(const opt_desc *d, const char *text, int32_t *v) {
  if (d->type == OPT_BOOL) {
    static const char *const on[] = {"1", "on", "true", "yes"}, *const off[] = {"0", "off", "false", "no"};
    for (int k = 0; k < 4; k++) {
      if (strcmp(text, on[k]) == 0) return *v = 1, 0;
      if (strcmp(text, off[k]) == 0) return *v = 0, 0;
    }
    return -1;
  }
  if (d->type == OPT_ENUM) {
    for (int k = 0; d->names[k]; k++)
      if (strcmp(text, d->names[k]) == 0) return *v = k, 0;
    return -1;
  }
  if (d->auto_name && strcmp(text, d->auto_name) == 0) return *v = d->auto_value, 0;
  if (!*text) return -1;
  char *end = NULL;
  errno = 0;
  const long x = strtol(text, &end, 10);
  if (errno || *end || x < (d->pow2 ? 0 : d->min) || x > d->max) return -1;
  if (d->pow2 && (x & (x - 1)) != 0) return -1;
  *v = (int32_t)x;
  return 0;
}

/** The names of every option, for the message about an unknown one. */
static void all_names(char *buf, size_t len) {
  size_t off = 0;
  buf[0] = '\0';
  for (int i = 0; i < NOPT && off < len; i++) {
    int w = snprintf(buf + off, len - off, "%s%s", i ? ", " : "", table[i].name);
    if (w < 0) break;
    off += (size_t)w;
  }
}

/** The entry of option name in *d, or PKRYLOV_ERR_BAD_OPTION naming it and every option (message after pre). */
static int lookup(pkrylov_context ctx, const char *func, const char *name, const char *pre, const opt_desc **d) {
  *d = find(name);
  if (*d) return PKRYLOV_SUCCESS;
  char names[512];
  all_names(names, sizeof names);
  return pk_error(ctx, PKRYLOV_ERR_BAD_OPTION, func, "%sunknown option '%.100s' (the options: %s)", pre, name,
                  names);
}

/** pk_options_set, every message starting with pre (where the pair came from: "" or "PKRYLOV_OPTIONS: "). */
static int set_one(pkrylov_context ctx, const char *func, pk_options *o, int solver_only, const char *name,
                   const char *value, const char *pre) {
  PK_CHECK_AS(func, name != NULL, ctx, PKRYLOV_ERR_NULL_POINTER, "argument 'name' is NULL");
  PK_CHECK_AS(func, value != NULL, ctx, PKRYLOV_ERR_NULL_POINTER, "argument 'value' is NULL");
  const opt_desc *d;
  PK_CALL(lookup(ctx, func, name, pre, &d));
  if (solver_only && d->level != LEVEL_SOLVER)
    return pk_error(ctx, PKRYLOV_ERR_BAD_OPTION, func,
                    "%soption '%s' is a context-level option: set it on the context "
                    "(pkrylov_context_set_option), not on a solver",
                    pre, d->name);
  int32_t v;
  if (parse_value(d, value, &v) != 0) {
    char acc[256];
    accepted(d, acc, sizeof acc);
    return pk_error(ctx, PKRYLOV_ERR_BAD_OPTION, func, "%soption '%s': value '%.100s' is not accepted (%s)", pre,
                    d->name, value, acc);
  }
  *field(o, d) = v;
  return PKRYLOV_SUCCESS;
}

int pk_options_set(pkrylov_context ctx, const char *func, pk_options *o, int solver_only, const char *name,
                   const char *value) {
  return set_one(ctx, func, o, solver_only, name, value, "");
}

int pk_options_parse(pkrylov_context ctx, const char *func, pk_options *o, const char *str, const char *what) {
  if (!str) return PKRYLOV_SUCCESS;
  char pre[128];
  snprintf(pre, sizeof pre, "%s: ", what);
  pk_options t = *o; /* all or nothing: applied to a copy */
  const char *p = str;
  for (;;) {
    while (*p && isspace((unsigned char)*p)) p++;
    if (!*p) break;
    const char *q = p;
    while (*q && !isspace((unsigned char)*q)) q++;
    const size_t len = (size_t)(q - p);
    char tok[256];
    if (len >= sizeof tok)
      return pk_error(ctx, PKRYLOV_ERR_BAD_OPTION, func, "%sthe pair '%.40s...' is too long", pre, p);
    memcpy(tok, p, len);
    tok[len] = '\0';
    char *eq = strchr(tok, '=');
    if (!eq)
      return pk_error(ctx, PKRYLOV_ERR_BAD_OPTION, func, "%s'%s' is not key=value (e.g. cuda.kc=16)", pre, tok);
    *eq = '\0';
    PK_CALL(set_one(ctx, func, &t, 0, tok, eq + 1, pre));
    p = q;
  }
  *o = t;
  return PKRYLOV_SUCCESS;
}

int pk_options_is_solver_level(const char *name) {
  const opt_desc *d = name ? find(name) : NULL;
  return d && d->level == LEVEL_SOLVER;
}

int pk_options_collective(const pk_options *o, int64_t *vals) {
  int k = 0;
  for (int i = 0; i < NOPT && k < PK_OPT_MAX_COLLECTIVE; i++)
    if (table[i].collective) vals[k++] = cfield(o, &table[i]);
  return k;
}

/** The table entry of collective option i. */
static const opt_desc *collective_desc(int i) {
  for (int k = 0, j = 0; k < NOPT; k++)
    if (table[k].collective && j++ == i) return &table[k];
  return NULL;
}

const char *pk_options_collective_name(int i) {
  const opt_desc *d = collective_desc(i);
  return d ? d->name : "?";
}

void pk_options_collective_text(int i, int64_t v, char *buf, size_t len) {
  const opt_desc *d = collective_desc(i);
  if (d)
    value_text(d, (int32_t)v, buf, len);
  else
    snprintf(buf, len, "%lld", (long long)v);
}

/* ---- the public calls --------------------------------------------------------------------------- */

int pkrylov_context_set_option(pkrylov_context ctx, const char *name, const char *value) {
  PK_CHECK(ctx != NULL, NULL, PKRYLOV_ERR_NULL_POINTER, "argument 'ctx' is NULL");
  return pk_options_set(ctx, __func__, &ctx->opts, 0, name, value);
}

int pkrylov_context_set_options(pkrylov_context ctx, const char *options) {
  PK_CHECK(ctx != NULL, NULL, PKRYLOV_ERR_NULL_POINTER, "argument 'ctx' is NULL");
  return pk_options_parse(ctx, __func__, &ctx->opts, options, "argument 'options'");
}

int pk_options_get(pkrylov_context ctx, const char *func, const pk_options *o, const char *name, char *buf,
                      int32_t buflen) {
  PK_CHECK_AS(func, name != NULL, ctx, PKRYLOV_ERR_NULL_POINTER, "argument 'name' is NULL");
  PK_CHECK_AS(func, buf != NULL, ctx, PKRYLOV_ERR_NULL_POINTER, "argument 'buf' is NULL");
  PK_CHECK_AS(func, buflen > 0, ctx, PKRYLOV_ERR_INVALID_SIZE, "argument 'buflen' = %d must be > 0", (int)buflen);
  const opt_desc *d;
  PK_CALL(lookup(ctx, func, name, "", &d));
  value_text(d, cfield(o, d), buf, (size_t)buflen);
  return PKRYLOV_SUCCESS;
}

int pkrylov_context_get_option(pkrylov_context ctx, const char *name, char *buf, int32_t buflen) {
  PK_CHECK(ctx != NULL, NULL, PKRYLOV_ERR_NULL_POINTER, "argument 'ctx' is NULL");
  return pk_options_get(ctx, __func__, &ctx->opts, name, buf, buflen);
}

int32_t pkrylov_option_count(void) { return NOPT; }

int pkrylov_option_describe(int32_t i, char *buf, int32_t buflen) {
  PK_CHECK(buf != NULL, NULL, PKRYLOV_ERR_NULL_POINTER, "argument 'buf' is NULL");
  PK_CHECK(buflen > 0, NULL, PKRYLOV_ERR_INVALID_SIZE, "argument 'buflen' = %d must be > 0", (int)buflen);
  PK_CHECK(i >= 0 && i < NOPT, NULL, PKRYLOV_ERR_INDEX_OUT_OF_RANGE, "argument 'i' = %d is not in 0..%d",
           (int)i, NOPT - 1);
  const opt_desc *d = &table[i];
  char acc[256], def[32];
  accepted(d, acc, sizeof acc);
  value_text(d, d->def, def, sizeof def);
  snprintf(buf, (size_t)buflen, "%-16s %s; %s level%s; default %s. %s", d->name, acc,
           d->level == LEVEL_CONTEXT ? "context" : "solver", d->collective ? ", collective" : "", def, d->help);
  return PKRYLOV_SUCCESS;
}

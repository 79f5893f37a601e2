/**
 * @file mpi.c
 * @brief Contexts on a communicator: what pkrylov_context_set_comm() does once libpkrylov_mpi has checked
 *        MPI's state (pk_comm_attach), rank queries, the reproducible flag, and the collective helpers that
 *        keep every rank's outcome the same (pk_mpi_agree, the checks before a distributed solve); the NCCL
 *        communicator of a distributed CUDA context (pk_mpi_nccl). No MPI here: every operation between
 *        ranks goes through the context's communication table (pk_comm.h). Without a communicator
 *        everything here works on one rank.
 */
#define _GNU_SOURCE /* sched_getaffinity, CPU_* */
#include <math.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pk_comm.h"
#include "pk_impl.h"

/* PKRYLOV_BUILD_MPI: this build has libpkrylov_mpi (CMake, PKRYLOV_ENABLE_MPI); a build property, the same
   whether or not the program links it */
int32_t pkrylov_has_mpi(void) {
#ifdef PKRYLOV_BUILD_MPI
  return 1;
#else
  return 0;
#endif
}

int pkrylov_context_get_rank_info(pkrylov_context ctx, int32_t *rank, int32_t *size) {
  PK_CHECK(ctx != NULL, NULL, PKRYLOV_ERR_NULL_POINTER, "argument 'ctx' is NULL");
  if (rank) *rank = ctx->rank;
  if (size) *size = ctx->size;
  return PKRYLOV_SUCCESS;
}

int pkrylov_context_set_reproducible(pkrylov_context ctx, int32_t flag) {
  PK_CHECK(ctx != NULL, NULL, PKRYLOV_ERR_NULL_POINTER, "argument 'ctx' is NULL");
  PK_CHECK(flag == 0 || flag == 1, ctx, PKRYLOV_ERR_INVALID_VALUE, "argument 'flag' = %d must be 0 or 1", flag);
  ctx->reproducible = flag;
  return PKRYLOV_SUCCESS;
}

/** A failed operation (status rc) of the table ops, raised in ctx as PKRYLOV_ERR_BACKEND with the table's text
 *  for rc (pk_comm_attach calls it before ctx has the table). */
static int attach_error(pkrylov_context ctx, const pk_comm_ops *ops, const char *func, const char *what, int rc) {
  char msg[1024];
  msg[0] = '\0';
  ops->error_string(rc, msg, (int)sizeof msg);
  return pk_error(ctx, PKRYLOV_ERR_BACKEND, func, "%s failed: %s error %d (%s)", what, ops->name, rc, msg);
}

int pk_comm_error(pkrylov_context ctx, const char *func, const char *what, int rc) {
  if (!ctx || !ctx->mpi) /* not reached: only a context with a table communicates */
    return pk_error(ctx, PKRYLOV_ERR_INTERNAL, func, "%s failed (%d) on a context without a communicator", what,
                    rc);
  return attach_error(ctx, pk_comm_ops_of(ctx), func, what, rc);
}

/**
 * The default thread count of a rank of comm (pkrylov_context_get_num_threads): this process's cores
 * (pk_cores_available) divided by the number of ranks of comm on this node (split_shared:
 * MPI_COMM_TYPE_SHARED) whose affinity masks overlap this rank's (itself included; a mask that cannot be
 * read overlaps every other), capped by OpenMP's count (pk_threads_cap), at least 1. Collective over comm.
 */
static int node_threads(pkrylov_context ctx, const pk_comm_ops *ops, void *comm, int rank, int *threads) {
  typedef struct {
    int32_t valid;
    unsigned char mask[sizeof(cpu_set_t)];
  } aff;
  void *node = NULL;
  int nlocal = 1, rc;
  if ((rc = ops->split_shared(comm, rank, &node)) != 0)
    return attach_error(ctx, ops, __func__, "MPI_Comm_split_type", rc);
  ops->size(node, &nlocal);
  aff mine;
  memset(&mine, 0, sizeof mine);
  cpu_set_t set;
  CPU_ZERO(&set);
  mine.valid = sched_getaffinity(0, sizeof set, &set) == 0;
  memcpy(mine.mask, &set, sizeof set);
  aff *all = malloc(sizeof(aff) * (size_t)nlocal);
  if (!all) {
    ops->free(node);
    return pk_error(ctx, PKRYLOV_ERR_OUT_OF_MEMORY, __func__, "cannot allocate %d affinity masks", nlocal);
  }
  rc = ops->allgather(node, &mine, (int)sizeof mine, PK_COMM_BYTE, all);
  ops->free(node);
  if (rc != 0) {
    free(all);
    return attach_error(ctx, ops, __func__, "MPI_Allgather", rc);
  }
  int sharing = 0;
  for (int r = 0; r < nlocal; r++) {
    int overlap = !mine.valid || !all[r].valid;
    for (size_t b = 0; b < sizeof mine.mask && !overlap; b++) overlap = (mine.mask[b] & all[r].mask[b]) != 0;
    sharing += overlap;
  }
  free(all);
  const int cores = pk_cores_available();
  *threads = pk_threads_cap(sharing > 0 ? cores / sharing : 1); /* OMP_NUM_THREADS caps the share */
  return PKRYLOV_SUCCESS;
}

/**
 * The collective options of ctx compared over comm: one allreduce (MPI_MAX) of (v, -v), so every rank
 * gets the largest and the smallest value of each and raises the same error (naming the option and the two
 * values) when they differ. Collective over comm.
 */
static int check_options(pkrylov_context ctx, const pk_comm_ops *ops, void *comm, const char *func) {
  int64_t v[2 * PK_OPT_MAX_COLLECTIVE];
  const int k = pk_options_collective(&ctx->opts, v);
  if (k == 0) return PKRYLOV_SUCCESS;
  for (int i = 0; i < k; i++) v[k + i] = -v[i];
  const int rc = ops->allreduce(comm, NULL, v, 2 * k, PK_COMM_INT64, PK_COMM_MAX);
  if (rc != 0) return attach_error(ctx, ops, func, "MPI_Allreduce", rc);
  for (int i = 0; i < k; i++)
    if (v[i] != -v[k + i]) { /* the same comparison on every rank: the same error everywhere */
      char lo[32], hi[32];
      pk_options_collective_text(i, -v[k + i], lo, sizeof lo);
      pk_options_collective_text(i, v[i], hi, sizeof hi);
      return pk_error(ctx, PKRYLOV_ERR_BAD_OPTION, func,
                      "option '%s' differs between the ranks (%s on some, %s on others): it chooses a "
                      "communication path and must be the same on every rank",
                      pk_options_collective_name(i), lo, hi);
    }
  return PKRYLOV_SUCCESS;
}

int pk_mpi_check_options(pkrylov_context ctx, const char *func) {
  if (!ctx || !ctx->mpi) return PKRYLOV_SUCCESS;
  return check_options(ctx, pk_comm_ops_of(ctx), pk_comm_of(ctx), func);
}

int pk_comm_attach(pkrylov_context ctx, const char *func, const pk_comm_ops *ops, void *comm, int code,
                   const char *why) {
  PK_CHECK_AS(func, ctx != NULL, NULL, PKRYLOV_ERR_NULL_POINTER, "argument 'ctx' is NULL");
  if (code != PKRYLOV_SUCCESS) return pk_error(ctx, code, func, "%s", why);
  PK_CHECK_AS(func, ops != NULL && ops->version == PK_COMM_OPS_VERSION, ctx, PKRYLOV_ERR_INTERNAL,
           "libpkrylov_mpi and libpkrylov come from different builds (communication table version %d, "
           "expected %d)",
           ops ? (int)ops->version : -1, PK_COMM_OPS_VERSION);
  PK_CHECK_AS(func, ctx->mpi == NULL, ctx, PKRYLOV_ERR_INVALID_STATE,
           "the context has a communicator already (set it once, right after creating the context)");
  PK_CHECK_AS(func, ctx->live_objects == 0, ctx, PKRYLOV_ERR_INVALID_STATE,
           "%lld objects were created from this context already: set the communicator before creating any",
           (long long)ctx->live_objects);
  int size = 1, rank = 0, rc;
  if ((rc = ops->size(comm, &size)) != 0) return attach_error(ctx, ops, func, "MPI_Comm_size", rc);
  if ((rc = ops->rank(comm, &rank)) != 0) return attach_error(ctx, ops, func, "MPI_Comm_rank", rc);
  /* every rank must take the same decision (the dup below is collective): the backends must agree */
  int cuda = ctx->backend == PKRYLOV_BACKEND_CUDA, mn = 0, mx = 0;
  if ((rc = ops->allreduce(comm, &cuda, &mn, 1, PK_COMM_INT, PK_COMM_MIN)) != 0 ||
      (rc = ops->allreduce(comm, &cuda, &mx, 1, PK_COMM_INT, PK_COMM_MAX)) != 0)
    return attach_error(ctx, ops, func, "MPI_Allreduce", rc);
  PK_CHECK_AS(func, mn == mx, ctx, PKRYLOV_ERR_INVALID_VALUE,
           "the context runs on the %s backend but another rank's on the %s one: every rank of a communicator "
           "must use the same backend",
           cuda ? "CUDA" : "CPU", cuda ? "CPU" : "CUDA");
  /* the options that choose a communication path: the same on every rank */
  PK_CALL(check_options(ctx, ops, comm, func));
  /* one GPU per rank: device = node-local rank mod visible devices (node-local rank from
     MPI_Comm_split_type(MPI_COMM_TYPE_SHARED)); the option cuda.bind=none keeps the device that was
     current when the context was created (the caller's cudaSetDevice). No object exists yet, so the
     context's stream can move. */
  if (ctx->be->context_set_device && size > 1) {
    int e = PKRYLOV_SUCCESS;
    if (ctx->opts.cuda_bind) {
      void *node = NULL;
      int lrank = 0;
      if ((rc = ops->split_shared(comm, rank, &node)) != 0)
        return attach_error(ctx, ops, func, "MPI_Comm_split_type", rc);
      ops->rank(node, &lrank);
      ops->free(node);
      const int count = ctx->be->devices(NULL, 0);
      e = count > 0 ? ctx->be->context_set_device(ctx, lrank % count)
                    : pk_error(ctx, PKRYLOV_ERR_BACKEND_UNAVAILABLE, func, "no CUDA device is visible");
    }
    int bad = e != PKRYLOV_SUCCESS, anybad = 0;
    if ((rc = ops->allreduce(comm, &bad, &anybad, 1, PK_COMM_INT, PK_COMM_MAX)) != 0)
      return attach_error(ctx, ops, func, "MPI_Allreduce", rc);
    if (anybad)
      return e ? e : pk_error(ctx, PKRYLOV_ERR_BACKEND, func, "another rank could not select its CUDA device");
  }
  /* the default thread count: this rank's share of the cores of its node (every rank calls: collective) */
  int threads = 1, e = node_threads(ctx, ops, comm, rank, &threads), anybad = 0;
  if ((rc = ops->allreduce(comm, &e, &anybad, 1, PK_COMM_INT, PK_COMM_MIN)) != 0)
    return attach_error(ctx, ops, func, "MPI_Allreduce", rc);
  if (anybad != PKRYLOV_SUCCESS)
    return e ? e : pk_error(ctx, anybad, func, "another rank could not count the cores of its node");
  pk_comm_state *st = calloc(1, sizeof *st);
  PK_CHECK_AS(func, st != NULL, ctx, PKRYLOV_ERR_OUT_OF_MEMORY, "cannot allocate the MPI state");
  st->ops = ops;
  if ((rc = ops->dup(comm, &st->comm)) != 0) {
    free(st);
    return attach_error(ctx, ops, func, "MPI_Comm_dup", rc);
  }
  ctx->mpi = st;
  ctx->rank = rank;
  ctx->size = size;
  ctx->default_threads = threads;
  return PKRYLOV_SUCCESS;
}

void pk_mpi_free(pkrylov_context ctx) {
  if (!ctx || !ctx->mpi) return;
  pk_comm_state *st = ctx->mpi;
  if (st->nccl) ctx->be->nccl_comm_destroy(st->nccl);
  st->nccl = NULL;
  st->ops->free(st->comm); /* nothing after MPI_Finalize */
  free(st);
  ctx->mpi = NULL;
}

int pk_mpi_agree(pkrylov_context ctx, int code) {
  if (!ctx || !ctx->mpi) return code;
  const pk_comm_ops *ops = pk_comm_ops_of(ctx);
  void *comm = pk_comm_of(ctx);
  struct {
    int failed; /* 0 failed, 1 fine: MINLOC then names the lowest failing rank */
    int rank;
  } in = {code == PKRYLOV_SUCCESS, ctx->rank}, out;
  int rc = ops->allreduce(comm, &in, &out, 1, PK_COMM_2INT, PK_COMM_MINLOC);
  if (rc != 0) return pk_comm_error(ctx, __func__, "MPI_Allreduce", rc);
  if (out.failed) return PKRYLOV_SUCCESS;
  /* the failing rank sends its code and message to all */
  struct {
    int code;
    char msg[sizeof ctx->last_message];
  } m;
  if (ctx->rank == out.rank) {
    m.code = code;
    snprintf(m.msg, sizeof m.msg, "%s", ctx->last_message);
  }
  rc = ops->bcast(comm, &m, (int)sizeof m, PK_COMM_BYTE, out.rank);
  if (rc != 0) return pk_comm_error(ctx, __func__, "MPI_Bcast", rc);
  if (ctx->rank != out.rank) {
    snprintf(ctx->last_message, sizeof ctx->last_message, "rank %d: %.1000s", out.rank, m.msg);
    ctx->last_code = m.code;
  }
  return m.code;
}

int pk_mpi_allreduce_i64(pkrylov_context ctx, int64_t *vals, int count, int op) {
  if (!ctx->mpi) return PKRYLOV_SUCCESS;
  const pk_comm_op cop = op == 0 ? PK_COMM_SUM : op == 1 ? PK_COMM_MIN : PK_COMM_MAX;
  int rc = pk_comm_ops_of(ctx)->allreduce(pk_comm_of(ctx), NULL, vals, count, PK_COMM_INT64, cop);
  return rc == 0 ? PKRYLOV_SUCCESS : pk_comm_error(ctx, __func__, "MPI_Allreduce", rc);
}

/** all := every rank's count values of type (size bytes each) in rank order; a copy on one rank. */
static int allgather(pkrylov_context ctx, const char *fn, const void *mine, int count, void *all,
                     pk_comm_type type, size_t size) {
  if (!ctx->mpi) {
    memcpy(all, mine, size * (size_t)count);
    return PKRYLOV_SUCCESS;
  }
  int rc = pk_comm_ops_of(ctx)->allgather(pk_comm_of(ctx), mine, count, type, all);
  return rc == 0 ? PKRYLOV_SUCCESS : pk_comm_error(ctx, fn, "MPI_Allgather", rc);
}

int pk_mpi_allgather_i32(pkrylov_context ctx, const int32_t *mine, int count, int32_t *all) {
  return allgather(ctx, __func__, mine, count, all, PK_COMM_INT32, sizeof(int32_t));
}

int pk_mpi_allgather_f64(pkrylov_context ctx, const double *mine, int count, double *all) {
  return allgather(ctx, __func__, mine, count, all, PK_COMM_DOUBLE, sizeof(double));
}

int pk_mpi_nccl(pkrylov_context ctx, void **comm) {
  *comm = NULL;
  const pk_backend *be = ctx->be; /* NCCL entries: a device backend built with NCCL */
  if (!pk_distributed(ctx) || !be->nccl_comm_create) return PKRYLOV_SUCCESS;
  if (!ctx->opts.dist_nccl) return PKRYLOV_SUCCESS; /* the host-staged path, forced (collective option) */
  pk_comm_state *st = ctx->mpi;
  if (!st->nccl_tried) {
    st->nccl_tried = 1;
    const pk_comm_ops *ops = st->ops;
    void *c = st->comm;
    const int size = ctx->size;
    int rc;
    /* one GPU per rank: NCCL refuses ranks that share a device (then the host-staged path) */
    unsigned char uuid[16] = {0}, *all = malloc((size_t)16 * (size_t)size);
    if (!all) return pk_error(ctx, PKRYLOV_ERR_OUT_OF_MEMORY, __func__, "cannot allocate");
    int ok = be->device_uuid(uuid) == 0, allok = 0;
    if ((rc = ops->allgather(c, uuid, 16, PK_COMM_BYTE, all)) != 0) {
      free(all);
      return pk_comm_error(ctx, __func__, "MPI_Allgather", rc);
    }
    for (int a = 0; a < size && ok; a++)
      for (int b = a + 1; b < size && ok; b++)
        if (memcmp(all + 16 * a, all + 16 * b, 16) == 0) ok = 0;
    free(all);
    if ((rc = ops->allreduce(c, &ok, &allok, 1, PK_COMM_INT, PK_COMM_MIN)) != 0)
      return pk_comm_error(ctx, __func__, "MPI_Allreduce", rc);
    if (!allok) return PKRYLOV_SUCCESS;
    struct {
      int ok;
      char id[128];
    } uid;
    memset(&uid, 0, sizeof uid);
    if (ctx->rank == 0) uid.ok = be->nccl_unique_id(uid.id, (int)sizeof uid.id) == 0;
    if ((rc = ops->bcast(c, &uid, (int)sizeof uid, PK_COMM_BYTE, 0)) != 0)
      return pk_comm_error(ctx, __func__, "MPI_Bcast", rc);
    if (!uid.ok) return PKRYLOV_SUCCESS;
    void *nc = NULL;
    ok = be->nccl_comm_create(uid.id, ctx->rank, size, &nc) == 0;
    if ((rc = ops->allreduce(c, &ok, &allok, 1, PK_COMM_INT, PK_COMM_MIN)) != 0)
      return pk_comm_error(ctx, __func__, "MPI_Allreduce", rc);
    if (!allok) {
      if (nc) be->nccl_comm_destroy(nc);
      return PKRYLOV_SUCCESS;
    }
    st->nccl = nc;
  }
  *comm = st->nccl;
  return PKRYLOV_SUCCESS;
}

/** The local checks of a solve's arguments (as pkrylov_solver_solve makes them), recorded in the context. */
static int solve_local_check(pkrylov_solver s, int32_t mem, const double *b, const double *x) {
  pkrylov_context ctx = s->ctx;
  PK_CALL(pk_check_vectors(ctx, "pkrylov_solver_solve", mem, b, "b", x, "x", s->n));
  if (mem != PKRYLOV_MEM_HOST) return PKRYLOV_SUCCESS; /* device arrays: checked on the device by the solve */
  int64_t bad = pk_first_nonfinite(b, s->n);
  if (bad >= 0)
    return pk_error(ctx, PKRYLOV_ERR_NOT_FINITE, "pkrylov_solver_solve",
                    "argument 'b' has a non-finite value (%g) at local index %lld", b[bad], (long long)bad);
  if (s->nonzero_guess && (bad = pk_first_nonfinite(x, s->n)) >= 0)
    return pk_error(ctx, PKRYLOV_ERR_NOT_FINITE, "pkrylov_solver_solve",
                    "argument 'x' (initial guess) has a non-finite value (%g) at local index %lld", x[bad],
                    (long long)bad);
  return PKRYLOV_SUCCESS;
}

int pk_mpi_solve_check(pkrylov_solver s, int32_t mem, const double *b, const double *x) {
  pkrylov_context ctx = s->ctx;
  if (!pk_distributed(ctx)) return PKRYLOV_SUCCESS;
  const int local = solve_local_check(s, mem, b, x);
  /* the settings every rank must share, compared through their minimum and maximum (every rank makes
     the same collective calls whatever its local outcome) */
  double rt = s->rtol, at = s->atol;
  enum { NSET = 14 };
  int64_t v[NSET + PK_OPT_MAX_COLLECTIVE] = {s->type, s->maxit, s->nonzero_guess, s->true_res_interval,
                                             s->replace_interval, s->stag_window, ctx->reproducible, s->A->type,
                                             s->M ? s->M->type : 0, 0, 0, s->history_on, s->stop_rule,
                                             s->min_res};
  memcpy(&v[9], &rt, sizeof rt);
  memcpy(&v[10], &at, sizeof at);
  /* and the options that choose a communication path (the context's), in the same reductions */
  const int nopt = pk_options_collective(&ctx->opts, &v[NSET]), nall = NSET + nopt;
  int64_t mn[NSET + PK_OPT_MAX_COLLECTIVE], mx[NSET + PK_OPT_MAX_COLLECTIVE];
  memcpy(mn, v, sizeof v);
  memcpy(mx, v, sizeof v);
  int e = pk_mpi_allreduce_i64(ctx, mn, nall, 1);
  if (!e) e = pk_mpi_allreduce_i64(ctx, mx, nall, 2);
  if (e) return e; /* an MPI failure */
  for (int i = 0; i < nopt; i++)
    if (mn[NSET + i] != mx[NSET + i]) {
      char lo[32], hi[32];
      pk_options_collective_text(i, mn[NSET + i], lo, sizeof lo);
      pk_options_collective_text(i, mx[NSET + i], hi, sizeof hi);
      return pk_error(ctx, PKRYLOV_ERR_BAD_OPTION, "pkrylov_solver_solve",
                      "option '%s' differs between the ranks (%s on some, %s on others): it chooses a "
                      "communication path and must be the same on every rank",
                      pk_options_collective_name(i), lo, hi);
    }
  static const char *const names[NSET] = {"solver type",         "iteration cap (max_iterations)",
                                          "initial_guess_nonzero", "true_residual_interval",
                                          "residual_replacement", "stagnation_window",
                                          "reproducible mode",   "operator kind",
                                          "preconditioner kind", "rtol",
                                          "atol",                "history flag",
                                          "stop rule",           "min_residual flag"};
  for (int i = 0; i < NSET; i++)
    if (mn[i] != mx[i]) /* the same comparison on every rank: the same error everywhere */
      return pk_error(ctx, PKRYLOV_ERR_INVALID_VALUE, "pkrylov_solver_solve",
                      "the %s differs between the ranks (every rank of a distributed solve must use the "
                      "same settings)",
                      names[i]);
  const int ierr = local;
  return pk_mpi_agree(ctx, ierr);
}

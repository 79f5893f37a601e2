/**
 * @file context.c
 * @brief Contexts, the error machinery, version and status strings.
 */
#define _GNU_SOURCE /* sched_getaffinity, CPU_COUNT */
#include <errno.h>
#include <math.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "pk_impl.h"

/* Message of the last error raised without a context (per thread). */
static _Thread_local char pk_orphan_message[1024];

int pk_error(pkrylov_context ctx, int code, const char *func, const char *fmt, ...) {
  /* formatted here, then copied under the context's lock: threads sharing a context (one of them refused
     with PKRYLOV_ERR_BUSY while another solves) never write the message at the same time */
  char buf[sizeof pk_orphan_message];
  int off = snprintf(buf, sizeof buf, "%s: ", func);
  if (off < 0) off = 0;
  if ((size_t)off < sizeof buf) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf + off, sizeof buf - (size_t)off, fmt, ap);
    va_end(ap);
  }
  if (!ctx) {
    memcpy(pk_orphan_message, buf, sizeof buf);
    return code;
  }
  pthread_mutex_lock(&ctx->err_lock);
  memcpy(ctx->last_message, buf, sizeof buf);
  ctx->last_code = code;
  pthread_mutex_unlock(&ctx->err_lock);
  return code;
}

const char *pkrylov_last_error_message(void) { return pk_orphan_message; }

int pkrylov_get_version(int32_t *major, int32_t *minor, int32_t *patch) {
  if (major) *major = PKRYLOV_VERSION_MAJOR;
  if (minor) *minor = PKRYLOV_VERSION_MINOR;
  if (patch) *patch = PKRYLOV_VERSION_PATCH;
  return PKRYLOV_SUCCESS;
}

/* Whether a CUDA context can be made up to the device: the CUDA backend's table is found (the plugin
   libpkrylov_cuda.so loads, or the static build has it); a GPU may still be missing. */
int32_t pkrylov_has_cuda(void) { return pk_backend_cuda(NULL, 0) != NULL; }

/* NCCL: the CUDA backend that has loaded was built with it. */
int32_t pkrylov_has_nccl(void) {
  const pk_backend *be = pk_backend_cuda(NULL, 0);
  return be && be->nccl;
}

int32_t pkrylov_has_openmp(void) {
#ifdef _OPENMP
  return 1;
#else
  return 0;
#endif
}

const char *pkrylov_error_string(int code) {
  switch (code) {
  case PKRYLOV_SUCCESS: return "success";
  case PKRYLOV_ERR_NULL_POINTER: return "a required pointer argument is NULL";
  case PKRYLOV_ERR_INVALID_SIZE: return "invalid size";
  case PKRYLOV_ERR_INVALID_VALUE: return "invalid value";
  case PKRYLOV_ERR_INDEX_OUT_OF_RANGE: return "index out of range";
  case PKRYLOV_ERR_DUPLICATE_ENTRY: return "duplicate matrix entry";
  case PKRYLOV_ERR_NOT_FINITE: return "NaN or Inf in the input";
  case PKRYLOV_ERR_SIZE_MISMATCH: return "sizes do not match";
  case PKRYLOV_ERR_LAYOUT: return "levels or layout do not fit the operator";
  case PKRYLOV_ERR_SINGULAR: return "singular preconditioner (zero pivot or zero diagonal)";
  case PKRYLOV_ERR_FILE_IO: return "file input/output error";
  case PKRYLOV_ERR_FILE_FORMAT: return "malformed Matrix Market file";
  case PKRYLOV_ERR_UNSUPPORTED: return "not supported";
  case PKRYLOV_ERR_BACKEND_UNAVAILABLE: return "backend not available";
  case PKRYLOV_ERR_MEMTYPE: return "memory type not accepted";
  case PKRYLOV_ERR_OUT_OF_MEMORY: return "out of memory";
  case PKRYLOV_ERR_INCOMPATIBLE: return "incompatible objects";
  case PKRYLOV_ERR_INVALID_STATE: return "call not valid in the current state";
  case PKRYLOV_ERR_ALIASING: return "arguments that must be distinct alias each other";
  case PKRYLOV_ERR_BACKEND: return "backend library failure";
  case PKRYLOV_ERR_INTERNAL: return "internal error (a bug in pkrylov)";
  case PKRYLOV_ERR_CALLBACK: return "a user callback returned nonzero (abort)";
  case PKRYLOV_ERR_BUSY: return "the object is in use by another thread";
  case PKRYLOV_ERR_TOPOLOGY: return "impossible tile connectivity";
  case PKRYLOV_ERR_BAD_OPTION: return "unknown option or value not accepted";
  default: return "unknown status code";
  }
}

const char *pkrylov_reason_string(int reason) {
  switch (reason) {
  case PKRYLOV_REASON_NONE: return "none";
  case PKRYLOV_CONVERGED_RTOL: return "converged_rtol";
  case PKRYLOV_CONVERGED_ATOL: return "converged_atol";
  case PKRYLOV_DIVERGED_MAX_ITERATIONS: return "max_iterations";
  case PKRYLOV_DIVERGED_BREAKDOWN_INDEFINITE_MATRIX: return "breakdown_indefinite_matrix";
  case PKRYLOV_DIVERGED_BREAKDOWN_INDEFINITE_PRECOND: return "breakdown_indefinite_precond";
  case PKRYLOV_DIVERGED_NAN: return "nan";
  case PKRYLOV_DIVERGED_STAGNATION: return "stagnation";
  case PKRYLOV_STOPPED_BY_MONITOR: return "stopped_by_monitor";
  case PKRYLOV_DIVERGED_BREAKDOWN_RHO: return "breakdown_rho";
  case PKRYLOV_DIVERGED_BREAKDOWN_SHADOW: return "breakdown_shadow";
  case PKRYLOV_DIVERGED_BREAKDOWN_OMEGA: return "breakdown_omega";
  case PKRYLOV_DIVERGED_BREAKDOWN_ORTHOGONALITY: return "breakdown_orthogonality";
  default: return "unknown";
  }
}

void pk_result_init(pkrylov_result *res) {
  memset(res, 0, sizeof *res);
  res->breakdown_iteration = -1;
  res->min_residual = -1.0;
  res->min_residual_iteration = -1;
}

int pkrylov_context_create(int backend, pkrylov_context *ctx) {
  PK_CHECK(ctx != NULL, NULL, PKRYLOV_ERR_NULL_POINTER, "argument 'ctx' is NULL");
  *ctx = NULL;
  int resolved;
  const pk_backend *be = &pk_backend_cpu;
  char why[256] = "", devwhy[256] = "";
  switch (backend) {
  case PKRYLOV_BACKEND_CPU: resolved = PKRYLOV_BACKEND_CPU; break;
  case PKRYLOV_BACKEND_AUTO: {
    /* the CUDA backend when its table is found and a device is visible; else the CPU, with the reason */
    const pk_backend *cu = pk_backend_cuda(why, sizeof why);
    if (cu && cu->devices(devwhy, sizeof devwhy) > 0) {
      be = cu;
      resolved = PKRYLOV_BACKEND_CUDA;
    } else {
      if (cu) snprintf(why, sizeof why, "%s", devwhy);
      resolved = PKRYLOV_BACKEND_CPU;
    }
    break;
  }
  case PKRYLOV_BACKEND_CUDA:
    be = pk_backend_cuda(why, sizeof why);
    if (!be)
      return pk_error(NULL, PKRYLOV_ERR_BACKEND_UNAVAILABLE, __func__, "backend CUDA requested but %s", why);
    if (be->devices(devwhy, sizeof devwhy) <= 0)
      return pk_error(NULL, PKRYLOV_ERR_BACKEND_UNAVAILABLE, __func__, "backend CUDA requested but %s", devwhy);
    resolved = PKRYLOV_BACKEND_CUDA;
    break;
  default:
    return pk_error(NULL, PKRYLOV_ERR_INVALID_VALUE, __func__,
                    "argument 'backend' = %d is not a pkrylov_backend (AUTO %d, CPU %d, CUDA %d)", backend,
                    PKRYLOV_BACKEND_AUTO, PKRYLOV_BACKEND_CPU, PKRYLOV_BACKEND_CUDA);
  }
  pkrylov_context c = calloc(1, sizeof *c);
  PK_CHECK(c != NULL, NULL, PKRYLOV_ERR_OUT_OF_MEMORY, "cannot allocate a context");
  c->backend = resolved;
  c->be = be;
  if (backend == PKRYLOV_BACKEND_AUTO && resolved == PKRYLOV_BACKEND_CPU)
    snprintf(c->be_why, sizeof c->be_why, "%s", why);
  c->rank = 0; /* single rank until pkrylov_context_set_comm */
  c->size = 1;
  c->default_threads = pk_default_threads();
  /* the options: the defaults, then the environment variable PKRYLOV_OPTIONS (the one place the library
     reads the environment; later calls override it). A bad value fails the creation: the message names
     the variable and the option */
  pk_options_default(&c->opts);
  {
    const char *env = getenv("PKRYLOV_OPTIONS");
    int e = pk_options_parse(NULL, __func__, &c->opts, env, "environment variable PKRYLOV_OPTIONS");
    if (e) {
      free(c);
      return e;
    }
  }
  if (pthread_mutex_init(&c->err_lock, NULL) != 0) {
    free(c);
    return pk_error(NULL, PKRYLOV_ERR_BACKEND, __func__, "cannot initialise the context's lock");
  }
  if (be->context_init) {
    int ierr = be->context_init(c);
    if (ierr) {
      pthread_mutex_destroy(&c->err_lock);
      free(c);
      return ierr;
    }
  }
  *ctx = c;
  return PKRYLOV_SUCCESS;
}

int pkrylov_context_destroy(pkrylov_context *ctx) {
  PK_CHECK(ctx != NULL, NULL, PKRYLOV_ERR_NULL_POINTER, "argument 'ctx' is NULL");
  if (!*ctx) return PKRYLOV_SUCCESS;
  PK_CHECK((*ctx)->live_objects == 0, *ctx, PKRYLOV_ERR_INVALID_STATE,
           "%lld objects created from this context are not destroyed yet",
           (long long)(*ctx)->live_objects);
  if ((*ctx)->be->context_free) (*ctx)->be->context_free(*ctx);
  pk_mpi_free(*ctx); /* the duplicated communicator */
  pthread_mutex_destroy(&(*ctx)->err_lock);
  free(*ctx);
  *ctx = NULL;
  return PKRYLOV_SUCCESS;
}

int pkrylov_context_get_backend(pkrylov_context ctx, int32_t *backend) {
  PK_CHECK(ctx != NULL, NULL, PKRYLOV_ERR_NULL_POINTER, "argument 'ctx' is NULL");
  PK_CHECK_PTR(backend, ctx);
  *backend = ctx->backend;
  return PKRYLOV_SUCCESS;
}

int pkrylov_context_set_num_threads(pkrylov_context ctx, int32_t n) {
  PK_CHECK(ctx != NULL, NULL, PKRYLOV_ERR_NULL_POINTER, "argument 'ctx' is NULL");
  PK_CHECK(n <= PKRYLOV_MAX_THREADS, ctx, PKRYLOV_ERR_INVALID_VALUE,
           "argument 'n' = %d: at most %d threads (n <= 0 restores the default, %d here)", n,
           PKRYLOV_MAX_THREADS, ctx->default_threads);
  ctx->num_threads = n > 0 ? n : 0;
  return PKRYLOV_SUCCESS;
}

int pkrylov_context_describe(pkrylov_context ctx, char *buf, int32_t buflen) {
  PK_CHECK(ctx != NULL, NULL, PKRYLOV_ERR_NULL_POINTER, "argument 'ctx' is NULL");
  PK_CHECK_PTR(buf, ctx);
  PK_CHECK(buflen > 0, ctx, PKRYLOV_ERR_INVALID_SIZE, "argument 'buflen' = %d must be > 0", buflen);
  char line[512];
  if (ctx->be->context_describe)
    ctx->be->context_describe(ctx, line, sizeof line);
  else {
    const int nt = pk_num_threads(ctx);
    if (pkrylov_has_openmp())
      snprintf(line, sizeof line, "CPU backend, %d OpenMP thread%s", nt, nt == 1 ? "" : "s");
    else
      snprintf(line, sizeof line, "CPU backend, 1 thread (built without OpenMP)");
  }
  if (ctx->size > 1) {
    const size_t len = strlen(line);
    snprintf(line + len, sizeof line - len, ", rank %d of %d", (int)ctx->rank, (int)ctx->size);
  }
  if (ctx->be_why[0]) { /* AUTO on the CPU: why not CUDA */
    const size_t len = strlen(line);
    snprintf(line + len, sizeof line - len, " (AUTO: %s)", ctx->be_why);
  }
  snprintf(buf, (size_t)buflen, "%s", line);
  return PKRYLOV_SUCCESS;
}

int pkrylov_context_get_num_threads(pkrylov_context ctx, int32_t *n) {
  PK_CHECK(ctx != NULL, NULL, PKRYLOV_ERR_NULL_POINTER, "argument 'ctx' is NULL");
  PK_CHECK_PTR(n, ctx);
  *n = pk_num_threads(ctx);
  return PKRYLOV_SUCCESS;
}

int pkrylov_context_get_last_error(pkrylov_context ctx, int32_t *code, const char **message) {
  PK_CHECK(ctx != NULL, NULL, PKRYLOV_ERR_NULL_POINTER, "argument 'ctx' is NULL");
  if (code) *code = ctx->last_code;
  if (message) *message = ctx->last_message;
  return PKRYLOV_SUCCESS;
}

int pkrylov_context_get_error_message(pkrylov_context ctx, char *buf, int32_t buflen) {
  PK_CHECK(ctx != NULL, NULL, PKRYLOV_ERR_NULL_POINTER, "argument 'ctx' is NULL");
  PK_CHECK_PTR(buf, ctx);
  PK_CHECK(buflen > 0, ctx, PKRYLOV_ERR_INVALID_SIZE, "argument 'buflen' = %d must be > 0", buflen);
  pthread_mutex_lock(&ctx->err_lock);
  snprintf(buf, (size_t)buflen, "%s", ctx->last_message);
  pthread_mutex_unlock(&ctx->err_lock);
  return PKRYLOV_SUCCESS;
}

int pkrylov_context_clear_error(pkrylov_context ctx) {
  PK_CHECK(ctx != NULL, NULL, PKRYLOV_ERR_NULL_POINTER, "argument 'ctx' is NULL");
  pthread_mutex_lock(&ctx->err_lock);
  ctx->last_code = PKRYLOV_SUCCESS;
  ctx->last_message[0] = '\0';
  pthread_mutex_unlock(&ctx->err_lock);
  return PKRYLOV_SUCCESS;
}

/** CPUs in the calling thread's affinity mask (0 when it cannot be read). */
static int affinity_count(void) {
  for (int ncpu = 1024; ncpu <= (1 << 18); ncpu *= 8) { /* masks larger than cpu_set_t's 1024 bits too */
    cpu_set_t *set = CPU_ALLOC((size_t)ncpu);
    if (!set) return 0;
    const size_t size = CPU_ALLOC_SIZE((size_t)ncpu);
    const int rc = sched_getaffinity(0, size, set), err = errno;
    const int count = rc == 0 ? CPU_COUNT_S(size, set) : 0;
    CPU_FREE(set);
    if (rc == 0 || err != EINVAL) return count;
  }
  return 0;
}

int pk_cores_available(void) {
  int n = 0;
#ifdef _OPENMP
  /* with binding on, the runtime has bound this thread to its first place: its own mask is one place,
     omp_get_num_procs the union of the places (libgomp; the processors available to the runtime) */
  if (omp_get_proc_bind() != omp_proc_bind_false) n = omp_get_num_procs();
#endif
  if (n <= 0) n = affinity_count();
  if (n <= 0) {
    const long c = sysconf(_SC_NPROCESSORS_ONLN);
    n = c > 0 ? (int)(c < INT32_MAX ? c : INT32_MAX) : 1;
  }
  return n;
}

int pk_threads_cap(int n) {
#ifdef _OPENMP
  const int omp = omp_get_max_threads(); /* OMP_NUM_THREADS / omp_set_num_threads, else the CPUs at start */
  if (omp > 0 && omp < n) n = omp;
  if (n > PKRYLOV_MAX_THREADS) n = PKRYLOV_MAX_THREADS;
  return n > 0 ? n : 1;
#else
  (void)n;
  return 1;
#endif
}

int pk_default_threads(void) { return pk_threads_cap(pk_cores_available()); }

/** The count a solve on this thread chose for its context (pk_threads_begin), 0 = none: the default. */
static _Thread_local int32_t pk_thread_override;
static _Thread_local pkrylov_context pk_thread_override_ctx; /* the context it applies to */

int pk_num_threads(pkrylov_context ctx) {
#ifdef _OPENMP
  if (ctx && ctx->num_threads > 0) return ctx->num_threads;
  if (omp_in_parallel()) return 1; /* inside the caller's parallel region: its threads hold the cores */
  if (pk_thread_override > 0 && ctx == pk_thread_override_ctx) return pk_thread_override;
  return ctx ? ctx->default_threads : pk_default_threads();
#else
  (void)ctx;
  return 1;
#endif
}

/** An address unique to each live thread: its identity for the context's owner flag. */
static _Thread_local char pk_thread_tag;

/** Take the context for this thread (again, when it holds it already): 1, or 0 when another thread does. */
static int context_take(pkrylov_context ctx) {
  const uintptr_t me = (uintptr_t)&pk_thread_tag;
  uintptr_t cur = 0;
  if (atomic_compare_exchange_strong_explicit(&ctx->owner, &cur, me, memory_order_acquire,
                                              memory_order_relaxed)) {
    ctx->owner_depth = 1;
    return 1;
  }
  if (cur != me) return 0;
  ctx->owner_depth++; /* a nested call of the owner (a product in a callback of its solve) */
  return 1;
}

static void context_drop(pkrylov_context ctx) {
  if (--ctx->owner_depth == 0) atomic_store_explicit(&ctx->owner, 0, memory_order_release);
}

int pk_use_begin(pkrylov_context ctx, const char *func, const char *arg, struct pkrylov_operator_s *A,
                 struct pkrylov_precond_s *M) {
  const int ex = pk_context_exclusive(ctx), sa = pk_op_stateful(A), sm = pk_pc_stateful(M);
  if (ex && !context_take(ctx))
    return pk_error(ctx, PKRYLOV_ERR_BUSY, func,
                    "argument '%s': its context is in use by another thread's solve or product (a %s%s serves "
                    "one at a time)",
                    arg, ctx->be->device ? ctx->be->name : "context with a communicator",
                    ctx->be->device ? " context" : "");
  if (sa && !pk_busy_take(&A->busy)) {
    if (ex) context_drop(ctx);
    return pk_error(ctx, PKRYLOV_ERR_BUSY, func,
                    "argument '%s': its operator (%s) is in use by another thread's solve or product (it "
                    "keeps state during a product: one at a time)",
                    arg, A->type == PKRYLOV_OPERATOR_USER ? "a user routine"
                         : A->halo.exchange             ? "a stencil with the caller's halo exchange"
                                                        : "a distributed operator");
  }
  if (sm && !pk_busy_take(&M->busy)) {
    if (sa) pk_busy_drop(&A->busy);
    if (ex) context_drop(ctx);
    return pk_error(ctx, PKRYLOV_ERR_BUSY, func,
                    "argument '%s': its preconditioner (a user routine) is in use by another thread's solve "
                    "or product (one at a time)",
                    arg);
  }
  return PKRYLOV_SUCCESS;
}

void pk_use_end(pkrylov_context ctx, struct pkrylov_operator_s *A, struct pkrylov_precond_s *M) {
  if (pk_pc_stateful(M)) pk_busy_drop(&M->busy);
  if (pk_op_stateful(A)) pk_busy_drop(&A->busy);
  if (pk_context_exclusive(ctx)) context_drop(ctx);
}

/** 1 when s's solves choose between the default count and one thread (pk_thread_choice). */
static int threads_adapt(pkrylov_solver s) {
  const pkrylov_context ctx = s->ctx;
  return !ctx->be->device && ctx->num_threads <= 0 && ctx->default_threads > 1 &&
         pk_par(s->n);
}

void pk_threads_begin(pkrylov_solver s) {
  pk_thread_choice *T = &s->threads;
  T->saved = pk_thread_override;
  T->saved_ctx = pk_thread_override_ctx;
  T->probing = 0;
  if (!threads_adapt(s)) return;
  if (T->gap == 0) { /* the first solves: the default count (the first one, not timed, pays for first
                        touches and thread creation), then the third a probe of one thread */
    T->gap = PK_THREADS_PROBE_MIN;
    T->next_probe = 2;
  }
  T->probing = T->solves == T->next_probe;
  const int one = T->probing ? !T->one : T->one;
  pk_thread_override = one ? 1 : 0;
  pk_thread_override_ctx = s->ctx;
}

void pk_threads_end(pkrylov_solver s, int ok) {
  pk_thread_choice *T = &s->threads;
  const int was_one = pk_thread_override == 1 && pk_thread_override_ctx == s->ctx;
  pk_thread_override = T->saved;
  pk_thread_override_ctx = T->saved_ctx;
  if (!threads_adapt(s) || !ok || s->res.iterations < 1) return;
  if (T->solves++ == 0) return; /* the first solve, a warm-up: not timed */
  const double t = s->res.solve_time_s / s->res.iterations;
  const int slot = was_one ? 1 : 0;
  const double before = T->t[slot];
  T->t[slot] = t;
  if (T->probing) { /* both measured: keep the faster, probe again later (later still if it holds) */
    const int one = T->t[1] < T->t[0];
    T->gap = one == T->one ? (2 * T->gap < PK_THREADS_PROBE_MAX ? 2 * T->gap : PK_THREADS_PROBE_MAX)
                           : PK_THREADS_PROBE_MIN;
    T->one = one;
    T->next_probe = T->solves + T->gap;
  } else if (!was_one && before > 0 && t > 2 * before) {
    /* the threads slowed down (processes arrived on the node): probe one thread at the next solve. One
       thread's solves slowing down says nothing in favour of the threads: they wait for the next probe */
    T->next_probe = T->solves;
  }
}

double pk_wtime(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

int pk_all_finite(const double *v, int64_t n) { return pk_first_nonfinite(v, n) < 0; }

int64_t pk_first_nonfinite(const double *v, int64_t n) {
  for (int64_t i = 0; i < n; i++)
    if (!isfinite(v[i])) return i;
  return -1;
}

int pk_check_vectors(pkrylov_context ctx, const char *func, int32_t mem, const double *in, const char *in_name,
                     const double *out, const char *out_name, int64_t n) {
  if (mem != PKRYLOV_MEM_HOST && mem != PKRYLOV_MEM_DEVICE)
    return pk_error(ctx, PKRYLOV_ERR_INVALID_VALUE, func,
                    "argument 'mem' = %d is not a pkrylov_memtype (HOST %d, DEVICE %d)", mem, PKRYLOV_MEM_HOST,
                    PKRYLOV_MEM_DEVICE);
  if (mem != PKRYLOV_MEM_HOST && (!ctx || !ctx->be->device))
    return pk_error(ctx, PKRYLOV_ERR_MEMTYPE, func,
                    "argument 'mem' = PKRYLOV_MEM_DEVICE but the CPU backend accepts host memory only");
  if (!in) return pk_error(ctx, PKRYLOV_ERR_NULL_POINTER, func, "argument '%s' is NULL", in_name);
  if (!out) return pk_error(ctx, PKRYLOV_ERR_NULL_POINTER, func, "argument '%s' is NULL", out_name);
  const uintptr_t a = (uintptr_t)in, b = (uintptr_t)out, len = sizeof(double) * (uintptr_t)n;
  if (!(b + len <= a || a + len <= b))
    return pk_error(ctx, PKRYLOV_ERR_ALIASING, func,
                    "arguments '%s' and '%s' overlap (they must be distinct arrays of n = %lld values)", in_name,
                    out_name, (long long)n);
  return PKRYLOV_SUCCESS;
}

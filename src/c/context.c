/**
 * @file context.c
 * @brief Contexts, the error machinery, version and status strings.
 */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "pk_impl.h"

/* Message of the last error raised without a context (per thread). */
static _Thread_local char pk_orphan_message[1024];

int pk_error(pkrylov_context ctx, int code, const char *func, const char *fmt, ...) {
  char *buf = ctx ? ctx->last_message : pk_orphan_message;
  size_t len = ctx ? sizeof ctx->last_message : sizeof pk_orphan_message;
  int off = snprintf(buf, len, "%s: ", func);
  if (off < 0) off = 0;
  if ((size_t)off < len) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf + off, len - (size_t)off, fmt, ap);
    va_end(ap);
  }
  if (ctx) ctx->last_code = code;
  return code;
}

const char *pkrylov_last_error_message(void) { return pk_orphan_message; }

int pkrylov_get_version(int32_t *major, int32_t *minor, int32_t *patch) {
  if (major) *major = PKRYLOV_VERSION_MAJOR;
  if (minor) *minor = PKRYLOV_VERSION_MINOR;
  if (patch) *patch = PKRYLOV_VERSION_PATCH;
  return PKRYLOV_SUCCESS;
}

#ifdef PKRYLOV_HAVE_CUDA
#include "pk_cuda.h"
#endif

int32_t pkrylov_has_cuda(void) {
#ifdef PKRYLOV_HAVE_CUDA
  return 1;
#else
  return 0;
#endif
}

int32_t pkrylov_has_nccl(void) {
#ifdef PKRYLOV_HAVE_NCCL
  return 1;
#else
  return 0;
#endif
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
  switch (backend) {
  case PKRYLOV_BACKEND_CPU: resolved = PKRYLOV_BACKEND_CPU; break;
  case PKRYLOV_BACKEND_AUTO:
#ifdef PKRYLOV_HAVE_CUDA
    resolved = pk_cuda_device_count() > 0 ? PKRYLOV_BACKEND_CUDA : PKRYLOV_BACKEND_CPU;
#else
    resolved = PKRYLOV_BACKEND_CPU;
#endif
    break;
  case PKRYLOV_BACKEND_CUDA:
#ifdef PKRYLOV_HAVE_CUDA
    resolved = PKRYLOV_BACKEND_CUDA; /* pk_cuda_context_init reports a missing device */
    break;
#else
    return pk_error(NULL, PKRYLOV_ERR_BACKEND_UNAVAILABLE, __func__,
                    "backend CUDA requested but this build has no CUDA support "
                    "(configure with -DPKRYLOV_ENABLE_CUDA=ON)");
#endif
  default:
    return pk_error(NULL, PKRYLOV_ERR_INVALID_VALUE, __func__,
                    "argument 'backend' = %d is not a pkrylov_backend (AUTO %d, CPU %d, CUDA %d)", backend,
                    PKRYLOV_BACKEND_AUTO, PKRYLOV_BACKEND_CPU, PKRYLOV_BACKEND_CUDA);
  }
  pkrylov_context c = calloc(1, sizeof *c);
  PK_CHECK(c != NULL, NULL, PKRYLOV_ERR_OUT_OF_MEMORY, "cannot allocate a context");
  c->backend = resolved;
  c->rank = 0; /* single rank until pkrylov_context_set_comm */
  c->size = 1;
#ifdef PKRYLOV_HAVE_CUDA
  if (resolved == PKRYLOV_BACKEND_CUDA) {
    int ierr = pk_cuda_context_init(c);
    if (ierr) {
      free(c);
      return ierr;
    }
  }
#endif
  *ctx = c;
  return PKRYLOV_SUCCESS;
}

int pkrylov_context_destroy(pkrylov_context *ctx) {
  PK_CHECK(ctx != NULL, NULL, PKRYLOV_ERR_NULL_POINTER, "argument 'ctx' is NULL");
  if (!*ctx) return PKRYLOV_SUCCESS;
  PK_CHECK((*ctx)->live_objects == 0, *ctx, PKRYLOV_ERR_INVALID_STATE,
           "%lld objects created from this context are not destroyed yet",
           (long long)(*ctx)->live_objects);
#ifdef PKRYLOV_HAVE_CUDA
  pk_cuda_context_free(*ctx);
#endif
  pk_mpi_free(*ctx); /* the duplicated communicator */
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
  ctx->num_threads = n > 0 ? n : 0;
  return PKRYLOV_SUCCESS;
}

int pkrylov_context_describe(pkrylov_context ctx, char *buf, int32_t buflen) {
  PK_CHECK(ctx != NULL, NULL, PKRYLOV_ERR_NULL_POINTER, "argument 'ctx' is NULL");
  PK_CHECK_PTR(buf, ctx);
  PK_CHECK(buflen > 0, ctx, PKRYLOV_ERR_INVALID_SIZE, "argument 'buflen' = %d must be > 0", buflen);
  char line[512];
#ifdef PKRYLOV_HAVE_CUDA
  if (ctx->backend == PKRYLOV_BACKEND_CUDA)
    pk_cuda_context_describe(ctx, line, sizeof line);
  else
#endif
  {
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
  snprintf(buf, (size_t)buflen, "%s", line);
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
  snprintf(buf, (size_t)buflen, "%s", ctx->last_message);
  return PKRYLOV_SUCCESS;
}

int pkrylov_context_clear_error(pkrylov_context ctx) {
  PK_CHECK(ctx != NULL, NULL, PKRYLOV_ERR_NULL_POINTER, "argument 'ctx' is NULL");
  ctx->last_code = PKRYLOV_SUCCESS;
  ctx->last_message[0] = '\0';
  return PKRYLOV_SUCCESS;
}

int pk_num_threads(pkrylov_context ctx) {
#ifdef _OPENMP
  if (ctx && ctx->num_threads > 0) return ctx->num_threads;
  return omp_get_max_threads();
#else
  (void)ctx;
  return 1;
#endif
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
  if (mem != PKRYLOV_MEM_HOST && (!ctx || ctx->backend != PKRYLOV_BACKEND_CUDA))
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

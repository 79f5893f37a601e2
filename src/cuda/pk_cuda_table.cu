/**
 * @file pk_cuda_table.cu
 * @brief The CUDA backend's table (src/c/core/pk_backend.h) and the plugin's one exported function,
 *        pk_cuda_backend_get: what the core calls of the CUDA backend, and nothing else.
 *
 * Shared builds make libpkrylov_cuda.so of src/cuda, which the core loads with dlopen (backend.c); static
 * builds and the white-box tests' archive link it in and call pk_cuda_backend_get directly. Every entry is
 * called at the granularity of a solve, an object's creation or a public product, never per iteration.
 */
#include <cuda_runtime.h>
#include <stdio.h>
#include <string.h>

#include "pk_impl.h"
#include "pk_kry.h"
#include "pk_cuda.h"

/* Visible devices, or 0 and why (no driver, no device, another failure of the runtime). */
static int cuda_devices(char *why, size_t len) {
  int count = 0;
  const cudaError_t e = cudaGetDeviceCount(&count);
  if (e == cudaSuccess && count > 0) return count;
  cudaGetLastError(); /* clear the sticky error */
  if (why && len) {
    if (e == cudaSuccess || e == cudaErrorNoDevice)
      snprintf(why, len, "no CUDA device is visible");
    else if (e == cudaErrorInsufficientDriver)
      snprintf(why, len, "no usable CUDA driver (%s: %s)", cudaGetErrorName(e), cudaGetErrorString(e));
    else
      snprintf(why, len, "no CUDA device usable (%s: %s)", cudaGetErrorName(e), cudaGetErrorString(e));
  }
  return 0;
}

/* reverse communication: the core keeps the device work area as void * */
static int rci_create(pkrylov_context ctx, int64_t n, int nvec, void **dev, double **work) {
  pk_cuda_rci *d = NULL;
  const int e = pk_cuda_rci_create(ctx, n, nvec, &d, work);
  *dev = d;
  return e;
}
static void rci_free(void *d) { pk_cuda_rci_free((pk_cuda_rci *)d); }
static void rci_set_func(void *d, const char *func) { pk_cuda_rci_set_func((pk_cuda_rci *)d, func); }
static int rci_sync(void *d) { return pk_cuda_rci_sync((pk_cuda_rci *)d); }
static int rci_zero(void *d, double *v) { return pk_cuda_rci_zero((pk_cuda_rci *)d, v); }
static int rci_copy(void *d, double *dst, const double *src) { return pk_cuda_rci_copy((pk_cuda_rci *)d, dst, src); }
static int rci_xpay(void *d, const double *x, double a, const double *y, double *z) {
  return pk_cuda_rci_xpay((pk_cuda_rci *)d, x, a, y, z);
}
static int rci_dots(void *d, int nv, const double *const *x, const double *const *y, double *out) {
  return pk_cuda_rci_dots((pk_cuda_rci *)d, nv, x, y, out);
}
static int rci_residual(void *d, const double *b, const double *t, double *r, double *rr) {
  return pk_cuda_rci_residual((pk_cuda_rci *)d, b, t, r, rr);
}
static int rci_cg_update(void *d, double alpha, double beta, double *x, double *p, const double *z, double *q,
                         const double *t, double *pq) {
  return pk_cuda_rci_cg_update((pk_cuda_rci *)d, alpha, beta, x, p, z, q, t, pq);
}
static int rci_pipecg_update(void *d, double alpha, double beta, const double *m, const double *nv, double *z,
                             double *q, double *s, double *p, double *x, double *r, double *u, double *w,
                             double *out) {
  return pk_cuda_rci_pipecg_update((pk_cuda_rci *)d, alpha, beta, m, nv, z, q, s, p, x, r, u, w, out);
}

static pk_backend cuda_table(void) {
  pk_backend t;
  memset(&t, 0, sizeof t);
  t.name = "CUDA";
  t.device = 1;
  t.fp32 = 1;
  t.devices = cuda_devices;
  t.context_init = pk_cuda_context_init;
  t.context_free = pk_cuda_context_free;
  t.context_describe = pk_cuda_context_describe;
  t.context_stream = pk_cuda_context_stream;
  t.context_set_device = pk_cuda_context_set_device;
  t.stream_sync = pk_cuda_stream_sync;
  t.buffer_alloc = pk_cuda_buffer_alloc;
  t.buffer_free = pk_cuda_buffer_free;
  t.check_pointer = pk_cuda_check_pointer;
  t.grid_copy = pk_cuda_grid_copy;
  t.device_uuid = pk_cuda_device_uuid;
  if (pk_cuda_nccl_compiled()) { /* NULL without NCCL: the host-staged path (mpi.c) */
    t.nccl = 1;
    t.nccl_unique_id = pk_cuda_nccl_unique_id;
    t.nccl_comm_create = pk_cuda_nccl_comm_create;
    t.nccl_comm_destroy = pk_cuda_nccl_comm_destroy;
  }
  t.operator_upload = pk_cuda_operator_upload;
  t.operator_refresh = pk_cuda_operator_refresh;
  t.operator_free = pk_cuda_operator_free;
  t.operator_apply = pk_cuda_operator_apply_public;
  t.precond_upload = pk_cuda_precond_upload;
  t.precond_refresh = pk_cuda_precond_refresh;
  t.precond_free = pk_cuda_precond_free;
  t.precond_apply = pk_cuda_precond_apply_public;
  t.solver_setup = pk_cuda_solver_setup;
  t.solver_free = pk_cuda_solver_free;
  t.solver_options = pk_cuda_solver_options;
  t.solver_solve = pk_cuda_solver_solve;
  t.kry = &pk_kry_cuda_backend;
  t.rci_create = rci_create;
  t.rci_free = rci_free;
  t.rci_set_func = rci_set_func;
  t.rci_sync = rci_sync;
  t.rci_zero = rci_zero;
  t.rci_copy = rci_copy;
  t.rci_xpay = rci_xpay;
  t.rci_dots = rci_dots;
  t.rci_residual = rci_residual;
  t.rci_cg_update = rci_cg_update;
  t.rci_pipecg_update = rci_pipecg_update;
  return t;
}

static const pk_backend pk_cuda_table = cuda_table();

/* The plugin's one exported symbol (backend.c looks it up with dlsym, or calls it in static builds). */
extern "C" __attribute__((visibility("default"))) const pk_backend *pk_cuda_backend_get(long abi, char *why,
                                                                                          size_t len) {
  if (abi != PK_BACKEND_ABI) {
    if (why && len)
      snprintf(why, len, "the CUDA plugin is of another build (interface %ld, the library's %ld): install "
                         "libpkrylov_cuda.so of the same pkrylov beside libpkrylov.so",
               (long)PK_BACKEND_ABI, abi);
    return NULL;
  }
  return &pk_cuda_table;
}

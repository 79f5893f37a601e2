/**
 * @file pk_backend.h
 * @brief Backends as tables: what the core asks of a backend, as one table of function pointers per backend.
 *
 * Every context holds the table of its backend (`ctx->be`, never NULL once created): the CPU table
 * (`pk_backend_cpu`, backend.c) has only the vector engine and NULL everywhere else (the CPU loops are the
 * core's own); a device backend fills the rest. The core never tests which backend a context has to decide
 * what to call: it calls an entry when the table has it (`if (ctx->be->operator_upload) ...`) and reads the
 * table's properties (`device`, `fp32`) for what depends on where the vectors live.
 *
 * The CUDA backend fills its table in src/cuda (pk_cuda_table.cu, `pk_cuda_backend_get`). In a shared build
 * it is its own library, libpkrylov_cuda.so, which the core loads with dlopen when a CUDA or AUTO context is
 * created (backend.c: beside libpkrylov.so first, then through the loader's path); in static builds and in
 * the white-box tests' archive the table is bound directly (CMake defines PKRYLOV_CUDA_STATIC). The plugin
 * calls back into the core through the few internal functions marked PK_PLUGIN_API (exported by
 * libpkrylov.so under the version node PKRYLOV_PRIVATE: not API, for the plugin of the same build only).
 *
 * A new backend: fill a pk_backend (the entries it serves; NULL ones are skipped or refused by the core as
 * documented per entry), a pk_kry_backend for the vector engine, and add its lookup to backend.c.
 */
#ifndef PK_BACKEND_H
#define PK_BACKEND_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/** Internal functions of the core that a backend plugin calls (exported by libpkrylov.so, version node
    PKRYLOV_PRIVATE; default visibility is harmless in the static archives). */
#if defined(__GNUC__)
#define PK_PLUGIN_API __attribute__((visibility("default")))
#else
#define PK_PLUGIN_API
#endif

struct pkrylov_context_s;
struct pkrylov_operator_s;
struct pkrylov_precond_s;
struct pkrylov_solver_s;
struct pk_kry_backend;

/**
 * The plugin interface's version: the core passes it to pk_cuda_backend_get, which refuses another. The
 * plugin shares the core's private structs, so it must come from the same build: the library's version
 * times 100 plus a revision of this table.
 */
#define PK_BACKEND_ABI                                                                               \
  ((PKRYLOV_VERSION_MAJOR * 10000L + PKRYLOV_VERSION_MINOR * 100L + PKRYLOV_VERSION_PATCH) * 100L + 1L)

typedef struct pk_backend {
  const char *name; /* "CPU", "CUDA": for messages ("CUDA context") */
  /* properties */
  int32_t device;   /* 1: vectors live in device memory (PKRYLOV_MEM_DEVICE accepted, host arrays copied),
                       one stream per context (a context serves one solve at a time), solves run in blocks
                       of sync_interval iterations without host synchronisation */
  int32_t fp32;     /* 1: mixed precision (PKRYLOV_PRECISION_FP32 / _MIXED) is served */
  int32_t nccl;     /* 1: built with NCCL (pkrylov_has_nccl) */

  /* ---- devices and contexts (NULL on the CPU) ---- */
  /** Visible devices; 0 with a one-line reason in why (no driver, no device). */
  int (*devices)(char *why, size_t len);
  int (*context_init)(struct pkrylov_context_s *ctx);
  void (*context_free)(struct pkrylov_context_s *ctx);
  /** One line: "CUDA backend on <device> (device d of n)". */
  void (*context_describe)(struct pkrylov_context_s *ctx, char *buf, size_t len);
  void *(*context_stream)(struct pkrylov_context_s *ctx);
  int (*context_set_device)(struct pkrylov_context_s *ctx, int device); /* before any object exists */
  int (*stream_sync)(void *stream);
  int (*buffer_alloc)(struct pkrylov_context_s *ctx, size_t bytes, void **p);
  void (*buffer_free)(void *p);
  /** Refuse a pointer not in the space mem says (a pkrylov status, the message names func and name). */
  int (*check_pointer)(struct pkrylov_context_s *ctx, const char *func, int32_t mem, const void *p,
                       const char *name);
  /** Tiled-grid copy between halo'd and compact arrays on the device (grid.c). */
  int (*grid_copy)(void *stream, int64_t snx, int64_t sny, int64_t olx, int64_t oly, int64_t nt, int64_t nz,
                   const double *src, double *dst, int dir);

  /* ---- distributed contexts: NCCL bootstrap and device binding (mpi.c; NULL without NCCL or CPU) ---- */
  int (*device_uuid)(unsigned char uuid[16]);
  int (*nccl_unique_id)(void *id, int bytes);
  int (*nccl_comm_create)(const void *id, int rank, int size, void **comm);
  void (*nccl_comm_destroy)(void *comm);

  /* ---- operators and preconditioners: device copies, refresh after an update, public products ---- */
  int (*operator_upload)(struct pkrylov_operator_s *A);
  int (*operator_refresh)(struct pkrylov_operator_s *A);
  void (*operator_free)(struct pkrylov_operator_s *A);
  int (*operator_apply)(struct pkrylov_operator_s *A, int32_t mem, const double *x, double *y);
  int (*precond_upload)(struct pkrylov_precond_s *M);
  int (*precond_refresh)(struct pkrylov_precond_s *M, const char *func);
  void (*precond_free)(struct pkrylov_precond_s *M);
  int (*precond_apply)(struct pkrylov_precond_s *M, int32_t mem, const double *r, double *z);

  /* ---- solvers: device state and the CG / pipelined CG solves (the engine's methods: kry) ---- */
  int (*solver_setup)(struct pkrylov_solver_s *s);
  void (*solver_free)(struct pkrylov_solver_s *s);
  void (*solver_options)(struct pkrylov_solver_s *s);
  int (*solver_solve)(struct pkrylov_solver_s *s, int32_t mem, const double *b, double *x);
  const struct pk_kry_backend *kry; /* the vector engine of the BiCGStab / GMRES families and SRCG */

  /* ---- reverse communication (rci.c: CG and pipelined CG with device work vectors) ---- */
  int (*rci_create)(struct pkrylov_context_s *ctx, int64_t n, int nvec, void **dev, double **work);
  void (*rci_free)(void *dev);
  void (*rci_set_func)(void *dev, const char *func);
  int (*rci_sync)(void *dev);
  int (*rci_zero)(void *dev, double *v);
  int (*rci_copy)(void *dev, double *dst, const double *src);
  int (*rci_xpay)(void *dev, const double *x, double a, const double *y, double *z);
  int (*rci_dots)(void *dev, int nv, const double *const *x, const double *const *y, double *out);
  int (*rci_residual)(void *dev, const double *b, const double *t, double *r, double *rr);
  int (*rci_cg_update)(void *dev, double alpha, double beta, double *x, double *p, const double *z, double *q,
                       const double *t, double *pq);
  int (*rci_pipecg_update)(void *dev, double alpha, double beta, const double *m, const double *nv, double *z,
                           double *q, double *s, double *p, double *x, double *r, double *u, double *w,
                           double *out);
} pk_backend;

/** The CPU backend's table (backend.c). */
extern const pk_backend pk_backend_cpu;

/**
 * The CUDA backend's table, or NULL with a one-line reason in why: built without CUDA, the plugin not
 * found or not loadable (dlerror's text), a plugin of another build. Loaded once per process (thread-safe);
 * a failure is remembered. backend.c.
 */
const pk_backend *pk_backend_cuda(char *why, size_t len);

/**
 * The CUDA plugin's one exported function (src/cuda/pk_cuda_table.cu): its table when abi is the one it was
 * built with, else NULL with the reason in why.
 */
typedef const pk_backend *(*pk_backend_get_fn)(long abi, char *why, size_t len);
#define PK_CUDA_BACKEND_GET "pk_cuda_backend_get"

#ifdef __cplusplus
}
#endif

#endif /* PK_BACKEND_H */

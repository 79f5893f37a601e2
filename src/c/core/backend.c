/**
 * @file backend.c
 * @brief The backends' tables: the CPU table, and the lookup of the CUDA table (pk_backend.h).
 *
 * One code path chooses how the CUDA table is found, by a CMake definition:
 *  - PKRYLOV_CUDA_PLUGIN (shared builds with CUDA): dlopen of libpkrylov_cuda.so, first the file beside
 *    libpkrylov.so (dladdr of a symbol of this library gives its directory), then the plain soname through
 *    the loader's path; RTLD_NOW | RTLD_LOCAL; then its one symbol pk_cuda_backend_get.
 *  - PKRYLOV_CUDA_STATIC (static builds, the white-box tests' archive): pk_cuda_backend_get is linked in.
 *  - neither (built without CUDA): no table, "built without CUDA".
 * The lookup runs once per process (pthread_once) and keeps its outcome, table or reason.
 */
#define _GNU_SOURCE /* dladdr */
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "pk_impl.h"
#include "pk_kry.h"

#if defined(PKRYLOV_CUDA_PLUGIN)
#include <dlfcn.h>
#endif

const pk_backend pk_backend_cpu = {
    .name = "CPU",
    .kry = &pk_kry_cpu_backend,
};

#if defined(PKRYLOV_CUDA_STATIC)
const pk_backend *pk_cuda_backend_get(long abi, char *why, size_t len);
#endif

static pthread_once_t pk_cuda_once = PTHREAD_ONCE_INIT;
static const pk_backend *pk_cuda_table;
static char pk_cuda_why[512];

#if defined(PKRYLOV_CUDA_PLUGIN)
/* The plugin's file names: libpkrylov_cuda.so.<SOVERSION> (PKRYLOV_CUDA_PLUGIN holds it, e.g.
   "libpkrylov_cuda.so.0"). */
static void *pk_cuda_dlopen(void) {
  const char *soname = PKRYLOV_CUDA_PLUGIN;
  char path[4096], first[1024] = "";
  Dl_info info;
  if (dladdr((void *)&pk_backend_cpu, &info) && info.dli_fname) {
    const char *slash = strrchr(info.dli_fname, '/');
    if (slash) {
      snprintf(path, sizeof path, "%.*s/%s", (int)(slash - info.dli_fname), info.dli_fname, soname);
      void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
      if (h) return h;
      const char *e = dlerror();
      snprintf(first, sizeof first, "%.1000s", e ? e : path);
    }
  }
  void *h = dlopen(soname, RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    const char *e = dlerror();
    /* the first attempt's text says whether the file beside the library exists but failed to load (a
       missing libcudart: "libcudart.so.13: cannot open shared object file") */
    if (first[0] && !strstr(first, "No such file"))
      snprintf(pk_cuda_why, sizeof pk_cuda_why, "the CUDA plugin cannot be loaded: %s", first);
    else
      snprintf(pk_cuda_why, sizeof pk_cuda_why, "the CUDA plugin cannot be loaded: %s", e ? e : soname);
  }
  return h;
}
#endif

static void pk_cuda_lookup(void) {
#if defined(PKRYLOV_CUDA_PLUGIN)
  void *h = pk_cuda_dlopen();
  if (!h) return;
  pk_backend_get_fn get;
  *(void **)&get = dlsym(h, PK_CUDA_BACKEND_GET);
  if (!get) {
    const char *e = dlerror();
    snprintf(pk_cuda_why, sizeof pk_cuda_why, "the CUDA plugin has no %s: %s", PK_CUDA_BACKEND_GET,
             e ? e : "");
    dlclose(h);
    return;
  }
  pk_cuda_table = get(PK_BACKEND_ABI, pk_cuda_why, sizeof pk_cuda_why);
  if (!pk_cuda_table) dlclose(h); /* else kept loaded for the life of the process */
#elif defined(PKRYLOV_CUDA_STATIC)
  pk_cuda_table = pk_cuda_backend_get(PK_BACKEND_ABI, pk_cuda_why, sizeof pk_cuda_why);
#else
  snprintf(pk_cuda_why, sizeof pk_cuda_why, "built without CUDA (configure with -DPKRYLOV_ENABLE_CUDA=ON)");
#endif
}

const pk_backend *pk_backend_cuda(char *why, size_t len) {
  pthread_once(&pk_cuda_once, pk_cuda_lookup);
  if (!pk_cuda_table && why && len) snprintf(why, len, "%s", pk_cuda_why);
  return pk_cuda_table;
}

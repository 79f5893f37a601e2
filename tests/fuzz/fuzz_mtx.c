/**
 * @file fuzz_mtx.c
 * @brief libFuzzer harness of the Matrix Market reader: the bytes are a file, read as an operator
 *        (pkrylov_operator_create_from_mtx; then its size, CSR export and a product) and as a vector
 *        (pkrylov_mtx_read_vector: the length query, then the values into an array of that length when it is
 *        small). Memory must follow the length of the file, not what its header declares (a fuzzer's RSS
 *        limit turns an allocation of a declared size into a reported crash).
 */
#define _GNU_SOURCE /* memfd_create */
#include <sys/mman.h>
#include <unistd.h>

#include "fuzz_common.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static int fd = -1;
  static char path[64];
  static pkrylov_context ctx;
  if (fd < 0) { /* one in-memory file per process, reopened by path for every input */
    fd = memfd_create("pkrylov-fuzz-mtx", 0);
    FZ_ASSERT(fd >= 0, "memfd_create");
    snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
    FZ_ASSERT(pkrylov_context_create(PKRYLOV_BACKEND_CPU, &ctx) == PKRYLOV_SUCCESS, "context");
  }
  FZ_ASSERT(ftruncate(fd, 0) == 0 && pwrite(fd, data, size, 0) == (ssize_t)size, "write the input");

  pkrylov_operator A = NULL;
  if (pkrylov_operator_create_from_mtx(ctx, path, &A) == PKRYLOV_SUCCESS) {
    int64_t n = -1, nnz = -1;
    FZ_ASSERT(pkrylov_operator_get_info(A, &n, &nnz, NULL, NULL, NULL, NULL) == PKRYLOV_SUCCESS && n > 0 &&
                  nnz >= 0 && (int64_t)size >= 10,
              "info of a matrix read: n %lld nnz %lld", (long long)n, (long long)nnz);
    /* every row has an entry (issue 14 item 16): n <= 2 nnz, and nnz entries took > 4 bytes each */
    FZ_ASSERT(n <= 2 * nnz && nnz <= (int64_t)size, "n %lld, nnz %lld from %zu bytes", (long long)n,
              (long long)nnz, size);
    int64_t *rp = malloc(sizeof(int64_t) * (size_t)(n + 1)),
            *ci = malloc(sizeof(int64_t) * (size_t)(nnz + 1));
    double *v = malloc(sizeof(double) * (size_t)(nnz + 1)), *x = malloc(sizeof(double) * (size_t)n),
           *y = malloc(sizeof(double) * (size_t)n);
    FZ_ASSERT(rp && ci && v && x && y, "allocation");
    FZ_ASSERT(pkrylov_operator_get_csr(A, rp, ci, v) == PKRYLOV_SUCCESS && rp[0] == 0 && rp[n] == nnz, "CSR");
    for (int64_t i = 0; i < n; i++) {
      x[i] = 1.0;
      for (int64_t k = rp[i]; k < rp[i + 1]; k++)
        FZ_ASSERT(ci[k] >= 0 && ci[k] < n && (k == rp[i] || ci[k] > ci[k - 1]), "row %lld", (long long)i);
    }
    FZ_ASSERT(pkrylov_operator_apply(A, PKRYLOV_MEM_HOST, x, y) == PKRYLOV_SUCCESS, "apply");
    free(rp), free(ci), free(v), free(x), free(y);
    FZ_ASSERT(pkrylov_operator_destroy(&A) == PKRYLOV_SUCCESS && A == NULL, "destroy");
  } else {
    FZ_ASSERT(A == NULL, "the output handle was written by a failed read");
  }

  int64_t len = -5;
  if (pkrylov_mtx_read_vector(ctx, path, 0, NULL, &len) == PKRYLOV_SUCCESS) {
    FZ_ASSERT(len > 0, "length %lld", (long long)len);
    if (len <= 4096) {
      double *v = malloc(sizeof(double) * (size_t)len);
      int64_t got = -1;
      FZ_ASSERT(v && pkrylov_mtx_read_vector(ctx, path, len, v, &got) == PKRYLOV_SUCCESS && got == len,
                "the values of a vector whose length was read");
      /* one value less of room: refused, nothing written */
      if (len > 1)
        FZ_ASSERT(pkrylov_mtx_read_vector(ctx, path, len - 1, v, &got) == PKRYLOV_ERR_SIZE_MISMATCH,
                  "capacity len - 1");
      free(v);
    }
  } else {
    FZ_ASSERT(len == -5, "*n written by a failed read");
  }
  pkrylov_context_clear_error(ctx);
  return 0;
}

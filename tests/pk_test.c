/**
 * @file pk_test.c
 * @brief Test harness driver and reference helpers. The references here are independent of the library
 *        code under test: dense LAPACK solves and plain CSR loops over the exported matrix.
 */
#include "pk_test.h"

#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>

int pk_test_failures = 0;
int pk_test_backend = PKRYLOV_BACKEND_CPU;

int pk_test_context_create(pkrylov_context *ctx) { return pkrylov_context_create(pk_test_backend, ctx); }

/**
 * Set pk_test_backend from the backend argument ("cpu", "cuda"). Returns PK_PASS when the backend can run
 * here, PK_SKIP (with the reason) when the build or the machine lacks it, PK_FAIL for an unknown name or a
 * context that fails otherwise.
 */
static int select_backend(const char *name) {
  if (strcmp(name, "cpu") == 0) {
    pk_test_backend = PKRYLOV_BACKEND_CPU;
    return PK_PASS;
  }
  if (strcmp(name, "cuda") != 0) {
    fprintf(stderr, "unknown backend '%s' (cpu, cuda)\n", name);
    return PK_FAIL;
  }
  pk_test_backend = PKRYLOV_BACKEND_CUDA;
  if (!pkrylov_has_cuda()) {
    printf("SKIP: this build has no CUDA backend\n");
    return PK_SKIP;
  }
  pkrylov_context ctx = NULL;
  const int rc = pkrylov_context_create(PKRYLOV_BACKEND_CUDA, &ctx);
  if (rc == PKRYLOV_ERR_BACKEND_UNAVAILABLE) { /* no device visible */
    printf("SKIP: %s\n", pkrylov_last_error_message());
    return PK_SKIP;
  }
  if (rc) {
    fprintf(stderr, "CUDA context: %d (%s): %s\n", rc, pkrylov_error_string(rc), pkrylov_last_error_message());
    return PK_FAIL;
  }
  pkrylov_context_destroy(&ctx);
  return PK_PASS;
}

int pk_test_main(int argc, char **argv, const pk_test_entry *entries, int count) {
  int status = PK_PASS, ran = 0;
  if (argc > 1 && strcmp(argv[1], "--list") == 0) { /* the case names, one per line */
    for (int i = 0; i < count; i++) printf("%s\n", entries[i].name);
    return PK_PASS;
  }
  /* tNNN-object [case|all [backend]] */
  const char *only = argc > 1 && strcmp(argv[1], "all") != 0 ? argv[1] : NULL;
  if (argc > 2) {
    const int rc = select_backend(argv[2]);
    if (rc != PK_PASS) return rc;
  }
  for (int i = 0; i < count; i++) {
    if (only && strcmp(only, entries[i].name) != 0) continue;
    pk_test_failures = 0;
    int rc = entries[i].fn();
    ran++;
    if (rc == PK_SKIP) {
      printf("SKIP %s\n", entries[i].name);
      if (only) return PK_SKIP;
    } else if (rc != PK_PASS || pk_test_failures) {
      printf("FAIL %s\n", entries[i].name);
      status = PK_FAIL;
    } else {
      printf("ok   %s\n", entries[i].name);
    }
  }
  if (!ran) {
    fprintf(stderr, "no test case named '%s'\n", only ? only : "");
    return PK_FAIL;
  }
  return status;
}

const char *pk_test_matrix_path(const char *name) {
  static char buf[4096];
  snprintf(buf, sizeof buf, "%s/matrices/%s", PK_SHARED_DIR, name);
  struct stat st;
  if (stat(buf, &st) != 0) {
    fprintf(stderr, "test matrix %s not found (shared/ missing?)\n", buf);
    return NULL;
  }
  return buf;
}

const char *pk_test_tmp_path(const char *name) {
  static char buf[4096];
  snprintf(buf, sizeof buf, "%s/%s", PK_TEST_TMPDIR, name);
  return buf;
}

double pk_test_rand(uint64_t *state) {
  /* splitmix64 */
  uint64_t z = (*state += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  z ^= z >> 31;
  return (double)(z >> 11) * (2.0 / 9007199254740992.0) - 1.0;
}

double pk_test_norm(int64_t n, const double *v) {
  double s = 0;
  for (int64_t i = 0; i < n; i++) s += v[i] * v[i];
  return sqrt(s);
}

double pk_test_rel_diff(int64_t n, const double *a, const double *b) {
  double d = 0, nb = 0;
  for (int64_t i = 0; i < n; i++) {
    d += (a[i] - b[i]) * (a[i] - b[i]);
    nb += b[i] * b[i];
  }
  return nb > 0 ? sqrt(d / nb) : sqrt(d);
}

static int export_csr(pkrylov_operator A, int64_t *n, int64_t **rp, int64_t **ci, double **v) {
  int64_t nnz;
  if (pkrylov_operator_get_info(A, n, &nnz, NULL, NULL, NULL, NULL)) return 1;
  *rp = malloc(sizeof(int64_t) * (size_t)(*n + 1));
  *ci = malloc(sizeof(int64_t) * (size_t)(nnz ? nnz : 1));
  *v = malloc(sizeof(double) * (size_t)(nnz ? nnz : 1));
  if (!*rp || !*ci || !*v || pkrylov_operator_get_csr(A, *rp, *ci, *v)) {
    free(*rp), free(*ci), free(*v);
    return 1;
  }
  return 0;
}

double *pk_test_dense_from_operator(pkrylov_operator A, int64_t *n_out) {
  int64_t n, *rp, *ci;
  double *v;
  if (export_csr(A, &n, &rp, &ci, &v)) return NULL;
  double *D = calloc((size_t)(n * n), sizeof(double));
  if (D)
    for (int64_t i = 0; i < n; i++)
      for (int64_t k = rp[i]; k < rp[i + 1]; k++) D[i * n + ci[k]] += v[k];
  free(rp), free(ci), free(v);
  *n_out = n;
  return D;
}

/* LAPACK, Fortran calling convention */
extern void dgesv_(const int *n, const int *nrhs, double *a, const int *lda, int *ipiv, double *b,
                   const int *ldb, int *info);

int pk_test_lapack_solve(int n, double *a, double *b) {
  int nrhs = 1, info = 0;
  int *ipiv = malloc(sizeof(int) * (size_t)(n > 0 ? n : 1));
  if (!ipiv) return -1;
  dgesv_(&n, &nrhs, a, &n, ipiv, b, &n, &info);
  free(ipiv);
  return info;
}

int pk_test_dense_solve(pkrylov_operator A, const double *b, double *x) {
  int64_t n64;
  double *D = pk_test_dense_from_operator(A, &n64);
  if (!D || n64 > 4000) {
    free(D);
    return 1;
  }
  int n = (int)n64, nrhs = 1, info = 0;
  int *ipiv = malloc(sizeof(int) * (size_t)n);
  /* row-major D is A^T in column-major: transpose in place */
  for (int i = 0; i < n; i++)
    for (int j = i + 1; j < n; j++) {
      double t = D[i * n + j];
      D[i * n + j] = D[j * n + i];
      D[j * n + i] = t;
    }
  memcpy(x, b, sizeof(double) * (size_t)n);
  dgesv_(&n, &nrhs, D, &n, ipiv, x, &n, &info);
  free(ipiv);
  free(D);
  return info != 0;
}

int pk_test_csr_matvec(pkrylov_operator A, const double *x, double *y) {
  int64_t n, *rp, *ci;
  double *v;
  if (export_csr(A, &n, &rp, &ci, &v)) return 1;
  for (int64_t i = 0; i < n; i++) {
    double s = 0;
    for (int64_t k = rp[i]; k < rp[i + 1]; k++) s += v[k] * x[ci[k]];
    y[i] = s;
  }
  free(rp), free(ci), free(v);
  return 0;
}

/* The rounding error bound of ||b - A x|| / ||b|| evaluated in any summation order (row i with k terms:
   |fl(r_i) - r_i| <= gamma_{k+1} (|b_i| + sum_j |a_ij x_j|), gamma_m = m u / (1 - m u)): two evaluations of a
   true residual (the library's, on any backend, and pk_test_true_relres) can differ by twice this. */
double pk_test_relres_rounding(pkrylov_operator A, const double *b, const double *x) {
  int64_t n, *rp, *ci;
  double *v;
  if (export_csr(A, &n, &rp, &ci, &v)) return INFINITY;
  const double u = 0x1p-53;
  double e2 = 0, nb = 0;
  for (int64_t i = 0; i < n; i++) {
    double s = fabs(b[i]);
    for (int64_t k = rp[i]; k < rp[i + 1]; k++) s += fabs(v[k] * x[ci[k]]);
    const double m = (double)(rp[i + 1] - rp[i] + 1);
    const double g = m * u / (1 - m * u);
    e2 += (g * s) * (g * s);
    nb += b[i] * b[i];
  }
  free(rp), free(ci), free(v);
  return nb > 0 ? sqrt(e2 / nb) : sqrt(e2);
}

double pk_test_true_relres(pkrylov_operator A, const double *b, const double *x) {
  int64_t n;
  if (pkrylov_operator_get_info(A, &n, NULL, NULL, NULL, NULL, NULL)) return INFINITY;
  double *y = malloc(sizeof(double) * (size_t)n);
  if (!y || pk_test_csr_matvec(A, x, y)) {
    free(y);
    return INFINITY;
  }
  double r = 0, nb = 0;
  for (int64_t i = 0; i < n; i++) {
    r += (b[i] - y[i]) * (b[i] - y[i]);
    nb += b[i] * b[i];
  }
  free(y);
  return nb > 0 ? sqrt(r / nb) : sqrt(r);
}

int pk_test_system(const char *cmd) {
  int rc = system(cmd);
  if (rc == -1) return -1;
  if (WIFEXITED(rc)) return WEXITSTATUS(rc);
  return -1;
}

int pk_test_msg_has(pkrylov_context ctx, const char *needle) {
  const char *m = "";
  if (ctx)
    pkrylov_context_get_last_error(ctx, NULL, &m);
  else
    m = pkrylov_last_error_message();
  if (!strstr(m, needle)) {
    fprintf(stderr, "message '%s' does not contain '%s'\n", m, needle);
    return 0;
  }
  return 1;
}

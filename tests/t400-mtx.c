/**
 * @file t400-mtx.c
 * @brief Matrix Market reader/writer: matrices and vectors read back what the test wrote (triplets kept
 *        in the test), bit-identical round trips, the shared matrices against MANIFEST.md's table and a
 *        plain sscanf reader written here, and one case per malformed-file error, each checking the
 *        exact code and the "PATH:LINE:" in the message.
 */
#include "pk_test.h"

#include <errno.h>
#include <float.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

/* ---- helpers ------------------------------------------------------------------------------------ */

/** Write text to the scratch file `name`; its path goes to path (4096 bytes). 0 on success. */
static int put_file(const char *name, const char *text, char *path) {
  snprintf(path, 4096, "%s", pk_test_tmp_path(name));
  FILE *f = fopen(path, "wb");
  if (!f) {
    fprintf(stderr, "cannot write %s\n", path);
    return 1;
  }
  fputs(text, f);
  return fclose(f) != 0;
}

/** Last error message of ctx, or of the thread when ctx is NULL. */
static const char *last_msg(pkrylov_context ctx) {
  const char *m = "";
  if (ctx) pkrylov_context_get_last_error(ctx, NULL, &m);
  else m = pkrylov_last_error_message();
  return m;
}

/**
 * got must equal code and the message must hold "PATH:LINE:" (line > 0) or PATH (line 0), and extra
 * (when not NULL). Prints the reason and returns 0 otherwise.
 */
static int error_ok(pkrylov_context ctx, int got, int code, const char *path, long long line,
                    const char *extra) {
  char tag[4200];
  if (line > 0) snprintf(tag, sizeof tag, "%s:%lld:", path, line);
  else snprintf(tag, sizeof tag, "%s", path);
  const char *m = last_msg(ctx);
  int ok = got == code && strstr(m, tag) != NULL && (!extra || strstr(m, extra) != NULL);
  if (!ok)
    fprintf(stderr, "got %d (%s), expected %d (%s) with '%s'%s%s%s; message: %s\n", got,
            pkrylov_error_string(got), code, pkrylov_error_string(code), tag, extra ? " and '" : "",
            extra ? extra : "", extra ? "'" : "", m);
  return ok;
}

/**
 * Write text to `name` and read it as an operator: the call must fail with code, the message must name
 * "PATH:LINE:" and extra, and the output handle must stay untouched. Returns 1 when all holds.
 */
static int mtx_fails(const char *name, const char *text, int code, long long line, const char *extra) {
  char path[4096];
  pkrylov_context ctx;
  if (put_file(name, text, path) || pkrylov_context_create(PKRYLOV_BACKEND_CPU, &ctx)) return 0;
  pkrylov_operator A = NULL;
  int got = pkrylov_operator_create_from_mtx(ctx, path, &A);
  int ok = error_ok(ctx, got, code, path, line, extra);
  if (A != NULL) {
    fprintf(stderr, "%s: the output handle was modified on error\n", name);
    pkrylov_operator_destroy(&A);
    ok = 0;
  }
  if (pkrylov_context_destroy(&ctx) != PKRYLOV_SUCCESS) ok = 0;
  return ok;
}

/** As mtx_fails for pkrylov_mtx_read_vector with a NULL context (message from the thread slot). */
static int vec_fails(const char *name, const char *text, int code, long long line, const char *extra) {
  char path[4096];
  if (put_file(name, text, path)) return 0;
  double v[8] = {0};
  int64_t n = -5;
  int got = pkrylov_mtx_read_vector(NULL, path, 8, v, &n);
  int ok = error_ok(NULL, got, code, path, line, extra);
  if (n != -5) {
    fprintf(stderr, "%s: *n was modified on error\n", name);
    ok = 0;
  }
  return ok;
}

/** Bitwise equality of two doubles (tells -0 from 0). */
static int same_bits(double a, double b) { return memcmp(&a, &b, sizeof a) == 0; }

/**
 * The CSR export of A must hold exactly the triplets (1-based ti, tj, values tv), mirrored when
 * symmetric, with sorted columns and bit-identical values. n <= 64.
 */
static int csr_matches(pkrylov_operator A, int64_t n, int ne, const int64_t *ti, const int64_t *tj,
                       const double *tv, int symmetric) {
  int64_t na, nnz;
  int32_t type;
  if (pkrylov_operator_get_info(A, &na, &nnz, &type, NULL, NULL, NULL) || na != n || n > 64 ||
      type != PKRYLOV_OPERATOR_CSR) {
    fprintf(stderr, "get_info: n %lld (expected %lld), type %d\n", (long long)na, (long long)n, type);
    return 0;
  }
  static double E[64 * 64];
  static int mask[64 * 64];
  memset(mask, 0, sizeof mask);
  int64_t expected_nnz = 0;
  for (int k = 0; k < ne; k++) {
    int64_t i = ti[k] - 1, j = tj[k] - 1;
    E[i * n + j] = tv[k], mask[i * n + j] = 1, expected_nnz++;
    if (symmetric && i != j) E[j * n + i] = tv[k], mask[j * n + i] = 1, expected_nnz++;
  }
  int64_t rp[65], ci[64 * 64];
  double v[64 * 64];
  if (nnz != expected_nnz || pkrylov_operator_get_csr(A, rp, ci, v)) {
    fprintf(stderr, "nnz %lld, expected %lld\n", (long long)nnz, (long long)expected_nnz);
    return 0;
  }
  int ok = rp[0] == 0 && rp[n] == nnz;
  for (int64_t i = 0; i < n && ok; i++)
    for (int64_t k = rp[i]; k < rp[i + 1]; k++) {
      int64_t c = ci[k];
      if (c < 0 || c >= n || (k > rp[i] && ci[k - 1] >= c) || !mask[i * n + c] ||
          !same_bits(v[k], E[i * n + c])) {
        fprintf(stderr, "export entry (%lld, %lld) = %.17g is not expected\n", (long long)i, (long long)c,
                v[k]);
        ok = 0;
        break;
      }
    }
  return ok;
}

/** Read the text as an operator and compare with the triplets (see csr_matches). */
static int mtx_reads(const char *name, const char *text, int64_t n, int ne, const int64_t *ti,
                     const int64_t *tj, const double *tv, int symmetric) {
  char path[4096];
  pkrylov_context ctx;
  pkrylov_operator A = NULL;
  if (put_file(name, text, path) || pkrylov_context_create(PKRYLOV_BACKEND_CPU, &ctx)) return 0;
  int rc = pkrylov_operator_create_from_mtx(ctx, path, &A), ok = rc == PKRYLOV_SUCCESS;
  if (!ok) fprintf(stderr, "%s: read failed with %d: %s\n", name, rc, last_msg(ctx));
  if (ok) ok = csr_matches(A, n, ne, ti, tj, tv, symmetric);
  pkrylov_operator_destroy(&A);
  if (pkrylov_context_destroy(&ctx) != PKRYLOV_SUCCESS) ok = 0;
  return ok;
}

/* The 4 x 4 general matrix of several cases, as triplets and as file lines. */
static const int64_t G_I[] = {3, 1, 2, 1, 4, 2, 4};
static const int64_t G_J[] = {1, 1, 2, 3, 4, 4, 2};
static const double G_V[] = {-2.5, 4, 5.25, 0.125, 1e-3, -7, 3};
#define G_LINES "3 1 -2.5\n1 1 4\n2 2 5.25\n1 3 0.125\n4 4 1e-3\n2 4 -7\n4 2 3\n"

/* ---- reading valid files ------------------------------------------------------------------------- */

PK_TEST_CASE(read_general) {
  PK_EXPECT(mtx_reads("general.mtx", "%%MatrixMarket matrix coordinate real general\n4 4 7\n" G_LINES, 4, 7,
                      G_I, G_J, G_V, 0),
            "general 4 x 4");
  /* entries in other number spellings: +2, -.5, 1.5E+2, 0 (explicit zeros are kept) */
  const int64_t i2[] = {1, 2, 2, 1};
  const int64_t j2[] = {2, 1, 2, 1};
  const double v2[] = {2, -0.5, 150, 0};
  PK_EXPECT(mtx_reads("general2.mtx",
                      "%%MatrixMarket matrix coordinate real general\n2 2 4\n1 2 +2\n2 1 -.5\n2 2 1.5E+2\n"
                      "1 1 0\n",
                      2, 4, i2, j2, v2, 0),
            "number spellings");
  PK_TEST_END();
}

PK_TEST_CASE(read_symmetric) {
  const int64_t ti[] = {1, 2, 2, 3, 4, 4};
  const int64_t tj[] = {1, 1, 2, 2, 1, 4};
  const double tv[] = {2, -1, 2, -1, 0.5, 3};
  PK_EXPECT(mtx_reads("symmetric.mtx",
                      "%%MatrixMarket matrix coordinate real symmetric\n4 4 6\n1 1 2\n2 1 -1\n2 2 2\n"
                      "3 2 -1\n4 1 0.5\n4 4 3\n",
                      4, 6, ti, tj, tv, 1),
            "symmetric 4 x 4, mirrored to 9 entries");
  PK_TEST_END();
}

PK_TEST_CASE(read_pattern) {
  const int64_t ti[] = {1, 3, 2, 3};
  const int64_t tj[] = {1, 1, 2, 3};
  const double tv[] = {1, 1, 1, 1};
  PK_EXPECT(mtx_reads("pattern.mtx",
                      "%%MatrixMarket matrix coordinate pattern general\n3 3 4\n1 1\n3 1\n2 2\n3 3\n", 3, 4,
                      ti, tj, tv, 0),
            "pattern general: values 1");
  const int64_t si[] = {1, 2, 2};
  const int64_t sj[] = {1, 1, 2};
  PK_EXPECT(mtx_reads("pattern_sym.mtx", "%%MatrixMarket matrix coordinate pattern symmetric\n2 2 3\n1 1\n"
                      "2 1\n2 2\n", 2, 3, si, sj, tv, 1),
            "pattern symmetric");
  PK_TEST_END();
}

PK_TEST_CASE(read_integer) {
  const int64_t ti[] = {1, 2, 3, 1, 3};
  const int64_t tj[] = {1, 2, 3, 3, 1};
  const double tv[] = {-7, 12, 3, 0, 9007199254740992.0};
  PK_EXPECT(mtx_reads("integer.mtx", "%%MatrixMarket matrix coordinate integer general\n3 3 5\n1 1 -7\n"
                      "2 2 12\n3 3 +3\n1 3 0\n3 1 9007199254740992\n", 3, 5, ti, tj, tv, 0),
            "integer general");
  PK_TEST_END();
}

PK_TEST_CASE(read_comments_blank) {
  /* upper-case banner, comments and blank (also white-space only) lines everywhere, tabs, leading
     spaces, a 200000-character comment line */
  size_t longlen = 200000;
  char *text = malloc(longlen + 1024);
  PK_EXPECT(text != NULL, "malloc");
  if (!text) PK_TEST_END();
  char *p = text;
  p += sprintf(p, "%%%%MATRIXMARKET Matrix Coordinate REAL General\n%% a comment\n\n   \t\n%%");
  memset(p, 'x', longlen);
  p += longlen;
  p += sprintf(p, "\n \t4\t4   7  \n\n%% between entries\n3 1 -2.5\n\n1 1 4\n  2\t2 5.25\n%%%%\n1 3 0.125\n"
                  "4 4 1e-3\n2 4 -7\n\t\n4 2 3\n\n%% trailing comment\n\n");
  PK_EXPECT(mtx_reads("comments.mtx", text, 4, 7, G_I, G_J, G_V, 0), "comments and blank lines");
  /* last line without a newline */
  PK_EXPECT(mtx_reads("nonewline.mtx",
                      "%%MatrixMarket matrix coordinate real general\n4 4 7\n3 1 -2.5\n1 1 4\n2 2 5.25\n"
                      "1 3 0.125\n4 4 1e-3\n2 4 -7\n4 2 3", 4, 7, G_I, G_J, G_V, 0),
            "no newline at the end");
  free(text);
  PK_TEST_END();
}

PK_TEST_CASE(read_crlf) {
  PK_EXPECT(mtx_reads("crlf.mtx",
                      "%%MatrixMarket matrix coordinate real general\r\n% comment\r\n\r\n4 4 7\r\n"
                      "3 1 -2.5\r\n1 1 4\r\n2 2 5.25\r\n1 3 0.125\r\n4 4 1e-3\r\n2 4 -7\r\n4 2 3\r\n\r\n",
                      4, 7, G_I, G_J, G_V, 0),
            "CRLF line ends");
  PK_TEST_END();
}

/* ---- round trips --------------------------------------------------------------------------------- */

PK_TEST_CASE(roundtrip_matrix) {
  /* random 60 x 60 pattern (diagonal + up to 6 off-diagonal per row), values of all magnitudes
     (subnormal to 1e300), -0 and 0 included: write_mtx then create_from_mtx must give back the same
     arrays, bit for bit */
  enum { N = 60, MAXNNZ = N * 7 };
  int64_t rp[N + 1], ci[MAXNNZ];
  double v[MAXNNZ];
  uint64_t seed = 4242;
  int64_t nnz = 0;
  rp[0] = 0;
  for (int64_t i = 0; i < N; i++) {
    int used[N] = {0};
    used[i] = 1;
    int extra = (int)((pk_test_rand(&seed) + 1) * 3.5);
    for (int e = 0; e < extra; e++) used[(int64_t)((pk_test_rand(&seed) + 1) * 0.5 * N) % N] = 1;
    for (int64_t j = 0; j < N; j++)
      if (used[j]) {
        ci[nnz] = j;
        v[nnz] = ldexp(pk_test_rand(&seed), (int)(pk_test_rand(&seed) * 1030) - 30);
        nnz++;
      }
    rp[i + 1] = nnz;
  }
  v[3] = -0.0, v[5] = 0.0, v[7] = 0.1, v[9] = DBL_MAX, v[11] = -DBL_TRUE_MIN, v[13] = 1.0 / 3.0;
  pkrylov_context ctx;
  pkrylov_operator A = NULL, B = NULL;
  PK_REQUIRE_OK(NULL, pkrylov_context_create(PKRYLOV_BACKEND_CPU, &ctx));
  PK_REQUIRE_OK(ctx, pkrylov_operator_create_csr64(ctx, N, 0, rp, ci, v, &A));
  char path[4096];
  snprintf(path, sizeof path, "%s", pk_test_tmp_path("roundtrip.mtx"));
  PK_REQUIRE_OK(ctx, pkrylov_operator_write_mtx(A, path));
  PK_REQUIRE_OK(ctx, pkrylov_operator_create_from_mtx(ctx, path, &B));
  int64_t n2, nnz2, rp2[N + 1], ci2[MAXNNZ];
  double v2[MAXNNZ];
  PK_REQUIRE_OK(ctx, pkrylov_operator_get_info(B, &n2, &nnz2, NULL, NULL, NULL, NULL));
  PK_EXPECT(n2 == N && nnz2 == nnz, "n %lld nnz %lld, expected %d %lld", (long long)n2, (long long)nnz2, N,
            (long long)nnz);
  if (n2 == N && nnz2 == nnz) {
    PK_REQUIRE_OK(ctx, pkrylov_operator_get_csr(B, rp2, ci2, v2));
    PK_EXPECT(memcmp(rp, rp2, sizeof rp) == 0, "row pointers differ");
    PK_EXPECT(memcmp(ci, ci2, sizeof(int64_t) * (size_t)nnz) == 0, "column indices differ");
    PK_EXPECT(memcmp(v, v2, sizeof(double) * (size_t)nnz) == 0, "values differ");
  }
  pkrylov_operator_destroy(&A);
  pkrylov_operator_destroy(&B);
  PK_EXPECT_CODE(ctx, pkrylov_context_destroy(&ctx), PKRYLOV_SUCCESS);
  PK_TEST_END();
}

PK_TEST_CASE(roundtrip_stencil) {
  /* a 3 x 2 x 4 column stencil written as CSR and read back: same CSR export */
  enum { NX = 3, NY = 2, NZ = 4, NC = NX * NY * NZ };
  double aW[NC], aS[NC], aV[NC], aC[NC];
  uint64_t seed = 7;
  for (int c = 0; c < NC; c++) {
    aW[c] = -1 - pk_test_rand(&seed) * 0.5, aS[c] = -1 + pk_test_rand(&seed) * 0.25;
    aV[c] = -10 * (1.5 + pk_test_rand(&seed)), aC[c] = 60 + pk_test_rand(&seed);
  }
  pkrylov_context ctx;
  pkrylov_operator A = NULL, B = NULL;
  PK_REQUIRE_OK(NULL, pkrylov_context_create(PKRYLOV_BACKEND_CPU, &ctx));
  PK_REQUIRE_OK(ctx, pkrylov_operator_create_stencil7(ctx, NX, NY, NZ, aW, aS, aV, aC, NULL, &A));
  char path[4096];
  snprintf(path, sizeof path, "%s", pk_test_tmp_path("stencil.mtx"));
  PK_REQUIRE_OK(ctx, pkrylov_operator_write_mtx(A, path));
  PK_REQUIRE_OK(ctx, pkrylov_operator_create_from_mtx(ctx, path, &B));
  int64_t na, nnza, nb, nnzb;
  PK_REQUIRE_OK(ctx, pkrylov_operator_get_info(A, &na, &nnza, NULL, NULL, NULL, NULL));
  PK_REQUIRE_OK(ctx, pkrylov_operator_get_info(B, &nb, &nnzb, NULL, NULL, NULL, NULL));
  /* 7-point couplings that exist: each cell, plus both directions of every interior face */
  int64_t faces = (int64_t)(NX - 1) * NY * NZ + (int64_t)NX * (NY - 1) * NZ + (int64_t)NX * NY * (NZ - 1);
  PK_EXPECT(na == NC && nb == NC && nnza == nnzb && nnzb == NC + 2 * faces, "n %lld/%lld nnz %lld/%lld",
            (long long)na, (long long)nb, (long long)nnza, (long long)nnzb);
  if (nnza == nnzb && nnza <= 7 * NC) {
    int64_t rpa[NC + 1], rpb[NC + 1], cia[7 * NC], cib[7 * NC];
    double va[7 * NC], vb[7 * NC];
    PK_REQUIRE_OK(ctx, pkrylov_operator_get_csr(A, rpa, cia, va));
    PK_REQUIRE_OK(ctx, pkrylov_operator_get_csr(B, rpb, cib, vb));
    PK_EXPECT(memcmp(rpa, rpb, sizeof rpa) == 0 && memcmp(cia, cib, sizeof(int64_t) * (size_t)nnza) == 0 &&
                  memcmp(va, vb, sizeof(double) * (size_t)nnza) == 0,
              "stencil export differs after the round trip");
  }
  pkrylov_operator_destroy(&A);
  pkrylov_operator_destroy(&B);
  PK_EXPECT_CODE(ctx, pkrylov_context_destroy(&ctx), PKRYLOV_SUCCESS);
  PK_TEST_END();
}

PK_TEST_CASE(write_mtx_format) {
  /* the exact text: banner, size line, 1-based entries with 17 significant digits */
  const int64_t rp[] = {0, 2, 3};
  const int64_t ci[] = {0, 1, 1};
  const double v[] = {0.1, -2, 3};
  const char *expect = "%%MatrixMarket matrix coordinate real general\n2 2 3\n1 1 0.10000000000000001\n"
                       "1 2 -2\n2 2 3\n";
  pkrylov_context ctx;
  pkrylov_operator A = NULL;
  PK_REQUIRE_OK(NULL, pkrylov_context_create(PKRYLOV_BACKEND_CPU, &ctx));
  PK_REQUIRE_OK(ctx, pkrylov_operator_create_csr64(ctx, 2, 0, rp, ci, v, &A));
  char path[4096], got[512] = {0};
  snprintf(path, sizeof path, "%s", pk_test_tmp_path("format.mtx"));
  PK_REQUIRE_OK(ctx, pkrylov_operator_write_mtx(A, path));
  FILE *f = fopen(path, "rb");
  PK_EXPECT(f != NULL, "cannot open %s", path);
  if (f) {
    size_t len = fread(got, 1, sizeof got - 1, f);
    got[len] = '\0';
    fclose(f);
  }
  PK_EXPECT(strcmp(got, expect) == 0, "file text:\n%s\nexpected:\n%s", got, expect);
  /* a folder that does not exist: FILE_IO naming the path */
  const char *bad = "/nonexistent-pkrylov-dir/out.mtx";
  PK_EXPECT(error_ok(ctx, pkrylov_operator_write_mtx(A, bad), PKRYLOV_ERR_FILE_IO, bad, 0, strerror(ENOENT)),
            "unwritable path");
  pkrylov_operator_destroy(&A);
  PK_EXPECT_CODE(ctx, pkrylov_context_destroy(&ctx), PKRYLOV_SUCCESS);
  PK_TEST_END();
}

/* ---- vectors ------------------------------------------------------------------------------------- */

PK_TEST_CASE(vector_roundtrip) {
  enum { N = 40 };
  double x[N], y[N];
  uint64_t seed = 99;
  for (int i = 0; i < N; i++) x[i] = ldexp(pk_test_rand(&seed), (int)(pk_test_rand(&seed) * 1030) - 30);
  x[0] = 0.1, x[1] = -0.0, x[2] = DBL_MAX, x[3] = -DBL_TRUE_MIN, x[4] = DBL_MIN, x[5] = 1.0 / 3.0, x[6] = 0;
  char path[4096];
  snprintf(path, sizeof path, "%s", pk_test_tmp_path("vector.mtx"));
  pkrylov_context ctx;
  PK_REQUIRE_OK(NULL, pkrylov_context_create(PKRYLOV_BACKEND_CPU, &ctx));
  PK_REQUIRE_OK(ctx, pkrylov_mtx_write_vector(ctx, path, N, x));
  int64_t n = 0;
  PK_REQUIRE_OK(ctx, pkrylov_mtx_read_vector(ctx, path, N, y, &n));
  PK_EXPECT(n == N, "n = %lld", (long long)n);
  PK_EXPECT(memcmp(x, y, sizeof x) == 0, "values differ after the round trip");
  /* the header lines as specified */
  char line1[128] = {0}, line2[128] = {0};
  FILE *f = fopen(path, "rb");
  if (f) {
    if (!fgets(line1, sizeof line1, f) || !fgets(line2, sizeof line2, f)) line1[0] = '\0';
    fclose(f);
  }
  PK_EXPECT(strcmp(line1, "%%MatrixMarket matrix array real general\n") == 0, "banner '%s'", line1);
  PK_EXPECT(strcmp(line2, "40 1\n") == 0, "size line '%s'", line2);
  PK_EXPECT_CODE(ctx, pkrylov_context_destroy(&ctx), PKRYLOV_SUCCESS);
  PK_TEST_END();
}

PK_TEST_CASE(vector_coordinate) {
  /* missing coordinate entries are zero; integer field accepted */
  char path[4096];
  double y[6];
  int64_t n = 0;
  PK_REQUIRE_OK(NULL, put_file("vcoord.mtx", "%%MatrixMarket matrix coordinate real general\n% c\n6 1 3\n"
                               "5 1 -1.5\n2 1 7\n\n6 1 1e-300\n", path));
  for (int i = 0; i < 6; i++) y[i] = 99;
  PK_REQUIRE_OK(NULL, pkrylov_mtx_read_vector(NULL, path, 6, y, &n));
  const double expect[6] = {0, 7, 0, 0, -1.5, 1e-300};
  PK_EXPECT(n == 6, "n = %lld", (long long)n);
  for (int i = 0; i < 6; i++) PK_EXPECT(same_bits(y[i], expect[i]), "y[%d] = %.17g", i, y[i]);
  PK_REQUIRE_OK(NULL, put_file("vint.mtx", "%%MatrixMarket matrix array integer general\r\n3 1\r\n-4\r\n"
                               "0\r\n17\r\n", path));
  PK_REQUIRE_OK(NULL, pkrylov_mtx_read_vector(NULL, path, 6, y, &n));
  PK_EXPECT(n == 3 && y[0] == -4 && y[1] == 0 && y[2] == 17, "integer array vector: n %lld, %g %g %g",
            (long long)n, y[0], y[1], y[2]);
  PK_TEST_END();
}

PK_TEST_CASE(vector_length_query) {
  char path[4096];
  int64_t n = 0;
  PK_REQUIRE_OK(NULL, put_file("vquery.mtx", "%%MatrixMarket matrix array real general\n5 1\n1\n2\n3\n4\n5\n",
                               path));
  PK_REQUIRE_OK(NULL, pkrylov_mtx_read_vector(NULL, path, 0, NULL, &n));
  PK_EXPECT(n == 5, "array: n = %lld", (long long)n);
  PK_REQUIRE_OK(NULL, put_file("vquery2.mtx", "%%MatrixMarket matrix coordinate real general\n9 1 1\n3 1 2\n",
                               path));
  n = 0;
  PK_REQUIRE_OK(NULL, pkrylov_mtx_read_vector(NULL, path, -1, NULL, &n));
  PK_EXPECT(n == 9, "coordinate: n = %lld", (long long)n);
  PK_TEST_END();
}

PK_TEST_CASE(vector_capacity) {
  char path[4096];
  double y[4] = {11, 12, 13, 14};
  int64_t n = -1;
  pkrylov_context ctx;
  PK_REQUIRE_OK(NULL, pkrylov_context_create(PKRYLOV_BACKEND_CPU, &ctx));
  PK_REQUIRE_OK(NULL, put_file("vcap.mtx", "%%MatrixMarket matrix array real general\n5 1\n1\n2\n3\n4\n5\n",
                               path));
  PK_EXPECT_CODE(ctx, pkrylov_mtx_read_vector(ctx, path, 4, y, &n), PKRYLOV_ERR_SIZE_MISMATCH);
  PK_EXPECT(strstr(last_msg(ctx), "'capacity'") != NULL, "message: %s", last_msg(ctx));
  PK_EXPECT(n == -1 && y[0] == 11 && y[3] == 14, "outputs modified on error");
  PK_EXPECT_CODE(ctx, pkrylov_context_destroy(&ctx), PKRYLOV_SUCCESS);
  PK_TEST_END();
}

PK_TEST_CASE(vector_errors) {
  const char *arr = "%%MatrixMarket matrix array real general\n";
  char text[512];
  snprintf(text, sizeof text, "%s3 1\n1\n2\n", arr);
  PK_EXPECT(vec_fails("v_trunc.mtx", text, PKRYLOV_ERR_FILE_FORMAT, 4, "expected 3"), "truncated");
  snprintf(text, sizeof text, "%s2 1\n1\n2\n3\n", arr);
  PK_EXPECT(vec_fails("v_many.mtx", text, PKRYLOV_ERR_FILE_FORMAT, 5, NULL), "too many values");
  snprintf(text, sizeof text, "%s2 1\n1 2\n2\n", arr);
  PK_EXPECT(vec_fails("v_two.mtx", text, PKRYLOV_ERR_FILE_FORMAT, 3, NULL), "two values on a line");
  snprintf(text, sizeof text, "%s2 1\n1\ninf\n", arr);
  PK_EXPECT(vec_fails("v_inf.mtx", text, PKRYLOV_ERR_NOT_FINITE, 4, "inf"), "inf");
  snprintf(text, sizeof text, "%s2 2\n1\n2\n3\n4\n", arr);
  PK_EXPECT(vec_fails("v_cols.mtx", text, PKRYLOV_ERR_SIZE_MISMATCH, 2, "2 x 2"), "two columns");
  PK_EXPECT(vec_fails("v_dup.mtx", "%%MatrixMarket matrix coordinate real general\n4 1 2\n3 1 1\n3 1 2\n",
                      PKRYLOV_ERR_DUPLICATE_ENTRY, 4, "lines 3 and 4"),
            "duplicate coordinate entry");
  PK_EXPECT(vec_fails("v_col2.mtx", "%%MatrixMarket matrix coordinate real general\n4 1 1\n3 2 1\n",
                      PKRYLOV_ERR_FILE_FORMAT, 3, "column index 2"),
            "column index 2 in a vector");
  PK_EXPECT(vec_fails("v_sym.mtx", "%%MatrixMarket matrix array real symmetric\n1 1\n1\n",
                      PKRYLOV_ERR_UNSUPPORTED, 1, "symmetric"),
            "symmetric vector");
  PK_EXPECT(vec_fails("v_cplx.mtx", "%%MatrixMarket matrix array complex general\n1 1\n1 0\n",
                      PKRYLOV_ERR_UNSUPPORTED, 1, "complex"),
            "complex vector");
  /* NULL arguments and a missing file */
  int64_t n;
  PK_EXPECT_CODE(NULL, pkrylov_mtx_read_vector(NULL, NULL, 0, NULL, &n), PKRYLOV_ERR_NULL_POINTER);
  PK_EXPECT(strstr(pkrylov_last_error_message(), "'path'") != NULL, "%s", pkrylov_last_error_message());
  PK_EXPECT_CODE(NULL, pkrylov_mtx_read_vector(NULL, "x.mtx", 0, NULL, NULL), PKRYLOV_ERR_NULL_POINTER);
  PK_EXPECT(strstr(pkrylov_last_error_message(), "'n'") != NULL, "%s", pkrylov_last_error_message());
  const char *missing = pk_test_tmp_path("no-such-vector.mtx");
  PK_EXPECT(error_ok(NULL, pkrylov_mtx_read_vector(NULL, missing, 0, NULL, &n), PKRYLOV_ERR_FILE_IO, missing,
                     0, strerror(ENOENT)),
            "missing vector file");
  /* writer arguments */
  double x[2] = {1, NAN};
  char path[4096];
  snprintf(path, sizeof path, "%s", pk_test_tmp_path("v_bad_write.mtx"));
  PK_EXPECT_CODE(NULL, pkrylov_mtx_write_vector(NULL, path, 0, x), PKRYLOV_ERR_INVALID_SIZE);
  PK_EXPECT(strstr(pkrylov_last_error_message(), "'n'") != NULL, "%s", pkrylov_last_error_message());
  PK_EXPECT_CODE(NULL, pkrylov_mtx_write_vector(NULL, path, 2, NULL), PKRYLOV_ERR_NULL_POINTER);
  PK_EXPECT_CODE(NULL, pkrylov_mtx_write_vector(NULL, NULL, 2, x), PKRYLOV_ERR_NULL_POINTER);
  PK_EXPECT_CODE(NULL, pkrylov_mtx_write_vector(NULL, path, 2, x), PKRYLOV_ERR_NOT_FINITE);
  PK_EXPECT(strstr(pkrylov_last_error_message(), "index 1") != NULL, "%s", pkrylov_last_error_message());
  PK_TEST_END();
}

/* ---- the shared matrices ------------------------------------------------------------------------- */

/** Independent check of one shared file: a plain fgets/sscanf pass over the file finds every entry
 *  (and its mirror for symmetric files) in the CSR export with the same value; returns entries seen. */
static int64_t naive_check(const char *path, const int64_t *rp, const int64_t *ci, const double *v,
                           int64_t *mismatches) {
  FILE *f = fopen(path, "r");
  if (!f) return -1;
  char line[1024];
  int symmetric = 0, have_size = 0;
  int64_t seen = 0;
  if (fgets(line, sizeof line, f)) symmetric = strstr(line, " symmetric") != NULL;
  while (fgets(line, sizeof line, f)) {
    if (line[0] == '%') continue;
    long long i, j;
    double x;
    if (!have_size) {
      have_size = 1;
      continue;
    }
    if (sscanf(line, "%lld %lld %lf", &i, &j, &x) != 3) continue;
    for (int m = 0; m < (symmetric && i != j ? 2 : 1); m++) {
      int64_t r = (m ? j : i) - 1, c = (m ? i : j) - 1, lo = rp[r], hi = rp[r + 1] - 1;
      while (lo <= hi) { /* binary search of column c in row r */
        int64_t mid = (lo + hi) / 2;
        if (ci[mid] == c) break;
        if (ci[mid] < c) lo = mid + 1;
        else hi = mid - 1;
      }
      if (lo > hi || !same_bits(v[(lo + hi) / 2], x)) (*mismatches)++;
      seen++;
    }
  }
  fclose(f);
  return seen;
}

PK_TEST_CASE(shared_matrices) {
  /* n and expanded nnz copied from /work/shared/matrices/MANIFEST.md */
  static const struct {
    const char *file;
    int64_t n, nnz_stored, nnz_expanded;
  } table[] = {
      {"lap3D_7pt_n20.mtx", 8000, 30800, 53600}, {"lap2D_5pt_n100.mtx", 10000, 29800, 49600},
      {"gr_900_900_crg.mtx", 900, 4322, 7744},   {"ani4.mtx", 3081, 20971, 20971},
      {"ani1.mtx", 36, 208, 208},                {"1138_bus.mtx", 1138, 2596, 4054},
      {"sherman3.mtx", 5005, 20033, 20033},      {"orsirr_2.mtx", 886, 5970, 5970},
      {"ani1_nonsymm.mtx", 36, 238, 238},        {"pores_1.mtx", 30, 180, 180},
  };
  if (!pk_test_matrix_path("ani1.mtx")) return PK_SKIP;
  pkrylov_context ctx;
  PK_REQUIRE_OK(NULL, pkrylov_context_create(PKRYLOV_BACKEND_CPU, &ctx));
  for (size_t t = 0; t < sizeof table / sizeof table[0]; t++) {
    char path[4096];
    const char *p = pk_test_matrix_path(table[t].file);
    PK_EXPECT(p != NULL, "%s missing", table[t].file);
    if (!p) continue;
    snprintf(path, sizeof path, "%s", p);
    pkrylov_operator A = NULL;
    int rc = pkrylov_operator_create_from_mtx(ctx, path, &A);
    PK_EXPECT(rc == PKRYLOV_SUCCESS, "%s: %d %s", table[t].file, rc, last_msg(ctx));
    if (rc) continue;
    int64_t n = 0, nnz = 0;
    pkrylov_operator_get_info(A, &n, &nnz, NULL, NULL, NULL, NULL);
    PK_EXPECT(n == table[t].n && nnz == table[t].nnz_expanded, "%s: n %lld nnz %lld, expected %lld %lld",
              table[t].file, (long long)n, (long long)nnz, (long long)table[t].n,
              (long long)table[t].nnz_expanded);
    int64_t *rp = malloc(sizeof(int64_t) * (size_t)(n + 1)), *ci = malloc(sizeof(int64_t) * (size_t)nnz);
    double *v = malloc(sizeof(double) * (size_t)nnz);
    if (rp && ci && v && pkrylov_operator_get_csr(A, rp, ci, v) == PKRYLOV_SUCCESS) {
      int64_t mism = 0, seen = naive_check(path, rp, ci, v, &mism);
      PK_EXPECT(seen == table[t].nnz_expanded && mism == 0,
                "%s: sscanf pass saw %lld entries, %lld mismatches", table[t].file, (long long)seen,
                (long long)mism);
    } else {
      PK_EXPECT(0, "%s: CSR export failed", table[t].file);
    }
    free(rp), free(ci), free(v);
    pkrylov_operator_destroy(&A);
  }
  PK_EXPECT_CODE(ctx, pkrylov_context_destroy(&ctx), PKRYLOV_SUCCESS);
  PK_TEST_END();
}

/* ---- malformed files ------------------------------------------------------------------------------ */

#define BANNER "%%MatrixMarket matrix coordinate real general\n"

PK_TEST_CASE(bad_missing_banner) {
  PK_EXPECT(mtx_fails("nobanner.mtx", "% just a comment\n3 3 1\n1 1 1\n", PKRYLOV_ERR_FILE_FORMAT, 1,
                      "banner"),
            "comment instead of the banner");
  PK_EXPECT(mtx_fails("nobanner2.mtx", "3 3 1\n1 1 1\n", PKRYLOV_ERR_FILE_FORMAT, 1, "banner"), "no banner");
  PK_EXPECT(mtx_fails("empty.mtx", "", PKRYLOV_ERR_FILE_FORMAT, 1, "empty"), "empty file");
  PK_EXPECT(mtx_fails("blank1.mtx", "\n" BANNER "1 1 1\n1 1 1\n", PKRYLOV_ERR_FILE_FORMAT, 1, "banner"),
            "blank line before the banner");
  PK_TEST_END();
}

PK_TEST_CASE(bad_banner) {
  PK_EXPECT(mtx_fails("b_vector.mtx", "%%MatrixMarket vector coordinate real general\n1 1 1\n1 1 1\n",
                      PKRYLOV_ERR_FILE_FORMAT, 1, "'vector'"),
            "object vector");
  PK_EXPECT(mtx_fails("b_short.mtx", "%%MatrixMarket matrix coordinate real\n1 1 1\n1 1 1\n",
                      PKRYLOV_ERR_FILE_FORMAT, 1, NULL),
            "4 tokens");
  PK_EXPECT(mtx_fails("b_long.mtx", "%%MatrixMarket matrix coordinate real general extra\n1 1 1\n1 1 1\n",
                      PKRYLOV_ERR_FILE_FORMAT, 1, NULL),
            "6 tokens");
  PK_EXPECT(mtx_fails("b_format.mtx", "%%MatrixMarket matrix sparse real general\n1 1 1\n1 1 1\n",
                      PKRYLOV_ERR_FILE_FORMAT, 1, "'sparse'"),
            "format sparse");
  PK_EXPECT(mtx_fails("b_field.mtx", "%%MatrixMarket matrix coordinate double general\n1 1 1\n1 1 1\n",
                      PKRYLOV_ERR_FILE_FORMAT, 1, "'double'"),
            "field double");
  PK_EXPECT(mtx_fails("b_sym.mtx", "%%MatrixMarket matrix coordinate real diagonal\n1 1 1\n1 1 1\n",
                      PKRYLOV_ERR_FILE_FORMAT, 1, "'diagonal'"),
            "symmetry diagonal");
  PK_EXPECT(mtx_fails("b_parray.mtx", "%%MatrixMarket matrix array pattern general\n1 1\n1\n",
                      PKRYLOV_ERR_FILE_FORMAT, 1, "pattern"),
            "pattern array");
  PK_TEST_END();
}

PK_TEST_CASE(bad_unsupported) {
  PK_EXPECT(mtx_fails("u_complex.mtx", "%%MatrixMarket matrix coordinate complex general\n1 1 1\n1 1 1 0\n",
                      PKRYLOV_ERR_UNSUPPORTED, 1, "complex"),
            "complex");
  PK_EXPECT(mtx_fails("u_herm.mtx", "%%MatrixMarket matrix coordinate real hermitian\n1 1 1\n1 1 1\n",
                      PKRYLOV_ERR_UNSUPPORTED, 1, "hermitian"),
            "hermitian");
  PK_EXPECT(mtx_fails("u_skew.mtx", "%%MatrixMarket matrix coordinate real skew-symmetric\n2 2 1\n2 1 1\n",
                      PKRYLOV_ERR_UNSUPPORTED, 1, "skew-symmetric"),
            "skew-symmetric");
  PK_EXPECT(mtx_fails("u_array.mtx", "%%MatrixMarket matrix array real general\n2 2\n1\n0\n0\n1\n",
                      PKRYLOV_ERR_UNSUPPORTED, 1, "array"),
            "dense array matrix for an operator");
  PK_TEST_END();
}

PK_TEST_CASE(bad_size_line) {
  PK_EXPECT(mtx_fails("s_word.mtx", BANNER "% comment\n3 x 2\n1 1 1\n", PKRYLOV_ERR_FILE_FORMAT, 3, "'x'"),
            "non-numeric size");
  PK_EXPECT(mtx_fails("s_two.mtx", BANNER "\n3 3\n1 1 1\n", PKRYLOV_ERR_FILE_FORMAT, 3, NULL),
            "missing NNZ");
  PK_EXPECT(mtx_fails("s_four.mtx", BANNER "3 3 1 1\n1 1 1\n", PKRYLOV_ERR_FILE_FORMAT, 2, NULL),
            "extra token");
  PK_EXPECT(mtx_fails("s_neg.mtx", BANNER "-3 -3 1\n1 1 1\n", PKRYLOV_ERR_FILE_FORMAT, 2, "-3"),
            "negative size");
  PK_EXPECT(mtx_fails("s_zero.mtx", BANNER "0 0 0\n", PKRYLOV_ERR_FILE_FORMAT, 2, NULL), "zero size");
  PK_EXPECT(mtx_fails("s_negnnz.mtx", BANNER "3 3 -1\n", PKRYLOV_ERR_FILE_FORMAT, 2, "-1"), "negative NNZ");
  PK_EXPECT(mtx_fails("s_toomany.mtx", BANNER "2 2 5\n", PKRYLOV_ERR_FILE_FORMAT, 2, NULL), "NNZ > M*N");
  PK_EXPECT(mtx_fails("s_float.mtx", BANNER "3.0 3 1\n1 1 1\n", PKRYLOV_ERR_FILE_FORMAT, 2, "'3.0'"),
            "real-valued size");
  PK_EXPECT(mtx_fails("s_huge.mtx", BANNER "99999999999999999999 3 1\n1 1 1\n", PKRYLOV_ERR_FILE_FORMAT, 2,
                      "out of range"),
            "size beyond int64");
  PK_EXPECT(mtx_fails("s_eof.mtx", BANNER "% only comments\n\n", PKRYLOV_ERR_FILE_FORMAT, 3, "size line"),
            "no size line");
  PK_TEST_END();
}

PK_TEST_CASE(bad_truncated) {
  /* 3 entries declared, 2 present: the message names the last line and both counts */
  PK_EXPECT(mtx_fails("t_trunc.mtx", BANNER "3 3 3\n1 1 1\n2 2 1\n", PKRYLOV_ERR_FILE_FORMAT, 4,
                      "expected 3 entries"),
            "truncated");
  PK_EXPECT(mtx_fails("t_trunc2.mtx", BANNER "3 3 3\n1 1 1\n2 2 1\n% comment\n", PKRYLOV_ERR_FILE_FORMAT, 5,
                      "found 2"),
            "truncated, comment at the end");
  PK_EXPECT(mtx_fails("t_trunc3.mtx", BANNER "1 1 1\n", PKRYLOV_ERR_FILE_FORMAT, 2, "found 0"),
            "no entries at all");
  PK_TEST_END();
}

PK_TEST_CASE(bad_too_many) {
  PK_EXPECT(mtx_fails("m_many.mtx", BANNER "2 2 2\n1 1 1\n2 2 1\n\n2 1 1\n", PKRYLOV_ERR_FILE_FORMAT, 6,
                      "more entries"),
            "one entry too many");
  PK_EXPECT(mtx_fails("m_junk.mtx", BANNER "2 2 2\n1 1 1\n2 2 1\n% ok\nend\n", PKRYLOV_ERR_FILE_FORMAT, 6,
                      NULL),
            "text after the last entry");
  PK_TEST_END();
}

PK_TEST_CASE(bad_index_range) {
  PK_EXPECT(mtx_fails("i_row0.mtx", BANNER "2 2 2\n1 1 1\n0 2 1\n", PKRYLOV_ERR_FILE_FORMAT, 4,
                      "row index 0"),
            "row 0");
  PK_EXPECT(mtx_fails("i_rowM1.mtx", BANNER "3 3 3\n4 1 1\n1 1 1\n2 2 1\n", PKRYLOV_ERR_FILE_FORMAT, 3,
                      "row index 4"),
            "row M+1");
  PK_EXPECT(mtx_fails("i_col0.mtx", BANNER "2 2 2\n1 1 1\n2 0 1\n", PKRYLOV_ERR_FILE_FORMAT, 4,
                      "column index 0"),
            "column 0");
  PK_EXPECT(mtx_fails("i_colN1.mtx", BANNER "%c\n3 3 3\n1 1 1\n\n2 4 1\n", PKRYLOV_ERR_FILE_FORMAT, 6,
                      "column index 4"),
            "column N+1");
  PK_EXPECT(mtx_fails("i_neg.mtx", BANNER "1 1 1\n-1 1 1\n", PKRYLOV_ERR_FILE_FORMAT, 3, "row index -1"),
            "negative row");
  PK_TEST_END();
}

PK_TEST_CASE(bad_value) {
  PK_EXPECT(mtx_fails("v_abc.mtx", BANNER "2 2 2\n1 1 1\n2 2 abc\n", PKRYLOV_ERR_FILE_FORMAT, 4, "'abc'"),
            "non-numeric value");
  PK_EXPECT(mtx_fails("v_noval.mtx", BANNER "2 2 2\n1 1 1\n2 2\n", PKRYLOV_ERR_FILE_FORMAT, 4, NULL),
            "missing value");
  PK_EXPECT(mtx_fails("v_4tok.mtx", BANNER "2 2 2\n1 1 1 0\n2 2 1\n", PKRYLOV_ERR_FILE_FORMAT, 3, NULL),
            "complex-like entry in a real file");
  PK_EXPECT(mtx_fails("v_intfrac.mtx", "%%MatrixMarket matrix coordinate integer general\n1 1 1\n1 1 1.5\n",
                      PKRYLOV_ERR_FILE_FORMAT, 3, "'1.5'"),
            "fraction in an integer file");
  PK_EXPECT(mtx_fails("v_pat3.mtx", "%%MatrixMarket matrix coordinate pattern general\n1 1 1\n1 1 1\n",
                      PKRYLOV_ERR_FILE_FORMAT, 3, NULL),
            "value in a pattern file");
  PK_EXPECT(mtx_fails("v_rowword.mtx", BANNER "1 1 1\nfirst 1 1\n", PKRYLOV_ERR_FILE_FORMAT, 3, "'first'"),
            "non-numeric row index");
  PK_TEST_END();
}

PK_TEST_CASE(bad_token_12abc) {
  PK_EXPECT(mtx_fails("x_size.mtx", BANNER "12abc 12 1\n1 1 1\n", PKRYLOV_ERR_FILE_FORMAT, 2, "'12abc'"),
            "12abc in the size line");
  PK_EXPECT(mtx_fails("x_index.mtx", BANNER "2 2 2\n1 1 1\n12abc 1 1\n", PKRYLOV_ERR_FILE_FORMAT, 4,
                      "'12abc'"),
            "12abc as a row index");
  PK_EXPECT(mtx_fails("x_value.mtx", BANNER "20 20 20\n\n12 1 1.0x\n", PKRYLOV_ERR_FILE_FORMAT, 4, "'1.0x'"),
            "1.0x as a value");
  PK_TEST_END();
}

PK_TEST_CASE(bad_symmetric_upper) {
  PK_EXPECT(mtx_fails("y_upper.mtx",
                      "%%MatrixMarket matrix coordinate real symmetric\n3 3 3\n1 1 2\n2 1 -1\n1 3 -1\n",
                      PKRYLOV_ERR_FILE_FORMAT, 5, "upper triangle"),
            "upper-triangle entry");
  PK_EXPECT(mtx_fails("y_rect.mtx", "%%MatrixMarket matrix coordinate real symmetric\n3 4 1\n1 1 2\n",
                      PKRYLOV_ERR_FILE_FORMAT, 2, "square"),
            "rectangular symmetric");
  PK_TEST_END();
}

PK_TEST_CASE(bad_duplicate) {
  PK_EXPECT(mtx_fails("d_gen.mtx", BANNER "3 3 4\n2 1 5\n1 1 1\n% c\n2 1 6\n3 3 1\n",
                      PKRYLOV_ERR_DUPLICATE_ENTRY, 6, "lines 3 and 6"),
            "duplicate in a general file");
  PK_EXPECT(mtx_fails("d_sym.mtx", "%%MatrixMarket matrix coordinate real symmetric\n3 3 3\n3 2 1\n1 1 1\n"
                      "3 2 1\n",
                      PKRYLOV_ERR_DUPLICATE_ENTRY, 5, "lines 3 and 5"),
            "duplicate in a symmetric file");
  PK_EXPECT(mtx_fails("d_diag.mtx", BANNER "2 2 3\n2 2 1\n1 1 1\n2 2 2\n",
                      PKRYLOV_ERR_DUPLICATE_ENTRY, 5, "lines 3 and 5"),
            "duplicate diagonal entry");
  PK_TEST_END();
}

PK_TEST_CASE(bad_not_finite) {
  PK_EXPECT(mtx_fails("n_nan.mtx", BANNER "2 2 2\n1 1 1\n2 2 nan\n", PKRYLOV_ERR_NOT_FINITE, 4, "'nan'"),
            "nan");
  PK_EXPECT(mtx_fails("n_inf.mtx", BANNER "2 2 2\n1 1 -Inf\n2 2 1\n", PKRYLOV_ERR_NOT_FINITE, 3, "'-Inf'"),
            "-Inf");
  PK_EXPECT(mtx_fails("n_ovf.mtx", BANNER "1 1 1\n\n1 1 1e999\n", PKRYLOV_ERR_NOT_FINITE, 4, "'1e999'"),
            "overflow to Inf");
  PK_TEST_END();
}

PK_TEST_CASE(bad_nonsquare) {
  PK_EXPECT(mtx_fails("q_rect.mtx", BANNER "3 4 2\n1 1 1\n3 4 1\n", PKRYLOV_ERR_SIZE_MISMATCH, 2, "3 x 4"),
            "3 x 4 for an operator");
  PK_TEST_END();
}

/**
 * Issue 14 item 16: a header whose entry count cannot give every row an entry (NNZ < M; NNZ < M/2 in a
 * symmetric file, whose off-diagonal entries cover two rows) is refused at the size line, before anything of
 * size M is allocated. The shortest symmetric file that can cover every row still reads.
 */
PK_TEST_CASE(bad_rows_without_entries) {
  PK_EXPECT(mtx_fails("r_gen.mtx", BANNER "5 5 4\n1 1 1\n2 2 1\n3 3 1\n4 4 1\n", PKRYLOV_ERR_FILE_FORMAT, 2,
                      "each of the M = 5 rows"),
            "general: 4 entries for 5 rows");
  PK_EXPECT(mtx_fails("r_sym.mtx",
                      "%%MatrixMarket matrix coordinate real symmetric\n% c\n5 5 2\n2 1 1\n4 3 1\n",
                      PKRYLOV_ERR_FILE_FORMAT, 3, "M/2"),
            "symmetric: 2 entries for 5 rows");
  const int64_t ti[] = {2, 4, 5}, tj[] = {1, 3, 5};
  const double tv[] = {1, -2, 3};
  PK_EXPECT(mtx_reads("r_sym3.mtx",
                      "%%MatrixMarket matrix coordinate real symmetric\n5 5 3\n2 1 1\n4 3 -2\n5 5 3\n", 5, 3,
                      ti, tj, tv, 1),
            "symmetric: 3 entries cover 5 rows");
  PK_TEST_END();
}

/** The child of huge_header_small_memory: read path under a limit on its address space; 0 when refused. */
static int huge_header_child(const char *path, int limit) {
#ifndef __SANITIZE_ADDRESS__ /* ASan reserves terabytes of address space: no limit there */
  if (limit) {
    long pages = 0;
    FILE *f = fopen("/proc/self/statm", "r");
    if (!f || fscanf(f, "%ld", &pages) != 1) return 2;
    fclose(f);
    const rlim_t room = (rlim_t)pages * (rlim_t)sysconf(_SC_PAGESIZE) + ((rlim_t)256 << 20);
    const struct rlimit rl = {room, room};
    if (setrlimit(RLIMIT_AS, &rl)) return 2;
  }
#else
  (void)limit;
#endif
  pkrylov_context ctx;
  pkrylov_operator A = NULL;
  if (pkrylov_context_create(PKRYLOV_BACKEND_CPU, &ctx)) return 2;
  const int got = pkrylov_operator_create_from_mtx(ctx, path, &A);
  int ok = error_ok(ctx, got, PKRYLOV_ERR_FILE_FORMAT, path, 2, "M = 200000000 rows") && A == NULL;
  /* a coordinate vector of 1e10 rows with two entries (missing entries are zero): its length, read without
     allocating anything of that length (found by fuzzing: the reader allocated 80 GB to find repeats) */
  char vpath[4096];
  int64_t n = 0;
  ok = ok && put_file("r_hugevec.mtx", BANNER "10000000000 1 2\n7 1 1.5\n9999999999 1 -2\n", vpath) == 0 &&
       pkrylov_mtx_read_vector(ctx, vpath, 0, NULL, &n) == PKRYLOV_SUCCESS && n == 10000000000LL;
  pkrylov_context_destroy(&ctx);
  return ok ? 0 : 1;
}

/**
 * Issue 14 item 16 as found by fuzzing: an 80-byte file declaring a 2e8 x 2e8 matrix with two entries drove
 * the reader to 3.1 GB before it failed. Now it fails at the size line within 256 MB more than the process
 * already maps and within a few seconds (a forked child under RLIMIT_AS and alarm); so does the length of a
 * coordinate vector declaring 1e10 rows with two entries (the fuzzer's find: 80 GB asked for).
 */
PK_TEST_CASE(huge_header_small_memory) {
  char path[4096];
  PK_REQUIRE(put_file("r_huge.mtx", BANNER "200000000 200000000 2\n1 1 1\n2 2 1\n", path) == 0, "write");
  fflush(stderr);
  const pid_t pid = fork();
  PK_REQUIRE(pid >= 0, "fork");
  if (pid == 0) {
    alarm(20);
    _exit(huge_header_child(path, 1));
  }
  int status = 0;
  PK_REQUIRE(waitpid(pid, &status, 0) == pid, "waitpid");
  PK_EXPECT(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child: %s %d",
            WIFEXITED(status) ? "exit status" : "signal",
            WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status));
  PK_TEST_END();
}

PK_TEST_CASE(bad_missing_file) {
  pkrylov_context ctx;
  pkrylov_operator A = NULL;
  PK_REQUIRE_OK(NULL, pkrylov_context_create(PKRYLOV_BACKEND_CPU, &ctx));
  char path[4096];
  snprintf(path, sizeof path, "%s", pk_test_tmp_path("does-not-exist.mtx"));
  PK_EXPECT(error_ok(ctx, pkrylov_operator_create_from_mtx(ctx, path, &A), PKRYLOV_ERR_FILE_IO, path, 0,
                     strerror(ENOENT)),
            "missing file");
  PK_EXPECT(A == NULL, "A modified");
  PK_EXPECT_CODE(ctx, pkrylov_context_destroy(&ctx), PKRYLOV_SUCCESS);
  PK_TEST_END();
}

PK_TEST_CASE(null_arguments) {
  pkrylov_context ctx;
  pkrylov_operator A = NULL;
  PK_REQUIRE_OK(NULL, pkrylov_context_create(PKRYLOV_BACKEND_CPU, &ctx));
  PK_EXPECT_CODE(NULL, pkrylov_operator_create_from_mtx(NULL, "x.mtx", &A), PKRYLOV_ERR_NULL_POINTER);
  PK_EXPECT(strstr(pkrylov_last_error_message(), "'ctx'") != NULL, "%s", pkrylov_last_error_message());
  PK_EXPECT_CODE(ctx, pkrylov_operator_create_from_mtx(ctx, NULL, &A), PKRYLOV_ERR_NULL_POINTER);
  PK_EXPECT(strstr(last_msg(ctx), "'path'") != NULL, "%s", last_msg(ctx));
  PK_EXPECT_CODE(ctx, pkrylov_operator_create_from_mtx(ctx, "x.mtx", NULL), PKRYLOV_ERR_NULL_POINTER);
  PK_EXPECT(strstr(last_msg(ctx), "'A'") != NULL, "%s", last_msg(ctx));
  PK_EXPECT_CODE(NULL, pkrylov_operator_write_mtx(NULL, "x.mtx"), PKRYLOV_ERR_NULL_POINTER);
  PK_EXPECT(strstr(pkrylov_last_error_message(), "'A'") != NULL, "%s", pkrylov_last_error_message());
  const int64_t rp[] = {0, 1}, ci[] = {0};
  const double v[] = {1};
  PK_REQUIRE_OK(ctx, pkrylov_operator_create_csr64(ctx, 1, 0, rp, ci, v, &A));
  PK_EXPECT_CODE(ctx, pkrylov_operator_write_mtx(A, NULL), PKRYLOV_ERR_NULL_POINTER);
  PK_EXPECT(strstr(last_msg(ctx), "'path'") != NULL, "%s", last_msg(ctx));
  pkrylov_operator_destroy(&A);
  PK_EXPECT_CODE(ctx, pkrylov_context_destroy(&ctx), PKRYLOV_SUCCESS);
  PK_TEST_END();
}

PK_TEST_MAIN(PK_TEST_ENTRY(bad_rows_without_entries), PK_TEST_ENTRY(huge_header_small_memory),
             PK_TEST_ENTRY(read_general), PK_TEST_ENTRY(read_symmetric), PK_TEST_ENTRY(read_pattern),
             PK_TEST_ENTRY(read_integer), PK_TEST_ENTRY(read_comments_blank), PK_TEST_ENTRY(read_crlf),
             PK_TEST_ENTRY(roundtrip_matrix), PK_TEST_ENTRY(roundtrip_stencil),
             PK_TEST_ENTRY(write_mtx_format),
             PK_TEST_ENTRY(vector_roundtrip), PK_TEST_ENTRY(vector_coordinate),
             PK_TEST_ENTRY(vector_length_query), PK_TEST_ENTRY(vector_capacity), PK_TEST_ENTRY(vector_errors),
             PK_TEST_ENTRY(shared_matrices), PK_TEST_ENTRY(bad_missing_banner), PK_TEST_ENTRY(bad_banner),
             PK_TEST_ENTRY(bad_unsupported), PK_TEST_ENTRY(bad_size_line), PK_TEST_ENTRY(bad_truncated),
             PK_TEST_ENTRY(bad_too_many), PK_TEST_ENTRY(bad_index_range), PK_TEST_ENTRY(bad_value),
             PK_TEST_ENTRY(bad_token_12abc), PK_TEST_ENTRY(bad_symmetric_upper), PK_TEST_ENTRY(bad_duplicate),
             PK_TEST_ENTRY(bad_not_finite), PK_TEST_ENTRY(bad_nonsquare), PK_TEST_ENTRY(bad_missing_file),
             PK_TEST_ENTRY(null_arguments))

/**
 * @file mmio.c
 * @brief Matrix Market reader and writer: square sparse matrices into CSR operators, and vectors.
 *
 * The reader is line based (getline, any line length). Lines are counted from 1; comment lines (first
 * non-blank character '%') and blank lines are skipped after the banner; CR counts as white space, so
 * CRLF files read like LF files. Every number is checked as a whole token ("12abc" is rejected).
 *
 * Errors: every malformed file gives ::PKRYLOV_ERR_FILE_FORMAT with a message "PATH:LINE: what is wrong",
 * except NaN/Inf values (::PKRYLOV_ERR_NOT_FINITE), repeated entries (::PKRYLOV_ERR_DUPLICATE_ENTRY,
 * naming both lines), qualifiers the library does not handle (complex, hermitian, skew-symmetric, dense
 * matrices: ::PKRYLOV_ERR_UNSUPPORTED) and size disagreements with the caller (non-square operator, vector
 * capacity: ::PKRYLOV_ERR_SIZE_MISMATCH). Every error path frees what it allocated. A matrix whose size line
 * declares fewer entries than can give every row one is refused there (::PKRYLOV_ERR_FILE_FORMAT), before
 * anything of size M is allocated, so memory follows the length of the file, not what its header claims.
 *
 * Speed: entries are kept in a growing array (doubling, bounded by the declared count), bucketed into
 * rows by a counting sort and sorted by column within each row (insertion sort for short or almost
 * sorted rows, qsort otherwise), so a file of 10^7 entries costs O(nnz log(row length)) after parsing.
 */
#define _POSIX_C_SOURCE 200809L /* getline */

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>

#include "pk_impl.h"

/** Tokens kept per line (the banner has 5; more are only counted). */
#define MM_MAXTOK 8
/** Rows up to this length are sorted by insertion. */
#define MM_INSERTION_MAX 32

enum { MM_COORDINATE = 1, MM_ARRAY = 2 };
enum { MM_REAL = 1, MM_INTEGER = 2, MM_PATTERN = 3 };

/** State of one file being read: the stream, the current line and its tokens, the header. */
typedef struct {
  pkrylov_context ctx; /* receives the errors (may be NULL) */
  const char *func;    /* public function named in the messages */
  const char *path;
  FILE *f;
  char *buf;           /* current line (getline buffer) */
  size_t cap;
  int64_t line;        /* number of the line in buf, from 1 */
  int ntok;            /* tokens on the line (all of them, even beyond MM_MAXTOK) */
  char *tok[MM_MAXTOK];
  /* header */
  int format;          /* MM_COORDINATE or MM_ARRAY */
  int field;           /* MM_REAL, MM_INTEGER or MM_PATTERN */
  int symmetric;       /* 1: only the lower triangle is stored */
  char symmetry_name[32];
  int64_t m, ncols;    /* size */
  int64_t nnz;         /* entries that follow: declared (coordinate) or m*ncols (array) */
  int64_t size_line;
} mm_reader;

/** One stored entry of a coordinate file (1-based indices) and the line it came from. */
typedef struct {
  int64_t i, j;
  double v;
  int64_t line;
} mm_entry;

/** One entry of a row while it is sorted by column. */
typedef struct {
  int64_t col;
  double v;
  int64_t line;
} mm_rowent;

/* ------------------------------------------------------------------------------------------------ */
/* Errors and low-level parsing                                                                      */

/** Raise `code` with the message "PATH:LINE: <formatted text>" through the reader's context. */
#if defined(__GNUC__)
__attribute__((format(printf, 4, 5)))
#endif
static int mm_fail(const mm_reader *r, int code, int64_t line, const char *fmt, ...) {
  char msg[768];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  return pk_error(r->ctx, code, r->func, "%s:%lld: %s", r->path, (long long)line, msg);
}

/** calloc of n elements of `size` bytes; on failure raise ::PKRYLOV_ERR_OUT_OF_MEMORY into *status. */
static void *mm_calloc(pkrylov_context ctx, const char *func, int64_t n, size_t size, const char *what,
                       int *status) {
  void *p = NULL;
  if (n >= 0 && (uint64_t)n <= SIZE_MAX / size) p = calloc(n > 0 ? (size_t)n : 1, size);
  if (!p)
    *status = pk_error(ctx, PKRYLOV_ERR_OUT_OF_MEMORY, func, "cannot allocate %lld x %zu bytes for %s",
                       (long long)n, size, what);
  return p;
}

/** White space of Matrix Market lines; CR included so that CRLF line ends vanish. */
static int mm_isspace(char c) {
  return c == ' ' || c == '\t' || c == '\r' || c == '\n' || c == '\v' || c == '\f';
}

/** Case-insensitive equality of two ASCII strings. */
static int mm_ieq(const char *a, const char *b) {
  for (; *a && *b; a++, b++) {
    char ca = (*a >= 'A' && *a <= 'Z') ? (char)(*a - 'A' + 'a') : *a;
    char cb = (*b >= 'A' && *b <= 'Z') ? (char)(*b - 'A' + 'a') : *b;
    if (ca != cb) return 0;
  }
  return *a == *b;
}

/** Whole-token integer: 0 on success, 1 when tok is not an integer, 2 when it is out of int64 range. */
static int mm_parse_i64(const char *tok, int64_t *out) {
  char *end;
  errno = 0;
  long long x = strtoll(tok, &end, 10);
  if (end == tok || *end != '\0') return 1;
  if (errno == ERANGE) return 2;
  *out = (int64_t)x;
  return 0;
}

/** Whole-token real number: 0 on success, 1 when tok is not a number. Over/underflow are not errors
 *  here (overflow gives Inf, which the caller rejects as non-finite). */
static int mm_parse_f64(const char *tok, double *out) {
  char *end;
  errno = 0;
  double x = strtod(tok, &end);
  if (end == tok || *end != '\0') return 1;
  *out = x;
  return 0;
}

/* ------------------------------------------------------------------------------------------------ */
/* Line reading                                                                                      */

/** Open path for reading; ::PKRYLOV_ERR_FILE_IO naming the path and the system's reason. */
static int mm_open(mm_reader *r, pkrylov_context ctx, const char *func, const char *path) {
  memset(r, 0, sizeof *r);
  r->ctx = ctx;
  r->func = func;
  r->path = path;
  errno = 0;
  r->f = fopen(path, "r");
  if (!r->f)
    return pk_error(ctx, PKRYLOV_ERR_FILE_IO, func, "cannot open '%s' for reading: %s", path,
                    strerror(errno));
  return PKRYLOV_SUCCESS;
}

/** Close the file and free the line buffer (safe to call twice). */
static void mm_close(mm_reader *r) {
  if (r->f) fclose(r->f);
  r->f = NULL;
  free(r->buf);
  r->buf = NULL;
  r->cap = 0;
}

/** Read the next line into r->buf. Returns 1 (a line), 0 (end of file) or a negative error code. */
static int mm_read_line(mm_reader *r) {
  errno = 0;
  ssize_t len = getline(&r->buf, &r->cap, r->f);
  if (len < 0) {
    if (errno == ENOMEM)
      return pk_error(r->ctx, PKRYLOV_ERR_OUT_OF_MEMORY, r->func, "%s:%lld: cannot allocate a line buffer",
                      r->path, (long long)(r->line + 1));
    if (ferror(r->f))
      return pk_error(r->ctx, PKRYLOV_ERR_FILE_IO, r->func, "%s:%lld: read error: %s", r->path,
                      (long long)(r->line + 1), strerror(errno ? errno : EIO));
    return 0;
  }
  r->line++;
  if (strlen(r->buf) != (size_t)len)
    return mm_fail(r, PKRYLOV_ERR_FILE_FORMAT, r->line, "the line holds a NUL byte (binary file?)");
  return 1;
}

/** Split the text at s (inside r->buf) in place into white-space separated tokens. */
static void mm_tokenize(mm_reader *r, char *s) {
  int n = 0;
  for (;;) {
    while (*s && mm_isspace(*s)) s++;
    if (!*s) break;
    if (n < MM_MAXTOK) r->tok[n] = s;
    n++;
    while (*s && !mm_isspace(*s)) s++;
    if (!*s) break;
    *s++ = '\0';
  }
  r->ntok = n;
}

/** Next line that is neither blank nor a comment, tokenized. Returns 1, 0 (end of file) or an error. */
static int mm_next_data_line(mm_reader *r) {
  for (;;) {
    int rc = mm_read_line(r);
    if (rc <= 0) return rc;
    mm_tokenize(r, r->buf);
    if (r->ntok == 0 || r->tok[0][0] == '%') continue;
    return 1;
  }
}

/* ------------------------------------------------------------------------------------------------ */
/* Header                                                                                            */

/** Line 1: "%%MatrixMarket matrix <format> <field> <symmetry>" (tokens case-insensitive). */
static int mm_read_banner(mm_reader *r) {
  static const char *expect =
      "'%%MatrixMarket matrix <coordinate|array> <real|integer|pattern|complex> "
      "<general|symmetric|skew-symmetric|hermitian>'";
  int rc = mm_read_line(r);
  if (rc < 0) return rc;
  if (rc == 0) return mm_fail(r, PKRYLOV_ERR_FILE_FORMAT, 1, "empty file: expected the banner %s", expect);
  char *s = r->buf;
  if ((unsigned char)s[0] == 0xEF && (unsigned char)s[1] == 0xBB && (unsigned char)s[2] == 0xBF)
    s += 3; /* UTF-8 byte order mark */
  mm_tokenize(r, s);
  if (r->ntok == 0 || !mm_ieq(r->tok[0], "%%MatrixMarket"))
    return mm_fail(r, PKRYLOV_ERR_FILE_FORMAT, 1, "missing banner: the first line must be %s", expect);
  if (r->ntok != 5)
    return mm_fail(r, PKRYLOV_ERR_FILE_FORMAT, 1, "the banner has %d tokens, expected 5: %s", r->ntok,
                   expect);
  const char *object = r->tok[1], *format = r->tok[2], *field = r->tok[3], *sym = r->tok[4];
  if (!mm_ieq(object, "matrix"))
    return mm_fail(r, PKRYLOV_ERR_FILE_FORMAT, 1, "banner object '%s' is not 'matrix'", object);

  if (mm_ieq(format, "coordinate")) r->format = MM_COORDINATE;
  else if (mm_ieq(format, "array")) r->format = MM_ARRAY;
  else
    return mm_fail(r, PKRYLOV_ERR_FILE_FORMAT, 1, "banner format '%s' is not 'coordinate' or 'array'",
                   format);

  int complex_field = 0;
  if (mm_ieq(field, "real")) r->field = MM_REAL;
  else if (mm_ieq(field, "integer")) r->field = MM_INTEGER;
  else if (mm_ieq(field, "pattern")) r->field = MM_PATTERN;
  else if (mm_ieq(field, "complex")) complex_field = 1;
  else
    return mm_fail(r, PKRYLOV_ERR_FILE_FORMAT, 1,
                   "banner field '%s' is not 'real', 'integer', 'pattern' or 'complex'", field);

  int unsupported_sym = 0;
  if (mm_ieq(sym, "general")) r->symmetric = 0;
  else if (mm_ieq(sym, "symmetric")) r->symmetric = 1;
  else if (mm_ieq(sym, "skew-symmetric") || mm_ieq(sym, "hermitian")) unsupported_sym = 1;
  else
    return mm_fail(r, PKRYLOV_ERR_FILE_FORMAT, 1,
                   "banner symmetry '%s' is not 'general', 'symmetric', 'skew-symmetric' or 'hermitian'",
                   sym);
  snprintf(r->symmetry_name, sizeof r->symmetry_name, "%s", sym);

  if (complex_field)
    return mm_fail(r, PKRYLOV_ERR_UNSUPPORTED, 1,
                   "field '%s' is not supported (only real, integer and pattern)", field);
  if (unsupported_sym)
    return mm_fail(r, PKRYLOV_ERR_UNSUPPORTED, 1,
                   "symmetry '%s' is not supported (only general and symmetric)", sym);
  if (r->field == MM_PATTERN && r->format == MM_ARRAY)
    return mm_fail(r, PKRYLOV_ERR_FILE_FORMAT, 1, "field 'pattern' is not allowed with format 'array'");
  return PKRYLOV_SUCCESS;
}

/** Parse size token k of the size line (names[k] in messages) into *out, checking its lower bound. */
static int mm_size_token(mm_reader *r, int k, int64_t lower, int64_t *out) {
  static const char *names[3] = {"number of rows M", "number of columns N", "number of entries NNZ"};
  int rc = mm_parse_i64(r->tok[k], out);
  if (rc == 1)
    return mm_fail(r, PKRYLOV_ERR_FILE_FORMAT, r->line, "size line: %s = '%s' is not an integer", names[k],
                   r->tok[k]);
  if (rc == 2)
    return mm_fail(r, PKRYLOV_ERR_FILE_FORMAT, r->line, "size line: %s = '%s' is out of range", names[k],
                   r->tok[k]);
  if (*out < lower)
    return mm_fail(r, PKRYLOV_ERR_FILE_FORMAT, r->line, "size line: %s = %lld must be >= %lld", names[k],
                   (long long)*out, (long long)lower);
  return PKRYLOV_SUCCESS;
}

/** The size line after the banner: "M N NNZ" (coordinate) or "M N" (array). */
static int mm_read_size(mm_reader *r) {
  int rc = mm_next_data_line(r);
  if (rc < 0) return rc;
  if (rc == 0)
    return mm_fail(r, PKRYLOV_ERR_FILE_FORMAT, r->line, "unexpected end of file: the size line is missing");
  r->size_line = r->line;
  int want = r->format == MM_COORDINATE ? 3 : 2;
  if (r->ntok != want)
    return mm_fail(r, PKRYLOV_ERR_FILE_FORMAT, r->line, "the size line holds %d tokens, expected %d (%s)",
                   r->ntok, want, want == 3 ? "'M N NNZ'" : "'M N'");
  PK_CALL(mm_size_token(r, 0, 1, &r->m));
  PK_CALL(mm_size_token(r, 1, 1, &r->ncols));
  if (r->format == MM_COORDINATE) {
    PK_CALL(mm_size_token(r, 2, 0, &r->nnz));
    /* at most M*N distinct entries (M*N overflowing int64 bounds nothing) */
    if (r->m <= INT64_MAX / r->ncols && r->nnz > r->m * r->ncols)
      return mm_fail(r, PKRYLOV_ERR_FILE_FORMAT, r->line, "NNZ = %lld exceeds M*N = %lld x %lld",
                     (long long)r->nnz, (long long)r->m, (long long)r->ncols);
  } else {
    if (r->m > INT64_MAX / r->ncols)
      return mm_fail(r, PKRYLOV_ERR_FILE_FORMAT, r->line, "M*N = %lld x %lld is too large",
                     (long long)r->m, (long long)r->ncols);
    r->nnz = r->m * r->ncols;
  }
  if (r->symmetric && r->m != r->ncols)
    return mm_fail(r, PKRYLOV_ERR_FILE_FORMAT, r->line,
                   "a '%s' matrix must be square, but the size line gives %lld x %lld", r->symmetry_name,
                   (long long)r->m, (long long)r->ncols);
  return PKRYLOV_SUCCESS;
}

/* ------------------------------------------------------------------------------------------------ */
/* Entries                                                                                           */

/** The value token tok of the current line by the header's field (pattern: 1). */
static int mm_parse_value(mm_reader *r, const char *tok, double *v) {
  if (r->field == MM_PATTERN) {
    *v = 1.0;
    return PKRYLOV_SUCCESS;
  }
  if (r->field == MM_INTEGER) {
    int64_t x;
    int rc = mm_parse_i64(tok, &x);
    if (rc)
      return mm_fail(r, PKRYLOV_ERR_FILE_FORMAT, r->line, "value '%s' is %s", tok,
                     rc == 1 ? "not an integer (field 'integer')" : "out of the int64 range");
    *v = (double)x;
    return PKRYLOV_SUCCESS;
  }
  if (mm_parse_f64(tok, v))
    return mm_fail(r, PKRYLOV_ERR_FILE_FORMAT, r->line, "value '%s' is not a number", tok);
  if (!isfinite(*v))
    return mm_fail(r, PKRYLOV_ERR_NOT_FINITE, r->line, "value '%s' is not finite", tok);
  return PKRYLOV_SUCCESS;
}

/** Index token k ("row"/"column") of the current line, in 1..hi. */
static int mm_parse_index(mm_reader *r, int k, const char *what, int64_t hi, int64_t *out) {
  int rc = mm_parse_i64(r->tok[k], out);
  if (rc)
    return mm_fail(r, PKRYLOV_ERR_FILE_FORMAT, r->line, "%s index '%s' is %s", what, r->tok[k],
                   rc == 1 ? "not an integer" : "out of the int64 range");
  if (*out < 1 || *out > hi)
    return mm_fail(r, PKRYLOV_ERR_FILE_FORMAT, r->line, "%s index %lld is outside 1..%lld", what,
                   (long long)*out, (long long)hi);
  return PKRYLOV_SUCCESS;
}

/** The coordinate entry on the current line: "I J V" or, for pattern, "I J". */
static int mm_parse_coord_entry(mm_reader *r, int64_t *i, int64_t *j, double *v) {
  int want = r->field == MM_PATTERN ? 2 : 3;
  if (r->ntok != want)
    return mm_fail(r, PKRYLOV_ERR_FILE_FORMAT, r->line, "the entry holds %d tokens, expected %d (%s)",
                   r->ntok, want, want == 2 ? "'I J' for a pattern file" : "'I J V'");
  PK_CALL(mm_parse_index(r, 0, "row", r->m, i));
  PK_CALL(mm_parse_index(r, 1, "column", r->ncols, j));
  return mm_parse_value(r, want == 3 ? r->tok[2] : NULL, v);
}

/** Next data line for entry number k (0-based) of r->nnz; end of file there is a format error. */
static int mm_next_entry_line(mm_reader *r, int64_t k, const char *what) {
  int rc = mm_next_data_line(r);
  if (rc < 0) return rc;
  if (rc == 0)
    return mm_fail(r, PKRYLOV_ERR_FILE_FORMAT, r->line,
                   "unexpected end of file: expected %lld %s (size line %lld), found %lld", (long long)r->nnz,
                   what, (long long)r->size_line, (long long)k);
  return PKRYLOV_SUCCESS;
}

/** After the last entry only blank and comment lines may follow. */
static int mm_check_trailing(mm_reader *r, const char *what) {
  int rc = mm_next_data_line(r);
  if (rc < 0) return rc;
  if (rc == 1)
    return mm_fail(r, PKRYLOV_ERR_FILE_FORMAT, r->line,
                   "more %s than the %lld declared on line %lld (text after the last one)", what,
                   (long long)r->nnz, (long long)r->size_line);
  return PKRYLOV_SUCCESS;
}

/**
 * All entries of a coordinate matrix into a growing array (*out, *count), with their line numbers.
 * Symmetric files must store the lower triangle (I >= J).
 */
static int mm_read_coord_entries(mm_reader *r, mm_entry **out, int64_t *count) {
  int st = PKRYLOV_SUCCESS;
  int64_t cap = r->nnz < (1 << 16) ? r->nnz : (1 << 16), n = 0;
  mm_entry *e = mm_calloc(r->ctx, r->func, cap, sizeof *e, "the entries", &st);
  if (!e) return st;
  for (int64_t k = 0; k < r->nnz; k++) {
    int64_t i = 0, j = 0;
    double v;
    if ((st = mm_next_entry_line(r, k, "entries")) != PKRYLOV_SUCCESS) goto fail;
    if ((st = mm_parse_coord_entry(r, &i, &j, &v)) != PKRYLOV_SUCCESS) goto fail;
    if (r->symmetric && i < j) {
      st = mm_fail(r, PKRYLOV_ERR_FILE_FORMAT, r->line,
                   "entry (%lld, %lld) is in the upper triangle, but a symmetric file stores only the "
                   "lower triangle (I >= J)", (long long)i, (long long)j);
      goto fail;
    }
    if (n == cap) { /* grow geometrically, never beyond the declared count */
      int64_t ncap = cap <= r->nnz / 2 ? 2 * cap : r->nnz;
      mm_entry *ne = NULL;
      if ((uint64_t)ncap <= SIZE_MAX / sizeof *e) ne = realloc(e, (size_t)ncap * sizeof *e);
      if (!ne) {
        st = pk_error(r->ctx, PKRYLOV_ERR_OUT_OF_MEMORY, r->func, "cannot allocate %lld entries",
                      (long long)ncap);
        goto fail;
      }
      e = ne;
      cap = ncap;
    }
    e[n].i = i;
    e[n].j = j;
    e[n].v = v;
    e[n].line = r->line;
    n++;
  }
  if ((st = mm_check_trailing(r, "entries")) != PKRYLOV_SUCCESS) goto fail;
  *out = e;
  *count = n;
  return PKRYLOV_SUCCESS;
fail:
  free(e);
  return st;
}

/** qsort order of row entries: column, then line (so equal columns keep file order). */
static int mm_rowent_cmp(const void *a, const void *b) {
  const mm_rowent *x = a, *y = b;
  if (x->col != y->col) return x->col < y->col ? -1 : 1;
  return (x->line > y->line) - (x->line < y->line);
}

/**
 * Sort the entries [b, e) of one row by column (stable for equal columns). Short rows by insertion,
 * long unsorted rows by qsort through *scratch (allocated once, maxlen entries).
 */
static int mm_sort_row(mm_reader *r, int64_t b, int64_t e, int64_t maxlen, int64_t *colind, double *vals,
                       int64_t *lines, mm_rowent **scratch) {
  int64_t k = b + 1;
  while (k < e && colind[k - 1] <= colind[k]) k++;
  if (k >= e) return PKRYLOV_SUCCESS; /* already sorted: the usual case */
  if (e - b <= MM_INSERTION_MAX) {
    for (k = b + 1; k < e; k++) {
      int64_t c = colind[k], l = lines[k], p = k;
      double v = vals[k];
      for (; p > b && colind[p - 1] > c; p--) {
        colind[p] = colind[p - 1];
        vals[p] = vals[p - 1];
        lines[p] = lines[p - 1];
      }
      colind[p] = c;
      vals[p] = v;
      lines[p] = l;
    }
    return PKRYLOV_SUCCESS;
  }
  if (!*scratch) {
    int st = PKRYLOV_SUCCESS;
    *scratch = mm_calloc(r->ctx, r->func, maxlen, sizeof **scratch, "a row sort buffer", &st);
    if (!*scratch) return st;
  }
  mm_rowent *s = *scratch;
  for (k = b; k < e; k++) s[k - b] = (mm_rowent){colind[k], vals[k], lines[k]};
  qsort(s, (size_t)(e - b), sizeof *s, mm_rowent_cmp);
  for (k = b; k < e; k++) {
    colind[k] = s[k - b].col;
    vals[k] = s[k - b].v;
    lines[k] = s[k - b].line;
  }
  return PKRYLOV_SUCCESS;
}

/**
 * 0-based CSR with sorted columns from the entries (mirrored for symmetric files), freeing *entries.
 * A repeated (row, column) is ::PKRYLOV_ERR_DUPLICATE_ENTRY naming both lines.
 */
static int mm_build_csr(mm_reader *r, mm_entry **entries, int64_t ne, int64_t **rowptr_out,
                        int64_t **colind_out, double **vals_out) {
  int st = PKRYLOV_SUCCESS;
  const int64_t n = r->m;
  mm_entry *e = *entries;
  int64_t *rowptr = NULL, *colind = NULL, *lines = NULL;
  double *vals = NULL;
  mm_rowent *scratch = NULL;
  if ((uint64_t)n >= SIZE_MAX / sizeof(int64_t)) {
    st = pk_error(r->ctx, PKRYLOV_ERR_OUT_OF_MEMORY, r->func, "%s: n = %lld rows do not fit in memory",
                  r->path, (long long)n);
    goto done;
  }
  rowptr = mm_calloc(r->ctx, r->func, n + 1, sizeof *rowptr, "the row pointers", &st);
  if (!rowptr) goto done;
  /* counting sort by row: rowptr[i+1] = entries in row i (both halves of a mirrored pair) */
  for (int64_t k = 0; k < ne; k++) {
    rowptr[e[k].i]++;
    if (r->symmetric && e[k].i != e[k].j) rowptr[e[k].j]++;
  }
  for (int64_t i = 0; i < n; i++) rowptr[i + 1] += rowptr[i];
  const int64_t total = rowptr[n];
  colind = mm_calloc(r->ctx, r->func, total, sizeof *colind, "the column indices", &st);
  vals = colind ? mm_calloc(r->ctx, r->func, total, sizeof *vals, "the values", &st) : NULL;
  lines = vals ? mm_calloc(r->ctx, r->func, total, sizeof *lines, "the line numbers", &st) : NULL;
  if (!lines) goto done;
  /* scatter in file order; rowptr[i] is the cursor of row i and ends at the start of row i+1 */
  for (int64_t k = 0; k < ne; k++) {
    int64_t p = rowptr[e[k].i - 1]++;
    colind[p] = e[k].j - 1;
    vals[p] = e[k].v;
    lines[p] = e[k].line;
    if (r->symmetric && e[k].i != e[k].j) {
      p = rowptr[e[k].j - 1]++;
      colind[p] = e[k].i - 1;
      vals[p] = e[k].v;
      lines[p] = e[k].line;
    }
  }
  memmove(rowptr + 1, rowptr, (size_t)n * sizeof *rowptr);
  rowptr[0] = 0;
  free(e);
  *entries = NULL;

  int64_t maxlen = 0;
  for (int64_t i = 0; i < n; i++)
    if (rowptr[i + 1] - rowptr[i] > maxlen) maxlen = rowptr[i + 1] - rowptr[i];
  for (int64_t i = 0; i < n; i++) {
    const int64_t b = rowptr[i], end = rowptr[i + 1];
    if ((st = mm_sort_row(r, b, end, maxlen, colind, vals, lines, &scratch)) != PKRYLOV_SUCCESS) goto done;
    for (int64_t k = b + 1; k < end; k++) {
      if (colind[k] != colind[k - 1]) continue;
      int64_t l1 = lines[k - 1] < lines[k] ? lines[k - 1] : lines[k];
      int64_t l2 = lines[k - 1] < lines[k] ? lines[k] : lines[k - 1];
      int64_t ri = i + 1, cj = colind[k] + 1;
      if (r->symmetric && ri < cj) { /* name the stored (lower) orientation */
        int64_t t = ri;
        ri = cj;
        cj = t;
      }
      st = mm_fail(r, PKRYLOV_ERR_DUPLICATE_ENTRY, l2,
                   "entry (%lld, %lld) appears twice%s: lines %lld and %lld", (long long)ri, (long long)cj,
                   r->symmetric ? " (after mirroring)" : "", (long long)l1, (long long)l2);
      goto done;
    }
  }
  *rowptr_out = rowptr;
  *colind_out = colind;
  *vals_out = vals;
  rowptr = NULL;
  colind = NULL;
  vals = NULL;
done:
  free(scratch);
  free(lines);
  free(vals);
  free(colind);
  free(rowptr);
  return st;
}

/* ------------------------------------------------------------------------------------------------ */
/* Public functions                                                                                  */

/**
 * Banner, size line (square required), entries into a growing array, CSR by a counting sort over rows
 * with duplicates found per row, then pkrylov_operator_create_csr64() (0-based) copies it.
 */
int pkrylov_operator_create_from_mtx(pkrylov_context ctx, const char *path, pkrylov_operator *A) {
  PK_CHECK(ctx != NULL, NULL, PKRYLOV_ERR_NULL_POINTER, "argument 'ctx' is NULL");
  PK_CHECK_PTR(path, ctx);
  PK_CHECK_PTR(A, ctx);
  mm_reader r;
  mm_entry *entries = NULL;
  int64_t ne = 0, *rowptr = NULL, *colind = NULL;
  double *vals = NULL;
  int st = mm_open(&r, ctx, __func__, path);
  if (st) return st;
  if ((st = mm_read_banner(&r)) != PKRYLOV_SUCCESS) goto done;
  if (r.format != MM_COORDINATE) {
    st = mm_fail(&r, PKRYLOV_ERR_UNSUPPORTED, 1,
                 "format 'array' (dense) is not supported for a matrix operator (only 'coordinate')");
    goto done;
  }
  if ((st = mm_read_size(&r)) != PKRYLOV_SUCCESS) goto done;
  if (r.m != r.ncols) {
    st = mm_fail(&r, PKRYLOV_ERR_SIZE_MISMATCH, r.size_line,
                 "an operator must be square, but the matrix is %lld x %lld (M x N)", (long long)r.m,
                 (long long)r.ncols);
    goto done;
  }
  /* a matrix to be solved needs an entry in every row (a stored symmetric entry covers two): refuse a header
     that cannot give it one before anything of size n is allocated (a short file declaring a huge n) */
  if (r.nnz < (r.symmetric ? r.m - r.m / 2 : r.m)) {
    st = mm_fail(
        &r, PKRYLOV_ERR_FILE_FORMAT, r.size_line,
        "NNZ = %lld entries cannot give each of the M = %lld rows one%s: a matrix to be solved needs "
        "an entry in every row",
        (long long)r.nnz, (long long)r.m, r.symmetric ? " (a symmetric file needs at least M/2)" : "");
    goto done;
  }
  if ((st = mm_read_coord_entries(&r, &entries, &ne)) != PKRYLOV_SUCCESS) goto done;
  mm_close(&r);
  if ((st = mm_build_csr(&r, &entries, ne, &rowptr, &colind, &vals)) != PKRYLOV_SUCCESS) goto done;
  st = pkrylov_operator_create_csr64(ctx, r.m, 0, rowptr, colind, vals, A);
done:
  mm_close(&r);
  free(entries);
  free(rowptr);
  free(colind);
  free(vals);
  return st;
}

/** qsort order of vector entries: index, then line (a repeated index names its first line first). */
static int mm_entry_cmp(const void *a, const void *b) {
  const mm_entry *x = a, *y = b;
  if (x->i != y->i) return x->i < y->i ? -1 : 1;
  return (x->line > y->line) - (x->line < y->line);
}

/**
 * The values of an "array" vector file (one per line, r->m of them) into a growing array (*out), so that
 * memory follows the lines read, not the length the size line declares.
 */
static int mm_read_array_values(mm_reader *r, int keep, double **out) {
  int st = PKRYLOV_SUCCESS;
  int64_t cap = 0;
  double *vals = NULL;
  for (int64_t k = 0; k < r->m; k++) {
    double x;
    if ((st = mm_next_entry_line(r, k, "values")) != PKRYLOV_SUCCESS) goto fail;
    if (r->ntok != 1) {
      st =
          mm_fail(r, PKRYLOV_ERR_FILE_FORMAT, r->line, "the line holds %d tokens, expected 1 value", r->ntok);
      goto fail;
    }
    if ((st = mm_parse_value(r, r->tok[0], &x)) != PKRYLOV_SUCCESS) goto fail;
    if (!keep) continue;
    if (k == cap) { /* grow geometrically, never beyond the declared length */
      const int64_t ncap =
          cap == 0 ? (r->m < (1 << 16) ? r->m : (1 << 16)) : (cap <= r->m / 2 ? 2 * cap : r->m);
      double *nv =
          (uint64_t)ncap <= SIZE_MAX / sizeof *vals ? realloc(vals, (size_t)ncap * sizeof *vals) : NULL;
      if (!nv) {
        st = pk_error(r->ctx, PKRYLOV_ERR_OUT_OF_MEMORY, r->func, "cannot allocate %lld values",
                      (long long)ncap);
        goto fail;
      }
      vals = nv;
      cap = ncap;
    }
    vals[k] = x;
  }
  if ((st = mm_check_trailing(r, "values")) != PKRYLOV_SUCCESS) goto fail;
  *out = vals;
  return PKRYLOV_SUCCESS;
fail:
  free(vals);
  return st;
}

/**
 * "array" (one value per line) or "coordinate" ("I 1 V", missing entries 0) files with one column. The
 * whole file is checked even when v is NULL; v and *n are written only on success. Memory follows the
 * length of the file: the entries of a coordinate file are kept as read (a huge declared length with few
 * entries costs nothing) and sorted to find a repeated index; v itself is the caller's.
 */
int pkrylov_mtx_read_vector(pkrylov_context ctx, const char *path, int64_t capacity, double *v,
                            int64_t *n) {
  PK_CHECK_PTR(path, ctx);
  PK_CHECK_PTR(n, ctx);
  mm_reader r;
  double *vals = NULL;
  mm_entry *e = NULL;
  int64_t ne = 0;
  int st = mm_open(&r, ctx, __func__, path);
  if (st) return st;
  if ((st = mm_read_banner(&r)) != PKRYLOV_SUCCESS) goto done;
  if (r.field == MM_PATTERN) {
    st = mm_fail(&r, PKRYLOV_ERR_UNSUPPORTED, 1, "field 'pattern' is not supported for a vector "
                 "(only real and integer)");
    goto done;
  }
  if (r.symmetric) {
    st = mm_fail(&r, PKRYLOV_ERR_UNSUPPORTED, 1, "symmetry '%s' is not supported for a vector (only "
                 "general)", r.symmetry_name);
    goto done;
  }
  if ((st = mm_read_size(&r)) != PKRYLOV_SUCCESS) goto done;
  if (r.ncols != 1) {
    st = mm_fail(&r, PKRYLOV_ERR_SIZE_MISMATCH, r.size_line,
                 "the file holds a %lld x %lld matrix, not a vector (N must be 1)", (long long)r.m,
                 (long long)r.ncols);
    goto done;
  }
  if (v && capacity < r.m) {
    st = pk_error(ctx, PKRYLOV_ERR_SIZE_MISMATCH, __func__,
                  "argument 'capacity' = %lld is smaller than the length %lld of the vector in '%s'",
                  (long long)capacity, (long long)r.m, path);
    goto done;
  }
  if (r.format == MM_ARRAY) {
    if ((st = mm_read_array_values(&r, v != NULL, &vals)) != PKRYLOV_SUCCESS) goto done;
    if (v) memcpy(v, vals, (size_t)r.m * sizeof *v);
  } else {
    /* "I 1 V" entries as read (with their lines), then sorted by index: a repeated one names both lines */
    if ((st = mm_read_coord_entries(&r, &e, &ne)) != PKRYLOV_SUCCESS) goto done;
    qsort(e, (size_t)ne, sizeof *e, mm_entry_cmp);
    int64_t dup = -1; /* the repeat found first in file order: the least second line */
    for (int64_t k = 1; k < ne; k++)
      if (e[k].i == e[k - 1].i && (dup < 0 || e[k].line < e[dup].line)) dup = k;
    if (dup >= 0) {
      st = mm_fail(&r, PKRYLOV_ERR_DUPLICATE_ENTRY, e[dup].line,
                   "entry (%lld, 1) appears twice: lines %lld and "
                   "%lld",
                   (long long)e[dup].i, (long long)e[dup - 1].line, (long long)e[dup].line);
      goto done;
    }
    if (v) {
      memset(v, 0, (size_t)r.m * sizeof *v);
      for (int64_t k = 0; k < ne; k++) v[e[k].i - 1] = e[k].v;
    }
  }
  *n = r.m;
done:
  mm_close(&r);
  free(e);
  free(vals);
  return st;
}

/** Flush and close a file being written; ::PKRYLOV_ERR_FILE_IO if any write failed. */
static int mm_finish_write(pkrylov_context ctx, const char *func, const char *path, FILE *f) {
  int bad = ferror(f);
  int err = errno;
  if (fclose(f) != 0 && !bad) {
    bad = 1;
    err = errno;
  }
  if (bad)
    return pk_error(ctx, PKRYLOV_ERR_FILE_IO, func, "error writing '%s': %s", path,
                    strerror(err ? err : EIO));
  return PKRYLOV_SUCCESS;
}

/** Through the public CSR export (any operator kind): "coordinate real general", 1-based, %.17g. */
int pkrylov_operator_write_mtx(pkrylov_operator A, const char *path) {
  PK_CHECK(A != NULL, NULL, PKRYLOV_ERR_NULL_POINTER, "argument 'A' is NULL");
  pkrylov_context ctx = A->ctx;
  PK_CHECK_PTR(path, ctx);
  int64_t n, nnz;
  PK_CALL(pkrylov_operator_get_info(A, &n, &nnz, NULL, NULL, NULL, NULL));
  PK_CHECK(nnz >= 0, ctx, PKRYLOV_ERR_UNSUPPORTED,
           "argument 'A' has no matrix entries to write (a user operator), or none of its own (a halo-exchange "
           "stencil or a distributed operator, whose couplings reach other tiles)");
  int st = PKRYLOV_SUCCESS;
  int64_t *rowptr = NULL, *colind = NULL;
  double *vals = NULL;
  FILE *f = NULL;
  rowptr = mm_calloc(ctx, __func__, n + 1, sizeof *rowptr, "the row pointers", &st);
  colind = rowptr ? mm_calloc(ctx, __func__, nnz, sizeof *colind, "the column indices", &st) : NULL;
  vals = colind ? mm_calloc(ctx, __func__, nnz, sizeof *vals, "the values", &st) : NULL;
  if (!vals) goto done;
  if ((st = pkrylov_operator_get_csr(A, rowptr, colind, vals)) != PKRYLOV_SUCCESS) goto done;
  errno = 0;
  f = fopen(path, "w");
  if (!f) {
    st = pk_error(ctx, PKRYLOV_ERR_FILE_IO, __func__, "cannot open '%s' for writing: %s", path,
                  strerror(errno));
    goto done;
  }
  fprintf(f, "%%%%MatrixMarket matrix coordinate real general\n");
  fprintf(f, "%lld %lld %lld\n", (long long)n, (long long)n, (long long)nnz);
  /* 1-based "I J V"; 17 significant digits give back the same double */
  for (int64_t i = 0; i < n && !ferror(f); i++)
    for (int64_t k = rowptr[i]; k < rowptr[i + 1]; k++)
      fprintf(f, "%lld %lld %.17g\n", (long long)(i + 1), (long long)(colind[k] + 1), vals[k]);
  st = mm_finish_write(ctx, __func__, path, f);
done:
  free(rowptr);
  free(colind);
  free(vals);
  return st;
}

/** "array real general" with n rows and 1 column, one %.17g value per line; ctx may be NULL. */
int pkrylov_mtx_write_vector(pkrylov_context ctx, const char *path, int64_t n, const double *v) {
  PK_CHECK_PTR(path, ctx);
  PK_CHECK(n > 0, ctx, PKRYLOV_ERR_INVALID_SIZE, "argument 'n' = %lld must be > 0", (long long)n);
  PK_CHECK_PTR(v, ctx);
  int64_t bad = pk_first_nonfinite(v, n);
  PK_CHECK(bad < 0, ctx, PKRYLOV_ERR_NOT_FINITE, "argument 'v' holds a non-finite value at index %lld",
           (long long)bad);
  errno = 0;
  FILE *f = fopen(path, "w");
  PK_CHECK(f != NULL, ctx, PKRYLOV_ERR_FILE_IO, "cannot open '%s' for writing: %s", path, strerror(errno));
  fprintf(f, "%%%%MatrixMarket matrix array real general\n%lld 1\n", (long long)n);
  for (int64_t i = 0; i < n && !ferror(f); i++) fprintf(f, "%.17g\n", v[i]);
  return mm_finish_write(ctx, __func__, path, f);
}

/**
 * @file gen_fortran_interfaces.c
 * @brief Generates fortran/pkrylov_c_interfaces.inc (the private bind(C) layer of pkrylov_mod) from
 *        include/pkrylov.h.
 *
 * Usage: gen_fortran_interfaces <pkrylov.h> [<output.inc>]   (standard output when no output is given)
 *        gen_fortran_interfaces --check <checked-in.inc> <pkrylov.h>   (exit 1 when the file differs from
 *        what the header gives: the ctest t800-fortran:interfaces_up_to_date)
 *
 * The header is read as the restricted C it is written in; anything outside these rules stops the
 * generator with a message naming the header line (it never guesses):
 * - Preprocessor: `#define NAME <integer literal>` -> integer(c_int32_t), parameter, public.
 *   `#define NAME __attribute__(...)` / `__declspec(...)` declares an export macro that is stripped from
 *   declarations. `#define NAME` (include guard) and function-like macros are skipped (noted in the
 *   output). `#ifdef __cplusplus ... #endif` blocks are skipped; other conditionals and includes are ignored
 *   (both branches are read). Any other `#define` is an error.
 * - `typedef enum { A = v, B, ... } name;` -> one integer(c_int32_t), parameter, public per enumerator
 *   (values: integer literals, optionally negative; an enumerator without a value is the previous + 1).
 * - `typedef struct { fields } name;` -> `type, bind(C), public :: name` with the same field names;
 *   double -> real(c_double), float -> real(c_float), int32_t -> integer(c_int32_t),
 *   int64_t -> integer(c_int64_t), int -> integer(c_int), any pointer -> type(c_ptr).
 * - `typedef struct tag *name;` -> an opaque handle: arguments of that type are type(c_ptr), value.
 * - `typedef ret (*name)(args);` -> a function pointer: arguments of that type are type(c_funptr), value.
 * - `EXPORT ret name(args);` -> a bind(C, name="name") function (subroutine for void) in one interface
 *   block. Arguments: every pointer (`*` or `[]`) -> type(c_ptr), value; int32_t -> integer(c_int32_t),
 *   value; int64_t -> integer(c_int64_t), value; int -> integer(c_int), value; double -> real(c_double),
 *   value; float -> real(c_float), value; size_t -> integer(c_size_t), value; handle -> type(c_ptr), value;
 *   function pointer -> type(c_funptr), value. Returns: int -> integer(c_int), int32_t ->
 *   integer(c_int32_t), int64_t -> integer(c_int64_t), double -> real(c_double), any pointer (e.g.
 *   `const char *`) or handle -> type(c_ptr). Anything else (enum or struct types by value, char, bool,
 *   unsigned, variadic functions) is an error.
 * - Names are kept. Because Fortran is case-insensitive, names that differ only in case (in the module
 *   scope or within one interface) are an error, as are names Fortran does not accept.
 */
#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { MAX_TOKENS = 200000, MAX_NAMES = 4096, LINE_WRAP = 100 };

/** One token of the header: an identifier, a number or one punctuation character. */
typedef struct {
  char text[128];
  int line; /* header line, for messages */
} token;

/** What a type name stands for. */
typedef enum { KIND_HANDLE, KIND_FUNPTR, KIND_ENUM, KIND_STRUCT } name_kind;

/** The generator's state: the header, its tokens, the names seen and the output text. */
typedef struct {
  const char *path;
  token *tok;
  int ntok;
  char attr_macros[8][128]; /* export macros stripped from declarations */
  int nattr;
  char type_names[MAX_NAMES][128]; /* typedef names and what they are */
  name_kind type_kinds[MAX_NAMES];
  int ntypes;
  char global_names[MAX_NAMES][128]; /* module-scope Fortran names, for the case-clash check */
  int global_lines[MAX_NAMES];
  int nglobal;
  char *consts, *types, *ifaces; /* output sections */
  size_t lconsts, ltypes, lifaces;
} gen;

/** Stop with a message naming the header line (fail loudly: never emit a guess). */
static void die(const gen *g, int line, const char *fmt, ...) {
  va_list ap;
  fprintf(stderr, "gen_fortran_interfaces: %s:%d: ", g ? g->path : "?", line);
  va_start(ap, fmt);
  vfprintf(stderr, fmt, ap);
  va_end(ap);
  fputc('\n', stderr);
  exit(1);
}

/** Append printf-formatted text to one output section (growing it). */
static void emit(char **buf, size_t *len, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  int k = vsnprintf(NULL, 0, fmt, ap);
  va_end(ap);
  if (k < 0) die(NULL, 0, "cannot format the output");
  char *nb = realloc(*buf, *len + (size_t)k + 1);
  if (!nb) die(NULL, 0, "out of memory");
  va_start(ap, fmt);
  vsnprintf(nb + *len, (size_t)k + 1, fmt, ap);
  va_end(ap);
  *buf = nb;
  *len += (size_t)k;
}

/** Case-insensitive string equality (Fortran names). */
static int same_name(const char *a, const char *b) {
  for (; *a && *b; a++, b++)
    if (tolower((unsigned char)*a) != tolower((unsigned char)*b)) return 0;
  return *a == *b;
}

/** Check that name is a valid Fortran name (letter first, letters/digits/_, at most 63). */
static void check_fortran_name(const gen *g, int line, const char *name) {
  size_t n = strlen(name);
  if (n == 0 || n > 63 || !isalpha((unsigned char)name[0]))
    die(g, line, "'%s' is not a valid Fortran name (letter first, at most 63 characters)", name);
  for (size_t i = 0; i < n; i++)
    if (!isalnum((unsigned char)name[i]) && name[i] != '_')
      die(g, line, "'%s' is not a valid Fortran name", name);
}

/** Register a module-scope name; two names that differ only in case would be one Fortran entity. */
static void add_global(gen *g, int line, const char *name) {
  check_fortran_name(g, line, name);
  for (int i = 0; i < g->nglobal; i++)
    if (same_name(g->global_names[i], name))
      die(g, line, "'%s' clashes with '%s' (line %d) in Fortran, which ignores case", name,
          g->global_names[i], g->global_lines[i]);
  if (g->nglobal >= MAX_NAMES) die(g, line, "too many names");
  snprintf(g->global_names[g->nglobal], sizeof g->global_names[0], "%s", name);
  g->global_lines[g->nglobal++] = line;
}

/** Remember a typedef name and its kind. */
static void add_type(gen *g, int line, const char *name, name_kind kind) {
  if (g->ntypes >= MAX_NAMES) die(g, line, "too many typedefs");
  snprintf(g->type_names[g->ntypes], sizeof g->type_names[0], "%s", name);
  g->type_kinds[g->ntypes++] = kind;
}

/** Kind of a typedef name, or -1 when the name is not a typedef of the header. */
static int type_kind(const gen *g, const char *name) {
  for (int i = 0; i < g->ntypes; i++)
    if (!strcmp(g->type_names[i], name)) return (int)g->type_kinds[i];
  return -1;
}

static int is_attr_macro(const gen *g, const char *name) {
  for (int i = 0; i < g->nattr; i++)
    if (!strcmp(g->attr_macros[i], name)) return 1;
  return 0;
}

/** Read a whole file into a NUL-terminated buffer. */
static char *read_file(const char *path) {
  FILE *f = fopen(path, "rb");
  if (!f) {
    fprintf(stderr, "gen_fortran_interfaces: cannot open %s: %s\n", path, strerror(errno));
    exit(1);
  }
  size_t cap = 1 << 16, len = 0;
  char *buf = malloc(cap);
  if (!buf) die(NULL, 0, "out of memory");
  size_t k;
  while ((k = fread(buf + len, 1, cap - len - 1, f)) > 0) {
    len += k;
    if (cap - len - 1 == 0) {
      cap *= 2;
      char *nb = realloc(buf, cap);
      if (!nb) die(NULL, 0, "out of memory");
      buf = nb;
    }
  }
  fclose(f);
  buf[len] = '\0';
  return buf;
}

/** Replace comments by spaces (keeping newlines, so line numbers stay right); string literals are kept. */
static void strip_comments(char *s) {
  for (char *p = s; *p; p++) {
    if (*p == '"') {
      for (p++; *p && *p != '"'; p++)
        if (*p == '\\' && p[1]) p++;
      if (!*p) return;
    } else if (p[0] == '/' && p[1] == '*') {
      for (; *p && !(p[0] == '*' && p[1] == '/'); p++)
        if (*p != '\n') *p = ' ';
      if (!*p) return;
      p[0] = p[1] = ' ';
      p++;
    } else if (p[0] == '/' && p[1] == '/') {
      for (; *p && *p != '\n'; p++) *p = ' ';
      if (!*p) return;
    }
  }
}

/** Parse an integer literal (decimal, hex or octal, optional sign, optional U/L suffixes); 1 on success. */
static int parse_int(const char *s, long long *v) {
  char *end;
  errno = 0;
  *v = strtoll(s, &end, 0);
  if (end == s || errno) return 0;
  while (*end == 'u' || *end == 'U' || *end == 'l' || *end == 'L') end++;
  while (isspace((unsigned char)*end)) end++;
  return *end == '\0';
}

/** Emit `integer(c_int32_t), parameter, public :: name = v` (checks the range of int32_t). */
static void emit_constant(gen *g, int line, const char *name, long long v) {
  if (v < -2147483647LL - 1 || v > 2147483647LL) die(g, line, "value of '%s' does not fit int32_t", name);
  add_global(g, line, name);
  emit(&g->consts, &g->lconsts, "  integer(c_int32_t), parameter, public :: %s = %lld\n", name, v);
}

/**
 * One preprocessor directive (text after '#', continuation lines joined). Returns 1 when it opens a block
 * to skip (#ifdef __cplusplus).
 */
static int directive(gen *g, int line, char *d) {
  char word[64] = "", name[128] = "";
  int off = 0;
  if (sscanf(d, " %63[a-z]%n", word, &off) != 1) die(g, line, "cannot read the directive '#%s'", d);
  char *rest = d + off;
  if (!strcmp(word, "ifdef") || !strcmp(word, "ifndef") || !strcmp(word, "if") || !strcmp(word, "elif")) {
    char what[128] = "";
    sscanf(rest, " %127s", what);
    return !strcmp(word, "ifdef") && !strcmp(what, "__cplusplus");
  }
  if (!strcmp(word, "else") || !strcmp(word, "endif") || !strcmp(word, "include")) return 0;
  if (strcmp(word, "define")) die(g, line, "unsupported directive '#%s'", word);
  int n = 0;
  if (sscanf(rest, " %127[A-Za-z0-9_]%n", name, &n) != 1) die(g, line, "cannot read the macro name");
  char *val = rest + n;
  if (*val == '(') { /* function-like: a C compile-time helper, nothing to bind */
    emit(&g->consts, &g->lconsts, "  ! skipped: function-like macro %s\n", name);
    return 0;
  }
  while (isspace((unsigned char)*val)) val++;
  char *e = val + strlen(val);
  while (e > val && isspace((unsigned char)e[-1])) *--e = '\0';
  long long v;
  if (*val == '\0') return 0; /* include guard */
  if (!strncmp(val, "__attribute__", 13) || !strncmp(val, "__declspec", 10)) {
    if (!is_attr_macro(g, name)) {
      if (g->nattr >= 8) die(g, line, "too many export macros");
      snprintf(g->attr_macros[g->nattr++], sizeof g->attr_macros[0], "%s", name);
    }
    return 0;
  }
  if (parse_int(val, &v)) {
    emit_constant(g, line, name, v);
    return 0;
  }
  die(g, line, "cannot map the macro '%s' = '%s' (only integer literals are supported)", name, val);
  return 0;
}

/** Split the header into lines, run directives, tokenise the rest. */
static void tokenize(gen *g, char *src) {
  g->tok = calloc(MAX_TOKENS, sizeof *g->tok);
  if (!g->tok) die(g, 0, "out of memory");
  int line = 1, skip_depth = 0, depth = 0;
  char *p = src;
  while (*p) {
    /* one logical line: [p, q) with backslash-newline joined for directives */
    char *q = p;
    int nl = 0;
    while (*q && *q != '\n') {
      if (q[0] == '\\' && q[1] == '\n') {
        q[0] = q[1] = ' ';
        nl++;
      }
      q++;
    }
    int here = line;
    line += nl + (*q == '\n');
    char save = *q;
    *q = '\0';
    char *s = p;
    while (isspace((unsigned char)*s)) s++;
    if (*s == '#') {
      char w[16] = "";
      sscanf(s + 1, " %15[a-z]", w);
      int opens = !strcmp(w, "if") || !strcmp(w, "ifdef") || !strcmp(w, "ifndef");
      if (skip_depth) {
        if (opens)
          depth++;
        else if (!strcmp(w, "endif") && --depth == 0)
          skip_depth = 0;
      } else if (directive(g, here, s + 1)) {
        skip_depth = 1;
        depth = 1;
      }
    } else if (!skip_depth) {
      for (char *c = s; *c;) {
        if (isspace((unsigned char)*c)) {
          c++;
          continue;
        }
        if (g->ntok >= MAX_TOKENS) die(g, here, "too many tokens");
        token *t = &g->tok[g->ntok++];
        t->line = here;
        size_t k = 0;
        if (isalnum((unsigned char)*c) || *c == '_') {
          while ((isalnum((unsigned char)*c) || *c == '_') && k < sizeof t->text - 1) t->text[k++] = *c++;
        } else if (*c == '"') {
          die(g, here, "string literal outside an '#ifdef __cplusplus' block");
        } else if (c[0] == '.' && c[1] == '.' && c[2] == '.') {
          memcpy(t->text, "...", 3), k = 3, c += 3;
        } else {
          t->text[k++] = *c++;
        }
        t->text[k] = '\0';
      }
    }
    *q = save;
    p = *q ? q + 1 : q;
  }
  if (skip_depth) die(g, line, "unterminated '#ifdef __cplusplus' block");
}

/** Tokens [a, b) of one statement. */
typedef struct {
  int a, b;
} span;

static const char *T(const gen *g, int i) { return g->tok[i].text; }
static int L(const gen *g, int i) { return g->tok[i].line; }
static int is_ident(const char *s) { return isalpha((unsigned char)s[0]) || s[0] == '_'; }

/** Index of the token closing the bracket opened at i ('(' or '{'), within [i, b). */
static int match(const gen *g, int i, int b) {
  char open = T(g, i)[0], close = open == '(' ? ')' : open == '{' ? '}' : ']';
  int d = 0;
  for (int k = i; k < b; k++) {
    if (T(g, k)[0] == open && !T(g, k)[1]) d++;
    if (T(g, k)[0] == close && !T(g, k)[1] && --d == 0) return k;
  }
  die(g, L(g, i), "unbalanced '%c'", open);
  return -1;
}

/** `typedef enum { ... } name;` */
static void do_enum(gen *g, span s) {
  int lb = s.a + 2;
  if (strcmp(T(g, lb), "{")) die(g, L(g, lb), "expected '{' after 'typedef enum' (tagged enums unsupported)");
  int rb = match(g, lb, s.b);
  if (rb + 2 != s.b || !is_ident(T(g, rb + 1))) die(g, L(g, rb), "expected 'typedef enum { ... } name;'");
  const char *tname = T(g, rb + 1);
  add_type(g, L(g, rb + 1), tname, KIND_ENUM);
  emit(&g->consts, &g->lconsts, "  ! enum %s\n", tname);
  long long next = 0;
  for (int i = lb + 1; i < rb;) {
    if (!is_ident(T(g, i))) die(g, L(g, i), "expected an enumerator, found '%s'", T(g, i));
    const char *name = T(g, i);
    long long v = next;
    int j = i + 1;
    if (!strcmp(T(g, j), "=")) {
      char lit[160];
      j++;
      if (!strcmp(T(g, j), "-")) {
        snprintf(lit, sizeof lit, "-%s", T(g, j + 1));
        j += 2;
      } else {
        snprintf(lit, sizeof lit, "%s", T(g, j));
        j++;
      }
      if (!parse_int(lit, &v)) die(g, L(g, i), "the value of '%s' is not an integer literal", name);
    }
    emit_constant(g, L(g, i), name, v);
    next = v + 1;
    if (j < rb && strcmp(T(g, j), ",")) die(g, L(g, j), "expected ',' after enumerator '%s'", name);
    i = j + 1;
  }
}

/** Fortran declaration of a struct field or by-value scalar argument of C type `ty` (NULL if none). */
static const char *scalar_type(const char *ty) {
  if (!strcmp(ty, "double")) return "real(c_double)";
  if (!strcmp(ty, "float")) return "real(c_float)";
  if (!strcmp(ty, "int32_t")) return "integer(c_int32_t)";
  if (!strcmp(ty, "int64_t")) return "integer(c_int64_t)";
  if (!strcmp(ty, "int")) return "integer(c_int)";
  if (!strcmp(ty, "size_t")) return "integer(c_size_t)";
  return NULL;
}

/** The ISO_C_BINDING name a Fortran declaration uses, e.g. "c_double" for "real(c_double)". */
static void kind_of(const char *decl, char *out, size_t len) {
  const char *o = strchr(decl, '('), *c = strchr(decl, ')');
  snprintf(out, len, "%.*s", (int)(c - o - 1), o + 1);
}

/** `typedef struct { fields } name;` */
static void do_struct(gen *g, span s) {
  int lb = s.a + 2, rb = match(g, lb, s.b);
  if (rb + 2 != s.b || !is_ident(T(g, rb + 1))) die(g, L(g, rb), "expected 'typedef struct { ... } name;'");
  const char *tname = T(g, rb + 1);
  add_global(g, L(g, rb + 1), tname);
  add_type(g, L(g, rb + 1), tname, KIND_STRUCT);
  emit(&g->types, &g->ltypes, "  type, bind(C), public :: %s\n", tname);
  char fields[256][128];
  int nf = 0;
  for (int i = lb + 1; i < rb;) {
    int e = i;
    while (e < rb && strcmp(T(g, e), ";")) e++;
    if (e == rb) die(g, L(g, i), "field declaration without ';'");
    int k = i;
    while (!strcmp(T(g, k), "const")) k++;
    const char *ty = T(g, k);
    const char *decl = scalar_type(ty);
    if (!decl && type_kind(g, ty) != KIND_HANDLE)
      die(g, L(g, k), "cannot map the field type '%s' of struct %s", ty, tname);
    for (k++; k < e;) { /* declarators: [*] name, separated by ',' */
      int ptr = 0;
      while (!strcmp(T(g, k), "*")) ptr = 1, k++;
      if (!is_ident(T(g, k))) die(g, L(g, k), "expected a field name, found '%s'", T(g, k));
      const char *fname = T(g, k);
      check_fortran_name(g, L(g, k), fname);
      for (int f = 0; f < nf; f++)
        if (same_name(fields[f], fname))
          die(g, L(g, k), "fields '%s' and '%s' clash in Fortran", fname, fields[f]);
      if (nf >= 256) die(g, L(g, k), "too many fields");
      snprintf(fields[nf++], sizeof fields[0], "%s", fname);
      if (!strcmp(T(g, k + 1), "[")) die(g, L(g, k), "array field '%s' is not supported", fname);
      const char *fd = ptr || type_kind(g, ty) == KIND_HANDLE ? "type(c_ptr)" : decl;
      emit(&g->types, &g->ltypes, "    %s :: %s\n", fd, fname);
      k++;
      if (k < e && strcmp(T(g, k), ",")) die(g, L(g, k), "unexpected '%s' in a field declaration", T(g, k));
      if (k < e) k++;
    }
    i = e + 1;
  }
  if (!nf) die(g, L(g, lb), "struct %s has no fields", tname);
  emit(&g->types, &g->ltypes, "  end type %s\n", tname);
}

/** One parameter or return type: tokens [a, b) without the name. Returns the Fortran type or dies. */
static const char *map_type(gen *g, int a, int b, int is_return, const char *what) {
  int ptr = 0, n = 0;
  const char *base = NULL;
  for (int i = a; i < b; i++) {
    const char *t = T(g, i);
    if (!strcmp(t, "const")) continue;
    if (!strcmp(t, "*")) {
      ptr++;
      continue;
    }
    if (!strcmp(t, "[")) { /* x[] or x[N]: a pointer */
      int r = match(g, i, b);
      i = r;
      ptr++;
      continue;
    }
    base = t;
    n++;
  }
  if (n != 1) die(g, L(g, a), "cannot map the type of %s (expected one type name)", what);
  if (ptr) return "type(c_ptr)";
  if (!strcmp(base, "void")) return is_return ? "" : NULL;
  const char *d = scalar_type(base);
  if (d) {
    if (is_return && !strcmp(base, "size_t"))
      die(g, L(g, a), "cannot map the return type size_t of %s", what);
    return d;
  }
  switch (type_kind(g, base)) {
  case KIND_HANDLE: return "type(c_ptr)";
  case KIND_FUNPTR:
    if (!is_return) return "type(c_funptr)";
    break;
  default: break;
  }
  die(g, L(g, a),
      "cannot map the type '%s' of %s (enum and struct types by value, char, bool and unsigned "
      "are not supported: use int32_t or a pointer)",
      base, what);
  return NULL;
}

/** Append a Fortran statement, continued with '&' at LINE_WRAP columns after the separators ", ". */
static void emit_wrapped(gen *g, const char *indent, const char *text) {
  size_t col = 0, len = strlen(text);
  const char *p = text;
  char buf[4096];
  size_t k = 0;
  k += (size_t)snprintf(buf + k, sizeof buf - k, "%s", indent);
  col = strlen(indent);
  while (*p) {
    const char *q = strstr(p, ", ");
    size_t piece = q ? (size_t)(q - p) + 2 : len - (size_t)(p - text);
    if (col + piece > LINE_WRAP && col > strlen(indent) + 8) {
      k += (size_t)snprintf(buf + k, sizeof buf - k, "&\n%s    ", indent);
      col = strlen(indent) + 4;
    }
    if (k + piece + 8 >= sizeof buf) die(g, 0, "declaration too long");
    memcpy(buf + k, p, piece);
    k += piece;
    col += piece;
    p += piece;
  }
  buf[k] = '\0';
  emit(&g->ifaces, &g->lifaces, "%s\n", buf);
}

/** `EXPORT ret name(args);` -> one interface body. */
static void do_function(gen *g, span s) {
  int a = s.a;
  while (a < s.b && is_attr_macro(g, T(g, a))) a++;
  int lp = -1;
  for (int i = a; i < s.b; i++)
    if (!strcmp(T(g, i), "(")) {
      lp = i;
      break;
    }
  if (lp < a + 2 || !is_ident(T(g, lp - 1))) die(g, L(g, a), "expected a function declaration");
  int rp = match(g, lp, s.b);
  if (rp + 1 != s.b)
    die(g, L(g, rp),
        "unexpected tokens after the parameter list (function pointers "
        "must be typedefs)");
  const char *fname = T(g, lp - 1);
  int line = L(g, lp - 1);
  char what[192];
  snprintf(what, sizeof what, "the result of %.127s", fname);
  const char *rtype = map_type(g, a, lp - 1, 1, what);
  add_global(g, line, fname);

  /* parameters */
  char names[64][128], decls[64][32];
  int np = 0;
  if (!(rp == lp + 2 && !strcmp(T(g, lp + 1), "void"))) {
    for (int i = lp + 1; i < rp;) {
      int e = i, d = 0;
      while (e < rp && (d || strcmp(T(g, e), ","))) {
        if (!strcmp(T(g, e), "(") || !strcmp(T(g, e), "[")) d++;
        if (!strcmp(T(g, e), ")") || !strcmp(T(g, e), "]")) d--;
        e++;
      }
      if (!strcmp(T(g, i), "...")) die(g, L(g, i), "variadic function %s cannot be bound", fname);
      if (np >= 64) die(g, L(g, i), "too many parameters");
      /* the name is the last identifier before an optional [..] */
      int nm = e - 1;
      if (!strcmp(T(g, nm), "]")) {
        while (nm > i && strcmp(T(g, nm), "[")) nm--;
        nm--;
      }
      int named = nm > i && is_ident(T(g, nm)) && !scalar_type(T(g, nm)) && type_kind(g, T(g, nm)) < 0 &&
                  strcmp(T(g, nm), "void") && strcmp(T(g, nm), "const");
      if (named)
        snprintf(names[np], sizeof names[0], "%s", T(g, nm));
      else
        snprintf(names[np], sizeof names[0], "arg%d", np + 1);
      char pw[300];
      snprintf(pw, sizeof pw, "argument '%.127s' of %.127s", names[np], fname);
      /* type tokens: [i, nm) plus the brackets after the name */
      const char *ft;
      if (named) {
        int ptr_after = nm + 1 < e && !strcmp(T(g, nm + 1), "[");
        ft = map_type(g, i, nm, 0, pw);
        if (ptr_after) ft = "type(c_ptr)";
      } else {
        ft = map_type(g, i, e, 0, pw);
      }
      if (!ft) die(g, L(g, i), "'void' must be the only parameter of %s", fname);
      snprintf(decls[np], sizeof decls[0], "%s", ft);
      check_fortran_name(g, L(g, i), names[np]);
      if (same_name(names[np], fname)) die(g, L(g, i), "argument '%s' clashes with its function", names[np]);
      for (int k = 0; k < np; k++)
        if (same_name(names[k], names[np]))
          die(g, L(g, i), "arguments '%s' and '%s' of %s clash in Fortran", names[k], names[np], fname);
      np++;
      i = e + 1;
    }
  }

  /* kinds to import (only ISO_C_BINDING names, which must not clash with the argument names) */
  char kinds[16][32];
  int nk = 0;
  for (int k = 0; k <= np; k++) {
    const char *d = k < np ? decls[k] : rtype;
    if (!d || !*d) continue;
    char kn[32];
    kind_of(d, kn, sizeof kn);
    int seen = 0;
    for (int j = 0; j < nk; j++) seen |= !strcmp(kinds[j], kn);
    if (!seen) snprintf(kinds[nk++], sizeof kinds[0], "%s", kn);
  }
  for (int k = 0; k < np; k++)
    for (int j = 0; j < nk; j++)
      if (same_name(names[k], kinds[j]))
        die(g, line, "argument '%s' of %s clashes with an imported kind", names[k], fname);

  const char *unit = *rtype ? "function" : "subroutine";
  char head[2048];
  size_t k = (size_t)snprintf(head, sizeof head, "%s %s(", unit, fname);
  for (int p = 0; p < np; p++)
    k += (size_t)snprintf(head + k, sizeof head - k, "%s%s", p ? ", " : "", names[p]);
  snprintf(head + k, sizeof head - k, ") bind(C, name=\"%s\")", fname);
  emit_wrapped(g, "    ", head);
  if (nk) {
    char imp[512];
    size_t m = (size_t)snprintf(imp, sizeof imp, "import :: ");
    for (int j = 0; j < nk; j++)
      m += (size_t)snprintf(imp + m, sizeof imp - m, "%s%s", j ? ", " : "", kinds[j]);
    emit_wrapped(g, "      ", imp);
  }
  emit(&g->ifaces, &g->lifaces, "      implicit none\n");
  for (int p = 0; p < np; p++) /* everything is passed by value (pointers as the address itself) */
    emit(&g->ifaces, &g->lifaces, "      %s, value :: %s\n", decls[p], names[p]);
  if (*rtype) emit(&g->ifaces, &g->lifaces, "      %s :: %s\n", rtype, fname);
  emit(&g->ifaces, &g->lifaces, "    end %s %s\n", unit, fname);
}

/** `typedef ...;` */
static void do_typedef(gen *g, span s) {
  const char *t1 = T(g, s.a + 1);
  if (!strcmp(t1, "enum")) {
    do_enum(g, s);
    return;
  }
  if (!strcmp(t1, "struct")) {
    if (!strcmp(T(g, s.a + 2), "{")) {
      do_struct(g, s);
      return;
    }
    /* typedef struct tag *name; */
    if (s.b - s.a == 5 && is_ident(T(g, s.a + 2)) && !strcmp(T(g, s.a + 3), "*") && is_ident(T(g, s.a + 4))) {
      add_type(g, L(g, s.a), T(g, s.a + 4), KIND_HANDLE);
      return;
    }
    die(g, L(g, s.a),
        "unsupported struct typedef (only 'typedef struct { ... } name;' and "
        "'typedef struct tag *name;')");
  }
  /* typedef ret (*name)(args); */
  for (int i = s.a + 1; i + 3 < s.b; i++)
    if (!strcmp(T(g, i), "(") && !strcmp(T(g, i + 1), "*") && is_ident(T(g, i + 2)) &&
        !strcmp(T(g, i + 3), ")")) {
      if (i + 4 >= s.b || strcmp(T(g, i + 4), "(") || match(g, i + 4, s.b) + 1 != s.b)
        die(g, L(g, i), "unsupported function pointer typedef");
      add_type(g, L(g, i), T(g, i + 2), KIND_FUNPTR);
      emit(&g->consts, &g->lconsts, "  ! %s: a C function pointer, passed as type(c_funptr) (c_funloc)\n",
           T(g, i + 2));
      return;
    }
  die(g, L(g, s.a), "unsupported typedef (scalar aliases are not mapped)");
}

/** First line (1-based) where two texts differ, 0 when equal. */
static int first_difference(const char *a, const char *b) {
  int line = 1;
  for (; *a && *a == *b; a++, b++)
    if (*a == '\n') line++;
  return *a == *b ? 0 : line;
}

int main(int argc, char **argv) {
  const char *check = NULL;
  int argi = 1;
  if (argc >= 3 && !strcmp(argv[1], "--check")) {
    check = argv[2];
    argi = 3;
  }
  if (argc - argi < 1 || argc - argi > (check ? 1 : 2)) {
    fprintf(stderr,
            "usage: %s <pkrylov.h> [<output.inc>]\n"
            "       %s --check <checked-in.inc> <pkrylov.h>   (exit 1 when it differs)\n",
            argv[0], argv[0]);
    return 2;
  }
  static gen g;
  g.path = argv[argi];
  char *src = read_file(argv[argi]);
  strip_comments(src);
  tokenize(&g, src);
  for (int i = 0; i < g.ntok;) {
    span s = {i, i};
    int d = 0;
    while (s.b < g.ntok && (d || strcmp(T(&g, s.b), ";"))) {
      if (!strcmp(T(&g, s.b), "{")) d++;
      if (!strcmp(T(&g, s.b), "}")) d--;
      s.b++;
    }
    if (s.b == g.ntok) die(&g, L(&g, s.a), "declaration without ';'");
    if (s.b == s.a) die(&g, L(&g, s.a), "empty declaration");
    if (!strcmp(T(&g, s.a), "typedef"))
      do_typedef(&g, s);
    else if (is_attr_macro(&g, T(&g, s.a)))
      do_function(&g, s);
    else
      die(&g, L(&g, s.a), "cannot map this declaration (functions must start with the export macro)");
    i = s.b + 1;
  }
  char *text = NULL;
  size_t len = 0;
  emit(&text, &len, "%s",
       "! GENERATED by tools/gen_fortran_interfaces.c from include/pkrylov.h: DO NOT EDIT.\n"
       "! Regenerate with `cmake --build <build> --target pkrylov_fortran_interfaces`; the test\n"
       "! t800-fortran:interfaces_up_to_date fails when this file and the header disagree.\n"
       "! Included in the specification part of module pkrylov_mod (which uses ISO_C_BINDING): the\n"
       "! constants and types are public, the bind(C) interfaces private (the module's default).\n\n");
  emit(&text, &len, "  ! ---- constants ----\n");
  if (g.consts) emit(&text, &len, "%s", g.consts);
  emit(&text, &len, "\n  ! ---- structs ----\n");
  if (g.types) emit(&text, &len, "%s", g.types);
  emit(&text, &len, "\n  ! ---- functions ----\n  interface\n");
  if (g.ifaces) emit(&text, &len, "%s", g.ifaces);
  emit(&text, &len, "  end interface\n");
  int status = 0;
  if (check) {
    char *old = read_file(check);
    int line = first_difference(old, text);
    if (line) {
      fprintf(stderr,
              "gen_fortran_interfaces: %s is out of date with %s (first difference at line %d);\n"
              "  regenerate it: cmake --build <build> --target pkrylov_fortran_interfaces\n",
              check, argv[argi], line);
      status = 1;
    }
    free(old);
  } else {
    FILE *out = argc - argi == 2 ? fopen(argv[argi + 1], "w") : stdout;
    if (!out || fputs(text, out) == EOF || (out != stdout && fclose(out))) {
      fprintf(stderr, "gen_fortran_interfaces: cannot write %s\n",
              argc - argi == 2 ? argv[argi + 1] : "stdout");
      return 1;
    }
  }
  free(text);
  free(src);
  free(g.tok);
  free(g.consts), free(g.types), free(g.ifaces);
  return status;
}

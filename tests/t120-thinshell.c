/**
 * @file t120-thinshell.c
 * @brief The thin-shell model problem: the three forms (matrix-free thin shell, column stencil from
 *        pkrylov_thinshell_stencil_coefficients, CSR from the thin-shell export) give the same A; and the
 *        matrix itself against a reference built here from the formulas of model-problem.md with an
 *        independent geometry (cell areas by spherical excess of two triangles, great-circle lengths by
 *        chords): symmetric, A*1 = |T| V_k, SPD (dense dpotrf), panel area 4 pi / 6. Bad inputs.
 */
#include <string.h>

#include "pk_test.h"

#define PI 3.14159265358979323846

/* LAPACK Cholesky, Fortran calling convention (trailing hidden length of uplo) */
extern void dpotrf_(const char *uplo, const int *n, double *a, const int *lda, int *info, size_t len);


static pkrylov_thinshell_params params(int nx, int ny, int nz, int geometry) {
  pkrylov_thinshell_params p;
  memset(&p, 0, sizeof p);
  if (pkrylov_thinshell_params_default(nx, ny, nz, &p)) fprintf(stderr, "params_default failed\n");
  p.geometry = geometry;
  return p;
}

/* ---- CSR exports --------------------------------------------------------------------------------- */

typedef struct {
  int64_t n, nnz, *rp, *ci;
  double *v;
} csr_export;

static int export(pkrylov_operator A, csr_export *e) {
  memset(e, 0, sizeof *e);
  if (pkrylov_operator_get_info(A, &e->n, &e->nnz, NULL, NULL, NULL, NULL)) return 1;
  e->rp = malloc(sizeof(int64_t) * (size_t)(e->n + 1));
  e->ci = malloc(sizeof(int64_t) * (size_t)e->nnz);
  e->v = malloc(sizeof(double) * (size_t)e->nnz);
  if (!e->rp || !e->ci || !e->v) return 1;
  return pkrylov_operator_get_csr(A, e->rp, e->ci, e->v);
}

static void export_free(csr_export *e) { free(e->rp), free(e->ci), free(e->v); }

/** A[r][c] from an export; *found = whether stored. */
static double ex_entry(const csr_export *e, int64_t r, int64_t c, int *found) {
  for (int64_t p = e->rp[r]; p < e->rp[r + 1]; p++)
    if (e->ci[p] == c) {
      *found = 1;
      return e->v[p];
    }
  *found = 0;
  return 0.0;
}

/** Same structure, values equal to rel (relative to the larger magnitude). */
static void compare_exports(const csr_export *a, const csr_export *b, double rel, const char *what) {
  PK_EXPECT(a->n == b->n && a->nnz == b->nnz, "%s: n/nnz differ", what);
  if (a->n != b->n || a->nnz != b->nnz) return;
  int bad = 0;
  for (int64_t r = 0; r <= a->n; r++) bad += a->rp[r] != b->rp[r];
  PK_EXPECT(bad == 0, "%s: rowptr differs in %d places", what, bad);
  if (bad) return;
  for (int64_t p = 0; p < a->nnz; p++) {
    if (a->ci[p] != b->ci[p]) bad++;
    double m = fmax(fabs(a->v[p]), fabs(b->v[p]));
    if (fabs(a->v[p] - b->v[p]) > rel * m) bad++;
  }
  PK_EXPECT(bad == 0, "%s: %d entries differ", what, bad);
}

/* ---- the three forms ------------------------------------------------------------------------------ */

static int three_forms(const pkrylov_thinshell_params *p) {
  const int64_t n = (int64_t)p->nx * p->ny * p->nz;
  pkrylov_context ctx;
  pkrylov_operator T = NULL, S = NULL, C = NULL;
  csr_export eT, eS, eC;
  double *aW = malloc(sizeof(double) * n), *aS = malloc(sizeof(double) * n);
  double *aV = malloc(sizeof(double) * n), *aC = malloc(sizeof(double) * n);
  double *x = malloc(sizeof(double) * n), *yT = malloc(sizeof(double) * n);
  double *yS = malloc(sizeof(double) * n), *yC = malloc(sizeof(double) * n);
  PK_REQUIRE_OK(NULL, pkrylov_context_create(PKRYLOV_BACKEND_CPU, &ctx));
  PK_REQUIRE_OK(ctx, pkrylov_operator_create_thinshell(ctx, p, &T));
  PK_REQUIRE_OK(NULL, pkrylov_thinshell_stencil_coefficients(p, aW, aS, aV, aC));
  PK_REQUIRE_OK(ctx, pkrylov_operator_create_stencil7(ctx, p->nx, p->ny, p->nz, aW, aS, aV, aC, NULL, &S));
  PK_REQUIRE_OK(ctx, export(T, &eT));
  PK_REQUIRE_OK(ctx, pkrylov_operator_create_csr64(ctx, eT.n, 0, eT.rp, eT.ci, eT.v, &C));
  PK_REQUIRE_OK(ctx, export(S, &eS));
  PK_REQUIRE_OK(ctx, export(C, &eC));
  int64_t nn;
  int32_t type, nx, ny, nz;
  PK_REQUIRE_OK(ctx, pkrylov_operator_get_info(T, &nn, NULL, &type, &nx, &ny, &nz));
  PK_EXPECT(nn == n && type == PKRYLOV_OPERATOR_THINSHELL && nx == p->nx && ny == p->ny && nz == p->nz,
            "thin shell info");
  /* expected count: diagonal + both directions of every lateral and vertical coupling */
  const int64_t nnz_ref = n + 2LL * p->nz * ((p->nx - 1) * p->ny + p->nx * (p->ny - 1)) +
                          2LL * (p->nz - 1) * p->nx * p->ny;
  PK_EXPECT(eT.nnz == nnz_ref, "nnz %lld vs %lld", (long long)eT.nnz, (long long)nnz_ref);
  compare_exports(&eS, &eT, 1e-14, "stencil vs thin shell");
  compare_exports(&eC, &eT, 1e-14, "csr vs thin shell");
  uint64_t s = 2024;
  for (int64_t i = 0; i < n; i++) x[i] = pk_test_rand(&s);
  PK_REQUIRE_OK(ctx, pkrylov_operator_apply(T, PKRYLOV_MEM_HOST, x, yT));
  PK_REQUIRE_OK(ctx, pkrylov_operator_apply(S, PKRYLOV_MEM_HOST, x, yS));
  PK_REQUIRE_OK(ctx, pkrylov_operator_apply(C, PKRYLOV_MEM_HOST, x, yC));
  PK_EXPECT(pk_test_rel_diff(n, yS, yT) < 1e-13, "stencil vs thin shell apply %g",
            pk_test_rel_diff(n, yS, yT));
  PK_EXPECT(pk_test_rel_diff(n, yC, yT) < 1e-13, "csr vs thin shell apply %g", pk_test_rel_diff(n, yC, yT));
  PK_REQUIRE_OK(ctx, pkrylov_operator_destroy(&T));
  PK_REQUIRE_OK(ctx, pkrylov_operator_destroy(&S));
  PK_REQUIRE_OK(ctx, pkrylov_operator_destroy(&C));
  PK_REQUIRE_OK(NULL, pkrylov_context_destroy(&ctx));
  export_free(&eT), export_free(&eS), export_free(&eC);
  free(aW), free(aS), free(aV), free(aC), free(x), free(yT), free(yS), free(yC);
  return PK_PASS;
}

PK_TEST_CASE(three_forms_gnomonic) {
  pkrylov_thinshell_params p = params(6, 5, 7, PKRYLOV_GEOMETRY_GNOMONIC);
  if (three_forms(&p) != PK_PASS) return PK_FAIL;
  PK_TEST_END();
}

PK_TEST_CASE(three_forms_uniform) {
  pkrylov_thinshell_params p = params(4, 4, 3, PKRYLOV_GEOMETRY_UNIFORM);
  if (three_forms(&p) != PK_PASS) return PK_FAIL;
  PK_TEST_END();
}

PK_TEST_CASE(three_forms_large) {
  /* lines straddling the row chunks of the parallel apply: 67 x 45 x 9 */
  pkrylov_thinshell_params p = params(67, 45, 9, PKRYLOV_GEOMETRY_GNOMONIC);
  if (three_forms(&p) != PK_PASS) return PK_FAIL;
  PK_TEST_END();
}

/* ---- independent reference from model-problem.md --------------------------------------------------- */

typedef struct {
  double x, y, z;
} v3;

/** Point of the panel at equiangular coordinates (xi, eta): (1, tan xi, tan eta) normalised. */
static v3 panel_point(double xi, double eta) {
  double X = tan(xi), Y = tan(eta), s = sqrt(1 + X * X + Y * Y);
  return (v3){1 / s, X / s, Y / s};
}

/** Great-circle distance by the chord: 2 asin(|u - v| / 2). */
static double chord_dist(v3 u, v3 v) {
  double dx = u.x - v.x, dy = u.y - v.y, dz = u.z - v.z;
  return 2 * asin(sqrt(dx * dx + dy * dy + dz * dz) / 2);
}

/** Solid angle of the spherical triangle abc (Van Oosterom - Strackee). */
static double tri_area(v3 a, v3 b, v3 c) {
  double det = a.x * (b.y * c.z - b.z * c.y) - a.y * (b.x * c.z - b.z * c.x) + a.z * (b.x * c.y - b.y * c.x);
  double ab = a.x * b.x + a.y * b.y + a.z * b.z, bc = b.x * c.x + b.y * c.y + b.z * c.z;
  double ca = c.x * a.x + c.y * a.y + c.z * a.z;
  return 2 * atan2(fabs(det), 1 + ab + bc + ca);
}

typedef struct {
  int nx, ny, nz, gnomonic;
  double *area;      /* nx*ny */
  double *ax, *ay;   /* alpha of faces, as in the model problem: ax[(i) + (nx+1) j] west face of (i,j) */
  double *a, *b, *c, *d;
} reference;

/** Build the reference geometry and level vectors from model-problem.md, literally. */
static void ref_build(const pkrylov_thinshell_params *p, reference *R) {
  const int nx = p->nx, ny = p->ny, nz = p->nz;
  R->nx = nx, R->ny = ny, R->nz = nz, R->gnomonic = p->geometry == PKRYLOV_GEOMETRY_GNOMONIC;
  R->area = calloc((size_t)nx * ny, sizeof(double));
  R->ax = calloc((size_t)(nx + 1) * ny, sizeof(double));
  R->ay = calloc((size_t)nx * (ny + 1), sizeof(double));
  R->a = calloc(nz, sizeof(double)), R->b = calloc(nz, sizeof(double));
  R->c = calloc(nz, sizeof(double)), R->d = calloc(nz, sizeof(double));
  const double dxi = (PI / 2) / nx, deta = (PI / 2) / ny;
  for (int j = 0; j < ny; j++)
    for (int i = 0; i < nx; i++) {
      double x0 = -PI / 4 + i * dxi, x1 = x0 + dxi, e0 = -PI / 4 + j * deta, e1 = e0 + deta;
      if (R->gnomonic) {
        v3 p00 = panel_point(x0, e0), p10 = panel_point(x1, e0), p11 = panel_point(x1, e1);
        v3 p01 = panel_point(x0, e1);
        R->area[i + nx * j] = tri_area(p00, p10, p11) + tri_area(p00, p11, p01);
        if (i > 0) /* shared edge xi = x0, eta in [e0, e1]; centres at the mid angles */
          R->ax[i + (nx + 1) * j] = chord_dist(panel_point(x0, e0), panel_point(x0, e1)) /
                                    chord_dist(panel_point(x0 - dxi / 2, e0 + deta / 2),
                                               panel_point(x0 + dxi / 2, e0 + deta / 2));
        if (j > 0)
          R->ay[i + nx * j] = chord_dist(panel_point(x0, e0), panel_point(x1, e0)) /
                              chord_dist(panel_point(x0 + dxi / 2, e0 - deta / 2),
                                         panel_point(x0 + dxi / 2, e0 + deta / 2));
      } else {
        R->area[i + nx * j] = dxi * dxi;
        if (i > 0) R->ax[i + (nx + 1) * j] = 1;
        if (j > 0) R->ay[i + nx * j] = 1;
      }
    }
  double *r = calloc(nz + 1, sizeof(double)), *rho = calloc(nz, sizeof(double));
  double *beta = calloc(nz + 1, sizeof(double));
  for (int k = 0; k <= nz; k++) r[k] = 1 + p->H * ((double)k / nz) * ((double)k / nz);
  for (int k = 0; k < nz; k++) rho[k] = (r[k] + r[k + 1]) / 2;
  for (int k = 1; k < nz; k++) beta[k] = r[k] * r[k] / (rho[k] - rho[k - 1]);
  const double omega = p->nu * (PI / 2) / nx;
  for (int k = 0; k < nz; k++) {
    R->a[k] = omega * omega * (r[k + 1] - r[k]);
    R->b[k] = omega * omega * p->lambda * p->lambda * beta[k];
    R->c[k] = omega * omega * p->lambda * p->lambda * beta[k + 1];
    R->d[k] = (r[k + 1] * r[k + 1] * r[k + 1] - r[k] * r[k] * r[k]) / 3;
  }
  free(r), free(rho), free(beta);
}

static void ref_free(reference *R) {
  free(R->area), free(R->ax), free(R->ay), free(R->a), free(R->b), free(R->c), free(R->d);
}

/** Check every row of the export against the reference entries (structure exact, values to rel). */
static void check_against_reference(const csr_export *e, const reference *R, double rel) {
  const int nx = R->nx, ny = R->ny, nz = R->nz;
  int bad = 0;
  for (int k = 0; k < nz; k++)
    for (int j = 0; j < ny; j++)
      for (int i = 0; i < nx; i++) {
        const int64_t c = i + (int64_t)nx * (j + (int64_t)ny * k), nxy = (int64_t)nx * ny;
        const double T = R->area[i + nx * j];
        double aw = i > 0 ? R->ax[i + (nx + 1) * j] : 0, ae = i < nx - 1 ? R->ax[i + 1 + (nx + 1) * j] : 0;
        double as = j > 0 ? R->ay[i + nx * j] : 0, an = j < ny - 1 ? R->ay[i + nx * (j + 1)] : 0;
        int64_t cols[7];
        double vals[7];
        int cnt = 0;
        if (k > 0) cols[cnt] = c - nxy, vals[cnt++] = -T * R->b[k];
        if (j > 0) cols[cnt] = c - nx, vals[cnt++] = -as * R->a[k];
        if (i > 0) cols[cnt] = c - 1, vals[cnt++] = -aw * R->a[k];
        cols[cnt] = c, vals[cnt++] = T * (R->d[k] + R->b[k] + R->c[k]) + (aw + ae + as + an) * R->a[k];
        if (i < nx - 1) cols[cnt] = c + 1, vals[cnt++] = -ae * R->a[k];
        if (j < ny - 1) cols[cnt] = c + nx, vals[cnt++] = -an * R->a[k];
        if (k < nz - 1) cols[cnt] = c + nxy, vals[cnt++] = -T * R->c[k];
        double m = 0;
        for (int q = 0; q < cnt; q++) m = fmax(m, fabs(vals[q]));
        if (e->rp[c + 1] - e->rp[c] != cnt) {
          bad++;
          continue;
        }
        for (int q = 0; q < cnt; q++) {
          int found;
          double v = ex_entry(e, c, cols[q], &found);
          if (!found || fabs(v - vals[q]) > rel * m) {
            if (bad < 5)
              fprintf(stderr, "cell (%d,%d,%d) col %lld: %.17g vs reference %.17g\n", i, j, k,
                      (long long)cols[q], v, vals[q]);
            bad++;
          }
        }
      }
  PK_EXPECT(bad == 0, "%d entries differ from the reference", bad);
}

/** Matrix against the reference, exact symmetry of the export, and A*1 = |T| V_k. */
static int check_reference(const pkrylov_thinshell_params *p) {
  pkrylov_context ctx;
  pkrylov_operator A = NULL;
  csr_export e;
  reference R;
  ref_build(p, &R);
  PK_REQUIRE_OK(NULL, pkrylov_context_create(PKRYLOV_BACKEND_CPU, &ctx));
  PK_REQUIRE_OK(ctx, pkrylov_operator_create_thinshell(ctx, p, &A));
  PK_REQUIRE_OK(ctx, export(A, &e));
  check_against_reference(&e, &R, 1e-10);
  /* symmetric, exactly */
  int asym = 0;
  for (int64_t r = 0; r < e.n; r++)
    for (int64_t q = e.rp[r]; q < e.rp[r + 1]; q++) {
      int found;
      if (ex_entry(&e, e.ci[q], r, &found) != e.v[q] || !found) asym++;
    }
  PK_EXPECT(asym == 0, "%d entries without their transpose", asym);
  /* A * 1 = |T_i| V_k: the horizontal and vertical couplings sum to zero over a row */
  double *one = malloc(sizeof(double) * e.n), *y = malloc(sizeof(double) * e.n);
  for (int64_t i = 0; i < e.n; i++) one[i] = 1.0;
  PK_REQUIRE_OK(ctx, pkrylov_operator_apply(A, PKRYLOV_MEM_HOST, one, y));
  int badsum = 0;
  for (int k = 0; k < p->nz; k++)
    for (int col = 0; col < p->nx * p->ny; col++) {
      int64_t c = col + (int64_t)p->nx * p->ny * k;
      double rowabs = 0;
      for (int64_t q = e.rp[c]; q < e.rp[c + 1]; q++) rowabs += fabs(e.v[q]);
      double expect = R.area[col] * R.d[k];
      if (fabs(y[c] - expect) > 1e-13 * rowabs + 1e-10 * fabs(expect)) {
        if (badsum < 5) fprintf(stderr, "A*1 at %lld: %.17g vs %.17g\n", (long long)c, y[c], expect);
        badsum++;
      }
    }
  PK_EXPECT(badsum == 0, "%d rows with A*1 != |T| V_k", badsum);
  free(one), free(y);
  export_free(&e);
  ref_free(&R);
  PK_REQUIRE_OK(ctx, pkrylov_operator_destroy(&A));
  PK_REQUIRE_OK(NULL, pkrylov_context_destroy(&ctx));
  return PK_PASS;
}

PK_TEST_CASE(reference_gnomonic) {
  pkrylov_thinshell_params p = params(6, 5, 7, PKRYLOV_GEOMETRY_GNOMONIC);
  if (check_reference(&p) != PK_PASS) return PK_FAIL;
  /* non-default parameters must be honoured */
  p.H = 0.03, p.lambda = 0.5, p.nu = 3.0;
  if (check_reference(&p) != PK_PASS) return PK_FAIL;
  PK_TEST_END();
}

PK_TEST_CASE(reference_uniform) {
  pkrylov_thinshell_params p = params(4, 4, 3, PKRYLOV_GEOMETRY_UNIFORM);
  if (check_reference(&p) != PK_PASS) return PK_FAIL;
  p = params(7, 2, 1, PKRYLOV_GEOMETRY_UNIFORM); /* one level: no vertical coupling */
  p.lambda = 2.0;
  if (check_reference(&p) != PK_PASS) return PK_FAIL;
  PK_TEST_END();
}

/** Dense Cholesky of the operator succeeds. */
static int is_spd(const pkrylov_thinshell_params *p) {
  pkrylov_context ctx;
  pkrylov_operator A = NULL;
  int64_t n;
  if (pkrylov_context_create(PKRYLOV_BACKEND_CPU, &ctx)) return 0;
  if (pkrylov_operator_create_thinshell(ctx, p, &A)) return 0;
  double *D = pk_test_dense_from_operator(A, &n);
  int nn = (int)n, info = -1;
  if (D) dpotrf_("L", &nn, D, &nn, &info, 1);
  free(D);
  pkrylov_operator_destroy(&A);
  pkrylov_context_destroy(&ctx);
  return info == 0;
}

PK_TEST_CASE(spd_dense_cholesky) {
  pkrylov_thinshell_params p = params(5, 4, 6, PKRYLOV_GEOMETRY_GNOMONIC);
  PK_EXPECT(is_spd(&p), "gnomonic 5x4x6 not SPD");
  p = params(4, 4, 3, PKRYLOV_GEOMETRY_UNIFORM);
  PK_EXPECT(is_spd(&p), "uniform 4x4x3 not SPD");
  p = params(6, 6, 8, PKRYLOV_GEOMETRY_GNOMONIC);
  p.nu = 40, p.H = 0.1;
  PK_EXPECT(is_spd(&p), "gnomonic 6x6x8 (nu 40, H 0.1) not SPD");
  PK_TEST_END();
}

PK_TEST_CASE(gnomonic_panel_area_and_alpha) {
  /* with a tiny nu the couplings vanish next to the mass, so A*1 / V_k gives the library's |T| */
  pkrylov_thinshell_params p = params(8, 6, 2, PKRYLOV_GEOMETRY_GNOMONIC);
  p.nu = 1e-7;
  reference R;
  ref_build(&p, &R);
  const int nx = p.nx, ny = p.ny, ncol = nx * ny;
  double sum_ref = 0;
  for (int c = 0; c < ncol; c++) sum_ref += R.area[c];
  PK_EXPECT_NEAR(sum_ref, 4 * PI / 6, 1e-12);
  pkrylov_context ctx;
  pkrylov_operator A = NULL;
  PK_REQUIRE_OK(NULL, pkrylov_context_create(PKRYLOV_BACKEND_CPU, &ctx));
  PK_REQUIRE_OK(ctx, pkrylov_operator_create_thinshell(ctx, &p, &A));
  double one[2 * 48], y[2 * 48];
  for (int i = 0; i < 2 * ncol; i++) one[i] = 1;
  PK_REQUIRE_OK(ctx, pkrylov_operator_apply(A, PKRYLOV_MEM_HOST, one, y));
  for (int k = 0; k < 2; k++) {
    double sum = 0;
    for (int c = 0; c < ncol; c++) {
      double area = y[c + ncol * k] / R.d[k];
      PK_EXPECT(fabs(area - R.area[c]) <= 1e-12 * R.area[c], "area of column %d: %.17g vs %.17g", c, area,
                R.area[c]);
      sum += area;
    }
    PK_EXPECT_NEAR(sum, 4 * PI / 6, 1e-12);
  }
  PK_REQUIRE_OK(ctx, pkrylov_operator_destroy(&A));
  /* face weights from the stencil coefficients: alpha = -aW / a_k; panel mirror symmetry in xi and eta,
     and at the panel centre line the reference values */
  p = params(8, 6, 2, PKRYLOV_GEOMETRY_GNOMONIC);
  ref_free(&R);
  ref_build(&p, &R);
  double aW[96], aS[96], aV[96], aC[96];
  PK_REQUIRE_OK(NULL, pkrylov_thinshell_stencil_coefficients(&p, aW, aS, aV, aC));
  for (int k = 0; k < 2; k++)
    for (int j = 0; j < ny; j++)
      for (int i = 0; i < nx; i++) {
        int c = i + nx * (j + ny * k);
        double alx = -aW[c] / R.a[k], aly = -aS[c] / R.a[k];
        if (i == 0) PK_EXPECT(aW[c] == 0, "aW at i = 0");
        if (j == 0) PK_EXPECT(aS[c] == 0, "aS at j = 0");
        if (k == 0) PK_EXPECT(aV[c] == 0, "aV at k = 0");
        if (i > 0) {
          PK_EXPECT(fabs(alx - R.ax[i + (nx + 1) * j]) <= 1e-10 * alx, "alpha x (%d,%d)", i, j);
          /* mirror xi -> -xi: face i of row j equals face nx - i; eta -> -eta: row j equals ny-1-j */
          int cm = (nx - i) + nx * (j + ny * k), cn = i + nx * ((ny - 1 - j) + ny * k);
          PK_EXPECT(fabs(aW[c] - aW[cm]) <= 1e-12 * fabs(aW[c]), "mirror xi (%d,%d)", i, j);
          PK_EXPECT(fabs(aW[c] - aW[cn]) <= 1e-12 * fabs(aW[c]), "mirror eta (%d,%d)", i, j);
        }
        if (j > 0) PK_EXPECT(fabs(aly - R.ay[i + nx * j]) <= 1e-10 * aly, "alpha y (%d,%d)", i, j);
        /* the lateral weights are all > 0 and the vertical couplings < 0 */
        if (i > 0) PK_EXPECT(aW[c] < 0, "aW sign");
        if (k > 0) PK_EXPECT(aV[c] < 0, "aV sign");
      }
  ref_free(&R);
  PK_REQUIRE_OK(NULL, pkrylov_context_destroy(&ctx));
  PK_TEST_END();
}

/* ---- bad inputs ---------------------------------------------------------------------------------- */

PK_TEST_CASE(bad_nz) {
  pkrylov_context ctx;
  pkrylov_operator A = NULL;
  pkrylov_thinshell_params p = params(4, 4, 3, PKRYLOV_GEOMETRY_GNOMONIC);
  PK_REQUIRE_OK(NULL, pkrylov_context_create(PKRYLOV_BACKEND_CPU, &ctx));
  p.nz = 0;
  PK_EXPECT_CODE(ctx, pkrylov_operator_create_thinshell(ctx, &p, &A), PKRYLOV_ERR_INVALID_SIZE);
  PK_EXPECT(pk_test_msg_has(ctx, "'p->nz' = 0"), "names p->nz");
  p.nz = 3, p.nx = -1;
  PK_EXPECT_CODE(ctx, pkrylov_operator_create_thinshell(ctx, &p, &A), PKRYLOV_ERR_INVALID_SIZE);
  PK_EXPECT(pk_test_msg_has(ctx, "'p->nx'"), "names p->nx");
  double w[48];
  PK_EXPECT_CODE(NULL, pkrylov_thinshell_stencil_coefficients(&p, w, w, w, w), PKRYLOV_ERR_INVALID_SIZE);
  PK_EXPECT(pk_test_msg_has(NULL, "'p->nx'"), "orphan message names p->nx");
  PK_EXPECT_CODE(NULL, pkrylov_thinshell_params_default(4, 0, 3, &p), PKRYLOV_ERR_INVALID_SIZE);
  PK_EXPECT(pk_test_msg_has(NULL, "'ny'"), "names ny");
  PK_EXPECT(A == NULL, "handle modified");
  PK_REQUIRE_OK(NULL, pkrylov_context_destroy(&ctx));
  PK_TEST_END();
}

PK_TEST_CASE(bad_scalars) {
  pkrylov_context ctx;
  pkrylov_operator A = NULL;
  PK_REQUIRE_OK(NULL, pkrylov_context_create(PKRYLOV_BACKEND_CPU, &ctx));
  const double badH[] = {0.0, -0.01, NAN, INFINITY};
  for (int t = 0; t < 4; t++) {
    pkrylov_thinshell_params p = params(4, 4, 3, PKRYLOV_GEOMETRY_GNOMONIC);
    p.H = badH[t];
    PK_EXPECT_CODE(ctx, pkrylov_operator_create_thinshell(ctx, &p, &A), PKRYLOV_ERR_INVALID_VALUE);
    PK_EXPECT(pk_test_msg_has(ctx, "'p->H'"), "names p->H");
  }
  pkrylov_thinshell_params p = params(4, 4, 3, PKRYLOV_GEOMETRY_GNOMONIC);
  p.lambda = 0;
  PK_EXPECT_CODE(ctx, pkrylov_operator_create_thinshell(ctx, &p, &A), PKRYLOV_ERR_INVALID_VALUE);
  PK_EXPECT(pk_test_msg_has(ctx, "'p->lambda'"), "names p->lambda");
  p.lambda = 1, p.nu = -10;
  PK_EXPECT_CODE(ctx, pkrylov_operator_create_thinshell(ctx, &p, &A), PKRYLOV_ERR_INVALID_VALUE);
  PK_EXPECT(pk_test_msg_has(ctx, "'p->nu'"), "names p->nu");
  PK_EXPECT(A == NULL, "handle modified");
  PK_REQUIRE_OK(NULL, pkrylov_context_destroy(&ctx));
  PK_TEST_END();
}

PK_TEST_CASE(bad_geometry) {
  pkrylov_context ctx;
  pkrylov_operator A = NULL;
  pkrylov_thinshell_params p = params(4, 4, 3, PKRYLOV_GEOMETRY_GNOMONIC);
  p.geometry = PKRYLOV_OPERATOR_THINSHELL; /* a value of another enumeration */
  PK_REQUIRE_OK(NULL, pkrylov_context_create(PKRYLOV_BACKEND_CPU, &ctx));
  PK_EXPECT_CODE(ctx, pkrylov_operator_create_thinshell(ctx, &p, &A), PKRYLOV_ERR_INVALID_VALUE);
  PK_EXPECT(pk_test_msg_has(ctx, "'p->geometry' = 702"), "names p->geometry");
  double w[48];
  for (int i = 0; i < 48; i++) w[i] = -5;
  PK_EXPECT_CODE(NULL, pkrylov_thinshell_stencil_coefficients(&p, w, w, w, w), PKRYLOV_ERR_INVALID_VALUE);
  PK_EXPECT(pk_test_msg_has(NULL, "'p->geometry'"), "orphan message names p->geometry");
  for (int i = 0; i < 48; i++) PK_EXPECT(w[i] == -5, "output modified on error");
  PK_EXPECT(A == NULL, "handle modified");
  PK_REQUIRE_OK(NULL, pkrylov_context_destroy(&ctx));
  PK_TEST_END();
}

PK_TEST_CASE(bad_null) {
  pkrylov_context ctx;
  pkrylov_operator A = NULL;
  pkrylov_thinshell_params p = params(4, 4, 3, PKRYLOV_GEOMETRY_GNOMONIC);
  double w[48];
  PK_EXPECT_CODE(NULL, pkrylov_operator_create_thinshell(NULL, &p, &A), PKRYLOV_ERR_NULL_POINTER);
  PK_EXPECT(pk_test_msg_has(NULL, "'ctx'"), "names ctx");
  PK_REQUIRE_OK(NULL, pkrylov_context_create(PKRYLOV_BACKEND_CPU, &ctx));
  PK_EXPECT_CODE(ctx, pkrylov_operator_create_thinshell(ctx, NULL, &A), PKRYLOV_ERR_NULL_POINTER);
  PK_EXPECT(pk_test_msg_has(ctx, "'p'"), "names p");
  PK_EXPECT_CODE(ctx, pkrylov_operator_create_thinshell(ctx, &p, NULL), PKRYLOV_ERR_NULL_POINTER);
  PK_EXPECT(pk_test_msg_has(ctx, "'A'"), "names A");
  PK_EXPECT_CODE(NULL, pkrylov_thinshell_stencil_coefficients(&p, w, w, NULL, w), PKRYLOV_ERR_NULL_POINTER);
  PK_EXPECT(pk_test_msg_has(NULL, "'aV'"), "names aV");
  PK_EXPECT_CODE(NULL, pkrylov_thinshell_stencil_coefficients(NULL, w, w, w, w), PKRYLOV_ERR_NULL_POINTER);
  PK_EXPECT(pk_test_msg_has(NULL, "'p'"), "names p");
  PK_EXPECT_CODE(NULL, pkrylov_thinshell_params_default(4, 4, 3, NULL), PKRYLOV_ERR_NULL_POINTER);
  PK_EXPECT(A == NULL, "handle modified");
  PK_REQUIRE_OK(NULL, pkrylov_context_destroy(&ctx));
  PK_TEST_END();
}

PK_TEST_CASE(defaults) {
  pkrylov_thinshell_params p;
  memset(&p, 0, sizeof p);
  PK_REQUIRE_OK(NULL, pkrylov_thinshell_params_default(3, 5, 7, &p));
  PK_EXPECT(p.H == 0.01 && p.lambda == 1.0 && p.nu == 10.0, "default scalars");
  PK_EXPECT(p.nx == 3 && p.ny == 5 && p.nz == 7 && p.geometry == PKRYLOV_GEOMETRY_GNOMONIC, "default grid");
  PK_TEST_END();
}

PK_TEST_MAIN(PK_TEST_ENTRY(three_forms_gnomonic), PK_TEST_ENTRY(three_forms_uniform),
             PK_TEST_ENTRY(three_forms_large), PK_TEST_ENTRY(reference_gnomonic),
             PK_TEST_ENTRY(reference_uniform), PK_TEST_ENTRY(spd_dense_cholesky),
             PK_TEST_ENTRY(gnomonic_panel_area_and_alpha),
             PK_TEST_ENTRY(bad_nz), PK_TEST_ENTRY(bad_scalars), PK_TEST_ENTRY(bad_geometry),
             PK_TEST_ENTRY(bad_null), PK_TEST_ENTRY(defaults))

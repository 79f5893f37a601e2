/**
 * @file t710-cuda-solver.c
 * @brief The CUDA backend through the public API, against the CPU backend: operator and preconditioner
 *        applications (host and device pointers), whole solves (same iterations, same solutions), mixed
 *        precision, outcomes, bad input on the device path. Every case skips (77) without a GPU.
 */
#include <cuda_runtime.h>
#include <string.h>

#include "pk_test.h"
#include "pk_cuda_test.h"

static double *vec(int64_t n) { return calloc((size_t)n, sizeof(double)); }
static double *rand_vec(int64_t n, uint64_t seed) {
  double *v = vec(n);
  for (int64_t i = 0; i < n; i++) v[i] = pk_test_rand(&seed);
  return v;
}
static double *poisoned(int64_t n) {
  double *v = malloc(sizeof(double) * (size_t)n);
  for (int64_t i = 0; i < n; i++) v[i] = NAN;
  return v;
}

/** The same operator on two contexts: form 0 thin shell, 1 stencil (optionally masked), 2 CSR export. */
static int make_op(pkrylov_context ctx, int form, int nx, int ny, int nz, int masked, pkrylov_operator *A) {
  pkrylov_thinshell_params p;
  int rc = pkrylov_thinshell_params_default(nx, ny, nz, &p);
  if (rc) return rc;
  if (form == 0) return pkrylov_operator_create_thinshell(ctx, &p, A);
  const int64_t n = (int64_t)nx * ny * nz;
  double *aw = vec(n), *as = vec(n), *av = vec(n), *ac = vec(n);
  int32_t *mask = NULL;
  rc = pkrylov_thinshell_stencil_coefficients(&p, aw, as, av, ac);
  if (masked) {
    mask = malloc(sizeof(int32_t) * (size_t)n);
    for (int64_t i = 0; i < n; i++) mask[i] = (i % 7) != 3;
  }
  if (!rc && form == 1) rc = pkrylov_operator_create_stencil7(ctx, nx, ny, nz, aw, as, av, ac, mask, A);
  if (!rc && form == 2) {
    pkrylov_context cpu;
    pkrylov_operator T;
    int64_t nnz;
    rc = pkrylov_context_create(PKRYLOV_BACKEND_CPU, &cpu);
    if (!rc) rc = pkrylov_operator_create_stencil7(cpu, nx, ny, nz, aw, as, av, ac, mask, &T);
    if (!rc) rc = pkrylov_operator_get_info(T, NULL, &nnz, NULL, NULL, NULL, NULL);
    int64_t *rp = malloc(sizeof(int64_t) * (size_t)(n + 1)), *ci = malloc(sizeof(int64_t) * (size_t)(nnz + 1));
    double *vv = malloc(sizeof(double) * (size_t)(nnz + 1));
    if (!rc) rc = pkrylov_operator_get_csr(T, rp, ci, vv);
    if (!rc) rc = pkrylov_operator_create_csr64(ctx, n, 0, rp, ci, vv, A);
    free(rp), free(ci), free(vv);
    pkrylov_operator_destroy(&T);
    pkrylov_context_destroy(&cpu);
  }
  free(aw), free(as), free(av), free(ac), free(mask);
  return rc;
}

/** Operator and preconditioner applications: CUDA (host and device arrays) equal the CPU, bit for bit. */
PK_TEST_CASE(apply_matches_cpu) {
  pkrylov_context gpu = pkt_cuda_ctx(), cpu;
  if (!gpu) return PK_SKIP;
  PK_REQUIRE_OK(NULL, pkrylov_context_create(PKRYLOV_BACKEND_CPU, &cpu));
  const int nx = 37, ny = 29, nz = 11;
  const int64_t n = (int64_t)nx * ny * nz;
  for (int form = 0; form < 3; form++)
    for (int pct = PKRYLOV_PRECOND_NONE; pct <= PKRYLOV_PRECOND_COLUMN; pct++) {
      pkrylov_operator Ag, Ac;
      pkrylov_precond Mg, Mc;
      PK_REQUIRE_OK(gpu, make_op(gpu, form, nx, ny, nz, form == 1, &Ag));
      PK_REQUIRE_OK(cpu, make_op(cpu, form, nx, ny, nz, form == 1, &Ac));
      const int lev = form == 2 ? nz : 0, lay = form == 2 ? PKRYLOV_LAYOUT_KSLOW : PKRYLOV_LAYOUT_AUTO;
      PK_REQUIRE_OK(gpu, pkrylov_precond_create(gpu, Ag, pct, lev, lay, &Mg));
      PK_REQUIRE_OK(cpu, pkrylov_precond_create(cpu, Ac, pct, lev, lay, &Mc));
      double *x = rand_vec(n, 5 + form), *yc = poisoned(n), *yg = poisoned(n), *dx, *dy;
      PK_REQUIRE_OK(cpu, pkrylov_operator_apply(Ac, PKRYLOV_MEM_HOST, x, yc));
      PK_REQUIRE_OK(gpu, pkrylov_operator_apply(Ag, PKRYLOV_MEM_HOST, x, yg));
      PK_EXPECT(memcmp(yc, yg, sizeof(double) * n) == 0, "form %d: A x differs (%.3e)", form,
                pk_test_rel_diff(n, yg, yc));
      /* device pointers, in place */
      cudaMalloc((void **)&dx, sizeof(double) * n);
      cudaMalloc((void **)&dy, sizeof(double) * n);
      cudaMemcpy(dx, x, sizeof(double) * n, cudaMemcpyHostToDevice);
      cudaMemset(dy, 0xff, sizeof(double) * n);
      cudaDeviceSynchronize(); /* the memset runs on the legacy stream, the library on its own non-blocking one */
      PK_REQUIRE_OK(gpu, pkrylov_precond_apply(Mg, PKRYLOV_MEM_DEVICE, dx, dy));
      cudaMemcpy(yg, dy, sizeof(double) * n, cudaMemcpyDeviceToHost);
      PK_REQUIRE_OK(cpu, pkrylov_precond_apply(Mc, PKRYLOV_MEM_HOST, x, yc));
      PK_EXPECT(memcmp(yc, yg, sizeof(double) * n) == 0, "form %d precond %d: M^-1 x differs (%.3e)", form, pct,
                pk_test_rel_diff(n, yg, yc));
      cudaFree(dx), cudaFree(dy);
      free(x), free(yc), free(yg);
      pkrylov_precond_destroy(&Mg), pkrylov_precond_destroy(&Mc);
      pkrylov_operator_destroy(&Ag), pkrylov_operator_destroy(&Ac);
    }
  PK_REQUIRE_OK(gpu, pkrylov_context_destroy(&gpu));
  PK_REQUIRE_OK(cpu, pkrylov_context_destroy(&cpu));
  PK_TEST_END();
}

/** One solve on a context; returns the status. */
static int solve_on(pkrylov_context ctx, pkrylov_operator A, int type, int pct, int levels, int layout,
                    double rtol, int maxit, int mixed /* 0 or a pkrylov_precision */, int mem, const double *b,
                    double *x, pkrylov_result *res) {
  pkrylov_precond M = NULL;
  pkrylov_solver s = NULL;
  int rc = pkrylov_precond_create(ctx, A, pct, levels, layout, &M);
  if (!rc) rc = pkrylov_solver_create(ctx, type, A, M, &s);
  if (!rc) rc = pkrylov_solver_set_tolerances(s, rtol, 0);
  if (!rc) rc = pkrylov_solver_set_max_iterations(s, maxit);
  if (!rc && mixed) rc = pkrylov_solver_set_precision(s, mixed);
  if (!rc) rc = pkrylov_solver_solve(s, mem, b, x);
  if (!rc) rc = pkrylov_solver_get_result(s, res);
  if (rc) fprintf(stderr, "solve: %d %s\n", rc, pkrylov_error_string(rc));
  pkrylov_solver_destroy(&s);
  pkrylov_precond_destroy(&M);
  return rc;
}

/**
 * Whole solves on the thin shell, each operator form, CG and pipelined CG, b = A*1: the same iterations as
 * the CPU (within one), solutions within 1e-10 relative of the CPU's, both within 1e-9 of the exact solution.
 */
PK_TEST_CASE(solves_match_cpu) {
  pkrylov_context gpu = pkt_cuda_ctx(), cpu;
  if (!gpu) return PK_SKIP;
  PK_REQUIRE_OK(NULL, pkrylov_context_create(PKRYLOV_BACKEND_CPU, &cpu));
  const int nx = 33, ny = 31, nz = 17;
  const int64_t n = (int64_t)nx * ny * nz;
  double *ones = vec(n), *b = vec(n);
  for (int64_t i = 0; i < n; i++) ones[i] = 1.0;
  for (int form = 0; form < 3; form++)
    for (int type = PKRYLOV_SOLVER_CG; type <= PKRYLOV_SOLVER_PIPECG; type++) {
      pkrylov_operator Ag, Ac;
      PK_REQUIRE_OK(gpu, make_op(gpu, form, nx, ny, nz, 0, &Ag));
      PK_REQUIRE_OK(cpu, make_op(cpu, form, nx, ny, nz, 0, &Ac));
      PK_EXPECT(pk_test_csr_matvec(Ac, ones, b) == 0, "reference matvec");
      const int lev = form == 2 ? nz : 0, lay = form == 2 ? PKRYLOV_LAYOUT_KSLOW : PKRYLOV_LAYOUT_AUTO;
      double *xg = vec(n), *xc = vec(n);
      pkrylov_result rg, rc;
      PK_REQUIRE_OK(gpu, solve_on(gpu, Ag, type, PKRYLOV_PRECOND_COLUMN, lev, lay, 1e-9, 1000, 0,
                                  PKRYLOV_MEM_HOST, b, xg, &rg));
      PK_REQUIRE_OK(cpu, solve_on(cpu, Ac, type, PKRYLOV_PRECOND_COLUMN, lev, lay, 1e-9, 1000, 0,
                                  PKRYLOV_MEM_HOST, b, xc, &rc));
      const double d = pk_test_rel_diff(n, xg, xc), eg = pk_test_rel_diff(n, xg, ones),
                   ec = pk_test_rel_diff(n, xc, ones);
      printf("form %d type %d: GPU %d its, CPU %d its; GPU-CPU %.3e, errors %.3e %.3e\n", form, type, rg.iterations,
             rc.iterations, d, eg, ec);
      PK_EXPECT(rg.converged && rc.converged, "form %d type %d: %s / %s", form, type,
                pkrylov_reason_string(rg.reason), pkrylov_reason_string(rc.reason));
      PK_EXPECT(abs(rg.iterations - rc.iterations) <= 1, "form %d type %d: GPU %d vs CPU %d iterations", form, type,
                rg.iterations, rc.iterations);
      PK_EXPECT(d <= 1e-10, "form %d type %d: solutions differ by %.3e", form, type, d);
      PK_EXPECT(eg <= 1e-9 && ec <= 1e-9, "form %d type %d: errors %.3e %.3e", form, type, eg, ec);
      free(xg), free(xc);
      pkrylov_operator_destroy(&Ag), pkrylov_operator_destroy(&Ac);
    }
  free(b), free(ones);
  PK_REQUIRE_OK(gpu, pkrylov_context_destroy(&gpu));
  PK_REQUIRE_OK(cpu, pkrylov_context_destroy(&cpu));
  PK_TEST_END();
}

/** Jacobi / none and the kfast and general column paths, on shared and generated CSR matrices. */
PK_TEST_CASE(csr_solves_match_cpu) {
  pkrylov_context gpu = pkt_cuda_ctx(), cpu;
  if (!gpu) return PK_SKIP;
  const char *path = pk_test_matrix_path("lap3D_7pt_n20.mtx");
  if (!path) return PK_SKIP;
  PK_REQUIRE_OK(NULL, pkrylov_context_create(PKRYLOV_BACKEND_CPU, &cpu));
  pkrylov_operator Ag, Ac;
  PK_REQUIRE_OK(gpu, pkrylov_operator_create_from_mtx(gpu, path, &Ag));
  PK_REQUIRE_OK(cpu, pkrylov_operator_create_from_mtx(cpu, path, &Ac));
  const int64_t n = 8000;
  double *b = rand_vec(n, 3);
  const int pcs[4][3] = {{PKRYLOV_PRECOND_NONE, 0, 0},
                         {PKRYLOV_PRECOND_JACOBI, 0, 0},
                         {PKRYLOV_PRECOND_COLUMN, 20, PKRYLOV_LAYOUT_KSLOW},
                         {PKRYLOV_PRECOND_COLUMN, 20, PKRYLOV_LAYOUT_KFAST}};
  for (int i = 0; i < 4; i++)
    for (int type = PKRYLOV_SOLVER_CG; type <= PKRYLOV_SOLVER_PIPECG; type++) {
      double *xg = vec(n), *xc = vec(n);
      pkrylov_result rg, rc;
      PK_REQUIRE_OK(gpu, solve_on(gpu, Ag, type, pcs[i][0], pcs[i][1], pcs[i][2], 1e-10, 2000, 0, PKRYLOV_MEM_HOST,
                                  b, xg, &rg));
      PK_REQUIRE_OK(cpu, solve_on(cpu, Ac, type, pcs[i][0], pcs[i][1], pcs[i][2], 1e-10, 2000, 0, PKRYLOV_MEM_HOST,
                                  b, xc, &rc));
      PK_EXPECT(rg.converged && abs(rg.iterations - rc.iterations) <= 1, "pc %d type %d: %d (%s) vs %d", i, type,
                rg.iterations, pkrylov_reason_string(rg.reason), rc.iterations);
      PK_EXPECT(pk_test_rel_diff(n, xg, xc) <= 1e-10, "pc %d type %d: differ by %.3e", i, type,
                pk_test_rel_diff(n, xg, xc));
      free(xg), free(xc);
    }
  free(b);
  pkrylov_operator_destroy(&Ag), pkrylov_operator_destroy(&Ac);
  PK_REQUIRE_OK(gpu, pkrylov_context_destroy(&gpu));
  PK_REQUIRE_OK(cpu, pkrylov_context_destroy(&cpu));
  PK_TEST_END();
}

/**
 * CSR with long rows (the vector kernel, pk_cuda_op.csr_lanes > 1): a random SPD matrix of order 10007 with
 * 20 to 200 entries per row and one of order 5003 with a few rows of about 2000 entries, CG and pipelined
 * CG, no preconditioner and Jacobi, one-block and folded launches: the same iterations as the CPU within
 * two, solutions within 1e-9 relative, and the true residual recomputed here on the host within the
 * tolerance; mixed precision (fp32 values) reaches the same true residual.
 */
PK_TEST_CASE(long_row_csr_solves_match_cpu) {
  pkrylov_context gpu = pkt_cuda_ctx(), cpu;
  if (!gpu) return PK_SKIP;
  PK_REQUIRE_OK(NULL, pkrylov_context_create(PKRYLOV_BACKEND_CPU, &cpu));
  for (int mtx = 0; mtx < 2; mtx++) {
    pkrylov_operator Ag, Ac;
    const int64_t n = mtx ? 5003 : 10007;
    if (mtx == 0) {
      PK_REQUIRE_OK(gpu, pkt_long_csr(gpu, n, 120, 0, 0, 41, &Ag));
      PK_REQUIRE_OK(cpu, pkt_long_csr(cpu, n, 120, 0, 0, 41, &Ac));
    } else {
      PK_REQUIRE_OK(gpu, pkt_long_csr(gpu, n, 2, 4, 2000, 42, &Ag));
      PK_REQUIRE_OK(cpu, pkt_long_csr(cpu, n, 2, 4, 2000, 42, &Ac));
    }
    pk_cuda_op view;
    PK_REQUIRE_OK(gpu, pk_cuda_operator_view(Ag, 0, &view));
    PK_EXPECT(view.csr_lanes > 1, "matrix %d: the upload chose %d lanes per row", mtx, view.csr_lanes);
    double *b = rand_vec(n, 7 + (uint64_t)mtx), *r = vec(n);
    for (int pct = PKRYLOV_PRECOND_NONE; pct <= PKRYLOV_PRECOND_JACOBI; pct++)
      for (int type = PKRYLOV_SOLVER_CG; type <= PKRYLOV_SOLVER_PIPECG; type++)
        for (int path = 0; path < 3; path++) { /* one-block kernels, folded + PDL, mixed precision */
          double *xg = vec(n), *xc = vec(n);
          pkrylov_result rg, rc;
          pkrylov_precond Mg;
          pkrylov_solver sg;
          PK_REQUIRE_OK(gpu, pkrylov_precond_create(gpu, Ag, pct, 0, PKRYLOV_LAYOUT_AUTO, &Mg));
          PK_REQUIRE_OK(gpu, pkrylov_solver_create(gpu, type, Ag, Mg, &sg));
          PK_REQUIRE_OK(gpu, pkrylov_solver_set_tolerances(sg, 1e-10, 0));
          if (path == 2) PK_REQUIRE_OK(gpu, pkrylov_solver_set_precision(sg, PKRYLOV_PRECISION_MIXED));
          pk_cuda_solver_set_launch(sg, path == 1, path == 1);
          PK_REQUIRE_OK(gpu, pkrylov_solver_solve(sg, PKRYLOV_MEM_HOST, b, xg));
          PK_REQUIRE_OK(gpu, pkrylov_solver_get_result(sg, &rg));
          pkrylov_solver_destroy(&sg);
          pkrylov_precond_destroy(&Mg);
          PK_REQUIRE_OK(cpu, solve_on(cpu, Ac, type, pct, 0, PKRYLOV_LAYOUT_AUTO, 1e-10, 1000, 0,
                                      PKRYLOV_MEM_HOST, b, xc, &rc));
          /* true residual of the GPU's x, on the host */
          PK_EXPECT(pk_test_csr_matvec(Ac, xg, r) == 0, "reference matvec");
          double rr = 0, bb = 0;
          for (int64_t i = 0; i < n; i++) rr += (b[i] - r[i]) * (b[i] - r[i]), bb += b[i] * b[i];
          const double rel = sqrt(rr / bb), d = pk_test_rel_diff(n, xg, xc);
          printf("long csr %d pc %d type %d path %d: GPU %d its, CPU %d its, GPU-CPU %.3e, true rel residual "
                 "%.3e\n", mtx, pct, type, path, rg.iterations, rc.iterations, d, rel);
          PK_EXPECT(rg.converged && rc.converged, "matrix %d pc %d type %d path %d: %s / %s", mtx, pct, type, path,
                    pkrylov_reason_string(rg.reason), pkrylov_reason_string(rc.reason));
          PK_EXPECT(rel <= 1.5e-10, "matrix %d pc %d type %d path %d: true residual %.3e", mtx, pct, type, path,
                    rel);
          if (path < 2) {
            PK_EXPECT(abs(rg.iterations - rc.iterations) <= 2, "matrix %d pc %d type %d path %d: GPU %d vs CPU %d",
                      mtx, pct, type, path, rg.iterations, rc.iterations);
            PK_EXPECT(d <= 1e-9, "matrix %d pc %d type %d path %d: solutions differ by %.3e", mtx, pct, type, path, d);
          }
          free(xg), free(xc);
        }
    free(b), free(r);
    pkrylov_operator_destroy(&Ag), pkrylov_operator_destroy(&Ac);
  }
  PK_REQUIRE_OK(gpu, pkrylov_context_destroy(&gpu));
  PK_REQUIRE_OK(cpu, pkrylov_context_destroy(&cpu));
  PK_TEST_END();
}

/**
 * The caller's column factors (pkrylov_precond_create_column_factors, MITgcm's ini_cg3d Thomas factors
 * computed here from the stencil's own coefficients) on a CUDA context: a random 37 x 29 x 11 stencil,
 * positive and negative definite (MITgcm's sign), with and without dry cells. M^-1 r (host and device
 * arrays) bitwise the CPU's (so the device uses the caller's factors, not factors it could recompute from
 * the operator); CG and pipelined CG solves: the same iterations as the CPU within one, x within 1e-10.
 */
PK_TEST_CASE(column_factors_match_cpu) {
  pkrylov_context gpu = pkt_cuda_ctx(), cpu;
  if (!gpu) return PK_SKIP;
  PK_REQUIRE_OK(NULL, pkrylov_context_create(PKRYLOV_BACKEND_CPU, &cpu));
  const int nx = 37, ny = 29, nz = 11, nc = nx * ny;
  const int64_t n = (int64_t)nc * nz;
  double *aW = vec(n), *aS = vec(n), *aV = vec(n), *aC = vec(n), *zmc = vec(n), *zmu = vec(n);
  int32_t *mask = malloc(sizeof(int32_t) * (size_t)n);
  for (int variant = 0; variant < 4; variant++) {
    const double sg = variant & 1 ? -1.0 : 1.0;
    const int dry = variant >= 2;
    uint64_t st = 777 + (uint64_t)variant;
    for (int64_t c = 0; c < n; c++) {
      aW[c] = -sg * (0.5 + 0.4 * pk_test_rand(&st));
      aS[c] = -sg * (0.5 + 0.4 * pk_test_rand(&st));
      aV[c] = -sg * (2.0 + 1.5 * pk_test_rand(&st));
      mask[c] = 1;
    }
    for (int64_t c = 0; c < n; c++) {
      const int i = (int)(c % nx), j = (int)((c / nx) % ny), k = (int)(c / nc);
      double sum = fabs(aW[c]) + fabs(aS[c]) + fabs(aV[c]);
      if (i + 1 < nx) sum += fabs(aW[c + 1]);
      if (j + 1 < ny) sum += fabs(aS[c + nx]);
      if (k + 1 < nz) sum += fabs(aV[c + nc]);
      aC[c] = sg * (sum + 0.1);
      if (dry && ((c % nc) % 13 == 5 || (k >= nz - 2 && (c % nc) % 7 == 2))) mask[c] = 0;
    }
    for (int c = 0; c < nc; c++) /* MITgcm's ini_cg3d (see t210) */
      for (int k = 0; k < nz; k++) {
        const int64_t i = c + (int64_t)nc * k;
        if (!mask[i]) {
          zmc[i] = 1.0, zmu[i] = 0.0;
          continue;
        }
        const double zml = k > 0 && mask[i - nc] ? aV[i] : 0.0;
        const double up = k + 1 < nz && mask[i + nc] ? aV[i + nc] : 0.0;
        zmc[i] = 1.0 / (aC[i] - (k > 0 ? zml * zmu[i - nc] : 0.0));
        zmu[i] = up * zmc[i];
      }
    pkrylov_operator Ag, Ac;
    pkrylov_precond Mg, Mc;
    PK_REQUIRE_OK(gpu, pkrylov_operator_create_stencil7(gpu, nx, ny, nz, aW, aS, aV, aC, dry ? mask : NULL, &Ag));
    PK_REQUIRE_OK(cpu, pkrylov_operator_create_stencil7(cpu, nx, ny, nz, aW, aS, aV, aC, dry ? mask : NULL, &Ac));
    PK_REQUIRE_OK(gpu, pkrylov_precond_create_column_factors(gpu, Ag, 0, PKRYLOV_LAYOUT_AUTO, zmc, zmu, &Mg));
    PK_REQUIRE_OK(cpu, pkrylov_precond_create_column_factors(cpu, Ac, 0, PKRYLOV_LAYOUT_AUTO, zmc, zmu, &Mc));
    double *r = rand_vec(n, 50 + (uint64_t)variant), *zc = poisoned(n), *zg = poisoned(n), *dr, *dz;
    PK_REQUIRE_OK(cpu, pkrylov_precond_apply(Mc, PKRYLOV_MEM_HOST, r, zc));
    PK_REQUIRE_OK(gpu, pkrylov_precond_apply(Mg, PKRYLOV_MEM_HOST, r, zg));
    PK_EXPECT(memcmp(zc, zg, sizeof(double) * (size_t)n) == 0, "variant %d: M^-1 r differs (%.3e)", variant,
              pk_test_rel_diff(n, zg, zc));
    cudaMalloc((void **)&dr, sizeof(double) * (size_t)n);
    cudaMalloc((void **)&dz, sizeof(double) * (size_t)n);
    cudaMemcpy(dr, r, sizeof(double) * (size_t)n, cudaMemcpyHostToDevice);
    cudaMemset(dz, 0xff, sizeof(double) * (size_t)n);
    cudaDeviceSynchronize(); /* ordered before the library's stream */
    PK_REQUIRE_OK(gpu, pkrylov_precond_apply(Mg, PKRYLOV_MEM_DEVICE, dr, dz));
    cudaMemcpy(zg, dz, sizeof(double) * (size_t)n, cudaMemcpyDeviceToHost);
    PK_EXPECT(memcmp(zc, zg, sizeof(double) * (size_t)n) == 0, "variant %d: M^-1 r (device) differs", variant);
    cudaFree(dr), cudaFree(dz);
    for (int type = PKRYLOV_SOLVER_CG; type <= PKRYLOV_SOLVER_PIPECG; type++) {
      double *xg = vec(n), *xc = vec(n);
      pkrylov_result res[2];
      for (int side = 0; side < 2; side++) {
        pkrylov_solver s;
        pkrylov_context c = side ? cpu : gpu;
        PK_REQUIRE_OK(c, pkrylov_solver_create(c, type, side ? Ac : Ag, side ? Mc : Mg, &s));
        PK_REQUIRE_OK(c, pkrylov_solver_set_tolerances(s, 1e-10, 0));
        PK_REQUIRE_OK(c, pkrylov_solver_solve(s, PKRYLOV_MEM_HOST, r, side ? xc : xg));
        PK_REQUIRE_OK(c, pkrylov_solver_get_result(s, &res[side]));
        pkrylov_solver_destroy(&s);
      }
      printf("column factors variant %d type %d: GPU %d its, CPU %d its, GPU-CPU %.3e\n", variant, type,
             res[0].iterations, res[1].iterations, pk_test_rel_diff(n, xg, xc));
      PK_EXPECT(res[0].converged && res[1].converged && abs(res[0].iterations - res[1].iterations) <= 1,
                "variant %d type %d: GPU %d its (%s), CPU %d its (%s)", variant, type, res[0].iterations,
                pkrylov_reason_string(res[0].reason), res[1].iterations, pkrylov_reason_string(res[1].reason));
      PK_EXPECT(pk_test_rel_diff(n, xg, xc) <= 1e-10, "variant %d type %d: x differs by %.3e", variant, type,
                pk_test_rel_diff(n, xg, xc));
      free(xg), free(xc);
    }
    free(r), free(zc), free(zg);
    pkrylov_precond_destroy(&Mg), pkrylov_precond_destroy(&Mc);
    pkrylov_operator_destroy(&Ag), pkrylov_operator_destroy(&Ac);
  }
  free(aW), free(aS), free(aV), free(aC), free(zmc), free(zmu), free(mask);
  PK_REQUIRE_OK(gpu, pkrylov_context_destroy(&gpu));
  PK_REQUIRE_OK(cpu, pkrylov_context_destroy(&cpu));
  PK_TEST_END();
}

/** State of the callbacks of user_callbacks_match_cpu: a CPU-context CSR operator applied on the host. */
typedef struct {
  pkrylov_operator A; /* on a CPU context: the reference matrix */
  int64_t n;
  int device;         /* 1: the routine gets device pointers (copies through the host buffers) */
  int calls, fail_at; /* fail_at > 0: return 3 at that call */
  int not_device;     /* a pointer that was not device memory */
  double *hx, *hy;
  const double *diag; /* diagonal of A (Jacobi) */
} ucb;

/** 1 when p is device memory. */
static int is_device(const void *p) {
  struct cudaPointerAttributes at;
  if (cudaPointerGetAttributes(&at, p) != cudaSuccess) {
    cudaGetLastError();
    return 0;
  }
  return at.type == cudaMemoryTypeDevice;
}

/** y = A x: device pointers are copied to the host, multiplied by pk_test_csr_matvec, copied back. */
static int ucb_matvec(void *user, int64_t n, const double *x, double *y) {
  ucb *u = (ucb *)user;
  u->calls++;
  if (u->fail_at > 0 && u->calls == u->fail_at) return 3;
  if (!u->device) return pk_test_csr_matvec(u->A, x, y);
  if (!is_device(x) || !is_device(y)) u->not_device++;
  cudaMemcpy(u->hx, x, sizeof(double) * (size_t)n, cudaMemcpyDeviceToHost);
  if (pk_test_csr_matvec(u->A, u->hx, u->hy)) return 1;
  cudaMemcpy(y, u->hy, sizeof(double) * (size_t)n, cudaMemcpyHostToDevice);
  return 0;
}

/** y = x / diag(A) (Jacobi written here): same copies. */
static int ucb_jacobi(void *user, int64_t n, const double *x, double *y) {
  ucb *u = (ucb *)user;
  u->calls++;
  if (u->fail_at > 0 && u->calls == u->fail_at) return 3;
  const double *xi = x;
  double *yo = y;
  if (u->device) {
    if (!is_device(x) || !is_device(y)) u->not_device++;
    cudaMemcpy(u->hx, x, sizeof(double) * (size_t)n, cudaMemcpyDeviceToHost);
    xi = u->hx, yo = u->hy;
  }
  for (int64_t i = 0; i < n; i++) yo[i] = xi[i] / u->diag[i];
  if (u->device) cudaMemcpy(y, u->hy, sizeof(double) * (size_t)n, cudaMemcpyHostToDevice);
  return 0;
}

/**
 * User operators and preconditioners (callbacks) on a CUDA context: the routines get DEVICE pointers. A
 * random sparse SPD matrix of order 4001 as a CPU CSR operator applied in the callback; user operator with no
 * preconditioner and with a user Jacobi, and a user Jacobi on the device CSR operator; CG and pipelined CG
 * against the same callbacks on a CPU context (host pointers): iterations within one, x within 1e-10.
 * Public applies bitwise the CPU's. A routine that fails at its 5th call: PKRYLOV_ERR_CALLBACK naming the
 * returned value, x given back as it came.
 */
PK_TEST_CASE(user_callbacks_match_cpu) {
  pkrylov_context gpu = pkt_cuda_ctx(), cpu;
  if (!gpu) return PK_SKIP;
  PK_REQUIRE_OK(NULL, pkrylov_context_create(PKRYLOV_BACKEND_CPU, &cpu));
  const int64_t n = 4001;
  pkrylov_operator Aref, Acsr_g;
  PK_REQUIRE_OK(cpu, pkt_long_csr(cpu, n, 10, 0, 0, 93, &Aref));
  PK_REQUIRE_OK(gpu, pkt_long_csr(gpu, n, 10, 0, 0, 93, &Acsr_g));
  double *b = rand_vec(n, 91), *diag = vec(n);
  {
    int64_t nnz;
    PK_REQUIRE_OK(cpu, pkrylov_operator_get_info(Aref, NULL, &nnz, NULL, NULL, NULL, NULL));
    int64_t *rp = malloc(sizeof(int64_t) * (size_t)(n + 1)), *ci = malloc(sizeof(int64_t) * (size_t)nnz);
    double *vv = malloc(sizeof(double) * (size_t)nnz);
    PK_REQUIRE_OK(cpu, pkrylov_operator_get_csr(Aref, rp, ci, vv));
    for (int64_t i = 0; i < n; i++)
      for (int64_t p = rp[i]; p < rp[i + 1]; p++)
        if (ci[p] == i) diag[i] = vv[p];
    free(rp), free(ci), free(vv);
  }
  ucb uo[2], up[2]; /* [0] GPU (device pointers), [1] CPU */
  for (int i = 0; i < 2; i++) {
    ucb z = {Aref, n, i == 0, 0, 0, 0, vec(n), vec(n), diag}, w = {Aref, n, i == 0, 0, 0, 0, vec(n), vec(n), diag};
    uo[i] = z, up[i] = w; /* each with its own host buffers */
  }
  pkrylov_operator Ao[2];
  pkrylov_precond Mo[2];
  PK_REQUIRE_OK(gpu, pkrylov_operator_create_user(gpu, n, ucb_matvec, &uo[0], &Ao[0]));
  PK_REQUIRE_OK(cpu, pkrylov_operator_create_user(cpu, n, ucb_matvec, &uo[1], &Ao[1]));
  PK_REQUIRE_OK(gpu, pkrylov_precond_create_user(gpu, n, ucb_jacobi, &up[0], &Mo[0]));
  PK_REQUIRE_OK(cpu, pkrylov_precond_create_user(cpu, n, ucb_jacobi, &up[1], &Mo[1]));
  /* public applies, host arrays on the CUDA context */
  {
    double *yg = poisoned(n), *yc = poisoned(n);
    PK_REQUIRE_OK(gpu, pkrylov_operator_apply(Ao[0], PKRYLOV_MEM_HOST, b, yg));
    PK_REQUIRE_OK(cpu, pkrylov_operator_apply(Ao[1], PKRYLOV_MEM_HOST, b, yc));
    PK_EXPECT(memcmp(yg, yc, sizeof(double) * (size_t)n) == 0, "user A x differs");
    PK_REQUIRE_OK(gpu, pkrylov_precond_apply(Mo[0], PKRYLOV_MEM_HOST, b, yg));
    PK_REQUIRE_OK(cpu, pkrylov_precond_apply(Mo[1], PKRYLOV_MEM_HOST, b, yc));
    PK_EXPECT(memcmp(yg, yc, sizeof(double) * (size_t)n) == 0, "user M^-1 x differs");
    free(yg), free(yc);
  }
  for (int combo = 0; combo < 3; combo++) /* user A + none, user A + user M, device CSR + user M */
    for (int type = PKRYLOV_SOLVER_CG; type <= PKRYLOV_SOLVER_PIPECG; type++) {
      double *x[2] = {vec(n), vec(n)};
      pkrylov_result res[2];
      for (int side = 0; side < 2; side++) {
        pkrylov_context c = side ? cpu : gpu;
        pkrylov_operator A = combo == 2 ? (side ? Aref : Acsr_g) : Ao[side];
        pkrylov_solver s;
        PK_REQUIRE_OK(c, pkrylov_solver_create(c, type, A, combo ? Mo[side] : NULL, &s));
        PK_REQUIRE_OK(c, pkrylov_solver_set_tolerances(s, 1e-9, 0));
        PK_REQUIRE_OK(c, pkrylov_solver_solve(s, PKRYLOV_MEM_HOST, b, x[side]));
        PK_REQUIRE_OK(c, pkrylov_solver_get_result(s, &res[side]));
        pkrylov_solver_destroy(&s);
      }
      const double d = pk_test_rel_diff(n, x[0], x[1]);
      printf("user callbacks combo %d type %d: GPU %d its, CPU %d its, GPU-CPU %.3e\n", combo, type,
             res[0].iterations, res[1].iterations, d);
      PK_EXPECT(res[0].converged && res[1].converged && abs(res[0].iterations - res[1].iterations) <= 1,
                "combo %d type %d: GPU %d its (%s), CPU %d its (%s)", combo, type, res[0].iterations,
                pkrylov_reason_string(res[0].reason), res[1].iterations, pkrylov_reason_string(res[1].reason));
      PK_EXPECT(d <= 1e-10, "combo %d type %d: x differs by %.3e", combo, type, d);
      free(x[0]), free(x[1]);
    }
  PK_EXPECT(uo[0].calls > 0 && up[0].calls > 0 && uo[0].not_device == 0 && up[0].not_device == 0,
            "callbacks on the CUDA context: %d / %d calls, %d / %d calls with host pointers", uo[0].calls,
            up[0].calls, uo[0].not_device, up[0].not_device);
  /* a failing routine: PKRYLOV_ERR_CALLBACK, x as it came */
  for (int which = 0; which < 2; which++)
    for (int type = PKRYLOV_SOLVER_CG; type <= PKRYLOV_SOLVER_PIPECG; type++) {
      ucb *u = which ? &up[0] : &uo[0];
      u->calls = 0, u->fail_at = 5;
      pkrylov_solver s;
      double *x = rand_vec(n, 92), *x0 = vec(n);
      memcpy(x0, x, sizeof(double) * (size_t)n);
      PK_REQUIRE_OK(gpu, pkrylov_solver_create(gpu, type, which ? Acsr_g : Ao[0], which ? Mo[0] : NULL, &s));
      PK_REQUIRE_OK(gpu, pkrylov_solver_set_initial_guess_nonzero(s, 1));
      PK_EXPECT_CODE(gpu, pkrylov_solver_solve(s, PKRYLOV_MEM_HOST, b, x), PKRYLOV_ERR_CALLBACK);
      PK_EXPECT(pk_test_msg_has(gpu, "returned 3"), "message names the returned value");
      PK_EXPECT(memcmp(x, x0, sizeof(double) * (size_t)n) == 0, "which %d type %d: x changed", which, type);
      PK_EXPECT(u->calls == 5, "which %d type %d: %d calls (the routine is not called after it failed)", which,
                type, u->calls);
      pkrylov_solver_destroy(&s);
      u->fail_at = 0;
      free(x), free(x0);
    }
  for (int i = 0; i < 2; i++) {
    pkrylov_precond_destroy(&Mo[i]);
    pkrylov_operator_destroy(&Ao[i]);
    free(uo[i].hx), free(uo[i].hy), free(up[i].hx), free(up[i].hy);
  }
  pkrylov_operator_destroy(&Aref), pkrylov_operator_destroy(&Acsr_g);
  free(b), free(diag);
  PK_REQUIRE_OK(gpu, pkrylov_context_destroy(&gpu));
  PK_REQUIRE_OK(cpu, pkrylov_context_destroy(&cpu));
  PK_TEST_END();
}

/** Device pointers used in place give the same x as host pointers; repeated solves are bitwise equal. */
PK_TEST_CASE(device_pointers_and_reproducibility) {
  pkrylov_context gpu = pkt_cuda_ctx();
  if (!gpu) return PK_SKIP;
  const int nx = 40, ny = 24, nz = 16;
  const int64_t n = (int64_t)nx * ny * nz;
  pkrylov_operator A;
  pkrylov_precond M;
  pkrylov_solver s;
  PK_REQUIRE_OK(gpu, make_op(gpu, 0, nx, ny, nz, 0, &A));
  PK_REQUIRE_OK(gpu, pkrylov_precond_create(gpu, A, PKRYLOV_PRECOND_COLUMN, 0, PKRYLOV_LAYOUT_AUTO, &M));
  PK_REQUIRE_OK(gpu, pkrylov_solver_create(gpu, PKRYLOV_SOLVER_PIPECG, A, M, &s));
  double *b = rand_vec(n, 8), *x1 = vec(n), *x2 = vec(n), *x3 = vec(n), *db, *dx;
  pkrylov_result r1, r2;
  PK_REQUIRE_OK(gpu, pkrylov_solver_solve(s, PKRYLOV_MEM_HOST, b, x1));
  PK_REQUIRE_OK(gpu, pkrylov_solver_get_result(s, &r1));
  cudaMalloc((void **)&db, sizeof(double) * n);
  cudaMalloc((void **)&dx, sizeof(double) * n);
  cudaMemcpy(db, b, sizeof(double) * n, cudaMemcpyHostToDevice);
  PK_REQUIRE_OK(gpu, pkrylov_solver_solve(s, PKRYLOV_MEM_DEVICE, db, dx));
  PK_REQUIRE_OK(gpu, pkrylov_solver_get_result(s, &r2));
  cudaMemcpy(x2, dx, sizeof(double) * n, cudaMemcpyDeviceToHost);
  PK_EXPECT(r1.iterations == r2.iterations && memcmp(x1, x2, sizeof(double) * n) == 0,
            "device pointers: %d vs %d iterations, differ %.3e", r1.iterations, r2.iterations,
            pk_test_rel_diff(n, x2, x1));
  PK_REQUIRE_OK(gpu, pkrylov_solver_set_sync_interval(s, 1)); /* the host looks every iteration */
  PK_REQUIRE_OK(gpu, pkrylov_solver_solve(s, PKRYLOV_MEM_HOST, b, x3));
  PK_EXPECT(memcmp(x1, x3, sizeof(double) * n) == 0, "sync interval changes the result (%.3e)",
            pk_test_rel_diff(n, x3, x1));
  cudaFree(db), cudaFree(dx);
  free(b), free(x1), free(x2), free(x3);
  pkrylov_solver_destroy(&s);
  pkrylov_precond_destroy(&M);
  pkrylov_operator_destroy(&A);
  PK_REQUIRE_OK(gpu, pkrylov_context_destroy(&gpu));
  PK_TEST_END();
}

/** 7-point Laplacian (Dirichlet) on an m^3 grid: its coefficients are exact in fp32. */
static int make_lap3d(pkrylov_context ctx, int m, pkrylov_operator *A) {
  const int64_t n = (int64_t)m * m * m;
  int32_t *rp = malloc(sizeof(int32_t) * (size_t)(n + 1)), *ci = malloc(sizeof(int32_t) * (size_t)n * 7);
  double *v = malloc(sizeof(double) * (size_t)n * 7);
  int64_t nnz = 0;
  rp[0] = 0;
  for (int k = 0; k < m; k++)
    for (int j = 0; j < m; j++)
      for (int i = 0; i < m; i++) {
        const int32_t row = i + m * (j + m * k);
        if (k > 0) ci[nnz] = row - m * m, v[nnz++] = -1;
        if (j > 0) ci[nnz] = row - m, v[nnz++] = -1;
        if (i > 0) ci[nnz] = row - 1, v[nnz++] = -1;
        ci[nnz] = row, v[nnz++] = 6;
        if (i < m - 1) ci[nnz] = row + 1, v[nnz++] = -1;
        if (j < m - 1) ci[nnz] = row + m, v[nnz++] = -1;
        if (k < m - 1) ci[nnz] = row + m * m, v[nnz++] = -1;
        rp[row + 1] = (int32_t)nnz;
      }
  int rc = pkrylov_operator_create_csr(ctx, (int32_t)n, 0, rp, ci, v, A);
  free(rp), free(ci), free(v);
  return rc;
}

/**
 * Mixed precision reaches the same final accuracy as fp64 (b = A*1: errors against the exact solution and
 * true residuals recomputed here in fp64): fp32 preconditioner factors on the thin-shell model problem
 * (stencil and CSR forms), fp32 operator coefficients too on a Laplacian. On the model problem with fp32
 * operator coefficients, whatever the outcome, what the solver reports is true for the fp64 system.
 */
PK_TEST_CASE(mixed_precision_same_accuracy) {
  pkrylov_context gpu = pkt_cuda_ctx();
  if (!gpu) return PK_SKIP;
  const int nx = 48, ny = 40, nz = 24;
  for (int form = 1; form <= 3; form++) { /* stencil, CSR (model problem), Laplacian */
    pkrylov_operator A;
    if (form < 3)
      PK_REQUIRE_OK(gpu, make_op(gpu, form, nx, ny, nz, 0, &A));
    else
      PK_REQUIRE_OK(gpu, make_lap3d(gpu, 40, &A));
    int64_t n;
    PK_REQUIRE_OK(gpu, pkrylov_operator_get_info(A, &n, NULL, NULL, NULL, NULL, NULL));
    double *ones = vec(n), *b = vec(n);
    for (int64_t i = 0; i < n; i++) ones[i] = 1.0;
    PK_EXPECT(pk_test_csr_matvec(A, ones, b) == 0, "reference matvec");
    const int pc = form == 3 ? PKRYLOV_PRECOND_JACOBI : PKRYLOV_PRECOND_COLUMN;
    const int lev = form == 2 ? nz : 0, lay = form == 2 ? PKRYLOV_LAYOUT_KSLOW : PKRYLOV_LAYOUT_AUTO;
    const int mixed = form == 3 ? PKRYLOV_PRECISION_MIXED : PKRYLOV_PRECISION_MIXED_PRECOND;
    double *x64 = vec(n), *x32 = vec(n);
    pkrylov_result r64, r32;
    PK_REQUIRE_OK(gpu, solve_on(gpu, A, PKRYLOV_SOLVER_PIPECG, pc, lev, lay, 1e-8, 1000, 0, PKRYLOV_MEM_HOST, b, x64,
                                &r64));
    PK_REQUIRE_OK(gpu, solve_on(gpu, A, PKRYLOV_SOLVER_PIPECG, pc, lev, lay, 1e-8, 1000, mixed, PKRYLOV_MEM_HOST, b,
                                x32, &r32));
    const double e64 = pk_test_rel_diff(n, x64, ones), e32 = pk_test_rel_diff(n, x32, ones);
    const double t32 = pk_test_true_relres(A, b, x32);
    printf("form %d: fp64 %d its, relres %.3e, error %.3e; mixed(%d) %d its, relres %.3e (recomputed %.3e), "
           "error %.3e\n",
           form, r64.iterations, r64.rel_residual, e64, mixed, r32.iterations, r32.rel_residual, t32, e32);
    PK_EXPECT(r64.converged && r32.converged, "form %d: %s / %s", form, pkrylov_reason_string(r64.reason),
              pkrylov_reason_string(r32.reason));
    PK_EXPECT(t32 <= 1e-8, "form %d: mixed true relres %.3e", form, t32);
    PK_EXPECT(e32 <= 10 * e64 + 1e-12, "form %d: mixed error %.3e vs fp64 error %.3e", form, e32, e64);
    PK_EXPECT(r32.iterations <= r64.iterations + r64.iterations / 10 + 2, "form %d: mixed needs %d iterations vs %d",
              form, r32.iterations, r64.iterations);
    if (form == 1) { /* fp32 operator coefficients on the model problem: the report must be true */
      pkrylov_result ra;
      PK_REQUIRE_OK(gpu, solve_on(gpu, A, PKRYLOV_SOLVER_PIPECG, pc, lev, lay, 1e-8, 1000, PKRYLOV_PRECISION_MIXED,
                                  PKRYLOV_MEM_HOST, b, x32, &ra));
      const double ta = pk_test_true_relres(A, b, x32);
      printf("form 1, fp32 operator: %s after %d its, reported relres %.3e, recomputed %.3e\n",
             pkrylov_reason_string(ra.reason), ra.iterations, ra.rel_residual, ta);
      PK_EXPECT(fabs(ra.rel_residual - ta) <= 1e-3 * ta + 1e-15, "reported %.3e vs recomputed %.3e", ra.rel_residual,
                ta);
      PK_EXPECT(!ra.converged || ta <= 1e-8, "reported converged with true relres %.3e", ta);
    }
    free(x64), free(x32), free(ones), free(b);
    pkrylov_operator_destroy(&A);
  }
  PK_REQUIRE_OK(gpu, pkrylov_context_destroy(&gpu));
  PK_TEST_END();
}

/** Breakdowns, iteration cap and history on the GPU: the same outcome as on the CPU. */
PK_TEST_CASE(outcomes_match_cpu) {
  pkrylov_context gpu = pkt_cuda_ctx(), cpu;
  if (!gpu) return PK_SKIP;
  PK_REQUIRE_OK(NULL, pkrylov_context_create(PKRYLOV_BACKEND_CPU, &cpu));
  /* diag(1, -1), b = (2, 1): (p, A p) changes sign in iteration 2 */
  const int32_t rp[3] = {0, 1, 2}, ci[2] = {0, 1};
  const double vals[2] = {1, -1}, b2[2] = {2, 1};
  for (int type = PKRYLOV_SOLVER_CG; type <= PKRYLOV_SOLVER_PIPECG; type++) {
    pkrylov_operator Ag, Ac;
    PK_REQUIRE_OK(gpu, pkrylov_operator_create_csr(gpu, 2, 0, rp, ci, vals, &Ag));
    PK_REQUIRE_OK(cpu, pkrylov_operator_create_csr(cpu, 2, 0, rp, ci, vals, &Ac));
    double xg[2], xc[2];
    pkrylov_result rg, rc;
    PK_REQUIRE_OK(gpu, solve_on(gpu, Ag, type, PKRYLOV_PRECOND_NONE, 0, 0, 1e-10, 100, 0, PKRYLOV_MEM_HOST, b2, xg, &rg));
    PK_REQUIRE_OK(cpu, solve_on(cpu, Ac, type, PKRYLOV_PRECOND_NONE, 0, 0, 1e-10, 100, 0, PKRYLOV_MEM_HOST, b2, xc, &rc));
    PK_EXPECT(rg.reason == PKRYLOV_DIVERGED_BREAKDOWN_INDEFINITE_MATRIX && rg.reason == rc.reason &&
                  rg.breakdown_iteration == rc.breakdown_iteration,
              "type %d: GPU %s at %d, CPU %s at %d", type, pkrylov_reason_string(rg.reason), rg.breakdown_iteration,
              pkrylov_reason_string(rc.reason), rc.breakdown_iteration);
    PK_EXPECT(isfinite(xg[0]) && isfinite(xg[1]) && fabs(xg[0] - xc[0]) <= 1e-14 && fabs(xg[1] - xc[1]) <= 1e-14,
              "x (%g, %g) vs CPU (%g, %g)", xg[0], xg[1], xc[0], xc[1]);
    pkrylov_operator_destroy(&Ag), pkrylov_operator_destroy(&Ac);
  }
  /* iteration cap + history */
  const int nx = 20, ny = 20, nz = 10;
  const int64_t n = nx * ny * nz;
  double *b = rand_vec(n, 4), *x = vec(n);
  for (int type = PKRYLOV_SOLVER_CG; type <= PKRYLOV_SOLVER_PIPECG; type++) {
    double hg[8], hc[8];
    int32_t lg, lc;
    pkrylov_result rg, rc;
    pkrylov_context ctxs[2] = {gpu, cpu};
    for (int c = 0; c < 2; c++) {
      pkrylov_operator A;
      pkrylov_solver s;
      PK_REQUIRE_OK(ctxs[c], make_op(ctxs[c], 0, nx, ny, nz, 0, &A));
      PK_REQUIRE_OK(ctxs[c], pkrylov_solver_create(ctxs[c], type, A, NULL, &s));
      PK_REQUIRE_OK(ctxs[c], pkrylov_solver_set_max_iterations(s, 7));
      PK_REQUIRE_OK(ctxs[c], pkrylov_solver_set_history(s, 1));
      PK_REQUIRE_OK(ctxs[c], pkrylov_solver_solve(s, PKRYLOV_MEM_HOST, b, x));
      PK_REQUIRE_OK(ctxs[c], pkrylov_solver_get_result(s, c ? &rc : &rg));
      PK_REQUIRE_OK(ctxs[c], pkrylov_solver_get_history(s, 8, c ? hc : hg, c ? &lc : &lg));
      pkrylov_solver_destroy(&s);
      pkrylov_operator_destroy(&A);
    }
    PK_EXPECT(rg.reason == PKRYLOV_DIVERGED_MAX_ITERATIONS && rg.iterations == 7 && lg == 8 && lc == 8,
              "type %d: %s after %d, history %d/%d", type, pkrylov_reason_string(rg.reason), rg.iterations, lg, lc);
    for (int i = 0; i < 8 && i < lg; i++)
      PK_EXPECT(fabs(hg[i] - hc[i]) <= 1e-12 * hc[i], "type %d: history[%d] %.17g vs %.17g", type, i, hg[i], hc[i]);
  }
  free(b), free(x);
  PK_REQUIRE_OK(gpu, pkrylov_context_destroy(&gpu));
  PK_REQUIRE_OK(cpu, pkrylov_context_destroy(&cpu));
  PK_TEST_END();
}

/** Bad input on the device path: pointers in the wrong memory space, out of device memory. */
PK_TEST_CASE(bad_device_input) {
  pkrylov_context gpu = pkt_cuda_ctx();
  if (!gpu) return PK_SKIP;
  const int nx = 8, ny = 8, nz = 4;
  const int64_t n = nx * ny * nz;
  pkrylov_operator A;
  pkrylov_solver s;
  PK_REQUIRE_OK(gpu, make_op(gpu, 0, nx, ny, nz, 0, &A));
  PK_REQUIRE_OK(gpu, pkrylov_solver_create(gpu, PKRYLOV_SOLVER_CG, A, NULL, &s));
  double *hb = rand_vec(n, 1), *hx = vec(n), *db;
  cudaMalloc((void **)&db, sizeof(double) * n);
  PK_EXPECT_CODE(gpu, pkrylov_solver_solve(s, PKRYLOV_MEM_HOST, db, hx), PKRYLOV_ERR_MEMTYPE);
  PK_EXPECT(pk_test_msg_has(gpu, "'b'"), "message names b");
  PK_EXPECT_CODE(gpu, pkrylov_solver_solve(s, PKRYLOV_MEM_DEVICE, hb, hx), PKRYLOV_ERR_MEMTYPE);
  PK_EXPECT_CODE(gpu, pkrylov_operator_apply(A, PKRYLOV_MEM_DEVICE, hb, hx), PKRYLOV_ERR_MEMTYPE);
  PK_EXPECT_CODE(gpu, pkrylov_operator_apply(A, PKRYLOV_MEM_HOST, hb, db), PKRYLOV_ERR_MEMTYPE);
  PK_EXPECT(pk_test_msg_has(gpu, "'y'"), "message names y");
  hb[5] = NAN;
  PK_EXPECT_CODE(gpu, pkrylov_solver_solve(s, PKRYLOV_MEM_HOST, hb, hx), PKRYLOV_ERR_NOT_FINITE);
  cudaMemcpy(db, hb, sizeof(double) * n, cudaMemcpyHostToDevice);
  double *dx;
  cudaMalloc((void **)&dx, sizeof(double) * n);
  PK_EXPECT_CODE(gpu, pkrylov_solver_solve(s, PKRYLOV_MEM_DEVICE, db, dx), PKRYLOV_ERR_NOT_FINITE);
  cudaFree(db), cudaFree(dx);
  pkrylov_solver_destroy(&s);
  pkrylov_operator_destroy(&A);
  /* out of device memory: 4096 x 4096 x 256 needs 12 vectors of 34 GB */
  pkrylov_thinshell_params p;
  PK_REQUIRE_OK(gpu, pkrylov_thinshell_params_default(4096, 4096, 256, &p));
  PK_REQUIRE_OK(gpu, pkrylov_operator_create_thinshell(gpu, &p, &A));
  s = NULL;
  PK_EXPECT_CODE(gpu, pkrylov_solver_create(gpu, PKRYLOV_SOLVER_PIPECG, A, NULL, &s), PKRYLOV_ERR_OUT_OF_MEMORY);
  PK_EXPECT(s == NULL, "handle set on failure");
  pkrylov_operator_destroy(&A);
  /* still usable after the failure */
  PK_REQUIRE_OK(gpu, make_op(gpu, 0, nx, ny, nz, 0, &A));
  PK_REQUIRE_OK(gpu, pkrylov_solver_create(gpu, PKRYLOV_SOLVER_CG, A, NULL, &s));
  hb[5] = 0.5;
  PK_REQUIRE_OK(gpu, pkrylov_solver_solve(s, PKRYLOV_MEM_HOST, hb, hx));
  pkrylov_solver_destroy(&s);
  pkrylov_operator_destroy(&A);
  free(hb), free(hx);
  PK_REQUIRE_OK(gpu, pkrylov_context_destroy(&gpu));
  PK_TEST_END();
}

/** Monitor that counts its calls (forces the host mode: a read of the state every iteration). */
static int count_calls(void *user, int32_t it, double res) {
  (void)it, (void)res;
  ++*(int *)user;
  return 0;
}

/** One launch configuration of launch_paths_match. */
typedef struct {
  int fold, pdl, sync, monitor, true_res;
} launch_cfg;

/**
 * The launch paths of the device iteration, pk_cuda_solver_set_launch: the one-block scalar kernels, the
 * folded launchers, folded with programmatic dependent launches; sync intervals 32 (graphs), 5 and 3 (odd
 * graphs: the pipelined state rotation over three buffers), 2, 1 (no graph); a monitor (host mode); a
 * true-residual interval of 7 (blocks cut short, run without the graph). Thin shell and CSR, column
 * preconditioner, CG and pipelined CG: the same iterations, reason and history, and x bitwise equal, on every
 * path; the unfolded path against the CPU (iterations within one, x within 1e-10).
 */
PK_TEST_CASE(launch_paths_match) {
  pkrylov_context gpu = pkt_cuda_ctx(), cpu;
  if (!gpu) return PK_SKIP;
  PK_REQUIRE_OK(NULL, pkrylov_context_create(PKRYLOV_BACKEND_CPU, &cpu));
  const int nx = 33, ny = 31, nz = 17;
  const int64_t n = (int64_t)nx * ny * nz;
  static const launch_cfg cfgs[] = {{0, 0, 32, 0, 0}, {1, 0, 32, 0, 0}, {1, 1, 32, 0, 0}, {1, 1, 5, 0, 0},
                                    {1, 1, 3, 0, 0},  {1, 0, 2, 0, 0},  {1, 1, 1, 0, 0},  {0, 0, 5, 0, 0},
                                    {1, 1, 32, 1, 0}, {0, 0, 32, 1, 0}, {0, 0, 32, 0, 7}, {1, 1, 32, 0, 7},
                                    {1, 0, 5, 0, 7},  {1, 1, 3, 0, 7}};
  const int ncfg = (int)(sizeof cfgs / sizeof cfgs[0]);
  double *b = vec(n), *ones = vec(n);
  for (int64_t i = 0; i < n; i++) ones[i] = 1.0;
  for (int form = 0; form < 3; form += 2)
    for (int type = PKRYLOV_SOLVER_CG; type <= PKRYLOV_SOLVER_PIPECG; type++) {
      pkrylov_operator Ag, Ac;
      pkrylov_precond Mg, Mc;
      PK_REQUIRE_OK(gpu, make_op(gpu, form, nx, ny, nz, 0, &Ag));
      PK_REQUIRE_OK(cpu, make_op(cpu, form, nx, ny, nz, 0, &Ac));
      PK_EXPECT(pk_test_csr_matvec(Ac, ones, b) == 0, "reference matvec"); /* b = A 1, as solves_match_cpu */
      const int lev = form == 2 ? nz : 0, lay = form == 2 ? PKRYLOV_LAYOUT_KSLOW : PKRYLOV_LAYOUT_AUTO;
      PK_REQUIRE_OK(gpu, pkrylov_precond_create(gpu, Ag, PKRYLOV_PRECOND_COLUMN, lev, lay, &Mg));
      PK_REQUIRE_OK(cpu, pkrylov_precond_create(cpu, Ac, PKRYLOV_PRECOND_COLUMN, lev, lay, &Mc));
      double *x0 = vec(n), *x = vec(n), h0[1001], h[1001];
      pkrylov_result r0, r;
      memset(&r0, 0, sizeof r0);
      int32_t len0 = 0, len = 0;
      for (int c = 0; c < ncfg; c++) {
        const launch_cfg *k = &cfgs[c];
        pkrylov_solver s;
        int calls = 0;
        PK_REQUIRE_OK(gpu, pkrylov_solver_create(gpu, type, Ag, Mg, &s));
        PK_REQUIRE_OK(gpu, pkrylov_solver_set_tolerances(s, 1e-9, 0));
        PK_REQUIRE_OK(gpu, pkrylov_solver_set_history(s, 1));
        PK_REQUIRE_OK(gpu, pkrylov_solver_set_sync_interval(s, k->sync));
        if (k->monitor) PK_REQUIRE_OK(gpu, pkrylov_solver_set_monitor(s, count_calls, &calls));
        if (k->true_res) PK_REQUIRE_OK(gpu, pkrylov_solver_set_true_residual_interval(s, k->true_res));
        pk_cuda_solver_set_launch(s, k->fold, k->pdl);
        PK_REQUIRE_OK(gpu, pkrylov_solver_solve(s, PKRYLOV_MEM_HOST, b, c == 0 || c == 10 ? x0 : x));
        PK_REQUIRE_OK(gpu, pkrylov_solver_get_result(s, c == 0 || c == 10 ? &r0 : &r));
        PK_REQUIRE_OK(gpu, pkrylov_solver_get_history(s, 1001, c == 0 || c == 10 ? h0 : h,
                                                      c == 0 || c == 10 ? &len0 : &len));
        pkrylov_solver_destroy(&s);
        if (k->monitor)
          PK_EXPECT(calls == r0.iterations + 1, "monitor: %d calls for %d iterations", calls, r0.iterations);
        if (c == 0 || c == 10) { /* a reference path: against the CPU */
          double *xc = vec(n);
          pkrylov_solver sc;
          pkrylov_result rc;
          PK_REQUIRE_OK(cpu, pkrylov_solver_create(cpu, type, Ac, Mc, &sc));
          PK_REQUIRE_OK(cpu, pkrylov_solver_set_tolerances(sc, 1e-9, 0));
          if (k->true_res) PK_REQUIRE_OK(cpu, pkrylov_solver_set_true_residual_interval(sc, k->true_res));
          PK_REQUIRE_OK(cpu, pkrylov_solver_solve(sc, PKRYLOV_MEM_HOST, b, xc));
          PK_REQUIRE_OK(cpu, pkrylov_solver_get_result(sc, &rc));
          pkrylov_solver_destroy(&sc);
          PK_EXPECT(r0.converged && rc.converged && abs(r0.iterations - rc.iterations) <= 1,
                    "form %d type %d cfg %d: GPU %d its (%s), CPU %d its (%s)", form, type, c, r0.iterations,
                    pkrylov_reason_string(r0.reason), rc.iterations, pkrylov_reason_string(rc.reason));
          PK_EXPECT(pk_test_rel_diff(n, x0, xc) <= 1e-10,
                    "form %d type %d cfg %d: GPU and CPU differ by %.3e", form, type, c,
                    pk_test_rel_diff(n, x0, xc));
          free(xc);
          continue;
        }
        PK_EXPECT(r.iterations == r0.iterations && r.reason == r0.reason && len == len0 &&
                      r.residual_replacements == r0.residual_replacements &&
                      r.true_residual_checks == r0.true_residual_checks,
                  "form %d type %d cfg %d (fold %d pdl %d sync %d): %d its %s (%d replacements, %d checks), "
                  "reference %d its %s (%d, %d)",
                  form, type, c, k->fold, k->pdl, k->sync, r.iterations, pkrylov_reason_string(r.reason),
                  r.residual_replacements, r.true_residual_checks, r0.iterations,
                  pkrylov_reason_string(r0.reason), r0.residual_replacements, r0.true_residual_checks);
        PK_EXPECT(memcmp(x, x0, sizeof(double) * (size_t)n) == 0,
                  "form %d type %d cfg %d: x differs from the reference path (%.3e)", form, type, c,
                  pk_test_rel_diff(n, x, x0));
        PK_EXPECT(len == len0 && memcmp(h, h0, sizeof(double) * (size_t)(len < len0 ? len : len0)) == 0,
                  "form %d type %d cfg %d: history differs", form, type, c);
      }
      free(x0), free(x);
      pkrylov_precond_destroy(&Mg), pkrylov_precond_destroy(&Mc);
      pkrylov_operator_destroy(&Ag), pkrylov_operator_destroy(&Ac);
    }
  free(b), free(ones);
  PK_REQUIRE_OK(gpu, pkrylov_context_destroy(&gpu));
  PK_REQUIRE_OK(cpu, pkrylov_context_destroy(&cpu));
  PK_TEST_END();
}

/** One solve of b on a new solver of type over A (column preconditioner), with the solver options opts ("k=v" pairs set one by
 *  one through pkrylov_solver_set_option; NULL: none); x and the result out. */
static int opt_solve(pkrylov_context ctx, pkrylov_operator A, int type, const char *const *opts, const double *b,
                     double *x, int64_t n, pkrylov_result *res) {
  pkrylov_precond M = NULL;
  pkrylov_solver s = NULL;
  int rc = pkrylov_precond_create(ctx, A, PKRYLOV_PRECOND_COLUMN, 0, PKRYLOV_LAYOUT_AUTO, &M);
  if (!rc) rc = pkrylov_solver_create(ctx, type, A, M, &s);
  if (!rc) rc = pkrylov_solver_set_tolerances(s, 1e-9, 0);
  for (int k = 0; !rc && opts && opts[k]; k += 2) rc = pkrylov_solver_set_option(s, opts[k], opts[k + 1]);
  memset(x, 0, sizeof(double) * (size_t)n);
  if (!rc) rc = pkrylov_solver_solve(s, PKRYLOV_MEM_HOST, b, x);
  if (!rc) rc = pkrylov_solver_get_result(s, res);
  pkrylov_solver_destroy(&s);
  pkrylov_precond_destroy(&M);
  return rc;
}

/**
 * The options that choose kernels and launches give the same answer: on the thin shell, CG and pipelined CG
 * with the solver options cuda.fold=0 / 1, cuda.pdl=0, cuda.pipe_none=0 and cuda.l2persist=1 / 4 (CG's
 * vectors in the L2's persisting part: a cache policy, no arithmetic changes) bitwise equal to the default
 * solve (same iterations), and the device's persisting L2 limit as before the solves (the solve restores
 * it); an operator created with cuda.l2pf=0 (no L2 prefetch: no arithmetic changes)
 * bitwise equal too; cuda.kc=4 (other level chunks: the partial sums are partitioned differently) converges
 * to within 1e-8 of it (launch_paths_match: GPU and CPU, whose sums differ too, agree to 1e-10). BiCGStab
 * with kry.graph=0 bitwise equal to its default solve (the same kernels in the same order). The solver
 * reports the options it was given.
 */
PK_TEST_CASE(options_same_answer) {
  pkrylov_context gpu = pkt_cuda_ctx();
  if (!gpu) return PK_SKIP;
  const int nx = 29, ny = 27, nz = 15;
  const int64_t n = (int64_t)nx * ny * nz;
  double *b = rand_vec(n, 91), *x0 = vec(n), *x = vec(n);
  pkrylov_operator A, Apf, Akc;
  PK_REQUIRE_OK(gpu, make_op(gpu, 0, nx, ny, nz, 0, &A));
  PK_REQUIRE_OK(gpu, pkrylov_context_set_option(gpu, "cuda.l2pf", "0"));
  PK_REQUIRE_OK(gpu, make_op(gpu, 0, nx, ny, nz, 0, &Apf));
  PK_REQUIRE_OK(gpu, pkrylov_context_set_options(gpu, "cuda.l2pf=1 cuda.kc=4"));
  PK_REQUIRE_OK(gpu, make_op(gpu, 0, nx, ny, nz, 0, &Akc));
  PK_REQUIRE_OK(gpu, pkrylov_context_set_option(gpu, "cuda.kc", "auto"));
  static const char *const fold0[] = {"cuda.fold", "0", NULL}, *const fold1[] = {"cuda.fold", "1", NULL},
                           *const nopdl[] = {"cuda.fold", "1", "cuda.pdl", "0", NULL},
                           *const general[] = {"cuda.fold", "0", "cuda.pipe_none", "0", NULL},
                           *const l2one[] = {"cuda.l2persist", "1", NULL},
                           *const l2four[] = {"cuda.fold", "0", "cuda.l2persist", "4", NULL};
  const char *const *variants[] = {fold0, fold1, nopdl, general, l2one, l2four};
  enum { NVAR = (int)(sizeof variants / sizeof variants[0]) };
  size_t lim0 = 0, lim = 0;
  PK_REQUIRE(cudaDeviceGetLimit(&lim0, cudaLimitPersistingL2CacheSize) == cudaSuccess, "persisting L2 limit");
  for (int type = PKRYLOV_SOLVER_CG; type <= PKRYLOV_SOLVER_PIPECG; type++) {
    pkrylov_result r0, r;
    PK_REQUIRE_OK(gpu, opt_solve(gpu, A, type, NULL, b, x0, n, &r0));
    PK_EXPECT(r0.converged, "type %d: default solve not converged (%s)", type, pkrylov_reason_string(r0.reason));
    for (int v = 0; v < NVAR; v++) {
      PK_REQUIRE_OK(gpu, opt_solve(gpu, A, type, variants[v], b, x, n, &r));
      PK_EXPECT(r.iterations == r0.iterations && memcmp(x, x0, sizeof(double) * (size_t)n) == 0,
                "type %d, %s=%s%s%s: %d its (default %d), x differs by %.3e", type, variants[v][0],
                variants[v][1], variants[v][2] ? " " : "", variants[v][2] ? variants[v][2] : "", r.iterations,
                r0.iterations, pk_test_rel_diff(n, x, x0));
    }
    PK_EXPECT(cudaDeviceGetLimit(&lim, cudaLimitPersistingL2CacheSize) == cudaSuccess && lim == lim0,
              "type %d: the persisting L2 limit is %zu after the solves (%zu before)", type, lim, lim0);
    PK_REQUIRE_OK(gpu, opt_solve(gpu, Apf, type, NULL, b, x, n, &r));
    PK_EXPECT(r.iterations == r0.iterations && memcmp(x, x0, sizeof(double) * (size_t)n) == 0,
              "type %d, cuda.l2pf=0: %d its (default %d), x differs by %.3e", type, r.iterations, r0.iterations,
              pk_test_rel_diff(n, x, x0));
    PK_REQUIRE_OK(gpu, opt_solve(gpu, Akc, type, NULL, b, x, n, &r));
    PK_EXPECT(r.converged && pk_test_rel_diff(n, x, x0) <= 1e-8, "type %d, cuda.kc=4: %s, x differs by %.3e", type,
              pkrylov_reason_string(r.reason), pk_test_rel_diff(n, x, x0));
  }
  static const char *const nograph[] = {"kry.graph", "0", NULL};
  pkrylov_result r0, r;
  PK_REQUIRE_OK(gpu, opt_solve(gpu, A, PKRYLOV_SOLVER_BICGSTAB, NULL, b, x0, n, &r0));
  PK_REQUIRE_OK(gpu, opt_solve(gpu, A, PKRYLOV_SOLVER_BICGSTAB, nograph, b, x, n, &r));
  PK_EXPECT(r0.converged && r.iterations == r0.iterations && memcmp(x, x0, sizeof(double) * (size_t)n) == 0,
            "BiCGStab kry.graph=0: %d its (default %d), x differs by %.3e", r.iterations, r0.iterations,
            pk_test_rel_diff(n, x, x0));
  /* the solver's view of its options */
  pkrylov_solver s;
  char v[16];
  PK_REQUIRE_OK(gpu, pkrylov_solver_create(gpu, PKRYLOV_SOLVER_PIPECG, A, NULL, &s));
  PK_REQUIRE_OK(gpu, pkrylov_solver_set_option(s, "cuda.fold", "0"));
  PK_REQUIRE_OK(gpu, pkrylov_solver_get_option(s, "cuda.fold", v, (int32_t)sizeof v));
  PK_EXPECT(strcmp(v, "0") == 0, "cuda.fold reads '%s'", v);
  pk_cuda_solver_set_launch(s, 1, -1); /* the tests' hook sets the same option */
  PK_REQUIRE_OK(gpu, pkrylov_solver_get_option(s, "cuda.fold", v, (int32_t)sizeof v));
  PK_EXPECT(strcmp(v, "1") == 0, "after pk_cuda_solver_set_launch cuda.fold reads '%s'", v);
  pkrylov_solver_destroy(&s);
  free(b), free(x0), free(x);
  pkrylov_operator_destroy(&A), pkrylov_operator_destroy(&Apf), pkrylov_operator_destroy(&Akc);
  PK_REQUIRE_OK(gpu, pkrylov_context_destroy(&gpu));
  PK_TEST_END();
}

PK_TEST_MAIN(PK_TEST_ENTRY(apply_matches_cpu), PK_TEST_ENTRY(solves_match_cpu),
             PK_TEST_ENTRY(csr_solves_match_cpu), PK_TEST_ENTRY(long_row_csr_solves_match_cpu),
             PK_TEST_ENTRY(column_factors_match_cpu), PK_TEST_ENTRY(user_callbacks_match_cpu),
             PK_TEST_ENTRY(device_pointers_and_reproducibility),
             PK_TEST_ENTRY(mixed_precision_same_accuracy), PK_TEST_ENTRY(outcomes_match_cpu),
             PK_TEST_ENTRY(bad_device_input), PK_TEST_ENTRY(launch_paths_match),
             PK_TEST_ENTRY(options_same_answer))

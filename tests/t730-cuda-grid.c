/**
 * @file t730-cuda-grid.c
 * @brief Tiled grids on one GPU against the CPU backend: grid-stencil products and the approximate inverse
 *        bitwise (rectangle with walls, doubly periodic, cube sphere; several tiles in any order), solves with
 *        CG, pipelined CG and the vector engine (folded and unfolded launchers: the same bits), reproducible
 *        CG bitwise the CPU's, halo'd device arrays in place, coefficient updates between solves (the
 *        captured graphs see the new values), a 2-D grid of 2^18 columns and more with CG and pipelined CG
 *        (reproducible too: the exact sums in the loops' pass and in a second pass, the CPU's bits).
 *        Skips without a GPU.
 */
#include <cuda_runtime_api.h>
#include <string.h>

#include "pk_cuda_test.h"
#include "pk_grid_test.h"

/** The problems: 0 rectangle with walls (3-D), 1 doubly periodic (2-D), 2 cube sphere (3-D), 3 cube (2-D),
 *  4 doubly periodic (2-D) with 2^18 columns and more (the kernels compiled for one level, pk_cuda_op.cuh). */
static void make(int which, pkt_global *G, pkt_tiling *T) {
  if (which == 4) pkt_global_make(G, 1, 1024, 288, 1, 1, 1, 0.2, 1, 505), *T = pkt_tiling_make(G, 256, 144, 1, 1);
  else if (which == 0) pkt_global_make(G, 1, 24, 16, 6, 0, 0, 0.2, 1, 501), *T = pkt_tiling_make(G, 8, 8, 2, 2);
  else if (which == 1) pkt_global_make(G, 1, 40, 24, 1, 1, 1, 0.2, 1, 502), *T = pkt_tiling_make(G, 10, 6, 1, 1);
  else if (which == 2) pkt_global_make(G, 6, 8, 8, 5, 0, 0, 0.1, 1, 503), *T = pkt_tiling_make(G, 4, 4, 1, 1);
  else pkt_global_make(G, 6, 12, 12, 1, 0, 0, 0.1, 1, 504), *T = pkt_tiling_make(G, 6, 6, 2, 1);
}

static void tiles_of(const pkt_tiling *T, int32_t *tiles) {
  for (int t = 0; t < T->ntiles; t++) tiles[t] = (t * 5 + 3) % T->ntiles; /* an arbitrary order */
}

PK_TEST_CASE(cuda_product_and_ainv_match_cpu) {
  SKIP_WITHOUT_GPU();
  for (int which = 0; which < 5; which++) {
    pkt_global G;
    pkt_tiling T;
    make(which, &G, &T);
    int32_t tiles[256];
    tiles_of(&T, tiles);
    pkrylov_context cg = pkt_cuda_ctx(), cc = NULL;
    PK_REQUIRE(cg, "CUDA context");
    PK_REQUIRE_OK(NULL, pkrylov_context_create(PKRYLOV_BACKEND_CPU, &cc));
    pkrylov_grid gg = NULL, gc = NULL;
    pkrylov_operator Ag = NULL, Ac = NULL;
    PK_REQUIRE_OK(cg, pkt_grid_operator(cg, &G, &T, T.ntiles, tiles, 1, &gg, &Ag));
    PK_REQUIRE_OK(cc, pkt_grid_operator(cc, &G, &T, T.ntiles, tiles, 1, &gc, &Ac));
    const int64_t n = G.ncell;
    double *x = malloc(sizeof(double) * (size_t)n), *yg = malloc(sizeof(double) * (size_t)n);
    double *yc = malloc(sizeof(double) * (size_t)n);
    uint64_t st = 17 + which;
    for (int64_t i = 0; i < n; i++) x[i] = pk_test_rand(&st);
    PK_REQUIRE_OK(cg, pkrylov_operator_apply(Ag, PKRYLOV_MEM_HOST, x, yg));
    PK_REQUIRE_OK(cc, pkrylov_operator_apply(Ac, PKRYLOV_MEM_HOST, x, yc));
    char tag[64];
    snprintf(tag, sizeof tag, "problem %d", which);
    pkt_same_bits(tag, "A x", n, yg, yc);
    if (G.nz == 1) {
      pkrylov_precond Mg = NULL, Mc = NULL;
      PK_REQUIRE_OK(cg, pkrylov_precond_create_ainv(cg, Ag, 0.51, &Mg));
      PK_REQUIRE_OK(cc, pkrylov_precond_create_ainv(cc, Ac, 0.51, &Mc));
      PK_REQUIRE_OK(cg, pkrylov_precond_apply(Mg, PKRYLOV_MEM_HOST, x, yg));
      PK_REQUIRE_OK(cc, pkrylov_precond_apply(Mc, PKRYLOV_MEM_HOST, x, yc));
      pkt_same_bits(tag, "M^-1 x (approximate inverse)", n, yg, yc);
      pkrylov_precond_destroy(&Mg);
      pkrylov_precond_destroy(&Mc);
    }
    free(x), free(yg), free(yc);
    pkrylov_operator_destroy(&Ag);
    pkrylov_operator_destroy(&Ac);
    pkrylov_grid_destroy(&gg);
    pkrylov_grid_destroy(&gc);
    pkrylov_context_destroy(&cg);
    pkrylov_context_destroy(&cc);
    pkt_global_free(&G);
  }
  PK_TEST_END();
}

/* solve()'s extra settings on a CUDA context: the engine's CG (solver option kry.cg=1), a sync interval (> 0) */
static int g_engine = 0, g_sync = 0, g_l2 = 0; /* g_l2: the solver option cuda.l2persist=4 */
static int g_minres = 0;                      /* the minimum-residual iterate (pkrylov_solver_set_min_residual) */
static const char *g_xfuse = NULL; /* the solver option kry.xfuse ("1": reproducible mode's exact sums in the
                                       loops' pass, "0": in a second pass; NULL: the default, auto) */

/** Solve on ctx with type/precond (ainv or column), optionally reproducible and with a launch mode; x, its. */
static int solve(pkrylov_context ctx, const pkt_global *G, const pkt_tiling *T, const int32_t *tiles, int32_t type,
                 int repro, int fold, double *x, int32_t *its) {
  pkrylov_grid g = NULL;
  pkrylov_operator A = NULL;
  pkrylov_precond M = NULL;
  pkrylov_solver s = NULL;
  PK_REQUIRE_OK(ctx, pkrylov_context_set_reproducible(ctx, repro));
  PK_REQUIRE_OK(ctx, pkt_grid_operator(ctx, G, T, T->ntiles, tiles, 1, &g, &A));
  if (G->nz == 1)
    PK_REQUIRE_OK(ctx, pkrylov_precond_create_ainv(ctx, A, 0.51, &M));
  else
    PK_REQUIRE_OK(ctx, pkrylov_precond_create(ctx, A, PKRYLOV_PRECOND_COLUMN, 0, PKRYLOV_LAYOUT_AUTO, &M));
  PK_REQUIRE_OK(ctx, pkrylov_solver_create(ctx, type, A, M, &s));
  PK_REQUIRE_OK(ctx, pkrylov_solver_set_tolerances(s, 1e-10, 0.0));
  PK_REQUIRE_OK(ctx, pkrylov_solver_set_max_iterations(s, 3000));
  int32_t backend = 0;
  pkrylov_context_get_backend(ctx, &backend);
  if (backend == PKRYLOV_BACKEND_CUDA && fold >= 0 && type <= PKRYLOV_SOLVER_PIPECG)
    pk_cuda_solver_set_launch(s, fold, -1);
  if (backend == PKRYLOV_BACKEND_CUDA && g_engine) PK_REQUIRE_OK(ctx, pkrylov_solver_set_option(s, "kry.cg", "1"));
  if (g_sync > 0) PK_REQUIRE_OK(ctx, pkrylov_solver_set_sync_interval(s, g_sync));
  if (g_minres) PK_REQUIRE_OK(ctx, pkrylov_solver_set_min_residual(s, 1));
  if (backend == PKRYLOV_BACKEND_CUDA && g_l2) PK_REQUIRE_OK(ctx, pkrylov_solver_set_option(s, "cuda.l2persist", "4"));
  if (backend == PKRYLOV_BACKEND_CUDA && g_xfuse) PK_REQUIRE_OK(ctx, pkrylov_solver_set_option(s, "kry.xfuse", g_xfuse));
  double *b = malloc(sizeof(double) * (size_t)G->ncell);
  uint64_t st = 99;
  for (int64_t q = 0; q < G->ncell; q++) b[q] = G->mask[q] ? pk_test_rand(&st) : 0.0;
  double *bh = pkt_halo_array(G, T, T->ntiles, tiles, b), *xh = pkt_halo_array(G, T, T->ntiles, tiles, b);
  PK_REQUIRE_OK(ctx, pkrylov_solver_solve_halo(s, PKRYLOV_MEM_HOST, bh, xh));
  pkrylov_result res;
  PK_REQUIRE_OK(ctx, pkrylov_solver_get_result(s, &res));
  PK_EXPECT(res.converged, "type %d: %s after %d iterations", type, pkrylov_reason_string(res.reason), res.iterations);
  *its = res.iterations;
  PK_REQUIRE_OK(ctx, pkrylov_grid_pack(g, G->nz, PKRYLOV_MEM_HOST, xh, x));
  free(b), free(bh), free(xh);
  pkrylov_solver_destroy(&s);
  pkrylov_precond_destroy(&M);
  pkrylov_operator_destroy(&A);
  pkrylov_grid_destroy(&g);
  PK_TEST_END();
}

PK_TEST_CASE(cuda_solves_match_cpu) {
  SKIP_WITHOUT_GPU();
  static const int32_t types[] = {PKRYLOV_SOLVER_CG, PKRYLOV_SOLVER_PIPECG, PKRYLOV_SOLVER_BICGSTAB,
                                  PKRYLOV_SOLVER_GMRES};
  for (int which = 1; which <= 2; which++) {
    pkt_global G;
    pkt_tiling T;
    make(which, &G, &T);
    int32_t tiles[256];
    tiles_of(&T, tiles);
    const int64_t n = G.ncell;
    for (size_t a = 0; a < sizeof types / sizeof types[0]; a++) {
      double *xc = malloc(sizeof(double) * (size_t)n), *xg = malloc(sizeof(double) * (size_t)n);
      double *xg2 = malloc(sizeof(double) * (size_t)n);
      int32_t itc = -1, itg = -2, itg2 = -3;
      pkrylov_context cc = NULL, cg = pkt_cuda_ctx();
      PK_REQUIRE_OK(NULL, pkrylov_context_create(PKRYLOV_BACKEND_CPU, &cc));
      if (solve(cc, &G, &T, tiles, types[a], 0, -1, xc, &itc) != PK_PASS) pk_test_failures++;
      if (solve(cg, &G, &T, tiles, types[a], 0, 1, xg, &itg) != PK_PASS) pk_test_failures++;
      PK_EXPECT(abs(itg - itc) <= 1, "problem %d type %d: %d iterations on the GPU, %d on the CPU", which, types[a],
                itg, itc);
      PK_EXPECT(pk_test_rel_diff(n, xg, xc) < 1e-8, "problem %d type %d: GPU and CPU solutions differ by %.3g", which,
                types[a], pk_test_rel_diff(n, xg, xc));
      if (types[a] <= PKRYLOV_SOLVER_PIPECG) { /* folded and unfolded launchers: the same bits */
        if (solve(cg, &G, &T, tiles, types[a], 0, 0, xg2, &itg2) != PK_PASS) pk_test_failures++;
        PK_EXPECT(itg2 == itg, "unfolded %d iterations, folded %d", itg2, itg);
        pkt_same_bits("fold", "x", n, xg2, xg);
        if (types[a] == PKRYLOV_SOLVER_CG) {
          /* CG on the engine (its fused 2-D loop on the 2-D problem), unfolded, in blocks of 7 and folded:
             the driver's bits */
          const int syncs[3] = {0, 7, 0}, folds[3] = {0, 0, 1};
          for (int k = 0; k < 3; k++) {
            int32_t ite = -4;
            g_engine = 1, g_sync = syncs[k];
            if (solve(cg, &G, &T, tiles, types[a], 0, folds[k], xc, &ite) != PK_PASS) pk_test_failures++;
            g_engine = 0, g_sync = 0;
            PK_EXPECT(ite == itg, "problem %d, engine (sync %d, fold %d): %d iterations, driver %d", which, syncs[k],
                      folds[k], ite, itg);
            pkt_same_bits("engine", "x", n, xc, xg);
          }
          /* reproducible: CG's iterates are the CPU's bit for bit */
          if (solve(cc, &G, &T, tiles, types[a], 1, -1, xc, &itc) != PK_PASS) pk_test_failures++;
          if (solve(cg, &G, &T, tiles, types[a], 1, -1, xg, &itg) != PK_PASS) pk_test_failures++;
          PK_EXPECT(itg == itc, "reproducible: %d iterations on the GPU, %d on the CPU", itg, itc);
          pkt_same_bits("reproducible", "x", n, xg, xc);
        }
      }
      free(xc), free(xg), free(xg2);
      pkrylov_context_destroy(&cc);
      pkrylov_context_destroy(&cg);
    }
    pkt_global_free(&G);
  }
  PK_TEST_END();
}

/** The large 2-D grid (problem 4): CG and pipelined CG against the CPU, folded and unfolded the same bits; CG's
 *  driver (r -= alpha q fused into the preconditioner loop) bitwise the engine's (two kernels), odd blocks too. */
PK_TEST_CASE(cuda_large_2d_solves_match_cpu) {
  SKIP_WITHOUT_GPU();
  pkt_global G;
  pkt_tiling T;
  make(4, &G, &T);
  int32_t tiles[256];
  tiles_of(&T, tiles);
  const int64_t n = G.ncell;
  for (int32_t type = PKRYLOV_SOLVER_CG; type <= PKRYLOV_SOLVER_PIPECG; type++) {
    double *xc = malloc(sizeof(double) * (size_t)n), *xg = malloc(sizeof(double) * (size_t)n);
    double *xg2 = malloc(sizeof(double) * (size_t)n);
    int32_t itc = -1, itg = -2, itg2 = -3;
    pkrylov_context cc = NULL, cg = pkt_cuda_ctx();
    PK_REQUIRE_OK(NULL, pkrylov_context_create(PKRYLOV_BACKEND_CPU, &cc));
    if (solve(cc, &G, &T, tiles, type, 0, -1, xc, &itc) != PK_PASS) pk_test_failures++;
    if (solve(cg, &G, &T, tiles, type, 0, 1, xg, &itg) != PK_PASS) pk_test_failures++;
    if (solve(cg, &G, &T, tiles, type, 0, 0, xg2, &itg2) != PK_PASS) pk_test_failures++;
    PK_EXPECT(abs(itg - itc) <= 1, "type %d: %d iterations on the GPU, %d on the CPU", type, itg, itc);
    PK_EXPECT(pk_test_rel_diff(n, xg, xc) < 1e-8, "type %d: GPU and CPU solutions differ by %.3g", type,
              pk_test_rel_diff(n, xg, xc));
    PK_EXPECT(itg2 == itg, "type %d: unfolded %d iterations, folded %d", type, itg2, itg);
    pkt_same_bits("fold", "x", n, xg2, xg);
    {
      /* reproducible: the CPU's bits, with the exact sums in the loops' pass (kry.xfuse=1; CG: the fused 2-D
         loop's and the operator loop's, blocks of the default length and of 7; pipelined CG: the update's,
         from the second iteration of a block) and in a second pass (the default at this size, 2^18 values and
         more: kry.xfuse=auto) */
      int32_t itrc = -21, itr = -22;
      double *xr = malloc(sizeof(double) * (size_t)n);
      if (solve(cc, &G, &T, tiles, type, 1, -1, xc, &itrc) != PK_PASS) pk_test_failures++;
      for (int k = 0; k < 3; k++) {
        g_xfuse = k < 2 ? "1" : NULL, g_sync = k == 1 ? 7 : 0;
        if (solve(cg, &G, &T, tiles, type, 1, -1, xr, &itr) != PK_PASS) pk_test_failures++;
        g_xfuse = NULL, g_sync = 0;
        PK_EXPECT(itr == itrc, "type %d, reproducible (%s): %d iterations on the GPU, %d on the CPU", type,
                  k == 0 ? "one pass" : k == 1 ? "one pass, sync 7" : "two passes", itr, itrc);
        pkt_same_bits(k == 0 ? "reproducible" : k == 1 ? "reproducible, sync 7" : "reproducible, two passes", "x", n,
                      xr, xc);
      }
      free(xr);
      pkrylov_context_set_reproducible(cg, 0);
      pkrylov_context_set_reproducible(cc, 0);
    }
    if (type == PKRYLOV_SOLVER_CG) {
      /* the driver fuses r -= alpha q into the approximate inverse's loop (r alternating between two arrays,
         swapped after odd blocks: sync interval 7); the engine runs them as two kernels: the same bits */
      int32_t ite = -4, it7 = -5, itl = -6;
      double *xe = malloc(sizeof(double) * (size_t)n), *x7 = malloc(sizeof(double) * (size_t)n);
      double *xl = malloc(sizeof(double) * (size_t)n);
      g_engine = 1;
      if (solve(cg, &G, &T, tiles, type, 0, 0, xe, &ite) != PK_PASS) pk_test_failures++;
      {
        /* the engine's fused 2-D loop too (r in two arrays: blocks of 7 iterations replay graphs of both
           parities), unfolded and folded: the driver's bits */
        int32_t ite7 = -11, itef = -12;
        double *xe7 = malloc(sizeof(double) * (size_t)n), *xef = malloc(sizeof(double) * (size_t)n);
        g_sync = 7;
        if (solve(cg, &G, &T, tiles, type, 0, 0, xe7, &ite7) != PK_PASS) pk_test_failures++;
        g_sync = 0;
        if (solve(cg, &G, &T, tiles, type, 0, 1, xef, &itef) != PK_PASS) pk_test_failures++;
        PK_EXPECT(ite7 == itg2 && itef == itg2, "CG: engine sync 7 %d, engine folded %d, driver %d iterations", ite7,
                  itef, itg2);
        pkt_same_bits("engine, sync 7", "x", n, xe7, xg2);
        pkt_same_bits("engine, folded", "x", n, xef, xg2);
        g_l2 = 1; /* its L2 window (q, p, z in the persisting part): a cache policy, the same bits */
        if (solve(cg, &G, &T, tiles, type, 0, 0, xef, &itef) != PK_PASS) pk_test_failures++;
        g_l2 = 0;
        PK_EXPECT(itef == itg2, "CG: engine with cuda.l2persist=4 %d iterations, driver %d", itef, itg2);
        pkt_same_bits("engine, cuda.l2persist=4", "x", n, xef, xg2);
        free(xe7), free(xef);
      }
      g_engine = 0, g_sync = 7;
      if (solve(cg, &G, &T, tiles, type, 0, 0, x7, &it7) != PK_PASS) pk_test_failures++;
      g_l2 = 1; /* the same with CG's vectors in the L2's persisting part (a cache policy: the same bits) */
      if (solve(cg, &G, &T, tiles, type, 0, 0, xl, &itl) != PK_PASS) pk_test_failures++;
      g_sync = 0, g_l2 = 0;
      PK_EXPECT(ite == itg2 && it7 == itg2 && itl == itg2,
                "CG: engine %d, sync 7 %d (L2 window %d), driver %d iterations", ite, it7, itl, itg2);
      pkt_same_bits("engine", "x", n, xe, xg2);
      pkt_same_bits("sync 7", "x", n, x7, xg2);
      pkt_same_bits("sync 7, cuda.l2persist=4", "x", n, xl, xg2);
      /* the minimum-residual iterate: unfolded (its copy kernel between the operator loop and the sigma step,
         programmatic launches) the bits of folded, and the CPU's to rounding */
      int32_t itmu = -7, itmf = -8, itmc = -9;
      g_minres = 1;
      if (solve(cg, &G, &T, tiles, type, 0, 0, xe, &itmu) != PK_PASS) pk_test_failures++;
      if (solve(cg, &G, &T, tiles, type, 0, 1, x7, &itmf) != PK_PASS) pk_test_failures++;
      if (solve(cc, &G, &T, tiles, type, 0, -1, xl, &itmc) != PK_PASS) pk_test_failures++;
      g_minres = 0;
      PK_EXPECT(itmu == itmf && abs(itmu - itmc) <= 1, "CG minres: unfolded %d, folded %d, CPU %d iterations",
                itmu, itmf, itmc);
      pkt_same_bits("minres, unfolded against folded", "x", n, xe, x7);
      PK_EXPECT(pk_test_rel_diff(n, xe, xl) < 1e-8, "CG minres: GPU and CPU differ by %.3g",
                pk_test_rel_diff(n, xe, xl));
      free(xe), free(x7), free(xl);
    }
    free(xc), free(xg), free(xg2);
    pkrylov_context_destroy(&cc);
    pkrylov_context_destroy(&cg);
  }
  pkt_global_free(&G);
  PK_TEST_END();
}

PK_TEST_CASE(cuda_device_halo_arrays) {
  SKIP_WITHOUT_GPU();
  pkt_global G;
  pkt_tiling T;
  make(3, &G, &T);
  int32_t tiles[256];
  tiles_of(&T, tiles);
  pkrylov_context ctx = pkt_cuda_ctx();
  pkrylov_grid g = NULL;
  pkrylov_operator A = NULL;
  pkrylov_precond M = NULL;
  pkrylov_solver s = NULL;
  PK_REQUIRE_OK(ctx, pkt_grid_operator(ctx, &G, &T, T.ntiles, tiles, 1, &g, &A));
  PK_REQUIRE_OK(ctx, pkrylov_precond_create_ainv(ctx, A, 0.51, &M));
  PK_REQUIRE_OK(ctx, pkrylov_solver_create(ctx, PKRYLOV_SOLVER_CG, A, M, &s));
  double *b = malloc(sizeof(double) * (size_t)G.ncell);
  uint64_t st = 7;
  for (int64_t q = 0; q < G.ncell; q++) b[q] = G.mask[q] ? pk_test_rand(&st) : 0.0;
  double *bh = pkt_halo_array(&G, &T, T.ntiles, tiles, b), *xh = pkt_halo_array(&G, &T, T.ntiles, tiles, b);
  double *xh2 = pkt_halo_array(&G, &T, T.ntiles, tiles, b);
  const int64_t hn = (int64_t)(T.snx + 2 * T.olx) * (T.sny + 2 * T.oly) * G.nz * T.ntiles;
  double *db = NULL, *dx = NULL;
  CK(cudaMalloc((void **)&db, sizeof(double) * (size_t)hn));
  CK(cudaMalloc((void **)&dx, sizeof(double) * (size_t)hn));
  CK(cudaMemcpy(db, bh, sizeof(double) * (size_t)hn, cudaMemcpyHostToDevice));
  CK(cudaMemcpy(dx, xh, sizeof(double) * (size_t)hn, cudaMemcpyHostToDevice));
  PK_REQUIRE_OK(ctx, pkrylov_solver_solve_halo(s, PKRYLOV_MEM_DEVICE, db, dx));
  PK_REQUIRE_OK(ctx, pkrylov_solver_solve_halo(s, PKRYLOV_MEM_HOST, bh, xh));
  CK(cudaMemcpy(xh2, dx, sizeof(double) * (size_t)hn, cudaMemcpyDeviceToHost));
  /* the interiors alike, the halos (NaN) untouched on both */
  int64_t bad = 0;
  for (int64_t i = 0; i < hn; i++) bad += memcmp(&xh[i], &xh2[i], sizeof(double)) != 0 && !(isnan(xh[i]) && isnan(xh2[i]));
  PK_EXPECT(bad == 0, "device and host halo'd solves differ in %lld entries", (long long)bad);
  PK_EXPECT_CODE(ctx, pkrylov_solver_solve_halo(s, PKRYLOV_MEM_DEVICE, bh, xh), PKRYLOV_ERR_MEMTYPE);
  /* pack / unpack on the device against the host */
  double *dc = NULL, *hc = malloc(sizeof(double) * (size_t)G.ncell), *hc2 = malloc(sizeof(double) * (size_t)G.ncell);
  CK(cudaMalloc((void **)&dc, sizeof(double) * (size_t)G.ncell));
  PK_REQUIRE_OK(ctx, pkrylov_grid_pack(g, G.nz, PKRYLOV_MEM_DEVICE, db, dc));
  PK_REQUIRE_OK(ctx, pkrylov_grid_pack(g, G.nz, PKRYLOV_MEM_HOST, bh, hc));
  CK(cudaMemcpy(hc2, dc, sizeof(double) * (size_t)G.ncell, cudaMemcpyDeviceToHost));
  pkt_same_bits("pack", "compact b", G.ncell, hc2, hc);
  cudaFree(db), cudaFree(dx), cudaFree(dc);
  free(b), free(bh), free(xh), free(xh2), free(hc), free(hc2);
  pkrylov_solver_destroy(&s);
  pkrylov_precond_destroy(&M);
  pkrylov_operator_destroy(&A);
  pkrylov_grid_destroy(&g);
  pkrylov_context_destroy(&ctx);
  pkt_global_free(&G);
  PK_TEST_END();
}

PK_TEST_CASE(cuda_update_between_solves) {
  SKIP_WITHOUT_GPU();
  /* solve (a graph is captured), update operator and preconditioner, solve again: the same bits as a solver
     built on the new coefficients */
  pkt_global G1, G2;
  pkt_global_make(&G1, 1, 40, 24, 1, 1, 1, 0.2, 1, 601);
  pkt_global_make(&G2, 1, 40, 24, 1, 1, 1, 0.2, 1, 602);
  memcpy(G2.mask, G1.mask, sizeof(int32_t) * (size_t)G1.ncell);
  pkt_tiling T = pkt_tiling_make(&G1, 10, 6, 1, 1);
  int32_t tiles[64];
  tiles_of(&T, tiles);
  pkrylov_context ctx = pkt_cuda_ctx();
  pkrylov_grid g1 = NULL, g2 = NULL;
  pkrylov_operator A = NULL, B = NULL;
  pkrylov_precond MA = NULL, MB = NULL;
  pkrylov_solver sa = NULL, sb = NULL;
  PK_REQUIRE_OK(ctx, pkt_grid_operator(ctx, &G1, &T, T.ntiles, tiles, 1, &g1, &A));
  PK_REQUIRE_OK(ctx, pkt_grid_operator(ctx, &G2, &T, T.ntiles, tiles, 1, &g2, &B));
  PK_REQUIRE_OK(ctx, pkrylov_precond_create_ainv(ctx, A, 0.51, &MA));
  PK_REQUIRE_OK(ctx, pkrylov_precond_create_ainv(ctx, B, 0.51, &MB));
  PK_REQUIRE_OK(ctx, pkrylov_solver_create(ctx, PKRYLOV_SOLVER_CG, A, MA, &sa));
  PK_REQUIRE_OK(ctx, pkrylov_solver_create(ctx, PKRYLOV_SOLVER_CG, B, MB, &sb));
  const int64_t n = G1.ncell;
  double *b = malloc(sizeof(double) * (size_t)n), *xa = calloc((size_t)n, sizeof(double));
  double *xb = calloc((size_t)n, sizeof(double));
  uint64_t st = 3;
  for (int64_t q = 0; q < n; q++) b[q] = pk_test_rand(&st); /* compact order: the dry cells are ignored */
  PK_REQUIRE_OK(ctx, pkrylov_solver_solve(sa, PKRYLOV_MEM_HOST, b, xa));
  double *w = pkt_halo_array(&G2, &T, T.ntiles, tiles, G2.fW), *s = pkt_halo_array(&G2, &T, T.ntiles, tiles, G2.fS);
  double *c = pkt_halo_array(&G2, &T, T.ntiles, tiles, G2.fC);
  PK_REQUIRE_OK(ctx, pkrylov_operator_update_grid_stencil(A, w, s, NULL, c));
  PK_REQUIRE_OK(ctx, pkrylov_precond_update(MA));
  memset(xa, 0, sizeof(double) * (size_t)n);
  PK_REQUIRE_OK(ctx, pkrylov_solver_solve(sa, PKRYLOV_MEM_HOST, b, xa));
  PK_REQUIRE_OK(ctx, pkrylov_solver_solve(sb, PKRYLOV_MEM_HOST, b, xb));
  pkt_same_bits("update", "x after the update", n, xa, xb);
  free(b), free(xa), free(xb), free(w), free(s), free(c);
  pkrylov_solver_destroy(&sa);
  pkrylov_solver_destroy(&sb);
  pkrylov_precond_destroy(&MA);
  pkrylov_precond_destroy(&MB);
  pkrylov_operator_destroy(&A);
  pkrylov_operator_destroy(&B);
  pkrylov_grid_destroy(&g1);
  pkrylov_grid_destroy(&g2);
  pkrylov_context_destroy(&ctx);
  pkt_global_free(&G1);
  pkt_global_free(&G2);
  PK_TEST_END();
}

PK_TEST_MAIN(PK_TEST_ENTRY(cuda_product_and_ainv_match_cpu), PK_TEST_ENTRY(cuda_solves_match_cpu),
             PK_TEST_ENTRY(cuda_large_2d_solves_match_cpu), PK_TEST_ENTRY(cuda_device_halo_arrays),
             PK_TEST_ENTRY(cuda_update_between_solves))

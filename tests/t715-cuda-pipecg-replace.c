/**
 * @file t715-cuda-pipecg-replace.c
 * @brief Pipelined CG's automatic residual replacement on CUDA contexts (the rule in the device state, the
 *        REPLACE status ending a block, the host replacing and measuring the gap), against a hand-written
 *        PCG on the CPU (pk_rr_test.h) and the CPU backend:
 *  - thinshell, basin: the thin shell at rtol 1e-10 and the 3-D basin of legacy_examples/mitgcm_style at
 *    1e-13 in every launch mode of the driver (graphs of 32 iterations with the automatic fold choice,
 *    unfolded and folded launchers, blocks of 7 and of 1 iteration, a monitor: one scalar step at a time
 *    from the host): converged, at most 1.02 times the reference's iterations, the true residual of the
 *    returned x (recomputed on the host) within the tolerance, replacements done, and the iterations and
 *    replacements within 2 and 1 of the CPU backend's (the sums differ in their last bits);
 *  - no_precond: without a preconditioner (the specialised update of M = I, its seven sums with u = r and
 *    q = s): bitwise the general update's solve (x, iterations, replacements), converged, the true residual
 *    within the tolerance, the iterations within 2 of the CPU backend's. Not the replacement count: on this
 *    1900-iteration solve the rule's crossings depend on the sums' last bits (the CPU backend itself
 *    replaces 18 times with its ordinary sums and 22 times with exact ones, for the same iterations);
 *  - reproducible: reproducible mode on both backends (the rule's norms and the measured gap are exact
 *    sums): the GPU solve bitwise the CPU's (x, iterations, replacements), in graphs and block by block.
 * Every case skips (77) without a GPU.
 */
#include <cuda_runtime.h>
#include <math.h>
#include <string.h>

#include "pk_test.h"
/* after pk_test.h */
#include "pk_cuda_test.h"
#include "pk_rr_test.h"

/** A launch mode of the CUDA driver. */
typedef struct {
  const char *name;
  int32_t sync; /* iterations per block */
  int fold;     /* -1 automatic, 0 one-block scalar steps, 1 folded */
  int monitor;  /* 1: a monitor (the host sees every iteration) */
} mode;

static const mode MODES[] = {{"graphs", 32, -1, 0}, {"unfolded", 32, 0, 0}, {"folded", 32, 1, 0},
                             {"blocks of 7", 7, -1, 0}, {"blocks of 1", 1, -1, 0}, {"monitor", 32, -1, 1}};

static int count_monitor(void *user, int32_t it, double res) {
  (void)it, (void)res;
  ++*(int *)user;
  return 0;
}

/** Pipelined CG (setting k) of P on ctx in mode m (NULL: the defaults) into x; *res the result. */
static int solve_mode(pkrylov_context ctx, const pk_rr_problem *P, int32_t k, const mode *m, double *x,
                      pkrylov_result *res) {
  pkrylov_solver s;
  int calls = 0;
  PK_REQUIRE_OK(ctx, pkrylov_solver_create(ctx, PKRYLOV_SOLVER_PIPECG, P->A, P->M, &s));
  PK_REQUIRE_OK(ctx, pkrylov_solver_set_tolerances(s, P->rtol, P->atol));
  PK_REQUIRE_OK(ctx, pkrylov_solver_set_max_iterations(s, 3000));
  PK_REQUIRE_OK(ctx, pkrylov_solver_set_residual_replacement(s, k));
  if (m) {
    PK_REQUIRE_OK(ctx, pkrylov_solver_set_sync_interval(s, m->sync));
    pk_cuda_solver_set_launch(s, m->fold, -1);
    if (m->monitor) PK_REQUIRE_OK(ctx, pkrylov_solver_set_monitor(s, count_monitor, &calls));
  }
  memset(x, 0, sizeof(double) * (size_t)P->n);
  PK_REQUIRE_OK(ctx, pkrylov_solver_solve(s, PKRYLOV_MEM_HOST, P->b, x));
  PK_REQUIRE_OK(ctx, pkrylov_solver_get_result(s, res));
  if (m && m->monitor)
    PK_EXPECT(calls == res->iterations + 1, "monitor called %d times for %d iterations", calls,
              res->iterations);
  pkrylov_solver_destroy(&s);
  return PK_PASS;
}

/** Every mode on the CUDA problem G (context gctx) against the reference (on the CPU problem C) and the CPU
 *  backend. */
static int check_modes(pkrylov_context gctx, const pk_rr_problem *C, const pk_rr_problem *G,
                       const char *what) {
  pkrylov_context cctx = NULL;
  pkrylov_result rc, rg;
  double *x = malloc(sizeof(double) * (size_t)C->n);
  PK_REQUIRE(x != NULL, "out of memory");
  const int ref = pk_rr_reference_cg(C, NULL, 3000);
  PK_REQUIRE(ref > 0, "%s: the reference CG did not converge", what);
  PK_REQUIRE_OK(NULL, pkrylov_context_create(PKRYLOV_BACKEND_CPU, &cctx));
  PK_REQUIRE_OK(cctx, pk_rr_solve(cctx, C, PKRYLOV_SOLVER_PIPECG, PKRYLOV_REPLACE_AUTO, NULL, x, &rc));
  for (size_t i = 0; i < sizeof MODES / sizeof MODES[0]; i++) {
    const mode *m = &MODES[i];
    if (solve_mode(gctx, G, PKRYLOV_REPLACE_AUTO, m, x, &rg) != PK_PASS) return PK_FAIL;
    const double tol = pk_rr_tol(C), tr = pk_rr_true_residual(C, x);
    PK_EXPECT(rg.converged, "%s, %s: %s", what, m->name, pkrylov_reason_string(rg.reason));
    PK_EXPECT(rg.iterations <= PK_RR_ITER_FACTOR * ref, "%s, %s: %d iterations, reference CG %d", what,
              m->name, rg.iterations, ref);
    PK_EXPECT(tr >= 0 && tr <= tol, "%s, %s: true residual %.3e > tolerance %.3e", what, m->name, tr, tol);
    PK_EXPECT(rg.residual_replacements >= 1, "%s, %s: no replacement", what, m->name);
    /* (the thin shell at 1e-10 is at CG's attainable accuracy: a confirmation may fail and restart on one
       backend and not on the other) */
    PK_EXPECT(abs(rg.iterations - rc.iterations) <= 2 &&
                  abs(rg.residual_replacements - rc.residual_replacements) <= 1,
              "%s, %s: GPU %d iterations %d replacements, CPU %d and %d", what, m->name, rg.iterations,
              rg.residual_replacements, rc.iterations, rc.residual_replacements);
  }
  free(x);
  pkrylov_context_destroy(&cctx);
  return PK_PASS;
}

/** The problem (make: pk_rr_thinshell or pk_rr_basin) built on the CPU and on the GPU, every mode. */
static int modes_case(int (*make)(pkrylov_context, int, int, int, pk_rr_problem *), int nx, int ny, int nz,
                      const char *what) {
  pkrylov_context cctx, gctx;
  pk_rr_problem C, G;
  PK_REQUIRE_OK(NULL, pkrylov_context_create(PKRYLOV_BACKEND_CPU, &cctx));
  PK_REQUIRE_OK(NULL, pkrylov_context_create(PKRYLOV_BACKEND_CUDA, &gctx));
  PK_REQUIRE_OK(cctx, make(cctx, nx, ny, nz, &C));
  PK_REQUIRE_OK(gctx, make(gctx, nx, ny, nz, &G));
  check_modes(gctx, &C, &G, what);
  pk_rr_free(&C), pk_rr_free(&G);
  pkrylov_context_destroy(&gctx), pkrylov_context_destroy(&cctx);
  return PK_PASS;
}

PK_TEST_CASE(thinshell) {
  SKIP_WITHOUT_GPU();
  if (modes_case(pk_rr_thinshell, 64, 64, 32, "thin shell 64 x 64 x 32") != PK_PASS) return PK_FAIL;
  PK_TEST_END();
}

PK_TEST_CASE(basin) {
  SKIP_WITHOUT_GPU();
  if (modes_case(pk_rr_basin, 64, 48, 15, "basin 64 x 48 x 15") != PK_PASS) return PK_FAIL;
  PK_TEST_END();
}

/** Without a preconditioner: the CUDA driver's specialised update (M = I) against the CPU backend. */
PK_TEST_CASE(no_precond) {
  SKIP_WITHOUT_GPU();
  pkrylov_context cctx, gctx;
  pk_rr_problem C, G;
  PK_REQUIRE_OK(NULL, pkrylov_context_create(PKRYLOV_BACKEND_CPU, &cctx));
  PK_REQUIRE_OK(NULL, pkrylov_context_create(PKRYLOV_BACKEND_CUDA, &gctx));
  /* the CUDA CG driver's specialised update (kry.cg=0 before the solvers are created: the engine has none) */
  PK_REQUIRE_OK(gctx, pkrylov_context_set_option(gctx, "kry.cg", "0"));
  PK_REQUIRE_OK(cctx, pk_rr_basin(cctx, 32, 24, 15, &C));
  PK_REQUIRE_OK(gctx, pk_rr_basin(gctx, 32, 24, 15, &G));
  pkrylov_precond_destroy(&C.M), pkrylov_precond_destroy(&G.M); /* M = I */
  C.rtol = G.rtol = 1e-11;
  double *xc = malloc(sizeof(double) * (size_t)C.n), *xg = malloc(sizeof(double) * (size_t)C.n);
  PK_REQUIRE(xc && xg, "out of memory");
  pkrylov_result rc, rg;
  double *xq = malloc(sizeof(double) * (size_t)C.n);
  PK_REQUIRE(xq, "out of memory");
  PK_REQUIRE_OK(cctx, pk_rr_solve(cctx, &C, PKRYLOV_SOLVER_PIPECG, PKRYLOV_REPLACE_AUTO, NULL, xc, &rc));
  pkrylov_result rq;
  for (int general = 0; general < 2; general++) { /* the specialised update, then the general one */
    pkrylov_solver s;
    double *xo = general ? xq : xg;
    PK_REQUIRE_OK(gctx, pkrylov_solver_create(gctx, PKRYLOV_SOLVER_PIPECG, G.A, NULL, &s));
    PK_REQUIRE_OK(gctx, pkrylov_solver_set_tolerances(s, G.rtol, 0.0));
    PK_REQUIRE_OK(gctx, pkrylov_solver_set_max_iterations(s, 3000));
    pk_cuda_solver_set_launch(s, 0, -1); /* the specialised update runs with the unfolded launchers */
    pk_cuda_solver_set_pipe_none(s, !general);
    memset(xo, 0, sizeof(double) * (size_t)G.n);
    PK_REQUIRE_OK(gctx, pkrylov_solver_solve(s, PKRYLOV_MEM_HOST, G.b, xo));
    PK_REQUIRE_OK(gctx, pkrylov_solver_get_result(s, general ? &rq : &rg));
    PK_EXPECT(pk_cuda_solver_used_pipe_none(s) == !general, "the specialised update %s",
              general ? "ran" : "did not run");
    pkrylov_solver_destroy(&s);
  }
  PK_EXPECT(rg.iterations == rq.iterations && rg.residual_replacements == rq.residual_replacements &&
                memcmp(xg, xq, sizeof(double) * (size_t)G.n) == 0,
            "specialised update %d iterations %d replacements, general %d and %d (x %s)", rg.iterations,
            rg.residual_replacements, rq.iterations, rq.residual_replacements,
            memcmp(xg, xq, sizeof(double) * (size_t)G.n) ? "differs" : "bitwise equal");
  const double tol = pk_rr_tol(&C), tr = pk_rr_true_residual(&C, xg);
  PK_EXPECT(rc.converged && rg.converged, "CPU %s, GPU %s", pkrylov_reason_string(rc.reason),
            pkrylov_reason_string(rg.reason));
  PK_EXPECT(tr >= 0 && tr <= tol, "GPU: true residual %.3e > %.3e", tr, tol);
  PK_EXPECT(rg.residual_replacements >= 1, "GPU: no replacement");
  PK_EXPECT(abs(rg.iterations - rc.iterations) <= 2 && rc.residual_replacements >= 1,
            "GPU %d iterations %d replacements, CPU %d and %d", rg.iterations, rg.residual_replacements,
            rc.iterations, rc.residual_replacements);
  free(xc), free(xg), free(xq);
  pk_rr_free(&C), pk_rr_free(&G);
  pkrylov_context_destroy(&gctx), pkrylov_context_destroy(&cctx);
  PK_TEST_END();
}

/** Reproducible mode: the GPU solve bitwise the CPU backend's, with graphs and block by block. */
PK_TEST_CASE(reproducible) {
  SKIP_WITHOUT_GPU();
  pkrylov_context cctx, gctx;
  pk_rr_problem C, G;
  PK_REQUIRE_OK(NULL, pkrylov_context_create(PKRYLOV_BACKEND_CPU, &cctx));
  PK_REQUIRE_OK(NULL, pkrylov_context_create(PKRYLOV_BACKEND_CUDA, &gctx));
  PK_REQUIRE_OK(cctx, pkrylov_context_set_reproducible(cctx, 1));
  PK_REQUIRE_OK(gctx, pkrylov_context_set_reproducible(gctx, 1));
  PK_REQUIRE_OK(cctx, pk_rr_basin(cctx, 64, 48, 15, &C));
  PK_REQUIRE_OK(gctx, pk_rr_basin(gctx, 64, 48, 15, &G));
  double *xc = malloc(sizeof(double) * (size_t)C.n), *xg = malloc(sizeof(double) * (size_t)C.n);
  PK_REQUIRE(xc && xg, "out of memory");
  pkrylov_result rc, rg;
  PK_REQUIRE_OK(cctx, pk_rr_solve(cctx, &C, PKRYLOV_SOLVER_PIPECG, PKRYLOV_REPLACE_AUTO, NULL, xc, &rc));
  PK_EXPECT(rc.converged && rc.residual_replacements >= 1, "CPU: %s, %d replacements",
            pkrylov_reason_string(rc.reason), rc.residual_replacements);
  static const mode rm[2] = {{"graphs", 32, -1, 0}, {"blocks of 1", 1, -1, 0}};
  for (int i = 0; i < 2; i++) {
    if (solve_mode(gctx, &G, PKRYLOV_REPLACE_AUTO, &rm[i], xg, &rg) != PK_PASS) return PK_FAIL;
    PK_EXPECT(rg.iterations == rc.iterations && rg.residual_replacements == rc.residual_replacements &&
                  rg.reason == rc.reason,
              "%s: GPU %d iterations %d replacements, CPU %d and %d", rm[i].name, rg.iterations,
              rg.residual_replacements, rc.iterations, rc.residual_replacements);
    pkt_same_bits(rm[i].name, "x", C.n, xg, xc);
  }
  free(xc), free(xg);
  pk_rr_free(&C), pk_rr_free(&G);
  pkrylov_context_destroy(&gctx), pkrylov_context_destroy(&cctx);
  PK_TEST_END();
}

PK_TEST_MAIN(PK_TEST_ENTRY(thinshell), PK_TEST_ENTRY(basin), PK_TEST_ENTRY(no_precond),
             PK_TEST_ENTRY(reproducible))

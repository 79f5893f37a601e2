/**
 * @file t931-mpi-cuda-repro.c
 * @brief Reproducible mode on distributed CUDA contexts (one GPU per rank; ranks share a GPU when there are
 *        fewer GPUs), run with 1, 2, 3 and 4 ranks: CG (column and Jacobi preconditioners), pipelined
 *        CG (column preconditioner with residual replacements, Jacobi), and the BiCGStab / GMRES families of
 *        the CUDA vector engine (BiCGStab, pipelined BiCGStab, GMRES, pipelined GMRES, CA-GMRES with the
 *        column preconditioner, FGMRES with Jacobi; restart 12; single-reduction CG with the column
 *        preconditioner and Jacobi) on the distributed thin shell over
 *        every px x py decomposition of the ranks, with blocks of 8 iterations and of 1, on the host-staged
 *        path (option dist.nccl=0: the exact accumulators added by MPI_SUM on MPI_INT64_T) and on the
 *        NCCL path (ncclSum on ncclInt64, where NCCL is built in and each rank has a GPU of its own; the
 *        host-staged path otherwise): the iterations, the gathered solution, the residual history and the
 *        final residual are bitwise those of the reproducible solve of the global problem on one GPU (a
 *        context without communicator), which meets the tolerance on a residual ||b - A x|| the test
 *        recomputes on the CPU. Skipped (77) without a GPU.
 */
#include <cuda_runtime_api.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "pk_mpi_test.h"


typedef struct {
  pkrylov_result res;
  double *x, *hist;
  int32_t hlen;
} run_out;

/** A reproducible solve on A (any context) with the case's settings; x starts at 0. */
static int solve(pkrylov_context ctx, pkrylov_operator A, int32_t type, int32_t pct, int sync, const double *b,
                 int64_t n, run_out *o) {
  pkrylov_precond M = NULL;
  pkrylov_solver s;
  PK_REQUIRE_OK(ctx, pkrylov_precond_create(ctx, A, pct, 0, PKRYLOV_LAYOUT_AUTO, &M));
  PK_REQUIRE_OK(ctx, pkrylov_solver_create(ctx, type, A, M, &s));
  PK_REQUIRE_OK(ctx, pkrylov_solver_set_tolerances(s, 1e-10, 0.0));
  PK_REQUIRE_OK(ctx, pkrylov_solver_set_max_iterations(s, 3000));
  PK_REQUIRE_OK(ctx, pkrylov_solver_set_history(s, 1));
  PK_REQUIRE_OK(ctx, pkrylov_solver_set_sync_interval(s, sync));
  if (type == PKRYLOV_SOLVER_PIPECG && pct == PKRYLOV_PRECOND_COLUMN)
    PK_REQUIRE_OK(ctx, pkrylov_solver_set_residual_replacement(s, 16));
  if (type == PKRYLOV_SOLVER_GMRES || type == PKRYLOV_SOLVER_FGMRES || type == PKRYLOV_SOLVER_PIPEGMRES ||
      type == PKRYLOV_SOLVER_CAGMRES)
    PK_REQUIRE_OK(ctx, pkrylov_solver_set_restart(s, 12)); /* several cycles; CA-GMRES: step 0 (auto, which
                                                              reproducible mode fixes) */
  memset(o->x, 0, sizeof(double) * (size_t)n);
  PK_REQUIRE_OK(ctx, pkrylov_solver_solve(s, PKRYLOV_MEM_HOST, b, o->x));
  PK_REQUIRE_OK(ctx, pkrylov_solver_get_result(s, &o->res));
  PK_REQUIRE_OK(ctx, pkrylov_solver_get_history(s, 3001, o->hist, &o->hlen));
  pkrylov_solver_destroy(&s);
  pkrylov_precond_destroy(&M);
  return PK_PASS;
}

static int case_run(int32_t type, int32_t pct, int nccl) {
  if (!pk_mpi_have_gpu())
    return PK_SKIP;
  pk_mpi_set_path(NULL, nccl); /* the contexts made below */
  int rank, size;
  pk_mpi_world(&rank, &size);
  const int32_t gnx = 30, gny = 24, nz = 12;
  const int64_t ng = (int64_t)gnx * gny * nz;
  pkrylov_thinshell_params p;
  PK_REQUIRE_OK(NULL, pkrylov_thinshell_params_default(gnx, gny, nz, &p));
  p.nu = 1.0;
  /* the distributed context first: it selects the rank's GPU, where the single-GPU context then lives */
  pkrylov_context ctx = NULL;
  PK_REQUIRE_OK(NULL, pkrylov_context_create(PKRYLOV_BACKEND_CUDA, &ctx));
  PK_REQUIRE_OK(ctx, pkrylov_context_set_comm(ctx, MPI_COMM_WORLD));
  PK_REQUIRE_OK(ctx, pkrylov_context_set_reproducible(ctx, 1));
  pkrylov_context cc, c1;
  pkrylov_operator Ac, A1;
  PK_REQUIRE_OK(NULL, pkrylov_context_create(PKRYLOV_BACKEND_CPU, &cc));
  PK_REQUIRE_OK(NULL, pkrylov_context_create(PKRYLOV_BACKEND_CUDA, &c1));
  PK_REQUIRE_OK(c1, pkrylov_context_set_reproducible(c1, 1));
  PK_REQUIRE_OK(cc, pkrylov_operator_create_thinshell(cc, &p, &Ac));
  PK_REQUIRE_OK(c1, pkrylov_operator_create_thinshell(c1, &p, &A1));
  double *bg = malloc(sizeof(double) * ng), *xg = malloc(sizeof(double) * ng), *rg = malloc(sizeof(double) * ng);
  run_out o1 = {.x = malloc(sizeof(double) * ng), .hist = malloc(sizeof(double) * 3001)};
  run_out o = {.hist = malloc(sizeof(double) * 3001)};
  if (!bg || !xg || !rg || !o1.x || !o1.hist || !o.hist)
    return PK_FAIL;
  for (int64_t c = 0; c < ng; c++)
    xg[c] = cos(0.013 * (double)c) + 0.25 * sin(0.0007 * (double)(c * c % 7919));
  PK_REQUIRE_OK(cc, pkrylov_operator_apply(Ac, PKRYLOV_MEM_HOST, xg, bg));
  /* the reference: the global problem on one GPU */
  if (solve(c1, A1, type, pct, 8, bg, ng, &o1) != PK_PASS)
    return PK_FAIL;
  PK_REQUIRE_OK(cc, pkrylov_operator_apply(Ac, PKRYLOV_MEM_HOST, o1.x, rg));
  double rr = 0, bb = 0;
  for (int64_t c = 0; c < ng; c++)
    rr += (bg[c] - rg[c]) * (bg[c] - rg[c]), bb += bg[c] * bg[c];
  PK_EXPECT(o1.res.converged && sqrt(rr) <= 1.01e-10 * sqrt(bb),
            "single GPU: %s, ||b - A x|| / ||b|| = %.3g (recomputed on the CPU)",
            pkrylov_reason_string(o1.res.reason), sqrt(rr / bb));
  for (int px = 1; px <= size; px++) {
    if (size % px)
      continue;
    const int py = size / px;
    pkrylov_operator A;
    PK_REQUIRE_OK(ctx, pkrylov_operator_create_thinshell_dist(ctx, &p, px, py, &A));
    int64_t n;
    PK_REQUIRE_OK(ctx, pkrylov_operator_get_info(A, &n, NULL, NULL, NULL, NULL, NULL));
    double *b = malloc(sizeof(double) * n);
    o.x = malloc(sizeof(double) * n);
    if (!b || !o.x)
      return PK_FAIL;
    PK_REQUIRE_OK(ctx, pkrylov_operator_scatter(A, 0, rank == 0 ? bg : NULL, b));
    for (int sync = 0; sync < 2; sync++) {
      if (solve(ctx, A, type, pct, sync ? 1 : 8, b, n, &o) != PK_PASS)
        return PK_FAIL;
      PK_REQUIRE_OK(ctx, pkrylov_operator_gather(A, 0, o.x, rank == 0 ? xg : NULL));
      PK_EXPECT(o.res.iterations == o1.res.iterations, "%dx%d sync %d: %d iterations, single GPU %d", px, py,
                sync, o.res.iterations, o1.res.iterations);
      PK_EXPECT(o.hlen == o1.hlen && memcmp(o.hist, o1.hist, sizeof(double) * (size_t)o.hlen) == 0,
                "%dx%d sync %d: residual history differs from the single GPU's", px, py, sync);
      PK_EXPECT(memcmp(&o.res.final_residual, &o1.res.final_residual, sizeof(double)) == 0,
                "%dx%d sync %d: final residual %.17g, single GPU %.17g", px, py, sync, o.res.final_residual,
                o1.res.final_residual);
      if (rank == 0) {
        PK_EXPECT(memcmp(xg, o1.x, sizeof(double) * (size_t)ng) == 0,
                  "%dx%d sync %d: the gathered solution is not bitwise the single GPU's", px, py, sync);
        printf("type %d precond %d %s %dx%d sync %d: %d iterations (single GPU %d), final residual %.6g\n",
               type, pct, nccl ? "nccl-or-host" : "host", px, py, sync, o.res.iterations, o1.res.iterations,
               o.res.final_residual);
      }
    }
    pkrylov_operator_destroy(&A);
    free(b), free(o.x);
  }
  pkrylov_operator_destroy(&A1);
  pkrylov_operator_destroy(&Ac);
  pkrylov_context_destroy(&c1);
  pkrylov_context_destroy(&cc);
  pkrylov_context_destroy(&ctx);
  free(bg), free(xg), free(rg), free(o1.x), free(o1.hist), free(o.hist);
  PK_TEST_END();
}

PK_TEST_CASE(cg_column_host) { return case_run(PKRYLOV_SOLVER_CG, PKRYLOV_PRECOND_COLUMN, 0); }
PK_TEST_CASE(cg_jacobi_host) { return case_run(PKRYLOV_SOLVER_CG, PKRYLOV_PRECOND_JACOBI, 0); }
PK_TEST_CASE(pipecg_column_host) { return case_run(PKRYLOV_SOLVER_PIPECG, PKRYLOV_PRECOND_COLUMN, 0); }
PK_TEST_CASE(pipecg_jacobi_host) { return case_run(PKRYLOV_SOLVER_PIPECG, PKRYLOV_PRECOND_JACOBI, 0); }
PK_TEST_CASE(cg_column_nccl) { return case_run(PKRYLOV_SOLVER_CG, PKRYLOV_PRECOND_COLUMN, 1); }
PK_TEST_CASE(pipecg_column_nccl) { return case_run(PKRYLOV_SOLVER_PIPECG, PKRYLOV_PRECOND_COLUMN, 1); }

/* the BiCGStab and GMRES families (the CUDA vector engine) */
PK_TEST_CASE(bicgstab_column_host) {
  return case_run(PKRYLOV_SOLVER_BICGSTAB, PKRYLOV_PRECOND_COLUMN, 0);
}
PK_TEST_CASE(pipebicgstab_column_host) {
  return case_run(PKRYLOV_SOLVER_PIPEBICGSTAB, PKRYLOV_PRECOND_COLUMN, 0);
}
PK_TEST_CASE(gmres_column_host) {
  return case_run(PKRYLOV_SOLVER_GMRES, PKRYLOV_PRECOND_COLUMN, 0);
}
PK_TEST_CASE(fgmres_jacobi_host) {
  return case_run(PKRYLOV_SOLVER_FGMRES, PKRYLOV_PRECOND_JACOBI, 0);
}
PK_TEST_CASE(pipegmres_column_host) {
  return case_run(PKRYLOV_SOLVER_PIPEGMRES, PKRYLOV_PRECOND_COLUMN, 0);
}
PK_TEST_CASE(cagmres_column_host) {
  return case_run(PKRYLOV_SOLVER_CAGMRES, PKRYLOV_PRECOND_COLUMN, 0);
}
PK_TEST_CASE(bicgstab_column_nccl) {
  return case_run(PKRYLOV_SOLVER_BICGSTAB, PKRYLOV_PRECOND_COLUMN, 1);
}
PK_TEST_CASE(pipegmres_column_nccl) {
  return case_run(PKRYLOV_SOLVER_PIPEGMRES, PKRYLOV_PRECOND_COLUMN, 1);
}
PK_TEST_CASE(cagmres_column_nccl) {
  return case_run(PKRYLOV_SOLVER_CAGMRES, PKRYLOV_PRECOND_COLUMN, 1);
}
PK_TEST_CASE(srcg_column_host) {
  return case_run(PKRYLOV_SOLVER_SRCG, PKRYLOV_PRECOND_COLUMN, 0);
}
PK_TEST_CASE(srcg_jacobi_nccl) {
  return case_run(PKRYLOV_SOLVER_SRCG, PKRYLOV_PRECOND_JACOBI, 1);
}

PK_MPI_TEST_MAIN(PK_TEST_ENTRY(cg_column_host), PK_TEST_ENTRY(cg_jacobi_host),
                 PK_TEST_ENTRY(pipecg_column_host), PK_TEST_ENTRY(pipecg_jacobi_host),
                 PK_TEST_ENTRY(cg_column_nccl), PK_TEST_ENTRY(pipecg_column_nccl),
                 PK_TEST_ENTRY(bicgstab_column_host), PK_TEST_ENTRY(pipebicgstab_column_host),
                 PK_TEST_ENTRY(gmres_column_host), PK_TEST_ENTRY(fgmres_jacobi_host),
                 PK_TEST_ENTRY(pipegmres_column_host), PK_TEST_ENTRY(cagmres_column_host),
                 PK_TEST_ENTRY(bicgstab_column_nccl), PK_TEST_ENTRY(pipegmres_column_nccl),
                 PK_TEST_ENTRY(cagmres_column_nccl), PK_TEST_ENTRY(srcg_column_host),
                 PK_TEST_ENTRY(srcg_jacobi_nccl))

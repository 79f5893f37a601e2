/**
 * @file t905-mpi-options.c
 * @brief Collective options across ranks (run with 1 to 4 ranks): an option that chooses a communication
 *        path (dist.nccl, dist.edge_comm, dist.instrument) set differently on one rank makes
 *        pkrylov_context_set_comm fail on EVERY rank with PKRYLOV_ERR_BAD_OPTION, the message naming the
 *        option and both values, and the context keeps no communicator; once the ranks agree it succeeds.
 *        A difference introduced after set_comm is caught by the next distributed solve, on every rank,
 *        before any iteration; once fixed the solve runs and converges (its residual recomputed here with
 *        the single-rank operator on the gathered solution). Options that are not collective (kry.graph)
 *        may differ. On one rank nothing can differ: the same calls succeed.
 */
#include <math.h>
#include <string.h>

#include "pk_mpi_test.h"

/** The last message of ctx. */
static const char *msg_of(pkrylov_context ctx) {
  const char *m = "";
  pkrylov_context_get_last_error(ctx, NULL, &m);
  return m;
}

PK_TEST_CASE(mismatch_at_set_comm) {
  int rank, size;
  pk_mpi_world(&rank, &size);
  static const char *const names[] = {"dist.nccl", "dist.edge_comm", "dist.instrument"};
  for (int k = 0; k < 3; k++) {
    pkrylov_context ctx;
    PK_REQUIRE_OK(NULL, pkrylov_context_create(PKRYLOV_BACKEND_CPU, &ctx));
    /* the last rank differs from the others; a non-collective option differs on every rank */
    char def[8];
    PK_REQUIRE_OK(ctx, pkrylov_context_get_option(ctx, names[k], def, (int32_t)sizeof def));
    const char *other = strcmp(def, "0") == 0 ? "1" : "0";
    if (rank == size - 1) PK_REQUIRE_OK(ctx, pkrylov_context_set_option(ctx, names[k], other));
    PK_REQUIRE_OK(ctx, pkrylov_context_set_option(ctx, "kry.graph", rank % 2 ? "0" : "1"));
    const int e = pkrylov_context_set_comm(ctx, MPI_COMM_WORLD);
    int32_t r = -1, n = -1;
    PK_REQUIRE_OK(ctx, pkrylov_context_get_rank_info(ctx, &r, &n));
    if (size > 1) {
      PK_EXPECT(e == PKRYLOV_ERR_BAD_OPTION, "%s: set_comm returned %d on rank %d", names[k], e, rank);
      char want[128];
      snprintf(want, sizeof want, "option '%s' differs between the ranks (0 on some, 1 on others)", names[k]);
      PK_EXPECT(strstr(msg_of(ctx), want) && strstr(msg_of(ctx), "pkrylov_context_set_comm"),
                "rank %d: message '%s'", rank, msg_of(ctx));
      PK_EXPECT(r == 0 && n == 1, "rank %d: the context kept a communicator (%d of %d)", rank, r, n);
      /* agree: now it is taken */
      PK_REQUIRE_OK(ctx, pkrylov_context_set_option(ctx, names[k], other));
      PK_REQUIRE_OK(ctx, pkrylov_context_set_comm(ctx, MPI_COMM_WORLD));
      PK_REQUIRE_OK(ctx, pkrylov_context_get_rank_info(ctx, &r, &n));
    } else {
      PK_EXPECT(e == PKRYLOV_SUCCESS, "one rank: set_comm returned %d: %s", e, msg_of(ctx));
    }
    PK_EXPECT(r == rank && n == size, "rank %d: rank info %d of %d", rank, r, n);
    PK_REQUIRE_OK(ctx, pkrylov_context_destroy(&ctx));
  }
  PK_TEST_END();
}

PK_TEST_CASE(mismatch_at_solve) {
  int rank, size;
  pk_mpi_world(&rank, &size);
  pkrylov_context ctx, c1;
  PK_REQUIRE_OK(NULL, pkrylov_context_create(PKRYLOV_BACKEND_CPU, &ctx));
  PK_REQUIRE_OK(ctx, pkrylov_context_set_comm(ctx, MPI_COMM_WORLD));
  PK_REQUIRE_OK(NULL, pkrylov_context_create(PKRYLOV_BACKEND_CPU, &c1));
  pkrylov_thinshell_params p;
  PK_REQUIRE_OK(NULL, pkrylov_thinshell_params_default(12, 10, 5, &p));
  pkrylov_operator A, Ag;
  pkrylov_precond M;
  pkrylov_solver s;
  PK_REQUIRE_OK(ctx, pkrylov_operator_create_thinshell_dist(ctx, &p, size, 1, &A));
  PK_REQUIRE_OK(c1, pkrylov_operator_create_thinshell(c1, &p, &Ag));
  PK_REQUIRE_OK(ctx, pkrylov_precond_create(ctx, A, PKRYLOV_PRECOND_COLUMN, 0, PKRYLOV_LAYOUT_AUTO, &M));
  PK_REQUIRE_OK(ctx, pkrylov_solver_create(ctx, PKRYLOV_SOLVER_PIPECG, A, M, &s));
  PK_REQUIRE_OK(ctx, pkrylov_solver_set_tolerances(s, 1e-10, 0.0));
  int64_t n, ng;
  PK_REQUIRE_OK(ctx, pkrylov_operator_get_info(A, &n, NULL, NULL, NULL, NULL, NULL));
  PK_REQUIRE_OK(c1, pkrylov_operator_get_info(Ag, &ng, NULL, NULL, NULL, NULL, NULL));
  double *bg = malloc(sizeof(double) * ng), *xg = malloc(sizeof(double) * ng), *rg = malloc(sizeof(double) * ng);
  double *b = malloc(sizeof(double) * n), *x = calloc((size_t)n, sizeof(double));
  PK_REQUIRE(bg && xg && rg && b && x, "malloc");
  for (int64_t i = 0; i < ng; i++) bg[i] = 1.0 + 0.25 * sin(0.37 * (double)i);
  PK_REQUIRE_OK(ctx, pkrylov_operator_scatter(A, 0, rank == 0 ? bg : NULL, b));
  /* a collective option changed on one rank after set_comm: the solve fails everywhere, x untouched */
  if (rank == 0) PK_REQUIRE_OK(ctx, pkrylov_context_set_option(ctx, "dist.edge_comm", "0"));
  pkrylov_context_set_option(ctx, "kry.profile", rank % 2 ? "1" : "0"); /* not collective: may differ */
  const int e = pkrylov_solver_solve(s, PKRYLOV_MEM_HOST, b, x);
  if (size > 1) {
    PK_EXPECT(e == PKRYLOV_ERR_BAD_OPTION, "rank %d: solve returned %d", rank, e);
    PK_EXPECT(strstr(msg_of(ctx), "pkrylov_solver_solve") &&
                  strstr(msg_of(ctx), "option 'dist.edge_comm' differs between the ranks (0 on some, 1 on others)"),
              "rank %d: message '%s'", rank, msg_of(ctx));
    int64_t nz = 0;
    for (int64_t i = 0; i < n; i++) nz += x[i] != 0.0;
    PK_EXPECT(nz == 0, "rank %d: x changed by the refused solve (%lld values)", rank, (long long)nz);
  } else {
    PK_EXPECT(e == PKRYLOV_SUCCESS, "one rank: solve returned %d: %s", e, msg_of(ctx));
  }
  /* agreed again: the solve runs */
  PK_REQUIRE_OK(ctx, pkrylov_context_set_option(ctx, "dist.edge_comm", "1"));
  memset(x, 0, sizeof(double) * (size_t)n);
  PK_REQUIRE_OK(ctx, pkrylov_solver_solve(s, PKRYLOV_MEM_HOST, b, x));
  pkrylov_result res;
  PK_REQUIRE_OK(ctx, pkrylov_solver_get_result(s, &res));
  PK_EXPECT(res.converged, "rank %d: not converged (%s)", rank, pkrylov_reason_string(res.reason));
  PK_REQUIRE_OK(ctx, pkrylov_operator_gather(A, 0, x, rank == 0 ? xg : NULL));
  if (rank == 0) { /* || b - A x || / || b || with the single-rank operator */
    PK_REQUIRE_OK(c1, pkrylov_operator_apply(Ag, PKRYLOV_MEM_HOST, xg, rg));
    double rr = 0.0, bb = 0.0;
    for (int64_t i = 0; i < ng; i++) rr += (bg[i] - rg[i]) * (bg[i] - rg[i]), bb += bg[i] * bg[i];
    PK_EXPECT(sqrt(rr / bb) < 1e-9, "relative residual %g", sqrt(rr / bb));
  }
  free(bg), free(xg), free(rg), free(b), free(x);
  PK_REQUIRE_OK(ctx, pkrylov_solver_destroy(&s));
  PK_REQUIRE_OK(ctx, pkrylov_precond_destroy(&M));
  PK_REQUIRE_OK(ctx, pkrylov_operator_destroy(&A));
  PK_REQUIRE_OK(c1, pkrylov_operator_destroy(&Ag));
  PK_REQUIRE_OK(ctx, pkrylov_context_destroy(&ctx));
  PK_REQUIRE_OK(c1, pkrylov_context_destroy(&c1));
  PK_TEST_END();
}

PK_MPI_TEST_MAIN(PK_TEST_ENTRY(mismatch_at_set_comm), PK_TEST_ENTRY(mismatch_at_solve))

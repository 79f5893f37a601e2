/**
 * @file t304-pipecg-rr-norm.c
 * @brief White box (pk_impl.h, pk_rr.h): the ||A|| and mu of pipelined CG's automatic residual replacement
 *        (pk_rr_init), which a solver keeps while its operator's coefficients stay (a model solves with the
 *        same operator every time step; the pass over the operator is O(n)). Against the values of a
 *        solver on an operator created from the same coefficients (its own first pass): a tiled grid
 *        stencil before and after pkrylov_operator_update_grid_stencil to other coefficients (the kept
 *        value must follow the update; the two coefficient sets have different ||A||, so the test can
 *        fail), a failed update keeping the value, and ||A|| = 2 max |a_ii| over the wet cells computed
 *        here from the global arrays.
 *
 * CPU only (no PK_TEST_BACKENDS line): white box of the host-side ||A|| the solvers of both backends share.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "pk_grid_test.h"
#include "pk_impl.h"
#include "pk_rr.h"
#include "pk_test.h"

/** pk_rr_init's estimate for a fresh pipelined CG solver on A. */
static int fresh_norm(pkrylov_context ctx, pkrylov_operator A, pk_rr_est *e) {
  pkrylov_solver s = NULL;
  PK_REQUIRE_OK(ctx, pkrylov_solver_create(ctx, PKRYLOV_SOLVER_PIPECG, A, NULL, &s));
  PK_REQUIRE_OK(ctx, pk_rr_init(s, 1.0, e));
  pkrylov_solver_destroy(&s);
  return PK_PASS;
}

/** 2 max |C| over the wet cells of the global arrays of G. */
static double brute_norm(const pkt_global *G) {
  double m = 0.0;
  for (int64_t q = 0; q < G->ncell; q++)
    if (!G->mask || G->mask[q]) m = fmax(m, fabs(G->fC[q]));
  return 2.0 * m;
}

PK_TEST_CASE(kept_until_update) {
  pkrylov_context ctx = NULL;
  PK_REQUIRE_OK(NULL, pkrylov_context_create(PKRYLOV_BACKEND_CPU, &ctx));
  pkt_global G1, G2;
  pkt_global_make(&G1, 1, 8, 6, 1, 1, 0, 0.2, 1, 101);
  pkt_global_make(&G2, 1, 8, 6, 1, 1, 0, 0.2, 1, 102);
  memcpy(G2.mask, G1.mask, sizeof(int32_t) * (size_t)G1.ncell); /* the mask is kept by an update */
  for (int64_t q = 0; q < G2.ncell; q++) G2.fC[q] *= 3.0;         /* another ||A|| */
  pkt_tiling T = pkt_tiling_make(&G1, 4, 3, 1, 1);
  int32_t tiles[4] = {0, 1, 2, 3};
  pkrylov_grid g1 = NULL, g2 = NULL;
  pkrylov_operator A = NULL, B = NULL;
  PK_REQUIRE_OK(ctx, pkt_grid_operator(ctx, &G1, &T, 4, tiles, 1, &g1, &A));
  PK_REQUIRE_OK(ctx, pkt_grid_operator(ctx, &G2, &T, 4, tiles, 1, &g2, &B));
  pkrylov_solver s = NULL;
  pk_rr_est e0, e0b, e1, eb;
  PK_REQUIRE_OK(ctx, pkrylov_solver_create(ctx, PKRYLOV_SOLVER_PIPECG, A, NULL, &s));
  PK_REQUIRE_OK(ctx, pk_rr_init(s, 1.0, &e0));
  PK_REQUIRE_OK(ctx, pk_rr_init(s, 1.0, &e0b)); /* kept */
  PK_EXPECT(e0.anorm == brute_norm(&G1) && e0b.anorm == e0.anorm && e0.mu == 7.0,
            "||A|| %.17g then %.17g (mu %g), brute force %.17g", e0.anorm, e0b.anorm, e0.mu, brute_norm(&G1));
  double *w = pkt_halo_array(&G2, &T, 4, tiles, G2.fW), *sa = pkt_halo_array(&G2, &T, 4, tiles, G2.fS);
  double *c = pkt_halo_array(&G2, &T, 4, tiles, G2.fC);
  PK_REQUIRE_OK(ctx, pkrylov_operator_update_grid_stencil(A, w, sa, NULL, c));
  PK_REQUIRE_OK(ctx, pk_rr_init(s, 1.0, &e1));
  if (fresh_norm(ctx, B, &eb) != PK_PASS) return PK_FAIL;
  PK_EXPECT(eb.anorm != e0.anorm, "the test needs coefficients of another ||A|| (%g)", eb.anorm);
  PK_EXPECT(e1.anorm == eb.anorm && e1.mu == eb.mu && e1.anorm == brute_norm(&G2),
            "||A|| after the update %.17g (mu %g), of an operator created from the coefficients %.17g (%g), "
            "brute force %.17g",
            e1.anorm, e1.mu, eb.anorm, eb.mu, brute_norm(&G2));
  /* a failed update changes nothing */
  c[(1 + 1) + (4 + 2) * (1 + 1)] = NAN;
  PK_EXPECT_CODE(ctx, pkrylov_operator_update_grid_stencil(A, w, sa, NULL, c), PKRYLOV_ERR_NOT_FINITE);
  pk_rr_est e2;
  PK_REQUIRE_OK(ctx, pk_rr_init(s, 1.0, &e2));
  PK_EXPECT(e2.anorm == e1.anorm, "||A|| after a failed update %.17g, before %.17g", e2.anorm, e1.anorm);
  pkrylov_solver_destroy(&s);
  free(w), free(sa), free(c);
  pkrylov_operator_destroy(&A), pkrylov_operator_destroy(&B);
  pkrylov_grid_destroy(&g1), pkrylov_grid_destroy(&g2);
  pkt_global_free(&G1), pkt_global_free(&G2);
  pkrylov_context_destroy(&ctx);
  PK_TEST_END();
}

PK_TEST_MAIN(PK_TEST_ENTRY(kept_until_update))

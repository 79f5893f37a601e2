/**
 * @file t115-stencil-halo.c
 * @brief The column stencil with a halo exchange (pkrylov_operator_create_stencil7_exchange) on a channel
 *        periodic in x (the exchange wraps x) with walls in y (the exchange leaves the y halo at 0):
 *        apply against a CSR matrix of the periodic problem built here, CG / pipelined CG with the
 *        column preconditioner against the dense LAPACK solution of that matrix, a failing exchange,
 *        the missing CSR form, bad input; on a CUDA context against the CPU backend with an exchange that
 *        works on the device array (cuda_matches_cpu, label cuda).
 */
#include <math.h>
#include <string.h>

#include "pk_test.h"
#ifdef PK_TEST_HAVE_CUDART /* CUDA builds: the device exchange of cuda_matches_cpu (tests/CMakeLists.txt) */
#include <cuda_runtime_api.h>
#endif
#include "pk_halo_test.h"

/* ---- the model side (pk_halo_test.h): the channel, its periodic CSR matrix, the exchanges ---------- */

static double *rand_vec(int64_t n, uint64_t seed) {
  double *v = malloc(sizeof(double) * (size_t)n);
  if (v)
    for (int64_t i = 0; i < n; i++)
      v[i] = pk_test_rand(&seed);
  return v;
}

static int create_halo_op(pkrylov_context ctx, const channel *c, xch_data *d, pkrylov_operator *A) {
  return pkrylov_operator_create_stencil7_exchange(ctx, c->nx, c->ny, c->nz, c->aW, c->aS, c->aV, c->aC,
                                                   c->mask, c->aWe, NULL, xch_periodic, d, A);
}

/* ---- cases ---------------------------------------------------------------------------------------- */

/**
 * A x equals the periodic CSR matrix times x (plain CSR loop of the test harness) on random vectors,
 * without and with a mask (dry cells next to the periodic edge), on a grid of several row chunks; one
 * exchange per apply; info: STENCIL7, nnz -1; no CSR export.
 */
PK_TEST_CASE(apply_equals_periodic_csr) {
  pkrylov_context ctx;
  PK_REQUIRE_OK(NULL, pkrylov_context_create(PKRYLOV_BACKEND_CPU, &ctx));
  const int dims[2][3] = {{7, 5, 4}, {41, 30, 6}}; /* the second: 7380 rows, two row chunks */
  for (int g = 0; g < 2; g++)
    for (int wm = 0; wm < 2; wm++) {
      channel c;
      if (make_channel(dims[g][0], dims[g][1], dims[g][2], wm, 11 + g, &c))
        return PK_FAIL;
      const int64_t n = (int64_t)c.nx * c.ny * c.nz;
      xch_data d = {0, 0, 0, c.nx, c.ny, c.nz};
      pkrylov_operator A, C;
      PK_REQUIRE_OK(ctx, create_halo_op(ctx, &c, &d, &A));
      PK_REQUIRE_OK(ctx, periodic_csr(ctx, &c, &C));
      for (int t = 0; t < 3; t++) {
        double *x = rand_vec(n, 100 + t), *y = rand_vec(n, 5), *yr = rand_vec(n, 6);
        PK_REQUIRE_OK(ctx, pkrylov_operator_apply(A, PKRYLOV_MEM_HOST, x, y));
        PK_REQUIRE(pk_test_csr_matvec(C, x, yr) == 0, "reference matvec");
        const double e = pk_test_rel_diff(n, y, yr);
        PK_EXPECT(e <= 1e-13, "grid %d mask %d vector %d: rel diff %.3g", g, wm, t, e);
        free(x), free(y), free(yr);
      }
      PK_EXPECT(d.calls == 3 && d.bad_dims == 0, "exchange calls %d, bad dims/halo %d", d.calls, d.bad_dims);
      int64_t nn = 0, nnz = 0;
      int32_t type = 0, gx = 0, gy = 0, gz = 0;
      PK_REQUIRE_OK(ctx, pkrylov_operator_get_info(A, &nn, &nnz, &type, &gx, &gy, &gz));
      PK_EXPECT(nn == n && nnz == -1 && type == PKRYLOV_OPERATOR_STENCIL7 && gx == c.nx && gy == c.ny &&
                    gz == c.nz,
                "info n %lld nnz %lld type %d", (long long)nn, (long long)nnz, type);
      int64_t rp[8], ci[8];
      double v[8];
      PK_EXPECT_CODE(ctx, pkrylov_operator_get_csr(A, rp, ci, v), PKRYLOV_ERR_UNSUPPORTED);
      PK_EXPECT(pk_test_msg_has(ctx, "'A'") && pk_test_msg_has(ctx, "halo"), "no CSR message");
      PK_EXPECT_CODE(ctx, pkrylov_operator_write_mtx(A, pk_test_tmp_path("t115.mtx")),
                     PKRYLOV_ERR_UNSUPPORTED);
      PK_REQUIRE_OK(ctx, pkrylov_operator_destroy(&C));
      PK_REQUIRE_OK(ctx, pkrylov_operator_destroy(&A));
      free_channel(&c);
    }
  PK_REQUIRE_OK(NULL, pkrylov_context_destroy(&ctx));
  PK_TEST_END();
}

/**
 * CG and pipelined CG with the column preconditioner (and Jacobi) on the halo operator converge to the
 * dense LAPACK solution of the periodic CSR matrix; the true residual is recomputed with the CSR matrix.
 */
PK_TEST_CASE(solve_matches_dense) {
  pkrylov_context ctx;
  PK_REQUIRE_OK(NULL, pkrylov_context_create(PKRYLOV_BACKEND_CPU, &ctx));
  channel c;
  if (make_channel(9, 6, 5, 0, 23, &c))
    return PK_FAIL;
  const int64_t n = (int64_t)c.nx * c.ny * c.nz;
  xch_data d = {0, 0, 0, c.nx, c.ny, c.nz};
  pkrylov_operator A, C;
  PK_REQUIRE_OK(ctx, create_halo_op(ctx, &c, &d, &A));
  PK_REQUIRE_OK(ctx, periodic_csr(ctx, &c, &C));
  double *b = rand_vec(n, 3), *xref = malloc(sizeof(double) * (size_t)n),
         *x = malloc(sizeof(double) * (size_t)n);
  PK_REQUIRE(b && xref && x, "alloc");
  PK_REQUIRE(pk_test_dense_solve(C, b, xref) == 0, "dense reference solve");
  const int pcs[2] = {PKRYLOV_PRECOND_COLUMN, PKRYLOV_PRECOND_JACOBI};
  const int types[2] = {PKRYLOV_SOLVER_CG, PKRYLOV_SOLVER_PIPECG};
  for (int ip = 0; ip < 2; ip++)
    for (int it = 0; it < 2; it++) {
      pkrylov_precond M;
      pkrylov_solver s;
      PK_REQUIRE_OK(ctx, pkrylov_precond_create(ctx, A, pcs[ip], 0, PKRYLOV_LAYOUT_AUTO, &M));
      PK_REQUIRE_OK(ctx, pkrylov_solver_create(ctx, types[it], A, M, &s));
      PK_REQUIRE_OK(ctx, pkrylov_solver_set_tolerances(s, 1e-11, 0.0));
      PK_REQUIRE_OK(ctx, pkrylov_solver_solve(s, PKRYLOV_MEM_HOST, b, x));
      pkrylov_result r;
      PK_REQUIRE_OK(ctx, pkrylov_solver_get_result(s, &r));
      PK_EXPECT(r.converged == 1, "precond %d solver %d: reason %d after %d iterations", pcs[ip], types[it],
                r.reason, r.iterations);
      const double e = pk_test_rel_diff(n, x, xref), rr = pk_test_true_relres(C, b, x);
      PK_EXPECT(e <= 1e-8, "precond %d solver %d: error vs dense %.3g", pcs[ip], types[it], e);
      PK_EXPECT(rr <= 1e-10, "precond %d solver %d: true relres (CSR) %.3g", pcs[ip], types[it], rr);
      PK_REQUIRE_OK(ctx, pkrylov_solver_destroy(&s));
      PK_REQUIRE_OK(ctx, pkrylov_precond_destroy(&M));
    }
  PK_EXPECT(d.bad_dims == 0, "exchange saw wrong dims or a dirty halo");
  free(b), free(xref), free(x);
  PK_REQUIRE_OK(ctx, pkrylov_operator_destroy(&C));
  PK_REQUIRE_OK(ctx, pkrylov_operator_destroy(&A));
  free_channel(&c);
  PK_REQUIRE_OK(NULL, pkrylov_context_destroy(&ctx));
  PK_TEST_END();
}

/**
 * An exchange returning nonzero: apply gives PKRYLOV_ERR_CALLBACK (y NaN), and so do CG and pipelined CG
 * when it fails in the middle of a solve, without calling it again; a working exchange then works again.
 */
PK_TEST_CASE(exchange_failure) {
  pkrylov_context ctx;
  PK_REQUIRE_OK(NULL, pkrylov_context_create(PKRYLOV_BACKEND_CPU, &ctx));
  channel c;
  if (make_channel(8, 5, 4, 0, 31, &c))
    return PK_FAIL;
  const int64_t n = (int64_t)c.nx * c.ny * c.nz;
  xch_data d = {0, 1, 0, c.nx, c.ny, c.nz};
  pkrylov_operator A;
  PK_REQUIRE_OK(ctx, create_halo_op(ctx, &c, &d, &A));
  double *x = rand_vec(n, 1), *y = rand_vec(n, 2), *b = rand_vec(n, 3);
  PK_EXPECT_CODE(ctx, pkrylov_operator_apply(A, PKRYLOV_MEM_HOST, x, y), PKRYLOV_ERR_CALLBACK);
  PK_EXPECT(pk_test_msg_has(ctx, "halo exchange") && pk_test_msg_has(ctx, "returned 5"), "message");
  PK_EXPECT(isnan(y[0]) && isnan(y[n - 1]), "y is NaN after a failed exchange");
  d.fail_at = 0;
  PK_EXPECT_CODE(ctx, pkrylov_operator_apply(A, PKRYLOV_MEM_HOST, x, y), PKRYLOV_SUCCESS);
  pkrylov_precond M;
  PK_REQUIRE_OK(ctx, pkrylov_precond_create(ctx, A, PKRYLOV_PRECOND_COLUMN, 0, PKRYLOV_LAYOUT_AUTO, &M));
  const int types[2] = {PKRYLOV_SOLVER_CG, PKRYLOV_SOLVER_PIPECG};
  for (int it = 0; it < 2; it++)
    for (int at = 1; at <= 4; at += 3) { /* the initial residual, and a product inside the iteration */
      pkrylov_solver s;
      PK_REQUIRE_OK(ctx, pkrylov_solver_create(ctx, types[it], A, M, &s));
      d.calls = 0, d.fail_at = at;
      PK_REQUIRE_OK(ctx, pkrylov_solver_set_initial_guess_nonzero(s, 1));
      for (int64_t i = 0; i < n; i++) x[i] = 0.5 + (double)(i % 3); /* a failed solve gives x back */
      PK_EXPECT_CODE(ctx, pkrylov_solver_solve(s, PKRYLOV_MEM_HOST, b, x), PKRYLOV_ERR_CALLBACK);
      for (int64_t i = 0; i < n; i++)
        if (x[i] != 0.5 + (double)(i % 3)) {
          PK_EXPECT(0, "solver %d at %d: x[%lld] changed by a failed solve", types[it], at, (long long)i);
          break;
        }
      PK_EXPECT(pk_test_msg_has(ctx, "halo exchange"), "solver %d at %d: message", types[it], at);
      PK_EXPECT(d.calls == at, "solver %d: exchange called %d times, failing at %d", types[it], d.calls, at);
      d.fail_at = 0;
      PK_EXPECT_CODE(ctx, pkrylov_solver_solve(s, PKRYLOV_MEM_HOST, b, x), PKRYLOV_SUCCESS);
      pkrylov_result r;
      PK_REQUIRE_OK(ctx, pkrylov_solver_get_result(s, &r));
      PK_EXPECT(r.converged == 1, "solver %d: converges once the exchange works", types[it]);
      PK_REQUIRE_OK(ctx, pkrylov_solver_destroy(&s));
    }
  free(x), free(y), free(b);
  PK_REQUIRE_OK(ctx, pkrylov_precond_destroy(&M));
  PK_REQUIRE_OK(ctx, pkrylov_operator_destroy(&A));
  free_channel(&c);
  PK_REQUIRE_OK(NULL, pkrylov_context_destroy(&ctx));
  PK_TEST_END();
}

/** Bad input: the specific code and the argument named; nothing created, the exchange never called. */
PK_TEST_CASE(bad_input) {
  pkrylov_context ctx;
  PK_REQUIRE_OK(NULL, pkrylov_context_create(PKRYLOV_BACKEND_CPU, &ctx));
  channel c;
  if (make_channel(5, 4, 3, 0, 41, &c))
    return PK_FAIL;
  xch_data d = {0, 0, 0, c.nx, c.ny, c.nz};
  pkrylov_operator A = NULL;
#define MK(cx, nx_, ny_, nz_, w, we, sn, fn, out)                                                            \
  pkrylov_operator_create_stencil7_exchange((cx), (nx_), (ny_), (nz_), (w), c.aS, c.aV, c.aC, NULL, (we),    \
                                            (sn), (fn), &d, (out))
  PK_EXPECT_CODE(ctx, MK(ctx, 5, 4, 3, c.aW, c.aWe, NULL, NULL, &A), PKRYLOV_ERR_NULL_POINTER);
  PK_EXPECT(pk_test_msg_has(ctx, "'exchange'"), "NULL exchange");
  PK_EXPECT_CODE(ctx, MK(ctx, 5, 4, 3, NULL, c.aWe, NULL, xch_periodic, &A), PKRYLOV_ERR_NULL_POINTER);
  PK_EXPECT(pk_test_msg_has(ctx, "'aW'"), "NULL aW");
  PK_EXPECT_CODE(ctx, MK(ctx, 5, 4, 3, c.aW, c.aWe, NULL, xch_periodic, NULL), PKRYLOV_ERR_NULL_POINTER);
  PK_EXPECT(pk_test_msg_has(ctx, "'A'"), "NULL A");
  PK_EXPECT_CODE(NULL, MK(NULL, 5, 4, 3, c.aW, c.aWe, NULL, xch_periodic, &A), PKRYLOV_ERR_NULL_POINTER);
  PK_EXPECT(pk_test_msg_has(NULL, "'ctx'"), "NULL ctx");
  PK_EXPECT_CODE(ctx, MK(ctx, 0, 4, 3, c.aW, c.aWe, NULL, xch_periodic, &A), PKRYLOV_ERR_INVALID_SIZE);
  PK_EXPECT(pk_test_msg_has(ctx, "'nx' = 0"), "nx = 0");
  PK_EXPECT_CODE(ctx, MK(ctx, 5, -2, 3, c.aW, c.aWe, NULL, xch_periodic, &A), PKRYLOV_ERR_INVALID_SIZE);
  PK_EXPECT(pk_test_msg_has(ctx, "'ny' = -2"), "ny = -2");
  PK_EXPECT_CODE(ctx, MK(ctx, 5, 4, 0, c.aW, c.aWe, NULL, xch_periodic, &A), PKRYLOV_ERR_INVALID_SIZE);
  PK_EXPECT(pk_test_msg_has(ctx, "'nz' = 0"), "nz = 0");
  /* issue 14 item 13: the halo'ed size (nx + 2) (ny + 2) was added in int before the cast (signed overflow,
     UBSan) for nx or ny near 2^31: too many cells, nothing read */
  const int32_t big[3][3] = {
      {INT32_MAX, INT32_MAX, 1}, {INT32_MAX - 1, INT32_MAX - 1, 1}, {INT32_MAX, 4, INT32_MAX}};
  for (int k = 0; k < 3; k++) {
    PK_EXPECT_CODE(ctx, MK(ctx, big[k][0], big[k][1], big[k][2], c.aW, c.aWe, NULL, xch_periodic, &A),
                   PKRYLOV_ERR_INVALID_SIZE);
    PK_EXPECT(pk_test_msg_has(ctx, "too many cells"), "%d x %d x %d", big[k][0], big[k][1], big[k][2]);
  }
  PK_EXPECT_CODE(ctx, MK(ctx, 5, 4, 3, c.aW, c.aWe, NULL, xch_periodic, &A), PKRYLOV_SUCCESS);
  PK_REQUIRE_OK(ctx, pkrylov_operator_destroy(&A));
  /* non-finite values that enter A: an edge coupling (ignored by the plain stencil) and aW_east */
  double *we = malloc(sizeof(double) * (size_t)(c.ny * c.nz)),
         *sn = malloc(sizeof(double) * (size_t)(c.nx * c.nz));
  PK_REQUIRE(we && sn, "alloc");
  memcpy(we, c.aWe, sizeof(double) * (size_t)(c.ny * c.nz));
  for (int p = 0; p < c.nx * c.nz; p++)
    sn[p] = 0.0;
  we[c.ny + 2] = NAN; /* (j,k) = (2,1) */
  PK_EXPECT_CODE(ctx, MK(ctx, 5, 4, 3, c.aW, we, NULL, xch_periodic, &A), PKRYLOV_ERR_NOT_FINITE);
  PK_EXPECT(pk_test_msg_has(ctx, "'aW_east'") && pk_test_msg_has(ctx, "(4,2,1)"), "NaN in aW_east");
  sn[1] = INFINITY;
  PK_EXPECT_CODE(ctx, MK(ctx, 5, 4, 3, c.aW, c.aWe, sn, xch_periodic, &A), PKRYLOV_ERR_NOT_FINITE);
  PK_EXPECT(pk_test_msg_has(ctx, "'aS_north'"), "Inf in aS_north");
  const double w0 = c.aW[c.nx * 3];
  c.aW[c.nx * 3] = NAN; /* cell (0,3,0): its west face couples to the halo here */
  PK_EXPECT_CODE(ctx, MK(ctx, 5, 4, 3, c.aW, c.aWe, NULL, xch_periodic, &A), PKRYLOV_ERR_NOT_FINITE);
  PK_EXPECT(pk_test_msg_has(ctx, "'aW'") && pk_test_msg_has(ctx, "(0,3,0)"), "NaN in aW at i = 0");
  c.aW[c.nx * 3] = w0;
#undef MK
  PK_EXPECT(A == NULL && d.calls == 0, "nothing created, exchange never called");
  free(we), free(sn);
  free_channel(&c);
  PK_REQUIRE_OK(NULL, pkrylov_context_destroy(&ctx));
  PK_TEST_END();
}


/**
 * The halo-exchange stencil on a CUDA context, the exchange working on the DEVICE array (cudaMemcpy2D):
 * A x (host and device arrays) against the CPU backend's A x with the host exchange (within 1e-15 of the
 * result; bitwise is reported), without and with a mask, on two grids; CG and pipelined CG with the column
 * preconditioner and Jacobi against the same solves on the CPU backend: same iterations, x within 1e-12;
 * b and x as device arrays too. A failing exchange (at its first call, and inside the iteration):
 * PKRYLOV_ERR_CALLBACK naming the routine, no further call, x as it came; public apply: y NaN.
 * Skipped without a CUDA device (and in builds without CUDA).
 */
PK_TEST_CASE(cuda_matches_cpu) {
#ifndef PK_TEST_HAVE_CUDART
  return PK_SKIP;
#else
  pkrylov_context gpu, cpu;
  if (!pkrylov_has_cuda() || pkrylov_context_create(PKRYLOV_BACKEND_CUDA, &gpu) != PKRYLOV_SUCCESS)
    return PK_SKIP;
  PK_REQUIRE_OK(NULL, pkrylov_context_create(PKRYLOV_BACKEND_CPU, &cpu));
  const int dims[2][3] = {{9, 6, 5}, {41, 30, 6}};
  for (int g = 0; g < 2; g++)
    for (int wm = 0; wm < 2; wm++) {
      channel c;
      if (make_channel(dims[g][0], dims[g][1], dims[g][2], wm, 23 + g, &c))
        return PK_FAIL;
      const int64_t n = (int64_t)c.nx * c.ny * c.nz;
      const size_t hm = (size_t)(c.nx + 2) * (size_t)(c.ny + 2) * (size_t)c.nz;
      xch_data dc = {0, 0, 0, c.nx, c.ny, c.nz};
      xch_dev_data dg = {{0, 0, 0, c.nx, c.ny, c.nz}, 0, 0, NULL, malloc(sizeof(double) * hm)};
      PK_REQUIRE(dg.hbuf, "alloc");
      pkrylov_operator Ac, Ag;
      PK_REQUIRE_OK(cpu, create_halo_op(cpu, &c, &dc, &Ac));
      PK_REQUIRE_OK(gpu, pkrylov_operator_create_stencil7_exchange(gpu, c.nx, c.ny, c.nz, c.aW, c.aS, c.aV, c.aC,
                                                                    c.mask, c.aWe, NULL, xch_periodic_dev, &dg,
                                                                    &Ag));
      /* A x: host arrays, then device arrays */
      int bitwise = 1;
      for (int t = 0; t < 2; t++) {
        double *x = rand_vec(n, 200 + t), *yc = rand_vec(n, 5), *yg = rand_vec(n, 6);
        PK_REQUIRE(x && yc && yg, "alloc");
        dg.x = x;
        PK_REQUIRE_OK(cpu, pkrylov_operator_apply(Ac, PKRYLOV_MEM_HOST, x, yc));
        if (t == 0) {
          PK_REQUIRE_OK(gpu, pkrylov_operator_apply(Ag, PKRYLOV_MEM_HOST, x, yg));
        } else {
          double *dx = pkt_to_device(x, n), *dy = pkt_to_device(yg, n);
          PK_REQUIRE(dx && dy, "device copies");
          PK_REQUIRE_OK(gpu, pkrylov_operator_apply(Ag, PKRYLOV_MEM_DEVICE, dx, dy));
          PK_REQUIRE(cudaMemcpy(yg, dy, sizeof(double) * (size_t)n, cudaMemcpyDeviceToHost) == cudaSuccess,
                     "copy back");
          cudaFree(dx), cudaFree(dy);
        }
        const double e = pk_test_rel_diff(n, yg, yc);
        bitwise &= memcmp(yg, yc, sizeof(double) * (size_t)n) == 0;
        PK_EXPECT(e <= 1e-15, "grid %d mask %d apply %d: GPU vs CPU rel diff %.3g", g, wm, t, e);
        free(x), free(yc), free(yg);
      }
      dg.x = NULL;
      printf("grid %d mask %d: GPU A x %s the CPU's\n", g, wm, bitwise ? "bitwise" : "NOT bitwise");
      /* solves */
      double *b = rand_vec(n, 3);
      PK_REQUIRE(b, "alloc");
      const int pcs[2] = {PKRYLOV_PRECOND_COLUMN, PKRYLOV_PRECOND_JACOBI};
      for (int ip = 0; ip < 2; ip++)
        for (int type = PKRYLOV_SOLVER_CG; type <= PKRYLOV_SOLVER_PIPECG; type++) {
          double *x[2] = {calloc((size_t)n, sizeof(double)), calloc((size_t)n, sizeof(double))};
          PK_REQUIRE(x[0] && x[1], "alloc");
          pkrylov_result res[2];
          for (int side = 0; side < 2; side++) {
            pkrylov_context cx = side ? cpu : gpu;
            pkrylov_operator A = side ? Ac : Ag;
            pkrylov_precond M;
            pkrylov_solver s;
            PK_REQUIRE_OK(cx, pkrylov_precond_create(cx, A, pcs[ip], 0, PKRYLOV_LAYOUT_AUTO, &M));
            PK_REQUIRE_OK(cx, pkrylov_solver_create(cx, type, A, M, &s));
            PK_REQUIRE_OK(cx, pkrylov_solver_set_tolerances(s, 1e-11, 0.0));
            if (side == 0 && ip == 1) { /* b and x as device arrays */
              double *db = pkt_to_device(b, n), *dx = pkt_to_device(x[0], n);
              PK_REQUIRE(db && dx, "device copies");
              PK_REQUIRE_OK(cx, pkrylov_solver_solve(s, PKRYLOV_MEM_DEVICE, db, dx));
              PK_REQUIRE(cudaMemcpy(x[0], dx, sizeof(double) * (size_t)n, cudaMemcpyDeviceToHost) == cudaSuccess,
                         "copy back");
              cudaFree(db), cudaFree(dx);
            } else {
              PK_REQUIRE_OK(cx, pkrylov_solver_solve(s, PKRYLOV_MEM_HOST, b, x[side]));
            }
            PK_REQUIRE_OK(cx, pkrylov_solver_get_result(s, &res[side]));
            PK_REQUIRE_OK(cx, pkrylov_solver_destroy(&s));
            PK_REQUIRE_OK(cx, pkrylov_precond_destroy(&M));
          }
          const double e = pk_test_rel_diff(n, x[0], x[1]);
          printf("grid %d mask %d precond %d solver %d: GPU %d its (%s), CPU %d its, GPU-CPU %.3e\n", g, wm,
                 pcs[ip], type, res[0].iterations, pkrylov_reason_string(res[0].reason), res[1].iterations, e);
          PK_EXPECT(res[0].converged && res[1].converged && res[0].iterations == res[1].iterations,
                    "grid %d mask %d precond %d solver %d: GPU %d its (%s), CPU %d its (%s)", g, wm, pcs[ip],
                    type, res[0].iterations, pkrylov_reason_string(res[0].reason), res[1].iterations,
                    pkrylov_reason_string(res[1].reason));
          PK_EXPECT(e <= 1e-12, "grid %d mask %d precond %d solver %d: x GPU vs CPU %.3g", g, wm, pcs[ip], type,
                    e);
          free(x[0]), free(x[1]);
        }
      PK_EXPECT(dg.base.bad_dims == 0 && dg.not_device == 0 && dg.bad_fill == 0 && dg.base.calls > 0,
                "GPU exchange: %d calls, %d wrong dims, %d host pointers, %d bad fills", dg.base.calls,
                dg.base.bad_dims, dg.not_device, dg.bad_fill);
      /* a failing exchange (first grid, no mask): apply, then solves failing at the first product and inside
         the iteration */
      if (g == 0 && wm == 0) {
        double *x = rand_vec(n, 1), *y = rand_vec(n, 2);
        PK_REQUIRE(x && y, "alloc");
        dg.base.calls = 0, dg.base.fail_at = 1;
        PK_EXPECT_CODE(gpu, pkrylov_operator_apply(Ag, PKRYLOV_MEM_HOST, x, y), PKRYLOV_ERR_CALLBACK);
        PK_EXPECT(pk_test_msg_has(gpu, "halo exchange") && pk_test_msg_has(gpu, "returned 5"), "apply message");
        PK_EXPECT(isnan(y[0]) && isnan(y[n - 1]), "y is NaN after a failed exchange");
        pkrylov_precond M;
        PK_REQUIRE_OK(gpu, pkrylov_precond_create(gpu, Ag, PKRYLOV_PRECOND_COLUMN, 0, PKRYLOV_LAYOUT_AUTO, &M));
        for (int type = PKRYLOV_SOLVER_CG; type <= PKRYLOV_SOLVER_PIPECG; type++)
          for (int at = 1; at <= 6; at += 5) {
            pkrylov_solver s;
            PK_REQUIRE_OK(gpu, pkrylov_solver_create(gpu, type, Ag, M, &s));
            PK_REQUIRE_OK(gpu, pkrylov_solver_set_initial_guess_nonzero(s, 1));
            for (int64_t i = 0; i < n; i++)
              x[i] = 0.5 + (double)(i % 3);
            dg.base.calls = 0, dg.base.fail_at = at;
            PK_EXPECT_CODE(gpu, pkrylov_solver_solve(s, PKRYLOV_MEM_HOST, b, x), PKRYLOV_ERR_CALLBACK);
            for (int64_t i = 0; i < n; i++)
              if (x[i] != 0.5 + (double)(i % 3)) {
                PK_EXPECT(0, "solver %d at %d: x[%lld] changed by a failed solve", type, at, (long long)i);
                break;
              }
            PK_EXPECT(pk_test_msg_has(gpu, "halo exchange") && pk_test_msg_has(gpu, "returned 5"),
                      "solver %d at %d: message", type, at);
            PK_EXPECT(dg.base.calls == at, "solver %d: exchange called %d times, failing at %d", type,
                      dg.base.calls, at);
            dg.base.fail_at = 0;
            PK_EXPECT_CODE(gpu, pkrylov_solver_solve(s, PKRYLOV_MEM_HOST, b, x), PKRYLOV_SUCCESS);
            pkrylov_result r;
            PK_REQUIRE_OK(gpu, pkrylov_solver_get_result(s, &r));
            PK_EXPECT(r.converged == 1, "solver %d: converges once the exchange works", type);
            PK_REQUIRE_OK(gpu, pkrylov_solver_destroy(&s));
          }
        PK_REQUIRE_OK(gpu, pkrylov_precond_destroy(&M));
        free(x), free(y);
      }
      free(b), free(dg.hbuf);
      PK_REQUIRE_OK(gpu, pkrylov_operator_destroy(&Ag));
      PK_REQUIRE_OK(cpu, pkrylov_operator_destroy(&Ac));
      free_channel(&c);
    }
  PK_REQUIRE_OK(NULL, pkrylov_context_destroy(&gpu));
  PK_REQUIRE_OK(NULL, pkrylov_context_destroy(&cpu));
  PK_TEST_END();
#endif
}

PK_TEST_MAIN(PK_TEST_ENTRY(apply_equals_periodic_csr), PK_TEST_ENTRY(solve_matches_dense),
             PK_TEST_ENTRY(exchange_failure), PK_TEST_ENTRY(bad_input),
             PK_TEST_ENTRY(cuda_matches_cpu))

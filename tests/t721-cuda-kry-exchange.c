/**
 * @file t721-cuda-kry-exchange.c
 * @brief The BiCGStab and GMRES families on a CUDA context (the CUDA vector engine, pk_cuda_kry.cu) with the
 *        halo-exchange stencil (pkrylov_operator_create_stencil7_exchange), the model's exchange working on
 *        the DEVICE array (pk_halo_test.h: a channel periodic in x with walls in y, or walls everywhere):
 *        every method against the same solve on the CPU backend with the host exchange (iterations within
 *        2, x within 1e-10; the BiCGStab family within 30 % + 2 and 1e-9) and against the CUDA solve with the equivalent operator without exchange (the
 *        periodic CSR matrix built in the test; with walls everywhere the plain column stencil, whose
 *        product the exchange operator's equals), the true residual recomputed with that matrix by a plain
 *        CSR loop; repeated solves (engine reused), a solve without graphs and device arrays bitwise the
 *        same; a failing exchange (at its first call and inside the iteration): PKRYLOV_ERR_CALLBACK naming
 *        the routine, no further call, x as it came; the next solve with the same solver bitwise a fresh
 *        one's. Every case skips (77) without a GPU.
 */
#define _POSIX_C_SOURCE 200809L /* setenv */
#include <cuda_runtime.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "pk_test.h"
#include "pk_cuda_test.h"
#include "pk_halo_test.h"


static const int kMethods[] = {PKRYLOV_SOLVER_BICGSTAB,  PKRYLOV_SOLVER_PIPEBICGSTAB, PKRYLOV_SOLVER_GMRES,
                               PKRYLOV_SOLVER_PIPEGMRES, PKRYLOV_SOLVER_FGMRES,       PKRYLOV_SOLVER_CAGMRES};
#define NMETHODS ((int)(sizeof kMethods / sizeof kMethods[0]))

static double *rand_vec(int64_t n, uint64_t seed) {
  double *v = malloc(sizeof(double) * (size_t)(n ? n : 1));
  if (v)
    for (int64_t i = 0; i < n; i++)
      v[i] = pk_test_rand(&seed);
  return v;
}


/** A solver of type on A with M: rtol 1e-11, CA-GMRES step 5 (auto picks it by timing), 3000 iterations. */
static int make_solver(pkrylov_context ctx, int type, pkrylov_operator A, pkrylov_precond M, pkrylov_solver *s) {
  int rc = pkrylov_solver_create(ctx, type, A, M, s);
  if (!rc)
    rc = pkrylov_solver_set_tolerances(*s, 1e-11, 0);
  if (!rc)
    rc = pkrylov_solver_set_step(*s, 5);
  if (!rc)
    rc = pkrylov_solver_set_max_iterations(*s, 3000);
  return rc;
}

/** One solve from x = 0 (host arrays) with a new solver: x, result. */
static int solve_once(pkrylov_context ctx, int type, pkrylov_operator A, pkrylov_precond M, const double *b,
                      double *x, int64_t n, pkrylov_result *res) {
  pkrylov_solver s = NULL;
  int rc = make_solver(ctx, type, A, M, &s);
  memset(x, 0, sizeof(double) * (size_t)n);
  if (!rc)
    rc = pkrylov_solver_solve(s, PKRYLOV_MEM_HOST, b, x);
  if (!rc)
    rc = pkrylov_solver_get_result(s, res);
  pkrylov_solver_destroy(&s);
  return rc;
}

/** 1 when a and b hold the same bits. */
static int bitwise(int64_t n, const double *a, const double *b) {
  return memcmp(a, b, sizeof(double) * (size_t)n) == 0;
}

/**
 * Every engine method on the exchange operator, three set-ups: periodic in x (walls in y) without a mask,
 * with the column preconditioner, 41 x 30 x 6; the same with a mask and Jacobi, 23 x 17 x 5; walls
 * everywhere (the halo stays 0) with a mask and the column preconditioner, 29 x 21 x 5. Per method: the
 * CUDA solve (host arrays) against the CPU backend's (same exchange on host arrays): converged, iterations
 * within 2, x within 1e-10 (the BiCGStab family: 30 % + 2, 1e-9), true residuals (recomputed with the CSR form of the equivalent operator) below
 * 2e-11; against the CUDA solve with the equivalent operator without exchange (periodic: the CSR matrix;
 * walls: pkrylov_operator_create_stencil7): the same bounds (bitwise reported);
 * the same solver solving again, a new solver with the option kry.graph=0, and b, x as device arrays: bitwise
 * the first CUDA solve. The exchange always got the device pointer, a zeroed halo and x in the interior.
 */
PK_TEST_CASE(engine_matches_cpu) {
  pkrylov_context gpu = pkt_cuda_ctx(), cpu;
  if (!gpu)
    return PK_SKIP;
  PK_REQUIRE_OK(NULL, pkrylov_context_create(PKRYLOV_BACKEND_CPU, &cpu));
  const int dims[3][3] = {{41, 30, 6}, {23, 17, 5}, {29, 21, 5}};
  const int masks[3] = {0, 1, 1}, walls[3] = {0, 0, 1};
  const int pcs[3] = {PKRYLOV_PRECOND_COLUMN, PKRYLOV_PRECOND_JACOBI, PKRYLOV_PRECOND_COLUMN};
  for (int g = 0; g < 3; g++) {
    channel c;
    PK_REQUIRE(make_channel(dims[g][0], dims[g][1], dims[g][2], masks[g], 71 + g, &c) == 0, "channel");
    const int64_t n = (int64_t)c.nx * c.ny * c.nz;
    const size_t hm = (size_t)(c.nx + 2) * (size_t)(c.ny + 2) * (size_t)c.nz;
    xch_data dc = {0, 0, 0, c.nx, c.ny, c.nz, walls[g]};
    xch_dev_data dg = {{0, 0, 0, c.nx, c.ny, c.nz, walls[g]}, 0, 0, NULL, malloc(sizeof(double) * hm)};
    PK_REQUIRE(dg.hbuf, "alloc");
    const double *we = walls[g] ? NULL : c.aWe;
    pkrylov_operator Ac, Ag, Eg, Ec; /* exchange on CPU / GPU, equivalent without exchange on GPU / CPU */
    PK_REQUIRE_OK(cpu, pkrylov_operator_create_stencil7_exchange(cpu, c.nx, c.ny, c.nz, c.aW, c.aS, c.aV, c.aC,
                                                                 c.mask, we, NULL, xch_periodic, &dc, &Ac));
    PK_REQUIRE_OK(gpu, pkrylov_operator_create_stencil7_exchange(gpu, c.nx, c.ny, c.nz, c.aW, c.aS, c.aV, c.aC,
                                                                 c.mask, we, NULL, xch_periodic_dev, &dg, &Ag));
    if (walls[g]) {
      PK_REQUIRE_OK(gpu, pkrylov_operator_create_stencil7(gpu, c.nx, c.ny, c.nz, c.aW, c.aS, c.aV, c.aC, c.mask,
                                                          &Eg));
      PK_REQUIRE_OK(cpu, pkrylov_operator_create_stencil7(cpu, c.nx, c.ny, c.nz, c.aW, c.aS, c.aV, c.aC, c.mask,
                                                          &Ec));
    } else {
      /* (Jacobi: the dry rows hold 1 on the diagonal, the same iterates as b is 0 there) */
      PK_REQUIRE_OK(gpu, periodic_csr_ex(gpu, &c, pcs[g] == PKRYLOV_PRECOND_JACOBI, &Eg));
      PK_REQUIRE_OK(cpu, periodic_csr(cpu, &c, &Ec));
    }
    pkrylov_precond Mc, Mg, Me;
    PK_REQUIRE_OK(cpu, pkrylov_precond_create(cpu, Ac, pcs[g], 0, PKRYLOV_LAYOUT_AUTO, &Mc));
    PK_REQUIRE_OK(gpu, pkrylov_precond_create(gpu, Ag, pcs[g], 0, PKRYLOV_LAYOUT_AUTO, &Mg));
    /* (the CSR matrix needs the levels and the layout: k-slow, as the channel's cells) */
    PK_REQUIRE_OK(gpu, pkrylov_precond_create(gpu, Eg, pcs[g], c.nz, PKRYLOV_LAYOUT_KSLOW, &Me));
    double *b = rand_vec(n, 3 + g), *xc = rand_vec(n, 1), *xg = rand_vec(n, 1), *xe = rand_vec(n, 1),
           *x2 = rand_vec(n, 1);
    PK_REQUIRE(b && xc && xg && xe && x2, "alloc");
    if (c.mask) /* the right-hand side of a dry cell is 0 (the recomputed residual counts it) */
      for (int64_t i = 0; i < n; i++)
        if (!c.mask[i])
          b[i] = 0.0;
    double *db = pkt_to_device(b, n), *dx = pkt_to_device(xg, n);
    PK_REQUIRE(db && dx, "device copies");
    for (int t = 0; t < NMETHODS; t++) {
      const int type = kMethods[t];
      pkrylov_result rc_, rg, re, r2;
      const int calls0 = dg.base.calls;
      PK_REQUIRE_OK(cpu, solve_once(cpu, type, Ac, Mc, b, xc, n, &rc_));
      /* the CUDA solve, then the same solver again (engine, caches reused) */
      pkrylov_solver s;
      PK_REQUIRE_OK(gpu, make_solver(gpu, type, Ag, Mg, &s));
      memset(xg, 0, sizeof(double) * (size_t)n);
      PK_REQUIRE_OK(gpu, pkrylov_solver_solve(s, PKRYLOV_MEM_HOST, b, xg));
      PK_REQUIRE_OK(gpu, pkrylov_solver_get_result(s, &rg));
      const int calls1 = dg.base.calls - calls0;
      memset(x2, 0, sizeof(double) * (size_t)n);
      PK_REQUIRE_OK(gpu, pkrylov_solver_solve(s, PKRYLOV_MEM_HOST, b, x2));
      PK_REQUIRE_OK(gpu, pkrylov_solver_get_result(s, &r2));
      const int calls2 = dg.base.calls - calls0 - calls1;
      PK_EXPECT(r2.iterations == rg.iterations && bitwise(n, x2, xg) && calls2 == calls1,
                "set-up %d solver %d: repeated solve %d its (first %d), bitwise %d, exchanges %d (first %d)", g,
                type, r2.iterations, rg.iterations, bitwise(n, x2, xg), calls2, calls1);
      /* b and x as device arrays, same solver: bitwise the host-array solve */
      PK_REQUIRE(cudaMemset(dx, 0, sizeof(double) * (size_t)n) == cudaSuccess, "zero dx");
      /* the memset runs on the legacy stream, the library on its own non-blocking one: finish it first */
      PK_REQUIRE(cudaDeviceSynchronize() == cudaSuccess, "cudaDeviceSynchronize");
      PK_REQUIRE_OK(gpu, pkrylov_solver_solve(s, PKRYLOV_MEM_DEVICE, db, dx));
      PK_REQUIRE_OK(gpu, pkrylov_solver_get_result(s, &r2));
      PK_REQUIRE(cudaMemcpy(x2, dx, sizeof(double) * (size_t)n, cudaMemcpyDeviceToHost) == cudaSuccess,
                 "copy back");
      PK_EXPECT(r2.iterations == rg.iterations && bitwise(n, x2, xg),
                "set-up %d solver %d: device arrays %d its (host %d), bitwise %d", g, type, r2.iterations,
                rg.iterations, bitwise(n, x2, xg));
      PK_REQUIRE_OK(gpu, pkrylov_solver_destroy(&s));
      /* no graphs: the blocks with the exchange are never captured, so nothing changes */
      PK_REQUIRE_OK(gpu, pkrylov_context_set_option(gpu, "kry.graph", "0")); /* the new solver inherits it */
      const int e0 = solve_once(gpu, type, Ag, Mg, b, x2, n, &r2);
      PK_REQUIRE_OK(gpu, pkrylov_context_set_option(gpu, "kry.graph", "1"));
      PK_REQUIRE_OK(gpu, e0);
      PK_EXPECT(r2.iterations == rg.iterations && bitwise(n, x2, xg),
                "set-up %d solver %d: without graphs %d its (with %d), bitwise %d", g, type, r2.iterations,
                rg.iterations, bitwise(n, x2, xg));
      /* the equivalent operator without exchange on the GPU */
      PK_REQUIRE_OK(gpu, solve_once(gpu, type, Eg, Me, b, xe, n, &re));
      const double d = pk_test_rel_diff(n, xg, xc), de = pk_test_rel_diff(n, xg, xe);
      const double tg = pk_test_true_relres(Ec, b, xg), tc = pk_test_true_relres(Ec, b, xc);
      printf("set-up %d solver %d: CPU %d its (%s), CUDA %d its (%s), without exchange %d its; CUDA-CPU %.3e, "
             "-without exchange %.3e (%s); relres %.3e %.3e; %d exchanges\n",
             g, type, rc_.iterations, pkrylov_reason_string(rc_.reason), rg.iterations,
             pkrylov_reason_string(rg.reason), re.iterations, d, de, bitwise(n, xg, xe) ? "bitwise" : "not bitwise",
             tg, tc, calls1);
      PK_EXPECT(rc_.converged && rg.converged && re.converged, "set-up %d solver %d: %s / %s / %s", g, type,
                pkrylov_reason_string(rc_.reason), pkrylov_reason_string(rg.reason),
                pkrylov_reason_string(re.reason));
      /* the BiCGStab family's residual is not monotone: rounding (the sums' order) moves its stopping
         iteration (t932: 2 ranks of the CPU engine, pipelined BiCGStab 50 against 64), so within 30 % + 2
         and 1e-9 there */
      const int bicg = type == PKRYLOV_SOLVER_BICGSTAB || type == PKRYLOV_SOLVER_PIPEBICGSTAB;
      const int slack = bicg ? 2 + rc_.iterations * 3 / 10 : 2;
      PK_EXPECT(abs(rg.iterations - rc_.iterations) <= slack && abs(rg.iterations - re.iterations) <= slack,
                "set-up %d solver %d: iterations CUDA %d, CPU %d, without exchange %d", g, type, rg.iterations,
                rc_.iterations, re.iterations);
      const double xtol = bicg ? 1e-9 : 1e-10;
      PK_EXPECT(d <= xtol && de <= xtol, "set-up %d solver %d: x differs from the CPU's by %.3e, from the "
                "solve without exchange by %.3e", g, type, d, de);
      PK_EXPECT(tg <= 2e-11 && tc <= 2e-11, "set-up %d solver %d: true residuals %.3e %.3e", g, type, tg, tc);
      PK_EXPECT(calls1 > rg.iterations, "set-up %d solver %d: %d exchanges for %d iterations", g, type, calls1,
                rg.iterations);
    }
    PK_EXPECT(dg.base.bad_dims == 0 && dg.not_device == 0 && dg.bad_fill == 0 && dc.bad_dims == 0,
              "set-up %d: GPU exchange: %d wrong dims, %d host pointers, %d bad fills; CPU: %d", g,
              dg.base.bad_dims, dg.not_device, dg.bad_fill, dc.bad_dims);
    cudaFree(db), cudaFree(dx);
    free(b), free(xc), free(xg), free(xe), free(x2), free(dg.hbuf);
    PK_REQUIRE_OK(cpu, pkrylov_precond_destroy(&Mc));
    PK_REQUIRE_OK(gpu, pkrylov_precond_destroy(&Mg));
    PK_REQUIRE_OK(gpu, pkrylov_precond_destroy(&Me));
    PK_REQUIRE_OK(cpu, pkrylov_operator_destroy(&Ac));
    PK_REQUIRE_OK(gpu, pkrylov_operator_destroy(&Ag));
    PK_REQUIRE_OK(gpu, pkrylov_operator_destroy(&Eg));
    PK_REQUIRE_OK(cpu, pkrylov_operator_destroy(&Ec));
    free_channel(&c);
  }
  PK_REQUIRE_OK(NULL, pkrylov_context_destroy(&gpu));
  PK_REQUIRE_OK(NULL, pkrylov_context_destroy(&cpu));
  PK_TEST_END();
}

/**
 * A failing exchange (returns 5) in every engine method, at its first call (before the iteration) and at
 * its sixth (inside it), with a nonzero initial guess: PKRYLOV_ERR_CALLBACK, the message names the halo
 * exchange and its return value, the exchange is not called again, x (host arrays; device arrays for
 * BiCGStab) is as it came. Then the same solver with a working exchange converges, bitwise as a new
 * solver from the same guess.
 */
PK_TEST_CASE(engine_exchange_failure) {
  pkrylov_context gpu = pkt_cuda_ctx();
  if (!gpu)
    return PK_SKIP;
  channel c;
  PK_REQUIRE(make_channel(9, 6, 5, 0, 23, &c) == 0, "channel");
  const int64_t n = (int64_t)c.nx * c.ny * c.nz;
  const size_t hm = (size_t)(c.nx + 2) * (size_t)(c.ny + 2) * (size_t)c.nz;
  xch_dev_data dg = {{0, 0, 0, c.nx, c.ny, c.nz, 0}, 0, 0, NULL, malloc(sizeof(double) * hm)};
  PK_REQUIRE(dg.hbuf, "alloc");
  pkrylov_operator A;
  PK_REQUIRE_OK(gpu, pkrylov_operator_create_stencil7_exchange(gpu, c.nx, c.ny, c.nz, c.aW, c.aS, c.aV, c.aC,
                                                               NULL, c.aWe, NULL, xch_periodic_dev, &dg, &A));
  pkrylov_precond M;
  PK_REQUIRE_OK(gpu, pkrylov_precond_create(gpu, A, PKRYLOV_PRECOND_COLUMN, 0, PKRYLOV_LAYOUT_AUTO, &M));
  double *b = rand_vec(n, 3), *x = rand_vec(n, 1), *x0 = rand_vec(n, 1), *xr = rand_vec(n, 1);
  PK_REQUIRE(b && x && x0 && xr, "alloc");
  for (int64_t i = 0; i < n; i++)
    x0[i] = 0.5 + (double)(i % 3);
  for (int t = 0; t < NMETHODS; t++) {
    const int type = kMethods[t];
    for (int at = 1; at <= 6; at += 5)
      for (int dev = 0; dev < (type == PKRYLOV_SOLVER_BICGSTAB ? 2 : 1); dev++) {
        pkrylov_solver s;
        PK_REQUIRE_OK(gpu, make_solver(gpu, type, A, M, &s));
        PK_REQUIRE_OK(gpu, pkrylov_solver_set_initial_guess_nonzero(s, 1));
        memcpy(x, x0, sizeof(double) * (size_t)n);
        double *db = dev ? pkt_to_device(b, n) : NULL, *dx = dev ? pkt_to_device(x0, n) : NULL;
        PK_REQUIRE(!dev || (db && dx), "device copies");
        dg.base.calls = 0, dg.base.fail_at = at;
        if (dev) {
          PK_EXPECT_CODE(gpu, pkrylov_solver_solve(s, PKRYLOV_MEM_DEVICE, db, dx), PKRYLOV_ERR_CALLBACK);
          PK_REQUIRE(cudaMemcpy(x, dx, sizeof(double) * (size_t)n, cudaMemcpyDeviceToHost) == cudaSuccess,
                     "copy back");
        } else {
          PK_EXPECT_CODE(gpu, pkrylov_solver_solve(s, PKRYLOV_MEM_HOST, b, x), PKRYLOV_ERR_CALLBACK);
        }
        PK_EXPECT(pk_test_msg_has(gpu, "halo exchange") && pk_test_msg_has(gpu, "returned 5"),
                  "solver %d at %d: message", type, at);
        PK_EXPECT(dg.base.calls == at, "solver %d: exchange called %d times, failing at %d", type, dg.base.calls,
                  at);
        PK_EXPECT(bitwise(n, x, x0), "solver %d at %d (device arrays %d): x changed by a failed solve", type, at,
                  dev);
        /* the exchange works again: this solver, then a new one, from the same guess */
        dg.base.fail_at = 0;
        pkrylov_result r, rr;
        PK_REQUIRE_OK(gpu, pkrylov_solver_solve(s, PKRYLOV_MEM_HOST, b, x));
        PK_REQUIRE_OK(gpu, pkrylov_solver_get_result(s, &r));
        PK_REQUIRE_OK(gpu, pkrylov_solver_destroy(&s));
        PK_REQUIRE_OK(gpu, make_solver(gpu, type, A, M, &s));
        PK_REQUIRE_OK(gpu, pkrylov_solver_set_initial_guess_nonzero(s, 1));
        memcpy(xr, x0, sizeof(double) * (size_t)n);
        PK_REQUIRE_OK(gpu, pkrylov_solver_solve(s, PKRYLOV_MEM_HOST, b, xr));
        PK_REQUIRE_OK(gpu, pkrylov_solver_get_result(s, &rr));
        PK_REQUIRE_OK(gpu, pkrylov_solver_destroy(&s));
        PK_EXPECT(r.converged && r.iterations == rr.iterations && bitwise(n, x, xr),
                  "solver %d at %d: after the failure %s in %d its, a new solver %d its, bitwise %d", type, at,
                  pkrylov_reason_string(r.reason), r.iterations, rr.iterations, bitwise(n, x, xr));
        if (dev)
          cudaFree(db), cudaFree(dx);
      }
  }
  PK_EXPECT(dg.base.bad_dims == 0 && dg.not_device == 0 && dg.bad_fill == 0,
            "GPU exchange: %d wrong dims, %d host pointers, %d bad fills", dg.base.bad_dims, dg.not_device,
            dg.bad_fill);
  free(b), free(x), free(x0), free(xr), free(dg.hbuf);
  PK_REQUIRE_OK(gpu, pkrylov_precond_destroy(&M));
  PK_REQUIRE_OK(gpu, pkrylov_operator_destroy(&A));
  free_channel(&c);
  PK_REQUIRE_OK(NULL, pkrylov_context_destroy(&gpu));
  PK_TEST_END();
}

PK_TEST_MAIN(PK_TEST_ENTRY(engine_matches_cpu), PK_TEST_ENTRY(engine_exchange_failure))

/**
 * @file t711-cuda-rci.c
 * @brief Handle-based reverse communication (pkrylov_rci_*) on a CUDA context with device vectors: the
 *        loop is driven with a CSR matvec and a Jacobi preconditioner run on the GPU by the test (the
 *        backend's kernels over device copies made here, pk_cuda_test.h), against the same loop on the CPU
 *        backend (host vectors: the library's own CG / pipelined CG solve as a coroutine, rci_kry.c): same
 *        iterations and outcome, x within 1e-12; request operands are device memory, partials host memory
 *        that the caller writes. The request sequences are not compared: the device state machine
 *        (rci_dev.c) starts with one reduction carrying (b, b), the host path with the solve frame's norm of
 *        b and initial residual (documented in pkrylov.h); both print their request counts. Host vectors on
 *        a CUDA context, memory-space mismatches, non-finite device input. Every case skips (77) without a
 *        GPU.
 */
#include <cuda_runtime.h>
#include <string.h>

#include "pk_test.h"
#include "pk_cuda_test.h"


/** 1 when p is device memory; 0 host (pageable or pinned); -1 unknown. */
static int mem_kind(const void *p) {
  struct cudaPointerAttributes at;
  if (cudaPointerGetAttributes(&at, p) != cudaSuccess) {
    cudaGetLastError();
    return -1;
  }
  if (at.type == cudaMemoryTypeDevice) return 1;
  return at.type == cudaMemoryTypeUnregistered || at.type == cudaMemoryTypeHost ? 0 : -1;
}

/** The problem: a CSR matrix (as in t340: 2-D 5-point, variable faces and diagonal; sign -1 negative
 *  definite), as a CPU operator, its inverse diagonal, and device views of both made by the test. */
typedef struct {
  pkrylov_context cpu;
  pkrylov_operator A; /* CPU context */
  int64_t n;
  const int64_t *rp;
  const int32_t *ci;
  const double *val;
  double *dinv;
  pk_cuda_op dA;
  pk_cuda_pc dM;
  pkt_mem mem;
} problem;

static int make_problem(int m, double sign, problem *P) {
  memset(P, 0, sizeof *P);
  if (pkrylov_context_create(PKRYLOV_BACKEND_CPU, &P->cpu)) return 1;
  const int32_t n = m * m;
  int32_t *rp = malloc(sizeof(int32_t) * (size_t)(n + 1)), *ci = malloc(sizeof(int32_t) * (size_t)n * 5);
  double *v = malloc(sizeof(double) * (size_t)n * 5);
  double *kx = malloc(sizeof(double) * (size_t)(m + 1) * m), *ky = malloc(sizeof(double) * (size_t)(m + 1) * m);
  if (!rp || !ci || !v || !kx || !ky) return 1;
  uint64_t seed = 42;
  for (int i = 0; i < (m + 1) * m; i++) {
    kx[i] = 5.5 + 4.5 * pk_test_rand(&seed);
    ky[i] = 5.5 + 4.5 * pk_test_rand(&seed);
  }
  int32_t nz = 0;
  for (int j = 0; j < m; j++)
    for (int i = 0; i < m; i++) {
      const int row = i + m * j;
      rp[row] = nz;
      const double w = kx[i + (m + 1) * j], e = kx[i + 1 + (m + 1) * j];
      const double s = ky[j + (m + 1) * i], nn = ky[j + 1 + (m + 1) * i];
      const double diag = w + e + s + nn + 2.5 + 2.5 * pk_test_rand(&seed);
      if (j > 0) ci[nz] = row - m, v[nz++] = -sign * s;
      if (i > 0) ci[nz] = row - 1, v[nz++] = -sign * w;
      ci[nz] = row, v[nz++] = sign * diag;
      if (i < m - 1) ci[nz] = row + 1, v[nz++] = -sign * e;
      if (j < m - 1) ci[nz] = row + m, v[nz++] = -sign * nn;
    }
  rp[n] = nz;
  int rc = pkrylov_operator_create_csr(P->cpu, n, 0, rp, ci, v, &P->A);
  free(rp), free(ci), free(v), free(kx), free(ky);
  if (rc) return 1;
  P->n = n;
  P->rp = P->A->csr.rowptr;
  P->ci = P->A->csr.colind32;
  P->val = P->A->csr.values;
  P->dinv = malloc(sizeof(double) * (size_t)n);
  if (!P->dinv || !P->ci) return 1;
  for (int64_t i = 0; i < n; i++)
    for (int64_t p = P->rp[i]; p < P->rp[i + 1]; p++)
      if (P->ci[p] == i) P->dinv[i] = 1.0 / P->val[p];
  if (pkt_upload_op(P->A, 0, 0, &P->dA, &P->mem)) return 1; /* csr_lanes 0: thread per row, row order */
  memset(&P->dM, 0, sizeof P->dM);
  P->dM.type = PKRYLOV_PRECOND_JACOBI;
  P->dM.n = P->dM.ncols = n;
  P->dM.nz = 1;
  P->dM.layout = PKRYLOV_LAYOUT_KSLOW;
  P->dM.dinv = (const double *)pkt_dev(&P->mem, P->dinv, sizeof(double) * (size_t)n);
  return P->mem.failed;
}

static void free_problem(problem *P) {
  pkt_free(&P->mem);
  free(P->dinv);
  pkrylov_operator_destroy(&P->A);
  pkrylov_context_destroy(&P->cpu);
}

/** y = A x in row order from 0.0 (the CSR kernel's order with one thread per row). */
static void host_matvec(const problem *P, const double *x, double *y) {
  for (int64_t i = 0; i < P->n; i++) {
    double s = 0.0;
    for (int64_t p = P->rp[i]; p < P->rp[i + 1]; p++) s += P->val[p] * x[P->ci[p]];
    y[i] = s;
  }
}

/** Requests of one solve, in order. */
typedef struct {
  int32_t *req, *npart;
  int len, cap;
  int bad;         /* protocol broken (operand NULL, in == out, unknown request, partials out of range) */
  int wrong_space; /* operands not where the solve's memory space says, or partials not host memory */
} trace;

static void trace_add(trace *t, int32_t req, int32_t np) {
  if (t->len == t->cap) {
    t->cap = t->cap ? 2 * t->cap : 1024;
    t->req = realloc(t->req, sizeof(int32_t) * (size_t)t->cap);
    t->npart = realloc(t->npart, sizeof(int32_t) * (size_t)t->cap);
    if (!t->req || !t->npart) exit(1);
  }
  t->req[t->len] = req;
  t->npart[t->len++] = np;
}

/**
 * Drive the rci to DONE. dev: the requests are answered on the GPU (b, x device arrays); else on the host.
 * The caller's "global sum" is the identity, written back (partials[j] = partials[j] * 1.0) at REDUCE_WAIT.
 */
static int drive(pkrylov_rci r, const problem *P, int dev, const double *b, double *x, int32_t x_nonzero,
                 trace *tr) {
  int ierr = pkrylov_rci_start(r, dev ? PKRYLOV_MEM_DEVICE : PKRYLOV_MEM_HOST, b, x, x_nonzero);
  if (ierr) return ierr;
  tr->len = tr->bad = tr->wrong_space = 0;
  for (;;) {
    int32_t req, np;
    double *in, *out, *part;
    if ((ierr = pkrylov_rci_step(r, &req, &in, &out, &part, &np))) return ierr;
    trace_add(tr, req, np);
    if (req == PKRYLOV_RCI_DONE) return 0;
    if (req == PKRYLOV_RCI_MATVEC || req == PKRYLOV_RCI_PRECOND) {
      if (!in || !out || in == out) {
        tr->bad = 1;
        return -1;
      }
      if (mem_kind(in) != dev || mem_kind(out) != dev) tr->wrong_space++;
      if (dev) {
        const int e = req == PKRYLOV_RCI_MATVEC ? pk_cuda_op_apply(NULL, &P->dA, in, out)
                                                : pk_cuda_pc_apply(NULL, &P->dM, NULL, in, out);
        if (e || cudaDeviceSynchronize() != cudaSuccess) return -2;
      } else if (req == PKRYLOV_RCI_MATVEC) {
        host_matvec(P, in, out);
      } else {
        for (int64_t i = 0; i < P->n; i++) out[i] = P->dinv[i] * in[i];
      }
    } else if (req == PKRYLOV_RCI_REDUCE_START || req == PKRYLOV_RCI_REDUCE_WAIT) {
      if (!part || np < 1 || np > 4) {
        tr->bad = 1;
        return -1;
      }
      if (mem_kind(part) != 0) tr->wrong_space++;
      if (req == PKRYLOV_RCI_REDUCE_WAIT)
        for (int j = 0; j < np; j++) part[j] = part[j] * 1.0; /* one process: the global sum is the identity */
    } else {
      tr->bad = 1;
      return -1;
    }
  }
}

static double *rand_vec(int64_t n, uint64_t seed) {
  double *v = malloc(sizeof(double) * (size_t)n);
  if (v)
    for (int64_t i = 0; i < n; i++) v[i] = pk_test_rand(&seed);
  return v;
}

static double *to_device(const double *h, int64_t n) {
  double *d = NULL;
  if (cudaMalloc((void **)&d, sizeof(double) * (size_t)n) != cudaSuccess) return NULL;
  if (cudaMemcpy(d, h, sizeof(double) * (size_t)n, cudaMemcpyHostToDevice) != cudaSuccess) {
    cudaFree(d);
    return NULL;
  }
  return d;
}

/**
 * CG and pipelined CG, with and without the Jacobi preconditioner, library or caller reductions, zero and
 * nonzero initial guesses, an SPD and a negative definite matrix (40 x 40 grid: residual replacement happens
 * in pipelined CG): the device loop against the CPU backend's loop. Same iterations, reason, replacement
 * count; x within 1e-12; result norms within 1e-12; operands device memory, partials host memory.
 */
PK_TEST_CASE(device_loop_matches_cpu) {
  pkrylov_context gpu = pkt_cuda_ctx();
  if (!gpu) return PK_SKIP;
  trace tc = {0}, tg = {0};
  for (int sg = 0; sg < 2; sg++) {
    problem P;
    PK_REQUIRE(make_problem(40, sg ? -1.0 : 1.0, &P) == 0, "problem set-up");
    const int64_t n = P.n;
    double *b = rand_vec(n, 7), *x0 = rand_vec(n, 8);
    PK_REQUIRE(b && x0, "alloc");
    double *db = to_device(b, n);
    PK_REQUIRE(db, "device b");
    for (int type = PKRYLOV_SOLVER_CG; type <= PKRYLOV_SOLVER_PIPECG; type++)
      for (int pre = 0; pre < 2; pre++)
        for (int byc = 0; byc < 2; byc++)
          for (int nzg = 0; nzg < 2; nzg++) {
            if (sg && (pre || nzg)) continue; /* negative definite: plain CG / pipelined CG, zero guess */
            pkrylov_rci rc, rg;
            PK_REQUIRE_OK(P.cpu, pkrylov_rci_create(P.cpu, type, n, pre, byc, &rc));
            PK_REQUIRE_OK(gpu, pkrylov_rci_create(gpu, type, n, pre, byc, &rg));
            PK_REQUIRE_OK(P.cpu, pkrylov_rci_set_tolerances(rc, 1e-10, 0.0));
            PK_REQUIRE_OK(gpu, pkrylov_rci_set_tolerances(rg, 1e-10, 0.0));
            double *xc = malloc(sizeof(double) * (size_t)n), *xg = malloc(sizeof(double) * (size_t)n);
            PK_REQUIRE(xc && xg, "alloc");
            memcpy(xc, x0, sizeof(double) * (size_t)n);
            double *dx = to_device(x0, n);
            PK_REQUIRE(dx, "device x");
            const int ec = drive(rc, &P, 0, b, xc, nzg, &tc), eg = drive(rg, &P, 1, db, dx, nzg, &tg);
            PK_EXPECT(ec == 0 && !tc.bad, "CPU loop: %d", ec);
            PK_EXPECT(eg == 0 && !tg.bad, "GPU loop: %d (%s)", eg, pkrylov_last_error_message());
            PK_REQUIRE(cudaMemcpy(xg, dx, sizeof(double) * (size_t)n, cudaMemcpyDeviceToHost) == cudaSuccess,
                       "copy back");
            pkrylov_result res_c, res_g;
            PK_REQUIRE_OK(P.cpu, pkrylov_rci_get_result(rc, &res_c));
            PK_REQUIRE_OK(gpu, pkrylov_rci_get_result(rg, &res_g));
            const double e = pk_test_rel_diff(n, xg, xc);
            printf("sign %d type %d precond %d by_caller %d guess %d: GPU %d its (%s, %d replacements), CPU %d its, "
                   "requests GPU %d CPU %d, x GPU-CPU %.3e\n",
                   sg, type, pre, byc, nzg, res_g.iterations, pkrylov_reason_string(res_g.reason),
                   res_g.residual_replacements, res_c.iterations, tg.len, tc.len, e);
            PK_EXPECT(res_c.converged && res_g.converged && res_g.iterations == res_c.iterations &&
                          res_g.reason == res_c.reason &&
                          res_g.residual_replacements == res_c.residual_replacements &&
                          res_g.true_residual_checks == res_c.true_residual_checks,
                      "GPU %d its (%s), CPU %d its (%s)", res_g.iterations, pkrylov_reason_string(res_g.reason),
                      res_c.iterations, pkrylov_reason_string(res_c.reason));
            PK_EXPECT(e <= 1e-12, "x differs by %.3e", e);
            PK_EXPECT(fabs(res_g.rhs_norm - res_c.rhs_norm) <= 1e-12 * res_c.rhs_norm &&
                          fabs(res_g.initial_residual - res_c.initial_residual) <= 1e-12 * res_c.initial_residual,
                      "norms: rhs %.17g / %.17g, initial %.17g / %.17g", res_g.rhs_norm, res_c.rhs_norm,
                      res_g.initial_residual, res_c.initial_residual);
            { /* the GPU's final residual against b - A x recomputed here */
              double *ax = malloc(sizeof(double) * (size_t)n);
              PK_REQUIRE(ax, "alloc");
              host_matvec(&P, xg, ax);
              for (int64_t i = 0; i < n; i++) ax[i] = b[i] - ax[i];
              const double rn = pk_test_norm(n, ax);
              PK_EXPECT(fabs(res_g.final_residual - rn) <= 1e-6 * rn + 1e-15 * res_c.rhs_norm &&
                            rn <= 1e-10 * res_c.rhs_norm,
                        "final residual %.3e, recomputed %.3e", res_g.final_residual, rn);
              free(ax);
            }
            PK_EXPECT(tg.wrong_space == 0 && tc.wrong_space == 0,
                      "operands or partials in the wrong memory space: GPU %d, CPU %d", tg.wrong_space,
                      tc.wrong_space);
            cudaFree(dx);
            free(xc), free(xg);
            PK_REQUIRE_OK(gpu, pkrylov_rci_destroy(&rg));
            PK_REQUIRE_OK(P.cpu, pkrylov_rci_destroy(&rc));
          }
    cudaFree(db);
    free(b), free(x0);
    free_problem(&P);
  }
  free(tc.req), free(tc.npart), free(tg.req), free(tg.npart);
  PK_REQUIRE_OK(NULL, pkrylov_context_destroy(&gpu));
  PK_TEST_END();
}

/**
 * Host vectors on a CUDA context run the host loop (x bitwise the CPU backend's); the same rci then runs a
 * device solve and a host solve again. Memory-space mismatches: host b / x with mem DEVICE and device b / x
 * with mem HOST are PKRYLOV_ERR_MEMTYPE naming the argument, nothing started; a non-finite device b or x:
 * PKRYLOV_ERR_NOT_FINITE; x untouched by a failed start.
 */
PK_TEST_CASE(host_vectors_and_mismatches) {
  pkrylov_context gpu = pkt_cuda_ctx();
  if (!gpu) return PK_SKIP;
  problem P;
  PK_REQUIRE(make_problem(20, 1.0, &P) == 0, "problem set-up");
  const int64_t n = P.n;
  trace t1 = {0}, t2 = {0};
  double *b = rand_vec(n, 17), *x1 = calloc((size_t)n, sizeof(double)), *x2 = calloc((size_t)n, sizeof(double));
  double *db = to_device(b, n), *dx = to_device(x1, n);
  PK_REQUIRE(b && x1 && x2 && db && dx, "alloc");
  for (int type = PKRYLOV_SOLVER_CG; type <= PKRYLOV_SOLVER_PIPECG; type++) {
    pkrylov_rci rc, rg;
    PK_REQUIRE_OK(P.cpu, pkrylov_rci_create(P.cpu, type, n, 1, 1, &rc));
    PK_REQUIRE_OK(gpu, pkrylov_rci_create(gpu, type, n, 1, 1, &rg));
    PK_EXPECT(drive(rc, &P, 0, b, x1, 0, &t1) == 0, "CPU loop");
    PK_EXPECT(drive(rg, &P, 0, b, x2, 0, &t2) == 0, "host loop on the CUDA context");
    PK_EXPECT(memcmp(x1, x2, sizeof(double) * (size_t)n) == 0 && t1.len == t2.len,
              "type %d: host loop on the CUDA context differs from the CPU backend's", type);
    PK_EXPECT(drive(rg, &P, 1, db, dx, 0, &t2) == 0, "device solve on the same rci");
    memset(x2, 0, sizeof(double) * (size_t)n);
    PK_EXPECT(drive(rg, &P, 0, b, x2, 0, &t2) == 0 && memcmp(x1, x2, sizeof(double) * (size_t)n) == 0,
              "host solve again after a device solve");
    /* mismatches */
    PK_EXPECT_CODE(gpu, pkrylov_rci_start(rg, PKRYLOV_MEM_DEVICE, b, dx, 0), PKRYLOV_ERR_MEMTYPE);
    PK_EXPECT(pk_test_msg_has(gpu, "'b'") && pk_test_msg_has(gpu, "host memory"), "message names b");
    PK_EXPECT_CODE(gpu, pkrylov_rci_start(rg, PKRYLOV_MEM_DEVICE, db, x2, 0), PKRYLOV_ERR_MEMTYPE);
    PK_EXPECT(pk_test_msg_has(gpu, "'x'"), "message names x");
    PK_EXPECT_CODE(gpu, pkrylov_rci_start(rg, PKRYLOV_MEM_HOST, db, x2, 0), PKRYLOV_ERR_MEMTYPE);
    PK_EXPECT(pk_test_msg_has(gpu, "'b'") && pk_test_msg_has(gpu, "device memory"), "message names b");
    PK_EXPECT_CODE(gpu, pkrylov_rci_start(rg, PKRYLOV_MEM_HOST, b, dx, 0), PKRYLOV_ERR_MEMTYPE);
    int32_t req;
    PK_EXPECT_CODE(gpu, pkrylov_rci_step(rg, &req, NULL, NULL, NULL, NULL), PKRYLOV_ERR_INVALID_STATE);
    /* non-finite device input; x not touched */
    const double nan = NAN, one = 1.0;
    PK_REQUIRE(cudaMemcpy(db + 5, &nan, sizeof(double), cudaMemcpyHostToDevice) == cudaSuccess, "poke");
    PK_EXPECT_CODE(gpu, pkrylov_rci_start(rg, PKRYLOV_MEM_DEVICE, db, dx, 0), PKRYLOV_ERR_NOT_FINITE);
    PK_EXPECT(pk_test_msg_has(gpu, "'b'"), "message names b");
    PK_REQUIRE(cudaMemcpy(db + 5, b + 5, sizeof(double), cudaMemcpyHostToDevice) == cudaSuccess, "poke");
    PK_REQUIRE(cudaMemcpy(dx + 3, &nan, sizeof(double), cudaMemcpyHostToDevice) == cudaSuccess, "poke");
    PK_EXPECT_CODE(gpu, pkrylov_rci_start(rg, PKRYLOV_MEM_DEVICE, db, dx, 1), PKRYLOV_ERR_NOT_FINITE);
    PK_EXPECT(pk_test_msg_has(gpu, "'x'"), "message names x");
    double back;
    PK_REQUIRE(cudaMemcpy(&back, dx + 3, sizeof(double), cudaMemcpyDeviceToHost) == cudaSuccess, "peek");
    PK_EXPECT(isnan(back), "x modified by a failed start");
    PK_REQUIRE(cudaMemcpy(dx + 3, &one, sizeof(double), cudaMemcpyHostToDevice) == cudaSuccess, "poke");
    PK_EXPECT_CODE(gpu, pkrylov_rci_step(rg, &req, NULL, NULL, NULL, NULL), PKRYLOV_ERR_INVALID_STATE);
    PK_REQUIRE_OK(gpu, pkrylov_rci_destroy(&rg));
    PK_REQUIRE_OK(P.cpu, pkrylov_rci_destroy(&rc));
    memset(x1, 0, sizeof(double) * (size_t)n);
    memset(x2, 0, sizeof(double) * (size_t)n);
  }
  cudaFree(db), cudaFree(dx);
  free(b), free(x1), free(x2);
  free(t1.req), free(t1.npart), free(t2.req), free(t2.npart);
  free_problem(&P);
  PK_REQUIRE_OK(NULL, pkrylov_context_destroy(&gpu));
  PK_TEST_END();
}

PK_TEST_MAIN(PK_TEST_ENTRY(device_loop_matches_cpu), PK_TEST_ENTRY(host_vectors_and_mismatches))

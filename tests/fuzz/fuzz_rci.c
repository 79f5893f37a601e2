/**
 * @file fuzz_rci.c
 * @brief libFuzzer harness of the handle-based reverse communication (pkrylov_rci_*): the bytes choose the
 *        solver type (all eight), n (1..12), preconditioned or not, caller-owned reductions or not, the
 *        settings (valid or not), b and x (NaN sometimes), a dense matrix, and then a sequence of steps:
 *        answer the request (the product, the preconditioner, the sums: left as they are, as one rank does,
 *        or spoilt with NaN or a huge value), change a setting in the middle of a solve, start again, read
 *        the result, or destroy the handle in the middle of a solve (the BiCGStab and GMRES types run in a
 *        worker thread that must be joined). Each call must give a status, never a crash or a hang.
 */
#include "fuzz_common.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static pkrylov_context ctx;
  if (!ctx) FZ_ASSERT(pkrylov_context_create(PKRYLOV_BACKEND_CPU, &ctx) == PKRYLOV_SUCCESS, "context");
  fz_in in = {data, size, 0};
  const int32_t type = PKRYLOV_SOLVER_CG + fz_u8(&in) % 8;
  const int64_t n = 1 + fz_u8(&in) % 12;
  const int pc = fz_u8(&in) & 1, by_caller = fz_u8(&in) & 1;
  double A[144], D[12], b[12], x[12];
  fz_system(&in, n, type <= PKRYLOV_SOLVER_PIPECG, A, D, b, x);
  pkrylov_rci r = NULL;
  if (pkrylov_rci_create(ctx, type, n, pc, by_caller, &r) != PKRYLOV_SUCCESS) return 0;
  /* settings before the first solve: any value (bad ones are refused) */
  pkrylov_rci_set_tolerances(r, fz_u8(&in) & 1 ? fz_f64(&in) : 1e-10, fz_u8(&in) & 1 ? fz_f64(&in) : 0.0);
  pkrylov_rci_set_max_iterations(r, fz_u8(&in) % 200);
  pkrylov_rci_set_restart(r, fz_int(&in, n, 5, 30));
  pkrylov_rci_set_step(r, fz_int(&in, n, 4, 16));
  pkrylov_rci_set_residual_replacement(r, fz_int(&in, n, 5, 50));
  int running = pkrylov_rci_start(r, PKRYLOV_MEM_HOST, b, x, fz_u8(&in) & 1) == PKRYLOV_SUCCESS;
  (void)running;
  for (int step = 0; step < 3000 && fz_more(&in); step++) {
    const uint8_t op = fz_u8(&in);
    if (op < 8) { /* a setting in the middle of a solve (refused by the BiCGStab and GMRES types) */
      switch (op) {
      case 0: pkrylov_rci_set_tolerances(r, fz_f64(&in), fz_f64(&in)); break;
      case 1: pkrylov_rci_set_max_iterations(r, fz_int(&in, n, 10, 1000)); break;
      case 2: pkrylov_rci_set_restart(r, fz_int(&in, n, 5, 30)); break;
      case 3: pkrylov_rci_set_step(r, fz_int(&in, n, 4, 16)); break;
      default: pkrylov_rci_set_residual_replacement(r, fz_int(&in, n, 5, 50)); break;
      }
      continue;
    }
    if (op < 10) { /* start again (abandons the solve in progress), sometimes with b and x aliased */
      b[fz_u8(&in) % n] = fz_f64(&in);
      running = pkrylov_rci_start(r, PKRYLOV_MEM_HOST, b, op == 8 ? x : b, fz_u8(&in) & 1) == PKRYLOV_SUCCESS;
      continue;
    }
    if (op == 10) { /* destroy in the middle and make a new one */
      FZ_ASSERT(pkrylov_rci_destroy(&r) == PKRYLOV_SUCCESS && r == NULL, "destroy");
      if (pkrylov_rci_create(ctx, type, n, pc, by_caller, &r) != PKRYLOV_SUCCESS) return 0;
      running = 0;
      continue;
    }
    if (op == 11) {
      pkrylov_result res;
      pkrylov_rci_get_result(r, &res);
      continue;
    }
    int32_t request = 0, np = -1;
    double *vin = NULL, *vout = NULL, *partials = NULL;
    const int st = pkrylov_rci_step(r, &request, &vin, &vout, &partials, &np);
    if (st != PKRYLOV_SUCCESS) { /* no solve in progress (not started, refused, ended): start one */
      running = pkrylov_rci_start(r, PKRYLOV_MEM_HOST, b, x, op & 1) == PKRYLOV_SUCCESS;
      continue;
    }
    switch (request) {
    case PKRYLOV_RCI_MATVEC:
    case PKRYLOV_RCI_PRECOND:
      FZ_ASSERT(vin && vout && vin != vout, "request %d without distinct in and out", request);
      if (request == PKRYLOV_RCI_MATVEC) {
        fz_matvec(n, A, vin, vout);
      } else {
        FZ_ASSERT(pc, "a PRECOND request without a preconditioner");
        for (int64_t i = 0; i < n; i++) vout[i] = vin[i] / D[i];
      }
      if (op >= 250) vout[op % n] = fz_raw(&in); /* a spoilt answer */
      break;
    case PKRYLOV_RCI_REDUCE_START:
    case PKRYLOV_RCI_REDUCE_WAIT:
      FZ_ASSERT(by_caller && partials && np > 0, "a REDUCE request (%d values) without reduce_by_caller", np);
      if (op >= 250) partials[op % np] = fz_raw(&in); /* one rank's sum: itself, or spoilt */
      break;
    case PKRYLOV_RCI_DONE:
      running = 0;
      break;
    default:
      FZ_ASSERT(0, "unknown request %d", request);
    }
  }
  FZ_ASSERT(pkrylov_rci_destroy(&r) == PKRYLOV_SUCCESS && r == NULL, "destroy");
  pkrylov_context_clear_error(ctx);
  return 0;
}

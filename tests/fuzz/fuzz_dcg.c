/**
 * @file fuzz_dcg.c
 * @brief libFuzzer harness of the MKL-compatible reverse-communication CG (pkrylov_dcg_init/check/dcg/get):
 *        the bytes choose n (1..8), a dense matrix (symmetric, negative or indefinite, NaN sometimes), the
 *        settings, and then a sequence of steps: call pkrylov_dcg and answer its request (the product, the
 *        preconditioner, the user test), or change any entry of ipar or dpar to a value that matters, or
 *        restart (ipar(3) = 1), or call check or get. tmp is exactly the documented n x 4, so that
 *        AddressSanitizer sees any access outside it; the calls must give a status, never a crash.
 */
#include "fuzz_common.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  fz_in in = {data, size, 0};
  const int32_t n = 1 + fz_u8(&in) % 8;
  double A[64], D[8], x[8], b[8];
  double *tmp = malloc(sizeof(double) * 4 * (size_t)n);
  int32_t ipar[128], req = 0, it = 0;
  double dpar[128];
  FZ_ASSERT(tmp, "allocation");
  fz_system(&in, n, 1, A, D, x, b);
  int32_t nn = n;
  if (pkrylov_dcg_init(&nn, x, b, &req, ipar, dpar, tmp) != PKRYLOV_SUCCESS) goto done;
  ipar[5] = ipar[6] = 0; /* no messages */
  ipar[7] = fz_u8(&in) & 1, ipar[8] = fz_u8(&in) & 1, ipar[9] = fz_u8(&in) & 1, ipar[10] = fz_u8(&in) & 1;
  ipar[4] = fz_u8(&in);
  dpar[0] = fz_f64(&in), dpar[1] = fz_f64(&in);
  if (fz_u8(&in) & 1) pkrylov_dcg_check(&nn, x, b, &req, ipar, dpar, tmp);
  for (int step = 0; step < 400 && fz_more(&in); step++) {
    const uint8_t op = fz_u8(&in);
    if (op < 24) { /* any entry of ipar to a value that matters (the print flags stay off) */
      const int k = fz_u8(&in) % 128;
      if (k != 5 && k != 6) ipar[k] = fz_int(&in, n, ipar[4], 4 * (int64_t)n);
      continue;
    }
    if (op < 36) {
      dpar[fz_u8(&in) % 128] = fz_f64(&in);
      continue;
    }
    if (op < 40) {
      pkrylov_dcg_check(&nn, x, b, &req, ipar, dpar, tmp);
      ipar[5] = ipar[6] = 0;
      continue;
    }
    if (op < 44) {
      pkrylov_dcg_get(&nn, x, b, &req, ipar, dpar, tmp, &it);
      continue;
    }
    if (op < 46) {
      ipar[2] = 1; /* start again from x */
      continue;
    }
    const int st = pkrylov_dcg(&nn, x, b, &req, ipar, dpar, tmp);
    if (st != PKRYLOV_SUCCESS) continue; /* rejected: the next step may repair what the bytes broke */
    if (req == 1) {
      fz_matvec(n, A, tmp, tmp + n);
    } else if (req == 3) {
      for (int i = 0; i < n; i++) tmp[3 * n + i] = tmp[2 * n + i] / D[i];
    } else if (req != 2 && (op & 1)) {
      ipar[2] = 1; /* after a stop: start again, or (below) keep calling */
    }
  }
  pkrylov_dcg_get(&nn, x, b, &req, ipar, dpar, tmp, &it);
done:
  free(tmp);
  return 0;
}

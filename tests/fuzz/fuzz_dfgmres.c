/**
 * @file fuzz_dfgmres.c
 * @brief libFuzzer harness of the MKL-compatible reverse-communication FGMRES (pkrylov_dfgmres_init/check/
 *        dfgmres/get): the bytes choose n (1..8), the restart length m (1..10), a dense nonsymmetric matrix,
 *        the settings, and then a sequence of steps: call pkrylov_dfgmres and answer its request where
 *        ipar(22)/ipar(23) say (which must lie in tmp), or change any entry of ipar or dpar to a value that
 *        matters (ipar(15) never above the m tmp was allocated for: a longer tmp is the caller's part of the
 *        contract), restart, check, get with any ipar(13). tmp is exactly the documented length, so that
 *        AddressSanitizer sees any access outside it (issue 14 items 10 to 12 were found so).
 */
#include "fuzz_common.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/** The documented tmp length for n and restart length m. */
static int64_t tmp_len(int64_t n, int64_t m) { return (2 * m + 1) * n + m * (m + 9) / 2 + 1; }

/** The request's operand and result (1-based offsets) must name n values inside tmp. */
static void check_offsets(const int32_t *ipar, int64_t n, int64_t len) {
  FZ_ASSERT(ipar[21] >= 1 && ipar[22] >= 1 && ipar[21] + n - 1 <= len && ipar[22] + n - 1 <= len,
            "request names tmp(%d) and tmp(%d), n %lld, length %lld", ipar[21], ipar[22], (long long)n,
            (long long)len);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  fz_in in = {data, size, 0};
  const int32_t n = 1 + fz_u8(&in) % 8, m = 1 + fz_u8(&in) % 10;
  const int64_t len = tmp_len(n, m);
  double A[64], D[8], x[8], b[8], b2[8];
  double *tmp = malloc(sizeof(double) * (size_t)len);
  int32_t ipar[128], req = 0, it = 0;
  double dpar[128];
  FZ_ASSERT(tmp, "allocation");
  fz_system(&in, n, 0, A, D, x, b);
  int32_t nn = n;
  if (pkrylov_dfgmres_init(&nn, x, b, &req, ipar, dpar, tmp) != PKRYLOV_SUCCESS) goto done;
  ipar[5] = ipar[6] = 0; /* no messages */
  ipar[14] = m;
  ipar[7] = fz_u8(&in) & 1, ipar[8] = fz_u8(&in) & 1, ipar[9] = fz_u8(&in) & 1, ipar[10] = fz_u8(&in) & 1;
  ipar[11] = fz_u8(&in) & 1, ipar[4] = fz_u8(&in);
  dpar[0] = fz_f64(&in), dpar[1] = fz_f64(&in);
  pkrylov_dfgmres_check(&nn, x, b, &req, ipar, dpar, tmp);
  ipar[5] = ipar[6] = 0;
  for (int step = 0; step < 400 && fz_more(&in); step++) {
    const uint8_t op = fz_u8(&in);
    if (op < 24) { /* any entry of ipar (the print flags stay off, ipar(15) within the allocation) */
      const int k = fz_u8(&in) % 128;
      const int32_t v = fz_int(&in, n, m, len);
      if (k != 5 && k != 6 && (k != 14 || v <= m)) ipar[k] = v;
      continue;
    }
    if (op < 36) {
      dpar[fz_u8(&in) % 128] = fz_f64(&in);
      continue;
    }
    if (op < 40) {
      if (ipar[14] <= m) pkrylov_dfgmres_check(&nn, x, b, &req, ipar, dpar, tmp);
      ipar[5] = ipar[6] = 0;
      continue;
    }
    if (op < 46) { /* the current iterate into x, b2 or nowhere */
      ipar[12] = (int32_t)(fz_u8(&in) % 3) - 1;
      pkrylov_dfgmres_get(&nn, x, b2, &req, ipar, dpar, tmp, &it);
      continue;
    }
    if (op < 48) {
      ipar[2] = 1;
      continue;
    }
    const int st = pkrylov_dfgmres(&nn, x, b, &req, ipar, dpar, tmp);
    if (st != PKRYLOV_SUCCESS) continue;
    if (req == 1 || req == 3) {
      check_offsets(ipar, n, len);
      const double *vin = tmp + ipar[21] - 1;
      double *vout = tmp + ipar[22] - 1;
      if (req == 1)
        fz_matvec(n, A, vin, vout);
      else
        for (int i = 0; i < n; i++) vout[i] = vin[i] / D[i];
    } else if (req != 2 && req != 4 && (op & 1)) {
      ipar[2] = 1;
    }
  }
  ipar[12] = 0;
  pkrylov_dfgmres_get(&nn, x, b2, &req, ipar, dpar, tmp, &it);
done:
  free(tmp);
  return 0;
}

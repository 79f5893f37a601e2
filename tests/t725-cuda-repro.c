/**
 * @file t725-cuda-repro.c
 * @brief Reproducible mode on CUDA contexts (white box, links the internal static library).
 *
 *  - exact_dots: pk_cuda_xacc_dots (pk_cuda_xacc.cu) on random vectors whose products span 2^-1120 to
 *    2^1000 (subnormal products and products that underflow to 0 included), with heavy cancellation (each
 *    product also appears negated, all but a few), on odd lengths from 1 to 3 000 001, against
 *    (1) the CPU backend's reproducible dot (pk_allreduce_dots on a reproducible CPU context: reduce.c):
 *        the rounded double bitwise;
 *    (2) an independent exact reference written here: each rounded product decomposed by frexp and added
 *        to a two's-complement big integer of 68 32-bit limbs with full carry / borrow propagation; the
 *        device's accumulator digits must equal the reference's canonical digits (digits 0..65 are its
 *        limbs, the top digit its signed top), bitwise, and the device's double must be within one unit in
 *        the last place of the correctly rounded reference (round to nearest even, written here): the fixed
 *        rounding procedure of pk_xacc.h is faithful, and can differ from the correct rounding by one unit
 *        when the bits it drops lie exactly on a tie;
 *    and a non-finite product: NaN on both backends, counted in the last slot.
 *  - solve_bitwise: CG and pipelined CG (column, Jacobi and no preconditioner; pipelined CG with residual
 *    replacements) in reproducible mode on a CUDA context: two runs and the blocks of 1 and of 8 iterations
 *    (CUDA graphs) give bitwise the same iterations, solution and residual history; the iterations and the
 *    solution match the CPU backend's reproducible solve (same iterations, x within 1e-12 relative to
 *    max |x|), and the residual ||b - A x|| recomputed on the CPU meets the tolerance.
 *  - cpu_gpu_bitwise: the same solves bitwise equal to the CPU backend's reproducible ones (the GPU's
 *    vector updates and operator products are the CPU's expressions without contraction, t700, and the
 *    sums are now the same exact sums, so the iterations are the same bit for bit); at this size (2^17
 *    values or fewer, kry.xfuse=auto) the exact sums are added in the pass of the loops that read the
 *    vectors (CG's operator loop and its Jacobi and unpreconditioned loops, pipelined CG's update;
 *    pk_cuda_xsum.cuh); cpu_gpu_bitwise_two_pass: the same with every exact sum in a second pass (solver
 *    option kry.xfuse=0).
 *  - exact_dots_dd: the exact products and double-double rounding of pk_cuda_xacc_dots_ex /
 *    pk_cuda_xacc_round_ex (the Gram matrices of CA-GMRES) against reduce.c (accumulators and (hi, lo)
 *    bitwise) and the big-integer reference of the exact products p + fma(x, y, -p);
 *  - kry_solve_bitwise: BiCGStab, pipelined BiCGStab, GMRES, FGMRES, pipelined GMRES, CA-GMRES and
 *    single-reduction CG (the CUDA vector engine) in reproducible mode: two GPU runs and blocks of 8 and of
 *    1 iteration bitwise the same;
 *    the CPU backend's reproducible solve: iterations within one, x within 1e-10 relative; the residual
 *    recomputed on the CPU meets the tolerance;
 *  - kry_cpu_gpu_bitwise: the same solves bitwise the CPU backend's reproducible ones;
 *  - kry_csr_cpu_gpu_bitwise: the same on a non-symmetric CSR convection-diffusion matrix (41 x 37 x 23
 *    cells; the engine's fused CSR operator product and update with its one-pass exact sums), BiCGStab,
 *    pipelined BiCGStab and the GMRES family, bitwise the CPU backend's reproducible solves;
 *  - kry_mode_switch: reproducible mode switched on and off between solves of one solver (one engine).
 * Every case returns PK_SKIP (77) when no CUDA device is visible.
 */
#include <math.h>
#include <string.h>

#include "pk_test.h"
#include "pk_cuda_test.h"

/* ---- the independent reference: a two's-complement big integer in units of 2^-1074 ------------------ */

#define NLIMB 68

/** big += sign * m 2^off (off in bits above 2^-1074), carries / borrows propagated through every limb. */
static void big_add(uint32_t *big, uint64_t m, int off, int neg) {
  const int L = off / 32, s = off % 32;
  const unsigned __int128 t = (unsigned __int128)m << s; /* at most 53 + 31 bits */
  uint32_t part[4] = {(uint32_t)t, (uint32_t)(t >> 32), (uint32_t)(t >> 64), (uint32_t)(t >> 96)};
  uint64_t carry = 0;
  for (int i = L; i < NLIMB; i++) {
    const uint64_t add = i - L < 4 ? part[i - L] : 0;
    if (!neg) {
      const uint64_t v = (uint64_t)big[i] + add + carry;
      big[i] = (uint32_t)v;
      carry = v >> 32;
    } else {
      const uint64_t sub = add + carry;
      carry = (uint64_t)big[i] < sub;
      big[i] = (uint32_t)((uint64_t)big[i] - sub);
    }
    if (i - L >= 3 && carry == 0) break;
  }
}

/** Add the double p (finite) to big: p = f 2^e (frexp), f 2^53 an integer. */
static void big_add_double(uint32_t *big, double p) {
  if (p == 0.0) return;
  int e;
  const double f = frexp(fabs(p), &e);
  uint64_t m = (uint64_t)ldexp(f, 53);
  int off = e - 53 + 1074;
  if (off < 0) { /* subnormal: m has that many trailing zeros */
    m >>= -off;
    off = 0;
  }
  big_add(big, m, off, p < 0);
}

/** The canonical digits of the accumulator format from big (value < 2^2112 in magnitude). */
static void big_digits(const uint32_t *big, int64_t *d) {
  for (int i = 0; i < PK_XACC_DIGITS - 1; i++) d[i] = big[i];
  d[PK_XACC_DIGITS - 1] = (int64_t)((uint64_t)big[PK_XACC_DIGITS - 1] | ((uint64_t)big[PK_XACC_DIGITS] << 32));
  d[PK_XACC_DIGITS] = 0;
}

/** The correctly rounded (to nearest, ties to even) double of big. */
static double big_round(const uint32_t *bin) {
  uint32_t b[NLIMB];
  memcpy(b, bin, sizeof b);
  const int neg = (b[NLIMB - 1] >> 31) != 0;
  if (neg) { /* two's-complement negation */
    uint64_t c = 1;
    for (int i = 0; i < NLIMB; i++) {
      const uint64_t v = (uint64_t)(uint32_t)~b[i] + c;
      b[i] = (uint32_t)v;
      c = v >> 32;
    }
  }
  int top = -1; /* highest set bit */
  for (int i = NLIMB - 1; i >= 0 && top < 0; i--)
    if (b[i])
      for (int k = 31; k >= 0; k--)
        if (b[i] >> k & 1u) {
          top = 32 * i + k;
          break;
        }
  if (top < 0)
    return 0.0;
#define BIT(j) ((j) >= 0 && ((b[(j) / 32] >> ((j) % 32)) & 1u))
  double r;
  if (top < 53) { /* exact: M 2^-1074 with M < 2^53 is representable */
    uint64_t m = 0;
    for (int j = top; j >= 0; j--)
      m = m << 1 | (uint64_t)BIT(j);
    r = ldexp((double)m, -1074);
  } else {
    uint64_t q = 0;
    for (int j = top; j > top - 53; j--)
      q = q << 1 | (uint64_t)BIT(j);
    const int half = BIT(top - 53);
    int sticky = 0;
    for (int j = top - 54; j >= 0 && !sticky; j--)
      sticky = BIT(j);
    if (half && (sticky || (q & 1u)))
      q++; /* q may become 2^53: still exact as a double */
    r = ldexp((double)q, top - 52 - 1074);
  }
#undef BIT
  return neg ? -r : r;
}

/* ---- test data ---------------------------------------------------------------------------------------- */

static uint64_t rng_state = 88172645463325252ull;
static uint64_t rng(void) { /* xorshift64 */
  rng_state ^= rng_state << 13;
  rng_state ^= rng_state >> 7;
  rng_state ^= rng_state << 17;
  return rng_state;
}
/** A random double: 53 random bits, sign, exponent in [elo, ehi]. */
static double rnd(int elo, int ehi) {
  const double f = (double)(rng() >> 11) / 9007199254740992.0 + 0.5;
  const int e = elo + (int)(rng() % (uint64_t)(ehi - elo + 1));
  return (rng() & 1u) ? -ldexp(f, e) : ldexp(f, e);
}

/**
 * Fill x, y of length n, kind 0: wild magnitudes (exponents -560..500: products from 2^-1120, subnormal
 * or 0, up to 2^1000); kind 1: as 0 with every product but a few cancelled by its negation at another
 * place; kind 2: similar magnitudes (one exponent window: the device's register windows); kind 3: equal
 * large products (carry headroom: n times the same digits).
 */
static void fill(int kind, int64_t n, double *x, double *y) {
  for (int64_t i = 0; i < n; i++) {
    switch (kind) {
    case 0:
    case 1: x[i] = rnd(-560, 500), y[i] = rnd(-560, 500); break;
    case 2: x[i] = rnd(-3, 3), y[i] = rnd(-3, 3); break;
    default: x[i] = 4294967295.0 * 1099511627776.0, y[i] = 1.0 - ldexp(1.0, -53); break;
    }
  }
  if (kind == 1) /* pairs (i, n-1-i): the second the negation of the first, except every 997th pair */
    for (int64_t i = 0; i < n / 2; i++)
      if (i % 997 != 3)
        x[n - 1 - i] = -x[i], y[n - 1 - i] = y[i];
}

PK_TEST_CASE(exact_dots) {
  SKIP_WITHOUT_GPU();
  static const int64_t lens[] = {1, 7, 255, 257, 1001, 65537, 100003, 3000001};
  /* PK_T725_QUICK set (e.g. under compute-sanitizer): lengths up to 65537 only */
  const int nlen = (int)(sizeof lens / sizeof lens[0]) - (getenv("PK_T725_QUICK") ? 2 : 0);
  const int64_t nmax = 3000001;
  double *x = malloc(sizeof(double) * nmax), *y = malloc(sizeof(double) * nmax),
         *z = malloc(sizeof(double) * nmax);
  if (!x || !y || !z)
    return PK_FAIL;
  pkrylov_context cpu;
  PK_REQUIRE_OK(NULL, pkrylov_context_create(PKRYLOV_BACKEND_CPU, &cpu));
  PK_REQUIRE_OK(cpu, pkrylov_context_set_reproducible(cpu, 1));
  double *dx, *dy, *dz, *dout;
  int64_t *dblk, *dacc;
  const int64_t grid = pk_cuda_xacc_grid(nmax);
  PK_EXPECT(grid >= 1, "pk_cuda_xacc_grid(%lld) = %lld", (long long)nmax, (long long)grid);
  CK(cudaMalloc((void **)&dx, sizeof(double) * nmax));
  CK(cudaMalloc((void **)&dy, sizeof(double) * nmax));
  CK(cudaMalloc((void **)&dz, sizeof(double) * nmax));
  CK(cudaMalloc((void **)&dout, sizeof(double) * 4));
  CK(cudaMalloc((void **)&dblk, sizeof(int64_t) * (size_t)grid * 4 * PK_XACC_LEN));
  CK(cudaMalloc((void **)&dacc, sizeof(int64_t) * 4 * PK_XACC_LEN));
  if (pk_test_failures)
    return PK_FAIL;
  int cases = 0, correctly_rounded = 0;
  for (int kind = 0; kind < 4; kind++)
    for (int l = 0; l < nlen; l++) {
      const int64_t n = lens[l];
      fill(kind, n, x, y);
      for (int64_t i = 0; i < n; i++)
        z[i] = rnd(-40, 40);
      CK(cudaMemcpy(dx, x, sizeof(double) * n, cudaMemcpyHostToDevice));
      CK(cudaMemcpy(dy, y, sizeof(double) * n, cudaMemcpyHostToDevice));
      CK(cudaMemcpy(dz, z, sizeof(double) * n, cudaMemcpyHostToDevice));
      /* three dots at once: (x, y), (x, x) (no cancellation), (z, y) */
      const double *hx[3] = {x, x, z}, *hy[3] = {y, x, y};
      const double *gx[3] = {dx, dx, dz}, *gy[3] = {dy, dx, dy};
      double out[3], cpuv[3];
      int64_t acc[3 * PK_XACC_LEN];
      CK(pk_cuda_xacc_dots(NULL, n, 3, gx, gy, dblk, dacc, dout));
      CK(cudaMemcpy(out, dout, sizeof out, cudaMemcpyDeviceToHost));
      CK(cudaMemcpy(acc, dacc, sizeof acc, cudaMemcpyDeviceToHost));
      PK_REQUIRE_OK(cpu, pk_allreduce_dots(cpu, cpuv, 3, n, hx, hy, NULL));
      for (int j = 0; j < 3; j++) {
        uint32_t big[NLIMB];
        memset(big, 0, sizeof big);
        for (int64_t i = 0; i < n; i++)
          big_add_double(big, hx[j][i] * hy[j][i]);
        int64_t ref[PK_XACC_LEN];
        big_digits(big, ref);
        const double cr = big_round(big);
        PK_EXPECT(memcmp(acc + j * PK_XACC_LEN, ref, sizeof ref) == 0,
                  "kind %d n %lld dot %d: device accumulator differs from the independent big integer", kind,
                  (long long)n, j);
        PK_EXPECT(memcmp(&out[j], &cpuv[j], sizeof(double)) == 0,
                  "kind %d n %lld dot %d: device %.17g, CPU reproducible %.17g", kind, (long long)n, j, out[j],
                  cpuv[j]);
        const int near = out[j] == cr || out[j] == nextafter(cr, INFINITY) || out[j] == nextafter(cr, -INFINITY);
        PK_EXPECT(near, "kind %d n %lld dot %d: device %.17g, correctly rounded reference %.17g", kind,
                  (long long)n, j, out[j], cr);
        cases++;
        correctly_rounded += out[j] == cr;
      }
    }
  printf("%d exact dots: accumulators equal to the reference, doubles equal to the CPU's; %d of them the "
         "correctly rounded value\n",
         cases, correctly_rounded);
  /* a non-finite product: NaN on both, the count in the last slot */
  {
    const int64_t n = 1001;
    fill(0, n, x, y);
    x[500] = INFINITY;
    x[17] = ldexp(1.0, 600), y[17] = ldexp(1.0, 600); /* overflows to Inf */
    CK(cudaMemcpy(dx, x, sizeof(double) * n, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(dy, y, sizeof(double) * n, cudaMemcpyHostToDevice));
    const double *hx[1] = {x}, *hy[1] = {y}, *gx[1] = {dx}, *gy[1] = {dy};
    double out, cpuv;
    int64_t acc[PK_XACC_LEN];
    CK(pk_cuda_xacc_dots(NULL, n, 1, gx, gy, dblk, dacc, dout));
    CK(cudaMemcpy(&out, dout, sizeof out, cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(acc, dacc, sizeof acc, cudaMemcpyDeviceToHost));
    PK_REQUIRE_OK(cpu, pk_allreduce_dots(cpu, &cpuv, 1, n, hx, hy, NULL));
    PK_EXPECT(isnan(out) && isnan(cpuv), "non-finite products: device %g, CPU %g (NaN expected)", out, cpuv);
    PK_EXPECT(acc[PK_XACC_DIGITS] == 2, "non-finite products counted %lld times, 2 expected",
              (long long)acc[PK_XACC_DIGITS]);
  }
  /* the rounding alone (pk_cuda_xacc_round) on the accumulators of the last finite case */
  {
    fill(1, 100003, x, y);
    CK(cudaMemcpy(dx, x, sizeof(double) * 100003, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(dy, y, sizeof(double) * 100003, cudaMemcpyHostToDevice));
    const double *gx[1] = {dx}, *gy[1] = {dy};
    double out[2];
    CK(pk_cuda_xacc_dots(NULL, 100003, 1, gx, gy, dblk, dacc, dout));
    CK(pk_cuda_xacc_round(NULL, dacc, 1, dout + 1));
    CK(cudaMemcpy(out, dout, sizeof out, cudaMemcpyDeviceToHost));
    PK_EXPECT(memcmp(&out[0], &out[1], sizeof(double)) == 0, "pk_cuda_xacc_round %.17g, finish %.17g", out[1],
              out[0]);
  }
  cudaFree(dx), cudaFree(dy), cudaFree(dz), cudaFree(dout), cudaFree(dblk), cudaFree(dacc);
  pkrylov_context_destroy(&cpu);
  free(x), free(y), free(z);
  PK_TEST_END();
}

/**
 * The exact products (pk_cuda_xacc_dots_ex with exact_prod, the Gram matrices of CA-GMRES in the CUDA vector
 * engine's reproducible mode) and the double-double rounding (pk_cuda_xacc_round_ex with dd) against reduce.c
 * (pk_allreduce_xdots_begin with exact_prod and dd: accumulator and (hi, lo) bitwise) and an independent big
 * integer of p + e (each rounded product p and its error e = fma(x, y, -p) added exactly): the accumulator
 * equal, hi within one unit of the correctly rounded exact dot, lo the correctly rounded rest within one
 * unit.
 */
PK_TEST_CASE(exact_dots_dd) {
  SKIP_WITHOUT_GPU();
  static const int64_t lens[] = {1, 7, 257, 1001, 65537, 1000003};
  const int nlen = (int)(sizeof lens / sizeof lens[0]) - (getenv("PK_T725_QUICK") ? 1 : 0);
  const int64_t nmax = 1000003;
  double *x = malloc(sizeof(double) * nmax), *y = malloc(sizeof(double) * nmax),
         *z = malloc(sizeof(double) * nmax);
  if (!x || !y || !z)
    return PK_FAIL;
  pkrylov_context cpu;
  PK_REQUIRE_OK(NULL, pkrylov_context_create(PKRYLOV_BACKEND_CPU, &cpu));
  PK_REQUIRE_OK(cpu, pkrylov_context_set_reproducible(cpu, 1));
  double *dx, *dy, *dz, *dout;
  int64_t *dblk, *dacc, *dmany;
  const int64_t grid = pk_cuda_xacc_grid(nmax);
  const int many = 70; /* accumulators rounded at once (more than one block of pk_cuda_xacc_round_ex) */
  CK(cudaMalloc((void **)&dx, sizeof(double) * nmax));
  CK(cudaMalloc((void **)&dy, sizeof(double) * nmax));
  CK(cudaMalloc((void **)&dz, sizeof(double) * nmax));
  CK(cudaMalloc((void **)&dout, sizeof(double) * 2 * many));
  CK(cudaMalloc((void **)&dblk, sizeof(int64_t) * (size_t)grid * 4 * PK_XACC_LEN));
  CK(cudaMalloc((void **)&dacc, sizeof(int64_t) * 4 * PK_XACC_LEN));
  CK(cudaMalloc((void **)&dmany, sizeof(int64_t) * many * PK_XACC_LEN));
  if (pk_test_failures)
    return PK_FAIL;
  int cases = 0;
  for (int kind = 0; kind < 4; kind++)
    for (int l = 0; l < nlen; l++) {
      const int64_t n = lens[l];
      fill(kind, n, x, y);
      for (int64_t i = 0; i < n; i++)
        z[i] = rnd(-40, 40);
      CK(cudaMemcpy(dx, x, sizeof(double) * n, cudaMemcpyHostToDevice));
      CK(cudaMemcpy(dy, y, sizeof(double) * n, cudaMemcpyHostToDevice));
      CK(cudaMemcpy(dz, z, sizeof(double) * n, cudaMemcpyHostToDevice));
      const double *hx[3] = {x, x, z}, *hy[3] = {y, x, y};
      const double *gx[3] = {dx, dx, dz}, *gy[3] = {dy, dx, dy};
      double out[6], one[3], cpuv[6];
      int64_t acc[3 * PK_XACC_LEN], cacc[3 * PK_XACC_LEN];
      /* dout + 6: the single roundings of the finisher */
      CK(pk_cuda_xacc_dots_ex(NULL, n, 3, gx, gy, 1, dblk, dacc, dout + 6));
      CK(pk_cuda_xacc_round_ex(NULL, dacc, 3, 1, dout));
      CK(cudaMemcpy(out, dout, sizeof out, cudaMemcpyDeviceToHost));
      CK(cudaMemcpy(one, dout + 6, sizeof one, cudaMemcpyDeviceToHost));
      CK(cudaMemcpy(acc, dacc, sizeof acc, cudaMemcpyDeviceToHost));
      pk_reduce_request rq;
      PK_REQUIRE_OK(cpu, pk_allreduce_xdots_begin(cpu, cpuv, 3, n, hx, hy, NULL, 1, 1, cacc, &rq));
      PK_EXPECT(memcmp(acc, cacc, sizeof acc) == 0,
                "kind %d n %lld: device exact-product accumulators differ from reduce.c's", kind,
                (long long)n);
      PK_REQUIRE_OK(cpu, pk_allreduce_end(cpu, &rq));
      for (int j = 0; j < 3; j++) {
        uint32_t big[NLIMB];
        memset(big, 0, sizeof big);
        for (int64_t i = 0; i < n; i++) {
          const double p = hx[j][i] * hy[j][i];
          big_add_double(big, p);
          big_add_double(big, fma(hx[j][i], hy[j][i], -p));
        }
        int64_t ref[PK_XACC_LEN];
        big_digits(big, ref);
        PK_EXPECT(memcmp(acc + j * PK_XACC_LEN, ref, sizeof ref) == 0,
                  "kind %d n %lld dot %d: device accumulator differs from the independent big integer", kind,
                  (long long)n, j);
        PK_EXPECT(memcmp(&out[2 * j], &cpuv[2 * j], 2 * sizeof(double)) == 0,
                  "kind %d n %lld dot %d: device (%.17g, %.17g), CPU (%.17g, %.17g)", kind, (long long)n, j,
                  out[2 * j], out[2 * j + 1], cpuv[2 * j], cpuv[2 * j + 1]);
        PK_EXPECT(memcmp(&out[2 * j], &one[j], sizeof(double)) == 0,
                  "kind %d n %lld dot %d: hi %.17g, the single rounding %.17g", kind, (long long)n, j,
                  out[2 * j], one[j]);
        const double cr = big_round(big);
        PK_EXPECT(out[2 * j] == cr || out[2 * j] == nextafter(cr, INFINITY) ||
                      out[2 * j] == nextafter(cr, -INFINITY),
                  "kind %d n %lld dot %d: hi %.17g, correctly rounded %.17g", kind, (long long)n, j,
                  out[2 * j], cr);
        /* the rest: big - hi, rounded here */
        big_add_double(big, -out[2 * j]);
        const double lr = big_round(big);
        PK_EXPECT(out[2 * j + 1] == lr || out[2 * j + 1] == nextafter(lr, INFINITY) ||
                      out[2 * j + 1] == nextafter(lr, -INFINITY),
                  "kind %d n %lld dot %d: lo %.17g, the rest correctly rounded %.17g", kind, (long long)n, j,
                  out[2 * j + 1], lr);
        cases++;
      }
      if (l == nlen - 1) { /* many accumulators at once: copies of these three, rounded alike */
        for (int v = 0; v < many; v++)
          CK(cudaMemcpy(dmany + (size_t)v * PK_XACC_LEN, dacc + (size_t)(v % 3) * PK_XACC_LEN,
                        sizeof(int64_t) * PK_XACC_LEN, cudaMemcpyDeviceToDevice));
        double mo[2 * 70];
        CK(pk_cuda_xacc_round_ex(NULL, dmany, many, 1, dout));
        CK(cudaMemcpy(mo, dout, sizeof mo, cudaMemcpyDeviceToHost));
        for (int v = 0; v < many; v++)
          PK_EXPECT(memcmp(&mo[2 * v], &out[2 * (v % 3)], 2 * sizeof(double)) == 0,
                    "kind %d: accumulator %d of %d rounded differently", kind, v, many);
        CK(pk_cuda_xacc_round_ex(NULL, dmany, many, 0, dout));
        CK(cudaMemcpy(mo, dout, sizeof(double) * many, cudaMemcpyDeviceToHost));
        for (int v = 0; v < many; v++)
          PK_EXPECT(memcmp(&mo[v], &one[v % 3], sizeof(double)) == 0,
                    "kind %d: accumulator %d of %d (dd 0) rounded differently", kind, v, many);
      }
    }
  printf("%d exact-product dots: accumulators equal to reduce.c's and the reference, (hi, lo) equal to the "
         "CPU's\n",
         cases);
  cudaFree(dx), cudaFree(dy), cudaFree(dz), cudaFree(dout), cudaFree(dblk), cudaFree(dacc), cudaFree(dmany);
  pkrylov_context_destroy(&cpu);
  free(x), free(y), free(z);
  PK_TEST_END();
}

/* ---- solves ------------------------------------------------------------------------------------------- */

typedef struct {
  pkrylov_result res;
  double *x, *hist;
  int32_t hlen;
} run_out;

/* The operator of the solves: the thin shell (p), or with g_csr a CSR convection-diffusion matrix of
   CSR_NX x CSR_NY x CSR_NZ cells (the CUDA engine's fused CSR matvec_update, pk_cuda_kry_fused.cu; a size
   that is not a multiple of the block, over a hundred blocks) */
static int g_csr = 0;
static int g_two_pass = 0; /* the CUDA solves with the solver option kry.xfuse=0 (the exact sums' second pass) */
enum { CSR_NX = 41, CSR_NY = 37, CSR_NZ = 23 };
static int make_op(pkrylov_context ctx, const pkrylov_thinshell_params *p, pkrylov_operator *A) {
  if (!g_csr)
    return pkrylov_operator_create_thinshell(ctx, p, A);
  const double wind[3] = {0.4, -0.3, 0.2};
  return pkrylov_operator_create_convdiff(ctx, CSR_NX, CSR_NY, CSR_NZ, wind, 0.5, A);
}

/** One reproducible solve of A x = b on backend `backend` with type / preconditioner pct / sync. */
static int solve_once(int32_t backend, const pkrylov_thinshell_params *p, int32_t type, int32_t pct, int sync,
                      const double *b, int64_t n, run_out *o) {
  pkrylov_context ctx;
  pkrylov_operator A;
  pkrylov_precond M = NULL;
  pkrylov_solver s;
  PK_REQUIRE_OK(NULL, pkrylov_context_create(backend, &ctx));
  PK_REQUIRE_OK(ctx, pkrylov_context_set_reproducible(ctx, 1));
  PK_REQUIRE_OK(ctx, make_op(ctx, p, &A));
  if (pct != PKRYLOV_PRECOND_NONE)
    PK_REQUIRE_OK(ctx, pkrylov_precond_create(ctx, A, pct, 0, PKRYLOV_LAYOUT_AUTO, &M));
  PK_REQUIRE_OK(ctx, pkrylov_solver_create(ctx, type, A, M, &s));
  PK_REQUIRE_OK(ctx, pkrylov_solver_set_tolerances(s, 1e-10, 0.0));
  PK_REQUIRE_OK(ctx, pkrylov_solver_set_max_iterations(s, 3000));
  PK_REQUIRE_OK(ctx, pkrylov_solver_set_history(s, 1));
  if (backend == PKRYLOV_BACKEND_CUDA)
    PK_REQUIRE_OK(ctx, pkrylov_solver_set_sync_interval(s, sync));
  if (backend == PKRYLOV_BACKEND_CUDA && g_two_pass)
    PK_REQUIRE_OK(ctx, pkrylov_solver_set_option(s, "kry.xfuse", "0"));
  if (type == PKRYLOV_SOLVER_PIPECG)
    PK_REQUIRE_OK(ctx, pkrylov_solver_set_residual_replacement(s, 20));
  if (type == PKRYLOV_SOLVER_GMRES || type == PKRYLOV_SOLVER_FGMRES || type == PKRYLOV_SOLVER_PIPEGMRES ||
      type == PKRYLOV_SOLVER_CAGMRES)
    PK_REQUIRE_OK(ctx, pkrylov_solver_set_restart(s, 12)); /* several cycles (CA-GMRES: step 0, auto) */
  memset(o->x, 0, sizeof(double) * (size_t)n);
  PK_REQUIRE_OK(ctx, pkrylov_solver_solve(s, PKRYLOV_MEM_HOST, b, o->x));
  PK_REQUIRE_OK(ctx, pkrylov_solver_get_result(s, &o->res));
  PK_REQUIRE_OK(ctx, pkrylov_solver_get_history(s, 3001, o->hist, &o->hlen));
  pkrylov_solver_destroy(&s);
  pkrylov_precond_destroy(&M);
  pkrylov_operator_destroy(&A);
  pkrylov_context_destroy(&ctx);
  return PK_PASS;
}

static int same_run(const run_out *a, const run_out *b, int64_t n) {
  return a->res.iterations == b->res.iterations && a->hlen == b->hlen &&
         memcmp(a->x, b->x, sizeof(double) * (size_t)n) == 0 &&
         memcmp(a->hist, b->hist, sizeof(double) * (size_t)a->hlen) == 0 &&
         memcmp(&a->res.final_residual, &b->res.final_residual, sizeof(double)) == 0;
}

/** Print which parts of two runs differ (diagnostics of a bitwise comparison). */
static void diff_run(const char *tag, const run_out *a, const run_out *b, int64_t n) {
  int64_t nx = 0;
  for (int64_t i = 0; i < n; i++)
    nx += memcmp(&a->x[i], &b->x[i], sizeof(double)) != 0;
  int32_t first_h = -1;
  for (int32_t i = 0; i < a->hlen && i < b->hlen && first_h < 0; i++)
    if (memcmp(&a->hist[i], &b->hist[i], sizeof(double)) != 0)
      first_h = i;
  printf(
      "  %s: iterations %d / %d, history length %d / %d (first difference at %d), x differs in %lld of %lld, "
      "final residual %.17g / %.17g\n",
      tag, a->res.iterations, b->res.iterations, a->hlen, b->hlen, first_h, (long long)nx, (long long)n,
      a->res.final_residual, b->res.final_residual);
}

/* CG and pipelined CG (the fused solvers, pk_cuda_solver.cu, pk_cuda_cg.cu): the exact sums in the loops' pass
   (CG's operator loop, its Jacobi and unpreconditioned loops, pipelined CG's update) and after the column
   sweeps in a second pass */
static const int32_t cg_cases[5][2] = {{PKRYLOV_SOLVER_CG, PKRYLOV_PRECOND_COLUMN},
                                       {PKRYLOV_SOLVER_CG, PKRYLOV_PRECOND_JACOBI},
                                       {PKRYLOV_SOLVER_CG, PKRYLOV_PRECOND_NONE},
                                       {PKRYLOV_SOLVER_PIPECG, PKRYLOV_PRECOND_COLUMN},
                                       {PKRYLOV_SOLVER_PIPECG, PKRYLOV_PRECOND_NONE}};

/* The BiCGStab and GMRES families (the CUDA vector engine, pk_cuda_kry.cu) in reproducible mode; CA-GMRES
   with the automatic step, which reproducible mode fixes to 4 on both backends. */
static const int32_t kry_cases[8][2] = {
    {PKRYLOV_SOLVER_BICGSTAB, PKRYLOV_PRECOND_COLUMN},  {PKRYLOV_SOLVER_PIPEBICGSTAB, PKRYLOV_PRECOND_COLUMN},
    {PKRYLOV_SOLVER_GMRES, PKRYLOV_PRECOND_COLUMN},     {PKRYLOV_SOLVER_FGMRES, PKRYLOV_PRECOND_COLUMN},
    {PKRYLOV_SOLVER_PIPEGMRES, PKRYLOV_PRECOND_COLUMN}, {PKRYLOV_SOLVER_CAGMRES, PKRYLOV_PRECOND_COLUMN},
    {PKRYLOV_SOLVER_BICGSTAB, PKRYLOV_PRECOND_NONE},    {PKRYLOV_SOLVER_SRCG, PKRYLOV_PRECOND_COLUMN}};

/**
 * The (solver, preconditioner) cases in reproducible mode on a CUDA context against the CPU backend's
 * reproducible solve. bitwise 1: the GPU solve bitwise the CPU's (the same per-element arithmetic, t720, and
 * the same exact sums of the same products). bitwise 0: two GPU runs and blocks of 8 (graphs) and of 1
 * iteration bitwise the same (iterations, x, history, final residual); against the CPU the same iterations
 * (within `its_slack`) and x within xtol relative to max |x|; the residual recomputed on the CPU meets the
 * tolerance.
 */
static int solves(const int32_t (*cases)[2], int ncases, int bitwise, int its_slack, double xtol) {
  SKIP_WITHOUT_GPU();
  pkrylov_thinshell_params p;
  PK_REQUIRE_OK(NULL, pkrylov_thinshell_params_default(36, 30, 16, &p));
  p.nu = 1.0;
  const int64_t n = g_csr ? (int64_t)CSR_NX * CSR_NY * CSR_NZ : 36 * 30 * 16;
  double *xt = malloc(sizeof(double) * n), *b = malloc(sizeof(double) * n), *r = malloc(sizeof(double) * n);
  run_out o[4];
  for (int k = 0; k < 4; k++) {
    o[k].x = malloc(sizeof(double) * n);
    o[k].hist = malloc(sizeof(double) * 3001);
    if (!o[k].x || !o[k].hist)
      return PK_FAIL;
  }
  if (!xt || !b || !r)
    return PK_FAIL;
  pkrylov_context cc;
  pkrylov_operator Ac;
  PK_REQUIRE_OK(NULL, pkrylov_context_create(PKRYLOV_BACKEND_CPU, &cc));
  PK_REQUIRE_OK(cc, make_op(cc, &p, &Ac));
  for (int64_t i = 0; i < n; i++)
    xt[i] = sin(0.007 * (double)i) + 0.3 * cos(0.0011 * (double)(i * i % 9973));
  PK_REQUIRE_OK(cc, pkrylov_operator_apply(Ac, PKRYLOV_MEM_HOST, xt, b));
  for (int c = 0; c < ncases; c++) {
    const int32_t type = cases[c][0], pct = cases[c][1];
    /* o[0]: CPU; o[1], o[2]: GPU blocks of 8 (graphs), twice; o[3]: GPU blocks of 1 */
    if (solve_once(PKRYLOV_BACKEND_CPU, &p, type, pct, 8, b, n, &o[0]) != PK_PASS ||
        solve_once(PKRYLOV_BACKEND_CUDA, &p, type, pct, 8, b, n, &o[1]) != PK_PASS ||
        solve_once(PKRYLOV_BACKEND_CUDA, &p, type, pct, 8, b, n, &o[2]) != PK_PASS ||
        solve_once(PKRYLOV_BACKEND_CUDA, &p, type, pct, 1, b, n, &o[3]) != PK_PASS)
      return PK_FAIL;
    const int cpu_gpu = same_run(&o[0], &o[1], n);
    double xmax = 0, dmax = 0;
    for (int64_t i = 0; i < n; i++) {
      xmax = fmax(xmax, fabs(o[0].x[i]));
      dmax = fmax(dmax, fabs(o[0].x[i] - o[1].x[i]));
    }
    printf("type %d precond %d: CPU %d iterations, GPU %d; GPU bitwise the CPU's: %s (max |dx| / max |x| = "
           "%.3g)\n",
           type, pct, o[0].res.iterations, o[1].res.iterations, cpu_gpu ? "yes" : "no", dmax / xmax);
    if (!cpu_gpu)
      diff_run("CPU / GPU", &o[0], &o[1], n);
    if (bitwise) {
      PK_EXPECT(cpu_gpu, "type %d precond %d: the GPU's reproducible solve is not bitwise the CPU's", type,
                pct);
      continue;
    }
    PK_EXPECT(o[0].res.converged && o[1].res.converged, "type %d precond %d: CPU %s, GPU %s", type, pct,
              pkrylov_reason_string(o[0].res.reason), pkrylov_reason_string(o[1].res.reason));
    if (!same_run(&o[1], &o[2], n)) {
      diff_run("GPU run 1 / 2", &o[1], &o[2], n);
      PK_EXPECT(0, "type %d precond %d: two GPU runs differ", type, pct);
    }
    if (!same_run(&o[1], &o[3], n)) {
      diff_run("GPU blocks 8 / 1", &o[1], &o[3], n);
      PK_EXPECT(0, "type %d precond %d: blocks of 8 and of 1 iteration differ", type, pct);
    }
    PK_EXPECT(abs(o[0].res.iterations - o[1].res.iterations) <= its_slack,
              "type %d precond %d: CPU %d iterations, GPU %d", type, pct, o[0].res.iterations,
              o[1].res.iterations);
    PK_EXPECT(dmax <= xtol * xmax, "type %d precond %d: max |x_gpu - x_cpu| = %.3g (max |x| %.3g)", type, pct,
              dmax, xmax);
    /* the GPU solution's residual, recomputed on the CPU */
    PK_REQUIRE_OK(cc, pkrylov_operator_apply(Ac, PKRYLOV_MEM_HOST, o[1].x, r));
    double rr = 0, bb = 0;
    for (int64_t i = 0; i < n; i++)
      rr += (b[i] - r[i]) * (b[i] - r[i]), bb += b[i] * b[i];
    PK_EXPECT(sqrt(rr) <= 1.01e-10 * sqrt(bb), "type %d precond %d: ||b - A x|| / ||b|| = %.3g", type, pct,
              sqrt(rr / bb));
  }
  pkrylov_operator_destroy(&Ac);
  pkrylov_context_destroy(&cc);
  for (int k = 0; k < 4; k++)
    free(o[k].x), free(o[k].hist);
  free(xt), free(b), free(r);
  PK_TEST_END();
}

PK_TEST_CASE(solve_bitwise) { return solves(cg_cases, 5, 0, 0, 1e-12); }
PK_TEST_CASE(cpu_gpu_bitwise) { return solves(cg_cases, 5, 1, 0, 0.0); }
/* the same with the exact sums in a second pass after every loop (kry.xfuse=0): the same bits */
PK_TEST_CASE(cpu_gpu_bitwise_two_pass) {
  g_two_pass = 1;
  const int rc = solves(cg_cases, 5, 1, 0, 0.0);
  g_two_pass = 0;
  return rc;
}
PK_TEST_CASE(kry_solve_bitwise) { return solves(kry_cases, 8, 0, 1, 1e-10); }
PK_TEST_CASE(kry_cpu_gpu_bitwise) { return solves(kry_cases, 8, 1, 0, 0.0); }
/* the non-SPD solvers on a non-symmetric CSR matrix (the fused CSR matvec_update of the engine) */
static const int32_t kry_csr_cases[7][2] = {
    {PKRYLOV_SOLVER_BICGSTAB, PKRYLOV_PRECOND_JACOBI}, {PKRYLOV_SOLVER_PIPEBICGSTAB, PKRYLOV_PRECOND_JACOBI},
    {PKRYLOV_SOLVER_GMRES, PKRYLOV_PRECOND_JACOBI},    {PKRYLOV_SOLVER_FGMRES, PKRYLOV_PRECOND_JACOBI},
    {PKRYLOV_SOLVER_PIPEGMRES, PKRYLOV_PRECOND_JACOBI}, {PKRYLOV_SOLVER_CAGMRES, PKRYLOV_PRECOND_JACOBI},
    {PKRYLOV_SOLVER_BICGSTAB, PKRYLOV_PRECOND_NONE}};
PK_TEST_CASE(kry_csr_cpu_gpu_bitwise) {
  g_csr = 1;
  const int rc = solves(kry_csr_cases, 7, 1, 0, 0.0);
  g_csr = 0;
  return rc;
}

/** Reproducible mode switched on and off on one solver (the engine is kept between solves), GMRES and
 *  CA-GMRES (its double-double Gram matrices): each mode gives its own first solve's results again (the
 *  graphs and sums of the other mode are not reused). Small: the compute-sanitizer case of the engine. */
PK_TEST_CASE(kry_mode_switch) {
  SKIP_WITHOUT_GPU();
  pkrylov_context ctx;
  pkrylov_operator A;
  pkrylov_precond M;
  pkrylov_thinshell_params p;
  PK_REQUIRE_OK(NULL, pkrylov_thinshell_params_default(20, 16, 8, &p));
  p.nu = 1.0;
  const int64_t n = 20 * 16 * 8;
  PK_REQUIRE_OK(NULL, pkrylov_context_create(PKRYLOV_BACKEND_CUDA, &ctx));
  PK_REQUIRE_OK(ctx, pkrylov_operator_create_thinshell(ctx, &p, &A));
  PK_REQUIRE_OK(ctx, pkrylov_precond_create(ctx, A, PKRYLOV_PRECOND_COLUMN, 0, PKRYLOV_LAYOUT_AUTO, &M));
  double *b = malloc(sizeof(double) * n), *x[4];
  for (int k = 0; k < 4; k++)
    x[k] = malloc(sizeof(double) * n);
  for (int64_t i = 0; i < n; i++)
    b[i] = 1.0 + 0.5 * sin(0.01 * (double)i);
  static const int32_t types[2] = {PKRYLOV_SOLVER_GMRES, PKRYLOV_SOLVER_CAGMRES};
  for (int t = 0; t < 2; t++) {
    pkrylov_solver s;
    PK_REQUIRE_OK(ctx, pkrylov_solver_create(ctx, types[t], A, M, &s));
    PK_REQUIRE_OK(ctx, pkrylov_solver_set_tolerances(s, 1e-10, 0.0));
    PK_REQUIRE_OK(ctx, pkrylov_solver_set_restart(s, 10));
    PK_REQUIRE_OK(ctx, pkrylov_solver_set_step(s, 4)); /* the same step in both modes (GMRES ignores it) */
    pkrylov_result res[4];
    static const int mode[4] = {1, 0, 1, 0};
    for (int k = 0; k < 4; k++) {
      PK_REQUIRE_OK(ctx, pkrylov_context_set_reproducible(ctx, mode[k]));
      memset(x[k], 0, sizeof(double) * n);
      PK_REQUIRE_OK(ctx, pkrylov_solver_solve(s, PKRYLOV_MEM_HOST, b, x[k]));
      PK_REQUIRE_OK(ctx, pkrylov_solver_get_result(s, &res[k]));
      PK_EXPECT(res[k].converged, "type %d solve %d (reproducible %d): %s", types[t], k, mode[k],
                pkrylov_reason_string(res[k].reason));
    }
    PK_EXPECT(res[0].iterations == res[2].iterations && memcmp(x[0], x[2], sizeof(double) * n) == 0,
              "type %d: reproducible solves before and after a default one differ", types[t]);
    PK_EXPECT(res[1].iterations == res[3].iterations && memcmp(x[1], x[3], sizeof(double) * n) == 0,
              "type %d: default solves before and after a reproducible one differ", types[t]);
    printf("type %d: %d iterations reproducible, %d default\n", types[t], res[0].iterations,
           res[1].iterations);
    pkrylov_solver_destroy(&s);
  }
  pkrylov_precond_destroy(&M);
  pkrylov_operator_destroy(&A);
  pkrylov_context_destroy(&ctx);
  free(b);
  for (int k = 0; k < 4; k++)
    free(x[k]);
  PK_TEST_END();
}

PK_TEST_MAIN(PK_TEST_ENTRY(exact_dots), PK_TEST_ENTRY(exact_dots_dd), PK_TEST_ENTRY(solve_bitwise),
             PK_TEST_ENTRY(cpu_gpu_bitwise), PK_TEST_ENTRY(cpu_gpu_bitwise_two_pass), PK_TEST_ENTRY(kry_solve_bitwise),
             PK_TEST_ENTRY(kry_cpu_gpu_bitwise), PK_TEST_ENTRY(kry_csr_cpu_gpu_bitwise),
             PK_TEST_ENTRY(kry_mode_switch))

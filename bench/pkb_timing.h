/**
 * @file pkb_timing.h
 * @brief The benchmarks' time per iteration and its sanity flag (header only, C and CUDA C++): what
 *        pkrylov-bench-cpu and the GPU benchmarks (bench_gpu_common.cuh) share, tested by t510-bench-timing.
 *
 * A benchmark times R solves of i0 and R solves of i1 > i0 iterations (with a tolerance that is never met)
 * and takes the time per iteration from their difference, so that the set-up and the initial and final
 * residuals cancel. Noise only ever adds time, so the least of the R times of each count is its estimate,
 * and the time per iteration is (least t(i1) - least t(i0)) / (i1 - i0). The least of the R differences is
 * not: one slow t(i0) makes its difference small, even negative (seen: -2431 us per iteration, and 45 GB/s,
 * more than the machine moves). A figure that is still not positive, or that implies more bytes per second
 * than the bandwidth measured in the same run, is flagged instead of reported as if it were true.
 */
#ifndef PKRYLOV_BENCH_TIMING_H
#define PKRYLOV_BENCH_TIMING_H

/** (least of t_hi[0..R) - least of t_lo[0..R)) / (i1 - i0): seconds per iteration (R >= 1, i1 > i0). */
static inline double pkb_time_per_iteration(const double *t_lo, const double *t_hi, int R, int i0, int i1) {
  double lo = t_lo[0], hi = t_hi[0];
  for (int r = 1; r < R; r++) {
    if (t_lo[r] < lo) lo = t_lo[r];
    if (t_hi[r] < hi) hi = t_hi[r];
  }
  return (hi - lo) / (double)(i1 - i0);
}

/**
 * The flag of a measured figure: NULL when it is plausible; otherwise why it is not: the time per iteration
 * is not positive (the noise of the measurement exceeds the i1 - i0 iterations: raise their count), or
 * bytes / t_iter exceeds bandwidth (both in bytes and bytes per second; noise, a problem small enough for
 * the cache, or a wrong traffic model). bandwidth <= 0 or NaN: not checked.
 */
static inline const char *pkb_flag(double t_iter, double bytes, double bandwidth) {
  if (!(t_iter > 0)) return "time per iteration not positive: timing noise, raise the iteration count";
  if (bandwidth > 0 && bytes / t_iter > bandwidth)
    return "above the bandwidth measured in the same run: timing noise, or a problem that fits in cache";
  return 0;
}

#endif

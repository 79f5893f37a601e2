/**
 * @file kry_scalar.h
 * @brief Scalar steps of the BiCGStab and GMRES families, compiled for the host (CPU engine) and for the
 * device (CUDA engine: one thread of one block), so both backends run the same scalar arithmetic.
 *
 * Every step is `PK_HD static inline int step(double *S, int arg)` on the engine's scalar array S (layout
 * defined by its driver) and returns 0. Rules for this code (it is compiled as C by gcc and as C++ by
 * nvcc): no variable-length arrays, no compound literals or designated initialisers, no implicit void*
 * conversions, no library calls other than sqrt/fabs/fma/isfinite; fixed-size local arrays only.
 *
 * Ids, one range per family (each family header owns its range and its dispatch function):
 *   100-199  BiCGStab, pipelined BiCGStab     (kry_scalar_bicgstab.h, pk_kss_bicgstab)
 *   200-299  GMRES, pipelined GMRES, FGMRES   (kry_scalar_gmres.h,    pk_kss_gmres)
 *   300-399  CA-GMRES                         (kry_scalar_cagmres.h,  pk_kss_cagmres)
 */
#ifndef PK_KRY_SCALAR_H
#define PK_KRY_SCALAR_H

#ifdef __CUDACC__
#define PK_HD __host__ __device__
#else
#define PK_HD
#endif

#include <math.h>

#include "kry_scalar_bicgstab.h"
#include "kry_scalar_cagmres.h"
#include "kry_scalar_gmres.h"

/** Run step id on S; returns 0, or -1 for an unknown id. */
PK_HD static inline int pk_kry_scalar_step(int id, double *S, int arg) {
  if (id >= 100 && id < 200) return pk_kss_bicgstab(id, S, arg);
  if (id >= 200 && id < 300) return pk_kss_gmres(id, S, arg);
  if (id >= 300 && id < 400) return pk_kss_cagmres(id, S, arg);
  return -1;
}

#endif /* PK_KRY_SCALAR_H */

/** @file kry_scalar_bicgstab.h  @brief Scalar steps of the bicgstab driver (see kry_scalar.h for the rules). */
#ifndef PK_KRY_SCALAR_BICGSTAB_H
#define PK_KRY_SCALAR_BICGSTAB_H

/** Dispatch for this family's ids; -1 for an unknown id. */
PK_HD static inline int pk_kss_bicgstab(int id, double *S, int arg) {
  (void)S;
  (void)arg;
  switch (id) {
  default: return -1;
  }
}

#endif

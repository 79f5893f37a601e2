/**
 * @file kry.c
 * @brief The solve frame of the BiCGStab and GMRES families and the engine front end (pk_kry.h).
 *
 * Scaffold: the methods are being written (issue 5); until they land a solve answers
 * PKRYLOV_ERR_UNSUPPORTED.
 */
#include "pk_kry.h"

int pk_kry_is_kry_type(int32_t type) {
  return type >= PKRYLOV_SOLVER_BICGSTAB && type <= PKRYLOV_SOLVER_CAGMRES;
}

void pk_kry_destroy(pk_kry *E) { (void)E; }

int pk_kry_solve(pkrylov_solver s, int32_t mem, const double *b, double *x) {
  (void)mem;
  (void)b;
  (void)x;
  return pk_error(s->ctx, PKRYLOV_ERR_UNSUPPORTED, "pkrylov_solver_solve",
                  "solver type %d is not implemented yet", s->type);
}

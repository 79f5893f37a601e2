/* Consumer of the installed package with MPI (t600, t601, t602): the thin shell distributed over the ranks
 * of MPI_COMM_WORLD (pkrylov_context_set_comm, libpkrylov_mpi), solved with pipelined CG; checks convergence.
 * Links pkrylov_mpi (CMake: pkrylov::pkrylov_mpi; make: pkrylov-config --libs-mpi, pkg-config pkrylov-mpi). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include <mpi.h>
#include <pkrylov.h>
#include <pkrylov_mpi.h>

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int size = 1, ok = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  pkrylov_context ctx = NULL;
  pkrylov_operator A = NULL;
  pkrylov_precond M = NULL;
  pkrylov_solver s = NULL;
  pkrylov_thinshell_params p;
  pkrylov_result res;
  double *b = NULL, *x = NULL;
  if (pkrylov_context_create(PKRYLOV_BACKEND_CPU, &ctx) || pkrylov_context_set_comm(ctx, MPI_COMM_WORLD) ||
      pkrylov_thinshell_params_default(8 * size, 8, 6, &p) ||
      pkrylov_operator_create_thinshell_dist(ctx, &p, size, 1, &A) ||
      pkrylov_precond_create(ctx, A, PKRYLOV_PRECOND_COLUMN, 0, PKRYLOV_LAYOUT_AUTO, &M) ||
      pkrylov_solver_create(ctx, PKRYLOV_SOLVER_PIPECG, A, M, &s)) {
    const char *msg = "no context";
    if (ctx) pkrylov_context_get_last_error(ctx, NULL, &msg);
    fprintf(stderr, "consumer_mpi: %s\n", msg);
  } else {
    const int n = 8 * 8 * 6; /* this rank's block */
    b = malloc(sizeof(double) * n), x = malloc(sizeof(double) * n);
    for (int i = 0; i < n; i++) b[i] = sin(0.1 * i);
    if (!pkrylov_solver_solve(s, PKRYLOV_MEM_HOST, b, x) && !pkrylov_solver_get_result(s, &res)) {
      ok = res.converged;
      printf("consumer_mpi: %d iterations, reason %s, %d ranks\n", res.iterations,
             pkrylov_reason_string(res.reason), size);
    }
  }
  pkrylov_solver_destroy(&s);
  pkrylov_precond_destroy(&M);
  pkrylov_operator_destroy(&A);
  pkrylov_context_destroy(&ctx);
  free(b), free(x);
  MPI_Finalize();
  return ok ? 0 : 1;
}

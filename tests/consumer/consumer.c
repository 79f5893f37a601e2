/* Consumer of the installed package: solves a small thin-shell problem and checks the true residual. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include <pkrylov.h>

int main(void) {
  pkrylov_context ctx;
  pkrylov_operator A;
  pkrylov_precond M;
  pkrylov_solver s;
  pkrylov_thinshell_params p;
  if (pkrylov_context_create(PKRYLOV_BACKEND_CPU, &ctx)) return 1;
  if (pkrylov_thinshell_params_default(8, 8, 6, &p) || pkrylov_operator_create_thinshell(ctx, &p, &A) ||
      pkrylov_precond_create(ctx, A, PKRYLOV_PRECOND_COLUMN, 0, PKRYLOV_LAYOUT_AUTO, &M) ||
      pkrylov_solver_create(ctx, PKRYLOV_SOLVER_PIPECG, A, M, &s)) {
    const char *msg;
    pkrylov_context_get_last_error(ctx, NULL, &msg);
    fprintf(stderr, "consumer: %s\n", msg);
    return 1;
  }
  const int n = 8 * 8 * 6;
  double *b = malloc(sizeof(double) * n), *x = malloc(sizeof(double) * n), *ax = malloc(sizeof(double) * n);
  for (int i = 0; i < n; i++) b[i] = sin(0.1 * i);
  pkrylov_result res;
  if (pkrylov_solver_solve(s, PKRYLOV_MEM_HOST, b, x) || pkrylov_solver_get_result(s, &res)) return 1;
  pkrylov_operator_apply(A, PKRYLOV_MEM_HOST, x, ax);
  double rr = 0, bb = 0;
  for (int i = 0; i < n; i++) rr += (b[i] - ax[i]) * (b[i] - ax[i]), bb += b[i] * b[i];
  printf("consumer: %d iterations, reason %s, relres %.3e\n", res.iterations, pkrylov_reason_string(res.reason),
         sqrt(rr / bb));
  int ok = res.converged && sqrt(rr / bb) < 1e-7;
  pkrylov_solver_destroy(&s);
  pkrylov_precond_destroy(&M);
  pkrylov_operator_destroy(&A);
  pkrylov_context_destroy(&ctx);
  free(b), free(x), free(ax);
  return ok ? 0 : 1;
}

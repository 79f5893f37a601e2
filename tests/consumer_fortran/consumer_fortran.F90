!> Consumer of the installed package: solves a small thin-shell problem with pkrylov_mod and checks the
!> true residual ||b - A x|| / ||b|| (stops with a nonzero code on any failure).
program consumer_fortran
    use, intrinsic :: iso_c_binding, only: c_double
    use pkrylov_mod
    implicit none
    integer, parameter :: nx = 8, ny = 8, nz = 6
    type(pk_context) :: ctx
    type(pk_operator) :: A
    type(pk_precond) :: M
    type(pk_solver) :: s
    type(pkrylov_result) :: res
    real(c_double) :: b(nx, ny, nz), x(nx, ny, nz), ax(nx, ny, nz), relres
    integer :: i

    call pk_context_create(ctx, PKRYLOV_BACKEND_CPU)
    call pk_operator_create_thinshell(ctx, A, nx, ny, nz)
    call pk_precond_create(ctx, M, A, PKRYLOV_PRECOND_COLUMN)
    call pk_solver_create(ctx, s, PKRYLOV_SOLVER_PIPECG, A, M)
    b = reshape([(sin(0.1_c_double*i), i=0, nx*ny*nz - 1)], shape(b))
    x = 0
    call pk_solver_solve(s, b, x)
    call pk_solver_get_result(s, res)
    call pk_operator_apply(A, x, ax)
    relres = norm2(b - ax)/norm2(b)
    print '(a,i0,a,a,a,es10.3)', 'consumer_fortran: ', res%iterations, ' iterations, reason ', &
        pk_reason_string(res%reason), ', relres ', relres
    call pk_solver_destroy(s)
    call pk_precond_destroy(M)
    call pk_operator_destroy(A)
    call pk_context_destroy(ctx)
    if (res%converged /= 1 .or. relres > 1e-7_c_double) error stop 'consumer_fortran: not converged'
end program consumer_fortran

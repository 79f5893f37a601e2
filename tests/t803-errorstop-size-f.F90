!> t803-errorstop-size-f: without ierr, a size error detected by the module (not by the C library) ends
!! the program with `error stop` and a message naming the argument.
! PK_EXPECT_ERROR_STOP: pk_solver_solve failed with -7 .*: argument 'b' has 17 values, the operator's size n = 18
program t803_errorstop_size_f
    use, intrinsic :: iso_c_binding, only: c_double
    use pkrylov_mod
    implicit none
    type(pk_context) :: ctx
    type(pk_operator) :: A
    type(pk_solver) :: s
    real(c_double) :: b(17), x(18)
    call pk_context_create(ctx, PKRYLOV_BACKEND_CPU)
    call pk_operator_create_thinshell(ctx, A, 3, 3, 2)
    call pk_solver_create(ctx, s, PKRYLOV_SOLVER_CG, A)
    b = 1
    x = 0
    call pk_solver_solve(s, b, x)
    print '(a)', 't803-errorstop-size-f: the call returned instead of stopping'
end program t803_errorstop_size_f

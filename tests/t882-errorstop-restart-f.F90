!> t882-errorstop-restart-f: pk_solver_set_restart without ierr ends the program with `error stop` and the
!! C library's message naming the argument (ctest passes only on the expected text).
! PK_EXPECT_ERROR_STOP: pk_solver_set_restart failed with -3 \(invalid value\): .*argument 'm' = 0 must be in 1\.\.1000
program t882_errorstop_restart_f
    use, intrinsic :: iso_c_binding, only: c_int32_t
    use pkrylov_mod
    implicit none
    type(pk_context) :: ctx
    type(pk_operator) :: A
    type(pk_solver) :: s
    call pk_context_create(ctx, PKRYLOV_BACKEND_CPU)
    call pk_operator_create_thinshell(ctx, A, 3, 3, 2)
    call pk_solver_create(ctx, s, PKRYLOV_SOLVER_GMRES, A)
    call pk_solver_set_step(s, 2_c_int32_t) ! valid: returns
    call pk_solver_set_restart(s, 0_c_int32_t)
    print '(a)', 't882-errorstop-restart-f: the call returned instead of stopping'
end program t882_errorstop_restart_f

!> t802-errorstop-f: without ierr, a failing call ends the program with `error stop` and the C library's
!! message (ctest passes only on the expected text; the program must not get past the call).
! PK_EXPECT_ERROR_STOP: pk_operator_create_csr failed with -2 \(invalid size\): .*argument 'n' = 0 must be > 0
program t802_errorstop_f
    use, intrinsic :: iso_c_binding, only: c_double, c_int32_t
    use pkrylov_mod
    implicit none
    type(pk_context) :: ctx
    type(pk_operator) :: A
    call pk_context_create(ctx, PKRYLOV_BACKEND_CPU)
    call pk_operator_create_csr(ctx, A, 0, [1, 1], [integer(c_int32_t) ::], [real(c_double) ::], 1)
    print '(a)', 't802-errorstop-f: the call returned instead of stopping'
end program t802_errorstop_f

!> t888-errorstop-thinshell-coefficients-f: pk_thinshell_stencil_coefficients without ierr ends the program
!! with `error stop` and a message naming the argument (a size error found by the module).
! PK_EXPECT_ERROR_STOP: pk_thinshell_stencil_coefficients failed with -7 .*: argument 'aC' has 23 values, nx\*ny\*nz = 24
program t888_errorstop_thinshell_coefficients_f
    use, intrinsic :: iso_c_binding, only: c_double, c_int32_t
    use pkrylov_mod
    implicit none
    real(c_double) :: aW(2, 3, 4), aS(2, 3, 4), aV(2, 3, 4), aC(2, 3, 4), c23(23)
    call pk_thinshell_stencil_coefficients(2_c_int32_t, 3_c_int32_t, 4_c_int32_t, aW, aS, aV, aC) ! returns
    call pk_thinshell_stencil_coefficients(2_c_int32_t, 3_c_int32_t, 4_c_int32_t, aW, aS, aV, c23)
    print '(a)', 't888-errorstop-thinshell-coefficients-f: the call returned instead of stopping'
end program t888_errorstop_thinshell_coefficients_f

!> t884-errorstop-csr64-f: the 64-bit CSR constructor without ierr ends the program with `error stop` and a
!! message naming the argument, for a size error detected by the module (colind shorter than nnz).
! PK_EXPECT_ERROR_STOP: pk_operator_create_csr failed with -7 .*: argument 'colind' has 2 values, fewer than nnz = rowptr\(n\+1\) - index_base = 3
program t884_errorstop_csr64_f
    use, intrinsic :: iso_c_binding, only: c_double, c_int64_t
    use pkrylov_mod
    implicit none
    type(pk_context) :: ctx
    type(pk_operator) :: A
    call pk_context_create(ctx, PKRYLOV_BACKEND_CPU)
    ! a valid 2x2 first (returns), then colind one short
    call pk_operator_create_csr(ctx, A, 2_c_int64_t, [1_c_int64_t, 2_c_int64_t, 3_c_int64_t], &
                                [1_c_int64_t, 2_c_int64_t], [2.0_c_double, 3.0_c_double], 1)
    call pk_operator_destroy(A)
    call pk_operator_create_csr(ctx, A, 2_c_int64_t, [1_c_int64_t, 3_c_int64_t, 4_c_int64_t], &
                                [1_c_int64_t, 2_c_int64_t], [2.0_c_double, 1.0_c_double, 3.0_c_double], 1)
    print '(a)', 't884-errorstop-csr64-f: the call returned instead of stopping'
end program t884_errorstop_csr64_f

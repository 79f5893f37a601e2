!> t883-csr64-f: the 64-bit CSR constructor (pk_operator_create_csr with integer(c_int64_t) rowptr and colind,
!! n of kind c_int64_t or default integer) against the 32-bit one and a dense reference computed here.
!! Checks: the same matrix (1-based, columns unsorted within rows) built with 32-bit and with 64-bit indices
!! (n of both kinds; and 0-based) gives the dense product computed by a loop here, the same products bit
!! for bit, the same CSR export (pk_operator_get_csr) and the same CG solves (iterations, residuals and
!! iterate bit for bit), whose solution matches LAPACK dposv.
!! Errors, each as the 32-bit constructor reports it: n = 0 (INVALID_SIZE naming 'n'), index_base 2
!! (INVALID_VALUE), rowptr/colind/values too short (SIZE_MISMATCH from the module, naming the array), a
!! column out of range (INDEX_OUT_OF_RANGE naming 'colind'), a duplicate entry, a decreasing rowptr, a null
!! context (NULL_POINTER); no operator is made after an error.
program t883_csr64_f
    use, intrinsic :: iso_c_binding, only: c_associated, c_double, c_int32_t, c_int64_t
    use, intrinsic :: iso_fortran_env, only: error_unit
    use pkrylov_mod
    implicit none
    integer, parameter :: n = 40
    type(pk_context) :: ctx, nullctx
    type(pk_operator) :: A32, A64, A64n4, A64b0, Abad
    type(pk_precond) :: M32, M64
    type(pk_solver) :: s32, s64
    type(pkrylov_result) :: r32, r64
    real(c_double) :: Ad(n, n), Af(n, n), x(n), yref(n), y32(n), y64(n), y(n), b(n), xref(n), xs32(n), xs64(n)
    integer(c_int32_t) :: rowptr(n + 1), nnz, i, j
    integer(c_int64_t) :: rowptr8(n + 1), nnz8, n8
    integer(c_int32_t), allocatable :: colind(:)
    integer(c_int64_t), allocatable :: colind8(:), bad8(:), rp32(:), ci32(:), rp64(:), ci64(:)
    real(c_double), allocatable :: values(:), v32(:), v64(:)
    integer :: ierr, info
    external :: dposv

    ! an SPD matrix: tridiagonal (-1, 4, -1) plus symmetric couplings -0.5 at distance 7
    Ad = 0
    do i = 1, n
        Ad(i, i) = 4
        if (i > 1) Ad(i, i - 1) = -1
        if (i < n) Ad(i, i + 1) = -1
        if (i + 7 <= n) Ad(i, i + 7) = -0.5_c_double
        if (i - 7 >= 1) Ad(i, i - 7) = -0.5_c_double
    end do
    ! CSR, 1-based, the columns of each row in decreasing order
    nnz = count(Ad /= 0)
    allocate (colind(nnz), values(nnz))
    rowptr(1) = 1
    do i = 1, n
        rowptr(i + 1) = rowptr(i)
        do j = n, 1, -1
            if (Ad(i, j) /= 0) then
                colind(rowptr(i + 1)) = j
                values(rowptr(i + 1)) = Ad(i, j)
                rowptr(i + 1) = rowptr(i + 1) + 1
            end if
        end do
    end do
    rowptr8 = rowptr
    colind8 = colind
    nnz8 = nnz
    n8 = n

    call pk_context_create(ctx, PKRYLOV_BACKEND_CPU)
    call pk_operator_create_csr(ctx, A32, n, rowptr, colind, values, 1)
    call pk_operator_create_csr(ctx, A64, n8, rowptr8, colind8, values, 1, ierr)
    call expect(ierr == 0 .and. c_associated(A64%h), 'create a 64-bit CSR (n of kind c_int64_t)')
    call pk_operator_create_csr(ctx, A64n4, n, rowptr8, colind8, values, 1, ierr)
    call expect(ierr == 0 .and. c_associated(A64n4%h), 'create a 64-bit CSR (default-integer n)')
    call pk_operator_create_csr(ctx, A64b0, n8, rowptr8 - 1, colind8 - 1, values, 0, ierr)
    call expect(ierr == 0, 'create a 0-based 64-bit CSR')

    ! products against the dense product, and 32-bit against 64-bit bit for bit
    x = [(sin(1.3_c_double*i) + 0.5_c_double, i=1, n)]
    yref = matmul(Ad, x)
    call pk_operator_apply(A32, x, y32)
    call pk_operator_apply(A64, x, y64)
    call expect(maxval(abs(y64 - yref)) <= 1e-14_c_double*maxval(abs(yref)), '64-bit apply = dense product')
    call expect(all(y64 == y32), '64-bit and 32-bit products agree bit for bit')
    call pk_operator_apply(A64n4, x, y)
    call expect(all(y == y32), '64-bit (default-integer n) product = 32-bit product')
    call pk_operator_apply(A64b0, x, y)
    call expect(all(y == y32), '0-based 64-bit product = 32-bit product')

    ! the CSR export of both
    allocate (rp32(n + 1), ci32(nnz), v32(nnz), rp64(n + 1), ci64(nnz), v64(nnz))
    call pk_operator_get_csr(A32, rp32, ci32, v32, 1_c_int32_t)
    call pk_operator_get_csr(A64, rp64, ci64, v64, 1_c_int32_t)
    call expect(all(rp64 == rp32) .and. all(ci64 == ci32) .and. all(v64 == v32), &
                '64-bit and 32-bit operators export the same CSR')
    call expect(all(rp64 == rowptr8), 'the export keeps the row pointers')

    ! CG solves: the same numbers, and the LAPACK solution
    b = [(cos(0.7_c_double*i), i=1, n)]
    Af = Ad
    xref = b
    call dposv('U', n, 1, Af, n, xref, n, info)
    call expect(info == 0, 'dposv')
    call pk_precond_create(ctx, M32, A32, PKRYLOV_PRECOND_JACOBI)
    call pk_precond_create(ctx, M64, A64, PKRYLOV_PRECOND_JACOBI)
    call pk_solver_create(ctx, s32, PKRYLOV_SOLVER_CG, A32, M32)
    call pk_solver_create(ctx, s64, PKRYLOV_SOLVER_CG, A64, M64)
    call pk_solver_set_tolerances(s32, 1e-12_c_double, 0.0_c_double)
    call pk_solver_set_tolerances(s64, 1e-12_c_double, 0.0_c_double)
    xs32 = 0
    xs64 = 0
    call pk_solver_solve(s32, b, xs32)
    call pk_solver_solve(s64, b, xs64)
    call pk_solver_get_result(s32, r32)
    call pk_solver_get_result(s64, r64)
    call expect(r64%converged == 1, 'CG on the 64-bit operator converges')
    call expect(r64%iterations == r32%iterations .and. r64%final_residual == r32%final_residual, &
                'CG: same iterations and residual with 32-bit and 64-bit indices')
    call expect(all(xs64 == xs32), 'CG: the same iterate bit for bit')
    call expect(norm2(xs64 - xref) <= 1e-10_c_double*norm2(xref), 'CG solution = dposv solution')

    ! ---- errors ----
    call pk_operator_create_csr(ctx, Abad, 0_c_int64_t, rowptr8, colind8, values, 1, ierr)
    call expect_error(ierr, PKRYLOV_ERR_INVALID_SIZE, "'n'", 'n = 0')
    call expect(.not. c_associated(Abad%h), 'no operator after an error')
    call pk_operator_create_csr(ctx, Abad, -2, rowptr8, colind8, values, 1, ierr)
    call expect_error(ierr, PKRYLOV_ERR_INVALID_SIZE, "'n'", 'n = -2 (default integer)')
    call pk_operator_create_csr(ctx, Abad, n8, rowptr8, colind8, values, 2, ierr)
    call expect_error(ierr, PKRYLOV_ERR_INVALID_VALUE, "'index_base'", 'index_base = 2')
    call pk_operator_create_csr(ctx, Abad, n8, rowptr8(1:n), colind8, values, 1, ierr)
    call expect_error(ierr, PKRYLOV_ERR_SIZE_MISMATCH, "argument 'rowptr' has 40 values, fewer than n+1 = 41", &
                      'rowptr with n entries')
    call pk_operator_create_csr(ctx, Abad, n8, rowptr8, colind8(1:nnz8 - 1), values, 1, ierr)
    call expect_error(ierr, PKRYLOV_ERR_SIZE_MISMATCH, "'colind'", 'colind too short')
    call pk_operator_create_csr(ctx, Abad, n8, rowptr8, colind8, values(1:nnz - 2), 1, ierr)
    call expect_error(ierr, PKRYLOV_ERR_SIZE_MISMATCH, "'values'", 'values too short')
    bad8 = colind8
    bad8(3) = n + 1
    call pk_operator_create_csr(ctx, Abad, n8, rowptr8, bad8, values, 1, ierr)
    call expect_error(ierr, PKRYLOV_ERR_INDEX_OUT_OF_RANGE, "'colind'", 'column n+1 with index_base 1')
    bad8 = colind8
    bad8(2) = bad8(1)
    call pk_operator_create_csr(ctx, Abad, n8, rowptr8, bad8, values, 1, ierr)
    call expect(ierr == PKRYLOV_ERR_DUPLICATE_ENTRY, 'duplicate entry: DUPLICATE_ENTRY')
    bad8 = rowptr8
    bad8(3) = bad8(2) - 1 ! row 2 ends before it starts
    call pk_operator_create_csr(ctx, Abad, n8, bad8, colind8, values, 1, ierr)
    call expect_error(ierr, PKRYLOV_ERR_INDEX_OUT_OF_RANGE, "'rowptr'", 'decreasing rowptr')
    call pk_operator_create_csr(nullctx, Abad, n8, rowptr8, colind8, values, 1, ierr)
    call expect(ierr == PKRYLOV_ERR_NULL_POINTER, 'null context: NULL_POINTER')
    call expect(.not. c_associated(Abad%h), 'no operator after the errors')

    call pk_solver_destroy(s64)
    call pk_solver_destroy(s32)
    call pk_precond_destroy(M64)
    call pk_precond_destroy(M32)
    call pk_operator_destroy(A64b0)
    call pk_operator_destroy(A64n4)
    call pk_operator_destroy(A64)
    call pk_operator_destroy(A32)
    call pk_context_destroy(ctx)
    deallocate (colind, values, colind8, bad8, rp32, ci32, v32, rp64, ci64, v64)
    print '(a)', 't883-csr64-f: ok'

contains

    subroutine expect(cond, what)
        logical, intent(in) :: cond
        character(len=*), intent(in) :: what
        if (.not. cond) then
            write (error_unit, '(a)') 't883-csr64-f: FAILED: '//what
            error stop 1
        end if
    end subroutine expect

    !> ierr is the expected code and the context's message contains the text name.
    subroutine expect_error(ierr, code, name, what)
        integer, intent(in) :: ierr
        integer(c_int32_t), intent(in) :: code
        character(len=*), intent(in) :: name, what
        character(len=1024) :: msg
        call pk_error_message(ctx, msg)
        if (ierr /= code) then
            write (error_unit, '(a,i0,a,i0,a)') 't883-csr64-f: FAILED: '//what//': ierr = ', ierr, &
                ' (expected ', code, '): '//trim(msg)
            error stop 1
        end if
        call expect(index(msg, name) > 0, what//': the message names '//name//': '//trim(msg))
    end subroutine expect_error

end program t883_csr64_f

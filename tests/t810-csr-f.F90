!> t810-csr-f: CSR operators through pkrylov_mod, against dense references computed here.
!! Checks: a 1-based CSR (index_base 1, columns unsorted within rows) applied to a vector equals the dense
!! product computed by a Fortran loop; the same matrix 0-based gives the same product bit for bit; vectors
!! of rank 2 and non-contiguous sections are accepted; a CG solve (Jacobi) matches LAPACK dposv;
!! errors: n <= 0 (PKRYLOV_ERR_INVALID_SIZE naming 'n'), index_base 2 (INVALID_VALUE), rowptr/colind/values
!! too short (SIZE_MISMATCH from the module, naming the array), a column out of range, a duplicate entry,
!! a NaN value, apply with wrong sizes (y unchanged) and on a null operator; destroy is idempotent.
program t810_csr_f
    use, intrinsic :: iso_c_binding, only: c_associated, c_double, c_int32_t
    use, intrinsic :: iso_fortran_env, only: error_unit
    use, intrinsic :: ieee_arithmetic, only: ieee_value, ieee_quiet_nan
    use pkrylov_mod
    implicit none
    integer, parameter :: n = 12
    type(pk_context) :: ctx
    type(pk_operator) :: A, A0, Abad
    type(pk_precond) :: M
    type(pk_solver) :: s
    type(pkrylov_result) :: res
    real(c_double) :: Ad(n, n), Af(n, n), x(n), y(n), y0(n), yref(n), b(n), xref(n), xs(n), x2(3, 4), b2(3, 4)
    real(c_double) :: big(2*n), ybig(n)
    integer(c_int32_t) :: rowptr(n + 1), nnz, i, j
    integer(c_int32_t), allocatable :: colind(:), col0(:), badcol(:)
    real(c_double), allocatable :: values(:), badval(:)
    integer :: ierr, info
    external :: dposv

    ! an SPD matrix: tridiagonal (-1, 4, -1) plus symmetric couplings -0.5 at distance 5
    Ad = 0
    do i = 1, n
        Ad(i, i) = 4
        if (i > 1) Ad(i, i - 1) = -1
        if (i < n) Ad(i, i + 1) = -1
        if (i + 5 <= n) Ad(i, i + 5) = -0.5_c_double
        if (i - 5 >= 1) Ad(i, i - 5) = -0.5_c_double
    end do
    ! CSR, 1-based, the columns of each row in decreasing order (the library sorts its copy)
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

    call pk_context_create(ctx, PKRYLOV_BACKEND_CPU)
    call pk_operator_create_csr(ctx, A, n, rowptr, colind, values, 1, ierr)
    call expect(ierr == 0 .and. c_associated(A%h), 'create a 1-based CSR')

    ! apply against the dense product
    x = [(sin(1.0_c_double*i) + 0.5_c_double, i=1, n)]
    yref = 0
    do j = 1, n
        do i = 1, n
            yref(i) = yref(i) + Ad(i, j)*x(j)
        end do
    end do
    call pk_operator_apply(A, x, y)
    call expect(maxval(abs(y - yref)) <= 1e-14_c_double*maxval(abs(yref)), 'apply = dense product')
    ! 0-based copy: same matrix, same product
    col0 = colind - 1
    call pk_operator_create_csr(ctx, A0, n, rowptr - 1, col0, values, 0)
    call pk_operator_apply(A0, x, y0)
    call expect(all(y0 == y), '0-based and 1-based CSR give the same product')
    ! a non-contiguous x (copied in by the compiler) and a rank-2 y
    big = 0
    big(1:2*n:2) = x
    call pk_operator_apply(A, big(1:2*n:2), x2, ierr)
    call expect(ierr == 0 .and. all(reshape(x2, [n]) == y), 'strided x and rank-2 y')

    ! solve against LAPACK
    b = [(cos(0.7_c_double*i), i=1, n)]
    Af = Ad
    xref = b
    call dposv('U', n, 1, Af, n, xref, n, info)
    call expect(info == 0, 'dposv')
    call pk_precond_create(ctx, M, A, PKRYLOV_PRECOND_JACOBI)
    call pk_solver_create(ctx, s, PKRYLOV_SOLVER_CG, A, M)
    call pk_solver_set_tolerances(s, 1e-13_c_double, 0.0_c_double)
    xs = 0
    call pk_solver_solve(s, b, xs)
    call pk_solver_get_result(s, res)
    call expect(res%converged == 1, 'CG converges')
    call expect(norm2(xs - xref) <= 1e-11_c_double*norm2(xref), 'CG solution = dposv solution')
    ! rank-2 vectors: same numbers
    b2 = reshape(b, [3, 4])
    x2 = 0
    call pk_solver_solve(s, b2, x2)
    call expect(all(reshape(x2, [n]) == xs), 'rank-2 b and x give the same x')

    ! ---- errors ----
    call pk_operator_create_csr(ctx, Abad, 0, rowptr, colind, values, 1, ierr)
    call expect_error(ierr, PKRYLOV_ERR_INVALID_SIZE, "'n'", 'n = 0')
    call expect(.not. c_associated(Abad%h), 'no operator after an error')
    call pk_operator_create_csr(ctx, Abad, -3, rowptr, colind, values, 1, ierr)
    call expect_error(ierr, PKRYLOV_ERR_INVALID_SIZE, "'n'", 'n = -3')
    call pk_operator_create_csr(ctx, Abad, n, rowptr, colind, values, 2, ierr)
    call expect_error(ierr, PKRYLOV_ERR_INVALID_VALUE, "'index_base'", 'index_base = 2')
    call pk_operator_create_csr(ctx, Abad, n, rowptr(1:n), colind, values, 1, ierr)
    call expect_error(ierr, PKRYLOV_ERR_SIZE_MISMATCH, "'rowptr'", 'rowptr with n entries')
    call pk_operator_create_csr(ctx, Abad, n, rowptr, colind(1:nnz - 1), values, 1, ierr)
    call expect_error(ierr, PKRYLOV_ERR_SIZE_MISMATCH, "'colind'", 'colind too short')
    call pk_operator_create_csr(ctx, Abad, n, rowptr, colind, values(1:nnz - 2), 1, ierr)
    call expect_error(ierr, PKRYLOV_ERR_SIZE_MISMATCH, "'values'", 'values too short')
    badcol = colind
    badcol(3) = n + 1 ! 1-based: valid columns are 1..n
    call pk_operator_create_csr(ctx, Abad, n, rowptr, badcol, values, 1, ierr)
    call expect_error(ierr, PKRYLOV_ERR_INDEX_OUT_OF_RANGE, "'colind'", 'column n+1 with index_base 1')
    badcol = colind
    badcol(2) = badcol(1) ! row 1 lists the same column twice
    call pk_operator_create_csr(ctx, Abad, n, rowptr, badcol, values, 1, ierr)
    call expect(ierr == PKRYLOV_ERR_DUPLICATE_ENTRY, 'duplicate entry: DUPLICATE_ENTRY')
    badval = values
    badval(5) = ieee_value(1.0_c_double, ieee_quiet_nan)
    call pk_operator_create_csr(ctx, Abad, n, rowptr, colind, badval, 1, ierr)
    call expect_error(ierr, PKRYLOV_ERR_NOT_FINITE, "'values'", 'NaN value')

    ybig = -5
    call pk_operator_apply(A, x(1:n - 1), ybig, ierr)
    call expect_error(ierr, PKRYLOV_ERR_SIZE_MISMATCH, "'x'", 'apply with n-1 values of x')
    call pk_operator_apply(A, x, big, ierr)
    call expect_error(ierr, PKRYLOV_ERR_SIZE_MISMATCH, "'y'", 'apply with 2n values of y')
    call expect(all(ybig == -5), 'y is unchanged after an error')
    call pk_operator_apply(Abad, x, y, ierr)
    call expect(ierr == PKRYLOV_ERR_NULL_POINTER, 'apply on a null operator: NULL_POINTER')

    call pk_solver_destroy(s)
    call pk_precond_destroy(M)
    call pk_operator_destroy(A0)
    call pk_operator_destroy(A)
    call expect(.not. c_associated(A%h), 'destroy nulls the operator')
    call pk_operator_destroy(A, ierr)
    call expect(ierr == 0, 'destroying a null operator is a no-op')
    call pk_context_destroy(ctx)
    deallocate (colind, values, col0, badcol, badval)
    print '(a)', 't810-csr-f: ok'

contains

    subroutine expect(cond, what)
        logical, intent(in) :: cond
        character(len=*), intent(in) :: what
        if (.not. cond) then
            write (error_unit, '(a)') 't810-csr-f: FAILED: '//what
            error stop 1
        end if
    end subroutine expect

    !> ierr is the expected code and the context's message names the argument.
    subroutine expect_error(ierr, code, name, what)
        integer, intent(in) :: ierr
        integer(c_int32_t), intent(in) :: code
        character(len=*), intent(in) :: name, what
        character(len=1024) :: msg
        call pk_error_message(ctx, msg)
        if (ierr /= code) then
            write (error_unit, '(a,i0,a,i0,a)') 't810-csr-f: FAILED: '//what//': ierr = ', ierr, &
                ' (expected ', code, '): '//trim(msg)
            error stop 1
        end if
        call expect(index(msg, name) > 0, what//': the message names '//name//': '//trim(msg))
    end subroutine expect_error

end program t810_csr_f

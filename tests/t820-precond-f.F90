!> t820-precond-f: preconditioners through pkrylov_mod, checked by what they must do exactly.
!! Checks: on a stencil with vertical couplings only, the column preconditioner is the exact inverse, so
!! CG converges in one iteration (levels/layout defaulted and given); the same matrix as CSR, k-slow and
!! k-fast ordered (built here), with levels = nz and the matching layout also needs one iteration, the
!! wrong layout more; Jacobi on a diagonal CSR needs one iteration, NONE one per distinct eigenvalue;
!! errors: COLUMN on CSR without levels or layout, levels not dividing n (PKRYLOV_ERR_LAYOUT), levels < 0
!! (INVALID_SIZE), an unknown type (INVALID_VALUE), an operator from another context (INCOMPATIBLE),
!! a zero diagonal (SINGULAR), destroying a preconditioner a solver uses (INVALID_STATE); null destroy.
program t820_precond_f
    use, intrinsic :: iso_c_binding, only: c_associated, c_double, c_int32_t
    use, intrinsic :: iso_fortran_env, only: error_unit
    use pkrylov_mod
    implicit none
    integer(c_int32_t), parameter :: nx = 4, ny = 3, nz = 5, n = nx*ny*nz
    type(pk_context) :: ctx, ctx2
    type(pk_operator) :: A, Aslow, Afast, D, Dz
    type(pk_precond) :: M, Mbad
    type(pk_solver) :: s
    real(c_double), dimension(nx, ny, nz) :: aW, aS, aV, aC
    real(c_double) :: b(n), x(n)
    integer(c_int32_t) :: rowptr(n + 1), colind(3*n), perm(n), i, j, k, c, nnz
    real(c_double) :: values(3*n)
    integer :: ierr

    call pk_context_create(ctx, PKRYLOV_BACKEND_CPU)
    b = [(1 + sin(0.4_c_double*i), i=1, n)]

    ! vertical couplings only: block diagonal over the columns
    aW = 0
    aS = 0
    do k = 1, nz
        do j = 1, ny
            do i = 1, nx
                aV(i, j, k) = -(1 + 0.3_c_double*sin(real(i + 2*j + 3*k, c_double)))
            end do
        end do
    end do
    aC = 3
    call pk_operator_create_stencil7(ctx, A, nx, ny, nz, aW, aS, aV, aC)
    call pk_precond_create(ctx, M, A, PKRYLOV_PRECOND_COLUMN, ierr=ierr)
    call expect(ierr == 0 .and. c_associated(M%h), 'column preconditioner (levels, layout from A)')
    call expect(cg_iterations(A, M) == 1, 'exact column preconditioner: one iteration')
    call pk_precond_destroy(M)
    call pk_precond_create(ctx, M, A, PKRYLOV_PRECOND_COLUMN, levels=nz, layout=PKRYLOV_LAYOUT_KSLOW)
    call expect(cg_iterations(A, M) == 1, 'levels = nz, layout KSLOW: one iteration')
    call pk_precond_destroy(M)

    ! the same matrix as CSR in k-slow order (cell c = i + nx*(j-1 + ny*(k-1))) ...
    do k = 1, nz
        do j = 1, ny
            do i = 1, nx
                c = i + nx*(j - 1 + ny*(k - 1))
                perm(c) = k + nz*(i - 1 + nx*(j - 1)) ! ... and its k-fast index
            end do
        end do
    end do
    call column_csr(.false., rowptr, colind, values, nnz)
    call pk_operator_create_csr(ctx, Aslow, n, rowptr, colind(1:nnz), values(1:nnz), 1)
    call column_csr(.true., rowptr, colind, values, nnz)
    call pk_operator_create_csr(ctx, Afast, n, rowptr, colind(1:nnz), values(1:nnz), 1)
    call pk_precond_create(ctx, M, Aslow, PKRYLOV_PRECOND_COLUMN, nz, PKRYLOV_LAYOUT_KSLOW)
    call expect(cg_iterations(Aslow, M) == 1, 'CSR k-slow with the KSLOW layout: one iteration')
    call pk_precond_destroy(M)
    call pk_precond_create(ctx, M, Afast, PKRYLOV_PRECOND_COLUMN, nz, PKRYLOV_LAYOUT_KFAST)
    call expect(cg_iterations(Afast, M) == 1, 'CSR k-fast with the KFAST layout: one iteration')
    call pk_precond_destroy(M)
    call pk_precond_create(ctx, M, Aslow, PKRYLOV_PRECOND_COLUMN, nz, PKRYLOV_LAYOUT_KFAST)
    call expect(cg_iterations(Aslow, M) > 1, 'CSR k-slow with the KFAST layout: not exact')
    call pk_precond_destroy(M)

    ! diagonal matrix with 4 distinct values: Jacobi exact, NONE needs 4 iterations
    do i = 1, n
        rowptr(i) = i
        colind(i) = i
        values(i) = 1 + mod(i, 4)
    end do
    rowptr(n + 1) = n + 1
    call pk_operator_create_csr(ctx, D, n, rowptr, colind(1:n), values(1:n), 1)
    call pk_precond_create(ctx, M, D, PKRYLOV_PRECOND_JACOBI)
    call expect(cg_iterations(D, M) == 1, 'Jacobi on a diagonal matrix: one iteration')
    call pk_precond_destroy(M)
    call pk_precond_create(ctx, M, D, PKRYLOV_PRECOND_NONE)
    call expect(cg_iterations(D, M) == 4, 'NONE on 4 distinct eigenvalues: 4 iterations')

    ! ---- errors ----
    call pk_precond_create(ctx, Mbad, Aslow, PKRYLOV_PRECOND_COLUMN, ierr=ierr)
    call expect_error(ierr, PKRYLOV_ERR_LAYOUT, "'levels'", 'COLUMN on CSR without levels')
    call expect(.not. c_associated(Mbad%h), 'no preconditioner after an error')
    call pk_precond_create(ctx, Mbad, Aslow, PKRYLOV_PRECOND_COLUMN, levels=nz, ierr=ierr)
    call expect_error(ierr, PKRYLOV_ERR_LAYOUT, "'layout'", 'COLUMN on CSR with layout AUTO')
    call pk_precond_create(ctx, Mbad, Aslow, PKRYLOV_PRECOND_COLUMN, 7, PKRYLOV_LAYOUT_KSLOW, ierr)
    call expect_error(ierr, PKRYLOV_ERR_LAYOUT, "'levels'", 'levels = 7 does not divide n = 60')
    call pk_precond_create(ctx, Mbad, A, PKRYLOV_PRECOND_COLUMN, levels=-1, ierr=ierr)
    call expect_error(ierr, PKRYLOV_ERR_INVALID_SIZE, "'levels'", 'levels = -1')
    call pk_precond_create(ctx, Mbad, A, 999_c_int32_t, ierr=ierr)
    call expect_error(ierr, PKRYLOV_ERR_INVALID_VALUE, "'type'", 'type 999')
    call pk_context_create(ctx2, PKRYLOV_BACKEND_CPU)
    call pk_precond_create(ctx2, Mbad, A, PKRYLOV_PRECOND_JACOBI, ierr=ierr)
    call expect(ierr == PKRYLOV_ERR_INCOMPATIBLE, 'operator of another context: INCOMPATIBLE')
    call pk_context_destroy(ctx2)
    values(1:n) = 1
    values(5) = 0 ! an explicit zero on the diagonal
    call pk_operator_create_csr(ctx, Dz, n, rowptr, colind(1:n), values(1:n), 1)
    call pk_precond_create(ctx, Mbad, Dz, PKRYLOV_PRECOND_JACOBI, ierr=ierr)
    call expect(ierr == PKRYLOV_ERR_SINGULAR, 'Jacobi with a zero diagonal: SINGULAR')
    call pk_solver_create(ctx, s, PKRYLOV_SOLVER_CG, D, M)
    call pk_precond_destroy(M, ierr)
    call expect(ierr == PKRYLOV_ERR_INVALID_STATE .and. c_associated(M%h), &
                'destroying a preconditioner in use: INVALID_STATE, handle kept')
    call pk_solver_destroy(s)
    call pk_precond_destroy(M, ierr)
    call expect(ierr == 0 .and. .not. c_associated(M%h), 'destroy nulls the preconditioner')
    call pk_precond_destroy(M, ierr)
    call expect(ierr == 0, 'destroying a null preconditioner is a no-op')

    call pk_operator_destroy(Dz)
    call pk_operator_destroy(D)
    call pk_operator_destroy(Afast)
    call pk_operator_destroy(Aslow)
    call pk_operator_destroy(A)
    call pk_context_destroy(ctx)
    print '(a)', 't820-precond-f: ok'

contains

    !> Iterations CG with preconditioner P needs for A x = b (rtol 1e-10).
    function cg_iterations(Aop, P) result(it)
        type(pk_operator), intent(in) :: Aop
        type(pk_precond), intent(in) :: P
        integer :: it
        type(pk_solver) :: sv
        type(pkrylov_result) :: r
        call pk_solver_create(ctx, sv, PKRYLOV_SOLVER_CG, Aop, P)
        call pk_solver_set_tolerances(sv, 1e-10_c_double, 0.0_c_double)
        x = 0
        call pk_solver_solve(sv, b, x)
        call pk_solver_get_result(sv, r)
        call expect(r%converged == 1, 'CG converges')
        it = r%iterations
        call pk_solver_destroy(sv)
    end function cg_iterations

    !> CSR (1-based) of the vertical-only stencil, in k-slow order or permuted to k-fast order.
    subroutine column_csr(kfast, rowptr, colind, values, nnz)
        logical, intent(in) :: kfast
        integer(c_int32_t), intent(out) :: rowptr(n + 1), colind(3*n), nnz
        real(c_double), intent(out) :: values(3*n)
        integer(c_int32_t) :: i, j, k, c, row, idx(n)
        ! row r of the matrix: the cell with index r in the chosen order
        do c = 1, n
            idx(c) = c
            if (kfast) idx(c) = perm(c)
        end do
        rowptr = 0
        nnz = 0
        ! count the entries per row, then fill (cells visited in any order, rows in the chosen order)
        do k = 1, nz
            do j = 1, ny
                do i = 1, nx
                    c = i + nx*(j - 1 + ny*(k - 1))
                    rowptr(idx(c) + 1) = 1 + merge(1, 0, k > 1) + merge(1, 0, k < nz)
                end do
            end do
        end do
        rowptr(1) = 1
        do row = 1, n
            rowptr(row + 1) = rowptr(row) + rowptr(row + 1)
        end do
        do k = 1, nz
            do j = 1, ny
                do i = 1, nx
                    c = i + nx*(j - 1 + ny*(k - 1))
                    nnz = rowptr(idx(c))
                    colind(nnz) = idx(c)
                    values(nnz) = aC(i, j, k)
                    if (k > 1) then
                        nnz = nnz + 1
                        colind(nnz) = idx(c - nx*ny)
                        values(nnz) = aV(i, j, k)
                    end if
                    if (k < nz) then
                        nnz = nnz + 1
                        colind(nnz) = idx(c + nx*ny)
                        values(nnz) = aV(i, j, k + 1)
                    end if
                end do
            end do
        end do
        nnz = rowptr(n + 1) - 1
    end subroutine column_csr

    subroutine expect(cond, what)
        logical, intent(in) :: cond
        character(len=*), intent(in) :: what
        if (.not. cond) then
            write (error_unit, '(a)') 't820-precond-f: FAILED: '//what
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
            write (error_unit, '(a,i0,a,i0,a)') 't820-precond-f: FAILED: '//what//': ierr = ', ierr, &
                ' (expected ', code, '): '//trim(msg)
            error stop 1
        end if
        call expect(index(msg, name) > 0, what//': the message names '//name//': '//trim(msg))
    end subroutine expect_error

end program t820_precond_f

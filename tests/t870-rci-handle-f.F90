!> t870-rci-handle-f: the handle-based reverse communication loop from Fortran (pk_rci_create,
!! pk_rci_start, pk_rci_step with Fortran pointers to the operands, pk_rci_get_result, pk_rci_destroy).
!! The operator is the 1D Laplacian tridiag(-1, d_i, -1) with a varying diagonal d_i = 2 + i/n (SPD), applied
!! by a loop written here, the preconditioner Jacobi (in/d). For CG and pipelined CG, with the library's
!! and the caller's reductions (identity sum, one process), the solution is checked against a Thomas
!! tridiagonal solve written here, the reported final residual against b - A x recomputed here, and the
!! pipelined request order (REDUCE_START, PRECOND, MATVEC, REDUCE_WAIT) is counted; errors: n <= 0
!! (INVALID_SIZE), a step before start (INVALID_STATE), x of the wrong size (SIZE_MISMATCH).
program t870_rci_handle_f
    use, intrinsic :: iso_c_binding, only: c_double, c_int32_t, c_int64_t
    use pkrylov_mod
    implicit none
    integer, parameter :: n = 200
    real(c_double) :: b(n), xref(n), d(n)
    real(c_double), target :: x(n), xbad(n + 1)
    type(pk_context) :: ctx
    type(pk_rci) :: r
    type(pkrylov_result) :: res
    real(c_double), pointer :: vin(:), vout(:), part(:)
    integer(c_int32_t) :: req, types(2), prev(3)
    integer :: i, it, ib, ierr, failures, overlapped
    failures = 0
    types = [PKRYLOV_SOLVER_CG, PKRYLOV_SOLVER_PIPECG]
    do i = 1, n
        d(i) = 2.0_c_double + real(i, c_double)/n
        b(i) = sin(0.1_c_double*i) + 0.5_c_double
    end do
    call thomas(b, xref)
    call pk_context_create(ctx, PKRYLOV_BACKEND_CPU)
    do it = 1, 2
        do ib = 0, 1
            call pk_rci_create(ctx, r, types(it), int(n, c_int64_t), 1_c_int32_t, int(ib, c_int32_t))
            call pk_rci_start(r, b, x, 0_c_int32_t)
            overlapped = 0
            prev = 0
            do
                call pk_rci_step(r, req, vin, vout, part)
                if (req == PKRYLOV_RCI_DONE) exit
                select case (req)
                case (PKRYLOV_RCI_MATVEC)
                    call matvec(vin, vout)
                case (PKRYLOV_RCI_PRECOND)
                    vout = vin/d
                case (PKRYLOV_RCI_REDUCE_START, PKRYLOV_RCI_REDUCE_WAIT)
                    if (.not. associated(part)) call fail('no partials')
                    if (ib == 0) call fail('REDUCE request with the library reducing')
                case default
                    call fail('unknown request')
                end select
                if (req == PKRYLOV_RCI_REDUCE_WAIT .and. prev(1) == PKRYLOV_RCI_MATVEC .and. &
                    prev(2) == PKRYLOV_RCI_PRECOND .and. prev(3) == PKRYLOV_RCI_REDUCE_START) &
                    overlapped = overlapped + 1
                prev = [req, prev(1), prev(2)]
            end do
            call pk_rci_get_result(r, res)
            if (res%converged /= 1) call fail('not converged')
            if (maxval(abs(x - xref)) > 1e-6_c_double*maxval(abs(xref))) call fail('x differs from Thomas')
            if (abs(res%final_residual - resnorm(x)) > 1e-6_c_double*resnorm(x) + 1e-14_c_double) &
                call fail('final_residual')
            if (res%final_residual > 1e-8_c_double*norm2(b)) call fail('residual too large')
            if (types(it) == PKRYLOV_SOLVER_PIPECG .and. ib == 1 .and. overlapped /= res%iterations + 1) &
                call fail('pipelined request order')
            if (types(it) == PKRYLOV_SOLVER_CG .and. overlapped /= 0) call fail('CG overlapped a reduction')
            call pk_rci_destroy(r)
        end do
    end do
    ! errors
    call pk_rci_create(ctx, r, PKRYLOV_SOLVER_CG, 0_c_int64_t, 0_c_int32_t, 0_c_int32_t, ierr)
    if (ierr /= PKRYLOV_ERR_INVALID_SIZE) call fail('n = 0')
    call pk_rci_create(ctx, r, PKRYLOV_SOLVER_CG, int(n, c_int64_t), 0_c_int32_t, 0_c_int32_t)
    call pk_rci_step(r, req, vin, vout, ierr=ierr)
    if (ierr /= PKRYLOV_ERR_INVALID_STATE) call fail('step before start')
    call pk_rci_start(r, b, xbad, 0_c_int32_t, ierr)
    if (ierr /= PKRYLOV_ERR_SIZE_MISMATCH) call fail('x of the wrong size')
    call pk_rci_destroy(r)
    call pk_context_destroy(ctx)
    if (failures > 0) error stop 1
    print '(a)', 'ok'
contains
    subroutine fail(what)
        character(len=*), intent(in) :: what
        write (*, '(a,i0,a,i0,2a)') 'type ', types(it), ' reduce_by_caller ', ib, ': ', what
        failures = failures + 1
    end subroutine fail
    !> y = A v, A = tridiag(-1, d, -1)
    subroutine matvec(v, y)
        real(c_double), intent(in) :: v(:)
        real(c_double), intent(out) :: y(:)
        integer :: k
        do k = 1, n
            y(k) = d(k)*v(k)
            if (k > 1) y(k) = y(k) - v(k - 1)
            if (k < n) y(k) = y(k) - v(k + 1)
        end do
    end subroutine matvec
    function resnorm(v) result(s)
        real(c_double), intent(in) :: v(:)
        real(c_double) :: s, y(n)
        call matvec(v, y)
        s = norm2(b - y)
    end function resnorm
    !> Thomas algorithm for tridiag(-1, d, -1) y = f
    subroutine thomas(f, y)
        real(c_double), intent(in) :: f(:)
        real(c_double), intent(out) :: y(:)
        real(c_double) :: c(n), g(n), m
        integer :: k
        c(1) = -1.0_c_double/d(1)
        g(1) = f(1)/d(1)
        do k = 2, n
            m = d(k) + c(k - 1)
            c(k) = -1.0_c_double/m
            g(k) = (f(k) + g(k - 1))/m
        end do
        y(n) = g(n)
        do k = n - 1, 1, -1
            y(k) = g(k) - c(k)*y(k + 1)
        end do
    end subroutine thomas
end program t870_rci_handle_f

!> t872-rci-kry-f: the handle-based reverse communication for the BiCGStab and GMRES families from Fortran
!! (pk_rci_create with PKRYLOV_SOLVER_BICGSTAB .. _CAGMRES, pk_rci_set_tolerances, pk_rci_set_restart,
!! pk_rci_set_step, pk_rci_step with Fortran pointers, pk_rci_get_result).
!! The operator is a 1D convection-diffusion matrix tridiag(-1 - w, 2 + w + i/n, -1) (nonsymmetric,
!! diagonally dominant), applied by a loop written here in the order of a CSR row (sum from 0, columns
!! ascending), the preconditioner Jacobi as (1/d) * in. Each type, with the library's and the caller's
!! reductions (identity sum, one process; the partials are overwritten with NaN between START and WAIT
!! to show the solver does not read them), is checked against
!!  - a Thomas tridiagonal solve written here (x) and b - A x recomputed here (the final residual);
!!  - pk_solver_solve on the same matrix as CSR with the JACOBI preconditioner: the same iteration count,
!!    reason and x, bitwise (the rci runs the library's own driver and the arithmetic here is the library's);
!!  - the request protocol: START and WAIT in pairs with the same array, the pipelined methods' START,
!!    PRECOND, MATVEC, WAIT overlap.
!! Also GMRES with pk_rci_set_restart(5) and CA-GMRES with pk_rci_set_step(2), and the errors: restart 0
!! (INVALID_VALUE), a setting changed mid-solve (INVALID_STATE), a step after DONE (INVALID_STATE).
program t872_rci_kry_f
    use, intrinsic :: iso_c_binding, only: c_double, c_int32_t, c_int64_t
    use, intrinsic :: ieee_arithmetic, only: ieee_value, ieee_quiet_nan
    use pkrylov_mod
    implicit none
    integer, parameter :: n = 300, ntypes = 6
    real(c_double), parameter :: w = 0.8_c_double, rtol = 1e-10_c_double
    real(c_double) :: b(n), xref(n), d(n), dinv(n), sent(4096)
    real(c_double), target :: x(n), xl(n)
    integer(c_int32_t) :: rowptr(n + 1), colind(3*n)
    real(c_double) :: vals(3*n)
    type(pk_context) :: ctx
    type(pk_operator) :: A
    type(pk_precond) :: M
    type(pk_solver) :: s
    type(pk_rci) :: r
    type(pkrylov_result) :: res, lib
    real(c_double), pointer :: vin(:), vout(:), part(:), inflight(:)
    integer(c_int32_t) :: req, types(ntypes), prev(3)
    integer :: i, it, ib, ierr, failures, overlapped, starts, nnz
    logical :: pipelined
    failures = 0
    types = [PKRYLOV_SOLVER_BICGSTAB, PKRYLOV_SOLVER_PIPEBICGSTAB, PKRYLOV_SOLVER_GMRES, &
             PKRYLOV_SOLVER_PIPEGMRES, PKRYLOV_SOLVER_FGMRES, PKRYLOV_SOLVER_CAGMRES]
    nnz = 0
    do i = 1, n
        d(i) = 2.0_c_double + w + real(i, c_double)/n
        dinv(i) = 1.0_c_double/d(i)
        b(i) = sin(0.1_c_double*i) + 0.5_c_double
        rowptr(i) = nnz
        if (i > 1) then
            nnz = nnz + 1
            colind(nnz) = i - 2
            vals(nnz) = -1.0_c_double - w
        end if
        nnz = nnz + 1
        colind(nnz) = i - 1
        vals(nnz) = d(i)
        if (i < n) then
            nnz = nnz + 1
            colind(nnz) = i
            vals(nnz) = -1.0_c_double
        end if
    end do
    rowptr(n + 1) = nnz
    call thomas(b, xref)
    call pk_context_create(ctx, PKRYLOV_BACKEND_CPU)
    call pk_operator_create_csr(ctx, A, int(n, c_int32_t), rowptr, colind(1:nnz), vals(1:nnz), 0_c_int32_t)
    call pk_precond_create(ctx, M, A, PKRYLOV_PRECOND_JACOBI)
    do it = 1, ntypes
        ! the library's solve (CSR, JACOBI, step 4 for CA-GMRES: the rci uses the same)
        call pk_solver_create(ctx, s, types(it), A, M)
        call pk_solver_set_tolerances(s, rtol, 0.0_c_double)
        call pk_solver_set_step(s, 4_c_int32_t)
        call pk_solver_solve(s, b, xl)
        call pk_solver_get_result(s, lib)
        call pk_solver_destroy(s)
        do ib = 0, 1
            call pk_rci_create(ctx, r, types(it), int(n, c_int64_t), 1_c_int32_t, int(ib, c_int32_t))
            call pk_rci_set_tolerances(r, rtol, 0.0_c_double)
            call pk_rci_set_step(r, 4_c_int32_t)
            x = 7.0_c_double ! ignored: no initial guess
            call drive(r, 1)
            call pk_rci_get_result(r, res)
            call check_solution('')
            if (res%iterations /= lib%iterations .or. res%reason /= lib%reason) &
                call fail('iterations or reason')
            if (any(x /= xl)) call fail('x differs from pk_solver_solve')
            if (res%final_residual /= lib%final_residual) call fail('final residual differs')
            pipelined = types(it) == PKRYLOV_SOLVER_PIPEBICGSTAB .or. types(it) == PKRYLOV_SOLVER_PIPEGMRES
            if (ib == 1 .and. pipelined .and. overlapped < res%iterations/2) &
                call fail('pipelined request order')
            if (.not. pipelined .and. overlapped /= 0) call fail('a blocking method overlapped a reduction')
            if (ib == 1 .and. starts < 1) call fail('no reduction requests')
            ! after DONE: a step needs a new start
            call pk_rci_step(r, req, vin, vout, ierr=ierr)
            if (ierr /= PKRYLOV_ERR_INVALID_STATE) call fail('step after DONE')
            call pk_rci_destroy(r)
        end do
    end do
    ! GMRES(5) and CA-GMRES with step 2 through the setters
    it = 3
    ib = 1
    call pk_rci_create(ctx, r, PKRYLOV_SOLVER_GMRES, int(n, c_int64_t), 1_c_int32_t, 1_c_int32_t)
    call pk_rci_set_restart(r, 0_c_int32_t, ierr)
    if (ierr /= PKRYLOV_ERR_INVALID_VALUE) call fail('restart 0')
    call pk_rci_set_restart(r, 5_c_int32_t)
    call pk_rci_set_tolerances(r, rtol, 0.0_c_double)
    call pk_rci_set_max_iterations(r, 5000_c_int32_t)
    call drive(r, 1)
    call pk_rci_get_result(r, res)
    call check_solution(' GMRES(5)')
    ! a setting changed in the middle of a solve
    call pk_rci_start(r, b, x, 0_c_int32_t)
    call pk_rci_step(r, req, vin, vout, part)
    call pk_rci_set_restart(r, 7_c_int32_t, ierr)
    if (ierr /= PKRYLOV_ERR_INVALID_STATE) call fail('restart changed mid-solve')
    call pk_rci_destroy(r) ! mid-solve
    it = 6
    call pk_rci_create(ctx, r, PKRYLOV_SOLVER_CAGMRES, int(n, c_int64_t), 1_c_int32_t, 1_c_int32_t)
    call pk_rci_set_step(r, 2_c_int32_t)
    call pk_rci_set_restart(r, 12_c_int32_t)
    call pk_rci_set_tolerances(r, rtol, 0.0_c_double)
    call pk_rci_set_residual_replacement(r, 0_c_int32_t)
    call drive(r, 1)
    call pk_rci_get_result(r, res)
    call check_solution(' CA-GMRES(2, 12)')
    call pk_rci_destroy(r)
    call pk_precond_destroy(M)
    call pk_operator_destroy(A)
    call pk_context_destroy(ctx)
    if (failures > 0) error stop 1
    print '(a)', 'ok'
contains
    !> The loop: answer every request until DONE; count reductions and overlapped ones.
    subroutine drive(rr, start)
        type(pk_rci), intent(in) :: rr
        integer, intent(in) :: start
        if (start /= 0) call pk_rci_start(rr, b, x, 0_c_int32_t)
        overlapped = 0
        starts = 0
        prev = 0
        nullify (inflight)
        do
            call pk_rci_step(rr, req, vin, vout, part)
            if (req == PKRYLOV_RCI_DONE) exit
            select case (req)
            case (PKRYLOV_RCI_MATVEC)
                call matvec(vin, vout)
            case (PKRYLOV_RCI_PRECOND)
                vout = dinv*vin
            case (PKRYLOV_RCI_REDUCE_START)
                if (.not. associated(part)) call fail('no partials')
                if (associated(inflight)) call fail('START with a reduction in flight')
                if (ib == 0) call fail('REDUCE request with the library reducing')
                starts = starts + 1
                inflight => part
                sent(1:size(part)) = part
                part = ieee_value(part, ieee_quiet_nan)
            case (PKRYLOV_RCI_REDUCE_WAIT)
                if (.not. associated(inflight, part)) call fail('WAIT does not match its START')
                part = sent(1:size(part)) ! one process: the global sums are the values sent
                nullify (inflight)
            case default
                call fail('unknown request')
            end select
            if (req == PKRYLOV_RCI_REDUCE_WAIT .and. prev(1) == PKRYLOV_RCI_MATVEC .and. &
                prev(2) == PKRYLOV_RCI_PRECOND .and. prev(3) == PKRYLOV_RCI_REDUCE_START) &
                overlapped = overlapped + 1
            prev = [req, prev(1), prev(2)]
        end do
    end subroutine drive
    subroutine check_solution(what)
        character(len=*), intent(in) :: what
        if (res%converged /= 1) call fail('not converged'//what)
        if (maxval(abs(x - xref)) > 1e-7_c_double*maxval(abs(xref))) call fail('x differs from Thomas'//what)
        if (abs(res%final_residual - resnorm(x)) > 1e-6_c_double*resnorm(x)) call fail('final_residual'//what)
        if (resnorm(x) > rtol*norm2(b)*1.0001_c_double) call fail('residual too large'//what)
    end subroutine check_solution
    subroutine fail(what)
        character(len=*), intent(in) :: what
        write (*, '(a,i0,a,i0,2a)') 'type ', types(it), ' reduce_by_caller ', ib, ': ', what
        failures = failures + 1
    end subroutine fail
    !> y = A v in the order of a CSR row: s = 0; s += a(k,k-1) v(k-1); s += d v(k); s += a(k,k+1) v(k+1)
    subroutine matvec(v, y)
        real(c_double), intent(in) :: v(:)
        real(c_double), intent(out) :: y(:)
        real(c_double) :: t
        integer :: k
        do k = 1, n
            t = 0.0_c_double
            if (k > 1) t = t + (-1.0_c_double - w)*v(k - 1)
            t = t + d(k)*v(k)
            if (k < n) t = t + (-1.0_c_double)*v(k + 1)
            y(k) = t
        end do
    end subroutine matvec
    function resnorm(v) result(sn)
        real(c_double), intent(in) :: v(:)
        real(c_double) :: sn, y(n)
        call matvec(v, y)
        sn = norm2(b - y)
    end function resnorm
    !> Thomas algorithm for tridiag(-1 - w, d, -1) y = f
    subroutine thomas(f, y)
        real(c_double), intent(in) :: f(:)
        real(c_double), intent(out) :: y(:)
        real(c_double) :: c(n), g(n), mm
        integer :: k
        c(1) = -1.0_c_double/d(1)
        g(1) = f(1)/d(1)
        do k = 2, n
            mm = d(k) + (1.0_c_double + w)*c(k - 1)
            c(k) = -1.0_c_double/mm
            g(k) = (f(k) + (1.0_c_double + w)*g(k - 1))/mm
        end do
        y(n) = g(n)
        do k = n - 1, 1, -1
            y(k) = g(k) - c(k)*y(k + 1)
        end do
    end subroutine thomas
end program t872_rci_kry_f

!> t841-halo-exchange-f: pk_operator_create_stencil7_halo(..., exchange=...) on an MITgcm-style channel,
!! periodic in x (the model's exchange wraps x) with walls in y (aS = 0 on the wall faces, the exchange
!! leaves the y halo at 0). Checks: A x through the library equals the periodic stencil applied here in
!! Fortran; CG and pipelined CG with the column preconditioner (pk_solver_solve_halo) converge and the
!! residual b - A x recomputed here with the periodic stencil is small; the exchange receives ctx_ptr and
!! the tile sizes; an exchange calling pk_callback_abort gives PKRYLOV_ERR_CALLBACK; OLx = 0 with an
!! exchange is INVALID_SIZE naming OLx (the east faces come from the halo).
module t841_exchange
    use, intrinsic :: iso_c_binding, only: c_ptr, c_int32_t, c_double, c_f_pointer
    use pkrylov_mod, only: pk_callback_abort
    implicit none
contains
    !> Periodic in x, walls in y; ctx_ptr points to a call counter (integer(c_int32_t)).
    subroutine exchange_periodic(ctx_ptr, nx, ny, nz, xh) bind(C)
        type(c_ptr), value :: ctx_ptr
        integer(c_int32_t), value :: nx, ny, nz
        real(c_double), intent(inout) :: xh(0:nx + 1, 0:ny + 1, nz)
        integer(c_int32_t), pointer :: calls
        call c_f_pointer(ctx_ptr, calls)
        calls = calls + 1
        xh(0, 1:ny, :) = xh(nx, 1:ny, :)
        xh(nx + 1, 1:ny, :) = xh(1, 1:ny, :)
    end subroutine exchange_periodic

    !> An exchange that fails (the model's MPI exchange reporting an error).
    subroutine exchange_abort(ctx_ptr, nx, ny, nz, xh) bind(C)
        type(c_ptr), value :: ctx_ptr
        integer(c_int32_t), value :: nx, ny, nz
        real(c_double), intent(inout) :: xh(0:nx + 1, 0:ny + 1, nz)
        call pk_callback_abort()
    end subroutine exchange_abort
end module t841_exchange

program t841_halo_exchange_f
    use, intrinsic :: iso_c_binding, only: c_double, c_int32_t, c_loc
    use, intrinsic :: iso_fortran_env, only: error_unit
    use pkrylov_mod
    use t841_exchange
    implicit none
    integer(c_int32_t), parameter :: sNx = 8, sNy = 5, Nr = 4, OLx = 2, OLy = 2, n = sNx*sNy*Nr
    type(pk_context) :: ctx
    type(pk_operator) :: A, Abad
    type(pk_precond) :: M
    type(pk_solver) :: s
    type(pkrylov_result) :: res
    real(c_double), dimension(1 - OLx:sNx + OLx, 1 - OLy:sNy + OLy, Nr) :: aW, aS, aV, aC, b, x
    real(c_double), dimension(sNx, sNy, Nr) :: xi, y, yref, r
    real(c_double), allocatable :: narrow(:, :, :)
    integer(c_int32_t), target :: calls
    integer(c_int32_t) :: stypes(2)
    integer :: ierr, i, j, k, it

    call make_channel()
    call pk_context_create(ctx, PKRYLOV_BACKEND_CPU)
    calls = 0
    call pk_operator_create_stencil7_halo(ctx, A, sNx, sNy, Nr, OLx, OLy, aW, aS, aV, aC, ierr=ierr, &
                                          exchange=exchange_periodic, ctx_ptr=c_loc(calls))
    call expect(ierr == PKRYLOV_SUCCESS, 'create with exchange')

    ! A x against the periodic stencil applied here
    do k = 1, Nr
        do j = 1, sNy
            do i = 1, sNx
                xi(i, j, k) = sin(0.37_c_double*i + 0.91_c_double*j - 0.53_c_double*k) + 0.2_c_double*k
            end do
        end do
    end do
    call pk_operator_apply(A, xi, y, ierr)
    call expect(ierr == PKRYLOV_SUCCESS, 'apply')
    call periodic_apply(xi, yref)
    call expect(maxval(abs(y - yref)) <= 1e-13_c_double*maxval(abs(yref)), 'A x = periodic stencil')
    call expect(calls == 1, 'one exchange per apply, ctx_ptr passed through')

    ! CG and pipelined CG with the column preconditioner, in the halo layout
    call pk_precond_create(ctx, M, A, PKRYLOV_PRECOND_COLUMN, ierr=ierr)
    call expect(ierr == PKRYLOV_SUCCESS, 'column preconditioner')
    stypes = [PKRYLOV_SOLVER_CG, PKRYLOV_SOLVER_PIPECG]
    do it = 1, 2
        call pk_solver_create(ctx, s, stypes(it), A, M, ierr)
        call expect(ierr == PKRYLOV_SUCCESS, 'solver')
        call pk_solver_set_tolerances(s, 1e-10_c_double, 0.0_c_double)
        b = 0
        b(1:sNx, 1:sNy, :) = yref + 0.5_c_double
        x = 0
        call pk_solver_solve_halo(s, b, x, sNx, sNy, Nr, OLx, OLy, ierr)
        call expect(ierr == PKRYLOV_SUCCESS, 'solve')
        call pk_solver_get_result(s, res)
        call expect(res%converged == 1, 'converged')
        call periodic_apply(x(1:sNx, 1:sNy, :), r)
        r = b(1:sNx, 1:sNy, :) - r
        call expect(norm2(r) <= 1e-9_c_double*norm2(b(1:sNx, 1:sNy, :)), &
                    'residual recomputed with the periodic stencil')
        call pk_solver_destroy(s)
    end do

    ! a failing exchange
    call pk_operator_create_stencil7_halo(ctx, Abad, sNx, sNy, Nr, OLx, OLy, aW, aS, aV, aC, ierr=ierr, &
                                          exchange=exchange_abort)
    call expect(ierr == PKRYLOV_SUCCESS, 'create with the failing exchange')
    call pk_operator_apply(Abad, xi, y, ierr)
    call expect_error(ierr, PKRYLOV_ERR_CALLBACK, 'halo exchange', 'failing exchange')
    call pk_operator_destroy(Abad)

    ! the east faces come from the halo: OLx = 0 is refused with an exchange
    allocate (narrow(sNx, 1 - OLy:sNy + OLy, Nr))
    narrow = 1
    call pk_operator_create_stencil7_halo(ctx, Abad, sNx, sNy, Nr, 0_c_int32_t, OLy, narrow, narrow, narrow, &
                                          narrow, ierr=ierr, exchange=exchange_periodic, ctx_ptr=c_loc(calls))
    call expect_error(ierr, PKRYLOV_ERR_INVALID_SIZE, 'OLx', 'OLx = 0 with an exchange')

    call pk_precond_destroy(M)
    call pk_operator_destroy(A)
    call pk_context_destroy(ctx)
    deallocate (narrow)
    print '(a)', 't841-halo-exchange-f: ok'

contains

    !> Periodic channel, MITgcm convention, in the halo layout: aW(i) couples i-1 and i (aW(1) the
    !> periodic face, aW(sNx+1) = aW(1) as the model's exchange of the coefficients gives), aS = 0 on the
    !> wall faces j = 1 and sNy+1, aC = 0.1 + the sum of the |couplings| of the row. NaN nowhere needed.
    subroutine make_channel()
        aW = 0; aS = 0; aV = 0; aC = 0
        do k = 1, Nr
            do j = 1, sNy
                do i = 1, sNx
                    aW(i, j, k) = -(1 + 0.5_c_double*sin(0.3_c_double*i + 0.7_c_double*j + 1.1_c_double*k))
                    aS(i, j, k) = -(0.8_c_double + 0.3_c_double*cos(0.5_c_double*i - 0.2_c_double*j + k))
                    aV(i, j, k) = -(2 + sin(0.9_c_double*i + 0.4_c_double*j - 0.6_c_double*k))
                end do
            end do
        end do
        aS(:, 1, :) = 0
        aW(sNx + 1, :, :) = aW(1, :, :)
        aW(0, :, :) = aW(sNx, :, :)
        do k = 1, Nr
            do j = 1, sNy
                do i = 1, sNx
                    aC(i, j, k) = 0.1_c_double + abs(aW(i, j, k)) + abs(aW(i + 1, j, k)) + abs(aS(i, j, k)) &
                                  + abs(aS(i, j + 1, k))
                    if (k > 1) aC(i, j, k) = aC(i, j, k) + abs(aV(i, j, k))
                    if (k < Nr) aC(i, j, k) = aC(i, j, k) + abs(aV(i, j, k + 1))
                end do
            end do
        end do
    end subroutine make_channel

    !> yo = A xin with the periodic stencil: i-1 and i+1 modulo sNx, walls in y, no coupling across k ends.
    subroutine periodic_apply(xin, yo)
        real(c_double), intent(in) :: xin(sNx, sNy, Nr)
        real(c_double), intent(out) :: yo(sNx, sNy, Nr)
        integer :: im, ip
        do k = 1, Nr
            do j = 1, sNy
                do i = 1, sNx
                    im = modulo(i - 2, sNx) + 1
                    ip = modulo(i, sNx) + 1
                    yo(i, j, k) = aC(i, j, k)*xin(i, j, k) + aW(i, j, k)*xin(im, j, k) &
                                  + aW(i + 1, j, k)*xin(ip, j, k)
                    if (j > 1) yo(i, j, k) = yo(i, j, k) + aS(i, j, k)*xin(i, j - 1, k)
                    if (j < sNy) yo(i, j, k) = yo(i, j, k) + aS(i, j + 1, k)*xin(i, j + 1, k)
                    if (k > 1) yo(i, j, k) = yo(i, j, k) + aV(i, j, k)*xin(i, j, k - 1)
                    if (k < Nr) yo(i, j, k) = yo(i, j, k) + aV(i, j, k + 1)*xin(i, j, k + 1)
                end do
            end do
        end do
    end subroutine periodic_apply

    subroutine expect(cond, what)
        logical, intent(in) :: cond
        character(len=*), intent(in) :: what
        if (.not. cond) then
            write (error_unit, '(a)') 't841-halo-exchange-f: FAILED: '//what
            error stop 1
        end if
    end subroutine expect

    !> ierr is the expected code and the context's message contains name.
    subroutine expect_error(ierr, code, name, what)
        integer, intent(in) :: ierr
        integer(c_int32_t), intent(in) :: code
        character(len=*), intent(in) :: name, what
        character(len=1024) :: msg
        call pk_error_message(ctx, msg)
        if (ierr /= code) then
            write (error_unit, '(a,i0,a,i0,a)') 't841-halo-exchange-f: FAILED: '//what//': ierr = ', ierr, &
                ' (expected ', code, '): '//trim(msg)
            error stop 1
        end if
        call expect(index(msg, name) > 0, what//': the message names '//name//': '//trim(msg))
    end subroutine expect_error

end program t841_halo_exchange_f

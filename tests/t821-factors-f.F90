!> t821-factors-f: pk_precond_create_column_factors(_halo), the model's own column factors, from Fortran.
!! Checks: on an MITgcm-style tile (halo arrays (1-OLx:sNx+OLx, 1-OLy:sNy+OLy, Nr), negative definite,
!! dry cells, NaN in every halo cell) the factors zMC/zMU computed here as INI_CG3D does give a CG solve
!! with the same iterations and solution as pk_precond_create(..., PKRYLOV_PRECOND_COLUMN), through the
!! halo variant and through the plain variant on the interior arrays (levels/layout given and defaulted);
!! errors: a zero zMC (SINGULAR naming zmc), a NaN in the interior of zMU (NOT_FINITE naming zmu), halo
!! arrays of another halo width and interior arrays of another size (SIZE_MISMATCH naming the array).
program t821_factors_f
    use, intrinsic :: iso_c_binding, only: c_associated, c_double, c_int32_t
    use, intrinsic :: iso_fortran_env, only: error_unit
    use, intrinsic :: ieee_arithmetic, only: ieee_value, ieee_quiet_nan
    use pkrylov_mod
    implicit none
    integer(c_int32_t), parameter :: sNx = 7, sNy = 5, Nr = 6, OLx = 2, OLy = 3
    type(pk_context) :: ctx
    type(pk_operator) :: A
    type(pk_precond) :: Mlib, Mh, Mi, Mbad
    real(c_double), dimension(1 - OLx:sNx + OLx, 1 - OLy:sNy + OLy, Nr) :: aW3d, aS3d, aV3d, aC3d, &
                                                                          zMC, zML, zMU, bad, b, x
    real(c_double) :: maskC(1 - OLx:sNx + OLx, 1 - OLy:sNy + OLy, Nr), nan
    real(c_double), allocatable :: narrow(:, :, :)
    real(c_double) :: xlib(sNx, sNy, Nr), small(sNx - 1, sNy, Nr)
    integer :: ierr, i, j, k, itlib, it

    nan = ieee_value(1.0_c_double, ieee_quiet_nan)
    ! the tile: a dry column, a shelf (two dry bottom cells), MITgcm's sign (couplings >= 0, aC < 0)
    maskC = 1
    maskC(2, 2, :) = 0
    maskC(5, 3, Nr - 1:Nr) = 0
    aW3d = 0
    aS3d = 0
    aV3d = 0
    do k = 1, Nr
        do j = 1, sNy
            do i = 1, sNx
                aW3d(i, j, k) = (0.6 + 0.3*sin(real(i + 2*j + 3*k)))*maskC(i, j, k)*maskC(i - 1, j, k)
                aS3d(i, j, k) = (0.5 + 0.3*cos(real(2*i + j + k)))*maskC(i, j, k)*maskC(i, j - 1, k)
                if (k > 1) aV3d(i, j, k) = (3 + sin(real(i*j + k)))*maskC(i, j, k)*maskC(i, j, k - 1)
            end do
        end do
    end do
    aC3d = 0
    do k = 1, Nr
        do j = 1, sNy
            do i = 1, sNx
                aC3d(i, j, k) = -(aW3d(i, j, k) + aW3d(i + 1, j, k) + aS3d(i, j, k) + aS3d(i, j + 1, k) &
                                  + aV3d(i, j, k))
                if (k < Nr) aC3d(i, j, k) = aC3d(i, j, k) - aV3d(i, j, k + 1)
                if (k == 1) aC3d(i, j, k) = aC3d(i, j, k) - 0.05 ! free-surface term
                aC3d(i, j, k) = aC3d(i, j, k)*maskC(i, j, k)
            end do
        end do
    end do
    ! INI_CG3D's factors (as legacy_examples/mitgcm_style/before), NaN in the halos
    zMC = 1
    zML = 0
    zMU = 0
    where (aC3d < 0)
        zMC = aC3d
        zML = aV3d
    end where
    where (aC3d(:, :, 1:Nr - 1) < 0) zMU(:, :, 1:Nr - 1) = aV3d(:, :, 2:Nr)
    zMC(:, :, 1) = 1/zMC(:, :, 1)
    zMU(:, :, 1) = zMU(:, :, 1)*zMC(:, :, 1)
    do k = 2, Nr
        zMC(:, :, k) = 1/(zMC(:, :, k) - zML(:, :, k)*zMU(:, :, k - 1))
        zMU(:, :, k) = zMU(:, :, k)*zMC(:, :, k)
    end do
    call nan_halo(zMC)
    call nan_halo(zMU)
    b = nan
    do k = 1, Nr
        do j = 1, sNy
            do i = 1, sNx
                b(i, j, k) = sin(0.3*i + 0.7*j - 0.2*k)*maskC(i, j, k)
            end do
        end do
    end do

    call pk_context_create(ctx, PKRYLOV_BACKEND_CPU)
    call pk_operator_create_stencil7_halo(ctx, A, sNx, sNy, Nr, OLx, OLy, aW3d, aS3d, aV3d, aC3d, &
                                          maskC > 0)
    call pk_precond_create(ctx, Mlib, A, PKRYLOV_PRECOND_COLUMN)
    itlib = cg_solve(Mlib)
    xlib = x(1:sNx, 1:sNy, :)
    call expect(itlib > 1, 'the reference solve needs more than one iteration')

    call pk_precond_create_column_factors_halo(ctx, Mh, A, sNx, sNy, Nr, OLx, OLy, zMC, zMU, ierr)
    call expect(ierr == 0 .and. c_associated(Mh%h), 'halo variant: created (NaN in the halos ignored)')
    it = cg_solve(Mh)
    call expect(it == itlib, 'halo variant: same iterations as PKRYLOV_PRECOND_COLUMN')
    call expect(rel_diff(x(1:sNx, 1:sNy, :), xlib) <= 1e-10, 'halo variant: same solution')

    call pk_precond_create_column_factors(ctx, Mi, A, zMC(1:sNx, 1:sNy, :), zMU(1:sNx, 1:sNy, :), ierr=ierr)
    call expect(ierr == 0, 'interior arrays, levels and layout from A')
    it = cg_solve(Mi)
    call expect(it == itlib .and. rel_diff(x(1:sNx, 1:sNy, :), xlib) <= 1e-10, 'interior arrays: same solve')
    call pk_precond_destroy(Mi)
    call pk_precond_create(ctx, Mi, A, PKRYLOV_PRECOND_NONE)
    call expect(cg_solve(Mi) > itlib, 'no preconditioner needs more iterations (the test is not trivial)')
    call pk_precond_destroy(Mi)
    call pk_precond_create_column_factors(ctx, Mi, A, reshape(zMC(1:sNx, 1:sNy, :), [sNx*sNy*Nr]), &
                                          reshape(zMU(1:sNx, 1:sNy, :), [sNx*sNy*Nr]), Nr, &
                                          PKRYLOV_LAYOUT_KSLOW, ierr)
    call expect(ierr == 0, 'rank-1 arrays, levels = Nr, layout KSLOW')
    call expect(cg_solve(Mi) == itlib, 'rank-1 arrays: same iterations')
    call pk_precond_destroy(Mi)

    ! ---- errors ----
    bad = zMC
    bad(3, 4, 2) = 0
    call pk_precond_create_column_factors_halo(ctx, Mbad, A, sNx, sNy, Nr, OLx, OLy, bad, zMU, ierr)
    call expect_error(ierr, PKRYLOV_ERR_SINGULAR, "'zmc'", 'a zero zMC')
    call expect(.not. c_associated(Mbad%h), 'no preconditioner after an error')
    bad = zMU
    bad(1, 1, 3) = nan
    call pk_precond_create_column_factors_halo(ctx, Mbad, A, sNx, sNy, Nr, OLx, OLy, zMC, bad, ierr)
    call expect_error(ierr, PKRYLOV_ERR_NOT_FINITE, "'zmu'", 'a NaN in the interior of zMU')
    allocate (narrow(1 - OLx + 1:sNx + OLx - 1, 1 - OLy:sNy + OLy, Nr))
    narrow = 1
    call pk_precond_create_column_factors_halo(ctx, Mbad, A, sNx, sNy, Nr, OLx, OLy, zMC, narrow, ierr)
    call expect_error(ierr, PKRYLOV_ERR_SIZE_MISMATCH, "'zmu'", 'zMU with another halo width')
    deallocate (narrow)
    small = 1
    call pk_precond_create_column_factors(ctx, Mbad, A, small, zMU(1:sNx, 1:sNy, :), ierr=ierr)
    call expect_error(ierr, PKRYLOV_ERR_SIZE_MISMATCH, "'zmc'", 'interior zMC of another size')

    call pk_precond_destroy(Mh)
    call pk_precond_destroy(Mlib)
    call pk_operator_destroy(A)
    call pk_context_destroy(ctx)
    print '(a)', 't821-factors-f: ok'

contains

    !> NaN in every halo cell of a halo-layout array.
    subroutine nan_halo(a)
        real(c_double), intent(inout) :: a(1 - OLx:, 1 - OLy:, :)
        real(c_double) :: interior(sNx, sNy, Nr)
        interior = a(1:sNx, 1:sNy, :)
        a = nan
        a(1:sNx, 1:sNy, :) = interior
    end subroutine nan_halo

    !> CG with preconditioner P on A x = b (halo arrays, x0 = 0, rtol 1e-11): iterations; x: the solution.
    function cg_solve(P) result(iters)
        type(pk_precond), intent(in) :: P
        integer :: iters
        type(pk_solver) :: sv
        type(pkrylov_result) :: r
        call pk_solver_create(ctx, sv, PKRYLOV_SOLVER_CG, A, P)
        call pk_solver_set_tolerances(sv, 1e-11_c_double, 0.0_c_double)
        x = 0
        call pk_solver_solve_halo(sv, b, x, sNx, sNy, Nr, OLx, OLy)
        call pk_solver_get_result(sv, r)
        call expect(r%converged == 1, 'CG converges')
        iters = r%iterations
        call pk_solver_destroy(sv)
    end function cg_solve

    !> ||a - b|| / ||b||.
    function rel_diff(a, b) result(d)
        real(c_double), intent(in) :: a(:, :, :), b(:, :, :)
        real(c_double) :: d
        d = norm2(a - b)/norm2(b)
    end function rel_diff

    subroutine expect(cond, what)
        logical, intent(in) :: cond
        character(len=*), intent(in) :: what
        if (.not. cond) then
            write (error_unit, '(a)') 't821-factors-f: FAILED: '//what
            error stop 1
        end if
    end subroutine expect

    subroutine expect_error(ierr, code, name, what)
        integer, intent(in) :: ierr
        integer(c_int32_t), intent(in) :: code
        character(len=*), intent(in) :: name, what
        character(len=1024) :: msg
        call pk_error_message(ctx, msg)
        if (ierr /= code) then
            write (error_unit, '(a,i0,a,i0,a)') 't821-factors-f: FAILED: '//what//': ierr = ', ierr, &
                ' (expected ', code, '): '//trim(msg)
            error stop 1
        end if
        call expect(index(msg, name) > 0, what//': the message names '//name//': '//trim(msg))
    end subroutine expect_error

end program t821_factors_f

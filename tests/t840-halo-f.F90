!> t840-halo-f: the MITgcm halo layout (1-OLx:sNx+OLx, 1-OLy:sNy+OLy, Nr) through pkrylov_mod.
!! Checks: pk_operator_create_stencil7_halo gives the operator of the interior (apply equal bit for bit
!! to pk_operator_create_stencil7 on the interior arrays) with NaN in every halo cell, with integer and
!! logical masks (halo mask values ignored), for real(8) and real(4) coefficients; pk_solver_solve_halo
!! gives the same x as pk_solver_solve on the interior, from zero and from a nonzero initial guess,
!! real(8) and real(4), with NaN in the halo of b and the halo of x left untouched; errors: OLx < 0,
!! sNx < 1 (INVALID_SIZE naming them), arrays with another halo width, b/x with the wrong Nr
!! (SIZE_MISMATCH naming the array), an interior of another size than the solver's operator.
program t840_halo_f
    use, intrinsic :: iso_c_binding, only: c_associated, c_double, c_float, c_int32_t
    use, intrinsic :: iso_fortran_env, only: error_unit
    use, intrinsic :: ieee_arithmetic, only: ieee_value, ieee_quiet_nan, ieee_is_nan
    use pkrylov_mod
    use pk_test_f
    implicit none
    integer(c_int32_t), parameter :: sNx = 6, sNy = 5, Nr = 4, OLx = 2, OLy = 3, n = sNx*sNy*Nr
    real(c_double), parameter :: sentinel = -7
    type(pk_context) :: ctx
    type(pk_operator) :: A, Ah, Am, Ahm, Ahl, A4, Ah4, Abad, Asmall
    type(pk_precond) :: M, Mh
    type(pk_solver) :: s, sh, ssmall
    real(c_double), dimension(sNx, sNy, Nr) :: aW, aS, aV, aC, x, y, yh, b, xi
    real(c_double), dimension(1 - OLx:sNx + OLx, 1 - OLy:sNy + OLy, Nr) :: hW, hS, hV, hC, hb, hx
    real(c_double), allocatable :: narrow(:, :, :)
    real(c_float), dimension(1 - OLx:sNx + OLx, 1 - OLy:sNy + OLy, Nr) :: hb4, hx4
    real(c_float), dimension(sNx, sNy, Nr) :: b4, x4
    integer(c_int32_t) :: mask(sNx, sNy, Nr), hmask(1 - OLx:sNx + OLx, 1 - OLy:sNy + OLy, Nr)
    logical :: hwet(1 - OLx:sNx + OLx, 1 - OLy:sNy + OLy, Nr)
    real(c_double) :: nan
    integer :: ierr, i

    nan = ieee_value(1.0_c_double, ieee_quiet_nan)
    call make_stencil(aW, aS, aV, aC)
    call to_halo(aW, hW)
    call to_halo(aS, hS)
    call to_halo(aV, hV)
    call to_halo(aC, hC)
    x = reshape([(1 + 0.5_c_double*sin(0.37_c_double*i), i=1, n)], shape(x))
    call pk_context_create(ctx, PKRYLOV_BACKEND_CPU)

    ! the operator of the interior, NaN in the halos
    call pk_operator_create_stencil7(ctx, A, sNx, sNy, Nr, aW, aS, aV, aC)
    call pk_operator_create_stencil7_halo(ctx, Ah, sNx, sNy, Nr, OLx, OLy, hW, hS, hV, hC, ierr=ierr)
    call expect(ierr == 0 .and. c_associated(Ah%h), 'create from halo arrays (NaN in the halos)')
    call pk_operator_apply(A, x, y)
    call pk_operator_apply(Ah, x, yh)
    call expect(all(y == yh), 'halo and interior arrays give the same operator')

    ! masks: the halo holds values that would be invalid or dry
    mask = 1
    mask(2, 3, 1) = 0
    mask(6, 5, 4) = 0
    hmask = 0
    hmask(1:sNx, 1:sNy, :) = mask
    hwet = hmask /= 0
    call pk_operator_create_stencil7(ctx, Am, sNx, sNy, Nr, aW, aS, aV, aC, mask)
    call pk_operator_create_stencil7_halo(ctx, Ahm, sNx, sNy, Nr, OLx, OLy, hW, hS, hV, hC, hmask)
    call pk_operator_create_stencil7_halo(ctx, Ahl, sNx, sNy, Nr, OLx, OLy, hW, hS, hV, hC, hwet)
    call pk_operator_apply(Am, x, y)
    call pk_operator_apply(Ahm, x, yh)
    call expect(all(y == yh), 'integer halo mask = interior mask')
    call pk_operator_apply(Ahl, x, yh)
    call expect(all(y == yh), 'logical halo mask = interior mask')

    ! real(4) coefficients
    call pk_operator_create_stencil7(ctx, A4, sNx, sNy, Nr, real(aW, c_float), real(aS, c_float), &
                                     real(aV, c_float), real(aC, c_float))
    call pk_operator_create_stencil7_halo(ctx, Ah4, sNx, sNy, Nr, OLx, OLy, real(hW, c_float), &
                                          real(hS, c_float), real(hV, c_float), real(hC, c_float))
    call pk_operator_apply(A4, x, y)
    call pk_operator_apply(Ah4, x, yh)
    call expect(all(y == yh), 'real(4) halo and interior arrays give the same operator')

    ! solves: interior arrays against halo arrays
    call pk_precond_create(ctx, M, A, PKRYLOV_PRECOND_COLUMN)
    call pk_solver_create(ctx, s, PKRYLOV_SOLVER_PIPECG, A, M)
    call pk_precond_create(ctx, Mh, Ah, PKRYLOV_PRECOND_COLUMN)
    call pk_solver_create(ctx, sh, PKRYLOV_SOLVER_PIPECG, Ah, Mh)
    b = reshape([(cos(0.21_c_double*i), i=1, n)], shape(b))
    call to_halo(b, hb)
    xi = 0
    call pk_solver_solve(s, b, xi)
    hx = sentinel
    hx(1:sNx, 1:sNy, :) = 0
    call pk_solver_solve_halo(sh, hb, hx, sNx, sNy, Nr, OLx, OLy, ierr)
    call expect(ierr == 0, 'solve_halo')
    call expect(all(hx(1:sNx, 1:sNy, :) == xi), 'solve_halo = solve on the interior')
    call expect(halo_untouched(hx), 'the halo of x is untouched')
    ! nonzero initial guess
    call pk_solver_set_initial_guess_nonzero(s, .true.)
    call pk_solver_set_initial_guess_nonzero(sh, .true.)
    call pk_solver_set_max_iterations(s, 3)
    call pk_solver_set_max_iterations(sh, 3)
    xi = x
    hx(1:sNx, 1:sNy, :) = x
    call pk_solver_solve(s, b, xi)
    call pk_solver_solve_halo(sh, hb, hx, sNx, sNy, Nr, OLx, OLy)
    call expect(all(hx(1:sNx, 1:sNy, :) == xi), 'initial guess: solve_halo = solve')
    call expect(halo_untouched(hx), 'the halo of x is untouched (initial guess)')
    ! real(4)
    b4 = real(b, c_float)
    x4 = real(x, c_float)
    hb4 = real(hb, c_float)
    hx4 = real(sentinel, c_float)
    hx4(1:sNx, 1:sNy, :) = x4
    call pk_solver_solve(s, b4, x4)
    call pk_solver_solve_halo(sh, hb4, hx4, sNx, sNy, Nr, OLx, OLy)
    call expect(all(hx4(1:sNx, 1:sNy, :) == x4), 'real(4): solve_halo = solve')
    call expect(halo_untouched(real(hx4, c_double)), 'the halo of a real(4) x is untouched')

    ! ---- errors ----
    call pk_operator_create_stencil7_halo(ctx, Abad, sNx, sNy, Nr, -1, OLy, hW, hS, hV, hC, ierr=ierr)
    call expect_error(ierr, PKRYLOV_ERR_INVALID_SIZE, "'OLx'", 'OLx = -1')
    call expect(.not. c_associated(Abad%h), 'no operator after an error')
    call pk_operator_create_stencil7_halo(ctx, Abad, 0, sNy, Nr, OLx, OLy, hW, hS, hV, hC, ierr=ierr)
    call expect_error(ierr, PKRYLOV_ERR_INVALID_SIZE, "'sNx'", 'sNx = 0')
    allocate (narrow(1 - 1:sNx + 1, 1 - OLy:sNy + OLy, Nr)) ! halo width 1 where OLx = 2 is said
    narrow = 0
    call pk_operator_create_stencil7_halo(ctx, Abad, sNx, sNy, Nr, OLx, OLy, narrow, hS, hV, hC, ierr=ierr)
    call expect_error(ierr, PKRYLOV_ERR_SIZE_MISMATCH, "'aW'", 'aW with halo width 1')
    call pk_operator_create_stencil7_halo(ctx, Abad, sNx, sNy, Nr, OLx, OLy, hW, hS, hV, hC, &
                                          hmask(:, :, 1:2), ierr)
    call expect_error(ierr, PKRYLOV_ERR_SIZE_MISMATCH, "'mask'", 'mask with 2 levels')
    hx(1:sNx, 1:sNy, :) = 5
    call pk_solver_solve_halo(sh, hb(:, :, 1:Nr - 1), hx, sNx, sNy, Nr, OLx, OLy, ierr)
    call expect_error(ierr, PKRYLOV_ERR_SIZE_MISMATCH, "'b'", 'b with Nr-1 levels')
    call pk_solver_solve_halo(sh, hb, hx(:, :, 1:Nr - 1), sNx, sNy, Nr, OLx, OLy, ierr)
    call expect_error(ierr, PKRYLOV_ERR_SIZE_MISMATCH, "'x'", 'x with Nr-1 levels')
    call pk_solver_solve_halo(sh, hb, hx, sNx, sNy, Nr, OLx, -2, ierr)
    call expect_error(ierr, PKRYLOV_ERR_INVALID_SIZE, "'OLy'", 'OLy = -2')
    call expect(all(hx(1:sNx, 1:sNy, :) == 5) .and. halo_untouched(hx), 'x unchanged after errors')
    call pk_operator_create_stencil7(ctx, Asmall, sNx, sNy, Nr - 1, aW(:, :, 1:Nr - 1), aS(:, :, 1:Nr - 1), &
                                     aV(:, :, 1:Nr - 1), aC(:, :, 1:Nr - 1))
    call pk_solver_create(ctx, ssmall, PKRYLOV_SOLVER_CG, Asmall)
    call pk_solver_solve_halo(ssmall, hb, hx, sNx, sNy, Nr, OLx, OLy, ierr)
    call expect_error(ierr, PKRYLOV_ERR_SIZE_MISMATCH, 'sNx*sNy*Nr', 'interior larger than the operator')

    call pk_solver_destroy(ssmall)
    call pk_operator_destroy(Asmall)
    call pk_solver_destroy(sh)
    call pk_precond_destroy(Mh)
    call pk_solver_destroy(s)
    call pk_precond_destroy(M)
    call pk_operator_destroy(Ah4)
    call pk_operator_destroy(A4)
    call pk_operator_destroy(Ahl)
    call pk_operator_destroy(Ahm)
    call pk_operator_destroy(Am)
    call pk_operator_destroy(Ah)
    call pk_operator_destroy(A)
    call pk_context_destroy(ctx)
    deallocate (narrow)
    print '(a)', 't840-halo-f: ok'

contains

    !> Interior array -> halo array with NaN in every halo cell.
    subroutine to_halo(a, h)
        real(c_double), intent(in) :: a(sNx, sNy, Nr)
        real(c_double), intent(out) :: h(1 - OLx:sNx + OLx, 1 - OLy:sNy + OLy, Nr)
        h = nan
        h(1:sNx, 1:sNy, :) = a
    end subroutine to_halo

    !> Every halo cell of x still holds the sentinel.
    logical function halo_untouched(h)
        real(c_double), intent(in) :: h(1 - OLx:sNx + OLx, 1 - OLy:sNy + OLy, Nr)
        logical :: interior(1 - OLx:sNx + OLx, 1 - OLy:sNy + OLy, Nr)
        interior = .false.
        interior(1:sNx, 1:sNy, :) = .true.
        halo_untouched = all(interior .or. h == sentinel) .and. .not. any(ieee_is_nan(h))
    end function halo_untouched

    subroutine expect(cond, what)
        logical, intent(in) :: cond
        character(len=*), intent(in) :: what
        if (.not. cond) then
            write (error_unit, '(a)') 't840-halo-f: FAILED: '//what
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
            write (error_unit, '(a,i0,a,i0,a)') 't840-halo-f: FAILED: '//what//': ierr = ', ierr, &
                ' (expected ', code, '): '//trim(msg)
            error stop 1
        end if
        call expect(index(msg, name) > 0, what//': the message names '//name//': '//trim(msg))
    end subroutine expect_error

end program t840_halo_f

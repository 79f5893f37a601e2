!> t831-real4-f: real(4) right-hand sides and solutions through pkrylov_mod.
!! Checks: pk_solver_solve with real(4) b and x returns exactly the real(8) solution of the same b rounded
!! to real(4) (the module solves in real(8) temporaries), from zero and from a nonzero initial guess, for
!! rank-3 and rank-1 arrays; the residual of the real(4) x, computed here with the stencil formula, is at
!! the level real(4) rounding allows; errors: NaN in b (NOT_FINITE, x unchanged), b and x of the wrong
!! size (SIZE_MISMATCH from the module naming them).
program t831_real4_f
    use, intrinsic :: iso_c_binding, only: c_double, c_float, c_int32_t
    use, intrinsic :: iso_fortran_env, only: error_unit
    use, intrinsic :: ieee_arithmetic, only: ieee_value, ieee_quiet_nan
    use pkrylov_mod
    use pk_test_f
    implicit none
    integer, parameter :: nx = 6, ny = 5, nz = 4, n = nx*ny*nz
    type(pk_context) :: ctx
    type(pk_operator) :: A
    type(pk_precond) :: M
    type(pk_solver) :: s
    type(pkrylov_result) :: res
    real(c_double), dimension(nx, ny, nz) :: aW, aS, aV, aC, b8, x8, y
    real(c_float), dimension(nx, ny, nz) :: b4, x4, xsave
    real(c_float) :: b1(n), x1(n)
    integer :: ierr, i

    call make_stencil(aW, aS, aV, aC)
    call pk_context_create(ctx, PKRYLOV_BACKEND_CPU)
    call pk_operator_create_stencil7(ctx, A, nx, ny, nz, aW, aS, aV, aC)
    call pk_precond_create(ctx, M, A, PKRYLOV_PRECOND_COLUMN)
    call pk_solver_create(ctx, s, PKRYLOV_SOLVER_CG, A, M)
    call pk_solver_set_tolerances(s, 1e-12_c_double, 0.0_c_double)

    b4 = reshape([(real(sin(0.3_c_double*i) + 0.1_c_double, c_float), i=1, n)], shape(b4))
    b8 = real(b4, c_double)

    ! from zero: real(4) x = the real(8) solution rounded
    x8 = 0
    call pk_solver_solve(s, b8, x8)
    x4 = 0
    call pk_solver_solve(s, b4, x4, ierr)
    call expect(ierr == 0, 'real(4) solve')
    call pk_solver_get_result(s, res)
    call expect(res%converged == 1, 'real(4) solve converges')
    call expect(all(x4 == real(x8, c_float)), 'real(4) x = real(8) x rounded')
    ! rank 1
    b1 = reshape(b4, [n])
    x1 = 0
    call pk_solver_solve(s, b1, x1)
    call expect(all(x1 == reshape(x4, [n])), 'rank-1 real(4) arrays give the same x')
    ! residual of the rounded x (computed here): real(4) rounding of x, not the solver, limits it
    call stencil_apply(aW, aS, aV, aC, real(x4, c_double), y)
    call expect(norm2(b8 - y) <= 1e-5_c_double*norm2(b8), 'residual of the real(4) x')

    ! nonzero initial guess, given in real(4)
    call pk_solver_set_initial_guess_nonzero(s, .true.)
    call pk_solver_set_max_iterations(s, 4) ! stop early, so the result depends on the guess
    x4 = reshape([(real(0.01_c_double*i, c_float), i=1, n)], shape(x4))
    x8 = real(x4, c_double)
    call pk_solver_solve(s, b8, x8)
    call pk_solver_solve(s, b4, x4)
    call expect(all(x4 == real(x8, c_float)), 'initial guess: real(4) x = real(8) x rounded')
    call pk_solver_get_result(s, res)
    call expect(res%iterations == 4, 'the initial guess run stopped at the cap')

    ! errors
    xsave = x4
    b4(2, 2, 2) = ieee_value(1.0_c_float, ieee_quiet_nan)
    call pk_solver_solve(s, b4, x4, ierr)
    call expect_error(ierr, PKRYLOV_ERR_NOT_FINITE, "'b'", 'NaN in a real(4) b')
    call expect(all(x4 == xsave), 'x unchanged after an error')
    call pk_solver_solve(s, b1(1:n - 1), x4, ierr)
    call expect_error(ierr, PKRYLOV_ERR_SIZE_MISMATCH, "'b'", 'real(4) b with n-1 values')
    call pk_solver_solve(s, b1, x4(:, :, 1:2), ierr)
    call expect_error(ierr, PKRYLOV_ERR_SIZE_MISMATCH, "'x'", 'real(4) x with 2 levels')
    call expect(all(x4 == xsave), 'x unchanged after a size error')

    call pk_solver_destroy(s)
    call pk_precond_destroy(M)
    call pk_operator_destroy(A)
    call pk_context_destroy(ctx)
    print '(a)', 't831-real4-f: ok'

contains

    subroutine expect(cond, what)
        logical, intent(in) :: cond
        character(len=*), intent(in) :: what
        if (.not. cond) then
            write (error_unit, '(a)') 't831-real4-f: FAILED: '//what
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
            write (error_unit, '(a,i0,a,i0,a)') 't831-real4-f: FAILED: '//what//': ierr = ', ierr, &
                ' (expected ', code, '): '//trim(msg)
            error stop 1
        end if
        call expect(index(msg, name) > 0, what//': the message names '//name//': '//trim(msg))
    end subroutine expect_error

end program t831_real4_f

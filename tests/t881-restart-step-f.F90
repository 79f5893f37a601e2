!> t881-restart-step-f: pk_solver_set_restart and pk_solver_set_step (GMRES restart length, CA-GMRES step).
!! Checks: every valid value (restart 1, 30, 1000; step 0 = auto, 1, 16) is accepted on the solver types that
!! use it and on CG (which ignores it); a CG solve after setting them gives the same iterate bit for bit as a
!! CG solve without them (CG ignores both); where this build solves with GMRES (where the solve answers
!! PKRYLOV_ERR_UNSUPPORTED, this part is reported and left out), GMRES(10) needs more iterations than
!! GMRES(40) on the same problem and both meet the tolerance on a residual recomputed here from a dense
!! product. (Not GMRES(1): without a preconditioner the thin-shell matrix is so ill-conditioned that the
!! minimal-residual steepest descent GMRES(1) gains only a factor 3 in 100000 iterations.)
!! Errors: restart 0, -1 and 1001, step -1 and 17 (PKRYLOV_ERR_INVALID_VALUE, the message names 'm' or
!! 'step' and the range), null solver handles (PKRYLOV_ERR_NULL_POINTER); a rejected value leaves the
!! previous one in place (the GMRES comparison runs after the rejected calls).
program t881_restart_step_f
    use, intrinsic :: iso_c_binding, only: c_double, c_int32_t, c_int64_t
    use, intrinsic :: iso_fortran_env, only: error_unit
    use pkrylov_mod
    implicit none
    integer(c_int32_t), parameter :: nx = 6, ny = 5, nz = 4, n = nx*ny*nz
    type(pk_context) :: ctx
    type(pk_operator) :: A
    type(pk_solver) :: cg, cg2, gm, ca, nulls
    type(pkrylov_result) :: res
    real(c_double) :: b(n), x1(n), x2(n), e(n), col(n), dense(n, n)
    integer(c_int32_t) :: m_ok(3) = [1, 30, 1000], s_ok(3) = [0, 1, 16]
    integer :: ierr, i, j, it1, it40

    b = [(sin(0.37_c_double*i) + 0.25_c_double, i=1, n)]
    call pk_context_create(ctx, PKRYLOV_BACKEND_CPU)
    call pk_operator_create_thinshell(ctx, A, nx, ny, nz, geometry=PKRYLOV_GEOMETRY_UNIFORM)
    do j = 1, n ! the dense matrix, column by column (for the residual check)
        e = 0
        e(j) = 1
        call pk_operator_apply(A, e, col)
        dense(:, j) = col
    end do
    call pk_solver_create(ctx, cg, PKRYLOV_SOLVER_CG, A)
    call pk_solver_create(ctx, cg2, PKRYLOV_SOLVER_CG, A)
    call pk_solver_create(ctx, gm, PKRYLOV_SOLVER_GMRES, A)
    call pk_solver_create(ctx, ca, PKRYLOV_SOLVER_CAGMRES, A)

    ! ---- valid values ----
    do i = 1, size(m_ok)
        call pk_solver_set_restart(gm, m_ok(i), ierr)
        call expect(ierr == 0, 'set_restart accepts a valid m (GMRES)')
        call pk_solver_set_restart(ca, m_ok(i), ierr)
        call expect(ierr == 0, 'set_restart accepts a valid m (CA-GMRES)')
        call pk_solver_set_restart(cg, m_ok(i), ierr)
        call expect(ierr == 0, 'set_restart accepts a valid m (CG ignores it)')
    end do
    do i = 1, size(s_ok)
        call pk_solver_set_step(ca, s_ok(i), ierr)
        call expect(ierr == 0, 'set_step accepts a valid step (CA-GMRES)')
        call pk_solver_set_step(cg, s_ok(i), ierr)
        call expect(ierr == 0, 'set_step accepts a valid step (CG ignores it)')
    end do
    call pk_solver_set_restart(gm, 40_c_int32_t) ! without ierr: no stop for a valid value
    call pk_solver_set_step(ca, 4_c_int32_t)

    ! ---- errors: the value is rejected and named ----
    call pk_solver_set_restart(gm, 0_c_int32_t, ierr)
    call expect_error(ierr, PKRYLOV_ERR_INVALID_VALUE, "'m' = 0 must be in 1..1000", 'restart 0')
    call pk_solver_set_restart(gm, -1_c_int32_t, ierr)
    call expect_error(ierr, PKRYLOV_ERR_INVALID_VALUE, "'m' = -1", 'restart -1')
    call pk_solver_set_restart(gm, 1001_c_int32_t, ierr)
    call expect_error(ierr, PKRYLOV_ERR_INVALID_VALUE, "'m' = 1001 must be in 1..1000", 'restart 1001')
    call pk_solver_set_step(ca, -1_c_int32_t, ierr)
    call expect_error(ierr, PKRYLOV_ERR_INVALID_VALUE, "'step' = -1 must be in 0..16", 'step -1')
    call pk_solver_set_step(ca, 17_c_int32_t, ierr)
    call expect_error(ierr, PKRYLOV_ERR_INVALID_VALUE, "'step' = 17 must be in 0..16", 'step 17')
    call pk_solver_set_step(cg, 17_c_int32_t, ierr)
    call expect_error(ierr, PKRYLOV_ERR_INVALID_VALUE, "'step' = 17", 'step 17 on CG (checked, then ignored)')
    call pk_solver_set_restart(nulls, 30_c_int32_t, ierr)
    call expect(ierr == PKRYLOV_ERR_NULL_POINTER, 'set_restart on a null solver: NULL_POINTER')
    call pk_solver_set_step(nulls, 0_c_int32_t, ierr)
    call expect(ierr == PKRYLOV_ERR_NULL_POINTER, 'set_step on a null solver: NULL_POINTER')

    ! ---- CG ignores both: the same iterate as a solver without them ----
    x1 = 0
    x2 = 0
    call pk_solver_solve(cg, b, x1)
    call pk_solver_solve(cg2, b, x2)
    call pk_solver_get_result(cg, res)
    call expect(res%converged == 1, 'CG with restart/step set converges')
    call expect(all(x1 == x2), 'CG with restart/step set gives the same iterate as without')

    ! ---- GMRES: restart 10 against restart 40 (the rejected calls above kept 40) ----
    x1 = 0
    call pk_solver_solve(gm, b, x1, ierr)
    if (ierr == PKRYLOV_ERR_UNSUPPORTED) then
        write (*, '(a)') 't881-restart-step-f: GMRES solves are not in this build: restart comparison left out'
    else
        call expect(ierr == 0, 'GMRES(40) solve')
        call pk_solver_get_result(gm, res)
        it40 = res%iterations
        call expect(res%converged == 1, 'GMRES(40) converges')
        call expect(norm2(b - matmul(dense, x1)) <= 1.1e-8_c_double*norm2(b), &
                    'GMRES(40): recomputed residual meets rtol')
        call pk_solver_set_restart(gm, 10_c_int32_t)
        call pk_solver_set_max_iterations(gm, 100000_c_int32_t)
        x1 = 0
        call pk_solver_solve(gm, b, x1)
        call pk_solver_get_result(gm, res)
        it1 = res%iterations
        call expect(res%converged == 1, 'GMRES(10) converges')
        call expect(norm2(b - matmul(dense, x1)) <= 1.1e-8_c_double*norm2(b), &
                    'GMRES(10): recomputed residual meets rtol')
        call expect(it1 > it40, 'GMRES(10) needs more iterations than GMRES(40)')
    end if

    call pk_solver_destroy(ca)
    call pk_solver_destroy(gm)
    call pk_solver_destroy(cg2)
    call pk_solver_destroy(cg)
    call pk_operator_destroy(A)
    call pk_context_destroy(ctx)
    write (*, '(a)') 't881-restart-step-f: passed'

contains

    subroutine expect(cond, what)
        logical, intent(in) :: cond
        character(len=*), intent(in) :: what
        if (.not. cond) then
            write (error_unit, '(a)') 't881-restart-step-f: FAILED: '//what
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
            write (error_unit, '(a,i0,a,i0,a)') 't881-restart-step-f: FAILED: '//what//': ierr = ', ierr, &
                ' (expected ', code, '): '//trim(msg)
            error stop 1
        end if
        call expect(index(msg, name) > 0, what//': the message names '//name//': '//trim(msg))
    end subroutine expect_error

end program t881_restart_step_f

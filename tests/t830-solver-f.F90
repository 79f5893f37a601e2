!> t830-solver-f: solvers through pkrylov_mod on the thin-shell problem, checked against a residual
!! computed here (rtol 1e-6: the thin shell rows cancel to many digits, so a residual evaluated in
!! another form is only good to about 16 eps || |A| |x| ||, about 1e-8 ||b|| here, which the test allows).
!! Checks: CG and pipelined CG with the column preconditioner converge on the gnomonic thin shell; the
!! true residual b - A x, with A applied by a Fortran loop over the thin shell's stencil coefficients
!! (another operator form, through the interface in pk_test_f), meets the tolerance; the result fields
!! agree with numbers computed here (rhs_norm = ||b||, initial_residual = ||b|| from x = 0, final_residual
!! = the Fortran residual, rel_residual = final/rhs, reason/converged/breakdown_iteration); CG and
!! pipelined CG agree; rank-3 and rank-1 arrays give the same x; max_iterations (DIVERGED_MAX_ITERATIONS
!! after exactly that many), an absolute tolerance (CONVERGED_ATOL), a nonzero initial guess (a converged
!! x needs 0 iterations; without the flag x is overwritten); errors: get_result before a solve
!! (INVALID_STATE), NaN in b (NOT_FINITE, x unchanged), b/x of the wrong size (SIZE_MISMATCH from the
!! module), operator or preconditioner of another context (INCOMPATIBLE), unknown type, bad tolerances
!! and maxit (INVALID_VALUE naming them), device arrays on the CPU backend (MEMTYPE), a destroyed solver,
!! a preconditioner never created or destroyed (NULL_POINTER naming M: forgetting pk_precond_create is not
!! "no preconditioner"), and none said explicitly (M omitted, or type NONE: the same iterations).
program t830_solver_f
    use, intrinsic :: iso_c_binding, only: c_associated, c_double, c_int, c_int32_t, c_loc
    use, intrinsic :: iso_fortran_env, only: error_unit
    use, intrinsic :: ieee_arithmetic, only: ieee_value, ieee_quiet_nan, ieee_is_finite
    use pkrylov_mod
    use pk_test_f
    implicit none
    integer(c_int32_t), parameter :: nx = 8, ny = 8, nz = 6, n = nx*ny*nz
    real(c_double), parameter :: rtol = 1e-6_c_double
    type(pk_context) :: ctx, ctx2
    type(pk_operator) :: A, A2
    type(pk_precond) :: M, M2, Mnone
    type(pk_solver) :: s, sp, sbad
    type(pkrylov_thinshell_params) :: p
    type(pkrylov_result) :: res, resp
    real(c_double), dimension(nx, ny, nz) :: aW, aS, aV, aC, r
    real(c_double), target :: b(nx, ny, nz), x(nx, ny, nz), xp(nx, ny, nz), x1(n), xsave(nx, ny, nz)
    real(c_double) :: bnorm, rnorm, slack
    integer :: ierr, i, iters

    call expect(ts_default(nx, ny, nz, p) == 0, 'pkrylov_thinshell_params_default')
    call expect(ts_coefficients(p, aW, aS, aV, aC) == 0, 'pkrylov_thinshell_stencil_coefficients')
    b = reshape([(sin(0.1_c_double*i) + 0.2_c_double, i=0, n - 1)], shape(b))
    bnorm = norm2(b)

    call pk_context_create(ctx, PKRYLOV_BACKEND_CPU)
    call pk_operator_create_thinshell(ctx, A, nx, ny, nz)
    call pk_precond_create(ctx, M, A, PKRYLOV_PRECOND_COLUMN)
    call pk_solver_create(ctx, s, PKRYLOV_SOLVER_CG, A, M, ierr)
    call expect(ierr == 0 .and. c_associated(s%h), 'create a CG solver')
    call pk_solver_get_result(s, res, ierr)
    call expect_error(ierr, PKRYLOV_ERR_INVALID_STATE, 'no solve', 'get_result before a solve')
    call pk_solver_set_tolerances(s, rtol, 0.0_c_double)

    ! CG
    x = 0
    call pk_solver_solve(s, b, x)
    call pk_solver_get_result(s, res)
    call residual(x, r, slack)
    rnorm = norm2(r)
    call expect(res%converged == 1 .and. res%reason == PKRYLOV_CONVERGED_RTOL, 'CG converges (rtol)')
    call expect(rnorm <= rtol*bnorm + slack, 'CG: Fortran residual meets the tolerance')
    call check_result(res, rnorm, slack, 'CG')
    call expect(res%residual_replacements == 0, 'CG does no residual replacement')

    ! pipelined CG
    call pk_solver_create(ctx, sp, PKRYLOV_SOLVER_PIPECG, A, M)
    call pk_solver_set_tolerances(sp, rtol, 0.0_c_double)
    xp = 0
    call pk_solver_solve(sp, b, xp)
    call pk_solver_get_result(sp, resp)
    call residual(xp, r, slack)
    rnorm = norm2(r)
    call expect(resp%converged == 1 .and. resp%reason == PKRYLOV_CONVERGED_RTOL, 'PIPECG converges (rtol)')
    call expect(rnorm <= rtol*bnorm + slack, 'PIPECG: Fortran residual meets the tolerance')
    call check_result(resp, rnorm, slack, 'PIPECG')
    call expect(resp%residual_replacements >= 0, 'PIPECG residual replacements counted')
    call expect(norm2(x - xp) <= 1e-8_c_double*norm2(x), &
                'CG and PIPECG agree (same iterates in exact arithmetic)')

    ! rank 1 = rank 3
    x1 = 0
    call pk_solver_solve(s, reshape(b, [n]), x1)
    call expect(all(x1 == reshape(x, [n])), 'rank-1 arrays give the same x')

    ! iteration cap
    call pk_solver_set_max_iterations(s, 3)
    xsave = 0
    call pk_solver_solve(s, b, xsave)
    call pk_solver_get_result(s, res)
    call expect(res%reason == PKRYLOV_DIVERGED_MAX_ITERATIONS .and. res%converged == 0 .and. &
                res%iterations == 3, 'maxit 3: DIVERGED_MAX_ITERATIONS after 3 iterations')
    call expect(all(ieee_is_finite(xsave)), 'the last iterate is returned')
    call pk_solver_set_max_iterations(s, 1000)

    ! absolute tolerance
    call pk_solver_set_tolerances(s, 0.0_c_double, 1e-6_c_double*bnorm)
    xsave = 0
    call pk_solver_solve(s, b, xsave)
    call pk_solver_get_result(s, res)
    call residual(xsave, r, slack)
    call expect(res%reason == PKRYLOV_CONVERGED_ATOL, 'atol only: CONVERGED_ATOL')
    call expect(norm2(r) <= 1e-6_c_double*bnorm + slack, 'atol only: Fortran residual <= atol')
    call pk_solver_set_tolerances(s, rtol, 0.0_c_double)

    ! initial guess: a converged x needs no iteration; without the flag x is overwritten from 0
    call pk_solver_solve(s, b, x)
    call pk_solver_get_result(s, res)
    iters = res%iterations
    xsave = x
    call pk_solver_set_initial_guess_nonzero(s, .true.)
    call pk_solver_solve(s, b, x)
    call pk_solver_get_result(s, res)
    call expect(res%iterations == 0 .and. res%converged == 1, 'converged initial guess: 0 iterations')
    call expect(all(x == xsave), 'and x is kept')
    call expect(abs(res%initial_residual - res%final_residual) <= 1e-12_c_double*bnorm, &
                'initial residual = final residual')
    call pk_solver_set_initial_guess_nonzero(s, .false.)
    x = 1e3_c_double
    call pk_solver_solve(s, b, x)
    call pk_solver_get_result(s, res)
    call expect(res%iterations == iters .and. all(x == xsave), 'flag off: the solve starts from 0')

    ! ---- errors ----
    xsave = x
    r = b
    r(3, 2, 1) = ieee_value(1.0_c_double, ieee_quiet_nan)
    call pk_solver_solve(s, r, x, ierr)
    call expect_error(ierr, PKRYLOV_ERR_NOT_FINITE, "'b'", 'NaN in b')
    call expect(all(x == xsave), 'x unchanged after an error')
    call pk_solver_solve(s, b(:, :, 1:nz - 1), x, ierr)
    call expect_error(ierr, PKRYLOV_ERR_SIZE_MISMATCH, "'b'", 'b with nz-1 levels')
    call pk_solver_solve(s, b, x1(1:n - 1), ierr)
    call expect_error(ierr, PKRYLOV_ERR_SIZE_MISMATCH, "'x'", 'x with n-1 values')
    call expect(all(x == xsave), 'x unchanged after a size error')
    call pk_solver_set_tolerances(s, -1.0_c_double, 0.0_c_double, ierr)
    call expect_error(ierr, PKRYLOV_ERR_INVALID_VALUE, "'rtol'", 'rtol = -1')
    call pk_solver_set_tolerances(s, 0.0_c_double, 0.0_c_double, ierr)
    call expect_error(ierr, PKRYLOV_ERR_INVALID_VALUE, "'atol'", 'rtol = atol = 0')
    call pk_solver_set_max_iterations(s, -1, ierr)
    call expect_error(ierr, PKRYLOV_ERR_INVALID_VALUE, "'maxit'", 'maxit = -1')
    call pk_solver_create(ctx, sbad, 999_c_int32_t, A, M, ierr)
    call expect_error(ierr, PKRYLOV_ERR_INVALID_VALUE, "'type'", 'solver type 999')
    call expect(.not. c_associated(sbad%h), 'no solver after an error')
    ! objects of another context
    call pk_context_create(ctx2, PKRYLOV_BACKEND_CPU)
    call pk_operator_create_thinshell(ctx2, A2, nx, ny, nz)
    call pk_precond_create(ctx2, M2, A2, PKRYLOV_PRECOND_JACOBI)
    call pk_solver_create(ctx, sbad, PKRYLOV_SOLVER_CG, A2, ierr=ierr)
    call expect_error(ierr, PKRYLOV_ERR_INCOMPATIBLE, "'A'", 'operator of another context')
    call pk_solver_create(ctx, sbad, PKRYLOV_SOLVER_CG, A, M2, ierr)
    call expect_error(ierr, PKRYLOV_ERR_INCOMPATIBLE, "'M'", 'preconditioner of another context')
    call pk_precond_destroy(M2)
    call pk_operator_destroy(A2)
    call pk_context_destroy(ctx2)
    ! a preconditioner never created (a forgotten pk_precond_create), or destroyed, is not "none"
    call pk_solver_create(ctx, sbad, PKRYLOV_SOLVER_CG, A, Mnone, ierr)
    call expect_error(ierr, PKRYLOV_ERR_NULL_POINTER, "'M'", 'a preconditioner never created')
    call expect_error(ierr, PKRYLOV_ERR_NULL_POINTER, 'pk_precond_create', &
                      'the message says how to create it')
    call expect(.not. c_associated(sbad%h), 'no solver with a preconditioner never created')
    call pk_precond_create(ctx, M2, A, PKRYLOV_PRECOND_JACOBI)
    call pk_precond_destroy(M2)
    call pk_solver_create(ctx, sbad, PKRYLOV_SOLVER_PIPECG, A, M2, ierr)
    call expect_error(ierr, PKRYLOV_ERR_NULL_POINTER, "'M'", 'a destroyed preconditioner')
    ! none, said explicitly: M omitted, or a NONE preconditioner; the same iterations
    call pk_solver_create(ctx, sbad, PKRYLOV_SOLVER_CG, A, ierr=ierr)
    call expect(ierr == 0, 'M omitted: no preconditioner')
    call pk_solver_set_tolerances(sbad, rtol, 0.0_c_double)
    x = 0
    call pk_solver_solve(sbad, b, x)
    call pk_solver_get_result(sbad, res)
    call pk_solver_destroy(sbad)
    call pk_precond_create(ctx, Mnone, A, PKRYLOV_PRECOND_NONE)
    call pk_solver_create(ctx, sbad, PKRYLOV_SOLVER_CG, A, Mnone)
    call pk_solver_set_tolerances(sbad, rtol, 0.0_c_double)
    x = 0
    call pk_solver_solve(sbad, b, x)
    call pk_solver_get_result(sbad, resp)
    call expect(res%converged == 1 .and. resp%iterations == res%iterations, &
                'M omitted and M = PKRYLOV_PRECOND_NONE: the same solve')
    call pk_solver_destroy(sbad)
    call pk_precond_destroy(Mnone)
    ! device arrays on the CPU backend
    call pk_solver_solve_device(s, c_loc(b), c_loc(x), ierr)
    call expect(ierr == PKRYLOV_ERR_MEMTYPE, 'solve_device on the CPU backend: MEMTYPE')
    ! a destroyed solver
    call pk_solver_destroy(sp)
    call expect(.not. c_associated(sp%h), 'destroy nulls the solver')
    call pk_solver_destroy(sp, ierr)
    call expect(ierr == 0, 'destroying a null solver is a no-op')
    call pk_solver_solve(sp, b, x, ierr)
    call expect(ierr == PKRYLOV_ERR_NULL_POINTER, 'solve on a destroyed solver: NULL_POINTER')
    call pk_solver_get_result(sp, res, ierr)
    call expect(ierr == PKRYLOV_ERR_NULL_POINTER, 'get_result on a destroyed solver: NULL_POINTER')

    call pk_solver_destroy(s)
    call pk_precond_destroy(M)
    call pk_operator_destroy(A)
    call pk_context_destroy(ctx)
    print '(a)', 't830-solver-f: ok'

contains

    !> r = b - A x with A applied by the stencil formula of pkrylov.h over the thin shell's coefficients,
    !> and the rounding bound of that evaluation: 16 eps || |A| |x| || (the thin shell's rows cancel to
    !> many digits near the ground, so two forms of A x differ by about this much).
    subroutine residual(x, r, slack)
        real(c_double), intent(in) :: x(nx, ny, nz)
        real(c_double), intent(out) :: r(nx, ny, nz)
        real(c_double), intent(out), optional :: slack
        real(c_double) :: t(7), ya(nx, ny, nz)
        integer :: i, j, k
        do k = 1, nz
            do j = 1, ny
                do i = 1, nx
                    t = 0 ! the terms of row (i,j,k), in the order of the formula
                    t(1) = aC(i, j, k)*x(i, j, k)
                    if (i > 1) t(2) = aW(i, j, k)*x(max(i - 1, 1), j, k)
                    if (i < nx) t(3) = aW(min(i + 1, nx), j, k)*x(min(i + 1, nx), j, k)
                    if (j > 1) t(4) = aS(i, j, k)*x(i, max(j - 1, 1), k)
                    if (j < ny) t(5) = aS(i, min(j + 1, ny), k)*x(i, min(j + 1, ny), k)
                    if (k > 1) t(6) = aV(i, j, k)*x(i, j, max(k - 1, 1))
                    if (k < nz) t(7) = aV(i, j, min(k + 1, nz))*x(i, j, min(k + 1, nz))
                    r(i, j, k) = b(i, j, k) - sum(t)
                    ya(i, j, k) = sum(abs(t))
                end do
            end do
        end do
        if (present(slack)) slack = 16*epsilon(1.0_c_double)*norm2(ya)
    end subroutine residual

    !> The result fields of a converged solve from x = 0 against numbers computed here.
    subroutine check_result(res, rnorm, slack, what)
        type(pkrylov_result), intent(in) :: res
        real(c_double), intent(in) :: rnorm, slack
        character(len=*), intent(in) :: what
        call expect(abs(res%rhs_norm - bnorm) <= 1e-13_c_double*bnorm, what//': rhs_norm = ||b||')
        call expect(abs(res%initial_residual - bnorm) <= 1e-13_c_double*bnorm, &
                    what//': initial residual = ||b||')
        ! the library's and the Fortran residual differ by the rounding of the two forms of A x
        call expect(abs(res%final_residual - rnorm) <= slack, &
                    what//': final_residual = the Fortran residual')
        call expect(abs(res%rel_residual - res%final_residual/res%rhs_norm) <= 1e-15_c_double, &
                    what//': rel_residual = final/rhs')
        call expect(res%iterations > 0 .and. res%iterations < 1000, what//': iterations')
        call expect(res%breakdown_iteration == -1, what//': no breakdown')
        call expect(res%solve_time_s >= 0, what//': solve time')
        call expect(res%true_residual_checks >= 0, what//': true residual checks')
    end subroutine check_result

    subroutine expect(cond, what)
        logical, intent(in) :: cond
        character(len=*), intent(in) :: what
        if (.not. cond) then
            write (error_unit, '(a)') 't830-solver-f: FAILED: '//what
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
            write (error_unit, '(a,i0,a,i0,a)') 't830-solver-f: FAILED: '//what//': ierr = ', ierr, &
                ' (expected ', code, '): '//trim(msg)
            error stop 1
        end if
        call expect(index(msg, name) > 0, what//': the message names '//name//': '//trim(msg))
    end subroutine expect_error

end program t830_solver_f

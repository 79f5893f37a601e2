!> t834-stop-rule-f: a model's own CG stopping rule, single-reduction CG and the minimum-residual iterate
!! through pkrylov_mod, as a CG2D swap uses them. A masked, negative definite 2-D free-surface problem
!! (MITgcm's 5-point aW2d, aS2d, aC2d with land) with the Jacobi preconditioner is solved by a hand-written
!! PCG in this program with MITgcm's CG2D loop (err_sq = sum r^2 < tol^2, tested before the first
!! iteration; firstResidual, lastResidual, numIters; cg2dUseMinResSol) and by the library with
!! pk_solver_set_stop_rule(s, PKRYLOV_STOP_RECURRENCE): the same iterations, first and last residuals to
!! 1e-14 of the first residual, x to 1e-12; the same for PKRYLOV_SOLVER_SRCG; with the default
!! (confirmed) rule the library confirms (true_residual_checks > 0). The minimum-residual iterate: with
!! an iteration cap at an iteration whose residual is above an earlier one, the library returns the
!! earlier iterate, as the hand-written loop does (min_residual, min_residual_iteration); -1 when off.
!! Errors: an unknown rule (INVALID_VALUE naming 'rule'), the minimum-residual iterate on GMRES
!! (UNSUPPORTED naming 'flag').
program t834_stop_rule_f
    use, intrinsic :: iso_c_binding, only: c_double, c_int32_t
    use, intrinsic :: iso_fortran_env, only: error_unit
    use pkrylov_mod
    implicit none
    integer(c_int32_t), parameter :: nx = 24, ny = 18
    type(pk_context) :: ctx
    type(pk_operator) :: A
    type(pk_precond) :: M
    type(pk_solver) :: s, sg
    type(pkrylov_result) :: res
    real(c_double), dimension(nx, ny, 1) :: aW, aS, aV, aC, b, x, xr
    integer(c_int32_t) :: mask(nx, ny, 1)
    real(c_double) :: bnorm, tol, first, last, minrr, rr(0:400)
    integer :: ierr, its, itmin, k, kcap
    logical :: conv

    call make_basin()
    bnorm = sqrt(sum(b**2, mask=mask == 1))
    call pk_context_create(ctx, PKRYLOV_BACKEND_CPU)
    call pk_operator_create_stencil7(ctx, A, nx, ny, 1_c_int32_t, aW, aS, aV, aC, mask)
    call pk_precond_create(ctx, M, A, PKRYLOV_PRECOND_JACOBI)

    ! CG2D: the recurrence rule, several tolerances
    call pk_solver_create(ctx, s, PKRYLOV_SOLVER_CG, A, M)
    call pk_solver_set_stop_rule(s, PKRYLOV_STOP_RECURRENCE)
    do k = 1, 3
        tol = bnorm*10.0_c_double**(-3*k)
        call pk_solver_set_tolerances(s, 0.0_c_double, tol)
        x = 0
        call pk_solver_solve(s, b, x)
        call pk_solver_get_result(s, res)
        xr = 0
        call cg2d(xr, tol, 400, .false., its, first, last, minrr, itmin, conv)
        call compare('CG', k)
        call expect(res%min_residual == -1 .and. res%min_residual_iteration == -1, 'min residual off: -1')
    end do
    ! the confirmed rule (default) computes the true residual
    call pk_solver_set_stop_rule(s, PKRYLOV_STOP_CONFIRMED)
    x = 0
    call pk_solver_solve(s, b, x)
    call pk_solver_get_result(s, res)
    call expect(res%converged == 1 .and. res%true_residual_checks > 0 .and. res%iterations >= its, &
                'confirmed rule: converged, confirmed on the true residual')

    ! single-reduction CG against the same hand-written CG2D (the same iterates in exact arithmetic)
    call pk_solver_create(ctx, sg, PKRYLOV_SOLVER_SRCG, A, M)
    call pk_solver_set_stop_rule(sg, PKRYLOV_STOP_RECURRENCE)
    tol = bnorm*1e-6_c_double
    call pk_solver_set_tolerances(sg, 0.0_c_double, tol)
    x = 0
    call pk_solver_solve(sg, b, x)
    call pk_solver_get_result(sg, res)
    xr = 0
    call cg2d(xr, tol, 400, .false., its, first, last, minrr, itmin, conv)
    call compare('SRCG', 2)
    call pk_solver_destroy(sg)

    ! minimum-residual iterate: cap at an iteration whose residual is above an earlier minimum
    xr = 0
    call cg2d(xr, 0.0_c_double, 400, .false., its, first, last, minrr, itmin, conv, rr)
    kcap = -1
    do k = 2, 400
        if (rr(k) > minval(rr(0:k - 1))) then
            kcap = k
            exit
        end if
    end do
    call expect(kcap > 0, 'a residual history that is not monotone')
    call pk_solver_set_stop_rule(s, PKRYLOV_STOP_RECURRENCE)
    call pk_solver_set_tolerances(s, 0.0_c_double, 1e-30_c_double)
    call pk_solver_set_max_iterations(s, int(kcap, c_int32_t))
    call pk_solver_set_min_residual(s, .true.)
    x = 0
    call pk_solver_solve(s, b, x)
    call pk_solver_get_result(s, res)
    xr = 0
    call cg2d(xr, 1e-30_c_double, kcap, .true., its, first, last, minrr, itmin, conv)
    call expect(res%iterations == kcap .and. res%reason == PKRYLOV_DIVERGED_MAX_ITERATIONS, &
                'min residual: the iteration cap')
    call expect(res%min_residual_iteration == itmin .and. itmin < kcap, 'min residual: its iteration')
    call expect(abs(res%min_residual - sqrt(minrr)) <= 1e-14_c_double*first, 'min residual: its value')
    call expect(maxval(abs(x - xr)) <= 1e-12_c_double*maxval(abs(xr)), 'min residual: the kept iterate')
    call expect(abs(res%final_residual - last) <= 1e-14_c_double*first, 'min residual: the last residual')

    ! errors
    call pk_solver_set_stop_rule(s, 999_c_int32_t, ierr)
    call expect_error(ierr, PKRYLOV_ERR_INVALID_VALUE, "'rule'", 'stop rule 999')
    call pk_solver_create(ctx, sg, PKRYLOV_SOLVER_GMRES, A, M)
    call pk_solver_set_min_residual(sg, .true., ierr)
    call expect_error(ierr, PKRYLOV_ERR_UNSUPPORTED, "'flag'", 'min residual on GMRES')
    call pk_solver_set_min_residual(sg, .false., ierr)
    call expect(ierr == 0, 'min residual off on GMRES is accepted')
    call pk_solver_destroy(sg)

    call pk_solver_destroy(s)
    call pk_precond_destroy(M)
    call pk_operator_destroy(A)
    call pk_context_destroy(ctx)
    write (*, '(a)') 't834-stop-rule-f: passed'

contains

    !> The basin: land around, an island; faces 1 +- 0.5, aC = -(sum of faces) - 0.02 (negative definite).
    subroutine make_basin()
        integer :: i, j
        real(c_double) :: t
        mask = 1
        mask(1, :, 1) = 0
        mask(nx, :, 1) = 0
        mask(:, 1, 1) = 0
        mask(:, ny, 1) = 0
        mask(8:10, 6:8, 1) = 0
        aW = 0
        aS = 0
        aV = 0
        aC = 0
        b = 0
        do j = 1, ny
            do i = 1, nx
                t = real(i*7 + j*13, c_double)
                if (i > 1) then
                    if (mask(i, j, 1) == 1 .and. mask(i - 1, j, 1) == 1) aW(i, j, 1) = 1 + 0.5_c_double*sin(t)
                end if
                if (j > 1) then
                    if (mask(i, j, 1) == 1 .and. mask(i, j - 1, 1) == 1) aS(i, j, 1) = 1 + 0.5_c_double*cos(t)
                end if
                if (mask(i, j, 1) == 1) b(i, j, 1) = sin(0.3_c_double*t)
            end do
        end do
        do j = 1, ny
            do i = 1, nx
                if (mask(i, j, 1) == 0) cycle
                aC(i, j, 1) = -(aW(i, j, 1) + aW(min(i + 1, nx), j, 1) + aS(i, j, 1) &
                                + aS(i, min(j + 1, ny), 1)) - 0.02_c_double
            end do
        end do
    end subroutine make_basin

    !> y = A x in MITgcm's order (0 at land).
    subroutine apply(xv, y)
        real(c_double), intent(in) :: xv(nx, ny)
        real(c_double), intent(out) :: y(nx, ny)
        integer :: i, j
        y = 0
        do j = 2, ny - 1
            do i = 2, nx - 1
                if (mask(i, j, 1) == 0) cycle
                y(i, j) = aW(i, j, 1)*xv(i - 1, j) + aW(i + 1, j, 1)*xv(i + 1, j) + aS(i, j, 1)*xv(i, j - 1) &
                          + aS(i, j + 1, 1)*xv(i, j + 1) + aC(i, j, 1)*xv(i, j)
            end do
        end do
    end subroutine apply

    !> MITgcm's CG2D with the Jacobi preconditioner; rr_out(0:) the err_sq history when present.
    subroutine cg2d(xs, tolv, maxit, minres, numits, firstr, lastr, minsq, nmin, converged, rr_out)
        real(c_double), intent(inout) :: xs(nx, ny, 1)
        real(c_double), intent(in) :: tolv
        integer, intent(in) :: maxit
        logical, intent(in) :: minres
        integer, intent(out) :: numits, nmin
        real(c_double), intent(out) :: firstr, lastr, minsq
        logical, intent(out) :: converged
        real(c_double), intent(out), optional :: rr_out(0:)
        real(c_double), dimension(nx, ny) :: r, z, sv, q, xmin
        real(c_double) :: err_sq, eta, eta_old, beta, alpha
        integer :: it
        call apply(xs(:, :, 1), r)
        r = merge(b(:, :, 1) - r, 0.0_c_double, mask(:, :, 1) == 1)
        err_sq = sum(r**2)
        firstr = sqrt(err_sq)
        minsq = err_sq
        nmin = 0
        xmin = xs(:, :, 1)
        if (present(rr_out)) rr_out(0) = err_sq
        converged = err_sq < tolv**2
        numits = 0
        sv = 0
        eta_old = 1
        if (.not. converged) then
            do it = 1, maxit
                z = merge(r/aC(:, :, 1), 0.0_c_double, mask(:, :, 1) == 1)
                eta = sum(z*r)
                beta = eta/eta_old
                eta_old = eta
                sv = z + beta*sv
                call apply(sv, q)
                alpha = eta/sum(sv*q)
                xs(:, :, 1) = xs(:, :, 1) + alpha*sv
                r = r - alpha*q
                err_sq = sum(r**2)
                numits = it
                if (present(rr_out)) rr_out(it) = err_sq
                ! (the minimum over every iterate, the last included, as the library reports it; CG2D
                ! tests convergence first and leaves a converged last iterate out: the same x)
                if (err_sq < minsq) then
                    minsq = err_sq
                    nmin = it
                    xmin = xs(:, :, 1)
                end if
                if (err_sq < tolv**2) then
                    converged = .true.
                    exit
                end if
            end do
        end if
        if (minres .and. err_sq > minsq) xs(:, :, 1) = xmin
        lastr = sqrt(err_sq)
    end subroutine cg2d

    subroutine compare(what, k)
        character(len=*), intent(in) :: what
        integer, intent(in) :: k
        character(len=16) :: tag
        write (tag, '(a,i0)') what//' tol ', k
        call expect(res%iterations == its, trim(tag)//': the hand-written iterations')
        call expect(abs(res%initial_residual - first) <= 1e-14_c_double*first, trim(tag)//': first residual')
        call expect(abs(res%final_residual - last) <= 1e-14_c_double*first, trim(tag)//': last residual')
        call expect(maxval(abs(x - xr)) <= 1e-12_c_double*maxval(abs(xr)), trim(tag)//': x')
        call expect(res%converged == 1 .and. res%reason == PKRYLOV_CONVERGED_ATOL .and. conv, &
                    trim(tag)//': converged (atol)')
        call expect(res%true_residual_checks == 0, trim(tag)//': no true residual')
    end subroutine compare

    subroutine expect(cond, what)
        logical, intent(in) :: cond
        character(len=*), intent(in) :: what
        if (.not. cond) then
            write (error_unit, '(a)') 't834-stop-rule-f: FAILED: '//what
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
            write (error_unit, '(a,i0,a,i0,a)') 't834-stop-rule-f: FAILED: '//what//': ierr = ', ierr, &
                ' (expected ', code, '): '//trim(msg)
            error stop 1
        end if
        call expect(index(msg, name) > 0, what//': the message names '//name//': '//trim(msg))
    end subroutine expect_error

end program t834_stop_rule_f

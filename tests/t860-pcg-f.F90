!> t860-pcg-f: the drop-in pk_pcg and the user operator/preconditioner wrappers of pkrylov_mod, on a
!! model-style 3-D problem: a 7-point column stencil whose matvec and Jacobi preconditioner are bind(C)
!! routines of the "model" (module t860_model below), with the model's data passed through ctx_ptr.
!! Checks: pk_pcg with matvec and precond converges from a nonzero initial guess, the residual recomputed
!! here by a Fortran loop meets rtol and equals the relres returned; pk_solver (CG) on the stencil form of
!! the same matrix (pk_operator_create_stencil7 + JACOBI, same initial guess) takes the same number of
!! iterations and gives the same x (1e-10); the same without a preconditioner (precond absent) against
!! pk_solver without one; without ctx_ptr (the routines get c_null_ptr and use module data) the result is
!! the same; n of kind c_int64_t; the long-lived handles (pk_operator_create_user,
!! pk_precond_create_user, pk_solver) give pk_pcg's iterations and x; info codes: 0 (converged, also 0
!! iterations from a converged guess), 1 (maxit reached, iters = maxit, relres = the recomputed residual),
!! negative: n = 0 (INVALID_SIZE), x or b of the wrong size (SIZE_MISMATCH), rtol < 0 and maxit < 0
!! (INVALID_VALUE), a routine that calls pk_callback_abort (CALLBACK, x unchanged, iters 0, relres -1),
!! each with a message naming the argument from pk_error_message on a null context; the wrappers' own
!! errors (n = 0).
module t860_model
    use, intrinsic :: iso_c_binding
    implicit none
    integer, parameter :: nx = 12, ny = 10, nz = 8, n = nx*ny*nz

    !> The model's own data: stencil coefficients (pkrylov.h convention), the Jacobi reciprocals, call
    !> counters and when to abort.
    type :: model_t
        real(c_double), dimension(nx, ny, nz) :: aW, aS, aV, aC, dinv
        integer :: nmatvec = 0, nprecond = 0
        integer :: abort_matvec_at = 0, abort_precond_at = 0 !! 0 = never
    end type model_t

    !> The same model as module data, for the routines called without ctx_ptr.
    type(model_t), target, save :: global_model

contains

    !> A model-style problem: lateral couplings -(0.5..1.5), vertical couplings -(20..40) (thin layers),
    !> diagonal = minus the sum of the couplings + 3: symmetric positive definite, and conditioned well
    !> enough that CG's iteration count does not depend on the rounding of the two forms of A x.
    subroutine model_init(m)
        type(model_t), intent(out) :: m
        integer :: i, j, k
        do k = 1, nz
            do j = 1, ny
                do i = 1, nx
                    m%aW(i, j, k) = -(1.0_c_double + 0.5_c_double*sin(0.7_c_double*(i + 2*j + 3*k)))
                    m%aS(i, j, k) = -(1.0_c_double + 0.5_c_double*cos(0.3_c_double*(2*i + j + k)))
                    m%aV(i, j, k) = -(30.0_c_double + 10.0_c_double*sin(0.5_c_double*(i + j*k)))
                end do
            end do
        end do
        m%aW(1, :, :) = 0 ! no coupling across the grid boundary
        m%aS(:, 1, :) = 0
        m%aV(:, :, 1) = 0
        do k = 1, nz
            do j = 1, ny
                do i = 1, nx
                    m%aC(i, j, k) = 3.0_c_double - m%aW(i, j, k) - m%aS(i, j, k) - m%aV(i, j, k)
                    if (i < nx) m%aC(i, j, k) = m%aC(i, j, k) - m%aW(i + 1, j, k)
                    if (j < ny) m%aC(i, j, k) = m%aC(i, j, k) - m%aS(i, j + 1, k)
                    if (k < nz) m%aC(i, j, k) = m%aC(i, j, k) - m%aV(i, j, k + 1)
                end do
            end do
        end do
        m%dinv = 1/m%aC
    end subroutine model_init

    !> y = A x by the stencil formula (terms in the order of pkrylov.h).
    subroutine stencil_apply(m, x, y)
        type(model_t), intent(in) :: m
        real(c_double), intent(in) :: x(nx, ny, nz)
        real(c_double), intent(out) :: y(nx, ny, nz)
        integer :: i, j, k
        real(c_double) :: s
        do k = 1, nz
            do j = 1, ny
                do i = 1, nx
                    s = m%aC(i, j, k)*x(i, j, k)
                    if (i > 1) s = s + m%aW(i, j, k)*x(i - 1, j, k)
                    if (i < nx) s = s + m%aW(i + 1, j, k)*x(i + 1, j, k)
                    if (j > 1) s = s + m%aS(i, j, k)*x(i, j - 1, k)
                    if (j < ny) s = s + m%aS(i, j + 1, k)*x(i, j + 1, k)
                    if (k > 1) s = s + m%aV(i, j, k)*x(i, j, k - 1)
                    if (k < nz) s = s + m%aV(i, j, k + 1)*x(i, j, k + 1)
                    y(i, j, k) = s
                end do
            end do
        end do
    end subroutine stencil_apply

    !> The model data behind ctx_ptr, or the module's copy when ctx_ptr is null.
    function model_of(ctx_ptr) result(m)
        type(c_ptr), intent(in) :: ctx_ptr
        type(model_t), pointer :: m
        if (c_associated(ctx_ptr)) then
            call c_f_pointer(ctx_ptr, m)
        else
            m => global_model
        end if
    end function model_of

    !> The model's matvec routine: y = A x.
    subroutine model_matvec(ctx_ptr, nn, x, y) bind(C)
        use pkrylov_mod, only: pk_callback_abort
        type(c_ptr), value :: ctx_ptr
        integer(c_int64_t), value :: nn
        real(c_double), intent(in) :: x(nn)
        real(c_double), intent(out) :: y(nn)
        type(model_t), pointer :: m
        m => model_of(ctx_ptr)
        m%nmatvec = m%nmatvec + 1
        if (nn /= n) error stop 't860-pcg-f: FAILED: matvec called with a wrong n'
        if (m%abort_matvec_at > 0 .and. m%nmatvec >= m%abort_matvec_at) then
            y = 0
            call pk_callback_abort()
            return
        end if
        call stencil_apply(m, x, y)
    end subroutine model_matvec

    !> The model's preconditioner routine: y = D^-1 x (Jacobi).
    subroutine model_precond(ctx_ptr, nn, x, y) bind(C)
        use pkrylov_mod, only: pk_callback_abort
        type(c_ptr), value :: ctx_ptr
        integer(c_int64_t), value :: nn
        real(c_double), intent(in) :: x(nn)
        real(c_double), intent(out) :: y(nn)
        type(model_t), pointer :: m
        m => model_of(ctx_ptr)
        m%nprecond = m%nprecond + 1
        if (nn /= n) error stop 't860-pcg-f: FAILED: precond called with a wrong n'
        if (m%abort_precond_at > 0 .and. m%nprecond >= m%abort_precond_at) then
            y = 0
            call pk_callback_abort()
            return
        end if
        y = reshape(m%dinv, [n])*x
    end subroutine model_precond

end module t860_model

program t860_pcg_f
    use, intrinsic :: iso_c_binding
    use, intrinsic :: iso_fortran_env, only: error_unit
    use pkrylov_mod
    use t860_model
    implicit none
    real(c_double), parameter :: rtol = 1e-9_c_double
    integer, parameter :: maxit = 500
    type(model_t), target :: mdl
    type(pk_context) :: ctx, nullctx
    type(pk_operator) :: A, Au, Abad
    type(pk_precond) :: M, Mu, Mbad
    type(pk_solver) :: s
    type(pkrylov_result) :: res
    real(c_double), dimension(nx, ny, nz) :: b, x0, r
    real(c_double), target :: x(nx, ny, nz), xs(nx, ny, nz), xk(nx, ny, nz), xshort(n - 1)
    real(c_double) :: relres, relres2, bnorm
    integer :: iters, iters2, info, ierr, i

    call model_init(mdl)
    global_model = mdl
    b = reshape([(sin(0.05_c_double*i) + 0.3_c_double, i=1, n)], shape(b))
    x0 = reshape([(0.1_c_double*cos(0.2_c_double*i), i=1, n)], shape(x0))
    bnorm = norm2(b)

    ! ---- pk_pcg with matvec and precond, the model's data through ctx_ptr ----
    x = x0
    call pk_pcg(n, x, b, model_matvec, model_precond, rtol, maxit, iters, relres, info, c_loc(mdl))
    call expect(info == 0, 'pk_pcg converges (info 0)')
    call expect(iters > 5 .and. iters < maxit, 'pk_pcg: iterations')
    call expect(mdl%nmatvec > iters .and. mdl%nprecond > iters, 'the routines got the model data')
    call expect(global_model%nmatvec == 0, 'and not the module copy')
    call check_residual(x, relres, 'pk_pcg')

    ! the same matrix in stencil form, pk_solver with JACOBI from the same initial guess
    call pk_context_create(ctx, PKRYLOV_BACKEND_CPU)
    call pk_operator_create_stencil7(ctx, A, nx, ny, nz, mdl%aW, mdl%aS, mdl%aV, mdl%aC)
    call pk_precond_create(ctx, M, A, PKRYLOV_PRECOND_JACOBI)
    call pk_solver_create(ctx, s, PKRYLOV_SOLVER_CG, A, M)
    call pk_solver_set_tolerances(s, rtol, 0.0_c_double)
    call pk_solver_set_max_iterations(s, maxit)
    call pk_solver_set_initial_guess_nonzero(s, .true.)
    xs = x0
    call pk_solver_solve(s, b, xs)
    call pk_solver_get_result(s, res)
    call expect(res%converged == 1 .and. res%iterations == iters, 'pk_solver on the stencil: same iterations')
    call expect(norm2(x - xs) <= 1e-10_c_double*norm2(xs), 'pk_solver on the stencil: same x')
    call pk_solver_destroy(s)

    ! ---- without a preconditioner (precond absent: the remaining arguments by keyword) ----
    x = x0
    call pk_pcg(n, x, b, model_matvec, rtol=rtol, maxit=maxit, iters=iters2, relres=relres2, info=info, &
                ctx_ptr=c_loc(mdl))
    call expect(info == 0, 'no precond: converges')
    call check_residual(x, relres2, 'no precond')
    call pk_solver_create(ctx, s, PKRYLOV_SOLVER_CG, A)
    call pk_solver_set_tolerances(s, rtol, 0.0_c_double)
    call pk_solver_set_max_iterations(s, maxit)
    call pk_solver_set_initial_guess_nonzero(s, .true.)
    xs = x0
    call pk_solver_solve(s, b, xs)
    call pk_solver_get_result(s, res)
    call expect(res%converged == 1 .and. res%iterations == iters2, 'no precond: same iterations as pk_solver')
    call expect(norm2(x - xs) <= 1e-10_c_double*norm2(xs), 'no precond: same x as pk_solver')
    call pk_solver_destroy(s)
    call pk_precond_destroy(M)
    call pk_operator_destroy(A)

    ! ---- without ctx_ptr: the routines get c_null_ptr and use the module's copy ----
    xs = x
    x = x0
    call pk_pcg(n, x, b, model_matvec, model_precond, rtol, maxit, iters2, relres2, info)
    call expect(info == 0 .and. iters2 == iters .and. global_model%nmatvec > 0, 'no ctx_ptr: same solve')
    call check_residual(x, relres2, 'no ctx_ptr')
    ! n of kind c_int64_t, a rank-1 x
    xk = x0
    call pk_pcg(int(n, c_int64_t), xk, b, model_matvec, model_precond, rtol, maxit, iters2, relres2, info, &
                c_loc(mdl))
    call expect(info == 0 .and. iters2 == iters .and. all(xk == x), 'n of kind c_int64_t: same solve')

    ! ---- long-lived handles from the same routines ----
    call pk_operator_create_user(ctx, Au, n, model_matvec, c_loc(mdl))
    call pk_precond_create_user(ctx, Mu, int(n, c_int64_t), model_precond, c_loc(mdl))
    call pk_solver_create(ctx, s, PKRYLOV_SOLVER_CG, Au, Mu)
    call pk_solver_set_tolerances(s, rtol, 0.0_c_double)
    call pk_solver_set_max_iterations(s, maxit)
    call pk_solver_set_initial_guess_nonzero(s, .true.)
    xs = x0
    call pk_solver_solve(s, b, xs)
    call pk_solver_get_result(s, res)
    call expect(res%converged == 1 .and. res%iterations == iters .and. all(xs == xk), &
                'user handles + pk_solver: the iterations and x of pk_pcg')
    ! a routine that aborts: the solve fails with PKRYLOV_ERR_CALLBACK
    mdl%nmatvec = 0
    mdl%abort_matvec_at = 4
    xs = x0
    call pk_solver_solve(s, b, xs, ierr)
    call expect(ierr == PKRYLOV_ERR_CALLBACK .and. mdl%nmatvec == 4, 'user handles: abort gives CALLBACK')
    mdl%abort_matvec_at = 0
    call pk_solver_destroy(s)
    call pk_precond_destroy(Mu)
    call pk_operator_destroy(Au)
    call expect(.not. c_associated(Au%h) .and. .not. c_associated(Mu%h), 'destroy nulls the handles')
    ! the wrappers' own errors
    call pk_operator_create_user(ctx, Abad, 0, model_matvec, ierr=ierr)
    call expect_error(ierr, PKRYLOV_ERR_INVALID_SIZE, "'n'", 'pk_operator_create_user with n = 0', ctx)
    call expect(.not. c_associated(Abad%h), 'no operator after an error')
    call pk_precond_create_user(ctx, Mbad, -2, model_precond, ierr=ierr)
    call expect_error(ierr, PKRYLOV_ERR_INVALID_SIZE, "'n'", 'pk_precond_create_user with n = -2', ctx)
    call pk_context_destroy(ctx)

    ! ---- info codes ----
    ! a converged initial guess: 0 iterations
    xs = x
    call pk_pcg(n, x, b, model_matvec, model_precond, rtol, maxit, iters2, relres2, info, c_loc(mdl))
    call expect(info == 0 .and. iters2 == 0 .and. all(x == xs), 'converged guess: info 0, 0 iterations')
    ! iteration cap
    x = x0
    call pk_pcg(n, x, b, model_matvec, model_precond, rtol, 3, iters2, relres2, info, c_loc(mdl))
    call expect(info == 1 .and. iters2 == 3, 'maxit 3: info 1 after 3 iterations')
    call expect(relres2 > rtol, 'maxit 3: relres above rtol')
    call check_residual(x, relres2, 'maxit 3', converged=.false.)
    ! errors: info < 0, x unchanged, iters 0, relres -1, the message names the argument
    x = x0
    call pk_pcg(0, x, b, model_matvec, model_precond, rtol, maxit, iters2, relres2, info, c_loc(mdl))
    call expect_pcg_error(PKRYLOV_ERR_INVALID_SIZE, "'n'", 'n = 0')
    call pk_pcg(n, xshort, b, model_matvec, model_precond, rtol, maxit, iters2, relres2, info, c_loc(mdl))
    call expect_pcg_error(PKRYLOV_ERR_SIZE_MISMATCH, "'x'", 'x with n-1 values')
    call pk_pcg(n, x, b(:, :, 1:nz - 1), model_matvec, model_precond, rtol, maxit, iters2, relres2, info, &
                c_loc(mdl))
    call expect_pcg_error(PKRYLOV_ERR_SIZE_MISMATCH, "'b'", 'b with nz-1 levels')
    call pk_pcg(n, x, b, model_matvec, model_precond, -1.0_c_double, maxit, iters2, relres2, info, c_loc(mdl))
    call expect_pcg_error(PKRYLOV_ERR_INVALID_VALUE, "'rtol'", 'rtol = -1')
    call pk_pcg(n, x, b, model_matvec, model_precond, rtol, -1, iters2, relres2, info, c_loc(mdl))
    call expect_pcg_error(PKRYLOV_ERR_INVALID_VALUE, "'maxit'", 'maxit = -1')
    mdl%nmatvec = 0
    mdl%abort_matvec_at = 7
    call pk_pcg(n, x, b, model_matvec, model_precond, rtol, maxit, iters2, relres2, info, c_loc(mdl))
    call expect_pcg_error(PKRYLOV_ERR_CALLBACK, 'user operator', 'matvec aborts')
    call expect(mdl%nmatvec == 7, 'matvec not called after it aborted')
    mdl%abort_matvec_at = 0
    mdl%nprecond = 0
    mdl%abort_precond_at = 2
    call pk_pcg(n, x, b, model_matvec, model_precond, rtol, maxit, iters2, relres2, info, c_loc(mdl))
    call expect_pcg_error(PKRYLOV_ERR_CALLBACK, 'user preconditioner', 'precond aborts')
    mdl%abort_precond_at = 0
    ! and a good call afterwards
    call pk_pcg(n, x, b, model_matvec, model_precond, rtol, maxit, iters2, relres2, info, c_loc(mdl))
    call expect(info == 0 .and. iters2 == iters, 'a good call after the errors')

    print '(a)', 't860-pcg-f: ok'

contains

    !> The residual of x recomputed here: ||b - A x|| / ||b|| meets rtol (unless converged = .false.) and
    !> equals the relres returned.
    subroutine check_residual(x, relres, what, converged)
        real(c_double), intent(in) :: x(nx, ny, nz)
        real(c_double), intent(in) :: relres
        character(len=*), intent(in) :: what
        logical, intent(in), optional :: converged
        real(c_double) :: rel
        logical :: conv
        conv = .true.
        if (present(converged)) conv = converged
        call stencil_apply(mdl, x, r)
        r = b - r
        rel = norm2(r)/bnorm
        if (conv) call expect(rel <= rtol*(1 + 1e-6_c_double), what//': recomputed residual meets rtol')
        call expect(abs(relres - rel) <= 1e-10_c_double*rel + 1e-15_c_double, &
                    what//': relres = the recomputed residual')
    end subroutine check_residual

    !> info is the expected code, x is unchanged (= x0), iters 0, relres -1, and the message of the null
    !> context names the argument.
    subroutine expect_pcg_error(code, name, what)
        integer(c_int32_t), intent(in) :: code
        character(len=*), intent(in) :: name, what
        call expect_error(info, code, name, 'pk_pcg: '//what, nullctx)
        call expect(iters2 == 0 .and. relres2 == -1, what//': iters 0, relres -1')
        call expect(all(x == x0), what//': x unchanged')
    end subroutine expect_pcg_error

    subroutine expect(cond, what)
        logical, intent(in) :: cond
        character(len=*), intent(in) :: what
        if (.not. cond) then
            write (error_unit, '(a)') 't860-pcg-f: FAILED: '//what
            error stop 1
        end if
    end subroutine expect

    !> ierr is the expected code and the message of context c names the argument.
    subroutine expect_error(ierr, code, name, what, c)
        integer, intent(in) :: ierr
        integer(c_int32_t), intent(in) :: code
        character(len=*), intent(in) :: name, what
        type(pk_context), intent(in) :: c
        character(len=1024) :: msg
        call pk_error_message(c, msg)
        if (ierr /= code) then
            write (error_unit, '(a,i0,a,i0,a)') 't860-pcg-f: FAILED: '//what//': code ', ierr, &
                ' (expected ', code, '): '//trim(msg)
            error stop 1
        end if
        call expect(index(msg, name) > 0, what//': the message names '//name//': '//trim(msg))
    end subroutine expect_error

end program t860_pcg_f

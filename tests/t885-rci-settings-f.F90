!> t885-rci-settings-f: the settings of a handle-based reverse-communication solve (pk_rci_set_tolerances,
!! pk_rci_set_max_iterations, pk_rci_set_residual_replacement) and pk_context_clear_error, pk_get_version,
!! pk_has_cuda, pk_has_nccl, pk_has_openmp, pk_context_describe. The operator is the 1D Laplacian
!! tridiag(-1, 2 + i/n, -1) applied by a loop written here,
!! Jacobi as the preconditioner; every residual is recomputed here from that loop.
!! Checks: rtol 1e-4 stops earlier than rtol 1e-10 and both meet their tolerance on the recomputed residual;
!! atol alone (rtol 0) meets ||b - A x|| <= atol; maxit 5 stops after exactly 5 iterations with
!! DIVERGED_MAX_ITERATIONS; pipelined CG with residual replacement every iteration reports replacements,
!! with 0 none, and converges either way; pk_get_version = the header's PKRYLOV_VERSION_*; pk_has_cuda
!! .false. means a CUDA context is BACKEND_UNAVAILABLE; pk_has_openmp agrees with the C function (called here
!! through its own bind(C) interface); pk_context_describe gives the C library's line ("CPU backend, 3 OpenMP
!! threads" after pk_context_set_num_threads(ctx, 3)), cut to len(text), and NULL_POINTER for a null context.
!! Errors: negative rtol, NaN atol, both tolerances 0, maxit -1, k -1 (INVALID_VALUE, the message names the
!! argument), a null handle (NULL_POINTER); pk_context_clear_error empties the message (also one raised by
!! the module itself) and a null context is NULL_POINTER.
program t885_rci_settings_f
    use, intrinsic :: iso_c_binding, only: c_double, c_int32_t, c_int64_t
    use, intrinsic :: iso_fortran_env, only: error_unit
    use, intrinsic :: ieee_arithmetic, only: ieee_value, ieee_quiet_nan
    use pkrylov_mod
    implicit none
    interface
        function pk_has_openmp_c() bind(C, name="pkrylov_has_openmp")
            import :: c_int32_t
            integer(c_int32_t) :: pk_has_openmp_c
        end function pk_has_openmp_c
    end interface
    integer, parameter :: n = 300
    real(c_double) :: b(n), d(n)
    real(c_double), target :: x(n)
    type(pk_context) :: ctx, nullctx, cudactx
    type(pk_rci) :: r, nullr
    type(pkrylov_result) :: res
    character(len=1024) :: msg
    character(len=5) :: short
    integer(c_int32_t) :: major, minor, patch
    integer :: i, ierr, it_loose, it_tight

    do i = 1, n
        d(i) = 2.0_c_double + real(i, c_double)/n
        b(i) = sin(0.1_c_double*i) + 0.5_c_double
    end do
    call pk_context_create(ctx, PKRYLOV_BACKEND_CPU)

    ! ---- tolerances ----
    call pk_rci_create(ctx, r, PKRYLOV_SOLVER_CG, int(n, c_int64_t), 1_c_int32_t, 0_c_int32_t)
    call pk_rci_set_tolerances(r, 1e-10_c_double, 0.0_c_double)
    call solve(r, res)
    it_tight = res%iterations
    call expect(res%converged == 1 .and. resnorm(x) <= 1.01e-10_c_double*norm2(b), 'rtol 1e-10 met')
    call pk_rci_set_tolerances(r, 1e-4_c_double, 0.0_c_double)
    call solve(r, res)
    it_loose = res%iterations
    call expect(res%converged == 1 .and. resnorm(x) <= 1.01e-4_c_double*norm2(b), 'rtol 1e-4 met')
    call expect(it_loose < it_tight, 'rtol 1e-4 stops earlier than rtol 1e-10')
    call pk_rci_set_tolerances(r, 0.0_c_double, 1e-6_c_double)
    call solve(r, res)
    call expect(res%converged == 1 .and. resnorm(x) <= 1.01e-6_c_double, 'atol 1e-6 alone met')
    call expect(res%reason == PKRYLOV_CONVERGED_ATOL, 'atol alone: reason CONVERGED_ATOL')

    ! ---- iteration cap ----
    call pk_rci_set_tolerances(r, 1e-12_c_double, 0.0_c_double)
    call pk_rci_set_max_iterations(r, 5_c_int32_t)
    call solve(r, res)
    call expect(res%iterations == 5 .and. res%reason == PKRYLOV_DIVERGED_MAX_ITERATIONS, &
                'maxit 5: 5 iterations, DIVERGED_MAX_ITERATIONS')
    call expect(abs(res%final_residual - resnorm(x)) <= 1e-8_c_double*resnorm(x), &
                'maxit 5: final_residual = recomputed residual of the last iterate')

    ! ---- errors ----
    call pk_rci_set_tolerances(r, -1.0_c_double, 0.0_c_double, ierr)
    call expect_error(ierr, PKRYLOV_ERR_INVALID_VALUE, "'rtol'", 'rtol -1')
    call pk_rci_set_tolerances(r, 1e-8_c_double, ieee_value(1.0_c_double, ieee_quiet_nan), ierr)
    call expect_error(ierr, PKRYLOV_ERR_INVALID_VALUE, "'atol'", 'atol NaN')
    call pk_rci_set_tolerances(r, 0.0_c_double, 0.0_c_double, ierr)
    call expect(ierr == PKRYLOV_ERR_INVALID_VALUE, 'both tolerances 0: INVALID_VALUE')
    call pk_rci_set_max_iterations(r, -1_c_int32_t, ierr)
    call expect_error(ierr, PKRYLOV_ERR_INVALID_VALUE, "'maxit' = -1", 'maxit -1')
    call pk_rci_set_residual_replacement(r, -1_c_int32_t, ierr)
    call expect_error(ierr, PKRYLOV_ERR_INVALID_VALUE, "'k' = -1", 'k -1')
    call pk_rci_set_tolerances(nullr, 1e-8_c_double, 0.0_c_double, ierr)
    call expect(ierr == PKRYLOV_ERR_NULL_POINTER, 'set_tolerances on a null handle')
    call pk_rci_set_max_iterations(nullr, 5_c_int32_t, ierr)
    call expect(ierr == PKRYLOV_ERR_NULL_POINTER, 'set_max_iterations on a null handle')
    call pk_rci_set_residual_replacement(nullr, 5_c_int32_t, ierr)
    call expect(ierr == PKRYLOV_ERR_NULL_POINTER, 'set_residual_replacement on a null handle')
    call pk_rci_destroy(r)

    ! ---- residual replacement (pipelined CG) ----
    call pk_rci_create(ctx, r, PKRYLOV_SOLVER_PIPECG, int(n, c_int64_t), 1_c_int32_t, 0_c_int32_t)
    call pk_rci_set_residual_replacement(r, 1_c_int32_t)
    call solve(r, res)
    call expect(res%converged == 1 .and. res%residual_replacements > 0, 'replacement every iteration: done')
    call expect(resnorm(x) <= 1.01e-8_c_double*norm2(b), 'replacement every iteration: converged to 1e-8')
    call pk_rci_set_residual_replacement(r, 0_c_int32_t)
    call solve(r, res)
    call expect(res%converged == 1 .and. res%residual_replacements == 0, 'replacement 0: none')
    call pk_rci_destroy(r)

    ! ---- clear_error (a C error, then a module error) ----
    call pk_rci_create(ctx, r, PKRYLOV_SOLVER_CG, 0_c_int64_t, 0_c_int32_t, 0_c_int32_t, ierr)
    call pk_error_message(ctx, msg)
    call expect(ierr /= 0 .and. len_trim(msg) > 0, 'an error leaves a message')
    call pk_context_clear_error(ctx)
    call pk_error_message(ctx, msg)
    call expect(len_trim(msg) == 0, 'clear_error empties the message')
    call pk_rci_create(ctx, r, PKRYLOV_SOLVER_CG, int(n, c_int64_t), 0_c_int32_t, 0_c_int32_t)
    call pk_rci_start(r, b(1:n - 1), x, 0_c_int32_t, ierr) ! detected by the module
    call pk_error_message(ctx, msg)
    call expect(ierr == PKRYLOV_ERR_SIZE_MISMATCH .and. index(msg, "'b'") > 0, 'module error message')
    call pk_context_clear_error(ctx)
    call pk_error_message(ctx, msg)
    call expect(len_trim(msg) == 0, 'clear_error empties a module error message')
    call pk_rci_destroy(r)
    call pk_context_clear_error(nullctx, ierr)
    call expect(ierr == PKRYLOV_ERR_NULL_POINTER, 'clear_error on a null context')

    ! ---- version, CUDA ----
    call pk_get_version(major, minor, patch)
    call expect(major == PKRYLOV_VERSION_MAJOR .and. minor == PKRYLOV_VERSION_MINOR .and. &
                patch == PKRYLOV_VERSION_PATCH, 'pk_get_version = the header version')
    call pk_get_version(minor=minor)
    call expect(minor == PKRYLOV_VERSION_MINOR, 'pk_get_version with one output')
    if (.not. pk_has_cuda()) then
        call pk_context_create(cudactx, PKRYLOV_BACKEND_CUDA, ierr)
        call expect(ierr == PKRYLOV_ERR_BACKEND_UNAVAILABLE, 'no CUDA compiled in: BACKEND_UNAVAILABLE')
    end if

    ! ---- what the build has, what a context runs on ----
    call expect(pk_has_openmp() .eqv. (pk_has_openmp_c() == 1), 'pk_has_openmp = pkrylov_has_openmp')
    if (pk_has_nccl()) call expect(pk_has_cuda() .and. pk_has_mpi(), 'NCCL only in CUDA + MPI builds')
    call pk_context_set_num_threads(ctx, 3)
    call pk_context_describe(ctx, msg)
    if (pk_has_openmp()) then
        call expect(msg == 'CPU backend, 3 OpenMP threads', 'describe: '//trim(msg))
    else
        call expect(msg == 'CPU backend, 1 thread (built without OpenMP)', 'describe: '//trim(msg))
    end if
    call pk_context_describe(ctx, short)
    call expect(short == 'CPU b', 'describe cut to len(text): '//short)
    call pk_context_set_num_threads(ctx, 0)
    call pk_context_describe(nullctx, msg, ierr)
    call expect(ierr == PKRYLOV_ERR_NULL_POINTER .and. len_trim(msg) == 0, 'describe of a null context')
    call pk_error_message(nullctx, msg)
    call expect(index(msg, "'ctx'") > 0, 'describe of a null context: message names ctx')

    call pk_context_destroy(ctx)
    print '(a)', 't885-rci-settings-f: ok'

contains

    !> x = 0, then the reverse-communication loop to DONE; res is the outcome.
    subroutine solve(r, res)
        type(pk_rci), intent(in) :: r
        type(pkrylov_result), intent(out) :: res
        real(c_double), pointer :: vin(:), vout(:)
        integer(c_int32_t) :: req
        x = 0
        call pk_rci_start(r, b, x, 0_c_int32_t)
        do
            call pk_rci_step(r, req, vin, vout)
            select case (req)
            case (PKRYLOV_RCI_DONE)
                exit
            case (PKRYLOV_RCI_MATVEC)
                call matvec(vin, vout)
            case (PKRYLOV_RCI_PRECOND)
                vout = vin/d
            case default
                call expect(.false., 'unexpected request')
            end select
        end do
        call pk_rci_get_result(r, res)
    end subroutine solve

    subroutine matvec(u, v)
        real(c_double), intent(in) :: u(:)
        real(c_double), intent(out) :: v(:)
        integer :: k
        do k = 1, n
            v(k) = d(k)*u(k)
            if (k > 1) v(k) = v(k) - u(k - 1)
            if (k < n) v(k) = v(k) - u(k + 1)
        end do
    end subroutine matvec

    function resnorm(xx) result(rn)
        real(c_double), intent(in) :: xx(:)
        real(c_double) :: rn, ax(n)
        call matvec(xx, ax)
        rn = norm2(b - ax)
    end function resnorm

    subroutine expect(cond, what)
        logical, intent(in) :: cond
        character(len=*), intent(in) :: what
        if (.not. cond) then
            write (error_unit, '(a)') 't885-rci-settings-f: FAILED: '//what
            error stop 1
        end if
    end subroutine expect

    subroutine expect_error(ierr, code, name, what)
        integer, intent(in) :: ierr
        integer(c_int32_t), intent(in) :: code
        character(len=*), intent(in) :: name, what
        character(len=1024) :: m
        call pk_error_message(ctx, m)
        if (ierr /= code) then
            write (error_unit, '(a,i0,a,i0,a)') 't885-rci-settings-f: FAILED: '//what//': ierr = ', ierr, &
                ' (expected ', code, '): '//trim(m)
            error stop 1
        end if
        call expect(index(m, name) > 0, what//': the message names '//name//': '//trim(m))
    end subroutine expect_error

end program t885_rci_settings_f

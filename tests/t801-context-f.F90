!> t801-context-f: contexts, error messages and strings through pkrylov_mod.
!! Checks: pk_context_create/destroy/get_backend (CPU, AUTO, CUDA where available), a bad backend
!! (PKRYLOV_ERR_INVALID_VALUE, no context, pk_error_message with a null context names 'backend'),
!! destroying a context with live objects (PKRYLOV_ERR_INVALID_STATE, handle kept), destroy twice (no-op),
!! calls on a null context (PKRYLOV_ERR_NULL_POINTER), pk_error_string/pk_reason_string against the
!! header's documented strings, message truncation, and the per-context error record of the module
!! (a size error detected in Fortran is reported for its context only and replaced by a newer C error).
program t801_context_f
    use, intrinsic :: iso_c_binding, only: c_associated, c_double, c_int32_t
    use, intrinsic :: iso_fortran_env, only: error_unit
    use pkrylov_mod
    implicit none
    type(pk_context) :: ctx, ctx2, bad
    type(pk_operator) :: A
    integer(c_int32_t) :: backend
    integer :: ierr, code, k
    character(len=1024) :: msg, msg2
    character(len=10) :: short
    character(len=:), allocatable :: s
    character(len=64) :: strings(0:20)
    real(c_double) :: x(5), y(4)

    ! CPU context
    call pk_context_create(ctx, PKRYLOV_BACKEND_CPU, ierr)
    call expect(ierr == PKRYLOV_SUCCESS .and. c_associated(ctx%h), 'create a CPU context')
    call pk_context_get_backend(ctx, backend, ierr)
    call expect(ierr == 0 .and. backend == PKRYLOV_BACKEND_CPU, 'CPU context reports CPU')
    call pk_error_message(ctx, msg)
    call expect(msg == '', 'a fresh context has an empty message')

    ! AUTO resolves to CPU or CUDA, never AUTO
    call pk_context_create(ctx2, PKRYLOV_BACKEND_AUTO)
    call pk_context_get_backend(ctx2, backend)
    call expect(backend == PKRYLOV_BACKEND_CPU .or. backend == PKRYLOV_BACKEND_CUDA, 'AUTO resolves')
    call pk_context_destroy(ctx2)
    call expect(.not. c_associated(ctx2%h), 'destroy nulls the handle')

    ! CUDA: a context where the build and a device allow it, else BACKEND_UNAVAILABLE with a reason
    call pk_context_create(ctx2, PKRYLOV_BACKEND_CUDA, ierr)
    if (ierr == PKRYLOV_SUCCESS) then
        call pk_context_get_backend(ctx2, backend)
        call expect(backend == PKRYLOV_BACKEND_CUDA, 'CUDA context reports CUDA')
        call pk_context_destroy(ctx2)
    else
        call expect(ierr == PKRYLOV_ERR_BACKEND_UNAVAILABLE, 'CUDA unavailable: BACKEND_UNAVAILABLE')
        call expect(.not. c_associated(ctx2%h), 'no context after a failed create')
        call pk_error_message(ctx2, msg)
        call expect(index(msg, 'CUDA') > 0, 'the reason mentions CUDA: '//trim(msg))
    end if

    ! a bad backend: no context, the thread's message names the argument
    call pk_context_create(bad, 7_c_int32_t, ierr)
    call expect(ierr == PKRYLOV_ERR_INVALID_VALUE, 'bad backend: INVALID_VALUE')
    call expect(.not. c_associated(bad%h), 'bad backend: no context')
    call pk_error_message(bad, msg)
    call expect(index(msg, "'backend'") > 0, 'bad backend: message names backend: '//trim(msg))
    call pk_error_message(bad, short)
    call expect(short == msg(1:10), 'a short buffer gets the start of the message')

    ! calls on a null context
    call pk_context_get_backend(bad, backend, ierr)
    call expect(ierr == PKRYLOV_ERR_NULL_POINTER, 'get_backend on a null context: NULL_POINTER')
    call pk_error_message(bad, msg)
    call expect(index(msg, "'ctx'") > 0, 'null context: message names ctx: '//trim(msg))
    call pk_context_destroy(bad, ierr)
    call expect(ierr == PKRYLOV_SUCCESS, 'destroying a null context is a no-op')

    ! live objects keep the context alive
    call pk_operator_create_thinshell(ctx, A, 3, 3, 2)
    call pk_context_destroy(ctx, ierr)
    call expect(ierr == PKRYLOV_ERR_INVALID_STATE, 'destroy with a live operator: INVALID_STATE')
    call expect(c_associated(ctx%h), 'the failed destroy keeps the handle')
    call pk_error_message(ctx, msg)
    call expect(index(msg, 'not destroyed') > 0, 'the message says why: '//trim(msg))

    ! errors detected by the module are reported for their context only ...
    call pk_context_create(ctx2, PKRYLOV_BACKEND_CPU)
    x = 1
    y = 0
    call pk_operator_apply(A, x(1:4), y, ierr) ! the operator has 18 unknowns
    call expect(ierr == PKRYLOV_ERR_SIZE_MISMATCH, 'apply with 4 values: SIZE_MISMATCH')
    call pk_error_message(ctx, msg)
    call expect(index(msg, "'x'") > 0 .and. index(msg, 'pk_operator_apply') > 0, &
                'the module error names x: '//trim(msg))
    call pk_error_message(ctx2, msg2)
    call expect(msg2 == '', 'another context keeps its own (empty) message')
    ! ... and a newer error of the C library replaces them
    call pk_operator_destroy(A)
    call pk_operator_create_csr(ctx, A, 0, [1, 1], [integer(c_int32_t) ::], [real(c_double) ::], 1, ierr)
    call expect(ierr == PKRYLOV_ERR_INVALID_SIZE, 'csr with n = 0: INVALID_SIZE')
    call pk_error_message(ctx, msg)
    call expect(index(msg, "'n'") > 0 .and. index(msg, "'x'") == 0, 'the newer C error wins: '//trim(msg))
    call pk_context_destroy(ctx2)

    call pk_context_destroy(ctx, ierr)
    call expect(ierr == 0 .and. .not. c_associated(ctx%h), 'destroy an empty context')
    call pk_context_destroy(ctx, ierr)
    call expect(ierr == 0, 'destroying twice is a no-op')

    ! status strings: documented in pkrylov.h ("unknown status code" for others), one per code
    do code = 0, 20
        strings(code) = pk_error_string(-code)
        call expect(len_trim(strings(code)) > 0 .and. strings(code) /= 'unknown status code', &
                    'every status code has a description')
        do k = 0, code - 1
            call expect(strings(k) /= strings(code), 'the descriptions differ')
        end do
    end do
    s = pk_error_string(12345)
    call expect(s == 'unknown status code', 'unknown code: '//s)
    s = pk_error_string(int(PKRYLOV_ERR_NOT_FINITE))
    call expect(index(s, 'NaN') > 0, 'NOT_FINITE mentions NaN: '//s)
    ! reason names: the header's example, and distinct names
    s = pk_reason_string(int(PKRYLOV_CONVERGED_RTOL))
    call expect(s == 'converged_rtol', 'reason string of CONVERGED_RTOL: '//s)
    call expect(pk_reason_string(int(PKRYLOV_DIVERGED_MAX_ITERATIONS)) /= &
                pk_reason_string(int(PKRYLOV_CONVERGED_ATOL)), 'reason names differ')
    call expect(len(pk_reason_string(999)) > 0, 'an unknown reason still has a name')
    print '(a)', 't801-context-f: ok'

contains

    subroutine expect(cond, what)
        logical, intent(in) :: cond
        character(len=*), intent(in) :: what
        if (.not. cond) then
            write (error_unit, '(a)') 't801-context-f: FAILED: '//what
            error stop 1
        end if
    end subroutine expect

end program t801_context_f

!> t890-threads-f: pk_context_get_num_threads from Fortran. The default count against this process's affinity
!! mask read here (sched_getaffinity through bind(C), its bits counted) capped by OMP_NUM_THREADS (read here),
!! or 1 when the library has no OpenMP; the count set with pk_context_set_num_threads (3), 0 restoring the
!! default. Errors: more than PKRYLOV_MAX_THREADS (INVALID_VALUE naming 'n', the count unchanged), a null
!! context (NULL_POINTER). PKRYLOV_ERR_BUSY is -22 with its own description.
program t890_threads_f
    use, intrinsic :: iso_c_binding, only: c_int, c_int32_t, c_int64_t, c_size_t
    use, intrinsic :: iso_fortran_env, only: error_unit
    use pkrylov_mod
    use pk_test_f, only: pk_expect, pk_test_name
    implicit none
    interface
        !> int sched_getaffinity(pid_t pid, size_t cpusetsize, cpu_set_t *mask) (glibc)
        function sched_getaffinity(pid, size, mask) bind(C, name='sched_getaffinity') result(rc)
            import :: c_int, c_size_t, c_int64_t
            integer(c_int), value :: pid
            integer(c_size_t), value :: size
            integer(c_int64_t), intent(out) :: mask(*)
            integer(c_int) :: rc
        end function sched_getaffinity
    end interface
    type(pk_context) :: ctx, nullctx
    integer(c_int64_t) :: mask(16) ! cpu_set_t: 1024 bits
    integer(c_int32_t) :: n, def, expected
    integer :: ierr, cpus, cap, i, ios, elen
    character(len=64) :: env
    character(len=1024) :: msg

    pk_test_name = 't890-threads-f'
    ! ---- the default, computed here ----
    mask = 0
    call pk_expect(sched_getaffinity(0_c_int, int(8*size(mask), c_size_t), mask) == 0, 'sched_getaffinity')
    cpus = 0
    do i = 1, size(mask)
        cpus = cpus + popcnt(mask(i))
    end do
    call pk_expect(cpus >= 1, 'CPUs in the mask')
    cap = 0
    call get_environment_variable('OMP_NUM_THREADS', env, elen)
    if (elen > 0) then
        i = scan(env, ',') ! a list "4,2": the first level's count
        if (i > 0) env = env(:i - 1)
        read (env, *, iostat=ios) cap
        if (ios /= 0) cap = 0
    end if
#ifdef PK_TEST_HAVE_OPENMP
    expected = int(cpus, c_int32_t)
    if (cap > 0 .and. cap < cpus) expected = int(cap, c_int32_t)
#else
    expected = 1
#endif
    call pk_context_create(ctx, PKRYLOV_BACKEND_CPU)
    call pk_context_get_num_threads(ctx, def, ierr)
    call pk_expect(ierr == 0, 'get_num_threads')
    if (def /= expected) then
        write (error_unit, '(a,i0,a,i0,a,i0,a)') 't890-threads-f: FAILED: default ', def, &
            ' threads, expected ', expected, ' (', cpus, ' CPUs in the mask)'
        error stop 1
    end if

    ! ---- the count set ----
    call pk_context_set_num_threads(ctx, 3_c_int32_t)
    call pk_context_get_num_threads(ctx, n)
#ifdef PK_TEST_HAVE_OPENMP
    call pk_expect(n == 3, 'set 3, get 3')
#else
    call pk_expect(n == 1, 'without OpenMP: 1')
#endif
    call pk_context_set_num_threads(ctx, 0_c_int32_t)
    call pk_context_get_num_threads(ctx, n)
    call pk_expect(n == def, '0 restores the default')

    ! ---- errors ----
    call pk_context_set_num_threads(ctx, 2_c_int32_t)
    call pk_context_set_num_threads(ctx, PKRYLOV_MAX_THREADS + 1_c_int32_t, ierr)
    call pk_expect(ierr == PKRYLOV_ERR_INVALID_VALUE, 'more than PKRYLOV_MAX_THREADS: INVALID_VALUE')
    call pk_error_message(ctx, msg)
    call pk_expect(index(msg, "'n'") > 0, 'the message names n: '//trim(msg))
    call pk_context_get_num_threads(ctx, n)
#ifdef PK_TEST_HAVE_OPENMP
    call pk_expect(n == 2, 'a refused count leaves the count')
#endif
    call pk_context_get_num_threads(nullctx, n, ierr)
    call pk_expect(ierr == PKRYLOV_ERR_NULL_POINTER, 'get_num_threads on a null context: NULL_POINTER')
    call pk_expect(PKRYLOV_ERR_BUSY == -22, 'PKRYLOV_ERR_BUSY = -22')
    call pk_expect(index(pk_error_string(PKRYLOV_ERR_BUSY), 'in use') > 0, &
                'BUSY: '//pk_error_string(PKRYLOV_ERR_BUSY))
    call pk_expect(pk_error_string(PKRYLOV_ERR_BUSY) /= pk_error_string(PKRYLOV_ERR_CALLBACK), &
                'BUSY has its own text')
    call pk_context_destroy(ctx)

end program t890_threads_f

!> t832-cuda-device-f: the CUDA backend through pkrylov_mod, with device arrays as an OpenACC or CUDA
!! Fortran model passes them (type(c_ptr) device addresses; here allocated with cudaMalloc through
!! interfaces written in this test). Skipped (77) when no CUDA context can be created.
!! Checks: pk_solver_solve_device on device arrays gives the same x as pk_solver_solve on host arrays
!! (which the library copies to the device and back); that x solves the system: its residual, with A
!! applied by an operator of a CPU context (the other backend), meets the tolerance; real(4) host arrays
!! give the real(8) solution rounded; host addresses passed as device arrays are PKRYLOV_ERR_MEMTYPE.
program t832_cuda_device_f
    use, intrinsic :: iso_c_binding, only: c_double, c_float, c_int, c_int32_t, c_ptr, c_null_ptr, c_loc, &
                                           c_size_t, c_sizeof
    use, intrinsic :: iso_fortran_env, only: error_unit
    use pkrylov_mod
    implicit none
    interface
        function cuda_malloc(p, nbytes) bind(C, name="cudaMalloc")
            import :: c_ptr, c_size_t, c_int
            type(c_ptr), intent(out) :: p
            integer(c_size_t), value :: nbytes
            integer(c_int) :: cuda_malloc
        end function cuda_malloc
        function cuda_memcpy(dst, src, nbytes, kind) bind(C, name="cudaMemcpy")
            import :: c_ptr, c_size_t, c_int
            type(c_ptr), value :: dst, src
            integer(c_size_t), value :: nbytes
            integer(c_int), value :: kind
            integer(c_int) :: cuda_memcpy
        end function cuda_memcpy
        function cuda_free(p) bind(C, name="cudaFree")
            import :: c_ptr, c_int
            type(c_ptr), value :: p
            integer(c_int) :: cuda_free
        end function cuda_free
    end interface
    integer(c_int), parameter :: to_device = 1, to_host = 2 ! cudaMemcpyHostToDevice, DeviceToHost
    integer(c_int32_t), parameter :: nx = 16, ny = 16, nz = 8, n = nx*ny*nz
    real(c_double), parameter :: rtol = 1e-8_c_double
    type(pk_context) :: ctx, cpu
    type(pk_operator) :: A, Acpu
    type(pk_precond) :: M
    type(pk_solver) :: s
    type(pkrylov_result) :: res
    real(c_double), target :: b(n), xh(n), xd(n), ax(n)
    real(c_float) :: b4(n), x4(n)
    type(c_ptr) :: db, dx
    integer(c_size_t) :: nbytes
    integer(c_int32_t) :: backend
    integer :: ierr, i

    call pk_context_create(ctx, PKRYLOV_BACKEND_CUDA, ierr)
    if (ierr /= PKRYLOV_SUCCESS) then
        print '(a)', 't832-cuda-device-f: skipped (no CUDA context)'
        stop 77
    end if
    call pk_context_get_backend(ctx, backend)
    call expect(backend == PKRYLOV_BACKEND_CUDA, 'a CUDA context')
    call pk_operator_create_thinshell(ctx, A, nx, ny, nz)
    call pk_precond_create(ctx, M, A, PKRYLOV_PRECOND_COLUMN)
    call pk_solver_create(ctx, s, PKRYLOV_SOLVER_PIPECG, A, M)
    call pk_solver_set_tolerances(s, rtol, 0.0_c_double)
    b = [(sin(0.01_c_double*i) + 0.3_c_double, i=1, n)]

    ! host arrays
    xh = 0
    call pk_solver_solve(s, b, xh)
    call pk_solver_get_result(s, res)
    call expect(res%converged == 1, 'host-array solve converges')

    ! device arrays
    nbytes = int(n, c_size_t)*c_sizeof(b(1))
    call expect(cuda_malloc(db, nbytes) == 0 .and. cuda_malloc(dx, nbytes) == 0, 'cudaMalloc')
    xd = 0
    call expect(cuda_memcpy(db, c_loc(b), nbytes, to_device) == 0, 'copy b to the device')
    call expect(cuda_memcpy(dx, c_loc(xd), nbytes, to_device) == 0, 'copy x to the device')
    call pk_solver_solve_device(s, db, dx, ierr)
    call expect(ierr == 0, 'solve_device')
    call expect(cuda_memcpy(c_loc(xd), dx, nbytes, to_host) == 0, 'copy x to the host')
    call pk_solver_get_result(s, res)
    call expect(res%converged == 1, 'device-array solve converges')
    call expect(all(xd == xh), 'device arrays give the same x as host arrays')

    ! the residual with the CPU backend's operator
    call pk_context_create(cpu, PKRYLOV_BACKEND_CPU)
    call pk_operator_create_thinshell(cpu, Acpu, nx, ny, nz)
    call pk_operator_apply(Acpu, xd, ax)
    call expect(norm2(b - ax) <= 1.001_c_double*rtol*norm2(b), 'residual on the CPU backend')

    ! real(4) host arrays
    b4 = real(b, c_float)
    b = real(b4, c_double)
    xh = 0
    call pk_solver_solve(s, b, xh)
    x4 = 0
    call pk_solver_solve(s, b4, x4)
    call expect(all(x4 == real(xh, c_float)), 'real(4) x = real(8) x rounded')

    ! host addresses where device arrays are expected
    call pk_solver_solve_device(s, c_loc(b), c_loc(xd), ierr)
    call expect(ierr == PKRYLOV_ERR_MEMTYPE, 'host addresses as device arrays: MEMTYPE')
    call pk_solver_solve_device(s, c_null_ptr, dx, ierr)
    call expect(ierr == PKRYLOV_ERR_NULL_POINTER, 'null device address: NULL_POINTER')

    call expect(cuda_free(db) == 0 .and. cuda_free(dx) == 0, 'cudaFree')
    call pk_operator_destroy(Acpu)
    call pk_context_destroy(cpu)
    call pk_solver_destroy(s)
    call pk_precond_destroy(M)
    call pk_operator_destroy(A)
    call pk_context_destroy(ctx)
    print '(a)', 't832-cuda-device-f: ok'

contains

    subroutine expect(cond, what)
        logical, intent(in) :: cond
        character(len=*), intent(in) :: what
        if (.not. cond) then
            write (error_unit, '(a)') 't832-cuda-device-f: FAILED: '//what
            error stop 1
        end if
    end subroutine expect

end program t832_cuda_device_f

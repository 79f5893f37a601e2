!> t833-cuda-rci-device-f: the handle-based reverse communication with device arrays from Fortran
!! (pk_rci_start_device, pk_rci_step_device), the requests answered on the device through
!! pk_operator_apply_device and pk_precond_apply_device, as an OpenACC or CUDA Fortran model would answer
!! them with its own kernels. Skipped (77) when no CUDA context can be created.
!! Checks, for CG and pipelined CG with the column preconditioner, with the library summing and with the
!! caller summing the partials (host memory): the requests hand device addresses (a host address would
!! make the device applies fail with PKRYLOV_ERR_MEMTYPE); the iterations equal those of the direct
!! device solve (pk_solver_solve_device) of the same system; the solution agrees with it to 1e-12 and its
!! residual, recomputed by an operator of a CPU context, meets the tolerance; a host array passed to
!! pk_rci_start_device is PKRYLOV_ERR_MEMTYPE.
program t833_cuda_rci_device_f
    use, intrinsic :: iso_c_binding, only: c_double, c_int, c_int32_t, c_int64_t, c_ptr, c_null_ptr, c_loc, &
                                           c_size_t, c_sizeof, c_associated
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
    integer(c_int32_t), parameter :: nx = 12, ny = 10, nz = 9, n = nx*ny*nz
    real(c_double), parameter :: rtol = 1e-9_c_double
    type(pk_context) :: ctx, cpu
    type(pk_operator) :: A, Acpu
    type(pk_precond) :: M
    type(pk_solver) :: s
    type(pk_rci) :: r
    type(pkrylov_result) :: res, rres
    real(c_double), target :: b(n), xs(n), xr(n), ax(n)
    real(c_double), pointer :: partials(:)
    type(c_ptr) :: db, dxs, dxr, pin, pout
    integer(c_size_t) :: nbytes
    integer(c_int32_t) :: request, types(2), t, byc
    integer :: ierr, i, nmat, nprec

    call pk_context_create(ctx, PKRYLOV_BACKEND_CUDA, ierr)
    if (ierr /= PKRYLOV_SUCCESS) then
        print '(a)', 't833-cuda-rci-device-f: skipped (no CUDA context)'
        stop 77
    end if
    call pk_context_create(cpu, PKRYLOV_BACKEND_CPU)
    call pk_operator_create_thinshell(ctx, A, nx, ny, nz)
    call pk_operator_create_thinshell(cpu, Acpu, nx, ny, nz)
    call pk_precond_create(ctx, M, A, PKRYLOV_PRECOND_COLUMN)
    b = [(cos(0.37_c_double*i) + 0.2_c_double, i=1, n)]
    nbytes = int(n, c_size_t)*c_sizeof(b(1))
    call expect(cuda_malloc(db, nbytes) == 0 .and. cuda_malloc(dxs, nbytes) == 0 .and. &
                cuda_malloc(dxr, nbytes) == 0, 'cudaMalloc')
    call expect(cuda_memcpy(db, c_loc(b), nbytes, to_device) == 0, 'copy b to the device')
    types = [PKRYLOV_SOLVER_CG, PKRYLOV_SOLVER_PIPECG]

    do t = 1, 2
        ! the reference: the direct solve on the same device arrays
        call pk_solver_create(ctx, s, types(t), A, M)
        call pk_solver_set_tolerances(s, rtol, 0.0_c_double)
        xs = 0
        call expect(cuda_memcpy(dxs, c_loc(xs), nbytes, to_device) == 0, 'zero x')
        call pk_solver_solve_device(s, db, dxs)
        call pk_solver_get_result(s, res)
        call expect(res%converged == 1, 'direct device solve converges')
        call expect(cuda_memcpy(c_loc(xs), dxs, nbytes, to_host) == 0, 'copy x back')
        call pk_solver_destroy(s)

        do byc = 0, 1
            call pk_rci_create(ctx, r, types(t), int(n, c_int64_t), 1_c_int32_t, byc)
            call pk_rci_set_tolerances(r, rtol, 0.0_c_double)
            call pk_rci_start_device(r, db, dxr, 0_c_int32_t)
            nmat = 0
            nprec = 0
            do
                call pk_rci_step_device(r, request, pin, pout, partials)
                select case (request)
                case (PKRYLOV_RCI_MATVEC)
                    call expect(c_associated(pin) .and. c_associated(pout), 'MATVEC hands two addresses')
                    call pk_operator_apply_device(A, pin, pout, ierr)
                    call expect(ierr == 0, 'MATVEC on device addresses')
                    nmat = nmat + 1
                case (PKRYLOV_RCI_PRECOND)
                    call pk_precond_apply_device(M, pin, pout, ierr)
                    call expect(ierr == 0, 'PRECOND on device addresses')
                    nprec = nprec + 1
                case (PKRYLOV_RCI_REDUCE_START)
                    call expect(byc == 1 .and. associated(partials), 'REDUCE_START only when the caller sums')
                    call expect(all(partials == partials), 'partials readable on the host')
                case (PKRYLOV_RCI_REDUCE_WAIT)
                    call expect(byc == 1, 'REDUCE_WAIT only when the caller sums') ! one rank: sums as they are
                case (PKRYLOV_RCI_DONE)
                    exit
                case default
                    call expect(.false., 'unknown request')
                end select
            end do
            call pk_rci_get_result(r, rres)
            call expect(rres%converged == 1, 'reverse-communication device solve converges')
            call expect(rres%iterations == res%iterations, 'same iterations as the direct device solve')
            call expect(nmat >= rres%iterations .and. nprec >= rres%iterations, 'a matvec and a precond per it')
            call expect(cuda_memcpy(c_loc(xr), dxr, nbytes, to_host) == 0, 'copy x back')
            call expect(maxval(abs(xr - xs)) <= 1e-12_c_double*maxval(abs(xs)), 'same x as the direct solve')
            call pk_operator_apply(Acpu, xr, ax)
            call expect(norm2(b - ax) <= 1.001_c_double*rtol*norm2(b), 'residual on the CPU backend')
            call pk_rci_destroy(r)
        end do
    end do

    ! a host array where a device array is expected
    call pk_rci_create(ctx, r, PKRYLOV_SOLVER_CG, int(n, c_int64_t), 1_c_int32_t, 0_c_int32_t)
    call pk_rci_start_device(r, c_loc(b), dxr, 0_c_int32_t, ierr)
    call expect(ierr == PKRYLOV_ERR_MEMTYPE, 'host b as a device array: MEMTYPE')
    call pk_rci_destroy(r)

    call expect(cuda_free(db) == 0 .and. cuda_free(dxs) == 0 .and. cuda_free(dxr) == 0, 'cudaFree')
    call pk_precond_destroy(M)
    call pk_operator_destroy(A)
    call pk_operator_destroy(Acpu)
    call pk_context_destroy(cpu)
    call pk_context_destroy(ctx)
    print '(a)', 't833-cuda-rci-device-f: ok'

contains

    subroutine expect(cond, what)
        logical, intent(in) :: cond
        character(len=*), intent(in) :: what
        if (.not. cond) then
            write (error_unit, '(a)') 't833-cuda-rci-device-f: FAILED: '//what
            error stop 1
        end if
    end subroutine expect

end program t833_cuda_rci_device_f

!> pkrylov_mod: the Fortran interface of pkrylov (Krylov pressure solvers for weather, climate and
!> ocean models).
!!
!! One module, ISO_C_BINDING throughout, in two layers:
!! - a private raw layer of bind(C) interfaces, generated from include/pkrylov.h by
!!   tools/gen_fortran_interfaces.c into pkrylov_c_interfaces.inc (the test
!!   t800-fortran:interfaces_up_to_date regenerates it and fails when it drifts from the header); the
!!   C constants (PKRYLOV_*) and the bind(C) types pkrylov_result and pkrylov_thinshell_params come
!!   from the same file and are public;
!! - public wrappers (pk_*), with `intent` on every argument and an optional `ierr` last: when ierr is
!!   present it receives the status (PKRYLOV_SUCCESS = 0 or a negative PKRYLOV_ERR_* code) and the
!!   message is available from pk_error_message; when it is absent, a failure ends the program with
!!   `error stop` and the message.
!!
!! Life cycle (plan once, solve every time step):
!!
!!     type(pk_context) :: ctx; type(pk_operator) :: A; type(pk_precond) :: M; type(pk_solver) :: s
!!     call pk_context_create(ctx, PKRYLOV_BACKEND_AUTO)
!!     call pk_operator_create_stencil7(ctx, A, nx, ny, nz, aW, aS, aV, aC)
!!     call pk_precond_create(ctx, M, A, PKRYLOV_PRECOND_COLUMN)
!!     call pk_solver_create(ctx, s, PKRYLOV_SOLVER_PIPECG, A, M)
!!     do step = 1, nsteps
!!         call pk_solver_solve(s, b, x)
!!     end do
!!     call pk_solver_destroy(s); call pk_precond_destroy(M); call pk_operator_destroy(A)
!!     call pk_context_destroy(ctx)
!!
!! Arrays: host arrays are contiguous (a non-contiguous actual argument is copied in and out by the
!! compiler); vectors may have any rank and are checked against the operator size (a mismatch is
!! PKRYLOV_ERR_SIZE_MISMATCH, detected here, before the C library is called). real(c_float) arrays are
!! converted to real(c_double) temporaries and back. The MITgcm halo layout
!! (1-OLx:sNx+OLx, 1-OLy:sNy+OLy, Nr) is handled by copying the interior.
!!
!! Errors detected by this module (sizes and shapes the C interface cannot see) are recorded per
!! context and thread, so that pk_error_message returns them like the C library's own messages.
!!
!! Models whose PCG takes matvec/precond routines: pk_pcg is a drop-in solve with bind(C) routines of
!! the interface pk_apply_callback (see its comment); pk_operator_create_user and pk_precond_create_user
!! make long-lived handles from the same routines (CPU backend).
module pkrylov_mod
    use, intrinsic :: iso_c_binding
    implicit none
    private

    include 'pkrylov_c_interfaces.inc'

    !> Size of the message buffers (the C library keeps 1024 characters).
    integer, parameter :: MSG_LEN = 1024

    !> y = A x (matvec) or y = M^-1 x (precond): the interface of the model routines given to pk_pcg,
    !> pk_operator_create_user and pk_precond_create_user. ctx_ptr is the pointer given there (the
    !> model's own data; c_null_ptr when none was given), n the number of unknowns. The library calls the
    !> routine from the thread that called the solve, outside OpenMP parallel regions, with distinct
    !> arrays it owns (do not keep pointers to them). To abort the solve, call pk_callback_abort and
    !> return: the solve then fails with PKRYLOV_ERR_CALLBACK.
    abstract interface
        subroutine pk_apply_callback(ctx_ptr, n, x, y) bind(C)
            import :: c_ptr, c_int64_t, c_double
            implicit none
            type(c_ptr), value :: ctx_ptr
            integer(c_int64_t), value :: n
            real(c_double), intent(in) :: x(n)
            real(c_double), intent(out) :: y(n)
        end subroutine pk_apply_callback
    end interface
    public :: pk_apply_callback

    !> The model's halo exchange of width one for pk_operator_create_stencil7_halo(..., exchange=...):
    !> the library has filled the interior xh(1:nx, 1:ny, :) and set the halo to 0; the routine fills
    !> xh(0,:,:), xh(nx+1,:,:), xh(:,0,:), xh(:,ny+1,:) as the model's exchange does (periodic wrap,
    !> neighbouring tiles over MPI; leave 0 at a wall; the corners are not read). ctx_ptr is the pointer
    !> given at creation (c_null_ptr when none). Called once per product A x, from the thread that
    !> called the solve, outside OpenMP parallel regions. To abort, call pk_callback_abort and return.
    abstract interface
        subroutine pk_halo_callback(ctx_ptr, nx, ny, nz, xh) bind(C)
            import :: c_ptr, c_int32_t, c_double
            implicit none
            type(c_ptr), value :: ctx_ptr
            integer(c_int32_t), value :: nx, ny, nz
            real(c_double), intent(inout) :: xh(0:nx + 1, 0:ny + 1, nz)
        end subroutine pk_halo_callback
    end interface
    public :: pk_halo_callback

    !> Solver monitor for pk_solver_set_monitor: a bind(C) function called after every convergence test
    !> with the iteration (0 = initial residual) and the recurrence residual 2-norm; it returns 0 to
    !> continue, nonzero to stop the solve (reason PKRYLOV_STOPPED_BY_MONITOR). user is passed unchanged.
    abstract interface
        function pk_monitor_callback(user, iteration, residual_norm) bind(C) &
            result(stop_flag)
            import :: c_ptr, c_int32_t, c_double, c_int
            implicit none
            type(c_ptr), value :: user
            integer(c_int32_t), value :: iteration
            real(c_double), value :: residual_norm
            integer(c_int) :: stop_flag
        end function pk_monitor_callback
    end interface
    public :: pk_monitor_callback

    !> What the C library's void *user points to for a routine of the pk_apply_callback interface: the
    !> routine and the model's pointer (callback_trampoline calls the one with the other).
    type :: callback_rec
        procedure(pk_apply_callback), pointer, nopass :: fn => null()
        type(c_ptr) :: data = c_null_ptr
    end type callback_rec

    !> What the C library's void *user points to for a halo exchange (halo_trampoline calls fn with data).
    type :: halo_rec
        procedure(pk_halo_callback), pointer, nopass :: fn => null()
        type(c_ptr) :: data = c_null_ptr
    end type halo_rec

    !> A context: the backend, and the message of the last error raised through it.
    type, public :: pk_context
        type(c_ptr) :: h = c_null_ptr !! the C handle (pkrylov_context)
    end type pk_context

    !> An operator A (CSR, column stencil, thin shell), owned by a context.
    type, public :: pk_operator
        type(c_ptr) :: h = c_null_ptr !! the C handle (pkrylov_operator)
        type(c_ptr), private :: ctx = c_null_ptr !! its context (for the error messages)
        type(callback_rec), pointer, private :: cb => null() !! user operator: its routine (freed by destroy)
        type(halo_rec), pointer, private :: hx => null() !! halo-exchange stencil: its exchange (freed by
                                                         !! destroy)
    end type pk_operator

    !> A preconditioner M ~ A, applied as M^-1.
    type, public :: pk_precond
        type(c_ptr) :: h = c_null_ptr !! the C handle (pkrylov_precond)
        type(c_ptr), private :: ctx = c_null_ptr
        type(callback_rec), pointer, private :: cb => null() !! user preconditioner: its routine
        integer(c_int64_t), private :: n = 0 !! size (checked against the vectors of pk_precond_apply)
    end type pk_precond

    !> A Krylov solver for one operator, reused for many right-hand sides.
    type, public :: pk_solver
        type(c_ptr) :: h = c_null_ptr !! the C handle (pkrylov_solver)
        type(c_ptr), private :: ctx = c_null_ptr
        integer(c_int64_t), private :: n = 0 !! size of the operator (checked against the vectors)
    end type pk_solver

    !> A tiled grid: the model's tiles, halos and their connectivity (pk_grid_create*).
    type, public :: pk_grid
        type(c_ptr) :: h = c_null_ptr !! the C handle (pkrylov_grid)
        type(c_ptr), private :: ctx = c_null_ptr
    end type pk_grid

    !> A handle-based reverse-communication solve (pkrylov_rci).
    type, public :: pk_rci
        type(c_ptr) :: h = c_null_ptr !! the C handle (pkrylov_rci)
        type(c_ptr), private :: ctx = c_null_ptr
        integer(c_int64_t), private :: n = 0
    end type pk_rci

    public :: pk_context_create, pk_context_destroy, pk_context_get_backend
    public :: pk_error_message, pk_error_string, pk_reason_string
    public :: pk_operator_create_csr, pk_operator_create_stencil7, pk_operator_create_stencil7_halo
    public :: pk_operator_create_thinshell, pk_operator_apply, pk_operator_destroy
    public :: pk_thinshell_stencil_coefficients, pk_operator_create_convdiff
    public :: pk_precond_create, pk_precond_destroy
    public :: pk_precond_create_column_factors, pk_precond_create_column_factors_halo
    public :: pk_solver_create, pk_solver_set_tolerances, pk_solver_set_max_iterations
    public :: pk_solver_set_initial_guess_nonzero, pk_solver_solve, pk_solver_solve_halo
    public :: pk_solver_solve_device, pk_solver_get_result, pk_solver_destroy
    ! model routines (callbacks): the drop-in PCG and user operators/preconditioners
    public :: pk_pcg, pk_operator_create_user, pk_precond_create_user, pk_callback_abort
    ! the MKL-compatible reverse-communication CG (pkrylov_mkl_rci.inc, in the contains part)
    public :: pk_dcg_init, pk_dcg_check, pk_dcg, pk_dcg_get
    ! the MKL-compatible reverse-communication FGMRES (pkrylov_mkl_fgmres.inc, in the contains part)
    public :: pk_dfgmres_init, pk_dfgmres_check, pk_dfgmres, pk_dfgmres_get
    ! handle-based reverse communication (all solver types, caller-owned reductions)
    public :: pk_rci_create, pk_rci_start, pk_rci_step, pk_rci_get_result, pk_rci_destroy
    public :: pk_rci_set_tolerances, pk_rci_set_max_iterations, pk_rci_set_residual_replacement
    public :: pk_rci_set_restart, pk_rci_set_step, pk_rci_start_device, pk_rci_step_device
    public :: pk_operator_apply_device, pk_precond_apply_device
    ! solver settings and history, threads, operator export, Matrix Market, preconditioner apply/info
    public :: pk_solver_set_true_residual_interval, pk_solver_set_residual_replacement
    public :: pk_solver_set_stop_rule, pk_solver_set_min_residual
    public :: pk_solver_set_stagnation_window, pk_solver_set_precision, pk_solver_set_sync_interval
    public :: pk_solver_set_restart, pk_solver_set_step
    public :: pk_solver_set_history, pk_solver_get_history, pk_solver_set_monitor
    public :: pk_context_set_num_threads, pk_context_get_num_threads, pk_context_clear_error, pk_get_version
    public :: pk_has_cuda, pk_has_nccl, pk_has_openmp, pk_context_describe
    ! options (tuning switches by name; PKRYLOV_OPTIONS is read at pk_context_create)
    public :: pk_context_set_option, pk_context_set_options, pk_context_get_option
    public :: pk_solver_set_option, pk_solver_get_option, pk_option_count, pk_option_describe
    public :: pk_operator_get_info, pk_operator_get_csr, pk_operator_create_from_mtx, pk_operator_write_mtx
    public :: pk_mtx_read_vector, pk_mtx_write_vector, pk_precond_apply, pk_precond_get_info
    ! distributed solves (MPI): the module itself needs no MPI (handles are integers); pk_context_set_comm is
    ! implemented in the library pkrylov_mpi_fortran (a submodule), which links MPI
    ! for that submodule only (not for models): this module's handling of a C status and of an error found
    ! in Fortran (gfortran gives the private check and raise no symbol another library can reach)
    public :: pk_internal_check, pk_internal_raise
    public :: pk_has_mpi, pk_context_set_comm, pk_context_get_rank_info, pk_context_set_reproducible
    public :: pk_operator_create_thinshell_dist, pk_operator_create_stencil7_dist, pk_operator_create_csr_dist
    public :: pk_operator_get_dist_info, pk_operator_get_row_block, pk_operator_gather, pk_operator_scatter
    ! tiled grids (pkrylov_grid.inc, in the contains part)
    public :: pk_grid_connect_rect, pk_grid_connect_cubesphere, pk_grid_create, pk_grid_create_rect
    public :: pk_grid_create_cubesphere, pk_grid_destroy, pk_operator_create_grid_stencil
    public :: pk_operator_create_grid_5pt, pk_operator_update_grid_stencil, pk_operator_update_grid_5pt
    public :: pk_precond_create_ainv, pk_precond_create_ainv_coefficients, pk_precond_update
    public :: pk_precond_update_ainv_coefficients, pk_solver_solve_grid, pk_solver_solve_grid_device

    !> The column stencil (Nr levels) on a grid from the model's halo'd multi-tile arrays (real(c_double) or
    !> real(c_float); mask integer, 0 = dry, or logical, .false. = dry).
    interface pk_operator_create_grid_stencil
        module procedure grid_stencil_d, grid_stencil_d_lmask, grid_stencil_s, grid_stencil_s_lmask
    end interface pk_operator_create_grid_stencil

    !> The 5-point operator of the 2-D free-surface solve on a grid (aW2d, aS2d, aC2d; mask as above).
    interface pk_operator_create_grid_5pt
        module procedure grid_5pt_d, grid_5pt_d_lmask, grid_5pt_s, grid_5pt_s_lmask
    end interface pk_operator_create_grid_5pt

    !> Solve on the model's halo'd multi-tile arrays (real(c_double) or real(c_float)), in place.
    interface pk_solver_solve_grid
        module procedure solver_solve_grid_d, solver_solve_grid_s
    end interface pk_solver_solve_grid

    !> Give a context a communicator (collective over it; before any object is created from ctx): comm is
    !> the Fortran MPI handle, an integer from `use mpi` or mpif.h (MPI_COMM_WORLD, a split communicator),
    !> or, with mpi_f08, comm%MPI_VAL of a type(MPI_Comm). Converted with MPI_Comm_f2c in the C library
    !> (pkrylov_context_set_comm_f); default integer or integer(c_int64_t) (a model built with -fdefault-
    !> integer-8). The two procedures are in a submodule in the library pkrylov_mpi_fortran
    !> (pkrylov::pkrylov_mpi_fortran, `pkg-config pkrylov-mpi-fortran`, `pkrylov-config --flibs-mpi`), which
    !> links libpkrylov_mpi and MPI: a model that calls pk_context_set_comm links it, a serial model does
    !> not and gets no MPI (without it the link fails naming context_set_comm_i4/_i8). A build without MPI
    !> has them in pkrylov_fortran, answering PKRYLOV_ERR_UNSUPPORTED.
    interface pk_context_set_comm
        !> pk_context_set_comm with a default-integer handle (`use mpi`, mpif.h, or comm%MPI_VAL of mpi_f08).
        module subroutine context_set_comm_i4(ctx, comm, ierr)
            type(pk_context), intent(in) :: ctx !! the context (no object created from it yet)
            integer(c_int32_t), intent(in) :: comm !! Fortran MPI communicator handle
            integer, intent(out), optional :: ierr !! status
        end subroutine context_set_comm_i4
        !> pk_context_set_comm with an integer(c_int64_t) handle (models built with 8-byte default integers).
        module subroutine context_set_comm_i8(ctx, comm, ierr)
            type(pk_context), intent(in) :: ctx !! the context (no object created from it yet)
            integer(c_int64_t), intent(in) :: comm !! Fortran MPI communicator handle
            integer, intent(out), optional :: ierr !! status
        end subroutine context_set_comm_i8
    end interface pk_context_set_comm

    !> Square CSR matrix from 32-bit (n, rowptr, colind of kind c_int32_t) or 64-bit indices (rowptr,
    !> colind of kind c_int64_t, n of kind c_int64_t or c_int32_t): pkrylov_operator_create_csr or _csr64.
    interface pk_operator_create_csr
        module procedure operator_create_csr32, operator_create_csr64, operator_create_csr64_n4
    end interface pk_operator_create_csr

    !> Column stencil from (nx,ny,nz) arrays: real(c_double) or real(c_float) coefficients, optional
    !> mask integer (0 = dry) or logical (.false. = dry).
    interface pk_operator_create_stencil7
        module procedure stencil7_d, stencil7_d_lmask, stencil7_s, stencil7_s_lmask
    end interface pk_operator_create_stencil7

    !> Column stencil from arrays in the MITgcm layout (1-OLx:sNx+OLx, 1-OLy:sNy+OLy, Nr); the
    !> interior is used, the halos are ignored.
    interface pk_operator_create_stencil7_halo
        module procedure stencil7_halo_d, stencil7_halo_d_lmask, stencil7_halo_s, stencil7_halo_s_lmask
    end interface pk_operator_create_stencil7_halo

    !> Solve A x = b for host arrays of any rank, real(c_double) or real(c_float).
    interface pk_solver_solve
        module procedure solver_solve_d, solver_solve_s
    end interface pk_solver_solve

    !> Solve A x = b for arrays in the MITgcm halo layout; the halos of x are left unchanged.
    interface pk_solver_solve_halo
        module procedure solver_solve_halo_d, solver_solve_halo_s
    end interface pk_solver_solve_halo

    !> Drop-in preconditioned CG with the model's matvec and precond routines:
    !>     call pk_pcg(n, x, b, matvec, precond, rtol, maxit, iters, relres, info [, ctx_ptr])
    !> n of kind c_int32_t (default integer) or c_int64_t.
    interface pk_pcg
        module procedure pcg_n4, pcg_n8
    end interface pk_pcg

    !> A user operator (y = A x by a model routine), n of kind c_int32_t or c_int64_t.
    interface pk_operator_create_user
        module procedure operator_create_user_n4, operator_create_user_n8
    end interface pk_operator_create_user

    !> A user preconditioner (y = M^-1 x by a model routine), n of kind c_int32_t or c_int64_t.
    interface pk_precond_create_user
        module procedure precond_create_user_n4, precond_create_user_n8
    end interface pk_precond_create_user

    !> strlen from the C library, to copy C strings.
    interface
        function c_strlen(s) bind(C, name="strlen")
            import :: c_ptr, c_size_t
            implicit none
            type(c_ptr), value :: s
            integer(c_size_t) :: c_strlen
        end function c_strlen
    end interface

    ! The last error detected by this module (not by the C library), per thread: its context (null
    ! for calls without one), code and message. A later C error on the same context replaces it.
    logical, save :: ferr_set = .false.
    type(c_ptr), save :: ferr_ctx = c_null_ptr
    character(len=MSG_LEN), save :: ferr_msg = ''
    !$omp threadprivate(ferr_set, ferr_ctx, ferr_msg)

    ! Set by pk_callback_abort inside a model routine, read by callback_trampoline (per thread: the
    ! routine runs on the thread that called the solve).
    logical, save :: cb_abort = .false.
    !$omp threadprivate(cb_abort)

    ! Stand-in for arrays of zero size (c_loc needs a nonzero size); the C library reads none of it.
    integer(c_int32_t), target, save :: dummy_i(1) = 0
    real(c_double), target, save :: dummy_d(1) = 0

contains

    ! ---------------------------------------------------------------------------------------------
    ! Error handling and strings (private helpers)

    !> A Fortran string from a NUL-terminated C string (empty for a null pointer).
    function c_to_f_string(p) result(str)
        type(c_ptr), intent(in) :: p
        character(len=:), allocatable :: str
        character(kind=c_char), pointer :: chars(:)
        integer :: i, n
        if (.not. c_associated(p)) then
            str = ''
            return
        end if
        n = int(c_strlen(p))
        allocate (character(len=n) :: str)
        if (n == 0) return
        call c_f_pointer(p, chars, [n])
        do i = 1, n
            str(i:i) = chars(i)
        end do
    end function c_to_f_string

    !> An integer as text.
    function itoa(i) result(str)
        integer(c_int64_t), intent(in) :: i
        character(len=:), allocatable :: str
        character(len=24) :: buf
        write (buf, '(i0)') i
        str = trim(buf)
    end function itoa

    !> The message of the last error raised through context ctx (or without a context when ctx is
    !> null): the one recorded by this module when it is the newer, else the C library's.
    function last_message(ctx) result(msg)
        type(c_ptr), intent(in) :: ctx
        character(len=:), allocatable :: msg
        character(kind=c_char), target :: buf(MSG_LEN)
        integer(c_int) :: rc
        integer :: i
        if (ferr_set) then
            if (c_associated(ctx) .eqv. c_associated(ferr_ctx)) then
                if (.not. c_associated(ctx)) then
                    msg = trim(ferr_msg)
                    return
                else if (c_associated(ctx, ferr_ctx)) then
                    msg = trim(ferr_msg)
                    return
                end if
            end if
        end if
        if (.not. c_associated(ctx)) then
            msg = c_to_f_string(pkrylov_last_error_message())
            return
        end if
        rc = pkrylov_context_get_error_message(ctx, c_loc(buf), int(MSG_LEN, c_int32_t))
        if (rc /= PKRYLOV_SUCCESS) then
            msg = '(no message: the context handle is invalid)'
            return
        end if
        msg = ''
        do i = 1, MSG_LEN
            if (buf(i) == c_null_char) exit
            msg = msg//buf(i)
        end do
    end function last_message

    !> Forget the error recorded by this module for context ctx (a newer C error replaces it, a
    !> destroyed context may come back at the same address).
    subroutine forget_ferr(ctx)
        type(c_ptr), intent(in) :: ctx
        if (.not. ferr_set) return
        if (c_associated(ctx) .neqv. c_associated(ferr_ctx)) return
        if (c_associated(ctx)) then
            if (.not. c_associated(ctx, ferr_ctx)) return
        end if
        ferr_set = .false.
        ferr_msg = ''
    end subroutine forget_ferr

    !> Stop the program for a failed call: the routine, the code, its description and the message.
    subroutine fail_stop(rc, where, msg)
        integer(c_int), intent(in) :: rc
        character(len=*), intent(in) :: where, msg
        error stop 'pkrylov_mod: '//where//' failed with '//itoa(int(rc, c_int64_t))//' ('// &
            c_to_f_string(pkrylov_error_string(rc))//'): '//msg
    end subroutine fail_stop

    !> Handle the status rc of a C call made through context ctx: store it in ierr when present,
    !> otherwise stop the program with the context's message when rc is an error.
    subroutine check(rc, ctx, where, ierr)
        integer(c_int), intent(in) :: rc
        type(c_ptr), intent(in) :: ctx
        character(len=*), intent(in) :: where
        integer, intent(out), optional :: ierr
        if (present(ierr)) ierr = int(rc)
        if (rc == PKRYLOV_SUCCESS) return
        call forget_ferr(ctx)
        if (.not. present(ierr)) call fail_stop(rc, where, last_message(ctx))
    end subroutine check

    !> Raise an error detected in this module (code, message naming the argument) for context ctx.
    subroutine raise(code, ctx, where, msg, ierr)
        integer(c_int32_t), intent(in) :: code
        type(c_ptr), intent(in) :: ctx
        character(len=*), intent(in) :: where, msg
        integer, intent(out), optional :: ierr
        ferr_set = .true.
        ferr_ctx = ctx
        ferr_msg = where//': '//msg
        if (present(ierr)) then
            ierr = int(code)
        else
            call fail_stop(int(code, c_int), where, trim(ferr_msg))
        end if
    end subroutine raise

    !> check for pkrylov's own submodules in other libraries (pkrylov_mod_mpi); not for models.
    subroutine pk_internal_check(rc, ctx, where, ierr)
        integer(c_int), intent(in) :: rc
        type(c_ptr), intent(in) :: ctx
        character(len=*), intent(in) :: where
        integer, intent(out), optional :: ierr
        call check(rc, ctx, where, ierr)
    end subroutine pk_internal_check

    !> raise for pkrylov's own submodules in other libraries (pkrylov_mod_mpi); not for models.
    subroutine pk_internal_raise(code, ctx, where, msg, ierr)
        integer(c_int32_t), intent(in) :: code
        type(c_ptr), intent(in) :: ctx
        character(len=*), intent(in) :: where, msg
        integer, intent(out), optional :: ierr
        call raise(code, ctx, where, msg, ierr)
    end subroutine pk_internal_raise

    !> Check that an array argument has n values (PKRYLOV_ERR_SIZE_MISMATCH otherwise); ok = .false.
    !> when the error was raised.
    subroutine check_count(nvals, n, name, what, ctx, where, ok, ierr)
        integer(c_int64_t), intent(in) :: nvals, n
        character(len=*), intent(in) :: name, what, where
        type(c_ptr), intent(in) :: ctx
        logical, intent(out) :: ok
        integer, intent(out), optional :: ierr
        ok = nvals == n
        if (.not. ok) call raise(PKRYLOV_ERR_SIZE_MISMATCH, ctx, where, "argument '"//name//"' has "// &
                                 itoa(nvals)//" values, "//what//" = "//itoa(n), ierr)
    end subroutine check_count

    !> Check the shape of a rank-3 array argument (PKRYLOV_ERR_SIZE_MISMATCH otherwise).
    subroutine check_shape(shp, expected, name, what, ctx, where, ok, ierr)
        integer, intent(in) :: shp(3)
        integer(c_int32_t), intent(in) :: expected(3)
        character(len=*), intent(in) :: name, what, where
        type(c_ptr), intent(in) :: ctx
        logical, intent(out) :: ok
        integer, intent(out), optional :: ierr
        ok = all(shp == expected)
        if (.not. ok) call raise(PKRYLOV_ERR_SIZE_MISMATCH, ctx, where, "argument '"//name// &
                                 "' has shape "//shape_str(int(shp, c_int64_t))//", expected "//what// &
                                 " = "//shape_str(int(expected, c_int64_t)), ierr)
    end subroutine check_shape

    !> "(a,b,c)".
    function shape_str(s) result(str)
        integer(c_int64_t), intent(in) :: s(3)
        character(len=:), allocatable :: str
        str = '('//itoa(s(1))//','//itoa(s(2))//','//itoa(s(3))//')'
    end function shape_str

    !> Check a size argument of the halo layout: >= lo (PKRYLOV_ERR_INVALID_SIZE otherwise).
    subroutine check_min(v, lo, name, ctx, where, ok, ierr)
        integer(c_int32_t), intent(in) :: v, lo
        character(len=*), intent(in) :: name, where
        type(c_ptr), intent(in) :: ctx
        logical, intent(inout) :: ok
        integer, intent(out), optional :: ierr
        if (.not. ok) return
        ok = v >= lo
        if (.not. ok) call raise(PKRYLOV_ERR_INVALID_SIZE, ctx, where, "argument '"//name//"' = "// &
                                 itoa(int(v, c_int64_t))//" must be >= "//itoa(int(lo, c_int64_t)), ierr)
    end subroutine check_min

    !> Number of unknowns of an operator (0 when the handle is null or invalid).
    function operator_size(h) result(n)
        type(c_ptr), intent(in) :: h
        integer(c_int64_t) :: n
        integer(c_int64_t), target :: nn
        nn = 0
        if (c_associated(h)) then
            if (pkrylov_operator_get_info(h, c_loc(nn), c_null_ptr, c_null_ptr, c_null_ptr, c_null_ptr, &
                                          c_null_ptr) /= PKRYLOV_SUCCESS) nn = 0
        end if
        n = nn
    end function operator_size

    ! ---------------------------------------------------------------------------------------------
    ! Contexts, messages

    !> Create a context on a backend (PKRYLOV_BACKEND_AUTO, _CPU or _CUDA).
    subroutine pk_context_create(ctx, backend, ierr)
        type(pk_context), intent(out) :: ctx !! the new context
        integer(c_int32_t), intent(in) :: backend !! PKRYLOV_BACKEND_*
        integer, intent(out), optional :: ierr !! status (error stop on failure when absent)
        type(c_ptr), target :: h
        integer(c_int) :: rc
        h = c_null_ptr
        rc = pkrylov_context_create(int(backend, c_int), c_loc(h))
        ctx%h = h
        call check(rc, c_null_ptr, 'pk_context_create', ierr)
    end subroutine pk_context_create

    !> Destroy a context (every object created from it must be destroyed first); a null handle is a
    !> no-op. The handle is null afterwards.
    subroutine pk_context_destroy(ctx, ierr)
        type(pk_context), intent(inout) :: ctx !! the context
        integer, intent(out), optional :: ierr !! status
        type(c_ptr), target :: h
        integer(c_int) :: rc
        h = ctx%h
        rc = pkrylov_context_destroy(c_loc(h))
        if (rc == PKRYLOV_SUCCESS .and. c_associated(ctx%h)) call forget_ferr(ctx%h)
        call check(rc, ctx%h, 'pk_context_destroy', ierr)
        ctx%h = h
    end subroutine pk_context_destroy

    !> The backend the context resolved to (PKRYLOV_BACKEND_CPU or _CUDA, never AUTO).
    subroutine pk_context_get_backend(ctx, backend, ierr)
        type(pk_context), intent(in) :: ctx !! the context
        integer(c_int32_t), intent(out) :: backend !! PKRYLOV_BACKEND_CPU or PKRYLOV_BACKEND_CUDA
        integer, intent(out), optional :: ierr !! status
        integer(c_int32_t), target :: b
        integer(c_int) :: rc
        b = 0
        rc = pkrylov_context_get_backend(ctx%h, c_loc(b))
        backend = b
        call check(rc, ctx%h, 'pk_context_get_backend', ierr)
    end subroutine pk_context_get_backend

    !> The message of the last error raised through ctx ("" when none); with a null ctx (e.g. after a
    !> failed pk_context_create), the last error raised on this thread without a context. msg is
    !> blank-padded, or truncated when too short.
    subroutine pk_error_message(ctx, msg)
        type(pk_context), intent(in) :: ctx !! the context, or a null one
        character(len=*), intent(out) :: msg !! the message
        msg = last_message(ctx%h)
    end subroutine pk_error_message

    !> A description of a status code, e.g. "invalid size" for PKRYLOV_ERR_INVALID_SIZE.
    function pk_error_string(code) result(str)
        integer, intent(in) :: code !! PKRYLOV_SUCCESS or PKRYLOV_ERR_*
        character(len=:), allocatable :: str
        str = c_to_f_string(pkrylov_error_string(int(code, c_int)))
    end function pk_error_string

    !> The name of a convergence reason, e.g. "converged_rtol" for PKRYLOV_CONVERGED_RTOL.
    function pk_reason_string(reason) result(str)
        integer, intent(in) :: reason !! a pkrylov_result%reason
        character(len=:), allocatable :: str
        str = c_to_f_string(pkrylov_reason_string(int(reason, c_int)))
    end function pk_reason_string

    ! ---------------------------------------------------------------------------------------------
    ! Operators

    !> Square CSR matrix with 32-bit indices (copied). index_base 1 for Fortran indices, 0 for C.
    subroutine operator_create_csr32(ctx, A, n, rowptr, colind, values, index_base, ierr)
        type(pk_context), intent(in) :: ctx !! the context
        type(pk_operator), intent(out) :: A !! the new operator
        integer(c_int32_t), intent(in) :: n !! rows = columns, > 0
        integer(c_int32_t), intent(in), target, contiguous :: rowptr(:) !! n+1 row starts
        integer(c_int32_t), intent(in), target, contiguous :: colind(:) !! nnz column indices
        real(c_double), intent(in), target, contiguous :: values(:) !! nnz values
        integer(c_int32_t), intent(in) :: index_base !! 0 or 1, for rowptr and colind
        integer, intent(out), optional :: ierr !! status
        type(c_ptr), target :: h
        type(c_ptr) :: prow, pcol, pval
        logical :: ok
        integer(c_int) :: rc
        prow = c_loc(dummy_i)
        pcol = c_loc(dummy_i)
        pval = c_loc(dummy_d)
        ! sizes the C library cannot see; n and index_base themselves are checked there
        if (n > 0 .and. (index_base == 0 .or. index_base == 1) .and. c_associated(ctx%h)) then
            if (size(rowptr, kind=c_int64_t) < int(n, c_int64_t) + 1) then
                call csr_check_sizes(ctx, int(n, c_int64_t), size(rowptr, kind=c_int64_t), 0_c_int64_t, &
                                     0_c_int64_t, 0_c_int64_t, 0_c_int64_t, ok, ierr)
                return
            end if
            call csr_check_sizes(ctx, int(n, c_int64_t), size(rowptr, kind=c_int64_t), &
                                 int(rowptr(n + 1), c_int64_t) - index_base, size(colind, kind=c_int64_t), &
                                 size(values, kind=c_int64_t), 1_c_int64_t, ok, ierr)
            if (.not. ok) return
        end if
        if (size(rowptr) > 0) prow = c_loc(rowptr)
        if (size(colind) > 0) pcol = c_loc(colind)
        if (size(values) > 0) pval = c_loc(values)
        h = c_null_ptr
        rc = pkrylov_operator_create_csr(ctx%h, n, index_base, prow, pcol, pval, c_loc(h))
        A%h = h
        if (rc == PKRYLOV_SUCCESS) A%ctx = ctx%h
        call check(rc, ctx%h, 'pk_operator_create_csr', ierr)
    end subroutine operator_create_csr32

    !> The array sizes of a CSR constructor that the C library cannot see: rowptr needs n+1 values
    !> (checked alone when have_nnz = 0), colind and values nnz = rowptr(n+1) - index_base each
    !> (PKRYLOV_ERR_SIZE_MISMATCH naming the argument otherwise).
    subroutine csr_check_sizes(ctx, n, nrow, nnz, ncol, nval, have_nnz, ok, ierr)
        type(pk_context), intent(in) :: ctx
        integer(c_int64_t), intent(in) :: n, nrow, nnz, ncol, nval, have_nnz
        logical, intent(out) :: ok
        integer, intent(out), optional :: ierr
        character(len=*), parameter :: where = 'pk_operator_create_csr'
        ok = .false.
        if (nrow < n + 1) then
            call raise(PKRYLOV_ERR_SIZE_MISMATCH, ctx%h, where, "argument 'rowptr' has "//itoa(nrow)// &
                       " values, fewer than n+1 = "//itoa(n + 1), ierr)
            return
        end if
        if (have_nnz == 0) then
            ok = .true.
            return
        end if
        if (nnz > ncol) then
            call raise(PKRYLOV_ERR_SIZE_MISMATCH, ctx%h, where, "argument 'colind' has "//itoa(ncol)// &
                       " values, fewer than nnz = rowptr(n+1) - index_base = "//itoa(nnz), ierr)
            return
        end if
        if (nnz > nval) then
            call raise(PKRYLOV_ERR_SIZE_MISMATCH, ctx%h, where, "argument 'values' has "//itoa(nval)// &
                       " values, fewer than nnz = rowptr(n+1) - index_base = "//itoa(nnz), ierr)
            return
        end if
        ok = .true.
    end subroutine csr_check_sizes

    !> Square CSR matrix with 64-bit indices (pkrylov_operator_create_csr64; copied), for n or nnz beyond
    !> 2^31-1. index_base 1 for Fortran indices, 0 for C.
    subroutine operator_create_csr64(ctx, A, n, rowptr, colind, values, index_base, ierr)
        type(pk_context), intent(in) :: ctx !! the context
        type(pk_operator), intent(out) :: A !! the new operator
        integer(c_int64_t), intent(in) :: n !! rows = columns, > 0
        integer(c_int64_t), intent(in), target, contiguous :: rowptr(:) !! n+1 row starts
        integer(c_int64_t), intent(in), target, contiguous :: colind(:) !! nnz column indices
        real(c_double), intent(in), target, contiguous :: values(:) !! nnz values
        integer(c_int32_t), intent(in) :: index_base !! 0 or 1, for rowptr and colind
        integer, intent(out), optional :: ierr !! status
        type(c_ptr), target :: h
        type(c_ptr) :: prow, pcol, pval
        logical :: ok
        integer(c_int) :: rc
        integer(c_int64_t), target, save :: dummy_i8(1) = 0
        prow = c_loc(dummy_i8)
        pcol = c_loc(dummy_i8)
        pval = c_loc(dummy_d)
        ! sizes the C library cannot see; n and index_base themselves are checked there
        if (n > 0 .and. (index_base == 0 .or. index_base == 1) .and. c_associated(ctx%h)) then
            if (size(rowptr, kind=c_int64_t) - 1 < n) then
                call csr_check_sizes(ctx, n, size(rowptr, kind=c_int64_t), 0_c_int64_t, 0_c_int64_t, &
                                     0_c_int64_t, 0_c_int64_t, ok, ierr)
                return
            end if
            call csr_check_sizes(ctx, n, size(rowptr, kind=c_int64_t), rowptr(n + 1) - index_base, &
                                 size(colind, kind=c_int64_t), size(values, kind=c_int64_t), 1_c_int64_t, ok, &
                                 ierr)
            if (.not. ok) return
        end if
        if (size(rowptr) > 0) prow = c_loc(rowptr)
        if (size(colind) > 0) pcol = c_loc(colind)
        if (size(values) > 0) pval = c_loc(values)
        h = c_null_ptr
        rc = pkrylov_operator_create_csr64(ctx%h, n, index_base, prow, pcol, pval, c_loc(h))
        A%h = h
        if (rc == PKRYLOV_SUCCESS) A%ctx = ctx%h
        call check(rc, ctx%h, 'pk_operator_create_csr', ierr)
    end subroutine operator_create_csr64

    !> Square CSR matrix with 64-bit rowptr and colind and a default-integer n (nnz beyond 2^31-1).
    subroutine operator_create_csr64_n4(ctx, A, n, rowptr, colind, values, index_base, ierr)
        type(pk_context), intent(in) :: ctx !! the context
        type(pk_operator), intent(out) :: A !! the new operator
        integer(c_int32_t), intent(in) :: n !! rows = columns, > 0
        integer(c_int64_t), intent(in), target, contiguous :: rowptr(:) !! n+1 row starts
        integer(c_int64_t), intent(in), target, contiguous :: colind(:) !! nnz column indices
        real(c_double), intent(in), target, contiguous :: values(:) !! nnz values
        integer(c_int32_t), intent(in) :: index_base !! 0 or 1, for rowptr and colind
        integer, intent(out), optional :: ierr !! status
        call operator_create_csr64(ctx, A, int(n, c_int64_t), rowptr, colind, values, index_base, ierr)
    end subroutine operator_create_csr64_n4

    !> The common part of the stencil constructors: real(c_double) (nx,ny,nz) arrays, optional int32
    !> mask; checks the shapes and calls the C library.
    subroutine stencil7_core(ctx, A, nx, ny, nz, aW, aS, aV, aC, mask, where, ierr)
        type(pk_context), intent(in) :: ctx
        type(pk_operator), intent(out) :: A
        integer(c_int32_t), intent(in) :: nx, ny, nz
        real(c_double), intent(in), target, contiguous :: aW(:, :, :), aS(:, :, :), aV(:, :, :), aC(:, :, :)
        integer(c_int32_t), intent(in), target, contiguous, optional :: mask(:, :, :)
        character(len=*), intent(in) :: where
        integer, intent(out), optional :: ierr
        type(c_ptr), target :: h
        type(c_ptr) :: pW, pS, pV, pC, pm
        integer(c_int32_t) :: ex(3)
        character(len=*), parameter :: what = '(nx,ny,nz)'
        logical :: ok
        integer(c_int) :: rc
        pW = c_loc(dummy_d)
        pS = pW
        pV = pW
        pC = pW
        pm = c_null_ptr
        if (present(mask)) pm = c_loc(dummy_i)
        ! the C library checks nx, ny, nz >= 1; with valid sizes every array must have that shape
        if (nx >= 1 .and. ny >= 1 .and. nz >= 1 .and. c_associated(ctx%h)) then
            ex = [nx, ny, nz]
            call check_shape(shape(aW), ex, 'aW', what, ctx%h, where, ok, ierr)
            if (ok) call check_shape(shape(aS), ex, 'aS', what, ctx%h, where, ok, ierr)
            if (ok) call check_shape(shape(aV), ex, 'aV', what, ctx%h, where, ok, ierr)
            if (ok) call check_shape(shape(aC), ex, 'aC', what, ctx%h, where, ok, ierr)
            if (ok .and. present(mask)) &
                call check_shape(shape(mask), ex, 'mask', what, ctx%h, where, ok, ierr)
            if (.not. ok) return
            pW = c_loc(aW)
            pS = c_loc(aS)
            pV = c_loc(aV)
            pC = c_loc(aC)
            if (present(mask)) pm = c_loc(mask)
        end if
        h = c_null_ptr
        rc = pkrylov_operator_create_stencil7(ctx%h, nx, ny, nz, pW, pS, pV, pC, pm, c_loc(h))
        A%h = h
        if (rc == PKRYLOV_SUCCESS) A%ctx = ctx%h
        call check(rc, ctx%h, where, ierr)
    end subroutine stencil7_core

    !> Column stencil, real(c_double) coefficients, optional integer mask (0 = dry).
    subroutine stencil7_d(ctx, A, nx, ny, nz, aW, aS, aV, aC, mask, ierr)
        type(pk_context), intent(in) :: ctx !! the context
        type(pk_operator), intent(out) :: A !! the new operator
        integer(c_int32_t), intent(in) :: nx, ny, nz !! grid, each >= 1
        real(c_double), intent(in), target, contiguous :: aW(:, :, :), aS(:, :, :), aV(:, :, :), &
                                                          aC(:, :, :) !! (nx,ny,nz) face coefficients
        integer(c_int32_t), intent(in), target, contiguous, optional :: mask(:, :, :) !! (nx,ny,nz)
        integer, intent(out), optional :: ierr !! status
        call stencil7_core(ctx, A, nx, ny, nz, aW, aS, aV, aC, mask, 'pk_operator_create_stencil7', ierr)
    end subroutine stencil7_d

    !> Column stencil, real(c_double) coefficients, logical mask (.false. = dry).
    subroutine stencil7_d_lmask(ctx, A, nx, ny, nz, aW, aS, aV, aC, mask, ierr)
        type(pk_context), intent(in) :: ctx !! the context
        type(pk_operator), intent(out) :: A !! the new operator
        integer(c_int32_t), intent(in) :: nx, ny, nz !! grid, each >= 1
        real(c_double), intent(in), target, contiguous :: aW(:, :, :), aS(:, :, :), aV(:, :, :), &
                                                          aC(:, :, :) !! (nx,ny,nz) face coefficients
        logical, intent(in) :: mask(:, :, :) !! (nx,ny,nz), .true. = wet
        integer, intent(out), optional :: ierr !! status
        integer(c_int32_t), allocatable :: m(:, :, :)
        allocate (m(size(mask, 1), size(mask, 2), size(mask, 3)))
        m = merge(1_c_int32_t, 0_c_int32_t, mask)
        call stencil7_core(ctx, A, nx, ny, nz, aW, aS, aV, aC, m, 'pk_operator_create_stencil7', ierr)
    end subroutine stencil7_d_lmask

    !> Column stencil, real(c_float) coefficients (converted to real(c_double)), optional integer mask.
    subroutine stencil7_s(ctx, A, nx, ny, nz, aW, aS, aV, aC, mask, ierr)
        type(pk_context), intent(in) :: ctx !! the context
        type(pk_operator), intent(out) :: A !! the new operator
        integer(c_int32_t), intent(in) :: nx, ny, nz !! grid, each >= 1
        real(c_float), intent(in) :: aW(:, :, :), aS(:, :, :), aV(:, :, :), aC(:, :, :) !! (nx,ny,nz)
        integer(c_int32_t), intent(in), target, contiguous, optional :: mask(:, :, :) !! (nx,ny,nz)
        integer, intent(out), optional :: ierr !! status
        call stencil7_core(ctx, A, nx, ny, nz, real(aW, c_double), real(aS, c_double), real(aV, c_double), &
                           real(aC, c_double), mask, 'pk_operator_create_stencil7', ierr)
    end subroutine stencil7_s

    !> Column stencil, real(c_float) coefficients, logical mask.
    subroutine stencil7_s_lmask(ctx, A, nx, ny, nz, aW, aS, aV, aC, mask, ierr)
        type(pk_context), intent(in) :: ctx !! the context
        type(pk_operator), intent(out) :: A !! the new operator
        integer(c_int32_t), intent(in) :: nx, ny, nz !! grid, each >= 1
        real(c_float), intent(in) :: aW(:, :, :), aS(:, :, :), aV(:, :, :), aC(:, :, :) !! (nx,ny,nz)
        logical, intent(in) :: mask(:, :, :) !! (nx,ny,nz), .true. = wet
        integer, intent(out), optional :: ierr !! status
        call stencil7_core(ctx, A, nx, ny, nz, real(aW, c_double), real(aS, c_double), real(aV, c_double), &
                           real(aC, c_double), merge(1_c_int32_t, 0_c_int32_t, mask), &
                           'pk_operator_create_stencil7', ierr)
    end subroutine stencil7_s_lmask

    !> Check the halo-layout sizes (sNx, sNy, Nr >= 1, OLx, OLy >= 0) and the shape of one array.
    subroutine check_halo(shp, sNx, sNy, Nr, OLx, OLy, name, ctx, where, ok, ierr)
        integer, intent(in) :: shp(3)
        integer(c_int32_t), intent(in) :: sNx, sNy, Nr, OLx, OLy
        character(len=*), intent(in) :: name, where
        type(c_ptr), intent(in) :: ctx
        logical, intent(out) :: ok
        integer, intent(out), optional :: ierr
        ok = .true.
        call check_min(sNx, 1_c_int32_t, 'sNx', ctx, where, ok, ierr)
        call check_min(sNy, 1_c_int32_t, 'sNy', ctx, where, ok, ierr)
        call check_min(Nr, 1_c_int32_t, 'Nr', ctx, where, ok, ierr)
        call check_min(OLx, 0_c_int32_t, 'OLx', ctx, where, ok, ierr)
        call check_min(OLy, 0_c_int32_t, 'OLy', ctx, where, ok, ierr)
        if (ok) call check_shape(shp, [sNx + 2*OLx, sNy + 2*OLy, Nr], name, &
                                 '(sNx+2*OLx,sNy+2*OLy,Nr)', ctx, where, ok, ierr)
    end subroutine check_halo

    !> All halo checks of the stencil constructors (the four coefficient arrays and the mask).
    subroutine check_halo4(sW, sS, sV, sC, sm, sNx, sNy, Nr, OLx, OLy, ctx, where, ok, ierr)
        integer, intent(in) :: sW(3), sS(3), sV(3), sC(3), sm(3)
        integer(c_int32_t), intent(in) :: sNx, sNy, Nr, OLx, OLy
        type(c_ptr), intent(in) :: ctx
        character(len=*), intent(in) :: where
        logical, intent(out) :: ok
        integer, intent(out), optional :: ierr
        call check_halo(sW, sNx, sNy, Nr, OLx, OLy, 'aW', ctx, where, ok, ierr)
        if (ok) call check_halo(sS, sNx, sNy, Nr, OLx, OLy, 'aS', ctx, where, ok, ierr)
        if (ok) call check_halo(sV, sNx, sNy, Nr, OLx, OLy, 'aV', ctx, where, ok, ierr)
        if (ok) call check_halo(sC, sNx, sNy, Nr, OLx, OLy, 'aC', ctx, where, ok, ierr)
        if (ok .and. sm(1) >= 0) call check_halo(sm, sNx, sNy, Nr, OLx, OLy, 'mask', ctx, where, ok, ierr)
    end subroutine check_halo4

    !> Column stencil from halo-layout real(c_double) arrays, optional integer mask. With exchange: the
    !> couplings across the tile edges are kept (pkrylov_operator_create_stencil7_exchange), the east and
    !> north faces of the last cells taken from aW(sNx+1,1:sNy,:) and aS(1:sNx,sNy+1,:) (needs OLx, OLy >= 1).
    subroutine stencil7_halo_d(ctx, A, sNx, sNy, Nr, OLx, OLy, aW, aS, aV, aC, mask, ierr, exchange, ctx_ptr)
        type(pk_context), intent(in) :: ctx !! the context
        type(pk_operator), intent(out) :: A !! the new operator (sNx*sNy*Nr unknowns)
        integer(c_int32_t), intent(in) :: sNx, sNy, Nr !! interior size, each >= 1
        integer(c_int32_t), intent(in) :: OLx, OLy !! halo widths, >= 0
        real(c_double), intent(in) :: aW(1 - OLx:, 1 - OLy:, :), aS(1 - OLx:, 1 - OLy:, :), &
                                      aV(1 - OLx:, 1 - OLy:, :), aC(1 - OLx:, 1 - OLy:, :) !! coefficients
        integer(c_int32_t), intent(in), optional :: mask(1 - OLx:, 1 - OLy:, :) !! 0 = dry
        integer, intent(out), optional :: ierr !! status
        procedure(pk_halo_callback), optional :: exchange !! the model's halo exchange (CPU backend)
        type(c_ptr), intent(in), optional :: ctx_ptr !! passed to exchange (default c_null_ptr)
        character(len=*), parameter :: where = 'pk_operator_create_stencil7_halo'
        integer :: sm(3)
        logical :: ok
        sm = -1
        if (present(mask)) sm = shape(mask)
        if (present(exchange)) then
            call stencil7_exchange_core(ctx, A, sNx, sNy, Nr, OLx, OLy, aW, aS, aV, aC, sm, exchange, ierr, &
                                        mask, ctx_ptr)
            return
        end if
        if (.not. c_associated(ctx%h)) then ! the C library reports the null context
            call stencil7_core(ctx, A, 1_c_int32_t, 1_c_int32_t, 1_c_int32_t, dummy3(), dummy3(), dummy3(), &
                               dummy3(), where=where, ierr=ierr)
            return
        end if
        call check_halo4(shape(aW), shape(aS), shape(aV), shape(aC), sm, sNx, sNy, Nr, OLx, OLy, ctx%h, &
                         where, ok, ierr)
        if (.not. ok) return
        if (present(mask)) then
            call stencil7_core(ctx, A, sNx, sNy, Nr, aW(1:sNx, 1:sNy, :), aS(1:sNx, 1:sNy, :), &
                               aV(1:sNx, 1:sNy, :), aC(1:sNx, 1:sNy, :), mask(1:sNx, 1:sNy, :), where, ierr)
        else
            call stencil7_core(ctx, A, sNx, sNy, Nr, aW(1:sNx, 1:sNy, :), aS(1:sNx, 1:sNy, :), &
                               aV(1:sNx, 1:sNy, :), aC(1:sNx, 1:sNy, :), where=where, ierr=ierr)
        end if
    end subroutine stencil7_halo_d

    !> Column stencil from halo-layout real(c_double) arrays, logical mask.
    subroutine stencil7_halo_d_lmask(ctx, A, sNx, sNy, Nr, OLx, OLy, aW, aS, aV, aC, mask, ierr, exchange, &
                                     ctx_ptr)
        type(pk_context), intent(in) :: ctx !! the context
        type(pk_operator), intent(out) :: A !! the new operator
        integer(c_int32_t), intent(in) :: sNx, sNy, Nr !! interior size, each >= 1
        integer(c_int32_t), intent(in) :: OLx, OLy !! halo widths, >= 0
        real(c_double), intent(in) :: aW(1 - OLx:, 1 - OLy:, :), aS(1 - OLx:, 1 - OLy:, :), &
                                      aV(1 - OLx:, 1 - OLy:, :), aC(1 - OLx:, 1 - OLy:, :) !! coefficients
        logical, intent(in) :: mask(1 - OLx:, 1 - OLy:, :) !! .true. = wet
        integer, intent(out), optional :: ierr !! status
        procedure(pk_halo_callback), optional :: exchange !! the model's halo exchange (CPU backend)
        type(c_ptr), intent(in), optional :: ctx_ptr !! passed to exchange (default c_null_ptr)
        integer(c_int32_t), allocatable :: m(:, :, :)
        allocate (m(1 - OLx:ubound(mask, 1), 1 - OLy:ubound(mask, 2), size(mask, 3)))
        m = merge(1_c_int32_t, 0_c_int32_t, mask)
        call stencil7_halo_d(ctx, A, sNx, sNy, Nr, OLx, OLy, aW, aS, aV, aC, m, ierr, exchange, ctx_ptr)
    end subroutine stencil7_halo_d_lmask

    !> Column stencil from halo-layout real(c_float) arrays, optional integer mask.
    subroutine stencil7_halo_s(ctx, A, sNx, sNy, Nr, OLx, OLy, aW, aS, aV, aC, mask, ierr, exchange, ctx_ptr)
        type(pk_context), intent(in) :: ctx !! the context
        type(pk_operator), intent(out) :: A !! the new operator
        integer(c_int32_t), intent(in) :: sNx, sNy, Nr !! interior size, each >= 1
        integer(c_int32_t), intent(in) :: OLx, OLy !! halo widths, >= 0
        real(c_float), intent(in) :: aW(1 - OLx:, 1 - OLy:, :), aS(1 - OLx:, 1 - OLy:, :), &
                                     aV(1 - OLx:, 1 - OLy:, :), aC(1 - OLx:, 1 - OLy:, :) !! coefficients
        integer(c_int32_t), intent(in), optional :: mask(1 - OLx:, 1 - OLy:, :) !! 0 = dry
        integer, intent(out), optional :: ierr !! status
        procedure(pk_halo_callback), optional :: exchange !! the model's halo exchange (CPU backend)
        type(c_ptr), intent(in), optional :: ctx_ptr !! passed to exchange (default c_null_ptr)
        real(c_double), allocatable :: w(:, :, :), s(:, :, :), v(:, :, :), c(:, :, :)
        allocate (w(1 - OLx:ubound(aW, 1), 1 - OLy:ubound(aW, 2), size(aW, 3)))
        allocate (s(1 - OLx:ubound(aS, 1), 1 - OLy:ubound(aS, 2), size(aS, 3)))
        allocate (v(1 - OLx:ubound(aV, 1), 1 - OLy:ubound(aV, 2), size(aV, 3)))
        allocate (c(1 - OLx:ubound(aC, 1), 1 - OLy:ubound(aC, 2), size(aC, 3)))
        w = real(aW, c_double)
        s = real(aS, c_double)
        v = real(aV, c_double)
        c = real(aC, c_double)
        call stencil7_halo_d(ctx, A, sNx, sNy, Nr, OLx, OLy, w, s, v, c, mask, ierr, exchange, ctx_ptr)
    end subroutine stencil7_halo_s

    !> Column stencil from halo-layout real(c_float) arrays, logical mask.
    subroutine stencil7_halo_s_lmask(ctx, A, sNx, sNy, Nr, OLx, OLy, aW, aS, aV, aC, mask, ierr, exchange, &
                                     ctx_ptr)
        type(pk_context), intent(in) :: ctx !! the context
        type(pk_operator), intent(out) :: A !! the new operator
        integer(c_int32_t), intent(in) :: sNx, sNy, Nr !! interior size, each >= 1
        integer(c_int32_t), intent(in) :: OLx, OLy !! halo widths, >= 0
        real(c_float), intent(in) :: aW(1 - OLx:, 1 - OLy:, :), aS(1 - OLx:, 1 - OLy:, :), &
                                     aV(1 - OLx:, 1 - OLy:, :), aC(1 - OLx:, 1 - OLy:, :) !! coefficients
        logical, intent(in) :: mask(1 - OLx:, 1 - OLy:, :) !! .true. = wet
        integer, intent(out), optional :: ierr !! status
        procedure(pk_halo_callback), optional :: exchange !! the model's halo exchange (CPU backend)
        type(c_ptr), intent(in), optional :: ctx_ptr !! passed to exchange (default c_null_ptr)
        integer(c_int32_t), allocatable :: m(:, :, :)
        allocate (m(1 - OLx:ubound(mask, 1), 1 - OLy:ubound(mask, 2), size(mask, 3)))
        m = merge(1_c_int32_t, 0_c_int32_t, mask)
        call stencil7_halo_s(ctx, A, sNx, sNy, Nr, OLx, OLy, aW, aS, aV, aC, m, ierr, exchange, ctx_ptr)
    end subroutine stencil7_halo_s_lmask

    !> The halo-exchange stencil (stencil7_halo_d with exchange): shape checks (OLx, OLy >= 1: the east
    !> and north faces come from the halo), contiguous copies of the interior and of the faces
    !> aW(sNx+1,1:sNy,:), aS(1:sNx,sNy+1,:), then pkrylov_operator_create_stencil7_exchange.
    subroutine stencil7_exchange_core(ctx, A, sNx, sNy, Nr, OLx, OLy, aW, aS, aV, aC, sm, exchange, ierr, &
                                      mask, ctx_ptr)
        type(pk_context), intent(in) :: ctx
        type(pk_operator), intent(out) :: A
        integer(c_int32_t), intent(in) :: sNx, sNy, Nr, OLx, OLy
        real(c_double), intent(in) :: aW(1 - OLx:, 1 - OLy:, :), aS(1 - OLx:, 1 - OLy:, :), &
                                      aV(1 - OLx:, 1 - OLy:, :), aC(1 - OLx:, 1 - OLy:, :)
        integer, intent(in) :: sm(3)
        procedure(pk_halo_callback) :: exchange
        integer, intent(out), optional :: ierr
        integer(c_int32_t), intent(in), optional :: mask(1 - OLx:, 1 - OLy:, :)
        type(c_ptr), intent(in), optional :: ctx_ptr
        character(len=*), parameter :: where = 'pk_operator_create_stencil7_halo'
        real(c_double), allocatable, target :: w(:, :, :), s(:, :, :), v(:, :, :), c(:, :, :)
        real(c_double), allocatable, target :: we(:, :), sn(:, :)
        integer(c_int32_t), allocatable, target :: m(:, :, :)
        type(c_ptr), target :: h
        type(c_ptr) :: pm
        type(halo_rec), pointer :: rec
        integer(c_int) :: rc
        logical :: ok
        if (c_associated(ctx%h)) then
            call check_halo4(shape(aW), shape(aS), shape(aV), shape(aC), sm, sNx, sNy, Nr, OLx, OLy, ctx%h, &
                             where, ok, ierr)
            if (ok) call check_min(OLx, 1_c_int32_t, 'OLx', ctx%h, where, ok, ierr)
            if (ok) call check_min(OLy, 1_c_int32_t, 'OLy', ctx%h, where, ok, ierr)
            if (.not. ok) return
            w = aW(1:sNx, 1:sNy, :)
            s = aS(1:sNx, 1:sNy, :)
            v = aV(1:sNx, 1:sNy, :)
            c = aC(1:sNx, 1:sNy, :)
            we = aW(sNx + 1, 1:sNy, :)
            sn = aS(1:sNx, sNy + 1, :)
        else ! the C library reports the null context
            allocate (w(1, 1, 1), s(1, 1, 1), v(1, 1, 1), c(1, 1, 1), we(1, 1), sn(1, 1))
            w = 0; s = 0; v = 0; c = 0; we = 0; sn = 0
        end if
        pm = c_null_ptr
        if (present(mask) .and. c_associated(ctx%h)) then
            m = mask(1:sNx, 1:sNy, :)
            pm = c_loc(m)
        end if
        allocate (rec)
        rec%fn => exchange
        if (present(ctx_ptr)) rec%data = ctx_ptr
        h = c_null_ptr
        rc = pkrylov_operator_create_stencil7_exchange(ctx%h, sNx, sNy, Nr, c_loc(w), c_loc(s), c_loc(v), &
                                                       c_loc(c), pm, c_loc(we), c_loc(sn), &
                                                       c_funloc(halo_trampoline), c_loc(rec), c_loc(h))
        A%h = h
        if (rc == PKRYLOV_SUCCESS) then
            A%ctx = ctx%h
            A%hx => rec
        else
            deallocate (rec)
        end if
        call check(rc, ctx%h, where, ierr)
    end subroutine stencil7_exchange_core

    !> The C routine (pkrylov_halo_fn) behind every halo-exchange stencil made in this module: user points
    !> to a halo_rec; calls its model routine and returns 1 when it called pk_callback_abort, else 0.
    function halo_trampoline(user, nx, ny, nz, xh) bind(C, name='pkrylov_mod_halo_trampoline') result(rc)
        type(c_ptr), value :: user
        integer(c_int32_t), value :: nx, ny, nz
        real(c_double), intent(inout) :: xh(0:nx + 1, 0:ny + 1, nz)
        integer(c_int) :: rc
        type(halo_rec), pointer :: rec
        call c_f_pointer(user, rec)
        cb_abort = .false.
        call rec%fn(rec%data, nx, ny, nz, xh)
        rc = merge(1_c_int, 0_c_int, cb_abort)
        cb_abort = .false.
    end function halo_trampoline

    !> A (1,1,1) array (to let the C library report a null context).
    function dummy3() result(a)
        real(c_double) :: a(1, 1, 1)
        a = 0
    end function dummy3

    !> The thin-shell model problem (matrix-free), defaults as pkrylov_thinshell_params_default.
    subroutine pk_operator_create_thinshell(ctx, A, nx, ny, nz, geometry, H, lambda, nu, ierr)
        type(pk_context), intent(in) :: ctx !! the context
        type(pk_operator), intent(out) :: A !! the new operator
        integer(c_int32_t), intent(in) :: nx, ny, nz !! grid, each >= 1
        integer(c_int32_t), intent(in), optional :: geometry !! PKRYLOV_GEOMETRY_* (default gnomonic)
        real(c_double), intent(in), optional :: H !! shell thickness in Earth radii (default 0.01)
        real(c_double), intent(in), optional :: lambda !! vertical/horizontal scaling (default 1)
        real(c_double), intent(in), optional :: nu !! Courant-like number (default 10)
        integer, intent(out), optional :: ierr !! status
        type(pkrylov_thinshell_params), target :: p
        type(c_ptr), target :: hA
        integer(c_int) :: rc
        ! defaults from the library (for a valid grid; the C constructor checks the real one)
        rc = pkrylov_thinshell_params_default(1_c_int32_t, 1_c_int32_t, 1_c_int32_t, c_loc(p))
        if (rc /= PKRYLOV_SUCCESS) then
            call check(rc, c_null_ptr, 'pk_operator_create_thinshell', ierr)
            return
        end if
        p%nx = nx
        p%ny = ny
        p%nz = nz
        if (present(geometry)) p%geometry = geometry
        if (present(H)) p%H = H
        if (present(lambda)) p%lambda = lambda
        if (present(nu)) p%nu = nu
        hA = c_null_ptr
        rc = pkrylov_operator_create_thinshell(ctx%h, c_loc(p), c_loc(hA))
        A%h = hA
        if (rc == PKRYLOV_SUCCESS) A%ctx = ctx%h
        call check(rc, ctx%h, 'pk_operator_create_thinshell', ierr)
    end subroutine pk_operator_create_thinshell

    !> The thin-shell matrix as column-stencil face coefficients (pkrylov_thinshell_stencil_coefficients):
    !> pk_operator_create_stencil7 with them gives the operator pk_operator_create_thinshell gives for the
    !> same parameters (defaults as there). aW, aS, aV, aC: nx*ny*nz values each, any shape, e.g. (nx,ny,nz).
    !> No context: the message of an error is pk_error_message with a null pk_context.
    subroutine pk_thinshell_stencil_coefficients(nx, ny, nz, aW, aS, aV, aC, geometry, H, lambda, nu, ierr)
        integer(c_int32_t), intent(in) :: nx, ny, nz !! grid, each >= 1
        real(c_double), intent(inout), target, contiguous :: aW(..), aS(..), aV(..), aC(..) !! nx*ny*nz each
        integer(c_int32_t), intent(in), optional :: geometry !! PKRYLOV_GEOMETRY_* (default gnomonic)
        real(c_double), intent(in), optional :: H !! shell thickness in Earth radii (default 0.01)
        real(c_double), intent(in), optional :: lambda !! vertical/horizontal scaling (default 1)
        real(c_double), intent(in), optional :: nu !! Courant-like number (default 10)
        integer, intent(out), optional :: ierr !! status (the arrays are unchanged on failure)
        character(len=*), parameter :: where = 'pk_thinshell_stencil_coefficients'
        type(pkrylov_thinshell_params), target :: p
        integer(c_int64_t) :: n
        logical :: ok
        integer(c_int) :: rc
        rc = pkrylov_thinshell_params_default(nx, ny, nz, c_loc(p)) ! checks nx, ny, nz
        if (rc /= PKRYLOV_SUCCESS) then
            call check(rc, c_null_ptr, where, ierr)
            return
        end if
        n = int(nx, c_int64_t)*ny*nz
        call check_count(size(aW, kind=c_int64_t), n, 'aW', 'nx*ny*nz', c_null_ptr, where, ok, ierr)
        if (ok) call check_count(size(aS, kind=c_int64_t), n, 'aS', 'nx*ny*nz', c_null_ptr, where, ok, ierr)
        if (ok) call check_count(size(aV, kind=c_int64_t), n, 'aV', 'nx*ny*nz', c_null_ptr, where, ok, ierr)
        if (ok) call check_count(size(aC, kind=c_int64_t), n, 'aC', 'nx*ny*nz', c_null_ptr, where, ok, ierr)
        if (.not. ok) return
        if (present(geometry)) p%geometry = geometry
        if (present(H)) p%H = H
        if (present(lambda)) p%lambda = lambda
        if (present(nu)) p%nu = nu
        call check(pkrylov_thinshell_stencil_coefficients(c_loc(p), c_loc(aW), c_loc(aS), c_loc(aV), &
                                                          c_loc(aC)), c_null_ptr, where, ierr)
    end subroutine pk_thinshell_stencil_coefficients

    !> The nonsymmetric convection-diffusion test operator (pkrylov_operator_create_convdiff, CSR): -div(D grad
    !> u) + w . grad u on nx x ny x nz unit cells, D = diag(1, 1, aniso), first-order upwind, Dirichlet walls.
    subroutine pk_operator_create_convdiff(ctx, A, nx, ny, nz, wind, aniso, ierr)
        type(pk_context), intent(in) :: ctx !! the context
        type(pk_operator), intent(out) :: A !! the new operator
        integer(c_int32_t), intent(in) :: nx, ny, nz !! grid, each >= 1
        real(c_double), intent(in), target, contiguous :: wind(:) !! (wx, wy, wz), finite
        real(c_double), intent(in) :: aniso !! vertical diffusion relative to the horizontal, > 0
        integer, intent(out), optional :: ierr !! status
        character(len=*), parameter :: where = 'pk_operator_create_convdiff'
        type(c_ptr), target :: h
        type(c_ptr) :: pw
        logical :: ok
        integer(c_int) :: rc
        pw = c_null_ptr
        if (c_associated(ctx%h)) then ! else the C library reports the null context
            call check_count(size(wind, kind=c_int64_t), 3_c_int64_t, 'wind', '3 (wx, wy, wz)', ctx%h, where, &
                             ok, ierr)
            if (.not. ok) return
            pw = c_loc(wind)
        end if
        h = c_null_ptr
        rc = pkrylov_operator_create_convdiff(ctx%h, nx, ny, nz, pw, aniso, c_loc(h))
        A%h = h
        if (rc == PKRYLOV_SUCCESS) A%ctx = ctx%h
        call check(rc, ctx%h, where, ierr)
    end subroutine pk_operator_create_convdiff

    !> y = A x for host arrays of any shape with n values each (the operator's size).
    subroutine pk_operator_apply(A, x, y, ierr)
        type(pk_operator), intent(in) :: A !! the operator
        real(c_double), intent(in), target, contiguous :: x(..) !! n values
        real(c_double), intent(inout), target, contiguous :: y(..) !! n values, overwritten with A x
        integer, intent(out), optional :: ierr !! status (y is unchanged on failure)
        character(len=*), parameter :: where = 'pk_operator_apply'
        integer(c_int64_t) :: n
        logical :: ok
        integer(c_int) :: rc
        if (.not. c_associated(A%h)) then ! the C library reports the null handle
            rc = pkrylov_operator_apply(A%h, PKRYLOV_MEM_HOST, c_null_ptr, c_null_ptr)
            call check(rc, c_null_ptr, where, ierr)
            return
        end if
        n = operator_size(A%h)
        call check_count(size(x, kind=c_int64_t), n, 'x', "the operator's size n", A%ctx, where, ok, ierr)
        if (ok) &
            call check_count(size(y, kind=c_int64_t), n, 'y', "the operator's size n", A%ctx, where, ok, ierr)
        if (.not. ok) return
        rc = pkrylov_operator_apply(A%h, PKRYLOV_MEM_HOST, c_loc(x), c_loc(y))
        call check(rc, A%ctx, where, ierr)
    end subroutine pk_operator_apply

    !> Destroy an operator (preconditioners and solvers using it first); null is a no-op.
    subroutine pk_operator_destroy(A, ierr)
        type(pk_operator), intent(inout) :: A !! the operator, null afterwards
        integer, intent(out), optional :: ierr !! status
        type(c_ptr), target :: h
        integer(c_int) :: rc
        h = A%h
        rc = pkrylov_operator_destroy(c_loc(h))
        call check(rc, A%ctx, 'pk_operator_destroy', ierr)
        A%h = h
        if (.not. c_associated(h)) then
            A%ctx = c_null_ptr
            if (associated(A%cb)) deallocate (A%cb)
            if (associated(A%hx)) deallocate (A%hx)
        end if
    end subroutine pk_operator_destroy

    ! ---------------------------------------------------------------------------------------------
    ! Preconditioners

    !> Create (and factorise) a preconditioner for A: PKRYLOV_PRECOND_NONE, _JACOBI or _COLUMN.
    subroutine pk_precond_create(ctx, M, A, ptype, levels, layout, ierr)
        type(pk_context), intent(in) :: ctx !! the context
        type(pk_precond), intent(out) :: M !! the new preconditioner
        type(pk_operator), intent(in) :: A !! the operator, from ctx
        integer(c_int32_t), intent(in) :: ptype !! PKRYLOV_PRECOND_*
        integer(c_int32_t), intent(in), optional :: levels !! COLUMN: vertical levels (default 0 = from A)
        integer(c_int32_t), intent(in), optional :: layout !! COLUMN: PKRYLOV_LAYOUT_* (default AUTO)
        integer, intent(out), optional :: ierr !! status
        type(c_ptr), target :: h
        integer(c_int32_t) :: lev, lay
        integer(c_int) :: rc
        lev = 0
        lay = PKRYLOV_LAYOUT_AUTO
        if (present(levels)) lev = levels
        if (present(layout)) lay = layout
        h = c_null_ptr
        rc = pkrylov_precond_create(ctx%h, A%h, ptype, lev, lay, c_loc(h))
        M%h = h
        if (rc == PKRYLOV_SUCCESS) then
            M%ctx = ctx%h
            M%n = operator_size(A%h)
        end if
        call check(rc, ctx%h, 'pk_precond_create', ierr)
    end subroutine pk_precond_create

    !> A column preconditioner from the model's own Thomas factors of every column's tridiagonal, as
    !> MITgcm's INI_CG3D stores them: zmc = 1/(aC - zML*zMU(k-1)), zmu = aV(k+1)*zmc (see
    !> pkrylov_precond_create_column_factors in pkrylov.h). zmc and zmu: n values each in the cell order of
    !> the layout, e.g. (nx,ny,nz) for a column stencil; copied.
    subroutine pk_precond_create_column_factors(ctx, M, A, zmc, zmu, levels, layout, ierr)
        type(pk_context), intent(in) :: ctx !! the context
        type(pk_precond), intent(out) :: M !! the new preconditioner (type COLUMN)
        type(pk_operator), intent(in) :: A !! the operator, from ctx
        real(c_double), intent(in), target, contiguous :: zmc(..) !! 1/den per cell, n values
        real(c_double), intent(in), target, contiguous :: zmu(..) !! coupling to k+1 times zmc, n values
        integer(c_int32_t), intent(in), optional :: levels !! vertical levels (default 0 = from A)
        integer(c_int32_t), intent(in), optional :: layout !! PKRYLOV_LAYOUT_* (default AUTO)
        integer, intent(out), optional :: ierr !! status
        character(len=*), parameter :: where = 'pk_precond_create_column_factors'
        type(c_ptr), target :: h
        integer(c_int32_t) :: lev, lay
        integer(c_int64_t) :: n
        integer(c_int) :: rc
        logical :: ok
        lev = 0
        lay = PKRYLOV_LAYOUT_AUTO
        if (present(levels)) lev = levels
        if (present(layout)) lay = layout
        if (c_associated(ctx%h) .and. c_associated(A%h)) then ! else the C library reports the null handle
            n = operator_size(A%h)
            call check_count(size(zmc, kind=c_int64_t), n, 'zmc', "the operator's size n", ctx%h, where, ok, &
                             ierr)
            if (ok) call check_count(size(zmu, kind=c_int64_t), n, 'zmu', "the operator's size n", ctx%h, &
                                     where, ok, ierr)
            if (.not. ok) return
        end if
        h = c_null_ptr
        rc = pkrylov_precond_create_column_factors(ctx%h, A%h, lev, lay, c_loc(zmc), c_loc(zmu), c_loc(h))
        M%h = h
        if (rc == PKRYLOV_SUCCESS) then
            M%ctx = ctx%h
            M%n = operator_size(A%h)
        end if
        call check(rc, ctx%h, where, ierr)
    end subroutine pk_precond_create_column_factors

    !> pk_precond_create_column_factors from MITgcm's halo-layout arrays zMC, zMU
    !> (1-OLx:sNx+OLx, 1-OLy:sNy+OLy, Nr): the interior is used, levels = Nr, layout k-slow.
    subroutine pk_precond_create_column_factors_halo(ctx, M, A, sNx, sNy, Nr, OLx, OLy, zmc, zmu, ierr)
        type(pk_context), intent(in) :: ctx !! the context
        type(pk_precond), intent(out) :: M !! the new preconditioner (type COLUMN)
        type(pk_operator), intent(in) :: A !! the operator (sNx*sNy*Nr unknowns), from ctx
        integer(c_int32_t), intent(in) :: sNx, sNy, Nr !! interior size, each >= 1
        integer(c_int32_t), intent(in) :: OLx, OLy !! halo widths, >= 0
        real(c_double), intent(in) :: zmc(1 - OLx:, 1 - OLy:, :), zmu(1 - OLx:, 1 - OLy:, :) !! factors
        integer, intent(out), optional :: ierr !! status
        character(len=*), parameter :: where = 'pk_precond_create_column_factors_halo'
        type(c_ptr), target :: h
        real(c_double), target :: z1(1)
        integer(c_int) :: rc
        logical :: ok
        if (.not. c_associated(ctx%h)) then ! the C library reports the null context
            z1 = 0
            h = c_null_ptr
            rc = pkrylov_precond_create_column_factors(ctx%h, A%h, Nr, PKRYLOV_LAYOUT_KSLOW, c_loc(z1), &
                                                       c_loc(z1), c_loc(h))
            call check(rc, ctx%h, where, ierr)
            return
        end if
        call check_halo(shape(zmc), sNx, sNy, Nr, OLx, OLy, 'zmc', ctx%h, where, ok, ierr)
        if (ok) call check_halo(shape(zmu), sNx, sNy, Nr, OLx, OLy, 'zmu', ctx%h, where, ok, ierr)
        if (.not. ok) return
        call pk_precond_create_column_factors(ctx, M, A, zmc(1:sNx, 1:sNy, :), zmu(1:sNx, 1:sNy, :), Nr, &
                                              PKRYLOV_LAYOUT_KSLOW, ierr)
    end subroutine pk_precond_create_column_factors_halo

    !> Destroy a preconditioner (solvers using it first); null is a no-op.
    subroutine pk_precond_destroy(M, ierr)
        type(pk_precond), intent(inout) :: M !! the preconditioner, null afterwards
        integer, intent(out), optional :: ierr !! status
        type(c_ptr), target :: h
        integer(c_int) :: rc
        h = M%h
        rc = pkrylov_precond_destroy(c_loc(h))
        call check(rc, M%ctx, 'pk_precond_destroy', ierr)
        M%h = h
        if (.not. c_associated(h)) then
            M%ctx = c_null_ptr
            M%n = 0
            if (associated(M%cb)) deallocate (M%cb)
        end if
    end subroutine pk_precond_destroy

    ! ---------------------------------------------------------------------------------------------
    ! Solvers

    !> Create a solver (PKRYLOV_SOLVER_CG or _PIPECG) for A with an optional preconditioner M.
    subroutine pk_solver_create(ctx, s, stype, A, M, ierr)
        type(pk_context), intent(in) :: ctx !! the context
        type(pk_solver), intent(out) :: s !! the new solver
        integer(c_int32_t), intent(in) :: stype !! PKRYLOV_SOLVER_*
        type(pk_operator), intent(in) :: A !! the operator, from ctx
        type(pk_precond), intent(in), optional :: M !! the preconditioner; omit it for none (one never
                                                    !! created or destroyed: PKRYLOV_ERR_NULL_POINTER)
        integer, intent(out), optional :: ierr !! status
        type(c_ptr), target :: h
        type(c_ptr) :: hM
        integer(c_int) :: rc
        hM = c_null_ptr
        if (present(M)) then
            if (.not. c_associated(M%h)) then ! forgotten pk_precond_create: not "no preconditioner"
                s%h = c_null_ptr
                call raise(PKRYLOV_ERR_NULL_POINTER, ctx%h, 'pk_solver_create', &
                           "argument 'M' is a type(pk_precond) that was never created by "// &
                           "pk_precond_create (or was destroyed): create it (type PKRYLOV_PRECOND_NONE "// &
                           "for the identity), or omit M for no preconditioner", ierr)
                return
            end if
            hM = M%h
        end if
        h = c_null_ptr
        rc = pkrylov_solver_create(ctx%h, stype, A%h, hM, c_loc(h))
        s%h = h
        if (rc == PKRYLOV_SUCCESS) then
            s%ctx = ctx%h
            s%n = operator_size(A%h)
        end if
        call check(rc, ctx%h, 'pk_solver_create', ierr)
    end subroutine pk_solver_create

    !> Stopping test ||r|| <= max(rtol ||b||, atol) (defaults 1e-8 and 0).
    subroutine pk_solver_set_tolerances(s, rtol, atol, ierr)
        type(pk_solver), intent(in) :: s !! the solver
        real(c_double), intent(in) :: rtol !! relative tolerance, >= 0
        real(c_double), intent(in) :: atol !! absolute tolerance, >= 0 (not both 0)
        integer, intent(out), optional :: ierr !! status
        call check(pkrylov_solver_set_tolerances(s%h, rtol, atol), s%ctx, 'pk_solver_set_tolerances', ierr)
    end subroutine pk_solver_set_tolerances

    !> Iteration cap (>= 0, default 1000).
    subroutine pk_solver_set_max_iterations(s, maxit, ierr)
        type(pk_solver), intent(in) :: s !! the solver
        integer(c_int32_t), intent(in) :: maxit !! iteration cap
        integer, intent(out), optional :: ierr !! status
        call check(pkrylov_solver_set_max_iterations(s%h, maxit), s%ctx, 'pk_solver_set_max_iterations', &
                   ierr)
    end subroutine pk_solver_set_max_iterations

    !> .true.: x holds an initial guess on entry to a solve; .false. (default): solves start from 0.
    subroutine pk_solver_set_initial_guess_nonzero(s, flag, ierr)
        type(pk_solver), intent(in) :: s !! the solver
        logical, intent(in) :: flag !! use x as the initial guess
        integer, intent(out), optional :: ierr !! status
        integer(c_int32_t) :: f
        f = merge(1_c_int32_t, 0_c_int32_t, flag)
        call check(pkrylov_solver_set_initial_guess_nonzero(s%h, f), s%ctx, &
                   'pk_solver_set_initial_guess_nonzero', ierr)
    end subroutine pk_solver_set_initial_guess_nonzero

    !> Check the solver handle and the sizes of b and x; ok = .false. when an error was handled.
    subroutine check_solve_args(s, nb, nx, where, ok, ierr)
        type(pk_solver), intent(in) :: s
        integer(c_int64_t), intent(in) :: nb, nx
        character(len=*), intent(in) :: where
        logical, intent(out) :: ok
        integer, intent(out), optional :: ierr
        ok = c_associated(s%h)
        if (.not. ok) then ! the C library reports the null handle
            call check(pkrylov_solver_solve(s%h, PKRYLOV_MEM_HOST, c_null_ptr, c_null_ptr), c_null_ptr, &
                       where, ierr)
            return
        end if
        call check_count(nb, s%n, 'b', "the operator's size n", s%ctx, where, ok, ierr)
        if (ok) call check_count(nx, s%n, 'x', "the operator's size n", s%ctx, where, ok, ierr)
    end subroutine check_solve_args

    !> Solve A x = b, real(c_double) host arrays of any shape with n values each.
    subroutine solver_solve_d(s, b, x, ierr)
        type(pk_solver), intent(in) :: s !! the solver
        real(c_double), intent(in), target, contiguous :: b(..) !! right-hand side, n values
        real(c_double), intent(inout), target, contiguous :: x(..) !! initial guess (if set) / solution
        integer, intent(out), optional :: ierr !! status (x is unchanged on failure)
        character(len=*), parameter :: where = 'pk_solver_solve'
        logical :: ok
        call check_solve_args(s, size(b, kind=c_int64_t), size(x, kind=c_int64_t), where, ok, ierr)
        if (.not. ok) return
        call check(pkrylov_solver_solve(s%h, PKRYLOV_MEM_HOST, c_loc(b), c_loc(x)), s%ctx, where, ierr)
    end subroutine solver_solve_d

    !> Solve A x = b, real(c_float) host arrays (solved in real(c_double), x rounded back).
    subroutine solver_solve_s(s, b, x, ierr)
        type(pk_solver), intent(in) :: s !! the solver
        real(c_float), intent(in), target, contiguous :: b(..) !! right-hand side, n values
        real(c_float), intent(inout), target, contiguous :: x(..) !! initial guess (if set) / solution
        integer, intent(out), optional :: ierr !! status (x is unchanged on failure)
        character(len=*), parameter :: where = 'pk_solver_solve'
        real(c_float), pointer :: bp(:), xp(:)
        real(c_double), allocatable, target :: b8(:), x8(:)
        logical :: ok
        integer(c_int) :: rc
        call check_solve_args(s, size(b, kind=c_int64_t), size(x, kind=c_int64_t), where, ok, ierr)
        if (.not. ok) return
        call c_f_pointer(c_loc(b), bp, [s%n])
        call c_f_pointer(c_loc(x), xp, [s%n])
        allocate (b8(s%n), x8(s%n))
        b8 = real(bp, c_double)
        x8 = real(xp, c_double)
        rc = pkrylov_solver_solve(s%h, PKRYLOV_MEM_HOST, c_loc(b8), c_loc(x8))
        if (rc == PKRYLOV_SUCCESS) xp = real(x8, c_float)
        call check(rc, s%ctx, where, ierr)
    end subroutine solver_solve_s

    !> Check the halo-layout arguments of a solve (sizes, shapes of b and x, n = sNx*sNy*Nr).
    subroutine check_solve_halo(s, sb, sx, sNx, sNy, Nr, OLx, OLy, where, ok, ierr)
        type(pk_solver), intent(in) :: s
        integer, intent(in) :: sb(3), sx(3)
        integer(c_int32_t), intent(in) :: sNx, sNy, Nr, OLx, OLy
        character(len=*), intent(in) :: where
        logical, intent(out) :: ok
        integer, intent(out), optional :: ierr
        ok = c_associated(s%h)
        if (.not. ok) then
            call check(pkrylov_solver_solve(s%h, PKRYLOV_MEM_HOST, c_null_ptr, c_null_ptr), c_null_ptr, &
                       where, ierr)
            return
        end if
        call check_halo(sb, sNx, sNy, Nr, OLx, OLy, 'b', s%ctx, where, ok, ierr)
        if (ok) call check_halo(sx, sNx, sNy, Nr, OLx, OLy, 'x', s%ctx, where, ok, ierr)
        if (ok) then
            ok = int(sNx, c_int64_t)*sNy*Nr == s%n
            if (.not. ok) call raise(PKRYLOV_ERR_SIZE_MISMATCH, s%ctx, where, "the interior sNx*sNy*Nr = "// &
                                     itoa(int(sNx, c_int64_t)*sNy*Nr)// &
                                     " differs from the operator's size n = "//itoa(s%n), ierr)
        end if
    end subroutine check_solve_halo

    !> Solve A x = b with real(c_double) arrays in the MITgcm halo layout.
    subroutine solver_solve_halo_d(s, b, x, sNx, sNy, Nr, OLx, OLy, ierr)
        type(pk_solver), intent(in) :: s !! the solver (n = sNx*sNy*Nr)
        integer(c_int32_t), intent(in) :: sNx, sNy, Nr !! interior size
        integer(c_int32_t), intent(in) :: OLx, OLy !! halo widths
        real(c_double), intent(in) :: b(1 - OLx:, 1 - OLy:, :) !! right-hand side
        real(c_double), intent(inout) :: x(1 - OLx:, 1 - OLy:, :) !! initial guess / solution (interior)
        integer, intent(out), optional :: ierr !! status (x is unchanged on failure)
        character(len=*), parameter :: where = 'pk_solver_solve_halo'
        real(c_double), allocatable, target :: b8(:, :, :), x8(:, :, :)
        logical :: ok
        integer(c_int) :: rc
        call check_solve_halo(s, shape(b), shape(x), sNx, sNy, Nr, OLx, OLy, where, ok, ierr)
        if (.not. ok) return
        allocate (b8(sNx, sNy, Nr), x8(sNx, sNy, Nr))
        b8 = b(1:sNx, 1:sNy, :)
        x8 = x(1:sNx, 1:sNy, :)
        rc = pkrylov_solver_solve(s%h, PKRYLOV_MEM_HOST, c_loc(b8), c_loc(x8))
        if (rc == PKRYLOV_SUCCESS) x(1:sNx, 1:sNy, :) = x8
        call check(rc, s%ctx, where, ierr)
    end subroutine solver_solve_halo_d

    !> Solve A x = b with real(c_float) arrays in the MITgcm halo layout.
    subroutine solver_solve_halo_s(s, b, x, sNx, sNy, Nr, OLx, OLy, ierr)
        type(pk_solver), intent(in) :: s !! the solver (n = sNx*sNy*Nr)
        integer(c_int32_t), intent(in) :: sNx, sNy, Nr !! interior size
        integer(c_int32_t), intent(in) :: OLx, OLy !! halo widths
        real(c_float), intent(in) :: b(1 - OLx:, 1 - OLy:, :) !! right-hand side
        real(c_float), intent(inout) :: x(1 - OLx:, 1 - OLy:, :) !! initial guess / solution (interior)
        integer, intent(out), optional :: ierr !! status (x is unchanged on failure)
        character(len=*), parameter :: where = 'pk_solver_solve_halo'
        real(c_double), allocatable, target :: b8(:, :, :), x8(:, :, :)
        logical :: ok
        integer(c_int) :: rc
        call check_solve_halo(s, shape(b), shape(x), sNx, sNy, Nr, OLx, OLy, where, ok, ierr)
        if (.not. ok) return
        allocate (b8(sNx, sNy, Nr), x8(sNx, sNy, Nr))
        b8 = real(b(1:sNx, 1:sNy, :), c_double)
        x8 = real(x(1:sNx, 1:sNy, :), c_double)
        rc = pkrylov_solver_solve(s%h, PKRYLOV_MEM_HOST, c_loc(b8), c_loc(x8))
        if (rc == PKRYLOV_SUCCESS) x(1:sNx, 1:sNy, :) = real(x8, c_float)
        call check(rc, s%ctx, where, ierr)
    end subroutine solver_solve_halo_s

    !> Solve A x = b with device arrays (CUDA context; e.g. from OpenACC host_data use_device or
    !> CUDA Fortran): b and x are device addresses of n real(c_double) values each.
    subroutine pk_solver_solve_device(s, b, x, ierr)
        type(pk_solver), intent(in) :: s !! the solver
        type(c_ptr), intent(in) :: b !! device address of the right-hand side
        type(c_ptr), intent(in) :: x !! device address of the initial guess / solution
        integer, intent(out), optional :: ierr !! status
        call check(pkrylov_solver_solve(s%h, PKRYLOV_MEM_DEVICE, b, x), s%ctx, 'pk_solver_solve_device', ierr)
    end subroutine pk_solver_solve_device

    !> y = A x with device arrays (CUDA context): x and y are device addresses of n real(c_double) values.
    subroutine pk_operator_apply_device(A, x, y, ierr)
        type(pk_operator), intent(in) :: A !! the operator
        type(c_ptr), intent(in) :: x !! device address of x
        type(c_ptr), intent(in) :: y !! device address of y, overwritten with A x
        integer, intent(out), optional :: ierr !! status
        call check(pkrylov_operator_apply(A%h, PKRYLOV_MEM_DEVICE, x, y), A%ctx, 'pk_operator_apply_device', ierr)
    end subroutine pk_operator_apply_device

    !> z = M^-1 r with device arrays (CUDA context): r and z are device addresses of n real(c_double) values.
    subroutine pk_precond_apply_device(M, r, z, ierr)
        type(pk_precond), intent(in) :: M !! the preconditioner
        type(c_ptr), intent(in) :: r !! device address of r
        type(c_ptr), intent(in) :: z !! device address of z, overwritten with M^-1 r
        integer, intent(out), optional :: ierr !! status
        call check(pkrylov_precond_apply(M%h, PKRYLOV_MEM_DEVICE, r, z), M%ctx, 'pk_precond_apply_device', ierr)
    end subroutine pk_precond_apply_device

    !> Outcome of the last solve (PKRYLOV_ERR_INVALID_STATE before the first).
    subroutine pk_solver_get_result(s, res, ierr)
        type(pk_solver), intent(in) :: s !! the solver
        type(pkrylov_result), intent(out) :: res !! iterations, reason, residuals, ...
        integer, intent(out), optional :: ierr !! status
        type(pkrylov_result), target :: r
        integer(c_int) :: rc
        rc = pkrylov_solver_get_result(s%h, c_loc(r))
        if (rc == PKRYLOV_SUCCESS) then
            res = r
        else
            res = pkrylov_result(0.0_c_double, 0.0_c_double, 0.0_c_double, 0.0_c_double, 0.0_c_double, &
                                 -1.0_c_double, 0, 0, 0, -1, 0, 0, -1)
        end if
        call check(rc, s%ctx, 'pk_solver_get_result', ierr)
    end subroutine pk_solver_get_result

    !> Destroy a solver; null is a no-op.
    subroutine pk_solver_destroy(s, ierr)
        type(pk_solver), intent(inout) :: s !! the solver, null afterwards
        integer, intent(out), optional :: ierr !! status
        type(c_ptr), target :: h
        integer(c_int) :: rc
        h = s%h
        rc = pkrylov_solver_destroy(c_loc(h))
        call check(rc, s%ctx, 'pk_solver_destroy', ierr)
        s%h = h
        if (.not. c_associated(h)) then
            s%ctx = c_null_ptr
            s%n = 0
        end if
    end subroutine pk_solver_destroy

    ! ---------------------------------------------------------------------------------------------
    ! Model routines (callbacks): user operators and preconditioners, the drop-in pk_pcg

    !> The C routine (pkrylov_apply_fn) behind every user operator and preconditioner made in this
    !> module: user points to a callback_rec; calls its model routine with the model's pointer and
    !> returns 1 when the routine called pk_callback_abort, else 0.
    function callback_trampoline(user, n, x, y) bind(C, name='pkrylov_mod_callback_trampoline') result(rc)
        type(c_ptr), value :: user
        integer(c_int64_t), value :: n
        real(c_double), intent(in) :: x(n)
        real(c_double), intent(out) :: y(n)
        integer(c_int) :: rc
        type(callback_rec), pointer :: rec
        call c_f_pointer(user, rec)
        cb_abort = .false.
        call rec%fn(rec%data, n, x, y)
        rc = merge(1_c_int, 0_c_int, cb_abort)
        cb_abort = .false.
    end function callback_trampoline

    !> Call inside a model routine (pk_apply_callback) to abort the solve: when the routine returns,
    !> the solve stops with PKRYLOV_ERR_CALLBACK (pk_pcg: info = PKRYLOV_ERR_CALLBACK, x unchanged).
    subroutine pk_callback_abort()
        cb_abort = .true.
    end subroutine pk_callback_abort

    !> A callback record for apply and ctx_ptr (null when absent), allocated (freed by the destroy).
    function new_callback_rec(apply, ctx_ptr) result(rec)
        procedure(pk_apply_callback) :: apply
        type(c_ptr), intent(in), optional :: ctx_ptr
        type(callback_rec), pointer :: rec
        allocate (rec)
        rec%fn => apply
        if (present(ctx_ptr)) rec%data = ctx_ptr
    end function new_callback_rec

    !> User operator, n of kind c_int64_t (the common part).
    subroutine operator_create_user_n8(ctx, A, n, apply, ctx_ptr, ierr)
        type(pk_context), intent(in) :: ctx !! the context (CPU backend)
        type(pk_operator), intent(out) :: A !! the new operator
        integer(c_int64_t), intent(in) :: n !! number of unknowns, > 0
        procedure(pk_apply_callback) :: apply !! y = A x (a module or external procedure: it is kept)
        type(c_ptr), intent(in), optional :: ctx_ptr !! passed to apply (default c_null_ptr)
        integer, intent(out), optional :: ierr !! status
        type(c_ptr), target :: h
        type(callback_rec), pointer :: rec
        integer(c_int) :: rc
        rec => new_callback_rec(apply, ctx_ptr)
        h = c_null_ptr
        rc = pkrylov_operator_create_user(ctx%h, n, c_funloc(callback_trampoline), c_loc(rec), c_loc(h))
        A%h = h
        if (rc == PKRYLOV_SUCCESS) then
            A%ctx = ctx%h
            A%cb => rec
        else
            deallocate (rec)
        end if
        call check(rc, ctx%h, 'pk_operator_create_user', ierr)
    end subroutine operator_create_user_n8

    !> User operator, n of kind c_int32_t.
    subroutine operator_create_user_n4(ctx, A, n, apply, ctx_ptr, ierr)
        type(pk_context), intent(in) :: ctx !! the context (CPU backend)
        type(pk_operator), intent(out) :: A !! the new operator
        integer(c_int32_t), intent(in) :: n !! number of unknowns, > 0
        procedure(pk_apply_callback) :: apply !! y = A x (a module or external procedure: it is kept)
        type(c_ptr), intent(in), optional :: ctx_ptr !! passed to apply (default c_null_ptr)
        integer, intent(out), optional :: ierr !! status
        call operator_create_user_n8(ctx, A, int(n, c_int64_t), apply, ctx_ptr, ierr)
    end subroutine operator_create_user_n4

    !> User preconditioner, n of kind c_int64_t (the common part).
    subroutine precond_create_user_n8(ctx, M, n, apply, ctx_ptr, ierr)
        type(pk_context), intent(in) :: ctx !! the context (CPU backend)
        type(pk_precond), intent(out) :: M !! the new preconditioner
        integer(c_int64_t), intent(in) :: n !! number of unknowns, > 0
        procedure(pk_apply_callback) :: apply !! y = M^-1 x (a module or external procedure: it is kept)
        type(c_ptr), intent(in), optional :: ctx_ptr !! passed to apply (default c_null_ptr)
        integer, intent(out), optional :: ierr !! status
        type(c_ptr), target :: h
        type(callback_rec), pointer :: rec
        integer(c_int) :: rc
        rec => new_callback_rec(apply, ctx_ptr)
        h = c_null_ptr
        rc = pkrylov_precond_create_user(ctx%h, n, c_funloc(callback_trampoline), c_loc(rec), c_loc(h))
        M%h = h
        if (rc == PKRYLOV_SUCCESS) then
            M%ctx = ctx%h
            M%n = n
            M%cb => rec
        else
            deallocate (rec)
        end if
        call check(rc, ctx%h, 'pk_precond_create_user', ierr)
    end subroutine precond_create_user_n8

    !> User preconditioner, n of kind c_int32_t.
    subroutine precond_create_user_n4(ctx, M, n, apply, ctx_ptr, ierr)
        type(pk_context), intent(in) :: ctx !! the context (CPU backend)
        type(pk_precond), intent(out) :: M !! the new preconditioner
        integer(c_int32_t), intent(in) :: n !! number of unknowns, > 0
        procedure(pk_apply_callback) :: apply !! y = M^-1 x (a module or external procedure: it is kept)
        type(c_ptr), intent(in), optional :: ctx_ptr !! passed to apply (default c_null_ptr)
        integer, intent(out), optional :: ierr !! status
        call precond_create_user_n8(ctx, M, int(n, c_int64_t), apply, ctx_ptr, ierr)
    end subroutine precond_create_user_n4

    !> pk_pcg with n of kind c_int32_t (default integer).
    subroutine pcg_n4(n, x, b, matvec, precond, rtol, maxit, iters, relres, info, ctx_ptr)
        integer(c_int32_t), intent(in) :: n !! number of unknowns
        real(c_double), intent(inout), target, contiguous :: x(..) !! initial guess / solution, n values
        real(c_double), intent(in), target, contiguous :: b(..) !! right-hand side, n values
        procedure(pk_apply_callback) :: matvec !! y = A x
        procedure(pk_apply_callback), optional :: precond !! y = M^-1 x (absent: no preconditioner)
        real(c_double), intent(in) :: rtol !! stop when ||b - A x|| <= rtol ||b||
        integer, intent(in) :: maxit !! iteration cap, >= 0
        integer, intent(out) :: iters !! iterations done
        real(c_double), intent(out) :: relres !! ||b - A x|| / ||b|| of the returned x (recomputed)
        integer, intent(out) :: info !! 0 converged, 1 not converged, < 0 a PKRYLOV_ERR_* code
        type(c_ptr), intent(in), optional :: ctx_ptr !! passed to matvec and precond (default null)
        call pcg_n8(int(n, c_int64_t), x, b, matvec, precond, rtol, maxit, iters, relres, info, ctx_ptr)
    end subroutine pcg_n4

    !> Drop-in preconditioned CG for a model whose PCG takes matvec/precond routines (n of kind
    !> c_int64_t; pcg_n4 forwards here). Creates a CPU context, a user operator for matvec and, when
    !> present, a user preconditioner for precond, runs CG from the initial guess x (nonzero guess)
    !> with ||b - A x|| <= rtol ||b|| confirmed on the true residual and at most maxit iterations, and
    !> destroys everything. info: 0 converged; 1 not converged (iteration cap, breakdown, stagnation;
    !> x is the last good iterate); < 0 the library's error code (bad n, sizes, rtol, maxit; a routine
    !> that called pk_callback_abort gives PKRYLOV_ERR_CALLBACK): then x is unchanged, iters = 0,
    !> relres = -1, and pk_error_message with a null pk_context gives the message.
    subroutine pcg_n8(n, x, b, matvec, precond, rtol, maxit, iters, relres, info, ctx_ptr)
        integer(c_int64_t), intent(in) :: n !! number of unknowns
        real(c_double), intent(inout), target, contiguous :: x(..) !! initial guess / solution, n values
        real(c_double), intent(in), target, contiguous :: b(..) !! right-hand side, n values
        procedure(pk_apply_callback) :: matvec !! y = A x
        procedure(pk_apply_callback), optional :: precond !! y = M^-1 x (absent: no preconditioner)
        real(c_double), intent(in) :: rtol !! stop when ||b - A x|| <= rtol ||b||
        integer, intent(in) :: maxit !! iteration cap, >= 0
        integer, intent(out) :: iters !! iterations done
        real(c_double), intent(out) :: relres !! ||b - A x|| / ||b|| of the returned x (recomputed)
        integer, intent(out) :: info !! 0 converged, 1 not converged, < 0 a PKRYLOV_ERR_* code
        type(c_ptr), intent(in), optional :: ctx_ptr !! passed to matvec and precond (default null)
        character(len=*), parameter :: where = 'pk_pcg'
        type(c_ptr), target :: hctx, hA, hM, hs
        type(callback_rec), target :: recA, recM
        type(pkrylov_result), target :: res
        real(c_double), pointer :: xp(:)
        real(c_double), allocatable :: x0(:)
        character(len=:), allocatable :: msg
        integer(c_int) :: rc, rc2
        integer :: ierr
        logical :: ok
        iters = 0
        relres = -1
        info = 0
        hctx = c_null_ptr
        hA = c_null_ptr
        hM = c_null_ptr
        hs = c_null_ptr
        ! sizes the C library cannot see (n itself is checked there)
        if (n > 0) then
            call check_count(size(x, kind=c_int64_t), n, 'x', 'n', c_null_ptr, where, ok, ierr)
            if (ok) call check_count(size(b, kind=c_int64_t), n, 'b', 'n', c_null_ptr, where, ok, ierr)
            if (.not. ok) then
                info = ierr
                return
            end if
        end if
        rc = pkrylov_context_create(PKRYLOV_BACKEND_CPU, c_loc(hctx))
        if (rc /= PKRYLOV_SUCCESS) then
            call raise(int(rc, c_int32_t), c_null_ptr, where, c_to_f_string(pkrylov_last_error_message()), &
                       info)
            return
        end if
        recA%fn => matvec
        if (present(ctx_ptr)) recA%data = ctx_ptr
        rc = pkrylov_operator_create_user(hctx, n, c_funloc(callback_trampoline), c_loc(recA), c_loc(hA))
        if (rc == PKRYLOV_SUCCESS .and. present(precond)) then
            recM%fn => precond
            recM%data = recA%data
            rc = pkrylov_precond_create_user(hctx, n, c_funloc(callback_trampoline), c_loc(recM), c_loc(hM))
        end if
        if (rc == PKRYLOV_SUCCESS) rc = pkrylov_solver_create(hctx, PKRYLOV_SOLVER_CG, hA, hM, c_loc(hs))
        if (rc == PKRYLOV_SUCCESS) rc = pkrylov_solver_set_tolerances(hs, rtol, 0.0_c_double)
        if (rc == PKRYLOV_SUCCESS) rc = pkrylov_solver_set_max_iterations(hs, int(maxit, c_int32_t))
        if (rc == PKRYLOV_SUCCESS) rc = pkrylov_solver_set_initial_guess_nonzero(hs, 1_c_int32_t)
        if (rc == PKRYLOV_SUCCESS) then
            ! a routine that aborts leaves x half updated: keep the entry value to give it back
            call c_f_pointer(c_loc(x), xp, [n])
            allocate (x0(n))
            x0 = xp
            rc = pkrylov_solver_solve(hs, PKRYLOV_MEM_HOST, c_loc(b), c_loc(x))
            if (rc /= PKRYLOV_SUCCESS) xp = x0
        end if
        if (rc == PKRYLOV_SUCCESS) rc = pkrylov_solver_get_result(hs, c_loc(res))
        if (rc == PKRYLOV_SUCCESS) then
            iters = int(res%iterations)
            relres = res%rel_residual
            info = merge(0, 1, res%converged == 1)
        else
            msg = last_message(hctx)
        end if
        ! nothing here can fail: valid handles, destroyed in order
        rc2 = pkrylov_solver_destroy(c_loc(hs))
        rc2 = pkrylov_precond_destroy(c_loc(hM))
        rc2 = pkrylov_operator_destroy(c_loc(hA))
        rc2 = pkrylov_context_destroy(c_loc(hctx))
        if (rc /= PKRYLOV_SUCCESS) call raise(int(rc, c_int32_t), c_null_ptr, where, msg, info)
    end subroutine pcg_n8

    ! ---------------------------------------------------------------------------------------------
    ! Further wrappers: solver settings and history, threads, operator export and Matrix Market files,
    ! preconditioner application and info

    !> cs = str (trailing blanks removed) as a NUL-terminated C string; cs has len_trim(str)+1 elements.
    subroutine to_c_string(str, cs)
        character(len=*), intent(in) :: str
        character(kind=c_char), intent(out) :: cs(:)
        integer :: i, n
        n = len_trim(str)
        do i = 1, n
            cs(i) = str(i:i)
        end do
        cs(n + 1) = c_null_char
    end subroutine to_c_string

    !> Recompute the true residual b - A x every k iterations (k >= 0; 0, the default, = never during
    !> the iteration). Convergence is always confirmed on the true residual of the returned x.
    subroutine pk_solver_set_true_residual_interval(s, k, ierr)
        type(pk_solver), intent(in) :: s !! the solver
        integer(c_int32_t), intent(in) :: k !! interval, >= 0
        integer, intent(out), optional :: ierr !! status
        call check(pkrylov_solver_set_true_residual_interval(s%h, k), s%ctx, &
                   'pk_solver_set_true_residual_interval', ierr)
    end subroutine pk_solver_set_true_residual_interval

    !> When a solve stops converged: PKRYLOV_STOP_CONFIRMED (default; the true residual confirms the
    !> recurrence residual) or PKRYLOV_STOP_RECURRENCE, the model's own CG rule (MITgcm's CG2D / CG2D_SR /
    !> CG3D: sum r^2 < tol^2 on the recurrence residual, tested before the first iteration, no
    !> confirmation; res%final_residual is then the last recurrence residual, the model's lastResidual).
    !> Every solver type. Another value: PKRYLOV_ERR_INVALID_VALUE.
    subroutine pk_solver_set_stop_rule(s, rule, ierr)
        type(pk_solver), intent(in) :: s !! the solver
        integer(c_int32_t), intent(in) :: rule !! PKRYLOV_STOP_CONFIRMED or PKRYLOV_STOP_RECURRENCE
        integer, intent(out), optional :: ierr !! status
        call check(pkrylov_solver_set_stop_rule(s%h, rule), s%ctx, 'pk_solver_set_stop_rule', ierr)
    end subroutine pk_solver_set_stop_rule

    !> Minimum-residual iterate (MITgcm's cg2dUseMinResSol): .true. returns the iterate of the smallest
    !> recurrence residual when the last one is larger (res%min_residual, res%min_residual_iteration say
    !> which). CG, pipelined CG and single-reduction CG; .true. with another solver type is
    !> PKRYLOV_ERR_UNSUPPORTED.
    subroutine pk_solver_set_min_residual(s, flag, ierr)
        type(pk_solver), intent(in) :: s !! the solver
        logical, intent(in) :: flag !! on or off (default off)
        integer, intent(out), optional :: ierr !! status
        call check(pkrylov_solver_set_min_residual(s%h, merge(1_c_int32_t, 0_c_int32_t, flag)), s%ctx, &
                   'pk_solver_set_min_residual', ierr)
    end subroutine pk_solver_set_min_residual

    !> Pipelined CG: residual replacement by the automatic rule (k = PKRYLOV_REPLACE_AUTO, the default) or
    !> every k iterations (k >= 0; 0 = never); pipelined BiCGStab: every k (50 with PKRYLOV_REPLACE_AUTO).
    !> Ignored by the other types.
    subroutine pk_solver_set_residual_replacement(s, k, ierr)
        type(pk_solver), intent(in) :: s !! the solver
        integer(c_int32_t), intent(in) :: k !! PKRYLOV_REPLACE_AUTO or an interval >= 0
        integer, intent(out), optional :: ierr !! status
        call check(pkrylov_solver_set_residual_replacement(s%h, k), s%ctx, &
                   'pk_solver_set_residual_replacement', ierr)
    end subroutine pk_solver_set_residual_replacement

    !> Stop with PKRYLOV_DIVERGED_STAGNATION when the residual has not fallen below (1 - 1e-3) times its
    !> best value for window consecutive iterations (window >= 0; 0, the default, = off).
    subroutine pk_solver_set_stagnation_window(s, window, ierr)
        type(pk_solver), intent(in) :: s !! the solver
        integer(c_int32_t), intent(in) :: window !! iterations, >= 0
        integer, intent(out), optional :: ierr !! status
        call check(pkrylov_solver_set_stagnation_window(s%h, window), s%ctx, &
                   'pk_solver_set_stagnation_window', ierr)
    end subroutine pk_solver_set_stagnation_window

    !> Precision of the stored coefficients: PKRYLOV_PRECISION_FP64 (default), _MIXED_PRECOND or _MIXED
    !> (CUDA backend only; the CPU backend answers PKRYLOV_ERR_UNSUPPORTED for the mixed ones).
    subroutine pk_solver_set_precision(s, precision, ierr)
        type(pk_solver), intent(in) :: s !! the solver
        integer(c_int32_t), intent(in) :: precision !! PKRYLOV_PRECISION_*
        integer, intent(out), optional :: ierr !! status
        call check(pkrylov_solver_set_precision(s%h, precision), s%ctx, 'pk_solver_set_precision', ierr)
    end subroutine pk_solver_set_precision

    !> CUDA backend: the host reads the device state every k iterations (1..4096, default 32). No effect
    !> on the CPU backend (the value is still checked).
    subroutine pk_solver_set_sync_interval(s, k, ierr)
        type(pk_solver), intent(in) :: s !! the solver
        integer(c_int32_t), intent(in) :: k !! interval, 1..4096
        integer, intent(out), optional :: ierr !! status
        call check(pkrylov_solver_set_sync_interval(s%h, k), s%ctx, 'pk_solver_set_sync_interval', ierr)
    end subroutine pk_solver_set_sync_interval

    !> GMRES family: restart length m (Krylov vectors per cycle), 1 <= m <= 1000, default 30; CA-GMRES
    !> rounds m up to a multiple of its step. Ignored by CG, pipelined CG and the BiCGStab family (the value
    !> is still checked).
    subroutine pk_solver_set_restart(s, m, ierr)
        type(pk_solver), intent(in) :: s !! the solver
        integer(c_int32_t), intent(in) :: m !! restart length, 1..1000
        integer, intent(out), optional :: ierr !! status
        call check(pkrylov_solver_set_restart(s%h, m), s%ctx, 'pk_solver_set_restart', ierr)
    end subroutine pk_solver_set_restart

    !> CA-GMRES: step size (matrix-powers depth, basis vectors per block), 1..16, or 0 = auto (default:
    !> chosen from 2, 4, 8 by the time per basis vector measured in the first restart cycle). Ignored by
    !> the other solvers (the value is still checked).
    subroutine pk_solver_set_step(s, step, ierr)
        type(pk_solver), intent(in) :: s !! the solver
        integer(c_int32_t), intent(in) :: step !! step size, 0..16 (0 = auto)
        integer, intent(out), optional :: ierr !! status
        call check(pkrylov_solver_set_step(s%h, step), s%ctx, 'pk_solver_set_step', ierr)
    end subroutine pk_solver_set_step

    !> .true.: record the recurrence residual norm of every iteration (pk_solver_get_history); .false.
    !> (default): do not.
    subroutine pk_solver_set_history(s, flag, ierr)
        type(pk_solver), intent(in) :: s !! the solver
        logical, intent(in) :: flag !! record the history
        integer, intent(out), optional :: ierr !! status
        call check(pkrylov_solver_set_history(s%h, merge(1_c_int32_t, 0_c_int32_t, flag)), s%ctx, &
                   'pk_solver_set_history', ierr)
    end subroutine pk_solver_set_history

    !> Residual history of the last solve (needs pk_solver_set_history(s, .true.) before it): hist(i+1) is
    !> the recurrence residual norm after iteration i (hist(1) the initial one). The first
    !> min(size(hist), length) values are written (the rest of hist is left as it is); length receives the
    !> full length (iterations + 1). A zero-size hist asks for the length only.
    subroutine pk_solver_get_history(s, hist, length, ierr)
        type(pk_solver), intent(in) :: s !! the solver
        real(c_double), intent(inout), target, contiguous :: hist(:) !! the history (capacity size(hist))
        integer(c_int32_t), intent(out) :: length !! full length of the history
        integer, intent(out), optional :: ierr !! status
        integer(c_int32_t), target :: len
        type(c_ptr) :: ph
        integer(c_int32_t) :: cap
        integer(c_int) :: rc
        ph = c_null_ptr
        cap = int(min(size(hist, kind=c_int64_t), int(huge(cap), c_int64_t)), c_int32_t)
        if (cap > 0) ph = c_loc(hist)
        len = 0
        rc = pkrylov_solver_get_history(s%h, cap, ph, c_loc(len))
        length = len
        call check(rc, s%ctx, 'pk_solver_get_history', ierr)
    end subroutine pk_solver_get_history

    !> Set the monitor fn (a bind(C) function of the pk_monitor_callback interface: a module procedure or
    !> an external one, it must stay valid while the solver uses it) with its user pointer (default
    !> c_null_ptr); without fn the monitor is removed.
    subroutine pk_solver_set_monitor(s, fn, user, ierr)
        type(pk_solver), intent(in) :: s !! the solver
        procedure(pk_monitor_callback), optional :: fn !! the monitor (absent: remove it)
        type(c_ptr), intent(in), optional :: user !! passed to fn (default c_null_ptr)
        integer, intent(out), optional :: ierr !! status
        type(c_funptr) :: pf
        type(c_ptr) :: pu
        pf = c_null_funptr
        pu = c_null_ptr
        if (present(fn)) pf = c_funloc(fn)
        if (present(user)) pu = user
        call check(pkrylov_solver_set_monitor(s%h, pf, pu), s%ctx, 'pk_solver_set_monitor', ierr)
    end subroutine pk_solver_set_monitor

    !> Number of OpenMP threads the CPU backend uses for this context, at most PKRYLOV_MAX_THREADS
    !> (PKRYLOV_ERR_INVALID_VALUE above); n <= 0 restores the default (see pk_context_get_num_threads).
    subroutine pk_context_set_num_threads(ctx, n, ierr)
        type(pk_context), intent(in) :: ctx !! the context
        integer(c_int32_t), intent(in) :: n !! threads (<= 0: default)
        integer, intent(out), optional :: ierr !! status
        call check(pkrylov_context_set_num_threads(ctx%h, n), ctx%h, 'pk_context_set_num_threads', ierr)
    end subroutine pk_context_set_num_threads

    !> The number of OpenMP threads the context's loops use now: the count set, or the default, which
    !> never oversubscribes: the cores available to the process (its affinity mask, capped by
    !> OMP_NUM_THREADS when set); after pk_context_set_comm, this rank's share of its node's cores (those
    !> cores divided by the ranks of the communicator on the node that share them, at least 1); 1 when
    !> called inside an active OpenMP parallel region of the model.
    subroutine pk_context_get_num_threads(ctx, n, ierr)
        type(pk_context), intent(in) :: ctx !! the context
        integer(c_int32_t), intent(out), target :: n !! the count
        integer, intent(out), optional :: ierr !! status
        n = 0
        call check(pkrylov_context_get_num_threads(ctx%h, c_loc(n)), ctx%h, 'pk_context_get_num_threads', ierr)
    end subroutine pk_context_get_num_threads

    !> Forget the last error of the context (pk_error_message then gives "").
    subroutine pk_context_clear_error(ctx, ierr)
        type(pk_context), intent(in) :: ctx !! the context
        integer, intent(out), optional :: ierr !! status
        integer(c_int) :: rc
        rc = pkrylov_context_clear_error(ctx%h)
        if (rc == PKRYLOV_SUCCESS) call forget_ferr(ctx%h)
        call check(rc, ctx%h, 'pk_context_clear_error', ierr)
    end subroutine pk_context_clear_error

    !> The library's version at run time (every output optional).
    subroutine pk_get_version(major, minor, patch)
        integer(c_int32_t), intent(out), optional :: major, minor, patch !! version numbers
        integer(c_int32_t), target :: v(3)
        integer(c_int) :: rc
        v = 0
        rc = pkrylov_get_version(c_loc(v(1)), c_loc(v(2)), c_loc(v(3))) ! cannot fail with valid pointers
        if (present(major)) major = v(1)
        if (present(minor)) minor = v(2)
        if (present(patch)) patch = v(3)
    end subroutine pk_get_version

    !> .true. when the CUDA backend loads (built in; shared builds: its plugin libpkrylov_cuda.so beside
    !> libpkrylov.so); whether a driver and a device exist shows at pk_context_create.
    function pk_has_cuda() result(flag)
        logical :: flag
        flag = pkrylov_has_cuda() == 1
    end function pk_has_cuda

    !> .true. when the CUDA backend was built with NCCL (device-to-device halos and sums of distributed CUDA
    !> solves).
    function pk_has_nccl() result(flag)
        logical :: flag
        flag = pkrylov_has_nccl() == 1
    end function pk_has_nccl

    !> .true. when the CPU backend was compiled with OpenMP.
    function pk_has_openmp() result(flag)
        logical :: flag
        flag = pkrylov_has_openmp() == 1
    end function pk_has_openmp

    !> One line saying what the context runs on, e.g. "CPU backend, 8 OpenMP threads" or "CUDA backend on
    !> NVIDIA H100 80GB HBM3 (device 0 of 4)" (", rank R of N" on a communicator of several ranks), for the
    !> model's log; cut to len(text), blank-padded.
    subroutine pk_context_describe(ctx, text, ierr)
        type(pk_context), intent(in) :: ctx !! the context
        character(len=*), intent(out) :: text !! the description
        integer, intent(out), optional :: ierr !! status
        character(kind=c_char), target :: buf(MSG_LEN)
        integer(c_int) :: rc
        integer :: i
        text = ''
        rc = pkrylov_context_describe(ctx%h, c_loc(buf), int(MSG_LEN, c_int32_t))
        if (rc == PKRYLOV_SUCCESS) then
            do i = 1, min(len(text), MSG_LEN)
                if (buf(i) == c_null_char) exit
                text(i:i) = buf(i)
            end do
        end if
        call check(rc, ctx%h, 'pk_context_describe', ierr)
    end subroutine pk_context_describe

    !> Copy the NUL-terminated text of buf into text (cut to len(text), blank-padded).
    subroutine from_c_buf(buf, text)
        character(kind=c_char), intent(in) :: buf(:)
        character(len=*), intent(out) :: text
        integer :: i
        text = ''
        do i = 1, min(len(text), size(buf))
            if (buf(i) == c_null_char) exit
            text(i:i) = buf(i)
        end do
    end subroutine from_c_buf

    !> Set one option of the context by name, e.g. call pk_context_set_option(ctx, 'cuda.csr_format', 'dia').
    !> An unknown name or a value the option does not accept is PKRYLOV_ERR_BAD_OPTION (the message names
    !> the option and what it accepts). Trailing blanks of name and value are ignored.
    subroutine pk_context_set_option(ctx, name, value, ierr)
        type(pk_context), intent(in) :: ctx !! the context
        character(len=*), intent(in) :: name !! the option's name, e.g. 'kry.graph'
        character(len=*), intent(in) :: value !! its value as text, e.g. '0', 'auto', 'dia'
        integer, intent(out), optional :: ierr !! status
        character(kind=c_char), target :: cname(len_trim(name) + 1), cvalue(len_trim(value) + 1)
        call to_c_string(name, cname)
        call to_c_string(value, cvalue)
        call check(pkrylov_context_set_option(ctx%h, c_loc(cname), c_loc(cvalue)), ctx%h, &
                   'pk_context_set_option', ierr)
    end subroutine pk_context_set_option

    !> Set several options of the context from whitespace-separated key=value pairs (the syntax of the
    !> environment variable PKRYLOV_OPTIONS), all or none.
    subroutine pk_context_set_options(ctx, options, ierr)
        type(pk_context), intent(in) :: ctx !! the context
        character(len=*), intent(in) :: options !! e.g. 'cuda.kc=16 kry.graph=0'
        integer, intent(out), optional :: ierr !! status
        character(kind=c_char), target :: copts(len_trim(options) + 1)
        call to_c_string(options, copts)
        call check(pkrylov_context_set_options(ctx%h, c_loc(copts)), ctx%h, 'pk_context_set_options', ierr)
    end subroutine pk_context_set_options

    !> The value of one option of the context as text ('1', 'auto', 'dia', ...), blank-padded.
    subroutine pk_context_get_option(ctx, name, value, ierr)
        type(pk_context), intent(in) :: ctx !! the context
        character(len=*), intent(in) :: name !! the option's name
        character(len=*), intent(out) :: value !! its value
        integer, intent(out), optional :: ierr !! status
        character(kind=c_char), target :: cname(len_trim(name) + 1), buf(64)
        integer(c_int) :: rc
        call to_c_string(name, cname)
        buf = c_null_char
        rc = pkrylov_context_get_option(ctx%h, c_loc(cname), c_loc(buf), int(size(buf), c_int32_t))
        call from_c_buf(buf, value)
        call check(rc, ctx%h, 'pk_context_get_option', ierr)
    end subroutine pk_context_get_option

    !> Set one solver-level option of the solver (its copy, taken from the context at pk_solver_create).
    !> A context-level option is PKRYLOV_ERR_BAD_OPTION naming it.
    subroutine pk_solver_set_option(s, name, value, ierr)
        type(pk_solver), intent(in) :: s !! the solver
        character(len=*), intent(in) :: name !! the option's name, e.g. 'cuda.fold'
        character(len=*), intent(in) :: value !! its value as text
        integer, intent(out), optional :: ierr !! status
        character(kind=c_char), target :: cname(len_trim(name) + 1), cvalue(len_trim(value) + 1)
        call to_c_string(name, cname)
        call to_c_string(value, cvalue)
        call check(pkrylov_solver_set_option(s%h, c_loc(cname), c_loc(cvalue)), s%ctx, 'pk_solver_set_option', ierr)
    end subroutine pk_solver_set_option

    !> The value of one option as the solver sees it (its own for solver-level options, the context's
    !> for context-level ones), blank-padded.
    subroutine pk_solver_get_option(s, name, value, ierr)
        type(pk_solver), intent(in) :: s !! the solver
        character(len=*), intent(in) :: name !! the option's name
        character(len=*), intent(out) :: value !! its value
        integer, intent(out), optional :: ierr !! status
        character(kind=c_char), target :: cname(len_trim(name) + 1), buf(64)
        integer(c_int) :: rc
        call to_c_string(name, cname)
        buf = c_null_char
        rc = pkrylov_solver_get_option(s%h, c_loc(cname), c_loc(buf), int(size(buf), c_int32_t))
        call from_c_buf(buf, value)
        call check(rc, s%ctx, 'pk_solver_get_option', ierr)
    end subroutine pk_solver_get_option

    !> The number of options the library knows (the lines of pk_option_describe).
    function pk_option_count() result(n)
        integer :: n
        n = int(pkrylov_option_count())
    end function pk_option_count

    !> One line describing option i (1 <= i <= pk_option_count()): name, values, level, default, help.
    subroutine pk_option_describe(i, text, ierr)
        integer, intent(in) :: i !! 1-based index
        character(len=*), intent(out) :: text !! the line, cut to len(text)
        integer, intent(out), optional :: ierr !! status
        character(kind=c_char), target :: buf(MSG_LEN)
        integer(c_int) :: rc
        buf = c_null_char
        rc = pkrylov_option_describe(int(i - 1, c_int32_t), c_loc(buf), int(MSG_LEN, c_int32_t))
        call from_c_buf(buf, text)
        call check(rc, c_null_ptr, 'pk_option_describe', ierr)
    end subroutine pk_option_describe

    !> Size n, stored nonzeros nnz of the equivalent CSR matrix (-1 when there is no CSR form: user and
    !> halo-exchange operators), kind type (PKRYLOV_OPERATOR_*) and grid nx, ny, nz (0 for CSR and user
    !> operators). Every output is optional.
    subroutine pk_operator_get_info(A, n, nnz, type, nx, ny, nz, ierr)
        type(pk_operator), intent(in) :: A !! the operator
        integer(c_int64_t), intent(out), optional :: n !! rows = columns
        integer(c_int64_t), intent(out), optional :: nnz !! stored nonzeros (-1: none)
        integer(c_int32_t), intent(out), optional :: type !! PKRYLOV_OPERATOR_*
        integer(c_int32_t), intent(out), optional :: nx, ny, nz !! grid (0 for CSR and user operators)
        integer, intent(out), optional :: ierr !! status
        integer(c_int64_t), target :: n8, nnz8
        integer(c_int32_t), target :: t, gx, gy, gz
        integer(c_int) :: rc
        n8 = 0
        nnz8 = 0
        t = 0
        gx = 0
        gy = 0
        gz = 0
        rc = pkrylov_operator_get_info(A%h, c_loc(n8), c_loc(nnz8), c_loc(t), c_loc(gx), c_loc(gy), &
                                       c_loc(gz))
        if (present(n)) n = n8
        if (present(nnz)) nnz = nnz8
        if (present(type)) type = t
        if (present(nx)) nx = gx
        if (present(ny)) ny = gy
        if (present(nz)) nz = gz
        call check(rc, A%ctx, 'pk_operator_get_info', ierr)
    end subroutine pk_operator_get_info

    !> The operator as a CSR matrix with sorted columns (pk_operator_get_info gives n and nnz): rowptr needs
    !> at least n+1 values, colind and values at least nnz (PKRYLOV_ERR_SIZE_MISMATCH otherwise; the first
    !> n+1 and nnz are written). index_base 0 (default, C numbering: rowptr(1) = 0) or 1 (Fortran numbering:
    !> row i holds entries rowptr(i) .. rowptr(i+1)-1, columns 1..n). User and halo-exchange operators have
    !> no CSR form (PKRYLOV_ERR_UNSUPPORTED).
    subroutine pk_operator_get_csr(A, rowptr, colind, values, index_base, ierr)
        type(pk_operator), intent(in) :: A !! the operator
        integer(c_int64_t), intent(inout), target, contiguous :: rowptr(:) !! n+1 row starts
        integer(c_int64_t), intent(inout), target, contiguous :: colind(:) !! nnz column indices
        real(c_double), intent(inout), target, contiguous :: values(:) !! nnz values
        integer(c_int32_t), intent(in), optional :: index_base !! 0 (default) or 1
        integer, intent(out), optional :: ierr !! status (the arrays are unchanged on failure)
        character(len=*), parameter :: where = 'pk_operator_get_csr'
        integer(c_int64_t), allocatable, target :: rp(:), ci(:)
        real(c_double), allocatable, target :: va(:)
        integer(c_int64_t), target :: n, nnz
        integer(c_int32_t) :: base
        integer(c_int) :: rc
        base = 0
        if (present(index_base)) base = index_base
        if (.not. c_associated(A%h)) then ! the C library reports the null handle
            call check(pkrylov_operator_get_csr(A%h, c_null_ptr, c_null_ptr, c_null_ptr), c_null_ptr, where, &
                       ierr)
            return
        end if
        if (base /= 0 .and. base /= 1) then
            call raise(PKRYLOV_ERR_INVALID_VALUE, A%ctx, where, "argument 'index_base' = "// &
                       itoa(int(base, c_int64_t))//" must be 0 or 1", ierr)
            return
        end if
        rc = pkrylov_operator_get_info(A%h, c_loc(n), c_loc(nnz), c_null_ptr, c_null_ptr, c_null_ptr, &
                                       c_null_ptr)
        if (rc == PKRYLOV_SUCCESS .and. nnz < 0) then ! no CSR form: the C library says why
            rc = pkrylov_operator_get_csr(A%h, c_loc(dummy_d), c_loc(dummy_d), c_loc(dummy_d))
        end if
        if (rc /= PKRYLOV_SUCCESS) then
            call check(rc, A%ctx, where, ierr)
            return
        end if
        if (size(rowptr, kind=c_int64_t) < n + 1) then
            call raise(PKRYLOV_ERR_SIZE_MISMATCH, A%ctx, where, "argument 'rowptr' has "// &
                       itoa(size(rowptr, kind=c_int64_t))//" values, fewer than n+1 = "//itoa(n + 1), ierr)
            return
        end if
        if (size(colind, kind=c_int64_t) < nnz) then
            call raise(PKRYLOV_ERR_SIZE_MISMATCH, A%ctx, where, "argument 'colind' has "// &
                       itoa(size(colind, kind=c_int64_t))//" values, fewer than nnz = "//itoa(nnz), ierr)
            return
        end if
        if (size(values, kind=c_int64_t) < nnz) then
            call raise(PKRYLOV_ERR_SIZE_MISMATCH, A%ctx, where, "argument 'values' has "// &
                       itoa(size(values, kind=c_int64_t))//" values, fewer than nnz = "//itoa(nnz), ierr)
            return
        end if
        ! into temporaries (at least one value each), so that a failure leaves the arrays unchanged
        allocate (rp(n + 1), ci(max(nnz, 1_c_int64_t)), va(max(nnz, 1_c_int64_t)))
        rc = pkrylov_operator_get_csr(A%h, c_loc(rp), c_loc(ci), c_loc(va))
        if (rc == PKRYLOV_SUCCESS) then
            rowptr(1:n + 1) = rp + base
            colind(1:nnz) = ci(1:nnz) + base
            values(1:nnz) = va(1:nnz)
        end if
        call check(rc, A%ctx, where, ierr)
    end subroutine pk_operator_get_csr

    !> A CSR operator read from a Matrix Market file (a square matrix in coordinate format). File errors:
    !> PKRYLOV_ERR_FILE_IO; malformed files: PKRYLOV_ERR_FILE_FORMAT (the message names the line).
    subroutine pk_operator_create_from_mtx(ctx, A, path, ierr)
        type(pk_context), intent(in) :: ctx !! the context
        type(pk_operator), intent(out) :: A !! the new operator
        character(len=*), intent(in) :: path !! file name (trailing blanks ignored)
        integer, intent(out), optional :: ierr !! status
        character(kind=c_char), target :: cpath(len_trim(path) + 1)
        type(c_ptr), target :: h
        integer(c_int) :: rc
        call to_c_string(path, cpath)
        h = c_null_ptr
        rc = pkrylov_operator_create_from_mtx(ctx%h, c_loc(cpath), c_loc(h))
        A%h = h
        if (rc == PKRYLOV_SUCCESS) A%ctx = ctx%h
        call check(rc, ctx%h, 'pk_operator_create_from_mtx', ierr)
    end subroutine pk_operator_create_from_mtx

    !> Write the operator to a Matrix Market file (coordinate real general, 1-based, 17 digits).
    subroutine pk_operator_write_mtx(A, path, ierr)
        type(pk_operator), intent(in) :: A !! the operator (not a user or halo-exchange one)
        character(len=*), intent(in) :: path !! file name (trailing blanks ignored)
        integer, intent(out), optional :: ierr !! status
        character(kind=c_char), target :: cpath(len_trim(path) + 1)
        call to_c_string(path, cpath)
        call check(pkrylov_operator_write_mtx(A%h, c_loc(cpath)), A%ctx, 'pk_operator_write_mtx', ierr)
    end subroutine pk_operator_write_mtx

    !> Read a vector from a Matrix Market file ("array" or "coordinate" with one column; missing
    !> coordinate entries are 0): v is allocated to the file's length. On failure v is not allocated.
    !> ctx may be a null pk_context (the message is then the one without a context).
    subroutine pk_mtx_read_vector(ctx, path, v, n, ierr)
        type(pk_context), intent(in) :: ctx !! the context (or a null one)
        character(len=*), intent(in) :: path !! file name (trailing blanks ignored)
        real(c_double), allocatable, target, intent(out) :: v(:) !! the vector
        integer(c_int64_t), intent(out), optional :: n !! its length
        integer, intent(out), optional :: ierr !! status
        character(kind=c_char), target :: cpath(len_trim(path) + 1)
        integer(c_int64_t), target :: len, len2
        type(c_ptr) :: pv
        integer(c_int) :: rc
        call to_c_string(path, cpath)
        len = 0
        len2 = 0
        if (present(n)) n = 0
        ! the length first (the whole file is checked), then the values
        rc = pkrylov_mtx_read_vector(ctx%h, c_loc(cpath), 0_c_int64_t, c_null_ptr, c_loc(len))
        if (rc == PKRYLOV_SUCCESS) then
            allocate (v(len))
            pv = c_loc(dummy_d)
            if (len > 0) pv = c_loc(v)
            rc = pkrylov_mtx_read_vector(ctx%h, c_loc(cpath), len, pv, c_loc(len2))
            if (rc == PKRYLOV_SUCCESS .and. len2 /= len) then ! the file changed between the two reads
                call raise(PKRYLOV_ERR_FILE_FORMAT, ctx%h, 'pk_mtx_read_vector', "the file '"//trim(path)// &
                           "' changed while it was read", ierr)
                deallocate (v)
                return
            end if
            if (rc /= PKRYLOV_SUCCESS) deallocate (v)
            if (rc == PKRYLOV_SUCCESS .and. present(n)) n = len
        end if
        call check(rc, ctx%h, 'pk_mtx_read_vector', ierr)
    end subroutine pk_mtx_read_vector

    !> Write a vector (host array of any shape; its values in array element order) as a Matrix Market
    !> "array real general" file with 17 digits. ctx may be a null pk_context.
    subroutine pk_mtx_write_vector(ctx, path, v, ierr)
        type(pk_context), intent(in) :: ctx !! the context (or a null one)
        character(len=*), intent(in) :: path !! file name (trailing blanks ignored)
        real(c_double), intent(in), target, contiguous :: v(..) !! the values
        integer, intent(out), optional :: ierr !! status
        character(kind=c_char), target :: cpath(len_trim(path) + 1)
        type(c_ptr) :: pv
        call to_c_string(path, cpath)
        pv = c_loc(dummy_d)
        if (size(v) > 0) pv = c_loc(v)
        call check(pkrylov_mtx_write_vector(ctx%h, c_loc(cpath), size(v, kind=c_int64_t), pv), ctx%h, &
                   'pk_mtx_write_vector', ierr)
    end subroutine pk_mtx_write_vector

    !> z = M^-1 r for host arrays of any shape with n values each (the size of the preconditioner).
    subroutine pk_precond_apply(M, r, z, ierr)
        type(pk_precond), intent(in) :: M !! the preconditioner
        real(c_double), intent(in), target, contiguous :: r(..) !! n values
        real(c_double), intent(inout), target, contiguous :: z(..) !! n values, overwritten with M^-1 r
        integer, intent(out), optional :: ierr !! status
        character(len=*), parameter :: where = 'pk_precond_apply'
        logical :: ok
        if (.not. c_associated(M%h)) then ! the C library reports the null handle
            call check(pkrylov_precond_apply(M%h, PKRYLOV_MEM_HOST, c_null_ptr, c_null_ptr), c_null_ptr, &
                       where, ierr)
            return
        end if
        call check_count(size(r, kind=c_int64_t), M%n, 'r', "the preconditioner's size n", M%ctx, where, ok, &
                         ierr)
        if (ok) call check_count(size(z, kind=c_int64_t), M%n, 'z', "the preconditioner's size n", M%ctx, &
                                 where, ok, ierr)
        if (.not. ok) return
        call check(pkrylov_precond_apply(M%h, PKRYLOV_MEM_HOST, c_loc(r), c_loc(z)), M%ctx, where, ierr)
    end subroutine pk_precond_apply

    !> Type (PKRYLOV_PRECOND_*), levels and layout (PKRYLOV_LAYOUT_*) actually used; every output optional.
    subroutine pk_precond_get_info(M, type, levels, layout, ierr)
        type(pk_precond), intent(in) :: M !! the preconditioner
        integer(c_int32_t), intent(out), optional :: type !! PKRYLOV_PRECOND_*
        integer(c_int32_t), intent(out), optional :: levels !! vertical levels
        integer(c_int32_t), intent(out), optional :: layout !! PKRYLOV_LAYOUT_*
        integer, intent(out), optional :: ierr !! status
        integer(c_int32_t), target :: t, lev, lay
        integer(c_int) :: rc
        t = 0
        lev = 0
        lay = 0
        rc = pkrylov_precond_get_info(M%h, c_loc(t), c_loc(lev), c_loc(lay))
        if (present(type)) type = t
        if (present(levels)) levels = lev
        if (present(layout)) layout = lay
        call check(rc, M%ctx, 'pk_precond_get_info', ierr)
    end subroutine pk_precond_get_info

    ! ---------------------------------------------------------------------------------------------
    ! Handle-based reverse communication (pkrylov_rci_*)

    !> Create a reverse-communication solve of size n (type PKRYLOV_SOLVER_*: CG, PIPECG, BICGSTAB,
    !> PIPEBICGSTAB, GMRES, PIPEGMRES, FGMRES, CAGMRES, SRCG; preconditioned, reduce_by_caller: 0 or 1).
    subroutine pk_rci_create(ctx, r, type, n, preconditioned, reduce_by_caller, ierr)
        type(pk_context), intent(in) :: ctx !! the context
        type(pk_rci), intent(out) :: r !! the new handle
        integer(c_int32_t), intent(in) :: type, preconditioned, reduce_by_caller
        integer(c_int64_t), intent(in) :: n !! number of unknowns
        integer, intent(out), optional :: ierr !! status
        type(c_ptr), target :: h
        integer(c_int) :: rc
        h = c_null_ptr
        rc = pkrylov_rci_create(ctx%h, type, n, preconditioned, reduce_by_caller, c_loc(h))
        call check(rc, ctx%h, 'pk_rci_create', ierr)
        if (rc == PKRYLOV_SUCCESS) then
            r%h = h
            r%ctx = ctx%h
            r%n = n
        end if
    end subroutine pk_rci_create

    !> GMRES family: restart length m (1..1000, default 30).
    subroutine pk_rci_set_restart(r, m, ierr)
        type(pk_rci), intent(in) :: r !! the handle
        integer(c_int32_t), intent(in) :: m !! Krylov vectors per cycle
        integer, intent(out), optional :: ierr !! status
        call check(pkrylov_rci_set_restart(r%h, m), r%ctx, 'pk_rci_set_restart', ierr)
    end subroutine pk_rci_set_restart

    !> CA-GMRES: step size (1..16, or 0 = auto, the default).
    subroutine pk_rci_set_step(r, step, ierr)
        type(pk_rci), intent(in) :: r !! the handle
        integer(c_int32_t), intent(in) :: step !! basis vectors per block
        integer, intent(out), optional :: ierr !! status
        call check(pkrylov_rci_set_step(r%h, step), r%ctx, 'pk_rci_set_step', ierr)
    end subroutine pk_rci_set_step

    !> Start a solve of A x = b; b and x (n values, host) must stay in place (target) until the step
    !> that returns PKRYLOV_RCI_DONE, which writes x (the solve works on the handle's own copy).
    subroutine pk_rci_start(r, b, x, x_nonzero, ierr)
        type(pk_rci), intent(in) :: r !! the handle
        real(c_double), intent(in), target, contiguous :: b(:) !! right-hand side
        real(c_double), intent(inout), target, contiguous :: x(:) !! initial guess (x_nonzero 1), solution
        integer(c_int32_t), intent(in) :: x_nonzero !! 1: x holds an initial guess
        integer, intent(out), optional :: ierr !! status
        logical :: ok
        call check_count(size(b, kind=c_int64_t), r%n, 'b', 'the rci size', r%ctx, 'pk_rci_start', ok, ierr)
        if (.not. ok) return
        call check_count(size(x, kind=c_int64_t), r%n, 'x', 'the rci size', r%ctx, 'pk_rci_start', ok, ierr)
        if (.not. ok) return
        call check(pkrylov_rci_start(r%h, PKRYLOV_MEM_HOST, c_loc(b), c_loc(x), x_nonzero), r%ctx, &
                   'pk_rci_start', ierr)
    end subroutine pk_rci_start

    !> Next request (PKRYLOV_RCI_*). MATVEC: out = A in; PRECOND: out = M^-1 in (n values each);
    !> REDUCE_START/WAIT: global sum of partials(:) in place. Pointers not used by a request are nullified.
    subroutine pk_rci_step(r, request, in, out, partials, ierr)
        type(pk_rci), intent(in) :: r !! the handle
        integer(c_int32_t), intent(out) :: request !! PKRYLOV_RCI_*
        real(c_double), pointer, intent(out) :: in(:), out(:) !! operand and result (MATVEC, PRECOND)
        real(c_double), pointer, intent(out), optional :: partials(:) !! local values to sum (REDUCE_*)
        integer, intent(out), optional :: ierr !! status
        type(c_ptr) :: pin, pout
        integer(c_int) :: rc
        call rci_step_raw(r, request, pin, pout, rc, partials)
        nullify (in, out)
        if (c_associated(pin)) call c_f_pointer(pin, in, [r%n])
        if (c_associated(pout)) call c_f_pointer(pout, out, [r%n])
        call check(rc, r%ctx, 'pk_rci_step', ierr)
    end subroutine pk_rci_step

    !> The C step shared by pk_rci_step and pk_rci_step_device: request, the operand and result addresses
    !> (c_null_ptr when the request has none), the C status, and partials (host memory) when present.
    subroutine rci_step_raw(r, request, pin, pout, rc, partials)
        type(pk_rci), intent(in) :: r
        integer(c_int32_t), intent(out) :: request
        type(c_ptr), intent(out) :: pin, pout
        integer(c_int), intent(out) :: rc
        real(c_double), pointer, intent(out), optional :: partials(:)
        integer(c_int32_t), target :: req, np
        type(c_ptr), target :: tin, tout, ppart
        req = 0
        np = 0
        tin = c_null_ptr
        tout = c_null_ptr
        ppart = c_null_ptr
        rc = pkrylov_rci_step(r%h, c_loc(req), c_loc(tin), c_loc(tout), c_loc(ppart), c_loc(np))
        request = req
        pin = tin
        pout = tout
        if (present(partials)) then
            nullify (partials)
            if (c_associated(ppart)) call c_f_pointer(ppart, partials, [np])
        end if
    end subroutine rci_step_raw

    !> pk_rci_start with device arrays (CUDA context; CG and pipelined CG): b and x are device addresses of
    !> n real(c_double) values that must stay valid until PKRYLOV_RCI_DONE; the requests then hand device
    !> addresses (pk_rci_step_device).
    subroutine pk_rci_start_device(r, b, x, x_nonzero, ierr)
        type(pk_rci), intent(in) :: r !! the handle
        type(c_ptr), intent(in) :: b !! device address of the right-hand side
        type(c_ptr), intent(in) :: x !! device address of the initial guess / solution
        integer(c_int32_t), intent(in) :: x_nonzero !! 1: x holds an initial guess
        integer, intent(out), optional :: ierr !! status
        call check(pkrylov_rci_start(r%h, PKRYLOV_MEM_DEVICE, b, x, x_nonzero), r%ctx, 'pk_rci_start_device', &
                   ierr)
    end subroutine pk_rci_start_device

    !> pk_rci_step for a solve started with pk_rci_start_device: in and out are device addresses (n values;
    !> c_null_ptr when the request has none, e.g. with OpenACC deviceptr or CUDA Fortran c_f_pointer); the
    !> partials of REDUCE_START/WAIT are host memory, as for pk_rci_step.
    subroutine pk_rci_step_device(r, request, in, out, partials, ierr)
        type(pk_rci), intent(in) :: r !! the handle
        integer(c_int32_t), intent(out) :: request !! PKRYLOV_RCI_*
        type(c_ptr), intent(out) :: in, out !! device addresses of the operand and result (MATVEC, PRECOND)
        real(c_double), pointer, intent(out), optional :: partials(:) !! local values to sum (REDUCE_*)
        integer, intent(out), optional :: ierr !! status
        integer(c_int) :: rc
        call rci_step_raw(r, request, in, out, rc, partials)
        call check(rc, r%ctx, 'pk_rci_step_device', ierr)
    end subroutine pk_rci_step_device

    !> Outcome of the last finished solve.
    subroutine pk_rci_get_result(r, res, ierr)
        type(pk_rci), intent(in) :: r !! the handle
        type(pkrylov_result), intent(out) :: res !! iterations, reason, residuals, ...
        integer, intent(out), optional :: ierr !! status
        type(pkrylov_result), target :: t
        integer(c_int) :: rc
        rc = pkrylov_rci_get_result(r%h, c_loc(t))
        if (rc == PKRYLOV_SUCCESS) then
            res = t
        else
            res = pkrylov_result(0.0_c_double, 0.0_c_double, 0.0_c_double, 0.0_c_double, 0.0_c_double, &
                                 -1.0_c_double, 0, 0, 0, -1, 0, 0, -1)
        end if
        call check(rc, r%ctx, 'pk_rci_get_result', ierr)
    end subroutine pk_rci_get_result

    !> Destroy; a null handle is a no-op.
    subroutine pk_rci_destroy(r, ierr)
        type(pk_rci), intent(inout) :: r !! the handle, null afterwards
        integer, intent(out), optional :: ierr !! status
        type(c_ptr), target :: h
        integer(c_int) :: rc
        h = r%h
        rc = pkrylov_rci_destroy(c_loc(h))
        call check(rc, r%ctx, 'pk_rci_destroy', ierr)
        r%h = h
        if (.not. c_associated(h)) then
            r%ctx = c_null_ptr
            r%n = 0
        end if
    end subroutine pk_rci_destroy

    !> As pk_solver_set_tolerances: stop when ||r|| <= max(rtol ||b||, atol) (defaults 1e-8 and 0). For the
    !> BiCGStab and GMRES families every setting is taken when a solve starts: a change in the middle of a
    !> solve is PKRYLOV_ERR_INVALID_STATE.
    subroutine pk_rci_set_tolerances(r, rtol, atol, ierr)
        type(pk_rci), intent(in) :: r !! the handle
        real(c_double), intent(in) :: rtol !! relative tolerance, >= 0
        real(c_double), intent(in) :: atol !! absolute tolerance, >= 0 (not both 0)
        integer, intent(out), optional :: ierr !! status
        call check(pkrylov_rci_set_tolerances(r%h, rtol, atol), r%ctx, 'pk_rci_set_tolerances', ierr)
    end subroutine pk_rci_set_tolerances

    !> Iteration cap (>= 0, default 1000).
    subroutine pk_rci_set_max_iterations(r, maxit, ierr)
        type(pk_rci), intent(in) :: r !! the handle
        integer(c_int32_t), intent(in) :: maxit !! iteration cap
        integer, intent(out), optional :: ierr !! status
        call check(pkrylov_rci_set_max_iterations(r%h, maxit), r%ctx, 'pk_rci_set_max_iterations', ierr)
    end subroutine pk_rci_set_max_iterations

    !> Pipelined CG and pipelined BiCGStab: residual replacement every k iterations (k >= 0, 0 = never,
    !> default 50). Ignored by the others.
    subroutine pk_rci_set_residual_replacement(r, k, ierr)
        type(pk_rci), intent(in) :: r !! the handle
        integer(c_int32_t), intent(in) :: k !! interval, >= 0
        integer, intent(out), optional :: ierr !! status
        call check(pkrylov_rci_set_residual_replacement(r%h, k), r%ctx, 'pk_rci_set_residual_replacement', &
                   ierr)
    end subroutine pk_rci_set_residual_replacement

    ! ---------------------------------------------------------------------------------------------
    ! Distributed solves (MPI). Every routine here is collective over the context's communicator.

    !> .true. when the library was built with MPI.
    function pk_has_mpi() result(flag)
        logical :: flag
        flag = pkrylov_has_mpi() == 1
    end function pk_has_mpi

    ! pk_context_set_comm (context_set_comm_i4, _i8): the submodule pkrylov_mod_mpi (fortran/pkrylov_mod_mpi.F90,
    ! library pkrylov_mpi_fortran) or, in builds without MPI, pkrylov_mod_nompi (fortran/pkrylov_mod_nompi.F90)

    !> This process's rank (0-based) and the number of ranks of the context (0 and 1 without a communicator).
    subroutine pk_context_get_rank_info(ctx, rank, size, ierr)
        type(pk_context), intent(in) :: ctx !! the context
        integer(c_int32_t), intent(out), optional :: rank !! 0-based rank
        integer(c_int32_t), intent(out), optional :: size !! number of ranks
        integer, intent(out), optional :: ierr !! status
        integer(c_int32_t), target :: v(2)
        v = 0
        call check(pkrylov_context_get_rank_info(ctx%h, c_loc(v(1)), c_loc(v(2))), ctx%h, &
                   'pk_context_get_rank_info', ierr)
        if (present(rank)) rank = v(1)
        if (present(size)) size = v(2)
    end subroutine pk_context_get_rank_info

    !> Reproducible mode on (.true.) or off: exact global sums, bitwise the same solution for any number of
    !> ranks and threads and between runs (every solver type, CPU backend). Set it alike on every rank.
    subroutine pk_context_set_reproducible(ctx, flag, ierr)
        type(pk_context), intent(in) :: ctx !! the context
        logical, intent(in) :: flag !! .true. = exact sums
        integer, intent(out), optional :: ierr !! status
        call check(pkrylov_context_set_reproducible(ctx%h, merge(1_c_int32_t, 0_c_int32_t, flag)), ctx%h, &
                   'pk_context_set_reproducible', ierr)
    end subroutine pk_context_set_reproducible

    !> The thin-shell operator of the global nx x ny x nz grid distributed over px x py ranks (rank r owns
    !> block (mod(r, px), r / px) of whole columns; pk_operator_get_dist_info tells which). Parameters as
    !> pk_operator_create_thinshell, the same on every rank.
    subroutine pk_operator_create_thinshell_dist(ctx, A, nx, ny, nz, px, py, geometry, H, lambda, nu, ierr)
        type(pk_context), intent(in) :: ctx !! the context (with a communicator of px*py ranks)
        type(pk_operator), intent(out) :: A !! the new operator (this rank's block)
        integer(c_int32_t), intent(in) :: nx, ny, nz !! global grid
        integer(c_int32_t), intent(in) :: px, py !! blocks along x and y
        integer(c_int32_t), intent(in), optional :: geometry !! PKRYLOV_GEOMETRY_* (default gnomonic)
        real(c_double), intent(in), optional :: H, lambda, nu !! as pk_operator_create_thinshell
        integer, intent(out), optional :: ierr !! status
        type(pkrylov_thinshell_params), target :: p
        type(c_ptr), target :: hA
        integer(c_int) :: rc
        rc = pkrylov_thinshell_params_default(1_c_int32_t, 1_c_int32_t, 1_c_int32_t, c_loc(p))
        p%nx = nx
        p%ny = ny
        p%nz = nz
        if (present(geometry)) p%geometry = geometry
        if (present(H)) p%H = H
        if (present(lambda)) p%lambda = lambda
        if (present(nu)) p%nu = nu
        hA = c_null_ptr
        rc = pkrylov_operator_create_thinshell_dist(ctx%h, c_loc(p), px, py, c_loc(hA))
        A%h = hA
        if (rc == PKRYLOV_SUCCESS) A%ctx = ctx%h
        call check(rc, ctx%h, 'pk_operator_create_thinshell_dist', ierr)
    end subroutine pk_operator_create_thinshell_dist

    !> The column stencil distributed as the model owns it: this rank's (nx,ny,nz) tile (arrays as in
    !> pk_operator_create_stencil7, real(c_double), optional integer mask 0 = dry), rank r being tile
    !> (mod(r, px), r / px) of px x py. The library fetches the neighbours' couplings across the tile edges.
    subroutine pk_operator_create_stencil7_dist(ctx, A, px, py, nx, ny, nz, aW, aS, aV, aC, mask, ierr)
        type(pk_context), intent(in) :: ctx !! the context (with a communicator of px*py ranks)
        type(pk_operator), intent(out) :: A !! the new operator (this rank's tile)
        integer(c_int32_t), intent(in) :: px, py !! tiles along x and y
        integer(c_int32_t), intent(in) :: nx, ny, nz !! this rank's tile
        real(c_double), intent(in), target, contiguous :: aW(:, :, :), aS(:, :, :), aV(:, :, :), &
                                                          aC(:, :, :) !! (nx,ny,nz) face coefficients
        integer(c_int32_t), intent(in), target, contiguous, optional :: mask(:, :, :) !! (nx,ny,nz)
        integer, intent(out), optional :: ierr !! status
        character(len=*), parameter :: where = 'pk_operator_create_stencil7_dist', what = '(nx,ny,nz)'
        type(c_ptr), target :: hA
        type(c_ptr) :: pm
        integer(c_int32_t) :: ex(3)
        logical :: ok
        integer(c_int) :: rc
        integer :: e
        ! a shape error on one rank must reach the others (the C call agrees on it): pass NULL arrays then
        ok = .true.
        if (nx >= 1 .and. ny >= 1 .and. nz >= 1 .and. c_associated(ctx%h)) then
            ex = [nx, ny, nz]
            call check_shape(shape(aW), ex, 'aW', what, ctx%h, where, ok, e)
            if (ok) call check_shape(shape(aS), ex, 'aS', what, ctx%h, where, ok, e)
            if (ok) call check_shape(shape(aV), ex, 'aV', what, ctx%h, where, ok, e)
            if (ok) call check_shape(shape(aC), ex, 'aC', what, ctx%h, where, ok, e)
            if (ok .and. present(mask)) call check_shape(shape(mask), ex, 'mask', what, ctx%h, where, ok, e)
        end if
        pm = c_null_ptr
        if (present(mask)) pm = c_loc(mask)
        hA = c_null_ptr
        if (ok) then
            rc = pkrylov_operator_create_stencil7_dist(ctx%h, px, py, nx, ny, nz, c_loc(aW), c_loc(aS), &
                                                       c_loc(aV), c_loc(aC), pm, c_loc(hA))
        else ! the other ranks hear of it through the library's agreement; this rank keeps its own message
            rc = pkrylov_operator_create_stencil7_dist(ctx%h, px, py, nx, ny, nz, c_null_ptr, c_null_ptr, &
                                                       c_null_ptr, c_null_ptr, c_null_ptr, c_loc(hA))
            call raise(int(e, c_int32_t), ctx%h, where, trim(ferr_msg(len(where) + 3:)), ierr)
            return
        end if
        A%h = hA
        if (rc == PKRYLOV_SUCCESS) A%ctx = ctx%h
        call check(rc, ctx%h, where, ierr)
    end subroutine pk_operator_create_stencil7_dist

    !> A CSR matrix distributed by blocks of rows: this rank's size(rowptr) - 1 consecutive rows starting at
    !> global row first_row (numbered from index_base; -1: after the rows of the ranks before it), with
    !> global column indices; the blocks tile the n_global rows in rank order (checked on every rank).
    subroutine pk_operator_create_csr_dist(ctx, A, n_global, first_row, rowptr, colind, values, index_base, ierr)
        type(pk_context), intent(in) :: ctx !! the context
        type(pk_operator), intent(out) :: A !! the new operator (this rank's rows)
        integer(c_int64_t), intent(in) :: n_global !! rows = columns of the global matrix
        integer(c_int64_t), intent(in) :: first_row !! first row of this rank (index_base numbering), or -1
        integer(c_int64_t), intent(in), target, contiguous :: rowptr(:) !! nlocal+1 row starts
        integer(c_int64_t), intent(in), target, contiguous :: colind(:) !! global column indices
        real(c_double), intent(in), target, contiguous :: values(:) !! values
        integer(c_int32_t), intent(in) :: index_base !! 0 or 1, for rowptr, colind and first_row
        integer, intent(out), optional :: ierr !! status
        character(len=*), parameter :: where = 'pk_operator_create_csr_dist'
        type(c_ptr), target :: hA
        type(c_ptr) :: pr, pc, pv
        integer(c_int64_t) :: nl, nnz
        integer(c_int) :: rc
        integer(c_int64_t), target, save :: dummy_i8(1) = 0
        nl = size(rowptr, kind=c_int64_t) - 1
        pr = c_null_ptr
        pc = c_loc(dummy_i8)
        pv = c_loc(dummy_d)
        if (nl >= 0) pr = c_loc(rowptr)
        if (size(colind) > 0) pc = c_loc(colind)
        if (size(values) > 0) pv = c_loc(values)
        ! too short colind/values: NULL, so that the C call fails on this rank and tells the others
        if (nl >= 1) then
            nnz = rowptr(nl + 1) - index_base
            if (nnz > size(colind, kind=c_int64_t)) pc = c_null_ptr
            if (nnz > size(values, kind=c_int64_t)) pv = c_null_ptr
        end if
        hA = c_null_ptr
        rc = pkrylov_operator_create_csr_dist(ctx%h, n_global, first_row, max(nl, 0_c_int64_t), index_base, pr, &
                                              pc, pv, c_loc(hA))
        A%h = hA
        if (rc == PKRYLOV_SUCCESS) A%ctx = ctx%h
        call check(rc, ctx%h, where, ierr)
    end subroutine pk_operator_create_csr_dist

    !> Where this rank's block of a distributed grid operator lies: global grid gnx x gny, columns
    !> i0+1..i0+nxl and rows j0+1..j0+nyl (i0, j0 0-based offsets), decomposition px x py.
    subroutine pk_operator_get_dist_info(A, gnx, gny, i0, nxl, j0, nyl, px, py, ierr)
        type(pk_operator), intent(in) :: A !! a thin-shell or column-stencil operator
        integer(c_int32_t), intent(out), optional :: gnx, gny, i0, nxl, j0, nyl, px, py !! the block
        integer, intent(out), optional :: ierr !! status
        integer(c_int32_t), target :: v(8)
        v = 0
        call check(pkrylov_operator_get_dist_info(A%h, c_loc(v(1)), c_loc(v(2)), c_loc(v(3)), c_loc(v(4)), &
                                                  c_loc(v(5)), c_loc(v(6)), c_loc(v(7)), c_loc(v(8))), A%ctx, &
                   'pk_operator_get_dist_info', ierr)
        if (present(gnx)) gnx = v(1)
        if (present(gny)) gny = v(2)
        if (present(i0)) i0 = v(3)
        if (present(nxl)) nxl = v(4)
        if (present(j0)) j0 = v(5)
        if (present(nyl)) nyl = v(6)
        if (present(px)) px = v(7)
        if (present(py)) py = v(8)
    end subroutine pk_operator_get_dist_info

    !> The row block of a CSR operator: global size, first row (0-based) and rows on this rank.
    subroutine pk_operator_get_row_block(A, n_global, first_row, nlocal, ierr)
        type(pk_operator), intent(in) :: A !! a CSR operator
        integer(c_int64_t), intent(out), optional :: n_global, first_row, nlocal !! the block
        integer, intent(out), optional :: ierr !! status
        integer(c_int64_t), target :: v(3)
        v = 0
        call check(pkrylov_operator_get_row_block(A%h, c_loc(v(1)), c_loc(v(2)), c_loc(v(3))), A%ctx, &
                   'pk_operator_get_row_block', ierr)
        if (present(n_global)) n_global = v(1)
        if (present(first_row)) first_row = v(2)
        if (present(nlocal)) nlocal = v(3)
    end subroutine pk_operator_get_row_block

    !> Gather a distributed vector (this rank's values, any shape) into the global order on rank root
    !> (0-based): x_global on root (the global size), ignored elsewhere (pass any array, e.g. of size 0).
    subroutine pk_operator_gather(A, root, x_local, x_global, ierr)
        type(pk_operator), intent(in) :: A !! a distributed operator
        integer(c_int32_t), intent(in) :: root !! 0-based rank
        real(c_double), intent(in), target, contiguous :: x_local(..) !! this rank's values
        real(c_double), intent(inout), target, contiguous :: x_global(..) !! global vector on root
        integer, intent(out), optional :: ierr !! status
        type(c_ptr) :: pg
        pg = c_null_ptr
        if (size(x_global) > 0) pg = c_loc(x_global)
        call check(pkrylov_operator_gather(A%h, root, c_loc(x_local), pg), A%ctx, 'pk_operator_gather', ierr)
    end subroutine pk_operator_gather

    !> The reverse of pk_operator_gather: root's global vector into every rank's x_local.
    subroutine pk_operator_scatter(A, root, x_global, x_local, ierr)
        type(pk_operator), intent(in) :: A !! a distributed operator
        integer(c_int32_t), intent(in) :: root !! 0-based rank
        real(c_double), intent(in), target, contiguous :: x_global(..) !! global vector on root
        real(c_double), intent(inout), target, contiguous :: x_local(..) !! this rank's values
        integer, intent(out), optional :: ierr !! status
        type(c_ptr) :: pg
        pg = c_null_ptr
        if (size(x_global) > 0) pg = c_loc(x_global)
        call check(pkrylov_operator_scatter(A%h, root, pg, c_loc(x_local)), A%ctx, 'pk_operator_scatter', ierr)
    end subroutine pk_operator_scatter

    ! ---------------------------------------------------------------------------------------------
    ! MKL-compatible reverse-communication CG (pk_dcg_init, pk_dcg_check, pk_dcg, pk_dcg_get)
    include 'pkrylov_mkl_rci.inc'

    ! ---------------------------------------------------------------------------------------------
    ! MKL-compatible reverse-communication FGMRES (pk_dfgmres_init, pk_dfgmres_check, pk_dfgmres,
    ! pk_dfgmres_get)
    include 'pkrylov_mkl_fgmres.inc'

    include 'pkrylov_grid.inc'

end module pkrylov_mod

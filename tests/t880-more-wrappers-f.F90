!> t880-more-wrappers-f: the wrappers of pkrylov_mod for solver settings, history and monitor, threads,
!! operator export, Matrix Market files and preconditioner application, each against a check computed here.
!! Checks: pk_operator_get_info of a thin shell (n, grid, kind) and of a user operator (nnz = -1);
!! pk_operator_get_csr with index_base 1 against pk_operator_apply on every unit vector (column j of the
!! CSR matrix built here = A e_j), sorted columns, rowptr(n+1) = nnz + 1, index_base 0 = index_base 1 - 1;
!! pk_operator_write_mtx then pk_operator_create_from_mtx gives a CSR operator with bit-identical CSR arrays;
!! pk_mtx_write_vector then pk_mtx_read_vector gives the same values bit for bit (also with a null context);
!! history: length = iterations + 1, hist(1) = ||b|| recomputed here (x0 = 0), a short hist gets the first
!! values, the last one meets the tolerance; the monitor sees iterations 0..iterations with the history's
!! norms, and stops the solve when it returns 1 (STOPPED_BY_MONITOR after 3 iterations), removed: normal;
!! true-residual interval 1 recomputes the residual every iteration (CG), residual replacement every
!! iteration (pipelined CG) is counted, interval 0 none, PKRYLOV_REPLACE_AUTO converges (true residual
!! recomputed) and is the default; pk_precond_apply of Jacobi = r / diag (diag from
!! the CSR export), of the column preconditioner solves every column's tridiagonal (residual computed here);
!! pk_precond_get_info (JACOBI; COLUMN with levels nz and layout KSLOW).
!! Errors: negative k / window (INVALID_VALUE naming the argument), sync interval 0 and 4097, precision
!! MIXED on the CPU (UNSUPPORTED) and 999 (INVALID_VALUE), history before enabling it (INVALID_STATE),
!! get_csr with a short rowptr (SIZE_MISMATCH) or index_base 2 (INVALID_VALUE) and on a user operator
!! (UNSUPPORTED), write_mtx of a user operator (UNSUPPORTED) and into a missing folder (FILE_IO), reading a
!! missing file (FILE_IO naming it; v not allocated), precond_apply with a short z (SIZE_MISMATCH),
!! null handles (NULL_POINTER). The files are written in the current folder and deleted at the end.

!> Callbacks of the test (bind(C) routines must be module procedures for c_funloc).
module t880_callbacks
    use, intrinsic :: iso_c_binding, only: c_ptr, c_int, c_int32_t, c_int64_t, c_double, c_f_pointer, &
                                           c_associated
    implicit none
    private
    !> What the monitor records (its user data).
    type, public :: monitor_log
        integer :: calls = 0
        integer(c_int32_t) :: iters(1000) = -1
        real(c_double) :: norms(1000) = -1
        integer(c_int32_t) :: stop_at = -1 !! return 1 at this iteration (-1: never)
    end type monitor_log
    public :: monitor, scale2
contains
    !> Record the iteration and the norm; ask to stop at log%stop_at.
    function monitor(user, iteration, residual_norm) bind(C) result(stop_flag)
        type(c_ptr), value :: user
        integer(c_int32_t), value :: iteration
        real(c_double), value :: residual_norm
        integer(c_int) :: stop_flag
        type(monitor_log), pointer :: log
        call c_f_pointer(user, log)
        log%calls = log%calls + 1
        if (log%calls <= size(log%iters)) then
            log%iters(log%calls) = iteration
            log%norms(log%calls) = residual_norm
        end if
        stop_flag = merge(1_c_int, 0_c_int, iteration == log%stop_at)
    end function monitor

    !> y = 2 x (a user operator).
    subroutine scale2(ctx_ptr, n, x, y) bind(C)
        type(c_ptr), value :: ctx_ptr
        integer(c_int64_t), value :: n
        real(c_double), intent(in) :: x(n)
        real(c_double), intent(out) :: y(n)
        y = 2*x
        if (c_associated(ctx_ptr)) y = -y ! never: the test passes no ctx_ptr
    end subroutine scale2
end module t880_callbacks

program t880_more_wrappers_f
    use, intrinsic :: iso_c_binding, only: c_associated, c_double, c_int32_t, c_int64_t, c_loc, c_null_ptr
    use, intrinsic :: iso_fortran_env, only: error_unit
    use pkrylov_mod
    use t880_callbacks
    implicit none
    integer(c_int32_t), parameter :: nx = 4, ny = 3, nz = 5, n = nx*ny*nz
    real(c_double), parameter :: rtol = 1e-8_c_double
    character(len=*), parameter :: fmat = 't880-more-wrappers-f.A.mtx', fvec = 't880-more-wrappers-f.v.mtx'
    type(pk_context) :: ctx, nullctx
    type(pk_operator) :: A, A2, U, nullA
    type(pk_precond) :: MJ, MC, nullM
    type(pk_solver) :: s, sp, nulls
    type(pkrylov_result) :: res
    type(monitor_log), target :: mlog
    integer(c_int64_t) :: n8, nnz, nnz2, nv
    integer(c_int32_t) :: otype, gx, gy, gz, ptype, levels, layout, length, length2, iters
    integer(c_int64_t), allocatable :: rowptr(:), colind(:), rowptr0(:), colind0(:), rowptr2(:), colind2(:)
    real(c_double), allocatable :: values(:), values2(:), vread(:)
    real(c_double), target :: dense(n, n), e(n), col(n), b(n), x(n), r(n), z(n), diag(n), v2(6, 7)
    real(c_double) :: hist(1000), short(3), amax
    integer(c_int64_t) :: p
    integer :: ierr, i, j, checks0, checks1

    b = [(sin(0.3_c_double*i) + 0.5_c_double, i=1, n)]

    ! ---- context: threads ----
    call pk_context_create(ctx, PKRYLOV_BACKEND_CPU)
    call pk_context_set_num_threads(ctx, 2_c_int32_t, ierr)
    call expect(ierr == 0, 'set_num_threads 2')
    call pk_context_set_num_threads(ctx, 0_c_int32_t)
    call pk_context_set_num_threads(nullctx, 2_c_int32_t, ierr)
    call expect(ierr == PKRYLOV_ERR_NULL_POINTER, 'set_num_threads on a null context: NULL_POINTER')

    ! ---- operator info and CSR export ----
    call pk_operator_create_thinshell(ctx, A, nx, ny, nz, geometry=PKRYLOV_GEOMETRY_UNIFORM)
    call pk_operator_get_info(A, n8, nnz, otype, gx, gy, gz)
    call expect(n8 == n .and. otype == PKRYLOV_OPERATOR_THINSHELL .and. gx == nx .and. gy == ny .and. &
                gz == nz .and. nnz > 0, 'get_info of a thin shell')
    call pk_operator_get_info(A, nnz=nnz2)
    call expect(nnz2 == nnz, 'get_info with one output')
    allocate (rowptr(n + 1), colind(nnz), values(nnz), rowptr0(n + 1), colind0(nnz))
    call pk_operator_get_csr(A, rowptr, colind, values, 1_c_int32_t)
    call expect(rowptr(1) == 1 .and. rowptr(n + 1) == nnz + 1, &
                'get_csr base 1: rowptr(1) = 1, rowptr(n+1) = nnz+1')
    dense = 0
    do i = 1, n
        do p = rowptr(i), rowptr(i + 1) - 1
            call expect(colind(p) >= 1 .and. colind(p) <= n, 'get_csr base 1: columns in 1..n')
            if (p > rowptr(i)) call expect(colind(p) > colind(p - 1), 'get_csr: columns sorted in a row')
            dense(i, colind(p)) = values(p)
        end do
    end do
    amax = maxval(abs(dense))
    do j = 1, n
        e = 0
        e(j) = 1
        call pk_operator_apply(A, e, col)
        call expect(all(abs(col - dense(:, j)) <= 4*epsilon(1.0_c_double)*amax), &
                    'get_csr: column j = A e_j (matrix-free apply)')
    end do
    call pk_operator_get_csr(A, rowptr0, colind0, values)
    call expect(all(rowptr0 == rowptr - 1) .and. all(colind0 == colind - 1), 'get_csr base 0 = base 1 - 1')
    diag = [(dense(i, i), i=1, n)]
    ! errors
    call pk_operator_get_csr(A, rowptr(1:n), colind, values, 1_c_int32_t, ierr)
    call expect_error(ierr, PKRYLOV_ERR_SIZE_MISMATCH, "'rowptr'", 'get_csr with n values in rowptr')
    call expect(all(rowptr0 == rowptr - 1), 'the arrays are unchanged after an error')
    call pk_operator_get_csr(A, rowptr, colind, values, 2_c_int32_t, ierr)
    call expect_error(ierr, PKRYLOV_ERR_INVALID_VALUE, "'index_base'", 'get_csr index_base 2')
    call pk_operator_get_info(nullA, n8, ierr=ierr)
    call expect(ierr == PKRYLOV_ERR_NULL_POINTER, 'get_info of a null operator: NULL_POINTER')
    call pk_operator_get_csr(nullA, rowptr, colind, values, ierr=ierr)
    call expect(ierr == PKRYLOV_ERR_NULL_POINTER, 'get_csr of a null operator: NULL_POINTER')
    ! a user operator has no CSR form
    call pk_operator_create_user(ctx, U, n, scale2)
    call pk_operator_get_info(U, n8, nnz2, otype)
    call expect(n8 == n .and. nnz2 == -1 .and. otype == PKRYLOV_OPERATOR_USER, 'get_info of a user operator')
    call pk_operator_get_csr(U, rowptr, colind, values, ierr=ierr)
    call expect_error(ierr, PKRYLOV_ERR_UNSUPPORTED, "'A'", 'get_csr of a user operator')
    call pk_operator_write_mtx(U, fmat, ierr)
    call expect_error(ierr, PKRYLOV_ERR_UNSUPPORTED, "'A'", 'write_mtx of a user operator')
    call pk_operator_destroy(U)

    ! ---- Matrix Market: operator round trip ----
    call pk_operator_write_mtx(A, fmat)
    call pk_operator_create_from_mtx(ctx, A2, fmat)
    call pk_operator_get_info(A2, n8, nnz2, otype, gx, gy, gz)
    call expect(n8 == n .and. nnz2 == nnz .and. otype == PKRYLOV_OPERATOR_CSR .and. gx == 0 .and. gy == 0 &
                .and. gz == 0, 'get_info of the operator read back')
    allocate (rowptr2(n + 1), colind2(nnz), values2(nnz))
    call pk_operator_get_csr(A2, rowptr2, colind2, values2, 1_c_int32_t)
    call expect(all(rowptr2 == rowptr) .and. all(colind2 == colind) .and. all(values2 == values), &
                'write_mtx then create_from_mtx: bit-identical CSR')
    call pk_operator_destroy(A2)
    call pk_operator_create_from_mtx(ctx, A2, 't880-more-wrappers-f.missing.mtx', ierr)
    call expect_error(ierr, PKRYLOV_ERR_FILE_IO, 't880-more-wrappers-f.missing.mtx', &
                      'create_from_mtx: no file')
    call expect(.not. c_associated(A2%h), 'no operator after an error')
    call pk_operator_write_mtx(A, 't880-no-such-folder/A.mtx', ierr)
    call expect_error(ierr, PKRYLOV_ERR_FILE_IO, 't880-no-such-folder/A.mtx', &
                      'write_mtx into a missing folder')

    ! ---- Matrix Market: vectors ----
    v2 = reshape([(1.0_c_double/(i + 3) - 0.1_c_double*i**2, i=1, size(v2))], shape(v2))
    call pk_mtx_write_vector(ctx, fvec, v2)
    call pk_mtx_read_vector(ctx, fvec, vread, nv)
    call expect(nv == size(v2) .and. size(vread) == size(v2), 'read_vector: the length')
    call expect(all(vread == reshape(v2, [size(v2)])), 'write_vector then read_vector: bit-identical')
    deallocate (vread)
    call pk_mtx_read_vector(nullctx, fvec, vread)
    call expect(all(vread == reshape(v2, [size(v2)])), 'read_vector with a null context')
    call pk_mtx_read_vector(ctx, 't880-more-wrappers-f.missing.v.mtx', vread, nv, ierr)
    call expect_error(ierr, PKRYLOV_ERR_FILE_IO, 't880-more-wrappers-f.missing.v.mtx', &
                      'read_vector: no file')
    call expect(.not. allocated(vread) .and. nv == 0, 'read_vector: v not allocated after an error')
    call pk_mtx_write_vector(ctx, 't880-no-such-folder/v.mtx', v2, ierr)
    call expect_error(ierr, PKRYLOV_ERR_FILE_IO, 't880-no-such-folder/v.mtx', &
                      'write_vector into a missing folder')

    ! ---- preconditioners: apply and info ----
    call pk_precond_create(ctx, MJ, A, PKRYLOV_PRECOND_JACOBI)
    call pk_precond_get_info(MJ, ptype)
    call expect(ptype == PKRYLOV_PRECOND_JACOBI, 'precond_get_info: JACOBI')
    call pk_precond_apply(MJ, b, z)
    ! M^-1 r = r / diag, up to the rounding of 1/diag times r
    call expect(all(abs(z - b/diag) <= 2*epsilon(1.0_c_double)*abs(b/diag)), 'Jacobi apply = r / diag')
    call pk_precond_create(ctx, MC, A, PKRYLOV_PRECOND_COLUMN)
    call pk_precond_get_info(MC, ptype, levels, layout)
    call expect(ptype == PKRYLOV_PRECOND_COLUMN .and. levels == nz .and. layout == PKRYLOV_LAYOUT_KSLOW, &
                'precond_get_info: COLUMN, levels nz, KSLOW')
    call pk_precond_apply(MC, b, z)
    ! every column's tridiagonal T (vertical couplings: distance nx*ny) satisfies T z = b, up to the
    ! rounding of the evaluation here: 8 eps (|T| |z|)_i (the thin shell's rows cancel to many digits)
    do i = 1, n
        r(i) = b(i) - dense(i, i)*z(i)
        col(i) = abs(dense(i, i)*z(i))
        if (i > nx*ny) then
            r(i) = r(i) - dense(i, i - nx*ny)*z(i - nx*ny)
            col(i) = col(i) + abs(dense(i, i - nx*ny)*z(i - nx*ny))
        end if
        if (i <= n - nx*ny) then
            r(i) = r(i) - dense(i, i + nx*ny)*z(i + nx*ny)
            col(i) = col(i) + abs(dense(i, i + nx*ny)*z(i + nx*ny))
        end if
    end do
    call expect(all(abs(r) <= 8*epsilon(1.0_c_double)*col), 'column apply solves each tridiagonal')
    z = -7
    call pk_precond_apply(MJ, b, z(1:n - 1), ierr)
    call expect_error(ierr, PKRYLOV_ERR_SIZE_MISMATCH, "'z'", 'precond_apply with n-1 values in z')
    call expect(all(z == -7), 'z unchanged after an error')
    call pk_precond_apply(nullM, b, z, ierr)
    call expect(ierr == PKRYLOV_ERR_NULL_POINTER, 'precond_apply of a null preconditioner: NULL_POINTER')
    call pk_precond_get_info(nullM, ptype, ierr=ierr)
    call expect(ierr == PKRYLOV_ERR_NULL_POINTER, 'precond_get_info of a null preconditioner: NULL_POINTER')

    ! ---- solver: history ----
    call pk_solver_create(ctx, s, PKRYLOV_SOLVER_CG, A, MJ)
    call pk_solver_set_tolerances(s, rtol, 0.0_c_double)
    call pk_solver_get_history(s, hist, length, ierr)
    call expect_error(ierr, PKRYLOV_ERR_INVALID_STATE, 'no solve', 'get_history before a solve')
    x = 0
    call pk_solver_solve(s, b, x)
    call pk_solver_get_history(s, hist, length, ierr)
    call expect_error(ierr, PKRYLOV_ERR_INVALID_STATE, 'history', 'get_history without set_history')
    call pk_solver_set_history(s, .true.)
    x = 0
    call pk_solver_solve(s, b, x)
    call pk_solver_get_result(s, res)
    iters = res%iterations
    call expect(res%converged == 1, 'CG with history converges')
    call pk_solver_get_history(s, hist(1:0), length)
    call expect(length == iters + 1, 'history length = iterations + 1 (length only)')
    hist = -1
    call pk_solver_get_history(s, hist, length2)
    call expect(length2 == length .and. all(hist(length + 1:) == -1), 'history: length values written')
    call expect(abs(hist(1) - norm2(b)) <= 1e-14_c_double*norm2(b), 'history(1) = ||b|| (x0 = 0)')
    call expect(hist(length) <= rtol*norm2(b), 'the last history value meets the tolerance')
    short = -1
    call pk_solver_get_history(s, short, length2)
    call expect(length2 == length .and. all(short == hist(1:3)), 'a short hist gets the first values')

    ! ---- solver: monitor ----
    call pk_solver_set_monitor(s, monitor, c_loc(mlog))
    x = 0
    call pk_solver_solve(s, b, x)
    call pk_solver_get_result(s, res)
    call expect(res%iterations == iters .and. mlog%calls == iters + 1, &
                'monitor: one call per convergence test')
    call expect(all(mlog%iters(1:mlog%calls) == [(i, i=0, iters)]), 'monitor: iterations 0..iterations')
    call expect(all(mlog%norms(1:mlog%calls) == hist(1:length)), 'monitor: the norms of the history')
    mlog = monitor_log(stop_at=3)
    x = 0
    call pk_solver_solve(s, b, x)
    call pk_solver_get_result(s, res)
    call expect(res%reason == PKRYLOV_STOPPED_BY_MONITOR .and. res%iterations == 3 .and. mlog%calls == 4, &
                'monitor returning 1 at iteration 3 stops the solve')
    call pk_solver_set_monitor(s)
    mlog = monitor_log()
    x = 0
    call pk_solver_solve(s, b, x)
    call pk_solver_get_result(s, res)
    call expect(res%converged == 1 .and. mlog%calls == 0, 'monitor removed')
    call pk_solver_set_monitor(nulls, monitor, c_null_ptr, ierr)
    call expect(ierr == PKRYLOV_ERR_NULL_POINTER, 'set_monitor on a null solver: NULL_POINTER')

    ! ---- solver: true residual interval ----
    x = 0
    call pk_solver_solve(s, b, x)
    call pk_solver_get_result(s, res)
    checks0 = res%true_residual_checks
    call pk_solver_set_true_residual_interval(s, 1_c_int32_t)
    x = 0
    call pk_solver_solve(s, b, x)
    call pk_solver_get_result(s, res)
    checks1 = res%true_residual_checks
    call expect(res%converged == 1 .and. checks1 >= res%iterations - 1 .and. checks1 > checks0, &
                'true residual interval 1: a check every iteration')
    call pk_solver_set_true_residual_interval(s, 0_c_int32_t)
    call pk_solver_set_true_residual_interval(s, -1_c_int32_t, ierr)
    call expect_error(ierr, PKRYLOV_ERR_INVALID_VALUE, "'k'", 'true residual interval -1')

    ! ---- pipelined CG: residual replacement ----
    call pk_solver_create(ctx, sp, PKRYLOV_SOLVER_PIPECG, A, MJ)
    call pk_solver_set_tolerances(sp, rtol, 0.0_c_double)
    call pk_solver_set_residual_replacement(sp, 0_c_int32_t)
    x = 0
    call pk_solver_solve(sp, b, x)
    call pk_solver_get_result(sp, res)
    call expect(res%converged == 1 .and. res%residual_replacements == 0, 'residual replacement 0: none')
    call pk_solver_set_residual_replacement(sp, 1_c_int32_t)
    x = 0
    call pk_solver_solve(sp, b, x)
    call pk_solver_get_result(sp, res)
    ! (every-iteration replacement need not converge: only the count is checked)
    call expect(res%residual_replacements >= res%iterations - 1 .and. &
                res%residual_replacements > 0, 'residual replacement 1: one every iteration')
    call pk_solver_set_residual_replacement(sp, -2_c_int32_t, ierr)
    call expect_error(ierr, PKRYLOV_ERR_INVALID_VALUE, "'k'", 'residual replacement -2')
    ! the automatic rule: converged with a true residual (recomputed here) within the tolerance, the same
    ! iterations and replacements as a new solver's default
    call pk_solver_set_residual_replacement(sp, PKRYLOV_REPLACE_AUTO)
    x = 0
    call pk_solver_solve(sp, b, x)
    call pk_solver_get_result(sp, res)
    iters = res%iterations
    checks0 = res%residual_replacements
    call pk_operator_apply(A, x, r)
    r = b - r
    call expect(res%converged == 1 .and. norm2(r) <= rtol*norm2(b), 'residual replacement auto: converged')
    call pk_solver_destroy(sp)
    call pk_solver_create(ctx, sp, PKRYLOV_SOLVER_PIPECG, A, MJ)
    call pk_solver_set_tolerances(sp, rtol, 0.0_c_double)
    x = 0
    call pk_solver_solve(sp, b, x)
    call pk_solver_get_result(sp, res)
    call expect(res%iterations == iters .and. res%residual_replacements == checks0, &
                'residual replacement: the default is PKRYLOV_REPLACE_AUTO')

    ! ---- other settings ----
    call pk_solver_set_stagnation_window(s, 20_c_int32_t)
    call pk_solver_set_stagnation_window(s, 0_c_int32_t)
    call pk_solver_set_stagnation_window(s, -1_c_int32_t, ierr)
    call expect_error(ierr, PKRYLOV_ERR_INVALID_VALUE, "'window'", 'stagnation window -1')
    call pk_solver_set_sync_interval(s, 1_c_int32_t)
    call pk_solver_set_sync_interval(s, 4096_c_int32_t)
    call pk_solver_set_sync_interval(s, 0_c_int32_t, ierr)
    call expect_error(ierr, PKRYLOV_ERR_INVALID_VALUE, "'k'", 'sync interval 0')
    call pk_solver_set_sync_interval(s, 4097_c_int32_t, ierr)
    call expect_error(ierr, PKRYLOV_ERR_INVALID_VALUE, "'k'", 'sync interval 4097')
    call pk_solver_set_precision(s, PKRYLOV_PRECISION_FP64)
    call pk_solver_set_precision(s, PKRYLOV_PRECISION_MIXED, ierr)
    call expect_error(ierr, PKRYLOV_ERR_UNSUPPORTED, "'precision'", 'precision MIXED on the CPU')
    call pk_solver_set_precision(s, PKRYLOV_PRECISION_MIXED_PRECOND, ierr)
    call expect_error(ierr, PKRYLOV_ERR_UNSUPPORTED, "'precision'", 'precision MIXED_PRECOND on the CPU')
    call pk_solver_set_precision(s, 999_c_int32_t, ierr)
    call expect_error(ierr, PKRYLOV_ERR_INVALID_VALUE, "'precision'", 'precision 999')
    call pk_solver_set_history(s, .false.)
    x = 0
    call pk_solver_solve(s, b, x)
    call pk_solver_get_history(s, hist, length, ierr)
    call expect_error(ierr, PKRYLOV_ERR_INVALID_STATE, 'history', 'get_history after set_history(.false.)')
    call pk_solver_set_history(nulls, .true., ierr)
    call expect(ierr == PKRYLOV_ERR_NULL_POINTER, 'set_history on a null solver: NULL_POINTER')
    call pk_solver_get_history(nulls, hist, length, ierr)
    call expect(ierr == PKRYLOV_ERR_NULL_POINTER, 'get_history on a null solver: NULL_POINTER')

    call pk_solver_destroy(sp)
    call pk_solver_destroy(s)
    call pk_precond_destroy(MC)
    call pk_precond_destroy(MJ)
    call pk_operator_destroy(A)
    call pk_context_destroy(ctx)
    call delete_file(fmat)
    call delete_file(fvec)
    ! main-program arrays are not freed at the end by gfortran (LeakSanitizer in the CI sanitizer pass)
    if (allocated(rowptr)) deallocate (rowptr, colind, values, rowptr0, colind0)
    if (allocated(rowptr2)) deallocate (rowptr2, colind2, values2)
    if (allocated(vread)) deallocate (vread)
    print '(a)', 't880-more-wrappers-f: ok'

contains

    !> Delete a file this test wrote.
    subroutine delete_file(name)
        character(len=*), intent(in) :: name
        integer :: u, ios
        open (newunit=u, file=name, status='old', iostat=ios)
        call expect(ios == 0, 'the file '//name//' exists')
        close (u, status='delete')
    end subroutine delete_file

    subroutine expect(cond, what)
        logical, intent(in) :: cond
        character(len=*), intent(in) :: what
        if (.not. cond) then
            write (error_unit, '(a)') 't880-more-wrappers-f: FAILED: '//what
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
            write (error_unit, '(a,i0,a,i0,a)') 't880-more-wrappers-f: FAILED: '//what//': ierr = ', ierr, &
                ' (expected ', code, '): '//trim(msg)
            error stop 1
        end if
        call expect(index(msg, name) > 0, what//': the message names '//name//': '//trim(msg))
    end subroutine expect_error

end program t880_more_wrappers_f

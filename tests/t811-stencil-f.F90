!> t811-stencil-f: column-stencil operators through pkrylov_mod, against references computed here.
!! Checks: pk_operator_apply equals the stencil formula of pkrylov.h evaluated by a Fortran loop (no mask,
!! integer mask, logical mask: both masks give the same operator; dry rows are 0); real(4) coefficients
!! give the operator of the same values in real(8) (bit for bit); a pipelined-CG solve with the column
!! preconditioner matches LAPACK dposv on the dense matrix assembled here; NaN in an ignored boundary
!! coefficient is accepted; errors: nx/nz < 1 (INVALID_SIZE naming it), wrong shapes of aS, mask and of
!! real(4) aW (SIZE_MISMATCH from the module naming the array), NaN in aC (NOT_FINITE naming 'aC').
program t811_stencil_f
    use, intrinsic :: iso_c_binding, only: c_associated, c_double, c_float, c_int32_t
    use, intrinsic :: iso_fortran_env, only: error_unit
    use, intrinsic :: ieee_arithmetic, only: ieee_value, ieee_quiet_nan
    use pkrylov_mod
    use pk_test_f
    implicit none
    integer, parameter :: nx = 5, ny = 4, nz = 3, n = nx*ny*nz
    type(pk_context) :: ctx
    type(pk_operator) :: A, Am, Al, A4, A48, Abad
    type(pk_precond) :: M
    type(pk_solver) :: s
    type(pkrylov_result) :: res
    real(c_double), dimension(nx, ny, nz) :: aW, aS, aV, aC, x, y, yref, ym, yl, b, xs, bad
    real(c_float), dimension(nx, ny, nz) :: aW4, aS4, aV4, aC4
    real(c_double) :: Ad(n, n), xref(n)
    integer(c_int32_t) :: imask(nx, ny, nz)
    logical :: wet(nx, ny, nz), allwet(nx, ny, nz)
    integer :: ierr, info, i
    external :: dposv

    call make_stencil(aW, aS, aV, aC)
    x = reshape([(1 + 0.5_c_double*sin(0.37_c_double*i), i=1, n)], shape(x))
    allwet = .true.
    call pk_context_create(ctx, PKRYLOV_BACKEND_CPU)

    ! no mask
    call pk_operator_create_stencil7(ctx, A, nx, ny, nz, aW, aS, aV, aC, ierr=ierr)
    call expect(ierr == 0 .and. c_associated(A%h), 'create a stencil operator')
    call pk_operator_apply(A, x, y)
    call stencil_apply(aW, aS, aV, aC, x, yref, allwet)
    call expect(maxval(abs(y - yref)) <= 1e-14_c_double*maxval(abs(yref)), 'apply = Fortran stencil loop')

    ! masks: three dry cells
    wet = .true.
    wet(2, 2, 1) = .false.
    wet(5, 4, 3) = .false.
    wet(3, 1, 2) = .false.
    imask = merge(1, 0, wet)
    call pk_operator_create_stencil7(ctx, Am, nx, ny, nz, aW, aS, aV, aC, imask)
    call pk_operator_create_stencil7(ctx, Al, nx, ny, nz, aW, aS, aV, aC, wet)
    call pk_operator_apply(Am, x, ym)
    call pk_operator_apply(Al, x, yl)
    call stencil_apply(aW, aS, aV, aC, x, yref, wet)
    call expect(maxval(abs(ym - yref)) <= 1e-14_c_double*maxval(abs(yref)), 'masked apply = Fortran loop')
    call expect(all(ym == yl), 'integer and logical masks give the same operator')
    call expect(ym(2, 2, 1) == 0 .and. ym(5, 4, 3) == 0 .and. ym(3, 1, 2) == 0, 'dry rows are 0')

    ! real(4) coefficients = the same values in real(8)
    aW4 = real(aW, c_float)
    aS4 = real(aS, c_float)
    aV4 = real(aV, c_float)
    aC4 = real(aC, c_float)
    call pk_operator_create_stencil7(ctx, A4, nx, ny, nz, aW4, aS4, aV4, aC4, wet)
    call pk_operator_create_stencil7(ctx, A48, nx, ny, nz, real(aW4, c_double), real(aS4, c_double), &
                                     real(aV4, c_double), real(aC4, c_double), imask)
    call pk_operator_apply(A4, x, ym)
    call pk_operator_apply(A48, x, yl)
    call expect(all(ym == yl), 'real(4) coefficients = their real(8) values')

    ! solve against LAPACK on the dense matrix
    b = reshape([(cos(0.21_c_double*i), i=1, n)], shape(b))
    call stencil_dense(aW, aS, aV, aC, Ad)
    xref = reshape(b, [n])
    call dposv('L', n, 1, Ad, n, xref, n, info)
    call expect(info == 0, 'dposv')
    call pk_precond_create(ctx, M, A, PKRYLOV_PRECOND_COLUMN)
    call pk_solver_create(ctx, s, PKRYLOV_SOLVER_PIPECG, A, M)
    call pk_solver_set_tolerances(s, 1e-13_c_double, 0.0_c_double)
    xs = 0
    call pk_solver_solve(s, b, xs)
    call pk_solver_get_result(s, res)
    call expect(res%converged == 1, 'pipelined CG converges')
    call expect(norm2(reshape(xs, [n]) - xref) <= 1e-10_c_double*norm2(xref), 'solution = dposv solution')

    ! a NaN where the stencil couples outside the grid (aW at i = 1) is ignored
    bad = aW
    bad(1, 2, 2) = ieee_value(1.0_c_double, ieee_quiet_nan)
    call pk_operator_create_stencil7(ctx, Abad, nx, ny, nz, bad, aS, aV, aC, ierr=ierr)
    call expect(ierr == 0, 'NaN in an ignored boundary coefficient is accepted')
    call pk_operator_apply(Abad, x, yl)
    call expect(all(yl == y), 'and does not change the operator')
    call pk_operator_destroy(Abad)

    ! ---- errors ----
    call pk_operator_create_stencil7(ctx, Abad, 0, ny, nz, aW, aS, aV, aC, ierr=ierr)
    call expect_error(ierr, PKRYLOV_ERR_INVALID_SIZE, "'nx'", 'nx = 0')
    call expect(.not. c_associated(Abad%h), 'no operator after an error')
    call pk_operator_create_stencil7(ctx, Abad, nx, ny, -1, aW, aS, aV, aC, imask, ierr)
    call expect_error(ierr, PKRYLOV_ERR_INVALID_SIZE, "'nz'", 'nz = -1')
    call pk_operator_create_stencil7(ctx, Abad, nx, ny, nz, aW, aS(:, 1:ny - 1, :), aV, aC, ierr=ierr)
    call expect_error(ierr, PKRYLOV_ERR_SIZE_MISMATCH, "'aS'", 'aS of shape (nx,ny-1,nz)')
    call pk_operator_create_stencil7(ctx, Abad, nx, ny, nz, aW, aS, aV, aC, imask(1:nx - 1, :, :), ierr)
    call expect_error(ierr, PKRYLOV_ERR_SIZE_MISMATCH, "'mask'", 'mask of shape (nx-1,ny,nz)')
    call pk_operator_create_stencil7(ctx, Abad, nx, ny, nz, aW, aS, aV, aC, wet(:, :, 1:1), ierr)
    call expect_error(ierr, PKRYLOV_ERR_SIZE_MISMATCH, "'mask'", 'logical mask of shape (nx,ny,1)')
    call pk_operator_create_stencil7(ctx, Abad, nx, ny, nz, aW4(:, :, 1:2), aS4, aV4, aC4, ierr=ierr)
    call expect_error(ierr, PKRYLOV_ERR_SIZE_MISMATCH, "'aW'", 'real(4) aW of shape (nx,ny,nz-1)')
    bad = aC
    bad(3, 3, 3) = ieee_value(1.0_c_double, ieee_quiet_nan)
    call pk_operator_create_stencil7(ctx, Abad, nx, ny, nz, aW, aS, aV, bad, ierr=ierr)
    call expect_error(ierr, PKRYLOV_ERR_NOT_FINITE, "'aC'", 'NaN in aC')

    call pk_solver_destroy(s)
    call pk_precond_destroy(M)
    call pk_operator_destroy(A48)
    call pk_operator_destroy(A4)
    call pk_operator_destroy(Al)
    call pk_operator_destroy(Am)
    call pk_operator_destroy(A)
    call pk_context_destroy(ctx)
    print '(a)', 't811-stencil-f: ok'

contains

    subroutine expect(cond, what)
        logical, intent(in) :: cond
        character(len=*), intent(in) :: what
        if (.not. cond) then
            write (error_unit, '(a)') 't811-stencil-f: FAILED: '//what
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
            write (error_unit, '(a,i0,a,i0,a)') 't811-stencil-f: FAILED: '//what//': ierr = ', ierr, &
                ' (expected ', code, '): '//trim(msg)
            error stop 1
        end if
        call expect(index(msg, name) > 0, what//': the message names '//name//': '//trim(msg))
    end subroutine expect_error

end program t811_stencil_f

!> t889-convdiff-f: pk_operator_create_convdiff (the nonsymmetric convection-diffusion test operator) against
!! the formula of pkrylov.h evaluated by a loop written here: for two winds (one with every sign, one zero),
!! the product with a vector equals the loop's to 1e-14 relative, and the CSR export has the loop's nonzero
!! count (7-point, walls dropped); wind 0 gives a symmetric matrix, the other a nonsymmetric one.
!! Errors: wind with 2 values (SIZE_MISMATCH naming 'wind', found by the module), aniso 0 (INVALID_VALUE),
!! a NaN wind (NOT_FINITE), nx = 0 (INVALID_SIZE), a null context (NULL_POINTER).
program t889_convdiff_f
    use, intrinsic :: iso_c_binding, only: c_double, c_int32_t, c_int64_t
    use, intrinsic :: iso_fortran_env, only: error_unit
    use, intrinsic :: ieee_arithmetic, only: ieee_value, ieee_quiet_nan
    use pkrylov_mod
    implicit none
    integer(c_int32_t), parameter :: nx = 5, ny = 4, nz = 3, n = nx*ny*nz
    real(c_double), parameter :: aniso = 2.5_c_double
    type(pk_context) :: ctx, nullctx
    type(pk_operator) :: A
    real(c_double) :: x(nx, ny, nz), y(nx, ny, nz), yref(nx, ny, nz), winds(3, 2), dense(n, n), e(n), col(n)
    integer(c_int64_t) :: nnz
    character(len=1024) :: msg
    integer :: ierr, i, j, iw

    winds(:, 1) = [1.5_c_double, -0.7_c_double, 0.4_c_double]
    winds(:, 2) = 0
    x = reshape([(cos(0.23_c_double*i) + 0.3_c_double, i=1, n)], shape(x))
    call pk_context_create(ctx, PKRYLOV_BACKEND_CPU)
    do iw = 1, 2
        call pk_operator_create_convdiff(ctx, A, nx, ny, nz, winds(:, iw), aniso)
        call pk_operator_apply(A, x, y)
        call convdiff_apply(winds(:, iw), x, yref)
        call expect(maxval(abs(y - yref)) <= 1e-14_c_double*maxval(abs(yref)), 'product = the formula')
        call pk_operator_get_info(A, nnz=nnz)
        call expect(nnz == n + 2*((nx - 1)*ny*nz + nx*(ny - 1)*nz + nx*ny*(nz - 1)), 'nnz: 7-point, walls')
        do j = 1, n
            e = 0
            e(j) = 1
            call pk_operator_apply(A, e, col)
            dense(:, j) = col
        end do
        if (iw == 1) call expect(maxval(abs(dense - transpose(dense))) > 0.1_c_double, 'wind: nonsymmetric')
        if (iw == 2) call expect(all(dense == transpose(dense)), 'no wind: symmetric')
        call pk_operator_destroy(A)
    end do

    call pk_operator_create_convdiff(ctx, A, nx, ny, nz, winds(1:2, 1), aniso, ierr)
    call expect_error(ierr, PKRYLOV_ERR_SIZE_MISMATCH, "argument 'wind' has 2 values", 'wind with 2 values')
    call pk_operator_create_convdiff(ctx, A, nx, ny, nz, winds(:, 1), 0.0_c_double, ierr)
    call expect_error(ierr, PKRYLOV_ERR_INVALID_VALUE, "aniso", 'aniso 0')
    call pk_operator_create_convdiff(ctx, A, nx, ny, nz, [1.0_c_double, ieee_value(1.0_c_double, ieee_quiet_nan), &
                                     0.0_c_double], aniso, ierr)
    call expect_error(ierr, PKRYLOV_ERR_NOT_FINITE, "wind", 'NaN wind')
    call pk_operator_create_convdiff(ctx, A, 0_c_int32_t, ny, nz, winds(:, 1), aniso, ierr)
    call expect_error(ierr, PKRYLOV_ERR_INVALID_SIZE, "nx", 'nx = 0')
    call pk_operator_create_convdiff(nullctx, A, nx, ny, nz, winds(:, 1), aniso, ierr)
    call expect(ierr == PKRYLOV_ERR_NULL_POINTER, 'null context: NULL_POINTER')
    call pk_context_destroy(ctx)
    print '(a)', 't889-convdiff-f: ok'

contains

    !> y = A x by the formula of pkrylov.h (unit cells, upwind, walls: neighbours outside dropped).
    subroutine convdiff_apply(w, x, y)
        real(c_double), intent(in) :: w(3), x(nx, ny, nz)
        real(c_double), intent(out) :: y(nx, ny, nz)
        integer :: i, j, k
        do k = 1, nz
            do j = 1, ny
                do i = 1, nx
                    y(i, j, k) = (2*(2 + aniso) + abs(w(1)) + abs(w(2)) + abs(w(3)))*x(i, j, k)
                    if (i > 1) y(i, j, k) = y(i, j, k) + (-1 - max(w(1), 0.0_c_double))*x(i - 1, j, k)
                    if (i < nx) y(i, j, k) = y(i, j, k) + (-1 - max(-w(1), 0.0_c_double))*x(i + 1, j, k)
                    if (j > 1) y(i, j, k) = y(i, j, k) + (-1 - max(w(2), 0.0_c_double))*x(i, j - 1, k)
                    if (j < ny) y(i, j, k) = y(i, j, k) + (-1 - max(-w(2), 0.0_c_double))*x(i, j + 1, k)
                    if (k > 1) y(i, j, k) = y(i, j, k) + (-aniso - max(w(3), 0.0_c_double))*x(i, j, k - 1)
                    if (k < nz) y(i, j, k) = y(i, j, k) + (-aniso - max(-w(3), 0.0_c_double))*x(i, j, k + 1)
                end do
            end do
        end do
    end subroutine convdiff_apply

    subroutine expect(cond, what)
        logical, intent(in) :: cond
        character(len=*), intent(in) :: what
        if (.not. cond) then
            write (error_unit, '(a)') 't889-convdiff-f: FAILED: '//what
            error stop 1
        end if
    end subroutine expect

    subroutine expect_error(ierr, code, name, what)
        integer, intent(in) :: ierr
        integer(c_int32_t), intent(in) :: code
        character(len=*), intent(in) :: name, what
        call pk_error_message(ctx, msg)
        if (ierr /= code) then
            write (error_unit, '(a,i0,a,i0,a)') 't889-convdiff-f: FAILED: '//what//': ierr = ', ierr, &
                ' (expected ', code, '): '//trim(msg)
            error stop 1
        end if
        call expect(index(msg, name) > 0, what//': the message names '//name//': '//trim(msg))
    end subroutine expect_error

end program t889_convdiff_f

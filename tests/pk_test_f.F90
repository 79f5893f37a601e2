!> pk_test_f: what several Fortran tests build the same way, compiled once (library pk_test_f, see
!! tests/CMakeLists.txt) and used by t811, t812, t830, t831 and t840:
!! - make_stencil: SPD column-stencil coefficients (negative couplings, centre = 0.1 + the row's |couplings|);
!! - stencil_apply: y = A x by the stencil formula of pkrylov.h, written as a plain loop (optional wet mask:
!!   dry cells have zero rows and no couplings);
!! - stencil_dense: the dense matrix of an all-wet stencil, cell (i,j,k) at i + nx*(j-1 + ny*(k-1));
!! - ts_default, ts_coefficients: the C functions pkrylov_thinshell_params_default and
!!   pkrylov_thinshell_stencil_coefficients through interfaces written here (a route to the thin-shell
!!   matrix that does not go through pkrylov_mod's operator wrappers);
!! - pk_expect: a check that ends the program with error stop 1 and "<pk_test_name>: FAILED: <what>" (t890).
!! Array sizes come from the arguments: (nx, ny, nz) = shape(aW).
module pk_test_f
    use, intrinsic :: iso_c_binding, only: c_double, c_int, c_int32_t
    use pkrylov_mod, only: pkrylov_thinshell_params
    implicit none
    private
    public :: make_stencil, stencil_apply, stencil_dense, ts_default, ts_coefficients, pk_expect
    !> The program's name in pk_expect's failure message (set it first).
    character(len=64), public :: pk_test_name = 'test'

    interface
        !> pkrylov_thinshell_params_default.
        function ts_default(nx, ny, nz, p) bind(C, name="pkrylov_thinshell_params_default")
            import :: c_int, c_int32_t, pkrylov_thinshell_params
            integer(c_int32_t), value :: nx, ny, nz
            type(pkrylov_thinshell_params), intent(out) :: p
            integer(c_int) :: ts_default
        end function ts_default
        !> pkrylov_thinshell_stencil_coefficients (nx*ny*nz values each).
        function ts_coefficients(p, aW, aS, aV, aC) bind(C, name="pkrylov_thinshell_stencil_coefficients")
            import :: c_int, c_double, pkrylov_thinshell_params
            type(pkrylov_thinshell_params), intent(in) :: p
            real(c_double), intent(out) :: aW(*), aS(*), aV(*), aC(*)
            integer(c_int) :: ts_coefficients
        end function ts_coefficients
    end interface

contains

    !> SPD test coefficients: negative couplings, centre = 0.1 + the sum of the row's |couplings|.
    subroutine make_stencil(aW, aS, aV, aC)
        real(c_double), intent(out), dimension(:, :, :) :: aW, aS, aV, aC
        integer :: i, j, k, nx, ny, nz
        nx = size(aW, 1)
        ny = size(aW, 2)
        nz = size(aW, 3)
        do k = 1, nz
            do j = 1, ny
                do i = 1, nx
                    aW(i, j, k) = -(1 + 0.5_c_double*sin(0.3_c_double*i + 0.7_c_double*j + 1.1_c_double*k))
                    aS(i, j, k) = -(0.8_c_double + 0.3_c_double*cos(0.5_c_double*i - 0.2_c_double*j + k))
                    aV(i, j, k) = -(2 + sin(0.9_c_double*i + 0.4_c_double*j - 0.6_c_double*k))
                end do
            end do
        end do
        do k = 1, nz
            do j = 1, ny
                do i = 1, nx
                    aC(i, j, k) = 0.1_c_double
                    if (i > 1) aC(i, j, k) = aC(i, j, k) + abs(aW(i, j, k))
                    if (i < nx) aC(i, j, k) = aC(i, j, k) + abs(aW(min(i + 1, nx), j, k))
                    if (j > 1) aC(i, j, k) = aC(i, j, k) + abs(aS(i, j, k))
                    if (j < ny) aC(i, j, k) = aC(i, j, k) + abs(aS(i, min(j + 1, ny), k))
                    if (k > 1) aC(i, j, k) = aC(i, j, k) + abs(aV(i, j, k))
                    if (k < nz) aC(i, j, k) = aC(i, j, k) + abs(aV(i, j, min(k + 1, nz)))
                end do
            end do
        end do
    end subroutine make_stencil

    !> y = A x by the formula of pkrylov.h; with wet, dry cells have zero rows and no couplings.
    subroutine stencil_apply(aW, aS, aV, aC, x, y, wet)
        real(c_double), intent(in), dimension(:, :, :) :: aW, aS, aV, aC, x
        real(c_double), intent(out) :: y(:, :, :)
        logical, intent(in), optional :: wet(:, :, :)
        integer :: i, j, k, nx, ny, nz
        nx = size(aW, 1)
        ny = size(aW, 2)
        nz = size(aW, 3)
        y = 0
        do k = 1, nz
            do j = 1, ny
                do i = 1, nx
                    if (.not. is_wet(i, j, k)) cycle
                    y(i, j, k) = aC(i, j, k)*x(i, j, k)
                    if (i > 1) then
                        if (is_wet(i - 1, j, k)) y(i, j, k) = y(i, j, k) + aW(i, j, k)*x(i - 1, j, k)
                    end if
                    if (i < nx) then
                        if (is_wet(i + 1, j, k)) y(i, j, k) = y(i, j, k) + aW(i + 1, j, k)*x(i + 1, j, k)
                    end if
                    if (j > 1) then
                        if (is_wet(i, j - 1, k)) y(i, j, k) = y(i, j, k) + aS(i, j, k)*x(i, j - 1, k)
                    end if
                    if (j < ny) then
                        if (is_wet(i, j + 1, k)) y(i, j, k) = y(i, j, k) + aS(i, j + 1, k)*x(i, j + 1, k)
                    end if
                    if (k > 1) then
                        if (is_wet(i, j, k - 1)) y(i, j, k) = y(i, j, k) + aV(i, j, k)*x(i, j, k - 1)
                    end if
                    if (k < nz) then
                        if (is_wet(i, j, k + 1)) y(i, j, k) = y(i, j, k) + aV(i, j, k + 1)*x(i, j, k + 1)
                    end if
                end do
            end do
        end do
    contains
        logical function is_wet(ii, jj, kk)
            integer, intent(in) :: ii, jj, kk
            is_wet = .true.
            if (present(wet)) is_wet = wet(ii, jj, kk)
        end function is_wet
    end subroutine stencil_apply

    !> The dense matrix of the stencil (all wet), cell (i,j,k) at i + nx*(j-1 + ny*(k-1)).
    subroutine stencil_dense(aW, aS, aV, aC, Ad)
        real(c_double), intent(in), dimension(:, :, :) :: aW, aS, aV, aC
        real(c_double), intent(out) :: Ad(:, :)
        integer :: i, j, k, c, nx, ny, nz
        nx = size(aW, 1)
        ny = size(aW, 2)
        nz = size(aW, 3)
        Ad = 0
        do k = 1, nz
            do j = 1, ny
                do i = 1, nx
                    c = i + nx*(j - 1 + ny*(k - 1))
                    Ad(c, c) = aC(i, j, k)
                    if (i > 1) Ad(c, c - 1) = aW(i, j, k)
                    if (i > 1) Ad(c - 1, c) = aW(i, j, k)
                    if (j > 1) Ad(c, c - nx) = aS(i, j, k)
                    if (j > 1) Ad(c - nx, c) = aS(i, j, k)
                    if (k > 1) Ad(c, c - nx*ny) = aV(i, j, k)
                    if (k > 1) Ad(c - nx*ny, c) = aV(i, j, k)
                end do
            end do
        end do
    end subroutine stencil_dense

    !> When cond is false: "<pk_test_name>: FAILED: <what>" on the error unit, then error stop 1.
    subroutine pk_expect(cond, what)
        use, intrinsic :: iso_fortran_env, only: error_unit
        logical, intent(in) :: cond
        character(len=*), intent(in) :: what
        if (.not. cond) then
            write (error_unit, '(a)') trim(pk_test_name)//': FAILED: '//what
            error stop 1
        end if
    end subroutine pk_expect
end module pk_test_f

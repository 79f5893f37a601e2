!> t850-mkl-rci-f: the MKL-compatible reverse-communication CG from Fortran, written as an MKL RCI program
!! (pk_dcg_init, pk_dcg_check, pk_dcg, pk_dcg_get) on a 3-D anisotropic Helmholtz-like pressure operator
!! whose matvec and Jacobi preconditioner are written here. Checks: the defaults of pk_dcg_init; the first
!! request asks for A x0 (tmp(:,1) = x0); the solution against a manufactured one (b = A x*); dpar(3) =
!! ||b||^2 for x0 = 0 and dpar(5) against ||b - A x||^2 recomputed here; itercount = ipar(4); the
!! iteration count equal (within 1) to the library's CG with the Jacobi preconditioner on the same
!! operator given as a column stencil; the user stopping test (ipar(9) = 0, ipar(10) = 1: request 2 at
!! every iteration from ipar(4) = 0, on the current x, with dpar(8) = dpar(5)/dpar(6) unpreconditioned);
!! the iteration cap (-1 after ipar(5) iterations).
program t850_mkl_rci_f
    use, intrinsic :: iso_c_binding, only: c_double, c_int32_t
    use, intrinsic :: iso_fortran_env, only: error_unit
    use pkrylov_mod
    implicit none
    integer, parameter :: nx = 12, ny = 10, nz = 6, n = nx*ny*nz
    real(c_double) :: aW(nx, ny, nz), aS(nx, ny, nz), aV(nx, ny, nz), aC(nx, ny, nz)
    real(c_double) :: xstar(n), b(n), x(n), r(n), xlib(n), tmp(n, 4), dpar(128)
    integer :: ipar(128), RCI_request, itercount, ntests, i, j, k
    logical :: first
    type(pk_context) :: ctx
    type(pk_operator) :: A
    type(pk_precond) :: M
    type(pk_solver) :: s
    type(pkrylov_result) :: res

    ! the model's operator: 7-point stencil, face couplings < 0, diagonal = shift + their sum
    do k = 1, nz
        do j = 1, ny
            do i = 1, nx
                aW(i, j, k) = -1.0d0 - 0.3d0*sin(0.7d0*i + 0.2d0*j)
                aS(i, j, k) = -0.8d0 - 0.2d0*cos(0.5d0*j + 0.3d0*k)
                aV(i, j, k) = -20.0d0*(1.0d0 + 0.5d0*k)
            end do
        end do
    end do
    do k = 1, nz
        do j = 1, ny
            do i = 1, nx
                aC(i, j, k) = 0.5d0 - aW(i, j, k) - aS(i, j, k) - aV(i, j, k)
                if (i < nx) aC(i, j, k) = aC(i, j, k) - aW(i + 1, j, k)
                if (j < ny) aC(i, j, k) = aC(i, j, k) - aS(i, j + 1, k)
                if (k < nz) aC(i, j, k) = aC(i, j, k) - aV(i, j, k + 1)
            end do
        end do
    end do
    do i = 1, n
        xstar(i) = sin(0.37d0*i) + 0.1d0*cos(1.3d0*i)
    end do
    call apply_A(xstar, b)

    ! ---- automatic residual test, Jacobi preconditioner ------------------------------------------
    x = 0
    call pk_dcg_init(n, x, b, RCI_request, ipar, dpar, tmp)
    call expect(RCI_request == 0, 'pk_dcg_init gives 0')
    call expect(all(ipar(1:11) == [n, 6, 1, 0, 150, 1, 1, 1, 0, 1, 0]), 'ipar(1:11) defaults')
    call expect(dpar(1) == 1.0d-6 .and. all(dpar(2:8) == 0), 'dpar(1:8) defaults')
    ipar(5) = 1000
    ipar(9) = 1
    ipar(10) = 0
    ipar(11) = 1
    dpar(1) = 1.0d-24 ! ||r|| <= 1e-12 ||r0||: MKL compares squared norms
    call pk_dcg_check(n, x, b, RCI_request, ipar, dpar, tmp)
    call expect(RCI_request == 0, 'pk_dcg_check gives 0')
    first = .true.
    do
        call pk_dcg(n, x, b, RCI_request, ipar, dpar, tmp)
        select case (RCI_request)
        case (1)
            if (first) call expect(all(tmp(:, 1) == x), 'the first request is A x0')
            first = .false.
            call apply_A(tmp(:, 1), tmp(:, 2))
        case (3)
            call jacobi(tmp(:, 3), tmp(:, 4))
        case default
            exit
        end select
    end do
    call expect(RCI_request == 0, 'converged by the automatic test')
    call pk_dcg_get(n, x, b, RCI_request, ipar, dpar, tmp, itercount)
    call expect(itercount == ipar(4) .and. itercount > 0, 'itercount = ipar(4)')
    call expect(abs(dpar(3) - sum(b**2)) <= 1.0d-13*dpar(3), 'dpar(3) = ||b||^2 for x0 = 0')
    call expect(dpar(5) <= dpar(4) .and. dpar(4) == dpar(1)*dpar(3) + dpar(2), 'dpar(5) <= dpar(4)')
    call apply_A(x, r)
    r = b - r
    call expect(abs(norm2(r) - sqrt(dpar(5))) <= 1.0d-6*sqrt(dpar(5)) + 1.0d-13*sqrt(dpar(3)), &
                'dpar(5) = ||b - A x||^2')
    call expect(norm2(x - xstar) <= 1.0d-9*norm2(xstar), 'solution against the manufactured one')

    ! the library's CG with the Jacobi preconditioner on the same operator: the same iteration count
    call pk_context_create(ctx, PKRYLOV_BACKEND_CPU)
    call pk_operator_create_stencil7(ctx, A, int(nx, c_int32_t), int(ny, c_int32_t), int(nz, c_int32_t), &
                                     aW, aS, aV, aC)
    call pk_precond_create(ctx, M, A, PKRYLOV_PRECOND_JACOBI)
    call pk_solver_create(ctx, s, PKRYLOV_SOLVER_CG, A, M)
    call pk_solver_set_tolerances(s, 1.0d-12, 0.0d0)
    call pk_solver_set_max_iterations(s, 1000_c_int32_t)
    xlib = 0
    call pk_solver_solve(s, b, xlib)
    call pk_solver_get_result(s, res)
    call expect(res%converged == 1 .and. abs(res%iterations - itercount) <= 1, &
                'RCI and library CG iteration counts agree')
    call expect(norm2(xlib - x) <= 1.0d-9*norm2(x), 'RCI and library CG solutions agree')
    call pk_solver_destroy(s)
    call pk_precond_destroy(M)
    call pk_operator_destroy(A)
    call pk_context_destroy(ctx)

    ! ---- user stopping test, no preconditioner ---------------------------------------------------
    x = 0
    call pk_dcg_init(n, x, b, RCI_request, ipar, dpar, tmp)
    ipar(5) = 1000
    ipar(9) = 0  ! no automatic residual test
    ipar(10) = 1 ! request 2
    call pk_dcg_check(n, x, b, RCI_request, ipar, dpar, tmp)
    call expect(RCI_request == 0, 'pk_dcg_check (user test) gives 0')
    ntests = 0
    do
        call pk_dcg(n, x, b, RCI_request, ipar, dpar, tmp)
        if (RCI_request == 1) then
            call apply_A(tmp(:, 1), tmp(:, 2))
        else if (RCI_request == 2) then
            call expect(ipar(4) == ntests, 'request 2 at every iteration from ipar(4) = 0')
            if (ipar(4) > 0) call expect(abs(dpar(8) - dpar(5)/dpar(6)) <= 1.0d-14*dpar(8), &
                                         'dpar(8) = dpar(5)/dpar(6) without preconditioner')
            ntests = ntests + 1
            call apply_A(x, r) ! the user's own test on the current iterate
            r = b - r
            if (norm2(r) <= 1.0d-10*norm2(b)) exit
        else
            exit
        end if
    end do
    call expect(RCI_request == 2, 'stopped by the user test (no request 3, no error)')
    call pk_dcg_get(n, x, b, RCI_request, ipar, dpar, tmp, itercount)
    call expect(itercount == ntests - 1 .and. itercount > 0, 'itercount after the user test')
    call expect(norm2(x - xstar) <= 1.0d-8*norm2(xstar), 'user-test solution')

    ! ---- iteration cap ---------------------------------------------------------------------------
    x = 0
    call pk_dcg_init(n, x, b, RCI_request, ipar, dpar, tmp)
    ipar(5) = 3
    ipar(9) = 1
    ipar(10) = 0
    dpar(1) = 1.0d-24
    call pk_dcg_check(n, x, b, RCI_request, ipar, dpar, tmp)
    do
        call pk_dcg(n, x, b, RCI_request, ipar, dpar, tmp)
        if (RCI_request /= 1) exit
        call apply_A(tmp(:, 1), tmp(:, 2))
    end do
    call pk_dcg_get(n, x, b, RCI_request, ipar, dpar, tmp, itercount)
    call expect(RCI_request == -1 .and. itercount == 3, 'the cap: -1 after ipar(5) = 3 iterations')

contains

    !> y = A x, the model's stencil (the column-stencil convention of pkrylov.h).
    subroutine apply_A(xv, y)
        real(c_double), intent(in) :: xv(nx, ny, nz)
        real(c_double), intent(out) :: y(nx, ny, nz)
        integer :: ii, jj, kk
        do kk = 1, nz
            do jj = 1, ny
                do ii = 1, nx
                    y(ii, jj, kk) = aC(ii, jj, kk)*xv(ii, jj, kk)
                    if (ii > 1) y(ii, jj, kk) = y(ii, jj, kk) + aW(ii, jj, kk)*xv(ii - 1, jj, kk)
                    if (ii < nx) y(ii, jj, kk) = y(ii, jj, kk) + aW(ii + 1, jj, kk)*xv(ii + 1, jj, kk)
                    if (jj > 1) y(ii, jj, kk) = y(ii, jj, kk) + aS(ii, jj, kk)*xv(ii, jj - 1, kk)
                    if (jj < ny) y(ii, jj, kk) = y(ii, jj, kk) + aS(ii, jj + 1, kk)*xv(ii, jj + 1, kk)
                    if (kk > 1) y(ii, jj, kk) = y(ii, jj, kk) + aV(ii, jj, kk)*xv(ii, jj, kk - 1)
                    if (kk < nz) y(ii, jj, kk) = y(ii, jj, kk) + aV(ii, jj, kk + 1)*xv(ii, jj, kk + 1)
                end do
            end do
        end do
    end subroutine apply_A

    !> z = r / diag(A)
    subroutine jacobi(rv, z)
        real(c_double), intent(in) :: rv(nx, ny, nz)
        real(c_double), intent(out) :: z(nx, ny, nz)
        z = rv/aC
    end subroutine jacobi

    subroutine expect(cond, what)
        logical, intent(in) :: cond
        character(len=*), intent(in) :: what
        if (.not. cond) then
            write (error_unit, '(a)') 't850-mkl-rci-f: FAILED: '//what
            error stop 1
        end if
    end subroutine expect

end program t850_mkl_rci_f

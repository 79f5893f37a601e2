!> t853-mkl-fgmres-f: the MKL-compatible reverse-communication FGMRES from Fortran, written as an MKL RCI
!! FGMRES program (pk_dfgmres_init, pk_dfgmres_check, pk_dfgmres, pk_dfgmres_get) on a 2-D convection-
!! diffusion operator (nonsymmetric) whose matvec and Jacobi preconditioner are written here. Checks: the
!! defaults of pk_dfgmres_init and the tmp length formula; the offsets ipar(16:21) set by pk_dfgmres_check
!! for a changed ipar(15) (RCI_request 0); the solution against LAPACK dgesv for restart lengths 1, 5 and
!! n, with and without the preconditioner request; dpar(3) = ||b - A x0||, dpar(4) = dpar(1) dpar(3) +
!! dpar(2) and dpar(5) against the true residual of the iterate that pk_dfgmres_get puts into a scratch b
!! (ipar(13) = 1, x unchanged) at every request 2; dpar(7) tested at request 4; ipar(13) < 0 (count only);
!! two solves interleaved give the same answers as alone; the error codes -12, -11 and -1100.
program t853_mkl_fgmres_f
    use, intrinsic :: iso_c_binding, only: c_double
    use, intrinsic :: iso_fortran_env, only: error_unit
    use pkrylov_mod
    implicit none
    integer, parameter :: nx = 9, ny = 7, n = nx*ny
    real(c_double), parameter :: cx = 25.0d0, cy = -12.0d0
    real(c_double) :: b(n), xd(n), x(n), x2(n), xs(n), dpar(128), dpar2(128), h
    real(c_double), allocatable :: tmp(:), tmp2(:)
    integer :: ipar(128), ipar2(128), RCI_request, req2, itercount, ntests, i, im, pc, m, ms(3)
    logical :: go1, go2

    ntests = 0
    h = 1.0d0/(nx + 1)
    do i = 1, n
        b(i) = sin(0.3d0*i) + 0.5d0
    end do
    call dense_solve(b, xd)

    ! ---- defaults and the tmp length -------------------------------------------------------------
    allocate(tmp(tmplen(n, n)))
    x = 0
    call pk_dfgmres_init(n, x, b, RCI_request, ipar, dpar, tmp)
    call expect(RCI_request == 0, 'pk_dfgmres_init gives 0')
    call expect(all(ipar(1:15) == [n, 6, 1, 0, n, 1, 1, 1, 0, 1, 0, 0, 0, 0, n]), 'ipar(1:15) defaults')
    call expect(ipar(16) == (n + 1)*n + 1 .and. ipar(21) + n*n - 1 == tmplen(n, n), 'ipar(16:21) layout')
    call expect(dpar(1) == 1.0d-6 .and. dpar(2) == 0 .and. all(dpar(3:7) == 0) .and. dpar(8) == 1.0d-12, &
                'dpar(1:8) defaults')
    deallocate(tmp)

    ! ---- restart lengths 1, 5, n; with and without request 3; automatic residual test ---------------
    ms = [1, 5, n]
    do im = 1, 3
        do pc = 0, 1
            m = ms(im)
            allocate(tmp(tmplen(n, m)))
            x = 0
            call pk_dfgmres_init(n, x, b, RCI_request, ipar, dpar, tmp)
            ipar(5) = 20000
            ipar(7) = 0               ! no warning line for the repaired ipar(16:21)
            ipar(9) = 1
            ipar(10) = 0
            ipar(11) = pc
            ipar(12) = 1
            ipar(15) = m
            dpar(1) = 1.0d-11
            call pk_dfgmres_check(n, x, b, RCI_request, ipar, dpar, tmp)
            call expect(RCI_request == 0, 'pk_dfgmres_check gives 0 after ipar(15) changed')
            call expect(ipar(16) == (m + 1)*n + 1 .and. ipar(21) + m*n - 1 == tmplen(n, m), &
                        'pk_dfgmres_check sets ipar(16:21) for ipar(15)')
            call run_loop(x, b, ipar, dpar, tmp, RCI_request)
            call expect(RCI_request == 0, 'automatic test: converged')
            call pk_dfgmres_get(n, x, b, RCI_request, ipar, dpar, tmp, itercount)
            call expect(RCI_request == 0 .and. itercount == ipar(4), 'pk_dfgmres_get: itercount = ipar(4)')
            call expect(norm2(x - xd) <= 1.0d-8*norm2(xd), 'solution against dgesv')
            call expect(true_res(x) <= 1.01d-11*norm2(b), 'true residual <= dpar(1) ||b||')
            if (m == n) call expect(itercount <= n, 'full GMRES within n iterations')
            deallocate(tmp)
        end do
    end do

    ! ---- user test (request 2) through pk_dfgmres_get into a scratch b, request 4 ------------------
    m = 6
    allocate(tmp(tmplen(n, m)))
    x = 0.25d0
    call pk_dfgmres_init(n, x, b, RCI_request, ipar, dpar, tmp)
    ipar(7) = 0
    ipar(9) = 0
    ipar(10) = 1
    ipar(11) = 1
    ipar(12) = 0
    ipar(15) = m
    call pk_dfgmres_check(n, x, b, RCI_request, ipar, dpar, tmp)
    x2 = x
    call expect(RCI_request == 0, 'check for the user-test run')
    rci: do
        call pk_dfgmres(n, x, b, RCI_request, ipar, dpar, tmp)
        select case (RCI_request)
        case (1)
            call apply_A(tmp(ipar(22):ipar(22) + n - 1), tmp(ipar(23):ipar(23) + n - 1))
            if (ipar(4) == 0 .and. ipar(14) == 0 .and. ipar(22) == 1 .and. ipar(23) == n + 1 .and. &
                dpar(3) == 0) call expect(all(tmp(1:n) == x2), 'first request: A x0, tmp(1:n) = x0')
        case (3)
            call apply_jacobi(tmp(ipar(22):ipar(22) + n - 1), tmp(ipar(23):ipar(23) + n - 1))
        case (4)
            call expect(dpar(7) > 0, 'request 4: dpar(7) > 0')
            if (dpar(7) < 1.0d-12) exit rci
        case (2)
            call expect(abs(dpar(3) - true_res(x2)) <= 1.0d-12*dpar(3), 'dpar(3) = ||b - A x0||')
            call expect(dpar(4) == dpar(1)*dpar(3) + dpar(2), 'dpar(4) = dpar(1) dpar(3) + dpar(2)')
            ipar(13) = 1
            xs = x
            call pk_dfgmres_get(n, x, xs, req2, ipar, dpar, tmp, itercount)
            call expect(req2 == 0 .and. itercount == ipar(4), 'get with ipar(13) = 1')
            ipar(13) = -1
            x2 = xs
            call pk_dfgmres_get(n, x, x2, req2, ipar, dpar, tmp, itercount)
            call expect(all(x2 == xs) .and. itercount == ipar(4), 'get with ipar(13) = -1 writes nothing')
            x2 = 0.25d0
            ipar(13) = 0
            call expect(abs(dpar(5) - true_res(xs)) <= 1.0d-8*dpar(3), 'dpar(5) = ||b - A x_k||')
            if (true_res(xs) <= 1.0d-10*norm2(b)) exit rci
        case default
            call expect(.false., 'unexpected RCI_request')
            exit rci
        end select
    end do rci
    call pk_dfgmres_get(n, x, b, RCI_request, ipar, dpar, tmp, itercount)
    call expect(all(x == xs), 'final get (ipar(13) = 0) gives the iterate of the user test')
    call expect(norm2(x - xd) <= 1.0d-8*norm2(xd), 'user-test run against dgesv')
    deallocate(tmp)

    ! ---- two solves interleaved (restart 4 with Jacobi, restart 9 without) -------------------------
    allocate(tmp(tmplen(n, 4)), tmp2(tmplen(n, 9)))
    x = 0
    x2 = 0
    call pk_dfgmres_init(n, x, b, RCI_request, ipar, dpar, tmp)
    call pk_dfgmres_init(n, x2, b, req2, ipar2, dpar2, tmp2)
    ipar(7) = 0; ipar2(7) = 0
    ipar(9) = 1; ipar2(9) = 1
    ipar(10) = 0; ipar2(10) = 0
    ipar(12) = 1; ipar2(12) = 1
    ipar(11) = 1
    ipar(15) = 4; ipar2(15) = 9
    dpar(1) = 1.0d-11; dpar2(1) = 1.0d-11
    ipar(5) = 20000; ipar2(5) = 20000
    call pk_dfgmres_check(n, x, b, RCI_request, ipar, dpar, tmp)
    call pk_dfgmres_check(n, x2, b, req2, ipar2, dpar2, tmp2)
    go1 = .true.
    go2 = .true.
    do while (go1 .or. go2)
        if (go1) call one_call(x, ipar, dpar, tmp, RCI_request, go1)
        if (go2) call one_call(x2, ipar2, dpar2, tmp2, req2, go2)
    end do
    call expect(RCI_request == 0 .and. req2 == 0, 'interleaved solves converge')
    call pk_dfgmres_get(n, x, b, RCI_request, ipar, dpar, tmp, itercount)
    call pk_dfgmres_get(n, x2, b, req2, ipar2, dpar2, tmp2, itercount)
    call expect(norm2(x - xd) <= 1.0d-8*norm2(xd) .and. norm2(x2 - xd) <= 1.0d-8*norm2(xd), &
                'interleaved solves against dgesv')
    deallocate(tmp, tmp2)

    ! ---- error codes -----------------------------------------------------------------------------
    allocate(tmp(tmplen(n, 3)))
    ipar = 0
    dpar = 0
    call pk_dfgmres(n, x, b, RCI_request, ipar, dpar, tmp)
    call expect(RCI_request == -12, 'pk_dfgmres before pk_dfgmres_init: -12')
    call pk_dfgmres_get(n, x, b, RCI_request, ipar, dpar, tmp, itercount)
    call expect(RCI_request == -12 .and. itercount == -1, 'pk_dfgmres_get before init: -12, itercount -1')
    call pk_dfgmres_init(0, x, b, RCI_request, ipar, dpar, tmp)
    call expect(RCI_request == -10000, 'pk_dfgmres_init with n = 0: -10000')
    call pk_dfgmres_init(n, x, b, RCI_request, ipar, dpar, tmp)
    ipar(6:7) = 0
    ipar(15) = 3
    ipar(8:10) = 0
    call pk_dfgmres(n, x, b, RCI_request, ipar, dpar, tmp)
    call expect(RCI_request == -11, 'no stopping test: -11')
    ipar2 = ipar
    call pk_dfgmres_check(n, x, b, RCI_request, ipar, dpar, tmp)
    call expect(RCI_request == -1010 .and. ipar(8) == 1 .and. ipar(9) == 1, 'check enables ipar(8:9): -1010')
    dpar(1) = -1
    ipar2 = ipar
    call pk_dfgmres_check(n, x, b, RCI_request, ipar, dpar, tmp)
    call expect(RCI_request == -1100 .and. all(ipar == ipar2), 'negative dpar(1): -1100, ipar unchanged')
    call pk_dfgmres(n, x, b, RCI_request, ipar, dpar, tmp)
    call expect(RCI_request == -12, 'negative dpar(1): pk_dfgmres gives -12')
    deallocate(tmp)

    write(*, '(a,i0,a)') 't853: ', ntests, ' checks passed'

contains
    !> (2*m+1)*n + m*(m+9)/2 + 1, MKL's tmp length.
    integer function tmplen(nn, m)
        integer, intent(in) :: nn, m
        tmplen = (2*m + 1)*nn + m*(m + 9)/2 + 1
    end function tmplen

    !> y = A v: -Lap u + c . grad u, central differences times h^2 (Dirichlet).
    subroutine apply_A(v, y)
        real(c_double), intent(in) :: v(nx, ny)
        real(c_double), intent(out) :: y(nx, ny)
        integer :: i, j
        do j = 1, ny
            do i = 1, nx
                y(i, j) = 4*v(i, j)
                if (i > 1) y(i, j) = y(i, j) + (-1 - 0.5d0*cx*h)*v(i - 1, j)
                if (i < nx) y(i, j) = y(i, j) + (-1 + 0.5d0*cx*h)*v(i + 1, j)
                if (j > 1) y(i, j) = y(i, j) + (-1 - 0.5d0*cy*h)*v(i, j - 1)
                if (j < ny) y(i, j) = y(i, j) + (-1 + 0.5d0*cy*h)*v(i, j + 1)
            end do
        end do
    end subroutine apply_A

    !> z = D^-1 r (the diagonal is 4).
    subroutine apply_jacobi(r, z)
        real(c_double), intent(in) :: r(n)
        real(c_double), intent(out) :: z(n)
        z = r/4
    end subroutine apply_jacobi

    !> ||b - A v||
    real(c_double) function true_res(v)
        real(c_double), intent(in) :: v(n)
        real(c_double) :: av(n)
        call apply_A(v, av)
        true_res = norm2(b - av)
    end function true_res

    !> The dense matrix column by column (A e_j), then LAPACK dgesv.
    subroutine dense_solve(rhs, sol)
        real(c_double), intent(in) :: rhs(n)
        real(c_double), intent(out) :: sol(n)
        real(c_double) :: a(n, n), e(n)
        integer :: ipiv(n), info, j
        do j = 1, n
            e = 0
            e(j) = 1
            call apply_A(e, a(:, j))
        end do
        sol = rhs
        call dgesv(n, 1, a, n, ipiv, sol, n, info)
        if (info /= 0) error stop 'dgesv failed'
    end subroutine dense_solve

    !> The RCI loop with requests 1 and 3 only (automatic tests).
    subroutine run_loop(x, rhs, ipar, dpar, tmp, req)
        real(c_double), intent(inout) :: x(n), tmp(:), dpar(128)
        real(c_double), intent(in) :: rhs(n)
        integer, intent(inout) :: ipar(128)
        integer, intent(out) :: req
        do
            call pk_dfgmres(n, x, rhs, req, ipar, dpar, tmp)
            if (req == 1) then
                call apply_A(tmp(ipar(22):ipar(22) + n - 1), tmp(ipar(23):ipar(23) + n - 1))
            else if (req == 3) then
                call apply_jacobi(tmp(ipar(22):ipar(22) + n - 1), tmp(ipar(23):ipar(23) + n - 1))
            else
                exit
            end if
        end do
    end subroutine run_loop

    !> One call of pk_dfgmres and its request; go = .false. when the loop ends.
    subroutine one_call(x, ipar, dpar, tmp, req, go)
        real(c_double), intent(inout) :: x(n), tmp(:), dpar(128)
        integer, intent(inout) :: ipar(128)
        integer, intent(out) :: req
        logical, intent(out) :: go
        call pk_dfgmres(n, x, b, req, ipar, dpar, tmp)
        go = .true.
        if (req == 1) then
            call apply_A(tmp(ipar(22):ipar(22) + n - 1), tmp(ipar(23):ipar(23) + n - 1))
        else if (req == 3) then
            call apply_jacobi(tmp(ipar(22):ipar(22) + n - 1), tmp(ipar(23):ipar(23) + n - 1))
        else
            go = .false.
        end if
    end subroutine one_call

    subroutine expect(cond, what)
        logical, intent(in) :: cond
        character(len=*), intent(in) :: what
        ntests = ntests + 1
        if (.not. cond) then
            write(error_unit, '(2a)') 'FAILED: ', what
            error stop 1
        end if
    end subroutine expect
end program t853_mkl_fgmres_f

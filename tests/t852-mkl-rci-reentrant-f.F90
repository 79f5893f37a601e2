!> t852-mkl-rci-reentrant-f: re-entrancy of the MKL-compatible reverse-communication CG from Fortran. Two
!! solves (a 2-D Poisson problem with a Jacobi preconditioner and a 1-D one without, different sizes and
!! right-hand sides, each with its own ipar/dpar/tmp) are advanced alternately, one pk_dcg call each, and
!! must give bitwise the same x, ipar, dpar and iteration counts as the same solves run one after the
!! other; a third solve restarted in the middle of the others (ipar(3) = 1) must not disturb them.
!! Solutions are checked against manufactured ones (b = A x*).
program t852_mkl_rci_reentrant_f
    use, intrinsic :: iso_c_binding, only: c_double
    use, intrinsic :: iso_fortran_env, only: error_unit
    use pkrylov_mod
    implicit none
    integer, parameter :: nx = 15, ny = 11, n1 = nx*ny, n2 = 97
    ! solve 1 (2-D, Jacobi) and solve 2 (1-D, no preconditioner): interleaved (a) and sequential (s)
    real(c_double) :: b1(n1), xs1(n1), x1a(n1), x1s(n1), t1a(n1, 4), t1s(n1, 4), d1a(128), d1s(128)
    real(c_double) :: b2(n2), xs2(n2), x2a(n2), x2s(n2), t2a(n2, 4), t2s(n2, 4), d2a(128), d2s(128)
    integer :: i1a(128), i1s(128), i2a(128), i2s(128), r1a, r1s, r2a, r2s, it1a, it1s, it2a, it2s, i, k
    logical :: done1, done2

    do i = 1, n1
        xs1(i) = cos(0.11d0*i) + 0.5d0
    end do
    do i = 1, n2
        xs2(i) = sin(0.23d0*i)
    end do
    call apply_A1(xs1, b1)
    call apply_A2(xs2, b2)

    call start(n1, x1a, b1, r1a, i1a, d1a, t1a, 1)
    call start(n1, x1s, b1, r1s, i1s, d1s, t1s, 1)
    call start(n2, x2a, b2, r2a, i2a, d2a, t2a, 0)
    call start(n2, x2s, b2, r2s, i2s, d2s, t2s, 0)

    ! interleaved: one call of each in turn
    done1 = .false.
    done2 = .false.
    do k = 1, 100000
        if (.not. done1) call step1(x1a, r1a, i1a, d1a, t1a, done1)
        if (.not. done2) call step2(x2a, r2a, i2a, d2a, t2a, done2)
        if (done1 .and. done2) exit
    end do
    ! sequential
    done1 = .false.
    do k = 1, 100000
        call step1(x1s, r1s, i1s, d1s, t1s, done1)
        if (done1) exit
    end do
    done2 = .false.
    do k = 1, 100000
        call step2(x2s, r2s, i2s, d2s, t2s, done2)
        if (done2) exit
    end do

    call pk_dcg_get(n1, x1a, b1, r1a, i1a, d1a, t1a, it1a)
    call pk_dcg_get(n1, x1s, b1, r1s, i1s, d1s, t1s, it1s)
    call pk_dcg_get(n2, x2a, b2, r2a, i2a, d2a, t2a, it2a)
    call pk_dcg_get(n2, x2s, b2, r2s, i2s, d2s, t2s, it2s)
    call expect(r1a == 0 .and. r1s == 0 .and. r2a == 0 .and. r2s == 0, 'all four solves converged')
    call expect(it1a == it1s .and. it2a == it2s .and. it1a > 5 .and. it2a > 5, 'same iteration counts')
    call expect(all(x1a == x1s) .and. all(x2a == x2s), 'interleaved x equals sequential x (bitwise)')
    call expect(all(i1a == i1s) .and. all(i2a == i2s), 'same ipar')
    call expect(all(d1a == d1s) .and. all(d2a == d2s), 'same dpar')
    call expect(norm2(x1a - xs1) <= 1.0d-8*norm2(xs1), 'solve 1 against x*')
    call expect(norm2(x2a - xs2) <= 1.0d-8*norm2(xs2), 'solve 2 against x*')

    ! restart solve 2 (ipar(3) = 1, from x = 0) while solve 1 runs again from scratch, interleaved
    call start(n1, x1a, b1, r1a, i1a, d1a, t1a, 1)
    done1 = .false.
    do k = 1, 7
        call step1(x1a, r1a, i1a, d1a, t1a, done1)
    end do
    x2a = 0
    i2a(3) = 1
    done2 = .false.
    do k = 1, 100000
        if (.not. done1) call step1(x1a, r1a, i1a, d1a, t1a, done1)
        if (.not. done2) call step2(x2a, r2a, i2a, d2a, t2a, done2)
        if (done1 .and. done2) exit
    end do
    call expect(all(x1a == x1s) .and. all(x2a == x2s), 'a restart interleaved with another solve')

contains

    !> pk_dcg_init and the settings: automatic test to 1e-11 (squared: 1e-22), silent.
    subroutine start(n, x, b, req, ipar, dpar, tmp, precond)
        integer, intent(in) :: n, precond
        real(c_double), intent(out) :: x(n)
        real(c_double), intent(in) :: b(n)
        integer, intent(out) :: req, ipar(128)
        real(c_double), intent(out) :: dpar(128), tmp(n, 4)
        x = 0
        call pk_dcg_init(n, x, b, req, ipar, dpar, tmp)
        ipar(5) = 1000
        ipar(6:7) = 0
        ipar(9) = 1
        ipar(10) = 0
        ipar(11) = precond
        dpar(1) = 1.0d-22
        call pk_dcg_check(n, x, b, req, ipar, dpar, tmp)
        call expect(req == 0, 'pk_dcg_check')
    end subroutine start

    !> One pk_dcg call of solve 1 and its request.
    subroutine step1(x, req, ipar, dpar, tmp, done)
        real(c_double), intent(inout) :: x(n1), dpar(128), tmp(n1, 4)
        integer, intent(inout) :: req, ipar(128)
        logical, intent(inout) :: done
        if (done) return
        call pk_dcg(n1, x, b1, req, ipar, dpar, tmp)
        select case (req)
        case (1)
            call apply_A1(tmp(:, 1), tmp(:, 2))
        case (3)
            tmp(:, 4) = tmp(:, 3)/4.5d0 ! diag(A1) = 4 + 0.5
        case default
            done = .true.
        end select
    end subroutine step1

    !> One pk_dcg call of solve 2 and its request.
    subroutine step2(x, req, ipar, dpar, tmp, done)
        real(c_double), intent(inout) :: x(n2), dpar(128), tmp(n2, 4)
        integer, intent(inout) :: req, ipar(128)
        logical, intent(inout) :: done
        call pk_dcg(n2, x, b2, req, ipar, dpar, tmp)
        select case (req)
        case (1)
            call apply_A2(tmp(:, 1), tmp(:, 2))
        case (3)
            call expect(.false., 'request 3 for the unpreconditioned solve')
        case default
            done = .true.
        end select
    end subroutine step2

    !> 2-D 5-point Laplacian (Dirichlet) plus 0.5 I.
    subroutine apply_A1(x, y)
        real(c_double), intent(in) :: x(nx, ny)
        real(c_double), intent(out) :: y(nx, ny)
        integer :: ii, jj
        do jj = 1, ny
            do ii = 1, nx
                y(ii, jj) = 4.5d0*x(ii, jj)
                if (ii > 1) y(ii, jj) = y(ii, jj) - x(ii - 1, jj)
                if (ii < nx) y(ii, jj) = y(ii, jj) - x(ii + 1, jj)
                if (jj > 1) y(ii, jj) = y(ii, jj) - x(ii, jj - 1)
                if (jj < ny) y(ii, jj) = y(ii, jj) - x(ii, jj + 1)
            end do
        end do
    end subroutine apply_A1

    !> 1-D Laplacian (Dirichlet) plus 0.1 I.
    subroutine apply_A2(x, y)
        real(c_double), intent(in) :: x(n2)
        real(c_double), intent(out) :: y(n2)
        integer :: ii
        do ii = 1, n2
            y(ii) = 2.1d0*x(ii)
            if (ii > 1) y(ii) = y(ii) - x(ii - 1)
            if (ii < n2) y(ii) = y(ii) - x(ii + 1)
        end do
    end subroutine apply_A2

    subroutine expect(cond, what)
        logical, intent(in) :: cond
        character(len=*), intent(in) :: what
        if (.not. cond) then
            write (error_unit, '(a)') 't852-mkl-rci-reentrant-f: FAILED: '//what
            error stop 1
        end if
    end subroutine expect

end program t852_mkl_rci_reentrant_f

!> t851-mkl-rci-errors-f: the error paths of the MKL-compatible reverse-communication CG from Fortran.
!! Checks the MKL codes and that nothing else changes: pk_dcg before pk_dcg_init (-11, x untouched) and
!! pk_dcg_get before it (itercount -1); pk_dcg_init with n = 0 and n = -3 (-10000, a later pk_dcg refuses
!! the ipar: -11); pk_dcg with another n than pk_dcg_init's (-11), with ipar(8:10) all 0 (-11), with a
!! negative dpar(1) (-10); pk_dcg_check with an altered ipar(1) (-1100), with NaN in b (-1100), with no
!! stopping test (-1010, ipar(8) = ipar(9) = 1 set), with a test that cannot pass (-1001) and both (-1011);
!! a breakdown on an indefinite matrix (-2, then -2 again). The thread's last message (pk_error_message
!! with a null context) names the offending argument.
program t851_mkl_rci_errors_f
    use, intrinsic :: iso_c_binding, only: c_double
    use, intrinsic :: ieee_arithmetic, only: ieee_value, ieee_quiet_nan
    use, intrinsic :: iso_fortran_env, only: error_unit
    use pkrylov_mod
    implicit none
    integer, parameter :: n = 4
    real(c_double) :: x(n), x0(n), b(n), tmp(n, 4), dpar(128), dpar0(128), d(n)
    integer :: ipar(128), ipar0(128), RCI_request, itercount, m, k
    type(pk_context) :: noctx
    character(len=1024) :: msg

    x = [0.5d0, -0.25d0, 1.0d0, 2.0d0]
    x0 = x
    b = [1.0d0, 2.0d0, 3.0d0, 4.0d0]

    ! before pk_dcg_init: -11, nothing touched (an all-zero ipar prints nothing)
    ipar = 0
    dpar = 0
    RCI_request = 99
    call pk_dcg(n, x, b, RCI_request, ipar, dpar, tmp)
    call expect(RCI_request == -11, 'pk_dcg before pk_dcg_init: -11')
    call expect(all(x == x0) .and. all(ipar == 0), 'pk_dcg before pk_dcg_init changes nothing')
    call pk_error_message(noctx, msg)
    call expect(index(msg, 'pkrylov_dcg_init') > 0, 'message says to call pkrylov_dcg_init: '//trim(msg))
    itercount = 5
    call pk_dcg_get(n, x, b, RCI_request, ipar, dpar, tmp, itercount)
    call expect(itercount == -1, 'pk_dcg_get before pk_dcg_init: itercount -1')

    ! n <= 0: -10000; the ipar left behind is refused
    do k = 0, -3, -3
        RCI_request = 99
        call pk_dcg_init(k, x, b, RCI_request, ipar, dpar, tmp)
        call expect(RCI_request == -10000, 'pk_dcg_init with n <= 0: -10000')
        call pk_error_message(noctx, msg)
        call expect(index(msg, "'n'") > 0, 'message names n: '//trim(msg))
        call pk_dcg(n, x, b, RCI_request, ipar, dpar, tmp)
        call expect(RCI_request == -11, 'pk_dcg after a failed pk_dcg_init: -11')
    end do

    ! a good init, silent
    call pk_dcg_init(n, x, b, RCI_request, ipar, dpar, tmp)
    call expect(RCI_request == 0, 'pk_dcg_init')
    ipar(6) = 0
    ipar(7) = 0
    ipar0 = ipar
    dpar0 = dpar

    ! pk_dcg: another n, no stopping test, a negative tolerance
    m = n - 1
    call pk_dcg(m, x, b, RCI_request, ipar, dpar, tmp)
    call expect(RCI_request == -11 .and. all(ipar == ipar0) .and. all(x == x0), 'another n: -11, unchanged')
    call pk_error_message(noctx, msg)
    call expect(index(msg, "'n' = 3") > 0 .and. index(msg, 'ipar(1) = 4') > 0, 'n message: '//trim(msg))
    ipar(8:10) = 0
    call pk_dcg(n, x, b, RCI_request, ipar, dpar, tmp)
    call expect(RCI_request == -11, 'no stopping test: -11')
    ipar = ipar0
    dpar(1) = -1.0d-3
    call pk_dcg(n, x, b, RCI_request, ipar, dpar, tmp)
    call expect(RCI_request == -10 .and. all(ipar == ipar0), 'negative dpar(1): -10')
    call pk_error_message(noctx, msg)
    call expect(index(msg, 'dpar(1)') > 0, 'message names dpar(1): '//trim(msg))
    dpar = dpar0

    ! pk_dcg_check: errors (-1100, nothing changed), fixes (-1010), warnings (-1001), both (-1011)
    ipar(1) = 7
    call pk_dcg_check(n, x, b, RCI_request, ipar, dpar, tmp)
    call expect(RCI_request == -1100 .and. ipar(1) == 7, 'altered ipar(1): -1100')
    ipar = ipar0
    b(3) = ieee_value(b(3), ieee_quiet_nan)
    call pk_dcg_check(n, x, b, RCI_request, ipar, dpar, tmp)
    call expect(RCI_request == -1100, 'NaN in b: -1100')
    call pk_error_message(noctx, msg)
    call expect(index(msg, "'b'") > 0 .and. index(msg, 'index 3') > 0, 'NaN message: '//trim(msg))
    b(3) = 3
    ipar(8:10) = 0
    dpar(1) = 1.0d-12
    call pk_dcg_check(n, x, b, RCI_request, ipar, dpar, tmp)
    call expect(RCI_request == -1010 .and. ipar(8) == 1 .and. ipar(9) == 1 .and. ipar(10) == 0, &
                'no stopping test: -1010 and ipar(8) = ipar(9) = 1')
    ipar = ipar0
    ipar(9) = 1
    dpar(1) = 0
    dpar(2) = 0
    call pk_dcg_check(n, x, b, RCI_request, ipar, dpar, tmp)
    call expect(RCI_request == -1001 .and. ipar(9) == 1 .and. ipar(8) == 1, 'zero tolerances: -1001')
    ipar(8:10) = 0
    call pk_dcg_check(n, x, b, RCI_request, ipar, dpar, tmp)
    call expect(RCI_request == -1011, 'changed and warned: -1011')

    ! breakdown: A = diag(1, -1, 1, -1), b = 1, x0 = 0: (p, A p) = 0 -> -2, and -2 again
    d = [1.0d0, -1.0d0, 1.0d0, -1.0d0]
    b = 1
    x = 0
    call pk_dcg_init(n, x, b, RCI_request, ipar, dpar, tmp)
    ipar(6) = 0
    ipar(9) = 1
    ipar(10) = 0
    dpar(1) = 1.0d-20
    do k = 1, 10
        call pk_dcg(n, x, b, RCI_request, ipar, dpar, tmp)
        if (RCI_request /= 1) exit
        tmp(:, 2) = d*tmp(:, 1)
    end do
    call expect(RCI_request == -2 .and. all(x == 0), 'indefinite matrix: -2, x unchanged')
    call pk_dcg(n, x, b, RCI_request, ipar, dpar, tmp)
    call expect(RCI_request == -2, 'after a breakdown: -2 again')

contains

    subroutine expect(cond, what)
        logical, intent(in) :: cond
        character(len=*), intent(in) :: what
        if (.not. cond) then
            write (error_unit, '(a)') 't851-mkl-rci-errors-f: FAILED: '//what
            error stop 1
        end if
    end subroutine expect

end program t851_mkl_rci_errors_f

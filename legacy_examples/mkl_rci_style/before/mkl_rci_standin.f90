!> mkl_rci_standin -- A STAND-IN FOR INTEL MKL, NOT MKL. MKL is not installed where this example is built,
!> so the `before` version of the program links this small plain-Fortran implementation of the four RCI CG
!> routines instead (module mkl_rci, as MKL's own mkl_rci.f90 interface module is named). It follows MKL's
!> documented calling sequence and parameters, which is all the example relies on:
!>  - dcg_init sets the defaults: ipar(1) = n, ipar(2) = 6, ipar(3) = 1 (stage), ipar(4) = 0 (iterations),
!>    ipar(5) = min(150, n), ipar(6:8) = 1, ipar(9) = 0, ipar(10) = 1, ipar(11) = 0; dpar(1) = 1e-6, the rest
!>    0; RCI_request = 0, or -10000 for n <= 0;
!>  - dcg_check: -1100 for inconsistent parameters, -1010 when no stopping test is enabled (then
!>    ipar(8) = ipar(9) = 1), -1001 warnings, -1011 both, else 0;
!>  - dcg: tmp(:,1) search direction p, tmp(:,2) = A p (request 1), tmp(:,3) residual r, tmp(:,4) = M^-1 r
!>    (request 3, when ipar(11) /= 0), request 2 for the user's test (ipar(10) /= 0); 0 when
!>    dpar(5) <= dpar(4) = dpar(1) dpar(3) + dpar(2) (ipar(9) /= 0; dpar(3), dpar(5), dpar(6) are SQUARED
!>    residual norms), -1 after ipar(5) iterations (ipar(8) /= 0), -2 on a division by zero, -10/-11 for
!>    invalid dpar/ipar; dpar(7), dpar(8) are alpha and beta;
!>  - dcg_get: itercount = ipar(4).
!> Like MKL it keeps no state of its own: the stage of the computation is ipar(3), the iteration count
!> ipar(4), and (r, M^-1 r), which beta needs, is kept in dpar(128) (an entry MKL reserves). Messages are
!> not printed (ipar(2), ipar(6), ipar(7) are accepted and ignored).
module mkl_rci
  implicit none
  private
  public :: dcg_init, dcg_check, dcg, dcg_get
  integer, parameter :: rk = kind(1.0d0)
  ! stages kept in ipar(3)
  integer, parameter :: st_start = 1, st_x0 = 2, st_precond = 3, st_ap = 4, st_tested = 5, st_broken = 6

contains

  !> Defaults in ipar and dpar, tmp zeroed.
  subroutine dcg_init(n, x, b, rci_request, ipar, dpar, tmp)
    integer, intent(in) :: n
    real(rk), intent(in) :: x(n), b(n)
    integer, intent(out) :: rci_request, ipar(128)
    real(rk), intent(out) :: dpar(128), tmp(n, 4)
    ipar = 0
    dpar = 0.0_rk
    if (n <= 0) then
      rci_request = -10000
      return
    end if
    tmp = 0.0_rk
    ipar(1) = n
    ipar(2) = 6
    ipar(3) = st_start
    ipar(5) = min(150, n)
    ipar(6:8) = 1
    ipar(10) = 1
    dpar(1) = 1.0e-6_rk
    rci_request = 0
  end subroutine dcg_init

  !> .true. when ipar and dpar are consistent with n.
  logical function valid(n, ipar, dpar)
    integer, intent(in) :: n, ipar(128)
    real(rk), intent(in) :: dpar(128)
    valid = n > 0 .and. ipar(1) == n .and. ipar(3) >= st_start .and. ipar(3) <= st_broken .and. &
            ipar(4) >= 0 .and. (ipar(8) == 0 .or. ipar(5) >= 0) .and. dpar(1) >= 0.0_rk .and. &
            dpar(2) >= 0.0_rk
  end function valid

  !> Consistency checks; may enable ipar(8) and ipar(9).
  subroutine dcg_check(n, x, b, rci_request, ipar, dpar, tmp)
    integer, intent(in) :: n
    real(rk), intent(in) :: x(n), b(n)
    integer, intent(out) :: rci_request
    integer, intent(inout) :: ipar(128)
    real(rk), intent(inout) :: dpar(128), tmp(n, 4)
    logical :: changed, warned
    if (.not. valid(n, ipar, dpar)) then
      rci_request = -1100
      return
    end if
    changed = ipar(8) == 0 .and. ipar(9) == 0 .and. ipar(10) == 0
    if (changed) ipar(8:9) = 1
    warned = (ipar(9) /= 0 .and. dpar(1) == 0.0_rk .and. dpar(2) == 0.0_rk) .or. &
             (ipar(9) /= 0 .and. dpar(1) >= 1.0_rk) .or. (ipar(8) /= 0 .and. ipar(5) == 0)
    rci_request = 0
    if (changed) rci_request = -1010
    if (warned) rci_request = rci_request - 1001 + merge(1000, 0, changed)
  end subroutine dcg_check

  !> One step of the reverse-communication preconditioned CG.
  subroutine dcg(n, x, b, rci_request, ipar, dpar, tmp)
    integer, intent(in) :: n
    real(rk), intent(inout) :: x(n)
    real(rk), intent(in) :: b(n)
    integer, intent(out) :: rci_request
    integer, intent(inout) :: ipar(128)
    real(rk), intent(inout) :: dpar(128), tmp(n, 4)
    real(rk) :: pq, alpha
    if (.not. valid(n, ipar, dpar)) then
      rci_request = -11
      return
    end if
    if (ipar(8) == 0 .and. ipar(9) == 0 .and. ipar(10) == 0) then
      rci_request = -11
      return
    end if
    select case (ipar(3))
    case (st_start)                       ! ask for A x0
      tmp(:, 1) = x
      ipar(3) = st_x0
      rci_request = 1
    case (st_x0)                          ! r0 = b - A x0
      tmp(:, 3) = b - tmp(:, 2)
      ipar(4) = 0
      dpar(3) = sum(tmp(:, 3)**2)
      dpar(5) = dpar(3)
      dpar(6:8) = 0.0_rk
      dpar(128) = 0.0_rk
      call tests(n, rci_request, ipar, dpar, tmp)
    case (st_precond)                     ! z = M^-1 r is in tmp(:,4)
      call new_direction(n, rci_request, ipar, dpar, tmp)
    case (st_ap)                          ! A p is in tmp(:,2)
      pq = dot_product(tmp(:, 1), tmp(:, 2))
      if (.not. pq > 0.0_rk) then
        ipar(3) = st_broken
        rci_request = -2
        return
      end if
      alpha = dpar(128) / pq
      x = x + alpha * tmp(:, 1)
      tmp(:, 3) = tmp(:, 3) - alpha * tmp(:, 2)
      ipar(4) = ipar(4) + 1
      dpar(7) = alpha
      dpar(6) = dpar(5)
      dpar(5) = sum(tmp(:, 3)**2)
      if (ipar(11) == 0) dpar(8) = dpar(5) / dpar(6)
      call tests(n, rci_request, ipar, dpar, tmp)
    case (st_tested)                      ! the user's test said: continue
      call continue_iteration(n, rci_request, ipar, dpar, tmp)
    case default                          ! after a breakdown
      rci_request = -2
    end select
  end subroutine dcg

  !> Stopping tests on the residual just computed.
  subroutine tests(n, rci_request, ipar, dpar, tmp)
    integer, intent(in) :: n
    integer, intent(out) :: rci_request
    integer, intent(inout) :: ipar(128)
    real(rk), intent(inout) :: dpar(128), tmp(n, 4)
    dpar(4) = dpar(1) * dpar(3) + dpar(2)
    ipar(3) = st_tested
    if (dpar(5) == 0.0_rk .or. (ipar(9) /= 0 .and. dpar(5) <= dpar(4))) then
      rci_request = 0
    else if (ipar(10) /= 0) then
      rci_request = 2
    else
      call continue_iteration(n, rci_request, ipar, dpar, tmp)
    end if
  end subroutine tests

  !> Iteration cap, then the preconditioner (request 3) or directly the next direction.
  subroutine continue_iteration(n, rci_request, ipar, dpar, tmp)
    integer, intent(in) :: n
    integer, intent(out) :: rci_request
    integer, intent(inout) :: ipar(128)
    real(rk), intent(inout) :: dpar(128), tmp(n, 4)
    ipar(3) = st_tested
    if (dpar(5) == 0.0_rk) then
      rci_request = 0
    else if (ipar(8) /= 0 .and. ipar(4) >= ipar(5)) then
      rci_request = -1
    else if (ipar(11) /= 0) then
      ipar(3) = st_precond
      rci_request = 3
    else
      tmp(:, 4) = tmp(:, 3)
      call new_direction(n, rci_request, ipar, dpar, tmp)
    end if
  end subroutine continue_iteration

  !> p = z (first) or z + beta p, beta = (r, z) / (r, z)_old; then request 1 for A p.
  subroutine new_direction(n, rci_request, ipar, dpar, tmp)
    integer, intent(in) :: n
    integer, intent(out) :: rci_request
    integer, intent(inout) :: ipar(128)
    real(rk), intent(inout) :: dpar(128), tmp(n, 4)
    real(rk) :: rz
    rz = dot_product(tmp(:, 3), tmp(:, 4))
    if (.not. rz > 0.0_rk) then
      ipar(3) = st_broken
      rci_request = -2
      return
    end if
    if (ipar(4) == 0) then
      tmp(:, 1) = tmp(:, 4)
      dpar(8) = 0.0_rk
    else
      dpar(8) = rz / dpar(128)
      tmp(:, 1) = tmp(:, 4) + dpar(8) * tmp(:, 1)
    end if
    dpar(128) = rz
    ipar(3) = st_ap
    rci_request = 1
  end subroutine new_direction

  !> The number of iterations done.
  subroutine dcg_get(n, x, b, rci_request, ipar, dpar, tmp, itercount)
    integer, intent(in) :: n, rci_request, ipar(128)
    real(rk), intent(in) :: x(n), b(n), dpar(128), tmp(n, 4)
    integer, intent(out) :: itercount
    itercount = ipar(4)
  end subroutine dcg_get
end module mkl_rci

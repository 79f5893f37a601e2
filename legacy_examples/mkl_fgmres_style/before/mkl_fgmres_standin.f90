!> mkl_fgmres_standin -- A STAND-IN FOR INTEL MKL, NOT MKL. MKL is not installed where this example is
!> built, so the `before` version of the program links this small plain-Fortran implementation of the four
!> RCI FGMRES routines instead (module mkl_rci, as MKL's own mkl_rci.f90 interface module is named). It
!> follows MKL's documented calling sequence and parameters, which is all the example relies on:
!>  - dfgmres_init sets the defaults: ipar(1) = n, ipar(2) = 6, ipar(3) = 1 (stage), ipar(4) = 0,
!>    ipar(5) = ipar(15) = min(150, n), ipar(6:8) = 1, ipar(9) = 0, ipar(10) = 1, ipar(11:14) = 0,
!>    ipar(16:21) the offsets of the parts of tmp; dpar(1) = 1e-6, dpar(8) = 1e-12, the rest 0;
!>    RCI_request = 0, or -10000 for n <= 0; tmp is not touched;
!>  - dfgmres_check: -1100 for inconsistent parameters; ipar(16:21) set for ipar(15) (RCI_request 0);
!>    -1010 when no stopping test is enabled (then ipar(8) = ipar(9) = 1), else 0;
!>  - dfgmres: restarted flexible GMRES (restart ipar(15)), right preconditioning; request 1:
!>    tmp(ipar(23):) = A tmp(ipar(22):), request 3: tmp(ipar(23):) = M^-1 tmp(ipar(22):) (ipar(11) /= 0),
!>    request 2: the user's test (ipar(10) /= 0), request 4: the zero-norm check of dpar(7) (ipar(12) = 0);
!>    0 when dpar(5) <= dpar(4) = dpar(1) dpar(3) + dpar(2) (ipar(9) /= 0) or dpar(7) <= dpar(8)
!>    (ipar(12) /= 0), -1 after ipar(5) iterations (ipar(8) /= 0), -10 on a division by zero, -11 without
!>    a stopping test, -12 for invalid parameters; dpar(3), dpar(5), dpar(6) are residual 2-norms, dpar(7)
!>    the norm of the generated vector; x changes only at restarts;
!>  - dfgmres_get: itercount = ipar(4); the iterate x + Z y into x (ipar(13) = 0), into b (ipar(13) > 0)
!>    or nowhere (ipar(13) < 0).
!> tmp layout (MKL's): the basis v_1..v_{m+1}, then at ipar(16) the rotated Hessenberg matrix (packed upper
!> triangle), ipar(17) cosines, ipar(18) sines, ipar(19) the rotated residual, ipar(20) the least-squares
!> solution, ipar(21) the preconditioned vectors z_1..z_m. Messages are not printed.
module mkl_rci
  implicit none
  private
  public :: dfgmres_init, dfgmres_check, dfgmres, dfgmres_get
  integer, parameter :: rk = kind(1.0d0)
  ! stages kept in ipar(3)
  integer, parameter :: st_start = 1, st_ax0 = 2, st_restart = 3, st_precond = 4, st_matvec = 5, &
                        st_zero = 6, st_user = 7, st_stopped = 8, st_broken = 9

contains

  !> ipar(16:21) for ipar(1) = n and ipar(15) = m.
  subroutine set_layout(ipar)
    integer, intent(inout) :: ipar(128)
    integer :: n, m
    n = ipar(1)
    m = ipar(15)
    ipar(16) = (m + 1) * n + 1
    ipar(17) = ipar(16) + m * (m + 1) / 2
    ipar(18) = ipar(17) + m
    ipar(19) = ipar(18) + m
    ipar(20) = ipar(19) + m + 1
    ipar(21) = ipar(20) + m
  end subroutine set_layout

  !> Position in tmp of R(i, j) (packed upper triangle by columns).
  integer function ir(ipar, i, j)
    integer, intent(in) :: ipar(128), i, j
    ir = ipar(16) - 1 + j * (j - 1) / 2 + i
  end function ir

  subroutine dfgmres_init(n, x, b, rci_request, ipar, dpar, tmp)
    integer, intent(in) :: n
    real(rk), intent(in) :: x(n), b(n)
    integer, intent(out) :: rci_request, ipar(128)
    real(rk), intent(out) :: dpar(128)
    real(rk), intent(inout) :: tmp(*)
    ipar = 0
    dpar = 0.0_rk
    if (n <= 0) then
      rci_request = -10000
      return
    end if
    ipar(1) = n
    ipar(2) = 6
    ipar(3) = st_start
    ipar(5) = min(150, n)
    ipar(6:8) = 1
    ipar(10) = 1
    ipar(15) = min(150, n)
    call set_layout(ipar)
    ipar(22) = 1
    ipar(23) = n + 1
    dpar(1) = 1.0e-6_rk
    dpar(8) = 1.0e-12_rk
    rci_request = 0
  end subroutine dfgmres_init

  !> .true. when ipar and dpar are consistent with n.
  logical function valid(n, ipar, dpar)
    integer, intent(in) :: n, ipar(128)
    real(rk), intent(in) :: dpar(128)
    valid = n > 0 .and. ipar(1) == n .and. ipar(3) >= st_start .and. ipar(3) <= st_broken .and. &
            ipar(4) >= 0 .and. (ipar(8) == 0 .or. ipar(5) >= 0) .and. ipar(15) >= 1 .and. &
            ipar(14) >= 0 .and. dpar(1) >= 0.0_rk .and. dpar(2) >= 0.0_rk .and. dpar(8) >= 0.0_rk
  end function valid

  subroutine dfgmres_check(n, x, b, rci_request, ipar, dpar, tmp)
    integer, intent(in) :: n
    real(rk), intent(in) :: x(n), b(n)
    integer, intent(out) :: rci_request
    integer, intent(inout) :: ipar(128)
    real(rk), intent(inout) :: dpar(128), tmp(*)
    if (.not. valid(n, ipar, dpar)) then
      rci_request = -1100
      return
    end if
    call set_layout(ipar)
    rci_request = 0
    if (ipar(8) == 0 .and. ipar(9) == 0 .and. ipar(10) == 0) then
      ipar(8:9) = 1
      rci_request = -1010
    end if
  end subroutine dfgmres_check

  subroutine dfgmres(n, x, b, rci_request, ipar, dpar, tmp)
    integer, intent(in) :: n
    real(rk), intent(inout) :: x(n)
    real(rk), intent(inout) :: b(n)
    integer, intent(out) :: rci_request
    integer, intent(inout) :: ipar(128)
    real(rk), intent(inout) :: dpar(128), tmp(*)
    real(rk) :: beta
    integer :: j
    if (.not. valid(n, ipar, dpar)) then
      rci_request = -12
      return
    end if
    if (ipar(8) == 0 .and. ipar(9) == 0 .and. ipar(10) == 0) then
      rci_request = -11
      return
    end if
    select case (ipar(3))
    case (st_start)                       ! ask for A x0
      call set_layout(ipar)
      ipar(14) = 0
      call request_ax(n, x, rci_request, ipar, tmp, st_ax0)
    case (st_ax0, st_restart)             ! r = b - A x into v_1
      tmp(1:n) = b - tmp(n + 1:2 * n)
      beta = sqrt(dot_product(tmp(1:n), tmp(1:n)))
      if (ipar(3) == st_ax0) then
        ipar(4) = 0
        dpar(3) = beta
        dpar(6:7) = 0.0_rk
      end if
      call cycle_start(n, x, rci_request, ipar, dpar, tmp, beta, ipar(3) == st_restart)
    case (st_precond)                     ! z_j is in its slot: ask for A z_j
      j = ipar(14) + 1
      ipar(22) = ipar(21) + (j - 1) * n
      ipar(23) = j * n + 1
      ipar(3) = st_matvec
      rci_request = 1
    case (st_matvec)
      call step(n, x, rci_request, ipar, dpar, tmp)
    case (st_zero)                        ! the caller found dpar(7) nonzero
      call test_user(n, x, rci_request, ipar, dpar, tmp)
    case (st_user)                        ! the caller's test said: continue
      call test_maxit(n, x, rci_request, ipar, dpar, tmp)
    case (st_stopped)
      call advance(n, x, rci_request, ipar, dpar, tmp)
    case default
      rci_request = -10
    end select
  end subroutine dfgmres

  !> tmp(1:n) = x and request 1 for A x into tmp(n+1:2n).
  subroutine request_ax(n, x, rci_request, ipar, tmp, stage)
    integer, intent(in) :: n, stage
    real(rk), intent(in) :: x(n)
    integer, intent(out) :: rci_request
    integer, intent(inout) :: ipar(128)
    real(rk), intent(inout) :: tmp(*)
    tmp(1:n) = x
    ipar(22) = 1
    ipar(23) = n + 1
    ipar(3) = stage
    rci_request = 1
  end subroutine request_ax

  !> Residual tests on the start/restart residual, then v_1 = r / beta and the first step.
  subroutine cycle_start(n, x, rci_request, ipar, dpar, tmp, beta, restart)
    integer, intent(in) :: n
    real(rk), intent(inout) :: x(n), dpar(128), tmp(*)
    integer, intent(out) :: rci_request
    integer, intent(inout) :: ipar(128)
    real(rk), intent(in) :: beta
    logical, intent(in) :: restart
    tmp(ipar(19):ipar(19) + ipar(15)) = 0.0_rk
    tmp(ipar(19)) = beta
    ipar(14) = 0
    dpar(5) = beta
    dpar(4) = dpar(1) * dpar(3) + dpar(2)
    if (beta == 0.0_rk .or. (ipar(9) /= 0 .and. beta <= dpar(4))) then
      if (beta > 0.0_rk) tmp(1:n) = tmp(1:n) / beta
      ipar(3) = st_stopped
      rci_request = 0
      return
    end if
    tmp(1:n) = tmp(1:n) / beta
    if (restart) then
      call advance(n, x, rci_request, ipar, dpar, tmp)
    else
      call test_maxit(n, x, rci_request, ipar, dpar, tmp)
    end if
  end subroutine cycle_start

  !> Step j: Arnoldi on w = A z_j (in v_{j+1}), Givens rotations, tests.
  subroutine step(n, x, rci_request, ipar, dpar, tmp)
    integer, intent(in) :: n
    real(rk), intent(inout) :: x(n), dpar(128), tmp(*)
    integer, intent(out) :: rci_request
    integer, intent(inout) :: ipar(128)
    integer :: i, j, w, v
    real(rk) :: h, hnext, t, rho, c, s
    j = ipar(14) + 1
    w = j * n
    do i = 1, j                            ! modified Gram-Schmidt
      v = (i - 1) * n
      h = dot_product(tmp(w + 1:w + n), tmp(v + 1:v + n))
      tmp(ir(ipar, i, j)) = h
      tmp(w + 1:w + n) = tmp(w + 1:w + n) - h * tmp(v + 1:v + n)
    end do
    hnext = sqrt(dot_product(tmp(w + 1:w + n), tmp(w + 1:w + n)))
    if (hnext > 0.0_rk) tmp(w + 1:w + n) = tmp(w + 1:w + n) / hnext
    do i = 1, j - 1                        ! the previous rotations on column j
      c = tmp(ipar(17) + i - 1)
      s = tmp(ipar(18) + i - 1)
      t = c * tmp(ir(ipar, i, j)) + s * tmp(ir(ipar, i + 1, j))
      tmp(ir(ipar, i + 1, j)) = -s * tmp(ir(ipar, i, j)) + c * tmp(ir(ipar, i + 1, j))
      tmp(ir(ipar, i, j)) = t
    end do
    rho = hypot(tmp(ir(ipar, j, j)), hnext)
    if (.not. rho > 0.0_rk) then
      ipar(3) = st_broken
      rci_request = -10
      return
    end if
    tmp(ipar(17) + j - 1) = tmp(ir(ipar, j, j)) / rho
    tmp(ipar(18) + j - 1) = hnext / rho
    tmp(ir(ipar, j, j)) = rho
    tmp(ipar(19) + j) = -tmp(ipar(18) + j - 1) * tmp(ipar(19) + j - 1)
    tmp(ipar(19) + j - 1) = tmp(ipar(17) + j - 1) * tmp(ipar(19) + j - 1)
    ipar(14) = j
    ipar(4) = ipar(4) + 1
    dpar(6) = dpar(5)
    dpar(5) = abs(tmp(ipar(19) + j))
    dpar(7) = hnext
    dpar(4) = dpar(1) * dpar(3) + dpar(2)
    ipar(3) = st_stopped
    rci_request = 0
    if (hnext == 0.0_rk .or. dpar(5) == 0.0_rk .or. (ipar(9) /= 0 .and. dpar(5) <= dpar(4))) return
    if (ipar(12) /= 0) then
      if (dpar(7) <= dpar(8)) return
    else
      ipar(3) = st_zero
      rci_request = 4
      return
    end if
    call test_user(n, x, rci_request, ipar, dpar, tmp)
  end subroutine step

  subroutine test_user(n, x, rci_request, ipar, dpar, tmp)
    integer, intent(in) :: n
    real(rk), intent(inout) :: x(n), dpar(128), tmp(*)
    integer, intent(out) :: rci_request
    integer, intent(inout) :: ipar(128)
    if (ipar(10) /= 0) then
      ipar(3) = st_user
      rci_request = 2
    else
      call test_maxit(n, x, rci_request, ipar, dpar, tmp)
    end if
  end subroutine test_user

  subroutine test_maxit(n, x, rci_request, ipar, dpar, tmp)
    integer, intent(in) :: n
    real(rk), intent(inout) :: x(n), dpar(128), tmp(*)
    integer, intent(out) :: rci_request
    integer, intent(inout) :: ipar(128)
    if (ipar(8) /= 0 .and. ipar(4) >= ipar(5)) then
      ipar(3) = st_stopped
      rci_request = -1
    else
      call advance(n, x, rci_request, ipar, dpar, tmp)
    end if
  end subroutine test_maxit

  !> The next step of the cycle, or the restart (x += Z y, request 1 for A x).
  subroutine advance(n, x, rci_request, ipar, dpar, tmp)
    integer, intent(in) :: n
    real(rk), intent(inout) :: x(n), dpar(128), tmp(*)
    integer, intent(out) :: rci_request
    integer, intent(inout) :: ipar(128)
    integer :: j
    j = ipar(14)
    if (j == 0 .and. tmp(ipar(19)) == 0.0_rk) then
      ipar(3) = st_stopped
      rci_request = 0
      return
    end if
    if (j >= ipar(15)) then
      call combine(n, ipar, tmp, j, x, x)
      ipar(14) = 0
      call request_ax(n, x, rci_request, ipar, tmp, st_restart)
      return
    end if
    if (j > 0 .and. tmp(ipar(18) + j - 1) == 0.0_rk) then
      ipar(3) = st_broken
      rci_request = -10
      return
    end if
    j = j + 1
    ipar(22) = (j - 1) * n + 1
    if (ipar(11) /= 0) then
      ipar(23) = ipar(21) + (j - 1) * n
      ipar(3) = st_precond
      rci_request = 3
    else
      ipar(23) = j * n + 1
      ipar(3) = st_matvec
      rci_request = 1
    end if
  end subroutine advance

  !> out = base + sum_j y_j u_j with y = R^-1 g (into tmp(ipar(20))), u = z (preconditioned) or v.
  subroutine combine(n, ipar, tmp, k, base, out)
    integer, intent(in) :: n, ipar(128), k
    real(rk), intent(inout) :: tmp(*)
    real(rk), intent(in) :: base(n)
    real(rk), intent(inout) :: out(n)
    integer :: i, j, u
    real(rk) :: s, acc(n)
    do j = k, 1, -1
      s = tmp(ipar(19) + j - 1)
      do i = j + 1, k
        s = s - tmp(ir(ipar, j, i)) * tmp(ipar(20) + i - 1)
      end do
      tmp(ipar(20) + j - 1) = s / tmp(ir(ipar, j, j))
    end do
    u = 0
    if (ipar(11) /= 0) u = ipar(21) - 1
    acc = base
    do j = 1, k
      acc = acc + tmp(ipar(20) + j - 1) * tmp(u + (j - 1) * n + 1:u + j * n)
    end do
    out = acc
  end subroutine combine

  subroutine dfgmres_get(n, x, b, rci_request, ipar, dpar, tmp, itercount)
    integer, intent(in) :: n, ipar(128)
    real(rk), intent(inout) :: x(n), b(n), tmp(*)
    integer, intent(out) :: rci_request, itercount
    real(rk), intent(in) :: dpar(128)
    integer :: k
    if (.not. valid(n, ipar, dpar)) then
      rci_request = -12
      itercount = 0
      return
    end if
    itercount = ipar(4)
    rci_request = 0
    if (ipar(13) < 0) return
    k = ipar(14)
    if (ipar(3) <= st_restart) k = 0
    if (ipar(13) > 0) then
      call combine(n, ipar, tmp, k, x, b)
    else
      call combine(n, ipar, tmp, k, x, x)
    end if
  end subroutine dfgmres_get
end module mkl_rci

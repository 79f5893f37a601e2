!> pressure_mkl -- the pressure solve of a small non-hydrostatic model written against the calling
!> sequence of Intel MKL's reverse-communication CG (RCI ISS: dcg_init, dcg_check, dcg, dcg_get).
!>
!> The model owns its operator and its preconditioner; the RCI solver only asks for them:
!>  - the grid: nx x ny columns of nz levels on a uniform 1 km mesh, level thickness stretched from 20 m at
!>    the surface to 250 m at the bottom, rigid walls at the sides and the bottom (zero flux), the pressure
!>    fixed at the top (a Dirichlet condition through the half-cell above level 1);
!>  - the operator: minus the finite-volume Laplacian of the pressure (face area / distance couplings),
!>    symmetric positive definite, applied matrix-free on the model's (nx, ny, nz) arrays (request 1);
!>  - the preconditioner: the model's diagonal scaling (request 3);
!>  - the stopping test is the model's own (request 2): the recurrence residual ||r||_2 = sqrt(dpar(5))
!>    against relTol times the norm of the right-hand side, so that every time step solves to the same
!>    relative accuracy whatever its first guess (the pressure of the previous step);
!>  - every time step re-initialises the solver (dcg_init, dcg_check) and gets the iteration count from
!>    dcg_get.
!>
!> Usage: pressure_mkl [output-file]   (writes the iteration counts and the final pressure, for the test)
module model_grid
  implicit none
  integer, parameter :: rk = kind(1.0d0)
  integer, parameter :: nx = 48, ny = 40, nz = 12, nxyz = nx * ny * nz
  real(rk), parameter :: dx = 1000.0_rk, dy = 1000.0_rk
  real(rk) :: dz(nz)                               !< level thickness (m)
  real(rk) :: cW(nz), cS(nz), cV(nz + 1)           !< couplings: x and y faces per level, vertical faces
  real(rk) :: diag(nx, ny, nz)                     !< the diagonal of the operator
contains
  !> Stretched levels and the couplings (area of the face / distance between the centres).
  subroutine init_grid()
    integer :: i, j, k
    do k = 1, nz
      dz(k) = 20.0_rk + 230.0_rk * ((k - 1.0_rk) / (nz - 1.0_rk))**2
    end do
    do k = 1, nz
      cW(k) = dy * dz(k) / dx
      cS(k) = dx * dz(k) / dy
    end do
    cV(1) = dx * dy / (0.5_rk * dz(1))            ! to the fixed pressure above level 1
    do k = 2, nz
      cV(k) = dx * dy / (0.5_rk * (dz(k - 1) + dz(k)))
    end do
    cV(nz + 1) = 0.0_rk                          ! closed bottom
    do k = 1, nz
      do j = 1, ny
        do i = 1, nx
          diag(i, j, k) = cV(k) + cV(k + 1)
          if (i > 1) diag(i, j, k) = diag(i, j, k) + cW(k)
          if (i < nx) diag(i, j, k) = diag(i, j, k) + cW(k)
          if (j > 1) diag(i, j, k) = diag(i, j, k) + cS(k)
          if (j < ny) diag(i, j, k) = diag(i, j, k) + cS(k)
        end do
      end do
    end do
  end subroutine init_grid

  !> y = A x: minus the Laplacian, matrix-free.
  subroutine apply_pressure_operator(x, y)
    real(rk), intent(in) :: x(nx, ny, nz)
    real(rk), intent(out) :: y(nx, ny, nz)
    integer :: i, j, k
    do k = 1, nz
      do j = 1, ny
        do i = 1, nx
          y(i, j, k) = diag(i, j, k) * x(i, j, k)
          if (i > 1) y(i, j, k) = y(i, j, k) - cW(k) * x(i - 1, j, k)
          if (i < nx) y(i, j, k) = y(i, j, k) - cW(k) * x(i + 1, j, k)
          if (j > 1) y(i, j, k) = y(i, j, k) - cS(k) * x(i, j - 1, k)
          if (j < ny) y(i, j, k) = y(i, j, k) - cS(k) * x(i, j + 1, k)
          if (k > 1) y(i, j, k) = y(i, j, k) - cV(k) * x(i, j, k - 1)
          if (k < nz) y(i, j, k) = y(i, j, k) - cV(k + 1) * x(i, j, k + 1)
        end do
      end do
    end do
  end subroutine apply_pressure_operator

  !> z = D^-1 r: the diagonal preconditioner.
  subroutine apply_diag_precond(r, z)
    real(rk), intent(in) :: r(nx, ny, nz)
    real(rk), intent(out) :: z(nx, ny, nz)
    z = r / diag
  end subroutine apply_diag_precond

  !> The right-hand side of time step `step`: the divergence of a provisional velocity (a travelling
  !> convective cell and a large-scale wave), times the cell volume.
  subroutine pressure_rhs(step, b)
    integer, intent(in) :: step
    real(rk), intent(out) :: b(nx, ny, nz)
    real(rk), parameter :: pi = 3.14159265358979323846_rk
    real(rk) :: xc, yc, zc, depth
    integer :: i, j, k
    xc = 12.0_rk + 3.0_rk * step
    yc = 20.0_rk
    depth = 0.0_rk
    do k = 1, nz
      zc = depth + 0.5_rk * dz(k)
      depth = depth + dz(k)
      do j = 1, ny
        do i = 1, nx
          b(i, j, k) = dx * dy * dz(k) * 1.0e-4_rk * &
                       (exp(-((i - xc)**2 + (j - yc)**2) / 18.0_rk) * cos(pi * zc / 800.0_rk) &
                        + 0.2_rk * sin(2.0_rk * pi * (i + 0.5_rk * step) / nx) * cos(pi * j / ny))
        end do
      end do
    end do
  end subroutine pressure_rhs
end module model_grid

program pressure_mkl
  use model_grid
  use mkl_rci           ! the reverse-communication CG routines
  implicit none
  integer, parameter :: nsteps = 3
  real(rk), parameter :: relTol = 1.0e-10_rk      ! model parameter: relative residual of the pressure solve
  real(rk) :: p(nx, ny, nz), rhs(nx, ny, nz), tmp(nxyz, 4), dpar(128), bnorm
  integer :: ipar(128), rci_request, itercount, iters(nsteps), step
  character(len=1024) :: outfile

  call init_grid()
  p = 0.0_rk
  do step = 1, nsteps
    call pressure_rhs(step, rhs)
    bnorm = sqrt(sum(rhs**2))
    ! --- RCI CG: p (the previous step's pressure) is the first guess ---
    call dcg_init(nxyz, p, rhs, rci_request, ipar, dpar, tmp)
    if (rci_request /= 0) call model_abort('dcg_init', rci_request)
    ipar(5) = 2000        ! maximum number of iterations
    ipar(8) = 1           ! stop at ipar(5) iterations
    ipar(9) = 0           ! no automatic residual test ...
    ipar(10) = 1          ! ... the model's own test (RCI_request = 2)
    ipar(11) = 1          ! preconditioned (RCI_request = 3)
    call dcg_check(nxyz, p, rhs, rci_request, ipar, dpar, tmp)
    if (rci_request /= 0) call model_abort('dcg_check', rci_request)
    rci: do
      call dcg(nxyz, p, rhs, rci_request, ipar, dpar, tmp)
      select case (rci_request)
      case (1)            ! tmp(:,2) = A tmp(:,1)
        call apply_pressure_operator(tmp(1, 1), tmp(1, 2))
      case (2)            ! stopping test: ||r||_2 <= relTol ||b||_2
        if (sqrt(dpar(5)) <= relTol * bnorm) exit rci
      case (3)            ! tmp(:,4) = M^-1 tmp(:,3)
        call apply_diag_precond(tmp(1, 3), tmp(1, 4))
      case default        ! 0 cannot happen without the automatic test; < 0: failure
        call model_abort('dcg', rci_request)
      end select
    end do rci
    call dcg_get(nxyz, p, rhs, rci_request, ipar, dpar, tmp, itercount)
    iters(step) = itercount
    write(*, '(a,i3,a,i5,a,es10.3,a,es10.3)') ' step', step, ': CG iterations', itercount, &
      ', residual', sqrt(dpar(5)) / bnorm, ', true residual', true_residual(p, rhs) / bnorm
  end do

  if (command_argument_count() >= 1) then
    call get_command_argument(1, outfile)
    call write_result(trim(outfile))
  end if

contains
  !> ||b - A x||_2, recomputed (a diagnostic the model prints).
  function true_residual(x, b) result(res)
    real(rk), intent(in) :: x(nx, ny, nz), b(nx, ny, nz)
    real(rk) :: res
    real(rk), allocatable :: ax(:, :, :)
    allocate(ax(nx, ny, nz))
    call apply_pressure_operator(x, ax)
    res = sqrt(sum((b - ax)**2))
  end function true_residual

  !> The model's error exit.
  subroutine model_abort(where, code)
    character(len=*), intent(in) :: where
    integer, intent(in) :: code
    write(*, '(3a,i0)') ' pressure solver failure in ', where, ': RCI_request = ', code
    error stop 1
  end subroutine model_abort

  !> Output for the comparison test: steps and unknowns, the iteration counts, the final pressure.
  subroutine write_result(fname)
    character(len=*), intent(in) :: fname
    integer :: u
    open(newunit=u, file=fname, status='replace', action='write')
    write(u, '(2i10)') nsteps, nxyz
    write(u, '(10i8)') iters
    write(u, '(es25.17)') p
    close(u)
  end subroutine write_result
end program pressure_mkl

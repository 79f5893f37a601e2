!> tracer_mkl -- the implicit tracer step of a small ocean/atmosphere model written against the calling
!> sequence of Intel MKL's reverse-communication FGMRES (RCI ISS: dfgmres_init, dfgmres_check, dfgmres,
!> dfgmres_get).
!>
!> The model owns its operator and its preconditioner; the RCI solver only asks for them:
!>  - the grid: nx x ny cells of a 1 km mesh, walls on all sides (zero tracer flux through them);
!>  - the time step: backward Euler for advection by a rotating eddy plus a uniform drift (first-order
!>    upwind, Courant number about 4) and horizontal diffusion, so each step solves
!>    (I + dt (u . grad - kappa lap)) c_new = c_old: a NONSYMMETRIC system, applied matrix-free on the
!>    model's (nx, ny) arrays (request 1);
!>  - the preconditioner: the model's diagonal scaling (request 3);
!>  - the stopping test is the model's own (request 2): once the FGMRES residual estimate dpar(5) is below
!>    relTol ||b||, the iterate is fetched with dfgmres_get into a scratch array (ipar(13) = 1, as MKL's
!>    examples do) and its true residual decides;
!>  - restarts every 20 iterations (ipar(15)); the zero-norm check of the Krylov vector is automatic
!>    (ipar(12) = 1);
!>  - every time step re-initialises the solver, starts from the previous tracer field, and gets the
!>    solution and the iteration count from dfgmres_get.
!>
!> Usage: tracer_mkl [output-file]   (writes the iteration counts and the final tracer, for the test)
module tracer_grid
  implicit none
  integer, parameter :: rk = kind(1.0d0)
  integer, parameter :: nx = 48, ny = 40, nxy = nx * ny, mrestart = 20
  real(rk), parameter :: dx = 1000.0_rk, dt = 1800.0_rk, kappa = 50.0_rk
  real(rk) :: ue(0:nx, ny), vn(nx, 0:ny)            !< face velocities (m/s): east faces, north faces
  real(rk) :: diag(nx, ny)                           !< the diagonal of the operator
contains
  !> A rotating eddy centred in the basin plus a uniform drift; zero normal velocity at the walls.
  subroutine init_flow()
    real(rk), parameter :: pi = 3.14159265358979323846_rk
    real(rk) :: xf, yf
    integer :: i, j
    do j = 1, ny
      do i = 0, nx
        xf = real(i, rk) / nx
        yf = (j - 0.5_rk) / ny
        ue(i, j) = 2.0_rk * sin(pi * xf) * cos(pi * yf) + 0.5_rk
      end do
    end do
    do j = 0, ny
      do i = 1, nx
        xf = (i - 0.5_rk) / nx
        yf = real(j, rk) / ny
        vn(i, j) = -2.0_rk * cos(pi * xf) * sin(pi * yf)
      end do
    end do
    ue(0, :) = 0.0_rk
    ue(nx, :) = 0.0_rk
    vn(:, 0) = 0.0_rk
    vn(:, ny) = 0.0_rk
    do j = 1, ny
      do i = 1, nx
        diag(i, j) = 1.0_rk + dt / dx * (max(ue(i, j), 0.0_rk) - min(ue(i - 1, j), 0.0_rk) + &
                                         max(vn(i, j), 0.0_rk) - min(vn(i, j - 1), 0.0_rk))
        if (i > 1) diag(i, j) = diag(i, j) + dt * kappa / dx**2
        if (i < nx) diag(i, j) = diag(i, j) + dt * kappa / dx**2
        if (j > 1) diag(i, j) = diag(i, j) + dt * kappa / dx**2
        if (j < ny) diag(i, j) = diag(i, j) + dt * kappa / dx**2
      end do
    end do
  end subroutine init_flow

  !> y = (I + dt (div(u c) - kappa lap)) c with upwind fluxes, matrix-free.
  subroutine apply_tracer_operator(c, y)
    real(rk), intent(in) :: c(nx, ny)
    real(rk), intent(out) :: y(nx, ny)
    real(rk) :: d
    integer :: i, j
    d = dt * kappa / dx**2
    do j = 1, ny
      do i = 1, nx
        y(i, j) = diag(i, j) * c(i, j)
        if (i > 1) y(i, j) = y(i, j) - dt / dx * max(ue(i - 1, j), 0.0_rk) * c(i - 1, j) - d * c(i - 1, j)
        if (i < nx) y(i, j) = y(i, j) + dt / dx * min(ue(i, j), 0.0_rk) * c(i + 1, j) - d * c(i + 1, j)
        if (j > 1) y(i, j) = y(i, j) - dt / dx * max(vn(i, j - 1), 0.0_rk) * c(i, j - 1) - d * c(i, j - 1)
        if (j < ny) y(i, j) = y(i, j) + dt / dx * min(vn(i, j), 0.0_rk) * c(i, j + 1) - d * c(i, j + 1)
      end do
    end do
  end subroutine apply_tracer_operator

  !> z = D^-1 r: the diagonal preconditioner.
  subroutine apply_diag_precond(r, z)
    real(rk), intent(in) :: r(nx, ny)
    real(rk), intent(out) :: z(nx, ny)
    z = r / diag
  end subroutine apply_diag_precond

  !> The initial tracer: a blob and a front.
  subroutine initial_tracer(c)
    real(rk), intent(out) :: c(nx, ny)
    integer :: i, j
    do j = 1, ny
      do i = 1, nx
        c(i, j) = exp(-((i - 14.0_rk)**2 + (j - 22.0_rk)**2) / 20.0_rk) + 0.5_rk * tanh((j - 8.0_rk) / 3.0_rk)
      end do
    end do
  end subroutine initial_tracer
end module tracer_grid

program tracer_mkl
  use tracer_grid
  use pkrylov_mod       ! the reverse-communication FGMRES routines
  implicit none
  integer, parameter :: nsteps = 3
  real(rk), parameter :: relTol = 1.0e-10_rk      ! model parameter: relative residual of the tracer solve
  real(rk) :: c(nx, ny), rhs(nx, ny), trial(nx, ny), dpar(128), bnorm
  real(rk), allocatable :: tmp(:)
  integer :: ipar(128), rci_request, itercount, iters(nsteps), step
  character(len=1024) :: outfile

  allocate(tmp((2 * mrestart + 1) * nxy + mrestart * (mrestart + 9) / 2 + 1))
  call init_flow()
  call initial_tracer(c)
  do step = 1, nsteps
    rhs = c
    bnorm = sqrt(sum(rhs**2))
    ! --- RCI FGMRES: c (the previous tracer) is the first guess ---
    call pk_dfgmres_init(nxy, c, rhs, rci_request, ipar, dpar, tmp)
    if (rci_request /= 0) call model_abort('dfgmres_init', rci_request)
    ipar(5) = 1000        ! maximum number of iterations
    ipar(8) = 1           ! stop at ipar(5) iterations
    ipar(9) = 0           ! no automatic residual test ...
    ipar(10) = 1          ! ... the model's own test (RCI_request = 2)
    ipar(11) = 1          ! preconditioned (RCI_request = 3)
    ipar(12) = 1          ! automatic zero-norm check of the generated vector
    ipar(15) = mrestart   ! restart length
    call pk_dfgmres_check(nxy, c, rhs, rci_request, ipar, dpar, tmp)
    if (rci_request /= 0) call model_abort('dfgmres_check', rci_request)
    rci: do
      call pk_dfgmres(nxy, c, rhs, rci_request, ipar, dpar, tmp)
      select case (rci_request)
      case (1)            ! tmp(ipar(23)) = A tmp(ipar(22))
        call apply_tracer_operator(tmp(ipar(22)), tmp(ipar(23)))
      case (2)            ! stopping test: true residual of the iterate <= relTol ||b||
        if (dpar(5) <= relTol * bnorm) then
          ipar(13) = 1
          call pk_dfgmres_get(nxy, c, trial, rci_request, ipar, dpar, tmp, itercount)
          ipar(13) = 0
          if (true_residual(trial, rhs) <= relTol * bnorm) exit rci
        end if
      case (3)            ! tmp(ipar(23)) = M^-1 tmp(ipar(22))
        call apply_diag_precond(tmp(ipar(22)), tmp(ipar(23)))
      case (0)            ! the zero-norm check: the Krylov space is exhausted, the solution is exact
        exit rci
      case default        ! < 0: failure
        call model_abort('dfgmres', rci_request)
      end select
    end do rci
    ipar(13) = 0
    call pk_dfgmres_get(nxy, c, rhs, rci_request, ipar, dpar, tmp, itercount)
    if (rci_request /= 0) call model_abort('dfgmres_get', rci_request)
    iters(step) = itercount
    write(*, '(a,i3,a,i5,a,es10.3,a,es10.3)') ' step', step, ': FGMRES iterations', itercount, &
      ', residual estimate', dpar(5) / bnorm, ', true residual', true_residual(c, rhs) / bnorm
  end do

  if (command_argument_count() >= 1) then
    call get_command_argument(1, outfile)
    call write_result(trim(outfile))
  end if
  deallocate(tmp)

contains
  !> ||b - A x||_2, recomputed.
  function true_residual(x, b) result(res)
    real(rk), intent(in) :: x(nx, ny), b(nx, ny)
    real(rk) :: res
    real(rk), allocatable :: ax(:, :)
    allocate(ax(nx, ny))
    call apply_tracer_operator(x, ax)
    res = sqrt(sum((b - ax)**2))
  end function true_residual

  !> The model's error exit.
  subroutine model_abort(where, code)
    character(len=*), intent(in) :: where
    integer, intent(in) :: code
    write(*, '(3a,i0)') ' tracer solver failure in ', where, ': RCI_request = ', code
    error stop 1
  end subroutine model_abort

  !> Output for the comparison test: steps and unknowns, the iteration counts, the final tracer.
  subroutine write_result(fname)
    character(len=*), intent(in) :: fname
    integer :: u
    open(newunit=u, file=fname, status='replace', action='write')
    write(u, '(2i10)') nsteps, nxy
    write(u, '(10i8)') iters
    write(u, '(es25.17)') c
    close(u)
  end subroutine write_result
end program tracer_mkl

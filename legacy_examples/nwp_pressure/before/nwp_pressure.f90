!> nwp_pressure -- the pressure step of a toy non-hydrostatic NWP dynamical core (own solver version).
!>
!> One gnomonic (equiangular) cubed-sphere panel of the thin shell 1 <= r <= 1 + H, nx x ny columns of
!> nz levels graded towards the ground, as in docs/model-problem.md. Every time step the dynamics hands
!> the pressure step the divergence of a provisional wind (u, v, w), and the model solves the
!> pressure-correction equation
!>     -omega^2 (lap_h p + lambda^2 d2p/dr2) + p = -div(u, v, w)
!> in its finite-volume form A p = b (A symmetric positive definite, one coefficient per face) with its
!> own preconditioned CG: a Thomas solve of every vertical column as the preconditioner, stopping at
!> ||r||_2 <= rtol ||b||_2, the previous pressure as the first guess.
!>
!> Usage: nwp_pressure [output-file [nx ny nz [nsteps [rtol]]]]   (the output file holds the final
!> pressure and the iteration counts, for the comparison test; the defaults are 24 20 12 10 1e-10)
module dyn_grid
  implicit none
  private
  integer, parameter, public :: dp = kind(1.0d0)
  integer, public :: nx = 24, ny = 20, nz = 12                  ! columns x levels (set before grid_init)
  real(dp), parameter, public :: pi = 3.14159265358979323846_dp
  !> shell depth H (Earth radii), vertical scaling lambda, Courant-like number nu (docs/model-problem.md);
  !> H = 0.05 rather than the default 0.01: see the README (attainable accuracy)
  real(dp), parameter, public :: shell_h = 0.05_dp, lambda = 1.0_dp, courant = 10.0_dp
  real(dp), public, allocatable :: area(:, :)       !< |T|: cell area on the unit sphere (nx, ny)
  real(dp), public, allocatable :: elen_x(:, :)     !< length of the west face of (i,j) (great circle)
  real(dp), public, allocatable :: elen_y(:, :)     !< length of the south face of (i,j)
  real(dp), public, allocatable :: rf(:)            !< radius of the level interfaces (0:nz)
  real(dp), public, allocatable :: xic(:), etac(:)  !< equiangular coordinates of the cell centres
  !> the pressure operator, one coefficient per face (aW couples (i-1,j,k) and (i,j,k), aS (i,j-1,k),
  !> aV (i,j,k-1); 0 across the panel edges, the ground and the model top) and the diagonal aC
  real(dp), public, allocatable, dimension(:, :, :) :: aW, aS, aV, aC
  public :: grid_init, grid_free
contains
  !> Great-circle distance of the unit-sphere points with gnomonic coordinates (x1,y1) and (x2,y2).
  pure function gc_dist(x1, y1, x2, y2) result(d)
    real(dp), intent(in) :: x1, y1, x2, y2
    real(dp) :: d, u(3), v(3), w(3)
    u = [1.0_dp, x1, y1] / sqrt(1.0_dp + x1**2 + y1**2)
    v = [1.0_dp, x2, y2] / sqrt(1.0_dp + x2**2 + y2**2)
    w = [u(2)*v(3) - u(3)*v(2), u(3)*v(1) - u(1)*v(3), u(1)*v(2) - u(2)*v(1)]
    d = atan2(norm2(w), dot_product(u, v))
  end function gc_dist

  !> Area of the gnomonic rectangle [0,x] x [0,y] on the unit sphere.
  pure function gnomonic_f(x, y) result(f)
    real(dp), intent(in) :: x, y
    real(dp) :: f
    f = atan(x*y / sqrt(1.0_dp + x**2 + y**2))
  end function gnomonic_f

  !> Geometry of the panel and levels, then the face coefficients of the pressure operator:
  !> a_k = omega^2 h_k (horizontal), b_k = omega^2 lambda^2 r_k^2 / (rho_k - rho_{k-1}) (vertical),
  !> V_k = (r_k^3 - r_{k-1}^3)/3 (mass); face weight alpha = face length / centre distance.
  subroutine grid_init()
    real(dp) :: dxi, deta, x(0:nx), y(0:ny), xc(nx), yc(ny), omega2
    real(dp) :: h(nz), rho(nz), vol(nz), bv(nz + 1), wx(nx + 1, ny), wy(nx, ny + 1)
    integer :: i, j, k
    allocate(area(nx, ny), elen_x(nx + 1, ny), elen_y(nx, ny + 1), rf(0:nz), xic(nx), etac(ny))
    allocate(aW(nx, ny, nz), aS(nx, ny, nz), aV(nx, ny, nz), aC(nx, ny, nz))
    dxi = (pi/2) / nx
    deta = (pi/2) / ny
    x = tan(-pi/4 + [(i*dxi, i = 0, nx)])
    y = tan(-pi/4 + [(j*deta, j = 0, ny)])
    xic = -pi/4 + [((i - 0.5_dp)*dxi, i = 1, nx)]
    etac = -pi/4 + [((j - 0.5_dp)*deta, j = 1, ny)]
    xc = tan(xic)
    yc = tan(etac)
    do j = 1, ny
      do i = 1, nx
        area(i, j) = gnomonic_f(x(i), y(j)) - gnomonic_f(x(i-1), y(j)) - gnomonic_f(x(i), y(j-1)) &
                   + gnomonic_f(x(i-1), y(j-1))
      end do
    end do
    wx = 0.0_dp
    wy = 0.0_dp
    do j = 1, ny
      elen_x(:, j) = [(gc_dist(x(i), y(j-1), x(i), y(j)), i = 0, nx)]
      wx(2:nx, j) = elen_x(2:nx, j) / [(gc_dist(xc(i), yc(j), xc(i+1), yc(j)), i = 1, nx - 1)]
    end do
    do i = 1, nx
      elen_y(i, :) = [(gc_dist(x(i-1), y(j), x(i), y(j)), j = 0, ny)]
      wy(i, 2:ny) = elen_y(i, 2:ny) / [(gc_dist(xc(i), yc(j), xc(i), yc(j+1)), j = 1, ny - 1)]
    end do
    ! levels graded towards the ground: r_k = 1 + H (k/nz)^2
    rf = 1.0_dp + shell_h * ([(k, k = 0, nz)] / real(nz, dp))**2
    h = rf(1:nz) - rf(0:nz-1)
    rho = 0.5_dp * (rf(1:nz) + rf(0:nz-1))
    vol = (rf(1:nz)**3 - rf(0:nz-1)**3) / 3.0_dp
    omega2 = (courant * (pi/2) / nx)**2
    bv = 0.0_dp                                       ! no flux through the ground and the model top
    bv(2:nz) = omega2 * lambda**2 * rf(1:nz-1)**2 / (rho(2:nz) - rho(1:nz-1))
    do k = 1, nz
      do j = 1, ny
        do i = 1, nx
          aW(i, j, k) = -omega2 * h(k) * wx(i, j)
          aS(i, j, k) = -omega2 * h(k) * wy(i, j)
          aV(i, j, k) = -area(i, j) * bv(k)
          aC(i, j, k) = area(i, j) * (vol(k) + bv(k) + bv(k+1)) &
                      + omega2 * h(k) * (wx(i, j) + wx(i+1, j) + wy(i, j) + wy(i, j+1))
        end do
      end do
    end do
  end subroutine grid_init

  !> Free the grid arrays.
  subroutine grid_free()
    deallocate(area, elen_x, elen_y, rf, xic, etac, aW, aS, aV, aC)
  end subroutine grid_free
end module dyn_grid

!> The model's pressure solver: preconditioned CG with a Thomas solve per column.
module dyn_pressure_solver
  use dyn_grid, only: dp, nx, ny, nz, aW, aS, aV, aC
  implicit none
  private
  public :: pressure_solve
contains
  !> q = A p with the face coefficients (missing neighbours have zero coefficients).
  subroutine apply_operator(p, q)
    real(dp), intent(in) :: p(nx, ny, nz)
    real(dp), intent(out) :: q(nx, ny, nz)
    q = aC * p
    q(2:nx, :, :) = q(2:nx, :, :) + aW(2:nx, :, :) * p(1:nx-1, :, :)      ! west neighbour
    q(1:nx-1, :, :) = q(1:nx-1, :, :) + aW(2:nx, :, :) * p(2:nx, :, :)    ! east neighbour
    q(:, 2:ny, :) = q(:, 2:ny, :) + aS(:, 2:ny, :) * p(:, 1:ny-1, :)      ! south
    q(:, 1:ny-1, :) = q(:, 1:ny-1, :) + aS(:, 2:ny, :) * p(:, 2:ny, :)    ! north
    q(:, :, 2:nz) = q(:, :, 2:nz) + aV(:, :, 2:nz) * p(:, :, 1:nz-1)      ! level below
    q(:, :, 1:nz-1) = q(:, :, 1:nz-1) + aV(:, :, 2:nz) * p(:, :, 2:nz)    ! level above
  end subroutine apply_operator

  !> z = M^-1 r: the Thomas algorithm on every column's tridiagonal part (aV(k), aC(k), aV(k+1)),
  !> forward elimination then back substitution, all columns of a row j at once.
  subroutine column_precond(r, z)
    real(dp), intent(in) :: r(nx, ny, nz)
    real(dp), intent(out) :: z(nx, ny, nz)
    real(dp) :: cp(nx, nz), piv(nx)
    integer :: j, k
    do j = 1, ny
      piv = aC(:, j, 1)
      z(:, j, 1) = r(:, j, 1) / piv
      do k = 2, nz
        cp(:, k-1) = aV(:, j, k) / piv                     ! c'_{k-1} = super_{k-1} / pivot_{k-1}
        piv = aC(:, j, k) - aV(:, j, k) * cp(:, k-1)
        z(:, j, k) = (r(:, j, k) - aV(:, j, k) * z(:, j, k-1)) / piv
      end do
      do k = nz - 1, 1, -1
        z(:, j, k) = z(:, j, k) - cp(:, k) * z(:, j, k+1)
      end do
    end do
  end subroutine column_precond

  !> Solve A x = b by PCG from the first guess in x, until ||b - A x||_2 <= rtol ||b||_2 (recurrence
  !> residual) or maxiter iterations; niter and relres report what happened.
  subroutine pressure_solve(b, x, rtol, maxiter, niter, relres)
    real(dp), intent(in) :: b(nx, ny, nz), rtol
    real(dp), intent(inout) :: x(nx, ny, nz)
    integer, intent(in) :: maxiter
    integer, intent(out) :: niter
    real(dp), intent(out) :: relres
    real(dp), allocatable, dimension(:, :, :) :: r, z, p, q
    real(dp) :: bnorm, rnorm, rz, rz_old, alpha
    integer :: it
    allocate(r(nx, ny, nz), z(nx, ny, nz), p(nx, ny, nz), q(nx, ny, nz))
    call apply_operator(x, q)
    r = b - q
    bnorm = norm2(b)
    rnorm = norm2(r)
    niter = 0
    if (rnorm > rtol * bnorm) then
      call column_precond(r, z)
      p = z
      rz = sum(r * z)
      do it = 1, maxiter
        call apply_operator(p, q)
        alpha = rz / sum(p * q)
        x = x + alpha * p
        r = r - alpha * q
        rnorm = norm2(r)
        niter = it
        if (rnorm <= rtol * bnorm) exit
        call column_precond(r, z)
        rz_old = rz
        rz = sum(r * z)
        p = z + (rz / rz_old) * p
      end do
    end if
    relres = rnorm / max(bnorm, tiny(bnorm))
  end subroutine pressure_solve
end module dyn_pressure_solver

program nwp_pressure
  use dyn_grid
  use dyn_pressure_solver, only: pressure_solve
  use legacy_bench
  implicit none
  character(len=*), parameter :: timing_label = 'own-PCG'
  integer, parameter :: maxiter = 500
  integer :: nsteps
  real(dp) :: rtol
  real(dp), allocatable :: p(:, :, :), b(:, :, :), tsolve(:)
  real(dp) :: relres, t, t0
  integer :: step
  integer, allocatable :: niter(:)

  nx = int_arg(2, nx)
  ny = int_arg(3, ny)
  nz = int_arg(4, nz)
  nsteps = int_arg(5, 10)
  rtol = real_arg(6, 1.0e-10_dp)
  allocate(niter(nsteps), tsolve(nsteps))
  call grid_init()
  allocate(p(nx, ny, nz), b(nx, ny, nz))
  p = 0.0_dp                                            ! pressure correction, kept between steps
  do step = 1, nsteps
    t = real(step, dp)
    call pressure_rhs(t, b)
    t0 = wall_time()
    call pressure_solve(b, p, rtol, maxiter, niter(step), relres)
    tsolve(step) = wall_time() - t0
    write(*, '(a,i3,a,i5,a,es10.3)') 'step', step, ': pressure solve', niter(step), &
                                     ' iterations, relative residual', relres
    if (relres > rtol) error stop 'nwp_pressure: the pressure solve did not converge'
  end do
  call write_result(p, niter)
  call report_timing(trim(timing_label), grid_label(), tsolve, niter)
  deallocate(p, b, niter, tsolve)
  call grid_free()

contains
  !> "nx x ny x nz", for the timing line.
  function grid_label() result(str)
    character(len=:), allocatable :: str
    character(len=64) :: buf
    write(buf, '(i0,a,i0,a,i0)') nx, 'x', ny, 'x', nz
    str = trim(buf)
  end function grid_label

  !> b = -div(F): fluxes of a provisional wind through the cell faces (no flux through the panel edges,
  !> the ground and the top); u, v, w are smooth travelling patterns that change every step.
  subroutine pressure_rhs(t, b)
    real(dp), intent(in) :: t
    real(dp), intent(out) :: b(nx, ny, nz)
    real(dp), allocatable :: fx(:, :, :), fy(:, :, :), fz(:, :, :)
    real(dp) :: z, xw, ys
    integer :: i, j, k
    allocate(fx(nx + 1, ny, nz), fy(nx, ny + 1, nz), fz(nx, ny, 0:nz))
    fx = 0.0_dp
    fy = 0.0_dp
    fz = 0.0_dp
    do k = 1, nz
      z = (k - 0.5_dp) / nz
      do j = 1, ny
        do i = 1, nx
          xw = xic(i) - (pi/4) / nx                        ! west face, south face of (i,j)
          ys = etac(j) - (pi/4) / ny
          if (i > 1) fx(i, j, k) = cos(2*etac(j)) * sin(4*xw - 0.3_dp*t) * (1 + z) &
                                 * elen_x(i, j) * (rf(k) - rf(k-1))
          if (j > 1) fy(i, j, k) = sin(4*ys + 0.2_dp*t) * cos(2*xic(i)) * (1 - 0.5_dp*z) &
                                 * elen_y(i, j) * (rf(k) - rf(k-1))
          if (k < nz) fz(i, j, k) = 0.01_dp * sin(pi*k/nz) * cos(4*xic(i) + 4*etac(j) - 0.5_dp*t) &
                                  * area(i, j) * rf(k)**2
        end do
      end do
    end do
    do k = 1, nz
      do j = 1, ny
        do i = 1, nx
          b(i, j, k) = -(fx(i+1, j, k) - fx(i, j, k) + fy(i, j+1, k) - fy(i, j, k) &
                       + fz(i, j, k) - fz(i, j, k-1))
        end do
      end do
    end do
  end subroutine pressure_rhs

  !> Iteration counts and the final pressure, for the comparison with the other version.
  subroutine write_result(p, niter)
    real(dp), intent(in) :: p(:, :, :)
    integer, intent(in) :: niter(:)
    character(len=256) :: path
    integer :: u
    path = 'nwp_pressure.out'
    if (command_argument_count() >= 1) call get_command_argument(1, path)
    open(newunit=u, file=trim(path), status='replace', action='write')
    write(u, '(2i8)') size(niter), size(p)
    write(u, '(*(i6))') niter
    write(u, '(es25.17)') p
    close(u)
  end subroutine write_result
end program nwp_pressure

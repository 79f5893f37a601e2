!> mitgcm_style (MPI) -- the pkrylov version of mitgcm_style on several ranks, one tile per rank.
!>
!> The global basin of the single-tile version (Nx x Ny columns, Nr levels), cut into nPx x nPy tiles
!> of sNx = Nx/nPx by sNy = Ny/nPy columns, one per MPI rank, each with its overlap (halo) of OLx x OLy
!> points, arrays (1-OLx:sNx+OLx, 1-OLy:sNy+OLy, Nr), k = 1 at the surface, as MITgcm lays out a tile
!> (myXGlobalLo, myYGlobalLo: the global index of the tile's first point). The model owns its exchange:
!> EXCH_XYZ_RL fills the overlaps from the neighbouring tiles with MPI (periodic in x, walls in y), and
!> its global sums and maxima are MPI_Allreduce (GLOBAL_MAX_R8). pkrylov works on the tile:
!>  - the context is given the model's communicator (pk_context_set_comm), so the solver's global sums
!>    run over the ranks;
!>  - the operator is the halo-exchange stencil (pk_operator_create_stencil7_halo with exchange=): the
!>    couplings across the tile edges are kept and the neighbour values come from the model's own
!>    exchange (cg3d_exch, a bind(C) routine calling the same EXCH on the width-one halo pkrylov passes);
!>  - the column preconditioner needs no communication (the columns lie inside the tiles).
!> Everything else is the single-tile program with global indices in the geometry and the forcing, and
!> global maxima where the single tile takes maxval. The output (rank 0) is the global phi_nh, so the
!> test compares it with the single-tile run's (legacy-mitgcm_style:mpi_npN, 1e-10).
!>
!> The basin: a continent along the western edge, an island, a shelf and a sloping bottom (dry columns
!> and dry bottom cells, full cells); periodic in x, walls in y. Every time step the divergence of a provisional
!> velocity is handed to CG3D, which solves the 3-D elliptic problem for the non-hydrostatic pressure
!> phi_nh as MITgcm stores and solves it, the iteration done by pkrylov (CG):
!>  - one coefficient per face aW3d, aS3d, aV3d and the diagonal aC3d, normalised by cg3dNorm; the
!>    operator is NEGATIVE definite (couplings >= 0, aC3d < 0, with the free-surface term at k = 1);
!>  - preconditioner: exact solves of every column's tridiagonal part (pkrylov's column preconditioner);
!>  - the RHS is normalised by its maximum, the stopping test is absolute: err_sq = sum r^2 over the
!>    interior < cg3dTolerance^2, checked before the first iteration; reaching cg3dMaxIters is a normal
!>    outcome; phi_nh from the previous step is the first guess.
!>
!> Usage: mpirun -n P mitgcm_style_mpi [output-file [Nx Ny Nr [nTimeSteps]]]   (global sizes, defaults
!> 32 24 15 10; the tiles: nPx x nPy = P with nPx dividing Nx and nPy dividing Ny, as square as possible)
module size_h
  implicit none
  integer, parameter :: rl = kind(1.0d0)                     ! _RL
  integer, parameter :: OLx = 2, OLy = 2
  integer :: sNx = 32, sNy = 24, Nr = 15     ! the tile: compiled in by MITgcm; here set before ini_grid
  integer :: Nx = 32, Ny = 24                ! the global grid
  integer :: nPx = 1, nPy = 1                ! tiles along x and y (one per rank)
  integer :: myPx = 0, myPy = 0              ! this rank's tile (rank = myPx + nPx * myPy)
  integer :: myXGlobalLo = 1, myYGlobalLo = 1
  integer :: myRank = 0, nRanks = 1
end module size_h

!> GRID.h and PARAMS.h: a uniform 250 m grid, levels from 5 m at the surface to 44 m near the bottom.
module grid_h
  use size_h
  implicit none
  real(rl), parameter :: dxC = 250.0_rl, dyC = 250.0_rl, dxG = dxC, dyG = dyC, rA = dxC * dyC
  real(rl), parameter :: drF15(15) = [5.0_rl, 5.0_rl, 6.0_rl, 7.0_rl, 8.0_rl, 10.0_rl, 12.0_rl, 14.0_rl, &
                                    17.0_rl, 20.0_rl, 24.0_rl, 28.0_rl, 33.0_rl, 38.0_rl, 44.0_rl]
  real(rl), parameter :: gravity = 9.81_rl, deltaTMom = 30.0_rl, freeSurfFac = 1.0_rl
  real(rl), allocatable :: drF(:)                               !< level thickness (drF15 for Nr = 15)
  real(rl), allocatable :: drC(:)                               !< centre-to-centre distance to k-1
  real(rl), allocatable, dimension(:, :, :) :: hFacC, hFacW, hFacS, maskC
  real(rl), allocatable :: rC(:)                                !< depth of the cell centres (m, < 0)
end module grid_h

!> CG3D.h: the operator, the pkrylov objects and the solver parameters.
module cg3d_h
  use size_h
  use pkrylov_mod, only: pk_context, pk_operator, pk_precond, pk_solver
  implicit none
  real(rl), allocatable, dimension(:, :, :) :: aW3d, aS3d, aV3d, aC3d   ! (1-OLx:sNx+OLx, 1-OLy:sNy+OLy, Nr)
  type(pk_context) :: pkCtx
  type(pk_operator) :: pkA3d
  type(pk_precond) :: pkM3d
  type(pk_solver) :: pkCG3d
  real(rl) :: cg3dNorm, cg3dTolerance
  real(rl), parameter :: cg3dTargetResidual = 1.0e-10_rl      ! data, &PARM02 (normalised RHS)
  integer, parameter :: cg3dMaxIters = 300
end module cg3d_h

module exch_mod
  use size_h
  use mpi
  implicit none
contains
  !> Fill the overlaps of a 3-D field: periodic in x, walls in y (zero outside the global grid).
  subroutine exch_xyz_rl(fld)
    real(rl), intent(inout) :: fld(1-OLx:sNx+OLx, 1-OLy:sNy+OLy, Nr)
    call exch_3d(fld, OLx, OLy, Nr)
  end subroutine exch_xyz_rl

  !> The exchange for any overlap ox x oy of an nz-level field, over MPI: first x (the interior rows;
  !> the west neighbour of the first tile column is the last one: periodic), then y (whole rows,
  !> overlaps included, so the corners are filled; zero at the southern and northern walls).
  subroutine exch_3d(fld, ox, oy, nz)
    integer, intent(in) :: ox, oy, nz
    real(rl), intent(inout) :: fld(1-ox:sNx+ox, 1-oy:sNy+oy, nz)
    real(rl), allocatable :: sbuf(:, :, :), rbuf(:, :, :)
    integer :: west, east, south, north, ierr, n
    west = modulo(myPx - 1, nPx) + nPx * myPy
    east = modulo(myPx + 1, nPx) + nPx * myPy
    south = MPI_PROC_NULL
    north = MPI_PROC_NULL
    if (myPy > 0) south = myPx + nPx * (myPy - 1)
    if (myPy < nPy - 1) north = myPx + nPx * (myPy + 1)
    ! x: my east columns to the east neighbour's west overlap, my west columns to the west one's east
    allocate(sbuf(ox, sNy, nz), rbuf(ox, sNy, nz))
    n = ox * sNy * nz
    sbuf = fld(sNx-ox+1:sNx, 1:sNy, :)
    call MPI_Sendrecv(sbuf, n, MPI_DOUBLE_PRECISION, east, 1, rbuf, n, MPI_DOUBLE_PRECISION, west, 1, &
                      MPI_COMM_WORLD, MPI_STATUS_IGNORE, ierr)
    fld(1-ox:0, 1:sNy, :) = rbuf
    sbuf = fld(1:ox, 1:sNy, :)
    call MPI_Sendrecv(sbuf, n, MPI_DOUBLE_PRECISION, west, 2, rbuf, n, MPI_DOUBLE_PRECISION, east, 2, &
                      MPI_COMM_WORLD, MPI_STATUS_IGNORE, ierr)
    fld(sNx+1:sNx+ox, 1:sNy, :) = rbuf
    deallocate(sbuf, rbuf)
    ! y: whole rows with their x overlaps; a wall (MPI_PROC_NULL) leaves the zeros
    allocate(sbuf(sNx+2*ox, oy, nz), rbuf(sNx+2*ox, oy, nz))
    n = (sNx + 2 * ox) * oy * nz
    sbuf = fld(:, sNy-oy+1:sNy, :)
    rbuf = 0.0_rl
    call MPI_Sendrecv(sbuf, n, MPI_DOUBLE_PRECISION, north, 3, rbuf, n, MPI_DOUBLE_PRECISION, south, 3, &
                      MPI_COMM_WORLD, MPI_STATUS_IGNORE, ierr)
    fld(:, 1-oy:0, :) = rbuf
    sbuf = fld(:, 1:oy, :)
    rbuf = 0.0_rl
    call MPI_Sendrecv(sbuf, n, MPI_DOUBLE_PRECISION, south, 4, rbuf, n, MPI_DOUBLE_PRECISION, north, 4, &
                      MPI_COMM_WORLD, MPI_STATUS_IGNORE, ierr)
    fld(:, sNy+1:sNy+oy, :) = rbuf
    deallocate(sbuf, rbuf)
  end subroutine exch_3d

  !> GLOBAL_MAX_R8.
  function global_max_r8(v) result(g)
    real(rl), intent(in) :: v
    real(rl) :: g
    integer :: ierr
    call MPI_Allreduce(v, g, 1, MPI_DOUBLE_PRECISION, MPI_MAX, MPI_COMM_WORLD, ierr)
  end function global_max_r8
end module exch_mod

module cg3d_mod
  use size_h
  use grid_h
  use cg3d_h
  use exch_mod
  use pkrylov_mod
  use mpi, only: MPI_COMM_WORLD
  implicit none
contains
  !> The model's exchange for pkrylov's halo-exchange stencil: the library fills the interior of xh and
  !> zeroes its halo of width one; the same EXCH as for the model's fields fills it (neighbours over MPI,
  !> periodic in x, 0 at the walls).
  subroutine cg3d_exch(ctx_ptr, nx, ny, nz, xh) bind(C)
    use, intrinsic :: iso_c_binding, only: c_ptr, c_int32_t, c_double, c_associated
    type(c_ptr), value :: ctx_ptr                  ! (no data needed: the tile layout is in size_h)
    integer(c_int32_t), value :: nx, ny, nz
    real(c_double), intent(inout) :: xh(0:nx + 1, 0:ny + 1, nz)
    if (c_associated(ctx_ptr) .and. (nx /= sNx .or. ny /= sNy)) error stop 'cg3d_exch: not this tile'
    call exch_3d(xh, 1, 1, nz)
  end subroutine cg3d_exch

  !> INI_CG3D: the Laplace operator times deltaTMom (aW3d: Ax/dX, aS3d: Ay/dY, aV3d: Ar/dR), the diagonal
  !> with the free-surface term, the normalisation, then the pkrylov operator, preconditioner and solver.
  subroutine ini_cg3d()
    integer :: i, j, k
    real(rl) :: myNorm
    allocate(aW3d, aS3d, aV3d, aC3d, mold=maskC)
    aW3d = 0.0_rl
    aS3d = 0.0_rl
    aV3d = 0.0_rl
    aC3d = 0.0_rl
    do k = 1, Nr
      do j = 1, sNy
        do i = 1, sNx + 1
          aW3d(i, j, k) = dyG * drF(k) * hFacW(i, j, k) / dxC * deltaTMom
        end do
      end do
      do j = 1, sNy + 1
        do i = 1, sNx
          aS3d(i, j, k) = dxG * drF(k) * hFacS(i, j, k) / dyC * deltaTMom
        end do
      end do
    end do
    do k = 2, Nr
      aV3d(1:sNx, 1:sNy, k) = rA * maskC(1:sNx, 1:sNy, k) * maskC(1:sNx, 1:sNy, k-1) / drC(k) * deltaTMom
    end do
    myNorm = 1.0_rl / global_max_r8(max(maxval(abs(aW3d)), maxval(abs(aS3d)), maxval(abs(aV3d))))
    cg3dNorm = myNorm
    cg3dTolerance = cg3dTargetResidual
    do k = 1, Nr
      aC3d(1:sNx, 1:sNy, k) = -aW3d(1:sNx, 1:sNy, k) - aW3d(2:sNx+1, 1:sNy, k) &
                              - aS3d(1:sNx, 1:sNy, k) - aS3d(1:sNx, 2:sNy+1, k) - aV3d(1:sNx, 1:sNy, k)
    end do
    aC3d(1:sNx, 1:sNy, 1:Nr-1) = aC3d(1:sNx, 1:sNy, 1:Nr-1) - aV3d(1:sNx, 1:sNy, 2:Nr)
    ! free-surface source term (1/(gravity deltaT)) in the surface cell of every wet column
    aC3d(1:sNx, 1:sNy, 1) = aC3d(1:sNx, 1:sNy, 1) &
                            - freeSurfFac / deltaTMom / gravity * rA * maskC(1:sNx, 1:sNy, 1)
    aW3d = aW3d * myNorm
    aS3d = aS3d * myNorm
    aV3d = aV3d * myNorm
    aC3d = aC3d * myNorm
    call exch_xyz_rl(aW3d)
    call exch_xyz_rl(aS3d)
    call exch_xyz_rl(aV3d)
    call exch_xyz_rl(aC3d)

    ! pkrylov: a context on the model's communicator, the operator from the model's arrays and land
    ! mask with the model's exchange across the tile edges, exact column solves as the preconditioner,
    ! CG with the absolute stopping test, the previous phi_nh as the first guess
    call pk_context_create(pkCtx, PKRYLOV_BACKEND_CPU)
    call pk_context_set_comm(pkCtx, MPI_COMM_WORLD)
    call pk_operator_create_stencil7_halo(pkCtx, pkA3d, sNx, sNy, Nr, OLx, OLy, aW3d, aS3d, aV3d, aC3d, &
                                          mask=maskC > 0.0_rl, exchange=cg3d_exch)
    call pk_precond_create(pkCtx, pkM3d, pkA3d, PKRYLOV_PRECOND_COLUMN)
    call pk_solver_create(pkCtx, pkCG3d, PKRYLOV_SOLVER_CG, pkA3d, pkM3d)
    call pk_solver_set_tolerances(pkCG3d, 0.0_rl, cg3dTolerance)
    call pk_solver_set_initial_guess_nonzero(pkCG3d, .true.)
  end subroutine ini_cg3d

  !> CG3D: solve A x = b (b: cg3d_b, in: RHS, out: normalised RHS; x: cg3d_x, in: first guess, out:
  !> solution); numIters, in: the maximum, out: iterations used; residuals in normalised units.
  subroutine cg3d(cg3d_b, cg3d_x, firstResidual, lastResidual, numIters, myIter)
    real(rl), intent(inout) :: cg3d_b(1-OLx:sNx+OLx, 1-OLy:sNy+OLy, Nr)
    real(rl), intent(inout) :: cg3d_x(1-OLx:sNx+OLx, 1-OLy:sNy+OLy, Nr)
    real(rl), intent(out) :: firstResidual, lastResidual
    integer, intent(inout) :: numIters
    integer, intent(in) :: myIter
    real(rl) :: rhsMax, rhsNorm
    type(pkrylov_result) :: res

    ! normalise the RHS (dry cells: b = 0) and the first guess
    cg3d_b = cg3d_b * cg3dNorm * maskC
    rhsMax = global_max_r8(maxval(abs(cg3d_b(1:sNx, 1:sNy, :))))
    rhsNorm = 1.0_rl
    if (rhsMax > 0.0_rl) rhsNorm = 1.0_rl / rhsMax
    cg3d_b = cg3d_b * rhsNorm
    cg3d_x = cg3d_x * rhsNorm

    call pk_solver_set_max_iterations(pkCG3d, numIters)
    call pk_solver_solve_halo(pkCG3d, cg3d_b, cg3d_x, sNx, sNy, Nr, OLx, OLy)
    call pk_solver_get_result(pkCG3d, res)
    if (res%converged == 0 .and. myRank == 0) write(*, '(a,i4,a,i5,a)') ' cg3d: iter', myIter, &
      ': not converged in', numIters, ' iterations'

    ! un-normalise the answer
    cg3d_x(1:sNx, 1:sNy, :) = cg3d_x(1:sNx, 1:sNy, :) / rhsNorm
    firstResidual = res%initial_residual
    lastResidual = res%final_residual
    numIters = res%iterations
  end subroutine cg3d
end module cg3d_mod

program mitgcm_style_mpi
  use size_h
  use grid_h
  use cg3d_h
  use exch_mod
  use cg3d_mod
  use legacy_bench
  use mpi
  implicit none
  character(len=16) :: timing_label
  integer :: backend
  real(rl), parameter :: pi = 3.14159265358979323846_rl
  real(rl), allocatable, dimension(:, :, :) :: phi_nh, cg3d_b
  real(rl), allocatable :: tsolve(:)
  real(rl) :: firstResidual, lastResidual, t0
  integer :: myIter, numIters, nTimeSteps, ierr
  integer, allocatable :: iters(:)

  call MPI_Init(ierr)
  call MPI_Comm_rank(MPI_COMM_WORLD, myRank, ierr)
  call MPI_Comm_size(MPI_COMM_WORLD, nRanks, ierr)
  Nx = int_arg(2, Nx)
  Ny = int_arg(3, Ny)
  Nr = int_arg(4, Nr)
  nTimeSteps = int_arg(5, 10)
  call ini_tiles()
  allocate(iters(nTimeSteps), tsolve(nTimeSteps))
  call ini_grid()
  allocate(phi_nh, cg3d_b, mold=maskC)
  call ini_cg3d()
  phi_nh = 0.0_rl
  do myIter = 1, nTimeSteps
    call nh_rhs(myIter * deltaTMom, cg3d_b)
    numIters = cg3dMaxIters
    t0 = wall_time()
    call cg3d(cg3d_b, phi_nh, firstResidual, lastResidual, numIters, myIter)
    tsolve(myIter) = wall_time() - t0
    call exch_xyz_rl(phi_nh)
    iters(myIter) = numIters
    if (myRank == 0) write(*, '(a,i4,a,i5,a,2es12.4)') ' cg3d: iter', myIter, ': numIters', numIters, &
                                                        ', first and last residual', firstResidual, lastResidual
  end do
  call write_result(phi_nh(1:sNx, 1:sNy, :), iters)
  call pk_context_get_backend(pkCtx, backend)
  timing_label = 'pkrylov-mpi '
  if (myRank == 0) call report_timing(trim(timing_label), grid_label(), tsolve, iters)
  deallocate(phi_nh, cg3d_b, iters, tsolve)
  deallocate(aW3d, aS3d, aV3d, aC3d, drF, drC, rC, hFacC, hFacW, hFacS, maskC)
  call pk_solver_destroy(pkCG3d)
  call pk_precond_destroy(pkM3d)
  call pk_operator_destroy(pkA3d)
  call pk_context_destroy(pkCtx)    ! before MPI_Finalize (it frees its duplicate communicator)
  call MPI_Finalize(ierr)

contains
  !> The tiles: nPx x nPy = nRanks with nPx dividing Nx and nPy dividing Ny, the most square one.
  subroutine ini_tiles()
    integer :: p, best
    best = -1
    do p = 1, nRanks
      if (mod(nRanks, p) /= 0 .or. mod(Nx, p) /= 0 .or. mod(Ny, nRanks / p) /= 0) cycle
      if (best < 0 .or. abs(p - nRanks / p) < abs(best - nRanks / best)) best = p
    end do
    if (best < 0) then
      if (myRank == 0) write(*, '(a,i0,a,i0,a,i0,a)') 'mitgcm_style_mpi: ', nRanks, ' ranks cannot tile ', Nx, &
                                                      ' x ', Ny, ' columns evenly'
      call MPI_Abort(MPI_COMM_WORLD, 2, ierr)
    end if
    nPx = best
    nPy = nRanks / best
    sNx = Nx / nPx
    sNy = Ny / nPy
    myPx = mod(myRank, nPx)
    myPy = myRank / nPx
    myXGlobalLo = 1 + myPx * sNx
    myYGlobalLo = 1 + myPy * sNy
    if (myRank == 0) write(*, '(a,i0,a,i0,a,i0,a,i0,a)') ' tiles: ', nPx, ' x ', nPy, ' of ', sNx, ' x ', &
                                                        sNy, ' columns'
  end subroutine ini_tiles

  !> "sNx x sNy x Nr", for the timing line.
  function grid_label() result(str)
    character(len=:), allocatable :: str
    character(len=64) :: buf
    write(buf, '(i0,a,i0,a,i0,a,i0,a)') Nx, 'x', Ny, 'x', Nr, ' (', nRanks, ' ranks)' 
    str = trim(buf)
  end function grid_label

  !> The basin: a continent at i = 1 (it also closes the periodic boundary), an island, a shelf rising
  !> towards the continent and a ridge; full cells (hFacC 0 or 1), faces open where both cells are wet.
  subroutine ini_grid()
    real(rl) :: depth, rF
    integer :: i, j, k, iG, jG
    allocate(drF(Nr), drC(Nr), rC(Nr))
    allocate(hFacC(1-OLx:sNx+OLx, 1-OLy:sNy+OLy, Nr))
    allocate(hFacW, hFacS, maskC, mold=hFacC)
    if (Nr == size(drF15)) then
      drF = drF15
    else if (Nr == 1) then
      drF = sum(drF15)
    else              ! the same 271 m, thickness growing geometrically by the same factor 44/5
      drF = [((44.0_rl / 5.0_rl)**((k - 1.0_rl) / (Nr - 1)), k = 1, Nr)]
      drF = drF * (sum(drF15) / sum(drF))
    end if
    rF = 0.0_rl
    do k = 1, Nr
      rC(k) = rF - 0.5_rl * drF(k)
      rF = rF - drF(k)
    end do
    drC(1) = 0.5_rl * drF(1)
    drC(2:Nr) = 0.5_rl * (drF(1:Nr-1) + drF(2:Nr))
    hFacC = 0.0_rl
    do j = 1, sNy
      do i = 1, sNx
        iG = myXGlobalLo - 1 + i               ! global indices: the basin of the single-tile run
        jG = myYGlobalLo - 1 + j
        if (iG < 2) cycle                      ! the continent
        depth = 60.0_rl + 210.0_rl * min(1.0_rl, (iG - 2) / 10.0_rl) &
              - 120.0_rl * exp(-((jG - 8.0_rl) / 3.0_rl)**2) * merge(1.0_rl, 0.0_rl, iG > 16)
        if ((iG - 22)**2 + (jG - 16)**2 <= 5) depth = 0.0_rl            ! island
        do k = 1, Nr
          if (rC(k) > -depth) hFacC(i, j, k) = 1.0_rl
        end do
      end do
    end do
    call exch_xyz_rl(hFacC)
    maskC = hFacC
    hFacW = 0.0_rl
    hFacS = 0.0_rl
    hFacW(2-OLx:sNx+OLx, :, :) = min(hFacC(1-OLx:sNx+OLx-1, :, :), hFacC(2-OLx:sNx+OLx, :, :))
    hFacS(:, 2-OLy:sNy+OLy, :) = min(hFacC(:, 1-OLy:sNy+OLy-1, :), hFacC(:, 2-OLy:sNy+OLy, :))
  end subroutine ini_grid

  !> cg3d_b = divergence of the transports of a provisional velocity: a tidal-like flow along x, a
  !> seiche in y and a convective plume drifting east (w), all zero through closed faces.
  subroutine nh_rhs(time, b)
    real(rl), intent(in) :: time
    real(rl), intent(out) :: b(1-OLx:sNx+OLx, 1-OLy:sNy+OLy, Nr)
    real(rl), allocatable, dimension(:, :, :) :: uTrans, vTrans, rTrans
    real(rl) :: x, y, xp, depthW, depthS
    integer :: i, j, k
    allocate(uTrans(sNx+1, sNy+1, Nr), vTrans(sNx+1, sNy+1, Nr), rTrans(sNx+1, sNy+1, Nr+1))
    uTrans = 0.0_rl
    vTrans = 0.0_rl
    rTrans = 0.0_rl
    xp = 8.0_rl * dxC + 0.05_rl * time
    do k = 1, Nr
      do j = 1, sNy + 1
        do i = 1, sNx + 1
          x = (myXGlobalLo - 1 + i - 1) * dxC
          y = (myYGlobalLo - 1 + j - 1) * dyC
          uTrans(i, j, k) = 0.1_rl * sin(2.0_rl * pi * (x / 4000.0_rl - time / 600.0_rl)) &
                          * (1.0_rl + rC(k) / 300.0_rl) * dyG * drF(k) * hFacW(i, j, k)
          vTrans(i, j, k) = 0.05_rl * cos(pi * y / 6000.0_rl) * cos(time / 300.0_rl) &
                          * exp(rC(k) / 100.0_rl) * dxG * drF(k) * hFacS(i, j, k)
          rTrans(i, j, k) = 0.02_rl * exp(-((x - xp)**2 + (y - 3000.0_rl)**2) / 1.0e6_rl) &
                          * sin(pi * rC(k) / (-270.0_rl)) * rA * maskC(i, j, k) * maskC(i, j, max(k-1, 1))
        end do
      end do
    end do
    rTrans(:, :, 1) = 0.0_rl                          ! no flux through the surface (rigid lid for w*)
    ! the 2-D free-surface solve has already made the depth-integrated flow non-divergent: only the
    ! baroclinic part (zero vertical sum of the transports through each face) is left for CG3D
    do j = 1, sNy + 1
      do i = 1, sNx + 1
        depthW = sum(drF * hFacW(i, j, :))
        depthS = sum(drF * hFacS(i, j, :))
        if (depthW > 0.0_rl) uTrans(i, j, :) = uTrans(i, j, :) &
                                               - sum(uTrans(i, j, :)) * drF * hFacW(i, j, :) / depthW
        if (depthS > 0.0_rl) vTrans(i, j, :) = vTrans(i, j, :) &
                                               - sum(vTrans(i, j, :)) * drF * hFacS(i, j, :) / depthS
      end do
    end do
    b = 0.0_rl
    do k = 1, Nr
      b(1:sNx, 1:sNy, k) = uTrans(2:sNx+1, 1:sNy, k) - uTrans(1:sNx, 1:sNy, k) &
                         + vTrans(1:sNx, 2:sNy+1, k) - vTrans(1:sNx, 1:sNy, k) &
                         + rTrans(1:sNx, 1:sNy, k) - rTrans(1:sNx, 1:sNy, k+1)
    end do
  end subroutine nh_rhs

  !> Iteration counts and the final phi_nh (interior) gathered in the global order on rank 0, which
  !> writes them as the single-tile version does, for the comparison with it.
  subroutine write_result(phi, iters)
    real(rl), intent(in) :: phi(:, :, :)
    integer, intent(in) :: iters(:)
    character(len=256) :: path
    real(rl), allocatable :: tiles(:, :, :, :), glob(:, :, :)
    integer :: u, r, px, py
    allocate(tiles(sNx, sNy, Nr, 0:nRanks-1), glob(Nx, Ny, Nr))
    call MPI_Gather(phi, size(phi), MPI_DOUBLE_PRECISION, tiles, size(phi), MPI_DOUBLE_PRECISION, 0, &
                    MPI_COMM_WORLD, ierr)
    if (myRank == 0) then
      do r = 0, nRanks - 1
        px = mod(r, nPx)
        py = r / nPx
        glob(px*sNx+1:(px+1)*sNx, py*sNy+1:(py+1)*sNy, :) = tiles(:, :, :, r)
      end do
      path = 'mitgcm_style.out'
      if (command_argument_count() >= 1) call get_command_argument(1, path)
      open(newunit=u, file=trim(path), status='replace', action='write')
      write(u, '(2i8)') size(iters), size(glob)
      write(u, '(*(i6))') iters
      write(u, '(es25.17)') glob
      close(u)
    end if
    deallocate(tiles, glob)
  end subroutine write_result
end program mitgcm_style_mpi

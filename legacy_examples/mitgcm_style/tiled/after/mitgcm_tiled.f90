!> mitgcm_tiled -- an MITgcm-like ocean model at production shape, its solves done by pkrylov (the version
!> after the switch).
!>
!> The layout of MITgcm: every process owns nSx x nSy = 2 x 2 tiles of sNx x sNy columns and Nr levels, with
!> overlaps of OLx = OLy = 2 points, arrays (1-OLx:sNx+OLx, 1-OLy:sNy+OLy, [Nr,] nSx, nSy); nPx x nPy
!> processes (1, 2 or 4 MPI ranks: 1 x 1, 2 x 1, 2 x 2); the global domain of NX x NY = 64 x 48 columns is
!> doubly periodic (MITgcm's default), with an island and a ridge. The model owns its halo exchange
!> (EXCH_XY_RL, EXCH_XYZ_RL: copies between the tiles of a process, MPI between processes) and its global
!> sums (GLOBAL_SUM_TILE_RL: the tiles' partial sums in a fixed order, then MPI). Every time step:
!>  - CG2D, the implicit free surface (every hydrostatic run): the 5-point operator aW2d, aS2d, aC2d with
!>    the free-surface term, the approximate-inverse preconditioner pC, pW, pS with cg2dpcOffDFac = 0.51
!>    (INI_CG2D), MITgcm's CG2D loop;
!>  - CG3D, the non-hydrostatic pressure: the 7-point operator aW3d, aS3d, aV3d, aC3d and the LU factors of
!>    every column's tridiagonal (INI_CG3D), MITgcm's CG3D loop.
!> Both normalise the RHS by its global maximum and stop when the unpreconditioned sum r^2 over the
!> interior is below tolerance^2, tested before the first iteration.
!>
!> Usage: mitgcm_tiled [output-file]: the iteration counts (2-D and 3-D of every step) and the final
!> eta and phi_nh in the global order go to the output file (rank 0), for the comparison test.
module size_h
  implicit none
  integer, parameter :: rl = kind(1.0d0)                     ! _RL and _RS
  integer, parameter :: OLx = 2, OLy = 2, nSx = 2, nSy = 2, Nr = 8, NX = 64, NY = 48
  integer :: sNx, sNy, nPx, nPy, myPx, myPy, myRank, nRanks
end module size_h

!> eesupp: the model's processes, halo exchanges and global sums.
module eesupp
  use mpi
  use size_h
  implicit none
contains
  subroutine ini_procs()
    integer :: ierr
    call MPI_Comm_rank(MPI_COMM_WORLD, myRank, ierr)
    call MPI_Comm_size(MPI_COMM_WORLD, nRanks, ierr)
    nPx = merge(2, nRanks, nRanks == 4)
    nPy = nRanks / nPx
    if (nPx * nPy /= nRanks .or. mod(NX, nSx * nPx) /= 0 .or. mod(NY, nSy * nPy) /= 0) &
      error stop 'mitgcm_tiled: run on 1, 2 or 4 ranks'
    sNx = NX / (nSx * nPx)
    sNy = NY / (nSy * nPy)
    myPx = mod(myRank, nPx)
    myPy = myRank / nPx
  end subroutine ini_procs

  !> The rank owning global tile (tx, ty) (0-based, periodic) and its bi, bj there.
  subroutine tile_owner(tx, ty, rank, bi, bj)
    integer, intent(in) :: tx, ty
    integer, intent(out) :: rank, bi, bj
    integer :: gx, gy
    gx = modulo(tx, nSx * nPx)
    gy = modulo(ty, nSy * nPy)
    rank = gx / nSx + nPx * (gy / nSy)
    bi = mod(gx, nSx) + 1
    bj = mod(gy, nSy) + 1
  end subroutine tile_owner

  !> EXCH_3D: fill the overlaps of fld (nk levels) from the neighbouring tiles, doubly periodic: first in x
  !> (rows 1..sNy), then in y (the whole width, so the corners come along). Copies within the process,
  !> MPI_Isend/Irecv with the others (tag: the receiving tile and side).
  subroutine exch_3d(fld, nk)
    integer, intent(in) :: nk
    real(rl), intent(inout) :: fld(1-OLx:sNx+OLx, 1-OLy:sNy+OLy, nk, nSx, nSy)
    call exch_dir(fld, nk, 1)
    call exch_dir(fld, nk, 2)
  end subroutine exch_3d

  subroutine exch_dir(fld, nk, dir)
    integer, intent(in) :: nk, dir
    real(rl), intent(inout) :: fld(1-OLx:sNx+OLx, 1-OLy:sNy+OLy, nk, nSx, nSy)
    real(rl), allocatable :: sbuf(:, :, :, :, :), rbuf(:, :, :, :, :)
    integer :: req(4 * nSx * nSy), nreq, bi, bj, side, rank, nbi, nbj, tx, ty, ierr, cnt
    integer :: i0, i1, j0, j1, si0, sj0, ri0, rj0, w, h
    ! strips: in x OLx columns of the rows 1..sNy; in y OLy rows of the whole width
    if (dir == 1) then
      w = OLx
      h = sNy
    else
      w = sNx + 2 * OLx
      h = OLy
    end if
    allocate(sbuf(w, h, nk, 2, nSx * nSy), rbuf(w, h, nk, 2, nSx * nSy))
    cnt = w * h * nk
    nreq = 0
    do bj = 1, nSy
      do bi = 1, nSx
        tx = myPx * nSx + bi - 1
        ty = myPy * nSy + bj - 1
        do side = 1, 2 ! 1: the halo towards -x (-y), filled by the neighbour there; 2: towards +x (+y)
          if (dir == 1) then
            call tile_owner(tx + 2 * side - 3, ty, rank, nbi, nbj)
          else
            call tile_owner(tx, ty + 2 * side - 3, rank, nbi, nbj)
          end if
          if (rank /= myRank) then
            nreq = nreq + 1
            call MPI_Irecv(rbuf(:, :, :, side, bi + nSx * (bj - 1)), cnt, MPI_DOUBLE_PRECISION, rank, &
                           4 * (tx + NX * ty) + side, MPI_COMM_WORLD, req(nreq), ierr)
          end if
        end do
      end do
    end do
    do bj = 1, nSy
      do bi = 1, nSx
        tx = myPx * nSx + bi - 1
        ty = myPy * nSy + bj - 1
        do side = 1, 2 ! my strip next to side `side` goes to the neighbour there, into its opposite halo
          call strip_bounds(dir, side, .false., i0, i1, j0, j1)
          if (dir == 1) then
            call tile_owner(tx + 2 * side - 3, ty, rank, nbi, nbj)
          else
            call tile_owner(tx, ty + 2 * side - 3, rank, nbi, nbj)
          end if
          if (rank == myRank) then
            call strip_bounds(dir, 3 - side, .true., ri0, si0, rj0, sj0)
            fld(ri0:si0, rj0:sj0, :, nbi, nbj) = fld(i0:i1, j0:j1, :, bi, bj)
          else
            sbuf(:, :, :, side, bi + nSx * (bj - 1)) = fld(i0:i1, j0:j1, :, bi, bj)
            nreq = nreq + 1
            call MPI_Isend(sbuf(:, :, :, side, bi + nSx * (bj - 1)), cnt, MPI_DOUBLE_PRECISION, rank, &
                           4 * (merge(modulo(tx + 2 * side - 3, nSx * nPx), tx, dir == 1) + NX * &
                                merge(modulo(ty + 2 * side - 3, nSy * nPy), ty, dir == 2)) + 3 - side, &
                           MPI_COMM_WORLD, req(nreq), ierr)
          end if
        end do
      end do
    end do
    call MPI_Waitall(nreq, req, MPI_STATUSES_IGNORE, ierr)
    do bj = 1, nSy
      do bi = 1, nSx
        tx = myPx * nSx + bi - 1
        ty = myPy * nSy + bj - 1
        do side = 1, 2
          if (dir == 1) then
            call tile_owner(tx + 2 * side - 3, ty, rank, nbi, nbj)
          else
            call tile_owner(tx, ty + 2 * side - 3, rank, nbi, nbj)
          end if
          if (rank /= myRank) then
            call strip_bounds(dir, side, .true., i0, i1, j0, j1)
            fld(i0:i1, j0:j1, :, bi, bj) = rbuf(:, :, :, side, bi + nSx * (bj - 1))
          end if
        end do
      end do
    end do
  end subroutine exch_dir

  !> Index bounds of the strip next to side `side` (1: -x / -y, 2: +x / +y) of a tile: the interior strip
  !> that is sent (halo = .false.) or the halo strip that is received (halo = .true.).
  subroutine strip_bounds(dir, side, halo, i0, i1, j0, j1)
    integer, intent(in) :: dir, side
    logical, intent(in) :: halo
    integer, intent(out) :: i0, i1, j0, j1
    if (dir == 1) then
      j0 = 1
      j1 = sNy
      if (side == 1) then
        i0 = merge(1 - OLx, 1, halo)
      else
        i0 = merge(sNx + 1, sNx - OLx + 1, halo)
      end if
      i1 = i0 + OLx - 1
    else
      i0 = 1 - OLx
      i1 = sNx + OLx
      if (side == 1) then
        j0 = merge(1 - OLy, 1, halo)
      else
        j0 = merge(sNy + 1, sNy - OLy + 1, halo)
      end if
      j1 = j0 + OLy - 1
    end if
  end subroutine strip_bounds

  subroutine exch_xy_rl(fld)
    real(rl), intent(inout) :: fld(1-OLx:sNx+OLx, 1-OLy:sNy+OLy, nSx, nSy)
    call exch_3d(fld, 1)
  end subroutine exch_xy_rl

  subroutine exch_xyz_rl(fld)
    real(rl), intent(inout) :: fld(1-OLx:sNx+OLx, 1-OLy:sNy+OLy, Nr, nSx, nSy)
    call exch_3d(fld, Nr)
  end subroutine exch_xyz_rl

  !> GLOBAL_SUM_TILE_RL: the tiles' partial sums in the order (bi, bj), then over the processes.
  function global_sum_tile(tiles) result(s)
    real(rl), intent(in) :: tiles(nSx, nSy)
    real(rl) :: s, loc
    integer :: bi, bj, ierr
    loc = 0.0_rl
    do bj = 1, nSy
      do bi = 1, nSx
        loc = loc + tiles(bi, bj)
      end do
    end do
    call MPI_Allreduce(loc, s, 1, MPI_DOUBLE_PRECISION, MPI_SUM, MPI_COMM_WORLD, ierr)
  end function global_sum_tile

  function global_max(v) result(m)
    real(rl), intent(in) :: v
    real(rl) :: m
    integer :: ierr
    call MPI_Allreduce(v, m, 1, MPI_DOUBLE_PRECISION, MPI_MAX, MPI_COMM_WORLD, ierr)
  end function global_max
end module eesupp

!> GRID.h, PARAMS.h: a uniform 2 km grid, 8 levels to 400 m; an island, a ridge, water across the periodic
!> boundaries.
module grid_h
  use size_h
  implicit none
  real(rl), parameter :: dxC = 2000.0_rl, dyC = 2000.0_rl, dxG = dxC, dyG = dyC, rA = dxC * dyC
  real(rl), parameter :: gravity = 9.81_rl, deltaTMom = 60.0_rl, deltaTfreesurf = 60.0_rl
  real(rl), parameter :: drF(Nr) = [20.0_rl, 25.0_rl, 35.0_rl, 45.0_rl, 55.0_rl, 65.0_rl, 75.0_rl, 80.0_rl]
  real(rl) :: drC(Nr), rC(Nr)
  real(rl), allocatable :: hFacC(:, :, :, :, :), hFacW(:, :, :, :, :), hFacS(:, :, :, :, :), maskC(:, :, :, :, :)
  real(rl), allocatable :: maskInC(:, :, :, :), Depth(:, :, :, :)
end module grid_h

!> CG2D.h: the 2-D operator, its preconditioner and the solver's parameters.
module cg2d_h
  use size_h
  use pkrylov_mod, only: pk_context, pk_grid, pk_operator, pk_precond, pk_solver
  implicit none
  real(rl), allocatable, dimension(:, :, :, :) :: aW2d, aS2d, aC2d, pW, pS, pC
  type(pk_context) :: pkCtx
  type(pk_grid) :: pkGrid
  type(pk_operator) :: pkA2d
  type(pk_precond) :: pkM2d
  type(pk_solver) :: pkCG2d
  real(rl) :: cg2dNorm
  real(rl), parameter :: cg2dTargetResidual = 1.0e-11_rl, cg2dpcOffDFac = 0.51_rl
  integer, parameter :: cg2dMaxIters = 300
end module cg2d_h

!> CG3D.h: the 3-D operator, the column factors and the solver's parameters.
module cg3d_h
  use size_h
  use pkrylov_mod, only: pk_operator, pk_precond, pk_solver
  implicit none
  real(rl), allocatable, dimension(:, :, :, :, :) :: aW3d, aS3d, aV3d, aC3d
  type(pk_operator) :: pkA3d
  type(pk_precond) :: pkM3d
  type(pk_solver) :: pkCG3d
  real(rl) :: cg3dNorm
  real(rl), parameter :: cg3dTargetResidual = 1.0e-10_rl
  integer, parameter :: cg3dMaxIters = 300
end module cg3d_h

module solvers
  use size_h
  use eesupp
  use grid_h
  use cg2d_h
  use cg3d_h
  use pkrylov_mod
  implicit none
contains
  !> INI_CG2D: aW2d = g dt^2 (depth of the face) dyG/dxC, aS2d likewise, aC2d = -(the four) - the free
  !> surface, normalised; the approximate inverse pC, pW, pS (MITgcm's formula).
  subroutine ini_cg2d()
    integer :: i, j, bi, bj
    real(rl) :: myNorm, aC, aCw, aCs, fs
    allocate(aW2d, aS2d, aC2d, pW, pS, pC, mold=maskInC)
    aW2d = 0.0_rl
    aS2d = 0.0_rl
    aC2d = 0.0_rl
    fs = 1.0_rl / (gravity * deltaTMom * deltaTfreesurf)
    do bj = 1, nSy
      do bi = 1, nSx
        do j = 1, sNy + 1
          do i = 1, sNx + 1
            aW2d(i, j, bi, bj) = dyG * sum(drF * hFacW(i, j, :, bi, bj)) / dxC
            aS2d(i, j, bi, bj) = dxG * sum(drF * hFacS(i, j, :, bi, bj)) / dyC
          end do
        end do
      end do
    end do
    myNorm = 1.0_rl / global_max(max(maxval(abs(aW2d)), maxval(abs(aS2d))))
    cg2dNorm = myNorm
    do bj = 1, nSy
      do bi = 1, nSx
        do j = 1, sNy
          do i = 1, sNx
            aC2d(i, j, bi, bj) = -(aW2d(i, j, bi, bj) + aW2d(i + 1, j, bi, bj) + aS2d(i, j, bi, bj) + &
                                   aS2d(i, j + 1, bi, bj) + fs * rA * maskInC(i, j, bi, bj))
          end do
        end do
      end do
    end do
    aW2d = aW2d * myNorm
    aS2d = aS2d * myNorm
    aC2d = aC2d * myNorm
    call exch_xy_rl(aW2d)
    call exch_xy_rl(aS2d)
    call exch_xy_rl(aC2d)
    ! the preconditioner (ini_cg2d.F)
    pW = 0.0_rl
    pS = 0.0_rl
    pC = 0.0_rl
    do bj = 1, nSy
      do bi = 1, nSx
        do j = 1, sNy
          do i = 1, sNx
            aC = aC2d(i, j, bi, bj)
            pC(i, j, bi, bj) = merge(1.0_rl, 1.0_rl / merge(1.0_rl, aC, aC == 0.0_rl), aC == 0.0_rl)
            aCw = aC2d(i - 1, j, bi, bj)
            if (aCw == 0.0_rl) then
              pW(i, j, bi, bj) = 0.0_rl
            else
              pW(i, j, bi, bj) = -aW2d(i, j, bi, bj) / ((cg2dpcOffDFac * (aCw + aC))**2)
            end if
            aCs = aC2d(i, j - 1, bi, bj)
            if (aCs == 0.0_rl) then
              pS(i, j, bi, bj) = 0.0_rl
            else
              pS(i, j, bi, bj) = -aS2d(i, j, bi, bj) / ((cg2dpcOffDFac * (aCs + aC))**2)
            end if
          end do
        end do
      end do
    end do
    call exch_xy_rl(pC)
    call exch_xy_rl(pW)
    call exch_xy_rl(pS)
    ! pkrylov: the model's tiles on its communicator, the operator and preconditioner from its arrays, CG
    ! with CG2D's stopping test
    call pk_context_create(pkCtx, PKRYLOV_BACKEND_AUTO)
    call pk_context_set_comm(pkCtx, MPI_COMM_WORLD)
    call pk_grid_create_rect(pkCtx, pkGrid, sNx, sNy, OLx, OLy, NX / sNx, NY / sNy, PKRYLOV_PERIODIC_XY, &
                             myPx * nSx + 1, myPy * nSy + 1, nSx, nSy)
    call pk_operator_create_grid_5pt(pkGrid, pkA2d, aW2d, aS2d, aC2d, mask=maskInC > 0.0_rl)
    call pk_precond_create_ainv_coefficients(pkCtx, pkM2d, pkA2d, pW, pS, pC)
    call pk_solver_create(pkCtx, pkCG2d, PKRYLOV_SOLVER_CG, pkA2d, pkM2d)
    call pk_solver_set_stop_rule(pkCG2d, PKRYLOV_STOP_RECURRENCE)
    call pk_solver_set_tolerances(pkCG2d, 0.0_rl, cg2dTargetResidual)
    call pk_solver_set_initial_guess_nonzero(pkCG2d, .true.)
  end subroutine ini_cg2d

  !> CG2D (cg2d.F): cg2d_b in: RHS, out: normalised RHS; cg2d_x in: first guess, out: solution;
  !> numIters in: the maximum, out: iterations used.
  subroutine cg2d(cg2d_b, cg2d_x, firstResidual, lastResidual, numIters)
    real(rl), intent(inout) :: cg2d_b(1-OLx:sNx+OLx, 1-OLy:sNy+OLy, nSx, nSy)
    real(rl), intent(inout) :: cg2d_x(1-OLx:sNx+OLx, 1-OLy:sNy+OLy, nSx, nSy)
    real(rl), intent(out) :: firstResidual, lastResidual
    integer, intent(inout) :: numIters
    real(rl) :: rhsMax, rhsNorm
    type(pkrylov_result) :: res

    cg2d_b = cg2d_b * cg2dNorm
    rhsMax = global_max(maxval(abs(cg2d_b(1:sNx, 1:sNy, :, :))))
    rhsNorm = 1.0_rl
    if (rhsMax /= 0.0_rl) rhsNorm = 1.0_rl / rhsMax
    cg2d_b = cg2d_b * rhsNorm
    cg2d_x = cg2d_x * rhsNorm
    call pk_solver_set_max_iterations(pkCG2d, numIters)
    call pk_solver_solve_grid(pkCG2d, cg2d_b, cg2d_x)
    call pk_solver_get_result(pkCG2d, res)
    cg2d_x(1:sNx, 1:sNy, :, :) = cg2d_x(1:sNx, 1:sNy, :, :) / rhsNorm
    firstResidual = res%initial_residual
    lastResidual = res%final_residual
    numIters = res%iterations
  end subroutine cg2d

  !> INI_CG3D: the 3-D operator times deltaTMom, normalised, and the LU factors of every column.
  subroutine ini_cg3d()
    integer :: i, j, k, bi, bj
    real(rl) :: myNorm
    allocate(aW3d, aS3d, aV3d, aC3d, mold=maskC)
    aW3d = 0.0_rl
    aS3d = 0.0_rl
    aV3d = 0.0_rl
    aC3d = 0.0_rl
    do bj = 1, nSy
      do bi = 1, nSx
        do k = 1, Nr
          do j = 1, sNy + 1
            do i = 1, sNx + 1
              aW3d(i, j, k, bi, bj) = dyG * drF(k) * hFacW(i, j, k, bi, bj) / dxC * deltaTMom
              aS3d(i, j, k, bi, bj) = dxG * drF(k) * hFacS(i, j, k, bi, bj) / dyC * deltaTMom
            end do
          end do
        end do
        do k = 2, Nr
          aV3d(1:sNx, 1:sNy, k, bi, bj) = rA * maskC(1:sNx, 1:sNy, k, bi, bj) * maskC(1:sNx, 1:sNy, k - 1, bi, bj) &
                                          / drC(k) * deltaTMom
        end do
      end do
    end do
    myNorm = 1.0_rl / global_max(max(maxval(abs(aW3d)), maxval(abs(aS3d)), maxval(abs(aV3d))))
    cg3dNorm = myNorm
    do bj = 1, nSy
      do bi = 1, nSx
        do k = 1, Nr
          aC3d(1:sNx, 1:sNy, k, bi, bj) = -aW3d(1:sNx, 1:sNy, k, bi, bj) - aW3d(2:sNx + 1, 1:sNy, k, bi, bj) &
                                          - aS3d(1:sNx, 1:sNy, k, bi, bj) - aS3d(1:sNx, 2:sNy + 1, k, bi, bj) &
                                          - aV3d(1:sNx, 1:sNy, k, bi, bj)
          if (k < Nr) aC3d(1:sNx, 1:sNy, k, bi, bj) = aC3d(1:sNx, 1:sNy, k, bi, bj) - aV3d(1:sNx, 1:sNy, k + 1, bi, bj)
        end do
        aC3d(1:sNx, 1:sNy, 1, bi, bj) = aC3d(1:sNx, 1:sNy, 1, bi, bj) &
                                        - rA / (gravity * deltaTMom) * maskC(1:sNx, 1:sNy, 1, bi, bj)
      end do
    end do
    aW3d = aW3d * myNorm
    aS3d = aS3d * myNorm
    aV3d = aV3d * myNorm
    aC3d = aC3d * myNorm
    call exch_xyz_rl(aW3d)
    call exch_xyz_rl(aS3d)
    call exch_xyz_rl(aV3d)
    call exch_xyz_rl(aC3d)
    ! pkrylov: the operator on the same grid, exact column solves as the preconditioner, CG as CG3D stops
    call pk_operator_create_grid_stencil(pkGrid, pkA3d, Nr, aW3d, aS3d, aV3d, aC3d, mask=maskC > 0.0_rl)
    call pk_precond_create(pkCtx, pkM3d, pkA3d, PKRYLOV_PRECOND_COLUMN)
    call pk_solver_create(pkCtx, pkCG3d, PKRYLOV_SOLVER_CG, pkA3d, pkM3d)
    call pk_solver_set_stop_rule(pkCG3d, PKRYLOV_STOP_RECURRENCE)
    call pk_solver_set_tolerances(pkCG3d, 0.0_rl, cg3dTargetResidual)
    call pk_solver_set_initial_guess_nonzero(pkCG3d, .true.)
  end subroutine ini_cg3d

  !> CG3D (cg3d.F): as CG2D with the column LU as preconditioner.
  subroutine cg3d(cg3d_b, cg3d_x, firstResidual, lastResidual, numIters)
    real(rl), intent(inout) :: cg3d_b(1-OLx:sNx+OLx, 1-OLy:sNy+OLy, Nr, nSx, nSy)
    real(rl), intent(inout) :: cg3d_x(1-OLx:sNx+OLx, 1-OLy:sNy+OLy, Nr, nSx, nSy)
    real(rl), intent(out) :: firstResidual, lastResidual
    integer, intent(inout) :: numIters
    real(rl) :: rhsMax, rhsNorm
    type(pkrylov_result) :: res

    cg3d_b = cg3d_b * cg3dNorm * maskC
    rhsMax = global_max(maxval(abs(cg3d_b(1:sNx, 1:sNy, :, :, :))))
    rhsNorm = 1.0_rl
    if (rhsMax > 0.0_rl) rhsNorm = 1.0_rl / rhsMax
    cg3d_b = cg3d_b * rhsNorm
    cg3d_x = cg3d_x * rhsNorm
    call pk_solver_set_max_iterations(pkCG3d, numIters)
    call pk_solver_solve_grid(pkCG3d, cg3d_b, cg3d_x)
    call pk_solver_get_result(pkCG3d, res)
    cg3d_x(1:sNx, 1:sNy, :, :, :) = cg3d_x(1:sNx, 1:sNy, :, :, :) / rhsNorm
    firstResidual = res%initial_residual
    lastResidual = res%final_residual
    numIters = res%iterations
  end subroutine cg3d
end module solvers

program mitgcm_tiled
  use size_h
  use eesupp
  use grid_h
  use cg2d_h
  use cg3d_h
  use solvers
  implicit none
  integer, parameter :: nTimeSteps = 4
  real(rl), allocatable :: etaN(:, :, :, :), cg2d_b(:, :, :, :), phi_nh(:, :, :, :, :), cg3d_b(:, :, :, :, :)
  real(rl) :: firstResidual, lastResidual
  integer :: myIter, numIters, iters(2 * nTimeSteps), ierr

  call MPI_Init(ierr)
  call ini_procs()
  call ini_grid()
  call ini_cg2d()
  call ini_cg3d()
  allocate(etaN, cg2d_b, mold=maskInC)
  allocate(phi_nh, cg3d_b, mold=maskC)
  etaN = 0.0_rl
  phi_nh = 0.0_rl
  do myIter = 1, nTimeSteps
    call rhs_2d(real(myIter, rl), cg2d_b)
    numIters = cg2dMaxIters
    call cg2d(cg2d_b, etaN, firstResidual, lastResidual, numIters)
    call exch_xy_rl(etaN)
    iters(2 * myIter - 1) = numIters
    if (myRank == 0) write(*, '(a,i3,a,i5,a,2es22.14)') ' cg2d: iter', myIter, ': numIters', numIters, &
                                                      ', first and last residual', firstResidual, lastResidual
    call rhs_3d(real(myIter, rl), cg3d_b)
    numIters = cg3dMaxIters
    call cg3d(cg3d_b, phi_nh, firstResidual, lastResidual, numIters)
    call exch_xyz_rl(phi_nh)
    iters(2 * myIter) = numIters
    if (myRank == 0) write(*, '(a,i3,a,i5,a,2es22.14)') ' cg3d: iter', myIter, ': numIters', numIters, &
                                                      ', first and last residual', firstResidual, lastResidual
  end do
  call write_result(etaN, phi_nh, iters)
  deallocate(etaN, cg2d_b, phi_nh, cg3d_b) ! (main-program allocatables are not freed at the end)
  call pk_solver_destroy(pkCG3d)
  call pk_precond_destroy(pkM3d)
  call pk_operator_destroy(pkA3d)
  call pk_solver_destroy(pkCG2d)
  call pk_precond_destroy(pkM2d)
  call pk_operator_destroy(pkA2d)
  call pk_grid_destroy(pkGrid)
  call pk_context_destroy(pkCtx)
  call MPI_Finalize(ierr)

contains
  !> The bathymetry: 400 m with an island and a ridge across the domain that leaves a gap (water crosses
  !> both periodic boundaries); full cells; faces open where both cells are wet.
  subroutine ini_grid()
    integer :: i, j, k, bi, bj, gi, gj
    real(rl) :: dep, rF
    allocate(hFacC(1-OLx:sNx+OLx, 1-OLy:sNy+OLy, Nr, nSx, nSy))
    allocate(hFacW, hFacS, maskC, mold=hFacC)
    allocate(maskInC(1-OLx:sNx+OLx, 1-OLy:sNy+OLy, nSx, nSy), Depth(1-OLx:sNx+OLx, 1-OLy:sNy+OLy, nSx, nSy))
    rF = 0.0_rl
    do k = 1, Nr
      rC(k) = rF - 0.5_rl * drF(k)
      rF = rF - drF(k)
    end do
    drC(1) = 0.5_rl * drF(1)
    drC(2:Nr) = 0.5_rl * (drF(1:Nr - 1) + drF(2:Nr))
    hFacC = 0.0_rl
    Depth = 0.0_rl
    do bj = 1, nSy
      do bi = 1, nSx
        do j = 1, sNy
          do i = 1, sNx
            gi = (myPx * nSx + bi - 1) * sNx + i
            gj = (myPy * nSy + bj - 1) * sNy + j
            dep = 400.0_rl - 300.0_rl * exp(-((gi - 40.0_rl) / 4.0_rl)**2) * merge(1.0_rl, 0.0_rl, gj > 10)
            if ((gi - 20)**2 + (gj - 30)**2 <= 20) dep = 0.0_rl ! the island
            Depth(i, j, bi, bj) = dep
            do k = 1, Nr
              if (rC(k) > -dep) hFacC(i, j, k, bi, bj) = 1.0_rl
            end do
          end do
        end do
      end do
    end do
    call exch_xyz_rl(hFacC)
    maskC = hFacC
    maskInC = maskC(:, :, 1, :, :)
    hFacW = 0.0_rl
    hFacS = 0.0_rl
    hFacW(2-OLx:sNx+OLx, :, :, :, :) = min(hFacC(1-OLx:sNx+OLx-1, :, :, :, :), hFacC(2-OLx:sNx+OLx, :, :, :, :))
    hFacS(:, 2-OLy:sNy+OLy, :, :, :) = min(hFacC(:, 1-OLy:sNy+OLy-1, :, :, :), hFacC(:, 2-OLy:sNy+OLy, :, :, :))
  end subroutine ini_grid

  !> A barotropic divergence: a pair of sources drifting with time (zero on land).
  subroutine rhs_2d(time, b)
    real(rl), intent(in) :: time
    real(rl), intent(out) :: b(1-OLx:sNx+OLx, 1-OLy:sNy+OLy, nSx, nSy)
    integer :: i, j, bi, bj, gi, gj
    b = 0.0_rl
    do bj = 1, nSy
      do bi = 1, nSx
        do j = 1, sNy
          do i = 1, sNx
            gi = (myPx * nSx + bi - 1) * sNx + i
            gj = (myPy * nSy + bj - 1) * sNy + j
            b(i, j, bi, bj) = maskInC(i, j, bi, bj) * (exp(-((gi - 10.0_rl - 3 * time)**2 + (gj - 12.0_rl)**2) / 20.0_rl) &
                              - exp(-((gi - 50.0_rl)**2 + (gj - 36.0_rl + 2 * time)**2) / 30.0_rl)) * rA
          end do
        end do
      end do
    end do
  end subroutine rhs_2d

  !> A baroclinic divergence: a convective plume and a seiche, zero vertical sum in every column.
  subroutine rhs_3d(time, b)
    real(rl), intent(in) :: time
    real(rl), intent(out) :: b(1-OLx:sNx+OLx, 1-OLy:sNy+OLy, Nr, nSx, nSy)
    integer :: i, j, k, bi, bj, gi, gj
    real(rl) :: col
    b = 0.0_rl
    do bj = 1, nSy
      do bi = 1, nSx
        do j = 1, sNy
          do i = 1, sNx
            gi = (myPx * nSx + bi - 1) * sNx + i
            gj = (myPy * nSy + bj - 1) * sNy + j
            do k = 1, Nr
              b(i, j, k, bi, bj) = maskC(i, j, k, bi, bj) * rA * drF(k) * (sin(0.7_rl * k + 0.1_rl * time) * &
                                   exp(-((gi - 30.0_rl - time)**2 + (gj - 20.0_rl)**2) / 40.0_rl) + &
                                   0.3_rl * cos(0.2_rl * gi + 0.3_rl * k) * sin(0.15_rl * gj))
            end do
            col = sum(b(i, j, :, bi, bj))
            if (sum(maskC(i, j, :, bi, bj) * drF) > 0.0_rl) &
              b(i, j, :, bi, bj) = b(i, j, :, bi, bj) - col * maskC(i, j, :, bi, bj) * drF / sum(maskC(i, j, :, bi, bj) * drF)
          end do
        end do
      end do
    end do
  end subroutine rhs_3d

  !> Rank 0 writes the iteration counts and the final eta and phi_nh in the global order.
  subroutine write_result(eta, phi, its)
    real(rl), intent(in) :: eta(1-OLx:sNx+OLx, 1-OLy:sNy+OLy, nSx, nSy), phi(1-OLx:sNx+OLx, 1-OLy:sNy+OLy, Nr, nSx, nSy)
    integer, intent(in) :: its(:)
    real(rl), allocatable :: g2(:, :), g3(:, :, :), l2(:, :), l3(:, :, :)
    character(len=256) :: path
    integer :: u, bi, bj, i0, j0, e
    allocate(g2(NX, NY), l2(NX, NY), g3(NX, NY, Nr), l3(NX, NY, Nr))
    l2 = 0.0_rl
    l3 = 0.0_rl
    do bj = 1, nSy
      do bi = 1, nSx
        i0 = (myPx * nSx + bi - 1) * sNx
        j0 = (myPy * nSy + bj - 1) * sNy
        l2(i0 + 1:i0 + sNx, j0 + 1:j0 + sNy) = eta(1:sNx, 1:sNy, bi, bj)
        l3(i0 + 1:i0 + sNx, j0 + 1:j0 + sNy, :) = phi(1:sNx, 1:sNy, :, bi, bj)
      end do
    end do
    call MPI_Reduce(l2, g2, NX * NY, MPI_DOUBLE_PRECISION, MPI_SUM, 0, MPI_COMM_WORLD, e)
    call MPI_Reduce(l3, g3, NX * NY * Nr, MPI_DOUBLE_PRECISION, MPI_SUM, 0, MPI_COMM_WORLD, e)
    if (myRank /= 0) return
    path = 'mitgcm_tiled.out'
    if (command_argument_count() >= 1) call get_command_argument(1, path)
    open(newunit=u, file=trim(path), status='replace', action='write')
    write(u, '(2i8)') size(its), size(g2) + size(g3)
    write(u, '(*(i6))') its
    write(u, '(es25.17)') g2
    write(u, '(es25.17)') g3
    close(u)
  end subroutine write_result
end program mitgcm_tiled

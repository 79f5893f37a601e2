!> mitgcm_cs -- an MITgcm-like ocean model on the cube sphere, its solves done by pkrylov (the version after
!> the switch).
!>
!> The layout of MITgcm with exch2 (W2_EXCH2): six faces of N x N = 32 x 32 columns (cs32), each cut into
!> 2 x 2 tiles of sNx x sNy = 16 x 16 columns and Nr = 8 levels, 24 tiles numbered face by face
!> (tile (tx, ty) of face f is tile (f-1)*4 + tx + 2*ty + 1); every process owns nSx = 24 / (processes)
!> consecutive tiles (nSy = 1): arrays (1-OLx:sNx+OLx, 1-OLy:sNy+OLy, [Nr,] nSx, nSy), overlaps
!> OLx = OLy = 2; 1, 2, 3, 4 or 6 MPI ranks. The faces join as in MITgcm's six-face topology, four of the
!> joins rotated (an edge along x meets one along y). The model owns:
!>  - its grid: the equiangular gnomonic cube of a small planet (radius 6371 km / 125, the reduced radius
!>    of non-hydrostatic tests, so that cells are 2.5 km and the non-hydrostatic solve has work to do),
!>    dxG, dyG, dxC, dyC, rA computed from the face-to-sphere map; three continents, one of them over four
!>    faces across rotated and unrotated joins;
!>  - its halo exchange: EXCH_XY_RL / EXCH_XYZ_RL of scalars, EXCH_UV_XY_RL / EXCH_UV_XYZ_RL of the pairs
!>    of face fields (u on west faces, v on south faces; across a rotated join u comes from v and v from
!>    u), copies between the tiles of a process, MPI between processes, no corner points (the stencils
!>    never read them);
!>  - its global sums (GLOBAL_SUM_TILE_RL: the tiles' partial sums in a fixed order, then MPI).
!> Every time step:
!>  - CG2D, the implicit free surface: the 5-point operator aW2d, aS2d, aC2d with the free-surface term,
!>    the approximate-inverse preconditioner pC, pW, pS with cg2dpcOffDFac = 0.51 (INI_CG2D), MITgcm's
!>    CG2D loop;
!>  - CG3D, the non-hydrostatic pressure: the 7-point operator aW3d, aS3d, aV3d, aC3d and the LU factors of
!>    every column's tridiagonal (INI_CG3D), MITgcm's CG3D loop.
!> Both normalise the RHS by its global maximum and stop when the unpreconditioned sum r^2 over the
!> interior is below tolerance^2, tested before the first iteration.
!>
!> Usage: mitgcm_cs [output-file]: the iteration counts (2-D and 3-D of every step) and the final eta and
!> phi_nh in the global order (i, j, face and i, j, k, face) go to the output file (rank 0).
module size_h
  implicit none
  integer, parameter :: rl = kind(1.0d0)                     ! _RL and _RS
  integer, parameter :: N = 32, nFt = 2, sNx = N / nFt, sNy = sNx, OLx = 2, OLy = 2, Nr = 8, nSy = 1
  integer, parameter :: nTiles = 6 * nFt * nFt
  integer :: nSx, myRank, nRanks
end module size_h

!> eesupp: the model's processes, the exch2 topology, halo exchanges and global sums.
module eesupp
  use mpi
  use size_h
  implicit none
  !> The face joins (W2_EXCH2 topology): edge e (1 west, 2 east, 3 south, 4 north) of face f meets edge
  !> faceEdge(e, f) of face faceNb(e, f); where an edge along x meets one along y the positions along the
  !> two edges run in opposite directions.
  integer, parameter :: faceNb(4, 6) = reshape([5, 2, 6, 3, 1, 4, 6, 3, 1, 4, 2, 5, &
                                                3, 6, 2, 5, 3, 6, 4, 1, 5, 2, 4, 1], [4, 6])
  integer, parameter :: faceEdge(4, 6) = reshape([4, 1, 4, 1, 2, 3, 2, 3, 4, 1, 4, 1, &
                                                  2, 3, 2, 3, 4, 1, 4, 1, 2, 3, 2, 3], [4, 6])
  !> The exchange plan: the halo points of a tile outside its corners (x halos of rows 1..sNy, y halos of
  !> columns 1..sNx), where each local tile's come from (rank, tile, point; rot: across a rotated join),
  !> and the points this process sends to the others, in the order they list their halo points.
  integer, parameter :: nHalo = 2 * (OLx * sNy + OLy * sNx)
  integer :: hI(nHalo), hJ(nHalo)
  logical :: hY(nHalo)
  integer, allocatable :: srcRank(:, :), srcBi(:, :), srcI(:, :), srcJ(:, :), nSend(:), nRecv(:)
  integer, allocatable :: sendBi(:), sendI(:), sendJ(:)
  logical, allocatable :: srcRot(:, :), sendV(:)
contains
  subroutine ini_procs()
    integer :: ierr
    call MPI_Comm_rank(MPI_COMM_WORLD, myRank, ierr)
    call MPI_Comm_size(MPI_COMM_WORLD, nRanks, ierr)
    if (mod(nTiles, nRanks) /= 0) error stop 'mitgcm_cs: run on 1, 2, 3, 4, 6, 8, 12 or 24 ranks'
    nSx = nTiles / nRanks
    call ini_exch()
  end subroutine ini_procs

  !> Face f and face indices (fI, fJ) of point (i, j) of global tile gt (0-based).
  subroutine tile_to_face(gt, i, j, f, fI, fJ)
    integer, intent(in) :: gt, i, j
    integer, intent(out) :: f, fI, fJ
    f = gt / (nFt * nFt) + 1
    fI = mod(gt, nFt) * sNx + i
    fJ = mod(gt / nFt, nFt) * sNy + j
  end subroutine tile_to_face

  !> The column across a face edge: (fI, fJ) just outside face f (one index outside 1..N, by d = 1..OL)
  !> is column (gI, gJ) of face g, d columns in from the edge it meets; rot: a rotated join.
  subroutine face_map(f, fI, fJ, g, gI, gJ, rot)
    integer, intent(in) :: f, fI, fJ
    integer, intent(out) :: g, gI, gJ
    logical, intent(out) :: rot
    integer :: e, m, d
    if (fI < 1) then
      e = 1; m = fJ; d = 1 - fI
    else if (fI > N) then
      e = 2; m = fJ; d = fI - N
    else if (fJ < 1) then
      e = 3; m = fI; d = 1 - fJ
    else
      e = 4; m = fI; d = fJ - N
    end if
    g = faceNb(e, f)
    rot = (e <= 2) .neqv. (faceEdge(e, f) <= 2)
    if (rot) m = N + 1 - m
    select case (faceEdge(e, f))
    case (1)
      gI = d; gJ = m
    case (2)
      gI = N + 1 - d; gJ = m
    case (3)
      gI = m; gJ = d
    case default
      gI = m; gJ = N + 1 - d
    end select
  end subroutine face_map

  !> Where halo point (i, j) of global tile gt (0-based) comes from: global tile sgt, point (si, sj).
  subroutine halo_source(gt, i, j, sgt, si, sj, rot)
    integer, intent(in) :: gt, i, j
    integer, intent(out) :: sgt, si, sj
    logical, intent(out) :: rot
    integer :: f, fI, fJ, g, gI, gJ
    call tile_to_face(gt, i, j, f, fI, fJ)
    g = f
    gI = fI
    gJ = fJ
    rot = .false.
    if (fI < 1 .or. fI > N .or. fJ < 1 .or. fJ > N) call face_map(f, fI, fJ, g, gI, gJ, rot)
    sgt = (g - 1) * nFt * nFt + (gI - 1) / sNx + nFt * ((gJ - 1) / sNy)
    si = gI - ((gI - 1) / sNx) * sNx
    sj = gJ - ((gJ - 1) / sNy) * sNy
  end subroutine halo_source

  !> The exchange plan (once).
  subroutine ini_exch()
    integer :: i, j, h, bi, q, sgt, si, sj, p
    logical :: rot
    h = 0
    do j = 1 - OLy, sNy + OLy
      do i = 1 - OLx, sNx + OLx
        if ((i >= 1 .and. i <= sNx) .eqv. (j >= 1 .and. j <= sNy)) cycle ! the interior or a corner
        h = h + 1
        hI(h) = i
        hJ(h) = j
        hY(h) = j < 1 .or. j > sNy
      end do
    end do
    allocate(srcRank(nHalo, nSx), srcBi(nHalo, nSx), srcI(nHalo, nSx), srcJ(nHalo, nSx), srcRot(nHalo, nSx))
    allocate(nSend(0:nRanks - 1), nRecv(0:nRanks - 1))
    allocate(sendBi(nHalo * nTiles), sendI(nHalo * nTiles), sendJ(nHalo * nTiles), sendV(nHalo * nTiles))
    nRecv = 0
    do bi = 1, nSx
      do h = 1, nHalo
        call halo_source(myRank * nSx + bi - 1, hI(h), hJ(h), sgt, srcI(h, bi), srcJ(h, bi), srcRot(h, bi))
        srcRank(h, bi) = sgt / nSx
        srcBi(h, bi) = mod(sgt, nSx) + 1
        if (srcRank(h, bi) /= myRank) nRecv(srcRank(h, bi)) = nRecv(srcRank(h, bi)) + 1
      end do
    end do
    nSend = 0
    p = 0
    do q = 0, nRanks - 1
      if (q == myRank) cycle
      do bi = 1, nSx
        do h = 1, nHalo
          call halo_source(q * nSx + bi - 1, hI(h), hJ(h), sgt, si, sj, rot)
          if (sgt / nSx /= myRank) cycle
          p = p + 1
          sendBi(p) = mod(sgt, nSx) + 1
          sendI(p) = si
          sendJ(p) = sj
          sendV(p) = hY(h) .neqv. rot ! a u, v exchange: the receiver needs v there
          nSend(q) = nSend(q) + 1
        end do
      end do
    end do
  end subroutine ini_exch

  !> The exchange of one scalar field (v absent) or of a u, v pair (u on the west faces, filled in the x
  !> halos; v on the south faces, in the y halos; across a rotated join u comes from v and v from u), nk
  !> levels. MPI_Irecv / MPI_Isend, one message per neighbour process, copies within the process.
  subroutine exch_core(nk, u, v)
    integer, intent(in) :: nk
    real(rl), intent(inout) :: u(1-OLx:sNx+OLx, 1-OLy:sNy+OLy, nk, nSx)
    real(rl), intent(inout), optional :: v(1-OLx:sNx+OLx, 1-OLy:sNy+OLy, nk, nSx)
    real(rl), allocatable :: sbuf(:, :), rbuf(:, :)
    integer :: req(2 * nRanks), nreq, q, p, off, bi, h, ierr, got(0:nRanks - 1), roff(0:nRanks - 1)
    allocate(sbuf(nk, max(1, sum(nSend))), rbuf(nk, max(1, sum(nRecv))))
    nreq = 0
    off = 0
    do q = 0, nRanks - 1
      roff(q) = off
      if (nRecv(q) == 0) cycle
      nreq = nreq + 1
      call MPI_Irecv(rbuf(1, off + 1), nk * nRecv(q), MPI_DOUBLE_PRECISION, q, 0, MPI_COMM_WORLD, req(nreq), &
                     ierr)
      off = off + nRecv(q)
    end do
    do p = 1, sum(nSend)
      if (present(v) .and. sendV(p)) then
        sbuf(:, p) = v(sendI(p), sendJ(p), :, sendBi(p))
      else
        sbuf(:, p) = u(sendI(p), sendJ(p), :, sendBi(p))
      end if
    end do
    off = 0
    do q = 0, nRanks - 1
      if (nSend(q) == 0) cycle
      nreq = nreq + 1
      call MPI_Isend(sbuf(1, off + 1), nk * nSend(q), MPI_DOUBLE_PRECISION, q, 0, MPI_COMM_WORLD, req(nreq), &
                     ierr)
      off = off + nSend(q)
    end do
    do bi = 1, nSx
      do h = 1, nHalo
        if (srcRank(h, bi) /= myRank) cycle
        if (.not. present(v)) then
          u(hI(h), hJ(h), :, bi) = u(srcI(h, bi), srcJ(h, bi), :, srcBi(h, bi))
        else if (hY(h) .and. srcRot(h, bi)) then
          v(hI(h), hJ(h), :, bi) = u(srcI(h, bi), srcJ(h, bi), :, srcBi(h, bi))
        else if (hY(h)) then
          v(hI(h), hJ(h), :, bi) = v(srcI(h, bi), srcJ(h, bi), :, srcBi(h, bi))
        else if (srcRot(h, bi)) then
          u(hI(h), hJ(h), :, bi) = v(srcI(h, bi), srcJ(h, bi), :, srcBi(h, bi))
        else
          u(hI(h), hJ(h), :, bi) = u(srcI(h, bi), srcJ(h, bi), :, srcBi(h, bi))
        end if
      end do
    end do
    call MPI_Waitall(nreq, req, MPI_STATUSES_IGNORE, ierr)
    got = 0
    do bi = 1, nSx
      do h = 1, nHalo
        q = srcRank(h, bi)
        if (q == myRank) cycle
        got(q) = got(q) + 1
        if (present(v) .and. hY(h)) then
          v(hI(h), hJ(h), :, bi) = rbuf(:, roff(q) + got(q))
        else
          u(hI(h), hJ(h), :, bi) = rbuf(:, roff(q) + got(q))
        end if
      end do
    end do
  end subroutine exch_core

  subroutine exch_xy_rl(fld)
    real(rl), intent(inout) :: fld(1-OLx:sNx+OLx, 1-OLy:sNy+OLy, nSx, nSy)
    call exch_core(1, fld)
  end subroutine exch_xy_rl

  subroutine exch_xyz_rl(fld)
    real(rl), intent(inout) :: fld(1-OLx:sNx+OLx, 1-OLy:sNy+OLy, Nr, nSx, nSy)
    call exch_core(Nr, fld)
  end subroutine exch_xyz_rl

  !> EXCH_UV_XY_RL(u, v, .FALSE.): a pair of face fields without sign changes (the coefficients).
  subroutine exch_uv_xy_rl(u, v)
    real(rl), intent(inout) :: u(1-OLx:sNx+OLx, 1-OLy:sNy+OLy, nSx, nSy)
    real(rl), intent(inout) :: v(1-OLx:sNx+OLx, 1-OLy:sNy+OLy, nSx, nSy)
    call exch_core(1, u, v)
  end subroutine exch_uv_xy_rl

  subroutine exch_uv_xyz_rl(u, v)
    real(rl), intent(inout) :: u(1-OLx:sNx+OLx, 1-OLy:sNy+OLy, Nr, nSx, nSy)
    real(rl), intent(inout) :: v(1-OLx:sNx+OLx, 1-OLy:sNy+OLy, Nr, nSx, nSy)
    call exch_core(Nr, u, v)
  end subroutine exch_uv_xyz_rl

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

!> GRID.h, PARAMS.h: the cube's metrics, 8 levels to 400 m, the masks.
module grid_h
  use size_h
  implicit none
  real(rl), parameter :: pi = 3.14159265358979323846_rl, rSphere = 6371.0e3_rl / 125.0_rl
  real(rl), parameter :: gravity = 9.81_rl, deltaTMom = 60.0_rl, deltaTfreesurf = 60.0_rl
  real(rl), parameter :: drF(Nr) = [20.0_rl, 25.0_rl, 35.0_rl, 45.0_rl, 55.0_rl, 65.0_rl, 75.0_rl, 80.0_rl]
  real(rl) :: drC(Nr), rC(Nr)
  real(rl), allocatable, dimension(:, :, :, :) :: dxC, dyC, dxG, dyG, rA, maskInC, Depth
  real(rl), allocatable, dimension(:, :, :, :, :) :: hFacC, hFacW, hFacS, maskC
  real(rl), allocatable :: xC(:, :, :, :, :) ! the cell centres on the unit sphere (3, i, j, bi, bj)
  !> The faces: centre n, the directions of i (u) and j (v), u x v = n (the exch2 joins above).
  real(rl), parameter :: faceN(3, 6) = reshape([1, 0, 0, 0, 1, 0, 0, 0, 1, -1, 0, 0, 0, -1, 0, 0, 0, -1], &
                                                [3, 6])
  real(rl), parameter :: faceU(3, 6) = reshape([0, 1, 0, -1, 0, 0, -1, 0, 0, 0, 0, -1, 0, 0, -1, 0, 1, 0], &
                                                [3, 6])
  real(rl), parameter :: faceV(3, 6) = reshape([0, 0, 1, 0, 0, 1, 0, -1, 0, 0, -1, 0, 1, 0, 0, 1, 0, 0], &
                                                [3, 6])
contains
  !> The point of face f at face coordinates (s, t) (in columns, 0..N; the centre of column i is i - 1/2)
  !> on the unit sphere: equiangular gnomonic, n + tan(a) u + tan(b) v normalised, a, b in [-pi/4, pi/4].
  function cube_point(f, s, t) result(p)
    integer, intent(in) :: f
    real(rl), intent(in) :: s, t
    real(rl) :: p(3)
    p = faceN(:, f) + tan(0.5_rl * pi * (s / N - 0.5_rl)) * faceU(:, f) &
                    + tan(0.5_rl * pi * (t / N - 0.5_rl)) * faceV(:, f)
    p = p / norm2(p)
  end function cube_point

  !> The great-circle distance of two unit vectors.
  function arc(a, b) result(d)
    real(rl), intent(in) :: a(3), b(3)
    real(rl) :: d
    d = atan2(norm2([a(2) * b(3) - a(3) * b(2), a(3) * b(1) - a(1) * b(3), a(1) * b(2) - a(2) * b(1)]), &
              dot_product(a, b))
  end function arc

  !> The area of the unit-sphere cell between face coordinates s0..s1, t0..t1 (the gnomonic area element
  !> integrated: the corners' atan(X Y / sqrt(1 + X^2 + Y^2))).
  function cell_area(s0, s1, t0, t1) result(a)
    real(rl), intent(in) :: s0, s1, t0, t1
    real(rl) :: a
    a = corner_term(s1, t1) - corner_term(s0, t1) - corner_term(s1, t0) + corner_term(s0, t0)
  contains
    function corner_term(s, t) result(c)
      real(rl), intent(in) :: s, t
      real(rl) :: c, x, y
      x = tan(0.5_rl * pi * (s / N - 0.5_rl))
      y = tan(0.5_rl * pi * (t / N - 0.5_rl))
      c = atan(x * y / sqrt(1.0_rl + x * x + y * y))
    end function corner_term
  end function cell_area
end module grid_h

!> CG2D.h: the 2-D operator, its preconditioner and the solver's parameters.
module cg2d_h
  use size_h
  use pkrylov_mod, only: pk_context, pk_grid, pk_operator, pk_precond, pk_solver
  implicit none
  type(pk_context) :: pkCtx
  type(pk_grid) :: pkGrid
  type(pk_operator) :: pkA2d
  type(pk_precond) :: pkM2d
  type(pk_solver) :: pkCG2d
  real(rl), allocatable, dimension(:, :, :, :) :: aW2d, aS2d, aC2d, pW, pS, pC
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
  !> INI_CG2D: aW2d = g dt^2 (depth of the face) dyG/dxC on every cell's west face, aS2d likewise, the
  !> east and north faces of a tile from the neighbours (EXCH_UV), aC2d = -(the four) - the free surface,
  !> normalised; the approximate inverse pC, pW, pS (MITgcm's formula).
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
        do j = 1, sNy
          do i = 1, sNx
            aW2d(i, j, bi, bj) = dyG(i, j, bi, bj) * sum(drF * hFacW(i, j, :, bi, bj)) / dxC(i, j, bi, bj)
            aS2d(i, j, bi, bj) = dxG(i, j, bi, bj) * sum(drF * hFacS(i, j, :, bi, bj)) / dyC(i, j, bi, bj)
          end do
        end do
      end do
    end do
    myNorm = 1.0_rl / global_max(max(maxval(abs(aW2d)), maxval(abs(aS2d))))
    cg2dNorm = myNorm
    call exch_uv_xy_rl(aW2d, aS2d)
    do bj = 1, nSy
      do bi = 1, nSx
        do j = 1, sNy
          do i = 1, sNx
            aC2d(i, j, bi, bj) = -(aW2d(i, j, bi, bj) + aW2d(i + 1, j, bi, bj) + aS2d(i, j, bi, bj) + &
                                   aS2d(i, j + 1, bi, bj) + fs * rA(i, j, bi, bj) * maskInC(i, j, bi, bj))
          end do
        end do
      end do
    end do
    aW2d = aW2d * myNorm
    aS2d = aS2d * myNorm
    aC2d = aC2d * myNorm
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
    call exch_uv_xy_rl(pW, pS)
    ! pkrylov: the model's tiles of the cube on its communicator, the operator and preconditioner from its
    ! arrays, CG with CG2D's stopping test
    call pk_context_create(pkCtx, PKRYLOV_BACKEND_AUTO)
    call pk_context_set_comm(pkCtx, MPI_COMM_WORLD)
    call pk_grid_create_cubesphere(pkCtx, pkGrid, sNx, OLx, OLy, nFt, [(myRank * nSx + i, i = 1, nSx)])
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

  !> INI_CG3D: the 3-D operator times deltaTMom (the east and north faces of a tile from the neighbours),
  !> normalised, and the LU factors of every column.
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
          do j = 1, sNy
            do i = 1, sNx
              aW3d(i, j, k, bi, bj) = dyG(i, j, bi, bj) * drF(k) * hFacW(i, j, k, bi, bj) &
                                      / dxC(i, j, bi, bj) * deltaTMom
              aS3d(i, j, k, bi, bj) = dxG(i, j, bi, bj) * drF(k) * hFacS(i, j, k, bi, bj) &
                                      / dyC(i, j, bi, bj) * deltaTMom
            end do
          end do
        end do
        do k = 2, Nr
          aV3d(1:sNx, 1:sNy, k, bi, bj) = rA(1:sNx, 1:sNy, bi, bj) * maskC(1:sNx, 1:sNy, k, bi, bj) &
                                          * maskC(1:sNx, 1:sNy, k - 1, bi, bj) / drC(k) * deltaTMom
        end do
      end do
    end do
    myNorm = 1.0_rl / global_max(max(maxval(abs(aW3d)), maxval(abs(aS3d)), maxval(abs(aV3d))))
    cg3dNorm = myNorm
    call exch_uv_xyz_rl(aW3d, aS3d)
    do bj = 1, nSy
      do bi = 1, nSx
        do k = 1, Nr
          aC3d(1:sNx, 1:sNy, k, bi, bj) = -aW3d(1:sNx, 1:sNy, k, bi, bj) - aW3d(2:sNx + 1, 1:sNy, k, bi, bj) &
                                          - aS3d(1:sNx, 1:sNy, k, bi, bj) &
                                          - aS3d(1:sNx, 2:sNy + 1, k, bi, bj) - aV3d(1:sNx, 1:sNy, k, bi, bj)
          if (k < Nr) aC3d(1:sNx, 1:sNy, k, bi, bj) = aC3d(1:sNx, 1:sNy, k, bi, bj) &
                                                      - aV3d(1:sNx, 1:sNy, k + 1, bi, bj)
        end do
        aC3d(1:sNx, 1:sNy, 1, bi, bj) = aC3d(1:sNx, 1:sNy, 1, bi, bj) - rA(1:sNx, 1:sNy, bi, bj) &
                                        / (gravity * deltaTMom) * maskC(1:sNx, 1:sNy, 1, bi, bj)
      end do
    end do
    aW3d = aW3d * myNorm
    aS3d = aS3d * myNorm
    aV3d = aV3d * myNorm
    aC3d = aC3d * myNorm
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

program mitgcm_cs
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
  !> The metrics of every tile from the face-to-sphere map (face indices fI, fJ of cell (i, j)): dxG, dyG
  !> the lengths of the south and west faces, dxC, dyC the distances between the centres of the cell and
  !> its west and south neighbours, through the midpoint of the face between them (across a face edge
  !> twice the cell's own half: the cell across is its mirror image), rA the area. The bathymetry: 400 m,
  !> a ridge, three continents by latitude and longitude: one over faces 1, 3, 5 and 6 (across the rotated
  !> joins 1W-5N, 1N-3W, 3N-5W and the joins 1S-6N, 5E-6W), one across the rotated join 2E-4S, a polar cap
  !> on face 6 (820 dry columns of 6144); full cells; a face open where both its cells are wet.
  subroutine ini_grid()
    integer :: i, j, k, bi, bj, f, fI, fJ
    real(rl) :: dep, rF, s, t, lat, lon, half, mid(3), ctr(3), corner(3)
    allocate(hFacC(1-OLx:sNx+OLx, 1-OLy:sNy+OLy, Nr, nSx, nSy))
    allocate(hFacW, hFacS, maskC, mold=hFacC)
    allocate(maskInC(1-OLx:sNx+OLx, 1-OLy:sNy+OLy, nSx, nSy))
    allocate(Depth, dxC, dyC, dxG, dyG, rA, mold=maskInC)
    allocate(xC(3, sNx, sNy, nSx, nSy))
    rF = 0.0_rl
    do k = 1, Nr
      rC(k) = rF - 0.5_rl * drF(k)
      rF = rF - drF(k)
    end do
    drC(1) = 0.5_rl * drF(1)
    drC(2:Nr) = 0.5_rl * (drF(1:Nr - 1) + drF(2:Nr))
    dxC = 0.0_rl
    dyC = 0.0_rl
    dxG = 0.0_rl
    dyG = 0.0_rl
    rA = 0.0_rl
    hFacC = 0.0_rl
    Depth = 0.0_rl
    do bj = 1, nSy
      do bi = 1, nSx
        do j = 1, sNy
          do i = 1, sNx
            call tile_to_face(myRank * nSx + bi - 1 + nSx * (bj - 1), i, j, f, fI, fJ)
            s = fI - 0.5_rl
            t = fJ - 0.5_rl
            ctr = cube_point(f, s, t)
            xC(:, i, j, bi, bj) = ctr
            corner = cube_point(f, s - 0.5_rl, t - 0.5_rl)
            dxG(i, j, bi, bj) = rSphere * arc(corner, cube_point(f, s + 0.5_rl, t - 0.5_rl))
            dyG(i, j, bi, bj) = rSphere * arc(corner, cube_point(f, s - 0.5_rl, t + 0.5_rl))
            mid = cube_point(f, s - 0.5_rl, t)
            half = arc(mid, ctr)
            dxC(i, j, bi, bj) = rSphere * (half + merge(half, arc(cube_point(f, s - 1, t), mid), fI == 1))
            mid = cube_point(f, s, t - 0.5_rl)
            half = arc(mid, ctr)
            dyC(i, j, bi, bj) = rSphere * (half + merge(half, arc(cube_point(f, s, t - 1), mid), fJ == 1))
            rA(i, j, bi, bj) = rSphere**2 * cell_area(s - 0.5_rl, s + 0.5_rl, t - 0.5_rl, t + 0.5_rl)
            lat = asin(ctr(3)) * 180.0_rl / pi
            lon = atan2(ctr(2), ctr(1)) * 180.0_rl / pi
            dep = 400.0_rl
            if (lat > -20.0_rl) dep = dep - 300.0_rl * exp(-((lon + 150.0_rl) / 8.0_rl)**2) ! the ridge
            if (lon > -62.0_rl .and. lon < -30.0_rl .and. lat > -55.0_rl .and. lat < 65.0_rl) dep = 0.0_rl
            if (lon > 115.0_rl .and. lon < 150.0_rl .and. lat > -30.0_rl .and. lat < 10.0_rl) dep = 0.0_rl
            if (lat < -72.0_rl) dep = 0.0_rl
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
    hFacW(1:sNx, 1:sNy, :, :, :) = min(hFacC(0:sNx-1, 1:sNy, :, :, :), hFacC(1:sNx, 1:sNy, :, :, :))
    hFacS(1:sNx, 1:sNy, :, :, :) = min(hFacC(1:sNx, 0:sNy-1, :, :, :), hFacC(1:sNx, 1:sNy, :, :, :))
  end subroutine ini_grid

  !> A barotropic divergence: a pair of sources drifting with time (zero on land), by the great-circle
  !> distance of the cell centre from their centres.
  subroutine rhs_2d(time, b)
    real(rl), intent(in) :: time
    real(rl), intent(out) :: b(1-OLx:sNx+OLx, 1-OLy:sNy+OLy, nSx, nSy)
    integer :: i, j, bi, bj
    real(rl) :: c1(3), c2(3)
    c1 = lonlat(-10.0_rl + 6.0_rl * time, 20.0_rl)
    c2 = lonlat(170.0_rl, -20.0_rl + 5.0_rl * time)
    b = 0.0_rl
    do bj = 1, nSy
      do bi = 1, nSx
        do j = 1, sNy
          do i = 1, sNx
            b(i, j, bi, bj) = maskInC(i, j, bi, bj) * (exp(-(arc(xC(:, i, j, bi, bj), c1) / 0.25_rl)**2) &
                              - exp(-(arc(xC(:, i, j, bi, bj), c2) / 0.3_rl)**2)) * rA(i, j, bi, bj)
          end do
        end do
      end do
    end do
  end subroutine rhs_2d

  !> A baroclinic divergence: a convective plume and a seiche, zero vertical sum in every column.
  subroutine rhs_3d(time, b)
    real(rl), intent(in) :: time
    real(rl), intent(out) :: b(1-OLx:sNx+OLx, 1-OLy:sNy+OLy, Nr, nSx, nSy)
    integer :: i, j, k, bi, bj
    real(rl) :: col, c1(3), lat, lon
    c1 = lonlat(60.0_rl + 4.0_rl * time, 10.0_rl)
    b = 0.0_rl
    do bj = 1, nSy
      do bi = 1, nSx
        do j = 1, sNy
          do i = 1, sNx
            lat = asin(xC(3, i, j, bi, bj))
            lon = atan2(xC(2, i, j, bi, bj), xC(1, i, j, bi, bj))
            do k = 1, Nr
              b(i, j, k, bi, bj) = maskC(i, j, k, bi, bj) * rA(i, j, bi, bj) * drF(k) &
                                   * (sin(0.7_rl * k + 0.1_rl * time) &
                                      * exp(-(arc(xC(:, i, j, bi, bj), c1) / 0.2_rl)**2) &
                                      + 0.3_rl * cos(2.0_rl * lon + 0.3_rl * k) * sin(3.0_rl * lat))
            end do
            col = sum(b(i, j, :, bi, bj))
            if (sum(maskC(i, j, :, bi, bj) * drF) > 0.0_rl) b(i, j, :, bi, bj) = b(i, j, :, bi, bj) &
              - col * maskC(i, j, :, bi, bj) * drF / sum(maskC(i, j, :, bi, bj) * drF)
          end do
        end do
      end do
    end do
  end subroutine rhs_3d

  !> The unit vector of longitude lon, latitude lat (degrees).
  function lonlat(lon, lat) result(p)
    real(rl), intent(in) :: lon, lat
    real(rl) :: p(3)
    real(rl) :: phi, lam
    phi = lat * pi / 180.0_rl
    lam = lon * pi / 180.0_rl
    p = [cos(phi) * cos(lam), cos(phi) * sin(lam), sin(phi)]
  end function lonlat

  !> Rank 0 writes the iteration counts and the final eta and phi_nh in the global order.
  subroutine write_result(eta, phi, its)
    real(rl), intent(in) :: eta(1-OLx:sNx+OLx, 1-OLy:sNy+OLy, nSx, nSy)
    real(rl), intent(in) :: phi(1-OLx:sNx+OLx, 1-OLy:sNy+OLy, Nr, nSx, nSy)
    integer, intent(in) :: its(:)
    real(rl), allocatable :: g2(:, :, :), g3(:, :, :, :), l2(:, :, :), l3(:, :, :, :)
    character(len=256) :: path
    integer :: u, bi, bj, f, i0, j0, e
    allocate(g2(N, N, 6), l2(N, N, 6), g3(N, N, Nr, 6), l3(N, N, Nr, 6))
    l2 = 0.0_rl
    l3 = 0.0_rl
    do bj = 1, nSy
      do bi = 1, nSx
        call tile_to_face(myRank * nSx + bi - 1 + nSx * (bj - 1), 0, 0, f, i0, j0)
        l2(i0 + 1:i0 + sNx, j0 + 1:j0 + sNy, f) = eta(1:sNx, 1:sNy, bi, bj)
        l3(i0 + 1:i0 + sNx, j0 + 1:j0 + sNy, :, f) = phi(1:sNx, 1:sNy, :, bi, bj)
      end do
    end do
    call MPI_Reduce(l2, g2, size(g2), MPI_DOUBLE_PRECISION, MPI_SUM, 0, MPI_COMM_WORLD, e)
    call MPI_Reduce(l3, g3, size(g3), MPI_DOUBLE_PRECISION, MPI_SUM, 0, MPI_COMM_WORLD, e)
    if (myRank /= 0) return
    path = 'mitgcm_cs.out'
    if (command_argument_count() >= 1) call get_command_argument(1, path)
    open(newunit=u, file=trim(path), status='replace', action='write')
    write(u, '(2i8)') size(its), size(g2) + size(g3)
    write(u, '(*(i6))') its
    write(u, '(es25.17)') g2
    write(u, '(es25.17)') g3
    close(u)
  end subroutine write_result
end program mitgcm_cs

!> mitgcm_style -- the non-hydrostatic pressure solve of an MITgcm-like ocean model (own solver version).
!>
!> One tile of sNx x sNy columns and Nr levels with an overlap (halo) of OLx x OLy points, arrays
!> (1-OLx:sNx+OLx, 1-OLy:sNy+OLy, Nr), k = 1 at the surface. The basin: a continent along the western
!> edge, an island, a shelf and a sloping bottom (dry columns and dry bottom cells, full cells); the tile
!> is periodic in x and has walls in y (EXCH_XYZ_RL). Every time step the divergence of a provisional
!> velocity is handed to CG3D, which solves the 3-D elliptic problem for the non-hydrostatic pressure
!> phi_nh exactly as MITgcm stores and solves it:
!>  - one coefficient per face aW3d, aS3d, aV3d and the diagonal aC3d, normalised by cg3dNorm; the
!>    operator is NEGATIVE definite (couplings >= 0, aC3d < 0, with the free-surface term at k = 1);
!>  - preconditioner: the LU factors zML, zMC, zMU of every column's tridiagonal part (INI_CG3D);
!>  - the RHS is normalised by its maximum, the stopping test is absolute: err_sq = sum r^2 over the
!>    interior < cg3dTolerance^2, checked before the first iteration; reaching cg3dMaxIters is a normal
!>    outcome; phi_nh from the previous step is the first guess.
!>
!> Usage: mitgcm_style [output-file [sNx sNy Nr [nTimeSteps]]]   (the output file holds the final phi_nh
!> and the iteration counts, for the comparison test; the defaults are 32 24 15 10)
module size_h
  implicit none
  integer, parameter :: rl = kind(1.0d0)                     ! _RL
  integer, parameter :: OLx = 2, OLy = 2
  integer :: sNx = 32, sNy = 24, Nr = 15     ! compiled in by MITgcm; here set before ini_grid
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

!> CG3D.h: the operator, the preconditioner factors, the solver's work arrays and parameters.
module cg3d_h
  use size_h
  implicit none
  real(rl), allocatable, dimension(:, :, :) :: aW3d, aS3d, aV3d, aC3d, zMC, zML, zMU  ! (1-OLx:sNx+OLx,
  real(rl), allocatable, dimension(:, :, :) :: cg3d_r, cg3d_s, cg3d_q                  !  1-OLy:sNy+OLy, Nr)
  real(rl) :: cg3dNorm, cg3dTolerance
  real(rl), parameter :: cg3dTargetResidual = 1.0e-10_rl      ! data, &PARM02 (normalised RHS)
  integer, parameter :: cg3dMaxIters = 300
end module cg3d_h

module exch_mod
  use size_h
  implicit none
contains
  !> Fill the overlaps of a 3-D field: periodic in x, walls in y (zero outside the tile).
  subroutine exch_xyz_rl(fld)
    real(rl), intent(inout) :: fld(1-OLx:sNx+OLx, 1-OLy:sNy+OLy, Nr)
    fld(1-OLx:0, 1:sNy, :) = fld(sNx-OLx+1:sNx, 1:sNy, :)
    fld(sNx+1:sNx+OLx, 1:sNy, :) = fld(1:OLx, 1:sNy, :)
    fld(:, 1-OLy:0, :) = 0.0_rl
    fld(:, sNy+1:sNy+OLy, :) = 0.0_rl
  end subroutine exch_xyz_rl
end module exch_mod

module cg3d_mod
  use size_h
  use grid_h
  use cg3d_h
  use exch_mod
  implicit none
contains
  !> INI_CG3D: the Laplace operator times deltaTMom (aW3d: Ax/dX, aS3d: Ay/dY, aV3d: Ar/dR), the diagonal
  !> with the free-surface term, the normalisation, then the LU factors of the vertical tridiagonal part.
  subroutine ini_cg3d()
    integer :: i, j, k
    real(rl) :: myNorm
    allocate(aW3d, aS3d, aV3d, aC3d, zMC, zML, zMU, cg3d_r, cg3d_s, cg3d_q, mold=maskC)
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
    myNorm = 1.0_rl / max(maxval(abs(aW3d)), maxval(abs(aS3d)), maxval(abs(aV3d)))
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

    ! preconditioner: LU of the tridiagonal (aV3d(k), aC3d(k), aV3d(k+1)); identity on dry cells
    ! (aC3d = 0 there; wet cells have aC3d < 0)
    zMC = 1.0_rl
    zML = 0.0_rl
    zMU = 0.0_rl
    where (aC3d < 0.0_rl)
      zMC = aC3d
      zML = aV3d
    end where
    where (aC3d(:, :, 1:Nr-1) < 0.0_rl) zMU(:, :, 1:Nr-1) = aV3d(:, :, 2:Nr)
    zMC(:, :, 1) = 1.0_rl / zMC(:, :, 1)
    zMU(:, :, 1) = zMU(:, :, 1) * zMC(:, :, 1)
    do k = 2, Nr
      zMC(:, :, k) = 1.0_rl / (zMC(:, :, k) - zML(:, :, k) * zMU(:, :, k-1))
      zMU(:, :, k) = zMU(:, :, k) * zMC(:, :, k)
    end do
  end subroutine ini_cg3d

  !> CG3D: solve A x = b (b: cg3d_b, in: RHS, out: normalised RHS; x: cg3d_x, in: first guess, out:
  !> solution); numIters, in: the maximum, out: iterations used; residuals in normalised units.
  subroutine cg3d(cg3d_b, cg3d_x, firstResidual, lastResidual, numIters, myIter)
    real(rl), intent(inout) :: cg3d_b(1-OLx:sNx+OLx, 1-OLy:sNy+OLy, Nr)
    real(rl), intent(inout) :: cg3d_x(1-OLx:sNx+OLx, 1-OLy:sNy+OLy, Nr)
    real(rl), intent(out) :: firstResidual, lastResidual
    integer, intent(inout) :: numIters
    integer, intent(in) :: myIter
    real(rl) :: rhsMax, rhsNorm, err_sq, eta_qrN, eta_qrNM1, cgBeta, alpha
    integer :: it3d, actualIts, k

    ! normalise the RHS (dry cells: b = 0) and the first guess
    cg3d_b = cg3d_b * cg3dNorm * maskC
    rhsMax = maxval(abs(cg3d_b(1:sNx, 1:sNy, :)))
    rhsNorm = 1.0_rl
    if (rhsMax > 0.0_rl) rhsNorm = 1.0_rl / rhsMax
    cg3d_b = cg3d_b * rhsNorm
    cg3d_x = cg3d_x * rhsNorm
    call exch_xyz_rl(cg3d_x)

    ! initial residual
    call cg3d_apply(cg3d_x, cg3d_q)
    cg3d_r = 0.0_rl
    cg3d_r(1:sNx, 1:sNy, :) = cg3d_b(1:sNx, 1:sNy, :) - cg3d_q(1:sNx, 1:sNy, :)
    err_sq = sum(cg3d_r(1:sNx, 1:sNy, :)**2)
    firstResidual = sqrt(err_sq)
    cg3d_s = 0.0_rl
    eta_qrNM1 = 1.0_rl
    actualIts = 0

    do it3d = 1, numIters
      if (err_sq < cg3dTolerance**2) exit
      ! q = M^-1 r: forward and back substitution over k, all columns of a level at once
      cg3d_q(1:sNx, 1:sNy, 1) = zMC(1:sNx, 1:sNy, 1) * cg3d_r(1:sNx, 1:sNy, 1)
      do k = 2, Nr
        cg3d_q(1:sNx, 1:sNy, k) = zMC(1:sNx, 1:sNy, k) &
            * (cg3d_r(1:sNx, 1:sNy, k) - zML(1:sNx, 1:sNy, k) * cg3d_q(1:sNx, 1:sNy, k-1))
      end do
      do k = Nr - 1, 1, -1
        cg3d_q(1:sNx, 1:sNy, k) = cg3d_q(1:sNx, 1:sNy, k) &
            - zMU(1:sNx, 1:sNy, k) * cg3d_q(1:sNx, 1:sNy, k+1)
      end do
      eta_qrN = sum(cg3d_q(1:sNx, 1:sNy, :) * cg3d_r(1:sNx, 1:sNy, :))
      cgBeta = eta_qrN / eta_qrNM1
      eta_qrNM1 = eta_qrN
      ! conjugate direction s = q + beta s, then q = A s
      cg3d_s(1:sNx, 1:sNy, :) = cg3d_q(1:sNx, 1:sNy, :) + cgBeta * cg3d_s(1:sNx, 1:sNy, :)
      call exch_xyz_rl(cg3d_s)
      call cg3d_apply(cg3d_s, cg3d_q)
      alpha = eta_qrN / sum(cg3d_s(1:sNx, 1:sNy, :) * cg3d_q(1:sNx, 1:sNy, :))
      ! update solution and residual
      cg3d_x(1:sNx, 1:sNy, :) = cg3d_x(1:sNx, 1:sNy, :) + alpha * cg3d_s(1:sNx, 1:sNy, :)
      cg3d_r(1:sNx, 1:sNy, :) = cg3d_r(1:sNx, 1:sNy, :) - alpha * cg3d_q(1:sNx, 1:sNy, :)
      err_sq = sum(cg3d_r(1:sNx, 1:sNy, :)**2)
      actualIts = it3d
    end do
    if (err_sq >= cg3dTolerance**2) write(*, '(a,i4,a,i5,a)') ' cg3d: iter', myIter, &
      ': not converged in', numIters, ' iterations'

    ! un-normalise the answer
    cg3d_x(1:sNx, 1:sNy, :) = cg3d_x(1:sNx, 1:sNy, :) / rhsNorm
    lastResidual = sqrt(err_sq)
    numIters = actualIts
  end subroutine cg3d

  !> q = A s on the interior (s with valid overlaps; aV3d(k=1) and the missing aV3d(Nr+1) are zero).
  subroutine cg3d_apply(s, q)
    real(rl), intent(in) :: s(1-OLx:sNx+OLx, 1-OLy:sNy+OLy, Nr)
    real(rl), intent(out) :: q(1-OLx:sNx+OLx, 1-OLy:sNy+OLy, Nr)
    integer :: i, j, k, km1, kp1
    real(rl) :: maskM1, maskP1
    q = 0.0_rl
    do k = 1, Nr
      km1 = max(k - 1, 1)
      kp1 = min(k + 1, Nr)
      maskM1 = merge(0.0_rl, 1.0_rl, k == 1)
      maskP1 = merge(0.0_rl, 1.0_rl, k == Nr)
      do j = 1, sNy
        do i = 1, sNx
          q(i, j, k) = aW3d(i, j, k) * s(i-1, j, k) + aW3d(i+1, j, k) * s(i+1, j, k) &
                     + aS3d(i, j, k) * s(i, j-1, k) + aS3d(i, j+1, k) * s(i, j+1, k) &
                     + aV3d(i, j, k) * s(i, j, km1) * maskM1 &
                     + aV3d(i, j, kp1) * s(i, j, kp1) * maskP1 &
                     + aC3d(i, j, k) * s(i, j, k)
        end do
      end do
    end do
  end subroutine cg3d_apply
end module cg3d_mod

program mitgcm_style
  use size_h
  use grid_h
  use cg3d_h
  use exch_mod
  use cg3d_mod
  use legacy_bench
  implicit none
  character(len=*), parameter :: timing_label = 'own-CG3D'
  real(rl), parameter :: pi = 3.14159265358979323846_rl
  real(rl), allocatable, dimension(:, :, :) :: phi_nh, cg3d_b
  real(rl), allocatable :: tsolve(:)
  real(rl) :: firstResidual, lastResidual, t0
  integer :: myIter, numIters, nTimeSteps
  integer, allocatable :: iters(:)

  sNx = int_arg(2, sNx)
  sNy = int_arg(3, sNy)
  Nr = int_arg(4, Nr)
  nTimeSteps = int_arg(5, 10)
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
    write(*, '(a,i4,a,i5,a,2es12.4)') ' cg3d: iter', myIter, ': numIters', numIters, &
                                      ', first and last residual', firstResidual, lastResidual
  end do
  call write_result(phi_nh(1:sNx, 1:sNy, :), iters)
  call report_timing(trim(timing_label), grid_label(), tsolve, iters)
  deallocate(phi_nh, cg3d_b, iters, tsolve)

contains
  !> "sNx x sNy x Nr", for the timing line.
  function grid_label() result(str)
    character(len=:), allocatable :: str
    character(len=64) :: buf
    write(buf, '(i0,a,i0,a,i0)') sNx, 'x', sNy, 'x', Nr
    str = trim(buf)
  end function grid_label

  !> The basin: a continent at i = 1 (it also closes the periodic boundary), an island, a shelf rising
  !> towards the continent and a ridge; full cells (hFacC 0 or 1), faces open where both cells are wet.
  subroutine ini_grid()
    real(rl) :: depth, rF
    integer :: i, j, k
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
      do i = 2, sNx
        depth = 60.0_rl + 210.0_rl * min(1.0_rl, (i - 2) / 10.0_rl) &
              - 120.0_rl * exp(-((j - 8.0_rl) / 3.0_rl)**2) * merge(1.0_rl, 0.0_rl, i > 16)
        if ((i - 22)**2 + (j - 16)**2 <= 5) depth = 0.0_rl              ! island
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
          x = (i - 1) * dxC
          y = (j - 1) * dyC
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

  !> Iteration counts and the final phi_nh (interior), for the comparison with the other version.
  subroutine write_result(phi, iters)
    real(rl), intent(in) :: phi(:, :, :)
    integer, intent(in) :: iters(:)
    character(len=256) :: path
    integer :: u
    path = 'mitgcm_style.out'
    if (command_argument_count() >= 1) call get_command_argument(1, path)
    open(newunit=u, file=trim(path), status='replace', action='write')
    write(u, '(2i8)') size(iters), size(phi)
    write(u, '(*(i6))') iters
    write(u, '(es25.17)') phi
    close(u)
  end subroutine write_result
end program mitgcm_style

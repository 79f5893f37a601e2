!> t842-grid-f: tiled grids through pkrylov_mod in MITgcm's layout: 2 x 2 tiles of one process, arrays
!! (1-OLx:sNx+OLx, 1-OLy:sNy+OLy, nSx, nSy) for the 2-D free surface and (..., Nr, nSx, nSy) for the 3-D
!! pressure, a doubly periodic basin with an island (logical mask), halos filled with NaN (never read).
!! Checks against references written here: a hand-written product of the global periodic operator
!! (the solves' residuals recomputed with it, the approximate inverse's z recomputed with MITgcm's
!! formula), the same problem on one tile (solutions agree), real(4) coefficients, an update of the
!! coefficients between solves, the halos of x untouched, and bad input (sizes, contiguity, topology,
!! the preconditioner factor) with their codes.
program t842_grid_f
    use, intrinsic :: iso_c_binding, only: c_double, c_float, c_int32_t
    use, intrinsic :: ieee_arithmetic, only: ieee_value, ieee_quiet_nan, ieee_is_nan
    use pkrylov_mod
    use, intrinsic :: iso_fortran_env, only: error_unit
    implicit none
    integer(c_int32_t), parameter :: sNx = 8, sNy = 6, OLx = 2, OLy = 2, nSx = 2, nSy = 2, Nr = 4
    integer(c_int32_t), parameter :: NX = sNx*nSx, NY = sNy*nSy
    real(c_double), dimension(NX, NY) :: gW, gS, gC, gb, gx, gr
    logical :: gwet(NX, NY)
    real(c_double), dimension(1 - OLx:sNx + OLx, 1 - OLy:sNy + OLy, nSx, nSy) :: aW2d, aS2d, aC2d, b2d, x2d
    logical, dimension(1 - OLx:sNx + OLx, 1 - OLy:sNy + OLy, nSx, nSy) :: wet2d
    real(c_float), dimension(1 - OLx:sNx + OLx, 1 - OLy:sNy + OLy, nSx, nSy) :: aW4, aS4, aC4
    real(c_double), dimension(1 - OLx:sNx + OLx, 1 - OLy:sNy + OLy, Nr, nSx, nSy) :: aW3d, aS3d, aV3d, aC3d, b3d, x3d
    real(c_double), dimension(NX, NY, Nr) :: g3W, g3S, g3V, g3C, g3b, g3x
    real(c_double), dimension(1 - OLx:NX + OLx, 1 - OLy:NY + OLy) :: oW, oS, oC, ob, ox
    type(pk_context) :: ctx
    type(pk_grid) :: grid, grid1, bad
    type(pk_operator) :: A2, A1, A3, A4, Abad
    type(pk_precond) :: M2, M1, M3, Mbad
    type(pk_solver) :: s2, s1, s3, s4
    type(pkrylov_result) :: res
    integer(c_int32_t) :: conn(3, 4, 4), tiles(4)
    real(c_double) :: nan, rel
    integer :: ierr, i, j, k, bi, bj, nfail = 0

    nan = ieee_value(1.0_c_double, ieee_quiet_nan)
    ! the global basin: couplings >= 0, negative definite (MITgcm's sign), an island of 3 x 2 dry columns
    gwet = .true.
    gwet(5:7, 4:5) = .false.
    do j = 1, NY
        do i = 1, NX
            gW(i, j) = 1 + 0.3_c_double*sin(0.7_c_double*i + 0.2_c_double*j)
            gS(i, j) = 1 + 0.3_c_double*cos(0.3_c_double*i - 0.5_c_double*j)
        end do
    end do
    call make_diag(gW, gS, gwet, gC)
    do j = 1, NY
        do i = 1, NX
            gb(i, j) = merge(sin(0.9_c_double*i)*cos(0.4_c_double*j), 0.0_c_double, gwet(i, j))
        end do
    end do
    call tiles_2d(gW, aW2d)
    call tiles_2d(gS, aS2d)
    call tiles_2d(gC, aC2d)
    call tiles_2d(gb, b2d)
    x2d = nan
    x2d(1:sNx, 1:sNy, :, :) = 0
    wet2d = .false.
    do bj = 1, nSy
        do bi = 1, nSx
            wet2d(1:sNx, 1:sNy, bi, bj) = gwet((bi - 1)*sNx + 1:bi*sNx, (bj - 1)*sNy + 1:bj*sNy)
        end do
    end do

    call pk_context_create(ctx, PKRYLOV_BACKEND_CPU)
    ! the 2 x 2 tiles of this process: MITgcm's bi fastest
    call pk_grid_create_rect(ctx, grid, sNx, sNy, OLx, OLy, nSx, nSy, PKRYLOV_PERIODIC_XY, 1, 1, nSx, nSy)
    call pk_operator_create_grid_5pt(grid, A2, aW2d, aS2d, aC2d, mask=wet2d)
    call pk_precond_create_ainv(ctx, M2, A2, 0.51_c_double)
    call pk_solver_create(ctx, s2, PKRYLOV_SOLVER_CG, A2, M2)
    call pk_solver_set_tolerances(s2, 1e-12_c_double, 0.0_c_double)
    call pk_solver_solve_grid(s2, b2d, x2d)
    call pk_solver_get_result(s2, res)
    call expect(res%converged == 1, '2-D CG with the approximate inverse converges')
    call untile_2d(x2d, gx)
    call periodic_apply(gW, gS, gC, gwet, gx, gr)
    gr = merge(gb - gr, 0.0_c_double, gwet)
    rel = sqrt(sum(gr**2))/sqrt(sum(gb**2))
    call expect(rel < 1e-11_c_double, '2-D residual recomputed by hand: '//rstr(rel))
    call expect(all(ieee_is_nan(x2d(1 - OLx:0, :, :, :))) .and. all(ieee_is_nan(x2d(sNx + 1:, :, :, :))) .and. &
                all(ieee_is_nan(x2d(:, 1 - OLy:0, :, :))) .and. all(ieee_is_nan(x2d(:, sNy + 1:, :, :))), &
                'the halos of x are not written')

    ! the same basin on one tile (one halo'd array): the same solution
    oW = nan; oS = nan; oC = nan; ob = nan; ox = nan
    oW(1:NX, 1:NY) = gW; oS(1:NX, 1:NY) = gS; oC(1:NX, 1:NY) = gC; ob(1:NX, 1:NY) = gb; ox(1:NX, 1:NY) = 0
    call pk_grid_create_rect(ctx, grid1, NX, NY, OLx, OLy, 1, 1, PKRYLOV_PERIODIC_XY, 1, 1, 1, 1)
    call pk_operator_create_grid_5pt(grid1, A1, oW, oS, oC, mask=pad_wet(gwet))
    call pk_precond_create_ainv(ctx, M1, A1, 0.51_c_double)
    call pk_solver_create(ctx, s1, PKRYLOV_SOLVER_CG, A1, M1)
    call pk_solver_set_tolerances(s1, 1e-12_c_double, 0.0_c_double)
    call pk_solver_solve_grid(s1, ob, ox)
    call expect(maxval(abs(ox(1:NX, 1:NY) - gx)) < 1e-9_c_double*maxval(abs(gx)), &
                'one tile and 2 x 2 tiles give the same solution')

    ! real(4) coefficients: the operator of their real(8) values
    aW4 = real(aW2d, c_float); aS4 = real(aS2d, c_float); aC4 = real(aC2d, c_float)
    call pk_operator_create_grid_5pt(grid, A4, aW4, aS4, aC4, mask=wet2d)
    call pk_solver_create(ctx, s4, PKRYLOV_SOLVER_CG, A4)
    call pk_solver_set_tolerances(s4, 1e-12_c_double, 0.0_c_double)
    x2d(1:sNx, 1:sNy, :, :) = 0
    call pk_solver_solve_grid(s4, b2d, x2d)
    call untile_2d(x2d, gx)
    call periodic_apply(real(real(gW, c_float), c_double), real(real(gS, c_float), c_double), &
                        real(real(gC, c_float), c_double), gwet, gx, gr)
    gr = merge(gb - gr, 0.0_c_double, gwet)
    rel = sqrt(sum(gr**2))/sqrt(sum(gb**2))
    call expect(rel < 1e-11_c_double, 'real(4) coefficients: residual '//rstr(rel))

    ! a nonlinear free surface: new coefficients, the preconditioner rebuilt, solve again
    gC = gC*1.1_c_double - 0.05_c_double
    call tiles_2d(gC, aC2d)
    call pk_operator_update_grid_5pt(A2, aW2d, aS2d, aC2d)
    call pk_precond_update(M2)
    x2d(1:sNx, 1:sNy, :, :) = 0
    call pk_solver_solve_grid(s2, b2d, x2d)
    call untile_2d(x2d, gx)
    call periodic_apply(gW, gS, gC, gwet, gx, gr)
    gr = merge(gb - gr, 0.0_c_double, gwet)
    rel = sqrt(sum(gr**2))/sqrt(sum(gb**2))
    call expect(rel < 1e-11_c_double, 'after the update: residual '//rstr(rel))

    ! 3-D: the column stencil on the same tiles, the column preconditioner
    do k = 1, Nr
        g3W(:, :, k) = gW*(1 + 0.1_c_double*k)
        g3S(:, :, k) = gS*(1 + 0.05_c_double*k)
        g3V(:, :, k) = merge(0.0_c_double, 40.0_c_double + k, k == 1)
        g3b(:, :, k) = gb*cos(0.3_c_double*k)
    end do
    do k = 1, Nr
        call make_diag(g3W(:, :, k), g3S(:, :, k), gwet, g3C(:, :, k))
        g3C(:, :, k) = g3C(:, :, k) - merge(g3V(:, :, k), 0.0_c_double, k > 1) - &
                       merge(g3V(:, :, min(k + 1, Nr)), 0.0_c_double, k < Nr)
        call tiles_3d(g3W(:, :, k), aW3d, k)
        call tiles_3d(g3S(:, :, k), aS3d, k)
        call tiles_3d(g3V(:, :, k), aV3d, k)
        call tiles_3d(g3C(:, :, k), aC3d, k)
        call tiles_3d(g3b(:, :, k), b3d, k)
    end do
    x3d = nan
    x3d(1:sNx, 1:sNy, :, :, :) = 0
    call pk_operator_create_grid_stencil(grid, A3, Nr, aW3d, aS3d, aV3d, aC3d, mask=wet3d())
    call pk_precond_create(ctx, M3, A3, PKRYLOV_PRECOND_COLUMN)
    call pk_solver_create(ctx, s3, PKRYLOV_SOLVER_PIPECG, A3, M3)
    call pk_solver_set_tolerances(s3, 1e-11_c_double, 0.0_c_double)
    call pk_solver_solve_grid(s3, b3d, x3d)
    call pk_solver_get_result(s3, res)
    call expect(res%converged == 1, '3-D pipelined CG with the column preconditioner converges')
    do k = 1, Nr
        call untile_3d(x3d, k, g3x(:, :, k))
    end do
    rel = residual_3d()
    call expect(rel < 1e-9_c_double, '3-D residual recomputed by hand: '//rstr(rel))

    ! bad input
    call pk_operator_create_grid_5pt(grid, Abad, aW2d(:, :, 1, :), aS2d, aC2d, ierr=ierr)
    call expect(ierr == PKRYLOV_ERR_SIZE_MISMATCH, 'an array of one tile less: SIZE_MISMATCH')
    call pk_operator_create_grid_5pt(grid, Abad, aW3d(:, :, 1, :, :), aS2d, aC2d, ierr=ierr)
    call expect(ierr == PKRYLOV_ERR_INVALID_VALUE, 'a non-contiguous array: INVALID_VALUE')
    call pk_precond_create_ainv(ctx, Mbad, A2, 0.0_c_double, ierr)
    call expect(ierr == PKRYLOV_ERR_INVALID_VALUE, 'offdiag = 0: INVALID_VALUE')
    call pk_precond_create_ainv(ctx, Mbad, A3, 0.51_c_double, ierr)
    call expect(ierr == PKRYLOV_ERR_UNSUPPORTED, 'the approximate inverse of a 3-D operator: UNSUPPORTED')
    call pk_grid_connect_rect(2, 2, PKRYLOV_PERIODIC_XY, conn)
    conn(1, 2, 1) = 4 ! tile 1's east edge meets tile 4, which does not meet it back
    tiles = [1, 2, 3, 4]
    call pk_grid_create(ctx, bad, sNx, sNy, OLx, OLy, conn, tiles, ierr)
    call expect(ierr == PKRYLOV_ERR_TOPOLOGY, 'an asymmetric table: TOPOLOGY')
    call pk_grid_connect_rect(2, 2, PKRYLOV_PERIODIC_XY, conn)
    call pk_grid_create(ctx, bad, sNx, sNy, 0, OLy, conn, tiles, ierr)
    call expect(ierr == PKRYLOV_ERR_INVALID_SIZE, 'a halo width of 0: INVALID_SIZE')
    call pk_grid_create(ctx, bad, sNx, sNy, OLx, OLy, conn, tiles(1:3), ierr)
    call expect(ierr == PKRYLOV_ERR_TOPOLOGY, 'a tile of no rank: TOPOLOGY')
    call pk_solver_solve_grid(s2, b2d, x3d, ierr)
    call expect(ierr == PKRYLOV_ERR_SIZE_MISMATCH, 'b and x of different sizes: SIZE_MISMATCH')

    call pk_solver_destroy(s1); call pk_solver_destroy(s2); call pk_solver_destroy(s3); call pk_solver_destroy(s4)
    call pk_precond_destroy(M1); call pk_precond_destroy(M2); call pk_precond_destroy(M3)
    call pk_operator_destroy(A1); call pk_operator_destroy(A2); call pk_operator_destroy(A3)
    call pk_operator_destroy(A4)
    call pk_grid_destroy(grid); call pk_grid_destroy(grid1)
    call pk_context_destroy(ctx)
    call finish('t842-grid-f')

contains

    subroutine expect(cond, what)
        logical, intent(in) :: cond
        character(len=*), intent(in) :: what
        if (.not. cond) then
            write (error_unit, '(a)') 't842-grid-f: FAILED: '//what
            nfail = nfail + 1
        end if
    end subroutine expect

    subroutine finish(name)
        character(len=*), intent(in) :: name
        if (nfail > 0) error stop 1
        print '(a)', name//': ok'
    end subroutine finish

    !> The diagonal: minus the couplings of the existing wet faces and a free-surface term (periodic).
    subroutine make_diag(w, s, wet, c)
        real(c_double), intent(in) :: w(:, :), s(:, :)
        logical, intent(in) :: wet(:, :)
        real(c_double), intent(out) :: c(:, :)
        integer :: ii, jj, ie, jn, iw, js
        do jj = 1, size(w, 2)
            do ii = 1, size(w, 1)
                iw = modulo(ii - 2, size(w, 1)) + 1; ie = modulo(ii, size(w, 1)) + 1
                js = modulo(jj - 2, size(w, 2)) + 1; jn = modulo(jj, size(w, 2)) + 1
                c(ii, jj) = -(merge(w(ii, jj), 0.0_c_double, wet(iw, jj)) + merge(w(ie, jj), 0.0_c_double, wet(ie, jj)) &
                              + merge(s(ii, jj), 0.0_c_double, wet(ii, js)) + merge(s(ii, jn), 0.0_c_double, &
                                                                                       wet(ii, jn))) - 0.2_c_double
            end do
        end do
    end subroutine make_diag

    !> y = A x of the global doubly periodic 5-point operator, couplings to and from dry cells dropped.
    subroutine periodic_apply(w, s, c, wet, x, y)
        real(c_double), intent(in) :: w(:, :), s(:, :), c(:, :), x(:, :)
        logical, intent(in) :: wet(:, :)
        real(c_double), intent(out) :: y(:, :)
        integer :: ii, jj, ie, jn, iw, js
        do jj = 1, size(w, 2)
            do ii = 1, size(w, 1)
                y(ii, jj) = 0
                if (.not. wet(ii, jj)) cycle
                iw = modulo(ii - 2, size(w, 1)) + 1; ie = modulo(ii, size(w, 1)) + 1
                js = modulo(jj - 2, size(w, 2)) + 1; jn = modulo(jj, size(w, 2)) + 1
                y(ii, jj) = c(ii, jj)*x(ii, jj)
                if (wet(iw, jj)) y(ii, jj) = y(ii, jj) + w(ii, jj)*x(iw, jj)
                if (wet(ie, jj)) y(ii, jj) = y(ii, jj) + w(ie, jj)*x(ie, jj)
                if (wet(ii, js)) y(ii, jj) = y(ii, jj) + s(ii, jj)*x(ii, js)
                if (wet(ii, jn)) y(ii, jj) = y(ii, jj) + s(ii, jn)*x(ii, jn)
            end do
        end do
    end subroutine periodic_apply

    !> The relative residual of the 3-D solve, by hand (periodic 5-point per level plus the vertical).
    function residual_3d() result(r)
        real(c_double) :: r, y(NX, NY), num, den
        integer :: kk
        num = 0
        den = 0
        do kk = 1, Nr
            call periodic_apply(g3W(:, :, kk), g3S(:, :, kk), g3C(:, :, kk), gwet, g3x(:, :, kk), y)
            if (kk > 1) y = y + merge(g3V(:, :, kk)*g3x(:, :, kk - 1), 0.0_c_double, gwet)
            if (kk < Nr) y = y + merge(g3V(:, :, kk + 1)*g3x(:, :, kk + 1), 0.0_c_double, gwet)
            num = num + sum(merge(g3b(:, :, kk) - y, 0.0_c_double, gwet)**2)
            den = den + sum(merge(g3b(:, :, kk), 0.0_c_double, gwet)**2)
        end do
        r = sqrt(num/den)
    end function residual_3d

    subroutine tiles_2d(g, t)
        real(c_double), intent(in) :: g(:, :)
        real(c_double), intent(out) :: t(1 - OLx:, 1 - OLy:, :, :)
        integer :: ti, tj
        t = nan
        do tj = 1, nSy
            do ti = 1, nSx
                t(1:sNx, 1:sNy, ti, tj) = g((ti - 1)*sNx + 1:ti*sNx, (tj - 1)*sNy + 1:tj*sNy)
            end do
        end do
    end subroutine tiles_2d

    subroutine untile_2d(t, g)
        real(c_double), intent(in) :: t(1 - OLx:, 1 - OLy:, :, :)
        real(c_double), intent(out) :: g(:, :)
        integer :: ti, tj
        do tj = 1, nSy
            do ti = 1, nSx
                g((ti - 1)*sNx + 1:ti*sNx, (tj - 1)*sNy + 1:tj*sNy) = t(1:sNx, 1:sNy, ti, tj)
            end do
        end do
    end subroutine untile_2d

    subroutine tiles_3d(g, t, kk)
        real(c_double), intent(in) :: g(:, :)
        real(c_double), intent(inout) :: t(1 - OLx:, 1 - OLy:, :, :, :)
        integer, intent(in) :: kk
        integer :: ti, tj
        t(:, :, kk, :, :) = nan
        do tj = 1, nSy
            do ti = 1, nSx
                t(1:sNx, 1:sNy, kk, ti, tj) = g((ti - 1)*sNx + 1:ti*sNx, (tj - 1)*sNy + 1:tj*sNy)
            end do
        end do
    end subroutine tiles_3d

    subroutine untile_3d(t, kk, g)
        real(c_double), intent(in) :: t(1 - OLx:, 1 - OLy:, :, :, :)
        integer, intent(in) :: kk
        real(c_double), intent(out) :: g(:, :)
        integer :: ti, tj
        do tj = 1, nSy
            do ti = 1, nSx
                g((ti - 1)*sNx + 1:ti*sNx, (tj - 1)*sNy + 1:tj*sNy) = t(1:sNx, 1:sNy, kk, ti, tj)
            end do
        end do
    end subroutine untile_3d

    function wet3d() result(m)
        logical :: m(1 - OLx:sNx + OLx, 1 - OLy:sNy + OLy, Nr, nSx, nSy)
        integer :: kk
        do kk = 1, Nr
            m(:, :, kk, :, :) = wet2d
        end do
    end function wet3d

    function pad_wet(w) result(m)
        logical, intent(in) :: w(:, :)
        logical :: m(1 - OLx:NX + OLx, 1 - OLy:NY + OLy)
        m = .false.
        m(1:NX, 1:NY) = w
    end function pad_wet

    function rstr(v) result(str)
        real(c_double), intent(in) :: v
        character(len=16) :: str
        write (str, '(es12.4)') v
    end function rstr
end program t842_grid_f

!> t940: distributed solves from Fortran (`use mpi`), run under mpirun with 1 to 4 ranks.
!! - pk_context_set_comm with MPI_COMM_WORLD and with a communicator from MPI_Comm_split (integer handles);
!!   pk_context_get_rank_info against MPI_Comm_rank/size; a second pk_context_set_comm is refused;
!! - the distributed thin shell (pk_operator_create_thinshell_dist): CG with the column preconditioner
!!   takes the single-rank solve's iterations, and the gathered solution agrees with it to 1e-10; in
!!   reproducible mode the gathered solution equals the single-rank reproducible one bitwise;
!! - a distributed CSR (pk_operator_create_csr_dist, Fortran numbering, this rank's rows of a 1-D
!!   Laplacian-plus-shift) solved with Jacobi CG against the single-rank CSR solve; pk_operator_scatter;
!! - pk_operator_create_stencil7_dist from tiles of global stencil arrays: its product equals the
!!   single-rank stencil's product of the global arrays bitwise.
!! Every rank makes every check (no early exit, so that no rank waits for another); the outcome is agreed
!! with MPI_Allreduce and a failure ends in error stop on every rank.
program t940_mpi_comm
    use, intrinsic :: iso_c_binding
    use mpi
    use pkrylov_mod
    implicit none
    integer :: rank, size, ierr, fails, allfails, sub, srank, ssize, color
    integer(c_int32_t) :: r4, s4, i0, nxl, j0, nyl, gnx, gny
    type(pk_context) :: ctx, c1, cs
    type(pk_operator) :: A, A1, Acd, Ast
    type(pk_precond) :: M, M1
    type(pk_solver) :: s, s1
    type(pkrylov_result) :: res, res1
    integer(c_int32_t), parameter :: NX = 16, NY = 12, NZ = 8
    real(c_double), allocatable :: bg(:), xg(:), x1(:), b(:), x(:), yc(:)
    real(c_double), allocatable :: aW(:, :, :), aS(:, :, :), aV(:, :, :), aC(:, :, :)
    integer(c_int64_t) :: n, ng, c, fr, nl
    integer :: rep

    call MPI_Init(ierr)
    call MPI_Comm_rank(MPI_COMM_WORLD, rank, ierr)
    call MPI_Comm_size(MPI_COMM_WORLD, size, ierr)
    fails = 0
    if (.not. pk_has_mpi()) then
        call MPI_Finalize(ierr)
        stop 77
    end if

    ! ---- communicators -----------------------------------------------------------------------
    call pk_context_create(ctx, PKRYLOV_BACKEND_CPU)
    call pk_context_set_comm(ctx, MPI_COMM_WORLD)
    call pk_context_get_rank_info(ctx, r4, s4)
    call expect(r4 == rank .and. s4 == size, 'rank info on MPI_COMM_WORLD')
    call pk_context_set_comm(ctx, MPI_COMM_WORLD, ierr)
    call expect(ierr == PKRYLOV_ERR_INVALID_STATE, 'a second communicator is refused')
    color = mod(rank, 2)
    call MPI_Comm_split(MPI_COMM_WORLD, color, rank, sub, ierr)
    call MPI_Comm_rank(sub, srank, ierr)
    call MPI_Comm_size(sub, ssize, ierr)
    call pk_context_create(cs, PKRYLOV_BACKEND_CPU)
    call pk_context_set_comm(cs, sub)
    call pk_context_get_rank_info(cs, r4, s4)
    call expect(r4 == srank .and. s4 == ssize, 'rank info on a split communicator')
    call pk_context_destroy(cs)
    call MPI_Comm_free(sub, ierr)

    ! ---- the distributed thin shell, default and reproducible mode ---------------------------
    ng = int(NX, c_int64_t) * NY * NZ
    allocate (bg(ng), xg(ng), x1(ng))
    do rep = 0, 1
        call pk_context_create(c1, PKRYLOV_BACKEND_CPU)
        call pk_context_set_reproducible(c1, rep == 1)
        call pk_operator_create_thinshell(c1, A1, NX, NY, NZ, nu=1.0_c_double)
        do c = 1, ng
            xg(c) = sin(0.01_c_double * real(c, c_double)) + 0.5_c_double
        end do
        call pk_operator_apply(A1, xg, bg)
        call pk_precond_create(c1, M1, A1, PKRYLOV_PRECOND_COLUMN)
        call pk_solver_create(c1, s1, PKRYLOV_SOLVER_CG, A1, M1)
        call pk_solver_set_tolerances(s1, 1e-12_c_double, 0.0_c_double)
        x1 = 0
        call pk_solver_solve(s1, bg, x1)
        call pk_solver_get_result(s1, res1)

        call pk_context_set_reproducible(ctx, rep == 1)
        call pk_operator_create_thinshell_dist(ctx, A, NX, NY, NZ, int(size, c_int32_t), 1_c_int32_t, &
                                               nu=1.0_c_double)
        call pk_operator_get_info(A, n=n)
        call pk_operator_get_dist_info(A, gnx=gnx, gny=gny, i0=i0, nxl=nxl, j0=j0, nyl=nyl)
        call expect(gnx == NX .and. gny == NY .and. n == int(nxl, c_int64_t) * nyl * NZ, 'dist info')
        allocate (b(n), x(n))
        call pk_operator_scatter(A, 0_c_int32_t, bg, b)
        call expect(all(b == block(bg)), 'scatter = the rank''s block')
        call pk_precond_create(ctx, M, A, PKRYLOV_PRECOND_COLUMN)
        call pk_solver_create(ctx, s, PKRYLOV_SOLVER_CG, A, M)
        call pk_solver_set_tolerances(s, 1e-12_c_double, 0.0_c_double)
        x = 0
        call pk_solver_solve(s, b, x)
        call pk_solver_get_result(s, res)
        call expect(res%converged == 1 .and. res%iterations == res1%iterations, 'thin shell: iterations')
        xg = 0
        call pk_operator_gather(A, 0_c_int32_t, x, xg)
        if (rank == 0) then
            if (rep == 0) then
                call expect(maxval(abs(xg - x1)) <= 1e-10_c_double * maxval(abs(x1)), &
                            'thin shell: solution within 1e-10 of one rank')
            else
                call expect(all(xg == x1), 'thin shell, reproducible: bitwise the single-rank solution')
            end if
        end if
        ! the column stencil from tiles of the thin shell's coefficients: the same product
        if (rep == 0) then
            allocate (aW(NX, NY, NZ), aS(NX, NY, NZ), aV(NX, NY, NZ), aC(NX, NY, NZ), yc(n))
            call pk_thinshell_stencil_coefficients(NX, NY, NZ, aW, aS, aV, aC, nu=1.0_c_double)
            call pk_operator_create_stencil7_dist(ctx, Acd, int(size, c_int32_t), 1_c_int32_t, nxl, nyl, NZ, &
                                                  aW(i0 + 1:i0 + nxl, j0 + 1:j0 + nyl, :), &
                                                  aS(i0 + 1:i0 + nxl, j0 + 1:j0 + nyl, :), &
                                                  aV(i0 + 1:i0 + nxl, j0 + 1:j0 + nyl, :), &
                                                  aC(i0 + 1:i0 + nxl, j0 + 1:j0 + nyl, :))
            call pk_operator_create_stencil7(c1, Ast, NX, NY, NZ, aW, aS, aV, aC)
            call pk_operator_apply(Ast, bg, xg) ! the single-rank product of the global arrays
            call pk_operator_apply(Acd, b, yc)
            call expect(all(yc == block(xg)), 'distributed stencil from tiles = the global stencil (bitwise)')
            call pk_operator_destroy(Ast)
            call pk_operator_destroy(Acd)
            deallocate (aW, aS, aV, aC, yc)
        end if
        call pk_solver_destroy(s)
        call pk_precond_destroy(M)
        call pk_operator_destroy(A)
        deallocate (b, x)
        call pk_solver_destroy(s1)
        call pk_precond_destroy(M1)
        call pk_operator_destroy(A1)
        call pk_context_destroy(c1)
    end do
    call pk_context_set_reproducible(ctx, .false.)

    ! ---- a distributed CSR, Fortran numbering -------------------------------------------------
    call csr_case()

    call pk_context_destroy(ctx)
    deallocate (bg, xg, x1)
    call MPI_Allreduce(fails, allfails, 1, MPI_INTEGER, MPI_SUM, MPI_COMM_WORLD, ierr)
    call MPI_Finalize(ierr)
    if (allfails > 0) error stop 't940: checks failed'

contains

    !> This rank's block (i0+1:i0+nxl, j0+1:j0+nyl, :) of a global (NX,NY,NZ) vector, as a vector.
    function block(g) result(l)
        real(c_double), intent(in) :: g(NX, NY, NZ)
        real(c_double), allocatable :: l(:)
        l = reshape(g(i0 + 1:i0 + nxl, j0 + 1:j0 + nyl, :), [int(nxl) * nyl * NZ])
    end function block

    subroutine expect(cond, what)
        logical, intent(in) :: cond
        character(len=*), intent(in) :: what
        if (.not. cond) then
            fails = fails + 1
            print '(a,i0,a,a)', 'rank ', rank, ': check failed: ', what
        end if
    end subroutine expect

    !> 1-D operator tridiag(-1, 2.5, -1) of size N: rank r's balanced rows, solved with Jacobi CG.
    subroutine csr_case()
        integer(c_int64_t), parameter :: NG1 = 1000
        integer(c_int64_t), allocatable :: rp(:), ci(:), grp(:), gci(:)
        real(c_double), allocatable :: v(:), gv(:), bb(:), xx(:), x11(:), bl(:), xl(:)
        integer(c_int64_t) :: r, p, f0, nloc
        type(pk_operator) :: B, B1
        type(pk_precond) :: J, J1
        type(pk_solver) :: t, t1
        type(pkrylov_result) :: q, q1
        ! the global matrix (1-based)
        allocate (grp(NG1 + 1), gci(3 * NG1), gv(3 * NG1), bb(NG1), xx(NG1), x11(NG1))
        p = 1
        do r = 1, NG1
            grp(r) = p
            if (r > 1) then
                gci(p) = r - 1; gv(p) = -1.0_c_double; p = p + 1
            end if
            gci(p) = r; gv(p) = 2.5_c_double; p = p + 1
            if (r < NG1) then
                gci(p) = r + 1; gv(p) = -1.0_c_double; p = p + 1
            end if
        end do
        grp(NG1 + 1) = p
        do r = 1, NG1
            bb(r) = cos(0.02_c_double * real(r, c_double))
        end do
        call pk_context_create(c1, PKRYLOV_BACKEND_CPU)
        call pk_operator_create_csr(c1, B1, NG1, grp, gci(1:p - 1), gv(1:p - 1), 1_c_int32_t)
        call pk_precond_create(c1, J1, B1, PKRYLOV_PRECOND_JACOBI)
        call pk_solver_create(c1, t1, PKRYLOV_SOLVER_CG, B1, J1)
        call pk_solver_set_tolerances(t1, 1e-12_c_double, 0.0_c_double)
        x11 = 0
        call pk_solver_solve(t1, bb, x11)
        call pk_solver_get_result(t1, q1)
        ! this rank's rows
        f0 = rank * (NG1 / size) + min(int(rank, c_int64_t), mod(NG1, int(size, c_int64_t)))
        nloc = NG1 / size
        if (rank < mod(NG1, int(size, c_int64_t))) nloc = nloc + 1
        allocate (rp(nloc + 1), bl(nloc), xl(nloc))
        rp = grp(f0 + 1:f0 + nloc + 1) - grp(f0 + 1) + 1
        ci = gci(grp(f0 + 1):grp(f0 + nloc + 1) - 1)
        v = gv(grp(f0 + 1):grp(f0 + nloc + 1) - 1)
        call pk_operator_create_csr_dist(ctx, B, NG1, f0 + 1, rp, ci, v, 1_c_int32_t)
        call pk_operator_get_row_block(B, n_global=n, first_row=fr, nlocal=nl)
        call expect(n == NG1 .and. fr == f0 .and. nl == nloc, 'row block')
        call pk_operator_scatter(B, int(size - 1, c_int32_t), bb, bl)
        call expect(all(bl == bb(f0 + 1:f0 + nloc)), 'CSR scatter')
        call pk_precond_create(ctx, J, B, PKRYLOV_PRECOND_JACOBI)
        call pk_solver_create(ctx, t, PKRYLOV_SOLVER_CG, B, J)
        call pk_solver_set_tolerances(t, 1e-12_c_double, 0.0_c_double)
        xl = 0
        call pk_solver_solve(t, bl, xl)
        call pk_solver_get_result(t, q)
        call expect(q%converged == 1 .and. q%iterations == q1%iterations, 'CSR: iterations')
        call expect(maxval(abs(xl - x11(f0 + 1:f0 + nloc))) <= 1e-10_c_double * maxval(abs(x11)), &
                    'CSR: solution within 1e-10 of one rank')
        call pk_solver_destroy(t)
        call pk_precond_destroy(J)
        call pk_operator_destroy(B)
        ! a wrong first row on the last rank: an error on every rank
        if (size > 1) then
            ! (the last rank starts one row late and passes one row less)
            if (rank == size - 1) then
                call pk_operator_create_csr_dist(ctx, B, NG1, f0 + 2, rp(1:nloc), ci, v, 1_c_int32_t, ierr)
            else
                call pk_operator_create_csr_dist(ctx, B, NG1, f0 + 1, rp, ci, v, 1_c_int32_t, ierr)
            end if
            call expect(ierr == PKRYLOV_ERR_SIZE_MISMATCH, 'a gap: PKRYLOV_ERR_SIZE_MISMATCH on every rank')
        end if
        call pk_solver_destroy(t1)
        call pk_precond_destroy(J1)
        call pk_operator_destroy(B1)
        call pk_context_destroy(c1)
        deallocate (rp, ci, v, grp, gci, gv, bb, xx, x11, bl, xl)
    end subroutine csr_case

end program t940_mpi_comm

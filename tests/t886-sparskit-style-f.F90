!> t886-sparskit-style-f: the two pkrylov versions of the SPARSKIT side-by-side example in docs/fortran.md
!! ("Migrating from SPARSKIT's ITSOL"), as written there: a CSR matrix in SPARSKIT's 1-based (a, ja, ia) form
!! and SPARSKIT's amux calling sequence (written here), CG without preconditioner to ||r|| <= 1e-8 ||rhs||
!! from a nonzero first guess in sol, at most 1000 iterations; (1) the direct solve with
!! pk_operator_create_csr(ctx, Aop, n, ia, ja, a, 1), (2) the handle reverse-communication loop with amux
!! answering the MATVEC requests. Checks: both converge, their residuals recomputed here with amux meet the
!! tolerance, both solutions match LAPACK dposv on the dense matrix to 1e-6 relative (condition number about
!! 1e2), the two take the same number of iterations; with the cap at 3 iterations both report
!! DIVERGED_MAX_ITERATIONS (SPARSKIT's ipar(1) = -1) after exactly 3.
program t886_sparskit_style_f
    use, intrinsic :: iso_c_binding, only: c_double, c_int32_t, c_int64_t
    use, intrinsic :: iso_fortran_env, only: error_unit
    use pkrylov_mod
    implicit none
    integer, parameter :: n = 50
    real(c_double) :: dense(n, n), xref(n), sol0(n)
    real(c_double), target :: rhs(n), sol(n), sol2(n)
    real(c_double), allocatable :: a(:)
    integer, allocatable :: ja(:), ia(:)
    type(pk_context) :: ctx, cpuctx
    type(pk_operator) :: Aop
    type(pk_solver) :: s
    type(pk_rci) :: r
    type(pkrylov_result) :: res, res2
    real(c_double), pointer :: vin(:), vout(:)
    integer(c_int32_t) :: req
    integer :: i, j, nnz, info
    external :: dposv

    ! an SPD matrix with couplings at distance 1 and 6, in SPARSKIT's CSR (1-based, sorted columns)
    dense = 0
    do i = 1, n
        dense(i, i) = 4 + real(i, c_double)/n
        if (i > 1) dense(i, i - 1) = -1
        if (i < n) dense(i, i + 1) = -1
        if (i > 6) dense(i, i - 6) = -0.7_c_double
        if (i + 6 <= n) dense(i, i + 6) = -0.7_c_double
    end do
    nnz = count(dense /= 0)
    allocate (a(nnz), ja(nnz), ia(n + 1))
    ia(1) = 1
    do i = 1, n
        ia(i + 1) = ia(i)
        do j = 1, n
            if (dense(i, j) /= 0) then
                a(ia(i + 1)) = dense(i, j)
                ja(ia(i + 1)) = j
                ia(i + 1) = ia(i + 1) + 1
            end if
        end do
    end do
    rhs = [(cos(0.3_c_double*i) + 0.2_c_double, i=1, n)]
    sol0 = [(0.1_c_double*sin(1.7_c_double*i), i=1, n)] ! a nonzero first guess
    xref = rhs
    call dposv('U', n, 1, dense, n, xref, n, info) ! (overwrites dense with its factor)
    call expect(info == 0, 'dposv')

    ! (1) the direct solve, as in docs/fortran.md
    sol = sol0
    call pk_context_create(ctx, PKRYLOV_BACKEND_AUTO)
    call pk_operator_create_csr(ctx, Aop, n, ia, ja, a, 1)
    call pk_solver_create(ctx, s, PKRYLOV_SOLVER_CG, Aop)
    call pk_solver_set_tolerances(s, 1.0d-8, 0.0d0)
    call pk_solver_set_max_iterations(s, 1000)
    call pk_solver_set_initial_guess_nonzero(s, .true.)
    call pk_solver_solve(s, rhs, sol)
    call pk_solver_get_result(s, res)
    if (res%converged /= 1) print *, 'cg: ', pk_reason_string(res%reason)
    call expect(res%converged == 1, 'direct solve converges')
    call expect(resnorm(sol) <= 1.01e-8_c_double*norm2(rhs), 'direct solve: residual recomputed with amux')
    call expect(norm2(sol - xref) <= 1e-6_c_double*norm2(xref), 'direct solve = dposv')

    ! (2) the handle reverse communication, as in docs/fortran.md
    sol2 = sol0
    call pk_context_create(cpuctx, PKRYLOV_BACKEND_CPU)
    call pk_rci_create(cpuctx, r, PKRYLOV_SOLVER_CG, int(n, c_int64_t), 0_c_int32_t, 0_c_int32_t)
    call pk_rci_set_tolerances(r, 1.0d-8, 0.0d0)
    call pk_rci_set_max_iterations(r, 1000)
    call pk_rci_start(r, rhs, sol2, 1_c_int32_t)
    do
        call pk_rci_step(r, req, vin, vout)
        if (req == PKRYLOV_RCI_DONE) exit
        if (req == PKRYLOV_RCI_MATVEC) call amux(n, vin, vout, a, ja, ia)
    end do
    call pk_rci_get_result(r, res2)
    call expect(res2%converged == 1, 'reverse communication converges')
    call expect(resnorm(sol2) <= 1.01e-8_c_double*norm2(rhs), 'reverse communication: residual (amux)')
    call expect(norm2(sol2 - xref) <= 1e-6_c_double*norm2(xref), 'reverse communication = dposv')
    call expect(res2%iterations == res%iterations, 'both take the same iterations')

    ! the iteration cap: SPARSKIT's ipar(1) = -1
    call pk_solver_set_max_iterations(s, 3)
    sol = sol0
    call pk_solver_solve(s, rhs, sol)
    call pk_solver_get_result(s, res)
    call expect(res%reason == PKRYLOV_DIVERGED_MAX_ITERATIONS .and. res%iterations == 3, &
                'direct solve, cap 3: DIVERGED_MAX_ITERATIONS after 3')
    call pk_rci_set_max_iterations(r, 3)
    sol2 = sol0
    call pk_rci_start(r, rhs, sol2, 1_c_int32_t)
    do
        call pk_rci_step(r, req, vin, vout)
        if (req == PKRYLOV_RCI_DONE) exit
        if (req == PKRYLOV_RCI_MATVEC) call amux(n, vin, vout, a, ja, ia)
    end do
    call pk_rci_get_result(r, res2)
    call expect(res2%reason == PKRYLOV_DIVERGED_MAX_ITERATIONS .and. res2%iterations == 3, &
                'reverse communication, cap 3: DIVERGED_MAX_ITERATIONS after 3')

    call pk_rci_destroy(r)
    call pk_context_destroy(cpuctx)
    call pk_solver_destroy(s)
    call pk_operator_destroy(Aop)
    call pk_context_destroy(ctx)
    deallocate (a, ja, ia)
    print '(a)', 't886-sparskit-style-f: ok'

contains

    !> SPARSKIT's amux: y = A x for the CSR matrix (a, ja, ia).
    subroutine amux(n, x, y, a, ja, ia)
        integer, intent(in) :: n, ja(*), ia(*)
        real(c_double), intent(in) :: x(*), a(*)
        real(c_double), intent(out) :: y(*)
        integer :: i, k
        do i = 1, n
            y(i) = 0
            do k = ia(i), ia(i + 1) - 1
                y(i) = y(i) + a(k)*x(ja(k))
            end do
        end do
    end subroutine amux

    function resnorm(x) result(rn)
        real(c_double), intent(in) :: x(n)
        real(c_double) :: rn, ax(n)
        call amux(n, x, ax, a, ja, ia)
        rn = norm2(rhs - ax)
    end function resnorm

    subroutine expect(cond, what)
        logical, intent(in) :: cond
        character(len=*), intent(in) :: what
        if (.not. cond) then
            write (error_unit, '(a)') 't886-sparskit-style-f: FAILED: '//what
            error stop 1
        end if
    end subroutine expect

end program t886_sparskit_style_f

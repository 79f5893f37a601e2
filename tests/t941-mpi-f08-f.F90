!> t941: the communicator from mpi_f08 (type(MPI_Comm)): pk_context_set_comm takes comm%MPI_VAL, the
!! Fortran handle inside it. Checks the rank info against MPI_Comm_rank/size on a split communicator and
!! a distributed thin-shell CG solve on it (the iterations of a single-rank solve). Run under mpirun with
!! 1 to 4 ranks; built only when the MPI library has mpi_f08.
program t941_mpi_f08
    use, intrinsic :: iso_c_binding
    use mpi_f08
    use pkrylov_mod
    implicit none
    type(MPI_Comm) :: sub
    integer :: rank, size, srank, ssize, fails, allfails
    integer(c_int32_t) :: r4, s4
    type(pk_context) :: ctx, c1
    type(pk_operator) :: A, A1
    type(pk_precond) :: M, M1
    type(pk_solver) :: s, s1
    type(pkrylov_result) :: res, res1
    integer(c_int32_t), parameter :: NX = 12, NY = 10, NZ = 6
    real(c_double), allocatable :: bg(:), xg(:), b(:), x(:)
    integer(c_int64_t) :: n

    call MPI_Init()
    call MPI_Comm_rank(MPI_COMM_WORLD, rank)
    call MPI_Comm_size(MPI_COMM_WORLD, size)
    fails = 0
    if (.not. pk_has_mpi()) then
        call MPI_Finalize()
        stop 77
    end if
    ! the upper half of the ranks (all of them on one rank)
    call MPI_Comm_split(MPI_COMM_WORLD, merge(1, 0, rank >= size / 2), rank, sub)
    call MPI_Comm_rank(sub, srank)
    call MPI_Comm_size(sub, ssize)
    call pk_context_create(ctx, PKRYLOV_BACKEND_CPU)
    call pk_context_set_comm(ctx, sub%MPI_VAL)
    call pk_context_get_rank_info(ctx, r4, s4)
    if (r4 /= srank .or. s4 /= ssize) call fail('rank info on the split communicator')

    allocate (bg(int(NX) * NY * NZ), xg(int(NX) * NY * NZ))
    call pk_context_create(c1, PKRYLOV_BACKEND_CPU)
    call pk_operator_create_thinshell(c1, A1, NX, NY, NZ, nu=1.0_c_double)
    bg = 1
    call pk_precond_create(c1, M1, A1, PKRYLOV_PRECOND_COLUMN)
    call pk_solver_create(c1, s1, PKRYLOV_SOLVER_CG, A1, M1)
    call pk_solver_set_tolerances(s1, 1e-10_c_double, 0.0_c_double)
    xg = 0
    call pk_solver_solve(s1, bg, xg)
    call pk_solver_get_result(s1, res1)

    call pk_operator_create_thinshell_dist(ctx, A, NX, NY, NZ, 1_c_int32_t, int(ssize, c_int32_t), &
                                           nu=1.0_c_double)
    call pk_operator_get_info(A, n=n)
    allocate (b(n), x(n))
    b = 1
    x = 0
    call pk_precond_create(ctx, M, A, PKRYLOV_PRECOND_COLUMN)
    call pk_solver_create(ctx, s, PKRYLOV_SOLVER_CG, A, M)
    call pk_solver_set_tolerances(s, 1e-10_c_double, 0.0_c_double)
    call pk_solver_solve(s, b, x)
    call pk_solver_get_result(s, res)
    if (res%converged /= 1 .or. res%iterations /= res1%iterations) call fail('distributed solve: iterations '// &
        itoa(res%iterations)//' vs '//itoa(res1%iterations))

    call pk_solver_destroy(s)
    call pk_precond_destroy(M)
    call pk_operator_destroy(A)
    call pk_context_destroy(ctx)
    call pk_solver_destroy(s1)
    call pk_precond_destroy(M1)
    call pk_operator_destroy(A1)
    call pk_context_destroy(c1)
    deallocate (bg, xg, b, x)
    call MPI_Comm_free(sub)
    call MPI_Allreduce(fails, allfails, 1, MPI_INTEGER, MPI_SUM, MPI_COMM_WORLD)
    call MPI_Finalize()
    if (allfails > 0) error stop 't941: checks failed'

contains

    function itoa(i) result(str)
        integer(c_int32_t), intent(in) :: i
        character(len=12) :: str
        write (str, '(i0)') i
    end function itoa

    subroutine fail(what)
        character(len=*), intent(in) :: what
        fails = fails + 1
        print '(a,i0,a,a)', 'rank ', rank, ': check failed: ', what
    end subroutine fail

end program t941_mpi_f08

!> pkrylov_mod_nompi: pk_context_set_comm of pkrylov_mod in a build without MPI (part of pkrylov_fortran):
!> PKRYLOV_ERR_UNSUPPORTED, as pkrylov_context_set_comm_f answered before the MPI part moved into
!> libpkrylov_mpi. Builds with MPI compile pkrylov_mod_mpi.F90 into pkrylov_mpi_fortran instead. Only the
!> module's public procedures are called (gfortran may give its private ones no symbol).
submodule(pkrylov_mod) pkrylov_mod_nompi
    implicit none

    character(len=*), parameter :: NO_MPI = 'this pkrylov was built without MPI (configure with '// &
                                            '-DPKRYLOV_ENABLE_MPI=ON)'

contains

    module subroutine context_set_comm_i4(ctx, comm, ierr)
        type(pk_context), intent(in) :: ctx
        integer(c_int32_t), intent(in) :: comm
        integer, intent(out), optional :: ierr
        if (.false.) print *, comm ! unused
        call pk_internal_raise(PKRYLOV_ERR_UNSUPPORTED, ctx%h, 'pk_context_set_comm', NO_MPI, ierr)
    end subroutine context_set_comm_i4

    module subroutine context_set_comm_i8(ctx, comm, ierr)
        type(pk_context), intent(in) :: ctx
        integer(c_int64_t), intent(in) :: comm
        integer, intent(out), optional :: ierr
        if (.false.) print *, comm ! unused
        call pk_internal_raise(PKRYLOV_ERR_UNSUPPORTED, ctx%h, 'pk_context_set_comm', NO_MPI, ierr)
    end subroutine context_set_comm_i8

end submodule pkrylov_mod_nompi

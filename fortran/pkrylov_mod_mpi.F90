!> pkrylov_mod_mpi: pk_context_set_comm of pkrylov_mod (declared there), in the library pkrylov_mpi_fortran,
!> which links libpkrylov_mpi (pkrylov_context_set_comm_f, pkrylov_mpi.h) and so MPI. A submodule, so that a
!> model keeps `use pkrylov_mod` only: an MPI model adds the library to its link line, a serial model links
!> pkrylov_fortran without MPI. The module's error handling through its public pk_internal_check and
!> pk_internal_raise (its private procedures have no symbol outside libpkrylov_fortran).
submodule(pkrylov_mod) pkrylov_mod_mpi
    implicit none

    interface
        !> pkrylov_context_set_comm_f of pkrylov_mpi.h (libpkrylov_mpi): a Fortran MPI handle.
        function pkrylov_context_set_comm_f(ctx, fcomm) bind(C, name="pkrylov_context_set_comm_f")
            import :: c_ptr, c_int32_t, c_int
            implicit none
            type(c_ptr), value :: ctx
            integer(c_int32_t), value :: fcomm
            integer(c_int) :: pkrylov_context_set_comm_f
        end function pkrylov_context_set_comm_f
    end interface

contains

    module subroutine context_set_comm_i4(ctx, comm, ierr)
        type(pk_context), intent(in) :: ctx
        integer(c_int32_t), intent(in) :: comm
        integer, intent(out), optional :: ierr
        call pk_internal_check(pkrylov_context_set_comm_f(ctx%h, comm), ctx%h, 'pk_context_set_comm', ierr)
    end subroutine context_set_comm_i4

    module subroutine context_set_comm_i8(ctx, comm, ierr)
        type(pk_context), intent(in) :: ctx
        integer(c_int64_t), intent(in) :: comm
        integer, intent(out), optional :: ierr
        character(len=24) :: text
        if (comm > huge(0_c_int32_t) .or. comm < -huge(0_c_int32_t)) then
            write (text, '(i0)') comm
            call pk_internal_raise(PKRYLOV_ERR_INVALID_VALUE, ctx%h, 'pk_context_set_comm', &
                                   "argument 'comm' = "//trim(text)//" is not a Fortran MPI handle (MPI_Fint)", ierr)
            return
        end if
        call pk_internal_check(pkrylov_context_set_comm_f(ctx%h, int(comm, c_int32_t)), ctx%h, &
                               'pk_context_set_comm', ierr)
    end subroutine context_set_comm_i8

end submodule pkrylov_mod_mpi

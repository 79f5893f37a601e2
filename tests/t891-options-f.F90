!> t891-options-f: the options through pkrylov_mod.
!! Checks: pk_context_set_option / pk_context_get_option (values read back in their canonical text,
!! trailing blanks of the Fortran strings ignored), pk_context_set_options (key=value pairs), an unknown
!! name and a value out of range (PKRYLOV_ERR_BAD_OPTION with ierr, the message naming the option and the
!! accepted range, the value unchanged), a solver inheriting the context's options at creation and
!! overriding a solver-level one (pk_solver_set_option / pk_solver_get_option), a context-level option
!! refused on a solver, and the listing (pk_option_count, pk_option_describe). The expected values are the
!! documented defaults and ranges (include/pkrylov.h), written out here.
program t891_options_f
    use, intrinsic :: iso_c_binding, only: c_double, c_int32_t
    use, intrinsic :: iso_fortran_env, only: error_unit
    use pkrylov_mod
    implicit none
    type(pk_context) :: ctx
    type(pk_operator) :: A
    type(pk_solver) :: s
    integer(c_int32_t) :: rowptr(4), colind(3)
    real(c_double) :: values(3)
    character(len=32) :: v
    character(len=1024) :: msg, line
    integer :: ierr, i, found

    call pk_context_create(ctx, PKRYLOV_BACKEND_CPU)
    call pk_context_get_option(ctx, 'cuda.kc', v)
    call expect(v == 'auto', 'default cuda.kc is auto: '//trim(v))
    call pk_context_get_option(ctx, 'kry.graph    ', v)
    call expect(v == '1', 'default kry.graph is 1 (trailing blanks of the name ignored): '//trim(v))

    call pk_context_set_option(ctx, 'cuda.kc', '64   ', ierr)
    call expect(ierr == PKRYLOV_SUCCESS, 'set cuda.kc=64')
    call pk_context_get_option(ctx, 'cuda.kc', v)
    call expect(v == '64', 'cuda.kc reads back 64: '//trim(v))
    call pk_context_set_option(ctx, 'kry.graph', 'off')
    call pk_context_get_option(ctx, 'kry.graph', v)
    call expect(v == '0', 'kry.graph=off reads back 0: '//trim(v))

    call pk_context_set_options(ctx, 'cuda.csr_format=dia  cuda.fold=1', ierr)
    call expect(ierr == PKRYLOV_SUCCESS, 'set_options')
    call pk_context_get_option(ctx, 'cuda.csr_format', v)
    call expect(v == 'dia', 'cuda.csr_format=dia: '//trim(v))

    ! errors: the code, the message, the value unchanged
    call pk_context_set_option(ctx, 'cuda.kc', '2000', ierr)
    call expect(ierr == PKRYLOV_ERR_BAD_OPTION, 'cuda.kc=2000 is BAD_OPTION')
    call pk_error_message(ctx, msg)
    call expect(index(msg, "option 'cuda.kc'") > 0 .and. index(msg, '1..1024') > 0, &
                'the message names the option and its range: '//trim(msg))
    call pk_context_get_option(ctx, 'cuda.kc', v)
    call expect(v == '64', 'cuda.kc unchanged by the refused value: '//trim(v))
    call pk_context_set_option(ctx, 'no.such', '1', ierr)
    call expect(ierr == PKRYLOV_ERR_BAD_OPTION, 'unknown option is BAD_OPTION')
    call pk_error_message(ctx, msg)
    call expect(index(msg, "unknown option 'no.such'") > 0, 'the message names it: '//trim(msg))
    call pk_context_set_options(ctx, 'cuda.kc=8 kry.fuse', ierr)
    call expect(ierr == PKRYLOV_ERR_BAD_OPTION, 'a pair without = is BAD_OPTION')
    call pk_context_get_option(ctx, 'cuda.kc', v)
    call expect(v == '64', 'all or nothing: '//trim(v))
    call pk_context_get_option(ctx, 'no.such', v, ierr)
    call expect(ierr == PKRYLOV_ERR_BAD_OPTION .and. v == '', 'get of an unknown option')

    ! a solver inherits the context's options; solver-level ones change on the solver only
    rowptr = [1, 2, 3, 4]
    colind = [1, 2, 3]
    values = [2.0_c_double, 3.0_c_double, 4.0_c_double]
    call pk_operator_create_csr(ctx, A, 3_c_int32_t, rowptr, colind, values, 1_c_int32_t)
    call pk_solver_create(ctx, s, PKRYLOV_SOLVER_CG, A)
    call pk_solver_get_option(s, 'kry.graph', v)
    call expect(v == '0', 'the solver inherits kry.graph=0: '//trim(v))
    call pk_solver_get_option(s, 'cuda.fold', v)
    call expect(v == '1', 'the solver inherits cuda.fold=1: '//trim(v))
    call pk_solver_set_option(s, 'kry.graph', 'yes', ierr)
    call expect(ierr == PKRYLOV_SUCCESS, 'solver-level override')
    call pk_solver_get_option(s, 'kry.graph', v)
    call expect(v == '1', 'solver kry.graph now 1: '//trim(v))
    call pk_context_get_option(ctx, 'kry.graph', v)
    call expect(v == '0', 'the context keeps kry.graph=0: '//trim(v))
    call pk_solver_set_option(s, 'dist.nccl', '0', ierr)
    call expect(ierr == PKRYLOV_ERR_BAD_OPTION, 'a context-level option on a solver is BAD_OPTION')
    call pk_error_message(ctx, msg)
    call expect(index(msg, "'dist.nccl'") > 0 .and. index(msg, 'context-level') > 0, &
                'the message names it: '//trim(msg))
    call pk_solver_get_option(s, 'cuda.kc', v)
    call expect(v == '64', 'a context-level option as the solver sees it: '//trim(v))

    call pk_solver_get_option(s, 'cuda.l2persist', v)
    call expect(v == 'auto', 'the solver-level cuda.l2persist defaults to auto: '//trim(v))
    call pk_solver_set_option(s, 'cuda.l2persist', '0', ierr)
    call expect(ierr == PKRYLOV_SUCCESS, 'cuda.l2persist=0 on the solver')

    ! the listing: 18 options, each line starting with its name; kry.graph and cuda.l2persist among them
    call expect(pk_option_count() == 18, 'eighteen options')
    found = 0
    do i = 1, pk_option_count()
        call pk_option_describe(i, line)
        if (index(line, 'kry.graph ') == 1) found = found + 1
        if (index(line, 'cuda.l2persist ') == 1) found = found + 10
    end do
    call expect(found == 11, 'kry.graph and cuda.l2persist listed once each')
    call pk_option_describe(pk_option_count() + 1, line, ierr)
    call expect(ierr == PKRYLOV_ERR_INDEX_OUT_OF_RANGE, 'past the last option')

    call pk_solver_destroy(s)
    call pk_operator_destroy(A)
    call pk_context_destroy(ctx)
    write (*, '(a)') 't891-options-f: passed'

contains

    subroutine expect(cond, what)
        logical, intent(in) :: cond
        character(len=*), intent(in) :: what
        if (.not. cond) then
            write (error_unit, '(a)') 't891-options-f: FAILED: '//what
            error stop 1
        end if
    end subroutine expect

end program t891_options_f

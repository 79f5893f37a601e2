!> t812-thinshell-f: thin-shell operators through pkrylov_mod.
!! Checks: pk_operator_create_thinshell (defaults; and geometry, H, lambda, nu given) applied to a vector
!! equals the column stencil of the same parameters (pkrylov_thinshell_stencil_coefficients, called
!! through the interface in pk_test_f) evaluated by a Fortran loop: a different operator form; the
!! defaults are those of pkrylov_thinshell_params_default; errors: nz = 0 (INVALID_SIZE naming nz), H < 0,
!! a bad geometry (INVALID_VALUE naming them), a null context (NULL_POINTER).
program t812_thinshell_f
    use, intrinsic :: iso_c_binding, only: c_associated, c_double, c_int, c_int32_t
    use, intrinsic :: iso_fortran_env, only: error_unit
    use pkrylov_mod
    use pk_test_f
    implicit none
    integer(c_int32_t), parameter :: nx = 6, ny = 5, nz = 4
    type(pk_context) :: ctx, nullctx
    type(pk_operator) :: A, B, Abad
    type(pkrylov_thinshell_params) :: p
    real(c_double), dimension(nx, ny, nz) :: aW, aS, aV, aC, x, y, yref
    integer :: ierr, i

    call pk_context_create(ctx, PKRYLOV_BACKEND_CPU)
    x = reshape([(1 + 0.5_c_double*sin(0.37_c_double*i), i=1, nx*ny*nz)], shape(x))

    ! defaults
    call pk_operator_create_thinshell(ctx, A, nx, ny, nz, ierr=ierr)
    call expect(ierr == 0 .and. c_associated(A%h), 'create a thin-shell operator')
    call expect(ts_default(nx, ny, nz, p) == 0, 'pkrylov_thinshell_params_default')
    call expect(ts_coefficients(p, aW, aS, aV, aC) == 0, 'pkrylov_thinshell_stencil_coefficients')
    call pk_operator_apply(A, x, y)
    call stencil_apply(aW, aS, aV, aC, x, yref)
    call expect(maxval(abs(y - yref)) <= 1e-12_c_double*maxval(abs(yref)), &
                'thin shell = its stencil (defaults)')

    ! every parameter given
    call pk_operator_create_thinshell(ctx, B, nx, ny, nz, geometry=PKRYLOV_GEOMETRY_UNIFORM, &
                                      H=0.02_c_double, lambda=2.0_c_double, nu=5.0_c_double, ierr=ierr)
    call expect(ierr == 0, 'create with every parameter')
    p%geometry = PKRYLOV_GEOMETRY_UNIFORM
    p%H = 0.02_c_double
    p%lambda = 2
    p%nu = 5
    call expect(ts_coefficients(p, aW, aS, aV, aC) == 0, 'stencil coefficients (uniform)')
    call pk_operator_apply(B, x, y)
    call stencil_apply(aW, aS, aV, aC, x, yref)
    call expect(maxval(abs(y - yref)) <= 1e-12_c_double*maxval(abs(yref)), &
                'thin shell = its stencil (uniform)')
    call pk_operator_apply(A, x, yref)
    call expect(maxval(abs(y - yref)) > 1e-3_c_double*maxval(abs(yref)), 'the parameters change the operator')

    ! errors
    call pk_operator_create_thinshell(ctx, Abad, nx, ny, 0, ierr=ierr)
    call expect_error(ierr, PKRYLOV_ERR_INVALID_SIZE, "nz'", 'nz = 0')
    call expect(.not. c_associated(Abad%h), 'no operator after an error')
    call pk_operator_create_thinshell(ctx, Abad, nx, ny, nz, H=-1.0_c_double, ierr=ierr)
    call expect_error(ierr, PKRYLOV_ERR_INVALID_VALUE, "H'", 'H = -1')
    call pk_operator_create_thinshell(ctx, Abad, nx, ny, nz, geometry=PKRYLOV_BACKEND_CPU, ierr=ierr)
    call expect_error(ierr, PKRYLOV_ERR_INVALID_VALUE, "geometry'", 'a backend as geometry')
    call pk_operator_create_thinshell(nullctx, Abad, nx, ny, nz, ierr=ierr)
    call expect(ierr == PKRYLOV_ERR_NULL_POINTER, 'null context: NULL_POINTER')

    call pk_operator_destroy(B)
    call pk_operator_destroy(A)
    call pk_context_destroy(ctx)
    print '(a)', 't812-thinshell-f: ok'

contains

    subroutine expect(cond, what)
        logical, intent(in) :: cond
        character(len=*), intent(in) :: what
        if (.not. cond) then
            write (error_unit, '(a)') 't812-thinshell-f: FAILED: '//what
            error stop 1
        end if
    end subroutine expect

    !> ierr is the expected code and the context's message names the argument.
    subroutine expect_error(ierr, code, name, what)
        integer, intent(in) :: ierr
        integer(c_int32_t), intent(in) :: code
        character(len=*), intent(in) :: name, what
        character(len=1024) :: msg
        call pk_error_message(ctx, msg)
        if (ierr /= code) then
            write (error_unit, '(a,i0,a,i0,a)') 't812-thinshell-f: FAILED: '//what//': ierr = ', ierr, &
                ' (expected ', code, '): '//trim(msg)
            error stop 1
        end if
        call expect(index(msg, name) > 0, what//': the message names '//name//': '//trim(msg))
    end subroutine expect_error

end program t812_thinshell_f

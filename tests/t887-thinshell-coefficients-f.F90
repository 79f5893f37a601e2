!> t887-thinshell-coefficients-f: pk_thinshell_stencil_coefficients, the thin-shell matrix as column-stencil
!! coefficients. Checks: with the defaults and with every parameter given, the coefficients are those of
!! the C function pkrylov_thinshell_stencil_coefficients called directly (pk_test_f's interface, parameters
!! set here) bit for bit, and pk_operator_create_stencil7 of them applied to a vector equals the matrix-free
!! pk_operator_create_thinshell of the same parameters and the stencil formula evaluated by a loop
!! (pk_test_f); rank-1 arrays of nx*ny*nz values are accepted.
!! Errors (no context: the message comes from pk_error_message with a null context): nz = 0 (INVALID_SIZE
!! naming nz), aS with one value too few (SIZE_MISMATCH naming 'aS', arrays unchanged), H < 0 and an unknown
!! geometry (INVALID_VALUE); without ierr an error ends the program (t888).
program t887_thinshell_coefficients_f
    use, intrinsic :: iso_c_binding, only: c_double, c_int32_t
    use, intrinsic :: iso_fortran_env, only: error_unit
    use pkrylov_mod
    use pk_test_f
    implicit none
    integer(c_int32_t), parameter :: nx = 7, ny = 5, nz = 6, n = nx*ny*nz
    type(pk_context) :: ctx, nullctx
    type(pk_operator) :: T, S
    type(pkrylov_thinshell_params) :: p
    real(c_double), dimension(nx, ny, nz) :: aW, aS, aV, aC, rW, rS, rV, rC, x, y, yts, yref
    real(c_double) :: w1(n), s1(n), v1(n), c1(n), short(n - 1)
    character(len=1024) :: msg
    integer :: ierr, i

    x = reshape([(1 + 0.5_c_double*sin(0.41_c_double*i), i=1, n)], shape(x))
    call pk_context_create(ctx, PKRYLOV_BACKEND_CPU)

    ! defaults
    call pk_thinshell_stencil_coefficients(nx, ny, nz, aW, aS, aV, aC)
    call expect(ts_default(nx, ny, nz, p) == 0 .and. ts_coefficients(p, rW, rS, rV, rC) == 0, 'direct C call')
    call expect(all(aW == rW) .and. all(aS == rS) .and. all(aV == rV) .and. all(aC == rC), &
                'defaults: the C function gives the same coefficients')
    call compare_operators('defaults')

    ! every parameter given
    call pk_thinshell_stencil_coefficients(nx, ny, nz, aW, aS, aV, aC, geometry=PKRYLOV_GEOMETRY_UNIFORM, &
                                           H=0.03_c_double, lambda=2.0_c_double, nu=4.0_c_double)
    p%geometry = PKRYLOV_GEOMETRY_UNIFORM
    p%H = 0.03_c_double
    p%lambda = 2
    p%nu = 4
    call expect(ts_coefficients(p, rW, rS, rV, rC) == 0, 'direct C call (uniform)')
    call expect(all(aW == rW) .and. all(aS == rS) .and. all(aV == rV) .and. all(aC == rC), &
                'every parameter: the C function gives the same coefficients')
    call compare_operators('every parameter', PKRYLOV_GEOMETRY_UNIFORM, 0.03_c_double, 2.0_c_double, &
                           4.0_c_double)

    ! rank-1 arrays
    call pk_thinshell_stencil_coefficients(nx, ny, nz, w1, s1, v1, c1, geometry=PKRYLOV_GEOMETRY_UNIFORM, &
                                           H=0.03_c_double, lambda=2.0_c_double, nu=4.0_c_double)
    call expect(all(w1 == reshape(rW, [n])) .and. all(c1 == reshape(rC, [n])), 'rank-1 arrays')

    ! errors
    call pk_thinshell_stencil_coefficients(nx, ny, 0_c_int32_t, aW, aS, aV, aC, ierr=ierr)
    call expect_error(ierr, PKRYLOV_ERR_INVALID_SIZE, "'nz' = 0", 'nz = 0')
    aW = -7
    call pk_thinshell_stencil_coefficients(nx, ny, nz, aW, short, aV, aC, ierr=ierr)
    call expect_error(ierr, PKRYLOV_ERR_SIZE_MISMATCH, "argument 'aS' has 209 values, nx*ny*nz = 210", &
                      'aS one short')
    call expect(all(aW == -7), 'the arrays are unchanged after an error')
    call pk_thinshell_stencil_coefficients(nx, ny, nz, aW, aS, aV, aC, H=-1.0_c_double, ierr=ierr)
    call expect_error(ierr, PKRYLOV_ERR_INVALID_VALUE, "H", 'H < 0')
    call expect(all(aW == -7), 'the arrays are unchanged after a bad H')
    call pk_thinshell_stencil_coefficients(nx, ny, nz, aW, aS, aV, aC, geometry=5_c_int32_t, ierr=ierr)
    call expect_error(ierr, PKRYLOV_ERR_INVALID_VALUE, "geometry", 'unknown geometry')

    call pk_context_destroy(ctx)
    print '(a)', 't887-thinshell-coefficients-f: ok'

contains

    !> The stencil operator of aW..aC = the thin-shell operator = the loop, applied to x.
    subroutine compare_operators(what, geometry, H, lambda, nu)
        character(len=*), intent(in) :: what
        integer(c_int32_t), intent(in), optional :: geometry
        real(c_double), intent(in), optional :: H, lambda, nu
        call pk_operator_create_stencil7(ctx, S, nx, ny, nz, aW, aS, aV, aC)
        call pk_operator_create_thinshell(ctx, T, nx, ny, nz, geometry, H, lambda, nu)
        call pk_operator_apply(S, x, y)
        call pk_operator_apply(T, x, yts)
        call stencil_apply(aW, aS, aV, aC, x, yref)
        call expect(maxval(abs(y - yref)) <= 1e-13_c_double*maxval(abs(yref)), what//': stencil = loop')
        call expect(maxval(abs(yts - yref)) <= 1e-12_c_double*maxval(abs(yref)), what//': thin shell = loop')
        call pk_operator_destroy(T)
        call pk_operator_destroy(S)
    end subroutine compare_operators

    subroutine expect(cond, what)
        logical, intent(in) :: cond
        character(len=*), intent(in) :: what
        if (.not. cond) then
            write (error_unit, '(a)') 't887-thinshell-coefficients-f: FAILED: '//what
            error stop 1
        end if
    end subroutine expect

    !> ierr is the expected code and the message without a context contains name.
    subroutine expect_error(ierr, code, name, what)
        integer, intent(in) :: ierr
        integer(c_int32_t), intent(in) :: code
        character(len=*), intent(in) :: name, what
        call pk_error_message(nullctx, msg)
        if (ierr /= code) then
            write (error_unit, '(a,i0,a,i0,a)') 't887-thinshell-coefficients-f: FAILED: '//what//': ierr = ', &
                ierr, ' (expected ', code, '): '//trim(msg)
            error stop 1
        end if
        call expect(index(msg, name) > 0, what//': the message names '//name//': '//trim(msg))
    end subroutine expect_error

end program t887_thinshell_coefficients_f

!> legacy_bench -- what the legacy examples need to run as benchmarks; not part of any model. Compiled into
!> both versions of every example (before/ and after/), so the diff between them shows only the switch to
!> pkrylov:
!>  - optional command-line arguments after the output file (sizes, steps, tolerance; the defaults are
!>    the sizes the comparison tests run);
!>  - a wall-clock timer (system_clock) around each solve, and one summary line a run;
!>  - the backend for the pkrylov versions from the environment variable PKRYLOV_LEGACY_BACKEND.
module legacy_bench
  implicit none
  private
  integer, parameter :: dp = kind(1.0d0)
  integer, parameter :: i8 = selected_int_kind(18)
  public :: int_arg, real_arg, wall_time, report_timing, bench_backend
contains
  !> The integer command-line argument number pos, or def when there are fewer arguments.
  function int_arg(pos, def) result(v)
    integer, intent(in) :: pos, def
    integer :: v, stat
    character(len=64) :: arg
    v = def
    if (command_argument_count() < pos) return
    call get_command_argument(pos, arg)
    read(arg, *, iostat=stat) v
    if (stat /= 0 .or. v < 1) then
      write(*, '(a,i0,3a)') 'legacy_bench: argument ', pos, ' (', trim(arg), ') must be a positive integer'
      error stop 2
    end if
  end function int_arg

  !> The real command-line argument number pos, or def when there are fewer arguments.
  function real_arg(pos, def) result(v)
    integer, intent(in) :: pos
    real(dp), intent(in) :: def
    real(dp) :: v
    integer :: stat
    character(len=64) :: arg
    v = def
    if (command_argument_count() < pos) return
    call get_command_argument(pos, arg)
    read(arg, *, iostat=stat) v
    if (stat /= 0 .or. .not. v > 0) then
      write(*, '(a,i0,3a)') 'legacy_bench: argument ', pos, ' (', trim(arg), ') must be a positive number'
      error stop 2
    end if
  end function real_arg

  !> Wall-clock seconds since an arbitrary origin (system_clock with 64-bit counts).
  function wall_time() result(t)
    real(dp) :: t
    integer(i8) :: count, rate
    call system_clock(count, rate)
    t = real(count, dp) / real(rate, dp)
  end function wall_time

  !> One line to stdout that bench/legacy-gpu.sh reads: label (which version), grid, solves and iterations,
  !> the mean time per solve over all steps and over the steps after the first (the first may include
  !> one-time work such as the CUDA graph capture), and the time per iteration over those steps.
  subroutine report_timing(label, grid, tsolve, iters)
    character(len=*), intent(in) :: label, grid
    real(dp), intent(in) :: tsolve(:)
    integer, intent(in) :: iters(:)
    integer :: n
    real(dp) :: t_rest
    n = size(tsolve)
    t_rest = sum(tsolve)
    if (n > 1) t_rest = sum(tsolve(2:n)) / (n - 1)
    write(*, '(5a,i0,a,i0,3(a,es11.4))') 'timing: ', label, ' grid ', grid, ' solves ', n, ' iterations ', &
      sum(iters), ' per_solve_s ', sum(tsolve) / n, ' per_solve_after_first_s ', t_rest, &
      ' per_iteration_s ', sum(tsolve(min(2, n):n)) / max(1, sum(iters(min(2, n):n)))
  end subroutine report_timing

  !> The backend for pk_context_create: auto (the GPU when there is one) unless PKRYLOV_LEGACY_BACKEND is
  !> "cpu" or "cuda". The caller passes pkrylov's three constants (this module does not use pkrylov_mod).
  function bench_backend(auto, cpu, cuda) result(backend)
    integer, intent(in) :: auto, cpu, cuda
    integer :: backend, length, stat
    character(len=16) :: val
    backend = auto
    call get_environment_variable('PKRYLOV_LEGACY_BACKEND', val, length, stat)
    if (stat /= 0) return
    select case (trim(val))
    case ('cpu', 'CPU')
      backend = cpu
    case ('cuda', 'CUDA', 'gpu', 'GPU')
      backend = cuda
    case ('auto', 'AUTO', '')
      backend = auto
    case default
      write(*, '(3a)') 'legacy_bench: PKRYLOV_LEGACY_BACKEND = ', trim(val), ' (must be auto, cpu or cuda)'
      error stop 2
    end select
  end function bench_backend
end module legacy_bench

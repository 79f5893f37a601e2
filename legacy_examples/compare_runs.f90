!> compare_runs -- the test of a legacy example: run the model's own-solver version and the pkrylov
!> version, then check that their final solutions agree (||x_after - x_before||_2 <= maxdiff
!> ||x_before||_2) and that the pkrylov version needed no more iterations at any time step.
!>
!> Usage: compare_runs before-program after-program [maxdiff (default 1e-8)] [equal]
!> With `equal`, the iteration counts must be the same at every step (the model's own stopping rule).
!> Each program is run as `program <output-file>` and writes: the number of steps and of unknowns, the
!> iteration count of every step, then the final solution (one value a line).
program compare_runs
  implicit none
  integer, parameter :: dp = kind(1.0d0)
  character(len=1024) :: prog_before, prog_after, arg
  real(dp) :: maxdiff, diff
  integer, allocatable :: it_before(:), it_after(:)
  real(dp), allocatable :: x_before(:), x_after(:)
  integer :: s
  logical :: equal

  if (command_argument_count() < 2) error stop 'usage: compare_runs before-program after-program [maxdiff]'
  call get_command_argument(1, prog_before)
  call get_command_argument(2, prog_after)
  maxdiff = 1.0e-8_dp
  if (command_argument_count() >= 3) then
    call get_command_argument(3, arg)
    read(arg, *) maxdiff
  end if
  equal = .false.
  if (command_argument_count() >= 4) then
    call get_command_argument(4, arg)
    if (trim(arg) /= 'equal') error stop 'compare_runs: the fourth argument can only be "equal"'
    equal = .true.
  end if

  call run(prog_before, 'before.out', it_before, x_before)
  call run(prog_after, 'after.out', it_after, x_after)
  if (size(it_after) /= size(it_before) .or. size(x_after) /= size(x_before)) &
    error stop 'compare_runs: the two versions solved problems of different sizes'

  diff = norm2(x_after - x_before) / max(norm2(x_before), tiny(1.0_dp))
  write(*, '(a)') ' step  iterations (own solver)  iterations (pkrylov)'
  do s = 1, size(it_before)
    write(*, '(i5,i20,i22)') s, it_before(s), it_after(s)
  end do
  write(*, '(a,es10.3,a,es8.1,a)') ' relative difference of the final solutions: ', diff, ' (must be <= ', &
                                   maxdiff, ')'
  if (.not. diff <= maxdiff) error stop 'compare_runs: the solutions differ'
  if (any(it_after > it_before)) error stop 'compare_runs: the pkrylov version needed more iterations'
  if (equal .and. any(it_after /= it_before)) error stop 'compare_runs: the iteration counts differ'
  deallocate(it_before, it_after, x_before, x_after) ! (main-program allocatables are not freed at the end)

contains
  !> Run one version (its output goes to stdout) and read back its iteration counts and solution.
  subroutine run(prog, outfile, iters, x)
    character(len=*), intent(in) :: prog, outfile
    integer, allocatable, intent(out) :: iters(:)
    real(dp), allocatable, intent(out) :: x(:)
    integer :: estat, cstat, u, nsteps, n
    write(*, '(2a)') ' running ', trim(prog)
    flush(6)
    call execute_command_line('"' // trim(prog) // '" ' // outfile, exitstat=estat, cmdstat=cstat)
    if (cstat /= 0 .or. estat /= 0) error stop 'compare_runs: a version failed (see its output above)'
    open(newunit=u, file=outfile, status='old', action='read')
    read(u, *) nsteps, n
    allocate(iters(nsteps), x(n))
    read(u, *) iters
    read(u, *) x
    close(u)
  end subroutine run
end program compare_runs

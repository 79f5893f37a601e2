#!/usr/bin/env bash
# mpi-gpu-run.sh: distributed solves on a GPU machine, one MPI rank per GPU: the MPI + CUDA tests (t930,
# and when present t931 for reproducible mode and t932 for the caller's halo exchange) and the scaling benchmark (pkrylov-bench-mpi), from the
# repository root. The cost of reproducible mode: pass `-- --reproducible` to the benchmark.
#
#   bash bench/mpi-gpu-run.sh [BIN_DIR] [--test-ranks "1 2 4"] [--bench-ranks N] [--no-tests] [--no-bench]
#                             [-- ARGS FOR pkrylov-bench-mpi]
#
# BIN_DIR (default build) holds t930-mpi-cuda and pkrylov-bench-mpi, either as a build tree (tests/,
# bench/) or flat (a bundle carried to the device machine). Results go to $OUT (the device tool's folder
# that comes back), else ./mpi-gpu-run-out: mpi-gpu-run.log (machine, tests, summary), bench-mpi.log,
# bench-mpi.json. --bench-ranks: the ranks the benchmark is launched with (default: the number of GPUs);
# it measures 1, 2, 4, ... up to that many inside one launch. Ranks beyond the GPUs share them (the
# library binds rank r of a node to GPU r mod count: pkrylov_context_set_comm).
#
# Open MPI, no network: shared memory only (-mca pml ob1 -mca btl self,vader), run as root allowed. With
# NCCL (built in, a GPU per rank) the halos and global sums go device to device through NCCL (MPI only
# bootstraps it); the host-staged path (PKRYLOV_OPTIONS=dist.nccl=0, or without NCCL) stages them through pinned
# host buffers, so no CUDA-aware MPI is needed. The benchmark measures both paths in the same launch. NVLink
# multicast stays off (NCCL_NVLS_ENABLE=0, also TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1).
# A libnccl.so.2 the binaries do not find is looked for on the machine (e.g. a Python wheel's) and added to
# LD_LIBRARY_PATH.
set -u
BIN=build
TEST_RANKS="1 2 4"
BENCH_RANKS=""
TESTS=1 BENCH=1
BENCH_ARGS=()
while [ $# -gt 0 ]; do
  case "$1" in
    --test-ranks) TEST_RANKS=$2; shift ;;
    --bench-ranks) BENCH_RANKS=$2; shift ;;
    --no-tests) TESTS=0 ;;
    --no-bench) BENCH=0 ;;
    --) shift; BENCH_ARGS=("$@"); break ;;
    -h|--help) sed -n '2,20p' "$0"; exit 0 ;;
    -*) echo "mpi-gpu-run.sh: unknown option $1" >&2; exit 2 ;;
    *) BIN=$1 ;;
  esac
  shift
done
ROOT=$(pwd)
OUT=${OUT:-$ROOT/mpi-gpu-run-out}
mkdir -p "$OUT"
LOG=$OUT/mpi-gpu-run.log
exec > >(tee -a "$LOG") 2>&1

find_bin() { for p in "$BIN/$1" "$BIN/tests/$1" "$BIN/bench/$1"; do [ -x "$p" ] && { echo "$p"; return; }; done; }
T930=$(find_bin t930-mpi-cuda)
T931=$(find_bin t931-mpi-cuda-repro)
T932=$(find_bin t932-mpi-cuda-exchange)
BENCHEXE=$(find_bin pkrylov-bench-mpi)

export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_pml=ob1 OMPI_MCA_btl=self,vader OMPI_MCA_rmaps_base_oversubscribe=1
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-4} OPENBLAS_NUM_THREADS=1
MPIRUN=$(command -v mpirun || true)

echo "== machine ($(date -u +%Y-%m-%dT%H:%M:%SZ))"
nvidia-smi -L || true
nvidia-smi topo -m 2>/dev/null | head -12 || true
echo "mpirun: ${MPIRUN:-none}; $($MPIRUN --version 2>/dev/null | head -1)"
command -v ompi_info >/dev/null && ompi_info --parsable --all 2>/dev/null | grep -i "mpi_built_with_cuda_support:value" || true
for b in "$T930" "$T931" "$T932" "$BENCHEXE"; do
  if [ -n "$b" ] && ldd "$b" | grep -q "libnccl.*not found"; then
    nccl=$(find / -name "libnccl.so.2" -not -path "/proc/*" 2>/dev/null | head -1)
    [ -n "$nccl" ] && export LD_LIBRARY_PATH=$(dirname "$nccl")${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} &&
      echo "libnccl.so.2: $nccl"
  fi
  [ -n "$b" ] && ldd "$b" | grep "not found" && echo "MISSING LIBRARIES for $b"
  [ -n "$b" ] && ldd "$b" | grep -m1 "libnccl"
done
NGPU=$(nvidia-smi -L 2>/dev/null | grep -c GPU)
[ -z "$BENCH_RANKS" ] && BENCH_RANKS=$NGPU
[ "$BENCH_RANKS" -lt 1 ] 2>/dev/null && BENCH_RANKS=1

status=0
summary=()
if [ $TESTS = 1 ] && [ -n "$T930" ] && [ -n "$MPIRUN" ]; then
  for T in "$T930" $T931 $T932; do
  cases=$("$MPIRUN" -n 1 "$T" --list 2>/dev/null)
  for np in $TEST_RANKS; do
    for c in $cases; do
      start=$(date +%s.%N)
      OMPI_MCA_btl_vader_single_copy_mechanism=none timeout ${CASE_TIMEOUT:-120} "$MPIRUN" -n "$np" "$T" "$c" > "$OUT/case.log" 2>&1
      rc=$?
      t=$(echo "$(date +%s.%N) - $start" | bc 2>/dev/null || echo "?")
      case $rc in
        0) r=PASS ;;
        77) r=SKIP ;;
        124) r=TIMEOUT ;;
        *) r="FAIL($rc)" ;;
      esac
      printf '%-26s np%-2s %-9s %6.1f s\n' "$c" "$np" "$r" "$t" 2>/dev/null || echo "$c np$np $r"
      if [ $rc != 0 ] && [ $rc != 77 ]; then
        status=1
        sed -n '1,60p' "$OUT/case.log"
      elif [ "$c" = cg_column ] || [ "$c" = pipecg_column ]; then
        grep -E "iterations" "$OUT/case.log" | head -8
      fi
      summary+=("$c:np$np $r")
    done
  done
  done
  rm -f "$OUT/case.log"
else
  [ $TESTS = 1 ] && { echo "tests: t930-mpi-cuda or mpirun not found"; status=1; }
fi

if [ $BENCH = 1 ] && [ -n "$BENCHEXE" ] && [ -n "$MPIRUN" ]; then
  echo "== benchmark: $MPIRUN -n $BENCH_RANKS $BENCHEXE --json $OUT/bench-mpi.json ${BENCH_ARGS[*]:-}"
  timeout 900 "$MPIRUN" -n "$BENCH_RANKS" "$BENCHEXE" --json "$OUT/bench-mpi.json" "${BENCH_ARGS[@]}" \
    2>&1 | tee "$OUT/bench-mpi.log"
  brc=${PIPESTATUS[0]}
  [ "$brc" != 0 ] && { echo "benchmark exit status $brc"; status=1; }
fi

echo "== summary"
fails=0
for s in "${summary[@]}"; do case "$s" in *PASS|*SKIP) ;; *) echo "  $s"; fails=$((fails + 1)) ;; esac; done
echo "tests run: ${#summary[@]}, not passed: $fails; exit status $status"
exit $status

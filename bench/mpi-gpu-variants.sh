#!/usr/bin/env bash
# mpi-gpu-variants.sh: the weak-scaling measurement of pipelined CG (NCCL path) under several settings of
# the environment, in one call of the device tool, to find where the distributed iteration loses time.
#
#   bash bench/mpi-gpu-variants.sh BIN_DIR [RANKS] [-- EXTRA ARGS FOR pkrylov-bench-mpi]
#
# BIN_DIR holds pkrylov-bench-mpi (flat bundle or build tree). RANKS: the largest rank count (default: the
# number of GPUs); 1 and RANKS are measured. Each variant is one launch:
#   mpirun -n RANKS pkrylov-bench-mpi --modes weak --solvers pipecg --nccl-only --no-instrument
#          --ranks 1,RANKS --iters ${ITERS:-150} --reps ${REPS:-3}
# with the variant's options set (PKRYLOV_OPTIONS, the library's one environment variable; and its arguments:
# --strips for the 1 x P decomposition). Variants: the default, strips, dist.edge_comm=1 (edge columns on the
# communication stream), and timeline launches (cuda.timeline=1: CUDA events at each step of the iteration,
# blocks without graphs; rank 0's line per solve). Before them, unless VARIANT_TESTS=0: t930's pipelined CG
# cases with dist.edge_comm=1.
# Output: $OUT/variants.log (else ./mpi-gpu-variants.log).
set -u
BIN=${1:-build}
shift || true
RANKS=""
if [ $# -gt 0 ] && [ "$1" != "--" ]; then RANKS=$1; shift; fi
[ "${1:-}" = "--" ] && shift
EXTRA=("$@")
find_bin() { for p in "$BIN/$1" "$BIN/bench/$1"; do [ -x "$p" ] && { echo "$p"; return; }; done; }
EXE=$(find_bin pkrylov-bench-mpi)
[ -z "$EXE" ] && { echo "pkrylov-bench-mpi not found in $BIN" >&2; exit 2; }
LOG=${OUT:-.}/variants.log
[ -z "${OUT:-}" ] && LOG=./mpi-gpu-variants.log
exec > >(tee -a "$LOG") 2>&1
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_pml=ob1 OMPI_MCA_btl=self,vader OMPI_MCA_rmaps_base_oversubscribe=1
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export OMP_NUM_THREADS=4 OPENBLAS_NUM_THREADS=1
if ldd "$EXE" | grep -q "libnccl.*not found"; then
  nccl=$(find / -name "libnccl.so.2" -not -path "/proc/*" 2>/dev/null | head -1)
  [ -n "$nccl" ] && export LD_LIBRARY_PATH=$(dirname "$nccl")${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
fi
NGPU=$(nvidia-smi -L 2>/dev/null | grep -c GPU)
[ -z "$RANKS" ] && RANKS=$NGPU
echo "== $(date -u +%Y-%m-%dT%H:%M:%SZ) $(nvidia-smi -L | head -1) x $NGPU, ranks 1,$RANKS"
run() { # label, then VAR=value ... [-- extra benchmark arguments]
  local label=$1 vars=() args=()
  shift
  while [ $# -gt 0 ] && [ "$1" != "--" ]; do vars+=("$1"); shift; done
  [ "${1:-}" = "--" ] && shift && args=("$@")
  echo "== variant: $label (${vars[*]} ${args[*]:-})"
  env "${vars[@]}" timeout 300 mpirun -n "$RANKS" "$EXE" --modes weak --solvers pipecg --nccl-only \
    --no-instrument --ranks "1,$RANKS" --iters ${ITERS:-150} --reps ${REPS:-3} --json /dev/null "${args[@]}" "${EXTRA[@]}" 2>&1 |
    grep -E "us/iter|timeline rank 0|rror|usage|^weak" | head -60
}
T930=$(for p in "$BIN/t930-mpi-cuda" "$BIN/tests/t930-mpi-cuda"; do [ -x "$p" ] && echo "$p"; done | head -1)
if [ -n "$T930" ] && [ "${VARIANT_TESTS:-1}" = 1 ]; then # pipelined CG cases of t930, edges on the comm. stream
  for c in pipecg_column pipecg_none pipecg_stencil_jacobi paths_bitwise; do
    PKRYLOV_OPTIONS="dist.edge_comm=1" OMPI_MCA_btl_vader_single_copy_mechanism=none timeout 120 \
      mpirun -n "$RANKS" "$T930" "$c" > case.log 2>&1
    rc=$?
    echo "t930 $c np$RANKS dist.edge_comm=1: exit $rc"
    [ $rc != 0 ] && [ $rc != 77 ] && sed -n 1,30p case.log
  done
  rm -f case.log
fi
run default X=0
run strips X=0 -- --strips
run edge-comm "PKRYLOV_OPTIONS=dist.edge_comm=1"
run edge-comm-strips "PKRYLOV_OPTIONS=dist.edge_comm=1" -- --strips
run timeline "PKRYLOV_OPTIONS=cuda.timeline=1"
run timeline-edge-comm "PKRYLOV_OPTIONS=cuda.timeline=1 dist.edge_comm=1"
run default-again X=0
run strips-again X=0 -- --strips
run edge-comm-again "PKRYLOV_OPTIONS=dist.edge_comm=1"
run edge-comm-strips-again "PKRYLOV_OPTIONS=dist.edge_comm=1" -- --strips
echo "== done $(date -u +%Y-%m-%dT%H:%M:%SZ)"

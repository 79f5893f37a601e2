#!/usr/bin/env bash
# gpu-run.sh: THE one command to run on a GPU machine, from the repository root, with a carried build tree.
#
#   bash bench/gpu-run.sh [BUILD_DIR] [--no-sanitizer] [--no-ctest] [--no-cpu-bench] [--no-plot]
#                         [--no-kry-bench] [-- ARGS FOR pkrylov-bench-gpu]
#
# BUILD_DIR: argument, else $PKRYLOV_BUILD_DIR, else build-gpu. Results go to $OUT (the device tool's
# folder that comes back), else ./gpu-run-out. At most 8 files are written there (the tool's limit):
#   gpu-run.log (everything this script prints: nvidia-smi, ctest, the summary, and the output of
#   pkrylov-bench-gpu-kry), sanitizer.log, bench-gpu.log, bench-gpu.json, bench-gpu.png, bench-cpu.log,
#   bench-cpu-h100.json, bench-gpu-kry.json.
#
# How to build the tree to carry (on the development machine, from the repository root /work/main; build
# trees hold absolute paths, so this script makes /work/main a link to the repository root on the GPU
# machine when it does not exist there). The shared matrices travel inside the build folder:
#
#   mkdir -p build-gpu/shared && cp -r ../shared/matrices build-gpu/shared/
#   cmake -S . -B build-gpu -DPKRYLOV_ENABLE_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 \
#         -DPKRYLOV_ENABLE_FORTRAN=OFF -DPKRYLOV_SHARED_DIR=/work/main/build-gpu/shared \
#         -DCMAKE_BUILD_TYPE=Release
#   cmake --build build-gpu -j
#   du -sh build-gpu          # must stay under 64 MiB together with the working tree
#
# then, with the device tool: run(command="bash bench/gpu-run.sh build-gpu", carry=["build-gpu"]).
# The GPU machine has nvcc, cmake, ctest, compute-sanitizer and python3 with matplotlib; nothing is built
# there. CTEST_TIMEOUT (seconds, default 3600) limits the ctest step, SANITIZER_TIMEOUT (default 900)
# each sanitizer run (status 124 when it ran out). Each step's exit status is summarised at the end; the
# script's own status is the first failure.
set -u

BUILD=${PKRYLOV_BUILD_DIR:-build-gpu}
SANITIZE=1 CTEST=1 CPUBENCH=1 PLOT=1 KRYBENCH=1
BENCH_ARGS=()
while [ $# -gt 0 ]; do
  case "$1" in
    --no-sanitizer) SANITIZE=0 ;;
    --no-ctest) CTEST=0 ;;
    --no-cpu-bench) CPUBENCH=0 ;;
    --no-plot) PLOT=0 ;;
    --no-kry-bench) KRYBENCH=0 ;;
    --) shift; BENCH_ARGS=("$@"); break ;;
    -h|--help) sed -n '2,30p' "$0"; exit 0 ;;
    -*) echo "gpu-run.sh: unknown option $1" >&2; exit 2 ;;
    *) BUILD=$1 ;;
  esac
  shift
done

ROOT=$(pwd)
OUT=${OUT:-$ROOT/gpu-run-out}
mkdir -p "$OUT"
exec > >(tee "$OUT/gpu-run.log") 2>&1

# build trees hold absolute paths under /work/main
if [ ! -e /work/main ]; then
  mkdir -p /work && ln -s "$ROOT" /work/main && echo "linked /work/main -> $ROOT"
fi
case "$BUILD" in /*) ;; *) BUILD=$ROOT/$BUILD ;; esac
if [ ! -d "$BUILD" ]; then
  echo "gpu-run.sh: build folder $BUILD not found (carry it; see the comment at the top)"
  exit 2
fi
export LD_LIBRARY_PATH=$BUILD${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-PASSIVE}

STEPS=() RCS=()
step() { # step NAME RC
  STEPS+=("$1") RCS+=("$2")
  echo "=== step $1: exit status $2"
}

echo "=== gpu-run.sh $(date -u +%Y-%m-%dT%H:%M:%SZ) root=$ROOT build=$BUILD out=$OUT"
echo "=== nvidia-smi"
nvidia-smi; step nvidia-smi $?
nvcc --version 2>/dev/null | tail -2
echo "CPUs: $(nproc)"

# ---- tests with the cuda label ----
if [ $CTEST = 1 ]; then
  echo "=== ctest -L cuda"
  (cd "$BUILD" && timeout "${CTEST_TIMEOUT:-3600}" ctest -L cuda --output-on-failure); step ctest-cuda $?
fi

# ---- compute-sanitizer on the cuda test binaries (and a small run of the benchmark, memcheck only) ----
BENCH=$BUILD/bench/pkrylov-bench-gpu
if [ $SANITIZE = 1 ]; then
  SLOG=$OUT/sanitizer.log
  STIME=${SANITIZER_TIMEOUT:-900} # seconds per binary and tool
  : > "$SLOG"
  mapfile -t TBINS < <(find "$BUILD/tests" -maxdepth 1 -type f -executable \
                            -name 't[0-9][0-9][0-9]-*cuda*' | sort)
  echo "=== compute-sanitizer on ${#TBINS[@]} cuda test binaries (log: sanitizer.log)"
  # Each case runs on its own (the binaries take a case name; --list prints them). memcheck runs every case;
  # the case that provokes an out-of-memory cudaMalloc on purpose runs with --report-api-errors no.
  # racecheck is slow: it runs the kernel tests and the small cases of the solver tests (RACECHECK_CASES).
  RACE_CASES=${RACECHECK_CASES:-"apply_matches_cpu device_pointers_and_reproducibility outcomes_match_cpu"}
  for tool in memcheck racecheck; do
    rc_all=0
    for t in "${TBINS[@]}"; do
      for c in $("$t" --list); do
        if [ $tool = racecheck ] && [[ $(basename "$t") != *kernels* ]] && [[ " $RACE_CASES " != *" $c "* ]]; then
          continue
        fi
        extra=()
        [ "$c" = bad_device_input ] && extra=(--report-api-errors no)
        echo "--- $tool $(basename "$t") $c" >> "$SLOG"
        timeout "$STIME" compute-sanitizer --tool $tool --error-exitcode 99 "${extra[@]}" "$t" "$c" >> "$SLOG" 2>&1
        rc=$?
        [ $rc = 77 ] && rc=0 # skipped (no device)
        echo "--- $tool $(basename "$t") $c: exit status $rc" | tee -a "$SLOG"
        [ $rc != 0 ] && rc_all=$rc
      done
    done
    step "sanitizer-$tool" $rc_all
  done
  if [ -x "$BENCH" ]; then
    echo "--- memcheck pkrylov-bench-gpu (small problems)" >> "$SLOG"
    timeout "$STIME" compute-sanitizer --tool memcheck --error-exitcode 99 "$BENCH" \
      --problems ts:32x32x32,lap:16 --no-cpu --iters 2 --repeat 1 --maxit 50 >> "$SLOG" 2>&1
    rc=$?
    echo "--- memcheck pkrylov-bench-gpu: exit status $rc" | tee -a "$SLOG"
    step sanitizer-memcheck-bench $rc
  fi
fi

# ---- the GPU benchmark ----
if [ -x "$BENCH" ]; then
  MARGS=()
  [ -d "$BUILD/shared/matrices" ] && MARGS=(--matrices "$BUILD/shared/matrices")
  echo "=== pkrylov-bench-gpu ${MARGS[*]} ${BENCH_ARGS[*]}"
  set -o pipefail
  "$BENCH" "${MARGS[@]}" --json "$OUT/bench-gpu.json" "${BENCH_ARGS[@]}" 2>&1 | tee "$OUT/bench-gpu.log"
  step bench-gpu $?
  set +o pipefail
  if [ $PLOT = 1 ] && [ -f "$OUT/bench-gpu.json" ]; then
    python3 "$ROOT/apps/pkrylov-plot.py" "$OUT/bench-gpu.json" -o "$OUT/bench-gpu.png"; step plot $?
  fi
else
  echo "gpu-run.sh: $BENCH not built (configure with -DPKRYLOV_ENABLE_CUDA=ON)"
  step bench-gpu 2
fi

# ---- the BiCGStab / GMRES families on the GPU (pkrylov-bench-gpu-kry; its table goes to gpu-run.log) ----
KBENCH=$BUILD/bench/pkrylov-bench-gpu-kry
if [ $KRYBENCH = 1 ]; then
  if [ -x "$KBENCH" ]; then
    echo "=== pkrylov-bench-gpu-kry"
    "$KBENCH" --json "$OUT/bench-gpu-kry.json"; step bench-gpu-kry $?
  else
    step bench-gpu-kry 2
  fi
fi

# ---- the CPU benchmark on the GPU machine's CPUs ----
if [ $CPUBENCH = 1 ]; then
  if [ -x "$BUILD/bench/pkrylov-bench-cpu" ]; then
    echo "=== pkrylov-bench-cpu"
    set -o pipefail
    "$BUILD/bench/pkrylov-bench-cpu" --json "$OUT/bench-cpu-h100.json" 2>&1 | tee "$OUT/bench-cpu.log"
    step bench-cpu $?
    set +o pipefail
  else
    step bench-cpu 2
  fi
fi

echo "=== summary"
final=0
for i in "${!STEPS[@]}"; do
  printf '  %-28s %s\n' "${STEPS[$i]}" "${RCS[$i]}"
  [ "${RCS[$i]}" != 0 ] && [ $final = 0 ] && final=${RCS[$i]}
done
echo "files in $OUT: $(cd "$OUT" && ls | tr '\n' ' ')"
exit $final

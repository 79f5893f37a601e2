#!/usr/bin/env bash
# legacy-gpu.sh: the legacy examples nwp_pressure and mitgcm_style (legacy_examples/) at a realistic size,
# each version timed in the same run: the model's own hand-written PCG (serial Fortran, one core), pkrylov
# on the CPU backend (OpenMP, all cores, then one thread) and pkrylov with PKRYLOV_BACKEND_AUTO, which is
# CUDA on a GPU machine. Prints one table; every program prints its own iteration counts and a `timing:`
# line (legacy_examples/legacy_bench.f90: mean seconds per solve over the steps after the first, seconds per
# iteration), and the final solutions of the pkrylov runs are compared with the hand-written one.
#
#   bash bench/legacy-gpu.sh [BUNDLE]            run (BUNDLE default build-legacy-gpu)
#   bash bench/legacy-gpu.sh --bundle BUILD [BUNDLE]   make the bundle from a build tree
#
# The GPU machines have no Fortran compiler, so the programs are built on the development machine and
# carried: build a tree with CUDA and Fortran, then bundle the four programs and the two pkrylov libraries
# (the build tree's run paths point to absolute paths that do not exist there; this script sets
# LD_LIBRARY_PATH to BUNDLE/lib and the CUDA runtime's folder instead). libgfortran, OpenBLAS/LAPACK and
# libcudart come from the GPU machine.
#
#   cmake -S . -B build-gpu -DCMAKE_BUILD_TYPE=Release -DPKRYLOV_ENABLE_CUDA=ON \
#         -DCMAKE_CUDA_ARCHITECTURES=90 -DPKRYLOV_BUILD_TESTS=OFF -DPKRYLOV_BUILD_BENCH=OFF
#   cmake --build build-gpu -j2 --target nwp_pressure_before nwp_pressure_after \
#         mitgcm_style_before mitgcm_style_after
#   bash bench/legacy-gpu.sh --bundle build-gpu build-legacy-gpu      # about 9 MiB, this script included
#
# then, with the device tool: run(command="bash build-legacy-gpu/legacy-gpu.sh build-legacy-gpu",
# carry=["build-legacy-gpu"]). The tool sends the checkout its session started in (for a helper in another
# worktree that is not its own), so the bundle must be an ignored folder of that checkout (build* is).
# Sizes (arguments after the output file, see each program's header) from the environment:
#   NWP_ARGS  default "256 256 32 3 1e-6"   (nx ny nz steps rtol)
#   MIT_ARGS  default "256 256 30 3"        (sNx sNy Nr steps)
# Results go to stdout and, when $OUT is set (the device tool's folder), to $OUT/legacy-gpu.log.
set -u

if [ "${1:-}" = "--bundle" ]; then
  BUILD=${2:?usage: legacy-gpu.sh --bundle BUILD [BUNDLE]}
  BUNDLE=${3:-build-legacy-gpu}
  rm -rf "$BUNDLE" && mkdir -p "$BUNDLE/bin" "$BUNDLE/lib" || exit 2
  for ex in nwp_pressure mitgcm_style; do
    for v in before after; do
      cp "$BUILD/legacy_examples/$ex/${ex}_$v" "$BUNDLE/bin/" || exit 2
    done
  done
  # the real files under their sonames (what the programs ask for)
  for lib in libpkrylov libpkrylov_fortran; do
    cp -L "$BUILD/$lib.so.0" "$BUNDLE/lib/$lib.so.0" || exit 2
  done
  cp "$0" "$BUNDLE/legacy-gpu.sh" || exit 2
  du -sh "$BUNDLE"
  exit 0
fi

BUNDLE=${1:-build-legacy-gpu}
NWP_ARGS=${NWP_ARGS:-256 256 32 3 1e-6}
MIT_ARGS=${MIT_ARGS:-256 256 30 3}
RUN_TIMEOUT=${RUN_TIMEOUT:-150}
if [ -n "${OUT:-}" ]; then
  mkdir -p "$OUT"
  exec > >(tee "$OUT/legacy-gpu.log") 2>&1
fi
if [ ! -x "$BUNDLE/bin/nwp_pressure_after" ]; then
  echo "legacy-gpu.sh: $BUNDLE/bin/nwp_pressure_after not found (make the bundle: see the top of this script)"
  exit 2
fi
BUNDLE=$(cd "$BUNDLE" && pwd)
for d in /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib; do
  [ -d "$d" ] && CUDALIB=${CUDALIB:-$d}
done
export LD_LIBRARY_PATH="$BUNDLE/lib${CUDALIB:+:$CUDALIB}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
NCORES=$(nproc)
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT

echo "=== legacy-gpu.sh $(date -u +%Y-%m-%dT%H:%M:%SZ)"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null || echo "no nvidia-smi"
echo "CPU: $NCORES cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//')"
missing=$(ldd "$BUNDLE/bin/nwp_pressure_after" | grep 'not found')
if [ -n "$missing" ]; then
  echo "legacy-gpu.sh: missing libraries:"; echo "$missing"; exit 2
fi

# run NAME EXE OUTFILE ARGS... with the environment given before it; keeps the timing line in $WORK/NAME.t
run() {
  local name=$1; shift
  echo "--- $name: $* ($(env | grep -E '^(OMP_NUM_THREADS|PKRYLOV_LEGACY_BACKEND)=' | tr '\n' ' '))"
  timeout "$RUN_TIMEOUT" "$@" > "$WORK/$name.log" 2>&1
  local st=$?
  cat "$WORK/$name.log"
  grep '^timing:' "$WORK/$name.log" > "$WORK/$name.t" || true
  [ $st -eq 0 ] || echo "--- $name: exit status $st"
}

# the relative 2-norm difference of the final solutions in two output files (2 header lines, then values)
reldiff() {
  python3 - "$1" "$2" <<'EOF'
import sys, math
def load(p):
    with open(p) as f:
        toks = f.read().split()
    ns, n = int(toks[0]), int(toks[1])
    return [float(t) for t in toks[2 + ns:2 + ns + n]]
a, b = load(sys.argv[1]), load(sys.argv[2])
d = math.sqrt(sum((x - y) ** 2 for x, y in zip(a, b)))
print("%.1e" % (d / max(math.sqrt(sum(x * x for x in a)), 1e-300)))
EOF
}

for ex in nwp_pressure mitgcm_style; do
  if [ $ex = nwp_pressure ]; then args=$NWP_ARGS; else args=$MIT_ARGS; fi
  B=$BUNDLE/bin/${ex}_before A=$BUNDLE/bin/${ex}_after
  # shellcheck disable=SC2086
  {
    OMP_NUM_THREADS=1 run ${ex}_own "$B" "$WORK/${ex}_own.out" $args
    OMP_NUM_THREADS=$NCORES PKRYLOV_LEGACY_BACKEND=cpu run ${ex}_cpu "$A" "$WORK/${ex}_cpu.out" $args
    OMP_NUM_THREADS=1 PKRYLOV_LEGACY_BACKEND=cpu run ${ex}_cpu1 "$A" "$WORK/${ex}_cpu1.out" $args
    OMP_NUM_THREADS=$NCORES PKRYLOV_LEGACY_BACKEND=auto run ${ex}_auto "$A" "$WORK/${ex}_auto.out" $args
  }
done

echo
echo "=== legacy examples: seconds per solve (mean over the steps after the first) and ratios to the"
echo "    hand-written solver (serial Fortran, one core) of the same run; same grid, same steps"
printf '%-13s %-12s %-22s %7s %6s %11s %11s %9s %10s\n' example grid version threads iters s/solve s/iter speedup "rel.diff"
for ex in nwp_pressure mitgcm_style; do
  own=$(awk '{for(i=1;i<=NF;i++) if($i=="per_solve_after_first_s") print $(i+1)}' "$WORK/${ex}_own.t" 2>/dev/null)
  for v in own cpu cpu1 auto; do
    t=$WORK/${ex}_$v.t
    [ -s "$t" ] || { printf '%-13s %-12s %-22s (no timing: see the log above)\n' $ex - $v; continue; }
    read -r label grid iters psolve piter < <(awk '{for(i=1;i<=NF;i++){if($i=="grid")g=$(i+1);
      if($i=="iterations")it=$(i+1); if($i=="per_solve_after_first_s")ps=$(i+1);
      if($i=="per_iteration_s")pi=$(i+1)}; print $2, g, it, ps, pi}' "$t")
    case $v in own) thr=1 ;; cpu1) thr=1 ;; *) thr=$NCORES ;; esac
    [ "$label" = pkrylov-cuda ] && thr=gpu
    diff=-
    [ $v != own ] && [ -s "$WORK/${ex}_$v.out" ] && diff=$(reldiff "$WORK/${ex}_own.out" "$WORK/${ex}_$v.out")
    speed=$(awk -v a="$own" -v b="$psolve" 'BEGIN{ if (a > 0 && b > 0) printf "%.1f", a / b; else print "-" }')
    printf '%-13s %-12s %-22s %7s %6s %11.4e %11.4e %9s %10s\n' $ex "$grid" "$label" $thr "$iters" \
      "$psolve" "$piter" "$speed" "$diff"
  done
done

#!/usr/bin/env bash
# Run the libFuzzer harnesses of tests/fuzz (built with Clang and -DPKRYLOV_BUILD_FUZZERS=ON, see README.md):
#   tests/fuzz/run.sh BUILD_DIR [SECONDS [NAME...]]
# Each harness (NAME: mtx, dcg, dfgmres, rci; default all) runs SECONDS (default 30) on a working corpus in
# BUILD_DIR/fuzz-corpus/NAME (new inputs go there) seeded with the checked-in tests/fuzz/corpus/NAME, which
# it does not modify; a crash, a leak, a timeout (10 s per input) or more than 2 GB of memory leaves the
# input in BUILD_DIR/fuzz-artifacts/NAME/ and makes the script fail.
set -uo pipefail
build=${1:?usage: tests/fuzz/run.sh BUILD_DIR [SECONDS [NAME...]]}
secs=${2:-30}
shift $(($# < 2 ? $# : 2))
names=${*:-mtx dcg dfgmres rci}
here=$(cd "$(dirname "$0")" && pwd)
status=0
for h in $names; do
  exe=$build/tests/fuzz/pkrylov-fuzz-$h
  if [ ! -x "$exe" ]; then
    echo "run.sh: $exe is missing (configure with CC=clang, build the target pkrylov_fuzzers)" >&2
    exit 2
  fi
  mkdir -p "$build/fuzz-corpus/$h" "$build/fuzz-artifacts/$h"
  dict=()
  [ -f "$here/$h.dict" ] && dict=(-dict="$here/$h.dict")
  echo "== fuzz $h: $secs s"
  if ! "$exe" "${dict[@]}" -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
      -artifact_prefix="$build/fuzz-artifacts/$h/" "$build/fuzz-corpus/$h" "$here/corpus/$h"; then
    echo "run.sh: pkrylov-fuzz-$h found a problem: the input is in $build/fuzz-artifacts/$h/" >&2
    status=1
  fi
done
exit $status

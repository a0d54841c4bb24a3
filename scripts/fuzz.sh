#!/usr/bin/env bash
# Builds the libFuzzer targets (tests/fuzz) with Debian's clang, AddressSanitizer and
# UndefinedBehaviorSanitizer, and runs each for a while. Not part of CTest: CTest replays
# tests/fuzz/corpus through the same targets in the ordinary build (fuzz_corpus_*).
#
#   scripts/fuzz.sh                  every target, 600 s each (the issue's 10 minutes)
#   scripts/fuzz.sh 60 config trace  60 s each, only these targets
#
# Targets: PPSTAGE_FUZZ_TARGETS of cmake/ppstage_fuzz_targets.cmake.
# New inputs go to build-fuzz/corpus/<target> (seeded from tests/fuzz/corpus/<target>); a
# finding is written to build-fuzz/findings/<target>/ (crash-*, leak-*, timeout-*, oom-*)
# and the run of that target fails. Fix it, then copy the input into
# tests/fuzz/corpus/<target>/ so that CTest replays it from then on. Each input must finish
# within 10 s and 4 GB. Prints one line per target and exits non-zero when any found
# something.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-600}
shift || true
targets=("$@")
if ((${#targets[@]} == 0)); then
  read -r -a targets <<< "$(sed -n 's/^set(PPSTAGE_FUZZ_TARGETS \(.*\))$/\1/p' \
    cmake/ppstage_fuzz_targets.cmake)"
fi

PPSTAGE_FUZZ_DEPS=1 scripts/install-deps.sh
if [[ ! -f build-fuzz/CMakeCache.txt ]]; then
  CXX=clang++ cmake -S tests/fuzz -B build-fuzz > /dev/null
fi
cmake --build build-fuzz -j2 --target "${targets[@]/%/_fuzzer}" > /dev/null

status=0
for target in "${targets[@]}"; do
  corpus=build-fuzz/corpus/$target findings=build-fuzz/findings/$target
  mkdir -p "$corpus" "$findings"
  log=build-fuzz/$target.log
  code=0
  # One intra-op thread: LibTorch's pool would otherwise hold a thread per core.
  OMP_NUM_THREADS=1 "build-fuzz/${target}_fuzzer" -max_total_time="$seconds" -timeout=10 \
    -rss_limit_mb=4096 -artifact_prefix="$findings/" -print_final_stats=1 \
    "$corpus" "tests/fuzz/corpus/$target" > "$log" 2>&1 || code=$?
  runs=$(grep -m1 -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' || echo "?")
  if ((code == 0)); then
    echo "ok   $target: $runs inputs in ${seconds} s, corpus $(ls "$corpus" | wc -l) inputs"
  else
    echo "FAIL $target (exit $code): $(grep -m1 -E 'ERROR|runtime error|property violated' "$log" || tail -1 "$log")"
    echo "     input: $(ls -t "$findings" | head -1), log: $log"
    status=1
  fi
done
exit "$status"

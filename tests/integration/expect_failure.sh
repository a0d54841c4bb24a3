#!/usr/bin/env bash
# expect_failure.sh SECONDS PATTERN -- COMMAND...
# Passes when COMMAND fails (non-zero exit) within SECONDS, without hanging, and its output
# contains PATTERN (a grep -E pattern).
set -u
seconds=$1 pattern=$2
shift 3
output=$(timeout "$seconds" "$@" 2>&1)
code=$?
echo "$output"
if [[ $code -eq 0 ]]; then echo "expect_failure: the command succeeded"; exit 1; fi
if [[ $code -eq 124 ]]; then echo "expect_failure: still running after ${seconds}s (a hang)"; exit 1; fi
if ! grep -Eq -- "$pattern" <<<"$output"; then echo "expect_failure: no '$pattern' in the output"; exit 1; fi
echo "expect_failure: failed as expected (exit $code)"

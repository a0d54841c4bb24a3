#!/usr/bin/env bash
# The style checks CI runs (through CTest's `style` test): every tracked C++ file is
# formatted as .clang-format says (Debian's clang-format 14), no function in src/ or
# schedules/ is over 60 lines, no file over 600 (scripts/check_sizes.py), and every folder
# includes only the folders below it in the data flow (scripts/check_includes.py).
#   scripts/check-style.sh          check; exits 1 naming what is off
#   scripts/check-style.sh --fix    format the files in place first
# Exits 77 (CTest's skip) when clang-format is not installed.
set -euo pipefail
cd "$(dirname "$0")/.."

if ! command -v clang-format >/dev/null; then
  echo "check-style: clang-format is not installed (apt-get install clang-format); skipped"
  exit 77
fi
mapfile -t files < <(git ls-files "*.cpp" "*.h" 2>/dev/null)
if ((${#files[@]} == 0)); then  # not a git checkout
  mapfile -t files < <(find src include schedules tests -name '*.cpp' -o -name '*.h' | sort)
fi
if [[ "${1:-}" == --fix ]]; then
  clang-format -i "${files[@]}"
fi
status=0
if ! clang-format --dry-run --Werror "${files[@]}"; then
  echo "check-style: run scripts/check-style.sh --fix to format the files above"
  status=1
fi
if command -v python3 >/dev/null; then
  python3 scripts/check_sizes.py src schedules || status=1
  python3 scripts/check_includes.py || status=1
else
  echo "check-style: no python3; function and file sizes and includes not checked"
fi
if ((status == 0)); then echo "check-style: ${#files[@]} files formatted, sizes within limits, includes downward"; fi
exit $status

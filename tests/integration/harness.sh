# Sourced by every integration script (`source "$(dirname "$0")/harness.sh"`), the one copy
# of what each needs:
#   - strict mode (set -euo pipefail);
#   - $work, a fresh directory removed on exit;
#   - failed=0, `fail MESSAGE` (prints "FAIL: MESSAGE" and sets failed=1);
#   - `ppstage_under_mpi PPSTAGE "MPIEXEC ARGS"`: sets $ppstage and the array $mpiexec from
#     the two arguments CTest passes to the scripts that run ppstage;
#   - `compare_runs NAME REFERENCE.json CANDIDATE.json [compare-runs options]`: prints
#     "ok      NAME: <losses>; <parameters>", or "DIFFERS NAME" and the report and sets
#     failed=1; returns compare-runs' status.
# A script that skips exits 77 (CTest's SKIP_RETURN_CODE for these tests).
set -euo pipefail
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
failed=0

fail() {
  echo "FAIL: $*"
  failed=1
}

ppstage_under_mpi() {
  ppstage=$1
  read -r -a mpiexec <<< "$2"
}

compare_runs() {
  local name=$1 reference=$2 candidate=$3 out
  shift 3
  if out=$("$ppstage" compare-runs --reference "$reference" --candidate "$candidate" "$@" 2>&1); then
    echo "ok      $name: $(sed -n 's/^losses *//p' <<< "$out"); $(sed -n 's/^parameters *//p' <<< "$out")"
  else
    echo "DIFFERS $name"
    echo "$out"
    failed=1
    return 1
  fi
}

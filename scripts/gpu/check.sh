#!/usr/bin/env bash
# The GPU check (issue 44), one command on a machine with an NVIDIA GPU and PyTorch
# 2.11.0+cu130, run from the repository root after scripts/gpu/pack.sh made .gpu/ here:
#   1. tests/gpu: two stages on two ranks sharing cuda:0 against one stage on it and against
#      the CPU; four stages on one rank's GPU in compile modes none, stage and block against
#      one stage (1e-5, fp32; fusion groups > 0 in stage and block); FusedAdamW on CUDA; the
#      caching allocator's figures; a file written from CUDA tensors loaded on the CPU; the
#      NCCL self-tests.
#   2. the packed ppstage binary under the packed mpirun (scripts/gpu/check_runs.py):
#      gpt-small with four stages on one rank in none, stage and block and with two ranks on
#      one GPU over host-staged MPI, against one stage on it; the measured step against the
#      one predicted from CUDA event times; compare-compile on two ranks; then the MFU
#      table of a 350M GPT (ppstage in three compile modes, PyTorch eager and
#      torch.compile: scripts/gpu/mfu_peer.py).
# Deterministic algorithms, TF32 off (the tests set them) and CUBLAS_WORKSPACE_CONFIG.
# GPU_PACK names another pack than .gpu; PEAK_TFLOPS the device's dense bf16 peak for MFU
# (default 790, issue 44's figure for the H200); PEER_WAYS the PyTorch peers (default
# eager,compile; the CTest rehearsal leaves out compile, whose inductor takes minutes on a
# CPU). Writes device.txt, gpu_tests.xml,
# gpu_tests.log, runs.log, runs.json and mfu.md to $OUT (else the pack's out/) and ends with
# one line: "N passed, N failed, N skipped". Exit 0 only when none failed. Its parts are cut
# short at 130 s (tests/gpu) and 270 s (the runs), so it ends within 7 minutes.
#
#   device tool:    run(command="bash scripts/gpu/check.sh", carry=[".gpu"], timeout_s=480)
#   CPU rehearsal:  PPSTAGE_GPU_REHEARSAL=1 PYTHON=scripts/python bash scripts/gpu/check.sh
# (the same runs with --train.device cpu, a tiny MFU model and no fusion asserted; the NCCL
# self-tests skip.)
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
pack=${GPU_PACK:-$root/.gpu}
[[ -x $pack/bin/gpu_tests ]] ||
  { echo "no $pack/bin/gpu_tests: run scripts/gpu/pack.sh first"; exit 2; }
out=${OUT:-$pack/out}
mkdir -p "$out"
python=${PYTHON:-python3}
# LibTorch, cuDNN, cuBLAS and NCCL from the machine's PyTorch wheel and its nvidia-* wheels.
wheel_libs=$("$python" - <<'PY'
import glob, os, torch
site = os.path.dirname(os.path.dirname(torch.__file__))
dirs = [os.path.join(os.path.dirname(torch.__file__), "lib")]
dirs += sorted(glob.glob(os.path.join(site, "nvidia", "*", "lib")))
print(":".join(dirs))
PY
) || { echo "no PyTorch for $python"; exit 2; }
export LD_LIBRARY_PATH="$pack/lib:$wheel_libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export CUBLAS_WORKSPACE_CONFIG=:4096:8
# The packed Open MPI, relocated (scripts/gpu/pack.sh). Shared memory without single-copy
# (CMA may be forbidden in a container), and no warning for the fabrics left out.
export OPAL_PREFIX=$pack/openmpi
export PMIX_MCA_mca_base_component_path=$pack/openmpi/pmix2/lib/pmix
export OMPI_MCA_btl=self,vader,tcp OMPI_MCA_pml=ob1 OMPI_MCA_btl_vader_single_copy_mechanism=none
export OMPI_MCA_btl_base_warn_component_unused=0
export OMPI_MCA_plm=isolated  # one host: no ssh/rsh launcher to look for
rehearsal=${PPSTAGE_GPU_REHEARSAL:-0}
device=cuda
[[ $rehearsal == 1 ]] && device=cpu
device_name=$("$python" -c 'import torch
print(torch.cuda.get_device_name(0) if torch.cuda.is_available() else "CPU (rehearsal)")')
{
  nvidia-smi -L 2>&1 || echo "no nvidia-smi"
  "$python" -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda,
                                     "devices", torch.cuda.device_count())'
} > "$out/device.txt"
cat "$out/device.txt"
start=$(date +%s)
timeout -k 10 120 "$pack/bin/gpu_tests" --gtest_output="xml:$out/gpu_tests.xml" \
  > "$out/gpu_tests.log" 2>&1
status=$?
tail -n 40 "$out/gpu_tests.log"
echo "tests/gpu: exit $status in $(( $(date +%s) - start )) s"
tests_line=$("$python" - "$out/gpu_tests.xml" "$status" <<'PY'
import sys, xml.etree.ElementTree as ET
path, status = sys.argv[1], int(sys.argv[2])
try:
    suites = ET.parse(path).getroot()
except (OSError, ET.ParseError) as e:
    print(f"0 1 0 no results: {e}; gpu_tests exit {status}")
    sys.exit(0)
cases = list(suites.iter("testcase"))
failed = sum(1 for c in cases if c.find("failure") is not None)
skipped = sum(1 for c in cases if c.find("skipped") is not None and c.find("failure") is None)
passed = len(cases) - failed - skipped
failed += status != 0 and failed == 0  # a crash after the XML
print(f"{passed} {failed} {skipped}")
PY
)
read -r tests_passed tests_failed tests_skipped _ <<< "$tests_line"
echo "tests/gpu: $tests_passed passed, $tests_failed failed, $tests_skipped skipped"

# The ppstage runs and the MFU table: 260 s of runs (check_runs.py cuts its own short) after
# at most 130 s of tests/gpu, so that the whole check stays under 7 minutes.
runs_flags=(--ppstage "$pack/bin/ppstage" --mpirun "$pack/openmpi/bin/mpirun" --python "$python"
            --device "$device" --out "$out" --peak_tflops "${PEAK_TFLOPS:-790}"
            --device_name "$device_name")
[[ $rehearsal == 1 ]] && runs_flags+=(--rehearsal)
[[ -n ${PEER_WAYS:-} ]] && runs_flags+=(--peer_ways "$PEER_WAYS")
start=$(date +%s)
rm -f "$out/runs.json"
timeout -k 10 280 "$python" "$root/scripts/gpu/check_runs.py" --budget_s 260 "${runs_flags[@]}"
runs_status=$?
echo "ppstage runs: exit $runs_status in $(( $(date +%s) - start )) s"
counts=$("$python" - "$out/runs.json" "$runs_status" <<'PY'
import json, sys
status = int(sys.argv[2])
try:
    checks = json.load(open(sys.argv[1]))["checks"]
except (OSError, ValueError, KeyError):
    print(0, 1, 0)  # no results: the runs crashed or ran out of time
    sys.exit(0)
failed = sum(1 for c in checks if c["passed"] is False)
skipped = sum(1 for c in checks if c["passed"] is None)
failed += status != 0 and failed == 0  # cut short after its last check
print(len(checks) - failed - skipped, failed, skipped)
PY
)
read -r runs_passed runs_failed runs_skipped <<< "$counts"
failed=$(( tests_failed + runs_failed ))
skipped=$(( tests_skipped + runs_skipped ))
echo "$(( tests_passed + runs_passed )) passed, $failed failed, $skipped skipped"
(( failed == 0 ))

#!/usr/bin/env bash
# The GPU check (issue 44), one command on a machine with an NVIDIA GPU and PyTorch
# 2.11.0+cu130, run from the repository root after scripts/gpu/pack.sh made .gpu/ here:
#   - tests/gpu: two stages on two ranks sharing cuda:0 against one stage on it and against
#     the CPU; four stages on one rank's GPU in compile modes none, stage and block against
#     one stage (1e-5, fp32; fusion groups > 0 in stage and block); FusedAdamW on CUDA; a
#     file written from CUDA tensors loaded on the CPU; the NCCL self-tests.
# Deterministic algorithms, TF32 off (the tests set them) and CUBLAS_WORKSPACE_CONFIG.
# GPU_PACK names another pack than .gpu. Writes device.txt, gpu_tests.xml and
# gpu_tests.log to $OUT (else the pack's out/) and ends with
# one line: "N passed, N failed, N skipped". Exit 0 only when none failed.
#
#   device tool:    run(command="bash scripts/gpu/check.sh", carry=[".gpu"], timeout_s=420)
#   CPU rehearsal:  PPSTAGE_GPU_REHEARSAL=1 PYTHON=scripts/python bash scripts/gpu/check.sh
# (the same runs with --train.device cpu and no fusion asserted; the NCCL self-tests skip.)
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
pack=${GPU_PACK:-$root/.gpu}
[[ -x $pack/bin/gpu_tests ]] || { echo "no $pack/bin/gpu_tests: run scripts/gpu/pack.sh first"; exit 2; }
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
{ nvidia-smi -L 2>&1 || echo "no nvidia-smi"; "$python" -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda, "devices", torch.cuda.device_count())'; } > "$out/device.txt"
cat "$out/device.txt"
start=$(date +%s)
timeout 400 "$pack/bin/gpu_tests" --gtest_output="xml:$out/gpu_tests.xml" > "$out/gpu_tests.log" 2>&1
status=$?
tail -n 40 "$out/gpu_tests.log"
echo "tests/gpu: exit $status in $(( $(date +%s) - start )) s"
"$python" - "$out/gpu_tests.xml" "$status" <<'PY'
import sys, xml.etree.ElementTree as ET
path, status = sys.argv[1], int(sys.argv[2])
try:
    suites = ET.parse(path).getroot()
except (OSError, ET.ParseError) as e:
    print(f"0 passed, 1 failed, 0 skipped (no results: {e}; gpu_tests exit {status})")
    sys.exit(1)
cases = list(suites.iter("testcase"))
failed = sum(1 for c in cases if c.find("failure") is not None)
skipped = sum(1 for c in cases if c.find("skipped") is not None and c.find("failure") is None)
passed = len(cases) - failed - skipped
failed += status != 0 and failed == 0  # a crash after the XML
print(f"{passed} passed, {failed} failed, {skipped} skipped")
sys.exit(1 if failed else 0)
PY

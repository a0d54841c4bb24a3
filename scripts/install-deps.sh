#!/usr/bin/env bash
# Installs whatever ppstage needs that this machine lacks:
#  - from Debian's apt: the compiler, CMake, Open MPI, Boost, GoogleTest, nlohmann-json,
#    OpenSSL, zlib and the tools the tests use;
#  - from PyPI: LibTorch, as the torch==2.11.0 wheel, with the matching torchvision and NumPy,
#    into one Python virtual environment outside the clone that every clone on the machine
#    shares. CMake finds it there (cmake/ppstage_libtorch.cmake). PyPI's default 2.11.0 is the
#    CUDA 13.0 build: about 2.7 GB of downloads with its nvidia-* wheels, once per machine.
# Idempotent: apt is not touched when no package is missing, and a complete environment is
# reused as it is.
#   PPSTAGE_VENV    the environment (default: ~/.cache/ppstage/torch-2.11.0; scripts/torch-env.sh)
#   PPSTAGE_BASE_PYTHON  the Python that creates it (default: python3)
set -euo pipefail

die() {
  echo "install-deps: error: $*" >&2
  exit 1
}

packages=(
  g++ cmake ccache
  libopenmpi-dev openmpi-bin
  libboost-program-options-dev
  libgtest-dev
  nlohmann-json3-dev
  libssl-dev              # OpenSSL's libcrypto: SHA-256 of checkpoint files
  zlib1g-dev              # gzipped IDX files (dataset-fashion-mnist)
  clang-format            # scripts/check-style.sh (CTest's `style` test)
  librsvg2-bin            # rsvg-convert: the timeline test renders the SVGs to PNG
  libxml2-utils           # xmllint: the same test parses them as XML
  libprotobuf-dev protobuf-compiler  # TensorBoard event files (--output.tensorboard)
)
# Only the fuzzer (tests/fuzz) needs clang and libFuzzer; ask with PPSTAGE_FUZZ_DEPS=1.
if [[ "${PPSTAGE_FUZZ_DEPS:-0}" == 1 ]]; then
  packages+=(clang libclang-rt-14-dev)
fi

# Installs those of its arguments (Debian package names) that are missing.
install_apt_packages() {
  local missing=() p
  for p in "$@"; do
    if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q '^install ok installed'; then
      missing+=("$p")
    fi
  done
  if ((${#missing[@]} == 0)); then
    echo "install-deps: all $# Debian packages present"
    return
  fi
  echo "install-deps: installing ${missing[*]}"
  local sudo_cmd=()
  if [[ $(id -u) != 0 ]]; then sudo_cmd=(sudo); fi
  export DEBIAN_FRONTEND=noninteractive
  "${sudo_cmd[@]}" apt-get update -qq || die "apt-get update failed (no network to Debian's mirror?)"
  "${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null ||
    die "apt-get install ${missing[*]} failed"
}

# The environment's pinned contents. A new torch version makes a new environment beside the old.
source "$(dirname "$0")/torch-env.sh"
torch_version=$PPSTAGE_TORCH_VERSION
python_packages=(torch==$torch_version torchvision==0.26.0 numpy)
venv=$PPSTAGE_VENV
complete_mark=$venv/.ppstage-complete

install_torch_venv() {
  if [[ -f $complete_mark && "$(cat "$complete_mark")" == "${python_packages[*]}" ]]; then
    echo "install-deps: LibTorch $torch_version present in $venv"
    return
  fi
  local python=${PPSTAGE_BASE_PYTHON:-python3}
  command -v "$python" >/dev/null || die "no $python to create $venv with (set PPSTAGE_BASE_PYTHON)"
  if ! "$python" -c 'import venv, ensurepip' 2>/dev/null; then
    install_apt_packages python3-venv
  fi
  mkdir -p "$(dirname "$venv")"
  "$python" -m venv "$venv" || die "$python -m venv $venv failed"
  local pip=("$venv/bin/python" -m pip --disable-pip-version-check)
  # One short question to the index first, so that a machine without PyPI gets one line.
  if ! "${pip[@]}" index versions torch --retries 1 --timeout 20 >/dev/null 2>&1; then
    die "PyPI cannot be reached to install ${python_packages[*]} into $venv," \
      "and no complete environment is there (set PPSTAGE_VENV to one that is)"
  fi
  echo "install-deps: downloading ${python_packages[*]} into $venv" \
    "(about 2.7 GB with torch's nvidia-* CUDA 13.0 wheels; once per machine)"
  "${pip[@]}" install --progress-bar on --no-cache-dir "${python_packages[@]}" ||
    die "pip install ${python_packages[*]} into $venv failed"
  "$venv/bin/python" -c 'import torch, torchvision' || die "the new environment $venv cannot import torch"
  echo "${python_packages[*]}" >"$complete_mark"
  echo "install-deps: LibTorch $torch_version installed in $venv ($(du -sh "$venv" | cut -f1))"
}

# TensorBoard's own reader, for the live_metrics test: optional (about 30 MB); without it
# that test checks the JSON lines only and the unit test decodes the event files.
install_tensorboard_reader() {
  if "$venv/bin/python" -c 'import tensorboard' 2>/dev/null; then return; fi
  echo "install-deps: installing tensorboard into $venv (optional: TensorBoard's reader for a test)"
  "$venv/bin/python" -m pip --disable-pip-version-check install -q --no-cache-dir tensorboard ||
    echo "install-deps: tensorboard not installed; the live_metrics test skips TensorBoard's reader"
}

install_apt_packages "${packages[@]}"
install_torch_venv
install_tensorboard_reader

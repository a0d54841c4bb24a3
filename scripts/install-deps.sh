#!/usr/bin/env bash
# Installs, from Debian's apt only, whatever ppstage needs that this machine lacks.
# Idempotent: packages already present are left alone and apt is not touched at all
# when nothing is missing.
set -euo pipefail

packages=(
  g++ cmake ccache
  libtorch-dev            # LibTorch 1.13 (CPU)
  libopenblas0-pthread    # without it LibTorch uses the reference BLAS (~10x slower)
  libopenmpi-dev openmpi-bin
  libboost-program-options-dev
  libgtest-dev
  nlohmann-json3-dev
  libssl-dev              # OpenSSL's libcrypto: SHA-256 of checkpoint files
  zlib1g-dev              # gzipped IDX files (dataset-fashion-mnist)
  clang-format            # scripts/check-style.sh (CTest's `style` test)
  librsvg2-bin            # rsvg-convert: the timeline test renders the SVGs to PNG
  libxml2-utils           # xmllint: the same test parses them as XML
)
# Only scripts/make_fixtures.py needs Python's torch; ask for it with PPSTAGE_FIXTURE_DEPS=1.
if [[ "${PPSTAGE_FIXTURE_DEPS:-0}" == 1 ]]; then
  packages+=(python3-torch)
fi
# Only the fuzzer (tests/fuzz) needs clang and libFuzzer; ask with PPSTAGE_FUZZ_DEPS=1.
if [[ "${PPSTAGE_FUZZ_DEPS:-0}" == 1 ]]; then
  packages+=(clang libclang-rt-14-dev)
fi

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q '^install ok installed'; then
    missing+=("$p")
  fi
done

if ((${#missing[@]} == 0)); then
  echo "install-deps: all ${#packages[@]} packages present"
  exit 0
fi

echo "install-deps: installing ${missing[*]}"
sudo_cmd=()
if [[ $(id -u) != 0 ]]; then sudo_cmd=(sudo); fi
export DEBIAN_FRONTEND=noninteractive
"${sudo_cmd[@]}" apt-get update -qq
"${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
echo "install-deps: done"

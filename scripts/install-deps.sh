#!/usr/bin/env bash
# Installs every Debian package fib needs to build and test. Safe to run repeatedly:
# it only calls apt-get when something is missing.
set -euo pipefail

packages=(
  build-essential cmake ninja-build pkg-config git
  clang clang-format clang-tidy libclang-rt-14-dev   # fuzzing (libFuzzer) and formatting
  nlohmann-json3-dev   # JSON
  libcli11-dev         # command-line parsing
  libfmt-dev           # formatting
  libyaml-cpp-dev      # eval config files
  libxxhash-dev        # fast content hashing
  libssl-dev           # SHA-256 for content addressing
  libcpp-httplib-dev   # fib serve
  libsqlite3-dev       # fib serve's task store
  libopenmpi-dev openmpi-bin  # fib run over MPI ranks (optional at build time; docs/mpi.md)
  libgtest-dev libgmock-dev googletest
  libbenchmark-dev
  python3
  python3-pip          # installs apache-tvm-ffi and pydantic (PyPI) below
  python3-torch        # runs definitions' PyTorch references in the parity tests
  python3-dev          # libpython3.x.so, which fib's worker embeds for Python solutions
  libtorch-dev pybind11-dev  # torch/extension.h: solutions of binding torch (PyTorch extensions)
  bubblewrap           # the solution workers' sandbox (fib run --sandbox)
  libseccomp-dev       # the workers' seccomp filter (bench/worker/hardening.cpp)
  zlib1g-dev           # fib serve gzips its API answers
  libjs-chart.js libjs-highlight.js  # the web interface's charts and code (served at /vendor/)
  chromium chromium-driver python3-selenium  # the web interface's browser test
)

# tvm-ffi's headers and libtvm_ffi.so, for solutions of binding "tvm-ffi" (upstream's default):
# PyPI is where they are published. CMake asks this python3 where the package is.
TVM_FFI_VERSION=0.1.15.post2

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#packages[@]} packages present"
else
  echo "install-deps: installing ${missing[*]}"
  SUDO=""
  if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

if python3 -c "import tvm_ffi" 2>/dev/null; then
  echo "install-deps: apache-tvm-ffi present"
else
  echo "install-deps: installing apache-tvm-ffi==${TVM_FFI_VERSION} (pip)"
  # A Debian python3 refuses system-wide pip installs (PEP 668) unless told otherwise.
  python3 -m pip install --quiet "apache-tvm-ffi==${TVM_FFI_VERSION}" ||
    python3 -m pip install --quiet --break-system-packages "apache-tvm-ffi==${TVM_FFI_VERSION}"
fi

# Upstream flashinfer-bench's source at a pinned commit and pydantic 2, for the test that loads
# what fib ships and writes with upstream's own data models (cached outside the repository; the
# test skips, saying why, where they cannot be had).
if upstream=$(bash "$(dirname "$0")/upstream-models.sh"); then
  echo "install-deps: upstream flashinfer-bench models in $upstream"
else
  echo "install-deps: upstream flashinfer-bench not available; its compatibility test will skip"
fi
